//! Merge policies: pure functions that look at the metadata of an index's disk
//! components and decide whether, and what, to merge.
//!
//! Nothing here does I/O, keeps state or reads a clock: [`MergePolicy::decide`]
//! is a deterministic function of the component list and a [`PolicyContext`],
//! which is what makes the policies testable against the published merge
//! sequences (see the Table 1 test in `tests/table1.rs`).
//!
//! Two families exist:
//!
//! * **Stack-based** policies (`no-merge`, `constant`, `prefix`, `binomial`,
//!   `tiered`, `concurrent`) see the components as a stack ordered newest first
//!   and merge a run of *consecutive* components into one component that takes
//!   their place ([`MergeDecision::Stack`]).
//! * **Leveled** keeps overlapping flushed components in level 0 and
//!   key-disjoint components in levels 1, 2, ... It merges one picked component
//!   with its overlaps in the next level ([`MergeDecision::Leveled`]).
//!
//! One call returns at most one merge. After applying a merge, call `decide`
//! again until it returns [`MergeDecision::None`]: merges can cascade (a tiered
//! merge may complete the next tier), and the published merge sequences
//! (Table 1 of Mao et al., "Experimental Evaluation of Bounded-Depth LSM Merge
//! Policies") are reproduced with instant merges applied until `None`.
//!
//! A component whose `merging` flag is set is never picked again. A policy whose
//! parameters fail [`MergePolicy::validate`] (possible only when it was built
//! directly or deserialized, since [`MergePolicy::parse`] validates) never merges
//! and never stalls flushes.
//!
//! Layout: this file holds the shared types, the configuration enum
//! [`MergePolicy`] (what the catalog stores) and the private `Policy` trait
//! every policy implements; `MergePolicy::with_policy` is the one place a
//! configuration maps to its policy. One file per policy:
//!
//! * `no_merge.rs`: never merges (AsterixDB's no-merge).
//! * `constant.rs`: `constant(K)`, AsterixDB's constant policy.
//! * `prefix.rs`: `prefix(M,C)`, AsterixDB's default policy.
//! * `binomial.rs`: `binomial(K)`, Mathieu et al.'s Binomial schedule.
//! * `tiered.rs`: `tiered(B)`, size-tiered.
//! * `concurrent.rs`: `concurrent(K,C,D,LAMBDA)`, the HBase/Bigtable exploring policy.
//! * `leveled.rs`: `leveled(B0,B,target,L1[,partitioning[,pick]])`, LevelDB/RocksDB
//!   style, with the [`Partitioning`] and [`Pick`] choices; `overlap.rs` holds
//!   the component overlap tests it (and the merge in `lsm::tree`) uses.
//!
//! `text.rs` holds the text form (`MergePolicy::parse`, `Display`, sizes).
//! Adding a policy: a new file implementing `Policy`, a variant of
//! [`MergePolicy`], its line in `with_policy` and its text form in `text.rs`.

mod binomial;
mod concurrent;
mod constant;
mod leveled;
mod no_merge;
mod overlap;
mod prefix;
mod text;
mod tiered;

#[cfg(test)]
mod tests;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

pub use leveled::{Partitioning, Pick};
pub use overlap::components_overlap;

const KIB: u64 = 1 << 10;
const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;
const TIB: u64 = 1 << 40;

/// Metadata a policy sees about one disk component.
///
/// The slice given to [`MergePolicy::decide`] is ordered NEWEST FIRST (index 0
/// is the most recently flushed component). For leveled, the list is the L0
/// components newest first, then the L1 components sorted by `min_key`, then
/// L2 and so on; the leveled policy itself only relies on the `level` field.
#[derive(Clone, Debug, PartialEq)]
pub struct ComponentInfo {
    /// Unique component id.
    pub id: u64,
    /// Size of the component on disk.
    pub size_bytes: u64,
    /// Number of entries (records, including anti-matter) in the component.
    pub entries: u64,
    /// Level of the component: 0 for every component of a stack-based policy.
    pub level: u32,
    /// Smallest key of the component (byte-wise order, inclusive).
    pub min_key: Vec<u8>,
    /// Largest key of the component (byte-wise order, inclusive).
    pub max_key: Vec<u8>,
    /// The component is already part of a running merge and must not be picked again.
    pub merging: bool,
    /// Spatially partitioned leveled trees only (see [`Partitioning`]): the
    /// region any entry's key can stand for (the component's MBR grown by
    /// one key cell). When both components have one, overlap is decided by
    /// it instead of by key ranges.
    pub mbr: Option<[f64; 4]>,
}

