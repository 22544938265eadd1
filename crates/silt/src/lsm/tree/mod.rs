//! One LSM index: a double-buffered in-memory component, an ordered list of
//! immutable disk components, flush, merge and reconciliation.
//!
//! Component list order (the "stack"): newest first. Under a leveled policy the
//! list is level 0 newest first, then level 1 sorted by key, then level 2...;
//! since every deeper level is older than the one above it, "earlier in the
//! list" still means "newer" for any two components whose key ranges overlap.
//!
//! Which components are live is recorded in a small `MANIFEST` file per index,
//! replaced atomically after every flush and merge. AsterixDB instead names
//! components by their id range and treats a component as subsumed when a valid
//! merged component's range covers it; that rule is wrong for leveled
//! partitioning (one merge writes several components with the same id range
//! next to untouched components of that range), so Silt records the list.
//! At open, files not in the manifest (orphans of an unfinished flush or merge,
//! components that a finished merge replaced) and temporary files are removed.

use super::kind::{
    ComponentBuilder, TreeKind, decode_bounds, deleted_contains, has_deleted, open_component_at,
};
use super::memtable::{MemIter, MemTable};
use super::merge_iter::{MergeIter, Source};
use super::policy::{
    ComponentInfo, MergeDecision, MergePolicy, Partitioning, PolicyContext, components_overlap,
};
use super::spatial_partitioning::{self, Plan};
use crate::error::{Error, Result};
use crate::storage::bloom::key_hash;
use crate::storage::component::Probe;
use crate::storage::fsutil::{create_dir_all, write_atomic};
use crate::storage::{BlockCache, ComponentMeta, ComponentReader, Entry, EntryRef, WriterOptions};
use parking_lot::{Condvar, Mutex, RwLock};
use serde::{Deserialize, Serialize};
use std::ops::Bound;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

mod flush;
mod hooks;
mod manifest;
mod merge;
mod read;
mod remote;
use manifest::{LifetimeCounters, Manifest, component_path, leveled_order};
pub use read::TreeScan;

/// Static configuration of one LSM index.
#[derive(Clone, Debug)]
pub struct TreeConfig {
    /// Human-readable name, e.g. `tweets/p0/primary`.
    pub name: String,
    pub dir: PathBuf,
    pub policy: MergePolicy,
    pub writer: WriterOptions,
    /// Size of one full in-memory component, the unit merge policies reason in.
    pub memtable_bytes: u64,
    /// B+-tree, R-tree or inverted index; antimatter or deleted-key reconciliation.
    pub kind: TreeKind,
    /// R-trees: width and height of the cell one key stands for (entries
    /// with equal keys have centres in the same cell; spatial partitioning
    /// grows component MBRs by it). Zero elsewhere.
    pub key_cell: [f64; 2],
    /// R-trees: the space the Hilbert grid covers (keys of coordinates
    /// outside it are clamped to its edge cells).
    pub key_space: [f64; 4],
    /// R-trees in Z order (`order = zorder`): keys start with the 64-bit
    /// Z-value of the centre's cell of `key_space`'s grid, and spatial
    /// searches skip disk components of points whose key range meets none
    /// of the query's Z ranges (see `lsm::spatial`).
    pub zorder: bool,
    /// The levels kept in a bucket, if any (Fusion's object storage; see
    /// `tree::remote`).
    pub remote: Option<crate::storage::remote::RemoteTier>,
}

/// Counters of one index (monotonic since open).
#[derive(Debug, Default)]
pub struct TreeCounters {
    pub flushes: AtomicU64,
    pub merges: AtomicU64,
    pub bytes_flushed: AtomicU64,
    pub bytes_merged: AtomicU64,
    pub user_bytes: AtomicU64,
    pub writes: AtomicU64,
    pub gets: AtomicU64,
    pub key_checks: AtomicU64,
    pub components_probed: AtomicU64,
    pub bloom_negatives: AtomicU64,
    pub bloom_false_positives: AtomicU64,
    pub scans: AtomicU64,
    pub scan_components: AtomicU64,
    pub flush_stalls: AtomicU64,
    /// Leveled merges of one component done by moving it down a level.
    pub moves: AtomicU64,
}

