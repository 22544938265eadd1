//! The write-ahead log: one log per database, group commit by a log-flusher
//! thread, torn-tail handling at open, and the checkpoint file (000 §3.3).
//!
//! # Layout
//! The log is a directory of files `log-<first LSN as 016x>.wal`. An **LSN is a
//! byte position in the whole log**: file `log-X.wal` holds the bytes of the log
//! from position `X` on, the next file starts exactly where the previous one
//! ends, and the LSN of a record is the position of its first byte. A record's
//! `end_lsn` is its LSN plus its encoded length ([`LogRecord::encoded_len`]).
//! The writer moves to a new file before a record when the current file has
//! reached [`WalOptions::file_size_limit`]; records never span files.
//!
//! # Framing
//! `u32 LE payload length, u32 LE crc32c(payload), payload`. The payload starts
//! with a format version byte (1) and a record tag, followed by varint-encoded
//! fields (see [`LogRecord`]).
//!
//! # Group commit
//! [`Wal::append`] only copies the framed record into an in-memory *log tail*
//! buffer under a mutex (which also assigns the LSN, so LSN order = buffer order).
//! A dedicated flusher thread repeatedly takes everything that accumulated while
//! its previous write+fsync ran, writes it with one `write`, fsyncs once, then
//! advances the durable LSN, runs the durability callbacks of the records it made
//! durable (in LSN order) and wakes [`Wal::wait_durable`] callers. There is no
//! group-commit timer: as in AsterixDB the batching is self-throttled — the slower
//! the device, the more commits pile up behind one fsync. A transaction counts as
//! committed only once its COMMIT record is durable; the callback registered by
//! [`Wal::append_commit`] is where the transaction layer releases its X locks.
//! The tail buffer is bounded ([`WalOptions::tail_buffer_limit`]): appenders wait
//! for the flusher instead of growing memory without bound.
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
//! and open never modifies them). An invalid record (short header, length
//! running past the end of the file, checksum mismatch) is a *torn tail* only
//! when no valid record follows it anywhere in the last file; the tail is then
//! truncated away (logged and counted). An invalid record followed by a valid
//! one, an invalid record in any file but the last, or a gap between files is
//! corruption in the middle of the log: [`Error::Corrupt`] naming the file and
//! offset, because continuing would silently drop committed records. A record
//! whose checksum matches but whose payload cannot be decoded is always
//! corruption. Limitation: after a power loss, a device that persisted the
//! un-fsynced tail out of order (a hole followed by a later record) is reported
//! as corruption rather than repaired, since the two cases cannot be told apart.

use super::fault::FaultInjector;
use crate::error::{Error, Result};
use crate::storage::fsutil::{create_dir_all, write_atomic};
use parking_lot::{Condvar, Mutex};
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;
use std::fmt;
use std::fs::{self, File, OpenOptions};
use std::io::{self, BufReader, Read, Seek, SeekFrom};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Bytes of the frame header (`u32` length, `u32` crc32c).
pub const FRAME_HEADER_BYTES: usize = 8;
/// Largest accepted payload of one log record.
pub const MAX_PAYLOAD_BYTES: usize = 256 << 20;
/// Default [`WalOptions::file_size_limit`].
pub const DEFAULT_FILE_SIZE_LIMIT: u64 = 64 << 20;
/// Default [`WalOptions::tail_buffer_limit`].
pub const DEFAULT_TAIL_BUFFER_LIMIT: usize = 32 << 20;
/// In `Sync` mode, buffered records without a durability request are written
/// once this many bytes accumulate.
const EAGER_WRITE_BYTES: usize = 1 << 20;
/// Log files grow by this much of zeros ahead of the records.
const PREALLOC_BYTES: u64 = 4 << 20;
/// `Batched` / `None` modes: the flusher writes buffered records to the OS at
/// least this often (so a process crash loses at most this much of
/// acknowledged commits in those modes) or when `LAZY_WRITE_BYTES` accumulate.
const LAZY_WRITE_MS: u64 = 5;
const LAZY_WRITE_BYTES: usize = 256 << 10;
/// Interval of `Durability::Batched` when parsed from plain `"batched"`.
pub const DEFAULT_BATCH_INTERVAL_MS: u64 = 10;
/// Name of the checkpoint file inside the directory given to [`write_checkpoint`].
pub const CHECKPOINT_FILE: &str = "CHECKPOINT";

const FORMAT_VERSION: u8 = 1;
const MIN_PAYLOAD_BYTES: usize = 2;
const TAG_UPDATE: u8 = 1;
const TAG_COMMIT: u8 = 2;
const TAG_ABORT: u8 = 3;
const TAG_WAIT: u8 = 4;
const TAG_UPDATE_BATCH: u8 = 5;
const CHECKPOINT_MAGIC: &str = "silt-checkpoint v1";

// ---------------------------------------------------------------------------
// Records
// ---------------------------------------------------------------------------

/// Operation of an [`LogRecord::Update`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum LogOp {
    /// Insert or replace the entry.
    Put = 1,
    /// Delete: an antimatter entry.
    Delete = 2,
}

impl LogOp {
    /// The operation with this on-disk code.
    pub fn from_u8(b: u8) -> Option<LogOp> {
        match b {
            1 => Some(LogOp::Put),
            2 => Some(LogOp::Delete),
            _ => None,
        }
    }
}

/// One log record.
///
/// Payload encoding (format version 1): `u8 version = 1, u8 tag`, then
/// - `Update` (tag 1): varint txn, varint dataset, varint partition, varint
///   index, `u8` op, varint key length, key, varint seq, varint value length, value;
/// - `Commit` (2), `Abort` (3), `Wait` (4): varint txn;
/// - `UpdateBatch` (5): varint txn, varint dataset, varint partition, varint
///   index, varint seq, varint entry count, then per entry `u8` op, varint key
///   length, key, varint value length, value.
#[derive(Clone, Debug, PartialEq)]
pub enum LogRecord {
    /// Index-level logical log record: one index operation.
    Update {
        txn: u64,
        dataset: u32,
        partition: u32,
        index: u32,
        op: LogOp,
        key: Vec<u8>,
        seq: u64,
        value: Vec<u8>,
    },
    /// Several operations on one index by one record write, all with the same
    /// sequence number (a record's entries in a secondary index: a keyword
    /// index writes one per word). Logically the same as one `Update` per
    /// entry, in order, at this record's LSN; one record instead of many
    /// saves the per-record framing (about 25 bytes and a CRC each).
    UpdateBatch {
        txn: u64,
        dataset: u32,
        partition: u32,
        index: u32,
        seq: u64,
        entries: Vec<LogEntry>,
    },
    /// The transaction committed (once this record is durable).
    Commit { txn: u64 },
    /// The transaction aborted; its effects were undone by inverse operations.
    Abort { txn: u64 },
    /// Written by a thread that is about to block on a lock (deadlock-free batch
    /// protocol, Algorithm 1 of 000 §3.4.2): once it is durable, every COMMIT the
    /// thread wrote before it is durable too, so the thread holds no locks.
    Wait { txn: u64 },
}

/// One operation of a [`LogRecord::UpdateBatch`].
#[derive(Clone, Debug, PartialEq)]
pub struct LogEntry {
    pub op: LogOp,
    pub key: Vec<u8>,
    pub value: Vec<u8>,
}

impl LogEntry {
    /// The memtable entry this operation writes, with its key. Antimatter
    /// keeps the logged value (a spatial index's deleted bounds).
    pub fn into_entry(self, seq: u64) -> (Vec<u8>, crate::storage::Entry) {
        let kind = match self.op {
            LogOp::Put => crate::storage::EntryKind::Put,
            LogOp::Delete => crate::storage::EntryKind::Delete,
        };
        let e = crate::storage::Entry {
            seq,
            kind,
            value: self.value,
        };
        (self.key, e)
    }
}

fn varint_len(mut v: u64) -> usize {
    let mut n = 1;
    while v >= 0x80 {
        v >>= 7;
        n += 1;
    }
    n
}

fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Bounds-checked reader over a payload.
struct Decoder<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Decoder<'a> {
    fn u8(&mut self) -> std::result::Result<u8, String> {
        let b = *self
            .buf
            .get(self.pos)
            .ok_or_else(|| format!("payload truncated at byte {}", self.pos))?;
        self.pos += 1;
        Ok(b)
    }

    fn varint(&mut self) -> std::result::Result<u64, String> {
        let mut v: u64 = 0;
        for shift in (0..64).step_by(7) {
            let b = self.u8()?;
            v |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(format!("varint too long at byte {}", self.pos))
    }

    fn varint_u32(&mut self, what: &str) -> std::result::Result<u32, String> {
        let v = self.varint()?;
        u32::try_from(v).map_err(|_| format!("{what} {v} does not fit in 32 bits"))
    }

    fn bytes(&mut self) -> std::result::Result<&'a [u8], String> {
        let len = usize::try_from(self.varint()?).map_err(|_| "length overflow".to_string())?;
        let end = self
            .pos
            .checked_add(len)
            .filter(|&e| e <= self.buf.len())
            .ok_or_else(|| format!("field of {len} bytes runs past the payload"))?;
        let s = &self.buf[self.pos..end];
        self.pos = end;
        Ok(s)
    }
}

impl LogRecord {
    /// The transaction this record belongs to.
    pub fn txn(&self) -> u64 {
        match self {
            LogRecord::Update { txn, .. }
            | LogRecord::UpdateBatch { txn, .. }
            | LogRecord::Commit { txn }
            | LogRecord::Abort { txn }
            | LogRecord::Wait { txn } => *txn,
        }
    }

    /// (txn, dataset, partition, index, seq) of an index-operation record
    /// (`Update` or `UpdateBatch`); `None` for the others.
    pub fn index_target(&self) -> Option<(u64, u32, u32, u32, u64)> {
        match self {
            LogRecord::Update {
                txn,
                dataset,
                partition,
                index,
                seq,
                ..
            }
            | LogRecord::UpdateBatch {
                txn,
                dataset,
                partition,
                index,
                seq,
                ..
            } => Some((*txn, *dataset, *partition, *index, *seq)),
            LogRecord::Commit { .. } | LogRecord::Abort { .. } | LogRecord::Wait { .. } => None,
        }
    }

    /// The index operations this record carries (one for an `Update`, all of
    /// an `UpdateBatch`, none for the others), moved out of it.
    pub fn into_entries(self) -> Vec<LogEntry> {
        match self {
            LogRecord::Update { op, key, value, .. } => vec![LogEntry { op, key, value }],
            LogRecord::UpdateBatch { entries, .. } => entries,
            LogRecord::Commit { .. } | LogRecord::Abort { .. } | LogRecord::Wait { .. } => {
                Vec::new()
            }
        }
    }

