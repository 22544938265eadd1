//! Log records and their on-disk frame: [`LogRecord`], [`LogOp`],
//! [`LogEntry`], the payload codec and the `length, CRC32C, payload` frame.
//!
//! The byte layout is written down in `docs/format/wal.md`. Encoding, its
//! length and decoding all follow one table, [`layout`]: the fields of each
//! record tag in wire order. Each field name has one way to be written
//! ([`put_field`]) and read back ([`get_field`]), and records are taken
//! apart into [`Fields`] and put back together by field name, so the order
//! of the fields is stated exactly once.

use crate::error::{Error, Result};
use crate::varint::{self, VarintError};
use std::borrow::Cow;

/// Bytes of the frame header (`u32` length, `u32` crc32c).
pub const FRAME_HEADER_BYTES: usize = 8;
/// Largest accepted payload of one log record.
pub const MAX_PAYLOAD_BYTES: usize = 256 << 20;
/// Smallest valid payload: the version byte and the tag.
pub(super) const MIN_PAYLOAD_BYTES: usize = 2;
/// The payload format version, the first byte of every payload.
pub(super) const FORMAT_VERSION: u8 = 1;

const TAG_UPDATE: u8 = 1;
const TAG_COMMIT: u8 = 2;
const TAG_ABORT: u8 = 3;
const TAG_WAIT: u8 = 4;
const TAG_UPDATE_BATCH: u8 = 5;

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
///
/// See `docs/format/wal.md` for the whole format.
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

// ---------------------------------------------------------------------------
// The field table
// ---------------------------------------------------------------------------

/// A field of a payload, by name. How each is written: [`put_field`].
#[derive(Clone, Copy, Debug)]
enum Field {
    /// varint
    Txn,
    /// varint, at most `u32::MAX`
    Dataset,
    /// varint, at most `u32::MAX`
    Partition,
    /// varint, at most `u32::MAX`
    Index,
    /// one byte, a [`LogOp`] code
    Op,
    /// varint length, then the bytes
    Key,
    /// varint
    Seq,
    /// varint length, then the bytes
    Value,
    /// varint count, then per entry the fields of [`ENTRY`]
    Entries,
}

use Field::*;

/// The fields that follow the tag, in wire order, of each record tag: the
/// one description that encoding, [`LogRecord::encoded_len`] and decoding
/// follow. `None` for an unknown tag.
fn layout(tag: u8) -> Option<&'static [Field]> {
    Some(match tag {
        TAG_UPDATE => &[Txn, Dataset, Partition, Index, Op, Key, Seq, Value],
        TAG_COMMIT | TAG_ABORT | TAG_WAIT => &[Txn],
        TAG_UPDATE_BATCH => &[Txn, Dataset, Partition, Index, Seq, Entries],
        _ => return None,
    })
}

/// The fields of one entry of an UPDATE-BATCH, in wire order.
const ENTRY: &[Field] = &[Op, Key, Value];

/// A record taken apart into its fields by name: borrowed from a record to
/// encode it, or filled in by decoding (then keys and values borrow from the
/// payload). Fields a tag does not have keep their empty values.
struct Fields<'a> {
    txn: u64,
    dataset: u32,
    partition: u32,
    index: u32,
    op: LogOp,
    key: &'a [u8],
    seq: u64,
    value: &'a [u8],
    entries: Cow<'a, [LogEntry]>,
}

impl<'a> Fields<'a> {
    fn empty() -> Fields<'a> {
        Fields {
            txn: 0,
            dataset: 0,
            partition: 0,
            index: 0,
            op: LogOp::Put,
            key: &[],
            seq: 0,
            value: &[],
            entries: Cow::Borrowed(&[]),
        }
    }
}

