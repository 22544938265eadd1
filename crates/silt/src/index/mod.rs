//! Secondary index definitions and the entries they derive from records.
//!
//! Every secondary index is an LSM index of its own (one per storage
//! partition), maintained inside the record's transaction. This module says
//! what entries a record contributes; `dataset` does the maintenance and the
//! access paths.

use crate::error::{Error, Result};
use crate::geo::hilbert::Space;
use crate::geo::text::{keyword_tokens, ngram_query_tokens, ngram_tokens};
use crate::lsm::kind::{BoundsKind, PkSplit, Reconcile, TreeKind, encode_bounds};
use crate::lsm::policy::MergePolicy;
use crate::schema::validate_name;
use crate::value::{self, Value};
use serde::{Deserialize, Serialize};

/// The kind of a secondary index.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum IndexKind {
    /// LSM B+-tree on one field or a composite of fields: entries
    /// ⟨secondary key, primary key⟩, antimatter on delete, no uniqueness.
    Btree,
    /// LSM R-tree on one geometry field: entries ⟨Hilbert value of the
    /// centre, primary key⟩ → bounds (a point, or the MBR of a rectangle or
    /// polygon, refined exactly against the record).
    Rtree,
    /// LSM inverted index of the words of a text field (Unicode letters and
    /// digits, case-folded): entries ⟨word, primary key⟩.
    Keyword,
    /// LSM inverted index of the n-grams of a text field (case-folded):
    /// entries ⟨gram, primary key⟩; answers substring queries.
    Ngram,
    /// DHVB-tree (seed 000 §4.2): an LSM B+-tree on a point field ordered by
    /// the point's stored 64-bit Hilbert value: entries ⟨Hilbert value,
    /// primary key⟩ → point. Box and distance queries use the next-match
    /// search (scan while inside the query's cells, else seek to the next
    /// Hilbert value inside). Points only; no kNN (use an rtree).
    Dhvb,
    /// DHB-tree (seed 000 §4.2.1): an LSM B+-tree on a point field ordered
    /// by the Hilbert order of the points at full precision, with no stored
    /// Hilbert value and no entry value: the key is the point's position on
    /// the order-64 Hilbert curve over the order-preserving 64-bit encodings
    /// of x and y (invertible, see `geo::dhb`) ‖ primary key. Box and
    /// distance queries by next-match at full resolution. Points only; no
    /// kNN (use an rtree).
    Dhb,
    /// SHB-tree (seed 000 §4.2.2, §5.2): an LSM B+-tree over a static grid
    /// hierarchy (`levels`, default 6 levels of 16x16) whose cells are
    /// numbered in Hilbert order: entries ⟨cell number ‖ level, primary key⟩
    /// → bounds, one per cell of the geometry's MBR (covering rule). Queries
    /// scan merged cell ranges and probe ancestor cells. Any geometry; no kNN.
    Shb,
    /// SIF (seed 000 §4.2.3): the SHB grid's cells as tokens of an inverted
    /// index, each object stored at every level (⟨token, primary key⟩ →
    /// bounds), so a covered parent cell is one token lookup. Any geometry;
    /// no kNN.
    Sif,
    /// LevelDB++ "Embedded Index" on one field (seed 001 §3.3): no index
    /// tree; the primary's disk components carry per-block bloom filters
    /// and zone maps of the field, its memtables an in-memory secondary
    /// structure. Answers recency queries (`Query::Recent`).
    Embedded,
    /// LevelDB++ "Eager" stand-alone index on one field: key = the value,
    /// entry = the value's whole posting list (primary key, sequence
    /// number), newest first, rewritten (read-modify-write) by every write.
    Eager,
    /// LevelDB++ "Lazy" stand-alone index on one field: every write appends
    /// a posting without reading; the postings of a value form one fragment
    /// per component, concatenated newest first by merges.
    Lazy,
    /// LevelDB++ "Composite" stand-alone index: key = secondary key ‖
    /// primary key (what `btree` stores); answers recency queries by
    /// scanning the key range, validating and sorting by recency.
    Composite,
}

