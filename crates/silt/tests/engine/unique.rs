//! Unique secondary indexes: every write is accepted or refused as a model
//! (a map of key to value, no value twice) says, across flushes, merges,
//! restarts and partitions; concurrent writers of one value: one wins;
//! building one over duplicates is refused; nulls are not values.

use proptest::prelude::*;
use silt::lsm::policy::MergePolicy;
use silt::{Database, DatasetDef, DbOptions, Durability, Error, FieldType, IndexDef, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::ops::Bound;
use std::path::Path;
use std::sync::Arc;

fn opts() -> DbOptions {
    DbOptions {
        durability: Durability::None,
        sync: false,
        block_cache_bytes: 1 << 20,
        ..Default::default()
    }
}

fn rec(id: i64, email: Option<i64>) -> Value {
    let mut f = vec![("id".into(), Value::Int(id))];
    if let Some(e) = email {
        f.push(("email".into(), Value::String(format!("u{e}@x"))));
    }
    f.push(("pad".into(), Value::String("q".repeat((id % 200) as usize))));
    Value::Object(f)
}

fn unique(name: &str, fields: &[&str]) -> IndexDef {
    let mut d = IndexDef::btree(name, fields);
    d.options.unique = true;
    d
}

fn open(dir: &Path, partitions: u32) -> Database {
    let db = Database::open(dir, opts()).unwrap();
    if db.dataset("u").is_err() {
        db.create_dataset(
            DatasetDef::new("u", &["id"])
                .field("id", FieldType::Int)
                .field("email", FieldType::String)
                .memory_budget(1 << 20)
                .block_size(512)
                .partitions(partitions)
                .policy(MergePolicy::parse("tiered(3)").unwrap()),
        )
        .unwrap();
        db.create_index("u", unique("u_email_key", &["email"]))
            .unwrap();
    }
    db
}

#[derive(Clone, Debug)]
enum Op {
    Insert(i64, Option<i64>),
    Upsert(i64, Option<i64>),
    Delete(i64),
    Flush,
    Reopen,
}

fn op() -> impl Strategy<Value = Op> {
    let email = prop_oneof![1 => Just(None), 6 => (0i64..40).prop_map(Some)];
    prop_oneof![
        5 => (0i64..60, email.clone()).prop_map(|(k, e)| Op::Insert(k, e)),
        5 => (0i64..60, email).prop_map(|(k, e)| Op::Upsert(k, e)),
        2 => (0i64..60).prop_map(Op::Delete),
        1 => Just(Op::Flush),
        1 => Just(Op::Reopen),
    ]
}

/// Whether the model lets key `k` take value `e` (no other key has it).
fn free(model: &BTreeMap<i64, Option<i64>>, k: i64, e: Option<i64>) -> bool {
    e.is_none() || !model.iter().any(|(mk, me)| *mk != k && *me == e)
}

fn run(ops: &[Op], partitions: u32) -> Result<(), TestCaseError> {
    let dir = tempfile::tempdir().unwrap();
    let mut db = open(dir.path(), partitions);
    let mut model: BTreeMap<i64, Option<i64>> = BTreeMap::new();
    for (step, o) in ops.iter().enumerate() {
        let ds = db.dataset("u").unwrap();
        match *o {
            Op::Insert(k, e) => {
                let got = ds.insert(rec(k, e));
                let want_ok = !model.contains_key(&k) && free(&model, k, e);
                prop_assert_eq!(got.is_ok(), want_ok, "step {} {:?}: {:?}", step, o, got);
                match got {
                    Ok(()) => {
                        model.insert(k, e);
                    }
                    Err(Error::DuplicateKey { .. }) => prop_assert!(model.contains_key(&k)),
                    Err(Error::DuplicateValue { index, .. }) => {
                        prop_assert_eq!(index, "u_email_key")
                    }
                    Err(other) => prop_assert!(false, "{}", other),
                }
            }
            Op::Upsert(k, e) => {
                let got = ds.upsert(rec(k, e));
                prop_assert_eq!(got.is_ok(), free(&model, k, e), "step {} {:?}", step, o);
                if got.is_ok() {
                    model.insert(k, e);
                }
            }
            Op::Delete(k) => {
                ds.delete(&[Value::Int(k)]).unwrap();
                model.remove(&k);
            }
            Op::Flush => ds.flush().unwrap(),
            Op::Reopen => {
                drop(ds);
                db.close().unwrap();
                drop(db);
                db = open(dir.path(), partitions);
            }
        }
    }
    // The data is the model's, and the index agrees with it.
    let ds = db.dataset("u").unwrap();
    let mut got = BTreeMap::new();
    for r in ds.scan(Bound::Unbounded, Bound::Unbounded).unwrap() {
        let r = r.unwrap();
        let Some(Value::Int(id)) = r.get("id") else {
            panic!("{r:?}")
        };
        let e = match r.get("email") {
            Some(Value::String(s)) => Some(s[1..s.len() - 2].parse::<i64>().unwrap()),
            _ => None,
        };
        got.insert(*id, e);
    }
    prop_assert_eq!(&got, &model);
    for e in 0..40 {
        let v = [Value::String(format!("u{e}@x"))];
        let hits = ds
            .index_range(
                "u_email_key",
                Bound::Included(&v),
                Bound::Included(&v),
                None,
            )
            .unwrap();
        let want = model.values().filter(|x| **x == Some(e)).count();
        prop_assert_eq!(hits.len(), want, "email {}", e);
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(16))]
    #[test]
    fn writes_are_refused_exactly_when_the_model_says(ops in proptest::collection::vec(op(), 1..250)) {
        run(&ops, 1)?;
        run(&ops, 3)?;
    }
}

