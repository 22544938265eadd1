//! Spatial search over an LSM R-tree: every in-memory component's `rstar`
//! tree and every disk component's packed R-tree, reconciled.
//!
//! Reconciliation. With antimatter (AMLSM), a delete is an antimatter entry
//! with the same key and bounds as the entry it cancels, so the same search
//! finds both; for each key only the newest component's version counts. With
//! deleted-key trees, an entry from a disk component is also dropped when a
//! newer disk component's deleted-key tree holds its primary key (memory
//! components still use antimatter, see `kind`).
//!
//! kNN is a best-first search over all components at once (one priority
//! queue holding memtable entries, packed R-tree nodes and leaf entries,
//! ordered by a distance that is a lower bound for nodes and exact for
//! entries), so it reads only the nodes nearer than the k-th answer.

use super::kind::{BoundsKind, decode_bounds_kind, deleted_contains, points_only};
use super::memtable::SpatialEntry;
use super::tree::{LsmTree, Snapshot};
use crate::error::Result;
use crate::geo::sphere::Circle;
use crate::geo::{Rect, rect_intersects};
use crate::storage::EntryKind;
use crate::storage::bloom::key_hash;
use crate::storage::component::Probe;
use std::cmp::Ordering as CmpOrdering;
use std::collections::{BinaryHeap, HashSet};
use std::sync::atomic::Ordering;

/// What a search touched, for `EXPLAIN`-style output and read amplification.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct SearchStats {
    /// Components (memory and disk) whose structure was searched.
    pub components: u64,
    /// Disk leaf blocks read.
    pub blocks: u64,
    /// Entries (antimatter included) that matched before reconciliation.
    pub candidates: u64,
    /// Disk components skipped because their key (Z) range meets none of
    /// the query's Z ranges (`order = zorder` R-trees only; components
    /// skipped by their MBR are simply not counted in `components`).
    pub z_pruned: u64,
}

impl SearchStats {
    pub fn add(&mut self, o: &SearchStats) {
        self.components += o.components;
        self.blocks += o.blocks;
        self.candidates += o.candidates;
        self.z_pruned += o.z_pruned;
    }
}

/// Whether a disk component of a Z-ordered R-tree may hold an entry
/// matching a query with Z ranges `ranges`: its keys start with the 8-byte
/// big-endian Z-value, so their Z-values lie within those of its smallest
/// and largest key. Only valid for components of points ([`points_only`]:
/// an entry of a larger geometry may meet the query while its centre lies
/// outside it); a key shorter than 8 bytes (never written) is not pruned.
fn z_may_match(c: &crate::storage::ComponentReader, ranges: &[(u64, u64)]) -> bool {
    let m = c.meta();
    let z = |k: &[u8]| -> Option<u64> { Some(u64::from_be_bytes(k.get(..8)?.try_into().ok()?)) };
    match (z(&m.min_key), z(&m.max_key)) {
        (Some(lo), Some(hi)) => crate::geo::zorder::ranges_meet(ranges, lo, hi),
        _ => true,
    }
}

/// The entries of leaf `b` of an R-tree component whose bounds pass `keep`.
fn leaf_entries(
    c: &crate::storage::ComponentReader,
    b: usize,
    keep: impl Fn(&Rect) -> bool,
    mut f: impl FnMut(SpatialEntry),
) -> Result<()> {
    c.for_each_in_block(b, |k, kind, _, v| {
        if let Some((r, bk)) = decode_bounds_kind(v)
            && keep(&r)
        {
            f(SpatialEntry {
                key: k.to_vec(),
                delete: kind == EntryKind::Delete,
                bounds: r,
                bounds_kind: bk,
            });
        }
        Ok(true)
    })
}

pub use super::kind::KnnMetric;

/// Whether a component newer than `rank` (memtables first, then disk
/// components, as ranked by `search_spatial`) holds any version of `key`.
fn newer_version(snap: &Snapshot, rank: usize, key: &[u8]) -> Result<bool> {
    let nm = snap.mems.len();
    for m in &snap.mems[..rank.min(nm)] {
        if !m.is_empty() && m.get(key).is_some() {
            return Ok(true);
        }
    }
    if rank > nm {
        let h = key_hash(key);
        for c in &snap.disk[..rank - nm] {
            let m = c.meta();
            if key < m.min_key.as_slice() || key > m.max_key.as_slice() {
                continue;
            }
            if let Probe::Found(_) = c.probe(key, h)? {
                return Ok(true);
            }
        }
    }
    Ok(false)
}

