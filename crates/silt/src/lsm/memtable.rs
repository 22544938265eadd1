//! The in-memory component: an ordered map of byte keys behind a lock, with
//! values in a per-memtable arena.
//!
//! Why not a skip list: `crossbeam-skiplist` ingested 1 M random 8-byte keys at
//! 270 K/s here; a B-tree with inline key prefixes did 609 K/s (one cache miss
//! per skip-list level dominated). Why an arena: freeing a flushed memtable's
//! millions of small allocations on the flush thread contended with the ingest
//! thread on the allocator's locks; values now live in 1 MiB chunks and keys of
//! up to 16 bytes need no allocation at all.

use super::kind::{BoundsKind, decode_bounds_kind};
use crate::geo::Rect;
use crate::storage::{Entry, EntryKind, EntryRef};
use parking_lot::RwLock;
use rstar::primitives::{GeomWithData, Rectangle};
use rstar::{AABB, Envelope, RStarInsertionStrategy, RTree, RTreeNode, RTreeObject, RTreeParams};
use std::cmp::Ordering as CmpOrdering;
use std::collections::BTreeMap;
use std::collections::BTreeSet;
use std::collections::BinaryHeap;
use std::collections::VecDeque;
use std::collections::btree_map::Entry as MapEntry;
use std::ops::Bound;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

/// Derives the keys of an in-memory secondary structure kept with a
/// memtable. Keys are opaque to the memtable (sorted bytes).
pub trait MemSecondary: Send + Sync + std::fmt::Debug {
    /// Append the secondary keys of `(key, e)` (a live entry) to `out`.
    fn keys(&self, key: &[u8], e: EntryRef<'_>, out: &mut Vec<Vec<u8>>);
}

/// Facts an index kind keeps about one memtable's writes (one object per
/// memtable, made by `lsm::hooks::TreeHooks::mem_facts`): it sees every
/// entry written, before it is inserted, and readers ask it through
/// [`MemTable::facts`]. Undone writes are not unseen, so facts must be
/// bounds that stay true when entries disappear.
pub trait MemFacts: Send + Sync + std::fmt::Debug {
    fn observe(&self, key: &[u8], e: EntryRef<'_>);
    /// For the index kind to recover its own type.
    fn as_any(&self) -> &dyn std::any::Any;
}

/// A memtable key: the first 40 bytes inline as zero-padded big-endian
/// words (two `u128`s and a `u64`), the bytes past 40 (if any) on the heap,
/// and the length.
///
/// Order = byte order of the keys. Proof sketch: a smaller padded prefix means
/// a smaller key (the first difference is either a real byte or the end of the
/// shorter key, padded with 0). With equal prefixes, the keys agree on their
/// first 40 bytes (a key shorter than 40 is then a prefix of the other), so
/// comparing the tails (empty for short keys) and then the lengths decides.
///
/// Why 32: secondary keys are ⟨secondary key, primary key⟩, and a keyword
/// entry (token ‖ 9-byte integer key) is usually 17-30 bytes. With 16 inline
/// bytes the entries of one token differed only in the heap tail, so most
/// comparisons of a keyword insert chased a pointer (and every such key cost
/// an allocation). Measured with `examples/text_ingest` (20 K ~1 KB tweets,
/// keyword index, busy machine): the writer's CPU per tweet went from
/// 139-151 µs to 123-137 µs; the B-tree traversal itself (cache misses in a
/// map of about a million entries) is what remains.
///
/// Why 40 and not 32: the key is 64 bytes either way (`u128` aligns to 16,
/// so 32 inline bytes, the tail pointer and the length already padded to
/// 64), and 8 more bytes keep more keys free of a heap tail (no allocation
/// per insert, no pointer chased when a read walks them): a value-list
/// entry (list key ‖ time ‖ sequence number; DualDB's is 29 bytes) with a
/// string list key, a keyword entry with a long token. 48 inline bytes
/// made the key 80 bytes and the B-tree's nodes bigger, and was no faster.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct MemKey {
    /// Bytes 0-15, 16-31 and 32-39 (separate fields, not a tuple: a tuple
    /// of them pads to 48 bytes and the key to 80).
    p0: u128,
    p1: u128,
    p2: u64,
    tail: Option<Box<[u8]>>,
    len: u32,
}

/// Key bytes kept inline in a [`MemKey`].
const INLINE: usize = 40;

impl MemKey {
    fn new(key: &[u8]) -> MemKey {
        let mut p = [0u8; INLINE];
        let n = key.len().min(INLINE);
        p[..n].copy_from_slice(&key[..n]);
        let word = |b: &[u8]| {
            let mut w = [0u8; 16];
            w.copy_from_slice(b);
            u128::from_be_bytes(w)
        };
        let mut last = [0u8; 8];
        last.copy_from_slice(&p[32..]);
        MemKey {
            p0: word(&p[..16]),
            p1: word(&p[16..32]),
            p2: u64::from_be_bytes(last),
            tail: (key.len() > INLINE).then(|| key[INLINE..].into()),
            len: key.len() as u32,
        }
    }

