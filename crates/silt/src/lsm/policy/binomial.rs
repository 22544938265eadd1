//! `binomial(K)`: the Binomial policy of Mathieu et al. ("Bigtable merge
//! compaction"), as evaluated by Mao et al., "Experimental Evaluation of
//! Bounded-Depth LSM Merge Policies" (seed 002; its Table 1 is reproduced in
//! `tests/table1.rs`).
//!
//! Parameter: `k >= 1`. With equal-size flushes it keeps at most `k`
//! components after each flush's merge, following a schedule that depends
//! only on the number of flushes so far (`PolicyContext::flush_count`). The
//! schedule is computed in saturating integer arithmetic, so any flush count
//! (up to `u64::MAX`) is answered in O(k) steps.

use super::{ComponentInfo, MergeDecision, Policy, PolicyContext};

/// Saturation bound for binomial arithmetic: larger than any flush count (a
/// `u64`), so comparisons against flush counts stay exact.
pub(super) const BIG: u128 = 1 << 64;

/// `C(n, r)`, 0 when `r < 0` or `r > n` (so also when `n < 0`), saturated at
/// [`BIG`]. Runs at most ~65 multiplications: the partial products
/// `C(n - r + i, i)` at least double while `i <= min(r, n - r)`.
pub(super) fn choose(n: i128, r: i128) -> u128 {
    if r < 0 || n < 0 || r > n {
        return 0;
    }
    let r = r.min(n - r) as u128;
    let n = n as u128;
    let mut acc: u128 = 1;
    let mut i: u128 = 1;
    while i <= r {
        // acc == C(n - r + i - 1, i - 1); the next value is an exact division.
        acc = match acc.checked_mul(n - r + i) {
            Some(p) => p / i,
            None => return BIG,
        };
        if acc >= BIG {
            return BIG;
        }
        i += 1;
    }
    acc
}

/// `treeDepth(d) = treeDepth(d-1) + C(d + min(d,k) - 1, d)`, `treeDepth(-1) = 0`,
/// saturated at [`BIG`]. For `d > k` it uses the hockey-stick closed form
/// `treeDepth(k) + C(d+k, k) - C(2k, k)` so it stays O(k) for any `d`.
pub(super) fn tree_depth(d: i128, k: u128) -> u128 {
    if d < 0 {
        return 0;
    }
    let d = d as u128;
    let mut sum: u128 = 0;
    let mut i: u128 = 0;
    while i <= d.min(k) {
        // i <= k, so min(i, k) == i.
        sum += choose(2 * i as i128 - 1, i as i128);
        if sum >= BIG {
            return BIG;
        }
        i += 1;
    }
    if d > k {
        let top = choose((d + k) as i128, k as i128);
        if top >= BIG {
            return BIG;
        }
        // C(2k, k) < C(d + k, k) because d > k, so no underflow.
        sum += top - choose(2 * k as i128, k as i128);
        if sum >= BIG {
            return BIG;
        }
    }
    sum
}

/// The reference `binomialIndex(d, h, t)`:
/// `t == 0 -> 0; t < C(d+h-1, h) -> binomialIndex(d-1, h, t);
/// else binomialIndex(d, h-1, t - C(d+h-1, h)) + 1`,
/// made iterative, with the runs of `d-1` steps done by binary search (the
/// coefficient is non-decreasing in `d`). Returns `None` where the reference
/// would not terminate (`h < 0` with `t > 0`).
fn binomial_index(d: u128, h: i128, t: u128) -> Option<u64> {
    let (mut d, mut h, mut t) = (d, h, t);
    let mut acc: u64 = 0;
    let coeff = |d: u128, h: i128| choose(d as i128 + h - 1, h);
    loop {
        if t == 0 {
            return Some(acc);
        }
        if h < 0 {
            return None;
        }
        if t < coeff(d, h) {
            // Largest d' < d with coeff(d', h) <= t; coeff(0, h) == 0 <= t.
            let (mut lo, mut hi) = (0u128, d);
            while hi - lo > 1 {
                let mid = lo + (hi - lo) / 2;
                if coeff(mid, h) <= t {
                    lo = mid;
                } else {
                    hi = mid;
                }
            }
            d = lo;
        }
        t -= coeff(d, h);
        h -= 1;
        acc += 1;
    }
}

/// The oldest-first index from which the Binomial schedule merges after flush
/// number `t`, as in the authors' public simulator:
/// `depth` = smallest `d` with `treeDepth(d) >= t`,
/// `idx = binomialIndex(depth, min(depth,k)-1, t - treeDepth(depth-1) - 1)`.
/// `None` for `t == 0`.
pub(super) fn binomial_merge_index(k: usize, t: u64) -> Option<u64> {
    if t == 0 || k == 0 {
        return None;
    }
    let k = k as u128;
    let t = u128::from(t);
    // treeDepth(d) >= d for k >= 1, so depth <= t: gallop, then binary search.
    let mut hi: u128 = 1;
    while tree_depth(hi as i128, k) < t {
        hi *= 2;
    }
    let mut lo: u128 = 0; // treeDepth(0) == 0 < t
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if tree_depth(mid as i128, k) >= t {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    let depth = hi;
    let h = depth.min(k) as i128 - 1;
    let offset = t - tree_depth(depth as i128 - 1, k) - 1;
    binomial_index(depth, h, offset)
}

/// Binomial(k): components are considered oldest first; with
/// `idx = binomial_merge_index(k, flush_count)`, merge oldest-first positions
/// `idx..=size-1` (from `idx` through the newest) unless `idx >= size - 1`.
/// No count guard (`size <= k`) is applied: the authors' simulator without it
/// is the one that reproduces the published Table 1. If any component of the
/// run is merging, nothing is merged.
pub(super) struct Binomial {
    pub(super) k: usize,
}

impl Policy for Binomial {
    fn name(&self) -> &'static str {
        "binomial"
    }

    fn validate(&self) -> Result<(), String> {
        if self.k < 1 {
            return Err("binomial k must be at least 1".into());
        }
        Ok(())
    }

    fn decide(&self, comps: &[ComponentInfo], ctx: &PolicyContext) -> MergeDecision {
        let (k, flush_count) = (self.k, ctx.flush_count);
        let n = comps.len();
        let Some(idx) = binomial_merge_index(k, flush_count) else {
            return MergeDecision::None;
        };
        let Ok(idx) = usize::try_from(idx) else {
            return MergeDecision::None;
        };
        if n < 2 || idx >= n - 1 {
            return MergeDecision::None;
        }
        let (start, end) = (0, n - idx);
        if comps[start..end].iter().any(|c| c.merging) {
            return MergeDecision::None;
        }
        MergeDecision::Stack { start, end }
    }
}
