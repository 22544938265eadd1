//! #22 item 1: foreign keys in SQL: REFERENCES and FOREIGN KEY in CREATE
//! TABLE and ALTER TABLE, enforced on insert, update and delete with
//! PostgreSQL's words, ON DELETE CASCADE, inside transaction blocks, and
//! shown by the catalog as PostgreSQL shows them.

use silt_sql::SqlError;

use super::common::*;

fn schema(e: &silt_sql::SqlEngine) {
    run(
        e,
        "CREATE TABLE customer (c_id BIGINT PRIMARY KEY, name TEXT)",
    );
    run(
        e,
        "CREATE TABLE orders (o_id BIGINT PRIMARY KEY, o_c_id BIGINT REFERENCES customer, total DOUBLE)",
    );
    run(
        e,
        "CREATE TABLE order_line (ol_id BIGINT PRIMARY KEY, ol_o_id BIGINT NOT NULL, qty BIGINT, \
         CONSTRAINT ol_order FOREIGN KEY (ol_o_id) REFERENCES orders (o_id) ON DELETE CASCADE)",
    );
}

#[test]
fn references_are_enforced_in_postgres_words() {
    let (_d, e) = engine();
    schema(&e);
    let err = super::fail_err(&e, "INSERT INTO orders VALUES (1, 7, 10.0)");
    assert!(
        matches!(err.root(), SqlError::ForeignKeyViolation { .. }),
        "{err:?}"
    );
    assert_eq!(
        err.root().message(),
        "insert or update on table \"orders\" violates foreign key constraint \"orders_o_c_id_fkey\""
    );
    assert_eq!(
        err.detail().as_deref(),
        Some("Key (o_c_id)=(7) is not present in table \"customer\".")
    );
    run(&e, "INSERT INTO customer VALUES (7, 'ann'), (8, 'bob')");
    run(&e, "INSERT INTO orders VALUES (1, 7, 10.0), (2, NULL, 1.0)");
    run(&e, "INSERT INTO order_line VALUES (10, 1, 2), (11, 1, 3)");
    // UPDATE onto a missing parent changes nothing.
    let err = fail(&e, "UPDATE orders SET o_c_id = 9 WHERE o_id = 1");
    assert!(err.contains("orders_o_c_id_fkey"), "{err}");
    run(&e, "UPDATE orders SET o_c_id = 8 WHERE o_id = 1");
    // RESTRICT (the default, NO ACTION).
    let err = super::fail_err(&e, "DELETE FROM customer WHERE c_id = 8");
    assert_eq!(
        err.root().message(),
        "update or delete on table \"customer\" violates foreign key constraint \"orders_o_c_id_fkey\" on table \"orders\""
    );
    assert_eq!(
        err.detail().as_deref(),
        Some("Key (c_id)=(8) is still referenced from table \"orders\".")
    );
    // CASCADE.
    run(&e, "DELETE FROM orders WHERE o_id = 1");
    assert_eq!(count_star(&e, "SELECT count(*) FROM order_line"), 0);
    run(&e, "DELETE FROM customer WHERE c_id = 8");
    // A key must name the referenced table's primary key, and the types
    // must agree.
    let err = fail(
        &e,
        "CREATE TABLE x (id BIGINT PRIMARY KEY, n TEXT REFERENCES customer (name))",
    );
    assert!(err.contains("not its primary key"), "{err}");
    let err = fail(
        &e,
        "CREATE TABLE x (id BIGINT PRIMARY KEY, c TEXT REFERENCES customer)",
    );
    assert!(err.contains("declare them alike"), "{err}");
    let err = fail(
        &e,
        "CREATE TABLE x (id BIGINT PRIMARY KEY, c BIGINT REFERENCES nowhere)",
    );
    assert!(err.contains("\"nowhere\" does not exist"), "{err}");
    let err = fail(
        &e,
        "CREATE TABLE x (id BIGINT PRIMARY KEY, c BIGINT REFERENCES customer ON DELETE SET NULL)",
    );
    assert!(err.contains("ON DELETE SET NULL"), "{err}");
    // A table may reference itself.
    run(
        &e,
        "CREATE TABLE emp (id BIGINT PRIMARY KEY, boss BIGINT REFERENCES emp ON DELETE CASCADE)",
    );
    run(&e, "INSERT INTO emp VALUES (1, NULL), (2, 1), (3, 2)");
    fail(&e, "INSERT INTO emp VALUES (4, 9)");
    run(&e, "DELETE FROM emp WHERE id = 1");
    assert_eq!(count_star(&e, "SELECT count(*) FROM emp"), 0);
}

