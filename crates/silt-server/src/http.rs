//! The HTTP front end (`axum`), shaped like AsterixDB's query service.
//!
//! - `POST /query/service` (or `GET` with `?statement=`): the statement is
//!   the `statement` field of a JSON body (`{"statement": "..."}`) or of a
//!   form body (`statement=...`), or the whole body otherwise (`text/plain`;
//!   a form body without a `statement` field is taken whole too, so
//!   `curl -d 'SELECT 1'` works). Several statements separated by `;` run
//!   in order; the last one's rows are the result (`results`), and with
//!   several statements `resultSets` holds each one's, in order (a DML
//!   statement's is `[{"count": n}]`, DDL's `[]`). Placeholders `$1`,
//!   `$2`... take the values of `"args": [...]` (JSON; `args=[...]` as a
//!   form field or query parameter), bound as literals.
//!   The response is `{"requestID", "status": "success" | "fatal",
//!   "results": [rows as objects], "errors": [{"code", "msg"}],
//!   "metrics": {"elapsedTime", "executionTime", "resultCount",
//!   "resultSize"}}`; `code` is the SQLSTATE (`42601`, `42P01`, `23505`,
//!   `53000` busy, `57014` timeout, `40001` conflict...). HTTP status 200,
//!   400 (bad statement), 409 (duplicate key, transaction conflict), 503
//!   (busy or shutting down), 504 (timeout), 500.
//! - Transactions: each request is a session of its own. With `"atomic":
//!   true` (or `atomic=true` as a form field or query parameter) its
//!   statements run as one transaction: all committed, or (on any error)
//!   none; the last statement's rows are collected before the commit. A
//!   script may also hold its own `BEGIN` ... `COMMIT`; one that ends
//!   inside a block is refused (`25000`) and nothing of the block is
//!   committed.
//! - With `Accept: application/x-ndjson` or `?format=ndjson` (or a
//!   `format` field) rows are streamed as they are produced, one JSON
//!   object per line, without collecting the result; an error after the
//!   first row ends the stream with a line `{"error": {"code", "msg"}}`.
//! - Authentication ([`crate::http_auth`]): when the server has users,
//!   every route but `/health` needs HTTP Basic credentials or a bearer
//!   token from `POST /auth/token`; statements run with the user's
//!   privileges (403 / `42501` when one is missing). With a certificate
//!   the listener speaks HTTPS only.
//! - `GET /pubsub/{space}/listen?uid=N`: a subscriber's live feed of a
//!   pub/sub space, streamed as NDJSON or server-sent events
//!   ([`crate::http_pubsub`]).
//! - `GET /health`: `{"status": "ok", "running": n, "waiting": n,
//!   "memory": bytes}` (statements executing and waiting, and the memory
//!   DataFusion's operators hold now).
//! - `GET /stats`: the database's statistics (as `silt stats --json`), and
//!   under `copies` the `COPY ... FROM STDIN` loads running (table, bytes,
//!   rows read, rows committed, seconds).
//! - Resource bounds (#28): a request may ask for a shorter timeout with
//!   `"timeout": "5s"` (JSON), `timeout=5s` (form field or query
//!   parameter; a bare number is milliseconds, as PostgreSQL's
//!   `statement_timeout`); the server's `--timeout` caps it. Statements
//!   run under [`crate::exec`] (the answer comes at the deadline, `504`,
//!   and the work stops); results are capped (`--max-result-rows`,
//!   `--max-result-bytes`: the JSON of a collected result counts), bodies
//!   too (`--max-request-bytes`: `413`); connections are capped and closed
//!   when idle ([`crate::conns`]); `SET datafusion.runtime.*` is refused
//!   (`403`, see [`crate::settings`]).

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use axum::Extension;
use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{DefaultBodyLimit, Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use futures::StreamExt;
use std::net::SocketAddr;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinSet;
use tower_service::Service;

use datafusion::arrow::array::RecordBatch;
use datafusion::physical_plan::memory::MemoryStream;
use silt_sql::{Script, SqlError, SqlSession, TxnStatus};

use crate::Shared;
use crate::conns::{self, Admission, HttpConns};
use crate::convert::JsonRows;
use crate::error::{Limit, QueryError};
use crate::exec::{Guarded, Prefetched, ResultCaps, Stmt};
use crate::http_auth::{self, Caller, Peer};
use crate::params;
use crate::settings;

pub(crate) fn router(shared: Arc<Shared>) -> Router {
    let body_limit = match shared.budget.request_bytes {
        0 => DefaultBodyLimit::disable(),
        n => DefaultBodyLimit::max(n),
    };
    let guarded = Router::new()
        .route("/query/service", get(query).post(query))
        .route("/stats", get(stats))
        .route("/pubsub/{space}/listen", get(crate::http_pubsub::listen))
        .route_layer(axum::middleware::from_fn_with_state(
            shared.clone(),
            http_auth::require,
        ));
    Router::new()
        .merge(guarded)
        .route("/health", get(health))
        .route(
            "/auth/token",
            post(http_auth::issue_token).delete(http_auth::revoke_token),
        )
        .layer(body_limit)
        .layer(axum::middleware::from_fn(crate::conns::track))
        .with_state(shared)
}

/// How long a client may take to send a request's headers.
const HEADER_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a TLS handshake may take.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Accept HTTP (or, with a certificate, HTTPS) connections until `stop`;
/// then let open connections finish their requests.
pub(crate) async fn serve(listener: TcpListener, shared: Arc<Shared>, stop: watch::Receiver<bool>) {
    let app = router(shared.clone());
    let admit = Arc::new(HttpConns::new(
        shared.budget.connections,
        shared.budget.idle,
    ));
    let mut conns = JoinSet::new();
    let mut stopping = {
        let mut stop = stop.clone();
        Box::pin(async move {
            let _ = stop.wait_for(|v| *v).await;
        })
    };
    loop {
        tokio::select! {
            _ = &mut stopping => break,
            r = listener.accept() => match r {
                Ok((socket, addr)) => {
                    let _ = socket.set_nodelay(true);
                    // Over the cap: answered 503 (a bounded number at
                    // once; more are closed at once).
                    let admission = admit.admit();
                    if matches!(admission, Admission::Drop) {
                        continue;
                    }
                    let app = app.clone();
                    let tls = shared.tls.as_ref().map(|t| t.http.clone());
                    let stop = stop.clone();
                    let admit = admit.clone();
                    conns.spawn(crate::panics::in_server(async move {
                        match tls {
                            None => serve_conn(socket, addr, false, app, stop, admission, &admit).await,
                            Some(acceptor) => {
                                match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(socket)).await {
                                    Ok(Ok(s)) => serve_conn(s, addr, true, app, stop, admission, &admit).await,
                                    Ok(Err(e)) => tracing::debug!("TLS handshake with {addr}: {e}"),
                                    Err(_) => tracing::debug!("TLS handshake with {addr} timed out"),
                                }
                            }
                        }
                    }));
                }
                Err(e) => {
                    tracing::warn!("accepting an HTTP connection: {e}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            },
            Some(_) = conns.join_next(), if !conns.is_empty() => {}
        }
    }
    // Open connections finish their current request, then close.
    let all = async { while conns.join_next().await.is_some() {} };
    if tokio::time::timeout(Duration::from_secs(2), all)
        .await
        .is_err()
    {
        conns.abort_all();
    }
}

async fn serve_conn<S>(
    io: S,
    addr: SocketAddr,
    tls: bool,
    app: Router,
    mut stop: watch::Receiver<bool>,
    admission: Admission,
    admit: &HttpConns,
) where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let slot = match admission {
        Admission::Serve(slot) => slot,
        Admission::Refuse(refusing) => {
            conns::refuse(io, admit.max()).await;
            drop(refusing);
            return;
        }
        Admission::Drop => return,
    };
    let io = admit.wrap(io, slot);
    let activity = io.activity();
    let peer = Peer { addr, tls };
    let svc = hyper::service::service_fn(move |mut req: hyper::Request<hyper::body::Incoming>| {
        req.extensions_mut().insert(peer);
        req.extensions_mut().insert(activity.clone());
        let mut app = app.clone();
        async move { app.call(req.map(Body::new)).await }
    });
    let conn = hyper::server::conn::http1::Builder::new()
        .timer(hyper_util::rt::TokioTimer::new())
        .header_read_timeout(HEADER_TIMEOUT)
        .serve_connection(hyper_util::rt::TokioIo::new(io), svc);
    tokio::pin!(conn);
    tokio::select! {
        r = conn.as_mut() => {
            if let Err(e) = r {
                tracing::debug!("HTTP connection from {addr}: {e}");
            }
        }
        _ = async { drop(stop.wait_for(|v| *v).await); } => {
            conn.as_mut().graceful_shutdown();
            let _ = conn.await;
        }
    }
}

static NEXT_ID: AtomicU64 = AtomicU64::new(1);

fn request_id() -> String {
    let boot = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    format!(
        "{:08x}-{:08x}-{:08x}",
        std::process::id(),
        boot & 0xffff_ffff,
        NEXT_ID.fetch_add(1, Ordering::Relaxed)
    )
}

/// AsterixDB prints durations like `12.34ms`.
fn ms(d: Duration) -> String {
    format!("{:.3}ms", d.as_secs_f64() * 1000.0)
}

#[derive(Clone)]
struct Request {
    statement: String,
    ndjson: bool,
    /// Run the statements as one transaction.
    atomic: bool,
    /// The timeout the client asked for.
    timeout: Option<Duration>,
}

fn is_ndjson(f: &str) -> bool {
    matches!(
        f.to_ascii_lowercase().as_str(),
        "ndjson" | "jsonl" | "jsonlines" | "x-ndjson" | "application/x-ndjson"
    )
}

fn parse_request(
    q: &HashMap<String, String>,
    headers: &HeaderMap,
    body: &Bytes,
) -> Result<Request, QueryError> {
    let ctype = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(|v| {
            v.split(';')
                .next()
                .unwrap_or("")
                .trim()
                .to_ascii_lowercase()
        })
        .unwrap_or_default();
    let mut statement: Option<String> = None;
    let mut format: Option<String> = q.get("format").cloned();
    let mut timeout: Option<String> = q.get("timeout").cloned();
    let truthy = |v: &str| matches!(v.to_ascii_lowercase().as_str(), "true" | "1" | "yes" | "on");
    let mut atomic = q.get("atomic").is_some_and(|v| truthy(v));
    let mut args: Option<Vec<serde_json::Value>> = None;
    let parse_args = |text: &str| -> Result<Vec<serde_json::Value>, QueryError> {
        match serde_json::from_str(text) {
            Ok(serde_json::Value::Array(a)) => Ok(a),
            _ => Err(QueryError::BadRequest(format!(
                "args must be a JSON array of the values of $1, $2, ... (e.g. [7, \"x\"]), got {text:?}"
            ))),
        }
    };
    if let Some(a) = q.get("args") {
        args = Some(parse_args(a)?);
    }
    let raw = || -> Result<Option<String>, QueryError> {
        if body.is_empty() {
            return Ok(None);
        }
        std::str::from_utf8(body)
            .map(|s| Some(s.to_owned()))
            .map_err(|_| QueryError::BadRequest("the request body is not UTF-8".to_owned()))
    };
    if ctype == "application/json" {
        let v: serde_json::Value = serde_json::from_slice(body).map_err(|e| {
            QueryError::BadRequest(format!(
                "the body is not JSON ({e}); send {{\"statement\": \"SELECT ...\"}}"
            ))
        })?;
        match v.get("statement") {
            Some(serde_json::Value::String(s)) => statement = Some(s.clone()),
            _ => {
                return Err(QueryError::BadRequest(
                    "the JSON body has no \"statement\" string; send {\"statement\": \"SELECT ...\"}"
                        .to_owned(),
                ));
            }
        }
        if let Some(serde_json::Value::String(f)) = v.get("format") {
            format = format.or(Some(f.clone()));
        }
        match v.get("timeout") {
            None | Some(serde_json::Value::Null) => {}
            Some(serde_json::Value::String(t)) => timeout = timeout.or(Some(t.clone())),
            Some(serde_json::Value::Number(n)) => timeout = timeout.or(Some(n.to_string())),
            Some(other) => {
                return Err(QueryError::BadRequest(format!(
                    "\"timeout\" must be a duration such as \"5s\" or a number of milliseconds, got {other}"
                )));
            }
        }
        match v.get("args") {
            None | Some(serde_json::Value::Null) => {}
            Some(serde_json::Value::Array(a)) => args = Some(a.clone()),
            Some(other) => {
                return Err(QueryError::BadRequest(format!(
                    "\"args\" must be an array of the values of $1, $2, ..., got {other}"
                )));
            }
        }
        match v.get("atomic") {
            None | Some(serde_json::Value::Null) => {}
            Some(serde_json::Value::Bool(b)) => atomic |= *b,
            Some(other) => {
                return Err(QueryError::BadRequest(format!(
                    "\"atomic\" must be true or false, got {other}"
                )));
            }
        }
    } else if ctype == "application/x-www-form-urlencoded" {
        match serde_urlencoded::from_bytes::<Vec<(String, String)>>(body) {
            Ok(pairs) if pairs.iter().any(|(k, _)| k == "statement") => {
                for (k, v) in pairs {
                    match k.as_str() {
                        "statement" => statement = Some(v),
                        "format" => format = format.or(Some(v)),
                        "timeout" => timeout = timeout.or(Some(v)),
                        "atomic" => atomic |= truthy(&v),
                        "args" => args = Some(parse_args(&v)?),
                        _ => {}
                    }
                }
            }
            _ => statement = raw()?,
        }
    } else {
        statement = raw()?;
    }
    let statement = match statement.or_else(|| q.get("statement").cloned()) {
        Some(s) if !s.trim().is_empty() => s,
        _ => {
            return Err(QueryError::BadRequest(
                "no statement: send it as the body, as {\"statement\": \"...\"} or as statement=..."
                    .to_owned(),
            ));
        }
    };
    // Placeholders $1, $2... take the values of `args` (as the PostgreSQL
    // front end binds parameters: written into the text as literals).
    let wanted = params::count(&statement);
    let statement = match args {
        Some(a) => {
            if a.len() < wanted {
                return Err(QueryError::BadRequest(format!(
                    "the statement uses ${wanted} but args has {} value(s)",
                    a.len()
                )));
            }
            let literals = a
                .iter()
                .enumerate()
                .map(|(i, v)| params::json_literal(i + 1, v))
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| QueryError::BadRequest(e.to_string()))?;
            params::substitute(&statement, &literals)
                .map_err(|e| QueryError::BadRequest(e.to_string()))?
        }
        None if wanted > 0 => {
            return Err(QueryError::BadRequest(format!(
                "the statement uses ${wanted} but the request has no args: send \"args\": [...] with the values of $1, $2, ..."
            )));
        }
        None => statement,
    };
    let accept_ndjson = headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.contains("application/x-ndjson"));
    let timeout = match timeout {
        None => None,
        Some(t) => Some(settings::parse_pg_duration(&t).ok_or_else(|| {
            QueryError::BadRequest(format!(
                "timeout {t:?}: expected a duration such as 5s, 500ms, 2min, or a number of milliseconds"
            ))
        })?),
    };
    Ok(Request {
        statement,
        ndjson: accept_ndjson || format.as_deref().is_some_and(is_ndjson),
        atomic,
        timeout,
    })
}

