//! One replica of a replicated group: an OmniPaxos instance over a
//! [`LogHandle`], driven by whoever owns it (a node's thread, or the
//! simulator) through four calls:
//!
//! - [`Group::handle`] a message from another replica, [`Group::tick`] the
//!   clock (elections and resends count ticks), [`Group::propose`] an entry;
//! - [`Group::ready`]: sync the log, then hand out the messages to send and
//!   the entries decided since the last call.
//!
//! `ready` is the only way out of a replica, and it syncs first: a promise,
//! an acceptance or an entry reaches another process, or the state machine,
//! only once it is on disk here. Everything the calls before it did is synced
//! by one fdatasync (group commit falls out of calling `ready` once per batch
//! of input).
//!
//! One exception, [`Group::take_early`]: a leader's accept requests may leave
//! before its own sync, so that the followers write while the leader does
//! (the leader's write is off the critical path). That is safe because
//! they claim nothing about the leader's disk: an entry counts as chosen
//! only once a follower's acceptance comes back, which the owner handles in
//! a later turn, after this turn's `ready` has synced the leader's copy.
//! Everything else (promises, acceptances, a new leader's log sync) still
//! waits for the sync.
//!
//! OmniPaxos panics when its storage fails. The calls here catch that and
//! leave the group failed: it answers every later call with
//! [`ReplicaError::Failed`], and the owner stops the replica (restarting
//! recovers from the log file).

use crate::error::{ReplicaError, Result};
use crate::log_store::{LogHandle, LogOptions, OpenSummary, Payloads};
use omnipaxos::messages::Message;
use omnipaxos::messages::sequence_paxos::PaxosMsg;
use omnipaxos::storage::Entry;
use omnipaxos::util::{LogEntry, NodeId};
use omnipaxos::{ClusterConfig, OmniPaxos, OmniPaxosConfig, ServerConfig};
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::Path;

/// Who is in a group and how its clock runs.
#[derive(Debug, Clone)]
pub struct GroupConfig {
    /// This replica (nonzero).
    pub me: NodeId,
    /// Every replica, `me` included (at least two).
    pub nodes: Vec<NodeId>,
    /// Ticks without a heartbeat before a new leader is elected.
    pub election_ticks: u64,
    /// Ticks before an unanswered message is sent again.
    pub resend_ticks: u64,
    /// A configuration number, larger for each new membership (nonzero).
    pub config_id: u32,
    pub log: LogOptions,
    /// A log sync for a follower that would carry more than this many
    /// payload bytes is not sent: the follower is reported by
    /// [`Group::take_too_far_behind`] and should catch up by snapshot (a
    /// message must fit the transport, and memory).
    pub max_sync_bytes: u64,
}

impl GroupConfig {
    pub fn new(me: NodeId, nodes: Vec<NodeId>) -> GroupConfig {
        GroupConfig {
            me,
            nodes,
            election_ticks: 10,
            resend_ticks: 20,
            config_id: 1,
            log: LogOptions::default(),
            max_sync_bytes: 32 << 20,
        }
    }
}

/// A decided entry: its index in the log and its stored form.
pub type Decided<T> = (usize, T);

pub struct Group<T, P>
where
    T: Entry + Serialize + DeserializeOwned,
    T::Snapshot: Serialize + DeserializeOwned,
    P: Payloads<T>,
{
    op: OmniPaxos<T, LogHandle<T, P>>,
    log: LogHandle<T, P>,
    /// Decided entries below this index were handed out.
    applied: usize,
    failed: Option<String>,
    me: NodeId,
    /// Prepares refused in a row because this replica promised a higher
    /// ballot (see [`Group::handle`]).
    refused: u32,
    max_sync_bytes: u64,
    /// Followers whose log sync was too large to send.
    too_far_behind: Vec<NodeId>,
    /// Heartbeats in a row from a leader whose round is below this
    /// replica's promise while this replica follows (see [`Group::handle`]).
    behind_leader: u32,
    /// Messages taken by [`Group::take_early`] that must wait for the sync.
    held: Vec<Message<T>>,
}

