//! Column images: the columns a scan projects, decoded once from an
//! immutable run of a dataset's primary (a disk component, or a memtable
//! at one version) into Arrow arrays and kept in a cache bounded in bytes.
//! A full scan is then the concatenation of its runs' images: aggregates,
//! joins and filters on columns without an index read arrays, not
//! records, as a column store would. When the runs are disjoint
//! ([`silt::dataset::runs_disjoint`]: no key has versions in two runs)
//! every row of every image is a record; when they overlap, the rows of
//! an older run whose keys a newer run holds are left out (below).
//!
//! - **Units.** A disk component is cut into chunks of whole data blocks
//!   (about [`CHUNK_ROWS`] records each; the cut depends only on the
//!   component's metadata). A chunk of one column is one cache entry, keyed
//!   by the component's uid, the chunk and the column (name and types: an
//!   image is a pure function of them). A memtable is read whole when the
//!   scan starts, under the scan's read-committed check
//!   ([`silt::Dataset::read_memtable`]), and its image is kept for its
//!   version when it did not change while read.
//! - **When.** For scans of the whole dataset or of a range of its key
//!   (one key column, `bigint` or `text`) that read committed records
//!   only (outside a transaction block, or in one that wrote nothing to
//!   the table), not for a write, not backwards and without a limit
//!   (those read few records the ordinary way); not when the projected
//!   columns of what the scan reads (and its key images, below) would not
//!   fit in half the cache. A scan that needs key order (one partition)
//!   hands out disjoint runs in key order, and merges overlapping ones a
//!   range of keys at a time ([`ordered`]; whole scans only, a key range
//!   over overlapping runs reads records).
//! - **Overlapping runs.** An update or a delete of an old key puts a
//!   newer version in a memtable (and, once flushed, in a newer component)
//!   whose key range meets older components'. Each disk chunk then also
//!   has a *key image*: the encoded keys of its live records (row for row)
//!   and its deleted keys, sorted, kept like a column's. A chunk of a
//!   component with newer runs over its range ([`Shadow`]) drops the rows
//!   whose keys they hold: memtables' keys are read with their records,
//!   newer chunks' from their key images; few keys are looked up, many are
//!   walked beside the chunk's. The mask is made for each scan (memtables
//!   change); the arrays are filtered by it. Memtables are the newest runs
//!   and never masked; two that overlap (one being flushed) send the scan
//!   the ordinary way.
//! - **Key ranges.** A range reads the chunks whose blocks' keys (from the
//!   block index) can fall in it. A chunk wholly inside is read as it is;
//!   one at an end of the range is cut: the key column's image (kept like
//!   any other column's) is sorted, so a binary search finds the rows in
//!   the range, and the chunk's arrays are sliced to them. A memtable is
//!   read only within the range, under the same check, and not kept: a
//!   table taking inserts is not read whole for a few of its keys.
//! - **Parts.** The decision is made once per run of the plan, shared by
//!   the partitions of a split scan ([`crate::meta_count::RunDecisions`]);
//!   partition `p` of `n` then takes the units `p`, `p + n`, ...
//! - **Bound.** Entries are weighed by their arrays' memory; the cache
//!   evicts (CLOCK-PRO, `quick_cache`) past its capacity, 256 MiB unless
//!   set ([`crate::SqlEngine::set_column_cache_bytes`], `silt serve
//!   --column-cache`). Batches handed to a statement share the cached
//!   arrays; a statement builds at most its own units' images at a time.

use std::cmp::Ordering as Cmp;
use std::ops::{Bound, Range};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use datafusion::arrow::array::{
    Array, ArrayRef, AsArray, BinaryBuilder, RecordBatch, RecordBatchOptions,
};
use datafusion::arrow::datatypes::Int64Type;
use datafusion::arrow::datatypes::{DataType, SchemaRef};
use datafusion::error::{DataFusionError, Result as DfResult};
use parking_lot::RwLock;
use quick_cache::Weighter;
use quick_cache::sync::Cache;
use silt::storage::{ComponentReader, EntryKind};
use silt::{Dataset, FieldType, Value};

use crate::batch::BatchBuilder;
use crate::convert::ColumnInfo;
use crate::error::silt_err;

mod ordered;
mod shadow;

pub use shadow::Shadow;

/// About how many records a unit of a disk component holds.
pub const CHUNK_ROWS: usize = 8192;

/// The cache's capacity unless set.
pub const DEFAULT_BYTES: u64 = 256 << 20;

