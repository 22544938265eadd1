//! What an index is asked: the [`Query`] variants, what a query touched
//! ([`QueryStats`]), and the per-query pieces an index kind hands the
//! kind-agnostic driver (`dataset::query`): candidates ([`Candidate`]),
//! whether an entry alone decides the predicate ([`IndexOnly`]) and how a
//! fetched record is re-checked ([`Recheck`]).

use super::IndexDef;
use crate::error::{Error, Result};
use crate::geo::{Rect, predicates, split_query_rect};
use crate::lsm::kind::BoundsKind;
use crate::value::{Geometry, Value};
use std::ops::Bound;

/// Encoded byte bounds of index entry keys.
pub type KeyRange = (Bound<Vec<u8>>, Bound<Vec<u8>>);

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
    /// composite and btree indexes (see `crate::index::recency`).
    Recent {
        lo: Bound<Vec<Value>>,
        hi: Bound<Vec<Value>>,
        k: Option<usize>,
    },
}

impl Query {
    /// The query's name in messages.
    pub fn name(&self) -> &'static str {
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

/// What a query touched.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct QueryStats {
    /// Index components (memory and disk, all partitions) searched.
    pub components: u64,
    /// Disk leaf blocks of R-tree components read (data blocks of the
    /// primary, for embedded and brin indexes).
    pub blocks: u64,
    /// Data blocks of the primary that embedded and brin indexes skipped
    /// because their zone maps (or blooms) ruled them out, whole
    /// components included.
    pub blocks_pruned: u64,
    /// Chunks a brin index with a chunk size ruled out (their blocks are
    /// in `blocks_pruned` too).
    pub chunks_pruned: u64,
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

impl QueryStats {
    /// Count what `o` touched too (the parts of one search).
    pub fn add(&mut self, o: &QueryStats) {
        self.components += o.components;
        self.blocks += o.blocks;
        self.blocks_pruned += o.blocks_pruned;
        self.chunks_pruned += o.chunks_pruned;
        self.candidates += o.candidates;
        self.fetched += o.fetched;
        self.index_only += o.index_only;
        self.z_pruned += o.z_pruned;
    }
}

impl QueryStats {
    /// Add what a spatial search of the LSM layer touched.
    pub fn add_search(&mut self, ss: &crate::lsm::spatial::SearchStats) {
        self.components += ss.components;
        self.blocks += ss.blocks;
        self.candidates += ss.candidates;
        self.z_pruned += ss.z_pruned;
    }
}

/// A candidate from the index.
pub struct Candidate {
    /// The encoded primary key.
    pub pk: Vec<u8>,
    /// Bounds of a spatial entry.
    pub bounds: Option<(Rect, BoundsKind)>,
}

/// Whether an index entry alone decides the query's predicate (index-only
/// queries), asked once per query.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IndexOnly {
    /// Every entry does (B+-tree ranges, keyword lookups).
    Always,
    /// None does: every hit is validated through the primary (n-gram
    /// candidates, recency indexes).
    Never,
    /// Entries with exact bounds do (a point or a rectangle); the MBR of a
    /// polygon does not.
    ExactBounds,
}

impl IndexOnly {
    /// Whether candidate `c` is decided by its entry.
    #[inline]
    pub fn decides(self, c: &Candidate) -> bool {
        match self {
            IndexOnly::Always => true,
            IndexOnly::Never => false,
            IndexOnly::ExactBounds => c.bounds.is_some_and(|(_, k)| k != BoundsKind::Mbr),
        }
    }
}

/// How a fetched record is re-checked against the query, prepared once per
/// query by the index kind ([`super::IndexType::recheck`]) so that the
/// check of each record is a plain match, with no allocation for the query.
pub enum Recheck {
    /// B+-tree kinds: the record's entry key lies within the encoded bounds.
    KeyRange(KeyRange),
    /// Spatial kinds: the record's geometry intersects one of the parts of
    /// the query geometry.
    Intersects(Vec<Geometry>),
    /// Spatial kinds: the record's geometry is within `metres` of a point
    /// (the distance is the hit's).
    WithinDistance { lon: f64, lat: f64, metres: f64 },
    /// Spatial kinds (kNN): the record has a geometry; its distance to the
    /// point is the hit's.
    Distance { lon: f64, lat: f64 },
    /// Keyword index: the record's words hold all (or any) of `tokens`.
    Words { tokens: Vec<String>, all: bool },
    /// N-gram index: the record's text holds the (case-folded) pattern.
    Substring(String),
}

impl Recheck {
    /// Re-check a fetched record: `None` if it does not match, else
    /// `Some(distance)` (the distance for distance and kNN queries).
    pub fn matches(&self, def: &IndexDef, rec: &Value, pk: &[u8]) -> Result<Option<Option<f64>>> {
        let field = &def.fields[0];
        let geom = || match rec.get(field) {
            Some(Value::Geometry(g)) => Some(g),
            _ => None,
        };
        Ok(match self {
            Recheck::KeyRange((lo, hi)) => match def.entry_key(rec, pk).ok().flatten() {
                Some(k) if in_bounds(&k, lo, hi) => Some(None),
                _ => None,
            },
            Recheck::Intersects(parts) => match geom() {
                Some(rg) if parts.iter().any(|p| predicates::intersects(rg, p)) => Some(None),
                _ => None,
            },
            Recheck::WithinDistance { lon, lat, metres } => match geom() {
                Some(rg) => {
                    let d = predicates::distance_m(rg, *lon, *lat);
                    (d <= *metres).then_some(Some(d))
                }
                None => None,
            },
            Recheck::Distance { lon, lat } => {
                geom().map(|rg| Some(predicates::distance_m(rg, *lon, *lat)))
            }
            Recheck::Words { tokens, all } => {
                let Some(Value::String(s)) = rec.get(field) else {
                    return Ok(None);
                };
                crate::geo::text::has_words(s, tokens, *all).then_some(None)
            }
            Recheck::Substring(text) => {
                let Some(Value::String(s)) = rec.get(field) else {
                    return Ok(None);
                };
                crate::geo::text::has_substring(s, text).then_some(None)
            }
        })
    }
}

/// Whether `k` lies within `lo`..`hi`.
pub fn in_bounds(k: &[u8], lo: &Bound<Vec<u8>>, hi: &Bound<Vec<u8>>) -> bool {
    let above = match lo {
        Bound::Included(l) => k >= l.as_slice(),
        Bound::Excluded(l) => k > l.as_slice(),
        Bound::Unbounded => true,
    };
    let below = match hi {
        Bound::Included(h) => k <= h.as_slice(),
        Bound::Excluded(h) => k < h.as_slice(),
        Bound::Unbounded => true,
    };
    above && below
}

/// Rectangles a spatial search needs for a query geometry.
pub fn query_rects(g: &Geometry) -> Vec<Rect> {
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
pub fn query_parts(g: &Geometry) -> Vec<Geometry> {
    match g {
        Geometry::Rect { min_x, max_x, .. } if min_x > max_x => query_rects(g)
            .into_iter()
            .map(|r| Geometry::rect(r[0], r[1], r[2], r[3]))
            .collect(),
        other => vec![other.clone()],
    }
}

/// The geometry of exact entry bounds.
pub fn bounds_geometry(r: &Rect, k: BoundsKind) -> Geometry {
    match k {
        BoundsKind::Point => Geometry::point(r[0], r[1]),
        _ => Geometry::rect(r[0], r[1], r[2], r[3]),
    }
}

/// A query point must be a longitude/latitude.
pub fn check_point(lon: f64, lat: f64) -> Result<()> {
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
