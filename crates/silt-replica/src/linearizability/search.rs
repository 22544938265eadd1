//! The WGL depth-first search over one register's sub-history.
//!
//! See the parent module for the model. Here operations are [`KeyOp`]s with
//! interned values, and the register starts at a given value id.

use std::collections::HashSet;
use std::hash::BuildHasherDefault;

use super::memo::{Bitset, MemoKey, WordHasher};

/// One operation of a single register's history.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct KeyOp {
    pub call: u64,
    pub ret: Option<u64>,
    pub write: bool,
    /// Interned value read or written.
    pub value: u32,
    /// Position in the caller's full history (only carried along).
    pub index: usize,
}

/// The search's answer and the configurations it visited to get it.
pub(super) struct Outcome {
    pub states: usize,
    pub result: SearchResult,
}

pub(super) enum SearchResult {
    Linearizable,
    NotLinearizable(Deepest),
    /// The state limit was reached; the deepest configuration so far hints
    /// at where the trouble is.
    TooComplex(Deepest),
}

/// The deepest configuration a failed search reached, to explain the failure.
/// Indices are into the slice given to [`search`].
#[derive(Clone, Debug, Default)]
pub(super) struct Deepest {
    /// The linearized operations in order, each with the register value after
    /// it: the longest linearizable prefix found.
    pub order: Vec<(usize, u32)>,
    /// Register value at that point.
    pub state: u32,
    /// The minimal operations there (those that could have come next).
    pub candidates: Vec<usize>,
    /// The unlinearized completed operation that returned first: nothing
    /// called after its return can be linearized before it.
    pub deadline: Option<usize>,
    /// Reads still to linearize that no write left can serve: they return a
    /// value other than the current one, and every write of it left was
    /// called after they returned (or none is left).
    pub late_reads: Vec<usize>,
}

/// Whether `ops` (one register, starting at value `initial`) is linearizable,
/// visiting at most `max_states` configurations.
pub(super) fn search(ops: &[KeyOp], initial: u32, max_states: usize) -> Outcome {
    // Entry indices are u32 (half the memory of usize); a history that does
    // not fit is beyond any search anyway.
    if ops.len() > (u32::MAX as usize) / 2 - 2 {
        return Outcome {
            states: 0,
            result: SearchResult::TooComplex(Deepest::default()),
        };
    }
    let mut search = Search::new(ops, initial, max_states);
    let result = search.run();
    Outcome {
        states: search.memo.len(),
        result,
    }
}

const HEAD: u32 = 0;

/// A choice on the search path: the call entry linearized, the register value
/// before it, whether it was a forced read (not a branching point), and the
/// rank among the previous configuration's candidate writes of the next one
/// to try after it.
#[derive(Clone, Copy)]
struct Frame {
    entry: u32,
    prev_state: u32,
    forced: bool,
    resume: usize,
}

struct Search<'a> {
    /// The caller's operations.
    ops: &'a [KeyOp],
    /// Operations searched, as indices into `ops`, in call order; positions
    /// in this vector are the bits of the linearized set.
    order: Vec<usize>,
    /// Positions (in `order`) of the unfinished writes, in call order.
    unfinished: Vec<u32>,
    /// Doubly linked event list: entry 0 is the head, `tail` the tail, the
    /// rest one call or return event each.
    next: Vec<u32>,
    prev: Vec<u32>,
    tail: u32,
    /// Per entry: the operation (position in `order`) it belongs to.
    entry_op: Vec<u32>,
    /// Per entry: whether it is a call event.
    entry_call: Vec<bool>,
    /// Per entry: its time.
    entry_time: Vec<u64>,
    /// Per call entry: its return entry, or 0 when the operation never
    /// returned.
    ret_entry: Vec<u32>,
    /// Per position in `order`: its call entry.
    call_entry: Vec<u32>,
    linearized: Bitset,
    memo: HashSet<MemoKey, BuildHasherDefault<WordHasher>>,
    max_states: usize,
    initial: u32,
    /// Per value, what [`Search::doomed`] needs; see [`Timeliness`].
    timeliness: Timeliness,
    /// Scratch for [`Search::candidate_writes`]: per value, the best write
    /// seen so far as (return time, call entry), entry 0 for none; and the
    /// values set, to reset them.
    best_write: Vec<(u64, u32)>,
    touched: Vec<u32>,
    /// Scratch for [`Search::candidate_writes`]: per value, the earliest
    /// return of a minimal read wanting it, MAX if none; and the values set,
    /// to reset them.
    need: Vec<u64>,
    wanted: Vec<u32>,
    /// Completed operations in `order`: the search is done when all of them
    /// are linearized.
    completed: usize,
}

