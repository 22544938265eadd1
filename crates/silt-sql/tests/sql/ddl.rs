//! #20 item 4: views that survive a restart, DEFAULT, TRUNCATE, RETURNING,
//! ALTER TABLE.

use std::sync::Arc;

use silt_sql::SqlEngine;

use super::common::*;

#[test]
fn views_survive_a_restart_and_guard_their_tables() {
    let (d, e) = engine();
    run(
        &e,
        "CREATE TABLE t (id BIGINT PRIMARY KEY, name VARCHAR, n BIGINT)",
    );
    run(
        &e,
        "INSERT INTO t VALUES (1, 'a', 10), (2, 'b', 20), (3, 'c', 30)",
    );
    run(
        &e,
        "CREATE VIEW big AS SELECT id, name FROM t WHERE n >= 20",
    );
    run(
        &e,
        "CREATE VIEW big_names AS SELECT upper(name) AS u FROM big",
    );
    let err = fail(&e, "CREATE VIEW big AS SELECT 1");
    assert!(err.contains("already exists"), "{err}");
    let err = fail(&e, "CREATE VIEW t AS SELECT 1");
    assert!(err.contains("exists"), "{err}");
    // A table that views read cannot go without CASCADE; nothing changes.
    let err = fail(&e, "DROP TABLE t");
    assert!(
        err.contains("view `big`, view `big_names` depend on it"),
        "{err}"
    );
    let err = fail(&e, "DROP VIEW big");
    assert!(err.contains("view `big_names` depends on it"), "{err}");
    assert_eq!(ints(&run(&e, "SELECT id FROM big ORDER BY id"), 0), [2, 3]);

    let db = reopen(e, d.path());
    let e = SqlEngine::new(Arc::new(db)).expect("engine");
    assert_eq!(ints(&run(&e, "SELECT id FROM big ORDER BY id"), 0), [2, 3]);
    assert_eq!(
        strings(&run(&e, "SELECT u FROM big_names ORDER BY u"), 0),
        [Some("B".to_owned()), Some("C".to_owned())]
    );
    // The view reads the table as it is now, not as it was.
    run(&e, "INSERT INTO t VALUES (4, 'd', 40)");
    assert_eq!(
        ints(&run(&e, "SELECT id FROM big ORDER BY id"), 0),
        [2, 3, 4]
    );
    // Replaced, and the replacement is what survives.
    run(
        &e,
        "CREATE OR REPLACE VIEW big AS SELECT id, name FROM t WHERE n >= 40",
    );
    let db = reopen(e, d.path());
    let e = SqlEngine::new(Arc::new(db)).expect("engine");
    assert_eq!(ints(&run(&e, "SELECT id FROM big"), 0), [4]);
    // A refused replacement leaves the old one.
    assert!(fail(&e, "CREATE OR REPLACE VIEW big AS SELECT nope FROM t").contains("nope"));
    assert_eq!(ints(&run(&e, "SELECT id FROM big"), 0), [4]);
    // DROP TABLE ... CASCADE takes the views with it, for good.
    run(&e, "DROP TABLE t CASCADE");
    assert!(e.database().views().is_empty());
    let err = fail(&e, "DROP VIEW big");
    assert!(err.contains("no view named `big`"), "{err}");
    run(&e, "DROP VIEW IF EXISTS big");
    let db = reopen(e, d.path());
    let e = SqlEngine::new(Arc::new(db)).expect("engine");
    assert!(fail(&e, "SELECT * FROM big").contains("not found"));
}

