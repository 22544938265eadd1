//! Model-based tests: random DML with forced flushes, merges and reopens,
//! under every merge policy and with several partitions, must agree with a
//! `BTreeMap`.

use proptest::prelude::*;
use silt::lsm::policy::MergePolicy;
use silt::storage::Compression;
use silt::{Database, DatasetDef, DbOptions, Error, FieldType, Value};
use std::collections::BTreeMap;
use std::ops::Bound;
use std::path::Path;

#[derive(Clone, Debug)]
enum Op {
    Insert(i64, u32),
    Upsert(i64, u32),
    Delete(i64),
    /// Insert this many new keys above every key so far (keys loaded in
    /// order leave components whose ranges do not overlap).
    Append(u8),
    Get(i64),
    Scan(i64, i64, usize),
    Flush,
    Compact,
    Reopen,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (0i64..400, any::<u32>()).prop_map(|(k, v)| Op::Insert(k, v)),
        6 => (0i64..400, any::<u32>()).prop_map(|(k, v)| Op::Upsert(k, v)),
        3 => (0i64..400).prop_map(Op::Delete),
        2 => (1u8..60).prop_map(Op::Append),
        3 => (0i64..400).prop_map(Op::Get),
        2 => (0i64..400, 0i64..400, 1usize..50).prop_map(|(a, b, l)| Op::Scan(a.min(b), a.max(b), l)),
        1 => Just(Op::Flush),
        1 => Just(Op::Compact),
        1 => Just(Op::Reopen),
    ]
}

const POLICIES: &[&str] = &[
    "no-merge",
    "constant(3)",
    "prefix(64KB,3)",
    "binomial(4)",
    "tiered(3)",
    "concurrent(10,2,5,1.2)",
    "leveled(2,3,8KB,16KB)",
];

fn opts() -> DbOptions {
    DbOptions {
        block_cache_bytes: 1 << 20,
        sync: false,
        durability: silt::Durability::None,
        ..Default::default()
    }
}

fn record(k: i64, v: u32) -> Value {
    Value::Object(vec![
        ("id".into(), Value::Int(k)),
        ("v".into(), Value::Int(i64::from(v))),
        // Padding so that the 1 MiB budget fills and flushes happen by themselves too.
        ("pad".into(), Value::String("x".repeat((v % 700) as usize))),
    ])
}

/// (id, v) of a scanned record.
fn id_value(r: silt::Result<Value>) -> (i64, u32) {
    let r = r.unwrap();
    (r.get("id").and_then(Value::as_i64).unwrap(), value_of(&r))
}

fn value_of(r: &Value) -> u32 {
    r.get("v").and_then(Value::as_i64).unwrap_or(-1) as u32
}

/// Where a run keeps the levels from `.1` down: a bucket URL.
type Remote<'a> = Option<(&'a str, u32)>;

fn create(
    dir: &Path,
    policy: &str,
    partitions: u32,
    compression: Compression,
    remote: Remote,
) -> Database {
    let db = Database::open(dir, opts()).unwrap();
    let mut def = DatasetDef::new("t", &["id"])
        .field("id", FieldType::Int)
        .field("v", FieldType::Int)
        .memory_budget(1 << 20)
        .block_size(512)
        .partitions(partitions)
        .policy(MergePolicy::parse(policy).unwrap())
        .compression(compression);
    if let Some((url, level)) = remote {
        def = def.remote(url, level);
    }
    db.create_dataset(def).unwrap();
    db
}

/// Objects of a directory-backed bucket: files under `dirtest://<dir>`.
pub(crate) fn register_dir_store() {
    use silt::storage::remote::{DirStore, RemoteStore, register};
    use std::sync::Arc;
    register(
        "dirtest",
        Arc::new(|url: &str| {
            let dir = url.trim_start_matches("dirtest://");
            let store: Arc<dyn RemoteStore> = Arc::new(DirStore::new(url, Path::new(dir)));
            Ok(store)
        }),
    );
}

