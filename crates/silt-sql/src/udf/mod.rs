//! Scalar functions: PostGIS-named `ST_*` functions over WKT text and
//! `ft_contains` for keyword search.
//!
//! | function | result |
//! |----------|--------|
//! | `ST_Point(x, y)` | WKT point |
//! | `ST_MakeEnvelope(xmin, ymin, xmax, ymax [, srid])` | WKT box polygon (srid ignored) |
//! | `ST_GeomFromText(wkt [, srid])` | validated WKT (srid ignored) |
//! | `ST_GeomFromGeoJSON(json)` | WKT |
//! | `ST_AsText(g)` | WKT |
//! | `ST_AsGeoJSON(g)` | GeoJSON text |
//! | `ST_Intersects(a, b)`, `ST_Contains(a, b)`, `ST_Within(a, b)` | boolean |
//! | `ST_DWithin(a, b, metres)` | boolean, great-circle metres |
//! | `ST_Distance(a, b)` | great-circle metres |
//! | `ST_X(p)`, `ST_Y(p)` | coordinate of a point |
//! | `ft_contains(text, words)` | every word of `words` is a word of `text` |
//!
//! NULL in, NULL out. Malformed geometry is an execution error naming the
//! function and the problem.

use std::any::Any;
use std::collections::HashSet;
use std::sync::Arc;

use datafusion::arrow::array::{
    Array, ArrayRef, AsArray, BooleanBuilder, Float64Builder, StringArray, StringBuilder,
};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType, Float64Type};
use datafusion::common::ScalarValue;
use datafusion::error::{DataFusionError, Result as DfResult};
use datafusion::logical_expr::{
    ColumnarValue, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Volatility,
};
use silt::{Geometry, Value};

use crate::geom::{self, AnyGeom};

pub mod adapted;
pub mod aggregates;
pub mod processing;

/// What a function computes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Func {
    Point,
    MakeEnvelope,
    GeomFromText,
    GeomFromGeoJson,
    AsText,
    AsGeoJson,
    Intersects,
    Contains,
    Within,
    DWithin,
    Distance,
    X,
    Y,
    FtContains,
}

impl Func {
    pub const ALL: [Func; 14] = [
        Func::Point,
        Func::MakeEnvelope,
        Func::GeomFromText,
        Func::GeomFromGeoJson,
        Func::AsText,
        Func::AsGeoJson,
        Func::Intersects,
        Func::Contains,
        Func::Within,
        Func::DWithin,
        Func::Distance,
        Func::X,
        Func::Y,
        Func::FtContains,
    ];

