//! Transactions of many statements over many datasets.
//!
//! The paper's record-level transactions stay the default (every `insert`,
//! `upsert` and `delete` on a [`Dataset`] commits on its own). A
//! [`Transaction`] groups any number of reads and writes on any datasets of
//! one database into one atomic, durable unit:
//!
//! - **Writes are buffered** in the transaction (encoded, in key order) and
//!   checked as they are made (a duplicate insert fails at the insert, with
//!   nothing buffered). Nothing reaches a memtable or the log before commit.
//! - **Reads see the transaction's own writes** (`get`, `scan`, `query`) over
//!   committed data (read committed, as every reader of the engine).
//! - **Commit** locks every key the transaction wrote or read with `get`, in
//!   lock-name order (one global order: no hold-and-wait cycle, so no
//!   deadlock and no deadlock detection), then **validates** that every key
//!   read still has the version that was read (sequence numbers never repeat,
//!   so an equal version means nobody wrote the key in between), then applies
//!   every write to the primary and secondary indexes through the record
//!   write path (logged, undoable), appends one COMMIT and waits for it per
//!   the durability mode. Redo-only recovery replays the transaction's
//!   records only if that COMMIT is durable: all or nothing, in every dataset
//!   and index.
//! - A failed validation is [`Error::Conflict`] naming the key: nothing was
//!   applied and the transaction can simply be run again.
//!
//! Isolation: keys read with [`Transaction::get`] (and keys a SQL `UPDATE` /
//! `DELETE` read, through [`Transaction::note_read`]) are validated, so a
//! committed transaction saw them as they were at its commit point
//! (serializable for point reads; no lost updates). Scans and index queries
//! read committed data and are not validated (phantoms are possible). A
//! read-only transaction validates its reads too: if it commits, what it read
//! with `get` was one consistent state.
//!
//! A transaction is bounded ([`TxnLimits`]): past the bound a write fails
//! with [`Error::TxnTooLarge`] and changes nothing. Savepoints roll back the
//! writes (not the validated reads) made after them.

use super::links;
use super::matview::{self, TxnView};
use super::write::{TxnWork, WriteOp};
use super::*;
use crate::index::query::Recheck;
use parking_lot::RwLockReadGuard;
use std::collections::BTreeMap;

/// Bounds of one transaction.
#[derive(Clone, Copy, Debug)]
pub struct TxnLimits {
    /// Buffered bytes (keys and encoded records of the writes, and keys read).
    pub max_bytes: u64,
    /// Buffered writes.
    pub max_writes: u64,
}

impl Default for TxnLimits {
    fn default() -> Self {
        TxnLimits {
            max_bytes: 256 << 20,
            max_writes: 1_000_000,
        }
    }
}

/// A buffered write.
#[derive(Clone, Debug)]
enum Pending {
    /// Insert: the key was read absent (validated at commit).
    Insert(Vec<u8>),
    /// Insert or replace.
    Upsert(Vec<u8>),
    Delete,
    /// Insert unless the key is live (a record-level `InsertIgnore` of a
    /// linked dataset, `links`): never read by the transaction itself.
    InsertIgnore(Vec<u8>),
}

impl Pending {
    fn value(&self) -> Option<&[u8]> {
        match self {
            Pending::Insert(v) | Pending::Upsert(v) | Pending::InsertIgnore(v) => Some(v),
            Pending::Delete => None,
        }
    }

    fn bytes(&self) -> u64 {
        self.value().map_or(0, |v| v.len() as u64)
    }
}

type Slot = (u32, Vec<u8>);

/// How many times a commit takes its locks again because the records its
/// foreign keys reach changed before it held them.
const MAX_LINK_ATTEMPTS: usize = 16;

/// The outcome of one [`Transaction::commit_attempt`].
enum Attempt {
    Done(CommitInfo),
    /// Lock these names too (and enlist these datasets), and try again.
    Again {
        enlist: Vec<Arc<Dataset>>,
        names: Vec<u64>,
    },
}

/// The writes as the foreign keys' plan reads them.
fn link_writes<'a>(
    writes: &'a BTreeMap<Slot, Pending>,
    datasets: &'a BTreeMap<u32, Arc<Dataset>>,
) -> impl Iterator<Item = links::LinkWrite<'a>> {
    writes.iter().filter_map(|((id, key), p)| {
        Some(links::LinkWrite {
            ds: datasets.get(id)?,
            key,
            value: p.value(),
            unless_live: matches!(p, Pending::InsertIgnore(_)),
        })
    })
}

impl TxnView for BTreeMap<Slot, Pending> {
    fn state(&self, id: u32, key: &[u8]) -> Option<Option<&[u8]>> {
        self.get(&(id, key.to_vec())).map(Pending::value)
    }

    fn written_in(&self, id: u32) -> Vec<(&[u8], Option<&[u8]>)> {
        self.range((id, Vec::new())..)
            .take_while(|((d, _), _)| *d == id)
            .map(|((_, k), p)| (k.as_slice(), p.value()))
            .collect()
    }

    fn all(&self) -> Vec<(u32, &[u8])> {
        self.keys().map(|(d, k)| (*d, k.as_slice())).collect()
    }
}

/// Whether the transaction leaves `key` of dataset `id` written
/// (`Some(true)`), deleted (`Some(false)`) or untouched (`None`).
fn txn_state(writes: &BTreeMap<Slot, Pending>, id: u32, key: &[u8]) -> Option<bool> {
    writes
        .get(&(id, key.to_vec()))
        .map(|p| !matches!(p, Pending::Delete))
}

