//! The machine header printed with (and stored in) every result: what the numbers
//! were measured on and with which versions.

use std::{fs, path::Path, process::Command};

use serde::{Deserialize, Serialize};

/// Facts about the machine, the toolchain and the systems under test.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Machine {
    pub cores: usize,
    pub memory_gib: f64,
    pub cpu: String,
    /// Device, filesystem and mount point holding the results (and scratch) directory.
    pub disk: String,
    pub kernel: String,
    pub rustc: String,
    pub silt_commit: String,
    pub peers: String,
    pub durability: String,
}

impl Machine {
    /// Collects the header for results stored in `results_dir`, under the given durability mode.
    pub fn collect(results_dir: &Path, durability: &str) -> Self {
        Self {
            cores: std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(1),
            memory_gib: mem_total_kib().map_or(f64::NAN, |k| k as f64 / (1024.0 * 1024.0)),
            cpu: cpu_model(),
            disk: disk_of(results_dir),
            kernel: fs::read_to_string("/proc/sys/kernel/osrelease")
                .map(|s| s.trim().to_string())
                .unwrap_or_else(|_| "unknown".into()),
            rustc: env!("SILT_BENCH_RUSTC_VERSION").to_string(),
            silt_commit: silt_commit(),
            peers: peer_versions(),
            durability: durability.to_string(),
        }
    }

    /// A key that changes when the hardware the limits were measured on changes.
    pub fn fingerprint(&self) -> String {
        format!(
            "{} cores, {:.0} GiB, {}, {}",
            self.cores, self.memory_gib, self.cpu, self.disk
        )
    }

    /// The one-line header.
    pub fn header_line(&self) -> String {
        format!(
            "cores={} memory={:.1}GiB cpu=\"{}\" disk=\"{}\" kernel={} rustc=\"{}\" silt={} peers=\"{}\" durability=\"{}\"",
            self.cores,
            self.memory_gib,
            self.cpu,
            self.disk,
            self.kernel,
            self.rustc,
            self.silt_commit,
            self.peers,
            self.durability
        )
    }
}

/// Versions of the peer systems linked into this binary.
#[cfg(feature = "peers")]
pub fn peer_versions() -> String {
    format!("RocksDB {}, SQLite {}", rocksdb_version(), sqlite_version())
}

/// Built without the `peers` feature: no peer library is linked (a workload's
/// server peers, such as etcd, are named in its own result header).
#[cfg(not(feature = "peers"))]
pub fn peer_versions() -> String {
    "none linked (built without the `peers` feature)".into()
}

/// "11.8.1 (rust-rocksdb 0.25.0)".
#[cfg(feature = "peers")]
pub fn rocksdb_version() -> String {
    format!(
        "{} (rust-rocksdb {})",
        env!("SILT_BENCH_ROCKSDB_VERSION"),
        env!("SILT_BENCH_ROCKSDB_CRATE_VERSION")
    )
}

/// "3.50.4 (rusqlite 0.41.1, bundled)": the library actually linked.
#[cfg(feature = "peers")]
pub fn sqlite_version() -> String {
    format!(
        "{} (rusqlite {}, bundled)",
        rusqlite::version(),
        env!("SILT_BENCH_RUSQLITE_CRATE_VERSION")
    )
}

/// CPU time counters of the whole machine and of this process, to tell how much
/// other work ran beside a benchmark (which makes its results noisy).
#[derive(Clone, Copy, Debug)]
pub struct CpuSnapshot {
    /// All CPU time, in clock ticks.
    total: u64,
    /// Non-idle CPU time of the machine.
    busy: u64,
    /// CPU time of this process (all threads) and of its children that
    /// ended (a server child the workload started and stopped).
    own: u64,
}

impl CpuSnapshot {
    pub fn take() -> Option<Self> {
        let stat = fs::read_to_string("/proc/stat").ok()?;
        let fields: Vec<u64> = stat
            .lines()
            .next()?
            .split_whitespace()
            .skip(1)
            .filter_map(|v| v.parse().ok())
            .collect();
        let total: u64 = fields.iter().sum();
        let idle = fields.get(3)? + fields.get(4).copied().unwrap_or(0); // idle + iowait
        // /proc/self/stat: fields after the ")" of the command name; utime and stime
        // are the 12th and 13th of those (fields 14 and 15 of the line), the
        // waited-for children's cutime and cstime the 14th and 15th.
        let own_stat = fs::read_to_string("/proc/self/stat").ok()?;
        let rest = own_stat.rsplit_once(')')?.1;
        let v: Vec<&str> = rest.split_whitespace().collect();
        let tick = |i: usize| v.get(i).and_then(|s| s.parse::<u64>().ok());
        let own = tick(11)? + tick(12)? + tick(13).unwrap_or(0) + tick(14).unwrap_or(0);
        Some(Self {
            total,
            busy: total - idle,
            own,
        })
    }

