//! Range predicates through a `brin` index (zone maps of the primary's
//! blocks): the same rows as without it, under AND and OR, with NULLs,
//! strings and a remote tier; EXPLAIN names the path and what the zone
//! maps let through.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::common::*;

/// `ev`: id, ts (following the id, sometimes NULL), tag (a string), v.
fn load(e: &silt_sql::SqlEngine, with: &str) {
    load_with(e, with, "");
}

/// `load`, the indexes created with `index_with` (e.g. a chunk size).
fn load_with(e: &silt_sql::SqlEngine, with: &str, index_with: &str) {
    run(
        e,
        &format!(
            "CREATE TABLE ev (id BIGINT PRIMARY KEY, ts BIGINT, tag VARCHAR, v BIGINT) {with}"
        ),
    );
    let mut rng = StdRng::seed_from_u64(7);
    let mut vals = Vec::new();
    for id in 0..6000i64 {
        let ts = if rng.random_range(0..20) == 0 {
            "NULL".to_owned()
        } else {
            (id * 10 + rng.random_range(0..30)).to_string()
        };
        let tag = format!("'t{:03}'", rng.random_range(0..500));
        vals.push(format!("({id}, {ts}, {tag}, {})", rng.random_range(0..100)));
        if vals.len() == 500 {
            run(e, &format!("INSERT INTO ev VALUES {}", vals.join(", ")));
            vals.clear();
        }
    }
    run(
        e,
        &format!("CREATE INDEX ev_ts ON ev USING brin (ts) {index_with}"),
    );
    run(
        e,
        &format!("CREATE INDEX ev_tag ON ev USING brin (tag) {index_with}"),
    );
}

/// The ids `pred` selects through the index, and with the index defeated
/// (`ts + 0`, `tag || ''`: expressions are not pushed down).
fn both(e: &silt_sql::SqlEngine, pred: &str, plain: &str) -> (Vec<i64>, Vec<i64>) {
    let mut a = ints(&run(e, &format!("SELECT id FROM ev WHERE {pred}")), 0);
    let mut b = ints(&run(e, &format!("SELECT id FROM ev WHERE {plain}")), 0);
    a.sort_unstable();
    b.sort_unstable();
    (a, b)
}

fn check(e: &silt_sql::SqlEngine) {
    let cases = [
        (
            "ts BETWEEN 20000 AND 20400",
            "ts + 0 BETWEEN 20000 AND 20400",
        ),
        ("ts >= 59000", "ts + 0 >= 59000"),
        ("ts < 100", "ts + 0 < 100"),
        ("ts = 31234", "ts + 0 = 31234"),
        (
            "ts > 1000 AND ts <= 1500 AND v < 50",
            "ts + 0 > 1000 AND ts + 0 <= 1500 AND v < 50",
        ),
        ("ts < 300 OR ts > 59800", "ts + 0 < 300 OR ts + 0 > 59800"),
        ("ts IS NULL", "ts + 0 IS NULL"),
        (
            "tag BETWEEN 't100' AND 't105'",
            "tag || '' BETWEEN 't100' AND 't105'",
        ),
        (
            "tag = 't042' AND ts > 30000",
            "tag || '' = 't042' AND ts + 0 > 30000",
        ),
        ("tag > 't49'", "tag || '' > 't49'"),
    ];
    for (pred, plain) in cases {
        let (a, b) = both(e, pred, plain);
        assert_eq!(a, b, "{pred}");
    }
    // Nothing, cleanly.
    let (a, _) = both(e, "ts BETWEEN 5 AND 1", "false");
    assert!(a.is_empty());
}