/// A transaction over the datasets of one database. See the module doc.
///
/// Dropping it without [`Transaction::commit`] rolls it back (nothing was
/// written anywhere).
pub struct Transaction {
    ctx: Arc<TxnContext>,
    datasets: BTreeMap<u32, Arc<Dataset>>,
    writes: BTreeMap<Slot, Pending>,
    /// Version (sequence number of the live entry; `None` = absent) of each
    /// key when the transaction first read it.
    reads: HashMap<Slot, Option<u64>>,
    /// Each write's slot and what the slot held before it (for savepoints).
    journal: Vec<(Slot, Option<Pending>)>,
    /// How much of `journal` [`Transaction::check_unique`] has checked.
    unique_checked: usize,
    /// The record of this transaction last found on each unique value
    /// ((dataset, index id, encoded value) → key), by `check_unique`.
    unique_seen: HashMap<(u32, u32, Vec<u8>), Vec<u8>>,
    savepoints: Vec<(String, usize)>,
    bytes: u64,
    limits: TxnLimits,
    /// The definition each dataset's records were prepared under (an
    /// `ALTER TABLE` replacing it fails the transaction: [`Error::Altered`]).
    shapes: HashMap<u32, Arc<DatasetDef>>,
    /// The dataset whose [`crate::Alteration`] this transaction rewrites:
    /// its DDL lock is held by the alteration, its definition changes under
    /// the transaction, and only [`crate::Alteration::finish`] commits it.
    altering: Option<u32>,
    /// The dataset whose DDL lock the caller holds shared already (a
    /// record-level write of a linked dataset, `links`): not taken again.
    ddl_held: Option<u32>,
}

impl std::fmt::Debug for Transaction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Transaction")
            .field("writes", &self.writes.len())
            .field("reads", &self.reads.len())
            .field("bytes", &self.bytes)
            .finish()
    }
}

/// What a commit did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CommitInfo {
    /// Record writes applied (a delete of an absent key counts as none).
    pub writes: usize,
    /// Keys validated.
    pub validated: usize,
    /// Synergy's hierarchical locks the commit took: the root records (or
    /// view tops) its writes are under (1, or 2 for a move between roots).
    pub root_locks: usize,
}

impl Transaction {
    pub(crate) fn new(ctx: Arc<TxnContext>, limits: TxnLimits) -> Transaction {
        Transaction {
            ctx,
            datasets: BTreeMap::new(),
            writes: BTreeMap::new(),
            reads: HashMap::new(),
            journal: Vec::new(),
            unique_checked: 0,
            unique_seen: HashMap::new(),
            savepoints: Vec::new(),
            bytes: 0,
            limits,
            shapes: HashMap::new(),
            altering: None,
            ddl_held: None,
        }
    }

    /// Buffer a record-level operation of `ds`, whose DDL lock the caller
    /// holds shared and whose record is prepared under its definition now
    /// (`links`: a write of a linked dataset commits as a transaction).
    /// Duplicates and absent keys are found when it is applied.
    pub(super) fn put_op(&mut self, ds: &Arc<Dataset>, op: &WriteOp<'_>) -> Result<()> {
        self.enlist(ds)?;
        self.ddl_held = Some(ds.id);
        let (key, p) = match *op {
            WriteOp::Insert(k, v) => (k, Pending::Insert(v.to_vec())),
            WriteOp::Upsert(k, v) => (k, Pending::Upsert(v.to_vec())),
            WriteOp::InsertIgnore(k, v) => (k, Pending::InsertIgnore(v.to_vec())),
            WriteOp::Delete(k) => (k, Pending::Delete),
            WriteOp::Expire(..) => {
                return Err(Error::Txn(format!(
                    "records of `{}` do not expire: other datasets reference it",
                    ds.name()
                )));
            }
        };
        let slot = (ds.id, key.to_vec());
        let p = match (self.writes.get(&slot), p) {
            (Some(Pending::Insert(_) | Pending::Upsert(_)), Pending::Insert(_)) => {
                return Err(ds.duplicate(key));
            }
            (Some(Pending::Delete), Pending::Insert(v) | Pending::InsertIgnore(v)) => {
                Pending::Upsert(v)
            }
            (Some(Pending::Insert(_) | Pending::Upsert(_)), Pending::InsertIgnore(_)) => {
                return Ok(());
            }
            (_, p) => p,
        };
        self.put(slot, p)
    }

    /// A transaction rewriting the records of dataset `id` for its
    /// [`crate::Alteration`].
    pub(crate) fn altering(mut self, id: u32) -> Transaction {
        self.altering = Some(id);
        self
    }

    /// Declare that the records this transaction writes to `ds` next were
    /// built against definition `def` (SQL's statement planned against
    /// it): [`Error::Altered`] if that is not the definition the
    /// transaction's records of `ds` are prepared under, now and at commit.
    pub fn expect_def(&mut self, ds: &Arc<Dataset>, def: &Arc<DatasetDef>) -> Result<()> {
        self.enlist(ds)?;
        if self.altering == Some(ds.id) {
            return Ok(());
        }
        let now = self.shapes.entry(ds.id).or_insert_with(|| def.clone());
        if Arc::ptr_eq(now, def) && Arc::ptr_eq(def, &ds.def()) {
            Ok(())
        } else {
            Err(Error::Altered {
                dataset: ds.name().to_owned(),
            })
        }
    }

