//! Transactions of many statements over many datasets (`Database::begin`):
//! own writes visible inside, invisible outside until commit, atomic across
//! datasets and their secondary indexes, conflicts detected, savepoints,
//! bounds, recovery; a bank-transfer stress test and a property test against
//! a model.

use proptest::prelude::*;
use silt::{
    Database, DatasetDef, DbOptions, Durability, Error, FieldType, Geometry, IndexDef, Query,
    QueryOptions, TxnLimits, Value,
};
use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

fn open(dir: &std::path::Path) -> Database {
    Database::open(
        dir,
        DbOptions {
            durability: Durability::Sync,
            block_cache_bytes: 4 << 20,
            ..Default::default()
        },
    )
    .unwrap()
}

/// A dataset with a B+-tree on `bal` and an R-tree on `loc`.
fn accounts(db: &Database, name: &str) -> Arc<silt::Dataset> {
    let ds = db
        .create_dataset(
            DatasetDef::new(name, &["id"])
                .field("id", FieldType::Int)
                .field("bal", FieldType::Int)
                .field("loc", FieldType::Geometry)
                .memory_budget(1 << 20)
                .partitions(2),
        )
        .unwrap();
    db.create_index(name, IndexDef::btree("by_bal", &["bal"]))
        .unwrap();
    db.create_index(name, IndexDef::rtree("by_loc", "loc"))
        .unwrap();
    db.dataset(name).unwrap();
    ds
}

fn acct(id: i64, bal: i64) -> Value {
    Value::Object(vec![
        ("id".into(), Value::Int(id)),
        ("bal".into(), Value::Int(bal)),
        (
            "loc".into(),
            Value::Geometry(Geometry::point(
                (id % 300) as f64 / 2.0,
                (id % 120) as f64 / 2.0 - 30.0,
            )),
        ),
    ])
}

fn bal(v: &Value) -> i64 {
    match v.get("bal") {
        Some(Value::Int(b)) => *b,
        other => panic!("no balance in {v:?}: {other:?}"),
    }
}

fn ids(ds: &Arc<silt::Dataset>) -> Vec<i64> {
    ds.scan(Bound::Unbounded, Bound::Unbounded)
        .unwrap()
        .map(|r| match r.unwrap().get("id") {
            Some(Value::Int(i)) => *i,
            _ => panic!("no id"),
        })
        .collect()
}

/// Every index of `ds` lists exactly the records of the primary.
fn indexes_agree(ds: &Arc<silt::Dataset>) {
    let mut want = ids(ds);
    want.sort_unstable();
    let all_bal = Query::Range {
        lo: Bound::Unbounded,
        hi: Bound::Unbounded,
    };
    let world = Query::Intersects(Geometry::rect(-180.0, -90.0, 180.0, 90.0));
    for (index, q) in [("by_bal", all_bal), ("by_loc", world)] {
        let mut got: Vec<i64> = ds
            .query(index, &q, QueryOptions::default())
            .unwrap()
            .map(|h| match h.unwrap().pk[0] {
                Value::Int(i) => i,
                _ => panic!("pk"),
            })
            .collect();
        got.sort_unstable();
        assert_eq!(got, want, "index {index} of {}", ds.name());
    }
}

