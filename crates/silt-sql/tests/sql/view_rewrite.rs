//! #22 item 3: queries whose joins follow a materialized view's foreign
//! keys read the view (`view_rewrite`), and answer what the joins answer:
//! after any mix of writes, inside transaction blocks that wrote the
//! tables, and with the rewriting turned off.

use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::util::pretty::pretty_format_batches;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use silt_sql::{SqlEngine, SqlSession};

use super::common::*;

fn schema(e: &SqlEngine) {
    run(
        e,
        "CREATE TABLE customer (c_id BIGINT PRIMARY KEY, name TEXT, grp BIGINT)",
    );
    run(
        e,
        "CREATE TABLE orders (o_id BIGINT PRIMARY KEY, o_c_id BIGINT REFERENCES customer ON DELETE CASCADE, total DOUBLE)",
    );
    run(
        e,
        "CREATE TABLE order_line (ol_id BIGINT PRIMARY KEY, ol_o_id BIGINT NOT NULL \
         REFERENCES orders ON DELETE CASCADE, qty BIGINT)",
    );
    // The whole chain, without the key columns or the order's total; and
    // customer -> orders with everything.
    run(
        e,
        "CREATE MATERIALIZED VIEW col AS SELECT c.c_id, c.name, c.grp, o.o_id, l.ol_id, l.qty AS n \
         FROM customer c JOIN orders o ON o.o_c_id = c.c_id JOIN order_line l ON l.ol_o_id = o.o_id",
    );
    run(
        e,
        "CREATE MATERIALIZED VIEW co AS SELECT * FROM customer c JOIN orders o ON o.o_c_id = c.c_id",
    );
}

/// The rows of `b`, sorted, as text.
fn rows(b: &[RecordBatch]) -> Vec<String> {
    let text = match pretty_format_batches(b) {
        Ok(t) => t.to_string(),
        Err(e) => panic!("format: {e}"),
    };
    let mut lines: Vec<String> = text
        .lines()
        .skip(3)
        .filter(|l| l.starts_with('|'))
        .map(str::to_owned)
        .collect();
    lines.sort();
    lines
}

/// `sql`'s rows with the views and with the joins as written.
fn both(e: &SqlEngine, sql: &str) -> (Vec<String>, Vec<String>) {
    let with = rows(&run(e, sql));
    run(e, "SET silt.use_materialized_views = false");
    let without = rows(&run(e, sql));
    run(e, "SET silt.use_materialized_views = true");
    (with, without)
}

const CHAIN: &str = "FROM customer c JOIN orders o ON o.o_c_id = c.c_id \
                     JOIN order_line l ON l.ol_o_id = o.o_id";

#[test]
fn joins_along_the_keys_read_the_view() {
    let (_d, e) = engine();
    schema(&e);
    run(
        &e,
        "INSERT INTO customer VALUES (1, 'ann', 1), (2, 'bob', 2)",
    );
    run(
        &e,
        "INSERT INTO orders VALUES (10, 1, 5.0), (11, 2, 7.0), (12, NULL, 1.0)",
    );
    run(
        &e,
        "INSERT INTO order_line VALUES (100, 10, 1), (101, 10, 2), (102, 11, 3), (103, 12, 4)",
    );
    let q = format!("SELECT c.name, l.ol_id, l.qty {CHAIN} WHERE c.c_id = 1");
    let plan = explain(&e, &q);
    assert!(plan.contains("MaterializedViews: view=col"), "{plan}");
    assert!(plan.contains("dataset=col"), "{plan}");
    let (with, without) = both(&e, &q);
    assert_eq!(with, without);
    assert_eq!(with.len(), 2);
    // The keys the view left out are read from the keys they equal.
    let q = format!("SELECT l.ol_o_id, o.o_c_id, l.ol_id {CHAIN}");
    assert!(explain(&e, &q).contains("view=col"));
    let (with, without) = both(&e, &q);
    assert_eq!(with, without);
    assert_eq!(with.len(), 3, "the order without a customer is in no join");
    // A column the view does not hold: the joins, or a shorter view.
    let q = format!("SELECT o.total, l.ol_id {CHAIN}");
    let plan = explain(&e, &q);
    assert!(plan.contains("view=co"), "{plan}");
    assert!(!plan.contains("view=col"), "{plan}");
    let (with, without) = both(&e, &q);
    assert_eq!(with, without);
    // Written the other way round, or as a list of tables.
    for q in [
        "SELECT c.name, l.qty FROM order_line l JOIN orders o ON o.o_id = l.ol_o_id \
         JOIN customer c ON c.c_id = o.o_c_id WHERE l.qty > 1",
        "SELECT c.name, l.qty FROM customer c, orders o, order_line l \
         WHERE o.o_c_id = c.c_id AND l.ol_o_id = o.o_id AND c.grp = 2",
    ] {
        assert!(explain(&e, q).contains("view=col"), "{q}");
        let (with, without) = both(&e, q);
        assert_eq!(with, without, "{q}");
        assert!(!with.is_empty());
    }
    // Turned off, the plan joins.
    run(&e, "SET silt.use_materialized_views = false");
    let plan = explain(&e, &format!("SELECT c.name, l.qty {CHAIN}"));
    assert!(!plan.contains("dataset=col"), "{plan}");
    run(&e, "SET silt.use_materialized_views = true");
    // Joins on other columns than the keys stay joins.
    let q = "SELECT c.name, o.o_id FROM customer c JOIN orders o ON o.o_id = c.c_id";
    assert!(!explain(&e, q).contains("MaterializedViews"));
}