impl IndexKind {
    pub fn parse(s: &str) -> Result<IndexKind> {
        match s.to_ascii_lowercase().as_str() {
            "btree" | "b-tree" | "bplustree" => Ok(IndexKind::Btree),
            "rtree" | "r-tree" | "spatial" => Ok(IndexKind::Rtree),
            "keyword" | "inverted" | "text" | "fulltext" => Ok(IndexKind::Keyword),
            "ngram" | "n-gram" => Ok(IndexKind::Ngram),
            "dhvb" | "dhvb-tree" => Ok(IndexKind::Dhvb),
            "dhb" | "dhb-tree" => Ok(IndexKind::Dhb),
            "shb" | "shb-tree" => Ok(IndexKind::Shb),
            "sif" => Ok(IndexKind::Sif),
            "embedded" => Ok(IndexKind::Embedded),
            "eager" => Ok(IndexKind::Eager),
            "lazy" => Ok(IndexKind::Lazy),
            "composite" => Ok(IndexKind::Composite),
            other => Err(Error::Config(format!(
                "unknown index type `{other}`; available: btree, rtree, dhvb, dhb, shb, sif, keyword, ngram, embedded, eager, lazy, composite"
            ))),
        }
    }
}

impl std::fmt::Display for IndexKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            IndexKind::Btree => "btree",
            IndexKind::Rtree => "rtree",
            IndexKind::Keyword => "keyword",
            IndexKind::Ngram => "ngram",
            IndexKind::Dhvb => "dhvb",
            IndexKind::Dhb => "dhb",
            IndexKind::Shb => "shb",
            IndexKind::Sif => "sif",
            IndexKind::Embedded => "embedded",
            IndexKind::Eager => "eager",
            IndexKind::Lazy => "lazy",
            IndexKind::Composite => "composite",
        })
    }
}

impl IndexKind {
    /// Kinds maintained by `crate::recency` rather than by entries
    /// ([`IndexDef::entries`]): embedded, eager and lazy.
    pub fn is_recency(self) -> bool {
        matches!(
            self,
            IndexKind::Embedded | IndexKind::Eager | IndexKind::Lazy
        )
    }

    /// Kinds whose index entries are posting lists keyed by the value.
    pub fn posting_lists(self) -> bool {
        matches!(self, IndexKind::Eager | IndexKind::Lazy)
    }

    /// Kinds that answer `Query::Recent` (the k most recent matches).
    pub fn answers_recent(self) -> bool {
        matches!(
            self,
            IndexKind::Btree
                | IndexKind::Composite
                | IndexKind::Embedded
                | IndexKind::Eager
                | IndexKind::Lazy
        )
    }

    /// Kinds whose entries are ⟨secondary key ‖ primary key⟩ (B+-trees).
    pub fn is_btree(self) -> bool {
        matches!(self, IndexKind::Btree | IndexKind::Composite)
    }

    /// Kinds on one geometry field answering intersects and
    /// within-distance queries (and spatial joins).
    pub fn is_spatial(self) -> bool {
        matches!(
            self,
            IndexKind::Rtree | IndexKind::Dhvb | IndexKind::Dhb | IndexKind::Shb | IndexKind::Sif
        )
    }

    /// Kinds on the SHB/SIF grid hierarchy.
    pub fn is_grid(self) -> bool {
        matches!(self, IndexKind::Shb | IndexKind::Sif)
    }
}

/// How an R-tree or inverted index reconciles deletes (seed 000 §2.3 and
/// §3.5 compare the two for the R-tree).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReconcileOption {
    /// "AMLSM": antimatter entries with the deleted entry's key and bounds,
    /// reconciled while merging in Hilbert (key) order.
    Antimatter,
    /// A deleted-key B+-tree with a bloom filter per disk component.
    DeletedKeys,
}

impl ReconcileOption {
    pub fn parse(s: &str) -> Result<ReconcileOption> {
        match s.to_ascii_lowercase().replace('-', "_").as_str() {
            "antimatter" | "amlsm" => Ok(ReconcileOption::Antimatter),
            "deleted_keys" | "deleted_key" | "dkbtree" | "deleted_key_btree" => {
                Ok(ReconcileOption::DeletedKeys)
            }
            other => Err(Error::Config(format!(
                "unknown reconciliation `{other}`; use `antimatter` (AMLSM) or `deleted_keys` (deleted-key B+-tree)"
            ))),
        }
    }
}

