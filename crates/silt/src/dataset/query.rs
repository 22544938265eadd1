//! Access paths through secondary indexes: B+-tree ranges, spatial
//! intersection, distance and kNN on R-trees, text on inverted indexes, and
//! the index nested-loop spatial join.
//!
//! Two forms, as in AsterixDB (seed 000 §3.4.3–3.5):
//!
//! - **non-index-only**: collect the candidate primary keys from every
//!   partition's index, sort them, then fetch each record from the primary
//!   index under an instant S lock and re-check the whole predicate against
//!   the record (the index may be ahead of or behind the primary for records
//!   whose writers are in flight);
//! - **index-only**: answer from the index entries alone. Each hit's primary
//!   key is tried with an instant S lock: if granted (and no transaction
//!   aborted meanwhile) the entry is committed and is returned as is; if
//!   refused a writer is in flight, and the hit is validated through the
//!   primary instead. Entries that cannot decide the predicate by themselves
//!   (the MBR of a polygon, an n-gram candidate) are always validated.
//!
//! Results are produced lazily by [`QueryResults`] (an iterator), so a limit
//! stops the fetching early. Distances are great-circle metres on a sphere of
//! radius [`crate::geo::sphere::EARTH_RADIUS_M`] and treat coordinates as
//! longitude/latitude degrees.

use super::{Dataset, IndexSet};
use crate::error::{Error, Result};
use crate::geo::Rect;
use crate::geo::{predicates, sphere, split_query_rect};
use crate::index::{IndexDef, IndexKind};
use crate::lsm::kind::BoundsKind;
use crate::lsm::memtable::SpatialEntry;
use crate::lsm::spatial::{KnnCursor, KnnMetric, SearchStats};
use crate::txn::LockManager;
use crate::value::{self, Geometry, Value};
use std::cmp::Ordering as CmpOrdering;
use std::collections::{BTreeSet, BinaryHeap, VecDeque};
use std::ops::Bound;
use std::sync::Arc;

/// A query against one secondary index.
#[derive(Clone, Debug, PartialEq)]
pub enum Query {
    /// B+-tree: the (first fields of the) secondary key within bounds.
    Range {
        lo: Bound<Vec<Value>>,
        hi: Bound<Vec<Value>>,
    },
    /// R-tree: geometries intersecting this one (boundaries included). A
    /// rectangle with `min_x > max_x` crosses the antimeridian: it covers
    /// `[min_x, 180]` and `[-180, max_x]`.
    Intersects(Geometry),
    /// R-tree: geometries within `metres` (great-circle) of a point.
    WithinDistance { lon: f64, lat: f64, metres: f64 },
    /// R-tree: the `k` geometries nearest to a point (great-circle), nearest first.
    Nearest { lon: f64, lat: f64, k: usize },
    /// Keyword index: records containing all (or any) of the words of
    /// `text`. N-gram index: records whose text contains `text` as a
    /// substring (case-folded; `all` is ignored).
    Text { text: String, all: bool },
    /// The `k` most recent live records (all of them when `k` is `None`)
    /// whose indexed field lies within bounds, newest first (recency = the
    /// sequence number of the record's last write): LevelDB++'s
    /// LOOKUP(A, a, K) with `lo = hi = Included([a])` and
    /// RANGELOOKUP(A, a, b, K). Answered by embedded, eager, lazy,
    /// composite and btree indexes (see `crate::recency`).
    Recent {
        lo: Bound<Vec<Value>>,
        hi: Bound<Vec<Value>>,
        k: Option<usize>,
    },
}

impl Query {
    fn name(&self) -> &'static str {
        match self {
            Query::Range { .. } => "range",
            Query::Intersects(_) => "intersects",
            Query::WithinDistance { .. } => "within-distance",
            Query::Nearest { .. } => "nearest",
            Query::Text { .. } => "text",
            Query::Recent { .. } => "recent",
        }
    }
}

/// How to run a query.
#[derive(Clone, Copy, Debug, Default)]
pub struct QueryOptions {
    /// Answer from the index alone where it can decide (see the module doc).
    pub index_only: bool,
    /// Stop after this many results.
    pub limit: Option<usize>,
}

/// One result.
#[derive(Clone, Debug, PartialEq)]
pub struct QueryHit {
    pub pk: Vec<Value>,
    /// The record (always in non-index-only queries; in index-only queries
    /// only when the hit had to be validated through the primary).
    pub record: Option<Value>,
    /// Great-circle distance in metres (distance and kNN queries).
    pub distance_m: Option<f64>,
}

/// What a query touched.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct QueryStats {
    /// Index components (memory and disk, all partitions) searched.
    pub components: u64,
    /// Disk leaf blocks of R-tree components read.
    pub blocks: u64,
    /// Index entries that matched before reconciliation and refinement.
    pub candidates: u64,
    /// Hits fetched from the primary index.
    pub fetched: u64,
    /// Hits returned straight from the index (index-only path).
    pub index_only: u64,
    /// Disk components of a `zorder` R-tree skipped because their Z (key)
    /// range meets none of the query's Z ranges.
    pub z_pruned: u64,
}

