//! Spatial values: points, axis-aligned rectangles and polygons with holes.
//!
//! Coordinates are plain `f64` pairs. When the data is geographic, `x` is the
//! longitude and `y` the latitude (the GeoJSON / WKT axis order), and
//! [`check_geographic`] checks the ranges. [`Geometry::validate`] checks the
//! structural rules every stored geometry must satisfy.

use std::fmt;
use std::hash::{Hash, Hasher};

use crate::error::{Error, Result};

/// A spatial value.
///
/// Equality (and hashing) compares coordinates by their bits with every NaN
/// treated as one value, like [`Value`](super::Value) does for doubles, so it
/// is a proper equivalence relation.
#[derive(Clone, Debug)]
pub enum Geometry {
    /// A single position. `x` = longitude and `y` = latitude when geographic.
    Point {
        /// Horizontal coordinate (longitude).
        x: f64,
        /// Vertical coordinate (latitude).
        y: f64,
    },
    /// An axis-aligned rectangle (bounding box), edges included.
    Rect {
        /// Smallest x (west edge).
        min_x: f64,
        /// Smallest y (south edge).
        min_y: f64,
        /// Largest x (east edge).
        max_x: f64,
        /// Largest y (north edge).
        max_y: f64,
    },
    /// A polygon: one exterior ring and zero or more holes. Every ring is
    /// closed (its first point is repeated as its last) and has at least four
    /// points. Winding order is not enforced.
    Polygon {
        /// The outer boundary.
        exterior: Vec<(f64, f64)>,
        /// Inner boundaries (holes).
        holes: Vec<Vec<(f64, f64)>>,
    },
}

/// Bits of a double with every NaN mapped to the canonical quiet NaN, so that
/// bitwise equality is an equivalence relation that still tells `-0.0` from
/// `0.0`.
pub(crate) fn canonical_bits(f: f64) -> u64 {
    if f.is_nan() {
        f64::NAN.to_bits()
    } else {
        f.to_bits()
    }
}

fn same(a: f64, b: f64) -> bool {
    canonical_bits(a) == canonical_bits(b)
}

fn same_ring(a: &[(f64, f64)], b: &[(f64, f64)]) -> bool {
    a.len() == b.len()
        && a.iter()
            .zip(b)
            .all(|(p, q)| same(p.0, q.0) && same(p.1, q.1))
}

impl PartialEq for Geometry {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (Geometry::Point { x: ax, y: ay }, Geometry::Point { x: bx, y: by }) => {
                same(*ax, *bx) && same(*ay, *by)
            }
            (
                Geometry::Rect {
                    min_x: a0,
                    min_y: a1,
                    max_x: a2,
                    max_y: a3,
                },
                Geometry::Rect {
                    min_x: b0,
                    min_y: b1,
                    max_x: b2,
                    max_y: b3,
                },
            ) => same(*a0, *b0) && same(*a1, *b1) && same(*a2, *b2) && same(*a3, *b3),
            (
                Geometry::Polygon {
                    exterior: ae,
                    holes: ah,
                },
                Geometry::Polygon {
                    exterior: be,
                    holes: bh,
                },
            ) => {
                same_ring(ae, be)
                    && ah.len() == bh.len()
                    && ah.iter().zip(bh).all(|(a, b)| same_ring(a, b))
            }
            _ => false,
        }
    }
}

impl Eq for Geometry {}

impl Hash for Geometry {
    fn hash<H: Hasher>(&self, state: &mut H) {
        let ring = |r: &[(f64, f64)], state: &mut H| {
            r.len().hash(state);
            for (x, y) in r {
                canonical_bits(*x).hash(state);
                canonical_bits(*y).hash(state);
            }
        };
        match self {
            Geometry::Point { x, y } => {
                0u8.hash(state);
                canonical_bits(*x).hash(state);
                canonical_bits(*y).hash(state);
            }
            Geometry::Rect {
                min_x,
                min_y,
                max_x,
                max_y,
            } => {
                1u8.hash(state);
                for c in [min_x, min_y, max_x, max_y] {
                    canonical_bits(*c).hash(state);
                }
            }
            Geometry::Polygon { exterior, holes } => {
                2u8.hash(state);
                ring(exterior, state);
                holes.len().hash(state);
                for h in holes {
                    ring(h, state);
                }
            }
        }
    }
}