#[test]
fn defaults_fill_what_a_write_leaves_out() {
    let (d, e) = engine();
    run(
        &e,
        "CREATE TABLE t (id BIGINT PRIMARY KEY, status TEXT NOT NULL DEFAULT 'new', \
         n BIGINT DEFAULT -1, at TIMESTAMPTZ DEFAULT now(), day DATE DEFAULT CURRENT_DATE, \
         price NUMERIC(6,2) DEFAULT 9.5, note TEXT)",
    );
    let before = run(&e, "SELECT now() AS t");
    run(&e, "INSERT INTO t (id) VALUES (1)");
    // An explicit NULL stays NULL; DEFAULT in VALUES is the default.
    run(&e, "INSERT INTO t (id, n, price) VALUES (2, NULL, DEFAULT)");
    run(
        &e,
        "INSERT INTO t VALUES (3, 'old', 7, NULL, NULL, NULL, 'x')",
    );
    run(&e, "INSERT INTO t (id, status) SELECT 4, 'sel'");
    let b = run(
        &e,
        "SELECT id, status, n, CAST(price AS VARCHAR) AS p FROM t ORDER BY id",
    );
    assert_eq!(ints(&b, 0), [1, 2, 3, 4]);
    let s = |v: &[&str]| v.iter().map(|x| Some((*x).to_owned())).collect::<Vec<_>>();
    assert_eq!(strings(&b, 1), s(&["new", "new", "old", "sel"]));
    // ints() skips nulls: row 2's n is null.
    assert_eq!(ints(&b, 2), [-1, 7, -1]);
    assert_eq!(
        strings(&b, 3),
        [
            Some("9.50".into()),
            Some("9.50".into()),
            None,
            Some("9.50".into())
        ]
    );
    let b = run(
        &e,
        "SELECT count(*) FROM t WHERE at IS NOT NULL AND day = CURRENT_DATE AND at >= now() - INTERVAL '1 minute'",
    );
    assert_eq!(ints(&b, 0), [3], "{before:?}");
    // NOT NULL with a default: a NULL given is still refused.
    let err = fail(&e, "INSERT INTO t (id, status) VALUES (5, NULL)");
    assert!(err.contains("status"), "{err}");
    // The document API gets the defaults too, and they survive a restart.
    let ds = e.database().dataset("t").expect("t");
    ds.insert(silt::Value::Object(vec![(
        "id".into(),
        silt::Value::Int(6),
    )]))
    .expect("insert");
    let db = reopen(e, d.path());
    let e = SqlEngine::new(Arc::new(db)).expect("engine");
    let b = run(&e, "SELECT status, n FROM t WHERE id = 6");
    assert_eq!(strings(&b, 0), s(&["new"]));
    assert_eq!(ints(&b, 1), [-1]);
    // Defaults that cannot be kept are refused with what can.
    let err = fail(
        &e,
        "CREATE TABLE u (id BIGINT PRIMARY KEY, n BIGINT DEFAULT random())",
    );
    assert!(err.contains("a default is a constant"), "{err}");
    let err = fail(
        &e,
        "CREATE TABLE u (id BIGINT PRIMARY KEY, n BIGINT DEFAULT 'abc')",
    );
    assert!(err.contains("DEFAULT of `n`"), "{err}");
    let err = fail(
        &e,
        "CREATE TABLE u (id BIGINT PRIMARY KEY, n BIGINT DEFAULT now())",
    );
    assert!(err.contains("DEFAULT of `n`"), "{err}");
}

#[test]
fn truncate_empties_at_once_or_with_the_transaction() {
    let (d, e) = engine();
    run(&e, "CREATE TABLE t (id BIGINT PRIMARY KEY, n BIGINT)");
    run(&e, "CREATE TABLE u (id BIGINT PRIMARY KEY)");
    run(&e, "CREATE INDEX t_n ON t (n)");
    run(&e, "CREATE VIEW tv AS SELECT id FROM t WHERE n > 0");
    run(
        &e,
        "INSERT INTO t SELECT value, value % 5 FROM generate_series(1, 500) AS g(value)",
    );
    run(&e, "INSERT INTO u VALUES (1), (2)");
    // A missing table: nothing is emptied.
    assert!(fail(&e, "TRUNCATE t, nope").contains("nope"));
    assert_eq!(ints(&run(&e, "SELECT count(*) FROM t"), 0), [500]);
    // In a transaction block, ROLLBACK brings the rows back.
    run(&e, "BEGIN");
    run(&e, "TRUNCATE TABLE t");
    assert_eq!(ints(&run(&e, "SELECT count(*) FROM t"), 0), [0]);
    run(&e, "ROLLBACK");
    assert_eq!(
        ints(&run(&e, "SELECT count(*) FROM t WHERE n = 3"), 0),
        [100]
    );
    // Outside one, both tables at once; the index and the view follow.
    run(&e, "TRUNCATE t, u");
    assert_eq!(ints(&run(&e, "SELECT count(*) FROM t"), 0), [0]);
    assert_eq!(ints(&run(&e, "SELECT count(*) FROM t WHERE n = 3"), 0), [0]);
    assert_eq!(ints(&run(&e, "SELECT count(*) FROM u"), 0), [0]);
    assert_eq!(ints(&run(&e, "SELECT count(*) FROM tv"), 0), [0]);
    run(&e, "INSERT INTO t VALUES (7, 3)");
    assert_eq!(ints(&run(&e, "SELECT id FROM tv"), 0), [7]);
    assert_eq!(ints(&run(&e, "SELECT id FROM t WHERE n = 3"), 0), [7]);
    let db = reopen(e, d.path());
    let e = SqlEngine::new(Arc::new(db)).expect("engine");
    assert_eq!(ints(&run(&e, "SELECT id FROM t"), 0), [7]);
    assert_eq!(ints(&run(&e, "SELECT id FROM tv"), 0), [7]);
}

