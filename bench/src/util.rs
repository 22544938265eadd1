//! Small helpers shared by the harness: I/O counters, directory sizes, OS
//! page-cache eviction and residency, progress bars, percentiles, number
//! formatting, timestamps and loopback ports.

use std::{
    fs,
    path::{Path, PathBuf},
    time::{Duration, SystemTime, UNIX_EPOCH},
};

use anyhow::{Context, Result};
use indicatif::{ProgressBar, ProgressStyle};

/// A loopback TCP port free at the moment of asking (for a server the harness
/// starts: `silt serve`, Redis, PostgreSQL).
pub fn free_port() -> Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

/// The process-wide I/O counters of `/proc/self/io` (all threads, including the
/// background threads of an embedded engine).
#[derive(Clone, Copy, Debug, Default)]
pub struct IoCounters {
    /// Bytes passed to write-like system calls.
    pub wchar: u64,
    /// Bytes passed to read-like system calls.
    pub rchar: u64,
    /// Bytes this process caused to be read from the storage device.
    pub read_bytes: u64,
    /// Bytes this process caused to be sent to the storage device.
    pub write_bytes: u64,
    /// Dirty bytes that were never written because their file was truncated or deleted.
    pub cancelled_write_bytes: u64,
}

impl IoCounters {
    /// Reads `/proc/self/io`; all zero (with `available == false`) where it doesn't exist.
    pub fn read() -> (Self, bool) {
        let Ok(text) = fs::read_to_string("/proc/self/io") else {
            return (Self::default(), false);
        };
        let mut c = Self::default();
        for line in text.lines() {
            let Some((k, v)) = line.split_once(':') else {
                continue;
            };
            let v: u64 = v.trim().parse().unwrap_or(0);
            match k.trim() {
                "wchar" => c.wchar = v,
                "rchar" => c.rchar = v,
                "read_bytes" => c.read_bytes = v,
                "write_bytes" => c.write_bytes = v,
                "cancelled_write_bytes" => c.cancelled_write_bytes = v,
                _ => {}
            }
        }
        (c, true)
    }

    /// Counter increments since `earlier`.
    pub fn since(&self, earlier: &Self) -> Self {
        Self {
            wchar: self.wchar.saturating_sub(earlier.wchar),
            rchar: self.rchar.saturating_sub(earlier.rchar),
            read_bytes: self.read_bytes.saturating_sub(earlier.read_bytes),
            write_bytes: self.write_bytes.saturating_sub(earlier.write_bytes),
            cancelled_write_bytes: self
                .cancelled_write_bytes
                .saturating_sub(earlier.cancelled_write_bytes),
        }
    }

    /// Bytes that actually reached (or will reach) the device.
    pub fn device_write_bytes(&self) -> u64 {
        self.write_bytes.saturating_sub(self.cancelled_write_bytes)
    }
}

/// Whole-disk counters of the block device holding a directory (from
/// `/sys/class/block/DEV/stat`, the parent disk for a partition). They count the
/// I/O of every process on the machine.
#[derive(Clone, Copy, Debug, Default)]
pub struct DiskCounters {
    /// Bytes written to the device.
    pub write_bytes: u64,
    /// Flush requests completed: an fsync on ext4 usually costs one (the journal
    /// commit with a pre-flush) or two.
    pub flushes: u64,
}

impl DiskCounters {
    /// The counters of the disk holding `dir`; `None` where the kernel doesn't
    /// report them (flushes need Linux >= 5.5).
    pub fn read(dir: &Path) -> Option<Self> {
        let disk = crate::machine::disk_of(dir);
        let name = disk.split_whitespace().next()?.strip_prefix("/dev/")?;
        let sys = fs::canonicalize(Path::new("/sys/class/block").join(name)).ok()?;
        let base = if sys.join("partition").exists() {
            sys.parent()?.to_path_buf()
        } else {
            sys
        };
        let text = fs::read_to_string(base.join("stat")).ok()?;
        let f: Vec<u64> = text
            .split_whitespace()
            .map(|v| v.parse().unwrap_or(0))
            .collect();
        Some(Self {
            // Fields 7 and 16 (1-based): sectors written (512 bytes), flushes completed.
            write_bytes: f.get(6)? * 512,
            flushes: *f.get(15)?,
        })
    }

    /// Counter increments since `earlier`.
    pub fn since(&self, earlier: &Self) -> Self {
        Self {
            write_bytes: self.write_bytes.saturating_sub(earlier.write_bytes),
            flushes: self.flushes.saturating_sub(earlier.flushes),
        }
    }
}

