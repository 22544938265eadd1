//! The file store (seed 001 §6.3-6.4): a replica's block data, appended to
//! segment files, and Hydra's reference trick as the replicated log's
//! [`Payloads`].
//!
//! With the trick ([`Mode::Reference`]), a write's data goes to the current
//! segment once, and the log keeps only its [`Place`]; the data is read back
//! only to ship the entry to a replica that lacks it. Without it
//! ([`Mode::Inline`], the baseline the paper compares against), the log keeps
//! the data and applying the entry writes it to the store a second time.
//! [`StoreStats`] counts the bytes each way, for the "about 50 % less disk
//! I/O" claim.
//!
//! Places are this replica's own: the replicated entry carries data or a
//! local place, never another replica's offsets (the text's map "global for
//! all replicas" cannot hold them). Data appended for an entry that is later
//! overwritten in the log (a proposal lost with its leader) is never
//! referenced by a decided entry; reclaiming it, and the space of overwritten
//! and deleted blocks, is the volume's segment cleaning.
//!
//! The store also keeps the Paxos log's records ([`Payloads::sync_with_log`]):
//! a sync appends the log's new records as one chunk to the segment the
//! batch's data went to, and one fdatasync makes both durable (the log's own
//! file is written without one). Chunks are only needed until the log's
//! file is synced ([`Payloads::log_synced`]), which the log does when the
//! store asks (after a new segment was started); until then the store
//! refuses to delete the segments holding them, and opening the store reads
//! the chunks of the last two segments.
//!
//! Segments: `<dir>/seg-<n, 8 hex>.frm`, the magic `SILTSEG3` and the
//! segment's salt (u64 LE), then frames: a 12-byte head (kind, 3 zero bytes,
//! payload length u32 LE, CRC32C of the salt and the head's first 8 bytes
//! u32 LE) and the payload: one block's data (kind 1), or a log chunk (kind
//! 2: log id u64 LE, offset u64 LE, CRC32C of the records u32 LE, the
//! records). A place is the data's offset and length, checked against its
//! CRC32C when read. A new segment is a spare prepared ahead
//! ([`crate::segment_pool`]): its space is already written, so a sync
//! flushes data only. Segments of earlier formats are still read: `SILTSEG2`
//! (no salt) and `seg-<n>.dat` (raw data). The format is in
//! `docs/format/volume.md`.

use crate::op::{Payload, Place, VolumeOp};
use crate::segment_pool::{self, SegmentPool};
use parking_lot::Mutex;
use silt_replica::{ChunkTag, Payloads};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fs::{File, OpenOptions};
use std::io::{self, Seek, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Whether the log keeps places (the reference trick) or data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Reference,
    Inline,
}

/// Bytes written, for measurements.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StoreStats {
    pub data_bytes_written: u64,
    pub syncs: u64,
    /// Zeros written preparing new segment files (off the write path).
    pub zeroed_bytes: u64,
}

pub struct FileStore {
    dir: PathBuf,
    mode: Mode,
    block_size: u32,
    segment_bytes: u64,
    segments: BTreeMap<u32, File>,
    current: u32,
    current_len: u64,
    /// The current segment's salt, covered by its frames' checksums.
    salt: u64,
    /// Where the data of segments sealed in this run, or walked at open,
    /// ends (their files may be longer: prepared space never written).
    ends: BTreeMap<u32, u64>,
    pool: SegmentPool,
    /// Segments written since the last sync.
    dirty: Vec<u32>,
    /// Segments of the raw format (no frames; written before them).
    raw: BTreeSet<u32>,
    /// Segments holding log chunks the log's file may not have on disk yet.
    protected: BTreeSet<u32>,
    /// Log chunks found at open: (log id, offset, records).
    recovered: Vec<(u64, u64, Vec<u8>)>,
    /// The data of writes absorbed since the last sync, by the place of
    /// their first block: shipping them to other replicas (which happens
    /// before the sync) copies these instead of reading the segment back.
    recent: HashMap<(u32, u64), Vec<u8>>,
    stats: StoreStats,
}

/// The start of a framed segment without a salt (read only).
const SEGMENT_MAGIC_V2: &[u8; 8] = b"SILTSEG2";
/// Bytes of a frame's head.
const FRAME_HEAD: u64 = 12;
const KIND_DATA: u8 = 1;
const KIND_LOG: u8 = 2;
/// Bytes of a log chunk's payload before its records.
const CHUNK_HEAD: usize = 20;

fn segment_path(dir: &Path, n: u32) -> PathBuf {
    dir.join(format!("seg-{n:08x}.frm"))
}

fn raw_segment_path(dir: &Path, n: u32) -> PathBuf {
    dir.join(format!("seg-{n:08x}.dat"))
}

/// The checksum of a frame head's first 8 bytes in a segment with `salt`
/// (None: the format before salts).
fn frame_crc(salt: Option<u64>, h: &[u8]) -> u32 {
    match salt {
        Some(s) => crc32c::crc32c_append(crc32c::crc32c(&s.to_le_bytes()), h),
        None => crc32c::crc32c(h),
    }
}

