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
//! - [`MemFacts`] keep facts about each memtable's writes for readers (the
//!   value lists' time bounds);
//! - a [`ValueMerger`] combines the versions of a key that meet in a merge
//!   instead of keeping only the newest (the lazy index concatenates
//!   fragments), and finishes each merged entry.
//!
//! A tree without hooks behaves exactly as before.

use super::kind::ComponentBuilder;
use super::memtable::MemTable;
pub use super::memtable::{MemFacts, MemSecondary};
use crate::error::Result;
use crate::storage::Entry;
pub use crate::storage::block_filters::BlockObserver;
use std::sync::Arc;

/// Makes one [`BlockObserver`] per component.
pub trait ObserverFactory: Send + Sync {
    /// `None`: nothing to observe right now.
    fn observer(&self) -> Option<Box<dyn BlockObserver>>;
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
    /// Makes each memtable's [`MemFacts`].
    pub mem_facts: Option<Arc<dyn Fn() -> Arc<dyn MemFacts> + Send + Sync>>,
}

impl std::fmt::Debug for TreeHooks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TreeHooks")
            .field("observer", &self.observer.is_some())
            .field("mem_secondary", &self.mem_secondary.is_some())
            .field("flush", &self.flush.is_some())
            .field("merger", &self.merger.is_some())
            .field("mem_facts", &self.mem_facts.is_some())
            .finish()
    }
}
