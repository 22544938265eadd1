//! `concurrent(K,C,D,LAMBDA)`: the HBase/Bigtable-style exploring policy as
//! defined by Mao et al., "Experimental Evaluation of Bounded-Depth LSM Merge
//! Policies" (seed 002), plus a fallback for a stuck stack.
//!
//! Parameters: `c >= 2` and `d >= c`, the shortest and longest run of newest
//! components to merge; `lambda` (finite, `> 0`), the size ratio a run's
//! oldest member must meet; `k >= c`, the number of components at which
//! flushes stall until a merge completes. `concurrent` alone means
//! `concurrent(30,3,10,1.2)`.

use super::{ComponentInfo, MergeDecision, Policy, PolicyContext};

/// Defaults of the `concurrent` policy (HBase-style exploring policy).
pub(super) const DEFAULT_K: usize = 30;
pub(super) const DEFAULT_C: usize = 3;
pub(super) const DEFAULT_D: usize = 10;
pub(super) const DEFAULT_LAMBDA: f64 = 1.2;

/// Concurrent(k, C, D, λ), the HBase/Bigtable exploring policy as defined in
/// the paper: among the runs of the newest `i` components, `C <= i <= D`,
/// none of them merging, take the longest whose oldest member `D_i`
/// satisfies `|D_i| <= λ · Σ_{j<i} |D_j|`.
///
/// Addition (not in the paper's definition): when no run qualifies and the
/// stack has reached `k` components (so flushes stall), merge the window of
/// `C` consecutive non-merging components with the smallest total size
/// (newest window on ties), like HBase's "might be stuck" fallback. Without it,
/// a stack whose newest components fail the ratio test would stall flushes
/// forever.
pub(super) struct Concurrent {
    pub(super) k: usize,
    pub(super) c: usize,
    pub(super) d: usize,
    pub(super) lambda: f64,
}

impl Policy for Concurrent {
    fn name(&self) -> &'static str {
        "concurrent"
    }

    fn validate(&self) -> Result<(), String> {
        let Concurrent { k, c, d, lambda } = *self;
        if c < 2 {
            Err(format!("concurrent C must be at least 2, got {c}"))
        } else if d < c {
            Err(format!("concurrent D ({d}) must be at least C ({c})"))
        } else if k < c {
            Err(format!("concurrent K ({k}) must be at least C ({c})"))
        } else if !(lambda.is_finite() && lambda > 0.0) {
            Err(format!(
                "concurrent lambda must be a positive number, got {lambda}"
            ))
        } else {
            Ok(())
        }
    }

    fn decide(&self, comps: &[ComponentInfo], _ctx: &PolicyContext) -> MergeDecision {
        let Concurrent { k, c, d, lambda } = *self;
        let free_newest = comps.iter().position(|x| x.merging).unwrap_or(comps.len());
        let longest = d.min(free_newest);
        if longest >= c {
            for i in (c..=longest).rev() {
                let oldest = comps[i - 1].size_bytes as f64;
                let younger: u128 = comps[..i - 1]
                    .iter()
                    .map(|x| u128::from(x.size_bytes))
                    .sum();
                if oldest <= lambda * younger as f64 {
                    return MergeDecision::Stack { start: 0, end: i };
                }
            }
        }
        if comps.len() >= k {
            let w = c.max(2);
            let mut best: Option<(u128, usize)> = None;
            for start in 0..comps.len().saturating_sub(w - 1) {
                let window = &comps[start..start + w];
                if window.iter().any(|x| x.merging) {
                    continue;
                }
                let total: u128 = window.iter().map(|x| u128::from(x.size_bytes)).sum();
                if best.is_none_or(|(t, _)| total < t) {
                    best = Some((total, start));
                }
            }
            if let Some((_, start)) = best {
                return MergeDecision::Stack {
                    start,
                    end: start + w,
                };
            }
        }
        MergeDecision::None
    }

    /// Flushes stall while the stack holds `k` components.
    fn stall_limit(&self) -> Option<usize> {
        Some(self.k)
    }
}
