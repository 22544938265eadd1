//! End-to-end SQL tests on a temporary database: DDL, DML, pushdown
//! correctness against brute force, EXPLAIN, kNN, spatial joins, errors.
//! The other SQL test files are modules of this binary (one link of
//! DataFusion for all of them).

use std::collections::BTreeSet;
use std::sync::Arc;

use datafusion::arrow::array::{Array, AsArray};
use datafusion::arrow::datatypes::Int64Type;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use silt::geo::sphere::haversine_m;
use silt_sql::{SqlEngine, SqlError};

#[path = "sql/alter.rs"]
mod alter;
#[path = "sql/arrays.rs"]
mod arrays;
#[path = "sql/bitmap_or.rs"]
mod bitmap_or;
#[path = "sql/bounds.rs"]
mod bounds;
#[path = "sql/brin.rs"]
mod brin;
#[path = "sql/column_images.rs"]
mod column_images;
mod common;
#[path = "sql/copy_files.rs"]
mod copy_files;
#[path = "sql/ddl.rs"]
mod ddl;
#[path = "sql/documents.rs"]
mod documents;
#[path = "sql/foreign_keys.rs"]
mod foreign_keys;
#[path = "sql/join_keys.rs"]
mod join_keys;
#[path = "sql/kept_insert.rs"]
mod kept_insert;
#[path = "sql/key_order.rs"]
mod key_order;
#[path = "sql/lookup_join.rs"]
mod lookup_join;
#[path = "sql/numeric_avg.rs"]
mod numeric_avg;
#[path = "sql/plan_cache.rs"]
mod plan_cache;
#[path = "sql/postgis.rs"]
mod postgis;
#[path = "sql/prefilter.rs"]
mod prefilter;
#[path = "sql/prepare.rs"]
mod prepare;
#[path = "sql/pubsub.rs"]
mod pubsub;
#[path = "sql/sequences.rs"]
mod sequences;
#[path = "sql/serial.rs"]
mod serial;
#[path = "sql/split_scan.rs"]
mod split_scan;
#[path = "sql/transactions.rs"]
mod transactions;
#[path = "sql/types.rs"]
mod types;
#[path = "sql/unique.rs"]
mod unique;
#[path = "sql/view_rewrite.rs"]
mod view_rewrite;
#[path = "sql/workload.rs"]
mod workload;

use common::*;

#[test]
fn ddl_and_dml() {
    let (_d, e) = engine();
    run(
        &e,
        "CREATE TABLE t (id BIGINT PRIMARY KEY, name VARCHAR, score DOUBLE, ok BOOLEAN, loc GEOMETRY) \
         WITH (merge_policy = 'prefix', memory_budget = '8MB', partitions = 2)",
    );
    let def = e.database().dataset("t").expect("dataset").def().clone();
    assert_eq!(def.partitions, 2);
    assert_eq!(def.memory_budget, 8 << 20);
    assert_eq!(def.policy.name(), "prefix");
    // IF NOT EXISTS is a no-op; a second CREATE fails.
    run(&e, "CREATE TABLE IF NOT EXISTS t (id BIGINT PRIMARY KEY)");
    assert!(fail(&e, "CREATE TABLE t (id BIGINT PRIMARY KEY)").contains("already exists"));

    let b = run(
        &e,
        "INSERT INTO t VALUES (1, 'one', 1.5, true, ST_Point(1, 2)), \
         (2, 'two', 2.5, false, 'POINT(3 4)'), (3, 'three', NULL, NULL, NULL)",
    );
    assert_eq!(count(&b), 3);
    // Unique insert: the duplicate key is named.
    let err = fail(&e, "INSERT INTO t (id, name) VALUES (2, 'again')");
    assert!(
        err.contains("violates unique constraint \"t_pkey\" (Key (id)=(2) already exists.)"),
        "{err}"
    );
    // Upserts in three spellings.
    assert_eq!(
        count(&run(
            &e,
            "UPSERT INTO t (id, name) VALUES (2, 'TWO'), (4, 'four')"
        )),
        2
    );
    assert_eq!(
        count(&run(
            &e,
            "INSERT OR REPLACE INTO t (id, name) VALUES (5, 'five')"
        )),
        1
    );
    assert_eq!(
        count(&run(
            &e,
            "INSERT INTO t (id, name) VALUES (5, 'FIVE') ON CONFLICT (id) DO UPDATE SET name = excluded.name"
        )),
        1
    );
    let b = run(&e, "SELECT id, name FROM t ORDER BY id");
    assert_eq!(ints(&b, 0), vec![1, 2, 3, 4, 5]);
    assert_eq!(
        strings(&b, 1),
        vec![
            Some("one".into()),
            Some("TWO".into()),
            Some("three".into()),
            Some("four".into()),
            Some("FIVE".into())
        ]
    );
    // Geometry reads back as WKT.
    let b = run(&e, "SELECT loc, ST_X(loc), ST_Y(loc) FROM t WHERE id = 1");
    assert_eq!(strings(&b, 0), vec![Some("POINT(1 2)".into())]);
    assert_eq!(floats(&b, 1), vec![1.0]);
    assert_eq!(floats(&b, 2), vec![2.0]);

    // INSERT ... SELECT
    run(&e, "CREATE TABLE u (id BIGINT PRIMARY KEY, name VARCHAR)");
    assert_eq!(
        count(&run(
            &e,
            "INSERT INTO u SELECT id, name FROM t WHERE id > 2"
        )),
        3
    );
    assert_eq!(
        id_set(&run(&e, "SELECT id FROM u")),
        BTreeSet::from([3, 4, 5])
    );

    // Secondary index DDL, with options.
    run(&e, "CREATE INDEX t_name ON t USING btree (name)");
    run(
        &e,
        "CREATE INDEX t_loc ON t USING rtree (loc) WITH (reconcile = 'deleted_keys', leaf_bytes = '2KB')",
    );
    run(
        &e,
        "CREATE INDEX t_txt ON t USING ngram (name) WITH (gram = 2)",
    );
    let defs = e.database().dataset("t").expect("t").index_defs();
    assert_eq!(defs.len(), 3);
    assert!(fail(&e, "CREATE INDEX t_name ON t (name)").contains("already exists"));
    run(&e, "CREATE INDEX IF NOT EXISTS t_name ON t (name)");
    assert_eq!(
        id_set(&run(&e, "SELECT id FROM t WHERE name = 'TWO'")),
        BTreeSet::from([2])
    );

    // DELETE with and without an index path.
    assert_eq!(count(&run(&e, "DELETE FROM t WHERE name = 'TWO'")), 1);
    assert_eq!(
        count(&run(&e, "DELETE FROM t WHERE score IS NULL AND id > 3")),
        2
    );
    assert_eq!(id_set(&run(&e, "SELECT id FROM t")), BTreeSet::from([1, 3]));
    assert_eq!(count(&run(&e, "DELETE FROM t WHERE id = 42")), 0);

    run(&e, "COMPACT t");
    assert_eq!(id_set(&run(&e, "SELECT id FROM t")), BTreeSet::from([1, 3]));
    run(&e, "DROP INDEX t_name ON t");
    run(&e, "DROP INDEX t.t_loc");
    run(&e, "DROP INDEX t_txt");
    run(&e, "DROP INDEX IF EXISTS t_txt");
    assert!(
        e.database()
            .dataset("t")
            .expect("t")
            .index_defs()
            .is_empty()
    );
    run(&e, "DROP TABLE u");
    run(&e, "DROP TABLE IF EXISTS u");
    let err = fail(&e, "SELECT * FROM u");
    assert!(err.contains("u"), "{err}");
    // Multiple statements: the result of the last.
    let b = run(
        &e,
        "INSERT INTO t (id) VALUES (10); SELECT count(*) AS n FROM t",
    );
    assert_eq!(ints(&b, 0), vec![3]);
}

