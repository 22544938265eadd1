//! Assigning values to table columns (`INSERT`, `ON CONFLICT DO UPDATE
//! SET`, `UPDATE SET`), with PostgreSQL's assignment rules and errors:
//!
//! | column type | takes |
//! |-------------|-------|
//! | `bigint` | integers; floats and decimals, rounded half away from zero; text that reads as an integer |
//! | `double precision` | numbers; text that reads as a number (`NaN`, `Infinity` too) |
//! | `boolean` | booleans; text `t`, `true`, `y`, `yes`, `on`, `1` and `f`, `false`, `n`, `no`, `off`, `0` |
//! | `text` | text; numbers, booleans, dates and times as their text |
//! | `bytea` | binary; text (its UTF-8 bytes) |
//! | `point`, `rectangle`, `polygon`, `geometry` | text (WKT, checked when the row is written) |
//! | `any` (JSON text) | text; numbers and booleans |
//! | `jsonb` | text that is JSON; numbers and booleans |
//! | `date` | dates, timestamps (their date); text `YYYY-MM-DD` |
//! | `timestamp`, `timestamptz` | timestamps, dates (midnight); ISO text with an optional zone |
//! | `numeric(p,s)` | numbers, rounded half away from zero to `s` digits; text that reads as a number |
//!
//! NULL goes anywhere (the NOT NULL checks come after). A type the column
//! does not take is refused before any row is written: `column "c" is of
//! type bigint but expression is of type boolean` (SQLSTATE 42804). A value
//! that does not convert fails its row: `invalid input syntax for type
//! bigint: "abc"` (22P02), or a number out of `bigint`'s range (22003).

use std::sync::Arc;

use datafusion::arrow::array::builder::NullBufferBuilder;
use datafusion::arrow::array::{
    Array, ArrayRef, AsArray, BooleanArray, Date32Array, Decimal128Builder, Float64Array,
    Int64Array, IntervalMonthDayNanoArray, ListArray, StringArray, StringBuilder,
    TimestampMicrosecondArray, new_null_array,
};
use datafusion::arrow::buffer::OffsetBuffer;
use datafusion::arrow::compute::{CastOptions, cast, cast_with_options};
use datafusion::arrow::datatypes::{
    DataType, Field, FieldRef, Float64Type, IntervalMonthDayNano, TimestampMicrosecondType,
};
use datafusion::arrow::util::display::array_value_to_string;
use datafusion::common::ScalarValue;
use datafusion::datasource::source_as_provider;
use datafusion::error::DataFusionError;
use datafusion::logical_expr::dml::{DmlStatement, WriteOp};
use datafusion::logical_expr::{Expr, ExprSchemable, LogicalPlan, Projection};
use silt::FieldType;

use crate::convert::ColumnInfo;
use crate::error::SqlError;
use crate::table::SiltTable;

/// A column of values converted to a table column's Arrow type, and the
/// first row that could not be converted (null in `array`), with why.
pub struct Coerced {
    pub array: ArrayRef,
    pub error: Option<(usize, SqlError)>,
}

/// The SQL name of a column's declared type, as errors show it.
pub fn column_type_name(col: &ColumnInfo) -> String {
    match col.ty {
        FieldType::Int => "bigint".to_owned(),
        FieldType::Double => "double precision".to_owned(),
        FieldType::String => "text".to_owned(),
        FieldType::Bool => "boolean".to_owned(),
        FieldType::Binary => "bytea".to_owned(),
        FieldType::Json => "jsonb".to_owned(),
        FieldType::Timestamp => "timestamp without time zone".to_owned(),
        FieldType::TimestampTz => "timestamp with time zone".to_owned(),
        FieldType::Decimal { precision, scale } => format!("numeric({precision},{scale})"),
        FieldType::Interval => "interval".to_owned(),
        FieldType::Array(_) => match col.element() {
            Some(e) => format!("{}[]", column_type_name(&e)),
            None => col.ty.to_string(),
        },
        other => other.to_string(),
    }
}

