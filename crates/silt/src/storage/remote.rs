//! Object storage, the remote tier of a dataset (Fusion, seed 004 ch. 6):
//! the few operations an LSM index needs from a bucket, and the component
//! source that reads a component file with ranged GETs.
//!
//! The core crate talks to object storage only through [`RemoteStore`]; the
//! implementation (S3 and the other stores of the `object_store` crate) is
//! in `silt-objstore`, which [`register`]s its URL schemes when a program
//! starts. A dataset names its bucket by URL (`s3://bucket/prefix`), kept in
//! the catalog, and [`open`] turns the URL into a store (one per URL per
//! process).
//!
//! What lives in the bucket, per index (`docs/format/remote.md`): the
//! component files of the remote levels under their usual names, and the
//! index's MANIFEST, replaced with conditional puts so that two processes
//! writing the same prefix cannot both succeed.

use super::source::ComponentSource;
use crate::error::{Error, Result};
use parking_lot::RwLock;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

/// The version of an object that a conditional put can require (an S3
/// ETag, or whatever the store uses).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ObjectVersion(pub String);

/// What a conditional put requires of the object it replaces.
#[derive(Clone, Debug)]
pub enum PutCondition {
    /// There is no object under the key.
    Absent,
    /// The object under the key is at this version.
    Matches(ObjectVersion),
}

/// One object of a listing: its key (relative to the store's prefix) and size.
#[derive(Clone, Debug)]
pub struct ObjectInfo {
    pub key: String,
    pub size: u64,
}

/// A bucket (and key prefix) of an object store, seen through the
/// operations an LSM index needs. Keys are relative to the store's prefix
/// and use `/` as separator. Implementations retry transient failures
/// themselves and return [`Error::Remote`] naming the object when they give
/// up.
pub trait RemoteStore: Send + Sync + std::fmt::Debug {
    /// The URL the store was opened with (`s3://bucket/prefix`).
    fn url(&self) -> &str;
    /// Upload the local file `path` as `key` (multipart when large; the
    /// object appears whole or not at all).
    fn put_file(&self, key: &str, path: &Path) -> Result<()>;
    /// Put `bytes` as `key` if `cond` holds; the new version, or `None`
    /// when the condition failed.
    fn put_if(
        &self,
        key: &str,
        bytes: Vec<u8>,
        cond: PutCondition,
    ) -> Result<Option<ObjectVersion>>;
    /// The whole object and its version, `None` when there is none.
    fn get(&self, key: &str) -> Result<Option<(Vec<u8>, ObjectVersion)>>;
    /// `len` bytes at `off` of `key`.
    fn get_range(&self, key: &str, off: u64, len: usize) -> Result<Vec<u8>>;
    /// Delete `key`; deleting an absent object is not an error.
    fn delete(&self, key: &str) -> Result<()>;
    /// Every object whose key starts with `prefix/`.
    fn list(&self, prefix: &str) -> Result<Vec<ObjectInfo>>;
}

/// Turns a URL of one scheme into a store.
pub type Opener = dyn Fn(&str) -> Result<Arc<dyn RemoteStore>> + Send + Sync;

struct Registry {
    schemes: HashMap<String, Arc<Opener>>,
    open: HashMap<String, Arc<dyn RemoteStore>>,
}

fn registry() -> &'static RwLock<Registry> {
    static R: OnceLock<RwLock<Registry>> = OnceLock::new();
    R.get_or_init(|| {
        RwLock::new(Registry {
            schemes: HashMap::new(),
            open: HashMap::new(),
        })
    })
}

/// Let URLs `scheme://...` open stores through `opener` (replacing an
/// earlier registration of the scheme).
pub fn register(scheme: &str, opener: Arc<Opener>) {
    let mut r = registry().write();
    r.schemes.insert(scheme.to_ascii_lowercase(), opener);
    r.open.clear();
}

/// The scheme of `url` (`s3` of `s3://bucket/prefix`), or an error saying
/// what a URL looks like.
pub fn scheme_of(url: &str) -> Result<&str> {
    match url.split_once("://") {
        Some((s, rest))
            if !s.is_empty()
                && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '+')
                && !rest.is_empty() =>
        {
            Ok(s)
        }
        _ => Err(Error::Config(format!(
            "`{url}` is not an object storage URL; write it as s3://bucket/prefix (or file:///dir, memory://name)"
        ))),
    }
}