    fn tail(&self) -> &[u8] {
        self.tail.as_deref().unwrap_or(&[])
    }

    /// Write the key's bytes into `out` (cleared first).
    fn write_to(&self, out: &mut Vec<u8>) {
        out.clear();
        let mut p = [0u8; INLINE];
        p[..16].copy_from_slice(&self.p0.to_be_bytes());
        p[16..32].copy_from_slice(&self.p1.to_be_bytes());
        p[32..].copy_from_slice(&self.p2.to_be_bytes());
        out.extend_from_slice(&p[..(self.len as usize).min(INLINE)]);
        out.extend_from_slice(self.tail());
    }
}

impl Ord for MemKey {
    fn cmp(&self, o: &Self) -> CmpOrdering {
        self.p0
            .cmp(&o.p0)
            .then_with(|| self.p1.cmp(&o.p1))
            .then_with(|| self.p2.cmp(&o.p2))
            .then_with(|| self.tail().cmp(o.tail()))
            .then(self.len.cmp(&o.len))
    }
}
impl PartialOrd for MemKey {
    fn partial_cmp(&self, o: &Self) -> Option<CmpOrdering> {
        Some(self.cmp(o))
    }
}

/// Approximate per-entry overhead (B-tree slot, node share, slot metadata).
const ENTRY_OVERHEAD: u64 = 80;
const CHUNK: usize = 1 << 20;

#[derive(Clone, Copy, Debug)]
struct Slot {
    seq: u64,
    kind: EntryKind,
    chunk: u32,
    off: u32,
    len: u32,
}

/// (entry key, antimatter?, what the bounds stand for)
type MemGeom = GeomWithData<Rectangle<[f64; 2]>, (Box<[u8]>, bool, BoundsKind)>;

/// The memtable R-tree's walk of a search: nodes and entries that
/// intersect the box and pass `reach` (a radius query's circle).
struct Reaching<'a> {
    env: AABB<[f64; 2]>,
    reach: &'a dyn Fn(&Rect) -> bool,
}

impl rstar::SelectionFunction<MemGeom> for Reaching<'_> {
    fn should_unpack_parent(&self, envelope: &AABB<[f64; 2]>) -> bool {
        self.env.intersects(envelope) && (self.reach)(&rect_of(envelope))
    }

    fn should_unpack_leaf(&self, leaf: &MemGeom) -> bool {
        let e = leaf.envelope();
        self.env.intersects(&e) && (self.reach)(&rect_of(&e))
    }
}

fn mem_geom(key: &[u8], kind: EntryKind, value: &[u8]) -> Option<MemGeom> {
    let (r, bk) = decode_bounds_kind(value)?;
    Some(GeomWithData::new(
        Rectangle::from_corners([r[0], r[1]], [r[2], r[3]]),
        (key.into(), kind == EntryKind::Delete, bk),
    ))
}

fn rect_of(e: &AABB<[f64; 2]>) -> Rect {
    let (lo, hi) = (e.lower(), e.upper());
    [lo[0], lo[1], hi[0], hi[1]]
}

/// One hit of a spatial search in memory or on disk.
#[derive(Clone, Debug)]
pub struct SpatialEntry {
    pub key: Vec<u8>,
    pub delete: bool,
    pub bounds: Rect,
    pub bounds_kind: BoundsKind,
}

