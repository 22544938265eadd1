//! The PostgreSQL wire protocol front end (`pgwire`).
//!
//! - Login ([`crate::pg_login`]): SCRAM-SHA-256 against the roles'
//!   verifiers when the server has users, none otherwise (any user name is
//!   accepted, on loopback only); TLS when the server has a certificate
//!   (required with `--tls-required`). The database name is ignored.
//! - Simple queries may hold several statements separated by `;`; each
//!   gets its own response, and the first error stops the script.
//! - Extended queries (prepared statements): `Parse` plans the statement
//!   with DataFusion to describe its result columns and infer the types of
//!   its `$n` parameters (unknown ones are `text`); `Bind` values are
//!   written into the statement as SQL literals (see [`crate::params`]).
//! - Results are streamed (the last statement of a script) in text or
//!   binary format; types as in [`crate::convert::pg_type`].
//! - Each connection is a SQL session ([`silt_sql::SqlSession`]):
//!   `BEGIN` ... `COMMIT` / `ROLLBACK` are real transaction blocks over any
//!   tables (savepoints too); outside a block every statement commits on
//!   its own. ReadyForQuery reports the block's status (`I`, `T`, `E`); in
//!   a failed block every statement but `ROLLBACK` gets SQLSTATE 25P02, and
//!   `COMMIT` answers `ROLLBACK`. A commit conflict is SQLSTATE 40001.
//!   Closing the connection rolls back an open block. (Simple-query
//!   protocol only: after `ROLLBACK TO SAVEPOINT` leaves a failed block,
//!   ReadyForQuery still says `E` until the block ends; the session itself
//!   runs statements again.)
//!   `SET`/`RESET` of anything but `datafusion.*` settings is ignored.
//! - `INSERT`, `UPSERT`, `DELETE` report their row count in the command tag.
//! - Resource bounds (#28): each connection runs in [`crate::pgconn`]
//!   (malformed messages get `08P01`, idle sessions are closed, connections
//!   over `--max-connections` get `53300`); statements run under
//!   [`crate::exec`] (timeout and cancel stop their work: `57014`); a
//!   session's `statement_timeout` is kept by [`crate::settings`]; a cancel
//!   request (its own connection, with the pid and secret key the session
//!   got at startup: `BackendKeyData`) stops the session's statement through
//!   [`crate::cancel`].

use std::fmt::Debug;
use std::sync::Arc;

use async_trait::async_trait;
use datafusion::arrow::array::{Array, AsArray, RecordBatch};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType, Int64Type, SchemaRef};
use futures::{Sink, SinkExt};
use futures::{Stream, StreamExt, stream};
use pgwire::api::ClientPortalStore;
use pgwire::api::auth::StartupHandler;
use pgwire::api::cancel::CancelHandler;
use pgwire::api::copy::CopyHandler;
use pgwire::api::portal::{Format, Portal};
use pgwire::api::query::{ExtendedQueryHandler, SimpleQueryHandler};
use pgwire::api::results::{
    DescribePortalResponse, FieldFormat, FieldInfo, QueryResponse, Response, Tag,
};
use pgwire::api::stmt::{QueryParser, StoredStatement};
use pgwire::api::store::{Entry, PortalStore};
use pgwire::api::{ClientInfo, PgWireServerHandlers, Type};
use pgwire::error::{ErrorInfo, PgWireError, PgWireResult};
use pgwire::messages::PgWireBackendMessage;
use pgwire::messages::data::DataRow;
use pgwire::messages::extendedquery::{
    Bind, Describe, Execute, Parse, ParseComplete, Sync as PgSync,
};
use pgwire::messages::response::{ReadyForQuery, TransactionStatus};
use silt_sql::SqlError;
use silt_sql::ddl::{self, Parsed};
use silt_sql::{SqlSession, TxnStatus};
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinSet;

use crate::Shared;
use crate::cancel::{CancelSlot, SiltCancelHandler};
use crate::convert::{pg_field_type, pg_type};
use crate::data_rows::encode_batch;
use crate::error::QueryError;
use crate::exec::{Guarded, Prefetched, ResultCaps, Stmt};
use crate::limits::ConnCount;
use crate::params;
use crate::pg_copy::CopySlot;
use crate::pg_login::Login;
use crate::pgconn::{self, ConnOpts};
use crate::settings::{self, Setting, Settings};
use crate::{conns, panics};

/// The tasks of the open PostgreSQL sessions.
pub type Connections = JoinSet<()>;

