//! `hydra`: Silt's consensus-replicated block volume (seed 001 ch. 6,
//! `crates/silt-volume`) beside etcd storing the same blocks as keys (issue
//! #24). Three replicas on loopback for every system, each its own process:
//! Hydra's as `silt-bench hydra-node` children (`hydra_node`), etcd's as
//! `etcd` members (`hydra_etcd`).
//!
//! For 4 KiB and 64 KiB blocks, random and sequential block numbers, 1 and
//! 16 clients, on a fresh cluster each: throughput, write latency, the disk
//! bytes all three replicas wrote per logical byte (`/proc/<pid>/io`
//! `write_bytes`), fsyncs per logical MiB (Hydra: counted inside each
//! replica process; etcd: its WAL fsync and backend commit counters), and
//! the CPU the servers and the client spent per write. Then, once per
//! system, the catch-up of a killed replica: SIGKILL a follower, write, start
//! it again, time until it has applied everything the leader had.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use rand::{Rng, SeedableRng, rngs::SmallRng};
use silt_volume::client::VolumeClient;
use silt_volume::file_store::Mode;

use super::hydra_etcd::{self as etcd, EtcdCluster, EtcdGrpc};
use super::hydra_node::HydraCluster;
use crate::{
    results::{Kind, ResultRow},
    util::{ScratchDir, fmt_num},
    workloads::{Ctx, Scale, Workload},
};

pub struct Hydra;

/// The volume: 1 GiB whatever the block size (random writes spread over it,
/// each sequential client has its own slice of it).
const VOLUME_BYTES: u64 = 1 << 30;
/// The target: Hydra's write throughput at 16 clients against etcd's.
const TARGET_VS_ETCD: f64 = 3.0;
/// After the timed writes, the counters are read again this much later, so
/// that work the systems defer briefly (etcd's backend commits every 100 ms)
/// is counted.
const SETTLE: Duration = Duration::from_millis(500);
const MIB: f64 = (1u64 << 20) as f64;
/// A restarted replica that applies nothing more for this long is taken as
/// not catching up.
const STALL: Duration = Duration::from_secs(30);

