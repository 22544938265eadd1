//! Group commit: the in-memory log tail that appenders fill, and the
//! log-flusher thread that writes and fsyncs it.
//!
//! An append ([`Shared::enqueue`]) only copies the framed record into the
//! *log tail* buffer under a mutex (which also assigns the LSN, so LSN order =
//! buffer order). The flusher thread repeatedly takes everything that
//! accumulated while its previous write+fsync ran, writes it with one `write`,
//! fsyncs once, then advances the durable LSN, runs the durability callbacks
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

use super::files::{LogFile, log_file_name};
use super::options::{Durability, LAZY_WRITE_MS};
use super::record::{FRAME_HEADER_BYTES, le_u32};
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

struct Pending {
    end_lsn: u64,
    cb: DurableCallback,
}

/// State shared by appenders, waiters and the flusher, under one mutex.
pub(super) struct Tail {
    /// Framed records not yet taken by the flusher; starts at `next_lsn - buf.len()`.
    buf: Vec<u8>,
    buf_records: u64,
    next_lsn: u64,
    /// Durability callbacks in LSN order.
    callbacks: VecDeque<Pending>,
    /// Durable LSN whose callbacks have all run: what `wait_durable` waits for.
    acked_lsn: u64,
    /// `Wal::sync` callers want an fsync covering this LSN.
    sync_target: u64,
    /// Someone waits for the buffered records to become durable (a COMMIT or
    /// WAIT callback, or a `wait_durable` caller). In `Sync` mode the flusher
    /// writes and fsyncs only then: UPDATE records alone wait in the buffer
    /// for their COMMIT, so a single writer pays one fsync per transaction,
    /// not one for its UPDATE and another for its COMMIT.
    want_durable: bool,
    /// When the oldest record in `buf` was appended: buffered records are
    /// written at the latest `LAZY_WRITE_MS` after it.
    first_buffered: Option<Instant>,
    failed: Option<String>,
    closing: bool,
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
    /// and wake the flusher when it should act. On failure the callback is
    /// handed back, not run.
    pub(super) fn enqueue(
        &self,
        frame: &[u8],
        cb: Option<DurableCallback>,
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
            first
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

    fn fsync_file(&self, file: &LogFile) -> std::result::Result<(), String> {
        let r = match &self.fault {
            Some(f) => f.on_fsync(),
            None => Ok(()),
        };
        r.and_then(|()| file.file.sync_data())
            .map_err(|e| format!("fsync of {} failed: {e}", file.path.display()))?;
        self.stats.fsyncs.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    fn fsync_dir(&self) -> std::result::Result<(), String> {
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

enum Action {
    Write {
        end_lsn: u64,
        records: u64,
    },
    Sync,
    /// Closing: sync what is unsynced, then stop.
    Exit,
    /// The log failed: stop at once.
    Abandon,
}

/// The log-flusher thread's state.
pub(super) struct Flusher {
    shared: Arc<Shared>,
    current: LogFile,
    /// The batch being written; swapped with the (empty) tail buffer.
    batch: Vec<u8>,
    last_sync: Instant,
    unsynced: bool,
}

impl Flusher {
    /// The flusher of `shared`, appending to `current`.
    pub(super) fn new(shared: Arc<Shared>, current: LogFile) -> Flusher {
        Flusher {
            shared,
            current,
            batch: Vec::new(),
            last_sync: Instant::now(),
            unsynced: false,
        }
    }

    /// The thread's body: act until closed or failed.
    pub(super) fn run(mut self) {
        loop {
            let step = match self.next_action() {
                Action::Write { end_lsn, records } => self.write_batch(end_lsn, records),
                Action::Sync => self.sync(),
                Action::Exit => {
                    // Close: drop the preallocated zeros, make everything
                    // durable in every mode.
                    if self.current.allocated > self.current.len {
                        if let Err(e) = self.current.cut_to_len() {
                            self.shared.fail(format!(
                                "truncating {} failed: {e}",
                                self.current.path.display()
                            ));
                            return;
                        }
                        self.unsynced = true;
                    }
                    if self.unsynced
                        && let Err(reason) = self.sync()
                    {
                        self.shared.fail(reason);
                    }
                    return;
                }
                Action::Abandon => return,
            };
            if let Err(reason) = step {
                self.shared.fail(reason);
                return;
            }
        }
    }

    fn next_action(&mut self) -> Action {
        let shared = &self.shared;
        let mut tail = shared.tail.lock();
        loop {
            if tail.failed.is_some() {
                return Action::Abandon;
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
                tail.want_durable = false;
                tail.first_buffered = None;
                self.batch.clear();
                std::mem::swap(&mut tail.buf, &mut self.batch);
                let records = std::mem::take(&mut tail.buf_records);
                shared.space.notify_all();
                return Action::Write {
                    end_lsn: tail.next_lsn,
                    records,
                };
            }
            if tail.buf.is_empty() {
                // Nothing buffered: a stale request refers to records already written.
                tail.want_durable = false;
            }
            if tail.sync_target > shared.synced_lsn.load(Ordering::Acquire) {
                return Action::Sync;
            }
            if tail.closing {
                return Action::Exit;
            }
            let lazy = tail
                .first_buffered
                .map(|t| t + Duration::from_millis(LAZY_WRITE_MS));
            if let (true, Durability::Batched { interval_ms }) = (self.unsynced, shared.durability)
            {
                let deadline = self.last_sync + Duration::from_millis(interval_ms);
                if Instant::now() >= deadline {
                    return Action::Sync;
                }
                shared
                    .work
                    .wait_until(&mut tail, lazy.map_or(deadline, |l| l.min(deadline)));
            } else if let Some(lazy) = lazy {
                shared.work.wait_until(&mut tail, lazy);
            } else {
                shared.work.wait(&mut tail);
            }
        }
    }

    fn sync(&mut self) -> std::result::Result<(), String> {
        self.shared.fsync_file(&self.current)?;
        self.last_sync = Instant::now();
        self.unsynced = false;
        let end = self.current.end_lsn();
        // Under the lock, so that a `Wal::sync` caller cannot miss the wake-up.
        let _tail = self.shared.tail.lock();
        self.shared.synced_lsn.store(end, Ordering::Release);
        self.shared.durable.notify_all();
        Ok(())
    }

    fn write_batch(&mut self, end_lsn: u64, records: u64) -> std::result::Result<(), String> {
        let batch = std::mem::take(&mut self.batch);
        let written = self.write_bytes(&batch);
        let bytes = batch.len() as u64;
        self.batch = batch;
        if self.batch.capacity() > 2 * self.shared.tail_limit {
            self.batch = Vec::new();
        }
        written?;
        if self.current.end_lsn() != end_lsn {
            return Err(format!(
                "internal error: log file ends at LSN {} after a batch ending at LSN {end_lsn}",
                self.current.end_lsn()
            ));
        }
        match self.shared.durability {
            Durability::Sync => self.sync()?,
            Durability::Batched { interval_ms } => {
                if self.last_sync.elapsed() >= Duration::from_millis(interval_ms) {
                    self.sync()?;
                } else {
                    self.unsynced = true;
                }
            }
            Durability::None => self.unsynced = true,
        }
        let st = &self.shared.stats;
        st.batches.fetch_add(1, Ordering::Relaxed);
        st.max_batch_records.fetch_max(records, Ordering::Relaxed);
        st.max_batch_bytes.fetch_max(bytes, Ordering::Relaxed);
        self.publish(end_lsn);
        Ok(())
    }

    /// Advance the durable LSN, run the callbacks now covered (in LSN order),
    /// then wake `wait_durable` callers.
    fn publish(&self, end_lsn: u64) {
        let ready: Vec<Pending> = {
            let mut tail = self.shared.tail.lock();
            self.shared.durable_lsn.store(end_lsn, Ordering::Release);
            let n = tail
                .callbacks
                .iter()
                .take_while(|p| p.end_lsn <= end_lsn)
                .count();
            tail.callbacks.drain(..n).collect()
        };
        for p in ready {
            run_callback(p.cb, Ok(()));
        }
        self.shared.tail.lock().acked_lsn = end_lsn;
        self.shared.durable.notify_all();
    }

    /// Write framed records, moving to a new file before a record whenever the
    /// current file has reached the size limit.
    fn write_bytes(&mut self, data: &[u8]) -> std::result::Result<(), String> {
        let limit = self.shared.file_size_limit;
        let mut pos = 0usize;
        while pos < data.len() {
            if self.current.len >= limit && self.current.len > 0 {
                self.roll()?;
            }
            let rest = (data.len() - pos) as u64;
            let chunk_end = if self.current.len + rest <= limit {
                data.len()
            } else {
                // Take records while the file is below the limit (at least one).
                let mut end = pos;
                let mut flen = self.current.len;
                while end < data.len() && flen < limit {
                    let rec_len = le_u32(data, end)
                        .map(|l| FRAME_HEADER_BYTES + l as usize)
                        .filter(|&l| end + l <= data.len())
                        .ok_or_else(|| {
                            "internal error: malformed record in the log tail buffer".to_string()
                        })?;
                    end += rec_len;
                    flen += rec_len as u64;
                }
                end
            };
            self.write_chunk(&data[pos..chunk_end])?;
            pos = chunk_end;
        }
        Ok(())
    }

    fn write_chunk(&mut self, chunk: &[u8]) -> std::result::Result<(), String> {
        let allowed = match &self.shared.fault {
            Some(f) => f.on_write(chunk.len()),
            None => chunk.len(),
        };
        use std::os::unix::fs::FileExt;
        let cur = &mut self.current;
        cur.preallocate(chunk.len() as u64)
            .map_err(|e| format!("write to {} failed: {e}", cur.path.display()))?;
        let r = cur
            .file
            .write_all_at(&chunk[..allowed], cur.len)
            .and_then(|()| {
                if allowed < chunk.len() {
                    Err(FaultInjector::injected_write_error())
                } else {
                    Ok(())
                }
            });
        r.map_err(|e| format!("write to {} failed: {e}", self.current.path.display()))?;
        self.current.len += chunk.len() as u64;
        Ok(())
    }

    /// Finish the current file (fsync) and create the next one (fsync the
    /// directory), so that only the last file can ever be torn.
    fn roll(&mut self) -> std::result::Result<(), String> {
        // A finished file ends at its last record: readers treat anything
        // after a non-last file's records as corruption.
        self.current
            .cut_to_len()
            .map_err(|e| format!("truncating {} failed: {e}", self.current.path.display()))?;
        self.sync()?;
        let start = self.current.end_lsn();
        let next = LogFile::create(&self.shared.dir, start).map_err(|e| {
            format!(
                "cannot create log file {}: {e}",
                self.shared.dir.join(log_file_name(start)).display()
            )
        })?;
        self.shared.fsync_dir()?;
        tracing::debug!("write-ahead log moved to {}", next.path.display());
        self.current = next;
        self.shared
            .stats
            .files_created
            .fetch_add(1, Ordering::Relaxed);
        Ok(())
    }
}
