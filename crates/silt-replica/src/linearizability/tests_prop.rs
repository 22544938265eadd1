//! Property tests: the checker against a brute-force oracle on small
//! histories, and on long histories that are linearizable by construction.

use std::collections::{HashMap, HashSet};

use proptest::prelude::*;

use super::tests::{Shape, generate};
use super::*;

/// The oracle: try every order of the operations that respects real time
/// (`a` before `b` whenever `a.ret < b.call`), over all keys at once (so it
/// also checks that splitting by key is right), where operations that never
/// returned may also be left out. Knows nothing of the checker's shortcuts
/// (dropping unfinished reads, forced reads, memo).
fn brute_force(history: &[Op<u8, u8>], initial: &HashMap<u8, u8>) -> bool {
    fn go(
        history: &[Op<u8, u8>],
        used: &mut Vec<bool>,
        registers: &mut HashMap<u8, Option<u8>>,
    ) -> bool {
        let done = history
            .iter()
            .zip(used.iter())
            .all(|(op, &u)| u || op.ret.is_none());
        if done {
            return true;
        }
        for i in 0..history.len() {
            if used[i] {
                continue;
            }
            let call = history[i].call;
            let blocked = history
                .iter()
                .zip(used.iter())
                .any(|(other, &u)| !u && other.ret.is_some_and(|r| r < call));
            if blocked {
                continue;
            }
            let key = *history[i].kind.key();
            let current = registers.get(&key).copied().flatten();
            let previous = registers.get(&key).copied();
            match &history[i].kind {
                OpKind::Read { value, .. } => {
                    if *value != current {
                        continue;
                    }
                }
                OpKind::Write { value, .. } => {
                    registers.insert(key, *value);
                }
            }
            used[i] = true;
            if go(history, used, registers) {
                return true;
            }
            used[i] = false;
            match previous {
                Some(v) => registers.insert(key, v),
                None => registers.remove(&key),
            };
        }
        false
    }
    let mut registers: HashMap<u8, Option<u8>> =
        initial.iter().map(|(&k, &v)| (k, Some(v))).collect();
    go(history, &mut vec![false; history.len()], &mut registers)
}

/// The oracle again, remembering (operations used, registers) that failed:
/// the same enumeration, fast enough for ~14 operations. Used to test the
/// checker's pruning on denser histories than plain enumeration can take.
fn memo_brute_force(history: &[Op<u8, u8>], initial: &HashMap<u8, u8>) -> bool {
    type Registers = [Option<u8>; 2];
    fn go(
        history: &[Op<u8, u8>],
        used: u32,
        registers: Registers,
        failed: &mut HashSet<(u32, Registers)>,
    ) -> bool {
        let finished = (0..history.len()).all(|i| used & (1 << i) != 0 || history[i].ret.is_none());
        if finished {
            return true;
        }
        if failed.contains(&(used, registers)) {
            return false;
        }
        for i in 0..history.len() {
            if used & (1 << i) != 0 {
                continue;
            }
            let call = history[i].call;
            let blocked = (0..history.len())
                .any(|j| used & (1 << j) == 0 && history[j].ret.is_some_and(|r| r < call));
            if blocked {
                continue;
            }
            let key = usize::from(*history[i].kind.key());
            let mut next = registers;
            match &history[i].kind {
                OpKind::Read { value, .. } if *value != registers[key] => continue,
                OpKind::Read { .. } => {}
                OpKind::Write { value, .. } => next[key] = *value,
            }
            if go(history, used | (1 << i), next, failed) {
                return true;
            }
        }
        failed.insert((used, registers));
        false
    }
    let registers = [initial.get(&0).copied(), initial.get(&1).copied()];
    go(history, 0, registers, &mut HashSet::new())
}

/// Many overlapping operations on two keys with few values: dense histories
/// where forced reads, same-value writes and late reads all come into play.
fn dense_op() -> impl Strategy<Value = Op<u8, u8>> {
    (
        0..30u64,
        0..25u64,
        prop::bool::weighted(0.9),
        prop::bool::weighted(0.6),
        prop::bool::weighted(0.7),
        prop::option::weighted(0.85, 0..2u8),
    )
        .prop_map(|(call, duration, finished, is_write, key0, value)| {
            let key = u8::from(!key0);
            let kind = if is_write {
                OpKind::Write { key, value }
            } else {
                OpKind::Read { key, value }
            };
            Op {
                client: call % 5,
                call,
                ret: finished.then_some(call + duration),
                kind,
            }
        })
}

