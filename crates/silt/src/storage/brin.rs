//! Block range indexes over chunks (Fusion, seed 004 §6.1): per indexed
//! field, one `(min, max, chunk)` row per chunk of a component, where a
//! chunk is a run of consecutive data blocks holding about `chunk_bytes` of
//! entries (the paper's 4 MB and 16 MB table chunks). A range or equality
//! query asks which chunks' `[min, max]` overlap its range, and reads only
//! their blocks. Rows are built while a flush, merge or rewrite writes the
//! component and stored in its aux block (`storage::block_filters`, format
//! in `docs/format/component.md`), so the index is as immutable and as
//! atomic as the component: no state can name a chunk that is gone.
//!
//! The paper compares two implementations, and both are here:
//!
//! - [`BrinForm::KeyValue`]: a min-keyed and a max-keyed copy of the rows
//!   (the paper's two HBase tables; here two sorted orders of the chunk
//!   table, each binary-searched like a B+-tree's leaf level). A point
//!   query `a` scans `min <= a` and keeps `max >= a`; a range query is the
//!   union of three cases (min in the range; max in the range; min below
//!   and max above it), deduplicated, as the paper's union needs (errata).
//! - [`BrinForm::IntervalTree`]: an augmented balanced binary search tree
//!   of the intervals (keyed by min, each node knowing the largest max
//!   below it), serialized as one blob: implicit in min order, so only the
//!   per-node largest max is stored.
//!
//! Values are the order-preserving key encoding of one value, so bytes
//! compare in the field's order (strings in code-point order, numbers
//! numerically); NULL and missing values contribute nothing and so never
//! match a range (as SQL's comparisons).
//!
//! Section layout (varints are LEB128; chunk numbers are positions in the
//! chunk table, which is in block order):
//!
//! ```text
//! form(u8: 1 key-value, 2 interval tree) varint(chunk_bytes) varint(n_chunks)
//! per chunk: varint(min_len) min varint(max_len) max varint(first_block) varint(n_blocks)
//! form 1: n x varint(chunk), by (min, chunk)       the min-keyed copy
//!         n x varint(chunk), by (max, chunk)       the max-keyed copy
//! form 2: n x varint(chunk), by (min, chunk)       the tree's nodes, in order
//!         n x varint(chunk)                        per node: the chunk holding
//!                                                  the largest max of its subtree
//! ```

use crate::storage::varint;
use serde::{Deserialize, Serialize};
use std::cmp::Ordering;
use std::ops::{Bound, Range};

/// Which implementation of the block range index a component carries.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BrinForm {
    /// A min-keyed and a max-keyed copy of the rows (the key-value form).
    KeyValue,
    /// An augmented interval tree serialized as one blob (the default:
    /// the paper's faster one to query).
    #[default]
    IntervalTree,
}

impl BrinForm {
    /// Parse a user's name for a form.
    pub fn parse(s: &str) -> Option<BrinForm> {
        match s.to_ascii_lowercase().replace(['-', ' '], "_").as_str() {
            "kv" | "key_value" | "keyvalue" => Some(BrinForm::KeyValue),
            "interval" | "interval_tree" | "intervaltree" | "tree" => Some(BrinForm::IntervalTree),
            _ => None,
        }
    }

    /// The name `parse` reads back.
    pub fn name(self) -> &'static str {
        match self {
            BrinForm::KeyValue => "key_value",
            BrinForm::IntervalTree => "interval_tree",
        }
    }

    fn tag(self) -> u8 {
        match self {
            BrinForm::KeyValue => 1,
            BrinForm::IntervalTree => 2,
        }
    }
}

/// Smallest chunk size accepted (one small block).
pub const MIN_CHUNK_BYTES: u64 = 4 << 10;
/// Largest chunk size accepted.
pub const MAX_CHUNK_BYTES: u64 = 1 << 30;

/// One row while building: a chunk's value range and blocks.
#[derive(Clone, Debug, PartialEq)]
pub struct ChunkRow {
    pub min: Vec<u8>,
    pub max: Vec<u8>,
    pub blocks: Range<u32>,
}

/// Cuts a component's blocks into chunks of about `chunk_bytes` and keeps
/// each chunk's value range.
#[derive(Debug)]
pub struct ChunkBuilder {
    chunk_bytes: u64,
    block: u32,
    first: u32,
    bytes: u64,
    min: Option<Vec<u8>>,
    max: Option<Vec<u8>>,
    rows: Vec<ChunkRow>,
}

