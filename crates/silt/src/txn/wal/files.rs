//! The log's files: naming (`log-<first LSN as 016x>.wal`), listing with the
//! contiguity check, and the file being appended to with its preallocated
//! zeros. See `docs/format/wal.md`.
//!
//! Directory fsyncs use [`crate::storage::fsutil::sync_dir`].

use crate::error::{Error, Result};
use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

/// Log files grow by this much of zeros ahead of the records.
const PREALLOC_BYTES: u64 = 4 << 20;

/// Zeros to preallocate from: a static, so no buffer is cleared per use.
static ZEROS: [u8; 256 << 10] = [0; 256 << 10];

/// Name of the log file whose first byte is at LSN `start_lsn`.
pub(super) fn log_file_name(start_lsn: u64) -> String {
    format!("log-{start_lsn:016x}.wal")
}

/// The start LSN in a log file name; `None` for any other name.
fn parse_log_file_name(name: &str) -> Option<u64> {
    let hex = name.strip_prefix("log-")?.strip_suffix(".wal")?;
    if hex.len() != 16 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    u64::from_str_radix(hex, 16).ok()
}

/// A log file as listed: where it starts in the log and its length then.
#[derive(Clone, Debug)]
pub(super) struct LogFileInfo {
    pub(super) start: u64,
    pub(super) path: PathBuf,
    pub(super) len: u64,
}

/// Log files of `dir`, sorted by start LSN. A missing directory has none.
/// Errors ([`Error::Corrupt`]) if a file does not start where the previous
/// one ends.
pub(super) fn list_log_files(dir: &Path) -> Result<Vec<LogFileInfo>> {
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

/// The log file being appended to.
pub(super) struct LogFile {
    pub(super) file: File,
    pub(super) path: PathBuf,
    pub(super) start_lsn: u64,
    /// Logical length: records end here.
    pub(super) len: u64,
    /// Bytes of the file already written (records, then zeros): appends
    /// inside this region overwrite in place, so an fsync need not journal a
    /// new file size (on ext4 that halves the cost of a commit's fsync).
    pub(super) allocated: u64,
}

impl LogFile {
    /// Create the (new, empty) log file starting at `start_lsn` in `dir`.
    pub(super) fn create(dir: &Path, start_lsn: u64) -> io::Result<LogFile> {
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

    /// Open the existing last file `last` for appending after its first
    /// `valid_len` bytes: cut everything after them (a torn write and/or
    /// preallocated zeros), then fsync it. Returns the file and the length of
    /// the torn part that was cut, counted up to its last non-zero byte
    /// (trailing zeros cannot be told from preallocated space).
    pub(super) fn reopen(last: &LogFileInfo, valid_len: u64) -> Result<(LogFile, u64)> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .open(&last.path)
            .map_err(|e| Error::io(&last.path, e))?;
        let mut torn_len = 0;
        if valid_len < last.len {
            // Bytes after the last valid record: a torn write, then
            // preallocated zeros (or only zeros). Count the torn part up
            // to the last non-zero byte.
            let mut rest = vec![0u8; (last.len - valid_len) as usize];
            torn_len = match file.read_exact_at(&mut rest, valid_len) {
                Ok(()) => rest
                    .iter()
                    .rposition(|&b| b != 0)
                    .map_or(0, |p| p as u64 + 1),
                Err(_) => last.len - valid_len,
            };
            file.set_len(valid_len)
                .map_err(|e| Error::io(&last.path, e))?;
        }
        // Whatever a previous process left in the page cache becomes
        // durable before anyone builds on it.
        file.sync_data().map_err(|e| Error::io(&last.path, e))?;
        let f = LogFile {
            file,
            path: last.path.clone(),
            start_lsn: last.start,
            len: valid_len,
            allocated: valid_len,
        };
        Ok((f, torn_len))
    }

    /// LSN just past the last record of the file.
    pub(super) fn end_lsn(&self) -> u64 {
        self.start_lsn + self.len
    }

    /// Make sure `n` more bytes of records fit in the allocated region:
    /// if not, extend the file with zeros ahead of the records (one size
    /// change per `PREALLOC_BYTES` instead of one per fsync).
    pub(super) fn preallocate(&mut self, n: u64) -> io::Result<()> {
        if self.len + n > self.allocated {
            let grow = PREALLOC_BYTES.max(n);
            // Written from one static zero block: a fresh zeroed buffer of
            // the whole size cost the kernel as much to clear as the write.
            let mut at = 0;
            while at < grow {
                let piece = (grow - at).min(ZEROS.len() as u64);
                self.file
                    .write_all_at(&ZEROS[..piece as usize], self.allocated + at)?;
                at += piece;
            }
            self.allocated += grow;
        }
        Ok(())
    }

    /// Drop the preallocated zeros: the file ends at its last record.
    pub(super) fn cut_to_len(&mut self) -> io::Result<()> {
        self.file.set_len(self.len)?;
        self.allocated = self.len;
        Ok(())
    }
}
