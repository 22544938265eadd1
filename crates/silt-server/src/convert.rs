//! Arrow values for the two front ends: PostgreSQL types and rows, and JSON.
//!
//! PostgreSQL types: every integer type -> `int8`, floats -> `float8`,
//! `Boolean` -> `bool`, binary types -> `bytea`, dates -> `date`,
//! timestamps -> `timestamp` or `timestamptz` (microseconds), decimals ->
//! `numeric`, `jsonb` columns (by their field metadata) -> `jsonb`, lists
//! -> `int8[]`, `float8[]`, `bool[]` or `text[]` by their elements,
//! everything else (strings, geometry WKT, ...) -> `text`, formatted as
//! DataFusion prints it. JSON: integers and finite floats are numbers,
//! non-finite floats the strings `"NaN"`, `"Infinity"`, `"-Infinity"`,
//! binary values base64 strings, everything else as for `text`.

use std::fmt::Write as _;
use std::sync::Arc;

use base64::Engine as _;
use bytes::{BufMut, BytesMut};
use datafusion::arrow::array::{
    Array, ArrayRef, AsArray, BinaryArray, BooleanArray, Date32Array, Decimal128Array,
    Float64Array, Int64Array, IntervalMonthDayNanoArray, ListArray, RecordBatch, StringArray,
    StringBuilder, TimestampMicrosecondArray,
};
use datafusion::arrow::compute::{CastOptions, cast_with_options};
use datafusion::arrow::datatypes::{
    DataType, Date32Type, Decimal128Type, Field, Float64Type, Int64Type, IntervalMonthDayNanoType,
    IntervalUnit, TimeUnit, TimestampMicrosecondType,
};
use datafusion::arrow::error::ArrowError;
use datafusion::arrow::util::display::{ArrayFormatter, FormatOptions};
use pgwire::api::Type;
use pgwire::types::ToSqlText;
use postgres_types::{IsNull, Kind, ToSql, to_sql_checked};
use silt::value::interval::Interval;
use silt::value::{decimal, temporal};
use silt_sql::pg_forms;

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
        DataType::Date32 | DataType::Date64 => Type::DATE,
        DataType::Timestamp(_, None) => Type::TIMESTAMP,
        DataType::Timestamp(_, Some(_)) => Type::TIMESTAMPTZ,
        DataType::Decimal32(..)
        | DataType::Decimal64(..)
        | DataType::Decimal128(..)
        | DataType::Decimal256(..) => Type::NUMERIC,
        DataType::Interval(_) | DataType::Duration(_) => Type::INTERVAL,
        DataType::Dictionary(_, v) => pg_type(v),
        DataType::List(f) | DataType::LargeList(f) | DataType::FixedSizeList(f, _) => {
            match pg_type(f.data_type()) {
                Type::INT8 => Type::INT8_ARRAY,
                Type::FLOAT8 => Type::FLOAT8_ARRAY,
                Type::BOOL => Type::BOOL_ARRAY,
                Type::DATE => Type::DATE_ARRAY,
                Type::TIMESTAMP => Type::TIMESTAMP_ARRAY,
                Type::TIMESTAMPTZ => Type::TIMESTAMPTZ_ARRAY,
                Type::NUMERIC => Type::NUMERIC_ARRAY,
                Type::INTERVAL => Type::INTERVAL_ARRAY,
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
        Some("jsonb") if f.data_type() == &DataType::Utf8 => Type::JSONB,
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
    Date(Date32Array),
    /// Microseconds; with a zone (`timestamptz`) or not.
    Time(TimestampMicrosecondArray, bool),
    /// Units of 10^-scale.
    Numeric(Decimal128Array, u8),
    /// JSON text (`jsonb`).
    Json(StringArray),
    Interval(IntervalMonthDayNanoArray),
    /// An array column: its lists, elements converted for the element type.
    List(ListArray, Box<PgColumn>),
}

/// One value of a type whose wire forms Silt writes itself (the binary
/// forms of [`silt_sql::pg_forms`], PostgreSQL's text output).
#[derive(Debug)]
pub enum PgCell<'a> {
    Date(i64),
    Time(i64, bool),
    Numeric(i128, u8),
    Json(&'a str),
    Interval(Interval),
}

impl PgColumn {
    /// Row `r` of a column of the types [`PgCell`] covers (`None` for null
    /// or another column type).
    pub fn cell(&self, r: usize) -> Option<PgCell<'_>> {
        match self {
            PgColumn::Date(a) if !a.is_null(r) => Some(PgCell::Date(i64::from(a.value(r)))),
            PgColumn::Time(a, zone) if !a.is_null(r) => Some(PgCell::Time(a.value(r), *zone)),
            PgColumn::Numeric(a, scale) if !a.is_null(r) => {
                Some(PgCell::Numeric(a.value(r), *scale))
            }
            PgColumn::Json(a) if !a.is_null(r) => Some(PgCell::Json(a.value(r))),
            PgColumn::Interval(a) if !a.is_null(r) => {
                let v = a.value(r);
                Some(PgCell::Interval(Interval::from_month_day_nano(
                    v.months,
                    v.days,
                    v.nanoseconds,
                )))
            }
            _ => None,
        }
    }
}

