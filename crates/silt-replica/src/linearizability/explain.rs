//! Explaining a failed key: shrink its sub-history to a small witness that
//! still has no linearization, and describe where the search got stuck.
//!
//! Only two kinds of removal are tried, because only they are sound (a
//! linearizable history stays linearizable after them, so a witness that
//! fails proves that the full history fails):
//!
//! * a read: take a linearization of the full history and delete the read
//!   from it; reads change nothing, so every other operation still sees the
//!   same value;
//! * a write together with every read returning its value: in the full
//!   history's linearization each remaining read returns a different value,
//!   so its most recent preceding write was not the removed one and is
//!   still its most recent preceding write.
//!
//! (Dropping a write alone is not sound: a read of its value would then fail
//! for a reason that is not in the real history.)
//!
//! A sub-history is *closed* if, with every read, it keeps every write of the
//! value read: exactly the sub-histories reachable by those removals.
//!
//! A long failing history is first *localized*: the search's deepest point
//! tells roughly when it got stuck, and closed sub-histories of growing time
//! windows around that point are checked until one fails. That also finds
//! violations in histories too complex to search whole (many concurrent
//! writes on one key), where failing searches must exhaust every
//! configuration before the failure point.
//!
//! Removals are then tried in ddmin fashion: contiguous runs of removal units (in
//! call order) of halving size, keeping each removal after which the rest
//! still fails, and single units again until none can go. Unless the budget
//! (of search configurations, and of checks) runs out first, the witness is
//! 1-minimal: removing any one more unit would make it linearizable. It is
//! not necessarily the smallest witness.

use std::collections::HashMap;
use std::fmt::{Debug, Write as _};
use std::hash::Hash;

use super::search::{self, Deepest, KeyOp, SearchResult};
use super::{KeyHistory, Op};

/// At most this many sub-history checks when shrinking, whatever they cost:
/// a check that fails at once visits no configuration but still costs time
/// linear in the sub-history.
const MAX_TRIALS: usize = 4096;
/// Explanations list at most this many operations (witness and prefix).
const MAX_LISTED: usize = 40;

pub(super) struct Witness {
    /// Positions in the full history of the witness' operations, in call
    /// order.
    pub indices: Vec<usize>,
    pub text: String,
}

/// Find and explain a violation in `key_history`, whose full search failed
/// (`definite`) or gave up, reaching `deepest` either way; spends at most
/// `budget` configurations. Returns None only when the search gave up and no
/// failing sub-history was found either.
pub(super) fn explain<K, V>(
    history: &[Op<K, V>],
    key_history: &KeyHistory<'_, V>,
    deepest: Deepest,
    definite: bool,
    budget: usize,
) -> Option<Witness>
where
    V: Debug + Eq + Hash,
{
    let ops = &key_history.ops;
    let mut spent = 0;
    let (alive, deepest) = match localize(ops, &deepest, budget, &mut spent) {
        Some(found) => found,
        None if definite => (vec![true; ops.len()], deepest),
        None => return None,
    };
    let (alive, deepest) = shrink(ops, alive, deepest, budget, &mut spent);
    Some(describe(history, key_history, &alive, deepest))
}

