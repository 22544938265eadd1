//! SQL transaction blocks: BEGIN / COMMIT / ROLLBACK / SAVEPOINT over
//! several tables with secondary indexes, sessions isolated from each other,
//! PostgreSQL's failed-block rule, conflicts.

use std::sync::Arc;

use datafusion::arrow::array::{Array, AsArray, RecordBatch};
use datafusion::arrow::datatypes::Int64Type;
use silt::{Database, DbOptions, Durability};
use silt_sql::{SqlEngine, SqlError, SqlSession, TxnStatus};

fn engine() -> (tempfile::TempDir, SqlEngine) {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = Database::open(
        dir.path(),
        DbOptions {
            durability: Durability::Sync,
            ..Default::default()
        },
    )
    .expect("open");
    let e = SqlEngine::new(Arc::new(db)).expect("engine");
    for sql in [
        "CREATE TABLE acc (id BIGINT PRIMARY KEY, bal BIGINT, loc GEOMETRY)",
        "CREATE INDEX acc_bal ON acc USING btree (bal)",
        "CREATE INDEX acc_loc ON acc USING rtree (loc)",
        "CREATE TABLE log (id BIGINT PRIMARY KEY, note VARCHAR)",
        "INSERT INTO acc VALUES (1, 100, ST_Point(1, 1)), (2, 100, ST_Point(2, 2))",
    ] {
        e.execute_blocking(sql).expect(sql);
    }
    (dir, e)
}

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
}

/// Run in a session, panicking on error.
fn run(rt: &tokio::runtime::Runtime, e: &SqlEngine, s: &SqlSession, sql: &str) -> Vec<RecordBatch> {
    rt.block_on(e.execute_in(s, sql))
        .unwrap_or_else(|err| panic!("{sql}\n  failed: {err}"))
}

fn fails(rt: &tokio::runtime::Runtime, e: &SqlEngine, s: &SqlSession, sql: &str) -> SqlError {
    match rt.block_on(e.execute_in(s, sql)) {
        Ok(_) => panic!("{sql}\n  should have failed"),
        Err(err) => err,
    }
}

fn ints(b: &[RecordBatch]) -> Vec<i64> {
    let mut v = Vec::new();
    for x in b {
        let a = x.column(0).as_primitive::<Int64Type>();
        for i in 0..a.len() {
            if !a.is_null(i) {
                v.push(a.value(i));
            }
        }
    }
    v
}

#[test]
fn rollback_undoes_and_commit_publishes_across_tables() {
    let (_d, e) = engine();
    let rt = rt();
    let (a, b) = (SqlSession::new(), SqlSession::new());
    run(&rt, &e, &a, "BEGIN");
    assert_eq!(a.status(), TxnStatus::InTransaction);
    run(&rt, &e, &a, "INSERT INTO acc VALUES (3, 7, ST_Point(3, 3))");
    run(&rt, &e, &a, "INSERT INTO log VALUES (1, 'opened 3')");
    run(&rt, &e, &a, "ROLLBACK");
    assert_eq!(a.status(), TxnStatus::Idle);
    assert!(ints(&run(&rt, &e, &b, "SELECT id FROM acc WHERE id = 3")).is_empty());
    assert!(ints(&run(&rt, &e, &b, "SELECT id FROM log")).is_empty());

    run(
        &rt,
        &e,
        &a,
        "START TRANSACTION ISOLATION LEVEL SERIALIZABLE",
    );
    run(&rt, &e, &a, "INSERT INTO acc VALUES (3, 7, ST_Point(3, 3))");
    run(&rt, &e, &a, "UPDATE acc SET bal = bal - 10 WHERE id = 1");
    run(&rt, &e, &a, "DELETE FROM acc WHERE id = 2");
    run(&rt, &e, &a, "INSERT INTO log VALUES (1, 'moved')");
    // The block sees its own writes, through every access path.
    assert_eq!(
        ints(&run(&rt, &e, &a, "SELECT id FROM acc ORDER BY id")),
        vec![1, 3]
    );
    assert_eq!(
        ints(&run(&rt, &e, &a, "SELECT bal FROM acc WHERE id = 1")),
        vec![90]
    );
    assert_eq!(
        ints(&run(&rt, &e, &a, "SELECT id FROM acc WHERE bal < 50")),
        vec![3]
    );
    assert_eq!(
        ints(&run(
            &rt,
            &e,
            &a,
            "SELECT id FROM acc WHERE ST_Intersects(loc, ST_MakeEnvelope(1.5, 1.5, 3.5, 3.5))"
        )),
        vec![3]
    );
    assert_eq!(
        ints(&run(
            &rt,
            &e,
            &a,
            "SELECT id FROM acc ORDER BY ST_Distance(loc, ST_Point(3, 3)) LIMIT 1"
        )),
        vec![3]
    );
    assert_eq!(ints(&run(&rt, &e, &a, "SELECT count(*) FROM log")), vec![1]);
    // Another session sees none of it.
    assert_eq!(
        ints(&run(&rt, &e, &b, "SELECT id FROM acc ORDER BY id")),
        vec![1, 2]
    );
    assert_eq!(
        ints(&run(&rt, &e, &b, "SELECT bal FROM acc WHERE id = 1")),
        vec![100]
    );
    assert!(ints(&run(&rt, &e, &b, "SELECT id FROM log")).is_empty());
    run(&rt, &e, &a, "COMMIT");
    assert_eq!(
        ints(&run(&rt, &e, &b, "SELECT id FROM acc ORDER BY id")),
        vec![1, 3]
    );
    assert_eq!(
        ints(&run(&rt, &e, &b, "SELECT bal FROM acc WHERE id = 1")),
        vec![90]
    );
    assert_eq!(
        ints(&run(&rt, &e, &b, "SELECT id FROM acc WHERE bal < 50")),
        vec![3]
    );
    assert_eq!(ints(&run(&rt, &e, &b, "SELECT id FROM log")), vec![1]);
}

