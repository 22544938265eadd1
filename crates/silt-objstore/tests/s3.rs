//! Datasets whose levels live in a real S3-compatible server (moto's, on
//! loopback), through a proxy that injects latency, 503s and torn
//! requests: results equal a model, no acknowledged write is lost, two
//! writers of one prefix cannot both win, a crash between an upload and
//! its MANIFEST leaves nothing visible and its garbage is collected.

mod harness;

use harness::{FaultProxy, Faults, Moto, url};
use proptest::prelude::*;
use silt::lsm::policy::MergePolicy;
use silt::storage::remote::RemoteStore;
use silt::{Database, DatasetDef, DbOptions, Durability, FieldType, Value};
use std::collections::BTreeMap;
use std::ops::Bound;
use std::path::Path;
use std::time::Duration;

fn opts(durability: Durability) -> DbOptions {
    DbOptions {
        block_cache_bytes: 1 << 20,
        durability,
        ..Default::default()
    }
}

fn def(url: &str, policy: &str, from_level: u32, budget: u64) -> DatasetDef {
    DatasetDef::new("t", &["id"])
        .field("id", FieldType::Int)
        .field("v", FieldType::Int)
        .memory_budget(budget)
        .block_size(1024)
        .policy(MergePolicy::parse(policy).unwrap())
        .remote(url, from_level)
}

fn rec(k: i64, v: i64, pad: usize) -> Value {
    Value::Object(vec![
        ("id".into(), Value::Int(k)),
        ("v".into(), Value::Int(v)),
        ("pad".into(), Value::String("s".repeat(pad))),
    ])
}

fn v_of(r: &Value) -> i64 {
    r.get("v").and_then(Value::as_i64).unwrap_or(-1)
}

/// The objects under `prefix` of the store at `url` (a fresh client).
fn objects(url: &str, prefix: &str) -> Vec<String> {
    let b = silt_objstore::ObjectBackend::open(url, &silt_objstore::Settings::default()).unwrap();
    let mut keys: Vec<String> = b.list(prefix).unwrap().into_iter().map(|o| o.key).collect();
    keys.sort();
    keys
}

/// Components of every index of `t`, and how many are in the bucket.
fn remote_components(db: &Database, from_level: u32) -> usize {
    let ds = db.dataset("t").unwrap();
    ds.stats()
        .indexes
        .iter()
        .flat_map(|t| t.components.iter())
        .filter(|c| c.level >= from_level)
        .count()
}

fn check_all(db: &Database, model: &BTreeMap<i64, i64>) -> Result<(), TestCaseError> {
    let ds = db.dataset("t").unwrap();
    let all: Vec<(i64, i64)> = ds
        .scan(Bound::Unbounded, Bound::Unbounded)
        .unwrap()
        .map(|r| {
            let r = r.unwrap();
            (r.get("id").and_then(Value::as_i64).unwrap(), v_of(&r))
        })
        .collect();
    let want: Vec<(i64, i64)> = model.iter().map(|(k, v)| (*k, *v)).collect();
    prop_assert_eq!(all, want);
    for k in (0..300).step_by(7) {
        let got = ds.get(&[Value::Int(k)]).unwrap().map(|r| v_of(&r));
        prop_assert_eq!(got, model.get(&k).copied(), "get {}", k);
    }
    Ok(())
}

#[derive(Clone, Debug)]
enum Op {
    Upsert(i64, i64),
    Delete(i64),
    Flush,
    Compact,
    Reopen,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        10 => (0i64..300, 0i64..1000).prop_map(|(k, v)| Op::Upsert(k, v)),
        3 => (0i64..300).prop_map(Op::Delete),
        2 => Just(Op::Flush),
        1 => Just(Op::Compact),
        1 => Just(Op::Reopen),
    ]
}