impl LogRecord {
    /// The tag of the record and its fields by name.
    fn to_fields(&self) -> (u8, Fields<'_>) {
        let mut f = Fields::empty();
        let tag = match self {
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
                (f.txn, f.dataset, f.partition, f.index) = (*txn, *dataset, *partition, *index);
                (f.op, f.key, f.seq, f.value) = (*op, key, *seq, value);
                TAG_UPDATE
            }
            LogRecord::UpdateBatch {
                txn,
                dataset,
                partition,
                index,
                seq,
                entries,
            } => {
                (f.txn, f.dataset, f.partition, f.index) = (*txn, *dataset, *partition, *index);
                (f.seq, f.entries) = (*seq, Cow::Borrowed(entries.as_slice()));
                TAG_UPDATE_BATCH
            }
            LogRecord::Commit { txn } => {
                f.txn = *txn;
                TAG_COMMIT
            }
            LogRecord::Abort { txn } => {
                f.txn = *txn;
                TAG_ABORT
            }
            LogRecord::Wait { txn } => {
                f.txn = *txn;
                TAG_WAIT
            }
        };
        (tag, f)
    }

    /// The record of `tag` (one [`layout`] knows) made of the fields `f`.
    fn from_fields(tag: u8, f: Fields<'_>) -> std::result::Result<LogRecord, String> {
        Ok(match tag {
            TAG_UPDATE => LogRecord::Update {
                txn: f.txn,
                dataset: f.dataset,
                partition: f.partition,
                index: f.index,
                op: f.op,
                key: f.key.to_vec(),
                seq: f.seq,
                value: f.value.to_vec(),
            },
            TAG_UPDATE_BATCH => LogRecord::UpdateBatch {
                txn: f.txn,
                dataset: f.dataset,
                partition: f.partition,
                index: f.index,
                seq: f.seq,
                entries: f.entries.into_owned(),
            },
            TAG_COMMIT => LogRecord::Commit { txn: f.txn },
            TAG_ABORT => LogRecord::Abort { txn: f.txn },
            TAG_WAIT => LogRecord::Wait { txn: f.txn },
            t => return Err(format!("unknown log record tag {t}")),
        })
    }
}

/// Where encoded bytes go: a buffer, or a counter that only measures them, so
/// that the encoded length is computed by the encoder itself.
trait Sink {
    fn byte(&mut self, b: u8);
    fn varint(&mut self, v: u64);
    fn bytes(&mut self, b: &[u8]);
}

impl Sink for Vec<u8> {
    fn byte(&mut self, b: u8) {
        self.push(b);
    }
    fn varint(&mut self, v: u64) {
        varint::put(self, v);
    }
    fn bytes(&mut self, b: &[u8]) {
        self.extend_from_slice(b);
    }
}

/// A [`Sink`] that counts bytes.
struct Len(usize);

impl Sink for Len {
    fn byte(&mut self, _: u8) {
        self.0 += 1;
    }
    fn varint(&mut self, v: u64) {
        self.0 += varint::len(v);
    }
    fn bytes(&mut self, b: &[u8]) {
        self.0 += b.len();
    }
}

/// Length-prefixed bytes: varint length, then the bytes.
fn put_len_prefixed(s: &mut impl Sink, b: &[u8]) {
    s.varint(b.len() as u64);
    s.bytes(b);
}

fn put_fields(s: &mut impl Sink, fields: &[Field], f: &Fields<'_>) {
    for &field in fields {
        put_field(s, field, f);
    }
}

/// Write one field. [`get_field`] reads it back.
fn put_field(s: &mut impl Sink, field: Field, f: &Fields<'_>) {
    match field {
        Txn => s.varint(f.txn),
        Dataset => s.varint(u64::from(f.dataset)),
        Partition => s.varint(u64::from(f.partition)),
        Index => s.varint(u64::from(f.index)),
        Op => s.byte(f.op as u8),
        Key => put_len_prefixed(s, f.key),
        Seq => s.varint(f.seq),
        Value => put_len_prefixed(s, f.value),
        Entries => {
            s.varint(f.entries.len() as u64);
            for e in f.entries.iter() {
                let mut ef = Fields::empty();
                (ef.op, ef.key, ef.value) = (e.op, &e.key, &e.value);
                put_fields(s, ENTRY, &ef);
            }
        }
    }
}

