//! Geometry math and text tokenizers used by the secondary indexes.
//!
//! * [`hilbert`]: mapping of 2-D coordinates onto the Hilbert curve (the key
//!   of the Hilbert-ordered spatial indexes).
//! * [`sphere`]: great-circle distances in metres, distance lower bounds for
//!   best-first k-nearest-neighbour search and covering boxes for radius
//!   queries.
//! * [`predicates`]: exact refinement of candidates (intersection, distance).
//! * [`text`]: keyword and n-gram tokenizers for the inverted indexes.
//! * [`zorder`]: Z-order (Morton) keys on the same grid and the decomposition
//!   of a query rectangle into Z ranges (the `zorder` R-tree order).
//!
//! This module also holds the small helpers on plain bounding boxes
//! ([`Rect`]) shared by all of them.
//!
//! # Coordinates
//!
//! Geographic coordinates are `(x, y)` = `(longitude, latitude)` in degrees,
//! longitudes in `[-180, 180]`, latitudes in `[-90, 90]`. Geometries are
//! planar in longitude/latitude: a rectangle or polygon is the region of the
//! lon/lat plane it encloses, so a stored geometry never crosses the
//! antimeridian. Only *query* rectangles may cross it, see
//! [`split_query_rect`].

pub mod dhb;
pub mod grid;
pub mod hilbert;
pub mod hilbert_range;
pub mod predicates;
pub mod sphere;
pub mod text;
pub mod zorder;

/// An axis-aligned box `[min_x, min_y, max_x, max_y]` (edges included).
///
/// For geographic data: `[west longitude, south latitude, east longitude,
/// north latitude]` in degrees.
pub type Rect = [f64; 4];

/// A box that contains nothing and intersects nothing (the start of a
/// running union).
pub const EMPTY_RECT: Rect = [
    f64::INFINITY,
    f64::INFINITY,
    f64::NEG_INFINITY,
    f64::NEG_INFINITY,
];

/// The whole longitude/latitude domain: `[-180, -90, 180, 90]`.
pub const WORLD: Rect = [-180.0, -90.0, 180.0, 90.0];

/// Whether two boxes share at least one point. Edges are inclusive, so boxes
/// that only touch along an edge or at a corner intersect. A box with a NaN
/// coordinate intersects nothing. No antimeridian wrapping: both boxes must
/// have `min_x <= max_x` (split query boxes first with [`split_query_rect`]).
pub fn rect_intersects(a: &Rect, b: &Rect) -> bool {
    a[0] <= b[2] && b[0] <= a[2] && a[1] <= b[3] && b[1] <= a[3]
}

/// Whether the point `(x, y)` lies in the box `r`, edges included. A NaN
/// coordinate is in no box.
pub fn rect_contains_point(r: &Rect, x: f64, y: f64) -> bool {
    r[0] <= x && x <= r[2] && r[1] <= y && y <= r[3]
}

/// The smallest box that contains both boxes. NaN coordinates are ignored
/// where the other box has a number (it follows [`f64::min`] / [`f64::max`]).
pub fn rect_union(a: &Rect, b: &Rect) -> Rect {
    [
        a[0].min(b[0]),
        a[1].min(b[1]),
        a[2].max(b[2]),
        a[3].max(b[3]),
    ]
}

