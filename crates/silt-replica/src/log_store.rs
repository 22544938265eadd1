//! The durable replicated log of one replica: OmniPaxos's [`Storage`] on a
//! local file.
//!
//! Every change OmniPaxos makes to its state (entries appended or replaced
//! from an index, the promised and accepted rounds, the decided and
//! compacted indexes, the stop sign, a trim) is one record appended to
//! `paxos.log` in the replica's directory. Records are buffered in memory and
//! written and fdatasynced together by [`LogHandle::sync`]; the group driver
//! ([`crate::group`]) calls it before any message leaves the replica and
//! before anything decided is applied, so a crash can only lose state that no
//! other process has heard of. Paxos needs nothing more: a promise or an
//! acceptance counts only once it has been sent. Records that only say what
//! is decided or trimmed are written without an fdatasync of their own (the
//! next durable record's covers them): a machine crash that loses one makes
//! the replica learn it again, since a decided entry is already accepted by a
//! majority; this saves a third of a replica's fdatasyncs per write.
//!
//! A store of payloads can also keep the log's records ([`Payloads::sync_with_log`]):
//! the records of a sync are appended as one chunk beside the payloads they
//! refer to, and one fdatasync makes both durable. `paxos.log` is then
//! written without a sync of its own (until the store asks for one), and
//! opening the log replays the chunks past its end (a machine crash lost
//! that part of the file). Each file has a random id (a `LogId` record),
//! new at every rewrite, so that chunks of another file are never taken.
//!
//! The whole state is also kept in memory (entries are expected to be small:
//! the layer above moves large payloads out of the log through
//! [`Payloads`]). When the file has grown well past what is live, `sync`
//! rewrites it as one snapshot of the state (tmp file, fsync, rename, fsync of
//! the directory). At open, the records are replayed; a torn or corrupt tail
//! (a crash inside a write) ends the replay and is cut off. The format is in
//! `docs/format/paxos-log.md`.

use crate::error::{ReplicaError, Result};
use omnipaxos::ballot_leader_election::Ballot;
use omnipaxos::storage::{Entry, StopSign, Storage, StorageOp, StorageResult};
use parking_lot::Mutex;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Where the payload of an entry lives. The log stores entries as
/// [`Payloads::absorb`] returns them; messages to other replicas carry them
/// as [`Payloads::expand`] returns them. Hydra's reference trick (seed 001
/// §6.4) is an implementation that writes a block's data once to a data file
/// and keeps only its place in the log.
pub trait Payloads<T>: Send + 'static {
    /// The form of `entry` to keep in this replica's log (called for every
    /// entry stored, whether proposed here or received).
    fn absorb(&mut self, entry: T) -> std::io::Result<T>;
    /// The form of a stored entry to send to another replica.
    fn expand(&self, entry: &T) -> std::io::Result<T>;
    /// Bytes of payload `entry` carries once expanded (without reading it):
    /// what a message shipping it weighs.
    fn expanded_len(&self, entry: &T) -> u64;
    /// Make durable everything absorbed so far (called before the log's own
    /// records are synced, so the log never refers to data that is not on
    /// disk).
    fn sync(&mut self) -> std::io::Result<()>;
    /// Make durable everything absorbed so far and `chunk` (its parts one
    /// after the other), the log's records from byte `tag.offset` of its
    /// file on, with one sync if the
    /// store keeps log chunks beside its payloads. `Ok(true)`: both are
    /// durable, the log's file need not be synced. `Ok(false)`: the
    /// payloads are durable but the chunk is not kept (or the store needs
    /// the log's file synced before it can let older chunks go): the log
    /// syncs its file now.
    fn sync_with_log(&mut self, tag: ChunkTag, chunk: &[&[u8]]) -> std::io::Result<bool> {
        let _ = (tag, chunk);
        self.sync()?;
        Ok(false)
    }
    /// The log's file was synced: every chunk kept so far is in it.
    fn log_synced(&mut self) {}
    /// The chunks this store kept for the log file `log_id` (any order).
    fn log_chunks(&self, log_id: u64) -> Vec<(u64, Vec<u8>)> {
        let _ = log_id;
        Vec::new()
    }
}

