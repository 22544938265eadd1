//! Per-block attribute filters: the disk side of an *embedded* secondary
//! index (LevelDB++, seed 001 §3.3; format: `docs/format/component.md`).
//! For each indexed attribute, a primary
//! index component carries, per data block, a bloom filter of the
//! attribute values in the block and their min/max (a zone map), plus a
//! zone map of the whole component. They are built by a
//! [`BlockObserver`] while a flush, merge or rewrite writes the component,
//! stored in its aux block, and consulted in memory (a view over the aux
//! bytes, 24 bytes per block and attribute) by recency lookups: a block is
//! read only when its zone map overlaps the searched range and, for an
//! equality lookup, its bloom filter admits the value.
//!
//! Attribute values are the order-preserving key encoding of one value
//! (`value::encode_key`), so zone maps compare bytes and blooms hash those
//! bytes. Records whose attribute is missing, null or not a key type
//! (array, object, geometry) contribute nothing.
//!
//! Each block also records the largest sequence number of its live entries,
//! so that a top-k search can read a component's candidate blocks newest
//! first and stop inside it.
//!
//! A field may also carry a block range index over chunks of blocks
//! (`storage::brin`, a `brin` index with a chunk size), and then needs no
//! per-block entries of its own.
//!
//! Aux block layout (varints are LEB128):
//!
//! ```text
//! 'E' version=2 varint(n_blocks) varint(max_seq) per block varint(n_fields)
//! per field: varint(name_len) name
//!            varint(zmin_len) zmin varint(zmax_len) zmax     (0, 0: no values)
//!            varint(n)                                       (n_blocks, or 0: none)
//!            n x: varint(min_len) min varint(max_len) max
//!                 varint(bloom_len) bloom                    (0: no values)
//!            varint(chunks_len) chunks                       (0: none; storage::brin)
//! ```
//!
//! Version 1 (written before chunk indexes) lacks the last line and always
//! has per-block entries; it is still read.

use crate::storage::bloom::{Bloom, key_hash, may_contain_encoded};
use crate::storage::brin::{self, BrinForm, ChunkBuilder, ChunkIndex, Span, put_bytes};
use crate::storage::{EntryKind, varint};

use crate::value;
use std::ops::Bound;

/// Watches the entries of one component being written.
pub trait BlockObserver: Send {
    /// An entry was added to the current data block (in key order).
    fn entry(&mut self, key: &[u8], kind: EntryKind, seq: u64, value: &[u8]);
    /// The current data block is complete: every entry since the previous
    /// call (or the start) belongs to it.
    fn end_block(&mut self);
    /// The component is complete; entries since the last `end_block` form
    /// its last block. Returns the aux block (empty: none).
    fn finish(self: Box<Self>) -> Vec<u8>;
}

/// First byte of an aux block holding block filters.
pub const MAGIC: u8 = b'E';
const VERSION: u8 = 2;

/// Default bloom filter size per attribute value: 100 bits, the setting
/// seed 001 uses (Appendix B.1, Table B.1: lookups as fast as with 200 bits,
/// at half the space; 20 and 50 bits were 2.5x slower).
pub const DEFAULT_BITS_PER_KEY: f64 = 100.0;

/// The encoded attribute value of a stored record: `None` when the field is
/// missing, null or not a key type (or the record cannot be read).
pub fn attr_key(record: &[u8], field: &str) -> Option<Vec<u8>> {
    match value::decode_field(record, field) {
        Ok(Some(v)) if !v.is_null() => {
            let mut out = Vec::new();
            value::encode_key(std::slice::from_ref(&v), &mut out).ok()?;
            Some(out)
        }
        _ => None,
    }
}

/// Whether the encoded value `v` lies within `(lo, hi)`.
pub fn in_range(v: &[u8], lo: Bound<&[u8]>, hi: Bound<&[u8]>) -> bool {
    let above = match lo {
        Bound::Included(l) => v >= l,
        Bound::Excluded(l) => v > l,
        Bound::Unbounded => true,
    };
    let below = match hi {
        Bound::Included(h) => v <= h,
        Bound::Excluded(h) => v < h,
        Bound::Unbounded => true,
    };
    above && below
}

/// Whether `[min, max]` overlaps `(lo, hi)`.
fn overlaps(min: &[u8], max: &[u8], lo: Bound<&[u8]>, hi: Bound<&[u8]>) -> bool {
    let above = match lo {
        Bound::Included(l) => max >= l,
        Bound::Excluded(l) => max > l,
        Bound::Unbounded => true,
    };
    let below = match hi {
        Bound::Included(h) => min <= h,
        Bound::Excluded(h) => min < h,
        Bound::Unbounded => true,
    };
    above && below
}