impl ChunkBuilder {
    pub fn new(chunk_bytes: u64) -> ChunkBuilder {
        ChunkBuilder {
            chunk_bytes: chunk_bytes.max(1),
            block: 0,
            first: 0,
            bytes: 0,
            min: None,
            max: None,
            rows: Vec::new(),
        }
    }

    /// A data block ended: `bytes` of entries, the field's values within
    /// `[min, max]` (`None`: no value in the block).
    pub fn block(&mut self, bytes: u64, range: Option<(&[u8], &[u8])>) {
        if let Some((lo, hi)) = range {
            if self.min.as_deref().is_none_or(|m| lo < m) {
                self.min = Some(lo.to_vec());
            }
            if self.max.as_deref().is_none_or(|m| hi > m) {
                self.max = Some(hi.to_vec());
            }
        }
        self.block += 1;
        self.bytes = self.bytes.saturating_add(bytes);
        if self.bytes >= self.chunk_bytes {
            self.close();
        }
    }

    fn close(&mut self) {
        if let (Some(min), Some(max)) = (self.min.take(), self.max.take()) {
            self.rows.push(ChunkRow {
                min,
                max,
                blocks: self.first..self.block,
            });
        }
        self.first = self.block;
        self.bytes = 0;
    }

    /// The chunk size it cuts at.
    pub fn chunk_bytes(&self) -> u64 {
        self.chunk_bytes
    }

    /// The rows, in block order (chunks without a value are left out:
    /// nothing in them can match).
    pub fn finish(mut self) -> Vec<ChunkRow> {
        if self.block > self.first {
            self.close();
        }
        self.rows
    }
}

/// `b` with its length before it.
pub(crate) fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    varint::put(out, b.len() as u64);
    out.extend_from_slice(b);
}

/// The chunk numbers of `rows` sorted by `key` (ties by chunk number).
fn order_by(rows: &[ChunkRow], key: impl Fn(&ChunkRow) -> &[u8]) -> Vec<u32> {
    let mut order: Vec<u32> = (0..rows.len() as u32).collect();
    order.sort_by(|&a, &b| {
        key(&rows[a as usize])
            .cmp(key(&rows[b as usize]))
            .then(a.cmp(&b))
    });
    order
}

/// Serialize `rows` (block order, cut at `chunk_bytes`) in `form`.
pub fn encode(form: BrinForm, chunk_bytes: u64, rows: &[ChunkRow], out: &mut Vec<u8>) {
    out.push(form.tag());
    varint::put(out, chunk_bytes);
    varint::put(out, rows.len() as u64);
    for r in rows {
        put_bytes(out, &r.min);
        put_bytes(out, &r.max);
        varint::put(out, u64::from(r.blocks.start));
        varint::put(out, u64::from(r.blocks.end - r.blocks.start));
    }
    let by_min = order_by(rows, |r| &r.min);
    let second = match form {
        BrinForm::KeyValue => order_by(rows, |r| &r.max),
        BrinForm::IntervalTree => subtree_max(&by_min, |c| &rows[c as usize].max),
    };
    for c in by_min.iter().chain(&second) {
        varint::put(out, u64::from(*c));
    }
}

/// Per node of the implicit tree over `nodes` (node of `[l, r)` is the
/// middle position), the chunk whose max is the largest in its subtree.
fn subtree_max<'a>(nodes: &[u32], max: impl Fn(u32) -> &'a [u8] + Copy) -> Vec<u32> {
    fn fill<'a>(
        nodes: &[u32],
        max: impl Fn(u32) -> &'a [u8] + Copy,
        l: usize,
        r: usize,
        out: &mut [u32],
    ) -> Option<u32> {
        if l >= r {
            return None;
        }
        let m = l + (r - l) / 2;
        let mut best = nodes[m];
        for side in [fill(nodes, max, l, m, out), fill(nodes, max, m + 1, r, out)]
            .into_iter()
            .flatten()
        {
            if max(side) > max(best) {
                best = side;
            }
        }
        out[m] = best;
        Some(best)
    }
    let mut out = vec![0; nodes.len()];
    fill(nodes, max, 0, nodes.len(), &mut out);
    out
}

