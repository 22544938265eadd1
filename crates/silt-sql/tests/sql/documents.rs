//! #20 item 4: the document view. `documents.<table>` is the table's
//! columns plus `doc`, a jsonb object of each record's undeclared fields
//! (as records written through the CLI, Python or HTTP keep them), usable
//! with `->`, `->>` and `@>`; it is read-only, and the plain table is
//! unchanged.

use silt::Value;

use crate::common::*;

fn rec(fields: Vec<(&str, Value)>) -> Value {
    Value::Object(fields.into_iter().map(|(k, v)| (k.to_owned(), v)).collect())
}

#[test]
fn undeclared_fields_are_one_json_column() {
    let (_d, e) = engine();
    run(&e, "CREATE TABLE t (id BIGINT PRIMARY KEY, name TEXT)");
    let ds = e.database().dataset("t").expect("dataset");
    ds.insert(rec(vec![
        ("id", Value::Int(1)),
        ("name", Value::String("a".into())),
        ("color", Value::String("red".into())),
        ("size", Value::Int(3)),
        (
            "tags",
            Value::Array(vec![Value::String("x".into()), Value::String("y".into())]),
        ),
    ]))
    .expect("insert");
    ds.insert(rec(vec![
        ("id", Value::Int(2)),
        ("name", Value::String("b".into())),
    ]))
    .expect("insert");
    run(&e, "INSERT INTO t VALUES (3, 'c')");
    ds.flush().expect("flush");
    ds.insert(rec(vec![
        ("id", Value::Int(4)),
        ("color", Value::String("blue".into())),
    ]))
    .expect("insert");

    // The plain table is as before: declared columns only.
    let b = run(&e, "SELECT * FROM t ORDER BY id");
    assert_eq!(b[0].num_columns(), 2);

    let b = run(&e, "SELECT id, name, doc FROM documents.t ORDER BY id");
    assert_eq!(ints(&b, 0), [1, 2, 3, 4]);
    let docs = strings(&b, 2);
    let first: serde_json::Value =
        serde_json::from_str(docs[0].as_deref().expect("a document")).expect("json");
    assert_eq!(
        first,
        serde_json::json!({"color": "red", "size": 3, "tags": ["x", "y"]})
    );
    assert_eq!(docs[1], None, "no undeclared fields: null");
    assert_eq!(docs[2], None);
    assert_eq!(strings(&b, 1)[3], None, "a declared field left out is null");

    // JSON operators on the column.
    let b = run(
        &e,
        "SELECT id FROM documents.t WHERE doc->>'color' = 'blue'",
    );
    assert_eq!(ints(&b, 0), [4]);
    let b = run(
        &e,
        "SELECT id FROM documents.t WHERE doc @> '{\"size\": 3}' ORDER BY id",
    );
    assert_eq!(ints(&b, 0), [1]);
    assert_eq!(
        count_star(&e, "SELECT count(*) FROM documents.t WHERE doc IS NOT NULL"),
        2
    );
    // A key lookup through the view uses the primary key.
    let b = run(&e, "SELECT doc->>'size' FROM documents.t WHERE id = 1");
    assert_eq!(strings(&b, 0), [Some("3".to_owned())]);

    // Read-only, with a message that says where to write.
    for sql in [
        "INSERT INTO documents.t VALUES (9, 'z', NULL)",
        "DELETE FROM documents.t WHERE id = 1",
        "UPDATE documents.t SET name = 'q' WHERE id = 1",
        "DROP TABLE documents.t",
    ] {
        let err = fail(&e, sql);
        assert!(err.contains("read-only"), "{sql}: {err}");
    }
    assert_eq!(
        count_star(&e, "SELECT count(*) FROM t"),
        4,
        "nothing changed"
    );
}

#[test]
fn the_document_column_steps_aside_for_a_declared_doc() {
    let (_d, e) = engine();
    run(&e, "CREATE TABLE t (id BIGINT PRIMARY KEY, doc TEXT)");
    let ds = e.database().dataset("t").expect("dataset");
    ds.insert(rec(vec![
        ("id", Value::Int(1)),
        ("doc", Value::String("declared".into())),
        ("extra", Value::Bool(true)),
    ]))
    .expect("insert");
    let b = run(&e, "SELECT doc, _doc FROM documents.t");
    assert_eq!(strings(&b, 0), [Some("declared".to_owned())]);
    assert_eq!(strings(&b, 1), [Some("{\"extra\":true}".to_owned())]);
}
