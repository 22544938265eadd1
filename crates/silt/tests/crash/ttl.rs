//! Records that expire, under SIGKILL: a writer upserts records whose
//! times grow and whose lives are short or long, into a dataset with a
//! ttl (the written clock), a B+-tree on the expiry (the sweep's path) and
//! one on a group field, while the sweeper runs every few milliseconds and
//! checkpoints come often. After each kill the database is reopened:
//!
//! - every acknowledged record is there (its version or a later one)
//!   unless its expiry has passed;
//! - no record whose expiry has passed is read (the clock did not go back
//!   across the crash, even when the write that set it is only in a log
//!   file a checkpoint deleted);
//! - both indexes hold exactly the stored records (the sweep's deletes
//!   are whole transactions).
//!
//! The writer is this test binary started with `SILT_TTL_CRASH_CHILD` set.

use silt::{Database, DatasetDef, DbOptions, Durability, FieldType, IndexDef, TtlDef, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::ops::Bound;
use std::time::Duration;

const IDS: i64 = 300;

fn opts(sweep_ms: u64) -> DbOptions {
    DbOptions {
        durability: Durability::Sync,
        checkpoint_interval_bytes: 256 << 10,
        wal_file_bytes: 128 << 10,
        ttl_sweep_ms: sweep_ms,
        ..Default::default()
    }
}

#[test]
fn ttl_crash_child() {
    let Ok(dir) = std::env::var("SILT_TTL_CRASH_CHILD") else {
        return;
    };
    let cycle: i64 = std::env::var("SILT_CRASH_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let db = super::open_retrying(std::path::Path::new(&dir), opts(3));
    let ds = match db.dataset("e") {
        Ok(ds) => ds,
        Err(_) => {
            let mut def = DatasetDef::new("e", &["id"])
                .field("id", FieldType::Int)
                .field("t", FieldType::Int)
                .field("exp", FieldType::Int)
                .field("g", FieldType::Int)
                .memory_budget(1 << 20);
            def.ttl = Some(TtlDef {
                time: Some("t".into()),
                ..TtlDef::at("exp")
            });
            db.create_dataset(def).expect("create");
            db.create_index("e", IndexDef::btree("by_exp", &["exp"]))
                .expect("index");
            db.create_index("e", IndexDef::btree("by_g", &["g"]))
                .expect("index");
            db.dataset("e").expect("dataset")
        }
    };
    let mut out = std::io::stdout();
    let mut x = (cycle as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    // One writer: times grow by one per write, across restarts too. Odd
    // cycles start with one write far ahead: once a checkpoint has deleted
    // its log, only the clock file remembers how far the clock got.
    for i in 0i64.. {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let t = if i == 0 && cycle % 2 == 1 {
            (cycle << 20) + 900_000
        } else {
            (cycle << 20) + i
        };
        let id = (x % IDS as u64) as i64;
        // Mostly short lives (swept within the cycle), some long ones.
        let life = if x.is_multiple_of(5) {
            50_000
        } else {
            20 + (x >> 8) as i64 % 200
        };
        let g = (x >> 20) as i64 % 4;
        let rec = Value::Object(vec![
            ("id".into(), Value::Int(id)),
            ("t".into(), Value::Int(t)),
            ("exp".into(), Value::Int(t + life)),
            ("g".into(), Value::Int(g)),
        ]);
        let line = match ds.upsert(rec) {
            Ok(()) => format!("ACK {id} {t} {}", t + life),
            Err(e) => format!("FAIL {id} {e}"),
        };
        let _ = writeln!(out, "{line}");
        let _ = out.flush();
    }
}

#[test]
fn ttl_crash_torture() {
    if std::env::var_os("SILT_TTL_CRASH_CHILD").is_some() {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let db_dir = dir.path().join("db");
    let stderr_path = dir.path().join("child-stderr");
    let cycles = (super::cycles() / 5).max(4);
    // id -> (t, exp) of its last acknowledged write.
    let mut acked: BTreeMap<i64, (i64, i64)> = BTreeMap::new();
    // The clock is at least the newest acknowledged time, and at most the
    // next time the writer had not yet been told about.
    let mut newest = i64::MIN;
    let mut rng = 0x77u64;
    let (mut swept_total, mut checked) = (0u64, 0usize);
    for cycle in 0..cycles {
        super::xorshift(&mut rng);
        let lines = super::run_and_kill(
            "ttl::ttl_crash_child",
            &[
                ("SILT_TTL_CRASH_CHILD", db_dir.display().to_string()),
                ("SILT_CRASH_SEED", (cycle + 1).to_string()),
            ],
            &stderr_path,
            Duration::from_millis(300 + rng % 500),
        );
        for l in lines {
            let w = super::words_from(&l, &["ACK ", "FAIL "]);
            let num = |i: usize| -> i64 { w[i].parse().expect("number") };
            match w.first().copied() {
                Some("FAIL") => panic!("cycle {cycle}: the writer failed: {l}"),
                Some("ACK") => {
                    acked.insert(num(1), (num(2), num(3)));
                    newest = newest.max(num(2));
                }
                _ => {}
            }
        }
        let db = Database::open(&db_dir, opts(0)).expect("reopen");
        let Ok(ds) = db.dataset("e") else {
            assert!(
                acked.is_empty(),
                "the dataset is gone after acknowledged writes"
            );
            continue;
        };
        // One write past the last acknowledged one may have been applied
        // (in an odd cycle, the first write, far ahead).
        let clock_hi = newest.max(((cycle as i64 + 1) << 20) + 900_000) + 1;
        let mut visible = BTreeMap::new();
        for r in ds.scan(Bound::Unbounded, Bound::Unbounded).expect("scan") {
            let r = r.expect("record");
            let f = |n: &str| r.get(n).and_then(Value::as_i64).expect("field");
            let (id, t, exp) = (f("id"), f("t"), f("exp"));
            assert!(
                exp > newest,
                "cycle {cycle}: record {id} (expiry {exp}) is read though the clock is at least {newest}"
            );
            visible.insert(id, t);
        }
        for (id, (t, exp)) in &acked {
            match visible.get(id) {
                Some(vt) => assert!(
                    vt >= t,
                    "cycle {cycle}: record {id} went back from time {t} to {vt}"
                ),
                None => assert!(
                    *exp <= clock_hi,
                    "cycle {cycle}: acknowledged record {id} (time {t}, expiry {exp}) lost; clock at most {clock_hi}"
                ),
            }
            checked += 1;
        }
        // Every index holds exactly the stored records, expired or not.
        let stored: BTreeSet<i64> = ds
            .scan_stored(Bound::Unbounded, Bound::Unbounded)
            .expect("scan")
            .map(|r| {
                r.expect("record")
                    .get("id")
                    .and_then(Value::as_i64)
                    .expect("id")
            })
            .collect();
        for index in ["by_exp", "by_g"] {
            let entries: BTreeSet<i64> = ds
                .index_range_keys(index, Bound::Unbounded, Bound::Unbounded, None)
                .expect("index")
                .into_iter()
                .map(|h| h.pk[0].as_i64().expect("id"))
                .collect();
            assert_eq!(
                entries, stored,
                "cycle {cycle}: index {index} vs the primary"
            );
        }
        swept_total += acked.keys().filter(|id| !stored.contains(id)).count() as u64;
        db.close().expect("close");
    }
    eprintln!(
        "{cycles} kills, {} records acknowledged last, {checked} checks, {swept_total} acknowledged records swept at checks",
        acked.len()
    );
    assert!(
        checked > 500 && swept_total > 0,
        "the torture should write and sweep: {checked} checks, {swept_total} acknowledged records swept at checks"
    );
}
