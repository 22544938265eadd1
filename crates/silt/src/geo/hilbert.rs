//! Hilbert-curve keys for 2-D coordinates.
//!
//! # How coordinates map to the curve
//!
//! A [`Space`] is a box `[min_x, max_x] x [min_y, max_y]` (for geographic
//! data [`Space::WORLD`], longitude x latitude). [`Space::hilbert_value`]
//! divides it into a grid of 2^32 x 2^32 cells and numbers the cells along
//! the order-32 Hilbert curve:
//!
//! ```text
//! cx = floor((x - min_x) / (max_x - min_x) * 2^32), clamped to [0, 2^32 - 1]
//! cy = floor((y - min_y) / (max_y - min_y) * 2^32), clamped to [0, 2^32 - 1]
//! h  = fast_hilbert::xy2h(cx, cy, 32)            (a u64 in [0, 2^64 - 1])
//! ```
//!
//! Values outside the space are clamped to its edges (so `x = max_x` falls in
//! the last column, cell 2^32 - 1), and a NaN coordinate maps to cell 0.
//!
//! # Orientation
//!
//! Cell `(0, 0)` is the corner `(min_x, min_y)` (south-west), with x growing
//! to the right (east) and y growing up (north). The curve starts in cell
//! `(0, 0)` (Hilbert value 0) and its first-level quadrants are visited in
//! the order south-west, north-west, north-east, south-east: its first step
//! goes *up* (`(0, 0)` then `(0, 1)` at order 1) and it ends in the
//! south-east corner `(2^n - 1, 0)`. Inside each quadrant the sub-curve is
//! transposed (south-west quadrant), kept (the two north quadrants) or
//! anti-transposed (south-east quadrant), which is the classic Hilbert
//! construction.
//!
//! This is exactly the orientation of the state diagram of Figure 4.2 of the
//! LSM spatial-index study the design follows (seed 000): there, in a 4 x 4
//! grid (order 2), the cell with x = `10` and y = `01` (binary) has the Hilbert
//! sequence number `1101` = 13, and `fast_hilbert::xy2h(2, 1, 2)` also gives
//! 13; the unit tests check this and compare `fast_hilbert` against an
//! independent recursive construction of the paper's curve for orders 1 to 6.
//! No separate "paper orientation" function is therefore needed.
//!
//! Because the curve of an even order restricted to its lower-left quarter is
//! the curve of the order two less, the value of a cell whose coordinates fit
//! in `k` bits is the same for every even order `>= k`; `fast_hilbert` uses
//! this, and its results depend on `order` only through its parity.

/// A rectangular 2-D domain mapped onto a 2^32 x 2^32 Hilbert grid. See the
/// [module documentation](self) for the exact mapping.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Space {
    /// Smallest x (west edge); maps to column 0.
    pub min_x: f64,
    /// Smallest y (south edge); maps to row 0.
    pub min_y: f64,
    /// Largest x (east edge); maps to column 2^32 - 1.
    pub max_x: f64,
    /// Largest y (north edge); maps to row 2^32 - 1.
    pub max_y: f64,
}

/// Number of cells along each axis of the grid: 2^32.
const GRID: f64 = 4_294_967_296.0;

impl Space {
    /// The geographic domain: longitude `[-180, 180]` x latitude `[-90, 90]`.
    pub const WORLD: Space = Space {
        min_x: -180.0,
        min_y: -90.0,
        max_x: 180.0,
        max_y: 90.0,
    };

    /// Grid column and row of `(x, y)`: each axis is mapped linearly onto
    /// `[0, 2^32)`, floored and clamped to `[0, 2^32 - 1]`; NaN gives 0.
    pub fn cell(&self, x: f64, y: f64) -> (u32, u32) {
        (
            axis_cell(x, self.min_x, self.max_x),
            axis_cell(y, self.min_y, self.max_y),
        )
    }

    /// The order-32 Hilbert value of the cell containing `(x, y)`. Never
    /// panics: out-of-space values are clamped to the edges and NaN maps to
    /// cell 0 on its axis. A degenerate space (`min == max` on an axis) puts
    /// every value at or below `min` in cell 0 and above it in the last cell.
    pub fn hilbert_value(&self, x: f64, y: f64) -> u64 {
        let (cx, cy) = self.cell(x, y);
        fast_hilbert::xy2h(cx, cy, 32)
    }
}

fn axis_cell(v: f64, min: f64, max: f64) -> u32 {
    let t = (v - min) / (max - min) * GRID;
    if t.is_nan() {
        // NaN input, or a degenerate (zero-width) space hit exactly.
        return 0;
    }
    // Clamp explicitly (the cast would saturate too, but say what we mean).
    t.floor().clamp(0.0, GRID - 1.0) as u32
}

