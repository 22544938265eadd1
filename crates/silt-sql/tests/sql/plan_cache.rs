//! The plan cache, end to end: cached shapes bound with new literals give
//! the answers brute force gives, statement templates find shapes without
//! parsing, and DDL invalidates what it changes.

use datafusion::arrow::array::RecordBatch;
use std::collections::BTreeSet;

use crate::common::*;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use silt::geo::sphere::haversine_m;

#[test]
fn cached_plans_bind_new_literals_and_stay_right() {
    let (_d, e) = engine();
    let mut rng = StdRng::seed_from_u64(21);
    let rows = load_random(&e, &mut rng, 400);
    let before = e.plan_cache_stats();
    // One shape, many values: each answer matches brute force.
    for i in 0..20 {
        let (x, y) = (rng.random_range(-20.0..15.0), rng.random_range(-10.0..5.0));
        let b = (x, y, x + 5.0, y + 5.0);
        let sql = format!(
            "SELECT id FROM r WHERE ST_Intersects(loc, ST_MakeEnvelope({}, {}, {}, {}))",
            b.0, b.1, b.2, b.3
        );
        assert_eq!(id_set(&run(&e, &sql)), in_box(&rows, b), "{sql}");
        let a = i % 50;
        let sql = format!("SELECT id FROM r WHERE a = {a} AND id > {}", i * 10);
        let want: BTreeSet<i64> = rows
            .iter()
            .filter(|r| r.a == a && r.id > i * 10)
            .map(|r| r.id)
            .collect();
        assert_eq!(id_set(&run(&e, &sql)), want, "{sql}");
    }
    let after = e.plan_cache_stats();
    assert!(
        after.hits >= before.hits + 38,
        "two shapes, 40 runs: {before:?} -> {after:?}"
    );
    // Both shapes are simple: they ran on their kept physical plans.
    assert!(
        after.physical_runs >= before.physical_runs + 40,
        "{before:?} -> {after:?}"
    );
    // A kept plan reads through the session's transaction block.
    let sql = "SELECT id FROM r WHERE a = 1 AND id > 100000";
    run(&e, "BEGIN");
    run(
        &e,
        "INSERT INTO r VALUES (100001, 1, 'x', ST_Point(0.5, 0.5))",
    );
    assert_eq!(ints(&run(&e, sql), 0), vec![100001]);
    let sql_box =
        "SELECT id FROM r WHERE ST_Intersects(loc, ST_MakeEnvelope(0.49, 0.49, 0.51, 0.51))";
    assert!(ints(&run(&e, sql_box), 0).contains(&100001));
    run(&e, "ROLLBACK");
    assert!(ints(&run(&e, sql), 0).is_empty());
    assert!(!ints(&run(&e, sql_box), 0).contains(&100001));
    assert!(e.plan_cache_stats().physical_runs >= after.physical_runs + 4);
    // The same shape with a box across the antimeridian (two probes):
    // the rows from 170 east to 180 and from -180 east to -15.
    let across = "SELECT id FROM r WHERE ST_Intersects(loc, ST_MakeEnvelope(170, -10, -15, 10))";
    let want = in_box(&rows, (-180.0, -10.0, -15.0, 10.0));
    assert_eq!(id_set(&run(&e, across)), want);
    // And values the function refuses: its own error, as without the cache.
    let msg = fail(
        &e,
        "SELECT id FROM r WHERE ST_Intersects(loc, ST_MakeEnvelope(190, -10, -15, 10))",
    );
    assert!(msg.contains("antimeridian"), "{msg}");
    // An invalid geometry: the same error as without the cache.
    let msg = fail(
        &e,
        "SELECT id FROM r WHERE ST_Intersects(loc, ST_GeomFromText('POINT(1'))",
    );
    assert!(msg.to_lowercase().contains("wkt"), "{msg}");
    // kNN, one shape: then a point the index refuses (latitude 100),
    // which the plain sort answers.
    let knn = |cx: f64, cy: f64, k: usize| -> Vec<i64> {
        let mut brute: Vec<(f64, i64)> = rows
            .iter()
            .map(|r| (haversine_m(cx, cy, r.x, r.y), r.id))
            .collect();
        brute.sort_by(|a, b| a.0.total_cmp(&b.0));
        brute.iter().take(k).map(|x| x.1).collect()
    };
    for (cx, cy) in [(1.0, 2.0), (-7.5, 3.25), (12.0, -9.0)] {
        let sql =
            format!("SELECT id FROM r ORDER BY ST_Distance(loc, ST_Point({cx}, {cy})) LIMIT 5");
        assert_eq!(ints(&run(&e, &sql), 0), knn(cx, cy, 5), "{sql}");
    }
    let sql = "SELECT id FROM r ORDER BY ST_Distance(loc, ST_Point(1, 100)) LIMIT 5";
    assert_eq!(ints(&run(&e, sql), 0).len(), 5);
    // The distance in the select list too (the usual way to ask for the
    // nearest): one shape for every point, answered by the kNN path, the
    // distances brute force's.
    let before = e.plan_cache_stats();
    for i in 0..12 {
        let (cx, cy) = (-15.3 + 2.5 * f64::from(i), 4.1 - 1.25 * f64::from(i));
        let sql = format!(
            "SELECT id, ST_Distance(loc, ST_Point({cx}, {cy})) AS d FROM r \
             ORDER BY ST_Distance(loc, ST_Point({cx}, {cy})) LIMIT 5"
        );
        let b = run(&e, &sql);
        assert_eq!(ints(&b, 0), knn(cx, cy, 5), "{sql}");
        let got = floats(&b, 1);
        for (id, d) in ints(&b, 0).iter().zip(&got) {
            let r = rows.iter().find(|r| r.id == *id).expect("a loaded row");
            let want = haversine_m(cx, cy, r.x, r.y);
            assert!(
                (d - want).abs() <= 1e-6 * want.max(1.0),
                "{sql}: {d} vs {want}"
            );
        }
    }
    let after = e.plan_cache_stats();
    assert!(after.hits >= before.hits + 11, "{before:?} -> {after:?}");
    let plan = shown(&run(
        &e,
        "EXPLAIN SELECT id, ST_Distance(loc, ST_Point(3, 4)) AS d FROM r \
         ORDER BY ST_Distance(loc, ST_Point(3, 4)) LIMIT 5",
    ));
    assert!(plan.contains("knn(POINT(3 4), k=5)"), "{plan}");
    // Where the parameters would part the select list from a GROUP BY
    // that repeats it, the statement is planned as written.
    let sql = "SELECT ST_Distance(loc, ST_Point(1, 2)) AS d, count(*) AS n FROM r \
               WHERE id < 60 GROUP BY ST_Distance(loc, ST_Point(1, 2)) ORDER BY d";
    let want = rows.iter().filter(|r| r.id < 60).count();
    assert!(want > 1);
    for _ in 0..2 {
        assert_eq!(
            run(&e, sql).iter().map(|b| b.num_rows()).sum::<usize>(),
            want
        );
    }
    // Functions of the moment are not cached.
    let t1 = strings(
        &run(&e, "SELECT CAST(now() AS VARCHAR) FROM r WHERE id = 3"),
        0,
    );
    std::thread::sleep(std::time::Duration::from_millis(5));
    let t2 = strings(
        &run(&e, "SELECT CAST(now() AS VARCHAR) FROM r WHERE id = 3"),
        0,
    );
    assert_ne!(t1, t2);
}

