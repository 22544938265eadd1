//! The log writer: the file being appended to and the batch taken from the
//! log tail. Whoever holds it (`Shared::writer`) writes and fsyncs the log:
//! the flusher thread, or a committing thread that *leads* its own commit.
//!
//! **Leader-based commit.** Under `Sync` durability a commit used to cross
//! threads twice: the writer woke the flusher, and the flusher woke the
//! writer once the fsync was done. A lone writer paid both hand-offs on every
//! commit. Now a commit appended with `lead` does not wake the flusher;
//! when its thread waits for it, it takes the writer if nobody holds it
//! ([`Shared::lead`]), writes everything buffered (its own COMMIT and any
//! other records waiting: group commit still happens) and fsyncs, and runs
//! the durability callbacks itself. When the writer is busy (the flusher or
//! another leader holds it), the commit waits as before, and the holder,
//! once done, wakes the flusher for whatever was appended meanwhile.
//!
//! Batches are taken from the tail only while holding the writer, so the
//! log is written, and callbacks run, in LSN order whoever writes; a
//! failed write or fsync fails the log before the writer is let go. Lock
//! order: the writer before the tail.

use super::files::{LogFile, log_file_name};
use super::flusher::{Pending, Shared, Tail, run_callback};
use super::options::Durability;
use super::record::{FRAME_HEADER_BYTES, le_u32};
use crate::txn::fault::FaultInjector;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// The file being appended to and the batch being written.
pub(super) struct LogWriter {
    pub(super) current: LogFile,
    /// The batch being written; swapped with the (empty) tail buffer.
    batch: Vec<u8>,
}

/// A batch taken from the tail: it ends at `end_lsn` and holds `records`.
pub(super) struct Taken {
    pub(super) end_lsn: u64,
    pub(super) records: u64,
}

impl LogWriter {
    /// The writer appending to `current`.
    pub(super) fn new(current: LogFile) -> LogWriter {
        LogWriter {
            current,
            batch: Vec::new(),
        }
    }

    /// Take everything buffered in the tail as the next batch (the caller
    /// holds the writer, so batches are written in LSN order).
    pub(super) fn take(&mut self, shared: &Shared, tail: &mut Tail) -> Taken {
        tail.want_durable = false;
        tail.first_buffered = None;
        self.batch.clear();
        std::mem::swap(&mut tail.buf, &mut self.batch);
        let records = std::mem::take(&mut tail.buf_records);
        shared.space.notify_all();
        Taken {
            end_lsn: tail.next_lsn,
            records,
        }
    }

    /// fsync the current file and publish the synced LSN.
    pub(super) fn sync(&mut self, shared: &Shared) -> Result<(), String> {
        shared.fsync_file(&self.current)?;
        let end = self.current.end_lsn();
        // Under the lock, so that a `Wal::sync` caller cannot miss the wake-up.
        let mut tail = shared.tail.lock();
        tail.last_sync = Instant::now();
        tail.unsynced = false;
        shared.synced_lsn.store(end, Ordering::Release);
        shared.durable.notify_all();
        Ok(())
    }

    /// Write the batch taken by [`LogWriter::take`], sync it as the
    /// durability mode asks, and run the callbacks it made durable.
    pub(super) fn write_batch(&mut self, shared: &Shared, taken: Taken) -> Result<(), String> {
        let Taken { end_lsn, records } = taken;
        let batch = std::mem::take(&mut self.batch);
        let written = self.write_bytes(shared, &batch);
        let bytes = batch.len() as u64;
        self.batch = batch;
        if self.batch.capacity() > 2 * shared.tail_limit {
            self.batch = Vec::new();
        }
        written?;
        if self.current.end_lsn() != end_lsn {
            return Err(format!(
                "internal error: log file ends at LSN {} after a batch ending at LSN {end_lsn}",
                self.current.end_lsn()
            ));
        }
        let due = match shared.durability {
            Durability::Sync => true,
            Durability::Batched { interval_ms } => {
                shared.tail.lock().last_sync.elapsed() >= Duration::from_millis(interval_ms)
            }
            Durability::None => false,
        };
        if due {
            self.sync(shared)?;
        } else {
            shared.tail.lock().unsynced = true;
        }
        let st = &shared.stats;
        st.batches.fetch_add(1, Ordering::Relaxed);
        st.max_batch_records.fetch_max(records, Ordering::Relaxed);
        st.max_batch_bytes.fetch_max(bytes, Ordering::Relaxed);
        publish(shared, end_lsn);
        Ok(())
    }

