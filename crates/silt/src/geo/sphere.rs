//! Distances on the sphere, in metres.
//!
//! The Earth is modelled as a sphere of radius [`EARTH_RADIUS_M`]; longitudes
//! and latitudes are in degrees. Compared with the WGS 84 ellipsoid, spherical
//! great-circle distances are off by up to about 0.5 %. All of Silt's
//! distance predicates, bounds and covering boxes use this same model, so
//! they agree with each other exactly.
//!
//! * [`haversine_m`]: great-circle distance between two points.
//! * [`min_dist_rect_m`]: exact distance from a point to a lon/lat box, the
//!   admissible priority of best-first k-nearest-neighbour search.
//! * [`circle_bboxes`]: lon/lat boxes covering a distance circle, the index
//!   probe of a radius query.
//! * [`destination`]: the point at a given bearing and distance.

use super::{Rect, WORLD};

/// Mean Earth radius in metres used for every distance: 6,371,008.8 m, the
/// mean radius R1 = (2a + b) / 3 of the GRS 80 / WGS 84 ellipsoid (the value
/// recommended by the IUGG, and the radius the `geo` crate's `Haversine`
/// uses). One degree of a great circle is about 111,195 m.
pub const EARTH_RADIUS_M: f64 = 6_371_008.8;

/// Unit vector of a lon/lat position (degrees).
pub(crate) fn unit_vector(lon: f64, lat: f64) -> [f64; 3] {
    let (slat, clat) = lat.to_radians().sin_cos();
    let (slon, clon) = lon.to_radians().sin_cos();
    [clat * clon, clat * slon, slat]
}

/// Great-circle distance in metres between `(lon1, lat1)` and `(lon2, lat2)`
/// (degrees).
///
/// This is the haversine (great-circle) distance on the sphere of radius
/// [`EARTH_RADIUS_M`]. It is evaluated with the `atan2` form of the
/// great-circle formula, which, unlike the textbook haversine expression, is
/// accurate to rounding (well below a micrometre) at every separation,
/// antipodal points included. Longitudes may differ by any amount (they are
/// used through sines and cosines, so 179 and -179 are 2 degrees apart). A
/// NaN input gives NaN.
pub fn haversine_m(lon1: f64, lat1: f64, lon2: f64, lat2: f64) -> f64 {
    let (s1, c1) = lat1.to_radians().sin_cos();
    let (s2, c2) = lat2.to_radians().sin_cos();
    let (sdl, cdl) = (lon2 - lon1).to_radians().sin_cos();
    let y1 = c2 * sdl;
    let y2 = c1 * s2 - s1 * c2 * cdl;
    let x = s1 * s2 + c1 * c2 * cdl;
    EARTH_RADIUS_M * (y1.hypot(y2)).atan2(x)
}

/// The points within `metres` (great-circle) of `(lon, lat)`: a radius
/// query's shape, against which an R-tree prunes nodes that cannot reach it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Circle {
    pub lon: f64,
    pub lat: f64,
    pub metres: f64,
}

impl Circle {
    /// Whether some point of `r` may lie in the circle (its nearest point
    /// is within the radius; [`min_dist_rect_m`] never exceeds the true
    /// distance).
    pub fn may_reach(&self, r: &Rect) -> bool {
        min_dist_rect_m(self.lon, self.lat, r) <= self.metres
    }
}

