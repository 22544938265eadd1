//! Joins whose probe side reads only what the build side's keys match
//! (`silt_sql::join_keys`): gets on a key, key ranges on a composite
//! key's first field, B+-tree lookups. Every answer is checked against an
//! engine on the same database that scans instead (DataFusion's dynamic
//! join filters off), and the storage's counters show which way the probe
//! side was read.

use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::util::pretty::pretty_format_batches;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use silt::Dataset;
use silt_sql::{SqlEngine, SqlSession};

use crate::common::*;

/// The rows of a result as sorted lines (joins give no order).
fn rows(b: &[RecordBatch]) -> Vec<String> {
    let text = pretty_format_batches(b).expect("format").to_string();
    let mut lines: Vec<String> = text
        .lines()
        .skip(3)
        .filter(|l| l.starts_with('|'))
        .map(str::to_owned)
        .collect();
    lines.sort();
    lines
}

/// The primary tree's (scans, gets) so far.
fn reads(ds: &Dataset) -> (u64, u64) {
    let s = ds.stats();
    let p = s
        .indexes
        .iter()
        .find(|t| t.name.ends_with("/primary"))
        .expect("primary");
    (p.scans, p.gets)
}

struct Shop {
    _dir: tempfile::TempDir,
    keyed: SqlEngine,
    scanning: SqlEngine,
}

/// customer ⋈ address ⋈ country, orders by customer (a B+-tree),
/// order lines keyed by (order, line); some of each on disk.
fn shop() -> Shop {
    let (dir, keyed) = engine();
    for ddl in [
        "CREATE TABLE country (co_id BIGINT PRIMARY KEY, co_name VARCHAR)",
        "CREATE TABLE address (addr_id BIGINT PRIMARY KEY, street VARCHAR, addr_co_id BIGINT)",
        "CREATE TABLE customer (c_id BIGINT PRIMARY KEY, c_uname VARCHAR, c_addr_id BIGINT)",
        "CREATE INDEX customer_uname ON customer (c_uname)",
        "CREATE TABLE orders (o_id BIGINT PRIMARY KEY, o_c_id BIGINT, o_total DOUBLE)",
        "CREATE INDEX orders_c ON orders (o_c_id)",
        "CREATE TABLE order_line (ol_o_id BIGINT, ol_id BIGINT, ol_qty BIGINT, PRIMARY KEY (ol_o_id, ol_id))",
        "CREATE TABLE grp (g BIGINT PRIMARY KEY, label VARCHAR)",
        "CREATE TABLE member (m_id BIGINT PRIMARY KEY, m_g BIGINT)",
        "CREATE INDEX member_g ON member (m_g)",
    ] {
        run(&keyed, ddl);
    }
    run(
        &keyed,
        "INSERT INTO country SELECT x, 'land' || x FROM generate_series(1, 50) g(x)",
    );
    run(
        &keyed,
        "INSERT INTO address SELECT x, 'street' || x, x % 50 + 1 FROM generate_series(1, 8000) g(x)",
    );
    let db = keyed.database().clone();
    db.dataset("address")
        .expect("address")
        .flush()
        .expect("flush");
    run(
        &keyed,
        "INSERT INTO customer SELECT x, 'user' || x, x * 2 FROM generate_series(1, 4000) g(x)",
    );
    run(
        &keyed,
        "INSERT INTO orders SELECT x, x % 4000 + 1, x * 1.5 FROM generate_series(1, 12000) g(x)",
    );
    db.dataset("orders")
        .expect("orders")
        .flush()
        .expect("flush");
    run(
        &keyed,
        "INSERT INTO order_line SELECT x / 3 + 1, x % 3, x % 11 FROM generate_series(0, 35999) g(x)",
    );
    run(
        &keyed,
        "INSERT INTO grp VALUES (0, 'zero'), (1, 'one'), (2, 'two')",
    );
    run(
        &keyed,
        "INSERT INTO member SELECT x, x % 3 FROM generate_series(1, 30000) g(x)",
    );
    let scanning = SqlEngine::new(db).expect("engine");
    run(
        &scanning,
        "SET datafusion.optimizer.enable_join_dynamic_filter_pushdown = false",
    );
    Shop {
        _dir: dir,
        keyed,
        scanning,
    }
}