impl<'a> Search<'a> {
    fn new(ops: &'a [KeyOp], initial: u32, max_states: usize) -> Self {
        // An unfinished write whose value no completed read returned cannot
        // affect any read that matters, so leaving it out never loses a
        // linearization; dropping it here keeps it from multiplying the
        // configurations of a failing search. Unfinished reads say nothing.
        let read_values: HashSet<u32> = ops
            .iter()
            .filter(|op| !op.write && op.ret.is_some())
            .map(|op| op.value)
            .collect();
        let mut order: Vec<usize> = (0..ops.len())
            .filter(|&i| {
                let op = &ops[i];
                op.ret.is_some() || (op.write && read_values.contains(&op.value))
            })
            .collect();
        order.sort_by_key(|&i| (ops[i].call, ops[i].ret.unwrap_or(u64::MAX), i));
        // Positions fit in u32: checked by `search`.
        let unfinished = (0..order.len() as u32)
            .filter(|&pos| ops[order[pos as usize]].ret.is_none())
            .collect();

        // Events in time order; at equal times calls come first, so touching
        // intervals are concurrent (see the model). The tuple's last field
        // orders events of the same time and kind deterministically.
        let mut events: Vec<(u64, bool, u32)> = Vec::with_capacity(order.len() * 2);
        let mut completed = 0;
        for (pos, &i) in order.iter().enumerate() {
            let pos = pos as u32;
            events.push((ops[i].call, false, pos));
            if let Some(ret) = ops[i].ret {
                events.push((ret, true, pos));
                completed += 1;
            }
        }
        events.sort_unstable();

        let tail = events.len() as u32 + 1;
        let size = events.len() + 2;
        let mut entry_op = vec![0; size];
        let mut entry_call = vec![false; size];
        let mut entry_time = vec![u64::MAX; size];
        let mut ret_entry = vec![0; size];
        let mut call_entry = vec![0u32; order.len()];
        for (e, &(time, is_ret, pos)) in events.iter().enumerate() {
            let e = e as u32 + 1;
            entry_op[e as usize] = pos;
            entry_time[e as usize] = time;
            if is_ret {
                ret_entry[call_entry[pos as usize] as usize] = e;
            } else {
                entry_call[e as usize] = true;
                call_entry[pos as usize] = e;
            }
        }
        let timeliness = Timeliness::new(ops, &order, initial);
        let next = (0..size as u32).map(|e| (e + 1).min(tail)).collect();
        let prev = (0..size as u32).map(|e| e.saturating_sub(1)).collect();
        Search {
            ops,
            linearized: Bitset::new(order.len()),
            order,
            unfinished,
            next,
            prev,
            tail,
            entry_op,
            entry_call,
            entry_time,
            ret_entry,
            call_entry,
            memo: HashSet::default(),
            max_states,
            initial,
            best_write: vec![(u64::MAX, 0); timeliness.reads.len()],
            touched: Vec::new(),
            need: vec![u64::MAX; timeliness.reads.len()],
            wanted: Vec::new(),
            timeliness,
            completed,
        }
    }

    fn op(&self, entry: u32) -> &KeyOp {
        &self.ops[self.order[self.entry_op[entry as usize] as usize]]
    }

    /// Unlink an operation's call entry and its return entry.
    fn lift(&mut self, call: u32) {
        self.unlink(call);
        let ret = self.ret_entry[call as usize];
        if ret != 0 {
            self.unlink(ret);
        }
    }

    /// Undo [`Self::lift`]; valid because the search undoes lifts in exactly
    /// the reverse order (dancing links).
    fn unlift(&mut self, call: u32) {
        let ret = self.ret_entry[call as usize];
        if ret != 0 {
            self.relink(ret);
        }
        self.relink(call);
    }

    /// Whether no linearization can complete from a configuration with the
    /// register at `state`: for some value other than the current one, a read
    /// of it still to linearize returned before any write of it still to
    /// linearize was called. (That read must see the value, only a write can
    /// bring it back, and none can come before the read.) Catching this as
    /// soon as the last usable write of a value is overwritten, instead of at
    /// the read's deadline, cuts off whole subtrees of a search.
    fn doomed(&self, state: u32) -> bool {
        self.timeliness.late_values > usize::from(self.timeliness.is_late(state as usize))
    }

    fn unlink(&mut self, e: u32) {
        let (p, n) = (self.prev[e as usize], self.next[e as usize]);
        self.next[p as usize] = n;
        self.prev[n as usize] = p;
    }

