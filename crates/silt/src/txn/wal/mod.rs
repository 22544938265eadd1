//! The write-ahead log: one log per database, group commit by a log-flusher
//! thread, torn-tail handling at open, and the checkpoint file (000 §3.3).
//!
//! The log is a directory of files `log-<first LSN>.wal`; an **LSN is a byte
//! position in the whole log** and a record's `end_lsn` is its LSN plus its
//! [`LogRecord::encoded_len`]. Each record is framed as `length, CRC32C,
//! payload`. The file formats (log files, frame, every record's payload, the
//! CHECKPOINT file) are written down in `docs/format/wal.md` and
//! `docs/format/checkpoint.md`.
//!
//! # Modules
//! - `record`: [`LogRecord`] and its payload and frame codec;
//! - `options`: [`Durability`] and [`WalOptions`];
//! - `files`: log file naming, listing and preallocation;
//! - `reader`: [`read_from`] / [`LogReader`] and the torn-tail rules;
//! - `flusher`: the log tail and the flusher thread (group commit);
//! - `writer`: the file being appended to, written by the flusher or by a
//!   committing thread that leads its own commit;
//! - `checkpoint`: the CHECKPOINT file;
//! - here: the [`Wal`] handle.
//!
//! # Group commit
//! [`Wal::append`] only copies the framed record into an in-memory *log tail*;
//! a flusher thread writes everything that accumulated with one `write` and
//! one fsync, then runs the durability callbacks of the records it made
//! durable, in LSN order. A committing thread about to wait for its COMMIT
//! can instead *lead* ([`Wal::append_led`], [`Wal::lead`]): when nobody is
//! writing, it writes and fsyncs the tail itself, so a lone writer's commit
//! does not cross threads. A transaction counts as committed only once its
//! COMMIT record is durable; the callback registered by [`Wal::append_commit`]
//! is where the transaction layer releases its X locks.
//!
//! # Durability modes
//! See [`Durability`]: `Sync` acknowledges after fsync, `Batched` after the write
//! to the OS with an fsync at most every interval, `None` after the write to the
//! OS with no fsync. In every mode a finished file is fsynced (with the
//! directory) before the next file is created, so only the last file can ever
//! end in a torn write.
//!
//! # Failure handling ("fsyncgate")
//! A failed fsync is never retried: after one, the kernel may have dropped the
//! dirty pages and a second fsync can succeed without the data being on disk
//! (the PostgreSQL 2018 lesson). So the first failed write or fsync makes the
//! log **permanently failed**: every pending callback and [`Wal::wait_durable`]
//! caller gets an error, every later append returns [`Error::Closed`] with the
//! reason (and still calls its callback with an error), and nothing is ever
//! acknowledged past the last successful fsync. An error from a commit means
//! "not known to be durable": the record may or may not be found after a
//! restart. Reopening the directory recovers from what is on disk.
//!
//! # Open and torn tails
//! [`Wal::open`] checks that the files are contiguous and scans the last file
//! (only it can end in a torn write; the other files are validated by
//! [`read_from`], which recovery runs over everything from the low-water mark,
//! and open never modifies them). A torn tail (see `reader`) is truncated away
//! (logged and counted); corruption in the middle of the log refuses to open
//! with [`Error::Corrupt`].

mod checkpoint;
mod files;
mod flusher;
mod options;
mod reader;
mod record;
mod writer;

#[cfg(test)]
mod checkpoint_tests;
#[cfg(test)]
mod lead_tests;
#[cfg(test)]
mod options_tests;
#[cfg(test)]
mod record_tests;
#[cfg(test)]
mod tests;

pub use checkpoint::{CHECKPOINT_FILE, Checkpoint, read_checkpoint, write_checkpoint};
pub use flusher::DurableCallback;
pub use options::{
    DEFAULT_BATCH_INTERVAL_MS, DEFAULT_FILE_SIZE_LIMIT, DEFAULT_TAIL_BUFFER_LIMIT, Durability,
    WalOptions,
};
pub use reader::{LogReader, read_from};
pub use record::{FRAME_HEADER_BYTES, LogEntry, LogOp, LogRecord, MAX_PAYLOAD_BYTES, UpdateRef};

use crate::error::{Error, Result};
use crate::storage::fsutil::{create_dir_all, sync_dir};
use files::{LogFile, list_log_files, log_file_name};
use flusher::{Counters, Flusher, Shared, Tail, failed_error, run_callback};
use parking_lot::{Condvar, Mutex};
use serde::Serialize;
use std::fmt;
use std::fs;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::thread::JoinHandle;
use writer::LogWriter;

