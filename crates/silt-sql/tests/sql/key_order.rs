//! `ORDER BY key ... LIMIT n` read in key order and stopped early: the
//! scan's rows come in primary-key order, so the plan holds no sort and the
//! limit is the scan's own. Checked against a model (a `BTreeMap`) over
//! random keys of every orderable type, spread over partitions, disk
//! components and the memtable, with updates and deletes, in and out of a
//! transaction.

use std::collections::BTreeMap;

use datafusion::arrow::array::{Array, AsArray, RecordBatch};
use datafusion::arrow::datatypes::{Float64Type, Int64Type};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use silt_sql::{SqlEngine, SqlSession};

use crate::common::*;

/// A key of the model, ordered as SQL orders the column.
#[derive(Clone, Debug, PartialEq, PartialOrd)]
enum K {
    Int(i64),
    Double(f64),
    Text(String),
}

impl K {
    fn sql(&self) -> String {
        match self {
            K::Int(i) => i.to_string(),
            K::Double(d) => format!("{d:?}"),
            K::Text(s) => format!("'{}'", s.replace('\'', "''")),
        }
    }
}

fn key_column(b: &[RecordBatch], ty: &str) -> Vec<K> {
    let mut out = Vec::new();
    for x in b {
        let c = x.column(0);
        for i in 0..c.len() {
            out.push(match ty {
                "BIGINT" => K::Int(c.as_primitive::<Int64Type>().value(i)),
                "DOUBLE" => K::Double(c.as_primitive::<Float64Type>().value(i)),
                _ => K::Text(c.as_string::<i32>().value(i).to_owned()),
            });
        }
    }
    out
}

fn random_key(rng: &mut StdRng, ty: &str) -> K {
    match ty {
        "BIGINT" => K::Int(rng.random_range(-1_000_000..1_000_000)),
        "DOUBLE" => K::Double(rng.random_range(-1000.0..1000.0)),
        _ => {
            // Prefixes of each other, upper and lower case, an escape byte.
            let alphabet = ['a', 'b', 'B', 'z', '\u{0}', 'é'];
            let n = rng.random_range(0..5);
            K::Text(
                (0..n)
                    .map(|_| alphabet[rng.random_range(0..alphabet.len())])
                    .filter(|c| *c != '\u{0}')
                    .collect(),
            )
        }
    }
}

fn assert_no_sort(e: &SqlEngine, sql: &str) {
    let plan = explain(e, sql);
    assert!(!plan.contains("SortExec"), "{sql}\n{plan}");
}

/// Load `n` random rows in several flushes, with updates and deletes.
fn load(e: &SqlEngine, rng: &mut StdRng, ty: &str, n: usize) -> BTreeMap<String, (K, i64)> {
    let ds = e.database().dataset("t").expect("dataset");
    let mut model: BTreeMap<String, (K, i64)> = BTreeMap::new();
    for round in 0..4 {
        for _ in 0..n / 4 {
            let k = random_key(rng, ty);
            let v = rng.random_range(0..1000);
            run(
                e,
                &format!("UPSERT INTO t (k, v) VALUES ({}, {v})", k.sql()),
            );
            model.insert(format!("{k:?}"), (k, v));
        }
        // Delete a few present keys.
        let present: Vec<K> = model.values().map(|(k, _)| k.clone()).collect();
        for _ in 0..3.min(present.len()) {
            let k = &present[rng.random_range(0..present.len())];
            run(e, &format!("DELETE FROM t WHERE k = {}", k.sql()));
            model.remove(&format!("{k:?}"));
        }
        // The last round stays in the memtable.
        if round < 3 {
            ds.flush().expect("flush");
        }
    }
    model
}

fn sorted(model: &BTreeMap<String, (K, i64)>) -> Vec<K> {
    let mut keys: Vec<K> = model.values().map(|(k, _)| k.clone()).collect();
    keys.sort_by(|a, b| a.partial_cmp(b).expect("no NaN keys"));
    keys
}

