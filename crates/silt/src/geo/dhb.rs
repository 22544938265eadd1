//! Keys of the DHB-tree (seed 000 §4.2.1): a B+-tree of points ordered by
//! the Hilbert curve at full precision, with no stored Hilbert value.
//!
//! The paper's DHB-tree compares two points *relatively*: walk the Hilbert
//! state diagram from the most significant bit of both coordinates down and
//! stop at the first level where the two points fall in different
//! sub-squares. Silt's LSM trees are ordered by bytes, so instead of a custom
//! comparator the key *is* the point's position on a full-resolution curve,
//! which orders keys exactly as the relative comparison would
//! ([`hilbert_cmp`] is that comparison; a property test checks the two
//! agree) and is invertible, so the point is not stored a second time.
//!
//! # How coordinates map to the curve
//!
//! The paper does not say. Silt maps each coordinate (a finite `f64`) to the
//! order-preserving 64-bit integer [`ord_bits`] (the IEEE-754 bits with the
//! sign bit flipped for non-negative values and all bits flipped for negative
//! ones, `-0.0` folded onto `+0.0`), so the curve spans the whole `f64` plane
//! with no space to configure and no clamping. The key is the order-64
//! Hilbert index of `(ord_bits(x), ord_bits(y))`, a `u128` in the same
//! orientation as [`super::hilbert`] (`fast_hilbert::xy2h::<u64>(x, y, 64)`),
//! stored big-endian (16 bytes) before the primary key. Decoding inverts both
//! steps exactly. A query rectangle maps to a rectangle of the integer grid
//! (the mapping is monotone on each axis), and range searches use the
//! next-match walk of [`next_match`] at full resolution: a point matches
//! exactly when its cell is inside, so there are no false positives.
//!
//! Because the grid is not linear in the coordinate values (each binade of
//! an axis gets the same number of cells), the curve is only locally
//! Hilbert-like in the coordinate plane; it is still a total order in which
//! every aligned square of the integer grid is one contiguous key range,
//! which is all the next-match search needs.

use std::cmp::Ordering;

/// Order-preserving encoding of a coordinate: `a < b` (as numbers, `-0.0 ==
/// +0.0`) iff `ord_bits(a) < ord_bits(b)`, for non-NaN values.
pub fn ord_bits(v: f64) -> u64 {
    let v = if v == 0.0 { 0.0 } else { v };
    let b = v.to_bits();
    if b >> 63 == 1 { !b } else { b | (1 << 63) }
}

/// Inverse of [`ord_bits`].
pub fn from_ord_bits(u: u64) -> f64 {
    let b = if u >> 63 == 1 { u & !(1 << 63) } else { !u };
    f64::from_bits(b)
}

/// The DHB key of a point: its index on the order-64 Hilbert curve over the
/// [`ord_bits`] grid.
pub fn key(x: f64, y: f64) -> u128 {
    fast_hilbert::xy2h::<u64>(ord_bits(x), ord_bits(y), 64)
}

/// The grid cell (= the point's encoded coordinates) of a key.
pub fn cell(h: u128) -> (u64, u64) {
    fast_hilbert::h2xy::<u64>(h, 64)
}

/// The point of a key (`decode(key(p)) == p`, with `-0.0` read as `+0.0`).
pub fn point(h: u128) -> (f64, f64) {
    let (x, y) = cell(h);
    (from_ord_bits(x), from_ord_bits(y))
}

/// The relative Hilbert comparison of the paper: walk the curve's quadrants
/// from the most significant bit and stop at the first level where the two
/// cells differ. Independent of `fast_hilbert` (used to test the keys).
pub fn hilbert_cmp(a: (u64, u64), b: (u64, u64)) -> Ordering {
    let (mut ax, mut ay) = a;
    let (mut bx, mut by) = b;
    // Side of the current square is 2^k; coordinates are relative to it.
    for k in (0..64u32).rev() {
        let s = 1u64 << k;
        let quad = |x: u64, y: u64| -> u8 {
            match (x >= s, y >= s) {
                (false, false) => 0,
                (false, true) => 1,
                (true, true) => 2,
                (true, false) => 3,
            }
        };
        let (qa, qb) = (quad(ax, ay), quad(bx, by));
        if qa != qb {
            return qa.cmp(&qb);
        }
        // Same quadrant: descend, transforming as the curve does (SW
        // transposed, SE anti-transposed).
        let step = |x: u64, y: u64| -> (u64, u64) {
            let (lx, ly) = (x & (s - 1), y & (s - 1));
            match qa {
                0 => (ly, lx),
                3 => (s - 1 - ly, s - 1 - lx),
                _ => (lx, ly),
            }
        };
        (ax, ay) = step(ax, ay);
        (bx, by) = step(bx, by);
    }
    Ordering::Equal
}

/// A rectangle of the encoded grid, inclusive: `[x0, y0, x1, y1]`.
pub type Cells = [u64; 4];

/// The encoded grid rectangle of a query rectangle `[min_x, min_y, max_x,
/// max_y]`; `None` if it is empty or has a NaN.
pub fn cells_of(r: &[f64; 4]) -> Option<Cells> {
    if r.iter().any(|v| v.is_nan()) || r[0] > r[2] || r[1] > r[3] {
        return None;
    }
    Some([
        ord_bits(r[0]),
        ord_bits(r[1]),
        ord_bits(r[2]),
        ord_bits(r[3]),
    ])
}

