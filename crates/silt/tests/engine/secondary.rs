//! Secondary B+-tree indexes: maintenance on insert / upsert / delete inside
//! the record's transaction, bulk build on existing data, drop, range queries
//! (validated and index-only) compared with a brute-force scan of the primary.

use proptest::prelude::*;
use silt::lsm::policy::MergePolicy;
use silt::{Database, DatasetDef, DbOptions, Durability, Error, FieldType, IndexDef, Value};
use std::collections::BTreeMap;
use std::ops::Bound;
use std::path::Path;

fn opts() -> DbOptions {
    DbOptions {
        durability: Durability::None,
        sync: false,
        block_cache_bytes: 1 << 20,
        ..Default::default()
    }
}

fn rec(id: i64, age: i64, city: &str) -> Value {
    Value::Object(vec![
        ("id".into(), Value::Int(id)),
        ("age".into(), Value::Int(age)),
        ("city".into(), Value::String(city.into())),
        ("pad".into(), Value::String("q".repeat((id % 300) as usize))),
    ])
}

fn create(dir: &Path, partitions: u32, policy: &str) -> Database {
    let db = Database::open(dir, opts()).unwrap();
    db.create_dataset(
        DatasetDef::new("people", &["id"])
            .field("id", FieldType::Int)
            .field("age", FieldType::Int)
            .memory_budget(1 << 20)
            .block_size(512)
            .partitions(partitions)
            .policy(MergePolicy::parse(policy).unwrap()),
    )
    .unwrap();
    db
}

#[derive(Clone, Debug)]
enum Op {
    Insert(i64, i64, u8),
    Upsert(i64, i64, u8),
    Delete(i64),
    Query(i64, i64),
    Flush,
    Compact,
    Reopen,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        5 => (0i64..300, 0i64..100, 0u8..4).prop_map(|(k, a, c)| Op::Insert(k, a, c)),
        5 => (0i64..300, 0i64..100, 0u8..4).prop_map(|(k, a, c)| Op::Upsert(k, a, c)),
        3 => (0i64..300).prop_map(Op::Delete),
        3 => (0i64..100, 0i64..100).prop_map(|(a, b)| Op::Query(a.min(b), a.max(b))),
        1 => Just(Op::Flush),
        1 => Just(Op::Compact),
        1 => Just(Op::Reopen),
    ]
}

const CITIES: [&str; 4] = ["Irvine", "Riverside", "Nashville", "Seoul"];

/// Brute force: (age, id) of records with lo <= age <= hi.
fn brute(model: &BTreeMap<i64, (i64, u8)>, lo: i64, hi: i64) -> Vec<(i64, i64)> {
    let mut v: Vec<(i64, i64)> = model
        .iter()
        .filter(|(_, (a, _))| (lo..=hi).contains(a))
        .map(|(k, (a, _))| (*a, *k))
        .collect();
    v.sort();
    v
}

