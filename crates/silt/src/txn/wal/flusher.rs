//! Group commit: the in-memory log tail that appenders fill, and the
//! log-flusher thread that writes and fsyncs what no committing thread
//! writes itself (leader-based commit: see `writer`).
//!
//! An append ([`Shared::enqueue`]) only copies the framed record into the
//! *log tail* buffer under a mutex (which also assigns the LSN, so LSN order =
//! buffer order). The flusher thread repeatedly takes everything that
//! accumulated while its previous write+fsync ran (a committing thread
//! that *leads* does the same on its own thread, see `writer`), writes it
//! with one `write`, fsyncs once, then advances the durable LSN, runs the durability callbacks
//! of the records it made durable (in LSN order) and wakes waiters. There is
//! no group-commit timer: as in AsterixDB the batching is self-throttled — the
//! slower the device, the more commits pile up behind one fsync. The tail
//! buffer is bounded ([`WalOptions::tail_buffer_limit`]): appenders wait for
//! the flusher instead of growing memory without bound.
//!
//! Records are written into the current [`LogFile`]; before a record, once
//! that file has reached [`WalOptions::file_size_limit`], the flusher *rolls*:
//! it cuts the preallocated zeros, fsyncs the finished file, creates the next
//! one and fsyncs the directory, so only the last file can ever end in a torn
//! write (`docs/format/wal.md`).
//!
//! A failed write or fsync is never retried: the log becomes permanently
//! failed ([`Shared::fail`]), see the [module documentation](super).
//!
//! [`WalOptions::tail_buffer_limit`]: super::WalOptions::tail_buffer_limit
//! [`WalOptions::file_size_limit`]: super::WalOptions::file_size_limit

use super::files::LogFile;
use super::options::{Durability, LAZY_WRITE_MS};
use super::writer::LogWriter;
use crate::error::{Error, Result};
use crate::storage::fsutil::sync_dir;
use crate::txn::fault::FaultInjector;
use parking_lot::{Condvar, Mutex};
use std::collections::VecDeque;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Called once with `Ok(())` when a record is durable, or with an error if it
/// never will be (the log failed or was closed before it got written).
pub type DurableCallback = Box<dyn FnOnce(Result<()>) + Send>;

pub(super) struct Pending {
    pub(super) end_lsn: u64,
    pub(super) cb: DurableCallback,
}

/// State shared by appenders, waiters and the flusher, under one mutex.
pub(super) struct Tail {
    /// Framed records not yet taken by the flusher; starts at `next_lsn - buf.len()`.
    pub(super) buf: Vec<u8>,
    pub(super) buf_records: u64,
    pub(super) next_lsn: u64,
    /// Durability callbacks in LSN order.
    pub(super) callbacks: VecDeque<Pending>,
    /// Durable LSN whose callbacks have all run: what `wait_durable` waits for.
    pub(super) acked_lsn: u64,
    /// `Wal::sync` callers want an fsync covering this LSN.
    pub(super) sync_target: u64,
    /// Someone waits for the buffered records to become durable (a COMMIT or
    /// WAIT callback, or a `wait_durable` caller). In `Sync` mode the flusher
    /// writes and fsyncs only then: UPDATE records alone wait in the buffer
    /// for their COMMIT, so a single writer pays one fsync per transaction,
    /// not one for its UPDATE and another for its COMMIT.
    pub(super) want_durable: bool,
    /// When the oldest record in `buf` was appended: buffered records are
    /// written at the latest `LAZY_WRITE_MS` after it.
    pub(super) first_buffered: Option<Instant>,
    pub(super) failed: Option<String>,
    pub(super) closing: bool,
    /// Records written to the OS but not fsynced (`Batched`, `None`), and
    /// the last fsync: for the interval sync and the sync at close.
    pub(super) unsynced: bool,
    pub(super) last_sync: Instant,
}

impl Tail {
    /// An empty tail for a log whose valid records end at `end_lsn`.
    pub(super) fn new(end_lsn: u64) -> Tail {
        Tail {
            buf: Vec::new(),
            buf_records: 0,
            next_lsn: end_lsn,
            callbacks: VecDeque::new(),
            acked_lsn: end_lsn,
            sync_target: 0,
            want_durable: false,
            first_buffered: None,
            failed: None,
            closing: false,
            unsynced: false,
            last_sync: Instant::now(),
        }
    }
}

