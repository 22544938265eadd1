//! #20 item 4: UNIQUE constraints and CREATE UNIQUE INDEX, kept by unique
//! btree indexes: refused duplicates name the constraint and the value,
//! nulls never collide, the catalog shows them, they survive a restart.

use std::sync::Arc;

use silt_sql::{SqlEngine, SqlError};

use super::common::*;

#[test]
fn unique_constraints_refuse_duplicates_and_name_them() {
    let (d, e) = engine();
    run(
        &e,
        "CREATE TABLE users (id SERIAL PRIMARY KEY, email TEXT UNIQUE, a BIGINT, b TEXT, \
         CONSTRAINT users_ab UNIQUE (a, b))",
    );
    run(&e, "INSERT INTO users (email, a, b) VALUES ('x@y', 1, 'p')");
    let err = super::fail_err(&e, "INSERT INTO users (email) VALUES ('x@y')");
    assert_eq!(
        err.to_string(),
        "duplicate key value violates unique constraint \"users_email_key\" (Key (email)=(x@y) already exists.)"
    );
    assert!(matches!(err, SqlError::UniqueViolation { .. }), "{err:?}");
    let err = fail(&e, "INSERT INTO users (email, a, b) VALUES ('z@y', 1, 'p')");
    assert!(
        err.contains("\"users_ab\"") && err.contains("(a, b)=(1, p)"),
        "{err}"
    );
    // Nulls are never equal; the other values of a composite may repeat.
    run(
        &e,
        "INSERT INTO users (email, a, b) VALUES (NULL, 1, 'q'), (NULL, 1, NULL), (NULL, 1, NULL)",
    );
    // An UPDATE onto a taken value is refused, onto its own value is not.
    run(&e, "INSERT INTO users (email) VALUES ('w@y')");
    let err = fail(&e, "UPDATE users SET email = 'x@y' WHERE email = 'w@y'");
    assert!(err.contains("users_email_key"), "{err}");
    run(
        &e,
        "UPDATE users SET email = 'x@y', a = 1 WHERE email = 'x@y'",
    );
    // Freed values can be taken.
    run(&e, "DELETE FROM users WHERE email = 'x@y'");
    run(&e, "UPDATE users SET email = 'x@y' WHERE email = 'w@y'");
    // A multi-row INSERT stops at the duplicate, as at a duplicate key.
    let err = fail(&e, "INSERT INTO users (email) VALUES ('m@y'), ('x@y')");
    assert!(
        err.starts_with("row 2 of 2 failed: duplicate key value"),
        "{err}"
    );
    // ON CONFLICT DO NOTHING without a target skips them.
    let b = run(
        &e,
        "INSERT INTO users (email) VALUES ('x@y'), ('n@y') ON CONFLICT DO NOTHING RETURNING email",
    );
    assert_eq!(strings(&b, 0), [Some("n@y".into())]);
    // The catalog shows them as PostgreSQL does.
    let b = run(
        &e,
        "SELECT constraint_name, constraint_type FROM information_schema.table_constraints \
         WHERE table_name = 'users' ORDER BY constraint_name",
    );
    assert_eq!(
        strings(&b, 0),
        [
            Some("users_ab".into()),
            Some("users_email_key".into()),
            Some("users_pkey".into())
        ]
    );
    assert_eq!(
        strings(&b, 1),
        [
            Some("UNIQUE".into()),
            Some("UNIQUE".into()),
            Some("PRIMARY KEY".into())
        ]
    );
    let b = run(
        &e,
        "SELECT pg_get_constraintdef(oid) FROM pg_catalog.pg_constraint WHERE conname = 'users_email_key'",
    );
    assert_eq!(strings(&b, 0), [Some("UNIQUE (email)".into())]);
    // They survive a restart.
    let db = reopen(e, d.path());
    let e = SqlEngine::new(Arc::new(db)).expect("engine");
    let err = fail(&e, "INSERT INTO users (email) VALUES ('n@y')");
    assert!(err.contains("users_email_key"), "{err}");
}

