//! Writing and reading component files (layout, byte by byte:
//! `docs/format/component.md`).

use super::block::{Block, BlockBuilder, BlockView, RawEntry, TRAILER_LEN};
use super::bloom::{Bloom, bits_per_key_for_fpr, key_hash};
use super::cache::BlockCache;
use super::fsutil::sync_dir;
use super::source::{ComponentSource, LocalFile};
use super::varint;
use super::{Entry, EntryKind, EntryRef};
use crate::error::{Error, Result};
use serde::{Deserialize, Serialize};
use std::fs::{File, OpenOptions};
use std::io::{BufWriter, Write};
use std::ops::Bound;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

const MAGIC: &[u8; 8] = b"SILTCMP\x01";
const FORMAT_VERSION: u32 = 1;
pub const FOOTER_LEN: usize = 64;
/// Upper bound on one uncompressed block, protecting against corrupt size fields.
const MAX_BLOCK_BYTES: usize = 256 << 20;

/// Block compression codec.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Compression {
    None,
    #[default]
    Lz4,
    Zstd,
}

impl std::fmt::Display for Compression {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Compression::None => "none",
            Compression::Lz4 => "lz4",
            Compression::Zstd => "zstd",
        })
    }
}

impl Compression {
    pub(crate) fn code(self) -> u8 {
        match self {
            Compression::None => 0,
            Compression::Lz4 => 1,
            Compression::Zstd => 2,
        }
    }
    pub fn parse(s: &str) -> Result<Compression> {
        match s.to_ascii_lowercase().as_str() {
            "none" | "off" => Ok(Compression::None),
            "lz4" => Ok(Compression::Lz4),
            "zstd" => Ok(Compression::Zstd),
            other => Err(Error::Config(format!(
                "unknown compression `{other}`; use none, lz4 or zstd"
            ))),
        }
    }
}

/// How a component file is written.
#[derive(Clone, Debug)]
pub struct WriterOptions {
    /// Target uncompressed size of a data block.
    pub block_size: usize,
    pub compression: Compression,
    /// Bloom filter false-positive rate on the key (0 disables the bloom filter).
    pub bloom_fpr: f64,
    /// fsync the file and its directory (always true outside of tests).
    pub sync: bool,
}

impl Default for WriterOptions {
    fn default() -> Self {
        WriterOptions {
            block_size: 4096,
            compression: Compression::Lz4,
            bloom_fpr: 0.01,
            sync: true,
        }
    }
}

mod b64 {
    use base64::Engine;
    use base64::engine::general_purpose::STANDARD;
    use serde::{Deserialize, Deserializer, Serializer};
    pub fn serialize<S: Serializer>(v: &[u8], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&STANDARD.encode(v))
    }
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        let s = String::deserialize(d)?;
        STANDARD.decode(s).map_err(serde::de::Error::custom)
    }
}

/// Per-component metadata, stored in the file's meta block and kept in memory.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct ComponentMeta {
    /// Unique (per index) component id.
    pub id: u64,
    /// Level for leveled merge policies; 0 otherwise.
    pub level: u32,
    /// Number of entries including antimatter.
    pub entries: u64,
    /// Number of antimatter entries.
    pub tombstones: u64,
    /// Sum of uncompressed key and value bytes.
    pub raw_bytes: u64,
    /// Size of the file on disk.
    pub file_bytes: u64,
    pub blocks: u64,
    #[serde(with = "b64")]
    pub min_key: Vec<u8>,
    #[serde(with = "b64")]
    pub max_key: Vec<u8>,
    /// Range of sequence numbers (recency) of the entries.
    pub min_seq: u64,
    pub max_seq: u64,
    /// Range of log sequence numbers covered (used by recovery).
    pub min_lsn: u64,
    pub max_lsn: u64,
    /// Ids of the flushed components this one contains (a flush has one id;
    /// a merge the union of its inputs').
    pub min_flush_id: u64,
    pub max_flush_id: u64,
    pub compression: Compression,
    /// Index-kind specific metadata (MBRs, zone maps...).
    #[serde(default)]
    pub extra: serde_json::Value,
}

/// Streams sorted entries into a new component file.
pub struct ComponentWriter {
    tmp_path: PathBuf,
    final_path: PathBuf,
    out: BufWriter<File>,
    offset: u64,
    opts: WriterOptions,
    block: BlockBuilder,
    index: BlockBuilder,
    hashes: Vec<u64>,
    meta: ComponentMeta,
    last_key: Option<Vec<u8>>,
    scratch: Vec<u8>,
    aux: Vec<u8>,
}

