//! The behaviour of one index kind, behind one trait ([`IndexType`]): what
//! entries a record yields, how a disk component of the kind is laid out,
//! which options it accepts, which queries it answers and how it finds
//! their candidates, and how a fetched record is re-checked.
//!
//! Each kind is one module of `index` (`btree`, `rtree`, `hilbert`,
//! `cells`, `inverted`, `recency::{embedded, eager, lazy}`) with a unit
//! struct implementing the trait; [`super::IndexKind::imp`] is the registry.
//! Calls go through `&'static dyn IndexType` once per query, per partition
//! or per record write, never per index entry: per-entry work is prepared
//! per query ([`IndexOnly`], [`Recheck`], [`PkSplit`]) or done inside the
//! kind's own (statically dispatched) loops.

use super::query::{Candidate, IndexOnly, KeyRange, Query, QueryStats, Recheck};
use super::{IndexDef, ReconcileOption};
use crate::error::{Error, Result};
use crate::geo::Rect;
use crate::geo::sphere::Circle;
use crate::lsm::LsmTree;
use crate::lsm::kind::{PkSplit, Reconcile, TreeKind};
use crate::lsm::memtable::SpatialEntry;
use crate::lsm::spatial::SearchStats;
use crate::storage::Entry;
use crate::value::Value;
use std::sync::Arc;

/// A kind-specific option of [`super::IndexOptions`] (the options every
/// kind takes, `space`, are not listed).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IndexOption {
    /// `reconcile` (antimatter or deleted keys).
    Reconcile,
    /// `bits_per_key` (embedded block filters).
    BitsPerKey,
    /// `leaf_bytes` (R-tree leaves).
    LeafBytes,
    /// `order` (R-tree component order).
    Order,
    /// `levels` and `max_cells` (the SHB/SIF grid).
    Grid,
    /// `time`, `expiry`, `grace` and `clock` (value lists).
    Time,
    /// `gram` (n-gram length).
    Gram,
    /// `chunk_bytes` and `brin_form` (a block range index over chunks).
    Chunks,
}

/// How a kind answers `Query::Recent` (the access path is carried out by
/// the dataset, which owns the primary index the hits are validated
/// against: `dataset::recency`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RecentPath {
    /// Scan the key range, validate every entry, sort by recency (btree).
    Scan,
    /// Scan the key range newest entry first, stop after k valid hits
    /// (composite: entries are restamped by every write).
    Composite,
    /// The primary's block filters and memtable secondary sets (embedded).
    Embedded,
    /// One posting list per value (eager).
    Eager,
    /// Posting-list fragments, newest sources first (lazy).
    Lazy,
}

/// A row of an index's bulk build: (entry key, sequence number, entry value).
pub type BulkRow = (Vec<u8>, u64, Vec<u8>);

/// One recency-index write: record `pk` moves from the encoded value
/// `old` to `new` (either absent) at sequence number `seq`, in the
/// partition's index tree `tree`.
pub struct RecencyWrite<'a> {
    pub def: &'a IndexDef,
    pub tree: &'a LsmTree,
    pub old: Option<&'a [u8]>,
    pub new: Option<&'a [u8]>,
    pub seq: u64,
    pub pk: &'a [u8],
    /// The new version's (time, expiry) ([`IndexType::list_time`]).
    pub time: Option<(i64, Option<i64>)>,
    /// The new version, encoded.
    pub record: Option<&'a [u8]>,
}

/// The behaviour of one index kind. Methods take the index's definition
/// (its fields and options); defaults are those of a kind that answers
/// nothing and accepts no option.
pub trait IndexType: Sync {
    /// The kind's name (its `Display` and catalog name).
    fn name(&self) -> &'static str;

