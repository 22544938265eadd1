//! `binomial(K)`: the schedule arithmetic against the reference recursion,
//! large flush counts, the `k` bound and merging components.

use super::*;
use crate::lsm::policy::binomial::{BIG, binomial_merge_index, choose, tree_depth};

/// Direct port of the reference definitions, for small arguments
/// (`treeDepth` accumulated along the depth search instead of recursed).
fn reference_binomial_index(k: i64, t: i64) -> i64 {
    fn c(n: i64, r: i64) -> i64 {
        if r < 0 || r > n {
            return 0;
        }
        let r = r.min(n - r);
        let mut acc = 1i64;
        for i in 1..=r {
            acc = acc * (n - r + i) / i;
        }
        acc
    }
    fn index(d: i64, h: i64, t: i64) -> i64 {
        if t == 0 {
            0
        } else if t < c(d + h - 1, h) {
            index(d - 1, h, t)
        } else {
            index(d, h - 1, t - c(d + h - 1, h)) + 1
        }
    }
    // tree(-1) = 0; tree(d) = tree(d-1) + C(d + min(d,k) - 1, d).
    let mut depth = 0;
    let mut tree_prev = 0; // tree(depth - 1)
    let mut tree_cur = c(-1, 0); // tree(0)
    while tree_cur < t {
        depth += 1;
        tree_prev = tree_cur;
        tree_cur += c(depth + depth.min(k) - 1, depth);
    }
    index(depth, depth.min(k) - 1, t - tree_prev - 1)
}

#[test]
fn binomial_index_matches_reference_recursion() {
    for k in 1..=6usize {
        for t in 1..=2000u64 {
            let got = binomial_merge_index(k, t);
            let want = reference_binomial_index(k as i64, t as i64);
            assert_eq!(got, Some(want as u64), "k={k} t={t}");
        }
    }
}

#[test]
fn binomial_tree_depth_closed_form_matches_sum() {
    for k in 1..=8u128 {
        let mut sum = 0u128;
        for d in 0..60i128 {
            sum += choose(d + d.min(k as i128) - 1, d);
            assert_eq!(tree_depth(d, k), sum.min(BIG), "k={k} d={d}");
        }
    }
}

#[test]
fn binomial_is_robust_for_large_flush_counts() {
    for k in [1usize, 2, 3, 4, 10, 64, usize::MAX] {
        for t in [
            0u64,
            1,
            2,
            999_999,
            1_000_000,
            1 << 40,
            u64::MAX - 1,
            u64::MAX,
        ] {
            let idx = binomial_merge_index(k, t);
            if t == 0 {
                assert_eq!(idx, None);
            } else {
                assert!(idx.is_some(), "k={k} t={t}");
            }
        }
    }
    // k = 1 keeps a single component.
    assert_eq!(
        MergePolicy::Binomial { k: 1 }.decide(&stack(&[MT, 5 * MT]), &ctx(6)),
        MergeDecision::Stack { start: 0, end: 2 }
    );
    // Nothing to do without flushes or components.
    let p = MergePolicy::Binomial { k: 4 };
    assert_eq!(p.decide(&[], &ctx(0)), MergeDecision::None);
    assert_eq!(p.decide(&stack(&[MT]), &ctx(0)), MergeDecision::None);
}

#[test]
fn binomial_keeps_at_most_k_components() {
    for k in 1..=6usize {
        let p = MergePolicy::Binomial { k };
        let mut comps: Vec<ComponentInfo> = Vec::new();
        for t in 1..=3000u64 {
            comps.insert(0, comp(t, MT));
            if let MergeDecision::Stack { start, end } = p.decide(&comps, &ctx(t)) {
                let size = comps[start..end].iter().map(|c| c.size_bytes).sum();
                comps.splice(start..end, [comp(t, size)]);
            }
            assert!(comps.len() <= k, "k={k} t={t} len={}", comps.len());
        }
    }
}

#[test]
fn binomial_skips_merging_components() {
    let p = MergePolicy::Binomial { k: 4 };
    // After 5 flushes with k = 4 the reference merges everything (2,1,1,1 + 1).
    let mut comps = stack(&[MT, MT, MT, MT, MT]);
    assert!(matches!(
        p.decide(&comps, &ctx(5)),
        MergeDecision::Stack { .. }
    ));
    comps[4].merging = true;
    assert_eq!(p.decide(&comps, &ctx(5)), MergeDecision::None);
}