fn frame_head(kind: u8, len: u32, salt: u64) -> [u8; FRAME_HEAD as usize] {
    let mut h = [0u8; FRAME_HEAD as usize];
    h[0] = kind;
    h[4..8].copy_from_slice(&len.to_le_bytes());
    let crc = frame_crc(Some(salt), &h[..8]);
    h[8..].copy_from_slice(&crc.to_le_bytes());
    h
}

/// A framed segment walked from the start: its log chunks and where its
/// frames end (a torn or corrupt frame, or bytes of the file's earlier use,
/// end the walk: nothing after it was synced). None: not a framed segment.
type Walk = (Vec<(u64, u64, Vec<u8>)>, u64);

fn scan_chunks(f: &File) -> io::Result<Option<Walk>> {
    let size = f.metadata()?.len();
    let mut magic = [0u8; 8];
    let (salt, mut pos) = match segment_pool::read_salt(f) {
        Some(salt) => (Some(salt), segment_pool::HEAD),
        None if f.read_exact_at(&mut magic, 0).is_ok() && &magic == SEGMENT_MAGIC_V2 => (None, 8),
        None => return Ok(None),
    };
    let mut out = Vec::new();
    let mut head = [0u8; FRAME_HEAD as usize];
    while pos + FRAME_HEAD <= size {
        f.read_exact_at(&mut head, pos)?;
        let crc = u32::from_le_bytes([head[8], head[9], head[10], head[11]]);
        if frame_crc(salt, &head[..8]) != crc {
            break;
        }
        let len = u32::from_le_bytes([head[4], head[5], head[6], head[7]]) as u64;
        let body = pos + FRAME_HEAD;
        if body + len > size {
            break;
        }
        if head[0] == KIND_LOG && len >= CHUNK_HEAD as u64 {
            let mut buf = vec![0u8; len as usize];
            f.read_exact_at(&mut buf, body)?;
            let word = |i: usize| {
                let mut b = [0u8; 8];
                b.copy_from_slice(&buf[i..i + 8]);
                u64::from_le_bytes(b)
            };
            let (log_id, offset) = (word(0), word(8));
            let crc = u32::from_le_bytes([buf[16], buf[17], buf[18], buf[19]]);
            if crc32c::crc32c(&buf[CHUNK_HEAD..]) != crc {
                break;
            }
            out.push((log_id, offset, buf.split_off(CHUNK_HEAD)));
        } else if head[0] != KIND_DATA && head[0] != KIND_LOG {
            break;
        }
        pos = body + len;
    }
    Ok(Some((out, pos)))
}

/// Write `parts` one after the other with as few system calls as the
/// kernel allows (one, usually), copying nothing.
fn write_all_slices(f: &mut File, parts: &[&[u8]]) -> io::Result<()> {
    let mut parts: Vec<&[u8]> = parts.iter().copied().filter(|p| !p.is_empty()).collect();
    let mut first = 0;
    while first < parts.len() {
        let slices: Vec<io::IoSlice> = parts[first..].iter().map(|p| io::IoSlice::new(p)).collect();
        let mut n = match f.write_vectored(&slices) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        while first < parts.len() && n >= parts[first].len() {
            n -= parts[first].len();
            first += 1;
        }
        if n > 0 {
            parts[first] = &parts[first][n..];
        }
    }
    Ok(())
}

/// Start segment `n` in `dir`: a spare from `pool`, or else a new file that
/// grows as it is written; the file positioned after its head, and its salt.
fn start_segment(dir: &Path, pool: &mut SegmentPool, n: u32) -> io::Result<(File, u64)> {
    let path = segment_path(dir, n);
    let (mut f, salt) = match pool.take(&path)? {
        Some(taken) => taken,
        None => {
            let salt = segment_pool::new_salt();
            let mut f = OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(true)
                .open(&path)?;
            f.write_all(&segment_pool::head(salt))?;
            // The file's name must survive a crash as surely as what the
            // next sync puts in it (log records may be nowhere else).
            File::open(dir)?.sync_all()?;
            (f, salt)
        }
    };
    f.seek(io::SeekFrom::Start(segment_pool::HEAD))?;
    pool.refill();
    Ok((f, salt))
}

impl FileStore {
    /// Open the store in `dir` (created if missing); appends go to a new
    /// segment after the last one (a torn append at the end of the last
    /// segment is never referenced by a synced log, so it is left alone).
    pub fn open(
        dir: &Path,
        mode: Mode,
        block_size: u32,
        segment_bytes: u64,
    ) -> io::Result<FileStore> {
        Self::open_with(dir, mode, block_size, segment_bytes, segment_bytes)
    }

