//! Dataset definitions: what the catalog records about a dataset.

use crate::error::{Error, Result};
use crate::lsm::policy::MergePolicy;
use crate::storage::Compression;
use crate::value::{FieldType, Value, coerce_text, temporal};
use serde::{Deserialize, Serialize};

/// The largest stored record (encoded) the engine accepts.
pub const MAX_RECORD_BYTES: usize = 16 << 20;

/// What a dataset is: its primary key, declared field types (the dataset is
/// open: undeclared fields are stored as given), partitioning, memory budget
/// and storage options. Recorded in the catalog and restored at open.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct DatasetDef {
    pub name: String,
    /// Catalog-assigned id (names log records and lock names); 0 until created.
    #[serde(default)]
    pub id: u32,
    /// Primary key field names, in key order (a composite key when > 1).
    pub primary_key: Vec<String>,
    /// Declared fields and their types.
    pub fields: Vec<(String, FieldType)>,
    /// Declared fields a record must hold, not null (SQL's `NOT NULL`; the
    /// primary-key fields always must).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub not_null: Vec<String>,
    /// What a declared field holds when a record is written without it
    /// (SQL's `DEFAULT`). A field given as null stays null.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub defaults: Vec<(String, FieldDefault)>,
    /// The options of the sequences of fields whose default is
    /// [`FieldDefault::Sequence`] (SQL's identity columns); a sequence field
    /// not listed counts 1, 2, 3, ... ([`SequenceDef::default`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sequences: Vec<(String, SequenceDef)>,
    /// Declared fields whose SQL type is narrower than the type they are
    /// stored as ([`Narrow`]): the catalog shows that type and every write
    /// keeps its bounds.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub narrow: Vec<(String, Narrow)>,
    /// SQL `CHECK` constraints every record must pass (evaluated by the
    /// installed [`RecordCheck`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub checks: Vec<CheckDef>,
    /// How many times the dataset was emptied by
    /// [`crate::Database::truncate_dataset`]: its files live in directory
    /// `<name>`, or `<name>.<generation>` once it is not 0.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub generation: u32,
    /// Number of storage partitions (hash of the primary key).
    pub partitions: u32,
    /// Memory budget shared by all in-memory components of the dataset, bytes.
    pub memory_budget: u64,
    /// Merge policy of the primary index.
    pub policy: MergePolicy,
    pub compression: Compression,
    /// Target uncompressed data-block size, bytes.
    pub block_size: usize,
    /// Bloom filter false-positive rate on the primary key.
    pub bloom_fpr: f64,
    /// Secondary indexes (maintained by `Database::create_index` / `drop_index`).
    #[serde(default)]
    pub indexes: Vec<crate::index::IndexDef>,
    /// The highest secondary index id ever assigned (ids are never reused:
    /// the log may still hold records of a dropped index).
    #[serde(default)]
    pub index_ids_used: u32,
    /// Records expire ([`TtlDef`]; set with [`crate::Database::set_ttl`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl: Option<TtlDef>,
    /// Foreign keys: fields of this dataset that hold the primary key of a
    /// record of another (or the same) dataset, enforced by every write
    /// ([`ForeignKeyDef`], `dataset::links`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub foreign_keys: Vec<ForeignKeyDef>,
    /// Synergy's hierarchy (seed 004 §4.4, §4.7): the foreign keys from
    /// this dataset up to its root, first to last (empty: the dataset is a
    /// root). A write under a root locks the root record's key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hierarchy: Option<Vec<String>>,
    /// The dataset is a materialized view of a chain of datasets joined on
    /// their foreign keys, kept by the transactions that write them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub materialized: Option<MaterializedDef>,
    /// Components of some levels live in object storage ([`RemoteDef`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remote: Option<RemoteDef>,
}

/// Where a dataset keeps its cold levels (Fusion, seed 004 ch. 6): a
/// bucket named by URL (`s3://bucket/prefix`; credentials and endpoint
/// from the environment, as the AWS tools read them), and the first level
/// stored there. Level 0 puts every component in the bucket; under a
/// leveled policy, 1 or 2 keeps the hot, small levels on the local disk.
/// The write-ahead log and the catalog stay local.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct RemoteDef {
    pub url: String,
    #[serde(default)]
    pub from_level: u32,
}