#[test]
fn pushdown_matches_brute_force() {
    let (_d, e) = engine();
    let mut rng = StdRng::seed_from_u64(7);
    let rows = load_random(&e, &mut rng, 600);
    // Some updates and deletes after the indexes exist.
    run(
        &e,
        "UPSERT INTO r VALUES (0, 49, 'red sun', ST_Point(0.5, 0.5))",
    );
    run(&e, "DELETE FROM r WHERE id = 3");
    let mut rows: Vec<Row> = rows.into_iter().filter(|r| r.id != 3).collect();
    rows[0] = Row {
        id: 0,
        a: 49,
        x: 0.5,
        y: 0.5,
        words: vec!["red", "sun"],
    };
    let ids = |f: &dyn Fn(&Row) -> bool| -> BTreeSet<i64> {
        rows.iter().filter(|r| f(r)).map(|r| r.id).collect()
    };
    for round in 0..12 {
        // Primary key range.
        let lo = rng.random_range(0..1800);
        let hi = lo + rng.random_range(0..300);
        let sql = format!("SELECT id FROM r WHERE id >= {lo} AND id < {hi}");
        assert_eq!(
            id_set(&run(&e, &sql)),
            ids(&|r| r.id >= lo && r.id < hi),
            "{sql}"
        );
        if round == 0 {
            assert!(
                explain(&e, &sql).contains("access=primary range"),
                "{}",
                explain(&e, &sql)
            );
        }
        // Secondary range (and a residual on the primary key).
        let alo = rng.random_range(0..50);
        let ahi = alo + rng.random_range(0..10);
        let sql = format!("SELECT id FROM r WHERE a BETWEEN {alo} AND {ahi} AND id > 100");
        assert_eq!(
            id_set(&run(&e, &sql)),
            ids(&|r| r.a >= alo && r.a <= ahi && r.id > 100),
            "{sql}"
        );
        let sql = format!("SELECT id FROM r WHERE a = {alo}");
        assert_eq!(id_set(&run(&e, &sql)), ids(&|r| r.a == alo), "{sql}");
        if round == 0 {
            let plan = explain(&e, &sql);
            assert!(plan.contains("access=btree(a) index=r_a range"), "{plan}");
        }
        // Box.
        let x0 = rng.random_range(-20.0..15.0);
        let y0 = rng.random_range(-10.0..5.0);
        let (x1, y1) = (
            x0 + rng.random_range(0.0..8.0),
            y0 + rng.random_range(0.0..8.0),
        );
        let sql = format!(
            "SELECT id FROM r WHERE ST_Intersects(loc, ST_MakeEnvelope({x0}, {y0}, {x1}, {y1}))"
        );
        assert_eq!(
            id_set(&run(&e, &sql)),
            ids(&|r| x0 <= r.x && r.x <= x1 && y0 <= r.y && r.y <= y1),
            "{sql}"
        );
        let sql2 = format!(
            "SELECT id FROM r WHERE ST_Within(loc, ST_GeomFromText('POLYGON(({x0} {y0}, {x1} {y0}, {x1} {y1}, {x0} {y1}, {x0} {y0}))')) AND a < 25"
        );
        assert_eq!(
            id_set(&run(&e, &sql2)),
            ids(&|r| x0 < r.x && r.x < x1 && y0 < r.y && r.y < y1 && r.a < 25),
            "{sql2}"
        );
        if round == 0 {
            let plan = explain(&e, &sql);
            assert!(
                plan.contains("access=rtree(loc) index=r_loc intersects"),
                "{plan}"
            );
        }
        // Distance.
        let (cx, cy) = (rng.random_range(-20.0..20.0), rng.random_range(-10.0..10.0));
        let m = rng.random_range(10_000.0..600_000.0);
        let sql = format!("SELECT id FROM r WHERE ST_DWithin(loc, ST_Point({cx}, {cy}), {m})");
        assert_eq!(
            id_set(&run(&e, &sql)),
            ids(&|r| haversine_m(cx, cy, r.x, r.y) <= m),
            "{sql}"
        );
        if round == 0 {
            let plan = explain(&e, &sql);
            assert!(plan.contains("within-distance"), "{plan}");
        }
        // Text.
        let w1 = WORDS[rng.random_range(0..WORDS.len())];
        let w2 = WORDS[rng.random_range(0..WORDS.len())];
        let sql = format!("SELECT id FROM r WHERE ft_contains(name, '{w1} {w2}')");
        assert_eq!(
            id_set(&run(&e, &sql)),
            ids(&|r| r.words.contains(&w1) && r.words.contains(&w2)),
            "{sql}"
        );
        if round == 0 {
            let plan = explain(&e, &sql);
            assert!(
                plan.contains("access=keyword(name) index=r_name text"),
                "{plan}"
            );
        }
    }
    // Exact spatial filters leave DataFusion nothing to re-check (the index
    // re-checks each record); ST_Within (OGC) is re-checked above the
    // index's candidates, and so is a box across the antimeridian.
    for sql in [
        "SELECT id FROM r WHERE ST_Intersects(loc, ST_MakeEnvelope(0, 0, 5, 5))",
        "SELECT id FROM r WHERE ST_DWithin(loc, ST_Point(0, 0), 100000)",
    ] {
        let plan = explain(&e, sql);
        assert!(!plan.contains("FilterExec"), "{plan}");
        assert!(!plan.contains("projection=[id, loc]"), "{plan}");
    }
    for sql in [
        "SELECT id FROM r WHERE ST_Within(loc, ST_MakeEnvelope(0, 0, 5, 5))",
        "SELECT id FROM r WHERE ST_Intersects(loc, ST_MakeEnvelope(170, 0, -170, 5))",
    ] {
        let plan = explain(&e, sql);
        assert!(plan.contains("FilterExec"), "{plan}");
    }
    // A limit goes into an exact spatial scan.
    let sql =
        "SELECT id FROM r WHERE ST_Intersects(loc, ST_MakeEnvelope(-20, -10, 20, 10)) LIMIT 5";
    assert_eq!(ints(&run(&e, sql), 0).len(), 5);
    // Scans longer than a batch go on streaming after their first batch.
    run(&e, "SET datafusion.execution.batch_size = 16");
    assert_eq!(id_set(&run(&e, "SELECT id FROM r")), ids(&|_| true));
    let sql = "SELECT id FROM r WHERE ST_Intersects(loc, ST_MakeEnvelope(-20, -10, 5, 10))";
    assert_eq!(id_set(&run(&e, sql)), ids(&|r| r.x <= 5.0), "{sql}");
    assert_eq!(ints(&run(&e, "SELECT id FROM r LIMIT 40"), 0).len(), 40);
    let sql =
        "SELECT id FROM r WHERE ST_Intersects(loc, ST_MakeEnvelope(-20, -10, 5, 10)) LIMIT 33";
    assert_eq!(ints(&run(&e, sql), 0).len(), 33);
    run(&e, "SET datafusion.execution.batch_size = 8192");

    // IN lists on the primary key.
    let sql = "SELECT id FROM r WHERE id IN (30, 3, 33, 31, 30)";
    assert_eq!(id_set(&run(&e, sql)), BTreeSet::from([30, 33]));
    assert!(
        explain(&e, sql).contains("get-many(4 keys)"),
        "{}",
        explain(&e, sql)
    );
    // Short lists, which DataFusion writes as ORs, and ORs written so.
    for sql in [
        "SELECT id FROM r WHERE id IN (33, 30)",
        "SELECT id FROM r WHERE id = 30 OR 33 = id OR id = 31",
    ] {
        assert_eq!(id_set(&run(&e, sql)), BTreeSet::from([30, 33]), "{sql}");
        let plan = explain(&e, sql);
        assert!(plan.contains("get-many("), "{plan}");
        assert!(!plan.contains("FilterExec"), "{plan}");
    }
    // Different columns: a union of the key's get and the index's probe.
    let sql = "SELECT id FROM r WHERE id = 30 OR a = 1000";
    assert_eq!(id_set(&run(&e, sql)), BTreeSet::from([30]));
    assert!(
        explain(&e, sql).contains("any of 2 paths [primary get(30); btree(a)"),
        "{}",
        explain(&e, sql)
    );
    // Composite primary keys: equality on every part is a point lookup.
    run(
        &e,
        "CREATE TABLE ck (a VARCHAR, b BIGINT, v DOUBLE, PRIMARY KEY (a, b))",
    );
    run(
        &e,
        "INSERT INTO ck VALUES ('x', 1, 1.0), ('x', 2, 2.0), ('y', 1, 3.0)",
    );
    let sql = "SELECT b FROM ck WHERE a = 'x' AND b = 2";
    assert_eq!(id_set(&run(&e, sql)), BTreeSet::from([2]));
    assert!(
        explain(&e, sql).contains("access=primary get((\"x\", 2))"),
        "{}",
        explain(&e, sql)
    );
    let sql = "SELECT b FROM ck WHERE a = 'x' AND b > 1";
    assert_eq!(id_set(&run(&e, sql)), BTreeSet::from([2]));
    assert!(
        explain(&e, sql).contains("access=primary range"),
        "{}",
        explain(&e, sql)
    );
    // Point lookups and limits.
    let plan = explain(&e, "SELECT * FROM r WHERE id = 30");
    assert!(plan.contains("access=primary get(30)"), "{plan}");
    assert_eq!(
        id_set(&run(&e, "SELECT id FROM r WHERE id = 30")),
        BTreeSet::from([30])
    );
    assert_eq!(
        run(&e, "SELECT id FROM r WHERE id = 31")
            .iter()
            .map(|b| b.num_rows())
            .sum::<usize>(),
        0
    );
    let b = run(&e, "SELECT id FROM r LIMIT 7");
    assert_eq!(ints(&b, 0).len(), 7);
    let b = run(&e, "SELECT count(*) FROM r");
    assert_eq!(ints(&b, 0), vec![rows.len() as i64]);
}