/// Which log file a chunk of records belongs to, and where in it the chunk
/// starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChunkTag {
    pub log_id: u64,
    pub offset: u64,
}

/// Entries kept whole in the log.
#[derive(Debug, Default, Clone, Copy)]
pub struct Inline;

impl<T: Clone> Payloads<T> for Inline {
    fn absorb(&mut self, entry: T) -> std::io::Result<T> {
        Ok(entry)
    }
    fn expand(&self, entry: &T) -> std::io::Result<T> {
        Ok(entry.clone())
    }
    fn expanded_len(&self, _: &T) -> u64 {
        0
    }
    fn sync(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// One record of `paxos.log`.
#[derive(Serialize, Deserialize)]
#[serde(bound(
    serialize = "T: Serialize, T::Snapshot: Serialize",
    deserialize = "T: DeserializeOwned, T::Snapshot: DeserializeOwned"
))]
enum Record<T: Entry> {
    /// Drop the entries from absolute index `at` on, then append `entries`.
    Append {
        at: u64,
        entries: Vec<T>,
    },
    Promise(Ballot),
    AcceptedRound(Ballot),
    Decided(u64),
    Stopsign(Option<StopSign>),
    /// Entries below this absolute index are gone.
    Trim(u64),
    Compacted(u64),
    Snapshot(Option<T::Snapshot>),
    /// The id of this file (chunks kept elsewhere name it); the last one
    /// read counts.
    LogId(u64),
}

/// Bytes written without a sync that may wait for the next chunk; past this
/// the file is synced on its own.
const UNCHUNKED_MAX: usize = 1 << 20;

/// fdatasync `file` if the log syncs at all (`LogOptions::fsync`).
fn sync_if(file: &File, fsync: bool) -> std::io::Result<()> {
    if fsync { file.sync_data() } else { Ok(()) }
}

/// A random nonzero id for a new log file.
fn new_log_id() -> u64 {
    rand::random::<u64>() | 1
}

/// Bytes of a record's frame before its body: length and CRC32C, LE u32 each.
const FRAME: usize = 8;
/// A record body larger than this is corrupt (entries are small by design).
const MAX_RECORD: usize = 256 << 20;

/// The in-memory state and the file it is kept in.
struct Inner<T: Entry, P> {
    dir: PathBuf,
    file: File,
    /// Bytes in the file (valid records only).
    file_len: u64,
    /// Encoded records not yet written.
    pending: Vec<u8>,
    /// Among them, one that must be durable before anything depending on it
    /// leaves the replica (entries, promises, accepted rounds, stop signs).
    /// The others (decided and compacted indexes, trims) are written but
    /// not fdatasynced on their own: losing them in a machine crash only
    /// makes the replica learn them again.
    pending_durable: bool,
    /// File length as of the last fdatasync (what a machine crash keeps).
    synced_len: u64,
    /// This file's id (see [`ChunkTag`]).
    log_id: u64,
    /// Bytes written to the file since it was last synced that no chunk
    /// holds yet (records written without a sync): the next chunk starts
    /// with them.
    unchunked: Vec<u8>,
    /// The lowest index an append since the last durable sync wrote at
    /// (None: the entries in memory are the ones on disk).
    dirty_from: Option<usize>,
    entries: Vec<T>,
    /// Absolute index of `entries[0]`.
    trimmed: usize,
    promise: Option<Ballot>,
    accepted_round: Option<Ballot>,
    decided: usize,
    compacted: usize,
    stopsign: Option<StopSign>,
    snapshot: Option<T::Snapshot>,
    payloads: P,
    opts: LogOptions,
    /// A write or sync failed: the replica must stop (its state on disk is
    /// unknown).
    failed: Option<String>,
    stats: LogStats,
}

/// What the log has written, for measurements (Hydra's "less disk I/O").
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct LogStats {
    pub bytes_written: u64,
    pub syncs: u64,
    pub rewrites: u64,
}

/// A replica's log as OmniPaxos sees it ([`Storage`]); clones share it, so
/// the group driver keeps one to [`sync`](LogHandle::sync) it.
pub struct LogHandle<T: Entry, P> {
    inner: Arc<Mutex<Inner<T, P>>>,
}

