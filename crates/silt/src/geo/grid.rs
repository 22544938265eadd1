//! The static grid hierarchy of the SHB-tree and SIF indexes (seed 000
//! §4.2.2–4.2.3 and §5.2).
//!
//! # Cells and their numbers
//!
//! A [`Grid`] divides a [`Space`] into `k` levels: level 0 is a `2^n0 x
//! 2^n0` grid, and each cell of level `l` is divided into `2^n(l+1) x
//! 2^n(l+1)` cells at level `l + 1` (`n` may differ per level: the paper's
//! presets are `l` = 4x4 (n = 2), `m` = 8x8 (n = 3) and `h` = 16x16 (n =
//! 4)). As in the paper, the children of every cell are numbered by the
//! same order-`n` Hilbert curve (the static mapping table of §4.4.1.1, no
//! orientation carried between levels), and a cell's number is its
//! ancestors' digits followed by its own: a cell at level `l` is the `u64`
//! whose top `2·(n0 + … + nl)` bits (counting from bit `2·Σn - 1`) are
//! those digits and whose lower bits, the digits of the levels below, are 0.
//! So the bottom-level cells of a cell's subtree are one contiguous number
//! range, and the key `number (8 bytes, big-endian) ‖ level (1 byte)` of a
//! cell sorts right before the keys of all its descendants: the whole
//! subtree, at every level, is one key range. The paper used 1 byte per
//! level plus a level byte (7 bytes for 6 levels); Silt uses 8 + 1 bytes
//! (at most `Σn = 32` bits per axis).
//!
//! # Decomposition
//!
//! An MBR (of a stored object or of a query) becomes cells by the paper's
//! covering rule: a cell fully covered by the MBR is kept and not divided;
//! a cell it only overlaps is divided at the next level; at the bottom level
//! overlapping cells are kept. The paper has no bound on the number of cells,
//! which for large objects on a fine grid is unbounded in practice, so Silt
//! adds one: the division of the overlapping cells of a level into the next
//! level happens only if the total number of cells stays within a budget;
//! otherwise those overlapping cells are kept at their level. (Coverage is
//! in grid terms: the MBR touches every bottom cell of the cell.) A point is
//! always one bottom cell.
//!
//! A stored cell means "the object's MBR meets this cell"; its cells cover
//! the MBR. A query must therefore read, for each of its cells, the cell's
//! whole subtree (stored cells at the same or deeper levels) and every
//! ancestor of the cell (objects stored at coarser levels): [`Grid::plan`]
//! merges the subtrees into key ranges and lists the ancestors not already
//! inside a range. Hits are de-duplicated by primary key by the caller.

use super::hilbert::Space;
use std::collections::BTreeSet;

/// Most levels a grid may have.
pub const MAX_LEVELS: usize = 16;
/// Most bits per axis over all levels (cell numbers are `u64`).
pub const MAX_BITS: u32 = 32;
/// The paper's per-level presets: `l` = 4x4, `m` = 8x8, `h` = 16x16 (the n of 2^n x 2^n).
pub const PRESET_L: u8 = 2;
pub const PRESET_M: u8 = 3;
pub const PRESET_H: u8 = 4;
/// Default levels: the point study's 6-level 16x16 grid (seed 000 §4.3.1,
/// `(h,h,h,h,h,h)`, 2^48 bottom cells, about 2 m x 1 m over the lon/lat
/// world). The non-point study preferred `(l,l,l,l,h,m)` (2^30 cells).
pub const DEFAULT_LEVELS: [u8; 6] = [PRESET_H; 6];
/// Default most cells a stored object maps to.
pub const DEFAULT_OBJECT_CELLS: usize = 32;
/// Most cells a query rectangle maps to.
pub const QUERY_CELLS: usize = 1024;

/// Parse the paper's level letters (`l`, `m`, `h`) or numbers (n of 2^n x
/// 2^n), e.g. `l,l,l,l,h,m` or `4,4,4`.
pub fn parse_levels(s: &str) -> Result<Vec<u8>, String> {
    s.split(',')
        .map(|p| match p.trim().to_ascii_lowercase().as_str() {
            "l" => Ok(PRESET_L),
            "m" => Ok(PRESET_M),
            "h" => Ok(PRESET_H),
            other => other
                .parse::<u8>()
                .map_err(|_| format!("grid level `{other}` is not l, m, h or a number 1..=8")),
        })
        .collect()
}

/// One cell: its number (see the module doc) and level (0 = top).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Cell {
    pub num: u64,
    pub level: u8,
}

