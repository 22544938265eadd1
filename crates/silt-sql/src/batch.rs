//! Records into Arrow columns as a scan reads them: a stored record is
//! read in place ([`silt::value::visit_fields`]) and only the projected
//! fields are appended, straight into the column builders, without a
//! [`Value`] per record; a record that comes decoded (an index hit) is read
//! by field name. Both give the columns [`crate::convert`] describes; the
//! decoded records of inserts and the spatial join go through here too
//! ([`crate::convert::records_to_batch`]).

use std::sync::Arc;

use datafusion::arrow::array::builder::NullBufferBuilder;
use datafusion::arrow::array::{
    ArrayRef, BinaryBuilder, BooleanBuilder, Date32Builder, Decimal128Builder, Float64Builder,
    Int64Builder, IntervalMonthDayNanoBuilder, ListArray, RecordBatch, RecordBatchOptions,
    StringBuilder, TimestampMicrosecondBuilder, new_null_array,
};
use datafusion::arrow::buffer::OffsetBuffer;
use datafusion::arrow::datatypes::{DataType, FieldRef, IntervalMonthDayNano, SchemaRef};
use datafusion::error::Result as DfResult;
use silt::value::{FieldView, decimal, decode_value, to_json, visit_fields};
use silt::{FieldType, Value};

use crate::convert::ColumnInfo;

/// A record as an access path gives it.
pub enum Rec {
    /// The stored encoding (primary-index scans).
    Encoded(Vec<u8>),
    /// Decoded already (index hits, gets).
    Decoded(Value),
}

enum Col {
    Int(Int64Builder),
    Double(Float64Builder),
    Bool(BooleanBuilder),
    Bin(BinaryBuilder),
    /// Days since 1970-01-01 (stored ints).
    Date(Date32Builder),
    /// Microseconds since 1970-01-01 (stored ints).
    Time(TimestampMicrosecondBuilder),
    /// Units of 10^-scale (stored text).
    Dec(Decimal128Builder, u8),
    /// Months, days, nanoseconds (stored ISO 8601 text).
    Interval(IntervalMonthDayNanoBuilder),
    /// WKT for geometries, the JSON text for `any` and `json`.
    Text {
        b: StringBuilder,
        any: bool,
    },
    /// The undeclared fields (all but `declared`) as a JSON object.
    Rest {
        b: StringBuilder,
        declared: Arc<[String]>,
    },
    /// An array column: the elements of every row in `items`, row `r`'s
    /// from `offsets[r]` to `offsets[r + 1]`.
    List {
        field: FieldRef,
        items: Box<Col>,
        offsets: Vec<i32>,
        nulls: NullBufferBuilder,
    },
}

impl Col {
    /// A builder for values of `c`'s Arrow type.
    fn of(c: &ColumnInfo, capacity: usize) -> Col {
        match c.data_type {
            _ if c.rest.is_some() => Col::Rest {
                b: StringBuilder::with_capacity(capacity, capacity * 16),
                declared: c.rest.clone().unwrap_or_else(|| Arc::from(Vec::new())),
            },
            DataType::Int64 => Col::Int(Int64Builder::with_capacity(capacity)),
            DataType::Float64 => Col::Double(Float64Builder::with_capacity(capacity)),
            DataType::Boolean => Col::Bool(BooleanBuilder::with_capacity(capacity)),
            DataType::Binary => Col::Bin(BinaryBuilder::with_capacity(capacity, 0)),
            DataType::Date32 => Col::Date(Date32Builder::with_capacity(capacity)),
            DataType::Timestamp(_, ref tz) => Col::Time(
                TimestampMicrosecondBuilder::with_capacity(capacity).with_timezone_opt(tz.clone()),
            ),
            DataType::Interval(_) => {
                Col::Interval(IntervalMonthDayNanoBuilder::with_capacity(capacity))
            }
            DataType::Decimal128(p, s) => Col::Dec(
                Decimal128Builder::with_capacity(capacity)
                    .with_data_type(DataType::Decimal128(p, s)),
                s.max(0) as u8,
            ),
            DataType::List(ref field) => match c.element() {
                Some(elem) => Col::List {
                    field: field.clone(),
                    items: Box::new(Col::of(&elem, capacity)),
                    offsets: {
                        let mut o = Vec::with_capacity(capacity + 1);
                        o.push(0);
                        o
                    },
                    nulls: NullBufferBuilder::new(capacity),
                },
                None => Col::text(c, capacity),
            },
            _ => Col::text(c, capacity),
        }
    }

    fn text(c: &ColumnInfo, capacity: usize) -> Col {
        Col::Text {
            b: StringBuilder::with_capacity(capacity, capacity * 8),
            any: matches!(c.ty, FieldType::Any | FieldType::Json),
        }
    }

