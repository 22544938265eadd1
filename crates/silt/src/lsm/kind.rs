//! Index kinds of the LSM framework: what a component carries besides its
//! ordered entries, and how entries of different components are reconciled
//! (what each kind writes into a component: `docs/format/component.md`).
//!
//! Every LSM index in Silt stores totally ordered `(key, entry)` pairs in
//! prefix-compressed blocks (see `storage::component`). An index kind adds:
//!
//! - **spatial** (the LSM R-tree): each entry's value is the bounds of a
//!   geometry (a point, or the MBR of a rectangle or polygon). Keys start with
//!   the 64-bit Hilbert value of the geometry's centre (or its Z-value, or
//!   its x then y, by the index's order), so a component's data blocks are
//!   the fully packed, curve-ordered leaves of a static R-tree;
//!   the component's aux block stores one MBR per leaf and the upper levels
//!   are packed from them at open ([`PackedRtree`]). In memory, an `rstar`
//!   R-tree mirrors the memtable.
//! - **deleted-key reconciliation** (AsterixDB's LSM R-tree and inverted
//!   index): deletes do not travel as antimatter to disk. In memory a delete is
//!   still an antimatter entry at the exact entry key (so it hides that key in
//!   older components and undo and recovery stay the same as for every other
//!   index); at flush the primary keys of the memtable's antimatter entries
//!   are written to a companion deleted-key B+-tree file (`<id>.dk.sc`, with a
//!   bloom filter). An entry of component *i* is valid unless a newer
//!   component's deleted-key tree holds its primary key. Merges drop entries
//!   deleted by a newer input and carry the union of the inputs' deleted keys
//!   forward unless the merge includes the oldest component.
//!
//! The alternative, **antimatter reconciliation** (B+-trees, and the "AMLSM"
//! R-tree variant), keeps antimatter entries in components; for the R-tree,
//! antimatter carries the deleted geometry's bounds so that spatial searches
//! find it and Hilbert-ordered merges reconcile it.

use crate::error::{Error, Result};
use crate::geo::{EMPTY_RECT, Rect};
use crate::geo::{rect_intersects, rect_union};
use crate::storage::block_filters::{self, BlockFilters, BlockObserver};
use crate::storage::bloom::key_hash;
use crate::storage::component::Probe;
use crate::storage::source::{ComponentSource, LocalFile};
use crate::storage::time_zones::{self, TimeZones};
use crate::storage::{
    BlockCache, ComponentMeta, ComponentReader, ComponentWriter, EntryKind, WriterOptions,
};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// How the entries of different components are reconciled.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Reconcile {
    /// Deletes are antimatter entries at the same key, in memory and on disk.
    #[default]
    Antimatter,
    /// Deletes become primary keys in a per-component deleted-key B+-tree.
    DeletedKeys,
}

/// Where the primary key sits inside an entry key (deleted-key trees need it).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum PkSplit {
    /// The whole key is the primary key.
    #[default]
    Whole,
    /// A fixed-size prefix (e.g. the 8-byte Hilbert value) precedes it.
    Prefix(usize),
    /// It follows the first `n` encoded key parts (e.g. the token).
    AfterParts(usize),
}

impl PkSplit {
    /// The primary-key bytes of an entry key.
    pub fn pk<'a>(&self, key: &'a [u8]) -> Result<&'a [u8]> {
        match *self {
            PkSplit::Whole => Ok(key),
            PkSplit::Prefix(n) => key.get(n..).ok_or_else(|| {
                Error::corrupt("<index entry>", format!("entry key shorter than {n} bytes"))
            }),
            PkSplit::AfterParts(n) => Ok(&key[crate::value::key_parts_len(key, n)?..]),
        }
    }
}

/// What kind of index a tree is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct TreeKind {
    /// Entries carry bounds; components carry a packed R-tree; memtables an rstar tree.
    pub spatial: bool,
    pub reconcile: Reconcile,
    pub pk: PkSplit,
}

impl TreeKind {
    pub fn deleted_keys(&self) -> bool {
        self.reconcile == Reconcile::DeletedKeys
    }
}

/// What an R-tree entry's bounds stand for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BoundsKind {
    /// The geometry is this point.
    Point,
    /// The geometry is this rectangle.
    Rect,
    /// The rectangle is the MBR of a polygon (refine against the record).
    Mbr,
}