/// A candidate from the index.
struct Cand {
    pk: Vec<u8>,
    /// Bounds of an R-tree entry.
    bounds: Option<(Rect, BoundsKind)>,
}

enum Source {
    /// Candidates in primary-key order.
    List(VecDeque<Cand>),
    /// Results decided when the query started (recency queries).
    Hits(VecDeque<QueryHit>),
    /// kNN: one cursor per partition, merged by distance; refined hits wait
    /// in `pending` until no candidate can come nearer.
    Knn {
        cursors: Vec<KnnCursor>,
        heads: Vec<Option<(f64, SpatialEntry)>>,
        pending: BinaryHeap<Pending>,
    },
}

struct Pending {
    d: f64,
    hit: QueryHit,
}
impl PartialEq for Pending {
    fn eq(&self, o: &Self) -> bool {
        self.d.total_cmp(&o.d).is_eq()
    }
}
impl Eq for Pending {}
impl PartialOrd for Pending {
    fn partial_cmp(&self, o: &Self) -> Option<CmpOrdering> {
        Some(self.cmp(o))
    }
}
impl Ord for Pending {
    fn cmp(&self, o: &Self) -> CmpOrdering {
        o.d.total_cmp(&self.d)
    }
}

/// Streaming results of [`Dataset::query`].
pub struct QueryResults {
    ds: Arc<Dataset>,
    def: IndexDef,
    query: Query,
    /// Query tokens (text queries).
    tokens: Vec<String>,
    opts: QueryOptions,
    source: Source,
    /// Hits of a list query decided ahead (a batch fetched in parallel).
    ready: VecDeque<QueryHit>,
    epoch: u64,
    returned: usize,
    stats: QueryStats,
}

/// Candidates decided (fetched from the primary) per batch of a list query.
const FETCH_BATCH: usize = 256;
/// Smallest batch worth splitting across threads (below it, the hand-off
/// costs more than it saves).
const PAR_MIN: usize = 24;
/// Candidates one thread takes at a time from a parallel batch.
const FETCH_CHUNK: usize = 8;

/// What deciding one candidate did.
struct Decided {
    hit: Option<QueryHit>,
    fetched: bool,
}

impl QueryResults {
    /// What the query touched so far.
    pub fn stats(&self) -> QueryStats {
        let mut s = self.stats;
        if let Source::Knn { cursors, .. } = &self.source {
            for c in cursors {
                s.components += c.stats.components;
                s.blocks += c.stats.blocks;
                s.candidates += c.stats.candidates;
                s.z_pruned += c.stats.z_pruned;
            }
        }
        s
    }

    fn pk_values(pk: &[u8]) -> Result<Vec<Value>> {
        value::decode_key(pk)
    }

    /// Decide a candidate: `Some(hit)` if it is an answer.
    fn decide(&mut self, c: &Cand, dist: Option<f64>) -> Result<Option<QueryHit>> {
        let d = self.decide_one(c, dist)?;
        self.count(&d);
        Ok(d.hit)
    }

    fn count(&mut self, d: &Decided) {
        if d.fetched {
            self.stats.fetched += 1;
        } else if d.hit.is_some() {
            self.stats.index_only += 1;
        }
    }

    /// Decide a candidate without touching the statistics (so that a batch
    /// can be decided on several threads).
    fn decide_one(&self, c: &Cand, dist: Option<f64>) -> Result<Decided> {
        if self.opts.index_only && self.index_decides(c) {
            let name = LockManager::name(self.ds.id, &c.pk);
            if self.ds.txn.locks.try_s_instant(name) && self.ds.txn.abort_epoch() == self.epoch {
                return Ok(Decided {
                    hit: Some(QueryHit {
                        pk: Self::pk_values(&c.pk)?,
                        record: None,
                        distance_m: dist,
                    }),
                    fetched: false,
                });
            }
        }
        let none = Decided {
            hit: None,
            fetched: true,
        };
        let Some(bytes) = self.ds.get_raw(&c.pk)? else {
            return Ok(none);
        };
        let rec = value::decode_value(&bytes)?;
        let Some(d) = self
            .ds
            .record_matches(&self.def, &self.query, &self.tokens, &rec, &c.pk)?
        else {
            return Ok(none);
        };
        Ok(Decided {
            hit: Some(QueryHit {
                pk: Self::pk_values(&c.pk)?,
                record: Some(rec),
                distance_m: d,
            }),
            fetched: true,
        })
    }