    /// Check and encode `record` for `ds` under its definition now, which
    /// must be the one the transaction's earlier records of `ds` were
    /// prepared under.
    fn prepare(&mut self, ds: &Arc<Dataset>, record: Value) -> Result<(Vec<u8>, Vec<u8>)> {
        if ds.links().is_some_and(|l| l.is_view) {
            return Err(ds.view_write());
        }
        let def = ds.def();
        self.expect_def(ds, &def)?;
        ds.prepare_under(&def, record)
    }

    /// Buffered writes.
    pub fn pending_writes(&self) -> usize {
        self.writes.len()
    }

    /// Whether the transaction has a write (or a cascaded delete) of the
    /// dataset whose id is `dataset` buffered.
    pub fn writes_dataset(&self, dataset: u32) -> bool {
        self.writes
            .range((dataset, Vec::new())..)
            .next()
            .is_some_and(|((id, _), _)| *id == dataset)
    }

    /// Whether the transaction neither wrote nor read anything yet.
    pub fn is_empty(&self) -> bool {
        self.writes.is_empty() && self.reads.is_empty()
    }

    fn enlist(&mut self, ds: &Arc<Dataset>) -> Result<()> {
        if !Arc::ptr_eq(&ds.txn, &self.ctx) {
            return Err(Error::Txn(format!(
                "dataset `{}` belongs to another database than the transaction",
                ds.name()
            )));
        }
        self.datasets.entry(ds.id).or_insert_with(|| ds.clone());
        Ok(())
    }

    fn charge(&mut self, bytes: u64, new_write: bool) -> Result<()> {
        if self.bytes + bytes > self.limits.max_bytes {
            return Err(Error::TxnTooLarge {
                what: format!("{} buffered bytes", self.bytes + bytes),
                limit: self.limits.max_bytes,
            });
        }
        if new_write && self.writes.len() as u64 >= self.limits.max_writes {
            return Err(Error::TxnTooLarge {
                what: format!("{} writes", self.writes.len() + 1),
                limit: self.limits.max_writes,
            });
        }
        self.bytes += bytes;
        Ok(())
    }

    /// Read the committed version of `key`, remembering it for validation
    /// (the first read of a key is the one validated).
    fn read_committed(&mut self, ds: &Arc<Dataset>, key: &[u8]) -> Result<Option<Vec<u8>>> {
        let e = ds.committed_entry(key)?;
        let slot = (ds.id, key.to_vec());
        if !self.reads.contains_key(&slot) {
            self.charge(key.len() as u64 + 16, false)?;
            self.reads.insert(slot, e.as_ref().map(|e| e.seq));
        }
        Ok(e.map(|e| e.value))
    }

    /// Remember that the transaction read version `seq` (`None`: absent) of
    /// `key` by other means (a scan feeding an update): it is validated at
    /// commit like a [`Transaction::get`].
    pub fn note_read(&mut self, ds: &Arc<Dataset>, key: &[u8], seq: Option<u64>) -> Result<()> {
        self.enlist(ds)?;
        let slot = (ds.id, key.to_vec());
        if !self.reads.contains_key(&slot) && !self.writes.contains_key(&slot) {
            self.charge(key.len() as u64 + 16, false)?;
            self.reads.insert(slot, seq);
        }
        Ok(())
    }

    /// The encoded record under an encoded key: the transaction's own write
    /// if it made one, else the committed record (validated at commit).
    pub fn get_raw(&mut self, ds: &Arc<Dataset>, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.enlist(ds)?;
        if let Some(p) = self.writes.get(&(ds.id, key.to_vec())) {
            return Ok(p.value().map(<[u8]>::to_vec));
        }
        self.read_committed(ds, key)
    }

    /// The record with this primary key, as this transaction sees it.
    pub fn get(&mut self, ds: &Arc<Dataset>, pk: &[Value]) -> Result<Option<Value>> {
        let key = ds.encode_pk(pk)?;
        self.get_raw(ds, &key)?
            .map(|b| decode_stored(&b))
            .transpose()
    }

    /// What a buffered write counts against [`TxnLimits::max_bytes`].
    fn cost(key: &[u8], p: Option<&Pending>) -> u64 {
        p.map_or(0, |p| p.bytes() + key.len() as u64 + 32)
    }

    fn put(&mut self, slot: Slot, p: Pending) -> Result<()> {
        let old = self.writes.get(&slot).cloned();
        let grow = Self::cost(&slot.1, Some(&p)).saturating_sub(Self::cost(&slot.1, old.as_ref()));
        self.charge(grow, old.is_none())?;
        let shrink =
            Self::cost(&slot.1, old.as_ref()).saturating_sub(Self::cost(&slot.1, Some(&p)));
        self.bytes = self.bytes.saturating_sub(shrink);
        self.writes.insert(slot.clone(), p);
        self.journal.push((slot, old));
        Ok(())
    }

    /// Insert a new record; fails with [`Error::DuplicateKey`] (changing
    /// nothing) if the key exists as this transaction sees it.
    pub fn insert(&mut self, ds: &Arc<Dataset>, record: Value) -> Result<()> {
        self.enlist(ds)?;
        let (key, bytes) = self.prepare(ds, record)?;
        let slot = (ds.id, key);
        let p = match self.writes.get(&slot) {
            Some(Pending::Insert(_) | Pending::Upsert(_) | Pending::InsertIgnore(_)) => {
                return Err(ds.duplicate(&slot.1));
            }
            // Deleted by this transaction: the committed record (if any) is
            // replaced.
            Some(Pending::Delete) => Pending::Upsert(bytes),
            None => {
                if self.read_committed(ds, &slot.1)?.is_some() {
                    return Err(ds.duplicate(&slot.1));
                }
                Pending::Insert(bytes)
            }
        };
        self.put(slot, p)
    }