/// Component files (not deleted-key files or column images) under `dir`,
/// recursively.
fn objects(dir: &Path) -> usize {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return 0;
    };
    rd.flatten()
        .map(|e| {
            let p = e.path();
            if p.is_dir() {
                objects(&p)
            } else {
                let n = e.file_name().to_string_lossy().into_owned();
                usize::from(n.ends_with(".sc") && !n.ends_with(".dk.sc") && !n.ends_with(".col.sc"))
            }
        })
        .sum()
}

fn run(
    ops: &[Op],
    policy: &str,
    partitions: u32,
    compression: Compression,
) -> Result<(), TestCaseError> {
    run_in(ops, policy, partitions, compression, None)
}

fn run_in(
    ops: &[Op],
    policy: &str,
    partitions: u32,
    compression: Compression,
    from_level: Option<u32>,
) -> Result<(), TestCaseError> {
    let dir = tempfile::tempdir().unwrap();
    let bucket = tempfile::tempdir().unwrap();
    let url = format!("dirtest://{}", bucket.path().display());
    let remote = from_level.map(|l| (url.as_str(), l));
    let mut db = create(dir.path(), policy, partitions, compression, remote);
    let mut model: BTreeMap<i64, u32> = BTreeMap::new();
    let mut next_appended = 1000i64;
    for op in ops {
        let ds = db.dataset("t").unwrap();
        match op {
            Op::Append(n) => {
                for _ in 0..*n {
                    ds.insert(record(next_appended, 7)).unwrap();
                    model.insert(next_appended, 7);
                    next_appended += 1;
                }
            }
            Op::Insert(k, v) => {
                let r = ds.insert(record(*k, *v));
                if model.contains_key(k) {
                    prop_assert!(matches!(r, Err(Error::DuplicateKey { .. })), "{r:?}");
                } else {
                    prop_assert!(r.is_ok(), "{r:?}");
                    model.insert(*k, *v);
                }
            }
            Op::Upsert(k, v) => {
                ds.upsert(record(*k, *v)).unwrap();
                model.insert(*k, *v);
            }
            Op::Delete(k) => {
                let existed = ds.delete(&[Value::Int(*k)]).unwrap();
                prop_assert_eq!(existed, model.remove(k).is_some());
            }
            Op::Get(k) => {
                let got = ds.get(&[Value::Int(*k)]).unwrap().map(|r| value_of(&r));
                prop_assert_eq!(got, model.get(k).copied(), "get {} under {}", k, policy);
            }
            Op::Scan(a, b, limit) => {
                let got: Vec<(i64, u32)> = ds
                    .scan(
                        Bound::Included(&[Value::Int(*a)]),
                        Bound::Excluded(&[Value::Int(*b)]),
                    )
                    .unwrap()
                    .take(*limit)
                    .map(id_value)
                    .collect();
                let want: Vec<(i64, u32)> = model
                    .range(*a..*b)
                    .take(*limit)
                    .map(|(k, v)| (*k, *v))
                    .collect();
                prop_assert_eq!(got, want, "scan under {}", policy);
                // The same range backwards, from its last key.
                let lo = ds.encode_pk_prefix(&[Value::Int(*a)]).unwrap();
                let hi = ds.encode_pk_prefix(&[Value::Int(*b)]).unwrap();
                let got: Vec<(i64, u32)> = ds
                    .scan_raw_rev(Bound::Included(lo), Bound::Excluded(hi))
                    .unwrap()
                    .take(*limit)
                    .map(id_value)
                    .collect();
                let want: Vec<(i64, u32)> = model
                    .range(*a..*b)
                    .rev()
                    .take(*limit)
                    .map(|(k, v)| (*k, *v))
                    .collect();
                prop_assert_eq!(got, want, "reverse scan under {}", policy);
            }
            Op::Flush => ds.flush().unwrap(),
            Op::Compact => ds.compact().unwrap(),
            Op::Reopen => {
                drop(ds);
                db.close().unwrap();
                drop(db);
                db = Database::open(dir.path(), opts()).unwrap();
            }
        }
        // The count from metadata, whenever the metadata decides it.
        let ds = db.dataset("t").unwrap();
        if let Some(n) = ds.exact_count() {
            prop_assert_eq!(
                n,
                model.len() as u64,
                "count after {:?} under {}",
                op,
                policy
            );
        }
    }
    // Final full comparison, then once more after reopening.
    for round in 0..2 {
        let ds = db.dataset("t").unwrap();
        let all: Vec<(i64, u32)> = ds
            .scan(Bound::Unbounded, Bound::Unbounded)
            .unwrap()
            .map(id_value)
            .collect();
        let want: Vec<(i64, u32)> = model.iter().map(|(k, v)| (*k, *v)).collect();
        prop_assert_eq!(all, want, "full scan round {} under {}", round, policy);
        let back: Vec<(i64, u32)> = ds
            .scan_raw_rev(Bound::Unbounded, Bound::Unbounded)
            .unwrap()
            .map(id_value)
            .collect();
        let want: Vec<(i64, u32)> = model.iter().rev().map(|(k, v)| (*k, *v)).collect();
        prop_assert_eq!(
            back,
            want,
            "reverse full scan round {} under {}",
            round,
            policy
        );
        if let Some(n) = ds.exact_count() {
            prop_assert_eq!(
                n,
                model.len() as u64,
                "count round {} under {}",
                round,
                policy
            );
        }
        for k in 0..400 {
            let got = ds.get(&[Value::Int(k)]).unwrap().map(|r| value_of(&r));
            prop_assert_eq!(got, model.get(&k).copied());
        }
        if let Some(level) = from_level {
            // The bucket holds exactly the components of the remote levels
            // (no garbage after a reopen, nothing local there).
            let stats = ds.stats();
            let remote = stats
                .indexes
                .iter()
                .flat_map(|t| t.components.iter())
                .filter(|c| c.level >= level)
                .count();
            if round == 1 {
                prop_assert_eq!(objects(bucket.path()), remote, "objects in the bucket");
            }
            prop_assert!(objects(bucket.path()) >= remote);
        }
        drop(ds);
        db.close().unwrap();
        drop(db);
        db = Database::open(dir.path(), opts()).unwrap();
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(12))]
    #[test]
    fn every_policy_matches_the_model(ops in proptest::collection::vec(op(), 1..400)) {
        for policy in POLICIES {
            run(&ops, policy, 1, Compression::Lz4)?;
        }
    }

    #[test]
    fn partitioned_datasets_match_the_model(ops in proptest::collection::vec(op(), 1..300)) {
        // Uncompressed: blocks are read in place from the mapped files
        // (the single-partition runs go through lz4 and the block cache).
        run(&ops, "tiered(3)", 4, Compression::None)?;
        run(&ops, "leveled(2,3,8KB,16KB)", 3, Compression::None)?;
    }

    #[test]
    fn remote_tiers_match_the_model(ops in proptest::collection::vec(op(), 1..300)) {
        register_dir_store();
        // Everything in the bucket, and only the cold levels of a leveled tree.
        run_in(&ops, "tiered(3)", 2, Compression::Lz4, Some(0))?;
        run_in(&ops, "leveled(2,3,8KB,16KB)", 1, Compression::None, Some(1))?;
    }
}

