//! A result batch as PostgreSQL `DataRow` messages.
//!
//! Every row of a batch is written into one buffer, and the rows are split
//! off it: the `DataRow`s share that one allocation (a reference count
//! each), where `pgwire`'s `DataRowEncoder` grew and freed a buffer of its
//! own per row. Integers, booleans and text, nearly every cell of a large
//! result, are written here directly (integers by `itoa`, not
//! `core::fmt`); every other type goes through its `ToSql` / `ToSqlText`
//! as the encoder would. The bytes are the encoder's, cell for cell (the
//! tests compare them).

use std::sync::Arc;

use bytes::{BufMut, BytesMut};
use datafusion::arrow::array::{Array, RecordBatch};
use pgwire::api::Type;
use pgwire::api::results::{FieldFormat, FieldInfo};
use pgwire::error::PgWireResult;
use pgwire::messages::data::DataRow;
use pgwire::types::ToSqlText;
use postgres_types::{IsNull, Kind, ToSql};

use crate::convert::{PgArray, PgColumn, PgList};
use crate::pg::user_error;

/// The rows of `batch`, its columns described by `fields`.
pub(crate) fn encode_batch(
    batch: &RecordBatch,
    fields: &Arc<Vec<FieldInfo>>,
) -> PgWireResult<Vec<DataRow>> {
    if batch.num_columns() != fields.len() {
        return Err(user_error(
            "XX000",
            format!(
                "the statement returned {} columns where {} were described",
                batch.num_columns(),
                fields.len()
            ),
        ));
    }
    let cols = batch
        .columns()
        .iter()
        .zip(fields.iter())
        .map(|(a, f)| PgColumn::new(a, f.datatype()))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| user_error("22000", format!("cannot convert a result column: {e}")))?;
    let rows = batch.num_rows();
    let count = i16::try_from(cols.len())
        .map_err(|_| user_error("54011", "a row has more than 32767 columns".to_owned()))?;
    // A first guess (a length and ~8 bytes a cell); the buffer grows as
    // any `Vec` does past it.
    let mut buf = BytesMut::with_capacity(rows.saturating_mul(cols.len()).saturating_mul(12));
    let mut ends = Vec::with_capacity(rows);
    let ways: Vec<Way> = cols
        .iter()
        .zip(fields.iter())
        .map(|(c, f)| way(c, f))
        .collect();
    for r in 0..rows {
        for ((c, f), w) in cols.iter().zip(fields.iter()).zip(&ways) {
            put_cell(&mut buf, c, *w, r, f)?;
        }
        ends.push(buf.len());
    }
    let mut out = Vec::with_capacity(rows);
    let mut start = 0;
    for end in ends {
        out.push(DataRow::new(buf.split_to(end - start), count));
        start = end;
    }
    Ok(out)
}

/// How a column's cells are written: directly, or through their
/// `ToSql` / `ToSqlText`. Decided once a batch.
#[derive(Clone, Copy)]
enum Way {
    Int { text: bool },
    Bool { text: bool },
    Text,
    General,
}

fn way(c: &PgColumn, f: &FieldInfo) -> Way {
    let text = f.format() == FieldFormat::Text;
    match c {
        PgColumn::Int(_) if *f.datatype() == Type::INT8 => Way::Int { text },
        PgColumn::Bool(_) if *f.datatype() == Type::BOOL => Way::Bool { text },
        // Quoting is for array types' elements; binary `ltree` and its
        // kin carry a version byte: those go the general way.
        PgColumn::Text(_)
            if !matches!(f.datatype().kind(), Kind::Array(_))
                && (text || *f.datatype() == Type::TEXT) =>
        {
            Way::Text
        }
        _ => Way::General,
    }
}