    /// Insert or replace a record.
    pub fn upsert(&mut self, ds: &Arc<Dataset>, record: Value) -> Result<()> {
        self.enlist(ds)?;
        let (key, bytes) = self.prepare(ds, record)?;
        let slot = (ds.id, key);
        let p = match self.writes.get(&slot) {
            // Still a fresh key (validated absent at commit).
            Some(Pending::Insert(_)) => Pending::Insert(bytes),
            _ => Pending::Upsert(bytes),
        };
        self.put(slot, p)
    }

    /// Delete the record with this primary key; returns whether it existed
    /// as this transaction sees it.
    pub fn delete(&mut self, ds: &Arc<Dataset>, pk: &[Value]) -> Result<bool> {
        if ds.links().is_some_and(|l| l.is_view) {
            return Err(ds.view_write());
        }
        self.enlist(ds)?;
        let key = ds.encode_pk(pk)?;
        let slot = (ds.id, key);
        let existed = match self.writes.get(&slot) {
            Some(Pending::Insert(_) | Pending::Upsert(_) | Pending::InsertIgnore(_)) => true,
            Some(Pending::Delete) => false,
            None => self.read_committed(ds, &slot.1)?.is_some(),
        };
        if existed {
            self.put(slot.clone(), Pending::Delete)?;
            self.cascade(ds, &slot.1)?;
        }
        Ok(existed)
    }

    /// Delete, as part of this transaction, the records that reference the
    /// deleted record `key` of `ds` through foreign keys that cascade, as
    /// the transaction sees them now (committed, or written by it), and
    /// theirs in turn. Done at the delete, so a record deleted and written
    /// again in one transaction still took its children with it; children
    /// committed by others before the commit are found by the commit's
    /// own plan (`links`).
    fn cascade(&mut self, ds: &Arc<Dataset>, key: &[u8]) -> Result<()> {
        let mut todo = vec![(ds.clone(), key.to_vec())];
        while let Some((ds, key)) = todo.pop() {
            let Some(links) = ds.links() else { continue };
            let pk = value::decode_key(&key)?;
            for (fk, child, index) in &links.children {
                if fk.on_delete != crate::schema::FkAction::Cascade {
                    continue;
                }
                let Some(child) = child.upgrade() else {
                    continue;
                };
                self.enlist(&child)?;
                let names = |v: &Value| {
                    fk.fields
                        .iter()
                        .map(|f| v.get(f).cloned().unwrap_or(Value::Null))
                        .collect::<Vec<_>>()
                };
                let mut keys: Vec<Vec<u8>> = child
                    .index_range_raw(index, Bound::Included(&pk), Bound::Included(&pk), None)?
                    .into_iter()
                    .map(|(_, k)| k)
                    .collect();
                let lo = (child.id, Vec::new());
                for ((id, k), p) in self.writes.range(lo..) {
                    if *id != child.id {
                        break;
                    }
                    if let Some(v) = p.value()
                        && names(&decode_stored(v)?) == pk
                    {
                        keys.push(k.clone());
                    }
                }
                keys.sort_unstable();
                keys.dedup();
                for k in keys {
                    let slot = (child.id, k);
                    // What the transaction holds there now decides.
                    let refers = match self.writes.get(&slot) {
                        Some(Pending::Delete) => false,
                        Some(p) => match p.value() {
                            Some(v) => names(&decode_stored(v)?) == pk,
                            None => false,
                        },
                        None => true,
                    };
                    if refers {
                        self.put(slot.clone(), Pending::Delete)?;
                        todo.push((child.clone(), slot.1));
                    }
                }
            }
        }
        Ok(())
    }

    /// Mark a savepoint (a name used again marks a new one that hides the
    /// older one, as in PostgreSQL).
    pub fn savepoint(&mut self, name: &str) {
        self.savepoints.push((name.to_owned(), self.journal.len()));
    }

    /// Undo the writes made since savepoint `name` (which stays, as do the
    /// ones before it; later ones are gone).
    pub fn rollback_to(&mut self, name: &str) -> Result<()> {
        let Some(i) = self.savepoints.iter().rposition(|(n, _)| n == name) else {
            return Err(Error::Txn(format!("no savepoint named `{name}`")));
        };
        let mark = self.savepoints[i].1;
        self.savepoints.truncate(i + 1);
        self.unique_checked = self.unique_checked.min(mark);
        while self.journal.len() > mark {
            let Some((slot, old)) = self.journal.pop() else {
                break;
            };
            let cur = match &old {
                Some(o) => self.writes.insert(slot.clone(), o.clone()),
                None => self.writes.remove(&slot),
            };
            self.bytes = (self.bytes + Self::cost(&slot.1, old.as_ref()))
                .saturating_sub(Self::cost(&slot.1, cur.as_ref()));
        }
        Ok(())
    }