/// Ingest enough data that the memory budget flushes by itself and the
/// background merge threads run, then compare.
#[test]
fn background_flushes_and_merges_keep_every_record() {
    for policy in POLICIES {
        let dir = tempfile::tempdir().unwrap();
        let db = create(dir.path(), policy, 2, Compression::Lz4, None);
        let ds = db.dataset("t").unwrap();
        let mut model = BTreeMap::new();
        let mut x: u64 = 12345;
        for i in 0..20_000u32 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let k = ((x >> 33) % 5000) as i64;
            if i % 10 == 9 {
                ds.delete(&[Value::Int(k)]).unwrap();
                model.remove(&k);
            } else {
                ds.upsert(record(k, i)).unwrap();
                model.insert(k, i);
            }
        }
        db.wait_idle().unwrap();
        let stats = db.stats();
        let idx = &stats.datasets[0].indexes;
        assert!(
            idx.iter().map(|t| t.flushes).sum::<u64>() > 2,
            "{policy}: {idx:?}"
        );
        if *policy != "no-merge" {
            assert!(
                idx.iter().map(|t| t.merges).sum::<u64>() > 0,
                "{policy}: no merges"
            );
        }
        for k in 0..5000 {
            let got = ds.get(&[Value::Int(k)]).unwrap().map(|r| value_of(&r));
            assert_eq!(got, model.get(&k).copied(), "{policy} key {k}");
        }
        let n = ds.scan(Bound::Unbounded, Bound::Unbounded).unwrap().count();
        assert_eq!(n, model.len(), "{policy}");
    }
}

