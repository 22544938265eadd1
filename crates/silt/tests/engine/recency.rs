//! LevelDB++ recency indexes (seed 001 ch. 3) against a brute-force model:
//! random inserts, upserts (changing the indexed field or not), records
//! without the field and deletes, with flushes, merges (several merge
//! policies, leveled among them), compactions, reopens, crashes (the log is
//! replayed), and index drops and rebuilds over existing data. Every lookup
//! and range lookup, for k in {1, 3, 10, unlimited}, must return exactly the
//! k most recent matching records, newest first, through each kind:
//! embedded, eager, lazy, composite, and btree (collect and sort).

use crate::restart::{cases, crash, opts, reopen};
use proptest::prelude::*;
use silt::lsm::policy::MergePolicy;
use silt::txn::FaultInjector;
use silt::{Database, DatasetDef, FieldType, IndexDef, IndexKind, Query, QueryOptions, Value};
use std::collections::BTreeMap;
use std::ops::Bound;
use std::path::Path;
use std::sync::Arc;

const INDEXES: [(&str, IndexKind); 5] = [
    ("emb", IndexKind::Embedded),
    ("eager", IndexKind::Eager),
    ("lazy", IndexKind::Lazy),
    ("comp", IndexKind::Composite),
    ("bt", IndexKind::Btree),
];

/// (user field or none, order of the record's last write)
type Model = BTreeMap<i64, (Option<i64>, u64)>;

fn record(id: i64, user: Option<i64>, pad: u8, n: u64) -> Value {
    let mut f = vec![("id".into(), Value::Int(id))];
    if let Some(u) = user {
        f.push(("user".into(), Value::Int(u)));
    }
    f.push((
        "pad".into(),
        Value::String("x".repeat(usize::from(pad) * 3)),
    ));
    f.push(("n".into(), Value::Int(n as i64)));
    Value::Object(f)
}

#[derive(Clone, Debug)]
enum Op {
    Upsert(i64, Option<i64>, u8),
    Insert(i64, Option<i64>, u8),
    /// Upsert keeping the record's user (recency changes, the value not).
    Touch(i64, u8),
    Delete(i64),
    Flush,
    Compact,
    Reopen,
    Crash,
    /// Drop every index and build it again over the data.
    Rebuild,
    Lookup(i64),
    Range(Bound<i64>, Bound<i64>),
}

fn user() -> impl Strategy<Value = Option<i64>> {
    prop_oneof![9 => (0i64..8).prop_map(Some), 1 => Just(None)]
}

fn bound() -> impl Strategy<Value = Bound<i64>> {
    prop_oneof![
        3 => (0i64..8).prop_map(Bound::Included),
        1 => (0i64..8).prop_map(Bound::Excluded),
        1 => Just(Bound::Unbounded),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        10 => (0i64..60, user(), any::<u8>()).prop_map(|(k, u, p)| Op::Upsert(k, u, p)),
        3 => (0i64..60, user(), any::<u8>()).prop_map(|(k, u, p)| Op::Insert(k, u, p)),
        3 => (0i64..60, any::<u8>()).prop_map(|(k, p)| Op::Touch(k, p)),
        3 => (0i64..60).prop_map(Op::Delete),
        2 => Just(Op::Flush),
        1 => Just(Op::Compact),
        1 => Just(Op::Reopen),
        1 => Just(Op::Crash),
        1 => Just(Op::Rebuild),
        3 => (0i64..8).prop_map(Op::Lookup),
        2 => (bound(), bound()).prop_map(|(a, b)| Op::Range(a, b)),
    ]
}

fn create_indexes(db: &Database, policy: &MergePolicy) {
    for (name, kind) in INDEXES {
        let mut d = IndexDef::recency(name, kind, "user").policy(policy.clone());
        if kind == IndexKind::Embedded {
            // Few bits: block bloom filters give false positives.
            d.options.bits_per_key = Some(3.0);
        }
        db.create_index("t", d).unwrap();
    }
}