impl<T: Entry, P> Clone for LogHandle<T, P> {
    fn clone(&self) -> Self {
        LogHandle {
            inner: self.inner.clone(),
        }
    }
}

/// How a log is kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogOptions {
    /// fdatasync at every [`LogHandle::sync`]. Off only where nothing
    /// survives the process anyway (the simulator, whose crashes drop what
    /// was not yet written).
    pub fsync: bool,
    /// Rewrite the file once it is past this size and four times what is live.
    pub rewrite_bytes: u64,
}

impl Default for LogOptions {
    fn default() -> Self {
        LogOptions {
            fsync: true,
            rewrite_bytes: 64 << 20,
        }
    }
}

/// What opening a log found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OpenSummary {
    pub records: u64,
    /// Bytes of a torn or corrupt tail cut off (a crash inside a write).
    pub cut_bytes: u64,
    pub entries: usize,
    pub decided: usize,
    /// Bytes of records replayed from chunks kept beside the payloads.
    pub recovered_bytes: u64,
}

impl<T, P> LogHandle<T, P>
where
    T: Entry + Serialize + DeserializeOwned,
    T::Snapshot: Serialize + DeserializeOwned,
    P: Payloads<T>,
{
    /// Open (or create) the log in `dir`.
    pub fn open(dir: &Path, payloads: P, opts: LogOptions) -> Result<(Self, OpenSummary)> {
        std::fs::create_dir_all(dir).map_err(|e| ReplicaError::io(dir, e))?;
        let path = dir.join("paxos.log");
        let mut file = OpenOptions::new()
            .read(true)
            .append(true)
            .create(true)
            .open(&path)
            .map_err(|e| ReplicaError::io(&path, e))?;
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes)
            .map_err(|e| ReplicaError::io(&path, e))?;
        let mut inner = Inner {
            dir: dir.to_path_buf(),
            file,
            file_len: 0,
            pending: Vec::new(),
            pending_durable: false,
            synced_len: 0,
            log_id: 0,
            unchunked: Vec::new(),
            dirty_from: None,
            entries: Vec::new(),
            trimmed: 0,
            promise: None,
            accepted_round: None,
            decided: 0,
            compacted: 0,
            stopsign: None,
            snapshot: None,
            payloads,
            opts,
            failed: None,
            stats: LogStats::default(),
        };
        let mut summary = OpenSummary::default();
        let mut pos = 0usize;
        while let Some((record, next)) = decode_at::<T>(&bytes, pos) {
            inner.replay(record);
            summary.records += 1;
            pos = next;
        }
        // Chunks past the file's valid end: records synced beside their
        // payloads that the file lost in a machine crash.
        let mut recovered = Vec::new();
        if inner.log_id != 0 {
            let mut chunks = inner.payloads.log_chunks(inner.log_id);
            chunks.sort_by_key(|(offset, _)| *offset);
            let mut end = pos as u64;
            for (offset, chunk) in chunks {
                let chunk_end = offset + chunk.len() as u64;
                if chunk_end <= end {
                    continue;
                }
                if offset > end {
                    break;
                }
                recovered.extend_from_slice(&chunk[(end - offset) as usize..]);
                end = chunk_end;
            }
        }
        if !recovered.is_empty() {
            let mut rpos = 0usize;
            while let Some((record, next)) = decode_at::<T>(&recovered, rpos) {
                inner.replay(record);
                summary.records += 1;
                rpos = next;
            }
            recovered.truncate(rpos);
            summary.recovered_bytes = recovered.len() as u64;
            tracing::info!(
                path = %path.display(),
                bytes = recovered.len(),
                "paxos log: records kept beside the payloads replayed past the file's end"
            );
        }
        if pos < bytes.len() {
            summary.cut_bytes = (bytes.len() - pos) as u64;
            tracing::warn!(
                path = %path.display(),
                cut = summary.cut_bytes,
                "paxos log: torn or corrupt tail cut off"
            );
            inner
                .file
                .set_len(pos as u64)
                .and_then(|_| sync_if(&inner.file, opts.fsync))
                .map_err(|e| ReplicaError::io(&path, e))?;
        }
        inner.file_len = pos as u64;
        inner.synced_len = pos as u64;
        if !recovered.is_empty() || inner.log_id == 0 {
            // The recovered records go into the file, and a file without an
            // id (new, or written before ids) gets one: both synced before
            // any chunk names it.
            if inner.log_id == 0 {
                let id = new_log_id();
                encode_into(&Record::<T>::LogId(id), &mut recovered)?;
                inner.log_id = id;
            }
            inner
                .file
                .write_all(&recovered)
                .and_then(|_| sync_if(&inner.file, opts.fsync))
                .map_err(|e| ReplicaError::io(&path, e))?;
            inner.file_len += recovered.len() as u64;
            inner.synced_len = inner.file_len;
            inner.payloads.log_synced();
        }
        summary.entries = inner.trimmed + inner.entries.len();
        summary.decided = inner.decided;
        Ok((
            LogHandle {
                inner: Arc::new(Mutex::new(inner)),
            },
            summary,
        ))
    }

    /// Create the log of a replica whose state machine was installed from a
    /// snapshot of the group at `idx` (a new member catching up): entries
    /// below `idx` count as decided and trimmed, and the replica takes the
    /// log from there. `dir` must hold no log yet.
    ///
    /// Its accepted round is a placeholder of configuration `config_id`
    /// that no leader ever holds (round 0 of node 0): OmniPaxos then syncs
    /// the replica from its decided index (`idx`), never from the start of
    /// some round it took no part in, which may be trimmed away.
    ///
    /// `promise`: a replica that had a log in this configuration keeps the
    /// round it promised (it must never promise a lower one).
    pub fn create_at(
        dir: &Path,
        idx: usize,
        config_id: u32,
        promise: Option<Ballot>,
        opts: LogOptions,
    ) -> Result<()> {
        std::fs::create_dir_all(dir).map_err(|e| ReplicaError::io(dir, e))?;
        let path = dir.join("paxos.log");
        if std::fs::metadata(&path).is_ok_and(|m| m.len() > 0) {
            return Err(ReplicaError::Config(format!(
                "{} exists: a log is created from a snapshot only in an empty directory",
                path.display()
            )));
        }
        let mut buf = Vec::new();
        for r in [
            Record::<T>::Trim(idx as u64),
            Record::Compacted(idx as u64),
            Record::Decided(idx as u64),
        ] {
            encode_into(&r, &mut buf)?;
        }
        let placeholder = Ballot {
            config_id,
            n: 0,
            priority: 0,
            pid: 0,
        };
        encode_into(&Record::<T>::AcceptedRound(placeholder), &mut buf)?;
        encode_into(&Record::<T>::LogId(new_log_id()), &mut buf)?;
        if let Some(p) = promise {
            encode_into(&Record::<T>::Promise(p), &mut buf)?;
        }
        let tmp = dir.join("paxos.log.tmp");
        (|| -> std::io::Result<()> {
            let mut f = File::create(&tmp)?;
            f.write_all(&buf)?;
            if opts.fsync {
                f.sync_all()?;
            }
            std::fs::rename(&tmp, &path)?;
            if opts.fsync {
                File::open(dir)?.sync_all()?;
            }
            Ok(())
        })()
        .map_err(|e| ReplicaError::io(&path, e))
    }

    /// Write and fdatasync every record since the last call (the payloads
    /// first). A failure leaves the log failed: every later call fails too.
    pub fn sync(&self) -> Result<()> {
        let mut g = self.inner.lock();
        g.sync()
    }

    /// What a stored entry's payload weighs once expanded.
    pub fn expanded_len(&self, entry: &T) -> u64 {
        self.inner.lock().payloads.expanded_len(entry)
    }

    /// The round this replica promised.
    pub fn promise(&self) -> Option<Ballot> {
        self.inner.lock().promise
    }

    /// The stored form of an entry, expanded for another replica.
    pub fn expand(&self, entry: &T) -> std::io::Result<T> {
        self.inner.lock().payloads.expand(entry)
    }

    /// Run `f` on the payload store (the layer above reads data through it).
    pub fn with_payloads<R>(&self, f: impl FnOnce(&mut P) -> R) -> R {
        f(&mut self.inner.lock().payloads)
    }

    pub fn stats(&self) -> LogStats {
        self.inner.lock().stats
    }

    /// Run `f` on the entries still in the log (those from
    /// [`trimmed`](LogHandle::trimmed) on), in log order.
    pub fn with_entries<R>(&self, f: impl FnOnce(&[T]) -> R) -> R {
        f(&self.inner.lock().entries)
    }

    /// The round in which this replica accepted its entries.
    pub fn accepted_round(&self) -> Option<Ballot> {
        self.inner.lock().accepted_round
    }

    /// The absolute index of the first entry still in the log.
    pub fn trimmed(&self) -> usize {
        self.inner.lock().trimmed
    }

    /// Make the decided index at least `idx` (capped at the log's end), on
    /// disk at once. A machine crash can lose the records saying what was
    /// decided (they are not synced on their own); the state machine that
    /// applied entries up to `idx` proves they were.
    pub fn raise_decided(&self, idx: usize) -> Result<()> {
        let mut g = self.inner.lock();
        let end = g.trimmed + g.entries.len();
        let idx = idx.min(end);
        if idx <= g.decided {
            return Ok(());
        }
        encode_into(&Record::<T>::Decided(idx as u64), &mut g.pending)?;
        g.decided = idx;
        g.pending_durable = true;
        g.sync()
    }

    /// The length of `paxos.log` as of the last fdatasync: a machine crash
    /// may lose what was written after it (the simulator cuts it there).
    pub fn synced_len(&self) -> u64 {
        self.inner.lock().synced_len
    }

    /// fdatasync the log's file (what was written to it; buffered records
    /// wait for the next [`LogHandle::sync`]): chunks of it kept beside the
    /// payloads are no longer needed.
    pub fn sync_file(&self) -> Result<()> {
        let mut g = self.inner.lock();
        if let Some(why) = &g.failed {
            return Err(ReplicaError::Failed(why.clone()));
        }
        if g.opts.fsync
            && let Err(e) = g.file.sync_data()
        {
            let why = format!("syncing {}/paxos.log: {e}", g.dir.display());
            return Err(g.fail(why));
        }
        g.synced_len = g.file_len;
        g.unchunked.clear();
        g.stats.syncs += 1;
        g.payloads.log_synced();
        Ok(())
    }

    /// Entries below this absolute index are on disk as they are in memory
    /// (no append since the last sync touched them).
    pub fn stable_len(&self) -> usize {
        let g = self.inner.lock();
        g.dirty_from.unwrap_or(g.trimmed + g.entries.len())
    }

    /// Records are buffered and nothing is synced yet.
    pub fn has_pending(&self) -> bool {
        !self.inner.lock().pending.is_empty()
    }

    fn write(&self, record: Record<T>) -> StorageResult<()> {
        let mut g = self.inner.lock();
        if let Some(why) = &g.failed {
            return Err(Box::new(ReplicaError::Failed(why.clone())));
        }
        let record = match record {
            Record::Append { at, entries } => {
                let at_idx = at as usize;
                g.dirty_from = Some(g.dirty_from.map_or(at_idx, |d| d.min(at_idx)));
                let mut stored = Vec::with_capacity(entries.len());
                for e in entries {
                    match g.payloads.absorb(e) {
                        Ok(s) => stored.push(s),
                        Err(e) => {
                            let why = format!("storing a payload: {e}");
                            g.failed = Some(why.clone());
                            return Err(Box::new(ReplicaError::Failed(why)));
                        }
                    }
                }
                Record::Append {
                    at,
                    entries: stored,
                }
            }
            r => r,
        };
        if let Err(e) = encode_into(&record, &mut g.pending) {
            return Err(Box::new(e));
        }
        if !matches!(
            record,
            Record::Decided(_) | Record::Compacted(_) | Record::Trim(_)
        ) {
            g.pending_durable = true;
        }
        g.replay(record);
        Ok(())
    }
}

