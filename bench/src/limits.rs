//! Physical limits of the machine that every workload is compared against:
//! sequential write and read bandwidth of the results disk, fsyncs per second,
//! memory copy bandwidth. Measured once and cached in `limits.json`.

use std::{
    fs::{self, File, OpenOptions},
    io::{Read, Write},
    os::fd::AsRawFd,
    path::Path,
    time::{Duration, Instant},
};

use anyhow::{Context, Result, bail};
use serde::{Deserialize, Serialize};

use crate::{
    machine::Machine,
    util::{IoCounters, ScratchDir, fmt_num, median, progress, unix_now, utc_string},
};

const MIB: usize = 1 << 20;
/// Passes of the disk tests (the median is kept).
const PASSES: usize = 3;

/// The cached measurements.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Limits {
    /// Hardware the numbers belong to (see [`Machine::fingerprint`]); a mismatch re-measures.
    pub fingerprint: String,
    pub measured_at: String,
    /// Bytes written and read by the disk tests.
    pub file_bytes: u64,
    /// Write the file in 1 MiB chunks, fsync at the end (MB/s, 1 MB = 10^6 bytes;
    /// all disk numbers are the median of three passes).
    pub seq_write_mb_s: f64,
    /// Read it back after dropping it from the page cache (MB/s).
    pub seq_read_mb_s: f64,
    /// Whether the uncached read really went to the device (per /proc/self/io).
    pub seq_read_uncached: bool,
    /// Read it again from the page cache (MB/s).
    pub cached_read_mb_s: f64,
    /// Every pass of the disk tests, to show their spread (virtual disks vary a lot).
    #[serde(default)]
    pub seq_write_passes_mb_s: Vec<f64>,
    #[serde(default)]
    pub seq_read_passes_mb_s: Vec<f64>,
    /// Append 4 KiB + fdatasync, repeated for 1 s; median of three passes.
    pub fsyncs_per_s: f64,
    #[serde(default)]
    pub fsync_passes_per_s: Vec<f64>,
    /// Copy a 1 GiB buffer into another (GB/s of bytes copied; the memory traffic is twice that).
    pub mem_copy_gb_s: f64,
}

impl Limits {
    /// Loads `dir/limits.json` when it was measured on this hardware, otherwise measures
    /// (in a scratch directory under `dir/tmp`) and saves.
    pub fn load_or_measure(dir: &Path, machine: &Machine, force: bool) -> Result<Self> {
        let path = dir.join("limits.json");
        if !force && path.exists() {
            let text =
                fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
            match serde_json::from_str::<Limits>(&text) {
                Ok(l) if l.fingerprint == machine.fingerprint() => return Ok(l),
                Ok(_) => eprintln!(
                    "{} was measured on other hardware: re-measuring",
                    path.display()
                ),
                Err(e) => eprintln!("{} is unreadable ({e}): re-measuring", path.display()),
            }
        }
        let limits = Self::measure(dir, machine, 1024 * MIB)?;
        let _ = fs::remove_dir(dir.join("tmp")); // only if empty
        fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        let json = serde_json::to_string_pretty(&limits)?;
        fs::write(&path, json + "\n").with_context(|| format!("writing {}", path.display()))?;
        eprintln!("saved {}", path.display());
        Ok(limits)
    }

