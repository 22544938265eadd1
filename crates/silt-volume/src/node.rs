//! One Hydra node: a replica of every shard's group, their block maps and
//! file stores, the transport to the other nodes, and the client listener.
//!
//! One driver thread ([`crate::driver`]) owns the replicas. Client
//! connections have a thread each and hand their requests to the driver;
//! a snapshot asked for by a catching-up replica is listed by the driver and
//! streamed by the connection's thread.
//!
//! A node's directory: `map/` (the block maps, a Silt database) and per
//! shard `shard-<s>/data/` (the file store) and `shard-<s>/cfg-<c>/` (the
//! replicated log of configuration `c`).

use crate::block_map::{BlockMap, MapError};
use crate::driver::{Cmd, Driver};
use crate::file_store::Mode;
use crate::protocol::{MAGIC, Request, Response, read_frame, write_frame};
use crossbeam_channel::{Sender, bounded, unbounded};
use silt_replica::{NodeId, Transport};
use std::collections::{BTreeMap, HashMap};
use std::io::{BufReader, BufWriter, Read};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

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
    /// The volume's nodes when it is created, this one included (a node
    /// restarting takes each shard's members from its block map instead:
    /// they may have changed since).
    pub nodes: BTreeMap<NodeId, NodeAddrs>,
    /// This node joins an existing volume: it replicates nothing until a
    /// member announces a configuration that includes it, then installs a
    /// snapshot (`silt volume add` makes the change).
    pub join: bool,
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
    /// the log be trimmed below it and cleaned segments be retired; members
    /// announce their configuration at the same pace.
    pub checkpoint_every: Duration,
    /// Bytes per file store segment (the unit of cleaning).
    pub segment_bytes: u64,
    /// Write no zeros: a new node does not provision its share of the
    /// volume ahead (faster to create, smaller on disk until written, but
    /// each sync of fresh space also writes file metadata; see
    /// [`crate::segment_pool`]).
    pub thin: bool,
    /// A follower whose log sync would carry more than this catches up by
    /// snapshot instead.
    pub max_sync_bytes: u64,
}

impl NodeConfig {
    pub fn new(id: NodeId, dir: PathBuf, nodes: BTreeMap<NodeId, NodeAddrs>) -> NodeConfig {
        NodeConfig {
            id,
            dir,
            nodes,
            join: false,
            shards: 1,
            block_size: 4096,
            blocks: 1 << 18,
            mode: Mode::Reference,
            fsync: true,
            tick: Duration::from_millis(10),
            checkpoint_every: Duration::from_secs(5),
            segment_bytes: 256 << 20,
            thin: false,
            max_sync_bytes: 32 << 20,
        }
    }

    /// The bytes of segments a new shard store is provisioned with: its
    /// share of the volume and an eighth more for frame heads and data not
    /// yet cleaned; 0 if thin.
    pub fn shard_provision(&self) -> u64 {
        if self.thin {
            return 0;
        }
        let share = self.blocks * u64::from(self.block_size) / u64::from(self.shards.max(1));
        share.saturating_add(share / 8)
    }

    /// About how many bytes of zeros a new node writes before it serves
    /// (the rest of its provision is written in the background).
    pub fn provisioned_at_creation(&self) -> u64 {
        self.shard_provision()
            .min(crate::segment_pool::EAGER_MAX)
            .saturating_mul(u64::from(self.shards.max(1)))
    }

    pub(crate) fn shard_dir(&self, shard: u32) -> PathBuf {
        self.dir.join(format!("shard-{shard}"))
    }

    /// Where configuration `config`'s log of `shard` is.
    pub(crate) fn log_dir(&self, shard: u32, config: u32) -> PathBuf {
        self.shard_dir(shard).join(format!("cfg-{config}"))
    }
}