/// Row `r` of column `c`: its length (-1 for null) and its bytes.
fn put_cell(
    buf: &mut BytesMut,
    c: &PgColumn,
    way: Way,
    r: usize,
    f: &FieldInfo,
) -> PgWireResult<()> {
    match (way, c) {
        (Way::Int { text }, PgColumn::Int(a)) => {
            if a.is_null(r) {
                buf.put_i32(-1);
            } else if text {
                let mut digits = itoa::Buffer::new();
                let s = digits.format(a.value(r));
                buf.put_i32(s.len() as i32);
                buf.put_slice(s.as_bytes());
            } else {
                buf.put_i32(8);
                buf.put_i64(a.value(r));
            }
        }
        (Way::Bool { text }, PgColumn::Bool(a)) => {
            if a.is_null(r) {
                buf.put_i32(-1);
            } else {
                buf.put_i32(1);
                match (text, a.value(r)) {
                    (true, true) => buf.put_u8(b't'),
                    (true, false) => buf.put_u8(b'f'),
                    (false, v) => buf.put_u8(u8::from(v)),
                }
            }
        }
        (Way::Text, PgColumn::Text(a)) => {
            if a.is_null(r) {
                buf.put_i32(-1);
            } else {
                let v = a.value(r).as_bytes();
                let len = i32::try_from(v.len())
                    .map_err(|_| user_error("54000", "a value longer than 2 GiB".to_owned()))?;
                buf.put_i32(len);
                buf.put_slice(v);
            }
        }
        (_, PgColumn::Int(a)) => put_value(buf, &(!a.is_null(r)).then(|| a.value(r)), f)?,
        (_, PgColumn::Bool(a)) => put_value(buf, &(!a.is_null(r)).then(|| a.value(r)), f)?,
        (_, PgColumn::Text(a)) => put_value(buf, &(!a.is_null(r)).then(|| a.value(r)), f)?,
        (_, PgColumn::Float(a)) => put_value(buf, &(!a.is_null(r)).then(|| a.value(r)), f)?,
        (_, PgColumn::Bytes(a)) => put_value(buf, &(!a.is_null(r)).then(|| a.value(r)), f)?,
        (
            _,
            PgColumn::Date(_)
            | PgColumn::Time(..)
            | PgColumn::Numeric(..)
            | PgColumn::Interval(_)
            | PgColumn::Json(_),
        ) => put_value(buf, &c.cell(r), f)?,
        (_, PgColumn::List(..)) => match c.list(r) {
            Some(PgList::Int(v)) => put_value(buf, &v, f)?,
            Some(PgList::Float(v)) => put_value(buf, &v, f)?,
            Some(PgList::Bool(v)) => put_value(buf, &v, f)?,
            Some(PgList::Text(v)) => put_value(buf, &v, f)?,
            Some(PgList::Cells(v)) => put_value(buf, &v, f)?,
            None => put_value(buf, &None::<PgArray<i64>>, f)?,
        },
    }
    Ok(())
}