fn create(dir: &Path, fault: &Arc<FaultInjector>, policy: &MergePolicy, indexes: bool) -> Database {
    let db = Database::open(dir, opts(fault)).unwrap();
    let mut def = DatasetDef::new("t", &["id"])
        .field("id", FieldType::Int)
        .field("user", FieldType::Int)
        .memory_budget(1 << 20)
        .block_size(512)
        .partitions(2)
        .policy(policy.clone());
    // A weak primary bloom filter: validity probes meet false positives.
    def.bloom_fpr = 0.3;
    db.create_dataset(def).unwrap();
    if indexes {
        create_indexes(&db, policy);
    }
    db
}

fn want(model: &Model, lo: Bound<i64>, hi: Bound<i64>, k: Option<usize>) -> Vec<i64> {
    let inside = |u: i64| {
        (match lo {
            Bound::Included(l) => u >= l,
            Bound::Excluded(l) => u > l,
            Bound::Unbounded => true,
        }) && (match hi {
            Bound::Included(h) => u <= h,
            Bound::Excluded(h) => u < h,
            Bound::Unbounded => true,
        })
    };
    let mut v: Vec<(u64, i64)> = model
        .iter()
        .filter(|(_, (u, _))| u.is_some_and(inside))
        .map(|(id, (_, n))| (*n, *id))
        .collect();
    v.sort_unstable_by(|a, b| b.cmp(a));
    v.into_iter()
        .take(k.unwrap_or(usize::MAX))
        .map(|(_, id)| id)
        .collect()
}

fn check(
    db: &Database,
    model: &Model,
    lo: Bound<i64>,
    hi: Bound<i64>,
) -> Result<(), TestCaseError> {
    let ds = db.dataset("t").unwrap();
    let vb = |b: Bound<i64>| b.map(|v| vec![Value::Int(v)]);
    for (name, _) in INDEXES {
        for k in [Some(1), Some(3), Some(10), None] {
            let q = Query::Recent {
                lo: vb(lo),
                hi: vb(hi),
                k,
            };
            let hits: Vec<silt::QueryHit> = ds
                .query(name, &q, QueryOptions::default())
                .unwrap()
                .map(|h| h.unwrap())
                .collect();
            let got: Vec<i64> = hits.iter().map(|h| h.pk[0].as_i64().unwrap()).collect();
            prop_assert_eq!(
                &got,
                &want(model, lo, hi, k),
                "index {} range {:?}..{:?} k {:?}",
                name,
                lo,
                hi,
                k
            );
            // The records are the current ones.
            for h in &hits {
                let id = h.pk[0].as_i64().unwrap();
                let n = h
                    .record
                    .as_ref()
                    .and_then(|r| r.get("n"))
                    .and_then(Value::as_i64);
                prop_assert_eq!(n, Some(model[&id].1 as i64), "stale record {}", id);
            }
        }
        // A limit shortens an unlimited recency query.
        let q = Query::Recent {
            lo: vb(lo),
            hi: vb(hi),
            k: None,
        };
        let o = QueryOptions {
            index_only: false,
            limit: Some(2),
        };
        let got: Vec<i64> = ds
            .query(name, &q, o)
            .unwrap()
            .map(|h| h.unwrap().pk[0].as_i64().unwrap())
            .collect();
        prop_assert_eq!(got, want(model, lo, hi, Some(2)), "index {} limit 2", name);
    }
    Ok(())
}