#[derive(Debug, thiserror::Error)]
pub enum NodeError {
    #[error("{0}")]
    Map(#[from] MapError),
    #[error("{0}")]
    Replica(#[from] silt_replica::ReplicaError),
    #[error("{0}")]
    Snapshot(#[from] crate::snapshot::SnapshotError),
    #[error("{what}: {source}")]
    Io {
        what: String,
        #[source]
        source: std::io::Error,
    },
    #[error("invalid node configuration: {0}")]
    Config(String),
}

pub(crate) fn io_err(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> NodeError {
    let what = what.into();
    move |source| NodeError::Io { what, source }
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
        if !cfg.block_size.is_power_of_two() || !(512..=65536).contains(&cfg.block_size) {
            return Err(NodeError::Config(format!(
                "block size {} is not a power of two from 512 to 65536",
                cfg.block_size
            )));
        }
        let map = Arc::new(BlockMap::open(
            &cfg.dir.join("map"),
            cfg.shards,
            cfg.block_size,
        )?);
        let (inbox_tx, inbox) = unbounded();
        let peers: HashMap<NodeId, SocketAddr> =
            cfg.nodes.iter().map(|(id, a)| (*id, a.replica)).collect();
        let transport = Transport::start(cfg.id, me.replica, &peers, inbox_tx)?;
        let listener = TcpListener::bind(me.client)
            .map_err(io_err(format!("listening for clients on {}", me.client)))?;
        let client_addr = listener
            .local_addr()
            .map_err(io_err("reading the client address"))?;
        let mut driver = Driver::open(cfg.clone(), map, transport)?;
        let (cmd_tx, commands) = unbounded::<Cmd>();
        let stop = Arc::new(AtomicBool::new(false));
        {
            let stop = stop.clone();
            std::thread::Builder::new()
                .name(format!("volume-{}-clients", cfg.id))
                .spawn(move || accept_clients(listener, cmd_tx, stop))
                .map_err(io_err("starting a thread"))?;
        }
        let stop2 = stop.clone();
        let handle = std::thread::Builder::new()
            .name("volume-driver".into())
            .spawn(move || driver.run(inbox, commands, stop2))
            .map_err(io_err("starting a thread"))?;
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

/// Remove a directory tree that is no longer needed (an old
/// configuration's log); failing to is only worth a warning.
pub(crate) fn remove_dir(dir: &Path) {
    if let Err(e) = std::fs::remove_dir_all(dir)
        && e.kind() != std::io::ErrorKind::NotFound
    {
        tracing::warn!(dir = %dir.display(), error = %e, "could not remove an old log");
    }
}

fn accept_clients(listener: TcpListener, commands: Sender<Cmd>, stop: Arc<AtomicBool>) {
    let stop2 = stop.clone();
    silt_replica::transport::serve_connections(listener, stop, "volume-client", move |conn| {
        let _ = serve_client(conn, commands.clone(), stop2.clone());
    });
}

fn serve_client(
    conn: TcpStream,
    commands: Sender<Cmd>,
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
        if let Request::Snapshot { shard } = req {
            let (tx, rx) = bounded(1);
            if commands.send(Cmd::Snapshot(shard, tx)).is_err() {
                return Ok(());
            }
            match rx.recv_timeout(Duration::from_secs(30)) {
                Ok(Ok(plan)) => crate::snapshot::stream(plan, &mut w)?,
                Ok(Err(e)) => write_frame(&mut w, &Response::Error(e))?,
                Err(_) => write_frame(
                    &mut w,
                    &Response::Retry("the node did not list the snapshot in 30 s".into()),
                )?,
            }
            continue;
        }
        let (tx, rx) = bounded(1);
        if commands.send(Cmd::Client(req, tx)).is_err() {
            return Ok(());
        }
        let resp = rx
            .recv_timeout(Duration::from_secs(30))
            .unwrap_or_else(|_| Response::Retry("the node did not finish in 30 s".into()));
        write_frame(&mut w, &resp)?;
    }
    Ok(())
}