/// What [`Wal::open`] found.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct OpenSummary {
    /// The LSN the next record will get (end of the valid log).
    pub end_lsn: u64,
    /// Bytes of a torn tail cut from the last file (0 if it ended cleanly).
    pub truncated_bytes: u64,
    /// Number of log files in the directory.
    pub files: usize,
    /// Bytes of the last file read to find the end of the valid log (see
    /// [`WalOptions::valid_below_lsn`]).
    pub scanned_bytes: u64,
}

/// Counters of a [`Wal`] since it was opened.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct WalStats {
    /// Records appended (all kinds).
    pub records: u64,
    /// COMMIT records appended.
    pub commits: u64,
    /// WAIT records appended.
    pub waits: u64,
    /// Framed bytes appended.
    pub bytes: u64,
    /// Batches written by the flusher (one write, and in `Sync` one fsync, each).
    pub batches: u64,
    /// Largest batch, in records and in bytes.
    pub max_batch_records: u64,
    pub max_batch_bytes: u64,
    /// fsyncs of log files (batches, file rolls, interval syncs, open, close).
    pub fsyncs: u64,
    /// fsyncs of the log directory (file creation and deletion).
    pub dir_fsyncs: u64,
    /// Log files created and deleted by this instance.
    pub files_created: u64,
    pub files_deleted: u64,
    /// Appends that waited because the tail buffer was full.
    pub tail_full_waits: u64,
    /// Largest size the tail buffer reached.
    pub max_tail_bytes: u64,
    /// Torn tail cut at open (0 or 1) and its size.
    pub torn_tails_truncated: u64,
    pub truncated_tail_bytes: u64,
    /// See [`Wal::durable_lsn`], [`Wal::synced_lsn`], [`Wal::end_lsn`].
    pub durable_lsn: u64,
    pub synced_lsn: u64,
    pub end_lsn: u64,
    /// Why the log failed, if it did.
    pub failed: Option<String>,
}

/// The write-ahead log of a database. See the module documentation for the
/// design (group commit, durability modes, failure handling, torn tails).
///
/// `Wal` is `Send + Sync`: share it with an `Arc`. Durability callbacks run on
/// the flusher thread, or on a committing thread that leads ([`Wal::lead`]),
/// in LSN order: they must be short and must not append, lead,
/// call [`Wal::wait_durable`], [`Wal::flush`] or [`Wal::close`] (each may wait
/// for the thread that runs them). A panicking callback is caught and logged.
pub struct Wal {
    shared: Arc<Shared>,
    flusher: Mutex<Option<JoinHandle<()>>>,
}

impl fmt::Debug for Wal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Wal")
            .field("dir", &self.shared.dir)
            .field("durability", &self.shared.durability)
            .field("durable_lsn", &self.durable_lsn())
            .field("end_lsn", &self.end_lsn())
            .finish()
    }
}

