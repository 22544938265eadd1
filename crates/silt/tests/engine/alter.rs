//! #20: an `ALTER` ([`silt::Alteration`]) holds off the writes to its
//! dataset; records prepared under the definition it replaced are refused
//! ([`Error::Altered`]), never written in the old shape; an alteration that
//! does not finish leaves the definition, the indexes and the records as
//! they were.

use std::ops::Bound;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use silt::{
    BatchOptions, Database, DatasetDef, DbOptions, Error, FieldDefault, FieldType, IndexDef,
    PreparedBatch, Value, WriteMode,
};

fn rec(id: i64) -> Value {
    Value::Object(vec![("id".into(), Value::Int(id))])
}

fn all(ds: &Arc<silt::Dataset>) -> impl Iterator<Item = silt::Result<Value>> {
    ds.scan(Bound::Unbounded, Bound::Unbounded).unwrap()
}

fn open(dir: &std::path::Path) -> Database {
    Database::open(dir, DbOptions::default()).unwrap()
}

fn add_s(d: &mut DatasetDef) -> silt::Result<()> {
    d.fields.push(("s".into(), FieldType::String));
    d.defaults
        .push(("s".into(), FieldDefault::Text("x".into())));
    d.not_null.push("s".into());
    Ok(())
}

#[test]
fn records_prepared_before_an_alter_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    let ds = db
        .create_dataset(DatasetDef::new("t", &["id"]).field("id", FieldType::Int))
        .unwrap();
    // A transaction's records, then a prepared batch, both prepared before
    // `s` became NOT NULL with a default.
    let mut t = db.begin().unwrap();
    t.insert(&ds, rec(1)).unwrap();
    let mut batch = PreparedBatch::new();
    ds.prepare_into(rec(2), &mut batch).unwrap();
    db.alter_dataset("t", add_s).unwrap();
    let err = t.commit().unwrap_err();
    assert!(matches!(err, Error::Altered { .. }), "{err}");
    let err = ds
        .write_prepared(&batch, BatchOptions::atomic(WriteMode::Insert))
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("was altered after these records were prepared"),
        "{err}"
    );
    let err = ds
        .write_prepared(&batch, BatchOptions::default())
        .unwrap()
        .failed;
    assert!(matches!(err[..], [(0, Error::Altered { .. })]), "{err:?}");
    // A transaction that wrote before the ALTER and writes again after it
    // fails at that write.
    let mut t = db.begin().unwrap();
    t.insert(&ds, rec(3)).unwrap();
    db.alter_dataset("t", |d| {
        d.not_null.clear();
        Ok(())
    })
    .unwrap();
    assert!(matches!(t.insert(&ds, rec(4)), Err(Error::Altered { .. })));
    // Nothing of them was written; prepared again, they are.
    assert_eq!(all(&ds).count(), 0);
    let mut batch = PreparedBatch::new();
    ds.prepare_into(rec(2), &mut batch).unwrap();
    ds.write_prepared(&batch, BatchOptions::default()).unwrap();
    let r = ds.get(&[Value::Int(2)]).unwrap().unwrap();
    assert_eq!(r.get("s"), Some(&Value::String("x".into())));
}

#[test]
fn an_alteration_that_does_not_finish_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    let ds = db
        .create_dataset(
            DatasetDef::new("t", &["id"])
                .field("id", FieldType::Int)
                .field("n", FieldType::Int),
        )
        .unwrap();
    for i in 0..10 {
        ds.insert(Value::Object(vec![
            ("id".into(), Value::Int(i)),
            ("n".into(), Value::Int(i % 3)),
        ]))
        .unwrap();
    }
    {
        let mut alt = db.alter(&ds).unwrap();
        alt.change(add_s).unwrap();
        let t = alt.transaction().unwrap();
        t.upsert(
            &ds,
            Value::Object(vec![
                ("id".into(), Value::Int(0)),
                ("s".into(), Value::String("y".into())),
            ]),
        )
        .unwrap();
        alt.create_index(IndexDef::btree("by_n", &["n"])).unwrap();
        // Its changes hold for it; it is dropped without finishing.
        assert_eq!(alt.def().field_type("s"), Some(FieldType::String));
    }
    assert_eq!(ds.def().field_type("s"), None);
    assert!(ds.index_defs().is_empty());
    let r = ds.get(&[Value::Int(0)]).unwrap().unwrap();
    assert_eq!(r.get("s"), None);
    drop(ds);
    drop(db);
    let db = open(dir.path());
    let ds = db.dataset("t").unwrap();
    assert_eq!(ds.def().field_type("s"), None);
    assert!(ds.index_defs().is_empty());
    assert_eq!(all(&ds).count(), 10);
}

