//! Spare segments for the file store: files whose space is already written
//! (zeros, or a cleaned segment's old bytes) and synced before they are
//! used, so that appending a batch overwrites allocated blocks inside the
//! file's size and the batch's fdatasync flushes data only.
//!
//! An fdatasync after an append that grows a file (or fills a hole, or
//! writes into `fallocate`d space) must also write the inode or extent tree
//! that finds the new blocks, and wait for it. On this project's machine
//! (ext4, no journal, virtio disk) that made one replica's sync of a 28 KiB
//! batch take ~185 µs instead of ~115 µs, and three replicas syncing at once
//! ~370 µs instead of ~210 µs (`docs/reproductions/hydra.md`).
//!
//! A new store is provisioned the way a thick block device is: spares for
//! its share of the volume (up to [`EAGER_MAX`]) are written with zeros when
//! it is created ([`SegmentPool::provision`]; VMware calls the same choice
//! "eager zeroed"), so the first pass over the volume does not pay for its
//! fresh space while clients wait. Later spares are prepared on a thread of
//! its own, off the write path, one segment ahead: a cleaned segment is
//! reused when there is one ([`SegmentPool::retire`]), else (past what was
//! written at creation) a new file is filled with zeros. Either way the
//! spare gets a new segment head with a new salt, which every frame's
//! checksum covers, so whatever the file held before fails the frame checks
//! and reads as the segment's end. A reused segment costs no writes. A thin store (`zero_fill` off)
//! writes no zeros: new segments grow as they are written, and only reused
//! ones sync fast.
//!
//! Files in the store's directory besides the segments: `spare-<k>.frm`
//! (ready), `retired-<n>.frm` (a cleaned segment waiting to be reused) and
//! `prep.tmp` (being prepared; removed at open).

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::thread::JoinHandle;

/// The head of a salted segment: this magic, then the salt (u64 LE).
pub(crate) const MAGIC: &[u8; 8] = b"SILTSEG3";
pub(crate) const HEAD: u64 = 16;
/// Spares kept ready beyond the provision, and cleaned segments kept for
/// reuse at least.
const KEEP_READY: usize = 1;
const KEEP_RETIRED: usize = 2;
/// At most this much of a store's share is written at its creation (about
/// 3 s of zeros here); the rest is prepared in the background, a segment
/// ahead of the writes.
pub(crate) const EAGER_MAX: u64 = 1 << 30;
/// Zeros are written a page at a time: the page cache then holds them in
/// small folios, and overwriting a few KiB of a synced file dirties (and
/// writes back, and counts in `/proc/<pid>/io`) those pages only, not a
/// large folio around them.
const ZERO_PIECE: usize = 4096;

/// A new salt: random, never zero.
pub(crate) fn new_salt() -> u64 {
    rand::random::<u64>() | 1
}

/// The salt of the segment `f` if it starts with a salted head; None if it
/// does not (another format, or too short).
pub(crate) fn read_salt(f: &File) -> Option<u64> {
    let mut h = [0u8; HEAD as usize];
    f.read_exact_at(&mut h, 0).ok()?;
    (&h[..8] == MAGIC).then(|| u64::from_le_bytes(h[8..].try_into().unwrap_or_default()))
}

