//! Rows of `COPY ... TO STDOUT`, written from Arrow batches in
//! PostgreSQL's text, CSV or binary format.
//!
//! Values are written as PostgreSQL's output functions write them:
//! integers in decimal, floats in their shortest exact form (`1e+20`,
//! `Infinity`, `NaN`), booleans `t`/`f`, `bytea` as `\x` and hex, dates
//! `2024-03-01`, timestamps `2024-03-01 12:30:00.5[+00]`; other Arrow
//! types as their text. In binary format integers are `int8`, floats
//! `float8`, booleans one byte, dates, timestamps and decimals in their
//! send forms ([`crate::pg_forms`]), `jsonb` with its version byte,
//! anything else its text.

use datafusion::arrow::array::{Array, ArrayRef, AsArray, RecordBatch};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{
    DataType, Date32Type, Decimal128Type, Field, Float64Type, Int64Type, IntervalMonthDayNanoType,
    IntervalUnit, Schema, TimeUnit, TimestampMicrosecondType,
};
use silt::value::{decimal, temporal};

use super::decode::BINARY_SIGNATURE;
use super::{CopyFormat, CopyOptions, ForceQuote};
use crate::convert::PG_TYPE_KEY;
use crate::error::SqlError;
use crate::pg_forms;

/// Row `r` of an IntervalMonthDayNano array.
fn interval_at(a: &ArrayRef, r: usize) -> silt::value::interval::Interval {
    let v = a.as_primitive::<IntervalMonthDayNanoType>().value(r);
    silt::value::interval::Interval::from_month_day_nano(v.months, v.days, v.nanoseconds)
}

/// Writes one `COPY ... TO` result.
#[derive(Debug)]
pub struct Encoder {
    opts: CopyOptions,
    names: Vec<String>,
    /// Per column: always quoted (CSV `FORCE_QUOTE`).
    force: Vec<bool>,
}

/// One column of a batch, in the type it is written as.
enum Col {
    Int(ArrayRef),
    Float(ArrayRef),
    Bool(ArrayRef),
    Bytes(ArrayRef),
    /// Date32.
    Date(ArrayRef),
    /// Timestamp(µs); with a zone or not.
    Time(ArrayRef, bool),
    /// Decimal128 of this scale.
    Numeric(ArrayRef, u8),
    /// JSON text of a `jsonb` column.
    Json(ArrayRef),
    /// IntervalMonthDayNano.
    Interval(ArrayRef),
    Text(ArrayRef),
    /// A list: its elements as a column, and their PostgreSQL type's oid.
    List(ArrayRef, Box<Col>, u32),
}

impl Col {
    fn of(a: &ArrayRef, f: &Field) -> Result<Col, SqlError> {
        let to = |t: &DataType| cast(a, t).map_err(|e| SqlError::Invalid(e.to_string()));
        if f.metadata().get(PG_TYPE_KEY).map(String::as_str) == Some("jsonb") {
            return Ok(Col::Json(to(&DataType::Utf8)?));
        }
        Ok(match a.data_type() {
            DataType::Date32 | DataType::Date64 => Col::Date(to(&DataType::Date32)?),
            DataType::Timestamp(_, tz) => Col::Time(
                to(&DataType::Timestamp(TimeUnit::Microsecond, tz.clone()))?,
                tz.is_some(),
            ),
            DataType::Decimal128(_, s) => Col::Numeric(a.clone(), (*s).max(0) as u8),
            DataType::Interval(_) | DataType::Duration(_) => {
                Col::Interval(to(&DataType::Interval(IntervalUnit::MonthDayNano))?)
            }
            DataType::Int8
            | DataType::Int16
            | DataType::Int32
            | DataType::Int64
            | DataType::UInt8
            | DataType::UInt16
            | DataType::UInt32 => Col::Int(to(&DataType::Int64)?),
            DataType::Float16 | DataType::Float32 | DataType::Float64 => {
                Col::Float(to(&DataType::Float64)?)
            }
            DataType::Boolean => Col::Bool(a.clone()),
            DataType::Binary | DataType::LargeBinary | DataType::BinaryView => {
                Col::Bytes(to(&DataType::Binary)?)
            }
            DataType::List(item) | DataType::LargeList(item) | DataType::FixedSizeList(item, _) => {
                let list = to(&DataType::List(item.clone()))?;
                let values = list.as_list::<i32>().values().clone();
                let elems = Col::of(&values, item)?;
                let oid = u32::try_from(crate::pg_catalog::types::of_arrow(item.data_type()))
                    .unwrap_or(25);
                Col::List(list, Box::new(elems), oid)
            }
            DataType::Null => Col::Text(to(&DataType::Utf8)?),
            _ => Col::Text(to(&DataType::Utf8)?),
        })
    }

