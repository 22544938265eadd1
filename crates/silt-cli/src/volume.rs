//! `silt volume`: Hydra, a replicated block volume (seed 001 ch. 6).
//! `node` runs one replica process; `up` starts a volume of local replica
//! processes and serves it over NBD.

use crate::error::{CliError, CliResult};
use silt_volume::device::VolumeDevice;
use silt_volume::file_store::Mode;
use silt_volume::nbd::NbdServer;
use silt_volume::node::{Node, NodeAddrs, NodeConfig};
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

pub const VOLUME_HELP: &str = "\
A block volume replicated by Multi-Paxos (OmniPaxos) across replica
processes: every write is decided by a majority, synced there and applied to
each replica's block map (a Silt dataset); a replica writes a block's data
once and its log keeps only where it is (Hydra's reference trick). Block
clients reach it over NBD (qemu-io, qemu-img, nbdsh, nbdcopy, the kernel's
nbd-client).

Examples:
  silt volume up --dir /tmp/vol                 # 3 replicas on loopback, NBD on 127.0.0.1:10809
  qemu-io -f raw nbd://127.0.0.1:10809 -c 'write -P 0xab 0 64k' -c 'read -P 0xab 0 64k'
  qemu-img convert -O raw disk.img nbd://127.0.0.1:10809
  silt volume status --at 127.0.0.1:7101,127.0.0.1:7102,127.0.0.1:7103
  silt volume node --id 4 --dir /tmp/vol/n4 --join --nodes 4=127.0.0.1:7004/127.0.0.1:7104 &
  silt volume add --at 127.0.0.1:7101 --node 4=127.0.0.1:7004/127.0.0.1:7104
  silt volume remove --at 127.0.0.1:7101 --id 1
  silt volume node --id 1 --dir /tmp/vol/n1 \\
      --nodes 1=127.0.0.1:7001/127.0.0.1:7101,2=127.0.0.1:7002/127.0.0.1:7102,3=127.0.0.1:7003/127.0.0.1:7103";

#[derive(clap::Subcommand, Debug)]
pub enum VolumeCommand {
    /// Start a volume of local replica processes (loopback) and serve it over
    /// NBD until Ctrl-C or SIGTERM.
    Up(UpArgs),
    /// Run one replica of a volume (until Ctrl-C or SIGTERM).
    Node(NodeArgs),
    /// Add a replica to a running volume (every shard): start it first with
    /// `silt volume node --join`, then run this; it returns once the change
    /// is decided, and the new replica catches up in the background (watch
    /// `silt volume status`).
    Add(AddArgs),
    /// Remove a replica from a running volume (every shard); it stops
    /// serving, and can then be stopped.
    Remove(RemoveArgs),
    /// Show each replica's state per shard: leader, configuration and mode
    /// (active, waiting to join, catching-up by snapshot, left), log positions
    /// (decided, applied, trimmed, entries still in the log), the file
    /// store's size and segments, the live bytes the cleaner copied to
    /// reclaim space, and the snapshots installed since the replica started.
    Status(StatusArgs),
}

#[derive(clap::Args, Debug)]
pub struct AddArgs {
    /// Client addresses of current replicas, comma-separated.
    #[arg(long, value_delimiter = ',', required = true)]
    at: Vec<SocketAddr>,
    /// The replica to add: ID=REPLICATION_ADDR/CLIENT_ADDR.
    #[arg(long)]
    node: String,
}

#[derive(clap::Args, Debug)]
pub struct RemoveArgs {
    /// Client addresses of current replicas, comma-separated.
    #[arg(long, value_delimiter = ',', required = true)]
    at: Vec<SocketAddr>,
    /// The id of the replica to remove.
    #[arg(long)]
    id: u64,
}

#[derive(clap::Args, Debug)]
pub struct StatusArgs {
    /// The replicas' client addresses, comma-separated (`silt volume up`
    /// puts them at base-port+101.. : 127.0.0.1:7101,127.0.0.1:7102,...).
    #[arg(long, value_delimiter = ',', required = true)]
    at: Vec<SocketAddr>,
}

#[derive(clap::Args, Debug, Clone)]
pub struct VolumeOptions {
    /// Shards (each its own replicated group and leader; a block's shard is
    /// its 256-block region's number modulo this).
    #[arg(long, default_value_t = 1)]
    shards: u32,
    /// Block size in bytes (a power of two, 512 to 65536).
    #[arg(long, default_value_t = 4096)]
    block_size: u32,
    /// Volume size (bytes; K, M, G suffixes), a multiple of the block size.
    #[arg(long, default_value = "1G")]
    size: String,
    /// `reference`: data written once, the log keeps its place (Hydra's
    /// trick); `inline`: the log keeps the data and applying writes it again
    /// (the baseline it is measured against).
    #[arg(long, default_value = "reference")]
    mode: String,
    /// Bytes per data segment file (K, M, G suffixes): the unit in which
    /// overwritten and deleted blocks are reclaimed.
    #[arg(long, default_value = "256M")]
    segment_size: String,
    /// Do not provision the volume's space. By default a new node writes
    /// its share of the volume (and an eighth more) as zeros, up to 1 GiB per
    /// shard when it is created and the rest in the background a segment
    /// ahead of the writes, so that writes overwrite allocated space and
    /// each sync flushes data only (like an "eager zeroed" thick disk: ~1.6x
    /// faster syncs here, at the price of writing the space once; cleaned
    /// segments are reused without it). Thin nodes start at once and take no
    /// space until written.
    #[arg(long)]
    thin: bool,
    /// Milliseconds between checkpoints of the block map; the log is trimmed
    /// below what every replica has checkpointed.
    #[arg(long, default_value_t = 5000)]
    checkpoint_ms: u64,
}

#[derive(clap::Args, Debug)]
pub struct UpArgs {
    /// Directory of the replicas (one subdirectory each); kept across runs.
    #[arg(long)]
    dir: PathBuf,
    /// Replica processes.
    #[arg(long, default_value_t = 3)]
    replicas: u64,
    /// First port: replica i listens on base+i (replication) and
    /// base+100+i (clients).
    #[arg(long, default_value_t = 7000)]
    base_port: u16,
    /// Where to serve NBD.
    #[arg(long, default_value = "127.0.0.1:10809")]
    nbd: SocketAddr,
    #[command(flatten)]
    opts: VolumeOptions,
}

#[derive(clap::Args, Debug)]
pub struct NodeArgs {
    /// This replica's id (in --nodes).
    #[arg(long)]
    id: u64,
    /// This replica's directory.
    #[arg(long)]
    dir: PathBuf,
    /// Every replica: ID=REPLICATION_ADDR/CLIENT_ADDR, comma-separated.
    #[arg(long, value_delimiter = ',', required = true)]
    nodes: Vec<String>,
    /// Also serve the volume over NBD here.
    #[arg(long)]
    nbd: Option<SocketAddr>,
    /// Join an existing volume: replicate nothing until `silt volume add`
    /// makes this node a member, then copy the state from a member (a
    /// snapshot) and follow the log. --nodes needs only this node.
    #[arg(long)]
    join: bool,
    /// Write the log and data without fdatasync (tests only: a machine
    /// crash loses acknowledged writes).
    #[arg(long, hide = true)]
    no_fsync: bool,
    #[command(flatten)]
    opts: VolumeOptions,
}

/// A byte size such as `4M` or `512K` given to flag `flag`.
pub fn parse_size(flag: &str, s: &str) -> CliResult<u64> {
    let t = s.trim();
    let (num, mult) = match t.chars().last() {
        Some('K' | 'k') => (&t[..t.len() - 1], 1u64 << 10),
        Some('M' | 'm') => (&t[..t.len() - 1], 1 << 20),
        Some('G' | 'g') => (&t[..t.len() - 1], 1 << 30),
        Some('T' | 't') => (&t[..t.len() - 1], 1 << 40),
        _ => (t, 1),
    };
    num.trim()
        .parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(mult))
        .ok_or_else(|| CliError::Usage(format!("{flag} {s}: expected bytes such as 1G or 512M")))
}

