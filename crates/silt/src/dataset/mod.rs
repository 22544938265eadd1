//! Datasets: records with a primary key, stored in P hash partitions, each
//! with its own primary LSM index. DML (insert / upsert / delete), point
//! lookups and ordered scans that fan out over the partitions.

use crate::error::{Error, Result};
use crate::index::{IndexDef, ReconcileOption};
use crate::lsm::background::Background;
use crate::lsm::memtable::MemTable;
use crate::lsm::tree::{Scheduler, TreeScan};
use crate::lsm::{LsmTree, MemoryGroup, TreeConfig, TreeKind, TreeStats};
use crate::schema::{DatasetDef, FieldDefault, MAX_RECORD_BYTES};
use crate::storage::{BlockCache, Entry, EntryKind, EntryRef, WriterOptions};
use crate::txn::ctx::TxnContext;
use crate::txn::{LockManager, LogEntry, LogOp, LogRecord, UpdateRef};
use crate::value::{self, Value};
use serde::Serialize;
use std::cmp::Ordering as CmpOrdering;
use std::collections::{BinaryHeap, HashMap};
use std::ops::Bound;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use xxhash_rust::xxh3::xxh3_64;

mod ddl;
mod estimate;
mod index_read;
pub(crate) mod links;
pub(crate) mod matview;
mod prepared;
mod query;
mod read;
mod recency;
mod row;
mod runs;
pub(crate) mod sequence;
mod transaction;
pub(crate) mod ttl;
mod unique;
mod valuelist;
mod write;
pub use index_read::IndexHit;
pub use prepared::PreparedBatch;
pub use query::{
    JoinPredicate, JoinResults, Query, QueryHit, QueryOptions, QueryResults, QueryStats,
};
pub use read::DatasetScan;
pub use recency::ZoneMapReads;
pub use row::RowShape;
pub use runs::{MemRead, PartitionRuns, runs_disjoint};
pub use sequence::SequenceValues;
pub use transaction::{CommitInfo, Transaction, TxnLimits, TxnQuery, TxnScan};
pub use ttl::{SweepReport, TtlStats};
pub use valuelist::{ListItem, ListRead};
use write::TxnWork;
pub use write::{BatchOptions, BatchReport, PendingAck, WriteMode};

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

/// An open dataset. Cheap to share (`Arc<Dataset>`), safe to use from many threads.
pub struct Dataset {
    /// The definition; its declared fields change with
    /// [`Dataset::redefine`] (SQL's `ALTER TABLE`), the rest never.
    def: parking_lot::RwLock<Arc<DatasetDef>>,
    name: String,
    id: u32,
    txn: Arc<TxnContext>,
    dir: PathBuf,
    partitions: Vec<Partition>,
    group: Arc<MemoryGroup>,
    bg: Arc<Background>,
    seq: Arc<AtomicU64>,
    indexes: parking_lot::RwLock<Arc<IndexSet>>,
    /// Writers hold it shared from checking their records' definition to
    /// their commit; index DDL and `ALTER` ([`crate::Alteration`]) exclusive.
    ddl: parking_lot::RwLock<()>,
    cache: Arc<BlockCache>,
    sync: bool,
    /// Attributes of the embedded indexes, shared by the primaries' hooks.
    embedded: Arc<crate::index::recency::EmbeddedFields>,
    /// The counters of fields whose default is a sequence.
    sequences: sequence::Sequences,
    /// How records expire, if they do (`ttl`).
    ttl: parking_lot::RwLock<Option<Arc<ttl::Ttl>>>,
    /// Foreign keys it takes part in (`links`); `linked` says whether
    /// there are any without taking the lock.
    links: parking_lot::RwLock<Option<Arc<links::Links>>>,
    linked: std::sync::atomic::AtomicBool,
}

/// Counters of a dataset, per index and partition.
#[derive(Clone, Debug, Serialize)]
pub struct DatasetStats {
    pub name: String,
    pub partitions: u32,
    pub memory_budget: u64,
    pub primary_key: Vec<String>,
    pub indexes: Vec<TreeStats>,
    /// The ttl's counters, if records expire.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ttl: Option<TtlStats>,
}

