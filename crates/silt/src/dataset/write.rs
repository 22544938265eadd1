//! The write path: a record's transaction (lock, check, log, apply to the
//! primary and every secondary index, commit or undo), single writes and
//! batches (Algorithm 1 of 000 §3.4.2, or atomic).

use super::*;

/// Largest payload of one secondary-index `UpdateBatch` log record (about):
/// a record with more entries in one index is logged in several.
pub(super) const SEC_BATCH_LOG_BYTES: usize = 1 << 20;

/// What a batch write does with each record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WriteMode {
    Insert,
    Upsert,
    /// Insert unless the key is live, which is left as it is (not an error,
    /// not counted as committed): SQL's `ON CONFLICT DO NOTHING`.
    InsertIgnore,
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

/// An atomic batch applied and committed whose acknowledgment is still to
/// come (under `sync` durability, the log flush of its COMMIT): see
/// [`Dataset::write_prepared_unacknowledged`]. Dropping it without
/// [`PendingAck::wait`] forgets whether the batch became durable.
pub struct PendingAck {
    handle: crate::txn::ctx::CommitHandle,
    durability: crate::txn::Durability,
}

impl std::fmt::Debug for PendingAck {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PendingAck({})", self.durability)
    }
}

impl PendingAck {
    /// Wait until the batch is durable as the durability mode promises
    /// (or report why it never will be).
    pub fn wait(self) -> Result<()> {
        self.handle.acknowledge(self.durability)
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

/// One record operation; its key and value are borrowed from wherever
/// the caller keeps them (a record's own buffers, a [`PreparedBatch`]).
#[derive(Clone, Copy)]
pub(super) enum WriteOp<'a> {
    Insert(&'a [u8], &'a [u8]),
    Upsert(&'a [u8], &'a [u8]),
    Delete(&'a [u8]),
    InsertIgnore(&'a [u8], &'a [u8]),
    /// Delete the record if its ttl expired it at the given clock (the
    /// sweep, `super::ttl`), checked under its lock.
    Expire(&'a [u8], i64),
}

impl<'a> WriteOp<'a> {
    fn key(&self) -> &'a [u8] {
        match *self {
            WriteOp::Insert(k, _) | WriteOp::Upsert(k, _) | WriteOp::Delete(k) => k,
            WriteOp::InsertIgnore(k, _) | WriteOp::Expire(k, _) => k,
        }
    }

    fn of(mode: WriteMode, key: &'a [u8], value: &'a [u8]) -> WriteOp<'a> {
        match mode {
            WriteMode::Insert => WriteOp::Insert(key, value),
            WriteMode::Upsert => WriteOp::Upsert(key, value),
            WriteMode::InsertIgnore => WriteOp::InsertIgnore(key, value),
        }
    }
}

/// Under which definition a batch's records were prepared, checked under
/// the DDL lock before they are written.
#[derive(Clone, Copy)]
pub(super) enum PreparedUnder<'a> {
    /// As each is written (always the current one).
    Now,
    /// Under this one, which a caller planned against.
    Def(&'a Arc<DatasetDef>),
    /// Ahead of the write, into this batch.
    Batch(&'a PreparedBatch),
}

/// A record's encoded key and value in a batch write, wherever they are
/// kept: its own buffers ([`Dataset::prepare`]) or a [`PreparedBatch`].
pub(super) trait KeyValue {
    fn kv(&self) -> (&[u8], &[u8]);
}

impl KeyValue for (Vec<u8>, Vec<u8>) {
    fn kv(&self) -> (&[u8], &[u8]) {
        (&self.0, &self.1)
    }
}

impl KeyValue for (&[u8], &[u8]) {
    fn kv(&self) -> (&[u8], &[u8]) {
        (self.0, self.1)
    }
}

/// One undo step of a transaction: restore `prior` (None = absent) at `key`.
pub(super) struct Undo {
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
pub(super) struct TxnWork {
    pub(super) mems: Vec<Arc<MemTable>>,
    pub(super) undo: Vec<Undo>,
    pub(super) cost: u64,
    /// Largest eager-index value lock name held (see `recency`).
    pub(super) value_lock_max: Option<u64>,
    /// Check unique indexes once every write of the transaction is applied
    /// (a multi-record transaction: records may trade values), collecting
    /// the checks in `unique_checks` (see `unique`).
    pub(super) defer_unique: bool,
    pub(super) unique_checks: Vec<super::unique::UniqueCheck>,
}

impl TxnWork {
    /// Note that a write of the transaction went into `mem`, which the
    /// write entered. A memtable the transaction already holds (the last
    /// one noted: a batch writes into one memtable until it rotates) is
    /// left again at once, so the transaction stays entered once and
    /// `mems` lists each memtable once, not once per record.
    pub(super) fn note_mem(&mut self, mem: &Arc<MemTable>) {
        if self.mems.last().is_some_and(|m| Arc::ptr_eq(m, mem)) {
            mem.leave();
        } else {
            self.mems.push(mem.clone());
        }
    }
}

impl Dataset {
    pub(super) fn next_seq(&self) -> u64 {
        self.seq.fetch_add(1, Ordering::SeqCst)
    }

    pub(super) fn duplicate(&self, key: &[u8]) -> Error {
        Error::DuplicateKey {
            dataset: self.name.clone(),
            key: shown_key(key),
        }
    }

    /// Apply one record operation inside transaction `txn`, whose X lock on the
    /// key is held. Every index operation is logged (UPDATE) before it is
    /// applied. Returns false when there was nothing to do (delete of an
    /// absent key). With `track_undo`, remembers how to undo it.
    pub(super) fn apply(
        &self,
        txn: u64,
        op: &WriteOp<'_>,
        work: &mut TxnWork,
        track_undo: bool,
    ) -> Result<bool> {
        self.apply_with(txn, op, work, track_undo, None)
    }

    /// [`Dataset::apply`] given, with `written`, the record the op's bytes
    /// encode (so the indexes need not decode it again).
    fn apply_with(
        &self,
        txn: u64,
        op: &WriteOp<'_>,
        work: &mut TxnWork,
        track_undo: bool,
        written: Option<&Value>,
    ) -> Result<bool> {
        let key = op.key();
        let pidx = self.partition_index(key);
        let tree = &self.partitions[pidx].primary;
        tree.check_failed()?;
        let idx = self.indexes.read().clone();
        let has_sec = !idx.defs.is_empty();
        let prior = match op {
            WriteOp::Insert(..)
            | WriteOp::InsertIgnore(..)
            | WriteOp::Delete(_)
            | WriteOp::Expire(..) => tree.check_entry(key)?,
            WriteOp::Upsert(..) if track_undo || has_sec => tree.check_entry(key)?,
            WriteOp::Upsert(..) => None,
        };
        let stored = prior.as_ref().filter(|e| !e.is_delete());
        let ttl = self.ttl();
        // An expired record is absent to an insert (replaced, its index
        // entries removed); a delete removes it all the same.
        let live = stored.is_some_and(|e| {
            ttl.as_ref()
                .is_none_or(|t| !t.expired_at(&e.value, t.now()))
        });
        match op {
            WriteOp::Insert(..) if live => return Err(self.duplicate(key)),
            WriteOp::Delete(_) if stored.is_none() => return Ok(false),
            WriteOp::InsertIgnore(..) if live => return Ok(false),
            WriteOp::Expire(_, at) => {
                let expired = match (stored, &ttl) {
                    (Some(e), Some(t)) => t.expired_at(&e.value, Some(*at)),
                    _ => false,
                };
                if !expired {
                    return Ok(false);
                }
            }
            _ => {}
        }
        let expiring = matches!(op, WriteOp::Expire(..));
        let op = &match *op {
            WriteOp::Expire(k, _) => WriteOp::Delete(k),
            op => op,
        };
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
            let decoded;
            let new_rec = match (op, written) {
                (WriteOp::Delete(_) | WriteOp::Expire(..), _) => None,
                (_, Some(r)) => Some(r),
                (
                    WriteOp::Insert(_, v) | WriteOp::Upsert(_, v) | WriteOp::InsertIgnore(_, v),
                    None,
                ) => {
                    decoded = value::decode_value(v)?;
                    Some(&decoded)
                }
            };
            match self.check_unique(txn, &idx, key, old_rec.as_ref(), new_rec, work) {
                // SQL's ON CONFLICT DO NOTHING skips a taken unique value too.
                Err(Error::DuplicateValue { .. }) if matches!(op, WriteOp::InsertIgnore(..)) => {
                    return Ok(false);
                }
                r => r?,
            }
            for (i, d) in idx.defs.iter().enumerate() {
                if d.kind.is_recency() {
                    // Maintained by `recency_prepare` / `recency_apply`.
                    continue;
                }
                let old_e = match &old_rec {
                    Some(r) => d.entries(r, key).unwrap_or_default(),
                    None => Vec::new(),
                };
                let new_e = match new_rec {
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
            rec_ops = self.recency_prepare(txn, &idx, old_rec.as_ref(), new_rec, expiring, work)?;
        }
        let seq = self.next_seq();
        let (kind, log_op, value): (_, _, &[u8]) = match op {
            WriteOp::Insert(_, v) | WriteOp::Upsert(_, v) | WriteOp::InsertIgnore(_, v) => {
                (EntryKind::Put, LogOp::Put, *v)
            }
            WriteOp::Delete(_) | WriteOp::Expire(..) => (EntryKind::Delete, LogOp::Delete, &[]),
        };
        if let (Some(t), EntryKind::Put) = (&ttl, kind) {
            match written {
                Some(r) => t.saw_value(r),
                None => t.saw(value),
            }
        }
        let wal = &self.txn.wal;
        let entry = EntryRef { seq, kind, value };
        let (mem, cost) = tree.put_logged(key, entry, || {
            wal.append_update(&UpdateRef {
                txn,
                dataset: self.id,
                partition: pidx as u32,
                index: 0,
                op: log_op,
                key,
                seq,
                value,
            })
        })?;
        work.note_mem(&mem);
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
            let record = match op {
                WriteOp::Insert(_, v) | WriteOp::Upsert(_, v) | WriteOp::InsertIgnore(_, v) => {
                    Some(*v)
                }
                WriteOp::Delete(_) | WriteOp::Expire(..) => None,
            };
            self.recency_apply(txn, pidx, seq, key, record, rec_ops, &idx, work)?;
        }
        Ok(true)
    }

    /// Log one secondary-index operation (an UPDATE record for index
    /// `index_id`), apply it to the index's active memtable and remember the
    /// memtable's exact prior content for undo. `ctx` = (txn, partition, index id).
    pub(super) fn write_secondary(
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
        let wal = &self.txn.wal;
        let (mem, cost, prior) = tree.put_logged_prior(&key, e.as_ref(), || {
            wal.append_update(&UpdateRef {
                txn,
                dataset: self.id,
                partition: pidx as u32,
                index: index_id,
                op,
                key: &key,
                seq: e.seq,
                value: &e.value,
            })
        })?;
        work.note_mem(&mem);
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
    pub(super) fn write_secondary_batch(
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
            work.note_mem(&mem);
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
    pub(super) fn undo(&self, work: &mut TxnWork) {
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
    pub(super) fn write_one(&self, op: WriteOp<'_>) -> Result<bool> {
        let _ddl = self.ddl.read();
        self.write_one_locked(op)
    }

    /// [`Dataset::write_one`] for a caller holding the DDL lock shared
    /// (since it prepared the record).
    fn write_one_locked(&self, op: WriteOp<'_>) -> Result<bool> {
        self.write_one_kept(op, None)
    }

    /// [`Dataset::write_one_locked`] with the record the op's bytes encode.
    fn write_one_kept(&self, op: WriteOp<'_>, written: Option<&Value>) -> Result<bool> {
        if let Some(links) = self.links()
            && !matches!(op, WriteOp::Expire(..))
        {
            return self.write_linked(&links, &[op]).map(|n| n > 0);
        }
        let ctx = &self.txn;
        let txn = ctx.begin();
        ctx.locks.lock_x(txn, LockManager::name(self.id, op.key()));
        let mut work = TxnWork::default();
        match self.apply_with(txn, &op, &mut work, false, written) {
            Ok(true) => {
                let h = ctx.commit(txn, &work.mems, true);
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
        // Prepared under the lock: no `ALTER` comes between the record's
        // checks and its write.
        let _ddl = self.ddl.read();
        let (key, bytes, record) = self.prepare_single(&self.def(), record)?;
        self.write_one_kept(WriteOp::Insert(&key, &bytes), Some(&record))
            .map(|_| ())
    }

    /// Insert or replace a record.
    pub fn upsert(&self, record: Value) -> Result<()> {
        let _ddl = self.ddl.read();
        let (key, bytes, record) = self.prepare_single(&self.def(), record)?;
        self.write_one_kept(WriteOp::Upsert(&key, &bytes), Some(&record))
            .map(|_| ())
    }

    /// Delete the record with this primary key; returns whether it existed.
    pub fn delete(&self, pk: &[Value]) -> Result<bool> {
        let key = self.encode_pk(pk)?;
        self.write_one(WriteOp::Delete(&key))
    }

    /// Write many records. Non-atomic batches make each record its own
    /// transaction and follow the deadlock-free protocol of Algorithm 1
    /// (000 §3.4.2): try-lock; on refusal, make this thread's appended
    /// COMMITs durable with a WAIT record (its locks are then released), and
    /// only then block on the lock. COMMITs are appended without waiting, so
    /// a batch shares fsyncs (group commit). Atomic batches lock every key in
    /// sorted lock-name order and commit once, or undo everything.
    pub fn write_batch(&self, records: Vec<Value>, opts: BatchOptions) -> Result<BatchReport> {
        // Each record is prepared when the write pulls it, under the DDL
        // lock.
        let prepared = records.into_iter().map(|r| self.prepare(r));
        self.write_ops(opts, prepared, PreparedUnder::Now)
    }

    /// [`Dataset::write_batch`] of records a caller built against
    /// definition `def` (SQL's statement planned against it): prepared
    /// under it, and refused with [`Error::Altered`] (nothing written) if
    /// an `ALTER` has replaced it.
    pub fn write_batch_under(
        &self,
        def: &Arc<DatasetDef>,
        records: Vec<Value>,
        opts: BatchOptions,
    ) -> Result<BatchReport> {
        let prepared = records.into_iter().map(|r| self.prepare_under(def, r));
        self.write_ops(opts, prepared, PreparedUnder::Def(def))
    }

    /// Refuse records prepared under a definition an `ALTER` has replaced
    /// (the caller holds the DDL lock shared).
    fn check_prepared(&self, under: PreparedUnder<'_>) -> Result<()> {
        match under {
            PreparedUnder::Now => Ok(()),
            PreparedUnder::Def(d) => self.check_shape(d),
            PreparedUnder::Batch(b) => self.check_batch_shape(b),
        }
    }

    /// Write a batch of records in `opts.mode`, prepared (encoded) as
    /// `under` says; a record that failed to prepare fails in its place.
    /// Every record is refused (nothing written) if an `ALTER` replaced
    /// that definition, and no `ALTER` runs while the batch is written: one
    /// taking the DDL lock between two records split a two-row `INSERT`,
    /// its first row committed and its second refused.
    pub(super) fn write_ops<T: KeyValue>(
        &self,
        opts: BatchOptions,
        ops: impl ExactSizeIterator<Item = Result<T>>,
        under: PreparedUnder<'_>,
    ) -> Result<BatchReport> {
        if opts.atomic {
            return self.write_ops_atomic(opts.mode, ops, under);
        }
        self.write_ops_as(opts, ops, under, |k, v| WriteOp::of(opts.mode, k, v))
    }

    /// [`Dataset::write_ops`], not atomic, each (key, value) written as
    /// `op` makes it.
    pub(super) fn write_ops_as<T: KeyValue>(
        &self,
        opts: BatchOptions,
        ops: impl ExactSizeIterator<Item = Result<T>>,
        under: PreparedUnder<'_>,
        op: impl for<'k> Fn(&'k [u8], &'k [u8]) -> WriteOp<'k>,
    ) -> Result<BatchReport> {
        let make = op;
        let ctx = &self.txn;
        let mut report = BatchReport::default();
        let mut handles = Vec::new();
        let total = ops.len();
        let mut ops = ops.enumerate();
        // Held for the whole batch: every record sees the same definition.
        let ddl = self.ddl.read();
        // A linked dataset's records commit as transactions (`links`), each
        // acknowledged before the next.
        let links = self.links();
        let mut linked_committed = 0;
        loop {
            let Some((i, op)) = ops.next() else { break };
            let op = op.and_then(|item| {
                self.check_prepared(under)?;
                Ok(item)
            });
            let item = match op {
                Ok(item) => item,
                Err(e) => {
                    report.failed.push((i, e));
                    if opts.stop_on_error {
                        report.not_attempted = total - i - 1;
                        break;
                    }
                    continue;
                }
            };
            let (key, value) = item.kv();
            let op = make(key, value);
            if let Some(links) = links
                .as_ref()
                .filter(|_| !matches!(op, WriteOp::Expire(..)))
            {
                match self.write_linked(links, &[op]) {
                    Ok(n) => linked_committed += n.min(1),
                    Err(e @ (Error::Closed(_) | Error::Io { .. })) => return Err(e),
                    Err(e) => {
                        report.failed.push((i, e));
                        if opts.stop_on_error {
                            report.not_attempted = total - i - 1;
                            break;
                        }
                    }
                }
                continue;
            }
            let txn = ctx.begin();
            let name = LockManager::name(self.id, op.key());
            if !ctx.locks.try_lock_x(txn, name) {
                ctx.wait_for_commits(txn)?;
                ctx.locks.lock_x(txn, name);
            }
            let mut work = TxnWork::default();
            match self.apply(txn, &op, &mut work, false) {
                Ok(true) => {
                    // The last record's commit is led by this thread when
                    // it waits; the flusher starts on the earlier ones.
                    handles.push(ctx.commit(txn, &work.mems, i + 1 == total));
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
        drop(ddl);
        report.committed += linked_committed;
        for h in handles {
            match ctx.durability {
                crate::txn::Durability::Sync => h.wait()?,
                d => h.acknowledge(d)?,
            }
            report.committed += 1;
        }
        Ok(report)
    }

    fn write_ops_atomic<T: KeyValue>(
        &self,
        mode: WriteMode,
        prepared: impl ExactSizeIterator<Item = Result<T>>,
        under: PreparedUnder<'_>,
    ) -> Result<BatchReport> {
        let (report, ack) = self.write_ops_atomic_unacked(mode, prepared, under, true)?;
        if let Some(a) = ack {
            a.wait()?;
        }
        Ok(report)
    }

    /// One transaction writing every record of `prepared` in `mode`, or
    /// (at the first failure) none; returns before the acknowledgment (see
    /// [`Dataset::write_prepared_unacknowledged`]). `lead`: the caller
    /// waits for the acknowledgment next and writes the log itself (see
    /// `TxnContext::commit`); without it the flusher starts on the COMMIT
    /// at once, while the caller does other work.
    pub(super) fn write_ops_atomic_unacked<T: KeyValue>(
        &self,
        mode: WriteMode,
        prepared: impl ExactSizeIterator<Item = Result<T>>,
        under: PreparedUnder<'_>,
        lead: bool,
    ) -> Result<(BatchReport, Option<PendingAck>)> {
        let ctx = &self.txn;
        let mut report = BatchReport::default();
        let total = prepared.len();
        let _ddl = self.ddl.read();
        self.check_prepared(under)?;
        let mut items = Vec::with_capacity(total);
        for (i, item) in prepared.enumerate() {
            match item {
                Ok(item) => items.push(item),
                Err(e) => {
                    report.failed.push((i, e));
                    report.not_attempted = total - report.failed.len();
                    return Ok((report, None));
                }
            }
        }
        let ops: Vec<WriteOp<'_>> = items
            .iter()
            .map(|item| {
                let (key, value) = item.kv();
                WriteOp::of(mode, key, value)
            })
            .collect();
        if let Some(links) = self.links() {
            return match self.write_linked(&links, &ops) {
                Ok(n) => {
                    report.committed = n;
                    Ok((report, None))
                }
                Err(e @ (Error::Closed(_) | Error::Io { .. })) => Err(e),
                Err(e) => {
                    report.failed.push((0, e));
                    report.not_attempted = total.saturating_sub(1);
                    Ok((report, None))
                }
            };
        }
        let txn = ctx.begin();
        let mut names: Vec<u64> = ops
            .iter()
            .map(|o| LockManager::name(self.id, o.key()))
            .collect();
        ctx.locks.lock_x_all(txn, &mut names);
        // Sized for the batch: grown record by record, the undo list was
        // reallocated into fresh (page-faulting) memory batch after batch.
        let mut work = TxnWork {
            undo: Vec::with_capacity(ops.len()),
            ..TxnWork::default()
        };
        let mut written = 0;
        for (i, op) in ops.iter().enumerate() {
            let applied = self.apply(txn, op, &mut work, true);
            written += usize::from(matches!(applied, Ok(true)));
            if let Err(e) = applied {
                self.undo(&mut work);
                ctx.abort(txn, &work.mems);
                self.group.charge(work.cost)?;
                if matches!(e, Error::Closed(_) | Error::Io { .. }) {
                    return Err(e);
                }
                report.failed.push((i, e));
                report.not_attempted = total - 1;
                return Ok((report, None));
            }
        }
        let handle = ctx.commit(txn, &work.mems, lead);
        self.group.charge(work.cost)?;
        report.committed = written;
        let ack = PendingAck {
            handle,
            durability: ctx.durability,
        };
        Ok((report, Some(ack)))
    }
}
