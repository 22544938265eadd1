//! Queries through the R-trees (both variants) and the keyword index while
//! writers upsert and delete, flushes and merges run, and transactions that
//! touched the indexes abort. Every answer must be committed and satisfy the
//! predicate:
//!
//! - committed records live at latitudes within ±60 and never say "poison";
//! - aborted transactions move records to latitude 70..80 and write "poison"
//!   (their batch fails on its last record, after the index entries of the
//!   others were written, so undo must remove them);
//! - so any hit above latitude 65, or any "poison" hit, is a leak of
//!   uncommitted data, on both the index-only and the validated path.

use silt::lsm::policy::MergePolicy;
use silt::{
    BatchOptions, Database, DatasetDef, DbOptions, Durability, FieldType, Geometry, IndexDef,
    Query, QueryOptions, ReconcileOption, Value, WriteMode,
};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

const IDS: i64 = 1500;

fn rec(id: i64, lon: f64, lat: f64, msg: &str) -> Value {
    Value::Object(vec![
        ("id".into(), Value::Int(id)),
        ("loc".into(), Value::Geometry(Geometry::point(lon, lat))),
        ("msg".into(), Value::String(msg.into())),
        ("pad".into(), Value::String("p".repeat(200))),
    ])
}

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn f(&mut self, lo: f64, hi: f64) -> f64 {
        lo + (self.next() % 1_000_000) as f64 / 1_000_000.0 * (hi - lo)
    }
}

