//! The dataset side of the LevelDB++ recency indexes (`crate::index::recency`):
//! maintenance inside a record's transaction, the embedded index build, and
//! the `Query::Recent` access paths of every kind that answers it.

use super::query::{QueryHit, QueryStats};
use super::{Dataset, IndexSet, TxnWork};
use crate::error::{Error, Result};
use crate::index::kind::component_count;
use crate::index::query::KeyRange;
use crate::index::recency::embedded::{field_prefix, mem_bounds, parse_mem_key};
use crate::index::recency::lazy::parse_lazy_mem;
use crate::index::recency::postings::{self, Posting};
use crate::index::{IndexDef, IndexType, RecencyWrite, RecentPath};
use crate::lsm::LsmTree;
use crate::lsm::hooks::{MemSecondary, ObserverFactory, TreeHooks};
use crate::lsm::memtable::{MemIter, MemTable};
use crate::storage::block_filters::{FieldSpec, FilterSpec, attr_key, in_range};
use crate::storage::bloom::key_hash;
use crate::storage::component::Probe;
use crate::storage::{ComponentReader, Entry, EntryKind};
use crate::txn::LockManager;
use crate::value::{self, Value};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, HashSet};
use std::ops::Bound;
use std::sync::Arc;

mod column_read;

/// One recency-index change of a record write, planned (and, for eager
/// indexes, locked) before the write takes its sequence number.
pub(super) struct RecOp {
    i: usize,
    imp: &'static dyn IndexType,
    /// Encoded value of the record's previous version, if indexed.
    old: Option<Vec<u8>>,
    /// Encoded value of the new version, if indexed.
    new: Option<Vec<u8>>,
    /// The new version's (time, expiry), for value lists.
    time: Option<(i64, Option<i64>)>,
}

/// A hit: sequence number, encoded primary key, encoded record.
#[derive(PartialEq, Eq)]
struct Found {
    seq: u64,
    pk: Vec<u8>,
    value: Vec<u8>,
}

impl PartialOrd for Found {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Found {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        self.seq.cmp(&o.seq).then_with(|| self.pk.cmp(&o.pk))
    }
}

/// A record as stored: its encoded key and encoded value.
pub type StoredRecord = (Vec<u8>, Vec<u8>);

/// Candidate blocks of one component a brin or embedded search without a
/// limit splits between threads, at least this many each (a block holds
/// some tens of records): one per core, or for a remote component twice
/// that, up to [`REMOTE_READERS`].
const PAR_BLOCKS: usize = 64;

/// The readers of a remote component one search runs at once: a quarter of
/// the readahead windows a component keeps (`storage::remote`), leaving
/// room for other queries.
const REMOTE_READERS: usize = 4;

/// The k newest hits so far (all of them without k).
struct TopK {
    k: Option<usize>,
    heap: BinaryHeap<Reverse<Found>>,
}

impl TopK {
    fn new(k: Option<usize>) -> TopK {
        TopK {
            k,
            heap: BinaryHeap::new(),
        }
    }

    /// Once k hits are held: the sequence number a newer hit must exceed.
    fn threshold(&self) -> Option<u64> {
        match self.k {
            Some(k) if self.heap.len() >= k => self.heap.peek().map(|r| r.0.seq),
            _ => None,
        }
    }

    fn push(&mut self, f: Found) {
        self.heap.push(Reverse(f));
        if self.k.is_some_and(|k| self.heap.len() > k) {
            self.heap.pop();
        }
    }

    /// Newest first.
    fn into_sorted(self) -> Vec<Found> {
        let mut v: Vec<Found> = self.heap.into_iter().map(|r| r.0).collect();
        v.sort_by(|a, b| b.cmp(a));
        v
    }
}

/// A memtable or disk component of one partition, with the largest
/// sequence number it holds.
pub(super) struct Src {
    part: usize,
    pub(super) max_seq: u64,
    pub(super) kind: SrcKind,
}

pub(super) enum SrcKind {
    Mem(Arc<MemTable>),
    Disk(Arc<ComponentReader>),
}

/// The memtables and disk components of `trees` (one per partition), in
/// decreasing order of their largest sequence number.
pub(super) fn sources(trees: &[Arc<LsmTree>]) -> Vec<Src> {
    let mut out = Vec::new();
    for (p, t) in trees.iter().enumerate() {
        let snap = t.snapshot();
        for m in snap.mems {
            if let Some((_, hi)) = m.seq_range()
                && !m.is_empty()
            {
                out.push(Src {
                    part: p,
                    max_seq: hi,
                    kind: SrcKind::Mem(m),
                });
            }
        }
        for c in snap.disk.iter() {
            if c.meta().entries > 0 {
                out.push(Src {
                    part: p,
                    max_seq: c.meta().max_seq,
                    kind: SrcKind::Disk(c.clone()),
                });
            }
        }
    }
    out.sort_by_key(|s| Reverse(s.max_seq));
    out
}

/// What a component's zone maps or chunk index let a range query read.
struct Candidates {
    /// Data blocks, in block order.
    blocks: Vec<usize>,
    /// Through a chunk index: (chunks to read, all chunks, its form).
    chunks: Option<(usize, usize, crate::storage::brin::BrinForm)>,
}

/// The data blocks of component `c` whose zone map of `field` (and bloom
/// filter, for a point `point`), or whose chunk in the field's block range
/// index, admit values within `(lo, hi)`: none when the component's own
/// zone map misses the range; `None` when the component has no zone maps
/// of the field (every block is a candidate).
fn zone_candidates(
    c: &ComponentReader,
    field: &str,
    lo: Bound<&[u8]>,
    hi: Bound<&[u8]>,
    point: Option<u64>,
) -> Option<Candidates> {
    let ff = crate::lsm::kind::block_filters(c)?.field(field)?;
    let mut blocks = Vec::new();
    let chunks = if ff.may_overlap(c.aux(), lo, hi) {
        ff.candidate_blocks(c.aux(), lo, hi, point, &mut blocks)
    } else {
        ff.chunk_index()
            .filter(|_| !ff.has_block_entries())
            .map(|ix| (0, ix.len()))
    }
    .zip(ff.chunk_index())
    .map(|((read, all), ix)| (read, all, ix.form()));
    Some(Candidates { blocks, chunks })
}

