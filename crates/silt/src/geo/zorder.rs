//! Z-order (Morton) keys for 2-D coordinates and the decomposition of a
//! query rectangle into Z-value ranges (seed 001 §5.3.2, as GeoMesa does).
//!
//! # Mapping
//!
//! A point is first mapped to its cell of the same 2^32 x 2^32 grid over the
//! index's [`Space`] that the Hilbert order uses ([`Space::cell`]: linear,
//! floored, clamped to the edge cells, NaN to cell 0). Its Z-value is the
//! bit interleaving of the cell's column `cx` and row `cy`, x in the even
//! bits and y in the odd bits:
//!
//! ```text
//! z = ... y1 x1 y0 x0      (bit 2i = bit i of cx, bit 2i + 1 = bit i of cy)
//! ```
//!
//! so in a 2 x 2 grid the curve visits (0,0), (1,0), (0,1), (1,1) (the "Z").
//! Example: `cx = 0b10`, `cy = 0b01` gives `z = 0b0110 = 6`.
//!
//! The interleaving is implemented here with the standard mask-and-shift
//! spreading (five shift/mask steps per 32-bit coordinate) rather than taken
//! from a crate: it is a dozen lines, needs no dependency and the inverse
//! (used by the decomposition and the tests) comes with it.
//!
//! # Ranges
//!
//! The values sharing their top `2l` bits form an aligned square of side
//! `2^(32 - l)` cells (a quadtree node), so a rectangle of cells is the union
//! of the Z ranges of the quadtree nodes inside it. [`z_ranges`] walks the
//! quadtree breadth-first: a node inside the rectangle is a finished range,
//! a node missing it is dropped, a node straddling its edge is split into its
//! four children, one level at a time, while the merged (adjacent ranges
//! joined) count of finished plus straddling nodes stays within the cap.
//! When the next level would exceed the cap, the straddling nodes are kept
//! whole: the ranges then over-cover (cells outside the rectangle), never
//! under-cover.

use super::hilbert::Space;
use super::hilbert_range::CellRect;

/// Bits per axis of the grid.
const ORDER: u32 = 32;

/// Most Z ranges a query rectangle is decomposed into by default (see
/// `docs/architecture.md`, "Spatial leveled partitioning").
pub const DEFAULT_MAX_RANGES: usize = 128;

/// Spread the 32 bits of `v` to the even bit positions of a `u64`
/// (bit `i` moves to bit `2i`).
pub fn spread(v: u32) -> u64 {
    let mut x = u64::from(v);
    x = (x | (x << 16)) & 0x0000_FFFF_0000_FFFF;
    x = (x | (x << 8)) & 0x00FF_00FF_00FF_00FF;
    x = (x | (x << 4)) & 0x0F0F_0F0F_0F0F_0F0F;
    x = (x | (x << 2)) & 0x3333_3333_3333_3333;
    x = (x | (x << 1)) & 0x5555_5555_5555_5555;
    x
}

/// The inverse of [`spread`]: gather the even bits of `z` (odd bits ignored).
pub fn compact(z: u64) -> u32 {
    let mut x = z & 0x5555_5555_5555_5555;
    x = (x | (x >> 1)) & 0x3333_3333_3333_3333;
    x = (x | (x >> 2)) & 0x0F0F_0F0F_0F0F_0F0F;
    x = (x | (x >> 4)) & 0x00FF_00FF_00FF_00FF;
    x = (x | (x >> 8)) & 0x0000_FFFF_0000_FFFF;
    x = (x | (x >> 16)) & 0x0000_0000_FFFF_FFFF;
    // At most 32 significant bits remain.
    u32::try_from(x).unwrap_or(u32::MAX)
}

/// The Z-value of grid cell `(cx, cy)`: x in the even bits, y in the odd.
pub fn interleave(cx: u32, cy: u32) -> u64 {
    spread(cx) | (spread(cy) << 1)
}

/// The cell `(cx, cy)` of a Z-value.
pub fn deinterleave(z: u64) -> (u32, u32) {
    (compact(z), compact(z >> 1))
}

/// The Z-value of the cell of `space` containing `(x, y)` (clamped to the
/// edge cells outside the space; never panics).
pub fn z_value(space: &Space, x: f64, y: f64) -> u64 {
    let (cx, cy) = space.cell(x, y);
    interleave(cx, cy)
}

