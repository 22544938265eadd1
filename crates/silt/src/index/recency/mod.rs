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
//! - **embedded** ([`embedded`], `storage::block_filters`, `lsm::hooks`): no index tree. The
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
//! - **eager** ([`eager`], [`postings`]): key = value, entry = the value's whole
//!   posting list, rewritten read-modify-write by every write of a record
//!   with that value (the record's posting moves to the front; it leaves the
//!   list of its old value). Writers of a value are serialized by a lock on
//!   the value held until commit, so a list never holds another
//!   transaction's uncommitted change (exact undo, after-image redo). A
//!   lookup reads one list per value.
//! - **lazy** ([`lazy`], [`postings`]): every write appends a posting without reading
//!   (a live posting to the new value, a marker to the old one); the
//!   postings of a value form one fragment per component, merged newest
//!   first by merges. A lookup reads fragments source by source (newest
//!   sources first) and stops once k validated hits are certain.
//! - **composite** (`super::btree`, which stores the same entries as `btree`): key = value ‖ primary key; a lookup scans
//!   the key range, validates every candidate and sorts by recency.

/// The eager index: posting lists rewritten by every write.
pub mod eager;
/// The embedded index's attribute list, memtable keys and hooks.
pub mod embedded;
/// The lazy index: appended postings, packed into fragments at flush.
pub mod lazy;
/// Posting lists (eager, lazy).
pub mod postings;

pub use embedded::EmbeddedFields;
pub use lazy::{LazyFlush, LazyMerger};
pub use postings::Posting;

use super::IndexDef;
use super::query::{KeyRange, Query, Recheck};
use crate::error::{Error, Result};
use crate::value::Value;

/// What to ask a recency-only index instead.
const RECENT_HINT: &str = "use a recent query (the k most recent matches)";

/// Eager and lazy entries of the bulk build: one ⟨encoded value⟩ → primary
/// key, the record's posting (writes go through
/// [`super::IndexType::recency_writes`]).
fn recency_entries(def: &IndexDef, record: &Value, pk: &[u8]) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
    Ok(def
        .value_key(record)?
        .map(|k| (k, pk.to_vec()))
        .into_iter()
        .collect())
}

/// A recency hit is re-checked like a B+-tree hit: its field within the
/// encoded bounds.
pub(crate) fn recency_recheck(q: &Query, keys: Option<KeyRange>) -> Result<Recheck> {
    match keys {
        Some(r) => Ok(Recheck::KeyRange(r)),
        None => Err(Error::invalid(
            None,
            format!("a {} query needs key bounds", q.name()),
        )),
    }
}