fn json_string(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| "\"\"".to_owned())
}

fn error_response(id: &str, e: &QueryError, start: Instant, exec: Option<Instant>) -> Response {
    let body = format!(
        "{{\"requestID\":{},\"errors\":[{{\"code\":{},\"msg\":{}}}],\"status\":\"fatal\",\"metrics\":{{\"elapsedTime\":{},\"executionTime\":{},\"resultCount\":0,\"resultSize\":0}}}}\n",
        json_string(id),
        json_string(e.sqlstate()),
        json_string(&e.to_string()),
        json_string(&ms(start.elapsed())),
        json_string(&ms(exec.map_or(Duration::ZERO, |t| t.elapsed()))),
    );
    let status = StatusCode::from_u16(e.http_status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    with_headers(status, id, "application/json", Body::from(body))
}

fn with_headers(status: StatusCode, id: &str, ctype: &'static str, body: Body) -> Response {
    let mut r = (status, body).into_response();
    r.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(ctype));
    if let Ok(v) = HeaderValue::from_str(id) {
        r.headers_mut().insert("x-request-id", v);
    }
    r
}

async fn query(
    State(shared): State<Arc<Shared>>,
    Extension(caller): Extension<Caller>,
    Query(q): Query<HashMap<String, String>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let start = Instant::now();
    let id = request_id();
    let req = match parse_request(&q, &headers, &body)
        .and_then(|r| settings::check_script(&r.statement).map(|_| r))
    {
        Ok(r) => r,
        Err(e) => return error_response(&id, &e, start, None),
    };
    drop(body);
    let timeout = shared.budget.statement_timeout(req.timeout);
    let stmt = match shared.limits.admit(timeout).await {
        Ok(p) => Stmt::new(&shared.limits, p),
        Err(e) => return error_response(&id, &e, start, None),
    };
    let exec = Instant::now();
    let session = Arc::new(SqlSession::new());
    session.set_user(caller.user);
    let run = {
        let (shared, session, req, ctl) = (
            shared.clone(),
            session.clone(),
            req.clone(),
            stmt.ctl.clone(),
        );
        async move {
            let script = run_request(&shared, &session, &req, ctl).await?;
            Ok((script.earlier, Prefetched::read(script.last).await?))
        }
    };
    let caps = ResultCaps {
        rows: shared.budget.result_rows,
        bytes: shared.budget.result_bytes,
    };
    let (earlier, stream) = match stmt.execute(&session, run).await {
        Ok((earlier, last)) => (earlier, stmt.stream_prefetched(session, last, caps)),
        Err(e) => return error_response(&id, &e, start, Some(exec)),
    };
    if req.ndjson {
        ndjson(id, stream)
    } else {
        envelope(id, earlier, stream, start, exec, caps.bytes).await
    }
}