/// The store for `url`, opened once per process.
pub fn open(url: &str) -> Result<Arc<dyn RemoteStore>> {
    let scheme = scheme_of(url)?.to_ascii_lowercase();
    if let Some(s) = registry().read().open.get(url) {
        return Ok(s.clone());
    }
    let opener = registry().read().schemes.get(&scheme).cloned();
    let Some(opener) = opener else {
        let known: Vec<String> = registry().read().schemes.keys().cloned().collect();
        return Err(Error::Config(if known.is_empty() {
            format!(
                "`{url}`: this program has no object storage support linked in (the `silt` command, server and Python package have it: `silt_objstore::install()`)"
            )
        } else {
            format!(
                "`{url}`: no object store for `{scheme}://`; known: {}",
                known.join(", ")
            )
        }));
    };
    let store = opener(url)?;
    registry()
        .write()
        .open
        .entry(url.to_owned())
        .or_insert_with(|| store.clone());
    Ok(store)
}

/// Delete every object under `prefix/` of `store` (a dropped dataset's
/// or index's remote tier); how many there were.
pub fn remove_prefix(store: &dyn RemoteStore, prefix: &str) -> Result<usize> {
    let objects = store.list(prefix)?;
    for o in &objects {
        store.delete(&o.key)?;
    }
    Ok(objects.len())
}

/// What one index asked of its bucket since it was opened.
#[derive(Debug, Default)]
pub struct RemoteCounters {
    /// GETs (whole objects and ranges) and the bytes they returned.
    pub gets: AtomicU64,
    pub bytes_read: AtomicU64,
    /// PUTs (component uploads, MANIFEST replacements) and their bytes.
    pub puts: AtomicU64,
    pub bytes_written: AtomicU64,
    /// DELETEs (merged-away components, garbage).
    pub deletes: AtomicU64,
}

impl RemoteCounters {
    pub(crate) fn got(&self, bytes: usize) {
        self.gets.fetch_add(1, Ordering::Relaxed);
        self.bytes_read.fetch_add(bytes as u64, Ordering::Relaxed);
    }

    pub(crate) fn put(&self, bytes: u64) {
        self.puts.fetch_add(1, Ordering::Relaxed);
        self.bytes_written.fetch_add(bytes, Ordering::Relaxed);
    }

    pub(crate) fn deleted(&self) {
        self.deletes.fetch_add(1, Ordering::Relaxed);
    }
}

/// Where one index keeps its remote levels: a store, the key prefix of the
/// index inside it, and the first level stored there (levels above it stay
/// on the local disk).
#[derive(Clone, Debug)]
pub struct RemoteTier {
    pub store: Arc<dyn RemoteStore>,
    /// `<dataset directory>/p<i>/<index>`, no trailing `/`.
    pub prefix: String,
    pub from_level: u32,
    /// What the index asked of the bucket.
    pub counters: Arc<RemoteCounters>,
    /// Whether each uploaded component gets a column image beside it
    /// ([`crate::storage::column_image`]): a primary's records are objects
    /// whose fields a query reads a few of.
    pub column_images: bool,
}

impl RemoteTier {
    /// The key of `name` inside this index's prefix.
    pub fn key(&self, name: &str) -> String {
        format!("{}/{name}", self.prefix)
    }

    /// The URL of `name`, for messages and paths.
    pub fn url_of(&self, name: &str) -> PathBuf {
        PathBuf::from(format!(
            "{}/{}",
            self.store.url().trim_end_matches('/'),
            self.key(name)
        ))
    }

    /// Whether components of `level` live in the bucket.
    pub fn holds(&self, level: u32) -> bool {
        level >= self.from_level
    }
}

/// Bytes fetched from the end of an object when it is opened: the footer,
/// and usually the index, bloom, aux and meta blocks before it, in one GET.
const TAIL_BYTES: u64 = 256 << 10;

/// The first readahead of a sequential reader; each next one doubles, up
/// to [`READAHEAD_MAX`].
const READAHEAD_MIN: u64 = 128 << 10;
/// 8 MiB: a GET of that size takes about as long to transfer as S3's
/// first-byte latency at ~0.5 GB/s, so a scan is not bound by round trips.
const READAHEAD_MAX: u64 = 8 << 20;

/// Sequential readers of one component followed at once, each with its own
/// window: a query scans one component from two or more partitions (one key
/// range each) while merges, lookups and other queries read it too. (With
/// four, two queries scanning one component in four parts each took each
/// other's windows at every read: a GET per block.)
const STREAMS: usize = 16;

/// The bytes a component's windows hold at most (four full windows): a
/// reader's next fetch is cut to what the other windows leave, but never
/// below [`READAHEAD_MIN`].
const WINDOW_BYTES: u64 = 4 * READAHEAD_MAX;
/// A window not read from in this many reads of its component (by any
/// reader), or for [`STALE_AFTER`], is stale: its bytes go when another
/// reader fetches.
const STALE_READS: u64 = 1 << 16;
const STALE_AFTER: std::time::Duration = std::time::Duration::from_millis(250);