#[test]
fn cached_plans_are_not_reused_after_ddl() {
    let (_d, e) = engine();
    let mut rng = StdRng::seed_from_u64(5);
    let rows = load_random(&e, &mut rng, 200);
    let knn_sql = "SELECT id FROM r ORDER BY ST_Distance(loc, ST_Point(1, 1)) LIMIT 4";
    let want = ints(&run(&e, knn_sql), 0);
    assert_eq!(ints(&run(&e, knn_sql), 0), want);
    // A dropped index: the kNN shape's plan searched it.
    run(&e, "DROP INDEX r_loc");
    assert_eq!(ints(&run(&e, knn_sql), 0), want);
    // A created index: planned again, and used.
    run(&e, "CREATE INDEX r_loc2 ON r USING rtree (loc)");
    let misses = e.plan_cache_stats().misses;
    assert_eq!(ints(&run(&e, knn_sql), 0), want);
    assert_eq!(e.plan_cache_stats().misses, misses + 1);
    // A dropped table, created again with other columns and rows.
    let sql = "SELECT * FROM r WHERE id = 3";
    assert_eq!(ints(&run(&e, sql), 0), vec![3]);
    run(&e, "DROP TABLE r");
    assert!(fail(&e, sql).contains("r"));
    run(&e, "CREATE TABLE r (id BIGINT PRIMARY KEY, note VARCHAR)");
    run(&e, "INSERT INTO r VALUES (3, 'new')");
    let b = run(&e, sql);
    assert_eq!(b[0].num_columns(), 2);
    assert_eq!(strings(&b, 1), vec![Some("new".to_owned())]);
    // A view replaced by another: the engine's epoch.
    run(&e, "CREATE VIEW v AS SELECT id FROM r WHERE id = 3");
    assert_eq!(ints(&run(&e, "SELECT id FROM v WHERE id > 0"), 0), vec![3]);
    run(&e, "DROP VIEW v");
    run(&e, "CREATE VIEW v AS SELECT id FROM r WHERE id = 4");
    assert!(ints(&run(&e, "SELECT id FROM v WHERE id > 0"), 0).is_empty());
    assert!(!rows.is_empty());
}

