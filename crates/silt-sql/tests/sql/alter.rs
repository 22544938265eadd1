//! #20: an `ALTER TABLE` of several operations takes effect whole or not
//! at all, and writers running beside it never leave a row in the shape it
//! replaced.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use super::common::*;

/// The table's columns, in order.
fn columns(e: &silt_sql::SqlEngine, table: &str) -> Vec<Option<String>> {
    let b = run(
        e,
        &format!(
            "SELECT column_name FROM information_schema.columns WHERE table_name = '{table}' \
             ORDER BY ordinal_position"
        ),
    );
    strings(&b, 0)
}

fn names(v: &[&str]) -> Vec<Option<String>> {
    v.iter().map(|s| Some((*s).to_owned())).collect()
}

#[test]
fn a_statement_of_several_operations_is_all_or_nothing() {
    let (_d, e) = engine();
    run(&e, "CREATE TABLE t (id BIGINT PRIMARY KEY, v BIGINT)");
    run(&e, "INSERT INTO t VALUES (1, 10), (2, 20)");
    // The second operation fails: the first, and its rewrite, are undone.
    let err = fail(
        &e,
        "ALTER TABLE t ADD COLUMN a BIGINT DEFAULT 7, ADD COLUMN b BIGINT NOT NULL",
    );
    assert!(err.contains("b"), "{err}");
    assert_eq!(columns(&e, "t"), names(&["id", "v"]));
    run(&e, "ALTER TABLE t ADD COLUMN a TEXT");
    assert_eq!(
        strings(&run(&e, "SELECT a FROM t ORDER BY id"), 0),
        [None, None],
        "the undone default left nothing in the rows"
    );
    // A unique constraint on values the same statement gives: refused at
    // its commit, nothing of it stays (neither the column nor the index).
    let err = fail(
        &e,
        "ALTER TABLE t ADD COLUMN c BIGINT DEFAULT 5, ADD CONSTRAINT t_c UNIQUE (c)",
    );
    assert!(err.contains("t_c"), "{err}");
    assert_eq!(columns(&e, "t"), names(&["id", "v", "a"]));
    let b = run(
        &e,
        "SELECT count(*) FROM pg_indexes WHERE tablename = 't' AND indexname = 't_c'",
    );
    assert_eq!(ints(&b, 0), [0]);
    // A CHECK the rows fail, after a DROP: the column keeps its values.
    let err = fail(
        &e,
        "ALTER TABLE t DROP COLUMN v, ADD CONSTRAINT small CHECK (id < 2)",
    );
    assert!(err.contains("small"), "{err}");
    assert_eq!(ints(&run(&e, "SELECT v FROM t ORDER BY id"), 0), [10, 20]);
    // Each operation sees what the ones before it did.
    run(
        &e,
        "ALTER TABLE t ADD COLUMN d BIGINT DEFAULT 1, ALTER COLUMN d SET NOT NULL, \
         ADD CONSTRAINT d_pos CHECK (d > 0), DROP COLUMN a",
    );
    assert_eq!(columns(&e, "t"), names(&["id", "v", "d"]));
    assert_eq!(ints(&run(&e, "SELECT d FROM t ORDER BY id"), 0), [1, 1]);
    let err = fail(&e, "INSERT INTO t (id, v, d) VALUES (3, 30, NULL)");
    assert!(err.contains("d"), "{err}");
    let err = fail(&e, "INSERT INTO t (id, v, d) VALUES (3, 30, -1)");
    assert!(err.contains("d_pos"), "{err}");
    // A unique constraint on a column the statement adds without a default:
    // every row is NULL there, which never collides.
    run(
        &e,
        "ALTER TABLE t ADD COLUMN code TEXT, ADD CONSTRAINT t_code UNIQUE (code)",
    );
    run(&e, "UPDATE t SET code = 'a' WHERE id = 1");
    let err = fail(&e, "UPDATE t SET code = 'a' WHERE id = 2");
    assert!(err.contains("t_code"), "{err}");
}

#[test]
fn writers_beside_an_alter_never_keep_the_old_shape() {
    let (_d, e) = engine();
    run(&e, "CREATE TABLE t (id BIGINT PRIMARY KEY, v BIGINT)");
    let values: Vec<String> = (0..3000).map(|i| format!("({i}, {i})")).collect();
    run(&e, &format!("INSERT INTO t VALUES {}", values.join(", ")));
    let e = Arc::new(e);
    let stop = Arc::new(AtomicBool::new(false));
    let written = Arc::new(AtomicU64::new(0));
    let writer = {
        let (e, stop, written) = (e.clone(), stop.clone(), written.clone());
        std::thread::spawn(move || {
            let mut id = 100_000;
            let mut with_v = true;
            while !stop.load(Ordering::Relaxed) {
                id += 2;
                let sql = if with_v {
                    format!("INSERT INTO t (id, v) VALUES ({id}, 1), ({}, 1)", id + 1)
                } else {
                    format!("INSERT INTO t (id) VALUES ({id}), ({})", id + 1)
                };
                match e.execute_blocking(&sql) {
                    Ok(_) => {
                        written.fetch_add(2, Ordering::Relaxed);
                    }
                    // Prepared before the ALTER: refused whole, run again.
                    Err(err)
                        if err
                            .to_string()
                            .contains("run the statement (or transaction) again") => {}
                    // `v` was dropped.
                    Err(err) if with_v && err.to_string().contains('v') => with_v = false,
                    Err(err) => panic!("{sql}: {err}"),
                }
            }
        })
    };
    let wait_for = |n: u64| {
        while written.load(Ordering::Relaxed) < n {
            std::thread::yield_now();
        }
    };
    wait_for(100);
    run(&e, "ALTER TABLE t ADD COLUMN s TEXT NOT NULL DEFAULT 'x'");
    wait_for(written.load(Ordering::Relaxed) + 100);
    run(&e, "ALTER TABLE t DROP COLUMN v");
    wait_for(written.load(Ordering::Relaxed) + 100);
    stop.store(true, Ordering::Relaxed);
    writer.join().expect("writer");
    let n = written.load(Ordering::Relaxed) as i64;
    assert_eq!(ints(&run(&e, "SELECT count(*) FROM t"), 0), [3000 + n]);
    assert_eq!(
        ints(&run(&e, "SELECT count(*) FROM t WHERE s = 'x'"), 0),
        [3000 + n],
        "every row, written before, during or after the ALTER, has s"
    );
    // No row kept a value of the dropped `v` to show when it comes back.
    run(&e, "ALTER TABLE t ADD COLUMN v BIGINT");
    assert_eq!(
        ints(&run(&e, "SELECT count(*) FROM t WHERE v IS NOT NULL"), 0),
        [0]
    );
}