impl<T: Entry, P> Drop for Inner<T, P> {
    fn drop(&mut self) {
        // Records written without a sync (kept in chunks beside the
        // payloads) go to the file's disk before the log is let go: the
        // store may forget those chunks once a later log syncs.
        if self.opts.fsync && self.failed.is_none() && self.file_len > self.synced_len {
            let _ = self.file.sync_data();
        }
    }
}

impl<T, P> Inner<T, P>
where
    T: Entry + Serialize + DeserializeOwned,
    T::Snapshot: Serialize + DeserializeOwned,
    P: Payloads<T>,
{
    fn replay(&mut self, record: Record<T>) {
        match record {
            Record::Append { at, entries } => {
                // Entries are placed by absolute index: any below the
                // trimmed index (a leader syncing this replica from further
                // back than its snapshot) are already part of it.
                let at = at as usize;
                let skip = self.trimmed.saturating_sub(at);
                let keep = at.saturating_sub(self.trimmed).min(self.entries.len());
                self.entries.truncate(keep);
                self.entries.extend(entries.into_iter().skip(skip));
            }
            Record::Promise(b) => self.promise = Some(b),
            Record::AcceptedRound(b) => self.accepted_round = Some(b),
            Record::Decided(d) => self.decided = d as usize,
            Record::Stopsign(s) => self.stopsign = s,
            Record::Trim(idx) => {
                let idx = idx as usize;
                let n = idx.saturating_sub(self.trimmed).min(self.entries.len());
                self.entries.drain(..n);
                self.trimmed = self.trimmed.max(idx);
                // `drain` keeps the capacity: give memory back once most of
                // it is free, so a trimmed log's memory follows what is live.
                if self.entries.capacity() > 4 * self.entries.len() + 4096 {
                    self.entries.shrink_to(2 * self.entries.len());
                }
            }
            Record::Compacted(c) => self.compacted = c as usize,
            Record::Snapshot(s) => self.snapshot = s,
            Record::LogId(id) => self.log_id = id,
        }
    }

    fn fail(&mut self, why: String) -> ReplicaError {
        self.failed = Some(why.clone());
        ReplicaError::Failed(why)
    }

    fn sync(&mut self) -> Result<()> {
        if let Some(why) = &self.failed {
            return Err(ReplicaError::Failed(why.clone()));
        }
        if self.pending.is_empty() {
            return Ok(());
        }
        let durable = std::mem::take(&mut self.pending_durable);
        let pending = std::mem::take(&mut self.pending);
        // With the payloads (and, if their store keeps them, the records
        // as one chunk beside them: one sync for both).
        let file_sync = if durable {
            let tag = ChunkTag {
                log_id: self.log_id,
                offset: self.file_len - self.unchunked.len() as u64,
            };
            let synced = self
                .payloads
                .sync_with_log(tag, &[&self.unchunked, &pending]);
            self.unchunked.clear();
            match synced {
                Ok(kept) => !kept,
                Err(e) => return Err(self.fail(format!("syncing payloads: {e}"))),
            }
        } else {
            self.unchunked.extend_from_slice(&pending);
            // Records that never need a sync of their own still should not
            // pile up waiting for a chunk.
            self.unchunked.len() > UNCHUNKED_MAX
        };
        if let Err(e) = self.file.write_all(&pending).and_then(|_| {
            if file_sync && self.opts.fsync {
                self.file.sync_data()
            } else {
                Ok(())
            }
        }) {
            return Err(self.fail(format!("writing {}/paxos.log: {e}", self.dir.display())));
        }
        self.file_len += pending.len() as u64;
        self.stats.bytes_written += pending.len() as u64;
        if durable {
            self.dirty_from = None;
        }
        if file_sync {
            self.synced_len = self.file_len;
            self.unchunked.clear();
            self.stats.syncs += 1;
            self.payloads.log_synced();
        }
        if self.file_len > self.opts.rewrite_bytes && self.file_len > 4 * self.live_bytes_estimate()
        {
            self.rewrite()?;
        }
        Ok(())
    }

    fn live_bytes_estimate(&self) -> u64 {
        // The encoded size of one entry times their number; a rewrite
        // measures exactly.
        let per = self
            .entries
            .last()
            .and_then(|e| postcard::to_stdvec(e).ok())
            .map_or(16, |b| b.len() as u64 + 1);
        per * self.entries.len() as u64 + 1024
    }

    /// Replace the file by one holding only the current state.
    fn rewrite(&mut self) -> Result<()> {
        let mut buf = Vec::new();
        let log_id = new_log_id();
        let records: Vec<Record<T>> = vec![
            Record::LogId(log_id),
            Record::Trim(self.trimmed as u64),
            Record::Compacted(self.compacted as u64),
            Record::Decided(self.decided as u64),
            Record::Stopsign(self.stopsign.clone()),
            Record::Snapshot(self.snapshot.clone()),
        ];
        for r in &records {
            encode_into(r, &mut buf)?;
        }
        if let Some(p) = self.promise {
            encode_into(&Record::<T>::Promise(p), &mut buf)?;
        }
        if let Some(a) = self.accepted_round {
            encode_into(&Record::<T>::AcceptedRound(a), &mut buf)?;
        }
        for chunk in self.entries.chunks(4096).enumerate() {
            let (i, entries) = chunk;
            encode_into(
                &Record::Append {
                    at: (self.trimmed + i * 4096) as u64,
                    entries: entries.to_vec(),
                },
                &mut buf,
            )?;
        }
        let tmp = self.dir.join("paxos.log.tmp");
        let path = self.dir.join("paxos.log");
        let done = (|| -> std::io::Result<File> {
            let mut f = File::create(&tmp)?;
            f.write_all(&buf)?;
            f.sync_all()?;
            std::fs::rename(&tmp, &path)?;
            File::open(&self.dir)?.sync_all()?;
            OpenOptions::new().read(true).append(true).open(&path)
        })();
        match done {
            Ok(f) => {
                self.file = f;
                self.file_len = buf.len() as u64;
                self.synced_len = self.file_len;
                self.log_id = log_id;
                self.unchunked.clear();
                self.payloads.log_synced();
                self.stats.bytes_written += buf.len() as u64;
                self.stats.rewrites += 1;
                Ok(())
            }
            Err(e) => Err(self.fail(format!("rewriting {}: {e}", path.display()))),
        }
    }
}

