//! Column images: the columns a scan projects, decoded once from an
//! immutable run of a dataset's primary (a disk component, or a memtable
//! at one version) into Arrow arrays and kept in a cache bounded in bytes.
//! A full scan whose runs are disjoint ([`silt::dataset::runs_disjoint`]:
//! no key has versions in two runs) is then the concatenation of its runs'
//! images: aggregates, joins and filters on columns without an index read
//! arrays, not records, as a column store would.
//!
//! - **Units.** A disk component is cut into chunks of whole data blocks
//!   (about [`CHUNK_ROWS`] records each; the cut depends only on the
//!   component's metadata). A chunk of one column is one cache entry, keyed
//!   by the component's uid, the chunk and the column (name and types: an
//!   image is a pure function of them). A memtable is read whole when the
//!   scan starts, under the scan's read-committed check
//!   ([`silt::Dataset::read_memtable`]), and its image is kept for its
//!   version when it did not change while read.
//! - **When.** Only for scans that read the whole dataset outside a
//!   transaction, not for a write, not backwards and without a limit
//!   (those read few records the ordinary way); never when the runs
//!   overlap (then versions must be merged), nor when the projected
//!   columns of the whole dataset would not fit in half the cache. A scan
//!   that needs key order (one partition) hands out the runs in key order.
//! - **Parts.** The decision is made once per run of the plan, shared by
//!   the partitions of a split scan ([`crate::meta_count::RunDecisions`]);
//!   partition `p` of `n` then takes the units `p`, `p + n`, ...
//! - **Bound.** Entries are weighed by their arrays' memory; the cache
//!   evicts (CLOCK-PRO, `quick_cache`) past its capacity, 256 MiB unless
//!   set ([`crate::SqlEngine::set_column_cache_bytes`], `silt serve
//!   --column-cache`). Batches handed to a statement share the cached
//!   arrays; a statement builds at most its own units' images at a time.

use std::ops::Range;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use datafusion::arrow::array::{ArrayRef, RecordBatch, RecordBatchOptions};
use datafusion::arrow::datatypes::{DataType, SchemaRef};
use datafusion::error::{DataFusionError, Result as DfResult};
use parking_lot::RwLock;
use quick_cache::Weighter;
use quick_cache::sync::Cache;
use silt::storage::{ComponentReader, EntryKind};
use silt::{Dataset, FieldType};

use crate::batch::BatchBuilder;
use crate::convert::ColumnInfo;
use crate::error::silt_err;

/// About how many records a unit of a disk component holds.
pub const CHUNK_ROWS: usize = 8192;

/// The cache's capacity unless set.
pub const DEFAULT_BYTES: u64 = 256 << 20;

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
    name: String,
    ty: FieldType,
    data_type: DataType,
}

impl ImageKey {
    fn new(run: RunId, c: &ColumnInfo) -> ImageKey {
        ImageKey {
            run,
            name: c.name.clone(),
            ty: c.ty,
            data_type: c.data_type.clone(),
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
        (arrays + range + key.name.len() + 96) as u64
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
        }
    }

    fn map(&self) -> Arc<Cache<ImageKey, Image, ImageWeight>> {
        self.cache.read().clone()
    }

    /// The units of a full scan of `ds` projecting `cols` from images,
    /// or `None` when the scan must read records (see the module doc).
    /// `ordered`: the scan hands out rows in key order.
    pub fn plan(&self, ds: &Dataset, cols: &[ColumnInfo], ordered: bool) -> Option<Arc<Units>> {
        let units = self.plan_inner(ds, cols, ordered);
        match &units {
            Some(_) => self.scans.fetch_add(1, Ordering::Relaxed),
            None => self.fallbacks.fetch_add(1, Ordering::Relaxed),
        };
        units.map(Arc::new)
    }

    fn plan_inner(&self, ds: &Dataset, cols: &[ColumnInfo], ordered: bool) -> Option<Units> {
        let capacity = self.capacity.load(Ordering::Relaxed);
        // The document column decodes whole records: not worth images.
        if cols.is_empty() || capacity == 0 || cols.iter().any(|c| c.rest.is_some()) {
            return None;
        }
        let parts = ds.primary_runs()?;
        if ordered && parts.len() > 1 {
            return None;
        }
        // Will the images fit? Fixed-width columns take about 9 bytes a
        // record; others about their share of a stored record (its size
        // over its declared fields) and an offset.
        let (mut records, mut bytes) = (0u64, 0u64);
        for p in &parts {
            for c in &p.disk {
                let m = c.meta();
                records += m.entries;
                bytes += m.raw_bytes.max(m.entries);
            }
            for m in &p.mems {
                records += m.len() as u64;
                bytes += m.bytes();
            }
        }
        let fields = (ds.def().fields.len() as u64).max(1);
        let per_field = bytes / records.max(1) / fields;
        let estimate: u64 = cols
            .iter()
            .map(|c| {
                let w = if c.data_type.is_primitive() {
                    9
                } else {
                    per_field + 5
                };
                w.saturating_mul(records)
            })
            .sum();
        if estimate > capacity / 2 {
            return None;
        }
        let map = self.map();
        let mut units: Vec<(Vec<u8>, Unit)> = Vec::new();
        for p in parts {
            let mut ranges: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
            let mut mem_units = Vec::new();
            for m in &p.mems {
                let (range, batches) = self.mem_image(&map, ds, m, cols)?;
                if let Some(r) = range {
                    ranges.push(r.clone());
                    mem_units.push((r.0, batches));
                }
            }
            let mut disk_units = Vec::new();
            for c in &p.disk {
                let m = c.meta();
                if m.entries == 0 {
                    continue;
                }
                ranges.push((m.min_key.clone(), m.max_key.clone()));
                disk_units.push(c.clone());
            }
            let mut r: Vec<(&[u8], &[u8])> = ranges
                .iter()
                .map(|(a, b)| (a.as_slice(), b.as_slice()))
                .collect();
            if !silt::dataset::runs_disjoint(&mut r) {
                return None;
            }
            // The chunks of one run keep their order through the stable
            // sort by the run's first key.
            for (first, batches) in mem_units {
                for b in batches {
                    units.push((first.clone(), b));
                }
            }
            for c in disk_units {
                let first = c.meta().min_key.clone();
                for (chunk, blocks) in chunks_of(&c).into_iter().enumerate() {
                    units.push((
                        first.clone(),
                        Unit::Disk {
                            comp: c.clone(),
                            chunk: chunk as u32,
                            blocks,
                        },
                    ));
                }
            }
        }
        if ordered {
            units.sort_by(|a, b| a.0.cmp(&b.0));
        }
        Some(Units {
            units: units.into_iter().map(|(_, u)| u).collect(),
        })
    }

