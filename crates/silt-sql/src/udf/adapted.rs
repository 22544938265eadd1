//! PostGIS-named functions computed by `geodatafusion` (the `geo` crate's
//! algorithms over GeoArrow arrays), each wrapped so that a geometry it
//! returns comes back as WKT text, the one form geometries take in Silt's
//! SQL. They take WKT text as it is (a text column without GeoArrow
//! metadata is WKT to them).
//!
//! The functions Silt defines itself are left out (see [`OWN`]): Silt's
//! predicates, distances in metres, constructors and the functions whose
//! PostGIS forms take a `use_spheroid` argument.

use std::sync::{Arc, LazyLock};

use datafusion::arrow::array::{Array, ArrayRef};
use datafusion::arrow::datatypes::{DataType, Field, FieldRef};
use datafusion::common::ScalarValue;
use datafusion::error::{DataFusionError, Result as DfResult};
use datafusion::logical_expr::{
    ColumnarValue, Documentation, ReturnFieldArgs, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl,
    Signature,
};
use datafusion::prelude::SessionContext;
use geoarrow_schema::GeoArrowType;

/// Names Silt's own functions take (`udf::Func`, `udf::processing`), and
/// functions not offered: `st_dump` returns a list of geometries, which
/// has no WKT form here.
const OWN: &[&str] = &[
    "st_point",
    "st_makeenvelope",
    "st_geomfromtext",
    "st_geomfromgeojson",
    "st_astext",
    "st_asgeojson",
    "st_intersects",
    "st_contains",
    "st_within",
    "st_dwithin",
    "st_distance",
    "st_x",
    "st_y",
    "st_area",
    "st_length",
    "st_perimeter",
    "st_dump",
];

/// Functions whose result is geometry bytes to keep (`ST_AsBinary`).
const BINARY_RESULT: &[&str] = &["st_asbinary"];

static ADAPTED: LazyLock<Vec<ScalarUDF>> = LazyLock::new(|| {
    let ctx = SessionContext::new();
    let before: std::collections::HashSet<String> =
        ctx.state().scalar_functions().keys().cloned().collect();
    geodatafusion::register(&ctx);
    // The registry is keyed by names and aliases: each function once, by
    // its own name (an alias of one of them may be a name of Silt's).
    let mut out: Vec<ScalarUDF> = ctx
        .state()
        .scalar_functions()
        .values()
        .filter(|f| !before.contains(f.name()) && !OWN.contains(&f.name()))
        .map(|f| {
            ScalarUDF::new_from_impl(AsWkt {
                inner: f.as_ref().clone(),
            })
        })
        .collect();
    out.sort_by(|a, b| a.name().cmp(b.name()));
    out.dedup_by(|a, b| a.name() == b.name());
    out
});

/// The adapted functions, ready to register.
pub fn udfs() -> Vec<ScalarUDF> {
    ADAPTED.clone()
}

/// A `geodatafusion` function whose geometry results are given as WKT.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct AsWkt {
    inner: ScalarUDF,
}

impl AsWkt {
    /// How the function is called, for error messages.
    fn usage(&self) -> String {
        match self.inner.documentation() {
            Some(d) => d.syntax_example.clone(),
            None => self.inner.name().to_owned(),
        }
    }

    fn keeps_bytes(&self) -> bool {
        BINARY_RESULT.contains(&self.inner.name())
    }
}

/// The GeoArrow type of a field, if it carries one.
fn geo_type(field: &Field) -> Option<GeoArrowType> {
    GeoArrowType::from_extension_field(field).ok().flatten()
}

fn geo_err(name: &str, e: impl std::fmt::Display) -> DataFusionError {
    DataFusionError::Execution(format!("{name}: {e}"))
}

impl ScalarUDFImpl for AsWkt {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn aliases(&self) -> &[String] {
        self.inner.aliases()
    }

    fn signature(&self) -> &Signature {
        self.inner.signature()
    }

    /// Only asked where the fields are unknown; the geometry results of
    /// `geodatafusion` need the argument fields, so those are WKT here.
    fn return_type(&self, arg_types: &[DataType]) -> DfResult<DataType> {
        match self.inner.return_type(arg_types) {
            Ok(t) => Ok(t),
            Err(_) => Ok(DataType::Utf8),
        }
    }

    fn return_field_from_args(&self, args: ReturnFieldArgs) -> DfResult<FieldRef> {
        let f = self.inner.return_field_from_args(args)?;
        if geo_type(&f).is_none() {
            if matches!(f.data_type(), DataType::Utf8View | DataType::LargeUtf8) {
                return Ok(Arc::new(Field::new(
                    f.name(),
                    DataType::Utf8,
                    f.is_nullable(),
                )));
            }
            return Ok(f);
        }
        let t = if self.keeps_bytes() {
            DataType::Binary
        } else {
            DataType::Utf8
        };
        Ok(Arc::new(Field::new(f.name(), t, true)))
    }