#[test]
fn brin_ranges_equal_full_scans_and_show_in_explain() {
    let (d, e) = engine();
    load(&e, "");
    check(&e);
    let ds = e.database().dataset("ev").unwrap();
    ds.flush().unwrap();
    ds.compact().unwrap();
    drop(ds);
    check(&e);
    let plan = explain(&e, "SELECT id FROM ev WHERE ts BETWEEN 20000 AND 20400");
    assert!(
        plan.contains("brin(ts) index=ev_ts range(ts >= 20000 AND ts <= 20400)"),
        "{plan}"
    );
    let zone = plan
        .split("zone maps: ")
        .nth(1)
        .and_then(|r| r.split(" blocks").next())
        .unwrap_or_else(|| panic!("no zone map count in {plan}"))
        .to_owned();
    let (read, all): (u64, u64) = {
        let mut it = zone.split(" of ").map(|n| n.trim().parse::<u64>().unwrap());
        (it.next().unwrap(), it.next().unwrap())
    };
    assert!(
        read * 20 < all,
        "zone maps let {read} of {all} blocks through"
    );
    // Random tags prune nothing, but stay right.
    let plan = explain(&e, "SELECT id FROM ev WHERE tag = 't042'");
    assert!(plan.contains("brin(tag)"), "{plan}");
    let db = reopen(e, d.path());
    let e = silt_sql::SqlEngine::new(std::sync::Arc::new(db)).unwrap();
    check(&e);
}

/// `(read, all)` of "`label`R of N`unit`" in a plan.
fn counts(plan: &str, label: &str, unit: &str) -> (u64, u64) {
    let part = plan
        .split(label)
        .nth(1)
        .and_then(|r| r.split(unit).next())
        .unwrap_or_else(|| panic!("no `{label}` count in {plan}"));
    let mut it = part.split(" of ").map(|n| n.trim().parse::<u64>().unwrap());
    (it.next().unwrap(), it.next().unwrap())
}

/// Brin indexes over chunks of blocks (Fusion's block range index), in
/// the key-value form and then rebuilt as an interval tree: the same rows
/// as full scans through flushes, a merge and a reopen; EXPLAIN counts the
/// chunks, and both forms choose the same ones.
#[test]
fn chunked_brin_in_both_forms() {
    let (d, e) = engine();
    load_with(&e, "", "WITH (chunk_size = '8KB', form = 'key_value')");
    check(&e);
    let ds = e.database().dataset("ev").unwrap();
    ds.flush().unwrap();
    check(&e);
    ds.compact().unwrap();
    drop(ds);
    check(&e);
    let q = "SELECT id FROM ev WHERE ts BETWEEN 20000 AND 20400";
    let plan = explain(&e, q);
    assert!(plan.contains("block range index (key value): "), "{plan}");
    let kv = counts(&plan, "block range index (key value): ", " chunks");
    assert!(kv.0 * 20 < kv.1, "{kv:?}: {plan}");
    run(&e, "DROP INDEX ev_ts");
    run(
        &e,
        "CREATE INDEX ev_ts ON ev USING brin (ts) WITH (chunk_size = '8KB', form = 'interval_tree')",
    );
    let plan = explain(&e, q);
    let tree = counts(&plan, "block range index (interval tree): ", " chunks");
    assert_eq!(kv, tree, "{plan}");
    check(&e);
    let db = reopen(e, d.path());
    let e = silt_sql::SqlEngine::new(std::sync::Arc::new(db)).unwrap();
    check(&e);
    // Bad options say what is wrong.
    for (opts, want) in [
        ("chunk_size = '1KB'", "between 4 KiB and 1 GiB"),
        ("form = 'key_value'", "give a `chunk_size`"),
        ("chunk_size = '8KB', form = 'btree'", "unknown brin form"),
    ] {
        let err = fail(
            &e,
            &format!("CREATE INDEX ev_v ON ev USING brin (v) WITH ({opts})"),
        );
        assert!(err.contains(want), "{opts}: {err}");
    }
    let err = fail(
        &e,
        "CREATE INDEX ev_v ON ev USING btree (v) WITH (chunk_size = '8KB')",
    );
    assert!(err.contains("brin indexes only"), "{err}");
}