impl Geometry {
    /// Build a point.
    pub fn point(x: f64, y: f64) -> Geometry {
        Geometry::Point { x, y }
    }

    /// Build a rectangle from its bounds (not validated; see [`Geometry::validate`]).
    pub fn rect(min_x: f64, min_y: f64, max_x: f64, max_y: f64) -> Geometry {
        Geometry::Rect {
            min_x,
            min_y,
            max_x,
            max_y,
        }
    }

    /// The type name used in messages and schemas: `point`, `rectangle` or `polygon`.
    pub fn type_name(&self) -> &'static str {
        match self {
            Geometry::Point { .. } => "point",
            Geometry::Rect { .. } => "rectangle",
            Geometry::Polygon { .. } => "polygon",
        }
    }

    /// Minimum bounding rectangle as `(min_x, min_y, max_x, max_y)`.
    ///
    /// A polygon's box is that of its exterior ring (holes lie inside it). A
    /// polygon with an empty exterior ring (invalid) yields the empty box
    /// `(inf, inf, -inf, -inf)`.
    pub fn mbr(&self) -> (f64, f64, f64, f64) {
        match self {
            Geometry::Point { x, y } => (*x, *y, *x, *y),
            Geometry::Rect {
                min_x,
                min_y,
                max_x,
                max_y,
            } => (*min_x, *min_y, *max_x, *max_y),
            Geometry::Polygon { exterior, .. } => exterior.iter().fold(
                (
                    f64::INFINITY,
                    f64::INFINITY,
                    f64::NEG_INFINITY,
                    f64::NEG_INFINITY,
                ),
                |(a, b, c, d), &(x, y)| (a.min(x), b.min(y), c.max(x), d.max(y)),
            ),
        }
    }

    /// Check the structural rules: every coordinate finite, `min <= max` for
    /// rectangles, every polygon ring closed with at least 4 points.
    ///
    /// Errors are [`Error::InvalidRecord`] without a field name; callers that
    /// know the field should use [`coerce`](super::coerce), which names it.
    pub fn validate(&self) -> Result<()> {
        self.validate_reason().map_err(|r| Error::invalid(None, r))
    }

    /// Like [`Geometry::validate`] but returns the bare reason.
    pub(crate) fn validate_reason(&self) -> std::result::Result<(), String> {
        match self {
            Geometry::Point { x, y } => {
                if !x.is_finite() || !y.is_finite() {
                    return Err(format!("point ({x}, {y}) has a non-finite coordinate"));
                }
            }
            Geometry::Rect {
                min_x,
                min_y,
                max_x,
                max_y,
            } => {
                for (name, c) in [
                    ("min_x", min_x),
                    ("min_y", min_y),
                    ("max_x", max_x),
                    ("max_y", max_y),
                ] {
                    if !c.is_finite() {
                        return Err(format!("rectangle {name} is {c}, not a finite number"));
                    }
                }
                if min_x > max_x {
                    return Err(format!(
                        "rectangle min_x {min_x} is greater than max_x {max_x}"
                    ));
                }
                if min_y > max_y {
                    return Err(format!(
                        "rectangle min_y {min_y} is greater than max_y {max_y}"
                    ));
                }
            }
            Geometry::Polygon { exterior, holes } => {
                check_ring("exterior ring", exterior)?;
                for (i, h) in holes.iter().enumerate() {
                    check_ring(&format!("hole {}", i + 1), h)?;
                }
            }
        }
        Ok(())
    }

    /// If this is a polygon without holes whose exterior is exactly an
    /// axis-aligned box (4 distinct corners, axis-parallel edges), return that
    /// box as a [`Geometry::Rect`]. Rectangles are returned as they are.
    pub fn as_rect(&self) -> Option<Geometry> {
        match self {
            Geometry::Rect { .. } => Some(self.clone()),
            Geometry::Polygon { exterior, holes } if holes.is_empty() => ring_as_box(exterior),
            _ => None,
        }
    }

    /// The polygon equivalent of a rectangle (counter-clockwise ring starting
    /// at the south-west corner); polygons are returned as they are, points as
    /// `None`.
    pub fn to_polygon(&self) -> Option<Geometry> {
        match self {
            Geometry::Rect {
                min_x,
                min_y,
                max_x,
                max_y,
            } => Some(Geometry::Polygon {
                exterior: box_ring(*min_x, *min_y, *max_x, *max_y),
                holes: Vec::new(),
            }),
            Geometry::Polygon { .. } => Some(self.clone()),
            Geometry::Point { .. } => None,
        }
    }

    /// Well-known-text rendering: `POINT(x y)` or `POLYGON((x y, ...), ...)`.
    /// A rectangle renders as its box polygon.
    pub fn to_wkt(&self) -> String {
        fn ring(out: &mut String, r: &[(f64, f64)]) {
            out.push('(');
            for (i, (x, y)) in r.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                out.push_str(&format!("{x} {y}"));
            }
            out.push(')');
        }
        match self {
            Geometry::Point { x, y } => format!("POINT({x} {y})"),
            Geometry::Rect {
                min_x,
                min_y,
                max_x,
                max_y,
            } => {
                let mut s = String::from("POLYGON(");
                ring(&mut s, &box_ring(*min_x, *min_y, *max_x, *max_y));
                s.push(')');
                s
            }
            Geometry::Polygon { exterior, holes } => {
                let mut s = String::from("POLYGON(");
                ring(&mut s, exterior);
                for h in holes {
                    s.push_str(", ");
                    ring(&mut s, h);
                }
                s.push(')');
                s
            }
        }
    }

    /// Parse well-known text: `POINT(x y)` or `POLYGON((x y, ...), (...))`,
    /// keywords case-insensitive, an optional EWKT `SRID=n;` prefix ignored.
    /// The result is not validated (see [`Geometry::validate`]). Errors are
    /// [`Error::Parse`].
    pub fn parse_wkt(text: &str) -> Result<Geometry> {
        parse_wkt_reason(text).map_err(|reason| Error::Parse {
            what: "WKT geometry".to_owned(),
            reason,
        })
    }
}

