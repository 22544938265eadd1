//! `leveled(B0,B,target,L1[,size|str|rstar_grove[,min_overlap|round_robin]])`:
//! LevelDB/RocksDB-style leveled merging. Flushes land in level 0; levels
//! 1, 2, ... hold key-disjoint components, level `i` at most
//! `L1 * B^(i-1)` bytes.
//!
//! Parameters: `l0_trigger` (B0) `>= 1`, the number of L0 components that
//! triggers an L0 -> L1 merge; `fanout` (B) `>= 2`, the growth factor between
//! levels; `target_file_bytes >= 1`, the size outputs are cut at; `l1_bytes
//! >= 1`, the capacity of L1 (by default `l0_trigger * target_file_bytes`, as
//! RocksDB); then two choices: [`Partitioning`], how a merge's output is cut
//! into components (seed 002 §3: by size, or STR / R*-Grove regions of the
//! plane for R-trees), and [`Pick`], which component an over-full level pushes
//! down (seed 001 §5.3.1: "Pick Best" or "Round Robin"). `leveled` alone means
//! `leveled(4,10,64MB,256MB)`. Overlap between components is decided in
//! `overlap.rs`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::overlap::{overlapping, overlapping_any};
use super::{ComponentInfo, MIB, MergeDecision, MergePolicy, Policy, PolicyContext};

/// Defaults of the `leveled` policy (RocksDB-like).
pub(super) const DEFAULT_L0_TRIGGER: usize = 4;
pub(super) const DEFAULT_FANOUT: usize = 10;
pub(super) const DEFAULT_TARGET_FILE_BYTES: u64 = 64 * MIB;

/// How a leveled merge cuts its output into components (seed 002 §3).
/// `Size` cuts the key-ordered output every `target_file_bytes` (for an
/// R-tree: runs of its Hilbert or x-then-y order); `Str` and `RstarGrove`
/// partition R-tree entries by the centre of their bounds into about
/// `input bytes / target_file_bytes` regions of the plane (see
/// `lsm::spatial_partitioning`) and decide overlaps between components by MBR. Trees
/// that are not R-trees always use `Size`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Partitioning {
    #[default]
    Size,
    Str,
    RstarGrove,
}

impl Partitioning {
    pub fn name(self) -> &'static str {
        match self {
            Partitioning::Size => "size",
            Partitioning::Str => "str",
            Partitioning::RstarGrove => "rstar_grove",
        }
    }
}

/// How an over-full level `i >= 1` of the leveled policy picks the component
/// it pushes into level `i + 1` (seed 001 §5.3.1 names both).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Pick {
    /// "Pick Best": the component with the least overlapping bytes in the
    /// next level (ties: smallest `min_key`, then id).
    #[default]
    MinOverlap,
    /// "Round Robin": a cursor rotates over the level in key order (for a
    /// `zorder` R-tree, Z order): the first candidate whose `min_key` is
    /// above the cursor, else (wrapping around) the first. The cursor is
    /// the `max_key` of the newest (highest id) component of the next
    /// level, i.e. where the last merge into it ended (size-partitioned
    /// outputs are written in key order), so no state is stored; LevelDB
    /// keeps its cursor in the manifest instead. A later merge out of the
    /// next level can remove that component and move the cursor back.
    RoundRobin,
}

impl Pick {
    pub fn name(self) -> &'static str {
        match self {
            Pick::MinOverlap => "min_overlap",
            Pick::RoundRobin => "round_robin",
        }
    }

    /// The component of an over-full level (`members`) to push into the next
    /// level, with its overlaps there; `None` when every candidate is merging
    /// or has a merging overlap.
    fn choose<'a>(
        self,
        members: &[&'a ComponentInfo],
        next: &[&'a ComponentInfo],
    ) -> Option<Choice<'a>> {
        match self {
            Pick::MinOverlap => pick_min_overlap(members, next),
            Pick::RoundRobin => pick_round_robin(members, next),
        }
    }
}

