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

/// A geometry of any WKT kind: Silt's own (a point, a box, a polygon),
/// which the indexes and Silt's predicates take, or another the `geo`
/// crate holds (line strings, multi-geometries, collections), which the
/// processing functions produce and take.
#[derive(Clone, Debug, PartialEq)]
pub enum AnyGeom {
    Silt(Geometry),
    Other(geo::Geometry<f64>),
}

/// The text after an EWKT `SRID=n;` prefix (the SRID is ignored, as Silt's
/// own parser ignores it).
fn without_srid(text: &str) -> &str {
    let t = text.trim_start();
    match t.get(..5) {
        Some(p) if p.eq_ignore_ascii_case("srid=") => t.split_once(';').map_or(t, |(_, r)| r),
        _ => t,
    }
}

/// Parse WKT of any kind. Points, boxes and polygons become Silt's
/// geometries (validated as stored ones are); anything else the `geo`
/// crate's, with every coordinate finite.
pub fn parse_any(text: &str) -> Result<AnyGeom, String> {
    let silt_err = match Geometry::parse_wkt(text) {
        Ok(g) => {
            g.validate()
                .map_err(|e| format!("invalid geometry `{}`: {e}", short(text)))?;
            return Ok(AnyGeom::Silt(g));
        }
        Err(e) => e,
    };
    use wkt::TryFromWkt;
    match geo::Geometry::<f64>::try_from_wkt_str(without_srid(text)) {
        Ok(g) => {
            check_finite(&g).map_err(|e| format!("invalid geometry `{}`: {e}", short(text)))?;
            Ok(AnyGeom::Other(g))
        }
        // A point or polygon that Silt's parser refused: its reason is
        // the more precise one.
        Err(_) if starts_with_silt_kind(text) => Err(silt_err.to_string()),
        Err(e) => Err(format!("invalid WKT geometry `{}`: {e}", short(text))),
    }
}

/// A GeoJSON geometry (`ST_GeomFromGeoJSON`); `None` for JSON `null`.
/// Points and polygons become Silt's geometries through its own GeoJSON
/// reading (validated as stored ones are); every other type (lines,
/// multi-geometries, collections) is read by the `geojson` crate into the
/// `geo` crate's form, with every coordinate finite.
pub fn from_geojson(text: &str) -> Result<Option<AnyGeom>, String> {
    let j: serde_json::Value =
        serde_json::from_str(text).map_err(|e| format!("invalid JSON: {e}"))?;
    if j.is_null() {
        return Ok(None);
    }
    let kind = j
        .get("type")
        .and_then(serde_json::Value::as_str)
        .unwrap_or_default()
        .to_owned();
    match kind.as_str() {
        "LineString" | "MultiPoint" | "MultiLineString" | "MultiPolygon" | "GeometryCollection" => {
            let g = serde_json::from_value::<geojson::Geometry>(j)
                .map_err(|e| format!("invalid GeoJSON {kind}: {e}"))?;
            // The crate reads a position of one number but then indexes
            // its second: refuse it here.
            if !positions_2d(&g.value) {
                return Err(format!(
                    "invalid GeoJSON {kind}: every position needs two coordinates [x, y]"
                ));
            }
            let g = geo::Geometry::<f64>::try_from(&g.value)
                .map_err(|e| format!("invalid GeoJSON {kind}: {e}"))?;
            check_finite(&g).map_err(|e| format!("invalid GeoJSON {kind}: {e}"))?;
            Ok(Some(AnyGeom::from_geo(g)))
        }
        _ => match silt::value::coerce(
            "geojson",
            silt::FieldType::Geometry,
            silt::value::from_json(&j),
        )
        .map_err(|e| e.to_string())?
        {
            silt::Value::Geometry(g) => Ok(Some(AnyGeom::Silt(g))),
            silt::Value::Null => Ok(None),
            other => Err(format!(
                "expected a GeoJSON geometry, got {}",
                other.type_name()
            )),
        },
    }
}

/// Whether every position of a GeoJSON geometry has at least two numbers.
fn positions_2d(v: &geojson::GeometryValue) -> bool {
    use geojson::GeometryValue as V;
    let ok = |p: &geojson::Position| p.len() >= 2;
    let line = |l: &[geojson::Position]| l.iter().all(ok);
    match v {
        V::Point { coordinates } => ok(coordinates),
        V::MultiPoint { coordinates } | V::LineString { coordinates } => line(coordinates),
        V::MultiLineString { coordinates } | V::Polygon { coordinates } => {
            coordinates.iter().all(|l| line(l))
        }
        V::MultiPolygon { coordinates } => coordinates.iter().flatten().all(|l| line(l)),
        V::GeometryCollection { geometries } => geometries.iter().all(|g| positions_2d(&g.value)),
    }
}

fn starts_with_silt_kind(text: &str) -> bool {
    let t = without_srid(text).trim_start().to_ascii_uppercase();
    (t.starts_with("POINT") || t.starts_with("POLYGON")) && !t.contains("EMPTY")
}