    /// [`FileStore::open`], provisioning a new store with `provision` bytes
    /// of prepared segments ([`crate::segment_pool`]); 0: thin, no zeros
    /// written ever (segments grow as they are written, slower to sync).
    pub fn open_with(
        dir: &Path,
        mode: Mode,
        block_size: u32,
        segment_bytes: u64,
        provision: u64,
    ) -> io::Result<FileStore> {
        std::fs::create_dir_all(dir)?;
        let segment_bytes = segment_bytes.max(1 << 20);
        // A small store's spares need not be whole segments.
        let spare_bytes = provision.clamp(1 << 20, segment_bytes);
        let mut pool = SegmentPool::open(dir, spare_bytes, provision)?;
        let mut segments = BTreeMap::new();
        let mut raw = BTreeSet::new();
        for e in std::fs::read_dir(dir)? {
            let e = e?;
            let name = e.file_name();
            let Some((n, framed)) = name.to_str().and_then(|s| {
                let s = s.strip_prefix("seg-")?;
                let (n, framed) = match (s.strip_suffix(".frm"), s.strip_suffix(".dat")) {
                    (Some(n), _) => (n, true),
                    (None, Some(n)) => (n, false),
                    _ => return None,
                };
                Some((u32::from_str_radix(n, 16).ok()?, framed))
            }) else {
                continue;
            };
            if !framed {
                raw.insert(n);
            }
            segments.insert(n, OpenOptions::new().read(true).open(e.path())?);
        }
        // Log chunks not yet in their log's file can only be in the last
        // two segments (the log syncs its file once a new one is started).
        let mut recovered = Vec::new();
        let mut ends = BTreeMap::new();
        for (n, f) in segments.iter().rev().take(2) {
            if !raw.contains(n)
                && let Some((chunks, end)) = scan_chunks(f)?
            {
                recovered.extend(chunks);
                ends.insert(*n, end);
            }
        }
        if segments.is_empty() && !pool.has_ready() {
            pool.provision()?;
        }
        let current = segments.keys().next_back().map_or(0, |n| n + 1);
        let (f, salt) = start_segment(dir, &mut pool, current)?;
        segments.insert(current, f);
        Ok(FileStore {
            dir: dir.to_path_buf(),
            mode,
            block_size: block_size.max(1),
            segment_bytes,
            segments,
            current,
            current_len: segment_pool::HEAD,
            salt,
            ends,
            pool,
            dirty: vec![current],
            raw,
            protected: BTreeSet::new(),
            recovered,
            recent: HashMap::new(),
            stats: StoreStats::default(),
        })
    }

    pub fn mode(&self) -> Mode {
        self.mode
    }

    pub fn stats(&self) -> StoreStats {
        StoreStats {
            zeroed_bytes: self.pool.zeroed(),
            ..self.stats
        }
    }

    /// Append `data` as one frame; its place.
    pub fn append(&mut self, data: &[u8]) -> io::Result<Place> {
        let place = self.append_frame(KIND_DATA, &[data])?;
        self.stats.data_bytes_written += data.len() as u64;
        Ok(place)
    }

