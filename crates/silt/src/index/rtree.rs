//! The LSM R-tree (seed 000 §2.3, seed 002) on one geometry field: entries
//! ⟨curve key of the geometry's centre ‖ primary key⟩ → bounds (a point,
//! or the MBR of a rectangle or polygon, refined exactly against the
//! record). The curve key orders the disk components, whose data blocks are
//! the packed leaves of a static R-tree (`lsm::spatial`): the 64-bit
//! Hilbert value (default), x then y ("Simple"), or the Z-value (Morton
//! code). Answers intersects, within-distance and nearest-neighbour
//! queries. Deletes reconcile with antimatter (AMLSM, default) or a
//! deleted-key B+-tree (`super::deleted_key`).

use super::kind::{IndexOption, IndexType};
use super::query::{Candidate, IndexOnly, KeyRange, Query, QueryStats, Recheck};
use super::{IndexDef, ReconcileOption, spatial};
use crate::error::{Error, Result};
use crate::geo::sphere::Circle;
use crate::geo::{Rect, sphere};
use crate::lsm::LsmTree;
use crate::lsm::kind::{BoundsKind, PkSplit, encode_bounds};
use crate::lsm::memtable::SpatialEntry;
use crate::lsm::spatial::{KnnMetric, SearchStats};
use crate::value::Value;
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// The order of an R-tree's disk components (seed 002 compares both).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RtreeOrder {
    /// The 64-bit Hilbert value of the centre (key = Hilbert ‖ pk).
    Hilbert,
    /// x, then y of the centre ("Simple" in seed 002): key =
    /// order-preserving x ‖ order-preserving y ‖ pk.
    Simple,
    /// The 64-bit Z-value (Morton code) of the centre's cell on the same
    /// 2^32 x 2^32 grid as the Hilbert order (key = Z ‖ pk; seed 001
    /// §5.3.2). Leveled merges then give each level disjoint Z ranges, and
    /// spatial searches skip disk components of points whose Z (key) range
    /// meets none of the query rectangle's Z ranges (`geo::zorder`).
    Zorder,
}

impl RtreeOrder {
    pub fn parse(s: &str) -> Result<RtreeOrder> {
        match s.to_ascii_lowercase().as_str() {
            "hilbert" => Ok(RtreeOrder::Hilbert),
            "simple" | "xy" => Ok(RtreeOrder::Simple),
            "zorder" | "z-order" | "z_order" | "morton" => Ok(RtreeOrder::Zorder),
            other => Err(Error::Config(format!(
                "unknown R-tree order `{other}`; use `hilbert` (default), `simple` (x, then y) or `zorder` (Z-value, Morton)"
            ))),
        }
    }
}

/// The `rtree` kind.
pub struct RTree;

/// The `rtree` kind.
pub static RTREE: RTree = RTree;

impl IndexType for RTree {
    fn name(&self) -> &'static str {
        "rtree"
    }

    fn aliases(&self) -> &'static [&'static str] {
        &["rtree", "r-tree", "spatial"]
    }

    fn entries(
        &self,
        def: &IndexDef,
        record: &Value,
        pk: &[u8],
    ) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        let Some((r, bk)) = spatial::record_geometry(def, record, false)? else {
            return Ok(Vec::new());
        };
        let bounds = encode_bounds(&r, bk);
        let (cx, cy) = ((r[0] + r[2]) / 2.0, (r[1] + r[3]) / 2.0);
        let mut k = Vec::with_capacity(16 + pk.len());
        match def.rtree_order() {
            RtreeOrder::Simple => {
                k.extend_from_slice(&crate::geo::dhb::ord_bits(cx).to_be_bytes());
                k.extend_from_slice(&crate::geo::dhb::ord_bits(cy).to_be_bytes());
            }
            RtreeOrder::Zorder => {
                let z = crate::geo::zorder::z_value(&def.space(), cx, cy);
                k.extend_from_slice(&z.to_be_bytes());
            }
            RtreeOrder::Hilbert => {
                let h = def.space().hilbert_value(cx, cy);
                k.extend_from_slice(&h.to_be_bytes());
            }
        }
        k.extend_from_slice(pk);
        Ok(vec![(k, bounds)])
    }

    fn spatial_tree(&self) -> bool {
        true
    }

    fn pk_split(&self, def: &IndexDef) -> PkSplit {
        match def.rtree_order() {
            RtreeOrder::Simple => PkSplit::Prefix(16),
            RtreeOrder::Hilbert | RtreeOrder::Zorder => PkSplit::Prefix(8),
        }
    }

    fn reconcile(&self, def: &IndexDef) -> ReconcileOption {
        def.options.reconcile.unwrap_or(ReconcileOption::Antimatter)
    }

    fn accepts(&self, o: IndexOption) -> bool {
        matches!(
            o,
            IndexOption::Reconcile | IndexOption::LeafBytes | IndexOption::Order
        )
    }

    fn answers(&self, q: &Query) -> bool {
        spatial::answers(q, true)
    }

    fn hint(&self) -> &'static str {
        "use intersects, within-distance or nearest"
    }

    fn is_spatial(&self) -> bool {
        true
    }

    fn index_only(&self) -> IndexOnly {
        IndexOnly::ExactBounds
    }

    fn candidates(
        &self,
        def: &IndexDef,
        trees: &[Arc<LsmTree>],
        q: &Query,
        _keys: Option<&KeyRange>,
        exact: bool,
        stats: &mut QueryStats,
    ) -> Result<Vec<Candidate>> {
        spatial::candidates(self, def, trees, q, exact, stats)
    }

    fn search_partition(
        &self,
        _def: &IndexDef,
        tree: &LsmTree,
        rects: &[Rect],
        circle: Option<&Circle>,
        exact: bool,
        stats: &mut SearchStats,
    ) -> Result<Vec<SpatialEntry>> {
        tree.search_spatial(&tree.snapshot(), rects, circle, exact, stats)
    }

    fn recheck(&self, _def: &IndexDef, q: &Query, _keys: Option<KeyRange>) -> Result<Recheck> {
        spatial::recheck(q)
    }
}

/// Great-circle order around the query point for the R-tree kNN search.
pub struct SphereMetric(pub sphere::NearOrder);

impl SphereMetric {
    /// The metric of a kNN query around `(lon, lat)`.
    pub fn around(lon: f64, lat: f64) -> Arc<dyn KnnMetric> {
        Arc::new(SphereMetric(sphere::NearOrder::new(lon, lat)))
    }
}

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
