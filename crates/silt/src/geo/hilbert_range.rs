//! Range search on the Hilbert curve: the next Hilbert value whose cell lies
//! in a query rectangle ("next-match", used by Hilbert-ordered B+-trees such
//! as the DHVB-tree of seed 000 §4.2), and the decomposition of a rectangle
//! into Hilbert value ranges.
//!
//! The order-32 curve is a quadtree: the values sharing their top `2l` bits
//! (a "prefix" at level `l`) cover one aligned square of side `2^(32 - l)`
//! cells. A search walks the quadtree in curve order, pruning squares that
//! miss the rectangle or end before the start value; a square entirely inside
//! the rectangle answers at once. So a next-match visits at most about four
//! squares per level (128 for the whole curve).

use super::hilbert::Space;

const ORDER: u32 = 32;

/// A rectangle of grid cells, bounds inclusive: `[x0, y0, x1, y1]`.
pub type CellRect = [u32; 4];

/// The cells of the grid of `space` that the rectangle `r` = `[min_x, min_y,
/// max_x, max_y]` (space coordinates, `min <= max`) touches.
pub fn cell_rect(space: &Space, r: &[f64; 4]) -> CellRect {
    let (x0, y0) = space.cell(r[0], r[1]);
    let (x1, y1) = space.cell(r[2], r[3]);
    [x0.min(x1), y0.min(y1), x0.max(x1), y0.max(y1)]
}

/// A position on a Hilbert curve of order [`CurveKey::ORDER`] (the curve of
/// `2^ORDER x 2^ORDER` cells): `u64` for the order-32 curve of
/// [`super::hilbert`] (DHVB, R-tree keys), `u128` for the order-64 curve of
/// [`super::dhb`]. The next-match walk is written once over this trait and
/// monomorphised for each width. Square arithmetic is done in the key type
/// (cell coordinates widen losslessly into it).
pub trait CurveKey:
    Copy
    + Ord
    + From<u8>
    + std::ops::Shl<u32, Output = Self>
    + std::ops::BitOr<Output = Self>
    + std::ops::BitAnd<Output = Self>
    + std::ops::Add<Output = Self>
    + std::ops::Sub<Output = Self>
    + std::ops::Not<Output = Self>
{
    /// A cell coordinate.
    type Cell: Copy + Ord + Into<Self>;
    /// Bits per coordinate.
    const ORDER: u32;
    /// The cell at this position.
    fn cell(self) -> (Self::Cell, Self::Cell);
}

impl CurveKey for u64 {
    type Cell = u32;
    const ORDER: u32 = ORDER;
    #[inline]
    fn cell(self) -> (u32, u32) {
        fast_hilbert::h2xy(self, ORDER as u8)
    }
}

impl CurveKey for u128 {
    type Cell = u64;
    const ORDER: u32 = 64;
    #[inline]
    fn cell(self) -> (u64, u64) {
        fast_hilbert::h2xy::<u64>(self, 64)
    }
}

/// Whether the cell `(x, y)` lies in the cell rectangle `q`.
#[inline]
pub fn inside<C: Ord>(q: &[C; 4], (x, y): (C, C)) -> bool {
    q[0] <= x && x <= q[2] && q[1] <= y && y <= q[3]
}

/// The square of cells covered by the values with `prefix` at `level`
/// (1..=ORDER): `(x, y, side)`.
#[inline]
fn square<H: CurveKey>(prefix: H, level: u32) -> (H, H, H) {
    let shift = 2 * (H::ORDER - level);
    let first = prefix << shift;
    let (x, y) = first.cell();
    let side = H::from(1) << (H::ORDER - level);
    let mask = !(side - H::from(1));
    (x.into() & mask, y.into() & mask, side)
}

/// (meets, inside) of the square `(x, y, side)` against the cell rectangle
/// `q`.
#[inline]
fn relation_of<H: CurveKey>(sq: (H, H, H), q: &[H::Cell; 4]) -> (bool, bool) {
    let (x, y, side) = sq;
    let [qx0, qy0, qx1, qy1] = q.map(Into::into);
    let one = H::from(1);
    let (sx1, sy1) = (x + side - one, y + side - one);
    let meets = x <= qx1 && qx0 <= sx1 && y <= qy1 && qy0 <= sy1;
    let inside = qx0 <= x && sx1 <= qx1 && qy0 <= y && sy1 <= qy1;
    (meets, inside)
}

/// (meets, inside) of the square `(x, y, side)` against the cell rectangle
/// `q` (shared with the Z-order decomposition).
pub(crate) fn relation(sq: (u64, u64, u64), q: &CellRect) -> (bool, bool) {
    relation_of::<u64>(sq, q)
}

fn search<H: CurveKey>(prefix: H, level: u32, q: &[H::Cell; 4], from: H) -> Option<H> {
    let shift = 2 * (H::ORDER - level);
    let lo = prefix << shift;
    let hi = lo | ((H::from(1) << shift) - H::from(1));
    if hi < from {
        return None;
    }
    let (meets, inside) = relation_of(square(prefix, level), q);
    if !meets {
        return None;
    }
    if inside || level == H::ORDER {
        return Some(lo.max(from));
    }
    (0..4u8).find_map(|d| search((prefix << 2) | H::from(d), level + 1, q, from))
}