/// A component file in a bucket: its tail is fetched when it is opened
/// (one GET for the footer and the blocks a reader decodes at open), a
/// data block with a ranged GET on a block-cache miss. Reads that follow
/// each other (a scan, a merge) fetch ahead instead: 128 KiB, doubling to
/// 8 MiB per GET, kept until read through. Up to [`STREAMS`] such readers
/// are told apart by where each last read ended, or ended a little before
/// (a scan skips the blocks the cache holds; with one window per
/// component, two partitions of one scan took turns discarding each
/// other's window and every block became a GET: a 20 MB scan took 5-37 s
/// against moto; a scan that lost its window at every cached block took
/// 387 s instead of 1.1 s). There is no mapping, so every block goes
/// through the block cache.
#[derive(Debug)]
pub struct RemoteSource {
    store: Arc<dyn RemoteStore>,
    counters: Arc<RemoteCounters>,
    key: String,
    url: PathBuf,
    size: u64,
    tail_off: u64,
    tail: Vec<u8>,
    ahead: parking_lot::Mutex<Streams>,
}

/// The readers a [`RemoteSource`] follows.
#[derive(Debug, Default)]
struct Streams {
    windows: Vec<Readahead>,
    /// Reads so far: a window's `used` is the count at its last read.
    clock: u64,
    /// Byte ranges a caller said it is about to read in order
    /// (`ComponentSource::will_read`), newest last, at most [`STREAMS`].
    advised: Vec<(u64, u64)>,
}

/// One sequential reader's window.
#[derive(Debug, Default)]
struct Readahead {
    /// Where the last read ended.
    last_end: u64,
    /// The next fetch's size when reads go on in order.
    next: u64,
    /// Fetched bytes at `off`.
    off: u64,
    bytes: Vec<u8>,
    used: u64,
    /// When it was last read from.
    used_at: Option<std::time::Instant>,
    /// The end of the run its reader announced (0: none).
    limit: u64,
}

impl Streams {
    /// The bytes `[off, end)` if a window holds them.
    fn take(&mut self, off: u64, end: u64) -> Option<Vec<u8>> {
        self.clock += 1;
        let clock = self.clock;
        let w = self
            .windows
            .iter_mut()
            .find(|w| off >= w.off && end <= w.off + w.bytes.len() as u64)?;
        let s = (off - w.off) as usize;
        let out = w.bytes[s..s + (end - off) as usize].to_vec();
        // The first read of a run announced to start here and go past the
        // window is another reader's (two partitions share the block at
        // their boundary): the window stays its owner's.
        let w_end = w.off + w.bytes.len() as u64;
        if off != w.last_end && self.advised.iter().any(|&(a, e)| a == off && e > w_end) {
            return Some(out);
        }
        w.last_end = end;
        w.used = clock;
        w.used_at = Some(std::time::Instant::now());
        if end == w.off + w.bytes.len() as u64 {
            // Read through: let the memory go (the stream goes on).
            w.off = 0;
            w.bytes = Vec::new();
        }
        Some(out)
    }