    /// The image of a memtable: its key range and its batches; `None` when
    /// it could not be read committed.
    #[allow(clippy::type_complexity)]
    fn mem_image(
        &self,
        map: &Cache<ImageKey, Image, ImageWeight>,
        ds: &Dataset,
        m: &Arc<silt::lsm::MemTable>,
        cols: &[ColumnInfo],
    ) -> Option<(Option<(Vec<u8>, Vec<u8>)>, Vec<Unit>)> {
        let version = m.version();
        let run = RunId::Mem {
            uid: m.uid(),
            version,
        };
        let cached: Option<Vec<Image>> = cols
            .iter()
            .map(|c| map.get(&ImageKey::new(run.clone(), c)))
            .collect();
        if let Some(images) = cached
            && m.version() == version
        {
            self.hits.fetch_add(images.len() as u64, Ordering::Relaxed);
            let range = images.first().and_then(|i| i.range.as_deref().cloned());
            return Some((range, mem_units(&images, cols.len())));
        }
        let mut chunks: Vec<Vec<ArrayRef>> = Vec::new();
        let mut b = BatchBuilder::new(cols, CHUNK_ROWS);
        let read = ds.read_memtable(m, |_, rec| {
            b.push_encoded(rec)?;
            if b.rows() >= CHUNK_ROWS {
                let full = std::mem::replace(&mut b, BatchBuilder::new(cols, CHUNK_ROWS));
                chunks.push(full.finish_arrays());
            }
            Ok(())
        });
        // Not read committed, or not readable: the ordinary scan decides
        // (and reports what is wrong).
        let Ok(Some(read)) = read else {
            return None;
        };
        if b.rows() > 0 {
            chunks.push(b.finish_arrays());
        }
        self.misses.fetch_add(cols.len() as u64, Ordering::Relaxed);
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
        }
        Some((read.range, mem_units(&images, cols.len())))
    }

    /// The batch of one unit, from the cache or built (and kept).
    pub fn unit_batch(
        &self,
        unit: &Unit,
        cols: &[ColumnInfo],
        schema: &SchemaRef,
    ) -> DfResult<Option<RecordBatch>> {
        match unit {
            Unit::Ready(parts) => batch_of(schema, parts.clone()),
            Unit::Disk {
                comp,
                chunk,
                blocks,
            } => {
                let map = self.map();
                let run = RunId::Disk {
                    uid: comp.uid(),
                    chunk: *chunk,
                };
                let mut arrays: Vec<Option<ArrayRef>> = cols
                    .iter()
                    .map(|c| {
                        map.get(&ImageKey::new(run.clone(), c))
                            .and_then(|i| i.arrays.first().cloned())
                    })
                    .collect();
                let missing: Vec<usize> =
                    (0..cols.len()).filter(|i| arrays[*i].is_none()).collect();
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
                let arrays = arrays.ok_or_else(|| {
                    DataFusionError::Internal("a column image was not built".to_owned())
                })?;
                batch_of(schema, arrays)
            }
        }
    }

    /// The batch of a unit when every column of it is in the cache.
    pub fn cached_batch(
        &self,
        unit: &Unit,
        cols: &[ColumnInfo],
        schema: &SchemaRef,
    ) -> DfResult<Option<Option<RecordBatch>>> {
        match unit {
            Unit::Ready(parts) => batch_of(schema, parts.clone()).map(Some),
            Unit::Disk { comp, chunk, .. } => {
                let map = self.map();
                let run = RunId::Disk {
                    uid: comp.uid(),
                    chunk: *chunk,
                };
                let arrays: Option<Vec<ArrayRef>> = cols
                    .iter()
                    .map(|c| {
                        map.get(&ImageKey::new(run.clone(), c))
                            .and_then(|i| i.arrays.first().cloned())
                    })
                    .collect();
                match arrays {
                    Some(a) => {
                        self.hits.fetch_add(cols.len() as u64, Ordering::Relaxed);
                        batch_of(schema, a).map(Some)
                    }
                    None => Ok(None),
                }
            }
        }
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
    /// The blocks `blocks` of a disk component: chunk `chunk`.
    Disk {
        comp: Arc<ComponentReader>,
        chunk: u32,
        blocks: Range<usize>,
    },
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