#[test]
fn a_transaction_reads_its_own_writes_through_the_joins() {
    let (_d, e) = engine();
    schema(&e);
    run(&e, "INSERT INTO customer VALUES (1, 'ann', 1)");
    run(&e, "INSERT INTO orders VALUES (10, 1, 5.0)");
    run(&e, "INSERT INTO order_line VALUES (100, 10, 1)");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let q = format!("SELECT count(*) {CHAIN}");
    let in_session = |s: &SqlSession, sql: &str| -> Vec<RecordBatch> {
        rt.block_on(e.execute_in(s, sql))
            .unwrap_or_else(|err| panic!("{sql}\n  failed: {err}"))
    };
    let session = SqlSession::new();
    in_session(&session, "BEGIN");
    assert_eq!(
        ints(&in_session(&session, &q), 0),
        [1],
        "read through the view"
    );
    let plan = explain(&e, &q);
    assert!(plan.contains("dataset=col"), "{plan}");
    in_session(&session, "INSERT INTO order_line VALUES (101, 10, 2)");
    assert_eq!(
        ints(&in_session(&session, &q), 0),
        [2],
        "its own write, through the joins"
    );
    assert_eq!(
        ints(&in_session(&SqlSession::new(), &q), 0),
        [1],
        "not yet for others"
    );
    in_session(&session, "COMMIT");
    assert_eq!(ints(&in_session(&SqlSession::new(), &q), 0), [2]);
}

/// Random writes of every kind (foreign-key moves, cascaded deletes,
/// nulls) between random queries of the chain's shapes: each answers the
/// same with the views as with the joins.
#[test]
fn rewritten_queries_answer_as_the_joins() {
    for seed in 0..4u64 {
        let (_d, e) = engine();
        schema(&e);
        let mut rng = StdRng::seed_from_u64(seed);
        let (nc, no, nl) = (12i64, 40i64, 120i64);
        for c in 0..nc {
            run(
                &e,
                &format!("INSERT INTO customer VALUES ({c}, 'n{}', {})", c % 5, c % 3),
            );
        }
        for o in 0..no {
            run(
                &e,
                &format!("INSERT INTO orders VALUES ({o}, {}, {o}.5)", o % nc),
            );
        }
        for l in 0..nl {
            run(
                &e,
                &format!("INSERT INTO order_line VALUES ({l}, {}, {})", l % no, l % 7),
            );
        }
        let mut rewritten = 0;
        for round in 0..40 {
            for _ in 0..rng.random_range(1..5) {
                let w = match rng.random_range(0..8) {
                    0 => format!(
                        "UPSERT INTO customer VALUES ({}, 'm{}', {})",
                        rng.random_range(0..nc + 3),
                        rng.random_range(0..9),
                        rng.random_range(0..3)
                    ),
                    1 => format!(
                        "UPDATE orders SET o_c_id = {} WHERE o_id = {}",
                        rng.random_range(0..nc),
                        rng.random_range(0..no)
                    ),
                    2 => format!(
                        "UPDATE orders SET o_c_id = NULL WHERE o_id = {}",
                        rng.random_range(0..no)
                    ),
                    3 => format!(
                        "UPDATE order_line SET ol_o_id = {}, qty = {} WHERE ol_id = {}",
                        rng.random_range(0..no),
                        rng.random_range(0..7),
                        rng.random_range(0..nl)
                    ),
                    4 => format!(
                        "DELETE FROM customer WHERE c_id = {}",
                        rng.random_range(0..nc + 3)
                    ),
                    5 => format!(
                        "DELETE FROM order_line WHERE ol_id = {}",
                        rng.random_range(0..nl)
                    ),
                    6 => format!(
                        "UPSERT INTO orders VALUES ({}, {}, 1.0)",
                        rng.random_range(0..no),
                        rng.random_range(0..nc)
                    ),
                    _ => format!(
                        "UPSERT INTO order_line VALUES ({}, {}, {})",
                        rng.random_range(0..nl),
                        rng.random_range(0..no),
                        rng.random_range(0..7)
                    ),
                };
                // A write to a deleted parent is refused: nothing changes.
                let _ = e.execute_blocking(&w);
            }
            let k = rng.random_range(0..nc);
            let filter = match rng.random_range(0..5) {
                0 => format!("c.c_id = {k}"),
                1 => format!("l.qty > {}", rng.random_range(0..7)),
                2 => format!("c.grp = {}", rng.random_range(0..3)),
                3 => format!("o.o_id BETWEEN {k} AND {}", k + 9),
                _ => "true".to_owned(),
            };
            let q = match round % 6 {
                0 => {
                    format!("SELECT c.c_id, c.name, o.o_id, l.ol_id, l.qty {CHAIN} WHERE {filter}")
                }
                1 => format!(
                    "SELECT c.grp, count(*), sum(l.qty) {CHAIN} WHERE {filter} GROUP BY c.grp"
                ),
                2 => format!("SELECT l.ol_o_id, o.o_c_id, c.name {CHAIN} WHERE {filter}"),
                3 => format!(
                    "SELECT c2.name, l.ol_id {CHAIN} JOIN customer c2 ON c2.grp = c.grp WHERE {filter}"
                ),
                4 => format!(
                    "SELECT c.name, o.total FROM customer c JOIN orders o ON o.o_c_id = c.c_id \
                     JOIN order_line l ON l.ol_o_id = o.o_id WHERE {filter}"
                ),
                _ => format!(
                    "SELECT o.o_id, l.ol_id FROM orders o JOIN order_line l ON l.ol_o_id = o.o_id \
                     JOIN customer c ON c.c_id = o.o_c_id WHERE {filter} AND l.qty < 5"
                ),
            };
            if explain(&e, &q).contains("MaterializedViews") {
                rewritten += 1;
            }
            let (with, without) = both(&e, &q);
            assert_eq!(with, without, "seed {seed} round {round}: {q}");
        }
        assert_eq!(rewritten, 40, "seed {seed}: every shape has a view");
    }
}