    /// The window of the reader whose last read ended at `off`, or a
    /// little before it (a scan skips the blocks the block cache holds: by
    /// at most its readahead, or 128 KiB), or a new one (replacing the
    /// least recently used); its index and how far to read ahead of `off`.
    fn stream_for(&mut self, off: u64, end: u64) -> (usize, u64) {
        let clock = self.clock;
        // As far ahead as a caller said it would read from here.
        // A run announced to start here first: the first read of a run
        // that starts on another run's last block is its own run's.
        let advised = (self.advised.iter())
            .rposition(|&(a, _)| a == off)
            .or_else(|| self.advised.iter().rposition(|&(a, e)| a <= off && off < e))
            .map(|h| self.advised.remove(h).1);
        let run_end = advised;
        let advised = advised.map(|e| (e - off).min(READAHEAD_MAX));
        let i = match self
            .windows
            .iter()
            .enumerate()
            .filter(|(_, w)| {
                // A read with advice starts a run of its own, so only the
                // window that ended exactly here continues. (Two partitions
                // of a range scan announce adjacent runs: the second one's
                // first read, a little past the first one's, took its
                // window, and the first run was fetched again from one
                // block up, three GETs in a row.)
                let near = if advised.is_some() {
                    0
                } else {
                    w.next.max(READAHEAD_MIN)
                };
                off > 0 && w.last_end <= off && off - w.last_end <= near
            })
            .min_by_key(|(_, w)| off - w.last_end)
            .map(|(i, _)| i)
        {
            Some(i) => {
                let w = &mut self.windows[i];
                w.next = advised.unwrap_or((w.next * 2).clamp(READAHEAD_MIN, READAHEAD_MAX));
                i
            }
            None => {
                let i = if self.windows.len() < STREAMS {
                    self.windows.push(Readahead::default());
                    self.windows.len() - 1
                } else {
                    // The least recently used. (Preferring windows without
                    // bytes, as this once did, let two readers whose
                    // single-block GETs leave no bytes take each other's
                    // window at every read, while windows a finished scan
                    // left behind stayed for good.)
                    (0..self.windows.len())
                        .min_by_key(|&i| self.windows[i].used)
                        .unwrap_or(0)
                };
                self.windows[i] = Readahead {
                    next: advised.unwrap_or(0),
                    ..Readahead::default()
                };
                i
            }
        };
        // Windows nobody has read from for a while give their bytes back
        // before the budget cuts this fetch: a finished scan's partitions
        // each leave a window fetched past where they stopped, and four
        // such (32 MiB) held the whole budget for good, cutting every
        // later scan's GETs to 128 KiB (a full scan 35 s instead of 4).
        let now = std::time::Instant::now();
        for (j, w) in self.windows.iter_mut().enumerate() {
            let idle = w
                .used_at
                .is_none_or(|t| now.duration_since(t) > STALE_AFTER);
            if j != i && (idle || clock.saturating_sub(w.used) > STALE_READS) {
                w.off = 0;
                w.bytes = Vec::new();
            }
        }
        let held: u64 = (self.windows.iter().enumerate())
            .filter(|&(j, _)| j != i)
            .map(|(_, w)| w.bytes.len() as u64)
            .sum();
        let w = &mut self.windows[i];
        w.last_end = end;
        w.used = clock;
        w.used_at = Some(now);
        // An announced run's reader fetches nothing past the run's end, so
        // its last window is read through and let go (a scan's parts each
        // left one behind, fetched past where they stopped).
        match run_end {
            Some(e) => w.limit = e,
            None if w.limit <= off => w.limit = 0,
            None => {}
        }
        if w.next > 0 {
            w.next = w
                .next
                .min(WINDOW_BYTES.saturating_sub(held).max(READAHEAD_MIN));
            if w.limit > off {
                w.next = w.next.min(w.limit - off);
            }
        }
        (i, w.next)
    }

    /// The bytes the windows hold.
    #[cfg(test)]
    fn held(&self) -> u64 {
        self.windows.iter().map(|w| w.bytes.len() as u64).sum()
    }

    /// Remember that `[off, end)` is about to be read in order.
    fn advise(&mut self, off: u64, end: u64) {
        if self.advised.len() == STREAMS {
            self.advised.remove(0);
        }
        self.advised.push((off, end));
    }

    /// Keep `bytes` (from `off`) as window `i`'s, unless another reader
    /// took that window meanwhile.
    fn keep(&mut self, i: usize, off: u64, bytes: Vec<u8>) {
        if let Some(w) = self.windows.get_mut(i)
            && w.last_end == off
        {
            w.off = off;
            w.bytes = bytes;
        }
    }
}

impl RemoteSource {
    /// The object `key` of `size` bytes (from a listing or an upload),
    /// its requests counted in `counters`.
    pub fn open(
        store: Arc<dyn RemoteStore>,
        counters: Arc<RemoteCounters>,
        key: String,
        url: PathBuf,
        size: u64,
    ) -> Result<RemoteSource> {
        let tail_off = size.saturating_sub(TAIL_BYTES);
        let want = usize::try_from(size - tail_off)
            .map_err(|_| Error::corrupt(&url, "object tail does not fit in memory"))?;
        let tail = store.get_range(&key, tail_off, want)?;
        counters.got(tail.len());
        if tail.len() != want {
            return Err(Error::corrupt(
                &url,
                format!(
                    "object is shorter than listed: {} bytes at offset {tail_off}, expected {want}",
                    tail.len()
                ),
            ));
        }
        Ok(RemoteSource {
            store,
            counters,
            key,
            url,
            size,
            tail_off,
            tail,
            ahead: parking_lot::Mutex::new(Streams::default()),
        })
    }
}

impl ComponentSource for RemoteSource {
    fn path(&self) -> &Path {
        &self.url
    }

    fn len(&self) -> u64 {
        self.size
    }