/// Counters behind [`WalStats`](super::WalStats).
#[derive(Default)]
pub(super) struct Counters {
    pub(super) records: AtomicU64,
    pub(super) commits: AtomicU64,
    pub(super) waits: AtomicU64,
    pub(super) bytes: AtomicU64,
    pub(super) batches: AtomicU64,
    pub(super) max_batch_records: AtomicU64,
    pub(super) max_batch_bytes: AtomicU64,
    pub(super) fsyncs: AtomicU64,
    pub(super) dir_fsyncs: AtomicU64,
    pub(super) files_created: AtomicU64,
    pub(super) files_deleted: AtomicU64,
    pub(super) tail_full_waits: AtomicU64,
    pub(super) max_tail_bytes: AtomicU64,
    pub(super) torn_tails_truncated: AtomicU64,
    pub(super) truncated_tail_bytes: AtomicU64,
}

/// Everything the [`Wal`](super::Wal) handle and the flusher thread share.
pub(super) struct Shared {
    pub(super) dir: PathBuf,
    pub(super) durability: Durability,
    pub(super) file_size_limit: u64,
    pub(super) tail_limit: usize,
    pub(super) fault: Option<Arc<FaultInjector>>,
    pub(super) tail: Mutex<Tail>,
    /// Whoever writes the log holds this (the flusher or a leading
    /// committer: see `writer`); taken before `tail`.
    pub(super) writer: Mutex<LogWriter>,
    /// The flusher waits here for records (or close).
    pub(super) work: Condvar,
    /// Appenders wait here for tail-buffer space.
    pub(super) space: Condvar,
    /// `wait_durable` callers wait here.
    pub(super) durable: Condvar,
    pub(super) durable_lsn: AtomicU64,
    pub(super) synced_lsn: AtomicU64,
    pub(super) end_lsn: AtomicU64,
    /// Serializes log-file deletion.
    pub(super) files_lock: Mutex<()>,
    pub(super) stats: Counters,
}

pub(super) fn failed_error(reason: &str) -> Error {
    Error::Closed(format!(
        "the write-ahead log failed and accepts no more records ({reason}); a failed write or fsync is never retried because the durability of the data is then unknown; reopen the database to recover from the log on disk"
    ))
}

pub(super) fn closed_error() -> Error {
    Error::Closed("the write-ahead log is closed".to_string())
}

/// Run a durability callback, catching (and logging) a panic.
pub(super) fn run_callback(cb: DurableCallback, result: Result<()>) {
    if catch_unwind(AssertUnwindSafe(|| cb(result))).is_err() {
        tracing::error!("a write-ahead-log durability callback panicked");
    }
}

impl Shared {
    /// An appender's side of group commit: copy `frame` into the log tail
    /// (waiting while the tail is full), give it the next LSN, register `cb`
    /// and wake the flusher when it should act. With `lead`, a callback
    /// record does not wake the flusher: the appending thread will lead its
    /// write (`writer`) or kick the flusher. On failure the callback is
    /// handed back, not run.
    pub(super) fn enqueue(
        &self,
        frame: &[u8],
        cb: Option<DurableCallback>,
        lead: bool,
    ) -> std::result::Result<u64, (Error, Option<DurableCallback>)> {
        let shared = self;
        let mut tail = shared.tail.lock();
        loop {
            if let Some(reason) = &tail.failed {
                return Err((failed_error(reason), cb));
            }
            if tail.closing {
                return Err((closed_error(), cb));
            }
            if tail.buf.is_empty() || tail.buf.len() + frame.len() <= shared.tail_limit {
                break;
            }
            shared.stats.tail_full_waits.fetch_add(1, Ordering::Relaxed);
            // The flusher must drain the buffer even without a durability request.
            tail.want_durable = true;
            shared.work.notify_one();
            shared.space.wait(&mut tail);
        }
        let lsn = tail.next_lsn;
        let was_empty = tail.buf.is_empty();
        tail.buf.extend_from_slice(frame);
        tail.buf_records += 1;
        tail.next_lsn += frame.len() as u64;
        shared.end_lsn.store(tail.next_lsn, Ordering::Release);
        let tail_len = tail.buf.len() as u64;
        if was_empty {
            tail.first_buffered = Some(Instant::now());
        }
        let threshold = shared.durability.write_threshold(shared.tail_limit);
        let crossed = tail.buf.len() >= threshold && tail.buf.len() - frame.len() < threshold;
        let wakes = if let Some(cb) = cb {
            let end_lsn = tail.next_lsn;
            tail.callbacks.push_back(Pending { end_lsn, cb });
            let first = !tail.want_durable || was_empty;
            tail.want_durable = true;
            first && !lead
        } else if matches!(shared.durability, Durability::Sync) {
            // An UPDATE waits for its COMMIT (which asks for durability).
            crossed
        } else {
            // Batched / none: the first record starts the lazy-write timer.
            was_empty || crossed
        };
        if wakes {
            shared.work.notify_one();
        }
        drop(tail);
        let st = &shared.stats;
        st.records.fetch_add(1, Ordering::Relaxed);
        st.bytes.fetch_add(frame.len() as u64, Ordering::Relaxed);
        st.max_tail_bytes.fetch_max(tail_len, Ordering::Relaxed);
        Ok(lsn)
    }

