//! A node's driver thread: it owns every shard's replica, block map
//! position, file store and cleaner.
//!
//! Each turn it takes what arrived (messages from other nodes, client
//! requests), ticks the groups on time, then for each shard calls `ready`
//! (the log and the file store are synced there, once for everything the
//! turn did: group commit), sends the messages, applies the decided
//! operations to the block map and answers the clients whose operations
//! they were. Between turns it does the background work: checkpoints, trims,
//! segment cleaning, membership announcements.
//!
//! A node takes writes, deletes and global reads only for the shards it
//! leads; otherwise it answers `NotLeader` with the leader's client address.
//! An operation proposed by a leader that loses its leadership before the
//! operation is decided is answered `NotLeader` too: the client retries at
//! the new leader (the operation may still have been decided: a write
//! applied twice leaves the same blocks, unless another write to them came
//! between, which a client that waits for its answers never does).

use crate::block_map::{BlockMap, Position};
use crate::cleaner::Cleaner;
use crate::file_store::{FileStore, SharedStore};
use crate::membership::{self, Members};
use crate::node::{NodeConfig, NodeError, io_err, remove_dir};
use crate::op::{OpId, Payload, VolumeOp};
use crate::protocol::{REGION_BLOCKS, Request, Response, ShardState, VolumeInfo, shard_of};
use crate::snapshot::{SnapshotError, SnapshotHeader, SnapshotPlan};
use crossbeam_channel::{Receiver, Sender, bounded, select};
use serde::{Deserialize, Serialize};
use silt_replica::{Decided, Event, Group, GroupConfig, LogOptions, Message, NodeId, Transport};
use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

/// What travels between nodes.
#[derive(Serialize, Deserialize)]
pub enum Wire {
    /// A consensus message of a shard's configuration.
    Paxos {
        shard: u32,
        config: u32,
        msg: Message<VolumeOp>,
    },
    /// `node`'s block map holds the shard's log of `config` durably applied
    /// below `idx`: the leader trims the log to the lowest such index of
    /// all members.
    Durable {
        node: NodeId,
        shard: u32,
        config: u32,
        idx: u64,
    },
    /// The shard is at configuration `config` with these members
    /// ([`membership::encode`]): a member that is behind catches up, a node
    /// that is not a member stops serving the shard.
    Config {
        shard: u32,
        config: u32,
        members: String,
    },
    /// From the leader: the receiver is too far behind to be synced by the
    /// log; it installs a snapshot from the sender.
    CatchUp { shard: u32, config: u32 },
}

/// What the client threads hand the driver.
pub(crate) enum Cmd {
    Client(Request, Sender<Response>),
    Snapshot(u32, Sender<Result<SnapshotPlan, String>>),
}

type Installed = Result<(Position, String), SnapshotError>;

enum Replica {
    /// Replicating in the shard's configuration.
    Active(Box<Group<VolumeOp, SharedStore>>),
    /// A joining node that has not heard of its shard's configuration.
    Waiting,
    /// Installing a snapshot from another member.
    CatchingUp(Receiver<Installed>),
    /// Not a member of the shard's configuration.
    Left,
}

impl Replica {
    fn name(&self) -> &'static str {
        match self {
            Replica::Active(_) => "active",
            Replica::Waiting => "waiting",
            Replica::CatchingUp(_) => "catching up",
            Replica::Left => "left",
        }
    }
}

struct Waiter {
    reply: Sender<Response>,
    /// A global read's blocks, read when its barrier is applied.
    read: Option<(u64, u64)>,
}

struct Shard {
    id: u32,
    /// The configuration this node knows the shard at (0: none yet).
    config: u32,
    members: Members,
    replica: Replica,
    store: SharedStore,
    cleaner: Cleaner,
    waiting: HashMap<OpId, Waiter>,
    /// Clients waiting for a membership change to be applied.
    reconfiguring: Vec<Sender<Response>>,
    /// Each member's durable position in this configuration's log.
    durable: BTreeMap<NodeId, usize>,
    /// The log position the map was last checkpointed at.
    checkpointed: usize,
    /// When a message last came from each member (for local reads'
    /// staleness).
    heard: HashMap<NodeId, Instant>,
    /// The round promised when the waiting operations were proposed.
    round: (u32, u64),
    /// Snapshots installed since the node started.
    snapshots: u64,
}

impl Shard {
    fn group(&mut self) -> Option<&mut Group<VolumeOp, SharedStore>> {
        match &mut self.replica {
            Replica::Active(g) => Some(g),
            _ => None,
        }
    }