    /// Append a frame of `kind` whose payload is `parts`, one after the
    /// other; the place of the whole payload (starting new segments as they
    /// fill).
    fn append_frame(&mut self, kind: u8, parts: &[&[u8]]) -> io::Result<Place> {
        let payload: usize = parts.iter().map(|p| p.len()).sum();
        let len = u32::try_from(payload)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "a write over 4 GiB"))?;
        if self.current_len > segment_pool::HEAD
            && self.current_len + FRAME_HEAD + payload as u64 > self.segment_bytes
        {
            let (f, salt) = start_segment(&self.dir, &mut self.pool, self.current + 1)?;
            self.ends.insert(self.current, self.current_len);
            self.current += 1;
            self.current_len = segment_pool::HEAD;
            self.salt = salt;
            self.segments.insert(self.current, f);
            self.dirty.push(self.current);
        }
        let frame_head = frame_head(kind, len, self.salt);
        let place = Place {
            segment: self.current,
            offset: self.current_len + FRAME_HEAD,
            len,
            crc: parts.iter().fold(0, |crc, p| crc32c::crc32c_append(crc, p)),
        };
        let f = self
            .segments
            .get_mut(&self.current)
            .ok_or_else(|| io::Error::other("the current segment is not open"))?;
        let mut slices = Vec::with_capacity(parts.len() + 1);
        slices.push(&frame_head[..]);
        slices.extend_from_slice(parts);
        write_all_slices(f, &slices)?;
        self.current_len += FRAME_HEAD + payload as u64;
        if self.dirty.last() != Some(&self.current) {
            self.dirty.push(self.current);
        }
        Ok(place)
    }

    /// Append a log chunk and make it durable with every append before it;
    /// whether the log's file may stay unsynced (no segment but the current
    /// one holds chunks it may lack).
    fn sync_with_chunk(&mut self, tag: ChunkTag, chunk: &[&[u8]]) -> io::Result<bool> {
        let mut head = [0u8; CHUNK_HEAD];
        head[..8].copy_from_slice(&tag.log_id.to_le_bytes());
        head[8..16].copy_from_slice(&tag.offset.to_le_bytes());
        let crc = chunk.iter().fold(0, |crc, p| crc32c::crc32c_append(crc, p));
        head[16..].copy_from_slice(&crc.to_le_bytes());
        let mut parts = Vec::with_capacity(chunk.len() + 1);
        parts.push(&head[..]);
        parts.extend_from_slice(chunk);
        let place = self.append_frame(KIND_LOG, &parts)?;
        self.protected.insert(place.segment);
        self.sync_data()?;
        Ok(!self.needs_log_sync())
    }

    /// Whether a segment other than the current one holds log chunks its
    /// log's file may lack (the log should sync its file).
    pub fn needs_log_sync(&self) -> bool {
        self.protected.iter().any(|s| *s != self.current)
    }

    /// The bytes at `place`, checked against its checksum.
    pub fn read(&self, place: &Place) -> io::Result<Vec<u8>> {
        let f = self.segments.get(&place.segment).ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::NotFound,
                format!(
                    "segment {} of {} is gone",
                    place.segment,
                    self.dir.display()
                ),
            )
        })?;
        read_checked(f, &self.path_of(place.segment), place)
    }

    fn path_of(&self, n: u32) -> PathBuf {
        if self.raw.contains(&n) {
            raw_segment_path(&self.dir, n)
        } else {
            segment_path(&self.dir, n)
        }
    }

    /// The directory of the segments.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The segment new data goes to (never cleaned).
    pub fn current_segment(&self) -> u32 {
        self.current
    }

    /// Every segment and its size in bytes.
    pub fn segment_sizes(&self) -> io::Result<BTreeMap<u32, u64>> {
        let mut out = BTreeMap::new();
        for (n, f) in &self.segments {
            let len = if *n == self.current {
                self.current_len
            } else if let Some(end) = self.ends.get(n) {
                *end
            } else {
                f.metadata()?.len()
            };
            out.insert(*n, len);
        }
        Ok(out)
    }

    /// Delete a sealed segment (the cleaner's last step: nothing refers to
    /// it any more), keeping its file for reuse if spares are wanted. The
    /// directory is synced so that it stays deleted.
    pub fn remove_segment(&mut self, n: u32) -> io::Result<()> {
        if n == self.current {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("segment {n} is the one being written"),
            ));
        }
        if self.protected.contains(&n) {
            return Err(io::Error::other(format!(
                "segment {n} holds log records the log's file may not have yet"
            )));
        }
        let path = self.path_of(n);
        if self.segments.remove(&n).is_none() {
            return Ok(());
        }
        self.dirty.retain(|d| *d != n);
        self.ends.remove(&n);
        if self.raw.remove(&n) {
            segment_pool::remove_if_present(&path)?;
        } else {
            // Its space is reused by a segment to come.
            self.pool.retire(&path, n)?;
            self.pool.refill();
        }
        File::open(&self.dir)?.sync_all()
    }

    /// Make every append so far durable.
    pub fn sync_data(&mut self) -> io::Result<()> {
        self.recent.clear();
        for n in std::mem::take(&mut self.dirty) {
            if let Some(f) = self.segments.get(&n) {
                f.sync_data()?;
                self.stats.syncs += 1;
            }
        }
        Ok(())
    }
}

/// Read a block at `place` from the segments in `dir` without the store
/// (a snapshot being streamed while the store goes on). Segments are
/// append-only, so a place stays readable until its segment is deleted,
/// which the cleaner does not do while a snapshot pins it.
pub fn read_at(dir: &Path, place: &Place) -> io::Result<Vec<u8>> {
    let path = segment_path(dir, place.segment);
    match File::open(&path) {
        Ok(f) => read_checked(&f, &path, place),
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            let path = raw_segment_path(dir, place.segment);
            read_checked(&File::open(&path)?, &path, place)
        }
        Err(e) => Err(e),
    }
}

/// The bytes at `place` in the open segment `f` (at `path`), checked against
/// their CRC32C.
fn read_checked(f: &File, path: &Path, place: &Place) -> io::Result<Vec<u8>> {
    let mut buf = vec![0u8; place.len as usize];
    f.read_exact_at(&mut buf, place.offset)?;
    if crc32c::crc32c(&buf) != place.crc {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!(
                "corrupt block data in {} at {}+{}",
                path.display(),
                place.offset,
                place.len
            ),
        ));
    }
    Ok(buf)
}

/// One file store shared by the replicated logs of a shard's successive
/// configurations and by the node (reads, cleaning, snapshots).
#[derive(Clone)]
pub struct SharedStore(pub Arc<Mutex<FileStore>>);

impl SharedStore {
    pub fn new(store: FileStore) -> SharedStore {
        SharedStore(Arc::new(Mutex::new(store)))
    }

    pub fn lock(&self) -> parking_lot::MutexGuard<'_, FileStore> {
        self.0.lock()
    }
}