impl Cell {
    /// The index key prefix of the cell: number (big-endian) ‖ level.
    pub fn key(&self) -> [u8; 9] {
        let mut k = [0u8; 9];
        k[..8].copy_from_slice(&self.num.to_be_bytes());
        k[8] = self.level;
        k
    }
}

/// A rectangle of cells of one level, inclusive: `[x0, y0, x1, y1]`.
type CellRect = [u32; 4];

/// A static grid hierarchy over a space.
#[derive(Clone, Debug, PartialEq)]
pub struct Grid {
    space: Space,
    levels: Vec<u8>,
    /// Bits per axis through level l (cumulative).
    res: Vec<u32>,
    total: u32,
}

/// What a query reads: subtree key ranges of bottom-aligned cell numbers
/// (inclusive) and ancestor cells probed exactly.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Plan {
    pub ranges: Vec<(u64, u64)>,
    pub ancestors: Vec<Cell>,
}

impl Grid {
    /// A grid over `space` with `2^levels[l] x 2^levels[l]` cells per parent
    /// at level `l`.
    pub fn new(space: Space, levels: &[u8]) -> Result<Grid, String> {
        if levels.is_empty() || levels.len() > MAX_LEVELS {
            return Err(format!(
                "a grid has 1 to {MAX_LEVELS} levels, got {}",
                levels.len()
            ));
        }
        if let Some(n) = levels.iter().find(|n| !(1..=8).contains(*n)) {
            return Err(format!(
                "each grid level divides a cell into 2^n x 2^n with n in 1..=8 (l = 2, m = 3, h = 4), got {n}"
            ));
        }
        let mut res = Vec::with_capacity(levels.len());
        let mut total = 0u32;
        for n in levels {
            total += u32::from(*n);
            res.push(total);
        }
        if total > MAX_BITS {
            return Err(format!(
                "the grid levels add up to {total} bits per axis; at most {MAX_BITS} (2^64 bottom cells)"
            ));
        }
        Ok(Grid {
            space,
            levels: levels.to_vec(),
            res,
            total,
        })
    }

    pub fn depth(&self) -> usize {
        self.levels.len()
    }

    pub fn bottom(&self) -> u8 {
        (self.levels.len() - 1) as u8
    }

    /// Bits of a cell number below the digits of level `l`.
    fn low_bits(&self, l: usize) -> u32 {
        2 * (self.total - self.res[l])
    }

    /// The number of the level-`l` cell at `(cx, cy)` (level-`l` coordinates).
    fn number(&self, l: usize, cx: u32, cy: u32) -> u64 {
        let mut num = 0u64;
        for j in 0..=l {
            let n = u32::from(self.levels[j]);
            let sh = self.res[l] - self.res[j];
            let mask = (1u32 << n) - 1;
            let d = fast_hilbert::xy2h::<u32>((cx >> sh) & mask, (cy >> sh) & mask, n as u8);
            num |= d << self.low_bits(j);
        }
        num
    }

    /// The cell at level `l` and coordinates `(cx, cy)`.
    fn cell(&self, l: usize, cx: u32, cy: u32) -> Cell {
        Cell {
            num: self.number(l, cx, cy),
            level: l as u8,
        }
    }

    /// Bottom-level cells an MBR touches (clamped to the space).
    fn bottom_rect(&self, r: &[f64; 4]) -> CellRect {
        let sh = 32 - self.total;
        let (a, b) = self.space.cell(r[0], r[1]);
        let (c, d) = self.space.cell(r[2], r[3]);
        let [x0, y0, x1, y1] = [a.min(c), b.min(d), a.max(c), b.max(d)];
        if sh >= 32 {
            return [0, 0, 0, 0];
        }
        [x0 >> sh, y0 >> sh, x1 >> sh, y1 >> sh]
    }