fn names(b: &[datafusion::arrow::array::RecordBatch]) -> Vec<String> {
    b[0].schema()
        .fields()
        .iter()
        .map(|f| f.name().clone())
        .collect()
}

#[test]
fn returning_gives_the_rows_as_written() {
    let (_d, e) = engine();
    run(
        &e,
        "CREATE TABLE t (id BIGINT PRIMARY KEY, name TEXT, n BIGINT DEFAULT 5, d DOUBLE)",
    );
    let b = run(
        &e,
        "INSERT INTO t (id, name) VALUES (1, 'a'), (2, 'b') RETURNING id, n, upper(name), n * 2 AS twice",
    );
    assert_eq!(names(&b), ["id", "n", "upper", "twice"]);
    assert_eq!(ints(&b, 0), [1, 2]);
    assert_eq!(ints(&b, 1), [5, 5]);
    assert_eq!(ints(&b, 3), [10, 10]);
    let b = run(&e, "INSERT INTO t VALUES (3, 'c', 1, 2) RETURNING *");
    assert_eq!(names(&b), ["id", "name", "n", "d"]);
    assert_eq!(ints(&b, 2), [1]);
    // DO NOTHING returns the rows inserted only; DO UPDATE the rows as
    // they end up.
    let b = run(
        &e,
        "INSERT INTO t (id, name) VALUES (3, 'dup'), (4, 'd'), (4, 'again') ON CONFLICT DO NOTHING RETURNING id, name",
    );
    assert_eq!(ints(&b, 0), [4]);
    let b = run(
        &e,
        "INSERT INTO t (id, name) VALUES (4, 'z'), (5, 'e') ON CONFLICT (id) DO UPDATE SET n = t.n + 100 RETURNING id, n",
    );
    assert_eq!(ints(&b, 0), [4, 5]);
    assert_eq!(ints(&b, 1), [105, 5]);
    // Nothing inserted: no rows, but the columns.
    let b = run(
        &e,
        "INSERT INTO t (id) VALUES (1) ON CONFLICT DO NOTHING RETURNING id",
    );
    assert_eq!(b.iter().map(|x| x.num_rows()).sum::<usize>(), 0);
    assert_eq!(names(&b), ["id"]);
    // UPDATE returns the new row, DELETE the old one.
    let b = run(
        &e,
        "UPDATE t SET n = n + 1, name = 'u' || name WHERE id <= 2 RETURNING id, name, n",
    );
    assert_eq!(ints(&b, 0), [1, 2]);
    assert_eq!(
        strings(&b, 1),
        [Some("ua".to_owned()), Some("ub".to_owned())]
    );
    assert_eq!(ints(&b, 2), [6, 6]);
    let b = run(&e, "DELETE FROM t WHERE id >= 4 RETURNING id, n");
    assert_eq!(ints(&b, 0), [4, 5]);
    assert_eq!(ints(&b, 1), [105, 5]);
    assert_eq!(ints(&run(&e, "SELECT id FROM t ORDER BY id"), 0), [1, 2, 3]);
    // In a block: what the block wrote is what it returns, and ROLLBACK
    // undoes it.
    run(&e, "BEGIN");
    let b = run(&e, "INSERT INTO t (id, name) VALUES (9, 'tx') RETURNING n");
    assert_eq!(ints(&b, 0), [5]);
    let b = run(&e, "UPDATE t SET n = 0 WHERE id = 9 RETURNING id");
    assert_eq!(ints(&b, 0), [9]);
    let b = run(&e, "DELETE FROM t WHERE n = 0 RETURNING id");
    assert_eq!(ints(&b, 0), [9]);
    run(&e, "ROLLBACK");
    assert_eq!(
        ints(&run(&e, "SELECT count(*) FROM t WHERE id = 9"), 0),
        [0]
    );
    let err = fail(&e, "UPDATE t SET n = 1 RETURNING nope");
    assert!(err.contains("nope"), "{err}");
    // A refused RETURNING list changes nothing.
    assert_eq!(ints(&run(&e, "SELECT n FROM t WHERE id = 1"), 0), [6]);
}