    /// The SQL name (lower case; SQL names are case-insensitive).
    pub fn name(self) -> &'static str {
        match self {
            Func::Point => "st_point",
            Func::MakeEnvelope => "st_makeenvelope",
            Func::GeomFromText => "st_geomfromtext",
            Func::GeomFromGeoJson => "st_geomfromgeojson",
            Func::AsText => "st_astext",
            Func::AsGeoJson => "st_asgeojson",
            Func::Intersects => "st_intersects",
            Func::Contains => "st_contains",
            Func::Within => "st_within",
            Func::DWithin => "st_dwithin",
            Func::Distance => "st_distance",
            Func::X => "st_x",
            Func::Y => "st_y",
            Func::FtContains => "ft_contains",
        }
    }

    pub fn from_name(name: &str) -> Option<Func> {
        Func::ALL.into_iter().find(|f| f.name() == name)
    }

    /// Argument kinds: `G` geometry (text), `N` number, `T` text; optional
    /// trailing arguments after `|`.
    fn arity(self) -> (&'static [DataType], &'static [DataType]) {
        const F: DataType = DataType::Float64;
        const S: DataType = DataType::Utf8;
        match self {
            Func::Point => (&[F, F], &[]),
            Func::MakeEnvelope => (&[F, F, F, F], &[F]),
            Func::GeomFromText => (&[S], &[F]),
            Func::GeomFromGeoJson | Func::AsText | Func::AsGeoJson | Func::X | Func::Y => {
                (&[S], &[])
            }
            Func::Intersects | Func::Contains | Func::Within | Func::Distance => (&[S, S], &[]),
            Func::DWithin => (&[S, S, F], &[]),
            Func::FtContains => (&[S, S], &[]),
        }
    }

    /// The type argument `i` takes (a `$n` placeholder there gets it).
    pub fn arg_type(self, i: usize) -> Option<DataType> {
        let (required, optional) = self.arity();
        required.iter().chain(optional).nth(i).cloned()
    }

    fn return_type(self) -> DataType {
        match self {
            Func::Point
            | Func::MakeEnvelope
            | Func::GeomFromText
            | Func::GeomFromGeoJson
            | Func::AsText
            | Func::AsGeoJson => DataType::Utf8,
            Func::Intersects | Func::Contains | Func::Within | Func::DWithin | Func::FtContains => {
                DataType::Boolean
            }
            Func::Distance | Func::X | Func::Y => DataType::Float64,
        }
    }

    fn usage(self) -> &'static str {
        match self {
            Func::Point => "ST_Point(x, y)",
            Func::MakeEnvelope => "ST_MakeEnvelope(xmin, ymin, xmax, ymax [, srid])",
            Func::GeomFromText => "ST_GeomFromText(wkt [, srid])",
            Func::GeomFromGeoJson => "ST_GeomFromGeoJSON(json)",
            Func::AsText => "ST_AsText(geometry)",
            Func::AsGeoJson => "ST_AsGeoJSON(geometry)",
            Func::Intersects => "ST_Intersects(a, b)",
            Func::Contains => "ST_Contains(a, b)",
            Func::Within => "ST_Within(a, b)",
            Func::DWithin => "ST_DWithin(a, b, metres)",
            Func::Distance => "ST_Distance(a, b)",
            Func::X => "ST_X(point)",
            Func::Y => "ST_Y(point)",
            Func::FtContains => "ft_contains(text, 'words')",
        }
    }
}

/// A scalar UDF for one [`Func`].
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct SiltFn {
    func: Func,
    signature: Signature,
}

impl SiltFn {
    pub fn new(func: Func) -> SiltFn {
        SiltFn {
            func,
            signature: Signature::user_defined(Volatility::Immutable),
        }
    }

    pub fn func(&self) -> Func {
        self.func
    }
}

/// Every function of this module, ready to register.
pub fn all_udfs() -> Vec<ScalarUDF> {
    Func::ALL
        .into_iter()
        .map(|f| ScalarUDF::new_from_impl(SiltFn::new(f)))
        .chain(processing::udfs())
        .chain(adapted::udfs())
        .collect()
}

/// Which [`Func`] a UDF is, if it is one of ours.
pub fn func_of(udf: &ScalarUDF) -> Option<Func> {
    let inner: &dyn Any = udf.inner().as_ref();
    inner.downcast_ref::<SiltFn>().map(|f| f.func)
}

/// The types of the `$n` placeholders of `plan`, as DataFusion infers them
/// (from comparisons, inserts, casts) and, where it cannot, from the
/// argument of a Silt function they stand for: `ST_MakeEnvelope($1, ...)`
/// takes numbers, `ST_Intersects(loc, $1)` a geometry (WKT text). A
/// placeholder neither tells stays `None`.
pub fn placeholder_types(
    plan: &datafusion::logical_expr::LogicalPlan,
) -> datafusion::error::Result<std::collections::HashMap<String, Option<DataType>>> {
    use datafusion::common::tree_node::{TreeNode, TreeNodeRecursion};
    use datafusion::logical_expr::Expr;
    let mut types = plan.get_parameter_types()?;
    if types.values().all(Option::is_some) {
        return Ok(types);
    }
    plan.apply_with_subqueries(|node| {
        node.apply_expressions(|e| {
            e.apply(|e| {
                if let Expr::ScalarFunction(sf) = e
                    && let Some(f) = func_of(&sf.func)
                {
                    for (i, a) in sf.args.iter().enumerate() {
                        let Expr::Placeholder(p) = a else { continue };
                        if let (Some(slot @ None), Some(t)) = (types.get_mut(&p.id), f.arg_type(i))
                        {
                            *slot = Some(t);
                        }
                    }
                }
                Ok(TreeNodeRecursion::Continue)
            })
        })
    })?;
    Ok(types)
}