    fn group_ref(&self) -> Option<&Group<VolumeOp, SharedStore>> {
        match &self.replica {
            Replica::Active(g) => Some(g),
            _ => None,
        }
    }

    fn leader(&self) -> Option<NodeId> {
        self.group_ref().and_then(|g| g.leader())
    }

    fn leader_addr(&self) -> Option<SocketAddr> {
        self.members.get(&self.leader()?).map(|a| a.client)
    }

    /// How long ago this replica last knew itself up to date: a follower
    /// when it last heard from the leader; the leader when it last heard
    /// from enough members to make a majority with itself.
    fn staleness(&self, me: NodeId) -> Option<std::time::Duration> {
        let leader = self.leader()?;
        if leader != me {
            return self.heard.get(&leader).map(|t| t.elapsed());
        }
        let mut times: Vec<Instant> = self
            .members
            .keys()
            .filter(|n| **n != me)
            .filter_map(|n| self.heard.get(n).copied())
            .collect();
        times.sort_unstable_by(|a, b| b.cmp(a));
        let need = self.members.len() / 2; // others besides the leader
        if need == 0 {
            return Some(std::time::Duration::ZERO);
        }
        times.get(need - 1).map(|t| t.elapsed())
    }

    /// Answer every operation waiting on this replica.
    fn drop_waiting(&mut self, resp: Response) {
        for (_, w) in self.waiting.drain() {
            let _ = w.reply.send(resp.clone());
        }
    }
}

pub(crate) struct Driver {
    cfg: NodeConfig,
    map: Arc<BlockMap>,
    shards: Vec<Shard>,
    transport: Transport<Wire>,
    next_seq: u64,
}

impl Driver {
    /// Open every shard as the node's directory left it.
    pub(crate) fn open(
        cfg: NodeConfig,
        map: Arc<BlockMap>,
        mut transport: Transport<Wire>,
    ) -> Result<Driver, NodeError> {
        let mut shards = Vec::new();
        let provision = cfg.shard_provision();
        for s in 0..cfg.shards {
            let store = FileStore::open_with(
                &cfg.shard_dir(s).join("data"),
                cfg.mode,
                cfg.block_size,
                cfg.segment_bytes,
                provision,
            )
            .map_err(io_err(format!("opening the file store of shard {s}")))?;
            let mut shard = Shard {
                id: s,
                config: 0,
                members: Members::new(),
                replica: Replica::Waiting,
                store: SharedStore::new(store),
                cleaner: Cleaner::new(s, cfg.segment_bytes),
                waiting: HashMap::new(),
                reconfiguring: Vec::new(),
                durable: BTreeMap::new(),
                checkpointed: 0,
                heard: HashMap::new(),
                round: (0, 0),
                snapshots: 0,
            };
            let recorded = map.members(s)?;
            let pos = map.position(s)?;
            match (recorded, pos) {
                (Some((config, members)), pos) => {
                    shard.config = config;
                    shard.members = membership::parse(&[members]).map_err(|e| {
                        NodeError::Config(format!("the block map's members of shard {s}: {e}"))
                    })?;
                    let idx = pos.filter(|p| p.config == config).map_or(0, |p| p.idx);
                    if shard.members.contains_key(&cfg.id) {
                        crate::snapshot::finish_log(
                            &cfg.log_dir(s, config),
                            idx,
                            config,
                            log_options(&cfg),
                        )?;
                        shard.replica = Replica::Active(Box::new(open_group(&cfg, &shard, idx)?));
                        shard.checkpointed = idx;
                    } else {
                        shard.replica = Replica::Left;
                    }
                }
                (None, _) if cfg.join => {}
                (None, _) => {
                    // A new volume: configuration 1 of the given nodes.
                    if cfg.nodes.len() < 2 {
                        return Err(NodeError::Config(
                            "a new volume needs at least two nodes (or --join an existing one)"
                                .into(),
                        ));
                    }
                    shard.config = 1;
                    shard.members = cfg.nodes.clone();
                    map.set_position(
                        s,
                        Position { config: 1, idx: 0 },
                        &membership::encode(&shard.members),
                    )?;
                    shard.replica = Replica::Active(Box::new(open_group(&cfg, &shard, 0)?));
                }
            }
            for (id, a) in &shard.members {
                transport.add_peer(*id, a.replica)?;
            }
            shards.push(shard);
        }
        let seq0 = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        Ok(Driver {
            cfg,
            map,
            shards,
            transport,
            next_seq: seq0,
        })
    }