#[test]
fn update_from_and_delete_using_join_other_tables() {
    let (_d, e) = engine();
    run(
        &e,
        "CREATE TABLE acc (id BIGINT PRIMARY KEY, bal BIGINT NOT NULL, owner TEXT)",
    );
    run(
        &e,
        "CREATE TABLE pay (pid BIGINT PRIMARY KEY, acc BIGINT, amount BIGINT)",
    );
    run(
        &e,
        "INSERT INTO acc VALUES (1, 100, 'ann'), (2, 200, 'bob'), (3, 300, 'cy')",
    );
    run(
        &e,
        "INSERT INTO pay VALUES (10, 1, 5), (11, 2, 7), (12, 2, 9), (13, 9, 1)",
    );
    // One payment per account row is applied (PostgreSQL's rule: a row
    // joined twice is changed once).
    let b = run(
        &e,
        "UPDATE acc SET bal = acc.bal - p.amount FROM pay p WHERE p.acc = acc.id AND p.amount < 8",
    );
    assert_eq!(count(&b), 2);
    let b = run(&e, "SELECT bal FROM acc ORDER BY id");
    assert_eq!(ints(&b, 0), [95, 193, 300]);
    let b = run(
        &e,
        "UPDATE acc a SET owner = upper(a.owner) FROM pay WHERE pay.acc = a.id RETURNING a.id, owner",
    );
    let mut ids = ints(&b, 0);
    ids.sort();
    assert_eq!(ids, [1, 2]);
    let err = fail(
        &e,
        "UPDATE acc SET bal = NULL FROM pay WHERE pay.acc = acc.id",
    );
    assert!(err.contains("bal"), "{err}");
    let b = run(
        &e,
        "DELETE FROM acc USING pay WHERE pay.acc = acc.id AND pay.amount > 8",
    );
    assert_eq!(count(&b), 1);
    assert_eq!(ints(&run(&e, "SELECT id FROM acc ORDER BY id"), 0), [1, 3]);
    let b = run(
        &e,
        "DELETE FROM pay AS p USING acc WHERE p.acc = acc.id RETURNING p.pid",
    );
    assert_eq!(ints(&b, 0), [10]);
    let err = fail(&e, "UPDATE acc SET id = 5 FROM pay");
    assert!(err.contains("primary-key"), "{err}");
}