impl DatasetDef {
    /// A dataset named `name` whose primary key is made of `primary_key` fields.
    pub fn new(name: &str, primary_key: &[&str]) -> DatasetDef {
        DatasetDef {
            name: name.to_owned(),
            id: 0,
            primary_key: primary_key.iter().map(|s| (*s).to_owned()).collect(),
            fields: Vec::new(),
            not_null: Vec::new(),
            defaults: Vec::new(),
            sequences: Vec::new(),
            narrow: Vec::new(),
            checks: Vec::new(),
            generation: 0,
            partitions: 1,
            memory_budget: 64 << 20,
            policy: MergePolicy::default(),
            compression: Compression::Lz4,
            block_size: 4096,
            bloom_fpr: 0.01,
            indexes: Vec::new(),
            index_ids_used: 0,
            ttl: None,
            foreign_keys: Vec::new(),
            hierarchy: None,
            materialized: None,
            remote: None,
        }
    }

    /// Keep components of `from_level` and deeper in the bucket at `url`.
    pub fn remote(mut self, url: &str, from_level: u32) -> Self {
        self.remote = Some(RemoteDef {
            url: url.to_owned(),
            from_level,
        });
        self
    }

    /// Add a foreign key: `fields` of this dataset hold the primary key of
    /// a record of `parent` (in key order), named `<name>_<fields>_fkey` as
    /// PostgreSQL names it.
    pub fn references(mut self, fields: &[&str], parent: &str, on_delete: FkAction) -> Self {
        let fields: Vec<String> = fields.iter().map(|s| (*s).to_owned()).collect();
        let name = ForeignKeyDef::default_name(&self.name, &fields);
        self.foreign_keys.push(ForeignKeyDef {
            name,
            fields,
            parent: parent.to_owned(),
            on_delete,
        });
        self
    }

    /// The foreign key named `name`.
    pub fn foreign_key(&self, name: &str) -> Option<&ForeignKeyDef> {
        self.foreign_keys.iter().find(|f| f.name == name)
    }

    /// Declare a field's type.
    pub fn field(mut self, name: &str, ty: FieldType) -> Self {
        self.fields.retain(|(n, _)| n != name);
        self.fields.push((name.to_owned(), ty));
        self
    }
    /// Require a declared field to be present and not null in every record.
    pub fn not_null(mut self, name: &str) -> Self {
        if !self.not_null.iter().any(|n| n == name) {
            self.not_null.push(name.to_owned());
        }
        self
    }
    /// Give a declared field a default.
    pub fn default_value(mut self, name: &str, d: FieldDefault) -> Self {
        self.defaults.retain(|(n, _)| n != name);
        self.defaults.push((name.to_owned(), d));
        self
    }
    /// Make a declared int field take its values from a sequence with
    /// these options (an identity column when `def.identity` is set).
    pub fn sequence(mut self, name: &str, def: SequenceDef) -> Self {
        self = self.default_value(name, FieldDefault::Sequence);
        self.sequences.retain(|(n, _)| n != name);
        self.sequences.push((name.to_owned(), def));
        self
    }
    /// The options of `field`'s sequence (the defaults when none were given).
    pub fn sequence_def(&self, field: &str) -> SequenceDef {
        self.sequences
            .iter()
            .find(|(n, _)| n == field)
            .map_or_else(SequenceDef::default, |(_, d)| *d)
    }
    pub fn memory_budget(mut self, bytes: u64) -> Self {
        self.memory_budget = bytes;
        self
    }
    pub fn policy(mut self, p: MergePolicy) -> Self {
        self.policy = p;
        self
    }
    pub fn partitions(mut self, p: u32) -> Self {
        self.partitions = p;
        self
    }
    pub fn compression(mut self, c: Compression) -> Self {
        self.compression = c;
        self
    }
    pub fn block_size(mut self, b: usize) -> Self {
        self.block_size = b;
        self
    }

    /// The name of the dataset's directory in the database directory.
    pub fn dir_name(&self) -> String {
        if self.generation == 0 {
            self.name.clone()
        } else {
            format!("{}.{}", self.name, self.generation)
        }
    }

