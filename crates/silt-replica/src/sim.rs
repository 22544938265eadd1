//! A deterministic simulation of one replicated group: replicas with real
//! log files, a network of links that delay messages and break, crashes that
//! drop whatever a replica had not synced (and sometimes leave a torn record
//! at the end of its log), and clients that propose at whoever they believe
//! leads. Everything random comes from one seed, so a failing seed replays
//! exactly.
//!
//! Half the crashes are machine crashes: the log also loses what was
//! written but not fdatasynced (records that only say what is decided or
//! trimmed are written without a sync of their own).
//!
//! The network is what the transport gives OmniPaxos: one ordered session
//! per direction of a link (TCP). Messages of one session arrive in order
//! after random delays, so messages of different links overtake each other.
//! A lost message breaks its session: everything in flight on it is dropped,
//! nothing passes until it is repaired, and then both ends are told
//! ([`Group::reconnected`]), as the transport does when a connection is made
//! again. (OmniPaxos resends only on that signal: a message dropped silently
//! inside a live session would stall it, which TCP never does.)
//!
//! After a run, [`Sim::check`] verifies what consensus promises:
//! - **agreement**: no two replicas ever decide different entries at one
//!   index, across crashes (each replica's decided log is kept as it was
//!   handed out, and after restarts it must hand out the same again);
//! - **validity**: every decided entry was proposed, at most once;
//! - **durability**: every entry acknowledged to a client (decided at the
//!   replica it was proposed to, which then synced) is in the final log;
//! - **liveness after healing**: once the network is reliable and everyone
//!   is up, a new proposal is decided everywhere within a bounded time.
//!
//! The log is trimmed as a node trims it: each replica now and then makes
//! its state machine durable (a checkpoint: the position survives crashes,
//! and a restart hands out entries from there), and the leader now and then
//! trims to the lowest durable position of all replicas. A replica must
//! always be able to restart from its checkpoint and catch up.

use crate::group::{Decided, Group, GroupConfig};
use crate::log_store::{Inline, LogOptions};
use omnipaxos::messages::Message;
use omnipaxos::storage::{Entry, NoSnapshot};
use omnipaxos::util::NodeId;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashSet};
use std::io::Write;
use std::path::PathBuf;

/// The simulator's entry: a proposal's unique number.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct SimEntry(pub u64);

impl Entry for SimEntry {
    type Snapshot = NoSnapshot;
}

/// How hostile the run is.
#[derive(Debug, Clone)]
pub struct SimConfig {
    pub seed: u64,
    pub replicas: usize,
    /// Ticks of the faulty phase; then the network heals and everyone restarts.
    pub ticks: u64,
    /// Chance a message is lost (its link breaks for a few ticks).
    pub loss: f64,
    /// A message takes 1..=max_delay ticks (so messages of different links
    /// overtake each other).
    pub max_delay: u64,
    /// Chance per tick that some replica crashes.
    pub crash: f64,
    /// Chance per tick that some link goes down (both ways) for a while.
    pub cut: f64,
    /// Proposals per tick tried by the clients.
    pub proposals_per_tick: u32,
    /// Print every event to stderr from this tick on (debugging a seed).
    pub trace_from: Option<u64>,
    /// The last replica is not there at first: at this tick it joins by
    /// installing a snapshot of another replica's state (its log created
    /// as compacted there), as a new member does.
    pub late_join: Option<u64>,
}

impl SimConfig {
    pub fn new(seed: u64) -> SimConfig {
        SimConfig {
            seed,
            replicas: 3,
            ticks: 600,
            loss: 0.02,
            max_delay: 3,
            crash: 0.01,
            cut: 0.01,
            proposals_per_tick: 2,
            trace_from: std::env::var("SILT_SIM_TRACE_FROM")
                .ok()
                .and_then(|s| s.parse().ok()),
            late_join: None,
        }
    }
}

struct InFlight {
    at: u64,
    from: NodeId,
    to: NodeId,
    msg: Message<SimEntry>,
}

