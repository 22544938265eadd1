//! One Hydra node: a replica of every shard's group, their block maps and
//! file stores, the transport to the other nodes, and the client listener.
//!
//! One driver thread owns the replicas. Each turn it takes what arrived
//! (messages from other nodes, client requests), ticks the groups on time,
//! then for each shard calls `ready` (the log and the file store are synced
//! there, once for everything the turn did: group commit), sends the
//! messages, applies the decided operations to the block map and answers the
//! clients whose operations they were. Client connections have a thread each
//! and hand their requests to the driver.
//!
//! A node takes writes, deletes and global reads only for the shards it
//! leads; otherwise it answers `NotLeader` with the leader's client address.
//! An operation proposed by a leader that loses its leadership before the
//! operation is decided is answered `NotLeader` too: the client retries at
//! the new leader (the operation may still have been decided: a write
//! applied twice leaves the same blocks, unless another write to them came
//! between, which a client that waits for its answers never does).

use crate::block_map::{BlockMap, MapError};
use crate::cleaner::Cleaner;
use crate::file_store::{FileStore, Mode};
use crate::op::{OpId, Payload, VolumeOp};
use crate::protocol::{
    MAGIC, REGION_BLOCKS, Request, Response, ShardState, VolumeInfo, read_frame, shard_of,
    write_frame,
};
use crossbeam_channel::{Receiver, Sender, bounded, select, unbounded};
use serde::{Deserialize, Serialize};
use silt_replica::{Decided, Event, Group, GroupConfig, LogOptions, Message, NodeId, Transport};
use std::collections::{BTreeMap, HashMap};
use std::io::{BufReader, BufWriter, Read};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Where a node listens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NodeAddrs {
    /// Replication traffic from the other nodes.
    pub replica: SocketAddr,
    /// Clients ([`crate::client::VolumeClient`]).
    pub client: SocketAddr,
}

#[derive(Debug, Clone)]
pub struct NodeConfig {
    pub id: NodeId,
    pub dir: PathBuf,
    /// Every node of the volume, this one included.
    pub nodes: BTreeMap<NodeId, NodeAddrs>,
    pub shards: u32,
    pub block_size: u32,
    /// The volume's size in blocks.
    pub blocks: u64,
    /// The reference trick (the log keeps places) or the baseline (data).
    pub mode: Mode,
    /// fdatasync the log and the file store (off only in tests that do not
    /// crash the machine).
    pub fsync: bool,
    /// The groups' clock.
    pub tick: Duration,
    /// How often the block map is checkpointed (made durable), which lets
    /// the log be trimmed below it and cleaned segments be retired.
    pub checkpoint_every: Duration,
    /// Bytes per file store segment (the unit of cleaning).
    pub segment_bytes: u64,
}