/// Which attributes to build filters for.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FilterSpec {
    pub fields: Vec<FieldSpec>,
}

/// What one attribute's filters hold.
#[derive(Clone, Debug, PartialEq)]
pub struct FieldSpec {
    pub name: String,
    /// Bloom filter bits per value and block (0: zone maps only).
    pub bits_per_key: f64,
    /// Whether each block gets a zone map (and bloom filter) entry.
    pub per_block: bool,
    /// A block range index over chunks of about this many bytes of
    /// entries, in this form.
    pub chunks: Option<(u64, BrinForm)>,
}

impl FieldSpec {
    /// Per-block zone maps and blooms of `bits_per_key` (an embedded index).
    pub fn blocks(name: &str, bits_per_key: f64) -> FieldSpec {
        FieldSpec {
            name: name.to_owned(),
            bits_per_key,
            per_block: true,
            chunks: None,
        }
    }
}

struct FieldBuild {
    name: String,
    bits_per_key: f64,
    per_block: bool,
    chunks: Option<(BrinForm, ChunkBuilder)>,
    hashes: Vec<u64>,
    min: Option<Vec<u8>>,
    max: Option<Vec<u8>>,
    zmin: Option<Vec<u8>>,
    zmax: Option<Vec<u8>>,
    blocks: u64,
    out: Vec<u8>,
}

/// Builds the filters of one component (the [`BlockObserver`] of embedded
/// indexes).
pub struct FilterBuilder {
    fields: Vec<FieldBuild>,
    /// Entries seen since the last block boundary.
    pending: bool,
    /// Bytes of those entries (keys and values).
    block_bytes: u64,
    /// Largest sequence number of a live entry in the current block.
    block_seq: u64,
    /// The same for every finished block.
    seqs: Vec<u64>,
}

impl FilterBuilder {
    /// A builder for the attributes of `spec`.
    pub fn new(spec: &FilterSpec) -> FilterBuilder {
        FilterBuilder {
            fields: spec
                .fields
                .iter()
                .map(|f| FieldBuild {
                    name: f.name.clone(),
                    bits_per_key: if f.per_block { f.bits_per_key } else { 0.0 },
                    per_block: f.per_block || f.chunks.is_none(),
                    chunks: f
                        .chunks
                        .map(|(bytes, form)| (form, ChunkBuilder::new(bytes))),
                    hashes: Vec::new(),
                    min: None,
                    max: None,
                    zmin: None,
                    zmax: None,
                    blocks: 0,
                    out: Vec::new(),
                })
                .collect(),
            pending: false,
            block_bytes: 0,
            block_seq: 0,
            seqs: Vec::new(),
        }
    }
}

impl FieldBuild {
    fn add(&mut self, v: Vec<u8>) {
        if self.bits_per_key > 0.0 {
            self.hashes.push(key_hash(&v));
        }
        if self.min.as_ref().is_none_or(|m| v < *m) {
            self.min = Some(v.clone());
        }
        if self.max.as_ref().is_none_or(|m| v > *m) {
            self.max = Some(v);
        }
    }

    fn end_block(&mut self, bytes: u64) {
        self.blocks += 1;
        if let Some((_, c)) = &mut self.chunks {
            c.block(bytes, self.min.as_deref().zip(self.max.as_deref()));
        }
        match (self.min.take(), self.max.take()) {
            (Some(min), Some(max)) => {
                if self.per_block {
                    put_bytes(&mut self.out, &min);
                    put_bytes(&mut self.out, &max);
                    // No bits: zone maps only (a brin index); an empty bloom
                    // admits every value.
                    let mut bloom = Vec::new();
                    if self.bits_per_key > 0.0 {
                        Bloom::build(&self.hashes, self.bits_per_key).encode(&mut bloom);
                    }
                    put_bytes(&mut self.out, &bloom);
                }
                if self.zmin.as_ref().is_none_or(|z| min < *z) {
                    self.zmin = Some(min);
                }
                if self.zmax.as_ref().is_none_or(|z| max > *z) {
                    self.zmax = Some(max);
                }
            }
            _ if self.per_block => {
                varint::put(&mut self.out, 0);
                varint::put(&mut self.out, 0);
                varint::put(&mut self.out, 0);
            }
            _ => {}
        }
        self.hashes.clear();
    }
}

