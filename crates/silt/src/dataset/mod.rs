//! Datasets: records with a primary key, stored in P hash partitions, each
//! with its own primary LSM index. DML (insert / upsert / delete), point
//! lookups and ordered scans that fan out over the partitions.

use crate::error::{Error, Result};
use crate::index::{IndexDef, ReconcileOption};
use crate::lsm::background::Background;
use crate::lsm::memtable::MemTable;
use crate::lsm::tree::{Scheduler, TreeScan};
use crate::lsm::{LsmTree, MemoryGroup, TreeConfig, TreeKind, TreeStats};
use crate::schema::{DatasetDef, MAX_RECORD_BYTES};
use crate::storage::{BlockCache, Entry, WriterOptions};
use crate::txn::ctx::TxnContext;
use crate::txn::{LockManager, LogEntry, LogOp, LogRecord};
use crate::value::{self, Value};
use serde::Serialize;
use std::cmp::Ordering as CmpOrdering;
use std::collections::{BinaryHeap, HashMap};
use std::ops::Bound;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use xxhash_rust::xxh3::xxh3_64;

/// Largest payload of one secondary-index `UpdateBatch` log record (about):
/// a record with more entries in one index is logged in several.
const SEC_BATCH_LOG_BYTES: usize = 1 << 20;

mod query;
mod recency;
pub use query::{
    JoinPredicate, JoinResults, Query, QueryHit, QueryOptions, QueryResults, QueryStats,
};

/// What a batch write does with each record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WriteMode {
    Insert,
    Upsert,
}

/// How a batch of records is written.
#[derive(Clone, Copy, Debug)]
pub struct BatchOptions {
    pub mode: WriteMode,
    /// All-or-nothing: one transaction for the whole batch; on any error every
    /// record is undone and nothing is committed.
    pub atomic: bool,
    /// Non-atomic batches: stop at the first failing record (as an AsterixDB
    /// statement does: the records before it stay committed) instead of
    /// skipping it and going on.
    pub stop_on_error: bool,
}

impl BatchOptions {
    /// One all-or-nothing transaction for the whole batch, writing in `mode`.
    pub fn atomic(mode: WriteMode) -> Self {
        BatchOptions {
            mode,
            atomic: true,
            ..Default::default()
        }
    }
}

impl Default for BatchOptions {
    fn default() -> Self {
        BatchOptions {
            mode: WriteMode::Insert,
            atomic: false,
            stop_on_error: true,
        }
    }
}

/// What a batch write did, record by record.
#[derive(Debug, Default)]
pub struct BatchReport {
    /// Records committed (durable according to the durability mode).
    pub committed: usize,
    /// (position in the batch, error) of each record that failed.
    pub failed: Vec<(usize, Error)>,
    /// Records not attempted because the batch stopped at an error.
    pub not_attempted: usize,
}

enum WriteOp {
    Insert(Vec<u8>, Vec<u8>),
    Upsert(Vec<u8>, Vec<u8>),
    Delete(Vec<u8>),
}

impl WriteOp {
    fn key(&self) -> &[u8] {
        match self {
            WriteOp::Insert(k, _) | WriteOp::Upsert(k, _) | WriteOp::Delete(k) => k,
        }
    }
}

/// One undo step of a transaction: restore `prior` (None = absent) at `key`.
struct Undo {
    /// The memtable the forward operation went into: the undo goes there too,
    /// so that it can never be flushed apart from the operation it reverses
    /// (the transaction is still a registered writer of it).
    mem: Arc<MemTable>,
    key: Vec<u8>,
    prior: Option<Entry>,
    /// Restore `prior` as the memtable's exact former content (secondary
    /// indexes) rather than writing a newer version (primary).
    exact: bool,
}

/// Per-transaction bookkeeping while it runs.
#[derive(Default)]
struct TxnWork {
    mems: Vec<Arc<MemTable>>,
    undo: Vec<Undo>,
    cost: u64,
    /// Largest eager-index value lock name held (see `recency`).
    value_lock_max: Option<u64>,
}

struct Partition {
    primary: Arc<LsmTree>,
}

/// The secondary indexes of a dataset: definitions and, per index, one LSM
/// tree per partition (`trees[i][p]`). Replaced as a whole by DDL.
#[derive(Default)]
struct IndexSet {
    defs: Vec<IndexDef>,
    trees: Vec<Vec<Arc<LsmTree>>>,
}

/// Encoded (lower, upper) bounds of a key range.
type KeyRange = (Bound<Vec<u8>>, Bound<Vec<u8>>);

/// A resolved index query: the index set, the index's position, the encoded
/// bounds and the matching entry keys.
type IndexQuery = (
    Arc<IndexSet>,
    usize,
    Bound<Vec<u8>>,
    Bound<Vec<u8>>,
    Vec<Vec<u8>>,
);

/// One hit of an index-only query: the secondary key and the primary key.
#[derive(Clone, Debug, PartialEq)]
pub struct IndexHit {
    pub sk: Vec<Value>,
    pub pk: Vec<Value>,
}

/// An open dataset. Cheap to share (`Arc<Dataset>`), safe to use from many threads.
pub struct Dataset {
    def: DatasetDef,
    id: u32,
    txn: Arc<TxnContext>,
    dir: PathBuf,
    partitions: Vec<Partition>,
    group: Arc<MemoryGroup>,
    bg: Arc<Background>,
    seq: Arc<AtomicU64>,
    indexes: parking_lot::RwLock<Arc<IndexSet>>,
    /// Writers hold it shared for the whole transaction; index DDL exclusive.
    ddl: parking_lot::RwLock<()>,
    cache: Arc<BlockCache>,
    sync: bool,
    /// Attributes of the embedded indexes, shared by the primaries' hooks.
    embedded: Arc<crate::index::recency::EmbeddedFields>,
}

/// Counters of a dataset, per index and partition.
#[derive(Clone, Debug, Serialize)]
pub struct DatasetStats {
    pub name: String,
    pub partitions: u32,
    pub memory_budget: u64,
    pub primary_key: Vec<String>,
    pub indexes: Vec<TreeStats>,
}