/// The SQL name of an Arrow type (PostgreSQL's spelling where there is one).
pub fn sql_type_name(dt: &DataType) -> String {
    match dt {
        DataType::Null => "unknown".to_owned(),
        DataType::Boolean => "boolean".to_owned(),
        DataType::Int8 | DataType::Int16 | DataType::UInt8 => "smallint".to_owned(),
        DataType::Int32 | DataType::UInt16 => "integer".to_owned(),
        DataType::Int64 | DataType::UInt32 => "bigint".to_owned(),
        DataType::UInt64 | DataType::Decimal32(..) | DataType::Decimal64(..) => {
            "numeric".to_owned()
        }
        DataType::Decimal128(..) | DataType::Decimal256(..) => "numeric".to_owned(),
        DataType::Float16 | DataType::Float32 => "real".to_owned(),
        DataType::Float64 => "double precision".to_owned(),
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => "text".to_owned(),
        DataType::Binary
        | DataType::LargeBinary
        | DataType::BinaryView
        | DataType::FixedSizeBinary(_) => "bytea".to_owned(),
        DataType::Date32 | DataType::Date64 => "date".to_owned(),
        DataType::Time32(_) | DataType::Time64(_) => "time".to_owned(),
        DataType::Timestamp(_, None) => "timestamp".to_owned(),
        DataType::Timestamp(_, Some(_)) => "timestamp with time zone".to_owned(),
        DataType::Interval(_) | DataType::Duration(_) => "interval".to_owned(),
        DataType::List(f)
        | DataType::LargeList(f)
        | DataType::ListView(f)
        | DataType::LargeListView(f)
        | DataType::FixedSizeList(f, _) => format!("{}[]", sql_type_name(f.data_type())),
        DataType::Struct(_) => "record".to_owned(),
        DataType::Dictionary(_, v) => sql_type_name(v),
        other => other.to_string().to_ascii_lowercase(),
    }
}

fn is_text(dt: &DataType) -> bool {
    match dt {
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => true,
        DataType::Dictionary(_, v) => is_text(v),
        _ => false,
    }
}

fn is_integer(dt: &DataType) -> bool {
    dt.is_integer()
}

fn is_number(dt: &DataType) -> bool {
    dt.is_numeric()
}

fn is_binary(dt: &DataType) -> bool {
    matches!(
        dt,
        DataType::Binary
            | DataType::LargeBinary
            | DataType::BinaryView
            | DataType::FixedSizeBinary(_)
    )
}

fn is_temporal(dt: &DataType) -> bool {
    dt.is_temporal() || matches!(dt, DataType::Interval(_) | DataType::Duration(_))
}

/// Whether values of type `src` can be assigned to `col` at all; the
/// error names the column and both types.
pub fn check_assignable(col: &ColumnInfo, src: &DataType) -> Result<(), SqlError> {
    if src == &col.data_type || src == &DataType::Null {
        return Ok(());
    }
    let ok = match col.ty {
        FieldType::Int | FieldType::Double => is_number(src) || is_text(src),
        FieldType::Bool => src == &DataType::Boolean || is_text(src),
        FieldType::Binary => is_binary(src) || is_text(src),
        FieldType::String => {
            is_text(src) || is_number(src) || src == &DataType::Boolean || is_temporal(src)
        }
        FieldType::Any | FieldType::Json => {
            is_text(src) || is_number(src) || src == &DataType::Boolean
        }
        FieldType::Date | FieldType::Timestamp | FieldType::TimestampTz => {
            is_text(src)
                || matches!(
                    src,
                    DataType::Date32 | DataType::Date64 | DataType::Timestamp(..)
                )
        }
        FieldType::Decimal { .. } => is_number(src) || is_text(src),
        FieldType::Interval => {
            is_text(src) || matches!(src, DataType::Interval(_) | DataType::Duration(_))
        }
        FieldType::Point | FieldType::Rectangle | FieldType::Polygon | FieldType::Geometry => {
            is_text(src)
        }
        FieldType::Array(_) => {
            is_text(src)
                || list_item(src).is_some_and(|item| {
                    col.element()
                        .is_some_and(|e| check_assignable(&e, item).is_ok())
                })
        }
    };
    if ok {
        Ok(())
    } else {
        Err(SqlError::TypeMismatch {
            column: col.name.clone(),
            column_type: column_type_name(col),
            found: sql_type_name(src),
        })
    }
}

