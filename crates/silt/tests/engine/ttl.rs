//! A dataset's `ttl` against a model: records with a time and maybe an
//! expiry are inserted, upserted, deleted, flushed, merged, swept,
//! reopened and crashed. The written clock is the largest time ever
//! written; after every step no read (get, scan, index query) shows an
//! expired record or misses a live one, an insert over an expired record
//! succeeds, and every B+-tree index holds exactly the records the sweeps
//! have not yet deleted (the index agrees with its primary).

use crate::restart::{cases, crash, opts, reopen};
use proptest::prelude::*;
use silt::txn::FaultInjector;
use silt::{
    Database, DatasetDef, DbOptions, Error, FieldType, IndexDef, IndexKind, IndexOptions, ListRead,
    Query, QueryOptions, TtlDef, Value,
};
use std::collections::{BTreeMap, BTreeSet};
use std::ops::Bound;
use std::path::Path;
use std::sync::Arc;

/// id -> (time, expiry field, group, write number): the records stored
/// (expired ones until a sweep deletes them).
type Model = BTreeMap<i64, (i64, Option<i64>, i64, i64)>;

#[derive(Clone, Copy, Debug)]
enum Shape {
    /// Expiry field, swept through a B+-tree on it.
    ExpiryIndexed,
    /// Expiry field, no index on it: swept by full scans.
    ExpiryScanned,
    /// A life of 25 past the time, swept through a B+-tree on the time,
    /// with a grace of 10.
    AfterWithGrace,
}

const LIFE: i64 = 25;

impl Shape {
    fn ttl(self) -> TtlDef {
        match self {
            Shape::ExpiryIndexed | Shape::ExpiryScanned => TtlDef {
                time: Some("t".into()),
                ..TtlDef::at("exp")
            },
            Shape::AfterWithGrace => TtlDef {
                grace: 10,
                ..TtlDef::after("t", LIFE)
            },
        }
    }

    fn grace(self) -> i64 {
        self.ttl().grace
    }

    /// The expiry of a model record.
    fn expiry(self, t: i64, exp: Option<i64>) -> Option<i64> {
        match self {
            Shape::AfterWithGrace => Some(t + LIFE),
            _ => exp,
        }
    }
}

#[derive(Clone, Debug)]
enum Op {
    Upsert(i64, i64, Option<i64>, i64),
    Insert(i64, i64, Option<i64>, i64),
    Delete(i64),
    Flush,
    Compact,
    Sweep,
    Reopen,
    Crash,
    Check(i64),
}

fn op() -> impl Strategy<Value = Op> {
    let rec = || (0i64..30, 0i64..200, prop::option::of(1i64..60), 0i64..3);
    prop_oneof![
        10 => rec().prop_map(|(id, t, life, g)| Op::Upsert(id, t, life.map(|l| t + l), g)),
        4 => rec().prop_map(|(id, t, life, g)| Op::Insert(id, t, life.map(|l| t + l), g)),
        2 => (0i64..30).prop_map(Op::Delete),
        2 => Just(Op::Flush),
        1 => Just(Op::Compact),
        3 => Just(Op::Sweep),
        1 => Just(Op::Reopen),
        1 => Just(Op::Crash),
        3 => (0i64..3).prop_map(Op::Check),
    ]
}

fn lists() -> IndexDef {
    IndexDef {
        name: "lists".into(),
        id: 0,
        kind: IndexKind::Valuelist,
        fields: vec!["g".into()],
        policy: Default::default(),
        options: IndexOptions {
            time: Some("t".into()),
            expiry: Some("exp".into()),
            ..IndexOptions::default()
        },
    }
}

/// No background sweeps: the model decides when records go.
fn test_opts(fault: &Arc<FaultInjector>) -> DbOptions {
    DbOptions {
        ttl_sweep_ms: 0,
        ..opts(fault)
    }
}

fn create(dir: &Path, fault: &Arc<FaultInjector>, shape: Shape) -> Database {
    let db = Database::open(dir, test_opts(fault)).unwrap();
    let mut def = DatasetDef::new("e", &["id"])
        .field("id", FieldType::Int)
        .field("t", FieldType::Int)
        .field("exp", FieldType::Int)
        .field("g", FieldType::Int)
        .memory_budget(1 << 20)
        .block_size(512)
        .partitions(2);
    def.ttl = Some(shape.ttl());
    db.create_dataset(def).unwrap();
    db.create_index("e", IndexDef::btree("by_g", &["g"]))
        .unwrap();
    match shape {
        Shape::ExpiryIndexed => {
            // Value lists expiring alike: a swept record leaves no marker
            // in them; reads at the clock must still skip its item.
            db.create_index("e", lists()).unwrap();
            db.create_index("e", IndexDef::btree("by_exp", &["exp"]))
                .unwrap()
        }
        Shape::AfterWithGrace => db
            .create_index("e", IndexDef::btree("by_t", &["t"]))
            .unwrap(),
        Shape::ExpiryScanned => return db,
    };
    db
}