/// What a run did, for the test's message.
#[derive(Debug, Default, Clone)]
pub struct SimReport {
    pub proposed: u64,
    pub acknowledged: u64,
    pub decided: usize,
    pub crashes: u64,
    /// Crashes of a replica inside its sync, after its early messages left.
    pub crashes_in_sync: u64,
    pub torn_tails: u64,
    pub delivered: u64,
    pub lost: u64,
    /// Trims the leader made (OmniPaxos took them).
    pub trims: u64,
    /// The index a late joiner's snapshot was at.
    pub joined_at: Option<usize>,
}

pub struct Sim {
    cfg: SimConfig,
    rng: StdRng,
    dirs: Vec<PathBuf>,
    groups: Vec<Option<Group<SimEntry, Inline>>>,
    /// Ticks until a crashed replica restarts.
    down_until: Vec<u64>,
    net: Vec<InFlight>,
    /// Links down until a tick: (from, to) -> tick.
    cuts: BTreeMap<(NodeId, NodeId), u64>,
    /// The last delivery time of each session (deliveries stay in order).
    last_at: BTreeMap<(NodeId, NodeId), u64>,
    now: u64,
    next_value: u64,
    proposed: HashSet<u64>,
    /// Proposed at replica -> values waiting for that replica to decide them.
    waiting: Vec<HashSet<u64>>,
    acknowledged: HashSet<u64>,
    /// Every decided entry any replica ever handed out, by index.
    decided: BTreeMap<usize, u64>,
    /// Each replica's checkpointed state machine position (kept across
    /// crashes: restarts hand out entries from here).
    durable: Vec<usize>,
    report: SimReport,
    violations: Vec<String>,
}

fn id(i: usize) -> NodeId {
    i as NodeId + 1
}

impl Sim {
    /// A group of fresh replicas with their logs under `root`.
    pub fn new(root: &std::path::Path, cfg: SimConfig) -> Sim {
        let n = cfg.replicas;
        let dirs = (0..n).map(|i| root.join(format!("r{}", id(i)))).collect();
        let mut sim = Sim {
            rng: StdRng::seed_from_u64(cfg.seed),
            dirs,
            groups: (0..n).map(|_| None).collect(),
            down_until: vec![0; n],
            net: Vec::new(),
            cuts: BTreeMap::new(),
            last_at: BTreeMap::new(),
            now: 0,
            next_value: 1,
            proposed: HashSet::new(),
            waiting: vec![HashSet::new(); n],
            acknowledged: HashSet::new(),
            decided: BTreeMap::new(),
            durable: vec![0; n],
            report: SimReport::default(),
            violations: Vec::new(),
            cfg,
        };
        for i in 0..n {
            if sim.cfg.late_join.is_some() && i == n - 1 {
                sim.down_until[i] = u64::MAX;
                continue;
            }
            sim.start(i);
        }
        sim
    }

    /// The late joiner installs a snapshot of the most advanced running
    /// replica: the state machine at its handed-out index.
    fn join_late(&mut self) {
        let i = self.cfg.replicas - 1;
        let Some(idx) = self.groups.iter().flatten().map(|g| g.applied_idx()).max() else {
            return;
        };
        let opts = self.group_config(i).log;
        if let Err(e) = crate::log_store::LogHandle::<SimEntry, Inline>::create_at(
            &self.dirs[i],
            idx,
            1,
            None,
            opts,
        ) {
            self.violations
                .push(format!("creating the joiner's log: {e}"));
            return;
        }
        self.durable[i] = idx;
        self.report.joined_at = Some(idx);
        self.down_until[i] = self.now;
    }

    fn group_config(&self, i: usize) -> GroupConfig {
        let mut g = GroupConfig::new(id(i), (0..self.cfg.replicas).map(id).collect());
        g.election_ticks = 5;
        g.resend_ticks = 8;
        g.log = LogOptions {
            fsync: false,
            rewrite_bytes: 16 << 10,
        };
        g
    }

    fn start(&mut self, i: usize) {
        let cfg = self.group_config(i);
        // A restart hands the decided log out again from the checkpoint:
        // agreement is checked against what was handed out before the crash.
        match Group::open(&self.dirs[i], &cfg, Inline, self.durable[i]) {
            Ok((g, _)) => self.groups[i] = Some(g),
            Err(e) => self
                .violations
                .push(format!("replica {} did not reopen: {e}", id(i))),
        }
    }

