//! `no-merge`: never merges, so every flush adds a disk component.
//!
//! AsterixDB's no-merge policy, the baseline of seed 003 §6.1.2 (Table 2,
//! beside `prefix` and `constant`). No parameters.

use super::{ComponentInfo, MergeDecision, Policy, PolicyContext};

/// The `no-merge` policy.
pub(super) struct NoMerge;

impl Policy for NoMerge {
    fn name(&self) -> &'static str {
        "no-merge"
    }

    fn validate(&self) -> Result<(), String> {
        Ok(())
    }

    fn decide(&self, _comps: &[ComponentInfo], _ctx: &PolicyContext) -> MergeDecision {
        MergeDecision::None
    }
}