    fn payload_len(&self) -> usize {
        2 + match self {
            LogRecord::Update {
                txn,
                dataset,
                partition,
                index,
                key,
                seq,
                value,
                ..
            } => {
                varint_len(*txn)
                    + varint_len(u64::from(*dataset))
                    + varint_len(u64::from(*partition))
                    + varint_len(u64::from(*index))
                    + 1
                    + varint_len(key.len() as u64)
                    + key.len()
                    + varint_len(*seq)
                    + varint_len(value.len() as u64)
                    + value.len()
            }
            LogRecord::UpdateBatch {
                txn,
                dataset,
                partition,
                index,
                seq,
                entries,
            } => {
                varint_len(*txn)
                    + varint_len(u64::from(*dataset))
                    + varint_len(u64::from(*partition))
                    + varint_len(u64::from(*index))
                    + varint_len(*seq)
                    + varint_len(entries.len() as u64)
                    + entries
                        .iter()
                        .map(|e| {
                            1 + varint_len(e.key.len() as u64)
                                + e.key.len()
                                + varint_len(e.value.len() as u64)
                                + e.value.len()
                        })
                        .sum::<usize>()
            }
            LogRecord::Commit { txn } | LogRecord::Abort { txn } | LogRecord::Wait { txn } => {
                varint_len(*txn)
            }
        }
    }

    /// Bytes this record occupies in the log, frame header included: the
    /// distance from its LSN to its `end_lsn`.
    pub fn encoded_len(&self) -> usize {
        FRAME_HEADER_BYTES + self.payload_len()
    }

    fn encode_payload(&self, out: &mut Vec<u8>) {
        out.push(FORMAT_VERSION);
        match self {
            LogRecord::Update {
                txn,
                dataset,
                partition,
                index,
                op,
                key,
                seq,
                value,
            } => {
                out.push(TAG_UPDATE);
                put_varint(out, *txn);
                put_varint(out, u64::from(*dataset));
                put_varint(out, u64::from(*partition));
                put_varint(out, u64::from(*index));
                out.push(*op as u8);
                put_varint(out, key.len() as u64);
                out.extend_from_slice(key);
                put_varint(out, *seq);
                put_varint(out, value.len() as u64);
                out.extend_from_slice(value);
            }
            LogRecord::UpdateBatch {
                txn,
                dataset,
                partition,
                index,
                seq,
                entries,
            } => {
                out.push(TAG_UPDATE_BATCH);
                put_varint(out, *txn);
                put_varint(out, u64::from(*dataset));
                put_varint(out, u64::from(*partition));
                put_varint(out, u64::from(*index));
                put_varint(out, *seq);
                put_varint(out, entries.len() as u64);
                for e in entries {
                    out.push(e.op as u8);
                    put_varint(out, e.key.len() as u64);
                    out.extend_from_slice(&e.key);
                    put_varint(out, e.value.len() as u64);
                    out.extend_from_slice(&e.value);
                }
            }
            LogRecord::Commit { txn } => {
                out.push(TAG_COMMIT);
                put_varint(out, *txn);
            }
            LogRecord::Abort { txn } => {
                out.push(TAG_ABORT);
                put_varint(out, *txn);
            }
            LogRecord::Wait { txn } => {
                out.push(TAG_WAIT);
                put_varint(out, *txn);
            }
        }
    }

    /// Decode a payload (without the frame header).
    fn decode_payload(buf: &[u8]) -> std::result::Result<LogRecord, String> {
        let mut d = Decoder { buf, pos: 0 };
        let version = d.u8()?;
        if version != FORMAT_VERSION {
            return Err(format!(
                "unsupported log record format version {version} (this build reads {FORMAT_VERSION})"
            ));
        }
        let rec = match d.u8()? {
            TAG_UPDATE => {
                let txn = d.varint()?;
                let dataset = d.varint_u32("dataset id")?;
                let partition = d.varint_u32("partition")?;
                let index = d.varint_u32("index id")?;
                let op_byte = d.u8()?;
                let op = LogOp::from_u8(op_byte)
                    .ok_or_else(|| format!("unknown update operation {op_byte}"))?;
                let key = d.bytes()?.to_vec();
                let seq = d.varint()?;
                let value = d.bytes()?.to_vec();
                LogRecord::Update {
                    txn,
                    dataset,
                    partition,
                    index,
                    op,
                    key,
                    seq,
                    value,
                }
            }
            TAG_UPDATE_BATCH => {
                let txn = d.varint()?;
                let dataset = d.varint_u32("dataset id")?;
                let partition = d.varint_u32("partition")?;
                let index = d.varint_u32("index id")?;
                let seq = d.varint()?;
                let count = d.varint()?;
                // Each entry takes at least 3 bytes: a corrupt count cannot
                // make us allocate more than the payload justifies.
                let left = (buf.len() - d.pos) as u64;
                if count > left / 3 {
                    return Err(format!(
                        "update batch claims {count} entries but only {left} bytes follow"
                    ));
                }
                let mut entries = Vec::with_capacity(count as usize);
                for _ in 0..count {
                    let op_byte = d.u8()?;
                    let op = LogOp::from_u8(op_byte)
                        .ok_or_else(|| format!("unknown update operation {op_byte}"))?;
                    let key = d.bytes()?.to_vec();
                    let value = d.bytes()?.to_vec();
                    entries.push(LogEntry { op, key, value });
                }
                LogRecord::UpdateBatch {
                    txn,
                    dataset,
                    partition,
                    index,
                    seq,
                    entries,
                }
            }
            TAG_COMMIT => LogRecord::Commit { txn: d.varint()? },
            TAG_ABORT => LogRecord::Abort { txn: d.varint()? },
            TAG_WAIT => LogRecord::Wait { txn: d.varint()? },
            t => return Err(format!("unknown log record tag {t}")),
        };
        if d.pos != buf.len() {
            return Err(format!(
                "{} trailing bytes after the record",
                buf.len() - d.pos
            ));
        }
        Ok(rec)
    }

    /// The framed record: header and payload.
    fn encode_frame(&self) -> Result<Vec<u8>> {
        let payload_len = self.payload_len();
        if payload_len > MAX_PAYLOAD_BYTES {
            return Err(Error::ValueTooLarge {
                size: payload_len,
                limit: MAX_PAYLOAD_BYTES,
            });
        }
        let mut out = Vec::with_capacity(FRAME_HEADER_BYTES + payload_len);
        out.extend_from_slice(&[0u8; FRAME_HEADER_BYTES]);
        self.encode_payload(&mut out);
        debug_assert_eq!(out.len(), FRAME_HEADER_BYTES + payload_len);
        let crc = crc32c::crc32c(&out[FRAME_HEADER_BYTES..]);
        out[0..4].copy_from_slice(&(payload_len as u32).to_le_bytes());
        out[4..8].copy_from_slice(&crc.to_le_bytes());
        Ok(out)
    }
}

fn le_u32(buf: &[u8], pos: usize) -> Option<u32> {
    let b = buf.get(pos..pos.checked_add(4)?)?;
    Some(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
}

// ---------------------------------------------------------------------------
// Options
// ---------------------------------------------------------------------------

/// When a commit is acknowledged (its durability callback runs), and therefore
/// what a crash can lose. Written and parsed as `sync`, `batched`,
/// `batched(<ms>)` or `none`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Durability {
    /// Acknowledge after the record is fsynced. Loses nothing acknowledged, on
    /// any crash. Group commit amortizes one fsync over every commit that
    /// arrived while the previous fsync ran.
    #[default]
    Sync,
    /// Acknowledge once the record is written to the OS; fsync at most every
    /// `interval_ms` (and within about `interval_ms` of any write). A process
    /// crash loses nothing acknowledged (the OS has it); a power loss or OS
    /// crash loses up to the last `interval_ms` of acknowledged commits. If a
    /// periodic fsync fails, the commits acknowledged since the previous
    /// successful fsync may be lost even without a crash (the kernel may have
    /// dropped the pages); the log then fails as described in the module docs.
    Batched { interval_ms: u64 },
    /// Acknowledge once the record is written to the OS; never fsync the log
    /// (except when a file is finished and at close). A process crash loses
    /// nothing acknowledged; a power loss or OS crash can lose anything not yet
    /// made durable by a component flush.
    None,
}

impl fmt::Display for Durability {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Durability::Sync => f.write_str("sync"),
            Durability::Batched { interval_ms } => write!(f, "batched({interval_ms})"),
            Durability::None => f.write_str("none"),
        }
    }
}

impl FromStr for Durability {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self> {
        let t = s.trim().to_ascii_lowercase();
        let bad = || {
            Error::Config(format!(
                "durability `{s}` is not one of `sync`, `batched`, `batched(<milliseconds>)` (at least 1), `none`"
            ))
        };
        match t.as_str() {
            "sync" => Ok(Durability::Sync),
            "none" => Ok(Durability::None),
            "batched" => Ok(Durability::Batched {
                interval_ms: DEFAULT_BATCH_INTERVAL_MS,
            }),
            _ => {
                let inner = t
                    .strip_prefix("batched(")
                    .and_then(|r| r.strip_suffix(')'))
                    .ok_or_else(bad)?;
                let interval_ms: u64 = inner.trim().parse().map_err(|_| bad())?;
                if interval_ms == 0 {
                    return Err(bad());
                }
                Ok(Durability::Batched { interval_ms })
            }
        }
    }
}

impl Serialize for Durability {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Durability {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

/// Options of [`Wal::open`].
#[derive(Clone, Debug)]
pub struct WalOptions {
    /// Move to a new log file before a record once the current file has
    /// reached this many bytes (at least 1).
    pub file_size_limit: u64,
    pub durability: Durability,
    /// Bound of the in-memory log tail: an append that would grow it past this
    /// waits for the flusher (a single larger record is still accepted into an
    /// empty tail). At least 1.
    pub tail_buffer_limit: usize,
    /// Fault injection for tests; `None` in production.
    pub fault: Option<Arc<FaultInjector>>,
    /// An LSN below which the log is known to be valid and durable (the
    /// checkpoint's low-water mark: a record boundary that was synced before
    /// the checkpoint was written). Open then reads the last file only from
    /// there on to find its end, instead of from its start. 0 (the default)
    /// reads the whole last file. If the record at this LSN does not read
    /// back, open distrusts the hint and reads the whole file.
    pub valid_below_lsn: u64,
}

impl Default for WalOptions {
    fn default() -> Self {
        WalOptions {
            file_size_limit: DEFAULT_FILE_SIZE_LIMIT,
            durability: Durability::Sync,
            tail_buffer_limit: DEFAULT_TAIL_BUFFER_LIMIT,
            fault: None,
            valid_below_lsn: 0,
        }
    }
}

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

#[derive(Default)]
struct Counters {
    records: AtomicU64,
    commits: AtomicU64,
    waits: AtomicU64,
    bytes: AtomicU64,
    batches: AtomicU64,
    max_batch_records: AtomicU64,
    max_batch_bytes: AtomicU64,
    fsyncs: AtomicU64,
    dir_fsyncs: AtomicU64,
    files_created: AtomicU64,
    files_deleted: AtomicU64,
    tail_full_waits: AtomicU64,
    max_tail_bytes: AtomicU64,
    torn_tails_truncated: AtomicU64,
    truncated_tail_bytes: AtomicU64,
}

// ---------------------------------------------------------------------------
// Log files
// ---------------------------------------------------------------------------

fn log_file_name(start_lsn: u64) -> String {
    format!("log-{start_lsn:016x}.wal")
}

fn parse_log_file_name(name: &str) -> Option<u64> {
    let hex = name.strip_prefix("log-")?.strip_suffix(".wal")?;
    if hex.len() != 16 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    u64::from_str_radix(hex, 16).ok()
}

#[derive(Clone, Debug)]
struct LogFileInfo {
    start: u64,
    path: PathBuf,
    len: u64,
}

/// Log files of `dir`, sorted by start LSN. A missing directory has none.
fn list_log_files(dir: &Path) -> Result<Vec<LogFileInfo>> {
    let entries = match fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(Error::io(dir, e)),
    };
    let mut files = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| Error::io(dir, e))?;
        let name = entry.file_name();
        let Some(start) = name.to_str().and_then(parse_log_file_name) else {
            continue;
        };
        let path = entry.path();
        let len = entry.metadata().map_err(|e| Error::io(&path, e))?.len();
        files.push(LogFileInfo { start, path, len });
    }
    files.sort_by_key(|f| f.start);
    for w in files.windows(2) {
        let end = w[0].start.saturating_add(w[0].len);
        if end != w[1].start {
            return Err(Error::corrupt(
                &w[1].path,
                format!(
                    "log file starts at LSN {} but the previous log file {} ends at LSN {end}: log data is missing or overlapping",
                    w[1].start,
                    w[0].path.display()
                ),
            ));
        }
    }
    Ok(files)
}