    /// Break the link between `a` and `b` (both sessions) until `until`.
    fn cut(&mut self, a: NodeId, b: NodeId, until: u64) {
        for k in [(a, b), (b, a)] {
            let t = self.cuts.entry(k).or_insert(until);
            *t = (*t).max(until);
        }
        self.net
            .retain(|m| !((m.from == a && m.to == b) || (m.from == b && m.to == a)));
    }

    fn crash(&mut self, i: usize) {
        // Dropping the group drops its unsynced records: what a crash loses.
        // Half the crashes are the machine's: what was written but not
        // fdatasynced is lost too.
        let synced = self.groups[i].as_ref().map(|g| g.log().synced_len());
        self.groups[i] = None;
        if let Some(len) = synced
            && self.rng.random_bool(0.5)
        {
            let path = self.dirs[i].join("paxos.log");
            if let Ok(f) = std::fs::OpenOptions::new().write(true).open(&path) {
                let _ = f.set_len(len);
            }
        }
        let me = id(i);
        self.net.retain(|m| m.from != me && m.to != me);
        self.waiting[i].clear();
        self.report.crashes += 1;
        self.down_until[i] = self.now + self.rng.random_range(5..40);
        if self.rng.random_bool(0.3) {
            // A crash inside a write: part of a record at the end.
            let path = self.dirs[i].join("paxos.log");
            let n = self.rng.random_range(1..12);
            let junk: Vec<u8> = (0..n).map(|_| self.rng.random()).collect();
            if let Ok(mut f) = std::fs::OpenOptions::new().append(true).open(&path) {
                let _ = f.write_all(&junk);
                self.report.torn_tails += 1;
            }
        }
    }

    fn trace(&self, what: impl FnOnce() -> String) {
        if self.cfg.trace_from.is_some_and(|t| self.now >= t) {
            eprintln!("[{}] {}", self.now, what());
        }
    }

    fn link_up(&self, from: NodeId, to: NodeId) -> bool {
        !self.cuts.contains_key(&(from, to))
    }