impl ComponentWriter {
    /// Start writing `path` (written as `path.tmp` until [`finish`](Self::finish)).
    pub fn create(path: &Path, meta: ComponentMeta, opts: WriterOptions) -> Result<Self> {
        let tmp_path = path.with_extension("tmp");
        let file = OpenOptions::new()
            .create(true)
            .write(true)
            .truncate(true)
            .open(&tmp_path)
            .map_err(|e| Error::io(&tmp_path, e))?;
        let mut meta = meta;
        meta.compression = opts.compression;
        meta.min_seq = u64::MAX;
        Ok(ComponentWriter {
            tmp_path,
            final_path: path.to_path_buf(),
            out: BufWriter::with_capacity(1 << 20, file),
            offset: 0,
            opts,
            block: BlockBuilder::new(),
            index: BlockBuilder::new(),
            hashes: Vec::new(),
            meta,
            last_key: None,
            scratch: Vec::new(),
            aux: Vec::new(),
        })
    }

    /// Add one entry. Keys must be strictly increasing.
    pub fn add(&mut self, key: &[u8], kind: EntryKind, seq: u64, value: &[u8]) -> Result<()> {
        if let Some(last) = &self.last_key
            && key <= last.as_slice()
        {
            return Err(Error::corrupt(
                &self.final_path,
                "internal: component keys were not added in increasing order",
            ));
        }
        if self.meta.entries == 0 {
            self.meta.min_key = key.to_vec();
        }
        self.block.add(key, kind, seq, value);
        if self.opts.bloom_fpr > 0.0 {
            self.hashes.push(key_hash(key));
        }
        self.meta.entries += 1;
        if kind == EntryKind::Delete {
            self.meta.tombstones += 1;
        }
        self.meta.raw_bytes += (key.len() + value.len()) as u64;
        self.meta.min_seq = self.meta.min_seq.min(seq);
        self.meta.max_seq = self.meta.max_seq.max(seq);
        match &mut self.last_key {
            Some(l) => {
                l.clear();
                l.extend_from_slice(key);
            }
            None => self.last_key = Some(key.to_vec()),
        }
        if self.block.size_estimate() >= self.opts.block_size {
            self.flush_block()?;
        }
        Ok(())
    }

    pub fn entries(&self) -> u64 {
        self.meta.entries
    }

    /// Data blocks written so far. An entry whose [`add`](Self::add) raised
    /// this count is the last entry of the block just written.
    pub fn blocks(&self) -> u64 {
        self.meta.blocks
    }

    /// Index-kind specific metadata set before [`finish`](Self::finish).
    pub fn meta_mut(&mut self) -> &mut ComponentMeta {
        &mut self.meta
    }

    /// Index-kind specific bytes (e.g. the leaf MBRs of a packed R-tree),
    /// stored in their own checksummed block and returned by
    /// [`ComponentReader::aux`].
    pub fn set_aux(&mut self, aux: Vec<u8>) {
        self.aux = aux;
    }

    /// Bytes written so far (approximate file size).
    pub fn bytes_written(&self) -> u64 {
        self.offset + self.block.size_estimate() as u64
    }

    fn flush_block(&mut self) -> Result<()> {
        if self.block.is_empty() {
            return Ok(());
        }
        let last = self.block.last_key().to_vec();
        let raw = self.block.finish();
        let (off, len) = self.write_block(&raw, self.opts.compression)?;
        self.scratch.clear();
        varint::put(&mut self.scratch, off);
        varint::put(&mut self.scratch, len);
        let v = std::mem::take(&mut self.scratch);
        self.index.add(&last, EntryKind::Put, 0, &v);
        self.scratch = v;
        self.meta.blocks += 1;
        Ok(())
    }

