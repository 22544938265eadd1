//! Crash torture of multi-dataset transactions: a writer process runs
//! transactions that each write several records across two datasets (each
//! with a B+-tree and an R-tree) plus a ledger record naming what it wrote,
//! and is killed with SIGKILL at random moments. After every restart each
//! transaction must be all there or all absent, in every dataset and index,
//! and every acknowledged one must be there.
//!
//! The writer is this test binary started with `SILT_TXN_CRASH_CHILD` set.
//! Each thread owns its own keys, so its transactions commit in the order of
//! their numbers and a key's value is always the number of the last one that
//! wrote it. Knob: `SILT_CRASH_CYCLES` (default 40 per phase).

use silt::lsm::policy::MergePolicy;
use silt::{Database, DatasetDef, DbOptions, Durability, FieldType, IndexDef, Query, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::ops::Bound;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

const KEYS: i64 = 90;
const THREADS: u64 = 3;

fn db_opts(small: bool) -> DbOptions {
    DbOptions {
        durability: Durability::Sync,
        block_cache_bytes: 4 << 20,
        wal_file_bytes: if small { 256 << 10 } else { 64 << 20 },
        checkpoint_interval_bytes: if small { 1 << 20 } else { 256 << 20 },
        ..Default::default()
    }
}

fn record(k: i64, n: i64, pad: usize) -> Value {
    let lon = (n.wrapping_mul(7).rem_euclid(3600)) as f64 / 10.0 - 180.0;
    let lat = (k.wrapping_mul(13).rem_euclid(1700)) as f64 / 10.0 - 85.0;
    Value::Object(vec![
        ("id".into(), Value::Int(k)),
        ("v".into(), Value::Int(n)),
        (
            "loc".into(),
            Value::Geometry(silt::Geometry::point(lon, lat)),
        ),
        ("pad".into(), Value::String("p".repeat(pad))),
    ])
}

fn dataset(db: &Database, name: &str, budget: u64) -> Arc<silt::Dataset> {
    if let Ok(ds) = db.dataset(name) {
        return ds;
    }
    db.create_dataset(
        DatasetDef::new(name, &["id"])
            .field("id", FieldType::Int)
            .field("v", FieldType::Int)
            .memory_budget(budget)
            .partitions(2)
            .policy(MergePolicy::parse("tiered(3)").expect("policy")),
    )
    .expect("create")
}

fn open_all(db: &Database, pad: usize) -> [Arc<silt::Dataset>; 3] {
    let budget = if pad > 0 { 1 << 20 } else { 64 << 20 };
    let a = dataset(db, "a", budget);
    let b = dataset(db, "b", budget);
    let l = dataset(db, "ledger", budget);
    // The parent may kill the first writer while it creates the indexes.
    for name in ["a", "b"] {
        let have: Vec<String> = db
            .dataset(name)
            .expect("dataset")
            .index_defs()
            .into_iter()
            .map(|d| d.name)
            .collect();
        for d in [
            IndexDef::btree("by_v", &["v"]),
            IndexDef::rtree("by_loc", "loc"),
        ] {
            if !have.contains(&d.name) {
                db.create_index(name, d).expect("create index");
            }
        }
    }
    [a, b, l]
}

/// The writer. Runs only when started by the torture test.
#[test]
fn txn_crash_child() {
    let Ok(dir) = std::env::var("SILT_TXN_CRASH_CHILD") else {
        return;
    };
    let env = |k: &str| std::env::var(k).ok().and_then(|s| s.parse::<u64>().ok());
    let pad = env("SILT_CRASH_PAD").unwrap_or(0) as usize;
    let seed = env("SILT_CRASH_SEED").unwrap_or(1);
    let mut tries = 0;
    let db = loop {
        match Database::open(&dir, db_opts(pad > 0)) {
            Ok(db) => break Arc::new(db),
            Err(silt::Error::Locked { .. }) if tries < 200 => {
                tries += 1;
                std::thread::sleep(Duration::from_millis(10));
            }
            Err(e) => panic!("child open: {e}"),
        }
    };
    let [a, b, l] = open_all(&db, pad);
    let out = Arc::new(std::sync::Mutex::new(std::io::stdout()));
    let mut handles = Vec::new();
    for t in 0..THREADS {
        let (db, a, b, l, out) = (db.clone(), a.clone(), b.clone(), l.clone(), out.clone());
        handles.push(std::thread::spawn(move || {
            let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ (t + 1);
            let mut rnd = move || {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x
            };
            // Transaction numbers grow per thread across restarts.
            let mut n = ((seed as i64) << 24) | ((t as i64) << 20);
            loop {
                n += 1;
                let mut tx = db.begin().expect("begin");
                let mut wrote = Vec::new();
                for _ in 0..2 + rnd() % 4 {
                    let k = (rnd() % (KEYS as u64 / THREADS)) as i64 * THREADS as i64 + t as i64;
                    let in_a = rnd() % 2 == 0;
                    tx.upsert(if in_a { &a } else { &b }, record(k, n, pad))
                        .expect("upsert");
                    wrote.push(format!("{}{k}", if in_a { "a" } else { "b" }));
                }
                tx.insert(
                    &l,
                    Value::Object(vec![
                        ("id".into(), Value::Int(n)),
                        ("wrote".into(), Value::String(wrote.join(" "))),
                    ]),
                )
                .expect("ledger insert");
                if rnd() % 8 == 0 {
                    tx.rollback();
                    continue;
                }
                let say = |s: String| {
                    let mut o = out.lock().expect("stdout lock");
                    let _ = writeln!(o, "{s}");
                    let _ = o.flush();
                };
                say(format!("BEGIN {n}"));
                tx.commit()
                    .expect("commit (threads own their keys: no conflicts)");
                say(format!("ACK {n}"));
            }
        }));
    }
    for h in handles {
        let _ = h.join();
    }
}

fn values(ds: &Arc<silt::Dataset>) -> BTreeMap<i64, i64> {
    ds.scan(Bound::Unbounded, Bound::Unbounded)
        .expect("scan")
        .map(|r| {
            let r = r.expect("record");
            (
                r.get("id").and_then(Value::as_i64).expect("id"),
                r.get("v").and_then(Value::as_i64).expect("v"),
            )
        })
        .collect()
}

/// Both indexes list exactly the primary's records, with the same values.
fn check_indexes(ds: &Arc<silt::Dataset>, want: &BTreeMap<i64, i64>, cycle: usize) {
    let queries = [
        (
            "by_v",
            Query::Range {
                lo: Bound::Unbounded,
                hi: Bound::Unbounded,
            },
        ),
        (
            "by_loc",
            Query::Intersects(silt::Geometry::rect(-180.0, -90.0, 180.0, 90.0)),
        ),
    ];
    for (index, q) in queries {
        let got: BTreeMap<i64, i64> = ds
            .query(index, &q, silt::QueryOptions::default())
            .expect("query")
            .map(|h| {
                let h = h.expect("hit");
                let r = h.record.expect("record");
                (
                    r.get("id").and_then(Value::as_i64).expect("id"),
                    r.get("v").and_then(Value::as_i64).expect("v"),
                )
            })
            .collect();
        assert_eq!(
            &got,
            want,
            "index {index} of {} disagrees with the primary after cycle {cycle}",
            ds.name()
        );
    }
    // Point lookups in the B+-tree find each record by its current value.
    for (k, v) in want.iter().take(10) {
        let q = Query::Range {
            lo: Bound::Included(vec![Value::Int(*v)]),
            hi: Bound::Included(vec![Value::Int(*v)]),
        };
        let hits: Vec<_> = ds
            .query("by_v", &q, silt::QueryOptions::default())
            .expect("query")
            .map(|h| h.expect("hit").pk)
            .collect();
        assert!(hits.contains(&vec![Value::Int(*k)]), "by_v misses {k}={v}");
    }
}

fn run_phase(dir: &Path, pad: usize, cycles: usize, seed0: u64) {
    let mut acked: BTreeSet<i64> = BTreeSet::new();
    let mut rng = seed0;
    let mut committed_total = 0usize;
    for cycle in 0..cycles {
        super::xorshift(&mut rng);
        let lines = super::run_and_kill(
            "txn::txn_crash_child",
            &[
                ("SILT_TXN_CRASH_CHILD", dir.display().to_string()),
                ("SILT_CRASH_PAD", pad.to_string()),
                ("SILT_CRASH_SEED", (cycle as u64 + 1).to_string()),
            ],
            &dir.with_extension("txn-child-stderr"),
            Duration::from_millis(40 + rng % 300),
        );
        for l in lines {
            if let Some(i) = l.find("ACK ") {
                let n: i64 = l[i + 4..].trim().parse().expect("ack number");
                acked.insert(n);
            }
        }
        let db = Database::open(dir, db_opts(pad > 0))
            .unwrap_or_else(|e| panic!("reopen after kill in cycle {cycle}: {e}"));
        let (Ok(a), Ok(b), Ok(l)) = (db.dataset("a"), db.dataset("b"), db.dataset("ledger")) else {
            assert!(
                acked.is_empty(),
                "datasets missing after acknowledged commits"
            );
            continue;
        };
        let ledger: BTreeMap<i64, String> = l
            .scan(Bound::Unbounded, Bound::Unbounded)
            .expect("scan")
            .map(|r| {
                let r = r.expect("record");
                (
                    r.get("id").and_then(Value::as_i64).expect("id"),
                    r.get("wrote")
                        .and_then(Value::as_str)
                        .expect("wrote")
                        .to_owned(),
                )
            })
            .collect();
        committed_total = ledger.len();
        for n in &acked {
            assert!(
                ledger.contains_key(n),
                "acknowledged transaction {n} lost in cycle {cycle}"
            );
        }
        let (va, vb) = (values(&a), values(&b));
        // No record carries a transaction that is not committed as a whole.
        for (name, vals) in [("a", &va), ("b", &vb)] {
            for (k, v) in vals {
                assert!(
                    ledger.contains_key(v),
                    "{name}{k} holds transaction {v}, whose ledger record is absent (half a transaction) in cycle {cycle}"
                );
            }
        }
        // Every write of a committed transaction is there (or overwritten by a
        // later transaction of the same thread).
        for (n, wrote) in &ledger {
            for w in wrote.split_whitespace() {
                let (vals, k) = match w.split_at(1) {
                    ("a", k) => (&va, k),
                    (_, k) => (&vb, k),
                };
                let k: i64 = k.parse().expect("key");
                let got = vals.get(&k).copied();
                assert!(
                    got.is_some_and(|v| v >= *n && (v >> 20) & 0xF == (n >> 20) & 0xF),
                    "transaction {n} wrote {w} but it holds {got:?} after cycle {cycle}"
                );
            }
        }
        check_indexes(&a, &va, cycle);
        check_indexes(&b, &vb, cycle);
        db.close().expect("close");
    }
    assert!(committed_total > 0, "no transaction ever committed");
    eprintln!(
        "{cycles} kills, {} acknowledged transactions, {committed_total} committed",
        acked.len()
    );
}

fn cycles() -> usize {
    std::env::var("SILT_CRASH_CYCLES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(40)
}

#[test]
fn txn_crash_torture() {
    if std::env::var_os("SILT_TXN_CRASH_CHILD").is_some() {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    run_phase(dir.path(), 0, cycles(), 11);
}

#[test]
fn txn_crash_torture_with_flushes_merges_and_checkpoints() {
    if std::env::var_os("SILT_TXN_CRASH_CHILD").is_some() {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    run_phase(dir.path(), 2000, cycles(), 23);
}