fn run(ops: &[Op], policy: &str, late: usize) -> Result<(), TestCaseError> {
    let policy = MergePolicy::parse(policy).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut fault = Arc::new(FaultInjector::new());
    let mut db = create(dir.path(), &fault, &policy, late == 0);
    let mut indexed = late == 0;
    let mut model: Model = BTreeMap::new();
    let mut n: u64 = 0;
    for (i, op) in ops.iter().enumerate() {
        if !indexed && i >= late {
            create_indexes(&db, &policy);
            indexed = true;
        }
        let ds = db.dataset("t").unwrap();
        match op {
            Op::Upsert(k, u, p) => {
                n += 1;
                ds.upsert(record(*k, *u, *p, n)).unwrap();
                model.insert(*k, (*u, n));
            }
            Op::Insert(k, u, p) => {
                let r = ds.insert(record(*k, *u, *p, n + 1));
                if model.contains_key(k) {
                    prop_assert!(r.is_err());
                } else {
                    r.unwrap();
                    n += 1;
                    model.insert(*k, (*u, n));
                }
            }
            Op::Touch(k, p) => {
                if let Some((u, _)) = model.get(k).copied() {
                    n += 1;
                    ds.upsert(record(*k, u, *p, n)).unwrap();
                    model.insert(*k, (u, n));
                }
            }
            Op::Delete(k) => {
                let existed = ds.delete(&[Value::Int(*k)]).unwrap();
                prop_assert_eq!(existed, model.remove(k).is_some());
            }
            Op::Flush => ds.flush().unwrap(),
            Op::Compact => ds.compact().unwrap(),
            Op::Reopen => {
                drop(ds);
                db = reopen(db, dir.path(), &fault);
            }
            Op::Crash => {
                drop(ds);
                db = crash(db, dir.path(), &mut fault);
            }
            Op::Rebuild => {
                if indexed {
                    for (name, _) in INDEXES {
                        db.drop_index("t", name).unwrap();
                    }
                    create_indexes(&db, &policy);
                }
            }
            Op::Lookup(u) => {
                if indexed {
                    check(&db, &model, Bound::Included(*u), Bound::Included(*u))?;
                }
            }
            Op::Range(a, b) => {
                if indexed {
                    check(&db, &model, *a, *b)?;
                }
            }
        }
    }
    if !indexed {
        create_indexes(&db, &policy);
    }
    for u in 0..8 {
        check(&db, &model, Bound::Included(u), Bound::Included(u))?;
    }
    check(&db, &model, Bound::Unbounded, Bound::Unbounded)?;
    check(&db, &model, Bound::Included(2), Bound::Excluded(6))?;
    db.close().unwrap();
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(
        cases("SILT_RECENCY_CASES", 12)
    ))]

    #[test]
    fn recency_indexes_match_the_model(
        ops in proptest::collection::vec(op(), 1..160),
        late in 0usize..80,
    ) {
        for policy in ["tiered(3)", "leveled(2,3,2KB,4KB)", "binomial(3)", "prefix(4KB,3)", "no-merge"] {
            run(&ops, policy, late)?;
        }
    }
}

/// Records written before a crash come back through the log, with the
/// embedded index's memtable structure rebuilt by the replay, and the
/// eager and lazy entries replayed by index id.
#[test]
fn crash_recovery_replays_every_kind() {
    let dir = tempfile::tempdir().unwrap();
    let fault = Arc::new(FaultInjector::new());
    let policy = MergePolicy::parse("tiered(3)").unwrap();
    let db = create(dir.path(), &fault, &policy, true);
    let ds = db.dataset("t").unwrap();
    let mut model: Model = BTreeMap::new();
    let mut n = 0;
    for i in 0..300i64 {
        n += 1;
        let (k, u) = (i % 70, (i * 7) % 5);
        ds.upsert(record(k, Some(u), 1, n)).unwrap();
        model.insert(k, (Some(u), n));
        if i == 150 {
            ds.flush().unwrap();
        }
        if i % 11 == 0 {
            ds.delete(&[Value::Int((i * 3) % 70)]).unwrap();
            model.remove(&((i * 3) % 70));
        }
    }
    std::thread::sleep(std::time::Duration::from_millis(30));
    drop(ds);
    fault.fail_next_fsync();
    let _ = db.close();
    drop(db);
    let db = Database::open(dir.path(), opts(&Arc::new(FaultInjector::new()))).unwrap();
    assert!(
        db.recovery_summary().records_redone > 0,
        "nothing was replayed: {:?}",
        db.recovery_summary()
    );
    for u in 0..5 {
        check(&db, &model, Bound::Included(u), Bound::Included(u)).unwrap();
    }
    check(&db, &model, Bound::Included(1), Bound::Included(3)).unwrap();
}

