//! Full scans from column images (`silt_sql::column_cache`): against a
//! model through random appends, updates, deletes, flushes and merges, in
//! key order and in parallel parts, with the images used whether the runs
//! are disjoint or overlap (older versions left out; in key order, the
//! runs merged a range of keys at a time), and the same answers with the
//! cache off or too small.

use std::collections::BTreeMap;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::common::*;

type Model = BTreeMap<i64, (i64, i64)>;

fn groups(m: &Model) -> Vec<(i64, i64, i64)> {
    let mut g: BTreeMap<i64, (i64, i64)> = BTreeMap::new();
    for (grp, q) in m.values() {
        let e = g.entry(*grp).or_default();
        e.0 += 1;
        e.1 += q;
    }
    g.into_iter().map(|(k, (c, s))| (k, c, s)).collect()
}

fn got_groups(e: &silt_sql::SqlEngine) -> Vec<(i64, i64, i64)> {
    let b = run(
        e,
        "SELECT grp, CAST(count(*) AS BIGINT) AS n, sum(qty) AS s FROM f GROUP BY grp ORDER BY grp",
    );
    let (k, n, s) = (ints(&b, 0), ints(&b, 1), ints(&b, 2));
    k.into_iter()
        .zip(n)
        .zip(s)
        .map(|((k, n), s)| (k, n, s))
        .collect()
}

fn got_rows(e: &silt_sql::SqlEngine) -> Vec<(i64, i64)> {
    let b = run(e, "SELECT id, qty FROM f ORDER BY id");
    ints(&b, 0).into_iter().zip(ints(&b, 1)).collect()
}

fn check(e: &silt_sql::SqlEngine, m: &Model, ordered: bool, what: &str) {
    assert_eq!(got_groups(e), groups(m), "groups after {what}");
    if ordered {
        let want: Vec<(i64, i64)> = m.iter().map(|(k, (_, q))| (*k, *q)).collect();
        assert_eq!(got_rows(e), want, "rows in key order after {what}");
    }
}

/// Aggregates and rows over random key ranges (both bound kinds, one
/// side open) against the model.
fn check_ranges(e: &silt_sql::SqlEngine, m: &Model, seed: u64, ordered: bool, what: &str) {
    let mut rng = StdRng::seed_from_u64(seed);
    let top = m.keys().next_back().copied().unwrap_or(0) + 10;
    for _ in 0..6 {
        let a = rng.random_range(-5..top);
        let b = a + rng.random_range(0..12_000);
        let (lo_op, hi_op, cond) = match rng.random_range(0..4) {
            0 => (">=", "<", format!("id >= {a} AND id < {b}")),
            1 => (">", "<=", format!("id > {a} AND id <= {b}")),
            2 => (">=", "<=", format!("id BETWEEN {a} AND {b}")),
            _ => (">", "", format!("id > {a}")),
        };
        let inside = |k: i64| {
            (if lo_op == ">=" { k >= a } else { k > a })
                && match hi_op {
                    "<" => k < b,
                    "<=" => k <= b,
                    _ => true,
                }
        };
        let want: Vec<(i64, i64)> = m
            .iter()
            .filter(|(k, _)| inside(**k))
            .map(|(k, (_, q))| (*k, *q))
            .collect();
        let got = run(
            e,
            &format!("SELECT CAST(count(*) AS BIGINT), COALESCE(sum(qty), 0) FROM f WHERE {cond}"),
        );
        let sum: i64 = want.iter().map(|(_, q)| q).sum();
        assert_eq!(
            (ints(&got, 0), ints(&got, 1)),
            (vec![want.len() as i64], vec![sum]),
            "{cond} after {what}"
        );
        if ordered {
            let b = run(
                e,
                &format!("SELECT id, qty FROM f WHERE {cond} ORDER BY id"),
            );
            let rows: Vec<(i64, i64)> = ints(&b, 0).into_iter().zip(ints(&b, 1)).collect();
            assert_eq!(rows, want, "rows of {cond} after {what}");
        }
    }
}