/// The resident set size of this process (`VmRSS` of `/proc/self/status`), bytes.
pub fn rss_bytes() -> Option<u64> {
    let text = fs::read_to_string("/proc/self/status").ok()?;
    let line = text.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// Gives the heap memory freed so far back to the OS (glibc's `malloc_trim`), so
/// that an RSS difference taken afterwards measures what comes next rather than
/// memory reused from an earlier system.
pub fn trim_heap() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim takes no pointers; it only releases free pages of
    // glibc's own heap and is safe to call at any time.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Total length of all regular files below `dir`.
pub fn dir_size(dir: &Path) -> Result<u64> {
    let mut total = 0;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in fs::read_dir(&d).with_context(|| format!("listing {}", d.display()))? {
            let entry = entry.with_context(|| format!("listing {}", d.display()))?;
            let meta = entry
                .metadata()
                .with_context(|| format!("stat {}", entry.path().display()))?;
            if meta.is_dir() {
                stack.push(entry.path());
            } else {
                total += meta.len();
            }
        }
    }
    Ok(total)
}

/// The regular files below `dir` (recursively; symbolic links are not followed).
fn regular_files(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in fs::read_dir(&d).with_context(|| format!("listing {}", d.display()))? {
            let entry = entry.with_context(|| format!("listing {}", d.display()))?;
            let ft = entry
                .file_type()
                .with_context(|| format!("stat {}", entry.path().display()))?;
            if ft.is_dir() {
                stack.push(entry.path());
            } else if ft.is_file() {
                files.push(entry.path());
            }
        }
    }
    Ok(files)
}

/// Opens `path` read-only; `None` if it vanished since it was listed (a
/// background merge of an open database may delete a component file).
fn open_if_present(path: &Path) -> Result<Option<fs::File>> {
    match fs::File::open(path) {
        Ok(f) => Ok(Some(f)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e).with_context(|| format!("opening {}", path.display())),
    }
}

/// Makes every regular file below `dir` durable (fsync) and asks the kernel to
/// drop its pages from the OS page cache (`posix_fadvise(POSIX_FADV_DONTNEED)`),
/// so that the next reads of these files go to the storage device. Returns the
/// number of files handled (files that vanish meanwhile are skipped).
///
/// Pages that a process currently has mapped (an open mmap it has touched) stay
/// cached: evict after a database is closed, and again after it is reopened
/// (its open may have read metadata), then check with [`os_cached_bytes`].
/// On tmpfs nothing can be dropped.
pub fn evict_os_cache(dir: &Path) -> Result<u64> {
    use std::os::fd::AsRawFd;
    let mut n = 0;
    for path in regular_files(dir)? {
        let Some(file) = open_if_present(&path)? else {
            continue;
        };
        // DONTNEED skips dirty pages: write them back first.
        file.sync_all()
            .with_context(|| format!("fsync of {}", path.display()))?;
        // SAFETY: posix_fadvise takes no pointers, only a descriptor and
        // integers. The descriptor is valid for the whole call: it belongs to
        // `file`, which is borrowed here and closed only when dropped below.
        // DONTNEED is advice about the kernel's page cache: it cannot change
        // the file's contents (the file was just fsynced, and dirty pages
        // are never discarded) or any memory of this process. Pages mapped
        // by this process (Silt's mmaps) are either left alone or faulted
        // back in from the same file contents on the next access, so
        // existing `&[u8]` views into mappings remain valid and unchanged.
        let rc = unsafe { libc::posix_fadvise(file.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
        if rc != 0 {
            // posix_fadvise returns the error number rather than setting errno.
            return Err(std::io::Error::from_raw_os_error(rc))
                .with_context(|| format!("posix_fadvise(DONTNEED) of {}", path.display()));
        }
        n += 1;
    }
    Ok(n)
}

/// (bytes of the files below `dir` held in the OS page cache, total bytes of
/// those files), from `mincore` on a fresh read-only mapping of each file
/// (which reports the page cache, not only this process's page tables). On a
/// kernel that restricts mincore (Linux >= 5.0) the caller must own the files
/// or be able to write them, as the harness does for its scratch databases.
pub fn os_cached_bytes(dir: &Path) -> Result<(u64, u64)> {
    use std::os::fd::AsRawFd;
    // SAFETY: sysconf takes no pointers and only reads a constant of the system.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    let page = u64::try_from(page)
        .ok()
        .filter(|&p| p > 0)
        .context("sysconf(_SC_PAGESIZE) failed")?;
    let (mut cached, mut total) = (0u64, 0u64);
    for path in regular_files(dir)? {
        let Some(file) = open_if_present(&path)? else {
            continue;
        };
        let len = file
            .metadata()
            .with_context(|| format!("stat {}", path.display()))?
            .len();
        if len == 0 {
            continue;
        }
        let map_len = usize::try_from(len)
            .with_context(|| format!("{} is too large to map", path.display()))?;
        let pages = len.div_ceil(page);
        let mut residency = vec![0u8; usize::try_from(pages).context("page count overflows")?];
        // SAFETY: a new read-only shared mapping of `map_len` bytes of an open
        // descriptor, at an address the kernel chooses (no existing mapping is
        // replaced). The mapping is never dereferenced, so a concurrent
        // truncation of the file cannot fault this process.
        let addr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                map_len,
                libc::PROT_READ,
                libc::MAP_SHARED,
                file.as_raw_fd(),
                0,
            )
        };
        if addr == libc::MAP_FAILED {
            return Err(std::io::Error::last_os_error())
                .with_context(|| format!("mmap of {} for mincore", path.display()));
        }
        // SAFETY: `addr` is page-aligned (returned by mmap) and `[addr,
        // addr + map_len)` is the mapping made above; `residency` has one byte per
        // page of that range (len rounded up to pages), which is exactly what
        // mincore writes.
        let rc = unsafe { libc::mincore(addr, map_len, residency.as_mut_ptr()) };
        let err = std::io::Error::last_os_error();
        // SAFETY: unmaps exactly the mapping made above, which nothing else
        // refers to (no reference into it was ever created).
        unsafe { libc::munmap(addr, map_len) };
        if rc != 0 {
            return Err(err).with_context(|| format!("mincore of {}", path.display()));
        }
        let resident = residency.iter().filter(|&&b| b & 1 == 1).count() as u64;
        cached += (resident * page).min(len);
        total += len;
    }
    Ok((cached, total))
}

