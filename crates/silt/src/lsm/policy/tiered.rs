//! `tiered(B)`: size-tiered merging with size ratio `B`, as defined and
//! simulated by Mao et al., "Experimental Evaluation of Bounded-Depth LSM
//! Merge Policies" (seed 002; its Table 1 is reproduced in `tests/table1.rs`).
//!
//! Parameter: `b >= 2`. Components are grouped in tiers of sizes about `b^i`
//! memtables (`PolicyContext::memtable_bytes`); a tier holding `b` or more
//! components is merged into one component of the next tier.

use super::{ComponentInfo, MergeDecision, Policy, PolicyContext};

/// Tiered(B), as in the authors' simulator, in exact integer arithmetic:
///
/// * `unit = ceil(memtable_bytes * 1.2)` (at least 1);
///   `tier(c) = ceil(log_B(max(1, ceil(size / unit)))) + 1`, computed as one
///   plus the smallest `e` with `B^e >= ceil(size / unit)` (the simulator's
///   floating-point `log` misrounds exact powers for some B, e.g. 5^3; the
///   intent is the exact value, and for B = 4 both agree).
/// * Tiers are formed walking the stack NEWEST first: a component whose tier
///   is above the highest tier seen so far opens that tier; any other
///   component joins the highest tier seen so far. This keeps every tier a run
///   of consecutive components (and lumps an out-of-order small old component
///   into the tier above it, as the simulator does).
/// * From the highest tier down, a tier (0-based list position `t`) holding
///   `>= B` components merges its longest run of newest components, of length
///   `>= B`, whose total is `<= unit * B^(t+1)`.
///
/// With merging components: a tier's candidate runs stop before its first
/// merging component. One decision may leave another merge due (merges
/// cascade); the engine should call `decide` again after a merge.
pub(super) struct Tiered {
    pub(super) b: usize,
}

impl Policy for Tiered {
    fn name(&self) -> &'static str {
        "tiered"
    }

    fn validate(&self) -> Result<(), String> {
        let b = self.b;
        if b < 2 {
            return Err(format!("tiered b must be at least 2, got {b}"));
        }
        Ok(())
    }

    fn decide(&self, comps: &[ComponentInfo], ctx: &PolicyContext) -> MergeDecision {
        let (b, memtable_bytes) = (self.b, ctx.memtable_bytes);
        let b128 = b as u128;
        let unit = ((u128::from(memtable_bytes) * 6).div_ceil(5)).max(1);
        let tier_of = |size: u64| -> usize {
            let units = u128::from(size).div_ceil(unit).max(1);
            let mut e = 0usize;
            let mut pow: u128 = 1;
            while pow < units {
                pow = pow.saturating_mul(b128);
                e += 1;
            }
            e + 1
        };
        let mut tiers: Vec<Vec<usize>> = Vec::new();
        for (pos, c) in comps.iter().enumerate() {
            let t = tier_of(c.size_bytes);
            let seen = tiers.len();
            match tiers.last_mut() {
                Some(last) if t <= seen => last.push(pos),
                _ => {
                    tiers.resize_with(t - 1, Vec::new);
                    tiers.push(vec![pos]);
                }
            }
        }
        for (t, members) in tiers.iter().enumerate().rev() {
            if members.len() < b {
                continue;
            }
            let limit = b128
                .checked_pow(u32::try_from(t + 1).unwrap_or(u32::MAX))
                .map_or(u128::MAX, |p| p.saturating_mul(unit));
            let usable = members
                .iter()
                .position(|&p| comps[p].merging)
                .unwrap_or(members.len());
            for len in (b..=usable).rev() {
                let total: u128 = members[..len]
                    .iter()
                    .map(|&p| u128::from(comps[p].size_bytes))
                    .sum();
                if total <= limit {
                    let start = members[0];
                    return MergeDecision::Stack {
                        start,
                        end: start + len,
                    };
                }
            }
        }
        MergeDecision::None
    }
}