    pub(crate) fn run(
        &mut self,
        inbox: Receiver<Event<Wire>>,
        commands: Receiver<Cmd>,
        stop: Arc<AtomicBool>,
    ) {
        let mut next_tick = Instant::now() + self.cfg.tick;
        let mut next_checkpoint = Instant::now() + self.cfg.checkpoint_every;
        while !stop.load(Ordering::Acquire) {
            let wait = next_tick.saturating_duration_since(Instant::now());
            select! {
                recv(inbox) -> ev => if let Ok(ev) = ev { self.on_event(ev) },
                recv(commands) -> c => if let Ok(c) = c { self.on_command(c) },
                default(wait) => {},
            }
            // Take everything else that is waiting before syncing once.
            for _ in 0..1024 {
                match inbox.try_recv() {
                    Ok(ev) => self.on_event(ev),
                    Err(_) => break,
                }
            }
            for _ in 0..1024 {
                match commands.try_recv() {
                    Ok(c) => self.on_command(c),
                    Err(_) => break,
                }
            }
            if Instant::now() >= next_tick {
                next_tick = Instant::now() + self.cfg.tick;
                for s in &mut self.shards {
                    if let Some(g) = s.group() {
                        let _ = g.tick();
                    }
                }
            }
            let due = Instant::now() >= next_checkpoint;
            if due {
                next_checkpoint = Instant::now() + self.cfg.checkpoint_every;
            }
            let mut result = Ok(());
            for i in 0..self.shards.len() {
                result = self.turn(i);
                if result.is_err() {
                    break;
                }
            }
            if result.is_ok() {
                result = self.maintain(due);
            }
            if let Err(e) = result {
                // Fail-stop: a replica whose log or map cannot be written
                // must not go on; restarting it recovers.
                tracing::error!(node = self.cfg.id, error = %e, "volume node stops");
                eprintln!("silt volume node {}: {e}", self.cfg.id);
                stop.store(true, Ordering::Release);
            }
        }
        let _ = self.map.close();
    }

    fn on_event(&mut self, ev: Event<Wire>) {
        let (from, msg) = match ev {
            Event::Message { from, msg } => (from, msg),
            Event::Reconnected(peer) => {
                for s in &mut self.shards {
                    if let Some(g) = s.group() {
                        let _ = g.reconnected(peer);
                    }
                }
                return;
            }
        };
        match msg {
            Wire::Paxos { shard, config, msg } => {
                let Some(s) = self.shards.get_mut(shard as usize) else {
                    return;
                };
                if config == s.config && s.members.contains_key(&from) {
                    s.heard.insert(from, Instant::now());
                    if let Some(g) = s.group() {
                        let _ = g.handle(msg);
                    }
                } else if config < s.config && s.config > 0 {
                    // A replica left behind in an older configuration.
                    let members = membership::encode(&s.members);
                    let config = s.config;
                    self.transport.send(
                        from,
                        Wire::Config {
                            shard,
                            config,
                            members,
                        },
                    );
                }
            }
            Wire::Durable {
                node,
                shard,
                config,
                idx,
            } => {
                if let Some(s) = self.shards.get_mut(shard as usize)
                    && s.config == config
                {
                    s.durable.insert(node, idx as usize);
                }
            }
            Wire::CatchUp { shard, config } => {
                if let Err(e) = self.catch_up_now(shard, config, from) {
                    tracing::warn!(node = self.cfg.id, shard, error = %e, "could not start catching up");
                }
            }
            Wire::Config {
                shard,
                config,
                members,
            } => {
                if let Err(e) = self.learn_config(shard, config, &members, from) {
                    tracing::warn!(node = self.cfg.id, shard, error = %e, "ignoring an announced configuration");
                }
            }
        }
    }

    /// Another node says `shard` is at `config`: if that is newer than what
    /// this node has, catch up by snapshot (a member) or stop serving it.
    fn learn_config(
        &mut self,
        shard: u32,
        config: u32,
        members: &str,
        from: NodeId,
    ) -> Result<(), NodeError> {
        let me = self.cfg.id;
        let Some(s) = self.shards.get_mut(shard as usize) else {
            return Ok(());
        };
        if config <= s.config || matches!(s.replica, Replica::CatchingUp(_)) {
            return Ok(());
        }
        let parsed = membership::parse(&[members]).map_err(NodeError::Config)?;
        for (id, a) in &parsed {
            self.transport.add_peer(*id, a.replica)?;
        }
        s.drop_waiting(Response::Retry(format!(
            "shard {shard}'s membership changed; try again"
        )));
        s.config = config;
        s.members = parsed.clone();
        s.durable.clear();
        s.replica = Replica::Left;
        if !parsed.contains_key(&me) {
            tracing::info!(node = me, shard, config, "not a member any more");
            return Ok(());
        }
        // The announcer if it is a member (a node that left also tells
        // stragglers of the change), else another member.
        let Some(source) = parsed
            .get(&from)
            .or_else(|| parsed.iter().find(|(id, _)| **id != me).map(|(_, a)| a))
            .map(|a| a.client)
        else {
            return Ok(());
        };
        self.start_catch_up(shard, source, None)
    }