/// (logical bytes per configuration, time cap per configuration, the
/// amounts written while a replica is down for the catch-up measurements).
/// Medium and full also measure 32 MiB: on 2026-12-06 a Hydra replica that
/// missed more than about 64 MiB did not catch up (the whole missing suffix
/// travels as one message, and the transport refuses messages over 64 MiB),
/// so the larger amount alone would leave Hydra without a catch-up time.
fn sizes(scale: Scale) -> (u64, Duration, &'static [u64]) {
    match scale {
        Scale::Small => (16 << 20, Duration::from_secs(2), &[16 << 20]),
        Scale::Medium => (256 << 20, Duration::from_secs(20), &[32 << 20, 256 << 20]),
        Scale::Full => (1 << 30, Duration::from_secs(60), &[32 << 20, 1 << 30]),
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Sys {
    /// Mode::Reference: the reference trick.
    Hydra,
    /// Mode::Inline: the log keeps the data (the baseline).
    HydraInline,
    Etcd,
}

impl Sys {
    fn label(self) -> &'static str {
        match self {
            Sys::Hydra => "hydra",
            Sys::HydraInline => "hydra-inline",
            Sys::Etcd => "etcd",
        }
    }
}

const ALL: [Sys; 3] = [Sys::Hydra, Sys::HydraInline, Sys::Etcd];

fn wants(ctx: &Ctx, s: Sys) -> bool {
    ctx.systems
        .as_ref()
        .is_none_or(|l| l.iter().any(|x| x.eq_ignore_ascii_case(s.label())))
}

/// One configuration of writes.
#[derive(Clone, Copy, Debug)]
struct Shape {
    block: usize,
    random: bool,
    clients: usize,
}

impl Shape {
    fn all() -> Vec<Shape> {
        let mut out = Vec::new();
        for block in [4096, 65536] {
            for random in [true, false] {
                for clients in [1, 16] {
                    out.push(Shape {
                        block,
                        random,
                        clients,
                    });
                }
            }
        }
        out
    }

    /// "4K rand 16c".
    fn name(&self) -> String {
        format!(
            "{}K {} {}c",
            self.block / 1024,
            if self.random { "rand" } else { "seq" },
            self.clients
        )
    }

    fn blocks(&self) -> u64 {
        VOLUME_BYTES / self.block as u64
    }
}

/// What a client writes through.
trait BlockWriter: Send {
    fn put(&mut self, block: u64, data: &[u8]) -> Result<()>;
}

impl BlockWriter for VolumeClient {
    fn put(&mut self, block: u64, data: &[u8]) -> Result<()> {
        self.write(block, data)
            .with_context(|| format!("hydra write of block {block}"))
    }
}

struct EtcdWriter(EtcdGrpc);

impl BlockWriter for EtcdWriter {
    fn put(&mut self, block: u64, data: &[u8]) -> Result<()> {
        let mut key = [0u8; 9];
        key[0] = b'b';
        key[1..].copy_from_slice(&block.to_be_bytes());
        self.0.put(&key, data)
    }
}

/// Counters summed over a cluster's running replicas.
#[derive(Clone, Copy, Debug, Default)]
struct Counters {
    write_bytes: u64,
    cpu_secs: f64,
    fsyncs: f64,
    /// etcd: WAL fsyncs and backend (bbolt) commits apart.
    wal_fsyncs: f64,
    backend_commits: f64,
    /// etcd: its gRPC server's handling of Put (sum of seconds, count).
    put_secs: f64,
    puts: f64,
}

impl Counters {
    fn since(&self, a: &Counters) -> Counters {
        Counters {
            write_bytes: self.write_bytes.saturating_sub(a.write_bytes),
            cpu_secs: self.cpu_secs - a.cpu_secs,
            fsyncs: self.fsyncs - a.fsyncs,
            wal_fsyncs: self.wal_fsyncs - a.wal_fsyncs,
            backend_commits: self.backend_commits - a.backend_commits,
            put_secs: self.put_secs - a.put_secs,
            puts: self.puts - a.puts,
        }
    }
}

/// `write_bytes` of `/proc/<pid>/io`: bytes the process caused to be written
/// to storage (page-cache pages it dirtied, direct I/O).
fn proc_write_bytes(pid: u32) -> Result<u64> {
    let path = format!("/proc/{pid}/io");
    let text = std::fs::read_to_string(&path).with_context(|| format!("reading {path}"))?;
    text.lines()
        .find_map(|l| l.strip_prefix("write_bytes:"))
        .and_then(|v| v.trim().parse().ok())
        .with_context(|| format!("no write_bytes in {path}"))
}

/// Bytes written to the block device that holds `dir` (`/proc/diskstats`,
/// sectors of 512 bytes): everything the device was asked to write,
/// file-system metadata included, by every process (the machine is quiet
/// during a run).
fn device_written(dir: &Path) -> Result<u64> {
    use std::os::unix::fs::MetadataExt;
    let dev = std::fs::metadata(dir)
        .with_context(|| format!("reading {}", dir.display()))?
        .dev();
    let (major, minor) = (
        ((dev >> 8) & 0xfff) | ((dev >> 32) & !0xfff),
        (dev & 0xff) | ((dev >> 12) & !0xff),
    );
    let text = std::fs::read_to_string("/proc/diskstats").context("reading /proc/diskstats")?;
    text.lines()
        .find_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let (ma, mi) = (
                f.first()?.parse::<u64>().ok()?,
                f.get(1)?.parse::<u64>().ok()?,
            );
            (ma == major && mi == minor).then(|| f.get(9)?.parse::<u64>().ok())?
        })
        .map(|sectors| sectors * 512)
        .with_context(|| format!("no device {major}:{minor} in /proc/diskstats"))
}