impl Dataset {
    pub(crate) fn open(
        def: DatasetDef,
        dir: &Path,
        cache: Arc<BlockCache>,
        bg: Arc<Background>,
        seq: Arc<AtomicU64>,
        sync: bool,
        txn: Arc<TxnContext>,
    ) -> Result<Arc<Dataset>> {
        def.validate()?;
        let group = MemoryGroup::new(def.memory_budget, bg.clone());
        let n_trees = u64::from(def.partitions);
        let mut partitions = Vec::new();
        for p in 0..def.partitions {
            let cfg = TreeConfig {
                name: format!("{}/p{p}/primary", def.name),
                dir: dir.join(format!("p{p}")).join("primary"),
                policy: def.policy.clone(),
                writer: WriterOptions {
                    block_size: def.block_size,
                    compression: def.compression,
                    bloom_fpr: def.bloom_fpr,
                    sync,
                },
                memtable_bytes: (def.memory_budget / n_trees).max(1),
                kind: TreeKind::default(),
                key_cell: [0.0; 2],
                key_space: [0.0; 4],
                zorder: false,
            };
            let primary = LsmTree::open(cfg, cache.clone())?;
            primary.set_log_sync(txn.clone());
            for c in primary.snapshot().disk.iter() {
                seq.fetch_max(c.meta().max_seq + 1, Ordering::SeqCst);
            }
            group.add_tree(primary.clone());
            partitions.push(Partition { primary });
        }
        let mut set = IndexSet::default();
        for idef in &def.indexes {
            let mut trees = Vec::new();
            if !idef.kind.imp().has_tree() {
                // No tree: the primaries carry it (hooks installed below).
                set.defs.push(idef.clone());
                set.trees.push(trees);
                continue;
            }
            for p in 0..def.partitions {
                let t = Self::open_index_tree(&def, dir, p, idef, &cache, sync)?;
                t.set_log_sync(txn.clone());
                for c in t.snapshot().disk.iter() {
                    seq.fetch_max(c.meta().max_seq + 1, Ordering::SeqCst);
                }
                group.add_tree(t.clone());
                trees.push(t);
            }
            set.defs.push(idef.clone());
            set.trees.push(trees);
        }
        // Directories of indexes the catalog no longer lists (a drop or a
        // build interrupted by a crash) are removed.
        for p in 0..def.partitions {
            let pdir = dir.join(format!("p{p}"));
            if let Ok(rd) = std::fs::read_dir(&pdir) {
                for e in rd.flatten() {
                    let name = e.file_name().to_string_lossy().into_owned();
                    if name != "primary" && !def.indexes.iter().any(|d| d.name == name) {
                        let path = e.path();
                        std::fs::remove_dir_all(&path).map_err(|err| Error::io(&path, err))?;
                    }
                }
            }
        }
        let ds = Arc::new(Dataset {
            id: def.id,
            txn,
            def,
            dir: dir.to_path_buf(),
            partitions,
            group,
            bg,
            seq,
            indexes: parking_lot::RwLock::new(Arc::new(set)),
            ddl: parking_lot::RwLock::new(()),
            cache,
            sync,
            embedded: Arc::default(),
        });
        ds.sync_recency_hooks(&ds.def.indexes);
        // Components inherited from before a restart may warrant a merge.
        for t in ds.trees() {
            ds.bg.schedule_merge(t);
        }
        Ok(ds)
    }

    fn open_index_tree(
        def: &DatasetDef,
        dir: &Path,
        p: u32,
        idef: &IndexDef,
        cache: &Arc<BlockCache>,
        sync: bool,
    ) -> Result<Arc<LsmTree>> {
        let n_trees = u64::from(def.partitions) * (1 + def.indexes.len() as u64);
        let cfg = TreeConfig {
            name: format!("{}/p{p}/{}", def.name, idef.name),
            dir: dir.join(format!("p{p}")).join(&idef.name),
            policy: idef.policy.clone(),
            writer: WriterOptions {
                // R-tree leaves are data blocks: smaller leaves prune better
                // (a kNN or small-box search decodes whole leaves).
                block_size: if idef.kind.imp().spatial_tree() {
                    idef.leaf_bytes()
                } else {
                    def.block_size
                },
                compression: def.compression,
                bloom_fpr: def.bloom_fpr,
                sync,
            },
            memtable_bytes: (def.memory_budget / n_trees.max(1)).max(1),
            kind: idef.tree_kind(),
            key_cell: if idef.kind.imp().spatial_tree() {
                let sp = idef.space();
                // Keys hold order-32 Hilbert values: 2^32 cells per axis.
                const CELLS: f64 = 4_294_967_296.0;
                [
                    (sp.max_x - sp.min_x).abs() / CELLS,
                    (sp.max_y - sp.min_y).abs() / CELLS,
                ]
            } else {
                [0.0; 2]
            },
            key_space: {
                let sp = idef.space();
                [sp.min_x, sp.min_y, sp.max_x, sp.max_y]
            },
            zorder: idef.kind.imp().spatial_tree()
                && idef.rtree_order() == crate::index::RtreeOrder::Zorder,
        };
        let tree = LsmTree::open(cfg, cache.clone())?;
        idef.kind.imp().install_hooks(&tree);
        Ok(tree)
    }

    pub fn name(&self) -> &str {
        &self.def.name
    }

    /// The secondary index definitions.
    pub fn index_defs(&self) -> Vec<IndexDef> {
        self.indexes.read().defs.clone()
    }

    /// The tree of index `index_id` (0 = primary) in partition `p` (recovery).
    pub(crate) fn tree_for(&self, index_id: u32, p: usize) -> Option<Arc<LsmTree>> {
        if index_id == 0 {
            return self.partitions.get(p).map(|x| x.primary.clone());
        }
        let set = self.indexes.read();
        let i = set.defs.iter().position(|d| d.id == index_id)?;
        set.trees[i].get(p).cloned()
    }

