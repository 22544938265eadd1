//! PostGIS-named measurement and processing functions over geometries of
//! any kind, computed with the `geo` crate's algorithms. Geometries are WKT
//! text in and out (see [`crate::geom::AnyGeom`]).
//!
//! | function | result | space |
//! |----------|--------|-------|
//! | `ST_Area(g)` | area | planar, coordinate units² (PostGIS `geometry`) |
//! | `ST_Area(g, use_spheroid)` | area in m² | WGS 84 spheroid (`true`) or sphere (`false`), as PostGIS `geography` |
//! | `ST_Length(g)`, `ST_Perimeter(g)` | length of lines / of polygon rings | planar |
//! | `ST_Length(g, use_spheroid)`, `ST_Perimeter(g, use_spheroid)` | metres | spheroid or sphere |
//! | `ST_DistanceSphere(a, b)` | metres | sphere (radius 6,371,008.8 m) |
//! | `ST_Buffer(g, r [, 'quad_segs=8 endcap=round join=round'])` | polygon | planar |
//! | `ST_Union(a, b)`, `ST_Intersection(a, b)`, `ST_Difference(a, b)`, `ST_SymDifference(a, b)` | geometry | planar |
//! | `ST_Collect(a, b)` | multi-geometry or collection | |
//! | `ST_MakeValid(g)` | valid geometry | planar |
//! | `ST_ClosestPoint(a, b)` | the point of `a` closest to `b` | planar |
//! | `ST_Transform(g, to_srid)`, `ST_Transform(g, from_srid, to_srid)` | geometry | 4326 ↔ 3857 |
//! | `ST_Envelope(g)` | bounding box (a point or a line when it is one) | planar |
//!
//! As in PostGIS, `ST_Length` of a polygon and `ST_Perimeter` of a line
//! are 0. NULL in, NULL out. A malformed geometry or argument is an
//! execution error naming the function.

use std::borrow::Cow;
use std::sync::Arc;

use datafusion::arrow::array::{
    Array, ArrayRef, AsArray, BooleanArray, Float64Array, Float64Builder, StringArray,
    StringBuilder,
};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType, Float64Type};
use datafusion::common::ScalarValue;
use datafusion::error::{DataFusionError, Result as DfResult};
use datafusion::logical_expr::{
    ColumnarValue, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Volatility,
};
use geo::{
    Area, BooleanOps, BoundingRect, Buffer, ChamberlainDuquetteArea, ClosestPoint, CoordsIter,
    GeodesicArea, Intersects, Length, MakeValid, MapCoords,
};

use crate::geom::{self, AnyGeom};

/// What a function computes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Op {
    Area,
    Length,
    Perimeter,
    DistanceSphere,
    Buffer,
    Union,
    Intersection,
    Difference,
    SymDifference,
    Collect,
    MakeValid,
    ClosestPoint,
    Transform,
    Envelope,
}

/// An argument's kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Arg {
    Geom,
    Num,
    Bool,
    Text,
}