fn record(id: i64, t: i64, exp: Option<i64>, g: i64, n: i64) -> Value {
    let mut f = vec![
        ("id".into(), Value::Int(id)),
        ("t".into(), Value::Int(t)),
        ("g".into(), Value::Int(g)),
        ("n".into(), Value::Int(n)),
    ];
    if let Some(e) = exp {
        f.push(("exp".into(), Value::Int(e)));
    }
    Value::Object(f)
}

struct State {
    shape: Shape,
    m: Model,
    /// The written clock: the largest time ever written.
    clock: Option<i64>,
}

impl State {
    fn live(&self, id: i64) -> bool {
        self.m.get(&id).is_some_and(
            |&(t, e, _, _)| match (self.shape.expiry(t, e), self.clock) {
                (Some(e), Some(c)) => e > c,
                _ => true,
            },
        )
    }

    fn visible(&self) -> BTreeSet<i64> {
        self.m.keys().copied().filter(|&id| self.live(id)).collect()
    }
}

fn n_of(v: &Value) -> i64 {
    v.get("n").and_then(Value::as_i64).unwrap()
}

fn check(db: &Database, s: &State, g: i64) -> Result<(), TestCaseError> {
    let ds = db.dataset("e").unwrap();
    let want = s.visible();
    // Point reads.
    for id in 0..30 {
        let got = ds.get(&[Value::Int(id)]).unwrap();
        prop_assert_eq!(
            got.as_ref().map(n_of),
            want.contains(&id).then(|| s.m[&id].3),
            "get {} (clock {:?})",
            id,
            s.clock
        );
    }
    // A scan.
    let scanned: BTreeSet<i64> = ds
        .scan(Bound::Unbounded, Bound::Unbounded)
        .unwrap()
        .map(|r| r.unwrap().get("id").and_then(Value::as_i64).unwrap())
        .collect();
    prop_assert_eq!(&scanned, &want, "scan (clock {:?})", s.clock);
    // An index query fetching records.
    let q = Query::Range {
        lo: Bound::Included(vec![Value::Int(g)]),
        hi: Bound::Included(vec![Value::Int(g)]),
    };
    let hits: BTreeSet<i64> = ds
        .query("by_g", &q, QueryOptions::default())
        .unwrap()
        .map(|h| h.unwrap().pk[0].as_i64().unwrap())
        .collect();
    let want_g: BTreeSet<i64> = want.iter().copied().filter(|id| s.m[id].2 == g).collect();
    prop_assert_eq!(&hits, &want_g, "query g = {}", g);
    // Index-only: an entry cannot tell whether its record expired, so
    // the answer is the same.
    let only = QueryOptions {
        index_only: true,
        limit: None,
    };
    let hits: BTreeSet<i64> = ds
        .query("by_g", &q, only)
        .unwrap()
        .map(|h| h.unwrap().pk[0].as_i64().unwrap())
        .collect();
    prop_assert_eq!(&hits, &want_g, "index-only query g = {}", g);
    if matches!(s.shape, Shape::ExpiryIndexed)
        && let Some(clock) = s.clock
    {
        let read = ListRead {
            lo: i64::MIN,
            hi: i64::MAX,
            at: Some(clock),
        };
        let items: BTreeSet<i64> = ds
            .list_read("lists", &[Value::Int(g)], &read)
            .unwrap()
            .iter()
            .map(|i| i.record.get("id").and_then(Value::as_i64).unwrap())
            .collect();
        prop_assert_eq!(&items, &want_g, "list g = {} at {}", g, clock);
    }
    // The index agrees with the primary: its entries are the stored
    // records, expired or not.
    let entries: BTreeSet<i64> = ds
        .index_range_keys("by_g", Bound::Unbounded, Bound::Unbounded, None)
        .unwrap()
        .into_iter()
        .map(|h| h.pk[0].as_i64().unwrap())
        .collect();
    let stored: BTreeSet<i64> = s.m.keys().copied().collect();
    prop_assert_eq!(&entries, &stored, "index entries vs stored records");
    Ok(())
}