fn random_history(partitions: u32, seed: u64) {
    let (_d, e) = engine();
    run(
        &e,
        &format!(
            "CREATE TABLE f (id BIGINT PRIMARY KEY, grp BIGINT, qty BIGINT, note VARCHAR) \
             WITH (partitions = {partitions})"
        ),
    );
    let ds = e.database().dataset("f").expect("dataset");
    let mut rng = StdRng::seed_from_u64(seed);
    let mut model = Model::new();
    let mut next = 0i64;
    let ordered = partitions == 1;
    for step in 0..40 {
        let what = match rng.random_range(0..10) {
            // Append new keys above all others: runs stay disjoint.
            0..=3 => {
                let n = rng.random_range(1..3000);
                let mut values = Vec::new();
                for _ in 0..n {
                    let (g, q) = (rng.random_range(0..9i64), rng.random_range(1..100i64));
                    model.insert(next, (g, q));
                    values.push(format!("({next}, {g}, {q}, 'n{next}')"));
                    next += 1;
                }
                for chunk in values.chunks(1000) {
                    run(&e, &format!("INSERT INTO f VALUES {}", chunk.join(", ")));
                }
                "append"
            }
            // Rewrite some old keys: their new versions shadow the old.
            4 if next > 0 => {
                for _ in 0..rng.random_range(1..50) {
                    let id = rng.random_range(0..next);
                    let (g, q) = (rng.random_range(0..9i64), rng.random_range(1..100i64));
                    model.insert(id, (g, q));
                    run(&e, &format!("UPSERT INTO f VALUES ({id}, {g}, {q}, 'u')"));
                }
                "update"
            }
            5 if next > 0 => {
                let lo = rng.random_range(0..next);
                let hi = lo + rng.random_range(1..200);
                model.retain(|k, _| *k < lo || *k >= hi);
                run(&e, &format!("DELETE FROM f WHERE id >= {lo} AND id < {hi}"));
                "delete"
            }
            6 | 7 => {
                ds.flush().expect("flush");
                "flush"
            }
            8 => {
                ds.compact().expect("compact");
                "compact"
            }
            _ => "nothing",
        };
        check(&e, &model, ordered, &format!("step {step}: {what}"));
        check_ranges(
            &e,
            &model,
            seed + step,
            ordered,
            &format!("step {step}: {what}"),
        );
    }
    assert!(
        e.column_cache_stats().shadowed > 0,
        "updates and deletes of old keys overlap runs: {:?}",
        e.column_cache_stats()
    );
    // And once more from a full merge, where the images must serve.
    ds.compact().expect("compact");
    let before = e.column_cache_stats();
    check(&e, &model, ordered, "the last merge");
    check(&e, &model, ordered, "the last merge, again");
    let after = e.column_cache_stats();
    assert!(after.scans > before.scans, "{before:?} -> {after:?}");
    assert!(after.hits > before.hits, "{before:?} -> {after:?}");
    // Key ranges read the images too, cut at their ends.
    check_ranges(&e, &model, seed, ordered, "the last merge");
    let ranged = e.column_cache_stats();
    assert!(ranged.scans > after.scans, "{after:?} -> {ranged:?}");
    // Off, the ordinary scan gives the same.
    e.set_column_cache_bytes(0);
    check(&e, &model, ordered, "the cache off");
    check_ranges(&e, &model, seed, ordered, "the cache off");
    assert_eq!(e.column_cache_stats().scans, ranged.scans);
}

#[test]
fn images_answer_as_the_records_one_partition() {
    random_history(1, 11);
}

#[test]
fn images_answer_as_the_records_two_partitions() {
    random_history(2, 12);
}

