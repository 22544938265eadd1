//! Hilbert-ordered B+-trees of points with next-match search (seed 000
//! §4.2): the DHVB-tree and the DHB-tree. Both are plain LSM B+-trees whose
//! keys start with a position on a Hilbert curve; a box or distance query
//! scans while the entries' cells are inside the query rectangle's cells
//! and, on leaving, seeks to the next curve position inside (Lawder's
//! next-match, `geo::hilbert_range::next_match_on`). One scan,
//! [`next_match_search`], serves both, generic over the key width.
//!
//! - **DHVB** ([`DHVB`]): entries ⟨64-bit Hilbert value of the point on the
//!   order-32 grid of the index's space, primary key⟩ → the point.
//! - **DHB** ([`DHB`], §4.2.1): no stored Hilbert value and no entry value:
//!   the key is the point's position on the order-64 Hilbert curve over the
//!   order-preserving 64-bit encodings of x and y (invertible, `geo::dhb`)
//!   ‖ primary key, searched at full resolution (no false positives).
//!
//! Points only; no kNN (use an rtree).

use super::kind::{IndexOption, IndexType};
use super::query::{Candidate, IndexOnly, KeyRange, Query, QueryStats, Recheck};
use super::{IndexDef, spatial};
use crate::error::Result;
use crate::geo::Rect;
use crate::geo::hilbert::Space;
use crate::geo::hilbert_range::{CurveKey, cell_rect, inside, next_match_on};
use crate::geo::sphere::Circle;
use crate::lsm::LsmTree;
use crate::lsm::kind::{BoundsKind, PkSplit, decode_bounds_kind, encode_bounds};
use crate::lsm::memtable::SpatialEntry;
use crate::lsm::spatial::SearchStats;
use crate::value::Value;
use std::ops::Bound;
use std::sync::Arc;

/// A DHVB-tree (`dhb == false`) or DHB-tree.
pub struct HilbertBTree {
    dhb: bool,
}

/// The `dhvb` kind.
pub static DHVB: HilbertBTree = HilbertBTree { dhb: false };
/// The `dhb` kind.
pub static DHB: HilbertBTree = HilbertBTree { dhb: true };

impl IndexType for HilbertBTree {
    fn name(&self) -> &'static str {
        if self.dhb { "dhb" } else { "dhvb" }
    }

    fn aliases(&self) -> &'static [&'static str] {
        if self.dhb {
            &["dhb", "dhb-tree"]
        } else {
            &["dhvb", "dhvb-tree"]
        }
    }

    fn entries(
        &self,
        def: &IndexDef,
        record: &Value,
        pk: &[u8],
    ) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        let Some((r, bk)) = spatial::record_geometry(def, record, true)? else {
            return Ok(Vec::new());
        };
        if self.dhb {
            // No value: the key holds the point.
            let mut k = Vec::with_capacity(16 + pk.len());
            k.extend_from_slice(&crate::geo::dhb::key(r[0], r[1]).to_be_bytes());
            k.extend_from_slice(pk);
            return Ok(vec![(k, Vec::new())]);
        }
        let (cx, cy) = ((r[0] + r[2]) / 2.0, (r[1] + r[3]) / 2.0);
        let h = def.space().hilbert_value(cx, cy);
        let mut k = Vec::with_capacity(8 + pk.len());
        k.extend_from_slice(&h.to_be_bytes());
        k.extend_from_slice(pk);
        Ok(vec![(k, encode_bounds(&r, bk))])
    }

    fn pk_split(&self, _def: &IndexDef) -> PkSplit {
        PkSplit::Prefix(if self.dhb { 16 } else { 8 })
    }

    fn accepts(&self, o: IndexOption) -> bool {
        // A DHVB index accepts `reconcile` (and always uses antimatter):
        // kept as it was, see the report of issue #18.
        !self.dhb && o == IndexOption::Reconcile
    }

    fn answers(&self, q: &Query) -> bool {
        spatial::answers(q, false)
    }

    fn hint(&self) -> &'static str {
        "use intersects or within-distance (kNN needs an rtree index)"
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
        def: &IndexDef,
        tree: &LsmTree,
        rects: &[Rect],
        _circle: Option<&Circle>,
        _exact: bool,
        stats: &mut SearchStats,
    ) -> Result<Vec<SpatialEntry>> {
        if self.dhb {
            next_match_search(&DhbKeys, tree, rects, stats)
        } else {
            next_match_search(&DhvbKeys(def.space()), tree, rects, stats)
        }
    }

    fn recheck(&self, _def: &IndexDef, q: &Query, _keys: Option<KeyRange>) -> Result<Recheck> {
        spatial::recheck(q)
    }
}