    /// A record as people read it: declared date and time fields (stored
    /// as days and microseconds) as text, `2026-01-31`,
    /// `2026-01-31 12:00:00.5`, `2026-01-31 12:00:00+00` (what the CLI and
    /// JSON outputs show; a value past the supported years stays a number).
    pub fn present(&self, record: Value) -> Value {
        let Value::Object(fields) = record else {
            return record;
        };
        let shown = fields
            .into_iter()
            .map(|(k, v)| {
                let v = match (self.field_type(&k), v) {
                    (Some(FieldType::Date), Value::Int(d)) => temporal::days_date(d)
                        .map_or(Value::Int(d), |x| {
                            Value::String(x.format("%Y-%m-%d").to_string())
                        }),
                    (Some(t @ (FieldType::Timestamp | FieldType::TimestampTz)), Value::Int(m)) => {
                        temporal::micros_datetime(m).map_or(Value::Int(m), |x| {
                            let zone = if t == FieldType::TimestampTz {
                                "+00"
                            } else {
                                ""
                            };
                            Value::String(format!("{}{zone}", x.format("%Y-%m-%d %H:%M:%S%.f")))
                        })
                    }
                    (_, v) => v,
                };
                (k, v)
            })
            .collect();
        Value::Object(shown)
    }

    pub fn field_type(&self, name: &str) -> Option<FieldType> {
        self.fields.iter().find(|(n, _)| n == name).map(|(_, t)| *t)
    }

    /// The narrower type field `name` was declared with, if any.
    pub fn narrow_of(&self, name: &str) -> Option<Narrow> {
        self.narrow.iter().find(|(n, _)| n == name).map(|(_, t)| *t)
    }

    /// Check the definition is usable; errors say what to change.
    pub fn validate(&self) -> Result<()> {
        validate_name("dataset", &self.name)?;
        if let Some(r) = &self.remote {
            crate::storage::remote::scheme_of(&r.url)?;
        }
        if self.primary_key.is_empty() {
            return Err(Error::Config(format!(
                "dataset `{}` needs at least one primary key field",
                self.name
            )));
        }
        for k in &self.primary_key {
            if let Some(t) = self.field_type(k)
                && !t.is_key_type()
            {
                return Err(Error::Config(format!(
                    "primary key field `{k}` is declared {t}, which cannot be a key; use int, double, string, binary, bool, date, timestamp or timestamptz"
                )));
            }
        }
        for f in &self.not_null {
            if self.field_type(f).is_none() {
                return Err(Error::Config(format!(
                    "NOT NULL field `{f}` is not a declared field of `{}`",
                    self.name
                )));
            }
        }
        for (f, n) in &self.narrow {
            if self.field_type(f) != Some(n.stored()) {
                return Err(Error::Config(format!(
                    "field `{f}` of `{}` is declared {} but not stored as {}",
                    self.name,
                    n.sql(),
                    n.stored()
                )));
            }
        }
        for (f, d) in &self.defaults {
            let Some(t) = self.field_type(f) else {
                return Err(Error::Config(format!(
                    "DEFAULT of `{f}`: `{f}` is not a declared field of `{}`",
                    self.name
                )));
            };
            if *d == FieldDefault::Sequence {
                if t != FieldType::Int {
                    return Err(Error::Config(format!(
                        "`{f}` takes its values from a sequence, so it must be declared int, not {t}"
                    )));
                }
                continue;
            }
            d.value(f, t).map_err(|e| {
                Error::Config(format!("DEFAULT of `{f}` does not fit its type {t}: {e}"))
            })?;
        }
        for (i, (f, s)) in self.sequences.iter().enumerate() {
            if !self
                .defaults
                .iter()
                .any(|(n, d)| n == f && *d == FieldDefault::Sequence)
            {
                return Err(Error::Config(format!(
                    "sequence options for `{f}`, which does not take its values from a sequence"
                )));
            }
            if self.sequences[..i].iter().any(|(n, _)| n == f) {
                return Err(Error::Config(format!(
                    "two sets of sequence options for `{f}`"
                )));
            }
            s.validate(f)?;
        }
        for (i, c) in self.checks.iter().enumerate() {
            if c.name.is_empty() || self.checks[..i].iter().any(|o| o.name == c.name) {
                return Err(Error::Config(format!(
                    "CHECK constraint names must be unique and not empty, got `{}`",
                    c.name
                )));
            }
        }
        if !(1..=1024).contains(&self.partitions) {
            return Err(Error::Config(format!(
                "partitions must be between 1 and 1024, got {}",
                self.partitions
            )));
        }
        if self.memory_budget < (1 << 20) {
            return Err(Error::Config(format!(
                "memory budget of {} bytes is too small; use at least 1 MiB",
                self.memory_budget
            )));
        }
        if !(512..=(4 << 20)).contains(&self.block_size) {
            return Err(Error::Config(format!(
                "block size must be between 512 bytes and 4 MiB, got {}",
                self.block_size
            )));
        }
        if !(0.0..0.5).contains(&self.bloom_fpr) {
            return Err(Error::Config(format!(
                "bloom false-positive rate must be in [0, 0.5), got {}",
                self.bloom_fpr
            )));
        }
        if let Some(t) = &self.ttl {
            t.validate(self)?;
        }
        for (i, fk) in self.foreign_keys.iter().enumerate() {
            fk.validate(self)?;
            if self.foreign_keys[..i].iter().any(|o| o.name == fk.name) {
                return Err(Error::Config(format!(
                    "two foreign keys of `{}` are named `{}`",
                    self.name, fk.name
                )));
            }
        }
        self.policy.validate()
    }
}