#[test]
fn alter_table_changes_columns_and_their_rows() {
    let (d, e) = engine();
    run(
        &e,
        "CREATE TABLE t (id BIGINT PRIMARY KEY, name TEXT, n BIGINT)",
    );
    run(&e, "CREATE INDEX t_n ON t (n)");
    run(&e, "INSERT INTO t VALUES (1, 'a', 10), (2, 'b', 20)");
    run(&e, "CREATE VIEW tv AS SELECT * FROM t");
    // ADD COLUMN with a DEFAULT: existing rows take it.
    run(&e, "ALTER TABLE t ADD COLUMN qty BIGINT NOT NULL DEFAULT 7");
    assert_eq!(ints(&run(&e, "SELECT qty FROM t ORDER BY id"), 0), [7, 7]);
    run(&e, "INSERT INTO t (id) VALUES (3)");
    assert_eq!(ints(&run(&e, "SELECT qty FROM t WHERE id = 3"), 0), [7]);
    // The view follows the table's columns.
    assert_eq!(
        names(&run(&e, "SELECT * FROM tv")),
        ["id", "name", "n", "qty"]
    );
    // NOT NULL without a default on a table with rows is refused.
    let err = fail(&e, "ALTER TABLE t ADD COLUMN must BIGINT NOT NULL");
    assert!(err.contains("must"), "{err}");
    run(&e, "ALTER TABLE t ADD COLUMN IF NOT EXISTS qty BIGINT");
    run(&e, "ALTER TABLE t ADD COLUMN note TEXT");
    assert_eq!(
        strings(&run(&e, "SELECT note FROM t WHERE id = 1"), 0),
        [None]
    );
    // RENAME moves the values; DROP removes them for good.
    run(&e, "ALTER TABLE t RENAME COLUMN name TO label");
    let b = run(&e, "SELECT label FROM t ORDER BY id");
    assert_eq!(
        strings(&b, 0),
        [Some("a".to_owned()), Some("b".to_owned()), None]
    );
    assert!(fail(&e, "SELECT name FROM t").contains("name"));
    run(&e, "ALTER TABLE t DROP COLUMN label");
    run(&e, "ALTER TABLE t ADD COLUMN label TEXT");
    assert_eq!(
        strings(&run(&e, "SELECT label FROM t WHERE id = 1"), 0),
        [None]
    );
    // Defaults and NOT NULL change on their own.
    run(&e, "ALTER TABLE t ALTER COLUMN note SET DEFAULT 'hi'");
    run(&e, "INSERT INTO t (id) VALUES (4)");
    assert_eq!(
        strings(&run(&e, "SELECT note FROM t WHERE id = 4"), 0),
        [Some("hi".to_owned())]
    );
    run(&e, "ALTER TABLE t ALTER COLUMN note DROP DEFAULT");
    let err = fail(&e, "ALTER TABLE t ALTER COLUMN note SET NOT NULL");
    assert!(err.contains("note"), "{err}");
    run(&e, "UPDATE t SET note = 'x' WHERE note IS NULL");
    run(&e, "ALTER TABLE t ALTER COLUMN note SET NOT NULL");
    assert!(fail(&e, "INSERT INTO t (id) VALUES (5)").contains("note"));
    run(&e, "ALTER TABLE t ALTER COLUMN note DROP NOT NULL");
    run(&e, "INSERT INTO t (id) VALUES (5)");
    // What cannot change is refused, and nothing changes.
    let err = fail(&e, "ALTER TABLE t DROP COLUMN n");
    assert!(err.contains("index `t_n`"), "{err}");
    assert!(fail(&e, "ALTER TABLE t DROP COLUMN id").contains("primary-key"));
    assert!(fail(&e, "ALTER TABLE t ALTER COLUMN n TYPE TEXT").contains("type"));
    assert!(fail(&e, "ALTER TABLE t DROP COLUMN nope").contains("nope"));
    run(&e, "ALTER TABLE t DROP COLUMN IF EXISTS nope");
    run(&e, "ALTER TABLE IF EXISTS nope ADD COLUMN x BIGINT");
    run(&e, "BEGIN");
    assert!(fail(&e, "ALTER TABLE t ADD COLUMN y BIGINT").contains("transaction block"));
    run(&e, "ROLLBACK");
    assert_eq!(
        ints(&run(&e, "SELECT count(*) FROM t WHERE n = 20"), 0),
        [1]
    );
    let db = reopen(e, d.path());
    let e = SqlEngine::new(Arc::new(db)).expect("engine");
    assert_eq!(
        names(&run(&e, "SELECT * FROM t")),
        ["id", "n", "qty", "note", "label"]
    );
    assert_eq!(ints(&run(&e, "SELECT qty FROM tv WHERE id = 2"), 0), [7]);
}