/// A range of a dataset's key that a scan reads: its encoded bounds (to
/// pick chunks by the block index) and the key column with the bounds as
/// its values (to cut the chunks at the range's ends).
#[derive(Clone, Debug)]
pub struct ImageRange {
    pub enc: (Bound<Vec<u8>>, Bound<Vec<u8>>),
    /// The dataset's only key column, `bigint` or `text`.
    pub key: ColumnInfo,
    pub lo: Bound<Value>,
    pub hi: Bound<Value>,
}

impl ImageRange {
    /// Whether images can serve this range: a `bigint` key with int
    /// bounds, or a `text` key with text bounds.
    fn usable(&self) -> bool {
        let fits = |b: &Bound<Value>| match (b, &self.key.data_type) {
            (Bound::Unbounded, _) => true,
            (Bound::Included(v) | Bound::Excluded(v), DataType::Int64) => {
                matches!(v, Value::Int(_))
            }
            (Bound::Included(v) | Bound::Excluded(v), DataType::Utf8) => {
                matches!(v, Value::String(_))
            }
            _ => false,
        };
        matches!(
            (self.key.ty, &self.key.data_type),
            (FieldType::Int, DataType::Int64) | (FieldType::String, DataType::Utf8)
        ) && fits(&self.lo)
            && fits(&self.hi)
    }

    fn above_lo(&self, k: &[u8]) -> bool {
        match &self.enc.0 {
            Bound::Included(l) => k >= l.as_slice(),
            Bound::Excluded(l) => k > l.as_slice(),
            Bound::Unbounded => true,
        }
    }

    fn below_hi(&self, k: &[u8]) -> bool {
        match &self.enc.1 {
            Bound::Included(h) => k <= h.as_slice(),
            Bound::Excluded(h) => k < h.as_slice(),
            Bound::Unbounded => true,
        }
    }

    /// The rows of a chunk whose key column is `key` (sorted) that are in
    /// the range.
    fn rows(&self, key: &ArrayRef) -> DfResult<Range<usize>> {
        let n = key.len();
        // The first row whose key is not before `v` (`strict`: not at or
        // before it).
        let first_past = |v: &Value, strict: bool| -> DfResult<usize> {
            let cmp: Box<dyn Fn(usize) -> Cmp> = match (v, key.data_type()) {
                (Value::Int(v), DataType::Int64) => {
                    let a = key.as_primitive::<Int64Type>().clone();
                    let v = *v;
                    Box::new(move |i| a.value(i).cmp(&v))
                }
                (Value::String(v), DataType::Utf8) => {
                    let a = key.as_string::<i32>().clone();
                    let v = v.clone();
                    Box::new(move |i| a.value(i).cmp(v.as_str()))
                }
                _ => {
                    return Err(DataFusionError::Internal(format!(
                        "a key bound {v:?} for a key image of {}",
                        key.data_type()
                    )));
                }
            };
            Ok(partition_point(n, |i| match cmp(i) {
                Cmp::Less => true,
                Cmp::Equal => strict,
                Cmp::Greater => false,
            }))
        };
        let start = match &self.lo {
            Bound::Included(v) => first_past(v, false)?,
            Bound::Excluded(v) => first_past(v, true)?,
            Bound::Unbounded => 0,
        };
        let end = match &self.hi {
            Bound::Included(v) => first_past(v, true)?,
            Bound::Excluded(v) => first_past(v, false)?,
            Bound::Unbounded => n,
        };
        Ok(start..end.max(start))
    }
}

/// The first of `0..n` for which `before` is false (`before` is true for
/// a prefix).
fn partition_point(n: usize, before: impl Fn(usize) -> bool) -> usize {
    let (mut lo, mut hi) = (0, n);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if before(mid) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    lo
}

/// Which run an image is of.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum RunId {
    /// Chunk `chunk` of the disk component `uid`.
    Disk { uid: u64, chunk: u32 },
    /// The whole memtable `uid` at `version`.
    Mem { uid: u64, version: u64 },
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct ImageKey {
    run: RunId,
    what: What,
}

/// What of a run an image holds.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum What {
    /// A column, by name and types: its image is a pure function of them.
    Column {
        name: String,
        ty: FieldType,
        data_type: DataType,
    },
    /// The run's encoded keys, sorted: of a disk chunk, its live records'
    /// (row for row with its column images) and its deleted keys; of a
    /// memtable, every key it holds, deleted or not.
    Keys,
}

impl ImageKey {
    fn new(run: RunId, c: &ColumnInfo) -> ImageKey {
        ImageKey {
            run,
            what: What::Column {
                name: c.name.clone(),
                ty: c.ty,
                data_type: c.data_type.clone(),
            },
        }
    }