#[test]
fn order_by_key_limit_matches_the_model() {
    for (seed, ty) in [
        (1u64, "BIGINT"),
        (2, "DOUBLE"),
        (3, "VARCHAR"),
        (4, "BIGINT"),
    ] {
        let (_d, e) = engine();
        let partitions = 1 + seed % 3;
        run(
            &e,
            &format!(
                "CREATE TABLE t (k {ty} PRIMARY KEY, v BIGINT) WITH (partitions = {partitions})"
            ),
        );
        let mut rng = StdRng::seed_from_u64(seed);
        let model = load(&e, &mut rng, ty, 400);
        let all = sorted(&model);
        for limit in [0usize, 1, 3, 10, 1000] {
            let sql = format!("SELECT k, v FROM t ORDER BY k LIMIT {limit}");
            assert_no_sort(&e, &sql);
            let got = key_column(&run(&e, &sql), ty);
            let want: Vec<K> = all.iter().take(limit).cloned().collect();
            assert_eq!(got, want, "{sql} (seed {seed})");
            // OFFSET too.
            let sql = format!("SELECT k FROM t ORDER BY k ASC LIMIT {limit} OFFSET 5");
            let got = key_column(&run(&e, &sql), ty);
            let want: Vec<K> = all.iter().skip(5).take(limit).cloned().collect();
            assert_eq!(got, want, "{sql}");
        }
        // Key ranges, in order and stopped early.
        for _ in 0..20 {
            let (a, b) = (random_key(&mut rng, ty), random_key(&mut rng, ty));
            let (lo, hi) = if a <= b { (a, b) } else { (b, a) };
            let limit = rng.random_range(1..30);
            let sql = format!(
                "SELECT k FROM t WHERE k >= {} AND k < {} ORDER BY k LIMIT {limit}",
                lo.sql(),
                hi.sql()
            );
            assert_no_sort(&e, &sql);
            let got = key_column(&run(&e, &sql), ty);
            let want: Vec<K> = all
                .iter()
                .filter(|k| **k >= lo && **k < hi)
                .take(limit)
                .cloned()
                .collect();
            assert_eq!(got, want, "{sql}");
        }
        // A filter on another column keeps the order (the limit stays above it).
        let sql = "SELECT k FROM t WHERE v < 500 ORDER BY k LIMIT 7";
        assert_no_sort(&e, sql);
        let got = key_column(&run(&e, sql), ty);
        let want: Vec<K> = all
            .iter()
            .filter(|k| model[&format!("{k:?}")].1 < 500)
            .take(7)
            .cloned()
            .collect();
        assert_eq!(got, want, "{sql}");
        // Descending: the scan reads backwards.
        for limit in [1usize, 4, 1000] {
            let sql = format!("SELECT k, v FROM t ORDER BY k DESC LIMIT {limit}");
            assert_no_sort(&e, &sql);
            let got = key_column(&run(&e, &sql), ty);
            let want: Vec<K> = all.iter().rev().take(limit).cloned().collect();
            assert_eq!(got, want, "{sql}");
        }
        for _ in 0..10 {
            let (a, b) = (random_key(&mut rng, ty), random_key(&mut rng, ty));
            let (lo, hi) = if a <= b { (a, b) } else { (b, a) };
            let limit = rng.random_range(1..30);
            let sql = format!(
                "SELECT k FROM t WHERE k > {} AND k <= {} ORDER BY k DESC LIMIT {limit}",
                lo.sql(),
                hi.sql()
            );
            assert_no_sort(&e, &sql);
            let got = key_column(&run(&e, &sql), ty);
            let want: Vec<K> = all
                .iter()
                .rev()
                .filter(|k| **k > lo && **k <= hi)
                .take(limit)
                .cloned()
                .collect();
            assert_eq!(got, want, "{sql}");
        }
    }
}