    /// The error for an append refused now: the failure, or "closed".
    pub(super) fn status_error(&self) -> Error {
        match &self.tail.lock().failed {
            Some(reason) => failed_error(reason),
            None => closed_error(),
        }
    }

    /// Why the log failed, if it did.
    pub(super) fn failure(&self) -> Option<String> {
        self.tail.lock().failed.clone()
    }

    /// See [`Wal::wait_durable`](super::Wal::wait_durable).
    pub(super) fn wait_durable(&self, lsn: u64) -> Result<()> {
        let shared = self;
        let mut tail = shared.tail.lock();
        if lsn > tail.next_lsn {
            return Err(Error::Config(format!(
                "cannot wait for LSN {lsn}: the log ends at LSN {}",
                tail.next_lsn
            )));
        }
        loop {
            if tail.acked_lsn >= lsn {
                return Ok(());
            }
            if let Some(reason) = &tail.failed {
                return Err(failed_error(reason));
            }
            if !tail.want_durable {
                tail.want_durable = true;
                shared.work.notify_one();
            }
            shared.durable.wait(&mut tail);
        }
    }

    /// See [`Wal::sync`](super::Wal::sync).
    pub(super) fn sync(&self) -> Result<u64> {
        let shared = self;
        let mut tail = shared.tail.lock();
        let target = tail.next_lsn;
        if shared.synced_lsn.load(Ordering::Acquire) < target {
            tail.sync_target = tail.sync_target.max(target);
            shared.work.notify_one();
        }
        loop {
            if shared.synced_lsn.load(Ordering::Acquire) >= target {
                return Ok(target);
            }
            if let Some(reason) = &tail.failed {
                return Err(failed_error(reason));
            }
            shared.durable.wait(&mut tail);
        }
    }

    /// Wake the flusher for records appended with `lead` whose thread will
    /// not lead their write.
    pub(super) fn kick(&self) {
        let _tail = self.tail.lock();
        self.work.notify_one();
    }

    /// Refuse further appends and tell the flusher to finish.
    pub(super) fn begin_close(&self) {
        let mut tail = self.tail.lock();
        tail.closing = true;
        self.work.notify_all();
        self.space.notify_all();
    }

    /// Make the log permanently failed and fail every pending callback.
    pub(super) fn fail(&self, reason: String) {
        tracing::error!(
            "write-ahead log {} failed: {reason}; no further commits will be acknowledged",
            self.dir.display()
        );
        let (pending, reason) = {
            let mut tail = self.tail.lock();
            let reason = tail.failed.get_or_insert(reason).clone();
            tail.buf = Vec::new();
            tail.buf_records = 0;
            let pending: Vec<Pending> = tail.callbacks.drain(..).collect();
            self.work.notify_all();
            self.space.notify_all();
            self.durable.notify_all();
            (pending, reason)
        };
        for p in pending {
            run_callback(p.cb, Err(failed_error(&reason)));
        }
    }

    pub(super) fn fsync_file(&self, file: &LogFile) -> std::result::Result<(), String> {
        let r = match &self.fault {
            Some(f) => f.on_fsync(),
            None => Ok(()),
        };
        r.and_then(|()| file.file.sync_data())
            .map_err(|e| format!("fsync of {} failed: {e}", file.path.display()))?;
        self.stats.fsyncs.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    pub(super) fn fsync_dir(&self) -> std::result::Result<(), String> {
        let r = match &self.fault {
            Some(f) => f.on_fsync().map_err(|e| Error::io(&self.dir, e)),
            None => Ok(()),
        };
        r.and_then(|()| sync_dir(&self.dir)).map_err(|e| {
            let e = match e {
                Error::Io { source, .. } => source.to_string(),
                e => e.to_string(),
            };
            format!("fsync of directory {} failed: {e}", self.dir.display())
        })?;
        self.stats.dir_fsyncs.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }
}

/// What the flusher does next.
enum Action {
    Write,
    Sync,
    /// Closing: sync what is unsynced, then stop.
    Exit,
    /// The log failed: stop at once.
    Abandon,
}

/// The log-flusher thread: writes what no committing thread leads (see
/// `writer`): UPDATE records that filled the tail, commits whose threads
/// found the writer busy, `Wal::sync` and `Wal::wait_durable` requests,
/// lazy writes and interval syncs in `Batched` and `None` modes.
pub(super) struct Flusher {
    shared: Arc<Shared>,
}

impl Flusher {
    /// The flusher of `shared`.
    pub(super) fn new(shared: Arc<Shared>) -> Flusher {
        Flusher { shared }
    }

