//! Hydra's replicas as child processes of the harness, for the `hydra`
//! workload: each replica runs `silt-bench hydra-node ...` (a hidden
//! subcommand), so that it is its own process like an etcd member (its own
//! `/proc/<pid>/io`, a SIGKILL of its own) and its `fsync`/`fdatasync` calls
//! go through the harness's counting definitions (`fsync_count`), which the
//! child reports on request.
//!
//! The child's protocol on stdin/stdout, one line each way:
//! - at start it prints `ready <client address> fsync-counting=<true|false>`
//!   (or exits with an error on stderr);
//! - `stats` on stdin: it answers `stats fsyncs=<n>` (fsync + fdatasync
//!   calls of the process so far);
//! - end of stdin (the harness closed it, or died): the node stops and the
//!   process exits.

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use silt_volume::file_store::Mode;
use silt_volume::node::{Node, NodeAddrs, NodeConfig};

/// Arguments of the hidden `hydra-node` subcommand.
#[derive(clap::Args, Debug, Clone)]
pub struct NodeArgs {
    /// This replica's id (a key of --nodes).
    #[arg(long)]
    pub id: u64,
    /// Its directory.
    #[arg(long)]
    pub dir: PathBuf,
    /// Every replica: `ID=REPLICA_ADDR/CLIENT_ADDR,...`.
    #[arg(long)]
    pub nodes: String,
    /// `reference` (the trick) or `inline`.
    #[arg(long)]
    pub mode: String,
    #[arg(long)]
    pub block_size: u32,
    /// The volume's size in blocks.
    #[arg(long)]
    pub blocks: u64,
}

fn parse_mode(s: &str) -> Result<Mode> {
    match s {
        "reference" => Ok(Mode::Reference),
        "inline" => Ok(Mode::Inline),
        _ => bail!("unknown mode {s:?} (reference or inline)"),
    }
}

fn mode_arg(m: Mode) -> &'static str {
    match m {
        Mode::Reference => "reference",
        Mode::Inline => "inline",
    }
}

/// `--nodes` of a replica: the volume's own form (`silt_volume::membership`).
fn parse_nodes(s: &str) -> Result<BTreeMap<u64, NodeAddrs>> {
    silt_volume::membership::parse(&[s]).map_err(|e| anyhow::anyhow!("--nodes: {e}"))
}

fn nodes_arg(nodes: &BTreeMap<u64, NodeAddrs>) -> String {
    silt_volume::membership::encode(nodes)
}

/// The child: runs one replica until its stdin closes.
pub fn serve(args: NodeArgs) -> Result<()> {
    let nodes = parse_nodes(&args.nodes)?;
    std::fs::create_dir_all(&args.dir)
        .with_context(|| format!("creating {}", args.dir.display()))?;
    let counting = crate::fsync_count::available(&args.dir);
    let mut cfg = NodeConfig::new(args.id, args.dir.clone(), nodes);
    cfg.mode = parse_mode(&args.mode)?;
    cfg.block_size = args.block_size;
    cfg.blocks = args.blocks;
    let node = Node::start(cfg).with_context(|| format!("starting hydra node {}", args.id))?;
    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "ready {} fsync-counting={counting}",
        node.client_addr()
    )?;
    out.flush()?;
    for line in std::io::stdin().lock().lines() {
        let Ok(line) = line else { break };
        match line.trim() {
            "stats" => writeln!(out, "stats fsyncs={}", crate::fsync_count::count())?,
            other => writeln!(out, "error unknown command {other:?}")?,
        }
        out.flush()?;
    }
    node.stop();
    Ok(())
}

/// What starting one replica takes.
#[derive(Clone)]
struct Spec {
    id: u64,
    dir: PathBuf,
    nodes: String,
    mode: Mode,
    block_size: u32,
    blocks: u64,
}

/// One replica process.
struct Proc {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
}

