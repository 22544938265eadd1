//! `silt serve`: SQL over a Silt database for programs that are not Rust.
//!
//! Two front ends share one [`silt_sql::SqlEngine`]:
//!
//! - the **PostgreSQL wire protocol** ([`pg`], built on the `pgwire` crate):
//!   `psql`, psycopg, JDBC, `tokio-postgres`... log in with SCRAM-SHA-256
//!   ([`pg_login`]); simple and extended (prepared, `$1` parameters)
//!   queries;
//! - **HTTP** ([`http`], built on `axum`): `POST /query/service` with
//!   AsterixDB's request and response shapes, NDJSON streaming for large
//!   results, `GET /health`, `GET /stats`.
//!
//! Security ([`auth`], [`tls`], `docs/security.md`): when the database has
//! roles that can log in, both front ends ask for passwords (HTTP also takes
//! bearer tokens) and every statement runs with its role's privileges
//! (`silt_sql::access`); without such roles nobody is asked, and the
//! listeners must be on loopback addresses. With a certificate both speak
//! TLS. Statements that touch files on the server are refused unless a
//! directory for them is configured.
//!
//! Both go through the same [`limits`]: at most `max_concurrent` statements
//! execute at once, up to `queue` more wait (then "server busy"), and each
//! is stopped at its timeout (`query_timeout`, or less with `SET
//! statement_timeout`), by a cancel request, or at shutdown; statements run
//! on tasks of their own so that stopping them stops their work ([`exec`]).
//! Memory per statement and for all, the size of values built by
//! functions, of results, of requests, the number of connections and how
//! long they may stay idle are bounded too (the "resource bounds" of
//! [`ServerConfig`]; see `docs/security.md`, "Resource bounds"). [`Server::shutdown`]
//! stops accepting, lets running statements finish (at most
//! `drain_timeout`), then closes the database, which flushes and
//! checkpoints it.
//!
//! ```no_run
//! # async fn demo() -> Result<(), silt_server::ServerError> {
//! let db = std::sync::Arc::new(silt::Database::open("/tmp/db", silt::DbOptions::default())?);
//! let cfg = silt_server::ServerConfig::default();
//! silt_server::serve(db, cfg, silt_server::shutdown_signal()).await
//! # }
//! ```

pub mod auth;
pub mod cancel;
pub mod cli;
pub mod conns;
pub mod convert;
mod data_rows;
pub mod deadlines;
pub mod error;
pub mod exec;
pub mod frames;
pub mod http;
pub mod http_auth;
pub mod http_pubsub;
pub mod idle;
pub mod limits;
pub mod panics;
pub mod params;
pub mod pg;
pub mod pg_copy;
mod pg_execute;
pub mod pg_login;
pub mod pgconn;
pub mod settings;
pub mod tls;

use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use silt::Database;
use silt_sql::SqlEngine;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;

pub use error::{QueryError, ServerError};

use crate::auth::Auth;
use crate::limits::{Budget, Limits};
use crate::tls::{Tls, TlsFiles};

/// What to listen on and how much work to accept.
#[derive(Clone, Debug)]
pub struct ServerConfig {
    /// PostgreSQL wire protocol address (`None`: no PostgreSQL listener).
    pub pg_addr: Option<SocketAddr>,
    /// HTTP address (`None`: no HTTP listener).
    pub http_addr: Option<SocketAddr>,
    /// Statements executing at once (at least 1).
    pub max_concurrent: usize,
    /// Statements allowed to wait for a free slot; one more gets "server busy".
    pub queue: usize,
    /// Longest a statement may take, from its arrival (waiting included) to
    /// its last row; it is then cancelled. `Duration::ZERO`: no limit.
    pub query_timeout: Duration,
    /// At shutdown, how long running statements may take to finish before
    /// they are cancelled.
    pub drain_timeout: Duration,
    // Security (#28)
    /// Certificate and key for TLS on both listeners (`None`: no TLS).
    pub tls: Option<TlsFiles>,
    /// Refuse PostgreSQL connections that do not use TLS.
    pub tls_required: bool,
    /// The directory statements may read and write files in (`CREATE
    /// EXTERNAL TABLE`, `COPY ... TO`), admins only; `None`: no files.
    pub server_files: Option<PathBuf>,