#[test]
fn the_limit_is_the_scans() {
    let (_d, e) = engine();
    run(&e, "CREATE TABLE t (k BIGINT PRIMARY KEY, v BIGINT)");
    let values: Vec<String> = (0..5000).map(|i| format!("({i}, {})", i % 7)).collect();
    run(&e, &format!("INSERT INTO t VALUES {}", values.join(", ")));
    let plan = explain(&e, "SELECT k, v FROM t ORDER BY k LIMIT 10");
    assert!(plan.contains("limit=10"), "{plan}");
    assert!(!plan.contains("SortExec"), "{plan}");
    let plan = explain(
        &e,
        "SELECT v FROM t WHERE k > 100 ORDER BY k LIMIT 3 OFFSET 2",
    );
    assert!(plan.contains("limit=5"), "{plan}");
    assert!(plan.contains("primary range"), "{plan}");
    let plan = explain(&e, "SELECT k, v FROM t ORDER BY k DESC LIMIT 10");
    assert!(plan.contains("order=descending"), "{plan}");
    assert!(plan.contains("limit=10"), "{plan}");
    assert_eq!(
        ints(
            &run(&e, "SELECT k FROM t ORDER BY k DESC LIMIT 3 OFFSET 1"),
            0
        ),
        vec![4998, 4997, 4996]
    );
    // A sort on anything else than the key stays a sort.
    let plan = explain(&e, "SELECT k FROM t ORDER BY v, k LIMIT 3");
    assert!(plan.contains("SortExec"), "{plan}");
    assert_eq!(
        ints(&run(&e, "SELECT k FROM t ORDER BY v, k LIMIT 3"), 0),
        vec![0, 7, 14]
    );
}

#[test]
fn composite_keys_order_by_their_fields() {
    let (_d, e) = engine();
    run(
        &e,
        "CREATE TABLE c (a BIGINT, b VARCHAR, v BIGINT, PRIMARY KEY (a, b)) WITH (partitions = 2)",
    );
    let mut rng = StdRng::seed_from_u64(9);
    let mut model = BTreeMap::new();
    for _ in 0..300 {
        let a = rng.random_range(-20..20);
        let b: String = (0..rng.random_range(0..3))
            .map(|_| ['x', 'y', 'Z'][rng.random_range(0..3)])
            .collect();
        run(
            &e,
            &format!("UPSERT INTO c (a, b, v) VALUES ({a}, '{b}', 1)"),
        );
        model.insert((a, b), ());
    }
    let want: Vec<(i64, String)> = model.keys().take(25).cloned().collect();
    let sql = "SELECT a, b FROM c ORDER BY a, b LIMIT 25";
    assert_no_sort(&e, sql);
    let b = run(&e, sql);
    let got: Vec<(i64, String)> = ints(&b, 0)
        .into_iter()
        .zip(strings(&b, 1).into_iter().map(Option::unwrap_or_default))
        .collect();
    assert_eq!(got, want);
    // The first key field alone is an ordering too.
    assert_no_sort(&e, "SELECT a FROM c ORDER BY a LIMIT 3");
    // Both descending: read backwards.
    let sql = "SELECT a, b FROM c ORDER BY a DESC, b DESC LIMIT 25";
    assert_no_sort(&e, sql);
    let b = run(&e, sql);
    let got: Vec<(i64, String)> = ints(&b, 0)
        .into_iter()
        .zip(strings(&b, 1).into_iter().map(Option::unwrap_or_default))
        .collect();
    let want: Vec<(i64, String)> = model.keys().rev().take(25).cloned().collect();
    assert_eq!(got, want);
    // Mixed directions are sorted.
    let sql = "SELECT a, b FROM c ORDER BY a DESC, b LIMIT 5";
    let plan = explain(&e, sql);
    assert!(plan.contains("SortExec"), "{plan}");
    let b = run(&e, sql);
    let mut keys: Vec<(i64, String)> = model.keys().cloned().collect();
    keys.sort_by(|x, y| y.0.cmp(&x.0).then(x.1.cmp(&y.1)));
    let got: Vec<(i64, String)> = ints(&b, 0)
        .into_iter()
        .zip(strings(&b, 1).into_iter().map(Option::unwrap_or_default))
        .collect();
    assert_eq!(got, keys.into_iter().take(5).collect::<Vec<_>>());
    // The second alone is not.
    let plan = explain(&e, "SELECT b FROM c ORDER BY b LIMIT 3");
    assert!(plan.contains("SortExec"), "{plan}");
}

