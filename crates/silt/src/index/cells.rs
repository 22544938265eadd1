//! Indexes on the static grid hierarchy of `geo::grid` (seed 000 §4.2.2,
//! §4.2.3, §5.2): `levels` levels (default 6 of 16x16) whose cells are
//! numbered in Hilbert order; a stored geometry maps to the cells of its
//! MBR (covering rule, at most `max_cells`).
//!
//! - **SHB-tree** ([`SHB`]): an LSM B+-tree of entries ⟨cell number ‖
//!   level, primary key⟩ → bounds, one per cell. Queries scan the query
//!   cells' subtrees merged into key ranges and probe their ancestor cells.
//! - **SIF** ([`SIF`]): the cells as tokens of an inverted index, each
//!   object stored at every level (⟨token, primary key⟩ → bounds), so a
//!   covered parent cell is one token lookup; reconciles with a deleted-key
//!   tree by default, like the other inverted indexes.
//!
//! Any geometry; no kNN.

use super::kind::{IndexOption, IndexType};
use super::query::{Candidate, IndexOnly, KeyRange, Query, QueryStats, Recheck};
use super::{IndexDef, ReconcileOption, spatial};
use crate::error::{Error, Result};
use crate::geo::Rect;
use crate::geo::grid::QUERY_CELLS;
use crate::geo::sphere::Circle;
use crate::lsm::LsmTree;
use crate::lsm::kind::{PkSplit, decode_bounds_kind, encode_bounds};
use crate::lsm::memtable::SpatialEntry;
use crate::lsm::spatial::SearchStats;
use crate::value::Value;
use std::ops::Bound;
use std::sync::Arc;

/// An SHB-tree (`sif == false`) or SIF index.
pub struct GridIndex {
    sif: bool,
}

/// The `shb` kind.
pub static SHB: GridIndex = GridIndex { sif: false };
/// The `sif` kind.
pub static SIF: GridIndex = GridIndex { sif: true };

impl IndexType for GridIndex {
    fn name(&self) -> &'static str {
        if self.sif { "sif" } else { "shb" }
    }

    fn aliases(&self) -> &'static [&'static str] {
        if self.sif {
            &["sif"]
        } else {
            &["shb", "shb-tree"]
        }
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
        let grid = def.grid()?;
        let cells = grid.decompose(&r, def.max_cells());
        let mut out: Vec<(Vec<u8>, Vec<u8>)> = if !self.sif {
            cells
                .iter()
                .map(|c| {
                    let mut k = Vec::with_capacity(9 + pk.len());
                    k.extend_from_slice(&c.key());
                    k.extend_from_slice(pk);
                    (k, bounds.clone())
                })
                .collect()
        } else {
            grid.sif_tokens(&cells)
                .iter()
                .map(|t| {
                    let mut k = Vec::with_capacity(10 + pk.len());
                    k.extend_from_slice(t);
                    k.extend_from_slice(pk);
                    (k, bounds.clone())
                })
                .collect()
        };
        out.sort_unstable();
        out.dedup();
        Ok(out)
    }

    fn pk_split(&self, _def: &IndexDef) -> PkSplit {
        PkSplit::Prefix(if self.sif { 10 } else { 9 })
    }

    fn reconcile(&self, def: &IndexDef) -> ReconcileOption {
        if self.sif {
            def.options
                .reconcile
                .unwrap_or(ReconcileOption::DeletedKeys)
        } else {
            ReconcileOption::Antimatter
        }
    }

    fn accepts(&self, o: IndexOption) -> bool {
        o == IndexOption::Grid || (self.sif && o == IndexOption::Reconcile)
    }

    fn check_options(&self, def: &IndexDef) -> Result<()> {
        def.grid()?;
        if !(1..=4096).contains(&def.max_cells()) {
            return Err(Error::Config(format!(
                "`max_cells` must be between 1 and 4096, got {}",
                def.max_cells()
            )));
        }
        Ok(())
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

    /// The query rectangle's cells (covering rule, at most
    /// `grid::QUERY_CELLS`); SHB scans their subtrees merged into key
    /// ranges and probes their ancestors, SIF looks up one subtree token per
    /// cell and one exact token per ancestor. Entries are refined by their
    /// bounds; the caller de-duplicates by primary key.
    fn search_partition(
        &self,
        def: &IndexDef,
        t: &LsmTree,
        rects: &[Rect],
        _circle: Option<&Circle>,
        _exact: bool,
        stats: &mut SearchStats,
    ) -> Result<Vec<SpatialEntry>> {
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
            if !self.sif {
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

    fn recheck(&self, _def: &IndexDef, q: &Query, _keys: Option<KeyRange>) -> Result<Recheck> {
        spatial::recheck(q)
    }
}
