//! Datasets: records with a primary key, stored in P hash partitions, each
//! with its own primary LSM index. DML (insert / upsert / delete), point
//! lookups and ordered scans that fan out over the partitions.

use crate::error::{Error, Result};
use crate::lsm::background::Background;
use crate::lsm::tree::{Scheduler, TreeScan};
use crate::lsm::{LsmTree, MemoryGroup, TreeConfig, TreeStats};
use crate::schema::{DatasetDef, MAX_RECORD_BYTES};
use crate::storage::{BlockCache, Entry, WriterOptions};
use crate::value::{self, Value};
use parking_lot::Mutex;
use serde::Serialize;
use std::cmp::Ordering as CmpOrdering;
use std::collections::BinaryHeap;
use std::ops::Bound;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use xxhash_rust::xxh3::xxh3_64;

/// Number of striped key latches serializing writers of the same primary key
/// (the lock manager of the transaction layer replaces them).
const KEY_STRIPES: usize = 1024;

struct Partition {
    primary: Arc<LsmTree>,
}

/// An open dataset. Cheap to share (`Arc<Dataset>`), safe to use from many threads.
pub struct Dataset {
    def: DatasetDef,
    dir: PathBuf,
    partitions: Vec<Partition>,
    group: Arc<MemoryGroup>,
    bg: Arc<Background>,
    seq: Arc<AtomicU64>,
    stripes: Vec<Mutex<()>>,
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
            };
            let primary = LsmTree::open(cfg, cache.clone())?;
            for c in primary.snapshot().disk.iter() {
                seq.fetch_max(c.meta().max_seq + 1, Ordering::SeqCst);
            }
            group.add_tree(primary.clone());
            partitions.push(Partition { primary });
        }
        let ds = Arc::new(Dataset {
            def,
            dir: dir.to_path_buf(),
            partitions,
            group,
            bg,
            seq,
            stripes: (0..KEY_STRIPES).map(|_| Mutex::new(())).collect(),
        });
        // Components inherited from before a restart may warrant a merge.
        for p in &ds.partitions {
            ds.bg.schedule_merge(p.primary.clone());
        }
        Ok(ds)
    }

    pub fn name(&self) -> &str {
        &self.def.name
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

    fn stripe(&self, key: &[u8]) -> &Mutex<()> {
        &self.stripes[(xxh3_64(key).rotate_left(17) % KEY_STRIPES as u64) as usize]
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
        let mut bytes = Vec::with_capacity(128);
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

    fn write(&self, tree: &LsmTree, key: &[u8], entry: Entry) -> Result<()> {
        tree.check_failed()?;
        let bytes = tree.put(key, entry, 0);
        self.group.charge(bytes)
    }

    /// Insert a new record; fails with [`Error::DuplicateKey`] if its primary
    /// key exists (checked newest to oldest component through bloom filters).
    pub fn insert(&self, record: Value) -> Result<()> {
        let (key, bytes) = self.prepare(record)?;
        let p = self.partition_of(&key);
        let _latch = self.stripe(&key).lock();
        if let Some(e) = p.primary.check_entry(&key)?
            && !e.is_delete()
        {
            let shown = value::decode_key(&key)
                .map(|k| value::key_to_string(&k))
                .unwrap_or_else(|_| "?".into());
            return Err(Error::DuplicateKey {
                dataset: self.def.name.clone(),
                key: shown,
            });
        }
        let seq = self.next_seq();
        self.write(&p.primary, &key, Entry::put(seq, bytes))
    }

    /// Insert or replace a record.
    pub fn upsert(&self, record: Value) -> Result<()> {
        let (key, bytes) = self.prepare(record)?;
        let p = self.partition_of(&key);
        let _latch = self.stripe(&key).lock();
        let seq = self.next_seq();
        self.write(&p.primary, &key, Entry::put(seq, bytes))
    }

    /// Delete the record with this primary key; returns whether it existed.
    pub fn delete(&self, pk: &[Value]) -> Result<bool> {
        let key = self.encode_pk(pk)?;
        let p = self.partition_of(&key);
        let _latch = self.stripe(&key).lock();
        match p.primary.check_entry(&key)? {
            Some(e) if !e.is_delete() => {
                let seq = self.next_seq();
                self.write(&p.primary, &key, Entry::delete(seq))?;
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    /// The record with this primary key, if any.
    pub fn get(&self, pk: &[Value]) -> Result<Option<Value>> {
        let key = self.encode_pk(pk)?;
        self.get_raw(&key)?.map(|b| decode_stored(&b)).transpose()
    }

    /// The encoded record stored under an encoded key.
    pub fn get_raw(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        let p = self.partition_of(key);
        Ok(p.primary
            .get_entry(key)?
            .filter(|e| !e.is_delete())
            .map(|e| e.value))
    }

    /// Records with primary keys within the bounds, in key order.
    pub fn scan(&self, lo: Bound<&[Value]>, hi: Bound<&[Value]>) -> Result<DatasetScan> {
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
    pub fn scan_raw(&self, lo: Bound<Vec<u8>>, hi: Bound<Vec<u8>>) -> Result<DatasetScan> {
        let lo_ref = match &lo {
            Bound::Included(k) => Bound::Included(k.as_slice()),
            Bound::Excluded(k) => Bound::Excluded(k.as_slice()),
            Bound::Unbounded => Bound::Unbounded,
        };
        let mut scans = Vec::with_capacity(self.partitions.len());
        for p in &self.partitions {
            let snap = p.primary.snapshot();
            scans.push(p.primary.scan(&snap, lo_ref, hi.clone(), false)?);
        }
        DatasetScan::new(scans)
    }

    /// Merge every index of every partition down to one component.
    pub fn compact(&self) -> Result<()> {
        self.flush()?;
        self.bg.wait_idle();
        for p in &self.partitions {
            p.primary.compact_all()?;
        }
        Ok(())
    }

    /// Flush all in-memory components and wait for the flushes.
    pub fn flush(&self) -> Result<()> {
        self.group.flush_all()
    }

    pub fn trees(&self) -> Vec<Arc<LsmTree>> {
        self.partitions.iter().map(|p| p.primary.clone()).collect()
    }

    pub fn stats(&self) -> DatasetStats {
        DatasetStats {
            name: self.def.name.clone(),
            partitions: self.def.partitions,
            memory_budget: self.def.memory_budget,
            primary_key: self.def.primary_key.clone(),
            indexes: self.partitions.iter().map(|p| p.primary.stats()).collect(),
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
}

impl DatasetScan {
    fn new(mut scans: Vec<TreeScan>) -> Result<Self> {
        let mut heap = BinaryHeap::new();
        for (i, s) in scans.iter_mut().enumerate() {
            if let Some((key, e)) = s.next_entry()? {
                heap.push(ScanHead {
                    key,
                    value: e.value,
                    src: i,
                });
            }
        }
        Ok(DatasetScan { scans, heap })
    }

    pub fn next_raw(&mut self) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
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