/// The order of an R-tree's disk components (seed 002 compares both).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RtreeOrder {
    /// The 64-bit Hilbert value of the centre (key = Hilbert ‖ pk).
    Hilbert,
    /// x, then y of the centre ("Simple" in seed 002): key =
    /// order-preserving x ‖ order-preserving y ‖ pk.
    Simple,
    /// The 64-bit Z-value (Morton code) of the centre's cell on the same
    /// 2^32 x 2^32 grid as the Hilbert order (key = Z ‖ pk; seed 001
    /// §5.3.2). Leveled merges then give each level disjoint Z ranges, and
    /// spatial searches skip disk components of points whose Z (key) range
    /// meets none of the query rectangle's Z ranges (`geo::zorder`).
    Zorder,
}

impl RtreeOrder {
    pub fn parse(s: &str) -> Result<RtreeOrder> {
        match s.to_ascii_lowercase().as_str() {
            "hilbert" => Ok(RtreeOrder::Hilbert),
            "simple" | "xy" => Ok(RtreeOrder::Simple),
            "zorder" | "z-order" | "z_order" | "morton" => Ok(RtreeOrder::Zorder),
            other => Err(Error::Config(format!(
                "unknown R-tree order `{other}`; use `hilbert` (default), `simple` (x, then y) or `zorder` (Z-value, Morton)"
            ))),
        }
    }
}

/// Kind-specific options of an index.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct IndexOptions {
    /// R-tree and inverted indexes. Default: antimatter for the R-tree (the
    /// faster variant in seed 000), deleted keys for inverted indexes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reconcile: Option<ReconcileOption>,
    /// n-gram length (default 3).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gram: Option<usize>,
    /// R-tree: the rectangle mapped onto the Hilbert (or Z) curve, [min x, min y,
    /// max x, max y]; default the whole lon/lat world. Geometries outside it
    /// are still indexed correctly (their centres clamp to its edge).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub space: Option<[f64; 4]>,
    /// R-tree: target size of a leaf (a data block of a disk component),
    /// default [`DEFAULT_LEAF_BYTES`]. Searches decode whole leaves, so
    /// smaller leaves prune better (measured: kNN(10) over 200 K clustered
    /// points after compaction took 103 µs with 4 KiB leaves, 53 µs with
    /// 1 KiB, 60 µs with 512 B).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub leaf_bytes: Option<usize>,
    /// Embedded indexes: bloom filter bits per distinct value and block
    /// (default [`crate::storage::block_filters::DEFAULT_BITS_PER_KEY`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bits_per_key: Option<f64>,
    /// R-tree: the order of disk components' entries (default Hilbert;
    /// `simple` or `zorder`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub order: Option<RtreeOrder>,
    /// SHB-tree and SIF: n per grid level (each level divides a cell into
    /// 2^n x 2^n; the paper's presets l = 2, m = 3, h = 4), top first;
    /// default [`crate::geo::grid::DEFAULT_LEVELS`] (6 x h).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub levels: Option<Vec<u8>>,
    /// SHB-tree and SIF: most cells a stored geometry maps to (default
    /// [`crate::geo::grid::DEFAULT_OBJECT_CELLS`]); overlapping cells are
    /// divided at the next level only while the count stays within it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_cells: Option<usize>,
}

/// Default R-tree leaf size.
pub const DEFAULT_LEAF_BYTES: usize = 1024;

/// A secondary index as the catalog records it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct IndexDef {
    pub name: String,
    /// Catalog-assigned, > 0 (0 is the primary index in log records).
    #[serde(default)]
    pub id: u32,
    pub kind: IndexKind,
    /// Indexed fields, in key order.
    pub fields: Vec<String>,
    pub policy: MergePolicy,
    #[serde(default)]
    pub options: IndexOptions,
}

/// Default n-gram length.
pub const DEFAULT_GRAM: usize = 3;

impl IndexDef {
    pub fn btree(name: &str, fields: &[&str]) -> IndexDef {
        IndexDef {
            name: name.to_owned(),
            id: 0,
            kind: IndexKind::Btree,
            fields: fields.iter().map(|s| (*s).to_owned()).collect(),
            policy: MergePolicy::default(),
            options: IndexOptions::default(),
        }
    }

    /// An R-tree on a geometry field (antimatter reconciliation).
    pub fn rtree(name: &str, field: &str) -> IndexDef {
        IndexDef {
            kind: IndexKind::Rtree,
            ..IndexDef::btree(name, &[field])
        }
    }

    /// A keyword inverted index on a text field.
    pub fn keyword(name: &str, field: &str) -> IndexDef {
        IndexDef {
            kind: IndexKind::Keyword,
            ..IndexDef::btree(name, &[field])
        }
    }