/// Hilbert value of grid cell `(x, y)` on the curve of the given order (a
/// thin wrapper over `fast_hilbert::xy2h`, orientation as described in the
/// [module documentation](self)).
///
/// `x` and `y` should be below `2^order`; `order` is clamped to 32 (the most
/// a `u64` result can hold). Values from different orders are only comparable
/// when the orders have the same parity.
pub fn hilbert_cell(x: u32, y: u32, order: u8) -> u64 {
    fast_hilbert::xy2h(x, y, order.min(32))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Independent construction of the curve of the paper's Figure 4.2:
    /// quadrant order SW, NW, NE, SE; the SW sub-curve transposed, the SE one
    /// anti-transposed.
    fn reference(x: u64, y: u64, order: u32) -> u64 {
        if order == 0 {
            return 0;
        }
        let s = 1u64 << (order - 1);
        let (qx, qy) = (x >= s, y >= s);
        let (lx, ly) = (x % s, y % s);
        let (q, sx, sy) = match (qx, qy) {
            (false, false) => (0, ly, lx),
            (false, true) => (1, lx, ly),
            (true, true) => (2, lx, ly),
            (true, false) => (3, s - 1 - ly, s - 1 - lx),
        };
        q * s * s + reference(sx, sy, order - 1)
    }

    #[test]
    fn paper_worked_example() {
        // Seed 000, Fig. 4.2: (x, y) = (10, 01) in binary -> 1101 = 13.
        assert_eq!(reference(0b10, 0b01, 2), 0b1101);
        assert_eq!(hilbert_cell(0b10, 0b01, 2), 0b1101);
        // First level: state 0 maps x,y bits 10 to sequence number 11.
        assert_eq!(hilbert_cell(1, 0, 1), 0b11);
        // The curve starts at (0,0) and steps up first.
        assert_eq!(hilbert_cell(0, 0, 2), 0);
        assert_eq!(hilbert_cell(1, 0, 2), 1);
        assert_eq!(hilbert_cell(0, 1, 1), 1);
        assert_eq!(hilbert_cell(3, 0, 2), 15);
    }

    #[test]
    fn fast_hilbert_matches_paper_orientation() {
        for order in 1..=6u32 {
            let n = 1u32 << order;
            let mut seen = vec![false; (n * n) as usize];
            for x in 0..n {
                for y in 0..n {
                    let h = hilbert_cell(x, y, order as u8);
                    assert_eq!(
                        h,
                        reference(u64::from(x), u64::from(y), order),
                        "order {order} cell ({x},{y})"
                    );
                    seen[h as usize] = true;
                }
            }
            assert!(seen.iter().all(|s| *s), "order {order} is a bijection");
        }
        // Even orders agree with each other on small cells.
        assert_eq!(hilbert_cell(2, 1, 32), 13);
        assert_eq!(Space::WORLD.hilbert_value(-180.0, -90.0), 0);
    }

    #[test]
    fn world_mapping() {
        let w = Space::WORLD;
        assert_eq!(w.cell(-180.0, -90.0), (0, 0));
        assert_eq!(w.cell(180.0, 90.0), (u32::MAX, u32::MAX));
        assert_eq!(w.cell(0.0, 0.0), (1 << 31, 1 << 31));
        // Clamping and NaN.
        assert_eq!(w.cell(-500.0, 1e300), (0, u32::MAX));
        assert_eq!(w.cell(f64::NAN, f64::INFINITY), (0, u32::MAX));
        assert_eq!(w.hilbert_value(f64::NAN, f64::NAN), 0);
        // The four first-level quadrants: SW, NW, NE, SE.
        let q = |x: f64, y: f64| w.hilbert_value(x, y) >> 62;
        assert_eq!(q(-90.0, -45.0), 0);
        assert_eq!(q(-90.0, 45.0), 1);
        assert_eq!(q(90.0, 45.0), 2);
        assert_eq!(q(90.0, -45.0), 3);
        // Degenerate space does not panic.
        let flat = Space {
            min_x: 0.0,
            min_y: 0.0,
            max_x: 0.0,
            max_y: 1.0,
        };
        assert_eq!(flat.cell(0.0, 0.5), (0, 1 << 31));
        assert_eq!(flat.cell(1.0, 0.5).0, u32::MAX);
        // Order above 32 is clamped rather than overflowing.
        assert_eq!(hilbert_cell(2, 1, 200), hilbert_cell(2, 1, 32));
    }

    proptest! {
        #[test]
        fn consecutive_values_are_adjacent_cells(h in any::<u64>()) {
            let h = h.min(u64::MAX - 1);
            let (x0, y0) = fast_hilbert::h2xy::<u32>(h, 32);
            let (x1, y1) = fast_hilbert::h2xy::<u32>(h + 1, 32);
            prop_assert_eq!(x0.abs_diff(x1) + y0.abs_diff(y1), 1);
            prop_assert_eq!(hilbert_cell(x0, y0, 32), h);
            prop_assert_eq!(hilbert_cell(x1, y1, 32), h + 1);
        }

        #[test]
        fn consecutive_values_adjacent_small_order(h in 0u64..(1 << 20) - 1) {
            let (x0, y0) = fast_hilbert::h2xy::<u32>(h, 10);
            let (x1, y1) = fast_hilbert::h2xy::<u32>(h + 1, 10);
            prop_assert_eq!(x0.abs_diff(x1) + y0.abs_diff(y1), 1);
            prop_assert!(x0 < 1024 && y0 < 1024);
        }

        #[test]
        fn value_round_trips_through_cell(x in -200.0..200.0f64, y in -100.0..100.0f64) {
            let w = Space::WORLD;
            let (cx, cy) = w.cell(x, y);
            let h = w.hilbert_value(x, y);
            prop_assert_eq!(fast_hilbert::h2xy::<u32>(h, 32), (cx, cy));
            // The cell's box contains the (clamped) point.
            let cw = 360.0 / GRID;
            let ch = 180.0 / GRID;
            let xc = x.clamp(-180.0, 180.0);
            let yc = y.clamp(-90.0, 90.0);
            let x_lo = -180.0 + f64::from(cx) * cw;
            let y_lo = -90.0 + f64::from(cy) * ch;
            prop_assert!(xc >= x_lo - 1e-9 && xc <= x_lo + cw + 1e-9);
            prop_assert!(yc >= y_lo - 1e-9 && yc <= y_lo + ch + 1e-9);
        }
    }
}
