//! The read path of the primary index: point reads and ordered scans under
//! read committed (read, then an instant S lock; see `docs/architecture.md`).

use super::*;

struct ScanHead {
    key: Vec<u8>,
    value: Vec<u8>,
    seq: u64,
    src: usize,
    /// The scan runs in descending key order.
    rev: bool,
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
    // A max-heap: the smallest key on top, or the largest when `rev`.
    fn cmp(&self, o: &Self) -> CmpOrdering {
        if self.rev {
            self.key.cmp(&o.key)
        } else {
            o.key.cmp(&self.key)
        }
    }
}

/// (encoded key, encoded record, sequence number of the record's version).
pub type Versioned = (Vec<u8>, Vec<u8>, u64);

/// An ordered scan over all partitions of a dataset (ascending key order,
/// or descending: [`Dataset::scan_raw_rev`]). Yields decoded records;
/// [`DatasetScan::next_raw`] yields encoded (key, record) pairs.
pub struct DatasetScan {
    scans: Vec<TreeScan>,
    heap: BinaryHeap<ScanHead>,
    ds: Arc<Dataset>,
    lo: Bound<Vec<u8>>,
    hi: Bound<Vec<u8>>,
    rev: bool,
    /// Abort epoch sampled before any buffered entry was read.
    epoch: u64,
    /// Instant S grants not yet added to the lock manager's counters.
    granted: u64,
    /// Records expired by this clock are not yielded (`super::ttl`).
    hide: Option<(Arc<ttl::Ttl>, i64)>,
}

/// Grants a scan adds to the lock statistics at once, at most (so
/// `silt stats` follows a long scan).
const GRANTS_PER_FLUSH: u64 = 1 << 16;

impl Drop for DatasetScan {
    fn drop(&mut self) {
        self.ds.txn.locks.count_s_instant(self.granted);
    }
}

