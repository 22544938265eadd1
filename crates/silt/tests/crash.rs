//! Crash torture: a writer process is killed with SIGKILL at random moments;
//! after each kill the database is reopened (recovery runs) and checked
//! against a model built from the commits the writer acknowledged.
//!
//! The writer is this same test binary, started with `SILT_CRASH_CHILD` set
//! (see `crash_child`). It prints `BEGIN` before and `ACK` after each
//! operation, one line each, flushed; acknowledged = durable (sync mode).
//!
//! Knobs: `SILT_CRASH_CYCLES` (default 100 per phase, two phases) for longer runs.
//!
//! The transaction crash test (`txn`), the sequence one (`sequence`), the
//! pub/sub delivery one (`pubsub`), the expiring-records one (`ttl`) and
//! the foreign-key one (`foreign_keys`) share this binary.

#[path = "crash/foreign_keys.rs"]
mod foreign_keys;
#[path = "crash/pubsub.rs"]
mod pubsub;
#[path = "crash/sequence.rs"]
mod sequence;
#[path = "crash/ttl.rs"]
mod ttl;
#[path = "crash/txn.rs"]
mod txn;

use silt::lsm::policy::MergePolicy;
use silt::{Database, DatasetDef, DbOptions, Durability, FieldType, Value};
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

const KEYS: i64 = 400;
const THREADS: i64 = 3;

fn db_opts(small_files: bool) -> DbOptions {
    DbOptions {
        durability: Durability::Sync,
        block_cache_bytes: 4 << 20,
        wal_file_bytes: if small_files { 256 << 10 } else { 64 << 20 },
        checkpoint_interval_bytes: if small_files { 1 << 20 } else { 256 << 20 },
        ..Default::default()
    }
}

/// Where record version `v` is: spread over the globe, a function of `v`.
fn loc_of(v: i64) -> (f64, f64) {
    let lon = (v.wrapping_mul(7).rem_euclid(3600)) as f64 / 10.0 - 180.0;
    let lat = (v.wrapping_mul(13).rem_euclid(1700)) as f64 / 10.0 - 85.0;
    (lon, lat)
}

fn words_of(v: i64) -> String {
    format!("w{} W{}", v.rem_euclid(5), v.rem_euclid(7) + 5)
}

fn record(k: i64, v: i64, pad: usize) -> Value {
    let (lon, lat) = loc_of(v);
    Value::Object(vec![
        ("id".into(), Value::Int(k)),
        ("v".into(), Value::Int(v)),
        (
            "loc".into(),
            Value::Geometry(silt::Geometry::point(lon, lat)),
        ),
        ("msg".into(), Value::String(words_of(v))),
        ("pad".into(), Value::String("p".repeat(pad))),
    ])
}

/// Open the database in a writer process. The parent test process runs
/// phases at once: while one phase forks a writer, the forked copy briefly
/// shares another phase's open LOCK file description (until exec closes
/// it), so a flock can outlive the parent's close by a moment. Retry
/// briefly.
/// Start this test binary again as the child test `test` (its environment
/// `envs`), let it run for `after` (it must not exit first: its stderr is
/// then the panic message), kill it with SIGKILL and return the lines it
/// printed.
fn run_and_kill(
    test: &str,
    envs: &[(&str, String)],
    stderr: &Path,
    after: Duration,
) -> Vec<String> {
    let exe = std::env::current_exe().expect("test binary path");
    let mut cmd = Command::new(&exe);
    cmd.args(["--exact", test, "--nocapture", "--test-threads", "1"]);
    for (k, v) in envs {
        cmd.env(k, v);
    }
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::from(
            std::fs::File::create(stderr).expect("stderr file"),
        ))
        .spawn()
        .expect("spawn the child");
    let stdout = child.stdout.take().expect("child stdout");
    let reader = std::thread::spawn(move || {
        BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
            .collect::<Vec<_>>()
    });
    let start = Instant::now();
    while start.elapsed() < after {
        if let Ok(Some(st)) = child.try_wait() {
            let err = std::fs::read_to_string(stderr).unwrap_or_default();
            panic!("{test} exited early with {st}: {err}");
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    child.kill().expect("SIGKILL the child");
    let _ = child.wait();
    reader.join().expect("reader thread")
}

/// The next value of a xorshift sequence (kill delays that differ from
/// cycle to cycle, the same in every run).
fn xorshift(x: &mut u64) -> u64 {
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    *x
}

/// The words of a child's line from the first of `keys` on (the first
/// line follows libtest's `test ... ` on the same line).
fn words_from<'a>(line: &'a str, keys: &[&str]) -> Vec<&'a str> {
    let at = keys
        .iter()
        .filter_map(|k| line.find(k))
        .min()
        .unwrap_or(line.len());
    line[at..].split_whitespace().collect()
}

