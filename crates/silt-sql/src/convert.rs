//! Mapping between Silt datasets and Arrow: the table schema derived from a
//! [`DatasetDef`], records to record batches and back, literals to values.
//!
//! Declared types map as follows: `int` -> Int64, `double` -> Float64,
//! `string` -> Utf8, `bool` -> Boolean, `binary` -> Binary, `point`,
//! `rectangle`, `polygon` and `geometry` -> Utf8 holding WKT (a rectangle
//! reads back as its box `POLYGON`), `any` -> Utf8 holding the value's JSON
//! text (strings quoted; written text is parsed as JSON, and text that is
//! not JSON is stored as a string), `json` -> the same Utf8 JSON text,
//! marked `jsonb` for the PostgreSQL front end (written text must be JSON),
//! `date` -> Date32, `timestamp` -> Timestamp(µs), `timestamptz` ->
//! Timestamp(µs, "+00:00"), `decimal(p,s)` -> Decimal128(p, s), an array
//! `t[]` -> List of `t`'s type.
//! Primary-key fields that are not declared are exposed as `any`.
//! Undeclared fields of a record are not visible to SQL (UPDATE keeps them).

use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, AsArray, RecordBatch};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{
    DataType, Date32Type, Decimal128Type, Field, Float64Type, Int64Type, IntervalMonthDayNanoType,
    IntervalUnit, Schema, SchemaRef, TimeUnit, TimestampMicrosecondType,
};
use datafusion::common::ScalarValue;
use datafusion::error::{DataFusionError, Result as DfResult};
use silt::{DatasetDef, FieldType, Value};

use crate::batch::BatchBuilder;

/// One SQL column of a dataset.
#[derive(Clone, Debug, PartialEq)]
pub struct ColumnInfo {
    pub name: String,
    pub ty: FieldType,
    pub data_type: DataType,
    pub primary_key: bool,
    /// The document column of `documents.<table>` ([`document_columns`]):
    /// a record's undeclared fields as one JSON object. These are the
    /// declared names, left out of it.
    pub rest: Option<Arc<[String]>>,
}

impl ColumnInfo {
    /// The elements of an array column, as a column of their own (same
    /// name, so errors name the column).
    pub fn element(&self) -> Option<ColumnInfo> {
        let FieldType::Array(e) = self.ty else {
            return None;
        };
        Some(ColumnInfo {
            name: self.name.clone(),
            ty: e.field_type(),
            data_type: arrow_type(e.field_type()),
            primary_key: false,
            rest: None,
        })
    }
}

/// The schema whose tables are the document view of the datasets: the
/// declared columns plus [`document_columns`]'s JSON column.
pub const DOCUMENTS_SCHEMA: &str = "documents";

/// The zone of `timestamptz` columns (DataFusion's default session zone).
pub const UTC: &str = "+00:00";

/// The metadata key naming the PostgreSQL type of a column whose Arrow
/// type does not say it (`jsonb`, the catalog's vectors).
pub const PG_TYPE_KEY: &str = "silt.pg_type";

/// The Arrow type of a declared field type.
pub fn arrow_type(ty: FieldType) -> DataType {
    match ty {
        FieldType::Date => DataType::Date32,
        FieldType::Timestamp => DataType::Timestamp(TimeUnit::Microsecond, None),
        FieldType::TimestampTz => DataType::Timestamp(TimeUnit::Microsecond, Some(UTC.into())),
        FieldType::Decimal { precision, scale } => DataType::Decimal128(precision, scale as i8),
        FieldType::Interval => DataType::Interval(IntervalUnit::MonthDayNano),
        FieldType::Array(e) => DataType::List(Arc::new(Field::new(
            "item",
            arrow_type(e.field_type()),
            true,
        ))),
        FieldType::Int => DataType::Int64,
        FieldType::Double => DataType::Float64,
        FieldType::Bool => DataType::Boolean,
        FieldType::Binary => DataType::Binary,
        FieldType::String
        | FieldType::Any
        | FieldType::Json
        | FieldType::Point
        | FieldType::Rectangle
        | FieldType::Polygon
        | FieldType::Geometry => DataType::Utf8,
    }
}

/// The SQL columns of a dataset: undeclared primary-key fields first, then
/// the declared fields in declaration order.
pub fn columns(def: &DatasetDef) -> Vec<ColumnInfo> {
    let mut out = Vec::new();
    for k in &def.primary_key {
        if def.field_type(k).is_none() {
            out.push(ColumnInfo {
                name: k.clone(),
                ty: FieldType::Any,
                data_type: DataType::Utf8,
                primary_key: true,
                rest: None,
            });
        }
    }
    for (name, ty) in &def.fields {
        out.push(ColumnInfo {
            name: name.clone(),
            ty: *ty,
            data_type: arrow_type(*ty),
            primary_key: def.primary_key.contains(name),
            rest: None,
        });
    }
    out
}

