//! Hand-written histories, limits, and a generator of linearizable histories
//! shared with the property tests.

use std::collections::HashMap;
use std::time::Instant;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::*;

type H = Vec<Op<&'static str, u32>>;

fn op(
    client: u64,
    call: u64,
    ret: Option<u64>,
    kind: OpKind<&'static str, u32>,
) -> Op<&'static str, u32> {
    Op {
        client,
        call,
        ret,
        kind,
    }
}

fn write(client: u64, call: u64, ret: u64, key: &'static str, value: u32) -> Op<&'static str, u32> {
    op(
        client,
        call,
        Some(ret),
        OpKind::Write {
            key,
            value: Some(value),
        },
    )
}

fn delete(client: u64, call: u64, ret: u64, key: &'static str) -> Op<&'static str, u32> {
    op(client, call, Some(ret), OpKind::Write { key, value: None })
}

fn unfinished_write(
    client: u64,
    call: u64,
    key: &'static str,
    value: u32,
) -> Op<&'static str, u32> {
    op(
        client,
        call,
        None,
        OpKind::Write {
            key,
            value: Some(value),
        },
    )
}

fn read(
    client: u64,
    call: u64,
    ret: u64,
    key: &'static str,
    value: Option<u32>,
) -> Op<&'static str, u32> {
    op(client, call, Some(ret), OpKind::Read { key, value })
}

