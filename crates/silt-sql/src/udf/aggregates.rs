//! PostGIS's spatial aggregates: `ST_Union(geom)` (the union of a group's
//! polygons, or of its points), `ST_Collect(geom)` (a multi-geometry or a
//! collection of the group's geometries) and `ST_Extent(geom)` (the group's
//! bounding box, as a polygon: Silt's geometries are WKT, where PostGIS
//! gives a `box2d`). NULLs are skipped; a group of none gives NULL.
//!
//! `ST_Union` and `ST_Collect` also have two-argument scalar forms (see
//! [`super::processing`]). DataFusion resolves a name to a scalar function
//! before an aggregate, so one-argument calls are renamed to
//! `st_union_agg` / `st_collect_agg` before planning ([`rename_calls`]);
//! the output column keeps PostgreSQL's name.

use std::ops::ControlFlow;
use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, AsArray, StringArray};
use datafusion::arrow::datatypes::{DataType, Field, FieldRef};
use datafusion::common::ScalarValue;
use datafusion::common::utils::SingleRowListArrayBuilder;
use datafusion::error::{DataFusionError, Result as DfResult};
use datafusion::logical_expr::function::{AccumulatorArgs, StateFieldsArgs};
use datafusion::logical_expr::{
    Accumulator, AggregateUDF, AggregateUDFImpl, Signature, Volatility,
};
use datafusion::sql::sqlparser::ast::{
    Expr, FunctionArguments, Ident, ObjectNamePart, VisitMut, VisitorMut,
};
use geo::{BoundingRect, CoordsIter, Orient};

use super::processing::{box_polygon, points_geometry, polygonal, puntal, simplest};
use crate::geom::{self, AnyGeom};

/// What an aggregate makes of its group.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    Union,
    Collect,
    Extent,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Union => "st_union_agg",
            Kind::Collect => "st_collect_agg",
            Kind::Extent => "st_extent",
        }
    }

    fn usage(self) -> &'static str {
        match self {
            Kind::Union => "ST_Union(geometry) (aggregate)",
            Kind::Collect => "ST_Collect(geometry) (aggregate)",
            Kind::Extent => "ST_Extent(geometry)",
        }
    }
}

/// The aggregates, ready to register.
pub fn udafs() -> Vec<AggregateUDF> {
    [Kind::Union, Kind::Collect, Kind::Extent]
        .into_iter()
        .map(|kind| {
            AggregateUDF::new_from_impl(GeoAgg {
                kind,
                signature: Signature::user_defined(Volatility::Immutable),
            })
        })
        .collect()
}

#[derive(Debug, PartialEq, Eq, Hash)]
struct GeoAgg {
    kind: Kind,
    signature: Signature,
}

fn err(kind: Kind, msg: impl std::fmt::Display) -> DataFusionError {
    DataFusionError::Execution(format!("{}: {msg}", kind.usage()))
}

impl AggregateUDFImpl for GeoAgg {
    fn name(&self) -> &str {
        self.kind.name()
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn coerce_types(&self, arg_types: &[DataType]) -> DfResult<Vec<DataType>> {
        match arg_types {
            [DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View | DataType::Null] => {
                Ok(vec![DataType::Utf8])
            }
            _ => Err(DataFusionError::Plan(format!(
                "{} takes one geometry (WKT text), got {arg_types:?}",
                self.kind.usage()
            ))),
        }
    }

    fn return_type(&self, _arg_types: &[DataType]) -> DfResult<DataType> {
        Ok(DataType::Utf8)
    }

    fn state_fields(&self, _args: StateFieldsArgs) -> DfResult<Vec<FieldRef>> {
        let item = Arc::new(Field::new_list_field(DataType::Utf8, true));
        Ok(vec![Arc::new(Field::new(
            format!("{}_parts", self.kind.name()),
            DataType::List(item),
            true,
        ))])
    }

    fn accumulator(&self, _args: AccumulatorArgs) -> DfResult<Box<dyn Accumulator>> {
        Ok(Box::new(GeoAcc {
            kind: self.kind,
            parts: Vec::new(),
            extent: None,
            bytes: 0,
        }))
    }
}

/// A group's geometries so far (its extent alone for `ST_Extent`).
#[derive(Debug)]
struct GeoAcc {
    kind: Kind,
    parts: Vec<geo::Geometry<f64>>,
    extent: Option<geo::Rect<f64>>,
    bytes: usize,
}

impl GeoAcc {
    fn add_text(&mut self, text: &str) -> DfResult<()> {
        let g = geom::parse_any(text)
            .map_err(|e| err(self.kind, e))?
            .to_geo();
        if self.kind == Kind::Extent {
            if let Some(r) = g.bounding_rect() {
                self.extent = Some(match self.extent {
                    None => r,
                    Some(e) => geo::Rect::new(
                        geo::coord! { x: e.min().x.min(r.min().x), y: e.min().y.min(r.min().y) },
                        geo::coord! { x: e.max().x.max(r.max().x), y: e.max().y.max(r.max().y) },
                    ),
                });
            }
            return Ok(());
        }
        self.bytes += 16 * g.coords_count() + 64;
        self.parts.push(g);
        Ok(())
    }

    fn add_texts(&mut self, a: &ArrayRef) -> DfResult<()> {
        let s: &StringArray = a
            .as_string_opt::<i32>()
            .ok_or_else(|| err(self.kind, "expected WKT text"))?;
        for v in s.iter().flatten() {
            self.add_text(v)?;
        }
        Ok(())
    }