    /// The fraction (0..1) of all CPU time since `earlier` used by other processes.
    pub fn others_since(&self, earlier: &Self) -> Option<f64> {
        let total = self.total.checked_sub(earlier.total)?;
        let busy = self.busy.saturating_sub(earlier.busy);
        let own = self.own.saturating_sub(earlier.own);
        (total > 0).then(|| busy.saturating_sub(own) as f64 / total as f64)
    }
}

/// The fraction of the CPU other processes use over `window` (this process sleeps).
pub fn cpu_busy_fraction(window: std::time::Duration) -> Option<f64> {
    let a = CpuSnapshot::take()?;
    std::thread::sleep(window);
    CpuSnapshot::take()?.others_since(&a)
}

fn mem_total_kib() -> Option<u64> {
    let text = fs::read_to_string("/proc/meminfo").ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}

fn cpu_model() -> String {
    let text = fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    text.lines()
        .filter_map(|l| l.split_once(':'))
        .find(|(k, _)| {
            let k = k.trim();
            k == "model name" || k == "Processor" || k == "cpu model"
        })
        .map(|(_, v)| v.split_whitespace().collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|| std::env::consts::ARCH.to_string())
}

/// "`/dev/vda` (ext4 on /, ssd, model X)" for the filesystem holding `dir`.
pub fn disk_of(dir: &Path) -> String {
    let dir = fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
    let mounts = fs::read_to_string("/proc/mounts").unwrap_or_default();
    let best = mounts
        .lines()
        .filter_map(|l| {
            let mut it = l.split_whitespace();
            let dev = it.next()?;
            let mnt = it.next()?.replace("\\040", " ");
            let fstype = it.next()?;
            dir.starts_with(&mnt)
                .then(|| (dev.to_string(), mnt, fstype.to_string()))
        })
        .max_by_key(|(_, mnt, _)| mnt.len());
    let Some((dev, mnt, fstype)) = best else {
        return df_device(&dir).unwrap_or_else(|| "unknown".into());
    };
    let mut extra = Vec::new();
    if let Some(name) = dev.strip_prefix("/dev/") {
        // For a partition (vda1, nvme0n1p2) the queue attributes live on the parent disk.
        let sys = Path::new("/sys/class/block").join(name);
        let parent = fs::canonicalize(&sys)
            .ok()
            .and_then(|p| p.parent().map(|p| p.to_path_buf()));
        let candidates = [Some(sys), parent];
        for base in candidates.iter().flatten() {
            if let Ok(rot) = fs::read_to_string(base.join("queue/rotational")) {
                // As the kernel reports it (virtual disks often claim to be rotational).
                extra.push(format!("rotational={}", rot.trim()));
                if let Ok(model) = fs::read_to_string(base.join("device/model")) {
                    let model = model.trim();
                    if !model.is_empty() {
                        extra.push(format!("model {model}"));
                    }
                }
                break;
            }
        }
    }
    let extra = if extra.is_empty() {
        String::new()
    } else {
        format!(", {}", extra.join(", "))
    };
    format!("{dev} ({fstype} on {mnt}{extra})")
}

fn df_device(dir: &Path) -> Option<String> {
    let out = Command::new("df").arg("-P").arg(dir).output().ok()?;
    let text = String::from_utf8(out.stdout).ok()?;
    let line = text.lines().nth(1)?;
    line.split_whitespace().next().map(str::to_string)
}

/// The short commit of the Silt repository this harness was **built** from, with
/// `-dirty` when the core crates had uncommitted changes then (recorded by
/// `build.rs`, which reruns whenever `crates/` changes: asking git at run time
/// would mislabel a binary built before the latest commits).
fn silt_commit() -> String {
    env!("SILT_BENCH_SILT_COMMIT").to_string()
}