/// A snapshot of a disk component for stats and policies.
#[derive(Clone, Debug, Serialize)]
pub struct ComponentSummary {
    pub id: u64,
    pub level: u32,
    pub entries: u64,
    pub tombstones: u64,
    pub size_bytes: u64,
    pub min_flush_id: u64,
    pub max_flush_id: u64,
}

/// Counters and component list of one index, ready to print.
#[derive(Clone, Debug, Serialize)]
pub struct TreeStats {
    pub name: String,
    pub policy: String,
    pub memory_bytes: u64,
    pub memory_entries: u64,
    pub components: Vec<ComponentSummary>,
    pub disk_bytes: u64,
    pub flushes: u64,
    pub merges: u64,
    pub bytes_flushed: u64,
    pub bytes_merged: u64,
    pub user_bytes_written: u64,
    /// (bytes flushed + bytes merged) / bytes the user wrote.
    pub write_amplification: f64,
    pub gets: u64,
    /// Lookups the engine made for itself (uniqueness checks, old records).
    pub key_checks: u64,
    /// Disk components whose bloom filter or block was consulted, per get.
    pub components_per_get: f64,
    pub bloom_negatives: u64,
    pub bloom_false_positives: u64,
    pub scans: u64,
    pub components_per_scan: f64,
    pub flush_stalls: u64,
    /// Leveled merges of a single component done as a move (no rewrite).
    pub moves: u64,
    pub writes: u64,
    /// The remote tier, if the index has one: what it asked of the bucket.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub remote: Option<RemoteStats>,
}

/// What an index with a remote tier asked of its bucket since it was
/// opened, and how many of its components are there.
#[derive(Clone, Debug, Default, Serialize)]
pub struct RemoteStats {
    pub url: String,
    pub components: u64,
    pub gets: u64,
    pub bytes_read: u64,
    pub puts: u64,
    pub bytes_written: u64,
    pub deletes: u64,
}

#[derive(Clone)]
pub(crate) struct TreeState {
    pub active: Arc<MemTable>,
    /// Full memtables waiting for (or in) flush, newest first.
    pub immutables: Vec<Arc<MemTable>>,
    pub disk: Arc<Vec<Arc<ComponentReader>>>,
}

/// A consistent view of an index for one read.
#[derive(Clone)]
pub struct Snapshot {
    pub mems: Vec<Arc<MemTable>>,
    pub disk: Arc<Vec<Arc<ComponentReader>>>,
}

/// Makes the write-ahead log durable up to its current end before a flush
/// writes a component (log-before-data). Implemented by the transaction layer.
pub trait LogSync: Send + Sync {
    fn sync_log(&self) -> Result<()>;
}

/// Hooks by which a tree asks for background work.
pub trait Scheduler: Send + Sync {
    fn schedule_flush(&self, tree: Arc<LsmTree>, mem: Arc<MemTable>);
    fn schedule_merge(&self, tree: Arc<LsmTree>);
}

pub struct LsmTree {
    cfg: TreeConfig,
    state: RwLock<TreeState>,
    cache: Arc<BlockCache>,
    pub counters: TreeCounters,
    next_id: AtomicU64,
    flush_count: AtomicU64,
    /// Serializes manifest writes together with the list changes they record.
    manifest_lock: Mutex<()>,
    /// One merge at a time per index.
    merge_lock: Mutex<()>,
    merge_scheduled: AtomicBool,
    /// Signalled after each flush and merge (stalls wait on it).
    changed: Condvar,
    changed_lock: Mutex<()>,
    failure: Mutex<Option<String>>,
    log_sync: RwLock<Option<Arc<dyn LogSync>>>,
    /// Optional index-kind behaviour (see `lsm::hooks`).
    hooks: RwLock<super::hooks::TreeHooks>,
    /// The remote tier, when the index has one (`tree::remote`).
    remote: Option<remote::RemoteState>,
    /// The smallest LSN of a flushed memtable whose component the MANIFEST
    /// on disk (or in the bucket) does not list yet: set before a flush
    /// takes the memtable out of the list, cleared once a MANIFEST is
    /// written. A checkpoint must keep the log from there (a MANIFEST
    /// write that failed, or is slow, would otherwise let the log go
    /// before the records are durable anywhere).
    unlisted_lsn: Mutex<Option<u64>>,
}