    /// Check the unique indexes against the writes made since the last
    /// check, as this transaction sees the data: a value another record
    /// holds is [`Error::DuplicateValue`]. SQL calls it after each batch of
    /// writes in a transaction block, so a duplicate fails its statement,
    /// as in PostgreSQL, rather than the COMMIT. Takes no lock: the commit
    /// checks again under the values' locks.
    pub fn check_unique(&mut self) -> Result<()> {
        let from = self.unique_checked.min(self.journal.len());
        if from == self.journal.len() {
            return Ok(());
        }
        self.unique_checked = self.journal.len();
        let slots: Vec<Slot> = self.journal[from..]
            .iter()
            .map(|(s, _)| s.clone())
            .collect();
        let mut uniques: HashMap<u32, Vec<IndexDef>> = HashMap::new();
        for slot in slots {
            let Some(ds) = self.datasets.get(&slot.0).cloned() else {
                continue;
            };
            let defs = uniques.entry(ds.id).or_insert_with(|| {
                let mut d = ds.index_defs();
                d.retain(|d| d.options.unique);
                d
            });
            if defs.is_empty() {
                continue;
            }
            let Some(bytes) = self.writes.get(&slot).and_then(Pending::value) else {
                continue;
            };
            let rec = decode_stored(bytes)?;
            for d in defs.iter() {
                let (Some(vals), Some(want)) = (d.key_values(&rec)?, d.value_key(&rec)?) else {
                    continue;
                };
                let seen = (ds.id, d.id, want.clone());
                // Another of this transaction's records on the value.
                if let Some(other) = self.unique_seen.get(&seen)
                    && *other != slot.1
                    && self.pending_holds(ds.id, d, other, &want)? == Some(true)
                {
                    return Err(ds.duplicate_value(d, &vals));
                }
                // A committed record on it that this transaction left there.
                let q = Query::Range {
                    lo: Bound::Included(vals.clone()),
                    hi: Bound::Included(vals.clone()),
                };
                let opts = QueryOptions {
                    index_only: true,
                    limit: None,
                };
                for h in ds.query(&d.name, &q, opts)? {
                    let pk = ds.encode_pk(&h?.pk)?;
                    if pk != slot.1 && self.pending_holds(ds.id, d, &pk, &want)? != Some(false) {
                        return Err(ds.duplicate_value(d, &vals));
                    }
                }
                self.unique_seen.insert(seen, slot.1.clone());
            }
        }
        Ok(())
    }

    /// Whether this transaction's write of `key` holds encoded value
    /// `want` of `d`'s fields; `None` when it did not write the key.
    fn pending_holds(
        &self,
        ds: u32,
        d: &IndexDef,
        key: &[u8],
        want: &[u8],
    ) -> Result<Option<bool>> {
        let Some(p) = self.writes.get(&(ds, key.to_vec())) else {
            return Ok(None);
        };
        Ok(Some(match p.value() {
            None => false,
            Some(b) => d.value_key(&decode_stored(b)?)?.as_deref() == Some(want),
        }))
    }

    /// Forget savepoint `name` and the ones after it (their writes stay).
    pub fn release_savepoint(&mut self, name: &str) -> Result<()> {
        let Some(i) = self.savepoints.iter().rposition(|(n, _)| n == name) else {
            return Err(Error::Txn(format!("no savepoint named `{name}`")));
        };
        self.savepoints.truncate(i);
        Ok(())
    }

    /// The transaction's buffered writes to `ds` with keys within the
    /// encoded bounds, in key order (`None` = deleted).
    fn buffered_range(
        &self,
        ds: &Arc<Dataset>,
        lo: &Bound<Vec<u8>>,
        hi: &Bound<Vec<u8>>,
    ) -> Vec<(Vec<u8>, Option<Vec<u8>>)> {
        let lo_slot = match lo {
            Bound::Included(k) => Bound::Included((ds.id, k.clone())),
            Bound::Excluded(k) => Bound::Excluded((ds.id, k.clone())),
            Bound::Unbounded => Bound::Included((ds.id, Vec::new())),
        };
        self.writes
            .range((lo_slot, Bound::Unbounded))
            .take_while(|((id, k), _)| {
                *id == ds.id
                    && match hi {
                        Bound::Included(h) => k <= h,
                        Bound::Excluded(h) => k < h,
                        Bound::Unbounded => true,
                    }
            })
            .map(|((_, k), p)| (k.clone(), p.value().map(<[u8]>::to_vec)))
            .collect()
    }

    /// Records of `ds` with primary keys within the bounds, in key order, as
    /// this transaction sees them (committed records overlaid with its own
    /// writes). Not validated at commit (see the module doc).
    pub fn scan(
        &mut self,
        ds: &Arc<Dataset>,
        lo: Bound<&[Value]>,
        hi: Bound<&[Value]>,
    ) -> Result<TxnScan> {
        let enc = |b: Bound<&[Value]>| -> Result<Bound<Vec<u8>>> {
            Ok(match b {
                Bound::Included(k) => Bound::Included(ds.encode_pk_prefix(k)?),
                Bound::Excluded(k) => Bound::Excluded(ds.encode_pk_prefix(k)?),
                Bound::Unbounded => Bound::Unbounded,
            })
        };
        self.scan_raw(ds, enc(lo)?, enc(hi)?)
    }

    /// [`Transaction::scan`] by encoded key bounds.
    pub fn scan_raw(
        &mut self,
        ds: &Arc<Dataset>,
        lo: Bound<Vec<u8>>,
        hi: Bound<Vec<u8>>,
    ) -> Result<TxnScan> {
        self.open_scan(ds, lo, hi, false)
    }

    /// [`Transaction::scan_raw`] in descending key order.
    pub fn scan_raw_rev(
        &mut self,
        ds: &Arc<Dataset>,
        lo: Bound<Vec<u8>>,
        hi: Bound<Vec<u8>>,
    ) -> Result<TxnScan> {
        self.open_scan(ds, lo, hi, true)
    }