impl BlockObserver for FilterBuilder {
    fn entry(&mut self, key: &[u8], kind: EntryKind, seq: u64, value: &[u8]) {
        self.pending = true;
        self.block_bytes += (key.len() + value.len()) as u64;
        if kind != EntryKind::Put {
            return;
        }
        self.block_seq = self.block_seq.max(seq);
        for f in &mut self.fields {
            if let Some(v) = attr_key(value, &f.name) {
                f.add(v);
            }
        }
    }

    fn end_block(&mut self) {
        self.pending = false;
        self.seqs.push(std::mem::take(&mut self.block_seq));
        let bytes = std::mem::take(&mut self.block_bytes);
        for f in &mut self.fields {
            f.end_block(bytes);
        }
    }

    fn finish(mut self: Box<Self>) -> Vec<u8> {
        if self.pending {
            self.end_block();
        }
        let fields = std::mem::take(&mut self.fields);
        let mut out = vec![MAGIC, VERSION];
        varint::put(&mut out, self.seqs.len() as u64);
        for s in &self.seqs {
            varint::put(&mut out, *s);
        }
        varint::put(&mut out, fields.len() as u64);
        for mut f in fields {
            put_bytes(&mut out, f.name.as_bytes());
            put_bytes(&mut out, f.zmin.as_deref().unwrap_or_default());
            put_bytes(&mut out, f.zmax.as_deref().unwrap_or_default());
            varint::put(&mut out, if f.per_block { f.blocks } else { 0 });
            out.extend_from_slice(&f.out);
            let mut chunks = Vec::new();
            if let Some((form, c)) = f.chunks.take() {
                let bytes = c.chunk_bytes();
                brin::encode(form, bytes, &c.finish(), &mut chunks);
            }
            put_bytes(&mut out, &chunks);
        }
        out
    }
}

#[derive(Clone, Copy, Debug, Default)]
struct BlockEntry {
    min: Span,
    max: Span,
    bloom: Span,
}

/// The filters of one attribute in one component.
#[derive(Debug)]
pub struct FieldFilters {
    name: String,
    zmin: Span,
    zmax: Span,
    /// Empty when the field has a chunk index instead.
    blocks: Vec<BlockEntry>,
    chunks: Option<(Span, ChunkIndex)>,
}

/// The decoded view of a component's block filters (offsets into its aux
/// block, which the component keeps in memory).
#[derive(Debug, Default)]
pub struct BlockFilters {
    /// Largest live sequence number of each block.
    seqs: Vec<u64>,
    fields: Vec<FieldFilters>,
}

struct Cursor<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl Cursor<'_> {
    fn varint(&mut self) -> Result<u64, String> {
        varint::get(self.buf, &mut self.pos)
            .ok_or_else(|| format!("block filters: bad varint at byte {}", self.pos))
    }

    fn span(&mut self) -> Result<Span, String> {
        let len = self.varint()?;
        let end = (self.pos as u64).saturating_add(len);
        if end > self.buf.len() as u64 || end > u64::from(u32::MAX) {
            return Err(format!(
                "block filters: a {len}-byte field at byte {} runs past the block",
                self.pos
            ));
        }
        let s = Span {
            off: self.pos as u32,
            len: len as u32,
        };
        self.pos = end as usize;
        Ok(s)
    }
}