impl PgCell<'_> {
    fn text(&self) -> String {
        match self {
            PgCell::Date(d) => temporal::format_date(*d).unwrap_or_else(|| d.to_string()),
            PgCell::Time(m, zone) => {
                temporal::format_timestamp(*m, *zone).unwrap_or_else(|| m.to_string())
            }
            PgCell::Numeric(u, scale) => decimal::format_units(*u, *scale),
            PgCell::Json(t) => (*t).to_owned(),
            PgCell::Interval(i) => i.to_postgres(),
        }
    }
}

impl ToSql for PgCell<'_> {
    fn to_sql(
        &self,
        ty: &Type,
        out: &mut BytesMut,
    ) -> Result<IsNull, Box<dyn std::error::Error + Sync + Send>> {
        match self {
            PgCell::Date(d) => out.put_slice(&pg_forms::date_send(*d)),
            PgCell::Time(m, _) => out.put_slice(&pg_forms::timestamp_send(*m)),
            PgCell::Numeric(u, scale) => {
                let mut b = Vec::with_capacity(16);
                pg_forms::numeric_send(*u, *scale, &mut b);
                out.put_slice(&b);
            }
            PgCell::Json(t) => {
                if *ty == Type::JSONB {
                    out.put_u8(1);
                }
                out.put_slice(t.as_bytes());
            }
            PgCell::Interval(i) => out.put_slice(&pg_forms::interval_send(i)),
        }
        Ok(IsNull::No)
    }

    fn accepts(_: &Type) -> bool {
        true
    }

    to_sql_checked!();
}

impl ToSqlText for PgCell<'_> {
    fn to_sql_text(
        &self,
        _: &Type,
        out: &mut BytesMut,
        _: &pgwire::types::format::FormatOptions,
    ) -> Result<IsNull, Box<dyn std::error::Error + Sync + Send>> {
        out.put_slice(self.text().as_bytes());
        Ok(IsNull::No)
    }
}

/// One array value, as the encoder takes it.
pub enum PgList<'a> {
    Int(PgArray<i64>),
    Float(PgArray<f64>),
    Bool(PgArray<bool>),
    Text(PgArray<String>),
    /// Dates, times, decimals, intervals, JSON.
    Cells(PgArray<PgCell<'a>>),
}

/// An array's elements (`None`: null): its binary form is PostgreSQL's
/// `array_send`, its text form `{...}` with elements quoted where
/// PostgreSQL quotes them ([`silt::value::array::format_literal`]).
#[derive(Debug)]
pub struct PgArray<T>(pub Vec<Option<T>>);

impl<T: ToSql> ToSql for PgArray<T> {
    fn to_sql(
        &self,
        ty: &Type,
        out: &mut BytesMut,
    ) -> Result<IsNull, Box<dyn std::error::Error + Sync + Send>> {
        self.0.to_sql(ty, out)
    }

    fn accepts(_: &Type) -> bool {
        true
    }

    to_sql_checked!();
}