    fn coerce_types(&self, arg_types: &[DataType]) -> DfResult<Vec<DataType>> {
        self.inner.coerce_types(arg_types)
    }

    fn documentation(&self) -> Option<&Documentation> {
        self.inner.documentation()
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        crate::bounds::check(&args.config_options)?;
        let name = self.inner.name().to_owned();
        let scalar = args
            .args
            .iter()
            .all(|a| matches!(a, ColumnarValue::Scalar(_)));
        let out_field = args.return_field.clone();
        // The inner function is asked for its own result field.
        let inner_field = {
            let scalars: Vec<Option<&ScalarValue>> = args
                .args
                .iter()
                .map(|a| match a {
                    ColumnarValue::Scalar(s) => Some(s),
                    ColumnarValue::Array(_) => None,
                })
                .collect();
            self.inner.return_field_from_args(ReturnFieldArgs {
                arg_fields: &args.arg_fields,
                scalar_arguments: &scalars,
            })?
        };
        let inner_args = ScalarFunctionArgs {
            return_field: inner_field.clone(),
            ..args
        };
        // `geodatafusion` unwraps in places (a Z point builder handed an
        // XY point, for one): its panic becomes this statement's error.
        let call = std::panic::AssertUnwindSafe(|| self.inner.invoke_with_args(inner_args));
        let result = std::panic::catch_unwind(call)
            .map_err(|p| {
                let why = p
                    .downcast_ref::<String>()
                    .map(String::as_str)
                    .or_else(|| p.downcast_ref::<&str>().copied())
                    .unwrap_or("no message");
                geo_err(
                    &self.usage(),
                    format!("these arguments are not supported (geodatafusion failed: {why})"),
                )
            })?
            .map_err(|e| match e {
                DataFusionError::External(inner) => geo_err(&self.usage(), inner),
                other => geo_err(&self.usage(), other.strip_backtrace()),
            })?;
        if geo_type(&inner_field).is_none() {
            // Text as the rest of Silt's functions give it.
            return match (&result, out_field.data_type()) {
                (ColumnarValue::Array(a), DataType::Utf8) if a.data_type() != &DataType::Utf8 => {
                    Ok(ColumnarValue::Array(datafusion::arrow::compute::cast(
                        a,
                        &DataType::Utf8,
                    )?))
                }
                (ColumnarValue::Scalar(s), DataType::Utf8) if s.data_type() != DataType::Utf8 => {
                    Ok(ColumnarValue::Scalar(s.cast_to(&DataType::Utf8)?))
                }
                _ => Ok(result),
            };
        }
        let array: ArrayRef = match result {
            ColumnarValue::Array(a) => a,
            ColumnarValue::Scalar(s) => s.to_array()?,
        };
        let convert = std::panic::AssertUnwindSafe(|| {
            to_plain(&name, &array, &inner_field, out_field.data_type())
        });
        let converted = std::panic::catch_unwind(convert).map_err(|_| {
            geo_err(
                &self.usage(),
                "the result has no WKT form here (writing it failed)",
            )
        })??;
        if scalar && converted.len() == 1 {
            return Ok(ColumnarValue::Scalar(ScalarValue::try_from_array(
                &converted, 0,
            )?));
        }
        Ok(ColumnarValue::Array(converted))
    }
}

/// A GeoArrow array as WKT text (`Utf8`) or WKB bytes (`Binary`).
fn to_plain(name: &str, array: &ArrayRef, field: &Field, want: &DataType) -> DfResult<ArrayRef> {
    let geo = geoarrow_array::array::from_arrow_array(array.as_ref(), field)
        .map_err(|e| geo_err(name, e))?;
    match want {
        DataType::Binary => {
            let wkb =
                geoarrow_array::cast::to_wkb::<i32>(geo.as_ref()).map_err(|e| geo_err(name, e))?;
            Ok(geoarrow_array::GeoArrowArray::into_array_ref(wkb))
        }
        _ => {
            let wkt =
                geoarrow_array::cast::to_wkt::<i32>(geo.as_ref()).map_err(|e| geo_err(name, e))?;
            let a = geoarrow_array::GeoArrowArray::into_array_ref(wkt);
            // The WKT array carries GeoArrow metadata on its field only;
            // the values are plain text.
            Ok(datafusion::arrow::compute::cast(&a, &DataType::Utf8)?)
        }
    }
}