#[test]
fn cursors_fetch_forward_in_pieces() {
    let (_d, e) = engine();
    run(&e, "CREATE TABLE t (id BIGINT PRIMARY KEY, n BIGINT)");
    run(
        &e,
        "INSERT INTO t SELECT value, value * 2 FROM generate_series(1, 20000) AS g(value)",
    );
    let err = fail(&e, "DECLARE c CURSOR FOR SELECT id FROM t");
    assert!(err.contains("transaction blocks"), "{err}");
    run(&e, "BEGIN");
    run(
        &e,
        "DECLARE c NO SCROLL CURSOR WITHOUT HOLD FOR SELECT id, n FROM t WHERE id > 10 ORDER BY id",
    );
    let b = run(&e, "FETCH FORWARD 3 FROM c");
    assert_eq!(ints(&b, 0), [11, 12, 13]);
    assert_eq!(names(&b), ["id", "n"]);
    assert_eq!(ints(&run(&e, "FETCH NEXT FROM c"), 0), [14]);
    // Pieces cross the scan's batches without losing or repeating a row.
    let mut seen = vec![];
    loop {
        let got = ints(&run(&e, "FETCH 4999 IN c"), 0);
        if got.is_empty() {
            break;
        }
        seen.extend(got);
    }
    assert_eq!(seen, (15..=20000).collect::<Vec<i64>>());
    assert!(ints(&run(&e, "FETCH ALL FROM c"), 0).is_empty());
    run(&e, "CLOSE c");
    run(&e, "DECLARE d CURSOR FOR SELECT id FROM t ORDER BY id");
    run(
        &e,
        "DECLARE h CURSOR WITH HOLD FOR SELECT id FROM t ORDER BY id DESC",
    );
    run(&e, "COMMIT");
    // The block's cursor ended with it; the one WITH HOLD lives on.
    assert!(fail(&e, "FETCH 1 FROM d").contains("does not exist"));
    assert!(fail(&e, "FETCH 1 FROM c").contains("does not exist"));
    assert_eq!(ints(&run(&e, "FETCH 2 FROM h"), 0), [20000, 19999]);
    run(&e, "CLOSE ALL");
    assert!(fail(&e, "FETCH 1 FROM h").contains("does not exist"));
    assert!(fail(&e, "DECLARE s SCROLL CURSOR WITH HOLD FOR SELECT 1").contains("forward"));
}

#[test]
fn check_constraints_refuse_rows_that_fail_them() {
    let (d, e) = engine();
    run(
        &e,
        "CREATE TABLE t (id BIGINT PRIMARY KEY, qty BIGINT CHECK (qty >= 0), lo BIGINT, hi BIGINT, \
         name TEXT, CONSTRAINT ordered CHECK (lo <= hi), CHECK (length(name) < 5))",
    );
    let def = e.database().dataset("t").expect("t").def();
    let names: Vec<&str> = def.checks.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["t_qty_check", "ordered", "t_check"]);
    run(&e, "INSERT INTO t VALUES (1, 5, 1, 2, 'ab')");
    // NULL passes a CHECK.
    run(&e, "INSERT INTO t (id) VALUES (2)");
    let err = fail(&e, "INSERT INTO t VALUES (3, -1, 1, 2, 'x')");
    assert!(err.contains("t_qty_check"), "{err}");
    let err = fail(&e, "INSERT INTO t VALUES (3, 1, 5, 2, 'x')");
    assert!(err.contains("ordered"), "{err}");
    let err = fail(&e, "UPDATE t SET name = 'toolong' WHERE id = 1");
    assert!(err.contains("t_check"), "{err}");
    assert!(
        fail(
            &e,
            "INSERT INTO t VALUES (1, 1, 1, 1, 'a') ON CONFLICT (id) DO UPDATE SET qty = -5"
        )
        .contains("t_qty_check")
    );
    // In a block the failure aborts the block; nothing of it stays.
    run(&e, "BEGIN");
    run(&e, "INSERT INTO t VALUES (4, 1, 1, 1, 'a')");
    assert!(fail(&e, "INSERT INTO t VALUES (5, -1, 1, 1, 'a')").contains("t_qty_check"));
    run(&e, "ROLLBACK");
    assert_eq!(ints(&run(&e, "SELECT id FROM t ORDER BY id"), 0), [1, 2]);
    assert_eq!(ints(&run(&e, "SELECT qty FROM t WHERE id = 1"), 0), [5]);
    // A column a constraint reads stays; a constraint that cannot be kept
    // is refused when the table is made.
    assert!(fail(&e, "ALTER TABLE t DROP COLUMN qty").contains("t_qty_check"));
    let err = fail(
        &e,
        "CREATE TABLE u (id BIGINT PRIMARY KEY, n BIGINT CHECK (nope > 0))",
    );
    assert!(err.contains("nope"), "{err}");
    let err = fail(
        &e,
        "CREATE TABLE u (id BIGINT PRIMARY KEY, n BIGINT CHECK (n + 1))",
    );
    assert!(err.contains("boolean"), "{err}");
    // The document API is checked too, and the constraints survive a restart.
    let ds = e.database().dataset("t").expect("t");
    let bad = silt::Value::Object(vec![
        ("id".into(), silt::Value::Int(9)),
        ("qty".into(), silt::Value::Int(-3)),
    ]);
    assert!(matches!(
        ds.insert(bad.clone()),
        Err(silt::Error::CheckViolation { .. })
    ));
    let db = reopen(e, d.path());
    let e = SqlEngine::new(Arc::new(db)).expect("engine");
    assert!(fail(&e, "INSERT INTO t VALUES (9, -1, 1, 1, 'a')").contains("t_qty_check"));
    run(&e, "INSERT INTO t VALUES (9, 1, 1, 1, 'a')");
}

