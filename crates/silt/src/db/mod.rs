//! The database: a directory holding a catalog and datasets, the log and
//! the threads they share.
//!
//! - [`catalog`]: `catalog.json`, the dataset definitions and the roles;
//! - [`roles`]: who may log in to a served database, and their grants;
//! - [`checkpoint`]: checkpoints and the thread that takes them;
//! - [`recovery`]: redo-only recovery at open.
//!
//! The directory layout is in `docs/format/README.md`.

mod alter;
mod catalog;
mod checkpoint;
mod foreign_keys;
mod matviews;
mod recovery;
pub mod roles;
mod sequences;
pub mod spaces;
mod truncate;
mod ttl;
pub mod views;

pub use alter::Alteration;
use catalog::Catalog;
use checkpoint::checkpoint;
pub use recovery::RecoverySummary;
use recovery::recover;

use crate::dataset::{Dataset, DatasetStats, Transaction, TxnLimits};
use crate::error::{Error, Result};
use crate::lsm::background::Background;
use crate::schema::DatasetDef;
use crate::storage::fsutil::create_dir_all;
use crate::storage::{BlockCache, CacheStats};
use crate::txn::ctx::TxnContext;
use crate::txn::{Checkpoint, Durability, Wal, WalOptions, WalStats};
use parking_lot::{Mutex, RwLock};
use roles::Role;
use serde::Serialize;
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
    /// When a commit is acknowledged:
    /// - `sync` (default): after its COMMIT is fsynced (group commit); locks
    ///   are held until then. Nothing acknowledged is ever lost.
    /// - `batched(ms)`: as soon as the COMMIT is in the log buffer; the log is
    ///   written to the OS within 5 ms and fsynced at most every `ms`. A
    ///   process crash may lose the last ~5 ms of acknowledged commits; an OS
    ///   crash or power loss the last `ms` too.
    /// - `none`: as `batched` but never fsynced by the log (bulk loads you can
    ///   redo): an OS crash may lose everything since the last component flush
    ///   (flushes and checkpoints fsync the log first, so what they cover is safe).
    pub durability: Durability,
    /// Take a checkpoint when this many log bytes accumulated since the last one.
    pub checkpoint_interval_bytes: u64,
    /// Roll log files at this size.
    pub wal_file_bytes: u64,
    /// Fault injection for the log (tests only).
    pub wal_fault: Option<Arc<crate::txn::FaultInjector>>,
    /// Sweep the expired records of the datasets with a ttl this often,
    /// milliseconds (0: never; `Database::sweep_expired` still does).
    pub ttl_sweep_ms: u64,
}

impl Default for DbOptions {
    fn default() -> Self {
        DbOptions {
            block_cache_bytes: 256 << 20,
            flush_threads: 1,
            merge_threads: 2,
            sync: true,
            durability: Durability::Sync,
            checkpoint_interval_bytes: 256 << 20,
            wal_file_bytes: 64 << 20,
            wal_fault: None,
            ttl_sweep_ms: 1000,
        }
    }
}

/// Everything `silt stats` shows.
#[derive(Clone, Debug, Serialize)]
pub struct DbStats {
    pub path: PathBuf,
    pub durability: String,
    pub block_cache: CacheStats,
    pub wal: WalStats,
    pub locks: crate::txn::LockStats,
    pub last_recovery: RecoverySummary,
    pub datasets: Vec<DatasetStats>,
}

