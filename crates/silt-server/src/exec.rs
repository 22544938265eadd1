//! Running a statement so that it really stops at its limits.
//!
//! A statement is planned and executed on a task of its own, never on its
//! connection's task: the connection waits for it *or* for the first stop
//! signal (its deadline, a cancel request, the shutdown kill switch),
//! whichever comes first, and then answers at once. Stopping pulls the
//! statement's [`StatementControl`] (Silt's scans, spatial join and
//! functions check it between rows and end) and aborts its task (DataFusion
//! stops at its next yield). The rows of a streamed result are produced on
//! such a task too ([`Guarded`]) and handed over through a one-batch
//! channel, so that a slow batch never holds up the deadline, and their
//! count and size are capped ([`ResultCaps`]). A result that is over after
//! its first batch (a lookup, a box of a few hits) is read on the
//! statement's own task ([`Prefetched`]) and needs no second task.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::error::DataFusionError;
use datafusion::execution::SendableRecordBatchStream;
use futures::{Stream, StreamExt};
use silt_sql::bounds::StopReason;
use silt_sql::{SqlError, SqlSession, StatementControl};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;

use crate::error::{Limit, QueryError};
use crate::limits::{Limits, Permit};
use crate::panics;

/// The runtime statements execute on, apart from the one serving the
/// connections. DataFusion's operators are cooperative: a nested-loop join
/// or a big sort can run for a long time without yielding, and on a shared
/// runtime such a loop would hold a worker thread that connections, timers
/// and small queries need. Here every running statement can have a thread
/// of its own (one worker per execution slot), so the operating system
/// time-slices between statements the way PostgreSQL's processes are,
/// while the connections' runtime stays free to answer, time out and
/// cancel at once. Its threads run at a lower CPU priority (nice
/// [`QUERY_NICE`]) than the connections': when the cores are busy with long
/// statements, the short ones that run on the connections' runtime (kept
/// plans, short inserts) and the protocol itself go first, as small
/// queries must stay fast while hostile ones run (#28).
pub struct QueryRuntime {
    rt: Option<tokio::runtime::Runtime>,
    handle: tokio::runtime::Handle,
}

/// The nice value of the statements' threads (the connections' stay at
/// the process's own; 10 gives them about a tenth of the CPU weight).
pub const QUERY_NICE: i32 = 10;

/// Lower the calling thread's CPU priority to [`QUERY_NICE`].
#[cfg(target_os = "linux")]
fn lower_priority() {
    // SAFETY: both calls take integers only and touch no memory of ours:
    // gettid returns the calling thread's id, and setpriority with
    // PRIO_PROCESS and a thread id changes that thread's nice value alone
    // (Linux keeps one per thread). Raising one's own nice value needs no
    // privilege; a failure leaves the thread as it was, which is harmless.
    unsafe {
        let tid = libc::syscall(libc::SYS_gettid);
        if let Ok(tid) = libc::id_t::try_from(tid) {
            libc::setpriority(libc::PRIO_PROCESS, tid, QUERY_NICE);
        }
    }
}

#[cfg(not(target_os = "linux"))]
fn lower_priority() {}

impl QueryRuntime {
    /// A runtime with `threads` worker threads.
    pub fn new(threads: usize) -> std::io::Result<QueryRuntime> {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(threads.max(1))
            .thread_name("silt-query")
            .on_thread_start(lower_priority)
            .enable_all()
            .build()?;
        let handle = rt.handle().clone();
        Ok(QueryRuntime {
            rt: Some(rt),
            handle,
        })
    }

    /// Spawn `fut` on it.
    pub fn spawn<F>(&self, fut: F) -> JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.handle.spawn(fut)
    }
}

impl Drop for QueryRuntime {
    fn drop(&mut self) {
        // Dropped from inside the server's runtime: do not block there.
        if let Some(rt) = self.rt.take() {
            rt.shutdown_background();
        }
    }
}

impl std::fmt::Debug for QueryRuntime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("QueryRuntime")
    }
}

/// A task aborted when this is dropped.
pub struct AbortOnDrop<T>(pub JoinHandle<T>);

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// One statement (or simple-query script) being run: its execution slot,
/// its stop switch, and what pulls the switch. A clone is the same
/// statement (a `COPY FROM STDIN` keeps one while its data comes).
#[derive(Clone)]
pub struct Stmt {
    pub ctl: Arc<StatementControl>,
    pub permit: Arc<Permit>,
    kill: watch::Receiver<bool>,
    runtime: Arc<QueryRuntime>,
}