#[test]
fn joins_read_the_probe_side_by_the_build_sides_keys() {
    let s = shop();
    let db = s.keyed.database().clone();
    let address = db.dataset("address").expect("address");
    let country = db.dataset("country").expect("country");
    let orders = db.dataset("orders").expect("orders");
    let lines = db.dataset("order_line").expect("order_line");
    let mut rng = StdRng::seed_from_u64(31);
    for _ in 0..25 {
        let u = rng.random_range(1..4200);
        // A customer by name, its address and country by key.
        let q = format!(
            "SELECT c.c_id, a.street, co.co_name FROM customer c JOIN address a ON c.c_addr_id = a.addr_id \
             JOIN country co ON a.addr_co_id = co.co_id WHERE c.c_uname = 'user{u}'"
        );
        let want = rows(&run(&s.scanning, &q));
        let (a0, c0) = (reads(&address), reads(&country));
        let got = rows(&run(&s.keyed, &q));
        assert_eq!(got, want, "{q}");
        let (a1, c1) = (reads(&address), reads(&country));
        assert_eq!((a1.0, c1.0), (a0.0, c0.0), "{q}: a probe side was scanned");
        assert_eq!(u <= 4000, a1.1 > a0.1, "{q}: address not read by key");
        // A customer's orders through the B+-tree on o_c_id, and their
        // lines by the first field of their key.
        let q = format!(
            "SELECT o.o_id, o.o_total, l.ol_id, l.ol_qty FROM customer c JOIN orders o ON o.o_c_id = c.c_id \
             JOIN order_line l ON l.ol_o_id = o.o_id WHERE c.c_uname = 'user{u}'"
        );
        let want = rows(&run(&s.scanning, &q));
        let (o0, l0) = (reads(&orders), reads(&lines));
        let got = rows(&run(&s.keyed, &q));
        assert_eq!(got, want, "{q}");
        assert_eq!(u <= 4000, !want.is_empty(), "{q}");
        let (o1, l1) = (reads(&orders), reads(&lines));
        assert_eq!(o1.0, o0.0, "{q}: orders scanned");
        // Key ranges of order_line: a scan each (three lines, one order
        // each), never the whole table.
        assert!(l1.0 - l0.0 <= 3, "{q}: {} scans of order_line", l1.0 - l0.0);
    }
    let plan = explain(
        &s.keyed,
        "SELECT a.street FROM customer c JOIN address a ON c.c_addr_id = a.addr_id WHERE c.c_uname = 'user5'",
    );
    assert!(plan.contains("join keys=DynamicFilter"), "{plan}");
    assert!(plan.contains("mode=CollectLeft"), "{plan}");
    // What the keys became: one get-many of address, one of country.
    let plan = explain(
        &s.keyed,
        "ANALYZE SELECT co.co_name FROM customer c JOIN address a ON c.c_addr_id = a.addr_id \
         JOIN country co ON a.addr_co_id = co.co_id WHERE c.c_uname = 'user5'",
    );
    assert_eq!(plan.matches("join_key_paths=1").count(), 2, "{plan}");
}

#[test]
fn many_keys_or_unselective_lookups_read_as_a_scan_would() {
    let s = shop();
    let db = s.keyed.database().clone();
    let member = db.dataset("member").expect("member");
    // Three groups of 10,000 members each: the index lookups pass their
    // budget (4,096 rows here) and the scan reads the whole table.
    let q = "SELECT g.label, count(*) FROM grp g JOIN member m ON m.m_g = g.g GROUP BY g.label";
    let want = rows(&run(&s.scanning, q));
    let before = reads(&member);
    assert_eq!(rows(&run(&s.keyed, q)), want);
    let plan = explain(&s.keyed, &format!("ANALYZE {q}"));
    assert!(plan.contains("join_key_paths=3"), "{plan}");
    assert!(plan.contains("join_keys_over_budget=1"), "{plan}");
    // ... after reading at most the budget and a batch by index, in each
    // of the two runs.
    assert!(reads(&member).1 - before.1 <= 2 * (4096 + 1024), "{plan}");
    // A build side of more keys than an IN list holds: bounds only.
    for q in [
        "SELECT count(*) FROM customer c JOIN address a ON c.c_addr_id = a.addr_id WHERE c.c_id <= 500",
        "SELECT count(*) FROM address a JOIN customer c ON c.c_addr_id = a.addr_id WHERE a.addr_id BETWEEN 100 AND 900",
        "SELECT count(*), sum(o.o_total) FROM orders o JOIN customer c ON o.o_c_id = c.c_id WHERE c.c_id > 3990",
        "SELECT count(*) FROM order_line l JOIN orders o ON l.ol_o_id = o.o_id WHERE o.o_c_id IN (3, 4, 5)",
        "SELECT count(*) FROM member m JOIN grp g ON m.m_g = g.g WHERE g.g = 1",
    ] {
        assert_eq!(rows(&run(&s.keyed, q)), rows(&run(&s.scanning, q)), "{q}");
    }
}