/// A slice of an encoded block (this section, or the aux block holding
/// it): (offset, length).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Span {
    pub(crate) off: u32,
    pub(crate) len: u32,
}

impl Span {
    pub(crate) fn get<'a>(&self, buf: &'a [u8]) -> &'a [u8] {
        buf.get(self.off as usize..self.off as usize + self.len as usize)
            .unwrap_or_default()
    }
}

#[derive(Clone, Copy, Debug)]
struct Row {
    min: Span,
    max: Span,
    first: u32,
    n: u32,
}

/// The decoded view of a chunk index section (offsets into it; the caller
/// keeps the bytes).
#[derive(Debug)]
pub struct ChunkIndex {
    form: BrinForm,
    chunk_bytes: u64,
    rows: Vec<Row>,
    /// Chunk numbers by min (both forms).
    by_min: Vec<u32>,
    /// Key-value: chunk numbers by max. Interval tree: per node, the chunk
    /// with its subtree's largest max.
    second: Vec<u32>,
}

fn read_var(buf: &[u8], pos: &mut usize) -> Result<u64, String> {
    varint::get(buf, pos).ok_or_else(|| format!("chunk index: bad varint at byte {pos}"))
}

/// Whether no value lies in `(lo, hi)`.
fn empty_range(lo: Bound<&[u8]>, hi: Bound<&[u8]>) -> bool {
    match (lo, hi) {
        (Bound::Included(l), Bound::Included(h)) => l > h,
        (Bound::Included(l) | Bound::Excluded(l), Bound::Included(h) | Bound::Excluded(h)) => {
            l >= h
        }
        _ => false,
    }
}

fn below_lo(v: &[u8], lo: Bound<&[u8]>) -> bool {
    match lo {
        Bound::Included(l) => v < l,
        Bound::Excluded(l) => v <= l,
        Bound::Unbounded => false,
    }
}

fn above_hi(v: &[u8], hi: Bound<&[u8]>) -> bool {
    match hi {
        Bound::Included(h) => v > h,
        Bound::Excluded(h) => v >= h,
        Bound::Unbounded => false,
    }
}

impl ChunkIndex {
    /// Decode and validate a section written by [`encode`] for a component
    /// of `blocks` data blocks.
    pub fn decode(buf: &[u8], blocks: usize) -> Result<ChunkIndex, String> {
        let mut pos = 0usize;
        let form = match buf.first() {
            Some(1) => BrinForm::KeyValue,
            Some(2) => BrinForm::IntervalTree,
            Some(t) => return Err(format!("chunk index: unknown form {t}")),
            None => return Err("chunk index: empty".into()),
        };
        pos += 1;
        let chunk_bytes = read_var(buf, &mut pos)?;
        let n = read_var(buf, &mut pos)?;
        if n > blocks as u64 {
            return Err(format!(
                "chunk index: {n} chunks for a component of {blocks} blocks"
            ));
        }
        let n = n as usize;
        let span = |pos: &mut usize| -> Result<Span, String> {
            let len = read_var(buf, pos)?;
            let end = (*pos as u64).saturating_add(len);
            if end > buf.len() as u64 || end > u64::from(u32::MAX) {
                return Err(format!(
                    "chunk index: a {len}-byte value at byte {pos} runs past the section"
                ));
            }
            let s = Span {
                off: *pos as u32,
                len: len as u32,
            };
            *pos = end as usize;
            Ok(s)
        };
        let mut rows = Vec::with_capacity(n);
        let mut next_block = 0u64;
        for i in 0..n {
            let min = span(&mut pos)?;
            let max = span(&mut pos)?;
            let first = read_var(buf, &mut pos)?;
            let nb = read_var(buf, &mut pos)?;
            let end = first.saturating_add(nb);
            if first < next_block || nb == 0 || end > blocks as u64 {
                return Err(format!(
                    "chunk index: chunk {i} covers blocks {first}..{end}, \
                     out of order or outside the component's {blocks}"
                ));
            }
            if max.get(buf) < min.get(buf) {
                return Err(format!("chunk index: chunk {i} has max < min"));
            }
            next_block = end;
            rows.push(Row {
                min,
                max,
                first: first as u32,
                n: nb as u32,
            });
        }
        let perm = |pos: &mut usize| -> Result<Vec<u32>, String> {
            let mut seen = vec![false; n];
            let mut out = Vec::with_capacity(n);
            for _ in 0..n {
                let c = read_var(buf, pos)?;
                if c >= n as u64 || std::mem::replace(&mut seen[c as usize], true) {
                    return Err(format!(
                        "chunk index: chunk number {c} repeated or out of range"
                    ));
                }
                out.push(c as u32);
            }
            Ok(out)
        };
        let by_min = perm(&mut pos)?;
        let mut ix = ChunkIndex {
            form,
            chunk_bytes,
            rows,
            by_min,
            second: Vec::new(),
        };
        let key = |ix: &ChunkIndex, c: u32, max: bool| {
            let r = ix.rows[c as usize];
            if max { r.max.get(buf) } else { r.min.get(buf) }
        };
        let sorted = |ix: &ChunkIndex, order: &[u32], max: bool| {
            order.windows(2).all(|w| {
                key(ix, w[0], max)
                    .cmp(key(ix, w[1], max))
                    .then(w[0].cmp(&w[1]))
                    == Ordering::Less
            })
        };
        if !sorted(&ix, &ix.by_min, false) {
            return Err("chunk index: the min-keyed order is not sorted".into());
        }
        match form {
            BrinForm::KeyValue => {
                let by_max = perm(&mut pos)?;
                if !sorted(&ix, &by_max, true) {
                    return Err("chunk index: the max-keyed copy is not sorted".into());
                }
                ix.second = by_max;
            }
            BrinForm::IntervalTree => {
                let mut sm = Vec::with_capacity(n);
                for _ in 0..n {
                    let c = read_var(buf, &mut pos)?;
                    if c >= n as u64 {
                        return Err(format!("chunk index: chunk number {c} out of range"));
                    }
                    sm.push(c as u32);
                }
                let want = subtree_max(&ix.by_min, |c| key(&ix, c, true));
                // Ties may name different chunks; the values must agree.
                if sm
                    .iter()
                    .zip(&want)
                    .any(|(&a, &b)| key(&ix, a, true) != key(&ix, b, true))
                {
                    return Err("chunk index: the interval tree's subtree maxima are wrong".into());
                }
                ix.second = sm;
            }
        }
        if pos != buf.len() {
            return Err("chunk index: trailing bytes".into());
        }
        Ok(ix)
    }

