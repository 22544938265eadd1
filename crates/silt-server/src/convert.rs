//! Arrow values for the two front ends: PostgreSQL types and rows, and JSON.
//!
//! PostgreSQL types: every integer type -> `int8`, floats -> `float8`,
//! `Boolean` -> `bool`, binary types -> `bytea`, lists -> `int8[]`,
//! `float8[]`, `bool[]` or `text[]` by their elements, everything else
//! (strings, geometry WKT, dates, decimals...) -> `text`, formatted as
//! DataFusion prints it. JSON: integers and finite floats are numbers,
//! non-finite floats the strings `"NaN"`, `"Infinity"`, `"-Infinity"`,
//! binary values base64 strings, everything else as for `text`.

use std::fmt::Write as _;
use std::sync::Arc;

use base64::Engine as _;
use datafusion::arrow::array::{
    Array, ArrayRef, AsArray, BinaryArray, BooleanArray, Float64Array, Int64Array, ListArray,
    RecordBatch, StringArray, StringBuilder,
};
use datafusion::arrow::compute::{CastOptions, cast_with_options};
use datafusion::arrow::datatypes::{DataType, Field, Float64Type, Int64Type};
use datafusion::arrow::error::ArrowError;
use datafusion::arrow::util::display::{ArrayFormatter, FormatOptions};
use pgwire::api::Type;

/// The PostgreSQL type an Arrow type is sent as.
pub fn pg_type(dt: &DataType) -> Type {
    match dt {
        DataType::Int8
        | DataType::Int16
        | DataType::Int32
        | DataType::Int64
        | DataType::UInt8
        | DataType::UInt16
        | DataType::UInt32
        | DataType::UInt64 => Type::INT8,
        DataType::Float16 | DataType::Float32 | DataType::Float64 => Type::FLOAT8,
        DataType::Boolean => Type::BOOL,
        DataType::Binary
        | DataType::LargeBinary
        | DataType::BinaryView
        | DataType::FixedSizeBinary(_) => Type::BYTEA,
        DataType::Dictionary(_, v) => pg_type(v),
        DataType::List(f) | DataType::LargeList(f) | DataType::FixedSizeList(f, _) => {
            match pg_type(f.data_type()) {
                Type::INT8 => Type::INT8_ARRAY,
                Type::FLOAT8 => Type::FLOAT8_ARRAY,
                Type::BOOL => Type::BOOL_ARRAY,
                _ => Type::TEXT_ARRAY,
            }
        }
        _ => Type::TEXT,
    }
}

/// The PostgreSQL type a result column is sent as: [`pg_type`] of its
/// Arrow type, unless its metadata names one (the catalog's `int2vector`
/// and `oidvector` columns, lists sent as space-separated numbers).
pub fn pg_field_type(f: &Field) -> Type {
    match f
        .metadata()
        .get(silt_sql::pg_catalog::table::PG_TYPE_KEY)
        .map(String::as_str)
    {
        Some("int2vector") => Type::INT2_VECTOR,
        Some("oidvector") => Type::OID_VECTOR,
        _ => pg_type(f.data_type()),
    }
}

/// One column converted to what its PostgreSQL type needs.
pub enum PgColumn {
    Int(Int64Array),
    Float(Float64Array),
    Bool(BooleanArray),
    Bytes(BinaryArray),
    Text(StringArray),
    /// An array column: its lists, elements converted for the element type.
    List(ListArray, Box<PgColumn>),
}

/// One array value, as the encoder takes it.
pub enum PgList {
    Int(Vec<Option<i64>>),
    Float(Vec<Option<f64>>),
    Bool(Vec<Option<bool>>),
    Text(Vec<Option<String>>),
}

fn strict() -> CastOptions<'static> {
    CastOptions {
        safe: false,
        ..CastOptions::default()
    }
}

impl PgColumn {
    /// Convert `array` for the PostgreSQL type `ty` (as chosen by [`pg_type`]).
    pub fn new(array: &ArrayRef, ty: &Type) -> Result<PgColumn, ArrowError> {
        Ok(match *ty {
            Type::INT8 => PgColumn::Int(
                cast_with_options(array, &DataType::Int64, &strict())?
                    .as_primitive::<Int64Type>()
                    .clone(),
            ),
            Type::FLOAT8 => PgColumn::Float(
                cast_with_options(array, &DataType::Float64, &strict())?
                    .as_primitive::<Float64Type>()
                    .clone(),
            ),
            Type::BOOL => PgColumn::Bool(
                cast_with_options(array, &DataType::Boolean, &strict())?
                    .as_boolean()
                    .clone(),
            ),
            Type::BYTEA => PgColumn::Bytes(
                cast_with_options(array, &DataType::Binary, &strict())?
                    .as_binary::<i32>()
                    .clone(),
            ),
            Type::INT8_ARRAY | Type::FLOAT8_ARRAY | Type::BOOL_ARRAY | Type::TEXT_ARRAY => {
                let elem = match *ty {
                    Type::INT8_ARRAY => Type::INT8,
                    Type::FLOAT8_ARRAY => Type::FLOAT8,
                    Type::BOOL_ARRAY => Type::BOOL,
                    _ => Type::TEXT,
                };
                let item = match array.data_type() {
                    DataType::List(f) | DataType::LargeList(f) | DataType::FixedSizeList(f, _) => {
                        f.data_type().clone()
                    }
                    other => other.clone(),
                };
                let list = cast_with_options(
                    array,
                    &DataType::List(Arc::new(Field::new("item", item, true))),
                    &strict(),
                )?
                .as_list::<i32>()
                .clone();
                let values = PgColumn::new(list.values(), &elem)?;
                PgColumn::List(list, Box::new(values))
            }
            Type::INT2_VECTOR | Type::OID_VECTOR => PgColumn::Text(vector_text(array)?),
            _ => PgColumn::Text(text_array(array)?),
        })
    }