/// What the range query of a brin or embedded index would read of the
/// primaries' disk components (`Dataset::zone_map_blocks`, for `EXPLAIN`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ZoneMapReads {
    /// Candidate data blocks.
    pub blocks_read: u64,
    /// All data blocks.
    pub blocks: u64,
    /// Chunks chosen by chunk indexes, and all their chunks (0, 0: none
    /// has one).
    pub chunks_read: u64,
    pub chunks: u64,
    /// The form of the chunk index (of the last component having one).
    pub form: Option<crate::storage::brin::BrinForm>,
    /// Chunks of the components' column images holding candidate blocks,
    /// and all their chunks (0, 0: no component has an image). A reader of
    /// a few fields reads these instead of the blocks.
    pub image_chunks_read: u64,
    pub image_chunks: u64,
}

/// Whether `v` lies above the upper bound `hi`.
fn above(v: &[u8], hi: Bound<&[u8]>) -> bool {
    match hi {
        Bound::Included(h) => v > h,
        Bound::Excluded(h) => v >= h,
        Bound::Unbounded => false,
    }
}

/// Whether a component's key range may hold keys within `(lo, hi)`.
fn keys_overlap(c: &ComponentReader, lo: Bound<&[u8]>, hi: Bound<&[u8]>) -> bool {
    let m = c.meta();
    !above(&m.min_key, hi)
        && match lo {
            Bound::Included(l) => m.max_key.as_slice() >= l,
            Bound::Excluded(l) => m.max_key.as_slice() > l,
            Bound::Unbounded => true,
        }
}

impl Dataset {
    /// Plan the recency-index changes of a write (`apply`, inside the
    /// record's transaction, before its sequence number is taken): validate
    /// the new record's field for every recency index, and take the value
    /// locks of eager indexes (held until the transaction ends, so that no
    /// posting list ever holds another transaction's uncommitted change).
    pub(super) fn recency_prepare(
        &self,
        txn: u64,
        idx: &IndexSet,
        old_rec: Option<&Value>,
        new_rec: Option<&Value>,
        expiring: bool,
        work: &mut TxnWork,
    ) -> Result<Vec<RecOp>> {
        let mut ops = Vec::new();
        let mut names = Vec::new();
        let ttl = if expiring { self.ttl() } else { None };
        for (i, d) in idx.defs.iter().enumerate() {
            let imp = d.kind.imp();
            if !imp.is_recency() || ttl.as_ref().is_some_and(|t| t.lists_expire_alike(d)) {
                continue;
            }
            let new = match new_rec {
                Some(r) => d.value_key(r)?,
                None => None,
            };
            if !imp.has_tree() {
                // Embedded: the primary's hooks index the record.
                continue;
            }
            let old = old_rec.and_then(|r| d.value_key(r).ok().flatten());
            if old.is_none() && new.is_none() {
                continue;
            }
            let time = match new_rec {
                Some(r) => imp.list_time(d, r)?,
                None => None,
            };
            if imp.locks_values() {
                for v in old.iter().chain(new.iter()) {
                    names.push(self.value_lock_name(b'E', d.id, v));
                }
            }
            ops.push(RecOp {
                i,
                imp,
                old,
                new,
                time,
            });
        }
        names.sort_unstable();
        names.dedup();
        for n in names {
            self.lock_value(txn, n, work)?;
        }
        Ok(ops)
    }

    /// Lock name of encoded value `v` of index `index_id`; `tag` keeps the
    /// names of eager (`E`) and unique (`U`) indexes apart.
    pub(super) fn value_lock_name(&self, tag: u8, index_id: u32, v: &[u8]) -> u64 {
        let mut k = Vec::with_capacity(v.len() + 6);
        k.extend_from_slice(&[0xFF, tag]);
        k.extend_from_slice(&index_id.to_be_bytes());
        k.extend_from_slice(v);
        LockManager::name(self.id, &k)
    }

    /// X-lock a value of an eager index until the transaction ends. Value
    /// locks are taken after the record's primary-key lock and in increasing
    /// name order; a transaction of several records that would have to wait
    /// for a name at or below one it holds could deadlock, and gives up.
    pub(super) fn lock_value(&self, txn: u64, name: u64, work: &mut TxnWork) -> Result<()> {
        let ctx = &self.txn;
        if !ctx.locks.try_lock_x(txn, name) {
            if work.value_lock_max.is_some_and(|m| name <= m) {
                return Err(Error::invalid(
                    None,
                    "a value of an eager or unique index is locked by another transaction while this one holds another (waiting could deadlock); the transaction was undone, retry it",
                ));
            }
            // Algorithm 1: make this thread's earlier commits durable (their
            // locks are then released) before blocking.
            ctx.wait_for_commits(txn)?;
            ctx.locks.lock_x(txn, name);
        }
        work.value_lock_max = Some(work.value_lock_max.map_or(name, |m| m.max(name)));
        Ok(())
    }