/// Accept PostgreSQL connections until `stop` turns true; returns the
/// sessions still open.
pub(crate) async fn accept_loop(
    listener: TcpListener,
    shared: Arc<Shared>,
    stop: watch::Receiver<bool>,
) -> Connections {
    let mut conns = JoinSet::new();
    let count = Arc::new(ConnCount::default());
    let refusing = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let cancel = Arc::new(SiltCancelHandler(shared.cancels.clone()));
    let budget = shared.budget;
    let mut stopping = Box::pin(async move {
        let mut stop = stop;
        let _ = stop.wait_for(|v| *v).await;
    });
    loop {
        tokio::select! {
            _ = &mut stopping => break,
            r = listener.accept() => match r {
                Ok((socket, _)) => {
                    let _ = socket.set_nodelay(true);
                    // Over the cap: refused at its startup message (a
                    // cancel request is still served), a bounded number
                    // at once.
                    let slot = count.try_open(budget.connections);
                    let admitted = slot.is_some();
                    if !admitted {
                        use std::sync::atomic::Ordering;
                        if refusing.fetch_add(1, Ordering::AcqRel) >= conns::MAX_REFUSING {
                            refusing.fetch_sub(1, Ordering::AcqRel);
                            continue;
                        }
                    }
                    // One handler (and SQL session) per connection.
                    let session = Arc::new(SqlSession::new());
                    let login = match Login::new(shared.clone(), session.clone()) {
                        Ok(l) => Arc::new(l),
                        Err(e) => {
                            tracing::error!("PostgreSQL login setup: {e}");
                            continue;
                        }
                    };
                    let parser = Arc::new(SiltParser {
                        shared: shared.clone(),
                        session: session.clone(),
                    });
                    let f = Arc::new(Factory {
                        handler: Arc::new(PgHandler {
                            shared: shared.clone(),
                            parser,
                            session: session.clone(),
                            settings: Settings::default(),
                            cancel_slot: Arc::new(CancelSlot::default()),
                            registered: parking_lot::Mutex::new(None),
                            copy: CopySlot::default(),
                            deallocated: parking_lot::Mutex::new(Vec::new()),
                            named: parking_lot::Mutex::new(Default::default()),
                        }),
                        login,
                        cancel: cancel.clone(),
                    });
                    let opts = ConnOpts {
                        admitted,
                        max_connections: budget.connections,
                        idle: budget.idle,
                        idle_in_transaction: budget.idle_in_transaction,
                        max_message: budget.request_bytes,
                        session: Some(session),
                    };
                    let tls = shared.tls.as_ref().map(|t| t.pg.clone());
                    let refusing = refusing.clone();
                    conns.spawn(panics::in_server(async move {
                        let _slot = slot;
                        pgconn::serve(socket, tls, f, opts).await;
                        if !admitted {
                            refusing.fetch_sub(1, std::sync::atomic::Ordering::AcqRel);
                        }
                    }));
                }
                Err(e) => {
                    // Out of file descriptors and the like: wait a little.
                    tracing::warn!("accepting a PostgreSQL connection: {e}");
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                }
            },
            Some(_) = conns.join_next(), if !conns.is_empty() => {}
        }
    }
    conns
}

struct Factory {
    handler: Arc<PgHandler>,
    login: Arc<Login>,
    cancel: Arc<SiltCancelHandler>,
}

impl PgWireServerHandlers for Factory {
    fn simple_query_handler(&self) -> Arc<impl SimpleQueryHandler> {
        self.handler.clone()
    }

    fn extended_query_handler(&self) -> Arc<impl ExtendedQueryHandler> {
        self.handler.clone()
    }

    fn startup_handler(&self) -> Arc<impl StartupHandler> {
        self.login.clone()
    }

    fn cancel_handler(&self) -> Arc<impl CancelHandler> {
        self.cancel.clone()
    }

    fn copy_handler(&self) -> Arc<impl CopyHandler> {
        self.handler.clone()
    }
}

/// Runs the statements of one connection.
pub struct PgHandler {
    shared: Arc<Shared>,
    parser: Arc<SiltParser>,
    session: Arc<SqlSession>,
    settings: Settings,
    /// What a cancel request for this session stops.
    cancel_slot: Arc<CancelSlot>,
    /// The pid this session registered its cancel key under.
    registered: parking_lot::Mutex<Option<i32>>,
    /// Its `COPY ... FROM STDIN` in progress.
    copy: CopySlot,
    /// Prepared statements a `DEALLOCATE` dropped (`None`: all of them),
    /// taken out of the connection's statement store at the next `Sync`
    /// (the simple-query handler cannot reach the store).
    deallocated: parking_lot::Mutex<Vec<Option<String>>>,
    /// Names of the statements `Parse`d with a name (the store cannot list
    /// them), for `DEALLOCATE ALL`.
    named: parking_lot::Mutex<std::collections::BTreeSet<String>>,
}

/// Past this many names, [`PgHandler::named`] keeps only those the
/// statement store still holds (a client may `Close` its statements).
const NAMED_PRUNE: usize = 4096;

/// `DEALLOCATE [PREPARE] { name | ALL }`: the statement's name (`None`
/// for all). psycopg sends `DEALLOCATE ALL` after a `ROLLBACK`, `DROP` or
/// `ALTER` once it has prepared statements of its own.
fn deallocate(sql: &str) -> Option<Option<String>> {
    let mut words = sql.split_whitespace();
    if !words.next()?.eq_ignore_ascii_case("deallocate") {
        return None;
    }
    let mut name = words.next()?;
    if name.eq_ignore_ascii_case("prepare") {
        name = words.next()?;
    }
    if words.next().is_some() {
        return None;
    }
    let name = name.trim_end_matches(';');
    if name.eq_ignore_ascii_case("all") {
        return Some(None);
    }
    let name = match name.strip_prefix('"').and_then(|n| n.strip_suffix('"')) {
        Some(q) => q.replace("\"\"", "\""),
        None => name.to_lowercase(),
    };
    Some(Some(name))
}

impl PgHandler {
    /// Take the statements `DEALLOCATE` dropped out of the connection's
    /// store.
    fn apply_deallocations<S: PortalStore + ?Sized>(&self, store: &S) {
        for d in std::mem::take(&mut *self.deallocated.lock()) {
            let mut named = self.named.lock();
            match d {
                Some(name) => {
                    store.rm_statement(&name);
                    named.remove(&name);
                }
                None => {
                    for name in std::mem::take(&mut *named) {
                        store.rm_statement(&name);
                    }
                }
            }
        }
    }
}

impl Drop for PgHandler {
    fn drop(&mut self) {
        if let Some(pid) = *self.registered.lock() {
            self.shared.cancels.unregister(pid, &self.cancel_slot);
        }
    }
}