/// Node sizes of the in-memory R*-tree: nodes of up to 16 entries and no
/// forced reinsertion. Measured on 100,000 clustered points inserted in
/// primary-key order (spatially random), against rstar's defaults (3/6, 2
/// reinsertions): about 35% less time per insert (the writer's largest cost
/// with an R-tree index) and about 30% less per small box query. Forced
/// reinsertion buys tighter nodes for a tree that lives long; a memory
/// component lives one flush.
struct MemParams;

impl RTreeParams for MemParams {
    const MIN_SIZE: usize = 6;
    const MAX_SIZE: usize = 16;
    const REINSERTION_COUNT: usize = 0;
    type DefaultInsertionStrategy = RStarInsertionStrategy;
}

type MemRTree = RTree<MemGeom, MemParams>;

/// Extra memory per entry of a spatial memtable (the rstar node share and the key copy).
const SPATIAL_OVERHEAD: u64 = 96;

#[derive(Debug, Default)]
struct Inner {
    map: BTreeMap<MemKey, Slot>,
    /// No key of `map` is greater (an upper bound: a removal leaves it).
    /// A lookup past it answers without a descent: keys written in order
    /// (a bulk load's existence checks) are all past it.
    max: Option<MemKey>,
    chunks: Vec<Vec<u8>>,
    /// Spatial trees only: an R-tree over every entry's bounds (antimatter included).
    spatial: Option<MemRTree>,
    /// Keys of the in-memory secondary structure (see [`MemSecondary`]);
    /// empty unless one is attached. Keys of superseded versions stay (the
    /// reader checks the version against `map`).
    sec: BTreeSet<Vec<u8>>,
    /// Entries of `map` that are antimatter.
    deletes: usize,
}

/// Count the kind of a slot coming into (`+1`) or leaving (`-1`) the map
/// in its `deletes`.
fn count(deletes: &mut usize, kind: EntryKind, sign: isize) {
    if kind == EntryKind::Delete {
        *deletes = deletes.saturating_add_signed(sign);
    }
}

impl Inner {
    fn store(&mut self, v: &[u8]) -> (u32, u32) {
        store(&mut self.chunks, v)
    }

    fn value(&self, s: &Slot) -> &[u8] {
        slot_value(&self.chunks, s)
    }

    fn entry(&self, s: &Slot) -> Entry {
        slot_entry(&self.chunks, s)
    }
}

/// Append `v` to the arena chunks; returns (chunk, offset).
fn store(chunks: &mut Vec<Vec<u8>>, v: &[u8]) -> (u32, u32) {
    let fits = chunks
        .last()
        .is_some_and(|c| c.capacity() - c.len() >= v.len());
    if !fits {
        chunks.push(Vec::with_capacity(CHUNK.max(v.len())));
    }
    let idx = chunks.len() - 1;
    let c = &mut chunks[idx];
    let off = c.len();
    c.extend_from_slice(v);
    (idx as u32, off as u32)
}

fn slot_value<'a>(chunks: &'a [Vec<u8>], s: &Slot) -> &'a [u8] {
    let c = &chunks[s.chunk as usize];
    &c[s.off as usize..s.off as usize + s.len as usize]
}

fn slot_entry(chunks: &[Vec<u8>], s: &Slot) -> Entry {
    Entry {
        seq: s.seq,
        kind: s.kind,
        value: slot_value(chunks, s).to_vec(),
    }
}

/// See [`MemTable::summary`].
pub struct MemSummary {
    pub min_key: Vec<u8>,
    pub max_key: Vec<u8>,
    pub puts: u64,
}

/// One in-memory component. Writers insert concurrently (serialized by its
/// lock); a newer sequence number always wins for the same key.
#[derive(Debug, Default)]
pub struct MemTable {
    inner: RwLock<Inner>,
    len: AtomicUsize,
    bytes: AtomicU64,
    min_seq: AtomicU64,
    max_seq: AtomicU64,
    min_lsn: AtomicU64,
    max_lsn: AtomicU64,
    /// Transactions that wrote here and have not yet appended their COMMIT or
    /// ABORT (no-steal: a memtable is flushed only when this is zero).
    writers: AtomicUsize,
    /// The in-memory secondary structure's key maker, if any.
    secondary: std::sync::OnceLock<Arc<dyn MemSecondary>>,
    /// The index kind's facts about this table's writes, if any.
    facts: std::sync::OnceLock<Arc<dyn MemFacts>>,
    /// Unique among the memtables of this process (0 only for a
    /// `Default` table, which no tree uses).
    uid: u64,
    /// Bumped by every change of the map (insert, undo): equal versions of
    /// one table mean equal contents (see [`MemTable::version`]).
    version: AtomicU64,
}