impl Payloads<VolumeOp> for SharedStore {
    fn absorb(&mut self, op: VolumeOp) -> io::Result<VolumeOp> {
        self.0.lock().absorb(op)
    }
    fn expand(&self, op: &VolumeOp) -> io::Result<VolumeOp> {
        self.0.lock().expand(op)
    }
    fn expanded_len(&self, op: &VolumeOp) -> u64 {
        self.0.lock().expanded_len(op)
    }
    fn sync(&mut self) -> io::Result<()> {
        self.0.lock().sync_data()
    }
    fn sync_with_log(&mut self, tag: ChunkTag, chunk: &[&[u8]]) -> io::Result<bool> {
        self.0.lock().sync_with_log(tag, chunk)
    }
    fn log_synced(&mut self) {
        self.0.lock().log_synced()
    }
    fn log_chunks(&self, log_id: u64) -> Vec<(u64, Vec<u8>)> {
        self.0.lock().log_chunks(log_id)
    }
}

impl Payloads<VolumeOp> for FileStore {
    fn absorb(&mut self, op: VolumeOp) -> io::Result<VolumeOp> {
        match (self.mode, op) {
            (
                Mode::Reference,
                VolumeOp::Write {
                    id,
                    first,
                    data: Payload::Inline(d),
                },
            ) => {
                let bs = self.block_size as usize;
                if !d.len().is_multiple_of(bs) {
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidInput,
                        format!("a write of {} bytes is not whole blocks of {bs}", d.len()),
                    ));
                }
                let mut places = Vec::with_capacity(d.len() / bs);
                for block in d.chunks(bs) {
                    places.push(self.append(block)?);
                }
                if let Some(p) = places.first() {
                    self.recent.insert((p.segment, p.offset), d);
                }
                Ok(VolumeOp::Write {
                    id,
                    first,
                    data: Payload::Stored(places),
                })
            }
            (_, op) => Ok(op),
        }
    }

    fn expand(&self, op: &VolumeOp) -> io::Result<VolumeOp> {
        match op {
            VolumeOp::Write {
                id,
                first,
                data: Payload::Stored(places),
            } => {
                let len: u64 = places.iter().map(|p| p.len as u64).sum();
                if let Some(d) = places
                    .first()
                    .and_then(|p| self.recent.get(&(p.segment, p.offset)))
                    .filter(|d| d.len() as u64 == len)
                {
                    return Ok(VolumeOp::Write {
                        id: *id,
                        first: *first,
                        data: Payload::Inline(d.clone()),
                    });
                }
                let mut data = Vec::with_capacity(len as usize);
                for p in places {
                    data.extend_from_slice(&self.read(p)?);
                }
                Ok(VolumeOp::Write {
                    id: *id,
                    first: *first,
                    data: Payload::Inline(data),
                })
            }
            op => Ok(op.clone()),
        }
    }

    fn expanded_len(&self, op: &VolumeOp) -> u64 {
        match op {
            VolumeOp::Write {
                data: Payload::Stored(places),
                ..
            } => places.iter().map(|p| p.len as u64).sum(),
            VolumeOp::Write {
                data: Payload::Inline(d),
                ..
            } => d.len() as u64,
            _ => 0,
        }
    }

    fn sync(&mut self) -> io::Result<()> {
        self.sync_data()
    }
    fn sync_with_log(&mut self, tag: ChunkTag, chunk: &[&[u8]]) -> io::Result<bool> {
        match self.mode {
            // The baseline keeps the log as it was: its own file, synced.
            Mode::Inline => {
                self.sync_data()?;
                Ok(false)
            }
            Mode::Reference => self.sync_with_chunk(tag, chunk),
        }
    }
    fn log_synced(&mut self) {
        self.protected.clear();
        self.recovered = Vec::new();
    }
    fn log_chunks(&self, log_id: u64) -> Vec<(u64, Vec<u8>)> {
        self.recovered
            .iter()
            .filter(|(id, _, _)| *id == log_id)
            .map(|(_, offset, chunk)| (*offset, chunk.clone()))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::op::OpId;

    fn write(seq: u64, data: Vec<u8>) -> VolumeOp {
        VolumeOp::Write {
            id: OpId { node: 1, seq },
            first: seq,
            data: Payload::Inline(data),
        }
    }

    #[test]
    fn the_log_keeps_places_and_ships_data() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = FileStore::open(dir.path(), Mode::Reference, 4096, 1 << 20).unwrap();
        let mut data = vec![0xab; 12 << 10];
        data[5000] = 1;
        let op = write(7, data);
        let stored = s.absorb(op.clone()).unwrap();
        let VolumeOp::Write {
            data: Payload::Stored(places),
            ..
        } = &stored
        else {
            panic!("not stored: {stored:?}");
        };
        assert_eq!(places.len(), 3);
        assert!(places.iter().all(|p| p.len == 4096));
        // Each block is a frame after the segment's magic.
        assert_eq!(places[0].offset, segment_pool::HEAD + FRAME_HEAD);
        assert_eq!(places[1].offset, places[0].offset + 4096 + FRAME_HEAD);
        // Not whole blocks: refused.
        assert!(s.absorb(write(9, vec![1; 100])).is_err());
        assert_eq!(s.expand(&stored).unwrap(), op);
        // Deletes and barriers pass through.
        let del = VolumeOp::Delete {
            id: OpId { node: 1, seq: 8 },
            first: 8,
            count: 1,
        };
        assert_eq!(s.absorb(del.clone()).unwrap(), del);
        s.sync().unwrap();
        assert_eq!(s.stats().data_bytes_written, 12 << 10);
        assert_eq!(s.stats().syncs, 1);
    }

    /// A chunk of log records the way the log hands them over.
    fn sync_chunk(s: &mut FileStore, log_id: u64, offset: u64, chunk: &[u8]) -> bool {
        Payloads::<VolumeOp>::sync_with_log(s, ChunkTag { log_id, offset }, &[chunk]).unwrap()
    }

    fn chunks(s: &FileStore, log_id: u64) -> Vec<(u64, Vec<u8>)> {
        Payloads::<VolumeOp>::log_chunks(s, log_id)
    }

    #[test]
    fn log_chunks_are_kept_beside_the_data_and_found_again_at_open() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = FileStore::open(dir.path(), Mode::Reference, 4096, 1 << 20).unwrap();
        // A block whose bytes look like a log chunk's frame: data frames are
        // skipped whole, never read as frames.
        let mut forged = Vec::new();
        forged.extend_from_slice(&frame_head(KIND_LOG, 4000, s.salt));
        forged.resize(4096, 7);
        let p = s.append(&forged).unwrap();
        assert!(sync_chunk(&mut s, 9, 0, b"first records"));
        s.append(&[1; 4096]).unwrap();
        assert!(sync_chunk(&mut s, 9, 13, b"more"));
        assert!(sync_chunk(&mut s, 5, 0, b"another log"));
        assert_eq!(s.stats().syncs, 3, "one fdatasync per chunk and its data");
        drop(s);
        let mut s = FileStore::open(dir.path(), Mode::Reference, 4096, 1 << 20).unwrap();
        assert_eq!(
            chunks(&s, 9),
            vec![(0, b"first records".to_vec()), (13, b"more".to_vec())]
        );
        assert_eq!(chunks(&s, 5), vec![(0, b"another log".to_vec())]);
        assert_eq!(s.read(&p).unwrap(), forged);
        // Once the log synced its file the chunks are forgotten.
        Payloads::<VolumeOp>::log_synced(&mut s);
        assert!(chunks(&s, 9).is_empty());
    }

    #[test]
    fn a_new_segment_asks_the_log_to_sync_and_protects_the_old_one() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = FileStore::open(dir.path(), Mode::Reference, 4096, 1 << 20).unwrap();
        let first = s.current_segment();
        assert!(sync_chunk(&mut s, 9, 0, b"a"));
        // Fill the segment: the next chunk lands in a new one, and the log
        // must sync its file (the old segment holds chunks it may lack).
        for _ in 0..256 {
            s.append(&[3; 4096]).unwrap();
        }
        assert_ne!(s.current_segment(), first);
        assert!(s.needs_log_sync());
        assert!(!sync_chunk(&mut s, 9, 1, b"b"));
        let err = s.remove_segment(first).unwrap_err();
        assert!(err.to_string().contains("log records"), "{err}");
        Payloads::<VolumeOp>::log_synced(&mut s);
        assert!(!s.needs_log_sync());
        s.remove_segment(first).unwrap();
    }

    #[test]
    fn a_torn_chunk_ends_the_walk_and_raw_segments_are_still_read() {
        let dir = tempfile::tempdir().unwrap();
        // A segment of the format before frames: raw data, read by place.
        let raw = vec![5u8; 4096];
        std::fs::write(raw_segment_path(dir.path(), 0), &raw).unwrap();
        let old = Place {
            segment: 0,
            offset: 0,
            len: 4096,
            crc: crc32c::crc32c(&raw),
        };
        let mut s = FileStore::open(dir.path(), Mode::Reference, 4096, 1 << 20).unwrap();
        assert_eq!(s.read(&old).unwrap(), raw);
        assert_eq!(read_at(dir.path(), &old).unwrap(), raw);
        let seg = s.current_segment();
        assert!(sync_chunk(&mut s, 9, 0, b"whole"));
        assert!(sync_chunk(&mut s, 9, 5, b"torn at the end"));
        drop(s);
        // The last chunk loses its end.
        let path = segment_path(dir.path(), seg);
        let len = std::fs::metadata(&path).unwrap().len();
        let f = OpenOptions::new().write(true).open(&path).unwrap();
        f.set_len(len - 3).unwrap();
        let s = FileStore::open(dir.path(), Mode::Reference, 4096, 1 << 20).unwrap();
        assert_eq!(chunks(&s, 9), vec![(0, b"whole".to_vec())]);
        assert_eq!(s.read(&old).unwrap(), raw);
    }

    #[test]
    fn inline_mode_keeps_the_data_in_the_entry() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = FileStore::open(dir.path(), Mode::Inline, 4096, 1 << 20).unwrap();
        let op = write(1, vec![1; 4096]);
        assert_eq!(s.absorb(op.clone()).unwrap(), op);
        assert_eq!(s.stats().data_bytes_written, 0);
    }

    #[test]
    fn segments_roll_and_survive_reopen_and_corruption_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = FileStore::open(dir.path(), Mode::Reference, 4096, 1 << 20).unwrap();
        let places: Vec<(Place, u8)> = (0..40u8)
            .map(|i| (s.append(&vec![i; 64 << 10]).unwrap(), i))
            .collect();
        s.sync_data().unwrap();
        assert!(places.last().unwrap().0.segment >= 2, "{:?}", places.last());
        drop(s);
        let s = FileStore::open(dir.path(), Mode::Reference, 4096, 1 << 20).unwrap();
        for (p, i) in &places {
            assert_eq!(s.read(p).unwrap(), vec![*i; 64 << 10]);
        }
        // A flipped byte is found and named.
        let p = places[3].0;
        let path = segment_path(dir.path(), p.segment);
        let mut bytes = std::fs::read(&path).unwrap();
        bytes[p.offset as usize + 5] ^= 1;
        std::fs::write(&path, bytes).unwrap();
        let s = FileStore::open(dir.path(), Mode::Reference, 4096, 1 << 20).unwrap();
        let e = s.read(&p).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidData);
        assert!(e.to_string().contains("corrupt block data"), "{e}");
    }
}