/// Convert a column of values to `col`'s type ([`check_assignable`] first).
pub fn coerce(col: &ColumnInfo, a: &ArrayRef) -> Result<Coerced, SqlError> {
    let src = a.data_type();
    // Text for `jsonb` is the column's Arrow type but must still be JSON.
    if src == &col.data_type && col.ty != FieldType::Json {
        return Ok(Coerced {
            array: a.clone(),
            error: None,
        });
    }
    if src == &DataType::Null {
        return Ok(Coerced {
            array: new_null_array(&col.data_type, a.len()),
            error: None,
        });
    }
    check_assignable(col, src)?;
    match col.data_type {
        DataType::List(ref field) => coerce_list(col, field, a),
        DataType::Int64 if is_text(src) => {
            parse_each::<i64, Int64Array>(col, a, |s| s.parse::<i64>().ok())
        }
        DataType::Int64 if !is_integer(src) => floats_to_int(col, a),
        DataType::Float64 if is_text(src) => {
            parse_each::<f64, Float64Array>(col, a, |s| s.parse::<f64>().ok())
        }
        DataType::Boolean => parse_each::<bool, BooleanArray>(col, a, parse_bool),
        DataType::Date32 if is_text(src) => parse_each::<i32, Date32Array>(col, a, |s| {
            silt::value::temporal::parse_date(s)
                .ok()
                .and_then(|d| i32::try_from(d).ok())
        }),
        DataType::Timestamp(_, ref tz) if is_text(src) => {
            let zone = tz.is_some();
            let c = parse_each::<i64, TimestampMicrosecondArray>(col, a, |s| {
                silt::value::temporal::parse_timestamp(s, zone).ok()
            })?;
            Ok(Coerced {
                array: Arc::new(
                    c.array
                        .as_primitive::<TimestampMicrosecondType>()
                        .clone()
                        .with_timezone_opt(tz.clone()),
                ),
                error: c.error,
            })
        }
        DataType::Decimal128(precision, scale) => to_decimal(col, a, precision, scale.max(0) as u8),
        DataType::Interval(_) if is_text(src) => {
            parse_each::<IntervalMonthDayNano, IntervalMonthDayNanoArray>(col, a, |s| {
                silt::value::interval::parse(s)
                    .ok()
                    .map(|i| IntervalMonthDayNano::new(i.months, i.days, i.nanos()))
            })
        }
        DataType::Utf8 if col.ty == FieldType::Json && is_text(src) => {
            let c = parse_each::<String, StringArray>(col, a, |s| {
                serde_json::from_str::<serde_json::Value>(s)
                    .ok()
                    .map(|_| s.to_owned())
            })?;
            Ok(c)
        }
        _ => cast_checked(col, a),
    }
}

/// A decimal that does not fit `col`: out of range (22003) or not a
/// number (22P02).
pub(crate) fn decimal_error(
    col: &ColumnInfo,
    text: &str,
    e: &silt::value::decimal::DecimalError,
) -> SqlError {
    match e {
        silt::value::decimal::DecimalError::Overflow { .. } => SqlError::OutOfRange {
            column: col.name.clone(),
            column_type: column_type_name(col),
            value: shown(text),
        },
        silt::value::decimal::DecimalError::Syntax(_) => SqlError::InvalidText {
            column: col.name.clone(),
            column_type: column_type_name(col),
            text: shown(text),
        },
    }
}

/// Numbers and text to `numeric(p, s)`: through their text, rounded as
/// PostgreSQL rounds; a value with too many integer digits fails its row
/// (22003), text that is not a number too (22P02).
fn to_decimal(
    col: &ColumnInfo,
    a: &ArrayRef,
    precision: u8,
    scale: u8,
) -> Result<Coerced, SqlError> {
    let text = cast(a, &DataType::Utf8).map_err(arrow_err)?;
    let text = text.as_string::<i32>();
    let mut out = Decimal128Builder::with_capacity(text.len())
        .with_data_type(DataType::Decimal128(precision, scale as i8));
    let mut error = None;
    for i in 0..text.len() {
        if text.is_null(i) {
            out.append_null();
            continue;
        }
        let s = text.value(i);
        match silt::value::decimal::normalize(s, precision, scale) {
            Ok(canon) => out.append_option(silt::value::decimal::units(&canon, scale)),
            Err(e) => {
                out.append_null();
                if error.is_none() {
                    error = Some((i, decimal_error(col, s, &e)));
                }
            }
        }
    }
    Ok(Coerced {
        array: Arc::new(out.finish()),
        error,
    })
}