/// The count comes from metadata exactly when components do not overlap:
/// keys loaded in order (in memory and on disk) and after a full merge;
/// not when a later write lands inside an earlier component's range.
#[test]
fn counts_come_from_metadata_when_components_do_not_overlap() {
    let dir = tempfile::tempdir().unwrap();
    let db = create(dir.path(), "no-merge", 1, Compression::None, None);
    let ds = db.dataset("t").unwrap();
    assert_eq!(ds.exact_count(), Some(0));
    for k in 0..100 {
        ds.insert(record(k, 1)).unwrap();
    }
    ds.flush().unwrap();
    for k in 100..150 {
        ds.insert(record(k, 1)).unwrap();
    }
    assert_eq!(
        ds.exact_count(),
        Some(150),
        "one component and the memtable after it"
    );
    ds.delete(&[Value::Int(140)]).unwrap();
    assert_eq!(
        ds.exact_count(),
        Some(149),
        "antimatter in memory hides only itself"
    );
    ds.flush().unwrap();
    assert_eq!(ds.exact_count(), Some(149));
    ds.delete(&[Value::Int(5)]).unwrap();
    assert_eq!(
        ds.exact_count(),
        None,
        "an antimatter entry inside an older range"
    );
    ds.compact().unwrap();
    ds.flush().unwrap();
    ds.compact().unwrap();
    assert_eq!(ds.exact_count(), Some(148), "after a full merge");
    ds.upsert(record(7, 2)).unwrap();
    assert_eq!(ds.exact_count(), None, "a second version of a key");
}

/// Under concurrent writers a count from metadata is a count of committed
/// records: at least those acknowledged before it was asked for, at most
/// those acknowledged after it plus the one insert the writer may have
/// committed and not yet returned from; as a scan's would be.
#[test]
fn counts_from_metadata_under_concurrent_writes_are_committed_counts() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU64, Ordering};
    let dir = tempfile::tempdir().unwrap();
    let db = create(dir.path(), "prefix(64KB,3)", 1, Compression::None, None);
    let ds = db.dataset("t").unwrap();
    let acked = Arc::new(AtomicU64::new(0));
    let writer = {
        let (ds, acked) = (ds.clone(), acked.clone());
        std::thread::spawn(move || {
            for k in 0..20_000 {
                ds.insert(record(k, 1)).unwrap();
                acked.fetch_add(1, Ordering::SeqCst);
                if k % 5000 == 4999 {
                    ds.flush().unwrap();
                }
            }
        })
    };
    let mut decided = 0;
    while !writer.is_finished() {
        let before = acked.load(Ordering::SeqCst);
        let n = ds.exact_count();
        let after = acked.load(Ordering::SeqCst);
        if let Some(n) = n {
            decided += 1;
            assert!(
                before <= n && n <= after + 1,
                "{before} <= {n} <= {after} + 1"
            );
        }
    }
    writer.join().unwrap();
    assert!(decided > 0, "the metadata never decided");
    assert_eq!(ds.exact_count(), Some(20_000));
}