fn open_retrying(dir: &Path, opts: DbOptions) -> Arc<Database> {
    let mut tries = 0;
    loop {
        match Database::open(dir, opts.clone()) {
            Ok(db) => return Arc::new(db),
            Err(silt::Error::Locked { .. }) if tries < 200 => {
                tries += 1;
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            Err(e) => panic!("child open: {e}"),
        }
    }
}

/// The writer. Runs only when started by the torture test.
#[test]
fn crash_child() {
    let Ok(dir) = std::env::var("SILT_CRASH_CHILD") else {
        return;
    };
    let pad: usize = std::env::var("SILT_CRASH_PAD")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let seed: u64 = std::env::var("SILT_CRASH_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1);
    let db = open_retrying(Path::new(&dir), db_opts(pad > 0));
    let ds = match db.dataset("t") {
        Ok(ds) => ds,
        Err(_) => db
            .create_dataset(
                DatasetDef::new("t", &["id"])
                    .field("id", FieldType::Int)
                    .memory_budget(1 << 20)
                    .partitions(2)
                    .policy(MergePolicy::parse("tiered(3)").expect("policy")),
            )
            .expect("create"),
    };
    // Every start creates the indexes that are missing: the parent may kill
    // the first writer in the middle of creating them.
    let have: Vec<String> = ds.index_defs().into_iter().map(|d| d.name).collect();
    for d in wanted_indexes() {
        if !have.contains(&d.name) {
            db.create_index("t", d).expect("create index");
        }
    }
    let out = Arc::new(std::sync::Mutex::new(std::io::stdout()));
    let mut handles = Vec::new();
    for t in 0..THREADS {
        let (ds, out) = (ds.clone(), out.clone());
        handles.push(std::thread::spawn(move || {
            let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ (t as u64 + 1);
            let mut n: i64 = (seed as i64) << 20;
            loop {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let k = ((x >> 8) as i64 % (KEYS / THREADS)) * THREADS + t;
                n += 1;
                let op = x % 3;
                let say = |s: String| {
                    let mut o = out.lock().expect("stdout lock");
                    let _ = writeln!(o, "{s}");
                    let _ = o.flush();
                };
                say(format!("BEGIN {t} {op} {k} {n}"));
                let result = match op {
                    0 => match ds.insert(record(k, n, pad)) {
                        Ok(()) => "ok",
                        Err(silt::Error::DuplicateKey { .. }) => "dup",
                        Err(e) => panic!("insert: {e}"),
                    },
                    1 => {
                        ds.upsert(record(k, n, pad)).expect("upsert");
                        "ok"
                    }
                    _ => {
                        if ds.delete(&[Value::Int(k)]).expect("delete") {
                            "ok"
                        } else {
                            "absent"
                        }
                    }
                };
                say(format!("ACK {t} {op} {k} {n} {result}"));
            }
        }));
    }
    for h in handles {
        let _ = h.join();
    }
}

#[derive(Clone, Copy, Debug)]
struct Pending {
    op: u64,
    key: i64,
    val: i64,
}

fn apply(model: &mut BTreeMap<i64, i64>, p: Pending, result: &str) {
    match (p.op, result) {
        (0, "ok") | (1, _) => {
            model.insert(p.key, p.val);
        }
        (2, _) => {
            model.remove(&p.key);
        }
        _ => {}
    }
}

fn run_phase(dir: &Path, pad: usize, cycles: usize, seed0: u64) {
    let exe = std::env::current_exe().expect("test binary path");
    let mut model: BTreeMap<i64, i64> = BTreeMap::new();
    let mut rng = seed0;
    let mut total_acks = 0usize;
    let mut redone = 0u64;
    let mut torn = 0usize;
    let mut history: BTreeMap<i64, Vec<String>> = BTreeMap::new();
    for cycle in 0..cycles {
        xorshift(&mut rng);
        let mut child = Command::new(&exe)
            .args([
                "--exact",
                "crash_child",
                "--nocapture",
                "--test-threads",
                "1",
            ])
            .env("SILT_CRASH_CHILD", dir)
            .env("SILT_CRASH_PAD", pad.to_string())
            .env("SILT_CRASH_SEED", (cycle as u64 + 1 + seed0).to_string())
            .stdout(Stdio::piped())
            .stderr(Stdio::from(
                std::fs::File::create(dir.with_extension("child-stderr")).expect("stderr file"),
            ))
            .spawn()
            .expect("spawn writer");
        let stdout = child.stdout.take().expect("child stdout");
        let kill_after = Duration::from_millis(30 + rng % 250);
        let reader = std::thread::spawn(move || {
            let mut lines = Vec::new();
            for l in BufReader::new(stdout).lines() {
                match l {
                    Ok(l) => lines.push(l),
                    Err(_) => break,
                }
            }
            lines
        });
        let start = Instant::now();
        while start.elapsed() < kill_after {
            if let Ok(Some(st)) = child.try_wait() {
                let err =
                    std::fs::read_to_string(dir.with_extension("child-stderr")).unwrap_or_default();
                panic!("writer exited early with {st} in cycle {cycle}: {err}");
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        child.kill().expect("SIGKILL the writer");
        let _ = child.wait();
        let lines = reader.join().expect("reader thread");
        // Replay acknowledged operations; remember each thread's in-flight one.
        let mut inflight: BTreeMap<u64, Pending> = BTreeMap::new();
        for l in &lines {
            // With --nocapture, libtest prints "test crash_child ... " and the
            // child's first line follows on the same line: find the marker.
            let start = ["BEGIN ", "ACK "].iter().filter_map(|m| l.find(m)).min();
            let Some(start) = start else { continue };
            let f: Vec<&str> = l[start..].split_whitespace().collect();
            if f.len() < 5 || (f[0] != "BEGIN" && f[0] != "ACK") {
                continue;
            }
            let t: u64 = f[1].parse().expect("thread");
            let p = Pending {
                op: f[2].parse().expect("op"),
                key: f[3].parse().expect("key"),
                val: f[4].parse().expect("val"),
            };
            history
                .entry(p.key)
                .or_default()
                .push(format!("c{cycle} {}", f[0..].join(" ")));
            if f[0] == "BEGIN" {
                inflight.insert(t, p);
            } else {
                apply(&mut model, p, f.get(5).copied().unwrap_or(""));
                inflight.remove(&t);
                total_acks += 1;
            }
        }
        // Every fourth cycle, simulate a torn write of the record being appended
        // when the power went: garbage after the last complete log record.
        if cycle % 4 == 1 {
            tear_log_tail(dir, rng);
        }
        // Reopen: recovery must bring back every acknowledged commit.
        let db = Database::open(dir, db_opts(pad > 0))
            .unwrap_or_else(|e| panic!("reopen after kill in cycle {cycle}: {e}"));
        redone += db.recovery_summary().records_redone;
        if db.recovery_summary().truncated_bytes > 0 {
            torn += 1;
        }
        let Ok(ds) = db.dataset("t") else {
            assert!(
                model.is_empty(),
                "dataset missing after acknowledged writes"
            );
            continue;
        };
        let inflight_keys: BTreeMap<i64, Pending> =
            inflight.values().map(|p| (p.key, *p)).collect();
        let mut seen = BTreeMap::new();
        for r in ds
            .scan(std::ops::Bound::Unbounded, std::ops::Bound::Unbounded)
            .expect("scan")
        {
            let r = r.expect("record");
            let k = r.get("id").and_then(Value::as_i64).expect("id");
            let v = r.get("v").and_then(Value::as_i64).expect("v");
            seen.insert(k, v);
        }
        for k in 0..KEYS {
            let got = seen.get(&k).copied();
            let by_get = ds
                .get(&[Value::Int(k)])
                .expect("get")
                .and_then(|r| r.get("v").and_then(Value::as_i64));
            assert_eq!(
                got, by_get,
                "scan and get disagree on key {k} in cycle {cycle}"
            );
            let want = model.get(&k).copied();
            if got == want {
                continue;
            }
            // Only an unacknowledged in-flight operation may have landed.
            let p = inflight_keys.get(&k).unwrap_or_else(|| {
                let h = history.get(&k).map(|v| v[v.len().saturating_sub(12)..].join("\n")).unwrap_or_default();
                panic!("cycle {cycle}: key {k} is {got:?}, acknowledged state is {want:?}; history:\n{h}")
            });
            let mut alt = model.clone();
            apply(&mut alt, *p, "ok");
            assert_eq!(
                got,
                alt.get(&k).copied(),
                "cycle {cycle}: key {k} is neither the acknowledged nor the in-flight state"
            );
        }
        // The secondary index agrees with the primary: same (v, id) pairs.
        let mut from_index: Vec<(i64, i64)> = ds
            .index_range_keys(
                "by_v",
                std::ops::Bound::Unbounded,
                std::ops::Bound::Unbounded,
                None,
            )
            .expect("index scan")
            .iter()
            .map(|h| (h.sk[0].as_i64().expect("v"), h.pk[0].as_i64().expect("id")))
            .collect();
        from_index.sort_unstable();
        let mut from_primary: Vec<(i64, i64)> = seen.iter().map(|(k, v)| (*v, *k)).collect();
        from_primary.sort_unstable();
        assert_eq!(
            from_index, from_primary,
            "cycle {cycle}: index by_v disagrees with the primary"
        );
        check_spatial_and_text(&ds, &seen, cycle);
        check_recency(&ds, &seen, cycle);
        // The database is now the truth for in-flight keys.
        for k in inflight_keys.keys() {
            match seen.get(k) {
                Some(v) => model.insert(*k, *v),
                None => model.remove(k),
            };
        }
        drop(ds);
        db.close().expect("close after check");
    }
    assert!(
        total_acks > cycles,
        "the writer acknowledged too little: {total_acks}"
    );
    eprintln!(
        "crash torture: {cycles} kills, {total_acks} acknowledged operations, {redone} records redone, {torn} torn log tails cut, {} live keys",
        model.len()
    );
}

/// The R-trees (both variants), the other spatial kinds and the keyword
/// index agree with the primary: index-only answers (straight from the index entries, since no
/// writer runs) equal brute force over the recovered records.
fn check_spatial_and_text(ds: &Arc<silt::Dataset>, seen: &BTreeMap<i64, i64>, cycle: usize) {
    use silt::{Geometry, Query, QueryOptions};
    let o = QueryOptions {
        index_only: true,
        limit: None,
    };
    let ids = |index: &str, q: &Query| -> Vec<i64> {
        let mut v: Vec<i64> = ds
            .query(index, q, o)
            .expect("query")
            .map(|h| h.expect("hit").pk[0].as_i64().expect("id"))
            .collect();
        v.sort_unstable();
        v
    };
    let boxes = [
        [-180.0, -90.0, 180.0, 90.0],
        [-180.0, -90.0, 0.0, 0.0],
        [0.0, 0.0, 180.0, 90.0],
        [-30.5, -20.0, 60.25, 45.0],
        [150.0, -50.0, -150.0, 50.0],
    ];
    for b in boxes {
        let want: Vec<i64> = seen
            .iter()
            .filter(|(_, v)| {
                let (x, y) = loc_of(**v);
                let in_x = if b[0] <= b[2] {
                    b[0] <= x && x <= b[2]
                } else {
                    x >= b[0] || x <= b[2]
                };
                in_x && b[1] <= y && y <= b[3]
            })
            .map(|(k, _)| *k)
            .collect();
        let q = Query::Intersects(Geometry::rect(b[0], b[1], b[2], b[3]));
        let others = OTHER_SPATIAL.iter().map(|(n, _)| *n);
        for index in ["loc_am", "loc_dk"].into_iter().chain(others) {
            assert_eq!(ids(index, &q), want, "cycle {cycle}: {index} box {b:?}");
        }
    }
    for w in ["w0", "w3", "w9"] {
        let want: Vec<i64> = seen
            .iter()
            .filter(|(_, v)| words_of(**v).to_lowercase().split(' ').any(|t| t == w))
            .map(|(k, _)| *k)
            .collect();
        let q = Query::Text {
            text: w.into(),
            all: true,
        };
        assert_eq!(ids("words", &q), want, "cycle {cycle}: keyword {w}");
    }
}

/// The writer's indexes: a B+-tree on `v`, both R-tree variants and every
/// other spatial kind on `loc`, a keyword index on `msg`, and the recency
/// kinds on `v`.
fn wanted_indexes() -> Vec<silt::IndexDef> {
    let mut v = vec![
        silt::IndexDef::btree("by_v", &["v"]),
        silt::IndexDef::rtree("loc_am", "loc").reconcile(silt::ReconcileOption::Antimatter),
        silt::IndexDef::rtree("loc_dk", "loc").reconcile(silt::ReconcileOption::DeletedKeys),
        silt::IndexDef::keyword("words", "msg"),
    ];
    // The other spatial kinds of seed 000 ch. 4 (and seed 002's Simple
    // order), checked like the R-trees.
    for (name, kind) in OTHER_SPATIAL {
        let mut d = silt::IndexDef::rtree(name, "loc");
        d.kind = kind;
        if name == "loc_simple" {
            d.options.order = Some(silt::index::RtreeOrder::Simple);
        }
        if kind == silt::IndexKind::Sif {
            d.options.levels = Some(vec![2, 2, 2, 3]);
        }
        v.push(d);
    }
    for (name, kind) in RECENCY {
        v.push(silt::IndexDef::recency(name, kind, "v"));
    }
    v
}

/// DHVB, DHB, SHB, SIF and an R-tree in Simple (x, then y) order on `loc`.
const OTHER_SPATIAL: [(&str, silt::IndexKind); 5] = [
    ("loc_dhvb", silt::IndexKind::Dhvb),
    ("loc_dhb", silt::IndexKind::Dhb),
    ("loc_shb", silt::IndexKind::Shb),
    ("loc_sif", silt::IndexKind::Sif),
    ("loc_simple", silt::IndexKind::Rtree),
];

/// The LevelDB++ recency indexes on `v`.
const RECENCY: [(&str, silt::IndexKind); 4] = [
    ("r_emb", silt::IndexKind::Embedded),
    ("r_eager", silt::IndexKind::Eager),
    ("r_lazy", silt::IndexKind::Lazy),
    ("r_comp", silt::IndexKind::Composite),
];

/// The recency indexes agree with the primary after recovery: every range
/// of `v` finds exactly the recovered records, and all kinds list them in
/// the same (newest first) order.
fn check_recency(ds: &Arc<silt::Dataset>, seen: &BTreeMap<i64, i64>, cycle: usize) {
    use silt::{Query, QueryOptions};
    use std::ops::{Bound, RangeBounds};
    let mut vs: Vec<i64> = seen.values().copied().collect();
    vs.sort_unstable();
    let mut ranges = vec![(Bound::Unbounded, Bound::Unbounded)];
    if let (Some(a), Some(b)) = (vs.get(vs.len() / 4), vs.get(vs.len() / 2)) {
        ranges.push((Bound::Included(*a), Bound::Included(*b)));
        ranges.push((Bound::Included(*a), Bound::Included(*a)));
    }
    for (lo, hi) in ranges {
        let q = Query::Recent {
            lo: lo.map(|v| vec![Value::Int(v)]),
            hi: hi.map(|v| vec![Value::Int(v)]),
            k: None,
        };
        let mut want: Vec<i64> = seen
            .iter()
            .filter(|(_, v)| (lo, hi).contains(*v))
            .map(|(k, _)| *k)
            .collect();
        want.sort_unstable();
        let mut first: Option<Vec<i64>> = None;
        for (name, _) in RECENCY {
            let got: Vec<i64> = ds
                .query(name, &q, QueryOptions::default())
                .expect("recent query")
                .map(|h| h.expect("hit").pk[0].as_i64().expect("id"))
                .collect();
            let mut sorted = got.clone();
            sorted.sort_unstable();
            assert_eq!(sorted, want, "cycle {cycle}: {name} range {lo:?}..{hi:?}");
            match &first {
                None => first = Some(got),
                Some(f) => assert_eq!(&got, f, "cycle {cycle}: {name} order differs"),
            }
        }
    }
}

/// Append a partial frame (a length prefix promising more bytes than follow,
/// then noise) to the newest log file.
fn tear_log_tail(dir: &Path, noise: u64) {
    let wal = dir.join("wal");
    let Ok(rd) = std::fs::read_dir(&wal) else {
        return;
    };
    let newest = rd
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "wal"))
        .max();
    if let Some(p) = newest {
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&p)
            .expect("open log");
        let mut junk = 200u32.to_le_bytes().to_vec();
        junk.extend_from_slice(&noise.to_le_bytes());
        junk.extend_from_slice(&[0xAB; 7]);
        f.write_all(&junk).expect("tear");
    }
}

fn cycles() -> usize {
    std::env::var("SILT_CRASH_CYCLES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(100)
}

#[test]
fn crash_torture_without_flushes() {
    if std::env::var_os("SILT_CRASH_CHILD").is_some() {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    run_phase(dir.path(), 0, cycles(), 7);
}

#[test]
fn crash_torture_with_flushes_merges_and_checkpoints() {
    if std::env::var_os("SILT_CRASH_CHILD").is_some() {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    run_phase(dir.path(), 3000, cycles(), 99);
}