/// The element type of a list type.
fn list_item(dt: &DataType) -> Option<&DataType> {
    match dt {
        DataType::List(f)
        | DataType::LargeList(f)
        | DataType::ListView(f)
        | DataType::LargeListView(f)
        | DataType::FixedSizeList(f, _) => Some(f.data_type()),
        _ => None,
    }
}

/// Lists, or PostgreSQL's array text (`'{1,2,NULL}'`), to an array
/// column: the elements are converted as values of the element type; an
/// element that does not convert fails its row.
fn coerce_list(col: &ColumnInfo, field: &FieldRef, a: &ArrayRef) -> Result<Coerced, SqlError> {
    let elem = col.element().ok_or_else(|| {
        SqlError::Invalid(format!("column \"{}\" is not an array column", col.name))
    })?;
    let (offsets, values, nulls, mut error) = if is_text(a.data_type()) {
        let text = cast(a, &DataType::Utf8).map_err(arrow_err)?;
        let text = text.as_string::<i32>();
        let mut offsets = Vec::with_capacity(text.len() + 1);
        offsets.push(0i32);
        let mut nulls = NullBufferBuilder::new(text.len());
        let mut flat = StringBuilder::new();
        let mut error = None;
        for i in 0..text.len() {
            let parts = if text.is_null(i) {
                None
            } else {
                match silt::value::array::parse_literal(text.value(i)) {
                    Ok(parts) => Some(parts),
                    Err(reason) => {
                        error.get_or_insert((
                            i,
                            SqlError::MalformedArray {
                                column: col.name.clone(),
                                reason,
                            },
                        ));
                        None
                    }
                }
            };
            let n = parts.as_ref().map_or(0, Vec::len);
            for p in parts.iter().flatten() {
                flat.append_option(p.as_deref());
            }
            nulls.append(parts.is_some());
            let last = offsets.last().copied().unwrap_or(0);
            offsets.push(last.saturating_add(i32::try_from(n).unwrap_or(i32::MAX)));
        }
        let values: ArrayRef = Arc::new(flat.finish());
        (
            OffsetBuffer::new(offsets.into()),
            values,
            nulls.finish(),
            error,
        )
    } else {
        let item = list_item(a.data_type()).cloned().unwrap_or(DataType::Null);
        let list = cast(a, &DataType::List(Arc::new(Field::new("item", item, true))))
            .map_err(arrow_err)?;
        let list = list.as_list::<i32>();
        (
            list.offsets().clone(),
            list.values().clone(),
            list.nulls().cloned(),
            None,
        )
    };
    let items = coerce(&elem, &values)?;
    if error.is_none()
        && let Some((i, e)) = items.error
    {
        // The row holding element `i`.
        let row = offsets
            .partition_point(|&o| o as usize <= i)
            .saturating_sub(1);
        error = Some((row, e));
    }
    let list = ListArray::try_new(field.clone(), offsets, items.array, nulls).map_err(arrow_err)?;
    Ok(Coerced {
        array: Arc::new(list),
        error,
    })
}

fn arrow_err(e: datafusion::arrow::error::ArrowError) -> SqlError {
    SqlError::from(DataFusionError::from(e))
}

/// PostgreSQL's boolean input.
pub(crate) fn parse_bool(s: &str) -> Option<bool> {
    match s.to_ascii_lowercase().as_str() {
        "t" | "true" | "y" | "yes" | "on" | "1" => Some(true),
        "f" | "false" | "n" | "no" | "off" | "0" => Some(false),
        _ => None,
    }
}

/// Text shown in an error: at most 100 characters.
pub(crate) fn shown(s: &str) -> String {
    let mut out: String = s.chars().take(100).collect();
    if out.len() < s.len() {
        out.push('…');
    }
    out
}