fn check(
    db: &Database,
    model: &BTreeMap<i64, (i64, u8)>,
    lo: i64,
    hi: i64,
) -> Result<(), TestCaseError> {
    let ds = db.dataset("people").unwrap();
    let want = brute(model, lo, hi);
    let (l, h) = ([Value::Int(lo)], [Value::Int(hi)]);
    // Validated path: records, primary-key order.
    let recs = ds
        .index_range("by_age", Bound::Included(&l), Bound::Included(&h), None)
        .unwrap();
    let mut got: Vec<(i64, i64)> = recs
        .iter()
        .map(|r| {
            (
                r.get("age").and_then(Value::as_i64).unwrap(),
                r.get("id").and_then(Value::as_i64).unwrap(),
            )
        })
        .collect();
    got.sort();
    prop_assert_eq!(&got, &want, "validated range {}..={}", lo, hi);
    // The same through `query`, hits as stored records (re-checked in
    // place), and the composite index's prefix the same way.
    let range = |lo: Vec<Value>, hi: Vec<Value>| silt::Query::Range {
        lo: Bound::Included(lo),
        hi: Bound::Included(hi),
    };
    let stored = |index: &str, q: silt::Query| -> Vec<(i64, i64)> {
        let mut v: Vec<(i64, i64)> = ds
            .query(index, &q, silt::QueryOptions::default())
            .unwrap()
            .stored()
            .map(|h| {
                let h = h.unwrap();
                assert!(h.record.is_none(), "a B+-tree hit comes stored");
                let r = silt::value::decode_value(h.stored.as_deref().unwrap()).unwrap();
                let id = r.get("id").and_then(Value::as_i64).unwrap();
                assert_eq!(h.pk, vec![Value::Int(id)]);
                (r.get("age").and_then(Value::as_i64).unwrap(), id)
            })
            .collect();
        v.sort();
        v
    };
    let got = stored("by_age", range(vec![Value::Int(lo)], vec![Value::Int(hi)]));
    prop_assert_eq!(&got, &want, "stored range {}..={}", lo, hi);
    let city = || Value::String(CITIES[1].into());
    let got = stored(
        "by_city_age",
        range(vec![city(), Value::Int(lo)], vec![city(), Value::Int(hi)]),
    );
    let want_c: Vec<(i64, i64)> = {
        let mut v: Vec<(i64, i64)> = model
            .iter()
            .filter(|(_, (a, c))| *c == 1 && (lo..=hi).contains(a))
            .map(|(k, (a, _))| (*a, *k))
            .collect();
        v.sort();
        v
    };
    prop_assert_eq!(got, want_c, "stored composite range {}..={}", lo, hi);
    // Index-only path: (sk, pk) in index order.
    let hits = ds
        .index_range_keys("by_age", Bound::Included(&l), Bound::Included(&h), None)
        .unwrap();
    let got: Vec<(i64, i64)> = hits
        .iter()
        .map(|h| (h.sk[0].as_i64().unwrap(), h.pk[0].as_i64().unwrap()))
        .collect();
    prop_assert_eq!(&got, &want, "index-only range {}..={}", lo, hi);
    // Composite index (city, age): equality on city, range on age.
    for (ci, city) in CITIES.iter().enumerate() {
        let lo_b = [Value::String((*city).into()), Value::Int(lo)];
        let hi_b = [Value::String((*city).into()), Value::Int(hi)];
        let hits = ds
            .index_range_keys(
                "by_city_age",
                Bound::Included(&lo_b),
                Bound::Included(&hi_b),
                None,
            )
            .unwrap();
        let got: Vec<(i64, i64)> = hits
            .iter()
            .map(|h| (h.sk[1].as_i64().unwrap(), h.pk[0].as_i64().unwrap()))
            .collect();
        let want_c: Vec<(i64, i64)> = {
            let mut v: Vec<(i64, i64)> = model
                .iter()
                .filter(|(_, (a, c))| usize::from(*c) == ci && (lo..=hi).contains(a))
                .map(|(k, (a, _))| (*a, *k))
                .collect();
            v.sort();
            v
        };
        prop_assert_eq!(got, want_c, "composite {}", city);
    }
    // Equality prefix on the composite index = all ages of a city.
    let only_city = [Value::String(CITIES[0].into())];
    let n = ds
        .index_range(
            "by_city_age",
            Bound::Included(&only_city),
            Bound::Included(&only_city),
            None,
        )
        .unwrap()
        .len();
    prop_assert_eq!(n, model.values().filter(|(_, c)| *c == 0).count());
    Ok(())
}

fn run(ops: &[Op], partitions: u32, policy: &str) -> Result<(), TestCaseError> {
    let dir = tempfile::tempdir().unwrap();
    let mut db = create(dir.path(), partitions, policy);
    let mut model: BTreeMap<i64, (i64, u8)> = BTreeMap::new();
    // Records inserted before the index exists are bulk-built into it.
    let ds = db.dataset("people").unwrap();
    for k in 0..40 {
        ds.insert(rec(k, k % 7, CITIES[(k % 4) as usize])).unwrap();
        model.insert(k, (k % 7, (k % 4) as u8));
    }
    drop(ds);
    db.create_index("people", IndexDef::btree("by_age", &["age"]))
        .unwrap();
    db.create_index("people", IndexDef::btree("by_city_age", &["city", "age"]))
        .unwrap();
    for op in ops {
        let ds = db.dataset("people").unwrap();
        match op {
            Op::Insert(k, a, c) => {
                let r = ds.insert(rec(*k, *a, CITIES[*c as usize]));
                if model.contains_key(k) {
                    let dup = matches!(r, Err(Error::DuplicateKey { .. }));
                    prop_assert!(dup, "expected a duplicate-key error");
                } else {
                    r.unwrap();
                    model.insert(*k, (*a, *c));
                }
            }
            Op::Upsert(k, a, c) => {
                ds.upsert(rec(*k, *a, CITIES[*c as usize])).unwrap();
                model.insert(*k, (*a, *c));
            }
            Op::Delete(k) => {
                prop_assert_eq!(
                    ds.delete(&[Value::Int(*k)]).unwrap(),
                    model.remove(k).is_some()
                );
            }
            Op::Query(a, b) => check(&db, &model, *a, *b)?,
            Op::Flush => ds.flush().unwrap(),
            Op::Compact => ds.compact().unwrap(),
            Op::Reopen => {
                drop(ds);
                db.close().unwrap();
                drop(db);
                db = Database::open(dir.path(), opts()).unwrap();
            }
        }
    }
    check(&db, &model, 0, 100)?;
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(16))]
    #[test]
    fn btree_index_matches_brute_force(ops in proptest::collection::vec(op(), 1..250)) {
        run(&ops, 1, "tiered(3)")?;
        run(&ops, 3, "leveled(2,3,8KB,16KB)")?;
        run(&ops, 2, "prefix(64KB,3)")?;
    }
}