impl<T, P> Group<T, P>
where
    T: Entry + Serialize + DeserializeOwned,
    T::Snapshot: Serialize + DeserializeOwned,
    P: Payloads<T>,
{
    /// Open the replica whose log is in `dir`. Decided entries from index
    /// `applied` on are handed out again by [`Group::ready`] (the state
    /// machine's own durable position).
    pub fn open(
        dir: &Path,
        cfg: &GroupConfig,
        payloads: P,
        applied: usize,
    ) -> Result<(Self, OpenSummary)> {
        let (log, summary) = LogHandle::open(dir, payloads, cfg.log)?;
        // The state machine applied entries up to `applied`: they were
        // decided, even if a machine crash lost the record saying so.
        log.raise_decided(applied)?;
        let op_cfg = OmniPaxosConfig {
            cluster_config: ClusterConfig {
                configuration_id: cfg.config_id,
                nodes: cfg.nodes.clone(),
                flexible_quorum: None,
            },
            server_config: ServerConfig {
                pid: cfg.me,
                election_tick_timeout: cfg.election_ticks,
                resend_message_tick_timeout: cfg.resend_ticks,
                ..ServerConfig::default()
            },
        };
        let op = op_cfg
            .build(log.clone())
            .map_err(|e| ReplicaError::Config(e.to_string()))?;
        let compacted = op.get_compacted_idx();
        if applied < compacted {
            return Err(ReplicaError::BehindTrim { applied, compacted });
        }
        Ok((
            Group {
                op,
                log,
                applied,
                failed: None,
                me: cfg.me,
                refused: 0,
                behind_leader: 0,
                max_sync_bytes: cfg.max_sync_bytes,
                too_far_behind: Vec::new(),
                held: Vec::new(),
            },
            summary,
        ))
    }

    pub fn me(&self) -> NodeId {
        self.me
    }

    /// The leader this replica knows of.
    pub fn leader(&self) -> Option<NodeId> {
        self.op.get_current_leader().map(|(id, _)| id)
    }

    /// The round this replica has promised (a leader's own round while it
    /// leads: a new one means entries proposed in the old may be lost).
    pub fn promised_round(&self) -> (u32, u64) {
        let b = self.op.get_promise();
        (b.n, b.pid)
    }

    /// This replica leads (its entries are proposed, not forwarded).
    pub fn is_leader(&self) -> bool {
        self.leader() == Some(self.me)
    }

    pub fn decided_idx(&self) -> usize {
        self.op.get_decided_idx()
    }

    /// Entries below this index were trimmed from the log.
    pub fn compacted_idx(&self) -> usize {
        self.op.get_compacted_idx()
    }

    /// The index of the next entry handed out by [`Group::ready`].
    pub fn applied_idx(&self) -> usize {
        self.applied
    }

    /// One line on the replica's state (for logs and failed checks).
    pub fn describe(&self) -> String {
        format!(
            "replica {}: leader {:?}, promise {:?}, accepted {}, decided {}, handed out {}, \
             followers' accepted {:?}",
            self.me,
            self.op.get_current_leader(),
            self.op.get_promise(),
            self.op.get_accepted_idx(),
            self.op.get_decided_idx(),
            self.applied,
            self.op.get_ui_states().cluster_state.accepted_indexes
        )
    }

    pub fn log(&self) -> &LogHandle<T, P> {
        &self.log
    }

    fn guard<R>(&mut self, f: impl FnOnce(&mut OmniPaxos<T, LogHandle<T, P>>) -> R) -> Result<R> {
        if let Some(why) = &self.failed {
            return Err(ReplicaError::Failed(why.clone()));
        }
        match catch_unwind(AssertUnwindSafe(|| f(&mut self.op))) {
            Ok(r) => Ok(r),
            Err(panic) => {
                let why = panic
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_else(|| "OmniPaxos panicked".to_owned());
                self.failed = Some(why.clone());
                Err(ReplicaError::Failed(why))
            }
        }
    }

    /// Propose `entry`; only the leader takes proposals (a follower answers
    /// [`ReplicaError::NotLeader`] so the client goes to the leader itself).
    /// The entry is decided, or lost with a leader change, later: the layer
    /// above recognizes its own entries among the decided ones.
    pub fn propose(&mut self, entry: T) -> Result<()> {
        if !self.is_leader() {
            return Err(ReplicaError::NotLeader {
                leader: self.leader(),
            });
        }
        match self.guard(|op| op.append(entry))? {
            Ok(()) => Ok(()),
            Err(_) => Err(ReplicaError::NotLeader {
                leader: self.leader(),
            }),
        }
    }

    /// Propose to end this configuration and go on with `nodes` as
    /// configuration `config_id` (larger than this one's); `metadata`
    /// travels with it (the layer above puts the new members' addresses
    /// there). Leader only. Once decided ([`Group::stopped`]), this group
    /// takes no more entries: the owner starts the next configuration's
    /// group, on a log of its own.
    pub fn reconfigure(
        &mut self,
        nodes: Vec<NodeId>,
        config_id: u32,
        metadata: Vec<u8>,
    ) -> Result<()> {
        if !self.is_leader() {
            return Err(ReplicaError::NotLeader {
                leader: self.leader(),
            });
        }
        let next = ClusterConfig {
            configuration_id: config_id,
            nodes,
            flexible_quorum: None,
        };
        match self.guard(|op| op.reconfigure(next, Some(metadata)))? {
            Ok(()) => Ok(()),
            Err(omnipaxos::ProposeErr::ConfigError(e, ..)) => {
                Err(ReplicaError::Config(e.to_string()))
            }
            Err(_) => Err(ReplicaError::Config(
                "this configuration is already being replaced".into(),
            )),
        }
    }

    /// The decided end of this configuration, if it has one: the next
    /// configuration and its metadata.
    pub fn stopped(&self) -> Option<omnipaxos::storage::StopSign> {
        self.op.is_reconfigured()
    }

    /// A message from another replica.
    ///
    /// One repair of OmniPaxos 0.2.4's leader election: a replica that
    /// promised its own ballot, crashed before the others heard of it, and
    /// came back while another replica won an election with a lower ballot of
    /// the same number (ties are broken by node id) refuses that leader's
    /// Prepare forever (as Paxos must: its promise is higher) while its
    /// election module, seeing the others content, never starts an election.
    /// It would stay behind for good (the simulator found this). After a few
    /// refused Prepares in a row it stands for election with a higher ballot,
    /// which the others can accept. The same when the leader sends no
    /// Prepare at all (it ignores a request for a round above its own): after
    /// a few heartbeats in a row from a leader whose round is below this
    /// replica's promise.
    pub fn handle(&mut self, msg: Message<T>) -> Result<()> {
        if self.needs_trimmed_entries(&msg) {
            // Answering would need entries this log no longer has: the
            // message is stale (sent before the log was trimmed or before
            // this replica installed a snapshot). Not answering is always
            // safe; the sender asks again with its current state.
            return Ok(());
        }
        if let Message::SequencePaxos(pm) = &msg
            && let PaxosMsg::Prepare(p) = &pm.msg
        {
            if p.n < self.op.get_promise() {
                self.refused += 1;
            } else {
                self.refused = 0;
            }
        }
        if let Message::BLE(b) = &msg
            && let omnipaxos::messages::ballot_leader_election::HeartbeatMsg::Reply(r) = &b.msg
            && r.leader == r.ballot
            && r.leader.pid == b.from
            && r.leader.pid != self.me
        {
            // The sender leads in round `r.leader`; if this replica promised
            // a higher round it cannot follow it, and the leader will not
            // send it a Prepare (it ignores requests for rounds above its
            // own): the replica would stay behind for good.
            if r.leader < self.op.get_promise() {
                self.behind_leader += 1;
            } else {
                self.behind_leader = 0;
            }
        }
        self.guard(|op| op.handle_incoming(msg))?;
        if self.refused >= 3 || self.behind_leader >= 5 {
            self.refused = 0;
            self.behind_leader = 0;
            self.guard(|op| op.try_become_leader())?;
        }
        Ok(())
    }

    /// OmniPaxos would answer `msg` with (or, at a leader, sync the sender
    /// from) entries below this log's compacted index, which it cannot
    /// read: a follower more up to date than a Prepare's sender sends its
    /// entries from the sender's decided or accepted index; a leader syncs a
    /// promising follower from at least its decided index.
    fn needs_trimmed_entries(&self, msg: &Message<T>) -> bool {
        let Message::SequencePaxos(pm) = msg else {
            return false;
        };
        let compacted = self.op.get_compacted_idx();
        if compacted == 0 {
            return false;
        }
        match &pm.msg {
            PaxosMsg::Prepare(p) => {
                let na = self.log.accepted_round().unwrap_or_default();
                let from = if na > p.n_accepted {
                    Some(p.decided_idx)
                } else if na == p.n_accepted && self.op.get_accepted_idx() > p.accepted_idx {
                    Some(p.accepted_idx)
                } else {
                    None
                };
                from.is_some_and(|f| f < compacted)
            }
            PaxosMsg::Promise(p) => self.is_leader() && p.decided_idx < compacted,
            _ => false,
        }
    }

    pub fn tick(&mut self) -> Result<()> {
        self.guard(|op| op.tick())
    }

    /// The link to `peer` was down and is up again (lost messages are
    /// resent from the sessions' sequence numbers).
    pub fn reconnected(&mut self, peer: NodeId) -> Result<()> {
        self.guard(|op| op.reconnected(peer))
    }

    /// Sync the log; then the messages to send, each entry in them expanded
    /// for another replica, and the entries decided since the last call
    /// (appended to `decided`).
    pub fn ready(&mut self, decided: &mut Vec<Decided<T>>) -> Result<Vec<Message<T>>> {
        if let Some(why) = &self.failed {
            return Err(ReplicaError::Failed(why.clone()));
        }
        if let Err(e) = self.log.sync() {
            self.failed = Some(e.to_string());
            return Err(e);
        }
        let mut out = std::mem::take(&mut self.held);
        self.guard(|op| op.take_outgoing_messages(&mut out))?;
        // A sync too large to ship (measured before reading any data) goes
        // unsent; the owner catches that follower up another way.
        let limit = self.max_sync_bytes;
        let log = &self.log;
        let too_far = &mut self.too_far_behind;
        out.retain(|m| {
            let Message::SequencePaxos(pm) = m else {
                return true;
            };
            let PaxosMsg::AcceptSync(a) = &pm.msg else {
                return true;
            };
            let bytes: u64 = a.log_sync.suffix.iter().map(|e| log.expanded_len(e)).sum();
            if bytes <= limit {
                return true;
            }
            if !too_far.contains(&pm.to) {
                too_far.push(pm.to);
            }
            false
        });
        for m in &mut out {
            if let Err(e) = expand_message(&self.log, m) {
                let why = format!("reading a payload to send: {e}");
                self.failed = Some(why.clone());
                return Err(ReplicaError::Failed(why));
            }
        }
        self.hand_out(decided, usize::MAX)?;
        Ok(out)
    }

    /// Hand out the decided entries from `applied` on, below `limit`.
    fn hand_out(&mut self, decided: &mut Vec<Decided<T>>, limit: usize) -> Result<()> {
        let from = self.applied;
        let to = self.op.get_decided_idx().min(limit);
        if to > from {
            let suffix = self.guard(|op| op.read_decided_suffix(from))?;
            for (i, e) in suffix.into_iter().flatten().take(to - from).enumerate() {
                let idx = from + i;
                match e {
                    LogEntry::Decided(t) => decided.push((idx, t)),
                    // Entries below the compacted index were applied
                    // before they were trimmed; a stop sign ends the
                    // configuration (membership changes build on it).
                    LogEntry::Trimmed(_)
                    | LogEntry::Snapshotted(_)
                    | LogEntry::StopSign(..)
                    | LogEntry::Undecided(_) => {}
                }
                self.applied = idx + 1;
            }
        }
        Ok(())
    }

    /// What may leave before this turn's sync (see the module comment):
    /// a leader's accept requests and decisions, with their payloads
    /// expanded, and into `decided` the decided entries that are on disk
    /// here as they are in memory (decided in this turn, accepted in an
    /// earlier one: the state machine need not wait for this turn's sync
    /// to apply them). The owner sends and applies these, then calls
    /// [`Group::ready`] in the same turn (which syncs and hands out the
    /// rest). A message to a replica that also has one waiting for the
    /// sync, and everything to it after that, waits too (each link stays in
    /// order).
    pub fn take_early(&mut self, decided: &mut Vec<Decided<T>>) -> Result<Vec<Message<T>>> {
        if let Some(why) = &self.failed {
            return Err(ReplicaError::Failed(why.clone()));
        }
        let stable = self.log.stable_len();
        self.hand_out(decided, stable)?;
        let mut out = Vec::new();
        self.guard(|op| op.take_outgoing_messages(&mut out))?;
        let mut early = Vec::new();
        let mut waiting: Vec<NodeId> = self.held.iter().map(|m| m.get_receiver()).collect();
        for m in out {
            let to = m.get_receiver();
            let accept = matches!(
                &m,
                Message::SequencePaxos(pm)
                    if matches!(pm.msg, PaxosMsg::AcceptDecide(_) | PaxosMsg::Decide(_))
            );
            if accept && !waiting.contains(&to) {
                early.push(m);
            } else {
                waiting.push(to);
                self.held.push(m);
            }
        }
        for m in &mut early {
            if let Err(e) = expand_message(&self.log, m) {
                let why = format!("reading a payload to send: {e}");
                self.failed = Some(why.clone());
                return Err(ReplicaError::Failed(why));
            }
        }
        Ok(early)
    }

    /// Followers this leader could not sync by the log since the last call
    /// (their sync would carry more than `max_sync_bytes`).
    pub fn take_too_far_behind(&mut self) -> Vec<NodeId> {
        std::mem::take(&mut self.too_far_behind)
    }

    /// Drop the log's entries below `idx` here and at every other replica
    /// (only the leader trims, and only what every replica accepted:
    /// OmniPaxos refuses otherwise, and this returns false). The caller
    /// makes sure every replica's state machine has those entries durably
    /// applied: a trimmed entry is never handed out again.
    pub fn trim(&mut self, idx: usize) -> Result<bool> {
        Ok(self.guard(|op| op.trim(Some(idx)))?.is_ok())
    }
}

/// Replace every entry of an outgoing message by its expanded form.
fn expand_message<T, P>(log: &LogHandle<T, P>, m: &mut Message<T>) -> std::io::Result<()>
where
    T: Entry + Serialize + DeserializeOwned,
    T::Snapshot: Serialize + DeserializeOwned,
    P: Payloads<T>,
{
    let Message::SequencePaxos(pm) = m else {
        return Ok(());
    };
    let entries: &mut Vec<T> = match &mut pm.msg {
        PaxosMsg::Promise(p) => match &mut p.log_sync {
            Some(s) => &mut s.suffix,
            None => return Ok(()),
        },
        PaxosMsg::AcceptSync(a) => &mut a.log_sync.suffix,
        PaxosMsg::AcceptDecide(a) => &mut a.entries,
        PaxosMsg::ProposalForward(es) => es,
        _ => return Ok(()),
    };
    for e in entries.iter_mut() {
        *e = log.expand(e)?;
    }
    Ok(())
}