fn parse_nodes(flag: &str, specs: &[String]) -> CliResult<BTreeMap<u64, NodeAddrs>> {
    silt_volume::membership::parse(specs).map_err(|e| {
        CliError::Usage(format!(
            "{flag}: {e} (e.g. 1=127.0.0.1:7001/127.0.0.1:7101)"
        ))
    })
}

fn node_config(args: &NodeArgs) -> CliResult<NodeConfig> {
    let nodes = parse_nodes("--nodes", &args.nodes)?;
    let mut cfg = NodeConfig::new(args.id, args.dir.clone(), nodes);
    cfg.join = args.join;
    cfg.shards = args.opts.shards.max(1);
    cfg.block_size = args.opts.block_size;
    let size = parse_size("--size", &args.opts.size)?;
    if size == 0 || !size.is_multiple_of(cfg.block_size as u64) {
        return Err(CliError::Usage(format!(
            "--size {}: not a positive multiple of the block size {}",
            args.opts.size, cfg.block_size
        )));
    }
    cfg.blocks = size / cfg.block_size as u64;
    cfg.mode = match args.opts.mode.as_str() {
        "reference" => Mode::Reference,
        "inline" => Mode::Inline,
        m => {
            return Err(CliError::Usage(format!(
                "--mode {m}: expected reference or inline"
            )));
        }
    };
    cfg.fsync = !args.no_fsync;
    cfg.segment_bytes = parse_size("--segment-size", &args.opts.segment_size)?;
    if cfg.segment_bytes < 1 << 20 {
        return Err(CliError::Usage(format!(
            "--segment-size {}: at least 1M",
            args.opts.segment_size
        )));
    }
    cfg.checkpoint_every = Duration::from_millis(args.opts.checkpoint_ms.max(10));
    cfg.thin = args.opts.thin;
    Ok(cfg)
}