impl Stmt {
    /// A statement admitted with `permit` (a cancel request stops it
    /// through its control, see [`crate::cancel`]).
    pub fn new(limits: &Limits, permit: Permit) -> Stmt {
        let ctl = StatementControl::new();
        let mut permit = permit;
        // Watched while the permit is held (by the statement, and by its
        // rows' stream until it ends).
        permit.watch = permit
            .deadline
            .map(|d| limits.deadlines.watch(d.into_std(), ctl.clone()));
        Stmt {
            ctl,
            permit: Arc::new(permit),
            kill: limits.kill.clone(),
            runtime: limits.runtime.clone(),
        }
    }

    /// Completes with the first reason to stop: the kill switch, or the
    /// control (a cancel request, or the deadline: see
    /// [`crate::deadlines`], not a timer per statement).
    fn stop_signal(&self) -> Pin<Box<dyn Future<Output = StopReason> + Send>> {
        let mut kill = self.kill.clone();
        let ctl = self.ctl.clone();
        Box::pin(async move {
            let killed = async move {
                if kill.wait_for(|v| *v).await.is_err() {
                    std::future::pending::<()>().await;
                }
            };
            tokio::select! {
                _ = killed => StopReason::Shutdown,
                r = ctl.wait() => r,
            }
        })
    }

    /// The error of a statement stopped for `why`.
    pub fn stopped_error(&self, why: StopReason) -> QueryError {
        stopped_error(why, self.permit.timeout)
    }

    /// The error of a statement that failed (see [`failed`]).
    pub fn error(&self, e: SqlError) -> QueryError {
        failed(e, &self.ctl, self.permit.timeout)
    }

    /// Run `fut` (a statement's planning, and its execution when its
    /// result is collected) on a task of its own, until it finishes or the
    /// statement must stop; then it is stopped and aborted, and a
    /// transaction block of `session` fails.
    pub async fn execute<T, F>(&self, session: &SqlSession, fut: F) -> Result<T, QueryError>
    where
        T: Send + 'static,
        F: Future<Output = Result<T, SqlError>> + Send + 'static,
    {
        if let Some(why) = self.ctl.stopped() {
            return Err(self.stopped_error(why));
        }
        let mut task = AbortOnDrop(self.runtime.spawn(panics::in_server(fut)));
        let stop = self.stop_signal();
        tokio::select! {
            biased;
            r = &mut task.0 => match r {
                Ok(r) => r.map_err(|e| self.error(e)),
                Err(e) => {
                    session.fail();
                    Err(QueryError::Internal(format!("the statement's task failed: {e}")))
                }
            },
            why = stop => {
                self.ctl.stop(why);
                task.0.abort();
                session.fail();
                Err(self.stopped_error(why))
            }
        }
    }

    /// [`Stmt::execute`] on the caller's own task, for work known to be
    /// short (a kept plan's first batch, see
    /// [`silt_sql::SqlEngine::kept_stream`]): no hop to the query runtime
    /// and back. The stop signal still ends it.
    pub async fn execute_here<T, F>(&self, session: &SqlSession, fut: F) -> Result<T, QueryError>
    where
        F: Future<Output = Result<T, SqlError>>,
    {
        if let Some(why) = self.ctl.stopped() {
            return Err(self.stopped_error(why));
        }
        let stop = self.stop_signal();
        tokio::select! {
            biased;
            r = fut => r.map_err(|e| self.error(e)),
            why = stop => {
                self.ctl.stop(why);
                session.fail();
                Err(self.stopped_error(why))
            }
        }
    }

    /// Stream `stream`'s batches from a task of their own, under the
    /// statement's stop signal and `caps`; the stream holds the execution
    /// slot until it ends.
    pub fn stream(
        &self,
        session: Arc<SqlSession>,
        stream: SendableRecordBatchStream,
        caps: ResultCaps,
    ) -> Guarded {
        let pre = Prefetched {
            schema: stream.schema(),
            head: vec![],
            rest: Some(stream),
        };
        self.stream_prefetched(session, pre, caps)
    }

    /// [`Stmt::stream`] of a result whose first batches were read already:
    /// those are handed out first, and only a rest gets a task.
    pub fn stream_prefetched(
        &self,
        session: Arc<SqlSession>,
        pre: Prefetched,
        caps: ResultCaps,
    ) -> Guarded {
        self.stream_encoded(session, pre, caps, |b| b)
    }