#[test]
fn overlapping_runs_and_small_caches_scan_records() {
    let (_d, e) = engine();
    run(
        &e,
        "CREATE TABLE f (id BIGINT PRIMARY KEY, grp BIGINT, qty BIGINT)",
    );
    let ds = e.database().dataset("f").expect("dataset");
    let mut model = Model::new();
    let mut values = Vec::new();
    for id in 0..5000i64 {
        model.insert(id, (id % 7, id % 13));
        values.push(format!("({id}, {}, {})", id % 7, id % 13));
    }
    run(&e, &format!("INSERT INTO f VALUES {}", values.join(", ")));
    ds.flush().expect("flush");
    // A newer version of a key inside the component's range.
    run(&e, "UPSERT INTO f VALUES (2500, 1, 1000)");
    model.insert(2500, (1, 1000));
    let s0 = e.column_cache_stats();
    check(&e, &model, true, "an update in memory");
    let s1 = e.column_cache_stats();
    // The aggregate reads the images past the newer version, and so do
    // the rows in key order (the runs merged a range of keys at a time).
    assert!(s1.shadowed >= s0.shadowed + 2, "{s0:?} -> {s1:?}");
    assert_eq!(s1.fallbacks, s0.fallbacks, "{s0:?} -> {s1:?}");
    // Flushed, the newer version is a component over the older one's
    // range; a delete hides a key the same way.
    ds.flush().expect("flush");
    run(&e, "DELETE FROM f WHERE id = 17");
    model.remove(&17);
    check(&e, &model, true, "an update on disk, a delete in memory");
    ds.flush().expect("flush");
    check(&e, &model, true, "both on disk");
    // A third of the keys rewritten: a newer component as dense as the
    // old one over its range.
    run(&e, "UPDATE f SET qty = qty + 1 WHERE id % 3 = 0");
    for (id, (_, q)) in model.iter_mut() {
        if id % 3 == 0 {
            *q += 1;
        }
    }
    check(&e, &model, true, "a wide update in memory");
    ds.flush().expect("flush");
    check(&e, &model, true, "a wide update on disk");
    let s1 = e.column_cache_stats();
    assert!(s1.shadowed >= s0.shadowed + 5, "{s0:?} -> {s1:?}");
    ds.compact().expect("compact");
    check(&e, &model, true, "a merge");
    let s2 = e.column_cache_stats();
    assert!(s2.scans > s1.scans, "{s1:?} -> {s2:?}");
    // Too small a cache for the projected columns: records again.
    e.set_column_cache_bytes(4096);
    check(&e, &model, true, "a small cache");
    let s3 = e.column_cache_stats();
    assert_eq!(s3.scans, s2.scans);
    assert!(s3.fallbacks > s2.fallbacks);
    assert!(s3.bytes <= 4096);
}

#[test]
fn images_follow_column_changes() {
    let (_d, e) = engine();
    run(
        &e,
        "CREATE TABLE f (id BIGINT PRIMARY KEY, grp BIGINT, qty BIGINT)",
    );
    let ds = e.database().dataset("f").expect("dataset");
    let rows: Vec<String> = (0..3000)
        .map(|i| format!("({i}, {}, {i})", i % 5))
        .collect();
    run(&e, &format!("INSERT INTO f VALUES {}", rows.join(", ")));
    ds.flush().expect("flush");
    let sum = |e: &silt_sql::SqlEngine, sql: &str| ints(&run(e, sql), 0);
    assert_eq!(sum(&e, "SELECT sum(qty) FROM f"), vec![4_498_500]);
    run(&e, "ALTER TABLE f RENAME COLUMN qty TO amount");
    assert_eq!(sum(&e, "SELECT sum(amount) FROM f"), vec![4_498_500]);
    run(&e, "ALTER TABLE f ADD COLUMN extra BIGINT DEFAULT 2");
    assert_eq!(sum(&e, "SELECT sum(extra) FROM f"), vec![6000]);
    run(&e, "ALTER TABLE f DROP COLUMN amount");
    run(&e, "ALTER TABLE f ADD COLUMN amount DOUBLE");
    let q = "SELECT CAST(count(amount) AS BIGINT), CAST(sum(amount) AS BIGINT) FROM f";
    let on = run(&e, q);
    assert!(e.column_cache_stats().scans > 0);
    e.set_column_cache_bytes(0);
    let off = run(&e, q);
    assert_eq!(
        (ints(&on, 0), ints(&on, 1)),
        (ints(&off, 0), ints(&off, 1)),
        "a dropped and re-added column reads the same from images"
    );
}

