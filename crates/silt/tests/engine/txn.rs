//! Record-level transactions: statement semantics, atomic batches, read
//! committed under concurrency, and log failures.

use silt::txn::FaultInjector;
use silt::{
    BatchOptions, Database, DatasetDef, DbOptions, Durability, Error, FieldType, Value, WriteMode,
};
use std::collections::{BTreeMap, HashMap};
use std::ops::Bound;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

fn rec(k: i64, v: &str) -> Value {
    Value::Object(vec![
        ("id".into(), Value::Int(k)),
        ("v".into(), Value::String(v.into())),
    ])
}

fn open(dir: &std::path::Path, durability: Durability) -> Database {
    Database::open(
        dir,
        DbOptions {
            durability,
            ..Default::default()
        },
    )
    .unwrap()
}

fn create(db: &Database) -> Arc<silt::Dataset> {
    db.create_dataset(
        DatasetDef::new("t", &["id"])
            .field("id", FieldType::Int)
            .memory_budget(1 << 20),
    )
    .unwrap()
}

fn count(ds: &Arc<silt::Dataset>) -> usize {
    ds.scan(Bound::Unbounded, Bound::Unbounded).unwrap().count()
}

/// 000 §3.2's example: a 1000-record insert whose 801st record is a duplicate
/// commits the first 800 and reports the failure; nothing after it is tried.
#[test]
fn insert_of_1000_with_a_duplicate_at_801_keeps_800() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path(), Durability::Sync);
    let ds = create(&db);
    let mut batch: Vec<Value> = (1..=1000).map(|i| rec(i, "x")).collect();
    batch[800] = rec(1, "duplicate of the first record");
    let report = ds.write_batch(batch, BatchOptions::default()).unwrap();
    assert_eq!(report.committed, 800);
    assert_eq!(report.failed.len(), 1);
    assert_eq!(report.failed[0].0, 800);
    assert!(
        matches!(report.failed[0].1, Error::DuplicateKey { .. }),
        "{}",
        report.failed[0].1
    );
    assert_eq!(report.not_attempted, 199);
    assert_eq!(count(&ds), 800);
    // Survives a restart.
    drop(ds);
    db.close().unwrap();
    drop(db);
    let db = open(dir.path(), Durability::Sync);
    assert_eq!(count(&db.dataset("t").unwrap()), 800);
}

#[test]
fn atomic_batch_is_all_or_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path(), Durability::Sync);
    let ds = create(&db);
    ds.insert(rec(5000, "before")).unwrap();
    let mut batch: Vec<Value> = (1..=1000).map(|i| rec(i, "x")).collect();
    batch[800] = rec(5000, "clashes with an existing record");
    let atomic = BatchOptions::atomic(WriteMode::Insert);
    let report = ds.write_batch(batch, atomic).unwrap();
    assert_eq!(report.committed, 0);
    assert_eq!(report.failed.len(), 1);
    assert_eq!(count(&ds), 1, "an aborted atomic batch left records behind");
    // An atomic upsert batch that overwrites and then fails restores the old values.
    let batch = vec![rec(5000, "overwritten"), rec(7, "new"), Value::Int(3)];
    let report = ds
        .write_batch(batch, BatchOptions::atomic(WriteMode::Upsert))
        .unwrap();
    assert_eq!(report.committed, 0);
    let v = ds.get(&[Value::Int(5000)]).unwrap().unwrap();
    assert_eq!(v.get("v").and_then(Value::as_str), Some("before"));
    // A successful atomic batch commits everything, and survives reopen.
    let batch: Vec<Value> = (1..=100).map(|i| rec(i, "ok")).collect();
    assert_eq!(ds.write_batch(batch, atomic).unwrap().committed, 100);
    drop(ds);
    db.close().unwrap();
    drop(db);
    let db = open(dir.path(), Durability::Sync);
    assert_eq!(count(&db.dataset("t").unwrap()), 101);
}