    /// Apply planned recency-index changes with the write's sequence number:
    /// every index entry is logged (UPDATE with the index id) and undone
    /// exactly like the other secondary index operations.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn recency_apply(
        &self,
        txn: u64,
        pidx: usize,
        seq: u64,
        key: &[u8],
        record: Option<&[u8]>,
        ops: Vec<RecOp>,
        idx: &IndexSet,
        work: &mut TxnWork,
    ) -> Result<()> {
        for op in ops {
            let tree = &idx.trees[op.i][pidx];
            let index_id = idx.defs[op.i].id;
            let writes = op.imp.recency_writes(&RecencyWrite {
                def: &idx.defs[op.i],
                tree,
                old: op.old.as_deref(),
                new: op.new.as_deref(),
                seq,
                pk: key,
                time: op.time,
                record,
            })?;
            for (k, e) in writes {
                self.write_secondary(tree, (txn, pidx, index_id), k, e, work)?;
            }
        }
        Ok(())
    }

    /// The embedded attributes of `defs`, each with the largest bits per key
    /// asked for it.
    fn embedded_spec(defs: &[IndexDef]) -> FilterSpec {
        let mut spec = FilterSpec::default();
        // The embedded indexes: recency kinds with no tree of their own.
        for d in defs
            .iter()
            .filter(|d| d.kind.is_recency() && !d.kind.imp().has_tree())
        {
            let Some(f) = d.fields.first() else {
                continue;
            };
            let i = match spec.fields.iter().position(|g| &g.name == f) {
                Some(i) => i,
                None => {
                    spec.fields.push(FieldSpec {
                        name: f.clone(),
                        bits_per_key: 0.0,
                        per_block: false,
                        chunks: None,
                    });
                    spec.fields.len() - 1
                }
            };
            let g = &mut spec.fields[i];
            g.bits_per_key = g.bits_per_key.max(d.bits_per_key());
            match d.chunks() {
                // One chunk layout per field (the first index's; creating
                // a second one that differs is refused).
                Some(c) => {
                    g.chunks.get_or_insert(c);
                }
                None => g.per_block = true,
            }
        }
        spec
    }

    /// Make the primaries' hooks cover the embedded indexes of `defs`
    /// (writers must be out: open, or under the DDL lock).
    pub(super) fn sync_recency_hooks(&self, defs: &[IndexDef]) {
        let spec = Self::embedded_spec(defs);
        let gained = self.embedded.set(spec.clone());
        if spec.fields.is_empty() {
            // Hooks installed earlier stay; with no attribute they do nothing.
            return;
        }
        for p in &self.partitions {
            if p.primary.hooks().mem_secondary.is_none() {
                let obs: Arc<dyn ObserverFactory> = self.embedded.clone();
                let mem: Arc<dyn MemSecondary> = self.embedded.clone();
                p.primary.set_hooks(TreeHooks {
                    observer: Some(obs),
                    mem_secondary: Some(mem),
                    ..TreeHooks::default()
                });
            } else if gained {
                p.primary.refresh_secondary();
            }
        }
    }

    /// Create an embedded index: no tree; from now on every flush and merge
    /// of the primary builds the field's block filters and every memtable
    /// indexes it; the components already on disk are rewritten with them
    /// (the bulk build), checking that every record's field can be indexed.
    pub(super) fn add_embedded_index(&self, mut def: IndexDef) -> Result<IndexDef> {
        let cur = self.indexes.read().clone();
        if cur.defs.iter().any(|d| d.name == def.name) {
            return Err(Error::IndexExists {
                dataset: self.name.clone(),
                index: def.name,
            });
        }
        // Never reuse an id: log records of a dropped index may still be in
        // the log (the caller passes the highest id ever used in `def.id`).
        def.id = cur.defs.iter().map(|d| d.id).max().unwrap_or(0).max(def.id) + 1;
        if let Some(c) = def.chunks()
            && let Some(other) = cur.defs.iter().find(|d| {
                d.fields.first() == def.fields.first() && d.chunks().is_some_and(|o| o != c)
            })
        {
            return Err(Error::Config(format!(
                "field `{}` already has the chunked brin index `{}` with another chunk size or form; a field has one chunk layout (drop `{}` first)",
                def.fields.first().map(String::as_str).unwrap_or_default(),
                other.name,
                other.name
            )));
        }
        let mut next = IndexSet {
            defs: cur.defs.clone(),
            trees: cur.trees.clone(),
        };
        next.defs.push(def.clone());
        next.trees.push(Vec::new());
        self.sync_recency_hooks(&next.defs);
        let field = def.fields.first().cloned().unwrap_or_default();
        let built: Result<()> = (|| {
            for p in &self.partitions {
                // A flush that started before the hooks were installed
                // installs its component first; the rewrite then covers it.
                p.primary.wait_flushed()?;
                // Components without what this index reads (a chunk index
                // cut and laid out as asked, or a zone map per block).
                let chunks = def.chunks();
                let needs = |c: &ComponentReader| {
                    c.meta().entries > 0
                        && crate::lsm::kind::block_filters(c)
                            .and_then(|f| f.field(&field))
                            .is_none_or(|f| match chunks {
                                Some(want) => f
                                    .chunk_index()
                                    .is_none_or(|ix| (ix.chunk_bytes(), ix.form()) != want),
                                None => !f.has_block_entries(),
                            })
                };
                let mut check = |k: &[u8], e: &Entry| -> Result<()> {
                    if e.is_delete() {
                        return Ok(());
                    }
                    let rec = value::decode_value(&e.value)?;
                    def.key_values(&rec).map(|_| ()).map_err(|err| {
                        let shown = value::decode_key(k)
                            .map(|k| value::key_to_string(&k))
                            .unwrap_or_default();
                        Error::invalid(
                            None,
                            format!("cannot build index `{}`: record {shown}: {err}", def.name),
                        )
                    })
                };
                p.primary.rewrite_components(&needs, &mut check)?;
            }
            Ok(())
        })();
        if let Err(e) = built {
            self.sync_recency_hooks(&cur.defs);
            return Err(e);
        }
        *self.indexes.write() = Arc::new(next);
        Ok(def)
    }

    /// The current version of a record (read committed: waits out a writer
    /// that holds it), `None` if absent or deleted.
    fn current_entry(&self, pk: &[u8]) -> Result<Option<Entry>> {
        self.committed_entry(pk)
    }

    /// `Query::Recent` through index `i`: the `k` most recent live records
    /// whose field lies within the bounds (`keys`: encoded), newest first.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn recent_query(
        &self,
        set: &IndexSet,
        i: usize,
        lo: &Bound<Vec<Value>>,
        hi: &Bound<Vec<Value>>,
        keys: &KeyRange,
        k: Option<usize>,
        epoch: u64,
        stats: &mut QueryStats,
    ) -> Result<Vec<QueryHit>> {
        let def = &set.defs[i];
        let (elo, ehi) = keys;
        if k == Some(0) {
            return Ok(Vec::new());
        }
        let point = point_key(def, lo, hi, elo);
        let Some(path) = def.kind.imp().recent_path() else {
            return Err(Error::invalid(
                None,
                format!("a {} index does not answer recency queries", def.kind),
            ));
        };
        let found = match path {
            RecentPath::Composite => {
                return self.recent_composite(set, i, elo, ehi, k, stats);
            }
            RecentPath::Scan => {
                return self.recent_by_scan(set, i, elo, ehi, k, stats);
            }
            RecentPath::Embedded => self.recent_embedded(def, elo, ehi, point, k, None, stats)?,
            RecentPath::Lazy => self.recent_lazy(set, i, elo, ehi, point, k, stats)?,
            RecentPath::Eager => self.recent_eager(set, i, elo, ehi, point, k, stats)?,
        };
        let field = def.fields.first().map(String::as_str).unwrap_or_default();
        self.read_committed(field, found, elo, ehi, epoch, stats)?
            .into_iter()
            .map(|(pk, rec)| {
                Ok(QueryHit {
                    pk: value::decode_key(&pk)?,
                    record: Some(value::decode_value(&rec)?),
                    distance_m: None,
                    stored: None,
                })
            })
            .collect()
    }

    /// A range query through the brin index `index`, its records as stored:
    /// `(key, record)` in the stored encodings, at most `limit` of them
    /// (the newest), otherwise in no particular order. What
    /// [`Dataset::query`] answers with `Query::Range`, without decoding a
    /// record: the SQL scan reads them in place, as it reads a primary
    /// scan's. `None` when `index` is not a brin index.
    ///
    /// With `fields`, a caller that reads only those top-level fields says
    /// so: a record may then hold just them (a remote component's hits come
    /// from its column image, which fetches only their columns).
    pub fn brin_range_raw(
        &self,
        index: &str,
        lo: &Bound<Vec<Value>>,
        hi: &Bound<Vec<Value>>,
        limit: Option<usize>,
        fields: Option<&[String]>,
    ) -> Result<Option<Vec<StoredRecord>>> {
        let epoch = self.txn.abort_epoch();
        let (i, set) = self.index_by_name(index)?;
        let def = &set.defs[i];
        if def.kind != crate::index::IndexKind::Brin {
            return Ok(None);
        }
        let query = crate::index::Query::Recent {
            lo: lo.clone(),
            hi: hi.clone(),
            k: limit,
        };
        let Some((elo, ehi)) = self.query_keys(def, &query)? else {
            return Err(Error::invalid(None, "a range query needs key bounds"));
        };
        if limit == Some(0) {
            return Ok(Some(Vec::new()));
        }
        let mut stats = QueryStats::default();
        let point = point_key(def, lo, hi, &elo);
        let found = self.recent_embedded(def, &elo, &ehi, point, limit, fields, &mut stats)?;
        let field = def.fields.first().map(String::as_str).unwrap_or_default();
        self.read_committed(field, found, &elo, &ehi, epoch, &mut stats)
            .map(Some)
    }

    /// What a range query through the embedded or brin index `index` would
    /// read of the primaries' disk components, judged by their zone maps
    /// or chunk indexes alone. For `EXPLAIN`.
    pub fn zone_map_blocks(
        &self,
        index: &str,
        lo: &Bound<Vec<Value>>,
        hi: &Bound<Vec<Value>>,
    ) -> Result<ZoneMapReads> {
        let (i, set) = self.index_by_name(index)?;
        let def = &set.defs[i];
        let (elo, ehi) = self.index_bounds(
            def,
            lo.as_ref().map(Vec::as_slice),
            hi.as_ref().map(Vec::as_slice),
        )?;
        let (lo, hi) = (
            elo.as_ref().map(Vec::as_slice),
            ehi.as_ref().map(Vec::as_slice),
        );
        let field = def.fields.first().map(String::as_str).unwrap_or_default();
        let mut r = ZoneMapReads::default();
        for p in &self.partitions {
            for c in p.primary.snapshot().disk.iter() {
                let n = c.num_blocks() as u64;
                r.blocks += n;
                let cands = zone_candidates(c, field, lo, hi, None);
                if let Some(img) = c.image() {
                    r.image_chunks += img.chunks().len() as u64;
                    r.image_chunks_read += match &cands {
                        Some(cs) => {
                            let mut bs = cs.blocks.clone();
                            bs.sort_unstable();
                            img.chunks_of(bs.into_iter())
                                .map_or(img.chunks().len(), |c| c.len())
                                as u64
                        }
                        None => img.chunks().len() as u64,
                    };
                }
                match cands {
                    Some(cands) => {
                        r.blocks_read += cands.blocks.len() as u64;
                        if let Some((read, all, form)) = cands.chunks {
                            r.chunks_read += read as u64;
                            r.chunks += all as u64;
                            r.form = Some(form);
                        }
                    }
                    None => r.blocks_read += n,
                }
            }
        }
        Ok(r)
    }

    /// Composite: every entry in the key range with its sequence number
    /// (= the record's last write: composite entries are rewritten by every
    /// write), newest first; each is validated through the primary, and the
    /// search stops once `k` valid hits are certain: a later candidate's
    /// record can only be newer than its entry if it was written after the
    /// scan began (read committed).
    fn recent_composite(
        &self,
        set: &IndexSet,
        i: usize,
        elo: &Bound<Vec<u8>>,
        ehi: &Bound<Vec<u8>>,
        k: Option<usize>,
        stats: &mut QueryStats,
    ) -> Result<Vec<QueryHit>> {
        let d = &set.defs[i];
        stats.components += set.trees[i].iter().map(|t| component_count(t)).sum::<u64>();
        let lo = elo.as_ref().map(Vec::as_slice);
        let split = d.tree_kind().pk;
        let mut cands: Vec<(u64, Vec<u8>)> = Vec::new();
        for t in &set.trees[i] {
            let snap = t.snapshot();
            let mut sc = t.scan(&snap, lo, ehi.clone(), false)?;
            while let Some((key, e)) = sc.next_entry()? {
                cands.push((e.seq, split.pk(&key)?.to_vec()));
            }
        }
        stats.candidates += cands.len() as u64;
        cands.sort_unstable_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
        let mut found: Vec<(u64, Vec<u8>, Value)> = Vec::new();
        let mut seen: HashSet<Vec<u8>> = HashSet::new();
        // The k largest sequence numbers found so far (min on top).
        let mut top: BinaryHeap<Reverse<u64>> = BinaryHeap::new();
        for (entry_seq, pk) in cands {
            if let Some(k) = k
                && top.len() >= k
                && top.peek().is_some_and(|Reverse(m)| *m > entry_seq)
            {
                break;
            }
            if !seen.insert(pk.clone()) {
                continue;
            }
            stats.fetched += 1;
            let Some(e) = self.current_entry(&pk)? else {
                continue;
            };
            let rec = value::decode_value(&e.value)?;
            if let Some(ek) = d.entry_key(&rec, &pk).ok().flatten()
                && crate::index::query::in_bounds(&ek, elo, ehi)
            {
                top.push(Reverse(e.seq));
                if k.is_some_and(|k| top.len() > k) {
                    top.pop();
                }
                found.push((e.seq, pk, rec));
            }
        }
        newest_hits(found, k)
    }

    /// Btree: every entry in the key range, validated through the primary,
    /// sorted by the record's sequence number (its entries keep the seq of
    /// the write that created them, so no early stop).
    fn recent_by_scan(
        &self,
        set: &IndexSet,
        i: usize,
        elo: &Bound<Vec<u8>>,
        ehi: &Bound<Vec<u8>>,
        k: Option<usize>,
        stats: &mut QueryStats,
    ) -> Result<Vec<QueryHit>> {
        let d = &set.defs[i];
        stats.components += set.trees[i].iter().map(|t| component_count(t)).sum::<u64>();
        let entries = self.index_entries(set, i, elo, ehi)?;
        stats.candidates += entries.len() as u64;
        let split = d.tree_kind().pk;
        let mut pks = Vec::with_capacity(entries.len());
        for e in &entries {
            pks.push(split.pk(e)?.to_vec());
        }
        pks.sort_unstable();
        pks.dedup();
        let mut found: Vec<(u64, Vec<u8>, Value)> = Vec::new();
        for pk in pks {
            stats.fetched += 1;
            let Some(e) = self.current_entry(&pk)? else {
                continue;
            };
            let rec = value::decode_value(&e.value)?;
            if let Some(ek) = d.entry_key(&rec, &pk).ok().flatten()
                && crate::index::query::in_bounds(&ek, elo, ehi)
            {
                found.push((e.seq, pk, rec));
            }
        }
        newest_hits(found, k)
    }

    /// Embedded: memtables' secondary sets and the components' block
    /// filters, newest sources first, with early stop (module doc of
    /// `crate::index::recency`).
    #[allow(clippy::too_many_arguments)]
    fn recent_embedded(
        &self,
        def: &IndexDef,
        elo: &Bound<Vec<u8>>,
        ehi: &Bound<Vec<u8>>,
        point: Option<Vec<u8>>,
        k: Option<usize>,
        fields: Option<&[String]>,
        stats: &mut QueryStats,
    ) -> Result<Vec<Found>> {
        let field = def.fields.first().map(String::as_str).unwrap_or_default();
        let (lo, hi) = (
            elo.as_ref().map(Vec::as_slice),
            ehi.as_ref().map(Vec::as_slice),
        );
        let prefix = field_prefix(field);
        let (mstart, mend) = mem_bounds(&prefix, lo, hi);
        let point_hash = point.as_deref().map(key_hash);
        let primaries: Vec<Arc<LsmTree>> =
            self.partitions.iter().map(|p| p.primary.clone()).collect();
        let srcs = sources(&primaries);
        let mut top = TopK::new(k);
        for (j, s) in srcs.iter().enumerate() {
            // Every source left holds only older sequence numbers.
            if top.threshold().is_some_and(|t| s.max_seq <= t) {
                break;
            }
            stats.components += 1;
            match &s.kind {
                SrcKind::Mem(m) => {
                    let thr = top.threshold();
                    let mut cands: Vec<Found> = Vec::new();
                    let keys =
                        m.secondary_range(&mstart, mend.as_ref().map(Vec::as_slice), usize::MAX);
                    for sk in keys {
                        let Some(rest) = sk.get(prefix.len()..) else {
                            continue;
                        };
                        let (a, seq, pk) = parse_mem_key(rest)?;
                        if !in_range(a, lo, hi) || thr.is_some_and(|t| seq <= t) {
                            continue;
                        }
                        // The memtable's version must still be this one.
                        match m.get(pk) {
                            Some(e) if e.seq == seq && !e.is_delete() => cands.push(Found {
                                seq,
                                pk: pk.to_vec(),
                                value: e.value,
                            }),
                            _ => {}
                        }
                    }
                    Self::admit(&srcs, j, cands, &mut top, stats)?;
                }
                SrcKind::Disk(c) => {
                    // (block, largest live sequence number in it)
                    let mut blocks: Vec<(usize, u64)> =
                        match zone_candidates(c, field, lo, hi, point_hash) {
                            Some(Candidates { blocks: bs, chunks }) => {
                                stats.blocks_pruned += (c.num_blocks() - bs.len()) as u64;
                                if let Some((read, all, _)) = chunks {
                                    stats.chunks_pruned += (all - read) as u64;
                                }
                                let f = crate::lsm::kind::block_filters(c);
                                bs.into_iter()
                                    .map(|b| (b, f.map_or(s.max_seq, |f| f.block_max_seq(b))))
                                    .collect()
                            }
                            // Written before the index existed and not yet
                            // rewritten: every block is a candidate.
                            None => (0..c.num_blocks()).map(|b| (b, s.max_seq)).collect(),
                        };
                    // With a limit, newest blocks first, so the search can
                    // stop inside the component too. Without one nothing
                    // stops it: blocks in order, split into equal runs
                    // searched side by side.
                    if k.is_some() {
                        blocks.sort_by_key(|&(b, seq)| (Reverse(seq), b));
                    } else {
                        blocks.sort_unstable_by_key(|&(b, _)| b);
                    }
                    // A caller reading a few fields of every hit reads a
                    // remote component's column image instead; an image
                    // that fails (the component is the truth) is reported
                    // and the component read after all.
                    if let (None, Some(fields), Some(img)) = (k, fields, c.image()) {
                        let (mut t, mut st) = (TopK::new(None), QueryStats::default());
                        match Self::image_blocks(
                            &srcs, j, c, img, &blocks, field, lo, hi, fields, &mut t, &mut st,
                        ) {
                            Ok(true) => {
                                top.heap.extend(t.heap);
                                stats.add(&st);
                                continue;
                            }
                            Ok(false) => {}
                            Err(e) => tracing::warn!("{e}; reading the component instead"),
                        }
                    }
                    // A remote component's readers wait on GETs: twice as
                    // many as cores keep both busy.
                    let threads = rayon::current_num_threads();
                    let threads = if c.is_remote() {
                        (2 * threads).min(REMOTE_READERS)
                    } else {
                        threads
                    };
                    let threads = threads.min(blocks.len() / PAR_BLOCKS);
                    if k.is_some() || threads < 2 {
                        Self::embedded_blocks(
                            &srcs, j, c, &blocks, field, lo, hi, &mut top, stats,
                        )?;
                    } else {
                        let srcs = &srcs;
                        let parts: Vec<Result<(TopK, QueryStats)>> = std::thread::scope(|sc| {
                            let handles: Vec<_> = blocks
                                .chunks(blocks.len().div_ceil(threads))
                                .map(|part| {
                                    sc.spawn(move || {
                                        let mut t = TopK::new(None);
                                        let mut st = QueryStats::default();
                                        Self::embedded_blocks(
                                            srcs, j, c, part, field, lo, hi, &mut t, &mut st,
                                        )?;
                                        Ok((t, st))
                                    })
                                })
                                .collect();
                            handles
                                .into_iter()
                                .map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
                                .collect()
                        });
                        for part in parts {
                            let (t, st) = part?;
                            top.heap.extend(t.heap);
                            stats.add(&st);
                        }
                    }
                }
            }
        }
        Ok(top.into_sorted())
    }

    /// Search the data blocks `blocks` (block, largest live sequence
    /// number in it) of source `j`, disk component `c`, in their order,
    /// for live records whose `field` lies in `(lo, hi)` and that are the
    /// newest version of their key. Without a limit (`top` keeps all), each
    /// run of adjacent blocks is announced first, which a remote component
    /// fetches in one GET (a run is a chunk of a block range index).
    #[allow(clippy::too_many_arguments)]
    fn embedded_blocks(
        srcs: &[Src],
        j: usize,
        c: &ComponentReader,
        blocks: &[(usize, u64)],
        field: &str,
        lo: Bound<&[u8]>,
        hi: Bound<&[u8]>,
        top: &mut TopK,
        stats: &mut QueryStats,
    ) -> Result<()> {
        let all = top.k.is_none();
        let mut announced = 0;
        for n in 0..blocks.len() {
            let (b, bseq) = blocks[n];
            if all && n >= announced {
                announced = n + 1;
                while blocks
                    .get(announced)
                    .is_some_and(|x| x.0 == b + announced - n)
                {
                    announced += 1;
                }
                c.will_read_blocks(b..b + announced - n);
            }
            let thr = top.threshold();
            if thr.is_some_and(|t| bseq <= t) {
                break;
            }
            stats.blocks += 1;
            let mut cands: Vec<Found> = Vec::new();
            c.for_each_in_block(b, |key, kind, seq, v| {
                if kind == EntryKind::Put
                    && thr.is_none_or(|t| seq > t)
                    && attr_key(v, field).is_some_and(|a| in_range(&a, lo, hi))
                {
                    cands.push(Found {
                        seq,
                        pk: key.to_vec(),
                        value: v.to_vec(),
                    });
                }
                Ok(true)
            })?;
            Self::admit(srcs, j, cands, top, stats)?;
        }
        Ok(())
    }

    /// Keep the candidates of source `j` that are the newest version of
    /// their record and newer than the k-th hit so far.
    fn admit(
        srcs: &[Src],
        j: usize,
        cands: Vec<Found>,
        top: &mut TopK,
        stats: &mut QueryStats,
    ) -> Result<()> {
        stats.candidates += cands.len() as u64;
        for f in cands {
            if top.threshold().is_some_and(|t| f.seq <= t) {
                continue;
            }
            if Self::newest_version(srcs, j, &f.pk, f.seq)? {
                top.push(f);
            }
        }
        Ok(())
    }

    /// Whether no source of the hit's partition other than `j` holds a
    /// version of `pk` newer than `seq` (the paper's GetLite, exact: a bloom
    /// positive is probed; sequence numbers decide, so overlapping level-0
    /// components need no special case). Only sources whose largest
    /// sequence number exceeds `seq` can.
    fn newest_version(srcs: &[Src], j: usize, pk: &[u8], seq: u64) -> Result<bool> {
        let p = srcs[j].part;
        let h = key_hash(pk);
        for (i, s) in srcs.iter().enumerate() {
            if i == j || s.part != p || s.max_seq <= seq {
                continue;
            }
            let newer = match &s.kind {
                SrcKind::Mem(m) => m.get(pk).is_some_and(|e| e.seq > seq),
                SrcKind::Disk(c) => matches!(c.probe(pk, h)?, Probe::Found(e) if e.seq > seq),
            };
            if newer {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// Lazy: postings source by source (newest sources first). A live
    /// posting is final once every source that could hold a newer posting
    /// of its key has been read; final postings are validated through the
    /// primary newest first, and the search stops at k valid hits.
    #[allow(clippy::too_many_arguments)]
    fn recent_lazy(
        &self,
        set: &IndexSet,
        i: usize,
        elo: &Bound<Vec<u8>>,
        ehi: &Bound<Vec<u8>>,
        point: Option<Vec<u8>>,
        k: Option<usize>,
        stats: &mut QueryStats,
    ) -> Result<Vec<Found>> {
        let field = set.defs[i]
            .fields
            .first()
            .map(String::as_str)
            .unwrap_or_default();
        let (lo, hi) = (
            elo.as_ref().map(Vec::as_slice),
            ehi.as_ref().map(Vec::as_slice),
        );
        let srcs = sources(&set.trees[i]);
        let mut st = LazyState {
            best: HashMap::new(),
            pending: BinaryHeap::new(),
            emitted: HashSet::new(),
            found: Vec::new(),
            k,
        };
        for s in &srcs {
            self.lazy_emit(&mut st, Some(s.max_seq), field, lo, hi, stats)?;
            if st.done() {
                return Ok(st.found);
            }
            stats.components += 1;
            let mut list: Vec<Posting> = Vec::new();
            match &s.kind {
                SrcKind::Mem(m) => {
                    let start = match lo {
                        Bound::Included(l) | Bound::Excluded(l) => Bound::Included(l),
                        Bound::Unbounded => Bound::Unbounded,
                    };
                    let mut it = MemIter::new(m.clone(), start);
                    while let Some((key, e)) = it.next_entry() {
                        if e.is_delete() {
                            continue;
                        }
                        // Not a lazy posting: see `LazyFlush`.
                        let Ok((n, p)) = parse_lazy_mem(&key, &e.value) else {
                            continue;
                        };
                        let a = &key[..n];
                        if above(a, hi) {
                            break;
                        }
                        if in_range(a, lo, hi) {
                            list.push(p);
                        }
                    }
                }
                SrcKind::Disk(c) => match &point {
                    Some(v) => {
                        if let Probe::Found(e) = c.probe(v, key_hash(v))?
                            && !e.is_delete()
                        {
                            list = postings::decode(&e.value)?;
                        }
                    }
                    None => {
                        if keys_overlap(c, lo, hi) {
                            let mut it = c.iter(lo, true)?;
                            while let Some((key, e)) = it.next_entry()? {
                                if above(&key, hi) {
                                    break;
                                }
                                if !e.is_delete() && in_range(&key, lo, hi) {
                                    list.extend(postings::decode(&e.value)?);
                                }
                            }
                        }
                    }
                },
            }
            stats.candidates += list.len() as u64;
            for p in list {
                let cur = st.best.entry(p.pk.clone()).or_insert((p.seq, p.live));
                if (p.seq, p.live) > *cur {
                    *cur = (p.seq, p.live);
                }
                if p.live {
                    st.pending.push((p.seq, p.pk));
                }
            }
        }
        self.lazy_emit(&mut st, None, field, lo, hi, stats)?;
        Ok(st.found)
    }

    /// Validate the pending postings newer than `bound` (all of them
    /// without a bound), newest first, until k hits are found.
    fn lazy_emit(
        &self,
        st: &mut LazyState,
        bound: Option<u64>,
        field: &str,
        lo: Bound<&[u8]>,
        hi: Bound<&[u8]>,
        stats: &mut QueryStats,
    ) -> Result<()> {
        while let Some((seq, _)) = st.pending.peek() {
            if st.done() || bound.is_some_and(|b| *seq <= b) {
                break;
            }
            let Some((seq, pk)) = st.pending.pop() else {
                break;
            };
            // Superseded by a newer posting (or marker) of the same record.
            if st.best.get(&pk) != Some(&(seq, true)) || st.emitted.contains(&pk) {
                continue;
            }
            st.emitted.insert(pk.clone());
            if let Some(f) = self.validate_posting(field, lo, hi, seq, pk, stats)? {
                st.found.push(f);
            }
        }
        Ok(())
    }

    /// Eager: the newest posting list of each value (one read per value and
    /// partition), merged newest first and validated until k hits.
    #[allow(clippy::too_many_arguments)]
    fn recent_eager(
        &self,
        set: &IndexSet,
        i: usize,
        elo: &Bound<Vec<u8>>,
        ehi: &Bound<Vec<u8>>,
        point: Option<Vec<u8>>,
        k: Option<usize>,
        stats: &mut QueryStats,
    ) -> Result<Vec<Found>> {
        let field = set.defs[i]
            .fields
            .first()
            .map(String::as_str)
            .unwrap_or_default();
        let (lo, hi) = (
            elo.as_ref().map(Vec::as_slice),
            ehi.as_ref().map(Vec::as_slice),
        );
        // The raw lists, decoded lazily: a top-k lookup reads a prefix.
        let mut lists: Vec<Vec<u8>> = Vec::new();
        for t in &set.trees[i] {
            stats.components += component_count(t);
            match &point {
                Some(v) => {
                    if let Some(e) = t.get_entry(v)?
                        && !e.is_delete()
                    {
                        lists.push(e.value);
                    }
                }
                None => {
                    let snap = t.snapshot();
                    let mut sc = t.scan(&snap, lo, ehi.clone(), false)?;
                    while let Some((key, e)) = sc.next_entry()? {
                        if in_range(&key, lo, hi) {
                            lists.push(e.value);
                        }
                    }
                }
            }
        }
        let mut iters = Vec::with_capacity(lists.len());
        for l in &lists {
            iters.push(postings::PostingIter::new(l)?);
        }
        // The head of each list, newest first across lists.
        let mut heads: Vec<Option<Posting>> = Vec::with_capacity(iters.len());
        let mut heap: BinaryHeap<(u64, usize)> = BinaryHeap::new();
        for (l, it) in iters.iter_mut().enumerate() {
            let h = it.next().transpose()?;
            if let Some(p) = &h {
                heap.push((p.seq, l));
            }
            heads.push(h);
        }
        let mut emitted = HashSet::new();
        let mut found = Vec::new();
        while let Some((seq, l)) = heap.pop() {
            if k.is_some_and(|k| found.len() >= k) {
                break;
            }
            let Some(p) = heads[l].take() else {
                continue;
            };
            let next = iters[l].next().transpose()?;
            if let Some(n) = &next {
                heap.push((n.seq, l));
            }
            heads[l] = next;
            stats.candidates += 1;
            if !p.live || !emitted.insert(p.pk.clone()) {
                continue;
            }
            if let Some(f) = self.validate_posting(field, lo, hi, seq, p.pk, stats)? {
                found.push(f);
            }
        }
        Ok(found)
    }

    /// Validate a posting of the lazy or eager index through the primary:
    /// a hit if the record's current version still has its field within
    /// the bounds (the record's sequence number is the posting's).
    fn validate_posting(
        &self,
        field: &str,
        lo: Bound<&[u8]>,
        hi: Bound<&[u8]>,
        seq: u64,
        pk: Vec<u8>,
        stats: &mut QueryStats,
    ) -> Result<Option<Found>> {
        stats.fetched += 1;
        Ok(match self.current_entry(&pk)? {
            Some(e) if attr_key(&e.value, field).is_some_and(|a| in_range(&a, lo, hi)) => {
                Some(Found {
                    seq,
                    pk,
                    value: e.value,
                })
            }
            _ => None,
        })
    }

    /// Turn hits into `(key, record)` results under read committed: a hit
    /// whose record a writer holds (or that an abort may have undone since
    /// the query began) is re-read through the primary and kept only if it
    /// still matches.
    fn read_committed(
        &self,
        field: &str,
        found: Vec<Found>,
        elo: &Bound<Vec<u8>>,
        ehi: &Bound<Vec<u8>>,
        epoch: u64,
        stats: &mut QueryStats,
    ) -> Result<Vec<StoredRecord>> {
        let (lo, hi) = (
            elo.as_ref().map(Vec::as_slice),
            ehi.as_ref().map(Vec::as_slice),
        );
        let mut out = Vec::with_capacity(found.len());
        for f in found {
            let name = LockManager::name(self.id, &f.pk);
            let bytes = if self.txn.locks.try_s_instant(name) && self.txn.abort_epoch() == epoch {
                f.value
            } else {
                stats.fetched += 1;
                match self.current_entry(&f.pk)? {
                    Some(e) if attr_key(&e.value, field).is_some_and(|a| in_range(&a, lo, hi)) => {
                        e.value
                    }
                    _ => continue,
                }
            };
            out.push((f.pk, bytes));
        }
        Ok(out)
    }
}

/// The encoded value of a query for one value of every indexed field
/// (which bloom filters can answer), if it is one.
fn point_key(
    def: &IndexDef,
    lo: &Bound<Vec<Value>>,
    hi: &Bound<Vec<Value>>,
    elo: &Bound<Vec<u8>>,
) -> Option<Vec<u8>> {
    match (lo, hi, elo) {
        (Bound::Included(a), Bound::Included(b), Bound::Included(e))
            if a == b && a.len() == def.fields.len() =>
        {
            Some(e.clone())
        }
        _ => None,
    }
}

/// Validated `(seq, pk, record)` hits as the `k` newest query hits.
fn newest_hits(mut found: Vec<(u64, Vec<u8>, Value)>, k: Option<usize>) -> Result<Vec<QueryHit>> {
    found.sort_by_key(|f| Reverse(f.0));
    if let Some(k) = k {
        found.truncate(k);
    }
    found
        .into_iter()
        .map(|(_, pk, rec)| {
            Ok(QueryHit {
                pk: value::decode_key(&pk)?,
                record: Some(rec),
                distance_m: None,
                stored: None,
            })
        })
        .collect()
}

/// Search state of a lazy lookup.
struct LazyState {
    /// Newest posting seen per primary key: (seq, live).
    best: HashMap<Vec<u8>, (u64, bool)>,
    /// Live postings not yet validated, newest on top.
    pending: BinaryHeap<(u64, Vec<u8>)>,
    emitted: HashSet<Vec<u8>>,
    found: Vec<Found>,
    k: Option<usize>,
}

impl LazyState {
    fn done(&self) -> bool {
        self.k.is_some_and(|k| self.found.len() >= k)
    }
}