/// The remote tier of index `index` of partition `p`, if the dataset keeps
/// levels in a bucket: the index's prefix is the dataset directory's name,
/// the partition and the index, as on the local disk.
fn remote_tier(
    def: &DatasetDef,
    dir: &Path,
    p: u32,
    index: &str,
) -> Result<Option<crate::storage::remote::RemoteTier>> {
    let Some(r) = &def.remote else {
        return Ok(None);
    };
    let name = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| def.name.clone());
    Ok(Some(crate::storage::remote::RemoteTier {
        store: crate::storage::remote::open(&r.url)?,
        prefix: format!("{name}/p{p}/{index}"),
        from_level: r.from_level,
        counters: Default::default(),
        column_images: index == "primary",
    }))
}

/// Delete the objects a dataset keeps in its bucket under directory name
/// `dir_name` (all of them, or index `index`'s); nothing without a bucket.
pub(crate) fn remove_remote(def: &DatasetDef, dir_name: &str, index: Option<&str>) -> Result<()> {
    let Some(r) = &def.remote else {
        return Ok(());
    };
    let store = crate::storage::remote::open(&r.url)?;
    match index {
        None => {
            crate::storage::remote::remove_prefix(store.as_ref(), dir_name)?;
        }
        Some(ix) => {
            for p in 0..def.partitions {
                let prefix = format!("{dir_name}/p{p}/{ix}");
                crate::storage::remote::remove_prefix(store.as_ref(), &prefix)?;
            }
        }
    }
    Ok(())
}