/// Encode the bounds of a geometry as an entry value, little-endian f64:
/// 16 bytes for a point (x, y), 32 for a rectangle (min x, min y, max x,
/// max y), 33 (a trailing 1) for the MBR of a polygon.
pub fn encode_bounds(r: &Rect, kind: BoundsKind) -> Vec<u8> {
    let n = if kind == BoundsKind::Point { 2 } else { 4 };
    let mut v = Vec::with_capacity(8 * n + 1);
    for c in &r[..n] {
        v.extend_from_slice(&c.to_le_bytes());
    }
    if kind == BoundsKind::Mbr {
        v.push(1);
    }
    v
}

/// Decode [`encode_bounds`] with its kind.
pub fn decode_bounds_kind(v: &[u8]) -> Option<(Rect, BoundsKind)> {
    let (r, point) = decode_bounds(v)?;
    Some((
        r,
        if point {
            BoundsKind::Point
        } else if v.len() == 33 {
            BoundsKind::Mbr
        } else {
            BoundsKind::Rect
        },
    ))
}

/// Decode [`encode_bounds`] as (rectangle, is a point); `None` for any other
/// length (e.g. an antimatter entry written without bounds).
pub fn decode_bounds(v: &[u8]) -> Option<(Rect, bool)> {
    let f = |i: usize| {
        let mut b = [0u8; 8];
        b.copy_from_slice(&v[8 * i..8 * i + 8]);
        f64::from_le_bytes(b)
    };
    match v.len() {
        16 => {
            let (x, y) = (f(0), f(1));
            Some(([x, y, x, y], true))
        }
        32 | 33 => Some(([f(0), f(1), f(2), f(3)], false)),
        _ => None,
    }
}

/// Children per node of the packed R-tree above the leaves.
const FANOUT: usize = 16;
const AUX_MAGIC: u8 = b'R';

/// The static R-tree of one disk component: level 0 holds one MBR per data
/// block (the leaves, fully packed and in Hilbert order); level `l + 1`
/// packs `FANOUT` consecutive nodes of level `l`.
#[derive(Debug)]
pub struct PackedRtree {
    levels: Vec<Vec<Rect>>,
}

impl PackedRtree {
    pub fn from_leaves(leaves: Vec<Rect>) -> PackedRtree {
        let mut levels = vec![leaves];
        while levels.last().is_some_and(|l| l.len() > 1) {
            let below = levels.last().map(|l| l.as_slice()).unwrap_or(&[]);
            let up: Vec<Rect> = below
                .chunks(FANOUT)
                .map(|c| c.iter().fold(EMPTY_RECT, |a, r| rect_union(&a, r)))
                .collect();
            levels.push(up);
        }
        PackedRtree { levels }
    }

    pub fn encode_leaves(leaves: &[Rect]) -> Vec<u8> {
        let mut v = Vec::with_capacity(5 + leaves.len() * 32);
        v.push(AUX_MAGIC);
        v.extend_from_slice(&(leaves.len() as u32).to_le_bytes());
        for r in leaves {
            for c in r {
                v.extend_from_slice(&c.to_le_bytes());
            }
        }
        v
    }

    pub fn decode(aux: &[u8]) -> std::result::Result<PackedRtree, String> {
        if aux.len() < 5 || aux[0] != AUX_MAGIC {
            return Err("the R-tree block is missing or has the wrong type".into());
        }
        let n = u32::from_le_bytes([aux[1], aux[2], aux[3], aux[4]]) as usize;
        if aux.len() != 5 + n * 32 {
            return Err(format!(
                "the R-tree block should hold {n} leaf MBRs ({} bytes) but has {} bytes",
                5 + n * 32,
                aux.len()
            ));
        }
        let mut leaves = Vec::with_capacity(n);
        for i in 0..n {
            let mut r = [0.0; 4];
            for (j, c) in r.iter_mut().enumerate() {
                let p = 5 + i * 32 + j * 8;
                let mut b = [0u8; 8];
                b.copy_from_slice(&aux[p..p + 8]);
                *c = f64::from_le_bytes(b);
            }
            leaves.push(r);
        }
        Ok(PackedRtree::from_leaves(leaves))
    }

    pub fn leaves(&self) -> usize {
        self.levels.first().map_or(0, |l| l.len())
    }

    /// Index of the top level (0 when there is a single leaf or none).
    pub fn top_level(&self) -> usize {
        self.levels.len().saturating_sub(1)
    }

    pub fn nodes(&self, level: usize) -> usize {
        self.levels.get(level).map_or(0, |l| l.len())
    }

    pub fn mbr(&self, level: usize, i: usize) -> Rect {
        self.levels
            .get(level)
            .and_then(|l| l.get(i))
            .copied()
            .unwrap_or(EMPTY_RECT)
    }