impl Wal {
    /// Open (or create) the log in `dir` for appending after its last valid
    /// record, truncating a torn tail of the last file (see the module
    /// documentation) and start the flusher thread. Refuses to open
    /// ([`Error::Corrupt`]) when the log is corrupt anywhere but at its very end.
    pub fn open(dir: &Path, opts: WalOptions) -> Result<(Wal, OpenSummary)> {
        if opts.file_size_limit == 0 {
            return Err(Error::Config(
                "write-ahead log file_size_limit must be at least 1 byte".into(),
            ));
        }
        if opts.tail_buffer_limit == 0 {
            return Err(Error::Config(
                "write-ahead log tail_buffer_limit must be at least 1 byte".into(),
            ));
        }
        if opts.durability == (Durability::Batched { interval_ms: 0 }) {
            return Err(Error::Config(
                "durability batched(0) is not allowed; use `sync`".into(),
            ));
        }
        create_dir_all(dir)?;
        let files = list_log_files(dir)?;
        let stats = Counters::default();
        let mut truncated_bytes = 0;
        let mut scanned_bytes = 0;
        let current = match files.last() {
            None => {
                let f = LogFile::create(dir, 0)
                    .map_err(|e| Error::io(dir.join(log_file_name(0)), e))?;
                sync_dir(dir)?;
                stats.files_created.fetch_add(1, Ordering::Relaxed);
                stats.dir_fsyncs.fetch_add(1, Ordering::Relaxed);
                f
            }
            Some(last) => {
                let end = reader::scan_last_file(last, opts.valid_below_lsn)?;
                scanned_bytes = end.scanned;
                let (file, torn_len) = LogFile::reopen(last, end.valid_len)?;
                if torn_len > 0 {
                    truncated_bytes = torn_len;
                    stats.torn_tails_truncated.fetch_add(1, Ordering::Relaxed);
                    stats
                        .truncated_tail_bytes
                        .store(truncated_bytes, Ordering::Relaxed);
                }
                stats.fsyncs.fetch_add(1, Ordering::Relaxed);
                file
            }
        };
        let end_lsn = current.end_lsn();
        let shared = Arc::new(Shared {
            dir: dir.to_path_buf(),
            durability: opts.durability,
            file_size_limit: opts.file_size_limit,
            tail_limit: opts.tail_buffer_limit,
            fault: opts.fault,
            tail: Mutex::new(Tail::new(end_lsn)),
            writer: Mutex::new(LogWriter::new(current)),
            work: Condvar::new(),
            space: Condvar::new(),
            durable: Condvar::new(),
            durable_lsn: AtomicU64::new(end_lsn),
            synced_lsn: AtomicU64::new(end_lsn),
            end_lsn: AtomicU64::new(end_lsn),
            files_lock: Mutex::new(()),
            stats,
        });
        let flusher = Flusher::new(shared.clone());
        let thread_shared = shared.clone();
        let (ready_tx, ready) = crossbeam_channel::bounded(1);
        let handle = std::thread::Builder::new()
            .name("silt-wal-flusher".into())
            .spawn(move || {
                if catch_unwind(AssertUnwindSafe(|| flusher.run(ready_tx))).is_err() {
                    thread_shared.fail("the log flusher thread panicked".into());
                }
            })
            .map_err(|e| Error::io(dir, e))?;
        // Err only if the thread ended first; its failure is then the log's.
        let _ = ready.recv();
        let summary = OpenSummary {
            end_lsn,
            truncated_bytes,
            files: files.len().max(1),
            scanned_bytes,
        };
        Ok((
            Wal {
                shared,
                flusher: Mutex::new(Some(handle)),
            },
            summary,
        ))
    }

    /// The log directory.
    pub fn dir(&self) -> &Path {
        &self.shared.dir
    }

    /// The durability mode the log was opened with.
    pub fn durability(&self) -> Durability {
        self.shared.durability
    }

    /// Append `rec` to the log tail and return its LSN. The record is durable
    /// once [`durable_lsn`](Self::durable_lsn) reaches `lsn + rec.encoded_len()`.
    /// Waits if the tail buffer is full. Errors: [`Error::Closed`] after
    /// [`close`](Self::close) or a failure, [`Error::ValueTooLarge`] for a
    /// record over [`MAX_PAYLOAD_BYTES`].
    pub fn append(&self, rec: &LogRecord) -> Result<u64> {
        with_frame(
            |out| rec.encode_frame_into(out),
            |frame| self.shared.enqueue(frame, None, false).map_err(|(e, _)| e),
        )
    }

    /// [`append`](Self::append) of an UPDATE whose key and value are
    /// borrowed (the same record as [`LogRecord::Update`]).
    pub fn append_update(&self, rec: &UpdateRef<'_>) -> Result<u64> {
        with_frame(
            |out| rec.encode_frame_into(out),
            |frame| self.shared.enqueue(frame, None, false).map_err(|(e, _)| e),
        )
    }

    /// Append `rec` and call `on_durable` from the flusher thread once it is
    /// durable. `on_durable` is called **exactly once**: with `Ok(())` when the
    /// record is durable, or with an error if it never will be — including when
    /// this call itself fails (then on the calling thread, before returning the
    /// same error).
    pub fn append_with_callback(
        &self,
        rec: &LogRecord,
        on_durable: DurableCallback,
    ) -> Result<u64> {
        self.append_callback(rec, on_durable, false)
    }

    /// [`append_with_callback`](Self::append_with_callback) for a record
    /// whose appending thread is about to wait for it: the flusher is not
    /// woken. The caller must then call [`lead`](Self::lead) on this thread
    /// before it waits, or [`kick`](Self::kick) if it will not wait; else the
    /// record waits for the next lazy write.
    pub fn append_led(&self, rec: &LogRecord, on_durable: DurableCallback) -> Result<u64> {
        self.append_callback(rec, on_durable, true)
    }