impl LsmTree {
    /// Entries whose bounds intersect any of `rects` (in no set order),
    /// each the newest version among the matching ones of its key. With `exact`,
    /// also only if no newer component holds another version of the key:
    /// a record moved within its key cell (Hilbert or Z) keeps its key, so
    /// its old version can match while the new one does not (then only
    /// the old one is found). Without `exact` such stale entries remain
    /// (callers that re-check the record need not pay for the probes).
    pub fn search_spatial(
        &self,
        snap: &Snapshot,
        rects: &[Rect],
        circle: Option<&Circle>,
        exact: bool,
        stats: &mut SearchStats,
    ) -> Result<Vec<SpatialEntry>> {
        let reach = |r: &Rect| circle.is_none_or(|c| c.may_reach(r));
        self.counters.scans.fetch_add(1, Ordering::Relaxed);
        let nm = snap.mems.len();
        // The entries found and the rank of the component each came from
        // (memtables first, then disk components), side by side so that
        // the entries are moved only when they must be reordered.
        let mut entries: Vec<SpatialEntry> = Vec::new();
        let mut ranks: Vec<usize> = Vec::new();
        for (rank, m) in snap.mems.iter().enumerate() {
            if m.is_empty() {
                continue;
            }
            stats.components += 1;
            for q in rects {
                m.spatial_search(q, &reach, &mut entries);
                ranks.resize(entries.len(), rank);
            }
        }
        // Z-ordered R-tree: the query's cells as Z ranges (over-covering,
        // at most DEFAULT_MAX_RANGES per rectangle), to skip components of
        // points by key range before their R-tree is consulted; computed
        // when the first such component comes.
        let zorder = self.cfg_zorder();
        let mut z_ranges: Option<Vec<(u64, u64)>> = None;
        let mut blocks = Vec::new();
        let mut touched = 0;
        for (p, c) in snap.disk.iter().enumerate() {
            let Some(t) = super::kind::packed_rtree(c) else {
                continue;
            };
            if zorder && points_only(c) {
                let z = z_ranges.get_or_insert_with(|| {
                    let s = self.config().key_space;
                    let space = crate::geo::hilbert::Space {
                        min_x: s[0],
                        min_y: s[1],
                        max_x: s[2],
                        max_y: s[3],
                    };
                    crate::geo::zorder::query_ranges(
                        &space,
                        rects,
                        crate::geo::zorder::DEFAULT_MAX_RANGES,
                    )
                });
                if !z_may_match(c, z) {
                    stats.z_pruned += 1;
                    continue;
                }
            }
            blocks.clear();
            for q in rects {
                t.blocks_reaching(q, &reach, &mut blocks);
            }
            if blocks.is_empty() {
                continue;
            }
            touched += 1;
            blocks.sort_unstable();
            blocks.dedup();
            stats.blocks += blocks.len() as u64;
            for &b in &blocks {
                leaf_entries(
                    c,
                    b,
                    |r| rects.iter().any(|q| rect_intersects(q, r)) && reach(r),
                    |e| {
                        entries.push(e);
                        ranks.push(nm + p);
                    },
                )?;
            }
        }
        stats.components += touched;
        stats.candidates += entries.len() as u64;
        self.counters
            .scan_components
            .fetch_add(touched, Ordering::Relaxed);
        let dk = self.kind().deleted_keys();
        // Whether the entry (from the component of rank `rank`) is live:
        // not antimatter, not deleted by a newer component, and (`exact`)
        // not superseded by a newer version of its key.
        let visible = |rank: usize, e: &SpatialEntry| -> Result<bool> {
            if e.delete {
                return Ok(false);
            }
            if dk && rank > nm {
                let pk = self.kind().pk.pk(&e.key)?;
                for c in &snap.disk[..rank - nm] {
                    if deleted_contains(c, pk)? {
                        return Ok(false);
                    }
                }
            }
            Ok(!(exact && rank > 0 && newer_version(snap, rank, &e.key)?))
        };
        // Versions of one key meet only from several components (or
        // several rectangles of one memtable); the newest is kept. Hits of
        // one disk component, or of one rectangle, hold each key once:
        // they are filtered in place.
        if let Some(&first) = ranks.first()
            && ranks.iter().all(|&r| r == first)
            && (first >= nm || rects.len() == 1)
        {
            let mut failed = None;
            entries.retain(|e| match visible(first, e) {
                Ok(v) => v,
                Err(err) => {
                    failed.get_or_insert(err);
                    false
                }
            });
            return match failed {
                Some(err) => Err(err),
                None => Ok(entries),
            };
        }
        let mut order: Vec<usize> = (0..entries.len()).collect();
        order.sort_unstable_by(|&a, &b| {
            entries[a]
                .key
                .cmp(&entries[b].key)
                .then(ranks[a].cmp(&ranks[b]))
        });
        order.dedup_by(|later, first| entries[*later].key == entries[*first].key);
        let mut slots: Vec<Option<SpatialEntry>> = entries.into_iter().map(Some).collect();
        let mut out = Vec::with_capacity(order.len());
        for i in order {
            if let Some(e) = slots[i].take()
                && visible(ranks[i], &e)?
            {
                out.push(e);
            }
        }
        Ok(out)
    }