#[test]
fn knn_uses_the_rtree_and_matches_brute_force() {
    let (_d, e) = engine();
    let mut rng = StdRng::seed_from_u64(11);
    let rows = load_random(&e, &mut rng, 400);
    run(&e, "COMPACT r");
    for _ in 0..8 {
        let (cx, cy) = (rng.random_range(-20.0..20.0), rng.random_range(-10.0..10.0));
        let k = rng.random_range(1..15);
        let sql = format!(
            "SELECT id, ST_Distance(loc, ST_Point({cx}, {cy})) AS d FROM r ORDER BY d LIMIT {k}"
        );
        let b = run(&e, &sql);
        let mut brute: Vec<(f64, i64)> = rows
            .iter()
            .map(|r| (haversine_m(cx, cy, r.x, r.y), r.id))
            .collect();
        brute.sort_by(|a, b| a.0.total_cmp(&b.0));
        let want: Vec<i64> = brute.iter().take(k).map(|x| x.1).collect();
        assert_eq!(ints(&b, 0), want, "{sql}");
        let d = floats(&b, 1);
        for (got, exp) in d.iter().zip(brute.iter()) {
            assert!((got - exp.0).abs() < 1e-6, "{got} vs {}", exp.0);
        }
        let plan = explain(&e, &sql);
        assert!(plan.contains("knn(POINT("), "{plan}");
        // The scan yields the hits nearest first: no sort above it, and
        // no repartition that could reorder them.
        assert!(!plan.contains("SortExec"), "{plan}");
        assert!(!plan.contains("RepartitionExec"), "{plan}");
        // With an offset: the k nearest after the first two.
        let sql = format!(
            "SELECT id, ST_Distance(loc, ST_Point({cx}, {cy})) * 2 AS d2 FROM r ORDER BY ST_Distance(loc, ST_Point({cx}, {cy})) LIMIT {k} OFFSET 2"
        );
        let want_off: Vec<i64> = brute.iter().skip(2).take(k).map(|x| x.1).collect();
        assert_eq!(ints(&run(&e, &sql), 0), want_off, "{sql}");
        // The ORDER BY expression need not be selected.
        let sql =
            format!("SELECT id FROM r ORDER BY ST_Distance(ST_Point({cx}, {cy}), loc) LIMIT {k}");
        assert_eq!(ints(&run(&e, &sql), 0), want, "{sql}");
        let plan = explain(&e, &sql);
        assert!(plan.contains("knn(POINT("), "{plan}");
        assert!(!plan.contains("SortExec"), "{plan}");
    }
    // A filter between the sort and the scan: no kNN path, still right.
    let sql = "SELECT id FROM r WHERE a < 10 ORDER BY ST_Distance(loc, ST_Point(0, 0)) LIMIT 3";
    let mut brute: Vec<(f64, i64)> = rows
        .iter()
        .filter(|r| r.a < 10)
        .map(|r| (haversine_m(0.0, 0.0, r.x, r.y), r.id))
        .collect();
    brute.sort_by(|a, b| a.0.total_cmp(&b.0));
    let want: Vec<i64> = brute.iter().take(3).map(|x| x.1).collect();
    assert_eq!(ints(&run(&e, sql), 0), want);
    assert!(!explain(&e, sql).contains("knn("));
}

#[test]
fn spatial_join_matches_nested_loop() {
    let (_d, e) = engine();
    let mut rng = StdRng::seed_from_u64(5);
    let rows = load_random(&e, &mut rng, 300);
    run(
        &e,
        "CREATE TABLE zones (zid BIGINT PRIMARY KEY, area POLYGON)",
    );
    let mut zones = Vec::new();
    for zid in 0..25i64 {
        let x0 = rng.random_range(-20.0..18.0);
        let y0 = rng.random_range(-10.0..8.0);
        let (x1, y1) = (
            x0 + rng.random_range(0.5..6.0),
            y0 + rng.random_range(0.5..6.0),
        );
        zones.push((zid, x0, y0, x1, y1));
        run(
            &e,
            &format!("INSERT INTO zones VALUES ({zid}, ST_MakeEnvelope({x0}, {y0}, {x1}, {y1}))"),
        );
    }
    let sql = "SELECT z.zid, p.id FROM zones z JOIN r p ON ST_Intersects(p.loc, z.area)";
    let plan = explain(&e, sql);
    assert!(plan.contains("SpatialJoinExec"), "{plan}");
    let b = run(&e, sql);
    let got: BTreeSet<(i64, i64)> = ints(&b, 0).into_iter().zip(ints(&b, 1)).collect();
    let mut want = BTreeSet::new();
    for &(zid, x0, y0, x1, y1) in &zones {
        for r in &rows {
            if x0 <= r.x && r.x <= x1 && y0 <= r.y && r.y <= y1 {
                want.insert((zid, r.id));
            }
        }
    }
    assert_eq!(got, want);
    assert!(!want.is_empty());

    // Distance join with a residual condition, probe side = points.
    run(&e, "CREATE TABLE q (qid BIGINT PRIMARY KEY, at POINT)");
    let mut probes = Vec::new();
    for qid in 0..10i64 {
        let (x, y) = (rng.random_range(-20.0..20.0), rng.random_range(-10.0..10.0));
        probes.push((qid, x, y));
        run(
            &e,
            &format!("INSERT INTO q VALUES ({qid}, ST_Point({x}, {y}))"),
        );
    }
    let sql = "SELECT q.qid, r.id FROM q, r WHERE ST_DWithin(q.at, r.loc, 300000) AND r.a < 30";
    let plan = explain(&e, sql);
    assert!(plan.contains("SpatialJoinExec"), "{plan}");
    let b = run(&e, sql);
    let got: BTreeSet<(i64, i64)> = ints(&b, 0).into_iter().zip(ints(&b, 1)).collect();
    let mut want = BTreeSet::new();
    for &(qid, x, y) in &probes {
        for r in &rows {
            if r.a < 30 && haversine_m(x, y, r.x, r.y) <= 300_000.0 {
                want.insert((qid, r.id));
            }
        }
    }
    assert_eq!(got, want);
}