/// One value through its `ToSql` / `ToSqlText`, as `pgwire`'s
/// `DataRowEncoder::encode_field` writes it.
fn put_value<T: ToSql + ToSqlText>(buf: &mut BytesMut, v: &T, f: &FieldInfo) -> PgWireResult<()> {
    let at = buf.len();
    buf.put_i32(-1);
    let is_null = if f.format() == FieldFormat::Text {
        v.to_sql_text(f.datatype(), buf, f.format_options())?
    } else {
        v.to_sql(f.datatype(), buf)?
    };
    if let IsNull::No = is_null {
        let len = buf.len() - at - 4;
        let len = i32::try_from(len)
            .map_err(|_| user_error("54000", "a value longer than 2 GiB".to_owned()))?;
        buf[at..at + 4].copy_from_slice(&len.to_be_bytes());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::array::{
        ArrayRef, BinaryArray, BooleanArray, Date32Array, Float64Array, Int32Array, Int64Array,
        ListArray, StringArray,
    };
    use datafusion::arrow::datatypes::{Int64Type, Schema};
    use pgwire::api::results::DataRowEncoder;

    /// What `pgwire`'s own encoder makes of the same batch.
    fn by_encoder(batch: &RecordBatch, fields: &Arc<Vec<FieldInfo>>) -> Vec<(Vec<u8>, i16)> {
        let cols: Vec<PgColumn> = batch
            .columns()
            .iter()
            .zip(fields.iter())
            .map(|(a, f)| PgColumn::new(a, f.datatype()).unwrap())
            .collect();
        let mut enc = DataRowEncoder::new(fields.clone());
        let mut rows = Vec::new();
        for r in 0..batch.num_rows() {
            for c in &cols {
                match c {
                    PgColumn::Int(a) => enc.encode_field(&(!a.is_null(r)).then(|| a.value(r))),
                    PgColumn::Float(a) => enc.encode_field(&(!a.is_null(r)).then(|| a.value(r))),
                    PgColumn::Bool(a) => enc.encode_field(&(!a.is_null(r)).then(|| a.value(r))),
                    PgColumn::Bytes(a) => enc.encode_field(&(!a.is_null(r)).then(|| a.value(r))),
                    PgColumn::Text(a) => enc.encode_field(&(!a.is_null(r)).then(|| a.value(r))),
                    PgColumn::List(..) => match c.list(r) {
                        Some(PgList::Int(v)) => enc.encode_field(&v),
                        None => enc.encode_field(&None::<PgArray<i64>>),
                        _ => unreachable!("only int lists here"),
                    },
                    _ => enc.encode_field(&c.cell(r)),
                }
                .unwrap();
            }
            let row = enc.take_row();
            rows.push((row.data.to_vec(), row.field_count));
        }
        rows
    }

    fn fields(schema: &Schema, format: FieldFormat) -> Arc<Vec<FieldInfo>> {
        Arc::new(
            schema
                .fields()
                .iter()
                .map(|f| {
                    FieldInfo::new(
                        f.name().clone(),
                        None,
                        None,
                        crate::convert::pg_field_type(f),
                        format,
                    )
                })
                .collect(),
        )
    }

    #[test]
    fn rows_are_the_encoders_bytes_in_both_formats() {
        let list = ListArray::from_iter_primitive::<Int64Type, _, _>(vec![
            Some(vec![Some(1), None, Some(-3)]),
            None,
            Some(vec![]),
            Some(vec![Some(i64::MAX)]),
        ]);
        let cols: Vec<(&str, ArrayRef)> = vec![
            (
                "i",
                Arc::new(Int64Array::from(vec![
                    Some(0),
                    None,
                    Some(i64::MIN),
                    Some(i64::MAX),
                ])),
            ),
            (
                "small",
                Arc::new(Int32Array::from(vec![Some(-7), Some(42), None, Some(0)])),
            ),
            (
                "b",
                Arc::new(BooleanArray::from(vec![
                    Some(true),
                    Some(false),
                    None,
                    Some(true),
                ])),
            ),
            (
                "s",
                Arc::new(StringArray::from(vec![
                    Some(""),
                    Some("héllo, \"world\" {x}"),
                    None,
                    Some("null"),
                ])),
            ),
            (
                "f",
                Arc::new(Float64Array::from(vec![
                    Some(0.1),
                    Some(f64::NAN),
                    Some(-1e300),
                    None,
                ])),
            ),
            (
                "bytes",
                Arc::new(BinaryArray::from(vec![
                    Some(&b"\x00\xff"[..]),
                    None,
                    Some(&b""[..]),
                    Some(&b"abc"[..]),
                ])),
            ),
            (
                "d",
                Arc::new(Date32Array::from(vec![
                    Some(0),
                    Some(-1),
                    None,
                    Some(20000),
                ])),
            ),
            ("l", Arc::new(list)),
        ];
        let batch = RecordBatch::try_from_iter(cols).unwrap();
        for format in [FieldFormat::Text, FieldFormat::Binary] {
            let fields = fields(&batch.schema(), format);
            let ours: Vec<(Vec<u8>, i16)> = encode_batch(&batch, &fields)
                .unwrap()
                .into_iter()
                .map(|r| (r.data.to_vec(), r.field_count))
                .collect();
            assert_eq!(ours, by_encoder(&batch, &fields), "{format:?}");
        }
    }

    #[test]
    fn an_empty_batch_has_no_rows_and_a_mismatch_is_an_error() {
        let batch = RecordBatch::try_from_iter(vec![(
            "i",
            Arc::new(Int64Array::from(Vec::<i64>::new())) as ArrayRef,
        )])
        .unwrap();
        let f = fields(&batch.schema(), FieldFormat::Text);
        assert!(encode_batch(&batch, &f).unwrap().is_empty());
        let two = Arc::new(vec![f[0].clone(), f[0].clone()]);
        assert!(encode_batch(&batch, &two).is_err());
    }
}