#[test]
fn a_record_that_cannot_be_indexed_is_refused_and_nothing_changes() {
    let dir = tempfile::tempdir().unwrap();
    let db = create(dir.path(), 1, "tiered(3)");
    db.create_index("people", IndexDef::btree("by_city", &["city"]))
        .unwrap();
    let ds = db.dataset("people").unwrap();
    ds.insert(rec(1, 30, "Irvine")).unwrap();
    let bad = Value::Object(vec![
        ("id".into(), Value::Int(1)),
        ("city".into(), Value::Array(vec![Value::Int(1)])),
    ]);
    let e = ds.upsert(bad).unwrap_err();
    assert!(e.to_string().contains("city"), "{e}");
    let r = ds.get(&[Value::Int(1)]).unwrap().unwrap();
    assert_eq!(r.get("city").and_then(Value::as_str), Some("Irvine"));
    let hits = ds
        .index_range_keys("by_city", Bound::Unbounded, Bound::Unbounded, None)
        .unwrap();
    assert_eq!(hits.len(), 1);
    // Records without the field are simply not indexed.
    ds.insert(Value::Object(vec![("id".into(), Value::Int(2))]))
        .unwrap();
    assert_eq!(
        ds.index_range("by_city", Bound::Unbounded, Bound::Unbounded, None)
            .unwrap()
            .len(),
        1
    );
}

#[test]
fn index_ddl_errors_and_drop() {
    let dir = tempfile::tempdir().unwrap();
    let db = create(dir.path(), 2, "tiered(3)");
    db.create_index("people", IndexDef::btree("by_age", &["age"]))
        .unwrap();
    assert!(matches!(
        db.create_index("people", IndexDef::btree("by_age", &["age"])),
        Err(Error::IndexExists { .. })
    ));
    assert!(matches!(
        db.create_index("people", IndexDef::btree("primary", &["age"])),
        Err(Error::Config(_))
    ));
    assert!(matches!(
        db.drop_index("people", "nope"),
        Err(Error::NoSuchIndex { .. })
    ));
    let ds = db.dataset("people").unwrap();
    for k in 0..100 {
        ds.insert(rec(k, k, "Seoul")).unwrap();
    }
    db.drop_index("people", "by_age").unwrap();
    assert!(matches!(
        ds.index_range("by_age", Bound::Unbounded, Bound::Unbounded, None),
        Err(Error::NoSuchIndex { .. })
    ));
    assert!(!dir.path().join("people/p0/by_age").exists());
    // Re-create after drop: bulk build sees all 100 records; survives reopen.
    db.create_index("people", IndexDef::btree("by_age", &["age"]))
        .unwrap();
    let lo = [Value::Int(10)];
    let hi = [Value::Int(19)];
    assert_eq!(
        ds.index_range("by_age", Bound::Included(&lo), Bound::Included(&hi), None)
            .unwrap()
            .len(),
        10
    );
    drop(ds);
    db.close().unwrap();
    drop(db);
    let db = Database::open(dir.path(), opts()).unwrap();
    let ds = db.dataset("people").unwrap();
    assert_eq!(ds.index_defs().len(), 1);
    assert_eq!(
        ds.index_range(
            "by_age",
            Bound::Excluded(&lo),
            Bound::Excluded(&hi),
            Some(5)
        )
        .unwrap()
        .len(),
        5
    );
}

/// Index ids are never reused: the log may still hold records of a dropped
/// index, and recovery routes records by id.
#[test]
fn index_ids_are_not_reused_after_a_drop() {
    let dir = tempfile::tempdir().unwrap();
    let db = create(dir.path(), 1, "no-merge");
    let a = db
        .create_index("people", IndexDef::btree("a", &["age"]))
        .unwrap();
    db.drop_index("people", "a").unwrap();
    let b = db
        .create_index("people", IndexDef::btree("b", &["city"]))
        .unwrap();
    assert!(b.id > a.id, "id {} reused after dropping {}", b.id, a.id);
    db.close().unwrap();
    drop(db);
    let db = Database::open(dir.path(), opts()).unwrap();
    db.drop_index("people", "b").unwrap();
    let c = db
        .create_index("people", IndexDef::btree("c", &["age"]))
        .unwrap();
    assert!(
        c.id > b.id,
        "id {} reused after dropping {} and a reopen",
        c.id,
        b.id
    );
}