    /// The implementation this component carries.
    pub fn form(&self) -> BrinForm {
        self.form
    }

    /// The chunk size it was cut at.
    pub fn chunk_bytes(&self) -> u64 {
        self.chunk_bytes
    }

    /// Number of chunks (holding a value).
    pub fn len(&self) -> usize {
        self.rows.len()
    }

    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// The data blocks of chunk `c`.
    pub fn blocks(&self, c: usize) -> Range<usize> {
        let r = self.rows[c];
        r.first as usize..(r.first + r.n) as usize
    }

    /// The chunks whose `[min, max]` overlaps `(lo, hi)`, in block order,
    /// by this component's form.
    pub fn overlapping(&self, buf: &[u8], lo: Bound<&[u8]>, hi: Bound<&[u8]>) -> Vec<usize> {
        let mut hit = vec![false; self.rows.len()];
        if empty_range(lo, hi) {
            // The spanning case would match a range that holds nothing.
            return Vec::new();
        }
        match self.form {
            BrinForm::KeyValue => self.kv_query(buf, lo, hi, &mut hit),
            BrinForm::IntervalTree => self.tree_query(buf, 0, self.by_min.len(), lo, hi, &mut hit),
        }
        hit.iter()
            .enumerate()
            .filter_map(|(c, h)| h.then_some(c))
            .collect()
    }