fn run_model(ops: &[Op], url: &str, policy: &str, from_level: u32) -> Result<(), TestCaseError> {
    let dir = tempfile::tempdir().unwrap();
    let mut db = Database::open(dir.path(), opts(Durability::None)).unwrap();
    db.create_dataset(def(url, policy, from_level, 1 << 20))
        .unwrap();
    let mut model = BTreeMap::new();
    for op in ops {
        let ds = db.dataset("t").unwrap();
        match op {
            Op::Upsert(k, v) => {
                ds.upsert(rec(*k, *v, (*v % 1000) as usize * 3)).unwrap();
                model.insert(*k, *v);
            }
            Op::Delete(k) => {
                let existed = ds.delete(&[Value::Int(*k)]).unwrap();
                prop_assert_eq!(existed, model.remove(k).is_some());
            }
            Op::Flush => ds.flush().unwrap(),
            Op::Compact => ds.compact().unwrap(),
            Op::Reopen => {
                drop(ds);
                db.close().unwrap();
                drop(db);
                db = Database::open(dir.path(), opts(Durability::None)).unwrap();
            }
        }
    }
    check_all(&db, &model)?;
    db.dataset("t").unwrap().flush().unwrap();
    db.close().unwrap();
    drop(db);
    let db = Database::open(dir.path(), opts(Durability::None)).unwrap();
    check_all(&db, &model)?;
    // After an open, the bucket holds the listed components and MANIFEST only.
    let prefix = url.split('?').next().unwrap_or(url);
    let keys = objects(url, "t/p0/primary");
    let comps = keys
        .iter()
        .filter(|k| k.ends_with(".sc") && !k.ends_with(".dk.sc") && !k.ends_with(".col.sc"))
        .count();
    // Each with its column image (the records are objects).
    let images = keys.iter().filter(|k| k.ends_with(".col.sc")).count();
    prop_assert_eq!(images, comps, "column images in {}: {:?}", prefix, keys);
    prop_assert_eq!(
        comps,
        remote_components(&db, from_level),
        "objects in {}: {:?}",
        prefix,
        keys
    );
    prop_assert!(keys.iter().any(|k| k.ends_with("/MANIFEST")));
    Ok(())
}

static CASE: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

#[test]
fn s3_tiers_match_a_model() {
    if harness::skip() {
        return;
    }
    silt_objstore::install();
    let moto = Moto::start();
    moto.bucket("model");
    let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig::with_cases(6));
    runner
        .run(&proptest::collection::vec(op(), 1..200), |ops| {
            let n = CASE.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            run_model(
                &ops,
                &url(moto.port, "model", &format!("c{n}a")),
                "tiered(3)",
                0,
            )?;
            run_model(
                &ops,
                &url(moto.port, "model", &format!("c{n}b")),
                "leveled(2,3,16KB,32KB)",
                1,
            )
        })
        .unwrap();
}

#[test]
fn two_writers_of_one_prefix_cannot_both_win() {
    if harness::skip() {
        return;
    }
    silt_objstore::install();
    let moto = Moto::start();
    moto.bucket("shared");
    let u = url(moto.port, "shared", "db");
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let db_a = Database::open(a.path(), opts(Durability::None)).unwrap();
    db_a.create_dataset(def(&u, "no-merge", 0, 1 << 20))
        .unwrap();
    let db_b = Database::open(b.path(), opts(Durability::None)).unwrap();
    let Err(e) = db_b.create_dataset(def(&u, "no-merge", 0, 1 << 20)) else {
        panic!("a second database created a dataset over the first one's objects");
    };
    assert!(e.to_string().contains("already holds"), "{e}");
    drop(db_b);
    std::fs::copy(a.path().join("catalog.json"), b.path().join("catalog.json")).unwrap();
    let db_b = Database::open(b.path(), opts(Durability::None)).unwrap();
    let ds_a = db_a.dataset("t").unwrap();
    ds_a.upsert(rec(1, 1, 10)).unwrap();
    let Err(e) = ds_a.flush() else {
        panic!("the writer that lost the prefix flushed");
    };
    assert!(e.to_string().contains("replaced by another writer"), "{e}");
    let ds_b = db_b.dataset("t").unwrap();
    ds_b.upsert(rec(2, 2, 10)).unwrap();
    ds_b.flush().unwrap();
    assert!(ds_b.get(&[Value::Int(2)]).unwrap().is_some());
}

