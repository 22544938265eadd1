//! An aborted atomic batch that writes the same primary key twice, while
//! other threads rotate the in-memory components: the key's two writes may
//! land in different memtables, and undo must still leave the committed
//! record (before the fix, the newer memtable kept the first write's undo
//! image, the uncommitted "poison" version, and the primary served it for
//! good while the indexes had dropped it).

use silt::{
    BatchOptions, Database, DatasetDef, DbOptions, Durability, FieldType, Geometry, IndexDef,
    Value, WriteMode,
};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

fn rec(id: i64, lat: f64, msg: &str) -> Value {
    Value::Object(vec![
        ("id".into(), Value::Int(id)),
        ("loc".into(), Value::Geometry(Geometry::point(10.0, lat))),
        ("msg".into(), Value::String(msg.into())),
    ])
}

#[test]
fn undo_of_a_key_written_twice_across_a_rotation_restores_the_committed_record() {
    let dir = tempfile::tempdir().unwrap();
    let db = Arc::new(
        Database::open(
            dir.path(),
            DbOptions {
                durability: Durability::None,
                sync: false,
                ..Default::default()
            },
        )
        .unwrap(),
    );
    db.create_dataset(
        DatasetDef::new("t", &["id"])
            .field("id", FieldType::Int)
            .memory_budget(1 << 20),
    )
    .unwrap();
    db.create_index("t", IndexDef::rtree("r", "loc")).unwrap();
    let ds = db.dataset("t").unwrap();
    for id in 0..4 {
        ds.upsert(rec(id, 10.0, "committed")).unwrap();
    }
    let stop = Arc::new(AtomicBool::new(false));
    let rotator = {
        let (db, stop) = (db.clone(), stop.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                // A committed write keeps the memtable non-empty, so each
                // flush rotates it.
                db.dataset("t").unwrap().upsert(rec(100, 0.0, "x")).unwrap();
                db.flush().unwrap();
            }
        })
    };
    for round in 0..10_000 {
        let id = round % 4;
        let batch = vec![
            rec(id, 70.0, "poison one"),
            rec(id, 75.0, "poison two"),
            // Passes `prepare` (`loc` is untyped) and fails at the R-tree,
            // after both writes of `id`.
            Value::Object(vec![
                ("id".into(), Value::Int(99)),
                ("loc".into(), Value::Int(5)),
            ]),
        ];
        let rep = ds
            .write_batch(batch, BatchOptions::atomic(WriteMode::Upsert))
            .unwrap();
        assert_eq!(rep.committed, 0);
        let got = ds.get(&[Value::Int(id)]).unwrap().unwrap();
        assert_eq!(
            got.get("msg"),
            Some(&Value::String("committed".into())),
            "round {round}: the aborted batch's write survived"
        );
    }
    stop.store(true, Ordering::Relaxed);
    rotator.join().unwrap();
    // After flushes too.
    db.flush().unwrap();
    for id in 0..4 {
        let got = ds.get(&[Value::Int(id)]).unwrap().unwrap();
        assert_eq!(got.get("msg"), Some(&Value::String("committed".into())));
    }
}