/// Refuse a new dataset whose bucket prefix already holds objects: they
/// belong to another database writing the same prefix, or to a dataset
/// whose drop was interrupted, and opening would take them over.
pub(crate) fn check_remote_empty(def: &DatasetDef) -> Result<()> {
    let Some(r) = &def.remote else {
        return Ok(());
    };
    let store = crate::storage::remote::open(&r.url)?;
    let found = store.list(&def.dir_name())?;
    if let Some(o) = found.first() {
        return Err(Error::Config(format!(
            "{}/{} already holds {} object(s) (e.g. `{}`): another database uses this prefix, or a dataset of this name was dropped without its objects being removed; choose another URL prefix, or delete those objects first",
            r.url.trim_end_matches('/'),
            def.dir_name(),
            found.len(),
            o.key
        )));
    }
    Ok(())
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
                remote: remote_tier(&def, dir, p, "primary")?,
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
        let expiry = ttl::Ttl::open(&def, dir)?;
        let ds = Arc::new(Dataset {
            ttl: parking_lot::RwLock::new(expiry),
            id: def.id,
            txn,
            name: def.name.clone(),
            def: parking_lot::RwLock::new(Arc::new(def)),
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
            sequences: sequence::Sequences::open(dir)?,
            links: parking_lot::RwLock::new(None),
            linked: std::sync::atomic::AtomicBool::new(false),
        });
        ds.sync_recency_hooks(&ds.def().indexes);
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
            remote: remote_tier(def, dir, p, &idef.name)?,
        };
        let tree = LsmTree::open(cfg, cache.clone())?;
        idef.kind.imp().install_hooks(idef, &tree);
        Ok(tree)
    }

    pub fn name(&self) -> &str {
        &self.name
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

    /// The definition as it is now (a snapshot: `ALTER TABLE` may replace
    /// it).
    pub fn def(&self) -> Arc<DatasetDef> {
        self.def.read().clone()
    }

    /// Replace the declared fields, `NOT NULL` and defaults (the caller,
    /// [`crate::Database::alter_dataset`], has checked nothing else
    /// changes and recorded it in the catalog).
    pub(crate) fn redefine(&self, def: Arc<DatasetDef>) {
        *self.def.write() = def;
    }

    /// Hold off every write to the dataset (and wait for those under way):
    /// index DDL and [`crate::Alteration`].
    pub(crate) fn ddl_write(&self) -> parking_lot::RwLockWriteGuard<'_, ()> {
        self.ddl.write()
    }

    /// Refuse records prepared under a definition `ALTER TABLE` has since
    /// replaced ([`Error::Altered`]). The caller holds the DDL lock shared,
    /// so the definition cannot change before its records are applied.
    pub(super) fn check_shape(&self, prepared_under: &Arc<DatasetDef>) -> Result<()> {
        if Arc::ptr_eq(prepared_under, &self.def.read()) {
            Ok(())
        } else {
            Err(Error::Altered {
                dataset: self.name.clone(),
            })
        }
    }

    /// The name of the dataset's directory (and of its bucket prefix).
    pub(crate) fn dir_name(&self) -> String {
        self.dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| self.name.clone())
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

    /// A transaction over the datasets of this dataset's database, as
    /// [`crate::Database::begin`] makes (for layers that hold datasets
    /// rather than the database). After the database closes its commit
    /// fails.
    pub fn transaction(&self) -> Transaction {
        Transaction::new(self.txn.clone(), TxnLimits::default())
    }

    pub(crate) fn memory_group(&self) -> &Arc<MemoryGroup> {
        &self.group
    }

    /// Take `n` consecutive values of the sequence of field `field` (the
    /// default of a `SERIAL` or identity column, [`FieldDefault::Sequence`]),
    /// as its options in the catalog say. Never the same value twice, even
    /// across a crash.
    pub fn next_sequence(&self, field: &str, n: u64) -> Result<SequenceValues> {
        self.sequences
            .take(field, &self.def().sequence_def(field), n)
    }

    /// SQL's `setval(seq, value, called)` on `field`'s counter: the next
    /// value is `value` (`called` false) or the one after it (see
    /// `sequence.rs` for what a restart then does).
    pub fn set_sequence(&self, field: &str, value: i64, called: bool) -> Result<()> {
        self.sequences
            .set(field, &self.def().sequence_def(field), value, called)
    }

    /// The next value `field`'s counter would hand out.
    pub fn peek_sequence(&self, field: &str) -> i64 {
        self.sequences.peek(field, &self.def().sequence_def(field))
    }

    /// Field `to` continues the sequence of field `from` (a column being
    /// renamed; both have `from`'s options).
    pub fn copy_sequence(&self, from: &str, to: &str) -> Result<()> {
        self.sequences
            .copy(from, to, &self.def().sequence_def(from))
    }

    /// A truncated dataset's successor continues its sequences.
    pub(crate) fn continue_sequences(&self, from: &Dataset) -> Result<()> {
        self.sequences.continue_from(&from.sequences)
    }

    pub(crate) fn bump_seq(&self, seen: u64) {
        self.seq.fetch_max(seen + 1, Ordering::SeqCst);
    }

    /// Encode a primary key tuple, checking its arity and types.
    pub fn encode_pk(&self, pk: &[Value]) -> Result<Vec<u8>> {
        if pk.len() != self.def().primary_key.len() {
            return Err(Error::invalid(
                None,
                format!(
                    "dataset `{}` has a {}-field primary key ({}), got {} value(s)",
                    self.name,
                    self.def().primary_key.len(),
                    self.def().primary_key.join(", "),
                    pk.len()
                ),
            ));
        }
        let mut parts = Vec::with_capacity(pk.len());
        for (name, v) in self.def().primary_key.iter().zip(pk) {
            let v = match self.def().field_type(name) {
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
        self.prepare_under(&self.def(), record)
    }

    /// [`Dataset::prepare`] under definition `def`.
    pub(super) fn prepare_under(
        &self,
        def: &DatasetDef,
        record: Value,
    ) -> Result<(Vec<u8>, Vec<u8>)> {
        self.prepare_single(def, record).map(|(k, b, _)| (k, b))
    }

    /// [`Dataset::prepare_under`], also returning the record as encoded
    /// ([`Dataset::prepare_kept`]).
    pub(super) fn prepare_single(
        &self,
        def: &DatasetDef,
        record: Value,
    ) -> Result<(Vec<u8>, Vec<u8>, Value)> {
        let mut key = Vec::new();
        let (n, record) = self.prepare_kept(def, record, &mut key)?;
        let bytes = key.split_off(n);
        Ok((key, bytes, record))
    }

    /// [`Dataset::prepare`] appending the encoded key and then the encoded
    /// record to `out`; returns the key's length.
    pub(super) fn prepare_to(
        &self,
        def: &DatasetDef,
        record: Value,
        out: &mut Vec<u8>,
    ) -> Result<usize> {
        self.prepare_kept(def, record, out).map(|(n, _)| n)
    }

    /// [`Dataset::prepare_to`], also returning the record as encoded
    /// (coerced, defaults filled): a single write hands it to `apply`,
    /// which would otherwise decode the bytes again for the indexes.
    pub(super) fn prepare_kept(
        &self,
        def: &DatasetDef,
        record: Value,
        out: &mut Vec<u8>,
    ) -> Result<(usize, Value)> {
        let Value::Object(fields) = record else {
            return Err(Error::invalid(
                None,
                format!("a record must be an object, got {}", record.type_name()),
            ));
        };
        let mut out_fields = Vec::with_capacity(fields.len() + def.defaults.len());
        for (name, v) in fields {
            let v = match def.field_type(&name) {
                Some(t) => value::coerce(&name, t, v)?,
                None => v,
            };
            out_fields.push((name, v));
        }
        for (name, d) in &def.defaults {
            let given = out_fields.iter().find(|(n, _)| n == name).map(|(_, v)| v);
            match (given, d) {
                (Some(Value::Int(v)), FieldDefault::Sequence) => {
                    self.sequences.seen(name, &def.sequence_def(name), *v)?;
                }
                (Some(_), _) => {}
                (None, FieldDefault::Sequence) => {
                    let v = self.sequences.take(name, &def.sequence_def(name), 1)?;
                    out_fields.push((name.clone(), Value::Int(v.first)));
                }
                (None, _) => {
                    if let Some(t) = def.field_type(name) {
                        out_fields.push((name.clone(), d.value(name, t)?));
                    }
                }
            }
        }
        let record = Value::Object(out_fields);
        for (f, n) in &def.narrow {
            if let Some(v) = record.get(f) {
                n.check(f, v)?;
            }
        }
        for f in &def.not_null {
            if matches!(record.get(f), None | Some(Value::Null)) {
                return Err(Error::invalid(
                    Some(f),
                    "null value violates the NOT NULL constraint",
                ));
            }
        }
        if !def.checks.is_empty() {
            let Some(check) = self.txn.record_check() else {
                return Err(Error::Config(format!(
                    "dataset `{}` has CHECK constraints, which only the SQL layer evaluates; write it through SQL (siltdb's sql(), silt serve, silt sql)",
                    self.name
                )));
            };
            if let Some(constraint) = check
                .violated(def, &record)
                .map_err(|e| Error::Config(format!("checking `{}`: {e}", self.name)))?
            {
                return Err(Error::CheckViolation {
                    dataset: self.name.clone(),
                    constraint,
                });
            }
        }
        let mut parts = Vec::with_capacity(def.primary_key.len());
        for k in &def.primary_key {
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
        let start = out.len();
        value::encode_key(&parts, out)?;
        let key_len = out.len() - start;
        out.reserve(record.encoded_len_hint());
        value::encode_record(&record, out)?;
        check_record_size(out.len() - start - key_len)?;
        Ok((key_len, record))
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
            name: self.name.clone(),
            partitions: self.def().partitions,
            memory_budget: self.def().memory_budget,
            primary_key: self.def().primary_key.clone(),
            indexes: self.trees().iter().map(|t| t.stats()).collect(),
            ttl: self.ttl_stats(),
        }
    }
}

/// An encoded primary key as people read it (in error messages).
pub(crate) fn shown_key(key: &[u8]) -> String {
    value::decode_key(key)
        .map(|k| value::key_to_string(&k))
        .unwrap_or_else(|_| "?".into())
}

/// Decode a stored record, naming the problem if it is corrupt.
pub fn decode_stored(bytes: &[u8]) -> Result<Value> {
    value::decode_value(bytes)
}

/// Refuse an encoded record over [`MAX_RECORD_BYTES`].
fn check_record_size(size: usize) -> Result<()> {
    if size > MAX_RECORD_BYTES {
        return Err(Error::ValueTooLarge {
            size,
            limit: MAX_RECORD_BYTES,
        });
    }
    Ok(())
}