    /// Runs all the measurements; the disk ones on a `file_bytes` file under `dir/tmp`.
    pub fn measure(dir: &Path, machine: &Machine, file_bytes: usize) -> Result<Self> {
        let scratch = ScratchDir::new(&dir.join("tmp"), &format!("limits-{}", std::process::id()))?;
        let file = scratch.path().join("seq.bin");
        let chunks = file_bytes.div_ceil(MIB);
        let file_bytes = chunks * MIB;

        // fsyncs first: right after gigabytes of writes the device is still busy with them.
        // A virtual disk's fsync rate swings (by 10x when a neighbour hammers the
        // filesystem journal): median of three 1 s passes, every pass kept.
        let mut fsyncs = Vec::new();
        for _ in 0..PASSES {
            fsyncs.push(fsync_rate(
                &scratch.path().join("fsync.bin"),
                Duration::from_secs(1),
            )?);
        }
        let fsyncs_per_s = median(&fsyncs);
        eprintln!(
            "  fdatasync: {} /s (passes: {})",
            fmt_num(fsyncs_per_s),
            fsyncs
                .iter()
                .map(|x| fmt_num(*x))
                .collect::<Vec<_>>()
                .join(", ")
        );
        let mem_copy_gb_s = mem_copy(1024 * MIB);
        eprintln!("  memory copy: {} GB/s", fmt_num(mem_copy_gb_s));

        // The disk numbers of a (virtual) machine vary from pass to pass: take the median of three.
        let (mut writes, mut reads, mut cached) = (Vec::new(), Vec::new(), Vec::new());
        let mut uncached_verified = true;
        for pass in 1..=PASSES {
            writes.push(seq_write(&file, chunks)?);
            let (read, verified) = seq_read(&file, file_bytes, true)?;
            reads.push(read);
            uncached_verified &= verified;
            cached.push(seq_read(&file, file_bytes, false)?.0);
            eprintln!(
                "  pass {pass}/{PASSES}: sequential write {} MB/s, read {} MB/s{}, cached read {} MB/s",
                fmt_num(writes[pass - 1]),
                fmt_num(reads[pass - 1]),
                if verified {
                    ""
                } else {
                    " (page cache drop NOT verified)"
                },
                fmt_num(cached[pass - 1])
            );
        }
        let (seq_write_mb_s, seq_read_mb_s, cached_read_mb_s) =
            (median(&writes), median(&reads), median(&cached));
        let seq_read_uncached = uncached_verified;
        fs::remove_file(&file).with_context(|| format!("removing {}", file.display()))?;

        Ok(Self {
            fingerprint: machine.fingerprint(),
            measured_at: utc_string(unix_now()),
            file_bytes: file_bytes as u64,
            seq_write_mb_s,
            seq_read_mb_s,
            seq_read_uncached,
            cached_read_mb_s,
            seq_write_passes_mb_s: writes,
            seq_read_passes_mb_s: reads,
            fsyncs_per_s,
            fsync_passes_per_s: fsyncs,
            mem_copy_gb_s,
        })
    }

    /// `(name, value, unit)` for tables.
    pub fn entries(&self) -> Vec<(&'static str, f64, &'static str)> {
        vec![
            (
                "sequential write (1 MiB chunks, fsync at end)",
                self.seq_write_mb_s,
                "MB/s",
            ),
            (
                if self.seq_read_uncached {
                    "sequential read (page cache dropped)"
                } else {
                    "sequential read (page cache drop NOT verified)"
                },
                self.seq_read_mb_s,
                "MB/s",
            ),
            ("cached read", self.cached_read_mb_s, "MB/s"),
            ("fsyncs (4 KiB append + fdatasync)", self.fsyncs_per_s, "/s"),
            ("memory copy (1 GiB buffer)", self.mem_copy_gb_s, "GB/s"),
        ]
    }

    /// A one-line summary for result headers.
    pub fn summary_line(&self) -> String {
        format!(
            "seq_write={} MB/s seq_read={} MB/s{} cached_read={} MB/s fsync={}/s mem_copy={} GB/s (measured {})",
            fmt_num(self.seq_write_mb_s),
            fmt_num(self.seq_read_mb_s),
            if self.seq_read_uncached {
                ""
            } else {
                " (cache drop unverified)"
            },
            fmt_num(self.cached_read_mb_s),
            fmt_num(self.fsyncs_per_s),
            fmt_num(self.mem_copy_gb_s),
            self.measured_at
        )
    }

    pub fn print(&self) {
        println!("Physical limits (measured {}):", self.measured_at);
        for (name, v, unit) in self.entries() {
            println!("  {name:<48} {:>12} {unit}", fmt_num(v));
        }
        println!("  {}", self.spread_line());
    }

    /// The individual disk passes behind the medians.
    pub fn spread_line(&self) -> String {
        let list = |v: &[f64]| v.iter().map(|x| fmt_num(*x)).collect::<Vec<_>>().join(", ");
        let mut line = format!(
            "disk passes (median kept): write {} MB/s; read {} MB/s",
            list(&self.seq_write_passes_mb_s),
            list(&self.seq_read_passes_mb_s)
        );
        if !self.fsync_passes_per_s.is_empty() {
            line.push_str(&format!("; fsyncs {} /s", list(&self.fsync_passes_per_s)));
        }
        line
    }
}

