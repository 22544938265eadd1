//! Secondary index definitions and the index kinds.
//!
//! Every secondary index is an LSM index of its own (one per storage
//! partition), maintained inside the record's transaction. This layer says
//! what each kind of index is; `dataset` does the maintenance and runs the
//! access paths (`dataset::query` is the kind-agnostic driver).
//!
//! - [`IndexDef`] (this module): an index as the catalog records it, with
//!   its builders, options and the generic validation; [`IndexKind`] names
//!   the kind (serialized in the catalog) and [`IndexKind::imp`] is the
//!   registry of their behaviour.
//! - [`kind`]: the [`IndexType`] trait, one implementation per kind.
//! - [`query`]: what an index is asked ([`Query`]) and the per-query pieces
//!   a kind gives the driver (candidates, index-only rule, record re-check).
//! - The kinds, one module each: [`btree`] (B+-tree and LevelDB++
//!   composite), [`rtree`] (LSM R-tree), [`hilbert`] (DHVB and DHB
//!   next-match B+-trees), [`cells`] (SHB-tree and SIF on the grid
//!   hierarchy), [`inverted`] (keyword and n-gram), [`recency`] (LevelDB++
//!   embedded, eager and lazy), with [`spatial`] for what the spatial kinds
//!   share and [`deleted_key`] for the deleted-key B+-tree reconciliation.
//!
//! Adding a kind: a module implementing [`IndexType`], a variant of
//! [`IndexKind`], its line in [`IndexKind::imp`] and in [`IndexKind::ALL`].
//!
//! The layer imports `lsm`, `storage`, `geo`, `value` and `error`, never
//! `dataset`, `db`, `txn` or `schema`.

pub mod brin;
pub mod btree;
pub mod cells;
pub mod deleted_key;
pub mod hilbert;
pub mod inverted;
pub mod kind;
pub mod query;
pub mod recency;
pub mod rtree;
pub mod spatial;
pub mod valuelist;

pub use deleted_key::ReconcileOption;
pub use kind::{IndexOption, IndexType, RecencyWrite, RecentPath};
pub use query::{Query, QueryStats};
pub use rtree::RtreeOrder;

use crate::error::{Error, Result};
use crate::geo::hilbert::Space;
use crate::lsm::kind::TreeKind;
use crate::lsm::policy::MergePolicy;
use crate::storage::fsutil::validate_name;
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
    /// Value lists (seed 001 §4.4, publish/subscribe): per key of the
    /// indexed fields the records appended under it, each with its time
    /// (`time` option) and expiry (`expiry`); appends never read, merges
    /// combine a key's fragments and drop expired items.
    Valuelist,
    /// Block range index (Fusion, seed 004 §6.1) on one field: no index
    /// tree; the primary's disk components carry per-block zone maps
    /// (min, max) of the field, without bloom filters. Answers range and
    /// equality queries (`Query::Range`) by reading only the blocks whose
    /// zone map overlaps.
    Brin,
}

impl IndexKind {
    /// Every kind, in the order error messages list them.
    pub const ALL: [IndexKind; 14] = [
        IndexKind::Btree,
        IndexKind::Rtree,
        IndexKind::Dhvb,
        IndexKind::Dhb,
        IndexKind::Shb,
        IndexKind::Sif,
        IndexKind::Keyword,
        IndexKind::Ngram,
        IndexKind::Embedded,
        IndexKind::Eager,
        IndexKind::Lazy,
        IndexKind::Composite,
        IndexKind::Valuelist,
        IndexKind::Brin,
    ];

    /// The behaviour of the kind: the registry of index kinds (each is one
    /// module of `index`), and the only match over all kinds.
    pub fn imp(self) -> &'static dyn IndexType {
        match self {
            IndexKind::Btree => &btree::BTREE,
            IndexKind::Composite => &btree::COMPOSITE,
            IndexKind::Rtree => &rtree::RTREE,
            IndexKind::Dhvb => &hilbert::DHVB,
            IndexKind::Dhb => &hilbert::DHB,
            IndexKind::Shb => &cells::SHB,
            IndexKind::Sif => &cells::SIF,
            IndexKind::Keyword => &inverted::KEYWORD,
            IndexKind::Ngram => &inverted::NGRAM,
            IndexKind::Embedded => &recency::embedded::EMBEDDED,
            IndexKind::Eager => &recency::eager::EAGER,
            IndexKind::Lazy => &recency::lazy::LAZY,
            IndexKind::Valuelist => &valuelist::VALUELIST,
            IndexKind::Brin => &brin::BRIN,
        }
    }

    pub fn parse(s: &str) -> Result<IndexKind> {
        let lower = s.to_ascii_lowercase();
        if let Some(k) = IndexKind::ALL
            .into_iter()
            .find(|k| k.imp().aliases().contains(&lower.as_str()))
        {
            return Ok(k);
        }
        let names: Vec<&str> = IndexKind::ALL.iter().map(|k| k.imp().name()).collect();
        Err(Error::Config(format!(
            "unknown index type `{lower}`; available: {}",
            names.join(", ")
        )))
    }
}