/// A planning error unless `got` arguments fit `required` plus up to
/// `optional` more.
pub(crate) fn check_arity(
    usage: &str,
    required: usize,
    optional: usize,
    got: usize,
) -> DfResult<()> {
    if got >= required && got <= required + optional {
        return Ok(());
    }
    Err(DataFusionError::Plan(format!(
        "{usage} takes {} argument(s), got {got}",
        if optional == 0 {
            required.to_string()
        } else {
            format!("{required} to {}", required + optional)
        },
    )))
}

fn is_number(t: &DataType) -> bool {
    t.is_numeric() || matches!(t, DataType::Null)
}

fn is_text(t: &DataType) -> bool {
    matches!(
        t,
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View | DataType::Null
    )
}

fn exec_err(f: Func, msg: impl std::fmt::Display) -> DataFusionError {
    DataFusionError::Execution(format!("{}: {msg}", f.usage()))
}

impl ScalarUDFImpl for SiltFn {
    fn name(&self) -> &str {
        self.func.name()
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _arg_types: &[DataType]) -> DfResult<DataType> {
        Ok(self.func.return_type())
    }

    fn coerce_types(&self, arg_types: &[DataType]) -> DfResult<Vec<DataType>> {
        let (req, opt) = self.func.arity();
        check_arity(self.func.usage(), req.len(), opt.len(), arg_types.len())?;
        let mut out = Vec::with_capacity(arg_types.len());
        for (i, (got, want)) in arg_types.iter().zip(req.iter().chain(opt)).enumerate() {
            let ok = match want {
                DataType::Float64 => is_number(got),
                _ => is_text(got),
            };
            if !ok {
                return Err(DataFusionError::Plan(format!(
                    "{}: argument {} must be {}, got {got}",
                    self.func.usage(),
                    i + 1,
                    if *want == DataType::Float64 {
                        "a number"
                    } else {
                        "text (WKT geometry or a string)"
                    }
                )));
            }
            out.push(want.clone());
        }
        Ok(out)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        crate::bounds::check(&args.config_options)?;
        let n = args.number_rows;
        let (req, opt) = self.func.arity();
        if args.args.len() < req.len() || args.args.len() > req.len() + opt.len() {
            return Err(exec_err(
                self.func,
                format!("wrong number of arguments ({})", args.args.len()),
            ));
        }
        // Arguments arrive coerced (`coerce_types`); cast anyway so that a
        // direct call with other types cannot trip the typed accessors.
        let arrays = ColumnarValue::values_to_arrays(&args.args)?
            .into_iter()
            .zip(req.iter().chain(opt))
            .map(|(a, t)| {
                if a.data_type() == t {
                    Ok(a)
                } else {
                    cast(&a, t)
                }
            })
            .collect::<Result<Vec<ArrayRef>, _>>()?;
        // Constant arguments (a bound parameter the optimizer did not
        // fold) arrive as one-row arrays: one value, for every row.
        if args
            .args
            .iter()
            .all(|a| matches!(a, ColumnarValue::Scalar(_)))
        {
            let out = eval(self.func, &args.args, &arrays, 1)?;
            return Ok(ColumnarValue::Scalar(ScalarValue::try_from_array(&out, 0)?));
        }
        let out = eval(self.func, &args.args, &arrays, n)?;
        Ok(ColumnarValue::Array(out))
    }
}

/// A geometry argument: parsed once when it is a constant.
enum GeomArg<'a> {
    Const(Option<AnyGeom>),
    Column(&'a StringArray),
}

impl<'a> GeomArg<'a> {
    fn new(f: Func, v: &ColumnarValue, a: &'a ArrayRef) -> DfResult<GeomArg<'a>> {
        match v {
            ColumnarValue::Scalar(s) => Ok(GeomArg::Const(match scalar_text(s) {
                Some(t) => Some(geom::parse_any(&t).map_err(|e| exec_err(f, e))?),
                None => None,
            })),
            ColumnarValue::Array(_) => a
                .as_string_opt::<i32>()
                .map(GeomArg::Column)
                .ok_or_else(|| exec_err(f, "expected a text (WKT) argument")),
        }
    }

    fn get(&self, f: Func, row: usize) -> DfResult<Option<std::borrow::Cow<'_, AnyGeom>>> {
        match self {
            GeomArg::Const(g) => Ok(g.as_ref().map(std::borrow::Cow::Borrowed)),
            GeomArg::Column(a) => {
                if a.is_null(row) {
                    return Ok(None);
                }
                geom::parse_any(a.value(row))
                    .map(|g| Some(std::borrow::Cow::Owned(g)))
                    .map_err(|e| exec_err(f, e))
            }
        }
    }
}