    /// Row `row`'s array (`None` for null or a column that is not one).
    pub fn list(&self, row: usize) -> Option<PgList> {
        let PgColumn::List(list, values) = self else {
            return None;
        };
        if list.is_null(row) {
            return None;
        }
        let offsets = list.value_offsets();
        let range = offsets[row] as usize..offsets[row + 1] as usize;
        Some(match values.as_ref() {
            PgColumn::Int(a) => {
                PgList::Int(range.map(|i| (!a.is_null(i)).then(|| a.value(i))).collect())
            }
            PgColumn::Float(a) => {
                PgList::Float(range.map(|i| (!a.is_null(i)).then(|| a.value(i))).collect())
            }
            PgColumn::Bool(a) => {
                PgList::Bool(range.map(|i| (!a.is_null(i)).then(|| a.value(i))).collect())
            }
            PgColumn::Text(a) => PgList::Text(
                range
                    .map(|i| (!a.is_null(i)).then(|| a.value(i).to_owned()))
                    .collect(),
            ),
            PgColumn::Bytes(_) | PgColumn::List(..) => return None,
        })
    }
}

/// Lists of numbers as PostgreSQL prints `int2vector`: `1 3 2`.
fn vector_text(array: &ArrayRef) -> Result<StringArray, ArrowError> {
    let list = cast_with_options(
        array,
        &DataType::List(Arc::new(Field::new("item", DataType::Int64, true))),
        &strict(),
    )?;
    let list = list.as_list::<i32>();
    let mut b = StringBuilder::new();
    for i in 0..list.len() {
        if list.is_null(i) {
            b.append_null();
            continue;
        }
        let v = list.value(i);
        let words: Vec<String> = v
            .as_primitive::<Int64Type>()
            .iter()
            .map(|x| x.unwrap_or(0).to_string())
            .collect();
        b.append_value(words.join(" "));
    }
    Ok(b.finish())
}

/// Any array as strings (nulls stay null).
pub fn text_array(array: &ArrayRef) -> Result<StringArray, ArrowError> {
    match array.data_type() {
        // `SELECT NULL`: every value is null, though the array has no
        // validity buffer (`is_null` says false).
        DataType::Null => Ok(StringArray::new_null(array.len())),
        DataType::Utf8 => Ok(array.as_string::<i32>().clone()),
        DataType::LargeUtf8 | DataType::Utf8View => {
            Ok(cast_with_options(array, &DataType::Utf8, &strict())?
                .as_string::<i32>()
                .clone())
        }
        _ => {
            let opts = FormatOptions::default();
            let fmt = ArrayFormatter::try_new(array.as_ref(), &opts)?;
            let mut b = StringBuilder::with_capacity(array.len(), array.len() * 8);
            let mut s = String::new();
            let nulls = array.logical_nulls();
            for i in 0..array.len() {
                if nulls.as_ref().is_some_and(|n| n.is_null(i)) {
                    b.append_null();
                } else {
                    s.clear();
                    write!(s, "{}", fmt.value(i))
                        .map_err(|e| ArrowError::ComputeError(e.to_string()))?;
                    b.append_value(&s);
                }
            }
            Ok(b.finish())
        }
    }
}

/// One column as JSON fragments, ready to be concatenated.
enum JsonColumn {
    Int(Int64Array),
    Float(Float64Array),
    Bool(BooleanArray),
    Bytes(BinaryArray),
    Text(StringArray),
}

/// Writes record batches as JSON objects, one per row, keys in column order.
pub struct JsonRows {
    /// `"name":` for each column, JSON-escaped.
    keys: Vec<String>,
}

impl JsonRows {
    pub fn new(schema: &datafusion::arrow::datatypes::Schema) -> JsonRows {
        JsonRows {
            keys: schema
                .fields()
                .iter()
                .map(|f| {
                    let mut k = serde_json::to_string(f.name()).unwrap_or_else(|_| "\"?\"".into());
                    k.push(':');
                    k
                })
                .collect(),
        }
    }

