//! Reconciliation: a heap of sub-cursors ordered by (key, recency rank). For
//! each key only the newest version (lowest rank = newest component) survives.
//! Sources in descending key order merge the same way, largest key first
//! ([`MergeIter::new_rev`]).

use super::hooks::ValueMerger;
use super::memtable::MemIter;
use crate::error::Result;
use crate::storage::Entry;
use crate::storage::component::{ComponentIter, ComponentRevIter};
use std::cmp::Ordering;
use std::collections::BinaryHeap;
use std::sync::Arc;

/// One ordered input of a merge.
pub enum Source {
    Mem(MemIter),
    Disk(ComponentIter),
    /// A component read in descending key order.
    DiskRev(ComponentRevIter),
}

impl Source {
    fn next_entry(&mut self) -> Result<Option<(Vec<u8>, Entry)>> {
        match self {
            Source::Mem(m) => Ok(m.next_entry()),
            Source::Disk(d) => d.next_entry(),
            Source::DiskRev(d) => d.next_entry(),
        }
    }
}

struct Head {
    key: Vec<u8>,
    rank: usize,
    entry: Entry,
    /// The merge runs in descending key order.
    rev: bool,
}

impl PartialEq for Head {
    fn eq(&self, o: &Self) -> bool {
        self.cmp(o) == Ordering::Equal
    }
}
impl Eq for Head {}
impl PartialOrd for Head {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Head {
    // BinaryHeap is a max-heap: reverse so the smallest (key, rank) is on
    // top (the largest key with the smallest rank, in descending order).
    fn cmp(&self, o: &Self) -> Ordering {
        let by_key = if self.rev {
            self.key.cmp(&o.key)
        } else {
            o.key.cmp(&self.key)
        };
        by_key.then(o.rank.cmp(&self.rank))
    }
}

/// Merges sources given newest first (source i has rank i).
///
/// The head of the source the last key came from is kept out of the heap
/// (`hot`) while it stays ahead of the heap's top: sources that hold runs
/// of consecutive keys (components of keys loaded in order, whose ranges
/// hardly overlap) then merge with one comparison per key instead of a
/// heap pop and push.
pub struct MergeIter {
    sources: Vec<Source>,
    heap: BinaryHeap<Head>,
    /// The next entry of the source the last key came from, when it is not
    /// in the heap.
    hot: Option<Head>,
    /// Combines the versions of a key instead of keeping only the newest.
    merger: Option<Arc<dyn ValueMerger>>,
    rev: bool,
}

impl MergeIter {
    pub fn new(sources: Vec<Source>) -> Result<Self> {
        Self::with_direction(sources, false)
    }

    /// Merge sources that are each in descending key order.
    pub fn new_rev(sources: Vec<Source>) -> Result<Self> {
        Self::with_direction(sources, true)
    }

    fn with_direction(mut sources: Vec<Source>, rev: bool) -> Result<Self> {
        let mut heap = BinaryHeap::with_capacity(sources.len());
        for (rank, s) in sources.iter_mut().enumerate() {
            if let Some((key, entry)) = s.next_entry()? {
                heap.push(Head {
                    key,
                    rank,
                    entry,
                    rev,
                });
            }
        }
        Ok(MergeIter {
            sources,
            heap,
            hot: None,
            merger: None,
            rev,
        })
    }

    /// Combine the versions of each key with `merger` (newest first) instead
    /// of dropping the older ones.
    pub fn with_merger(mut self, merger: Option<Arc<dyn ValueMerger>>) -> Self {
        self.merger = merger;
        self
    }

    fn advance(&mut self, rank: usize) -> Result<()> {
        if let Some(h) = self.next_head(rank)? {
            self.heap.push(h);
        }
        Ok(())
    }

    fn next_head(&mut self, rank: usize) -> Result<Option<Head>> {
        Ok(self.sources[rank].next_entry()?.map(|(key, entry)| Head {
            key,
            rank,
            entry,
            rev: self.rev,
        }))
    }

    /// The smallest head of all (by key, then rank): the hot one while it
    /// is ahead of the heap's top (in `Head`'s reversed order, greater),
    /// else the heap's top, the hot one taking its place (one sift).
    fn pop_first(&mut self) -> Option<Head> {
        let Some(h) = self.hot.take() else {
            return self.heap.pop();
        };
        match self.heap.peek_mut() {
            Some(mut top) if *top > h => Some(std::mem::replace(&mut *top, h)),
            _ => Some(h),
        }
    }

    /// The newest version of the next key (antimatter included).
    pub fn next_entry(&mut self) -> Result<Option<(Vec<u8>, Entry)>> {
        Ok(self.next_ranked()?.map(|(k, e, _)| (k, e)))
    }

    /// Like [`next_entry`](Self::next_entry), with the rank of the source it came from.
    pub fn next_ranked(&mut self) -> Result<Option<(Vec<u8>, Entry, usize)>> {
        // One source holds each key once: no heap, no reconciliation (its
        // first entry was put on the heap when the merge was made).
        if self.sources.len() == 1 {
            if let Some(top) = self.heap.pop() {
                return Ok(Some((top.key, top.entry, 0)));
            }
            return Ok(self.sources[0].next_entry()?.map(|(k, e)| (k, e, 0)));
        }
        let Some(mut top) = self.pop_first() else {
            return Ok(None);
        };
        // The same source's next key is larger: older versions of this
        // key are all in the heap.
        self.hot = self.next_head(top.rank)?;
        while let Some(h) = self.heap.peek() {
            if h.key != top.key {
                break;
            }
            let rank = h.rank;
            let older = self.heap.pop();
            self.advance(rank)?;
            if let (Some(m), Some(o)) = (&self.merger, older) {
                let newer = std::mem::replace(&mut top.entry, Entry::delete(0));
                top.entry = m.merge(&top.key, newer, o.entry)?;
            }
        }
        Ok(Some((top.key, top.entry, top.rank)))
    }
}
