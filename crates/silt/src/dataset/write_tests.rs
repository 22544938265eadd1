//! `Dataset::try_write_one_under`: a write that would wait is refused with
//! nothing written; one that need not wait is written as `write_batch`
//! writes it, failures included.

use super::*;
use crate::{Database, DbOptions, FieldType};

fn rec(k: i64, v: &str) -> Value {
    Value::Object(vec![
        ("id".into(), Value::Int(k)),
        ("v".into(), Value::String(v.into())),
    ])
}

fn v_of(ds: &Dataset, k: i64) -> Option<Value> {
    ds.get(&[Value::Int(k)])
        .unwrap()
        .and_then(|r| r.get("v").cloned())
}

#[test]
fn a_write_that_would_wait_is_refused_with_nothing_written() {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path(), DbOptions::default()).unwrap();
    let ds = db
        .create_dataset(
            DatasetDef::new("t", &["id"])
                .field("id", FieldType::Int)
                .field("v", FieldType::String),
        )
        .unwrap();
    let def = ds.def();
    let try_write =
        |k: i64, v: &str, mode: WriteMode| ds.try_write_one_under(&def, rec(k, v), mode).unwrap();

    // Nothing in the way: written and durable (sync is the default).
    let r = try_write(1, "a", WriteMode::Insert).expect("written");
    assert_eq!((r.committed, r.failed.len()), (1, 0));
    assert_eq!(v_of(&ds, 1), Some(Value::String("a".into())));

    // Another transaction holds the key's lock: refused, not written.
    let other = ds.txn.begin();
    let key = ds.encode_pk(&[Value::Int(2)]).unwrap();
    ds.txn.locks.lock_x(other, LockManager::name(ds.id, &key));
    assert!(try_write(2, "b", WriteMode::Insert).is_none());
    ds.txn.locks.release_all(other);
    assert_eq!(v_of(&ds, 2), None);

    // An ALTER or index build holds the definition: refused.
    {
        let _ddl = ds.ddl_write();
        assert!(try_write(2, "b", WriteMode::Insert).is_none());
    }
    assert_eq!(v_of(&ds, 2), None);
    assert_eq!(
        try_write(2, "b", WriteMode::Insert).map(|r| r.committed),
        Some(1)
    );

    // A duplicate key is the row's failure, as in a batch; nothing changes.
    let r = try_write(1, "z", WriteMode::Insert).expect("attempted");
    assert_eq!(r.committed, 0);
    assert!(
        matches!(r.failed.as_slice(), [(0, Error::DuplicateKey { .. })]),
        "{:?}",
        r.failed
    );
    assert_eq!(v_of(&ds, 1), Some(Value::String("a".into())));

    // A live key under InsertIgnore: left as it is, no failure.
    let r = try_write(1, "z", WriteMode::InsertIgnore).expect("attempted");
    assert_eq!((r.committed, r.failed.len()), (0, 0));
    let r = try_write(1, "u", WriteMode::Upsert).expect("attempted");
    assert_eq!(r.committed, 1);
    assert_eq!(v_of(&ds, 1), Some(Value::String("u".into())));

    // A record the definition refuses fails to prepare.
    let bad = Value::Object(vec![("id".into(), Value::String("x".into()))]);
    let r = ds
        .try_write_one_under(&def, bad, WriteMode::Insert)
        .unwrap()
        .expect("attempted");
    assert_eq!((r.committed, r.failed.len()), (0, 1));
    db.close().unwrap();
}