/// Closed sub-histories of time windows around where the search got stuck,
/// growing until one fails (returned with its search's deepest point) or
/// covers everything.
fn localize(
    ops: &[KeyOp],
    deepest: &Deepest,
    budget: usize,
    spent: &mut usize,
) -> Option<(Vec<bool>, Deepest)> {
    // When it got stuck: the return that could not be met, else the latest
    // call among what was linearized or pending.
    let stuck = deepest
        .deadline
        .and_then(|d| ops[d].ret)
        .or_else(|| {
            let linearized = deepest.order.iter().map(|&(j, _)| j);
            linearized
                .chain(deepest.candidates.iter().copied())
                .map(|j| ops[j].call)
                .max()
        })
        .unwrap_or(0);
    let mut by_call: Vec<usize> = (0..ops.len()).collect();
    by_call.sort_by_key(|&j| (ops[j].call, j));
    let at = by_call.partition_point(|&j| ops[j].call <= stuck);
    let mut writes_of: HashMap<u32, Vec<usize>> = HashMap::new();
    for (j, op) in ops.iter().enumerate().filter(|(_, op)| op.write) {
        writes_of.entry(op.value).or_default().push(j);
    }
    // Each window may use an eighth of the budget: a window too complex to
    // decide is not worth more, and larger ones are harder still.
    let window_budget = (budget / 8).max(1);
    let mut reach = 32;
    while reach < ops.len() {
        // Mostly before the stuck point: what went wrong happened by then.
        let (lo, hi) = (at.saturating_sub(reach), (at + reach / 4).min(ops.len()));
        let mut alive = vec![false; ops.len()];
        // The reads that could no longer be served there may lie far later
        // than the point (it is where the value's last usable write was
        // overwritten), but they are the evidence: always take them.
        let window = by_call[lo..hi].iter().chain(&deepest.late_reads);
        for &j in window {
            alive[j] = true;
            if !ops[j].write {
                for &w in writes_of.get(&ops[j].value).into_iter().flatten() {
                    alive[w] = true;
                }
            }
        }
        let sub: Vec<KeyOp> = (0..ops.len())
            .filter(|&j| alive[j])
            .map(|j| ops[j])
            .collect();
        let outcome = search::search(&sub, 0, window_budget.min(budget.saturating_sub(*spent)));
        *spent = spent.saturating_add(outcome.states);
        match outcome.result {
            SearchResult::NotLinearizable(d) => return Some((alive, d)),
            SearchResult::Linearizable => reach *= 2,
            SearchResult::TooComplex(_) => return None,
        }
    }
    None
}

/// Text for the witness `alive` (whose search reached `deepest`).
fn describe<K, V: Debug>(
    history: &[Op<K, V>],
    key_history: &KeyHistory<'_, V>,
    alive: &[bool],
    deepest: Deepest,
) -> Witness {
    let ops = &key_history.ops;
    let kept: Vec<usize> = (0..ops.len()).filter(|&j| alive[j]).collect();
    let mut by_call = kept.clone();
    by_call.sort_by_key(|&j| (ops[j].call, ops[j].index));

    let describe = |j: usize| describe_op(history, key_history, &ops[j]);
    let value = |id: u32| format!("{:?}", key_history.value(id));
    let mut text = String::new();
    let _ = writeln!(
        text,
        "{} of the key's {} checked operations have no linearization on their own \
         (register starting at {}); removing only reads, and writes with every read of \
         their value, cannot make a linearizable history fail, so these alone prove the \
         violation:",
        kept.len(),
        ops.len(),
        value(0),
    );
    for &j in by_call.iter().take(MAX_LISTED) {
        let _ = writeln!(text, "  {}", describe(j));
    }
    if by_call.len() > MAX_LISTED {
        let _ = writeln!(text, "  ... and {} more", by_call.len() - MAX_LISTED);
    }

    // `deepest` indexes `kept` (the slice its search ran on).
    let Deepest {
        order,
        state,
        candidates,
        deadline,
        late_reads,
    } = deepest;
    let _ = write!(
        text,
        "longest linearizable prefix: {} of {} operations",
        order.len(),
        kept.len()
    );
    if order.len() > MAX_LISTED {
        let _ = write!(text, " (last {MAX_LISTED} shown)");
    }
    let _ = writeln!(text, ":");
    for &(k, after) in order.iter().skip(order.len().saturating_sub(MAX_LISTED)) {
        let _ = writeln!(text, "  {}  => {}", describe(kept[k]), value(after));
    }
    let _ = writeln!(
        text,
        "then the register holds {}, and nothing fits next:",
        value(state)
    );
    for &k in &candidates {
        let op = &ops[kept[k]];
        let why = if !op.write && op.value != state {
            format!(
                "reads {} but the register holds {}",
                value(op.value),
                value(state)
            )
        } else {
            "every continuation after it was explored and fails".to_string()
        };
        let _ = writeln!(text, "  {}: {}", describe(kept[k]), why);
    }
    for &k in &late_reads {
        let op = &ops[kept[k]];
        let _ = writeln!(
            text,
            "  and {} must still read {}, but no write of it is left that it could see \
             (each was linearized already or called after it returned)",
            describe_short(history, op),
            value(op.value),
        );
    }
    if let Some(k) = deadline {
        let _ = writeln!(
            text,
            "  and {} must be linearized before anything called after it returned",
            describe_short(history, &ops[kept[k]]),
        );
    }
    Witness {
        indices: by_call.iter().map(|&j| ops[j].index).collect(),
        text,
    }
}