/// User + system CPU seconds of a process (all its threads).
fn proc_cpu_secs(pid: u32) -> Result<f64> {
    let path = format!("/proc/{pid}/stat");
    let text = std::fs::read_to_string(&path).with_context(|| format!("reading {path}"))?;
    // Fields after the command name (which may hold spaces): state is the
    // first, utime the 12th, stime the 13th.
    let rest = text
        .rsplit_once(')')
        .map(|(_, r)| r)
        .with_context(|| format!("unexpected {path}"))?;
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| -> Result<u64> {
        f.get(i)
            .and_then(|v| v.parse().ok())
            .with_context(|| format!("unexpected {path}"))
    };
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    Ok((ticks(11)? + ticks(12)?) as f64 / hz)
}

/// CPU seconds of this process (the clients; the replicas are children that
/// have not exited, so they are not included).
fn own_cpu_secs() -> f64 {
    // SAFETY: getrusage fills the struct it is given.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) } != 0 {
        return 0.0;
    }
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

/// A running cluster of either system.
enum Cluster {
    Hydra {
        c: HydraCluster,
        /// For `info_at` (leaders, decided indexes).
        probe: Box<VolumeClient>,
    },
    Etcd(EtcdCluster),
}

impl Cluster {
    fn start(sys: Sys, dir: &Path, block: usize) -> Result<Cluster> {
        match sys {
            Sys::Hydra | Sys::HydraInline => {
                let mode = if sys == Sys::Hydra {
                    Mode::Reference
                } else {
                    Mode::Inline
                };
                let c = HydraCluster::start(dir, mode, block as u32, VOLUME_BYTES / block as u64)?;
                let mut probe =
                    VolumeClient::connect(&c.addrs).context("connecting to the hydra volume")?;
                // A leader, and the first write done.
                probe
                    .write(0, &vec![1u8; block])
                    .context("the first hydra write")?;
                Ok(Cluster::Hydra {
                    c,
                    probe: Box::new(probe),
                })
            }
            Sys::Etcd => {
                let c = Cluster::Etcd(EtcdCluster::start(dir)?);
                c.writer()?
                    .put(0, &vec![1u8; block])
                    .context("the first etcd put")?;
                Ok(c)
            }
        }
    }

    fn writer(&self) -> Result<Box<dyn BlockWriter>> {
        match self {
            Cluster::Hydra { c, .. } => Ok(Box::new(
                VolumeClient::connect(&c.addrs).context("connecting to the hydra volume")?,
            )),
            Cluster::Etcd(c) => {
                let leader = c.leader()?;
                let addr = c.client_addr(leader).context("no leader address")?;
                Ok(Box::new(EtcdWriter(EtcdGrpc::connect(addr)?)))
            }
        }
    }

    fn pids(&self) -> Vec<u32> {
        match self {
            Cluster::Hydra { c, .. } => c.pids(),
            Cluster::Etcd(c) => c.pids(),
        }
    }

    fn counters(&mut self) -> Result<Counters> {
        let mut k = Counters::default();
        for pid in self.pids() {
            k.write_bytes += proc_write_bytes(pid)?;
            k.cpu_secs += proc_cpu_secs(pid)?;
        }
        match self {
            Cluster::Hydra { c, .. } => k.fsyncs = c.fsyncs()? as f64,
            Cluster::Etcd(c) => {
                for text in c.metrics()? {
                    k.wal_fsyncs +=
                        etcd::metric(&text, "etcd_disk_wal_fsync_duration_seconds_count");
                    k.backend_commits +=
                        etcd::metric(&text, "etcd_disk_backend_commit_duration_seconds_count");
                    k.put_secs += etcd::metric_with(
                        &text,
                        "grpc_server_handling_seconds_sum",
                        "grpc_method=\"Put\"",
                    );
                    k.puts += etcd::metric_with(
                        &text,
                        "grpc_server_handling_seconds_count",
                        "grpc_method=\"Put\"",
                    );
                }
                k.fsyncs = k.wal_fsyncs + k.backend_commits;
            }
        }
        Ok(k)
    }

    /// The index (0..3) of the replica that leads.
    fn leader(&mut self) -> Result<usize> {
        match self {
            Cluster::Hydra { c, probe } => {
                for &a in &c.addrs {
                    if let Ok(info) = probe.info_at(a)
                        && let Some(Some(id)) = info.leaders.first()
                        && let Some(i) = c.index_of(*id)
                    {
                        return Ok(i);
                    }
                }
                bail!("no hydra replica knows a leader")
            }
            Cluster::Etcd(c) => c.leader(),
        }
    }

