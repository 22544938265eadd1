//! Admission: a semaphore bounds the statements executing at once, a
//! counter bounds those waiting, each gets a deadline from its timeout, and
//! a kill switch stops everything at shutdown. How a statement runs under
//! its deadline is [`crate::exec`]; the limits on memory, values, results,
//! connections and idle sessions are [`Budget`].

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, Semaphore, watch};
use tokio::time::Instant;

use crate::ServerConfig;
use crate::error::{QueryError, fmt_duration};

/// The resource limits of the server (from [`ServerConfig`]'s "resource
/// bounds" fields; zero means "no limit" everywhere).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Budget {
    /// The default statement timeout of a session, and the most any
    /// statement may run (a session may only lower it).
    pub timeout: Duration,
    pub query_memory: usize,
    pub server_memory: usize,
    pub value_bytes: usize,
    pub result_bytes: usize,
    pub result_rows: u64,
    pub connections: usize,
    pub idle: Duration,
    pub idle_in_transaction: Duration,
    pub request_bytes: usize,
}

impl Budget {
    pub fn of(cfg: &ServerConfig) -> Budget {
        Budget {
            timeout: cfg.query_timeout,
            query_memory: cfg.max_query_memory,
            server_memory: cfg.max_server_memory,
            value_bytes: cfg.max_value_bytes,
            result_bytes: cfg.max_result_bytes,
            result_rows: cfg.max_result_rows,
            connections: cfg.max_connections,
            idle: cfg.idle_timeout,
            idle_in_transaction: cfg.idle_in_transaction_timeout,
            request_bytes: cfg.max_request_bytes,
        }
    }

    /// The timeout of a statement whose session asked for `wanted` (`None`:
    /// the server's default; zero: none of its own). The server's timeout
    /// is a ceiling: zero only when the server has none.
    pub fn statement_timeout(&self, wanted: Option<Duration>) -> Duration {
        match (wanted, self.timeout.is_zero()) {
            (None, _) => self.timeout,
            (Some(w), true) => w,
            (Some(w), false) if w.is_zero() => self.timeout,
            (Some(w), false) => w.min(self.timeout),
        }
    }
}

/// The server's admission control.
pub struct Limits {
    sem: Arc<Semaphore>,
    max: usize,
    queue: usize,
    waiting: AtomicUsize,
    closing: AtomicBool,
    pub(crate) kill: watch::Receiver<bool>,
    /// Where statements execute (see [`crate::exec::QueryRuntime`]).
    pub(crate) runtime: Arc<crate::exec::QueryRuntime>,
    /// The running statements' deadlines.
    pub(crate) deadlines: crate::deadlines::Deadlines,
}

/// The right to execute; released when dropped.
pub struct Permit {
    _permit: OwnedSemaphorePermit,
    /// When the statement must be finished.
    pub deadline: Option<Instant>,
    /// The timeout the deadline comes from.
    pub timeout: Duration,
    /// The deadline's watch (see [`crate::deadlines`]), once the statement
    /// has a stop switch.
    pub(crate) watch: Option<crate::deadlines::Watch>,
}

struct Waiting<'a>(&'a AtomicUsize);

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

impl Limits {
    pub fn new(
        max: usize,
        queue: usize,
        kill: watch::Receiver<bool>,
        runtime: Arc<crate::exec::QueryRuntime>,
    ) -> Limits {
        let max = max.max(1);
        Limits {
            runtime,
            sem: Arc::new(Semaphore::new(max)),
            max,
            queue,
            waiting: AtomicUsize::new(0),
            closing: AtomicBool::new(false),
            kill,
            deadlines: crate::deadlines::Deadlines::new(),
        }
    }

    /// Statements executing now.
    pub fn running(&self) -> usize {
        self.max.saturating_sub(self.sem.available_permits())
    }

    /// Statements waiting for a slot now.
    pub fn waiting(&self) -> usize {
        self.waiting.load(Ordering::Acquire)
    }