fn fsync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

/// Outcome of reading at a cursor position.
enum Next {
    Record { lsn: u64, rec: LogRecord, len: u64 },
    End,
    Torn { offset: u64, reason: String },
}

/// Sequential reader of the records of one log file, up to the length the file
/// had when it was listed.
struct FileCursor {
    path: PathBuf,
    reader: BufReader<File>,
    start_lsn: u64,
    pos: u64,
    len: u64,
    is_last: bool,
    payload: Vec<u8>,
}

impl FileCursor {
    fn open(info: &LogFileInfo, offset: u64, is_last: bool) -> Result<FileCursor> {
        let mut f = File::open(&info.path).map_err(|e| Error::io(&info.path, e))?;
        if offset > info.len {
            return Err(Error::corrupt(
                &info.path,
                format!(
                    "offset {offset} is past the end of the file ({} bytes)",
                    info.len
                ),
            ));
        }
        f.seek(SeekFrom::Start(offset))
            .map_err(|e| Error::io(&info.path, e))?;
        Ok(FileCursor {
            path: info.path.clone(),
            reader: BufReader::with_capacity(256 << 10, f),
            start_lsn: info.start,
            pos: offset,
            len: info.len,
            is_last,
            payload: Vec::new(),
        })
    }

    fn next(&mut self) -> Result<Next> {
        if self.pos >= self.len {
            return Ok(Next::End);
        }
        match self.read_frame()? {
            Ok(payload_len) => {
                let rec = LogRecord::decode_payload(&self.payload).map_err(|e| {
                    Error::corrupt(
                        &self.path,
                        format!(
                            "log record at offset {} passes its checksum but cannot be decoded: {e}",
                            self.pos
                        ),
                    )
                })?;
                let lsn = self.start_lsn + self.pos;
                let len = (FRAME_HEADER_BYTES + payload_len) as u64;
                self.pos += len;
                Ok(Next::Record { lsn, rec, len })
            }
            Err(reason) => {
                let offset = self.pos;
                self.pos = self.len;
                self.invalid_at(offset, reason)
            }
        }
    }

    /// Read the frame at `self.pos` into `self.payload`. Outer `Err`: I/O error;
    /// inner `Err`: the bytes there are not a valid frame.
    fn read_frame(&mut self) -> Result<std::result::Result<usize, String>> {
        let remaining = self.len - self.pos;
        if remaining < FRAME_HEADER_BYTES as u64 {
            return Ok(Err(format!(
                "{remaining} bytes left at the end of the file, less than a record header"
            )));
        }
        let mut header = [0u8; FRAME_HEADER_BYTES];
        self.reader
            .read_exact(&mut header)
            .map_err(|e| Error::io(&self.path, e))?;
        let payload_len = u32::from_le_bytes([header[0], header[1], header[2], header[3]]) as usize;
        let crc = u32::from_le_bytes([header[4], header[5], header[6], header[7]]);
        if !(MIN_PAYLOAD_BYTES..=MAX_PAYLOAD_BYTES).contains(&payload_len) {
            return Ok(Err(format!("implausible record length {payload_len}")));
        }
        if (FRAME_HEADER_BYTES + payload_len) as u64 > remaining {
            return Ok(Err(format!(
                "record of {} bytes runs past the end of the file ({remaining} bytes left)",
                FRAME_HEADER_BYTES + payload_len
            )));
        }
        self.payload.resize(payload_len, 0);
        self.reader
            .read_exact(&mut self.payload)
            .map_err(|e| Error::io(&self.path, e))?;
        if crc32c::crc32c(&self.payload) != crc {
            return Ok(Err("checksum mismatch".to_string()));
        }
        Ok(Ok(payload_len))
    }

    /// Classify an invalid record at `offset`: torn tail or corruption.
    fn invalid_at(&self, offset: u64, reason: String) -> Result<Next> {
        if !self.is_last {
            return Err(Error::corrupt(
                &self.path,
                format!(
                    "invalid log record at offset {offset} ({reason}) in a log file that is not the last one: only the last file can end in a torn write, so this is corruption and committed records would be lost; refusing to continue"
                ),
            ));
        }
        if let Some(q) = find_valid_frame(&self.path, offset + 1, self.len)? {
            return Err(Error::corrupt(
                &self.path,
                format!(
                    "invalid log record at offset {offset} ({reason}) is followed by a valid record at offset {q}: the log is corrupt in the middle, not torn at its end; refusing to continue rather than silently drop committed records"
                ),
            ));
        }
        Ok(Next::Torn { offset, reason })
    }
}

/// Offset of the first position in `[from, end)` of `path` where a complete,
/// checksum-valid, decodable record starts.
fn find_valid_frame(path: &Path, from: u64, end: u64) -> Result<Option<u64>> {
    if from >= end {
        return Ok(None);
    }
    let mut f = File::open(path).map_err(|e| Error::io(path, e))?;
    f.seek(SeekFrom::Start(from))
        .map_err(|e| Error::io(path, e))?;
    let mut data = Vec::new();
    f.take(end - from)
        .read_to_end(&mut data)
        .map_err(|e| Error::io(path, e))?;
    let min_frame = FRAME_HEADER_BYTES + MIN_PAYLOAD_BYTES;
    let mut i = 0usize;
    while i + min_frame <= data.len() {
        let ok = (|| {
            let len = le_u32(&data, i)? as usize;
            if !(MIN_PAYLOAD_BYTES..=MAX_PAYLOAD_BYTES).contains(&len) {
                return None;
            }
            let payload = data.get(i + FRAME_HEADER_BYTES..i + FRAME_HEADER_BYTES + len)?;
            if payload[0] != FORMAT_VERSION || le_u32(&data, i + 4)? != crc32c::crc32c(payload) {
                return None;
            }
            LogRecord::decode_payload(payload).ok()
        })();
        if ok.is_some() {
            return Ok(Some(from + i as u64));
        }
        i += 1;
    }
    Ok(None)
}

/// Iterator over the log records from an LSN on, across files: yields
/// `(lsn, record)` and stops at the end of valid data. Created by [`read_from`].
///
/// A torn tail at the end of the last file ends the iteration quietly (see
/// [`LogReader::torn_tail`]); corruption in the middle yields one
/// [`Error::Corrupt`] and ends it.
pub struct LogReader {
    files: Vec<LogFileInfo>,
    idx: usize,
    first_offset: u64,
    cursor: Option<FileCursor>,
    position: u64,
    torn: Option<u64>,
    done: bool,
}

impl LogReader {
    /// LSN just past the last record returned (the start LSN before any): after
    /// the iteration ends without error, the end of the valid log.
    pub fn position(&self) -> u64 {
        self.position
    }

    /// LSN of the invalid tail that ended the iteration, if any.
    pub fn torn_tail(&self) -> Option<u64> {
        self.torn
    }
}

impl Iterator for LogReader {
    type Item = Result<(u64, LogRecord)>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if self.done {
                return None;
            }
            let cursor = match &mut self.cursor {
                Some(c) => c,
                None => {
                    let Some(info) = self.files.get(self.idx) else {
                        self.done = true;
                        return None;
                    };
                    let is_last = self.idx + 1 == self.files.len();
                    let offset = std::mem::take(&mut self.first_offset);
                    match FileCursor::open(info, offset, is_last) {
                        Ok(c) => self.cursor.insert(c),
                        Err(e) => {
                            self.done = true;
                            return Some(Err(e));
                        }
                    }
                }
            };
            match cursor.next() {
                Ok(Next::Record { lsn, rec, len }) => {
                    self.position = lsn + len;
                    return Some(Ok((lsn, rec)));
                }
                Ok(Next::End) => {
                    self.cursor = None;
                    self.idx += 1;
                }
                Ok(Next::Torn { offset, .. }) => {
                    self.torn = Some(cursor.start_lsn + offset);
                    self.done = true;
                    return None;
                }
                Err(e) => {
                    self.done = true;
                    return Some(Err(e));
                }
            }
        }
    }
}

/// Read the log in `dir` from `from_lsn` (a record boundary, normally the
/// checkpoint's low-water mark) to the end of valid data, for recovery.
///
/// Errors if log needed from `from_lsn` has been deleted or `from_lsn` lies
/// past the end of the log. Does not modify anything: a torn tail just ends the
/// iteration (the next [`Wal::open`] truncates it).
pub fn read_from(dir: &Path, from_lsn: u64) -> Result<LogReader> {
    let files = list_log_files(dir)?;
    let empty = |files: Vec<LogFileInfo>, idx: usize| LogReader {
        files,
        idx,
        first_offset: 0,
        cursor: None,
        position: from_lsn,
        torn: None,
        done: false,
    };
    if files.is_empty() {
        if from_lsn == 0 {
            return Ok(empty(files, 0));
        }
        return Err(Error::corrupt(
            dir,
            format!("there are no log files, but log from LSN {from_lsn} on is needed"),
        ));
    }
    let Some(idx) = files.iter().rposition(|f| f.start <= from_lsn) else {
        return Err(Error::corrupt(
            &files[0].path,
            format!(
                "log from LSN {from_lsn} on is needed but the oldest log file starts at LSN {}",
                files[0].start
            ),
        ));
    };
    let info = &files[idx];
    let end = info.start + info.len;
    if from_lsn > end {
        return Err(Error::corrupt(
            &info.path,
            format!("LSN {from_lsn} is past the end of the log (LSN {end})"),
        ));
    }
    let first_offset = from_lsn - info.start;
    let mut r = empty(files, idx);
    r.first_offset = first_offset;
    Ok(r)
}

/// Read the last log file from `offset` (a record boundary) to the end of
/// its valid records: (valid length, bytes read, why it stopped early if it
/// hit a torn tail).
fn valid_end(last: &LogFileInfo, offset: u64) -> Result<(u64, u64, Option<String>)> {
    let mut cursor = FileCursor::open(last, offset, true)?;
    loop {
        match cursor.next()? {
            Next::Record { .. } => {}
            Next::End => return Ok((last.len, last.len - offset, None)),
            Next::Torn { offset: at, reason } => {
                return Ok((at, at - offset, Some(reason)));
            }
        }
    }
}

// ---------------------------------------------------------------------------
// The log
// ---------------------------------------------------------------------------

/// Called once with `Ok(())` when a record is durable, or with an error if it
/// never will be (the log failed or was closed before it got written).
pub type DurableCallback = Box<dyn FnOnce(Result<()>) + Send>;