#[test]
fn queries_during_ingest_see_only_committed_matching_records() {
    let dir = tempfile::tempdir().unwrap();
    let db = Arc::new(
        Database::open(
            dir.path(),
            DbOptions {
                durability: Durability::None,
                sync: false,
                block_cache_bytes: 4 << 20,
                ..Default::default()
            },
        )
        .unwrap(),
    );
    // `loc` is untyped so that a record with a non-geometry `loc` passes
    // `prepare` and fails inside the transaction, at the R-tree.
    db.create_dataset(
        DatasetDef::new("t", &["id"])
            .field("id", FieldType::Int)
            .memory_budget(1 << 20)
            .block_size(1024)
            .partitions(2)
            .policy(MergePolicy::parse("tiered(3)").unwrap()),
    )
    .unwrap();
    let p = MergePolicy::parse("tiered(3)").unwrap();
    db.create_index(
        "t",
        IndexDef::rtree("am", "loc")
            .reconcile(ReconcileOption::Antimatter)
            .policy(p.clone()),
    )
    .unwrap();
    db.create_index(
        "t",
        IndexDef::rtree("dk", "loc")
            .reconcile(ReconcileOption::DeletedKeys)
            .policy(p.clone()),
    )
    .unwrap();
    db.create_index("t", IndexDef::keyword("kw", "msg").policy(p))
        .unwrap();
    let ds = db.dataset("t").unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let aborts = Arc::new(AtomicU64::new(0));
    let queries = Arc::new(AtomicU64::new(0));
    let mut handles = Vec::new();
    for w in 0..2u64 {
        let (ds, stop, aborts) = (ds.clone(), stop.clone(), aborts.clone());
        handles.push(std::thread::spawn(move || {
            let mut r = Rng(0x1234_5678 + w);
            let mut n = 0u64;
            while !stop.load(Ordering::Relaxed) {
                n += 1;
                let id = (r.next() % IDS as u64) as i64;
                if n.is_multiple_of(7) {
                    ds.delete(&[Value::Int(id)]).unwrap();
                } else if n.is_multiple_of(11) {
                    // An aborted transaction: upserts that move records into
                    // the poison zone, then a record the R-tree refuses.
                    let mut batch = Vec::new();
                    for _ in 0..3 {
                        let pid = (r.next() % IDS as u64) as i64;
                        batch.push(rec(pid, r.f(-180.0, 180.0), r.f(70.0, 80.0), "poison"));
                    }
                    batch.push(Value::Object(vec![
                        ("id".into(), Value::Int(IDS + 1 + w as i64)),
                        ("loc".into(), Value::Int(5)),
                    ]));
                    let rep = ds
                        .write_batch(batch, BatchOptions::atomic(WriteMode::Upsert))
                        .unwrap();
                    assert_eq!(rep.committed, 0);
                    aborts.fetch_add(1, Ordering::Relaxed);
                } else {
                    let word = format!("w{} normal", r.next() % 5);
                    ds.upsert(rec(id, r.f(-180.0, 180.0), r.f(-60.0, 60.0), &word))
                        .unwrap();
                }
            }
        }));
    }
    let deadline = Instant::now() + Duration::from_secs(4);
    for q in 0..2u64 {
        let (ds, stop, queries) = (ds.clone(), stop.clone(), queries.clone());
        handles.push(std::thread::spawn(move || {
            let mut r = Rng(0xABCD + q);
            while !stop.load(Ordering::Relaxed) {
                for index_only in [false, true] {
                    let o = QueryOptions {
                        index_only,
                        limit: None,
                    };
                    for index in ["am", "dk"] {
                        // Nothing is ever committed in the poison zone.
                        let poison = Query::Intersects(Geometry::rect(-180.0, 65.0, 180.0, 90.0));
                        let leaked: Vec<_> = ds
                            .query(index, &poison, o)
                            .unwrap()
                            .map(|h| h.unwrap())
                            .collect();
                        assert!(leaked.is_empty(), "{index}: uncommitted hits {leaked:?}");
                        // A random box: every validated record lies inside it.
                        let (x, y) = (r.f(-170.0, 160.0), r.f(-60.0, 40.0));
                        let b = Query::Intersects(Geometry::rect(x, y, x + 10.0, y + 20.0));
                        for h in ds.query(index, &b, o).unwrap() {
                            let h = h.unwrap();
                            if let Some(rec) = &h.record {
                                let Some(Value::Geometry(Geometry::Point { x: px, y: py })) =
                                    rec.get("loc")
                                else {
                                    panic!("record without a point: {rec:?}");
                                };
                                assert!(
                                    (x..=x + 10.0).contains(px) && (y..=y + 20.0).contains(py),
                                    "{index}: hit outside the box"
                                );
                            }
                        }
                        // kNN next to the poison zone: only committed points,
                        // nearest first.
                        let knn = Query::Nearest {
                            lon: r.f(-180.0, 180.0),
                            lat: 75.0,
                            k: 5,
                        };
                        let mut last = 0.0;
                        for h in ds.query(index, &knn, o).unwrap() {
                            let h = h.unwrap();
                            let d = h.distance_m.unwrap();
                            assert!(d + 1e-6 >= last, "{index}: kNN out of order");
                            last = d;
                            // 15 degrees of latitude ≈ 1,668 km: anything
                            // nearer is in the poison zone.
                            assert!(d > 1_500_000.0, "{index}: kNN hit at {d} m is uncommitted");
                        }
                    }
                    let t = Query::Text {
                        text: "poison".into(),
                        all: true,
                    };
                    let leaked: Vec<_> =
                        ds.query("kw", &t, o).unwrap().map(|h| h.unwrap()).collect();
                    assert!(leaked.is_empty(), "keyword: uncommitted hits {leaked:?}");
                }
                queries.fetch_add(1, Ordering::Relaxed);
            }
        }));
    }
    while Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    stop.store(true, Ordering::Relaxed);
    for h in handles {
        h.join().unwrap();
    }
    // Quiescent: each index agrees exactly with the primary.
    let recs: Vec<Value> = ds
        .scan(std::ops::Bound::Unbounded, std::ops::Bound::Unbounded)
        .unwrap()
        .map(|r| r.unwrap())
        .collect();
    // No aborted write survived in the primary (an index that dropped it
    // would no longer lead a query to it, so check the records themselves).
    for r in &recs {
        assert_ne!(
            r.get("msg"),
            Some(&Value::String("poison".into())),
            "an aborted write survived: {r:?}"
        );
    }
    let mut want: Vec<i64> = recs
        .iter()
        .map(|r| r.get("id").and_then(Value::as_i64).unwrap())
        .collect();
    want.sort_unstable();
    // Sorted ids of an index-only box query.
    let box_ids = |index: &str, x0: f64, y0: f64, x1: f64, y1: f64| {
        let q = Query::Intersects(Geometry::rect(x0, y0, x1, y1));
        let o = QueryOptions {
            index_only: true,
            limit: None,
        };
        let mut got: Vec<i64> = ds
            .query(index, &q, o)
            .unwrap()
            .map(|h| h.unwrap().pk[0].as_i64().unwrap())
            .collect();
        got.sort_unstable();
        got
    };
    for index in ["am", "dk"] {
        let got = box_ids(index, -180.0, -90.0, 180.0, 90.0);
        assert_eq!(got, want, "{index} after the run");
        // And by location: an index-only box query returns exactly the
        // records whose point lies in the box.
        for (x, y) in [(-100.0, -50.0), (0.0, 0.0), (60.0, 20.0)] {
            let got = box_ids(index, x, y, x + 40.0, y + 30.0);
            let mut inside: Vec<i64> = recs
                .iter()
                .filter(|r| {
                    let Some(Value::Geometry(Geometry::Point { x: px, y: py })) = r.get("loc")
                    else {
                        return false;
                    };
                    (x..=x + 40.0).contains(px) && (y..=y + 30.0).contains(py)
                })
                .map(|r| r.get("id").and_then(Value::as_i64).unwrap())
                .collect();
            inside.sort_unstable();
            assert_eq!(got, inside, "{index}: box at ({x}, {y}) after the run");
        }
    }
    let st = ds.stats();
    let flushes: u64 = st.indexes.iter().map(|t| t.flushes).sum();
    let merges: u64 = st.indexes.iter().map(|t| t.merges).sum();
    eprintln!(
        "{} query rounds, {} aborted batches, {flushes} flushes, {merges} merges",
        queries.load(Ordering::Relaxed),
        aborts.load(Ordering::Relaxed)
    );
    assert!(aborts.load(Ordering::Relaxed) > 10);
    assert!(queries.load(Ordering::Relaxed) > 5);
    assert!(flushes > 0, "the run should have flushed");
}