    /// The leader says this replica is too far behind for its log: install
    /// a snapshot from it, keeping the round promised.
    fn catch_up_now(&mut self, shard: u32, config: u32, from: NodeId) -> Result<(), NodeError> {
        let Some(s) = self.shards.get_mut(shard as usize) else {
            return Ok(());
        };
        if s.config != config {
            return Ok(());
        }
        let Some(source) = s.members.get(&from).map(|a| a.client) else {
            return Ok(());
        };
        let Some(g) = s.group_ref() else {
            return Ok(());
        };
        let promise = g.log().promise();
        s.drop_waiting(Response::Retry(format!(
            "this replica of shard {shard} is catching up; try the leader"
        )));
        self.start_catch_up(shard, source, promise)
    }

    /// Install `shard`'s snapshot from the node whose client address is
    /// `source`, on a thread; [`Driver::turn`] picks up the result.
    fn start_catch_up(
        &mut self,
        shard: u32,
        source: SocketAddr,
        promise: Option<silt_replica::Ballot>,
    ) -> Result<(), NodeError> {
        let me = self.cfg.id;
        let s = &mut self.shards[shard as usize];
        let config = s.config;
        tracing::info!(node = me, shard, config, %source, "catching up by snapshot");
        let (tx, rx) = bounded(1);
        let target = crate::snapshot::Target {
            shard,
            shards: self.cfg.shards,
            blocks: self.cfg.blocks,
        };
        let map = self.map.clone();
        let store = s.store.clone();
        let dir = self.cfg.log_dir(shard, config);
        let log = log_options(&self.cfg);
        std::thread::Builder::new()
            .name(format!("volume-{me}-catch-up-{shard}"))
            .spawn(move || {
                let _ = tx.send(crate::snapshot::install(
                    source, target, &map, &store, &dir, promise, log,
                ));
            })
            .map_err(io_err("starting a thread"))?;
        // The replica of the old state stops here (its log stays until the
        // new one is in place).
        s.replica = Replica::CatchingUp(rx);
        Ok(())
    }

    fn on_command(&mut self, c: Cmd) {
        match c {
            Cmd::Client(req, reply) => self.on_request(req, reply),
            Cmd::Snapshot(shard, reply) => {
                let _ = reply.send(self.plan_snapshot(shard));
            }
        }
    }

    /// List `shard`'s blocks for a replica catching up (see
    /// [`crate::snapshot`]).
    fn plan_snapshot(&mut self, shard: u32) -> Result<SnapshotPlan, String> {
        let s = self
            .shards
            .get(shard as usize)
            .ok_or_else(|| format!("there is no shard {shard}"))?;
        let Some(g) = s.group_ref() else {
            return Err(format!(
                "this node does not serve shard {shard} ({})",
                s.replica.name()
            ));
        };
        let idx = g.applied_idx();
        let pin = s.cleaner.pin();
        let mut places = Vec::new();
        self.map
            .for_each(shard, |b, p| places.push((b, p)))
            .map_err(|e| e.to_string())?;
        Ok(SnapshotPlan {
            header: SnapshotHeader {
                shard,
                config: s.config,
                idx: idx as u64,
                members: membership::encode(&s.members),
                block_size: self.cfg.block_size,
                blocks: places.len() as u64,
                sessions: self.map.sessions(shard).map_err(|e| e.to_string())?,
            },
            places,
            dir: s.store.lock().dir().to_path_buf(),
            pin,
        })
    }

    fn check_range(&self, first: u64, count: u64) -> Result<u32, String> {
        if count == 0 {
            return Err("zero blocks".into());
        }
        let end = first
            .checked_add(count)
            .filter(|e| *e <= self.cfg.blocks)
            .ok_or_else(|| {
                format!(
                    "blocks {first}..+{count} are past the end of the volume ({} blocks)",
                    self.cfg.blocks
                )
            })?;
        if first / REGION_BLOCKS != (end - 1) / REGION_BLOCKS {
            return Err(format!(
                "blocks {first}..{end} cross a region of {REGION_BLOCKS} blocks (split the request)"
            ));
        }
        Ok(shard_of(first, self.cfg.shards))
    }