#[test]
fn a_failed_statement_aborts_the_block_until_rollback() {
    let (_d, e) = engine();
    let rt = rt();
    let s = SqlSession::new();
    run(&rt, &e, &s, "BEGIN");
    run(&rt, &e, &s, "INSERT INTO log VALUES (1, 'a')");
    let err = fails(&rt, &e, &s, "INSERT INTO acc VALUES (1, 5, ST_Point(0, 0))");
    assert!(err.to_string().contains("duplicate"), "{err}");
    assert_eq!(s.status(), TxnStatus::Failed);
    let err = fails(&rt, &e, &s, "SELECT 1");
    assert!(matches!(err, SqlError::TxnAborted), "{err}");
    // COMMIT of a failed block rolls it back.
    run(&rt, &e, &s, "COMMIT");
    assert_eq!(s.status(), TxnStatus::Idle);
    assert!(ints(&run(&rt, &e, &s, "SELECT id FROM log")).is_empty());

    // A script with BEGIN and an error in the middle leaves nothing either.
    let err = fails(
        &rt,
        &e,
        &s,
        "BEGIN; INSERT INTO log VALUES (2, 'b'); INSERT INTO acc VALUES (2, 1, NULL)",
    );
    assert!(err.to_string().contains("duplicate"), "{err}");
    run(&rt, &e, &s, "ROLLBACK");
    assert!(ints(&run(&rt, &e, &s, "SELECT id FROM log")).is_empty());
}

#[test]
fn savepoints() {
    let (_d, e) = engine();
    let rt = rt();
    let s = SqlSession::new();
    let err = fails(&rt, &e, &s, "SAVEPOINT x");
    assert!(err.to_string().contains("transaction blocks"), "{err}");
    run(&rt, &e, &s, "BEGIN");
    run(&rt, &e, &s, "INSERT INTO log VALUES (1, 'kept')");
    run(&rt, &e, &s, "SAVEPOINT s1");
    run(&rt, &e, &s, "INSERT INTO log VALUES (2, 'undone')");
    // A failure after the savepoint: ROLLBACK TO recovers the block.
    fails(&rt, &e, &s, "INSERT INTO log VALUES (1, 'dup')");
    assert_eq!(s.status(), TxnStatus::Failed);
    run(&rt, &e, &s, "ROLLBACK TO SAVEPOINT s1");
    assert_eq!(s.status(), TxnStatus::InTransaction);
    run(&rt, &e, &s, "INSERT INTO log VALUES (3, 'after')");
    run(&rt, &e, &s, "RELEASE SAVEPOINT s1");
    let err = fails(&rt, &e, &s, "ROLLBACK TO s1");
    assert!(err.to_string().contains("savepoint"), "{err}");
    // As in PostgreSQL, that error aborted the block.
    assert_eq!(s.status(), TxnStatus::Failed);
    run(&rt, &e, &s, "ROLLBACK");
    run(
        &rt,
        &e,
        &s,
        "BEGIN; INSERT INTO log VALUES (1, 'kept'); SAVEPOINT s1",
    );
    run(
        &rt,
        &e,
        &s,
        "INSERT INTO log VALUES (2, 'undone'); ROLLBACK TO s1",
    );
    run(&rt, &e, &s, "INSERT INTO log VALUES (3, 'after'); COMMIT");
    assert_eq!(
        ints(&run(&rt, &e, &s, "SELECT id FROM log ORDER BY id")),
        vec![1, 3]
    );
}