impl<T: ToSqlText> ToSqlText for PgArray<T> {
    fn to_sql_text(
        &self,
        ty: &Type,
        out: &mut BytesMut,
        format: &pgwire::types::format::FormatOptions,
    ) -> Result<IsNull, Box<dyn std::error::Error + Sync + Send>> {
        let member = match ty.kind() {
            Kind::Array(m) => m.clone(),
            _ => Type::TEXT,
        };
        let mut texts = Vec::with_capacity(self.0.len());
        for e in &self.0 {
            texts.push(match e {
                None => None,
                Some(v) => {
                    let mut b = BytesMut::new();
                    v.to_sql_text(&member, &mut b, format)?;
                    Some(String::from_utf8_lossy(&b).into_owned())
                }
            });
        }
        let text = silt::value::array::format_literal(texts.iter().map(|t| t.as_deref()));
        out.put_slice(text.as_bytes());
        Ok(IsNull::No)
    }
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
            // Vectors are arrays to postgres-types, but sent as text.
            Type::INT2_VECTOR | Type::OID_VECTOR => PgColumn::Text(vector_text(array)?),
            _ if matches!(ty.kind(), Kind::Array(_)) => {
                let elem = match ty.kind() {
                    Kind::Array(e) => e.clone(),
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
            Type::DATE => PgColumn::Date(
                cast_with_options(array, &DataType::Date32, &strict())?
                    .as_primitive::<Date32Type>()
                    .clone(),
            ),
            Type::TIMESTAMP | Type::TIMESTAMPTZ => {
                let tz = match array.data_type() {
                    DataType::Timestamp(_, tz) => tz.clone(),
                    _ => None,
                };
                let zone = tz.is_some();
                PgColumn::Time(
                    cast_with_options(
                        array,
                        &DataType::Timestamp(TimeUnit::Microsecond, tz),
                        &strict(),
                    )?
                    .as_primitive::<TimestampMicrosecondType>()
                    .clone(),
                    zone,
                )
            }
            Type::NUMERIC => {
                let (p, s) = match array.data_type() {
                    DataType::Decimal128(p, s) => (*p, *s),
                    DataType::Decimal32(p, s) | DataType::Decimal64(p, s) => (*p, *s),
                    _ => (38, 10),
                };
                let s = s.clamp(0, 38);
                PgColumn::Numeric(
                    cast_with_options(array, &DataType::Decimal128(p.min(38), s), &strict())?
                        .as_primitive::<Decimal128Type>()
                        .clone(),
                    s as u8,
                )
            }
            Type::JSONB => PgColumn::Json(text_array(array)?),
            Type::INTERVAL => PgColumn::Interval(
                cast_with_options(
                    array,
                    &DataType::Interval(IntervalUnit::MonthDayNano),
                    &strict(),
                )?
                .as_primitive::<IntervalMonthDayNanoType>()
                .clone(),
            ),
            _ => PgColumn::Text(text_array(array)?),
        })
    }

    /// Row `row`'s array (`None` for null or a column that is not one).
    pub fn list(&self, row: usize) -> Option<PgList<'_>> {
        let PgColumn::List(list, values) = self else {
            return None;
        };
        if list.is_null(row) {
            return None;
        }
        let offsets = list.value_offsets();
        let range = offsets[row] as usize..offsets[row + 1] as usize;
        Some(match values.as_ref() {
            PgColumn::Int(a) => PgList::Int(PgArray(
                range.map(|i| (!a.is_null(i)).then(|| a.value(i))).collect(),
            )),
            PgColumn::Float(a) => PgList::Float(PgArray(
                range.map(|i| (!a.is_null(i)).then(|| a.value(i))).collect(),
            )),
            PgColumn::Bool(a) => PgList::Bool(PgArray(
                range.map(|i| (!a.is_null(i)).then(|| a.value(i))).collect(),
            )),
            PgColumn::Text(a) => PgList::Text(PgArray(
                range
                    .map(|i| (!a.is_null(i)).then(|| a.value(i).to_owned()))
                    .collect(),
            )),
            PgColumn::Date(_)
            | PgColumn::Time(..)
            | PgColumn::Numeric(..)
            | PgColumn::Interval(_)
            | PgColumn::Json(_) => PgList::Cells(PgArray(range.map(|i| values.cell(i)).collect())),
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
    /// JSON text, written as it is when it is JSON.
    Json(StringArray),
}

/// Writes record batches as JSON objects, one per row, keys in column order;
/// the values of `jsonb` columns are written as the JSON they hold.
pub struct JsonRows {
    /// `"name":` for each column, JSON-escaped.
    keys: Vec<String>,
    /// Per column: a `jsonb` column.
    json: Vec<bool>,
}

impl JsonRows {
    pub fn new(schema: &datafusion::arrow::datatypes::Schema) -> JsonRows {
        JsonRows {
            json: schema
                .fields()
                .iter()
                .map(|f| pg_field_type(f) == Type::JSONB)
                .collect(),
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
            .enumerate()
            .map(|(i, a)| {
                if self.json.get(i) == Some(&true) {
                    Ok(JsonColumn::Json(text_array(a)?))
                } else {
                    json_column(a)
                }
            })
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
    if let DataType::List(_) | DataType::LargeList(_) | DataType::FixedSizeList(..) =
        array.data_type()
    {
        return Ok(JsonColumn::Json(json_lists(array)?));
    }
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

/// A list column as JSON arrays, each element written as a value of the
/// element type is.
fn json_lists(array: &ArrayRef) -> Result<StringArray, ArrowError> {
    let item = match array.data_type() {
        DataType::List(f) | DataType::LargeList(f) | DataType::FixedSizeList(f, _) => f.clone(),
        _ => Arc::new(Field::new("item", DataType::Utf8, true)),
    };
    let list = cast_with_options(array, &DataType::List(item), &strict())?;
    let list = list.as_list::<i32>();
    let values = json_column(list.values())?;
    let offsets = list.value_offsets();
    let mut b = StringBuilder::with_capacity(list.len(), list.len() * 16);
    let mut s = String::new();
    for r in 0..list.len() {
        if list.is_null(r) {
            b.append_null();
            continue;
        }
        s.clear();
        s.push('[');
        for i in offsets[r] as usize..offsets[r + 1] as usize {
            if i > offsets[r] as usize {
                s.push(',');
            }
            write_json_value(&values, i, &mut s);
        }
        s.push(']');
        b.append_value(&s);
    }
    Ok(b.finish())
}

fn write_json_value(c: &JsonColumn, row: usize, out: &mut String) {
    let null = match c {
        JsonColumn::Int(a) => a.is_null(row),
        JsonColumn::Float(a) => a.is_null(row),
        JsonColumn::Bool(a) => a.is_null(row),
        JsonColumn::Bytes(a) => a.is_null(row),
        JsonColumn::Text(a) | JsonColumn::Json(a) => a.is_null(row),
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
        JsonColumn::Json(a)
            if serde_json::from_str::<serde::de::IgnoredAny>(a.value(row)).is_ok() =>
        {
            out.push_str(a.value(row));
        }
        JsonColumn::Text(a) | JsonColumn::Json(a) => {
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
