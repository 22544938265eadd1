//! The remote tier through the public API, on a directory-backed bucket
//! (`DirStore`): where components go, the MANIFEST's conditional puts,
//! garbage, drop and truncate. The same against a real S3 server, with
//! faults, is in `silt-objstore`'s tests.

use crate::oracle::register_dir_store;
use silt::lsm::policy::MergePolicy;
use silt::{Database, DatasetDef, DbOptions, Error, FieldType, Value};
use std::path::{Path, PathBuf};

fn opts() -> DbOptions {
    DbOptions {
        block_cache_bytes: 1 << 20,
        sync: false,
        durability: silt::Durability::None,
        ..Default::default()
    }
}

fn def(url: &str, policy: &str, from_level: u32) -> DatasetDef {
    DatasetDef::new("t", &["id"])
        .field("id", FieldType::Int)
        .field("v", FieldType::Int)
        .memory_budget(1 << 20)
        .block_size(512)
        .policy(MergePolicy::parse(policy).unwrap())
        .remote(url, from_level)
}

fn rec(k: i64) -> Value {
    Value::Object(vec![
        ("id".into(), Value::Int(k)),
        ("v".into(), Value::Int(k * 3)),
        ("pad".into(), Value::String("p".repeat(200))),
    ])
}

/// Files named `*.sc` under `dir`, recursively (column images `*.col.sc`
/// aside).
fn sc_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    if let Ok(rd) = std::fs::read_dir(dir) {
        for e in rd.flatten() {
            let p = e.path();
            if p.is_dir() {
                out.extend(sc_files(&p));
            } else if p.extension().is_some_and(|x| x == "sc")
                && !p.to_string_lossy().ends_with(".col.sc")
            {
                out.push(p);
            }
        }
    }
    out
}

/// A database directory, a directory-backed bucket and its URL.
fn places() -> (tempfile::TempDir, tempfile::TempDir, String) {
    register_dir_store();
    let dir = tempfile::tempdir().unwrap();
    let bucket = tempfile::tempdir().unwrap();
    let url = format!("dirtest://{}", bucket.path().display());
    (dir, bucket, url)
}

/// Create `t` in `db` on `url` under `policy` with records 0..n, flushed.
fn fill(db: &Database, url: &str, policy: &str, n: i64) {
    db.create_dataset(def(url, policy, 0)).unwrap();
    let ds = db.dataset("t").unwrap();
    for k in 0..n {
        ds.insert(rec(k)).unwrap();
    }
    ds.flush().unwrap();
}

#[test]
fn components_live_in_the_bucket_and_survive_reopen() {
    let (dir, bucket, url) = places();
    let db = Database::open(dir.path(), opts()).unwrap();
    fill(&db, &url, "tiered(3)", 5000);
    let ds = db.dataset("t").unwrap();
    ds.compact().unwrap();
    assert!(!sc_files(bucket.path()).is_empty(), "nothing uploaded");
    assert!(
        sc_files(dir.path()).is_empty(),
        "component files left on the local disk: {:?}",
        sc_files(dir.path())
    );
    assert!(bucket.path().join("t/p0/primary/MANIFEST").exists());
    assert!(!dir.path().join("t/p0/primary/MANIFEST").exists());
    drop(ds);
    db.close().unwrap();
    drop(db);
    let db = Database::open(dir.path(), opts()).unwrap();
    let ds = db.dataset("t").unwrap();
    for k in [0, 1, 2499, 4999] {
        let r = ds.get(&[Value::Int(k)]).unwrap().unwrap();
        assert_eq!(r.get("v"), Some(&Value::Int(k * 3)));
    }
    assert_eq!(ds.get(&[Value::Int(5000)]).unwrap(), None);
}

#[test]
fn a_leveled_tree_keeps_its_hot_levels_local() {
    let (dir, bucket, url) = places();
    let db = Database::open(dir.path(), opts()).unwrap();
    db.create_dataset(def(&url, "leveled(2,3,8KB,16KB)", 1))
        .unwrap();
    let ds = db.dataset("t").unwrap();
    for k in 0..3000 {
        ds.insert(rec(k)).unwrap();
        if k % 500 == 499 {
            ds.flush().unwrap();
        }
    }
    ds.flush().unwrap();
    db.wait_idle().unwrap();
    let stats = ds.stats();
    let comps = &stats.indexes[0].components;
    let deep = comps.iter().filter(|c| c.level >= 1).count();
    let top = comps.iter().filter(|c| c.level == 0).count();
    assert!(deep > 0, "no merge reached level 1: {comps:?}");
    assert_eq!(sc_files(bucket.path()).len(), deep);
    assert_eq!(sc_files(dir.path()).len(), top);
    for k in (0..3000).step_by(97) {
        assert!(ds.get(&[Value::Int(k)]).unwrap().is_some(), "{k}");
    }
}

