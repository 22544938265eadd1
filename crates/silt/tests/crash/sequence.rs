//! Sequences under SIGKILL: a writer inserts records without their key,
//! which the dataset's sequence fills in (SQL's `SERIAL`), and now and then
//! one with an explicit key far ahead. After each kill the database is
//! reopened: every acknowledged record is there, and the next writer's
//! generated keys never collide with a key already used (a collision would
//! be a duplicate-key error, which the writer reports).
//!
//! The writer is this test binary started with `SILT_SEQ_CRASH_CHILD` set.

use silt::{Database, DatasetDef, DbOptions, Durability, FieldDefault, FieldType, Value};
use std::collections::BTreeSet;
use std::io::Write;
use std::ops::Bound;
use std::sync::Arc;
use std::time::Duration;

fn opts() -> DbOptions {
    DbOptions {
        durability: Durability::Sync,
        ..Default::default()
    }
}

#[test]
fn seq_crash_child() {
    let Ok(dir) = std::env::var("SILT_SEQ_CRASH_CHILD") else {
        return;
    };
    let cycle: i64 = std::env::var("SILT_CRASH_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let db = super::open_retrying(std::path::Path::new(&dir), opts());
    let ds = match db.dataset("s") {
        Ok(ds) => ds,
        Err(_) => db
            .create_dataset(
                DatasetDef::new("s", &["id"])
                    .field("id", FieldType::Int)
                    .field("tag", FieldType::String)
                    .default_value("id", FieldDefault::Sequence)
                    .memory_budget(1 << 20),
            )
            .expect("create"),
    };
    let out = Arc::new(std::sync::Mutex::new(std::io::stdout()));
    let handles: Vec<_> = (0..2i64)
        .map(|t| {
            let (ds, out) = (ds.clone(), out.clone());
            std::thread::spawn(move || {
                for n in 0i64.. {
                    let tag = format!("c{cycle}-t{t}-n{n}");
                    let mut rec = vec![("tag".to_owned(), Value::String(tag.clone()))];
                    // Thread 1 writes an explicit key far ahead every 50th
                    // record: the sequence must jump past it.
                    if t == 1 && n % 50 == 49 {
                        let ahead = ds.next_sequence("id", 1).expect("peek").first + 5_000;
                        rec.push(("id".to_owned(), Value::Int(ahead)));
                    }
                    let say = |s: String| {
                        let mut o = out.lock().expect("stdout lock");
                        let _ = writeln!(o, "{s}");
                        let _ = o.flush();
                    };
                    match ds.insert(Value::Object(rec)) {
                        Ok(()) => say(format!("ACK {tag}")),
                        Err(e) => {
                            say(format!("FAIL {tag} {e}"));
                            eprintln!("FAIL {tag} {e}");
                            std::process::exit(3);
                        }
                    }
                }
            })
        })
        .collect();
    for h in handles {
        let _ = h.join();
    }
}

#[test]
fn sequence_crash_torture() {
    if std::env::var_os("SILT_SEQ_CRASH_CHILD").is_some() {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let db_dir = dir.path().join("db");
    let mut acked: BTreeSet<String> = BTreeSet::new();
    let mut rng = 0x5EED_u64;
    for cycle in 0..20 {
        super::xorshift(&mut rng);
        // The writer never stops on its own: an early exit is a failure,
        // reported with its stderr.
        let lines = super::run_and_kill(
            "sequence::seq_crash_child",
            &[
                ("SILT_SEQ_CRASH_CHILD", db_dir.display().to_string()),
                ("SILT_CRASH_SEED", cycle.to_string()),
            ],
            &dir.path().join("writer.stderr"),
            Duration::from_millis(40 + rng % 200),
        );
        for l in lines {
            if let Some(i) = l.find("FAIL ") {
                panic!("cycle {cycle}: the writer failed: {}", &l[i..]);
            }
            if let Some(i) = l.find("ACK ") {
                acked.insert(l[i + 4..].trim().to_owned());
            }
        }
        // Every acknowledged record is there, each under its own key.
        let db = Database::open(&db_dir, opts()).expect("reopen");
        if let Ok(ds) = db.dataset("s") {
            let mut tags = BTreeSet::new();
            for r in ds.scan(Bound::Unbounded, Bound::Unbounded).expect("scan") {
                let r = r.expect("record");
                if let Some(Value::String(t)) = r.get("tag") {
                    tags.insert(t.clone());
                }
            }
            let lost: Vec<&String> = acked.difference(&tags).take(3).collect();
            assert!(
                lost.is_empty(),
                "cycle {cycle}: acknowledged but lost: {lost:?}"
            );
        }
        db.close().expect("close");
    }
    assert!(
        acked.len() > 100,
        "only {} records acknowledged",
        acked.len()
    );
    eprintln!(
        "{} acknowledged records, no key handed out twice",
        acked.len()
    );
}