/// The square of cells `(x, y, side)` of the node with `prefix` at `level`
/// (0 = the whole grid, 32 = one cell).
fn square(prefix: u64, level: u32) -> (u64, u64, u64) {
    let shift = 2 * (ORDER - level);
    let lo = if shift >= 64 { 0 } else { prefix << shift };
    let (x, y) = deinterleave(lo);
    (u64::from(x), u64::from(y), 1u64 << (ORDER - level))
}

/// The Z range `[lo, hi]` of the node with `prefix` at `level`.
fn node_range(prefix: u64, level: u32) -> (u64, u64) {
    let shift = 2 * (ORDER - level);
    if shift >= 64 {
        return (0, u64::MAX);
    }
    let lo = prefix << shift;
    (lo, lo | ((1u64 << shift) - 1))
}

/// (meets, inside) of a node against the cell rectangle.
fn relation(prefix: u64, level: u32, q: &CellRect) -> (bool, bool) {
    super::hilbert_range::relation(square(prefix, level), q)
}

/// Sort ranges and join overlapping or adjacent ones.
pub fn merge_ranges(mut v: Vec<(u64, u64)>) -> Vec<(u64, u64)> {
    v.sort_unstable();
    let mut out: Vec<(u64, u64)> = Vec::with_capacity(v.len());
    for (lo, hi) in v {
        match out.last_mut() {
            Some(last) if lo <= last.1.saturating_add(1) => last.1 = last.1.max(hi),
            _ => out.push((lo, hi)),
        }
    }
    out
}

/// A node of the decomposition, kept in Z order: a finished range, or a
/// quadtree node (its prefix at the current level) straddling the edge.
#[derive(Clone, Copy)]
enum Node {
    Done(u64, u64),
    Open(u64),
}

impl Node {
    fn range(self, level: u32) -> (u64, u64) {
        match self {
            Node::Done(lo, hi) => (lo, hi),
            Node::Open(p) => node_range(p, level),
        }
    }
}

/// Number of ranges `nodes` (in Z order, open nodes at `level`) make once
/// adjacent ones are joined.
fn merged_len(nodes: &[Node], level: u32) -> usize {
    let mut n = 0;
    let mut prev: Option<u64> = None;
    for nd in nodes {
        let (lo, hi) = nd.range(level);
        if prev.is_none_or(|p| p.checked_add(1) != Some(lo)) {
            n += 1;
        }
        prev = Some(hi);
    }
    n
}

/// The Z ranges (inclusive, sorted, disjoint and non-adjacent) covering
/// every cell of `q` (`[x0, y0, x1, y1]`, inclusive), at most
/// `max(max_ranges, 1)` of them. Empty when `q` is empty (`x0 > x1` or
/// `y0 > y1`). See the [module documentation](self).
///
/// The nodes stay in Z order as they are split (children lie inside their
/// parent's range), so each level costs one linear pass.
pub fn z_ranges(q: &CellRect, max_ranges: usize) -> Vec<(u64, u64)> {
    let cap = max_ranges.max(1);
    if q[0] > q[2] || q[1] > q[3] {
        return Vec::new();
    }
    let mut nodes: Vec<Node> = match relation(0, 0, q) {
        (_, true) => return vec![(0, u64::MAX)],
        (true, false) => vec![Node::Open(0)],
        (false, _) => return Vec::new(),
    };
    let mut level = 0;
    let mut next: Vec<Node> = Vec::new();
    while level < ORDER && nodes.iter().any(|n| matches!(n, Node::Open(_))) {
        next.clear();
        for &nd in &nodes {
            match nd {
                Node::Done(..) => next.push(nd),
                Node::Open(p) => {
                    for d in 0..4u64 {
                        let c = (p << 2) | d;
                        match relation(c, level + 1, q) {
                            (_, true) => {
                                let (lo, hi) = node_range(c, level + 1);
                                next.push(Node::Done(lo, hi));
                            }
                            (true, false) => next.push(Node::Open(c)),
                            (false, _) => {}
                        }
                    }
                }
            }
        }
        if merged_len(&next, level + 1) > cap {
            break;
        }
        std::mem::swap(&mut nodes, &mut next);
        level += 1;
    }
    let mut out: Vec<(u64, u64)> = Vec::with_capacity(cap);
    for nd in nodes {
        let (lo, hi) = nd.range(level);
        match out.last_mut() {
            Some(last) if last.1.checked_add(1) == Some(lo) => last.1 = hi,
            _ => out.push((lo, hi)),
        }
    }
    out
}