#[test]
fn blocks_check_at_commit_and_cascade_at_delete() {
    let (_d, e) = engine();
    schema(&e);
    let s = silt_sql::SqlSession::new();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let q = |s: &silt_sql::SqlSession, sql: &str| rt.block_on(e.execute_in(s, sql));
    // Children before their parent, in one block.
    q(&s, "BEGIN").unwrap();
    q(&s, "INSERT INTO order_line VALUES (1, 5, 1)").unwrap();
    q(&s, "INSERT INTO orders VALUES (5, 3, 0.0)").unwrap();
    q(&s, "INSERT INTO customer VALUES (3, 'c')").unwrap();
    q(&s, "COMMIT").unwrap();
    assert_eq!(count_star(&e, "SELECT count(*) FROM order_line"), 1);
    // A parent deleted in a block whose children stay fails the COMMIT,
    // and nothing of the block is kept.
    q(&s, "BEGIN").unwrap();
    q(&s, "INSERT INTO customer VALUES (4, 'd')").unwrap();
    q(&s, "DELETE FROM customer WHERE c_id = 3").unwrap();
    let err = q(&s, "COMMIT").unwrap_err();
    assert!(err.to_string().contains("still referenced"), "{err}");
    assert_eq!(count_star(&e, "SELECT count(*) FROM customer"), 1);
}

#[test]
fn alter_drop_and_the_catalog() {
    let (_d, e) = engine();
    schema(&e);
    run(
        &e,
        "CREATE TABLE notes (id BIGINT PRIMARY KEY, cust BIGINT)",
    );
    run(&e, "INSERT INTO customer VALUES (1, 'a')");
    run(&e, "INSERT INTO notes VALUES (1, 1), (2, 5)");
    let err = fail(
        &e,
        "ALTER TABLE notes ADD CONSTRAINT notes_cust FOREIGN KEY (cust) REFERENCES customer",
    );
    assert!(err.contains("(cust)=(5)"), "{err}");
    run(&e, "DELETE FROM notes WHERE id = 2");
    run(
        &e,
        "ALTER TABLE notes ADD CONSTRAINT notes_cust FOREIGN KEY (cust) REFERENCES customer (c_id) ON DELETE CASCADE",
    );
    fail(&e, "INSERT INTO notes VALUES (3, 5)");
    // The catalog, as psql's \d reads it.
    let b = run(
        &e,
        "SELECT conname, contype, pg_get_constraintdef(oid), confdeltype FROM pg_constraint \
         WHERE contype = 'f' ORDER BY conname",
    );
    assert_eq!(
        strings(&b, 0),
        [
            Some("notes_cust".into()),
            Some("ol_order".into()),
            Some("orders_o_c_id_fkey".into())
        ]
    );
    assert_eq!(
        strings(&b, 2),
        [
            Some("FOREIGN KEY (cust) REFERENCES customer(c_id) ON DELETE CASCADE".into()),
            Some("FOREIGN KEY (ol_o_id) REFERENCES orders(o_id) ON DELETE CASCADE".into()),
            Some("FOREIGN KEY (o_c_id) REFERENCES customer(c_id)".into()),
        ]
    );
    let b = run(
        &e,
        "SELECT c.relname FROM pg_constraint k JOIN pg_class c ON c.oid = k.confrelid \
         WHERE k.conname = 'ol_order'",
    );
    assert_eq!(strings(&b, 0), [Some("orders".into())]);
    // A referenced table is not dropped or emptied.
    let err = fail(&e, "DROP TABLE customer");
    assert!(
        err.contains("foreign key `orders_o_c_id_fkey` of `orders`"),
        "{err}"
    );
    fail(&e, "TRUNCATE customer");
    // DROP CONSTRAINT, then CASCADE drops the others' keys.
    run(&e, "ALTER TABLE notes DROP CONSTRAINT notes_cust");
    run(&e, "INSERT INTO notes VALUES (3, 5)");
    run(&e, "DROP TABLE customer CASCADE");
    run(&e, "INSERT INTO orders VALUES (9, 99, 0.0)");
    // Tables of one DROP go in any order.
    run(&e, "DROP TABLE orders, order_line");
}

