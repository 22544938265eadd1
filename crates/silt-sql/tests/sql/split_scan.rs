//! Scans that do not read the key are split into key ranges read in
//! parallel: the answers are the same as one scan's (checked against a
//! model), in and out of a transaction, and small tables stay one scan.

use std::collections::BTreeMap;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use silt_sql::SqlSession;

use crate::common::*;

#[test]
fn split_scans_answer_as_one_scan() {
    let (_d, e) = engine();
    run(
        &e,
        "CREATE TABLE f (id BIGINT PRIMARY KEY, grp BIGINT, qty BIGINT) WITH (partitions = 2)",
    );
    let mut rng = StdRng::seed_from_u64(5);
    let mut model: BTreeMap<i64, (i64, i64)> = BTreeMap::new();
    let ds = e.database().dataset("f").expect("dataset");
    for round in 0..3 {
        let mut values = Vec::new();
        for _ in 0..20_000 {
            let id = rng.random_range(0..60_000i64);
            let (g, q) = (rng.random_range(0..7i64), rng.random_range(1..100i64));
            model.insert(id, (g, q));
            values.push(format!("({id}, {g}, {q})"));
        }
        for chunk in values.chunks(2000) {
            run(&e, &format!("UPSERT INTO f VALUES {}", chunk.join(", ")));
        }
        if round < 2 {
            ds.flush().expect("flush");
        }
    }
    let sql = "SELECT grp, count(*), sum(qty) FROM f GROUP BY grp ORDER BY grp";
    let plan = explain(&e, sql);
    assert!(plan.contains("parts=2"), "{plan}");
    let want = |m: &BTreeMap<i64, (i64, i64)>, lo: i64, hi: i64| {
        let mut g: BTreeMap<i64, (i64, i64)> = BTreeMap::new();
        for (_, (grp, q)) in m.range(lo..hi) {
            let e = g.entry(*grp).or_default();
            e.0 += 1;
            e.1 += q;
        }
        g.into_iter()
            .map(|(k, (c, s))| (k, c, s))
            .collect::<Vec<_>>()
    };
    let got = |b: &[datafusion::arrow::array::RecordBatch]| {
        let (k, s) = (ints(b, 0), ints(b, 2));
        let c: Vec<i64> = b
            .iter()
            .flat_map(|x| {
                let a = x.column(1);
                datafusion::arrow::compute::cast(a, &datafusion::arrow::datatypes::DataType::Int64)
                    .map(|a| {
                        ints(
                            &[
                                datafusion::arrow::array::RecordBatch::try_from_iter([("c", a)])
                                    .unwrap(),
                            ],
                            0,
                        )
                    })
                    .unwrap_or_default()
            })
            .collect();
        k.into_iter()
            .zip(c)
            .zip(s)
            .map(|((k, c), s)| (k, c, s))
            .collect::<Vec<_>>()
    };
    assert_eq!(got(&run(&e, sql)), want(&model, i64::MIN, i64::MAX));
    // A key range is split too, and its parts cover it exactly.
    let sql = "SELECT grp, count(*), sum(qty) FROM f WHERE id >= 1000 AND id < 50000 GROUP BY grp ORDER BY grp";
    assert_eq!(got(&run(&e, sql)), want(&model, 1000, 50_000));
    assert_eq!(count_star(&e, "SELECT count(*) FROM f"), model.len() as i64);
    // Inside a transaction: its own writes are counted once, in their part.
    let s = SqlSession::new();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let exec = |sql: &str| match rt.block_on(e.execute_in(&s, sql)) {
        Ok(b) => b,
        Err(err) => panic!("{sql}: {err}"),
    };
    exec("BEGIN");
    exec("UPSERT INTO f VALUES (-5, 0, 1), (59999, 0, 1), (30000, 0, 1)");
    exec("DELETE FROM f WHERE id = 10");
    let mut m2 = model.clone();
    for id in [-5, 59999, 30000] {
        m2.insert(id, (0, 1));
    }
    m2.remove(&10);
    let sql = "SELECT grp, count(*), sum(qty) FROM f GROUP BY grp ORDER BY grp";
    assert_eq!(got(&exec(sql)), want(&m2, i64::MIN, i64::MAX));
    exec("ROLLBACK");
    // Reading the key keeps one ordered scan.
    let plan = explain(&e, "SELECT id, qty FROM f WHERE qty > 50");
    assert!(!plan.contains("parts="), "{plan}");
}

#[test]
fn small_tables_are_not_split() {
    let (_d, e) = engine();
    run(&e, "CREATE TABLE s (id BIGINT PRIMARY KEY, v BIGINT)");
    run(&e, "INSERT INTO s VALUES (1, 1), (2, 2), (3, 3)");
    e.database()
        .dataset("s")
        .expect("dataset")
        .flush()
        .expect("flush");
    let plan = explain(&e, "SELECT sum(v) FROM s");
    assert!(!plan.contains("parts="), "{plan}");
}

fn count_star(e: &silt_sql::SqlEngine, sql: &str) -> i64 {
    let b = run(e, sql);
    let a = datafusion::arrow::compute::cast(
        b[0].column(0),
        &datafusion::arrow::datatypes::DataType::Int64,
    )
    .expect("cast");
    ints(
        &[datafusion::arrow::array::RecordBatch::try_from_iter([("c", a)]).expect("batch")],
        0,
    )[0]
}
