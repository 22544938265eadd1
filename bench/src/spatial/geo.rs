//! Spherical geometry for the peers of the spatial workloads: the great-circle
//! distance Silt ranks by, and the boxes an R-tree without a nearest-neighbour
//! search (SQLite's R*Tree) needs to answer a great-circle kNN exactly.
//!
//! Coordinates are longitude/latitude degrees; a rectangle is
//! `[min_lon, min_lat, max_lon, max_lat]`, and one with `min_lon > max_lon`
//! crosses the antimeridian (Silt's convention).

/// Mean Earth radius in metres: the sphere Silt measures distances on.
pub const EARTH_RADIUS_M: f64 = 6_371_008.8;

/// `[min_lon, min_lat, max_lon, max_lat]`.
pub type Rect = [f64; 4];

/// Great-circle distance in metres (the `atan2` form of the great-circle
/// formula, accurate at every separation; the same metric as Silt's).
pub fn haversine_m(lon1: f64, lat1: f64, lon2: f64, lat2: f64) -> f64 {
    let (s1, c1) = lat1.to_radians().sin_cos();
    let (s2, c2) = lat2.to_radians().sin_cos();
    let (sdl, cdl) = (lon2 - lon1).to_radians().sin_cos();
    let y = (c2 * sdl).hypot(c1 * s2 - s1 * c2 * cdl);
    let x = s1 * s2 + c1 * c2 * cdl;
    EARTH_RADIUS_M * y.atan2(x)
}

/// A rectangle as one or two rectangles that do not cross the antimeridian.
pub fn split_rect(r: &Rect) -> Vec<Rect> {
    let [x0, y0, x1, y1] = *r;
    if x0 > x1 {
        vec![[x0, y0, 180.0, y1], [-180.0, y0, x1, y1]]
    } else {
        vec![*r]
    }
}

/// Wraps a longitude into [-180, 180).
pub fn wrap_lon(lon: f64) -> f64 {
    let w = (lon + 180.0).rem_euclid(360.0) - 180.0;
    // rem_euclid can round up to exactly 360 for tiny negative inputs.
    if w >= 180.0 { w - 360.0 } else { w }
}

/// The box `[lon - hx, lat - hy, lon + hx, lat + hy]`, latitude clamped to
/// [-90, 90], longitude wrapped (`min > max` across the antimeridian; the whole
/// range when `hx >= 180`).
pub fn box_around(lon: f64, lat: f64, hx: f64, hy: f64) -> Rect {
    let y0 = (lat - hy).max(-90.0);
    let y1 = (lat + hy).min(90.0);
    if hx >= 180.0 {
        return [-180.0, y0, 180.0, y1];
    }
    let (mut x0, mut x1) = (lon - hx, lon + hx);
    if x0 < -180.0 {
        x0 += 360.0;
    }
    if x1 > 180.0 {
        x1 -= 360.0;
    }
    [x0, y0, x1, y1]
}

/// A lower bound (metres) of the great-circle distance from `(lon, lat)` to any
/// point outside `box_around(lon, lat, hx, hy)`: every point nearer than this
/// is inside the box.
pub fn inscribed_radius_m(lat: f64, hx: f64, hy: f64) -> f64 {
    let deg = EARTH_RADIUS_M * std::f64::consts::PI / 180.0;
    // North and south edges: the nearest point of a parallel lies on the same
    // meridian; an edge clamped at a pole does not exist.
    let north = if lat + hy >= 90.0 {
        f64::INFINITY
    } else {
        hy * deg
    };
    let south = if lat - hy <= -90.0 {
        f64::INFINITY
    } else {
        hy * deg
    };
    // East and west edges: meridians `hx` away. The distance to the whole great
    // circle through such a meridian, asin(cos(lat) sin(hx)), bounds the distance
    // to the half-meridian from below (also for paths over a pole, which cross it).
    let side = if hx >= 180.0 {
        f64::INFINITY
    } else if hx >= 90.0 {
        // A point more than a quarter turn of longitude away is at least as far
        // as the nearer pole: cos d <= sin(lat) sin(lat2) when cos(dlon) <= 0.
        (90.0 - lat.abs()) * deg
    } else {
        let s = (lat.to_radians().cos() * hx.to_radians().sin()).clamp(0.0, 1.0);
        EARTH_RADIUS_M * s.asin()
    };
    north.min(south).min(side)
}