    fn keys(run: RunId) -> ImageKey {
        ImageKey {
            run,
            what: What::Keys,
        }
    }
}

/// One column of a run: its arrays (one per chunk of a memtable; one for
/// a disk chunk) and, for a memtable, the key range read.
#[derive(Clone)]
struct Image {
    arrays: Arc<[ArrayRef]>,
    range: Option<Arc<(Vec<u8>, Vec<u8>)>>,
}

#[derive(Clone)]
struct ImageWeight;

impl Weighter<ImageKey, Image> for ImageWeight {
    fn weight(&self, key: &ImageKey, val: &Image) -> u64 {
        let arrays: usize = val.arrays.iter().map(|a| a.get_array_memory_size()).sum();
        let range = val.range.as_ref().map_or(0, |r| r.0.len() + r.1.len());
        let name = match &key.what {
            What::Column { name, .. } => name.len(),
            What::Keys => 0,
        };
        (arrays + range + name + 96) as u64
    }
}

/// What the cache did, for `silt stats` and tests.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ColumnCacheStats {
    pub capacity_bytes: u64,
    pub bytes: u64,
    pub entries: u64,
    /// Column chunks found in the cache, and built.
    pub hits: u64,
    pub misses: u64,
    /// Scans that read images, and full scans that could not.
    pub scans: u64,
    pub fallbacks: u64,
    /// Scans of overlapping runs, whose older versions were left out.
    pub shadowed: u64,
}

/// The column images of an engine's datasets (a session-config extension
/// every session of the engine shares).
pub struct ColumnCache {
    cache: RwLock<Arc<Cache<ImageKey, Image, ImageWeight>>>,
    capacity: AtomicU64,
    hits: AtomicU64,
    misses: AtomicU64,
    scans: AtomicU64,
    fallbacks: AtomicU64,
    shadowed: AtomicU64,
}

impl std::fmt::Debug for ColumnCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ColumnCache({:?})", self.stats())
    }
}

fn new_cache(bytes: u64) -> Arc<Cache<ImageKey, Image, ImageWeight>> {
    // quick_cache wants an estimate of the number of entries: chunks of
    // about 64 KiB.
    let items = usize::try_from(bytes / (64 << 10))
        .unwrap_or(usize::MAX)
        .max(16);
    Arc::new(Cache::with_weighter(items, bytes.max(1), ImageWeight))
}

impl ColumnCache {
    pub fn new(bytes: u64) -> ColumnCache {
        ColumnCache {
            cache: RwLock::new(new_cache(bytes)),
            capacity: AtomicU64::new(bytes),
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
            scans: AtomicU64::new(0),
            fallbacks: AtomicU64::new(0),
            shadowed: AtomicU64::new(0),
        }
    }

    /// A new capacity (0 turns images off); what was kept is dropped.
    pub fn set_capacity(&self, bytes: u64) {
        *self.cache.write() = new_cache(bytes);
        self.capacity.store(bytes, Ordering::Relaxed);
    }

    pub fn stats(&self) -> ColumnCacheStats {
        let c = self.cache.read().clone();
        ColumnCacheStats {
            capacity_bytes: self.capacity.load(Ordering::Relaxed),
            bytes: c.weight(),
            entries: c.len() as u64,
            hits: self.hits.load(Ordering::Relaxed),
            misses: self.misses.load(Ordering::Relaxed),
            scans: self.scans.load(Ordering::Relaxed),
            fallbacks: self.fallbacks.load(Ordering::Relaxed),
            shadowed: self.shadowed.load(Ordering::Relaxed),
        }
    }

    fn map(&self) -> Arc<Cache<ImageKey, Image, ImageWeight>> {
        self.cache.read().clone()
    }

    /// The units of a scan of `ds` (all of it, or the key range `range`)
    /// projecting `cols` from images, or `None` when the scan must read
    /// records (see the module doc). `ordered`: the scan hands out rows in
    /// key order.
    pub fn plan(
        &self,
        ds: &Dataset,
        cols: &[ColumnInfo],
        ordered: bool,
        range: Option<&ImageRange>,
    ) -> Option<Arc<Units>> {
        let units = self.plan_inner(ds, cols, ordered, range);
        match &units {
            Some(_) => self.scans.fetch_add(1, Ordering::Relaxed),
            None => self.fallbacks.fetch_add(1, Ordering::Relaxed),
        };
        units.map(Arc::new)
    }