#[test]
fn non_stopping_batches_skip_bad_records() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path(), Durability::Batched { interval_ms: 5 });
    let ds = create(&db);
    let mut batch: Vec<Value> = (0..500).map(|i| rec(i, "x")).collect();
    batch[10] = Value::String("not an object".into());
    batch[20] = rec(0, "dup");
    let report = ds
        .write_batch(
            batch,
            BatchOptions {
                stop_on_error: false,
                ..Default::default()
            },
        )
        .unwrap();
    assert_eq!(report.committed, 498);
    assert_eq!(
        report.failed.iter().map(|f| f.0).collect::<Vec<_>>(),
        vec![10, 20]
    );
    assert_eq!(count(&ds), 498);
}

/// Group commit: many threads committing at once share fsyncs.
#[test]
fn group_commit_shares_fsyncs() {
    let dir = tempfile::tempdir().unwrap();
    let db = Arc::new(open(dir.path(), Durability::Sync));
    let ds = create(&db);
    let threads: Vec<_> = (0..8)
        .map(|t| {
            let ds = ds.clone();
            std::thread::spawn(move || {
                for i in 0..200 {
                    ds.upsert(rec(t * 1000 + i, "v")).unwrap();
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let st = db.stats();
    assert_eq!(count(&ds), 1600);
    assert!(
        st.wal.fsyncs < 1600,
        "{} fsyncs for 1600 commits: no group commit",
        st.wal.fsyncs
    );
}

/// 8 writers on overlapping keys, some of their atomic batches aborting, and
/// readers that must never see an uncommitted or aborted value, nor see a
/// writer's values go back in time.
#[test]
fn concurrent_writers_and_readers_see_only_committed_values() {
    let dir = tempfile::tempdir().unwrap();
    let db = Arc::new(open(dir.path(), Durability::None));
    let ds = create(&db);
    const KEYS: i64 = 64;
    // Key 1_000_000 + t exists so that a batch inserting it aborts.
    for t in 0..8 {
        ds.insert(rec(1_000_000 + t, "blocker")).unwrap();
    }
    let stop = Arc::new(AtomicBool::new(false));
    let writers: Vec<_> = (0..8i64)
        .map(|t| {
            let ds = ds.clone();
            std::thread::spawn(move || {
                let mut committed: HashMap<i64, u64> = HashMap::new();
                let mut x = (t as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
                for n in 1..=400u64 {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    let k1 = (x % KEYS as u64) as i64;
                    let k2 = ((x >> 20) % KEYS as u64) as i64;
                    if n % 5 == 0 {
                        // Inserts two fresh records, then fails on the blocker:
                        // both must be undone and never seen.
                        let fresh = 10_000 + t * 1000 + n as i64;
                        let batch = vec![
                            rec(fresh, &format!("ABORTED:{t}:{n}")),
                            rec(fresh + 500, &format!("ABORTED:{t}:{n}")),
                            rec(1_000_000 + t, "dup"),
                        ];
                        let r = ds
                            .write_batch(batch, BatchOptions::atomic(WriteMode::Insert))
                            .unwrap();
                        assert_eq!(r.committed, 0);
                        assert_eq!(r.failed.len(), 1);
                    } else {
                        let val = |k: i64| rec(k, &format!("ok:{t}:{n}"));
                        let r = ds
                            .write_batch(
                                vec![val(k1), val(k2)],
                                BatchOptions::atomic(WriteMode::Upsert),
                            )
                            .unwrap();
                        assert_eq!(r.committed, 2);
                        committed.insert(k1, n);
                        committed.insert(k2, n);
                    }
                    // Also plain inserts that fail on the blocker key.
                    let e = ds.insert(rec(1_000_000 + t, "dup")).unwrap_err();
                    assert!(matches!(e, Error::DuplicateKey { .. }));
                }
                committed
            })
        })
        .collect();
    let readers: Vec<_> = (0..3)
        .map(|r| {
            let (ds, stop) = (ds.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut last: BTreeMap<(i64, String), u64> = BTreeMap::new();
                let mut checks = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    let mut vals = Vec::new();
                    if r == 0 {
                        for rec in ds.scan(Bound::Unbounded, Bound::Unbounded).unwrap() {
                            let rec = rec.unwrap();
                            vals.push((
                                rec.get("id").and_then(Value::as_i64).unwrap(),
                                rec.get("v").and_then(Value::as_str).unwrap().to_owned(),
                            ));
                        }
                    } else {
                        for k in 0..KEYS {
                            if let Some(rec) = ds.get(&[Value::Int(k)]).unwrap() {
                                vals.push((
                                    k,
                                    rec.get("v").and_then(Value::as_str).unwrap().to_owned(),
                                ));
                            }
                        }
                    }
                    for (k, v) in vals {
                        checks += 1;
                        assert!(
                            !v.starts_with("ABORTED"),
                            "reader saw an aborted value {v} at {k}"
                        );
                        if k >= KEYS {
                            continue;
                        }
                        let parts: Vec<&str> = v.split(':').collect();
                        let n: u64 = parts[2].parse().unwrap();
                        let key = (k, parts[1].to_owned());
                        let prev = last.insert(key.clone(), n).unwrap_or(0);
                        assert!(
                            n >= prev,
                            "writer {} went back in time at key {k}: {prev} then {n}",
                            parts[1]
                        );
                    }
                }
                checks
            })
        })
        .collect();
    let mut committed_by: Vec<HashMap<i64, u64>> = Vec::new();
    for w in writers {
        committed_by.push(w.join().unwrap());
    }
    stop.store(true, Ordering::Relaxed);
    for r in readers {
        assert!(r.join().unwrap() > 0);
    }
    // Every final value is some writer's last committed write to that key.
    for k in 0..KEYS {
        let Some(rec) = ds.get(&[Value::Int(k)]).unwrap() else {
            assert!(committed_by.iter().all(|c| !c.contains_key(&k)));
            continue;
        };
        let v = rec.get("v").and_then(Value::as_str).unwrap().to_owned();
        let parts: Vec<&str> = v.split(':').collect();
        assert_eq!(parts[0], "ok", "final value {v} at key {k}");
        let t: usize = parts[1].parse().unwrap();
        let n: u64 = parts[2].parse().unwrap();
        assert_eq!(
            committed_by[t].get(&k),
            Some(&n),
            "key {k}: {v} is not writer {t}'s last commit"
        );
    }
}

/// An fsync failure: the commit that needed it is not acknowledged, the
/// database refuses further writes, and a reopen recovers every commit that
/// was acknowledged before.
#[test]
fn failed_fsync_is_never_acknowledged() {
    let dir = tempfile::tempdir().unwrap();
    let fault = Arc::new(FaultInjector::new());
    let db = Database::open(
        dir.path(),
        DbOptions {
            durability: Durability::Sync,
            wal_fault: Some(fault.clone()),
            ..Default::default()
        },
    )
    .unwrap();
    let ds = create(&db);
    for i in 0..100 {
        ds.insert(rec(i, "acked")).unwrap();
    }
    fault.fail_next_fsync();
    let err = ds.insert(rec(100, "not acked")).unwrap_err();
    assert!(matches!(err, Error::Closed(_)), "{err}");
    let err = ds.insert(rec(101, "after the failure")).unwrap_err();
    assert!(
        err.to_string().contains("fsync") || matches!(err, Error::Closed(_)),
        "{err}"
    );
    drop(ds);
    let _ = db.close();
    drop(db);
    let db = open(dir.path(), Durability::Sync);
    let ds = db.dataset("t").unwrap();
    for i in 0..100 {
        assert!(
            ds.get(&[Value::Int(i)]).unwrap().is_some(),
            "acknowledged record {i} lost"
        );
    }
    assert!(ds.get(&[Value::Int(101)]).unwrap().is_none());
}

/// Checkpoints flush what the log still needs and delete old log files, so
/// the log stays bounded under a steady write load; recovery then starts at
/// the low-water mark.
#[test]
fn checkpoints_bound_the_log() {
    let dir = tempfile::tempdir().unwrap();
    let opts = DbOptions {
        durability: Durability::None,
        wal_file_bytes: 128 << 10,
        checkpoint_interval_bytes: 512 << 10,
        ..Default::default()
    };
    let db = Database::open(dir.path(), opts.clone()).unwrap();
    let ds = create(&db);
    let pad = "z".repeat(400);
    for i in 0..20_000 {
        ds.upsert(rec(i % 3000, &pad)).unwrap();
    }
    let cp = db.checkpoint().unwrap();
    assert!(cp.low_water_lsn > 0);
    let logs = std::fs::read_dir(dir.path().join("wal"))
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .path()
                .extension()
                .is_some_and(|x| x == "wal")
        })
        .count();
    // ~9 MB of log were written; only the files at or above the mark remain.
    assert!(logs <= 3, "{logs} log files remain after a checkpoint");
    assert!(db.stats().wal.files_deleted > 10);
    // Crash-like reopen (no clean close): recovery starts at the mark.
    ds.upsert(rec(1, "after the checkpoint")).unwrap();
    db.stats(); // keep the handle alive until here
    drop(ds);
    db.close().unwrap();
    drop(db);
    let db = Database::open(dir.path(), opts).unwrap();
    let rs = db.recovery_summary();
    assert!(rs.from_lsn >= cp.low_water_lsn);
    // The clean close checkpointed at the end of the log: open neither
    // replays nor re-reads any of it.
    assert_eq!((rs.records_scanned, rs.log_bytes_checked), (0, 0), "{rs:?}");
    let ds = db.dataset("t").unwrap();
    assert_eq!(count(&ds), 3000);
    assert_eq!(
        ds.get(&[Value::Int(1)])
            .unwrap()
            .unwrap()
            .get("v")
            .and_then(Value::as_str),
        Some("after the checkpoint")
    );
}

fn text_db(dir: &std::path::Path, fault: &Arc<FaultInjector>) -> Database {
    Database::open(
        dir,
        DbOptions {
            // Log written lazily, never fsynced: a failed fsync at close then
            // stops the checkpoint, as a crash would (see recency.rs).
            durability: Durability::None,
            sync: false,
            wal_fault: Some(fault.clone()),
            ..Default::default()
        },
    )
    .unwrap()
}

/// Ids whose `v` contains every word of `text` (or, for the 3-gram index
/// `grams`, the substring), sorted.
fn text_ids(db: &Database, index: &str, text: &str) -> Vec<i64> {
    let ds = db.dataset("t").unwrap();
    let q = silt::Query::Text {
        text: text.into(),
        all: true,
    };
    let mut ids: Vec<i64> = ds
        .query(index, &q, silt::QueryOptions::default())
        .unwrap()
        .map(|h| h.unwrap().pk[0].as_i64().unwrap())
        .collect();
    ids.sort();
    ids
}

/// A record's entries in a keyword (and an n-gram) index are one log record
/// each (UPDATE-BATCH); aborts undo every entry, and recovery replays them.
#[test]
fn text_index_entries_are_one_log_record_undone_and_redone() {
    let dir = tempfile::tempdir().unwrap();
    let fault = Arc::new(FaultInjector::new());
    let db = text_db(dir.path(), &fault);
    let ds = create(&db);
    db.create_index("t", silt::IndexDef::keyword("words", "v"))
        .unwrap();
    db.create_index("t", silt::IndexDef::ngram("grams", "v", 3))
        .unwrap();
    // One record: its primary write, one batch per text index, its COMMIT.
    let before = db.stats().wal.records;
    ds.insert(rec(1, "alpha beta gamma delta")).unwrap();
    assert_eq!(db.stats().wal.records - before, 4);

    // An atomic batch that fails after writing a record with new words.
    let atomic = BatchOptions::atomic(WriteMode::Insert);
    let r = ds
        .write_batch(vec![rec(2, "alpha zeta"), rec(1, "duplicate")], atomic)
        .unwrap();
    assert_eq!(r.committed, 0);
    assert_eq!(text_ids(&db, "words", "zeta"), Vec::<i64>::new());
    assert_eq!(text_ids(&db, "grams", "zet"), Vec::<i64>::new());
    assert_eq!(text_ids(&db, "words", "alpha"), vec![1]);
    // An atomic upsert that rewrites record 1's words, then fails: the old
    // words come back, the new ones go.
    let r = ds
        .write_batch(
            vec![rec(1, "omega psi"), Value::Int(3)],
            BatchOptions::atomic(WriteMode::Upsert),
        )
        .unwrap();
    assert_eq!(r.committed, 0);
    assert_eq!(text_ids(&db, "words", "omega"), Vec::<i64>::new());
    assert_eq!(text_ids(&db, "words", "alpha gamma"), vec![1]);
    assert_eq!(text_ids(&db, "grams", "lph"), vec![1]);

    // Committed work that only the log holds when the process "crashes"
    // (the close fails at its first fsync, before any checkpoint).
    for i in 10..60 {
        let words = format!("common w{i} w{} shared{}", i * 7, i % 3);
        ds.upsert(rec(i, &words)).unwrap();
    }
    ds.upsert(rec(1, "alpha rewritten")).unwrap();
    ds.delete(&[Value::Int(11)]).unwrap();
    // Let the lazy log writer write the tail (not fsync it).
    std::thread::sleep(std::time::Duration::from_millis(30));
    drop(ds);
    fault.fail_next_fsync();
    let _ = db.close();
    drop(db);
    let db = text_db(dir.path(), &Arc::new(FaultInjector::new()));
    let rs = db.recovery_summary();
    assert!(rs.records_redone > 0, "nothing replayed: {rs:?}");
    // After a crash the log from the low-water mark on is checked for its end.
    assert!(rs.log_bytes_checked > 0, "{rs:?}");
    let mut common: Vec<i64> = (10..60).filter(|&i| i != 11).collect();
    common.sort();
    assert_eq!(text_ids(&db, "words", "common"), common);
    assert_eq!(
        text_ids(&db, "words", "shared1"),
        vec![
            10, 13, 16, 19, 22, 25, 28, 31, 34, 37, 40, 43, 46, 49, 52, 55, 58
        ]
    );
    assert_eq!(text_ids(&db, "words", "alpha"), vec![1]);
    assert_eq!(text_ids(&db, "words", "gamma"), Vec::<i64>::new());
    assert_eq!(text_ids(&db, "grams", "rewri"), vec![1]);
    assert_eq!(text_ids(&db, "words", "w11"), Vec::<i64>::new());
}

/// A dropped dataset's id is never given to a new dataset: its committed
/// records may still be in the log after the drop, and recovery routes log
/// records by dataset id, so a reused id would replay the dropped dataset's
/// records into the new one.
#[test]
fn a_dropped_datasets_log_records_never_reach_a_new_dataset() {
    let dir = tempfile::tempdir().unwrap();
    let fault = Arc::new(FaultInjector::new());
    let db = text_db(dir.path(), &fault);
    let def = |name: &str| DatasetDef::new(name, &["id"]).field("id", FieldType::Int);
    db.create_dataset(def("a")).unwrap();
    let old = db.create_dataset(def("b")).unwrap();
    let old_id = old.id();
    old.upsert(rec(1, "of the dropped dataset")).unwrap();
    drop(old);
    db.drop_dataset("b").unwrap();
    let new = db.create_dataset(def("c")).unwrap();
    assert_ne!(new.id(), old_id, "a dropped dataset's id was reused");
    new.upsert(rec(2, "of the new dataset")).unwrap();
    drop(new);
    // Crash: the log (never fsynced) is written but nothing is checkpointed.
    std::thread::sleep(std::time::Duration::from_millis(30));
    fault.fail_next_fsync();
    let _ = db.close();
    drop(db);
    let db = text_db(dir.path(), &Arc::new(FaultInjector::new()));
    assert!(db.recovery_summary().records_redone > 0);
    let c = db.dataset("c").unwrap();
    assert_eq!(c.get(&[Value::Int(1)]).unwrap(), None);
    assert!(c.get(&[Value::Int(2)]).unwrap().is_some());
    // And a database reopened from this catalog keeps counting up.
    let d = db.create_dataset(def("d")).unwrap();
    assert!(d.id() > c.id() && d.id() != old_id);
}