    fn open_scan(
        &mut self,
        ds: &Arc<Dataset>,
        lo: Bound<Vec<u8>>,
        hi: Bound<Vec<u8>>,
        rev: bool,
    ) -> Result<TxnScan> {
        self.enlist(ds)?;
        let mut buffered = self.buffered_range(ds, &lo, &hi);
        let inner = if rev {
            buffered.reverse();
            ds.scan_raw_rev(lo, hi)?
        } else {
            ds.scan_raw(lo, hi)?
        };
        Ok(TxnScan {
            inner,
            buffered: buffered.into(),
            head: None,
            rev,
        })
    }

    /// Run `query` through index `index` of `ds`, as this transaction sees
    /// the data: committed hits of records it wrote are replaced by its own
    /// versions (kept only if they match). Not validated at commit.
    /// Streams when the transaction wrote nothing to `ds`; otherwise the
    /// results (at most `opts.limit`, or the query's k) are collected first.
    pub fn query(
        &mut self,
        ds: &Arc<Dataset>,
        index: &str,
        query: &Query,
        opts: QueryOptions,
    ) -> Result<TxnQuery> {
        self.enlist(ds)?;
        let mine = self.buffered_range(ds, &Bound::Unbounded, &Bound::Unbounded);
        if mine.is_empty() {
            return Ok(TxnQuery::Stream(Box::new(ds.query(index, query, opts)?)));
        }
        let n = mine.len();
        // Ask for enough committed hits to fill the answer after dropping
        // the ones this transaction rewrote.
        let widened = match query {
            Query::Nearest { lon, lat, k } => Query::Nearest {
                lon: *lon,
                lat: *lat,
                k: k.saturating_add(n),
            },
            Query::Recent { lo, hi, k } => Query::Recent {
                lo: lo.clone(),
                hi: hi.clone(),
                k: k.map(|k| k.saturating_add(n)),
            },
            q => q.clone(),
        };
        let wopts = QueryOptions {
            limit: opts.limit.map(|l| l.saturating_add(n)),
            ..opts
        };
        let mut hits: Vec<(Vec<u8>, QueryHit)> = Vec::new();
        for h in ds.query(index, &widened, wopts)? {
            let h = h?;
            let key = ds.encode_pk(&h.pk)?;
            if mine
                .binary_search_by(|(k, _)| k.as_slice().cmp(&key))
                .is_err()
            {
                hits.push((key, h));
            }
        }
        let (def, recheck) = ds.query_recheck(index, query)?;
        let mut own = Vec::new();
        for (key, v) in mine {
            let Some(v) = v else { continue };
            let rec = decode_stored(&v)?;
            if let Some(d) = recheck.matches(&def, &rec, &key)? {
                let pk = value::decode_key(&key)?;
                own.push((
                    key,
                    QueryHit {
                        pk,
                        record: Some(rec),
                        distance_m: d,
                        stored: None,
                    },
                ));
            }
        }
        let k = match query {
            Query::Nearest { k, .. } => Some(*k),
            Query::Recent { k, .. } => *k,
            _ => None,
        };
        let limit = match (k, opts.limit) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        let mut all = match query {
            // The transaction's writes are the newest.
            Query::Recent { .. } => {
                own.extend(hits);
                own
            }
            Query::Nearest { .. } => {
                hits.extend(own);
                hits.sort_by(|a, b| {
                    let d = |h: &QueryHit| h.distance_m.unwrap_or(f64::INFINITY);
                    d(&a.1).total_cmp(&d(&b.1)).then_with(|| a.0.cmp(&b.0))
                });
                hits
            }
            _ => {
                hits.extend(own);
                hits.sort_by(|a, b| a.0.cmp(&b.0));
                hits
            }
        };
        if let Some(l) = limit {
            all.truncate(l);
        }
        Ok(TxnQuery::Collected(
            all.into_iter()
                .map(|(_, h)| h)
                .collect::<Vec<_>>()
                .into_iter(),
        ))
    }

    /// Forget everything (same as dropping the transaction).
    pub fn rollback(self) {}

    /// Apply the transaction atomically (see the module doc). On
    /// [`Error::Conflict`] (or any other error) nothing was applied.
    pub fn commit(self) -> Result<CommitInfo> {
        if self.altering.is_some() {
            return Err(Error::Txn(
                "a transaction of an ALTER commits with the alteration (Alteration::finish)"
                    .to_owned(),
            ));
        }
        self.commit_locked()
    }

    /// [`Transaction::commit`]; for a transaction of an alteration, the
    /// caller holds the altered dataset's DDL lock exclusively.
    pub(crate) fn commit_locked(mut self) -> Result<CommitInfo> {
        let mut writes = std::mem::take(&mut self.writes);
        let reads = std::mem::take(&mut self.reads);
        if writes.is_empty() {
            return self.validate_read_only(&reads);
        }
        let mut datasets = std::mem::take(&mut self.datasets);
        // Foreign keys (`links`): a first plan, read before any lock, names
        // the parents and cascaded children to lock with the writes.
        let linked = datasets.values().any(|d| d.links().is_some());
        let mut extra = Vec::new();
        if linked {
            let mut pre = links::plan(
                link_writes(&writes, &datasets),
                &|id, k| txn_state(&writes, id, k),
                false,
            )?;
            matview::plan_views(&mut pre, &datasets, &writes, false)?;
            for d in pre
                .cascade
                .iter()
                .map(|(d, _)| d)
                .chain(pre.views.iter().map(|(d, ..)| d))
            {
                datasets.entry(d.id).or_insert_with(|| d.clone());
            }
            extra = pre.names;
        }
        for _ in 0..MAX_LINK_ATTEMPTS {
            match self.commit_attempt(&datasets, &mut writes, &reads, &extra, linked)? {
                Attempt::Done(info) => return Ok(info),
                Attempt::Again { enlist, names } => {
                    for d in enlist {
                        datasets.entry(d.id).or_insert_with(|| d.clone());
                    }
                    extra.extend(names);
                }
            }
        }
        Err(Error::Txn(format!(
            "the records this transaction's foreign keys reach kept changing under it ({MAX_LINK_ATTEMPTS} attempts); run it again"
        )))
    }