/// Run the request's statements in its own session (see the module doc).
async fn run_request(
    shared: &Shared,
    session: &Arc<SqlSession>,
    req: &Request,
    ctl: Arc<silt_sql::StatementControl>,
) -> Result<Script, SqlError> {
    let engine = &shared.engine;
    if req.atomic {
        engine.execute_in(session, "BEGIN").await?;
        let script = engine
            .execute_script_with(session, &req.statement, Some(ctl))
            .await?;
        let schema = script.last.schema();
        let batches = datafusion::physical_plan::common::collect(script.last)
            .await
            .map_err(SqlError::from);
        let batches = match batches {
            Ok(b) => b,
            Err(e) => {
                drop(engine.execute_in(session, "ROLLBACK").await);
                return Err(e);
            }
        };
        if session.status() != TxnStatus::InTransaction {
            drop(engine.execute_in(session, "ROLLBACK").await);
            return Err(SqlError::Silt(silt::Error::Txn(
                "an atomic request must not end its transaction itself (no COMMIT or ROLLBACK in it); nothing of it after its last COMMIT was kept".to_owned(),
            )));
        }
        engine.execute_in(session, "COMMIT").await?;
        return Ok(Script {
            earlier: script.earlier,
            last: Box::pin(MemoryStream::try_new(batches, schema, None)?),
        });
    }
    let script = engine
        .execute_script_with(session, &req.statement, Some(ctl))
        .await?;
    if session.status() != TxnStatus::Idle {
        drop(engine.execute_in(session, "ROLLBACK").await);
        return Err(SqlError::Silt(silt::Error::Txn(
            "the request ended inside a transaction block (BEGIN without COMMIT); nothing of the block was committed: end it with COMMIT, or send \"atomic\": true".to_owned(),
        )));
    }
    Ok(script)
}

