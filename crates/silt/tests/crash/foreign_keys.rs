//! Crash torture of foreign keys: a writer process inserts and deletes
//! customers (RESTRICT), orders and order lines (CASCADE from orders) on
//! several threads and is killed with SIGKILL at random moments. After
//! every restart no order or line names a record that is not there, each
//! key's lookup index holds exactly the primary's records, and the last
//! acknowledged write of each order is what the order is (a deleted order
//! took its lines with it).
//!
//! The writer is this test binary started with `SILT_FK_CRASH_CHILD` set.
//! Thread 0 deletes and re-inserts customers (refused while orders name
//! them); threads 1.. own the orders whose id is theirs modulo the thread
//! count and their lines. Knob: `SILT_CRASH_CYCLES` (default 40).

use silt::{Database, DatasetDef, DbOptions, Durability, Error, FieldType, FkAction, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::ops::Bound;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

const CUSTOMERS: i64 = 12;
const ORDERS: i64 = 60;
const THREADS: i64 = 3;

fn db_opts() -> DbOptions {
    DbOptions {
        durability: Durability::Sync,
        block_cache_bytes: 4 << 20,
        wal_file_bytes: 256 << 10,
        checkpoint_interval_bytes: 1 << 20,
        ..Default::default()
    }
}

fn int(r: &Value, f: &str) -> i64 {
    r.get(f).and_then(Value::as_i64).unwrap_or(-1)
}

fn schema(db: &Database) {
    let make = |def: DatasetDef| match db.create_dataset(def) {
        Ok(_) | Err(Error::DatasetExists(_)) => {}
        Err(e) => panic!("create: {e}"),
    };
    make(
        DatasetDef::new("customer", &["c_id"])
            .field("c_id", FieldType::Int)
            .memory_budget(1 << 20),
    );
    make(
        DatasetDef::new("orders", &["o_id"])
            .field("o_id", FieldType::Int)
            .field("o_c_id", FieldType::Int)
            .memory_budget(1 << 20)
            .partitions(2)
            .references(&["o_c_id"], "customer", FkAction::Restrict),
    );
    make(
        DatasetDef::new("order_line", &["ol_id"])
            .field("ol_id", FieldType::Int)
            .field("ol_o_id", FieldType::Int)
            .memory_budget(1 << 20)
            .references(&["ol_o_id"], "orders", FkAction::Cascade),
    );
}

fn rec(fields: &[(&str, i64)]) -> Value {
    Value::Object(
        fields
            .iter()
            .map(|(k, v)| ((*k).to_owned(), Value::Int(*v)))
            .collect(),
    )
}

/// The writer. Runs only when started by the torture test.
#[test]
fn fk_crash_child() {
    let Ok(dir) = std::env::var("SILT_FK_CRASH_CHILD") else {
        return;
    };
    let seed: u64 = std::env::var("SILT_CRASH_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1);
    let db = super::open_retrying(Path::new(&dir), db_opts());
    schema(&db);
    let out = Arc::new(std::sync::Mutex::new(std::io::stdout()));
    let mut handles = Vec::new();
    for t in 0..THREADS {
        let (db, out) = (db.clone(), out.clone());
        handles.push(std::thread::spawn(move || {
            let (c, o, l) = (
                db.dataset("customer").expect("customer"),
                db.dataset("orders").expect("orders"),
                db.dataset("order_line").expect("order_line"),
            );
            let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ (t as u64 + 1);
            let say = |s: String| {
                let mut w = out.lock().expect("stdout");
                let _ = writeln!(w, "{s}");
                let _ = w.flush();
            };
            // Line ids grow per thread across restarts.
            let mut line = ((seed as i64) << 32) | (t << 28);
            loop {
                let r = super::xorshift(&mut x);
                if t == 0 {
                    let k = (r % CUSTOMERS as u64) as i64;
                    let _ = c.insert(rec(&[("c_id", k)]));
                    if r.is_multiple_of(3) {
                        let _ = c.delete(&[Value::Int(k)]);
                    }
                    continue;
                }
                let k = (r % (ORDERS as u64 / THREADS as u64)) as i64 * THREADS + t;
                match (r >> 16) % 4 {
                    0 | 1 => {
                        let cust = ((r >> 24) % CUSTOMERS as u64) as i64;
                        say(format!("BEGIN put {k} {cust}"));
                        match o.upsert(rec(&[("o_id", k), ("o_c_id", cust)])) {
                            Ok(()) => say(format!("ACK put {k} {cust}")),
                            Err(Error::ForeignKeyMissing { .. }) => say(format!("NO {k}")),
                            Err(e) => panic!("order upsert: {e}"),
                        }
                    }
                    2 => {
                        line += 1;
                        match l.insert(rec(&[("ol_id", line), ("ol_o_id", k)])) {
                            Ok(()) | Err(Error::ForeignKeyMissing { .. }) => {}
                            Err(e) => panic!("line insert: {e}"),
                        }
                    }
                    _ => {
                        say(format!("BEGIN del {k}"));
                        o.delete(&[Value::Int(k)]).expect("order delete");
                        say(format!("ACK del {k}"));
                    }
                }
            }
        }));
    }
    for h in handles {
        let _ = h.join();
    }
}

/// (key, the record's `field`) of every record of `ds`.
fn pairs(db: &Database, ds: &str, key: &str, field: &str) -> BTreeMap<i64, i64> {
    db.dataset(ds)
        .expect("dataset")
        .scan(Bound::Unbounded, Bound::Unbounded)
        .expect("scan")
        .map(|r| {
            let r = r.expect("record");
            (int(&r, key), int(&r, field))
        })
        .collect()
}

/// The lookup index of `ds` on `field` holds exactly (value, key) of the
/// primary's records.
fn check_index(db: &Database, ds: &str, index: &str, want: &BTreeMap<i64, i64>, cycle: usize) {
    let hits = db
        .dataset(ds)
        .expect("dataset")
        .index_range_keys(index, Bound::Unbounded, Bound::Unbounded, None)
        .expect("index");
    let got: BTreeSet<(i64, i64)> = hits
        .iter()
        .map(|h| {
            let v = h.sk.first().and_then(Value::as_i64).unwrap_or(-1);
            let k = h.pk.first().and_then(Value::as_i64).unwrap_or(-1);
            (k, v)
        })
        .collect();
    let want: BTreeSet<(i64, i64)> = want.iter().map(|(k, v)| (*k, *v)).collect();
    assert_eq!(got, want, "{index} disagrees with {ds} after cycle {cycle}");
}

#[test]
fn fk_crash_torture() {
    if std::env::var_os("SILT_FK_CRASH_CHILD").is_some() {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let cycles = std::env::var("SILT_CRASH_CYCLES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(40usize);
    let mut rng = 29u64;
    // The last write of each order that began, and whether it was
    // acknowledged: the order must be as that write left it if it was.
    let mut last: BTreeMap<i64, (String, bool)> = BTreeMap::new();
    let mut acks = 0usize;
    for cycle in 0..cycles {
        super::xorshift(&mut rng);
        let lines = super::run_and_kill(
            "foreign_keys::fk_crash_child",
            &[
                ("SILT_FK_CRASH_CHILD", dir.path().display().to_string()),
                ("SILT_CRASH_SEED", (cycle as u64 + 1).to_string()),
            ],
            &dir.path().with_extension("fk-child-stderr"),
            Duration::from_millis(60 + rng % 300),
        );
        for l in &lines {
            let w = super::words_from(l, &["BEGIN", "ACK", "NO"]);
            match w.as_slice() {
                ["BEGIN", op, k, rest @ ..] => {
                    let k: i64 = k.parse().expect("key");
                    last.insert(k, (format!("{op} {}", rest.join(" ")), false));
                }
                ["ACK", op, k, rest @ ..] => {
                    let k: i64 = k.parse().expect("key");
                    let what = format!("{op} {}", rest.join(" "));
                    if last.get(&k).is_some_and(|(w, _)| *w == what) {
                        last.insert(k, (what, true));
                        acks += 1;
                    }
                }
                // Refused: nothing changed, the order is as before it.
                ["NO", k] => {
                    let k: i64 = k.parse().expect("key");
                    last.remove(&k);
                }
                _ => {}
            }
        }
        let db = super::open_retrying(dir.path(), db_opts());
        if db.dataset("order_line").is_err() {
            continue;
        }
        let customers = pairs(&db, "customer", "c_id", "c_id");
        let orders = pairs(&db, "orders", "o_id", "o_c_id");
        let order_lines = pairs(&db, "order_line", "ol_id", "ol_o_id");
        for (o, c) in &orders {
            assert!(
                customers.contains_key(c),
                "order {o} names customer {c}, who is not there, after cycle {cycle}"
            );
        }
        for (l, o) in &order_lines {
            assert!(
                orders.contains_key(o),
                "line {l} names order {o}, which is not there, after cycle {cycle}"
            );
        }
        check_index(&db, "orders", "orders_o_c_id_fkey_idx", &orders, cycle);
        check_index(
            &db,
            "order_line",
            "order_line_ol_o_id_fkey_idx",
            &order_lines,
            cycle,
        );
        for (k, (what, acked)) in &last {
            if !acked {
                continue;
            }
            let w: Vec<&str> = what.split_whitespace().collect();
            match w.as_slice() {
                ["put", c] => assert_eq!(
                    orders.get(k).map(|c| c.to_string()),
                    Some((*c).to_owned()),
                    "acknowledged write of order {k} lost after cycle {cycle}"
                ),
                _ => assert!(
                    !orders.contains_key(k),
                    "acknowledged delete of order {k} undone after cycle {cycle}"
                ),
            }
        }
        db.close().expect("close");
    }
    assert!(acks > 0, "no write was ever acknowledged");
    eprintln!("{cycles} kills, {acks} acknowledged order writes");
}