/// A materialized view over a chain of datasets (Synergy's view, seed 004
/// Def. 5): `relations[0]` is the top, each next one references the one
/// before through its foreign key `keys[i - 1]` (one-to-many down the
/// chain). A row per record of the last relation whose chain of parents is
/// complete (an inner join), keyed by that record's primary key, holding
/// `columns`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MaterializedDef {
    pub relations: Vec<String>,
    /// `keys[i]`: the foreign key of `relations[i + 1]` on `relations[i]`.
    pub keys: Vec<String>,
    pub columns: Vec<ViewColumn>,
}

/// A column of a materialized view: `field` of relation `relation`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ViewColumn {
    pub relation: String,
    pub field: String,
    /// The column's name in the view.
    pub name: String,
}

impl MaterializedDef {
    /// The view's column holding `field` of `relation`.
    pub fn column(&self, relation: &str, field: &str) -> Option<&str> {
        self.columns
            .iter()
            .find(|c| c.relation == relation && c.field == field)
            .map(|c| c.name.as_str())
    }
}

/// What deleting a referenced record does to the records that reference it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FkAction {
    /// Refuse the delete while a record references it (SQL's `RESTRICT`
    /// and `NO ACTION`, which are the same without deferred constraints).
    #[default]
    Restrict,
    /// Delete the referencing records too, in the same transaction.
    Cascade,
}

impl FkAction {
    /// The SQL words (`RESTRICT`, `CASCADE`).
    pub fn sql(self) -> &'static str {
        match self {
            FkAction::Restrict => "RESTRICT",
            FkAction::Cascade => "CASCADE",
        }
    }
}

/// A foreign key: `fields` of a record hold the primary key (in key order)
/// of a record of dataset `parent` that must exist. A record with any of
/// them null or absent references nothing (SQL's `MATCH SIMPLE`). Every
/// write enforces it: a record cannot name a parent that does not exist,
/// and a parent cannot be deleted while records name it, unless the key
/// cascades (`dataset::links` has the locking).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ForeignKeyDef {
    /// The constraint's name, unique among the dataset's foreign keys.
    pub name: String,
    /// The referencing fields, one per field of the parent's primary key.
    pub fields: Vec<String>,
    /// The referenced dataset.
    pub parent: String,
    #[serde(default)]
    pub on_delete: FkAction,
}

impl ForeignKeyDef {
    /// PostgreSQL's name for a foreign key of `table` on `fields`.
    pub fn default_name(table: &str, fields: &[String]) -> String {
        format!("{table}_{}_fkey", fields.join("_"))
    }

    /// The name of the index a foreign key's dataset gets when it has
    /// none leading with the key's fields (deletes of a parent find the
    /// records that reference it through it).
    pub fn index_name(&self) -> String {
        format!("{}_idx", self.name)
    }

