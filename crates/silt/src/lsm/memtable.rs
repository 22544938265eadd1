//! The in-memory component: a concurrent skip list of byte keys.

use crate::storage::{Entry, EntryKind};
use crossbeam_skiplist::SkipMap;
use std::collections::VecDeque;
use std::ops::Bound;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

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
    map: SkipMap<Vec<u8>, MemValue>,
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
        self.map.compare_insert(
            key.to_vec(),
            MemValue {
                seq,
                kind: e.kind,
                value: e.value,
            },
            |old| old.seq <= seq,
        );
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
        self.map.get(key).map(|e| {
            let v = e.value();
            Entry {
                seq: v.seq,
                kind: v.kind,
                value: v.value.clone(),
            }
        })
    }

    pub fn bytes(&self) -> u64 {
        self.bytes.load(Ordering::Relaxed)
    }

    pub fn len(&self) -> usize {
        self.map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
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
        for e in self.map.iter() {
            let v = e.value();
            f(e.key(), v.kind, v.seq, &v.value)?;
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
        let lower: Bound<&[u8]> = match &from {
            Bound::Included(k) => Bound::Included(k.as_slice()),
            Bound::Excluded(k) => Bound::Excluded(k.as_slice()),
            Bound::Unbounded => Bound::Unbounded,
        };
        for e in self
            .table
            .map
            .range::<[u8], _>((lower, Bound::Unbounded))
            .take(BATCH)
        {
            let v = e.value();
            self.buf.push_back((
                e.key().clone(),
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
