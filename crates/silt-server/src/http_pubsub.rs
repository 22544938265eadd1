//! `GET /pubsub/{space}/listen?uid=U`: a subscriber's live feed of a
//! pub/sub space (`silt::pubsub` live delivery) over HTTP, pushed as the
//! matches commit.
//!
//! - **Formats**: NDJSON by default (one delivery per line: `{"seq",
//!   "uid", "sid", "id", "pid", "tp", "tmax", "desc"}`; a blank line every
//!   `heartbeat` seconds while nothing comes, so proxies keep the
//!   connection), or server-sent events with `Accept: text/event-stream`
//!   or `format=sse` (`id:` the sequence number, `data:` the JSON; a
//!   comment line as the heartbeat).
//! - **Resuming**: the feed starts after the subscriber's durable cursor.
//!   Deliveries are acknowledged explicitly, never by being sent (a
//!   client that dies with deliveries unread gets them again): reconnect
//!   with `after=SEQ` (or, for server-sent events, the `Last-Event-ID`
//!   header a browser's `EventSource` sends by itself), which acknowledges
//!   everything up to `SEQ` before the feed resumes; or acknowledge
//!   mid-stream through SQL (`SELECT * FROM pubsub_ack('space', uid,
//!   seq)`).
//! - **Ending**: `max=N` ends the feed after N deliveries, `idle=S` after
//!   S seconds with none (both for scripts and tests; by default it runs
//!   until the client goes away or the server stops).
//! - **Privileges**: reading the feed needs read on the space's datasets;
//!   `after` (an acknowledgement) needs write too.
//!
//! Each feed holds one blocking thread that waits on the space's
//! notifier; the server's connection cap bounds them.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::Extension;
use axum::body::{Body, Bytes};
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use silt::pubsub::{Delivery, Listener};
use silt_sql::SqlError;

use crate::Shared;
use crate::http_auth::Caller;

/// How long one wait of the feed's thread lasts before it checks that the
/// client is still there.
const WAIT_SLICE: Duration = Duration::from_millis(250);
/// Deliveries in flight between the feed's thread and the connection.
const CHANNEL: usize = 256;
/// The default and the bounds of `heartbeat`, seconds.
const HEARTBEAT: u64 = 15;

/// The feed's parameters.
struct Params {
    uid: i64,
    after: Option<i64>,
    sse: bool,
    max: Option<u64>,
    idle: Option<Duration>,
    heartbeat: Duration,
}

fn bad(msg: String) -> Response {
    let body = serde_json::json!({"errors": [{"code": "22023", "msg": msg}], "status": "fatal"});
    (StatusCode::BAD_REQUEST, axum::Json(body)).into_response()
}

fn failed(e: &SqlError) -> Response {
    let status = match e {
        SqlError::Auth(_) | SqlError::PermissionDenied(_) => StatusCode::FORBIDDEN,
        SqlError::Silt(silt::Error::Config(m)) if m.starts_with("no pub/sub space") => {
            StatusCode::NOT_FOUND
        }
        _ => StatusCode::BAD_REQUEST,
    };
    let code = if status == StatusCode::FORBIDDEN {
        "42501"
    } else {
        "22023"
    };
    let body =
        serde_json::json!({"errors": [{"code": code, "msg": e.to_string()}], "status": "fatal"});
    (status, axum::Json(body)).into_response()
}

fn params(q: &HashMap<String, String>, headers: &HeaderMap) -> Result<Params, String> {
    let int = |k: &str| -> Result<Option<i64>, String> {
        q.get(k)
            .map(|v| {
                v.parse::<i64>()
                    .map_err(|_| format!("`{k}` must be an integer, got `{v}`"))
            })
            .transpose()
    };
    let uid = int("uid")?.ok_or("the subscriber is missing: add ?uid=N")?;
    let sse = match q.get("format").map(|f| f.to_ascii_lowercase()) {
        Some(f) if f == "sse" => true,
        Some(f) if f == "ndjson" => false,
        Some(f) => return Err(format!("`format` is ndjson or sse, got `{f}`")),
        None => headers
            .get(header::ACCEPT)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.contains("text/event-stream")),
    };
    let last_event = headers
        .get("last-event-id")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<i64>().ok());
    let after = int("after")?.or(if sse { last_event } else { None });
    let nonneg = |k: &str| -> Result<Option<u64>, String> {
        match int(k)? {
            Some(v) if v < 0 => Err(format!("`{k}` must not be negative, got {v}")),
            v => Ok(v.map(|v| v as u64)),
        }
    };
    let heartbeat = nonneg("heartbeat")?.unwrap_or(HEARTBEAT);
    if !(1..=3600).contains(&heartbeat) {
        return Err(format!(
            "`heartbeat` is seconds from 1 to 3600, got {heartbeat}"
        ));
    }
    Ok(Params {
        uid,
        after,
        sse,
        max: nonneg("max")?,
        idle: nonneg("idle")?.map(Duration::from_secs),
        heartbeat: Duration::from_secs(heartbeat),
    })
}