    fn validate(&self, def: &DatasetDef) -> Result<()> {
        let bad = |m: String| {
            Err(Error::Config(format!(
                "foreign key `{}` of `{}`: {m}",
                self.name, def.name
            )))
        };
        validate_name("foreign key", &self.name)?;
        if self.fields.is_empty() {
            return bad("it needs at least one field".into());
        }
        for (i, f) in self.fields.iter().enumerate() {
            if self.fields[..i].contains(f) {
                return bad(format!("`{f}` is named twice"));
            }
            match def.field_type(f) {
                Some(t) if t.is_key_type() => {}
                Some(t) => {
                    return bad(format!(
                        "`{f}` is declared {t}, which cannot hold a primary key"
                    ));
                }
                None => {
                    return bad(format!(
                        "`{f}` is not a declared field; declare it with the type of the referenced key"
                    ));
                }
            }
        }
        Ok(())
    }
}

/// How a dataset's records expire (its `ttl`): a record expires at the
/// value of its `expiry` field, or `after` units past its `time` field
/// (exclusive: at that instant it is gone), by the dataset's clock
/// ([`crate::clock`]). From then on reads do not see it; a sweep deletes
/// it once the clock is `grace` past its expiry (`dataset::ttl`). A record
/// whose field is null never expires.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TtlDef {
    /// The field holding a record's time: what `after` counts from, and
    /// what the written clock follows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time: Option<String>,
    /// The field holding a record's expiry.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expiry: Option<String>,
    /// A record's life past its `time`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after: Option<i64>,
    /// `written`, `unix_s`, `unix_ms` or `unix_us`; default `unix_us` on a
    /// timestamp field, `written` on an integer one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clock: Option<String>,
    /// How long past its expiry an expired record is kept (unseen) before
    /// the sweep deletes it.
    #[serde(default, skip_serializing_if = "is_zero_i64")]
    pub grace: i64,
}

fn is_zero_i64(v: &i64) -> bool {
    *v == 0
}

impl TtlDef {
    /// Records expire at their `expiry` field.
    pub fn at(expiry: &str) -> TtlDef {
        TtlDef {
            expiry: Some(expiry.to_owned()),
            ..TtlDef::default()
        }
    }

    /// Records expire `after` units past their `time` field.
    pub fn after(time: &str, after: i64) -> TtlDef {
        TtlDef {
            time: Some(time.to_owned()),
            after: Some(after),
            ..TtlDef::default()
        }
    }

    /// The field the sweep finds expired records by (an index on it, if
    /// one leads with it): the expiry, else the time.
    pub fn sweep_field(&self) -> &str {
        self.expiry
            .as_deref()
            .or(self.time.as_deref())
            .unwrap_or_default()
    }

    /// The clock's name, defaulted.
    pub fn clock_name(&self, def: &DatasetDef) -> &str {
        match self.clock.as_deref() {
            Some(c) => c,
            None => match def.field_type(self.sweep_field()) {
                Some(FieldType::Timestamp | FieldType::TimestampTz) => "unix_us",
                _ => "written",
            },
        }
    }

    /// The expiry of a record whose fields hold `time` and `expiry`.
    pub fn expiry_of(&self, time: Option<i64>, expiry: Option<i64>) -> Option<i64> {
        match self.after {
            Some(a) => time.map(|t| t.saturating_add(a)),
            None => expiry,
        }
    }

    fn validate(&self, def: &DatasetDef) -> Result<()> {
        let bad = |m: String| Err(Error::Config(format!("the ttl of `{}`: {m}", def.name)));
        match (&self.expiry, &self.time, self.after) {
            (Some(_), _, Some(_)) => {
                return bad("give `expiry` (a field holding each record's expiry) or `after` (a life past `time`), not both".into());
            }
            (None, None, _) | (None, Some(_), None) => {
                return bad("give `expiry` (the field holding each record's expiry), or `time` and `after` (a life past the time)".into());
            }
            (None, Some(_), Some(a)) if a <= 0 => {
                return bad(format!("`after` must be more than 0, got {a}"));
            }
            _ => {}
        }
        if self.grace < 0 {
            return bad(format!("`grace` must be zero or more, got {}", self.grace));
        }
        for f in [&self.time, &self.expiry].into_iter().flatten() {
            match def.field_type(f) {
                Some(FieldType::Int | FieldType::Timestamp | FieldType::TimestampTz) => {}
                Some(t) => {
                    return bad(format!(
                        "`{f}` is declared {t}; a time must be int, timestamp or timestamptz"
                    ));
                }
                None => {
                    return bad(format!(
                        "`{f}` is not a declared field; declare it int, timestamp or timestamptz"
                    ));
                }
            }
        }
        let clock = self.clock_name(def);
        let unix = crate::clock::unit(clock)?;
        if unix.is_none() && self.time.is_none() {
            return bad("the written clock follows the records' `time`: give `time` too, or a wall clock (`clock`: unix_s, unix_ms or unix_us)".into());
        }
        if self.time.is_some() && self.time == self.expiry {
            return bad("`time` and `expiry` must be different fields".into());
        }
        Ok(())
    }
}