    /// Cells of the rectangle `r` by the covering rule, at most `budget`
    /// (or the number of level-0 cells it touches, if more), sorted.
    pub fn decompose(&self, r: &[f64; 4], budget: usize) -> Vec<Cell> {
        let q = self.bottom_rect(r);
        let at = |l: usize| -> CellRect {
            let sh = self.total - self.res[l];
            [q[0] >> sh, q[1] >> sh, q[2] >> sh, q[3] >> sh]
        };
        let covered = |l: usize, cx: u32, cy: u32| -> bool {
            let sh = self.total - self.res[l];
            let (x0, y0) = (u64::from(cx) << sh, u64::from(cy) << sh);
            let (x1, y1) = (x0 + (1u64 << sh) - 1, y0 + (1u64 << sh) - 1);
            u64::from(q[0]) <= x0
                && x1 <= u64::from(q[2])
                && u64::from(q[1]) <= y0
                && y1 <= u64::from(q[3])
        };
        let q0 = at(0);
        let mut frontier: Vec<(u32, u32)> = Vec::new();
        for cx in q0[0]..=q0[2] {
            for cy in q0[1]..=q0[3] {
                frontier.push((cx, cy));
            }
        }
        let mut out = Vec::new();
        let last = self.depth() - 1;
        for l in 0..self.depth() {
            let mut partial = Vec::new();
            for &(cx, cy) in &frontier {
                if l == last || covered(l, cx, cy) {
                    out.push(self.cell(l, cx, cy));
                } else {
                    partial.push((cx, cy));
                }
            }
            if partial.is_empty() {
                break;
            }
            // Children of the overlapping cells that the rectangle touches.
            let n = u32::from(self.levels[l + 1]);
            let qn = at(l + 1);
            let kids = |(cx, cy): (u32, u32)| -> CellRect {
                let (bx, by) = (cx << n, cy << n);
                let side = (1u32 << n) - 1;
                [
                    bx.max(qn[0]),
                    by.max(qn[1]),
                    (bx + side).min(qn[2]),
                    (by + side).min(qn[3]),
                ]
            };
            let more: u64 = partial
                .iter()
                .map(|&p| {
                    let k = kids(p);
                    u64::from(k[2] - k[0] + 1) * u64::from(k[3] - k[1] + 1)
                })
                .sum();
            if out.len() as u64 + more > budget as u64 {
                out.extend(partial.iter().map(|&(cx, cy)| self.cell(l, cx, cy)));
                break;
            }
            frontier.clear();
            for p in partial {
                let k = kids(p);
                for cx in k[0]..=k[2] {
                    for cy in k[1]..=k[3] {
                        frontier.push((cx, cy));
                    }
                }
            }
        }
        out.sort_unstable();
        out
    }

    /// The bottom-level number range of a cell's subtree (inclusive).
    pub fn subtree(&self, c: Cell) -> (u64, u64) {
        let low = self.low_bits(usize::from(c.level));
        let mask = if low >= 64 {
            u64::MAX
        } else {
            (1u64 << low) - 1
        };
        (c.num & !mask, c.num | mask)
    }

    /// The child numbers from the top level down to `c` (its Hilbert digit
    /// at each level, `0 .. 4^n`): a path whose prefixes are `c`'s
    /// ancestors (the ids of a pub/sub hierarchy over the grid).
    pub fn digits(&self, c: Cell) -> Vec<u8> {
        (0..=usize::from(c.level).min(self.depth() - 1))
            .map(|j| {
                let width = 2 * u32::from(self.levels[j]);
                let d = (c.num >> self.low_bits(j)) & ((1u64 << width) - 1);
                d as u8
            })
            .collect()
    }

    /// The ancestor of `c` at `level` (< c.level).
    pub fn ancestor(&self, c: Cell, level: u8) -> Cell {
        let (lo, _) = self.subtree(Cell { num: c.num, level });
        Cell { num: lo, level }
    }

    /// Every strict ancestor of `c`, top first.
    pub fn ancestors(&self, c: Cell) -> impl Iterator<Item = Cell> + '_ {
        (0..c.level).map(move |l| self.ancestor(c, l))
    }

    /// What an SHB-tree query over `cells` reads: their subtrees merged into
    /// ranges, and their ancestors that no range already contains.
    pub fn plan(&self, cells: &[Cell]) -> Plan {
        let mut subs: Vec<(u64, u64)> = cells.iter().map(|c| self.subtree(*c)).collect();
        subs.sort_unstable();
        let mut ranges: Vec<(u64, u64)> = Vec::new();
        for (lo, hi) in subs {
            match ranges.last_mut() {
                Some(last) if last.1 == u64::MAX || last.1 + 1 >= lo => last.1 = last.1.max(hi),
                _ => ranges.push((lo, hi)),
            }
        }
        let mut anc = BTreeSet::new();
        for c in cells {
            for a in self.ancestors(*c) {
                let i = ranges.partition_point(|r| r.1 < a.num);
                let covered = ranges.get(i).is_some_and(|r| r.0 <= a.num);
                if !covered {
                    anc.insert(a);
                }
            }
        }
        Plan {
            ranges,
            ancestors: anc.into_iter().collect(),
        }
    }

    /// The SIF tokens of an object stored at `cells`: a *subtree* token for
    /// every cell and every ancestor (the object is under that cell), and an
    /// *exact* token for every cell above the bottom level (the object was
    /// stored at that cell, so queries below it must find it).
    pub fn sif_tokens(&self, cells: &[Cell]) -> Vec<[u8; 10]> {
        let mut out = BTreeSet::new();
        for c in cells {
            out.insert(sif_token(SIF_SUBTREE, *c));
            for a in self.ancestors(*c) {
                out.insert(sif_token(SIF_SUBTREE, a));
            }
            if c.level < self.bottom() {
                out.insert(sif_token(SIF_EXACT, *c));
            }
        }
        out.into_iter().collect()
    }

    /// The SIF tokens a query over `cells` looks up: the subtree token of
    /// each cell (a covered parent is one token) and the exact token of each
    /// ancestor.
    pub fn sif_query_tokens(&self, cells: &[Cell]) -> Vec<[u8; 10]> {
        let mut out = BTreeSet::new();
        for c in cells {
            out.insert(sif_token(SIF_SUBTREE, *c));
            for a in self.ancestors(*c) {
                out.insert(sif_token(SIF_EXACT, a));
            }
        }
        out.into_iter().collect()
    }
}