/// The rows of a collected result as a JSON array's items.
fn json_items(batches: &[RecordBatch]) -> Result<String, QueryError> {
    let mut out = String::new();
    let mut first = true;
    for b in batches {
        JsonRows::new(&b.schema())
            .write(b, &mut out, &mut first, "", ",")
            .map_err(|e| {
                QueryError::Sql(silt_sql::SqlError::Runtime(format!(
                    "cannot convert the result to JSON: {e}"
                )))
            })?;
    }
    Ok(out)
}

async fn envelope(
    id: String,
    earlier: Vec<Vec<RecordBatch>>,
    mut stream: Guarded,
    start: Instant,
    exec: Instant,
    max_bytes: usize,
) -> Response {
    // Several statements: each one's result, in order, in "resultSets"
    // ("results" stays the last one's, as AsterixDB answers).
    let mut sets = String::new();
    for (i, b) in earlier.iter().enumerate() {
        match json_items(b) {
            Ok(items) => {
                if i > 0 {
                    sets.push(',');
                }
                sets.push('[');
                sets.push_str(&items);
                sets.push(']');
            }
            Err(e) => return error_response(&id, &e, start, Some(exec)),
        }
    }
    drop(earlier);
    let rows = JsonRows::new(&stream.schema());
    let mut out = String::new();
    let mut first = true;
    let mut count = 0usize;
    while let Some(b) = stream.next().await {
        let b = match b {
            Ok(b) => b,
            Err(e) => return error_response(&id, &e, start, Some(exec)),
        };
        match rows.write(&b, &mut out, &mut first, "", ",") {
            Ok(n) => {
                count += n;
                // The collected JSON is what this request holds in memory.
                if max_bytes > 0 && out.len() + sets.len() > max_bytes {
                    let e = QueryError::Limit(Limit::ResultBytes {
                        limit: max_bytes,
                        rows: count as u64,
                    });
                    return error_response(&id, &e, start, Some(exec));
                }
            }
            Err(e) => {
                let e = QueryError::Sql(silt_sql::SqlError::Runtime(format!(
                    "cannot convert the result to JSON: {e}"
                )));
                return error_response(&id, &e, start, Some(exec));
            }
        }
    }
    let result_sets = if sets.is_empty() {
        String::new()
    } else {
        format!(",\"resultSets\":[{sets},[{out}]]")
    };
    let body = format!(
        "{{\"requestID\":{},\"status\":\"success\",\"results\":[{}]{result_sets},\"metrics\":{{\"elapsedTime\":{},\"executionTime\":{},\"resultCount\":{},\"resultSize\":{}}}}}\n",
        json_string(&id),
        out,
        json_string(&ms(start.elapsed())),
        json_string(&ms(exec.elapsed())),
        count,
        out.len(),
    );
    with_headers(StatusCode::OK, &id, "application/json", Body::from(body))
}