    fn array(&self) -> &ArrayRef {
        match self {
            Col::Int(a)
            | Col::Float(a)
            | Col::Bool(a)
            | Col::Bytes(a)
            | Col::Date(a)
            | Col::Time(a, _)
            | Col::Numeric(a, _)
            | Col::Json(a)
            | Col::Interval(a)
            | Col::List(a, ..)
            | Col::Text(a) => a,
        }
    }

    /// The value at `r` as text (`None`: NULL), into `out`.
    fn text(&self, r: usize, out: &mut Vec<u8>) {
        match self {
            Col::Int(a) => out.extend_from_slice(
                a.as_primitive::<Int64Type>()
                    .value(r)
                    .to_string()
                    .as_bytes(),
            ),
            Col::Float(a) => {
                out.extend_from_slice(pg_float(a.as_primitive::<Float64Type>().value(r)).as_bytes())
            }
            Col::Bool(a) => out.push(if a.as_boolean().value(r) { b't' } else { b'f' }),
            Col::Bytes(a) => {
                out.extend_from_slice(b"\\x");
                for b in a.as_binary::<i32>().value(r) {
                    out.extend_from_slice(format!("{b:02x}").as_bytes());
                }
            }
            Col::Date(a) => {
                let d = i64::from(a.as_primitive::<Date32Type>().value(r));
                out.extend_from_slice(
                    temporal::format_date(d)
                        .unwrap_or_else(|| d.to_string())
                        .as_bytes(),
                );
            }
            Col::Time(a, zone) => {
                let m = a.as_primitive::<TimestampMicrosecondType>().value(r);
                out.extend_from_slice(
                    temporal::format_timestamp(m, *zone)
                        .unwrap_or_else(|| m.to_string())
                        .as_bytes(),
                );
            }
            Col::Numeric(a, scale) => out.extend_from_slice(
                decimal::format_units(a.as_primitive::<Decimal128Type>().value(r), *scale)
                    .as_bytes(),
            ),
            Col::Json(a) | Col::Text(a) => {
                out.extend_from_slice(a.as_string::<i32>().value(r).as_bytes())
            }
            Col::Interval(a) => out.extend_from_slice(interval_at(a, r).to_postgres().as_bytes()),
            Col::List(a, elems, _) => {
                let range = list_range(a, r);
                let mut texts = Vec::with_capacity(range.len());
                for i in range {
                    let mut t = Vec::new();
                    let null = elems.array().is_null(i);
                    if !null {
                        elems.text(i, &mut t);
                    }
                    texts.push((!null).then(|| String::from_utf8_lossy(&t).into_owned()));
                }
                let lit = silt::value::array::format_literal(texts.iter().map(|t| t.as_deref()));
                out.extend_from_slice(lit.as_bytes());
            }
        }
    }