    /// Decide a batch of candidates (in primary-key order) on this thread
    /// and one rayon worker: random primary-index fetches are the cost of a
    /// validated query, and they are independent. The two share the batch
    /// in chunks taken from an atomic counter, so the calling thread starts
    /// at once and never waits for work that was not started: on a busy
    /// machine, where a pool thread may not run for a while, it simply does
    /// more of the chunks itself (with `par_iter` it slept until the pool
    /// had done everything: wall time up to 10x the CPU time). Hits keep the
    /// candidates' order.
    fn decide_batch(&mut self, batch: Vec<Cand>) -> Result<()> {
        use std::sync::OnceLock;
        use std::sync::atomic::{AtomicUsize, Ordering};
        let chunks = batch.len().div_ceil(FETCH_CHUNK);
        let next = AtomicUsize::new(0);
        let slots: Vec<OnceLock<Vec<Result<Decided>>>> =
            (0..chunks).map(|_| OnceLock::new()).collect();
        let this = &*self;
        let work = || {
            loop {
                let c = next.fetch_add(1, Ordering::Relaxed);
                if c >= chunks {
                    break;
                }
                let lo = c * FETCH_CHUNK;
                let hi = (lo + FETCH_CHUNK).min(batch.len());
                let decided = batch[lo..hi]
                    .iter()
                    .map(|c| this.decide_one(c, this.list_distance(c)))
                    .collect();
                // Each chunk index is taken once, so the slot is empty.
                let _ = slots[c].set(decided);
            }
        };
        rayon::in_place_scope(|s| {
            s.spawn(|_| work());
            work();
        });
        for slot in slots {
            for d in slot.into_inner().into_iter().flatten() {
                let d = d?;
                self.count(&d);
                if let Some(h) = d.hit {
                    self.ready.push_back(h);
                }
            }
        }
        Ok(())
    }

    /// Whether the entry alone decides the predicate (the candidate lists
    /// were already filtered exactly for those that do).
    fn index_decides(&self, c: &Cand) -> bool {
        match self.def.kind {
            IndexKind::Btree | IndexKind::Keyword | IndexKind::Composite => true,
            IndexKind::Ngram | IndexKind::Embedded | IndexKind::Eager | IndexKind::Lazy => false,
            IndexKind::Rtree
            | IndexKind::Dhvb
            | IndexKind::Dhb
            | IndexKind::Shb
            | IndexKind::Sif => c.bounds.is_some_and(|(_, k)| k != BoundsKind::Mbr),
        }
    }

    fn next_hit(&mut self) -> Result<Option<QueryHit>> {
        loop {
            match &mut self.source {
                Source::Hits(hits) => return Ok(hits.pop_front()),
                Source::List(list) => {
                    if let Some(h) = self.ready.pop_front() {
                        return Ok(Some(h));
                    }
                    // Decide as many candidates ahead as the limit may use.
                    let want = self
                        .opts
                        .limit
                        .map_or(usize::MAX, |l| l.saturating_sub(self.returned));
                    let n = list.len().min(want.max(1)).min(FETCH_BATCH);
                    if n >= PAR_MIN && rayon::current_num_threads() > 1 {
                        let batch: Vec<Cand> = list.drain(..n).collect();
                        self.decide_batch(batch)?;
                        continue;
                    }
                    let Some(c) = list.pop_front() else {
                        return Ok(None);
                    };
                    let dist = self.list_distance(&c);
                    if let Some(h) = self.decide(&c, dist)? {
                        return Ok(Some(h));
                    }
                }
                Source::Knn {
                    cursors,
                    heads,
                    pending,
                } => {
                    // The nearest head over all partitions.
                    let mut best: Option<usize> = None;
                    for (i, h) in heads.iter().enumerate() {
                        if let Some((d, _)) = h
                            && best.is_none_or(|b| heads[b].as_ref().is_some_and(|(bd, _)| d < bd))
                        {
                            best = Some(i);
                        }
                    }
                    let next_d = best.and_then(|b| heads[b].as_ref().map(|(d, _)| *d));
                    if let Some(p) = pending.peek()
                        && next_d.is_none_or(|d| p.d <= d)
                    {
                        let p = pending.pop().map(|p| p.hit);
                        return Ok(p);
                    }
                    let Some(b) = best else {
                        return Ok(None);
                    };
                    let Some((d, e)) = heads[b].take() else {
                        return Ok(None);
                    };
                    heads[b] = cursors[b].next_entry()?;
                    let pk = self.def.entry_pk(&e.key)?.to_vec();
                    let Query::Nearest { lon, lat, .. } = self.query else {
                        return Ok(None);
                    };
                    // Metres from the entry's bounds: exact for points and
                    // rectangles (the record check replaces it for polygons).
                    let entry_m = match e.bounds_kind {
                        BoundsKind::Point => {
                            sphere::haversine_m(lon, lat, e.bounds[0], e.bounds[1])
                        }
                        _ => sphere::min_dist_rect_m(lon, lat, &e.bounds),
                    };
                    let c = Cand {
                        pk,
                        bounds: Some((e.bounds, e.bounds_kind)),
                    };
                    if let Some(mut h) = self.decide(&c, Some(entry_m))? {
                        let exact = h.distance_m.unwrap_or(entry_m);
                        h.distance_m = Some(exact);
                        let key = sphere::NearOrder::m_to_key(exact);
                        // Nearer than its entry says: the record moved after
                        // the search began, so this entry is stale (its new
                        // entry, if the search can see it, answers for it);
                        // emitting it now could break the distance order.
                        if key < d * (1.0 - 1e-9) {
                            continue;
                        }
                        // Held until no candidate can come nearer (keys are
                        // haversines, see `NearOrder`).
                        let key = key.max(d);
                        if let Source::Knn { pending, .. } = &mut self.source {
                            pending.push(Pending { d: key, hit: h });
                        }
                    }
                }
            }
        }
    }

