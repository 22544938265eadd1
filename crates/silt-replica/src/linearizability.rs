//! A linearizability checker for histories of reads and writes on registers.
//!
//! Fault-injection tests record, for every client operation, when it was
//! called, when (and whether) its result came back and what it returned. This
//! module decides whether some sequential execution of a register store could
//! have produced that history while respecting real time: the history is
//! *linearizable* iff every operation can be given a single instant
//! (its linearization point) inside its call/return interval such that
//! executing the operations one by one at those instants, on registers that
//! start from `initial` (absent otherwise), returns what the clients saw.
//!
//! # Model
//!
//! * Operation `a` precedes `b` in real time iff `a.ret < b.call` (strictly).
//!   Operations whose intervals touch (`a.ret == b.call`) count as
//!   concurrent: with a clock of finite resolution we cannot tell which came
//!   first, and accusing the system on a clock tie would be a false alarm.
//! * An operation with `ret: None` never returned (timeout, crash). It may
//!   have taken effect at any instant after its call, or never. A read that
//!   never returned says nothing and is dropped; a write that never returned
//!   is a candidate at every point after its call, and the search may finish
//!   without it. (An unfinished write whose value no read returned can never
//!   matter, so it is dropped before the search too.)
//! * `ret < call` is malformed input and is reported as
//!   [`Violation::InvalidHistory`] instead of being guessed at.
//! * Registers are independent objects, so by P-compositionality (locality of
//!   linearizability, Herlihy & Wing) the history is linearizable iff each
//!   key's sub-history is. Each key is checked alone, which turns one huge
//!   search into many small ones.
//!
//! # Algorithm (per key)
//!
//! Wing & Gong's search with Lowe's memoisation ("WGL"): the operations'
//! call and return events are put in one time-ordered doubly linked list.
//! The operations whose call comes before the first return event in the list
//! are the *minimal* ones, the only ones that may be linearized next. A
//! depth-first search picks a minimal operation, applies it to the register
//! (a read only applies if it returns the current value), unlinks its two
//! events and recurses; on a dead end it re-links them and tries the next
//! candidate. A memo of `(set of linearized operations, register value)`
//! configurations already visited cuts off every path that reaches a
//! configuration explored before: what can follow depends on nothing else.
//! The search succeeds once every *completed* operation is linearized.
//!
//! Register-specific refinements make it fast where plain WGL is not. On
//! generated single-key histories from 16 clients, plain WGL visited 20 to
//! 300 configurations per operation and sometimes gave up on 1000
//! operations; with these, about 1 per operation on 5000 (see the tests'
//! generator):
//!
//! * **Forced reads.** A minimal read that returns the current value is
//!   linearized at once and is not a branching point: if any linearization
//!   exists from here, moving that read to the front still is one (reads
//!   change nothing, and the read has no unlinearized predecessor). When the
//!   search backtracks over such a read it backtracks over its
//!   configuration as well.
//! * **Same-value writes.** Of several minimal writes of one value only the
//!   one that returns first is tried: it can stand in for any of the others.
//! * **Unfinished writes** are tried only when a minimal read wants their
//!   value: one that is overwritten unseen may as well never have happened.
//!   Those whose value no read returned are dropped before the search.
//! * **Late reads.** A configuration is abandoned as soon as some read still
//!   to linearize returns a value other than the current one and every write
//!   of that value still to linearize was called after the read returned
//!   (or none is left): nothing can bring the value back in time. Plain WGL
//!   only notices at that read's deadline, after exploring everything in
//!   between, which is where its time goes when a write was overwritten too
//!   early. Kept in amortized O(1) per step (`search::Timeliness`).
//! * **Earliest deadline first.** Candidate writes are tried in order of
//!   their return, or of the return of the first minimal read wanting their
//!   value if that is earlier (rather than in call order).
//! * The linearized set is a bitset over operations in call order, stored in
//!   the memo as (number of leading full words, words up to the last non-zero
//!   one). Linearized sets are almost prefixes of the call order, so a memo
//!   entry is a word or two in the common case however long the history is.
//!
//! Each is argued where it is implemented (`search::Search::candidate_writes`
//! and `doomed`), and all are checked against exhaustive enumeration by the
//! property tests. The search is iterative (an explicit stack), so a
//! history of any length cannot overflow the thread's stack.
//!
//! # Complexity
//!
//! Linearizability checking is NP-complete in general, for registers too
//! once values repeat (with unique values it is polynomial, Gibbons &
//! Korach). The cost here is the number of distinct configurations visited,
//! each costing a scan over the current minimal operations (about the
//! number of concurrent clients `c` on the key, plus unfinished writes) and
//! a memo probe hashing the compressed bitset. For a linearizable history the
//! search usually walks almost straight through: a configuration or two per
//! operation, so about `O(n * c)` time for `n` operations. A violation makes
//! it exhaust the configurations reachable before the failure point, at most
//! `n * 2^w * v` for `w` mutually concurrent writes and `v` distinct values,
//! but the late-read rule cuts most of them. Memory is the memo: per
//! configuration a few tens of bytes plus the compressed bitset.
//! [`CheckLimits::max_states`] bounds the configurations per key, and so
//! memory, and time up to the factor `c`: past it the key is reported as
//! [`Violation::TooComplex`] rather than searched forever.
//!
//! **Write unique values** (say, the client and a sequence number) where the
//! test can: then every read names the write it saw, and the late-read rule
//! decides almost everything. What remains hard is a single hot key with few
//! distinct values and many writes that never returned: each such write can
//! stand behind any later read of its value, so a wrong guess shows late.
//! On generated histories of 5000 operations on one key from 16 clients
//! (the tests' generator), with 20 distinct values and 5% timeouts whose
//! writes may land long after, 40% of searches (60% with stalls too) hit a
//! limit of 300 000 configurations; with 3 values or unique values almost
//! none did, at 1 to 1.3 configurations per operation on average. Spread
//! over 50 keys, as in a volume test (10 000 operations with timeouts and
//! stalls, 50 seeds, 3 or 20 values), none did, and none took over 25 ms.
//!
//! Measured (optimized build, one core): 10 000 operations over 50 keys from
//! 16 clients in about 30 ms, and 40 ms with 5% timeouts and stalls; 5000
//! operations on a single key from 16 clients in about 50 ms; a stale read
//! planted in 3000 operations on one key found and shrunk to a 3-operation
//! witness in about 10 ms.
//!
//! # Explanations
//!
//! When a key fails (or the search gives up), the checker looks for a small
//! witness (see `explain`): a sub-history obtained by dropping reads, and
//! writes together with every read of their value. Such drops cannot turn a
//! linearizable history into a non-linearizable one, so a witness that
//! fails proves the violation on its own; finding one also settles keys
//! whose whole history is too complex to search. It first checks growing
//! time windows around where the search got stuck, then shrinks the failing
//! one until no single drop keeps it failing. The report lists the witness'
//! operations (as `#index` into the checked history) and the longest
//! linearizable prefix the search found for it, with why nothing can come
//! next.