/// A statement's SQL with its parameters as literals.
fn with_literals(sql: &str, params: &[silt::Value]) -> String {
    let mut out = sql.to_owned();
    // The highest first, so `$1` does not take the front of `$10`.
    for (i, v) in params.iter().enumerate().rev() {
        let lit = match v {
            silt::Value::Int(n) => n.to_string(),
            silt::Value::Double(x) => format!("{x:?}"),
            silt::Value::String(s) => format!("'{}'", s.replace('\'', "''")),
            silt::Value::Null => "NULL".to_owned(),
            other => panic!("a parameter of another type: {other:?}"),
        };
        out = out.replace(&format!("${}", i + 1), &lit);
    }
    out
}

/// The TPC-W workload on Synergy's design (roots author, customer,
/// country; views chosen from the statements' joins, view indexes from
/// their filters): the joins the views answer are read from them, and
/// every read answers as its joins do.
#[test]
fn tpcw_reads_answer_as_their_joins() {
    use silt::synergy::{ColumnRef, JoinCondition, Query, design};
    use silt::workload::{SplitMix64, tpcw};
    let (_d, e) = engine();
    let db = e.database().clone();
    for def in tpcw::schema() {
        db.create_dataset(def).expect("create");
    }
    let scale = tpcw::Scale::new(30).with_carts(10);
    for (table, rec) in tpcw::records(&scale, 3) {
        db.dataset(table)
            .expect("dataset")
            .insert(rec)
            .expect("insert");
    }
    let statements = tpcw::statements();
    let workload: Vec<Query> = statements
        .iter()
        .map(|s| {
            Query::new(
                s.joins()
                    .iter()
                    .map(|(lt, lc, rt, rc)| JoinCondition::single(lt, lc, rt, rc))
                    .collect(),
                s.filters()
                    .iter()
                    .map(|(t, c)| ColumnRef::new(*t, *c))
                    .collect(),
            )
        })
        .collect();
    let d = design::design(&db, &["author", "customer", "country"], &workload).expect("design");
    let made = design::install(&db, &d).expect("install");
    assert!(!made.is_empty());
    e.invalidate_plans();
    let mut rng = SplitMix64::new(11);
    let mut rewritten = Vec::new();
    for s in statements.iter().filter(|s| s.kind == tpcw::Kind::Read) {
        for _ in 0..3 {
            let q = with_literals(s.sql, &s.params(&scale, &mut rng));
            if explain(&e, &q).contains("MaterializedViews") && !rewritten.contains(&s.name) {
                rewritten.push(s.name);
            }
            let (with, without) = both(&e, &q);
            assert_eq!(with, without, "{}: {q}", s.name);
        }
    }
    // The views the design made answer these joins (Table 4.4's).
    for name in [
        "getBook",
        "getCustomer",
        "doSubjectSearch",
        "getNewProducts",
        "getBestSellers",
        "getMostRecentOrder.order",
        "getMostRecentOrder.lines",
        "getCart",
    ] {
        assert!(
            rewritten.contains(&name),
            "{name} reads no view: {rewritten:?}"
        );
    }
}