impl Op {
    pub const ALL: [Op; 14] = [
        Op::Area,
        Op::Length,
        Op::Perimeter,
        Op::DistanceSphere,
        Op::Buffer,
        Op::Union,
        Op::Intersection,
        Op::Difference,
        Op::SymDifference,
        Op::Collect,
        Op::MakeValid,
        Op::ClosestPoint,
        Op::Transform,
        Op::Envelope,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Op::Area => "st_area",
            Op::Length => "st_length",
            Op::Perimeter => "st_perimeter",
            Op::DistanceSphere => "st_distancesphere",
            Op::Buffer => "st_buffer",
            Op::Union => "st_union",
            Op::Intersection => "st_intersection",
            Op::Difference => "st_difference",
            Op::SymDifference => "st_symdifference",
            Op::Collect => "st_collect",
            Op::MakeValid => "st_makevalid",
            Op::ClosestPoint => "st_closestpoint",
            Op::Transform => "st_transform",
            Op::Envelope => "st_envelope",
        }
    }

    fn usage(self) -> &'static str {
        match self {
            Op::Area => "ST_Area(geometry [, use_spheroid])",
            Op::Length => "ST_Length(geometry [, use_spheroid])",
            Op::Perimeter => "ST_Perimeter(geometry [, use_spheroid])",
            Op::DistanceSphere => "ST_DistanceSphere(a, b)",
            Op::Buffer => "ST_Buffer(geometry, radius [, 'quad_segs=8 endcap=round join=round'])",
            Op::Union => "ST_Union(a, b)",
            Op::Intersection => "ST_Intersection(a, b)",
            Op::Difference => "ST_Difference(a, b)",
            Op::SymDifference => "ST_SymDifference(a, b)",
            Op::Collect => "ST_Collect(a, b)",
            Op::MakeValid => "ST_MakeValid(geometry)",
            Op::ClosestPoint => "ST_ClosestPoint(a, b)",
            Op::Transform => "ST_Transform(geometry, [from_srid,] to_srid)",
            Op::Envelope => "ST_Envelope(geometry)",
        }
    }

    /// Required and optional argument kinds.
    fn arity(self) -> (&'static [Arg], &'static [Arg]) {
        use Arg::*;
        match self {
            Op::Area | Op::Length | Op::Perimeter => (&[Geom], &[Bool]),
            Op::DistanceSphere
            | Op::Union
            | Op::Intersection
            | Op::Difference
            | Op::SymDifference
            | Op::Collect
            | Op::ClosestPoint => (&[Geom, Geom], &[]),
            Op::Buffer => (&[Geom, Num], &[Text]),
            Op::MakeValid | Op::Envelope => (&[Geom], &[]),
            Op::Transform => (&[Geom, Num], &[Num]),
        }
    }

    fn returns_number(self) -> bool {
        matches!(
            self,
            Op::Area | Op::Length | Op::Perimeter | Op::DistanceSphere
        )
    }
}

/// The UDF of one [`Op`].
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct GeoFn {
    op: Op,
    signature: Signature,
}

/// Every function of this module, ready to register.
pub fn udfs() -> Vec<ScalarUDF> {
    Op::ALL
        .into_iter()
        .map(|op| {
            ScalarUDF::new_from_impl(GeoFn {
                op,
                signature: Signature::user_defined(Volatility::Immutable),
            })
        })
        .collect()
}

fn err(op: Op, msg: impl std::fmt::Display) -> DataFusionError {
    DataFusionError::Execution(format!("{}: {msg}", op.usage()))
}

fn arrow_type(a: Arg) -> DataType {
    match a {
        Arg::Geom | Arg::Text => DataType::Utf8,
        Arg::Num => DataType::Float64,
        Arg::Bool => DataType::Boolean,
    }
}

impl ScalarUDFImpl for GeoFn {
    fn name(&self) -> &str {
        self.op.name()
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _arg_types: &[DataType]) -> DfResult<DataType> {
        Ok(if self.op.returns_number() {
            DataType::Float64
        } else {
            DataType::Utf8
        })
    }

    fn coerce_types(&self, arg_types: &[DataType]) -> DfResult<Vec<DataType>> {
        let (req, opt) = self.op.arity();
        super::check_arity(self.op.usage(), req.len(), opt.len(), arg_types.len())?;
        let mut out = Vec::with_capacity(arg_types.len());
        for (i, (got, want)) in arg_types.iter().zip(req.iter().chain(opt)).enumerate() {
            let ok = match want {
                Arg::Num => got.is_numeric() || *got == DataType::Null,
                Arg::Bool => matches!(got, DataType::Boolean | DataType::Null),
                Arg::Geom | Arg::Text => matches!(
                    got,
                    DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View | DataType::Null
                ),
            };
            if !ok {
                let what = match want {
                    Arg::Num => "a number",
                    Arg::Bool => "a boolean",
                    Arg::Geom => "a geometry (WKT text)",
                    Arg::Text => "text",
                };
                return Err(DataFusionError::Plan(format!(
                    "{}: argument {} must be {what}, got {got}",
                    self.op.usage(),
                    i + 1
                )));
            }
            out.push(arrow_type(*want));
        }
        Ok(out)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        crate::bounds::check(&args.config_options)?;
        let op = self.op;
        let (req, opt) = op.arity();
        if args.args.len() < req.len() || args.args.len() > req.len() + opt.len() {
            return Err(err(
                op,
                format!("wrong number of arguments ({})", args.args.len()),
            ));
        }
        let all_scalar = args
            .args
            .iter()
            .all(|a| matches!(a, ColumnarValue::Scalar(_)));
        let n = if all_scalar { 1 } else { args.number_rows };
        let arrays = ColumnarValue::values_to_arrays(&args.args)?
            .into_iter()
            .zip(req.iter().chain(opt))
            .map(|(a, k)| {
                let t = arrow_type(*k);
                if a.data_type() == &t {
                    Ok(a)
                } else {
                    cast(&a, &t)
                }
            })
            .collect::<Result<Vec<ArrayRef>, _>>()?;
        let kinds: Vec<Arg> = req.iter().chain(opt).copied().collect();
        let cols = Columns::new(op, &args.args, &arrays, &kinds)?;
        // The `geo` crate's overlay code indexes rings without checking
        // them (empty inputs are kept away below); should another shape
        // still trip it, the panic becomes this statement's error.
        let eval = std::panic::AssertUnwindSafe(|| self.eval(&cols, n));
        let out = std::panic::catch_unwind(eval).map_err(|_| {
            err(
                op,
                "the geometry library failed on these arguments (a degenerate geometry?)",
            )
        })??;
        if all_scalar {
            return Ok(ColumnarValue::Scalar(ScalarValue::try_from_array(&out, 0)?));
        }
        Ok(ColumnarValue::Array(out))
    }
}