    fn plan_inner(
        &self,
        ds: &Dataset,
        cols: &[ColumnInfo],
        ordered: bool,
        range: Option<&ImageRange>,
    ) -> Option<Units> {
        let capacity = self.capacity.load(Ordering::Relaxed);
        // The document column decodes whole records: not worth images.
        if cols.is_empty() || capacity == 0 || cols.iter().any(|c| c.rest.is_some()) {
            return None;
        }
        if range.is_some_and(|r| !r.usable()) {
            return None;
        }
        let parts = ds.primary_runs()?;
        if ordered && parts.len() > 1 {
            return None;
        }
        // The chunks the scan reads, from the components' metadata.
        let picked: Vec<Vec<(Arc<ComponentReader>, Vec<Picked>)>> = parts
            .iter()
            .map(|p| {
                p.disk
                    .iter()
                    .filter(|c| c.meta().entries > 0)
                    .map(|c| (c.clone(), pick_chunks(c, range)))
                    .collect()
            })
            .collect();
        let estimate = estimate(ds, cols, &parts, &picked);
        if estimate > capacity / 2 {
            return None;
        }
        let map = self.map();
        let mut units: Vec<(Vec<u8>, Unit)> = Vec::new();
        let mut key_bytes = 0u64;
        let mut shadowed = false;
        for (p, picked) in parts.iter().zip(picked) {
            let mut mems: Vec<MemRun> = Vec::new();
            for m in &p.mems {
                let run = match range {
                    // A range reads only its part of the table, uncached:
                    // a changing table is not read whole for a few keys.
                    Some(r) => mem_slice(ds, m, r, cols)?,
                    None => self.mem_image(&map, ds, m, cols)?,
                };
                if run.range.is_some() {
                    mems.push(run);
                }
            }
            let span = |c: &ComponentReader| {
                let m = c.meta();
                (m.min_key.clone(), m.max_key.clone())
            };
            let mem_spans: Vec<(Vec<u8>, Vec<u8>)> =
                mems.iter().filter_map(|m| m.range.clone()).collect();
            let disk_spans: Vec<(Vec<u8>, Vec<u8>)> = picked.iter().map(|(c, _)| span(c)).collect();
            let disjoint = {
                let mut r: Vec<(&[u8], &[u8])> = mem_spans
                    .iter()
                    .chain(&disk_spans)
                    .map(|(a, b)| (a.as_slice(), b.as_slice()))
                    .collect();
                silt::dataset::runs_disjoint(&mut r)
            };
            if !disjoint {
                // Overlapping runs: an older run's versions of keys a newer
                // run holds are dropped (`Shadow`). Key order would need the
                // runs merged, and memtables are not masked (only two of
                // them overlap, while one is being flushed).
                let mut r: Vec<(&[u8], &[u8])> = mem_spans
                    .iter()
                    .map(|(a, b)| (a.as_slice(), b.as_slice()))
                    .collect();
                // In key order, whole scans only: their runs are merged a
                // range of keys at a time ([`ordered`]).
                if (ordered && range.is_some()) || !silt::dataset::runs_disjoint(&mut r) {
                    return None;
                }
                shadowed = true;
                key_bytes += picked
                    .iter()
                    .map(|(c, _)| {
                        let m = c.meta();
                        m.entries * ((m.min_key.len() + m.max_key.len()) as u64 / 2 + 8)
                    })
                    .sum::<u64>();
            }
            // The chunks of one run keep their order through the stable
            // sort by the run's first key.
            let mem_keys: Vec<(Vec<u8>, Vec<u8>, ArrayRef)> = mems
                .iter()
                .filter_map(|m| {
                    let (a, b) = m.range.clone()?;
                    Some((a, b, m.keys.clone()))
                })
                .collect();
            let shadows: Vec<Option<Arc<Shadow>>> = (0..picked.len())
                .map(|j| {
                    let (lo, hi) = &disk_spans[j];
                    let meets = |a: &[u8], b: &[u8]| a <= hi.as_slice() && b >= lo.as_slice();
                    (!disjoint)
                        .then(|| Shadow {
                            mems: mem_keys
                                .iter()
                                .filter(|(a, b, _)| meets(a, b))
                                .map(|(_, _, k)| k.clone())
                                .collect(),
                            disk: picked[..j]
                                .iter()
                                .zip(&disk_spans)
                                .filter(|(_, (a, b))| meets(a, b))
                                .map(|((n, _), _)| n.clone())
                                .collect(),
                        })
                        .filter(|s| !s.mems.is_empty() || !s.disk.is_empty())
                        .map(Arc::new)
                })
                .collect();
            if ordered && !disjoint {
                let mem_pieces = mems
                    .into_iter()
                    .flat_map(|m| m.units.into_iter().zip(m.put_keys))
                    .filter_map(|(u, keys)| match u {
                        Unit::Ready(arrays) => Some((arrays, keys)),
                        _ => None,
                    })
                    .collect();
                units.extend(ordered::buckets(mem_pieces, &picked, &shadows));
                continue;
            }
            for m in mems {
                let first = m.range.map(|r| r.0).unwrap_or_default();
                for u in m.units {
                    units.push((first.clone(), u));
                }
            }
            for (j, (c, chunks)) in picked.iter().enumerate() {
                let lo = &disk_spans[j].0;
                let shadow = shadows[j].clone();
                for ch in chunks {
                    units.push((
                        lo.clone(),
                        Unit::Disk {
                            comp: c.clone(),
                            chunk: ch.chunk,
                            blocks: ch.blocks.clone(),
                            cut: if ch.whole {
                                None
                            } else {
                                range.cloned().map(Arc::new)
                            },
                            shadow: shadow.clone(),
                        },
                    ));
                }
            }
        }
        if key_bytes > 0 && estimate.saturating_add(key_bytes) > capacity / 2 {
            return None;
        }
        if shadowed {
            self.shadowed.fetch_add(1, Ordering::Relaxed);
        }
        if ordered {
            units.sort_by(|a, b| a.0.cmp(&b.0));
        }
        Some(Units {
            units: units.into_iter().map(|(_, u)| u).collect(),
        })
    }