    /// An n-gram inverted index on a text field.
    pub fn ngram(name: &str, field: &str, n: usize) -> IndexDef {
        let mut d = IndexDef {
            kind: IndexKind::Ngram,
            ..IndexDef::btree(name, &[field])
        };
        d.options.gram = Some(n);
        d
    }

    /// A LevelDB++ recency index (`embedded`, `eager`, `lazy` or
    /// `composite`) on one field.
    pub fn recency(name: &str, kind: IndexKind, field: &str) -> IndexDef {
        IndexDef {
            kind,
            ..IndexDef::btree(name, &[field])
        }
    }

    /// Bloom filter bits per value of an embedded index.
    pub fn bits_per_key(&self) -> f64 {
        self.options
            .bits_per_key
            .unwrap_or(crate::storage::block_filters::DEFAULT_BITS_PER_KEY)
    }

    pub fn reconcile(mut self, r: ReconcileOption) -> Self {
        self.options.reconcile = Some(r);
        self
    }

    /// The reconciliation this index uses.
    pub fn reconcile_mode(&self) -> ReconcileOption {
        match (self.kind, self.options.reconcile) {
            (IndexKind::Btree | IndexKind::Dhvb | IndexKind::Dhb | IndexKind::Shb, _) => {
                ReconcileOption::Antimatter
            }
            (k, _) if k.is_recency() || k.is_btree() => ReconcileOption::Antimatter,
            (_, Some(r)) => r,
            (IndexKind::Rtree, None) => ReconcileOption::Antimatter,
            (_, None) => ReconcileOption::DeletedKeys,
        }
    }

    pub fn leaf_bytes(&self) -> usize {
        self.options.leaf_bytes.unwrap_or(DEFAULT_LEAF_BYTES)
    }

    pub fn gram(&self) -> usize {
        self.options.gram.unwrap_or(DEFAULT_GRAM)
    }

    /// The R-tree's component order.
    pub fn rtree_order(&self) -> RtreeOrder {
        self.options.order.unwrap_or(RtreeOrder::Hilbert)
    }

    /// The grid of an SHB-tree or SIF index.
    pub fn grid(&self) -> Result<crate::geo::grid::Grid> {
        let levels = self
            .options
            .levels
            .as_deref()
            .unwrap_or(&crate::geo::grid::DEFAULT_LEVELS);
        crate::geo::grid::Grid::new(self.space(), levels)
            .map_err(|m| Error::Config(format!("index `{}`: {m}", self.name)))
    }

    /// Most cells a stored geometry maps to (SHB-tree, SIF).
    pub fn max_cells(&self) -> usize {
        self.options
            .max_cells
            .unwrap_or(crate::geo::grid::DEFAULT_OBJECT_CELLS)
    }

    /// The Hilbert space of an R-tree.
    pub fn space(&self) -> Space {
        match self.options.space {
            Some([a, b, c, d]) => Space {
                min_x: a,
                min_y: b,
                max_x: c,
                max_y: d,
            },
            None => Space::WORLD,
        }
    }

    /// The LSM tree kind this index is stored as.
    pub fn tree_kind(&self) -> TreeKind {
        TreeKind {
            spatial: self.kind == IndexKind::Rtree,
            reconcile: match self.reconcile_mode() {
                ReconcileOption::Antimatter => Reconcile::Antimatter,
                ReconcileOption::DeletedKeys => Reconcile::DeletedKeys,
            },
            pk: match self.kind {
                IndexKind::Btree | IndexKind::Composite => PkSplit::AfterParts(self.fields.len()),
                // Keys are values (posting lists), or there is no tree.
                IndexKind::Embedded | IndexKind::Eager | IndexKind::Lazy => PkSplit::Whole,
                IndexKind::Rtree if self.rtree_order() == RtreeOrder::Simple => PkSplit::Prefix(16),
                IndexKind::Rtree | IndexKind::Dhvb => PkSplit::Prefix(8),
                IndexKind::Dhb => PkSplit::Prefix(16),
                IndexKind::Shb => PkSplit::Prefix(9),
                IndexKind::Sif => PkSplit::Prefix(10),
                IndexKind::Keyword | IndexKind::Ngram => PkSplit::AfterParts(1),
            },
        }
    }