/// An open database directory. Only one process may hold it at a time.
pub struct Database {
    dir: PathBuf,
    _lock: File,
    opts: DbOptions,
    catalog: Mutex<Catalog>,
    datasets: Arc<RwLock<BTreeMap<String, Arc<Dataset>>>>,
    cache: Arc<BlockCache>,
    bg: Arc<Background>,
    seq: Arc<AtomicU64>,
    closed: AtomicBool,
    txn: Arc<TxnContext>,
    recovery: RecoverySummary,
    /// End of the log at the last checkpoint (also serializes checkpoints).
    checkpoint_lock: Arc<Mutex<u64>>,
    checkpointer: Mutex<Option<(crossbeam_channel::Sender<()>, std::thread::JoinHandle<()>)>>,
    /// The ttl sweeper (see [`ttl`]).
    sweeper: Mutex<Option<(crossbeam_channel::Sender<()>, std::thread::JoinHandle<()>)>>,
    /// Bumped by every change of the datasets or their indexes (see
    /// [`Database::schema_version`]).
    schema_version: AtomicU64,
    /// The counters of the sequences of their own (`sequences.json` in the
    /// database's directory; see [`sequences`]).
    counters: crate::dataset::sequence::Sequences,
    /// The live instances of the spaces (see [`spaces`]), by kind and name.
    live_spaces: Mutex<std::collections::HashMap<(String, String), spaces::LiveSpace>>,
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
        let catalog = Catalog::load(&dir)?;
        let counters = crate::dataset::sequence::Sequences::open(&dir)?;
        let cache = Arc::new(BlockCache::new(opts.block_cache_bytes));
        let bg = Background::start(opts.flush_threads, opts.merge_threads);
        let seq = Arc::new(AtomicU64::new(1));
        let wal_dir = dir.join("wal");
        let checkpoint = crate::txn::read_checkpoint(&wal_dir)?;
        let (wal, wal_open) = Wal::open(
            &wal_dir,
            WalOptions {
                durability: opts.durability,
                file_size_limit: opts.wal_file_bytes,
                fault: opts.wal_fault.clone(),
                valid_below_lsn: checkpoint.as_ref().map_or(0, |c| c.low_water_lsn),
                ..Default::default()
            },
        )?;
        let txn = TxnContext::new(
            wal,
            opts.durability,
            checkpoint.as_ref().map_or(1, |c| c.next_txn_id),
        );
        let mut datasets = BTreeMap::new();
        for def in &catalog.datasets {
            let ds = Dataset::open(
                def.clone(),
                &dir.join(def.dir_name()),
                cache.clone(),
                bg.clone(),
                seq.clone(),
                opts.sync,
                txn.clone(),
            )?;
            datasets.insert(def.name.clone(), ds);
        }
        truncate::remove_stale_generations(&dir, &catalog)?;
        let from_lsn = checkpoint.as_ref().map_or(0, |c| c.low_water_lsn);
        let mut recovery = recover(&wal_dir, from_lsn, &datasets, &txn)?;
        recovery.truncated_bytes = wal_open.truncated_bytes;
        recovery.log_bytes_checked = wal_open.scanned_bytes;
        let db = Database {
            dir,
            _lock: lock,
            opts,
            catalog: Mutex::new(catalog),
            datasets: Arc::new(RwLock::new(datasets)),
            cache,
            bg,
            seq,
            closed: AtomicBool::new(false),
            txn,
            recovery,
            checkpoint_lock: Arc::new(Mutex::new(from_lsn)),
            checkpointer: Mutex::new(None),
            sweeper: Mutex::new(None),
            schema_version: AtomicU64::new(0),
            counters,
            live_spaces: Mutex::new(std::collections::HashMap::new()),
        };
        db.relink();
        db.start_checkpointer();
        db.start_sweeper();
        Ok(db)
    }

    /// Install the evaluator of `CHECK` constraints (the SQL layer does,
    /// when it opens an engine over the database).
    pub fn set_record_check(&self, c: Arc<dyn crate::schema::RecordCheck>) {
        self.txn.set_record_check(c);
    }

    /// Open dataset `def` in `dir` with this database's cache, threads and
    /// log.
    fn open_dataset(&self, def: DatasetDef, dir: &Path) -> Result<Arc<Dataset>> {
        Dataset::open(
            def,
            dir,
            self.cache.clone(),
            self.bg.clone(),
            self.seq.clone(),
            self.opts.sync,
            self.txn.clone(),
        )
    }

    /// What recovery did at open.
    pub fn recovery_summary(&self) -> &RecoverySummary {
        &self.recovery
    }

    /// Take a checkpoint now: flush every in-memory component holding log
    /// records older than the current end of the log (by each component's
    /// *minimum* LSN: flushing by the last LSN, as the paper's text says,
    /// would drop log still needed), write the checkpoint file with the
    /// low-water mark, and delete log files wholly below it.
    pub fn checkpoint(&self) -> Result<Checkpoint> {
        checkpoint(&self.datasets, &self.txn, &self.checkpoint_lock)
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
        cat.save(&self.dir)
    }

    /// Create a dataset; its definition is recorded in the catalog.
    pub fn create_dataset(&self, def: DatasetDef) -> Result<Arc<Dataset>> {
        self.check_open()?;
        def.validate()?;
        let mut cat = self.catalog.lock();
        if cat.datasets.iter().any(|d| d.name == def.name) {
            return Err(Error::DatasetExists(def.name));
        }
        if cat.views.iter().any(|v| v.name == def.name) {
            return Err(Error::ViewExists(def.name));
        }
        if cat.sequences.iter().any(|(n, _)| *n == def.name) {
            return Err(Error::SequenceExists {
                name: def.name,
                taken_by: "a sequence".to_owned(),
            });
        }
        let ds_dir = self.dir.join(def.dir_name());
        if ds_dir.exists() {
            // Leftovers of a dataset that was dropped or never recorded.
            std::fs::remove_dir_all(&ds_dir).map_err(|e| Error::io(&ds_dir, e))?;
        }
        crate::dataset::check_remote_empty(&def)?;
        let mut def = def;
        foreign_keys::prepare(&mut def, &cat)?;
        def.id = cat.next_dataset_id();
        let ds = self.open_dataset(def.clone(), &ds_dir)?;
        cat.datasets.push(def.clone());
        self.save_catalog(&cat)?;
        self.datasets.write().insert(def.name, ds.clone());
        if !def.foreign_keys.is_empty() {
            self.relink();
        }
        self.schema_changed();
        Ok(ds)
    }

    /// A number that changes whenever a dataset is created or dropped or
    /// an index is created or dropped (read it before planning against the
    /// datasets: a plan made under one version may be reused while the
    /// version stays the same). It starts at 0 at every open.
    pub fn schema_version(&self) -> u64 {
        self.schema_version.load(Ordering::Acquire)
    }

    fn schema_changed(&self) {
        self.schema_version.fetch_add(1, Ordering::AcqRel);
    }

    /// Start a transaction over any datasets of this database: buffered
    /// writes, reads that see them, one atomic and durable commit (see
    /// [`Transaction`]). Single writes on a [`Dataset`] stay record-level
    /// transactions of their own.
    pub fn begin(&self) -> Result<Transaction> {
        self.begin_with(TxnLimits::default())
    }

    /// [`Database::begin`] with other bounds on the transaction's size.
    pub fn begin_with(&self, limits: TxnLimits) -> Result<Transaction> {
        self.check_open()?;
        Ok(Transaction::new(self.txn.clone(), limits))
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
        let spaces = cat.spaces_holding(name);
        if !spaces.is_empty() {
            return Err(Error::Config(format!(
                "cannot drop table `{name}`: it holds {}; drop that instead (DROP PUBSUB, PubSub::drop)",
                spaces.join(", ")
            )));
        }
        let readers = views::dependents(&cat.views, name);
        if !readers.is_empty() {
            return Err(Error::Dependents {
                action: "drop table".to_owned(),
                name: name.to_owned(),
                dependents: readers,
            });
        }
        let made_of: Vec<String> = self
            .views_of(name)
            .into_iter()
            .filter(|v| v != name)
            .collect();
        if !made_of.is_empty() {
            return Err(Error::Dependents {
                action: "drop table".to_owned(),
                name: name.to_owned(),
                dependents: made_of,
            });
        }
        let referencing = foreign_keys::referencing(&cat, name);
        if !referencing.is_empty() {
            return Err(Error::Referenced {
                action: "drop table".to_owned(),
                name: name.to_owned(),
                constraints: referencing,
            });
        }
        let ds = self
            .datasets
            .write()
            .remove(name)
            .ok_or_else(|| Error::NoSuchDataset(name.to_owned()))?;
        self.relink();
        self.schema_changed();
        cat.datasets.retain(|d| d.name != name);
        for r in &mut cat.roles {
            r.grants.remove(name);
        }
        self.save_catalog(&cat)?;
        self.bg.wait_idle();
        let dir = ds.dir().to_path_buf();
        let def = ds.def();
        drop(ds);
        crate::dataset::remove_remote(&def, &def.dir_name(), None)?;
        std::fs::remove_dir_all(&dir).map_err(|e| Error::io(&dir, e))
    }

    /// The roles (see [`roles`]), by name.
    pub fn roles(&self) -> Vec<Role> {
        let mut v = self.catalog.lock().roles.clone();
        v.sort_by(|a, b| a.name.cmp(&b.name));
        v
    }

    /// One role.
    pub fn role(&self, name: &str) -> Option<Role> {
        self.catalog
            .lock()
            .roles
            .iter()
            .find(|r| r.name == name)
            .cloned()
    }

    /// Record a new role in the catalog.
    pub fn create_role(&self, role: Role) -> Result<()> {
        self.check_open()?;
        Role::validate_name(&role.name)?;
        let mut cat = self.catalog.lock();
        if cat.roles.iter().any(|r| r.name == role.name) {
            return Err(Error::RoleExists(role.name));
        }
        cat.roles.push(role);
        if let Err(e) = self.save_catalog(&cat) {
            cat.roles.pop();
            return Err(e);
        }
        Ok(())
    }

    /// Change a role with `f` and record it; nothing changes if `f` fails
    /// or the catalog cannot be written. Returns the role as changed.
    pub fn update_role(&self, name: &str, f: impl FnOnce(&mut Role) -> Result<()>) -> Result<Role> {
        self.check_open()?;
        let mut cat = self.catalog.lock();
        let i = cat
            .roles
            .iter()
            .position(|r| r.name == name)
            .ok_or_else(|| Error::NoSuchRole(name.to_owned()))?;
        let mut changed = cat.roles[i].clone();
        f(&mut changed)?;
        Role::validate_name(&changed.name)?;
        if changed.name != name && cat.roles.iter().any(|r| r.name == changed.name) {
            return Err(Error::RoleExists(changed.name));
        }
        let old = std::mem::replace(&mut cat.roles[i], changed.clone());
        if let Err(e) = self.save_catalog(&cat) {
            cat.roles[i] = old;
            return Err(e);
        }
        Ok(changed)
    }

    /// Remove a role from the catalog.
    pub fn drop_role(&self, name: &str) -> Result<()> {
        self.check_open()?;
        let mut cat = self.catalog.lock();
        let i = cat
            .roles
            .iter()
            .position(|r| r.name == name)
            .ok_or_else(|| Error::NoSuchRole(name.to_owned()))?;
        let old = cat.roles.remove(i);
        if let Err(e) = self.save_catalog(&cat) {
            cat.roles.insert(i, old);
            return Err(e);
        }
        Ok(())
    }

    /// Create a secondary index on a dataset; existing records are indexed by
    /// a bulk build (writers to the dataset wait meanwhile). Recorded in the
    /// catalog.
    pub fn create_index(
        &self,
        dataset: &str,
        def: crate::index::IndexDef,
    ) -> Result<crate::index::IndexDef> {
        self.check_open()?;
        let ds = self.dataset(dataset)?;
        let _ddl = ds.ddl_write();
        self.create_index_locked(&ds, def)
    }

    /// [`Database::create_index`] for a caller holding the dataset's DDL
    /// lock exclusively (taken before the catalog's: always in that order).
    fn create_index_locked(
        &self,
        ds: &Arc<Dataset>,
        def: crate::index::IndexDef,
    ) -> Result<crate::index::IndexDef> {
        let mut cat = self.catalog.lock();
        let i = cat.dataset_position(ds.name())?;
        let mut def = def;
        let d = &cat.datasets[i];
        def.id = d
            .index_ids_used
            .max(d.indexes.iter().map(|i| i.id).max().unwrap_or(0));
        let added = ds.add_index(def);
        self.schema_changed();
        let def = added?;
        let d = &mut cat.datasets[i];
        d.indexes.push(def.clone());
        d.index_ids_used = d.index_ids_used.max(def.id);
        self.save_catalog(&cat)?;
        Ok(def)
    }

    /// Drop a secondary index and delete its files.
    pub fn drop_index(&self, dataset: &str, index: &str) -> Result<()> {
        self.check_open()?;
        let ds = self.dataset(dataset)?;
        let _ddl = ds.ddl_write();
        self.drop_index_locked(&ds, index)
    }

    /// [`Database::drop_index`] for a caller holding the dataset's DDL lock
    /// exclusively.
    fn drop_index_locked(&self, ds: &Arc<Dataset>, index: &str) -> Result<()> {
        let mut cat = self.catalog.lock();
        let def = ds.def();
        let indexes = ds.index_defs();
        if let Some(fk) = def
            .foreign_keys
            .iter()
            .find(|fk| foreign_keys::lookup_index(&indexes, fk).is_some_and(|i| i.name == index))
        {
            return Err(Error::Config(format!(
                "index `{index}` of `{}` finds the records of foreign key `{}`; drop the foreign key first",
                ds.name(),
                fk.name
            )));
        }
        let removed = ds.remove_index(index);
        self.schema_changed();
        removed?;
        if let Some(d) = cat.datasets.iter_mut().find(|d| d.name == ds.name()) {
            d.indexes.retain(|i| i.name != index);
        }
        self.save_catalog(&cat)
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

    /// Flush every dataset's in-memory components, then take a checkpoint
    /// (so the log they needed can be deleted).
    pub fn flush(&self) -> Result<()> {
        let all: Vec<Arc<Dataset>> = self.datasets.read().values().cloned().collect();
        for ds in all {
            ds.flush()?;
        }
        self.checkpoint().map(|_| ())
    }

    pub fn stats(&self) -> DbStats {
        DbStats {
            path: self.dir.clone(),
            durability: self.opts.durability.to_string(),
            block_cache: self.cache.stats(),
            wal: self.txn.wal.stats(),
            locks: self.txn.locks.stats(),
            last_recovery: self.recovery.clone(),
            datasets: self.datasets.read().values().map(|d| d.stats()).collect(),
        }
    }

    /// Flush everything, wait for background work and stop it. Called by
    /// `Drop` too (errors are then only logged).
    pub fn close(&self) -> Result<()> {
        if self.closed.swap(true, Ordering::AcqRel) {
            return Ok(());
        }
        for thread in [&self.sweeper, &self.checkpointer] {
            if let Some((tx, h)) = thread.lock().take() {
                drop(tx);
                let _ = h.join();
            }
        }
        let mut first_err = None;
        for ds in self.datasets.read().values() {
            if let Err(e) = ds.flush() {
                first_err.get_or_insert(e);
            }
        }
        // Checkpoint on clean shutdown: everything flushed, log truncated.
        if let Err(e) = self.checkpoint() {
            first_err.get_or_insert(e);
        }
        self.bg.shutdown();
        if let Err(e) = self.txn.wal.close() {
            first_err.get_or_insert(e);
        }
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