/// Read one field written by [`put_field`] into `f`.
fn get_field<'a>(
    d: &mut Decoder<'a>,
    field: Field,
    f: &mut Fields<'a>,
) -> std::result::Result<(), String> {
    match field {
        Txn => f.txn = d.varint()?,
        Dataset => f.dataset = d.varint_u32("dataset id")?,
        Partition => f.partition = d.varint_u32("partition")?,
        Index => f.index = d.varint_u32("index id")?,
        Op => {
            let b = d.u8()?;
            f.op = LogOp::from_u8(b).ok_or_else(|| format!("unknown update operation {b}"))?;
        }
        Key => f.key = d.bytes()?,
        Seq => f.seq = d.varint()?,
        Value => f.value = d.bytes()?,
        Entries => {
            let count = d.varint()?;
            // Each entry takes at least 3 bytes: a corrupt count cannot
            // make us allocate more than the payload justifies.
            let left = (d.buf.len() - d.pos) as u64;
            if count > left / 3 {
                return Err(format!(
                    "update batch claims {count} entries but only {left} bytes follow"
                ));
            }
            let mut entries = Vec::with_capacity(count as usize);
            for _ in 0..count {
                let mut ef = Fields::empty();
                for &field in ENTRY {
                    get_field(d, field, &mut ef)?;
                }
                entries.push(LogEntry {
                    op: ef.op,
                    key: ef.key.to_vec(),
                    value: ef.value.to_vec(),
                });
            }
            f.entries = Cow::Owned(entries);
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// Varints
// ---------------------------------------------------------------------------

/// Most bytes a valid varint takes.
const MAX_VARINT_BYTES: usize = 10;

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
        let mut pos = self.pos;
        match varint::decode(self.buf, &mut pos) {
            Ok(v) => {
                self.pos = pos;
                Ok(v)
            }
            Err(VarintError::Truncated { .. }) => {
                Err(format!("payload truncated at byte {}", self.buf.len()))
            }
            Err(VarintError::Overflow | VarintError::Overlong) => Err(format!(
                "varint too long at byte {}",
                self.pos + MAX_VARINT_BYTES
            )),
        }
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

// ---------------------------------------------------------------------------
// Records: payload and frame
// ---------------------------------------------------------------------------

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

    /// Write the payload (version, tag, fields) to `s`.
    fn put_payload(&self, s: &mut impl Sink) {
        let (tag, f) = self.to_fields();
        put_tagged(s, tag, &f);
    }

    fn payload_len(&self) -> usize {
        let mut len = Len(0);
        self.put_payload(&mut len);
        len.0
    }

    /// Bytes this record occupies in the log, frame header included: the
    /// distance from its LSN to its `end_lsn`.
    pub fn encoded_len(&self) -> usize {
        FRAME_HEADER_BYTES + self.payload_len()
    }

    /// Append the payload (without the frame header) to `out`.
    #[cfg(test)]
    pub(super) fn encode_payload(&self, out: &mut Vec<u8>) {
        self.put_payload(out);
    }

    /// Decode a payload (without the frame header).
    pub(super) fn decode_payload(buf: &[u8]) -> std::result::Result<LogRecord, String> {
        let mut d = Decoder { buf, pos: 0 };
        let version = d.u8()?;
        if version != FORMAT_VERSION {
            return Err(format!(
                "unsupported log record format version {version} (this build reads {FORMAT_VERSION})"
            ));
        }
        let tag = d.u8()?;
        let fields = layout(tag).ok_or_else(|| format!("unknown log record tag {tag}"))?;
        let mut f = Fields::empty();
        for &field in fields {
            get_field(&mut d, field, &mut f)?;
        }
        let rec = LogRecord::from_fields(tag, f)?;
        if d.pos != buf.len() {
            return Err(format!(
                "{} trailing bytes after the record",
                buf.len() - d.pos
            ));
        }
        Ok(rec)
    }

    /// The framed record: header and payload.
    #[cfg(test)]
    pub(super) fn encode_frame(&self) -> Result<Vec<u8>> {
        let mut out = Vec::new();
        self.encode_frame_into(&mut out)?;
        Ok(out)
    }

    /// Replace `out`'s content with the framed record.
    pub(super) fn encode_frame_into(&self, out: &mut Vec<u8>) -> Result<()> {
        let (tag, f) = self.to_fields();
        frame_into(tag, &f, out)
    }
}

/// An UPDATE record whose key and value are borrowed: the same frame as
/// [`LogRecord::Update`], written without copying the record's bytes into
/// an owned record first (the write path logs every record this way).
#[derive(Clone, Copy, Debug)]
pub struct UpdateRef<'a> {
    pub txn: u64,
    pub dataset: u32,
    pub partition: u32,
    pub index: u32,
    pub op: LogOp,
    pub key: &'a [u8],
    pub seq: u64,
    pub value: &'a [u8],
}

impl UpdateRef<'_> {
    /// Replace `out`'s content with the framed record.
    pub(super) fn encode_frame_into(&self, out: &mut Vec<u8>) -> Result<()> {
        let mut f = Fields::empty();
        (f.txn, f.dataset, f.partition, f.index) =
            (self.txn, self.dataset, self.partition, self.index);
        (f.op, f.key, f.seq, f.value) = (self.op, self.key, self.seq, self.value);
        frame_into(TAG_UPDATE, &f, out)
    }
}