/// Memtable uids; 1 is the first.
static NEXT_MEM_UID: AtomicU64 = AtomicU64::new(1);

/// Memory accounted per key of the in-memory secondary structure, besides its bytes.
const SEC_OVERHEAD: u64 = 48;

impl MemTable {
    /// A transaction enters (it is about to write here).
    pub fn enter(&self) {
        self.writers.fetch_add(1, Ordering::AcqRel);
    }

    /// A transaction leaves (its COMMIT or ABORT is in the log).
    pub fn leave(&self) {
        self.writers.fetch_sub(1, Ordering::AcqRel);
    }

    pub fn active_writers(&self) -> usize {
        self.writers.load(Ordering::Acquire)
    }

    pub fn new() -> Self {
        MemTable {
            min_seq: AtomicU64::new(u64::MAX),
            min_lsn: AtomicU64::new(u64::MAX),
            uid: NEXT_MEM_UID.fetch_add(1, Ordering::Relaxed),
            ..Default::default()
        }
    }

    /// A memtable whose entries' values are bounds (see `kind::encode_bounds`),
    /// mirrored in an in-memory R-tree for spatial search.
    pub fn new_spatial() -> Self {
        let m = MemTable::new();
        m.inner.write().spatial = Some(MemRTree::new_with_params());
        m
    }

    /// Entries whose bounds intersect `q` (antimatter included).
    pub fn spatial_search(
        &self,
        q: &Rect,
        reach: &dyn Fn(&Rect) -> bool,
        out: &mut Vec<SpatialEntry>,
    ) {
        let g = self.inner.read();
        let Some(t) = &g.spatial else {
            return;
        };
        let env = AABB::from_corners([q[0], q[1]], [q[2], q[3]]);
        let select = Reaching { env, reach };
        for o in t.locate_with_selection_function(select) {
            out.push(SpatialEntry {
                key: o.data.0.to_vec(),
                delete: o.data.1,
                bounds: rect_of(&o.envelope()),
                bounds_kind: o.data.2,
            });
        }
    }

    /// How many entries (antimatter included) intersect `q`, counting up to
    /// `cap`.
    pub fn spatial_count(&self, q: &Rect, cap: u64) -> u64 {
        let g = self.inner.read();
        let Some(t) = &g.spatial else {
            return 0;
        };
        let env = AABB::from_corners([q[0], q[1]], [q[2], q[3]]);
        t.locate_in_envelope_intersecting(&env)
            .take(usize::try_from(cap).unwrap_or(usize::MAX))
            .count() as u64
    }

