//! Reading the log back: [`LogReader`] / [`read_from`] for recovery, and the
//! scan of the last file at open that finds where its valid records end.
//! See `docs/format/wal.md` (torn tails and corruption).
//!
//! An invalid record (short header, implausible length, length running past
//! the end of the file, checksum mismatch) is a *torn tail* only when it is in
//! the last file and no valid record follows it anywhere in that file: then
//! the log simply ends there (the next [`Wal::open`](super::Wal::open) cuts
//! it). An invalid record followed by a valid one, an invalid record in any
//! file but the last, or a gap between files is corruption in the middle of
//! the log: [`Error::Corrupt`] naming the file and offset, because continuing
//! would silently drop committed records. A record whose checksum matches but
//! whose payload cannot be decoded is always corruption. Limitation: after a
//! power loss, a device that persisted the un-fsynced tail out of order (a
//! hole followed by a later record) is reported as corruption rather than
//! repaired, since the two cases cannot be told apart.

use super::files::{LogFileInfo, list_log_files};
use super::record::{
    FRAME_HEADER_BYTES, LogRecord, MIN_PAYLOAD_BYTES, decode_frame_at, parse_frame_header,
    plausible_payload_len,
};
use crate::error::{Error, Result};
use std::fs::File;
use std::io::{BufReader, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

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
        let (payload_len, crc) = parse_frame_header(&header);
        if !plausible_payload_len(payload_len) {
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
        if decode_frame_at(&data, i).is_some() {
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
/// iteration (the next [`Wal::open`](super::Wal::open) truncates it).
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

/// Where the valid records of the last log file end, as found at open.
pub(super) struct LastFileEnd {
    /// Length of the file up to the end of its last valid record.
    pub(super) valid_len: u64,
    /// Bytes of the file read to find it.
    pub(super) scanned: u64,
}

/// Find the end of the valid records of the last log file `last`, reading
/// from `valid_below_lsn` (the checkpoint's low-water mark, see
/// [`WalOptions::valid_below_lsn`](super::WalOptions::valid_below_lsn)) if it
/// lies in this file, else from its start. Does not modify the file. Errors
/// ([`Error::Corrupt`]) if an invalid record is followed by a valid one.
pub(super) fn scan_last_file(last: &LogFileInfo, valid_below_lsn: u64) -> Result<LastFileEnd> {
    let hint = valid_below_lsn
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
    if let Some(reason) = torn {
        tracing::warn!(
            "write-ahead log {}: torn tail at offset {valid_len} ({reason}); truncating {} bytes of records that were never acknowledged",
            last.path.display(),
            last.len - valid_len
        );
    }
    Ok(LastFileEnd { valid_len, scanned })
}