struct Pending {
    end_lsn: u64,
    cb: DurableCallback,
}

/// State shared by appenders, waiters and the flusher, under one mutex.
struct Tail {
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

struct Shared {
    dir: PathBuf,
    durability: Durability,
    file_size_limit: u64,
    tail_limit: usize,
    fault: Option<Arc<FaultInjector>>,
    tail: Mutex<Tail>,
    /// The flusher waits here for records (or close).
    work: Condvar,
    /// Appenders wait here for tail-buffer space.
    space: Condvar,
    /// `wait_durable` callers wait here.
    durable: Condvar,
    durable_lsn: AtomicU64,
    synced_lsn: AtomicU64,
    end_lsn: AtomicU64,
    /// Serializes log-file deletion.
    files_lock: Mutex<()>,
    stats: Counters,
}

fn failed_error(reason: &str) -> Error {
    Error::Closed(format!(
        "the write-ahead log failed and accepts no more records ({reason}); a failed write or fsync is never retried because the durability of the data is then unknown; reopen the database to recover from the log on disk"
    ))
}

fn closed_error() -> Error {
    Error::Closed("the write-ahead log is closed".to_string())
}

fn run_callback(cb: DurableCallback, result: Result<()>) {
    if catch_unwind(AssertUnwindSafe(|| cb(result))).is_err() {
        tracing::error!("a write-ahead-log durability callback panicked");
    }
}

impl Shared {
    /// Make the log permanently failed and fail every pending callback.
    fn fail(&self, reason: String) {
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
            Some(f) => f.on_fsync(),
            None => Ok(()),
        };
        r.and_then(|()| fsync_dir(&self.dir))
            .map_err(|e| format!("fsync of directory {} failed: {e}", self.dir.display()))?;
        self.stats.dir_fsyncs.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }
}

/// The log file being appended to.
struct LogFile {
    file: File,
    path: PathBuf,
    start_lsn: u64,
    /// Logical length: records end here.
    len: u64,
    /// Bytes of the file already written (records, then zeros): appends
    /// inside this region overwrite in place, so an fsync need not journal a
    /// new file size (on ext4 that halves the cost of a commit's fsync).
    allocated: u64,
}

impl LogFile {
    fn create(dir: &Path, start_lsn: u64) -> io::Result<LogFile> {
        let path = dir.join(log_file_name(start_lsn));
        let file = OpenOptions::new()
            .create_new(true)
            .write(true)
            .open(&path)?;
        Ok(LogFile {
            file,
            path,
            start_lsn,
            len: 0,
            allocated: 0,
        })
    }