mod explain;
mod memo;
mod search;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_prop;

use std::collections::{BTreeMap, HashMap};
use std::fmt::Debug;
use std::hash::Hash;

use search::{KeyOp, Outcome, SearchResult};

/// One operation of a history, as a client saw it. Times are any monotonic
/// clock (nanoseconds).
#[derive(Clone, Debug, PartialEq)]
pub struct Op<K, V> {
    /// Who issued it; only used to describe operations in explanations.
    pub client: u64,
    pub call: u64,
    /// When the result came back; None when it never did (timeout, crash):
    /// the operation may have taken effect at any time after `call`, or not
    /// at all.
    pub ret: Option<u64>,
    pub kind: OpKind<K, V>,
}

#[derive(Clone, Debug, PartialEq)]
pub enum OpKind<K, V> {
    /// A read that returned `value` (None: absent / never written / deleted).
    /// A read with ret None carries no information: drop it.
    Read { key: K, value: Option<V> },
    /// A write of `value` (None: a delete).
    Write { key: K, value: Option<V> },
}

impl<K, V> OpKind<K, V> {
    /// The register this operation touches.
    pub fn key(&self) -> &K {
        match self {
            OpKind::Read { key, .. } | OpKind::Write { key, .. } => key,
        }
    }

    /// The value read or written (None: absent, or a delete).
    pub fn value(&self) -> Option<&V> {
        match self {
            OpKind::Read { value, .. } | OpKind::Write { value, .. } => value.as_ref(),
        }
    }

    pub fn is_write(&self) -> bool {
        matches!(self, OpKind::Write { .. })
    }
}

/// What a failed check reports: the key whose sub-history is not
/// linearizable, and a minimal-ish explanation.
#[derive(Debug, thiserror::Error)]
pub enum Violation<K: Debug, V: Debug> {
    /// `ops` is a sub-history of `key`'s operations (in call order) that has
    /// no linearization on its own, which proves that the whole history has
    /// none; `explanation` lists them with their positions in the checked
    /// history and the longest linearizable prefix found.
    #[error("history of key {key:?} is not linearizable:\n{explanation}")]
    NotLinearizable {
        key: K,
        ops: Vec<Op<K, V>>,
        explanation: String,
    },
    /// The search for `key` (with `ops` operations) visited
    /// [`CheckLimits::max_states`] configurations without an answer, and no
    /// failing sub-history was found around where it got stuck either. Only
    /// reported when no other key has a definite violation.
    #[error(
        "history of key {key:?} ({ops} operations) is too complex to check within the state limit"
    )]
    TooComplex { key: K, ops: usize },
    /// The input is malformed (e.g. an operation returned before it was
    /// called); `index` is its position in the checked history.
    #[error("invalid history: operation {index} ({op:?}): {reason}")]
    InvalidHistory {
        index: usize,
        op: Op<K, V>,
        reason: String,
    },
}

/// Bounds on the search, so that a pathological history yields
/// [`Violation::TooComplex`] instead of unbounded time or memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CheckLimits {
    /// Most configurations (memo entries) one key's search may visit; a key
    /// that fails, or hits this limit, may spend up to as many again finding
    /// and shrinking a witness. Each costs some tens of bytes plus the
    /// compressed bitset, and time proportional to the operations in flight
    /// at that point (see the module docs).
    pub max_states: usize,
}

