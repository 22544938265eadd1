//! Pub/sub with live delivery under SIGKILL: a writer process subscribes and
//! publishes on a few shared ids from two threads while one listener per
//! subscriber takes its deliveries and acknowledges them now and then, and
//! is killed at random moments (often mid-operation, mid-delivery or
//! mid-acknowledgement). After every restart:
//!
//! - every acknowledged subscription and publication is stored;
//! - every matching pair of stored records was delivered exactly once:
//!   either taken and acknowledged (at or below the subscriber's cursor)
//!   or still in the queue (above it), under one sequence number;
//! - no delivery exists without both of its records (the operation and its
//!   deliveries commit together), none sits at or below the cursor, and
//!   every acknowledgement the listener reported is durable.
//!
//! The writer is this test binary started with `SILT_PUBSUB_CRASH_CHILD`.

use silt::pubsub::{Design, PubSub, PubSubOptions, Publication, Subscription, matches};
use silt::{Database, DbOptions, Durability, Value};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::io::Write;
use std::ops::Bound;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

const USERS: i64 = 3;
const IDS: i64 = 3;

fn opts() -> DbOptions {
    DbOptions {
        durability: Durability::Sync,
        block_cache_bytes: 4 << 20,
        ..Default::default()
    }
}

fn space() -> PubSubOptions {
    PubSubOptions {
        design: Design::DualDb,
        partitions: 2,
        memory_budget: Some(1 << 20),
        // The two writer threads stamp times a little out of order; merges
        // must not expire what a late operation may still match. Nor does
        // anything here expire for good: the checks below find every
        // acknowledged operation stored (reads hide the expired ones;
        // `scan_stored` shows them until a sweep, which this grace keeps
        // away; `tests/crash/ttl.rs` kills sweeps).
        grace: 1 << 40,
        delivery: true,
        ..Default::default()
    }
}

