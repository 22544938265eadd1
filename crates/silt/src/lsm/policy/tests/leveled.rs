//! `leveled(...)`: the L0 trigger, both picks, deeper levels.

use super::*;

#[test]
fn leveled_l0_trigger() {
    let p = MergePolicy::Leveled {
        l0_trigger: 3,
        fanout: 10,
        target_file_bytes: 10,
        l1_bytes: 1000,
        partitioning: Partitioning::Size,
        pick: Pick::MinOverlap,
    };
    let mut comps = vec![
        leveled_comp(10, 0, 10, "d", "f"),
        leveled_comp(11, 0, 10, "b", "c"),
        leveled_comp(1, 1, 10, "a", "a"),
        leveled_comp(2, 1, 10, "b", "b"),
        leveled_comp(3, 1, 10, "c", "e"),
        leveled_comp(4, 1, 10, "g", "z"),
    ];
    assert_eq!(p.decide(&comps, &ctx(0)), MergeDecision::None);
    comps.insert(0, leveled_comp(12, 0, 10, "e", "e"));
    // Union range [b, f] overlaps L1 components 2 and 3, not 1 or 4.
    assert_eq!(
        p.decide(&comps, &ctx(0)),
        MergeDecision::Leveled {
            inputs: vec![12, 10, 11, 2, 3],
            output_level: 1
        }
    );
    // A needed L1 input is merging: no L0 merge.
    comps[4].merging = true; // id 2
    assert_eq!(p.decide(&comps, &ctx(0)), MergeDecision::None);
    comps[4].merging = false;
    // An L0 merge is running: no second one.
    comps[2].merging = true;
    comps.insert(0, leveled_comp(13, 0, 10, "x", "y"));
    comps.insert(0, leveled_comp(14, 0, 10, "x", "y"));
    assert_eq!(p.decide(&comps, &ctx(0)), MergeDecision::None);
    // Key ranges compare byte-wise and inclusively: [g] touches L1 [g, z].
    let touch = vec![
        leveled_comp(20, 0, 1, "g", "g"),
        leveled_comp(21, 0, 1, "g", "g"),
        leveled_comp(22, 0, 1, "g", "g"),
        leveled_comp(4, 1, 10, "g", "z"),
        leveled_comp(5, 1, 10, "f", "f\u{0}"),
    ];
    assert_eq!(
        p.decide(&touch, &ctx(0)),
        MergeDecision::Leveled {
            inputs: vec![20, 21, 22, 4],
            output_level: 1
        }
    );
}

/// Round robin (seed 001 §5.3.1): the first level-1 component after the
/// end of the last merge into level 2 (the newest level-2 component's
/// largest key), wrapping around; merging candidates are passed over.
#[test]
fn leveled_round_robin_pick() {
    let p = MergePolicy::parse("leveled(2,4,10,25,size,round_robin)").unwrap();
    assert_eq!(p.to_string(), "leveled(2,4,10,25,size,round_robin)");
    assert_eq!(
        MergePolicy::parse("leveled(2,4,10,25,str,rr)")
            .unwrap()
            .to_string(),
        "leveled(2,4,10,25,str,round_robin)"
    );
    assert_eq!(
        MergePolicy::parse("leveled(2,4,10,25,size,min_overlap)")
            .unwrap()
            .to_string(),
        "leveled(2,4,10,25)"
    );
    assert!(MergePolicy::parse("leveled(2,4,10,25,size,random)").is_err());
    assert!(MergePolicy::parse("leveled(2,4,10,25,size,rr,x)").is_err());
    // Level 1 (40 bytes > 25) in key order: a, c, e, g.
    let l1 = vec![
        leveled_comp(1, 1, 10, "e", "f"),
        leveled_comp(2, 1, 10, "a", "b"),
        leveled_comp(3, 1, 10, "g", "h"),
        leveled_comp(4, 1, 10, "c", "d"),
    ];
    let pick = |l2: &[ComponentInfo], merging: &[u64]| {
        let mut comps = l1.clone();
        comps.extend(l2.iter().cloned());
        for c in &mut comps {
            c.merging = merging.contains(&c.id);
        }
        match p.decide(&comps, &ctx(0)) {
            MergeDecision::Leveled {
                inputs,
                output_level: 2,
            } => inputs,
            other => panic!("{other:?}"),
        }
    };
    // Empty level 2: start at the smallest key.
    assert_eq!(pick(&[], &[]), vec![2]);
    // The newest level-2 component ends at "b": next is [c, d].
    let l2 = [
        leveled_comp(30, 2, 10, "e", "e"),
        leveled_comp(31, 2, 10, "a", "b"),
    ];
    assert_eq!(pick(&l2, &[]), vec![4]);
    // It ends at "d": [e, f] with its overlap in level 2.
    let l2 = [
        leveled_comp(31, 2, 10, "a", "b"),
        leveled_comp(32, 2, 10, "c", "d"),
        leveled_comp(30, 2, 10, "e", "e"),
    ];
    assert_eq!(pick(&l2, &[]), vec![1, 30]);
    // [e, f] is merging: the cursor moves on to [g, h].
    assert_eq!(pick(&l2, &[1]), vec![3]);
    // Past the last component: wrap around to the first.
    let l2 = [leveled_comp(40, 2, 10, "x", "y")];
    assert_eq!(pick(&l2, &[]), vec![2]);
}