/// Writes through a proxy that delays every request, answers 15% with
/// 503 and tears 10%: what was acknowledged is all there after reopening
/// through a clean connection, and every read was right or an error.
#[test]
fn faults_lose_no_acknowledged_write() {
    if harness::skip() {
        return;
    }
    silt_objstore::install();
    let moto = Moto::start();
    moto.bucket("faulty");
    let proxy = FaultProxy::start(
        moto.port,
        Faults {
            latency: Duration::from_millis(2),
            unavailable: 150,
            torn: 100,
        },
        0x5eed,
    );
    let via_proxy = url(proxy.port, "faulty", "db");
    let dir = tempfile::tempdir().unwrap();
    let mut model = BTreeMap::new();
    let mut flush_errors = 0;
    {
        let db = Database::open(dir.path(), opts(Durability::Sync)).unwrap();
        db.create_dataset(def(&via_proxy, "tiered(3)", 0, 1 << 20))
            .unwrap();
        let ds = db.dataset("t").unwrap();
        for round in 0..6i64 {
            for k in 0..200 {
                let key = (k * 7 + round * 13) % 300;
                let v = round * 1000 + k;
                // Acknowledged = logged durably; the flush below may fail.
                if ds.upsert(rec(key, v, 150)).is_ok() {
                    model.insert(key, v);
                }
            }
            if ds.flush().is_err() {
                flush_errors += 1;
                break;
            }
            // Reads during faults: right, or an error naming the store.
            for k in (0..300).step_by(11) {
                match ds.get(&[Value::Int(k)]) {
                    Ok(got) => assert_eq!(got.map(|r| v_of(&r)), model.get(&k).copied()),
                    Err(e) => assert!(e.to_string().contains("object storage"), "{e}"),
                }
            }
        }
        let _ = ds.compact();
        drop(ds);
        let _ = db.close();
    }
    assert!(
        proxy.injected.load(std::sync::atomic::Ordering::Relaxed) > 0,
        "no fault was injected"
    );
    eprintln!("flushes that failed for good: {flush_errors}");
    // Reopen with the faults off: recovery replays the log over what the
    // bucket's MANIFEST lists.
    proxy.set(Faults::default());
    let db = Database::open(dir.path(), opts(Durability::Sync)).unwrap();
    check_all(&db, &model).unwrap();
}

/// A store that stays down past the retries: the flush fails with an
/// error naming the object, reads of what is in memory go on, and once the
/// store is back a reopened database has every acknowledged write.
#[test]
fn an_outage_fails_clearly_and_loses_nothing() {
    if harness::skip() {
        return;
    }
    silt_objstore::install();
    let moto = Moto::start();
    moto.bucket("outage");
    let proxy = FaultProxy::start(moto.port, Faults::default(), 3);
    let u = format!("{}&max_retries=2", url(proxy.port, "outage", "db"));
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path(), opts(Durability::Sync)).unwrap();
    db.create_dataset(def(&u, "no-merge", 0, 1 << 20)).unwrap();
    let ds = db.dataset("t").unwrap();
    for k in 0..100 {
        ds.upsert(rec(k, k, 100)).unwrap();
    }
    ds.flush().unwrap();
    proxy.set(Faults {
        unavailable: 1000,
        ..Faults::default()
    });
    for k in 100..200 {
        ds.upsert(rec(k, k, 100)).unwrap();
    }
    let Err(e) = ds.flush() else {
        panic!("a flush succeeded while the store was down");
    };
    let msg = e.to_string();
    assert!(
        msg.contains("object storage error on s3://outage/db/t/p0/primary/"),
        "{msg}"
    );
    assert!(
        !msg.contains("secret"),
        "the message shows the URL's settings: {msg}"
    );
    drop(ds);
    drop(db);
    proxy.set(Faults::default());
    let db = Database::open(dir.path(), opts(Durability::Sync)).unwrap();
    let ds = db.dataset("t").unwrap();
    for k in 0..200 {
        assert_eq!(ds.get(&[Value::Int(k)]).unwrap().map(|r| v_of(&r)), Some(k));
    }
}

#[test]
fn large_components_upload_in_parts() {
    if harness::skip() {
        return;
    }
    silt_objstore::install();
    let moto = Moto::start();
    moto.bucket("large");
    let u = url(moto.port, "large", "db");
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path(), opts(Durability::None)).unwrap();
    let d = def(&u, "no-merge", 0, 64 << 20).compression(silt::storage::Compression::None);
    db.create_dataset(d).unwrap();
    let ds = db.dataset("t").unwrap();
    let n = 12_000i64; // ~12 MiB of records: more than one 8 MiB part
    for k in 0..n {
        ds.upsert(rec(k, k, 1000)).unwrap();
    }
    ds.flush().unwrap();
    let stats = ds.stats();
    let c = &stats.indexes[0].components;
    assert_eq!(c.len(), 1);
    assert!(
        c[0].size_bytes > 8 << 20,
        "component of {} bytes",
        c[0].size_bytes
    );
    drop(ds);
    db.close().unwrap();
    drop(db);
    let db = Database::open(dir.path(), opts(Durability::None)).unwrap();
    let ds = db.dataset("t").unwrap();
    for k in (0..n).step_by(997) {
        assert_eq!(ds.get(&[Value::Int(k)]).unwrap().map(|r| v_of(&r)), Some(k));
    }
    assert_eq!(
        ds.scan(Bound::Unbounded, Bound::Unbounded).unwrap().count() as i64,
        n
    );
}