    fn info(&self) -> VolumeInfo {
        VolumeInfo {
            node: self.cfg.id,
            block_size: self.cfg.block_size,
            blocks: self.cfg.blocks,
            shards: self.cfg.shards,
            leaders: self.shards.iter().map(|s| s.leader()).collect(),
            decided: self
                .shards
                .iter()
                .map(|s| s.group_ref().map_or(0, |g| g.decided_idx() as u64))
                .collect(),
            shard_state: self.shards.iter().map(shard_state).collect(),
        }
    }

    fn on_request(&mut self, req: Request, reply: Sender<Response>) {
        let bs = self.cfg.block_size as u64;
        // What to propose: (shard, operation, the blocks a global read returns).
        let planned = match req {
            Request::Info => {
                let _ = reply.send(Response::Info(self.info()));
                return;
            }
            Request::ReadLocal {
                first,
                count,
                max_stale_ms,
            } => {
                let _ = reply.send(self.read_local(first, count, max_stale_ms));
                return;
            }
            Request::Snapshot { .. } => {
                let _ = reply.send(Response::Error(
                    "a snapshot is streamed by the connection, not answered".into(),
                ));
                return;
            }
            Request::Reconfigure { shard, members } => {
                self.reconfigure(shard, &members, reply);
                return;
            }
            Request::Write { first, data, id } => {
                if data.is_empty() || !(data.len() as u64).is_multiple_of(bs) {
                    Err(format!(
                        "a write of {} bytes is not whole blocks of {bs}",
                        data.len()
                    ))
                } else {
                    self.check_range(first, data.len() as u64 / bs)
                        .map(|shard| {
                            let data = Payload::Inline(data);
                            (
                                shard,
                                VolumeOp::Write {
                                    id: self.client_id(id),
                                    first,
                                    data,
                                },
                                None,
                            )
                        })
                }
            }
            Request::Delete { first, count, id } => self.check_range(first, count).map(|shard| {
                (
                    shard,
                    VolumeOp::Delete {
                        id: self.client_id(id),
                        first,
                        count,
                    },
                    None,
                )
            }),
            Request::ReadGlobal { first, count } => self.check_range(first, count).map(|shard| {
                (
                    shard,
                    VolumeOp::Barrier { id: self.id() },
                    Some((first, count)),
                )
            }),
        };
        let (shard, op, read) = match planned {
            Ok(p) => p,
            Err(e) => {
                let _ = reply.send(Response::Error(e));
                return;
            }
        };
        let id = op.id();
        let s = &mut self.shards[shard as usize];
        let leader = s.leader_addr();
        let Some(g) = s.group() else {
            let _ = reply.send(Response::NotLeader { leader: None });
            return;
        };
        match g.propose(op) {
            Ok(()) => {
                s.waiting.insert(id, Waiter { reply, read });
            }
            Err(silt_replica::ReplicaError::NotLeader { .. }) => {
                let _ = reply.send(Response::NotLeader { leader });
            }
            Err(e) => {
                let _ = reply.send(Response::Error(e.to_string()));
            }
        }
    }

    /// Propose `shard`'s next configuration (leader only).
    fn reconfigure(&mut self, shard: u32, members: &str, reply: Sender<Response>) {
        let Some(s) = self.shards.get_mut(shard as usize) else {
            let _ = reply.send(Response::Error(format!("there is no shard {shard}")));
            return;
        };
        let parsed = match membership::parse(&[members]) {
            Ok(m) if m.len() >= 2 => m,
            Ok(_) => {
                let _ = reply.send(Response::Error("a shard needs at least two members".into()));
                return;
            }
            Err(e) => {
                let _ = reply.send(Response::Error(format!("members: {e}")));
                return;
            }
        };
        if parsed == s.members {
            let _ = reply.send(Response::Done);
            return;
        }
        let leader = s.leader_addr();
        let next = s.config + 1;
        let Some(g) = s.group() else {
            let _ = reply.send(Response::NotLeader { leader: None });
            return;
        };
        let encoded = membership::encode(&parsed);
        match g.reconfigure(parsed.keys().copied().collect(), next, encoded.into_bytes()) {
            Ok(()) => s.reconfiguring.push(reply),
            Err(silt_replica::ReplicaError::NotLeader { .. }) => {
                let _ = reply.send(Response::NotLeader { leader });
            }
            Err(e) => {
                let _ = reply.send(Response::Error(e.to_string()));
            }
        }
    }

