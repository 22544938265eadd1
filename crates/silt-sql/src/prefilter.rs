//! A scan's comparisons on columns without an index, tried on each stored
//! record before the record is built into the batch.
//!
//! A filter that no access path answers (`i_subject = 'HISTORY'` on a
//! table without an index on `i_subject`) is applied by DataFusion above
//! the scan, to batches the scan built from whole records: every
//! projected column of every record, most of them thrown away (a
//! `SELECT *` keeping one row in 24 builds the other 23 for nothing).
//! [`crate::table::SiltTable`] declares such comparisons *Inexact*: the
//! filter stays above the scan, and the scan also gets the comparison,
//! which it tries on the record as stored, reading only the compared
//! field ([`silt::value::decode_field`]). A record it fails is not built.
//!
//! The filter above decides; this only drops records that filter would
//! drop. So a part is kept only where its answer is certain: an `Int`
//! (`bigint`) or `String` (`text`) column against a literal of that type,
//! `=`, `<`, `<=`, `>`, `>=` or `BETWEEN`. A stored value of another type,
//! a missing or null field, keeps the record (the filter above sees to
//! it). Strings compare by their UTF-8 bytes, as Arrow's comparison
//! kernels do. Only records the scan reads as stored are tried: column
//! images and decoded index hits go to the filter as they are.

use std::cmp::Ordering;
use std::fmt;

use datafusion::arrow::datatypes::DataType;
use datafusion::common::ScalarValue;
use datafusion::logical_expr::{Between, BinaryExpr, Expr, Operator};
use silt::{FieldType, Value};

use crate::convert::{self, ColumnInfo};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    Eq,
    Lt,
    Le,
    Gt,
    Ge,
}

impl Op {
    fn of(op: Operator) -> Option<Op> {
        Some(match op {
            Operator::Eq => Op::Eq,
            Operator::Lt => Op::Lt,
            Operator::LtEq => Op::Le,
            Operator::Gt => Op::Gt,
            Operator::GtEq => Op::Ge,
            _ => return None,
        })
    }

    /// The operator with its operands swapped (`5 < x` is `x > 5`).
    fn flip(self) -> Op {
        match self {
            Op::Eq => Op::Eq,
            Op::Lt => Op::Gt,
            Op::Le => Op::Ge,
            Op::Gt => Op::Lt,
            Op::Ge => Op::Le,
        }
    }

    /// Whether `stored op literal` holds when `stored` compares to
    /// `literal` as `o`.
    fn holds(self, o: Ordering) -> bool {
        match self {
            Op::Eq => o == Ordering::Equal,
            Op::Lt => o == Ordering::Less,
            Op::Le => o != Ordering::Greater,
            Op::Gt => o == Ordering::Greater,
            Op::Ge => o != Ordering::Less,
        }
    }

    fn sql(self) -> &'static str {
        match self {
            Op::Eq => "=",
            Op::Lt => "<",
            Op::Le => "<=",
            Op::Gt => ">",
            Op::Ge => ">=",
        }
    }
}

/// One comparison: the record's `field` against `val`.
#[derive(Clone, Debug, PartialEq)]
struct Part {
    field: String,
    op: Op,
    val: Value,
}

impl Part {
    fn keeps(&self, rec: &[u8]) -> bool {
        let Ok(Some(stored)) = silt::value::decode_field(rec, &self.field) else {
            return true;
        };
        let o = match (&stored, &self.val) {
            (Value::Int(a), Value::Int(b)) => a.cmp(b),
            (Value::String(a), Value::String(b)) => a.as_bytes().cmp(b.as_bytes()),
            _ => return true,
        };
        self.op.holds(o)
    }
}

/// The comparisons a scan tries on stored records (see the module doc).
#[derive(Clone, Debug, PartialEq)]
pub struct PreFilter {
    parts: Vec<Part>,
}

/// Whether comparisons on column `c` can be tried on stored records.
pub(crate) fn comparable(c: &ColumnInfo) -> bool {
    c.rest.is_none()
        && matches!(
            (c.ty, &c.data_type),
            (FieldType::Int, DataType::Int64) | (FieldType::String, DataType::Utf8)
        )
}

impl PreFilter {
    /// The parts of `filters` (conjuncts over the columns `cols`, bound:
    /// no parameters) that can be tried on stored records; `None` when
    /// there are none.
    pub fn of(filters: &[Expr], cols: &[ColumnInfo]) -> Option<PreFilter> {
        let mut parts = Vec::new();
        for f in filters {
            match f {
                Expr::BinaryExpr(BinaryExpr { left, op, right }) => {
                    let Some(op) = Op::of(*op) else {
                        continue;
                    };
                    let part = match (left.as_ref(), right.as_ref()) {
                        (Expr::Column(c), Expr::Literal(v, _)) => part(cols, &c.name, op, v),
                        (Expr::Literal(v, _), Expr::Column(c)) => part(cols, &c.name, op.flip(), v),
                        _ => None,
                    };
                    parts.extend(part);
                }
                Expr::Between(Between {
                    expr,
                    negated: false,
                    low,
                    high,
                }) => {
                    if let (Expr::Column(c), Expr::Literal(lo, _), Expr::Literal(hi, _)) =
                        (expr.as_ref(), low.as_ref(), high.as_ref())
                    {
                        parts.extend(part(cols, &c.name, Op::Ge, lo));
                        parts.extend(part(cols, &c.name, Op::Le, hi));
                    }
                }
                _ => {}
            }
        }
        (!parts.is_empty()).then_some(PreFilter { parts })
    }