/// A writer killed at random moments while it uploads through a slow
/// proxy: after each kill, the reopened database holds every acknowledged
/// write, and the bucket only what its MANIFEST lists.
#[test]
fn killed_writers_leave_no_half_state() {
    if harness::skip() {
        return;
    }
    if let Some(args) = std::env::var_os("SILT_S3_CRASH_CHILD") {
        let args = args.to_string_lossy().into_owned();
        crash_child(Path::new(&args));
        return;
    }
    silt_objstore::install();
    let moto = Moto::start();
    moto.bucket("crash");
    let proxy = FaultProxy::start(
        moto.port,
        Faults {
            latency: Duration::from_millis(15),
            ..Faults::default()
        },
        7,
    );
    let u = url(proxy.port, "crash", "db");
    let dir = tempfile::tempdir().unwrap();
    {
        let db = Database::open(dir.path(), opts(Durability::Sync)).unwrap();
        db.create_dataset(def(&u, "tiered(3)", 0, 1 << 20)).unwrap();
    }
    let exe = std::env::current_exe().unwrap();
    let mut acked: BTreeMap<i64, i64> = BTreeMap::new();
    let mut seed = 0x9e37_79b9_u64;
    for cycle in 0..5u64 {
        let mut child = std::process::Command::new(&exe)
            .args([
                "--exact",
                "killed_writers_leave_no_half_state",
                "--nocapture",
                "--test-threads=1",
            ])
            .env("SILT_S3_CRASH_CHILD", dir.path())
            .env("SILT_CRASH_START", (cycle * 100_000).to_string())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        let run_for = Duration::from_millis(1500 + seed % 2500);
        let out = child.stdout.take().unwrap();
        let reader = std::thread::spawn(move || {
            use std::io::BufRead;
            let mut got = Vec::new();
            for line in std::io::BufReader::new(out).lines().map_while(Result::ok) {
                if let Some(rest) = line.strip_prefix("ACK ") {
                    let mut it = rest.split(' ');
                    let k: i64 = it.next().unwrap().parse().unwrap();
                    let v: i64 = it.next().unwrap().parse().unwrap();
                    got.push((k, v));
                }
            }
            got
        });
        std::thread::sleep(run_for);
        child.kill().unwrap();
        child.wait().unwrap();
        for (k, v) in reader.join().unwrap() {
            acked.insert(k, v);
        }
        let db = Database::open(dir.path(), opts(Durability::Sync)).unwrap();
        let ds = db.dataset("t").unwrap();
        // Each key holds its acknowledged value or a later one the writer
        // logged but was killed before acknowledging (`v` encodes the
        // writer's step `i`, and step i wrote key i * 37 mod 5000).
        for (k, v) in &acked {
            let got = ds.get(&[Value::Int(*k)]).unwrap().map(|r| v_of(&r));
            let ok = got.is_some_and(|g| g >= *v && (g % 100_000) * 37 % 5000 == *k);
            assert!(ok, "key {k}: {got:?}, acknowledged {v}, after kill {cycle}");
        }
        drop(ds);
        // Merges the reopened database started finish before the count.
        db.wait_idle().unwrap();
        let listed = remote_components(&db, 0);
        let keys = objects(&u, "t/p0/primary");
        let comps = keys
            .iter()
            .filter(|k| k.ends_with(".sc") && !k.ends_with(".col.sc"))
            .count();
        let images = keys.iter().filter(|k| k.ends_with(".col.sc")).count();
        assert_eq!(comps, listed, "bucket after kill {cycle}: {keys:?}");
        assert_eq!(images, listed, "column images after kill {cycle}: {keys:?}");
        db.close().unwrap();
    }
    assert!(!acked.is_empty(), "the writer acknowledged nothing");
}

/// The killed writer: upserts in a loop, one `ACK key value` line per
/// durable write; flushes happen as the small memory budget fills.
fn crash_child(dir: &Path) {
    use std::io::Write;
    silt_objstore::install();
    let start: i64 = std::env::var("SILT_CRASH_START")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let db = Database::open(dir, opts(Durability::Sync)).unwrap();
    let ds = db.dataset("t").unwrap();
    let mut out = std::io::stdout().lock();
    for i in 0.. {
        let k = (i * 37) % 5000;
        let v = start + i;
        ds.upsert(rec(k, v, 1000)).unwrap();
        writeln!(out, "ACK {k} {v}").unwrap();
        out.flush().unwrap();
    }
}