    pub fn policy(mut self, p: MergePolicy) -> Self {
        self.policy = p;
        self
    }

    pub fn validate(&self) -> Result<()> {
        validate_name("index", &self.name)?;
        if self.name == "primary" {
            return Err(Error::Config(
                "`primary` is reserved for the primary index; choose another index name".into(),
            ));
        }
        if self.fields.is_empty() {
            return Err(Error::Config(format!(
                "index `{}` needs at least one field",
                self.name
            )));
        }
        if !self.kind.is_btree() && self.fields.len() != 1 {
            return Err(Error::Config(format!(
                "a {} index indexes exactly one field; index `{}` names {}",
                self.kind,
                self.name,
                self.fields.len()
            )));
        }
        if (self.kind.is_btree()
            || self.kind.is_recency()
            || matches!(self.kind, IndexKind::Dhb | IndexKind::Shb))
            && self.options.reconcile.is_some()
        {
            return Err(Error::Config(format!(
                "{} indexes always reconcile with antimatter; `reconcile` applies to rtree, sif, keyword and ngram",
                self.kind
            )));
        }
        if let Some(b) = self.options.bits_per_key
            && (self.kind != IndexKind::Embedded || !(1.0..=1000.0).contains(&b))
        {
            return Err(Error::Config(format!(
                "`bits_per_key` applies to embedded indexes and must be between 1 and 1000, got {b}"
            )));
        }
        if let Some(b) = self.options.leaf_bytes
            && (self.kind != IndexKind::Rtree || !(512..=(4 << 20)).contains(&b))
        {
            return Err(Error::Config(format!(
                "`leaf_bytes` applies to rtree indexes and must be between 512 bytes and 4 MiB, got {b}"
            )));
        }
        if self.options.order.is_some() && self.kind != IndexKind::Rtree {
            return Err(Error::Config(
                "`order` applies to rtree indexes only".into(),
            ));
        }
        if (self.options.levels.is_some() || self.options.max_cells.is_some())
            && !self.kind.is_grid()
        {
            return Err(Error::Config(
                "`levels` and `max_cells` apply to shb and sif indexes only".into(),
            ));
        }
        if self.kind.is_grid() {
            self.grid()?;
            if !(1..=4096).contains(&self.max_cells()) {
                return Err(Error::Config(format!(
                    "`max_cells` must be between 1 and 4096, got {}",
                    self.max_cells()
                )));
            }
        }
        if self.options.gram.is_some() && self.kind != IndexKind::Ngram {
            return Err(Error::Config("`gram` applies to ngram indexes only".into()));
        }
        if !(1..=32).contains(&self.gram()) {
            return Err(Error::Config(format!(
                "n-gram length must be between 1 and 32, got {}",
                self.gram()
            )));
        }
        if let Some([a, b, c, d]) = self.options.space
            && !(a.is_finite() && b.is_finite() && c.is_finite() && d.is_finite() && a < c && b < d)
        {
            return Err(Error::Config(format!(
                "the R-tree space must be finite with min < max, got [{a}, {b}, {c}, {d}]"
            )));
        }
        if self.reconcile_mode() == ReconcileOption::DeletedKeys && self.policy.is_leveled() {
            return Err(Error::Config(format!(
                "index `{}`: the leveled merge policy needs antimatter reconciliation (a deleted-key tree hides entries of any key range); use `reconcile = antimatter` or another policy",
                self.name
            )));
        }
        self.policy.validate()
    }

    /// The secondary key values of a record: `None` when any indexed field is
    /// missing or null (such records are not indexed), an error when a value
    /// cannot be a key (array, object, geometry).
    pub fn key_values(&self, record: &Value) -> Result<Option<Vec<Value>>> {
        let mut out = Vec::with_capacity(self.fields.len());
        for f in &self.fields {
            match record.get(f) {
                None | Some(Value::Null) => return Ok(None),
                Some(v @ (Value::Array(_) | Value::Object(_) | Value::Geometry(_))) => {
                    return Err(Error::invalid(
                        Some(f),
                        format!(
                            "the {} index `{}` needs a bool, number, string or binary here, got {}",
                            self.kind,
                            self.name,
                            v.type_name()
                        ),
                    ));
                }
                Some(v) => out.push(v.clone()),
            }
        }
        Ok(Some(out))
    }