/// #22 item 4: `CREATE MATERIALIZED VIEW` of a join along foreign keys,
/// kept by every write of its tables (no REFRESH), read as a table.
#[test]
fn materialized_join_views_stay_fresh() {
    let (_d, e) = engine();
    schema(&e);
    run(&e, "INSERT INTO customer VALUES (1, 'ann'), (2, 'bob')");
    run(&e, "INSERT INTO orders VALUES (10, 1, 5.0), (11, 2, 7.0)");
    run(
        &e,
        "INSERT INTO order_line VALUES (100, 10, 1), (101, 10, 2), (102, 11, 3)",
    );
    run(
        &e,
        "CREATE MATERIALIZED VIEW col AS SELECT c.c_id, c.name, o.o_id, l.ol_id, l.qty AS n \
         FROM customer c JOIN orders o ON o.o_c_id = c.c_id JOIN order_line l ON l.ol_o_id = o.o_id",
    );
    let q = "SELECT name, ol_id, n FROM col ORDER BY ol_id";
    let b = run(&e, q);
    assert_eq!(
        strings(&b, 0),
        [Some("ann".into()), Some("ann".into()), Some("bob".into())]
    );
    // Writes of any table of the chain keep it.
    run(&e, "UPDATE customer SET name = 'anne' WHERE c_id = 1");
    run(&e, "INSERT INTO order_line VALUES (103, 11, 4)");
    run(&e, "UPDATE orders SET o_c_id = 1 WHERE o_id = 11");
    run(&e, "DELETE FROM order_line WHERE ol_id = 100");
    let b = run(&e, q);
    assert_eq!(ints(&b, 1), [101, 102, 103]);
    assert_eq!(strings(&b, 0), vec![Some("anne".to_owned()); 3]);
    // Every row agrees with the join of the tables.
    assert_eq!(
        count_star(
            &e,
            "SELECT count(*) FROM col v JOIN order_line l ON l.ol_id = v.ol_id JOIN orders o \
             ON o.o_id = l.ol_o_id JOIN customer c ON c.c_id = o.o_c_id AND c.name = v.name \
             AND o.o_id = v.o_id AND l.qty = v.n",
        ),
        3
    );
    assert_eq!(count_star(&e, "SELECT count(*) FROM col"), 3);
    // A view is written by its tables only.
    let err = fail(&e, "INSERT INTO col VALUES (1, 'x', 1, 1, 1)");
    assert!(err.contains("materialized view"), "{err}");
    // Joins that are not a chain of foreign keys are refused.
    let err = fail(
        &e,
        "CREATE MATERIALIZED VIEW bad AS SELECT c.name, o.o_id FROM customer c JOIN orders o ON o.o_id = c.c_id",
    );
    assert!(err.contains("not on a foreign key"), "{err}");
    let err = fail(&e, "DROP TABLE order_line");
    assert!(err.contains("col"), "{err}");
    // A column the view copies keeps its name and type; others change.
    let err = fail(&e, "ALTER TABLE customer DROP COLUMN name");
    assert!(
        err.contains("materialized view `col` copies field `name`"),
        "{err}"
    );
    let err = fail(&e, "ALTER TABLE customer RENAME COLUMN name TO nom");
    assert!(err.contains("drop the view first"), "{err}");
    run(&e, "ALTER TABLE orders ADD COLUMN note TEXT");
    run(&e, "ALTER TABLE orders DROP COLUMN total");
    run(&e, "DROP MATERIALIZED VIEW col");
    run(&e, "DROP TABLE order_line");
}