    /// Leader-based commit: if nobody is writing the log and the record
    /// appended at `lsn` is not durable yet, write and (in `Sync` mode)
    /// fsync everything buffered on this thread, running the durability
    /// callbacks it covers here. Returns at once when another thread is
    /// writing: that thread or the flusher then makes the record durable.
    /// Must not be called from a durability callback.
    pub fn lead(&self, lsn: u64) {
        self.shared.lead(lsn)
    }

    /// Wake the flusher for records appended with
    /// [`append_led`](Self::append_led) that this thread will not lead.
    pub fn kick(&self) {
        self.shared.kick()
    }

    fn append_callback(
        &self,
        rec: &LogRecord,
        on_durable: DurableCallback,
        lead: bool,
    ) -> Result<u64> {
        let mut frame = Vec::new();
        if let Err(e) = rec.encode_frame_into(&mut frame) {
            run_callback(
                on_durable,
                Err(Error::Closed(format!("record not logged: {e}"))),
            );
            return Err(e);
        }
        match self.shared.enqueue(&frame, Some(on_durable), lead) {
            Ok(lsn) => {
                match rec {
                    LogRecord::Commit { .. } => &self.shared.stats.commits,
                    LogRecord::Wait { .. } => &self.shared.stats.waits,
                    _ => return Ok(lsn),
                }
                .fetch_add(1, Ordering::Relaxed);
                Ok(lsn)
            }
            Err((e, cb)) => {
                if let Some(cb) = cb {
                    run_callback(cb, Err(self.shared.status_error()));
                }
                Err(e)
            }
        }
    }

    /// Append a COMMIT for `txn`; `on_durable` runs (exactly once, see
    /// [`append_with_callback`](Self::append_with_callback)) when it is durable —
    /// the moment the transaction counts as committed and may release its locks.
    /// `Err` given to `on_durable` means the commit is not known to be durable.
    pub fn append_commit(&self, txn: u64, on_durable: DurableCallback) -> Result<u64> {
        self.append_with_callback(&LogRecord::Commit { txn }, on_durable)
    }

    /// Append a WAIT for `txn` (Algorithm 1): `on_durable` runs once it and every
    /// record before it — so every COMMIT the calling thread wrote — is durable.
    pub fn append_wait(&self, txn: u64, on_durable: DurableCallback) -> Result<u64> {
        self.append_with_callback(&LogRecord::Wait { txn }, on_durable)
    }

    /// Block until every record below `lsn` is durable and the durability
    /// callbacks of those records have run. Errors if the log failed before
    /// that, or if `lsn` is past [`end_lsn`](Self::end_lsn).
    pub fn wait_durable(&self, lsn: u64) -> Result<()> {
        self.shared.wait_durable(lsn)
    }

    /// Write and **fsync** everything appended so far, whatever the durability
    /// mode, and return the LSN it covers. For the "log before data" rule in
    /// `Batched` and `None` modes: call it before installing a flushed
    /// component or writing a checkpoint that refers to LSNs up to
    /// [`end_lsn`](Self::end_lsn), so that a crash can never leave components
    /// or a checkpoint ahead of the log (after which LSNs would be reused).
    /// In `Sync` mode every written batch is already fsynced, so this only waits
    /// for the records appended so far to be written.
    pub fn sync(&self) -> Result<u64> {
        self.shared.sync()
    }

    /// Block until everything appended so far is durable (and acknowledged).
    pub fn flush(&self) -> Result<()> {
        self.wait_durable(self.end_lsn())
    }

    /// Every record that ends at or below this LSN is durable in the sense of
    /// the durability mode: fsynced in `Sync`, written to the OS in `Batched`
    /// and `None`. Commit callbacks run once this covers their record.
    pub fn durable_lsn(&self) -> u64 {
        self.shared.durable_lsn.load(Ordering::Acquire)
    }

    /// Every record that ends at or below this LSN has been fsynced.
    pub fn synced_lsn(&self) -> u64 {
        self.shared.synced_lsn.load(Ordering::Acquire)
    }

    /// The LSN the next appended record will get.
    pub fn end_lsn(&self) -> u64 {
        self.shared.end_lsn.load(Ordering::Acquire)
    }

    /// Why the log failed, if it did.
    pub fn failure(&self) -> Option<String> {
        self.shared.failure()
    }