#[test]
fn a_transaction_sees_its_own_writes_in_key_order() {
    let (_d, e) = engine();
    run(&e, "CREATE TABLE t (k BIGINT PRIMARY KEY, v BIGINT)");
    run(&e, "INSERT INTO t VALUES (2, 0), (4, 0), (6, 0), (8, 0)");
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
    exec("INSERT INTO t VALUES (1, 1), (5, 1)");
    exec("DELETE FROM t WHERE k = 2");
    let got = ints(&exec("SELECT k FROM t ORDER BY k LIMIT 4"), 0);
    assert_eq!(got, vec![1, 4, 5, 6]);
    let got = ints(&exec("SELECT k FROM t ORDER BY k DESC LIMIT 4"), 0);
    assert_eq!(got, vec![8, 6, 5, 4]);
    exec("UPDATE t SET v = 2 WHERE k = 8");
    exec("DELETE FROM t WHERE k = 6");
    let got = ints(
        &exec("SELECT k FROM t WHERE k < 9 ORDER BY k DESC LIMIT 3"),
        0,
    );
    assert_eq!(got, vec![8, 5, 4]);
    exec("ROLLBACK");
    let got = ints(&run(&e, "SELECT k FROM t ORDER BY k LIMIT 4"), 0);
    assert_eq!(got, vec![2, 4, 6, 8]);
}

#[test]
fn min_and_max_of_the_key_read_its_ends() {
    for (seed, ty) in [(11u64, "BIGINT"), (12, "DOUBLE"), (13, "VARCHAR")] {
        let (_d, e) = engine();
        run(
            &e,
            &format!("CREATE TABLE t (k {ty} PRIMARY KEY, v BIGINT) WITH (partitions = 2)"),
        );
        let one = |sql: &str| key_column(&run(&e, sql), ty).into_iter().next();
        // Empty: one row, NULL.
        let b = run(&e, "SELECT max(k) FROM t");
        assert_eq!(b.iter().map(|x| x.num_rows()).sum::<usize>(), 1);
        assert!(b[0].column(0).is_null(0), "{ty}");
        let mut rng = StdRng::seed_from_u64(seed);
        let model = load(&e, &mut rng, ty, 400);
        let all = sorted(&model);
        for (sql, want) in [
            ("SELECT max(k) FROM t", all.last()),
            ("SELECT min(k) FROM t", all.first()),
        ] {
            let plan = explain(&e, sql);
            assert!(plan.contains("limit=1"), "{sql}\n{plan}");
            assert_eq!(one(sql).as_ref(), want, "{sql} ({ty})");
        }
        // A filter on another column: the aggregate reads what it keeps.
        let sql = "SELECT max(k) FROM t WHERE v < 500";
        let want = all
            .iter()
            .rev()
            .find(|k| model[&format!("{k:?}")].1 < 500)
            .cloned();
        assert_eq!(one(sql), want, "{sql}");
        // A transaction's own writes and deletes.
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        let s = SqlSession::new();
        let exec = |sql: &str| {
            rt.block_on(e.execute_in(&s, sql))
                .unwrap_or_else(|err| panic!("{sql}: {err}"))
        };
        let (lo, hi) = (all[0].clone(), all[all.len() - 1].clone());
        exec("BEGIN");
        exec(&format!("DELETE FROM t WHERE k = {}", hi.sql()));
        exec(&format!("DELETE FROM t WHERE k = {}", lo.sql()));
        let got = key_column(&exec("SELECT max(k) FROM t"), ty);
        assert_eq!(got.first(), all.get(all.len() - 2), "{ty}");
        let got = key_column(&exec("SELECT min(k) FROM t"), ty);
        assert_eq!(got.first(), all.get(1), "{ty}");
        exec("ROLLBACK");
        assert_eq!(one("SELECT max(k) FROM t"), Some(hi));
    }
}
