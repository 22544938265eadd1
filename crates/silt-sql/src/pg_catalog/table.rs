//! A catalog table's shape (from [`super::columns`]) and its rows as an
//! Arrow batch.
//!
//! Rows name the columns they fill; the rest take their type's zero:
//! `false`, `0`, and null for text, arrays and times (PostgreSQL's own
//! value for most of them in a database with no such feature in use).

use std::sync::Arc;

use datafusion::arrow::array::{ArrayRef, RecordBatch};
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef, TimeUnit};
use datafusion::common::{DataFusionError, ScalarValue};

/// One value of a row.
#[derive(Debug, Clone, PartialEq)]
pub enum Cell {
    Null,
    Int(i64),
    Float(f64),
    Bool(bool),
    Text(String),
    Ints(Vec<i64>),
    Texts(Vec<String>),
}

impl From<&str> for Cell {
    fn from(s: &str) -> Cell {
        Cell::Text(s.to_owned())
    }
}

impl From<String> for Cell {
    fn from(s: String) -> Cell {
        Cell::Text(s)
    }
}

impl From<char> for Cell {
    fn from(c: char) -> Cell {
        Cell::Text(c.to_string())
    }
}

impl From<i64> for Cell {
    fn from(i: i64) -> Cell {
        Cell::Int(i)
    }
}

impl From<bool> for Cell {
    fn from(b: bool) -> Cell {
        Cell::Bool(b)
    }
}