    fn step(&mut self, faulty: bool) {
        self.now += 1;
        let n = self.cfg.replicas;
        if self.cfg.late_join == Some(self.now) {
            self.join_late();
        }
        if faulty {
            if self.rng.random_bool(self.cfg.crash) {
                let i = self.rng.random_range(0..n);
                if self.groups[i].is_some() {
                    self.crash(i);
                }
            }
            if self.rng.random_bool(self.cfg.cut) {
                let a = self.rng.random_range(0..n);
                let b = (a + self.rng.random_range(1..n)) % n;
                let until = self.now + self.rng.random_range(5..50);
                self.cut(id(a), id(b), until);
            }
        }
        // Repaired links: both ends hear of it.
        let now = self.now;
        let repaired: Vec<(NodeId, NodeId)> = self
            .cuts
            .iter()
            .filter(|(_, t)| **t <= now)
            .map(|(k, _)| *k)
            .collect();
        for (a, b) in repaired {
            self.trace(|| format!("link {a} -> {b} repaired"));
            self.cuts.remove(&(a, b));
            if let Some(g) = self.groups[(a - 1) as usize].as_mut() {
                let _ = g.reconnected(b);
            }
        }
        for i in 0..n {
            if self.groups[i].is_none() && self.down_until[i] <= self.now {
                self.start(i);
                // Peers learn the link is back, and so does it.
                for j in 0..n {
                    if j == i {
                        continue;
                    }
                    if let Some(g) = self.groups[j].as_mut() {
                        let _ = g.reconnected(id(i));
                    }
                    if let Some(g) = self.groups[i].as_mut() {
                        let _ = g.reconnected(id(j));
                    }
                }
            }
        }
        // Deliver what is due.
        let (due, rest): (Vec<_>, Vec<_>) = std::mem::take(&mut self.net)
            .into_iter()
            .partition(|m| m.at <= now);
        self.net = rest;
        for m in due {
            let to = (m.to - 1) as usize;
            self.trace(|| format!("deliver {} -> {}: {:?}", m.from, m.to, m.msg));
            if let Some(g) = self.groups[to].as_mut() {
                self.report.delivered += 1;
                let _ = g.handle(m.msg);
            }
        }
        // Clients propose at whoever they find leading (while healing, only
        // the final proposal is made).
        let proposals = if faulty {
            self.cfg.proposals_per_tick
        } else {
            0
        };
        for _ in 0..proposals {
            let i = self.rng.random_range(0..n);
            if let Some(g) = self.groups[i].as_mut() {
                let v = self.next_value;
                if g.propose(SimEntry(v)).is_ok() {
                    self.next_value += 1;
                    self.proposed.insert(v);
                    self.waiting[i].insert(v);
                    self.report.proposed += 1;
                }
            }
        }
        for i in 0..n {
            let Some(g) = self.groups[i].as_mut() else {
                continue;
            };
            let _ = g.tick();
            // A leader's accept requests leave before its sync; now and
            // then the replica crashes inside that sync, after they left.
            let mut decided: Vec<Decided<SimEntry>> = Vec::new();
            let early = match g.take_early(&mut decided) {
                Ok(early) => early,
                Err(e) => {
                    self.violations
                        .push(format!("replica {} failed: {e}", id(i)));
                    continue;
                }
            };
            let crash_in_sync = faulty
                && !(early.is_empty() && decided.is_empty())
                && self.rng.random_bool((self.cfg.crash * 5.0).min(1.0));
            for msg in early {
                self.send(id(i), msg, faulty);
            }
            self.hand_out(i, std::mem::take(&mut decided));
            if crash_in_sync {
                // Sometimes the state machine checkpointed what it applied
                // before the sync: the restart must find those entries.
                if self.rng.random_bool(0.5)
                    && let Some(g) = self.groups[i].as_ref()
                {
                    self.durable[i] = g.applied_idx();
                }
                self.report.crashes_in_sync += 1;
                self.crash(i);
                continue;
            }
            let Some(g) = self.groups[i].as_mut() else {
                continue;
            };
            let mut decided: Vec<Decided<SimEntry>> = Vec::new();
            let out = match g.ready(&mut decided) {
                Ok(out) => out,
                Err(e) => {
                    self.violations
                        .push(format!("replica {} failed: {e}", id(i)));
                    continue;
                }
            };
            let applied = g.applied_idx();
            let leader = g.is_leader();
            let compacted = g.compacted_idx();
            self.hand_out(i, decided);
            // Checkpoints, and trims by the leader to what every replica
            // has durably applied.
            if self.rng.random_bool(0.05) {
                self.durable[i] = applied;
            }
            if leader && self.rng.random_bool(0.05) {
                let low = self.durable.iter().copied().min().unwrap_or(0);
                if let Some(g) = self.groups[i].as_mut()
                    && low > compacted
                    && g.trim(low).unwrap_or(false)
                {
                    self.report.trims += 1;
                }
            }
            for msg in out {
                self.send(id(i), msg, faulty);
            }
        }
    }

    /// Record what replica `i` handed out to its state machine: agreement
    /// with every other replica, and its own proposals acknowledged.
    fn hand_out(&mut self, i: usize, decided: Vec<Decided<SimEntry>>) {
        for (idx, SimEntry(v)) in decided {
            match self.decided.get(&idx) {
                Some(&w) if w != v => self.violations.push(format!(
                    "agreement: index {idx} decided as {w} and as {v} (replica {})",
                    id(i)
                )),
                Some(_) => {}
                None => {
                    self.decided.insert(idx, v);
                }
            }
            if self.waiting[i].remove(&v) {
                self.acknowledged.insert(v);
            }
        }
    }