#[test]
fn text_key_ranges_cut_chunks_at_their_ends() {
    let (_d, e) = engine();
    run(&e, "CREATE TABLE s (k VARCHAR PRIMARY KEY, qty BIGINT)");
    let ds = e.database().dataset("s").expect("dataset");
    let keys: Vec<String> = (0..30_000).map(|i| format!("k{i:06}")).collect();
    for chunk in keys.chunks(5000) {
        let rows: Vec<String> = chunk
            .iter()
            .map(|k| format!("('{k}', {})", k[1..].parse::<i64>().unwrap_or(0) % 10))
            .collect();
        run(&e, &format!("INSERT INTO s VALUES {}", rows.join(", ")));
    }
    ds.flush().expect("flush");
    ds.compact().expect("compact");
    // Memtable rows past the component's keys keep the runs disjoint.
    run(&e, "INSERT INTO s VALUES ('z1', 5), ('z2', 6)");
    for (cond, want) in [
        ("k >= 'k010000' AND k < 'k020000'", 10_000),
        ("k > 'k010000' AND k <= 'k020000'", 10_000),
        ("k >= 'k0123' AND k < 'k0124'", 100),
        ("k >= 'k029990'", 12),
        ("k < 'k000005'", 5),
        ("k > 'y'", 2),
        ("k >= 'k1'", 2),
        ("k >= 'a' AND k < 'b'", 0),
    ] {
        let before = e.column_cache_stats();
        let b = run(
            &e,
            &format!("SELECT CAST(count(*) AS BIGINT) FROM s WHERE {cond}"),
        );
        assert_eq!(ints(&b, 0), [want], "{cond}");
        let b = run(&e, &format!("SELECT k FROM s WHERE {cond} ORDER BY k"));
        let got: Vec<String> = strings(&b, 0).into_iter().flatten().collect();
        let mut all: Vec<String> = keys.clone();
        all.extend(["z1".to_owned(), "z2".to_owned()]);
        let expect: Vec<String> = all
            .into_iter()
            .filter(|k| {
                let k = k.as_str();
                match cond {
                    "k >= 'k010000' AND k < 'k020000'" => ("k010000".."k020000").contains(&k),
                    "k > 'k010000' AND k <= 'k020000'" => k > "k010000" && k <= "k020000",
                    "k >= 'k0123' AND k < 'k0124'" => ("k0123".."k0124").contains(&k),
                    "k >= 'k029990'" => k >= "k029990",
                    "k < 'k000005'" => k < "k000005",
                    "k > 'y'" => k > "y",
                    "k >= 'k1'" => k >= "k1",
                    _ => false,
                }
            })
            .collect();
        assert_eq!(got, expect, "{cond}");
        assert!(
            e.column_cache_stats().scans > before.scans,
            "{cond} read images"
        );
    }
}

/// A plain projection (no aggregate, no order), the shape a client that
/// reads a whole table sends, reads the images like any other full scan:
/// the first time (planned) and again from its kept plan.
#[test]
fn a_plain_projection_reads_images_planned_and_kept() {
    let (_d, e) = engine();
    run(&e, "CREATE TABLE f (id BIGINT PRIMARY KEY, note VARCHAR)");
    let ds = e.database().dataset("f").expect("dataset");
    let rows: Vec<String> = (0..4000).map(|i| format!("({i}, 'n{i}')")).collect();
    run(&e, &format!("INSERT INTO f VALUES {}", rows.join(", ")));
    ds.flush().expect("flush");
    ds.compact().expect("compact");
    for sql in [
        "SELECT note FROM f",
        "SELECT id FROM f",
        "SELECT id, note FROM f",
    ] {
        for round in 0..3 {
            let before = e.column_cache_stats();
            let b = run(&e, sql);
            let n: usize = b.iter().map(|b| b.num_rows()).sum();
            assert_eq!(n, 4000, "{sql}");
            let after = e.column_cache_stats();
            assert!(
                after.scans > before.scans,
                "{sql}, round {round}: {before:?} -> {after:?}"
            );
        }
    }
}