/// A row: the columns it fills.
pub type Row = Vec<(&'static str, Cell)>;

/// `"a oid, b name[]"` as `[("a", "oid"), ("b", "name[]")]`.
pub fn spec(cols: &'static str) -> Vec<(&'static str, &'static str)> {
    cols.split(", ")
        .filter_map(|c| c.trim().split_once(' '))
        .collect()
}

/// The Arrow type of a PostgreSQL catalog column type.
pub fn arrow_type(pg: &str) -> DataType {
    let pg = match pg {
        "int2vector" => "int2[]",
        "oidvector" => "oid[]",
        other => other,
    };
    if let Some(elem) = pg.strip_suffix("[]") {
        let inner = match arrow_type(elem) {
            DataType::Int16 | DataType::Int32 | DataType::Int64 => DataType::Int64,
            _ => DataType::Utf8,
        };
        return DataType::List(Arc::new(Field::new("item", inner, true)));
    }
    match pg {
        "bool" => DataType::Boolean,
        "int2" => DataType::Int16,
        "int4" => DataType::Int32,
        "int8" | "oid" | "regproc" | "regtype" | "regclass" | "xid" => DataType::Int64,
        "float4" => DataType::Float32,
        "float8" => DataType::Float64,
        "bytea" => DataType::Binary,
        "timestamptz" => DataType::Timestamp(TimeUnit::Microsecond, Some("+00:00".into())),
        _ => DataType::Utf8,
    }
}

/// The field metadata key naming a column's PostgreSQL type when its
/// Arrow type does not tell it (`int2vector`, `oidvector`: lists here,
/// space-separated numbers on the wire).
pub use crate::convert::PG_TYPE_KEY;

/// The Arrow schema of a catalog relation.
pub fn schema(cols: &'static str) -> SchemaRef {
    Arc::new(Schema::new(
        spec(cols)
            .into_iter()
            .map(|(n, ty)| {
                let f = Field::new(n, arrow_type(ty), true);
                if ty.ends_with("vector") {
                    f.with_metadata([(PG_TYPE_KEY.to_owned(), ty.to_owned())].into())
                } else {
                    f
                }
            })
            .collect::<Vec<_>>(),
    ))
}

fn scalar(cell: Option<&Cell>, dt: &DataType) -> Result<ScalarValue, DataFusionError> {
    let zero = || -> Result<ScalarValue, DataFusionError> {
        match dt {
            DataType::Boolean => Ok(ScalarValue::Boolean(Some(false))),
            DataType::Int16 | DataType::Int32 | DataType::Int64 => {
                ScalarValue::Int64(Some(0)).cast_to(dt)
            }
            DataType::Float32 | DataType::Float64 => ScalarValue::Float64(Some(0.0)).cast_to(dt),
            other => ScalarValue::try_from(other),
        }
    };
    let list = |items: Vec<ScalarValue>, elem: &DataType| {
        ScalarValue::List(ScalarValue::new_list_nullable(&items, elem))
    };
    let elem = match dt {
        DataType::List(f) => Some(f.data_type().clone()),
        _ => None,
    };
    Ok(match (cell, elem) {
        (None, _) => zero()?,
        (Some(Cell::Null), _) => ScalarValue::try_from(dt)?,
        (Some(Cell::Ints(v)), Some(e)) => {
            list(v.iter().map(|i| ScalarValue::Int64(Some(*i))).collect(), &e)
        }
        (Some(Cell::Texts(v)), Some(e)) => list(
            v.iter()
                .map(|s| ScalarValue::Utf8(Some(s.clone())))
                .collect(),
            &e,
        ),
        (Some(Cell::Int(i)), None) => ScalarValue::Int64(Some(*i)).cast_to(dt)?,
        (Some(Cell::Float(f)), None) => ScalarValue::Float64(Some(*f)).cast_to(dt)?,
        (Some(Cell::Bool(b)), None) => ScalarValue::Boolean(Some(*b)).cast_to(dt)?,
        (Some(Cell::Text(s)), None) => ScalarValue::Utf8(Some(s.clone())).cast_to(dt)?,
        (Some(other), _) => {
            return Err(DataFusionError::Internal(format!(
                "catalog value {other:?} does not fit a {dt} column"
            )));
        }
    })
}

/// The rows as a batch of the relation's schema. A row naming a column
/// the relation lacks is a bug in the row's maker: an error.
pub fn batch(cols: &'static str, rows: &[Row]) -> Result<RecordBatch, DataFusionError> {
    let schema = schema(cols);
    for row in rows {
        for (name, _) in row {
            if schema.field_with_name(name).is_err() {
                return Err(DataFusionError::Internal(format!(
                    "catalog row names a column `{name}` its relation lacks"
                )));
            }
        }
    }
    let mut arrays: Vec<ArrayRef> = Vec::with_capacity(schema.fields().len());
    for field in schema.fields() {
        let dt = field.data_type();
        let values = rows
            .iter()
            .map(|row| {
                let cell = row.iter().find(|(n, _)| *n == field.name()).map(|(_, c)| c);
                scalar(cell, dt)
            })
            .collect::<Result<Vec<_>, _>>()?;
        arrays.push(if values.is_empty() {
            datafusion::arrow::array::new_empty_array(dt)
        } else {
            ScalarValue::iter_to_array(values)?
        });
    }
    Ok(RecordBatch::try_new(schema, arrays)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::array::{Array, AsArray};
    use datafusion::arrow::datatypes::Int64Type;

    #[test]
    fn unfilled_columns_take_their_zero() {
        let cols = "oid oid, relname name, relhasindex bool, relacl aclitem[], relnatts int2";
        let rows = vec![
            vec![("oid", Cell::Int(7)), ("relname", "t".into())],
            vec![
                ("relacl", Cell::Texts(vec!["a".into()])),
                ("relnatts", 3.into()),
            ],
        ];
        let b = batch(cols, &rows).expect("batch");
        assert_eq!(b.num_rows(), 2);
        assert_eq!(b.column(0).as_primitive::<Int64Type>().value(1), 0);
        assert!(b.column(1).is_null(1));
        assert!(!b.column(2).as_boolean().value(0));
        assert!(b.column(3).is_null(0));
        assert!(!b.column(3).is_null(1));
        assert!(batch(cols, &[vec![("nope", Cell::Null)]]).is_err());
        assert_eq!(batch(cols, &[]).expect("empty").num_rows(), 0);
    }
}