/// Silt's antimeridian rule for query rectangles.
///
/// A query rectangle whose `min_x` is greater than its `max_x` is taken to
/// cross the antimeridian (longitude ±180): it covers the longitudes from
/// `min_x` east to 180 and from -180 east to `max_x`. It is returned as the
/// two boxes `[min_x, min_y, 180, max_y]` and `[-180, min_y, max_x, max_y]`,
/// each with `min_x <= max_x`. Any other rectangle is returned unchanged, as
/// the only element. Latitudes are never swapped or wrapped: a rectangle with
/// `min_y > max_y` is returned as given and matches nothing.
///
/// Stored geometries never cross the antimeridian (they are planar in
/// longitude/latitude); only query rectangles get this treatment.
pub fn split_query_rect(r: &Rect) -> Vec<Rect> {
    let [min_x, min_y, max_x, max_y] = *r;
    if min_x > max_x {
        vec![[min_x, min_y, 180.0, max_y], [-180.0, min_y, max_x, max_y]]
    } else {
        vec![*r]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn intersects_edges_inclusive() {
        let a = [0.0, 0.0, 1.0, 1.0];
        assert!(rect_intersects(&a, &[1.0, 1.0, 2.0, 2.0])); // corner touch
        assert!(rect_intersects(&a, &[1.0, 0.5, 2.0, 0.6])); // edge touch
        assert!(rect_intersects(&a, &[0.2, 0.2, 0.3, 0.3])); // inside
        assert!(rect_intersects(&a, &[-1.0, -1.0, 2.0, 2.0])); // around
        assert!(!rect_intersects(&a, &[1.0001, 0.0, 2.0, 1.0]));
        assert!(!rect_intersects(&a, &[0.0, -2.0, 1.0, -0.0001]));
        assert!(!rect_intersects(&a, &[f64::NAN, 0.0, 1.0, 1.0]));
    }

    #[test]
    fn contains_and_union() {
        let r = [-10.0, -5.0, 10.0, 5.0];
        assert!(rect_contains_point(&r, -10.0, 5.0));
        assert!(rect_contains_point(&r, 0.0, 0.0));
        assert!(!rect_contains_point(&r, 10.5, 0.0));
        assert!(!rect_contains_point(&r, f64::NAN, 0.0));
        assert_eq!(
            rect_union(&r, &[20.0, -30.0, 25.0, 0.0]),
            [-10.0, -30.0, 25.0, 5.0]
        );
    }

    #[test]
    fn antimeridian_split() {
        assert_eq!(
            split_query_rect(&[170.0, -10.0, -170.0, 10.0]),
            vec![[170.0, -10.0, 180.0, 10.0], [-180.0, -10.0, -170.0, 10.0]]
        );
        let plain = [-170.0, -10.0, 170.0, 10.0];
        assert_eq!(split_query_rect(&plain), vec![plain]);
        assert_eq!(split_query_rect(&WORLD), vec![WORLD]);
    }

    fn rect_strategy() -> impl Strategy<Value = Rect> {
        (-50.0..50.0f64, -50.0..50.0f64, 0.0..30.0f64, 0.0..30.0f64)
            .prop_map(|(x, y, w, h)| [x, y, x + w, y + h])
    }

    proptest! {
        #[test]
        fn union_contains_both(a in rect_strategy(), b in rect_strategy()) {
            let u = rect_union(&a, &b);
            for r in [a, b] {
                prop_assert!(rect_contains_point(&u, r[0], r[1]));
                prop_assert!(rect_contains_point(&u, r[2], r[3]));
                prop_assert!(rect_intersects(&u, &r));
            }
        }

        #[test]
        fn intersects_is_symmetric_and_matches_points(
            a in rect_strategy(),
            b in rect_strategy(),
        ) {
            let i = rect_intersects(&a, &b);
            prop_assert_eq!(i, rect_intersects(&b, &a));
            // The intersection box, when non-empty, is in both.
            let x = a[0].max(b[0]);
            let y = a[1].max(b[1]);
            prop_assert_eq!(
                i,
                rect_contains_point(&a, x, y) && rect_contains_point(&b, x, y)
            );
        }

        #[test]
        fn split_covers_same_longitudes(
            min_x in -180.0..180.0f64,
            max_x in -180.0..180.0f64,
            lon in -180.0..180.0f64,
        ) {
            let r = [min_x, -1.0, max_x, 1.0];
            let parts = split_query_rect(&r);
            for p in &parts {
                prop_assert!(p[0] <= p[2]);
            }
            let in_parts = parts.iter().any(|p| rect_contains_point(p, lon, 0.0));
            let expected = if min_x <= max_x {
                min_x <= lon && lon <= max_x
            } else {
                lon >= min_x || lon <= max_x
            };
            prop_assert_eq!(in_parts, expected);
        }
    }
}