    /// Append each row of `batch` to `out`, each followed by `sep`. Returns
    /// the number of rows.
    pub fn write(
        &self,
        batch: &RecordBatch,
        out: &mut String,
        first: &mut bool,
        sep: &str,
        lead: &str,
    ) -> Result<usize, ArrowError> {
        let cols = batch
            .columns()
            .iter()
            .map(json_column)
            .collect::<Result<Vec<_>, _>>()?;
        for row in 0..batch.num_rows() {
            if !*first {
                out.push_str(lead);
            }
            *first = false;
            out.push('{');
            for (i, c) in cols.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                if let Some(k) = self.keys.get(i) {
                    out.push_str(k);
                }
                write_json_value(c, row, out);
            }
            out.push('}');
            out.push_str(sep);
        }
        Ok(batch.num_rows())
    }
}

fn json_column(array: &ArrayRef) -> Result<JsonColumn, ArrowError> {
    Ok(match pg_type(array.data_type()) {
        Type::INT8 => match cast_with_options(array, &DataType::Int64, &strict()) {
            Ok(a) => JsonColumn::Int(a.as_primitive::<Int64Type>().clone()),
            // A UInt64 column beyond i64: its values as decimal strings.
            Err(_) => JsonColumn::Text(text_array(array)?),
        },
        Type::FLOAT8 => JsonColumn::Float(
            cast_with_options(array, &DataType::Float64, &strict())?
                .as_primitive::<Float64Type>()
                .clone(),
        ),
        Type::BOOL => JsonColumn::Bool(
            cast_with_options(array, &DataType::Boolean, &strict())?
                .as_boolean()
                .clone(),
        ),
        Type::BYTEA => JsonColumn::Bytes(
            cast_with_options(array, &DataType::Binary, &strict())?
                .as_binary::<i32>()
                .clone(),
        ),
        _ => JsonColumn::Text(text_array(array)?),
    })
}

fn write_json_value(c: &JsonColumn, row: usize, out: &mut String) {
    let null = match c {
        JsonColumn::Int(a) => a.is_null(row),
        JsonColumn::Float(a) => a.is_null(row),
        JsonColumn::Bool(a) => a.is_null(row),
        JsonColumn::Bytes(a) => a.is_null(row),
        JsonColumn::Text(a) => a.is_null(row),
    };
    if null {
        out.push_str("null");
        return;
    }
    match c {
        JsonColumn::Int(a) => {
            let _ = write!(out, "{}", a.value(row));
        }
        JsonColumn::Float(a) => {
            let v = a.value(row);
            if v.is_finite() {
                let _ = write!(out, "{v:?}");
            } else if v.is_nan() {
                out.push_str("\"NaN\"");
            } else if v > 0.0 {
                out.push_str("\"Infinity\"");
            } else {
                out.push_str("\"-Infinity\"");
            }
        }
        JsonColumn::Bool(a) => out.push_str(if a.value(row) { "true" } else { "false" }),
        JsonColumn::Bytes(a) => {
            out.push('"');
            out.push_str(&base64::engine::general_purpose::STANDARD.encode(a.value(row)));
            out.push('"');
        }
        JsonColumn::Text(a) => {
            let s = a.value(row);
            match serde_json::to_string(s) {
                Ok(q) => out.push_str(&q),
                Err(_) => out.push_str("null"),
            }
        }
    }
}

/// A schema-less batch of one string column (used for messages).
pub fn one_text_column(name: &str, values: Vec<String>) -> Result<RecordBatch, ArrowError> {
    let schema = Arc::new(datafusion::arrow::datatypes::Schema::new(vec![
        datafusion::arrow::datatypes::Field::new(name, DataType::Utf8, true),
    ]));
    RecordBatch::try_new(
        schema,
        vec![Arc::new(StringArray::from(values)) as ArrayRef],
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::array::{Int32Array, UInt64Array};
    use datafusion::arrow::datatypes::{Field, Schema};

    #[test]
    fn json_rows() {
        let schema = Arc::new(Schema::new(vec![
            Field::new("a", DataType::Int32, true),
            Field::new("b\"", DataType::Utf8, true),
            Field::new("c", DataType::Float64, true),
            Field::new("d", DataType::UInt64, true),
        ]));
        let batch = RecordBatch::try_new(
            schema.clone(),
            vec![
                Arc::new(Int32Array::from(vec![Some(1), None])),
                Arc::new(StringArray::from(vec![Some("x\n"), Some("y")])),
                Arc::new(Float64Array::from(vec![1.5, f64::NAN])),
                Arc::new(UInt64Array::from(vec![u64::MAX, 0])),
            ],
        )
        .unwrap();
        let mut out = String::new();
        let mut first = true;
        let n = JsonRows::new(&schema)
            .write(&batch, &mut out, &mut first, "\n", "")
            .unwrap();
        assert_eq!(n, 2);
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(
            lines[0],
            r#"{"a":1,"b\"":"x\n","c":1.5,"d":"18446744073709551615"}"#
        );
        assert_eq!(lines[1], r#"{"a":null,"b\"":"y","c":"NaN","d":"0"}"#);
        for l in lines {
            serde_json::from_str::<serde_json::Value>(l).unwrap();
        }
    }

    #[test]
    fn null_arrays_are_null() {
        let a: ArrayRef = Arc::new(datafusion::arrow::array::NullArray::new(2));
        let t = text_array(&a).unwrap();
        assert_eq!(t.null_count(), 2);
    }
}