    /// Put a message on the network (lost, or delayed but in order per link).
    fn send(&mut self, from: NodeId, msg: Message<SimEntry>, faulty: bool) {
        let now = self.now;
        let to = msg.get_receiver();
        if !self.link_up(from, to) {
            self.trace(|| format!("drop (link down) {from} -> {to}: {msg:?}"));
            self.report.lost += 1;
            return;
        }
        if faulty && self.rng.random_bool(self.cfg.loss) {
            self.trace(|| format!("lose {from} -> {to}: {msg:?}"));
            self.report.lost += 1;
            let until = now + self.rng.random_range(1..6);
            self.cut(from, to, until);
            return;
        }
        let delay = if faulty {
            self.rng.random_range(1..=self.cfg.max_delay)
        } else {
            1
        };
        let last = self.last_at.entry((from, to)).or_insert(0);
        let at = (now + delay).max(*last);
        *last = at;
        self.net.push(InFlight { at, from, to, msg });
    }

    /// The faulty phase, then healing: every replica up, a reliable network,
    /// and one more proposal that must be decided everywhere.
    pub fn run(&mut self) -> SimReport {
        for _ in 0..self.cfg.ticks {
            self.step(true);
        }
        for (a, b) in self.cuts.keys().copied().collect::<Vec<_>>() {
            self.cuts.insert((a, b), self.now + 1);
        }
        if self.cfg.late_join.is_some_and(|t| t > self.now) {
            self.join_late();
        }
        for i in 0..self.cfg.replicas {
            if self.groups[i].is_none() {
                self.down_until[i] = self.now;
            }
        }
        // Heal: let elections settle, then a final proposal at the leader
        // (made again every 50 ticks: one made to a leader about to be
        // replaced is legitimately lost).
        let mut last = None;
        for t in 0..1000 {
            self.step(false);
            if t % 50 == 49 && last.is_some_and(|v| !self.acknowledged.contains(&v)) {
                last = None;
            }
            if last.is_none() {
                for i in 0..self.cfg.replicas {
                    let v = self.next_value;
                    if let Some(g) = self.groups[i].as_mut()
                        && g.propose(SimEntry(v)).is_ok()
                    {
                        self.next_value += 1;
                        self.proposed.insert(v);
                        self.waiting[i].insert(v);
                        self.report.proposed += 1;
                        last = Some(v);
                        break;
                    }
                }
            }
            if let Some(v) = last {
                let everywhere = self.groups.iter().all(|g| {
                    g.as_ref()
                        .is_some_and(|g| g.decided_idx() == self.decided.len())
                });
                if self.acknowledged.contains(&v) && everywhere {
                    break;
                }
            }
        }
        match last {
            Some(v) if self.acknowledged.contains(&v) => {}
            _ => {
                let states: Vec<String> =
                    self.groups.iter().flatten().map(|g| g.describe()).collect();
                self.violations.push(format!(
                    "liveness: no proposal was decided after healing ({last:?}); {}",
                    states.join("; ")
                ))
            }
        }
        self.report.acknowledged = self.acknowledged.len() as u64;
        self.report.decided = self.decided.len();
        self.report.clone()
    }

    /// Everything consensus promises, checked on what the run did.
    pub fn check(&self) -> Result<(), Vec<String>> {
        let mut v = self.violations.clone();
        let mut seen = HashSet::new();
        for (idx, val) in &self.decided {
            if !self.proposed.contains(val) {
                v.push(format!(
                    "validity: {val} decided at {idx} was never proposed"
                ));
            }
            if !seen.insert(*val) {
                v.push(format!("validity: {val} decided twice (again at {idx})"));
            }
        }
        let gaps = self
            .decided
            .keys()
            .enumerate()
            .find(|(i, k)| *i != **k)
            .map(|(i, _)| i);
        if let Some(i) = gaps {
            v.push(format!("the decided log has a hole at {i}"));
        }
        for a in &self.acknowledged {
            if !seen.contains(a) {
                v.push(format!(
                    "durability: acknowledged {a} is not in the decided log"
                ));
            }
        }
        for (i, g) in self.groups.iter().enumerate() {
            match g {
                Some(g) if g.decided_idx() != self.decided.len() => v.push(format!(
                    "replica {} decided {} entries, the group {}",
                    id(i),
                    g.decided_idx(),
                    self.decided.len()
                )),
                Some(_) => {}
                None => v.push(format!("replica {} is down at the end", id(i))),
            }
        }
        if v.is_empty() { Ok(()) } else { Err(v) }
    }
}