    fn relink(&mut self, e: u32) {
        let (p, n) = (self.prev[e as usize], self.next[e as usize]);
        self.next[p as usize] = e;
        self.prev[n as usize] = e;
    }

    /// A minimal read that returns `state`, if any.
    fn fitting_read(&self, state: u32) -> Option<u32> {
        let mut e = self.next[HEAD as usize];
        while e != self.tail && self.entry_call[e as usize] {
            let op = self.op(e);
            if !op.write && op.value == state {
                return Some(e);
            }
            e = self.next[e as usize];
        }
        None
    }

    /// The current configuration's candidate writes into `out`, as (rank,
    /// call entry), in the order to try them. Only called where no minimal
    /// read fits the register (else that read is forced).
    ///
    /// **Same value.** Of several minimal writes of one value only the one
    /// that returns first, `u`, is a candidate. If a linearization goes on
    /// with another one, `w`, swapping the two in it gives one too: the
    /// values seen are the same; `u` may go first as it is minimal; and `w`
    /// may take `u`'s later place (or be left out where `u` was, both then
    /// being unfinished) since what must precede `w` is linearized already,
    /// and what must follow `w` was called after `w` returned, so after `u`
    /// returned, so it followed `u` in the original.
    ///
    /// **Unfinished writes** are candidates only when a minimal read wants
    /// their value. In a linearization going on with an unfinished write,
    /// what follows it is either a read of its value, which is minimal now
    /// (linearizing an operation without a return changes no one's
    /// minimality), or a write, and then the unfinished write is overwritten
    /// unseen and may just be left out. (A completed write overwritten at
    /// once cannot be left out, and may have to be right where it is: before
    /// the write that the next read needs, when both must precede that read.)
    ///
    /// **Order.** Earliest deadline first: a write's rank is its own return
    /// or, if earlier, the return of the first minimal read wanting its
    /// value. (Measured on generated single-key histories from 16 clients
    /// with timeouts and stalls, it backtracked least; call order, the
    /// classic choice, did much worse on those.)
    ///
    /// O(minimal operations + unfinished writes) per call, without
    /// allocating: it runs on every configuration entered or returned to.
    fn candidate_writes(&mut self, out: &mut Vec<(u64, u32)>) {
        // The minimal operations: reads mark the values they want (with
        // their return), completed writes are offered.
        let mut e = self.next[HEAD as usize];
        while e != self.tail && self.entry_call[e as usize] {
            let op = *self.op(e);
            match op.ret {
                Some(ret) if op.write => self.offer(op.value, ret, e),
                Some(ret) => self.want(op.value, ret),
                // Unfinished writes: below. (Unfinished reads are not
                // searched.)
                None => {}
            }
            e = self.next[e as usize];
        }
        // Unfinished writes are minimal once called, up to the first return.
        let deadline = self.entry_time[e as usize];
        for i in 0..self.unfinished.len() {
            let pos = self.unfinished[i];
            let call = self.call_entry[pos as usize];
            if self.entry_time[call as usize] > deadline {
                break;
            }
            let value = self.op(call).value;
            if !self.linearized.get(pos as usize) && self.need[value as usize] != u64::MAX {
                self.offer(value, u64::MAX, call);
            }
        }
        out.clear();
        for &v in &self.touched {
            let (ret, entry) = self.best_write[v as usize];
            out.push((ret.min(self.need[v as usize]), entry));
            self.best_write[v as usize] = (u64::MAX, 0);
        }
        self.touched.clear();
        for &v in &self.wanted {
            self.need[v as usize] = u64::MAX;
        }
        self.wanted.clear();
        out.sort_unstable();
    }

    /// For [`Self::candidate_writes`]: value `value` is wanted by a minimal
    /// read returning at `ret`.
    fn want(&mut self, value: u32, ret: u64) {
        let need = &mut self.need[value as usize];
        if *need == u64::MAX {
            self.wanted.push(value);
        }
        *need = (*need).min(ret);
    }

    /// A minimal write of `value` returning at `ret` (MAX: never), for
    /// [`Self::candidate_writes`]: keep the earliest return per value
    /// (earliest call on a tie).
    fn offer(&mut self, value: u32, ret: u64, entry: u32) {
        let best = &mut self.best_write[value as usize];
        if best.1 == 0 {
            self.touched.push(value);
            *best = (ret, entry);
        } else if (ret, entry) < *best {
            *best = (ret, entry);
        }
    }