    fn end_lsn(&self) -> u64 {
        self.start_lsn + self.len
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
struct Flusher {
    shared: Arc<Shared>,
    current: LogFile,
    /// The batch being written; swapped with the (empty) tail buffer.
    batch: Vec<u8>,
    last_sync: Instant,
    unsynced: bool,
}

impl Flusher {
    fn run(mut self) {
        loop {
            let step = match self.next_action() {
                Action::Write { end_lsn, records } => self.write_batch(end_lsn, records),
                Action::Sync => self.sync(),
                Action::Exit => {
                    // Close: drop the preallocated zeros, make everything
                    // durable in every mode.
                    if self.current.allocated > self.current.len {
                        if let Err(e) = self.current.file.set_len(self.current.len) {
                            self.shared.fail(format!(
                                "truncating {} failed: {e}",
                                self.current.path.display()
                            ));
                            return;
                        }
                        self.current.allocated = self.current.len;
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
            let threshold = if matches!(shared.durability, Durability::Sync) {
                EAGER_WRITE_BYTES
            } else {
                LAZY_WRITE_BYTES
            }
            .min(shared.tail_limit / 2);
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
        if cur.len + chunk.len() as u64 > cur.allocated {
            // Extend the file with zeros ahead of the records (one size change
            // per PREALLOC_BYTES instead of one per fsync).
            let grow = PREALLOC_BYTES.max(chunk.len() as u64);
            let zeros = vec![0u8; grow as usize];
            cur.file
                .write_all_at(&zeros, cur.allocated)
                .map_err(|e| format!("write to {} failed: {e}", cur.path.display()))?;
            cur.allocated += grow;
        }
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
            .file
            .set_len(self.current.len)
            .map_err(|e| format!("truncating {} failed: {e}", self.current.path.display()))?;
        self.current.allocated = self.current.len;
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

/// The write-ahead log of a database. See the module documentation for the
/// design (group commit, durability modes, failure handling, torn tails).
///
/// `Wal` is `Send + Sync`: share it with an `Arc`. Durability callbacks run on
/// the flusher thread, in LSN order: they must be short and must not append,
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
                fsync_dir(dir).map_err(|e| Error::io(dir, e))?;
                stats.files_created.fetch_add(1, Ordering::Relaxed);
                stats.dir_fsyncs.fetch_add(1, Ordering::Relaxed);
                f
            }
            Some(last) => {
                let hint = opts
                    .valid_below_lsn
                    .checked_sub(last.start)
                    .filter(|&o| o <= last.len)
                    .unwrap_or(0);
                let (valid_len, scanned, torn) = match valid_end(last, hint) {
                    Ok(found) if hint == 0 || hint == last.len || found.0 > hint => found,
                    Err(e) if hint == 0 => return Err(e),
                    _ => {
                        // Nothing valid reads back at the mark (or what follows
                        // it looks corrupt): distrust the mark and check the
                        // whole file, which decides between torn and corrupt.
                        tracing::warn!(
                            "write-ahead log {}: no valid record at offset {hint} (the checkpoint's low-water mark); checking the whole file",
                            last.path.display()
                        );
                        let (len, scanned, torn) = valid_end(last, 0)?;
                        (len, scanned + (last.len - hint), torn)
                    }
                };
                scanned_bytes = scanned;
                if let Some(reason) = torn {
                    tracing::warn!(
                        "write-ahead log {}: torn tail at offset {valid_len} ({reason}); truncating {} bytes of records that were never acknowledged",
                        last.path.display(),
                        last.len - valid_len
                    );
                }
                let file = OpenOptions::new()
                    .read(true)
                    .write(true)
                    .open(&last.path)
                    .map_err(|e| Error::io(&last.path, e))?;
                if valid_len < last.len {
                    // Bytes after the last valid record: a torn write, then
                    // preallocated zeros (or only zeros). Count the torn part up
                    // to the last non-zero byte.
                    let mut rest = vec![0u8; (last.len - valid_len) as usize];
                    let torn_len = match std::os::unix::fs::FileExt::read_exact_at(
                        &file, &mut rest, valid_len,
                    ) {
                        Ok(()) => rest
                            .iter()
                            .rposition(|&b| b != 0)
                            .map_or(0, |p| p as u64 + 1),
                        Err(_) => last.len - valid_len,
                    };
                    file.set_len(valid_len)
                        .map_err(|e| Error::io(&last.path, e))?;
                    if torn_len > 0 {
                        truncated_bytes = torn_len;
                        stats.torn_tails_truncated.fetch_add(1, Ordering::Relaxed);
                        stats
                            .truncated_tail_bytes
                            .store(truncated_bytes, Ordering::Relaxed);
                    }
                }
                // Whatever a previous process left in the page cache becomes
                // durable before anyone builds on it.
                file.sync_data().map_err(|e| Error::io(&last.path, e))?;
                stats.fsyncs.fetch_add(1, Ordering::Relaxed);
                LogFile {
                    file,
                    path: last.path.clone(),
                    start_lsn: last.start,
                    len: valid_len,
                    allocated: valid_len,
                }
            }
        };
        let end_lsn = current.end_lsn();
        let shared = Arc::new(Shared {
            dir: dir.to_path_buf(),
            durability: opts.durability,
            file_size_limit: opts.file_size_limit,
            tail_limit: opts.tail_buffer_limit,
            fault: opts.fault,
            tail: Mutex::new(Tail {
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
            }),
            work: Condvar::new(),
            space: Condvar::new(),
            durable: Condvar::new(),
            durable_lsn: AtomicU64::new(end_lsn),
            synced_lsn: AtomicU64::new(end_lsn),
            end_lsn: AtomicU64::new(end_lsn),
            files_lock: Mutex::new(()),
            stats,
        });
        let flusher = Flusher {
            shared: shared.clone(),
            current,
            batch: Vec::new(),
            last_sync: Instant::now(),
            unsynced: false,
        };
        let thread_shared = shared.clone();
        let handle = std::thread::Builder::new()
            .name("silt-wal-flusher".into())
            .spawn(move || {
                if catch_unwind(AssertUnwindSafe(|| flusher.run())).is_err() {
                    thread_shared.fail("the log flusher thread panicked".into());
                }
            })
            .map_err(|e| Error::io(dir, e))?;
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

    fn append_frame(
        &self,
        frame: Vec<u8>,
        cb: Option<DurableCallback>,
    ) -> std::result::Result<u64, (Error, Option<DurableCallback>)> {
        let shared = &*self.shared;
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
        tail.buf.extend_from_slice(&frame);
        tail.buf_records += 1;
        tail.next_lsn += frame.len() as u64;
        shared.end_lsn.store(tail.next_lsn, Ordering::Release);
        let tail_len = tail.buf.len() as u64;
        if was_empty {
            tail.first_buffered = Some(Instant::now());
        }
        let threshold = if matches!(shared.durability, Durability::Sync) {
            EAGER_WRITE_BYTES
        } else {
            LAZY_WRITE_BYTES
        }
        .min(shared.tail_limit / 2);
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

    /// Append `rec` to the log tail and return its LSN. The record is durable
    /// once [`durable_lsn`](Self::durable_lsn) reaches `lsn + rec.encoded_len()`.
    /// Waits if the tail buffer is full. Errors: [`Error::Closed`] after
    /// [`close`](Self::close) or a failure, [`Error::ValueTooLarge`] for a
    /// record over [`MAX_PAYLOAD_BYTES`].
    pub fn append(&self, rec: &LogRecord) -> Result<u64> {
        let frame = rec.encode_frame()?;
        self.append_frame(frame, None).map_err(|(e, _)| e)
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
        let frame = match rec.encode_frame() {
            Ok(f) => f,
            Err(e) => {
                run_callback(
                    on_durable,
                    Err(Error::Closed(format!("record not logged: {e}"))),
                );
                return Err(e);
            }
        };
        match self.append_frame(frame, Some(on_durable)) {
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
                    run_callback(cb, Err(self.status_error()));
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

    fn status_error(&self) -> Error {
        match &self.shared.tail.lock().failed {
            Some(reason) => failed_error(reason),
            None => closed_error(),
        }
    }

    /// Block until every record below `lsn` is durable and the durability
    /// callbacks of those records have run. Errors if the log failed before
    /// that, or if `lsn` is past [`end_lsn`](Self::end_lsn).
    pub fn wait_durable(&self, lsn: u64) -> Result<()> {
        let shared = &*self.shared;
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

    /// Write and **fsync** everything appended so far, whatever the durability
    /// mode, and return the LSN it covers. For the "log before data" rule in
    /// `Batched` and `None` modes: call it before installing a flushed
    /// component or writing a checkpoint that refers to LSNs up to
    /// [`end_lsn`](Self::end_lsn), so that a crash can never leave components
    /// or a checkpoint ahead of the log (after which LSNs would be reused).
    /// In `Sync` mode every written batch is already fsynced, so this only waits
    /// for the records appended so far to be written.
    pub fn sync(&self) -> Result<u64> {
        let shared = &*self.shared;
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
        self.shared.tail.lock().failed.clone()
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
            fsync_dir(&self.shared.dir).map_err(|e| Error::io(&self.shared.dir, e))?;
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
        {
            let mut tail = self.shared.tail.lock();
            tail.closing = true;
            self.shared.work.notify_all();
            self.shared.space.notify_all();
        }
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

// ---------------------------------------------------------------------------
// Checkpoint file
// ---------------------------------------------------------------------------

/// Contents of the checkpoint file (000 §3.3.3).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Checkpoint {
    /// Recovery reads the log from here: every record below it is reflected in
    /// durable (flushed) components. Log files wholly below it may be deleted.
    pub low_water_lsn: u64,
    /// End of the log when the checkpoint was taken (informational).
    pub end_lsn: u64,
    /// Smallest transaction id not yet used, so that ids stay unique across
    /// restarts even after the log that mentions them is deleted.
    pub next_txn_id: u64,
}

/// Write `dir/CHECKPOINT` atomically (temporary file, fsync, rename, directory
/// fsync). The file is `silt-checkpoint v1 crc32c=<8 hex>\n` followed by the
/// JSON of `cp`; the checksum covers the JSON bytes.
pub fn write_checkpoint(dir: &Path, cp: &Checkpoint) -> Result<()> {
    let json = serde_json::to_vec(cp)
        .map_err(|e| Error::Config(format!("cannot serialize checkpoint: {e}")))?;
    let mut bytes =
        format!("{CHECKPOINT_MAGIC} crc32c={:08x}\n", crc32c::crc32c(&json)).into_bytes();
    bytes.extend_from_slice(&json);
    create_dir_all(dir)?;
    write_atomic(&dir.join(CHECKPOINT_FILE), &bytes)
}

/// Read `dir/CHECKPOINT`: `None` if there is none, [`Error::Corrupt`] if it
/// fails its checksum or does not parse.
pub fn read_checkpoint(dir: &Path) -> Result<Option<Checkpoint>> {
    let path = dir.join(CHECKPOINT_FILE);
    let bytes = match fs::read(&path) {
        Ok(b) => b,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(Error::io(&path, e)),
    };
    let nl = bytes
        .iter()
        .position(|&b| b == b'\n')
        .ok_or_else(|| Error::corrupt(&path, "checkpoint header line is missing"))?;
    let header = std::str::from_utf8(&bytes[..nl])
        .map_err(|_| Error::corrupt(&path, "checkpoint header is not text"))?;
    let crc_hex = header
        .strip_prefix(CHECKPOINT_MAGIC)
        .and_then(|r| r.strip_prefix(" crc32c="))
        .ok_or_else(|| {
            Error::corrupt(
                &path,
                format!("not a checkpoint file of this version (header `{header}`)"),
            )
        })?;
    let crc = u32::from_str_radix(crc_hex, 16)
        .map_err(|_| Error::corrupt(&path, format!("bad checksum field `{crc_hex}`")))?;
    let json = &bytes[nl + 1..];
    if crc32c::crc32c(json) != crc {
        return Err(Error::corrupt(&path, "checkpoint checksum mismatch"));
    }
    serde_json::from_slice(json)
        .map(Some)
        .map_err(|e| Error::corrupt(&path, format!("checkpoint does not parse: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::sync::atomic::AtomicU32;

    fn update(txn: u64, i: usize) -> LogRecord {
        LogRecord::Update {
            txn,
            dataset: (i % 3) as u32,
            partition: (i % 5) as u32,
            index: (i % 2) as u32,
            op: if i.is_multiple_of(7) {
                LogOp::Delete
            } else {
                LogOp::Put
            },
            key: format!("key-{i:06}").into_bytes(),
            seq: 1000 + i as u64,
            value: vec![(i % 251) as u8; (i * 37) % 300],
        }
    }

    /// A mixed stream: updates, commits, an abort and a wait now and then.
    fn record(i: usize) -> LogRecord {
        let txn = (i / 3) as u64 + 1;
        match i % 3 {
            0 | 1 => update(txn, i),
            _ if i % 30 == 29 => LogRecord::Abort { txn },
            _ if i % 15 == 14 => LogRecord::Wait { txn },
            _ => LogRecord::Commit { txn },
        }
    }

    fn opts() -> WalOptions {
        WalOptions::default()
    }

    fn open(dir: &Path, o: WalOptions) -> Wal {
        Wal::open(dir, o).unwrap().0
    }

    fn read_all(dir: &Path, from: u64) -> Vec<(u64, LogRecord)> {
        read_from(dir, from)
            .unwrap()
            .collect::<Result<Vec<_>>>()
            .unwrap()
    }

    fn log_files(dir: &Path) -> Vec<(u64, PathBuf, u64)> {
        list_log_files(dir)
            .unwrap()
            .into_iter()
            .map(|f| (f.start, f.path, f.len))
            .collect()
    }

    /// Append records and return them with their LSNs (all durable on return).
    fn write_records(wal: &Wal, n: usize) -> Vec<(u64, LogRecord)> {
        let out: Vec<(u64, LogRecord)> = (0..n)
            .map(|i| {
                let r = record(i);
                (wal.append(&r).unwrap(), r)
            })
            .collect();
        wal.flush().unwrap();
        out
    }

    fn assert_corrupt(e: &Error, file: &str, needle: &str) {
        assert!(matches!(e, Error::Corrupt { .. }), "not Corrupt: {e}");
        let s = e.to_string();
        assert!(s.contains(file), "{s} does not name {file}");
        assert!(s.contains(needle), "{s} does not mention `{needle}`");
    }

    fn arb_record() -> impl Strategy<Value = LogRecord> {
        prop_oneof![
            (
                any::<u64>(),
                any::<u32>(),
                any::<u32>(),
                any::<u32>(),
                any::<bool>(),
                proptest::collection::vec(any::<u8>(), 0..64),
                any::<u64>(),
                proptest::collection::vec(any::<u8>(), 0..300),
            )
                .prop_map(|(txn, dataset, partition, index, del, key, seq, value)| {
                    LogRecord::Update {
                        txn,
                        dataset,
                        partition,
                        index,
                        op: if del { LogOp::Delete } else { LogOp::Put },
                        key,
                        seq,
                        value,
                    }
                }),
            (
                any::<u64>(),
                any::<u32>(),
                any::<u32>(),
                any::<u64>(),
                proptest::collection::vec(
                    (
                        any::<bool>(),
                        proptest::collection::vec(any::<u8>(), 0..40),
                        proptest::collection::vec(any::<u8>(), 0..40),
                    ),
                    0..20,
                ),
            )
                .prop_map(|(txn, dataset, index, seq, es)| LogRecord::UpdateBatch {
                    txn,
                    dataset,
                    partition: dataset % 7,
                    index,
                    seq,
                    entries: es
                        .into_iter()
                        .map(|(del, key, value)| LogEntry {
                            op: if del { LogOp::Delete } else { LogOp::Put },
                            key,
                            value,
                        })
                        .collect(),
                }),
            any::<u64>().prop_map(|txn| LogRecord::Commit { txn }),
            any::<u64>().prop_map(|txn| LogRecord::Abort { txn }),
            any::<u64>().prop_map(|txn| LogRecord::Wait { txn }),
        ]
    }

    proptest! {
        #[test]
        fn record_encoding_round_trips(rec in arb_record()) {
            let frame = rec.encode_frame().unwrap();
            prop_assert_eq!(frame.len(), rec.encoded_len());
            let len = le_u32(&frame, 0).unwrap() as usize;
            prop_assert_eq!(len + FRAME_HEADER_BYTES, frame.len());
            prop_assert_eq!(le_u32(&frame, 4).unwrap(), crc32c::crc32c(&frame[8..]));
            prop_assert_eq!(LogRecord::decode_payload(&frame[8..]).unwrap(), rec);
        }

        #[test]
        fn decoding_garbage_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
            let _ = LogRecord::decode_payload(&bytes);
        }
    }

    #[test]
    fn decode_rejects_bad_payloads() {
        let mut p = Vec::new();
        LogRecord::Commit { txn: 5 }.encode_payload(&mut p);
        assert!(LogRecord::decode_payload(&p).is_ok());
        let mut v = p.clone();
        v[0] = 2;
        assert!(
            LogRecord::decode_payload(&v)
                .unwrap_err()
                .contains("version")
        );
        let mut v = p.clone();
        v[1] = 9;
        assert!(LogRecord::decode_payload(&v).unwrap_err().contains("tag"));
        let mut v = p.clone();
        v.push(0);
        assert!(
            LogRecord::decode_payload(&v)
                .unwrap_err()
                .contains("trailing")
        );
        // An update batch whose entry count promises more than the payload holds.
        let mut v = Vec::new();
        LogRecord::UpdateBatch {
            txn: 1,
            dataset: 2,
            partition: 0,
            index: 3,
            seq: 4,
            entries: vec![LogEntry {
                op: LogOp::Put,
                key: b"k".to_vec(),
                value: Vec::new(),
            }],
        }
        .encode_payload(&mut v);
        assert!(LogRecord::decode_payload(&v).is_ok());
        // Payload: version, tag, txn, dataset, partition, index, seq, count.
        assert_eq!(v[7], 1);
        v[7] = 0x7f;
        assert!(
            LogRecord::decode_payload(&v)
                .unwrap_err()
                .contains("entries")
        );
        v[7] = 1;
        v.pop();
        assert!(
            LogRecord::decode_payload(&v)
                .unwrap_err()
                .contains("truncated")
        );
        let huge = LogRecord::Update {
            txn: 1,
            dataset: 0,
            partition: 0,
            index: 0,
            op: LogOp::Put,
            key: vec![],
            seq: 0,
            value: vec![0; MAX_PAYLOAD_BYTES],
        };
        assert!(matches!(
            huge.encode_frame(),
            Err(Error::ValueTooLarge { .. })
        ));
    }

    #[test]
    fn durability_text_and_serde() {
        for (s, d) in [
            ("sync", Durability::Sync),
            ("none", Durability::None),
            ("batched(5)", Durability::Batched { interval_ms: 5 }),
        ] {
            assert_eq!(s.parse::<Durability>().unwrap(), d);
            assert_eq!(d.to_string(), s);
            let json = serde_json::to_string(&d).unwrap();
            assert_eq!(json, format!("\"{s}\""));
            assert_eq!(serde_json::from_str::<Durability>(&json).unwrap(), d);
        }
        assert_eq!(
            " Batched ".parse::<Durability>().unwrap(),
            Durability::Batched {
                interval_ms: DEFAULT_BATCH_INTERVAL_MS
            }
        );
        assert_eq!(
            "batched( 20 )".parse::<Durability>().unwrap(),
            Durability::Batched { interval_ms: 20 }
        );
        for bad in [
            "",
            "fast",
            "batched()",
            "batched(0)",
            "batched(x)",
            "batched(5",
        ] {
            assert!(
                matches!(bad.parse::<Durability>(), Err(Error::Config(_))),
                "{bad}"
            );
        }
        assert!(serde_json::from_str::<Durability>("\"sometimes\"").is_err());
        assert_eq!(Durability::default(), Durability::Sync);
    }

    #[test]
    fn round_trip_across_file_rolls() {
        let dir = tempfile::tempdir().unwrap();
        let o = WalOptions {
            file_size_limit: 4096,
            ..opts()
        };
        let (wal, summary) = Wal::open(dir.path(), o.clone()).unwrap();
        assert_eq!(
            summary,
            OpenSummary {
                end_lsn: 0,
                truncated_bytes: 0,
                files: 1,
                scanned_bytes: 0
            }
        );
        let recs = write_records(&wal, 1000);
        // LSNs are byte positions: contiguous and monotonic.
        assert_eq!(recs[0].0, 0);
        for w in recs.windows(2) {
            assert_eq!(w[1].0, w[0].0 + w[0].1.encoded_len() as u64);
        }
        let end = recs
            .last()
            .map(|(l, r)| l + r.encoded_len() as u64)
            .unwrap();
        assert_eq!(wal.end_lsn(), end);
        assert_eq!(wal.durable_lsn(), end);
        assert_eq!(wal.synced_lsn(), end);
        let st = wal.stats();
        assert_eq!(st.records, 1000);
        assert_eq!(st.bytes, end);
        wal.close().unwrap();

        // Each file is named by the LSN of its first record, rolled at the limit.
        let files = log_files(dir.path());
        assert!(files.len() > 10, "{} files", files.len());
        let lsns: std::collections::HashSet<u64> = recs.iter().map(|r| r.0).collect();
        let max_rec = recs.iter().map(|r| r.1.encoded_len() as u64).max().unwrap();
        for (i, (start, _, len)) in files.iter().enumerate() {
            assert!(lsns.contains(start));
            if i + 1 < files.len() {
                assert!(*len >= 4096 && *len < 4096 + max_rec, "file {i}: {len}");
                assert_eq!(start + len, files[i + 1].0);
            }
        }
        assert_eq!(st.files_created as usize, files.len());

        assert_eq!(read_all(dir.path(), 0), recs);
        assert_eq!(read_all(dir.path(), recs[500].0), recs[500..].to_vec());
        assert_eq!(read_all(dir.path(), end), vec![]);
        // Start exactly at a file boundary.
        assert_eq!(
            read_all(dir.path(), files[3].0).len(),
            recs.iter().filter(|r| r.0 >= files[3].0).count()
        );
        let mut reader = read_from(dir.path(), 0).unwrap();
        assert_eq!(reader.by_ref().count(), 1000);
        assert_eq!((reader.position(), reader.torn_tail()), (end, None));

        // Reopen: appending continues at the end.
        let (wal, summary) = Wal::open(dir.path(), o).unwrap();
        assert_eq!((summary.end_lsn, summary.truncated_bytes), (end, 0));
        assert_eq!(summary.files, files.len());
        let lsn = wal.append(&LogRecord::Commit { txn: 99 }).unwrap();
        assert_eq!(lsn, end);
        wal.close().unwrap();
        let all = read_all(dir.path(), 0);
        assert_eq!(all.len(), 1001);
        assert_eq!(all[1000], (end, LogRecord::Commit { txn: 99 }));
    }

    /// Many threads commit concurrently; each waits for its commit callback
    /// before the next commit, as a real committer does. One fsync must cover
    /// many commits, every callback fires exactly once, and only after the
    /// durable LSN covers its record.
    #[test]
    fn group_commit_batches_concurrent_commits() {
        const THREADS: usize = 16;
        const COMMITS: usize = 40;
        let dir = tempfile::tempdir().unwrap();
        let wal = Arc::new(open(dir.path(), opts()));
        let fired: Arc<Vec<AtomicU32>> =
            Arc::new((0..THREADS * COMMITS).map(|_| AtomicU32::new(0)).collect());
        let fsyncs_before = wal.stats().fsyncs;
        let handles: Vec<_> = (0..THREADS)
            .map(|t| {
                let (wal, fired) = (wal.clone(), fired.clone());
                std::thread::spawn(move || {
                    for c in 0..COMMITS {
                        let id = t * COMMITS + c;
                        let txn = id as u64 + 1;
                        wal.append(&update(txn, id)).unwrap();
                        let (tx, rx) = crossbeam_channel::bounded(1);
                        let (w, f) = (wal.clone(), fired.clone());
                        let lsn = wal
                            .append_commit(
                                txn,
                                Box::new(move |r| {
                                    f[id].fetch_add(1, Ordering::SeqCst);
                                    tx.send((r.is_ok(), w.durable_lsn())).unwrap();
                                }),
                            )
                            .unwrap();
                        let (ok, durable_at_callback) = rx.recv().unwrap();
                        assert!(ok);
                        let end = lsn + LogRecord::Commit { txn }.encoded_len() as u64;
                        assert!(
                            durable_at_callback >= end,
                            "callback for [{lsn}, {end}) ran at durable LSN {durable_at_callback}"
                        );
                    }
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
        let st = wal.stats();
        let commits = (THREADS * COMMITS) as u64;
        let fsyncs = st.fsyncs - fsyncs_before;
        eprintln!(
            "group commit: {commits} commits, {fsyncs} fsyncs ({:.3} fsyncs/commit), {} batches, max batch {} records",
            fsyncs as f64 / commits as f64,
            st.batches,
            st.max_batch_records
        );
        assert_eq!(st.commits, commits);
        assert!(fired.iter().all(|f| f.load(Ordering::SeqCst) == 1));
        assert!(
            fsyncs * 3 < commits,
            "group commit did not batch: {fsyncs} fsyncs for {commits} commits"
        );
        assert!(st.max_batch_records > 1);
        drop(wal);
        assert_eq!(read_all(dir.path(), 0).len() as u64, 2 * commits);
    }

    #[test]
    fn callbacks_run_in_lsn_order() {
        let dir = tempfile::tempdir().unwrap();
        let wal = open(dir.path(), opts());
        let order = Arc::new(Mutex::new(Vec::new()));
        let mut lsns = Vec::new();
        for i in 0..500u64 {
            let o = order.clone();
            let cb: DurableCallback = Box::new(move |r| {
                r.unwrap();
                o.lock().push(i);
            });
            lsns.push(if i % 2 == 0 {
                wal.append_commit(i, cb).unwrap()
            } else {
                wal.append_wait(i, cb).unwrap()
            });
        }
        wal.flush().unwrap();
        assert!(lsns.windows(2).all(|w| w[0] < w[1]));
        assert_eq!(*order.lock(), (0..500).collect::<Vec<_>>());
        let st = wal.stats();
        assert_eq!((st.commits, st.waits), (250, 250));
    }

    /// A log whose last record is small, plus the records and the file bytes.
    fn torn_fixture() -> (Vec<(u64, LogRecord)>, Vec<u8>, String) {
        let dir = tempfile::tempdir().unwrap();
        let wal = open(dir.path(), opts());
        let mut recs = write_records(&wal, 30);
        let last = LogRecord::Update {
            txn: 77,
            dataset: 1,
            partition: 2,
            index: 3,
            op: LogOp::Put,
            key: b"last-key".to_vec(),
            seq: 77,
            value: b"last-value".to_vec(),
        };
        recs.push((wal.append(&last).unwrap(), last));
        wal.close().unwrap();
        let files = log_files(dir.path());
        assert_eq!(files.len(), 1);
        let bytes = fs::read(&files[0].1).unwrap();
        (recs, bytes, log_file_name(0))
    }

    fn open_with_file(name: &str, bytes: &[u8]) -> (tempfile::TempDir, Result<(Wal, OpenSummary)>) {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join(name), bytes).unwrap();
        let r = Wal::open(dir.path(), opts());
        (dir, r)
    }

    #[test]
    fn torn_tail_is_truncated_at_every_offset() {
        let (recs, bytes, name) = torn_fixture();
        let last_lsn = recs.last().unwrap().0;
        let total = bytes.len() as u64;
        for cut in last_lsn..total {
            let dir = tempfile::tempdir().unwrap();
            fs::write(dir.path().join(&name), &bytes[..cut as usize]).unwrap();
            // A reader (before open repairs anything) stops quietly at the torn tail.
            let mut reader = read_from(dir.path(), 0).unwrap();
            let before: Vec<_> = reader.by_ref().collect::<Result<_>>().unwrap();
            assert_eq!(before, recs[..recs.len() - 1].to_vec());
            assert_eq!(
                reader.torn_tail(),
                (cut > last_lsn).then_some(last_lsn),
                "cut at {cut}"
            );
            assert_eq!(reader.position(), last_lsn);

            let (wal, summary) = Wal::open(dir.path(), opts()).unwrap();
            assert_eq!(summary.end_lsn, last_lsn, "cut at {cut}");
            // Trailing zero bytes cannot be told from preallocated space, so
            // the torn length counts up to the last non-zero byte.
            let torn = bytes[last_lsn as usize..cut as usize]
                .iter()
                .rposition(|&b| b != 0)
                .map_or(0, |p| p as u64 + 1);
            assert_eq!(summary.truncated_bytes, torn);
            let st = wal.stats();
            assert_eq!(st.torn_tails_truncated, u64::from(torn > 0));
            assert_eq!(st.truncated_tail_bytes, torn);
            // New records go where the torn one was.
            assert_eq!(wal.append(&LogRecord::Commit { txn: 5 }).unwrap(), last_lsn);
            wal.close().unwrap();
            let all = read_all(dir.path(), 0);
            assert_eq!(all.len(), recs.len());
            assert_eq!(all[..recs.len() - 1], recs[..recs.len() - 1]);
        }
        // Untouched file: nothing truncated.
        let (_dir, r) = open_with_file(&name, &bytes);
        assert_eq!(r.unwrap().1.truncated_bytes, 0);
    }

    #[test]
    fn open_reads_the_last_file_only_from_the_low_water_mark() {
        let (recs, bytes, name) = torn_fixture();
        let total = bytes.len() as u64;
        let last_lsn = recs.last().unwrap().0;
        let open_hint = |b: &[u8], hint: u64| {
            let dir = tempfile::tempdir().unwrap();
            fs::write(dir.path().join(&name), b).unwrap();
            let o = WalOptions {
                valid_below_lsn: hint,
                ..opts()
            };
            let r = Wal::open(dir.path(), o).map(|(w, s)| {
                w.close().unwrap();
                s
            });
            (dir, r)
        };
        // Every record boundary as the mark: same end, and only the bytes
        // from the mark on are read.
        for &(lsn, _) in &recs {
            let (_d, r) = open_hint(&bytes, lsn);
            let s = r.unwrap();
            assert_eq!((s.end_lsn, s.truncated_bytes), (total, 0));
            assert_eq!(s.scanned_bytes, total - lsn, "mark {lsn}");
        }
        // A clean close leaves the mark at the end: nothing to read.
        let (_d, r) = open_hint(&bytes, total);
        assert_eq!(r.unwrap().scanned_bytes, 0);
        // Without a mark the whole file is read.
        let (_d, r) = open_hint(&bytes, 0);
        assert_eq!(r.unwrap().scanned_bytes, total);
        // A torn tail after the mark is still found and cut.
        let cut = last_lsn + 5;
        let (d, r) = open_hint(&bytes[..cut as usize], recs[10].0);
        let s = r.unwrap();
        assert_eq!((s.end_lsn, s.truncated_bytes), (last_lsn, 5));
        assert_eq!(read_all(d.path(), 0), recs[..recs.len() - 1].to_vec());
        // Corruption between the mark and a later valid record is refused.
        let mut b = bytes.clone();
        b[recs[20].0 as usize + 9] ^= 0x40;
        let (_d, r) = open_hint(&b, recs[10].0);
        assert!(matches!(r, Err(Error::Corrupt { .. })), "{r:?}");
        // Corruption below the mark is not looked at (those records are
        // checkpointed and never read again).
        let mut b = bytes.clone();
        b[recs[2].0 as usize + 9] ^= 0x40;
        let (_d, r) = open_hint(&b, recs[10].0);
        assert_eq!(r.unwrap().end_lsn, total);
        // A mark that is not a record boundary, or lies past the end, is
        // distrusted: the whole file decides.
        for hint in [recs[5].0 + 3, total + 100] {
            let (_d, r) = open_hint(&bytes, hint);
            let s = r.unwrap();
            assert_eq!((s.end_lsn, s.truncated_bytes), (total, 0), "mark {hint}");
        }
        let (_d, r) = open_hint(&bytes[..cut as usize], recs[5].0 + 3);
        assert_eq!(r.unwrap().end_lsn, last_lsn);
    }

    #[test]
    fn flipped_byte_in_last_record_is_a_torn_tail() {
        let (recs, bytes, name) = torn_fixture();
        let last_lsn = recs.last().unwrap().0 as usize;
        for pos in last_lsn..bytes.len() {
            let mut b = bytes.clone();
            b[pos] ^= 0x40;
            let (dir, r) = open_with_file(&name, &b);
            let (wal, summary) = r.unwrap_or_else(|e| panic!("flip at {pos}: {e}"));
            assert_eq!(summary.end_lsn, last_lsn as u64);
            assert_eq!(summary.truncated_bytes, (bytes.len() - last_lsn) as u64);
            wal.close().unwrap();
            assert_eq!(read_all(dir.path(), 0), recs[..recs.len() - 1].to_vec());
        }
    }

    #[test]
    fn corruption_in_the_middle_is_refused() {
        let (recs, bytes, name) = torn_fixture();
        let mid = recs[10].0 as usize;
        // A payload byte, the checksum, and the length (both directions).
        for (pos, flip) in [
            (mid + 12, 0x01u8),
            (mid + 5, 0x80),
            (mid, 0x01),
            (mid, 0x02),
        ] {
            let mut b = bytes.clone();
            b[pos] ^= flip;
            let (dir, r) = open_with_file(&name, &b);
            let e = r.unwrap_err();
            assert_corrupt(&e, &name, &format!("offset {mid}"));
            assert!(e.to_string().contains("followed by a valid record"), "{e}");
            // The file was not modified.
            assert_eq!(fs::read(dir.path().join(&name)).unwrap(), b);
            // A reader yields the records before, then the error.
            let items: Vec<_> = read_from(dir.path(), 0).unwrap().collect();
            assert_eq!(items.len(), 11);
            for (i, item) in items[..10].iter().enumerate() {
                assert_eq!(item.as_ref().unwrap(), &recs[i]);
            }
            assert!(matches!(items[10], Err(Error::Corrupt { .. })));
        }
        // A zeroed middle region (e.g. a lost page) is corruption too.
        let mut b = bytes.clone();
        b[mid..mid + 40].fill(0);
        assert_corrupt(&open_with_file(&name, &b).1.unwrap_err(), &name, "offset");
    }

    #[test]
    fn corruption_in_a_non_last_file_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let o = WalOptions {
            file_size_limit: 2048,
            ..opts()
        };
        let wal = open(dir.path(), o.clone());
        write_records(&wal, 100);
        wal.close().unwrap();
        let files = log_files(dir.path());
        assert!(files.len() >= 3);
        let (start, path, len) = files[1].clone();
        let name = path.file_name().unwrap().to_str().unwrap().to_string();
        let orig = fs::read(&path).unwrap();

        // Flip the last byte of the second file: it would look like a torn
        // tail if it were the last file, but it is not.
        let mut b = orig.clone();
        let last = b.len() - 1;
        b[last] ^= 0xff;
        fs::write(&path, &b).unwrap();
        // Open scans only the last file: it succeeds and changes nothing...
        drop(open(dir.path(), o.clone()));
        assert_eq!(fs::read(&path).unwrap(), b);
        // ...and the recovery reader refuses the corrupt file.
        let e = read_from(dir.path(), 0)
            .unwrap()
            .find_map(|r| r.err())
            .unwrap();
        assert_corrupt(&e, &name, "not the last one");
        // A shortened non-last file leaves a gap before the next file.
        fs::write(&path, &orig[..orig.len() - 3]).unwrap();
        let e = Wal::open(dir.path(), o.clone()).unwrap_err();
        assert_corrupt(&e, &log_file_name(start + len), "missing");
        assert!(matches!(
            read_from(dir.path(), 0),
            Err(Error::Corrupt { .. })
        ));
        // Restored: opens again.
        fs::write(&path, &orig).unwrap();
        open(dir.path(), o).close().unwrap();
    }

    #[test]
    fn truncate_before_deletes_only_files_wholly_below() {
        let dir = tempfile::tempdir().unwrap();
        let o = WalOptions {
            file_size_limit: 1024,
            ..opts()
        };
        let wal = open(dir.path(), o.clone());
        let recs = write_records(&wal, 200);
        let files = log_files(dir.path());
        assert!(files.len() > 8, "{}", files.len());
        assert_eq!(wal.truncate_before(0).unwrap(), 0);
        // Below the end of file 0: nothing is wholly below.
        assert_eq!(wal.truncate_before(files[1].0 - 1).unwrap(), 0);
        // In the middle of file 5: files 0..=4 go.
        let lsn = files[5].0 + 10;
        assert_eq!(wal.truncate_before(lsn).unwrap(), 5);
        let left = log_files(dir.path());
        assert_eq!(left, files[5..].to_vec());
        assert!(matches!(
            read_from(dir.path(), 0),
            Err(Error::Corrupt { .. })
        ));
        let tail: Vec<_> = recs.iter().filter(|r| r.0 >= files[5].0).cloned().collect();
        assert_eq!(read_all(dir.path(), files[5].0), tail);
        // Everything: the current (last) file always stays.
        assert_eq!(wal.truncate_before(u64::MAX).unwrap(), files.len() - 6);
        assert_eq!(log_files(dir.path()), files[files.len() - 1..].to_vec());
        assert_eq!(wal.stats().files_deleted as usize, files.len() - 1);
        // Appending still works, and a reopen starts from the remaining file.
        let lsn = wal.append(&LogRecord::Commit { txn: 1 }).unwrap();
        wal.close().unwrap();
        let (wal, summary) = Wal::open(dir.path(), o).unwrap();
        assert_eq!(summary.end_lsn, lsn + 11);
        assert_eq!(summary.files, log_files(dir.path()).len());
        drop(wal);
        assert_eq!(
            read_all(dir.path(), files[files.len() - 1].0).last(),
            Some(&(lsn, LogRecord::Commit { txn: 1 }))
        );
    }

    /// Committers run concurrently; the Nth fsync fails. Every committer waiting
    /// then gets an error, no commit past the last durable LSN is acknowledged,
    /// every later append fails (its callback too), and after a reopen every
    /// acknowledged commit is in the log.
    #[test]
    fn fsync_failure_fails_waiters_and_all_later_appends() {
        const THREADS: usize = 8;
        const COMMITS: usize = 25;
        let dir = tempfile::tempdir().unwrap();
        let fault = Arc::new(FaultInjector::new());
        let o = WalOptions {
            fault: Some(fault.clone()),
            ..opts()
        };
        let wal = Arc::new(open(dir.path(), o));
        // Healthy phase.
        for txn in 0..10 {
            let (tx, rx) = crossbeam_channel::bounded(1);
            wal.append_commit(txn, Box::new(move |r| tx.send(r.is_ok()).unwrap()))
                .unwrap();
            assert!(rx.recv().unwrap());
        }
        fault.fail_nth_fsync(4);
        let results = Arc::new(Mutex::new(Vec::new())); // (txn, Option<end lsn>, acked)
        let handles: Vec<_> = (0..THREADS)
            .map(|t| {
                let (wal, results) = (wal.clone(), results.clone());
                std::thread::spawn(move || {
                    for c in 0..COMMITS {
                        let txn = 1000 + (t * COMMITS + c) as u64;
                        let (tx, rx) = crossbeam_channel::bounded(1);
                        let end = wal
                            .append_commit(txn, Box::new(move |r| tx.send(r.is_ok()).unwrap()))
                            .ok()
                            .map(|lsn| lsn + LogRecord::Commit { txn }.encoded_len() as u64);
                        // The callback fires exactly once, even when the append failed.
                        let acked = rx.recv().unwrap();
                        assert!(rx.recv().is_err());
                        results.lock().push((txn, end, acked));
                    }
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
        let reason = wal.failure().expect("the log must have failed");
        assert!(reason.contains("injected fsync failure"), "{reason}");
        assert_eq!(fault.faults_injected(), 1);
        let durable = wal.durable_lsn();
        let results = results.lock().clone();
        let acked: Vec<u64> = results.iter().filter(|r| r.2).map(|r| r.0).collect();
        let failed = results.len() - acked.len();
        assert!(
            failed > 0 && !acked.is_empty(),
            "acked {}, failed {failed}",
            acked.len()
        );
        for (txn, end, ok) in &results {
            match end {
                Some(end) if *end <= durable => assert!(ok, "txn {txn} durable but not acked"),
                _ => assert!(!ok, "txn {txn} acknowledged but not durable"),
            }
        }
        // Everything after the failure is refused.
        let e = wal.append(&LogRecord::Commit { txn: 1 }).unwrap_err();
        assert!(
            matches!(&e, Error::Closed(m) if m.contains("injected fsync failure")),
            "{e}"
        );
        assert!(wal.wait_durable(wal.end_lsn()).is_err());
        assert!(wal.wait_durable(durable).is_ok());
        assert!(wal.flush().is_err());
        assert!(wal.close().is_err());
        assert_eq!(wal.stats().failed, Some(reason));
        drop(wal);

        // Reopen without faults: every acknowledged commit is there.
        let wal = open(dir.path(), opts());
        drop(wal);
        let logged: std::collections::HashSet<u64> = read_all(dir.path(), 0)
            .into_iter()
            .map(|(_, r)| r.txn())
            .collect();
        for txn in acked {
            assert!(logged.contains(&txn), "acknowledged txn {txn} lost");
        }
    }

    #[test]
    fn short_write_fails_the_log_and_reopen_truncates() {
        let dir = tempfile::tempdir().unwrap();
        let fault = Arc::new(FaultInjector::new());
        let wal = open(
            dir.path(),
            WalOptions {
                fault: Some(fault.clone()),
                ..opts()
            },
        );
        let recs = write_records(&wal, 20);
        let good_end = wal.durable_lsn();
        fault.fail_writes_after(25);
        let (tx, rx) = crossbeam_channel::unbounded();
        for i in 0..5u64 {
            let tx = tx.clone();
            // Appends may succeed (buffered) or fail (log already failed).
            let _ = wal.append(&update(500 + i, 3));
            let _ = wal.append_commit(500 + i, Box::new(move |r| tx.send(r).unwrap()));
        }
        drop(tx);
        let results: Vec<Result<()>> = rx.iter().collect();
        assert_eq!(results.len(), 5);
        assert!(results.iter().all(|r| r.is_err()));
        assert!(wal.failure().unwrap().contains("short write"));
        assert_eq!(wal.durable_lsn(), good_end);
        drop(wal);
        let file = &log_files(dir.path())[0];
        // The short write left 25 bytes after the good records; the rest of
        // the file is preallocated zeros.
        let bytes = std::fs::read(&file.1).unwrap();
        let last_nonzero = bytes.iter().rposition(|&b| b != 0).unwrap() as u64;
        assert_eq!(file.0 + last_nonzero + 1, good_end + 25);
        let (wal, summary) = Wal::open(dir.path(), opts()).unwrap();
        assert_eq!(summary.end_lsn, good_end);
        assert_eq!(summary.truncated_bytes, 25);
        drop(wal);
        assert_eq!(read_all(dir.path(), 0), recs);
    }

    #[test]
    fn batched_mode_acknowledges_before_fsync_and_syncs_within_interval() {
        let dir = tempfile::tempdir().unwrap();
        let wal = open(
            dir.path(),
            WalOptions {
                durability: Durability::Batched { interval_ms: 300 },
                ..opts()
            },
        );
        let started = Instant::now();
        let base = wal.stats().fsyncs;
        for txn in 0..50 {
            let (tx, rx) = crossbeam_channel::bounded(1);
            wal.append_commit(txn, Box::new(move |r| tx.send(r).unwrap()))
                .unwrap();
            rx.recv().unwrap().unwrap();
        }
        let elapsed = started.elapsed();
        let fsyncs = wal.stats().fsyncs - base;
        // At most one fsync per interval (plus one at the start).
        let allowed = 1 + (elapsed.as_millis() / 300) as u64;
        assert!(fsyncs <= allowed, "{fsyncs} fsyncs in {elapsed:?}");
        assert_eq!(wal.durable_lsn(), wal.end_lsn());
        // Without further appends the flusher fsyncs within about the interval.
        let deadline = Instant::now() + Duration::from_secs(5);
        while wal.synced_lsn() < wal.durable_lsn() {
            assert!(Instant::now() < deadline, "batched log never synced");
            std::thread::sleep(Duration::from_millis(20));
        }
        wal.close().unwrap();
        assert_eq!(read_all(dir.path(), 0).len(), 50);
    }

    #[test]
    fn explicit_sync_in_batched_mode() {
        let dir = tempfile::tempdir().unwrap();
        let wal = open(
            dir.path(),
            WalOptions {
                durability: Durability::Batched {
                    interval_ms: 60_000,
                },
                ..opts()
            },
        );
        write_records(&wal, 10);
        assert!(wal.synced_lsn() < wal.durable_lsn());
        let started = Instant::now();
        assert_eq!(wal.sync().unwrap(), wal.end_lsn());
        assert_eq!(wal.synced_lsn(), wal.end_lsn());
        assert!(started.elapsed() < Duration::from_secs(10));
        // Concurrent syncs with appends in between.
        let wal = Arc::new(wal);
        let handles: Vec<_> = (0..4)
            .map(|t| {
                let wal = wal.clone();
                std::thread::spawn(move || {
                    for i in 0..20 {
                        let lsn = wal.append(&update(t * 100 + i, i as usize)).unwrap();
                        assert!(wal.sync().unwrap() > lsn);
                        assert!(wal.synced_lsn() > lsn);
                    }
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
        assert!(wal.stats().fsyncs >= 2);
    }

    #[test]
    fn none_mode_writes_without_fsync_until_close() {
        let dir = tempfile::tempdir().unwrap();
        let wal = open(
            dir.path(),
            WalOptions {
                durability: Durability::None,
                file_size_limit: 512,
                ..opts()
            },
        );
        let base = wal.stats().fsyncs;
        for txn in 0..20 {
            let (tx, rx) = crossbeam_channel::bounded(1);
            wal.append_commit(txn, Box::new(move |r| tx.send(r).unwrap()))
                .unwrap();
            rx.recv().unwrap().unwrap();
        }
        let st = wal.stats();
        // 20 commits of 10 bytes: no file roll yet, so no fsync at all.
        assert_eq!(st.fsyncs, base);
        assert_eq!(st.synced_lsn, 0);
        assert_eq!(st.durable_lsn, st.end_lsn);
        // An explicit sync fsyncs once, in this mode too.
        assert_eq!(wal.sync().unwrap(), st.end_lsn);
        assert_eq!(wal.synced_lsn(), st.end_lsn);
        assert_eq!(wal.stats().fsyncs, base + 1);
        assert_eq!(wal.sync().unwrap(), st.end_lsn);
        assert_eq!(wal.stats().fsyncs, base + 1);
        // A file roll syncs the finished file even in this mode.
        write_records(&wal, 40);
        let st = wal.stats();
        assert!(st.files_created > 1);
        assert!(st.fsyncs >= st.files_created - 1);
        wal.close().unwrap();
        assert_eq!(wal.synced_lsn(), wal.end_lsn());
        assert_eq!(read_all(dir.path(), 0).len(), 60);
    }

    #[test]
    fn tail_buffer_is_bounded() {
        let dir = tempfile::tempdir().unwrap();
        let fault = Arc::new(FaultInjector::new());
        fault.delay_fsyncs(Duration::from_millis(5));
        let wal = Arc::new(open(
            dir.path(),
            WalOptions {
                tail_buffer_limit: 4096,
                fault: Some(fault),
                ..opts()
            },
        ));
        let handles: Vec<_> = (0..4)
            .map(|t| {
                let wal = wal.clone();
                std::thread::spawn(move || {
                    for i in 0..60 {
                        wal.append(&LogRecord::Update {
                            txn: t * 100 + i,
                            dataset: 0,
                            partition: 0,
                            index: 0,
                            op: LogOp::Put,
                            key: vec![1; 8],
                            seq: i,
                            value: vec![2; 500],
                        })
                        .unwrap();
                    }
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
        wal.flush().unwrap();
        let st = wal.stats();
        assert!(st.max_tail_bytes <= 4096, "{st:?}");
        assert!(st.tail_full_waits > 0, "{st:?}");
        // A record bigger than the whole buffer still goes through.
        let big = LogRecord::Update {
            txn: 1,
            dataset: 0,
            partition: 0,
            index: 0,
            op: LogOp::Put,
            key: vec![],
            seq: 0,
            value: vec![3; 10_000],
        };
        let lsn = wal.append(&big).unwrap();
        wal.flush().unwrap();
        drop(wal);
        let all = read_all(dir.path(), 0);
        assert_eq!(all.len(), 241);
        assert_eq!(all[240], (lsn, big));
    }

    #[test]
    fn panicking_callback_does_not_stop_the_flusher() {
        let dir = tempfile::tempdir().unwrap();
        let wal = open(dir.path(), opts());
        wal.append_commit(
            1,
            Box::new(|_| panic!("callback panic (expected by the test)")),
        )
        .unwrap();
        let (tx, rx) = crossbeam_channel::bounded(1);
        wal.append_commit(2, Box::new(move |r| tx.send(r.is_ok()).unwrap()))
            .unwrap();
        assert!(rx.recv().unwrap());
        wal.flush().unwrap();
        assert_eq!(wal.failure(), None);
        wal.close().unwrap();
    }

    #[test]
    fn failed_fsync_at_file_roll_fails_the_log() {
        let dir = tempfile::tempdir().unwrap();
        let fault = Arc::new(FaultInjector::new());
        let wal = open(
            dir.path(),
            WalOptions {
                file_size_limit: 100,
                fault: Some(fault.clone()),
                ..opts()
            },
        );
        // First batch: fills the first file past the limit (one fsync).
        write_records(&wal, 3);
        assert!(wal.end_lsn() >= 100);
        fault.fail_next_fsync();
        // Second batch: the roll's fsync of the finished file fails.
        let (tx, rx) = crossbeam_channel::bounded(1);
        wal.append_commit(9, Box::new(move |r| tx.send(r.is_ok()).unwrap()))
            .unwrap();
        assert!(!rx.recv().unwrap());
        assert_eq!(
            log_files(dir.path()).len(),
            1,
            "no file after a failed roll"
        );
        assert!(matches!(
            wal.append(&LogRecord::Commit { txn: 10 }),
            Err(Error::Closed(_))
        ));
    }

    #[test]
    fn closed_log_refuses_and_bad_requests_error() {
        let dir = tempfile::tempdir().unwrap();
        assert!(matches!(
            Wal::open(
                dir.path(),
                WalOptions {
                    file_size_limit: 0,
                    ..opts()
                }
            ),
            Err(Error::Config(_))
        ));
        let wal = open(dir.path(), opts());
        let end = wal.append(&LogRecord::Abort { txn: 3 }).unwrap() + 11;
        assert!(matches!(wal.wait_durable(end + 1), Err(Error::Config(_))));
        wal.wait_durable(end).unwrap();
        wal.close().unwrap();
        wal.close().unwrap();
        assert!(matches!(
            wal.append(&LogRecord::Commit { txn: 4 }),
            Err(Error::Closed(_))
        ));
        let (tx, rx) = crossbeam_channel::bounded(1);
        assert!(
            wal.append_commit(4, Box::new(move |r| tx.send(r.is_err()).unwrap()))
                .is_err()
        );
        assert!(rx.recv().unwrap());
        // Reading past the end of the log is an error; at the end, empty.
        assert!(matches!(
            read_from(dir.path(), end + 1),
            Err(Error::Corrupt { .. })
        ));
        assert_eq!(read_all(dir.path(), end), vec![]);
        // A missing directory is an empty log.
        let missing = dir.path().join("nope");
        assert_eq!(read_all(&missing, 0), vec![]);
        assert!(read_from(&missing, 5).is_err());
    }

    #[test]
    fn checkpoint_round_trip_and_corruption() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(read_checkpoint(dir.path()).unwrap(), None);
        let cp = Checkpoint {
            low_water_lsn: 4096,
            end_lsn: 9000,
            next_txn_id: 77,
        };
        write_checkpoint(dir.path(), &cp).unwrap();
        assert_eq!(read_checkpoint(dir.path()).unwrap(), Some(cp.clone()));
        let cp2 = Checkpoint {
            low_water_lsn: 8192,
            ..cp
        };
        write_checkpoint(dir.path(), &cp2).unwrap();
        assert_eq!(read_checkpoint(dir.path()).unwrap(), Some(cp2));
        let path = dir.path().join(CHECKPOINT_FILE);
        let good = fs::read(&path).unwrap();
        assert!(!dir.path().join("CHECKPOINT.tmp").exists());
        // Any flipped byte is detected.
        for pos in 0..good.len() {
            let mut b = good.clone();
            b[pos] ^= 0x04;
            fs::write(&path, &b).unwrap();
            let e = read_checkpoint(dir.path()).unwrap_err();
            assert_corrupt(&e, CHECKPOINT_FILE, "");
        }
        fs::write(&path, &good[..good.len() - 1]).unwrap();
        assert!(read_checkpoint(dir.path()).is_err());
        fs::write(&path, b"").unwrap();
        assert!(read_checkpoint(dir.path()).is_err());
    }
}