/// Parse each text value (trimmed) as a `V`.
fn parse_each<V, A>(
    col: &ColumnInfo,
    a: &ArrayRef,
    parse: impl Fn(&str) -> Option<V>,
) -> Result<Coerced, SqlError>
where
    A: From<Vec<Option<V>>> + Array + 'static,
{
    let text = cast(a, &DataType::Utf8).map_err(arrow_err)?;
    let text = text.as_string::<i32>();
    let mut out = Vec::with_capacity(text.len());
    let mut error = None;
    for i in 0..text.len() {
        if text.is_null(i) {
            out.push(None);
            continue;
        }
        let s = text.value(i);
        let v = parse(s.trim());
        if v.is_none() && error.is_none() {
            error = Some((
                i,
                SqlError::InvalidText {
                    column: col.name.clone(),
                    column_type: column_type_name(col),
                    text: shown(s),
                },
            ));
        }
        out.push(v);
    }
    Ok(Coerced {
        array: Arc::new(A::from(out)),
        error,
    })
}

/// Floats and decimals to bigint: rounded half away from zero (as
/// PostgreSQL assigns numeric to bigint), refused outside bigint's range.
fn floats_to_int(col: &ColumnInfo, a: &ArrayRef) -> Result<Coerced, SqlError> {
    let f = cast(a, &DataType::Float64).map_err(arrow_err)?;
    let f = f.as_primitive::<Float64Type>();
    // 2^63 is exactly representable; every double below it fits an i64.
    const LIMIT: f64 = 9_223_372_036_854_775_808.0;
    let mut out = Vec::with_capacity(f.len());
    let mut error = None;
    for i in 0..f.len() {
        if f.is_null(i) {
            out.push(None);
            continue;
        }
        let r = f.value(i).round();
        if r.is_finite() && (-LIMIT..LIMIT).contains(&r) {
            out.push(Some(r as i64));
        } else {
            out.push(None);
            if error.is_none() {
                let shown = array_value_to_string(a, i).unwrap_or_else(|_| f.value(i).to_string());
                error = Some((
                    i,
                    SqlError::OutOfRange {
                        column: col.name.clone(),
                        column_type: column_type_name(col),
                        value: shown,
                    },
                ));
            }
        }
    }
    Ok(Coerced {
        array: Arc::new(Int64Array::from(out)),
        error,
    })
}

/// Arrow's cast; a value it cannot represent (an unsigned integer above
/// bigint's range) fails its row.
fn cast_checked(col: &ColumnInfo, a: &ArrayRef) -> Result<Coerced, SqlError> {
    let opts = CastOptions {
        safe: true,
        ..Default::default()
    };
    let out = cast_with_options(a, &col.data_type, &opts).map_err(arrow_err)?;
    let error = (0..a.len())
        .find(|&i| !a.is_null(i) && out.is_null(i))
        .map(|i| {
            (
                i,
                SqlError::OutOfRange {
                    column: col.name.clone(),
                    column_type: column_type_name(col),
                    value: array_value_to_string(a, i).unwrap_or_default(),
                },
            )
        });
    Ok(Coerced { array: out, error })
}

