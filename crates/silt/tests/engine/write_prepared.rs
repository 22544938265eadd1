//! `Dataset::write_prepared`: records checked and encoded on one thread
//! (`prepare_record`) and written on another behave as `write_batch`'s, in
//! atomic and plain batches, with secondary indexes kept; a record
//! prepared for another dataset is refused.

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

#[test]
fn prepared_records_write_like_records() {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(
        dir.path(),
        DbOptions {
            durability: Durability::None,
            ..Default::default()
        },
    )
    .unwrap();
    let def = |n: &str| {
        DatasetDef::new(n, &["id"])
            .field("id", FieldType::Int)
            .field("v", FieldType::String)
    };
    let ds = db.create_dataset(def("t")).unwrap();
    let other = db.create_dataset(def("u")).unwrap();
    db.create_index("t", IndexDef::btree("by_v", &["v"]))
        .unwrap();

    // Prepared on another thread, written here, atomically.
    let prepared = std::thread::scope(|s| {
        s.spawn(|| {
            (0..100)
                .map(|k| ds.prepare_record(rec(k, if k % 2 == 0 { "even" } else { "odd" })))
                .collect::<Result<Vec<_>, _>>()
        })
        .join()
        .unwrap()
    })
    .unwrap();
    let r = ds
        .write_prepared(prepared, BatchOptions::atomic(WriteMode::Insert))
        .unwrap();
    assert_eq!((r.committed, r.failed.len()), (100, 0));
    let hits = ds
        .query(
            "by_v",
            &Query::Range {
                lo: Bound::Included(vec!["even".into()]),
                hi: Bound::Included(vec!["even".into()]),
            },
            QueryOptions::default(),
        )
        .unwrap()
        .filter(|h| h.is_ok())
        .count();
    assert_eq!(hits, 50);

    // A taken key fails an atomic batch whole.
    let batch = vec![
        ds.prepare_record(rec(200, "x")).unwrap(),
        ds.prepare_record(rec(5, "dup")).unwrap(),
    ];
    let r = ds
        .write_prepared(batch, BatchOptions::atomic(WriteMode::Insert))
        .unwrap();
    assert_eq!(r.committed, 0);
    assert_eq!(r.failed[0].0, 1);
    assert!(ds.get(&[Value::Int(200)]).unwrap().is_none());

    // Plain batches: each record its own transaction.
    let batch = vec![
        ds.prepare_record(rec(300, "x")).unwrap(),
        ds.prepare_record(rec(5, "dup")).unwrap(),
        ds.prepare_record(rec(301, "y")).unwrap(),
    ];
    let plain = BatchOptions {
        mode: WriteMode::Insert,
        atomic: false,
        stop_on_error: false,
    };
    let r = ds.write_prepared(batch, plain).unwrap();
    assert_eq!((r.committed, r.failed.len()), (2, 1));

    // Prepared for `u`, written to `t`: refused, nothing written.
    let wrong = vec![other.prepare_record(rec(400, "z")).unwrap()];
    let r = ds
        .write_prepared(wrong, BatchOptions::atomic(WriteMode::Insert))
        .unwrap();
    assert_eq!(r.committed, 0);
    assert!(r.failed[0].1.to_string().contains("prepared for dataset"));
    assert!(ds.get(&[Value::Int(400)]).unwrap().is_none());
}
