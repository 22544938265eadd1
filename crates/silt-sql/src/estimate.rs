//! About how many rows a scan gives, for DataFusion's join planning: which
//! side of a hash join builds its table (the smaller), and whether that
//! side is small enough to collect into one partition (then the other
//! side's scan can read only the rows its keys match, see
//! [`crate::join_keys`]).
//!
//! Silt keeps no column statistics. A scan's estimate is the dataset's
//! record count from its components' metadata ([`silt::Dataset::approx_count`]),
//! times PostgreSQL's default selectivities where it has no statistics
//! either: 0.005 for an equality on an indexed column or another index
//! query (`DEFAULT_EQ_SEL`, `DEFAULT_RANGE_INEQ_SEL`), a third for a key
//! range bounded on one side (`DEFAULT_INEQ_SEL`), 0.005 for one bounded
//! on both. Every estimate is inexact, so nothing answers a query from it
//! (`COUNT(*)` is answered from exact counts only, see
//! [`crate::meta_count`]).

use std::ops::Bound;

use silt::Dataset;

use crate::table::Access;

/// PostgreSQL's selectivity of an equality, or of a range bounded on both
/// sides, without statistics.
const NARROW: f64 = 0.005;
/// PostgreSQL's selectivity of a range bounded on one side.
const ONE_SIDED: f64 = 1.0 / 3.0;

/// About how many rows `access` reads from `ds`, at most `limit`.
pub(crate) fn rows(ds: &Dataset, access: &Access, limit: Option<usize>) -> usize {
    if let Access::AnyOf(paths) = access {
        let sum: usize = paths.iter().map(|p| rows(ds, p, limit)).sum();
        return limit.map_or(sum, |l| sum.min(l));
    }
    let n = ds.approx_count() as f64;
    let share = |f: f64| (n * f).ceil().max(1.0);
    let rows = match access {
        Access::Full => n,
        Access::Get(_) => 1.0,
        Access::GetMany(keys) => keys.len() as f64,
        Access::PkRange { lo, hi, .. } => match (lo, hi) {
            (Bound::Unbounded, Bound::Unbounded) => n,
            (Bound::Included(a), Bound::Included(b)) if a == b => share(NARROW),
            (Bound::Unbounded, _) | (_, Bound::Unbounded) => share(ONE_SIDED),
            _ => share(NARROW),
        },
        Access::Index { .. } => share(NARROW),
        Access::Knn(k) => k.k as f64,
        Access::AnyOf(_) => n,
    };
    let rows = rows.min(n.max(1.0)) as usize;
    limit.map_or(rows, |l| rows.min(l))
}

#[cfg(test)]
mod tests {
    use super::*;
    use silt::Value;
    use std::sync::Arc;

    #[test]
    fn estimates_follow_the_access_path_and_the_dataset_size() {
        let dir = tempfile::tempdir().expect("tempdir");
        let db =
            Arc::new(silt::Database::open(dir.path(), silt::DbOptions::default()).expect("open"));
        let sql = crate::SqlEngine::new(db.clone()).expect("engine");
        sql.execute_blocking("CREATE TABLE t (id BIGINT PRIMARY KEY, v BIGINT)")
            .expect("create");
        sql.execute_blocking("INSERT INTO t SELECT x, x % 7 FROM generate_series(1, 1000) g(x)")
            .expect("insert");
        let ds = db.dataset("t").expect("dataset");
        assert_eq!(ds.approx_count(), 1000);
        let range = |lo, hi| Access::PkRange {
            column: "id".into(),
            lo,
            hi,
        };
        let cases = [
            (Access::Full, None, 1000),
            (Access::Full, Some(10), 10),
            (Access::Get(vec![Value::Int(1)]), None, 1),
            (Access::GetMany(vec![Value::Int(1), Value::Int(2)]), None, 2),
            (
                range(Bound::Included(Value::Int(5)), Bound::Unbounded),
                None,
                334,
            ),
            (
                range(
                    Bound::Included(Value::Int(5)),
                    Bound::Excluded(Value::Int(9)),
                ),
                None,
                5,
            ),
        ];
        for (access, limit, want) in cases {
            assert_eq!(rows(&ds, &access, limit), want, "{access:?}");
        }
        // Deletes cancel what they delete.
        sql.execute_blocking("DELETE FROM t WHERE id <= 400")
            .expect("delete");
        assert_eq!(ds.approx_count(), 600);
    }
}