fn run(ops: &[Op], shape: Shape) -> Result<(), TestCaseError> {
    let dir = tempfile::tempdir().unwrap();
    let mut fault = Arc::new(FaultInjector::new());
    let mut db = create(dir.path(), &fault, shape);
    let mut s = State {
        shape,
        m: BTreeMap::new(),
        clock: None,
    };
    let mut n = 0;
    for op in ops {
        let ds = db.dataset("e").unwrap();
        match *op {
            Op::Upsert(id, t, e, g) => {
                n += 1;
                ds.upsert(record(id, t, e, g, n)).unwrap();
                s.clock = s.clock.max(Some(t));
                s.m.insert(id, (t, e, g, n));
            }
            Op::Insert(id, t, e, g) => {
                n += 1;
                let r = ds.insert(record(id, t, e, g, n));
                if s.live(id) {
                    prop_assert!(matches!(r, Err(Error::DuplicateKey { .. })), "{:?}", r);
                } else {
                    prop_assert!(
                        r.is_ok(),
                        "insert over an expired or absent record: {:?}",
                        r
                    );
                    s.clock = s.clock.max(Some(t));
                    s.m.insert(id, (t, e, g, n));
                }
            }
            Op::Delete(id) => {
                let existed = ds.delete(&[Value::Int(id)]).unwrap();
                prop_assert_eq!(existed, s.m.remove(&id).is_some());
            }
            Op::Flush => ds.flush().unwrap(),
            Op::Compact => ds.compact().unwrap(),
            Op::Sweep => {
                let rep = db.sweep_expired("e").unwrap();
                let cutoff = s.clock.map(|c| c - shape.grace());
                prop_assert_eq!(rep.cutoff, cutoff);
                let before = s.m.len();
                if let Some(c) = cutoff {
                    s.m.retain(|_, &mut (t, e, _, _)| shape.expiry(t, e).is_none_or(|e| e > c));
                }
                prop_assert_eq!(rep.expired as usize, before - s.m.len(), "{:?}", rep);
            }
            Op::Reopen => {
                drop(ds);
                db.close().unwrap();
                drop(db);
                db = Database::open(dir.path(), test_opts(&fault)).unwrap();
            }
            Op::Crash => {
                drop(ds);
                db = crash(db, dir.path(), &mut fault);
                db.close().unwrap();
                drop(db);
                db = Database::open(dir.path(), test_opts(&fault)).unwrap();
            }
            Op::Check(g) => check(&db, &s, g)?,
        }
    }
    check(&db, &s, 0)?;
    db.close().unwrap();
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases("SILT_TTL_CASES", 12)))]

    #[test]
    fn expiring_records_match_the_model(ops in proptest::collection::vec(op(), 1..200)) {
        for shape in [Shape::ExpiryIndexed, Shape::ExpiryScanned, Shape::AfterWithGrace] {
            run(&ops, shape)?;
        }
    }
}

#[test]
fn a_ttl_is_refused_with_a_reason() {
    let dir = tempfile::tempdir().unwrap();
    let fault = Arc::new(FaultInjector::new());
    let db = reopen(
        create(dir.path(), &fault, Shape::ExpiryIndexed),
        dir.path(),
        &fault,
    );
    let bad = |t: TtlDef| db.set_ttl("e", Some(t)).unwrap_err().to_string();
    assert!(bad(TtlDef::default()).contains("give `expiry`"));
    assert!(bad(TtlDef::after("t", 0)).contains("more than 0"));
    assert!(bad(TtlDef::at("nope")).contains("not a declared field"));
    assert!(bad(TtlDef::at("exp")).contains("give `time` too"));
    let wall = TtlDef {
        clock: Some("sundial".into()),
        ..TtlDef::at("exp")
    };
    assert!(bad(wall).contains("unknown clock"));
    // The refused ttls changed nothing; removing the ttl shows every record.
    let ds = db.dataset("e").unwrap();
    ds.upsert(record(1, 100, Some(50), 0, 1)).unwrap();
    assert!(ds.get(&[Value::Int(1)]).unwrap().is_none());
    db.set_ttl("e", None).unwrap();
    assert!(ds.get(&[Value::Int(1)]).unwrap().is_some());
    // ... and survives a reopen without it.
    let db = reopen(db, dir.path(), &fault);
    assert!(db.dataset("e").unwrap().def().ttl.is_none());
}