#[test]
fn spatial_functions() {
    let (_d, e) = engine();
    let b = run(
        &e,
        "SELECT ST_AsText(ST_GeomFromText('POINT(1 2)')), \
                ST_AsGeoJSON(ST_Point(1, 2)), \
                ST_AsText(ST_GeomFromGeoJSON('{\"type\":\"Point\",\"coordinates\":[3,4]}')), \
                ST_AsText(ST_MakeEnvelope(0, 0, 1, 1))",
    );
    assert_eq!(strings(&b, 0), vec![Some("POINT(1 2)".into())]);
    let gj = strings(&b, 1).pop().flatten().expect("geojson");
    assert!(
        gj.contains("\"Point\"") && gj.contains("[1.0,2.0]") || gj.contains("[1,2]"),
        "{gj}"
    );
    assert_eq!(strings(&b, 2), vec![Some("POINT(3 4)".into())]);
    assert!(
        strings(&b, 3)[0]
            .as_deref()
            .is_some_and(|s| s.starts_with("POLYGON((0 0"))
    );
    let b = run(
        &e,
        "SELECT ST_Contains(ST_MakeEnvelope(0,0,2,2), ST_Point(1,1)), \
                ST_Within(ST_Point(1,1), ST_MakeEnvelope(0,0,2,2)), \
                ST_Intersects(ST_MakeEnvelope(0,0,1,1), ST_MakeEnvelope(1,1,2,2)), \
                ST_Contains(ST_MakeEnvelope(0,0,1,1), ST_Point(5,5)), \
                ST_DWithin(ST_Point(0,0), ST_Point(0,1), 112000), \
                ST_DWithin(ST_Point(0,0), ST_Point(0,1), 110000)",
    );
    let bools: Vec<bool> = (0..6)
        .map(|i| b[0].column(i).as_boolean().value(0))
        .collect();
    assert_eq!(bools, vec![true, true, true, false, true, false]);
    let b = run(
        &e,
        "SELECT ST_Distance(ST_Point(0,0), ST_Point(0,1)), \
                ST_Distance(ST_MakeEnvelope(0,0,1,1), ST_MakeEnvelope(0,2,1,3)), \
                ST_Distance(ST_Point(0.5,0.5), ST_MakeEnvelope(0,0,1,1))",
    );
    let one_deg = haversine_m(0.0, 0.0, 0.0, 1.0);
    assert!((floats(&b, 0)[0] - one_deg).abs() < 1e-6);
    assert!((floats(&b, 1)[0] - one_deg).abs() < 1.0);
    assert_eq!(floats(&b, 2)[0], 0.0);
    // NULL in, NULL out.
    let b = run(&e, "SELECT ST_X(NULL), ST_AsText(NULL)");
    assert!(b[0].column(0).is_null(0) && b[0].column(1).is_null(0));
}

#[test]
fn errors_are_clear_and_never_panic() {
    let (_d, e) = engine();
    run(
        &e,
        "CREATE TABLE g (id BIGINT PRIMARY KEY, loc POINT, n BIGINT)",
    );
    let cases: &[(&str, &str)] = &[
        ("SELEC 1", "syntax"),
        ("SELECT * FROM nope", "nope"),
        ("INSERT INTO nope VALUES (1)", "nope"),
        ("SELECT ST_GeomFromText('POINT(1')", "ST_GeomFromText"),
        ("SELECT ST_AsText('not wkt')", "ST_AsText"),
        ("SELECT ST_X(ST_MakeEnvelope(0,0,1,1))", "must be a point"),
        ("SELECT ST_Point('a', 1)", "must be a number"),
        (
            "SELECT ST_GeomFromGeoJSON('{\"type\":\"Nope\"}')",
            "ST_GeomFromGeoJSON",
        ),
        ("INSERT INTO g VALUES (1, 'POINT(1 2', 1)", "loc"),
        ("INSERT INTO g VALUES (NULL, 'POINT(1 2)', 1)", "null"),
        ("CREATE TABLE nopk (a BIGINT)", "primary key"),
        (
            "CREATE TABLE bad (a WEIRDTYPE PRIMARY KEY)",
            "unsupported column type",
        ),
        (
            "CREATE TABLE w (a BIGINT PRIMARY KEY) WITH (colour = 'red')",
            "unknown table option",
        ),
        (
            "CREATE TABLE w (a BIGINT PRIMARY KEY) WITH (merge_policy = 'nonsense')",
            "merge",
        ),
        ("CREATE INDEX i ON g USING nope (loc)", "unknown index type"),
        ("CREATE INDEX i ON g USING rtree (missing)", "no column"),
        ("CREATE INDEX i ON nope USING rtree (loc)", "nope"),
        ("DROP INDEX nope ON g", "nope"),
        ("DROP TABLE nope", "nope"),
        ("COMPACT nope", "nope"),
        ("COMPACT", "COMPACT"),
        ("INSERT OVERWRITE g VALUES (1, NULL, 1)", ""),
        (
            "INSERT INTO g VALUES (1, NULL, 1) ON CONFLICT (n) DO NOTHING",
            "ON CONFLICT",
        ),
        ("INSERT INTO g VALUES (1, NULL, 1) RETURNING nope", "nope"),
        ("INSERT INTO g VALUES (1, NULL)", "target columns"),
        ("INSERT INTO g (id, nope) VALUES (1, 2)", "no column `nope`"),
        ("CREATE TABLE c AS SELECT 1 AS id", "AS SELECT"),
    ];
    for (sql, needle) in cases {
        let err = fail(&e, sql);
        assert!(
            err.to_lowercase().contains(&needle.to_lowercase()),
            "{sql}: {err}"
        );
    }
    // The failing statement of a script is named; the ones before it ran.
    let err = fail(
        &e,
        "INSERT INTO g VALUES (7, 'POINT(0 0)', 1); INSERT INTO g VALUES (7, 'POINT(0 0)', 2); SELECT 1",
    );
    assert!(
        err.contains("statement 2") && err.contains("Key (id)=(7) already exists"),
        "{err}"
    );
    assert_eq!(id_set(&run(&e, "SELECT id FROM g")), BTreeSet::from([7]));
    // A semicolon inside a string does not split the statement.
    run(&e, "INSERT INTO g (id, n) VALUES (8, length('a;b'))");
    assert_eq!(ints(&run(&e, "SELECT n FROM g WHERE id = 8"), 0), vec![3]);
    // Blocking API from inside a runtime: an error, not a panic.
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("rt");
    let r = rt.block_on(async { e.execute_blocking("SELECT 1") });
    assert!(matches!(r, Err(SqlError::Runtime(_))));
}

#[test]
fn engine_is_send_and_sync() {
    fn check<T: Send + Sync>() {}
    check::<SqlEngine>();
}