impl BlockFilters {
    /// Decode (validate) an aux block written by [`FilterBuilder`] for a
    /// component of `blocks` data blocks.
    pub fn decode(aux: &[u8], blocks: usize) -> Result<BlockFilters, String> {
        if aux.len() < 3 || aux[0] != MAGIC {
            return Err("the block filter block is missing or has the wrong type".into());
        }
        let version = aux[1];
        if version != 1 && version != VERSION {
            return Err(format!(
                "block filters: unsupported version {} (this build reads {VERSION})",
                aux[1]
            ));
        }
        let mut c = Cursor { buf: aux, pos: 2 };
        let nb = c.varint()?;
        if nb != blocks as u64 {
            return Err(format!(
                "block filters cover {nb} blocks, the component has {blocks}"
            ));
        }
        let mut seqs = Vec::with_capacity(blocks);
        for _ in 0..blocks {
            seqs.push(c.varint()?);
        }
        let n = c.varint()?;
        if n > 1024 {
            return Err(format!("block filters: implausible field count {n}"));
        }
        let mut fields = Vec::with_capacity(n as usize);
        for _ in 0..n {
            let name = c.span()?;
            let name = std::str::from_utf8(name.get(aux))
                .map_err(|_| "block filters: a field name is not UTF-8".to_owned())?
                .to_owned();
            let zmin = c.span()?;
            let zmax = c.span()?;
            let nb = c.varint()?;
            if nb != blocks as u64 && (version == 1 || nb != 0) {
                return Err(format!(
                    "block filters of `{name}` cover {nb} blocks, the component has {blocks}"
                ));
            }
            let mut bl = Vec::with_capacity(nb as usize);
            for _ in 0..nb {
                bl.push(BlockEntry {
                    min: c.span()?,
                    max: c.span()?,
                    bloom: c.span()?,
                });
            }
            let chunks = if version == 1 {
                None
            } else {
                let sp = c.span()?;
                if sp.len == 0 {
                    None
                } else {
                    let ix = ChunkIndex::decode(sp.get(aux), blocks)
                        .map_err(|e| format!("block filters of `{name}`: {e}"))?;
                    Some((sp, ix))
                }
            };
            if nb == 0 && chunks.is_none() && blocks > 0 {
                return Err(format!(
                    "block filters of `{name}` have neither block entries nor a chunk index"
                ));
            }
            fields.push(FieldFilters {
                name,
                zmin,
                zmax,
                blocks: bl,
                chunks,
            });
        }
        if c.pos != aux.len() {
            return Err("block filters: trailing bytes".into());
        }
        Ok(BlockFilters { seqs, fields })
    }

    /// The largest sequence number of a live entry of block `i` (0 if it
    /// has none; `u64::MAX`, i.e. unknown, past the last block).
    pub fn block_max_seq(&self, i: usize) -> u64 {
        self.seqs.get(i).copied().unwrap_or(u64::MAX)
    }

    /// The filters of `field`, if this component has them.
    pub fn field(&self, field: &str) -> Option<&FieldFilters> {
        self.fields.iter().find(|f| f.name == field)
    }

    /// Names of the attributes covered.
    pub fn fields(&self) -> impl Iterator<Item = &str> {
        self.fields.iter().map(|f| f.name.as_str())
    }
}