    fn write_block(&mut self, raw: &[u8], compression: Compression) -> Result<(u64, u64)> {
        let payload: std::borrow::Cow<[u8]> = match compression {
            Compression::None => raw.into(),
            Compression::Lz4 => lz4_flex::compress_prepend_size(raw).into(),
            Compression::Zstd => {
                let mut v = (raw.len() as u32).to_le_bytes().to_vec();
                let c = zstd::bulk::compress(raw, 3).map_err(|e| Error::io(&self.tmp_path, e))?;
                v.extend_from_slice(&c);
                v.into()
            }
        };
        let code = compression.code();
        let mut crc = crc32c::crc32c(&payload);
        crc = crc32c::crc32c_append(crc, &[code]);
        let off = self.offset;
        let w = |o: &mut BufWriter<File>, b: &[u8]| o.write_all(b);
        w(&mut self.out, &payload)
            .and_then(|_| w(&mut self.out, &[code]))
            .and_then(|_| w(&mut self.out, &crc.to_le_bytes()))
            .map_err(|e| Error::io(&self.tmp_path, e))?;
        let len = (payload.len() + TRAILER_LEN) as u64;
        self.offset += len;
        Ok((off, len))
    }

    /// Finish the file: index, bloom, meta, footer; fsync; rename into place;
    /// fsync the directory. Returns the final metadata.
    pub fn finish(mut self) -> Result<ComponentMeta> {
        self.flush_block()?;
        if let Some(l) = self.last_key.take() {
            self.meta.max_key = l;
        }
        if self.meta.entries == 0 {
            self.meta.min_seq = 0;
        }
        let index_raw = self.index.finish();
        let (index_off, index_len) = self.write_block(&index_raw, Compression::None)?;
        let mut bloom_raw = Vec::new();
        if self.opts.bloom_fpr > 0.0 {
            Bloom::build(&self.hashes, bits_per_key_for_fpr(self.opts.bloom_fpr))
                .encode(&mut bloom_raw);
        }
        let (bloom_off, bloom_len) = self.write_block(&bloom_raw, Compression::None)?;
        let aux = std::mem::take(&mut self.aux);
        let (aux_off, aux_len) = if aux.is_empty() {
            (0, 0)
        } else {
            self.write_block(&aux, Compression::None)?
        };
        // file_bytes is known only after the meta block; record the size without it
        // (the exact size is re-read from the filesystem at open).
        let meta_pos = self.offset;
        self.meta.file_bytes = meta_pos;
        let meta_raw = serde_json::to_vec(&self.meta)
            .map_err(|e| Error::corrupt(&self.tmp_path, format!("encoding meta: {e}")))?;
        let (meta_off, meta_len) = self.write_block(&meta_raw, Compression::None)?;
        let mut footer = Vec::with_capacity(FOOTER_LEN);
        footer.extend_from_slice(MAGIC);
        footer.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
        for (o, l) in [
            (index_off, index_len),
            (bloom_off, bloom_len),
            (meta_off, meta_len),
            (aux_off, aux_len),
        ] {
            footer.extend_from_slice(&o.to_le_bytes());
            footer.extend_from_slice(&(l as u32).to_le_bytes());
        }
        footer.resize(FOOTER_LEN - 4, 0);
        let crc = crc32c::crc32c(&footer);
        footer.extend_from_slice(&crc.to_le_bytes());
        self.out
            .write_all(&footer)
            .map_err(|e| Error::io(&self.tmp_path, e))?;
        self.offset += FOOTER_LEN as u64;
        let file = self
            .out
            .into_inner()
            .map_err(|e| Error::io(&self.tmp_path, e.into_error()))?;
        if self.opts.sync {
            file.sync_all().map_err(|e| Error::io(&self.tmp_path, e))?;
        }
        drop(file);
        std::fs::rename(&self.tmp_path, &self.final_path)
            .map_err(|e| Error::io(&self.final_path, e))?;
        if self.opts.sync
            && let Some(dir) = self.final_path.parent()
        {
            sync_dir(dir)?;
        }
        self.meta.file_bytes = self.offset;
        Ok(self.meta)
    }

    /// Abandon the file (removes the temporary).
    pub fn abandon(self) {
        let p = self.tmp_path.clone();
        drop(self);
        let _ = std::fs::remove_file(p);
    }
}

static NEXT_FILE_UID: AtomicU64 = AtomicU64::new(1);

/// Result of a point lookup in one component.
#[derive(Debug)]
pub enum Probe {
    /// The bloom filter excluded the key.
    BloomNegative,
    /// The key's range or block search found nothing (after the bloom said maybe).
    Absent,
    Found(Entry),
}