    fn min<'a>(&self, buf: &'a [u8], c: u32) -> &'a [u8] {
        self.rows[c as usize].min.get(buf)
    }

    fn max<'a>(&self, buf: &'a [u8], c: u32) -> &'a [u8] {
        self.rows[c as usize].max.get(buf)
    }

    fn kv_query(&self, buf: &[u8], lo: Bound<&[u8]>, hi: Bound<&[u8]>, hit: &mut [bool]) {
        let by_max = &self.second;
        // The first position of `order` whose key is not below `lo`.
        let start = |order: &[u32], max: bool| {
            order.partition_point(|&c| {
                let k = if max {
                    self.max(buf, c)
                } else {
                    self.min(buf, c)
                };
                below_lo(k, lo)
            })
        };
        if let (Bound::Included(a), Bound::Included(b)) = (lo, hi)
            && a == b
        {
            // Point(a): scan min <= a, keep max >= a.
            let end = self.by_min.partition_point(|&c| self.min(buf, c) <= a);
            for &c in &self.by_min[..end] {
                if self.max(buf, c) >= a {
                    hit[c as usize] = true;
                }
            }
            return;
        }
        // Case 2: min within the range (a scan of the min-keyed copy).
        let s = start(&self.by_min, false);
        for &c in &self.by_min[s..] {
            if above_hi(self.min(buf, c), hi) {
                break;
            }
            hit[c as usize] = true;
        }
        // Case 3: max within the range (a scan of the max-keyed copy).
        for &c in &by_max[start(by_max, true)..] {
            if above_hi(self.max(buf, c), hi) {
                break;
            }
            hit[c as usize] = true;
        }
        // Case 1: min below the range and max above it (the chunk spans
        // the range): the min-keyed copy's prefix below `lo`, filtered.
        for &c in &self.by_min[..s] {
            if above_hi(self.max(buf, c), hi) {
                hit[c as usize] = true;
            }
        }
    }

    fn tree_query(
        &self,
        buf: &[u8],
        l: usize,
        r: usize,
        lo: Bound<&[u8]>,
        hi: Bound<&[u8]>,
        hit: &mut [bool],
    ) {
        if l >= r {
            return;
        }
        let m = l + (r - l) / 2;
        // Nothing below this node reaches the range.
        if below_lo(self.max(buf, self.second[m]), lo) {
            return;
        }
        self.tree_query(buf, l, m, lo, hi, hit);
        let c = self.by_min[m];
        if above_hi(self.min(buf, c), hi) {
            // Every chunk to the right starts later still.
            return;
        }
        if !below_lo(self.max(buf, c), lo) {
            hit[c as usize] = true;
        }
        self.tree_query(buf, m + 1, r, lo, hi, hit);
    }

    /// The same answer by reading every row (the reference the forms are
    /// tested against).
    pub fn overlapping_by_scan(
        &self,
        buf: &[u8],
        lo: Bound<&[u8]>,
        hi: Bound<&[u8]>,
    ) -> Vec<usize> {
        if empty_range(lo, hi) {
            return Vec::new();
        }
        (0..self.rows.len())
            .filter(|&c| {
                let (a, b) = (self.min(buf, c as u32), self.max(buf, c as u32));
                !below_lo(b, lo) && !above_hi(a, hi)
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn rows_of(ivs: &[(u8, u8)]) -> Vec<ChunkRow> {
        ivs.iter()
            .enumerate()
            .map(|(i, &(a, b))| ChunkRow {
                min: vec![a.min(b)],
                max: vec![a.max(b)],
                blocks: (i as u32 * 2)..(i as u32 * 2 + 2),
            })
            .collect()
    }

    fn bound(kind: u8, v: u8) -> Bound<Vec<u8>> {
        match kind % 3 {
            0 => Bound::Included(vec![v]),
            1 => Bound::Excluded(vec![v]),
            _ => Bound::Unbounded,
        }
    }

    /// The paper's Table 6.1 example: (1-23, 24-48, 36-100) on `id`;
    /// id = 5 reads chunk 1 only, 25 <= id <= 70 reads chunks 2 and 3.
    #[test]
    fn table_6_1() {
        let rows = rows_of(&[(1, 23), (24, 48), (36, 100)]);
        for form in [BrinForm::KeyValue, BrinForm::IntervalTree] {
            let mut buf = Vec::new();
            encode(form, 64, &rows, &mut buf);
            let ix = ChunkIndex::decode(&buf, 6).unwrap();
            assert_eq!(
                ix.overlapping(&buf, Bound::Included(&[5]), Bound::Included(&[5])),
                vec![0]
            );
            assert_eq!(
                ix.overlapping(&buf, Bound::Included(&[25]), Bound::Included(&[70])),
                vec![1, 2]
            );
            // Case 1 alone: a range inside one chunk.
            assert_eq!(
                ix.overlapping(&buf, Bound::Included(&[50]), Bound::Included(&[60])),
                vec![2]
            );
            assert_eq!(ix.blocks(2), 4..6);
        }
    }

    #[test]
    fn builder_cuts_chunks_by_bytes_and_skips_empty_ones() {
        let mut b = ChunkBuilder::new(100);
        b.block(60, Some((b"c", b"d")));
        b.block(60, Some((b"a", b"b"))); // chunk 0: blocks 0..2, a..d
        b.block(150, None); // chunk of block 2: no value, left out
        b.block(10, Some((b"x", b"x")));
        let rows = b.finish(); // last chunk: block 3 alone
        assert_eq!(
            rows,
            vec![
                ChunkRow {
                    min: b"a".to_vec(),
                    max: b"d".to_vec(),
                    blocks: 0..2
                },
                ChunkRow {
                    min: b"x".to_vec(),
                    max: b"x".to_vec(),
                    blocks: 3..4
                }
            ]
        );
    }

    #[test]
    fn corrupt_sections_are_refused() {
        let rows = rows_of(&[(1, 23), (24, 48), (36, 100), (7, 9)]);
        for form in [BrinForm::KeyValue, BrinForm::IntervalTree] {
            let mut buf = Vec::new();
            encode(form, 64, &rows, &mut buf);
            assert!(ChunkIndex::decode(&buf, 8).is_ok());
            // Too few blocks for the chunks.
            assert!(ChunkIndex::decode(&buf, 7).is_err());
            // Truncated, extended, or a wrong form byte.
            assert!(ChunkIndex::decode(&buf[..buf.len() - 1], 8).is_err());
            let mut long = buf.clone();
            long.push(0);
            assert!(ChunkIndex::decode(&long, 8).is_err());
            let mut bad = buf.clone();
            bad[0] = 9;
            assert!(ChunkIndex::decode(&bad, 8).is_err());
            // The orders swapped: no longer sorted.
            let n = buf.len();
            let mut swapped = buf.clone();
            swapped.swap(n - 8, n - 7);
            assert!(ChunkIndex::decode(&swapped, 8).is_err(), "{form:?}");
        }
    }

    proptest! {
        /// Both forms answer every point and range query as a scan of all
        /// rows does (the three-case union deduplicated; the tree's pruning
        /// loses nothing), with overlapping and nested intervals.
        #[test]
        fn forms_agree_with_a_scan(
            ivs in prop::collection::vec((0u8..60, 0u8..60), 0..40),
            queries in prop::collection::vec((0u8..3, 0u8..64, 0u8..3, 0u8..64), 1..30),
        ) {
            let rows = rows_of(&ivs);
            let mut kv = Vec::new();
            encode(BrinForm::KeyValue, 64, &rows, &mut kv);
            let mut tree = Vec::new();
            encode(BrinForm::IntervalTree, 64, &rows, &mut tree);
            let blocks = rows.len() * 2;
            let a = ChunkIndex::decode(&kv, blocks).unwrap();
            let b = ChunkIndex::decode(&tree, blocks).unwrap();
            for (lk, lv, hk, hv) in queries {
                let (lo, hi) = (bound(lk, lv), bound(hk, hv));
                let (lo, hi) = (lo.as_ref().map(Vec::as_slice), hi.as_ref().map(Vec::as_slice));
                let want: Vec<usize> = ivs
                    .iter()
                    .enumerate()
                    .filter(|(_, (x, y))| {
                        // Some byte string in the interval lies in the
                        // range (strings lie between any two distinct
                        // values, so only an empty range excludes them).
                        let (mn, mx) = ([*x.min(y)], [*x.max(y)]);
                        !empty_range(lo, hi) && !below_lo(&mx, lo) && !above_hi(&mn, hi)
                    })
                    .map(|(i, _)| i)
                    .collect();
                prop_assert_eq!(a.overlapping(&kv, lo, hi), want.clone());
                prop_assert_eq!(b.overlapping(&tree, lo, hi), want.clone());
                prop_assert_eq!(a.overlapping_by_scan(&kv, lo, hi), want);
                // A point query (the paper's single-scan form).
                let p = [lv];
                let pw: Vec<usize> = ivs
                    .iter()
                    .enumerate()
                    .filter(|(_, (x, y))| *x.min(y) <= lv && lv <= *x.max(y))
                    .map(|(i, _)| i)
                    .collect();
                prop_assert_eq!(
                    a.overlapping(&kv, Bound::Included(&p), Bound::Included(&p)),
                    pw.clone()
                );
                prop_assert_eq!(
                    b.overlapping(&tree, Bound::Included(&p), Bound::Included(&p)),
                    pw
                );
            }
        }
    }
}