/// The route (see the module doc).
pub(crate) async fn listen(
    State(shared): State<Arc<Shared>>,
    Extension(caller): Extension<Caller>,
    Path(space): Path<String>,
    Query(q): Query<HashMap<String, String>>,
    headers: HeaderMap,
) -> Response {
    let p = match params(&q, &headers) {
        Ok(p) => p,
        Err(m) => return bad(m),
    };
    let db = shared.engine.database().clone();
    let (uid, after) = (p.uid, p.after);
    // Open the feed (and acknowledge) before answering, so that a refusal
    // is the response's status.
    let opened = tokio::task::spawn_blocking(move || -> Result<Listener, SqlError> {
        let ps = silt_sql::pubsub::space_for(&db, caller.user.as_deref(), &space, after.is_some())?;
        if let Some(seq) = after {
            // A listener acknowledges only what it handed out: read up to
            // `seq`, acknowledge, and leave that listener.
            let mut a = ps.listen(uid)?;
            let mut top = a.cursor();
            while top < seq {
                match a.try_next()? {
                    Some(d) if d.seq <= seq => top = d.seq,
                    _ => break,
                }
            }
            a.ack(top)?;
        }
        Ok(ps.listen(uid)?)
    })
    .await;
    let listener = match opened {
        Ok(Ok(l)) => l,
        Ok(Err(e)) => return failed(&e),
        Err(e) => return failed(&SqlError::Runtime(format!("the feed's thread failed: {e}"))),
    };
    stream(listener, p)
}

/// The response: deliveries from a blocking thread, through a channel.
fn stream(mut l: Listener, p: Params) -> Response {
    let (tx, mut rx) = tokio::sync::mpsc::channel::<Result<Delivery, String>>(CHANNEL);
    tokio::task::spawn_blocking(move || {
        loop {
            match l.next_within(Some(WAIT_SLICE)) {
                Ok(Some(d)) => {
                    if tx.blocking_send(Ok(d)).is_err() {
                        return;
                    }
                }
                Ok(None) if tx.is_closed() => return,
                Ok(None) => {}
                Err(e) => {
                    let _ = tx.blocking_send(Err(e.to_string()));
                    return;
                }
            }
        }
    });
    let sse = p.sse;
    let body = async_stream(move |out| async move {
        let mut sent = 0u64;
        let mut last = Instant::now();
        loop {
            if p.max.is_some_and(|m| sent >= m) {
                return;
            }
            let wait = match p.idle {
                Some(idle) => p.heartbeat.min(idle.saturating_sub(last.elapsed())),
                None => p.heartbeat,
            };
            match tokio::time::timeout(wait, rx.recv()).await {
                Ok(Some(Ok(d))) => {
                    sent += 1;
                    last = Instant::now();
                    let json = silt_sql::pubsub::delivery_json(&d).to_string();
                    let chunk = if sse {
                        format!("id: {}\ndata: {json}\n\n", d.seq)
                    } else {
                        format!("{json}\n")
                    };
                    if out.send(Bytes::from(chunk)).await.is_err() {
                        return;
                    }
                }
                Ok(Some(Err(e))) => {
                    let err = serde_json::json!({"error": {"code": "XX000", "msg": e}}).to_string();
                    let chunk = if sse {
                        format!("event: error\ndata: {err}\n\n")
                    } else {
                        format!("{err}\n")
                    };
                    let _ = out.send(Bytes::from(chunk)).await;
                    return;
                }
                Ok(None) => return,
                Err(_) => {
                    if p.idle.is_some_and(|idle| last.elapsed() >= idle) {
                        return;
                    }
                    let beat = if sse { ": keepalive\n\n" } else { "\n" };
                    if out.send(Bytes::from_static(beat.as_bytes())).await.is_err() {
                        return;
                    }
                }
            }
        }
    });
    let ctype = if sse {
        "text/event-stream"
    } else {
        "application/x-ndjson"
    };
    let mut r = (StatusCode::OK, body).into_response();
    r.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(ctype));
    r.headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    r
}

/// A body fed by `produce`, which sends its chunks into a channel (the
/// body ends when `produce` returns or the client goes away).
fn async_stream<F, Fut>(produce: F) -> Body
where
    F: FnOnce(tokio::sync::mpsc::Sender<Bytes>) -> Fut,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let (tx, rx) = tokio::sync::mpsc::channel::<Bytes>(16);
    tokio::spawn(produce(tx));
    let chunks = futures::stream::unfold(rx, |mut rx| async move {
        rx.recv()
            .await
            .map(|b| (Ok::<Bytes, std::convert::Infallible>(b), rx))
    });
    Body::from_stream(chunks)
}