impl fmt::Display for Geometry {
    /// Displays as WKT.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_wkt())
    }
}

/// The closed counter-clockwise ring of a box.
pub(crate) fn box_ring(min_x: f64, min_y: f64, max_x: f64, max_y: f64) -> Vec<(f64, f64)> {
    vec![
        (min_x, min_y),
        (max_x, min_y),
        (max_x, max_y),
        (min_x, max_y),
        (min_x, min_y),
    ]
}

/// If `ring` is a closed 5-point ring tracing an axis-aligned box with four
/// distinct corners, return the box.
pub(crate) fn ring_as_box(ring: &[(f64, f64)]) -> Option<Geometry> {
    if ring.len() != 5 || ring[0] != ring[4] {
        return None;
    }
    if ring.iter().any(|(x, y)| !x.is_finite() || !y.is_finite()) {
        return None;
    }
    for i in 0..4 {
        let (a, b) = (ring[i], ring[i + 1]);
        // Each edge moves along exactly one axis.
        if (a.0 == b.0) == (a.1 == b.1) {
            return None;
        }
        // Consecutive edges alternate axes.
        let c = ring[(i + 2) % 4];
        if (a.0 == b.0) == (b.0 == c.0) {
            return None;
        }
    }
    let g = Geometry::Polygon {
        exterior: ring.to_vec(),
        holes: Vec::new(),
    };
    let (min_x, min_y, max_x, max_y) = g.mbr();
    // Every vertex is a corner of the bounding box.
    let corner = |(x, y): (f64, f64)| (x == min_x || x == max_x) && (y == min_y || y == max_y);
    if ring.iter().all(|&p| corner(p)) {
        Some(Geometry::rect(min_x, min_y, max_x, max_y))
    } else {
        None
    }
}

