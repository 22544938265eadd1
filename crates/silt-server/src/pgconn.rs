//! One PostgreSQL connection, from its first byte to its close.
//!
//! `pgwire::tokio::process_socket` reads messages straight from the socket
//! and has no idle timeouts, so [`serve`] runs the connection itself with
//! `pgwire`'s own pieces (`negotiate_tls`, `process_message`,
//! `process_error`, the handlers) and adds:
//!
//! - the [`FrameGuard`](crate::frames::FrameGuard) between the (TLS)
//!   stream and `pgwire`'s codec: a malformed message gets a FATAL
//!   `08P01` and the connection closes, instead of a panic in the decoder;
//! - a startup deadline ([`STARTUP_TIMEOUT`], as PostgreSQL's
//!   `authentication_timeout`) and idle timeouts: a session waiting for its
//!   client longer than `idle` outside a transaction block is closed with
//!   FATAL `57P05` (PostgreSQL's `idle_session_timeout`), inside one longer
//!   than `idle_in_transaction` with FATAL `25P03` (its
//!   `idle_in_transaction_session_timeout`; the block rolls back);
//! - the connection cap: a connection over `--max-connections` is still
//!   read up to its startup message (so that a cancel request, which comes
//!   on a connection of its own, works even when the server is full), and
//!   then refused with FATAL `53300` "too many connections";
//! - panics: a panic while decoding or handling a message is caught,
//!   answered with FATAL `XX000` and ends this connection only (see
//!   [`crate::panics`] for the log).

use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Duration;

use futures::{FutureExt, SinkExt, StreamExt};
use pgwire::api::auth::StartupHandler;
use pgwire::api::cancel::CancelHandler;
use pgwire::api::copy::CopyHandler;
use pgwire::api::query::{ExtendedQueryHandler, SimpleQueryHandler};
use pgwire::api::{ClientInfo, ErrorHandler, PgWireConnectionState, PgWireServerHandlers};
use pgwire::error::ErrorInfo;
use pgwire::messages::{PgWireBackendMessage, PgWireFrontendMessage};
use pgwire::tokio::TlsAcceptor;
use pgwire::tokio::server::{
    MaybeTls, PgWireMessageServerCodec, negotiate_tls, process_error, process_message,
};
use silt_sql::{SqlSession, TxnStatus};
use tokio::net::TcpStream;
use tokio::time::Instant;
use tokio_util::codec::{Framed, FramedParts};

use crate::frames::FrameGuard;

/// How long a client has from connecting to being authenticated.
pub const STARTUP_TIMEOUT: Duration = Duration::from_secs(60);
/// The same for a connection that is going to be refused.
pub const REFUSED_STARTUP_TIMEOUT: Duration = Duration::from_secs(5);

/// The limits of one connection.
#[derive(Clone)]
pub struct ConnOpts {
    /// Under the connection cap (else it is refused at its startup message).
    pub admitted: bool,
    /// The cap, for the refusal's message.
    pub max_connections: usize,
    pub idle: Duration,
    pub idle_in_transaction: Duration,
    /// The longest frontend message (zero: `pgwire`'s limits).
    pub max_message: usize,
    /// The session, for its transaction status.
    pub session: Option<Arc<SqlSession>>,
}

type Socket<S> = Framed<FrameGuard<MaybeTls>, PgWireMessageServerCodec<S>>;

async fn fatal<S>(socket: &mut Socket<S>, code: &str, msg: String) {
    let info = ErrorInfo::new("FATAL".to_owned(), code.to_owned(), msg);
    // The client may be gone already: nothing to do then.
    let _ = socket
        .send(PgWireBackendMessage::ErrorResponse(info.into()))
        .await;
    let _ = socket.close().await;
}

/// Serve one PostgreSQL connection with `handlers` (see the module doc).
pub async fn serve<H: PgWireServerHandlers>(
    tcp: TcpStream,
    tls: Option<TlsAcceptor>,
    handlers: H,
    opts: ConnOpts,
) {
    run(
        tcp,
        tls,
        opts,
        handlers.startup_handler(),
        handlers.simple_query_handler(),
        handlers.extended_query_handler(),
        handlers.copy_handler(),
        handlers.cancel_handler(),
        handlers.error_handler(),
    )
    .await;
}