#[test]
fn own_writes_visible_inside_invisible_outside_until_commit() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    let a = accounts(&db, "a");
    let b = accounts(&db, "b");
    a.insert(acct(1, 100)).unwrap();
    b.insert(acct(2, 50)).unwrap();

    let mut tx = db.begin().unwrap();
    tx.insert(&a, acct(3, 7)).unwrap();
    tx.upsert(&b, acct(2, 60)).unwrap();
    assert!(tx.delete(&a, &[Value::Int(1)]).unwrap());
    // Inside: the transaction's view.
    assert_eq!(bal(&tx.get(&b, &[Value::Int(2)]).unwrap().unwrap()), 60);
    assert!(tx.get(&a, &[Value::Int(1)]).unwrap().is_none());
    let seen: Vec<i64> = tx
        .scan(&a, Bound::Unbounded, Bound::Unbounded)
        .unwrap()
        .map(|r| bal(&r.unwrap()))
        .collect();
    assert_eq!(seen, vec![7]);
    let q = Query::Range {
        lo: Bound::Included(vec![Value::Int(55)]),
        hi: Bound::Unbounded,
    };
    let hits: Vec<_> = tx
        .query(&b, "by_bal", &q, QueryOptions::default())
        .unwrap()
        .map(|h| h.unwrap().pk)
        .collect();
    assert_eq!(hits, vec![vec![Value::Int(2)]]);
    let near: Vec<_> = tx
        .query(
            &a,
            "by_loc",
            &Query::Nearest {
                lon: 0.0,
                lat: 0.0,
                k: 5,
            },
            QueryOptions::default(),
        )
        .unwrap()
        .map(|h| h.unwrap().pk)
        .collect();
    assert_eq!(near, vec![vec![Value::Int(3)]]);
    // Outside: nothing yet.
    assert!(a.get(&[Value::Int(3)]).unwrap().is_none());
    assert_eq!(bal(&b.get(&[Value::Int(2)]).unwrap().unwrap()), 50);
    assert!(a.get(&[Value::Int(1)]).unwrap().is_some());

    let info = tx.commit().unwrap();
    assert_eq!(info.writes, 3);
    assert!(a.get(&[Value::Int(1)]).unwrap().is_none());
    assert_eq!(bal(&a.get(&[Value::Int(3)]).unwrap().unwrap()), 7);
    assert_eq!(bal(&b.get(&[Value::Int(2)]).unwrap().unwrap()), 60);
    indexes_agree(&a);
    indexes_agree(&b);

    // And after a restart.
    drop((a, b));
    db.close().unwrap();
    drop(db);
    let db = open(dir.path());
    let (a, b) = (db.dataset("a").unwrap(), db.dataset("b").unwrap());
    assert_eq!(ids(&a), vec![3]);
    assert_eq!(bal(&b.get(&[Value::Int(2)]).unwrap().unwrap()), 60);
    indexes_agree(&a);
    indexes_agree(&b);
}

#[test]
fn rollback_and_drop_leave_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    let a = accounts(&db, "a");
    let b = accounts(&db, "b");
    let mut tx = db.begin().unwrap();
    tx.insert(&a, acct(1, 1)).unwrap();
    tx.insert(&b, acct(1, 1)).unwrap();
    tx.rollback();
    {
        let mut tx = db.begin().unwrap();
        tx.insert(&a, acct(2, 2)).unwrap();
    }
    assert!(ids(&a).is_empty());
    assert!(ids(&b).is_empty());
    indexes_agree(&a);
    indexes_agree(&b);
    assert_eq!(db.stats().wal.commits, 0);
}

/// A statement that fails inside a transaction changes nothing and leaves
/// the transaction usable; a duplicate is reported at the insert.
#[test]
fn a_failed_statement_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    let a = accounts(&db, "a");
    a.insert(acct(1, 1)).unwrap();
    let mut tx = db.begin().unwrap();
    tx.insert(&a, acct(2, 2)).unwrap();
    assert!(matches!(
        tx.insert(&a, acct(1, 9)),
        Err(Error::DuplicateKey { .. })
    ));
    assert!(matches!(
        tx.insert(&a, acct(2, 9)),
        Err(Error::DuplicateKey { .. })
    ));
    let bad = Value::Object(vec![("bal".into(), Value::Int(1))]);
    assert!(tx.insert(&a, bad).is_err());
    assert_eq!(tx.pending_writes(), 1);
    // Delete then insert again in the same transaction replaces.
    assert!(tx.delete(&a, &[Value::Int(1)]).unwrap());
    assert!(!tx.delete(&a, &[Value::Int(1)]).unwrap());
    tx.insert(&a, acct(1, 5)).unwrap();
    tx.commit().unwrap();
    assert_eq!(bal(&a.get(&[Value::Int(1)]).unwrap().unwrap()), 5);
    assert_eq!(bal(&a.get(&[Value::Int(2)]).unwrap().unwrap()), 2);
    indexes_agree(&a);
}