fn check_ring(what: &str, ring: &[(f64, f64)]) -> std::result::Result<(), String> {
    if let Some((i, (x, y))) = ring
        .iter()
        .enumerate()
        .find(|(_, (x, y))| !x.is_finite() || !y.is_finite())
    {
        return Err(format!(
            "polygon {what} point {} ({x}, {y}) has a non-finite coordinate",
            i + 1
        ));
    }
    if ring.len() < 4 {
        return Err(format!(
            "polygon {what} has {} point(s); a closed ring needs at least 4 (the first point repeated at the end)",
            ring.len()
        ));
    }
    let (first, last) = (ring[0], ring[ring.len() - 1]);
    if first != last {
        return Err(format!(
            "polygon {what} is not closed: first point ({}, {}) differs from last point ({}, {})",
            first.0, first.1, last.0, last.1
        ));
    }
    Ok(())
}

/// Check geographic ranges: every longitude (`x`) in [-180, 180] and every
/// latitude (`y`) in [-90, 90]. Also fails on non-finite coordinates.
/// Errors are [`Error::InvalidRecord`] without a field name.
pub fn check_geographic(g: &Geometry) -> Result<()> {
    check_geographic_reason(g).map_err(|r| Error::invalid(None, r))
}

pub(crate) fn check_geographic_reason(g: &Geometry) -> std::result::Result<(), String> {
    let check = |x: f64, y: f64| -> std::result::Result<(), String> {
        if !(-180.0..=180.0).contains(&x) {
            return Err(format!(
                "longitude (x) {x} is outside [-180, 180]; geographic coordinates are [longitude, latitude]"
            ));
        }
        if !(-90.0..=90.0).contains(&y) {
            return Err(format!(
                "latitude (y) {y} is outside [-90, 90]; geographic coordinates are [longitude, latitude]"
            ));
        }
        Ok(())
    };
    match g {
        Geometry::Point { x, y } => check(*x, *y),
        Geometry::Rect {
            min_x,
            min_y,
            max_x,
            max_y,
        } => {
            check(*min_x, *min_y)?;
            check(*max_x, *max_y)
        }
        Geometry::Polygon { exterior, holes } => {
            for &(x, y) in exterior.iter().chain(holes.iter().flatten()) {
                check(x, y)?;
            }
            Ok(())
        }
    }
}

// ---------------------------------------------------------------------------
// WKT parsing

struct Wkt<'a> {
    s: &'a [u8],
    pos: usize,
}

impl Wkt<'_> {
    fn ws(&mut self) {
        while self.pos < self.s.len() && self.s[self.pos].is_ascii_whitespace() {
            self.pos += 1;
        }
    }

    fn peek(&mut self) -> Option<u8> {
        self.ws();
        self.s.get(self.pos).copied()
    }

    fn found(&mut self) -> String {
        match self.peek() {
            None => "end of text".to_owned(),
            Some(c) => format!("`{}` at position {}", c as char, self.pos + 1),
        }
    }

    fn expect(&mut self, c: u8) -> std::result::Result<(), String> {
        if self.peek() == Some(c) {
            self.pos += 1;
            Ok(())
        } else {
            Err(format!("expected `{}`, found {}", c as char, self.found()))
        }
    }

    fn word(&mut self) -> String {
        self.ws();
        let start = self.pos;
        while self.pos < self.s.len() && self.s[self.pos].is_ascii_alphabetic() {
            self.pos += 1;
        }
        String::from_utf8_lossy(&self.s[start..self.pos]).to_ascii_uppercase()
    }

    fn number(&mut self) -> std::result::Result<f64, String> {
        self.ws();
        let start = self.pos;
        while self.pos < self.s.len()
            && matches!(
                self.s[self.pos],
                b'0'..=b'9' | b'+' | b'-' | b'.' | b'e' | b'E'
            )
        {
            self.pos += 1;
        }
        let tok = std::str::from_utf8(&self.s[start..self.pos]).unwrap_or("");
        if tok.is_empty() {
            self.pos = start;
            return Err(format!("expected a number, found {}", self.found()));
        }
        tok.parse::<f64>()
            .map_err(|_| format!("`{tok}` at position {} is not a number", start + 1))
    }

    fn coord(&mut self) -> std::result::Result<(f64, f64), String> {
        let x = self.number()?;
        let y = self.number()?;
        if let Some(c) = self.peek()
            && (c.is_ascii_digit() || c == b'-' || c == b'+' || c == b'.')
        {
            return Err(format!(
                "only 2-D coordinates are supported; found a third number at position {}",
                self.pos + 1
            ));
        }
        Ok((x, y))
    }

    fn ring(&mut self) -> std::result::Result<Vec<(f64, f64)>, String> {
        self.expect(b'(')?;
        let mut pts = vec![self.coord()?];
        while self.peek() == Some(b',') {
            self.pos += 1;
            pts.push(self.coord()?);
        }
        self.expect(b')')?;
        Ok(pts)
    }
}

