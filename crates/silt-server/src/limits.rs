//! Admission and cancellation: a semaphore bounds the statements executing
//! at once, a counter bounds those waiting, a deadline bounds each one, and
//! a kill switch cancels everything at shutdown.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::execution::SendableRecordBatchStream;
use futures::{Stream, StreamExt};
use silt_sql::SqlError;
use tokio::sync::{OwnedSemaphorePermit, Semaphore, watch};
use tokio::time::Instant;

use crate::error::{QueryError, fmt_duration};

/// The server's admission control.
pub struct Limits {
    sem: Arc<Semaphore>,
    max: usize,
    queue: usize,
    waiting: AtomicUsize,
    closing: AtomicBool,
    timeout: Duration,
    kill: watch::Receiver<bool>,
}

/// The right to execute; released when dropped.
pub struct Permit {
    _permit: OwnedSemaphorePermit,
    /// When the statement must be finished.
    pub deadline: Option<Instant>,
}

struct Waiting<'a>(&'a AtomicUsize);

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

impl Limits {
    pub fn new(max: usize, queue: usize, timeout: Duration, kill: watch::Receiver<bool>) -> Limits {
        let max = max.max(1);
        Limits {
            sem: Arc::new(Semaphore::new(max)),
            max,
            queue,
            waiting: AtomicUsize::new(0),
            closing: AtomicBool::new(false),
            timeout,
            kill,
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

    /// The configured per-statement timeout (zero: none).
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// Wait for a slot: at once if one is free, else in the queue (if it
    /// has room) until one frees up or the timeout passes.
    pub async fn admit(&self) -> Result<Permit, QueryError> {
        let start = Instant::now();
        let deadline = (!self.timeout.is_zero()).then(|| start + self.timeout);
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
                        "{} statements are running and {} waiting (the limits); retry later",
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
                                "no free slot within the query timeout of {} ({} statements running); retry later",
                                fmt_duration(self.timeout),
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

    /// Run `fut` under the permit's deadline and the kill switch.
    pub async fn bounded<T, F>(&self, permit: &Permit, fut: F) -> Result<T, QueryError>
    where
        F: Future<Output = Result<T, SqlError>>,
    {
        let mut kill = self.kill.clone();
        let killed = async move {
            let _ = kill.wait_for(|v| *v).await;
        };
        let timed = async {
            match permit.deadline {
                Some(d) => match tokio::time::timeout_at(d, fut).await {
                    Ok(r) => r.map_err(QueryError::from),
                    Err(_) => Err(QueryError::Timeout(self.timeout)),
                },
                None => fut.await.map_err(QueryError::from),
            }
        };
        tokio::select! {
            r = timed => r,
            _ = killed => Err(QueryError::ShuttingDown),
        }
    }

    /// Wrap a result stream so that it keeps the permit until it ends, and
    /// ends with an error at the deadline or at shutdown.
    pub fn guard(&self, stream: SendableRecordBatchStream, permit: Arc<Permit>) -> Guarded {
        let schema = stream.schema();
        let sleep = permit
            .deadline
            .map(|d| Box::pin(tokio::time::sleep_until(d)));
        let mut kill = self.kill.clone();
        let killed: Pin<Box<dyn Future<Output = ()> + Send>> = Box::pin(async move {
            if kill.wait_for(|v| *v).await.is_err() {
                std::future::pending::<()>().await;
            }
        });
        Guarded {
            inner: stream,
            schema,
            sleep,
            killed,
            timeout: self.timeout,
            permit: Some(permit),
        }
    }
}

/// A result stream under a deadline that holds its execution slot.
pub struct Guarded {
    inner: SendableRecordBatchStream,
    schema: SchemaRef,
    sleep: Option<Pin<Box<tokio::time::Sleep>>>,
    killed: Pin<Box<dyn Future<Output = ()> + Send>>,
    timeout: Duration,
    permit: Option<Arc<Permit>>,
}

impl Guarded {
    /// The schema of the batches.
    pub fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }

    fn finish(&mut self) {
        self.permit = None;
    }
}

impl Stream for Guarded {
    type Item = Result<RecordBatch, QueryError>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        if this.permit.is_none() {
            return Poll::Ready(None);
        }
        if let Some(s) = this.sleep.as_mut()
            && s.as_mut().poll(cx).is_ready()
        {
            this.finish();
            return Poll::Ready(Some(Err(QueryError::Timeout(this.timeout))));
        }
        if this.killed.as_mut().poll(cx).is_ready() {
            this.finish();
            return Poll::Ready(Some(Err(QueryError::ShuttingDown)));
        }
        match this.inner.poll_next_unpin(cx) {
            Poll::Ready(Some(Ok(b))) => Poll::Ready(Some(Ok(b))),
            Poll::Ready(Some(Err(e))) => {
                this.finish();
                Poll::Ready(Some(Err(QueryError::Sql(SqlError::from(e)))))
            }
            Poll::Ready(None) => {
                this.finish();
                Poll::Ready(None)
            }
            Poll::Pending => Poll::Pending,
        }
    }
}