/// Minimum great-circle distance in metres from the point `(lon, lat)` to
/// the longitude/latitude box `r` (all the points with a longitude in
/// `[r[0], r[2]]` and a latitude in `[r[1], r[3]]`, interior included).
///
/// The result is exact (to rounding), so it never exceeds the distance to any
/// point of the box and can be used as the admissible priority of a
/// best-first nearest-neighbour search. The point's longitude wraps: a point
/// at longitude 179 is 2 degrees from a box whose west edge is at -179. A box
/// with `r[0] > r[2]` crosses the antimeridian (Silt's rule, see
/// [`split_query_rect`](super::split_query_rect)); a box spanning 360 degrees
/// or more covers all longitudes. Latitudes (of the point and the box) are
/// clamped to `[-90, 90]`. The result is 0 when the point is in the box.
///
/// For input that makes no sense (a NaN anywhere, or `r[1] > r[3]`) it
/// returns 0, the one answer that never makes a search skip a candidate.
///
/// Method: if the point's longitude lies in the box's longitude range the
/// nearest point is straight north or south of it, at the clamped latitude
/// (no point of another latitude band is closer than the meridian distance).
/// Otherwise moving any point of the box towards the point's longitude
/// shortens the distance, so the nearest point lies on one of the two
/// meridian edges. Along a meridian at longitude difference `dλ` the cosine
/// of the distance is `sin φ sin q + cos φ cos q cos dλ = M cos(q - q0)` with
/// `q0 = atan2(sin φ, cos φ cos dλ)` (that is `atan(tan φ / cos dλ)` when
/// `|dλ| < 90°`): the nearest point of the edge is `q0` if it lies within the
/// edge's latitudes and otherwise one of the edge's ends. Poles need no
/// special case.
pub fn min_dist_rect_m(lon: f64, lat: f64, r: &Rect) -> f64 {
    let [min_x, min_y, max_x, max_y] = *r;
    if [lon, lat, min_x, min_y, max_x, max_y]
        .iter()
        .any(|v| v.is_nan())
        || min_y > max_y
    {
        return 0.0;
    }
    if min_x == max_x && min_y == max_y {
        // A point (every entry of a point index): the distance itself, one
        // evaluation instead of up to six along the meridian edges.
        return haversine_m(lon, lat.clamp(-90.0, 90.0), min_x, min_y.clamp(-90.0, 90.0));
    }
    let lat = lat.clamp(-90.0, 90.0);
    let lo = min_y.clamp(-90.0, 90.0);
    let hi = max_y.clamp(-90.0, 90.0);

    // Longitude width of the box, eastwards from min_x.
    let width = if min_x <= max_x {
        max_x - min_x
    } else {
        max_x - min_x + 360.0
    };
    // A pole has every longitude.
    let inside_lon =
        width >= 360.0 || lat.abs() == 90.0 || (lon - min_x).rem_euclid(360.0) <= width;
    if inside_lon {
        let clamped = lat.clamp(lo, hi);
        return EARTH_RADIUS_M * (lat - clamped).abs().to_radians();
    }
    meridian_edge_m(lon, lat, min_x, lo, hi).min(meridian_edge_m(lon, lat, max_x, lo, hi))
}

/// Distance in metres from `(lon, lat)` to the meridian segment at longitude
/// `edge` between latitudes `lo <= hi`.
fn meridian_edge_m(lon: f64, lat: f64, edge: f64, lo: f64, hi: f64) -> f64 {
    let dl = (edge - lon).to_radians();
    let (sphi, cphi) = lat.to_radians().sin_cos();
    let q0 = sphi.atan2(cphi * dl.cos()).to_degrees();
    let ends = haversine_m(lon, lat, edge, lo).min(haversine_m(lon, lat, edge, hi));
    if lo <= q0 && q0 <= hi {
        ends.min(haversine_m(lon, lat, edge, q0))
    } else {
        ends
    }
}

/// Margin, in degrees, added around every box of [`circle_bboxes`] so that
/// rounding never leaves a point of the circle just outside (about 0.1 mm).
const COVER_PAD_DEG: f64 = 1e-9;

/// How close (degrees) the circle may come to a pole before its boxes take
/// the full longitude range; avoids the ill-conditioned `asin` near 1.
const POLE_GUARD_DEG: f64 = 1e-6;

/// Longitude/latitude boxes that together cover every point within
/// `radius_m` metres (great-circle distance) of `(lon, lat)`.
///
/// The latitude range is the centre's latitude ± `radius_m / R` (converted to
/// degrees), clamped to `[-90, 90]`. If the circle reaches a pole, every
/// longitude is covered (one box from -180 to 180). Otherwise the longitude
/// half-width is `asin(sin d / cos φ)` (`d` the angular radius, `φ` the
/// centre's latitude), which is the exact longitude extent of a spherical
/// cap; a range that crosses ±180 is split into two boxes (west of and east
/// of the antimeridian), so every returned box has `min_x <= max_x` and lies
/// within [`WORLD`]. Boxes are padded by 1e-9 degrees (about 0.1 mm) against
/// rounding, and a circle coming within 1e-6 degrees of a pole is treated as
/// reaching it.
///
/// The boxes cover more than the circle (corners); candidates found through
/// them must be refined with an exact distance check.
///
/// A centre with a non-finite coordinate, or a radius that is negative or
/// NaN, covers nothing: the result is empty. An infinite radius, or one of
/// half the Earth's circumference or more, gives [`WORLD`]. The centre's
/// longitude may be outside `[-180, 180]` (it is wrapped); its latitude is
/// clamped to `[-90, 90]`.
pub fn circle_bboxes(lon: f64, lat: f64, radius_m: f64) -> Vec<Rect> {
    if !lon.is_finite() || !lat.is_finite() || radius_m.is_nan() || radius_m < 0.0 {
        return Vec::new();
    }
    let d = radius_m / EARTH_RADIUS_M; // angular radius, radians
    if d >= std::f64::consts::PI {
        return vec![WORLD];
    }
    let lat = lat.clamp(-90.0, 90.0);
    let d_deg = d.to_degrees();
    let south = lat - d_deg - COVER_PAD_DEG;
    let north = lat + d_deg + COVER_PAD_DEG;
    let min_y = south.max(-90.0);
    let max_y = north.min(90.0);
    if north >= 90.0 - POLE_GUARD_DEG || south <= -90.0 + POLE_GUARD_DEG {
        return vec![[-180.0, min_y, 180.0, max_y]];
    }
    // Here |lat| + d < 90 degrees, so sin d < cos lat and the ratio is < 1.
    let ratio = (d.sin() / lat.to_radians().cos()).min(1.0);
    let half = ratio.asin().to_degrees() + COVER_PAD_DEG;
    if half >= 180.0 {
        return vec![[-180.0, min_y, 180.0, max_y]];
    }
    let centre = (lon + 180.0).rem_euclid(360.0) - 180.0; // in [-180, 180] (180 only by rounding)
    let west = centre - half;
    let east = centre + half;
    if west < -180.0 {
        vec![
            [west + 360.0, min_y, 180.0, max_y],
            [-180.0, min_y, east, max_y],
        ]
    } else if east > 180.0 {
        vec![
            [west, min_y, 180.0, max_y],
            [-180.0, min_y, east - 360.0, max_y],
        ]
    } else {
        vec![[west, min_y, east, max_y]]
    }
}