fn encode_into<T>(record: &Record<T>, out: &mut Vec<u8>) -> Result<()>
where
    T: Entry + Serialize,
    T::Snapshot: Serialize,
{
    let body = postcard::to_stdvec(record).map_err(|e| ReplicaError::Encode(e.to_string()))?;
    out.extend_from_slice(&(body.len() as u32).to_le_bytes());
    out.extend_from_slice(&crc32c::crc32c(&body).to_le_bytes());
    out.extend_from_slice(&body);
    Ok(())
}

/// The record at `pos` and the position after it, or None at a torn or
/// corrupt record (or the end).
fn decode_at<T>(bytes: &[u8], pos: usize) -> Option<(Record<T>, usize)>
where
    T: Entry + DeserializeOwned,
    T::Snapshot: DeserializeOwned,
{
    let head = bytes.get(pos..pos + FRAME)?;
    let len = u32::from_le_bytes(head[..4].try_into().ok()?) as usize;
    let crc = u32::from_le_bytes(head[4..].try_into().ok()?);
    if len > MAX_RECORD {
        return None;
    }
    let body = bytes.get(pos + FRAME..pos + FRAME + len)?;
    if crc32c::crc32c(body) != crc {
        return None;
    }
    let record = postcard::from_bytes(body).ok()?;
    Some((record, pos + FRAME + len))
}