    /// The thread's body: act until closed or failed. It sleeps, and
    /// decides whether to act, without the writer, so that a committing
    /// thread finds it free to lead; it takes the writer only to act.
    ///
    /// `ready` is told once the thread holds the tail for its first look:
    /// every record appended after `Wal::open` returns is then appended
    /// while the flusher sleeps or after it looked, so the first commits can
    /// lead too.
    pub(super) fn run(self, ready: crossbeam_channel::Sender<()>) {
        let shared = &*self.shared;
        let mut ready = Some(ready);
        loop {
            {
                let mut tail = shared.tail.lock();
                if let Some(r) = ready.take() {
                    let _ = r.send(());
                }
                while Self::next_action(shared, &mut tail).is_none() {
                    match Self::wake_at(shared, &tail) {
                        Some(at) => {
                            shared.work.wait_until(&mut tail, at);
                        }
                        None => shared.work.wait(&mut tail),
                    }
                }
            }
            let mut writer = shared.writer.lock();
            let mut tail = shared.tail.lock();
            // A leader may have done it meanwhile.
            let Some(action) = Self::next_action(shared, &mut tail) else {
                continue;
            };
            let step = match action {
                Action::Write => {
                    let taken = writer.take(shared, &mut tail);
                    drop(tail);
                    writer.write_batch(shared, taken)
                }
                Action::Sync => {
                    drop(tail);
                    writer.sync(shared)
                }
                Action::Exit => {
                    // Close: drop the preallocated zeros, make everything
                    // durable in every mode.
                    let mut unsynced = tail.unsynced;
                    drop(tail);
                    let mut r = Ok(());
                    if writer.current.allocated > writer.current.len {
                        r = writer.current.cut_to_len().map_err(|e| {
                            format!("truncating {} failed: {e}", writer.current.path.display())
                        });
                        unsynced = true;
                    }
                    if r.is_ok() && unsynced {
                        r = writer.sync(shared);
                    }
                    if let Err(reason) = r {
                        shared.fail(reason);
                    }
                    return;
                }
                Action::Abandon => return,
            };
            // A failure is declared before the writer is let go (see `writer`).
            if let Err(reason) = step {
                shared.fail(reason);
                return;
            }
            drop(writer);
        }
    }

    /// What to do now, or `None` to sleep until [`Flusher::wake_at`].
    fn next_action(shared: &Shared, tail: &mut Tail) -> Option<Action> {
        if tail.failed.is_some() {
            return Some(Action::Abandon);
        }
        let threshold = shared.durability.write_threshold(shared.tail_limit);
        let eager = tail.want_durable
            || tail.closing
            || tail.sync_target > shared.synced_lsn.load(Ordering::Acquire)
            || tail.buf.len() >= threshold
            || tail
                .first_buffered
                .is_some_and(|t| t.elapsed() >= Duration::from_millis(LAZY_WRITE_MS));
        if !tail.buf.is_empty() && eager {
            return Some(Action::Write);
        }
        if tail.buf.is_empty() {
            // Nothing buffered: a stale request refers to records already written.
            tail.want_durable = false;
        }
        if tail.sync_target > shared.synced_lsn.load(Ordering::Acquire) {
            return Some(Action::Sync);
        }
        if tail.closing {
            return Some(Action::Exit);
        }
        if let (true, Durability::Batched { interval_ms }) = (tail.unsynced, shared.durability)
            && Instant::now() >= tail.last_sync + Duration::from_millis(interval_ms)
        {
            return Some(Action::Sync);
        }
        None
    }

    /// When to wake without being notified: the lazy write of buffered
    /// records, and in `Batched` mode the interval sync.
    fn wake_at(shared: &Shared, tail: &Tail) -> Option<Instant> {
        let lazy = tail
            .first_buffered
            .map(|t| t + Duration::from_millis(LAZY_WRITE_MS));
        match (tail.unsynced, shared.durability) {
            (true, Durability::Batched { interval_ms }) => {
                let deadline = tail.last_sync + Duration::from_millis(interval_ms);
                Some(lazy.map_or(deadline, |l| l.min(deadline)))
            }
            _ => lazy,
        }
    }
}