    fn finish(&mut self) -> ArrayRef {
        match self {
            Col::Int(b) => Arc::new(b.finish()),
            Col::Double(b) => Arc::new(b.finish()),
            Col::Bool(b) => Arc::new(b.finish()),
            Col::Bin(b) => Arc::new(b.finish()),
            Col::Date(b) => Arc::new(b.finish()),
            Col::Time(b) => Arc::new(b.finish()),
            Col::Dec(b, _) => Arc::new(b.finish()),
            Col::Interval(b) => Arc::new(b.finish()),
            Col::Text { b, .. } | Col::Rest { b, .. } => Arc::new(b.finish()),
            Col::List {
                field,
                items,
                offsets,
                nulls,
            } => {
                let rows = offsets.len() - 1;
                let offsets = OffsetBuffer::new(std::mem::replace(offsets, vec![0]).into());
                // The element builder is made from the same element type
                // as `field`, so this does not fail; if it did, the rows
                // would read as nulls rather than take the process down.
                match ListArray::try_new(field.clone(), offsets, items.finish(), nulls.finish()) {
                    Ok(a) => Arc::new(a),
                    Err(_) => new_null_array(&DataType::List(field.clone()), rows),
                }
            }
        }
    }

    /// One array: each element appended to `items` (an element that is
    /// not of the element type is null).
    fn append_list(&mut self, elems: &[Value]) {
        if let Col::List {
            items,
            offsets,
            nulls,
            ..
        } = self
        {
            for e in elems {
                append_value(items, e);
            }
            let last = offsets.last().copied().unwrap_or(0);
            // Arrow's i32 offsets: a batch holds far fewer elements (a
            // record is at most a few MiB).
            offsets.push(last.saturating_add(i32::try_from(elems.len()).unwrap_or(i32::MAX)));
            nulls.append_non_null();
        }
    }
}

/// Builds one record batch of the projected columns `cols`.
pub struct BatchBuilder<'c> {
    cols: &'c [ColumnInfo],
    builders: Vec<Col>,
    /// Whether the current row has its value of each column yet.
    filled: Vec<bool>,
    rows: usize,
    /// A column of undeclared fields is built: records are decoded whole.
    whole: bool,
}