    fn read_at(&self, off: u64, len: usize) -> Result<Vec<u8>> {
        let end = off.checked_add(len as u64).filter(|e| *e <= self.size);
        let Some(end) = end else {
            return Err(Error::corrupt(
                &self.url,
                format!(
                    "truncated: cannot read {len} bytes at offset {off} of {}",
                    self.size
                ),
            ));
        };
        if off >= self.tail_off {
            let s = (off - self.tail_off) as usize;
            let e = (end - self.tail_off) as usize;
            return Ok(self.tail[s..e].to_vec());
        }
        // The windows are consulted and replaced under the lock, but
        // fetched without it, so concurrent point reads do not queue behind
        // a GET.
        let (stream, want) = {
            let mut ra = self.ahead.lock();
            if let Some(out) = ra.take(off, end) {
                return Ok(out);
            }
            let (stream, next) = ra.stream_for(off, end);
            // Never into the tail, which is in memory already.
            (
                stream,
                (len as u64).max(next).min(self.tail_off.max(end) - off),
            )
        };
        let mut got = self.store.get_range(&self.key, off, want as usize)?;
        self.counters.got(got.len());
        if got.len() as u64 != want {
            return Err(Error::corrupt(
                &self.url,
                format!("short read: {} of {want} bytes at offset {off}", got.len()),
            ));
        }
        if want == len as u64 {
            return Ok(got);
        }
        let out = got[..len].to_vec();
        got.drain(..len);
        self.ahead.lock().keep(stream, end, got);
        Ok(out)
    }

    fn mapped(&self) -> Option<&[u8]> {
        None
    }

    fn is_remote(&self) -> bool {
        true
    }

    fn will_read(&self, off: u64, end: u64) {
        let end = end.min(self.tail_off);
        if off < end {
            self.ahead.lock().advise(off, end);
        }
    }

    fn remove(&self) -> std::io::Result<()> {
        self.counters.deleted();
        self.store
            .delete(&self.key)
            .map_err(|e| std::io::Error::other(e.to_string()))
    }
}

/// A store whose objects are files under a local directory, for tests of
/// the remote tier without a server (no mapping: reads go through the
/// block cache as for a bucket). Versions are a counter kept per key.
#[derive(Debug)]
pub struct DirStore {
    url: String,
    dir: PathBuf,
    versions: parking_lot::Mutex<HashMap<String, u64>>,
}

impl DirStore {
    /// A store keeping objects under `dir`, reported as `url`.
    pub fn new(url: &str, dir: &Path) -> DirStore {
        DirStore {
            url: url.to_owned(),
            dir: dir.to_path_buf(),
            versions: parking_lot::Mutex::new(HashMap::new()),
        }
    }

    fn path(&self, key: &str) -> PathBuf {
        self.dir.join(key)
    }

    fn io(&self, key: &str, e: std::io::Error) -> Error {
        Error::Remote {
            url: format!("{}/{key}", self.url),
            reason: e.to_string(),
        }
    }

    fn version(&self, key: &str) -> ObjectVersion {
        ObjectVersion(
            self.versions
                .lock()
                .get(key)
                .copied()
                .unwrap_or(0)
                .to_string(),
        )
    }
}

impl RemoteStore for DirStore {
    fn url(&self) -> &str {
        &self.url
    }

    fn put_file(&self, key: &str, path: &Path) -> Result<()> {
        let bytes = std::fs::read(path).map_err(|e| Error::io(path, e))?;
        let p = self.path(key);
        if let Some(d) = p.parent() {
            std::fs::create_dir_all(d).map_err(|e| self.io(key, e))?;
        }
        super::fsutil::write_atomic(&p, &bytes)
    }

    fn put_if(
        &self,
        key: &str,
        bytes: Vec<u8>,
        cond: PutCondition,
    ) -> Result<Option<ObjectVersion>> {
        let mut v = self.versions.lock();
        let p = self.path(key);
        let exists = p.exists();
        let cur = v.get(key).copied().unwrap_or(0);
        let ok = match &cond {
            PutCondition::Absent => !exists,
            PutCondition::Matches(m) => exists && m.0 == cur.to_string(),
        };
        if !ok {
            return Ok(None);
        }
        if let Some(d) = p.parent() {
            std::fs::create_dir_all(d).map_err(|e| self.io(key, e))?;
        }
        super::fsutil::write_atomic(&p, &bytes)?;
        v.insert(key.to_owned(), cur + 1);
        Ok(Some(ObjectVersion((cur + 1).to_string())))
    }

    fn get(&self, key: &str) -> Result<Option<(Vec<u8>, ObjectVersion)>> {
        match std::fs::read(self.path(key)) {
            Ok(b) => Ok(Some((b, self.version(key)))),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(self.io(key, e)),
        }
    }

