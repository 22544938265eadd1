//! `COPY` over the PostgreSQL protocol (see [`silt_sql::copy`]).
//!
//! - `COPY ... FROM STDIN`: the statement answers `CopyInResponse` and the
//!   load waits in the session's [`CopySlot`]; each `CopyData` message is
//!   decoded and written as it comes (under the statement's execution
//!   slot, timeout and cancel key, as any statement); `CopyDone` writes the
//!   last rows and answers `COPY n`. An error ends the load: the rest of
//!   the client's data is read and dropped, and the error is the answer to
//!   its `CopyDone` (or `CopyFail`).
//! - `COPY ... TO STDOUT`: the query runs as any query and its rows are
//!   sent as `CopyData`, one message per row (clients count them).

use std::fmt::Debug;

use async_trait::async_trait;
use bytes::Bytes;
use futures::{Sink, SinkExt, StreamExt, stream};
use pgwire::api::ClientInfo;
use pgwire::api::copy::CopyHandler;
use pgwire::api::results::{CopyResponse, Response, Tag};
use pgwire::error::{ErrorInfo, PgWireError, PgWireResult};
use pgwire::messages::PgWireBackendMessage;
use pgwire::messages::copy::{CopyData, CopyDone, CopyFail};
use silt_sql::SqlError;
use silt_sql::copy::encode::Encoder;
use silt_sql::copy::{CopyFormat, CopyIn, CopyKind, CopyStmt};

use crate::error::QueryError;
use crate::exec::{Prefetched, Stmt};
use crate::pg::{PgHandler, pg_error};

/// A session's `COPY ... FROM STDIN` in progress.
#[derive(Default)]
pub struct CopySlot(parking_lot::Mutex<Option<Loading>>);

enum Loading {
    /// Rows are coming; the statement holds its execution slot.
    Rows { load: Box<CopyIn>, stmt: Stmt },
    /// The load failed: the client's remaining data is dropped.
    Failed(QueryError),
}

fn format_code(f: CopyFormat) -> i8 {
    match f {
        CopyFormat::Binary => 1,
        CopyFormat::Text | CopyFormat::Csv => 0,
    }
}

impl PgHandler {
    /// Start the `COPY` `c` as statement `stmt` (the last of its query
    /// string when it reads from the client).
    pub(crate) async fn copy(
        &self,
        c: CopyStmt,
        stmt: &Stmt,
        last: bool,
    ) -> Result<Response, QueryError> {
        let session = self.session();
        match &c.kind {
            CopyKind::In { .. } => {
                if !last {
                    return Err(SqlError::Unsupported(
                        "COPY ... FROM STDIN must be the last statement of its query string"
                            .to_owned(),
                    )
                    .into());
                }
                let engine = &self.shared().engine;
                let load = stmt
                    .execute_here(session, engine.copy_in(session, &c))
                    .await?;
                let resp =
                    CopyResponse::new(format_code(load.format()), load.columns(), stream::empty());
                *self.copy_slot().0.lock() = Some(Loading::Rows {
                    load: Box::new(load),
                    stmt: stmt.clone(),
                });
                Ok(Response::CopyIn(resp))
            }
            CopyKind::InFile { .. } => Err(SqlError::Invalid(
                "COPY ... FROM a file runs as a statement, not through the COPY sub-protocol"
                    .to_owned(),
            )
            .into()),
            CopyKind::Out { query } => {
                let (shared, sess, query, ctl) = (
                    self.shared().clone(),
                    session.clone(),
                    query.clone(),
                    stmt.ctl.clone(),
                );
                let pre = stmt
                    .execute(session, async move {
                        let s = shared
                            .engine
                            .execute_stream_with(&sess, &query, Some(ctl))
                            .await?;
                        Prefetched::read(s).await
                    })
                    .await?;
                let rows = stmt.stream_prefetched(session.clone(), pre, self.caps());
                let enc = Encoder::new(c.options.clone(), &rows.schema())?;
                let columns = rows.schema().fields().len();
                let mut head = Vec::new();
                enc.start(&mut head);
                let data = rows.flat_map(move |r| {
                    let items: Vec<PgWireResult<Vec<u8>>> = match r {
                        Ok(b) => match enc.batch_rows(&b) {
                            Ok(rows) => rows.into_iter().map(Ok).collect(),
                            Err(e) => vec![Err(pg_error(&e.into()))],
                        },
                        Err(e) => vec![Err(pg_error(&e))],
                    };
                    stream::iter(items)
                });
                Ok(Response::CopyOut(CopyResponse::new(
                    format_code(c.options.format),
                    columns,
                    with_head(head, data),
                )))
            }
        }
    }

