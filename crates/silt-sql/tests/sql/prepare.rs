//! #20: SQL's PREPARE / EXECUTE / DEALLOCATE are each session's own, as in
//! PostgreSQL, and a prepared statement follows the table's changes.

use datafusion::arrow::array::RecordBatch;
use silt_sql::{SqlEngine, SqlError, SqlSession};

use super::common::*;

fn exec(e: &SqlEngine, s: &SqlSession, sql: &str) -> Result<Vec<RecordBatch>, SqlError> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
        .block_on(e.execute_in(s, sql))
}

fn ok(e: &SqlEngine, s: &SqlSession, sql: &str) -> Vec<RecordBatch> {
    exec(e, s, sql).unwrap_or_else(|err| panic!("{sql}: {err}"))
}

#[test]
fn prepared_statements_belong_to_their_session() {
    let (_d, e) = engine();
    run(&e, "CREATE TABLE t (id BIGINT PRIMARY KEY, v TEXT)");
    run(&e, "INSERT INTO t VALUES (1, 'a'), (2, 'b'), (3, 'c')");
    let (a, b) = (SqlSession::new(), SqlSession::new());
    // The same name in two sessions, for two statements.
    ok(
        &e,
        &a,
        "PREPARE q (BIGINT) AS SELECT v FROM t WHERE id = $1",
    );
    ok(&e, &b, "PREPARE q AS SELECT count(*) FROM t WHERE id > $1");
    assert_eq!(strings(&ok(&e, &a, "EXECUTE q (2)"), 0), [Some("b".into())]);
    assert_eq!(ints(&ok(&e, &b, "EXECUTE q (1)"), 0), [2]);
    // Parameters may be expressions that fold to a constant.
    assert_eq!(
        strings(&ok(&e, &a, "EXECUTE q (1 + 2)"), 0),
        [Some("c".into())]
    );
    let err = exec(&e, &a, "EXECUTE q (1, 2)").unwrap_err();
    assert!(
        err.to_string().contains("takes 1 parameters, 2 given"),
        "{err}"
    );
    // A name taken in the session is refused; not in another.
    let err = exec(&e, &a, "PREPARE q AS SELECT 1").unwrap_err();
    assert!(matches!(err, SqlError::DuplicatePrepared(_)), "{err}");
    // Another session (or none) does not see them.
    let c = SqlSession::new();
    let err = exec(&e, &c, "EXECUTE q (1)").unwrap_err();
    assert!(matches!(err, SqlError::NoSuchPrepared(_)), "{err}");
    assert!(e.execute_blocking("EXECUTE q (1)").is_err());
    // DEALLOCATE drops one; DEALLOCATE ALL drops the session's.
    ok(&e, &a, "DEALLOCATE q");
    let err = exec(&e, &a, "DEALLOCATE q").unwrap_err();
    assert!(matches!(err, SqlError::NoSuchPrepared(_)), "{err}");
    ok(&e, &a, "PREPARE q AS SELECT 1");
    ok(&e, &a, "PREPARE r AS SELECT 2");
    ok(&e, &a, "DEALLOCATE ALL");
    assert!(exec(&e, &a, "EXECUTE r").is_err());
    ok(&e, &a, "PREPARE r AS SELECT 2");
    a.deallocate_all();
    assert!(exec(&e, &a, "EXECUTE r").is_err());
    assert_eq!(ints(&ok(&e, &b, "EXECUTE q (0)"), 0), [3]);
    // A statement prepared before an ALTER TABLE sees the new column.
    ok(&e, &b, "PREPARE w AS SELECT * FROM t WHERE id = $1");
    run(&e, "ALTER TABLE t ADD COLUMN n BIGINT DEFAULT 7");
    let got = ok(&e, &b, "EXECUTE w (1)");
    assert_eq!(got[0].num_columns(), 3);
    assert_eq!(ints(&got, 2), [7]);
}