fn runtime() -> CliResult<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| CliError::Failed(format!("starting the runtime: {e}")))
}

async fn until_signal() {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = async {
            match term.as_mut() {
                Some(t) => { t.recv().await; }
                None => std::future::pending::<()>().await,
            }
        } => {}
    }
}

/// Serve the volume whose nodes answer at `clients` over NBD on `addr`.
async fn serve_nbd(addr: SocketAddr, clients: Vec<SocketAddr>) -> CliResult<NbdServer> {
    let device = tokio::task::spawn_blocking(move || VolumeDevice::connect(&clients, 8))
        .await
        .map_err(|e| CliError::Failed(e.to_string()))?
        .map_err(|e| CliError::Failed(format!("connecting to the volume: {e}")))?;
    NbdServer::bind(addr, "silt", Arc::new(device))
        .await
        .map_err(|e| CliError::Usage(format!("serving NBD on {addr}: {e}")))
}

pub fn run(cmd: &VolumeCommand) -> CliResult<()> {
    match cmd {
        VolumeCommand::Node(args) => run_node(args),
        VolumeCommand::Up(args) => run_up(args),
        VolumeCommand::Status(args) => run_status(args),
        VolumeCommand::Add(args) => {
            let added = parse_nodes("--node", std::slice::from_ref(&args.node))?;
            change_members(&args.at, |m| {
                for (id, a) in &added {
                    if m.contains_key(id) {
                        return Err(CliError::Usage(format!(
                            "--node: node {id} is a member already"
                        )));
                    }
                    m.insert(*id, *a);
                }
                Ok(())
            })
        }
        VolumeCommand::Remove(args) => change_members(&args.at, |m| {
            if m.remove(&args.id).is_none() {
                return Err(CliError::Usage(format!("--id {}: not a member", args.id)));
            }
            if m.len() < 2 {
                return Err(CliError::Usage(
                    "a volume keeps at least two replicas".into(),
                ));
            }
            Ok(())
        }),
    }
}

