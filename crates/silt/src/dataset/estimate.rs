//! Estimates of how many entries a search meets, from what is at hand
//! without reading blocks: the block indexes of sorted components (blocks
//! spanned times entries per block), the directories of packed R-trees
//! (leaves met times entries per leaf) and memtables (counted, up to
//! [`MEM_CAP`] each). For a planner choosing between access paths: rough
//! (a range within one block counts the whole block), never a bound.

use std::ops::Bound;

use super::Dataset;
use crate::error::Result;
use crate::geo::{Rect, sphere};
use crate::index::IndexKind;
use crate::index::query::{KeyRange, Query, query_rects};
use crate::lsm::LsmTree;

/// Entries counted in one memtable before the count stops: counting costs
/// the planner some 10-20 ns an entry (0.2 ms at the cap, on every
/// statement that weighs two paths), and past this many either path reads
/// thousands of records, so the choice matters less than the count's cost.
pub const MEM_CAP: u64 = 10_000;

impl Dataset {
    /// About how many entries of index `index` the query `query` meets
    /// (all partitions): B+-tree ranges and R-tree boxes and radii; `None`
    /// for other kinds and queries.
    pub fn estimate_hits(&self, index: &str, query: &Query) -> Result<Option<u64>> {
        let (i, set) = self.index_by_name(index)?;
        let def = &set.defs[i];
        let trees = &set.trees[i];
        Ok(match (def.kind, query) {
            (k, Query::Range { .. }) if k.is_btree() => {
                let Some(range) = self.query_keys(def, query)? else {
                    return Ok(None);
                };
                Some(trees.iter().map(|t| key_range_entries(t, &range)).sum())
            }
            (IndexKind::Rtree, Query::Intersects(g)) => {
                let rects = query_rects(g);
                Some(trees.iter().map(|t| rtree_entries(t, &rects)).sum())
            }
            (IndexKind::Rtree, Query::WithinDistance { lon, lat, metres }) => {
                let rects = sphere::circle_bboxes(*lon, *lat, *metres);
                Some(trees.iter().map(|t| rtree_entries(t, &rects)).sum())
            }
            _ => None,
        })
    }

    /// About how many records lie within the encoded primary-key range.
    pub fn estimate_key_range(&self, range: &KeyRange) -> u64 {
        self.partitions
            .iter()
            .map(|p| key_range_entries(&p.primary, range))
            .sum()
    }
}

/// Entries of a sorted tree within `range`.
fn key_range_entries(t: &LsmTree, (lo, hi): &KeyRange) -> u64 {
    let snap = t.snapshot();
    let lo_ref = lo.as_ref().map(Vec::as_slice);
    let hi_ref = hi.as_ref().map(Vec::as_slice);
    let mut n = 0;
    for m in &snap.mems {
        let start: &[u8] = match lo_ref {
            Bound::Included(k) | Bound::Excluded(k) => k,
            Bound::Unbounded => &[],
        };
        let mut c = 0u64;
        m.visit(start, &mut |k, _| {
            let inside = match hi_ref {
                Bound::Included(h) => k <= h,
                Bound::Excluded(h) => k < h,
                Bound::Unbounded => true,
            };
            if inside && !matches!(lo_ref, Bound::Excluded(l) if k == l) {
                c += 1;
            }
            inside && c < MEM_CAP
        });
        n += c;
    }
    for c in snap.disk.iter() {
        n += c.estimate_range(lo_ref, hi_ref);
    }
    n
}

/// Entries of an R-tree whose leaves meet one of `rects`.
fn rtree_entries(t: &LsmTree, rects: &[Rect]) -> u64 {
    let snap = t.snapshot();
    let mut n = 0;
    for m in &snap.mems {
        for r in rects {
            n += m.spatial_count(r, MEM_CAP);
        }
    }
    let mut blocks = Vec::new();
    for c in snap.disk.iter() {
        let Some(tree) = crate::lsm::kind::packed_rtree(c) else {
            continue;
        };
        let leaves = tree.leaves() as u64;
        if leaves == 0 {
            continue;
        }
        blocks.clear();
        for r in rects {
            tree.blocks_intersecting(r, &mut blocks);
        }
        blocks.sort_unstable();
        blocks.dedup();
        n += (blocks.len() as u64 * c.meta().entries).div_ceil(leaves);
    }
    n
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use crate::{Database, DatasetDef, DbOptions, FieldType, Geometry, IndexDef, Query, Value};

    /// Estimates land near the true counts: within a few blocks' worth for
    /// ranges, within the leaves met for boxes, from memory and disk.
    #[test]
    fn estimates_follow_the_data() {
        let dir = tempfile::tempdir().unwrap();
        let db = Database::open(dir.path(), DbOptions::default()).unwrap();
        db.create_dataset(
            DatasetDef::new("d", &["id"])
                .field("id", FieldType::Int)
                .field("a", FieldType::Int)
                .field("loc", FieldType::Point)
                .block_size(1024),
        )
        .unwrap();
        db.create_index("d", IndexDef::btree("by_a", &["a"]))
            .unwrap();
        db.create_index("d", IndexDef::rtree("by_loc", "loc"))
            .unwrap();
        let ds: Arc<crate::Dataset> = db.dataset("d").unwrap();
        for i in 0..20_000i64 {
            let (x, y) = ((i % 200) as f64 * 0.1, (i / 200) as f64 * 0.1);
            ds.insert(Value::Object(vec![
                ("id".into(), Value::Int(i)),
                ("a".into(), Value::Int(i)),
                ("loc".into(), Value::Geometry(Geometry::point(x, y))),
            ]))
            .unwrap();
            if i == 15_000 {
                ds.flush().unwrap();
            }
        }
        let range = |lo: i64, hi: i64| Query::Range {
            lo: std::ops::Bound::Included(vec![Value::Int(lo)]),
            hi: std::ops::Bound::Included(vec![Value::Int(hi)]),
        };
        // 1,000 on disk, 1,000 in memory.
        for (lo, hi) in [(5_000, 5_999), (16_000, 16_999)] {
            let n = ds.estimate_hits("by_a", &range(lo, hi)).unwrap().unwrap();
            assert!((900..=1_400).contains(&n), "{lo}..{hi}: {n}");
        }
        let few = ds.estimate_hits("by_a", &range(7, 7)).unwrap().unwrap();
        assert!(few < 200, "{few}");
        // A box of 1% of the points (20 x 10 of the 200 x 100 grid).
        let q = Query::Intersects(Geometry::rect(0.0, 0.0, 1.95, 0.95));
        let n = ds.estimate_hits("by_loc", &q).unwrap().unwrap();
        assert!((200..=2_000).contains(&n), "{n}");
        let all = Query::Intersects(Geometry::rect(-1.0, -1.0, 30.0, 30.0));
        let n = ds.estimate_hits("by_loc", &all).unwrap().unwrap();
        assert!((19_000..=21_000).contains(&n), "{n}");
        // Other kinds and queries: no estimate.
        assert_eq!(ds.estimate_hits("by_a", &q).unwrap(), None);
    }
}