impl GeoFn {
    fn eval(&self, cols: &Columns<'_>, n: usize) -> DfResult<ArrayRef> {
        let op = self.op;
        let out: ArrayRef = if op.returns_number() {
            let mut b = Float64Builder::with_capacity(n);
            for row in 0..n {
                match cols.row(op, row)? {
                    Some(vals) => match number(op, &vals)? {
                        Some(x) => b.append_value(x),
                        None => b.append_null(),
                    },
                    None => b.append_null(),
                }
            }
            Arc::new(b.finish())
        } else {
            let mut b = StringBuilder::new();
            for row in 0..n {
                match cols.row(op, row)? {
                    Some(vals) => b.append_value(geometry(op, &vals)?.to_wkt()),
                    None => b.append_null(),
                }
            }
            Arc::new(b.finish())
        };
        Ok(out)
    }
}

/// One argument's values: a constant geometry is parsed (and put in the
/// `geo` crate's form) once.
enum Column<'a> {
    ConstGeom(Option<(AnyGeom, geo::Geometry<f64>)>),
    Geom(&'a StringArray),
    Num(&'a Float64Array),
    Bool(&'a BooleanArray),
    Text(&'a StringArray),
}

/// A row's arguments: a geometry with its `geo` form when it has one
/// already (a constant's).
enum Val<'a> {
    Geom(Cow<'a, AnyGeom>, Option<&'a geo::Geometry<f64>>),
    Num(f64),
    Bool(bool),
    Text(&'a str),
}

struct Columns<'a>(Vec<Column<'a>>);

impl<'a> Columns<'a> {
    fn new(
        op: Op,
        vals: &[ColumnarValue],
        arrays: &'a [ArrayRef],
        kinds: &[Arg],
    ) -> DfResult<Columns<'a>> {
        let mut out = Vec::with_capacity(arrays.len());
        for ((v, a), k) in vals.iter().zip(arrays).zip(kinds) {
            out.push(match k {
                Arg::Geom => match v {
                    ColumnarValue::Scalar(_) => {
                        let s = a.as_string::<i32>();
                        Column::ConstGeom(if s.is_null(0) {
                            None
                        } else {
                            let g = geom::parse_any(s.value(0)).map_err(|e| err(op, e))?;
                            let geo = g.to_geo();
                            Some((g, geo))
                        })
                    }
                    ColumnarValue::Array(_) => Column::Geom(a.as_string::<i32>()),
                },
                Arg::Text => Column::Text(a.as_string::<i32>()),
                Arg::Num => Column::Num(a.as_primitive::<Float64Type>()),
                Arg::Bool => Column::Bool(a.as_boolean()),
            });
        }
        Ok(Columns(out))
    }

    /// The arguments of `row`; `None` when one is NULL.
    fn row(&self, op: Op, row: usize) -> DfResult<Option<Vec<Val<'_>>>> {
        let mut out = Vec::with_capacity(self.0.len());
        for c in &self.0 {
            // A constant array has one row.
            let r = |a: &dyn Array| if a.len() == 1 { 0 } else { row };
            let v = match c {
                Column::ConstGeom(None) => return Ok(None),
                Column::ConstGeom(Some((g, geo))) => Val::Geom(Cow::Borrowed(g), Some(geo)),
                Column::Geom(a) => {
                    let i = r(*a);
                    if a.is_null(i) {
                        return Ok(None);
                    }
                    let g = geom::parse_any(a.value(i)).map_err(|e| err(op, e))?;
                    Val::Geom(Cow::Owned(g), None)
                }
                Column::Num(a) => {
                    let i = r(*a);
                    if a.is_null(i) {
                        return Ok(None);
                    }
                    Val::Num(a.value(i))
                }
                Column::Bool(a) => {
                    let i = r(*a);
                    if a.is_null(i) {
                        return Ok(None);
                    }
                    Val::Bool(a.value(i))
                }
                Column::Text(a) => {
                    let i = r(*a);
                    if a.is_null(i) {
                        return Ok(None);
                    }
                    Val::Text(a.value(i))
                }
            };
            out.push(v);
        }
        Ok(Some(out))
    }
}

