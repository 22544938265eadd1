//! A component's column image (Fusion, seed 004 ch. 6): the live records of
//! a component in a bucket, split by top-level field into columns, chunk by
//! chunk of whole blocks. A range query through a block range index that
//! reads two of a table's sixteen fields then fetches two columns of the
//! chunks the index picks, not whole rows (what a Parquet reader does with
//! its column chunks). The image is written beside the component when it
//! is uploaded and lives and dies with it; the component stays the truth
//! (every other path reads it). Format: `docs/format/column-image.md`.

use crate::error::{Error, Result};
use crate::storage::EntryKind;
use crate::storage::remote::{RemoteCounters, RemoteStore};
use crate::value::{encoded_len, for_each_raw_field};
use crate::varint;
use std::collections::HashMap;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Rows of a chunk: whole blocks are added until a chunk holds at least
/// this many live records.
pub const CHUNK_ROWS: usize = 8192;
/// ...or its columns hold this many bytes before compression (large
/// records).
pub const CHUNK_BYTES: usize = 16 << 20;
const MAGIC: &[u8; 8] = b"SILTCIM1";
/// `footer_len u32, footer crc32c u32, magic`.
const TRAILER: usize = 16;
/// A row of a field column that lacks the field (no value encoding
/// starts with this byte).
const ABSENT: u8 = 0xFF;
/// Bytes fetched from the image's end at open: usually the whole footer.
const TAIL_BYTES: u64 = 64 << 10;
/// The largest single GET of a read; larger runs are split so that
/// several GETs run at once.
const GET_MAX: u64 = 4 << 20;
/// Two byte ranges of one column closer than this are fetched as one.
const GAP_MAX: u64 = 128 << 10;
/// GETs in flight at once.
const GETS: usize = 8;
/// zstd's level for segments: sequence numbers and small values, which lz4
/// hardly shrinks, come out at a half to a third.
const ZSTD_LEVEL: i32 = 3;

/// One chunk: whole blocks `first_block..first_block + blocks`, `rows`
/// live records.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ChunkMeta {
    pub first_block: u32,
    pub blocks: u32,
    pub rows: u32,
}

/// One column: its name (empty for the key and sequence-number columns)
/// and where each chunk's segment lies (`offs[i]..offs[i + 1]`; an empty
/// segment of a field column means no row of the chunk has the field).
#[derive(Clone, Debug)]
struct ColumnMeta {
    name: Vec<u8>,
    offs: Vec<u64>,
}

/// Column 0 holds the keys, column 1 the sequence numbers.
const KEYS: usize = 0;
const SEQS: usize = 1;

/// What a component's entries are read through: `read(i, f)` calls
/// `f(key, kind, seq, value)` for each entry of data block `i`, in order,
/// until it returns false (`ComponentReader::for_each_in_block`).
pub type EntryVisitor<'a> = dyn FnMut(&[u8], EntryKind, u64, &[u8]) -> Result<bool> + 'a;