#[test]
fn a_table_with_a_ttl_hides_and_sweeps_expired_rows() {
    let (_d, e) = engine();
    // A logical clock: rows live 100 past their time `t`.
    run(
        &e,
        "CREATE TABLE ev (id BIGINT PRIMARY KEY, t BIGINT, g BIGINT) \
         WITH (ttl_time = 't', ttl_after = '100', memory_budget = '2MB')",
    );
    run(&e, "CREATE INDEX ev_g ON ev (g)");
    run(&e, "CREATE INDEX ev_t ON ev (t)");
    run(
        &e,
        "INSERT INTO ev VALUES (1, 0, 1), (2, 50, 1), (3, 120, 2), (4, 210, 2)",
    );
    // The clock is 210: rows of time 110 or less are gone from every read.
    let ids = |sql: &str| ints(&run(&e, sql), 0);
    assert_eq!(ids("SELECT id FROM ev ORDER BY id"), vec![3, 4]);
    assert_eq!(count_star(&e, "SELECT count(*) AS count FROM ev"), 2);
    assert_eq!(ids("SELECT id FROM ev WHERE id = 1"), Vec::<i64>::new());
    assert_eq!(ids("SELECT id FROM ev WHERE g = 1"), Vec::<i64>::new());
    // An insert over an expired row is not a duplicate.
    run(&e, "INSERT INTO ev VALUES (1, 205, 1)");
    assert_eq!(ids("SELECT id FROM ev WHERE g = 1"), vec![1]);
    let rep = e.database().sweep_expired("ev").expect("sweep");
    assert_eq!((rep.path.as_str(), rep.expired), ("index ev_t", 1));
    // Bad options say what is wrong.
    let err = fail(
        &e,
        "CREATE TABLE bad (id BIGINT PRIMARY KEY, t BIGINT) WITH (ttl_time = 't', ttl_after = '1 day')",
    );
    assert!(err.contains("give a number"), "{err}");
    let err = fail(
        &e,
        "CREATE TABLE bad (id BIGINT PRIMARY KEY, t VARCHAR) WITH (ttl_expiry = 't', ttl_clock = 'unix_s')",
    );
    assert!(
        err.contains("a time must be int, timestamp or timestamptz"),
        "{err}"
    );
    // A timestamp column under the wall clock, with an interval.
    run(
        &e,
        "CREATE TABLE s (id BIGINT PRIMARY KEY, at TIMESTAMP) WITH (ttl_time = 'at', ttl_after = '1 day')",
    );
    run(
        &e,
        "INSERT INTO s VALUES (1, TIMESTAMP '2001-01-01 00:00:00'), (2, now() + INTERVAL '1 hour')",
    );
    assert_eq!(ids("SELECT id FROM s"), vec![2]);
    let def = e.database().dataset("s").expect("s").def();
    assert_eq!(def.ttl.as_ref().and_then(|t| t.after), Some(86_400_000_000));
    // ALTER TABLE changes the ttl: a longer life shows the old row again,
    // `ttl = 'off'` shows everything, and a plain table gets one.
    run(&e, "ALTER TABLE s SET (ttl_after = '100000 days')");
    assert_eq!(ids("SELECT id FROM s ORDER BY id"), vec![1, 2]);
    run(
        &e,
        "ALTER TABLE s SET (ttl_after = '1 hour', ttl_grace = '1 minute')",
    );
    assert_eq!(ids("SELECT id FROM s"), vec![2]);
    let t = e
        .database()
        .dataset("s")
        .expect("s")
        .def()
        .ttl
        .clone()
        .expect("ttl");
    assert_eq!((t.after, t.grace), (Some(3_600_000_000), 60_000_000));
    run(&e, "ALTER TABLE s SET (ttl = 'off')");
    assert_eq!(ids("SELECT id FROM s ORDER BY id"), vec![1, 2]);
    run(
        &e,
        "CREATE TABLE plain (id BIGINT PRIMARY KEY, until BIGINT)",
    );
    run(&e, "INSERT INTO plain VALUES (1, 10), (2, 1000)");
    run(
        &e,
        "ALTER TABLE plain SET (ttl_expiry = 'until', ttl_clock = 'unix_s')",
    );
    assert_eq!(ids("SELECT id FROM plain"), Vec::<i64>::new());
    let err = fail(&e, "ALTER TABLE plain SET (fillfactor = 70)");
    assert!(err.contains("only the ttl options"), "{err}");
    let err = fail(&e, "ALTER TABLE plain SET (ttl_expiry = 'nope')");
    assert!(err.contains("not a declared field"), "{err}");
}