    pub fn def(&self) -> &DatasetDef {
        &self.def
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn partition_of(&self, key: &[u8]) -> &Partition {
        let n = self.partitions.len() as u64;
        &self.partitions[(xxh3_64(key) % n) as usize]
    }

    fn partition_index(&self, key: &[u8]) -> usize {
        (xxh3_64(key) % self.partitions.len() as u64) as usize
    }

    pub fn id(&self) -> u32 {
        self.id
    }

    pub(crate) fn memory_group(&self) -> &Arc<MemoryGroup> {
        &self.group
    }

    pub(crate) fn bump_seq(&self, seen: u64) {
        self.seq.fetch_max(seen + 1, Ordering::SeqCst);
    }

    /// Encode a primary key tuple, checking its arity and types.
    pub fn encode_pk(&self, pk: &[Value]) -> Result<Vec<u8>> {
        if pk.len() != self.def.primary_key.len() {
            return Err(Error::invalid(
                None,
                format!(
                    "dataset `{}` has a {}-field primary key ({}), got {} value(s)",
                    self.def.name,
                    self.def.primary_key.len(),
                    self.def.primary_key.join(", "),
                    pk.len()
                ),
            ));
        }
        let mut parts = Vec::with_capacity(pk.len());
        for (name, v) in self.def.primary_key.iter().zip(pk) {
            let v = match self.def.field_type(name) {
                Some(t) => value::coerce(name, t, v.clone())?,
                None => v.clone(),
            };
            if v.is_null() {
                return Err(Error::invalid(
                    Some(name),
                    "primary key fields cannot be null",
                ));
            }
            parts.push(v);
        }
        let mut key = Vec::new();
        value::encode_key(&parts, &mut key)?;
        Ok(key)
    }

    /// Validate and coerce a record; return (encoded key, encoded record).
    pub fn prepare(&self, record: Value) -> Result<(Vec<u8>, Vec<u8>)> {
        let Value::Object(fields) = record else {
            return Err(Error::invalid(
                None,
                format!("a record must be an object, got {}", record.type_name()),
            ));
        };
        let mut out_fields = Vec::with_capacity(fields.len());
        for (name, v) in fields {
            let v = match self.def.field_type(&name) {
                Some(t) => value::coerce(&name, t, v)?,
                None => v,
            };
            out_fields.push((name, v));
        }
        let record = Value::Object(out_fields);
        let mut parts = Vec::with_capacity(self.def.primary_key.len());
        for k in &self.def.primary_key {
            match record.get(k) {
                None | Some(Value::Null) => {
                    return Err(Error::invalid(
                        Some(k),
                        "the primary key field is missing or null",
                    ));
                }
                Some(v) => parts.push(v.clone()),
            }
        }
        let mut key = Vec::new();
        value::encode_key(&parts, &mut key)?;
        let mut bytes = Vec::with_capacity(record.encoded_len_hint());
        value::encode_record(&record, &mut bytes)?;
        if bytes.len() > MAX_RECORD_BYTES {
            return Err(Error::ValueTooLarge {
                size: bytes.len(),
                limit: MAX_RECORD_BYTES,
            });
        }
        Ok((key, bytes))
    }

    fn next_seq(&self) -> u64 {
        self.seq.fetch_add(1, Ordering::SeqCst)
    }

    fn duplicate(&self, key: &[u8]) -> Error {
        let shown = value::decode_key(key)
            .map(|k| value::key_to_string(&k))
            .unwrap_or_else(|_| "?".into());
        Error::DuplicateKey {
            dataset: self.def.name.clone(),
            key: shown,
        }
    }

    /// Apply one record operation inside transaction `txn`, whose X lock on the
    /// key is held. Every index operation is logged (UPDATE) before it is
    /// applied. Returns false when there was nothing to do (delete of an
    /// absent key). With `track_undo`, remembers how to undo it.
    fn apply(&self, txn: u64, op: &WriteOp, work: &mut TxnWork, track_undo: bool) -> Result<bool> {
        let key = op.key();
        let pidx = self.partition_index(key);
        let tree = &self.partitions[pidx].primary;
        tree.check_failed()?;
        let idx = self.indexes.read().clone();
        let has_sec = !idx.defs.is_empty();
        let prior = match op {
            WriteOp::Insert(..) | WriteOp::Delete(_) => tree.check_entry(key)?,
            WriteOp::Upsert(..) if track_undo || has_sec => tree.check_entry(key)?,
            WriteOp::Upsert(..) => None,
        };
        let live = prior.as_ref().is_some_and(|e| !e.is_delete());
        match op {
            WriteOp::Insert(..) if live => return Err(self.duplicate(key)),
            WriteOp::Delete(_) if !live => return Ok(false),
            _ => {}
        }
        // Secondary index changes, computed before anything is written so that
        // a record whose indexed field cannot be indexed is refused cleanly.
        // Eager maintenance as AsterixDB: the old record's entries are removed.
        // (index, key, put?, value)
        let mut sec_ops: Vec<(usize, Vec<u8>, bool, Vec<u8>)> = Vec::new();
        let mut rec_ops = Vec::new();
        if has_sec {
            let old_rec = match &prior {
                Some(e) if !e.is_delete() => Some(value::decode_value(&e.value)?),
                _ => None,
            };
            let new_rec = match op {
                WriteOp::Insert(_, v) | WriteOp::Upsert(_, v) => Some(value::decode_value(v)?),
                WriteOp::Delete(_) => None,
            };
            for (i, d) in idx.defs.iter().enumerate() {
                if d.kind.is_recency() {
                    // Maintained by `recency_prepare` / `recency_apply`.
                    continue;
                }
                let old_e = match &old_rec {
                    Some(r) => d.entries(r, key).unwrap_or_default(),
                    None => Vec::new(),
                };
                let new_e = match &new_rec {
                    Some(r) => d.entries(r, key)?,
                    None => Vec::new(),
                };
                // A composite index's entries carry the sequence number of
                // the record's last write (LevelDB++ writes the composite key
                // on every PUT), so recency queries can rank by the entries
                // and stop after k valid ones: always rewritten.
                let restamp = d.kind.imp().restamps();
                if old_e == new_e && !restamp {
                    continue;
                }
                // With deleted-key reconciliation a delete hides every entry of
                // the primary key in older components, so all new entries are
                // rewritten; with antimatter only the changed ones.
                let rewrite_all = d.reconcile_mode() == ReconcileOption::DeletedKeys || restamp;
                for (k, v) in &old_e {
                    if !new_e.iter().any(|(nk, _)| nk == k) {
                        sec_ops.push((i, k.clone(), false, v.clone()));
                    }
                }
                for (k, v) in new_e {
                    if rewrite_all || !old_e.iter().any(|(ok, ov)| *ok == k && *ov == v) {
                        sec_ops.push((i, k, true, v));
                    }
                }
            }
            rec_ops = self.recency_prepare(txn, &idx, old_rec.as_ref(), new_rec.as_ref(), work)?;
        }
        let seq = self.next_seq();
        let (entry, log_op) = match op {
            WriteOp::Insert(_, v) | WriteOp::Upsert(_, v) => {
                (Entry::put(seq, v.clone()), LogOp::Put)
            }
            WriteOp::Delete(_) => (Entry::delete(seq), LogOp::Delete),
        };
        let wal = &self.txn.wal;
        let (mem, cost) = tree.put_logged(key, entry, || {
            wal.append(&LogRecord::Update {
                txn,
                dataset: self.id,
                partition: pidx as u32,
                index: 0,
                op: log_op,
                key: key.to_vec(),
                seq,
                value: match op {
                    WriteOp::Insert(_, v) | WriteOp::Upsert(_, v) => v.clone(),
                    WriteOp::Delete(_) => Vec::new(),
                },
            })
        })?;
        work.mems.push(mem.clone());
        work.cost += cost;
        if track_undo || has_sec {
            work.undo.push(Undo {
                mem,
                key: key.to_vec(),
                prior: prior.filter(|e| !e.is_delete()),
                exact: false,
            });
        }
        // One log record per index for this record's entries there (sec_ops
        // are grouped by index, in index order).
        let mut ops = sec_ops.into_iter().peekable();
        while let Some((i, skey, put, sval)) = ops.next() {
            let entry = |put: bool, key: Vec<u8>, value: Vec<u8>| LogEntry {
                op: if put { LogOp::Put } else { LogOp::Delete },
                key,
                value,
            };
            let mut group = vec![entry(put, skey, sval)];
            while let Some((_, k, p, v)) = ops.next_if(|op| op.0 == i) {
                group.push(entry(p, k, v));
            }
            let ctx = (txn, pidx, idx.defs[i].id);
            self.write_secondary_batch(&idx.trees[i][pidx], ctx, seq, group, work)?;
        }
        if !rec_ops.is_empty() {
            self.recency_apply(txn, pidx, seq, key, rec_ops, &idx, work)?;
        }
        Ok(true)
    }

    /// Log one secondary-index operation (an UPDATE record for index
    /// `index_id`), apply it to the index's active memtable and remember the
    /// memtable's exact prior content for undo. `ctx` = (txn, partition, index id).
    fn write_secondary(
        &self,
        tree: &Arc<LsmTree>,
        ctx: (u64, usize, u32),
        key: Vec<u8>,
        e: Entry,
        work: &mut TxnWork,
    ) -> Result<()> {
        let (txn, pidx, index_id) = ctx;
        let op = if e.is_delete() {
            LogOp::Delete
        } else {
            LogOp::Put
        };
        let (seq, logged) = (e.seq, e.value.clone());
        let wal = &self.txn.wal;
        let (mem, cost, prior) = tree.put_logged_prior(&key, e, || {
            wal.append(&LogRecord::Update {
                txn,
                dataset: self.id,
                partition: pidx as u32,
                index: index_id,
                op,
                key: key.clone(),
                seq,
                value: logged,
            })
        })?;
        work.mems.push(mem.clone());
        work.cost += cost;
        work.undo.push(Undo {
            mem,
            key,
            prior,
            exact: true,
        });
        Ok(())
    }

    /// Log a record's entries in one secondary index as one log record (an
    /// `UpdateBatch`, or an `Update` for a single entry), apply them to the
    /// index's active memtable and remember the memtable's exact prior
    /// content of each for undo. All entries carry the record's sequence
    /// number. `ctx` = (txn, partition, index id).
    fn write_secondary_batch(
        &self,
        tree: &Arc<LsmTree>,
        ctx: (u64, usize, u32),
        seq: u64,
        mut entries: Vec<LogEntry>,
        work: &mut TxnWork,
    ) -> Result<()> {
        if entries.len() == 1 {
            if let Some(op) = entries.pop() {
                let (key, e) = op.into_entry(seq);
                return self.write_secondary(tree, ctx, key, e, work);
            }
            return Ok(());
        }
        let (txn, pidx, index_id) = ctx;
        // Keep each log record far below the log's payload limit, however
        // many entries one record produces (an n-gram index on a long text).
        while !entries.is_empty() {
            let mut end = 0;
            let mut bytes = 0usize;
            while end < entries.len() && (end == 0 || bytes < SEC_BATCH_LOG_BYTES) {
                bytes += entries[end].key.len() + entries[end].value.len() + 8;
                end += 1;
            }
            let chunk: Vec<LogEntry> = if end == entries.len() {
                std::mem::take(&mut entries)
            } else {
                entries.drain(..end).collect()
            };
            let wal = &self.txn.wal;
            // The log record owns the entries while it is written, then hands
            // them to the memtable (no copy).
            let (mem, cost, priors) = tree.put_batch_logged_prior(|| {
                let rec = LogRecord::UpdateBatch {
                    txn,
                    dataset: self.id,
                    partition: pidx as u32,
                    index: index_id,
                    seq,
                    entries: chunk,
                };
                let lsn = wal.append(&rec)?;
                let back = rec.into_entries().into_iter();
                Ok((lsn, back.map(|op| op.into_entry(seq)).collect()))
            })?;
            work.mems.push(mem.clone());
            work.cost += cost;
            for (key, prior) in priors {
                work.undo.push(Undo {
                    mem: mem.clone(),
                    key,
                    prior,
                    exact: true,
                });
            }
        }
        Ok(())
    }

    /// Undo a transaction's applied operations by inverse operations, newest
    /// first (no compensation log records: redo skips uncommitted work).
    fn undo(&self, work: &mut TxnWork) {
        // A primary key the transaction wrote more than once is restored to
        // what it held before the transaction (the prior of its first
        // write) in every memtable the writes went into. Its writes can land
        // in two memtables (another writer rotated the active one between
        // them); restoring each write's own prior would leave the newer
        // memtable holding the first write's uncommitted version, which
        // shadows the older one's restore for good
        // (`tests/abort_same_key_twice.rs`).
        let mut before: HashMap<Vec<u8>, Option<Vec<u8>>> = HashMap::new();
        for u in work.undo.iter().filter(|u| !u.exact) {
            before
                .entry(u.key.clone())
                .or_insert_with(|| u.prior.as_ref().map(|e| e.value.clone()));
        }
        for u in work.undo.drain(..).rev() {
            if u.exact {
                u.mem.restore(&u.key, u.prior);
                continue;
            }
            let seq = self.next_seq();
            let prior = before.get(&u.key).cloned().flatten();
            let e = match prior {
                Some(v) => Entry::put(seq, v),
                None => Entry::delete(seq),
            };
            work.cost += u.mem.insert(&u.key, e, 0);
        }
    }

    /// One record, one transaction: X lock, log + apply, COMMIT, acknowledge
    /// per the durability mode (`sync`: once the COMMIT is fsynced).
    fn write_one(&self, op: WriteOp) -> Result<bool> {
        let _ddl = self.ddl.read();
        let ctx = &self.txn;
        let txn = ctx.begin();
        ctx.locks.lock_x(txn, LockManager::name(self.id, op.key()));
        let mut work = TxnWork::default();
        match self.apply(txn, &op, &mut work, false) {
            Ok(true) => {
                let h = ctx.commit(txn, &work.mems);
                self.group.charge(work.cost)?;
                h.acknowledge(ctx.durability)?;
                Ok(true)
            }
            Ok(false) => {
                ctx.locks.release_all(txn);
                Ok(false)
            }
            Err(e) => {
                if work.mems.is_empty() {
                    ctx.locks.release_all(txn);
                } else {
                    self.undo(&mut work);
                    ctx.abort(txn, &work.mems);
                }
                Err(e)
            }
        }
    }

    /// Insert a new record; fails with [`Error::DuplicateKey`] if its primary
    /// key exists (checked newest to oldest component through bloom filters).
    pub fn insert(&self, record: Value) -> Result<()> {
        let (key, bytes) = self.prepare(record)?;
        self.write_one(WriteOp::Insert(key, bytes)).map(|_| ())
    }

    /// Insert or replace a record.
    pub fn upsert(&self, record: Value) -> Result<()> {
        let (key, bytes) = self.prepare(record)?;
        self.write_one(WriteOp::Upsert(key, bytes)).map(|_| ())
    }

    /// Delete the record with this primary key; returns whether it existed.
    pub fn delete(&self, pk: &[Value]) -> Result<bool> {
        let key = self.encode_pk(pk)?;
        self.write_one(WriteOp::Delete(key))
    }

    /// Write many records. Non-atomic batches make each record its own
    /// transaction and follow the deadlock-free protocol of Algorithm 1
    /// (000 §3.4.2): try-lock; on refusal, make this thread's appended
    /// COMMITs durable with a WAIT record (its locks are then released), and
    /// only then block on the lock. COMMITs are appended without waiting, so
    /// a batch shares fsyncs (group commit). Atomic batches lock every key in
    /// sorted lock-name order and commit once, or undo everything.
    pub fn write_batch(&self, records: Vec<Value>, opts: BatchOptions) -> Result<BatchReport> {
        if opts.atomic {
            return self.write_batch_atomic(records, opts);
        }
        let ctx = &self.txn;
        let mut report = BatchReport::default();
        let mut handles = Vec::new();
        let total = records.len();
        for (i, rec) in records.into_iter().enumerate() {
            let op = match self.prepare(rec) {
                Ok((k, v)) => match opts.mode {
                    WriteMode::Insert => WriteOp::Insert(k, v),
                    WriteMode::Upsert => WriteOp::Upsert(k, v),
                },
                Err(e) => {
                    report.failed.push((i, e));
                    if opts.stop_on_error {
                        report.not_attempted = total - i - 1;
                        break;
                    }
                    continue;
                }
            };
            let _ddl = self.ddl.read();
            let txn = ctx.begin();
            let name = LockManager::name(self.id, op.key());
            if !ctx.locks.try_lock_x(txn, name) {
                ctx.wait_for_commits(txn)?;
                ctx.locks.lock_x(txn, name);
            }
            let mut work = TxnWork::default();
            match self.apply(txn, &op, &mut work, false) {
                Ok(true) => {
                    handles.push(ctx.commit(txn, &work.mems));
                    self.group.charge(work.cost)?;
                }
                Ok(false) => ctx.locks.release_all(txn),
                Err(e) => {
                    if work.mems.is_empty() {
                        ctx.locks.release_all(txn);
                    } else {
                        self.undo(&mut work);
                        ctx.abort(txn, &work.mems);
                    }
                    if matches!(e, Error::Closed(_) | Error::Io { .. }) {
                        return Err(e);
                    }
                    report.failed.push((i, e));
                    if opts.stop_on_error {
                        report.not_attempted = total - i - 1;
                        break;
                    }
                }
            }
        }
        for h in handles {
            match ctx.durability {
                crate::txn::Durability::Sync => h.wait()?,
                d => h.acknowledge(d)?,
            }
            report.committed += 1;
        }
        Ok(report)
    }

    fn write_batch_atomic(&self, records: Vec<Value>, opts: BatchOptions) -> Result<BatchReport> {
        let ctx = &self.txn;
        let mut report = BatchReport::default();
        let total = records.len();
        let mut ops = Vec::with_capacity(total);
        for (i, rec) in records.into_iter().enumerate() {
            match self.prepare(rec) {
                Ok((k, v)) => ops.push(match opts.mode {
                    WriteMode::Insert => WriteOp::Insert(k, v),
                    WriteMode::Upsert => WriteOp::Upsert(k, v),
                }),
                Err(e) => {
                    report.failed.push((i, e));
                    report.not_attempted = total - report.failed.len();
                    return Ok(report);
                }
            }
        }
        let _ddl = self.ddl.read();
        let txn = ctx.begin();
        let mut names: Vec<u64> = ops
            .iter()
            .map(|o| LockManager::name(self.id, o.key()))
            .collect();
        names.sort_unstable();
        names.dedup();
        for n in names {
            ctx.locks.lock_x(txn, n);
        }
        let mut work = TxnWork::default();
        for (i, op) in ops.iter().enumerate() {
            if let Err(e) = self.apply(txn, op, &mut work, true) {
                self.undo(&mut work);
                ctx.abort(txn, &work.mems);
                self.group.charge(work.cost)?;
                if matches!(e, Error::Closed(_) | Error::Io { .. }) {
                    return Err(e);
                }
                report.failed.push((i, e));
                report.not_attempted = total - 1;
                return Ok(report);
            }
        }
        let h = ctx.commit(txn, &work.mems);
        self.group.charge(work.cost)?;
        h.acknowledge(ctx.durability)?;
        report.committed = total;
        Ok(report)
    }

    /// The record with this primary key, if any.
    pub fn get(&self, pk: &[Value]) -> Result<Option<Value>> {
        let key = self.encode_pk(pk)?;
        self.get_raw(&key)?.map(|b| decode_stored(&b)).transpose()
    }

    /// The encoded record stored under an encoded key (read committed: see
    /// [`Dataset::committed_entry`]).
    pub fn get_raw(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        Ok(self.committed_entry(key)?.map(|e| e.value))
    }

    /// The live entry of `key` in the primary index, committed.
    ///
    /// Read, then check: the entry is returned only if, after reading it, no
    /// writer holds the key (an instant S lock is granted) and no transaction
    /// aborted since before the read. Otherwise the read may have seen a
    /// writer's uncommitted version (still in flight, or undone since): wait
    /// the writer out and read again. Taking the lock *before* reading is not
    /// enough: a writer can lock the key and write between the grant and the
    /// read (`tests/concurrent_queries.rs` caught exactly that). Aborts bump
    /// the epoch after undoing and before releasing their locks.
    pub(crate) fn committed_entry(&self, key: &[u8]) -> Result<Option<Entry>> {
        let name = LockManager::name(self.id, key);
        loop {
            let epoch = self.txn.abort_epoch();
            let e = self.partition_of(key).primary.get_entry(key)?;
            if self.txn.locks.try_s_instant(name) && self.txn.abort_epoch() == epoch {
                return Ok(e.filter(|e| !e.is_delete()));
            }
            self.txn.locks.lock_s_instant(name);
        }
    }

    /// Records with primary keys within the bounds, in key order.
    pub fn scan(self: &Arc<Self>, lo: Bound<&[Value]>, hi: Bound<&[Value]>) -> Result<DatasetScan> {
        let enc = |b: Bound<&[Value]>| -> Result<Bound<Vec<u8>>> {
            Ok(match b {
                Bound::Included(k) => Bound::Included(self.encode_pk_prefix(k)?),
                Bound::Excluded(k) => Bound::Excluded(self.encode_pk_prefix(k)?),
                Bound::Unbounded => Bound::Unbounded,
            })
        };
        let lo = enc(lo)?;
        let hi = enc(hi)?;
        self.scan_raw(lo, hi)
    }

    /// Encode a key or a key prefix (fewer fields than the key) for scans.
    /// The exclusive upper bound of all keys extending a prefix is
    /// [`value::prefix_upper_bound`] of it.
    pub fn encode_pk_prefix(&self, pk: &[Value]) -> Result<Vec<u8>> {
        if pk.len() > self.def.primary_key.len() {
            return Err(Error::invalid(
                None,
                "scan bound has more fields than the primary key",
            ));
        }
        let mut key = Vec::new();
        for (name, v) in self.def.primary_key.iter().zip(pk) {
            let v = match self.def.field_type(name) {
                Some(t) => value::coerce(name, t, v.clone())?,
                None => v.clone(),
            };
            value::encode_key_part(&v, &mut key)?;
        }
        Ok(key)
    }

    /// Scan by encoded key bounds.
    pub fn scan_raw(
        self: &Arc<Self>,
        lo: Bound<Vec<u8>>,
        hi: Bound<Vec<u8>>,
    ) -> Result<DatasetScan> {
        let lo_ref = lo.as_ref().map(Vec::as_slice);
        let epoch = self.txn.abort_epoch();
        let scans = self.partition_scans(lo_ref, &hi)?;
        DatasetScan::new(scans, self.clone(), hi, epoch)
    }

    fn partition_scans(&self, lo: Bound<&[u8]>, hi: &Bound<Vec<u8>>) -> Result<Vec<TreeScan>> {
        let mut scans = Vec::with_capacity(self.partitions.len());
        for p in &self.partitions {
            let snap = p.primary.snapshot();
            scans.push(p.primary.scan(&snap, lo, hi.clone(), false)?);
        }
        Ok(scans)
    }

    /// Merge every index of every partition down to one component.
    pub fn compact(&self) -> Result<()> {
        self.flush()?;
        self.bg.wait_idle();
        for t in self.trees() {
            t.compact_all()?;
        }
        Ok(())
    }

    /// Build a new secondary index over the existing records (bulk load of
    /// sorted entries) and start maintaining it. Writers are paused for the
    /// duration (they hold the DDL lock shared). Returns the definition with
    /// its assigned id; the caller records it in the catalog.
    pub(crate) fn add_index(&self, mut def: IndexDef) -> Result<IndexDef> {
        def.validate()?;
        if !def.kind.imp().has_tree() {
            return self.add_embedded_index(def);
        }
        let _ddl = self.ddl.write();
        let cur = self.indexes.read().clone();
        if cur.defs.iter().any(|d| d.name == def.name) {
            return Err(Error::IndexExists {
                dataset: self.def.name.clone(),
                index: def.name,
            });
        }
        // Never reuse an id: log records of a dropped index may still be in
        // the log (the caller passes the highest id ever used in `def.id`).
        def.id = cur.defs.iter().map(|d| d.id).max().unwrap_or(0).max(def.id) + 1;
        // Every record below this LSN is in the primary; log records for the
        // new index only come after it.
        let mark = self.txn.wal.end_lsn();
        let mut trees = Vec::with_capacity(self.partitions.len());
        let mut count_def = self.def.clone();
        count_def.indexes = cur.defs.clone();
        count_def.indexes.push(def.clone());
        for (p, part) in self.partitions.iter().enumerate() {
            let pdir = self.dir.join(format!("p{p}")).join(&def.name);
            if pdir.exists() {
                std::fs::remove_dir_all(&pdir).map_err(|e| Error::io(&pdir, e))?;
            }
            let tree = Self::open_index_tree(
                &count_def,
                &self.dir,
                p as u32,
                &def,
                &self.cache,
                self.sync,
            )?;
            let snap = part.primary.snapshot();
            let mut scan = part
                .primary
                .scan(&snap, Bound::Unbounded, Bound::Unbounded, false)?;
            let mut keys: Vec<(Vec<u8>, u64, Vec<u8>)> = Vec::new();
            while let Some((pk, e)) = scan.next_entry()? {
                let rec = value::decode_value(&e.value)?;
                let ents = def.entries(&rec, &pk).map_err(|err| {
                    let shown = value::decode_key(&pk)
                        .map(|k| value::key_to_string(&k))
                        .unwrap_or_default();
                    Error::invalid(
                        None,
                        format!("cannot build index `{}`: record {shown}: {err}", def.name),
                    )
                })?;
                keys.extend(ents.into_iter().map(|(k, v)| (k, e.seq, v)));
            }
            if def.kind.posting_lists() {
                // (value, seq, pk) postings -> one list per value.
                keys = crate::index::recency::postings::group_for_bulk(keys);
            }
            keys.sort_unstable_by(|a, b| a.0.cmp(&b.0));
            keys.dedup_by(|a, b| a.0 == b.0);
            tree.bulk_load(
                keys.into_iter().map(|(k, seq, v)| (k, Entry::put(seq, v))),
                mark,
            )?;
            tree.set_log_sync(self.txn.clone());
            trees.push(tree);
        }
        for t in &trees {
            self.group.add_tree(t.clone());
            self.bg.schedule_merge(t.clone());
        }
        let mut next = IndexSet {
            defs: cur.defs.clone(),
            trees: cur.trees.clone(),
        };
        next.defs.push(def.clone());
        next.trees.push(trees);
        *self.indexes.write() = Arc::new(next);
        Ok(def)
    }

    /// Stop maintaining a secondary index and delete its files.
    pub(crate) fn remove_index(&self, name: &str) -> Result<()> {
        let _ddl = self.ddl.write();
        let cur = self.indexes.read().clone();
        let Some(i) = cur.defs.iter().position(|d| d.name == name) else {
            return Err(Error::NoSuchIndex {
                dataset: self.def.name.clone(),
                index: name.to_owned(),
            });
        };
        let mut next = IndexSet {
            defs: cur.defs.clone(),
            trees: cur.trees.clone(),
        };
        next.defs.remove(i);
        let trees = next.trees.remove(i);
        self.sync_recency_hooks(&next.defs);
        *self.indexes.write() = Arc::new(next);
        for t in &trees {
            self.group.remove_tree(t);
        }
        self.bg.wait_idle();
        drop(trees);
        drop(cur);
        for p in 0..self.partitions.len() {
            let pdir = self.dir.join(format!("p{p}")).join(name);
            if pdir.exists() {
                std::fs::remove_dir_all(&pdir).map_err(|e| Error::io(&pdir, e))?;
            }
        }
        Ok(())
    }

    fn index_by_name(&self, name: &str) -> Result<(usize, Arc<IndexSet>)> {
        let set = self.indexes.read().clone();
        match set.defs.iter().position(|d| d.name == name) {
            Some(i) => Ok((i, set)),
            None => Err(Error::NoSuchIndex {
                dataset: self.def.name.clone(),
                index: name.to_owned(),
            }),
        }
    }

    /// Encoded byte bounds of the index entries whose secondary key (or key
    /// prefix, for composite indexes) lies within `lo`..`hi`.
    fn index_bounds(
        &self,
        d: &IndexDef,
        lo: Bound<&[Value]>,
        hi: Bound<&[Value]>,
    ) -> Result<KeyRange> {
        let enc = |vals: &[Value]| -> Result<Vec<u8>> {
            if vals.len() > d.fields.len() {
                return Err(Error::invalid(
                    None,
                    format!(
                        "index `{}` has {} field(s), the bound has {}",
                        d.name,
                        d.fields.len(),
                        vals.len()
                    ),
                ));
            }
            let mut out = Vec::new();
            for (f, v) in d.fields.iter().zip(vals) {
                let v = match self.def.field_type(f) {
                    Some(t) => value::coerce(f, t, v.clone())?,
                    None => v.clone(),
                };
                value::encode_key_part(&v, &mut out)?;
            }
            Ok(out)
        };
        let lo = match lo {
            Bound::Included(v) => Bound::Included(enc(v)?),
            Bound::Excluded(v) => Bound::Included(value::prefix_upper_bound(&enc(v)?)),
            Bound::Unbounded => Bound::Unbounded,
        };
        let hi = match hi {
            Bound::Included(v) => Bound::Excluded(value::prefix_upper_bound(&enc(v)?)),
            Bound::Excluded(v) => Bound::Excluded(enc(v)?),
            Bound::Unbounded => Bound::Unbounded,
        };
        Ok((lo, hi))
    }

    /// Raw index entries (entry key) within bounds, across partitions.
    fn index_entries(
        &self,
        set: &IndexSet,
        i: usize,
        lo: &Bound<Vec<u8>>,
        hi: &Bound<Vec<u8>>,
    ) -> Result<Vec<Vec<u8>>> {
        let lo_ref = lo.as_ref().map(Vec::as_slice);
        let mut out = Vec::new();
        for t in &set.trees[i] {
            let snap = t.snapshot();
            let mut sc = t.scan(&snap, lo_ref, hi.clone(), false)?;
            while let Some((k, _)) = sc.next_entry()? {
                out.push(k);
            }
        }
        // Partitions each return their entries in order; merge them.
        if set.trees[i].len() > 1 {
            out.sort_unstable();
        }
        Ok(out)
    }

    fn in_bounds(k: &[u8], lo: &Bound<Vec<u8>>, hi: &Bound<Vec<u8>>) -> bool {
        let above = match lo {
            Bound::Included(l) => k >= l.as_slice(),
            Bound::Excluded(l) => k > l.as_slice(),
            Bound::Unbounded => true,
        };
        let below = match hi {
            Bound::Included(h) => k <= h.as_slice(),
            Bound::Excluded(h) => k < h.as_slice(),
            Bound::Unbounded => true,
        };
        above && below
    }

    /// Fetch the record of `pk` through the primary (read committed) and keep
    /// it if its current secondary key still satisfies the bounds.
    fn validate_hit(
        &self,
        d: &IndexDef,
        pk: &[u8],
        lo: &Bound<Vec<u8>>,
        hi: &Bound<Vec<u8>>,
    ) -> Result<Option<Value>> {
        let Some(bytes) = self.get_raw(pk)? else {
            return Ok(None);
        };
        let rec = value::decode_value(&bytes)?;
        match d.entry_key(&rec, pk).ok().flatten() {
            Some(k) if Self::in_bounds(&k, lo, hi) => Ok(Some(rec)),
            _ => Ok(None),
        }
    }

    /// Resolve an index by name, encode the bounds and collect the matching
    /// entry keys from every partition (shared by both access paths).
    fn index_query(
        &self,
        index: &str,
        lo: Bound<&[Value]>,
        hi: Bound<&[Value]>,
    ) -> Result<IndexQuery> {
        let (i, set) = self.index_by_name(index)?;
        if !set.defs[i].kind.is_btree() {
            return Err(Error::invalid(
                None,
                format!(
                    "index `{index}` is a {} index, not a btree; query it with `Dataset::query`",
                    set.defs[i].kind
                ),
            ));
        }
        let (lo, hi) = self.index_bounds(&set.defs[i], lo, hi)?;
        let entries = self.index_entries(&set, i, &lo, &hi)?;
        Ok((set, i, lo, hi, entries))
    }

    /// Records whose indexed field(s) lie within `lo`..`hi`, through the
    /// secondary index `index` (non-index-only path): collect the candidate
    /// primary keys, sort them, fetch each from the primary index under an
    /// instant lock and re-check the predicate. At most `limit` records, in
    /// primary-key order.
    pub fn index_range(
        &self,
        index: &str,
        lo: Bound<&[Value]>,
        hi: Bound<&[Value]>,
        limit: Option<usize>,
    ) -> Result<Vec<Value>> {
        let (set, i, lo, hi, entries) = self.index_query(index, lo, hi)?;
        let d = &set.defs[i];
        let mut pks: Vec<Vec<u8>> = entries
            .into_iter()
            .map(|k| d.split_entry(&k).map(|(_, pk)| pk))
            .collect::<Result<_>>()?;
        pks.sort_unstable();
        pks.dedup();
        let mut out = Vec::new();
        for pk in pks {
            if limit.is_some_and(|l| out.len() >= l) {
                break;
            }
            if let Some(rec) = self.validate_hit(d, &pk, &lo, &hi)? {
                out.push(rec);
            }
        }
        Ok(out)
    }

    /// Index-only query: (secondary key, primary key) pairs within bounds,
    /// without fetching records when possible. Each hit's key is tried with an
    /// instant S lock; granted (and no abort meanwhile) means the entry is
    /// committed and is returned directly; refused means a writer is in
    /// flight, and the hit is validated through the primary index.
    pub fn index_range_keys(
        &self,
        index: &str,
        lo: Bound<&[Value]>,
        hi: Bound<&[Value]>,
        limit: Option<usize>,
    ) -> Result<Vec<IndexHit>> {
        let epoch = self.txn.abort_epoch();
        let (set, i, lo, hi, entries) = self.index_query(index, lo, hi)?;
        let d = &set.defs[i];
        let mut out = Vec::new();
        let mut seen = std::collections::HashSet::new();
        for k in entries {
            if limit.is_some_and(|l| out.len() >= l) {
                break;
            }
            let (sk, pk) = d.split_entry(&k)?;
            let name = LockManager::name(self.id, &pk);
            if self.txn.locks.try_s_instant(name) && self.txn.abort_epoch() == epoch {
                if seen.insert(pk.clone()) {
                    out.push(IndexHit {
                        sk,
                        pk: value::decode_key(&pk)?,
                    });
                }
                continue;
            }
            if let Some(rec) = self.validate_hit(d, &pk, &lo, &hi)?
                && let Some(sk) = d.key_values(&rec)?
                && seen.insert(pk.clone())
            {
                out.push(IndexHit {
                    sk,
                    pk: value::decode_key(&pk)?,
                });
            }
        }
        Ok(out)
    }

    /// Flush all in-memory components and wait for the flushes.
    pub fn flush(&self) -> Result<()> {
        self.group.flush_all()
    }

    /// Every LSM tree of the dataset: primaries, then each secondary index.
    pub fn trees(&self) -> Vec<Arc<LsmTree>> {
        let mut v: Vec<Arc<LsmTree>> = self.partitions.iter().map(|p| p.primary.clone()).collect();
        for t in &self.indexes.read().trees {
            v.extend(t.iter().cloned());
        }
        v
    }

    pub fn stats(&self) -> DatasetStats {
        DatasetStats {
            name: self.def.name.clone(),
            partitions: self.def.partitions,
            memory_budget: self.def.memory_budget,
            primary_key: self.def.primary_key.clone(),
            indexes: self.trees().iter().map(|t| t.stats()).collect(),
        }
    }
}

/// Decode a stored record, naming the problem if it is corrupt.
pub fn decode_stored(bytes: &[u8]) -> Result<Value> {
    value::decode_value(bytes)
}

struct ScanHead {
    key: Vec<u8>,
    value: Vec<u8>,
    src: usize,
}
impl PartialEq for ScanHead {
    fn eq(&self, o: &Self) -> bool {
        self.key == o.key
    }
}
impl Eq for ScanHead {}
impl PartialOrd for ScanHead {
    fn partial_cmp(&self, o: &Self) -> Option<CmpOrdering> {
        Some(self.cmp(o))
    }
}
impl Ord for ScanHead {
    fn cmp(&self, o: &Self) -> CmpOrdering {
        o.key.cmp(&self.key)
    }
}

/// An ordered scan over all partitions of a dataset. Yields decoded records;
/// [`DatasetScan::next_raw`] yields encoded (key, record) pairs.
pub struct DatasetScan {
    scans: Vec<TreeScan>,
    heap: BinaryHeap<ScanHead>,
    ds: Arc<Dataset>,
    hi: Bound<Vec<u8>>,
    /// Abort epoch sampled before any buffered entry was read.
    epoch: u64,
}

impl DatasetScan {
    fn new(scans: Vec<TreeScan>, ds: Arc<Dataset>, hi: Bound<Vec<u8>>, epoch: u64) -> Result<Self> {
        let mut s = DatasetScan {
            scans,
            heap: BinaryHeap::new(),
            ds,
            hi,
            epoch,
        };
        s.fill_heap()?;
        Ok(s)
    }