impl DatasetScan {
    /// Re-read from `from` (inclusive) with fresh cursors.
    fn restart(&mut self, from: &[u8]) -> Result<()> {
        self.epoch = self.ds.txn.abort_epoch();
        let from = Bound::Included(from.to_vec());
        self.scans = if self.rev {
            self.ds.partition_scans(&self.lo, &from, true)?
        } else {
            self.ds.partition_scans(&from, &self.hi, false)?
        };
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
                    seq: e.seq,
                    value: e.value,
                    src: i,
                    rev: self.rev,
                });
            }
        }
        Ok(())
    }

    /// Next (encoded key, encoded record). Read committed: a record whose key
    /// is X-locked by a transaction that has not committed is re-read after
    /// the lock is released (it may then be gone or changed).
    pub fn next_raw(&mut self) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        Ok(self.next_versioned()?.map(|(k, v, _)| (k, v)))
    }

    /// As [`DatasetScan::next_raw`], with the sequence number of the
    /// record's version (what a transaction validates at commit).
    pub fn next_versioned(&mut self) -> Result<Option<Versioned>> {
        loop {
            let Some((k, v, seq)) = self.next_unlocked()? else {
                return Ok(None);
            };
            let locks = &self.ds.txn.locks;
            let id = self.ds.id;
            let granted = locks.try_s_instant_uncounted(|| LockManager::name(id, &k));
            if granted {
                self.granted += 1;
                if self.granted >= GRANTS_PER_FLUSH {
                    locks.count_s_instant(std::mem::take(&mut self.granted));
                }
            }
            if granted && self.ds.txn.abort_epoch() == self.epoch {
                if let Some((t, now)) = &self.hide
                    && t.expired_at(&v, Some(*now))
                {
                    continue;
                }
                return Ok(Some((k, v, seq)));
            }
            // A writer is in flight (wait for it), or an abort may have undone
            // something we buffered: re-read from this key.
            if !granted {
                locks.lock_s_instant(LockManager::name(id, &k));
            }
            self.restart(&k)?;
        }
    }

    fn next_unlocked(&mut self) -> Result<Option<Versioned>> {
        // One partition: its scan's order is the order (its first entry
        // went on the heap when the scan was opened or restarted).
        if self.scans.len() == 1 {
            if let Some(top) = self.heap.pop() {
                return Ok(Some((top.key, top.value, top.seq)));
            }
            return Ok(self.scans[0]
                .next_entry()?
                .map(|(k, e)| (k, e.value, e.seq)));
        }
        let Some(top) = self.heap.pop() else {
            return Ok(None);
        };
        if let Some((key, e)) = self.scans[top.src].next_entry()? {
            self.heap.push(ScanHead {
                key,
                seq: e.seq,
                value: e.value,
                src: top.src,
                rev: self.rev,
            });
        }
        Ok(Some((top.key, top.value, top.seq)))
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

impl Dataset {
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
                return Ok(e.filter(|e| !e.is_delete() && self.visible(&e.value)));
            }
            self.txn.locks.lock_s_instant(name);
        }
    }

    /// The sequence number of the live version of `key`, read without
    /// locking: only for a caller that holds the key's X lock (a committing
    /// transaction validating what it read).
    pub(super) fn version_locked(&self, key: &[u8]) -> Result<Option<u64>> {
        let e = self.partition_of(key).primary.get_entry(key)?;
        Ok(e.filter(|e| !e.is_delete()).map(|e| e.seq))
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
        if pk.len() > self.def().primary_key.len() {
            return Err(Error::invalid(
                None,
                "scan bound has more fields than the primary key",
            ));
        }
        let mut key = Vec::new();
        for (name, v) in self.def().primary_key.iter().zip(pk) {
            let v = match self.def().field_type(name) {
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
        self.open_scan(lo, hi, false, true)
    }

    /// [`Dataset::scan_raw`] in descending key order.
    pub fn scan_raw_rev(
        self: &Arc<Self>,
        lo: Bound<Vec<u8>>,
        hi: Bound<Vec<u8>>,
    ) -> Result<DatasetScan> {
        self.open_scan(lo, hi, true, true)
    }

    /// A scan; `hide`: without the records the ttl expired.
    pub(super) fn open_scan(
        self: &Arc<Self>,
        lo: Bound<Vec<u8>>,
        hi: Bound<Vec<u8>>,
        rev: bool,
        hide: bool,
    ) -> Result<DatasetScan> {
        let epoch = self.txn.abort_epoch();
        let hide = match self.ttl() {
            Some(t) if hide => t.now().map(|n| (t, n)),
            _ => None,
        };
        let scans = self.partition_scans(&lo, &hi, rev)?;
        let mut s = DatasetScan {
            scans,
            heap: BinaryHeap::new(),
            ds: self.clone(),
            lo,
            hi,
            rev,
            epoch,
            granted: 0,
            hide,
        };
        s.fill_heap()?;
        Ok(s)
    }

    /// About how many records the dataset holds, from its components'
    /// counts ([`LsmTree::approx_live_count`]): for a planner's estimates,
    /// never for answers.
    pub fn approx_count(&self) -> u64 {
        self.partitions
            .iter()
            .fold(0u64, |n, p| n.saturating_add(p.primary.approx_live_count()))
    }

    /// The number of records, committed, without reading them, when the
    /// component metadata of every partition decides it
    /// ([`LsmTree::exact_live_count`]) and no writer is in flight (its
    /// uncommitted versions may be in the components); `None` otherwise.
    /// For `COUNT(*)`: the answer is the dataset as of this call, as a scan
    /// starting now would see it under read committed. Never with a ttl
    /// (the metadata counts expired records too).
    pub fn exact_count(&self) -> Option<u64> {
        if self.has_ttl() {
            return None;
        }
        // First: a writer that locks after this check writes after it too
        // (the count then stands for the moment before that write), and
        // an abort undoes while it still holds its locks.
        if self.txn.locks.any_held() {
            return None;
        }
        let mut n = 0u64;
        for p in &self.partitions {
            n = n.checked_add(p.primary.exact_live_count()?)?;
        }
        // A writer that locked and wrote while the snapshots were taken
        // may have left a version in one partition and not yet in another.
        if self.txn.locks.any_held() {
            return None;
        }
        Some(n)
    }

    /// The smallest and largest value of each of `fields` over the live
    /// records, from the zone maps of the primary's components (embedded
    /// and brin indexes keep them), when they decide it exactly: no record
    /// in memory, components whose key ranges do not overlap, zone maps of
    /// every field in every component, no ttl, no writer holding a lock.
    /// `None` when they do not; per field `None` when no record has a
    /// value. What `SELECT min(f), max(f)` reads instead of the records.
    pub fn exact_extremes(&self, fields: &[String]) -> Option<Vec<Option<(Value, Value)>>> {
        if self.has_ttl() || self.txn.locks.any_held() {
            return None;
        }
        let mut out: Vec<Option<(Vec<u8>, Vec<u8>)>> = vec![None; fields.len()];
        for p in &self.partitions {
            for c in p.primary.exact_components()?.iter() {
                if c.meta().entries == 0 {
                    continue;
                }
                let filters = crate::lsm::kind::block_filters(c)?;
                for (f, acc) in fields.iter().zip(out.iter_mut()) {
                    let Some((lo, hi)) = filters.field(f)?.zone(c.aux()) else {
                        continue;
                    };
                    match acc {
                        Some((a, b)) => {
                            if lo < a.as_slice() {
                                *a = lo.to_vec();
                            }
                            if hi > b.as_slice() {
                                *b = hi.to_vec();
                            }
                        }
                        None => *acc = Some((lo.to_vec(), hi.to_vec())),
                    }
                }
            }
        }
        if self.txn.locks.any_held() {
            return None;
        }
        let one = |b: &[u8]| -> Option<Value> { value::decode_key(b).ok()?.into_iter().next() };
        out.into_iter()
            .map(|z| match z {
                None => Some(None),
                Some((a, b)) => Some(Some((one(&a)?, one(&b)?))),
            })
            .collect()
    }

    /// Encoded keys that split the primary keys within `[lo, hi)` into at
    /// most `parts` ranges of about the same number of records, each at
    /// least `min_blocks` data blocks long; empty when the range is smaller.
    /// Read from the block index of the largest disk component (keys are
    /// spread over partitions by hash, so any partition's distribution
    /// stands for all); records only in memory are not counted. For
    /// parallel scans: the ranges `[lo, k1)`, `[k1, k2)`, ... `[kn, hi)`
    /// together cover `[lo, hi)` exactly, whatever the keys.
    pub fn split_keys(
        &self,
        lo: Bound<&[u8]>,
        hi: Bound<&[u8]>,
        parts: usize,
        min_blocks: usize,
    ) -> Vec<Vec<u8>> {
        let largest = self
            .partitions
            .iter()
            .flat_map(|p| {
                p.primary
                    .snapshot()
                    .disk
                    .iter()
                    .cloned()
                    .collect::<Vec<_>>()
            })
            .max_by_key(|c| c.meta().entries);
        let Some(c) = largest else {
            return Vec::new();
        };
        let ends = c.block_ends_within(lo, hi);
        let parts = parts.min(ends.len() / min_blocks.max(1));
        if parts < 2 {
            return Vec::new();
        }
        // A block's last key starts the next part (ranges are half-open).
        let mut keys: Vec<Vec<u8>> = (1..parts)
            .filter_map(|i| ends.get(i * ends.len() / parts))
            .map(|k| k.to_vec())
            .collect();
        keys.dedup();
        keys
    }

    pub(super) fn partition_scans(
        &self,
        lo: &Bound<Vec<u8>>,
        hi: &Bound<Vec<u8>>,
        rev: bool,
    ) -> Result<Vec<TreeScan>> {
        let lo = lo.as_ref().map(Vec::as_slice);
        let mut scans = Vec::with_capacity(self.partitions.len());
        for p in &self.partitions {
            let snap = p.primary.snapshot();
            scans.push(if rev {
                p.primary.scan_rev(&snap, lo, hi.clone(), false)?
            } else {
                p.primary.scan(&snap, lo, hi.clone(), false)?
            });
        }
        Ok(scans)
    }
}
