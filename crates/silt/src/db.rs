//! The database: a directory holding a catalog and datasets.

use crate::dataset::{Dataset, DatasetStats};
use crate::error::{Error, Result};
use crate::lsm::background::Background;
use crate::schema::DatasetDef;
use crate::storage::fsutil::{create_dir_all, write_atomic};
use crate::storage::{BlockCache, CacheStats};
use parking_lot::{Mutex, RwLock};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// Options of an open database (not persisted; each open chooses).
#[derive(Clone, Debug)]
pub struct DbOptions {
    /// Size of the block cache shared by all component files.
    pub block_cache_bytes: u64,
    /// Threads that flush in-memory components.
    pub flush_threads: usize,
    /// Threads that run merges.
    pub merge_threads: usize,
    /// fsync component files and metadata (turn off only in tests).
    pub sync: bool,
}

impl Default for DbOptions {
    fn default() -> Self {
        DbOptions {
            block_cache_bytes: 256 << 20,
            flush_threads: 1,
            merge_threads: 2,
            sync: true,
        }
    }
}

#[derive(Serialize, Deserialize, Default)]
struct Catalog {
    version: u32,
    datasets: Vec<DatasetDef>,
}

/// Everything `silt stats` shows.
#[derive(Clone, Debug, Serialize)]
pub struct DbStats {
    pub path: PathBuf,
    pub block_cache: CacheStats,
    pub datasets: Vec<DatasetStats>,
}

/// An open database directory. Only one process may hold it at a time.
pub struct Database {
    dir: PathBuf,
    _lock: File,
    opts: DbOptions,
    catalog: Mutex<Catalog>,
    datasets: RwLock<BTreeMap<String, Arc<Dataset>>>,
    cache: Arc<BlockCache>,
    bg: Arc<Background>,
    seq: Arc<AtomicU64>,
    closed: AtomicBool,
}