fn geom_at<'v>(op: Op, vals: &'v [Val<'_>], i: usize) -> DfResult<&'v AnyGeom> {
    match vals.get(i) {
        Some(Val::Geom(g, _)) => Ok(g.as_ref()),
        _ => Err(err(op, format!("argument {} must be a geometry", i + 1))),
    }
}

/// Argument `i` in the `geo` crate's form: borrowed where it is in that
/// form already (a constant, a geometry Silt does not store).
fn geo_at<'v>(op: Op, vals: &'v [Val<'_>], i: usize) -> DfResult<Cow<'v, geo::Geometry<f64>>> {
    match vals.get(i) {
        Some(Val::Geom(_, Some(geo))) => Ok(Cow::Borrowed(*geo)),
        Some(Val::Geom(g, None)) => Ok(match g.as_ref() {
            AnyGeom::Other(geo) => Cow::Borrowed(geo),
            silt => Cow::Owned(silt.to_geo()),
        }),
        _ => Err(err(op, format!("argument {} must be a geometry", i + 1))),
    }
}

fn num_at(op: Op, vals: &[Val<'_>], i: usize) -> DfResult<f64> {
    match vals.get(i) {
        Some(Val::Num(x)) => Ok(*x),
        _ => Err(err(op, format!("argument {} must be a number", i + 1))),
    }
}

/// How lengths and areas are measured.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Space {
    Planar,
    Spheroid,
    Sphere,
}

fn space(vals: &[Val<'_>]) -> Space {
    match vals.get(1) {
        Some(Val::Bool(true)) => Space::Spheroid,
        Some(Val::Bool(false)) => Space::Sphere,
        _ => Space::Planar,
    }
}

fn line_length(l: &geo::LineString<f64>, s: Space) -> f64 {
    match s {
        Space::Planar => geo::Euclidean.length(l),
        Space::Spheroid => geo::Geodesic.length(l),
        Space::Sphere => geo::Haversine.length(l),
    }
}

/// The lines of a geometry: its line strings (`rings` false) or its
/// polygons' rings (`rings` true).
fn lines_of(g: &geo::Geometry<f64>, rings: bool, out: &mut Vec<geo::LineString<f64>>) {
    use geo::Geometry as G;
    match g {
        G::Line(l) if !rings => out.push(geo::LineString::from(vec![l.start, l.end])),
        G::LineString(l) if !rings => out.push(l.clone()),
        G::MultiLineString(m) if !rings => out.extend(m.0.iter().cloned()),
        G::Polygon(p) if rings => {
            out.push(p.exterior().clone());
            out.extend(p.interiors().iter().cloned());
        }
        G::MultiPolygon(m) if rings => {
            for p in &m.0 {
                lines_of(&G::Polygon(p.clone()), rings, out);
            }
        }
        G::Rect(r) if rings => out.push(r.to_polygon().exterior().clone()),
        G::Triangle(t) if rings => out.push(t.to_polygon().exterior().clone()),
        G::GeometryCollection(c) => {
            for g in &c.0 {
                lines_of(g, rings, out);
            }
        }
        _ => {}
    }
}

fn area(g: &geo::Geometry<f64>, s: Space) -> f64 {
    match s {
        Space::Planar => g.unsigned_area(),
        Space::Spheroid => g.geodesic_area_unsigned(),
        // The `geo` crate's sphere has the equatorial radius; PostGIS's (and
        // Silt's distances) the mean radius. Areas scale with its square.
        Space::Sphere => {
            let k = MEAN_R / WGS84_A;
            g.chamberlain_duquette_unsigned_area() * k * k
        }
    }
}

fn number(op: Op, vals: &[Val<'_>]) -> DfResult<Option<f64>> {
    Ok(match op {
        Op::Area => Some(area(geo_at(op, vals, 0)?.as_ref(), space(vals))),
        Op::Length | Op::Perimeter => {
            let mut lines = Vec::new();
            lines_of(
                geo_at(op, vals, 0)?.as_ref(),
                op == Op::Perimeter,
                &mut lines,
            );
            let s = space(vals);
            Some(lines.iter().map(|l| line_length(l, s)).sum())
        }
        Op::DistanceSphere => geom::distance_any_m(geom_at(op, vals, 0)?, geom_at(op, vals, 1)?),
        _ => return Err(err(op, "not a measurement")),
    })
}

/// A multi-polygon as the simplest geometry that holds it (PostGIS gives
/// a polygon when there is one).
pub(crate) fn simplest(mp: geo::MultiPolygon<f64>) -> geo::Geometry<f64> {
    match mp.0.len() {
        1 => mp.0.into_iter().next().map_or_else(
            || geo::Geometry::MultiPolygon(geo::MultiPolygon::new(vec![])),
            geo::Geometry::Polygon,
        ),
        _ => geo::Geometry::MultiPolygon(mp),
    }
}

/// A polygonal geometry as a multi-polygon.
pub(crate) fn polygonal(g: &geo::Geometry<f64>) -> Option<geo::MultiPolygon<f64>> {
    use geo::Geometry as G;
    // Empty polygons (and empty holes) are left out: the overlay code
    // takes every ring to have a point.
    let kept = |p: &geo::Polygon<f64>| {
        (!p.exterior().0.is_empty()).then(|| {
            geo::Polygon::new(
                p.exterior().clone(),
                p.interiors()
                    .iter()
                    .filter(|h| !h.0.is_empty())
                    .cloned()
                    .collect(),
            )
        })
    };
    match g {
        G::Polygon(p) => Some(geo::MultiPolygon::new(kept(p).into_iter().collect())),
        G::MultiPolygon(m) => Some(geo::MultiPolygon::new(
            m.0.iter().filter_map(kept).collect(),
        )),
        G::Rect(r) => Some(geo::MultiPolygon::new(vec![r.to_polygon()])),
        G::Triangle(t) => Some(geo::MultiPolygon::new(vec![t.to_polygon()])),
        _ => None,
    }
}

/// A puntal geometry as points.
pub(crate) fn puntal(g: &geo::Geometry<f64>) -> Option<Vec<geo::Point<f64>>> {
    match g {
        geo::Geometry::Point(p) => Some(vec![*p]),
        geo::Geometry::MultiPoint(m) => Some(m.0.clone()),
        _ => None,
    }
}

/// A lineal geometry as line strings.
fn lineal(g: &geo::Geometry<f64>) -> Option<geo::MultiLineString<f64>> {
    let mut out = Vec::new();
    match g {
        geo::Geometry::Line(_)
        | geo::Geometry::LineString(_)
        | geo::Geometry::MultiLineString(_) => {
            lines_of(g, false, &mut out);
            Some(geo::MultiLineString::new(out))
        }
        _ => None,
    }
}

pub(crate) fn points_geometry(mut pts: Vec<geo::Point<f64>>) -> geo::Geometry<f64> {
    pts.sort_by(|a, b| a.x().total_cmp(&b.x()).then(a.y().total_cmp(&b.y())));
    pts.dedup();
    match pts.len() {
        1 => geo::Geometry::Point(pts[0]),
        _ => geo::Geometry::MultiPoint(geo::MultiPoint::new(pts)),
    }
}

fn lines_geometry(m: geo::MultiLineString<f64>) -> geo::Geometry<f64> {
    match m.0.len() {
        1 => m.0.into_iter().next().map_or_else(
            || geo::Geometry::MultiLineString(geo::MultiLineString::new(vec![])),
            geo::Geometry::LineString,
        ),
        _ => geo::Geometry::MultiLineString(m),
    }
}

fn overlay(op: Op, a: &geo::Geometry<f64>, b: &geo::Geometry<f64>) -> DfResult<geo::Geometry<f64>> {
    if let (Some(x), Some(y)) = (polygonal(a), polygonal(b)) {
        let r = match op {
            Op::Union => x.union(&y),
            Op::Intersection => x.intersection(&y),
            Op::Difference => x.difference(&y),
            _ => x.xor(&y),
        };
        return Ok(simplest(r));
    }
    if let (Some(x), Some(y)) = (puntal(a), puntal(b)) {
        let inb = |p: &geo::Point<f64>| y.contains(p);
        let ina = |p: &geo::Point<f64>| x.contains(p);
        let pts: Vec<geo::Point<f64>> = match op {
            Op::Union => x.iter().chain(&y).copied().collect(),
            Op::Intersection => x.iter().filter(|p| inb(p)).copied().collect(),
            Op::Difference => x.iter().filter(|p| !inb(p)).copied().collect(),
            _ => x
                .iter()
                .filter(|p| !inb(p))
                .chain(y.iter().filter(|p| !ina(p)))
                .copied()
                .collect(),
        };
        return Ok(if pts.is_empty() {
            geo::Geometry::MultiPoint(geo::MultiPoint::new(vec![]))
        } else {
            points_geometry(pts)
        });
    }
    // Lines against polygons: the parts of the lines inside (or outside).
    if let (Some(lines), Some(poly), Op::Intersection | Op::Difference) =
        (lineal(a), polygonal(b), op)
    {
        return Ok(lines_geometry(poly.clip(&lines, op == Op::Difference)));
    }
    if let (Some(poly), Some(lines), Op::Intersection) = (polygonal(a), lineal(b), op) {
        return Ok(lines_geometry(poly.clip(&lines, false)));
    }
    // Points against anything: the points that meet it (or not).
    if let (Some(pts), Op::Intersection | Op::Difference) = (puntal(a), op) {
        let keep: Vec<geo::Point<f64>> = pts
            .into_iter()
            .filter(|p| p.intersects(b) == (op == Op::Intersection))
            .collect();
        return Ok(if keep.is_empty() {
            geo::Geometry::MultiPoint(geo::MultiPoint::new(vec![]))
        } else {
            points_geometry(keep)
        });
    }
    Err(err(
        op,
        format!(
            "a {} and a {} are not supported; give two polygonal geometries, two sets of points, lines and a polygon (intersection, difference) or points and any geometry (intersection, difference)",
            AnyGeom::Other(a.clone()).kind(),
            AnyGeom::Other(b.clone()).kind()
        ),
    ))
}

fn collect(a: geo::Geometry<f64>, b: geo::Geometry<f64>) -> geo::Geometry<f64> {
    use geo::Geometry as G;
    match (a, b) {
        (G::Point(x), G::Point(y)) => G::MultiPoint(geo::MultiPoint::new(vec![x, y])),
        (G::LineString(x), G::LineString(y)) => {
            G::MultiLineString(geo::MultiLineString::new(vec![x, y]))
        }
        (G::Polygon(x), G::Polygon(y)) => G::MultiPolygon(geo::MultiPolygon::new(vec![x, y])),
        (x, y) => G::GeometryCollection(geo::GeometryCollection::new_from(vec![x, y])),
    }
}

/// `ST_Buffer`'s third argument: `quad_segs=N endcap=round|flat|square
/// join=round|mitre|bevel mitre_limit=X`, separated by spaces.
fn buffer_style(
    op: Op,
    radius: f64,
    params: Option<&str>,
) -> DfResult<geo::algorithm::buffer::BufferStyle<f64>> {
    use geo::algorithm::buffer::{BufferStyle, LineCap, LineJoin};
    let mut quad_segs = 8.0_f64;
    let mut cap = "round".to_owned();
    let mut join = "round".to_owned();
    let mut mitre_limit = 5.0_f64;
    for p in params.unwrap_or("").split_whitespace() {
        let (k, v) = p
            .split_once('=')
            .ok_or_else(|| err(op, format!("parameter `{p}` is not key=value")))?;
        let v = v.to_ascii_lowercase();
        let number = |v: &str| -> DfResult<f64> {
            v.parse::<f64>()
                .ok()
                .filter(|x| x.is_finite() && *x > 0.0)
                .ok_or_else(|| err(op, format!("`{k}` must be a positive number, got `{v}`")))
        };
        match k.to_ascii_lowercase().as_str() {
            "quad_segs" => quad_segs = number(&v)?.min(1024.0),
            "endcap" => cap = v,
            "join" => join = v,
            "mitre_limit" | "miter_limit" => mitre_limit = number(&v)?,
            other => {
                return Err(err(
                    op,
                    format!("unknown parameter `{other}` (quad_segs, endcap, join, mitre_limit)"),
                ));
            }
        }
    }
    let angle = std::f64::consts::FRAC_PI_2 / quad_segs.round().max(1.0);
    let cap = match cap.as_str() {
        "round" => LineCap::Round(angle),
        "flat" | "butt" => LineCap::Butt,
        "square" => LineCap::Square,
        other => {
            return Err(err(
                op,
                format!("endcap `{other}` is not round, flat or square"),
            ));
        }
    };
    let join = match join.as_str() {
        "round" => LineJoin::Round(angle),
        "mitre" | "miter" => LineJoin::Miter(mitre_limit),
        "bevel" => LineJoin::Bevel,
        other => {
            return Err(err(
                op,
                format!("join `{other}` is not round, mitre or bevel"),
            ));
        }
    };
    Ok(BufferStyle::new(radius).line_cap(cap).line_join(join))
}

/// The mean earth radius of PostGIS's sphere (and of Silt's distances).
const MEAN_R: f64 = 6_371_008.8;

/// WGS 84's equatorial radius: the `geo` crate's sphere for areas, and
/// web Mercator's (EPSG:3857).
const WGS84_A: f64 = 6_378_137.0;
const MERCATOR_R: f64 = WGS84_A;
/// Web Mercator's latitude limit.
const MERCATOR_MAX_LAT: f64 = 85.051_128_779_806_59;

fn transform(op: Op, g: &geo::Geometry<f64>, from: i64, to: i64) -> DfResult<geo::Geometry<f64>> {
    let known = |s: i64| s == 4326 || s == 3857;
    for s in [from, to] {
        if !known(s) {
            return Err(err(
                op,
                format!(
                    "SRID {s} is not known; Silt transforms between 4326 (longitude/latitude) and 3857 (web Mercator)"
                ),
            ));
        }
    }
    if from == to {
        return Ok(g.clone());
    }
    if from == 4326 {
        if let Some(c) = g
            .coords_iter()
            .find(|c| c.y.abs() > MERCATOR_MAX_LAT || c.x.abs() > 180.0)
        {
            return Err(err(
                op,
                format!(
                    "({}, {}) is outside web Mercator's range (longitude within ±180, latitude within ±{MERCATOR_MAX_LAT:.4})",
                    c.x, c.y
                ),
            ));
        }
        Ok(g.map_coords(|c| {
            geo::coord! {
                x: MERCATOR_R * c.x.to_radians(),
                y: MERCATOR_R * (std::f64::consts::FRAC_PI_4 + c.y.to_radians() / 2.0).tan().ln(),
            }
        }))
    } else {
        Ok(g.map_coords(|c| geo::coord! {
            x: (c.x / MERCATOR_R).to_degrees(),
            y: (2.0 * (c.y / MERCATOR_R).exp().atan() - std::f64::consts::FRAC_PI_2).to_degrees(),
        }))
    }
}

/// The point of `a` closest to `b` (planar): exact against a point; against
/// another geometry the best of `a`'s points closest to `b`'s vertices,
/// `a`'s own vertices, and where the two cross, a crossing point.
fn closest_point(a: &geo::Geometry<f64>, b: &geo::Geometry<f64>) -> Option<geo::Point<f64>> {
    use geo::{Distance, Euclidean};
    let on_a = |p: geo::Point<f64>| match a.closest_point(&p) {
        geo::Closest::Intersection(q) | geo::Closest::SinglePoint(q) => Some(q),
        geo::Closest::Indeterminate => None,
    };
    if let geo::Geometry::Point(p) = b {
        return on_a(*p);
    }
    if a.intersects(b) {
        let (sa, sb) = (segments(a), segments(b));
        for &la in &sa {
            for &lb in &sb {
                if let Some(x) = geo::algorithm::line_intersection::line_intersection(la, lb) {
                    let c = match x {
                        geo::LineIntersection::SinglePoint { intersection, .. } => intersection,
                        geo::LineIntersection::Collinear { intersection } => intersection.start,
                    };
                    return Some(c.into());
                }
            }
        }
        // No edges cross: one lies inside the other.
        if let Some(c) = a.coords_iter().find(|c| b.intersects(c)) {
            return Some(c.into());
        }
    }
    let mut best: Option<(f64, geo::Point<f64>)> = None;
    let mut offer = |p: geo::Point<f64>| {
        let d = Euclidean.distance(&p, b);
        if best.is_none_or(|(bd, _)| d < bd) {
            best = Some((d, p));
        }
    };
    for c in b.coords_iter() {
        if let Some(p) = on_a(c.into()) {
            offer(p);
        }
    }
    for c in a.coords_iter() {
        offer(c.into());
    }
    best.map(|(_, p)| p)
}

/// A box as a polygon from its lower left corner, counter-clockwise (the
/// ring `ST_MakeEnvelope` gives).
pub(crate) fn box_polygon(r: geo::Rect<f64>) -> geo::Polygon<f64> {
    let (lo, hi) = (r.min(), r.max());
    geo::Polygon::new(
        geo::LineString::from(vec![
            (lo.x, lo.y),
            (hi.x, lo.y),
            (hi.x, hi.y),
            (lo.x, hi.y),
            (lo.x, lo.y),
        ]),
        vec![],
    )
}

/// The segments of a geometry's lines and rings.
fn segments(g: &geo::Geometry<f64>) -> Vec<geo::Line<f64>> {
    let mut lines = Vec::new();
    lines_of(g, false, &mut lines);
    lines_of(g, true, &mut lines);
    lines.iter().flat_map(|l| l.lines()).collect()
}

fn geometry(op: Op, vals: &[Val<'_>]) -> DfResult<AnyGeom> {
    let a = geo_at(op, vals, 0)?;
    let g = match op {
        Op::Buffer => {
            let r = num_at(op, vals, 1)?;
            if !r.is_finite() {
                return Err(err(op, format!("radius {r} is not a finite number")));
            }
            let params = match vals.get(2) {
                Some(Val::Text(t)) => Some(*t),
                _ => None,
            };
            let style = buffer_style(op, r, params)?;
            let out = if a.bounding_rect().is_none() {
                geo::MultiPolygon::new(vec![])
            } else {
                match polygonal(&a) {
                    Some(mp) => mp.buffer_with_style(style),
                    None => a.buffer_with_style(style),
                }
            };
            if out.0.is_empty() {
                geo::Geometry::Polygon(geo::Polygon::new(geo::LineString::new(vec![]), vec![]))
            } else {
                simplest(out)
            }
        }
        Op::Union | Op::Intersection | Op::Difference | Op::SymDifference => {
            overlay(op, &a, geo_at(op, vals, 1)?.as_ref())?
        }
        Op::Collect => collect(a.into_owned(), geo_at(op, vals, 1)?.into_owned()),
        Op::MakeValid => match polygonal(&a) {
            Some(mp) => simplest(mp.make_valid().map_err(|e| err(op, format!("{e:?}")))?),
            None => a.into_owned(),
        },
        Op::ClosestPoint => {
            let b = geo_at(op, vals, 1)?;
            match closest_point(&a, &b) {
                Some(p) => geo::Geometry::Point(p),
                None => return Err(err(op, "an empty geometry has no closest point")),
            }
        }
        Op::Envelope => match a.bounding_rect() {
            None => a.into_owned(),
            Some(r) => {
                let (lo, hi) = (r.min(), r.max());
                // PostGIS: a point's envelope is the point, a vertical or
                // horizontal line's a line.
                if lo == hi {
                    geo::Geometry::Point(lo.into())
                } else if lo.x == hi.x || lo.y == hi.y {
                    geo::Geometry::LineString(geo::LineString::from(vec![lo, hi]))
                } else {
                    geo::Geometry::Polygon(box_polygon(r))
                }
            }
        },
        Op::Transform => {
            let srid = |i: usize| -> DfResult<i64> {
                let x = num_at(op, vals, i)?;
                if x.fract() != 0.0 || !x.is_finite() {
                    return Err(err(op, format!("SRID {x} is not an integer")));
                }
                Ok(x as i64)
            };
            let (from, to) = if vals.len() == 3 {
                (srid(1)?, srid(2)?)
            } else {
                (4326, srid(1)?)
            };
            transform(op, &a, from, to)?
        }
        _ => return Err(err(op, "not a geometry function")),
    };
    // A result with no extent keeps its `geo` form (`POLYGON EMPTY`).
    if g.bounding_rect().is_none() {
        return Ok(AnyGeom::Other(g));
    }
    Ok(AnyGeom::from_geo(g))
}