/// What [`LsmTree::put_batch_logged_prior`] returns: the memtable written,
/// the bytes charged, and each key with its prior memtable content.
pub type PutBatch = (Arc<MemTable>, u64, Vec<(Vec<u8>, Option<Entry>)>);

impl LsmTree {
    /// Open (or create) the index in `cfg.dir`.
    pub fn open(cfg: TreeConfig, cache: Arc<BlockCache>) -> Result<Arc<LsmTree>> {
        create_dir_all(&cfg.dir)?;
        let (manifest, remote, sizes) = match &cfg.remote {
            Some(tier) => {
                let o = remote::RemoteState::open(tier.clone(), &cfg.dir)?;
                (o.manifest, Some(o.state), o.sizes)
            }
            None => (
                Self::read_local_manifest(&cfg.dir)?,
                None,
                Default::default(),
            ),
        };
        let (next_id, flush_count, listed, life) = match manifest {
            Some(m) => (m.next_id, m.flush_count, m.components, m.lifetime),
            None => (1, 0, Vec::new(), LifetimeCounters::default()),
        };
        // Remove what the manifest does not list (as a local file).
        let keep: std::collections::HashSet<u64> =
            listed.iter().filter(|e| !e.remote).map(|e| e.id).collect();
        let rd = std::fs::read_dir(&cfg.dir).map_err(|e| Error::io(&cfg.dir, e))?;
        for ent in rd {
            let ent = ent.map_err(|e| Error::io(&cfg.dir, e))?;
            let p = ent.path();
            let name = ent.file_name().to_string_lossy().into_owned();
            let stale = if let Some(stem) = name
                .strip_suffix(".dk.sc")
                .or_else(|| name.strip_suffix(".sc"))
            {
                u64::from_str_radix(stem, 16).map_or(true, |id| !keep.contains(&id))
            } else {
                name.ends_with(".tmp")
            };
            if stale {
                tracing::info!("removing stale file {}", p.display());
                std::fs::remove_file(&p).map_err(|e| Error::io(&p, e))?;
            }
        }
        let mut disk = Vec::with_capacity(listed.len());
        for e in &listed {
            if e.remote {
                let Some(rs) = &remote else {
                    return Err(Error::corrupt(
                        cfg.dir.join("MANIFEST"),
                        "the MANIFEST lists a component in a bucket, but the dataset has no object storage",
                    ));
                };
                disk.push(rs.open_listed(e.id, e.level, &sizes, &cache, &cfg.kind)?);
                continue;
            }
            let p = component_path(&cfg.dir, e.id);
            if !p.exists() {
                return Err(Error::corrupt(
                    &p,
                    "component listed in the index MANIFEST is missing; the index directory was modified or damaged",
                ));
            }
            disk.push(open_component_at(
                &p,
                cache.clone(),
                &cfg.kind,
                Some(e.level),
            )?);
        }
        let active = Arc::new(Self::new_memtable(&cfg.kind));
        let tree = LsmTree {
            cfg,
            state: RwLock::new(TreeState {
                active,
                immutables: Vec::new(),
                disk: Arc::new(disk),
            }),
            cache,
            counters: TreeCounters {
                flushes: AtomicU64::new(life.flushes),
                merges: AtomicU64::new(life.merges),
                bytes_flushed: AtomicU64::new(life.bytes_flushed),
                bytes_merged: AtomicU64::new(life.bytes_merged),
                user_bytes: AtomicU64::new(life.user_bytes),
                writes: AtomicU64::new(life.writes),
                ..Default::default()
            },
            next_id: AtomicU64::new(next_id),
            flush_count: AtomicU64::new(flush_count),
            manifest_lock: Mutex::new(()),
            merge_lock: Mutex::new(()),
            merge_scheduled: AtomicBool::new(false),
            changed: Condvar::new(),
            changed_lock: Mutex::new(()),
            failure: Mutex::new(None),
            log_sync: RwLock::new(None),
            hooks: RwLock::new(super::hooks::TreeHooks::default()),
            remote,
            unlisted_lsn: Mutex::new(None),
        };
        Ok(Arc::new(tree))
    }