#[test]
fn concurrent_writers_of_one_value_one_wins() {
    let dir = tempfile::tempdir().unwrap();
    let db = Arc::new(open(dir.path(), 2));
    let ds = db.dataset("u").unwrap();
    let threads: Vec<_> = (0..4i64)
        .map(|t| {
            let ds = ds.clone();
            std::thread::spawn(move || {
                let mut won = Vec::new();
                for i in 0..300i64 {
                    let id = t * 1000 + i;
                    // A small value domain: most writes collide.
                    match ds.insert(rec(id, Some(i % 50))) {
                        Ok(()) => won.push(i % 50),
                        Err(Error::DuplicateValue { .. }) => {}
                        Err(e) => panic!("{e}"),
                    }
                }
                won
            })
        })
        .collect();
    let mut all = Vec::new();
    for t in threads {
        all.extend(t.join().unwrap());
    }
    let distinct: BTreeSet<i64> = all.iter().copied().collect();
    assert_eq!(all.len(), distinct.len(), "a value was accepted twice");
    assert_eq!(distinct.len(), 50);
    assert_eq!(
        ds.scan(Bound::Unbounded, Bound::Unbounded).unwrap().count(),
        50
    );
}

#[test]
fn building_over_duplicates_is_refused_and_composites_and_nulls_work() {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path(), opts()).unwrap();
    let ds = db
        .create_dataset(
            DatasetDef::new("t", &["id"])
                .field("id", FieldType::Int)
                .field("a", FieldType::Int)
                .field("b", FieldType::String),
        )
        .unwrap();
    let r = |id: i64, a: Option<i64>, b: &str| {
        let mut f = vec![("id".into(), Value::Int(id))];
        if let Some(a) = a {
            f.push(("a".into(), Value::Int(a)));
        }
        f.push(("b".into(), Value::String(b.into())));
        Value::Object(f)
    };
    ds.insert(r(1, Some(1), "x")).unwrap();
    ds.insert(r(2, Some(1), "y")).unwrap();
    ds.insert(r(3, None, "x")).unwrap();
    let err = db.create_index("t", unique("t_a_key", &["a"])).unwrap_err();
    assert!(
        matches!(&err, Error::DuplicateValue { values, .. } if values == &["1"]),
        "{err}"
    );
    assert!(ds.index_defs().is_empty());
    // A composite: (1, x) and (1, y) differ; nulls never collide.
    db.create_index("t", unique("t_a_b_key", &["a", "b"]))
        .unwrap();
    ds.insert(r(4, None, "x")).unwrap();
    ds.insert(r(5, Some(2), "x")).unwrap();
    let err = ds.insert(r(6, Some(1), "y")).unwrap_err();
    assert!(err.to_string().contains("(a, b) = (1, y)"), "{err}");
    // An update that keeps its own value is no conflict with itself.
    ds.upsert(r(2, Some(1), "y")).unwrap();
    // Moving a value off one record frees it for another.
    ds.upsert(r(2, Some(9), "y")).unwrap();
    ds.insert(r(6, Some(1), "y")).unwrap();
    // Only btree indexes can be unique.
    let mut bad = IndexDef::keyword("t_b_kw", "b");
    bad.options.unique = true;
    assert!(db.create_index("t", bad).is_err());
}

#[test]
fn transactions_check_at_their_writes_and_undo_everything() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path(), 1);
    let ds = db.dataset("u").unwrap();
    ds.insert(rec(1, Some(1))).unwrap();
    // Two records with one value in one transaction: nothing lands.
    let mut t = db.begin().unwrap();
    t.insert(&ds, rec(2, Some(5))).unwrap();
    t.insert(&ds, rec(3, Some(5))).unwrap();
    assert!(matches!(t.commit(), Err(Error::DuplicateValue { .. })));
    assert!(ds.get(&[Value::Int(2)]).unwrap().is_none());
    // Swapping values between records in one transaction is fine.
    ds.insert(rec(2, Some(2))).unwrap();
    let mut t = db.begin().unwrap();
    t.upsert(&ds, rec(1, Some(7))).unwrap();
    t.upsert(&ds, rec(2, Some(1))).unwrap();
    t.upsert(&ds, rec(1, Some(2))).unwrap();
    t.commit().unwrap();
    let email = |id: i64| {
        ds.get(&[Value::Int(id)])
            .unwrap()
            .unwrap()
            .get("email")
            .cloned()
    };
    assert_eq!(email(1), Some(Value::String("u2@x".into())));
    assert_eq!(email(2), Some(Value::String("u1@x".into())));
}