    /// Child node indexes (at `level - 1`) of node `i` at `level > 0`.
    pub fn children(&self, level: usize, i: usize) -> std::ops::Range<usize> {
        let below = self.nodes(level.saturating_sub(1));
        (i * FANOUT).min(below)..((i + 1) * FANOUT).min(below)
    }

    /// Leaf (block) numbers whose MBR intersects `q`, in Hilbert order.
    pub fn blocks_intersecting(&self, q: &Rect, out: &mut Vec<usize>) {
        self.blocks_reaching(q, &|_| true, out);
    }

    /// Leaf (block) numbers whose MBR intersects `q` and passes `reach`
    /// (as every node above it does), in Hilbert order.
    pub fn blocks_reaching(&self, q: &Rect, reach: &dyn Fn(&Rect) -> bool, out: &mut Vec<usize>) {
        if self.levels.is_empty() || self.leaves() == 0 {
            return;
        }
        let top = self.top_level();
        let mut stack: Vec<(usize, usize)> = (0..self.nodes(top)).rev().map(|i| (top, i)).collect();
        while let Some((level, i)) = stack.pop() {
            let mbr = self.mbr(level, i);
            if !rect_intersects(&mbr, q) || !reach(&mbr) {
                continue;
            }
            if level == 0 {
                out.push(i);
            } else {
                for c in self.children(level, i).rev() {
                    stack.push((level - 1, c));
                }
            }
        }
    }
}

/// The order of a nearest-neighbour search: keys that grow with the
/// distance from the query.
pub trait KnnMetric: Send + Sync {
    /// A lower bound of the key of anything inside `r` (tree nodes).
    fn bound(&self, r: &Rect) -> f64;
    /// The key of an entry: exact for points and rectangles, a lower bound
    /// for the MBR of a polygon.
    fn key(&self, r: &Rect, kind: BoundsKind) -> f64;
    /// A cheaper lower bound of [`key`](Self::key): entries wait in the
    /// queue under it and get their exact key only when they reach the
    /// front (most candidates never do).
    fn key_lower(&self, r: &Rect, kind: BoundsKind) -> f64 {
        self.key(r, kind)
    }
}

/// Structures attached to an open component by its index kind (see
/// [`ComponentReader::attach`]); the deleted-key B+-tree is the component's
/// companion ([`ComponentReader::companion`]).
#[derive(Debug, Default)]
pub struct ComponentExt {
    pub rtree: Option<PackedRtree>,
    /// Per-block attribute bloom filters and zone maps (embedded indexes on
    /// a primary index), a view over the aux block.
    pub filters: Option<BlockFilters>,
    /// The time zone map of a value-list component.
    pub zones: Option<TimeZones>,
}

/// The time zone map of a value-list component, if it has one.
pub fn time_zones(c: &ComponentReader) -> Option<&TimeZones> {
    c.attached::<ComponentExt>().and_then(|x| x.zones.as_ref())
}

/// The packed R-tree of a spatial component.
pub fn packed_rtree(c: &ComponentReader) -> Option<&PackedRtree> {
    c.attached::<ComponentExt>().and_then(|x| x.rtree.as_ref())
}

/// The per-block attribute filters of a component, if it has any.
pub fn block_filters(c: &ComponentReader) -> Option<&BlockFilters> {
    c.attached::<ComponentExt>()
        .and_then(|x| x.filters.as_ref())
}

/// Whether the deleted-key tree of `c` holds `pk`.
pub fn deleted_contains(c: &ComponentReader, pk: &[u8]) -> Result<bool> {
    let Some(d) = c.companion() else {
        return Ok(false);
    };
    Ok(matches!(d.probe(pk, key_hash(pk))?, Probe::Found(_)))
}

/// Metadata key of a spatial component: how many of its entries have bounds
/// that are not a point (written since the `zorder` order; absent before).
const NON_POINTS: &str = "non_points";

/// Whether every entry of the spatial component `c` is a point (its centre
/// is its bounds, so the key's cell holds everything the entry can match).
/// False when unknown (components written before the count was kept).
pub fn points_only(c: &ComponentReader) -> bool {
    c.meta().extra.get(NON_POINTS).and_then(|v| v.as_u64()) == Some(0)
}

/// Whether `c` has a non-empty deleted-key tree.
pub fn has_deleted(c: &ComponentReader) -> bool {
    c.companion().is_some()
}

/// Path of the deleted-key companion of the component at `main`.
pub fn dk_path(main: &Path) -> PathBuf {
    main.with_extension("dk.sc")
}

/// Open a component file and attach what its kind needs.
pub fn open_component(
    path: &Path,
    cache: Arc<BlockCache>,
    kind: &TreeKind,
) -> Result<Arc<ComponentReader>> {
    open_component_at(path, cache, kind, None)
}