#[test]
fn two_writers_of_one_prefix_cannot_both_win() {
    register_dir_store();
    let a = tempfile::tempdir().unwrap();
    let b = tempfile::tempdir().unwrap();
    let bucket = tempfile::tempdir().unwrap();
    let url = format!("dirtest://{}", bucket.path().display());
    let db_a = Database::open(a.path(), opts()).unwrap();
    db_a.create_dataset(def(&url, "no-merge", 0)).unwrap();
    // A second database creating a dataset on the same objects is refused.
    let db_b = Database::open(b.path(), opts()).unwrap();
    let Err(e) = db_b.create_dataset(def(&url, "no-merge", 0)) else {
        panic!("a second dataset on the same objects was created");
    };
    assert!(e.to_string().contains("already holds"), "{e}");
    // One that takes the prefix over anyway (its catalog copied) wins, and
    // the first writer's next flush fails, naming the conflict.
    drop(db_b);
    std::fs::copy(a.path().join("catalog.json"), b.path().join("catalog.json")).unwrap();
    let db_b = Database::open(b.path(), opts()).unwrap();
    let ds_a = db_a.dataset("t").unwrap();
    ds_a.insert(rec(1)).unwrap();
    let Err(e) = ds_a.flush() else {
        panic!("the writer that lost the prefix flushed");
    };
    assert!(
        matches!(e, Error::RemoteConflict { .. }) || e.to_string().contains("another writer"),
        "{e}"
    );
    let ds_b = db_b.dataset("t").unwrap();
    ds_b.insert(rec(2)).unwrap();
    ds_b.flush().unwrap();
}

#[test]
fn drop_and_truncate_remove_the_objects() {
    let (dir, bucket, url) = places();
    let db = Database::open(dir.path(), opts()).unwrap();
    fill(&db, &url, "no-merge", 100);
    let before = sc_files(bucket.path());
    assert!(!before.is_empty());
    db.truncate_dataset("t").unwrap();
    for p in &before {
        assert!(!p.exists(), "{} survived the truncate", p.display());
    }
    let ds = db.dataset("t").unwrap();
    ds.insert(rec(7)).unwrap();
    ds.flush().unwrap();
    drop(ds);
    assert!(!sc_files(bucket.path()).is_empty());
    db.drop_dataset("t").unwrap();
    assert!(sc_files(bucket.path()).is_empty());
    // The name can be used again on the same prefix.
    db.create_dataset(def(&url, "no-merge", 0)).unwrap();
}

#[test]
fn an_empty_bucket_where_components_were_is_an_error_not_an_empty_dataset() {
    let (dir, bucket, url) = places();
    {
        let db = Database::open(dir.path(), opts()).unwrap();
        fill(&db, &url, "no-merge", 100);
        db.close().unwrap();
    }
    // The bucket's objects are gone (or the settings name another bucket).
    std::fs::remove_dir_all(bucket.path().join("t")).unwrap();
    let Err(e) = Database::open(dir.path(), opts()) else {
        panic!("opened over an emptied bucket as if the dataset were new");
    };
    assert!(e.to_string().contains("holds no MANIFEST"), "{e}");
}

/// What a test bucket does besides storing objects in a directory.
#[derive(Clone, Copy, Debug)]
enum Hook {
    /// MANIFEST puts take 600 ms and fail while `MANIFESTS_FAIL` is set.
    FailingManifests,
    /// Ranged GETs are counted in `RANGE_GETS`.
    CountedGets,
}

static MANIFESTS_FAIL: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
static RANGE_GETS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// A directory-backed bucket with a [`Hook`].
#[derive(Debug)]
struct HookedStore {
    inner: silt::storage::remote::DirStore,
    hook: Hook,
}