/// A `CHECK` constraint: a SQL boolean expression over a record's fields
/// that must not be false.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckDef {
    pub name: String,
    /// The expression, as SQL text (`qty > 0`).
    pub expr: String,
}

/// Evaluates `CHECK` constraints. The core cannot read SQL: the SQL layer
/// installs one (`Database::set_record_check`) and every write of a
/// dataset with constraints goes through it, inside the record's
/// transaction, before anything is logged.
pub trait RecordCheck: Send + Sync {
    /// The name of the first constraint of `def` that `record` (coerced,
    /// with its defaults) violates; `Err` when a constraint cannot be
    /// evaluated.
    fn violated(
        &self,
        def: &DatasetDef,
        record: &Value,
    ) -> std::result::Result<Option<String>, String>;
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// The value a declared field takes when a record is written without it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FieldDefault {
    /// A constant, as text read as the field's type (as a CSV cell is:
    /// `0`, `new`, `2026-01-01`, `12.50`, `{"a": 1}`).
    Text(String),
    /// The time of the write, in UTC (`now()`, `CURRENT_TIMESTAMP`,
    /// `CURRENT_DATE`): for date, timestamp and timestamptz fields.
    Now,
    /// The next value of the field's counter (SQL's `SERIAL` and identity
    /// columns; for int fields): 1, 2, 3, ... never handed out twice, and
    /// past any value written explicitly (see `dataset::sequence`).
    Sequence,
}

impl FieldDefault {
    /// The value for field `field` of type `ty`, now.
    pub fn value(&self, field: &str, ty: FieldType) -> Result<Value> {
        match self {
            FieldDefault::Text(t) => coerce_text(field, ty, t),
            FieldDefault::Now => {
                let micros = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map(|d| i64::try_from(d.as_micros()).unwrap_or(i64::MAX))
                    .unwrap_or(0);
                match ty {
                    FieldType::Timestamp | FieldType::TimestampTz => Ok(Value::Int(micros)),
                    FieldType::Date => Ok(Value::Int(micros.div_euclid(temporal::MICROS_PER_DAY))),
                    other => Err(Error::invalid(
                        Some(field),
                        format!("the current time is not a value of type {other}"),
                    )),
                }
            }
            FieldDefault::Sequence => Err(Error::Config(format!(
                "`{field}` takes its values from a sequence, which its dataset hands out (Dataset::next_sequence)"
            ))),
        }
    }

    /// As SQL writes it for field `field` of table `table`, of type `ty`
    /// (`'new'`, `3`, `now()`, `nextval('t_id_seq'::regclass)`).
    pub fn sql(&self, table: &str, field: &str, ty: FieldType) -> String {
        let numeric = matches!(
            ty,
            FieldType::Int | FieldType::Double | FieldType::Decimal { .. }
        );
        match self {
            FieldDefault::Text(t)
                if ty == FieldType::Bool || numeric && t.parse::<f64>().is_ok() =>
            {
                t.clone()
            }
            FieldDefault::Text(t) => format!("'{}'", t.replace('\'', "''")),
            FieldDefault::Now => "now()".to_owned(),
            FieldDefault::Sequence => format!(
                "nextval('{}'::regclass)",
                sequence_name(table, field).replace('\'', "''")
            ),
        }
    }
}

/// The options of a field's sequence, as SQL's `CREATE SEQUENCE` and
/// identity columns give them: the values are `start`, `start +
/// increment`, ... within `[min, max]` (a negative increment counts
/// down). See `dataset::sequence` for how values are handed out.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SequenceDef {
    pub start: i64,
    pub increment: i64,
    pub min: i64,
    pub max: i64,
    /// An identity column (`GENERATED ... AS IDENTITY`), and which kind;
    /// `None` for `SERIAL`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub identity: Option<Identity>,
}