impl Database {
    /// Open or create the database in `dir`.
    pub fn open(dir: impl AsRef<Path>, opts: DbOptions) -> Result<Database> {
        let dir = dir.as_ref().to_path_buf();
        create_dir_all(&dir)?;
        let lock_path = dir.join("LOCK");
        let lock = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_path)
            .map_err(|e| Error::io(&lock_path, e))?;
        match lock.try_lock() {
            Ok(()) => {}
            Err(std::fs::TryLockError::WouldBlock) => {
                return Err(Error::Locked {
                    path: dir,
                    lock: lock_path,
                });
            }
            Err(std::fs::TryLockError::Error(e)) => return Err(Error::io(&lock_path, e)),
        }
        let cat_path = dir.join("catalog.json");
        let catalog: Catalog = match std::fs::read(&cat_path) {
            Ok(b) => serde_json::from_slice(&b)
                .map_err(|e| Error::corrupt(&cat_path, format!("unreadable catalog: {e}")))?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Catalog {
                version: 1,
                datasets: Vec::new(),
            },
            Err(e) => return Err(Error::io(&cat_path, e)),
        };
        let cache = Arc::new(BlockCache::new(opts.block_cache_bytes));
        let bg = Background::start(opts.flush_threads, opts.merge_threads);
        let seq = Arc::new(AtomicU64::new(1));
        let mut datasets = BTreeMap::new();
        for def in &catalog.datasets {
            let ds = Dataset::open(
                def.clone(),
                &dir.join(&def.name),
                cache.clone(),
                bg.clone(),
                seq.clone(),
                opts.sync,
            )?;
            datasets.insert(def.name.clone(), ds);
        }
        Ok(Database {
            dir,
            _lock: lock,
            opts,
            catalog: Mutex::new(catalog),
            datasets: RwLock::new(datasets),
            cache,
            bg,
            seq,
            closed: AtomicBool::new(false),
        })
    }

    pub fn path(&self) -> &Path {
        &self.dir
    }

    fn check_open(&self) -> Result<()> {
        if self.closed.load(Ordering::Acquire) {
            return Err(Error::Closed("the database was closed".into()));
        }
        Ok(())
    }

    fn save_catalog(&self, cat: &Catalog) -> Result<()> {
        let bytes = serde_json::to_vec_pretty(cat)
            .map_err(|e| Error::Config(format!("encoding catalog: {e}")))?;
        write_atomic(&self.dir.join("catalog.json"), &bytes)
    }

    /// Create a dataset; its definition is recorded in the catalog.
    pub fn create_dataset(&self, def: DatasetDef) -> Result<Arc<Dataset>> {
        self.check_open()?;
        def.validate()?;
        let mut cat = self.catalog.lock();
        if cat.datasets.iter().any(|d| d.name == def.name) {
            return Err(Error::DatasetExists(def.name));
        }
        let ds_dir = self.dir.join(&def.name);
        if ds_dir.exists() {
            // Leftovers of a dataset that was dropped or never recorded.
            std::fs::remove_dir_all(&ds_dir).map_err(|e| Error::io(&ds_dir, e))?;
        }
        let ds = Dataset::open(
            def.clone(),
            &ds_dir,
            self.cache.clone(),
            self.bg.clone(),
            self.seq.clone(),
            self.opts.sync,
        )?;
        cat.datasets.push(def.clone());
        self.save_catalog(&cat)?;
        self.datasets.write().insert(def.name, ds.clone());
        Ok(ds)
    }

    /// An open dataset by name.
    pub fn dataset(&self, name: &str) -> Result<Arc<Dataset>> {
        self.check_open()?;
        self.datasets
            .read()
            .get(name)
            .cloned()
            .ok_or_else(|| Error::NoSuchDataset(name.to_owned()))
    }

    pub fn dataset_names(&self) -> Vec<String> {
        self.datasets.read().keys().cloned().collect()
    }

    /// Remove a dataset and its files.
    pub fn drop_dataset(&self, name: &str) -> Result<()> {
        self.check_open()?;
        let mut cat = self.catalog.lock();
        let ds = self
            .datasets
            .write()
            .remove(name)
            .ok_or_else(|| Error::NoSuchDataset(name.to_owned()))?;
        cat.datasets.retain(|d| d.name != name);
        self.save_catalog(&cat)?;
        self.bg.wait_idle();
        let dir = ds.dir().to_path_buf();
        drop(ds);
        std::fs::remove_dir_all(&dir).map_err(|e| Error::io(&dir, e))
    }

    /// Block until no flush or merge is queued or running.
    pub fn wait_idle(&self) -> Result<()> {
        self.bg.wait_idle();
        for ds in self.datasets.read().values() {
            for t in ds.trees() {
                t.check_failed()?;
            }
        }
        Ok(())
    }

    /// Flush every dataset's in-memory components.
    pub fn flush(&self) -> Result<()> {
        for ds in self.datasets.read().values() {
            ds.flush()?;
        }
        Ok(())
    }

    pub fn stats(&self) -> DbStats {
        DbStats {
            path: self.dir.clone(),
            block_cache: self.cache.stats(),
            datasets: self.datasets.read().values().map(|d| d.stats()).collect(),
        }
    }

    /// Flush everything, wait for background work and stop it. Called by
    /// `Drop` too (errors are then only logged).
    pub fn close(&self) -> Result<()> {
        if self.closed.swap(true, Ordering::AcqRel) {
            return Ok(());
        }
        let mut first_err = None;
        for ds in self.datasets.read().values() {
            if let Err(e) = ds.flush() {
                first_err.get_or_insert(e);
            }
        }
        self.bg.shutdown();
        self.datasets.write().clear();
        match first_err {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
}

impl Drop for Database {
    fn drop(&mut self) {
        if let Err(e) = self.close() {
            tracing::error!("closing database {}: {e}", self.dir.display());
        }
    }
}