    /// The value at `r` in binary form, with its length first.
    fn binary(&self, r: usize, out: &mut Vec<u8>) {
        let mut put = |b: &[u8]| {
            out.extend_from_slice(&(b.len() as i32).to_be_bytes());
            out.extend_from_slice(b);
        };
        match self {
            Col::Int(a) => put(&a.as_primitive::<Int64Type>().value(r).to_be_bytes()),
            Col::Float(a) => put(&a.as_primitive::<Float64Type>().value(r).to_be_bytes()),
            Col::Bool(a) => put(&[u8::from(a.as_boolean().value(r))]),
            Col::Bytes(a) => put(a.as_binary::<i32>().value(r)),
            Col::Date(a) => put(&pg_forms::date_send(i64::from(
                a.as_primitive::<Date32Type>().value(r),
            ))),
            Col::Time(a, _) => put(&pg_forms::timestamp_send(
                a.as_primitive::<TimestampMicrosecondType>().value(r),
            )),
            Col::Numeric(a, scale) => {
                let mut b = Vec::with_capacity(16);
                pg_forms::numeric_send(a.as_primitive::<Decimal128Type>().value(r), *scale, &mut b);
                put(&b);
            }
            Col::Json(a) => {
                let t = a.as_string::<i32>().value(r).as_bytes();
                let mut b = Vec::with_capacity(t.len() + 1);
                b.push(1);
                b.extend_from_slice(t);
                put(&b);
            }
            Col::Text(a) => put(a.as_string::<i32>().value(r).as_bytes()),
            Col::Interval(a) => put(&pg_forms::interval_send(&interval_at(a, r))),
            Col::List(a, elems, oid) => {
                let range = list_range(a, r);
                let has_nulls = range.clone().any(|i| elems.array().is_null(i));
                let mut b = Vec::new();
                pg_forms::array_header(*oid, range.len(), has_nulls, &mut b);
                for i in range {
                    if elems.array().is_null(i) {
                        b.extend_from_slice(&(-1i32).to_be_bytes());
                    } else {
                        elems.binary(i, &mut b);
                    }
                }
                put(&b);
            }
        }
    }
}

/// The positions in a list column's values of row `r`'s elements.
fn list_range(a: &ArrayRef, r: usize) -> std::ops::Range<usize> {
    let offsets = a.as_list::<i32>().value_offsets();
    offsets[r] as usize..offsets[r + 1] as usize
}

/// A double as PostgreSQL's `float8out` writes it (shortest exact digits;
/// exponent form below 1e-4 and from 1e15).
pub fn pg_float(v: f64) -> String {
    if v.is_nan() {
        return "NaN".to_owned();
    }
    if v.is_infinite() {
        return if v > 0.0 { "Infinity" } else { "-Infinity" }.to_owned();
    }
    if v == 0.0 {
        return if v.is_sign_negative() { "-0" } else { "0" }.to_owned();
    }
    let exp = v.abs().log10().floor();
    if !(-4.0..15.0).contains(&exp) {
        let s = format!("{v:e}");
        if let Some((m, e)) = s.split_once('e') {
            let (sign, digits) = match e.strip_prefix('-') {
                Some(d) => ('-', d),
                None => ('+', e),
            };
            return format!("{m}e{sign}{digits:0>2}");
        }
        return s;
    }
    format!("{v}")
}

impl Encoder {
    /// An encoder for a result with `schema`.
    pub fn new(opts: CopyOptions, schema: &Schema) -> Result<Encoder, SqlError> {
        let names: Vec<String> = schema.fields().iter().map(|f| f.name().clone()).collect();
        let force = match &opts.force_quote {
            ForceQuote::None => vec![false; names.len()],
            ForceQuote::All => vec![true; names.len()],
            ForceQuote::Columns(cols) => {
                if let Some(c) = cols.iter().find(|c| !names.contains(c)) {
                    return Err(SqlError::Invalid(format!(
                        "FORCE_QUOTE column \"{c}\" is not in the COPY"
                    )));
                }
                names.iter().map(|n| cols.contains(n)).collect()
            }
        };
        Ok(Encoder { opts, names, force })
    }

    /// What comes before the first row: the binary header, or the header
    /// line of column names (`HEADER`).
    pub fn start(&self, out: &mut Vec<u8>) {
        match self.opts.format {
            CopyFormat::Binary => {
                out.extend_from_slice(BINARY_SIGNATURE);
                out.extend_from_slice(&0i32.to_be_bytes());
                out.extend_from_slice(&0i32.to_be_bytes());
            }
            _ if self.opts.header => {
                let mut cell = Vec::new();
                for (i, n) in self.names.iter().enumerate() {
                    if i > 0 {
                        out.push(self.opts.delimiter);
                    }
                    cell.clear();
                    cell.extend_from_slice(n.as_bytes());
                    self.put_text(&cell, i, out);
                }
                out.push(b'\n');
            }
            _ => {}
        }
    }