/// Major page faults of this process so far (faults that had to read from
/// storage: mmap'd file pages not in the OS page cache), all threads;
/// `None` if getrusage fails.
pub fn major_faults() -> Option<u64> {
    // SAFETY: an all-zero rusage is a valid value of this plain C struct
    // (integers and timevals only).
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `ru` is a valid, writable rusage owned by this frame, which is
    // all getrusage writes to.
    let rc = unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    (rc == 0).then(|| u64::try_from(ru.ru_majflt).unwrap_or(0))
}

/// The kernel's readahead window of the disk holding `dir`, KiB
/// (`/sys/class/block/DEV/queue/read_ahead_kb`; the parent disk for a
/// partition). A fault on a mapped file not in the page cache reads up to this
/// much around the faulting page unless the mapping is advised random.
pub fn read_ahead_kb(dir: &Path) -> Option<u64> {
    let disk = crate::machine::disk_of(dir);
    let name = disk.split_whitespace().next()?.strip_prefix("/dev/")?;
    let sys = fs::canonicalize(Path::new("/sys/class/block").join(name)).ok()?;
    [Some(sys.clone()), sys.parent().map(Path::to_path_buf)]
        .iter()
        .flatten()
        .find_map(|b| fs::read_to_string(b.join("queue/read_ahead_kb")).ok())
        .and_then(|t| t.trim().parse().ok())
}

/// A scratch directory that is removed (with everything in it) when dropped.
pub struct ScratchDir {
    path: PathBuf,
}