/// The first 80 characters of a text, for error messages.
pub fn short(text: &str) -> String {
    match text.char_indices().nth(80) {
        Some((i, _)) => format!("{}...", &text[..i]),
        None => text.to_owned(),
    }
}

/// Every coordinate of `g` is a finite number.
pub fn check_finite(g: &geo::Geometry<f64>) -> Result<(), String> {
    use geo::CoordsIter;
    match g
        .coords_iter()
        .find(|c| !c.x.is_finite() || !c.y.is_finite())
    {
        Some(c) => Err(format!("coordinate ({}, {}) is not finite", c.x, c.y)),
        None => Ok(()),
    }
}

impl AnyGeom {
    /// The `geo` crate's form.
    pub fn to_geo(&self) -> geo::Geometry<f64> {
        match self {
            AnyGeom::Silt(g) => to_geo(g),
            AnyGeom::Other(g) => g.clone(),
        }
    }

    /// A `geo` geometry, as Silt's own when it is a point or a polygon
    /// (so that it goes on through Silt's predicates and indexes).
    pub fn from_geo(g: geo::Geometry<f64>) -> AnyGeom {
        let ring = |l: &geo::LineString<f64>| l.coords().map(|c| (c.x, c.y)).collect::<Vec<_>>();
        match &g {
            geo::Geometry::Point(p) => AnyGeom::Silt(Geometry::point(p.x(), p.y())),
            geo::Geometry::Polygon(p) if p.exterior().0.len() >= 4 => {
                let s = Geometry::Polygon {
                    exterior: ring(p.exterior()),
                    holes: p.interiors().iter().map(ring).collect(),
                };
                match s.validate() {
                    Ok(()) => AnyGeom::Silt(s),
                    Err(_) => AnyGeom::Other(g),
                }
            }
            _ => AnyGeom::Other(g),
        }
    }

    /// Well-known text.
    pub fn to_wkt(&self) -> String {
        match self {
            AnyGeom::Silt(g) => g.to_wkt(),
            AnyGeom::Other(g) => {
                use wkt::ToWkt;
                without_empty_parts(g).wkt_string()
            }
        }
    }

    /// The PostGIS name of the geometry's kind (`ST_GeometryType`'s words).
    pub fn kind(&self) -> &'static str {
        match self {
            AnyGeom::Silt(Geometry::Point { .. }) => "Point",
            AnyGeom::Silt(_) => "Polygon",
            AnyGeom::Other(g) => match g {
                geo::Geometry::Point(_) => "Point",
                geo::Geometry::Line(_) | geo::Geometry::LineString(_) => "LineString",
                geo::Geometry::Polygon(_) | geo::Geometry::Rect(_) | geo::Geometry::Triangle(_) => {
                    "Polygon"
                }
                geo::Geometry::MultiPoint(_) => "MultiPoint",
                geo::Geometry::MultiLineString(_) => "MultiLineString",
                geo::Geometry::MultiPolygon(_) => "MultiPolygon",
                geo::Geometry::GeometryCollection(_) => "GeometryCollection",
            },
        }
    }

    /// Silt's geometries this one is the union of, when it is made of
    /// points, boxes and polygons only (a multi-polygon is its polygons):
    /// what an index probe per part can search.
    pub fn silt_parts(&self) -> Option<Vec<Geometry>> {
        match self {
            AnyGeom::Silt(g) => Some(vec![g.clone()]),
            AnyGeom::Other(g) => {
                let one = |g: geo::Geometry<f64>| match AnyGeom::from_geo(g) {
                    AnyGeom::Silt(s) => Some(s),
                    AnyGeom::Other(_) => None,
                };
                match g {
                    geo::Geometry::MultiPolygon(mp) if !mp.0.is_empty() => {
                        mp.0.iter().map(|p| one(p.clone().into())).collect()
                    }
                    geo::Geometry::MultiPoint(mp) if !mp.0.is_empty() => {
                        mp.0.iter().map(|p| one((*p).into())).collect()
                    }
                    _ => None,
                }
            }
        }
    }
}

/// Whether the geometries share a point: Silt's predicate between its own
/// geometries, the `geo` crate's otherwise (both planar in lon/lat,
/// boundaries included).
pub fn intersects_any(a: &AnyGeom, b: &AnyGeom) -> bool {
    match (a, b) {
        (AnyGeom::Silt(x), AnyGeom::Silt(y)) => intersects(x, y),
        _ => geo::Intersects::intersects(&a.to_geo(), &b.to_geo()),
    }
}

/// Whether `a` contains `b` (OGC semantics, the `geo` crate's).
pub fn contains_any(a: &AnyGeom, b: &AnyGeom) -> bool {
    match (a, b) {
        (AnyGeom::Silt(x), AnyGeom::Silt(y)) => contains(x, y),
        _ => a.to_geo().contains(&b.to_geo()),
    }
}