/// An open, validated component file.
pub struct ComponentReader {
    path: PathBuf,
    /// Where the bytes come from (a mapped local file or an object). When the
    /// source maps the file, blocks are read from the mapping without a
    /// system call or a copy); `None` where mapping failed (then `pread`).
    src: Box<dyn ComponentSource>,
    uid: u64,
    index_keys: Vec<u8>,
    index_key_ends: Vec<u32>,
    /// First 8 bytes of each index key (big-endian, zero-padded): the binary
    /// search compares these compact integers and touches the keys only on
    /// a tie (measured: `find_block` was 11% of a random-lookup profile).
    index_prefix: Vec<u64>,
    block_offs: Vec<u64>,
    block_lens: Vec<u32>,
    /// One bit per data block: its checksum was verified in the mapping
    /// (uncompressed blocks are read in place, and checked once per open).
    verified: Box<[AtomicU64]>,
    bloom: Option<Bloom>,
    meta: ComponentMeta,
    cache: Arc<BlockCache>,
    /// When set, the file is deleted once the last reference is dropped.
    obsolete: AtomicBool,
    aux: Vec<u8>,
    /// What the component's index kind decodes from its sections after open
    /// (the packed R-tree's upper levels, per-block filters): opaque here,
    /// attached once by the layer that knows the kind (`lsm::kind`).
    attached: std::sync::OnceLock<Box<dyn std::any::Any + Send + Sync>>,
    /// The column image written beside a component in a bucket
    /// ([`crate::storage::column_image`]), once opened.
    image: std::sync::OnceLock<Arc<crate::storage::column_image::ColumnImage>>,
    /// A companion component file that lives and dies with this one (the
    /// deleted-key B+-tree of a deleted-key index component).
    companion: Option<Arc<ComponentReader>>,
}

impl std::fmt::Debug for ComponentReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ComponentReader")
            .field("path", &self.path)
            .field("id", &self.meta.id)
            .finish()
    }
}

impl Drop for ComponentReader {
    fn drop(&mut self) {
        if self.obsolete.load(Ordering::Acquire) {
            if let Err(e) = self.src.remove() {
                tracing::warn!(
                    "could not delete merged-away component {}: {e}",
                    self.path.display()
                );
            }
            if let Some(img) = self.image.get()
                && let Err(e) = img.remove()
            {
                tracing::warn!("could not delete a merged-away column image: {e}");
            }
        }
    }
}

/// The first 8 bytes of `key` as a big-endian integer, zero-padded.
fn prefix64(key: &[u8]) -> u64 {
    let mut b = [0u8; 8];
    let n = key.len().min(8);
    b[..n].copy_from_slice(&key[..n]);
    u64::from_be_bytes(b)
}

/// Verify a block's checksum and return its uncompressed payload.
/// Check the crc32c trailer of a stored block (`raw` is at least
/// `TRAILER_LEN` bytes: payload, compression byte, crc).
fn verify_checksum(path: &Path, off: u64, raw: &[u8]) -> Result<()> {
    let n = raw.len();
    let stored = u32::from_le_bytes([raw[n - 4], raw[n - 3], raw[n - 2], raw[n - 1]]);
    let crc = crc32c::crc32c(&raw[..n - 4]);
    if crc != stored {
        return Err(Error::corrupt(
            path,
            format!(
                "checksum mismatch in block at offset {off} (stored {stored:08x}, computed {crc:08x})"
            ),
        ));
    }
    Ok(())
}

fn decode_block(path: &Path, off: u64, raw: &[u8]) -> Result<Vec<u8>> {
    if raw.len() < TRAILER_LEN {
        return Err(Error::corrupt(
            path,
            format!("block at offset {off} is too short"),
        ));
    }
    let n = raw.len();
    let code = raw[n - 5];
    verify_checksum(path, off, raw)?;
    let raw = &raw[..n - TRAILER_LEN];
    let bad = |what: String| Error::corrupt(path, format!("block at offset {off}: {what}"));
    match code {
        0 => Ok(raw.to_vec()),
        1 => {
            if raw.len() >= 4 {
                let size = u32::from_le_bytes([raw[0], raw[1], raw[2], raw[3]]) as usize;
                if size > MAX_BLOCK_BYTES {
                    return Err(bad(format!("implausible uncompressed size {size}")));
                }
            }
            lz4_flex::decompress_size_prepended(raw).map_err(|e| bad(format!("lz4: {e}")))
        }
        2 => {
            if raw.len() < 4 {
                return Err(bad("zstd block too short".into()));
            }
            let size = u32::from_le_bytes([raw[0], raw[1], raw[2], raw[3]]) as usize;
            if size > MAX_BLOCK_BYTES {
                return Err(bad(format!("implausible uncompressed size {size}")));
            }
            zstd::bulk::decompress(&raw[4..], size).map_err(|e| bad(format!("zstd: {e}")))
        }
        c => Err(bad(format!("unknown compression code {c}"))),
    }
}