fn check(history: &[Op<&'static str, u32>]) -> Result<CheckReport, Violation<&'static str, u32>> {
    check_registers(history, &HashMap::new(), CheckLimits::default())
}

fn check_with(
    history: &[Op<&'static str, u32>],
    initial: &[(&'static str, u32)],
) -> Result<CheckReport, Violation<&'static str, u32>> {
    let initial: HashMap<_, _> = initial.iter().copied().collect();
    check_registers(history, &initial, CheckLimits::default())
}

#[track_caller]
fn assert_ok(result: Result<CheckReport, Violation<&'static str, u32>>) -> CheckReport {
    match result {
        Ok(report) => report,
        Err(violation) => panic!("expected linearizable, got {violation}"),
    }
}

/// Asserts a violation on `key`, returning the witness' operations and text.
#[track_caller]
fn assert_violation(
    result: Result<CheckReport, Violation<&'static str, u32>>,
    expected_key: &str,
) -> (Vec<Op<&'static str, u32>>, String) {
    match result {
        Err(Violation::NotLinearizable {
            key,
            ops,
            explanation,
        }) => {
            assert_eq!(key, expected_key, "{explanation}");
            assert!(!ops.is_empty());
            (ops, explanation)
        }
        other => panic!("expected a violation on {expected_key}, got {other:?}"),
    }
}

#[test]
fn empty_history_is_linearizable() {
    let report = assert_ok(check(&[]));
    assert_eq!(report, CheckReport::default());
}

#[test]
fn sequential_history_is_linearizable() {
    let h = vec![
        write(1, 0, 10, "x", 1),
        read(2, 20, 30, "x", Some(1)),
        write(1, 40, 50, "x", 2),
        read(2, 60, 70, "x", Some(2)),
        read(3, 0, 5, "y", None),
    ];
    let report = assert_ok(check(&h));
    assert_eq!((report.keys, report.ops, report.unfinished), (2, 5, 0));
    assert!(report.states_explored >= 5, "{report:?}");
}

#[test]
fn stale_read_after_completed_write_is_a_violation() {
    let h = vec![
        write(1, 0, 10, "x", 1),
        write(1, 20, 30, "x", 2),
        read(2, 40, 50, "x", Some(1)),
    ];
    let (ops, explanation) = assert_violation(check(&h), "x");
    assert!(ops.contains(&h[2]), "{explanation}");
    assert!(explanation.contains("#2"), "{explanation}");
    assert!(
        explanation.contains("longest linearizable prefix"),
        "{explanation}"
    );
}

#[test]
fn concurrent_write_and_read_may_go_either_way() {
    for seen in [1, 2] {
        let h = vec![
            write(1, 0, 10, "x", 1),
            write(1, 20, 40, "x", 2),
            read(2, 25, 35, "x", Some(seen)),
        ];
        assert_ok(check(&h));
    }
    // Two concurrent writes, then reads agreeing on either winner.
    for winner in [1, 2] {
        let h = vec![
            write(1, 0, 10, "x", 1),
            write(2, 0, 10, "x", 2),
            read(3, 20, 30, "x", Some(winner)),
            read(1, 40, 50, "x", Some(winner)),
        ];
        assert_ok(check(&h));
    }
}

#[test]
fn read_of_a_value_never_written_is_a_violation() {
    let h = vec![write(1, 0, 10, "x", 1), read(2, 20, 30, "x", Some(7))];
    let (ops, explanation) = assert_violation(check(&h), "x");
    // The write (with the reads of its value) is irrelevant and shrunk away.
    assert_eq!(ops, vec![h[1].clone()], "{explanation}");
}

#[test]
fn unfinished_write_may_take_effect_later_or_never() {
    // Observed long after it was called.
    let observed = vec![
        unfinished_write(1, 0, "x", 1),
        read(2, 5, 6, "x", None),
        read(2, 100, 110, "x", Some(1)),
        read(3, 200, 210, "x", Some(1)),
    ];
    let report = assert_ok(check(&observed));
    assert_eq!(report.unfinished, 1);
    // Never observed.
    let lost = vec![
        unfinished_write(1, 0, "x", 1),
        read(2, 100, 110, "x", None),
        read(2, 200, 210, "x", None),
    ];
    assert_ok(check(&lost));
    // Observed, then gone again without any other write: a violation.
    let undone = vec![
        unfinished_write(1, 0, "x", 1),
        read(2, 10, 20, "x", Some(1)),
        read(2, 30, 40, "x", None),
    ];
    assert_violation(check(&undone), "x");
    // Observed before it was even called: a violation.
    let early = vec![
        read(2, 0, 10, "x", Some(1)),
        unfinished_write(1, 20, "x", 1),
    ];
    assert_violation(check(&early), "x");
}

#[test]
fn unfinished_read_is_dropped() {
    let h = vec![
        write(1, 0, 10, "x", 1),
        op(
            2,
            20,
            None,
            OpKind::Read {
                key: "x",
                value: Some(99),
            },
        ),
        op(
            2,
            20,
            None,
            OpKind::Read {
                key: "y",
                value: Some(99),
            },
        ),
    ];
    let report = assert_ok(check(&h));
    assert_eq!((report.keys, report.ops, report.unfinished), (1, 1, 2));
}

#[test]
fn non_monotonic_reads_are_a_violation() {
    let h = vec![
        write(1, 0, 10, "x", 1),
        write(2, 0, 100, "x", 2),
        read(3, 20, 30, "x", Some(2)),
        read(3, 40, 50, "x", Some(1)),
    ];
    let (ops, explanation) = assert_violation(check(&h), "x");
    assert!(ops.contains(&h[2]) && ops.contains(&h[3]), "{explanation}");
    // The same reads by different clients, overlapping: still a violation
    // once the first read returned before the second was called...
    let h2 = vec![
        write(1, 0, 10, "x", 1),
        write(2, 0, 100, "x", 2),
        read(3, 20, 30, "x", Some(2)),
        read(4, 31, 50, "x", Some(1)),
    ];
    assert_violation(check(&h2), "x");
    // ...but fine if they overlap (the old value may be read first).
    let h3 = vec![
        write(1, 0, 10, "x", 1),
        write(2, 0, 100, "x", 2),
        read(3, 20, 30, "x", Some(2)),
        read(4, 25, 50, "x", Some(1)),
    ];
    assert_ok(check(&h3));
}

#[test]
fn deletes() {
    let ok = vec![
        write(1, 0, 10, "x", 1),
        delete(1, 20, 30, "x"),
        read(2, 40, 50, "x", None),
    ];
    assert_ok(check(&ok));
    let resurrected = vec![
        write(1, 0, 10, "x", 1),
        delete(1, 20, 30, "x"),
        read(2, 40, 50, "x", Some(1)),
    ];
    assert_violation(check(&resurrected), "x");
    // A delete concurrent with reads on both sides of it.
    let concurrent = vec![
        write(1, 0, 10, "x", 1),
        delete(2, 20, 60, "x"),
        read(3, 30, 40, "x", Some(1)),
        read(3, 50, 70, "x", None),
    ];
    assert_ok(check(&concurrent));
    // Deleting an initial value.
    let initial = vec![
        read(1, 0, 5, "x", Some(5)),
        delete(1, 10, 20, "x"),
        read(2, 30, 40, "x", None),
    ];
    assert_ok(check_with(&initial, &[("x", 5)]));
    let resurrected_initial = vec![delete(1, 10, 20, "x"), read(2, 30, 40, "x", Some(5))];
    assert_violation(check_with(&resurrected_initial, &[("x", 5)]), "x");
}

#[test]
fn initial_values() {
    assert_ok(check_with(&[read(1, 0, 10, "x", Some(5))], &[("x", 5)]));
    // Only x has an initial value; y starts absent.
    assert_ok(check_with(&[read(1, 0, 10, "y", None)], &[("x", 5)]));
    let (ops, _) = assert_violation(check_with(&[read(1, 0, 10, "x", None)], &[("x", 5)]), "x");
    assert_eq!(ops.len(), 1);
}

#[test]
fn touching_intervals_are_concurrent() {
    // The read was called at the very instant the write returned.
    assert_ok(check(&[
        write(1, 0, 10, "x", 1),
        read(2, 10, 20, "x", None),
    ]));
    assert_violation(
        check(&[write(1, 0, 10, "x", 1), read(2, 11, 20, "x", None)]),
        "x",
    );
    // Zero-length intervals are fine.
    assert_ok(check(&[
        write(1, 5, 5, "x", 1),
        read(2, 5, 5, "x", Some(1)),
    ]));
}

#[test]
fn return_before_call_is_an_input_error() {
    let h = vec![write(1, 0, 10, "x", 1), read(2, 30, 20, "x", Some(1))];
    match check(&h) {
        Err(Violation::InvalidHistory { index, op, reason }) => {
            assert_eq!(index, 1);
            assert_eq!(op, h[1]);
            assert!(reason.contains("before"), "{reason}");
        }
        other => panic!("expected InvalidHistory, got {other:?}"),
    }
}

#[test]
fn keys_are_checked_independently_and_the_bad_one_is_named() {
    let h = vec![
        write(1, 0, 10, "a", 1),
        write(2, 0, 10, "b", 1),
        read(1, 20, 30, "a", Some(1)),
        write(2, 20, 30, "b", 2),
        read(3, 40, 50, "b", Some(1)),
        read(3, 60, 70, "c", None),
    ];
    let (ops, explanation) = assert_violation(check(&h), "b");
    assert!(ops.iter().all(|o| *o.kind.key() == "b"), "{explanation}");
    let message = check(&h).unwrap_err().to_string();
    assert!(message.contains("\"b\""), "{message}");
}

/// `n` concurrent writes alternating two values, then reads of each value
/// after all of them returned: not linearizable (the register cannot change
/// between the reads), but with duplicate values nothing prunes the search
/// early, and it visits about `n * n / 2` configurations to find out.
fn hard_history(n: u32) -> H {
    let mut h: H = (0..n)
        .map(|i| write(u64::from(i), 0, 100, "x", 1 + i % 2))
        .collect();
    h.push(read(98, 200, 210, "x", Some(1)));
    h.push(read(99, 220, 230, "x", Some(2)));
    h
}

#[test]
fn max_states_bounds_the_search() {
    let h = hard_history(60);
    let small = CheckLimits { max_states: 1000 };
    match check_registers(&h, &HashMap::new(), small) {
        Err(Violation::TooComplex { key, ops }) => assert_eq!((key, ops), ("x", 62)),
        other => panic!("expected TooComplex, got {other:?}"),
    }
    // Nothing at all may be visited with a zero limit.
    let zero = CheckLimits { max_states: 0 };
    assert!(matches!(
        check_registers(&[write(1, 0, 1, "x", 1)], &HashMap::new(), zero),
        Err(Violation::TooComplex { .. })
    ));
    // With room, the search ends with the definite answer.
    let (ops, explanation) = assert_violation(check(&h), "x");
    assert!(
        ops.contains(&h[60]) && ops.contains(&h[61]),
        "{explanation}"
    );
    // And a linearizable history of the same shape passes within the limit,
    // which the report shows was respected.
    let mut fine = hard_history(60);
    fine[61] = read(99, 220, 230, "x", Some(1));
    let limits = CheckLimits { max_states: 5000 };
    let report = check_registers(&fine, &HashMap::new(), limits).unwrap_or_else(|v| panic!("{v}"));
    assert!(report.states_explored <= 5000, "{report:?}");
}

#[test]
fn a_definite_violation_wins_over_too_complex() {
    let mut h = hard_history(60); // key "x", too complex at 1000 states
    h.push(write(1, 300, 310, "y", 1));
    h.push(read(2, 320, 330, "y", Some(2)));
    let limits = CheckLimits { max_states: 1000 };
    match check_registers(&h, &HashMap::new(), limits) {
        Err(Violation::NotLinearizable { key, .. }) => assert_eq!(key, "y"),
        other => panic!("expected a violation on y, got {other:?}"),
    }
}

/// Parameters of a generated history.
#[derive(Clone, Copy, Debug)]
pub(super) struct Shape {
    pub clients: u64,
    pub ops: usize,
    pub keys: u32,
    pub values: u32,
    /// Chance that an operation times out (never returns).
    pub unfinished: f64,
    /// How long after its call an unfinished write may still take effect
    /// (as when a new leader commits what the old one had accepted).
    pub late_effect: u64,
    /// Chance that an operation stalls (takes 10 to 30 times longer than
    /// usual, as during a leader election).
    pub stall: f64,
}

impl Shape {
    pub fn new(clients: u64, ops: usize, keys: u32, values: u32, unfinished: f64) -> Self {
        Shape {
            clients,
            ops,
            keys,
            values,
            unfinished,
            late_effect: 0,
            stall: 0.0,
        }
    }
}

/// A history recorded from a real sequential execution: each client issues
/// operations one after another, each takes effect at a random instant
/// inside its interval (a write that times out takes effect or not, at
/// random), and reads return what the register held at their instant. So the
/// history is linearizable by construction.
pub(super) fn generate(seed: u64, shape: Shape) -> Vec<Op<u32, u32>> {
    let mut rng = StdRng::seed_from_u64(seed);
    // (instant it takes effect, operation); instant None: never takes effect.
    let mut planned: Vec<(Option<u64>, Op<u32, u32>)> = Vec::with_capacity(shape.ops);
    let mut clock: Vec<u64> = (0..shape.clients)
        .map(|_| rng.random_range(0..100))
        .collect();
    for i in 0..shape.ops {
        let client = i as u64 % shape.clients.max(1);
        let c = client as usize;
        let call = clock[c] + rng.random_range(0..50);
        let mut duration = rng.random_range(0..300);
        if rng.random_bool(shape.stall) {
            duration = rng.random_range(3_000..9_000);
        }
        let unfinished = rng.random_bool(shape.unfinished);
        let window = if unfinished {
            duration.max(shape.late_effect)
        } else {
            duration
        };
        let at = call + rng.random_range(0..=window);
        let key = rng.random_range(0..shape.keys.max(1));
        let is_write = rng.random_bool(0.5);
        let value = if rng.random_bool(0.1) {
            None
        } else {
            Some(rng.random_range(0..shape.values.max(1)))
        };
        // A client that timed out moves on after its timeout.
        clock[c] = call + duration + if unfinished { 500 } else { 0 };
        let takes_effect = !unfinished || rng.random_bool(0.5);
        let kind = if is_write {
            OpKind::Write { key, value }
        } else {
            // Filled in below from the execution; an unfinished read keeps
            // whatever (meaningless) value it was generated with.
            OpKind::Read { key, value }
        };
        let ret = (!unfinished).then_some(call + duration);
        planned.push((
            takes_effect.then_some(at),
            Op {
                client,
                call,
                ret,
                kind,
            },
        ));
    }
    // Execute in order of the instants (stable: equal instants lie in both
    // intervals, so either order is a valid linearization).
    let mut by_instant: Vec<usize> = (0..planned.len())
        .filter(|&i| planned[i].0.is_some())
        .collect();
    by_instant.sort_by_key(|&i| planned[i].0);
    let mut registers: HashMap<u32, Option<u32>> = HashMap::new();
    for i in by_instant {
        let op = &mut planned[i].1;
        let finished = op.ret.is_some();
        match &mut op.kind {
            OpKind::Write { key, value } => {
                registers.insert(*key, *value);
            }
            OpKind::Read { key, value } if finished => {
                *value = registers.get(key).copied().flatten();
            }
            OpKind::Read { .. } => {}
        }
    }
    planned.into_iter().map(|(_, op)| op).collect()
}

fn timed_check(history: &[Op<u32, u32>]) -> (Result<CheckReport, Violation<u32, u32>>, f64) {
    let start = Instant::now();
    let result = check_registers(history, &HashMap::new(), CheckLimits::default());
    (result, start.elapsed().as_secs_f64())
}

#[test]
fn ten_thousand_ops_over_fifty_keys_with_sixteen_clients() {
    let shape = Shape::new(16, 10_000, 50, 20, 0.01);
    let history = generate(7, shape);
    let (result, secs) = timed_check(&history);
    let report = result.unwrap_or_else(|v| panic!("{v}"));
    eprintln!("10k ops / 50 keys / 16 clients: {report:?} in {secs:.3}s");
    assert_eq!(report.keys, 50);
    // With faults: timeouts whose writes land much later, and stalls.
    let faulty = Shape {
        unfinished: 0.05,
        late_effect: 20_000,
        stall: 0.03,
        ..shape
    };
    let history = generate(8, faulty);
    let (result, secs) = timed_check(&history);
    let report = result.unwrap_or_else(|v| panic!("{v}"));
    eprintln!("10k ops / 50 keys / 16 clients, faults: {report:?} in {secs:.3}s");
}

#[test]
fn thousands_of_ops_on_one_key_with_sixteen_clients() {
    for (seed, values) in [(11, 5), (12, 20), (13, 1_000_000)] {
        let shape = Shape::new(16, 5_000, 1, values, 0.01);
        let history = generate(seed, shape);
        let (result, secs) = timed_check(&history);
        let report = result.unwrap_or_else(|v| panic!("{v}"));
        eprintln!("5k ops / 1 key / 16 clients / {values} values: {report:?} in {secs:.3}s");
        let faulty = Shape {
            unfinished: 0.05,
            late_effect: 20_000,
            stall: 0.03,
            ..shape
        };
        let history = generate(seed, faulty);
        let (result, secs) = timed_check(&history);
        let report = result.unwrap_or_else(|v| panic!("{v}"));
        eprintln!("  with faults: {report:?} in {secs:.3}s");
    }
}

#[test]
fn a_stale_read_in_a_long_history_is_found_and_shrunk() {
    let shape = Shape::new(16, 3_000, 1, 1_000, 0.01);
    let mut history = generate(3, shape);
    // Make a completed read late in the history return the value of a write
    // that was overwritten (by a completed write) long before the read.
    let target = (2_000..history.len())
        .find(|&i| matches!(history[i].kind, OpKind::Read { .. }) && history[i].ret.is_some())
        .expect("a completed read");
    let read_call = history[target].call;
    // A value written exactly once, so that no other write can explain it.
    let mut writes_of: HashMap<Option<u32>, usize> = HashMap::new();
    for o in history.iter().filter(|o| o.kind.is_write()) {
        *writes_of.entry(o.kind.value().copied()).or_default() += 1;
    }
    let stale = history
        .iter()
        .filter(|o| o.kind.is_write() && writes_of[&o.kind.value().copied()] == 1)
        .find(|o| o.kind.value().is_some() && o.ret.is_some_and(|r| r + 5_000 < read_call))
        .map(|o| o.kind.value().copied())
        .expect("an old write");
    if let OpKind::Read { value, .. } = &mut history[target].kind {
        *value = stale;
    }
    let (result, secs) = timed_check(&history);
    match result {
        Err(Violation::NotLinearizable {
            ops, explanation, ..
        }) => {
            eprintln!("stale read in 3k ops found in {secs:.3}s:\n{explanation}");
            assert!(ops.contains(&history[target]), "{explanation}");
            assert!(ops.len() <= 6, "witness too large: {explanation}");
        }
        other => panic!("expected a violation, got {other:?}"),
    }
}
