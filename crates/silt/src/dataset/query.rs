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
//!   (the MBR of a polygon, an n-gram candidate) are always validated, as
//!   are all hits of a dataset whose records expire (`ttl`).
//!
//! Results are produced lazily by [`QueryResults`] (an iterator), so a limit
//! stops the fetching early. Distances are great-circle metres on a sphere of
//! radius [`crate::geo::sphere::EARTH_RADIUS_M`] and treat coordinates as
//! longitude/latitude degrees.

use super::Dataset;
use crate::error::{Error, Result};
use crate::geo::sphere;
use crate::index::query::{Candidate as Cand, IndexOnly, Recheck, check_point, in_bounds};
pub use crate::index::query::{Query, QueryStats};
use crate::index::rtree::SphereMetric;
use crate::index::{IndexDef, IndexType};
use crate::lsm::kind::{BoundsKind, PkSplit};
use crate::lsm::memtable::SpatialEntry;
use crate::lsm::spatial::KnnCursor;
use crate::txn::LockManager;
use crate::value::{self, Geometry, Value};
use std::cmp::Ordering as CmpOrdering;
use std::collections::{BinaryHeap, VecDeque};
use std::sync::Arc;

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
    /// The record as stored, not decoded, instead of `record`: asked for
    /// with [`QueryResults::stored`], given where the index's re-check
    /// reads the record's fields in place.
    pub stored: Option<Vec<u8>>,
}

