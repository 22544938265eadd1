//! Property tests: every decision is valid and deterministic, and the text
//! form round-trips.

use super::*;
use crate::lsm::policy::overlap::overlaps;
use proptest::prelude::*;

fn stack_policy() -> impl Strategy<Value = MergePolicy> {
    prop_oneof![
        Just(MergePolicy::NoMerge),
        (2usize..12).prop_map(|k| MergePolicy::Constant { k }),
        (1u64..2_000_000_000, 2usize..12).prop_map(|(m, c)| MergePolicy::Prefix {
            max_mergable_bytes: m,
            max_tolerance_count: c
        }),
        (1usize..12).prop_map(|k| MergePolicy::Binomial { k }),
        (2usize..8).prop_map(|b| MergePolicy::Tiered { b }),
        (2usize..6, 0usize..8, 0usize..30, 0.1f64..4.0).prop_map(|(c, dd, kk, lambda)| {
            MergePolicy::Concurrent {
                k: c + kk,
                c,
                d: c + dd,
                lambda,
            }
        }),
    ]
}

fn stack_comps() -> impl Strategy<Value = Vec<ComponentInfo>> {
    prop::collection::vec(
        (
            prop_oneof![
                1u64..3_000_000,
                1u64..20_000_000_000,
                Just(0u64),
                Just(u64::MAX)
            ],
            prop::bool::weighted(0.15),
        ),
        0..40,
    )
    .prop_map(|v| {
        v.into_iter()
            .enumerate()
            .map(|(i, (size, merging))| ComponentInfo {
                merging,
                mbr: None,
                ..comp(i as u64, size)
            })
            .collect()
    })
}

fn key() -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(0u8..6, 0..3)
}

fn leveled_comps() -> impl Strategy<Value = Vec<ComponentInfo>> {
    prop::collection::vec((0u32..4, 0u64..3000, key(), key()), 0..30).prop_map(|v| {
        v.into_iter()
            .enumerate()
            .map(|(i, (level, size, a, b))| {
                let (min_key, max_key) = if a <= b { (a, b) } else { (b, a) };
                ComponentInfo {
                    id: i as u64,
                    size_bytes: size,
                    entries: size,
                    level,
                    min_key,
                    max_key,
                    merging: false,
                    mbr: None,
                }
            })
            .collect()
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn stack_decisions_are_valid(
        policy in stack_policy(),
        comps in stack_comps(),
        flush_count in prop_oneof![0u64..200, 0u64..2_000_000, Just(u64::MAX)],
        memtable_bytes in prop_oneof![Just(0u64), 1u64..10_000_000, Just(u64::MAX)],
    ) {
        let ctx = PolicyContext { memtable_bytes, flush_count };
        let decision = policy.decide(&comps, &ctx);
        prop_assert_eq!(&decision, &policy.decide(&comps, &ctx), "not deterministic");
        match decision {
            MergeDecision::None => {}
            MergeDecision::Stack { start, end } => {
                prop_assert!(start < end && end <= comps.len(), "{start}..{end} of {}", comps.len());
                prop_assert!(end - start >= 2, "run {start}..{end} too short");
                prop_assert!(comps[start..end].iter().all(|c| !c.merging), "picked a merging component");
            }
            MergeDecision::Leveled { .. } => prop_assert!(false, "stack policy gave a leveled decision"),
        }
    }

    #[test]
    fn leveled_decisions_are_valid(
        l0_trigger in 1usize..6,
        fanout in 2usize..5,
        l1_bytes in 1u64..5000,
        comps in leveled_comps(),
        merging in prop::collection::vec(prop::bool::weighted(0.15), 30),
        round_robin in any::<bool>(),
    ) {
        let mut comps = comps;
        for (c, m) in comps.iter_mut().zip(merging) {
            c.merging = m;
        }
        let pick = if round_robin { Pick::RoundRobin } else { Pick::MinOverlap };
        let policy = MergePolicy::Leveled { l0_trigger, fanout, target_file_bytes: 100, l1_bytes, partitioning: Partitioning::Size, pick };
        match policy.decide(&comps, &ctx(0)) {
            MergeDecision::None => {}
            MergeDecision::Stack { .. } => prop_assert!(false, "leveled gave a stack decision"),
            MergeDecision::Leveled { inputs, output_level } => {
                prop_assert!(!inputs.is_empty());
                prop_assert!(output_level >= 1);
                let mut seen = std::collections::HashSet::new();
                for id in &inputs {
                    prop_assert!(seen.insert(*id), "duplicate input {id}");
                    let c = comps.iter().find(|c| c.id == *id);
                    prop_assert!(c.is_some(), "unknown id {id}");
                    let c = c.unwrap();
                    prop_assert!(!c.merging, "picked merging component {id}");
                    prop_assert!(c.level == output_level || c.level + 1 == output_level);
                }
                // Every component of the output level overlapping an input
                // from the level above is an input too.
                for upper in comps.iter().filter(|c| inputs.contains(&c.id) && c.level + 1 == output_level) {
                    for lower in comps.iter().filter(|c| c.level == output_level) {
                        if overlaps(&upper.min_key, &upper.max_key, lower) {
                            prop_assert!(inputs.contains(&lower.id), "missing overlap {}", lower.id);
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn parse_round_trips(policy in stack_policy()) {
        let text = policy.to_string();
        prop_assert_eq!(MergePolicy::parse(&text).ok(), Some(policy), "{}", text);
    }
}