    /// The group's geometry; `None` for a group without one.
    fn result(&self) -> DfResult<Option<geo::Geometry<f64>>> {
        use geo::Geometry as G;
        let kind = self.kind;
        if kind == Kind::Extent {
            return Ok(self.extent.map(|r| {
                let (lo, hi) = (r.min(), r.max());
                if lo == hi {
                    G::Point(lo.into())
                } else if lo.x == hi.x || lo.y == hi.y {
                    G::LineString(geo::LineString::from(vec![lo, hi]))
                } else {
                    G::Polygon(box_polygon(r))
                }
            }));
        }
        if self.parts.is_empty() {
            return Ok(None);
        }
        Ok(Some(match kind {
            Kind::Collect => {
                let all = |f: fn(&G<f64>) -> bool| self.parts.iter().all(f);
                if all(|g| matches!(g, G::Point(_))) {
                    G::MultiPoint(geo::MultiPoint::new(
                        self.parts
                            .iter()
                            .filter_map(|g| geo::Point::try_from(g.clone()).ok())
                            .collect(),
                    ))
                } else if all(|g| matches!(g, G::LineString(_))) {
                    G::MultiLineString(geo::MultiLineString::new(
                        self.parts
                            .iter()
                            .filter_map(|g| geo::LineString::try_from(g.clone()).ok())
                            .collect(),
                    ))
                } else if all(|g| matches!(g, G::Polygon(_))) {
                    G::MultiPolygon(geo::MultiPolygon::new(
                        self.parts
                            .iter()
                            .filter_map(|g| geo::Polygon::try_from(g.clone()).ok())
                            .collect(),
                    ))
                } else {
                    G::GeometryCollection(geo::GeometryCollection::new_from(self.parts.clone()))
                }
            }
            _ => {
                if let Some(polys) = self
                    .parts
                    .iter()
                    .map(polygonal)
                    .collect::<Option<Vec<geo::MultiPolygon<f64>>>>()
                {
                    // The union's fill rule follows the rings' winding:
                    // every exterior counter-clockwise first.
                    let polys: Vec<geo::Polygon<f64>> = polys
                        .into_iter()
                        .flat_map(|m| m.0)
                        .map(|p| p.orient(geo::orient::Direction::Default))
                        .collect();
                    simplest(geo::unary_union(&polys))
                } else if let Some(pts) = self
                    .parts
                    .iter()
                    .map(puntal)
                    .collect::<Option<Vec<Vec<geo::Point<f64>>>>>()
                {
                    points_geometry(pts.into_iter().flatten().collect())
                } else {
                    return Err(err(
                        kind,
                        "the group mixes kinds or holds lines; ST_Union unites polygons or points (ST_Collect gathers any)",
                    ));
                }
            }
        }))
    }
}

impl Accumulator for GeoAcc {
    fn update_batch(&mut self, values: &[ArrayRef]) -> DfResult<()> {
        match values.first() {
            Some(a) => self.add_texts(a),
            None => Ok(()),
        }
    }

    fn merge_batch(&mut self, states: &[ArrayRef]) -> DfResult<()> {
        let Some(lists) = states.first().and_then(|a| a.as_list_opt::<i32>()) else {
            return Err(err(self.kind, "unexpected partial state"));
        };
        for i in 0..lists.len() {
            if lists.is_valid(i) {
                self.add_texts(&lists.value(i))?;
            }
        }
        Ok(())
    }

    fn state(&mut self) -> DfResult<Vec<ScalarValue>> {
        // The parts as WKT (an extent as its box).
        let texts: Vec<Option<String>> = match self.kind {
            Kind::Extent => vec![self.result()?.map(|g| AnyGeom::Other(g).to_wkt())],
            _ => self
                .parts
                .iter()
                .map(|g| Some(AnyGeom::Other(g.clone()).to_wkt()))
                .collect(),
        };
        let array = StringArray::from(texts);
        Ok(vec![
            SingleRowListArrayBuilder::new(Arc::new(array)).build_list_scalar(),
        ])
    }

    fn evaluate(&mut self) -> DfResult<ScalarValue> {
        let kind = self.kind;
        let run = std::panic::AssertUnwindSafe(|| self.result());
        let g = std::panic::catch_unwind(run)
            .map_err(|_| err(kind, "the geometry library failed on this group"))??;
        Ok(ScalarValue::Utf8(g.map(|g| AnyGeom::from_geo(g).to_wkt())))
    }

    fn size(&self) -> usize {
        std::mem::size_of::<Self>() + self.bytes
    }
}

/// Rename one-argument `ST_Union(g)` / `ST_Collect(g)` calls to the
/// aggregates (see the module doc).
pub fn rename_calls<V: VisitMut>(stmt: &mut V) {
    let _ = stmt.visit(&mut Renamer);
}

struct Renamer;

impl VisitorMut for Renamer {
    type Break = ();

    fn post_visit_expr(&mut self, e: &mut Expr) -> ControlFlow<()> {
        if let Expr::Function(f) = e
            && let FunctionArguments::List(args) = &f.args
            && args.args.len() == 1
            && let [ObjectNamePart::Identifier(id)] = f.name.0.as_mut_slice()
        {
            let to = match id.value.to_ascii_lowercase().as_str() {
                "st_union" => Some("st_union_agg"),
                "st_collect" => Some("st_collect_agg"),
                _ => None,
            };
            if let Some(to) = to {
                *id = Ident::new(to);
            }
        }
        ControlFlow::Continue(())
    }
}