fn ndjson(id: String, stream: Guarded) -> Response {
    let rows = JsonRows::new(&stream.schema());
    let body = futures::stream::unfold(Some((stream, rows)), |state| async move {
        let (mut stream, rows) = state?;
        loop {
            match stream.next().await {
                None => return None,
                Some(Ok(b)) => {
                    if b.num_rows() == 0 {
                        continue;
                    }
                    let mut out = String::new();
                    let mut first = true;
                    match rows.write(&b, &mut out, &mut first, "\n", "") {
                        Ok(_) => {
                            return Some((
                                Ok::<Bytes, Infallible>(Bytes::from(out)),
                                Some((stream, rows)),
                            ));
                        }
                        Err(e) => {
                            let line = error_line(
                                "XX000",
                                &format!("cannot convert the result to JSON: {e}"),
                            );
                            return Some((Ok(Bytes::from(line)), None));
                        }
                    }
                }
                Some(Err(e)) => {
                    let line = error_line(e.sqlstate(), &e.to_string());
                    return Some((Ok(Bytes::from(line)), None));
                }
            }
        }
    });
    with_headers(
        StatusCode::OK,
        &id,
        "application/x-ndjson",
        Body::from_stream(body),
    )
}

fn error_line(code: &str, msg: &str) -> String {
    format!(
        "{{\"error\":{{\"code\":{},\"msg\":{}}}}}\n",
        json_string(code),
        json_string(msg)
    )
}

async fn health(State(shared): State<Arc<Shared>>) -> Response {
    let body = serde_json::json!({
        "status": "ok",
        "running": shared.limits.running(),
        "waiting": shared.limits.waiting(),
        "memory": shared.engine.memory_in_use(),
    });
    axum::Json(body).into_response()
}

async fn stats(State(shared): State<Arc<Shared>>) -> Response {
    let db = shared.engine.database().clone();
    let copies: Vec<serde_json::Value> = shared
        .engine
        .copies_in_progress()
        .into_iter()
        .map(|l| {
            serde_json::json!({
                "table": l.table,
                "bytes": l.bytes,
                "rows": l.rows,
                "committed": l.committed,
                "seconds": l.seconds,
            })
        })
        .collect();
    match tokio::task::spawn_blocking(move || serde_json::to_value(db.stats())).await {
        Ok(Ok(mut v)) => {
            if let Some(o) = v.as_object_mut() {
                o.insert("copies".to_owned(), serde_json::Value::Array(copies));
            }
            axum::Json(v).into_response()
        }
        Ok(Err(e)) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("cannot serialize the statistics: {e}"),
        )
            .into_response(),
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response(),
    }
}
