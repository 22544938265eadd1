//! `tiered(B)`: worked examples (the Table 1 sequence is in `table1.rs`).

use super::*;

#[test]
fn tiered_examples() {
    let p = MergePolicy::Tiered { b: 3 };
    let d = |sizes: &[u64]| p.decide(&stack(sizes), &ctx(0));
    assert_eq!(d(&[MT, MT]), MergeDecision::None);
    assert_eq!(d(&[MT, MT, MT]), MergeDecision::Stack { start: 0, end: 3 });
    // Higher tier first: three components of 3 memtables (tier 2).
    assert_eq!(
        d(&[MT, MT, 3 * MT, 3 * MT, 3 * MT]),
        MergeDecision::Stack { start: 2, end: 5 }
    );
    // A merging component shortens the candidate run.
    let mut comps = stack(&[MT, MT, MT, MT]);
    comps[2].merging = true;
    assert_eq!(p.decide(&comps, &ctx(0)), MergeDecision::None);
    // Four tier-1 components, B = 3: the limit is 1.2 * 3 memtables, so the
    // longest fitting run is the newest three.
    assert_eq!(
        p.decide(&stack(&[MT, MT, MT, MT]), &ctx(0)),
        MergeDecision::Stack { start: 0, end: 3 }
    );
    // A zero memtable size does not divide by zero.
    let zero = PolicyContext {
        memtable_bytes: 0,
        flush_count: 0,
    };
    assert!(matches!(
        p.decide(&stack(&[1, 1, 1]), &zero),
        MergeDecision::Stack { .. }
    ));
}
