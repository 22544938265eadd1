//! `prefix(M,C)`: worked examples and a long flush sequence.

use super::*;

#[test]
fn prefix_examples() {
    const M: u64 = 100;
    let p = MergePolicy::Prefix {
        max_mergable_bytes: M,
        max_tolerance_count: 4,
    };
    let d = |sizes: &[u64]| p.decide(&stack(sizes), &ctx(0));
    // Newest first throughout.
    // Fewer than 4 small components, total <= M: nothing.
    assert_eq!(d(&[10, 10, 10]), MergeDecision::None);
    // Count trigger: 4 small components.
    assert_eq!(
        d(&[10, 10, 10, 10]),
        MergeDecision::Stack { start: 0, end: 4 }
    );
    // Components larger than M are frozen and ignored.
    assert_eq!(d(&[10, 10, 10, 500]), MergeDecision::None);
    assert_eq!(
        d(&[10, 10, 10, 10, 500]),
        MergeDecision::Stack { start: 0, end: 4 }
    );
    // Size trigger: the oldest-anchored shortest prefix exceeding M.
    // Oldest first: 55, 50 -> 105 > M and 55 < 1.2*50. Newest 10 stays out.
    assert_eq!(d(&[10, 50, 55]), MergeDecision::Stack { start: 1, end: 3 });
    // ... but 60 is not < 1.2*50 = 60, so the run must also take the 10:
    // 60 < 1.2*(50+10).
    assert_eq!(d(&[10, 50, 60]), MergeDecision::Stack { start: 0, end: 3 });
    // 80 is never < 1.2*(15+10+10): the start moves to 15, and 15, 10, 10
    // neither exceed M nor reach the count.
    assert_eq!(d(&[10, 10, 15, 80]), MergeDecision::None);
    // The 1.2 ratio guard against the count trigger: all five are <= M,
    // but 90 (oldest) is not < 1.2 * (10+5+5+5), so only the four younger
    // ones are merged.
    assert_eq!(
        d(&[5, 5, 5, 10, 90]),
        MergeDecision::Stack { start: 0, end: 4 }
    );
    // A big old one (90) with small young ones whose total exceeds its
    // 1/1.2: 90 < 1.2 * (40+40) = 96 and 170 > M.
    assert_eq!(d(&[40, 40, 90]), MergeDecision::Stack { start: 0, end: 3 });
    // A merging component ends runs: the merging one and everything older
    // are left alone; the 3 newest are too few.
    let mut comps = stack(&[10, 10, 10, 10, 10]);
    comps[3].merging = true;
    assert_eq!(p.decide(&comps, &ctx(0)), MergeDecision::None);
    comps.insert(0, comp(99, 10));
    assert_eq!(
        p.decide(&comps, &ctx(0)),
        MergeDecision::Stack { start: 0, end: 4 }
    );
    // Single component: never merged.
    assert_eq!(d(&[10]), MergeDecision::None);
}

#[test]
fn prefix_sequence_freezes_big_components() {
    // Flushes of 10 with M = 100, C = 5: after the decisions, at most 5
    // components are <= M (5 only when the oldest of them is held back by
    // the 1.2 ratio guard, e.g. 10,10,10,10,50), and frozen components
    // exceed M.
    let p = MergePolicy::Prefix {
        max_mergable_bytes: 100 * MT,
        max_tolerance_count: 5,
    };
    let mut comps: Vec<ComponentInfo> = Vec::new();
    for t in 0..500u64 {
        comps.insert(0, comp(1000 + t, 10 * MT));
        while let MergeDecision::Stack { start, end } = p.decide(&comps, &ctx(t + 1)) {
            let size = comps[start..end].iter().map(|c| c.size_bytes).sum();
            comps.splice(start..end, [comp(t, size)]);
        }
        let small = comps.iter().filter(|c| c.size_bytes <= 100 * MT).count();
        assert!(
            small <= 5,
            "t={t} {:?}",
            comps.iter().map(|c| c.size_bytes / MT).collect::<Vec<_>>()
        );
    }
    assert!(comps.iter().any(|c| c.size_bytes > 100 * MT));
}