#[test]
fn create_unique_index_checks_what_is_there() {
    let (_d, e) = engine();
    run(
        &e,
        "CREATE TABLE t (id BIGINT PRIMARY KEY, code TEXT, tag TEXT)",
    );
    run(
        &e,
        "INSERT INTO t VALUES (1, 'a', 'x'), (2, 'b', 'x'), (3, NULL, 'y')",
    );
    let err = fail(&e, "CREATE UNIQUE INDEX t_tag ON t (tag)");
    assert!(err.contains("t_tag") && err.contains("(tag)=(x)"), "{err}");
    run(&e, "CREATE UNIQUE INDEX t_code ON t (code)");
    let err = fail(&e, "INSERT INTO t VALUES (4, 'a', 'z')");
    assert!(err.contains("\"t_code\""), "{err}");
    run(&e, "INSERT INTO t VALUES (4, NULL, 'z')");
    // Queries through it see every row once.
    assert_eq!(ints(&run(&e, "SELECT id FROM t WHERE code = 'b'"), 0), [2]);
    let err = fail(&e, "CREATE UNIQUE INDEX t_kw ON t USING keyword (tag)");
    assert!(err.contains("only btree"), "{err}");
    // A transaction block: the statement that breaks it fails (as in
    // PostgreSQL, not the COMMIT), and ROLLBACK leaves nothing.
    run(&e, "BEGIN");
    run(&e, "INSERT INTO t VALUES (5, 'c', 'z')");
    let err = fail(&e, "INSERT INTO t VALUES (6, 'c', 'z')");
    assert!(err.contains("\"t_code\""), "{err}");
    let err = fail(&e, "SELECT 1");
    assert!(err.contains("aborted"), "{err}");
    run(&e, "ROLLBACK");
    assert_eq!(
        ints(&run(&e, "SELECT count(*) FROM t WHERE code = 'c'"), 0),
        [0]
    );
    // Against committed rows, as the block sees them: a value the block
    // freed (moved or deleted) is free; one it did not is taken.
    run(&e, "BEGIN");
    let err = fail(&e, "INSERT INTO t VALUES (7, 'a', 'z')");
    assert!(err.contains("\"t_code\""), "{err}");
    run(&e, "ROLLBACK");
    run(&e, "BEGIN");
    run(&e, "UPDATE t SET code = 'q' WHERE id = 1");
    run(&e, "DELETE FROM t WHERE id = 2");
    run(&e, "INSERT INTO t VALUES (7, 'a', 'z'), (8, 'b', 'z')");
    let err = fail(&e, "UPDATE t SET code = 'q' WHERE id = 7");
    assert!(err.contains("\"t_code\""), "{err}");
    run(&e, "ROLLBACK");
    // A savepoint rolled back takes its values with it.
    run(&e, "BEGIN");
    run(&e, "SAVEPOINT s");
    run(&e, "INSERT INTO t VALUES (9, 'n', 'z')");
    run(&e, "ROLLBACK TO SAVEPOINT s");
    run(&e, "INSERT INTO t VALUES (10, 'n', 'z')");
    run(&e, "COMMIT");
    assert_eq!(ints(&run(&e, "SELECT id FROM t WHERE code = 'n'"), 0), [10]);
}

#[test]
fn alter_table_adds_and_drops_constraints() {
    let (_d, e) = engine();
    run(
        &e,
        "CREATE TABLE t (id BIGINT PRIMARY KEY, code TEXT, n BIGINT)",
    );
    run(&e, "INSERT INTO t VALUES (1, 'a', 1), (2, 'a', 5)");
    // What is there is checked first.
    let err = fail(&e, "ALTER TABLE t ADD CONSTRAINT t_code_u UNIQUE (code)");
    assert!(err.contains("(code)=(a)"), "{err}");
    run(&e, "UPDATE t SET code = 'b' WHERE id = 2");
    run(&e, "ALTER TABLE t ADD CONSTRAINT t_code_u UNIQUE (code)");
    let err = fail(&e, "INSERT INTO t VALUES (3, 'a', 1)");
    assert!(err.contains("\"t_code_u\""), "{err}");
    let err = fail(&e, "ALTER TABLE t ADD CONSTRAINT pos CHECK (n > 2)");
    assert!(err.contains("pos"), "{err}");
    run(&e, "ALTER TABLE t ADD CHECK (n > 0)");
    let err = fail(&e, "INSERT INTO t VALUES (4, 'z', -1)");
    assert!(err.contains("t_check"), "{err}");
    // Dropped constraints stop applying.
    run(&e, "ALTER TABLE t DROP CONSTRAINT t_code_u");
    run(&e, "INSERT INTO t VALUES (3, 'a', 1)");
    run(&e, "ALTER TABLE t DROP CONSTRAINT t_check");
    run(&e, "INSERT INTO t VALUES (5, 'q', -5)");
    let err = fail(&e, "ALTER TABLE t DROP CONSTRAINT nope");
    assert!(err.contains("does not exist"), "{err}");
    run(&e, "ALTER TABLE t DROP CONSTRAINT IF EXISTS nope");
    let err = super::fail_err(&e, "ALTER TABLE t DROP CONSTRAINT t_pkey");
    assert!(matches!(err, SqlError::Unsupported(_)), "{err:?}");
    assert_eq!(ints(&run(&e, "SELECT count(*) FROM t"), 0), [4]);
}