/// A statement whose template is known is not parsed: its literals are
/// read from the text. Every answer still matches brute force, literals
/// outside the filters (the select list, LIMIT) are never taken from
/// another statement, and values that do not fit the shape's types go
/// down the parsing path.
#[test]
fn templates_find_shapes_without_parsing_and_stay_right() {
    let (_d, e) = engine();
    let mut rng = StdRng::seed_from_u64(31);
    let rows = load_random(&e, &mut rng, 300);
    let want = |f: &dyn Fn(&Row) -> bool| -> BTreeSet<i64> {
        rows.iter().filter(|r| f(r)).map(|r| r.id).collect()
    };
    let before = e.plan_cache_stats();
    for i in 0..30i64 {
        // Negative and positive bounds, one shape.
        let lo = rng.random_range(-50..400) * if i % 3 == 0 { -1 } else { 1 };
        let sql = format!("SELECT id FROM r WHERE id > {lo} AND id <= {}", lo + 90);
        assert_eq!(
            id_set(&run(&e, &sql)),
            want(&|r| r.id > lo && r.id <= lo + 90),
            "{sql}"
        );
        // Floats with and without an exponent, a negative corner.
        let (x, y) = (rng.random_range(-20.0..15.0), rng.random_range(-10.0..5.0));
        let sql = format!(
            "SELECT id FROM r WHERE ST_Intersects(loc, ST_MakeEnvelope({x}, {y}, {}, {:e}))",
            x + 5.0,
            y + 5.0
        );
        assert_eq!(
            id_set(&run(&e, &sql)),
            in_box(&rows, (x, y, x + 5.0, y + 5.0)),
            "{sql}"
        );
        // A select-list literal and a LIMIT: taken from this statement.
        let k = i % 4;
        let sql = format!(
            "SELECT id, {k} AS k FROM r WHERE a = {} LIMIT {}",
            i % 50,
            k + 1
        );
        let b = run(&e, &sql);
        let got = ints(&b, 1);
        assert!(got.iter().all(|v| *v == k), "{sql}: {got:?}");
        assert!(got.len() <= (k + 1) as usize, "{sql}: {got:?}");
        let all = want(&|r| r.a == i % 50);
        assert!(ints(&b, 0).iter().all(|id| all.contains(id)), "{sql}");
        // Strings, with a quote in them.
        let w = WORDS[(i as usize) % WORDS.len()];
        let sql = format!("SELECT id FROM r WHERE name = '{w}' OR name = 'it''s {w}'");
        assert_eq!(
            id_set(&run(&e, &sql)),
            want(&|r| r.words.join(" ") == w),
            "{sql}"
        );
    }
    let after = e.plan_cache_stats();
    assert!(
        after.template_hits >= before.template_hits + 100,
        "four templates, 120 runs: {before:?} -> {after:?}"
    );
    // An integer too big for BIGINT: parsed, and the planner's own answer.
    let sql = "SELECT id FROM r WHERE id > 18446744073709551615 AND id <= 5";
    let got = e.execute_blocking(sql);
    let fresh = {
        let (_d2, e2) = engine();
        let mut rng2 = StdRng::seed_from_u64(31);
        load_random(&e2, &mut rng2, 300);
        e2.execute_blocking(sql)
            .map(|b| id_set(&b))
            .map_err(|x| x.to_string())
    };
    assert_eq!(got.map(|b| id_set(&b)).map_err(|x| x.to_string()), fresh);
    // A dropped index: the template still finds the shape, whose plan is
    // made again under the new schema (same answers).
    run(&e, "DROP INDEX r_loc");
    let b = (0.0, 0.0, 4.0, 4.0);
    let sql = format!(
        "SELECT id FROM r WHERE ST_Intersects(loc, ST_MakeEnvelope({}, {}, {}, {:e}))",
        b.0, b.1, b.2, b.3
    );
    for _ in 0..3 {
        assert_eq!(id_set(&run(&e, &sql)), in_box(&rows, b), "{sql}");
    }
}