    /// Every (entry key, entry value) a record contributes, sorted by key.
    /// B+-tree: one ⟨sk‖pk⟩ (none if a field is missing or null). R-tree: one
    /// ⟨hilbert‖pk⟩ → bounds. Inverted: one ⟨token‖pk⟩ per distinct token.
    ///
    /// Eager and lazy: one ⟨encoded value⟩ → primary key, the record's
    /// posting (used by the bulk build; writes go through `crate::recency`).
    /// Embedded: none (nothing is stored apart from the primary).
    pub fn entries(&self, record: &Value, pk: &[u8]) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        match self.kind {
            IndexKind::Embedded => {
                self.key_values(record)?;
                Ok(Vec::new())
            }
            IndexKind::Eager | IndexKind::Lazy => Ok(self
                .value_key(record)?
                .map(|k| (k, pk.to_vec()))
                .into_iter()
                .collect()),
            IndexKind::Btree | IndexKind::Composite => Ok(self
                .entry_key(record, pk)?
                .map(|k| (k, Vec::new()))
                .into_iter()
                .collect()),
            IndexKind::Rtree
            | IndexKind::Dhvb
            | IndexKind::Dhb
            | IndexKind::Shb
            | IndexKind::Sif => {
                let field = &self.fields[0];
                let g = match record.get(field) {
                    None | Some(Value::Null) => return Ok(Vec::new()),
                    Some(Value::Geometry(g)) => g,
                    Some(v) => {
                        return Err(Error::invalid(
                            Some(field),
                            format!(
                                "the {} index `{}` needs a geometry (GeoJSON, WKT, [x, y] or {{x, y}}; declare the field's type as geometry to convert text), got {}",
                                self.kind,
                                self.name,
                                v.type_name()
                            ),
                        ));
                    }
                };
                g.validate()
                    .map_err(|e| Error::invalid(Some(field), e.to_string()))?;
                // The default space is the lon/lat world: coordinates must be
                // longitudes and latitudes. A custom space indexes planar data.
                if self.options.space.is_none() {
                    value::check_geographic_field(field, g)?;
                }
                let (x0, y0, x1, y1) = g.mbr();
                if matches!(self.kind, IndexKind::Dhvb | IndexKind::Dhb)
                    && !matches!(g, crate::value::Geometry::Point { .. })
                {
                    return Err(Error::invalid(
                        Some(field),
                        format!(
                            "the {} index `{}` indexes points; got a {} (use an rtree, shb or sif index for rectangles and polygons)",
                            self.kind,
                            self.name,
                            g.type_name()
                        ),
                    ));
                }
                let bk = match g {
                    crate::value::Geometry::Point { .. } => BoundsKind::Point,
                    crate::value::Geometry::Rect { .. } => BoundsKind::Rect,
                    crate::value::Geometry::Polygon { .. } => BoundsKind::Mbr,
                };
                let bounds = encode_bounds(&[x0, y0, x1, y1], bk);
                let (cx, cy) = ((x0 + x1) / 2.0, (y0 + y1) / 2.0);
                match self.kind {
                    IndexKind::Dhb => {
                        // No value: the key holds the point.
                        let mut k = Vec::with_capacity(16 + pk.len());
                        k.extend_from_slice(&crate::geo::dhb::key(x0, y0).to_be_bytes());
                        k.extend_from_slice(pk);
                        Ok(vec![(k, Vec::new())])
                    }
                    IndexKind::Shb | IndexKind::Sif => {
                        let grid = self.grid()?;
                        let cells = grid.decompose(&[x0, y0, x1, y1], self.max_cells());
                        let mut out: Vec<(Vec<u8>, Vec<u8>)> = if self.kind == IndexKind::Shb {
                            cells
                                .iter()
                                .map(|c| {
                                    let mut k = Vec::with_capacity(9 + pk.len());
                                    k.extend_from_slice(&c.key());
                                    k.extend_from_slice(pk);
                                    (k, bounds.clone())
                                })
                                .collect()
                        } else {
                            grid.sif_tokens(&cells)
                                .iter()
                                .map(|t| {
                                    let mut k = Vec::with_capacity(10 + pk.len());
                                    k.extend_from_slice(t);
                                    k.extend_from_slice(pk);
                                    (k, bounds.clone())
                                })
                                .collect()
                        };
                        out.sort_unstable();
                        out.dedup();
                        Ok(out)
                    }
                    _ if self.rtree_order() == RtreeOrder::Simple => {
                        let mut k = Vec::with_capacity(16 + pk.len());
                        k.extend_from_slice(&crate::geo::dhb::ord_bits(cx).to_be_bytes());
                        k.extend_from_slice(&crate::geo::dhb::ord_bits(cy).to_be_bytes());
                        k.extend_from_slice(pk);
                        Ok(vec![(k, bounds)])
                    }
                    _ if self.rtree_order() == RtreeOrder::Zorder => {
                        let z = crate::geo::zorder::z_value(&self.space(), cx, cy);
                        let mut k = Vec::with_capacity(8 + pk.len());
                        k.extend_from_slice(&z.to_be_bytes());
                        k.extend_from_slice(pk);
                        Ok(vec![(k, bounds)])
                    }
                    _ => {
                        let h = self.space().hilbert_value(cx, cy);
                        let mut k = Vec::with_capacity(8 + pk.len());
                        k.extend_from_slice(&h.to_be_bytes());
                        k.extend_from_slice(pk);
                        Ok(vec![(k, bounds)])
                    }
                }
            }
            IndexKind::Keyword | IndexKind::Ngram => {
                let field = &self.fields[0];
                let text = match record.get(field) {
                    None | Some(Value::Null) => return Ok(Vec::new()),
                    Some(Value::String(s)) => s,
                    Some(v) => {
                        return Err(Error::invalid(
                            Some(field),
                            format!(
                                "the {} index `{}` needs a string, got {}",
                                self.kind,
                                self.name,
                                v.type_name()
                            ),
                        ));
                    }
                };
                let tokens = self.tokens(text);
                let mut out = Vec::with_capacity(tokens.len());
                for t in tokens {
                    let mut k = Vec::with_capacity(t.len() + 2 + pk.len());
                    value::encode_key_part(&Value::String(t), &mut k)?;
                    k.extend_from_slice(pk);
                    out.push((k, Vec::new()));
                }
                out.sort_unstable();
                Ok(out)
            }
        }
    }

    /// Tokens a record's text contributes to this (inverted) index.
    pub fn tokens(&self, text: &str) -> Vec<String> {
        match self.kind {
            IndexKind::Ngram => ngram_tokens(text, self.gram()),
            _ => keyword_tokens(text),
        }
    }

    /// Tokens a query text looks up (n-gram: the pattern's full grams, or the
    /// pattern itself as a gram prefix when it is shorter than n).
    pub fn query_tokens(&self, text: &str) -> Vec<String> {
        match self.kind {
            IndexKind::Ngram => ngram_query_tokens(text, self.gram()),
            _ => keyword_tokens(text),
        }
    }

    /// The encoded value of the (single) indexed field of a record: the key
    /// of eager and lazy entries and what embedded filters hold; `None` when
    /// the field is missing or null.
    pub fn value_key(&self, record: &Value) -> Result<Option<Vec<u8>>> {
        let Some(parts) = self.key_values(record)? else {
            return Ok(None);
        };
        let mut k = Vec::with_capacity(16);
        value::encode_key(&parts, &mut k)?;
        Ok(Some(k))
    }

    /// The primary key inside an entry key.
    pub fn entry_pk<'a>(&self, entry: &'a [u8]) -> Result<&'a [u8]> {
        self.tree_kind().pk.pk(entry)
    }

    /// The index entry key of a record: encoded secondary key ‖ encoded
    /// primary key (both self-delimiting, so byte order = (sk, pk) order).
    pub fn entry_key(&self, record: &Value, pk: &[u8]) -> Result<Option<Vec<u8>>> {
        let Some(parts) = self.key_values(record)? else {
            return Ok(None);
        };
        let mut k = Vec::with_capacity(32 + pk.len());
        value::encode_key(&parts, &mut k)?;
        k.extend_from_slice(pk);
        Ok(Some(k))
    }

    /// Split an entry key into (secondary key values, encoded primary key).
    pub fn split_entry(&self, entry: &[u8]) -> Result<(Vec<Value>, Vec<u8>)> {
        let mut parts = value::decode_key(entry)?;
        if parts.len() <= self.fields.len() {
            return Err(Error::corrupt(
                format!("<index {}>", self.name),
                "index entry has no primary key part",
            ));
        }
        let pk_parts = parts.split_off(self.fields.len());
        let mut pk = Vec::new();
        value::encode_key(&pk_parts, &mut pk)?;
        Ok((parts, pk))
    }
}
