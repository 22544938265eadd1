//! A hash join's build-side keys as its probe scan's access path: the
//! index nested-loop join that DataFusion does not plan.
//!
//! In its last filter-pushdown pass DataFusion hands the probe side of a
//! hash join a *dynamic filter*: a placeholder the join fills in once its
//! build side is collected, before it reads a probe row. With few build
//! keys (at most `hash_join_inlist_pushdown_max_distinct_values`, which
//! Silt raises from DataFusion's 150 to [`MAX_KEYS`]) it becomes `key >=
//! min AND key <= max AND key IN (...)`; with more, the bounds and a
//! hash-table lookup. [`crate::scan::SiltScanExec`]
//! keeps that filter, and a full scan reads it at its first poll
//! ([`keyed_reads`]): an `IN` list on the primary key becomes gets, on
//! the first field of a composite key one key range per value, on a
//! column with a B+-tree one index lookup per value; bounds alone on the
//! key's first field become a key range. The join still evaluates its
//! condition on every row it gets, so the scan only has to return every
//! row the filter keeps, and may return more.
//!
//! Index lookups can return far more rows than there are keys (a column
//! with few distinct values). Their rows are collected first, up to
//! [`index_budget`] of them; past that the scan reads the whole dataset
//! instead, as it would have without the filter.

use std::ops::Bound;
use std::sync::Arc;

use datafusion::logical_expr::Operator;
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_expr::expressions::{BinaryExpr, Column, InListExpr, Literal};
use silt::index::query::Query;
use silt::{Dataset, FieldType, Value};

use crate::convert::{self, ColumnInfo};
use crate::table::Access;

/// What a resolved dynamic filter makes of a full scan.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum KeyedReads {
    /// One access path on the primary key (gets, a key range).
    Primary(Access),
    /// Several access paths read one after another: key ranges on the
    /// key's first field, or B+-tree lookups (`index` true: their rows
    /// are counted against [`index_budget`]).
    Each { accesses: Vec<Access>, index: bool },
}

/// The most distinct build-side keys a hash join hands its probe scan as
/// a list (`hash_join_inlist_pushdown_max_distinct_values`): TPC-W's
/// best sellers join the 3,333 most recent orders to their lines.
pub const MAX_KEYS: usize = 4096;

/// Lists up to this many keys are always read key by key.
const FEW_KEYS: usize = 150;

/// About how many rows a full scan reads in the time one key read takes
/// (a seek in every component of the tree, against rows read in
/// sequence, often from column images).
const ROWS_PER_KEY_READ: u64 = 64;

/// Whether reading `keys` keys one by one is cheaper than a full scan of
/// `ds`: always for a few, otherwise when the scan would read more than
/// [`ROWS_PER_KEY_READ`] rows for each.
fn keys_cheaper(keys: usize, ds: &Dataset) -> bool {
    keys <= FEW_KEYS || (keys as u64).saturating_mul(ROWS_PER_KEY_READ) <= ds.approx_count()
}

/// The most rows index lookups for a join's keys may return before the
/// scan reads the whole dataset instead: a thirty-second of it (index
/// hits are random reads, a scan's rows sequential), and never fewer
/// than 4,096.
pub(crate) fn index_budget(ds: &Dataset) -> u64 {
    (ds.approx_count() / 32).max(4096)
}

