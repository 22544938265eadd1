//! The `brin` kind: a block range index (Fusion, seed 004 §6.1) as zone
//! maps. Like `embedded` it has no tree of its own: the primary's disk
//! components carry, per data block, the min and max of the field (and a
//! zone map of the whole component) in their aux block
//! (`storage::block_filters`, with no bloom filter), and memtables keep the
//! sorted secondary set of the embedded index. A range query on the field
//! (`Query::Range`, also SQL's range predicates) reads only the blocks
//! whose zone map overlaps the range, keeps the records whose field lies
//! in it, and validates each against newer versions of its key
//! (`dataset::recency`, the embedded path without a k). Cheap to keep (two
//! values per block, nothing per write beyond the memtable set), it prunes
//! well when the field follows the primary key's order or arrival order
//! (times, sequence numbers, clustered data) and little when it is random.
//!
//! With a chunk size (`chunk_bytes`, the paper's 4 or 16 MB table chunks)
//! a component carries instead one `(min, max, chunk)` row per chunk of
//! blocks, in the key-value or the interval-tree form the paper compares
//! (`storage::brin`): far less to keep and to fetch from a bucket, coarser
//! pruning.

use super::recency::recency_recheck;
use crate::error::Result;
use crate::index::IndexDef;
use crate::index::kind::{IndexOption, IndexType, RecentPath};
use crate::index::query::{KeyRange, Query, Recheck};
use crate::lsm::kind::PkSplit;
use crate::value::Value;

/// The `brin` kind.
pub struct Brin;

/// The `brin` kind.
pub static BRIN: Brin = Brin;

impl IndexType for Brin {
    fn name(&self) -> &'static str {
        "brin"
    }

    fn aliases(&self) -> &'static [&'static str] {
        &["brin", "zonemap"]
    }

    /// None: the primary carries the zone maps (the field must still be
    /// indexable).
    fn entries(
        &self,
        def: &IndexDef,
        record: &Value,
        _pk: &[u8],
    ) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        super::recency::embedded::no_entries(def, record)
    }

    fn is_recency(&self) -> bool {
        true
    }

    fn accepts(&self, o: IndexOption) -> bool {
        o == IndexOption::Chunks
    }

    fn has_tree(&self) -> bool {
        false
    }

    fn pk_split(&self, _def: &IndexDef) -> PkSplit {
        PkSplit::Whole
    }

    fn answers(&self, q: &Query) -> bool {
        matches!(q, Query::Range { .. } | Query::Recent { .. })
    }

    fn hint(&self) -> &'static str {
        "a brin index answers range and equality queries on its field"
    }

    fn recent_path(&self) -> Option<RecentPath> {
        Some(RecentPath::Embedded)
    }

    fn recheck(&self, _def: &IndexDef, q: &Query, keys: Option<KeyRange>) -> Result<Recheck> {
        recency_recheck(q, keys)
    }
}