/// First committer wins: a transaction whose read was overwritten by another
/// commit fails with `Conflict` naming the key, and applies nothing.
#[test]
fn lost_update_is_a_conflict_and_applies_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    let a = accounts(&db, "a");
    let b = accounts(&db, "b");
    a.insert(acct(1, 100)).unwrap();
    let mut t1 = db.begin().unwrap();
    let mut t2 = db.begin().unwrap();
    let x = bal(&t1.get(&a, &[Value::Int(1)]).unwrap().unwrap());
    let y = bal(&t2.get(&a, &[Value::Int(1)]).unwrap().unwrap());
    t1.upsert(&a, acct(1, x - 10)).unwrap();
    t1.insert(&b, acct(7, 10)).unwrap();
    t2.upsert(&a, acct(1, y - 20)).unwrap();
    t2.insert(&b, acct(8, 20)).unwrap();
    t2.commit().unwrap();
    let e = t1.commit().unwrap_err();
    match &e {
        Error::Conflict { dataset, key } => {
            assert_eq!(dataset, "a");
            assert_eq!(key, "1");
        }
        other => panic!("expected a conflict, got {other}"),
    }
    assert!(e.to_string().contains("retry"), "{e}");
    assert_eq!(bal(&a.get(&[Value::Int(1)]).unwrap().unwrap()), 80);
    assert_eq!(ids(&b), vec![8]);
    indexes_agree(&a);
    indexes_agree(&b);

    // A key read absent and inserted by someone else meanwhile.
    let mut t3 = db.begin().unwrap();
    assert!(t3.get(&b, &[Value::Int(9)]).unwrap().is_none());
    t3.insert(&b, acct(9, 1)).unwrap();
    b.insert(acct(9, 2)).unwrap();
    assert!(matches!(t3.commit(), Err(Error::Conflict { .. })));
    assert_eq!(bal(&b.get(&[Value::Int(9)]).unwrap().unwrap()), 2);

    // A read-only transaction whose read changed cannot commit either; a
    // flush between read and commit is not a change.
    let mut t4 = db.begin().unwrap();
    t4.get(&a, &[Value::Int(1)]).unwrap();
    t4.get(&b, &[Value::Int(8)]).unwrap();
    db.flush().unwrap();
    let mut t5 = db.begin().unwrap();
    t5.get(&b, &[Value::Int(8)]).unwrap();
    t4.commit().unwrap();
    b.upsert(acct(8, 21)).unwrap();
    assert!(matches!(t5.commit(), Err(Error::Conflict { .. })));
}

#[test]
fn savepoints_undo_only_later_writes() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    let a = accounts(&db, "a");
    let b = accounts(&db, "b");
    let mut tx = db.begin().unwrap();
    tx.insert(&a, acct(1, 1)).unwrap();
    tx.savepoint("s1");
    tx.insert(&a, acct(2, 2)).unwrap();
    tx.upsert(&a, acct(1, 11)).unwrap();
    tx.savepoint("s2");
    tx.insert(&b, acct(3, 3)).unwrap();
    tx.rollback_to("s2").unwrap();
    assert!(tx.get(&b, &[Value::Int(3)]).unwrap().is_none());
    tx.rollback_to("s1").unwrap();
    assert_eq!(bal(&tx.get(&a, &[Value::Int(1)]).unwrap().unwrap()), 1);
    assert!(tx.get(&a, &[Value::Int(2)]).unwrap().is_none());
    assert!(matches!(tx.rollback_to("s2"), Err(Error::Txn(_))));
    tx.insert(&b, acct(4, 4)).unwrap();
    tx.release_savepoint("s1").unwrap();
    assert!(matches!(tx.rollback_to("s1"), Err(Error::Txn(_))));
    tx.commit().unwrap();
    assert_eq!(ids(&a), vec![1]);
    assert_eq!(bal(&a.get(&[Value::Int(1)]).unwrap().unwrap()), 1);
    assert_eq!(ids(&b), vec![4]);
    indexes_agree(&a);
    indexes_agree(&b);
}

