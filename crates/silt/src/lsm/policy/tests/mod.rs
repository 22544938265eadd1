//! Tests of the merge policies, one file per policy (as in `policy/`), plus
//! the Table 1 reproduction, the text form and property tests. Shared helpers
//! live here.

mod binomial;
mod concurrent;
mod constant;
mod leveled;
mod no_merge;
mod prefix;
mod props;
mod table1;
mod text;
mod tiered;

use super::*;

const MT: u64 = 1_000_000;

fn comp(id: u64, size: u64) -> ComponentInfo {
    ComponentInfo {
        id,
        size_bytes: size,
        entries: size / 100,
        level: 0,
        min_key: Vec::new(),
        max_key: vec![0xff],
        merging: false,
        mbr: None,
    }
}

/// Newest-first stack from sizes given newest first.
fn stack(sizes: &[u64]) -> Vec<ComponentInfo> {
    sizes
        .iter()
        .enumerate()
        .map(|(i, &s)| comp(i as u64, s))
        .collect()
}

fn ctx(flush_count: u64) -> PolicyContext {
    PolicyContext {
        memtable_bytes: MT,
        flush_count,
    }
}

fn leveled_comp(id: u64, level: u32, size: u64, min: &str, max: &str) -> ComponentInfo {
    ComponentInfo {
        id,
        size_bytes: size,
        entries: size / 100,
        level,
        min_key: min.as_bytes().to_vec(),
        max_key: max.as_bytes().to_vec(),
        merging: false,
        mbr: None,
    }
}

/// Flush `flushes` components of one memtable each; after every flush, ask
/// for decisions (once, or until `None`) and apply them instantly. Returns
/// the stack (sizes newest first, in memtable units) every 20 flushes.
fn simulate(policy: &MergePolicy, flushes: u64, loop_until_none: bool) -> Vec<Vec<u64>> {
    let mut comps: Vec<ComponentInfo> = Vec::new();
    let mut next_id = 0;
    let mut out = Vec::new();
    for t in 1..=flushes {
        comps.insert(0, comp(next_id, MT));
        next_id += 1;
        loop {
            match policy.decide(&comps, &ctx(t)) {
                MergeDecision::None => break,
                MergeDecision::Stack { start, end } => {
                    assert!(end - start >= 2 && end <= comps.len());
                    let size = comps[start..end].iter().map(|c| c.size_bytes).sum();
                    comps.splice(start..end, [comp(next_id, size)]);
                    next_id += 1;
                }
                other => panic!("stack policy returned {other:?}"),
            }
            if !loop_until_none {
                break;
            }
        }
        if t % 20 == 0 {
            out.push(comps.iter().map(|c| c.size_bytes / MT).collect());
        }
    }
    out
}

fn table(row: &str) -> Vec<Vec<u64>> {
    row.split('|')
        .map(|cell| {
            cell.trim()
                .split(',')
                .map(|n| n.trim().parse().unwrap())
                .collect()
        })
        .collect()
}

#[test]
fn invalid_policies_never_merge() {
    let comps = stack(&[1; 40]);
    for p in [
        MergePolicy::Constant { k: 0 },
        MergePolicy::Tiered { b: 0 },
        MergePolicy::Binomial { k: 0 },
        MergePolicy::Concurrent {
            k: 0,
            c: 0,
            d: 0,
            lambda: f64::NAN,
        },
        MergePolicy::Leveled {
            l0_trigger: 0,
            fanout: 0,
            target_file_bytes: 0,
            l1_bytes: 0,
            partitioning: Partitioning::Size,
            pick: Pick::MinOverlap,
        },
    ] {
        assert!(p.validate().is_err());
        assert_eq!(p.decide(&comps, &ctx(40)), MergeDecision::None);
        assert!(!p.should_stall_flush(&comps));
    }
}
