//! `no-merge`.

use super::*;

#[test]
fn no_merge_never_merges() {
    let p = MergePolicy::NoMerge;
    for n in 0..50 {
        let comps = stack(&vec![MT; n]);
        assert_eq!(p.decide(&comps, &ctx(n as u64)), MergeDecision::None);
        assert!(!p.should_stall_flush(&comps));
    }
}