impl ComponentReader {
    /// Open and validate a component file: footer, index, bloom and meta blocks.
    pub fn open(path: &Path, cache: Arc<BlockCache>) -> Result<ComponentReader> {
        Self::from_source(Box::new(LocalFile::open(path)?), cache)
    }

    /// Open and validate the component file that `src` reads.
    pub fn from_source(
        src: Box<dyn ComponentSource>,
        cache: Arc<BlockCache>,
    ) -> Result<ComponentReader> {
        let path = &src.path().to_path_buf();
        let size = src.len();
        if size < FOOTER_LEN as u64 {
            return Err(Error::corrupt(
                path,
                "file is shorter than a footer (incomplete write?)",
            ));
        }
        let footer = src.read_at(size - FOOTER_LEN as u64, FOOTER_LEN)?;
        if &footer[..8] != MAGIC {
            return Err(Error::corrupt(
                path,
                "missing footer magic (incomplete write?)",
            ));
        }
        let crc = u32::from_le_bytes([footer[60], footer[61], footer[62], footer[63]]);
        if crc32c::crc32c(&footer[..60]) != crc {
            return Err(Error::corrupt(path, "footer checksum mismatch"));
        }
        let version = u32::from_le_bytes([footer[8], footer[9], footer[10], footer[11]]);
        if version != FORMAT_VERSION {
            return Err(Error::corrupt(
                path,
                format!("unsupported format version {version}"),
            ));
        }
        let mut ranges = [(0u64, 0u32); 4];
        for (i, r) in ranges.iter_mut().enumerate() {
            let p = 12 + i * 12;
            let mut o = [0u8; 8];
            o.copy_from_slice(&footer[p..p + 8]);
            let mut l = [0u8; 4];
            l.copy_from_slice(&footer[p + 8..p + 12]);
            *r = (u64::from_le_bytes(o), u32::from_le_bytes(l));
            if r.0.saturating_add(u64::from(r.1)) > size - FOOTER_LEN as u64 {
                return Err(Error::corrupt(path, "footer points outside the file"));
            }
        }
        let read_block = |(off, len): (u64, u32)| -> Result<Vec<u8>> {
            let raw = src.read_at(off, len as usize)?;
            decode_block(path, off, &raw)
        };
        let index_raw = read_block(ranges[0])?;
        let bloom_raw = read_block(ranges[1])?;
        let meta_raw = read_block(ranges[2])?;
        let aux = if ranges[3].1 == 0 {
            Vec::new()
        } else {
            read_block(ranges[3])?
        };
        let mut meta: ComponentMeta = serde_json::from_slice(&meta_raw)
            .map_err(|e| Error::corrupt(path, format!("meta block: {e}")))?;
        meta.file_bytes = size;
        let bloom = if bloom_raw.is_empty() {
            None
        } else {
            Some(Bloom::decode(&bloom_raw).map_err(|e| Error::corrupt(path, e))?)
        };
        let index =
            Block::new(index_raw).map_err(|e| Error::corrupt(path, format!("index: {e}")))?;
        let mut index_keys = Vec::new();
        let mut index_key_ends = Vec::new();
        let mut index_prefix = Vec::new();
        let mut block_offs = Vec::new();
        let mut block_lens = Vec::new();
        let mut e = RawEntry::default();
        let mut pos = 0;
        while pos < index.entries_end() {
            pos = index
                .decode_at(pos, &mut e)
                .map_err(|m| Error::corrupt(path, format!("index: {m}")))?;
            let v = index.value(&e);
            let mut p = 0;
            let off = varint::get(v, &mut p);
            let len = varint::get(v, &mut p);
            let (Some(off), Some(len)) = (off, len) else {
                return Err(Error::corrupt(path, "index entry is malformed"));
            };
            if off.saturating_add(len) > ranges[0].0 || len > u64::from(u32::MAX) {
                return Err(Error::corrupt(path, "index points outside the data area"));
            }
            index_keys.extend_from_slice(&e.key);
            index_key_ends.push(index_keys.len() as u32);
            index_prefix.push(prefix64(&e.key));
            block_offs.push(off);
            block_lens.push(len as u32);
        }
        if block_offs.len() as u64 != meta.blocks {
            return Err(Error::corrupt(
                path,
                format!(
                    "index lists {} blocks, meta says {}",
                    block_offs.len(),
                    meta.blocks
                ),
            ));
        }
        let verified = (0..block_offs.len().div_ceil(64))
            .map(|_| AtomicU64::new(0))
            .collect();
        Ok(ComponentReader {
            path: path.to_path_buf(),
            src,
            uid: NEXT_FILE_UID.fetch_add(1, Ordering::Relaxed),
            index_keys,
            index_key_ends,
            index_prefix,
            block_offs,
            block_lens,
            verified,
            bloom,
            meta,
            cache,
            obsolete: AtomicBool::new(false),
            aux,
            attached: std::sync::OnceLock::new(),
            image: std::sync::OnceLock::new(),
            companion: None,
        })
    }