/// The same through a session with a statement control and the server's
/// bounds, the way `silt serve` runs a query: its kept plan on the
/// connection's task (`kept_stream`), else `execute_stream_with`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_served_projection_reads_images() {
    use futures::StreamExt;
    use silt_sql::{Bounds, SqlSession, StatementControl};
    let (_d, e) = engine();
    e.set_bounds(Bounds {
        query_memory: 256 << 20,
        server_memory: 1 << 30,
        value_bytes: 64 << 20,
    });
    e.execute("CREATE TABLE f (id BIGINT PRIMARY KEY, note VARCHAR)")
        .await
        .expect("create");
    let ds = e.database().dataset("f").expect("dataset");
    let rows: Vec<String> = (0..40_000).map(|i| format!("({i}, 'n{i}')")).collect();
    e.execute(&format!("INSERT INTO f VALUES {}", rows.join(", ")))
        .await
        .expect("insert");
    ds.flush().expect("flush");
    ds.compact().expect("compact");
    let s = std::sync::Arc::new(SqlSession::new());
    for sql in ["SELECT note FROM f", "SELECT id FROM f"] {
        for round in 0..3 {
            let before = e.column_cache_stats();
            let ctl = StatementControl::new();
            let mut stream = match e.kept_stream(&s, sql, Some(ctl.clone())) {
                Some(r) => r.expect("kept"),
                None => e
                    .execute_stream_with(&s, sql, Some(ctl))
                    .await
                    .expect("stream"),
            };
            let mut n = 0;
            while let Some(b) = stream.next().await {
                n += b.expect("batch").num_rows();
            }
            assert_eq!(n, 40_000, "{sql}");
            let after = e.column_cache_stats();
            assert!(
                after.scans > before.scans,
                "{sql}, round {round}: {before:?} -> {after:?}"
            );
            // Built once, then read from the cache.
            if round > 0 {
                assert_eq!(after.misses, before.misses, "{sql}, round {round}");
                assert!(after.hits > before.hits, "{sql}, round {round}");
            }
        }
    }
}

/// In a transaction block (psycopg's default) a scan reads the images while
/// the block has written nothing to the table, and its own writes once it
/// has; a rollback leaves the images as they were.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_block_reads_images_until_it_writes_the_table() {
    async fn q(
        e: &silt_sql::SqlEngine,
        s: &silt_sql::SqlSession,
        sql: &str,
    ) -> Vec<datafusion::arrow::array::RecordBatch> {
        e.execute_in(s, sql).await.expect(sql)
    }
    async fn sum(e: &silt_sql::SqlEngine, s: &silt_sql::SqlSession) -> i64 {
        ints(&q(e, s, "SELECT sum(qty) FROM f").await, 0)[0]
    }
    let (_d, e) = engine();
    let s = silt_sql::SqlSession::new();
    q(&e, &s, "CREATE TABLE f (id BIGINT PRIMARY KEY, qty BIGINT)").await;
    q(&e, &s, "CREATE TABLE g (id BIGINT PRIMARY KEY)").await;
    let ds = e.database().dataset("f").expect("dataset");
    let rows: Vec<String> = (0..3000).map(|i| format!("({i}, {i})")).collect();
    q(&e, &s, &format!("INSERT INTO f VALUES {}", rows.join(", "))).await;
    ds.flush().expect("flush");
    ds.compact().expect("compact");
    q(&e, &s, "BEGIN").await;
    let s0 = e.column_cache_stats();
    assert_eq!(sum(&e, &s).await, 4_498_500);
    let qtys = q(&e, &s, "SELECT qty FROM f").await;
    assert_eq!(qtys.iter().map(|b| b.num_rows()).sum::<usize>(), 3000);
    // A write to another table changes nothing here.
    q(&e, &s, "INSERT INTO g VALUES (1)").await;
    assert_eq!(sum(&e, &s).await, 4_498_500);
    let s1 = e.column_cache_stats();
    assert_eq!(s1.scans, s0.scans + 3, "{s0:?} -> {s1:?}");
    // Its own writes to the table: read through the block, not the images.
    q(&e, &s, "UPDATE f SET qty = 0 WHERE id = 2999").await;
    assert_eq!(sum(&e, &s).await, 4_498_500 - 2999);
    q(&e, &s, "INSERT INTO f VALUES (5000, 1)").await;
    assert_eq!(sum(&e, &s).await, 4_498_500 - 2999 + 1);
    assert_eq!(e.column_cache_stats().scans, s1.scans);
    q(&e, &s, "ROLLBACK").await;
    assert_eq!(sum(&e, &s).await, 4_498_500);
    assert!(e.column_cache_stats().scans > s1.scans);
}
