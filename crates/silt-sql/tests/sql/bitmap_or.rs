//! Unions of index probes (PostgreSQL's BitmapOr): `OR` of indexed
//! predicates, multi-polygon constants (the antimeridian box of
//! `ST_MakeEnvelope(xmin > xmax)`), `IN` lists on indexed columns; each row
//! once, every answer equal to brute force, inside transactions too.

use std::collections::BTreeSet;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use silt_sql::{SqlEngine, SqlSession};

use crate::common::*;

/// Points over the whole globe (many near the antimeridian), `a` indexed.
fn world(e: &SqlEngine, rng: &mut StdRng, n: i64) -> Vec<(i64, i64, f64, f64)> {
    run(
        e,
        "CREATE TABLE w (id BIGINT PRIMARY KEY, a BIGINT, loc POINT)",
    );
    run(e, "CREATE INDEX w_a ON w USING btree (a)");
    run(e, "CREATE INDEX w_loc ON w USING rtree (loc)");
    let mut rows = Vec::new();
    for id in 0..n {
        let x: f64 = if id % 3 == 0 {
            rng.random_range(160.0..=180.0) * if id % 2 == 0 { 1.0 } else { -1.0 }
        } else {
            rng.random_range(-180.0..=180.0)
        };
        rows.push((
            id,
            rng.random_range(0..40),
            x,
            rng.random_range(-60.0..=60.0),
        ));
    }
    for chunk in rows.chunks(200) {
        let v: Vec<String> = chunk
            .iter()
            .map(|(id, a, x, y)| format!("({id}, {a}, ST_Point({x}, {y}))"))
            .collect();
        run(e, &format!("INSERT INTO w VALUES {}", v.join(", ")));
    }
    rows
}

fn ids(e: &SqlEngine, sql: &str) -> Vec<i64> {
    let mut v = ints(&run(e, sql), 0);
    v.sort();
    v
}

fn in_box(r: &(i64, i64, f64, f64), (x0, y0, x1, y1): (f64, f64, f64, f64)) -> bool {
    let xs = if x0 > x1 {
        r.2 >= x0 || r.2 <= x1
    } else {
        r.2 >= x0 && r.2 <= x1
    };
    xs && r.3 >= y0 && r.3 <= y1
}

fn want(rows: &[(i64, i64, f64, f64)], keep: impl Fn(&(i64, i64, f64, f64)) -> bool) -> Vec<i64> {
    let s: BTreeSet<i64> = rows.iter().filter(|r| keep(r)).map(|r| r.0).collect();
    s.into_iter().collect()
}