    /// The rows of `batch`, appended to `out`.
    pub fn batch(&self, batch: &RecordBatch, out: &mut Vec<u8>) -> Result<(), SqlError> {
        let cols = self.columns(batch)?;
        let mut cell = Vec::new();
        for r in 0..batch.num_rows() {
            self.row(&cols, r, &mut cell, out);
        }
        Ok(())
    }

    /// The rows of `batch`, each on its own (a PostgreSQL server sends
    /// one `CopyData` message per row, and clients count them).
    pub fn batch_rows(&self, batch: &RecordBatch) -> Result<Vec<Vec<u8>>, SqlError> {
        let cols = self.columns(batch)?;
        let mut cell = Vec::new();
        let mut rows = Vec::with_capacity(batch.num_rows());
        for r in 0..batch.num_rows() {
            let mut out = Vec::with_capacity(16 * cols.len());
            self.row(&cols, r, &mut cell, &mut out);
            rows.push(out);
        }
        Ok(rows)
    }

    fn columns(&self, batch: &RecordBatch) -> Result<Vec<Col>, SqlError> {
        if batch.num_columns() != self.names.len() {
            return Err(SqlError::Invalid(format!(
                "a batch of {} columns in a COPY of {}",
                batch.num_columns(),
                self.names.len()
            )));
        }
        let schema = batch.schema();
        batch
            .columns()
            .iter()
            .zip(schema.fields())
            .map(|(a, f)| Col::of(a, f))
            .collect()
    }

    fn row(&self, cols: &[Col], r: usize, cell: &mut Vec<u8>, out: &mut Vec<u8>) {
        if self.opts.format == CopyFormat::Binary {
            out.extend_from_slice(&(cols.len() as i16).to_be_bytes());
            for c in cols {
                if c.array().is_null(r) {
                    out.extend_from_slice(&(-1i32).to_be_bytes());
                } else {
                    c.binary(r, out);
                }
            }
            return;
        }
        for (i, c) in cols.iter().enumerate() {
            if i > 0 {
                out.push(self.opts.delimiter);
            }
            if c.array().is_null(r) {
                out.extend_from_slice(self.opts.null.as_bytes());
                continue;
            }
            cell.clear();
            c.text(r, cell);
            self.put_text(cell, i, out);
        }
        out.push(b'\n');
    }

    /// What comes after the last row: the binary trailer.
    pub fn finish(&self, out: &mut Vec<u8>) {
        if self.opts.format == CopyFormat::Binary {
            out.extend_from_slice(&(-1i16).to_be_bytes());
        }
    }