    /// The `n` entries nearest by `metric` (antimatter included), nearest first.
    pub fn nearest(
        &self,
        n: usize,
        metric: &dyn super::kind::KnnMetric,
    ) -> Vec<(f64, SpatialEntry)> {
        struct Item<'a> {
            d: f64,
            node: &'a RTreeNode<MemGeom>,
        }
        impl PartialEq for Item<'_> {
            fn eq(&self, o: &Self) -> bool {
                self.d.total_cmp(&o.d).is_eq()
            }
        }
        impl Eq for Item<'_> {}
        impl PartialOrd for Item<'_> {
            fn partial_cmp(&self, o: &Self) -> Option<CmpOrdering> {
                Some(self.cmp(o))
            }
        }
        impl Ord for Item<'_> {
            fn cmp(&self, o: &Self) -> CmpOrdering {
                o.d.total_cmp(&self.d)
            }
        }
        let g = self.inner.read();
        let mut out = Vec::new();
        let Some(t) = &g.spatial else {
            return out;
        };
        let mut heap = BinaryHeap::new();
        let key = |c: &RTreeNode<MemGeom>| match c {
            RTreeNode::Leaf(o) => metric.key(&rect_of(&o.envelope()), o.data.2),
            RTreeNode::Parent(p) => metric.bound(&rect_of(&p.envelope())),
        };
        for c in t.root().children() {
            heap.push(Item { d: key(c), node: c });
        }
        while let Some(Item { d, node }) = heap.pop() {
            if out.len() >= n {
                break;
            }
            match node {
                RTreeNode::Leaf(o) => out.push((
                    d,
                    SpatialEntry {
                        key: o.data.0.to_vec(),
                        delete: o.data.1,
                        bounds: rect_of(&o.envelope()),
                        bounds_kind: o.data.2,
                    },
                )),
                RTreeNode::Parent(p) => {
                    for c in p.children() {
                        heap.push(Item { d: key(c), node: c });
                    }
                }
            }
        }
        out
    }

    /// Insert; returns the number of bytes accounted to the memory budget.
    pub fn insert(&self, key: &[u8], e: Entry, lsn: u64) -> u64 {
        self.insert_inner(key, e.as_ref(), lsn, false).0
    }

    /// [`insert`](Self::insert) of an entry whose value is borrowed (the
    /// memtable copies it into its arena either way).
    pub fn insert_ref(&self, key: &[u8], e: EntryRef<'_>, lsn: u64) -> u64 {
        self.insert_inner(key, e, lsn, false).0
    }

    /// [`insert`](Self::insert) that also returns what the memtable held at
    /// `key` before (for exact undo), found by the same traversal of the map.
    pub fn insert_prior(&self, key: &[u8], e: EntryRef<'_>, lsn: u64) -> (u64, Option<Entry>) {
        self.insert_inner(key, e, lsn, true)
    }

    fn insert_inner(
        &self,
        key: &[u8],
        e: EntryRef<'_>,
        lsn: u64,
        want_prior: bool,
    ) -> (u64, Option<Entry>) {
        let mut cost = key.len() as u64 + e.value.len() as u64 + ENTRY_OVERHEAD;
        let seq = e.seq;
        let mk = MemKey::new(key);
        if let Some(f) = self.facts.get() {
            f.observe(key, e);
        }
        // Secondary keys are derived outside the lock.
        let mut sec_keys = Vec::new();
        if let Some(h) = self.secondary.get()
            && e.kind == EntryKind::Put
        {
            h.keys(key, e, &mut sec_keys);
        }
        let mut prior = None;
        {
            let mut g = self.inner.write();
            let inner = &mut *g;
            let new_slot = |chunks: &mut Vec<Vec<u8>>| {
                let (chunk, off) = store(chunks, e.value);
                Slot {
                    seq,
                    kind: e.kind,
                    chunk,
                    off,
                    len: e.value.len() as u32,
                }
            };
            if inner.max.as_ref().is_none_or(|m| mk > *m) {
                inner.max = Some(mk.clone());
            }
            // One traversal: the prior version (if any) and the insert.
            // (written, replaced slot)
            let (written, old) = match inner.map.entry(mk) {
                MapEntry::Vacant(v) => {
                    v.insert(new_slot(&mut inner.chunks));
                    self.len.fetch_add(1, Ordering::Relaxed);
                    count(&mut inner.deletes, e.kind, 1);
                    (true, None)
                }
                MapEntry::Occupied(mut o) => {
                    let old = *o.get();
                    if want_prior {
                        prior = Some(slot_entry(&inner.chunks, &old));
                    }
                    if old.seq <= seq {
                        o.insert(new_slot(&mut inner.chunks));
                        count(&mut inner.deletes, old.kind, -1);
                        count(&mut inner.deletes, e.kind, 1);
                        (true, Some(old))
                    } else {
                        (false, None)
                    }
                }
            };
            if written {
                self.version.fetch_add(1, Ordering::Release);
                for k in sec_keys {
                    cost += k.len() as u64 + SEC_OVERHEAD;
                    inner.sec.insert(k);
                }
                if inner.spatial.is_some() {
                    cost += SPATIAL_OVERHEAD + key.len() as u64;
                    let old_geom =
                        old.and_then(|o| mem_geom(key, o.kind, slot_value(&inner.chunks, &o)));
                    let new_geom = mem_geom(key, e.kind, e.value);
                    if let Some(t) = inner.spatial.as_mut() {
                        if let Some(og) = old_geom {
                            t.remove(&og);
                        }
                        if let Some(ng) = new_geom {
                            t.insert(ng);
                        }
                    }
                }
            }
        }
        self.bytes.fetch_add(cost, Ordering::Relaxed);
        self.min_seq.fetch_min(seq, Ordering::Relaxed);
        self.max_seq.fetch_max(seq, Ordering::Relaxed);
        if lsn > 0 {
            self.min_lsn.fetch_min(lsn, Ordering::Relaxed);
            self.max_lsn.fetch_max(lsn, Ordering::Relaxed);
        }
        (cost, prior)
    }

    /// Put back exactly what `key` held before a write (`None`: remove it).
    /// Only for undo: the caller holds the lock that protects `key` and is a
    /// registered writer, so no one else changed it meanwhile.
    pub fn restore(&self, key: &[u8], prior: Option<Entry>) {
        let mk = MemKey::new(key);
        let mut g = self.inner.write();
        let inner = &mut *g;
        self.version.fetch_add(1, Ordering::Release);
        let old = inner.map.remove(&mk);
        if let Some(o) = &old {
            count(&mut inner.deletes, o.kind, -1);
        }
        let old_geom = old
            .as_ref()
            .and_then(|o| mem_geom(key, o.kind, inner.value(o)));
        if let (Some(t), Some(og)) = (inner.spatial.as_mut(), old_geom) {
            t.remove(&og);
        }
        match prior {
            Some(e) => {
                if let Some(h) = self.secondary.get()
                    && e.kind == EntryKind::Put
                {
                    let mut keys = Vec::new();
                    h.keys(key, e.as_ref(), &mut keys);
                    inner.sec.extend(keys);
                }
                let (chunk, off) = inner.store(&e.value);
                count(&mut inner.deletes, e.kind, 1);
                if inner.max.as_ref().is_none_or(|m| mk > *m) {
                    inner.max = Some(mk.clone());
                }
                inner.map.insert(
                    mk,
                    Slot {
                        seq: e.seq,
                        kind: e.kind,
                        chunk,
                        off,
                        len: e.value.len() as u32,
                    },
                );
                if let (Some(t), Some(ng)) =
                    (inner.spatial.as_mut(), mem_geom(key, e.kind, &e.value))
                {
                    t.insert(ng);
                }
                if old.is_none() {
                    self.len.fetch_add(1, Ordering::Relaxed);
                }
            }
            None => {
                if old.is_some() {
                    self.len.fetch_sub(1, Ordering::Relaxed);
                }
            }
        }
    }

    /// Its entries that put a value, and its antimatter entries.
    pub fn counts(&self) -> (u64, u64) {
        let g = self.inner.read();
        let deletes = g.deletes as u64;
        ((g.map.len() as u64).saturating_sub(deletes), deletes)
    }

    /// What the memtable holds, for counting records without reading
    /// them: its smallest and largest keys and how many of its entries are
    /// not antimatter; `None` when it is empty.
    pub fn summary(&self) -> Option<MemSummary> {
        let g = self.inner.read();
        let (first, _) = g.map.first_key_value()?;
        let (last, _) = g.map.last_key_value()?;
        let (mut min_key, mut max_key) = (Vec::new(), Vec::new());
        first.write_to(&mut min_key);
        last.write_to(&mut max_key);
        Some(MemSummary {
            min_key,
            max_key,
            puts: g.map.len().saturating_sub(g.deletes) as u64,
        })
    }

    /// This table among the memtables of the process: with
    /// [`MemTable::version`], names one state of its contents (for caches
    /// of what was read from it).
    pub fn uid(&self) -> u64 {
        self.uid
    }

    /// The number of changes made so far. It moves under the table's write
    /// lock, with the change: a reader that sees the same version before
    /// and after reading saw exactly the contents of that version.
    pub fn version(&self) -> u64 {
        self.version.load(Ordering::Acquire)
    }

    pub fn get(&self, key: &[u8]) -> Option<Entry> {
        let mk = MemKey::new(key);
        let g = self.inner.read();
        if g.max.as_ref().is_none_or(|m| mk > *m) {
            return None;
        }
        g.map.get(&mk).map(|s| g.entry(s))
    }

    pub fn bytes(&self) -> u64 {
        self.bytes.load(Ordering::Relaxed)
    }

    pub fn len(&self) -> usize {
        self.len.load(Ordering::Relaxed)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// (min, max) sequence number of the entries written here, if any.
    pub fn seq_range(&self) -> Option<(u64, u64)> {
        let lo = self.min_seq.load(Ordering::Relaxed);
        (lo != u64::MAX).then(|| (lo, self.max_seq.load(Ordering::Relaxed)))
    }

    /// Attach an in-memory secondary structure (once per memtable; a second
    /// call is ignored and returns false) and index the entries already here.
    /// Writers must not insert concurrently (the dataset's DDL lock, or a
    /// memtable nobody else sees yet).
    pub fn attach_secondary(&self, h: Arc<dyn MemSecondary>) -> bool {
        if self.secondary.set(h).is_err() {
            return false;
        }
        self.backfill_secondary();
        true
    }

    /// Recompute the secondary keys of every live entry (after the key maker
    /// starts deriving more keys, e.g. for a newly indexed attribute).
    pub fn backfill_secondary(&self) {
        let Some(h) = self.secondary.get() else {
            return;
        };
        let mut g = self.inner.write();
        let inner = &mut *g;
        let mut key = Vec::new();
        let mut keys = Vec::new();
        let mut added = 0u64;
        for (k, s) in inner.map.iter() {
            if s.kind != EntryKind::Put {
                continue;
            }
            k.write_to(&mut key);
            let e = EntryRef {
                seq: s.seq,
                kind: s.kind,
                value: inner.value(s),
            };
            h.keys(&key, e, &mut keys);
        }
        for k in keys {
            added += k.len() as u64 + SEC_OVERHEAD;
            inner.sec.insert(k);
        }
        self.bytes.fetch_add(added, Ordering::Relaxed);
    }

    /// Attach the index kind's facts (once per memtable; a second call is
    /// ignored and returns false); they see the entries already here.
    /// Writers must not insert concurrently (as for
    /// [`attach_secondary`](Self::attach_secondary)).
    pub fn attach_facts(&self, f: Arc<dyn MemFacts>) -> bool {
        if self.facts.set(f.clone()).is_err() {
            return false;
        }
        let g = self.inner.read();
        let mut key = Vec::new();
        for (k, s) in g.map.iter() {
            k.write_to(&mut key);
            f.observe(
                &key,
                EntryRef {
                    seq: s.seq,
                    kind: s.kind,
                    value: g.value(s),
                },
            );
        }
        true
    }

    /// The index kind's facts about this table's writes, if attached.
    pub fn facts(&self) -> Option<&Arc<dyn MemFacts>> {
        self.facts.get()
    }

    /// Visit entries in key order from `start`, borrowing them from the
    /// table, until `f` returns false or the table ends. The read lock is
    /// taken for [`BATCH`] entries at a time (writers wait at most that
    /// long), so a visit sees a read-committed view, as [`MemIter`] does.
    pub fn visit(&self, start: &[u8], f: &mut dyn FnMut(&[u8], EntryRef<'_>) -> bool) {
        let mut from = Bound::Included(MemKey::new(start));
        let mut key = Vec::new();
        loop {
            let g = self.inner.read();
            let mut n = 0;
            let mut last = None;
            for (k, s) in g.map.range::<MemKey, _>((from.clone(), Bound::Unbounded)) {
                k.write_to(&mut key);
                let e = EntryRef {
                    seq: s.seq,
                    kind: s.kind,
                    value: g.value(s),
                };
                if !f(&key, e) {
                    return;
                }
                n += 1;
                if n == BATCH {
                    last = Some(k.clone());
                    break;
                }
            }
            match last {
                Some(k) => from = Bound::Excluded(k),
                None => return,
            }
        }
    }

    /// Whether an in-memory secondary structure is attached.
    pub fn has_secondary(&self) -> bool {
        self.secondary.get().is_some()
    }

    /// Keys of the in-memory secondary structure within `[lo, hi)`, in order,
    /// at most `max` of them (copied out; the table may keep changing).
    pub fn secondary_range(&self, lo: &[u8], hi: Bound<&[u8]>, max: usize) -> Vec<Vec<u8>> {
        // An empty range (BTreeSet::range would panic on start > end).
        match hi {
            Bound::Included(h) if lo > h => return Vec::new(),
            Bound::Excluded(h) if lo >= h => return Vec::new(),
            _ => {}
        }
        let g = self.inner.read();
        let range = g.sec.range::<[u8], _>((Bound::Included(lo), hi)).take(max);
        range.cloned().collect()
    }

    /// (min, max) LSN of the entries, if any carried one.
    pub fn lsn_range(&self) -> Option<(u64, u64)> {
        let lo = self.min_lsn.load(Ordering::Relaxed);
        (lo != u64::MAX).then(|| (lo, self.max_lsn.load(Ordering::Relaxed)))
    }

    /// Visit every entry in key order (used by flush; the table is immutable by then).
    pub fn for_each<E>(
        &self,
        mut f: impl FnMut(&[u8], EntryKind, u64, &[u8]) -> Result<(), E>,
    ) -> Result<(), E> {
        let g = self.inner.read();
        let mut key = Vec::new();
        for (k, s) in g.map.iter() {
            k.write_to(&mut key);
            f(&key, s.kind, s.seq, g.value(s))?;
        }
        Ok(())
    }
}

/// A cursor over a shared memtable that copies entries out in small batches,
/// so it does not borrow the table (the table may keep receiving writes; the
/// cursor sees a read-committed view).
pub struct MemIter {
    table: Arc<MemTable>,
    buf: VecDeque<(Vec<u8>, Entry)>,
    /// Where the next batch starts (its end, when `reverse`).
    next_from: Option<Bound<Vec<u8>>>,
    /// Descending key order.
    reverse: bool,
}

const BATCH: usize = 256;

impl MemIter {
    pub fn new(table: Arc<MemTable>, start: Bound<&[u8]>) -> Self {
        MemIter {
            table,
            buf: VecDeque::new(),
            next_from: Some(start.map(<[u8]>::to_vec)),
            reverse: false,
        }
    }

    /// A cursor in descending key order from the last key within `end`.
    pub fn new_rev(table: Arc<MemTable>, end: Bound<&[u8]>) -> Self {
        MemIter {
            table,
            buf: VecDeque::new(),
            next_from: Some(end.map(<[u8]>::to_vec)),
            reverse: true,
        }
    }

    fn refill(&mut self) {
        let Some(from) = self.next_from.take() else {
            return;
        };
        let bound = from.as_ref().map(|k| MemKey::new(k));
        let g = self.table.inner.read();
        let mut push = |k: &MemKey, s: &Slot| {
            let mut key = Vec::with_capacity(k.len as usize);
            k.write_to(&mut key);
            self.buf.push_back((key, g.entry(s)));
        };
        if self.reverse {
            for (k, s) in g
                .map
                .range::<MemKey, _>((Bound::Unbounded, bound))
                .rev()
                .take(BATCH)
            {
                push(k, s);
            }
        } else {
            for (k, s) in g
                .map
                .range::<MemKey, _>((bound, Bound::Unbounded))
                .take(BATCH)
            {
                push(k, s);
            }
        }
        if self.buf.len() == BATCH
            && let Some((k, _)) = self.buf.back()
        {
            self.next_from = Some(Bound::Excluded(k.clone()));
        }
    }

    pub fn next_entry(&mut self) -> Option<(Vec<u8>, Entry)> {
        if self.buf.is_empty() {
            self.refill();
        }
        self.buf.pop_front()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn memkey_order_is_byte_order(a in proptest::collection::vec(0u8..4, 0..72),
                                      b in proptest::collection::vec(0u8..4, 0..72)) {
            let (ka, kb) = (MemKey::new(&a), MemKey::new(&b));
            prop_assert_eq!(ka.cmp(&kb), a.cmp(&b));
            let mut out = Vec::new();
            ka.write_to(&mut out);
            prop_assert_eq!(out, a);
        }
    }

    #[test]
    fn memkey_stays_one_cache_line() {
        // The reason INLINE is 40 and not 32 (see `MemKey`).
        assert_eq!(std::mem::size_of::<MemKey>(), 64);
    }

    #[test]
    fn newer_sequence_wins_and_values_survive_chunk_boundaries() {
        let m = MemTable::new();
        let big = vec![7u8; CHUNK - 10];
        m.insert(b"a", Entry::put(5, big.clone()), 0);
        m.insert(b"a", Entry::put(3, b"old".to_vec()), 0);
        assert_eq!(m.get(b"a").map(|e| e.value), Some(big));
        m.insert(b"b", Entry::put(6, vec![1; 100]), 0);
        m.insert(b"a", Entry::delete(9), 0);
        assert!(m.get(b"a").is_some_and(|e| e.is_delete()));
        assert_eq!(m.get(b"b").map(|e| e.value), Some(vec![1; 100]));
        assert_eq!(m.len(), 2);
    }
}