#[test]
fn or_multipolygons_and_in_lists_probe_each_index_once_per_part() {
    let (_d, e) = engine();
    let mut rng = StdRng::seed_from_u64(30);
    let rows = world(&e, &mut rng, 3000);
    // The antimeridian box: the CLI's meaning, in SQL.
    let q = "SELECT id FROM w WHERE ST_Intersects(loc, ST_MakeEnvelope(170, -50, -170, -10))";
    assert_eq!(
        ids(&e, q),
        want(&rows, |r| in_box(r, (170.0, -50.0, -170.0, -10.0)))
    );
    let plan = explain(&e, q);
    assert!(plan.contains("any of 2 paths"), "{plan}");
    assert!(
        !want(&rows, |r| in_box(r, (170.0, -50.0, -170.0, -10.0))).is_empty(),
        "the box holds rows"
    );
    // Two overlapping boxes ORed: each row once.
    let (b1, b2) = ((-20.0, -20.0, 20.0, 20.0), (0.0, 0.0, 40.0, 40.0));
    let q = "SELECT id FROM w WHERE ST_Intersects(loc, ST_MakeEnvelope(-20, -20, 20, 20)) \
             OR ST_Intersects(loc, ST_MakeEnvelope(0, 0, 40, 40))";
    assert_eq!(ids(&e, q), want(&rows, |r| in_box(r, b1) || in_box(r, b2)));
    assert!(explain(&e, q).contains("any of 2 paths"));
    // The same through a multi-polygon constant.
    let q = "SELECT id FROM w WHERE ST_Intersects(loc, \
             'MULTIPOLYGON(((-20 -20,20 -20,20 20,-20 20,-20 -20)),((0 0,40 0,40 40,0 40,0 0)))')";
    assert_eq!(ids(&e, q), want(&rows, |r| in_box(r, b1) || in_box(r, b2)));
    // A B+-tree equality ORed with a box, and an IN list on the B+-tree.
    let q = "SELECT id FROM w WHERE a = 7 OR ST_Intersects(loc, ST_MakeEnvelope(-20, -20, 20, 20))";
    assert_eq!(ids(&e, q), want(&rows, |r| r.1 == 7 || in_box(r, b1)));
    assert!(explain(&e, q).contains("any of 2 paths"));
    let q = "SELECT id FROM w WHERE a IN (3, 9, 3, 31)";
    assert_eq!(ids(&e, q), want(&rows, |r| [3, 9, 31].contains(&r.1)));
    let plan = explain(&e, q);
    assert!(plan.contains("any of 4 paths"), "{plan}");
    // A range ORed with a key: both answered by probes.
    let q = "SELECT id FROM w WHERE a > 37 OR id = 5";
    assert_eq!(ids(&e, q), want(&rows, |r| r.1 > 37 || r.0 == 5));
    // An OR with a disjunct no index answers: a scan, still right.
    let q = "SELECT id FROM w WHERE a = 7 OR ST_X(loc) > 170";
    assert_eq!(ids(&e, q), want(&rows, |r| r.1 == 7 || r.2 > 170.0));
    assert!(!explain(&e, q).contains("any of"));
    // Filters besides the OR still hold; counts and limits too.
    let q = "SELECT id FROM w WHERE (a = 7 OR a = 8 OR ST_Intersects(loc, ST_MakeEnvelope(-20, -20, 20, 20))) AND id % 2 = 0";
    assert_eq!(
        ids(&e, q),
        want(&rows, |r| (r.1 == 7 || r.1 == 8 || in_box(r, b1))
            && r.0 % 2 == 0)
    );
    let n = count_star(
        &e,
        "SELECT count(*) FROM w WHERE ST_Intersects(loc, ST_MakeEnvelope(170, -50, -170, -10))",
    );
    assert_eq!(
        n as usize,
        want(&rows, |r| in_box(r, (170.0, -50.0, -170.0, -10.0))).len()
    );
    // UPDATE and DELETE through the union change each row once.
    run(
        &e,
        "UPDATE w SET a = 100 WHERE a = 7 OR ST_Intersects(loc, ST_MakeEnvelope(-20, -20, 20, 20))",
    );
    assert_eq!(
        ids(&e, "SELECT id FROM w WHERE a = 100"),
        want(&rows, |r| r.1 == 7 || in_box(r, b1))
    );
    run(&e, "DELETE FROM w WHERE a = 100 OR a IN (3, 9)");
    assert_eq!(
        ids(&e, "SELECT id FROM w"),
        want(&rows, |r| !(r.1 == 7
            || in_box(r, b1)
            || r.1 == 3
            || r.1 == 9))
    );
}

#[test]
fn a_transaction_sees_its_own_rows_through_a_union() {
    let (_d, e) = engine();
    let mut rng = StdRng::seed_from_u64(31);
    let rows = world(&e, &mut rng, 500);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let s = SqlSession::new();
    let go = |sql: &str| {
        rt.block_on(e.execute_in(&s, sql))
            .unwrap_or_else(|err| panic!("{sql}: {err}"))
    };
    go("BEGIN");
    go("INSERT INTO w VALUES (100000, 7, ST_Point(175, -30)), (100001, 39, ST_Point(0, 0))");
    go("DELETE FROM w WHERE id = 0");
    let q =
        "SELECT id FROM w WHERE a = 7 OR ST_Intersects(loc, ST_MakeEnvelope(170, -50, -170, -10))";
    let mut got = ints(&go(q), 0);
    got.sort();
    let mut expect = want(&rows, |r| {
        r.0 != 0 && (r.1 == 7 || in_box(r, (170.0, -50.0, -170.0, -10.0)))
    });
    expect.push(100000);
    expect.sort();
    assert_eq!(got, expect);
    go("ROLLBACK");
    assert_eq!(
        ids(&e, q),
        want(&rows, |r| r.1 == 7
            || in_box(r, (170.0, -50.0, -170.0, -10.0)))
    );
}

