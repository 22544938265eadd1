//! `avg` of NUMERIC keeps PostgreSQL's digits (TPC-H Q1's `avg(l_discount)`
//! over `DECIMAL(15,2)` came out as 0.047758 where PostgreSQL says
//! 0.04775862068965517241): ungrouped, grouped, DISTINCT and as a window,
//! checked against the exact quotient; integers and floats still average
//! to doubles.

use datafusion::arrow::array::{Array, AsArray};
use datafusion::arrow::datatypes::{DataType, Decimal128Type};

use crate::common::*;

/// Column `col` of the result: its type, and its decimals as i128 units of
/// its scale.
fn decimals(
    b: &[datafusion::arrow::array::RecordBatch],
    col: usize,
) -> (DataType, Vec<Option<i128>>) {
    let t = b[0].schema().field(col).data_type().clone();
    let v = b
        .iter()
        .flat_map(|x| x.column(col).as_primitive::<Decimal128Type>().iter())
        .collect();
    (t, v)
}

#[test]
fn avg_of_numeric_keeps_sixteen_digits() {
    let (_d, e) = engine();
    run(
        &e,
        "CREATE TABLE li (id BIGINT PRIMARY KEY, g VARCHAR, disc NUMERIC(15,2), qty INTEGER, \
         w DOUBLE PRECISION, big NUMERIC(38,2))",
    );
    // 0.04 + 0.05 + 0.05 = 0.14 over 3: 0.0466666666666666|67 (the cut
    // was 0.046666), and 0.09 + 0.10 over 2 in group b.
    run(
        &e,
        "INSERT INTO li VALUES (1, 'a', 0.04, 1, 1.5, 1.00), (2, 'a', 0.05, 2, 2.5, 2.00), \
         (3, 'a', 0.05, 4, 3.5, 4.00), (4, 'b', 0.09, 8, 4.5, 8.00), (5, 'b', 0.10, 16, 5.5, 16.00)",
    );
    let b = run(&e, "SELECT avg(disc) FROM li WHERE g = 'a'");
    assert_eq!(
        decimals(&b, 0),
        (
            DataType::Decimal128(29, 16),
            vec![Some(466_666_666_666_666)]
        )
    );
    // Grouped (DataFusion's groups accumulator) and DISTINCT.
    let b = run(
        &e,
        "SELECT g, avg(disc), avg(DISTINCT disc) FROM li GROUP BY g ORDER BY g",
    );
    assert_eq!(
        decimals(&b, 1).1,
        vec![Some(466_666_666_666_666), Some(950_000_000_000_000)]
    );
    // DISTINCT: (0.04 + 0.05) / 2 in a.
    assert_eq!(
        decimals(&b, 2).1,
        vec![Some(450_000_000_000_000), Some(950_000_000_000_000)]
    );
    // As a window over each group.
    let b = run(
        &e,
        "SELECT id, avg(disc) OVER (PARTITION BY g) FROM li ORDER BY id",
    );
    assert_eq!(decimals(&b, 1).1[0], Some(466_666_666_666_666));
    // In arithmetic, as Q1 uses it beside sums: the type follows.
    let b = run(&e, "SELECT avg(disc) * 100 FROM li WHERE g = 'a'");
    assert!(matches!(decimals(&b, 0).0, DataType::Decimal128(_, 16)));
    // A numeric already as wide as Decimal128 allows keeps DataFusion's
    // own rule (scale + 4).
    let b = run(&e, "SELECT avg(big) FROM li");
    assert_eq!(
        decimals(&b, 0),
        (DataType::Decimal128(38, 6), vec![Some(6_200_000)])
    );
    // Integers and doubles average to doubles, as before.
    let b = run(&e, "SELECT avg(qty), avg(w), avg(NULL) FROM li");
    assert_eq!(b[0].schema().field(0).data_type(), &DataType::Float64);
    assert_eq!(floats(&b, 0), vec![6.2]);
    assert_eq!(floats(&b, 1), vec![3.5]);
    assert!(b[0].column(2).is_null(0));
    // Nothing to average: NULL, as in PostgreSQL.
    let b = run(&e, "SELECT avg(disc) FROM li WHERE g = 'none'");
    assert_eq!(decimals(&b, 0).1, vec![None]);
}