/// The columns of the document view of a dataset (`documents.<table>`):
/// its SQL columns, then `doc`, a `jsonb` object of each record's
/// undeclared fields (null when it has none), as records loaded from JSON
/// through the CLI, Python or HTTP keep them. The column is `doc`, or
/// `_doc`, `__doc`... when a declared field has that name.
pub fn document_columns(def: &DatasetDef) -> Vec<ColumnInfo> {
    let mut out = columns(def);
    let declared: Arc<[String]> = out.iter().map(|c| c.name.clone()).collect();
    let mut name = "doc".to_owned();
    while declared.contains(&name) {
        name.insert(0, '_');
    }
    out.push(ColumnInfo {
        name,
        ty: FieldType::Json,
        data_type: DataType::Utf8,
        primary_key: false,
        rest: Some(declared),
    });
    out
}

/// The Arrow field of a column: `json` columns carry their PostgreSQL type.
pub fn field_of(c: &ColumnInfo) -> Field {
    let f = Field::new(&c.name, c.data_type.clone(), !c.primary_key);
    if c.ty == FieldType::Json {
        json_field(f)
    } else {
        f
    }
}

/// `f` marked as PostgreSQL `jsonb`.
pub fn json_field(f: Field) -> Field {
    f.with_metadata([(PG_TYPE_KEY.to_owned(), "jsonb".to_owned())].into())
}

/// The Arrow schema of some columns.
pub fn schema_of(cols: &[ColumnInfo]) -> SchemaRef {
    Arc::new(Schema::new(cols.iter().map(field_of).collect::<Vec<_>>()))
}

/// The value of the text of an `any` column: JSON text is parsed, anything
/// else is a string.
pub fn any_value(text: &str) -> Value {
    match serde_json::from_str::<serde_json::Value>(text) {
        Ok(j) => silt::value::from_json(&j),
        Err(_) => Value::String(text.to_owned()),
    }
}

/// One Arrow column from the field `col` of each record.
pub fn column_from_records(col: &ColumnInfo, records: &[Value]) -> ArrayRef {
    let cols = std::slice::from_ref(col);
    let mut b = BatchBuilder::new(cols, records.len());
    for r in records {
        b.push_value(r);
    }
    b.finish_arrays()
        .pop()
        .unwrap_or_else(|| datafusion::arrow::array::new_empty_array(&col.data_type))
}

/// A record batch of the projected columns of `records`.
pub fn records_to_batch(
    schema: &SchemaRef,
    cols: &[ColumnInfo],
    records: &[Value],
) -> DfResult<RecordBatch> {
    let mut b = BatchBuilder::new(cols, records.len());
    for r in records {
        b.push_value(r);
    }
    b.finish(schema)
}

/// A timestamp literal in microseconds, when that is exact.
fn timestamp_micros(s: &ScalarValue) -> Option<i64> {
    match s {
        ScalarValue::TimestampSecond(Some(v), _) => v.checked_mul(1_000_000),
        ScalarValue::TimestampMillisecond(Some(v), _) => v.checked_mul(1_000),
        ScalarValue::TimestampMicrosecond(Some(v), _) => Some(*v),
        ScalarValue::TimestampNanosecond(Some(v), _) => (v % 1_000 == 0).then_some(v / 1_000),
        _ => None,
    }
}