    fn list_distance(&self, c: &Cand) -> Option<f64> {
        match (&self.query, c.bounds) {
            (Query::WithinDistance { lon, lat, .. }, Some((r, k))) if k != BoundsKind::Mbr => {
                Some(sphere::min_dist_rect_m(*lon, *lat, &r))
            }
            _ => None,
        }
    }
}

impl Iterator for QueryResults {
    type Item = Result<QueryHit>;

    fn next(&mut self) -> Option<Result<QueryHit>> {
        if self.opts.limit.is_some_and(|l| self.returned >= l) {
            return None;
        }
        let limit_k = match self.query {
            Query::Nearest { k, .. } => Some(k),
            _ => None,
        };
        if limit_k.is_some_and(|k| self.returned >= k) {
            return None;
        }
        match self.next_hit() {
            Ok(Some(h)) => {
                self.returned += 1;
                Some(Ok(h))
            }
            Ok(None) => None,
            Err(e) => Some(Err(e)),
        }
    }
}

/// Next-match search of a Hilbert-ordered B+-tree (DHVB): scan while the
/// entries' cells are inside the query rectangle's cells; on leaving, seek
/// to the next Hilbert value whose cell is inside (`geo::hilbert_range`).
/// Each seek is a new reconciled cursor over all components (counted in
/// `blocks` as seeks).
fn hilbert_search(
    t: &Arc<crate::lsm::LsmTree>,
    space: &crate::geo::hilbert::Space,
    rects: &[Rect],
    stats: &mut SearchStats,
) -> Result<Vec<SpatialEntry>> {
    use crate::geo::hilbert_range::{cell_rect, next_match};
    use crate::lsm::kind::decode_bounds_kind;
    let snap = t.snapshot();
    stats.components +=
        (snap.mems.iter().filter(|m| !m.is_empty()).count() + snap.disk.len()) as u64;
    let mut out = Vec::new();
    for r in rects {
        let q = cell_rect(space, r);
        let mut from = next_match(&q, 0);
        while let Some(h) = from {
            stats.blocks += 1;
            let start = h.to_be_bytes();
            let mut scan = t.scan(&snap, Bound::Included(&start[..]), Bound::Unbounded, false)?;
            from = None;
            while let Some((k, e)) = scan.next_entry()? {
                let Some(hb) = k.get(..8) else { continue };
                let mut b = [0u8; 8];
                b.copy_from_slice(hb);
                let hk = u64::from_be_bytes(b);
                let (cx, cy): (u32, u32) = fast_hilbert::h2xy(hk, 32);
                if !(q[0] <= cx && cx <= q[2] && q[1] <= cy && cy <= q[3]) {
                    // Left the rectangle: jump to the next value inside.
                    from = next_match(&q, hk);
                    break;
                }
                if let Some((bounds, bk)) = decode_bounds_kind(&e.value) {
                    stats.candidates += 1;
                    if crate::geo::rect_intersects(r, &bounds) {
                        out.push(SpatialEntry {
                            key: k,
                            delete: false,
                            bounds,
                            bounds_kind: bk,
                        });
                    }
                }
            }
        }
    }
    out.sort_by(|a, b| a.key.cmp(&b.key));
    out.dedup_by(|a, b| a.key == b.key);
    Ok(out)
}

/// Next-match search of a DHB-tree: as [`hilbert_search`], at full
/// resolution on the order-64 curve of `geo::dhb` (keys hold the points, so
/// a key inside the query's cells is a hit, with no false positives).
fn dhb_search(
    t: &Arc<crate::lsm::LsmTree>,
    rects: &[Rect],
    stats: &mut SearchStats,
) -> Result<Vec<SpatialEntry>> {
    use crate::geo::dhb;
    let snap = t.snapshot();
    stats.components +=
        (snap.mems.iter().filter(|m| !m.is_empty()).count() + snap.disk.len()) as u64;
    let mut out = Vec::new();
    for r in rects {
        let Some(q) = dhb::cells_of(r) else { continue };
        let mut from = dhb::next_match(&q, 0);
        while let Some(h) = from {
            stats.blocks += 1;
            let start = h.to_be_bytes();
            let mut scan = t.scan(&snap, Bound::Included(&start[..]), Bound::Unbounded, false)?;
            from = None;
            while let Some((k, _)) = scan.next_entry()? {
                let Some(hb) = k.get(..16) else { continue };
                let mut b = [0u8; 16];
                b.copy_from_slice(hb);
                let hk = u128::from_be_bytes(b);
                let cell = dhb::cell(hk);
                if !dhb::inside(&q, cell) {
                    from = dhb::next_match(&q, hk);
                    break;
                }
                stats.candidates += 1;
                let (x, y) = dhb::point(hk);
                out.push(SpatialEntry {
                    key: k,
                    delete: false,
                    bounds: [x, y, x, y],
                    bounds_kind: BoundsKind::Point,
                });
            }
        }
    }
    out.sort_by(|a, b| a.key.cmp(&b.key));
    out.dedup_by(|a, b| a.key == b.key);
    Ok(out)
}