    /// The local MANIFEST of `dir`, `None` for a new index.
    fn read_local_manifest(dir: &Path) -> Result<Option<Manifest>> {
        let path = dir.join("MANIFEST");
        match std::fs::read(&path) {
            Ok(bytes) => Ok(Some(serde_json::from_slice(&bytes).map_err(|e| {
                Error::corrupt(&path, format!("unreadable manifest: {e}"))
            })?)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(Error::io(&path, e)),
        }
    }

    pub fn name(&self) -> &str {
        &self.cfg.name
    }

    fn new_memtable(kind: &TreeKind) -> MemTable {
        if kind.spatial {
            MemTable::new_spatial()
        } else {
            MemTable::new()
        }
    }

    pub fn kind(&self) -> &TreeKind {
        &self.cfg.kind
    }

    pub fn config(&self) -> &TreeConfig {
        &self.cfg
    }

    /// Whether this is a Z-ordered R-tree (see [`TreeConfig::zorder`]).
    pub(crate) fn cfg_zorder(&self) -> bool {
        self.cfg.zorder && self.cfg.kind.spatial
    }

    /// The error that stopped this index's background work, if any.
    pub fn check_failed(&self) -> Result<()> {
        match &*self.failure.lock() {
            Some(msg) => Err(Error::Closed(format!("index {}: {msg}", self.cfg.name))),
            None => Ok(()),
        }
    }

    pub(crate) fn record_failure(&self, e: &Error) {
        tracing::error!("background work on {} failed: {e}", self.cfg.name);
        *self.failure.lock() = Some(e.to_string());
        self.notify_changed();
    }

    fn notify_changed(&self) {
        let _g = self.changed_lock.lock();
        self.changed.notify_all();
    }

    /// Write an entry into the active in-memory component. Returns the bytes
    /// it added to the memory budget.
    /// Untransactional write (recovery redo, tests). `lsn` is an LSN mark
    /// (LSN + 1, or 0 for none): see [`disk_lsn`](Self::disk_lsn).
    pub fn put(&self, key: &[u8], entry: Entry, lsn: u64) -> u64 {
        self.counters.writes.fetch_add(1, Ordering::Relaxed);
        self.counters
            .user_bytes
            .fetch_add((key.len() + entry.value.len()) as u64, Ordering::Relaxed);
        let st = self.state.read();
        st.active.insert(key, entry, lsn)
    }

    /// Transactional write: under the tree's state lock (so no rotation can
    /// come between the LSN and the memtable it lands in), call `log` to append
    /// the UPDATE record and get its LSN, insert, and register the transaction
    /// as a writer of the memtable. The caller must call [`MemTable::leave`] on
    /// the returned memtable once its COMMIT or ABORT is appended.
    pub fn put_logged(
        &self,
        key: &[u8],
        entry: EntryRef<'_>,
        log: impl FnOnce() -> Result<u64>,
    ) -> Result<(Arc<MemTable>, u64)> {
        self.put_logged_inner(key, entry, log, false)
            .map(|(m, cost, _)| (m, cost))
    }

    /// [`put_logged`](Self::put_logged) that also returns what the memtable
    /// held at `key` before (for exact undo).
    pub fn put_logged_prior(
        &self,
        key: &[u8],
        entry: EntryRef<'_>,
        log: impl FnOnce() -> Result<u64>,
    ) -> Result<(Arc<MemTable>, u64, Option<Entry>)> {
        self.put_logged_inner(key, entry, log, true)
    }

    fn put_logged_inner(
        &self,
        key: &[u8],
        entry: EntryRef<'_>,
        log: impl FnOnce() -> Result<u64>,
        want_prior: bool,
    ) -> Result<(Arc<MemTable>, u64, Option<Entry>)> {
        let st = self.state.read();
        let lsn = log()?;
        self.counters.writes.fetch_add(1, Ordering::Relaxed);
        self.counters
            .user_bytes
            .fetch_add((key.len() + entry.value.len()) as u64, Ordering::Relaxed);
        st.active.enter();
        let (cost, prior) = if want_prior {
            st.active.insert_prior(key, entry, lsn + 1)
        } else {
            (st.active.insert_ref(key, entry, lsn + 1), None)
        };
        Ok((st.active.clone(), cost, prior))
    }

    /// Several entries of one logged operation (one log record covers them
    /// all: a record's entries in one secondary index).
    /// Returns the memtable, the bytes charged and, per entry, its key and
    /// what the memtable held there before (for exact undo, in the order
    /// given; undo restores them in reverse).
    /// `log` writes the log record and hands the entries back (so the record
    /// can own them without a copy).
    pub fn put_batch_logged_prior(
        &self,
        log: impl FnOnce() -> Result<(u64, Vec<(Vec<u8>, Entry)>)>,
    ) -> Result<PutBatch> {
        let st = self.state.read();
        let (lsn, entries) = log()?;
        let n = entries.len() as u64;
        self.counters.writes.fetch_add(n, Ordering::Relaxed);
        let bytes: usize = entries.iter().map(|(k, e)| k.len() + e.value.len()).sum();
        self.counters
            .user_bytes
            .fetch_add(bytes as u64, Ordering::Relaxed);
        st.active.enter();
        let mut cost = 0;
        let mut priors = Vec::with_capacity(entries.len());
        for (key, entry) in entries {
            let (c, prior) = st.active.insert_prior(&key, entry.as_ref(), lsn + 1);
            cost += c;
            priors.push((key, prior));
        }
        Ok((st.active.clone(), cost, priors))
    }

    /// Bulk-load sorted, distinct entries as one new disk component placed as
    /// the oldest (the index-build path of `create index`). `lsn_mark` is the
    /// LSN mark the component reflects (see [`disk_lsn`](Self::disk_lsn)).
    pub fn bulk_load(
        self: &Arc<Self>,
        entries: impl IntoIterator<Item = (Vec<u8>, Entry)>,
        lsn_mark: u64,
    ) -> Result<()> {
        let mut meta = self.new_meta(if self.cfg.policy.is_leveled() { 1 } else { 0 });
        meta.min_flush_id = meta.id;
        meta.max_flush_id = meta.id;
        meta.min_lsn = lsn_mark;
        meta.max_lsn = lsn_mark;
        let path = component_path(&self.cfg.dir, meta.id);
        let mut w = ComponentBuilder::create(&path, meta, self.cfg.writer.clone(), self.cfg.kind)?;
        for (k, e) in entries {
            w.add(&k, e.kind, e.seq, &e.value)?;
        }
        let Some(reader) = w.finish(&self.cache)? else {
            return Ok(());
        };
        let reader = self.place(reader)?;
        // The built entries are the index's user data (write amplification
        // of a freshly built index is then about 1, not bytes / 0).
        self.counters
            .user_bytes
            .fetch_add(reader.meta().raw_bytes, Ordering::Relaxed);
        self.counters
            .bytes_flushed
            .fetch_add(reader.meta().file_bytes, Ordering::Relaxed);
        let _m = self.manifest_lock.lock();
        let new_disk = {
            let mut st = self.state.write();
            let mut d: Vec<_> = st.disk.as_ref().clone();
            d.push(reader);
            st.disk = Arc::new(d);
            st.disk.clone()
        };
        self.write_manifest(&new_disk)
    }

    /// Wait for writers that are between taking an LSN and inserting (they
    /// hold the state lock shared); used by checkpoints.
    pub fn barrier(&self) {
        drop(self.state.write());
    }

    /// Install the hook that makes the log durable before a flush.
    pub fn set_log_sync(&self, hook: Arc<dyn LogSync>) {
        *self.log_sync.write() = Some(hook);
    }

    /// LSN mark of the disk components (the paper's indexLSN for recovery).
    ///
    /// Convention used throughout the LSM layer: memtables and component
    /// metadata store an LSN *mark* = LSN + 1, so that 0 means "no logged entry"
    /// (LSN 0 is a real log position). A log record with LSN `l` needs no redo
    /// when `l + 1 <= disk_lsn()`.
    pub fn disk_lsn(&self) -> u64 {
        self.state
            .read()
            .disk
            .iter()
            .map(|c| c.meta().max_lsn)
            .max()
            .unwrap_or(0)
    }

    /// Smallest LSN still only in memory (None if the memtables hold no logged entry).
    pub fn min_memory_lsn(&self) -> Option<u64> {
        let in_memory = {
            let st = self.state.read();
            std::iter::once(&st.active)
                .chain(st.immutables.iter())
                .filter_map(|m| m.lsn_range().map(|r| r.0.saturating_sub(1)))
                .min()
        };
        // Read after the list: a flush marks its memtable before taking it
        // out, and clears the mark only once the MANIFEST lists it.
        let unlisted = *self.unlisted_lsn.lock();
        in_memory.into_iter().chain(unlisted).min()
    }

    pub fn active_bytes(&self) -> u64 {
        self.state.read().active.bytes()
    }

    pub fn snapshot(&self) -> Snapshot {
        let st = self.state.read();
        let mut mems = Vec::with_capacity(1 + st.immutables.len());
        mems.push(st.active.clone());
        mems.extend(st.immutables.iter().cloned());
        Snapshot {
            mems,
            disk: st.disk.clone(),
        }
    }

    /// Swap the active in-memory component for an empty one if it holds data
    /// and the previous one has been flushed (double buffering). Returns the
    /// memtable to flush. With `wait`, blocks until the second buffer is free.
    pub fn rotate(&self, wait: bool) -> Result<Option<Arc<MemTable>>> {
        loop {
            self.check_failed()?;
            {
                let mut st = self.state.write();
                if st.active.is_empty() {
                    return Ok(None);
                }
                if st.immutables.is_empty() {
                    let fresh = Arc::new(self.hooked_memtable());
                    let full = std::mem::replace(&mut st.active, fresh);
                    st.immutables.insert(0, full.clone());
                    return Ok(Some(full));
                }
            }
            if !wait {
                return Ok(None);
            }
            self.counters.flush_stalls.fetch_add(1, Ordering::Relaxed);
            let mut g = self.changed_lock.lock();
            if !self.state.read().immutables.is_empty() {
                self.changed.wait_for(&mut g, Duration::from_millis(50));
            }
        }
    }

    pub fn stats(&self) -> TreeStats {
        let st = self.state.read().clone();
        let c = &self.counters;
        let ld = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let components: Vec<ComponentSummary> = st
            .disk
            .iter()
            .map(|c| {
                let m = c.meta();
                ComponentSummary {
                    id: m.id,
                    level: m.level,
                    entries: m.entries,
                    tombstones: m.tombstones,
                    size_bytes: m.file_bytes,
                    min_flush_id: m.min_flush_id,
                    max_flush_id: m.max_flush_id,
                }
            })
            .collect();
        let user = ld(&c.user_bytes);
        let written = ld(&c.bytes_flushed) + ld(&c.bytes_merged);
        let gets = ld(&c.gets);
        let scans = ld(&c.scans);
        TreeStats {
            name: self.cfg.name.clone(),
            policy: self.cfg.policy.to_string(),
            memory_bytes: st.active.bytes() + st.immutables.iter().map(|m| m.bytes()).sum::<u64>(),
            memory_entries: (st.active.len() + st.immutables.iter().map(|m| m.len()).sum::<usize>())
                as u64,
            disk_bytes: components.iter().map(|c| c.size_bytes).sum(),
            components,
            flushes: ld(&c.flushes),
            merges: ld(&c.merges),
            bytes_flushed: ld(&c.bytes_flushed),
            bytes_merged: ld(&c.bytes_merged),
            user_bytes_written: user,
            write_amplification: if user == 0 {
                0.0
            } else {
                written as f64 / user as f64
            },
            gets,
            key_checks: ld(&c.key_checks),
            components_per_get: if gets == 0 {
                0.0
            } else {
                ld(&c.components_probed) as f64 / gets as f64
            },
            bloom_negatives: ld(&c.bloom_negatives),
            bloom_false_positives: ld(&c.bloom_false_positives),
            scans,
            components_per_scan: if scans == 0 {
                0.0
            } else {
                ld(&c.scan_components) as f64 / scans as f64
            },
            flush_stalls: ld(&c.flush_stalls),
            moves: ld(&c.moves),
            writes: ld(&c.writes),
            remote: self.remote.as_ref().map(|r| {
                let k = &r.tier.counters;
                RemoteStats {
                    url: r.tier.url_of("").display().to_string(),
                    components: st.disk.iter().filter(|c| c.is_remote()).count() as u64,
                    gets: ld(&k.gets),
                    bytes_read: ld(&k.bytes_read),
                    puts: ld(&k.puts),
                    bytes_written: ld(&k.bytes_written),
                    deletes: ld(&k.deletes),
                }
            }),
        }
    }
}

#[cfg(test)]
mod tests;
