//! `WriteMode::InsertIgnore` (SQL's `ON CONFLICT DO NOTHING`): a live key is
//! left as it is and not counted, in plain and atomic batches, with a
//! secondary index kept right; and declared NOT NULL fields are enforced.

use silt::{
    BatchOptions, Database, DatasetDef, DbOptions, Durability, FieldType, IndexDef, Query,
    QueryOptions, Value, WriteMode,
};
use std::ops::Bound;

fn rec(k: i64, v: &str) -> Value {
    Value::Object(vec![
        ("id".into(), Value::Int(k)),
        ("v".into(), Value::String(v.into())),
    ])
}

fn v_of(ds: &silt::Dataset, k: i64) -> Option<String> {
    ds.get(&[Value::Int(k)])
        .unwrap()
        .and_then(|r| r.get("v").and_then(Value::as_str).map(str::to_owned))
}

#[test]
fn insert_ignore_leaves_live_keys_alone() {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(
        dir.path(),
        DbOptions {
            durability: Durability::None,
            ..Default::default()
        },
    )
    .unwrap();
    let ds = db
        .create_dataset(
            DatasetDef::new("t", &["id"])
                .field("id", FieldType::Int)
                .field("v", FieldType::String),
        )
        .unwrap();
    db.create_index("t", IndexDef::btree("by_v", &["v"]))
        .unwrap();
    ds.insert(rec(1, "old")).unwrap();
    ds.delete(&[Value::Int(1)]).unwrap();
    ds.insert(rec(2, "old")).unwrap();

    let ignore = BatchOptions {
        mode: WriteMode::InsertIgnore,
        ..Default::default()
    };
    // 1 was deleted (inserted again), 2 is live (left alone), 3 is new, and
    // 3 again in the same batch is left alone.
    let r = ds
        .write_batch(
            vec![rec(1, "new"), rec(2, "new"), rec(3, "new"), rec(3, "newer")],
            ignore,
        )
        .unwrap();
    assert_eq!(r.committed, 2);
    assert!(r.failed.is_empty());
    assert_eq!(v_of(&ds, 1).as_deref(), Some("new"));
    assert_eq!(v_of(&ds, 2).as_deref(), Some("old"));
    assert_eq!(v_of(&ds, 3).as_deref(), Some("new"));
    let old: Vec<_> = ds
        .query(
            "by_v",
            &Query::Range {
                lo: Bound::Included(vec!["old".into()]),
                hi: Bound::Included(vec!["old".into()]),
            },
            QueryOptions::default(),
        )
        .unwrap()
        .map(|h| h.unwrap().pk)
        .collect();
    assert_eq!(old, vec![vec![Value::Int(2)]]);

    // Atomic: counts only the records inserted.
    let r = ds
        .write_batch(
            vec![rec(2, "x"), rec(4, "four")],
            BatchOptions::atomic(WriteMode::InsertIgnore),
        )
        .unwrap();
    assert_eq!(r.committed, 1);
    assert_eq!(v_of(&ds, 2).as_deref(), Some("old"));
    assert_eq!(v_of(&ds, 4).as_deref(), Some("four"));
}

#[test]
fn not_null_fields_are_enforced() {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path(), DbOptions::default()).unwrap();
    let bad = DatasetDef::new("u", &["id"])
        .field("id", FieldType::Int)
        .not_null("nope");
    assert!(
        db.create_dataset(bad).is_err(),
        "an undeclared NOT NULL field"
    );
    let ds = db
        .create_dataset(
            DatasetDef::new("t", &["id"])
                .field("id", FieldType::Int)
                .field("v", FieldType::String)
                .not_null("v"),
        )
        .unwrap();
    ds.insert(rec(1, "a")).unwrap();
    for r in [
        Value::Object(vec![("id".into(), Value::Int(2))]),
        Value::Object(vec![
            ("id".into(), Value::Int(2)),
            ("v".into(), Value::Null),
        ]),
    ] {
        let e = ds.insert(r).unwrap_err();
        assert!(
            matches!(&e, silt::Error::InvalidRecord { field: Some(f), .. } if f == "v"),
            "{e}"
        );
    }
    drop(ds);
    db.close().unwrap();
    drop(db);
    let db = Database::open(dir.path(), DbOptions::default()).unwrap();
    assert_eq!(
        db.dataset("t").unwrap().def().not_null,
        vec!["v".to_owned()]
    );
}