/// Search of an SHB-tree or SIF index: the query rectangle's cells (covering
/// rule, at most `grid::QUERY_CELLS`); SHB scans their subtrees merged into
/// key ranges and probes their ancestors, SIF looks up one subtree token per
/// cell and one exact token per ancestor. Entries are refined by their
/// bounds; the caller de-duplicates by primary key.
fn grid_search(
    t: &Arc<crate::lsm::LsmTree>,
    def: &IndexDef,
    rects: &[Rect],
    stats: &mut SearchStats,
) -> Result<Vec<SpatialEntry>> {
    use crate::geo::grid::QUERY_CELLS;
    use crate::lsm::kind::decode_bounds_kind;
    let grid = def.grid()?;
    let snap = t.snapshot();
    stats.components +=
        (snap.mems.iter().filter(|m| !m.is_empty()).count() + snap.disk.len()) as u64;
    let mut out = Vec::new();
    for r in rects {
        if r.iter().any(|v| v.is_nan()) || r[0] > r[2] || r[1] > r[3] {
            continue;
        }
        let cells = grid.decompose(r, QUERY_CELLS);
        // (lower bound, exclusive upper bound or none) key ranges.
        let mut ranges: Vec<(Vec<u8>, Option<Vec<u8>>)> = Vec::new();
        let exact = |prefix: &[u8]| -> (Vec<u8>, Option<Vec<u8>>) {
            // The last byte is a level (< 16), so +1 cannot overflow.
            let mut hi = prefix.to_vec();
            if let Some(b) = hi.last_mut() {
                *b = b.saturating_add(1);
            }
            (prefix.to_vec(), Some(hi))
        };
        if def.kind == IndexKind::Shb {
            let plan = grid.plan(&cells);
            for (lo, hi) in plan.ranges {
                let mut l = lo.to_be_bytes().to_vec();
                l.push(0);
                let h = hi.checked_add(1).map(|h| {
                    let mut v = h.to_be_bytes().to_vec();
                    v.push(0);
                    v
                });
                ranges.push((l, h));
            }
            for a in plan.ancestors {
                ranges.push(exact(&a.key()));
            }
        } else {
            for tok in grid.sif_query_tokens(&cells) {
                ranges.push(exact(&tok));
            }
        }
        for (lo, hi) in &ranges {
            stats.blocks += 1;
            let hi_b = match hi {
                Some(h) => Bound::Excluded(h.clone()),
                None => Bound::Unbounded,
            };
            let mut scan = t.scan(&snap, Bound::Included(lo.as_slice()), hi_b, false)?;
            while let Some((k, e)) = scan.next_entry()? {
                let Some((bounds, bk)) = decode_bounds_kind(&e.value) else {
                    continue;
                };
                stats.candidates += 1;
                if crate::geo::rect_intersects(r, &bounds) {
                    out.push(SpatialEntry {
                        key: k,
                        delete: false,
                        bounds,
                        bounds_kind: bk,
                    });
                }
            }
        }
    }
    Ok(out)
}

/// Great-circle order around the query point for the R-tree kNN search.
struct SphereMetric(sphere::NearOrder);

impl KnnMetric for SphereMetric {
    fn bound(&self, r: &Rect) -> f64 {
        self.0.rect_bound(r)
    }
    fn key(&self, r: &Rect, kind: BoundsKind) -> f64 {
        match kind {
            BoundsKind::Point => self.0.point_key(r[0], r[1]),
            // Exact for a rectangle; for a polygon's MBR a lower bound of the
            // polygon's distance (`predicates::distance_m` never goes below it).
            BoundsKind::Rect | BoundsKind::Mbr => self.0.rect_key(r),
        }
    }
    fn key_lower(&self, r: &Rect, kind: BoundsKind) -> f64 {
        match kind {
            BoundsKind::Point => self.0.point_key_lower(r[0], r[1]),
            BoundsKind::Rect | BoundsKind::Mbr => self.0.rect_bound(r),
        }
    }
}

/// The predicate of a spatial join.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum JoinPredicate {
    /// The geometries intersect.
    Intersects,
    /// The indexed geometry is within this many metres of the probe (the
    /// probe must be a point).
    WithinDistance(f64),
}

/// Rectangles an R-tree search needs for a query geometry.
fn query_rects(g: &Geometry) -> Vec<Rect> {
    match g {
        Geometry::Rect {
            min_x,
            min_y,
            max_x,
            max_y,
        } => split_query_rect(&[*min_x, *min_y, *max_x, *max_y]),
        other => {
            let (a, b, c, d) = other.mbr();
            vec![[a, b, c, d]]
        }
    }
}

/// The query geometry split at the antimeridian, for exact tests.
fn query_parts(g: &Geometry) -> Vec<Geometry> {
    match g {
        Geometry::Rect { min_x, max_x, .. } if min_x > max_x => query_rects(g)
            .into_iter()
            .map(|r| Geometry::rect(r[0], r[1], r[2], r[3]))
            .collect(),
        other => vec![other.clone()],
    }
}

fn bounds_geometry(r: &Rect, k: BoundsKind) -> Geometry {
    match k {
        BoundsKind::Point => Geometry::point(r[0], r[1]),
        _ => Geometry::rect(r[0], r[1], r[2], r[3]),
    }
}