/// The kinds refuse queries they cannot answer and records whose field
/// cannot be indexed, with errors that say what to do.
#[test]
fn errors_say_what_to_do() {
    let dir = tempfile::tempdir().unwrap();
    let fault = Arc::new(FaultInjector::new());
    let policy = MergePolicy::default();
    let db = create(dir.path(), &fault, &policy, true);
    let ds = db.dataset("t").unwrap();
    let r = ds.query(
        "lazy",
        &Query::Range {
            lo: Bound::Unbounded,
            hi: Bound::Unbounded,
        },
        QueryOptions::default(),
    );
    let e = r.err().map(|e| e.to_string()).unwrap_or_default();
    assert!(e.contains("use a recent query"), "{e}");
    let e = ds
        .index_range("eager", Bound::Unbounded, Bound::Unbounded, None)
        .unwrap_err()
        .to_string();
    assert!(e.contains("not a btree"), "{e}");
    // A record whose field is an array: refused, nothing written.
    let bad = Value::Object(vec![
        ("id".into(), Value::Int(1)),
        (
            "tag".into(),
            Value::Array(vec![Value::Int(1), Value::Int(2)]),
        ),
    ]);
    db.create_index("t", IndexDef::recency("by_tag", IndexKind::Embedded, "tag"))
        .unwrap();
    let e = ds.upsert(bad).unwrap_err().to_string();
    assert!(e.contains("embedded index `by_tag`"), "{e}");
    assert!(ds.get(&[Value::Int(1)]).unwrap().is_none());
    // Bits per key only for embedded indexes.
    let mut d = IndexDef::recency("x", IndexKind::Lazy, "user");
    d.options.bits_per_key = Some(10.0);
    assert!(db.create_index("t", d).is_err());
    let mut d = IndexDef::recency("y", IndexKind::Eager, "user");
    d.fields.push("n".into());
    assert!(db.create_index("t", d).is_err());
}

/// The early-stop rule: a lookup whose k newest matches are in the newest
/// components does not read the older ones (embedded and lazy); eager reads
/// one list; composite and btree read every component.
#[test]
fn early_stop_reads_only_the_newest_components() {
    let dir = tempfile::tempdir().unwrap();
    let fault = Arc::new(FaultInjector::new());
    let policy = MergePolicy::parse("no-merge").unwrap();
    let db = create(dir.path(), &fault, &policy, true);
    let ds = db.dataset("t").unwrap();
    let mut n = 0;
    // Six flushed components, each with records of users 0 and 1.
    for round in 0..6i64 {
        for i in 0..20i64 {
            n += 1;
            ds.upsert(record(round * 20 + i, Some(i % 2), 1, n))
                .unwrap();
        }
        ds.flush().unwrap();
    }
    let q = Query::Recent {
        lo: Bound::Included(vec![Value::Int(0)]),
        hi: Bound::Included(vec![Value::Int(0)]),
        k: Some(3),
    };
    let run = |index: &str| {
        let mut r = ds.query(index, &q, QueryOptions::default()).unwrap();
        let ids: Vec<i64> = r
            .by_ref()
            .map(|h| h.unwrap().pk[0].as_i64().unwrap())
            .collect();
        (ids, r.stats())
    };
    let all = db.dataset("t").unwrap().stats();
    let primary_components: usize = all
        .indexes
        .iter()
        .filter(|t| t.name.ends_with("/primary"))
        .map(|t| t.components.len())
        .sum();
    assert!(primary_components >= 6, "{primary_components} components");
    for index in ["emb", "lazy", "eager", "comp", "bt"] {
        let (ids, st) = run(index);
        assert_eq!(ids, vec![118, 116, 114], "{index}");
        match index {
            // The newest component of each partition holds the answer: the
            // search stops after at most one component per partition (plus
            // one to learn that the rest are older).
            "emb" | "lazy" => assert!(st.components <= 4, "{index}: {st:?}"),
            "eager" => assert!(st.fetched <= 4, "{index}: {st:?}"),
            _ => assert!(st.components >= 12, "{index}: {st:?}"),
        }
    }
    let (_, st) = run("emb");
    // Only blocks whose bloom filter admits user 0 were read.
    assert!(st.blocks >= 1, "{st:?}");
}