impl FieldFilters {
    /// The component's zone map (min, max encoded value); `None` when no
    /// record of the component has a value.
    pub fn zone<'a>(&self, aux: &'a [u8]) -> Option<(&'a [u8], &'a [u8])> {
        (self.zmin.len > 0).then(|| (self.zmin.get(aux), self.zmax.get(aux)))
    }

    /// Whether the component may hold a value within `(lo, hi)`.
    pub fn may_overlap(&self, aux: &[u8], lo: Bound<&[u8]>, hi: Bound<&[u8]>) -> bool {
        self.zone(aux).is_some_and(|(a, b)| overlaps(a, b, lo, hi))
    }

    /// Blocks that may hold a value within `(lo, hi)`, by zone map, and
    /// (for an equality lookup, `point` = the value's [`key_hash`]) by
    /// bloom filter, in block order. When the field has no per-block
    /// entries, its chunk index chooses (the blocks of every chunk that
    /// overlaps), and the result is (chunks chosen, all chunks).
    pub fn candidate_blocks(
        &self,
        aux: &[u8],
        lo: Bound<&[u8]>,
        hi: Bound<&[u8]>,
        point: Option<u64>,
        out: &mut Vec<usize>,
    ) -> Option<(usize, usize)> {
        if self.blocks.is_empty() {
            let (sp, ix) = self.chunks.as_ref()?;
            let hit = ix.overlapping(sp.get(aux), lo, hi);
            for &c in &hit {
                out.extend(ix.blocks(c));
            }
            return Some((hit.len(), ix.len()));
        }
        for (i, b) in self.blocks.iter().enumerate() {
            if b.min.len == 0 || !overlaps(b.min.get(aux), b.max.get(aux), lo, hi) {
                continue;
            }
            if let Some(h) = point
                && !may_contain_encoded(b.bloom.get(aux), h)
            {
                continue;
            }
            out.push(i);
        }
        None
    }

    /// Whether each block has a zone map entry (else the chunk index
    /// chooses blocks).
    pub fn has_block_entries(&self) -> bool {
        !self.blocks.is_empty()
    }

    /// The chunk index, if the field has one.
    pub fn chunk_index(&self) -> Option<&ChunkIndex> {
        self.chunks.as_ref().map(|(_, ix)| ix)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::value::Value;

    fn rec(user: i64) -> Vec<u8> {
        let v = Value::Object(vec![
            ("id".into(), Value::Int(user * 100)),
            ("user".into(), Value::Int(user)),
        ]);
        let mut out = Vec::new();
        value::encode_record(&v, &mut out).unwrap();
        out
    }

    fn enc(v: i64) -> Vec<u8> {
        let mut out = Vec::new();
        value::encode_key(&[Value::Int(v)], &mut out).unwrap();
        out
    }

    /// Blocks of users {0..9}, {10..19}, ..., one empty block (only
    /// antimatter) and a block of records without the field.
    fn build() -> (Vec<u8>, usize) {
        let spec = FilterSpec {
            fields: vec![
                FieldSpec::blocks("user", 20.0),
                FieldSpec::blocks("absent", 20.0),
            ],
        };
        let mut b: Box<dyn BlockObserver> = Box::new(FilterBuilder::new(&spec));
        let mut blocks = 0;
        for blk in 0..5 {
            for i in 0..10 {
                b.entry(
                    b"k",
                    EntryKind::Put,
                    (blk * 10 + i) as u64,
                    &rec(blk * 10 + i),
                );
            }
            b.end_block();
            blocks += 1;
        }
        b.entry(b"k", EntryKind::Delete, 1, b"");
        b.end_block();
        blocks += 1;
        // The trailing block is completed by finish.
        b.entry(b"k", EntryKind::Put, 1, &rec(1000));
        blocks += 1;
        (b.finish(), blocks)
    }

    #[test]
    fn zone_maps_and_blooms_prune_blocks() {
        let (aux, blocks) = build();
        let f = BlockFilters::decode(&aux, blocks).unwrap();
        assert_eq!(f.fields().collect::<Vec<_>>(), vec!["user", "absent"]);
        let seqs: Vec<u64> = (0..blocks).map(|i| f.block_max_seq(i)).collect();
        assert_eq!(seqs, vec![9, 19, 29, 39, 49, 0, 1]);
        let u = f.field("user").unwrap();
        assert!(u.has_block_entries());
        assert_eq!(
            u.zone(&aux),
            Some((enc(0).as_slice(), enc(1000).as_slice()))
        );
        let mut out = Vec::new();
        // Range 12..=31 overlaps blocks 1, 2, 3.
        let (lo, hi) = (enc(12), enc(31));
        u.candidate_blocks(
            &aux,
            Bound::Included(&lo),
            Bound::Included(&hi),
            None,
            &mut out,
        );
        assert_eq!(out, vec![1, 2, 3]);
        // Equality: every value is found in its block (no false negatives)...
        for v in 0..50 {
            out.clear();
            let e = enc(v);
            u.candidate_blocks(
                &aux,
                Bound::Included(&e),
                Bound::Included(&e),
                Some(key_hash(&e)),
                &mut out,
            );
            assert_eq!(out, vec![(v / 10) as usize], "value {v}");
        }
        // ...and a value inside a block's zone but not in it is (almost
        // always, at 20 bits per value) refused by the bloom filter.
        let mut refused = 0;
        for v in 0..50 {
            let e = enc(v * 1000 + 7);
            out.clear();
            let (lo, hi) = (enc(0), enc(49));
            u.candidate_blocks(
                &aux,
                Bound::Included(&lo),
                Bound::Included(&hi),
                Some(key_hash(&e)),
                &mut out,
            );
            refused += usize::from(out.is_empty());
        }
        assert!(refused >= 45, "bloom refused only {refused} of 50");
        assert!(!u.may_overlap(&aux, Bound::Excluded(&enc(1000)), Bound::Unbounded));
        assert!(u.may_overlap(&aux, Bound::Included(&enc(1000)), Bound::Unbounded));
        // A field no record has: no zone, no candidate block.
        let a = f.field("absent").unwrap();
        assert_eq!(a.zone(&aux), None);
        out.clear();
        a.candidate_blocks(&aux, Bound::Unbounded, Bound::Unbounded, None, &mut out);
        assert!(out.is_empty());
    }

    #[test]
    fn corrupt_filters_are_refused() {
        let (aux, blocks) = build();
        assert!(BlockFilters::decode(&aux, blocks + 1).is_err());
        assert!(BlockFilters::decode(&aux[..aux.len() - 3], blocks).is_err());
        let mut bad = aux.clone();
        bad[1] = 9;
        assert!(BlockFilters::decode(&bad, blocks).is_err());
        assert!(BlockFilters::decode(b"R", 0).is_err());
    }
}