    /// Re-read from `from` (inclusive) with fresh cursors.
    fn restart(&mut self, from: &[u8]) -> Result<()> {
        self.epoch = self.ds.txn.abort_epoch();
        self.scans = self.ds.partition_scans(Bound::Included(from), &self.hi)?;
        self.heap.clear();
        self.fill_heap()
    }

    fn fill_heap(&mut self) -> Result<()> {
        let scans = &mut self.scans;
        let heap = &mut self.heap;
        for (i, s) in scans.iter_mut().enumerate() {
            if let Some((key, e)) = s.next_entry()? {
                heap.push(ScanHead {
                    key,
                    value: e.value,
                    src: i,
                });
            }
        }
        Ok(())
    }

    /// Next (encoded key, encoded record). Read committed: a record whose key
    /// is X-locked by a transaction that has not committed is re-read after
    /// the lock is released (it may then be gone or changed).
    pub fn next_raw(&mut self) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        loop {
            let Some((k, v)) = self.next_unlocked()? else {
                return Ok(None);
            };
            let name = LockManager::name(self.ds.id, &k);
            let granted = self.ds.txn.locks.try_s_instant(name);
            if granted && self.ds.txn.abort_epoch() == self.epoch {
                return Ok(Some((k, v)));
            }
            // A writer is in flight (wait for it), or an abort may have undone
            // something we buffered: re-read from this key.
            if !granted {
                self.ds.txn.locks.lock_s_instant(name);
            }
            self.restart(&k)?;
        }
    }

    fn next_unlocked(&mut self) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        let Some(top) = self.heap.pop() else {
            return Ok(None);
        };
        if let Some((key, e)) = self.scans[top.src].next_entry()? {
            self.heap.push(ScanHead {
                key,
                value: e.value,
                src: top.src,
            });
        }
        Ok(Some((top.key, top.value)))
    }
}

impl Iterator for DatasetScan {
    type Item = Result<Value>;
    fn next(&mut self) -> Option<Result<Value>> {
        match self.next_raw() {
            Ok(Some((_, v))) => Some(decode_stored(&v)),
            Ok(None) => None,
            Err(e) => Some(Err(e)),
        }
    }
}