impl std::fmt::Display for IndexKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.imp().name())
    }
}

impl IndexKind {
    /// Kinds maintained by `index::recency` rather than by entries
    /// ([`IndexDef::entries`]): embedded, eager and lazy.
    pub fn is_recency(self) -> bool {
        self.imp().is_recency()
    }

    /// Kinds whose index entries are posting lists keyed by the value.
    pub fn posting_lists(self) -> bool {
        self.imp().posting_lists()
    }

    /// Kinds that answer `Query::Recent` (the k most recent matches).
    pub fn answers_recent(self) -> bool {
        self.imp().recent_path().is_some()
    }

    /// Kinds whose entries are ⟨secondary key ‖ primary key⟩ (B+-trees on
    /// one field or a composite of fields).
    pub fn is_btree(self) -> bool {
        self.imp().multi_field()
    }

    /// Kinds on one geometry field answering intersects and
    /// within-distance queries (and spatial joins).
    pub fn is_spatial(self) -> bool {
        self.imp().is_spatial()
    }

    /// Kinds on the SHB/SIF grid hierarchy.
    pub fn is_grid(self) -> bool {
        self.imp().accepts(IndexOption::Grid)
    }
}

/// Kind-specific options of an index.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct IndexOptions {
    /// Btree: no two live records share a value of the indexed fields
    /// (SQL's `UNIQUE`; records with a null in them are not indexed, so
    /// any number of them may exist, as in SQL).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub unique: bool,
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
    /// Brin: build a block range index over chunks of about this many
    /// bytes of entries (Fusion's table chunks, e.g. 4 or 16 MiB) instead
    /// of a zone map per data block.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chunk_bytes: Option<u64>,
    /// Brin with chunks: the implementation (default the interval tree).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub brin_form: Option<crate::storage::brin::BrinForm>,
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
    /// Value lists: the integer field items are ordered and windowed by.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time: Option<String>,
    /// Value lists: the integer field holding an item's expiry (exclusive;
    /// none: items never expire).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expiry: Option<String>,
    /// Value lists: how far behind the clock an item's expiry must be
    /// before a merge drops it (default 0), for operations stamped late.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grace: Option<i64>,
    /// Value lists: the clock merges expire by: `written` (the largest
    /// time written; default), `unix_s`, `unix_ms` or `unix_us`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clock: Option<String>,
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

    /// Bloom filter bits per value of an embedded index (0 for a brin
    /// index: zone maps only).
    /// Brin: the chunk index it asks for (chunk bytes, form); `None`: a
    /// zone map per data block.
    pub fn chunks(&self) -> Option<(u64, crate::storage::brin::BrinForm)> {
        self.options
            .chunk_bytes
            .map(|b| (b, self.options.brin_form.unwrap_or_default()))
    }

    pub fn bits_per_key(&self) -> f64 {
        if self.kind == IndexKind::Brin {
            return 0.0;
        }
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
        self.kind.imp().reconcile(self)
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
        kind::tree_kind(self.kind.imp(), self)
    }

    pub fn policy(mut self, p: MergePolicy) -> Self {
        self.policy = p;
        self
    }

    /// Check the definition: the name, the fields, which options apply to
    /// the kind ([`IndexType::accepts`]) and their values (the option's
    /// range here, the kind's own checks in [`IndexType::check_options`]),
    /// and the merge policy.
    pub fn validate(&self) -> Result<()> {
        let imp = self.kind.imp();
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
        if !imp.multi_field() && self.fields.len() != 1 {
            return Err(Error::Config(format!(
                "a {} index indexes exactly one field; index `{}` names {}",
                self.kind,
                self.name,
                self.fields.len()
            )));
        }
        if self.options.unique && self.kind != IndexKind::Btree {
            return Err(Error::Config(format!(
                "index `{}`: only a btree index can be unique, not a {} index",
                self.name, self.kind
            )));
        }
        if self.options.reconcile.is_some() && !imp.accepts(IndexOption::Reconcile) {
            return Err(Error::Config(format!(
                "{} indexes always reconcile with antimatter; `reconcile` applies to rtree, sif, keyword and ngram",
                self.kind
            )));
        }
        if let Some(b) = self.options.bits_per_key
            && (!imp.accepts(IndexOption::BitsPerKey) || !(1.0..=1000.0).contains(&b))
        {
            return Err(Error::Config(format!(
                "`bits_per_key` applies to embedded indexes and must be between 1 and 1000, got {b}"
            )));
        }
        if let Some(b) = self.options.leaf_bytes
            && (!imp.accepts(IndexOption::LeafBytes) || !(512..=(4 << 20)).contains(&b))
        {
            return Err(Error::Config(format!(
                "`leaf_bytes` applies to rtree indexes and must be between 512 bytes and 4 MiB, got {b}"
            )));
        }
        if (self.options.chunk_bytes.is_some() || self.options.brin_form.is_some())
            && !imp.accepts(IndexOption::Chunks)
        {
            return Err(Error::Config(
                "`chunk_size` and `form` apply to brin indexes only".into(),
            ));
        }
        if self.options.brin_form.is_some() && self.options.chunk_bytes.is_none() {
            return Err(Error::Config(
                "a brin index's `form` applies to its chunk index: give a `chunk_size` too (e.g. 4MB)".into(),
            ));
        }
        if let Some(b) = self.options.chunk_bytes
            && !(crate::storage::brin::MIN_CHUNK_BYTES..=crate::storage::brin::MAX_CHUNK_BYTES)
                .contains(&b)
        {
            return Err(Error::Config(format!(
                "a brin index's `chunk_size` must be between 4 KiB and 1 GiB, got {b} bytes"
            )));
        }
        if self.options.order.is_some() && !imp.accepts(IndexOption::Order) {
            return Err(Error::Config(
                "`order` applies to rtree indexes only".into(),
            ));
        }
        if (self.options.levels.is_some() || self.options.max_cells.is_some())
            && !imp.accepts(IndexOption::Grid)
        {
            return Err(Error::Config(
                "`levels` and `max_cells` apply to shb and sif indexes only".into(),
            ));
        }
        if (self.options.time.is_some()
            || self.options.expiry.is_some()
            || self.options.grace.is_some()
            || self.options.clock.is_some())
            && !imp.accepts(IndexOption::Time)
        {
            return Err(Error::Config(
                "`time`, `expiry`, `grace` and `clock` apply to valuelist indexes only".into(),
            ));
        }
        imp.check_options(self)?;
        if self.options.gram.is_some() && !imp.accepts(IndexOption::Gram) {
            return Err(Error::Config("`gram` applies to ngram indexes only".into()));
        }
        if let Some([a, b, c, d]) = self.options.space
            && !(a.is_finite() && b.is_finite() && c.is_finite() && d.is_finite() && a < c && b < d)
        {
            return Err(Error::Config(format!(
                "the R-tree space must be finite with min < max, got [{a}, {b}, {c}, {d}]"
            )));
        }
        deleted_key::check_policy(self)?;
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

    /// Every (entry key, entry value) a record contributes, sorted by key
    /// ([`IndexType::entries`]). B+-tree: one ⟨sk‖pk⟩ (none if a field is
    /// missing or null). R-tree: one ⟨hilbert‖pk⟩ → bounds. Inverted: one
    /// ⟨token‖pk⟩ per distinct token.
    ///
    /// Eager and lazy: one ⟨encoded value⟩ → primary key, the record's
    /// posting (used by the bulk build; writes go through
    /// [`IndexType::recency_writes`]). Embedded: none (nothing is stored
    /// apart from the primary).
    pub fn entries(&self, record: &Value, pk: &[u8]) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        self.kind.imp().entries(self, record, pk)
    }

    /// Tokens a record's text contributes to this (inverted) index.
    pub fn tokens(&self, text: &str) -> Vec<String> {
        inverted::tokens(self, text)
    }

    /// Tokens a query text looks up (n-gram: the pattern's full grams, or the
    /// pattern itself as a gram prefix when it is shorter than n).
    pub fn query_tokens(&self, text: &str) -> Vec<String> {
        inverted::query_tokens(self, text)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_display_and_serde_agree_for_every_kind() {
        for k in IndexKind::ALL {
            let name = k.to_string();
            assert_eq!(IndexKind::parse(&name).unwrap(), k);
            assert_eq!(IndexKind::parse(&name.to_ascii_uppercase()).unwrap(), k);
            assert_eq!(serde_json::to_string(&k).unwrap(), format!("\"{name}\""));
            for a in k.imp().aliases() {
                assert_eq!(IndexKind::parse(a).unwrap(), k, "alias {a}");
            }
        }
        assert_eq!(IndexKind::parse("Spatial").unwrap(), IndexKind::Rtree);
        assert_eq!(IndexKind::parse("fulltext").unwrap(), IndexKind::Keyword);
        let Err(Error::Config(m)) = IndexKind::parse("Hash") else {
            panic!("hash is not a kind");
        };
        assert_eq!(
            m,
            "unknown index type `hash`; available: btree, rtree, dhvb, dhb, shb, sif, keyword, ngram, embedded, eager, lazy, composite, valuelist, brin"
        );
    }
}