    /// Fail the session's block after a `COPY` error (a no-op outside one).
    fn copy_failed(&self, e: QueryError) -> PgWireError {
        self.session().fail();
        pg_error(&e)
    }
}

/// `data` with `head` (the binary header or the header line) in front of
/// its first message: a message of its own would count as a row.
fn with_head<S>(head: Vec<u8>, data: S) -> impl futures::Stream<Item = PgWireResult<CopyData>>
where
    S: futures::Stream<Item = PgWireResult<Vec<u8>>> + Send + 'static,
{
    let head = (!head.is_empty()).then_some(head);
    stream::unfold((Box::pin(data), head), |(mut data, mut head)| async move {
        match data.next().await {
            Some(Ok(mut row)) => {
                if let Some(mut h) = head.take() {
                    h.append(&mut row);
                    row = h;
                }
                Some((Ok(CopyData::new(Bytes::from(row))), (data, head)))
            }
            Some(Err(e)) => Some((Err(e), (data, None))),
            None => head
                .take()
                .map(|h| (Ok(CopyData::new(Bytes::from(h))), (data, None))),
        }
    })
}

#[async_trait]
impl CopyHandler for PgHandler {
    async fn on_copy_data<C>(&self, _client: &mut C, data: CopyData) -> PgWireResult<()>
    where
        C: ClientInfo + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let taken = self.copy_slot().0.lock().take();
        let next = match taken {
            Some(Loading::Rows { mut load, stmt }) => {
                match stmt
                    .execute_here(self.session(), load.data(&data.data))
                    .await
                {
                    Ok(()) => Loading::Rows { load, stmt },
                    Err(e) => Loading::Failed(e),
                }
            }
            Some(failed @ Loading::Failed(_)) => failed,
            None => return Err(no_copy()),
        };
        *self.copy_slot().0.lock() = Some(next);
        Ok(())
    }

    async fn on_copy_done<C>(&self, client: &mut C, _done: CopyDone) -> PgWireResult<()>
    where
        C: ClientInfo + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let taken = self.copy_slot().0.lock().take();
        let n = match taken {
            Some(Loading::Rows { load, stmt }) => stmt
                .execute_here(self.session(), (*load).finish())
                .await
                .map_err(|e| self.copy_failed(e))?,
            Some(Loading::Failed(e)) => return Err(self.copy_failed(e)),
            None => return Err(no_copy()),
        };
        let tag = Tag::new("COPY").with_rows(usize::try_from(n).unwrap_or(usize::MAX));
        client
            .send(PgWireBackendMessage::CommandComplete(tag.into()))
            .await?;
        Ok(())
    }

    async fn on_copy_fail<C>(&self, _client: &mut C, fail: CopyFail) -> PgWireError
    where
        C: ClientInfo + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let taken = self.copy_slot().0.lock().take();
        let committed = match &taken {
            Some(Loading::Rows { load, .. }) => load.committed(),
            _ => 0,
        };
        drop(taken);
        self.session().fail();
        let kept = if committed == 0 || self.session().status() != silt_sql::TxnStatus::Idle {
            String::new()
        } else {
            format!(" ({committed} rows loaded before it stay committed)")
        };
        PgWireError::UserError(Box::new(ErrorInfo::new(
            "ERROR".to_owned(),
            "57014".to_owned(),
            format!("COPY from stdin failed: {}{kept}", fail.message),
        )))
    }
}

fn no_copy() -> PgWireError {
    PgWireError::UserError(Box::new(ErrorInfo::new(
        "ERROR".to_owned(),
        "08P01".to_owned(),
        "COPY data arrived with no COPY ... FROM STDIN in progress".to_owned(),
    )))
}