    // Resource bounds (#28). Zero means "no limit" for each.
    /// Memory DataFusion's operators (sorts, joins, aggregates...) may hold
    /// for one statement; sorts and aggregates spill to disk beyond it,
    /// the rest fail with SQLSTATE 53200.
    pub max_query_memory: usize,
    /// The same for all statements together.
    pub max_server_memory: usize,
    /// The largest string or binary value a function (`repeat`, `lpad`,
    /// `concat`...) may build (SQLSTATE 54000 beyond).
    pub max_value_bytes: usize,
    /// The most result bytes one statement may return (SQLSTATE 54000).
    pub max_result_bytes: usize,
    /// The most result rows one statement may return (SQLSTATE 54000).
    pub max_result_rows: u64,
    /// Open connections, per front end (PostgreSQL: SQLSTATE 53300; HTTP:
    /// 503).
    pub max_connections: usize,
    /// A connection waiting for its client this long outside a
    /// transaction block is closed.
    pub idle_timeout: Duration,
    /// A PostgreSQL session waiting for its client this long inside a
    /// transaction block is closed (the block rolls back).
    pub idle_in_transaction_timeout: Duration,
    /// The longest PostgreSQL message and HTTP request body.
    pub max_request_bytes: usize,
    /// Column images kept for full scans (`silt_sql::column_cache`); 0:
    /// none.
    pub column_cache: usize,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            pg_addr: Some(SocketAddr::from(([127, 0, 0, 1], 5433))),
            http_addr: Some(SocketAddr::from(([127, 0, 0, 1], 8080))),
            max_concurrent: 4,
            queue: 64,
            query_timeout: Duration::from_secs(30),
            drain_timeout: Duration::from_secs(10),
            tls: None,
            tls_required: false,
            server_files: None,
            max_query_memory: 256 << 20,
            max_server_memory: 1 << 30,
            max_value_bytes: 64 << 20,
            max_result_bytes: 256 << 20,
            max_result_rows: 0,
            max_connections: 100,
            idle_timeout: Duration::from_secs(30 * 60),
            idle_in_transaction_timeout: Duration::from_secs(5 * 60),
            max_request_bytes: 16 << 20,
            column_cache: silt_sql::column_cache::DEFAULT_BYTES as usize,
        }
    }
}

/// State shared by every connection of both front ends.
pub(crate) struct Shared {
    pub engine: SqlEngine,
    pub limits: Limits,
    pub auth: Auth,
    pub tls: Option<Tls>,
    pub tls_required: bool,
    pub budget: Budget,
    /// The PostgreSQL sessions' cancel keys (see [`cancel`]).
    pub cancels: Arc<cancel::Cancels>,
}

/// A running server. Dropping it does not stop it; call
/// [`Server::shutdown`] (or trigger a [`ShutdownHandle`] and
/// [`Server::wait`]).
pub struct Server {
    db: Arc<Database>,
    pg_addr: Option<SocketAddr>,
    http_addr: Option<SocketAddr>,
    stop: ShutdownHandle,
    task: JoinHandle<Result<(), ServerError>>,
}

/// Asks a [`Server`] to shut down (cloneable, usable from any task).
#[derive(Clone, Debug)]
pub struct ShutdownHandle(Arc<watch::Sender<bool>>);

impl ShutdownHandle {
    /// Start the graceful shutdown (idempotent).
    pub fn shutdown(&self) {
        self.0.send_replace(true);
    }
}