#[test]
fn leveled_min_overlap_pick() {
    let p = MergePolicy::Leveled {
        l0_trigger: 4,
        fanout: 10,
        target_file_bytes: 100,
        l1_bytes: 250,
        partitioning: Partitioning::Size,
        pick: Pick::MinOverlap,
    };
    // L1 total 300 > 250. Overlaps with L2: id 1 [a,c] -> 50+60 = 110,
    // id 2 [d,f] -> 30, id 3 [g,i] -> 0.
    let mut comps = vec![
        leveled_comp(99, 0, 5, "a", "z"),
        leveled_comp(1, 1, 100, "a", "c"),
        leveled_comp(2, 1, 100, "d", "f"),
        leveled_comp(3, 1, 100, "g", "i"),
        leveled_comp(21, 2, 50, "a", "b"),
        leveled_comp(22, 2, 60, "c", "c"),
        leveled_comp(23, 2, 30, "e", "e"),
        leveled_comp(24, 2, 30, "j", "k"),
    ];
    assert_eq!(
        p.decide(&comps, &ctx(0)),
        MergeDecision::Leveled {
            inputs: vec![3],
            output_level: 2
        }
    );
    comps[3].merging = true; // id 3; L1 non-merging bytes now 200 <= 250
    assert_eq!(p.decide(&comps, &ctx(0)), MergeDecision::None);
    comps.push(leveled_comp(4, 1, 100, "x", "y")); // 300 again
    // id 4 [x,y] overlaps nothing: 0 bytes; beats id 2 (30).
    assert_eq!(
        p.decide(&comps, &ctx(0)),
        MergeDecision::Leveled {
            inputs: vec![4],
            output_level: 2
        }
    );
    comps.pop();
    comps.push(leveled_comp(4, 1, 100, "j", "j")); // overlaps id 24 (30), ties id 2
    // Tie at 30 bytes: smallest min_key wins ("d" < "j").
    assert_eq!(
        p.decide(&comps, &ctx(0)),
        MergeDecision::Leveled {
            inputs: vec![2, 23],
            output_level: 2
        }
    );
    // If the best candidate's overlap is merging, the next best is taken.
    let pos = comps.iter().position(|c| c.id == 23).unwrap();
    comps[pos].merging = true;
    assert_eq!(
        p.decide(&comps, &ctx(0)),
        MergeDecision::Leveled {
            inputs: vec![4, 24],
            output_level: 2
        }
    );
}

#[test]
fn leveled_deeper_levels_and_last_level() {
    let p = MergePolicy::Leveled {
        l0_trigger: 4,
        fanout: 2,
        target_file_bytes: 100,
        l1_bytes: 100,
        partitioning: Partitioning::Size,
        pick: Pick::MinOverlap,
    };
    // L1 = 100 (at limit), L2 = 300 > 200: push L2 down to a new L3.
    let comps = vec![
        leveled_comp(1, 1, 100, "a", "m"),
        leveled_comp(2, 2, 150, "a", "f"),
        leveled_comp(3, 2, 150, "g", "z"),
    ];
    assert_eq!(
        p.decide(&comps, &ctx(0)),
        MergeDecision::Leveled {
            inputs: vec![2],
            output_level: 3
        }
    );
    // Lowest over-full level first.
    let mut comps = comps;
    comps.insert(0, leveled_comp(4, 1, 50, "n", "o"));
    assert_eq!(
        p.decide(&comps, &ctx(0)),
        MergeDecision::Leveled {
            inputs: vec![4, 3],
            output_level: 2
        }
    );
}