fn scalar_text(s: &ScalarValue) -> Option<String> {
    match s {
        ScalarValue::Utf8(Some(t))
        | ScalarValue::LargeUtf8(Some(t))
        | ScalarValue::Utf8View(Some(t)) => Some(t.clone()),
        _ => None,
    }
}

fn num(a: &ArrayRef, row: usize) -> Option<f64> {
    let a = a.as_primitive::<Float64Type>();
    if a.is_null(row) {
        None
    } else {
        Some(a.value(row))
    }
}

fn text(a: &ArrayRef, row: usize) -> Option<&str> {
    let a = a.as_string::<i32>();
    if a.is_null(row) {
        None
    } else {
        Some(a.value(row))
    }
}

fn eval(f: Func, vals: &[ColumnarValue], arrays: &[ArrayRef], n: usize) -> DfResult<ArrayRef> {
    match f {
        Func::Point | Func::MakeEnvelope => {
            let mut b = StringBuilder::new();
            for row in 0..n {
                let nums: Option<Vec<f64>> = arrays
                    .iter()
                    .take(if f == Func::Point { 2 } else { 4 })
                    .map(|a| num(a, row))
                    .collect();
                let Some(c) = nums else {
                    b.append_null();
                    continue;
                };
                let g = if f == Func::Point {
                    Geometry::point(c[0], c[1])
                } else {
                    Geometry::rect(c[0], c[1], c[2], c[3])
                };
                if f == Func::MakeEnvelope && c[0] > c[2] {
                    b.append_value(antimeridian_box(&c).map_err(|e| exec_err(f, e))?);
                    continue;
                }
                g.validate().map_err(|e| exec_err(f, e))?;
                b.append_value(g.to_wkt());
            }
            Ok(Arc::new(b.finish()))
        }
        Func::GeomFromText | Func::AsText => {
            let g = GeomArg::new(f, &vals[0], &arrays[0])?;
            let mut b = StringBuilder::new();
            for row in 0..n {
                match g.get(f, row)? {
                    Some(g) => b.append_value(g.to_wkt()),
                    None => b.append_null(),
                }
            }
            Ok(Arc::new(b.finish()))
        }
        Func::GeomFromGeoJson => {
            let mut b = StringBuilder::new();
            for row in 0..n {
                let Some(t) = text(&arrays[0], row) else {
                    b.append_null();
                    continue;
                };
                match geom::from_geojson(t).map_err(|e| exec_err(f, e))? {
                    Some(g) => b.append_value(g.to_wkt()),
                    None => b.append_null(),
                }
            }
            Ok(Arc::new(b.finish()))
        }
        Func::AsGeoJson => {
            let g = GeomArg::new(f, &vals[0], &arrays[0])?;
            let mut b = StringBuilder::new();
            for row in 0..n {
                match g.get(f, row)?.as_deref() {
                    Some(AnyGeom::Silt(g)) => b.append_value(
                        silt::value::to_json(&Value::Geometry(g.clone())).to_string(),
                    ),
                    Some(AnyGeom::Other(g)) => b.append_value(geom::geojson(g).to_string()),
                    None => b.append_null(),
                }
            }
            Ok(Arc::new(b.finish()))
        }
        Func::X | Func::Y => {
            let g = GeomArg::new(f, &vals[0], &arrays[0])?;
            let mut b = Float64Builder::with_capacity(n);
            for row in 0..n {
                match g.get(f, row)?.as_deref() {
                    Some(AnyGeom::Silt(Geometry::Point { x, y })) => {
                        b.append_value(if f == Func::X { *x } else { *y })
                    }
                    Some(other) => {
                        return Err(exec_err(
                            f,
                            format!("the argument must be a point, got a {}", other.kind()),
                        ));
                    }
                    None => b.append_null(),
                }
            }
            Ok(Arc::new(b.finish()))
        }
        Func::Intersects | Func::Contains | Func::Within | Func::DWithin => {
            let a = GeomArg::new(f, &vals[0], &arrays[0])?;
            let c = GeomArg::new(f, &vals[1], &arrays[1])?;
            let mut b = BooleanBuilder::with_capacity(n);
            for row in 0..n {
                let (Some(x), Some(y)) = (a.get(f, row)?, c.get(f, row)?) else {
                    b.append_null();
                    continue;
                };
                let r = match f {
                    Func::Intersects => geom::intersects_any(&x, &y),
                    Func::Contains => geom::contains_any(&x, &y),
                    Func::Within => geom::contains_any(&y, &x),
                    _ => match num(&arrays[2], row) {
                        Some(m) => match (x.as_ref(), y.as_ref()) {
                            (AnyGeom::Silt(x), AnyGeom::Silt(y)) => geom::dwithin(x, y, m),
                            _ => geom::distance_any_m(&x, &y).is_some_and(|d| d <= m),
                        },
                        None => {
                            b.append_null();
                            continue;
                        }
                    },
                };
                b.append_value(r);
            }
            Ok(Arc::new(b.finish()))
        }
        Func::Distance => {
            let a = GeomArg::new(f, &vals[0], &arrays[0])?;
            let c = GeomArg::new(f, &vals[1], &arrays[1])?;
            let mut b = Float64Builder::with_capacity(n);
            for row in 0..n {
                match (a.get(f, row)?, c.get(f, row)?) {
                    (Some(x), Some(y)) => match geom::distance_any_m(&x, &y) {
                        Some(d) => b.append_value(d),
                        None => b.append_null(),
                    },
                    _ => b.append_null(),
                }
            }
            Ok(Arc::new(b.finish()))
        }
        Func::FtContains => {
            let const_words: Option<Option<Vec<String>>> = match &vals[1] {
                ColumnarValue::Scalar(s) => Some(scalar_text(s).map(|t| words(&t))),
                ColumnarValue::Array(_) => None,
            };
            let mut b = BooleanBuilder::with_capacity(n);
            for row in 0..n {
                let ws = match &const_words {
                    Some(w) => w.clone(),
                    None => text(&arrays[1], row).map(words),
                };
                match (text(&arrays[0], row), ws) {
                    (Some(t), Some(ws)) => b.append_value(ft_match(t, &ws)),
                    _ => b.append_null(),
                }
            }
            Ok(Arc::new(b.finish()))
        }
    }
}