#[test]
fn a_transaction_past_its_bound_is_refused_clearly() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    let a = accounts(&db, "a");
    let mut tx = db
        .begin_with(TxnLimits {
            max_bytes: 1 << 20,
            max_writes: 10,
        })
        .unwrap();
    for i in 0..10 {
        tx.insert(&a, acct(i, i)).unwrap();
    }
    let e = tx.insert(&a, acct(10, 10)).unwrap_err();
    assert!(matches!(e, Error::TxnTooLarge { limit: 10, .. }), "{e}");
    assert!(e.to_string().contains("smaller transactions"), "{e}");
    // Rewriting a buffered key is not a new write.
    tx.upsert(&a, acct(3, 33)).unwrap();
    assert_eq!(tx.pending_writes(), 10);
    let mut big = db
        .begin_with(TxnLimits {
            max_bytes: 10_000,
            max_writes: 1000,
        })
        .unwrap();
    let pad = |i: i64| {
        let Value::Object(mut f) = acct(i, i) else {
            unreachable!()
        };
        f.push(("pad".into(), Value::String("x".repeat(3000))));
        Value::Object(f)
    };
    big.insert(&a, pad(100)).unwrap();
    big.insert(&a, pad(101)).unwrap();
    big.insert(&a, pad(102)).unwrap();
    assert!(matches!(
        big.insert(&a, pad(103)),
        Err(Error::TxnTooLarge { .. })
    ));
    // A savepoint rollback gives the room back.
    big.rollback_to("none").unwrap_err();
    big.savepoint("s");
    big.delete(&a, &[Value::Int(100)]).unwrap();
    big.rollback_to("s").unwrap();
    big.commit().unwrap();
    tx.commit().unwrap();
    assert_eq!(ids(&a).len(), 13);
    indexes_agree(&a);
}

/// A transaction that fails while applying (an indexed field that cannot be
/// indexed) is undone in every dataset and index.
#[test]
fn a_failure_while_applying_undoes_every_dataset() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    let a = accounts(&db, "a");
    let b = accounts(&db, "b");
    a.insert(acct(1, 1)).unwrap();
    let mut tx = db.begin().unwrap();
    tx.upsert(&a, acct(1, 2)).unwrap();
    tx.insert(&a, acct(2, 2)).unwrap();
    tx.insert(&b, acct(3, 3)).unwrap();
    // Another writer takes key 2 after the transaction checked it: the
    // commit's validation catches it before anything is applied.
    a.insert(acct(2, 99)).unwrap();
    assert!(matches!(tx.commit(), Err(Error::Conflict { .. })));
    assert_eq!(bal(&a.get(&[Value::Int(1)]).unwrap().unwrap()), 1);
    assert_eq!(bal(&a.get(&[Value::Int(2)]).unwrap().unwrap()), 99);
    assert!(ids(&b).is_empty());
    indexes_agree(&a);
    indexes_agree(&b);
}

