//! `constant(K)`.

use super::*;

#[test]
fn constant_triggers_at_k() {
    let p = MergePolicy::Constant { k: 3 };
    assert_eq!(p.decide(&stack(&[1, 2]), &ctx(2)), MergeDecision::None);
    assert_eq!(
        p.decide(&stack(&[1, 2, 3]), &ctx(3)),
        MergeDecision::Stack { start: 0, end: 3 }
    );
    assert_eq!(
        p.decide(&stack(&[1, 2, 3, 4]), &ctx(4)),
        MergeDecision::Stack { start: 0, end: 4 }
    );
    let mut busy = stack(&[1, 2, 3, 4]);
    busy[3].merging = true;
    assert_eq!(p.decide(&busy, &ctx(4)), MergeDecision::None);
    assert!(!p.should_stall_flush(&busy));
    // With one decision per flush it keeps at most k - 1 .. k components.
    let seq = simulate(&p, 40, true);
    assert!(seq.iter().all(|s| s.len() < 3));
}