    /// Write framed records, moving to a new file before a record whenever the
    /// current file has reached the size limit.
    fn write_bytes(&mut self, shared: &Shared, data: &[u8]) -> Result<(), String> {
        let limit = shared.file_size_limit;
        let mut pos = 0usize;
        while pos < data.len() {
            if self.current.len >= limit && self.current.len > 0 {
                self.roll(shared)?;
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
            self.write_chunk(shared, &data[pos..chunk_end])?;
            pos = chunk_end;
        }
        Ok(())
    }

    fn write_chunk(&mut self, shared: &Shared, chunk: &[u8]) -> Result<(), String> {
        let allowed = match &shared.fault {
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
    fn roll(&mut self, shared: &Shared) -> Result<(), String> {
        // A finished file ends at its last record: readers treat anything
        // after a non-last file's records as corruption.
        self.current
            .cut_to_len()
            .map_err(|e| format!("truncating {} failed: {e}", self.current.path.display()))?;
        self.sync(shared)?;
        let start = self.current.end_lsn();
        let next = LogFile::create(&shared.dir, start).map_err(|e| {
            format!(
                "cannot create log file {}: {e}",
                shared.dir.join(log_file_name(start)).display()
            )
        })?;
        shared.fsync_dir()?;
        tracing::debug!("write-ahead log moved to {}", next.path.display());
        self.current = next;
        shared.stats.files_created.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }
}

/// Advance the durable LSN, run the callbacks now covered (in LSN order),
/// then wake `wait_durable` callers. Called holding the writer.
fn publish(shared: &Shared, end_lsn: u64) {
    let ready: Vec<Pending> = {
        let mut tail = shared.tail.lock();
        shared.durable_lsn.store(end_lsn, Ordering::Release);
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
    shared.tail.lock().acked_lsn = end_lsn;
    shared.durable.notify_all();
}

impl Shared {
    /// Leader-based commit (see the module documentation): if nobody is
    /// writing the log and the record at `lsn` is not durable yet, write and
    /// sync everything buffered on this thread and run the callbacks it
    /// covers. Returns without waiting when someone else holds the writer:
    /// the record's callback then comes from that writer or the flusher.
    pub(super) fn lead(&self, lsn: u64) {
        let Some(mut writer) = self.writer.try_lock() else {
            return;
        };
        let mut tail = self.tail.lock();
        // `durable_lsn` moves only to record ends: past `lsn`, the record
        // starting there is durable.
        if tail.failed.is_some()
            || tail.buf.is_empty()
            || self.durable_lsn.load(Ordering::Acquire) > lsn
        {
            return;
        }
        let taken = writer.take(self, &mut tail);
        drop(tail);
        if let Err(reason) = writer.write_batch(self, taken) {
            // Failed while still holding the writer: nobody may write and
            // acknowledge later records between a failed fsync and the
            // failure (a later fsync proves nothing about this batch).
            self.fail(reason);
            return;
        }
        drop(writer);
        // Records appended while this thread wrote, whose appenders found
        // the writer busy, go to the flusher (checked after letting go of
        // the writer: an appender that found it busy appended before that).
        let tail = self.tail.lock();
        if tail.want_durable && !tail.buf.is_empty() {
            self.work.notify_one();
        }
    }
}