impl NodeConfig {
    pub fn new(id: NodeId, dir: PathBuf, nodes: BTreeMap<NodeId, NodeAddrs>) -> NodeConfig {
        NodeConfig {
            id,
            dir,
            nodes,
            shards: 1,
            block_size: 4096,
            blocks: 1 << 18,
            mode: Mode::Reference,
            fsync: true,
            tick: Duration::from_millis(10),
            checkpoint_every: Duration::from_secs(5),
            segment_bytes: 256 << 20,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum NodeError {
    #[error("{0}")]
    Map(#[from] MapError),
    #[error("{0}")]
    Replica(#[from] silt_replica::ReplicaError),
    #[error("{what}: {source}")]
    Io {
        what: String,
        #[source]
        source: std::io::Error,
    },
    #[error("invalid node configuration: {0}")]
    Config(String),
}

/// What travels between nodes.
#[derive(Serialize, Deserialize)]
enum Wire {
    /// A shard's consensus message.
    Paxos(u32, Message<VolumeOp>),
    /// `node`'s block map holds the shard's log durably applied below
    /// `idx`: the leader trims the log to the lowest such index of all
    /// nodes.
    Durable { node: NodeId, shard: u32, idx: u64 },
}

struct Shard {
    group: Group<VolumeOp, FileStore>,
    waiting: HashMap<OpId, Waiter>,
    /// Each node's durable position in this shard's log, as last reported.
    durable: BTreeMap<NodeId, usize>,
    cleaner: Cleaner,
}

struct Waiter {
    reply: Sender<Response>,
    /// A global read's blocks, read when its barrier is applied.
    read: Option<(u64, u64)>,
}

/// A running node; dropping it stops it.
pub struct Node {
    stop: Arc<AtomicBool>,
    driver: Option<JoinHandle<()>>,
    client_addr: SocketAddr,
}

impl Node {
    pub fn start(cfg: NodeConfig) -> Result<Node, NodeError> {
        let me =
            cfg.nodes.get(&cfg.id).copied().ok_or_else(|| {
                NodeError::Config(format!("node {} is not among the nodes", cfg.id))
            })?;
        if cfg.nodes.len() < 2 {
            return Err(NodeError::Config(
                "a volume needs at least two nodes".into(),
            ));
        }
        if !cfg.block_size.is_power_of_two() || !(512..=65536).contains(&cfg.block_size) {
            return Err(NodeError::Config(format!(
                "block size {} is not a power of two from 512 to 65536",
                cfg.block_size
            )));
        }
        let map = BlockMap::open(&cfg.dir.join("map"), cfg.shards, cfg.block_size)?;
        let ids: Vec<NodeId> = cfg.nodes.keys().copied().collect();
        let mut shards = Vec::new();
        for s in 0..cfg.shards {
            let dir = cfg.dir.join(format!("shard-{s}"));
            let store = FileStore::open(
                &dir.join("data"),
                cfg.mode,
                cfg.block_size,
                cfg.segment_bytes,
            )
            .map_err(|e| NodeError::Io {
                what: format!("opening the file store of shard {s}"),
                source: e,
            })?;
            let mut gc = GroupConfig::new(cfg.id, ids.clone());
            gc.log = LogOptions {
                fsync: cfg.fsync,
                ..LogOptions::default()
            };
            let (group, _) = Group::open(&dir, &gc, store, map.applied(s)?)?;
            shards.push(Shard {
                group,
                waiting: HashMap::new(),
                durable: BTreeMap::new(),
                cleaner: Cleaner::new(s, cfg.segment_bytes),
            });
        }
        let (inbox_tx, inbox) = unbounded::<Event<Wire>>();
        let peers: HashMap<NodeId, SocketAddr> =
            cfg.nodes.iter().map(|(id, a)| (*id, a.replica)).collect();
        let transport = Transport::start(cfg.id, me.replica, &peers, inbox_tx)?;
        let listener = TcpListener::bind(me.client).map_err(|e| NodeError::Io {
            what: format!("listening for clients on {}", me.client),
            source: e,
        })?;
        let client_addr = listener.local_addr().map_err(|e| NodeError::Io {
            what: "reading the client address".into(),
            source: e,
        })?;
        let (req_tx, requests) = unbounded::<(Request, Sender<Response>)>();
        let stop = Arc::new(AtomicBool::new(false));
        {
            let stop = stop.clone();
            std::thread::Builder::new()
                .name(format!("volume-{}-clients", cfg.id))
                .spawn(move || accept_clients(listener, req_tx, stop))
                .map_err(|e| NodeError::Io {
                    what: "starting a thread".into(),
                    source: e,
                })?;
        }
        let seq0 = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        let checkpointed = shards.iter().map(|s| s.group.applied_idx()).collect();
        let mut driver = Driver {
            cfg,
            map,
            shards,
            transport,
            next_seq: seq0,
            checkpointed,
        };
        let stop2 = stop.clone();
        let handle = std::thread::Builder::new()
            .name("volume-driver".into())
            .spawn(move || driver.run(inbox, requests, stop2))
            .map_err(|e| NodeError::Io {
                what: "starting a thread".into(),
                source: e,
            })?;
        Ok(Node {
            stop,
            driver: Some(handle),
            client_addr,
        })
    }

    pub fn client_addr(&self) -> SocketAddr {
        self.client_addr
    }

    /// Stop the node and wait for its driver (the map is closed).
    pub fn stop(mut self) {
        self.stop_now();
    }

    fn stop_now(&mut self) {
        self.stop.store(true, Ordering::Release);
        let _ = TcpStream::connect_timeout(&self.client_addr, Duration::from_millis(100));
        if let Some(h) = self.driver.take() {
            let _ = h.join();
        }
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        self.stop_now();
    }
}

struct Driver {
    cfg: NodeConfig,
    map: BlockMap,
    shards: Vec<Shard>,
    transport: Transport<Wire>,
    next_seq: u64,
    /// Each shard's log position the map was last checkpointed at.
    checkpointed: Vec<usize>,
}

impl Driver {
    fn run(
        &mut self,
        inbox: Receiver<Event<Wire>>,
        requests: Receiver<(Request, Sender<Response>)>,
        stop: Arc<AtomicBool>,
    ) {
        let mut next_tick = Instant::now() + self.cfg.tick;
        let mut next_checkpoint = Instant::now() + self.cfg.checkpoint_every;
        while !stop.load(Ordering::Acquire) {
            let wait = next_tick.saturating_duration_since(Instant::now());
            select! {
                recv(inbox) -> ev => if let Ok(ev) = ev { self.on_event(ev) },
                recv(requests) -> r => if let Ok((req, reply)) = r { self.on_request(req, reply) },
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
                match requests.try_recv() {
                    Ok((req, reply)) => self.on_request(req, reply),
                    Err(_) => break,
                }
            }
            if Instant::now() >= next_tick {
                next_tick = Instant::now() + self.cfg.tick;
                for s in &mut self.shards {
                    let _ = s.group.tick();
                }
            }
            for i in 0..self.shards.len() {
                if let Err(e) = self.turn(i as u32) {
                    // Fail-stop: a replica whose log or map cannot be
                    // written must not go on; restarting it recovers.
                    tracing::error!(node = self.cfg.id, shard = i, error = %e, "volume node stops");
                    eprintln!("silt volume node {}: shard {i} failed: {e}", self.cfg.id);
                    stop.store(true, Ordering::Release);
                    break;
                }
            }
            let due = Instant::now() >= next_checkpoint;
            if due {
                next_checkpoint = Instant::now() + self.cfg.checkpoint_every;
            }
            if let Err(e) = self.maintain(due) {
                tracing::error!(node = self.cfg.id, error = %e, "volume node stops");
                eprintln!("silt volume node {}: maintenance failed: {e}", self.cfg.id);
                stop.store(true, Ordering::Release);
            }
        }
        let _ = self.map.close();
    }

    fn on_event(&mut self, ev: Event<Wire>) {
        match ev {
            Event::Message {
                msg: Wire::Paxos(shard, m),
                ..
            } => {
                if let Some(s) = self.shards.get_mut(shard as usize) {
                    let _ = s.group.handle(m);
                }
            }
            Event::Message {
                msg: Wire::Durable { node, shard, idx },
                ..
            } => {
                if let Some(s) = self.shards.get_mut(shard as usize) {
                    s.durable.insert(node, idx as usize);
                }
            }
            Event::Reconnected(peer) => {
                for s in &mut self.shards {
                    let _ = s.group.reconnected(peer);
                }
            }
        }
    }

    fn leader_addr(&self, shard: u32) -> Option<SocketAddr> {
        let leader = self.shards[shard as usize].group.leader()?;
        self.cfg.nodes.get(&leader).map(|a| a.client)
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

    fn on_request(&mut self, req: Request, reply: Sender<Response>) {
        let bs = self.cfg.block_size as u64;
        // What to propose: (shard, operation, the blocks a global read returns).
        let planned = match req {
            Request::Info => {
                let info = VolumeInfo {
                    node: self.cfg.id,
                    block_size: self.cfg.block_size,
                    blocks: self.cfg.blocks,
                    shards: self.cfg.shards,
                    leaders: self.shards.iter().map(|s| s.group.leader()).collect(),
                    decided: self
                        .shards
                        .iter()
                        .map(|s| s.group.decided_idx() as u64)
                        .collect(),
                    shard_state: self.shards.iter().map(shard_state).collect(),
                };
                let _ = reply.send(Response::Info(info));
                return;
            }
            Request::ReadLocal { first, count } => {
                let r = self
                    .check_range(first, count)
                    .and_then(|shard| self.read_blocks(shard, first, count));
                let _ = reply.send(match r {
                    Ok(data) => Response::Data { data, behind: 0 },
                    Err(e) => Response::Error(e),
                });
                return;
            }
            Request::Write { first, data } => {
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
                                    id: self.id(),
                                    first,
                                    data,
                                },
                                None,
                            )
                        })
                }
            }
            Request::Delete { first, count } => self.check_range(first, count).map(|shard| {
                (
                    shard,
                    VolumeOp::Delete {
                        id: self.id(),
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
        let leader = self.leader_addr(shard);
        let s = &mut self.shards[shard as usize];
        match s.group.propose(op) {
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

    fn id(&mut self) -> OpId {
        self.next_seq += 1;
        OpId {
            node: self.cfg.id,
            seq: self.next_seq,
        }
    }

    fn read_blocks(&self, shard: u32, first: u64, count: u64) -> Result<Vec<u8>, String> {
        let bs = self.cfg.block_size as usize;
        let mut out = vec![0u8; bs * count as usize];
        let s = &self.shards[shard as usize];
        for i in 0..count {
            let Some(place) = self
                .map
                .place(shard, first + i)
                .map_err(|e| e.to_string())?
            else {
                continue;
            };
            let data = s
                .group
                .log()
                .with_payloads(|fs| fs.read(&place))
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

    /// Background work between turns: every `checkpoint_every`, checkpoint
    /// the block map, tell the other nodes how far it is durable, and (at a
    /// leader) trim the log below what every node has durably applied;
    /// every turn, a bounded step of segment cleaning.
    fn maintain(&mut self, checkpoint_due: bool) -> Result<(), NodeError> {
        if checkpoint_due {
            let applied: Vec<usize> = self.shards.iter().map(|s| s.group.applied_idx()).collect();
            if applied != self.checkpointed || self.shards.iter().any(|s| s.cleaner.busy()) {
                self.map.checkpoint()?;
                self.checkpointed = applied;
                for s in &mut self.shards {
                    s.cleaner.checkpointed();
                }
            }
            let me = self.cfg.id;
            let peers: Vec<NodeId> = self
                .cfg
                .nodes
                .keys()
                .copied()
                .filter(|n| *n != me)
                .collect();
            for (i, s) in self.shards.iter_mut().enumerate() {
                let idx = self.checkpointed[i];
                s.durable.insert(me, idx);
                for p in &peers {
                    self.transport.send(
                        *p,
                        Wire::Durable {
                            node: me,
                            shard: i as u32,
                            idx: idx as u64,
                        },
                    );
                }
                if s.group.is_leader() {
                    // A node not heard from counts as having nothing.
                    let low = self
                        .cfg
                        .nodes
                        .keys()
                        .map(|n| s.durable.get(n).copied().unwrap_or(0))
                        .min()
                        .unwrap_or(0);
                    if low > s.group.compacted_idx() {
                        s.group.trim(low)?;
                    }
                }
            }
        }
        let map = &self.map;
        for s in &mut self.shards {
            let log = s.group.log();
            log.with_payloads(|fs| s.cleaner.step(map, fs, checkpoint_due))?;
            if checkpoint_due && s.cleaner.busy() {
                // Deleting waits for the log to be trimmed past the entries
                // referring to a segment, which happens at checkpoints.
                let cleaner = &mut s.cleaner;
                let referenced = log.with_entries(|entries| cleaner.referenced(entries));
                log.with_payloads(|fs| cleaner.delete_unreferenced(&referenced, fs))
                    .map_err(|e| NodeError::Io {
                        what: "deleting a cleaned segment".into(),
                        source: e,
                    })?;
            }
        }
        Ok(())
    }

    /// One shard's turn: sync, send, apply, answer.
    fn turn(&mut self, shard: u32) -> Result<(), NodeError> {
        let mut decided: Vec<Decided<VolumeOp>> = Vec::new();
        let out = self.shards[shard as usize].group.ready(&mut decided)?;
        for m in out {
            let to = m.get_receiver();
            self.transport.send(to, Wire::Paxos(shard, m));
        }
        if !decided.is_empty() {
            let s = &self.shards[shard as usize];
            let map = &self.map;
            s.group
                .log()
                .with_payloads(|fs| map.apply(shard, &decided, fs))?;
            for (_, op) in &decided {
                let Some(w) = self.shards[shard as usize].waiting.remove(&op.id()) else {
                    continue;
                };
                let resp = match w.read {
                    Some((first, count)) => match self.read_blocks(shard, first, count) {
                        Ok(data) => Response::Data { data, behind: 0 },
                        Err(e) => Response::Error(e),
                    },
                    None => Response::Done,
                };
                let _ = w.reply.send(resp);
            }
        }
        // Operations a replica took as leader and can no longer decide.
        let leader = self.leader_addr(shard);
        let s = &mut self.shards[shard as usize];
        if !s.group.is_leader() && !s.waiting.is_empty() {
            for (_, w) in s.waiting.drain() {
                let _ = w.reply.send(Response::NotLeader { leader });
            }
        }
        Ok(())
    }
}

fn shard_state(s: &Shard) -> ShardState {
    let log = s.group.log();
    let (data_bytes, segments) = log.with_payloads(|fs| {
        fs.segment_sizes()
            .map(|m| (m.values().sum(), m.len() as u64))
            .unwrap_or_default()
    });
    let c = s.cleaner.stats();
    ShardState {
        applied: s.group.applied_idx() as u64,
        compacted: s.group.compacted_idx() as u64,
        log_entries: log.with_entries(|e| e.len() as u64),
        data_bytes,
        segments,
        segments_deleted: c.segments_deleted,
        bytes_cleaned: c.bytes_copied,
    }
}

fn accept_clients(
    listener: TcpListener,
    requests: Sender<(Request, Sender<Response>)>,
    stop: Arc<AtomicBool>,
) {
    let stop2 = stop.clone();
    silt_replica::transport::serve_connections(listener, stop, "volume-client", move |conn| {
        let _ = serve_client(conn, requests.clone(), stop2.clone());
    });
}

fn serve_client(
    conn: TcpStream,
    requests: Sender<(Request, Sender<Response>)>,
    stop: Arc<AtomicBool>,
) -> std::io::Result<()> {
    let mut r = BufReader::new(&conn);
    let mut w = BufWriter::new(&conn);
    let mut magic = [0u8; 4];
    r.read_exact(&mut magic)?;
    if &magic != MAGIC {
        return Ok(());
    }
    while !stop.load(Ordering::Acquire) {
        let req: Request = read_frame(&mut r)?;
        let (tx, rx) = bounded(1);
        if requests.send((req, tx)).is_err() {
            return Ok(());
        }
        let resp = rx
            .recv_timeout(Duration::from_secs(30))
            .unwrap_or_else(|_| Response::Retry("the node did not finish in 30 s".into()));
        write_frame(&mut w, &resp)?;
    }
    Ok(())
}