    /// A client's own id for its operation, if it sent a valid one.
    fn client_id(&mut self, id: Option<OpId>) -> OpId {
        match id {
            Some(id) if id.session().is_some() => id,
            _ => self.id(),
        }
    }

    fn id(&mut self) -> OpId {
        self.next_seq += 1;
        OpId {
            node: self.cfg.id,
            seq: self.next_seq,
        }
    }

    fn read_local(&self, first: u64, count: u64, max_stale_ms: Option<u64>) -> Response {
        let shard = match self.check_range(first, count) {
            Ok(s) => s,
            Err(e) => return Response::Error(e),
        };
        let stale_ms = self.shards[shard as usize]
            .staleness(self.cfg.id)
            .map(|d| d.as_millis() as u64);
        if let Some(max) = max_stale_ms
            && stale_ms.is_none_or(|s| s > max)
        {
            return Response::Stale { stale_ms };
        }
        match self.read_blocks(shard, first, count) {
            Ok(data) => Response::Data { data, stale_ms },
            Err(e) => Response::Error(e),
        }
    }

    fn read_blocks(&self, shard: u32, first: u64, count: u64) -> Result<Vec<u8>, String> {
        let bs = self.cfg.block_size as usize;
        let s = &self.shards[shard as usize];
        if s.group_ref().is_none() {
            return Err(format!(
                "this node does not serve shard {shard} now ({})",
                s.replica.name()
            ));
        }
        let mut out = vec![0u8; bs * count as usize];
        for i in 0..count {
            let Some(place) = self
                .map
                .place(shard, first + i)
                .map_err(|e| e.to_string())?
            else {
                continue;
            };
            let data = s
                .store
                .lock()
                .read(&place)
                .map_err(|e| format!("reading block {}: {e}", first + i))?;
            if data.len() != bs {
                return Err(format!(
                    "block {} has {} bytes in the map, not {bs}",
                    first + i,
                    data.len()
                ));
            }
            let at = i as usize * bs;
            out[at..at + bs].copy_from_slice(&data);
        }
        Ok(out)
    }

    /// Apply decided entries of shard `i` to the block map and answer the
    /// requests waiting for them.
    fn apply_decided(&mut self, i: usize, decided: &[Decided<VolumeOp>]) -> Result<(), NodeError> {
        if decided.is_empty() {
            return Ok(());
        }
        let shard = i as u32;
        let s = &self.shards[i];
        {
            let mut store = s.store.lock();
            self.map.apply(shard, s.config, decided, &mut store)?;
        }
        for (_, op) in decided {
            let Some(w) = self.shards[i].waiting.remove(&op.id()) else {
                continue;
            };
            let resp = match w.read {
                Some((first, count)) => match self.read_blocks(shard, first, count) {
                    Ok(data) => Response::Data {
                        data,
                        stale_ms: Some(0),
                    },
                    Err(e) => Response::Error(e),
                },
                None => Response::Done,
            };
            let _ = w.reply.send(resp);
        }
        Ok(())
    }