/// The point reached from `(lon, lat)` by travelling `dist_m` metres along a
/// great circle with initial bearing `bearing_deg` (degrees clockwise from
/// north). Returns `(lon, lat)` in degrees, the longitude normalized to
/// `[-180, 180]`. Mostly used by tests and benchmarks to generate points at
/// known distances.
pub fn destination(lon: f64, lat: f64, bearing_deg: f64, dist_m: f64) -> (f64, f64) {
    // Work with vectors: start point p, local north and east unit vectors,
    // q = p cos d + (north cos b + east sin b) sin d. Reading the result back
    // with atan2 stays accurate near the poles, where the textbook
    // `asin(sin φ cos d + ...)` form loses digits.
    let (sphi, cphi) = lat.to_radians().sin_cos();
    let (slam, clam) = lon.to_radians().sin_cos();
    let (sd, cd) = (dist_m / EARTH_RADIUS_M).sin_cos();
    let (sb, cb) = bearing_deg.to_radians().sin_cos();
    let p = [cphi * clam, cphi * slam, sphi];
    let north = [-sphi * clam, -sphi * slam, cphi];
    let east = [-slam, clam, 0.0];
    let q: [f64; 3] = std::array::from_fn(|i| p[i] * cd + (north[i] * cb + east[i] * sb) * sd);
    let lat2 = q[2].atan2(q[0].hypot(q[1])).to_degrees();
    let lon2 = q[1].atan2(q[0]).to_degrees();
    let lon2 = (lon2 + 180.0).rem_euclid(360.0) - 180.0;
    (lon2, lat2)
}

/// Orders candidates of a nearest-neighbour search around one point by
/// great-circle distance, cheaply.
///
/// Keys are haversines `h = sin²(d / 2R)`, which increase with the distance
/// `d` (for `d` in `[0, πR]`), so they order like distances without the
/// final `asin`. For a point the key takes three trigonometric calls (the
/// query's cosine is computed once); for a box, [`rect_bound`](Self::rect_bound)
/// is an admissible lower bound from the same formula:
/// `h = hav(Δφ) + cos φq · cos φ · hav(Δλ)` with each term minimised over the
/// box independently (latitude gap, smallest `cos φ` of the box, longitude
/// gap wrapped around the antimeridian). Convert keys back with
/// [`key_to_m`](Self::key_to_m) (or compute exact metres with
/// [`haversine_m`] / [`min_dist_rect_m`] where precision near the antipode
/// matters).
#[derive(Clone, Copy, Debug)]
pub struct NearOrder {
    lon: f64,
    lat: f64,
    /// Query latitude and its cosine (radians).
    phi: f64,
    cos_phi: f64,
}

fn hav(theta: f64) -> f64 {
    let s = (theta / 2.0).sin();
    s * s
}

/// A lower bound of `sin t` for `t >= 0`: the Taylor series cut after a
/// negative term, `t - t³/3! + t⁵/5! - t⁷/7!` (non-negative up to `π/2`).
fn sin_lower(t: f64) -> f64 {
    let t2 = t * t;
    t * (1.0 - t2 / 6.0 * (1.0 - t2 / 20.0 * (1.0 - t2 / 42.0)))
}

/// A lower bound of `hav(theta)` for `theta` in `[0, π]`, without a sine.
fn hav_lower(theta: f64) -> f64 {
    let s = sin_lower(theta.abs() / 2.0).max(0.0);
    s * s
}