/// The access paths that read the rows `filter` (a dynamic filter's
/// current expression, over the scan's columns `cols`) can keep, when
/// they are cheaper than a full scan; `None` when nothing in it narrows
/// the scan.
pub(crate) fn keyed_reads(
    filter: &Arc<dyn PhysicalExpr>,
    ds: &Dataset,
    cols: &[ColumnInfo],
) -> Option<KeyedReads> {
    let mut conjuncts = Vec::new();
    split_and(filter, &mut conjuncts);
    let pk = &ds.def().primary_key;
    let column = |e: &Arc<dyn PhysicalExpr>| -> Option<&ColumnInfo> {
        let c = e.downcast_ref::<Column>()?;
        cols.get(c.index()).filter(|info| info.name == c.name())
    };
    let typed = |info: &ColumnInfo| info.ty != FieldType::Any;
    // An IN list of literals first: it names every key.
    for e in &conjuncts {
        let Some(list) = e.downcast_ref::<InListExpr>() else {
            continue;
        };
        if list.negated() {
            continue;
        }
        let Some(info) = column(list.expr()).filter(|i| typed(i)) else {
            continue;
        };
        let Some(mut values) = literal_values(list.list(), info.ty) else {
            continue;
        };
        values.sort_by(silt::value::compare_key_parts);
        values.dedup();
        // Many keys of a small table: its bounds below, or a full scan.
        if !keys_cheaper(values.len(), ds) {
            continue;
        }
        if pk.len() == 1 && pk[0] == info.name {
            return Some(KeyedReads::Primary(Access::GetMany(values)));
        }
        if pk.first() == Some(&info.name) {
            let accesses = values
                .into_iter()
                .map(|v| Access::PkRange {
                    column: info.name.clone(),
                    lo: Bound::Included(v.clone()),
                    hi: Bound::Included(v),
                })
                .collect();
            return Some(KeyedReads::Each {
                accesses,
                index: false,
            });
        }
        if let Some(def) = ds
            .index_defs()
            .into_iter()
            .find(|d| d.kind.is_btree() && d.fields.first() == Some(&info.name))
        {
            let accesses = values
                .into_iter()
                .map(|v| Access::Index {
                    index: def.name.clone(),
                    kind: def.kind,
                    column: info.name.clone(),
                    query: Query::Range {
                        lo: Bound::Included(vec![v.clone()]),
                        hi: Bound::Included(vec![v]),
                    },
                    text_check: None,
                    exact: true,
                })
                .collect();
            return Some(KeyedReads::Each {
                accesses,
                index: true,
            });
        }
    }
    // Bounds on the key's first field: a key range.
    let first = pk.first()?;
    let (mut lo, mut hi) = (Bound::Unbounded, Bound::Unbounded);
    for e in &conjuncts {
        let Some(b) = e.downcast_ref::<BinaryExpr>() else {
            continue;
        };
        let Some(info) = column(b.left()).filter(|i| typed(i) && &i.name == first) else {
            continue;
        };
        let Some(v) = b
            .right()
            .downcast_ref::<Literal>()
            .and_then(|l| convert::scalar_to_value(l.value(), info.ty))
        else {
            continue;
        };
        match b.op() {
            Operator::GtEq => lo = Bound::Included(v),
            Operator::LtEq => hi = Bound::Included(v),
            _ => {}
        }
    }
    if matches!((&lo, &hi), (Bound::Unbounded, Bound::Unbounded)) {
        return None;
    }
    Some(KeyedReads::Primary(Access::PkRange {
        column: first.clone(),
        lo,
        hi,
    }))
}

/// The conjuncts of `e` (`a AND b AND ...`).
fn split_and<'a>(e: &'a Arc<dyn PhysicalExpr>, out: &mut Vec<&'a Arc<dyn PhysicalExpr>>) {
    match e.downcast_ref::<BinaryExpr>() {
        Some(b) if *b.op() == Operator::And => {
            split_and(b.left(), out);
            split_and(b.right(), out);
        }
        _ => out.push(e),
    }
}

