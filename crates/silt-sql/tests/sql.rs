//! End-to-end SQL tests on a temporary database: DDL, DML, pushdown
//! correctness against brute force, EXPLAIN, kNN, spatial joins, errors.

use std::collections::BTreeSet;
use std::sync::Arc;

use datafusion::arrow::array::{Array, AsArray, RecordBatch};
use datafusion::arrow::datatypes::{Float64Type, Int64Type, UInt64Type};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use silt::geo::sphere::haversine_m;
use silt::{Database, DbOptions, Durability};
use silt_sql::{SqlEngine, SqlError};

fn engine() -> (tempfile::TempDir, SqlEngine) {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = Database::open(
        dir.path(),
        DbOptions {
            sync: false,
            durability: Durability::None,
            ..Default::default()
        },
    )
    .expect("open");
    let e = SqlEngine::new(Arc::new(db)).expect("engine");
    (dir, e)
}

fn run(e: &SqlEngine, sql: &str) -> Vec<RecordBatch> {
    match e.execute_blocking(sql) {
        Ok(b) => b,
        Err(err) => panic!("{sql}\n  failed: {err}"),
    }
}

fn fail(e: &SqlEngine, sql: &str) -> String {
    match e.execute_blocking(sql) {
        Ok(_) => panic!("{sql}\n  should have failed"),
        Err(err) => err.to_string(),
    }
}

fn count(b: &[RecordBatch]) -> u64 {
    b.iter()
        .map(|x| {
            let c = x.column_by_name("count").expect("count column");
            c.as_primitive::<UInt64Type>().iter().flatten().sum::<u64>()
        })
        .sum()
}

fn ints(b: &[RecordBatch], col: usize) -> Vec<i64> {
    let mut v = Vec::new();
    for x in b {
        let a = x.column(col).as_primitive::<Int64Type>();
        for i in 0..a.len() {
            if !a.is_null(i) {
                v.push(a.value(i));
            }
        }
    }
    v
}

fn floats(b: &[RecordBatch], col: usize) -> Vec<f64> {
    let mut v = Vec::new();
    for x in b {
        let a = x.column(col).as_primitive::<Float64Type>();
        for i in 0..a.len() {
            v.push(a.value(i));
        }
    }
    v
}

fn strings(b: &[RecordBatch], col: usize) -> Vec<Option<String>> {
    let mut v = Vec::new();
    for x in b {
        let a = x.column(col).as_string::<i32>();
        for i in 0..a.len() {
            v.push((!a.is_null(i)).then(|| a.value(i).to_owned()));
        }
    }
    v
}

fn id_set(b: &[RecordBatch]) -> BTreeSet<i64> {
    ints(b, 0).into_iter().collect()
}

/// The text of an EXPLAIN (both plans).
fn explain(e: &SqlEngine, sql: &str) -> String {
    let b = run(e, &format!("EXPLAIN {sql}"));
    strings(&b, 1)
        .into_iter()
        .flatten()
        .collect::<Vec<_>>()
        .join("\n")
}

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
    assert!(err.contains("duplicate primary key 2"), "{err}");
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

/// A row of the random table.
#[derive(Clone, Debug)]
struct Row {
    id: i64,
    a: i64,
    x: f64,
    y: f64,
    words: Vec<&'static str>,
}

const WORDS: [&str; 8] = [
    "red", "green", "blue", "storm", "river", "city", "night", "sun",
];

fn load_random(e: &SqlEngine, rng: &mut StdRng, n: i64) -> Vec<Row> {
    run(
        e,
        "CREATE TABLE r (id BIGINT PRIMARY KEY, a BIGINT, name VARCHAR, loc POINT) WITH (partitions = 2)",
    );
    run(e, "CREATE INDEX r_a ON r USING btree (a)");
    let mut rows = Vec::new();
    for id in 0..n {
        let k = rng.random_range(1..4);
        let words = (0..k)
            .map(|_| WORDS[rng.random_range(0..WORDS.len())])
            .collect();
        rows.push(Row {
            id: id * 3,
            a: rng.random_range(0..50),
            x: rng.random_range(-20.0..20.0),
            y: rng.random_range(-10.0..10.0),
            words,
        });
    }
    for chunk in rows.chunks(100) {
        let values: Vec<String> = chunk
            .iter()
            .map(|r| {
                format!(
                    "({}, {}, '{}', ST_Point({}, {}))",
                    r.id,
                    r.a,
                    r.words.join(" "),
                    r.x,
                    r.y
                )
            })
            .collect();
        run(e, &format!("INSERT INTO r VALUES {}", values.join(", ")));
    }
    // Indexes built after the load (bulk build) and maintained during it.
    run(e, "CREATE INDEX r_loc ON r USING rtree (loc)");
    run(e, "CREATE INDEX r_name ON r USING keyword (name)");
    rows
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
    // IN lists on the primary key.
    let sql = "SELECT id FROM r WHERE id IN (30, 3, 33, 31, 30)";
    assert_eq!(id_set(&run(&e, sql)), BTreeSet::from([30, 33]));
    assert!(
        explain(&e, sql).contains("get-many(4 keys)"),
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
        // The ORDER BY expression need not be selected.
        let sql =
            format!("SELECT id FROM r ORDER BY ST_Distance(ST_Point({cx}, {cy}), loc) LIMIT {k}");
        assert_eq!(ints(&run(&e, &sql), 0), want, "{sql}");
        assert!(explain(&e, &sql).contains("knn(POINT("));
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
            "INSERT INTO g VALUES (1, NULL, 1) ON CONFLICT DO NOTHING",
            "DO NOTHING",
        ),
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
        err.contains("statement 2") && err.contains("duplicate primary key 7"),
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