#[test]
fn concurrent_update_is_a_conflict() {
    let (_d, e) = engine();
    let rt = rt();
    let (a, b) = (SqlSession::new(), SqlSession::new());
    run(&rt, &e, &a, "BEGIN");
    run(&rt, &e, &a, "UPDATE acc SET bal = bal - 10 WHERE id = 1");
    run(&rt, &e, &a, "INSERT INTO log VALUES (1, 'withdraw')");
    // Another session changes the same row and commits first.
    run(&rt, &e, &b, "UPDATE acc SET bal = bal + 5 WHERE id = 1");
    let err = fails(&rt, &e, &a, "COMMIT");
    match &err {
        SqlError::Silt(silt::Error::Conflict { dataset, key }) => {
            assert_eq!(dataset, "acc");
            assert_eq!(key, "1");
        }
        other => panic!("expected a conflict, got {other:?}"),
    }
    assert_eq!(a.status(), TxnStatus::Idle);
    assert_eq!(
        ints(&run(&rt, &e, &b, "SELECT bal FROM acc WHERE id = 1")),
        vec![105]
    );
    assert!(ints(&run(&rt, &e, &b, "SELECT id FROM log")).is_empty());
    // Retried, it goes through.
    run(
        &rt,
        &e,
        &a,
        "BEGIN; UPDATE acc SET bal = bal - 10 WHERE id = 1; COMMIT",
    );
    assert_eq!(
        ints(&run(&rt, &e, &b, "SELECT bal FROM acc WHERE id = 1")),
        vec![95]
    );
}

/// The engine's own session (`execute`) keeps a block open across calls.
#[test]
fn the_engine_session_spans_calls() {
    let (_d, e) = engine();
    e.execute_blocking("BEGIN").unwrap();
    e.execute_blocking("INSERT INTO log VALUES (9, 'x')")
        .unwrap();
    assert_eq!(e.status(), TxnStatus::InTransaction);
    e.execute_blocking("ROLLBACK").unwrap();
    let b = e.execute_blocking("SELECT id FROM log").unwrap();
    assert!(ints(&b).is_empty());
}

/// INSERT (with ON CONFLICT, and from a query) inside a block goes through
/// the block: invisible outside until COMMIT, undone by ROLLBACK.
#[test]
fn inserts_with_on_conflict_inside_a_block() {
    let (_d, e) = engine();
    let rt = rt();
    let (a, b) = (SqlSession::new(), SqlSession::new());
    run(&rt, &e, &a, "BEGIN");
    run(
        &rt,
        &e,
        &a,
        "INSERT INTO acc VALUES (1, 5, NULL), (4, 40, ST_Point(4, 4)) ON CONFLICT (id) DO UPDATE SET bal = acc.bal + EXCLUDED.bal",
    );
    run(
        &rt,
        &e,
        &a,
        "INSERT INTO acc VALUES (2, 0, NULL) ON CONFLICT DO NOTHING",
    );
    run(
        &rt,
        &e,
        &a,
        "INSERT INTO log SELECT id, 'copied' FROM acc WHERE id >= 4",
    );
    assert_eq!(
        ints(&run(&rt, &e, &a, "SELECT bal FROM acc ORDER BY id")),
        vec![105, 100, 40]
    );
    assert_eq!(ints(&run(&rt, &e, &a, "SELECT id FROM log")), vec![4]);
    assert_eq!(
        ints(&run(&rt, &e, &b, "SELECT bal FROM acc ORDER BY id")),
        vec![100, 100]
    );
    assert!(ints(&run(&rt, &e, &b, "SELECT id FROM log")).is_empty());
    run(&rt, &e, &a, "ROLLBACK");
    assert_eq!(
        ints(&run(&rt, &e, &b, "SELECT bal FROM acc ORDER BY id")),
        vec![100, 100]
    );
    run(
        &rt,
        &e,
        &a,
        "BEGIN; INSERT INTO acc VALUES (1, 5, NULL) ON CONFLICT (id) DO UPDATE SET bal = acc.bal + EXCLUDED.bal",
    );
    // Someone else changes row 1 before the block commits: a conflict.
    run(&rt, &e, &b, "UPDATE acc SET bal = 1 WHERE id = 1");
    let err = fails(&rt, &e, &a, "COMMIT");
    assert!(
        matches!(err, SqlError::Silt(silt::Error::Conflict { .. })),
        "{err}"
    );
    run(
        &rt,
        &e,
        &a,
        "BEGIN; INSERT INTO acc VALUES (1, 5, NULL) ON CONFLICT (id) DO UPDATE SET bal = acc.bal + EXCLUDED.bal; COMMIT",
    );
    assert_eq!(
        ints(&run(&rt, &e, &b, "SELECT bal FROM acc WHERE id = 1")),
        vec![6]
    );
    // A duplicate inside a block fails the block with the plain 23505 error.
    run(&rt, &e, &a, "BEGIN; INSERT INTO log VALUES (7, 'x')");
    let err = fails(&rt, &e, &a, "INSERT INTO log VALUES (8, 'y'), (7, 'dup')");
    assert!(err.to_string().contains("duplicate key"), "{err}");
    assert_eq!(a.status(), TxnStatus::Failed);
    run(&rt, &e, &a, "ROLLBACK");
    assert!(ints(&run(&rt, &e, &b, "SELECT id FROM log")).is_empty());
}