    /// Try to make `entry`'s operation the next linearized one, taking the
    /// register to `new_state`. Returns Ok(true) if that leads to a
    /// configuration not visited before (and records it), Ok(false) if it was
    /// visited, Err(()) if the state limit is reached.
    fn visit(&mut self, entry: u32, new_state: u32) -> Result<bool, ()> {
        let pos = self.entry_op[entry as usize] as usize;
        self.linearized.set(pos);
        let key = self.linearized.memo_key(new_state);
        let result = if self.memo.len() < self.max_states {
            Ok(self.memo.insert(key))
        } else if self.memo.contains(&key) {
            Ok(false)
        } else {
            Err(())
        };
        if result != Ok(true) {
            self.linearized.clear(pos);
        }
        result
    }

    fn run(&mut self) -> SearchResult {
        let mut stack: Vec<Frame> = Vec::new();
        let mut state = self.initial;
        let mut remaining = self.completed;
        // Deepest configuration: its depth, and whether the current path is
        // at a new maximum not yet captured (captured lazily, when the search
        // first backtracks from it, so that a succeeding search never pays).
        let mut deepest = Deepest::default();
        let mut best_depth = 0;
        let mut uncaptured = true;
        // Right after entering a configuration, before any of its candidates
        // was tried.
        let mut fresh = true;
        // Candidate writes of the current configuration, and the rank of the
        // next one to try; recomputed on entering or returning to one.
        let mut writes: Vec<(u64, u32)> = Vec::new();
        let mut rank = 0;
        loop {
            if remaining == 0 {
                return SearchResult::Linearizable;
            }
            // The move to make: (call entry, new state, forced, resume rank).
            let mut chosen: Option<(u32, u32, bool, usize)> = None;
            let mut dead_end = false;
            if fresh && self.doomed(state) {
                fresh = false;
                dead_end = true;
            }
            if fresh {
                fresh = false;
                // A minimal read of the current value goes first, without
                // branching (see the parent module).
                if let Some(e) = self.fitting_read(state) {
                    chosen = Some((e, state, true, 0));
                } else {
                    self.candidate_writes(&mut writes);
                    rank = 0;
                }
            }
            if chosen.is_none() && !dead_end {
                // No read fits here (else it was forced), so only writes are
                // candidates.
                match writes.get(rank) {
                    Some(&(_, e)) => chosen = Some((e, self.op(e).value, false, rank + 1)),
                    None => dead_end = true,
                }
            }
            if let Some((e, new_state, forced, resume)) = chosen {
                match self.visit(e, new_state) {
                    Ok(true) => {
                        stack.push(Frame {
                            entry: e,
                            prev_state: state,
                            forced,
                            resume,
                        });
                        self.lift(e);
                        let op = *self.op(e);
                        self.timeliness
                            .update(self.entry_op[e as usize], &self.linearized);
                        if op.ret.is_some() {
                            remaining -= 1;
                        }
                        state = new_state;
                        fresh = true;
                        if stack.len() > best_depth {
                            best_depth = stack.len();
                            uncaptured = true;
                        }
                        continue;
                    }
                    // Visited before: a forced read's configuration failing
                    // means this one fails too; a write's means trying the
                    // next candidate.
                    Ok(false) if forced => dead_end = true,
                    Ok(false) => rank = resume,
                    Err(()) => {
                        if uncaptured {
                            // No backtrack since the maximum: we are on it.
                            deepest = self.capture(&stack, state);
                        }
                        return SearchResult::TooComplex(deepest);
                    }
                }
            }
            if !dead_end {
                continue;
            }
            if uncaptured {
                deepest = self.capture(&stack, state);
                uncaptured = false;
            }
            // Backtrack to the last branching choice; a forced read's
            // configuration fails with it.
            loop {
                let Some(frame) = stack.pop() else {
                    return SearchResult::NotLinearizable(deepest);
                };
                let pos = self.entry_op[frame.entry as usize] as usize;
                self.linearized.clear(pos);
                self.unlift(frame.entry);
                let op = *self.op(frame.entry);
                self.timeliness
                    .update(self.entry_op[frame.entry as usize], &self.linearized);
                if op.ret.is_some() {
                    remaining += 1;
                }
                state = frame.prev_state;
                if !frame.forced {
                    // Same configuration as when the frame was pushed, so the
                    // same candidates in the same order.
                    self.candidate_writes(&mut writes);
                    rank = frame.resume;
                    break;
                }
            }
        }
    }