    /// [`Stmt::stream_prefetched`], with each batch turned into what the
    /// protocol sends (`encode`) on the task that produces it: a result of
    /// many rows is then encoded on the statements' runtime, at their
    /// lower priority, not on the connections' runtime, where it held up
    /// every small query behind it (`server-abuse`: 10^6-row results took
    /// small lookups' p99 from 4 to 180 ms).
    pub fn stream_encoded<T, F>(
        &self,
        session: Arc<SqlSession>,
        pre: Prefetched,
        caps: ResultCaps,
        encode: F,
    ) -> Guarded<T>
    where
        T: Send + 'static,
        F: Fn(RecordBatch) -> T + Send + 'static,
    {
        let Prefetched { schema, head, rest } = pre;
        let piece = move |b: RecordBatch| Piece {
            rows: b.num_rows() as u64,
            bytes: batch_bytes(&b),
            item: encode(b),
        };
        let (tx, rx) = mpsc::channel(head.len().max(1));
        for b in head {
            // The channel has room for every one of them.
            let _ = tx.try_send(Ok(piece(b)));
        }
        let finished = Arc::new(std::sync::atomic::AtomicBool::new(rest.is_none()));
        let producer = rest.map(|mut stream| {
            let done = finished.clone();
            AbortOnDrop(self.runtime.spawn(panics::in_server(async move {
                while let Some(item) = stream.next().await {
                    if tx.send(item.map(&piece)).await.is_err() {
                        return;
                    }
                }
                done.store(true, std::sync::atomic::Ordering::Release);
            })))
        });
        Guarded {
            rx,
            _producer: producer,
            schema,
            stop: self.stop_signal(),
            ctl: self.ctl.clone(),
            session,
            caps,
            rows: 0,
            bytes: 0,
            timeout: self.permit.timeout,
            permit: Some(self.permit.clone()),
            finished,
        }
    }
}

/// How many batches [`Prefetched::read`] takes at most.
const PREFETCH_BATCHES: usize = 2;

/// A result's first batches, read on the statement's task, and the rest of
/// its stream if it did not end with them.
pub struct Prefetched {
    pub schema: SchemaRef,
    pub head: Vec<RecordBatch>,
    pub rest: Option<SendableRecordBatchStream>,
}

impl Prefetched {
    /// Wait for `stream`'s first batch, then take what follows as long as
    /// it is ready at once (at most [`PREFETCH_BATCHES`]): a small result
    /// is over by then.
    pub async fn read(mut stream: SendableRecordBatchStream) -> Result<Prefetched, SqlError> {
        use futures::FutureExt;
        let schema = stream.schema();
        let mut head = Vec::new();
        let first = stream.next().await;
        let mut next = Some(first);
        loop {
            match next {
                Some(None) => {
                    return Ok(Prefetched {
                        schema,
                        head,
                        rest: None,
                    });
                }
                Some(Some(b)) => head.push(b?),
                None => break,
            }
            if head.len() >= PREFETCH_BATCHES {
                break;
            }
            next = stream.next().now_or_never();
        }
        Ok(Prefetched {
            schema,
            head,
            rest: Some(stream),
        })
    }
}

/// The error of a statement stopped for `why` under `timeout`.
fn stopped_error(why: StopReason, timeout: Duration) -> QueryError {
    match why {
        StopReason::Timeout => QueryError::Timeout(timeout),
        StopReason::Cancel => QueryError::Cancelled,
        StopReason::Shutdown | StopReason::Abandoned => QueryError::ShuttingDown,
    }
}

/// The error of a statement that failed: a limit it ran into, the reason
/// it was stopped (when a scan noticed the stop first), or its own error.
fn failed(e: SqlError, ctl: &StatementControl, timeout: Duration) -> QueryError {
    if let SqlError::DataFusion(de) = e.root() {
        if let Some(l) = silt_sql::bounds::limit_of(de, Some(ctl)) {
            return QueryError::Limit(Limit::Sql(l));
        }
        if silt_sql::bounds::is_stopped(de)
            && let Some(why) = ctl.stopped()
        {
            return stopped_error(why, timeout);
        }
    }
    QueryError::Sql(e)
}

/// The most rows and bytes one statement may return (zero: no cap).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ResultCaps {
    pub rows: u64,
    pub bytes: usize,
}

/// The bytes of a batch's values (what it occupies, counting slices by
/// their own extent).
pub fn batch_bytes(b: &RecordBatch) -> usize {
    b.columns()
        .iter()
        .map(|c| c.to_data().get_slice_memory_size().unwrap_or(0))
        .sum()
}

/// One batch of a result as the producer hands it over: its rows and
/// bytes (for the caps) and what the protocol sends.
struct Piece<T> {
    rows: u64,
    bytes: usize,
    item: T,
}