/// The keys of a Hilbert-ordered B+-tree, as the next-match scan reads them.
trait CurveKeys {
    /// The curve position at the start of a key.
    type H: CurveKey;
    /// Its big-endian bytes.
    type Bytes: AsRef<[u8]>;
    fn to_bytes(h: Self::H) -> Self::Bytes;
    /// The curve position at the start of an entry key.
    fn read(key: &[u8]) -> Option<Self::H>;
    /// The query rectangle's cells (`None`: it matches nothing).
    fn cells(&self, r: &Rect) -> Option<[<Self::H as CurveKey>::Cell; 4]>;
    /// An entry whose cell is inside the query's cells: its bounds if it
    /// is a hit for `r` (counted as a candidate when its bounds are read).
    fn hit(
        &self,
        h: Self::H,
        value: &[u8],
        r: &Rect,
        stats: &mut SearchStats,
    ) -> Option<(Rect, BoundsKind)>;
}

/// DHVB: the stored order-32 Hilbert value (8 bytes) of the index's space;
/// the value holds the point.
struct DhvbKeys(Space);

impl CurveKeys for DhvbKeys {
    type H = u64;
    type Bytes = [u8; 8];
    fn to_bytes(h: u64) -> [u8; 8] {
        h.to_be_bytes()
    }
    #[inline]
    fn read(key: &[u8]) -> Option<u64> {
        key.get(..8)
            .and_then(|b| b.try_into().ok())
            .map(u64::from_be_bytes)
    }
    fn cells(&self, r: &Rect) -> Option<[u32; 4]> {
        Some(cell_rect(&self.0, r))
    }
    #[inline]
    fn hit(
        &self,
        _h: u64,
        value: &[u8],
        r: &Rect,
        stats: &mut SearchStats,
    ) -> Option<(Rect, BoundsKind)> {
        let (bounds, bk) = decode_bounds_kind(value)?;
        stats.candidates += 1;
        crate::geo::rect_intersects(r, &bounds).then_some((bounds, bk))
    }
}

/// DHB: the order-64 position (16 bytes) on the `geo::dhb` grid; the key
/// is the point.
struct DhbKeys;

impl CurveKeys for DhbKeys {
    type H = u128;
    type Bytes = [u8; 16];
    fn to_bytes(h: u128) -> [u8; 16] {
        h.to_be_bytes()
    }
    #[inline]
    fn read(key: &[u8]) -> Option<u128> {
        key.get(..16)
            .and_then(|b| b.try_into().ok())
            .map(u128::from_be_bytes)
    }
    fn cells(&self, r: &Rect) -> Option<[u64; 4]> {
        crate::geo::dhb::cells_of(r)
    }
    #[inline]
    fn hit(
        &self,
        h: u128,
        _value: &[u8],
        _r: &Rect,
        stats: &mut SearchStats,
    ) -> Option<(Rect, BoundsKind)> {
        stats.candidates += 1;
        let (x, y) = crate::geo::dhb::point(h);
        Some(([x, y, x, y], BoundsKind::Point))
    }
}

/// Next-match search of a Hilbert-ordered B+-tree: scan while the entries'
/// cells are inside the query rectangle's cells; on leaving, seek to the
/// next curve position whose cell is inside. Each seek is a new reconciled
/// cursor over all components (counted in `blocks` as seeks). Entries
/// sorted by key, without duplicates.
fn next_match_search<K: CurveKeys>(
    keys: &K,
    t: &LsmTree,
    rects: &[Rect],
    stats: &mut SearchStats,
) -> Result<Vec<SpatialEntry>> {
    let snap = t.snapshot();
    stats.components +=
        (snap.mems.iter().filter(|m| !m.is_empty()).count() + snap.disk.len()) as u64;
    let mut out = Vec::new();
    for r in rects {
        let Some(q) = keys.cells(r) else { continue };
        let mut from = next_match_on::<K::H>(&q, K::H::from(0));
        while let Some(h) = from {
            stats.blocks += 1;
            let start = K::to_bytes(h);
            let mut scan = t.scan(
                &snap,
                Bound::Included(start.as_ref()),
                Bound::Unbounded,
                false,
            )?;
            from = None;
            while let Some((k, e)) = scan.next_entry()? {
                let Some(hk) = K::read(&k) else { continue };
                if !inside(&q, hk.cell()) {
                    // Left the rectangle: jump to the next value inside.
                    from = next_match_on(&q, hk);
                    break;
                }
                if let Some((bounds, bounds_kind)) = keys.hit(hk, &e.value, r, stats) {
                    out.push(SpatialEntry {
                        key: k,
                        delete: false,
                        bounds,
                        bounds_kind,
                    });
                }
            }
        }
    }
    out.sort_by(|a, b| a.key.cmp(&b.key));
    out.dedup_by(|a, b| a.key == b.key);
    Ok(out)
}