#[test]
fn async_and_streaming_api() {
    let (_d, e) = engine();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("rt");
    rt.block_on(async {
        e.execute("CREATE TABLE s (id BIGINT PRIMARY KEY, v VARCHAR)")
            .await
            .expect("create");
        let b = e
            .execute("INSERT INTO s VALUES (1, 'a'), (2, 'b'), (3, 'c')")
            .await
            .expect("insert");
        assert_eq!(count(&b), 3);
        let mut stream = e
            .execute_stream("SELECT id FROM s WHERE id >= 2 ORDER BY id")
            .await
            .expect("stream");
        use futures::StreamExt;
        let mut got = Vec::new();
        while let Some(b) = stream.next().await {
            got.push(b.expect("batch"));
        }
        assert_eq!(ints(&got, 0), vec![2, 3]);
        // Tables created through the core API show up too.
        let db = e.database().clone();
        db.create_dataset(
            silt::DatasetDef::new("core", &["k"])
                .field("k", silt::FieldType::String)
                .field("v", silt::FieldType::Int),
        )
        .expect("create");
        let ds = db.dataset("core").expect("core");
        ds.insert(silt::Value::Object(vec![
            ("k".into(), "x".into()),
            ("v".into(), silt::Value::Int(1)),
            ("hidden".into(), silt::Value::Bool(true)),
        ]))
        .expect("insert");
        let b = e.execute("SELECT * FROM core").await.expect("select");
        assert_eq!(b[0].num_columns(), 2, "undeclared fields are not columns");
        assert_eq!(strings(&b, 0), vec![Some("x".into())]);
        assert!(e.session().table_exist("core").expect("exists"));
        // A dataset without declared types: its key is an `any` column of
        // JSON text, which DELETE and UPDATE turn back into the key.
        db.create_dataset(silt::DatasetDef::new("raw", &["k"]))
            .expect("create");
        let raw = db.dataset("raw").expect("raw");
        raw.insert(silt::Value::Object(vec![("k".into(), silt::Value::Int(5))]))
            .expect("insert");
        raw.insert(silt::Value::Object(vec![("k".into(), "five".into())]))
            .expect("insert");
        let b = e
            .execute("SELECT k FROM raw ORDER BY k")
            .await
            .expect("select");
        assert_eq!(
            strings(&b, 0),
            vec![Some("\"five\"".into()), Some("5".into())]
        );
        let b = e
            .execute("DELETE FROM raw WHERE k = '5'")
            .await
            .expect("delete");
        assert_eq!(count(&b), 1);
        let b = e
            .execute("INSERT INTO raw VALUES ('7'), ('seven')")
            .await
            .expect("insert");
        assert_eq!(count(&b), 2);
        assert!(raw.get(&[silt::Value::Int(7)]).expect("get").is_some());
        assert!(raw.get(&["seven".into()]).expect("get").is_some());
        // UPDATE keeps the fields SQL does not see.
        let b = e
            .execute("UPDATE core SET v = v + 1 WHERE k = 'x'")
            .await
            .expect("update");
        assert_eq!(count(&b), 1);
        let rec = ds.get(&["x".into()]).expect("get").expect("record");
        assert_eq!(rec.get("v"), Some(&silt::Value::Int(2)));
        assert_eq!(rec.get("hidden"), Some(&silt::Value::Bool(true)));
    });
}

#[test]
fn hilbert_index_pushdown() {
    let (_d, e) = engine();
    run(&e, "CREATE TABLE h (id BIGINT PRIMARY KEY, p POINT)");
    run(&e, "CREATE INDEX h_p ON h USING dhvb (p)");
    let mut rng = StdRng::seed_from_u64(3);
    let mut pts = Vec::new();
    let mut values = Vec::new();
    for id in 0..300i64 {
        let (x, y) = (rng.random_range(-5.0..5.0), rng.random_range(-5.0..5.0));
        pts.push((id, x, y));
        values.push(format!("({id}, ST_Point({x}, {y}))"));
    }
    run(&e, &format!("INSERT INTO h VALUES {}", values.join(", ")));
    let sql = "SELECT id FROM h WHERE ST_DWithin(p, ST_Point(1, 1), 200000)";
    let plan = explain(&e, sql);
    assert!(
        plan.contains("access=dhvb(p) index=h_p within-distance"),
        "{plan}"
    );
    let want: BTreeSet<i64> = pts
        .iter()
        .filter(|(_, x, y)| haversine_m(1.0, 1.0, *x, *y) <= 200_000.0)
        .map(|p| p.0)
        .collect();
    assert_eq!(id_set(&run(&e, sql)), want);
    // No kNN through a dhvb index: the plain sort answers.
    let sql = "SELECT id FROM h ORDER BY ST_Distance(p, ST_Point(0, 0)) LIMIT 3";
    assert!(!explain(&e, sql).contains("knn("));
    assert_eq!(ints(&run(&e, sql), 0).len(), 3);
}

/// The error of a failing statement, for matching its variant.
fn fail_err(e: &SqlEngine, sql: &str) -> SqlError {
    match e.execute_blocking(sql) {
        Ok(_) => panic!("{sql}\n  should have failed"),
        Err(err) => err,
    }
}

/// (id, name, n) rows of table `t`, in key order.
fn rows_of(e: &SqlEngine, sql: &str) -> Vec<(i64, Option<String>, Option<i64>)> {
    let b = run(e, sql);
    let mut out = Vec::new();
    for x in &b {
        let id = x.column(0).as_primitive::<Int64Type>();
        let name = x.column(1).as_string::<i32>();
        let n = x.column(2).as_primitive::<Int64Type>();
        for i in 0..x.num_rows() {
            out.push((
                id.value(i),
                (!name.is_null(i)).then(|| name.value(i).to_owned()),
                (!n.is_null(i)).then(|| n.value(i)),
            ));
        }
    }
    out
}

fn row(id: i64, name: &str, n: i64) -> (i64, Option<String>, Option<i64>) {
    (id, Some(name.to_owned()), Some(n))
}