    /// Delete the log files that lie wholly below `lsn` (every record in them
    /// ends at or below `lsn`, i.e. the next file starts at or below `lsn`),
    /// oldest first, fsyncing the directory after each so that no gap can
    /// appear. The file being appended to is never deleted. Returns how many.
    pub fn truncate_before(&self, lsn: u64) -> Result<usize> {
        let _guard = self.shared.files_lock.lock();
        let files = list_log_files(&self.shared.dir)?;
        let mut deleted = 0;
        for w in files.windows(2) {
            if w[1].start > lsn {
                break;
            }
            fs::remove_file(&w[0].path).map_err(|e| Error::io(&w[0].path, e))?;
            sync_dir(&self.shared.dir)?;
            self.shared.stats.dir_fsyncs.fetch_add(1, Ordering::Relaxed);
            self.shared
                .stats
                .files_deleted
                .fetch_add(1, Ordering::Relaxed);
            deleted += 1;
        }
        if deleted > 0 {
            tracing::debug!(
                "write-ahead log {}: deleted {deleted} files below LSN {lsn}",
                self.shared.dir.display()
            );
        }
        Ok(deleted)
    }

    /// Counters since open.
    pub fn stats(&self) -> WalStats {
        let c = &self.shared.stats;
        let l = |a: &AtomicU64| a.load(Ordering::Relaxed);
        WalStats {
            records: l(&c.records),
            commits: l(&c.commits),
            waits: l(&c.waits),
            bytes: l(&c.bytes),
            batches: l(&c.batches),
            max_batch_records: l(&c.max_batch_records),
            max_batch_bytes: l(&c.max_batch_bytes),
            fsyncs: l(&c.fsyncs),
            dir_fsyncs: l(&c.dir_fsyncs),
            files_created: l(&c.files_created),
            files_deleted: l(&c.files_deleted),
            tail_full_waits: l(&c.tail_full_waits),
            max_tail_bytes: l(&c.max_tail_bytes),
            torn_tails_truncated: l(&c.torn_tails_truncated),
            truncated_tail_bytes: l(&c.truncated_tail_bytes),
            durable_lsn: self.durable_lsn(),
            synced_lsn: self.synced_lsn(),
            end_lsn: self.end_lsn(),
            failed: self.failure(),
        }
    }

    /// Write out and fsync everything appended so far (in every durability
    /// mode), stop the flusher thread and refuse further appends. Idempotent.
    /// Returns the failure if the log failed (now or earlier).
    pub fn close(&self) -> Result<()> {
        self.shared.begin_close();
        // Hold the handle's mutex while joining, so that a concurrent second
        // `close` returns only once the flusher has finished too.
        let mut flusher = self.flusher.lock();
        if flusher
            .as_ref()
            .is_some_and(|h| h.thread().id() == std::thread::current().id())
        {
            return Err(Error::Config(
                "Wal::close called from a durability callback (the flusher thread)".into(),
            ));
        }
        if let Some(h) = flusher.take()
            && h.join().is_err()
        {
            self.shared.fail("the log flusher thread panicked".into());
        }
        match self.failure() {
            Some(reason) => Err(failed_error(&reason)),
            None => Ok(()),
        }
    }
}

impl Drop for Wal {
    fn drop(&mut self) {
        if let Err(e) = self.close() {
            tracing::warn!("closing write-ahead log {}: {e}", self.shared.dir.display());
        }
    }
}

/// Frames larger than this are not kept in a thread's frame buffer.
const FRAME_BUFFER_KEEP: usize = 64 << 10;

thread_local! {
    /// Each thread's buffer for the frame it is appending (a record is
    /// framed here and copied into the log tail, so appending allocates
    /// nothing per record).
    static FRAME: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Frame a record with `encode` into this thread's frame buffer and hand
/// the frame to `enqueue`.
fn with_frame(
    encode: impl FnOnce(&mut Vec<u8>) -> Result<()>,
    enqueue: impl FnOnce(&[u8]) -> Result<u64>,
) -> Result<u64> {
    FRAME.with(|cell| {
        // A re-entrant append (none exists) would get a buffer of its own.
        let Ok(mut buf) = cell.try_borrow_mut() else {
            let mut own = Vec::new();
            encode(&mut own)?;
            return enqueue(&own);
        };
        encode(&mut buf)?;
        let r = enqueue(&buf);
        if buf.capacity() > FRAME_BUFFER_KEEP {
            *buf = Vec::new();
        }
        r
    })
}