fn count_star(e: &SqlEngine, sql: &str) -> u64 {
    let b = run(e, sql);
    b.iter()
        .map(|x| {
            use datafusion::arrow::array::AsArray;
            x.column(0)
                .as_primitive::<datafusion::arrow::datatypes::Int64Type>()
                .iter()
                .flatten()
                .sum::<i64>() as u64
        })
        .sum()
}

#[test]
fn tables_keep_their_levels_in_object_storage() {
    silt_objstore::install();
    let (d, e) = engine();
    let url = format!(
        "memory://{}",
        d.path().file_name().unwrap().to_string_lossy()
    );
    run(
        &e,
        &format!(
            "CREATE TABLE cold (id BIGINT PRIMARY KEY, v BIGINT) WITH (remote = '{url}', remote_level = 0)"
        ),
    );
    run(
        &e,
        "INSERT INTO cold SELECT value, value * 2 FROM generate_series(1, 3000)",
    );
    {
        let db = e.database();
        db.dataset("cold").unwrap().flush().unwrap();
        let def = db.dataset("cold").unwrap().def();
        assert_eq!(
            def.remote.as_ref().map(|r| r.url.as_str()),
            Some(url.as_str())
        );
        assert!(
            !std::fs::read_dir(d.path().join("cold/p0/primary"))
                .unwrap()
                .flatten()
                .any(|f| f.file_name().to_string_lossy().ends_with(".sc")),
            "component files on the local disk"
        );
    }
    let db = reopen(e, d.path());
    let e = SqlEngine::new(Arc::new(db)).unwrap();
    assert_eq!(
        count_star(&e, "SELECT count(*) FROM cold WHERE v > 5000"),
        500
    );
    assert_eq!(
        ints(&run(&e, "SELECT v FROM cold WHERE id = 77"), 0),
        vec![154]
    );
    let err = fail(
        &e,
        "CREATE TABLE bad (id BIGINT PRIMARY KEY) WITH (remote_level = 1)",
    );
    assert!(err.contains("remote_level needs remote"), "{err}");
    let err = fail(
        &e,
        "CREATE TABLE bad (id BIGINT PRIMARY KEY) WITH (remote = 'nowhere')",
    );
    assert!(err.contains("not an object storage URL"), "{err}");
}