    /// One shard's turn: sync, send, apply, answer; a decided change of
    /// members, or a finished snapshot, moves the shard to its next
    /// configuration.
    fn turn(&mut self, i: usize) -> Result<(), NodeError> {
        let shard = i as u32;
        if let Replica::CatchingUp(rx) = &self.shards[i].replica {
            match rx.try_recv() {
                Ok(Ok((pos, members))) => self.caught_up(i, pos, &members)?,
                Ok(Err(e)) => {
                    // Try again when the next announcement comes (the
                    // configuration counts as unknown until then).
                    tracing::warn!(node = self.cfg.id, shard, error = %e, "catching up failed");
                    let s = &mut self.shards[i];
                    s.config = 0;
                    s.replica = Replica::Waiting;
                }
                Err(_) => {}
            }
            return Ok(());
        }
        let config = self.shards[i].config;
        let Some(g) = self.shards[i].group() else {
            return Ok(());
        };
        // A leader's accept requests go out first: the followers write
        // while this replica syncs its own copy. What was decided and is
        // already on disk here is applied and answered before the sync too.
        let mut decided: Vec<Decided<VolumeOp>> = Vec::new();
        for msg in g.take_early(&mut decided)? {
            let to = msg.get_receiver();
            self.transport.send(to, Wire::Paxos { shard, config, msg });
        }
        self.apply_decided(i, &decided)?;
        decided.clear();
        let Some(g) = self.shards[i].group() else {
            return Ok(());
        };
        let out = g.ready(&mut decided)?;
        for to in g.take_too_far_behind() {
            self.transport.send(to, Wire::CatchUp { shard, config });
        }
        for msg in out {
            let to = msg.get_receiver();
            self.transport.send(to, Wire::Paxos { shard, config, msg });
        }
        self.apply_decided(i, &decided)?;
        let s = &mut self.shards[i];
        if let Some(ss) = s.group_ref().and_then(|g| g.stopped()) {
            let members = ss
                .metadata
                .as_deref()
                .and_then(|m| std::str::from_utf8(m).ok())
                .ok_or_else(|| NodeError::Config("a stop sign without members".into()))?
                .to_owned();
            self.switch_config(i, ss.next_config.configuration_id, &members)?;
            return Ok(());
        }
        // Operations a replica took as leader and can no longer decide: it
        // lost the leadership, or won it again in a new round (what it
        // proposed in the old one may have been replaced). The client
        // retries; a retry of an operation that was decided after all is
        // applied once (client sessions).
        let leader = s.leader_addr();
        let Some(g) = s.group_ref() else {
            return Ok(());
        };
        let round = g.promised_round();
        if !g.is_leader() && !s.waiting.is_empty() {
            s.drop_waiting(Response::NotLeader { leader });
        } else if round != s.round && !s.waiting.is_empty() {
            s.drop_waiting(Response::Retry(
                "the leader changed rounds; try again".into(),
            ));
        }
        s.round = round;
        Ok(())
    }

    /// This replica applied the decided end of its configuration: go on in
    /// the next one (a member) or stop serving the shard.
    fn switch_config(&mut self, i: usize, config: u32, members: &str) -> Result<(), NodeError> {
        let me = self.cfg.id;
        let shard = i as u32;
        let parsed = membership::parse(&[members]).map_err(NodeError::Config)?;
        // The new position is durable before the new log exists.
        self.map
            .set_position(shard, Position { config, idx: 0 }, members)?;
        self.map.checkpoint()?;
        for (id, a) in &parsed {
            self.transport.add_peer(*id, a.replica)?;
        }
        let s = &mut self.shards[i];
        s.drop_waiting(Response::Retry(format!(
            "shard {shard}'s membership changed; try again"
        )));
        s.config = config;
        s.members = parsed;
        s.durable.clear();
        s.checkpointed = 0;
        s.replica = Replica::Left;
        remove_old_logs(&self.cfg, shard, config);
        if s.members.contains_key(&me) {
            let g = open_group(&self.cfg, s, 0)?;
            s.replica = Replica::Active(Box::new(g));
        }
        tracing::info!(
            node = me,
            shard,
            config,
            mode = s.replica.name(),
            "new configuration"
        );
        for r in s.reconfiguring.drain(..) {
            let _ = r.send(Response::Done);
        }
        Ok(())
    }

    /// A snapshot was installed: replicate from its position on.
    fn caught_up(&mut self, i: usize, pos: Position, members: &str) -> Result<(), NodeError> {
        let parsed = membership::parse(&[members]).map_err(NodeError::Config)?;
        let s = &mut self.shards[i];
        s.config = pos.config;
        s.members = parsed;
        s.durable.clear();
        s.checkpointed = pos.idx;
        s.snapshots += 1;
        crate::snapshot::promote(&self.cfg.log_dir(i as u32, pos.config))
            .map_err(io_err("putting a snapshot's log in place"))?;
        let g = open_group(&self.cfg, s, pos.idx)?;
        s.replica = Replica::Active(Box::new(g));
        remove_old_logs(&self.cfg, i as u32, pos.config);
        tracing::info!(
            node = self.cfg.id,
            shard = i,
            config = pos.config,
            idx = pos.idx,
            "caught up by snapshot"
        );
        Ok(())
    }