/// Great-circle metres from a point to any geometry (0 inside it or on
/// it); `None` for an empty geometry.
fn point_distance_m(g: &geo::Geometry<f64>, p: geo::Point<f64>) -> Option<f64> {
    use geo::{Distance, Haversine, HaversineClosestPoint};
    if geo::Intersects::intersects(g, &p) {
        return Some(0.0);
    }
    match g.haversine_closest_point(&p) {
        geo::Closest::Intersection(_) => Some(0.0),
        geo::Closest::SinglePoint(q) => Some(Haversine.distance(q, p)),
        geo::Closest::Indeterminate => None,
    }
}

/// Great-circle metres between two geometries of any kind (see
/// [`distance_m`] for Silt's own); `None` when one is empty.
pub fn distance_any_m(a: &AnyGeom, b: &AnyGeom) -> Option<f64> {
    if let (AnyGeom::Silt(x), AnyGeom::Silt(y)) = (a, b) {
        return Some(distance_m(x, y));
    }
    let (ga, gb) = (a.to_geo(), b.to_geo());
    if geo::Intersects::intersects(&ga, &gb) {
        return Some(0.0);
    }
    use geo::CoordsIter;
    let mut best: Option<f64> = None;
    for (from, to) in [(&ga, &gb), (&gb, &ga)] {
        for c in from.coords_iter() {
            if let Some(d) = point_distance_m(to, c.into()) {
                best = Some(best.map_or(d, |b| b.min(d)));
            }
        }
    }
    best
}

/// GeoJSON of a `geo` geometry (RFC 7946 shapes; a `Rect` or `Triangle`
/// as its polygon).
pub fn geojson(g: &geo::Geometry<f64>) -> serde_json::Value {
    use serde_json::{Value as J, json};
    fn pos(c: geo::Coord<f64>) -> J {
        json!([c.x, c.y])
    }
    fn line(l: &geo::LineString<f64>) -> J {
        J::Array(l.coords().map(|c| pos(*c)).collect())
    }
    fn poly(p: &geo::Polygon<f64>) -> J {
        J::Array(
            std::iter::once(p.exterior())
                .chain(p.interiors())
                .map(line)
                .collect(),
        )
    }
    let shape = |t: &str, coordinates: J| json!({"type": t, "coordinates": coordinates});
    match g {
        geo::Geometry::Point(p) => shape("Point", pos(p.0)),
        geo::Geometry::Line(l) => shape("LineString", json!([pos(l.start), pos(l.end)])),
        geo::Geometry::LineString(l) => shape("LineString", line(l)),
        geo::Geometry::Polygon(p) => shape("Polygon", poly(p)),
        geo::Geometry::Rect(r) => shape("Polygon", poly(&r.to_polygon())),
        geo::Geometry::Triangle(t) => shape("Polygon", poly(&t.to_polygon())),
        geo::Geometry::MultiPoint(m) => shape(
            "MultiPoint",
            J::Array(m.0.iter().map(|p| pos(p.0)).collect()),
        ),
        geo::Geometry::MultiLineString(m) => {
            shape("MultiLineString", J::Array(m.0.iter().map(line).collect()))
        }
        geo::Geometry::MultiPolygon(m) => {
            shape("MultiPolygon", J::Array(m.0.iter().map(poly).collect()))
        }
        geo::Geometry::GeometryCollection(c) => json!({
            "type": "GeometryCollection",
            "geometries": c.0.iter().map(geojson).collect::<Vec<_>>(),
        }),
    }
}

/// `g` without empty polygons and line strings inside multi-geometries and
/// collections (the WKT writer cannot write a multi-polygon holding an
/// empty polygon; such a part adds no point anyway); `g` itself when it has
/// none.
pub fn without_empty_parts(g: &geo::Geometry<f64>) -> std::borrow::Cow<'_, geo::Geometry<f64>> {
    use geo::Geometry as G;
    use std::borrow::Cow;
    if !has_empty_parts(g) {
        return Cow::Borrowed(g);
    }
    Cow::Owned(match g {
        G::MultiPolygon(m) => G::MultiPolygon(geo::MultiPolygon::new(
            m.0.iter()
                .filter(|p| !p.exterior().0.is_empty())
                .cloned()
                .collect(),
        )),
        G::MultiLineString(m) => G::MultiLineString(geo::MultiLineString::new(
            m.0.iter().filter(|l| !l.0.is_empty()).cloned().collect(),
        )),
        G::GeometryCollection(c) => G::GeometryCollection(geo::GeometryCollection::new_from(
            c.0.iter()
                .map(|p| without_empty_parts(p).into_owned())
                .collect(),
        )),
        other => other.clone(),
    })
}

/// Whether a multi-geometry or collection holds an empty polygon or line.
fn has_empty_parts(g: &geo::Geometry<f64>) -> bool {
    use geo::Geometry as G;
    match g {
        G::MultiPolygon(m) => m.0.iter().any(|p| p.exterior().0.is_empty()),
        G::MultiLineString(m) => m.0.iter().any(|l| l.0.is_empty()),
        G::GeometryCollection(c) => c.0.iter().any(has_empty_parts),
        _ => false,
    }
}