impl silt::storage::remote::RemoteStore for HookedStore {
    fn url(&self) -> &str {
        self.inner.url()
    }
    fn put_file(&self, key: &str, path: &Path) -> silt::Result<()> {
        self.inner.put_file(key, path)
    }
    fn put_if(
        &self,
        key: &str,
        bytes: Vec<u8>,
        cond: silt::storage::remote::PutCondition,
    ) -> silt::Result<Option<silt::storage::remote::ObjectVersion>> {
        if matches!(self.hook, Hook::FailingManifests)
            && key.ends_with("MANIFEST")
            && MANIFESTS_FAIL.load(std::sync::atomic::Ordering::SeqCst)
        {
            std::thread::sleep(std::time::Duration::from_millis(600));
            return Err(Error::Remote {
                url: key.to_owned(),
                reason: "injected".into(),
            });
        }
        self.inner.put_if(key, bytes, cond)
    }
    fn get(
        &self,
        key: &str,
    ) -> silt::Result<Option<(Vec<u8>, silt::storage::remote::ObjectVersion)>> {
        self.inner.get(key)
    }
    fn get_range(&self, key: &str, off: u64, len: usize) -> silt::Result<Vec<u8>> {
        if matches!(self.hook, Hook::CountedGets) {
            RANGE_GETS.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
        self.inner.get_range(key, off, len)
    }
    fn delete(&self, key: &str) -> silt::Result<()> {
        self.inner.delete(key)
    }
    fn list(&self, prefix: &str) -> silt::Result<Vec<silt::storage::remote::ObjectInfo>> {
        self.inner.list(prefix)
    }
}

/// Register `scheme://DIR` as a [`HookedStore`] with `hook`.
fn register_hooked(scheme: &'static str, hook: Hook) {
    let prefix = format!("{scheme}://");
    silt::storage::remote::register(
        scheme,
        std::sync::Arc::new(move |url: &str| {
            let dir = url.trim_start_matches(prefix.as_str());
            let s: std::sync::Arc<dyn silt::storage::remote::RemoteStore> =
                std::sync::Arc::new(HookedStore {
                    inner: silt::storage::remote::DirStore::new(url, Path::new(dir)),
                    hook,
                });
            Ok(s)
        }),
    );
}

/// A checkpoint while a flush's MANIFEST put is under way (and then
/// fails) keeps the log of the flushed records: after a crash they are
/// all there.
#[test]
fn a_checkpoint_keeps_the_log_until_the_manifest_lists_the_flush() {
    use std::sync::Arc;
    register_hooked("slowmanifest", Hook::FailingManifests);
    let dir = tempfile::tempdir().unwrap();
    let bucket = tempfile::tempdir().unwrap();
    let url = format!("slowmanifest://{}", bucket.path().display());
    let o = DbOptions {
        durability: silt::Durability::Sync,
        wal_file_bytes: 64 << 10,
        checkpoint_interval_bytes: 1 << 40,
        ..opts()
    };
    let flushed;
    {
        let db = Arc::new(Database::open(dir.path(), o.clone()).unwrap());
        db.create_dataset(def(&url, "no-merge", 0)).unwrap();
        let ds = db.dataset("t").unwrap();
        for k in 0..600 {
            ds.insert(rec(k)).unwrap();
        }
        MANIFESTS_FAIL.store(true, std::sync::atomic::Ordering::SeqCst);
        let flusher = {
            let ds = ds.clone();
            std::thread::spawn(move || ds.flush())
        };
        std::thread::sleep(std::time::Duration::from_millis(200));
        let _ = db.checkpoint();
        flushed = flusher.join().unwrap();
        // A crash: nothing more is written.
    }
    MANIFESTS_FAIL.store(false, std::sync::atomic::Ordering::SeqCst);
    let db = Database::open(dir.path(), o).unwrap();
    let ds = db.dataset("t").unwrap();
    for k in 0..600 {
        assert!(
            ds.get(&[Value::Int(k)]).unwrap().is_some(),
            "record {k} lost"
        );
    }
    // Flushed means listed: the flush waited for its MANIFEST, and failed.
    assert!(flushed.is_err(), "the flush's MANIFEST put was to fail");
}

/// A bounded range scan of a remote component fetches its blocks in one
/// GET: it knows where it ends. (It fetched one block, then 128 KiB
/// doubling: five GETs, 100 ms against S3, for this 1 MB range.)
#[test]
fn a_bounded_range_scan_fetches_its_blocks_at_once() {
    use std::ops::Bound;
    use std::sync::atomic::Ordering;
    register_hooked("countedgets", Hook::CountedGets);
    let dir = tempfile::tempdir().unwrap();
    let bucket = tempfile::tempdir().unwrap();
    let url = format!("countedgets://{}", bucket.path().display());
    let d = def(&url, "no-merge", 0)
        .memory_budget(64 << 20)
        .compression(silt::storage::component::Compression::None);
    {
        let db = Database::open(dir.path(), opts()).unwrap();
        db.create_dataset(d).unwrap();
        let ds = db.dataset("t").unwrap();
        for k in 0..20_000 {
            ds.insert(rec(k)).unwrap();
        }
        ds.flush().unwrap();
    }
    // Reopened: nothing cached.
    let db = Database::open(dir.path(), opts()).unwrap();
    let ds = db.dataset("t").unwrap();
    let before = RANGE_GETS.load(Ordering::SeqCst);
    let got = ds
        .scan(
            Bound::Included(&[Value::Int(5_000)]),
            Bound::Excluded(&[Value::Int(10_000)]),
        )
        .unwrap()
        .count();
    assert_eq!(got, 5_000);
    let gets = RANGE_GETS.load(Ordering::SeqCst) - before;
    assert!(gets <= 2, "{gets} GETs for a 1 MB range");
}