impl Proc {
    fn spawn(spec: &Spec, log: &Path) -> Result<(Proc, bool)> {
        let exe = std::env::current_exe().context("finding the harness binary")?;
        let stderr = OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
            .with_context(|| format!("opening {}", log.display()))?;
        let mut child = Command::new(exe)
            .arg("hydra-node")
            .arg("--id")
            .arg(spec.id.to_string())
            .arg("--dir")
            .arg(&spec.dir)
            .arg("--nodes")
            .arg(&spec.nodes)
            .arg("--mode")
            .arg(mode_arg(spec.mode))
            .arg("--block-size")
            .arg(spec.block_size.to_string())
            .arg("--blocks")
            .arg(spec.blocks.to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::from(stderr))
            .spawn()
            .context("starting a hydra-node child process")?;
        let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            let _ = child.kill();
            let _ = child.wait();
            bail!("hydra-node child without pipes");
        };
        let mut p = Proc {
            child,
            stdin: Some(stdin),
            stdout: BufReader::new(stdout),
        };
        let line = p.line().with_context(|| {
            format!(
                "hydra node {} did not start; its stderr ({}):\n{}",
                spec.id,
                log.display(),
                log_tail(log)
            )
        })?;
        let Some(rest) = line.strip_prefix("ready ") else {
            bail!("hydra node {} said {line:?} at start", spec.id);
        };
        let counting = rest.contains("fsync-counting=true");
        Ok((p, counting))
    }

    fn line(&mut self) -> Result<String> {
        let mut s = String::new();
        if self.stdout.read_line(&mut s)? == 0 {
            bail!("the process ended");
        }
        Ok(s.trim().to_string())
    }

    fn fsyncs(&mut self) -> Result<u64> {
        let stdin = self.stdin.as_mut().context("stdin closed")?;
        stdin.write_all(b"stats\n")?;
        stdin.flush()?;
        let line = self.line()?;
        line.strip_prefix("stats fsyncs=")
            .and_then(|v| v.parse().ok())
            .with_context(|| format!("unexpected answer {line:?} to stats"))
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    /// SIGKILL.
    fn kill(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Close stdin (the node stops cleanly); SIGKILL after 10 s.
    fn stop(mut self) {
        drop(self.stdin.take());
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Three replica processes of one volume on loopback.
pub struct HydraCluster {
    specs: Vec<Spec>,
    procs: Vec<Option<Proc>>,
    /// The client address of each replica.
    pub addrs: Vec<SocketAddr>,
    logs: Vec<PathBuf>,
    /// Whether every child's fsyncs go through the counters.
    pub fsync_counting: bool,
}

impl HydraCluster {
    pub fn start(dir: &Path, mode: Mode, block_size: u32, blocks: u64) -> Result<HydraCluster> {
        let loopback = |port: u16| SocketAddr::from(([127, 0, 0, 1], port));
        let mut nodes = BTreeMap::new();
        for id in 1..=3u64 {
            nodes.insert(
                id,
                NodeAddrs {
                    replica: loopback(crate::util::free_port()?),
                    client: loopback(crate::util::free_port()?),
                },
            );
        }
        let nodes_s = nodes_arg(&nodes);
        let specs: Vec<Spec> = nodes
            .keys()
            .map(|&id| Spec {
                id,
                dir: dir.join(format!("n{id}")),
                nodes: nodes_s.clone(),
                mode,
                block_size,
                blocks,
            })
            .collect();
        let logs: Vec<PathBuf> = specs
            .iter()
            .map(|s| dir.join(format!("n{}.log", s.id)))
            .collect();
        let mut procs = Vec::new();
        let mut counting = true;
        for (s, log) in specs.iter().zip(&logs) {
            let (p, c) = Proc::spawn(s, log)?;
            counting &= c;
            procs.push(Some(p));
        }
        Ok(HydraCluster {
            specs,
            procs,
            addrs: nodes.values().map(|a| a.client).collect(),
            logs,
            fsync_counting: counting,
        })
    }

    /// The pids of the running replicas.
    pub fn pids(&self) -> Vec<u32> {
        self.procs.iter().flatten().map(Proc::pid).collect()
    }

    /// fsync + fdatasync calls of the running replicas so far.
    pub fn fsyncs(&mut self) -> Result<u64> {
        let mut n = 0;
        for p in self.procs.iter_mut().flatten() {
            n += p.fsyncs()?;
        }
        Ok(n)
    }

    /// The index (0-based) of the replica with this node id.
    pub fn index_of(&self, id: u64) -> Option<usize> {
        self.specs.iter().position(|s| s.id == id)
    }

    /// SIGKILL replica `i`.
    pub fn kill(&mut self, i: usize) {
        if let Some(p) = self.procs.get_mut(i).and_then(Option::take) {
            p.kill();
        }
    }

    /// Start replica `i` again on its directory and addresses.
    pub fn restart(&mut self, i: usize) -> Result<()> {
        let spec = self.specs.get(i).context("no such replica")?.clone();
        let log = self.logs.get(i).context("no such replica")?.clone();
        let (p, _) = Proc::spawn(&spec, &log)?;
        if let Some(slot) = self.procs.get_mut(i) {
            *slot = Some(p);
        }
        Ok(())
    }

    pub fn stop(mut self) {
        for p in self.procs.iter_mut().filter_map(Option::take) {
            p.stop();
        }
    }
}

/// The last lines of a replica's log, for error messages.
pub fn log_tail(path: &Path) -> String {
    let Ok(f) = File::open(path) else {
        return String::new();
    };
    let lines: Vec<String> = BufReader::new(f).lines().map_while(Result::ok).collect();
    lines[lines.len().saturating_sub(5)..].join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nodes_round_trip() {
        let s = "1=127.0.0.1:7001/127.0.0.1:7101,2=127.0.0.1:7002/127.0.0.1:7102";
        let n = parse_nodes(s).unwrap();
        assert_eq!(n.len(), 2);
        assert_eq!(nodes_arg(&n), s);
        assert!(parse_nodes("1=nonsense").is_err());
        assert!(parse_nodes("x=127.0.0.1:1/127.0.0.1:2").is_err());
    }
}