impl<T, P> Storage<T> for LogHandle<T, P>
where
    T: Entry + Serialize + DeserializeOwned,
    T::Snapshot: Serialize + DeserializeOwned,
    P: Payloads<T>,
{
    fn write_atomically(&mut self, ops: Vec<StorageOp<T>>) -> StorageResult<()> {
        // The records of one call reach the file in one write and are synced
        // together, so they are as atomic as a crash lets a write be: a torn
        // write cuts the file inside them and open drops them all, since the
        // sync that covers them never returned and nothing depending on them
        // was sent.
        for op in ops {
            match op {
                StorageOp::AppendEntry(e) => self.append_entry(e)?,
                StorageOp::AppendEntries(es) => self.append_entries(es)?,
                StorageOp::AppendOnPrefix(at, es) => self.append_on_prefix(at, es)?,
                StorageOp::SetPromise(b) => self.set_promise(b)?,
                StorageOp::SetDecidedIndex(d) => self.set_decided_idx(d)?,
                StorageOp::SetAcceptedRound(b) => self.set_accepted_round(b)?,
                StorageOp::SetCompactedIdx(c) => self.set_compacted_idx(c)?,
                StorageOp::Trim(i) => self.trim(i)?,
                StorageOp::SetStopsign(s) => self.set_stopsign(s)?,
                StorageOp::SetSnapshot(s) => self.set_snapshot(s)?,
            }
        }
        Ok(())
    }

    fn append_entry(&mut self, entry: T) -> StorageResult<()> {
        self.append_entries(vec![entry])
    }

    fn append_entries(&mut self, entries: Vec<T>) -> StorageResult<()> {
        let at = {
            let g = self.inner.lock();
            g.trimmed + g.entries.len()
        };
        self.write(Record::Append {
            at: at as u64,
            entries,
        })
    }

    fn append_on_prefix(&mut self, from_idx: usize, entries: Vec<T>) -> StorageResult<()> {
        self.write(Record::Append {
            at: from_idx as u64,
            entries,
        })
    }

    fn set_promise(&mut self, n_prom: Ballot) -> StorageResult<()> {
        self.write(Record::Promise(n_prom))
    }

    fn set_decided_idx(&mut self, ld: usize) -> StorageResult<()> {
        self.write(Record::Decided(ld as u64))
    }

    fn get_decided_idx(&self) -> StorageResult<usize> {
        Ok(self.inner.lock().decided)
    }

    fn set_accepted_round(&mut self, na: Ballot) -> StorageResult<()> {
        self.write(Record::AcceptedRound(na))
    }

    fn get_accepted_round(&self) -> StorageResult<Option<Ballot>> {
        Ok(self.inner.lock().accepted_round)
    }

    fn get_entries(&self, from: usize, to: usize) -> StorageResult<Vec<T>> {
        let g = self.inner.lock();
        if from < to && from < g.trimmed {
            return Err(Box::new(ReplicaError::Trimmed {
                from,
                trimmed: g.trimmed,
            }));
        }
        let (Some(from), Some(to)) = (from.checked_sub(g.trimmed), to.checked_sub(g.trimmed))
        else {
            return Ok(Vec::new());
        };
        Ok(g.entries
            .get(from..to)
            .map(|s| s.to_vec())
            .unwrap_or_default())
    }

    fn get_log_len(&self) -> StorageResult<usize> {
        Ok(self.inner.lock().entries.len())
    }

    fn get_suffix(&self, from: usize) -> StorageResult<Vec<T>> {
        let g = self.inner.lock();
        let Some(from) = from.checked_sub(g.trimmed) else {
            // Entries that are gone: an empty answer would be taken for "no
            // more entries" and shift everything after.
            return Err(Box::new(ReplicaError::Trimmed {
                from,
                trimmed: g.trimmed,
            }));
        };
        Ok(g.entries
            .get(from..)
            .map(|s| s.to_vec())
            .unwrap_or_default())
    }

    fn get_promise(&self) -> StorageResult<Option<Ballot>> {
        Ok(self.inner.lock().promise)
    }

    fn set_stopsign(&mut self, s: Option<StopSign>) -> StorageResult<()> {
        self.write(Record::Stopsign(s))
    }

    fn get_stopsign(&self) -> StorageResult<Option<StopSign>> {
        Ok(self.inner.lock().stopsign.clone())
    }

    fn trim(&mut self, idx: usize) -> StorageResult<()> {
        self.write(Record::Trim(idx as u64))
    }

    fn set_compacted_idx(&mut self, idx: usize) -> StorageResult<()> {
        self.write(Record::Compacted(idx as u64))
    }

    fn get_compacted_idx(&self) -> StorageResult<usize> {
        Ok(self.inner.lock().compacted)
    }

    fn set_snapshot(&mut self, snapshot: Option<T::Snapshot>) -> StorageResult<()> {
        self.write(Record::Snapshot(snapshot))
    }

    fn get_snapshot(&self) -> StorageResult<Option<T::Snapshot>> {
        Ok(self.inner.lock().snapshot.clone())
    }
}

#[cfg(test)]
mod tests;