/// Rectangles covering every point within `metres` of `(lon, lat)` (one, or two
/// when the covering box crosses the antimeridian), with a small outward margin
/// for rounding; exact answers come from refining with [`haversine_m`].
pub fn circle_bbox(lon: f64, lat: f64, metres: f64) -> Vec<Rect> {
    const MARGIN: f64 = 1e-9;
    let ang = metres / EARTH_RADIUS_M; // radians
    let dlat = ang.to_degrees() + MARGIN;
    let (y0, y1) = (lat - dlat, lat + dlat);
    if y0 <= -90.0 || y1 >= 90.0 || ang >= std::f64::consts::FRAC_PI_2 {
        // The cap holds a pole: every longitude.
        return vec![[-180.0, y0.max(-90.0), 180.0, y1.min(90.0)]];
    }
    // Largest longitude offset of a spherical cap: asin(sin r / cos lat).
    let s = (ang.sin() / lat.to_radians().cos()).clamp(-1.0, 1.0);
    let dlon = s.asin().to_degrees() + MARGIN;
    split_rect(&box_around(lon, lat, dlon, dlat))
}

/// A within-distance query on an index that can only search boxes: searches
/// the boxes bounding the circle of `metres` around `(lon, lat)` (`search`
/// appends (id, lon, lat) of the points in a box, a superset being fine) and
/// appends to `out` the (id, lon, lat) of those within `metres` by exact
/// great-circle distance. `cands` is scratch space.
pub fn within_via_boxes(
    lon: f64,
    lat: f64,
    metres: f64,
    cands: &mut Vec<(i64, f64, f64)>,
    out: &mut Vec<(i64, f64, f64)>,
    mut search: impl FnMut(&Rect, &mut Vec<(i64, f64, f64)>) -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    cands.clear();
    // The boxes are disjoint (one, or two split at the antimeridian).
    for b in circle_bbox(lon, lat, metres) {
        search(&b, cands)?;
    }
    out.extend(
        cands
            .iter()
            .filter(|&&(_, x, y)| haversine_m(lon, lat, x, y) <= metres),
    );
    Ok(())
}

/// A lower bound (metres) of the great-circle distance from `(lon, lat)` to any
/// point of the box `b` (`[min_lon, min_lat, max_lon, max_lat]`, not crossing
/// the antimeridian): the larger of the latitude gap (a great-circle path is at
/// least as long as its change of latitude) and the distance to the nearer of
/// the box's meridians (as in [`inscribed_radius_m`]). Zero inside the box. Lets
/// a best-first search over planar boxes rank by great-circle distance exactly.
pub fn box_min_dist_m(lon: f64, lat: f64, b: &Rect) -> f64 {
    let [x0, y0, x1, y1] = *b;
    let deg = EARTH_RADIUS_M * std::f64::consts::PI / 180.0;
    let dlat = if lat < y0 {
        y0 - lat
    } else if lat > y1 {
        lat - y1
    } else {
        0.0
    };
    let dlon = if (x0..=x1).contains(&lon) {
        0.0
    } else {
        // Longitude gap to the interval, the shorter way round.
        let east = (x0 - lon).rem_euclid(360.0);
        let west = (lon - x1).rem_euclid(360.0);
        east.min(west)
    };
    let by_lon = if dlon == 0.0 {
        0.0
    } else if dlon >= 90.0 {
        (90.0 - lat.abs()) * deg
    } else {
        let s = (lat.to_radians().cos() * dlon.to_radians().sin()).clamp(0.0, 1.0);
        EARTH_RADIUS_M * s.asin()
    };
    (dlat * deg).max(by_lon)
}

/// Exact great-circle kNN from the answer of a nearest-neighbour search in
/// another metric (planar degrees: rstar, PostGIS `<->` on geometry, Python
/// `rtree`): `first` holds that search's k nearest (id, lon, lat); the k-th of
/// them by great-circle distance, D, bounds the true k-th distance, so one
/// search with the boxes bounding the circle of radius D (`search`, called once
/// per box, appends (id, lon, lat) of the points in a box) finds every record
/// that can be among the k nearest. Returns (id, metres), nearest first (ties by
/// id), and the number of candidates ranked.
pub fn refine_knn(
    lon: f64,
    lat: f64,
    k: usize,
    first: &[(i64, f64, f64)],
    mut search: impl FnMut(&Rect, &mut Vec<(i64, f64, f64)>) -> anyhow::Result<()>,
) -> anyhow::Result<(Vec<(i64, f64)>, usize)> {
    if k == 0 {
        return Ok((Vec::new(), 0));
    }
    let mut d: Vec<f64> = first
        .iter()
        .map(|&(_, x, y)| haversine_m(lon, lat, x, y))
        .collect();
    d.sort_by(f64::total_cmp);
    let boxes = match d.get(k - 1) {
        Some(&dk) => circle_bbox(lon, lat, dk),
        None => vec![[-180.0, -90.0, 180.0, 90.0]],
    };
    let mut cands = Vec::new();
    for b in &boxes {
        search(b, &mut cands)?;
    }
    cands.sort_unstable_by_key(|c| c.0);
    cands.dedup_by_key(|c| c.0);
    let n = cands.len();
    let mut ranked: Vec<(i64, f64)> = cands
        .into_iter()
        .map(|(id, x, y)| (id, haversine_m(lon, lat, x, y)))
        .collect();
    ranked.sort_by(|a, b| a.1.total_cmp(&b.1).then(a.0.cmp(&b.0)));
    ranked.truncate(k);
    Ok((ranked, n))
}