impl<'c> BatchBuilder<'c> {
    pub fn new(cols: &'c [ColumnInfo], capacity: usize) -> BatchBuilder<'c> {
        let builders = cols.iter().map(|c| Col::of(c, capacity)).collect();
        BatchBuilder {
            cols,
            builders,
            filled: vec![false; cols.len()],
            rows: 0,
            whole: cols.iter().any(|c| c.rest.is_some()),
        }
    }

    pub fn rows(&self) -> usize {
        self.rows
    }

    pub fn push(&mut self, rec: &Rec) -> silt::Result<()> {
        match rec {
            Rec::Encoded(bytes) => self.push_encoded(bytes),
            Rec::Decoded(v) => {
                self.push_value(v);
                Ok(())
            }
        }
    }

    /// A stored record: its projected fields in place.
    pub fn push_encoded(&mut self, bytes: &[u8]) -> silt::Result<()> {
        if self.cols.is_empty() {
            // `count(*)`: only the number of rows.
            self.rows += 1;
            return Ok(());
        }
        if self.whole {
            let v = decode_value(bytes)?;
            self.push_value(&v);
            return Ok(());
        }
        self.filled.fill(false);
        let (cols, builders, filled) = (self.cols, &mut self.builders, &mut self.filled);
        let mut failed = None;
        visit_fields(
            bytes,
            |name| cols.iter().position(|c| c.name.as_bytes() == name),
            |i, view| {
                // A repeated name: the first one counts, as for `Value::get`.
                if filled[i] {
                    return;
                }
                filled[i] = true;
                if let Err(e) = append_view(&mut builders[i], view) {
                    failed.get_or_insert(e);
                }
            },
        )?;
        if let Some(e) = failed {
            return Err(e);
        }
        for (b, f) in builders.iter_mut().zip(filled.iter()) {
            if !f {
                append_null(b);
            }
        }
        self.rows += 1;
        Ok(())
    }

    /// A decoded record: its projected fields by name.
    pub fn push_value(&mut self, rec: &Value) {
        for (c, b) in self.cols.iter().zip(self.builders.iter_mut()) {
            if let Col::Rest { b, declared } = b {
                append_rest(b, declared, rec);
                continue;
            }
            match rec.get(&c.name) {
                Some(v) => append_value(b, v),
                None => append_null(b),
            }
        }
        self.rows += 1;
    }

    /// The columns built, in order.
    pub fn finish_arrays(mut self) -> Vec<ArrayRef> {
        self.builders.iter_mut().map(Col::finish).collect()
    }

    pub fn finish(self, schema: &SchemaRef) -> DfResult<RecordBatch> {
        let rows = self.rows;
        let arrays = self.finish_arrays();
        let opts = RecordBatchOptions::new().with_row_count(Some(rows));
        Ok(RecordBatch::try_new_with_options(
            schema.clone(),
            arrays,
            &opts,
        )?)
    }
}

fn append_null(b: &mut Col) {
    match b {
        Col::Int(b) => b.append_null(),
        Col::Double(b) => b.append_null(),
        Col::Bool(b) => b.append_null(),
        Col::Bin(b) => b.append_null(),
        Col::Date(b) => b.append_null(),
        Col::Time(b) => b.append_null(),
        Col::Dec(b, _) => b.append_null(),
        Col::Interval(b) => b.append_null(),
        Col::Text { b, .. } | Col::Rest { b, .. } => b.append_null(),
        Col::List { offsets, nulls, .. } => {
            offsets.push(offsets.last().copied().unwrap_or(0));
            nulls.append_null();
        }
    }
}

/// The fields of `rec` not in `declared`, as a JSON object (null when
/// there are none; the first of a repeated name, as `Value::get` reads).
fn append_rest(b: &mut StringBuilder, declared: &[String], rec: &Value) {
    let Value::Object(fields) = rec else {
        b.append_null();
        return;
    };
    let mut obj = serde_json::Map::new();
    for (name, v) in fields {
        if !declared.iter().any(|d| d == name) && !obj.contains_key(name) {
            obj.insert(name.clone(), to_json(v));
        }
    }
    if obj.is_empty() {
        b.append_null();
    } else {
        b.append_value(serde_json::Value::Object(obj).to_string());
    }
}

/// A stored date (days) as Date32; out of its range is null (the core
/// keeps stored dates within chrono's years, well inside it).
fn days32(d: i64) -> Option<i32> {
    i32::try_from(d).ok()
}

fn append_view(b: &mut Col, view: FieldView<'_>) -> silt::Result<()> {
    match (b, view) {
        (Col::Int(b), FieldView::Int(i)) => b.append_value(i),
        (Col::Double(b), FieldView::Double(d)) => b.append_value(d),
        (Col::Double(b), FieldView::Int(i)) => b.append_value(i as f64),
        (Col::Bool(b), FieldView::Bool(x)) => b.append_value(x),
        (Col::Bin(b), FieldView::Bin(x)) => b.append_value(x),
        (Col::Date(b), FieldView::Int(d)) => b.append_option(days32(d)),
        (Col::Time(b), FieldView::Int(m)) => b.append_value(m),
        (Col::Dec(b, scale), FieldView::Str(s)) => b.append_option(decimal::units(s, *scale)),
        (Col::Interval(b), FieldView::Str(s)) => b.append_option(interval_of(s)),
        (b @ Col::List { .. }, FieldView::Encoded(e)) => match decode_value(e)? {
            Value::Array(items) => b.append_list(&items),
            _ => append_null(b),
        },
        (Col::Text { b, .. }, FieldView::Null) => b.append_null(),
        (Col::Text { b, any: true }, v) => {
            let v = match v {
                FieldView::Encoded(e) => decode_value(e)?,
                v => view_value(v),
            };
            b.append_value(to_json(&v).to_string());
        }
        (Col::Text { b, .. }, FieldView::Str(s)) => b.append_value(s),
        (Col::Text { b, .. }, FieldView::Encoded(e)) => match decode_value(e)? {
            Value::Geometry(g) => b.append_value(g.to_wkt()),
            _ => b.append_null(),
        },
        (b, _) => append_null(b),
    }
    Ok(())
}

/// A stored interval's text as Arrow's value (null if it does not read:
/// the core stores only what its parser wrote).
fn interval_of(s: &str) -> Option<IntervalMonthDayNano> {
    let i = silt::value::interval::parse(s).ok()?;
    Some(IntervalMonthDayNano::new(i.months, i.days, i.nanos()))
}

/// A scalar view as a value (never called with `Encoded`).
fn view_value(v: FieldView<'_>) -> Value {
    match v {
        FieldView::Null | FieldView::Encoded(_) => Value::Null,
        FieldView::Bool(b) => Value::Bool(b),
        FieldView::Int(i) => Value::Int(i),
        FieldView::Double(d) => Value::Double(d),
        FieldView::Str(s) => Value::String(s.to_owned()),
        FieldView::Bin(b) => Value::Binary(b.to_vec()),
    }
}

fn append_value(b: &mut Col, v: &Value) {
    match (b, v) {
        (Col::Int(b), Value::Int(i)) => b.append_value(*i),
        (Col::Double(b), Value::Int(i)) => b.append_value(*i as f64),
        (Col::Double(b), Value::Double(d)) => b.append_value(*d),
        (Col::Bool(b), Value::Bool(x)) => b.append_value(*x),
        (Col::Bin(b), Value::Binary(x)) => b.append_value(x),
        (Col::Date(b), Value::Int(d)) => b.append_option(days32(*d)),
        (Col::Time(b), Value::Int(m)) => b.append_value(*m),
        (Col::Dec(b, scale), Value::String(s)) => b.append_option(decimal::units(s, *scale)),
        (Col::Interval(b), Value::String(s)) => b.append_option(interval_of(s)),
        (b @ Col::List { .. }, Value::Array(items)) => b.append_list(items),
        (Col::Text { b, .. }, Value::Null) => b.append_null(),
        (Col::Text { b, any: true }, v) => b.append_value(to_json(v).to_string()),
        (Col::Text { b, .. }, Value::String(s)) => b.append_value(s),
        (Col::Text { b, .. }, Value::Geometry(g)) => b.append_value(g.to_wkt()),
        (b, _) => append_null(b),
    }
}