#[test]
fn brin_on_a_remote_tier() {
    silt_objstore::install();
    let (d, e) = engine();
    let url = format!(
        "memory://brin-{}",
        d.path().file_name().unwrap().to_string_lossy()
    );
    load(&e, &format!("WITH (remote = '{url}')"));
    let ds = e.database().dataset("ev").unwrap();
    ds.flush().unwrap();
    check(&e);
    // One component with its column image, then newer versions over it
    // (in memory, then in a newer component): scans reading a few columns
    // answer from the image and stay right.
    ds.compact().unwrap();
    check(&e);
    // 6,000 rows: one chunk of the image, read for a narrow range.
    let plan = explain(&e, "SELECT id FROM ev WHERE ts BETWEEN 20000 AND 20400");
    assert!(
        plan.contains("column images: 1 of 1 chunks to read"),
        "{plan}"
    );
    run(&e, "UPDATE ev SET ts = ts + 7 WHERE id % 7 = 0");
    run(&e, "DELETE FROM ev WHERE id % 11 = 0");
    check(&e);
    let sum = |pred: &str| ints(&run(&e, &format!("SELECT sum(v) FROM ev WHERE {pred}")), 0);
    assert_eq!(
        sum("ts BETWEEN 20000 AND 40000"),
        sum("ts + 0 BETWEEN 20000 AND 40000")
    );
    ds.flush().unwrap();
    drop(ds);
    check(&e);
}

/// `min`/`max` of zone-mapped columns: from the zone maps when they
/// decide (one merged component), from the records otherwise (rows in
/// memory, a transaction's own writes); always the same answer.
#[test]
fn min_and_max_from_zone_maps() {
    let (_d, e) = engine();
    load(&e, "");
    let q = "SELECT min(ts), max(ts), min(tag), max(tag) FROM ev";
    let plain = "SELECT min(ts + 0), max(ts + 0), min(tag || ''), max(tag || '') FROM ev";
    let same = |e: &silt_sql::SqlEngine| {
        let (a, b) = (run(e, q), run(e, plain));
        assert_eq!(ints(&a, 0), ints(&b, 0));
        assert_eq!(ints(&a, 1), ints(&b, 1));
        assert_eq!(strings(&a, 2), strings(&b, 2));
        assert_eq!(strings(&a, 3), strings(&b, 3));
        ints(&a, 0)[0]
    };
    let plan = explain(&e, q);
    assert!(plan.contains("min/max from zone maps when exact"), "{plan}");
    // Not for what the zone maps cannot answer.
    for other in [
        "SELECT min(ts), count(*) FROM ev",
        "SELECT min(ts), max(v) FROM ev",
        "SELECT min(ts) FROM ev WHERE v > 3",
        "SELECT v, min(ts) FROM ev GROUP BY v",
    ] {
        assert!(
            !explain(&e, other).contains("zone maps when exact"),
            "{other}"
        );
    }
    same(&e); // rows in memory: read
    let ds = e.database().dataset("ev").unwrap();
    ds.flush().unwrap();
    ds.compact().unwrap();
    assert!(ds.exact_extremes(&["ts".into()]).is_some());
    drop(ds);
    same(&e); // one component: from the zone maps
    let analyzed = strings(&run(&e, &format!("EXPLAIN ANALYZE {q}")), 1)
        .into_iter()
        .flatten()
        .collect::<Vec<_>>()
        .join("\n");
    assert!(analyzed.contains("extremes_from_zone_maps=1"), "{analyzed}");
    // A new smallest value in memory, then a deleted one.
    run(&e, "INSERT INTO ev VALUES (100000, -7, 'a', 1)");
    assert_eq!(same(&e), -7);
    run(&e, "DELETE FROM ev WHERE id = 100000");
    let ds = e.database().dataset("ev").unwrap();
    ds.flush().unwrap();
    ds.compact().unwrap();
    drop(ds);
    assert!(same(&e) >= 0);
    // Inside a transaction, its own writes count.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let s = silt_sql::SqlSession::new();
    let r = |sql: &str| rt.block_on(e.execute_in(&s, sql)).unwrap();
    r("BEGIN");
    r("INSERT INTO ev VALUES (100001, -9, 'a', 1)");
    assert_eq!(ints(&r("SELECT min(ts) FROM ev"), 0), vec![-9]);
    r("ROLLBACK");
    assert!(ints(&run(&e, "SELECT min(ts) FROM ev"), 0)[0] >= 0);
}