/// Delete `path`; one already gone is not an error.
pub(crate) fn remove_if_present(path: &Path) -> io::Result<()> {
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

/// The head of a segment with `salt`.
pub(crate) fn head(salt: u64) -> [u8; HEAD as usize] {
    let mut h = [0u8; HEAD as usize];
    h[..8].copy_from_slice(MAGIC);
    h[8..].copy_from_slice(&salt.to_le_bytes());
    h
}

pub(crate) struct SegmentPool {
    dir: PathBuf,
    /// Bytes a spare is written to (appends past them grow the file).
    bytes: u64,
    /// New files are written with zeros (else only cleaned ones are reused).
    zero_fill: bool,
    /// Segments the store's share of the volume takes: as many are written
    /// at creation (up to [`EAGER_MAX`]), and cleaned ones are kept for reuse
    /// while fewer are.
    provision: usize,
    ready: Vec<PathBuf>,
    retired: Vec<PathBuf>,
    job: Option<JoinHandle<io::Result<(PathBuf, u64)>>>,
    next: u64,
    /// Bytes of zeros written preparing new files.
    zeroed: u64,
}

impl SegmentPool {
    /// The pool of the store in `dir` (spares of `bytes`; `provision`: the
    /// bytes a new store is given, 0 for thin), with what an earlier run left
    /// there.
    pub(crate) fn open(dir: &Path, bytes: u64, provision: u64) -> io::Result<SegmentPool> {
        let bytes = bytes.max(HEAD);
        let mut pool = SegmentPool {
            dir: dir.to_path_buf(),
            bytes,
            zero_fill: provision > 0,
            provision: provision.div_ceil(bytes) as usize,
            ready: Vec::new(),
            retired: Vec::new(),
            job: None,
            next: 0,
            zeroed: 0,
        };
        for e in std::fs::read_dir(dir)? {
            let e = e?;
            let name = e.file_name();
            let Some(name) = name.to_str() else { continue };
            if name == "prep.tmp" {
                std::fs::remove_file(e.path())?;
            } else if let Some(k) = name
                .strip_prefix("spare-")
                .and_then(|s| s.strip_suffix(".frm"))
            {
                if let Ok(k) = u64::from_str_radix(k, 16) {
                    pool.next = pool.next.max(k + 1);
                }
                pool.ready.push(e.path());
            } else if name.starts_with("retired-") && name.ends_with(".frm") {
                pool.retired.push(e.path());
            }
        }
        Ok(pool)
    }

    /// Whether a spare is ready (a finished preparation is collected).
    pub(crate) fn has_ready(&mut self) -> bool {
        self.collect(false);
        !self.ready.is_empty()
    }

    /// Prepare the spares of a new store now, on this thread.
    pub(crate) fn provision(&mut self) -> io::Result<()> {
        self.collect(true);
        let count = self
            .provision
            .min(EAGER_MAX.div_ceil(self.bytes).max(1) as usize);
        let started = std::time::Instant::now();
        while self.ready.len() < count {
            let (path, zeroed) = prepare(&self.dir, self.retired.pop(), self.fill(), self.next)?;
            self.next += 1;
            self.zeroed += zeroed;
            self.ready.push(path);
        }
        if count > 0 {
            tracing::info!(
                dir = %self.dir.display(),
                segments = count,
                mib = (count as u64 * self.bytes) >> 20,
                secs = started.elapsed().as_secs_f64(),
                "provisioned the store's space"
            );
        }
        Ok(())
    }

    /// Move a ready spare to `path` (the directory is synced, so the name
    /// survives a crash); its salt, or None if no spare is ready or being
    /// prepared (one being prepared is waited for: a reused segment is ready
    /// at once, and new ones are started a whole segment ahead).
    pub(crate) fn take(&mut self, path: &Path) -> io::Result<Option<(File, u64)>> {
        self.collect(true);
        let Some(spare) = self.ready.pop() else {
            return Ok(None);
        };
        let f = OpenOptions::new().read(true).write(true).open(&spare)?;
        let Some(salt) = read_salt(&f) else {
            // Not one of ours after all: never used.
            std::fs::remove_file(&spare)?;
            return Ok(None);
        };
        std::fs::rename(&spare, path)?;
        File::open(&self.dir)?.sync_all()?;
        Ok(Some((f, salt)))
    }

    /// Start preparing a spare in the background if fewer than wanted are
    /// ready or being prepared.
    pub(crate) fn refill(&mut self) {
        self.collect(false);
        if self.job.is_some()
            || self.ready.len() >= KEEP_READY
            || (self.retired.is_empty() && !self.zero_fill)
        {
            return;
        }
        let (dir, source, bytes, k) =
            (self.dir.clone(), self.retired.pop(), self.fill(), self.next);
        self.next += 1;
        self.job = std::thread::Builder::new()
            .name("volume-segment-prep".into())
            .spawn(move || prepare(&dir, source, bytes, k))
            .ok();
    }

    /// Take a cleaned segment at `path` for reuse, or delete it if enough
    /// are kept. The caller syncs the directory.
    pub(crate) fn retire(&mut self, path: &Path, n: u32) -> io::Result<()> {
        if self.retired.len() < self.provision.max(KEEP_RETIRED) {
            let to = self.dir.join(format!("retired-{n:08x}.frm"));
            std::fs::rename(path, &to)?;
            self.retired.push(to);
            Ok(())
        } else {
            remove_if_present(path)
        }
    }

    /// The bytes a spare is written up to (a thin store writes none).
    fn fill(&self) -> u64 {
        if self.zero_fill { self.bytes } else { 0 }
    }

    /// Bytes of zeros written so far by the preparations collected.
    pub(crate) fn zeroed(&self) -> u64 {
        self.zeroed
    }

    /// Collect a finished preparation (waiting for it if `wait`).
    fn collect(&mut self, wait: bool) {
        if !self.job.as_ref().is_some_and(|j| wait || j.is_finished()) {
            return;
        }
        match self.job.take().map(|j| j.join()) {
            Some(Ok(Ok((path, zeroed)))) => {
                self.zeroed += zeroed;
                self.ready.push(path);
            }
            Some(Ok(Err(e))) => {
                tracing::warn!(dir = %self.dir.display(), error = %e, "preparing a spare segment failed");
            }
            Some(Err(_)) => {
                tracing::warn!(dir = %self.dir.display(), "preparing a spare segment panicked");
            }
            None => {}
        }
    }
}

impl Drop for SegmentPool {
    fn drop(&mut self) {
        // The thread writes in the directory: let it finish first.
        self.collect(true);
    }
}

/// Make `spare-<k>.frm` in `dir` from `source` (a cleaned segment) or a new
/// file: written with zeros up to `bytes` where it holds nothing, a new
/// head, synced. Its path and the zeros written.
fn prepare(dir: &Path, source: Option<PathBuf>, bytes: u64, k: u64) -> io::Result<(PathBuf, u64)> {
    let tmp = dir.join("prep.tmp");
    if let Some(s) = &source {
        std::fs::rename(s, &tmp)?;
    }
    let f = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(source.is_none())
        .open(&tmp)?;
    let len = f.metadata()?.len();
    let zeros = [0u8; ZERO_PIECE];
    let mut at = len;
    while at < bytes {
        let n = (bytes - at).min(ZERO_PIECE as u64) as usize;
        f.write_all_at(&zeros[..n], at)?;
        at += n as u64;
    }
    f.write_all_at(&head(new_salt()), 0)?;
    f.sync_all()?;
    let path = dir.join(format!("spare-{k:08x}.frm"));
    std::fs::rename(&tmp, &path)?;
    Ok((path, at - len))
}