    /// Names `IndexKind::parse` accepts (case-insensitive), the name first.
    fn aliases(&self) -> &'static [&'static str];

    // ---- what a record yields ----

    /// Every (entry key, entry value) a record contributes, sorted by key.
    fn entries(&self, def: &IndexDef, record: &Value, pk: &[u8])
    -> Result<Vec<(Vec<u8>, Vec<u8>)>>;

    /// Whether the index is maintained by `dataset::recency` with its own
    /// writes ([`IndexType::recency_writes`]) rather than by
    /// [`IndexType::entries`] (embedded, eager, lazy).
    fn is_recency(&self) -> bool {
        false
    }

    /// Whether the entries are posting lists keyed by the value (eager,
    /// lazy: the bulk build groups postings per value).
    fn posting_lists(&self) -> bool {
        false
    }

    /// Whether entries are rewritten by every write of their record, even
    /// when unchanged, so that they carry the sequence number of the
    /// record's last write (composite).
    fn restamps(&self) -> bool {
        false
    }

    /// Whether the kind has index trees (embedded lives in the primary).
    fn has_tree(&self) -> bool {
        true
    }

    /// Whether writers of a value take a lock on the value until commit
    /// (eager: read-modify-write of the value's posting list).
    fn locks_values(&self) -> bool {
        false
    }

    /// The (time, expiry) a recency kind stores with a record (value
    /// lists; `None`: the record is not in the index, or the kind keeps no
    /// time). Called before the write, so a bad time refuses it cleanly.
    fn list_time(&self, def: &IndexDef, rec: &Value) -> Result<Option<(i64, Option<i64>)>> {
        let _ = (def, rec);
        Ok(None)
    }

    /// The index writes of a record write for a recency kind: the record
    /// moves from one encoded value to another (either absent).
    fn recency_writes(&self, w: &RecencyWrite<'_>) -> Result<Vec<(Vec<u8>, Entry)>> {
        let _ = w;
        Ok(Vec::new())
    }

    /// Group the bulk build's `(entry key, seq, entry value)` rows of
    /// [`IndexType::entries`] into the entries written (eager and lazy:
    /// one posting list per value; value lists: one fragment per key).
    fn bulk_group(&self, def: &IndexDef, rows: Vec<BulkRow>) -> Result<Vec<BulkRow>> {
        let _ = def;
        Ok(rows)
    }

    /// Install the hooks an index tree of this kind needs (lazy: the
    /// fragment flush and merge). Called when the tree is opened.
    fn install_hooks(&self, def: &IndexDef, tree: &LsmTree) {
        let _ = (def, tree);
    }

    // ---- how a disk component is laid out ----

    /// Whether components are spatial (R-tree leaves and packed upper
    /// levels, `lsm::spatial`).
    fn spatial_tree(&self) -> bool {
        false
    }

    /// Where the primary key starts in an entry key.
    fn pk_split(&self, def: &IndexDef) -> PkSplit;

    /// How deletes are reconciled (`deleted_key` for the alternatives).
    fn reconcile(&self, def: &IndexDef) -> ReconcileOption {
        let _ = def;
        ReconcileOption::Antimatter
    }

    // ---- which options it accepts ----

    /// Whether the index may name several fields (a composite key).
    fn multi_field(&self) -> bool {
        false
    }

    /// Whether the kind takes option `o`.
    fn accepts(&self, o: IndexOption) -> bool {
        let _ = o;
        false
    }

    /// Check the values of the kind's own options (after the generic
    /// checks of which options apply).
    fn check_options(&self, def: &IndexDef) -> Result<()> {
        let _ = def;
        Ok(())
    }

    // ---- which queries it answers, and how ----

    /// Whether the kind answers `q`.
    fn answers(&self, q: &Query) -> bool;

    /// What to ask instead, when it does not.
    fn hint(&self) -> &'static str;

    /// Whether the kind answers spatial queries (and spatial joins).
    fn is_spatial(&self) -> bool {
        false
    }

    /// How the kind answers `Query::Recent`, if it does.
    fn recent_path(&self) -> Option<RecentPath> {
        None
    }

    /// Whether an entry alone decides the query (index-only queries).
    fn index_only(&self) -> IndexOnly {
        IndexOnly::Never
    }

    /// The candidates of a range, intersects, within-distance or text
    /// query from the index's trees (one per partition), sorted by primary
    /// key without duplicates. `keys`: the query's encoded key range (range
    /// queries; the dataset encodes it, coercing to the declared field
    /// types). `exact`: spatial candidates must also be exact against newer
    /// versions of their key (index-only queries).
    fn candidates(
        &self,
        def: &IndexDef,
        trees: &[Arc<LsmTree>],
        q: &Query,
        keys: Option<&KeyRange>,
        exact: bool,
        stats: &mut QueryStats,
    ) -> Result<Vec<Candidate>> {
        let _ = (def, trees, keys, exact, stats);
        Err(Error::invalid(
            None,
            format!(
                "a {} index does not collect candidates for a {} query",
                self.name(),
                q.name()
            ),
        ))
    }

    /// Spatial kinds: the live entries of one partition's tree whose bounds
    /// intersect one of `rects` (unsorted; duplicates allowed). `circle`:
    /// a radius query's circle, whose bounding boxes `rects` are; a kind
    /// may skip nodes and entries that cannot reach it.
    fn search_partition(
        &self,
        def: &IndexDef,
        tree: &LsmTree,
        rects: &[Rect],
        circle: Option<&Circle>,
        exact: bool,
        stats: &mut SearchStats,
    ) -> Result<Vec<SpatialEntry>> {
        let _ = (def, tree, rects, circle, exact, stats);
        Ok(Vec::new())
    }

    /// How a fetched record is re-checked against `q`. `keys`: the encoded
    /// key range of range and recent queries.
    fn recheck(&self, def: &IndexDef, q: &Query, keys: Option<KeyRange>) -> Result<Recheck>;
}

/// The LSM tree kind of an index: the disk layout its kind asks for.
pub fn tree_kind(imp: &dyn IndexType, def: &IndexDef) -> TreeKind {
    TreeKind {
        spatial: imp.spatial_tree(),
        reconcile: match imp.reconcile(def) {
            ReconcileOption::Antimatter => Reconcile::Antimatter,
            ReconcileOption::DeletedKeys => Reconcile::DeletedKeys,
        },
        pk: imp.pk_split(def),
    }
}

/// Memory and disk components (non-empty memtables) of `trees`.
pub fn components(trees: &[Arc<LsmTree>]) -> u64 {
    trees.iter().map(|t| component_count(t)).sum()
}

/// Memory and disk components (non-empty memtables) of one tree.
pub fn component_count(t: &LsmTree) -> u64 {
    let s = t.snapshot();
    (s.mems.iter().filter(|m| !m.is_empty()).count() + s.disk.len()) as u64
}

/// The keys of every entry of `trees` within `lo`..`hi` (partitions each
/// return theirs in order; several are merged by sorting).
pub fn entries_in(
    trees: &[Arc<LsmTree>],
    lo: &std::ops::Bound<Vec<u8>>,
    hi: &std::ops::Bound<Vec<u8>>,
) -> Result<Vec<Vec<u8>>> {
    let lo_ref = lo.as_ref().map(Vec::as_slice);
    let mut out = Vec::new();
    for t in trees {
        let snap = t.snapshot();
        let mut sc = t.scan(&snap, lo_ref, hi.clone(), false)?;
        while let Some((k, _)) = sc.next_entry()? {
            out.push(k);
        }
    }
    if trees.len() > 1 {
        out.sort_unstable();
    }
    Ok(out)
}