/// The smallest key `>= from` whose cell lies in `q` (Lawder's next-match
/// at full resolution; the walk of [`super::hilbert_range::next_match_on`]
/// on the order-64 curve).
pub fn next_match(q: &Cells, from: u128) -> Option<u128> {
    super::hilbert_range::next_match_on::<u128>(q, from)
}

/// Whether a cell lies in `q`.
pub fn inside(q: &Cells, c: (u64, u64)) -> bool {
    super::hilbert_range::inside(q, c)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn coord() -> impl Strategy<Value = f64> {
        prop_oneof![
            any::<f64>().prop_filter("finite", |v| v.is_finite()),
            -10.0..10.0f64,
            Just(0.0),
            Just(-0.0),
            Just(f64::MIN_POSITIVE),
            Just(-f64::MAX),
        ]
    }

    #[test]
    fn small_corner_agrees_with_order_32() {
        // The order-64 curve restricted to its lower-left 2^32 square is the
        // order-32 curve (both even orders), i.e. the DHVB orientation.
        for (x, y) in [
            (0u64, 0u64),
            (1, 0),
            (2, 1),
            (12345, 67890),
            (u32::MAX as u64, 7),
        ] {
            let h = fast_hilbert::xy2h::<u64>(x, y, 64);
            assert_eq!(
                h,
                u128::from(fast_hilbert::xy2h::<u32>(x as u32, y as u32, 32))
            );
        }
        // At an even order the corner 2x2 block is visited (0,0), (1,0),
        // (1,1), (0,1) (the SW sub-curve is transposed).
        assert_eq!(hilbert_cmp((0, 0), (1, 0)), Ordering::Less);
        assert_eq!(hilbert_cmp((1, 0), (1, 1)), Ordering::Less);
        assert_eq!(hilbert_cmp((1, 1), (0, 1)), Ordering::Less);
        assert_eq!(fast_hilbert::xy2h::<u64>(0, 1, 64), 3);
    }

    #[test]
    fn ord_bits_orders_and_inverts() {
        let vals = [
            -f64::MAX,
            -1e10,
            -1.0,
            -f64::MIN_POSITIVE,
            0.0,
            1e-300,
            0.5,
            1.0,
            180.0,
            f64::MAX,
        ];
        for w in vals.windows(2) {
            assert!(ord_bits(w[0]) < ord_bits(w[1]), "{} < {}", w[0], w[1]);
        }
        for v in vals {
            assert_eq!(from_ord_bits(ord_bits(v)).to_bits(), v.to_bits());
        }
        assert_eq!(ord_bits(-0.0), ord_bits(0.0));
        assert_eq!(from_ord_bits(ord_bits(-0.0)).to_bits(), 0.0f64.to_bits());
    }

    proptest! {
        #[test]
        fn key_order_is_relative_hilbert_order(
            ax in coord(), ay in coord(), bx in coord(), by in coord(),
        ) {
            let (ka, kb) = (key(ax, ay), key(bx, by));
            let rel = hilbert_cmp((ord_bits(ax), ord_bits(ay)), (ord_bits(bx), ord_bits(by)));
            prop_assert_eq!(ka.cmp(&kb), rel);
            // Decoding gives the point back (-0.0 as +0.0).
            let (x, y) = point(ka);
            prop_assert_eq!(x, ax);
            prop_assert_eq!(y, ay);
            prop_assert!(x.to_bits() == ax.to_bits() || ax == 0.0);
        }

        #[test]
        fn nearby_keys_order_like_relative_comparison(
            x in any::<u64>(), y in any::<u64>(), dx in 0u64..4, dy in 0u64..4,
        ) {
            // Points in the same small square exercise the deepest levels.
            let (bx, by) = (x ^ dx, y ^ dy);
            let (ka, kb) = (
                fast_hilbert::xy2h::<u64>(x, y, 64),
                fast_hilbert::xy2h::<u64>(bx, by, 64),
            );
            prop_assert_eq!(ka.cmp(&kb), hilbert_cmp((x, y), (bx, by)));
            prop_assert_eq!(cell(ka), (x, y));
        }

        #[test]
        fn next_match_lands_inside_and_skips_nothing(
            x0 in any::<u64>(), y0 in any::<u64>(), w in 0u64..1000, hgt in 0u64..1000,
            from in any::<u128>(),
        ) {
            let q = [x0, y0, x0.saturating_add(w), y0.saturating_add(hgt)];
            let corners = [(q[0], q[1]), (q[2], q[1]), (q[0], q[3]), (q[2], q[3])];
            match next_match(&q, from) {
                Some(h) => {
                    prop_assert!(h >= from);
                    prop_assert!(inside(&q, cell(h)));
                    for c in corners {
                        let k = fast_hilbert::xy2h::<u64>(c.0, c.1, 64);
                        prop_assert!(!(k >= from && k < h));
                    }
                }
                None => {
                    for c in corners {
                        prop_assert!(fast_hilbert::xy2h::<u64>(c.0, c.1, 64) < from);
                    }
                }
            }
        }
    }

    #[test]
    fn next_match_equals_brute_force_in_a_small_corner() {
        let mut seed = 11u64;
        let mut rnd = |n: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % n
        };
        for _ in 0..300 {
            let (a, b, c, d) = (rnd(16), rnd(16), rnd(16), rnd(16));
            let q = [a.min(c), b.min(d), a.max(c), b.max(d)];
            let from = u128::from(rnd(256));
            let want = (from..256).find(|&h| inside(&q, cell(h)));
            assert_eq!(next_match(&q, from), want, "q {q:?} from {from}");
        }
    }
}