/// Read the current members from a replica, change them with `f`, and have
/// every shard's leader carry the change.
fn change_members(
    at: &[SocketAddr],
    f: impl FnOnce(&mut BTreeMap<u64, NodeAddrs>) -> CliResult<()>,
) -> CliResult<()> {
    let unavailable = |e: silt_volume::client::ClientError| {
        CliError::Usage(format!("the volume at {at:?} did not answer: {e}"))
    };
    let mut c = silt_volume::client::VolumeClient::connect(at).map_err(unavailable)?;
    let mut current = None;
    for &a in at {
        if let Ok(info) = c.info_at(a)
            && let Some(s) = info.shard_state.iter().find(|s| s.mode == "active")
        {
            current = Some(s.members.clone());
            break;
        }
    }
    let current = current
        .ok_or_else(|| CliError::Usage(format!("no replica at {at:?} is serving the volume")))?;
    let mut members = parse_nodes("the volume's members", &[current])?;
    f(&mut members)?;
    eprintln!(
        "changing the members to {}",
        silt_volume::membership::encode(&members)
    );
    c.reconfigure(&members).map_err(unavailable)?;
    eprintln!("done: every shard's leader applied the change");
    Ok(())
}

fn run_status(args: &StatusArgs) -> CliResult<()> {
    let mut c = silt_volume::client::VolumeClient::connect(&args.at)
        .map_err(|e| CliError::Usage(format!("no replica answers at {:?}: {e}", args.at)))?;
    println!(
        "{:<22} {:>5} {:>6} {:>6} {:>6} {:<11} {:>10} {:>10} {:>10} {:>8} {:>12} {:>8} {:>12} {:>9}",
        "replica",
        "shard",
        "leader",
        "node",
        "config",
        "mode",
        "decided",
        "applied",
        "trimmed",
        "log",
        "data",
        "segments",
        "copied",
        "snapshots"
    );
    for &a in &args.at {
        let info = match c.info_at(a) {
            Ok(i) => i,
            Err(e) => {
                println!("{a:<22} not answering: {e}");
                continue;
            }
        };
        for (s, st) in info.shard_state.iter().enumerate() {
            let leader = info
                .leaders
                .get(s)
                .copied()
                .flatten()
                .map_or("-".to_owned(), |l| l.to_string());
            println!(
                "{:<22} {:>5} {:>6} {:>6} {:>6} {:<11} {:>10} {:>10} {:>10} {:>8} {:>12} {:>8} {:>12} {:>9}",
                a.to_string(),
                s,
                leader,
                info.node,
                st.config,
                st.mode.replace(' ', "-"),
                info.decided.get(s).copied().unwrap_or(0),
                st.applied,
                st.compacted,
                st.log_entries,
                crate::util::bytes(st.data_bytes),
                st.segments,
                crate::util::bytes(st.bytes_cleaned),
                st.snapshots,
            );
        }
    }
    Ok(())
}

fn run_node(args: &NodeArgs) -> CliResult<()> {
    let cfg = node_config(args)?;
    let clients: Vec<SocketAddr> = cfg.nodes.values().map(|a| a.client).collect();
    let me = cfg.nodes.get(&cfg.id).copied();
    if !cfg.thin && !cfg.dir.join("map").exists() {
        // A new node writes its share of the volume's space first (see
        // --thin): seconds per GiB.
        eprintln!(
            "silt volume node {}: provisioning {} MiB of space (--thin skips this)...",
            args.id,
            cfg.provisioned_at_creation() >> 20
        );
    }
    let node = Node::start(cfg).map_err(|e| CliError::Failed(e.to_string()))?;
    if let Some(me) = me {
        println!(
            "silt volume node {}: replication on {}, clients on {}",
            args.id,
            me.replica,
            node.client_addr()
        );
    }
    let rt = runtime()?;
    rt.block_on(async {
        let nbd = match args.nbd {
            Some(addr) => {
                let s = serve_nbd(addr, clients).await?;
                println!(
                    "silt volume node {}: NBD on nbd://{}",
                    args.id,
                    s.local_addr()
                );
                Some(s)
            }
            None => None,
        };
        until_signal().await;
        if let Some(s) = nbd {
            s.shutdown().await;
        }
        Ok::<(), CliError>(())
    })?;
    node.stop();
    Ok(())
}