impl Default for CheckLimits {
    /// Two million configurations per key: a few hundred MiB at worst, and
    /// seconds of search; linearizable histories of thousands of operations
    /// use a few configurations per operation.
    fn default() -> Self {
        CheckLimits {
            max_states: 2_000_000,
        }
    }
}

/// What a successful check did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CheckReport {
    /// Keys that had at least one operation to check.
    pub keys: usize,
    /// Operations checked (the history minus dropped unfinished reads).
    pub ops: usize,
    /// Configurations visited by the searches of all keys.
    pub states_explored: usize,
    /// Operations that never returned (`ret: None`), reads and writes.
    pub unfinished: usize,
}

/// Check a history; registers start absent (None) unless `initial` gives a
/// value for a key.
///
/// Keys are checked in key order. The first key found not linearizable is
/// reported; a key that exceeds the limits is reported only if no key has a
/// definite violation. Never panics: malformed input gives
/// [`Violation::InvalidHistory`].
pub fn check_registers<K, V>(
    history: &[Op<K, V>],
    initial: &HashMap<K, V>,
    limits: CheckLimits,
) -> Result<CheckReport, Violation<K, V>>
where
    K: Clone + Eq + Hash + Ord + Debug,
    V: Clone + Eq + Hash + Debug,
{
    let mut report = CheckReport::default();
    // Partition by key (P-compositionality). BTreeMap for a deterministic
    // order of checking and so of what gets reported.
    let mut by_key: BTreeMap<&K, Vec<usize>> = BTreeMap::new();
    for (index, op) in history.iter().enumerate() {
        if let Some(ret) = op.ret
            && ret < op.call
        {
            return Err(Violation::InvalidHistory {
                index,
                op: op.clone(),
                reason: format!("returned at {ret}, before it was called at {}", op.call),
            });
        }
        if op.ret.is_none() {
            report.unfinished += 1;
            if !op.kind.is_write() {
                continue;
            }
        }
        by_key.entry(op.kind.key()).or_default().push(index);
    }
    report.keys = by_key.len();
    report.ops = by_key.values().map(Vec::len).sum();

    let mut too_complex: Option<Violation<K, V>> = None;
    for (key, indices) in by_key {
        let key_history = KeyHistory::new(history, &indices, initial.get(key));
        let Outcome { states, result } = search::search(&key_history.ops, 0, limits.max_states);
        report.states_explored = report.states_explored.saturating_add(states);
        let (deepest, definite) = match result {
            SearchResult::Linearizable => continue,
            SearchResult::NotLinearizable(deepest) => (deepest, true),
            SearchResult::TooComplex(deepest) => (deepest, false),
        };
        // A search that gave up may still be shown wrong by a smaller
        // sub-history around where it got stuck (see `explain`).
        match explain::explain(history, &key_history, deepest, definite, limits.max_states) {
            Some(witness) => {
                return Err(Violation::NotLinearizable {
                    key: key.clone(),
                    ops: witness
                        .indices
                        .iter()
                        .map(|&index| history[index].clone())
                        .collect(),
                    explanation: witness.text,
                });
            }
            None => {
                if too_complex.is_none() {
                    too_complex = Some(Violation::TooComplex {
                        key: key.clone(),
                        ops: indices.len(),
                    });
                }
            }
        }
    }
    match too_complex {
        Some(violation) => Err(violation),
        None => Ok(report),
    }
}

/// One key's operations in the search's compact form: values interned to
/// small integers so that register states compare and hash as a `u32`.
struct KeyHistory<'a, V> {
    ops: Vec<KeyOp>,
    /// Value of each interned id. Id 0 is the register's starting value (the
    /// key's initial value, or absent), so every search starts from 0.
    values: Vec<Option<&'a V>>,
}

impl<'a, V: Eq + Hash> KeyHistory<'a, V> {
    fn new<K>(history: &'a [Op<K, V>], indices: &[usize], initial: Option<&'a V>) -> Self {
        let mut ids: HashMap<Option<&'a V>, u32> = HashMap::new();
        let mut values = Vec::new();
        // The starting value always gets id 0, so the search starts from 0.
        ids.insert(initial, 0);
        values.push(initial);
        let ops = indices
            .iter()
            .map(|&index| {
                let op = &history[index];
                let value = op.kind.value();
                let next = u32::try_from(values.len()).unwrap_or(u32::MAX);
                let id = *ids.entry(value).or_insert_with(|| {
                    values.push(value);
                    next
                });
                KeyOp {
                    call: op.call,
                    ret: op.ret,
                    write: op.kind.is_write(),
                    value: id,
                    index,
                }
            })
            .collect();
        KeyHistory { ops, values }
    }
}

impl<'a, V> KeyHistory<'a, V> {
    /// The value an interned id stands for.
    fn value(&self, id: u32) -> Option<&'a V> {
        self.values.get(id as usize).copied().flatten()
    }
}