fn small_op() -> impl Strategy<Value = Op<u8, u8>> {
    (
        0..3u64,
        0..20u64,
        0..10u64,
        prop::bool::weighted(0.8),
        any::<bool>(),
        0..2u8,
        prop::option::weighted(0.8, 0..3u8),
    )
        .prop_map(|(client, call, duration, finished, is_write, key, value)| {
            let kind = if is_write {
                OpKind::Write { key, value }
            } else {
                OpKind::Read { key, value }
            };
            Op {
                client,
                call,
                ret: finished.then_some(call + duration),
                kind,
            }
        })
}

fn small_initial() -> impl Strategy<Value = HashMap<u8, u8>> {
    (prop::option::of(0..3u8), prop::option::of(0..3u8)).prop_map(|(a, b)| {
        [(0, a), (1, b)]
            .into_iter()
            .filter_map(|(k, v)| v.map(|v| (k, v)))
            .collect()
    })
}

proptest! {
    // Cases are cheap (a few microseconds to milliseconds each).
    #![proptest_config(ProptestConfig::with_cases(3000))]

    /// The checker and the oracle agree on every small history, and a
    /// reported witness fails on its own by the oracle too (so shrinking only
    /// ever keeps genuine evidence).
    #[test]
    fn agrees_with_brute_force(
        history in prop::collection::vec(small_op(), 0..=7),
        initial in small_initial(),
    ) {
        let expected = brute_force(&history, &initial);
        match check_registers(&history, &initial, CheckLimits::default()) {
            Ok(report) => prop_assert!(expected, "checker said linearizable: {:?}", report),
            Err(Violation::NotLinearizable { key, ops, explanation }) => {
                prop_assert!(!expected, "checker said not linearizable:\n{}", explanation);
                prop_assert!(ops.iter().all(|o| *o.kind.key() == key));
                prop_assert!(ops.iter().all(|o| history.contains(o)));
                prop_assert!(!brute_force(&ops, &initial), "witness is linearizable:\n{}", explanation);
            }
            Err(other) => prop_assert!(false, "unexpected {:?}", other),
        }
    }

    /// The same on denser histories, against the memoized oracle.
    #[test]
    fn agrees_with_memoized_brute_force_on_dense_histories(
        history in prop::collection::vec(dense_op(), 8..=14),
        initial in small_initial(),
    ) {
        let expected = memo_brute_force(&history, &initial);
        match check_registers(&history, &initial, CheckLimits::default()) {
            Ok(_) => prop_assert!(expected, "checker said linearizable"),
            Err(Violation::NotLinearizable { ops, explanation, .. }) => {
                prop_assert!(!expected, "checker said not linearizable:\n{}", explanation);
                prop_assert!(!memo_brute_force(&ops, &initial), "witness is linearizable:\n{}", explanation);
            }
            Err(other) => prop_assert!(false, "unexpected {:?}", other),
        }
    }

    /// Any input at all, including returns before calls and extreme times,
    /// gives an answer rather than a panic.
    #[test]
    fn never_panics(
        ops in prop::collection::vec(
            (any::<u64>(), prop::option::of(any::<u64>()), any::<bool>(), 0..3u8, prop::option::of(0..4u8)),
            0..40,
        ),
        max_states in prop::sample::select(vec![0usize, 1, 10, 1000]),
    ) {
        let history: Vec<Op<u8, u8>> = ops
            .into_iter()
            .map(|(call, ret, is_write, key, value)| Op {
                client: 0,
                call,
                ret,
                kind: if is_write { OpKind::Write { key, value } } else { OpKind::Read { key, value } },
            })
            .collect();
        let _ = check_registers(&history, &HashMap::new(), CheckLimits { max_states });
        let sane: Vec<Op<u8, u8>> = history
            .into_iter()
            .map(|mut op| {
                op.ret = op.ret.map(|r| r.max(op.call));
                op
            })
            .collect();
        let result = check_registers(&sane, &HashMap::new(), CheckLimits { max_states });
        let invalid = matches!(result, Err(Violation::InvalidHistory { .. }));
        prop_assert!(!invalid, "{:?}", result);
    }

}