/// The smallest curve position `>= from` whose cell lies in `q`, if any
/// (Lawder's next-match), on the curve of `H`: walk the quadtree in curve
/// order, pruning squares that miss `q` or end before `from`.
pub fn next_match_on<H: CurveKey>(q: &[H::Cell; 4], from: H) -> Option<H> {
    (0..4u8).find_map(|d| search(H::from(d), 1, q, from))
}

/// The smallest Hilbert value `>= from` whose cell lies in `q`, if any.
pub fn next_match(q: &CellRect, from: u64) -> Option<u64> {
    next_match_on::<u64>(q, from)
}

/// The end (inclusive) of the run of values starting at `from` (whose cell
/// must lie in `q`) that stay inside `q`: scanning an index from `from` to
/// this value needs no test against the rectangle's cells.
pub fn run_end(q: &CellRect, from: u64) -> u64 {
    // Walk up from the cell while the enclosing square is inside q.
    let mut level = ORDER;
    let mut end = from;
    while level >= 1 {
        let prefix = from >> (2 * (ORDER - level));
        let (_, inside) = relation(square::<u64>(prefix, level), q);
        if !inside {
            break;
        }
        let shift = 2 * (ORDER - level);
        end = (prefix << shift) | ((1u64 << shift) - 1);
        level -= 1;
    }
    end
}

/// The Hilbert value ranges (inclusive) whose cells cover `q`, in order,
/// descending at most `max_level` levels (coarser ranges cover extra cells
/// outside `q`, which callers filter). At most `4 * 2^max_level`-ish ranges.
pub fn cover_ranges(q: &CellRect, max_level: u32) -> Vec<(u64, u64)> {
    fn walk(prefix: u64, level: u32, q: &CellRect, max_level: u32, out: &mut Vec<(u64, u64)>) {
        let (meets, inside) = relation(square::<u64>(prefix, level), q);
        if !meets {
            return;
        }
        let shift = 2 * (ORDER - level);
        let lo = prefix << shift;
        let hi = lo | ((1u64 << shift) - 1);
        if inside || level >= max_level.min(ORDER) {
            match out.last_mut() {
                Some(last) if last.1.checked_add(1) == Some(lo) => last.1 = hi,
                _ => out.push((lo, hi)),
            }
            return;
        }
        for d in 0..4 {
            walk(prefix << 2 | d, level + 1, q, max_level, out);
        }
    }
    let mut out = Vec::new();
    for d in 0..4 {
        walk(d, 1, q, max_level.max(1), &mut out);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn cell_of(h: u64) -> (u32, u32) {
        fast_hilbert::h2xy(h, 32)
    }

    fn inside(q: &CellRect, (x, y): (u32, u32)) -> bool {
        q[0] <= x && x <= q[2] && q[1] <= y && y <= q[3]
    }

    /// Brute force on a small corner of the grid: cells with coordinates
    /// below 16 have Hilbert values below 256 (the corner is an even-order
    /// sub-curve), so every value can be enumerated.
    #[test]
    fn next_match_equals_brute_force_in_a_small_corner() {
        let mut seed = 7u64;
        let mut rnd = |n: u32| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed % u64::from(n)) as u32
        };
        for _ in 0..300 {
            let (a, b, c, d) = (rnd(16), rnd(16), rnd(16), rnd(16));
            let q = [a.min(c), b.min(d), a.max(c), b.max(d)];
            let from = u64::from(rnd(256));
            let want = (from..256).find(|&h| inside(&q, cell_of(h)));
            assert_eq!(next_match(&q, from), want, "q {q:?} from {from}");
            // The ranges cover exactly the rectangle's cells at full depth.
            let ranges = cover_ranges(&q, 32);
            let covered: Vec<u64> = ranges.iter().flat_map(|&(l, h)| l..=h).collect();
            let want_all: Vec<u64> = (0..256).filter(|&h| inside(&q, cell_of(h))).collect();
            assert_eq!(covered, want_all);
            if let Some(h) = want {
                let e = run_end(&q, h);
                assert!((h..=e).all(|v| inside(&q, cell_of(v))));
            }
        }
    }

    proptest! {
        #[test]
        fn next_match_lands_inside_and_skips_nothing(
            x0 in any::<u32>(), y0 in any::<u32>(), w in 0u32..5000, hgt in 0u32..5000,
            from in any::<u64>(),
        ) {
            let q = [x0, y0, x0.saturating_add(w), y0.saturating_add(hgt)];
            match next_match(&q, from) {
                Some(h) => {
                    prop_assert!(h >= from);
                    prop_assert!(inside(&q, cell_of(h)));
                    // Nothing between `from` and `h` that is cheap to check:
                    // the corners of the rectangle.
                    for (cx, cy) in [(q[0], q[1]), (q[2], q[1]), (q[0], q[3]), (q[2], q[3])] {
                        let c = fast_hilbert::xy2h(cx, cy, 32);
                        prop_assert!(!(c >= from && c < h), "corner {} skipped", c);
                    }
                }
                None => {
                    for (cx, cy) in [(q[0], q[1]), (q[2], q[1]), (q[0], q[3]), (q[2], q[3])] {
                        prop_assert!(fast_hilbert::xy2h(cx, cy, 32) < from);
                    }
                }
            }
        }
    }
}