    /// Describe the current configuration (the path on `stack`, register at
    /// `state`) in terms of the caller's operation indices.
    fn capture(&self, stack: &[Frame], state: u32) -> Deepest {
        let index = |e: u32| self.order[self.entry_op[e as usize] as usize];
        let mut order = Vec::with_capacity(stack.len());
        for (depth, frame) in stack.iter().enumerate() {
            // The value after each op is the value before the next one.
            let after = stack.get(depth + 1).map_or(state, |f| f.prev_state);
            order.push((index(frame.entry), after));
        }
        let mut candidates = Vec::new();
        let mut e = self.next[HEAD as usize];
        while e != self.tail && self.entry_call[e as usize] {
            candidates.push(index(e));
            e = self.next[e as usize];
        }
        let deadline = (e != self.tail).then(|| index(e));
        let late_reads = (0..self.timeliness.reads.len())
            .filter(|&v| v != state as usize && self.timeliness.is_late(v))
            .filter_map(|v| {
                let (reads, first) = &self.timeliness.reads[v];
                reads.get(*first).map(|&(_, pos)| self.order[pos as usize])
            })
            .collect();
        Deepest {
            order,
            state,
            candidates,
            deadline,
            late_reads,
        }
    }
}

/// For each value, the earliest return among its unlinearized reads and the
/// earliest call among its unlinearized writes, and how many values are
/// *late* (the former before the latter). Each value keeps its reads sorted
/// by return and writes by call, with the index of the first unlinearized
/// one: linearizing moves it forward past linearized ones, and since the
/// search un-linearizes in reverse order, un-linearizing one before it just
/// moves it back there. Amortized O(1) per step, as operations of a value are
/// mostly linearized in order.
struct Timeliness {
    /// Per operation position: (its value, its index in its value's list).
    slot: Vec<(u32, u32)>,
    /// Per value: reads as (return time, position), and the first
    /// unlinearized one.
    reads: Vec<(Vec<(u64, u32)>, usize)>,
    /// Per value: writes as (call time, position), and the first
    /// unlinearized one.
    writes: Vec<(Vec<(u64, u32)>, usize)>,
    late_values: usize,
}

impl Timeliness {
    fn new(ops: &[KeyOp], order: &[usize], initial: u32) -> Self {
        let values = order
            .iter()
            .map(|&i| ops[i].value)
            .chain([initial])
            .max()
            .unwrap_or(0) as usize
            + 1;
        let mut reads = vec![(Vec::new(), 0); values];
        let mut writes = vec![(Vec::new(), 0); values];
        for (pos, &i) in order.iter().enumerate() {
            let op = &ops[i];
            // Positions fit in u32: checked by `search`.
            if op.write {
                writes[op.value as usize].0.push((op.call, pos as u32));
            } else {
                // Only completed reads are searched.
                reads[op.value as usize]
                    .0
                    .push((op.ret.unwrap_or(u64::MAX), pos as u32));
            }
        }
        let mut slot = vec![(0, 0); order.len()];
        for (v, lists) in reads.iter_mut().zip(writes.iter_mut()).enumerate() {
            for (list, _) in [lists.0, lists.1] {
                list.sort_unstable();
                for (k, &(_, pos)) in list.iter().enumerate() {
                    slot[pos as usize] = (v as u32, k as u32);
                }
            }
        }
        let mut timeliness = Timeliness {
            slot,
            reads,
            writes,
            late_values: 0,
        };
        timeliness.late_values = (0..values).filter(|&v| timeliness.is_late(v)).count();
        timeliness
    }

    fn first(list: &(Vec<(u64, u32)>, usize)) -> u64 {
        list.0.get(list.1).map_or(u64::MAX, |&(time, _)| time)
    }

    fn is_late(&self, v: usize) -> bool {
        let Some((reads, writes)) = self.reads.get(v).zip(self.writes.get(v)) else {
            return false;
        };
        // A read returning at `r` can see a write called at `w <= r`.
        reads.1 < reads.0.len() && Self::first(reads) < Self::first(writes)
    }

    /// Operation `pos` was just linearized or un-linearized (per `linearized`).
    fn update(&mut self, pos: u32, linearized: &Bitset) {
        let (v, k) = self.slot[pos as usize];
        let (v, k) = (v as usize, k as usize);
        let was = self.is_late(v);
        for list in [&mut self.reads[v], &mut self.writes[v]] {
            if list.0.get(k).is_none_or(|&(_, p)| p != pos) {
                continue; // `pos` is in the other list
            }
            if !linearized.get(pos as usize) {
                list.1 = list.1.min(k);
            } else if list.1 == k {
                while list
                    .0
                    .get(list.1)
                    .is_some_and(|&(_, p)| linearized.get(p as usize))
                {
                    list.1 += 1;
                }
            }
        }
        match (was, self.is_late(v)) {
            (false, true) => self.late_values += 1,
            (true, false) => self.late_values -= 1,
            _ => {}
        }
    }
}