impl Server {
    /// Bind the listeners (so the addresses are known, port 0 included) and
    /// start serving on the current Tokio runtime.
    pub async fn start(db: Arc<Database>, cfg: ServerConfig) -> Result<Server, ServerError> {
        Server::start_with_engine(SqlEngine::new(db)?, cfg).await
    }

    /// As [`Server::start`], with an engine prepared by the caller (extra
    /// functions or tables registered in its session). Shutting down closes
    /// the engine's database.
    pub async fn start_with_engine(
        engine: SqlEngine,
        cfg: ServerConfig,
    ) -> Result<Server, ServerError> {
        let db = engine.database().clone();
        if cfg.pg_addr.is_none() && cfg.http_addr.is_none() {
            return Err(ServerError::Config(
                "nothing to listen on: give a PostgreSQL address, an HTTP address, or both"
                    .to_owned(),
            ));
        }
        if cfg.max_concurrent == 0 {
            return Err(ServerError::Config(
                "max_concurrent must be at least 1".to_owned(),
            ));
        }
        let auth = Auth::new(Auth::has_login_roles(&db));
        for (addr, flag) in [(cfg.pg_addr, "--pg"), (cfg.http_addr, "--http")] {
            if let Some(a) = addr
                && !a.ip().is_loopback()
                && !auth.required(&db)
            {
                return Err(ServerError::Config(format!(
                    "{flag} {a} is not a loopback address, and no user can log in to this database: anyone who reaches the port could do anything. Add an admin first (`silt --db DIR user add NAME --admin`), or listen on 127.0.0.1"
                )));
            }
        }
        let tls = cfg.tls.as_ref().map(Tls::load).transpose()?;
        if cfg.tls_required && tls.is_none() {
            return Err(ServerError::Config(
                "TLS is required but no certificate was given (--tls-cert and --tls-key)"
                    .to_owned(),
            ));
        }
        engine.set_column_cache_bytes(cfg.column_cache as u64);
        engine.set_file_access(match &cfg.server_files {
            None => silt_sql::access::FileAccess::Off,
            Some(d) => {
                let dir = d.canonicalize().map_err(|e| {
                    ServerError::Config(format!(
                        "--server-files {}: {e} (it must be an existing directory)",
                        d.display()
                    ))
                })?;
                if !dir.is_dir() {
                    return Err(ServerError::Config(format!(
                        "--server-files {}: not a directory",
                        d.display()
                    )));
                }
                silt_sql::access::FileAccess::Within(dir)
            }
        });
        let pg_listener = match cfg.pg_addr {
            Some(a) => Some(bind(a, "PostgreSQL").await?),
            None => None,
        };
        let http_listener = match cfg.http_addr {
            Some(a) => Some(bind(a, "HTTP").await?),
            None => None,
        };
        let local = |l: &Option<TcpListener>| -> Result<Option<SocketAddr>, ServerError> {
            l.as_ref()
                .map(|l| l.local_addr().map_err(ServerError::Io))
                .transpose()
        };
        let pg_addr = local(&pg_listener)?;
        let http_addr = local(&http_listener)?;

        panics::install();
        let budget = Budget::of(&cfg);
        engine.set_bounds(silt_sql::Bounds {
            query_memory: budget.query_memory,
            server_memory: budget.server_memory,
            value_bytes: budget.value_bytes,
        });
        // One worker thread per execution slot, at least one per core.
        let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
        let runtime = Arc::new(
            exec::QueryRuntime::new(cfg.max_concurrent.clamp(cores, 256))
                .map_err(ServerError::Io)?,
        );
        let (kill_tx, kill_rx) = watch::channel(false);
        let shared = Arc::new(Shared {
            engine,
            limits: Limits::new(cfg.max_concurrent, cfg.queue, kill_rx.clone(), runtime),
            budget,
            auth,
            tls,
            tls_required: cfg.tls_required,
            cancels: Arc::new(cancel::Cancels::default()),
        });
        let (stop_tx, stop_rx) = watch::channel(false);
        let stop = ShutdownHandle(Arc::new(stop_tx));

        let pg_task =
            pg_listener.map(|l| tokio::spawn(pg::accept_loop(l, shared.clone(), stop_rx.clone())));
        let http_task =
            http_listener.map(|l| tokio::spawn(http::serve(l, shared.clone(), stop_rx.clone())));

        let task = tokio::spawn(supervise(
            db.clone(),
            shared,
            stop_rx,
            kill_tx,
            pg_task,
            http_task,
            cfg.drain_timeout,
        ));
        Ok(Server {
            db,
            pg_addr,
            http_addr,
            stop,
            task,
        })
    }