fn parse_wkt_reason(text: &str) -> std::result::Result<Geometry, String> {
    let mut body = text.trim();
    if body.len() >= 5 && body.as_bytes()[..5].eq_ignore_ascii_case(b"SRID=") {
        match body.find(';') {
            Some(i) => body = &body[i + 1..],
            None => return Err("EWKT `SRID=` prefix is not followed by `;`".to_owned()),
        }
    }
    let mut p = Wkt {
        s: body.as_bytes(),
        pos: 0,
    };
    let kw = p.word();
    let g = match kw.as_str() {
        "POINT" | "POLYGON" => {
            let next = p.word();
            match next.as_str() {
                "" => {}
                "EMPTY" => return Err(format!("empty {} is not supported", kw.to_lowercase())),
                "Z" | "M" | "ZM" => {
                    return Err(format!("{kw} {next}: only 2-D coordinates are supported"));
                }
                other => return Err(format!("unexpected `{other}` after {kw}")),
            }
            if kw == "POINT" {
                p.expect(b'(')?;
                let (x, y) = p.coord()?;
                p.expect(b')')?;
                Geometry::Point { x, y }
            } else {
                p.expect(b'(')?;
                let exterior = p.ring()?;
                let mut holes = Vec::new();
                while p.peek() == Some(b',') {
                    p.pos += 1;
                    holes.push(p.ring()?);
                }
                p.expect(b')')?;
                Geometry::Polygon { exterior, holes }
            }
        }
        "" => {
            return Err(
                "expected a geometry keyword (POINT or POLYGON) at the start of the text"
                    .to_owned(),
            );
        }
        other => {
            return Err(format!(
                "unsupported WKT geometry type `{other}` (supported: POINT, POLYGON)"
            ));
        }
    };
    if p.peek().is_some() {
        return Err(format!("unexpected text after the geometry: {}", p.found()));
    }
    Ok(g)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mbr_and_validate() {
        let p = Geometry::point(1.0, 2.0);
        assert_eq!(p.mbr(), (1.0, 2.0, 1.0, 2.0));
        p.validate().unwrap();
        let poly = Geometry::Polygon {
            exterior: vec![(0.0, 0.0), (4.0, 1.0), (2.0, 5.0), (0.0, 0.0)],
            holes: vec![],
        };
        assert_eq!(poly.mbr(), (0.0, 0.0, 4.0, 5.0));
        poly.validate().unwrap();
        let open = Geometry::Polygon {
            exterior: vec![(0.0, 0.0), (4.0, 1.0), (2.0, 5.0), (0.0, 1.0)],
            holes: vec![],
        };
        let e = open.validate().unwrap_err().to_string();
        assert!(e.contains("not closed"), "{e}");
        let short = Geometry::Polygon {
            exterior: vec![(0.0, 0.0), (4.0, 1.0), (0.0, 0.0)],
            holes: vec![],
        };
        assert!(
            short
                .validate()
                .unwrap_err()
                .to_string()
                .contains("at least 4")
        );
        let bad = Geometry::rect(3.0, 0.0, 1.0, 1.0);
        assert!(bad.validate().unwrap_err().to_string().contains("min_x 3"));
        let nan = Geometry::point(f64::NAN, 0.0);
        assert!(
            nan.validate()
                .unwrap_err()
                .to_string()
                .contains("non-finite")
        );
        let hole = Geometry::Polygon {
            exterior: box_ring(0.0, 0.0, 10.0, 10.0),
            holes: vec![vec![(1.0, 1.0), (2.0, 1.0), (1.0, 1.0)]],
        };
        assert!(hole.validate().unwrap_err().to_string().contains("hole 1"));
    }

    #[test]
    fn geographic() {
        check_geographic(&Geometry::point(-180.0, 90.0)).unwrap();
        let e = check_geographic(&Geometry::point(181.0, 0.0)).unwrap_err();
        assert!(e.to_string().contains("longitude"), "{e}");
        let e = check_geographic(&Geometry::point(0.0, -90.5)).unwrap_err();
        assert!(e.to_string().contains("latitude"), "{e}");
        let e = check_geographic(&Geometry::point(f64::NAN, 0.0)).unwrap_err();
        assert!(e.to_string().contains("longitude"), "{e}");
    }

    #[test]
    fn wkt_round_trip() {
        let g = Geometry::parse_wkt("  point ( -1.5  2e1 ) ").unwrap();
        assert_eq!(g, Geometry::point(-1.5, 20.0));
        assert_eq!(Geometry::parse_wkt(&g.to_wkt()).unwrap(), g);
        let poly = Geometry::parse_wkt(
            "SRID=4326;POLYGON((0 0, 10 0, 10 10, 0 10, 0 0), (1 1, 2 1, 2 2, 1 1))",
        )
        .unwrap();
        match &poly {
            Geometry::Polygon { exterior, holes } => {
                assert_eq!(exterior.len(), 5);
                assert_eq!(holes.len(), 1);
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(Geometry::parse_wkt(&poly.to_wkt()).unwrap(), poly);
        let r = Geometry::rect(0.0, 1.0, 2.0, 3.0);
        assert_eq!(
            Geometry::parse_wkt(&r.to_wkt()).unwrap().as_rect(),
            Some(r.clone())
        );
    }

    #[test]
    fn wkt_errors() {
        for (text, want) in [
            ("POINT(1)", "expected a number"),
            ("POINT(1 2", "expected `)`"),
            ("POINT(1 2 3)", "2-D"),
            ("POINT Z (1 2 3)", "2-D"),
            ("POINT EMPTY", "empty point"),
            (
                "LINESTRING(0 0, 1 1)",
                "unsupported WKT geometry type `LINESTRING`",
            ),
            ("POINT(1 2) x", "unexpected text"),
            ("", "expected a geometry keyword"),
            ("POINT(1..2 3)", "not a number"),
            ("POLYGON(0 0, 1 1)", "expected `(`"),
        ] {
            let e = Geometry::parse_wkt(text).unwrap_err().to_string();
            assert!(e.contains(want), "{text:?}: {e}");
        }
    }

    #[test]
    fn boxes() {
        let ring = vec![(0.0, 0.0), (0.0, 2.0), (3.0, 2.0), (3.0, 0.0), (0.0, 0.0)];
        assert_eq!(ring_as_box(&ring), Some(Geometry::rect(0.0, 0.0, 3.0, 2.0)));
        let skew = vec![(0.0, 0.0), (1.0, 2.0), (3.0, 2.0), (3.0, 0.0), (0.0, 0.0)];
        assert_eq!(ring_as_box(&skew), None);
        let degenerate = vec![(0.0, 0.0), (0.0, 0.0), (3.0, 0.0), (3.0, 0.0), (0.0, 0.0)];
        assert_eq!(ring_as_box(&degenerate), None);
        // Zig-zag that is axis-parallel but not a box.
        let zig = vec![(0.0, 0.0), (2.0, 0.0), (2.0, 2.0), (2.0, 0.0), (0.0, 0.0)];
        assert_eq!(ring_as_box(&zig), None);
    }
}