/// A component picked to be pushed down, with its overlaps in the next level
/// sorted by `(min_key, id)`.
type Choice<'a> = (&'a ComponentInfo, Vec<&'a ComponentInfo>);

/// Build a leveled policy; `l1_bytes` defaults to `l0_trigger * target_file_bytes`.
pub(super) fn leveled_with(
    l0_trigger: usize,
    fanout: usize,
    target_file_bytes: u64,
    l1_bytes: Option<u64>,
) -> MergePolicy {
    let l1_bytes = l1_bytes.unwrap_or_else(|| {
        target_file_bytes.saturating_mul(u64::try_from(l0_trigger).unwrap_or(u64::MAX))
    });
    MergePolicy::Leveled {
        l0_trigger,
        fanout,
        target_file_bytes,
        l1_bytes,
        partitioning: Partitioning::Size,
        pick: Pick::MinOverlap,
    }
}

/// Leveled(B0, B, target, L1):
///
/// 1. If L0 holds `>= B0` components, none of them merging, and no L1
///    component overlapping the union key range `[min of min_keys, max of
///    max_keys]` of L0 is merging: merge all of L0 with those L1 components
///    into level 1. An L0 merge is exclusive: while any L0 component is
///    merging, no new L0 merge starts (two concurrent L0→L1 merges could
///    produce overlapping L1 components).
/// 2. Otherwise (including when step 1 is blocked by a merging input), for
///    each level `i >= 1`, lowest first, whose bytes exceed
///    `L1 * B^(i-1)`: among its non-merging components whose overlapping
///    level-`(i+1)` components are all non-merging, pick the one with the
///    least overlapping bytes in level `i+1` (ties: smallest `min_key`, then
///    id) and merge it with those overlaps into level `i+1`. If a level has no
///    such candidate, the next over-full level is tried.
///
/// A level's bytes count only its non-merging components (as RocksDB's level
/// score does), so the bytes already being pushed down do not trigger a second
/// merge. A merge out of the deepest level has no overlaps: it moves one
/// component into a new level. `target_file_bytes` only shapes the output,
/// not the decision.
///
/// Step 2's choice among the candidates is the [`Pick`]; the rule above is
/// the default `Pick::MinOverlap`.
pub(super) struct Leveled {
    pub(super) l0_trigger: usize,
    pub(super) fanout: usize,
    pub(super) target_file_bytes: u64,
    pub(super) l1_bytes: u64,
    pub(super) pick: Pick,
}

