//! Mapping between Silt datasets and Arrow: the table schema derived from a
//! [`DatasetDef`], records to record batches and back, literals to values.
//!
//! Declared types map as follows: `int` -> Int64, `double` -> Float64,
//! `string` -> Utf8, `bool` -> Boolean, `binary` -> Binary, `point`,
//! `rectangle`, `polygon` and `geometry` -> Utf8 holding WKT (a rectangle
//! reads back as its box `POLYGON`), `any` -> Utf8 holding the value's JSON
//! text (strings quoted; written text is parsed as JSON, and text that is
//! not JSON is stored as a string). Primary-key fields that are not
//! declared are exposed as `any`. Undeclared fields of a record are not
//! visible to SQL (UPDATE keeps them).

use std::sync::Arc;

use datafusion::arrow::array::{
    Array, ArrayRef, AsArray, BinaryBuilder, BooleanBuilder, Float64Builder, Int64Builder,
    RecordBatch, RecordBatchOptions, StringBuilder,
};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType, Field, Float64Type, Int64Type, Schema, SchemaRef};
use datafusion::common::ScalarValue;
use datafusion::error::{DataFusionError, Result as DfResult};
use silt::{DatasetDef, FieldType, Value};

/// One SQL column of a dataset.
#[derive(Clone, Debug, PartialEq)]
pub struct ColumnInfo {
    pub name: String,
    pub ty: FieldType,
    pub data_type: DataType,
    pub primary_key: bool,
}

/// The Arrow type of a declared field type.
pub fn arrow_type(ty: FieldType) -> DataType {
    match ty {
        FieldType::Int => DataType::Int64,
        FieldType::Double => DataType::Float64,
        FieldType::Bool => DataType::Boolean,
        FieldType::Binary => DataType::Binary,
        FieldType::String
        | FieldType::Any
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
            });
        }
    }
    for (name, ty) in &def.fields {
        out.push(ColumnInfo {
            name: name.clone(),
            ty: *ty,
            data_type: arrow_type(*ty),
            primary_key: def.primary_key.contains(name),
        });
    }
    out
}

/// The Arrow schema of some columns.
pub fn schema_of(cols: &[ColumnInfo]) -> SchemaRef {
    Arc::new(Schema::new(
        cols.iter()
            .map(|c| Field::new(&c.name, c.data_type.clone(), !c.primary_key))
            .collect::<Vec<_>>(),
    ))
}

/// Text form of a value in a Utf8 column of type `any`: its JSON text
/// (strings quoted), so that it converts back exactly ([`any_value`]).
fn any_text(v: &Value) -> String {
    silt::value::to_json(v).to_string()
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
    let field = |r: &'_ Value| -> Option<Value> { r.get(&col.name).cloned() };
    match col.data_type {
        DataType::Int64 => {
            let mut b = Int64Builder::with_capacity(records.len());
            for r in records {
                match field(r) {
                    Some(Value::Int(i)) => b.append_value(i),
                    _ => b.append_null(),
                }
            }
            Arc::new(b.finish())
        }
        DataType::Float64 => {
            let mut b = Float64Builder::with_capacity(records.len());
            for r in records {
                match field(r).as_ref().and_then(Value::as_f64) {
                    Some(d) => b.append_value(d),
                    None => b.append_null(),
                }
            }
            Arc::new(b.finish())
        }
        DataType::Boolean => {
            let mut b = BooleanBuilder::with_capacity(records.len());
            for r in records {
                match field(r) {
                    Some(Value::Bool(x)) => b.append_value(x),
                    _ => b.append_null(),
                }
            }
            Arc::new(b.finish())
        }
        DataType::Binary => {
            let mut b = BinaryBuilder::new();
            for r in records {
                match field(r) {
                    Some(Value::Binary(x)) => b.append_value(x),
                    _ => b.append_null(),
                }
            }
            Arc::new(b.finish())
        }
        _ => {
            let mut b = StringBuilder::new();
            for r in records {
                match (col.ty, field(r)) {
                    (_, None | Some(Value::Null)) => b.append_null(),
                    (FieldType::Any, Some(v)) => b.append_value(any_text(&v)),
                    (_, Some(Value::String(s))) => b.append_value(s),
                    (_, Some(Value::Geometry(g))) => b.append_value(g.to_wkt()),
                    (_, Some(_)) => b.append_null(),
                }
            }
            Arc::new(b.finish())
        }
    }
}

/// A record batch of the projected columns of `records`.
pub fn records_to_batch(
    schema: &SchemaRef,
    cols: &[ColumnInfo],
    records: &[Value],
) -> DfResult<RecordBatch> {
    let arrays: Vec<ArrayRef> = cols
        .iter()
        .map(|c| column_from_records(c, records))
        .collect();
    let opts = RecordBatchOptions::new().with_row_count(Some(records.len()));
    Ok(RecordBatch::try_new_with_options(
        schema.clone(),
        arrays,
        &opts,
    )?)
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
        DataType::Utf8 if col.ty == FieldType::Any => {
            any_value(array.as_string::<i32>().value(row))
        }
        DataType::Utf8 => Value::String(array.as_string::<i32>().value(row).to_owned()),
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