    /// Best-first nearest-neighbour cursor ordered by `metric`.
    pub fn knn(&self, snap: Snapshot, metric: std::sync::Arc<dyn KnnMetric>) -> Result<KnnCursor> {
        self.counters.scans.fetch_add(1, Ordering::Relaxed);
        let nm = snap.mems.len();
        let mut cur = KnnCursor {
            heap: BinaryHeap::new(),
            slots: Vec::new(),
            keys: Vec::new(),
            pushed: vec![HashSet::new(); nm],
            seen: HashSet::new(),
            kind: *self.kind(),
            stats: SearchStats::default(),
            metric,
            snap,
        };
        for m in 0..nm {
            if !cur.snap.mems[m].is_empty() {
                cur.stats.components += 1;
                cur.fetch_mem(m, 16);
            }
        }
        for c in 0..cur.snap.disk.len() {
            let Some(t) = super::kind::packed_rtree(&cur.snap.disk[c]) else {
                continue;
            };
            cur.stats.components += 1;
            let top = t.top_level();
            for i in 0..t.nodes(top) {
                let d = cur.metric.bound(&t.mbr(top, i));
                if d.is_finite() {
                    cur.heap.push(KItem {
                        d,
                        what: KWhat::Node {
                            comp: c as u32,
                            level: top as u32,
                            idx: i as u32,
                        },
                    });
                }
            }
        }
        self.counters
            .scan_components
            .fetch_add(cur.stats.components, Ordering::Relaxed);
        Ok(cur)
    }
}

/// A heap item: small (24 bytes), so the heap's sifting moves little;
/// entries live in the cursor's slab.
#[derive(Clone, Copy)]
enum KWhat {
    Node {
        comp: u32,
        level: u32,
        idx: u32,
    },
    /// An entry at its exact key.
    Entry {
        slot: u32,
    },
    /// An entry at a lower bound of its key (refined when popped).
    Rough {
        slot: u32,
    },
    MemMore {
        mem: u32,
        n: u32,
    },
}

/// A candidate entry, its key stored in the cursor's key arena.
struct Slot {
    rank: u32,
    key_at: usize,
    key_len: usize,
    delete: bool,
    bounds: Rect,
    bounds_kind: BoundsKind,
}

struct KItem {
    d: f64,
    what: KWhat,
}

impl PartialEq for KItem {
    fn eq(&self, o: &Self) -> bool {
        self.cmp(o) == CmpOrdering::Equal
    }
}
impl Eq for KItem {}
impl PartialOrd for KItem {
    fn partial_cmp(&self, o: &Self) -> Option<CmpOrdering> {
        Some(self.cmp(o))
    }
}
impl Ord for KItem {
    // Max-heap: reverse, nearest on top; at equal distance entries before
    // nodes (an entry found at distance d is final before expanding more).
    fn cmp(&self, o: &Self) -> CmpOrdering {
        let rank = |w: &KWhat| match w {
            KWhat::Entry { .. } => 0,
            _ => 1,
        };
        o.d.total_cmp(&self.d)
            .then(rank(&o.what).cmp(&rank(&self.what)))
    }
}

/// Yields live entries in increasing distance.
pub struct KnnCursor {
    snap: Snapshot,
    metric: std::sync::Arc<dyn KnnMetric>,
    heap: BinaryHeap<KItem>,
    /// Candidate entries (heap items point here) and their keys, appended
    /// without a per-entry allocation: most candidates are never popped.
    slots: Vec<Slot>,
    keys: Vec<u8>,
    /// Per memtable: keys already queued.
    pushed: Vec<HashSet<Vec<u8>>>,
    /// Keys already returned.
    seen: HashSet<Vec<u8>>,
    kind: super::kind::TreeKind,
    pub stats: SearchStats,
}