/// A lower bound of `cos p` for `p` in `[-π/2, π/2]`, without a cosine:
/// the series `1 - p²/2! + p⁴/4! - p⁶/6!` (cut after a negative term) near
/// the equator, `sin(π/2 - |p|)`'s bound near the poles (both within a few
/// millionths, relatively).
fn cos_lower(p: f64) -> f64 {
    let q = p.abs();
    if q > std::f64::consts::FRAC_PI_4 {
        return sin_lower((std::f64::consts::FRAC_PI_2 - q).max(0.0)).max(0.0);
    }
    let q2 = q * q;
    (1.0 - q2 / 2.0 * (1.0 - q2 / 12.0 * (1.0 - q2 / 30.0))).max(0.0)
}

impl NearOrder {
    /// Around `(lon, lat)` in degrees (latitude clamped to [-90, 90]).
    pub fn new(lon: f64, lat: f64) -> NearOrder {
        let lat = lat.clamp(-90.0, 90.0);
        let phi = lat.to_radians();
        NearOrder {
            lon,
            lat,
            phi,
            cos_phi: phi.cos(),
        }
    }

    /// Longitude gap in radians (in `[0, π]`) from the query to `x`.
    fn dlon(&self, x: f64) -> f64 {
        // Valid longitudes differ by at most 360 degrees: no `fmod` needed
        // (it showed in kNN profiles); anything else takes the general path.
        let mut d = (x - self.lon).abs();
        if d > 360.0 {
            d = d.rem_euclid(360.0);
        }
        d.min(360.0 - d).to_radians()
    }

    /// Key of the point `(x, y)`.
    pub fn point_key(&self, x: f64, y: f64) -> f64 {
        let p = y.clamp(-90.0, 90.0).to_radians();
        let h = hav(p - self.phi) + self.cos_phi * p.cos() * hav(self.dlon(x));
        h.clamp(0.0, 1.0)
    }

    /// A lower bound of [`point_key`](Self::point_key) computed without
    /// trigonometry (polynomial bounds of the sine and cosine): the kNN
    /// search queues leaf entries under it and computes the exact key only
    /// for those that reach the front of the queue.
    pub fn point_key_lower(&self, x: f64, y: f64) -> f64 {
        let p = y.clamp(-90.0, 90.0).to_radians();
        let h = hav_lower(p - self.phi) + self.cos_phi * cos_lower(p) * hav_lower(self.dlon(x));
        h.clamp(0.0, 1.0)
    }

    /// A lower bound of the key of every point of the box `r` (0 when the
    /// query is inside it, or for input that makes no sense, which never
    /// makes a search skip a candidate).
    pub fn rect_bound(&self, r: &Rect) -> f64 {
        let [min_x, min_y, max_x, max_y] = *r;
        if [min_x, min_y, max_x, max_y].iter().any(|v| v.is_nan()) || min_y > max_y {
            return 0.0;
        }
        let lo = min_y.clamp(-90.0, 90.0);
        let hi = max_y.clamp(-90.0, 90.0);
        let dphi = if self.lat < lo {
            (lo - self.lat).to_radians()
        } else if self.lat > hi {
            (self.lat - hi).to_radians()
        } else {
            0.0
        };
        let width = if min_x <= max_x {
            max_x - min_x
        } else {
            max_x - min_x + 360.0
        };
        let east = self.lon - min_x;
        let east = if (0.0..360.0).contains(&east) {
            east
        } else if (-360.0..0.0).contains(&east) {
            east + 360.0
        } else {
            east.rem_euclid(360.0)
        };
        let dlam = if width >= 360.0 || east <= width {
            0.0
        } else {
            self.dlon(min_x).min(self.dlon(max_x))
        };
        let lon_term = if dlam == 0.0 {
            0.0
        } else {
            let cos_min = lo.abs().max(hi.abs()).to_radians().cos().max(0.0);
            self.cos_phi * cos_min * hav(dlam)
        };
        (hav(dphi) + lon_term).clamp(0.0, 1.0)
    }

    /// Exact key of the box `r` (its nearest point), from [`min_dist_rect_m`].
    pub fn rect_key(&self, r: &Rect) -> f64 {
        Self::m_to_key(min_dist_rect_m(self.lon, self.lat, r))
    }

    /// The key of a distance in metres.
    pub fn m_to_key(m: f64) -> f64 {
        hav((m / EARTH_RADIUS_M).clamp(0.0, std::f64::consts::PI))
    }