    /// The companion component (for a deleted-key index component: its
    /// deleted-key B+-tree, whose keys are the deleted primary keys), if any.
    pub fn companion(&self) -> Option<&Arc<ComponentReader>> {
        self.companion.as_ref()
    }

    /// Tie `c` to this component: it is marked obsolete with it.
    pub fn set_companion(&mut self, c: Arc<ComponentReader>) {
        self.companion = Some(c);
    }

    /// Attach what the index kind decoded from this component's sections.
    /// Only the first attachment is kept.
    pub fn attach<T: std::any::Any + Send + Sync>(&self, t: T) {
        let _ = self.attached.set(Box::new(t));
    }

    /// Give the component its column image (only the first is kept).
    pub fn set_image(&self, image: Arc<crate::storage::column_image::ColumnImage>) {
        let _ = self.image.set(image);
    }

    /// The component's column image, if it has one.
    pub fn image(&self) -> Option<&Arc<crate::storage::column_image::ColumnImage>> {
        self.image.get()
    }

    /// The attachment, if one of type `T` was attached.
    pub fn attached<T: std::any::Any>(&self) -> Option<&T> {
        self.attached.get().and_then(|b| b.downcast_ref::<T>())
    }

    /// The index-kind specific block written with [`ComponentWriter::set_aux`]
    /// (empty if none).
    pub fn aux(&self) -> &[u8] {
        &self.aux
    }