impl Policy for Leveled {
    fn name(&self) -> &'static str {
        "leveled"
    }

    fn validate(&self) -> Result<(), String> {
        let Leveled {
            l0_trigger,
            fanout,
            target_file_bytes,
            l1_bytes,
            ..
        } = *self;
        if l0_trigger < 1 {
            Err("leveled L0 trigger must be at least 1".into())
        } else if fanout < 2 {
            Err(format!("leveled fanout must be at least 2, got {fanout}"))
        } else if target_file_bytes == 0 {
            Err("leveled target file size must be at least 1 byte".into())
        } else if l1_bytes == 0 {
            Err("leveled L1 size must be at least 1 byte".into())
        } else {
            Ok(())
        }
    }

    fn decide(&self, comps: &[ComponentInfo], _ctx: &PolicyContext) -> MergeDecision {
        let Leveled {
            l0_trigger,
            fanout,
            l1_bytes,
            pick,
            ..
        } = *self;
        let mut levels: BTreeMap<u32, Vec<&ComponentInfo>> = BTreeMap::new();
        for c in comps {
            levels.entry(c.level).or_default().push(c);
        }
        let empty: Vec<&ComponentInfo> = Vec::new();
        let level = |i: u32| levels.get(&i).unwrap_or(&empty);

        let l0 = level(0);
        if !l0.is_empty() && l0.len() >= l0_trigger && l0.iter().all(|c| !c.merging) {
            let lo = l0.iter().map(|c| c.min_key.as_slice()).min();
            let hi = l0.iter().map(|c| c.max_key.as_slice()).max();
            if let (Some(lo), Some(hi)) = (lo, hi) {
                let l1 = if l0.iter().all(|c| c.mbr.is_some()) {
                    overlapping_any(level(1), l0)
                } else {
                    overlapping(level(1), lo, hi)
                };
                if l1.iter().all(|c| !c.merging) {
                    let inputs = l0.iter().chain(l1.iter()).map(|c| c.id).collect();
                    return MergeDecision::Leveled {
                        inputs,
                        output_level: 1,
                    };
                }
            }
        }

        let fanout = fanout as u128;
        for (&lvl, members) in levels.range(1..) {
            let Some(next_lvl) = lvl.checked_add(1) else {
                continue;
            };
            let limit = fanout
                .checked_pow(lvl - 1)
                .map_or(u128::MAX, |p| p.saturating_mul(u128::from(l1_bytes)));
            let bytes: u128 = members
                .iter()
                .filter(|c| !c.merging)
                .map(|c| u128::from(c.size_bytes))
                .sum();
            if bytes <= limit {
                continue;
            }
            let next = level(next_lvl);
            if let Some((picked, over)) = pick.choose(members, next) {
                let inputs = std::iter::once(picked).chain(over).map(|c| c.id).collect();
                return MergeDecision::Leveled {
                    inputs,
                    output_level: next_lvl,
                };
            }
        }
        MergeDecision::None
    }

    fn is_leveled(&self) -> bool {
        true
    }
}

/// `Pick::RoundRobin`: the first candidate (non-merging, no merging overlap)
/// in key order whose `min_key` is above the cursor, else the first.
fn pick_round_robin<'a>(
    members: &[&'a ComponentInfo],
    next: &[&'a ComponentInfo],
) -> Option<Choice<'a>> {
    // The cursor: where the last merge into the next level ended.
    let cursor = next
        .iter()
        .max_by_key(|c| c.id)
        .map(|c| c.max_key.as_slice());
    let mut cands: Vec<Choice<'a>> = members
        .iter()
        .filter(|c| !c.merging)
        .map(|&c| (c, overlapping_any(next, &[c])))
        .filter(|(_, over)| over.iter().all(|o| !o.merging))
        .collect();
    cands.sort_by(|a, b| a.0.min_key.cmp(&b.0.min_key).then(a.0.id.cmp(&b.0.id)));
    let at = cursor.map_or(0, |k| {
        cands.partition_point(|(c, _)| c.min_key.as_slice() <= k)
    });
    // Past the last candidate: wrap around to the first.
    let at = if at < cands.len() { at } else { 0 };
    cands.into_iter().nth(at)
}

/// `Pick::MinOverlap`: the non-merging candidate whose overlaps in the next
/// level are all non-merging and total the fewest bytes (ties: smallest
/// `min_key`, then id).
fn pick_min_overlap<'a>(
    members: &[&'a ComponentInfo],
    next: &[&'a ComponentInfo],
) -> Option<Choice<'a>> {
    let mut best: Option<(u128, &ComponentInfo, Vec<&ComponentInfo>)> = None;
    for &cand in members.iter().filter(|c| !c.merging) {
        let over = overlapping_any(next, &[cand]);
        if over.iter().any(|c| c.merging) {
            continue;
        }
        let over_bytes: u128 = over.iter().map(|c| u128::from(c.size_bytes)).sum();
        let better = match &best {
            None => true,
            Some((b_bytes, b, _)) => {
                (over_bytes, &cand.min_key, cand.id) < (*b_bytes, &b.min_key, b.id)
            }
        };
        if better {
            best = Some((over_bytes, cand, over));
        }
    }
    best.map(|(_, picked, over)| (picked, over))
}