/// The payload of a record with `tag` and fields `f`.
fn put_tagged(s: &mut impl Sink, tag: u8, f: &Fields<'_>) {
    s.byte(FORMAT_VERSION);
    s.byte(tag);
    if let Some(fields) = layout(tag) {
        put_fields(s, fields, f);
    }
}

/// Replace `out`'s content with the frame (header and payload) of a
/// record with `tag` and fields `f`.
fn frame_into(tag: u8, f: &Fields<'_>, out: &mut Vec<u8>) -> Result<()> {
    let mut len = Len(0);
    put_tagged(&mut len, tag, f);
    let payload_len = len.0;
    if payload_len > MAX_PAYLOAD_BYTES {
        return Err(Error::ValueTooLarge {
            size: payload_len,
            limit: MAX_PAYLOAD_BYTES,
        });
    }
    out.clear();
    out.reserve(FRAME_HEADER_BYTES + payload_len);
    out.extend_from_slice(&[0u8; FRAME_HEADER_BYTES]);
    put_tagged(out, tag, f);
    debug_assert_eq!(out.len(), FRAME_HEADER_BYTES + payload_len);
    let crc = crc32c::crc32c(&out[FRAME_HEADER_BYTES..]);
    out[0..4].copy_from_slice(&(payload_len as u32).to_le_bytes());
    out[4..8].copy_from_slice(&crc.to_le_bytes());
    Ok(())
}

/// A frame header: payload length and the payload's CRC32C.
pub(super) fn parse_frame_header(header: &[u8; FRAME_HEADER_BYTES]) -> (usize, u32) {
    let payload_len = u32::from_le_bytes([header[0], header[1], header[2], header[3]]) as usize;
    let crc = u32::from_le_bytes([header[4], header[5], header[6], header[7]]);
    (payload_len, crc)
}

/// Whether a frame header's payload length can be that of a record.
pub(super) fn plausible_payload_len(len: usize) -> bool {
    (MIN_PAYLOAD_BYTES..=MAX_PAYLOAD_BYTES).contains(&len)
}

/// The record framed at `data[i..]` if a complete, checksum-valid, decodable
/// frame starts there.
pub(super) fn decode_frame_at(data: &[u8], i: usize) -> Option<LogRecord> {
    let len = le_u32(data, i)? as usize;
    if !plausible_payload_len(len) {
        return None;
    }
    let payload = data.get(i + FRAME_HEADER_BYTES..i + FRAME_HEADER_BYTES + len)?;
    if payload[0] != FORMAT_VERSION || le_u32(data, i + 4)? != crc32c::crc32c(payload) {
        return None;
    }
    LogRecord::decode_payload(payload).ok()
}

/// The little-endian `u32` at `buf[pos..pos + 4]`, if there are four bytes.
pub(super) fn le_u32(buf: &[u8], pos: usize) -> Option<u32> {
    let b = buf.get(pos..pos.checked_add(4)?)?;
    Some(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
}