    /// One try of [`Transaction::commit_locked`]: DDL locks, X locks on
    /// the writes, reads and `extra` names, the foreign keys' plan under
    /// them (`Again` when it needs more keys or datasets), validation,
    /// apply, commit.
    fn commit_attempt(
        &self,
        datasets: &BTreeMap<u32, Arc<Dataset>>,
        writes: &mut BTreeMap<Slot, Pending>,
        reads: &HashMap<Slot, Option<u64>>,
        extra: &[u64],
        linked: bool,
    ) -> Result<Attempt> {
        // Index DDL and ALTER wait for writers: hold every dataset's DDL
        // lock shared (in dataset-id order) for the whole commit, then check
        // that no ALTER replaced a definition records were prepared under.
        let _ddl: Vec<RwLockReadGuard<'_, ()>> = datasets
            .values()
            .filter(|d| self.altering != Some(d.id) && self.ddl_held != Some(d.id))
            .map(|d| d.ddl.read())
            .collect();
        for (id, def) in &self.shapes {
            if let Some(ds) = datasets.get(id) {
                ds.check_shape(def)?;
            }
        }
        let ctx = &self.ctx;
        let txn = ctx.begin();
        let mut names: Vec<u64> = writes
            .keys()
            .chain(reads.keys())
            .map(|(id, k)| LockManager::name(*id, k))
            .chain(extra.iter().copied())
            .collect();
        ctx.locks.lock_x_all(txn, &mut names);
        let mut roots = 0;
        if linked {
            let state = |id: u32, k: &[u8]| txn_state(writes, id, k);
            let mut held: std::collections::HashSet<u64> = names.iter().copied().collect();
            // Made again under the locks until it needs no lock not held.
            // A key it needs beyond them is tried without waiting (holding
            // locks, nothing may wait): under a held root, the children
            // found since the first plan are settled and uncontended, so
            // a root's writer is not starved by writers of new children.
            let plan = loop {
                let plan =
                    links::plan(link_writes(writes, datasets), &state, true).and_then(|mut p| {
                        matview::plan_views(&mut p, datasets, writes, true)?;
                        Ok(p)
                    });
                let plan = match plan {
                    Ok(p) => p,
                    Err(e) => {
                        ctx.locks.release_all(txn);
                        return Err(e);
                    }
                };
                let enlist: Vec<Arc<Dataset>> = plan
                    .cascade
                    .iter()
                    .map(|(d, _)| d)
                    .chain(plan.views.iter().map(|(d, ..)| d))
                    .filter(|d| !datasets.contains_key(&d.id))
                    .cloned()
                    .collect();
                if plan.covered_by(&held) && enlist.is_empty() {
                    break plan;
                }
                let took = enlist.is_empty()
                    && plan.names.iter().all(|&n| {
                        held.contains(&n) || (ctx.locks.try_lock_x(txn, n) && held.insert(n))
                    });
                if !took {
                    ctx.locks.release_all(txn);
                    return Ok(Attempt::Again {
                        enlist,
                        names: plan.names,
                    });
                }
            };
            if let Err(e) = plan.verify(&state) {
                ctx.locks.release_all(txn);
                return Err(e);
            }
            roots = plan.roots;
            for (d, k) in plan.cascade {
                writes.insert((d.id, k), Pending::Delete);
            }
            for (d, k, v) in plan.views {
                writes.insert((d.id, k), v.map_or(Pending::Delete, Pending::Upsert));
            }
        }
        // Validate: every key read still has the version read.
        for ((id, key), seen) in reads {
            let Some(ds) = datasets.get(id) else { continue };
            let now = match ds.version_locked(key) {
                Ok(v) => v,
                Err(e) => {
                    ctx.locks.release_all(txn);
                    return Err(e);
                }
            };
            if now != *seen {
                ctx.locks.release_all(txn);
                return Err(ds.conflict(key));
            }
        }
        // Apply, dataset by dataset in key order.
        let mut works: Vec<(&Arc<Dataset>, TxnWork)> = Vec::new();
        let mut applied = 0usize;
        let mut failure = None;
        for ((id, key), p) in writes.iter() {
            let Some(ds) = datasets.get(id) else {
                continue;
            };
            if works.last().is_none_or(|(d, _)| d.id != *id) {
                // Eager-index value locks are ordered across the whole
                // transaction.
                let value_lock_max = works.last().and_then(|(_, w)| w.value_lock_max);
                works.push((
                    ds,
                    TxnWork {
                        value_lock_max,
                        defer_unique: true,
                        ..Default::default()
                    },
                ));
            }
            let Some((_, work)) = works.last_mut() else {
                break;
            };
            let op = match p {
                Pending::Insert(v) => WriteOp::Insert(key, v),
                Pending::Upsert(v) => WriteOp::Upsert(key, v),
                Pending::InsertIgnore(v) => WriteOp::InsertIgnore(key, v),
                Pending::Delete => WriteOp::Delete(key),
            };
            match ds.apply(txn, &op, work, true) {
                Ok(did) => applied += usize::from(did),
                Err(e) => {
                    failure = Some(e);
                    break;
                }
            }
        }
        // Unique values are checked once every record has its final value
        // (records of one transaction may trade values).
        if failure.is_none() {
            for (ds, work) in works.iter_mut() {
                if let Err(e) = ds.run_unique_checks(work) {
                    failure = Some(e);
                    break;
                }
            }
        }
        let mems: Vec<Arc<MemTable>> = works
            .iter()
            .flat_map(|(_, w)| w.mems.iter().cloned())
            .collect();
        if let Some(e) = failure {
            for (ds, work) in works.iter_mut().rev() {
                ds.undo(work);
            }
            ctx.abort(txn, &mems);
            for (ds, work) in &works {
                ds.group.charge(work.cost)?;
            }
            return Err(e);
        }
        let h = ctx.commit(txn, &mems, true);
        for (ds, work) in &works {
            ds.group.charge(work.cost)?;
        }
        h.acknowledge(ctx.durability)?;
        Ok(Attempt::Done(CommitInfo {
            writes: applied,
            validated: reads.len(),
            root_locks: roots,
        }))
    }

