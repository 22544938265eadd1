//! `prefix(MAX_MERGABLE_SIZE,MAX_TOLERANCE_COUNT)`: AsterixDB's
//! `PrefixMergePolicy`, its default policy (compared in seed 003 §6.1.2,
//! Table 2); the default [`MergePolicy`](super::MergePolicy) is `prefix(1GB,5)`.
//!
//! Parameters: `max_mergable_bytes >= 1`, the size above which a component is
//! frozen (never merged again), and `max_tolerance_count >= 2`, the number of
//! mergeable components that triggers a merge of all of them.

use super::{ComponentInfo, MergeDecision, Policy, PolicyContext};

/// AsterixDB `PrefixMergePolicy.getMergableComponentsIndex`, followed exactly
/// (the current upstream version, including its 1.2 size-ratio guard), with
/// these choices:
///
/// * Components are scanned OLDEST to newest. A component is *mergeable* when
///   its size is `<= max` and it is not merging; a non-mergeable component ends
///   any run (upstream treats a component that is not READABLE_UNWRITABLE the
///   same way). Upstream additionally refuses to schedule anything while any
///   merge of the index runs; we do not: runs simply stop at merging
///   components, and whether merges may overlap is the engine's business.
/// * For each mergeable start component `s` (oldest first), extend the run with
///   younger mergeable components. As soon as the run's total exceeds `max` AND
///   `size(s) < 1.2 * (total - size(s))` (the start is not much bigger than the
///   younger part), merge that run. This is the "size trigger"; the run is the
///   shortest oldest-anchored prefix that exceeds `max`, so the result may
///   exceed `max` (it then becomes frozen). Upstream's early exit is kept:
///   stop extending when even assuming every remaining component had the size
///   of the current one the ratio could not be met.
/// * If the run reached the newest component without the size trigger, and it
///   holds at least `max_tolerance_count` components and passes the ratio
///   guard, merge the whole run (the "count trigger"; upstream does not trim
///   it to a sum <= max, and neither do we).
/// * Otherwise try the next (younger) start component; stop as soon as fewer
///   than `max_tolerance_count` components remain.
///
/// The ratio tests are done in exact integer arithmetic (`5*a < 6*b`), so there
/// is no floating-point rounding.
pub(super) struct Prefix {
    pub(super) max_mergable_bytes: u64,
    pub(super) max_tolerance_count: usize,
}

impl Policy for Prefix {
    fn name(&self) -> &'static str {
        "prefix"
    }

    fn validate(&self) -> Result<(), String> {
        let Prefix {
            max_mergable_bytes,
            max_tolerance_count,
        } = *self;
        if max_mergable_bytes == 0 {
            Err("prefix max mergable size must be at least 1 byte".into())
        } else if max_tolerance_count < 2 {
            Err(format!(
                "prefix max tolerance count must be at least 2, got {max_tolerance_count}"
            ))
        } else {
            Ok(())
        }
    }

    fn decide(&self, comps: &[ComponentInfo], _ctx: &PolicyContext) -> MergeDecision {
        let (max, tolerance) = (self.max_mergable_bytes, self.max_tolerance_count);
        let n = comps.len();
        let max = u128::from(max);
        // Oldest-first view.
        let old = |i: usize| &comps[n - 1 - i];
        let mergeable = |c: &ComponentInfo| u128::from(c.size_bytes) <= max && !c.merging;
        // a < 1.2 * b, exactly.
        let below_ratio = |a: u128, b: u128| a * 5 < b * 6;
        for i in 0..n {
            if !mergeable(old(i)) {
                continue;
            }
            let start = u128::from(old(i).size_bytes);
            let mut total = start;
            let mut ratio_ok = true;
            let mut j = i + 1;
            while j < n {
                let cj = old(j);
                if !mergeable(cj) {
                    break;
                }
                let size = u128::from(cj.size_bytes);
                total += size;
                ratio_ok = below_ratio(start, total - start);
                if total > max && ratio_ok {
                    return stack_from_oldest(n, i, j);
                }
                // Early exit (upstream): components get younger and smaller, so if
                // even `n - j - 1` more of this size cannot satisfy the ratio, stop.
                let optimistic = total + size * (n - j - 1) as u128 - start;
                if !below_ratio(start, optimistic) {
                    break;
                }
                j += 1;
            }
            if j != n {
                continue;
            }
            let run_len = n - i;
            if run_len >= tolerance.max(2) && ratio_ok {
                return stack_from_oldest(n, i, n - 1);
            }
            if run_len < tolerance {
                return MergeDecision::None;
            }
        }
        MergeDecision::None
    }
}

/// Convert an oldest-first inclusive run `lo..=hi` (indices into the reversed
/// slice of length `n`) into a newest-first `Stack` decision.
fn stack_from_oldest(n: usize, lo: usize, hi: usize) -> MergeDecision {
    MergeDecision::Stack {
        start: n - 1 - hi,
        end: n - lo,
    }
}