    /// Whether the stored record `rec` may pass the filter.
    pub fn keeps(&self, rec: &[u8]) -> bool {
        self.parts.iter().all(|p| p.keeps(rec))
    }
}

/// A part for `column op literal`, when the column is comparable and the
/// literal is exactly a value of its type.
fn part(cols: &[ColumnInfo], column: &str, op: Op, lit: &ScalarValue) -> Option<Part> {
    let c = cols.iter().find(|c| c.name == column)?;
    if !comparable(c) || lit.is_null() {
        return None;
    }
    let val = convert::scalar_to_value(lit, c.ty)?;
    let fits = matches!(
        (&val, c.ty),
        (Value::Int(_), FieldType::Int) | (Value::String(_), FieldType::String)
    );
    fits.then(|| Part {
        field: c.name.clone(),
        op,
        val,
    })
}

impl fmt::Display for PreFilter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, p) in self.parts.iter().enumerate() {
            if i > 0 {
                f.write_str(" AND ")?;
            }
            match &p.val {
                Value::String(s) => write!(f, "{} {} {s:?}", p.field, p.op.sql())?,
                v => write!(f, "{} {} {v}", p.field, p.op.sql())?,
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::logical_expr::{col, lit};

    fn info(name: &str, ty: FieldType, data_type: DataType) -> ColumnInfo {
        ColumnInfo {
            name: name.into(),
            ty,
            data_type,
            primary_key: false,
            rest: None,
        }
    }

    fn rec(fields: Vec<(&str, Value)>) -> Vec<u8> {
        let v = Value::Object(fields.into_iter().map(|(k, v)| (k.into(), v)).collect());
        let mut out = Vec::new();
        silt::value::encode_value(&v, &mut out);
        out
    }

    /// Every operator both ways round, `BETWEEN`, and what is left to the
    /// filter above: other types, nulls, missing fields, other columns.
    #[test]
    fn parts_keep_exactly_what_their_comparison_keeps() {
        let cols = vec![
            info("n", FieldType::Int, DataType::Int64),
            info("s", FieldType::String, DataType::Utf8),
            info("d", FieldType::Double, DataType::Float64),
        ];
        let r = |n: i64, s: &str| rec(vec![("n", Value::Int(n)), ("s", Value::String(s.into()))]);
        let cases: Vec<(Expr, Vec<bool>)> = vec![
            (col("n").eq(lit(5i64)), vec![false, true, false]),
            (col("n").lt(lit(5i64)), vec![true, false, false]),
            (col("n").lt_eq(lit(5i64)), vec![true, true, false]),
            (col("n").gt(lit(5i64)), vec![false, false, true]),
            (col("n").gt_eq(lit(5i64)), vec![false, true, true]),
            (lit(5i64).lt(col("n")), vec![false, false, true]),
            (
                col("n").between(lit(4i64), lit(5i64)),
                vec![true, true, false],
            ),
            (col("s").eq(lit("b")), vec![false, true, false]),
            (col("s").gt(lit("b")), vec![false, false, true]),
        ];
        let recs = [r(4, "a"), r(5, "b"), r(6, "é")];
        for (e, want) in cases {
            let p = PreFilter::of(std::slice::from_ref(&e), &cols).expect("a part");
            let got: Vec<bool> = recs.iter().map(|x| p.keeps(x)).collect();
            assert_eq!(got, want, "{e}");
        }
        // Not certain here: no part, or a part that keeps the record.
        for e in [
            col("d").eq(lit(1.5)),
            col("n").eq(lit(1.5)),
            col("n").eq(col("s")),
            col("n").not_eq(lit(5i64)),
            col("n").eq(lit(ScalarValue::Int64(None))),
            col("x").eq(lit(1i64)),
        ] {
            assert!(
                PreFilter::of(std::slice::from_ref(&e), &cols).is_none(),
                "{e}"
            );
        }
        let p = PreFilter::of(&[col("n").eq(lit(5i64))], &cols).expect("a part");
        assert!(
            p.keeps(&rec(vec![("n", Value::Null)])),
            "null: the filter decides"
        );
        assert!(
            p.keeps(&rec(vec![("s", Value::String("b".into()))])),
            "missing"
        );
        assert!(
            p.keeps(&rec(vec![("n", Value::String("5".into()))])),
            "another type"
        );
        assert_eq!(p.to_string(), "n = 5");
        let both =
            PreFilter::of(&[col("n").gt(lit(4i64)), col("s").eq(lit("b"))], &cols).expect("parts");
        assert_eq!(
            recs.iter().map(|x| both.keeps(x)).collect::<Vec<_>>(),
            vec![false, true, false]
        );
        assert_eq!(both.to_string(), "n > 4 AND s = \"b\"");
    }
}