/// Filters whose values are computed from a text's literals (a box as a
/// corner plus its size, a key plus one): the kept plan binds them and
/// folds them before choosing the access path, and answers as brute
/// force does.
#[test]
fn computed_parameters_are_folded_and_stay_right() {
    let (_d, e) = engine();
    let mut rng = StdRng::seed_from_u64(41);
    let rows = load_random(&e, &mut rng, 300);
    let before = e.plan_cache_stats();
    for i in 0..30i64 {
        let (x, y) = (rng.random_range(-20.0..15.0), rng.random_range(-10.0..5.0));
        let (w, h) = (rng.random_range(1..6) as f64, 2.5);
        let sql = format!(
            "SELECT id FROM r WHERE ST_Intersects(loc, ST_MakeEnvelope({x}, {y}, {x} + {w:.1}, {y} + {h}))"
        );
        assert_eq!(
            id_set(&run(&e, &sql)),
            in_box(&rows, (x, y, x + w, y + h)),
            "{sql}"
        );
        let id = rng.random_range(0..320i64);
        let sql = format!("SELECT id FROM r WHERE id = {id} + 1 OR id = -{i} * 2");
        let want: BTreeSet<i64> = rows
            .iter()
            .filter(|r| r.id == id + 1 || r.id == -i * 2)
            .map(|r| r.id)
            .collect();
        assert_eq!(id_set(&run(&e, &sql)), want, "{sql}");
        // The k nearest to a computed point, against the same text parsed
        // afresh (a comment gives it no template).
        let sql = format!(
            "SELECT id FROM r ORDER BY ST_Distance(loc, ST_Point({x} + 0.5, {y} - {w:.1})) LIMIT 5"
        );
        let parsed = format!("/* parsed */ {sql}");
        assert_eq!(ints(&run(&e, &sql), 0), ints(&run(&e, &parsed), 0), "{sql}");
    }
    let after = e.plan_cache_stats();
    assert!(
        after.template_hits >= before.template_hits + 80,
        "three templates, 90 runs: {before:?} -> {after:?}"
    );
    assert!(
        after.physical_runs >= before.physical_runs + 50,
        "two shapes, 60 runs on kept plans: {before:?} -> {after:?}"
    );
}

/// The rows of `b` as text, for comparing answers whole.
fn shown(b: &[RecordBatch]) -> String {
    datafusion::arrow::util::pretty::pretty_format_batches(b)
        .expect("printable")
        .to_string()
}