    /// Decode every entry of block `i` (through the cache), calling `f` with
    /// (key, kind, seq, value) until it returns false.
    pub fn for_each_in_block(
        &self,
        i: usize,
        mut f: impl FnMut(&[u8], EntryKind, u64, &[u8]) -> Result<bool>,
    ) -> Result<()> {
        let owned;
        let b = match self.mapped_view(i)? {
            Some(v) => v,
            None => {
                owned = self.block(i, true)?;
                owned.view()
            }
        };
        let mut e = RawEntry::default();
        let mut pos = 0;
        while pos < b.entries_end() {
            pos = b
                .decode_at(pos, &mut e)
                .map_err(|m| Error::corrupt(&self.path, format!("block {i}: {m}")))?;
            let kind = EntryKind::from_u8(e.kind).ok_or_else(|| {
                Error::corrupt(&self.path, format!("unknown entry kind {}", e.kind))
            })?;
            if !f(&e.key, kind, e.seq, b.value(&e))? {
                break;
            }
        }
        Ok(())
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Whether the file is in a bucket (a remote tier) rather than on the
    /// local disk.
    pub fn is_remote(&self) -> bool {
        self.src.is_remote()
    }

    /// This open component among all open in the process (never reused):
    /// names its immutable contents for caches of what was read from it.
    pub fn uid(&self) -> u64 {
        self.uid
    }

    pub fn meta(&self) -> &ComponentMeta {
        &self.meta
    }

    /// Place the component at another level of a leveled policy (the file
    /// keeps the level it was written at; the MANIFEST records the move).
    pub fn set_level(&mut self, level: u32) {
        self.meta.level = level;
    }

    pub fn num_blocks(&self) -> usize {
        self.block_offs.len()
    }

    /// Advise the source that the entries within `(lo, hi)` are about to be
    /// read in key order (a bounded range scan): a remote component fetches
    /// their blocks in one GET (up to its readahead limit) instead of
    /// starting from one block. Nothing for an unbounded end (a full scan
    /// ramps up its readahead instead).
    pub fn will_read_range(&self, lo: Bound<&[u8]>, hi: Bound<&[u8]>) {
        let (Bound::Included(h) | Bound::Excluded(h)) = hi else {
            return;
        };
        if !self.is_remote() || self.block_offs.is_empty() {
            return;
        }
        let first = match lo {
            Bound::Unbounded => 0,
            Bound::Included(k) | Bound::Excluded(k) => self.find_block(k),
        };
        let last = self.find_block(h).min(self.block_offs.len() - 1);
        if first <= last {
            self.will_read_blocks(first..last + 1);
        }
    }

    /// Advise the source that data blocks `blocks` are about to be read in
    /// order (a remote component fetches them in one GET, up to its
    /// readahead limit, instead of ramping up to it).
    pub fn will_read_blocks(&self, blocks: std::ops::Range<usize>) {
        if blocks.is_empty() || blocks.end > self.block_offs.len() || self.src.mapped().is_some() {
            return;
        }
        let last = blocks.end - 1;
        let end = self.block_offs[last] + u64::from(self.block_lens[last]);
        self.src.will_read(self.block_offs[blocks.start], end);
    }

    /// Mark the file for deletion when the last reference goes away.
    pub fn mark_obsolete(&self) {
        self.obsolete.store(true, Ordering::Release);
        if let Some(d) = &self.companion {
            d.mark_obsolete();
        }
    }

    /// The last key of each data block within `[lo, hi)`, in order: where a
    /// scan of the range can be split into parts of whole blocks.
    pub fn block_ends_within(&self, lo: Bound<&[u8]>, hi: Bound<&[u8]>) -> Vec<&[u8]> {
        (0..self.num_blocks())
            .map(|i| self.index_key(i))
            .filter(|k| match lo {
                Bound::Included(l) => *k >= l,
                Bound::Excluded(l) => *k > l,
                Bound::Unbounded => true,
            })
            .filter(|k| match hi {
                Bound::Included(h) => *k <= h,
                Bound::Excluded(h) => *k < h,
                Bound::Unbounded => true,
            })
            .collect()
    }

    /// The last key of data block `i` (as the block index has it). The
    /// keys of block `i` are above block `i - 1`'s last key and at most
    /// its own.
    pub fn block_last_key(&self, i: usize) -> &[u8] {
        self.index_key(i)
    }

    fn index_key(&self, i: usize) -> &[u8] {
        let start = if i == 0 {
            0
        } else {
            self.index_key_ends[i - 1] as usize
        };
        &self.index_keys[start..self.index_key_ends[i] as usize]
    }

    /// About how many entries lie within `lo`..`hi`: the blocks the range
    /// spans (by the block index) times the entries per block.
    pub fn estimate_range(&self, lo: Bound<&[u8]>, hi: Bound<&[u8]>) -> u64 {
        let n = self.block_offs.len();
        if n == 0 {
            return 0;
        }
        let first = match lo {
            Bound::Unbounded => 0,
            Bound::Included(k) | Bound::Excluded(k) => self.find_block(k),
        };
        let last = match hi {
            Bound::Unbounded => n - 1,
            Bound::Included(k) | Bound::Excluded(k) => self.find_block(k).min(n - 1),
        };
        if first >= n || first > last {
            return 0;
        }
        ((last - first + 1) as u64 * self.meta.entries).div_ceil(n as u64)
    }

    /// First block whose last key is >= `key`.
    fn find_block(&self, key: &[u8]) -> usize {
        let kp = prefix64(key);
        let (mut lo, mut hi) = (0, self.block_offs.len());
        while lo < hi {
            let mid = (lo + hi) / 2;
            let p = self.index_prefix[mid];
            // Zero-padded big-endian prefixes order like the keys; equal
            // prefixes need the full comparison.
            let less = if p != kp {
                p < kp
            } else {
                self.index_key(mid) < key
            };
            if less {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo
    }

    /// Read (through the cache if `use_cache`) and decode block `i`.
    pub fn block(&self, i: usize, use_cache: bool) -> Result<Arc<Block>> {
        let off = self.block_offs[i];
        if use_cache && let Some(b) = self.cache.get(self.uid, off) {
            return Ok(b);
        }
        let len = self.block_lens[i] as usize;
        let data = match self.src.mapped() {
            Some(m) => decode_block(&self.path, off, self.mapped_bytes(m, i)?)?,
            None => {
                let raw = self.src.read_at(off, len)?;
                decode_block(&self.path, off, &raw)?
            }
        };
        let block = Arc::new(
            Block::new(data)
                .map_err(|e| Error::corrupt(&self.path, format!("block at offset {off}: {e}")))?,
        );
        if use_cache {
            self.cache.insert(self.uid, off, block.clone());
        }
        Ok(block)
    }

    /// The stored bytes of block `i` in the mapping (payload and trailer).
    fn mapped_bytes<'a>(&self, m: &'a [u8], i: usize) -> Result<&'a [u8]> {
        let off = self.block_offs[i];
        let len = self.block_lens[i] as usize;
        usize::try_from(off)
            .ok()
            .and_then(|o| m.get(o..o.checked_add(len)?))
            .ok_or_else(|| {
                Error::corrupt(
                    &self.path,
                    format!("block at offset {off} is outside the file"),
                )
            })
    }

    /// Block `i` read in place from the mapped file, if the file is mapped
    /// and the block is stored uncompressed: no copy, no allocation and no
    /// block-cache traffic (the OS page cache is the cache, as in an
    /// mmap-based B-tree). The checksum is verified on the first such read
    /// of each block after open (a bit per block), so a corrupt block is
    /// still reported, never trusted. `None`: use [`Self::block`].
    pub fn mapped_view(&self, i: usize) -> Result<Option<BlockView<'_>>> {
        let Some(m) = self.src.mapped() else {
            return Ok(None);
        };
        let off = self.block_offs[i];
        let raw = self.mapped_bytes(m, i)?;
        let n = raw.len();
        if n < TRAILER_LEN || raw[n - 5] != Compression::None.code() {
            return Ok(None);
        }
        let (word, bit) = (i / 64, 1u64 << (i % 64));
        if self.verified[word].load(Ordering::Relaxed) & bit == 0 {
            verify_checksum(&self.path, off, raw)?;
            self.verified[word].fetch_or(bit, Ordering::Relaxed);
        }
        self.cache.count_in_place();
        let view = BlockView::new(&raw[..n - TRAILER_LEN])
            .map_err(|e| Error::corrupt(&self.path, format!("block at offset {off}: {e}")))?;
        Ok(Some(view))
    }