/// What a policy needs to know besides the component list.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PolicyContext {
    /// Size in bytes of one full in-memory component (the flush unit; the
    /// "memtable" of the papers). Used by `tiered`.
    pub memtable_bytes: u64,
    /// Number of flushes this index has done so far, including the one just
    /// finished. Used by `binomial`.
    pub flush_count: u64,
}

/// A merge policy and its parameters. Serialized as an internally tagged
/// object, e.g. `{"kind":"prefix","max_mergable_bytes":1073741824,"max_tolerance_count":5}`;
/// the user-facing text form is handled by [`MergePolicy::parse`] and `Display`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum MergePolicy {
    /// Never merges: every flush adds a component.
    NoMerge,
    /// AsterixDB's constant policy: when the number of disk components reaches
    /// `k` (count >= k), merge all of them into one, provided none of them is
    /// already merging.
    Constant { k: usize },
    /// AsterixDB's prefix policy (its default): components larger than
    /// `max_mergable_bytes` are never merged again; among the younger ones, merge
    /// the oldest-first prefix whose total exceeds `max_mergable_bytes`, or all of
    /// them once there are `max_tolerance_count`, skipping a start component
    /// larger than 1.2x the younger components of the run. See `prefix.rs`.
    Prefix {
        max_mergable_bytes: u64,
        max_tolerance_count: usize,
    },
    /// The Binomial policy of Mathieu et al. ("Bigtable merge compaction"):
    /// with equal-size flushes it keeps at most `k` components after each
    /// flush's merge, following a schedule that depends only on the number of
    /// flushes so far (`PolicyContext::flush_count`).
    Binomial { k: usize },
    /// Size-tiered policy with size ratio `b`: components are grouped in tiers of
    /// sizes about `b^i` memtables; a tier holding `b` or more components is
    /// merged into one component of the next tier.
    Tiered { b: usize },
    /// HBase/Bigtable-style exploring policy: merge the longest run of the newest
    /// `c..=d` components whose oldest member is at most `lambda` times the sum
    /// of the younger ones; flushes stall while there are `k` components.
    Concurrent {
        k: usize,
        c: usize,
        d: usize,
        lambda: f64,
    },
    /// Leveled policy (LevelDB/RocksDB style): flushes land in level 0; when L0
    /// holds `l0_trigger` components they are all merged with the overlapping
    /// L1 components. Level `i >= 1` holds key-disjoint components totalling at
    /// most `l1_bytes * fanout^(i-1)`; an overfull level pushes its component
    /// with the least overlap into the next level. Outputs are cut into files of
    /// about `target_file_bytes`.
    Leveled {
        l0_trigger: usize,
        fanout: usize,
        target_file_bytes: u64,
        l1_bytes: u64,
        /// How outputs are cut (R-tree indexes; others always by size).
        #[serde(default)]
        partitioning: Partitioning,
        /// How an over-full level picks the component to push down.
        #[serde(default)]
        pick: Pick,
    },
}

/// The outcome of [`MergePolicy::decide`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MergeDecision {
    /// Nothing to merge now.
    None,
    /// Merge the consecutive components at positions `start..end` (end
    /// exclusive) of the newest-first slice into ONE component that takes their
    /// place in the list. Always at least two components.
    Stack { start: usize, end: usize },
    /// Leveled: merge these component ids (one picked component plus its
    /// overlaps in `output_level`; for an L0 merge, all L0 components plus their
    /// L1 overlaps) into components of `output_level`, partitioned by
    /// `target_file_bytes`. Ids are listed newest data first: the picked (or L0,
    /// in slice order) components, then the `output_level` ones by `min_key`.
    Leveled { inputs: Vec<u64>, output_level: u32 },
}

impl Default for MergePolicy {
    /// `prefix(1GB,5)`, the AsterixDB default.
    fn default() -> Self {
        MergePolicy::Prefix {
            max_mergable_bytes: GIB,
            max_tolerance_count: 5,
        }
    }
}

/// One merge policy's decision logic, implemented by the parameter struct in
/// each policy's file. Only [`MergePolicy::with_policy`] builds those structs.
trait Policy {
    /// Short name, as used in specs (`"prefix"`, `"leveled"`, ...).
    fn name(&self) -> &'static str;

    /// Check the parameters; the error is the bare reason.
    fn validate(&self) -> std::result::Result<(), String>;