fn check_point(lon: f64, lat: f64) -> Result<()> {
    if !lon.is_finite() || !(-90.0..=90.0).contains(&lat) {
        return Err(Error::invalid(
            None,
            format!(
                "query point ({lon}, {lat}) is not a valid longitude/latitude (latitude must be within [-90, 90])"
            ),
        ));
    }
    Ok(())
}

impl Dataset {
    /// Run `query` through the secondary index `index`. See the module doc
    /// for the two access paths; results stream, stopping at `opts.limit`.
    pub fn query(
        self: &Arc<Self>,
        index: &str,
        query: &Query,
        opts: QueryOptions,
    ) -> Result<QueryResults> {
        let epoch = self.txn.abort_epoch();
        let (i, set) = self.index_by_name(index)?;
        let def = set.defs[i].clone();
        let fits = matches!(
            (def.kind, query),
            (IndexKind::Btree | IndexKind::Composite, Query::Range { .. })
                | (
                    IndexKind::Btree
                        | IndexKind::Composite
                        | IndexKind::Embedded
                        | IndexKind::Eager
                        | IndexKind::Lazy,
                    Query::Recent { .. }
                )
                | (
                    IndexKind::Rtree,
                    Query::Intersects(_) | Query::WithinDistance { .. } | Query::Nearest { .. }
                )
                | (
                    IndexKind::Dhvb | IndexKind::Dhb | IndexKind::Shb | IndexKind::Sif,
                    Query::Intersects(_) | Query::WithinDistance { .. }
                )
                | (IndexKind::Keyword | IndexKind::Ngram, Query::Text { .. })
        );
        if !fits {
            return Err(Error::invalid(
                None,
                format!(
                    "index `{index}` is a {} index and cannot answer a {} query ({})",
                    def.kind,
                    query.name(),
                    match def.kind {
                        IndexKind::Btree | IndexKind::Composite =>
                            "use a range, equality or recent query",
                        IndexKind::Embedded | IndexKind::Eager | IndexKind::Lazy =>
                            "use a recent query (the k most recent matches)",
                        IndexKind::Rtree => "use intersects, within-distance or nearest",
                        IndexKind::Dhvb | IndexKind::Dhb | IndexKind::Shb | IndexKind::Sif =>
                            "use intersects or within-distance (kNN needs an rtree index)",
                        _ => "use a text query",
                    }
                ),
            ));
        }
        let mut stats = QueryStats::default();
        let mut tokens = Vec::new();
        let source = match query {
            Query::Recent { lo, hi, k } => {
                let k = match (*k, opts.limit) {
                    (Some(k), Some(l)) => Some(k.min(l)),
                    (k, l) => k.or(l),
                };
                Source::Hits(
                    self.recent_query(&set, i, lo, hi, k, epoch, &mut stats)?
                        .into(),
                )
            }
            Query::Range { lo, hi } => {
                let lo_s = lo.as_ref().map(Vec::as_slice);
                let hi_s = hi.as_ref().map(Vec::as_slice);
                let (elo, ehi) = self.index_bounds(&def, lo_s, hi_s)?;
                let entries = self.index_entries(&set, i, &elo, &ehi)?;
                stats.candidates = entries.len() as u64;
                stats.components += self.tree_components(&set, i);
                let mut pks = Vec::with_capacity(entries.len());
                for k in entries {
                    pks.push(def.entry_pk(&k)?.to_vec());
                }
                pks.sort_unstable();
                pks.dedup();
                Source::List(
                    pks.into_iter()
                        .map(|pk| Cand { pk, bounds: None })
                        .collect(),
                )
            }
            Query::Intersects(g) => {
                let parts = query_parts(g);
                for p in &parts {
                    p.validate()?;
                }
                let rects = query_rects(g);
                // Exact bounds decide now; an MBR waits for the record.
                let keep = |e: &SpatialEntry| {
                    e.bounds_kind == BoundsKind::Mbr || {
                        let eg = bounds_geometry(&e.bounds, e.bounds_kind);
                        parts.iter().any(|q| predicates::intersects(&eg, q))
                    }
                };
                let hits =
                    self.spatial_candidates(&set, i, &rects, opts.index_only, &keep, &mut stats)?;
                Source::List(hits)
            }
            Query::WithinDistance { lon, lat, metres } => {
                check_point(*lon, *lat)?;
                if !(metres.is_finite() && *metres >= 0.0) {
                    return Err(Error::invalid(
                        None,
                        format!(
                            "the distance must be a finite number of metres >= 0, got {metres}"
                        ),
                    ));
                }
                let rects = sphere::circle_bboxes(*lon, *lat, *metres);
                let keep = |e: &SpatialEntry| {
                    e.bounds_kind == BoundsKind::Mbr
                        || sphere::min_dist_rect_m(*lon, *lat, &e.bounds) <= *metres
                };
                let hits =
                    self.spatial_candidates(&set, i, &rects, opts.index_only, &keep, &mut stats)?;
                Source::List(hits)
            }
            Query::Nearest { lon, lat, k } => {
                check_point(*lon, *lat)?;
                let (lon, lat) = (*lon, *lat);
                let mut cursors = Vec::new();
                if *k > 0 {
                    let metric: Arc<dyn KnnMetric> =
                        Arc::new(SphereMetric(sphere::NearOrder::new(lon, lat)));
                    for t in &set.trees[i] {
                        cursors.push(t.knn(t.snapshot(), metric.clone())?);
                    }
                }
                let mut heads = Vec::with_capacity(cursors.len());
                for c in &mut cursors {
                    heads.push(c.next_entry()?);
                }
                Source::Knn {
                    cursors,
                    heads,
                    pending: BinaryHeap::new(),
                }
            }
            Query::Text { text, all } => {
                tokens = def.query_tokens(text);
                if tokens.is_empty() {
                    return Err(Error::invalid(
                        None,
                        format!("the text query `{text}` has no words to search for"),
                    ));
                }
                stats.components += self.tree_components(&set, i);
                let short_gram = def.kind == IndexKind::Ngram
                    && tokens.len() == 1
                    && tokens[0].chars().count() < def.gram();
                let mut acc: Option<BTreeSet<Vec<u8>>> = None;
                for t in &tokens {
                    let mut lo = Vec::new();
                    value::encode_key_part(&Value::String(t.clone()), &mut lo)?;
                    let hi = if short_gram {
                        // Every gram that starts with the pattern: drop the
                        // string terminator (0x00 0x01) and bound by 0xFF,
                        // which UTF-8 never contains.
                        lo.truncate(lo.len() - 2);
                        let mut h = lo.clone();
                        h.push(0xFF);
                        h
                    } else {
                        value::prefix_upper_bound(&lo)
                    };
                    let entries =
                        self.index_entries(&set, i, &Bound::Included(lo), &Bound::Excluded(hi))?;
                    stats.candidates += entries.len() as u64;
                    let mut pks = BTreeSet::new();
                    for k in entries {
                        pks.insert(def.entry_pk(&k)?.to_vec());
                    }
                    let intersect = *all || def.kind == IndexKind::Ngram;
                    acc = Some(match acc {
                        None => pks,
                        Some(a) if intersect => a.intersection(&pks).cloned().collect(),
                        Some(mut a) => {
                            a.extend(pks);
                            a
                        }
                    });
                }
                Source::List(
                    acc.unwrap_or_default()
                        .into_iter()
                        .map(|pk| Cand { pk, bounds: None })
                        .collect(),
                )
            }
        };
        Ok(QueryResults {
            ds: self.clone(),
            def,
            query: query.clone(),
            tokens,
            opts,
            source,
            epoch,
            ready: VecDeque::new(),
            returned: 0,
            stats,
        })
    }