    /// The image of a memtable ([`MemRun`]); `None` when it could not be
    /// read committed.
    fn mem_image(
        &self,
        map: &Cache<ImageKey, Image, ImageWeight>,
        ds: &Dataset,
        m: &Arc<silt::lsm::MemTable>,
        cols: &[ColumnInfo],
    ) -> Option<MemRun> {
        let version = m.version();
        let run = RunId::Mem {
            uid: m.uid(),
            version,
        };
        let cached: Option<Vec<Image>> = cols
            .iter()
            .map(|c| map.get(&ImageKey::new(run.clone(), c)))
            .collect();
        let keys = map.get(&ImageKey::keys(run.clone()));
        if let (Some(images), Some(keys)) = (cached, keys)
            && let Some((key_array, put_keys)) = keys.arrays.split_first()
            && m.version() == version
        {
            self.hits
                .fetch_add(images.len() as u64 + 1, Ordering::Relaxed);
            return Some(MemRun {
                range: images.first().and_then(|i| i.range.as_deref().cloned()),
                units: mem_units(&images, cols.len()),
                keys: key_array.clone(),
                put_keys: put_keys.to_vec(),
            });
        }
        let (read, chunks, keys, put_keys) =
            read_mem(ds, m, (Bound::Unbounded, Bound::Unbounded), cols)?;
        self.misses
            .fetch_add(cols.len() as u64 + 1, Ordering::Relaxed);
        let range = read.range.clone().map(Arc::new);
        let images: Vec<Image> = (0..cols.len())
            .map(|i| Image {
                arrays: chunks.iter().filter_map(|c| c.get(i).cloned()).collect(),
                range: range.clone(),
            })
            .collect();
        if read.stable && read.version == version {
            for (c, img) in cols.iter().zip(&images) {
                map.insert(ImageKey::new(run.clone(), c), img.clone());
            }
            let arrays: Vec<ArrayRef> = std::iter::once(keys.clone())
                .chain(put_keys.iter().cloned())
                .collect();
            map.insert(
                ImageKey::keys(run.clone()),
                Image {
                    arrays: Arc::from(arrays),
                    range: range.clone(),
                },
            );
        }
        Some(MemRun {
            range: read.range,
            units: mem_units(&images, cols.len()),
            keys,
            put_keys,
        })
    }

    /// The batch of one unit, from the cache or built (and kept).
    pub fn unit_batch(
        &self,
        unit: &Unit,
        cols: &[ColumnInfo],
        schema: &SchemaRef,
    ) -> DfResult<Option<RecordBatch>> {
        let arrays = self
            .unit_arrays(unit, cols, true)?
            .ok_or_else(|| DataFusionError::Internal("a column image was not built".to_owned()))?;
        batch_of(schema, arrays)
    }

    /// The batch of a unit when every column of it is in the cache.
    pub fn cached_batch(
        &self,
        unit: &Unit,
        cols: &[ColumnInfo],
        schema: &SchemaRef,
    ) -> DfResult<Option<Option<RecordBatch>>> {
        match self.unit_arrays(unit, cols, false)? {
            Some(arrays) => batch_of(schema, arrays).map(Some),
            None => Ok(None),
        }
    }