#[cfg(test)]
mod prepared_tests {
    use super::*;

    fn sync_chunk(s: &mut FileStore, log_id: u64, offset: u64, chunk: &[u8]) {
        Payloads::<VolumeOp>::sync_with_log(s, ChunkTag { log_id, offset }, &[chunk]).unwrap();
    }

    fn names(dir: &Path, prefix: &str) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .filter(|n| n.starts_with(prefix))
            .collect();
        v.sort();
        v
    }

    #[test]
    fn a_provisioned_store_overwrites_prepared_space_and_reopens() {
        let dir = tempfile::tempdir().unwrap();
        let seg = 1u64 << 20;
        let mut s = FileStore::open_with(dir.path(), Mode::Reference, 4096, seg, 3 * seg).unwrap();
        // Three segments' space written at creation: one is current, two wait.
        assert_eq!(s.stats().zeroed_bytes, 3 * seg);
        assert_eq!(names(dir.path(), "spare-").len(), 2);
        let path = segment_path(dir.path(), s.current_segment());
        assert_eq!(std::fs::metadata(&path).unwrap().len(), seg);
        let mut places = Vec::new();
        for i in 0..100u8 {
            places.push((s.append(&[i; 4096]).unwrap(), i));
            if i % 10 == 9 {
                sync_chunk(&mut s, 7, u64::from(i), &[i]);
            }
        }
        // Appends stayed inside the prepared file.
        assert_eq!(std::fs::metadata(&path).unwrap().len(), seg);
        let sizes = s.segment_sizes().unwrap();
        assert_eq!(sizes[&s.current_segment()], s.current_len);
        drop(s);
        let s = FileStore::open_with(dir.path(), Mode::Reference, 4096, seg, 3 * seg).unwrap();
        for (p, i) in &places {
            assert_eq!(s.read(p).unwrap(), vec![*i; 4096]);
        }
        let found: Vec<u64> = Payloads::<VolumeOp>::log_chunks(&s, 7)
            .into_iter()
            .map(|(o, _)| o)
            .collect();
        assert_eq!(found, (0..10).map(|k| k * 10 + 9).collect::<Vec<_>>());
        // The sealed segment's size is where its frames end, not its file's.
        let sealed = places[0].0.segment;
        let end = places.last().unwrap().0.offset + 4096 + FRAME_HEAD + 1 + CHUNK_HEAD as u64;
        assert_eq!(s.segment_sizes().unwrap()[&sealed], end);
    }

    #[test]
    fn a_reused_segments_old_frames_are_not_read_again() {
        let dir = tempfile::tempdir().unwrap();
        let seg = 1u64 << 20;
        // Thin: the only spare there can be is the reused segment.
        let mut s = FileStore::open_with(dir.path(), Mode::Reference, 4096, seg, 0).unwrap();
        let old = s.current_segment();
        // The old segment: data and many chunks of log 7.
        let mut in_old = Vec::new();
        for i in 0..300u64 {
            s.append(&[1; 4096]).unwrap();
            sync_chunk(&mut s, 7, 1000 + i, b"old records");
            if s.current_segment() == old {
                in_old.push(1000 + i);
            }
        }
        assert_ne!(s.current_segment(), old);
        assert!(in_old.len() > 200);
        Payloads::<VolumeOp>::log_synced(&mut s);
        s.remove_segment(old).unwrap();
        // Kept, and prepared in the background at once (its last step is
        // the rename to a spare).
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while names(dir.path(), "spare-").is_empty() {
            assert!(
                std::time::Instant::now() < deadline,
                "no spare was prepared"
            );
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        let left = [
            names(dir.path(), "retired-"),
            names(dir.path(), "prep."),
            names(dir.path(), "spare-"),
        ]
        .concat();
        assert_eq!(left, names(dir.path(), "spare-"), "one file, a spare");
        assert_eq!(left.len(), 1, "{left:?}");
        let spare = dir.path().join(&left[0]);
        let old_len = std::fs::metadata(spare).unwrap().len();
        // Fill the current segment: the next one reuses the old file.
        let before = s.current_segment();
        while s.current_segment() == before {
            s.append(&[2; 4096]).unwrap();
        }
        let reused = s.current_segment();
        sync_chunk(&mut s, 7, 5, b"new");
        let p = s.append(&[3; 4096]).unwrap();
        s.sync_data().unwrap();
        assert_eq!(s.stats().zeroed_bytes, 0, "a reused segment costs no zeros");
        let path = segment_path(dir.path(), reused);
        assert_eq!(
            std::fs::metadata(&path).unwrap().len(),
            old_len,
            "the old file"
        );
        drop(s);
        let s = FileStore::open_with(dir.path(), Mode::Reference, 4096, seg, 0).unwrap();
        // The new chunk, and the old segment's chunks no more: in the reused
        // file they fail their checks under its new salt (those found are
        // the ones in the segment after it).
        let found: BTreeMap<u64, Vec<u8>> = Payloads::<VolumeOp>::log_chunks(&s, 7)
            .into_iter()
            .collect();
        assert_eq!(found.get(&5), Some(&b"new".to_vec()), "segment {reused}");
        assert!(in_old.iter().all(|o| !found.contains_key(o)), "{found:?}");
        assert!(found.len() < 300 - in_old.len() + 2, "{found:?}");
        assert_eq!(s.read(&p).unwrap(), vec![3; 4096]);
    }

    #[test]
    fn a_thin_store_writes_no_zeros_and_leftovers_are_cleared() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = FileStore::open_with(dir.path(), Mode::Reference, 4096, 1 << 20, 0).unwrap();
        let p = s.append(&[9; 4096]).unwrap();
        s.sync_data().unwrap();
        assert_eq!(s.stats().zeroed_bytes, 0);
        assert!(names(dir.path(), "spare-").is_empty());
        let path = segment_path(dir.path(), p.segment);
        assert_eq!(
            std::fs::metadata(&path).unwrap().len(),
            segment_pool::HEAD + FRAME_HEAD + 4096
        );
        drop(s);
        // A preparation cut short by a crash is removed at open.
        std::fs::write(dir.path().join("prep.tmp"), b"half").unwrap();
        let s = FileStore::open_with(dir.path(), Mode::Reference, 4096, 1 << 20, 0).unwrap();
        assert!(names(dir.path(), "prep").is_empty());
        assert_eq!(s.read(&p).unwrap(), vec![9; 4096]);
    }

    #[test]
    fn segments_of_the_format_before_salts_are_still_walked() {
        let dir = tempfile::tempdir().unwrap();
        // A SILTSEG2 segment: a data frame, then a chunk of log 4.
        let unsalted = |kind: u8, len: u32| {
            let mut h = [0u8; 12];
            h[0] = kind;
            h[4..8].copy_from_slice(&len.to_le_bytes());
            let crc = crc32c::crc32c(&h[..8]);
            h[8..].copy_from_slice(&crc.to_le_bytes());
            h
        };
        let mut f = SEGMENT_MAGIC_V2.to_vec();
        f.extend_from_slice(&unsalted(KIND_DATA, 4096));
        f.extend_from_slice(&[6; 4096]);
        let records = b"v2 records";
        f.extend_from_slice(&unsalted(KIND_LOG, (CHUNK_HEAD + records.len()) as u32));
        f.extend_from_slice(&4u64.to_le_bytes());
        f.extend_from_slice(&11u64.to_le_bytes());
        f.extend_from_slice(&crc32c::crc32c(records).to_le_bytes());
        f.extend_from_slice(records);
        std::fs::write(segment_path(dir.path(), 0), &f).unwrap();
        let s = FileStore::open(dir.path(), Mode::Reference, 4096, 1 << 20).unwrap();
        assert_eq!(
            Payloads::<VolumeOp>::log_chunks(&s, 4),
            vec![(11, records.to_vec())]
        );
        let p = Place {
            segment: 0,
            offset: 8 + FRAME_HEAD,
            len: 4096,
            crc: crc32c::crc32c(&[6; 4096]),
        };
        assert_eq!(s.read(&p).unwrap(), vec![6; 4096]);
        assert_eq!(s.current_segment(), 1);
    }
}