    fn tree_components(&self, set: &IndexSet, i: usize) -> u64 {
        set.trees[i]
            .iter()
            .map(|t| {
                let s = t.snapshot();
                (s.mems.iter().filter(|m| !m.is_empty()).count() + s.disk.len()) as u64
            })
            .sum()
    }

    /// Live R-tree entries intersecting `rects` from every partition that
    /// `keep` accepts (the query's exact test on exact bounds, applied before
    /// the candidates are collected and sorted), as candidates sorted by
    /// primary key. `exact`: also drop
    /// entries whose key has a newer version that does not match (a record
    /// moved within its key cell), as index-only answers need; validated
    /// candidates are re-checked against the record anyway.
    fn spatial_candidates(
        &self,
        set: &IndexSet,
        i: usize,
        rects: &[Rect],
        exact: bool,
        keep: &dyn Fn(&SpatialEntry) -> bool,
        stats: &mut QueryStats,
    ) -> Result<VecDeque<Cand>> {
        let def = &set.defs[i];
        let mut ss = SearchStats::default();
        let mut out = Vec::new();
        for t in &set.trees[i] {
            let found = match def.kind {
                IndexKind::Dhvb => hilbert_search(t, &def.space(), rects, &mut ss)?,
                IndexKind::Dhb => dhb_search(t, rects, &mut ss)?,
                IndexKind::Shb | IndexKind::Sif => grid_search(t, def, rects, &mut ss)?,
                _ => t.search_spatial(&t.snapshot(), rects, exact, &mut ss)?,
            };
            for e in found {
                if keep(&e) {
                    out.push(Cand {
                        pk: def.entry_pk(&e.key)?.to_vec(),
                        bounds: Some((e.bounds, e.bounds_kind)),
                    });
                }
            }
        }
        stats.components += ss.components;
        stats.blocks += ss.blocks;
        stats.candidates += ss.candidates;
        stats.z_pruned += ss.z_pruned;
        out.sort_by(|a, b| a.pk.cmp(&b.pk));
        out.dedup_by(|a, b| a.pk == b.pk);
        Ok(out.into())
    }