    /// The arrays of a unit, without its shadowed rows and cut to its key
    /// range; `None` when something is not in the cache and `build` is
    /// false.
    fn unit_arrays(
        &self,
        unit: &Unit,
        cols: &[ColumnInfo],
        build: bool,
    ) -> DfResult<Option<Vec<ArrayRef>>> {
        let (comp, chunk, blocks, range, shadow) = match unit {
            Unit::Ready(arrays) => return Ok(Some(arrays.clone())),
            Unit::Merged(b) => return self.bucket_arrays(b, cols, build),
            Unit::Disk {
                comp,
                chunk,
                blocks,
                cut,
                shadow,
            } => (comp, chunk, blocks, cut, shadow),
        };
        let mut want = cols.to_vec();
        let key = range.as_ref().map(|r| {
            cols.iter()
                .position(|c| c.name == r.key.name)
                .unwrap_or_else(|| {
                    want.push(r.key.clone());
                    cols.len()
                })
        });
        let unshadowed = self.unshadowed(comp, *chunk, blocks, shadow.as_deref(), &want, build)?;
        let Some((arrays, _)) = unshadowed else {
            return Ok(None);
        };
        match (range, key) {
            (Some(r), Some(k)) => cut(arrays, k, cols.len(), r).map(Some),
            _ => Ok(Some(arrays)),
        }
    }

    /// The arrays of columns `cols` of a disk chunk, from the cache or (if
    /// `build`) built and kept; `None` when one is missing and not built.
    fn disk_arrays(
        &self,
        comp: &ComponentReader,
        chunk: u32,
        blocks: &Range<usize>,
        cols: &[ColumnInfo],
        build: bool,
    ) -> DfResult<Option<Vec<ArrayRef>>> {
        let map = self.map();
        let run = RunId::Disk {
            uid: comp.uid(),
            chunk,
        };
        let mut arrays: Vec<Option<ArrayRef>> = cols
            .iter()
            .map(|c| {
                map.get(&ImageKey::new(run.clone(), c))
                    .and_then(|i| i.arrays.first().cloned())
            })
            .collect();
        let missing: Vec<usize> = (0..cols.len()).filter(|i| arrays[*i].is_none()).collect();
        if !missing.is_empty() && !build {
            return Ok(None);
        }
        self.hits
            .fetch_add((cols.len() - missing.len()) as u64, Ordering::Relaxed);
        if !missing.is_empty() {
            self.misses
                .fetch_add(missing.len() as u64, Ordering::Relaxed);
            let want: Vec<ColumnInfo> = missing.iter().map(|i| cols[*i].clone()).collect();
            let built = build_chunk(comp, blocks.clone(), &want)?;
            for ((i, c), a) in missing.iter().zip(&want).zip(built) {
                map.insert(
                    ImageKey::new(run.clone(), c),
                    Image {
                        arrays: Arc::from(vec![a.clone()]),
                        range: None,
                    },
                );
                arrays[*i] = Some(a);
            }
        }
        let arrays: Option<Vec<ArrayRef>> = arrays.into_iter().collect();
        arrays
            .map(Some)
            .ok_or_else(|| DataFusionError::Internal("a column image was not built".to_owned()))
    }
}

/// About how many bytes the images a scan reads take: fixed-width columns
/// about 9 bytes a record, others about their share of a stored record (its
/// size over its declared fields) and an offset.
fn estimate(
    ds: &Dataset,
    cols: &[ColumnInfo],
    parts: &[silt::dataset::PartitionRuns],
    picked: &[Vec<(Arc<ComponentReader>, Vec<Picked>)>],
) -> u64 {
    let (mut records, mut bytes, mut read) = (0u64, 0u64, 0u64);
    for (p, picked) in parts.iter().zip(picked) {
        for (c, chunks) in picked {
            let m = c.meta();
            records += m.entries;
            bytes += m.raw_bytes.max(m.entries);
            let blocks: usize = chunks.iter().map(|ch| ch.blocks.len()).sum();
            read += m.entries * blocks as u64 / c.num_blocks().max(1) as u64;
        }
        for m in &p.mems {
            records += m.len() as u64;
            bytes += m.bytes();
            read += m.len() as u64;
        }
    }
    let fields = (ds.def().fields.len() as u64).max(1);
    let per_field = bytes / records.max(1) / fields;
    cols.iter()
        .map(|c| {
            let w = if c.data_type.is_primitive() {
                9
            } else {
                per_field + 5
            };
            w.saturating_mul(read)
        })
        .sum()
}