    /// Background work between turns: every `checkpoint_every`, checkpoint
    /// the block map, tell the other members how far it is durable and what
    /// the configuration is, and (at a leader) trim the log below what every
    /// member has durably applied; every turn, a bounded step of segment
    /// cleaning.
    fn maintain(&mut self, checkpoint_due: bool) -> Result<(), NodeError> {
        if checkpoint_due {
            let applied: Vec<Option<usize>> = self
                .shards
                .iter()
                .map(|s| s.group_ref().map(|g| g.applied_idx()))
                .collect();
            let moved = self
                .shards
                .iter()
                .zip(&applied)
                .any(|(s, a)| a.is_some_and(|a| a != s.checkpointed) || s.cleaner.busy());
            if moved {
                self.map.checkpoint()?;
                for (s, a) in self.shards.iter_mut().zip(&applied) {
                    if let Some(a) = a {
                        s.checkpointed = *a;
                    }
                    s.cleaner.checkpointed();
                }
            }
            let me = self.cfg.id;
            for s in &mut self.shards {
                if s.group_ref().is_none() {
                    continue;
                }
                let idx = s.checkpointed;
                s.durable.insert(me, idx);
                let members = membership::encode(&s.members);
                for p in s.members.keys().filter(|n| **n != me) {
                    self.transport.send(
                        *p,
                        Wire::Durable {
                            node: me,
                            shard: s.id,
                            config: s.config,
                            idx: idx as u64,
                        },
                    );
                    self.transport.send(
                        *p,
                        Wire::Config {
                            shard: s.id,
                            config: s.config,
                            members: members.clone(),
                        },
                    );
                }
                // A member not heard from counts as having nothing.
                let low = s
                    .members
                    .keys()
                    .map(|n| s.durable.get(n).copied().unwrap_or(0))
                    .min()
                    .unwrap_or(0);
                if let Some(g) = s.group()
                    && g.is_leader()
                    && low > g.compacted_idx()
                {
                    g.trim(low)?;
                }
            }
        }
        let map = &self.map;
        for s in &mut self.shards {
            let Replica::Active(g) = &s.replica else {
                continue;
            };
            let log_sync = {
                let mut store = s.store.lock();
                s.cleaner.step(map, &mut store, checkpoint_due)?;
                store.needs_log_sync()
            };
            if log_sync {
                // The cleaner started a segment: the log's file takes the
                // records kept in the one before, so that it may be cleaned.
                g.log().sync_file()?;
            }
            if checkpoint_due && s.cleaner.busy() {
                // Deleting waits for the log to be trimmed past the entries
                // referring to a segment, which happens at checkpoints.
                let cleaner = &mut s.cleaner;
                let referenced = g.log().with_entries(|entries| cleaner.referenced(entries));
                let mut store = s.store.lock();
                cleaner
                    .delete_unreferenced(&referenced, &mut store)
                    .map_err(io_err("deleting a cleaned segment"))?;
            }
        }
        Ok(())
    }
}

/// Remove the logs of `shard`'s configurations other than `keep` (every
/// entry of an ended configuration is applied and checkpointed).
fn remove_old_logs(cfg: &NodeConfig, shard: u32, keep: u32) {
    let Ok(entries) = std::fs::read_dir(cfg.shard_dir(shard)) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(c) = name
            .to_str()
            .and_then(|n| n.strip_prefix("cfg-"))
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        if c != keep {
            remove_dir(&e.path());
        }
    }
}

fn log_options(cfg: &NodeConfig) -> LogOptions {
    LogOptions {
        fsync: cfg.fsync,
        ..LogOptions::default()
    }
}

/// The replica of `s`'s configuration, its state machine applied below
/// `applied`.
fn open_group(
    cfg: &NodeConfig,
    s: &Shard,
    applied: usize,
) -> Result<Group<VolumeOp, SharedStore>, NodeError> {
    let mut gc = GroupConfig::new(cfg.id, s.members.keys().copied().collect());
    gc.config_id = s.config;
    gc.log = log_options(cfg);
    gc.max_sync_bytes = cfg.max_sync_bytes;
    let (g, _) = Group::open(&cfg.log_dir(s.id, s.config), &gc, s.store.clone(), applied)?;
    Ok(g)
}

fn shard_state(s: &Shard) -> ShardState {
    let (data_bytes, segments) = s
        .store
        .lock()
        .segment_sizes()
        .map(|m| (m.values().sum(), m.len() as u64))
        .unwrap_or_default();
    let c = s.cleaner.stats();
    let g = s.group_ref();
    ShardState {
        config: s.config,
        members: membership::encode(&s.members),
        mode: s.replica.name().to_owned(),
        applied: g.map_or(0, |g| g.applied_idx() as u64),
        snapshots: s.snapshots,
        compacted: g.map_or(0, |g| g.compacted_idx() as u64),
        log_entries: g.map_or(0, |g| g.log().with_entries(|e| e.len() as u64)),
        data_bytes,
        segments,
        segments_deleted: c.segments_deleted,
        bytes_cleaned: c.bytes_copied,
    }
}