    /// Re-check a query against a fetched record: `None` if it does not
    /// match, else `Some(distance)` (the distance for distance queries).
    pub(crate) fn record_matches(
        &self,
        def: &IndexDef,
        q: &Query,
        tokens: &[String],
        rec: &Value,
        pk: &[u8],
    ) -> Result<Option<Option<f64>>> {
        let field = &def.fields[0];
        let geom = || match rec.get(field) {
            Some(Value::Geometry(g)) => Some(g),
            _ => None,
        };
        Ok(match q {
            Query::Range { lo, hi } | Query::Recent { lo, hi, .. } => {
                let lo_s = lo.as_ref().map(Vec::as_slice);
                let hi_s = hi.as_ref().map(Vec::as_slice);
                let (elo, ehi) = self.index_bounds(def, lo_s, hi_s)?;
                match def.entry_key(rec, pk).ok().flatten() {
                    Some(k) if Dataset::in_bounds(&k, &elo, &ehi) => Some(None),
                    _ => None,
                }
            }
            Query::Intersects(g) => match geom() {
                Some(rg) if query_parts(g).iter().any(|p| predicates::intersects(rg, p)) => {
                    Some(None)
                }
                _ => None,
            },
            Query::WithinDistance { lon, lat, metres } => match geom() {
                Some(rg) => {
                    let d = predicates::distance_m(rg, *lon, *lat);
                    (d <= *metres).then_some(Some(d))
                }
                None => None,
            },
            Query::Nearest { lon, lat, .. } => {
                geom().map(|rg| Some(predicates::distance_m(rg, *lon, *lat)))
            }
            Query::Text { text, all } => {
                let Some(Value::String(s)) = rec.get(field) else {
                    return Ok(None);
                };
                let ok = if def.kind == IndexKind::Ngram {
                    // Per-character lowercasing, as the tokenizer does.
                    let fold = |t: &str| t.chars().flat_map(char::to_lowercase).collect::<String>();
                    fold(s).contains(&fold(text))
                } else {
                    let have = def.tokens(s);
                    if *all {
                        tokens.iter().all(|t| have.binary_search(t).is_ok())
                    } else {
                        tokens.iter().any(|t| have.binary_search(t).is_ok())
                    }
                };
                ok.then_some(None)
            }
        })
    }

    /// Index nested-loop spatial join: for each probe `(id, geometry)`, search
    /// `index` and yield `(id, hit)` for every match. Lazy: probes are run
    /// one at a time as results are consumed.
    pub fn spatial_join<I>(
        self: &Arc<Self>,
        index: &str,
        probes: I,
        pred: JoinPredicate,
        opts: QueryOptions,
    ) -> Result<JoinResults<I::IntoIter>>
    where
        I: IntoIterator<Item = (Value, Geometry)>,
    {
        let (i, set) = self.index_by_name(index)?;
        if !set.defs[i].kind.is_spatial() {
            return Err(Error::invalid(
                None,
                format!(
                    "a spatial join needs a spatial index (rtree, dhvb, dhb, shb or sif); `{index}` is a {} index",
                    set.defs[i].kind
                ),
            ));
        }
        Ok(JoinResults {
            ds: self.clone(),
            index: index.to_owned(),
            probes: probes.into_iter(),
            pred,
            opts: QueryOptions {
                limit: None,
                ..opts
            },
            limit: opts.limit,
            current: None,
            returned: 0,
            stats: QueryStats::default(),
        })
    }
}

/// Streaming results of [`Dataset::spatial_join`].
pub struct JoinResults<I> {
    ds: Arc<Dataset>,
    index: String,
    probes: I,
    pred: JoinPredicate,
    opts: QueryOptions,
    limit: Option<usize>,
    current: Option<(Value, QueryResults)>,
    returned: usize,
    stats: QueryStats,
}

impl<I> JoinResults<I> {
    /// What the join touched so far (finished probes plus the current one).
    pub fn stats(&self) -> QueryStats {
        let mut s = self.stats;
        if let Some((_, r)) = &self.current {
            let c = r.stats();
            s.components += c.components;
            s.blocks += c.blocks;
            s.candidates += c.candidates;
            s.fetched += c.fetched;
            s.index_only += c.index_only;
        }
        s
    }
}

impl<I: Iterator<Item = (Value, Geometry)>> Iterator for JoinResults<I> {
    type Item = Result<(Value, QueryHit)>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.limit.is_some_and(|l| self.returned >= l) {
            return None;
        }
        loop {
            if let Some((id, r)) = &mut self.current {
                match r.next() {
                    Some(Ok(h)) => {
                        self.returned += 1;
                        return Some(Ok((id.clone(), h)));
                    }
                    Some(Err(e)) => return Some(Err(e)),
                    None => {
                        let c = r.stats();
                        self.stats.components += c.components;
                        self.stats.blocks += c.blocks;
                        self.stats.candidates += c.candidates;
                        self.stats.fetched += c.fetched;
                        self.stats.index_only += c.index_only;
                        self.current = None;
                    }
                }
            }
            let (id, g) = self.probes.next()?;
            let q = match (self.pred, &g) {
                (JoinPredicate::Intersects, _) => Query::Intersects(g),
                (JoinPredicate::WithinDistance(m), Geometry::Point { x, y }) => {
                    Query::WithinDistance {
                        lon: *x,
                        lat: *y,
                        metres: m,
                    }
                }
                (JoinPredicate::WithinDistance(_), other) => {
                    return Some(Err(Error::invalid(
                        None,
                        format!(
                            "a within-distance join needs point probes; probe {} is a {}",
                            value::key_to_string(std::slice::from_ref(&id)),
                            other.type_name()
                        ),
                    )));
                }
            };
            match self.ds.query(&self.index, &q, self.opts) {
                Ok(r) => self.current = Some((id, r)),
                Err(e) => return Some(Err(e)),
            }
        }
    }
}