enum HitStream {
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
    /// How a fetched record is re-checked (prepared by the index kind).
    recheck: Recheck,
    /// Whether an entry alone decides the predicate (index-only queries).
    decides: IndexOnly,
    /// Where the primary key starts in an entry key.
    split: PkSplit,
    opts: QueryOptions,
    source: HitStream,
    /// Hits of a list query decided ahead (a batch fetched in parallel).
    ready: VecDeque<QueryHit>,
    epoch: u64,
    returned: usize,
    stats: QueryStats,
    /// Hand B+-tree hits over as stored ([`QueryResults::stored`]).
    stored: bool,
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
        if let HitStream::Knn { cursors, .. } = &self.source {
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
        if self.opts.index_only && self.decides.decides(c) {
            let name = LockManager::name(self.ds.id, &c.pk);
            if self.ds.txn.locks.try_s_instant(name) && self.ds.txn.abort_epoch() == self.epoch {
                return Ok(Decided {
                    hit: Some(QueryHit {
                        pk: Self::pk_values(&c.pk)?,
                        record: None,
                        distance_m: dist,
                        stored: None,
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
        if let Some(matches) = self.stored_matches(&bytes, &c.pk)? {
            return Ok(if matches {
                Decided {
                    hit: Some(QueryHit {
                        pk: Self::pk_values(&c.pk)?,
                        record: None,
                        distance_m: None,
                        stored: Some(bytes),
                    }),
                    fetched: true,
                }
            } else {
                none
            });
        }
        let rec = value::decode_value(&bytes)?;
        let Some(d) = self.recheck.matches(&self.def, &rec, &c.pk)? else {
            return Ok(none);
        };
        Ok(Decided {
            hit: Some(QueryHit {
                pk: Self::pk_values(&c.pk)?,
                record: Some(rec),
                distance_m: d,
                stored: None,
            }),
            fetched: true,
        })
    }

    /// Hand hits over as stored, not decoded ([`QueryHit::stored`]), where
    /// the re-check can read the record in place: B+-tree ranges on
    /// top-level fields. Other hits keep their decoded record.
    pub fn stored(mut self) -> Self {
        self.stored = true;
        self
    }

    /// The B+-tree re-check of a stored record, read in place: whether
    /// its entry key (of the indexed fields' values, as
    /// [`IndexDef::entry_key`] makes it) lies in the bounds; `None` when
    /// not asked for stored hits or this re-check needs the decoded record.
    fn stored_matches(&self, bytes: &[u8], pk: &[u8]) -> Result<Option<bool>> {
        let Recheck::KeyRange((lo, hi)) = &self.recheck else {
            return Ok(None);
        };
        if !self.stored || self.def.fields.iter().any(|f| f.contains('.')) {
            return Ok(None);
        }
        let mut parts = Vec::with_capacity(self.def.fields.len());
        for f in &self.def.fields {
            match value::decode_field(bytes, f)? {
                // No entry: what `entry_key` makes of a missing or null
                // field, or (an error) of one no B+-tree entry can hold.
                None
                | Some(Value::Null | Value::Array(_) | Value::Object(_) | Value::Geometry(_)) => {
                    return Ok(Some(false));
                }
                Some(v) => parts.push(v),
            }
        }
        let mut k = Vec::with_capacity(32 + pk.len());
        if value::encode_key(&parts, &mut k).is_err() {
            return Ok(Some(false));
        }
        k.extend_from_slice(pk);
        Ok(Some(in_bounds(&k, lo, hi)))
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

    fn next_hit(&mut self) -> Result<Option<QueryHit>> {
        loop {
            match &mut self.source {
                HitStream::Hits(hits) => return Ok(hits.pop_front()),
                HitStream::List(list) => {
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
                        // Only fetches are worth a second thread: the
                        // candidates their entries decide (index-only)
                        // take nanoseconds, less than handing them over.
                        let fetches = if self.opts.index_only {
                            batch.iter().filter(|c| !self.decides.decides(c)).count()
                        } else {
                            n
                        };
                        if fetches >= PAR_MIN {
                            self.decide_batch(batch)?;
                        } else {
                            for c in &batch {
                                let dist = self.list_distance(c);
                                if let Some(h) = self.decide(c, dist)? {
                                    self.ready.push_back(h);
                                }
                            }
                        }
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
                HitStream::Knn {
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
                    let pk = self.split.pk(&e.key)?.to_vec();
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
                        if let HitStream::Knn { pending, .. } = &mut self.source {
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

/// The predicate of a spatial join.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum JoinPredicate {
    /// The geometries intersect.
    Intersects,
    /// The indexed geometry is within this many metres of the probe (the
    /// probe must be a point).
    WithinDistance(f64),
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
        let imp: &'static dyn IndexType = def.kind.imp();
        if !imp.answers(query) {
            return Err(Error::invalid(
                None,
                format!(
                    "index `{index}` is a {} index and cannot answer a {} query ({})",
                    def.kind,
                    query.name(),
                    imp.hint()
                ),
            ));
        }
        // A brin index answers a range query through its zone maps: the
        // embedded path, all matches (newest first).
        let as_recent;
        let query = match query {
            Query::Range { lo, hi } if def.kind == crate::index::IndexKind::Brin => {
                as_recent = Query::Recent {
                    lo: lo.clone(),
                    hi: hi.clone(),
                    k: None,
                };
                &as_recent
            }
            q => q,
        };
        let mut stats = QueryStats::default();
        let trees = &set.trees[i];
        let keys = self.query_keys(&def, query)?;
        let source = match query {
            Query::Recent { lo, hi, k } => {
                let k = match (*k, opts.limit) {
                    (Some(k), Some(l)) => Some(k.min(l)),
                    (k, l) => k.or(l),
                };
                let Some(keys) = &keys else {
                    return Err(Error::invalid(None, "a recent query needs key bounds"));
                };
                HitStream::Hits(
                    self.recent_query(&set, i, lo, hi, keys, k, epoch, &mut stats)?
                        .into(),
                )
            }
            Query::Nearest { lon, lat, k } => {
                check_point(*lon, *lat)?;
                let mut cursors = Vec::new();
                if *k > 0 {
                    let metric = SphereMetric::around(*lon, *lat);
                    for t in trees {
                        cursors.push(t.knn(t.snapshot(), metric.clone())?);
                    }
                }
                let mut heads = Vec::with_capacity(cursors.len());
                for c in &mut cursors {
                    heads.push(c.next_entry()?);
                }
                HitStream::Knn {
                    cursors,
                    heads,
                    pending: BinaryHeap::new(),
                }
            }
            _ => HitStream::List(
                imp.candidates(
                    &def,
                    trees,
                    query,
                    keys.as_ref(),
                    opts.index_only,
                    &mut stats,
                )?
                .into(),
            ),
        };
        let recheck = imp.recheck(&def, query, keys)?;
        Ok(QueryResults {
            ds: self.clone(),
            split: imp.pk_split(&def),
            // An entry cannot tell whether its record expired.
            decides: if self.has_ttl() {
                IndexOnly::Never
            } else {
                imp.index_only()
            },
            recheck,
            def,
            query: query.clone(),
            opts,
            source,
            epoch,
            ready: VecDeque::new(),
            returned: 0,
            stored: false,
            stats,
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