    /// The distance in metres of a key.
    pub fn key_to_m(h: f64) -> f64 {
        2.0 * EARTH_RADIUS_M * h.clamp(0.0, 1.0).sqrt().asin()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::geo::rect_contains_point;
    use ::geo::{Distance, Haversine, Point};
    use proptest::prelude::*;

    const DEG_M: f64 = EARTH_RADIUS_M * std::f64::consts::PI / 180.0; // ~111,195 m

    fn close(a: f64, b: f64, tol: f64) -> bool {
        (a - b).abs() <= tol
    }

    #[test]
    fn haversine_known_values() {
        assert!(close(haversine_m(0.0, 0.0, 0.0, 1.0), 111_195.08, 0.01));
        assert!(close(DEG_M, 111_195.08, 0.01));
        assert!(close(haversine_m(0.0, 0.0, 1.0, 0.0), DEG_M, 1e-6));
        assert!(close(
            haversine_m(179.0, 0.0, -179.0, 0.0),
            2.0 * DEG_M,
            1e-6
        ));
        assert!(close(haversine_m(10.0, 60.0, 10.0, 60.0), 0.0, 1e-9));
        // Antipodes: half the circumference.
        let half = std::f64::consts::PI * EARTH_RADIUS_M;
        assert!(close(haversine_m(0.0, 0.0, 180.0, 0.0), half, 1e-6));
        assert!(close(haversine_m(30.0, 90.0, -70.0, -90.0), half, 1e-6));
        // At latitude 60 a degree of longitude is about half as long (along a
        // great circle slightly less than along the parallel).
        let d = haversine_m(0.0, 60.0, 1.0, 60.0);
        assert!(d < DEG_M / 2.0 && d > DEG_M / 2.0 - 2.0, "{d}");
        // Sofia to Plovdiv, as in the geo crate's documentation.
        let sp = haversine_m(23.319941, 42.698334, 24.742168, 42.136097);
        assert!(close(sp, 132_433.099, 0.01), "{sp}");
        assert!(haversine_m(f64::NAN, 0.0, 0.0, 0.0).is_nan());
    }

    #[test]
    fn rect_distance_known_values() {
        let r = [10.0, 10.0, 20.0, 20.0];
        assert_eq!(min_dist_rect_m(15.0, 15.0, &r), 0.0);
        assert_eq!(min_dist_rect_m(10.0, 20.0, &r), 0.0);
        // Straight south of the box: meridian distance.
        assert!(close(min_dist_rect_m(15.0, 5.0, &r), 5.0 * DEG_M, 1e-6));
        // West of the box on the equator-ish: nearest point is on the edge.
        let d = min_dist_rect_m(0.0, 15.0, &r);
        let edge = (0..=10_000)
            .map(|i| haversine_m(0.0, 15.0, 10.0, 10.0 + f64::from(i) * 1e-3))
            .fold(f64::INFINITY, f64::min);
        assert!(d <= edge + 1e-6 && d >= edge - 1.0, "{d} vs {edge}");
        // The nearest point of the west edge is north of the point's latitude
        // (great circles bulge poleward): it is not at latitude 15.
        assert!(d < haversine_m(0.0, 15.0, 10.0, 15.0) - 1.0);
        // Antimeridian wrap: a point at 179 is 2 degrees from a box at -179.
        let wrap = [-179.0, -1.0, -170.0, 1.0];
        assert!(close(min_dist_rect_m(179.0, 0.0, &wrap), 2.0 * DEG_M, 1e-6));
        // A box crossing the antimeridian contains longitude 180.
        let cross = [170.0, -1.0, -170.0, 1.0];
        assert_eq!(min_dist_rect_m(180.0, 0.0, &cross), 0.0);
        assert_eq!(min_dist_rect_m(-175.0, 0.5, &cross), 0.0);
        // 170 degrees of longitude away the nearest points are the corners:
        // beyond 90 degrees, going towards a pole is shorter.
        let far = min_dist_rect_m(0.0, 0.0, &cross);
        assert!(close(far, haversine_m(0.0, 0.0, 170.0, 1.0), 1e-6));
        assert!(far < 170.0 * DEG_M - 100.0);
        // Poles: from the north pole, the distance is 90 - max_y degrees.
        assert!(close(min_dist_rect_m(0.0, 90.0, &r), 70.0 * DEG_M, 1e-6));
        assert!(close(min_dist_rect_m(123.0, 90.0, &r), 70.0 * DEG_M, 1e-6));
        let polar = [100.0, 80.0, 110.0, 90.0];
        assert_eq!(min_dist_rect_m(-50.0, 90.0, &polar), 0.0);
        assert!(close(
            min_dist_rect_m(-80.0, 85.0, &polar),
            5.0 * DEG_M,
            1e-6
        ));
        // Over the pole: the box's edge at longitude 100 is 180 degrees of
        // longitude away; the nearest point is the pole itself.
        assert!(close(
            min_dist_rect_m(-80.0, 70.0, &polar),
            20.0 * DEG_M,
            1e-6
        ));
        // Full longitude range and degenerate/invalid input.
        assert!(close(
            min_dist_rect_m(33.0, -50.0, &crate::geo::WORLD),
            0.0,
            0.0
        ));
        assert_eq!(min_dist_rect_m(f64::NAN, 0.0, &r), 0.0);
        assert_eq!(min_dist_rect_m(0.0, 0.0, &[0.0, 5.0, 1.0, 4.0]), 0.0);
        // A point box is the point.
        let pt = [5.0, 6.0, 5.0, 6.0];
        assert!(close(
            min_dist_rect_m(-3.0, 40.0, &pt),
            haversine_m(-3.0, 40.0, 5.0, 6.0),
            1e-6
        ));
    }

    #[test]
    fn circle_boxes_known_values() {
        // 111,195 m around (0, 0) is a 1-degree circle.
        let b = circle_bboxes(0.0, 0.0, DEG_M);
        assert_eq!(b.len(), 1);
        for (got, want) in b[0].iter().zip([-1.0, -1.0, 1.0, 1.0]) {
            assert!(close(*got, want, 1e-8), "{b:?}");
        }
        // At latitude 60 the longitude half-width is about twice as large.
        let b = circle_bboxes(0.0, 60.0, DEG_M);
        assert_eq!(b.len(), 1);
        let half = (1f64.to_radians().sin() / 60f64.to_radians().cos())
            .asin()
            .to_degrees();
        assert!(close(b[0][2], half, 1e-8) && half > 2.0, "{b:?}");
        // Crossing the antimeridian splits.
        let b = circle_bboxes(179.5, 0.0, DEG_M);
        assert_eq!(b.len(), 2, "{b:?}");
        assert!(close(b[0][0], 178.5, 1e-8) && b[0][2] == 180.0);
        assert!(b[1][0] == -180.0 && close(b[1][2], -179.5, 1e-8));
        let b = circle_bboxes(-179.5, 0.0, DEG_M);
        assert_eq!(b.len(), 2, "{b:?}");
        // Reaching a pole: all longitudes.
        let b = circle_bboxes(10.0, 89.5, DEG_M);
        assert_eq!(b.len(), 1);
        assert_eq!((b[0][0], b[0][2], b[0][3]), (-180.0, 180.0, 90.0));
        assert!(close(b[0][1], 88.5, 1e-8));
        // Degenerate inputs.
        assert!(circle_bboxes(0.0, 0.0, -1.0).is_empty());
        assert!(circle_bboxes(0.0, 0.0, f64::NAN).is_empty());
        assert!(circle_bboxes(f64::NAN, 0.0, 1.0).is_empty());
        assert_eq!(circle_bboxes(0.0, 0.0, f64::INFINITY), vec![WORLD]);
        assert_eq!(circle_bboxes(0.0, 0.0, 3e7), vec![WORLD]);
        let p = circle_bboxes(5.0, 5.0, 0.0);
        assert_eq!(p.len(), 1);
        assert!(rect_contains_point(&p[0], 5.0, 5.0));
        // A centre given as 180 is the same as -180.
        assert_eq!(circle_bboxes(180.0, 0.0, 1000.0).len(), 2);
    }

    #[test]
    fn destination_known_values() {
        let (x, y) = destination(0.0, 0.0, 0.0, DEG_M);
        assert!(close(x, 0.0, 1e-9) && close(y, 1.0, 1e-9));
        let (x, y) = destination(0.0, 0.0, 90.0, DEG_M);
        assert!(close(x, 1.0, 1e-9) && close(y, 0.0, 1e-9));
        let (x, y) = destination(179.5, 0.0, 90.0, DEG_M);
        assert!(close(x, -179.5, 1e-9) && close(y, 0.0, 1e-9));
        let (_, y) = destination(0.0, 89.0, 0.0, 2.0 * DEG_M);
        assert!(close(y, 89.0, 1e-9)); // over the pole and down the other side
    }

    /// Whether the point is in the box, longitudes compared modulo 360.
    fn in_box(lon: f64, lat: f64, r: &Rect) -> bool {
        (r[1]..=r[3]).contains(&lat) && (lon - r[0]).rem_euclid(360.0) <= r[2] - r[0]
    }

    /// Smallest sampled distance from the point to the boundary of the box
    /// and the largest metric gap between neighbouring samples.
    fn sampled_min(lon: f64, lat: f64, r: &Rect) -> (f64, f64) {
        let [x0, y0, x1, y1] = *r;
        let n = 400;
        let mut best = f64::INFINITY;
        let step_x = (x1 - x0) / f64::from(n);
        let step_y = (y1 - y0) / f64::from(n);
        for i in 0..=n {
            let x = x0 + step_x * f64::from(i);
            let y = y0 + step_y * f64::from(i);
            for (px, py) in [(x, y0), (x, y1), (x0, y), (x1, y)] {
                best = best.min(haversine_m(lon, lat, px, py));
            }
        }
        (best, step_x.max(step_y) * DEG_M)
    }

    /// Check `min_dist_rect_m` against sampling: 0 inside the box; outside,
    /// never above the sampled boundary minimum and within one sample gap of
    /// it (the nearest point of the box is on its boundary).
    fn check_rect_distance(lon: f64, lat: f64, r: &Rect) -> Result<(), TestCaseError> {
        let d = min_dist_rect_m(lon, lat, r);
        prop_assert!(d >= 0.0);
        if in_box(lon, lat, r) {
            prop_assert_eq!(d, 0.0);
            return Ok(());
        }
        let (sampled, gap) = sampled_min(lon, lat, r);
        prop_assert!(
            d <= sampled + 1e-6,
            "d {} sampled {} box {:?}",
            d,
            sampled,
            r
        );
        prop_assert!(
            d >= sampled - gap - 1e-6,
            "d {} sampled {} gap {} box {:?}",
            d,
            sampled,
            gap,
            r
        );
        Ok(())
    }

    fn box_strategy() -> impl Strategy<Value = Rect> {
        // Longitudes in [-180, 180] with min_x <= max_x; latitudes often at
        // the poles.
        let lat = prop_oneof![
            3 => -90.0..90.0f64,
            1 => Just(90.0),
            1 => Just(-90.0),
        ];
        let lon = prop_oneof![
            4 => -180.0..180.0f64,
            1 => Just(180.0),
            1 => Just(-180.0),
            1 => 175.0..180.0f64,
            1 => -180.0..-175.0f64,
        ];
        (lon.clone(), lon, lat.clone(), lat)
            .prop_map(|(a, b, c, d)| [a.min(b), c.min(d), a.max(b), c.max(d)])
    }

    fn point_strategy() -> impl Strategy<Value = (f64, f64)> {
        let lat = prop_oneof![
            4 => -90.0..90.0f64,
            1 => Just(90.0),
            1 => Just(-90.0),
            1 => 85.0..90.0f64,
        ];
        let lon = prop_oneof![
            4 => -180.0..180.0f64,
            1 => 178.0..180.0f64,
            1 => -180.0..-178.0f64,
        ];
        (lon, lat)
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        #[test]
        fn rect_distance_is_exact_lower_bound(
            (lon, lat) in point_strategy(),
            r in box_strategy(),
        ) {
            check_rect_distance(lon, lat, &r)?;
        }

        #[test]
        fn rect_distance_small_boxes_near_point(
            (lon, lat) in point_strategy(),
            dx in -3.0..3.0f64,
            dy in -3.0..3.0f64,
            w in 0.0..2.0f64,
            h in 0.0..2.0f64,
        ) {
            // Small boxes close to the point, wrapped into [-180, 180].
            let x0 = (lon + dx + 180.0).rem_euclid(360.0) - 180.0;
            let x1 = (x0 + w).min(180.0);
            let y0 = (lat + dy).clamp(-90.0, 90.0);
            let y1 = (y0 + h).min(90.0);
            check_rect_distance(lon, lat, &[x0, y0, x1, y1])?;
        }

        #[test]
        fn point_box_distance_is_the_distance(
            (lon, lat) in point_strategy(),
            (x, y) in point_strategy(),
        ) {
            let d = min_dist_rect_m(lon, lat, &[x, y, x, y]);
            prop_assert_eq!(d, haversine_m(lon, lat, x, y));
            // The same as a box around the point shrinking to it.
            let e = 1e-9;
            let near = min_dist_rect_m(lon, lat, &[x - e, y - e, x + e, y + e]);
            prop_assert!(near <= d + 1e-6 && d - near <= 1e-3, "{} vs {}", near, d);
        }

        #[test]
        fn crossing_box_equals_min_of_halves(
            (lon, lat) in point_strategy(),
            a in 0.0..180.0f64,
            b in -180.0..0.0f64,
            y0 in -90.0..0.0f64,
            y1 in 0.0..90.0f64,
        ) {
            let cross = [a, y0, b, y1];
            let halves = crate::geo::split_query_rect(&cross);
            prop_assert_eq!(halves.len(), 2);
            let want = halves
                .iter()
                .map(|h| min_dist_rect_m(lon, lat, h))
                .fold(f64::INFINITY, f64::min);
            let got = min_dist_rect_m(lon, lat, &cross);
            prop_assert!((got - want).abs() <= 1e-6, "{} vs {}", got, want);
        }

        #[test]
        fn haversine_matches_geo_crate(
            (lon1, lat1) in point_strategy(),
            (lon2, lat2) in point_strategy(),
        ) {
            let ours = haversine_m(lon1, lat1, lon2, lat2);
            let theirs = Haversine.distance(Point::new(lon1, lat1), Point::new(lon2, lat2));
            // The textbook haversine formula loses precision near antipodes.
            let tol = if ours > 19_000_000.0 { 1.0 } else { 1e-6 };
            prop_assert!((ours - theirs).abs() <= tol, "{} vs {}", ours, theirs);
            prop_assert!((ours - haversine_m(lon2, lat2, lon1, lat1)).abs() <= 1e-6);
        }

        #[test]
        fn destination_is_at_distance(
            (lon, lat) in point_strategy(),
            bearing in 0.0..360.0f64,
            dist in 0.0..19_000_000.0f64,
        ) {
            let (x, y) = destination(lon, lat, bearing, dist);
            prop_assert!((-180.0..=180.0).contains(&x) && (-90.0..=90.0).contains(&y));
            let back = haversine_m(lon, lat, x, y);
            prop_assert!((back - dist).abs() <= 1e-4, "{} vs {}", back, dist);
        }

        #[test]
        fn circle_boxes_cover_the_circle(
            (lon, lat) in point_strategy(),
            radius in prop_oneof![
                0.0..1_000.0f64,
                0.0..100_000.0f64,
                0.0..3_000_000.0f64,
                0.0..21_000_000.0f64,
            ],
            samples in proptest::collection::vec((0.0..360.0f64, 0.0..=1.0f64), 64),
        ) {
            let boxes = circle_bboxes(lon, lat, radius);
            prop_assert!(!boxes.is_empty() && boxes.len() <= 2);
            for b in &boxes {
                prop_assert!(b[0] <= b[2] && b[1] <= b[3], "{:?}", b);
                prop_assert!(b[0] >= -180.0 && b[2] <= 180.0 && b[1] >= -90.0 && b[3] <= 90.0);
            }
            // The boundary of the circle (u = 1), every 4 degrees, and
            // random interior points.
            let rim = (0..90).map(|i| (f64::from(i) * 4.0, 1.0));
            for (bearing, u) in rim.chain(samples) {
                let (x, y) = destination(lon, lat, bearing, radius * u);
                prop_assert!(
                    boxes.iter().any(|b| rect_contains_point(b, x, y)),
                    "({}, {}) at bearing {} dist {} not in {:?}", x, y, bearing, radius * u, boxes
                );
            }
        }
    }

    proptest! {
        #[test]
        fn near_order_keys_agree_with_distances_and_bound_boxes(
            qx in -180.0f64..180.0, qy in -90.0f64..90.0,
            x0 in -180.0f64..180.0, y0 in -90.0f64..90.0,
            w in 0.0f64..40.0, h in 0.0f64..40.0,
            fx in 0.0f64..1.0, fy in 0.0f64..1.0,
        ) {
            let o = NearOrder::new(qx, qy);
            let x1 = x0 + w;
            let x1 = if x1 > 180.0 { x1 - 360.0 } else { x1 };
            let y1 = (y0 + h).min(90.0);
            let r = [x0, y0, x1, y1];
            // A point of the box.
            let px = x0 + fx * w;
            let px = if px > 180.0 { px - 360.0 } else { px };
            let py = y0 + fy * (y1 - y0);
            let k = o.point_key(px, py);
            let d = haversine_m(qx, qy, px, py);
            // asin loses precision near the antipode (key near 1).
            let tol = if k > 0.99 { 1.0 } else { 1e-3 + d * 1e-9 };
            prop_assert!((NearOrder::key_to_m(k) - d).abs() < tol, "key {} -> {} vs {}", k, NearOrder::key_to_m(k), d);
            prop_assert!(o.rect_bound(&r) <= k + 1e-15, "bound {} above point key {}", o.rect_bound(&r), k);
            prop_assert!(o.rect_bound(&r) <= o.rect_key(&r) + 1e-12);
            // The trigonometry-free bound kNN queues leaf entries under.
            let lower = o.point_key_lower(px, py);
            prop_assert!(lower <= k + 1e-15, "lower {} above key {}", lower, k);
            prop_assert!(lower >= 0.0);
            // ... and it is tight near the query, where kNN works.
            let near = o.point_key(qx + 1e-3 * fx, (qy + 1e-3 * fy).min(90.0));
            let near_lower = o.point_key_lower(qx + 1e-3 * fx, (qy + 1e-3 * fy).min(90.0));
            prop_assert!(near - near_lower <= near * 1e-3 + 1e-18, "{} vs {}", near_lower, near);
        }
    }
}