#[test]
fn pubsub_crash_child() {
    let Ok(dir) = std::env::var("SILT_PUBSUB_CRASH_CHILD") else {
        return;
    };
    let cycle: i64 = std::env::var("SILT_CRASH_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let db = super::open_retrying(Path::new(&dir), opts());
    let ps = PubSub::open(&db, "ps", &space()).expect("open space");
    let out = Arc::new(Mutex::new(std::io::stdout()));
    let say = {
        let out = out.clone();
        move |s: String| {
            let mut o = out.lock().expect("stdout");
            let _ = writeln!(o, "{s}");
            let _ = o.flush();
        }
    };
    let mut handles = Vec::new();
    for uid in 0..USERS {
        let (ps, say) = (ps.clone(), say.clone());
        handles.push(std::thread::spawn(move || {
            let mut l = ps.listen(uid).expect("listen");
            let mut n = 0u64;
            loop {
                let d = match l.next_within(Some(Duration::from_millis(50))) {
                    Ok(Some(d)) => d,
                    Ok(None) => continue,
                    Err(e) => return say(format!("FAIL listen {e}")),
                };
                say(format!(
                    "GOT {uid} {} {} {}",
                    d.seq, d.sid, d.publication.pid
                ));
                n += 1;
                if n.is_multiple_of(5) {
                    let at = d.seq;
                    if let Err(e) = l.ack(at) {
                        return say(format!("FAIL ack {e}"));
                    }
                    say(format!("ACKED {uid} {at}"));
                }
            }
        }));
    }
    for t in 0..2i64 {
        let (ps, say) = (ps.clone(), say.clone());
        handles.push(std::thread::spawn(move || {
            let mut x = (cycle as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ (t as u64 + 7);
            let mut rnd = move || {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x
            };
            // Identities and times grow across restarts.
            let base = (cycle << 24) | (t << 20);
            for i in 0.. {
                let iid = base + i;
                let now = (cycle << 16) + i * 2 + t;
                let id = Value::Int((rnd() % IDS as u64) as i64);
                let r = if rnd() % 2 == 0 {
                    let s = Subscription {
                        id,
                        sid: iid,
                        uid: (rnd() % USERS as u64) as i64,
                        ts: now,
                        tmin: now - 40,
                        tmax: now + 40,
                        ..Default::default()
                    };
                    ps.subscribe(&s, false).map(|_| format!("ACK S {iid}"))
                } else {
                    let p = Publication {
                        id,
                        pid: iid,
                        tp: now,
                        tmax: now + 30,
                        desc: format!("p{iid}"),
                        ..Default::default()
                    };
                    ps.publish(&p, None).map(|_| format!("ACK P {iid}"))
                };
                match r {
                    Ok(line) => say(line),
                    Err(e) => return say(format!("FAIL op {e}")),
                }
            }
        }));
    }
    for h in handles {
        let _ = h.join();
    }
}

fn int(r: &Value, f: &str) -> i64 {
    r.get(f)
        .and_then(Value::as_i64)
        .unwrap_or_else(|| panic!("field {f} of {r:?}"))
}

/// The stored subscriptions and publications.
fn stored(db: &Database) -> (Vec<Subscription>, Vec<Publication>) {
    let (mut subs, mut pubs) = (Vec::new(), Vec::new());
    for r in db
        .dataset("ps")
        .expect("space dataset")
        .scan_stored(Bound::Unbounded, Bound::Unbounded)
        .expect("scan")
    {
        let r = r.expect("record");
        let id = r.get("id").cloned().expect("id");
        if r.get("kind").and_then(Value::as_str) == Some("S") {
            subs.push(Subscription {
                id,
                sid: int(&r, "iid"),
                uid: int(&r, "uid"),
                ts: int(&r, "ts"),
                tmin: int(&r, "tmin"),
                tmax: int(&r, "tmax"),
                ..Default::default()
            });
        } else {
            pubs.push(Publication {
                id,
                pid: int(&r, "iid"),
                tp: int(&r, "t"),
                tmax: int(&r, "tmax"),
                desc: String::new(),
                ..Default::default()
            });
        }
    }
    (subs, pubs)
}

#[test]
fn pubsub_delivery_crash_torture() {
    if std::env::var_os("SILT_PUBSUB_CRASH_CHILD").is_some() {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let db_dir = dir.path().join("db");
    let stderr_path = dir.path().join("child-stderr");
    let cycles = super::cycles() / 5;
    // (uid, seq) -> (sid, pid), every delivery a listener ever took.
    let mut taken: HashMap<(i64, i64), (i64, i64)> = HashMap::new();
    let mut acked_ops: BTreeSet<(char, i64)> = BTreeSet::new();
    let mut acked_cursor: HashMap<i64, i64> = HashMap::new();
    let mut rng = 0x5eed_u64;
    let mut delivered_total = 0;
    for cycle in 0..cycles {
        super::xorshift(&mut rng);
        let lines = super::run_and_kill(
            "pubsub::pubsub_crash_child",
            &[
                ("SILT_PUBSUB_CRASH_CHILD", db_dir.display().to_string()),
                ("SILT_CRASH_SEED", (cycle + 1).to_string()),
            ],
            &stderr_path,
            Duration::from_millis(150 + rng % 400),
        );
        for l in lines {
            let w = super::words_from(&l, &["GOT ", "ACK", "FAIL "]);
            let num = |i: usize| -> i64 { w[i].parse().expect("number") };
            match w.first().copied() {
                Some("FAIL") => panic!("cycle {cycle}: the writer failed: {l}"),
                Some("GOT") => {
                    let (k, v) = ((num(1), num(2)), (num(3), num(4)));
                    if let Some(old) = taken.insert(k, v) {
                        assert_eq!(old, v, "delivery {k:?} changed between takes");
                    }
                }
                Some("ACKED") => {
                    let c = acked_cursor.entry(num(1)).or_default();
                    *c = (*c).max(num(2));
                }
                Some("ACK") => {
                    acked_ops.insert((w[1].chars().next().expect("kind"), num(2)));
                }
                _ => {}
            }
        }
        let db = Database::open(&db_dir, opts()).expect("reopen");
        let Ok(ps) = PubSub::open(&db, "ps", &space()) else {
            assert!(
                acked_ops.is_empty(),
                "the space is gone after acknowledged operations"
            );
            continue;
        };
        let (subs, pubs) = stored(&db);
        let have: BTreeSet<(char, i64)> = subs
            .iter()
            .map(|s| ('S', s.sid))
            .chain(pubs.iter().map(|p| ('P', p.pid)))
            .collect();
        for op in &acked_ops {
            assert!(have.contains(op), "cycle {cycle}: acknowledged {op:?} lost");
        }
        let cursors: HashMap<i64, i64> = db
            .dataset("ps_cursors")
            .expect("cursors")
            .scan(Bound::Unbounded, Bound::Unbounded)
            .expect("scan")
            .map(|r| {
                let r = r.expect("cursor");
                (int(&r, "uid"), int(&r, "seq"))
            })
            .collect();
        for (uid, c) in &acked_cursor {
            let got = cursors.get(uid).copied().unwrap_or(0);
            assert!(
                got >= *c,
                "cycle {cycle}: uid {uid} acknowledged {c}, cursor is {got}"
            );
        }
        // Every delivery: consumed (taken, at or below the cursor) or queued.
        let mut all: BTreeMap<(i64, i64), (i64, i64)> = taken
            .iter()
            .filter(|((uid, seq), _)| *seq <= cursors.get(uid).copied().unwrap_or(0))
            .map(|(k, v)| (*k, *v))
            .collect();
        for r in db
            .dataset("ps_deliveries")
            .expect("queue")
            .scan(Bound::Unbounded, Bound::Unbounded)
            .expect("scan")
        {
            let r = r.expect("delivery");
            let (uid, seq) = (int(&r, "uid"), int(&r, "seq"));
            let c = cursors.get(&uid).copied().unwrap_or(0);
            assert!(
                seq > c,
                "cycle {cycle}: delivery {seq} of uid {uid} is at or below the cursor {c}"
            );
            let v = (int(&r, "sid"), int(&r, "pid"));
            if let Some(t) = taken.get(&(uid, seq)) {
                assert_eq!(*t, v, "cycle {cycle}: delivery ({uid}, {seq}) changed");
            }
            all.insert((uid, seq), v);
        }
        let mut want: BTreeMap<(i64, i64, i64), usize> = BTreeMap::new();
        for s in &subs {
            for p in &pubs {
                if s.id == p.id && matches(s, p) {
                    want.insert((s.uid, s.sid, p.pid), 0);
                }
            }
        }
        for ((uid, seq), (sid, pid)) in &all {
            match want.get_mut(&(*uid, *sid, *pid)) {
                Some(n) => *n += 1,
                None => panic!(
                    "cycle {cycle}: delivery ({uid}, {seq}) pairs subscription {sid} with publication {pid}, which is not a stored matching pair"
                ),
            }
        }
        for (k, n) in &want {
            if *n != 1 {
                let s = subs.iter().find(|s| s.sid == k.1);
                let p = pubs.iter().find(|p| p.pid == k.2);
                let t: Vec<_> = taken.iter().filter(|(_, v)| **v == (k.1, k.2)).collect();
                panic!(
                    "cycle {cycle}: pair {k:?} delivered {n} times: {s:?} {p:?}, taken {t:?}, cursors {cursors:?}, acked ops hold them: {} {}",
                    acked_ops.contains(&('S', k.1)),
                    acked_ops.contains(&('P', k.2))
                );
            }
        }
        delivered_total = want.len();
        drop(ps);
        db.close().expect("close");
    }
    assert!(
        delivered_total > 50 && acked_cursor.values().any(|c| *c > 0),
        "the torture should deliver and acknowledge: {delivered_total} pairs, cursors {acked_cursor:?}"
    );
    eprintln!(
        "{cycles} kills, {} acknowledged operations, {delivered_total} matching pairs delivered",
        acked_ops.len()
    );
}