    /// Whether the bloom filter admits `hash` (always true without a filter).
    pub fn bloom_may_contain(&self, hash: u64) -> bool {
        self.bloom.as_ref().is_none_or(|b| b.may_contain(hash))
    }

    /// Point lookup. `hash` is [`key_hash`] of `key` (computed once per lookup).
    pub fn probe(&self, key: &[u8], hash: u64) -> Result<Probe> {
        let mut found = None;
        let bloom = self.probe_inner(key, hash, &mut |e| {
            found = Some(Entry {
                seq: e.seq,
                kind: e.kind,
                value: e.value.to_vec(),
            });
            Ok(())
        })?;
        Ok(match (found, bloom) {
            (Some(e), _) => Probe::Found(e),
            (None, false) => Probe::BloomNegative,
            (None, true) => Probe::Absent,
        })
    }

    /// [`ComponentReader::probe`] that hands a found entry to `f` in place
    /// (borrowed from the cached or mapped block, not copied); returns
    /// whether one was found.
    pub fn probe_with(
        &self,
        key: &[u8],
        hash: u64,
        f: &mut dyn FnMut(EntryRef<'_>) -> Result<()>,
    ) -> Result<bool> {
        let mut found = false;
        self.probe_inner(key, hash, &mut |e| {
            found = true;
            f(e)
        })?;
        Ok(found)
    }

    /// The lookup of `probe` and `probe_with`: `f` gets the entry if there
    /// is one; returns false when the bloom filter excluded the key.
    fn probe_inner(
        &self,
        key: &[u8],
        hash: u64,
        f: &mut dyn FnMut(EntryRef<'_>) -> Result<()>,
    ) -> Result<bool> {
        if self.meta.entries == 0
            || key < self.meta.min_key.as_slice()
            || key > self.meta.max_key.as_slice()
        {
            return Ok(true);
        }
        if !self.bloom_may_contain(hash) {
            return Ok(false);
        }
        let i = self.find_block(key);
        if i >= self.block_offs.len() {
            return Ok(true);
        }
        let corrupt = |e| Error::corrupt(&self.path, e);
        let block;
        let found = match self.mapped_view(i)? {
            Some(v) => v.get_ref(key).map_err(corrupt)?,
            None => {
                block = self.block(i, true)?;
                block.view().get_ref(key).map_err(corrupt)?
            }
        };
        if let Some(e) = found {
            f(e)?;
        }
        Ok(true)
    }
}

mod cursor;
#[cfg(test)]
mod tests;

pub use cursor::{ComponentIter, ComponentRevIter};