fn run_up(args: &UpArgs) -> CliResult<()> {
    if args.replicas < 3 {
        return Err(CliError::Usage(
            "--replicas: at least 3 (a majority must survive one failure)".into(),
        ));
    }
    let exe = std::env::current_exe().map_err(|e| CliError::Failed(e.to_string()))?;
    let addr = |port: u64| -> CliResult<SocketAddr> {
        let p = u16::try_from(port)
            .map_err(|_| CliError::Usage(format!("--base-port {}: too high", args.base_port)))?;
        Ok(SocketAddr::from(([127, 0, 0, 1], p)))
    };
    let mut specs = Vec::new();
    let mut clients = Vec::new();
    for i in 1..=args.replicas {
        let r = addr(args.base_port as u64 + i)?;
        let c = addr(args.base_port as u64 + 100 + i)?;
        specs.push(format!("{i}={r}/{c}"));
        clients.push(c);
    }
    let (nodes_arg, dir, opts) = (specs.join(","), args.dir.clone(), args.opts.clone());
    let spawn = move |i: u64| -> CliResult<Child> {
        let mut c = Command::new(&exe);
        c.args(["volume", "node", "--id", &i.to_string()])
            .arg("--dir")
            .arg(dir.join(format!("n{i}")))
            .args(["--nodes", &nodes_arg])
            .args(["--shards", &opts.shards.to_string()])
            .args(["--block-size", &opts.block_size.to_string()])
            .args(["--size", &opts.size])
            .args(["--mode", &opts.mode])
            .args(["--segment-size", &opts.segment_size])
            .args(["--checkpoint-ms", &opts.checkpoint_ms.to_string()])
            .stdout(Stdio::null());
        if opts.thin {
            c.arg("--thin");
        }
        c.spawn()
            .map_err(|e| CliError::Failed(format!("starting replica {i}: {e}")))
    };
    let mut children: Vec<Child> = Vec::new();
    for i in 1..=args.replicas {
        children.push(spawn(i)?);
    }
    // A replica that dies (killed, or stopped by a failed disk) is reported
    // and started again after a pause: it recovers from its log and catches
    // up; the volume keeps serving meanwhile with the others.
    let children = Arc::new(std::sync::Mutex::new(children));
    let watching = Arc::new(std::sync::atomic::AtomicBool::new(true));
    let watcher = {
        let (children, watching) = (children.clone(), watching.clone());
        let spawn = spawn.clone();
        std::thread::spawn(move || {
            while watching.load(std::sync::atomic::Ordering::Acquire) {
                std::thread::sleep(Duration::from_millis(500));
                let Ok(mut list) = children.lock() else {
                    return;
                };
                for (i, c) in list.iter_mut().enumerate() {
                    if let Ok(Some(status)) = c.try_wait() {
                        if !watching.load(std::sync::atomic::Ordering::Acquire) {
                            return;
                        }
                        eprintln!(
                            "silt volume: replica {} ended ({status}); starting it again",
                            i + 1
                        );
                        std::thread::sleep(Duration::from_secs(1));
                        match spawn(i as u64 + 1) {
                            Ok(new) => *c = new,
                            Err(e) => eprintln!("silt volume: {e}"),
                        }
                    }
                }
            }
        })
    };
    let stop_all = |children: &mut Vec<Child>| {
        for c in children.iter() {
            // SIGTERM: each replica stops and closes its map.
            let _ = Command::new("kill").arg(c.id().to_string()).status();
        }
        for c in children.iter_mut() {
            let _ = c.wait();
        }
    };
    let rt = runtime()?;
    let served = rt.block_on(async {
        let s = serve_nbd(args.nbd, clients.clone()).await?;
        println!(
            "silt volume: {} replicas in {}, clients on {}",
            args.replicas,
            args.dir.display(),
            clients
                .iter()
                .map(|c| c.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        );
        println!(
            "silt volume: NBD on nbd://{} (Ctrl-C stops)",
            s.local_addr()
        );
        until_signal().await;
        s.shutdown().await;
        Ok::<(), CliError>(())
    });
    watching.store(false, std::sync::atomic::Ordering::Release);
    let _ = watcher.join();
    if let Ok(mut list) = children.lock() {
        stop_all(&mut list);
    }
    served
}