/// [`open_component`] placing the component at `level` instead of the level
/// written in its file (the MANIFEST's level wins: a leveled policy moves a
/// component down without rewriting it).
pub fn open_component_at(
    path: &Path,
    cache: Arc<BlockCache>,
    kind: &TreeKind,
    level: Option<u32>,
) -> Result<Arc<ComponentReader>> {
    let main = Box::new(LocalFile::open(path)?);
    let companion = || -> Result<Box<dyn ComponentSource>> {
        let dp = dk_path(path);
        if !dp.exists() {
            return Err(Error::corrupt(
                &dp,
                "the component's deleted-key file is missing; the index directory was modified or damaged",
            ));
        }
        Ok(Box::new(LocalFile::open(&dp)?))
    };
    open_component_from(main, &companion, cache, kind, level)
}

/// [`open_component_at`] for a component whose bytes come from `main`
/// (a local file or an object), `companion` giving its deleted-key file's
/// when its metadata says there is one.
pub fn open_component_from(
    main: Box<dyn ComponentSource>,
    companion: &dyn Fn() -> Result<Box<dyn ComponentSource>>,
    cache: Arc<BlockCache>,
    kind: &TreeKind,
    level: Option<u32>,
) -> Result<Arc<ComponentReader>> {
    let path = &main.path().to_path_buf();
    let mut r = ComponentReader::from_source(main, cache.clone())?;
    if let Some(l) = level {
        r.set_level(l);
    }
    let mut ext = ComponentExt::default();
    if kind.spatial && r.meta().entries > 0 {
        let t = PackedRtree::decode(r.aux()).map_err(|m| Error::corrupt(path, m))?;
        if t.leaves() != r.num_blocks() {
            return Err(Error::corrupt(
                path,
                format!(
                    "the R-tree block lists {} leaves for {} data blocks",
                    t.leaves(),
                    r.num_blocks()
                ),
            ));
        }
        ext.rtree = Some(t);
    }
    if !kind.spatial && r.aux().first() == Some(&block_filters::MAGIC) {
        let f =
            BlockFilters::decode(r.aux(), r.num_blocks()).map_err(|m| Error::corrupt(path, m))?;
        ext.filters = Some(f);
    }
    if !kind.spatial && r.aux().first() == Some(&time_zones::ZONE_MAGIC) {
        ext.zones = Some(TimeZones::decode(r.aux()).map_err(|e| match e {
            Error::Corrupt { reason, .. } => Error::corrupt(path, reason),
            e => e,
        })?);
    }
    let n_deleted = r
        .meta()
        .extra
        .get("deleted_keys")
        .and_then(|v| v.as_u64())
        .unwrap_or(0);
    if n_deleted > 0 {
        r.set_companion(Arc::new(ComponentReader::from_source(companion()?, cache)?));
    }
    r.attach(ext);
    Ok(Arc::new(r))
}

/// Writes one component of any kind: the entries, the leaf MBRs of a
/// spatial component and the deleted-key file of a deleted-key component.
pub struct ComponentBuilder {
    w: ComponentWriter,
    path: PathBuf,
    kind: TreeKind,
    opts: WriterOptions,
    cur: Rect,
    pending: bool,
    leaves: Vec<Rect>,
    /// Spatial: entries (antimatter included) whose bounds are not a point.
    non_points: u64,
    deleted: Vec<Vec<u8>>,
    /// Sees every entry written, block by block (see `lsm::hooks`).
    observer: Option<Box<dyn BlockObserver>>,
}

impl ComponentBuilder {
    pub fn create(
        path: &Path,
        meta: ComponentMeta,
        opts: WriterOptions,
        kind: TreeKind,
    ) -> Result<ComponentBuilder> {
        Ok(ComponentBuilder {
            w: ComponentWriter::create(path, meta, opts.clone())?,
            path: path.to_path_buf(),
            kind,
            opts,
            cur: EMPTY_RECT,
            pending: false,
            leaves: Vec::new(),
            non_points: 0,
            deleted: Vec::new(),
            observer: None,
        })
    }

    /// Let `o` see every entry written from now on and contribute the aux
    /// block (ignored for spatial components, whose aux block is the R-tree).
    pub fn set_observer(&mut self, o: Box<dyn BlockObserver>) {
        self.observer = Some(o);
    }

