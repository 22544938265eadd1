//! Property and unit tests of the LSM tree against a model.

use super::*;
use crate::lsm::background::Background;
use proptest::prelude::*;
use std::collections::BTreeMap;

#[derive(Clone, Debug)]
enum Op {
    Put(u16, u8),
    Del(u16),
    Flush,
    Merge,
    Scan(u16, u16),
    Reopen,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        8 => (0u16..300, any::<u8>()).prop_map(|(k, v)| Op::Put(k, v)),
        3 => (0u16..300).prop_map(Op::Del),
        1 => Just(Op::Flush),
        1 => Just(Op::Merge),
        1 => (0u16..300, 0u16..300).prop_map(|(a, b)| Op::Scan(a.min(b), a.max(b))),
        1 => Just(Op::Reopen),
    ]
}

fn policies() -> Vec<MergePolicy> {
    [
        "no-merge",
        "constant(3)",
        "prefix(4KB,3)",
        "binomial(3)",
        "tiered(3)",
        "concurrent(8,2,4,1.2)",
        "leveled(2,3,2KB,4KB)",
    ]
    .iter()
    .map(|s| MergePolicy::parse(s).unwrap())
    .collect()
}

fn open(dir: &Path, policy: &MergePolicy, cache: &Arc<BlockCache>) -> Arc<LsmTree> {
    LsmTree::open(
        TreeConfig {
            name: "t".into(),
            dir: dir.to_path_buf(),
            policy: policy.clone(),
            writer: WriterOptions {
                block_size: 256,
                sync: false,
                ..Default::default()
            },
            memtable_bytes: 2048,
            kind: TreeKind::default(),
            key_cell: [0.0; 2],
            key_space: [0.0; 4],
            zorder: false,
            remote: None,
        },
        cache.clone(),
    )
    .unwrap()
}

fn key(k: u16) -> Vec<u8> {
    k.to_be_bytes().to_vec()
}

fn check(tree: &Arc<LsmTree>, model: &BTreeMap<u16, u8>) {
    for k in 0..300u16 {
        let got = tree.get_entry(&key(k)).unwrap().filter(|e| !e.is_delete());
        assert_eq!(got.map(|e| e.value[0]), model.get(&k).copied(), "key {k}");
    }
}

/// Increasing keys flush into disjoint components: a leveled policy then
/// moves components down instead of rewriting them, and the MANIFEST
/// keeps the levels across a reopen.
#[test]
fn leveled_moves_disjoint_components_without_rewriting() {
    let dir = tempfile::tempdir().unwrap();
    let cache = Arc::new(BlockCache::new(1 << 16));
    // L0 trigger 1, fanout 2, 1 KiB files, L1 holds 2 KiB.
    let policy = MergePolicy::parse("leveled(1,2,1024,2048)").unwrap();
    let tree = open(dir.path(), &policy, &cache);
    let mut model = BTreeMap::new();
    let mut seq = 0;
    for k in 0..300u16 {
        seq += 1;
        tree.put(&key(k), Entry::put(seq, vec![(k % 251) as u8; 40]), 0);
        model.insert(k, (k % 251) as u8);
        if k % 30 == 29 {
            if let Some(m) = tree.rotate(true).unwrap() {
                tree.flush(&m).unwrap();
            }
            while tree.merge_once().unwrap() {}
        }
    }
    let st = tree.stats();
    assert!(st.moves >= 5, "expected moves, got {st:?}");
    assert_eq!(st.bytes_merged, 0, "disjoint components were rewritten");
    let levels = |t: &Arc<LsmTree>| -> Vec<(u64, u32)> {
        t.state
            .read()
            .disk
            .iter()
            .map(|c| (c.meta().id, c.meta().level))
            .collect()
    };
    let before = levels(&tree);
    assert!(before.iter().any(|&(_, l)| l >= 2), "{before:?}");
    check(&tree, &model);
    drop(tree);
    let tree = open(dir.path(), &policy, &cache);
    assert_eq!(levels(&tree), before, "levels after reopen");
    check(&tree, &model);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]
    #[test]
    fn tree_matches_btreemap(ops in proptest::collection::vec(op(), 1..250)) {
        let bg = Background::start(1, 1);
        for policy in policies() {
            let dir = tempfile::tempdir().unwrap();
            let cache = Arc::new(BlockCache::new(1 << 16));
            let mut tree = open(dir.path(), &policy, &cache);
            let mut model = BTreeMap::new();
            let mut seq = 0;
            for op in &ops {
                seq += 1;
                match op {
                    Op::Put(k, v) => {
                        tree.put(&key(*k), Entry::put(seq, vec![*v]), 0);
                        model.insert(*k, *v);
                    }
                    Op::Del(k) => {
                        tree.put(&key(*k), Entry::delete(seq), 0);
                        model.remove(k);
                    }
                    Op::Flush => {
                        if let Some(m) = tree.rotate(true).unwrap() {
                            tree.flush(&m).unwrap();
                        }
                    }
                    Op::Merge => {
                        while tree.merge_once().unwrap() {}
                        if seq % 3 == 0 {
                            tree.compact_all().unwrap();
                        }
                    }
                    Op::Scan(a, b) => {
                        let snap = tree.snapshot();
                        let mut s = tree
                            .scan(&snap, Bound::Included(&key(*a)), Bound::Excluded(key(*b)), false)
                            .unwrap();
                        let mut got = Vec::new();
                        while let Some((k, e)) = s.next_entry().unwrap() {
                            got.push((u16::from_be_bytes([k[0], k[1]]), e.value[0]));
                        }
                        let want: Vec<(u16, u8)> =
                            model.range(*a..*b).map(|(k, v)| (*k, *v)).collect();
                        prop_assert_eq!(got, want, "policy {}", policy);
                    }
                    Op::Reopen => {
                        if let Some(m) = tree.rotate(true).unwrap() {
                            tree.flush(&m).unwrap();
                        }
                        drop(tree);
                        tree = open(dir.path(), &policy, &cache);
                    }
                }
            }
            check(&tree, &model);
            let _ = &bg;
        }
    }
}
