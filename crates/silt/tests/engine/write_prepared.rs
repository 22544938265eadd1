//! `Dataset::write_prepared`: records checked and encoded into a
//! `PreparedBatch` on one thread (`prepare_into`) and written on another
//! behave as `write_batch`'s, in atomic and plain batches, with secondary
//! indexes kept; a batch prepared for another dataset is refused, and a
//! record that fails to prepare leaves the batch as it was.

use silt::{
    BatchOptions, Database, Dataset, DatasetDef, DbOptions, Durability, FieldType, IndexDef,
    PreparedBatch, Query, QueryOptions, Value, WriteMode,
};
use std::ops::Bound;

fn batch_of(ds: &Dataset, records: impl IntoIterator<Item = Value>) -> PreparedBatch {
    let mut batch = PreparedBatch::new();
    for r in records {
        ds.prepare_into(r, &mut batch).unwrap();
    }
    batch
}

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
            let records = (0..100).map(|k| rec(k, if k % 2 == 0 { "even" } else { "odd" }));
            batch_of(&ds, records)
        })
        .join()
        .unwrap()
    });
    assert_eq!(prepared.len(), 100);
    let (key, record) = (prepared.key(7).unwrap(), prepared.record(7).unwrap());
    let (k, r) = ds.prepare(rec(7, "odd")).unwrap();
    assert_eq!((key, record), (&k[..], &r[..]));
    let r = ds
        .write_prepared(&prepared, BatchOptions::atomic(WriteMode::Insert))
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
    let batch = batch_of(&ds, [rec(200, "x"), rec(5, "dup")]);
    let r = ds
        .write_prepared(&batch, BatchOptions::atomic(WriteMode::Insert))
        .unwrap();
    assert_eq!(r.committed, 0);
    assert_eq!(r.failed[0].0, 1);
    assert!(ds.get(&[Value::Int(200)]).unwrap().is_none());

    // Plain batches: each record its own transaction.
    let mut batch = batch_of(&ds, [rec(300, "x"), rec(5, "dup")]);
    // A record that cannot be prepared leaves the batch as it was.
    let bad = Value::Object(vec![("id".into(), Value::String("x".into()))]);
    assert!(ds.prepare_into(bad, &mut batch).is_err());
    assert_eq!(batch.len(), 2);
    ds.prepare_into(rec(301, "y"), &mut batch).unwrap();
    let plain = BatchOptions {
        mode: WriteMode::Insert,
        atomic: false,
        stop_on_error: false,
    };
    let r = ds.write_prepared(&batch, plain).unwrap();
    assert_eq!((r.committed, r.failed.len()), (2, 1));

    // Prepared for `u`, written to `t`: refused, nothing written.
    let mut wrong = batch_of(&other, [rec(400, "z")]);
    let e = ds
        .write_prepared(&wrong, BatchOptions::atomic(WriteMode::Insert))
        .unwrap_err();
    assert!(e.to_string().contains("prepared for dataset"), "{e}");
    assert!(ds.get(&[Value::Int(400)]).unwrap().is_none());
    // ... and a batch holds records of one dataset, until it is emptied.
    let e = ds.prepare_into(rec(401, "z"), &mut wrong).unwrap_err();
    assert!(e.to_string().contains("prepared for dataset"), "{e}");
    wrong.clear();
    ds.prepare_into(rec(401, "z"), &mut wrong).unwrap();
    ds.write_prepared(&wrong, BatchOptions::atomic(WriteMode::Insert))
        .unwrap();
    assert!(ds.get(&[Value::Int(401)]).unwrap().is_some());
}