/// Whether `(lon, lat)` lies in the rectangle `r` (edges included, antimeridian
/// crossing allowed).
pub fn rect_contains(r: &Rect, lon: f64, lat: f64) -> bool {
    let [x0, y0, x1, y1] = *r;
    if !(y0..=y1).contains(&lat) {
        return false;
    }
    if x0 > x1 {
        lon >= x0 || lon <= x1
    } else {
        (x0..=x1).contains(&lon)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng, rngs::SmallRng};

    #[test]
    fn distances() {
        // One degree of a great circle.
        let d = haversine_m(0.0, 0.0, 1.0, 0.0);
        assert!((d - 111_195.08).abs() < 0.1, "{d}");
        assert!((haversine_m(179.5, 0.0, -179.5, 0.0) - d).abs() < 1e-6);
        assert_eq!(haversine_m(10.0, 20.0, 10.0, 20.0), 0.0);
    }

    #[test]
    fn boxes_and_wrap() {
        assert_eq!(wrap_lon(190.0), -170.0);
        assert_eq!(wrap_lon(-180.0), -180.0);
        assert_eq!(wrap_lon(180.0), -180.0);
        let b = box_around(179.0, 0.0, 2.0, 1.0);
        assert_eq!(b, [177.0, -1.0, -179.0, 1.0]);
        assert!(rect_contains(&b, -179.5, 0.5));
        assert!(rect_contains(&b, 178.0, 0.5));
        assert!(!rect_contains(&b, 0.0, 0.5));
        assert_eq!(split_rect(&b).len(), 2);
    }

    #[test]
    fn box_min_dist_is_a_lower_bound() {
        let mut rng = SmallRng::seed_from_u64(9);
        for _ in 0..5000 {
            let lon = rng.random_range(-180.0..180.0);
            let lat = rng.random_range(-89.0..89.0);
            let x0: f64 = rng.random_range(-180.0..179.0);
            let x1 = (x0 + rng.random_range(0.0..40.0)).min(180.0);
            let y0: f64 = rng.random_range(-90.0..89.0);
            let y1 = (y0 + rng.random_range(0.0..20.0)).min(90.0);
            let b = [x0, y0, x1, y1];
            let lb = box_min_dist_m(lon, lat, &b);
            for _ in 0..20 {
                let px = rng.random_range(x0..=x1);
                let py = rng.random_range(y0..=y1);
                let d = haversine_m(lon, lat, px, py);
                assert!(
                    lb <= d + 1e-6,
                    "bound {lb} > {d} for ({lon},{lat}) to ({px},{py}) in {b:?}"
                );
            }
            if rect_contains(&b, lon, lat) {
                assert_eq!(lb, 0.0);
            }
        }
    }

    #[test]
    fn circle_boxes_cover_the_circle_and_inscribed_radius_is_inside() {
        let mut rng = SmallRng::seed_from_u64(7);
        for _ in 0..2000 {
            let lon = rng.random_range(-180.0..180.0);
            let lat = rng.random_range(-89.0..89.0);
            let r = rng.random_range(1.0..2_000_000.0);
            let boxes = circle_bbox(lon, lat, r);
            // Random points at distance <= r must be inside a box.
            for _ in 0..20 {
                let plon = wrap_lon(lon + rng.random_range(-40.0..40.0));
                let plat: f64 = (lat + rng.random_range(-20.0..20.0)).clamp(-90.0, 90.0);
                if haversine_m(lon, lat, plon, plat) <= r {
                    assert!(
                        boxes.iter().any(|b| rect_contains(b, plon, plat)),
                        "({plon},{plat}) within {r} m of ({lon},{lat}) outside {boxes:?}"
                    );
                }
            }
            let hy = rng.random_range(0.001..30.0);
            let hx = rng.random_range(0.001..200.0);
            let inner = inscribed_radius_m(lat, hx, hy);
            let b = box_around(lon, lat, hx, hy);
            for _ in 0..20 {
                let plon = wrap_lon(lon + rng.random_range(-60.0..60.0));
                let plat: f64 = (lat + rng.random_range(-40.0..40.0)).clamp(-90.0, 90.0);
                if haversine_m(lon, lat, plon, plat) < inner {
                    assert!(
                        rect_contains(&b, plon, plat),
                        "({plon},{plat}) nearer than {inner} m to ({lon},{lat}) but outside {b:?}"
                    );
                }
            }
        }
    }
}