/// Shrink the failing sub-history `alive` of `ops` (whose search reached
/// `deepest`) to a smaller one that still fails, adding what it spends to
/// `spent` and stopping when that reaches `budget`. Returns the kept
/// operations and the deepest point of their search (indexing the kept ones
/// in order of position).
fn shrink(
    ops: &[KeyOp],
    mut alive: Vec<bool>,
    mut deepest: Deepest,
    budget: usize,
    spent: &mut usize,
) -> (Vec<bool>, Deepest) {
    let mut units: Vec<Vec<usize>> = removal_units(ops)
        .into_iter()
        .filter(|unit| alive[unit[0]])
        .collect();
    units.sort_by_key(|unit| (ops[unit[0]].call, unit[0]));
    let mut trials = 0;
    let mut chunk = units.len().div_ceil(2).max(1);
    'levels: loop {
        let mut start = 0;
        let mut changed = false;
        while start < units.len() {
            let end = (start + chunk).min(units.len());
            let removed: Vec<usize> = units[start..end]
                .iter()
                .flatten()
                .copied()
                .filter(|&j| alive[j])
                .collect();
            start = end;
            if removed.is_empty() {
                continue;
            }
            if trials >= MAX_TRIALS || *spent >= budget {
                break 'levels;
            }
            trials += 1;
            let mut trial = alive.clone();
            for &j in &removed {
                trial[j] = false;
            }
            let sub: Vec<KeyOp> = (0..ops.len())
                .filter(|&j| trial[j])
                .map(|j| ops[j])
                .collect();
            if sub.is_empty() {
                continue;
            }
            let outcome = search::search(&sub, 0, budget - *spent);
            *spent = spent.saturating_add(outcome.states);
            match outcome.result {
                SearchResult::NotLinearizable(d) => {
                    alive = trial;
                    deepest = d;
                    changed = true;
                }
                SearchResult::Linearizable => {}
                SearchResult::TooComplex(_) => break 'levels,
            }
        }
        if chunk == 1 {
            // A removal may have made an earlier unit removable: single-unit
            // passes go on until none changes anything, so that (within the
            // budget) the witness is 1-minimal.
            if !changed {
                break;
            }
        } else {
            chunk = chunk.div_ceil(2);
        }
    }
    (alive, deepest)
}

/// The sound removals (see the module docs), as positions in `ops`, the
/// first one being the operation the unit is named after.
fn removal_units(ops: &[KeyOp]) -> Vec<Vec<usize>> {
    let mut reads_of: HashMap<u32, Vec<usize>> = HashMap::new();
    for (j, op) in ops.iter().enumerate() {
        if !op.write {
            reads_of.entry(op.value).or_default().push(j);
        }
    }
    ops.iter()
        .enumerate()
        .map(|(j, op)| {
            let mut unit = vec![j];
            if op.write
                && let Some(reads) = reads_of.get(&op.value)
            {
                unit.extend_from_slice(reads);
            }
            unit
        })
        .collect()
}

fn describe_op<K, V: Debug>(
    history: &[Op<K, V>],
    key_history: &KeyHistory<'_, V>,
    op: &KeyOp,
) -> String {
    let ret = op
        .ret
        .map_or("never returned".to_string(), |r| r.to_string());
    let what = if op.write { "write" } else { "read" };
    format!(
        "#{} client {} [{}, {}] {} {:?}",
        op.index,
        history.get(op.index).map_or(0, |o| o.client),
        op.call,
        ret,
        what,
        key_history.value(op.value),
    )
}

fn describe_short<K, V>(history: &[Op<K, V>], op: &KeyOp) -> String {
    format!(
        "#{} (client {}, returned at {})",
        op.index,
        history.get(op.index).map_or(0, |o| o.client),
        op.ret.map_or("never".to_string(), |r| r.to_string()),
    )
}
