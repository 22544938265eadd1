//! Optional behaviour an index kind plugs into one LSM tree without
//! special-casing the flush and merge paths (used by the LevelDB++-style
//! recency indexes, `crate::recency`):
//!
//! - a [`BlockObserver`] sees every entry a flush, merge or rewrite writes,
//!   block by block, and returns bytes for the component's aux block (the
//!   embedded index's per-block bloom filters and zone maps on the primary);
//! - a [`MemSecondary`] keeps an in-memory secondary structure with every
//!   memtable (the embedded index's memtable side);
//! - a [`FlushTransform`] decides how a memtable's entries become component
//!   entries (the lazy index packs per-write postings into one posting-list
//!   fragment per attribute value);
//! - a [`ValueMerger`] combines the versions of a key that meet in a merge
//!   instead of keeping only the newest (the lazy index concatenates
//!   fragments), and finishes each merged entry.
//!
//! A tree without hooks behaves exactly as before.

use super::kind::ComponentBuilder;
use super::memtable::MemTable;
use crate::error::Result;
use crate::storage::{Entry, EntryKind};
use std::sync::Arc;

/// Watches the entries of one component being written.
pub trait BlockObserver: Send {
    /// An entry was added to the current data block (in key order).
    fn entry(&mut self, key: &[u8], kind: EntryKind, seq: u64, value: &[u8]);
    /// The current data block is complete: every entry since the previous
    /// call (or the start) belongs to it.
    fn end_block(&mut self);
    /// The component is complete; entries since the last `end_block` form
    /// its last block. Returns the aux block (empty: none).
    fn finish(self: Box<Self>) -> Vec<u8>;
}

/// Makes one [`BlockObserver`] per component.
pub trait ObserverFactory: Send + Sync {
    /// `None`: nothing to observe right now.
    fn observer(&self) -> Option<Box<dyn BlockObserver>>;
}

/// Derives the keys of an in-memory secondary structure kept with a
/// memtable. Keys are opaque to the memtable (sorted bytes).
pub trait MemSecondary: Send + Sync + std::fmt::Debug {
    /// Append the secondary keys of `(key, e)` (a live entry) to `out`.
    fn keys(&self, key: &[u8], e: &Entry, out: &mut Vec<Vec<u8>>);
}

/// Writes a memtable's entries into a new component at flush.
pub trait FlushTransform: Send + Sync {
    /// Add the memtable's entries (transformed) in key order.
    fn write(&self, mem: &MemTable, out: &mut ComponentBuilder) -> Result<()>;
}

/// Combines versions of one key during a merge.
pub trait ValueMerger: Send + Sync {
    /// Fold the `older` version into the `newer` one.
    fn merge(&self, key: &[u8], newer: Entry, older: Entry) -> Result<Entry>;
    /// The entry a merge writes for `key`; `oldest` means no component older
    /// than the merge's inputs can hold the key (markers may be dropped).
    /// `None` drops the entry.
    fn finish(&self, key: &[u8], e: Entry, oldest: bool) -> Result<Option<Entry>>;
}

/// The hooks of one tree (all optional).
#[derive(Clone, Default)]
pub struct TreeHooks {
    pub observer: Option<Arc<dyn ObserverFactory>>,
    pub mem_secondary: Option<Arc<dyn MemSecondary>>,
    pub flush: Option<Arc<dyn FlushTransform>>,
    pub merger: Option<Arc<dyn ValueMerger>>,
}

impl std::fmt::Debug for TreeHooks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TreeHooks")
            .field("observer", &self.observer.is_some())
            .field("mem_secondary", &self.mem_secondary.is_some())
            .field("flush", &self.flush.is_some())
            .field("merger", &self.merger.is_some())
            .finish()
    }
}