#[test]
fn the_antimeridian_box_means_the_same_everywhere() {
    let (_d, e) = engine();
    // Evaluated on values (no index) and through the index: the same.
    let b = run(
        &e,
        "SELECT ST_Intersects(ST_Point(179, -20), ST_MakeEnvelope(170, -50, -170, -10)), \
                ST_Intersects(ST_Point(-175, -20), ST_MakeEnvelope(170, -50, -170, -10)), \
                ST_Intersects(ST_Point(0, -20), ST_MakeEnvelope(170, -50, -170, -10))",
    );
    let got: Vec<bool> = (0..3)
        .map(|i| datafusion::arrow::array::AsArray::as_boolean(b[0].column(i)).value(0))
        .collect();
    assert_eq!(got, vec![true, true, false]);
    let msg = fail(&e, "SELECT ST_MakeEnvelope(190, 0, 170, 1)");
    assert!(
        msg.contains("antimeridian") && msg.contains("[-180, 180]"),
        "{msg}"
    );
}

#[test]
fn explain_analyze_counts_rows_components_and_blocks_of_a_scan() {
    let (_d, e) = engine();
    let mut rng = StdRng::seed_from_u64(32);
    let rows = world(&e, &mut rng, 2000);
    e.database()
        .dataset("w")
        .expect("w")
        .flush()
        .expect("flush");
    run(&e, "INSERT INTO w VALUES (99999, 1, ST_Point(10, 10))");
    let q = "SELECT id FROM w WHERE ST_Intersects(loc, ST_MakeEnvelope(0, 0, 40, 40))";
    let b = run(&e, &format!("EXPLAIN ANALYZE {q}"));
    let text = strings(&b, 1)
        .into_iter()
        .flatten()
        .collect::<Vec<_>>()
        .join("\n");
    let scan = text
        .lines()
        .find(|l| l.contains("SiltScan"))
        .unwrap_or_else(|| panic!("{text}"));
    let metric = |name: &str| -> u64 {
        let at = scan
            .find(&format!("{name}="))
            .unwrap_or_else(|| panic!("no {name} in {scan}"));
        scan[at + name.len() + 1..]
            .chars()
            .take_while(char::is_ascii_digit)
            .collect::<String>()
            .parse()
            .unwrap_or_else(|_| panic!("{name} in {scan}"))
    };
    let want = want(&rows, |r| in_box(r, (0.0, 0.0, 40.0, 40.0))).len() as u64 + 1;
    assert_eq!(metric("output_rows"), want, "{scan}");
    // The memory component and the flushed one.
    assert_eq!(metric("index_components"), 2, "{scan}");
    assert!(metric("index_blocks") >= 1, "{scan}");
    assert!(metric("index_candidates") >= want, "{scan}");
    assert!(scan.contains("elapsed_compute="), "{scan}");
    // Only the key asked for: the points' entries answer, no record is
    // read. Another column: every hit is read from the primary.
    assert_eq!(metric("index_fetched"), 0, "{scan}");
    let analyzed = |q: &str| -> String {
        let b = run(&e, &format!("EXPLAIN ANALYZE {q}"));
        let text = strings(&b, 1).into_iter().flatten().collect::<Vec<_>>();
        text.join("\n")
            .lines()
            .find(|l| l.contains("SiltScan"))
            .unwrap_or_else(|| panic!("{text:?}"))
            .to_owned()
    };
    let scan = analyzed(&q.replace("SELECT id", "SELECT id, a"));
    assert!(scan.contains(&format!("index_fetched={want}")), "{scan}");
    let scan = analyzed(&q.replace("SELECT id", "SELECT count(*)"));
    assert!(scan.contains("index_fetched=0"), "{scan}");
    // The answers are the same either way.
    let key_only = id_set(&run(&e, q));
    let fetched = id_set(&run(&e, &q.replace("SELECT id", "SELECT id, a")));
    assert_eq!(key_only, fetched);
    assert_eq!(key_only.len() as u64, want);
}