#[test]
fn on_conflict_do_update_assigns_the_set_list() {
    let (_d, e) = engine();
    run(
        &e,
        "CREATE TABLE t (id BIGINT PRIMARY KEY, name VARCHAR, n BIGINT, loc GEOMETRY)",
    );
    run(
        &e,
        "INSERT INTO t VALUES (1, 'one', 10, ST_Point(1, 1)), (2, 'two', 20, ST_Point(2, 2))",
    );
    // The geometry case: only `loc` changes, the proposed row's other
    // columns are not stored.
    let b = run(
        &e,
        "INSERT INTO t VALUES (1, 'ignored', 99, ST_Point(5, 5)) \
         ON CONFLICT (id) DO UPDATE SET loc = ST_Point(7,7)",
    );
    assert_eq!(count(&b), 1);
    let b = run(&e, "SELECT name, n, loc FROM t WHERE id = 1");
    assert_eq!(strings(&b, 0), vec![Some("one".into())]);
    assert_eq!(ints(&b, 1), vec![10]);
    assert_eq!(strings(&b, 2), vec![Some("POINT(7 7)".into())]);

    // EXCLUDED, the existing row bare and qualified; several rows, new and
    // existing keys mixed.
    let b = run(
        &e,
        "INSERT INTO t (id, name, n) VALUES (2, 'TWO', 5), (3, 'three', 30), (1, 'ONE', 1), (4, 'four', 40) \
         ON CONFLICT (id) DO UPDATE SET n = t.n + EXCLUDED.n, name = name || '/' || excluded.name",
    );
    assert_eq!(count(&b), 4, "2 updated + 2 inserted");
    assert_eq!(
        rows_of(&e, "SELECT id, name, n FROM t ORDER BY id"),
        vec![
            row(1, "one/ONE", 11),
            row(2, "two/TWO", 25),
            row(3, "three", 30),
            row(4, "four", 40)
        ]
    );
    // The updated rows keep the columns the SET list does not name.
    let b = run(&e, "SELECT loc FROM t WHERE id = 1");
    assert_eq!(strings(&b, 0), vec![Some("POINT(7 7)".into())]);

    // WHERE false: the row is left alone and not counted; a new key is
    // still inserted.
    let b = run(
        &e,
        "INSERT INTO t (id, name, n) VALUES (3, 'x', 0), (5, 'five', 50) \
         ON CONFLICT (id) DO UPDATE SET n = 0 WHERE t.n > 1000",
    );
    assert_eq!(count(&b), 1);
    let b = run(
        &e,
        "INSERT INTO t (id, name, n) VALUES (3, 'x', 0), (4, 'y', 0) \
         ON CONFLICT (id) DO UPDATE SET n = excluded.n WHERE t.n = 30 AND excluded.name = 'x'",
    );
    assert_eq!(count(&b), 1);
    assert_eq!(
        rows_of(&e, "SELECT id, name, n FROM t WHERE id >= 3 ORDER BY id"),
        vec![row(3, "three", 0), row(4, "four", 40), row(5, "five", 50)]
    );

    // ON CONSTRAINT <table>_pkey, no conflict target, MySQL's ON
    // DUPLICATE KEY UPDATE with VALUES(col).
    let b = run(
        &e,
        "INSERT INTO t (id, n) VALUES (5, 1) ON CONFLICT ON CONSTRAINT t_pkey \
         DO UPDATE SET n = t.n + excluded.n",
    );
    assert_eq!(count(&b), 1);
    run(
        &e,
        "INSERT INTO t (id, n) VALUES (5, 1) ON CONFLICT DO UPDATE SET n = n + 1",
    );
    run(
        &e,
        "INSERT INTO t (id, name) VALUES (5, 'FIVE') ON DUPLICATE KEY UPDATE name = VALUES(name)",
    );
    assert_eq!(
        rows_of(&e, "SELECT id, name, n FROM t WHERE id = 5"),
        vec![row(5, "FIVE", 52)]
    );

    // UPSERT INTO and INSERT OR REPLACE still replace the whole row.
    run(&e, "UPSERT INTO t (id, name) VALUES (5, 'new')");
    assert_eq!(
        rows_of(&e, "SELECT id, name, n FROM t WHERE id = 5"),
        vec![(5, Some("new".into()), None)]
    );
    run(&e, "INSERT OR REPLACE INTO t (id, n) VALUES (5, 7)");
    assert_eq!(
        rows_of(&e, "SELECT id, name, n FROM t WHERE id = 5"),
        vec![(5, None, Some(7))]
    );

    // INSERT ... SELECT with ON CONFLICT.
    run(&e, "CREATE TABLE src (id BIGINT PRIMARY KEY, n BIGINT)");
    run(&e, "INSERT INTO src VALUES (1, 1000), (9, 9)");
    let b = run(
        &e,
        "INSERT INTO t (id, n) SELECT id, n FROM src ON CONFLICT (id) DO UPDATE SET n = excluded.n",
    );
    assert_eq!(count(&b), 2);
    assert_eq!(
        ints(
            &run(&e, "SELECT n FROM t WHERE id IN (1, 9) ORDER BY id"),
            0
        ),
        vec![1000, 9]
    );

    // What ON CONFLICT refuses, with a clear message.
    let err = fail_err(
        &e,
        "INSERT INTO t (id, n) VALUES (1, 1) ON CONFLICT (name) DO UPDATE SET n = 1",
    );
    assert!(matches!(err, SqlError::ConflictTarget { .. }), "{err}");
    assert!(err.to_string().contains("primary key"), "{err}");
    let err = fail(
        &e,
        "INSERT INTO t (id, n) VALUES (1, 1) ON CONFLICT (id) DO UPDATE SET id = 2",
    );
    assert!(err.contains("primary-key column `id`"), "{err}");
    let err = fail(
        &e,
        "INSERT INTO t (id, n) VALUES (1, 1) ON CONFLICT (id) DO UPDATE SET nope = 2",
    );
    assert!(err.contains("no column `nope`"), "{err}");
    let err = fail(
        &e,
        "INSERT INTO t (id, n) VALUES (1, 1) ON CONFLICT (id) DO UPDATE SET n = missing + 1",
    );
    assert!(err.contains("missing"), "{err}");
    let err = fail(
        &e,
        "INSERT INTO t (id, n) VALUES (1, 1) ON CONFLICT (id) DO UPDATE SET n = 1 WHERE t.n",
    );
    assert!(err.contains("boolean"), "{err}");
    // Two proposed rows with one key: PostgreSQL's refusal, after the
    // rows before the second one.
    let err = fail_err(
        &e,
        "INSERT INTO t (id, n) VALUES (20, 1), (21, 1), (20, 2) ON CONFLICT (id) DO UPDATE SET n = 0",
    );
    let SqlError::PartialWrite {
        row,
        committed,
        source,
        ..
    } = &err
    else {
        panic!("{err:?}");
    };
    assert_eq!((*row, *committed), (Some(3), 2));
    assert!(
        matches!(**source, SqlError::AffectsRowTwice { .. }),
        "{err}"
    );
    assert!(
        err.to_string().contains("cannot affect row a second time"),
        "{err}"
    );
    assert_eq!(
        id_set(&run(&e, "SELECT id FROM t WHERE id >= 20")),
        BTreeSet::from([20, 21])
    );
}

#[test]
fn on_conflict_keeps_undeclared_fields_and_composite_keys() {
    let (_d, e) = engine();
    run(
        &e,
        "CREATE TABLE c (a BIGINT, b VARCHAR, n BIGINT, PRIMARY KEY (a, b))",
    );
    let ds = e.database().dataset("c").expect("c");
    ds.insert(silt::Value::Object(vec![
        ("a".into(), silt::Value::Int(1)),
        ("b".into(), "x".into()),
        ("n".into(), silt::Value::Int(1)),
        ("hidden".into(), silt::Value::Bool(true)),
    ]))
    .expect("insert");
    let b = run(
        &e,
        "INSERT INTO c VALUES (1, 'x', 5), (1, 'y', 6) ON CONFLICT (b, a) DO UPDATE SET n = c.n + excluded.n",
    );
    assert_eq!(count(&b), 2);
    let rec = ds
        .get(&[silt::Value::Int(1), "x".into()])
        .expect("get")
        .expect("record");
    assert_eq!(rec.get("n"), Some(&silt::Value::Int(6)));
    assert_eq!(rec.get("hidden"), Some(&silt::Value::Bool(true)));
    // A composite key's duplicate names every key column.
    let err = fail_err(&e, "INSERT INTO c VALUES (1, 'y', 0)");
    assert_eq!(
        err.detail().as_deref(),
        Some("Key (a, b)=(1, y) already exists.")
    );
    let err = fail(
        &e,
        "INSERT INTO c VALUES (1, 'y', 0) ON CONFLICT (a) DO NOTHING",
    );
    assert!(err.contains("not the primary key"), "{err}");
}

