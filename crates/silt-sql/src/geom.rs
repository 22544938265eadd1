//! Geometry helpers shared by the `ST_*` functions, pushdown and joins.
//!
//! Geometries travel through SQL as WKT text (`POINT(x y)`,
//! `POLYGON((x y, ...))`); coordinates are longitude/latitude degrees.
//! Predicates are Silt's (`silt::geo::predicates`, planar in lon/lat,
//! boundaries included) except `ST_Contains` / `ST_Within`, which use the
//! `geo` crate's OGC semantics. Distances are great-circle metres on a
//! sphere of radius 6,371,008.8 m.

use geo::Contains;
use silt::Geometry;
use silt::geo::predicates;

/// Parse and validate WKT.
pub fn parse_wkt(text: &str) -> Result<Geometry, String> {
    let g = Geometry::parse_wkt(text).map_err(|e| e.to_string())?;
    g.validate()
        .map_err(|e| format!("invalid geometry `{text}`: {e}"))?;
    Ok(g)
}

fn ring(r: &[(f64, f64)]) -> geo::LineString<f64> {
    geo::LineString::from(r.to_vec())
}

/// The `geo` crate's form of a geometry.
pub fn to_geo(g: &Geometry) -> geo::Geometry<f64> {
    match g {
        Geometry::Point { x, y } => geo::Point::new(*x, *y).into(),
        Geometry::Rect {
            min_x,
            min_y,
            max_x,
            max_y,
        } => geo::Rect::new(
            geo::coord! { x: *min_x, y: *min_y },
            geo::coord! { x: *max_x, y: *max_y },
        )
        .into(),
        Geometry::Polygon { exterior, holes } => {
            geo::Polygon::new(ring(exterior), holes.iter().map(|h| ring(h)).collect()).into()
        }
    }
}

/// Whether the geometries share a point (Silt's predicate).
pub fn intersects(a: &Geometry, b: &Geometry) -> bool {
    predicates::intersects(a, b)
}

/// Whether `a` contains `b` (OGC: no point of `b` outside `a` and at least
/// one interior point in common).
pub fn contains(a: &Geometry, b: &Geometry) -> bool {
    to_geo(a).contains(&to_geo(b))
}

fn vertices(g: &Geometry) -> Vec<(f64, f64)> {
    match g {
        Geometry::Point { x, y } => vec![(*x, *y)],
        Geometry::Rect {
            min_x,
            min_y,
            max_x,
            max_y,
        } => vec![
            (*min_x, *min_y),
            (*max_x, *min_y),
            (*max_x, *max_y),
            (*min_x, *max_y),
        ],
        Geometry::Polygon { exterior, holes } => exterior
            .iter()
            .chain(holes.iter().flatten())
            .copied()
            .collect(),
    }
}

/// Great-circle distance in metres between two geometries: exact from a
/// point (`silt::geo::predicates::distance_m`); between two non-point
/// geometries 0 when they intersect, else the smallest distance from a
/// vertex of either to the other (the closest pair of two disjoint
/// polygons always involves a vertex).
pub fn distance_m(a: &Geometry, b: &Geometry) -> f64 {
    match (a, b) {
        (Geometry::Point { x, y }, other) | (other, Geometry::Point { x, y }) => {
            predicates::distance_m(other, *x, *y)
        }
        _ => {
            if predicates::intersects(a, b) {
                return 0.0;
            }
            let mut best = f64::INFINITY;
            for (x, y) in vertices(a) {
                best = best.min(predicates::distance_m(b, x, y));
            }
            for (x, y) in vertices(b) {
                best = best.min(predicates::distance_m(a, x, y));
            }
            best
        }
    }
}

/// Whether the geometries are within `metres` of each other.
pub fn dwithin(a: &Geometry, b: &Geometry, metres: f64) -> bool {
    match (a, b) {
        (Geometry::Point { x, y }, other) | (other, Geometry::Point { x, y }) => {
            predicates::within_distance_m(other, *x, *y, metres)
        }
        _ => distance_m(a, b) <= metres,
    }
}