proptest! {
    // Each case is hundreds of operations.
    #![proptest_config(ProptestConfig::with_cases(400))]

    /// Histories of real executions are linearizable, and are checked fast.
    #[test]
    fn executions_are_linearizable(
        seed in any::<u64>(),
        ops in 100..600usize,
        clients in 1..17u64,
        keys in 1..5u32,
        values in 1..6u32,
        unfinished in prop::sample::select(vec![0.0, 0.02, 0.1]),
        late_effect in prop::sample::select(vec![0u64, 5_000]),
        stall in prop::sample::select(vec![0.0, 0.03]),
    ) {
        let shape = Shape { unfinished, late_effect, stall, ..Shape::new(clients, ops, keys, values, 0.0) };
        let history = generate(seed, shape);
        let result = check_registers(&history, &HashMap::new(), CheckLimits::default());
        prop_assert!(result.is_ok(), "{:?}", result.err());
        let report = result.unwrap_or_default();
        // A linearizable history is walked almost straight through: a few
        // configurations per operation, some tens on one hot key with few
        // values and stalls (24 per operation seen: 15 clients, 5 values);
        // an exponential search would be far past this.
        prop_assert!(report.states_explored <= 200 * ops, "{:?}", report);
    }

    /// Corrupting one read of a real execution to return what another write
    /// wrote (a stale or premature read): whatever the checker says, a
    /// witness it reports is rejected on its own, by the checker and (when
    /// small) by the oracle, and it is 1-minimal.
    #[test]
    fn corrupted_executions_give_sound_witnesses(
        seed in any::<u64>(),
        which_read in any::<prop::sample::Index>(),
        which_write in any::<prop::sample::Index>(),
        values in prop::sample::select(vec![3u32, 1000]),
        clients in 1..17u64,
    ) {
        let shape = Shape { late_effect: 3_000, stall: 0.02, ..Shape::new(clients, 300, 3, values, 0.03) };
        let mut history = generate(seed, shape);
        let writes: Vec<Option<u32>> = history
            .iter()
            .filter(|o| o.kind.is_write())
            .map(|o| o.kind.value().copied())
            .collect();
        let bad = if writes.is_empty() { Some(7777) } else { writes[which_write.index(writes.len())] };
        let i = which_read.index(history.len());
        if let OpKind::Read { value, .. } = &mut history[i].kind {
            *value = bad;
        }
        match check_registers(&history, &HashMap::new(), CheckLimits::default()) {
            Ok(_) => {}
            Err(Violation::NotLinearizable { ops, explanation, .. }) => {
                prop_assert!(one_minimal(&ops), "witness not 1-minimal:\n{}", explanation);
                let again = check_registers(&ops, &HashMap::new(), CheckLimits::default());
                let rejected = matches!(again, Err(Violation::NotLinearizable { .. }));
                prop_assert!(rejected, "witness accepted on its own:\n{}", explanation);
                if ops.len() <= 8 {
                    prop_assert!(!brute_force(&narrow(&ops), &HashMap::new()), "{}", explanation);
                }
            }
            Err(other) => prop_assert!(false, "unexpected {:?}", other),
        }
    }
}

/// Whether removing any one removal unit (a read; or a write with every read
/// of its value) from a failing witness makes it linearizable.
fn one_minimal(witness: &[Op<u32, u32>]) -> bool {
    (0..witness.len()).all(|i| {
        let unit = &witness[i];
        let rest: Vec<Op<u32, u32>> = witness
            .iter()
            .enumerate()
            .filter(|&(j, op)| {
                let same_value_read = unit.kind.is_write()
                    && !op.kind.is_write()
                    && op.kind.value() == unit.kind.value();
                j != i && !same_value_read
            })
            .map(|(_, op)| op.clone())
            .collect();
        check_registers(&rest, &HashMap::new(), CheckLimits::default()).is_ok()
    })
}

/// The oracle takes u8 keys and values: renumber a small witness' keys and
/// values (a renaming, so the same history as far as linearizability goes).
fn narrow(ops: &[Op<u32, u32>]) -> Vec<Op<u8, u8>> {
    let mut names: HashMap<u32, u8> = HashMap::new();
    let mut name = |v: u32| {
        let next = names.len() as u8;
        *names.entry(v).or_insert(next)
    };
    ops.iter()
        .map(|op| {
            let key = name(*op.kind.key());
            let value = op.kind.value().map(|&v| name(v));
            let kind = if op.kind.is_write() {
                OpKind::Write { key, value }
            } else {
                OpKind::Read { key, value }
            };
            Op {
                client: op.client,
                call: op.call,
                ret: op.ret,
                kind,
            }
        })
        .collect()
}