/// What a scan takes of a memtable: the range of the keys read
/// (antimatter included; `None` when there were none), the rows as units,
/// and every key read, sorted (to hide older versions, [`Shadow`]).
struct MemRun {
    range: Option<(Vec<u8>, Vec<u8>)>,
    units: Vec<Unit>,
    keys: ArrayRef,
    /// The keys of each unit's rows, row for row (to merge in key order,
    /// [`ordered`]).
    put_keys: Vec<ArrayRef>,
}

/// The part of a memtable in a scan's key range, read now (and not kept);
/// `None` when it could not be read committed.
fn mem_slice(
    ds: &Dataset,
    m: &Arc<silt::lsm::MemTable>,
    range: &ImageRange,
    cols: &[ColumnInfo],
) -> Option<MemRun> {
    let bounds = (
        range.enc.0.as_ref().map(Vec::as_slice),
        range.enc.1.as_ref().map(Vec::as_slice),
    );
    let (read, chunks, keys, put_keys) = read_mem(ds, m, bounds, cols)?;
    Some(MemRun {
        range: read.range,
        units: chunks.into_iter().map(Unit::Ready).collect(),
        keys,
        put_keys,
    })
}

/// Read a memtable's records within `bounds` under the read-committed
/// check: the columns in chunks of [`CHUNK_ROWS`] rows, every key read
/// (deleted ones too), and each chunk's rows' keys. `None` when it could
/// not be read committed, or not read (the ordinary scan then decides,
/// and reports what is wrong).
#[allow(clippy::type_complexity)]
fn read_mem(
    ds: &Dataset,
    m: &Arc<silt::lsm::MemTable>,
    bounds: (Bound<&[u8]>, Bound<&[u8]>),
    cols: &[ColumnInfo],
) -> Option<(
    silt::dataset::MemRead,
    Vec<Vec<ArrayRef>>,
    ArrayRef,
    Vec<ArrayRef>,
)> {
    let mut chunks: Vec<Vec<ArrayRef>> = Vec::new();
    let mut put_keys: Vec<ArrayRef> = Vec::new();
    let mut b = BatchBuilder::new(cols, CHUNK_ROWS);
    let mut keys = BinaryBuilder::new();
    let mut puts = BinaryBuilder::new();
    let read = ds.read_memtable_in(m, bounds, |key, rec| {
        keys.append_value(key);
        let Some(rec) = rec else {
            return Ok(());
        };
        b.push_encoded(rec)?;
        puts.append_value(key);
        if b.rows() >= CHUNK_ROWS {
            let full = std::mem::replace(&mut b, BatchBuilder::new(cols, CHUNK_ROWS));
            chunks.push(full.finish_arrays());
            put_keys.push(Arc::new(puts.finish()));
        }
        Ok(())
    });
    let Ok(Some(read)) = read else {
        return None;
    };
    if b.rows() > 0 {
        chunks.push(b.finish_arrays());
        put_keys.push(Arc::new(puts.finish()));
    }
    Some((read, chunks, Arc::new(keys.finish()), put_keys))
}

/// The arrays of a chunk (its key column at `key`) sliced to the rows in
/// `range`, and only the first `keep` of them (the key column goes when it
/// only came along for the cut).
fn cut(
    arrays: Vec<ArrayRef>,
    key: usize,
    keep: usize,
    range: &ImageRange,
) -> DfResult<Vec<ArrayRef>> {
    let k = arrays.get(key).ok_or_else(|| {
        DataFusionError::Internal("a cut chunk without its key column".to_owned())
    })?;
    let rows = range.rows(k)?;
    Ok(arrays
        .iter()
        .take(keep)
        .map(|a| a.slice(rows.start, rows.len()))
        .collect())
}

/// A chunk a scan reads.
struct Picked {
    chunk: u32,
    blocks: Range<usize>,
    /// Every key of the chunk is in the scan's range.
    whole: bool,
}