    /// What to merge now, if anything, given the disk components (newest
    /// first). Only called when [`Policy::validate`] passed; must never return
    /// a run that contains a component with `merging == true`.
    fn decide(&self, comps: &[ComponentInfo], ctx: &PolicyContext) -> MergeDecision;

    /// Flushes stall while there are at least this many disk components;
    /// `None` (the default): never stall.
    fn stall_limit(&self) -> Option<usize> {
        None
    }

    /// Whether components carry levels and key ranges matter (the leveled
    /// family) rather than forming a stack.
    fn is_leveled(&self) -> bool {
        false
    }
}

impl MergePolicy {
    /// The one place a configuration maps to its policy: builds the policy
    /// struct from the variant's parameters and hands it to `f`.
    fn with_policy<R>(&self, f: impl FnOnce(&dyn Policy) -> R) -> R {
        match *self {
            MergePolicy::NoMerge => f(&no_merge::NoMerge),
            MergePolicy::Constant { k } => f(&constant::Constant { k }),
            MergePolicy::Prefix {
                max_mergable_bytes,
                max_tolerance_count,
            } => f(&prefix::Prefix {
                max_mergable_bytes,
                max_tolerance_count,
            }),
            MergePolicy::Binomial { k } => f(&binomial::Binomial { k }),
            MergePolicy::Tiered { b } => f(&tiered::Tiered { b }),
            MergePolicy::Concurrent { k, c, d, lambda } => {
                f(&concurrent::Concurrent { k, c, d, lambda })
            }
            MergePolicy::Leveled {
                l0_trigger,
                fanout,
                target_file_bytes,
                l1_bytes,
                partitioning: _,
                pick,
            } => f(&leveled::Leveled {
                l0_trigger,
                fanout,
                target_file_bytes,
                l1_bytes,
                pick,
            }),
        }
    }

    /// Decide what to merge, if anything, given the disk components (newest
    /// first) of one index. Pure and deterministic; never returns a run that
    /// contains a component with `merging == true`.
    pub fn decide(&self, comps: &[ComponentInfo], ctx: &PolicyContext) -> MergeDecision {
        self.with_policy(|p| match p.validate() {
            Ok(()) => p.decide(comps, ctx),
            Err(_) => MergeDecision::None,
        })
    }

    /// Whether flushes should stall until a merge completes. Only `concurrent`
    /// stalls: when the number of disk components reached `k`. Always false for
    /// the other policies (and for an invalid `concurrent`).
    pub fn should_stall_flush(&self, comps: &[ComponentInfo]) -> bool {
        self.with_policy(|p| {
            p.validate().is_ok() && p.stall_limit().is_some_and(|k| comps.len() >= k)
        })
    }

    /// Whether this is the leveled policy (components carry levels and key
    /// ranges matter) rather than a stack-based one.
    pub fn is_leveled(&self) -> bool {
        self.with_policy(|p| p.is_leveled())
    }

    /// Short name of the policy, as used in specs (`"prefix"`, `"leveled"`, ...).
    pub fn name(&self) -> &'static str {
        self.with_policy(|p| p.name())
    }

    /// The default `concurrent` policy: `concurrent(30,3,10,1.2)`.
    pub fn default_concurrent() -> MergePolicy {
        MergePolicy::Concurrent {
            k: concurrent::DEFAULT_K,
            c: concurrent::DEFAULT_C,
            d: concurrent::DEFAULT_D,
            lambda: concurrent::DEFAULT_LAMBDA,
        }
    }

    /// The default `leveled` policy: `leveled(4,10,64MB,256MB)`.
    pub fn default_leveled() -> MergePolicy {
        leveled::leveled_with(
            leveled::DEFAULT_L0_TRIGGER,
            leveled::DEFAULT_FANOUT,
            leveled::DEFAULT_TARGET_FILE_BYTES,
            None,
        )
    }

    /// Check the parameters. Rules: constant `k >= 2`; prefix size `>= 1` and
    /// count `>= 2`; binomial `k >= 1`; tiered `b >= 2`; concurrent `c >= 2`,
    /// `d >= c`, `k >= c`, `lambda` finite and `> 0`; leveled `l0_trigger >= 1`,
    /// `fanout >= 2`, file and L1 sizes `>= 1`.
    pub fn validate(&self) -> Result<()> {
        self.check()
            .map_err(|msg| Error::Config(format!("invalid merge policy {self}: {msg}")))
    }

    /// [`MergePolicy::validate`] with the bare reason as error.
    fn check(&self) -> std::result::Result<(), String> {
        self.with_policy(|p| p.validate())
    }
}
