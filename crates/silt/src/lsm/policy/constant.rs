//! `constant(K)`: AsterixDB's `ConstantMergePolicy` (compared in seed 003
//! §6.1.2, Table 2).
//!
//! Parameter: `k >= 2`, the number of disk components at which all of them are
//! merged into one.

use super::{ComponentInfo, MergeDecision, Policy, PolicyContext};

/// Once there are `k` or more components and none is merging, merge them all.
pub(super) struct Constant {
    pub(super) k: usize,
}

impl Policy for Constant {
    fn name(&self) -> &'static str {
        "constant"
    }

    fn validate(&self) -> Result<(), String> {
        let k = self.k;
        if k < 2 {
            return Err(format!("constant k must be at least 2, got {k}"));
        }
        Ok(())
    }

    fn decide(&self, comps: &[ComponentInfo], _ctx: &PolicyContext) -> MergeDecision {
        let k = self.k;
        if comps.len() >= k.max(2) && comps.iter().all(|c| !c.merging) {
            MergeDecision::Stack {
                start: 0,
                end: comps.len(),
            }
        } else {
            MergeDecision::None
        }
    }
}
