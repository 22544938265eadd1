//! LevelDB++ secondary indexes (seed 001 ch. 3): the "K most recent
//! matches" school of secondary indexing, as index kinds of a dataset.
//!
//! Recency is the sequence number every write carries (one database-wide
//! counter). `Query::Recent { lo, hi, k }` returns the k most recent live
//! records whose field lies within the bounds (all of them without k),
//! newest first: the paper's LOOKUP(A, a, K) (lo = hi = a) and
//! RANGELOOKUP(A, a, b, K). Every candidate is validated against the primary
//! index (the record must be current and still match), as every access path
//! of Silt is. Four kinds answer it:
//!
//! - **embedded** ([`embedded`], `storage::block_filters`): no index tree. The
//!   primary's disk components carry per-block bloom filters and zone maps
//!   of the field, plus a per-component zone map; memtables keep a sorted
//!   secondary set. A lookup visits the memtables and components of every
//!   partition in decreasing order of their largest sequence number, reads
//!   only blocks whose zone map (and bloom filter, for equality) admit the
//!   value, and keeps a hit only when no newer version of its primary key
//!   exists (memtable lookups and bloom-filtered probes of the sources that
//!   hold newer sequence numbers: the paper's GetLite, made exact for bloom
//!   false positives and overlapping level-0 components). It stops as soon
//!   as k hits are certain: when every source left holds only sequence
//!   numbers older than the k-th hit.
//! - **eager** ([`postings`]): key = value, entry = the value's whole
//!   posting list, rewritten read-modify-write by every write of a record
//!   with that value (the record's posting moves to the front; it leaves the
//!   list of its old value). Writers of a value are serialized by a lock on
//!   the value held until commit, so a list never holds another
//!   transaction's uncommitted change (exact undo, after-image redo). A
//!   lookup reads one list per value.
//! - **lazy** ([`postings`]): every write appends a posting without reading
//!   (a live posting to the new value, a marker to the old one); the
//!   postings of a value form one fragment per component, merged newest
//!   first by merges. A lookup reads fragments source by source (newest
//!   sources first) and stops once k validated hits are certain.
//! - **composite** (= `btree`): key = value ‖ primary key; a lookup scans
//!   the key range, validates every candidate and sorts by recency.

/// The embedded index's attribute list, memtable keys and hooks.
pub mod embedded;
/// Posting lists (eager, lazy) and the lazy index's flush and merge.
pub mod postings;

pub use embedded::EmbeddedFields;
pub use postings::{LazyFlush, LazyMerger, Posting};

use crate::index::{IndexDef, IndexKind};
use crate::lsm::LsmTree;
use crate::lsm::hooks::TreeHooks;
use std::sync::Arc;

/// Install the hooks an index tree of this kind needs (lazy: the fragment
/// flush and merge). Called when the tree is opened, before it is used.
pub fn install_tree_hooks(tree: &LsmTree, def: &IndexDef) {
    if def.kind == IndexKind::Lazy {
        tree.set_hooks(TreeHooks {
            flush: Some(Arc::new(LazyFlush)),
            merger: Some(Arc::new(LazyMerger)),
            ..TreeHooks::default()
        });
    }
}