/// The chunks of a component whose keys can be in `range` (all of them
/// without one), from the block index: block `i`'s keys are above block
/// `i - 1`'s last key (at least the component's smallest for block 0) and
/// at most its own last key.
fn pick_chunks(c: &ComponentReader, range: Option<&ImageRange>) -> Vec<Picked> {
    let min_key = c.meta().min_key.as_slice();
    chunks_of(c)
        .into_iter()
        .enumerate()
        .filter_map(|(i, blocks)| {
            let whole = Picked {
                chunk: i as u32,
                blocks: blocks.clone(),
                whole: true,
            };
            let Some(r) = range else {
                return Some(whole);
            };
            let last = c.block_last_key(blocks.end.checked_sub(1)?);
            // Keys are at least `min_key` (block 0), or above the last key
            // of the block before.
            let (floor, floor_in) = match blocks.start {
                0 => (min_key, true),
                s => (c.block_last_key(s - 1), false),
            };
            if !r.above_lo(last) {
                return None;
            }
            // No key is below the range's end: at or past it when the
            // floor is (an inclusive floor), or when it reaches it (an
            // exclusive one: the keys are above it).
            let past_hi = match (&r.enc.1, floor_in) {
                (Bound::Unbounded, _) => false,
                (_, true) => !r.below_hi(floor),
                (Bound::Included(h) | Bound::Excluded(h), false) => floor >= h.as_slice(),
            };
            if past_hi {
                return None;
            }
            let inside = r.below_hi(last)
                && if floor_in {
                    r.above_lo(floor)
                } else {
                    floor_meets(r, floor)
                };
            Some(Picked {
                whole: inside,
                ..whole
            })
        })
        .collect()
}

/// Whether every key above `floor` (exclusive) satisfies the range's lower
/// bound: `floor` is at least an inclusive bound, or at least an
/// exclusive one.
fn floor_meets(r: &ImageRange, floor: &[u8]) -> bool {
    match &r.enc.0 {
        Bound::Included(l) | Bound::Excluded(l) => floor >= l.as_slice(),
        Bound::Unbounded => true,
    }
}

/// A full scan's units, in the order partition 0 of 1 hands them out.
pub struct Units {
    pub units: Vec<Unit>,
}

impl Units {
    /// The units partition `p` of `n` reads.
    pub fn of_partition(&self, p: usize, n: usize) -> impl Iterator<Item = &Unit> {
        self.units.iter().skip(p).step_by(n.max(1))
    }
}

/// One piece of a full scan.
pub enum Unit {
    /// A chunk of a memtable's image: its arrays, in column order.
    Ready(Vec<ArrayRef>),
    /// The blocks `blocks` of a disk component: chunk `chunk`, cut to
    /// the key range `cut` when it reaches past it.
    Disk {
        comp: Arc<ComponentReader>,
        chunk: u32,
        blocks: Range<usize>,
        cut: Option<Arc<ImageRange>>,
        /// Newer runs whose keys hide versions of this chunk.
        shadow: Option<Arc<Shadow>>,
    },
    /// The rows of overlapping runs in one range of keys, merged into key
    /// order ([`ordered`]).
    Merged(Arc<ordered::Bucket>),
}

/// The memtable's chunks as units (column `i`'s chunk `k` is
/// `images[i].arrays[k]`).
fn mem_units(images: &[Image], ncols: usize) -> Vec<Unit> {
    let chunks = images.first().map_or(0, |i| i.arrays.len());
    (0..chunks)
        .map(|k| {
            Unit::Ready(
                (0..ncols)
                    .filter_map(|i| images.get(i).and_then(|img| img.arrays.get(k).cloned()))
                    .collect(),
            )
        })
        .collect()
}

/// The chunks of a component: runs of whole blocks of about
/// [`CHUNK_ROWS`] entries (from its metadata only, so the same every time).
fn chunks_of(c: &ComponentReader) -> Vec<Range<usize>> {
    let blocks = c.num_blocks();
    let entries = c.meta().entries.max(1) as usize;
    let per = (CHUNK_ROWS * blocks).div_ceil(entries).max(1);
    (0..blocks)
        .step_by(per)
        .map(|s| s..(s + per).min(blocks))
        .collect()
}

/// Decode the columns `cols` of the live records of some blocks.
fn build_chunk(
    comp: &ComponentReader,
    blocks: Range<usize>,
    cols: &[ColumnInfo],
) -> DfResult<Vec<ArrayRef>> {
    let mut b = BatchBuilder::new(cols, CHUNK_ROWS);
    for i in blocks {
        comp.for_each_in_block(i, |_, kind, _, value| {
            if kind == EntryKind::Put {
                b.push_encoded(value)?;
            }
            Ok(true)
        })
        .map_err(silt_err)?;
    }
    Ok(b.finish_arrays())
}

/// Arrays as a batch of `schema`; `None` when it has no rows.
fn batch_of(schema: &SchemaRef, arrays: Vec<ArrayRef>) -> DfResult<Option<RecordBatch>> {
    let rows = arrays.first().map_or(0, |a| a.len());
    if rows == 0 {
        return Ok(None);
    }
    let opts = RecordBatchOptions::new().with_row_count(Some(rows));
    Ok(Some(RecordBatch::try_new_with_options(
        schema.clone(),
        arrays,
        &opts,
    )?))
}
