//! #20: sequences of their own: CREATE / ALTER / DROP SEQUENCE, nextval,
//! currval, setval on them, listed as PostgreSQL lists them, kept across a
//! restart.

use std::sync::Arc;

use silt_sql::SqlEngine;

use super::common::*;

#[test]
fn sequences_of_their_own_count_and_are_listed() {
    let (d, e) = engine();
    run(&e, "CREATE SEQUENCE s");
    run(&e, "CREATE SEQUENCE IF NOT EXISTS s");
    run(
        &e,
        "CREATE SEQUENCE down INCREMENT BY -2 START WITH 10 MINVALUE 0 MAXVALUE 10",
    );
    run(&e, "CREATE SEQUENCE small AS smallint START 32766");
    assert_eq!(ints(&run(&e, "SELECT nextval('s')"), 0), [1]);
    assert_eq!(
        ints(&run(&e, "SELECT nextval('S'), nextval('public.s')"), 0),
        [2]
    );
    assert_eq!(ints(&run(&e, "SELECT nextval('down')"), 0), [10]);
    assert_eq!(ints(&run(&e, "SELECT nextval('down')"), 0), [8]);
    // One value per row of a query.
    run(&e, "CREATE TABLE t (id BIGINT PRIMARY KEY, tag BIGINT)");
    run(&e, "INSERT INTO t VALUES (1, 0), (2, 0), (3, 0)");
    let b = run(&e, "SELECT nextval('s') AS n FROM t ORDER BY n");
    assert_eq!(ints(&b, 0), [4, 5, 6]);
    // An INSERT takes values from one.
    run(&e, "INSERT INTO t SELECT nextval('s') + 100, 1");
    assert_eq!(ints(&run(&e, "SELECT id FROM t WHERE tag = 1"), 0), [107]);
    // Bounds: AS smallint stops at 32767.
    assert_eq!(ints(&run(&e, "SELECT nextval('small')"), 0), [32766]);
    assert_eq!(ints(&run(&e, "SELECT nextval('small')"), 0), [32767]);
    let err = fail(&e, "SELECT nextval('small')");
    assert!(err.contains("small"), "{err}");
    // setval and ALTER SEQUENCE ... RESTART move the counter.
    run(&e, "SELECT setval('s', 500)");
    assert_eq!(ints(&run(&e, "SELECT nextval('s')"), 0), [501]);
    run(&e, "ALTER SEQUENCE s INCREMENT BY 10 RESTART WITH 1000");
    assert_eq!(ints(&run(&e, "SELECT nextval('s')"), 0), [1000]);
    assert_eq!(ints(&run(&e, "SELECT nextval('s')"), 0), [1010]);
    // Listed: pg_class (relkind S), pg_sequences, information_schema.
    let b = run(
        &e,
        "SELECT relname FROM pg_class WHERE relkind = 'S' ORDER BY relname",
    );
    assert_eq!(
        strings(&b, 0),
        [Some("down".into()), Some("s".into()), Some("small".into())]
    );
    let b = run(
        &e,
        "SELECT sequencename, increment_by, max_value FROM pg_sequences WHERE sequencename = 's'",
    );
    assert_eq!(ints(&b, 1), [10]);
    assert_eq!(ints(&b, 2), [i64::MAX]);
    let b = run(
        &e,
        "SELECT maximum_value FROM information_schema.sequences WHERE sequence_name = 'small'",
    );
    assert_eq!(strings(&b, 0), [Some("32767".into())]);
    // Names are shared with tables and views.
    let err = fail(&e, "CREATE SEQUENCE t");
    assert!(err.contains("already exists"), "{err}");
    let err = fail(&e, "CREATE TABLE s (id BIGINT PRIMARY KEY)");
    assert!(err.contains("already exists"), "{err}");
    let err = fail(&e, "CREATE SEQUENCE c CYCLE");
    assert!(err.contains("CYCLE"), "{err}");
    // Kept across a restart, past every value handed out.
    let db = reopen(e, d.path());
    let e = SqlEngine::new(Arc::new(db)).expect("engine");
    let next = ints(&run(&e, "SELECT nextval('s')"), 0)[0];
    assert!(next > 1010, "{next}");
    // Dropped: gone, and the drop of an unknown one names it.
    run(&e, "DROP SEQUENCE s, down");
    let err = fail(&e, "SELECT nextval('s')");
    assert!(err.contains("does not exist"), "{err}");
    let err = fail(&e, "DROP SEQUENCE s");
    assert!(err.contains("\"s\" does not exist"), "{err}");
    run(&e, "DROP SEQUENCE IF EXISTS s");
    run(&e, "ALTER SEQUENCE IF EXISTS s RESTART");
}