impl ScratchDir {
    /// Creates `parent/name`, removing any leftover from an earlier, interrupted run.
    pub fn new(parent: &Path, name: &str) -> Result<Self> {
        let path = parent.join(name);
        if path.exists() {
            fs::remove_dir_all(&path)
                .with_context(|| format!("removing stale scratch dir {}", path.display()))?;
        }
        fs::create_dir_all(&path)
            .with_context(|| format!("creating scratch dir {}", path.display()))?;
        Ok(Self { path })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for ScratchDir {
    fn drop(&mut self) {
        if let Err(e) = fs::remove_dir_all(&self.path) {
            eprintln!(
                "warning: could not remove scratch dir {}: {e}",
                self.path.display()
            );
        }
    }
}

/// A progress bar for a phase of `len` steps (hidden automatically when stderr is not a terminal).
pub fn progress(len: u64, msg: impl Into<String>) -> ProgressBar {
    let pb = ProgressBar::new(len);
    pb.set_style(
        ProgressStyle::with_template(
            "{msg:>28} [{bar:32}] {pos:>9}/{len:9} {per_sec:>14} eta {eta}",
        )
        .unwrap_or_else(|_| ProgressStyle::default_bar())
        .progress_chars("=> "),
    );
    pb.set_message(msg.into());
    pb
}

/// A spinner for a phase of unknown length.
pub fn spinner(msg: impl Into<String>) -> ProgressBar {
    let pb = ProgressBar::new_spinner();
    pb.set_style(
        ProgressStyle::with_template("{spinner} {msg} ({elapsed})")
            .unwrap_or_else(|_| ProgressStyle::default_spinner()),
    );
    pb.set_message(msg.into());
    pb.enable_steady_tick(Duration::from_millis(200));
    pb
}

/// The `p`-th percentile (0..=100) of an ascending-sorted slice (nearest rank).
pub fn percentile(sorted: &[u32], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1] as f64
}

/// The median of a non-empty list of values (mean of the two middle ones for even lengths).
pub fn median(values: &[f64]) -> f64 {
    let mut v: Vec<f64> = values.to_vec();
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    if n == 0 {
        f64::NAN
    } else if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// Formats a number for tables: thousands separators for large values, three
/// significant digits for small ones.
pub fn fmt_num(x: f64) -> String {
    if x.is_nan() {
        return "-".into();
    }
    let a = x.abs();
    if a >= 1000.0 {
        let s = format!("{:.0}", a);
        let mut out = String::new();
        for (i, ch) in s.chars().enumerate() {
            if i > 0 && (s.len() - i) % 3 == 0 {
                out.push(',');
            }
            out.push(ch);
        }
        if x < 0.0 { format!("-{out}") } else { out }
    } else if a >= 100.0 || x.fract() == 0.0 {
        format!("{x:.0}")
    } else if a >= 10.0 {
        format!("{x:.1}")
    } else if a >= 1.0 || a == 0.0 {
        format!("{x:.2}")
    } else {
        format!("{x:.3}")
    }
}

/// `x` rounded to `digits` significant digits (keeps committed CSVs readable).
pub fn round_sig(x: f64, digits: i32) -> f64 {
    if x == 0.0 || !x.is_finite() {
        return x;
    }
    let scale = 10f64.powi(digits - 1 - x.abs().log10().floor() as i32);
    (x * scale).round() / scale
}

/// Seconds since the Unix epoch.
pub fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// `YYYY-MM-DD HH:MM:SS UTC` for a Unix timestamp.
pub fn utc_string(secs: u64) -> String {
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02} UTC",
        rem / 3600,
        (rem / 60) % 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_and_median() {
        let v: Vec<u32> = (1..=100).collect();
        assert_eq!(percentile(&v, 50.0), 50.0);
        assert_eq!(percentile(&v, 99.0), 99.0);
        assert_eq!(percentile(&v, 100.0), 100.0);
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
    }

    #[test]
    fn evict_os_cache_counts_files_and_names_a_missing_dir() {
        let root = ScratchDir::new(
            &std::env::temp_dir(),
            &format!("silt-bench-evict-{}", std::process::id()),
        )
        .expect("scratch dir");
        let sub = root.path().join("a/b");
        fs::create_dir_all(&sub).expect("mkdir");
        fs::write(root.path().join("one"), vec![7u8; 10_000]).expect("write");
        fs::write(sub.join("two"), b"x").expect("write");
        fs::write(sub.join("empty"), b"").expect("write");
        assert_eq!(evict_os_cache(root.path()).expect("evict"), 3);
        // Whether the pages really left depends on the file system (not on
        // tmpfs), so only the accounting is checked here.
        let (cached, total) = os_cached_bytes(root.path()).expect("mincore");
        assert_eq!(total, 10_001);
        assert!(cached <= total);

        let missing = root.path().join("no-such-dir");
        let err = evict_os_cache(&missing).expect_err("a missing directory is an error");
        let msg = format!("{err:#}");
        assert!(msg.contains("no-such-dir"), "{msg}");
        assert!(major_faults().is_some());
    }

    #[test]
    fn formatting() {
        assert_eq!(fmt_num(1_234_567.0), "1,234,567");
        assert_eq!(fmt_num(123_456.0), "123,456");
        assert_eq!(fmt_num(12.345), "12.3");
        assert_eq!(fmt_num(0.5), "0.500");
        assert_eq!(fmt_num(3.0), "3");
        assert_eq!(round_sig(597_869.198_7, 6), 597_869.0);
        assert_eq!(round_sig(0.012_345_67, 3), 0.0123);
        assert_eq!(utc_string(0), "1970-01-01 00:00:00 UTC");
        assert_eq!(utc_string(1_700_000_000), "2023-11-14 22:13:20 UTC");
    }
}
