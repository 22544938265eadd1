//! Table 1 of Mao et al., "Experimental Evaluation of Bounded-Depth LSM
//! Merge Policies" (seed 002): the merge sequences of `binomial(4)` and
//! `tiered(4)` over 120 equal flushes, reproduced exactly.

use super::*;

const BINOMIAL_4: &str = "1,4,15 | 2,3,20,15 | 10,50 | 10,20,50 | 15,35,50 | 1,3,10,106";
const TIERED_4: &str = "4,16 | 4,4,16,16 | 4,4,4,16,16,16 | 16,64 | 4,16,16,64 | 4,4,16,16,16,64";

#[test]
fn table1_rows_sum_to_flush_counts() {
    for row in [BINOMIAL_4, TIERED_4] {
        for (i, cell) in table(row).iter().enumerate() {
            assert_eq!(cell.iter().sum::<u64>(), 20 * (i as u64 + 1), "{row}");
        }
    }
}

#[test]
fn table1_binomial_k4() {
    let p = MergePolicy::Binomial { k: 4 };
    // Binomial's decision depends only on the flush count, and after one
    // merge the next decision for the same count is always None, so one
    // decision per flush and loop-until-None give the same sequence.
    assert_eq!(simulate(&p, 120, true), table(BINOMIAL_4));
    assert_eq!(simulate(&p, 120, false), table(BINOMIAL_4));
}

#[test]
fn table1_tiered_b4() {
    let p = MergePolicy::Tiered { b: 4 };
    // Tiered merges cascade (1,1,1,1 -> 4 completes a tier of four 4s ->
    // 16 ...), so the published sequence needs loop-until-None.
    assert_eq!(simulate(&p, 120, true), table(TIERED_4));
    // One decision per flush differs only at 80 flushes, where the cascade
    // 4x1 -> 4, 4x4 -> 16, 4x16 -> 64 is cut after its first step.
    let once = simulate(&p, 120, false);
    let mut expected = table(TIERED_4);
    expected[3] = vec![4, 4, 4, 4, 64];
    assert_eq!(once, expected);
}