#[test]
fn hundreds_of_keys_read_a_large_table_by_key_and_a_small_one_by_scan() {
    let s = shop();
    let db = s.keyed.database().clone();
    let lines = db.dataset("order_line").expect("order_line");
    // 399 orders (more than DataFusion's own 150-key lists): a key range
    // of order_line's 36,000 rows each, cheaper than reading them all.
    let q = "SELECT count(*), sum(l.ol_qty) FROM orders o JOIN order_line l ON l.ol_o_id = o.o_id \
             WHERE o.o_total < 600";
    let want = rows(&run(&s.scanning, q));
    let before = reads(&lines);
    assert_eq!(rows(&run(&s.keyed, q)), want);
    let scans = reads(&lines).0 - before.0;
    assert!((1..=399).contains(&scans), "{scans} scans of order_line");
    let plan = explain(&s.keyed, &format!("ANALYZE {q}"));
    assert!(plan.contains("join_key_paths=399"), "{plan}");
    // 999 orders: 64 rows of scan for each key read is more than the
    // table holds, so the keys' bounds make one key range instead.
    let q = "SELECT count(*), sum(l.ol_qty) FROM orders o JOIN order_line l ON l.ol_o_id = o.o_id \
             WHERE o.o_total < 1500";
    assert_eq!(rows(&run(&s.keyed, q)), rows(&run(&s.scanning, q)));
    let plan = explain(&s.keyed, &format!("ANALYZE {q}"));
    assert!(plan.contains("join_key_paths=1,"), "{plan}");
    // The same many keys by get: customers of 400 orders' addresses.
    let q = "SELECT count(*) FROM customer c JOIN address a ON c.c_addr_id = a.addr_id WHERE c.c_id <= 300";
    assert_eq!(rows(&run(&s.keyed, q)), rows(&run(&s.scanning, q)));
}

#[test]
fn keyed_reads_see_a_transactions_own_writes() {
    let s = shop();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let session = SqlSession::new();
    let exec = |sql: &str| {
        rt.block_on(s.keyed.execute_in(&session, sql))
            .unwrap_or_else(|e| panic!("{sql}: {e}"))
    };
    let q = "SELECT c.c_id, a.street FROM customer c JOIN address a ON c.c_addr_id = a.addr_id \
             WHERE c.c_uname IN ('user3', 'newbie')";
    let before = rows(&exec(q));
    assert_eq!(before.len(), 1);
    for sql in [
        "BEGIN",
        "INSERT INTO address VALUES (9001, 'fresh street', 1)",
        "INSERT INTO customer VALUES (9001, 'newbie', 9001)",
        "UPDATE address SET street = 'moved' WHERE addr_id = 6",
    ] {
        exec(sql);
    }
    let inside = rows(&exec(q));
    let analyzed = exec(&format!("EXPLAIN ANALYZE {q}"));
    let plan = strings(&analyzed, 1)
        .into_iter()
        .flatten()
        .collect::<String>();
    assert!(plan.contains("join_key_paths=1"), "{plan}");
    assert_eq!(inside.len(), 2, "{inside:?}");
    assert!(
        inside.iter().any(|l| l.contains("fresh street")),
        "{inside:?}"
    );
    assert!(inside.iter().any(|l| l.contains("moved")), "{inside:?}");
    // Outside the block nothing has changed yet.
    assert_eq!(rows(&run(&s.scanning, q)), before);
    exec("ROLLBACK");
    assert_eq!(rows(&exec(q)), before);
}

#[test]
fn a_recursive_query_with_a_join_on_a_key_counts_every_step() {
    // Each step runs its join afresh (reset plan states): a scan must not
    // keep the keys of an earlier step.
    let (_d, e) = engine();
    run(&e, "CREATE TABLE node (id BIGINT PRIMARY KEY, next BIGINT)");
    // A chain 1 -> 2 -> ... -> 60, and a thousand nodes off it.
    run(
        &e,
        "INSERT INTO node SELECT x, CASE WHEN x < 60 THEN x + 1 ELSE NULL END FROM generate_series(1, 1060) g(x)",
    );
    let q = "WITH RECURSIVE r(id) AS (SELECT 1 UNION ALL \
             SELECT n.next FROM r JOIN node n ON n.id = r.id WHERE n.next IS NOT NULL) \
             SELECT count(*), sum(id) FROM r";
    let b = run(&e, q);
    let text = rows(&b).join("\n");
    assert!(text.contains("| 60 ") && text.contains("| 1830 "), "{text}");
}