    /// Wait for a slot: at once if one is free, else in the queue (if it
    /// has room) until one frees up or `timeout` (zero: none) passes. The
    /// statement must finish within `timeout` of its arrival.
    pub async fn admit(&self, timeout: Duration) -> Result<Permit, QueryError> {
        let start = Instant::now();
        let deadline = (!timeout.is_zero()).then(|| start + timeout);
        if self.closing.load(Ordering::Acquire) {
            return Err(QueryError::ShuttingDown);
        }
        let permit = match self.sem.clone().try_acquire_owned() {
            Ok(p) => p,
            Err(tokio::sync::TryAcquireError::Closed) => return Err(QueryError::ShuttingDown),
            Err(tokio::sync::TryAcquireError::NoPermits) => {
                if self.waiting.fetch_add(1, Ordering::AcqRel) >= self.queue {
                    self.waiting.fetch_sub(1, Ordering::AcqRel);
                    return Err(QueryError::Busy(format!(
                        "{} statements are running and {} waiting (the limits, --max-concurrent and --queue); retry later",
                        self.max, self.queue
                    )));
                }
                let _w = Waiting(&self.waiting);
                let acquire = self.sem.clone().acquire_owned();
                let r = match deadline {
                    Some(d) => match tokio::time::timeout_at(d, acquire).await {
                        Ok(r) => r,
                        Err(_) => {
                            return Err(QueryError::Busy(format!(
                                "no free slot within the statement timeout of {} ({} statements running); retry later",
                                fmt_duration(timeout),
                                self.max
                            )));
                        }
                    },
                    None => acquire.await,
                };
                r.map_err(|_| QueryError::ShuttingDown)?
            }
        };
        if self.closing.load(Ordering::Acquire) {
            return Err(QueryError::ShuttingDown);
        }
        Ok(Permit {
            _permit: permit,
            deadline,
            timeout,
            watch: None,
        })
    }

    /// Stop admitting and wait (at most `within`) until no statement runs.
    /// Returns whether they all finished.
    pub async fn drain(&self, within: Duration) -> bool {
        self.closing.store(true, Ordering::Release);
        let n = u32::try_from(self.max).unwrap_or(u32::MAX);
        let all = self.sem.acquire_many(n);
        let ok = matches!(tokio::time::timeout(within, all).await, Ok(Ok(_)));
        self.sem.close();
        ok
    }
}

/// A count of open connections against a cap (zero: no cap).
#[derive(Debug, Default)]
pub struct ConnCount {
    open: AtomicUsize,
}

/// One counted connection; uncounted when dropped.
#[derive(Debug)]
pub struct ConnSlot(Arc<ConnCount>);

impl Drop for ConnSlot {
    fn drop(&mut self) {
        self.0.open.fetch_sub(1, Ordering::AcqRel);
    }
}

impl ConnCount {
    /// Count one more connection, unless `max` are open.
    pub fn try_open(self: &Arc<Self>, max: usize) -> Option<ConnSlot> {
        self.open
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (max == 0 || n < max).then_some(n + 1)
            })
            .ok()
            .map(|_| ConnSlot(self.clone()))
    }

    /// Connections open now.
    pub fn open(&self) -> usize {
        self.open.load(Ordering::Acquire)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn session_timeouts_stay_under_the_servers() {
        let cfg = ServerConfig {
            query_timeout: Duration::from_secs(30),
            ..ServerConfig::default()
        };
        let b = Budget::of(&cfg);
        let s = Duration::from_secs;
        assert_eq!(b.statement_timeout(None), s(30));
        assert_eq!(b.statement_timeout(Some(s(5))), s(5));
        assert_eq!(b.statement_timeout(Some(s(60))), s(30));
        assert_eq!(b.statement_timeout(Some(Duration::ZERO)), s(30));
        let open = Budget {
            timeout: Duration::ZERO,
            ..b
        };
        assert_eq!(open.statement_timeout(Some(s(60))), s(60));
        assert_eq!(open.statement_timeout(Some(Duration::ZERO)), Duration::ZERO);
    }

    #[test]
    fn connection_count_caps() {
        let c = Arc::new(ConnCount::default());
        let a = c.try_open(2).unwrap();
        let _b = c.try_open(2).unwrap();
        assert!(c.try_open(2).is_none());
        drop(a);
        assert!(c.try_open(2).is_some());
        assert_eq!(c.open(), 1);
    }
}