#[test]
fn primary_key_reads_run_without_operators_and_answer_as_a_scan_does() {
    let (_d, e) = engine();
    let mut rng = StdRng::seed_from_u64(31);
    let rows = load_random(&e, &mut rng, 300);
    run(
        &e,
        "CREATE TABLE c (k1 VARCHAR, k2 BIGINT, v DOUBLE, note VARCHAR, PRIMARY KEY (k1, k2))",
    );
    run(
        &e,
        "INSERT INTO c VALUES ('a', 1, 1.5, 'one'), ('a', 2, NULL, 'two'), ('b', 1, -3.0, NULL)",
    );
    let before = e.plan_cache_stats();
    // Keys present and absent, in several projections: each answer is the
    // one a key range (planned as a scan) gives.
    for i in 0..60 {
        let id = rng.random_range(-5..rows.len() as i64 * 3 + 5);
        for cols in ["id, name", "name, id, a", "*", "loc"] {
            let got = run(&e, &format!("SELECT {cols} FROM r WHERE id = {id}"));
            let want = run(
                &e,
                &format!("SELECT {cols} FROM r WHERE id >= {id} AND id <= {id}"),
            );
            assert_eq!(shown(&got), shown(&want), "{cols}, id {id}");
        }
        let k1 = ["a", "b", "c"][i % 3];
        let k2 = (i % 4) as i64;
        let got = run(
            &e,
            &format!("SELECT note, v FROM c WHERE k2 = {k2} AND k1 = '{k1}'"),
        );
        let want = run(
            &e,
            &format!("SELECT note, v FROM c WHERE k1 = '{k1}' AND k2 >= {k2} AND k2 <= {k2}"),
        );
        assert_eq!(shown(&got), shown(&want), "{k1}, {k2}");
    }
    let after = e.plan_cache_stats();
    assert!(
        after.point_reads >= before.point_reads + 250,
        "five shapes of primary-key reads: {before:?} -> {after:?}"
    );
    // Values the key cannot take go the general way, with its answers.
    let n = after.point_reads;
    assert!(
        run(&e, "SELECT id FROM r WHERE id = 1.5")
            .iter()
            .all(|b| b.num_rows() == 0)
    );
    assert_eq!(
        ints(&run(&e, "SELECT id FROM r WHERE id = 3.0"), 0),
        vec![3]
    );
    assert!(
        run(&e, "SELECT id FROM r WHERE id = NULL")
            .iter()
            .all(|b| b.num_rows() == 0)
    );
    // A key that is not all equalities, or more filters than the key: not
    // a point read, and still right.
    assert!(
        run(&e, "SELECT id FROM r WHERE id = 3 AND a = -1")
            .iter()
            .all(|b| b.num_rows() == 0)
    );
    assert_eq!(
        strings(&run(&e, "SELECT note FROM c WHERE k1 = 'a' ORDER BY k2"), 0),
        vec![Some("one".to_owned()), Some("two".to_owned())]
    );
    // (A decimal against the `BIGINT` key is compared as the key cast to
    // a float: not the key's own equality, so none of these was a point
    // read.)
    assert_eq!(e.plan_cache_stats().point_reads, n);
    // Changes are seen at once: an update, a delete.
    run(&e, "UPDATE r SET name = 'changed' WHERE id = 3");
    assert_eq!(
        strings(&run(&e, "SELECT name FROM r WHERE id = 3"), 0),
        vec![Some("changed".to_owned())]
    );
    run(&e, "DELETE FROM r WHERE id = 3");
    assert!(
        run(&e, "SELECT name FROM r WHERE id = 3")
            .iter()
            .all(|b| b.num_rows() == 0)
    );
    // In a transaction block the read goes through the block: its own
    // uncommitted row is there, and gone after the rollback.
    run(&e, "BEGIN");
    run(&e, "INSERT INTO r VALUES (3, 7, 'mine', ST_Point(1, 1))");
    assert_eq!(
        strings(&run(&e, "SELECT name FROM r WHERE id = 3"), 0),
        vec![Some("mine".to_owned())]
    );
    run(&e, "ROLLBACK");
    assert!(
        run(&e, "SELECT name FROM r WHERE id = 3")
            .iter()
            .all(|b| b.num_rows() == 0)
    );
    // A dropped table: its kept plan is not used.
    run(&e, "DROP TABLE c");
    let msg = fail(&e, "SELECT note, v FROM c WHERE k2 = 1 AND k1 = 'a'");
    assert!(msg.contains("c"), "{msg}");
}