/// What a statement is, by its first word.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Returns rows (`SELECT`, `WITH`, `VALUES`, `EXPLAIN`, `SHOW`...).
    Query,
    /// Returns a row count (`INSERT`, `UPSERT`, `DELETE`, `UPDATE`); the
    /// command tag.
    Dml(&'static str),
    /// Rows under a command tag other than `SELECT`: DML with `RETURNING`
    /// (the DML's tag), `FETCH`.
    Rows(&'static str),
    Begin,
    Commit,
    Rollback,
    /// `SET`, `RESET`, `DISCARD`.
    Set,
    /// `COPY` (see [`crate::pg_copy`]).
    Copy,
    /// DDL and anything else.
    Other,
}

impl Kind {
    fn needs_engine(self) -> bool {
        matches!(
            self,
            Kind::Query | Kind::Dml(_) | Kind::Rows(_) | Kind::Other | Kind::Set | Kind::Copy
        )
    }
}

/// The words of `sql` after leading blanks, comments and parentheses.
fn words(sql: &str, n: usize) -> Vec<String> {
    let mut s = sql;
    loop {
        let t = s.trim_start_matches(|c: char| c.is_whitespace() || c == '(');
        if let Some(rest) = t.strip_prefix("--") {
            s = rest.find('\n').map_or("", |i| &rest[i..]);
        } else if let Some(rest) = t.strip_prefix("/*") {
            s = rest.find("*/").map_or("", |i| &rest[i + 2..]);
        } else {
            s = t;
            break;
        }
    }
    s.split(|c: char| !(c.is_alphanumeric() || c == '_' || c == '.'))
        .filter(|w| !w.is_empty())
        .take(n)
        .map(str::to_ascii_uppercase)
        .collect()
}

/// A DML statement's kind: with a `RETURNING` clause it returns rows.
fn dml(tag: &'static str, sql: &str) -> Kind {
    if !sql.to_ascii_lowercase().contains("returning") {
        return Kind::Dml(tag);
    }
    if silt_sql::ddl::has_keyword(sql, "RETURNING") {
        Kind::Rows(tag)
    } else {
        Kind::Dml(tag)
    }
}

/// Classify one statement.
pub fn classify(sql: &str) -> Kind {
    let w = words(sql, 1);
    match w.first().map(String::as_str) {
        Some("SELECT" | "WITH" | "VALUES" | "EXPLAIN" | "SHOW" | "DESCRIBE" | "TABLE") => {
            Kind::Query
        }
        Some("INSERT" | "UPSERT" | "REPLACE") => dml("INSERT", sql),
        Some("DELETE") => dml("DELETE", sql),
        Some("UPDATE") => dml("UPDATE", sql),
        Some("BEGIN" | "START") => Kind::Begin,
        Some("COMMIT" | "END") => Kind::Commit,
        Some("ROLLBACK" | "ABORT") if words(sql, 2).get(1).is_none_or(|w| w != "TO") => {
            Kind::Rollback
        }
        Some("SET" | "RESET" | "DISCARD") => Kind::Set,
        Some("COPY") => Kind::Copy,
        Some("FETCH") => Kind::Rows("FETCH"),
        _ => Kind::Other,
    }
}

/// The command tag of a DDL statement: `CREATE TABLE`, `DROP INDEX`, `COMPACT`.
fn other_tag(sql: &str) -> String {
    let w = words(sql, 4);
    match w.first().map(String::as_str) {
        Some("CREATE" | "DROP" | "ALTER") => {
            let obj = w
                .iter()
                .skip(1)
                .find(|x| !matches!(x.as_str(), "OR" | "REPLACE" | "UNIQUE" | "EXTERNAL"));
            match obj {
                Some(o) => format!("{} {o}", w[0]),
                None => w[0].clone(),
            }
        }
        Some("SAVEPOINT" | "RELEASE" | "ROLLBACK") => w[0].clone(),
        Some("TRUNCATE") => "TRUNCATE TABLE".to_owned(),
        Some("DECLARE") => "DECLARE CURSOR".to_owned(),
        Some("CLOSE") if w.get(1).is_some_and(|x| x == "ALL") => "CLOSE CURSOR ALL".to_owned(),
        Some("CLOSE") => "CLOSE CURSOR".to_owned(),
        Some(first) => first.to_owned(),
        None => "OK".to_owned(),
    }
}

/// A prepared statement.
#[derive(Clone, Debug)]
pub struct PgStatement {
    pub sql: String,
    pub kind: Kind,
    /// Types of `$1`, `$2`... (as the client gave them, else inferred, else `text`).
    pub params: Vec<Type>,
    /// Result columns, when planning told them.
    pub fields: Option<Vec<(String, Type)>>,
}

/// Parses and describes statements for the extended protocol, for one
/// connection (whose session's `PREPARE`d statements an `EXECUTE` is
/// described by).
pub struct SiltParser {
    shared: Arc<Shared>,
    session: Arc<SqlSession>,
}

impl SiltParser {
    /// Plan a statement without running it: its result columns and the
    /// types of its placeholders. `None` when DataFusion does not plan it
    /// (Silt's own DDL) or planning fails (the error shows at execution).
    async fn describe(
        &self,
        seg: &ddl::Segment,
    ) -> Option<(Vec<(String, Type)>, Vec<(usize, Type)>)> {
        let stmt = match ddl::parse(seg) {
            Ok(Parsed::DataFusion(mut stmt)) => {
                silt_sql::pg_catalog::prepare(&mut stmt);
                stmt
            }
            // An INSERT's parameters are those of its plain form.
            Ok(Parsed::Insert(ins)) => Box::new(ins.plain_statement()),
            _ => return None,
        };
        // A query without parameters: its shape's cached plan tells the
        // columns (psycopg describes every query it sends).
        if params::count(&seg.text) == 0
            && let Some(schema) = self.shared.engine.cached_schema(&stmt).await
        {
            return Some((fields_of(&schema), vec![]));
        }
        let state = self.shared.engine.session().state();
        let plan = state.statement_to_plan(*stmt).await.ok()?;
        // `EXECUTE name`: the columns of the statement prepared as `name`.
        if let datafusion::logical_expr::LogicalPlan::Statement(
            datafusion::logical_expr::Statement::Execute(e),
        ) = &plan
        {
            let schema = self.shared.engine.prepared_schema(&self.session, &e.name)?;
            return Some((fields_of(&schema), vec![]));
        }
        let fields = fields_of(plan.schema());
        // A placeholder standing for a `jsonb` column's value carries the
        // column's field, whose metadata says `jsonb`.
        let param_fields = plan.get_parameter_fields().unwrap_or_default();
        let params = silt_sql::udf::placeholder_types(&plan)
            .ok()?
            .into_iter()
            .filter_map(|(name, ty)| {
                let n = name.strip_prefix('$')?.parse::<usize>().ok()?;
                let ty = match param_fields.get(&name) {
                    Some(Some(f)) => pg_field_type(f),
                    _ => pg_type(&ty?),
                };
                Some((n, ty))
            })
            .collect();
        Some((fields, params))
    }
}

/// Result columns as the PostgreSQL protocol describes them.
fn fields_of(schema: &datafusion::common::DFSchema) -> Vec<(String, Type)> {
    arrow_fields_of(schema.as_arrow())
}

fn arrow_fields_of(schema: &datafusion::arrow::datatypes::Schema) -> Vec<(String, Type)> {
    schema
        .fields()
        .iter()
        .map(|f| {
            (
                silt_sql::colnames::shown(f.name()).to_owned(),
                pg_field_type(f),
            )
        })
        .collect()
}

pub(crate) fn user_error(code: &str, message: String) -> PgWireError {
    PgWireError::UserError(Box::new(ErrorInfo::new(
        "ERROR".to_owned(),
        code.to_owned(),
        message,
    )))
}

/// The error as PostgreSQL sends it: code, message and (for a unique
/// violation, the key) detail; the table and column when one is named.
fn error_info(e: &QueryError) -> ErrorInfo {
    let QueryError::Sql(se) = e else {
        return ErrorInfo::new("ERROR".to_owned(), e.sqlstate().to_owned(), e.to_string());
    };
    let mut info = ErrorInfo::new("ERROR".to_owned(), e.sqlstate().to_owned(), se.message());
    info.detail = se.detail();
    match se.root() {
        SqlError::NotNull { table, column } => {
            info.table = Some(table.clone());
            info.column = Some(column.clone());
        }
        SqlError::UniqueViolation {
            table, constraint, ..
        } => {
            info.table = Some(table.clone());
            info.constraint = Some(constraint.clone());
        }
        SqlError::TypeMismatch { column, .. }
        | SqlError::InvalidText { column, .. }
        | SqlError::OutOfRange { column, .. } => info.column = Some(column.clone()),
        _ => {}
    }
    info
}

pub(crate) fn pg_error(e: &QueryError) -> PgWireError {
    PgWireError::UserError(Box::new(error_info(e)))
}

#[async_trait]
impl QueryParser for SiltParser {
    type Statement = PgStatement;

    async fn parse_sql<C>(
        &self,
        _client: &C,
        sql: &str,
        types: &[Option<Type>],
    ) -> PgWireResult<Option<PgStatement>>
    where
        C: ClientInfo + Unpin + Send + Sync,
    {
        let mut segs = ddl::split(sql).map_err(|e| pg_error(&QueryError::Sql(e)))?;
        if segs.len() > 1 {
            return Err(user_error(
                "42601",
                "cannot insert multiple commands into a prepared statement".to_owned(),
            ));
        }
        let Some(seg) = segs.pop() else {
            return Ok(None);
        };
        let kind = classify(&seg.text);
        let n = params::count(&seg.text);
        let (fields, inferred) = if matches!(
            kind,
            Kind::Query | Kind::Dml(_) | Kind::Rows(_) | Kind::Other
        ) {
            match self.describe(&seg).await {
                Some((f, p)) => (Some(f), p),
                None => (None, vec![]),
            }
        } else {
            (None, vec![])
        };
        let fields = match kind {
            Kind::Query => fields,
            Kind::Rows(_) => self
                .shared
                .engine
                .returning_schema(&seg)
                .await
                .map(|s| arrow_fields_of(&s)),
            Kind::Other => fields.filter(|f| !f.is_empty()),
            _ => None,
        };
        let params = (1..=n.max(types.len()))
            .map(|i| {
                types
                    .get(i - 1)
                    .cloned()
                    .flatten()
                    .filter(|t| *t != Type::UNKNOWN)
                    .or_else(|| {
                        inferred
                            .iter()
                            .find(|(k, _)| *k == i)
                            .map(|(_, t)| t.clone())
                    })
                    .unwrap_or(Type::TEXT)
            })
            .collect();
        Ok(Some(PgStatement {
            sql: seg.text,
            kind,
            params,
            fields,
        }))
    }

    fn get_parameter_types(&self, stmt: &PgStatement) -> PgWireResult<Vec<Type>> {
        Ok(stmt.params.clone())
    }

    fn get_result_schema(
        &self,
        stmt: &PgStatement,
        column_format: Option<&Format>,
    ) -> PgWireResult<Vec<FieldInfo>> {
        let fmt = column_format.cloned().unwrap_or(Format::UnifiedText);
        Ok(stmt
            .fields
            .as_ref()
            .map(|f| field_infos(f.iter().map(|(n, t)| (n.clone(), t.clone())), &fmt))
            .unwrap_or_default())
    }
}

/// The format of column (or parameter) `i`, tolerating short format lists.
fn format_of(fmt: &Format, i: usize) -> FieldFormat {
    match fmt {
        Format::UnifiedText => FieldFormat::Text,
        Format::UnifiedBinary => FieldFormat::Binary,
        Format::Individual(v) => v
            .get(i)
            .map_or(FieldFormat::Text, |c| FieldFormat::from(*c)),
    }
}

fn field_infos(cols: impl Iterator<Item = (String, Type)>, fmt: &Format) -> Vec<FieldInfo> {
    cols.enumerate()
        .map(|(i, (name, ty))| FieldInfo::new(name, None, None, ty, format_of(fmt, i)))
        .collect()
}

fn schema_fields(schema: &SchemaRef, fmt: &Format) -> Vec<FieldInfo> {
    field_infos(
        schema
            .fields()
            .iter()
            .map(|f| (f.name().clone(), pg_field_type(f))),
        fmt,
    )
}

/// A statement's result, each batch encoded by the task producing it
/// ([`Stmt::stream_encoded`]).
fn encoded(
    s: &Stmt,
    session: &Arc<SqlSession>,
    pre: Prefetched,
    caps: ResultCaps,
    fields: &Arc<Vec<FieldInfo>>,
) -> Guarded<PgWireResult<Vec<DataRow>>> {
    let f = fields.clone();
    s.stream_encoded(session.clone(), pre, caps, move |b| encode_batch(&b, &f))
}

/// A query response over a stream of batches.
fn query_response<S>(fields: Vec<FieldInfo>, batches: S) -> QueryResponse
where
    S: Stream<Item = Result<RecordBatch, QueryError>> + Send + 'static,
{
    let fields = Arc::new(fields);
    let f = fields.clone();
    rows_response(
        fields,
        batches.map(move |r| r.map(|b| encode_batch(&b, &f))),
    )
}

/// A query response over a stream of encoded batches.
fn rows_response<S>(fields: Arc<Vec<FieldInfo>>, encoded: S) -> QueryResponse
where
    S: Stream<Item = Result<PgWireResult<Vec<DataRow>>, QueryError>> + Send + 'static,
{
    let rows = encoded.flat_map(|r| {
        let items: Vec<PgWireResult<DataRow>> = match r {
            Ok(Ok(rows)) => rows.into_iter().map(Ok).collect(),
            Ok(Err(e)) => vec![Err(e)],
            Err(e) => vec![Err(pg_error(&e))],
        };
        stream::iter(items)
    });
    QueryResponse::new(fields, rows)
}

/// The number in a DML result's `count` column.
fn row_count(batches: &[RecordBatch]) -> usize {
    let mut n: usize = 0;
    for b in batches {
        if b.num_columns() != 1 {
            continue;
        }
        let Ok(a) = cast(b.column(0), &DataType::Int64) else {
            continue;
        };
        let a = a.as_primitive::<Int64Type>();
        for i in 0..a.len() {
            if !a.is_null(i) {
                n = n.saturating_add(usize::try_from(a.value(i)).unwrap_or(0));
            }
        }
    }
    n
}

impl PgHandler {
    pub(crate) fn session(&self) -> &Arc<SqlSession> {
        &self.session
    }

    pub(crate) fn shared(&self) -> &Arc<Shared> {
        &self.shared
    }

    pub(crate) fn copy_slot(&self) -> &CopySlot {
        &self.copy
    }

    /// The timeout of this session's next statement.
    fn timeout(&self) -> std::time::Duration {
        self.shared
            .budget
            .statement_timeout(self.settings.statement_timeout())
    }

    /// Admit a statement (or script) of this session; a cancel request
    /// with the session's key stops it.
    async fn admit<C: ClientInfo>(&self, client: &C) -> Result<Stmt, QueryError> {
        let (pid, key) = client.pid_and_secret_key();
        {
            let mut reg = self.registered.lock();
            if reg.is_none() {
                self.shared
                    .cancels
                    .register(pid, key.to_bytes(), self.cancel_slot.clone());
                *reg = Some(pid);
            }
        }
        let permit = self.shared.limits.admit(self.timeout()).await?;
        let stmt = Stmt::new(&self.shared.limits, permit);
        self.cancel_slot.set(stmt.ctl.clone());
        Ok(stmt)
    }

    pub(crate) fn caps(&self) -> ResultCaps {
        ResultCaps {
            rows: self.shared.budget.result_rows,
            bytes: self.shared.budget.result_bytes,
        }
    }

    /// Run `sql` to completion under `stmt` (on a task of its own).
    async fn collect(&self, stmt: &Stmt, sql: &str) -> Result<Vec<RecordBatch>, QueryError> {
        let (shared, session, sql, ctl) = (
            self.shared.clone(),
            self.session.clone(),
            sql.to_owned(),
            stmt.ctl.clone(),
        );
        stmt.execute(&self.session, async move {
            shared.engine.execute_with(&session, &sql, Some(ctl)).await
        })
        .await
    }

    /// A setting the server keeps (`statement_timeout`), or `None` for
    /// any other statement.
    fn setting(&self, sql: &str, kind: Kind) -> Result<Option<Response>, QueryError> {
        let show = kind == Kind::Query && words(sql, 1).first().is_some_and(|w| w == "SHOW");
        if kind != Kind::Set && !show {
            return Ok(None);
        }
        let Some(setting) = settings::parse(sql)? else {
            return Ok(None);
        };
        if setting == Setting::ShowTimeout {
            let value = settings::show_pg_duration(self.timeout());
            let schema = Arc::new(datafusion::arrow::datatypes::Schema::new(vec![
                datafusion::arrow::datatypes::Field::new(
                    "statement_timeout",
                    DataType::Utf8,
                    false,
                ),
            ]));
            let batch = RecordBatch::try_new(
                schema.clone(),
                vec![Arc::new(datafusion::arrow::array::StringArray::from(vec![
                    value,
                ]))],
            )
            .map_err(|e| QueryError::Internal(e.to_string()))?;
            let fields = schema_fields(&schema, &Format::UnifiedText);
            return Ok(Some(Response::Query(query_response(
                fields,
                stream::iter([Ok::<_, QueryError>(batch)]),
            ))));
        }
        self.settings.apply(&setting);
        let tag = words(sql, 1)
            .first()
            .cloned()
            .unwrap_or_else(|| "SET".to_owned());
        Ok(Some(Response::Execution(Tag::new(&tag))))
    }

    /// Run one statement. The last statement of a request streams its rows
    /// (holding the permit until they are sent); the others are collected.
    async fn run(
        &self,
        sql: &str,
        kind: Kind,
        stmt: Option<&Stmt>,
        last: bool,
        described: Option<&[(String, Type)]>,
        fmt: &Format,
    ) -> Result<Response, QueryError> {
        if let Some(r) = self.setting(sql, kind)? {
            return Ok(r);
        }
        let engine = &self.shared.engine;
        if let Some(d) = deallocate(sql) {
            // A statement `PREPARE`d in SQL is the session's; one `Parse`d
            // over the protocol is the connection's (dropped at its next
            // `Parse` or `Sync`).
            let tag = match &d {
                None => {
                    self.session.deallocate_all();
                    "DEALLOCATE ALL"
                }
                Some(name) => {
                    if let Err(e) = engine.execute_in(&self.session, sql).await {
                        // Not `PREPARE`d in SQL: one `Parse`d under the
                        // name, or PostgreSQL's error.
                        if !e.to_string().contains("does not exist") {
                            return Err(e.into());
                        }
                        if !self.named.lock().contains(name) {
                            return Err(e.into());
                        }
                    }
                    "DEALLOCATE"
                }
            };
            self.deallocated.lock().push(d);
            return Ok(Response::Execution(Tag::new(tag)));
        }
        let stmt = match (kind.needs_engine(), stmt) {
            (true, Some(s)) => Some(s),
            (true, None) => {
                return Err(QueryError::Busy("no execution slot".to_owned()));
            }
            (false, _) => None,
        };
        let session = &self.session;
        match kind {
            Kind::Begin => {
                engine.execute_in(session, sql).await?;
                Ok(Response::TransactionStart(Tag::new("BEGIN")))
            }
            Kind::Commit => {
                // PostgreSQL answers the COMMIT of a failed block ROLLBACK.
                let failed = session.status() == TxnStatus::Failed;
                engine.execute_in(session, sql).await?;
                let tag = if failed { "ROLLBACK" } else { "COMMIT" };
                Ok(Response::TransactionEnd(Tag::new(tag)))
            }
            Kind::Rollback => {
                engine.execute_in(session, sql).await?;
                Ok(Response::TransactionEnd(Tag::new("ROLLBACK")))
            }
            Kind::Set => {
                let w = words(sql, 2);
                let df = w.get(1).is_some_and(|v| v.starts_with("DATAFUSION."));
                if let (true, Some(s)) = (df, stmt) {
                    self.collect(s, sql).await?;
                }
                Ok(Response::Execution(Tag::new(
                    w.first().map_or("SET", String::as_str),
                )))
            }
            Kind::Dml(tag) => {
                let Some(s) = stmt else {
                    return Err(QueryError::ShuttingDown);
                };
                // A short VALUES insert runs on the connection's task (its
                // write still goes to a blocking thread): one hop fewer.
                let batches = if silt_sql::insert::is_short_values(sql) {
                    let ctl = Some(s.ctl.clone());
                    s.execute_here(session, engine.execute_with(session, sql, ctl))
                        .await?
                } else {
                    self.collect(s, sql).await?
                };
                let n = row_count(&batches);
                let t = if tag == "INSERT" {
                    Tag::new(tag).with_oid(0).with_rows(n)
                } else {
                    Tag::new(tag).with_rows(n)
                };
                Ok(Response::Execution(t))
            }
            Kind::Query if last => {
                let Some(s) = stmt else {
                    return Err(QueryError::ShuttingDown);
                };
                // A query with a kept plan runs here: its first batch is
                // a short, bounded piece of work.
                if let Some(r) = self
                    .shared
                    .engine
                    .kept_stream(session, sql, Some(s.ctl.clone()))
                {
                    let pre = s
                        .execute_here(session, async move { Prefetched::read(r?).await })
                        .await?;
                    let fields = Arc::new(self.fields(&pre.schema, described, fmt));
                    let rows = encoded(s, session, pre, self.caps(), &fields);
                    return Ok(Response::Query(rows_response(fields, rows)));
                }
                let (shared, sess, owned, ctl) = (
                    self.shared.clone(),
                    session.clone(),
                    sql.to_owned(),
                    s.ctl.clone(),
                );
                let pre = s
                    .execute(session, async move {
                        let stream = shared
                            .engine
                            .execute_stream_with(&sess, &owned, Some(ctl))
                            .await?;
                        Prefetched::read(stream).await
                    })
                    .await?;
                let fields = Arc::new(self.fields(&pre.schema, described, fmt));
                let rows = encoded(s, session, pre, self.caps(), &fields);
                Ok(Response::Query(rows_response(fields, rows)))
            }
            Kind::Copy => {
                let Some(s) = stmt else {
                    return Err(QueryError::ShuttingDown);
                };
                match silt_sql::copy::parse(sql)? {
                    // From a file on the server: a statement like any other.
                    Some(c) if matches!(c.kind, silt_sql::copy::CopyKind::InFile { .. }) => {
                        let batches = self.collect(s, sql).await?;
                        Ok(Response::Execution(
                            Tag::new("COPY").with_rows(row_count(&batches)),
                        ))
                    }
                    Some(c) => self.copy(c, s, last).await,
                    // `COPY ... TO 'file'`: DataFusion's.
                    None => {
                        self.collect(s, sql).await?;
                        Ok(Response::Execution(Tag::new("COPY")))
                    }
                }
            }
            Kind::Rows(tag) => {
                let Some(s) = stmt else {
                    return Err(QueryError::ShuttingDown);
                };
                let batches = self.collect(s, sql).await?;
                let schema = match batches.first() {
                    Some(b) => b.schema(),
                    None => Arc::new(datafusion::arrow::datatypes::Schema::empty()),
                };
                let fields = self.fields(&schema, described, fmt);
                let mut r = query_response(fields, stream::iter(batches.into_iter().map(Ok)));
                r.set_command_tag(if tag == "INSERT" { "INSERT 0" } else { tag });
                Ok(Response::Query(r))
            }
            Kind::Query | Kind::Other => {
                let Some(s) = stmt else {
                    return Err(QueryError::ShuttingDown);
                };
                let batches = self.collect(s, sql).await?;
                let schema = batches.first().map(|b| b.schema());
                match schema {
                    Some(schema) if schema.fields().is_empty() && kind == Kind::Other => {
                        Ok(Response::Execution(Tag::new(&other_tag(sql))))
                    }
                    Some(schema) => {
                        let fields = self.fields(&schema, described, fmt);
                        Ok(Response::Query(query_response(
                            fields,
                            stream::iter(batches.into_iter().map(Ok)),
                        )))
                    }
                    None if kind == Kind::Other => {
                        Ok(Response::Execution(Tag::new(&other_tag(sql))))
                    }
                    None => {
                        let fields = described
                            .map(|d| field_infos(d.iter().cloned(), fmt))
                            .unwrap_or_default();
                        Ok(Response::Query(query_response(fields, stream::empty())))
                    }
                }
            }
        }
    }

    /// The described columns when they match the result, else the result's.
    fn fields(
        &self,
        schema: &SchemaRef,
        described: Option<&[(String, Type)]>,
        fmt: &Format,
    ) -> Vec<FieldInfo> {
        match described {
            Some(d) if d.len() == schema.fields().len() => field_infos(d.iter().cloned(), fmt),
            _ => schema_fields(schema, fmt),
        }
    }
}

#[async_trait]
impl SimpleQueryHandler for PgHandler {
    async fn do_query<C>(&self, client: &mut C, query: &str) -> PgWireResult<Vec<Response>>
    where
        C: ClientInfo + Unpin + Send + Sync,
    {
        let segs = match ddl::split(query) {
            Ok(s) => s,
            Err(e) => {
                return Ok(vec![Response::Error(Box::new(error_info(
                    &QueryError::Sql(e),
                )))]);
            }
        };
        if segs.is_empty() {
            return Ok(vec![Response::EmptyQuery]);
        }
        let kinds: Vec<Kind> = segs.iter().map(|s| classify(&s.text)).collect();
        let stmt = if kinds.iter().any(|k| k.needs_engine()) {
            match self.admit(client).await {
                Ok(s) => Some(s),
                Err(e) => return Ok(vec![Response::Error(Box::new(error_info(&e)))]),
            }
        } else {
            None
        };
        let mut out = Vec::with_capacity(segs.len());
        for (i, (seg, kind)) in segs.iter().zip(kinds).enumerate() {
            let last = i + 1 == segs.len();
            match self
                .run(
                    &seg.text,
                    kind,
                    stmt.as_ref(),
                    last,
                    None,
                    &Format::UnifiedText,
                )
                .await
            {
                Ok(r) => out.push(r),
                Err(e) => {
                    out.push(Response::Error(Box::new(error_info(&e))));
                    break;
                }
            }
        }
        Ok(out)
    }
}

#[async_trait]
impl ExtendedQueryHandler for PgHandler {
    type Statement = PgStatement;
    type QueryParser = SiltParser;

    fn query_parser(&self) -> Arc<SiltParser> {
        self.parser.clone()
    }

    /// As pgwire's own, noting the statement's name (see `named`).
    async fn on_parse<C>(&self, client: &mut C, message: Parse) -> PgWireResult<()>
    where
        C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::PortalStore: PortalStore<Statement = Self::Statement>,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        // A `DEALLOCATE` sent before this `Parse` goes first.
        self.apply_deallocations(client.portal_store());
        let name = message
            .name
            .clone()
            .unwrap_or_else(|| pgwire::api::DEFAULT_NAME.to_owned());
        match StoredStatement::parse(client, &message, self.query_parser()).await? {
            Some(stmt) => client.portal_store().put_statement(Arc::new(stmt)),
            None => client.portal_store().put_empty_statement(&name),
        }
        if name != pgwire::api::DEFAULT_NAME {
            let mut named = self.named.lock();
            if named.len() >= NAMED_PRUNE {
                let store = client.portal_store();
                named.retain(|n| store.get_statement(n).is_some());
            }
            named.insert(name);
        }
        // Held until `Sync` or `Flush`, as PostgreSQL holds it (see
        // `pg_execute`).
        client
            .feed(PgWireBackendMessage::ParseComplete(ParseComplete::new()))
            .await?;
        Ok(())
    }

    /// As pgwire's own, with `BindComplete` held until `Sync` or `Flush`.
    async fn on_bind<C>(&self, client: &mut C, message: Bind) -> PgWireResult<()>
    where
        C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::PortalStore: PortalStore<Statement = Self::Statement>,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        crate::pg_execute::bind(client, message).await
    }

    /// As pgwire's own, with the portal's rows streamed to the socket
    /// rather than collected first ([`crate::pg_execute`]).
    async fn on_execute<C>(&self, client: &mut C, message: Execute) -> PgWireResult<()>
    where
        C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::PortalStore: PortalStore<Statement = Self::Statement>,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        crate::pg_execute::execute(self, client, message).await
    }

    /// ReadyForQuery with the session's own status (the session knows when
    /// `ROLLBACK TO SAVEPOINT` left a failed block).
    async fn on_sync<C>(&self, client: &mut C, _message: PgSync) -> PgWireResult<()>
    where
        C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::PortalStore: PortalStore<Statement = Self::Statement>,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let store = client.portal_store();
        store.rm_portal(pgwire::api::DEFAULT_NAME);
        self.apply_deallocations(store);
        let status = match self.session.status() {
            TxnStatus::Idle => TransactionStatus::Idle,
            TxnStatus::InTransaction => TransactionStatus::Transaction,
            TxnStatus::Failed => TransactionStatus::Error,
        };
        client.set_transaction_status(status);
        client
            .send(PgWireBackendMessage::ReadyForQuery(ReadyForQuery::new(
                status,
            )))
            .await?;
        Ok(())
    }

    /// A cursor's columns: psycopg describes a cursor it `DECLARE`d as a
    /// portal of that name, and a `FETCH` reads the cursor's columns.
    async fn on_describe<C>(&self, client: &mut C, message: Describe) -> PgWireResult<()>
    where
        C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::PortalStore: PortalStore<Statement = Self::Statement>,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        if message.target_type == b'P' {
            let name = message.name.as_deref().unwrap_or(pgwire::api::DEFAULT_NAME);
            let (cursor, fmt) = match client.portal_store().get_portal(name) {
                Some(Entry::Value(p)) if p.statement.statement.kind == Kind::Rows("FETCH") => (
                    silt_sql::cursors::fetch_target(&p.statement.statement.sql),
                    p.result_column_format.clone(),
                ),
                None => (Some(name.to_owned()), Format::UnifiedText),
                _ => (None, Format::UnifiedText),
            };
            if let Some(c) = cursor
                && let Some(schema) = self.shared.engine.cursor_schema(&self.session, &c)
            {
                let fields = field_infos(arrow_fields_of(&schema).into_iter(), &fmt);
                let d = DescribePortalResponse::new(fields);
                return crate::pg_execute::feed_description(client, &d).await;
            }
        }
        crate::pg_execute::describe(self, client, message).await
    }

    async fn do_query<C>(
        &self,
        client: &mut C,
        portal: &Portal<PgStatement>,
        _max_rows: usize,
    ) -> PgWireResult<Response>
    where
        C: ClientInfo + Unpin + Send + Sync,
    {
        let stmt = &portal.statement.statement;
        let sql = if portal.parameters.is_empty() && params::count(&stmt.sql) == 0 {
            stmt.sql.clone()
        } else {
            let literals = portal
                .parameters
                .iter()
                .enumerate()
                .map(|(i, v)| {
                    let mut ty = stmt.params.get(i).cloned().unwrap_or(Type::TEXT);
                    let binary = format_of(&portal.parameter_format, i) == FieldFormat::Binary;
                    if ty == Type::TEXT
                        && !binary
                        && v.as_deref()
                            .is_some_and(|b| b.trim_ascii_start().starts_with(b"{"))
                        && params::is_quantified(&stmt.sql, i + 1)
                    {
                        ty = Type::TEXT_ARRAY;
                    }
                    params::literal(i + 1, v.as_deref(), &ty, binary)
                })
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| user_error("22023", e.to_string()))?;
            params::substitute(&stmt.sql, &literals)
                .map_err(|e| user_error("42P02", e.to_string()))?
        };
        let run = if stmt.kind.needs_engine() {
            Some(self.admit(client).await.map_err(|e| pg_error(&e))?)
        } else {
            None
        };
        self.run(
            &sql,
            stmt.kind,
            run.as_ref(),
            true,
            stmt.fields.as_deref(),
            &portal.result_column_format,
        )
        .await
        .map_err(|e| pg_error(&e))
    }
}

impl Debug for PgHandler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PgHandler")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classify_statements() {
        assert_eq!(classify("  -- hi\n /* x */ (SELECT 1)"), Kind::Query);
        assert_eq!(classify("insert into t values (1)"), Kind::Dml("INSERT"));
        assert_eq!(classify("UPSERT INTO t VALUES (1)"), Kind::Dml("INSERT"));
        assert_eq!(
            classify("insert into t values (1) returning id"),
            Kind::Rows("INSERT")
        );
        assert_eq!(
            classify("update t set s = 'returning' where id = 1"),
            Kind::Dml("UPDATE")
        );
        assert_eq!(classify("begin"), Kind::Begin);
        assert_eq!(classify(""), Kind::Other);
        assert_eq!(other_tag("create table t (a int)"), "CREATE TABLE");
        assert_eq!(other_tag("truncate t"), "TRUNCATE TABLE");
        assert_eq!(other_tag("CREATE UNIQUE INDEX i ON t (a)"), "CREATE INDEX");
        assert_eq!(other_tag("compact t"), "COMPACT");
        assert_eq!(other_tag("/* unterminated"), "OK");
    }
}
