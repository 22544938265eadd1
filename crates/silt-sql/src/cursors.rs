//! Server-side cursors: `DECLARE name [BINARY] [NO SCROLL] CURSOR [WITH |
//! WITHOUT HOLD] FOR query`, `FETCH [FORWARD] [n | ALL | NEXT] [FROM | IN]
//! name`, `CLOSE name | ALL` (what psycopg's named cursors send). A cursor
//! is the query's result stream, read as far as the fetches ask: a large
//! result is never held whole. Cursors belong to a session; one without
//! `HOLD` ends with the transaction block it was declared in (and needs
//! one), one `WITH HOLD` lives until it is closed or the session ends.
//! Cursors move forward only.

use std::collections::HashMap;
use std::sync::Arc;

use datafusion::arrow::datatypes::SchemaRef;
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::execution::SendableRecordBatchStream;
use datafusion::sql::sqlparser::ast::{
    CloseCursor, Declare, FetchDirection, Query, Value as SqlValue,
};
use futures::StreamExt;

use crate::ddl::{self, Parsed, ident};
use crate::error::SqlError;
use crate::session::SqlSession;

/// A session's cursors by name.
pub(crate) type Cursors = HashMap<String, Arc<Cursor>>;

/// An open cursor.
pub(crate) struct Cursor {
    pub(crate) hold: bool,
    schema: SchemaRef,
    /// The rows not fetched yet: a batch partly fetched, then the stream.
    rest: tokio::sync::Mutex<(Option<RecordBatch>, Option<SendableRecordBatchStream>)>,
}

/// A cursor statement.
#[derive(Debug, Clone)]
pub enum CursorStmt {
    Declare {
        name: String,
        hold: bool,
        query: Box<Query>,
    },
    /// `None`: every row left.
    Fetch { name: String, count: Option<u64> },
    /// `None`: `CLOSE ALL`.
    Close(Option<String>),
}

fn count_of(v: &SqlValue) -> Result<u64, SqlError> {
    match v {
        SqlValue::Number(n, _) => n
            .parse()
            .map_err(|_| SqlError::Invalid(format!("FETCH count `{n}` is not a row count"))),
        other => Err(SqlError::Invalid(format!(
            "FETCH count `{other}` is not a row count"
        ))),
    }
}

pub fn parse_declare(stmts: &[Declare]) -> Result<Parsed, SqlError> {
    let [d] = stmts else {
        return Err(SqlError::Unsupported(
            "DECLARE of several cursors at once; declare each on its own".to_owned(),
        ));
    };
    let (Some(query), [name]) = (&d.for_query, d.names.as_slice()) else {
        return Err(SqlError::Unsupported(format!(
            "`{d}`: Silt declares cursors only (DECLARE name CURSOR FOR query)"
        )));
    };
    if d.scroll == Some(true) {
        return Err(SqlError::Unsupported(
            "SCROLL cursors; cursors move forward only (NO SCROLL)".to_owned(),
        ));
    }
    Ok(Parsed::Cursor(Box::new(CursorStmt::Declare {
        name: ident(name),
        hold: d.hold == Some(true),
        query: query.clone(),
    })))
}

pub fn parse_fetch(
    name: &datafusion::sql::sqlparser::ast::Ident,
    dir: &FetchDirection,
) -> Result<Parsed, SqlError> {
    let count = match dir {
        FetchDirection::Next | FetchDirection::Forward { limit: None } => Some(1),
        FetchDirection::Count { limit } | FetchDirection::Forward { limit: Some(limit) } => {
            Some(count_of(&limit.value)?)
        }
        FetchDirection::All | FetchDirection::ForwardAll => None,
        other => {
            return Err(SqlError::Unsupported(format!(
                "FETCH {other}; cursors move forward only (FETCH [FORWARD] n | ALL)"
            )));
        }
    };
    Ok(Parsed::Cursor(Box::new(CursorStmt::Fetch {
        name: ident(name),
        count,
    })))
}

pub fn parse_close(c: &CloseCursor) -> Parsed {
    Parsed::Cursor(Box::new(CursorStmt::Close(match c {
        CloseCursor::All => None,
        CloseCursor::Specific { name } => Some(ident(name)),
    })))
}

/// The cursor a `FETCH` statement reads.
pub fn fetch_target(sql: &str) -> Option<String> {
    let segs = ddl::split(sql).ok()?;
    let [seg] = segs.as_slice() else { return None };
    match ddl::parse(seg).ok()? {
        Parsed::Cursor(c) => match *c {
            CursorStmt::Fetch { name, .. } => Some(name),
            _ => None,
        },
        _ => None,
    }
}

fn no_cursor(name: &str) -> SqlError {
    SqlError::NoCursor(name.to_owned())
}

impl crate::SqlEngine {
    pub(crate) async fn cursor(
        &self,
        stmt: CursorStmt,
        session: &SqlSession,
    ) -> Result<Vec<RecordBatch>, SqlError> {
        match stmt {
            CursorStmt::Declare { name, hold, query } => {
                if !hold && session.slot().is_none() {
                    return Err(crate::session::no_block("DECLARE CURSOR (without HOLD)").into());
                }
                if session.cursors.lock().contains_key(&name) {
                    return Err(SqlError::Invalid(format!("cursor `{name}` already exists")));
                }
                let segs = ddl::split(&query.to_string())?;
                let [seg] = segs.as_slice() else {
                    return Err(SqlError::Invalid(
                        "a cursor's query is one query".to_owned(),
                    ));
                };
                let out = Box::pin(self.run(seg, session, None)).await?;
                let stream = self.output_stream(out, None).await?;
                let cursor = Cursor {
                    hold,
                    schema: stream.schema(),
                    rest: tokio::sync::Mutex::new((None, Some(stream))),
                };
                session.cursors.lock().insert(name, Arc::new(cursor));
                Ok(vec![])
            }
            CursorStmt::Fetch { name, count } => {
                let c = session
                    .cursors
                    .lock()
                    .get(&name)
                    .cloned()
                    .ok_or_else(|| no_cursor(&name))?;
                let mut want = count.unwrap_or(u64::MAX);
                let mut out = Vec::new();
                let mut rest = c.rest.lock().await;
                while want > 0 {
                    let batch = match rest.0.take() {
                        Some(b) => b,
                        None => match rest.1.as_mut() {
                            Some(s) => match s.next().await {
                                Some(b) => b?,
                                None => {
                                    rest.1 = None;
                                    break;
                                }
                            },
                            None => break,
                        },
                    };
                    let n = batch.num_rows() as u64;
                    if n <= want {
                        want -= n;
                        out.push(batch);
                    } else {
                        let k = usize::try_from(want).unwrap_or(usize::MAX);
                        out.push(batch.slice(0, k));
                        rest.0 = Some(batch.slice(k, batch.num_rows() - k));
                        want = 0;
                    }
                }
                if out.is_empty() {
                    out.push(RecordBatch::new_empty(c.schema.clone()));
                }
                Ok(out)
            }
            CursorStmt::Close(Some(name)) => {
                session
                    .cursors
                    .lock()
                    .remove(&name)
                    .ok_or_else(|| no_cursor(&name))?;
                Ok(vec![])
            }
            CursorStmt::Close(None) => {
                session.cursors.lock().clear();
                Ok(vec![])
            }
        }
    }

    /// The columns of `session`'s open cursor `name` (to describe it, or
    /// a `FETCH` from it).
    pub fn cursor_schema(&self, session: &SqlSession, name: &str) -> Option<SchemaRef> {
        session.cursors.lock().get(name).map(|c| c.schema.clone())
    }
}