/// The value at `row` of an Arrow column of the column's type (None for null).
pub fn value_at(col: &ColumnInfo, array: &ArrayRef, row: usize) -> DfResult<Option<Value>> {
    if array.is_null(row) {
        return Ok(None);
    }
    let array = if array.data_type() == &col.data_type {
        array.clone()
    } else {
        cast(array, &col.data_type)?
    };
    let v = match col.data_type {
        DataType::Int64 => Value::Int(array.as_primitive::<Int64Type>().value(row)),
        DataType::Float64 => Value::Double(array.as_primitive::<Float64Type>().value(row)),
        DataType::Boolean => Value::Bool(array.as_boolean().value(row)),
        DataType::Binary => Value::Binary(array.as_binary::<i32>().value(row).to_vec()),
        DataType::Date32 => Value::Int(i64::from(array.as_primitive::<Date32Type>().value(row))),
        DataType::Timestamp(TimeUnit::Microsecond, _) => {
            Value::Int(array.as_primitive::<TimestampMicrosecondType>().value(row))
        }
        DataType::Interval(IntervalUnit::MonthDayNano) => {
            let v = array.as_primitive::<IntervalMonthDayNanoType>().value(row);
            Value::String(
                silt::value::interval::Interval::from_month_day_nano(
                    v.months,
                    v.days,
                    v.nanoseconds,
                )
                .to_iso(),
            )
        }
        DataType::Decimal128(_, scale) => Value::String(silt::value::decimal::format_units(
            array.as_primitive::<Decimal128Type>().value(row),
            scale.max(0) as u8,
        )),
        DataType::Utf8 if col.ty == FieldType::Json => {
            let text = array.as_string::<i32>().value(row);
            let j = serde_json::from_str::<serde_json::Value>(text).map_err(|e| {
                DataFusionError::Execution(format!(
                    "invalid input syntax for type json (column \"{}\"): {e}",
                    col.name
                ))
            })?;
            silt::value::from_json(&j)
        }
        DataType::Utf8 if col.ty == FieldType::Any => {
            any_value(array.as_string::<i32>().value(row))
        }
        DataType::Utf8 => Value::String(array.as_string::<i32>().value(row).to_owned()),
        DataType::List(_) => {
            let elem = col.element().ok_or_else(|| {
                DataFusionError::Internal(format!("`{}` is not an array column", col.name))
            })?;
            let items = array.as_list::<i32>().value(row);
            let mut out = Vec::with_capacity(items.len());
            for i in 0..items.len() {
                out.push(value_at(&elem, &items, i)?.unwrap_or(Value::Null));
            }
            Value::Array(out)
        }
        ref other => {
            return Err(DataFusionError::Internal(format!(
                "unexpected column type {other} for `{}`",
                col.name
            )));
        }
    };
    Ok(Some(v))
}

/// Records (objects) from a batch whose columns are `cols` in order; null
/// cells leave the field out.
pub fn batch_to_records(batch: &RecordBatch, cols: &[ColumnInfo]) -> DfResult<Vec<Value>> {
    if batch.num_columns() != cols.len() {
        return Err(DataFusionError::Plan(format!(
            "expected {} columns, got {}",
            cols.len(),
            batch.num_columns()
        )));
    }
    let arrays: Vec<ArrayRef> = batch
        .columns()
        .iter()
        .zip(cols)
        .map(|(a, c)| {
            if a.data_type() == &c.data_type {
                Ok(a.clone())
            } else {
                cast(a, &c.data_type)
            }
        })
        .collect::<Result<_, _>>()?;
    let mut out = Vec::with_capacity(batch.num_rows());
    for row in 0..batch.num_rows() {
        let mut fields = Vec::with_capacity(cols.len());
        for (c, a) in cols.iter().zip(&arrays) {
            if let Some(v) = value_at(c, a, row)? {
                fields.push((c.name.clone(), v));
            }
        }
        out.push(Value::Object(fields));
    }
    Ok(out)
}

/// A literal as a value of a column of type `ty`, when the conversion is
/// exact (used for index bounds).
pub fn scalar_to_value(s: &ScalarValue, ty: FieldType) -> Option<Value> {
    if s.is_null() {
        return None;
    }
    let int = match s {
        ScalarValue::Int8(Some(v)) => Some(i64::from(*v)),
        ScalarValue::Int16(Some(v)) => Some(i64::from(*v)),
        ScalarValue::Int32(Some(v)) => Some(i64::from(*v)),
        ScalarValue::Int64(Some(v)) => Some(*v),
        ScalarValue::UInt8(Some(v)) => Some(i64::from(*v)),
        ScalarValue::UInt16(Some(v)) => Some(i64::from(*v)),
        ScalarValue::UInt32(Some(v)) => Some(i64::from(*v)),
        ScalarValue::UInt64(Some(v)) => i64::try_from(*v).ok(),
        _ => None,
    };
    let float = match s {
        ScalarValue::Float64(Some(v)) => Some(*v),
        ScalarValue::Float32(Some(v)) => Some(f64::from(*v)),
        _ => None,
    };
    let text = match s {
        ScalarValue::Utf8(Some(v))
        | ScalarValue::LargeUtf8(Some(v))
        | ScalarValue::Utf8View(Some(v)) => Some(v.clone()),
        _ => None,
    };
    match ty {
        FieldType::Int => int.map(Value::Int),
        FieldType::Date => match s {
            ScalarValue::Date32(Some(d)) => Some(Value::Int(i64::from(*d))),
            _ => None,
        },
        FieldType::Timestamp | FieldType::TimestampTz => timestamp_micros(s).map(Value::Int),
        FieldType::Double => float.filter(|f| !f.is_nan()).map(Value::Double),
        FieldType::String => text.map(Value::String),
        FieldType::Bool => match s {
            ScalarValue::Boolean(Some(b)) => Some(Value::Bool(*b)),
            _ => None,
        },
        FieldType::Binary => match s {
            ScalarValue::Binary(Some(b)) | ScalarValue::LargeBinary(Some(b)) => {
                Some(Value::Binary(b.clone()))
            }
            _ => None,
        },
        _ => None,
    }
}