/// Concurrent writers (single records, atomic batches that abort, deletes)
/// and readers: no error but the eager index's "retry" refusal, no
/// deadlock, and once quiet every kind finds exactly the records the
/// primary holds, each list newest first by the records' write order.
#[test]
fn concurrent_writers_aborts_and_readers_agree_with_the_primary() {
    use silt::{BatchOptions, WriteMode};
    let dir = tempfile::tempdir().unwrap();
    let fault = Arc::new(FaultInjector::new());
    let policy = MergePolicy::parse("tiered(3)").unwrap();
    let db = Arc::new(create(dir.path(), &fault, &policy, true));
    let counter = Arc::new(std::sync::atomic::AtomicU64::new(1));
    let mut handles = Vec::new();
    for t in 0..4u64 {
        let (db, counter) = (db.clone(), counter.clone());
        handles.push(std::thread::spawn(move || {
            let ds = db.dataset("t").unwrap();
            let mut x = 0x9E37_79B9_7F4A_7C15u64 ^ (t + 1);
            let mut next = || {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x
            };
            for _ in 0..400 {
                let r = next();
                let id = (r >> 8) as i64 % 150;
                let user = Some((r >> 20) as i64 % 4);
                match r % 10 {
                    0..=4 => {
                        let n = counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                        ds.upsert(record(id, user, 2, n)).unwrap();
                    }
                    5..=7 => {
                        let mut recs = Vec::new();
                        for j in 0..3 {
                            let n = counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                            recs.push(record((id + j * 7) % 150, user, 1, n));
                        }
                        if r % 3 == 0 {
                            // Inserting a key twice: the batch fails at its
                            // last record and is undone.
                            let n = counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                            recs.push(record(id, user, 1, n));
                        }
                        let rep = ds
                            .write_batch(recs, BatchOptions::atomic(WriteMode::Insert))
                            .unwrap();
                        for (_, e) in &rep.failed {
                            let m = e.to_string();
                            assert!(
                                m.contains("duplicate primary key") || m.contains("retry it"),
                                "{m}"
                            );
                        }
                    }
                    8 => {
                        ds.delete(&[Value::Int(id)]).unwrap();
                    }
                    _ => {
                        let q = Query::Recent {
                            lo: Bound::Included(vec![Value::Int((r >> 30) as i64 % 4)]),
                            hi: Bound::Included(vec![Value::Int((r >> 30) as i64 % 4)]),
                            k: Some(5),
                        };
                        for (name, _) in INDEXES {
                            for h in ds.query(name, &q, QueryOptions::default()).unwrap() {
                                h.unwrap();
                            }
                        }
                    }
                }
                if r % 97 == 0 {
                    ds.flush().unwrap();
                }
            }
        }));
    }
    for h in handles {
        h.join().unwrap();
    }
    let ds = db.dataset("t").unwrap();
    let scan: Vec<Value> = ds
        .scan(Bound::Unbounded, Bound::Unbounded)
        .unwrap()
        .map(|r| r.unwrap())
        .collect();
    for u in 0..4 {
        let mut want: Vec<i64> = scan
            .iter()
            .filter(|r| r.get("user").and_then(Value::as_i64) == Some(u))
            .map(|r| r.get("id").and_then(Value::as_i64).unwrap())
            .collect();
        want.sort_unstable();
        let q = Query::Recent {
            lo: Bound::Included(vec![Value::Int(u)]),
            hi: Bound::Included(vec![Value::Int(u)]),
            k: None,
        };
        for (name, _) in INDEXES {
            let mut got: Vec<i64> = ds
                .query(name, &q, QueryOptions::default())
                .unwrap()
                .map(|h| h.unwrap().pk[0].as_i64().unwrap())
                .collect();
            got.sort_unstable();
            assert_eq!(got, want, "index {name} user {u}");
        }
    }
}
