//! How the log is run: [`Durability`] (when a commit is acknowledged),
//! [`WalOptions`] and the tuning constants of the flusher.
//!
//! Nothing here is stored in the log files (`docs/format/wal.md`); the
//! durability mode appears in configuration as text (`sync`, `batched`,
//! `batched(<ms>)`, `none`).

use crate::error::{Error, Result};
use crate::txn::fault::FaultInjector;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

/// Default [`WalOptions::file_size_limit`].
pub const DEFAULT_FILE_SIZE_LIMIT: u64 = 64 << 20;
/// Default [`WalOptions::tail_buffer_limit`].
pub const DEFAULT_TAIL_BUFFER_LIMIT: usize = 32 << 20;
/// Interval of `Durability::Batched` when parsed from plain `"batched"`.
pub const DEFAULT_BATCH_INTERVAL_MS: u64 = 10;
/// In `Sync` mode, buffered records without a durability request are written
/// once this many bytes accumulate.
pub(super) const EAGER_WRITE_BYTES: usize = 1 << 20;
/// `Batched` / `None` modes: the flusher writes buffered records to the OS at
/// least this often (so a process crash loses at most this much of
/// acknowledged commits in those modes) or when `LAZY_WRITE_BYTES` accumulate.
pub(super) const LAZY_WRITE_MS: u64 = 5;
pub(super) const LAZY_WRITE_BYTES: usize = 256 << 10;

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
    /// dropped the pages); the log then fails as described in the
    /// [`wal`](super) module documentation ("Failure handling").
    Batched { interval_ms: u64 },
    /// Acknowledge once the record is written to the OS; never fsync the log
    /// (except when a file is finished and at close). A process crash loses
    /// nothing acknowledged; a power loss or OS crash can lose anything not yet
    /// made durable by a component flush.
    None,
}

impl Durability {
    /// Bytes of buffered records, without a durability request, after which
    /// the flusher writes them anyway (at most half the tail buffer).
    pub(super) fn write_threshold(self, tail_limit: usize) -> usize {
        if matches!(self, Durability::Sync) {
            EAGER_WRITE_BYTES
        } else {
            LAZY_WRITE_BYTES
        }
        .min(tail_limit / 2)
    }
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

/// Options of [`Wal::open`](super::Wal::open).
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