/// A result stream produced on a task of its own, under a deadline, the
/// kill switch, cancel requests and result caps; it holds its execution
/// slot until it ends. Its items are the batches, or what
/// [`Stmt::stream_encoded`] made of them.
pub struct Guarded<T = RecordBatch> {
    rx: mpsc::Receiver<Result<Piece<T>, DataFusionError>>,
    /// The task producing the batches after the prefetched ones, if any.
    _producer: Option<AbortOnDrop<()>>,
    schema: SchemaRef,
    stop: Pin<Box<dyn Future<Output = StopReason> + Send>>,
    ctl: Arc<StatementControl>,
    session: Arc<SqlSession>,
    caps: ResultCaps,
    rows: u64,
    bytes: usize,
    timeout: Duration,
    permit: Option<Arc<Permit>>,
    /// Set by the producer when the stream ended (not when it panicked).
    finished: Arc<std::sync::atomic::AtomicBool>,
}

impl<T> Guarded<T> {
    /// The schema of the batches.
    pub fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }

    /// Rows and bytes handed out so far.
    pub fn sent(&self) -> (u64, usize) {
        (self.rows, self.bytes)
    }

    /// End the stream with `e`: stop the producer, fail an open block.
    fn fail(&mut self, why: StopReason, e: QueryError) -> Poll<Option<Result<T, QueryError>>> {
        self.ctl.stop(why);
        if let Some(p) = &self._producer {
            p.0.abort();
        }
        self.session.fail();
        self.permit = None;
        Poll::Ready(Some(Err(e)))
    }

    fn over(&self) -> Option<Limit> {
        if self.caps.rows > 0 && self.rows > self.caps.rows {
            return Some(Limit::ResultRows {
                limit: self.caps.rows,
            });
        }
        if self.caps.bytes > 0 && self.bytes > self.caps.bytes {
            return Some(Limit::ResultBytes {
                limit: self.caps.bytes,
                rows: self.rows,
            });
        }
        None
    }
}

impl<T> Stream for Guarded<T> {
    type Item = Result<T, QueryError>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        if this.permit.is_none() {
            return Poll::Ready(None);
        }
        if let Poll::Ready(why) = this.stop.as_mut().poll(cx) {
            return this.fail(why, stopped_error(why, this.timeout));
        }
        match this.rx.poll_recv(cx) {
            Poll::Ready(Some(Ok(p))) => {
                this.rows = this.rows.saturating_add(p.rows);
                this.bytes = this.bytes.saturating_add(p.bytes);
                if let Some(l) = this.over() {
                    return this.fail(StopReason::Abandoned, QueryError::Limit(l));
                }
                Poll::Ready(Some(Ok(p.item)))
            }
            Poll::Ready(Some(Err(e))) => {
                let err = failed(SqlError::from(e), &this.ctl, this.timeout);
                this.session.fail();
                this.permit = None;
                Poll::Ready(Some(Err(err)))
            }
            Poll::Ready(None) => {
                this.permit = None;
                if this.finished.load(std::sync::atomic::Ordering::Acquire) {
                    Poll::Ready(None)
                } else {
                    // The producer died (a panic in DataFusion): not a
                    // complete result.
                    this.session.fail();
                    Poll::Ready(Some(Err(QueryError::Internal(
                        "the statement's execution failed (see the server log)".to_owned(),
                    ))))
                }
            }
            Poll::Pending => Poll::Pending,
        }
    }
}

impl<T> Drop for Guarded<T> {
    fn drop(&mut self) {
        // A result abandoned half-way (the client went away, or an error
        // while sending it): stop what still runs.
        if self.permit.is_some() {
            self.ctl.stop(StopReason::Abandoned);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::array::{Int64Array, StringArray};
    use datafusion::arrow::datatypes::{DataType, Field, Schema};

    #[test]
    fn batch_bytes_counts_slices() {
        let schema = Arc::new(Schema::new(vec![
            Field::new("a", DataType::Int64, false),
            Field::new("s", DataType::Utf8, false),
        ]));
        let b = RecordBatch::try_new(
            schema,
            vec![
                Arc::new(Int64Array::from((0..1000).collect::<Vec<i64>>())),
                Arc::new(StringArray::from(vec!["xxxxxxxxxx"; 1000])),
            ],
        )
        .unwrap();
        let whole = batch_bytes(&b);
        assert!(whole >= 1000 * 8 + 1000 * 10, "{whole}");
        let part = batch_bytes(&b.slice(0, 10));
        assert!(part < whole / 50, "{part} of {whole}");
    }
}