/// The values of a list of literals as values of a column of type `ty`;
/// nulls (which equal nothing) left out; `None` if any other literal has
/// no exact value of that type, or the list is not all literals.
fn literal_values(list: &[Arc<dyn PhysicalExpr>], ty: FieldType) -> Option<Vec<Value>> {
    let mut out = Vec::with_capacity(list.len());
    for e in list {
        let l = e.downcast_ref::<Literal>()?;
        if l.value().is_null() {
            continue;
        }
        out.push(convert::scalar_to_value(l.value(), ty)?);
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::datatypes::{DataType, Field, Schema};
    use datafusion::common::ScalarValue;
    use datafusion::physical_expr::expressions::lit;

    fn info(name: &str, ty: FieldType, data_type: DataType, pk: bool) -> ColumnInfo {
        ColumnInfo {
            name: name.into(),
            ty,
            data_type,
            primary_key: pk,
            rest: None,
        }
    }

    fn db_with(pk: &str) -> (tempfile::TempDir, Arc<Dataset>) {
        let dir = tempfile::tempdir().expect("tempdir");
        let db =
            Arc::new(silt::Database::open(dir.path(), silt::DbOptions::default()).expect("open"));
        let sql = crate::SqlEngine::new(db.clone()).expect("engine");
        sql.execute_blocking(&format!(
            "CREATE TABLE t (a BIGINT, b BIGINT, c VARCHAR, PRIMARY KEY ({pk}))"
        ))
        .expect("create");
        sql.execute_blocking("CREATE INDEX t_c ON t (c)")
            .expect("index");
        let ds = db.dataset("t").expect("dataset");
        (dir, ds)
    }

    /// `col IN (vals)` (`NOT IN` when `negated`), the column at `idx` of
    /// a schema where it has the values' type.
    fn list_of(
        col: &str,
        idx: usize,
        vals: &[ScalarValue],
        negated: bool,
    ) -> Arc<dyn PhysicalExpr> {
        let ty = vals.first().map_or(DataType::Int64, ScalarValue::data_type);
        let fields: Vec<Field> = (0..=idx)
            .map(|i| {
                Field::new(
                    if i == idx {
                        col.to_owned()
                    } else {
                        format!("f{i}")
                    },
                    ty.clone(),
                    true,
                )
            })
            .collect();
        let schema = Schema::new(fields);
        let c: Arc<dyn PhysicalExpr> = Arc::new(Column::new(col, idx));
        let list = vals.iter().map(|v| lit(v.clone())).collect();
        Arc::new(InListExpr::try_new(c, list, negated, &schema).expect("in list"))
    }

    fn in_list(col: &str, idx: usize, vals: &[ScalarValue]) -> Arc<dyn PhysicalExpr> {
        list_of(col, idx, vals, false)
    }

    fn and(a: Arc<dyn PhysicalExpr>, b: Arc<dyn PhysicalExpr>) -> Arc<dyn PhysicalExpr> {
        Arc::new(BinaryExpr::new(a, Operator::And, b))
    }

    fn cmp(col: &str, idx: usize, op: Operator, v: i64) -> Arc<dyn PhysicalExpr> {
        Arc::new(BinaryExpr::new(
            Arc::new(Column::new(col, idx)),
            op,
            lit(ScalarValue::Int64(Some(v))),
        ))
    }

    #[test]
    fn an_in_list_on_the_key_becomes_gets_in_key_order() {
        let (_d, ds) = db_with("a");
        let cols = [
            info("a", FieldType::Int, DataType::Int64, true),
            info("c", FieldType::String, DataType::Utf8, false),
        ];
        let vals = [
            ScalarValue::Int64(Some(7)),
            ScalarValue::Int64(None),
            ScalarValue::Int64(Some(3)),
            ScalarValue::Int64(Some(7)),
        ];
        let f = and(
            and(
                cmp("a", 0, Operator::GtEq, 3),
                cmp("a", 0, Operator::LtEq, 7),
            ),
            in_list("a", 0, &vals),
        );
        assert_eq!(
            keyed_reads(&f, &ds, &cols),
            Some(KeyedReads::Primary(Access::GetMany(vec![
                Value::Int(3),
                Value::Int(7)
            ])))
        );
        // Bounds alone (a build side too large for a list): a key range.
        let f = and(
            cmp("a", 0, Operator::GtEq, 3),
            cmp("a", 0, Operator::LtEq, 7),
        );
        assert_eq!(
            keyed_reads(&f, &ds, &cols),
            Some(KeyedReads::Primary(Access::PkRange {
                column: "a".into(),
                lo: Bound::Included(Value::Int(3)),
                hi: Bound::Included(Value::Int(7)),
            }))
        );
        // A column index that is not the column's (a stale remap) or a
        // negated list narrows nothing.
        let f = in_list("zz", 0, &vals[..1]);
        assert_eq!(keyed_reads(&f, &ds, &cols), None);
        let not_in = list_of("a", 0, &[ScalarValue::Int64(Some(1))], true);
        assert_eq!(keyed_reads(&not_in, &ds, &cols), None);
        assert_eq!(keyed_reads(&lit(true), &ds, &cols), None);
    }

    #[test]
    fn composite_keys_and_indexed_columns_read_one_range_or_lookup_per_value() {
        let (_d, ds) = db_with("a, b");
        let cols = [
            info("b", FieldType::Int, DataType::Int64, true),
            info("a", FieldType::Int, DataType::Int64, true),
            info("c", FieldType::String, DataType::Utf8, false),
        ];
        let f = in_list("a", 1, &[ScalarValue::Int64(Some(2))]);
        let Some(KeyedReads::Each { accesses, index }) = keyed_reads(&f, &ds, &cols) else {
            panic!("expected key ranges");
        };
        assert!(!index);
        assert_eq!(
            accesses,
            vec![Access::PkRange {
                column: "a".into(),
                lo: Bound::Included(Value::Int(2)),
                hi: Bound::Included(Value::Int(2)),
            }]
        );
        // `b` is the key's second field: no path of its own.
        let f = in_list("b", 0, &[ScalarValue::Int64(Some(2))]);
        assert_eq!(keyed_reads(&f, &ds, &cols), None);
        let words = [
            ScalarValue::Utf8(Some("x".into())),
            ScalarValue::Utf8(Some("y".into())),
        ];
        let f = in_list("c", 2, &words);
        let Some(KeyedReads::Each { accesses, index }) = keyed_reads(&f, &ds, &cols) else {
            panic!("expected index lookups");
        };
        assert!(index);
        assert_eq!(accesses.len(), 2);
        assert!(matches!(&accesses[0], Access::Index { index, .. } if index == "t_c"));
        // A literal of another type than the column's: nothing.
        let f = in_list("c", 2, &[ScalarValue::Int64(Some(1))]);
        assert_eq!(keyed_reads(&f, &ds, &cols), None);
    }
}