    /// How far replica `i` has applied (Hydra: its decided index, which the
    /// node applies in the same turn; etcd: raftAppliedIndex), and how far
    /// its log is committed (Hydra: the same; etcd: raftIndex).
    fn progress(&mut self, i: usize) -> Result<(u64, u64)> {
        match self {
            Cluster::Hydra { c, probe } => {
                let a = *c.addrs.get(i).context("no such replica")?;
                let info = probe.info_at(a)?;
                let d = info.decided.first().copied().context("no shard")?;
                Ok((d, d))
            }
            Cluster::Etcd(c) => {
                let s = c.status(i)?;
                Ok((s.applied_index, s.raft_index))
            }
        }
    }

    fn kill(&mut self, i: usize) {
        match self {
            Cluster::Hydra { c, .. } => c.kill(i),
            Cluster::Etcd(c) => c.kill(i),
        }
    }

    fn restart(&mut self, i: usize) -> Result<()> {
        match self {
            Cluster::Hydra { c, .. } => c.restart(i),
            Cluster::Etcd(c) => c.restart(i),
        }
    }

    fn stop(self) {
        match self {
            Cluster::Hydra { c, probe } => {
                drop(probe);
                c.stop()
            }
            Cluster::Etcd(c) => c.stop(),
        }
    }
}

/// What one system did in one configuration.
struct Outcome {
    writes: u64,
    secs: f64,
    /// Write latencies, sorted (ns).
    lat: Vec<u64>,
    /// Counters of the replicas over the writes (and [`SETTLE`] after).
    k: Counters,
    /// Bytes the device wrote over the same time ([`device_written`]).
    device_bytes: u64,
    /// CPU seconds of the harness (the clients) over the writes.
    client_cpu: f64,
    /// Whether the fsyncs were counted (Hydra: the interposition took
    /// effect in every replica process).
    counting: bool,
}

impl Outcome {
    fn logical_bytes(&self, block: usize) -> f64 {
        (self.writes * block as u64) as f64
    }

    fn pct_ms(&self, q: f64) -> f64 {
        if self.lat.is_empty() {
            return 0.0;
        }
        let i = ((self.lat.len() - 1) as f64 * q).round() as usize;
        self.lat[i.min(self.lat.len() - 1)] as f64 / 1e6
    }
}