/// (id, ts, x, y) of an `ev` row.
type Event = (i64, i64, f64, f64);

/// A time range and a box together: the access path is the one that meets
/// fewer entries by the indexes' own estimates (block indexes, R-tree
/// directories, memtable counts), whichever of the two predicates it is.
#[test]
fn the_more_selective_of_a_range_and_a_box_is_read() {
    let (_d, e) = engine();
    run(
        &e,
        "CREATE TABLE ev (id BIGINT PRIMARY KEY, ts BIGINT, loc POINT)",
    );
    run(&e, "CREATE INDEX ev_ts ON ev USING btree (ts)");
    run(&e, "CREATE INDEX ev_loc ON ev USING rtree (loc)");
    let mut rng = StdRng::seed_from_u64(33);
    let mut rows = Vec::new();
    for id in 0..6000i64 {
        rows.push((
            id,
            id * 10,
            rng.random_range(-50.0..50.0),
            rng.random_range(-50.0..50.0),
        ));
    }
    for (n, chunk) in rows.chunks(1000).enumerate() {
        let v: Vec<String> = chunk
            .iter()
            .map(|(id, ts, x, y)| format!("({id}, {ts}, ST_Point({x}, {y}))"))
            .collect();
        run(&e, &format!("INSERT INTO ev VALUES {}", v.join(", ")));
        if n < 4 {
            e.database()
                .dataset("ev")
                .expect("ev")
                .flush()
                .expect("flush");
        }
    }
    let check = |sql: &str, keep: &dyn Fn(&Event) -> bool, path: &str| {
        let mut got = ints(&run(&e, sql), 0);
        got.sort();
        let want: Vec<i64> = rows.iter().filter(|r| keep(r)).map(|r| r.0).collect();
        assert_eq!(got, want, "{sql}");
        let plan = explain(&e, sql);
        assert!(plan.contains(path), "{sql}: expected {path}\n{plan}");
    };
    // A narrow time range, a box over everything: the B+-tree.
    check(
        "SELECT id FROM ev WHERE ts BETWEEN 20000 AND 20100 \
         AND ST_Intersects(loc, ST_MakeEnvelope(-60, -60, 60, 60))",
        &|r| (20000..=20100).contains(&r.1),
        "btree(ts)",
    );
    check(
        "SELECT id FROM ev WHERE ts = 30000 AND ST_Intersects(loc, ST_MakeEnvelope(-60, -60, 60, 60))",
        &|r| r.1 == 30000,
        "btree(ts)",
    );
    // All of time, a small box: the R-tree.
    check(
        "SELECT id FROM ev WHERE ts >= 0 AND ST_Intersects(loc, ST_MakeEnvelope(1, 1, 4, 4))",
        &|r| r.2 >= 1.0 && r.2 <= 4.0 && r.3 >= 1.0 && r.3 <= 4.0,
        "rtree(loc)",
    );
    // The key as the range: a few keys beat a big box, a small box beats
    // most of the keys.
    check(
        "SELECT id FROM ev WHERE id < 30 AND ST_Intersects(loc, ST_MakeEnvelope(-60, -60, 60, 60))",
        &|r| r.0 < 30,
        "primary range",
    );
    check(
        "SELECT id FROM ev WHERE id > 10 AND ST_Intersects(loc, ST_MakeEnvelope(1, 1, 4, 4))",
        &|r| r.0 > 10 && r.2 >= 1.0 && r.2 <= 4.0 && r.3 >= 1.0 && r.3 <= 4.0,
        "rtree(loc)",
    );
}