fn pattern_chunk() -> Vec<u8> {
    // Incompressible-looking bytes, in case the filesystem or device compresses.
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    (0..MIB)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

fn seq_write(path: &Path, chunks: usize) -> Result<f64> {
    let buf = pattern_chunk();
    let mut f = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .open(path)
        .with_context(|| format!("creating {}", path.display()))?;
    let pb = progress(chunks as u64, "sequential write");
    let t = Instant::now();
    for i in 0..chunks {
        f.write_all(&buf)
            .with_context(|| format!("writing {}", path.display()))?;
        if i.is_multiple_of(16) {
            pb.set_position(i as u64);
        }
    }
    f.sync_all()
        .with_context(|| format!("fsync {}", path.display()))?;
    let secs = t.elapsed().as_secs_f64();
    pb.finish_and_clear();
    Ok((chunks * MIB) as f64 / secs / 1e6)
}

/// Reads the whole file in 1 MiB chunks; with `drop_cache`, first asks the kernel to
/// evict it from the page cache. Returns MB/s and whether the device was really read.
fn seq_read(path: &Path, bytes: usize, drop_cache: bool) -> Result<(f64, bool)> {
    let mut f = File::open(path).with_context(|| format!("opening {}", path.display()))?;
    if drop_cache {
        // SAFETY: plain syscall on a file descriptor we own; no memory is passed.
        let rc = unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
        if rc != 0 {
            eprintln!("  posix_fadvise(DONTNEED) failed with error {rc}: read may be cached");
        }
    }
    let (io0, io_ok) = IoCounters::read();
    let mut buf = vec![0u8; MIB];
    let pb = progress(
        (bytes / MIB) as u64,
        if drop_cache {
            "sequential read"
        } else {
            "cached read"
        },
    );
    let t = Instant::now();
    let mut total = 0usize;
    let mut i = 0u64;
    loop {
        let n = f
            .read(&mut buf)
            .with_context(|| format!("reading {}", path.display()))?;
        if n == 0 {
            break;
        }
        total += n;
        i += 1;
        if i.is_multiple_of(16) {
            pb.set_position(i);
        }
    }
    let secs = t.elapsed().as_secs_f64();
    pb.finish_and_clear();
    if total != bytes {
        bail!(
            "read {total} bytes from {}, expected {bytes}",
            path.display()
        );
    }
    let (io1, _) = IoCounters::read();
    let from_device = io_ok && io1.since(&io0).read_bytes as f64 >= 0.9 * bytes as f64;
    Ok((total as f64 / secs / 1e6, from_device))
}

/// Appends 4 KiB + `fdatasync` to a new file at `path` for `duration`; returns fsyncs/s.
pub fn fsync_rate(path: &Path, duration: Duration) -> Result<f64> {
    let mut f = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .open(path)
        .with_context(|| format!("creating {}", path.display()))?;
    let block = vec![0x5au8; 4096];
    let pb = crate::util::spinner("fdatasync loop");
    let t = Instant::now();
    let mut n = 0u64;
    while t.elapsed() < duration {
        f.write_all(&block)
            .with_context(|| format!("writing {}", path.display()))?;
        f.sync_data()
            .with_context(|| format!("fdatasync {}", path.display()))?;
        n += 1;
    }
    let secs = t.elapsed().as_secs_f64();
    pb.finish_and_clear();
    Ok(n as f64 / secs)
}

/// Best of three copies of a `bytes` buffer, in GB/s of bytes copied.
fn mem_copy(bytes: usize) -> f64 {
    let src = vec![0xa5u8; bytes];
    let mut dst = vec![0u8; bytes];
    dst.fill(1); // fault the pages in before timing
    let mut best = f64::INFINITY;
    for _ in 0..3 {
        let t = Instant::now();
        dst.copy_from_slice(std::hint::black_box(&src));
        std::hint::black_box(&mut dst);
        best = best.min(t.elapsed().as_secs_f64());
    }
    bytes as f64 / best / 1e9
}