/// `clients` threads writing `shape.block`-byte blocks through `writers`
/// until `bytes` are written in all or `cap` has passed. Returns (writes,
/// seconds, sorted latencies in ns).
fn drive(
    writers: Vec<Box<dyn BlockWriter>>,
    shape: Shape,
    bytes: u64,
    cap: Duration,
    seed: u64,
) -> Result<(u64, f64, Vec<u64>)> {
    let clients = writers.len().max(1) as u64;
    let per_client = (bytes / shape.block as u64 / clients).max(1);
    let blocks = shape.blocks();
    let slice = (blocks / clients).max(1);
    let stop = AtomicBool::new(false);
    let t0 = Instant::now();
    let deadline = t0 + cap;
    let results: Vec<Result<Vec<u64>>> = std::thread::scope(|s| {
        let handles: Vec<_> = writers
            .into_iter()
            .enumerate()
            .map(|(t, mut w)| {
                let stop = &stop;
                s.spawn(move || -> Result<Vec<u64>> {
                    let mut rng = SmallRng::seed_from_u64(
                        seed ^ (t as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15),
                    );
                    let mut data = vec![0u8; shape.block];
                    rng.fill(&mut data[..]);
                    let mut lat = Vec::with_capacity(per_client as usize);
                    for i in 0..per_client {
                        if stop.load(Ordering::Relaxed) || Instant::now() >= deadline {
                            break;
                        }
                        let block = if shape.random {
                            rng.random_range(0..blocks)
                        } else {
                            (t as u64 * slice + i % slice) % blocks
                        };
                        // Every write's data differs.
                        data[..8].copy_from_slice(&(i ^ (t as u64) << 48).to_le_bytes());
                        let s = Instant::now();
                        if let Err(e) = w.put(block, &data) {
                            stop.store(true, Ordering::Relaxed);
                            return Err(e);
                        }
                        lat.push(s.elapsed().as_nanos() as u64);
                    }
                    Ok(lat)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(anyhow::anyhow!("a client thread panicked")))
            })
            .collect()
    });
    let secs = t0.elapsed().as_secs_f64();
    let mut lat = Vec::new();
    for r in results {
        lat.extend(r?);
    }
    lat.sort_unstable();
    Ok((lat.len() as u64, secs, lat))
}

/// One system through one configuration, on a fresh cluster in `dir`.
fn measure(
    sys: Sys,
    shape: Shape,
    bytes: u64,
    cap: Duration,
    dir: &Path,
    seed: u64,
) -> Result<Outcome> {
    let mut c = Cluster::start(sys, dir, shape.block)?;
    let counting = match &c {
        Cluster::Hydra { c, .. } => c.fsync_counting,
        Cluster::Etcd(_) => true,
    };
    let writers = (0..shape.clients)
        .map(|_| c.writer())
        .collect::<Result<Vec<_>>>()?;
    let before = c.counters()?;
    let device0 = device_written(dir)?;
    let cpu0 = own_cpu_secs();
    let (writes, secs, lat) = drive(writers, shape, bytes, cap, seed)?;
    let client_cpu = own_cpu_secs() - cpu0;
    std::thread::sleep(SETTLE);
    let k = c.counters()?.since(&before);
    let device_bytes = device_written(dir)?.saturating_sub(device0);
    c.stop();
    if writes == 0 {
        bail!("{} wrote nothing in {secs:.1} s", sys.label());
    }
    Ok(Outcome {
        writes,
        secs,
        lat,
        k,
        device_bytes,
        client_cpu,
        counting,
    })
}

/// What the catch-up of a killed replica took.
struct CatchUp {
    secs: f64,
    /// Log entries the replica missed: the leader's committed index when
    /// the replica started again less the replica's applied index when it
    /// was killed.
    behind: u64,
    /// Seconds until the restarted process answered at all (etcd serves
    /// clients only once it has caught up, so there this is the whole
    /// catch-up).
    start_secs: f64,
}

/// SIGKILL a follower, write `bytes` in 64 KiB blocks from 16 clients, start
/// it again and time until it has applied what the leader had committed
/// when the writes ended.
fn catch_up(sys: Sys, bytes: u64, dir: &Path, seed: u64) -> Result<CatchUp> {
    let shape = Shape {
        block: 65536,
        random: true,
        clients: 16,
    };
    let mut c = Cluster::start(sys, dir, shape.block)?;
    let leader = c.leader()?;
    let victim = (leader + 1) % 3;
    let (applied_before, _) = c.progress(victim)?;
    c.kill(victim);
    let writers = (0..shape.clients)
        .map(|_| c.writer())
        .collect::<Result<Vec<_>>>()?;
    let (writes, _, _) = drive(writers, shape, bytes, Duration::from_secs(600), seed)?;
    if writes * (shape.block as u64) < bytes {
        bail!(
            "{}: only {writes} writes while a replica was down",
            sys.label()
        );
    }
    let leader = c.leader()?;
    let (_, target) = c.progress(leader)?;
    let t0 = Instant::now();
    c.restart(victim)?;
    let mut start_secs = None;
    // Give up once the replica has applied nothing more for STALL (it may
    // never catch up: the run goes on and says so).
    let mut last = (applied_before, Instant::now());
    loop {
        if let Ok((applied, _)) = c.progress(victim) {
            if start_secs.is_none() {
                start_secs = Some(t0.elapsed().as_secs_f64());
            }
            if applied >= target {
                break;
            }
            if applied > last.0 {
                last = (applied, Instant::now());
            }
        }
        if last.1.elapsed() > STALL {
            let at = last.0;
            c.stop();
            bail!(
                "the restarted replica did not catch up: at index {at} of {target} (it was at {applied_before} when killed), no progress for {} s",
                STALL.as_secs()
            );
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let secs = t0.elapsed().as_secs_f64();
    c.stop();
    Ok(CatchUp {
        secs,
        behind: target.saturating_sub(applied_before),
        start_secs: start_secs.unwrap_or(secs),
    })
}

fn rows_of(sys: Sys, shape: Shape, o: &Outcome, rows: &mut Vec<ResultRow>) {
    let label = sys.label();
    let p = shape.name();
    let m = |x: &str| format!("{p} {x}");
    let logical = o.logical_bytes(shape.block);
    let mib = logical / MIB;
    rows.push(ResultRow::measure(
        label,
        &m("throughput"),
        "MiB/s",
        mib / o.secs,
    ));
    rows.push(ResultRow::measure(
        label,
        &m("writes"),
        "ops/s",
        o.writes as f64 / o.secs,
    ));
    rows.push(ResultRow::measure(
        label,
        &m("p50 latency"),
        "ms",
        o.pct_ms(0.5),
    ));
    rows.push(ResultRow::measure(
        label,
        &m("p99 latency"),
        "ms",
        o.pct_ms(0.99),
    ));
    rows.push(ResultRow::measure(
        label,
        &m("disk bytes per byte"),
        "x",
        o.k.write_bytes as f64 / logical,
    ));
    rows.push(ResultRow::stat(
        label,
        &m("device bytes per byte"),
        "x",
        o.device_bytes as f64 / logical,
    ));
    if o.counting {
        rows.push(ResultRow::measure(
            label,
            &m("fsyncs per MiB"),
            "fsyncs/MiB",
            o.k.fsyncs / mib,
        ));
        rows.push(ResultRow::stat(
            label,
            &m("fsyncs per write"),
            "fsyncs",
            o.k.fsyncs / o.writes as f64,
        ));
    }
    rows.push(ResultRow::stat(label, &m("written"), "MiB", mib));
    rows.push(ResultRow::stat(
        label,
        &m("server CPU per write"),
        "us",
        o.k.cpu_secs / o.writes as f64 * 1e6,
    ));
    rows.push(ResultRow::stat(
        label,
        &m("client CPU per write"),
        "us",
        o.client_cpu / o.writes as f64 * 1e6,
    ));
    if sys == Sys::Etcd {
        rows.push(ResultRow::stat(
            label,
            &m("WAL fsyncs per MiB"),
            "fsyncs/MiB",
            o.k.wal_fsyncs / mib,
        ));
        rows.push(ResultRow::stat(
            label,
            &m("backend commits per MiB"),
            "commits/MiB",
            o.k.backend_commits / mib,
        ));
        if o.k.puts > 0.0 {
            rows.push(ResultRow::stat(
                label,
                &m("server-side Put mean"),
                "ms",
                o.k.put_secs / o.k.puts * 1e3,
            ));
        }
        let mean = o.lat.iter().sum::<u64>() as f64 / o.lat.len().max(1) as f64 / 1e6;
        rows.push(ResultRow::stat(
            label,
            &m("client-observed mean"),
            "ms",
            mean,
        ));
    }
}

impl Workload for Hydra {
    fn name(&self) -> &'static str {
        "hydra"
    }

    fn description(&self) -> &'static str {
        "Hydra, Silt's replicated block volume (3 replica processes, with and without the reference trick), beside a 3-member etcd storing the same blocks: throughput, latency, disk bytes and fsyncs per logical byte, catch-up of a killed replica"
    }

    fn explanation(&self) -> &'static str {
        "Issue 24: Hydra (seed 001 ch. 6, crates/silt-volume) against etcd 3.4, both with three \
         replicas on loopback, each replica its own process, every write acknowledged once a \
         majority has it on disk (fdatasync on). hydra is the volume with the reference trick \
         (Mode::Reference: a write's data goes to the replica's file store once and the \
         replicated log keeps its place), hydra-inline without it (Mode::Inline: the log keeps \
         the data and applying writes it again), etcd stores each block as a key (b + the block \
         number, 8 bytes big-endian) through its gRPC API (KV/Put), one HTTP/2 connection per \
         client to the leader. For 4 KiB and 64 KiB blocks, random (uniform over a \
         1 GiB volume) and sequential (each client its own slice) block numbers, 1 and 16 \
         clients, each on a fresh cluster: write throughput (MiB/s, writes/s), p50/p99 write \
         latency, disk bytes per logical byte (the sum over the three replicas of \
         /proc/<pid>/io write_bytes; the floor is 3.0; beside it, as a statistic, the bytes \
         the disk device wrote over the same time, file-system metadata included, from \
         /proc/diskstats), fsyncs per logical MiB (Hydra: \
         fsync+fdatasync calls counted inside each replica process; etcd: WAL fsyncs + backend \
         commits from each member's /metrics), the servers' and the client's CPU per write. Then \
         the catch-up of a killed replica: SIGKILL a follower, write in 64 KiB blocks from 16 \
         clients, start it again and time until it has applied what the leader had committed. \
         Target: Hydra's throughput at 16 clients at least 3x etcd's."
    }

    fn durability(&self) -> &'static str {
        "replicated: acknowledged once a majority of 3 has fsynced (Hydra fdatasync on; etcd defaults)"
    }

    fn run(&self, scale: Scale, ctx: &Ctx) -> Result<Vec<ResultRow>> {
        let (bytes, cap, catch_bytes) = sizes(scale);
        let etcd_version = etcd::version();
        let mut systems: Vec<Sys> = ALL.iter().copied().filter(|s| wants(ctx, *s)).collect();
        if etcd_version.is_none() && systems.contains(&Sys::Etcd) {
            eprintln!("note: skipping etcd: no etcd on PATH");
            ctx.note(
                "etcd: SKIPPED: no etcd on PATH (bench/setup.sh installs Debian's etcd-server)"
                    .into(),
            );
            systems.retain(|s| *s != Sys::Etcd);
        }
        ctx.note(format!(
            "hydra: per configuration {} MiB or {} s, whichever comes first, on a fresh cluster; 1 GiB volume; catch-up: {} MiB in 64 KiB random writes from 16 clients while a follower is down (a replica that applies nothing for {} s is recorded as FAILED)",
            bytes >> 20,
            cap.as_secs(),
            catch_bytes
                .iter()
                .map(|b| (b >> 20).to_string())
                .collect::<Vec<_>>()
                .join(" and "),
            STALL.as_secs()
        ));
        for s in &systems {
            match s {
                Sys::Hydra | Sys::HydraInline => ctx.note(format!(
                    "{}: 3 replica processes (silt-bench hydra-node) on loopback, one shard, fdatasync on, tick 10 ms, {}, space provisioned when each replica is created (the default: its share of the volume and an eighth more written as zeros, before the timed writes; see docs/reproductions/hydra.md); clients: silt_volume::client::VolumeClient, one connection each",
                    s.label(),
                    if *s == Sys::Hydra { "Mode::Reference (the reference trick)" } else { "Mode::Inline (the log keeps the data)" }
                )),
                Sys::Etcd => ctx.note(format!(
                    "etcd: {}, 3 members on loopback, defaults (fsync on, snapshot-count 100000, heartbeat 100 ms) plus --quota-backend-bytes {} --max-request-bytes {} --auto-compaction-mode {} --auto-compaction-retention {} --metrics extensive; clients: gRPC etcdserverpb.KV/Put to the leader (HTTP/2 via h2, PutRequest encoded by the harness), one connection each",
                    etcd_version.as_deref().unwrap_or("?"),
                    etcd::QUOTA_BACKEND_BYTES,
                    etcd::MAX_REQUEST_BYTES,
                    etcd::AUTO_COMPACTION.0,
                    etcd::AUTO_COMPACTION.1
                )),
            }
        }
        let mut rows = Vec::new();
        let mut counting = true;
        // For the ratios: (shape, system, MiB/s, disk bytes per byte).
        let mut seen: Vec<(String, Sys, f64, f64)> = Vec::new();
        for shape in Shape::all() {
            let mut order = systems.clone();
            if !order.is_empty() {
                let n = order.len();
                order.rotate_left(ctx.run % n);
            }
            for sys in order {
                let scratch = ScratchDir::new(
                    &ctx.scratch,
                    &format!("hydra-{}-{}", sys.label(), shape.name().replace(' ', "-")),
                )?;
                let what = format!("{} {}", sys.label(), shape.name());
                let o = measure(sys, shape, bytes, cap, scratch.path(), ctx.seed)
                    .with_context(|| what.clone())?;
                counting &= o.counting;
                let logical = o.logical_bytes(shape.block);
                eprintln!(
                    "{what}: {} writes/s, {:.1} MiB/s, p50 {:.2} ms, p99 {:.2} ms, disk {:.2} x (device {:.2} x), {:.1} fsyncs/MiB",
                    fmt_num(o.writes as f64 / o.secs),
                    logical / MIB / o.secs,
                    o.pct_ms(0.5),
                    o.pct_ms(0.99),
                    o.k.write_bytes as f64 / logical,
                    o.device_bytes as f64 / logical,
                    o.k.fsyncs / (logical / MIB)
                );
                rows_of(sys, shape, &o, &mut rows);
                seen.push((
                    shape.name(),
                    sys,
                    logical / MIB / o.secs,
                    o.k.write_bytes as f64 / logical,
                ));
            }
        }
        let find = |name: &str, s: Sys| seen.iter().find(|(n, x, _, _)| n == name && *x == s);
        for shape in Shape::all() {
            let name = shape.name();
            if let (Some(e), true) = (find(&name, Sys::Etcd), shape.clients == 16) {
                for s in [Sys::Hydra, Sys::HydraInline] {
                    if let Some(h) = find(&name, s) {
                        let mut r = ResultRow::new(
                            &format!("{}/etcd", s.label()),
                            &format!("{name} throughput"),
                            "x",
                            Kind::Ratio,
                            h.2 / e.2,
                        );
                        if s == Sys::Hydra {
                            r = r.with_target(TARGET_VS_ETCD);
                        }
                        rows.push(r);
                    }
                }
            }
            // Disk bytes Hydra saves: the reference trick (against
            // hydra-inline), and against etcd.
            let Some(h) = find(&name, Sys::Hydra) else {
                continue;
            };
            for (other, what) in [(Sys::HydraInline, "inline"), (Sys::Etcd, "etcd")] {
                if let Some(o) = find(&name, other) {
                    rows.push(ResultRow::stat(
                        "hydra",
                        &format!("{name} disk I/O saved vs {what}"),
                        "%",
                        100.0 * (1.0 - h.3 / o.3),
                    ));
                }
            }
        }
        if !counting {
            ctx.note("hydra: fsync counting did not take effect in a replica process: no fsync rows for Hydra".into());
        }
        for &amount in catch_bytes {
            let mib = amount >> 20;
            for sys in &systems {
                let label = sys.label();
                let scratch =
                    ScratchDir::new(&ctx.scratch, &format!("hydra-catchup-{mib}-{label}"))?;
                let cu = match catch_up(*sys, amount, scratch.path(), ctx.seed) {
                    Ok(cu) => cu,
                    Err(e) => {
                        // Keep the rest of the results; the header says what failed.
                        eprintln!("{label} catch-up after {mib} MiB FAILED: {e:#}");
                        ctx.note(format!("{label}: catch-up after {mib} MiB FAILED: {e:#}"));
                        continue;
                    }
                };
                eprintln!(
                    "{label} catch-up after {mib} MiB: {:.2} s ({} log entries missed; answering after {:.2} s)",
                    cu.secs, cu.behind, cu.start_secs
                );
                let m = |x: &str| format!("catch-up after {mib} MiB{x}");
                rows.push(ResultRow::measure(label, &m(""), "s", cu.secs));
                rows.push(ResultRow::stat(
                    label,
                    &m(": rate"),
                    "MiB/s",
                    mib as f64 / cu.secs,
                ));
                rows.push(ResultRow::stat(
                    label,
                    &m(": log entries missed"),
                    "entries",
                    cu.behind as f64,
                ));
                rows.push(ResultRow::stat(
                    label,
                    &m(": restart to first answer"),
                    "s",
                    cu.start_secs,
                ));
            }
        }
        Ok(rows)
    }
}