/// `ST_MakeEnvelope` with `xmin > xmax`: Silt's box across the antimeridian
/// (as the CLI's `--bbox` and the API's query rectangles mean it), the
/// longitudes from `xmin` east to 180 and from -180 east to `xmax`, given as
/// the multi-polygon of its two halves.
fn antimeridian_box(c: &[f64]) -> Result<String, String> {
    let (x0, y0, x1, y1) = (c[0], c[1], c[2], c[3]);
    if !(-180.0..=180.0).contains(&x0) || !(-180.0..=180.0).contains(&x1) {
        return Err(format!(
            "xmin {x0} is greater than xmax {x1}, which means a box across the antimeridian,              but then both must be longitudes within [-180, 180]; for an ordinary box give xmin <= xmax"
        ));
    }
    let halves: Vec<Geometry> = silt::geo::split_query_rect(&[x0, y0, x1, y1])
        .into_iter()
        .map(|[a, b, c, d]| Geometry::rect(a, b, c, d))
        .collect();
    for h in &halves {
        h.validate().map_err(|e| e.to_string())?;
    }
    let inner: Vec<String> = halves
        .iter()
        .map(|h| h.to_wkt().trim_start_matches("POLYGON").to_owned())
        .collect();
    Ok(format!("MULTIPOLYGON({})", inner.join(",")))
}

/// The words of a text, as the keyword index tokenizes them.
pub fn words(text: &str) -> Vec<String> {
    silt::geo::text::keyword_tokens(text)
}

/// Whether every word is a word of `text` (an empty word list matches nothing).
pub fn ft_match(text: &str, words_wanted: &[String]) -> bool {
    if words_wanted.is_empty() {
        return false;
    }
    let have: HashSet<String> = words(text).into_iter().collect();
    words_wanted.iter().all(|w| have.contains(w))
}