#[test]
fn writers_wait_for_an_alteration_and_none_keeps_the_old_shape() {
    let dir = tempfile::tempdir().unwrap();
    let db = Arc::new(open(dir.path()));
    let ds = db
        .create_dataset(DatasetDef::new("t", &["id"]).field("id", FieldType::Int))
        .unwrap();
    for i in 0..2000 {
        ds.insert(rec(i)).unwrap();
    }
    let stop = Arc::new(AtomicBool::new(false));
    let written = Arc::new(AtomicU64::new(0));
    let writers: Vec<_> = (0..2)
        .map(|w| {
            let (db, ds) = (db.clone(), ds.clone());
            let (stop, written) = (stop.clone(), written.clone());
            std::thread::spawn(move || {
                let mut id = 10_000 + w * 1_000_000;
                while !stop.load(Ordering::Relaxed) {
                    id += 1;
                    let done = match id % 3 {
                        0 => ds.insert(rec(id)),
                        1 => {
                            let mut b = PreparedBatch::new();
                            ds.prepare_into(rec(id), &mut b).unwrap();
                            ds.write_prepared(&b, BatchOptions::atomic(WriteMode::Insert))
                                .map(|_| ())
                        }
                        _ => {
                            let mut t = db.begin().unwrap();
                            t.insert(&ds, rec(id)).unwrap();
                            t.commit().map(|_| ())
                        }
                    };
                    match done {
                        Ok(()) => {
                            written.fetch_add(1, Ordering::Relaxed);
                        }
                        Err(Error::Altered { .. }) => {}
                        Err(e) => panic!("{e}"),
                    }
                }
            })
        })
        .collect();
    while written.load(Ordering::Relaxed) < 200 {
        std::thread::yield_now();
    }
    // The ALTER: every record there gets `s`, in one rewrite.
    {
        let mut alt = db.alter(&ds).unwrap();
        alt.change(add_s).unwrap();
        let recs: Vec<Value> = all(&ds).map(|r| r.unwrap()).collect();
        let t = alt.transaction().unwrap();
        for r in recs {
            let Value::Object(mut f) = r else { panic!() };
            f.push(("s".into(), Value::String("x".into())));
            t.upsert(&ds, Value::Object(f)).unwrap();
        }
        alt.finish().unwrap();
    }
    let after = written.load(Ordering::Relaxed);
    while written.load(Ordering::Relaxed) < after + 200 {
        std::thread::yield_now();
    }
    stop.store(true, Ordering::Relaxed);
    for w in writers {
        w.join().unwrap();
    }
    let mut n = 0;
    for r in all(&ds) {
        let r = r.unwrap();
        assert!(r.get("s").is_some(), "{r:?} kept the old shape");
        n += 1;
    }
    assert_eq!(n, 2000 + written.load(Ordering::Relaxed));
}

#[test]
fn a_write_waits_until_the_alteration_ends() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    let ds = db
        .create_dataset(DatasetDef::new("t", &["id"]).field("id", FieldType::Int))
        .unwrap();
    let done = AtomicBool::new(false);
    std::thread::scope(|s| {
        let mut alt = db.alter(&ds).unwrap();
        let writer = s.spawn(|| {
            ds.insert(rec(1)).unwrap();
            done.store(true, Ordering::SeqCst);
        });
        // However long the alteration takes, the insert cannot end first.
        std::thread::sleep(std::time::Duration::from_millis(50));
        assert!(
            !done.load(Ordering::SeqCst),
            "a write went around the ALTER"
        );
        alt.change(add_s).unwrap();
        alt.finish().unwrap();
        writer.join().unwrap();
    });
    // Prepared once the alteration ended: under the new definition.
    let r = ds.get(&[Value::Int(1)]).unwrap().unwrap();
    assert_eq!(r.get("s"), Some(&Value::String("x".into())));
}
