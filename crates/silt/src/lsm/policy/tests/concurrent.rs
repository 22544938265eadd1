//! `concurrent(K,C,D,LAMBDA)`: run choice, stalls and the stuck fallback.

use super::*;

#[test]
fn concurrent_run_choice_and_stall() {
    let p = MergePolicy::default_concurrent();
    let d = |sizes: &[u64]| p.decide(&stack(sizes), &ctx(0));
    // Fewer than C components: nothing.
    assert_eq!(d(&[1, 1]), MergeDecision::None);
    // Three equal ones: 1 <= 1.2 * 2.
    assert_eq!(d(&[1, 1, 1]), MergeDecision::Stack { start: 0, end: 3 });
    // Longest qualifying run wins: newest 5 qualify (2 <= 1.2*4) but not 6 (50).
    assert_eq!(
        d(&[1, 1, 1, 1, 2, 50]),
        MergeDecision::Stack { start: 0, end: 5 }
    );
    // At most D components.
    assert_eq!(d(&[1; 15]), MergeDecision::Stack { start: 0, end: 10 });
    // Oldest of every candidate run too big: nothing.
    assert_eq!(d(&[1, 1, 10, 100, 1000]), MergeDecision::None);
    // The run must be the newest components and not merging.
    let mut comps = stack(&[1, 1, 1, 1, 1]);
    comps[2].merging = true;
    assert_eq!(p.decide(&comps, &ctx(0)), MergeDecision::None);
    comps[2].merging = false;
    comps[4].merging = true;
    assert_eq!(
        p.decide(&comps, &ctx(0)),
        MergeDecision::Stack { start: 0, end: 4 }
    );

    // Stall at k components.
    let small = MergePolicy::Concurrent {
        k: 5,
        c: 3,
        d: 4,
        lambda: 1.2,
    };
    assert!(!small.should_stall_flush(&stack(&[1, 1, 1, 1])));
    assert!(small.should_stall_flush(&stack(&[1, 1, 1, 1, 1])));
    assert!(small.should_stall_flush(&stack(&[1, 1, 1, 1, 1, 1])));
    // Stuck at k with no qualifying run: the cheapest C-window is merged so
    // flushes can resume.
    let stuck = stack(&[1, 3, 20, 30, 40]);
    assert_eq!(
        small.decide(&stuck, &ctx(0)),
        MergeDecision::Stack { start: 0, end: 3 }
    );
    assert_eq!(
        small.decide(&stack(&[1, 3, 20, 30]), &ctx(0)),
        MergeDecision::None
    );
    // Other policies never stall.
    for p in [
        MergePolicy::NoMerge,
        MergePolicy::default(),
        MergePolicy::Binomial { k: 2 },
        MergePolicy::default_leveled(),
    ] {
        assert!(!p.should_stall_flush(&stack(&[1; 100])));
    }
}

#[test]
fn concurrent_sequence_stays_bounded() {
    let p = MergePolicy::default_concurrent();
    let mut comps: Vec<ComponentInfo> = Vec::new();
    for t in 0..2000u64 {
        assert!(!p.should_stall_flush(&comps), "stalled at {t}");
        comps.insert(0, comp(10_000 + t, MT));
        if let MergeDecision::Stack { start, end } = p.decide(&comps, &ctx(t + 1)) {
            let size = comps[start..end].iter().map(|c| c.size_bytes).sum();
            comps.splice(start..end, [comp(t, size)]);
        }
    }
    assert_eq!(comps.iter().map(|c| c.size_bytes).sum::<u64>(), 2000 * MT);
}