/// Write the column image of a local component of `blocks` data blocks,
/// read through `read`, to `out`. Its size, or `None` (nothing written)
/// when a live record is not an object: such a component has no fields
/// to split. Records are split on the calling thread while a second one
/// compresses and writes the previous chunk's segments.
pub fn write_image(
    blocks: usize,
    read: impl FnMut(usize, &mut EntryVisitor<'_>) -> Result<()>,
    out: &Path,
) -> Result<Option<u64>> {
    let (tx, rx) = std::sync::mpsc::sync_channel::<Vec<Vec<u8>>>(1);
    let res = std::thread::scope(|sc| {
        let sealer = sc.spawn(|| Sealer::run(out, rx));
        let mut b = Builder::new(tx);
        let built = b.build(blocks, read);
        let Builder {
            tx, chunks, names, ..
        } = b;
        drop(tx);
        let sealed = sealer
            .join()
            .unwrap_or_else(|p| std::panic::resume_unwind(p));
        match (built, sealed) {
            (Ok(true), Ok(mut sealer)) => {
                let r = sealer.finish(out, &chunks, &names).map(Some);
                sealer.remove_temps();
                r
            }
            // The sealer's own failure is the cause of the builder's.
            (_, Err(e)) => Err(e),
            (built, Ok(sealer)) => {
                sealer.remove_temps();
                built.map(|_| None)
            }
        }
    });
    if !matches!(res, Ok(Some(_))) {
        let _ = std::fs::remove_file(out);
    }
    res
}

/// A column of the chunk being split.
struct ColumnBuild {
    raw: Vec<u8>,
    /// Rows of the current chunk written to `raw` (absent rows included).
    rows: usize,
    /// Whether a row of the chunk has the field.
    any: bool,
}

/// Splits records into the columns of the current chunk and hands each
/// finished chunk (one raw buffer per column; empty: no row has the
/// field) to the [`Sealer`].
struct Builder {
    tx: std::sync::mpsc::SyncSender<Vec<Vec<u8>>>,
    cols: Vec<ColumnBuild>,
    names: Vec<Vec<u8>>,
    by_name: HashMap<Vec<u8>, usize>,
    /// The column of the k-th field of the last record: records of one
    /// table mostly list their fields in one order, which spares a hash
    /// lookup per field.
    order: Vec<usize>,
    chunks: Vec<ChunkMeta>,
    prev_key: Vec<u8>,
}

impl Builder {
    fn new(tx: std::sync::mpsc::SyncSender<Vec<Vec<u8>>>) -> Builder {
        let fresh = || ColumnBuild {
            raw: Vec::new(),
            rows: 0,
            any: true,
        };
        Builder {
            tx,
            cols: vec![fresh(), fresh()],
            names: vec![Vec::new(), Vec::new()],
            by_name: HashMap::new(),
            order: Vec::new(),
            chunks: Vec::new(),
            prev_key: Vec::new(),
        }
    }

    /// The column of field `name`, the `k`-th of its record.
    fn column(&mut self, k: usize, name: &[u8]) -> usize {
        if let Some(&c) = self.order.get(k)
            && self.names[c] == name
        {
            return c;
        }
        let c = match self.by_name.get(name) {
            Some(&c) => c,
            None => {
                let c = self.cols.len();
                self.by_name.insert(name.to_vec(), c);
                self.names.push(name.to_vec());
                self.cols.push(ColumnBuild {
                    raw: Vec::new(),
                    rows: 0,
                    any: false,
                });
                c
            }
        };
        if k < self.order.len() {
            self.order[k] = c;
        } else if k == self.order.len() {
            self.order.push(c);
        }
        c
    }

    /// Add every live record of the `blocks` blocks `read` gives; false
    /// when one is not an object.
    fn build(
        &mut self,
        blocks: usize,
        mut read: impl FnMut(usize, &mut EntryVisitor<'_>) -> Result<()>,
    ) -> Result<bool> {
        let mut first = 0usize;
        let mut rows = 0usize;
        for b in 0..blocks {
            let mut objects = true;
            read(b, &mut |key, kind, seq, v| {
                if kind != EntryKind::Put {
                    return Ok(true);
                }
                let shared = common_prefix(&self.prev_key, key);
                let k = &mut self.cols[KEYS].raw;
                varint::put(k, shared as u64);
                varint::put(k, (key.len() - shared) as u64);
                k.extend_from_slice(&key[shared..]);
                self.prev_key.clear();
                self.prev_key.extend_from_slice(key);
                varint::put(&mut self.cols[SEQS].raw, seq);
                let mut k = 0;
                let is_object = for_each_raw_field(v, |name, val| {
                    let i = self.column(k, name);
                    k += 1;
                    let col = &mut self.cols[i];
                    if col.rows > rows {
                        // The same field twice in one record: the first
                        // one is what a read finds.
                        return;
                    }
                    col.raw.resize(col.raw.len() + (rows - col.rows), ABSENT);
                    col.raw.extend_from_slice(val);
                    col.rows = rows + 1;
                    col.any = true;
                })?;
                if !is_object {
                    objects = false;
                    return Ok(false);
                }
                rows += 1;
                Ok(true)
            })?;
            if !objects {
                return Ok(false);
            }
            if rows >= CHUNK_ROWS
                || self.cols.iter().map(|c| c.raw.len()).sum::<usize>() >= CHUNK_BYTES
            {
                self.end_chunk(first, b + 1, rows)?;
                first = b + 1;
                rows = 0;
            }
        }
        if first < blocks {
            self.end_chunk(first, blocks, rows)?;
        }
        Ok(true)
    }

    fn end_chunk(&mut self, first: usize, end: usize, rows: usize) -> Result<()> {
        let mut raws = Vec::with_capacity(self.cols.len());
        for (i, col) in self.cols.iter_mut().enumerate() {
            if col.any {
                col.raw.resize(col.raw.len() + (rows - col.rows), ABSENT);
            }
            let cap = col.raw.capacity();
            raws.push(std::mem::replace(&mut col.raw, Vec::with_capacity(cap)));
            col.rows = 0;
            col.any = i <= SEQS;
        }
        if self.tx.send(raws).is_err() {
            // The sealer stopped on an error, which its join reports.
            return Err(Error::Config("the column image writer stopped".to_owned()));
        }
        self.prev_key.clear();
        self.chunks.push(ChunkMeta {
            first_block: to_u32(first)?,
            blocks: to_u32(end - first)?,
            rows: to_u32(rows)?,
        });
        Ok(())
    }
}

/// Compresses each chunk's columns into segments, appended to one
/// temporary file per column, copied into the image at the end.
struct Sealer {
    files: Vec<(PathBuf, BufWriter<File>)>,
    lens: Vec<Vec<u64>>,
}

impl Sealer {
    fn run(out: &Path, rx: std::sync::mpsc::Receiver<Vec<Vec<u8>>>) -> Result<Sealer> {
        let mut s = Sealer {
            files: Vec::new(),
            lens: Vec::new(),
        };
        let mut n_chunks = 0;
        let r = (|| {
            // The key and sequence-number columns exist even without chunks.
            for i in [KEYS, SEQS] {
                let path = out.with_extension(format!("col{i}.tmp"));
                let f = File::create(&path).map_err(|e| Error::io(&path, e))?;
                s.files.push((path, BufWriter::new(f)));
                s.lens.push(Vec::new());
            }
            for raws in rx {
                for (i, raw) in raws.iter().enumerate() {
                    if i == s.files.len() {
                        let path = out.with_extension(format!("col{i}.tmp"));
                        let f = File::create(&path).map_err(|e| Error::io(&path, e))?;
                        s.files.push((path, BufWriter::new(f)));
                        // A column first seen now is empty in earlier chunks.
                        s.lens.push(vec![0; n_chunks]);
                    }
                    let len = if raw.is_empty() && i > SEQS {
                        0
                    } else {
                        let seg = seal(raw)?;
                        let (path, f) = &mut s.files[i];
                        f.write_all(&seg).map_err(|e| Error::io(&*path, e))?;
                        seg.len() as u64
                    };
                    s.lens[i].push(len);
                }
                n_chunks += 1;
            }
            Ok(())
        })();
        match r {
            Ok(()) => Ok(s),
            Err(e) => {
                s.remove_temps();
                Err(e)
            }
        }
    }

    /// Copy the columns into the image, then the footer.
    fn finish(&mut self, out: &Path, chunks: &[ChunkMeta], names: &[Vec<u8>]) -> Result<u64> {
        let io = |e| Error::io(out, e);
        let mut w = BufWriter::new(File::create(out).map_err(io)?);
        let mut footer = Vec::new();
        varint::put(&mut footer, chunks.len() as u64);
        for ch in chunks {
            varint::put(&mut footer, ch.first_block.into());
            varint::put(&mut footer, ch.blocks.into());
            varint::put(&mut footer, ch.rows.into());
        }
        varint::put(&mut footer, self.files.len() as u64);
        let mut pos = 0u64;
        for (i, (path, f)) in self.files.iter_mut().enumerate() {
            f.flush().map_err(|e| Error::io(&*path, e))?;
            let mut r = File::open(&*path).map_err(|e| Error::io(&*path, e))?;
            let n = std::io::copy(&mut r, &mut w).map_err(io)?;
            let name = names.get(i).map_or(&[][..], Vec::as_slice);
            varint::put(&mut footer, name.len() as u64);
            footer.extend_from_slice(name);
            varint::put(&mut footer, pos);
            for &l in &self.lens[i] {
                varint::put(&mut footer, l);
            }
            pos += n;
        }
        let crc = crc32c::crc32c(&footer);
        w.write_all(&footer).map_err(io)?;
        w.write_all(&to_u32(footer.len())?.to_le_bytes())
            .map_err(io)?;
        w.write_all(&crc.to_le_bytes()).map_err(io)?;
        w.write_all(MAGIC).map_err(io)?;
        w.flush().map_err(io)?;
        Ok(pos + footer.len() as u64 + TRAILER as u64)
    }

    fn remove_temps(&self) {
        for (path, _) in &self.files {
            let _ = std::fs::remove_file(path);
        }
    }
}

fn common_prefix(a: &[u8], b: &[u8]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

fn to_u32(n: usize) -> Result<u32> {
    u32::try_from(n).map_err(|_| Error::Config(format!("{n} is too large for a column image")))
}

/// A segment as stored: its raw length (u32 LE), the raw bytes as a zstd
/// frame, then crc32c of both.
fn seal(raw: &[u8]) -> Result<Vec<u8>> {
    let mut seg = to_u32(raw.len())?.to_le_bytes().to_vec();
    let z = zstd::bulk::compress(raw, ZSTD_LEVEL)
        .map_err(|e| Error::Config(format!("compressing a column image segment: {e}")))?;
    seg.extend_from_slice(&z);
    let crc = crc32c::crc32c(&seg);
    seg.extend_from_slice(&crc.to_le_bytes());
    Ok(seg)
}

/// An image in a bucket, its footer read.
#[derive(Debug)]
pub struct ColumnImage {
    store: Arc<dyn RemoteStore>,
    counters: Arc<RemoteCounters>,
    key: String,
    url: PathBuf,
    chunks: Vec<ChunkMeta>,
    cols: Vec<ColumnMeta>,
    by_name: HashMap<Vec<u8>, usize>,
}

impl ColumnImage {
    /// Open the image `key` (`size` bytes) of `store`: one GET of its end.
    pub fn open(
        store: Arc<dyn RemoteStore>,
        counters: Arc<RemoteCounters>,
        key: String,
        url: PathBuf,
        size: u64,
    ) -> Result<ColumnImage> {
        let bad = |m: String| Error::corrupt(&url, format!("column image: {m}"));
        if size < TRAILER as u64 {
            return Err(bad(format!("{size} bytes is too short")));
        }
        let tail_len = size.min(TAIL_BYTES);
        let mut tail = store.get_range(&key, size - tail_len, tail_len as usize)?;
        counters.got(tail.len());
        if tail.len() as u64 != tail_len {
            return Err(bad(format!(
                "a read of {tail_len} bytes gave {}",
                tail.len()
            )));
        }
        let t = &tail[tail.len() - TRAILER..];
        if &t[8..] != MAGIC {
            return Err(bad("no image trailer at its end".to_owned()));
        }
        let flen = u32::from_le_bytes([t[0], t[1], t[2], t[3]]) as u64;
        let crc = u32::from_le_bytes([t[4], t[5], t[6], t[7]]);
        if flen + TRAILER as u64 > size {
            return Err(bad(format!(
                "footer of {flen} bytes in a {size}-byte object"
            )));
        }
        if flen + TRAILER as u64 > tail_len {
            let off = size - flen - TRAILER as u64;
            let mut whole = store.get_range(&key, off, (flen + TRAILER as u64) as usize)?;
            counters.got(whole.len());
            if whole.len() as u64 != flen + TRAILER as u64 {
                return Err(bad("short read of the footer".to_owned()));
            }
            std::mem::swap(&mut tail, &mut whole);
        }
        let end = tail.len() - TRAILER;
        let footer = &tail[end - flen as usize..end];
        if crc32c::crc32c(footer) != crc {
            return Err(bad("footer checksum mismatch".to_owned()));
        }
        let data_end = size - flen - TRAILER as u64;
        let (chunks, cols) = parse_footer(footer, data_end).map_err(bad)?;
        let by_name = cols
            .iter()
            .enumerate()
            .skip(2)
            .map(|(i, c)| (c.name.clone(), i))
            .collect();
        Ok(ColumnImage {
            store,
            counters,
            key,
            url,
            chunks,
            cols,
            by_name,
        })
    }

    /// Delete the image from its bucket (with its merged-away component).
    pub fn remove(&self) -> Result<()> {
        self.counters.deleted();
        self.store.delete(&self.key)
    }

    pub fn chunks(&self) -> &[ChunkMeta] {
        &self.chunks
    }

    /// The chunk holding block `b`.
    pub fn chunk_of_block(&self, b: usize) -> Option<usize> {
        let i = self
            .chunks
            .partition_point(|c| c.first_block as usize <= b)
            .checked_sub(1)?;
        let c = self.chunks[i];
        (b < (c.first_block + c.blocks) as usize).then_some(i)
    }

    /// The chunks (ascending, distinct) holding `blocks` (ascending); `None`
    /// when a block lies past the image's chunks.
    pub fn chunks_of(&self, blocks: impl Iterator<Item = usize>) -> Option<Vec<usize>> {
        let mut out: Vec<usize> = Vec::new();
        for b in blocks {
            let ch = self.chunk_of_block(b)?;
            if out.last() != Some(&ch) {
                out.push(ch);
            }
        }
        Some(out)
    }

    /// The field column named `name`, if any record of the component has
    /// that field.
    pub fn column(&self, name: &[u8]) -> Option<usize> {
        self.by_name.get(name).copied()
    }

    /// The name of field column `i`.
    pub fn column_name(&self, i: usize) -> &[u8] {
        &self.cols[i].name
    }

    /// Chunks `chunks` (ascending, distinct) with the field columns
    /// `fields`, fetched with GETs side by side.
    pub fn read(&self, chunks: &[usize], fields: &[usize]) -> Result<Vec<ChunkData>> {
        let cols: Vec<usize> = [KEYS, SEQS]
            .into_iter()
            .chain(fields.iter().copied())
            .collect();
        // Byte ranges: per column, runs of adjacent chunks, closed gaps.
        let mut ranges: Vec<(u64, u64)> = Vec::new();
        for &c in &cols {
            let offs = &self.cols[c].offs;
            let mut cur: Option<(u64, u64)> = None;
            for &ch in chunks {
                let (a, b) = (offs[ch], offs[ch + 1]);
                if a == b {
                    continue;
                }
                cur = match cur {
                    Some((s, e)) if a <= e + GAP_MAX => Some((s, b.max(e))),
                    Some(r) => {
                        ranges.push(r);
                        Some((a, b))
                    }
                    None => Some((a, b)),
                };
            }
            ranges.extend(cur);
        }
        let mut pieces: Vec<(u64, u64)> = Vec::new();
        for (s, e) in ranges {
            let mut a = s;
            while a < e {
                let b = (a + GET_MAX).min(e);
                pieces.push((a, b));
                a = b;
            }
        }
        let got = self.fetch(&pieces)?;
        let mut out = Vec::with_capacity(chunks.len());
        for &ch in chunks {
            let mut segs = Vec::with_capacity(cols.len());
            for &c in &cols {
                let offs = &self.cols[c].offs;
                let (a, b) = (offs[ch], offs[ch + 1]);
                segs.push(if a == b {
                    None
                } else {
                    Some(self.open_segment(&gather(&pieces, &got, a, b), ch, c)?)
                });
            }
            let rows = self.chunks[ch].rows as usize;
            let mut it = segs.into_iter();
            let keys = it.next().flatten().unwrap_or_default();
            let seqs = it.next().flatten().unwrap_or_default();
            out.push(ChunkData {
                rows,
                keys,
                seqs,
                fields: it.collect(),
            });
        }
        Ok(out)
    }

    /// GET each of `pieces`, up to [`GETS`] at once.
    fn fetch(&self, pieces: &[(u64, u64)]) -> Result<Vec<Vec<u8>>> {
        let next = std::sync::atomic::AtomicUsize::new(0);
        let slots: Vec<parking_lot::Mutex<Option<Result<Vec<u8>>>>> = pieces
            .iter()
            .map(|_| parking_lot::Mutex::new(None))
            .collect();
        let work = || {
            loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let Some(&(a, b)) = pieces.get(i) else {
                    break;
                };
                let r = self
                    .store
                    .get_range(&self.key, a, (b - a) as usize)
                    .and_then(|v| {
                        self.counters.got(v.len());
                        if v.len() as u64 == b - a {
                            Ok(v)
                        } else {
                            Err(Error::corrupt(
                                &self.url,
                                format!("a read of {} bytes at {a} gave {}", b - a, v.len()),
                            ))
                        }
                    });
                let failed = r.is_err();
                *slots[i].lock() = Some(r);
                if failed {
                    break;
                }
            }
        };
        let threads = pieces.len().min(GETS);
        if threads <= 1 {
            work();
        } else {
            std::thread::scope(|s| {
                for _ in 0..threads {
                    s.spawn(work);
                }
            });
        }
        // A failed GET is the answer (a worker stops at its failure, and
        // pieces may go unread after it).
        let mut got = Vec::with_capacity(pieces.len());
        let mut missing = false;
        for slot in slots {
            match slot.into_inner() {
                Some(Ok(v)) => got.push(v),
                Some(Err(e)) => return Err(e),
                None => missing = true,
            }
        }
        if missing {
            return Err(Error::corrupt(&self.url, "a read was not made"));
        }
        Ok(got)
    }

    /// Check and decompress the segment of chunk `ch`, column `c`.
    fn open_segment(&self, seg: &[u8], ch: usize, c: usize) -> Result<Vec<u8>> {
        let bad = |m: &str| {
            Error::corrupt(
                &self.url,
                format!("column image chunk {ch}, column {c}: {m}"),
            )
        };
        let Some(body_len) = seg.len().checked_sub(4).filter(|&n| n >= 4) else {
            return Err(bad("segment too short"));
        };
        let (body, crc) = seg.split_at(body_len);
        if crc32c::crc32c(body) != u32::from_le_bytes([crc[0], crc[1], crc[2], crc[3]]) {
            return Err(bad("checksum mismatch"));
        }
        let raw_len = u32::from_le_bytes([body[0], body[1], body[2], body[3]]) as usize;
        let raw = zstd::bulk::decompress(&body[4..], raw_len).map_err(|e| bad(&e.to_string()))?;
        if raw.len() != raw_len {
            return Err(bad("segment shorter than its length"));
        }
        Ok(raw)
    }
}

/// Bytes `a..b` of the fetched `pieces` (which cover them, in order).
fn gather(pieces: &[(u64, u64)], got: &[Vec<u8>], a: u64, b: u64) -> Vec<u8> {
    let mut out = Vec::with_capacity((b - a) as usize);
    let first = pieces.partition_point(|p| p.1 <= a);
    for (p, bytes) in pieces[first..].iter().zip(&got[first..]) {
        if p.0 >= b {
            break;
        }
        let s = a.max(p.0);
        let e = b.min(p.1);
        if s < e {
            out.extend_from_slice(&bytes[(s - p.0) as usize..(e - p.0) as usize]);
        }
    }
    out
}

fn parse_footer(
    f: &[u8],
    data_end: u64,
) -> std::result::Result<(Vec<ChunkMeta>, Vec<ColumnMeta>), String> {
    let mut pos = 0;
    let num = |pos: &mut usize, what: &str| -> std::result::Result<u64, String> {
        varint::get(f, pos).ok_or_else(|| format!("footer ends inside {what}"))
    };
    let n = num(&mut pos, "the chunk count")? as usize;
    if n > f.len() / 3 {
        return Err(format!("{n} chunks in a {}-byte footer", f.len()));
    }
    let mut chunks = Vec::with_capacity(n);
    let mut next_block = 0u64;
    for _ in 0..n {
        let (fb, bl, rows) = (
            num(&mut pos, "a chunk")?,
            num(&mut pos, "a chunk")?,
            num(&mut pos, "a chunk")?,
        );
        if fb != next_block || bl == 0 || fb + bl > u32::MAX as u64 || rows > u32::MAX as u64 {
            return Err(format!(
                "chunk of blocks {fb}+{bl} after block {next_block}"
            ));
        }
        next_block = fb + bl;
        chunks.push(ChunkMeta {
            first_block: fb as u32,
            blocks: bl as u32,
            rows: rows as u32,
        });
    }
    let m = num(&mut pos, "the column count")? as usize;
    if m < 2 || m > f.len() {
        return Err(format!("{m} columns"));
    }
    let mut cols = Vec::with_capacity(m);
    for i in 0..m {
        let len = num(&mut pos, "a column name")? as usize;
        let name = f
            .get(pos..pos + len)
            .ok_or("footer ends inside a column name")?
            .to_vec();
        pos += len;
        if (i < 2) != name.is_empty() {
            return Err(format!("column {i} is misnamed"));
        }
        let mut at = num(&mut pos, "a column offset")?;
        let mut offs = Vec::with_capacity(n + 1);
        offs.push(at);
        for _ in 0..n {
            at = at
                .checked_add(num(&mut pos, "a segment length")?)
                .filter(|&e| e <= data_end)
                .ok_or("a segment lies past the image's data")?;
            offs.push(at);
        }
        cols.push(ColumnMeta { name, offs });
    }
    if pos != f.len() {
        return Err("trailing bytes in the footer".to_owned());
    }
    Ok((chunks, cols))
}

/// One chunk's columns as read: the keys and sequence numbers of its live
/// records, and the requested field columns (`None`: no row has it).
#[derive(Debug)]
pub struct ChunkData {
    pub rows: usize,
    keys: Vec<u8>,
    seqs: Vec<u8>,
    fields: Vec<Option<Vec<u8>>>,
}

impl ChunkData {
    /// Call `f(key, seq, values)` for each row; `values[i]` is the encoding
    /// of field column `i` of the read, `None` where the row lacks it.
    pub fn for_each_row(
        &self,
        url: &Path,
        mut f: impl FnMut(&[u8], u64, &[Option<&[u8]>]) -> Result<()>,
    ) -> Result<()> {
        let bad = |m: &str| Error::corrupt(url, format!("column image: {m}"));
        let (mut kp, mut sp) = (0usize, 0usize);
        let mut pos = vec![0usize; self.fields.len()];
        let mut key: Vec<u8> = Vec::new();
        let mut vals: Vec<Option<&[u8]>> = vec![None; self.fields.len()];
        for _ in 0..self.rows {
            let shared = varint::get(&self.keys, &mut kp).ok_or_else(|| bad("truncated keys"))?;
            let len = varint::get(&self.keys, &mut kp).ok_or_else(|| bad("truncated keys"))?;
            let suffix = usize::try_from(len)
                .ok()
                .and_then(|l| self.keys.get(kp..kp.checked_add(l)?))
                .ok_or_else(|| bad("truncated keys"))?;
            if shared as usize > key.len() {
                return Err(bad("a key shares more than its predecessor has"));
            }
            kp += suffix.len();
            key.truncate(shared as usize);
            key.extend_from_slice(suffix);
            let seq = varint::get(&self.seqs, &mut sp)
                .ok_or_else(|| bad("truncated sequence numbers"))?;
            for (i, col) in self.fields.iter().enumerate() {
                vals[i] = match col {
                    None => None,
                    Some(raw) => {
                        let p = pos[i];
                        match raw.get(p) {
                            None => return Err(bad("a field column ends early")),
                            Some(&ABSENT) => {
                                pos[i] = p + 1;
                                None
                            }
                            Some(_) => {
                                let n = encoded_len(&raw[p..])?;
                                pos[i] = p + n;
                                Some(&raw[p..p + n])
                            }
                        }
                    }
                };
            }
            f(&key, seq, &vals)?;
        }
        Ok(())
    }
}

impl ColumnImage {
    /// Where the image lives, for messages.
    pub fn url(&self) -> &Path {
        &self.url
    }
}

#[cfg(test)]
mod tests;