/// The Z ranges of the cells of `space` that the rectangles `rects` touch
/// (each decomposed with at most `max_ranges` ranges), merged.
pub fn query_ranges(space: &Space, rects: &[[f64; 4]], max_ranges: usize) -> Vec<(u64, u64)> {
    let mut all = Vec::new();
    for r in rects {
        let q = super::hilbert_range::cell_rect(space, r);
        all.extend(z_ranges(&q, max_ranges));
    }
    merge_ranges(all)
}

/// Whether any of the sorted, disjoint `ranges` meets `[lo, hi]`.
pub fn ranges_meet(ranges: &[(u64, u64)], lo: u64, hi: u64) -> bool {
    let i = ranges.partition_point(|r| r.1 < lo);
    ranges.get(i).is_some_and(|r| r.0 <= hi)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn hand_computed_interleavings() {
        // x = 0b10, y = 0b01: bits y1 x1 y0 x0 = 0 1 1 0.
        assert_eq!(interleave(0b10, 0b01), 0b0110);
        // The 2 x 2 "Z": (0,0), (1,0), (0,1), (1,1).
        assert_eq!(interleave(0, 0), 0);
        assert_eq!(interleave(1, 0), 1);
        assert_eq!(interleave(0, 1), 2);
        assert_eq!(interleave(1, 1), 3);
        // x = 0b101, y = 0b011: y2 x2 y1 x1 y0 x0 = 0 1 1 0 1 1.
        assert_eq!(interleave(0b101, 0b011), 0b01_1011);
        assert_eq!(interleave(u32::MAX, 0), 0x5555_5555_5555_5555);
        assert_eq!(interleave(0, u32::MAX), 0xAAAA_AAAA_AAAA_AAAA);
        assert_eq!(interleave(u32::MAX, u32::MAX), u64::MAX);
        // The top bit of y is the top bit of z.
        assert_eq!(interleave(0, 1 << 31), 1 << 63);
        assert_eq!(interleave(1 << 31, 0), 1 << 62);
        assert_eq!(deinterleave(0b0110), (0b10, 0b01));
    }

    #[test]
    fn z_value_uses_the_hilbert_grid_and_clamps() {
        let s = Space {
            min_x: 0.0,
            min_y: 0.0,
            max_x: 4.0,
            max_y: 4.0,
        };
        // (2.5, 1.5): column 2.5/4 * 2^32 = 0b1010..0, row 0b0110..0.
        let (cx, cy) = s.cell(2.5, 1.5);
        assert_eq!((cx, cy), (0xA000_0000, 0x6000_0000));
        assert_eq!(z_value(&s, 2.5, 1.5), interleave(cx, cy));
        // Top digits (y x per level): level 1 (1,0) -> 01, level 2 (0,1) -> 10,
        // level 3 (1,1) -> 11, level 4 (0,0) -> 00.
        assert_eq!(z_value(&s, 2.5, 1.5) >> 56, 0b0110_1100);
        // Outside the space: clamped to the edge cells.
        assert_eq!(z_value(&s, 9.0, -3.0), interleave(u32::MAX, 0));
        assert_eq!(z_value(&s, -1.0, 99.0), interleave(0, u32::MAX));
        assert_eq!(z_value(&s, f64::NAN, 4.0), interleave(0, u32::MAX));
    }

    #[test]
    fn small_rectangles_decompose_exactly() {
        // Cells x 1..=2, y 0..=1 in the corner: z of (1,0)=1, (2,0)=4,
        // (1,1)=3, (2,1)=6.
        let r = z_ranges(&[1, 0, 2, 1], 64);
        assert_eq!(r, vec![(1, 1), (3, 4), (6, 6)]);
        // An aligned 2x2 block is one range.
        assert_eq!(z_ranges(&[2, 2, 3, 3], 64), vec![(12, 15)]);
        // The whole grid.
        assert_eq!(
            z_ranges(&[0, 0, u32::MAX, u32::MAX], 64),
            vec![(0, u64::MAX)]
        );
        // Empty rectangle.
        assert!(z_ranges(&[5, 0, 4, 9], 64).is_empty());
        // Cap 1: one over-covering range.
        let one = z_ranges(&[1, 0, 2, 1], 1);
        assert_eq!(one.len(), 1);
        assert!(one[0].0 <= 1 && one[0].1 >= 6);
    }

    #[test]
    fn ranges_meet_finds_intersections() {
        let r = vec![(10, 20), (30, 40)];
        assert!(ranges_meet(&r, 0, 10));
        assert!(ranges_meet(&r, 20, 25));
        assert!(!ranges_meet(&r, 21, 29));
        assert!(ranges_meet(&r, 25, 35));
        assert!(ranges_meet(&r, 0, u64::MAX));
        assert!(!ranges_meet(&r, 41, u64::MAX));
        assert!(!ranges_meet(&[], 0, u64::MAX));
    }

    fn check_cover(q: CellRect, cap: usize, probes: &[(u32, u32)]) -> Result<(), TestCaseError> {
        let r = z_ranges(&q, cap);
        prop_assert!(!r.is_empty());
        prop_assert!(r.len() <= cap.max(1), "{} ranges for cap {}", r.len(), cap);
        for w in r.windows(2) {
            // Sorted, disjoint, not adjacent (adjacent ones are merged).
            prop_assert!(w[0].0 <= w[0].1);
            prop_assert!(w[0].1.saturating_add(1) < w[1].0, "{:?}", w);
        }
        for &(x, y) in probes {
            let inside = q[0] <= x && x <= q[2] && q[1] <= y && y <= q[3];
            if inside {
                let z = interleave(x, y);
                prop_assert!(
                    ranges_meet(&r, z, z),
                    "cell ({}, {}) z {} uncovered",
                    x,
                    y,
                    z
                );
            }
        }
        Ok(())
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(400))]

        #[test]
        fn interleave_roundtrips(x in any::<u32>(), y in any::<u32>()) {
            prop_assert_eq!(deinterleave(interleave(x, y)), (x, y));
            // Bit by bit against the definition.
            let z = interleave(x, y);
            for i in 0..32 {
                prop_assert_eq!((z >> (2 * i)) & 1, u64::from((x >> i) & 1));
                prop_assert_eq!((z >> (2 * i + 1)) & 1, u64::from((y >> i) & 1));
            }
        }

        /// Small rectangles in a small corner: every cell of the
        /// rectangle is in some range (all cells enumerated).
        #[test]
        fn every_cell_is_covered_small(
            x0 in 0u32..40, y0 in 0u32..40, w in 0u32..40, h in 0u32..40, cap in 1usize..300,
        ) {
            let q = [x0, y0, x0 + w, y0 + h];
            let probes: Vec<(u32, u32)> = (q[0]..=q[2])
                .flat_map(|x| (q[1]..=q[3]).map(move |y| (x, y)))
                .collect();
            check_cover(q, cap, &probes)?;
            // Without a binding cap the ranges are exact.
            let r = z_ranges(&q, 100_000);
            let n: u64 = r.iter().map(|&(a, b)| b - a + 1).sum();
            prop_assert_eq!(n, u64::from(w + 1) * u64::from(h + 1));
        }

        /// Anywhere in the grid: the corners, edges and random cells of the
        /// rectangle are covered; sorted, disjoint, capped.
        #[test]
        fn every_cell_is_covered_anywhere(
            x0 in any::<u32>(), y0 in any::<u32>(), w in any::<u32>(), h in any::<u32>(),
            cap in 1usize..300,
            fr in proptest::collection::vec((0.0f64..=1.0, 0.0f64..=1.0), 0..64),
        ) {
            let q = [x0, y0, x0.saturating_add(w), y0.saturating_add(h)];
            let at = |f: f64, a: u32, b: u32| a + ((f64::from(b - a)) * f).floor() as u32;
            let mut probes = vec![
                (q[0], q[1]), (q[2], q[1]), (q[0], q[3]), (q[2], q[3]),
            ];
            for &(fx, fy) in &fr {
                let (x, y) = (at(fx, q[0], q[2]).min(q[2]), at(fy, q[1], q[3]).min(q[3]));
                probes.push((x, y));
                // Edge cells, where the decomposition is finest.
                probes.push((q[0], y));
                probes.push((q[2], y));
                probes.push((x, q[1]));
                probes.push((x, q[3]));
            }
            check_cover(q, cap, &probes)?;
        }
    }
}