#[test]
fn on_conflict_do_nothing_counts_inserted_rows() {
    let (_d, e) = engine();
    run(
        &e,
        "CREATE TABLE t (id BIGINT PRIMARY KEY, name VARCHAR, n BIGINT)",
    );
    run(&e, "INSERT INTO t VALUES (1, 'one', 1), (3, 'three', 3)");
    let b = run(
        &e,
        "INSERT INTO t VALUES (1, 'x', 0), (2, 'two', 2), (3, 'x', 0), (4, 'four', 4) ON CONFLICT DO NOTHING",
    );
    assert_eq!(count(&b), 2);
    let b = run(
        &e,
        "INSERT INTO t VALUES (4, 'x', 0), (5, 'five', 5) ON CONFLICT (id) DO NOTHING",
    );
    assert_eq!(count(&b), 1);
    let b = run(
        &e,
        "INSERT INTO t VALUES (5, 'x', 0) ON CONFLICT (id) DO NOTHING",
    );
    assert_eq!(count(&b), 0);
    // The same key twice in one statement: the first is inserted.
    let b = run(
        &e,
        "INSERT INTO t VALUES (6, 'six', 6), (6, 'x', 0) ON CONFLICT DO NOTHING",
    );
    assert_eq!(count(&b), 1);
    assert_eq!(
        rows_of(&e, "SELECT id, name, n FROM t ORDER BY id"),
        vec![
            row(1, "one", 1),
            row(2, "two", 2),
            row(3, "three", 3),
            row(4, "four", 4),
            row(5, "five", 5),
            row(6, "six", 6)
        ]
    );
    // A failure after skipped rows says what happened to the rows before.
    let err = fail(
        &e,
        "INSERT INTO t VALUES (1, 'x', 0), (7, 'seven', 7), (NULL, 'x', 0) ON CONFLICT DO NOTHING",
    );
    assert_eq!(
        err,
        "row 3 of 3 failed: null value in column \"id\" of relation \"t\" violates not-null constraint; \
         1 row before it was committed, 1 row left unchanged by ON CONFLICT"
    );
}

#[test]
fn null_keys_and_not_null_columns_are_not_null_violations() {
    let (d, e) = engine();
    run(
        &e,
        "CREATE TABLE t (id BIGINT PRIMARY KEY, name VARCHAR NOT NULL, note VARCHAR NULL)",
    );
    let want = |col: &str| {
        format!("null value in column \"{col}\" of relation \"t\" violates not-null constraint")
    };
    for (sql, col) in [
        ("INSERT INTO t VALUES (NULL, 'a', NULL)", "id"),
        ("INSERT INTO t (name) VALUES ('a')", "id"),
        ("INSERT INTO t VALUES (1, NULL, 'n')", "name"),
        ("INSERT INTO t (id) VALUES (1)", "name"),
        ("UPSERT INTO t (id, note) VALUES (1, 'n')", "name"),
        ("INSERT INTO t SELECT NULL, 'a', 'b'", "id"),
    ] {
        let err = fail_err(&e, sql);
        assert!(
            matches!(&err, SqlError::NotNull { table, column } if table == "t" && column == col),
            "{sql}: {err:?}"
        );
        assert_eq!(err.to_string(), want(col), "{sql}");
    }
    run(&e, "INSERT INTO t VALUES (1, 'a', NULL)");
    let err = fail(
        &e,
        "INSERT INTO t VALUES (1, 'b', NULL) ON CONFLICT (id) DO UPDATE SET name = NULL",
    );
    assert_eq!(err, want("name"));
    let err = fail_err(&e, "UPDATE t SET name = NULL WHERE id = 1");
    assert!(matches!(err.root(), SqlError::NotNull { .. }), "{err:?}");
    assert_eq!(
        strings(&run(&e, "SELECT name FROM t"), 0),
        vec![Some("a".into())]
    );
    // A composite key: every part.
    run(
        &e,
        "CREATE TABLE c (a BIGINT, b VARCHAR, PRIMARY KEY (a, b))",
    );
    let err = fail(&e, "INSERT INTO c VALUES (1, NULL)");
    assert!(err.contains("column \"b\" of relation \"c\""), "{err}");
    // NOT NULL is kept in the catalog and enforced by the core API too.
    let ds = e.database().dataset("t").expect("t");
    assert_eq!(ds.def().not_null, vec!["name".to_owned()]);
    let err = ds
        .insert(silt::Value::Object(vec![(
            "id".into(),
            silt::Value::Int(9),
        )]))
        .expect_err("NOT NULL");
    assert!(err.to_string().contains("NOT NULL"), "{err}");
    drop(ds);
    let db = reopen(e, d.path());
    assert_eq!(
        db.dataset("t").expect("t").def().not_null,
        vec!["name".to_owned()]
    );
    // Constraints Silt does not keep are refused, not ignored.
    let e = SqlEngine::new(Arc::new(db)).expect("engine");
    for sql in [
        "CREATE TABLE u (id BIGINT PRIMARY KEY, n BIGINT DEFAULT random())",
        "CREATE TABLE u (id BIGINT PRIMARY KEY, n BIGINT REFERENCES t (id) ON DELETE SET NULL)",
    ] {
        let err = fail_err(&e, sql);
        assert!(matches!(err, SqlError::Unsupported(_)), "{sql}: {err}");
    }
}

#[test]
fn duplicate_keys_are_unique_violations_naming_the_key() {
    let (_d, e) = engine();
    run(&e, "CREATE TABLE t (id BIGINT PRIMARY KEY, name VARCHAR)");
    run(&e, "INSERT INTO t VALUES (1, 'a')");
    let err = fail_err(&e, "INSERT INTO t VALUES (1, 'b')");
    assert_eq!(
        err.message(),
        "duplicate key value violates unique constraint \"t_pkey\""
    );
    assert_eq!(
        err.detail().as_deref(),
        Some("Key (id)=(1) already exists.")
    );
    assert_eq!(
        err.to_string(),
        "duplicate key value violates unique constraint \"t_pkey\" (Key (id)=(1) already exists.)"
    );
    run(&e, "CREATE TABLE s (k VARCHAR PRIMARY KEY)");
    run(&e, "INSERT INTO s VALUES ('x y')");
    let err = fail_err(&e, "INSERT INTO s VALUES ('x y')");
    assert_eq!(
        err.detail().as_deref(),
        Some("Key (k)=(x y) already exists.")
    );
}