    /// A read-only transaction commits if every key it read still has the
    /// version it read. Re-read in turn, without locks: each key then kept
    /// its version from its read to its re-read, and all those intervals
    /// share the instants between the last read and the first re-read, so
    /// the values read were all current together then.
    fn validate_read_only(&self, reads: &HashMap<Slot, Option<u64>>) -> Result<CommitInfo> {
        for ((id, key), seen) in reads {
            let Some(ds) = self.datasets.get(id) else {
                continue;
            };
            let now = ds.committed_entry(key)?.map(|e| e.seq);
            if now != *seen {
                return Err(ds.conflict(key));
            }
        }
        Ok(CommitInfo {
            writes: 0,
            validated: reads.len(),
            root_locks: 0,
        })
    }
}

/// Results of [`Transaction::query`].
pub enum TxnQuery {
    /// The transaction wrote nothing to the dataset: the index's stream.
    Stream(Box<QueryResults>),
    /// Committed hits overlaid with the transaction's writes.
    Collected(std::vec::IntoIter<QueryHit>),
}

impl Iterator for TxnQuery {
    type Item = Result<QueryHit>;
    fn next(&mut self) -> Option<Result<QueryHit>> {
        match self {
            TxnQuery::Stream(s) => s.next(),
            TxnQuery::Collected(v) => v.next().map(Ok),
        }
    }
}

/// (encoded key, encoded record, version): the version is `None` for the
/// transaction's own write.
pub type TxnVersioned = (Vec<u8>, Vec<u8>, Option<u64>);

/// A scan as a transaction sees it: committed records merged with its own
/// buffered writes (which win).
pub struct TxnScan {
    inner: DatasetScan,
    /// The transaction's own writes in the scan's order.
    buffered: std::collections::VecDeque<(Vec<u8>, Option<Vec<u8>>)>,
    /// The next committed record (key, value, version), read ahead.
    head: Option<(Vec<u8>, Vec<u8>, u64)>,
    /// Descending key order.
    rev: bool,
}

impl TxnScan {
    /// Next (encoded key, encoded record, version): the version is the
    /// committed record's sequence number, `None` for the transaction's own
    /// write.
    pub fn next_versioned(&mut self) -> Result<Option<TxnVersioned>> {
        loop {
            if self.head.is_none() {
                self.head = self.inner.next_versioned()?;
            }
            let take_own = match (&self.head, self.buffered.front()) {
                (None, None) => return Ok(None),
                (None, Some(_)) => true,
                (Some(_), None) => false,
                (Some((ck, _, _)), Some((bk, _))) => {
                    if self.rev {
                        bk >= ck
                    } else {
                        bk <= ck
                    }
                }
            };
            if take_own {
                let Some((k, v)) = self.buffered.pop_front() else {
                    return Ok(None);
                };
                if self.head.as_ref().is_some_and(|(ck, _, _)| *ck == k) {
                    self.head = None;
                }
                match v {
                    Some(v) => return Ok(Some((k, v, None))),
                    None => continue,
                }
            }
            if let Some((k, v, s)) = self.head.take() {
                return Ok(Some((k, v, Some(s))));
            }
        }
    }
}

impl Iterator for TxnScan {
    type Item = Result<Value>;
    fn next(&mut self) -> Option<Result<Value>> {
        match self.next_versioned() {
            Ok(Some((_, v, _))) => Some(decode_stored(&v)),
            Ok(None) => None,
            Err(e) => Some(Err(e)),
        }
    }
}

impl Dataset {
    pub(super) fn conflict(&self, key: &[u8]) -> Error {
        Error::Conflict {
            dataset: self.name.clone(),
            key: shown_key(key),
        }
    }

    /// How index `index` re-checks a record against `query` (to match a
    /// transaction's own writes).
    pub(super) fn query_recheck(&self, index: &str, query: &Query) -> Result<(IndexDef, Recheck)> {
        let (i, set) = self.index_by_name(index)?;
        let def = set.defs[i].clone();
        let keys = self.query_keys(&def, query)?;
        let r = def.kind.imp().recheck(&def, query, keys)?;
        Ok((def, r))
    }
}