/// Bank transfers between accounts in two datasets, many threads, random
/// aborts, conflicts retried: the total never changes, and no reader
/// transaction that commits ever saw a half-applied transfer.
#[test]
fn bank_transfers_keep_the_total() {
    const ACCOUNTS: i64 = 40;
    const THREADS: u64 = 6;
    const TRANSFERS: u64 = 150;
    let dir = tempfile::tempdir().unwrap();
    let db = Arc::new(open(dir.path()));
    let a = accounts(&db, "a");
    let b = accounts(&db, "b");
    for i in 0..ACCOUNTS {
        a.insert(acct(i, 1000)).unwrap();
        b.insert(acct(i, 1000)).unwrap();
    }
    let total = 2 * ACCOUNTS * 1000;
    let done = Arc::new(AtomicBool::new(false));
    let conflicts = Arc::new(AtomicU64::new(0));
    let checked = Arc::new(AtomicU64::new(0));
    let mut readers = Vec::new();
    for r in 0..2u64 {
        let (db, a, b, done, checked) = (
            db.clone(),
            a.clone(),
            b.clone(),
            done.clone(),
            checked.clone(),
        );
        readers.push(std::thread::spawn(move || {
            let mut n = 0u64;
            while !done.load(Ordering::SeqCst) || n == 0 {
                let mut tx = db.begin().unwrap();
                let mut sum = 0;
                for i in 0..ACCOUNTS {
                    let pk = [Value::Int(i)];
                    sum += bal(&tx.get(&a, &pk).unwrap().unwrap());
                    sum += bal(&tx.get(&b, &pk).unwrap().unwrap());
                }
                match tx.commit() {
                    Ok(_) => {
                        assert_eq!(sum, total, "reader {r} saw a half-applied transfer");
                        n += 1;
                    }
                    Err(Error::Conflict { .. }) => {}
                    Err(e) => panic!("{e}"),
                }
            }
            checked.fetch_add(n, Ordering::SeqCst);
        }));
    }
    let mut writers = Vec::new();
    for t in 0..THREADS {
        let (db, a, b, conflicts) = (db.clone(), a.clone(), b.clone(), conflicts.clone());
        writers.push(std::thread::spawn(move || {
            let mut x = 0x2545_F491_4F6C_DD1D_u64 ^ (t + 1);
            let mut rnd = move || {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x
            };
            let mut done = 0;
            while done < TRANSFERS {
                let (from_a, to_a) = (rnd() % 2 == 0, rnd() % 2 == 0);
                let (i, j) = (
                    (rnd() % ACCOUNTS as u64) as i64,
                    (rnd() % ACCOUNTS as u64) as i64,
                );
                if from_a == to_a && i == j {
                    continue;
                }
                let amount = (rnd() % 50) as i64;
                let abort = rnd() % 10 == 0;
                let (src, dst) = (if from_a { &a } else { &b }, if to_a { &a } else { &b });
                let mut tx = db.begin().unwrap();
                let s = bal(&tx.get(src, &[Value::Int(i)]).unwrap().unwrap());
                tx.upsert(src, acct(i, s - amount)).unwrap();
                let d = bal(&tx.get(dst, &[Value::Int(j)]).unwrap().unwrap());
                tx.upsert(dst, acct(j, d + amount)).unwrap();
                if abort {
                    tx.rollback();
                    continue;
                }
                match tx.commit() {
                    Ok(_) => done += 1,
                    Err(Error::Conflict { .. }) => {
                        conflicts.fetch_add(1, Ordering::Relaxed);
                    }
                    Err(e) => panic!("{e}"),
                }
            }
        }));
    }
    for w in writers {
        w.join().unwrap();
    }
    done.store(true, Ordering::SeqCst);
    for r in readers {
        r.join().unwrap();
    }
    let sum: i64 = a
        .scan(Bound::Unbounded, Bound::Unbounded)
        .unwrap()
        .chain(b.scan(Bound::Unbounded, Bound::Unbounded).unwrap())
        .map(|r| bal(&r.unwrap()))
        .sum();
    assert_eq!(sum, total);
    assert!(checked.load(Ordering::SeqCst) > 0);
    indexes_agree(&a);
    indexes_agree(&b);
    // The B+-tree on the balance agrees on the values, not only the keys.
    for ds in [&a, &b] {
        let by_index: i64 = ds
            .query(
                "by_bal",
                &Query::Range {
                    lo: Bound::Unbounded,
                    hi: Bound::Unbounded,
                },
                QueryOptions::default(),
            )
            .unwrap()
            .map(|h| bal(&h.unwrap().record.unwrap()))
            .sum();
        let by_scan: i64 = ds
            .scan(Bound::Unbounded, Bound::Unbounded)
            .unwrap()
            .map(|r| bal(&r.unwrap()))
            .sum();
        assert_eq!(by_index, by_scan);
    }
    eprintln!(
        "{} transfers, {} conflicts retried, {} consistent reads",
        THREADS * TRANSFERS,
        conflicts.load(Ordering::Relaxed),
        checked.load(Ordering::SeqCst)
    );
}

#[derive(Clone, Debug)]
enum Op {
    Insert(bool, i64, i64),
    Upsert(bool, i64, i64),
    Delete(bool, i64),
    Get(bool, i64),
    Savepoint(u8),
    RollbackTo(u8),
}

fn op() -> impl Strategy<Value = Op> {
    let key = 0..12i64;
    prop_oneof![
        (any::<bool>(), key.clone(), 0..100i64).prop_map(|(d, k, v)| Op::Insert(d, k, v)),
        (any::<bool>(), key.clone(), 0..100i64).prop_map(|(d, k, v)| Op::Upsert(d, k, v)),
        (any::<bool>(), key.clone()).prop_map(|(d, k)| Op::Delete(d, k)),
        (any::<bool>(), key).prop_map(|(d, k)| Op::Get(d, k)),
        (0..3u8).prop_map(Op::Savepoint),
        (0..3u8).prop_map(Op::RollbackTo),
    ]
}