    /// The database served.
    pub fn database(&self) -> &Arc<Database> {
        &self.db
    }

    /// The bound PostgreSQL address.
    pub fn pg_addr(&self) -> Option<SocketAddr> {
        self.pg_addr
    }

    /// The bound HTTP address.
    pub fn http_addr(&self) -> Option<SocketAddr> {
        self.http_addr
    }

    /// A handle that starts the shutdown from elsewhere.
    pub fn shutdown_handle(&self) -> ShutdownHandle {
        self.stop.clone()
    }

    /// Wait until the server has stopped (after a [`ShutdownHandle`] fired)
    /// and the database is closed.
    pub async fn wait(self) -> Result<(), ServerError> {
        match self.task.await {
            Ok(r) => r,
            Err(e) => Err(ServerError::Task(e.to_string())),
        }
    }

    /// Shut down gracefully: stop accepting, let running statements finish
    /// (at most `drain_timeout`), cancel the rest, close the database.
    pub async fn shutdown(self) -> Result<(), ServerError> {
        self.stop.shutdown();
        self.wait().await
    }
}

async fn bind(addr: SocketAddr, what: &'static str) -> Result<TcpListener, ServerError> {
    TcpListener::bind(addr)
        .await
        .map_err(|source| ServerError::Bind { what, addr, source })
}

/// Wait for the stop signal, then drain, cancel and close.
async fn supervise(
    db: Arc<Database>,
    shared: Arc<Shared>,
    mut stop: watch::Receiver<bool>,
    kill: watch::Sender<bool>,
    pg_task: Option<JoinHandle<pg::Connections>>,
    http_task: Option<JoinHandle<()>>,
    drain: Duration,
) -> Result<(), ServerError> {
    let _ = stop.wait_for(|v| *v).await;
    // The accept loops see the same signal and stop accepting.
    let drained = shared.limits.drain(drain).await;
    if !drained {
        tracing::warn!("statements still running after {drain:?}; cancelling them");
    }
    // Cancel whatever is still running (streams end with an error).
    kill.send_replace(true);
    if let Some(t) = pg_task
        && let Ok(mut conns) = t.await
    {
        // Idle sessions and cancelled statements: close their sockets.
        conns.abort_all();
        while conns.join_next().await.is_some() {}
    }
    if let Some(mut t) = http_task
        && tokio::time::timeout(Duration::from_secs(2), &mut t)
            .await
            .is_err()
    {
        t.abort();
    }
    drop(shared);
    tokio::task::spawn_blocking(move || db.close())
        .await
        .map_err(|e| ServerError::Task(e.to_string()))?
        .map_err(ServerError::Close)
}

/// Serve until `shutdown` completes, then shut down gracefully (see
/// [`Server::shutdown`]).
pub async fn serve(
    db: Arc<Database>,
    cfg: ServerConfig,
    shutdown: impl Future<Output = ()>,
) -> Result<(), ServerError> {
    let server = Server::start(db, cfg).await?;
    shutdown.await;
    server.shutdown().await
}

/// Completes on SIGINT (Ctrl-C) or SIGTERM.
pub async fn shutdown_signal() {
    let ctrl_c = async {
        if tokio::signal::ctrl_c().await.is_err() {
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => {}
        _ = term => {}
    }
}