#[allow(clippy::too_many_arguments)]
async fn run<A, Q, EQ, C, CR, E>(
    tcp: TcpStream,
    tls: Option<TlsAcceptor>,
    opts: ConnOpts,
    startup: Arc<A>,
    simple: Arc<Q>,
    extended: Arc<EQ>,
    copy: Arc<C>,
    cancel: Arc<CR>,
    errors: Arc<E>,
) where
    A: StartupHandler,
    Q: SimpleQueryHandler,
    EQ: ExtendedQueryHandler,
    C: CopyHandler,
    CR: CancelHandler,
    E: ErrorHandler,
{
    let startup_deadline = Instant::now()
        + if opts.admitted {
            STARTUP_TIMEOUT
        } else {
            REFUSED_STARTUP_TIMEOUT
        };
    let negotiated =
        tokio::time::timeout_at(startup_deadline, negotiate_tls::<EQ::Statement>(tcp, tls)).await;
    let Ok(Ok(Some(socket))) = negotiated else {
        return;
    };
    let old = socket.into_parts();
    let guard = FrameGuard::new(old.io, old.read_buf, opts.max_message);
    let mut parts = FramedParts::new(guard, old.codec);
    parts.write_buf = old.write_buf;
    let mut socket: Socket<EQ::Statement> = Framed::from_parts(parts);
    // Not a timer per message (see `crate::idle`).
    let mut idle_timer = crate::idle::IdleTimer::new();

    loop {
        let state = socket.state();
        let deadline = match state {
            PgWireConnectionState::AwaitingStartup
            | PgWireConnectionState::AuthenticationInProgress => Some(startup_deadline),
            PgWireConnectionState::ReadyForQuery | PgWireConnectionState::AwaitingSync => {
                let in_block = opts
                    .session
                    .as_ref()
                    .is_some_and(|s| s.status() != TxnStatus::Idle);
                let idle = if in_block {
                    opts.idle_in_transaction
                } else {
                    opts.idle
                };
                (!idle.is_zero()).then(|| Instant::now() + idle)
            }
            _ => None,
        };
        let next = AssertUnwindSafe(socket.next()).catch_unwind();
        let waited = match deadline {
            Some(d) => idle_timer.timeout_at(d, next).await,
            None => Ok(next.await),
        };
        let got = match waited {
            Ok(got) => got,
            Err(_) => {
                let (code, msg) = match state {
                    PgWireConnectionState::AwaitingStartup
                    | PgWireConnectionState::AuthenticationInProgress => (
                        "08006",
                        "canceling authentication due to timeout".to_owned(),
                    ),
                    _ if opts
                        .session
                        .as_ref()
                        .is_some_and(|s| s.status() != TxnStatus::Idle) =>
                    {
                        (
                            "25P03",
                            format!(
                                "terminating connection due to idle-in-transaction timeout ({}, --idle-in-transaction-timeout); the transaction block was rolled back",
                                crate::error::fmt_duration(opts.idle_in_transaction)
                            ),
                        )
                    }
                    _ => (
                        "57P05",
                        format!(
                            "terminating connection due to idle-session timeout ({}, --idle-timeout)",
                            crate::error::fmt_duration(opts.idle)
                        ),
                    ),
                };
                fatal(&mut socket, code, msg).await;
                return;
            }
        };
        let msg = match got {
            Err(_panic) => {
                fatal(
                    &mut socket,
                    "XX000",
                    "internal error while reading a message".to_owned(),
                )
                .await;
                return;
            }
            Ok(None) => return,
            Ok(Some(Err(e))) => {
                fatal(&mut socket, "08P01", format!("protocol violation: {e}")).await;
                return;
            }
            Ok(Some(Ok(m))) => m,
        };
        match &msg {
            PgWireFrontendMessage::Terminate(_) => return,
            PgWireFrontendMessage::Startup(_) if !opts.admitted => {
                fatal(
                    &mut socket,
                    "53300",
                    format!(
                        "sorry, too many clients already ({} connections, --max-connections)",
                        opts.max_connections
                    ),
                )
                .await;
                return;
            }
            _ => {}
        }
        let is_extended = match state {
            PgWireConnectionState::CopyInProgress(extended) => extended,
            _ => msg.is_extended_query(),
        };
        let is_cancel = matches!(msg, PgWireFrontendMessage::CancelRequest(_));
        let handled = AssertUnwindSafe(process_message(
            msg,
            &mut socket,
            startup.clone(),
            simple.clone(),
            extended.clone(),
            copy.clone(),
            cancel.clone(),
        ))
        .catch_unwind()
        .await;
        match handled {
            Err(_panic) => {
                fatal(
                    &mut socket,
                    "XX000",
                    "internal error while handling a message".to_owned(),
                )
                .await;
                return;
            }
            Ok(Err(mut e)) => {
                errors.on_error(&socket, &mut e);
                let is_fatal = e.is_fatal();
                if process_error(&mut socket, e, is_extended).await.is_err() || is_fatal {
                    return;
                }
            }
            Ok(Ok(())) => {}
        }
        if is_cancel {
            return;
        }
    }
}