impl KnnCursor {
    /// Queue a candidate entry at key `d` (`exact`: its key, else a lower
    /// bound of it).
    #[allow(clippy::too_many_arguments)]
    fn push_entry(
        &mut self,
        d: f64,
        exact: bool,
        rank: usize,
        key: &[u8],
        delete: bool,
        bounds: Rect,
        bounds_kind: BoundsKind,
    ) {
        let slot = self.slots.len() as u32;
        self.slots.push(Slot {
            rank: rank as u32,
            key_at: self.keys.len(),
            key_len: key.len(),
            delete,
            bounds,
            bounds_kind,
        });
        self.keys.extend_from_slice(key);
        self.heap.push(KItem {
            d,
            what: if exact {
                KWhat::Entry { slot }
            } else {
                KWhat::Rough { slot }
            },
        });
    }

    fn fetch_mem(&mut self, m: usize, n: usize) {
        let batch = self.snap.mems[m].nearest(n, &*self.metric);
        let full = batch.len() >= n;
        let last = batch.last().map(|(d, _)| *d);
        for (d, e) in batch {
            if self.pushed[m].insert(e.key.clone()) {
                self.stats.candidates += 1;
                self.push_entry(d, true, m, &e.key, e.delete, e.bounds, e.bounds_kind);
            }
        }
        if full && let Some(d) = last {
            self.heap.push(KItem {
                d,
                what: KWhat::MemMore {
                    mem: m as u32,
                    n: (n * 2).min(u32::MAX as usize) as u32,
                },
            });
        }
    }

    /// Whether a newer component than `rank` holds `key` (any version) or,
    /// with deleted-key trees, deletes its primary key.
    fn superseded(&self, rank: usize, key: &[u8]) -> Result<bool> {
        let nm = self.snap.mems.len();
        for m in &self.snap.mems[..rank.min(nm)] {
            if m.get(key).is_some() {
                return Ok(true);
            }
        }
        if rank > nm {
            let h = key_hash(key);
            let pk = if self.kind.deleted_keys() {
                Some(self.kind.pk.pk(key)?)
            } else {
                None
            };
            for c in &self.snap.disk[..rank - nm] {
                if let Probe::Found(_) = c.probe(key, h)? {
                    return Ok(true);
                }
                if let Some(pk) = pk
                    && deleted_contains(c, pk)?
                {
                    return Ok(true);
                }
            }
        }
        Ok(false)
    }

    /// The next live entry and its distance, nearest first.
    pub fn next_entry(&mut self) -> Result<Option<(f64, SpatialEntry)>> {
        let nm = self.snap.mems.len();
        while let Some(item) = self.heap.pop() {
            match item.what {
                KWhat::MemMore { mem, n } => self.fetch_mem(mem as usize, n as usize),
                KWhat::Node { comp, level, idx } => {
                    let (comp, level, idx) = (comp as usize, level as usize, idx as usize);
                    let c = self.snap.disk[comp].clone();
                    let Some(t) = super::kind::packed_rtree(&c) else {
                        continue;
                    };
                    if level == 0 {
                        self.stats.blocks += 1;
                        let metric = self.metric.clone();
                        let mut n = 0u64;
                        c.for_each_in_block(idx, |k, kind, _, v| {
                            if let Some((r, bk)) = decode_bounds_kind(v) {
                                let d = metric.key_lower(&r, bk);
                                n += 1;
                                let delete = kind == EntryKind::Delete;
                                self.push_entry(d, false, nm + comp, k, delete, r, bk);
                            }
                            Ok(true)
                        })?;
                        self.stats.candidates += n;
                    } else {
                        for ch in t.children(level, idx) {
                            let d = self.metric.bound(&t.mbr(level - 1, ch));
                            if d.is_finite() {
                                self.heap.push(KItem {
                                    d,
                                    what: KWhat::Node {
                                        comp: comp as u32,
                                        level: (level - 1) as u32,
                                        idx: ch as u32,
                                    },
                                });
                            }
                        }
                    }
                }
                KWhat::Rough { slot } => {
                    let s = &self.slots[slot as usize];
                    // Never below the bound it was queued at (keeps the
                    // queue's order monotone).
                    let d = self.metric.key(&s.bounds, s.bounds_kind).max(item.d);
                    self.heap.push(KItem {
                        d,
                        what: KWhat::Entry { slot },
                    });
                }
                KWhat::Entry { slot } => {
                    let s = &self.slots[slot as usize];
                    let (rank, delete) = (s.rank as usize, s.delete);
                    let key = &self.keys[s.key_at..s.key_at + s.key_len];
                    if delete || self.seen.contains(key) || self.superseded(rank, key)? {
                        continue;
                    }
                    let key = key.to_vec();
                    self.seen.insert(key.clone());
                    return Ok(Some((
                        item.d,
                        SpatialEntry {
                            key,
                            delete,
                            bounds: s.bounds,
                            bounds_kind: s.bounds_kind,
                        },
                    )));
                }
            }
        }
        Ok(None)
    }
}