    /// One non-null value's text, escaped (text format) or quoted as
    /// needed (CSV).
    fn put_text(&self, cell: &[u8], col: usize, out: &mut Vec<u8>) {
        let d = self.opts.delimiter;
        if self.opts.format == CopyFormat::Text {
            for &b in cell {
                match b {
                    b'\\' => out.extend_from_slice(b"\\\\"),
                    b'\n' => out.extend_from_slice(b"\\n"),
                    b'\r' => out.extend_from_slice(b"\\r"),
                    b'\t' if d == b'\t' => out.extend_from_slice(b"\\t"),
                    8 => out.extend_from_slice(b"\\b"),
                    11 => out.extend_from_slice(b"\\v"),
                    12 => out.extend_from_slice(b"\\f"),
                    b if b == d => {
                        out.push(b'\\');
                        out.push(b);
                    }
                    b => out.push(b),
                }
            }
            return;
        }
        let (q, e) = (self.opts.quote, self.opts.escape);
        let needs = self.force[col]
            || cell == self.opts.null.as_bytes()
            || cell == b"\\."
            || cell
                .iter()
                .any(|&b| b == d || b == q || b == b'\n' || b == b'\r');
        if !needs {
            out.extend_from_slice(cell);
            return;
        }
        out.push(q);
        for &b in cell {
            if b == q || b == e {
                out.push(e);
            }
            out.push(b);
        }
        out.push(q);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::copy::decode::{Decoder, Step};
    use datafusion::arrow::array::{
        BinaryArray, BooleanArray, Float64Array, Int64Array, StringArray,
    };
    use datafusion::arrow::datatypes::Field;
    use std::sync::Arc;

    fn batch() -> RecordBatch {
        let schema = Arc::new(Schema::new(vec![
            Field::new("id", DataType::Int64, true),
            Field::new("name", DataType::Utf8, true),
            Field::new("x", DataType::Float64, true),
            Field::new("ok", DataType::Boolean, true),
            Field::new("raw", DataType::Binary, true),
        ]));
        RecordBatch::try_new(
            schema,
            vec![
                Arc::new(Int64Array::from(vec![Some(1), None, Some(-3)])),
                Arc::new(StringArray::from(vec![
                    Some("a\tb"),
                    Some(""),
                    Some("q\"uote,\nnl\\"),
                ])),
                Arc::new(Float64Array::from(vec![
                    Some(0.1),
                    Some(1e20),
                    Some(f64::NEG_INFINITY),
                ])),
                Arc::new(BooleanArray::from(vec![Some(true), Some(false), None])),
                Arc::new(BinaryArray::from(vec![
                    Some(&b"\x00\xff"[..]),
                    None,
                    Some(b""),
                ])),
            ],
        )
        .expect("batch")
    }

    fn encode(opts: &CopyOptions) -> Vec<u8> {
        let b = batch();
        let e = Encoder::new(opts.clone(), &b.schema()).expect("encoder");
        let mut out = Vec::new();
        e.start(&mut out);
        e.batch(&b, &mut out).expect("encode");
        e.finish(&mut out);
        out
    }

    /// What the decoder reads back from an encoding: the same cells.
    fn decode(opts: &CopyOptions, data: &[u8]) -> Vec<Vec<Option<Vec<u8>>>> {
        let mut d = Decoder::new(opts, 5);
        let mut at = 0;
        let mut rows = Vec::new();
        loop {
            match d.next(&data[at..], true).expect("decode") {
                Step::Row { used } => {
                    rows.push(d.fields().map(|f| f.map(<[u8]>::to_vec)).collect());
                    at += used;
                }
                Step::Skip { used } => at += used,
                Step::End { .. } | Step::NeedMore => break,
            }
        }
        rows
    }

    #[test]
    fn text_output_is_postgres_text() {
        let out = encode(&CopyOptions::defaults(CopyFormat::Text));
        assert_eq!(
            String::from_utf8_lossy(&out),
            "1\ta\\tb\t0.1\tt\t\\\\x00ff\n\\N\t\t1e+20\tf\t\\N\n-3\tq\"uote,\\nnl\\\\\t-Infinity\t\\N\t\\\\x\n"
        );
    }

    #[test]
    fn csv_output_quotes_what_it_must_and_reads_back() {
        let mut o = CopyOptions::defaults(CopyFormat::Csv);
        o.header = true;
        let out = encode(&o);
        let text = String::from_utf8_lossy(&out);
        assert!(
            text.starts_with("id,name,x,ok,raw\n1,a\tb,0.1,t,\\x00ff\n,\"\",1e+20,f,\n"),
            "{text}"
        );
        let rows = decode(&o, &out);
        assert_eq!(rows.len(), 3);
        assert_eq!(rows[1][0], None);
        assert_eq!(rows[1][1], Some(vec![]));
        assert_eq!(rows[2][1].as_deref(), Some(&b"q\"uote,\nnl\\"[..]));
    }

    #[test]
    fn binary_output_reads_back() {
        let o = CopyOptions::defaults(CopyFormat::Binary);
        let out = encode(&o);
        let rows = decode(&o, &out);
        assert_eq!(rows.len(), 3);
        assert_eq!(rows[2][0].as_deref(), Some(&(-3i64).to_be_bytes()[..]));
        assert_eq!(rows[0][4].as_deref(), Some(&b"\x00\xff"[..]));
        assert_eq!(rows[1][4], None);
    }

    #[test]
    fn floats_as_postgres_writes_them() {
        assert_eq!(pg_float(1e-5), "1e-05");
        assert_eq!(pg_float(123.25), "123.25");
        assert_eq!(pg_float(1e15), "1e+15");
        assert_eq!(pg_float(-2.5e-300), "-2.5e-300");
        assert_eq!(pg_float(f64::NAN), "NaN");
    }
}