/// `UPDATE t SET col = expr` as DataFusion plans it casts `expr` to the
/// column's type; check those assignments by this module's rules first
/// (DataFusion would fold `CAST('abc' AS DOUBLE)` into an error naming
/// neither the column nor the types, and would truncate `2.5` to `2`), and
/// assign constant values here. Other plans are returned as they are.
pub fn check_update(plan: LogicalPlan) -> Result<LogicalPlan, SqlError> {
    let LogicalPlan::Dml(dml) = &plan else {
        return Ok(plan);
    };
    if dml.op != WriteOp::Update {
        return Ok(plan);
    }
    let Ok(provider) = source_as_provider(&dml.target) else {
        return Ok(plan);
    };
    let any: &dyn std::any::Any = provider.as_ref();
    let Some(table) = any.downcast_ref::<SiltTable>() else {
        return Ok(plan);
    };
    let LogicalPlan::Projection(proj) = dml.input.as_ref() else {
        return Ok(plan);
    };
    let mut exprs = Vec::with_capacity(proj.expr.len());
    let mut changed = false;
    for e in &proj.expr {
        let (Expr::Alias(alias), Some(col)) = (e, alias_column(e, table)) else {
            exprs.push(e.clone());
            continue;
        };
        let value = match alias.expr.as_ref() {
            Expr::Cast(c) => &c.expr,
            Expr::TryCast(c) => &c.expr,
            _ => {
                exprs.push(e.clone());
                continue;
            }
        };
        check_assignable(col, &value.get_type(proj.input.schema())?)?;
        let Expr::Literal(v, _) = value.as_ref() else {
            exprs.push(e.clone());
            continue;
        };
        let c = coerce(col, &v.to_array()?)?;
        if let Some((_, err)) = c.error {
            return Err(err);
        }
        let assigned = ScalarValue::try_from_array(&c.array, 0)?;
        exprs.push(Expr::Literal(assigned, None).alias(alias.name.clone()));
        changed = true;
    }
    if !changed {
        return Ok(plan);
    }
    let input = Projection::try_new(exprs, proj.input.clone())?;
    Ok(LogicalPlan::Dml(DmlStatement::new(
        dml.table_name.clone(),
        dml.target.clone(),
        dml.op.clone(),
        Arc::new(LogicalPlan::Projection(input)),
    )))
}

fn alias_column<'a>(e: &Expr, table: &'a SiltTable) -> Option<&'a ColumnInfo> {
    let Expr::Alias(a) = e else {
        return None;
    };
    table.columns().iter().find(|c| c.name == a.name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::array::{StringArray, UInt64Array};

    fn col(ty: FieldType) -> ColumnInfo {
        ColumnInfo {
            name: "c".into(),
            ty,
            data_type: crate::convert::arrow_type(ty),
            primary_key: false,
            rest: None,
        }
    }

    #[test]
    fn assignment_rules() {
        let text: ArrayRef = Arc::new(StringArray::from(vec![Some(" 12 "), None, Some("x")]));
        let c = coerce(&col(FieldType::Int), &text).expect("coerce");
        let a = c
            .array
            .as_primitive::<datafusion::arrow::datatypes::Int64Type>();
        assert_eq!(a.value(0), 12);
        assert!(a.is_null(1));
        let (row, e) = c.error.expect("error");
        assert_eq!(row, 2);
        assert_eq!(
            e.to_string(),
            "invalid input syntax for type bigint: \"x\" (column \"c\")"
        );

        let f: ArrayRef = Arc::new(Float64Array::from(vec![1.5, -2.5, 1e300]));
        let c = coerce(&col(FieldType::Int), &f).expect("coerce");
        let a = c
            .array
            .as_primitive::<datafusion::arrow::datatypes::Int64Type>();
        assert_eq!((a.value(0), a.value(1)), (2, -3));
        assert!(matches!(c.error, Some((2, SqlError::OutOfRange { .. }))));

        let u: ArrayRef = Arc::new(UInt64Array::from(vec![1, u64::MAX]));
        let c = coerce(&col(FieldType::Int), &u).expect("coerce");
        assert!(matches!(c.error, Some((1, SqlError::OutOfRange { .. }))));

        let b: ArrayRef = Arc::new(StringArray::from(vec!["Yes", "off", "maybe"]));
        let c = coerce(&col(FieldType::Bool), &b).expect("coerce");
        assert!(c.array.as_boolean().value(0));
        assert!(!c.array.as_boolean().value(1));
        assert!(matches!(c.error, Some((2, SqlError::InvalidText { .. }))));

        let flag: ArrayRef = Arc::new(BooleanArray::from(vec![true]));
        let e = check_assignable(&col(FieldType::Double), flag.data_type())
            .expect_err("bool into double");
        assert_eq!(
            e.to_string(),
            "column \"c\" is of type double precision but expression is of type boolean"
        );
        assert!(check_assignable(&col(FieldType::Geometry), &DataType::Int64).is_err());
        assert!(check_assignable(&col(FieldType::String), &DataType::Int64).is_ok());
        assert!(check_assignable(&col(FieldType::Bool), &DataType::Int64).is_err());
    }
}