#[test]
fn a_key_leading_with_the_time_is_swept_through_the_key() {
    let dir = tempfile::tempdir().unwrap();
    let fault = Arc::new(FaultInjector::new());
    let db = Database::open(dir.path(), test_opts(&fault)).unwrap();
    let mut def = DatasetDef::new("log", &["t", "id"])
        .field("t", FieldType::Int)
        .field("id", FieldType::Int);
    def.ttl = Some(TtlDef::after("t", 10));
    db.create_dataset(def).unwrap();
    let ds = db.dataset("log").unwrap();
    for t in 0..100 {
        ds.insert(Value::Object(vec![
            ("t".into(), Value::Int(t)),
            ("id".into(), Value::Int(t % 7)),
        ]))
        .unwrap();
    }
    // The clock is 99: records of time 89 or less have expired.
    let rep = db.sweep_expired("log").unwrap();
    assert_eq!(rep.path, "primary key");
    assert_eq!((rep.cutoff, rep.expired, rep.scanned), (Some(99), 90, 90));
    assert_eq!(
        ds.scan(Bound::Unbounded, Bound::Unbounded).unwrap().count(),
        10
    );
    let stats = ds.stats().ttl.unwrap();
    assert_eq!((stats.sweeps, stats.expired), (1, 90));
}

#[test]
fn the_background_sweeper_deletes_expired_records() {
    let dir = tempfile::tempdir().unwrap();
    let fault = Arc::new(FaultInjector::new());
    let db = Database::open(
        dir.path(),
        DbOptions {
            ttl_sweep_ms: 20,
            ..opts(&fault)
        },
    )
    .unwrap();
    let mut def = DatasetDef::new("s", &["id"])
        .field("id", FieldType::Int)
        .field("at", FieldType::Timestamp);
    // A wall clock: expiries in the past are gone at once.
    def.ttl = Some(TtlDef {
        clock: Some("unix_us".into()),
        ..TtlDef::at("at")
    });
    db.create_dataset(def).unwrap();
    let ds = db.dataset("s").unwrap();
    for id in 0..50 {
        ds.insert(Value::Object(vec![
            ("id".into(), Value::Int(id)),
            (
                "at".into(),
                Value::Int(if id % 2 == 0 {
                    0
                } else {
                    4_000_000_000_000_000
                }),
            ),
        ]))
        .unwrap();
    }
    assert_eq!(
        ds.scan(Bound::Unbounded, Bound::Unbounded).unwrap().count(),
        25
    );
    // Full scans run on the first sweep, then every 60th.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while ds.stats().ttl.unwrap().expired < 25 {
        assert!(
            std::time::Instant::now() < deadline,
            "the sweeper did not run"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert_eq!(ds.stats().ttl.unwrap().expired, 25);
}

#[test]
fn a_ttl_set_on_existing_records_starts_from_their_newest_time() {
    let dir = tempfile::tempdir().unwrap();
    let mut fault = Arc::new(FaultInjector::new());
    let db = Database::open(dir.path(), test_opts(&fault)).unwrap();
    let def = DatasetDef::new("old", &["id"])
        .field("id", FieldType::Int)
        .field("t", FieldType::Int)
        .field("u", FieldType::Int);
    db.create_dataset(def).unwrap();
    let ds = db.dataset("old").unwrap();
    for i in 0..100 {
        ds.insert(Value::Object(vec![
            ("id".into(), Value::Int(i)),
            ("t".into(), Value::Int(i)),
            ("u".into(), Value::Int(1000 - i)),
        ]))
        .unwrap();
    }
    ds.flush().unwrap();
    let count = |db: &Database| {
        db.dataset("old")
            .unwrap()
            .scan(Bound::Unbounded, Bound::Unbounded)
            .unwrap()
            .count()
    };
    // The clock is 99 at once (no write needed): times 89 and below expired.
    db.set_ttl("old", Some(TtlDef::after("t", 10))).unwrap();
    assert_eq!(count(&db), 10);
    // It survives a crash right away (no checkpoint in between).
    let db = crash(db, dir.path(), &mut fault);
    assert_eq!(count(&db), 10);
    // A ttl on another field starts from that field's newest value (1000):
    // u of 990 and below expired, which is ids 10 and up.
    db.set_ttl("old", Some(TtlDef::after("u", 10))).unwrap();
    assert_eq!(count(&db), 10);
    let db = reopen(db, dir.path(), &fault);
    assert_eq!(count(&db), 10);
    let ids: Vec<i64> = db
        .dataset("old")
        .unwrap()
        .scan(Bound::Unbounded, Bound::Unbounded)
        .unwrap()
        .map(|r| r.unwrap().get("id").and_then(Value::as_i64).unwrap())
        .collect();
    assert_eq!(ids, (0..10).collect::<Vec<_>>());
    db.close().unwrap();
}