    /// Add an entry in key order. In a deleted-key tree an antimatter entry
    /// only records its primary key.
    pub fn add(&mut self, key: &[u8], kind: EntryKind, seq: u64, value: &[u8]) -> Result<()> {
        if kind == EntryKind::Delete && self.kind.deleted_keys() {
            self.deleted.push(self.kind.pk.pk(key)?.to_vec());
            return Ok(());
        }
        let before = self.w.blocks();
        self.w.add(key, kind, seq, value)?;
        if let Some(o) = self.observer.as_mut() {
            o.entry(key, kind, seq, value);
            if self.w.blocks() > before {
                o.end_block();
            }
        }
        if self.kind.spatial {
            if let Some((r, point)) = decode_bounds(value) {
                self.cur = rect_union(&self.cur, &r);
                if !point {
                    self.non_points += 1;
                }
            }
            self.pending = true;
            if self.w.blocks() > before {
                self.leaves.push(self.cur);
                self.cur = EMPTY_RECT;
                self.pending = false;
            }
        }
        Ok(())
    }

    /// Carry a deleted primary key forward (merges).
    pub fn add_deleted(&mut self, pk: &[u8]) {
        self.deleted.push(pk.to_vec());
    }

    pub fn entries(&self) -> u64 {
        self.w.entries()
    }

    pub fn bytes_written(&self) -> u64 {
        self.w.bytes_written()
    }

    /// Write the file(s); `None` if there was nothing to write.
    pub fn finish(mut self, cache: &Arc<BlockCache>) -> Result<Option<Arc<ComponentReader>>> {
        if self.w.entries() == 0 && self.deleted.is_empty() {
            self.w.abandon();
            return Ok(None);
        }
        if !self.deleted.is_empty() {
            self.deleted.sort_unstable();
            self.deleted.dedup();
            let dp = dk_path(&self.path);
            let dopts = WriterOptions {
                bloom_fpr: 0.01,
                ..self.opts.clone()
            };
            let id = self.w.meta_mut().id;
            let mut dw = ComponentWriter::create(
                &dp,
                ComponentMeta {
                    id,
                    ..Default::default()
                },
                dopts,
            )?;
            for pk in &self.deleted {
                dw.add(pk, EntryKind::Put, 0, &[])?;
            }
            dw.finish()?;
            let n = self.deleted.len();
            let meta = self.w.meta_mut();
            if !meta.extra.is_object() {
                meta.extra = serde_json::json!({});
            }
            meta.extra["deleted_keys"] = serde_json::json!(n);
        }
        if self.kind.spatial {
            if self.pending {
                self.leaves.push(self.cur);
            }
            self.w.set_aux(PackedRtree::encode_leaves(&self.leaves));
            let meta = self.w.meta_mut();
            if !meta.extra.is_object() {
                meta.extra = serde_json::json!({});
            }
            meta.extra[NON_POINTS] = serde_json::json!(self.non_points);
        } else if let Some(o) = self.observer.take() {
            let aux = o.finish();
            if !aux.is_empty() {
                self.w.set_aux(aux);
            }
        }
        self.w.finish()?;
        open_component(&self.path, cache.clone(), &self.kind).map(Some)
    }

    pub fn abandon(self) {
        let dp = dk_path(&self.path);
        self.w.abandon();
        let _ = std::fs::remove_file(dp);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds_roundtrip() {
        let r = [1.5, -2.0, 3.0, 4.25];
        assert_eq!(
            decode_bounds(&encode_bounds(&r, BoundsKind::Rect)),
            Some((r, false))
        );
        let p = [7.0, 8.0, 7.0, 8.0];
        assert_eq!(
            decode_bounds(&encode_bounds(&p, BoundsKind::Point)),
            Some((p, true))
        );
        assert_eq!(
            decode_bounds_kind(&encode_bounds(&r, BoundsKind::Mbr)),
            Some((r, BoundsKind::Mbr))
        );
        assert_eq!(decode_bounds(&[]), None);
    }

    #[test]
    fn packed_rtree_finds_exactly_the_intersecting_leaves() {
        let leaves: Vec<Rect> = (0..100)
            .map(|i| {
                let x = f64::from(i);
                [x, 0.0, x + 0.5, 1.0]
            })
            .collect();
        let t = PackedRtree::decode(&PackedRtree::encode_leaves(&leaves)).unwrap();
        assert_eq!(t.leaves(), 100);
        assert_eq!(t.top_level(), 2);
        let mut out = Vec::new();
        t.blocks_intersecting(&[10.2, 0.5, 20.0, 0.6], &mut out);
        assert_eq!(out, (10..=20).collect::<Vec<_>>());
        assert!(PackedRtree::decode(&[b'R', 1, 0, 0, 0]).is_err());
    }
}