    fn get_range(&self, key: &str, off: u64, len: usize) -> Result<Vec<u8>> {
        use std::os::unix::fs::FileExt;
        let f = std::fs::File::open(self.path(key)).map_err(|e| self.io(key, e))?;
        let mut buf = vec![0u8; len];
        f.read_exact_at(&mut buf, off)
            .map_err(|e| self.io(key, e))?;
        Ok(buf)
    }

    fn delete(&self, key: &str) -> Result<()> {
        match std::fs::remove_file(self.path(key)) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(self.io(key, e)),
        }
    }

    fn list(&self, prefix: &str) -> Result<Vec<ObjectInfo>> {
        let dir = self.path(prefix);
        let rd = match std::fs::read_dir(&dir) {
            Ok(rd) => rd,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(self.io(prefix, e)),
        };
        let mut out = Vec::new();
        for ent in rd {
            let ent = ent.map_err(|e| self.io(prefix, e))?;
            let name = ent.file_name().to_string_lossy().into_owned();
            let md = ent.metadata().map_err(|e| self.io(prefix, e))?;
            if md.is_dir() {
                out.extend(self.list(&format!("{prefix}/{name}"))?);
            } else if !name.ends_with(".tmp") {
                out.push(ObjectInfo {
                    key: format!("{prefix}/{name}"),
                    size: md.len(),
                });
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A remote component source over an object of `n` bytes (plus the
    /// tail fetched at open) in a directory-backed store; its bytes and
    /// request counters.
    fn source(dir: &Path, n: usize) -> (RemoteSource, Vec<u8>, Arc<RemoteCounters>) {
        let store: Arc<dyn RemoteStore> = Arc::new(DirStore::new("dir://t", &dir.join("bucket")));
        let data: Vec<u8> = (0..n + TAIL_BYTES as usize)
            .map(|i| (i * 7 % 253) as u8)
            .collect();
        let f = dir.join("obj");
        std::fs::write(&f, &data).unwrap();
        store.put_file("obj", &f).unwrap();
        let counters = Arc::new(RemoteCounters::default());
        let src = RemoteSource::open(
            store,
            counters.clone(),
            "obj".into(),
            PathBuf::from("dir://t/obj"),
            data.len() as u64,
        )
        .unwrap();
        (src, data, counters)
    }

    /// Two readers going through halves of one object by turns (a scan
    /// in two partitions) each keep a window: a handful of GETs, not
    /// one per block.
    #[test]
    fn interleaved_sequential_readers_each_read_ahead() {
        let dir = tempfile::tempdir().unwrap();
        let n = 8 << 20;
        let (src, data, counters) = source(dir.path(), n);
        let block = 4096;
        let half = n / 2;
        for i in (0..half).step_by(block) {
            for start in [i, half + i] {
                let got = src.read_at(start as u64, block).unwrap();
                assert_eq!(got, data[start..start + block], "bytes at {start}");
            }
        }
        let gets = counters.gets.load(Ordering::Relaxed);
        // Per reader: its first block, then 128 KiB doubling
        // windows over 4 MiB: 7 GETs each, plus the tail at open (one GET
        // per 4 KiB block, 2,048, before readers had windows of their own).
        assert!(gets <= 24, "{gets} GETs for 2 x 4 MiB read by turns");
    }

    /// A scan whose reads skip blocks (the block cache held them) keeps
    /// its readahead: a scan after a scan, with a cache smaller than the
    /// component, once took one GET per missed block.
    #[test]
    fn a_scan_skipping_cached_blocks_reads_ahead() {
        let dir = tempfile::tempdir().unwrap();
        let n = 4 << 20;
        let (src, data, counters) = source(dir.path(), n);
        let block = 4096;
        let mut x = 7usize;
        for (k, i) in (0..n).step_by(block).enumerate() {
            // The first half: every other block is cached; the second:
            // runs of up to 3 blocks, a third of them in all.
            x = (x * 7919 + 13) % 9973;
            if (i < n / 2 && !k.is_multiple_of(2)) || (i >= n / 2 && x.is_multiple_of(3)) {
                continue;
            }
            assert_eq!(src.read_at(i as u64, block).unwrap(), data[i..i + block]);
        }
        let gets = counters.gets.load(Ordering::Relaxed);
        // 128 KiB doubling over 4 MiB, a few more where a window
        // ends in a skipped block (one GET per block read in the first
        // half, 256 or more in all, before).
        assert!(gets <= 16, "{gets} GETs for a 4 MiB scan skipping blocks");
    }

    /// Eight readers by turns (two queries scanning one component in four
    /// parts each) each keep a window, and the windows together hold no
    /// more than their budget (eight full windows would be 64 MiB). With
    /// four windows every read was a GET.
    #[test]
    fn eight_interleaved_readers_keep_windows_within_the_budget() {
        let dir = tempfile::tempdir().unwrap();
        let n = 64 << 20;
        let (src, data, counters) = source(dir.path(), n);
        let block = 16 << 10;
        let part = n / 8;
        let mut most = 0;
        for i in (0..part).step_by(block) {
            for p in 0..8 {
                let start = p * part + i;
                let got = src.read_at(start as u64, block).unwrap();
                assert_eq!(got, data[start..start + block], "bytes at {start}");
                most = most.max(src.ahead.lock().held());
            }
        }
        let gets = counters.gets.load(Ordering::Relaxed);
        // Per reader: a block, then 128 KiB doubling up to what the budget
        // leaves, over 8 MiB: about 10 each (4,096, one per block, before).
        assert!(gets <= 160, "{gets} GETs for 8 x 8 MiB read by turns");
        assert!(
            most <= WINDOW_BYTES + STREAMS as u64 * READAHEAD_MIN,
            "windows held {most} bytes"
        );
    }

    /// A reader of an announced run fetches nothing past its end: once the
    /// run is read, no window holds bytes (a scan's four parts each left a
    /// window fetched past its end, which held the budget).
    #[test]
    fn an_announced_run_leaves_no_window_behind() {
        let dir = tempfile::tempdir().unwrap();
        let n = 48 << 20;
        let (src, data, counters) = source(dir.path(), n);
        let block = 4096;
        let parts = [(0, 11 << 20), (20 << 20, (31 << 20) + 3 * block)];
        for &(a, e) in &parts {
            src.will_read(a as u64, e as u64);
        }
        for i in (0..11 << 20).step_by(block) {
            for &(a, e) in &parts {
                if a + i < e {
                    let at = a + i;
                    assert_eq!(src.read_at(at as u64, block).unwrap(), data[at..at + block]);
                }
            }
        }
        for at in ((31 << 20)..(31 << 20) + 3 * block).step_by(block) {
            src.read_at(at as u64, block).unwrap();
        }
        assert_eq!(src.ahead.lock().held(), 0, "bytes left past the runs' ends");
        let bytes = counters.bytes_read.load(Ordering::Relaxed);
        assert!(
            bytes <= (22 << 20) + 3 * block as u64 + TAIL_BYTES,
            "{bytes} bytes fetched"
        );
    }

    /// Readers that stopped inside full windows (a finished scan's four
    /// parts, each fetched past where it ended) do not keep a later scan
    /// to 128 KiB GETs: once idle, their windows give the budget back.
    #[test]
    fn windows_left_behind_give_their_bytes_back() {
        let dir = tempfile::tempdir().unwrap();
        let n = 128 << 20;
        let (src, data, counters) = source(dir.path(), n);
        let block = 4096;
        // Four readers by turns, each stopping 12 MiB in, inside an 8 MiB
        // window half read.
        for i in (0..12 << 20).step_by(block) {
            for q in 0..4 {
                src.read_at((q * (16 << 20) + i) as u64, block).unwrap();
            }
        }
        let held = src.ahead.lock().held();
        assert!(
            held >= WINDOW_BYTES - READAHEAD_MAX / 2,
            "{held} bytes left behind"
        );
        // The next query comes a moment later.
        std::thread::sleep(STALE_AFTER * 2);
        // A later scan of the last 32 MiB (far from where they stopped).
        let before = counters.gets.load(Ordering::Relaxed);
        for i in ((96 << 20)..n).step_by(block) {
            assert_eq!(src.read_at(i as u64, block).unwrap(), data[i..i + block]);
        }
        let gets = counters.gets.load(Ordering::Relaxed) - before;
        // A block, then 128 KiB doubling to 8 MiB: 11 GETs (257 while the
        // windows left behind held the budget: 128 KiB each).
        assert!(gets <= 12, "{gets} GETs for a 32 MiB scan");
    }

    /// Two readers skipping cached blocks by turns (a scan's partitions,
    /// after an earlier scan left windows behind) each keep a window. When
    /// windows without bytes were replaced first, each reader's new
    /// one-block window was the other's victim, and every read was a GET
    /// (a 71 MB scan took minutes instead of 1 s).
    #[test]
    fn interleaved_readers_skipping_blocks_keep_their_windows() {
        let dir = tempfile::tempdir().unwrap();
        let n = 8 << 20;
        let (src, data, counters) = source(dir.path(), n);
        let block = 4096;
        // An earlier scan's four readers stop early, leaving windows.
        for q in 0..4 {
            for i in (q * n / 4..q * n / 4 + (64 << 10)).step_by(block) {
                src.read_at(i as u64, block).unwrap();
            }
        }
        let before = counters.gets.load(Ordering::Relaxed);
        // Every other block is cached; the two readers take turns.
        for i in ((1 << 20)..(3 << 20)).step_by(2 * block) {
            for start in [i, n / 2 + i] {
                assert_eq!(
                    src.read_at(start as u64, block).unwrap(),
                    data[start..start + block]
                );
            }
        }
        let gets = counters.gets.load(Ordering::Relaxed) - before;
        assert!(
            gets <= 24,
            "{gets} GETs for 2 x 2 MiB read by turns, skipping blocks"
        );
    }

    /// Chunks read after advice take one GET each, not a ramp from one
    /// block up to the readahead limit.
    #[test]
    fn advised_runs_are_fetched_whole() {
        let dir = tempfile::tempdir().unwrap();
        let n = 8 << 20;
        let (src, data, counters) = source(dir.path(), n);
        let block = 4096;
        let run = 1 << 20;
        // Four runs of 1 MiB with gaps between them, as a block range
        // index leaves them.
        for start in (0..n - run).step_by(2 * run) {
            src.will_read(start as u64, (start + run) as u64);
            for i in (start..start + run).step_by(block) {
                assert_eq!(src.read_at(i as u64, block).unwrap(), data[i..i + block]);
            }
        }
        let gets = counters.gets.load(Ordering::Relaxed) - 1;
        // One per run (a ramp from a block to 1 MiB took 5 each, 20 in all).
        assert_eq!(gets, 4, "{gets} GETs for 4 advised runs");
    }

    /// Two partitions of a range scan announce adjacent runs (sharing the
    /// block at the boundary) and start them by turns: each run is one
    /// GET. The second run's first read once took the first run's window,
    /// whose rest was then fetched again from one block up.
    #[test]
    fn adjacent_advised_runs_keep_their_windows() {
        let dir = tempfile::tempdir().unwrap();
        let n = 1 << 20;
        let (src, data, counters) = source(dir.path(), n);
        let block = 4096;
        let run = 38 * block;
        // The second run starts on the first one's last block, or one
        // block after it; either is announced, and starts, first.
        let cases = [
            (run - block, false),
            (run - block, true),
            (run + block, false),
        ];
        for (k, (b, b_first)) in cases.into_iter().enumerate() {
            let a = 2 * k * run;
            let b = a + b;
            if b_first {
                src.will_read(b as u64, (b + run) as u64);
            }
            src.will_read(a as u64, (a + run) as u64);
            if !b_first {
                src.will_read(b as u64, (b + run) as u64);
            }
            let before = counters.gets.load(Ordering::Relaxed);
            // The run announced first starts first (its first read while
            // the other one's GET is in flight).
            let reads = (0..38).flat_map(|k| {
                let (x, y) = (a + k * block, b + k * block);
                if b_first { [y, x] } else { [x, y] }
            });
            for i in reads {
                assert_eq!(src.read_at(i as u64, block).unwrap(), data[i..i + block]);
            }
            let gets = counters.gets.load(Ordering::Relaxed) - before;
            // One per run (5: the first run again from one block, 128 KiB
            // up).
            assert_eq!(
                gets, 2,
                "{gets} GETs for 2 adjacent advised runs (case {k})"
            );
        }
    }

    /// Point reads in between do not cost a scan its window, and reads
    /// past the windows still return the right bytes.
    #[test]
    fn point_reads_leave_a_scan_its_window() {
        let dir = tempfile::tempdir().unwrap();
        let n = 4 << 20;
        let (src, data, counters) = source(dir.path(), n);
        let block = 4096;
        let mut point = 1usize;
        for i in (0..n / 2).step_by(block) {
            assert_eq!(src.read_at(i as u64, block).unwrap(), data[i..i + block]);
            // A point read somewhere in the second half.
            point = (point * 7919 + 13) % (n / 2 / block);
            let p = n / 2 + point * block + 17;
            assert_eq!(src.read_at(p as u64, 100).unwrap(), data[p..p + 100]);
        }
        let scan_blocks = (n / 2 / block) as u64;
        let gets = counters.gets.load(Ordering::Relaxed);
        // The point reads are one GET each (or none, if a point window
        // holds them); the scan adds only a few.
        assert!(gets <= scan_blocks + 12, "{gets} GETs");
    }
}