#[test]
fn type_errors_name_the_column_and_the_types() {
    let (_d, e) = engine();
    run(
        &e,
        "CREATE TABLE t (id BIGINT PRIMARY KEY, x DOUBLE, ok BOOLEAN, name VARCHAR, loc GEOMETRY, raw BYTEA)",
    );
    let mismatch = |col: &str, ty: &str, found: &str| {
        format!("column \"{col}\" is of type {ty} but expression is of type {found}")
    };
    let syntax = |col: &str, ty: &str, text: &str| {
        format!("invalid input syntax for type {ty}: \"{text}\" (column \"{col}\")")
    };
    let cases = [
        (
            "INSERT INTO t (id) VALUES ('abc')",
            syntax("id", "bigint", "abc"),
        ),
        (
            "INSERT INTO t (id) VALUES ('1.5')",
            syntax("id", "bigint", "1.5"),
        ),
        (
            "INSERT INTO t (id, x) VALUES (1, 'abc')",
            syntax("x", "double precision", "abc"),
        ),
        (
            "INSERT INTO t (id, ok) VALUES (1, 'maybe')",
            syntax("ok", "boolean", "maybe"),
        ),
        (
            "INSERT INTO t (id, x) VALUES (1, true)",
            mismatch("x", "double precision", "boolean"),
        ),
        (
            "INSERT INTO t (id) VALUES (true)",
            mismatch("id", "bigint", "boolean"),
        ),
        (
            "INSERT INTO t (id, ok) VALUES (1, 1)",
            mismatch("ok", "boolean", "bigint"),
        ),
        (
            "INSERT INTO t (id, loc) VALUES (1, 5)",
            mismatch("loc", "geometry", "bigint"),
        ),
        (
            "INSERT INTO t (id, name) VALUES (1, X'00')",
            mismatch("name", "text", "bytea"),
        ),
        (
            "INSERT INTO t (id, x) VALUES (1, X'00')",
            mismatch("x", "double precision", "bytea"),
        ),
        (
            "INSERT INTO t (id, raw) VALUES (1, 2.5)",
            mismatch("raw", "bytea", "double precision"),
        ),
        (
            "INSERT INTO t (id) VALUES (1e300)",
            "1e300 is out of range for type bigint (column \"id\")".to_owned(),
        ),
        (
            "INSERT INTO t (id) VALUES (18446744073709551615)",
            "18446744073709551615 is out of range for type bigint (column \"id\")".to_owned(),
        ),
    ];
    for (sql, want) in &cases {
        let err = fail_err(&e, sql);
        assert_eq!(&err.to_string(), want, "{sql}");
    }
    // The SQLSTATE classes: mismatches are refused before any row.
    assert!(matches!(
        fail_err(&e, "INSERT INTO t (id, x) VALUES (1, true)"),
        SqlError::TypeMismatch { .. }
    ));
    assert!(matches!(
        fail_err(&e, "INSERT INTO t (id) VALUES ('abc')"),
        SqlError::InvalidText { .. }
    ));
    // What converts, as PostgreSQL assigns it.
    run(
        &e,
        "INSERT INTO t VALUES ('7', '2.5', 'yes', 12, 'POINT(1 2)', 'ab'), (2.5, 1, 'off', true, NULL, NULL)",
    );
    let b = run(&e, "SELECT id, x, ok, name FROM t ORDER BY id");
    assert_eq!(ints(&b, 0), vec![3, 7], "2.5 rounds to 3");
    assert_eq!(floats(&b, 1), vec![1.0, 2.5]);
    assert_eq!(strings(&b, 3), vec![Some("true".into()), Some("12".into())]);
    // A text column of a query into a bigint column reads each value.
    run(&e, "CREATE TABLE s (k VARCHAR PRIMARY KEY)");
    run(&e, "INSERT INTO s VALUES ('10'), ('11'), ('zz')");
    let err = fail(&e, "INSERT INTO t (id) SELECT k FROM s ORDER BY k");
    assert_eq!(
        err,
        "row 3 of 3 failed: invalid input syntax for type bigint: \"zz\" (column \"id\"); \
         the 2 rows before it were committed"
    );
    // ON CONFLICT's SET list follows the same rules.
    let err = fail(
        &e,
        "INSERT INTO t (id) VALUES (7) ON CONFLICT (id) DO UPDATE SET x = 'abc'",
    );
    assert_eq!(err, syntax("x", "double precision", "abc"));
    let err = fail(
        &e,
        "INSERT INTO t (id) VALUES (7) ON CONFLICT (id) DO UPDATE SET ok = 1",
    );
    assert_eq!(err, mismatch("ok", "boolean", "bigint"));
    // And UPDATE's.
    let err = fail(&e, "UPDATE t SET x = 'abc' WHERE id = 7");
    assert_eq!(err, syntax("x", "double precision", "abc"));
    let err = fail(&e, "UPDATE t SET ok = 1 WHERE id = 7");
    assert_eq!(err, mismatch("ok", "boolean", "bigint"));
    assert_eq!(count(&run(&e, "UPDATE t SET x = '4.5' WHERE id = 7")), 1);
    assert_eq!(
        floats(&run(&e, "SELECT x FROM t WHERE id = 7"), 0),
        vec![4.5]
    );
}

#[test]
fn multi_row_inserts_say_how_many_rows_landed() {
    let (_d, e) = engine();
    run(&e, "CREATE TABLE t (id BIGINT PRIMARY KEY, name VARCHAR)");
    run(&e, "INSERT INTO t VALUES (3, 'three')");
    let err = fail_err(
        &e,
        "INSERT INTO t VALUES (1, 'a'), (2, 'b'), (3, 'c'), (4, 'd'), (5, 'e')",
    );
    assert_eq!(
        err.to_string(),
        "row 3 of 5 failed: duplicate key value violates unique constraint \"t_pkey\" \
         (Key (id)=(3) already exists.); the 2 rows before it were committed"
    );
    assert!(matches!(err.root(), SqlError::UniqueViolation { .. }));
    assert_eq!(
        id_set(&run(&e, "SELECT id FROM t")),
        BTreeSet::from([1, 2, 3])
    );
    // A NULL or a value that does not convert stops at its row too.
    let err = fail(&e, "INSERT INTO t VALUES (10, 'a'), (NULL, 'b'), (12, 'c')");
    assert_eq!(
        err,
        "row 2 of 3 failed: null value in column \"id\" of relation \"t\" violates not-null constraint; \
         the 1 row before it was committed"
    );
    let err = fail(&e, "INSERT INTO t VALUES ('20', 'a'), ('x', 'b')");
    assert!(
        err.starts_with("row 2 of 2 failed: invalid input syntax for type bigint"),
        "{err}"
    );
    let err = fail(&e, "INSERT INTO t VALUES (3, 'a'), (30, 'b')");
    assert!(
        err.starts_with("row 1 of 2 failed") && err.ends_with("no row was written"),
        "{err}"
    );
    assert_eq!(
        id_set(&run(&e, "SELECT id FROM t")),
        BTreeSet::from([1, 2, 3, 10, 20])
    );
    // Across batches (DataFusion hands the rows over 8192 at a time).
    run(&e, "INSERT INTO t VALUES (9000, 'taken')");
    let err = fail_err(
        &e,
        "INSERT INTO t SELECT value + 100, 'g' FROM generate_series(1, 10000) ORDER BY value",
    );
    let SqlError::PartialWrite {
        row,
        total,
        committed,
        ..
    } = &err
    else {
        panic!("{err:?}");
    };
    assert_eq!(
        (*row, *total, *committed),
        (Some(8900), Some(10000), 8899),
        "{err}"
    );
    assert!(
        err.to_string()
            .contains("the 8899 rows before it were committed"),
        "{err}"
    );
    let b = run(&e, "SELECT count(*) FROM t WHERE name = 'g'");
    assert_eq!(ints(&b, 0), vec![8899]);
}

#[test]
fn output_columns_are_named_as_postgresql_names_them() {
    let (_d, e) = engine();
    run(
        &e,
        "CREATE TABLE emp (id BIGINT PRIMARY KEY, salary BIGINT); INSERT INTO emp VALUES (1, NULL), (2, 5)",
    );
    let b = run(
        &e,
        "SELECT 1, 1, id, coalesce(salary, 0), count(*) OVER (), salary::int, 2::bigint, CASE WHEN id = 1 THEN 'a' END, id FROM emp ORDER BY id",
    );
    let names: Vec<String> = b[0]
        .schema()
        .fields()
        .iter()
        .map(|f| f.name().clone())
        .collect();
    assert_eq!(
        names,
        [
            "?column?", "?column?", "id", "coalesce", "count", "salary", "int8", "case", "id"
        ]
    );
    assert_eq!(ints(&b, 3), vec![0, 5]);
    assert_eq!(ints(&b, 8), vec![1, 2]);
    // A derived table's columns are referenced by those names.
    let b = run(
        &e,
        "SELECT s.coalesce FROM (SELECT coalesce(salary, 0) FROM emp) s ORDER BY 1",
    );
    assert_eq!(ints(&b, 0), vec![0, 5]);
    // `*` next to a named column, and a UNION.
    let b = run(&e, "SELECT *, id FROM emp ORDER BY id");
    assert_eq!(b[0].schema().field(2).name(), "id");
    let b = run(&e, "SELECT upper('a') UNION ALL SELECT 'b' ORDER BY 1");
    assert_eq!(b[0].schema().field(0).name(), "upper");
}