type Model = [BTreeMap<i64, i64>; 2];

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    /// Random transactions over two datasets, committed or rolled back,
    /// against a model: every statement answers as the model does, the
    /// transaction sees its own writes, and after commit (and after a
    /// restart) both datasets and their indexes hold exactly the model.
    #[test]
    fn transactions_match_a_model(
        txns in proptest::collection::vec((proptest::collection::vec(op(), 1..20), any::<bool>()), 1..6)
    ) {
        let dir = tempfile::tempdir().unwrap();
        let mut committed: Model = [BTreeMap::new(), BTreeMap::new()];
        {
            let db = open(dir.path());
            let dss = [accounts(&db, "a"), accounts(&db, "b")];
            for (ops, commit) in &txns {
                let mut tx = db.begin().unwrap();
                let mut model = committed.clone();
                let mut saves: Vec<(u8, Model)> = Vec::new();
                for op in ops {
                    match *op {
                        Op::Insert(d, k, v) => {
                            let ds = &dss[usize::from(d)];
                            let m = &mut model[usize::from(d)];
                            let r = tx.insert(ds, acct(k, v));
                            if let std::collections::btree_map::Entry::Vacant(e) = m.entry(k) {
                                prop_assert!(r.is_ok());
                                e.insert(v);
                            } else {
                                let dup = matches!(r, Err(Error::DuplicateKey { .. }));
                                prop_assert!(dup, "expected a duplicate");
                            }
                        }
                        Op::Upsert(d, k, v) => {
                            tx.upsert(&dss[usize::from(d)], acct(k, v)).unwrap();
                            model[usize::from(d)].insert(k, v);
                        }
                        Op::Delete(d, k) => {
                            let r = tx.delete(&dss[usize::from(d)], &[Value::Int(k)]).unwrap();
                            prop_assert_eq!(r, model[usize::from(d)].remove(&k).is_some());
                        }
                        Op::Get(d, k) => {
                            let r = tx.get(&dss[usize::from(d)], &[Value::Int(k)]).unwrap();
                            prop_assert_eq!(r.map(|v| bal(&v)), model[usize::from(d)].get(&k).copied());
                        }
                        Op::Savepoint(n) => {
                            tx.savepoint(&format!("s{n}"));
                            saves.push((n, model.clone()));
                        }
                        Op::RollbackTo(n) => {
                            match saves.iter().rposition(|(m, _)| *m == n) {
                                Some(i) => {
                                    tx.rollback_to(&format!("s{n}")).unwrap();
                                    saves.truncate(i + 1);
                                    model = saves[i].1.clone();
                                }
                                None => {
                                    let name = format!("s{n}");
                                    prop_assert!(tx.rollback_to(&name).is_err(), "no such savepoint");
                                }
                            }
                        }
                    }
                }
                for (d, ds) in dss.iter().enumerate() {
                    let seen: BTreeMap<i64, i64> = tx
                        .scan(ds, Bound::Unbounded, Bound::Unbounded)
                        .unwrap()
                        .map(|r| {
                            let r = r.unwrap();
                            let Some(Value::Int(id)) = r.get("id") else { panic!("id") };
                            (*id, bal(&r))
                        })
                        .collect();
                    prop_assert_eq!(&seen, &model[d]);
                }
                if *commit {
                    tx.commit().unwrap();
                    committed = model;
                } else {
                    tx.rollback();
                }
                for (d, ds) in dss.iter().enumerate() {
                    let keys: Vec<i64> = committed[d].keys().copied().collect();
                    prop_assert_eq!(ids(ds), keys);
                    indexes_agree(ds);
                }
            }
            db.close().unwrap();
        }
        let db = open(dir.path());
        for (d, name) in ["a", "b"].iter().enumerate() {
            let ds = db.dataset(name).unwrap();
            for (k, v) in &committed[d] {
                let got = ds.get(&[Value::Int(*k)]).unwrap().map(|r| bal(&r));
                prop_assert_eq!(got, Some(*v));
            }
            prop_assert_eq!(ids(&ds).len(), committed[d].len());
            indexes_agree(&ds);
        }
    }
}
