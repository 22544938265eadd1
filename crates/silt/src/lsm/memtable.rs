//! The in-memory component: a concurrent skip list of byte keys.

use crate::storage::{Entry, EntryKind};
use parking_lot::RwLock;
use std::collections::BTreeMap;
use std::collections::VecDeque;
use std::ops::Bound;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// A memtable key: the first 16 bytes (zero-padded, big-endian) inline in the
/// skip-list node, then the whole key. Comparing the inline prefix first avoids
/// chasing the key's heap pointer on almost every comparison of a search, which
/// dominated ingest time. The derived order (prefix, then full key) equals the
/// byte order of the keys: a smaller padded prefix means a smaller key, and
/// equal prefixes fall back to comparing the full keys.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct MemKey {
    prefix: u128,
    key: Box<[u8]>,
}

impl MemKey {
    fn new(key: &[u8]) -> MemKey {
        let mut p = [0u8; 16];
        let n = key.len().min(16);
        p[..n].copy_from_slice(&key[..n]);
        MemKey {
            prefix: u128::from_be_bytes(p),
            key: key.into(),
        }
    }
}

/// Approximate per-entry overhead of the skip list (node, tower, allocation headers).
const ENTRY_OVERHEAD: u64 = 80;

#[derive(Debug)]
pub(crate) struct MemValue {
    pub seq: u64,
    pub kind: EntryKind,
    pub value: Vec<u8>,
}

/// One in-memory component. Writers insert concurrently; a newer sequence
/// number always wins for the same key.
#[derive(Debug, Default)]
pub struct MemTable {
    map: RwLock<BTreeMap<MemKey, MemValue>>,
    len: std::sync::atomic::AtomicUsize,
    bytes: AtomicU64,
    min_seq: AtomicU64,
    max_seq: AtomicU64,
    min_lsn: AtomicU64,
    max_lsn: AtomicU64,
}

impl MemTable {
    pub fn new() -> Self {
        MemTable {
            min_seq: AtomicU64::new(u64::MAX),
            min_lsn: AtomicU64::new(u64::MAX),
            ..Default::default()
        }
    }

    /// Insert; returns the number of bytes accounted to the memory budget.
    pub fn insert(&self, key: &[u8], e: Entry, lsn: u64) -> u64 {
        let cost = key.len() as u64 + e.value.len() as u64 + ENTRY_OVERHEAD;
        let seq = e.seq;
        let mk = MemKey::new(key);
        let v = MemValue {
            seq,
            kind: e.kind,
            value: e.value,
        };
        {
            let mut m = self.map.write();
            match m.entry(mk) {
                std::collections::btree_map::Entry::Vacant(slot) => {
                    slot.insert(v);
                    self.len.fetch_add(1, Ordering::Relaxed);
                }
                std::collections::btree_map::Entry::Occupied(mut slot) => {
                    if slot.get().seq <= seq {
                        slot.insert(v);
                    }
                }
            }
        }
        self.bytes.fetch_add(cost, Ordering::Relaxed);
        self.min_seq.fetch_min(seq, Ordering::Relaxed);
        self.max_seq.fetch_max(seq, Ordering::Relaxed);
        if lsn > 0 {
            self.min_lsn.fetch_min(lsn, Ordering::Relaxed);
            self.max_lsn.fetch_max(lsn, Ordering::Relaxed);
        }
        cost
    }

    pub fn get(&self, key: &[u8]) -> Option<Entry> {
        self.map.read().get(&MemKey::new(key)).map(|v| Entry {
            seq: v.seq,
            kind: v.kind,
            value: v.value.clone(),
        })
    }

    pub fn bytes(&self) -> u64 {
        self.bytes.load(Ordering::Relaxed)
    }

    pub fn len(&self) -> usize {
        self.len.load(Ordering::Relaxed)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// (min, max) LSN of the entries, if any carried one.
    pub fn lsn_range(&self) -> Option<(u64, u64)> {
        let lo = self.min_lsn.load(Ordering::Relaxed);
        (lo != u64::MAX).then(|| (lo, self.max_lsn.load(Ordering::Relaxed)))
    }

    /// Visit every entry in key order (used by flush; the table is immutable by then).
    pub fn for_each<E>(
        &self,
        mut f: impl FnMut(&[u8], EntryKind, u64, &[u8]) -> Result<(), E>,
    ) -> Result<(), E> {
        for (k, v) in self.map.read().iter() {
            f(&k.key, v.kind, v.seq, &v.value)?;
        }
        Ok(())
    }
}

/// A cursor over a shared memtable that copies entries out in small batches,
/// so it does not borrow the table (the table may keep receiving writes; the
/// cursor sees a read-committed view).
pub struct MemIter {
    table: Arc<MemTable>,
    buf: VecDeque<(Vec<u8>, Entry)>,
    next_from: Option<Bound<Vec<u8>>>,
}

const BATCH: usize = 256;

impl MemIter {
    pub fn new(table: Arc<MemTable>, start: Bound<&[u8]>) -> Self {
        MemIter {
            table,
            buf: VecDeque::new(),
            next_from: Some(match start {
                Bound::Included(k) => Bound::Included(k.to_vec()),
                Bound::Excluded(k) => Bound::Excluded(k.to_vec()),
                Bound::Unbounded => Bound::Unbounded,
            }),
        }
    }

    fn refill(&mut self) {
        let Some(from) = self.next_from.take() else {
            return;
        };
        let lower = match &from {
            Bound::Included(k) => Bound::Included(MemKey::new(k)),
            Bound::Excluded(k) => Bound::Excluded(MemKey::new(k)),
            Bound::Unbounded => Bound::Unbounded,
        };
        let map = self.table.map.read();
        for (k, v) in map
            .range::<MemKey, _>((lower, Bound::Unbounded))
            .take(BATCH)
        {
            self.buf.push_back((
                k.key.to_vec(),
                Entry {
                    seq: v.seq,
                    kind: v.kind,
                    value: v.value.clone(),
                },
            ));
        }
        if self.buf.len() == BATCH
            && let Some((k, _)) = self.buf.back()
        {
            self.next_from = Some(Bound::Excluded(k.clone()));
        }
    }

    pub fn next_entry(&mut self) -> Option<(Vec<u8>, Entry)> {
        if self.buf.is_empty() {
            self.refill();
        }
        self.buf.pop_front()
    }
}