/// SIF token tag: the object has a stored cell in this cell's subtree.
pub const SIF_SUBTREE: u8 = 0;
/// SIF token tag: the object is stored at exactly this (non-bottom) cell.
pub const SIF_EXACT: u8 = 1;

/// A SIF token: tag ‖ cell number (big-endian) ‖ level.
pub fn sif_token(tag: u8, c: Cell) -> [u8; 10] {
    let mut t = [0u8; 10];
    t[0] = tag;
    t[1..].copy_from_slice(&c.key());
    t
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn unit() -> Space {
        Space {
            min_x: 0.0,
            min_y: 0.0,
            max_x: 8.0,
            max_y: 8.0,
        }
    }

    /// The paper's Figure 4.3 grid: 3 levels of 2x2 over an 8x8 space (one
    /// bottom cell = 1x1).
    fn fig() -> Grid {
        Grid::new(unit(), &[1, 1, 1]).unwrap()
    }

    #[test]
    fn numbering_follows_the_figure() {
        let g = fig();
        // Level-0 cells: SW 0, NW 1, NE 2, SE 3 (first-order Hilbert curve).
        let top = |x: f64, y: f64| g.decompose(&[x, y, x, y], 100)[0].num >> 4;
        assert_eq!(top(1.0, 1.0), 0);
        assert_eq!(top(1.0, 5.0), 1);
        assert_eq!(top(5.0, 5.0), 2);
        assert_eq!(top(5.0, 1.0), 3);
        // Every child set uses the same table: the SE child of SE is 33x.
        let c = g.decompose(&[7.5, 0.5, 7.5, 0.5], 100);
        assert_eq!(c.len(), 1);
        assert_eq!(c[0].level, 2);
        assert_eq!(c[0].num >> 2, 0b1111);
        // Bottom cells are numbered bijectively.
        let mut seen = BTreeSet::new();
        for x in 0..8 {
            for y in 0..8 {
                let c = g.decompose(
                    &[
                        x as f64 + 0.5,
                        y as f64 + 0.5,
                        x as f64 + 0.5,
                        y as f64 + 0.5,
                    ],
                    1,
                );
                assert_eq!(c.len(), 1);
                seen.insert(c[0].num);
            }
        }
        assert_eq!(seen, (0..64).collect());
    }

    #[test]
    fn covered_cells_stay_coarse_and_overlapping_ones_divide() {
        let g = fig();
        // The whole SW quadrant plus a sliver of the SE one.
        let cells = g.decompose(&[0.0, 0.0, 4.5, 3.9], 100);
        assert!(cells.contains(&Cell { num: 0, level: 0 }), "{cells:?}");
        // The sliver: bottom cells of column x = 4, rows 0..=3.
        let bottom: Vec<_> = cells.iter().filter(|c| c.level == 2).collect();
        assert_eq!(bottom.len(), 4, "{cells:?}");
        assert_eq!(cells.len(), 5);
        // One range for the quadrant, the sliver cells after it.
        let p = g.plan(&cells);
        assert_eq!(p.ranges[0], (0, 15));
        // The sliver's ancestors (SE quadrant = 48.., its children) are read
        // by a range (their key sorts first in the subtree) or probed.
        for c in cells.iter().filter(|c| c.level == 2) {
            for a in g.ancestors(*c) {
                let in_range = p.ranges.iter().any(|r| r.0 <= a.num && a.num <= r.1);
                assert!(in_range || p.ancestors.contains(&a), "{a:?}");
            }
        }
        assert!(p.ancestors.iter().all(|a| a.level < 2));
    }

    #[test]
    fn budget_keeps_overlapping_cells_at_a_coarser_level() {
        let g = fig();
        let r = [0.5, 0.5, 6.5, 6.5];
        let fine = g.decompose(&r, 1000);
        let coarse = g.decompose(&r, 4);
        assert!(fine.len() > 4);
        assert_eq!(coarse.len(), 4);
        assert!(coarse.iter().all(|c| c.level == 0));
        // Points are a single bottom cell whatever the budget.
        assert_eq!(g.decompose(&[3.2, 3.2, 3.2, 3.2], 1).len(), 1);
    }

    #[test]
    fn paper_non_point_example_finds_coarse_objects_through_ancestors() {
        // An object stored at level 0 and a small query at level 2 under it:
        // the query's ancestor probe finds it; a large query finds small
        // objects through its subtree ranges.
        let g = fig();
        let big = g.decompose(&[0.0, 0.0, 3.99, 3.99], 4);
        assert_eq!(big, vec![Cell { num: 0, level: 0 }]);
        let small_q = g.decompose(&[1.2, 1.2, 1.3, 1.3], 100);
        assert_eq!(small_q.len(), 1);
        let p = g.plan(&small_q);
        assert!(p.ancestors.contains(&big[0]));
        let toks = g.sif_tokens(&big);
        let qt = g.sif_query_tokens(&small_q);
        assert!(toks.iter().any(|t| qt.contains(t)));
    }

    #[test]
    fn levels_are_validated() {
        assert!(Grid::new(unit(), &[]).is_err());
        assert!(Grid::new(unit(), &[9]).is_err());
        assert!(Grid::new(unit(), &[8, 8, 8, 8, 1]).is_err());
        assert!(Grid::new(unit(), &[8, 8, 8, 8]).is_ok());
        assert_eq!(parse_levels("l,l,l,l,h,m").unwrap(), vec![2, 2, 2, 2, 4, 3]);
        assert!(parse_levels("x").is_err());
    }

    fn rect() -> impl Strategy<Value = [f64; 4]> {
        (0.0..8.0f64, 0.0..8.0f64, 0.0..4.0f64, 0.0..4.0f64)
            .prop_map(|(x, y, w, h)| [x, y, (x + w).min(8.0), (y + h).min(8.0)])
    }

    fn bottom_cells(g: &Grid, c: Cell) -> (u64, u64) {
        g.subtree(c)
    }

    proptest! {
        /// Soundness of the whole scheme on random grids: if an object's and
        /// a query's rectangles share a bottom cell, some stored cell of the
        /// object lies in a query range or is a probed ancestor, and SIF
        /// tokens meet. Also: the cells cover the rectangle exactly once.
        #[test]
        fn any_shared_bottom_cell_is_found(
            levels in proptest::collection::vec(1u8..=2, 1..4),
            o in rect(), q in rect(), ob in 1usize..40, qb in 1usize..200,
        ) {
            let g = Grid::new(unit(), &levels).unwrap();
            let oc = g.decompose(&o, ob);
            let qc = g.decompose(&q, qb);
            // Cells are disjoint and cover exactly the bottom cells touched.
            let cover = |cells: &[Cell]| -> Vec<u64> {
                let mut v: Vec<u64> = cells.iter().flat_map(|c| {
                    let (lo, hi) = bottom_cells(&g, *c);
                    let step = 1u64 << g.low_bits(g.depth() - 1);
                    (lo..=hi).step_by(step as usize)
                }).collect();
                v.sort_unstable();
                v
            };
            let (oc_cover, qc_cover) = (cover(&oc), cover(&qc));
            let mut d = oc_cover.clone();
            d.dedup();
            prop_assert_eq!(d.len(), oc_cover.len(), "cells overlap");
            let meet = oc_cover.iter().any(|b| qc_cover.binary_search(b).is_ok());
            let p = g.plan(&qc);
            let found = oc.iter().any(|c| {
                p.ranges.iter().any(|r| r.0 <= c.num && c.num <= r.1) || p.ancestors.contains(c)
            });
            let qt = g.sif_query_tokens(&qc);
            let sif = g.sif_tokens(&oc).iter().any(|t| qt.contains(t));
            if meet {
                prop_assert!(found, "SHB misses: obj {:?} query {:?}", oc, qc);
                prop_assert!(sif, "SIF misses: obj {:?} query {:?}", oc, qc);
            }
            // If the rectangles meet, their bottom cells meet.
            if o[0] <= q[2] && q[0] <= o[2] && o[1] <= q[3] && q[1] <= o[3] {
                prop_assert!(meet);
            }
        }
    }
}