/// The two kinds of SQL identity column.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Identity {
    /// `GENERATED ALWAYS`: SQL's `INSERT` and `UPDATE` refuse a value other
    /// than `DEFAULT` unless `OVERRIDING SYSTEM VALUE` is said (`COPY` and
    /// the record API write what they are given, as PostgreSQL's `COPY`).
    Always,
    /// `GENERATED BY DEFAULT`: a value given is taken.
    ByDefault,
}

impl Default for SequenceDef {
    fn default() -> SequenceDef {
        SequenceDef::counting(1)
    }
}

impl SequenceDef {
    /// A sequence counting by `increment` from PostgreSQL's default start
    /// within its default range: up from 1 to `i64::MAX`, or down from -1
    /// to `i64::MIN`.
    pub fn counting(increment: i64) -> SequenceDef {
        if increment < 0 {
            SequenceDef {
                start: -1,
                increment,
                min: i64::MIN,
                max: -1,
                identity: None,
            }
        } else {
            SequenceDef {
                start: 1,
                increment,
                min: 1,
                max: i64::MAX,
                identity: None,
            }
        }
    }

    /// Check the options (field `field`'s), with PostgreSQL's rules.
    pub fn validate(&self, field: &str) -> Result<()> {
        let bad = |m: String| Err(Error::Config(format!("the sequence of `{field}`: {m}")));
        if self.increment == 0 {
            return bad("INCREMENT must not be zero".to_owned());
        }
        if self.min >= self.max {
            return bad(format!(
                "MINVALUE ({}) must be less than MAXVALUE ({})",
                self.min, self.max
            ));
        }
        if self.start < self.min {
            return bad(format!(
                "START value ({}) cannot be less than MINVALUE ({})",
                self.start, self.min
            ));
        }
        if self.start > self.max {
            return bad(format!(
                "START value ({}) cannot be greater than MAXVALUE ({})",
                self.start, self.max
            ));
        }
        Ok(())
    }
}

/// The name PostgreSQL gives the sequence of a `SERIAL` column:
/// `<table>_<column>_seq`.
pub fn sequence_name(table: &str, field: &str) -> String {
    format!("{table}_{field}_seq")
}

/// Names of datasets and indexes become directory names (see
/// [`crate::storage::fsutil::validate_name`]).
pub use crate::storage::fsutil::validate_name;

/// A SQL type narrower than the type its field is stored as: `smallint`
/// and `integer` fields are stored as [`FieldType::Int`] (64 bits),
/// `varchar(n)` ones as [`FieldType::String`]. Recorded so that the catalog
/// describes the field as declared and writes keep its bounds.
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Narrow {
    /// `smallint`: -32768 to 32767.
    Int16,
    /// `integer`: -2147483648 to 2147483647.
    Int32,
    /// `varchar(n)`: at most n characters.
    Varchar(u32),
}

impl Narrow {
    /// The type as SQL names it.
    pub fn sql(self) -> String {
        match self {
            Narrow::Int16 => "smallint".to_owned(),
            Narrow::Int32 => "integer".to_owned(),
            Narrow::Varchar(n) => format!("character varying({n})"),
        }
    }

    /// The field type it narrows.
    pub fn stored(self) -> FieldType {
        match self {
            Narrow::Int16 | Narrow::Int32 => FieldType::Int,
            Narrow::Varchar(_) => FieldType::String,
        }
    }

    /// Refuse `v` (already coerced to the stored type) if it is past the
    /// bounds ([`Error::Narrowed`]); nulls and other values pass.
    pub fn check(self, field: &str, v: &crate::value::Value) -> Result<()> {
        use crate::value::Value;
        let fits = match (self, v) {
            (Narrow::Int16, Value::Int(i)) => i16::try_from(*i).is_ok(),
            (Narrow::Int32, Value::Int(i)) => i32::try_from(*i).is_ok(),
            (Narrow::Varchar(n), Value::String(s)) => {
                s.len() <= n as usize || s.chars().count() <= n as usize
            }
            _ => true,
        };
        if fits {
            return Ok(());
        }
        Err(Error::Narrowed {
            field: field.to_owned(),
            declared: self.sql(),
            too_long: matches!(self, Narrow::Varchar(_)),
        })
    }
}
