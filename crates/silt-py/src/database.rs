//! `siltdb.connect` and `siltdb.Database`.

use std::sync::Arc;

#[cfg(not(feature = "sql"))]
use pyo3::exceptions::PyNotImplementedError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyString};
use silt::lsm::policy::MergePolicy;
use silt::storage::Compression;
use silt::{DatasetDef, DbOptions, Durability, FieldType, IndexDef, IndexKind, ReconcileOption};

use crate::convert::serde_to_py;
use crate::dataset::Dataset;
use crate::errors::{BindError, BindResult, IntoPyResult, detached};
use crate::handle::Handle;
use crate::pubsub::{PubSub, SpaceSpec};
use crate::transaction::Transaction;

/// Parse a size: an int (bytes) or a string such as `"64MB"`, `"1 GiB"`,
/// `"512k"` (binary multiples).
fn parse_size(what: &str, obj: &Bound<'_, PyAny>) -> BindResult<u64> {
    if let Ok(n) = obj.extract::<u64>() {
        return Ok(n);
    }
    let bad = || {
        BindError::Config(format!(
            "{what} must be a number of bytes (int) or a size such as \"64MB\", got {}",
            obj.repr().map(|r| r.to_string()).unwrap_or_default()
        ))
    };
    let text: String = obj.extract().map_err(|_| bad())?;
    let t = text.trim().to_ascii_lowercase();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let num: f64 = num.trim().parse().map_err(|_| bad())?;
    let mult: u64 = match unit.trim() {
        "" | "b" => 1,
        "k" | "kb" | "kib" => 1 << 10,
        "m" | "mb" | "mib" => 1 << 20,
        "g" | "gb" | "gib" => 1 << 30,
        "t" | "tb" | "tib" => 1 << 40,
        _ => return Err(bad()),
    };
    let bytes = num * mult as f64;
    if !(bytes.is_finite() && bytes >= 0.0 && bytes < u64::MAX as f64) {
        return Err(bad());
    }
    Ok(bytes as u64)
}

fn string_list(what: &str, obj: &Bound<'_, PyAny>) -> BindResult<Vec<String>> {
    if let Ok(s) = obj.cast::<PyString>() {
        return Ok(vec![s.to_string()]);
    }
    obj.extract::<Vec<String>>().map_err(|_| {
        BindError::Config(format!(
            "{what} must be a str or a list of str, got {}",
            obj.get_type()
                .name()
                .map(|n| n.to_string())
                .unwrap_or_default()
        ))
    })
}

/// An open Silt database (from `siltdb.connect`). Use it as a context
/// manager, or call `close()`: that flushes, checkpoints and releases the
/// directory lock. Every call releases the GIL while it works.
#[pyclass(frozen, weakref, module = "siltdb")]
pub struct Database {
    handle: Arc<Handle>,
    path: String,
}

/// Check that an index's fields can hold what it needs, given the dataset's
/// declared types (as the CLI does), before any record is read.
fn check_field_types(ds: &DatasetDef, def: &IndexDef) -> BindResult<()> {
    for f in &def.fields {
        let ty = ds.field_type(f);
        match def.kind {
            k if k.is_spatial() => match ty {
                Some(t) if t.is_geometry() => {}
                Some(t) => {
                    return Err(BindError::Config(format!(
                        "field `{f}` is declared {t}; {} index needs a geometry field (declared point, rectangle, polygon or geometry)",
                        def.kind
                    )));
                }
                None => {
                    return Err(BindError::Config(format!(
                        "field `{f}` of dataset `{}` has no declared type; {} index needs a field declared point, rectangle, polygon or geometry (e.g. fields={{\"{f}\": \"point\"}} in create_dataset), so that GeoJSON, WKT and [lon, lat] values are stored as geometries",
                        ds.name, def.kind
                    )));
                }
            },
            IndexKind::Keyword | IndexKind::Ngram => match ty {
                None | Some(FieldType::String | FieldType::Any) => {}
                Some(t) => {
                    return Err(BindError::Config(format!(
                        "field `{f}` is declared {t}; a {} index needs a text field (declared string, or undeclared)",
                        def.kind
                    )));
                }
            },
            _ => {
                if let Some(t) = ty.filter(|t| t.is_geometry()) {
                    return Err(BindError::Config(format!(
                        "field `{f}` is declared {t}; a {} index cannot order geometries: use kind=\"rtree\"",
                        def.kind
                    )));
                }
            }
        }
    }
    Ok(())
}

/// Options of `create_index` after conversion.
struct IndexSpec {
    name: String,
    kind: IndexKind,
    fields: Vec<String>,
    policy: Option<MergePolicy>,
    reconcile: Option<ReconcileOption>,
    gram: Option<usize>,
    space: Option<[f64; 4]>,
    leaf_bytes: Option<usize>,
    bits_per_key: Option<f64>,
    /// Brin: (chunk bytes, form).
    chunks: (Option<u64>, Option<silt::storage::brin::BrinForm>),
    /// Value lists: (time field, expiry field, grace, clock).
    list: (Option<String>, Option<String>, Option<i64>, Option<String>),
}

fn index_def(spec: IndexSpec, ds: &DatasetDef) -> BindResult<IndexDef> {
    let IndexSpec {
        name,
        kind,
        fields,
        policy,
        reconcile,
        gram,
        space,
        leaf_bytes,
        bits_per_key,
        chunks,
        list,
    } = spec;
    let mut def = IndexDef {
        kind,
        ..IndexDef::btree(&name, &[])
    };
    def.fields = fields;
    def.policy = policy.unwrap_or_else(|| ds.policy.clone());
    def.options.reconcile = reconcile;
    def.options.gram = gram;
    def.options.space = space;
    def.options.leaf_bytes = leaf_bytes;
    def.options.bits_per_key = bits_per_key;
    (def.options.chunk_bytes, def.options.brin_form) = chunks;
    (
        def.options.time,
        def.options.expiry,
        def.options.grace,
        def.options.clock,
    ) = list;
    def.validate()?;
    check_field_types(ds, &def)?;
    Ok(def)
}

#[pymethods]
impl Database {
    /// The database directory.
    #[getter]
    fn path(&self) -> &str {
        &self.path
    }

    /// Whether `close()` was called.
    #[getter]
    fn closed(&self) -> bool {
        !self.handle.is_open()
    }

    /// Create a dataset and return it.
    ///
    /// - `primary_key`: a field name or a list of them (a composite key).
    /// - `fields`: declared types, e.g. `{"loc": "point", "age": "int"}`
    ///   (any, bool, int, double, string, binary, point, rectangle,
    ///   polygon, geometry); undeclared fields are stored as given.
    /// - `partitions`: hash partitions (1-1024).
    /// - `memory_budget`: bytes or a size string (`"64MB"`), shared by all
    ///   in-memory components of the dataset.
    /// - `merge_policy`: e.g. `"prefix"`, `"tiered(4)"`, `"leveled"`,
    ///   `"binomial(4)"`, `"constant(3)"`, `"concurrent"`, `"no-merge"`.
    /// - `compression`: `"lz4"` (default), `"zstd"` or `"none"` (`"none"`: blocks are read in
    ///   place from the page cache, ~2.5x cheaper random record fetches, more disk).
    /// - `block_size`: data block size (bytes or size string).
    /// - `remote`: keep component files in object storage,
    ///   `"s3://bucket/prefix"` (credentials and endpoint from `AWS_*`
    ///   environment variables), from level `remote_level` (default 0:
    ///   all) down; the log and catalog stay in the directory.
    /// - `ttl`: records expire, e.g. `{"expiry": "until"}` (each record's
    ///   expiry field) or `{"time": "t", "after": 3600}` (a life past its
    ///   time), with `"clock"` (`"written"`: the largest time written, the
    ///   default on int fields; `"unix_s"`, `"unix_ms"`, `"unix_us"`, the
    ///   default on timestamps) and `"grace"` (how long after expiry a
    ///   sweep deletes it). Reads never return an expired record.
    /// - `references`: foreign keys, each a dict `{"fields": "o_c_id",
    ///   "parent": "customer", "on_delete": "cascade"}` (`fields` a name
    ///   or a list, in the order of the parent's primary key; `on_delete`
    ///   `"restrict"`, the default, or `"cascade"`; an optional `"name"`).
    ///   Every write keeps them: `ForeignKeyError` names what was wrong.
    #[pyo3(signature = (name, primary_key, fields=None, *, partitions=1, memory_budget=None, merge_policy=None, compression=None, block_size=None, ttl=None, references=None, remote=None, remote_level=0))]
    #[allow(clippy::too_many_arguments)]
    fn create_dataset(
        &self,
        py: Python<'_>,
        name: &str,
        primary_key: &Bound<'_, PyAny>,
        fields: Option<&Bound<'_, PyDict>>,
        partitions: u32,
        memory_budget: Option<&Bound<'_, PyAny>>,
        merge_policy: Option<&str>,
        compression: Option<&str>,
        block_size: Option<&Bound<'_, PyAny>>,
        ttl: Option<&Bound<'_, PyDict>>,
        references: Option<&Bound<'_, PyAny>>,
        remote: Option<&str>,
        remote_level: u32,
    ) -> PyResult<Dataset> {
        let build = || -> BindResult<DatasetDef> {
            let pk = string_list("primary_key", primary_key)?;
            let pk_refs: Vec<&str> = pk.iter().map(String::as_str).collect();
            let mut def = DatasetDef::new(name, &pk_refs).partitions(partitions);
            if let Some(fields) = fields {
                for (k, v) in fields.iter() {
                    let k: String = k.extract().map_err(|_| {
                        BindError::Config("field names in `fields` must be str".into())
                    })?;
                    let v: String = v.extract().map_err(|_| {
                        BindError::Config(format!(
                            "the type of field `{k}` must be a str such as \"int\" or \"point\""
                        ))
                    })?;
                    def = def.field(&k, FieldType::parse(&v)?);
                }
            }
            if let Some(m) = memory_budget {
                def = def.memory_budget(parse_size("memory_budget", m)?);
            }
            if let Some(p) = merge_policy {
                def = def.policy(MergePolicy::parse(p)?);
            }
            if let Some(c) = compression {
                def = def.compression(Compression::parse(c)?);
            }
            if let Some(b) = block_size {
                let b = parse_size("block_size", b)?;
                def = def.block_size(usize::try_from(b).unwrap_or(usize::MAX));
            }
            if let Some(t) = ttl {
                def.ttl = Some(ttl_def(t)?);
            }
            if let Some(url) = remote {
                def = def.remote(url, remote_level);
            }
            if let Some(r) = references {
                let list = r.cast::<pyo3::types::PyList>().map_err(|_| {
                    BindError::Config(
                        "`references` must be a list of dicts such as {\"fields\": \"o_c_id\", \"parent\": \"customer\"}".into(),
                    )
                })?;
                for item in list.iter() {
                    let d = item.cast::<PyDict>().map_err(|_| {
                        BindError::Config("each of `references` must be a dict".into())
                    })?;
                    def.foreign_keys.push(foreign_key(name, d)?);
                }
            }
            Ok(def)
        };
        let def = build().py_err(py)?;
        let name = def.name.clone();
        detached(py, || {
            self.handle.with(|db| {
                db.create_dataset(def)?;
                Ok(())
            })
        })?;
        Ok(Dataset::new(self.handle.clone(), name))
    }

    /// Add a foreign key to an existing dataset: every record must already
    /// name an existing parent (else `ForeignKeyError`, nothing changed).
    /// `fields` a name or a list; `on_delete` `"restrict"` or `"cascade"`.
    #[pyo3(signature = (dataset, fields, parent, *, on_delete="restrict", name=None))]
    fn add_foreign_key(
        &self,
        py: Python<'_>,
        dataset: &str,
        fields: &Bound<'_, PyAny>,
        parent: &str,
        on_delete: &str,
        name: Option<&str>,
    ) -> PyResult<()> {
        let spec = PyDict::new(py);
        spec.set_item("fields", fields)?;
        spec.set_item("parent", parent)?;
        spec.set_item("on_delete", on_delete)?;
        if let Some(n) = name {
            spec.set_item("name", n)?;
        }
        let fk = foreign_key(dataset, &spec).py_err(py)?;
        detached(py, || {
            self.handle.with(|db| Ok(db.add_foreign_key(dataset, fk)?))
        })
    }

    /// Drop foreign key `name` of `dataset` (its index stays).
    fn drop_foreign_key(&self, py: Python<'_>, dataset: &str, name: &str) -> PyResult<()> {
        detached(py, || {
            self.handle
                .with(|db| Ok(db.drop_foreign_key(dataset, name)?))
        })
    }

    /// An existing dataset; raises `NotFoundError` if there is none.
    fn dataset(&self, py: Python<'_>, name: &str) -> PyResult<Dataset> {
        detached(py, || {
            self.handle.with(|db| {
                db.dataset(name)?;
                Ok(())
            })
        })?;
        Ok(Dataset::new(self.handle.clone(), name.to_owned()))
    }

    /// Start a transaction over any datasets of this database:
    ///
    ///     with db.transaction() as tx:
    ///         a = tx.get("accounts", 1)
    ///         tx.upsert("accounts", {**a, "balance": a["balance"] - 10})
    ///         tx.insert("ledger", {"id": 7, "amount": 10})
    ///
    /// Writes are buffered and applied together when the block ends (or at
    /// `tx.commit()`), atomically across datasets and indexes; an exception
    /// in the block rolls everything back. `ConflictError` at commit means a
    /// record read with `get` changed meanwhile: nothing was applied, run the
    /// block again. Single writes on a `Dataset` stay transactions of their own.
    fn transaction(&self, py: Python<'_>) -> PyResult<Transaction> {
        let tx = detached(py, || self.handle.with(|db| Ok(db.begin()?)))?;
        Ok(Transaction::new(self.handle.clone(), tx))
    }

    /// Open (creating if needed) the publish/subscribe space `name`:
    /// subscriptions and publications on ids (topics, grid cells, ...)
    /// with time windows and expiry, stored as append-only value lists.
    /// `design`: "dualdb" (one store, both lists of an id side by side),
    /// "twodb" (a subscription store and a publication store) or
    /// "repqueries" (publications only; subscribers poll). `delivery`
    /// queues every match for its subscriber's `listen()` feed (twodb and
    /// dualdb). `grace`: how far behind the newest time an item's expiry
    /// must be before a merge drops it. `hierarchy`: "fixed" or "variable"
    /// for ids that are paths in a tree of `depth` levels and `fanout`
    /// children (lists of child numbers); a subscription then also matches
    /// publications above and below its node.
    ///
    ///     ps = db.pubsub("alerts")
    ///     ps.subscribe(7, sid=1, uid=42, ts=100, tmin=90, tmax=200)
    ///     ps.publish(7, pid=1, tp=120, tmax=300, desc="road closed")
    ///     for d in ps.listen(42, timeout=1.0):
    ///         print(d["desc"])
    ///
    /// The space is kept in the database: opening it again (in this
    /// process or after a restart) needs only its name; options given then
    /// must agree with the ones it was created with. Every handle on a
    /// space in one process shares it.
    #[pyo3(signature = (name, *, design=None, delivery=None, partitions=None, merge_policy=None, grace=None, hierarchy=None, depth=None, fanout=None))]
    #[allow(clippy::too_many_arguments)]
    fn pubsub(
        &self,
        py: Python<'_>,
        name: &str,
        design: Option<String>,
        delivery: Option<bool>,
        partitions: Option<u32>,
        merge_policy: Option<String>,
        grace: Option<i64>,
        hierarchy: Option<String>,
        depth: Option<u8>,
        fanout: Option<u8>,
    ) -> PyResult<PubSub> {
        let spec = SpaceSpec {
            design,
            delivery,
            partitions,
            merge_policy,
            grace,
            hierarchy,
            depth,
            fanout,
        };
        let handle = self.handle.clone();
        detached(py, || PubSub::open(handle, name, &spec))
    }

    /// Drop pub/sub space `name` and everything stored in it (its
    /// datasets, queued deliveries and cursors).
    fn drop_pubsub(&self, py: Python<'_>, name: &str) -> PyResult<()> {
        let handle = self.handle.clone();
        detached(py, || {
            handle.with(|db| Ok(silt::pubsub::PubSub::drop_space(db, name)?))
        })
    }

    /// The pub/sub spaces: `{name: options}`, the options as
    /// `Database.pubsub` takes them.
    fn pubsubs<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, pyo3::types::PyDict>> {
        let handle = self.handle.clone();
        let list = detached(py, || handle.with(|db| Ok(silt::pubsub::PubSub::list(db)?)))?;
        crate::pubsub::spaces_to_py(py, &list)
    }

    /// `db[name]`: the dataset `name` (raises `NotFoundError`).
    fn __getitem__(&self, py: Python<'_>, name: &str) -> PyResult<Dataset> {
        self.dataset(py, name)
    }

    /// Names of the datasets, sorted.
    fn datasets(&self, py: Python<'_>) -> PyResult<Vec<String>> {
        detached(py, || self.handle.with(|db| Ok(db.dataset_names())))
    }

    /// Remove a dataset and its files.
    fn drop_dataset(&self, py: Python<'_>, name: &str) -> PyResult<()> {
        detached(py, || self.handle.with(|db| Ok(db.drop_dataset(name)?)))
    }

    /// Create a secondary index `name` of `kind` on `fields` (a field name
    /// or a list) of `dataset`; existing records are indexed. Kinds: btree,
    /// rtree, dhvb, keyword, ngram, embedded, eager, lazy, composite,
    /// valuelist. Options: `merge_policy` (default: the dataset's),
    /// `reconcile` ("antimatter" / "deleted_keys": rtree, keyword, ngram),
    /// `gram` (ngram length, default 3), `space` ((min_x, min_y, max_x,
    /// max_y) of an rtree's Hilbert curve), `leaf_bytes` (rtree),
    /// `bits_per_key` (embedded), `chunk_bytes` and `brin_form`
    /// ("interval_tree" / "key_value": a brin index over chunks of blocks
    /// instead of a zone map per block), and for valuelist (publish/subscribe
    /// lists) `time` (the integer field items are ordered by; required),
    /// `expiry` (the integer expiry field), `grace` and `clock` ("written",
    /// "unix_s", "unix_ms", "unix_us"). Returns the index definition as a
    /// dict.
    #[pyo3(signature = (dataset, name, kind, fields, *, merge_policy=None, reconcile=None, gram=None, space=None, leaf_bytes=None, bits_per_key=None, chunk_bytes=None, brin_form=None, time=None, expiry=None, grace=None, clock=None))]
    #[allow(clippy::too_many_arguments)]
    fn create_index(
        &self,
        py: Python<'_>,
        dataset: &str,
        name: &str,
        kind: &str,
        fields: &Bound<'_, PyAny>,
        merge_policy: Option<&str>,
        reconcile: Option<&str>,
        gram: Option<usize>,
        space: Option<(f64, f64, f64, f64)>,
        leaf_bytes: Option<usize>,
        bits_per_key: Option<f64>,
        chunk_bytes: Option<u64>,
        brin_form: Option<&str>,
        time: Option<String>,
        expiry: Option<String>,
        grace: Option<i64>,
        clock: Option<String>,
    ) -> PyResult<Py<PyAny>> {
        let spec = (|| -> BindResult<IndexSpec> {
            Ok(IndexSpec {
                name: name.to_owned(),
                kind: IndexKind::parse(kind)?,
                fields: string_list("fields", fields)?,
                policy: merge_policy.map(MergePolicy::parse).transpose()?,
                reconcile: reconcile.map(ReconcileOption::parse).transpose()?,
                gram,
                space: space.map(|(a, b, c, d)| [a, b, c, d]),
                leaf_bytes,
                bits_per_key,
                chunks: (
                    chunk_bytes,
                    brin_form
                        .map(|f| {
                            silt::storage::brin::BrinForm::parse(f).ok_or_else(|| {
                                BindError::Config(format!(
                                    "unknown brin_form {f:?}; use \"interval_tree\" or \"key_value\""
                                ))
                            })
                        })
                        .transpose()?,
                ),
                list: (time, expiry, grace, clock),
            })
        })()
        .py_err(py)?;
        let def = detached(py, || {
            self.handle.with(|db| {
                let ds = db.dataset(dataset)?;
                let def = index_def(spec, &ds.def())?;
                Ok(db.create_index(dataset, def)?)
            })
        })?;
        Ok(serde_to_py(py, &def)?.unbind())
    }

    /// Drop a secondary index and delete its files.
    fn drop_index(&self, py: Python<'_>, dataset: &str, name: &str) -> PyResult<()> {
        detached(py, || {
            self.handle.with(|db| Ok(db.drop_index(dataset, name)?))
        })
    }

    /// Statistics of the database (block cache, log, locks, last recovery,
    /// each dataset's trees) as a dict.
    fn stats(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let stats = detached(py, || self.handle.with(|db| Ok(db.stats())))?;
        Ok(serde_to_py(py, &stats)?.unbind())
    }

    /// What recovery did when the database was opened, as a dict.
    fn recovery(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let r = detached(py, || {
            self.handle.with(|db| Ok(db.recovery_summary().clone()))
        })?;
        Ok(serde_to_py(py, &r)?.unbind())
    }

    /// Flush every dataset's in-memory components, then checkpoint.
    fn flush(&self, py: Python<'_>) -> PyResult<()> {
        detached(py, || self.handle.with(|db| Ok(db.flush()?)))
    }

    /// Take a checkpoint now (flushes what holds old log records and deletes
    /// log files no longer needed). Returns the checkpoint as a dict.
    fn checkpoint(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let cp = detached(py, || self.handle.with(|db| Ok(db.checkpoint()?)))?;
        Ok(serde_to_py(py, &cp)?.unbind())
    }

    /// Block until no flush or merge is queued or running.
    fn wait_idle(&self, py: Python<'_>) -> PyResult<()> {
        detached(py, || self.handle.with(|db| Ok(db.wait_idle()?)))
    }

    /// Run SQL (one statement, or several separated by `;`: the result is
    /// the last one's) and return a `SqlResult` (`to_arrow()`,
    /// `to_pandas()`, `rows()`). Every dataset is a table; geometry columns
    /// are WKT text; `ST_*` functions, `CREATE TABLE` / `CREATE INDEX ...
    /// USING kind`, `INSERT`, `UPSERT INTO`, `DELETE` and `COMPACT t` are
    /// supported. Storage errors keep their class (`DuplicateKeyError`...);
    /// other failures raise `SqlError`.
    #[cfg(feature = "sql")]
    fn sql(&self, py: Python<'_>, query: &str) -> PyResult<Py<PyAny>> {
        let batches = detached(py, || self.handle.sql(query))?;
        let cls = pyo3::types::PyModule::import(py, "siltdb._sql")?.getattr("SqlResult")?;
        Ok(cls.call1((Bound::new(py, batches)?,))?.unbind())
    }

    /// Run SQL: not available in this build (built without the `sql`
    /// feature); raises `NotImplementedError`.
    #[cfg(not(feature = "sql"))]
    fn sql(&self, query: &str) -> PyResult<Py<PyAny>> {
        let _ = query;
        Err(PyNotImplementedError::new_err(
            "SQL is not available in this build of siltdb: it was built without the `sql` feature",
        ))
    }

    /// Load a `geopandas.GeoDataFrame` into dataset `name`, created when
    /// missing (fields typed from the columns, a spatial index of kind
    /// `index` on the active geometry); returns the dataset. The key is
    /// `primary_key`'s column, by default the frame's index. A frame in
    /// another CRS is reprojected to EPSG:4326. Needs geopandas.
    #[pyo3(signature = (name, frame, primary_key=None, index=Some("rtree"), batch=5000))]
    fn load_geodataframe(
        slf: Bound<'_, Self>,
        name: &str,
        frame: Bound<'_, PyAny>,
        primary_key: Option<&str>,
        index: Option<&str>,
        batch: usize,
    ) -> PyResult<Py<PyAny>> {
        let py = slf.py();
        let geo = PyModule::import(py, "siltdb._geo")?;
        Ok(geo
            .getattr("load_geodataframe")?
            .call1((slf, name, frame, primary_key, index, batch))?
            .unbind())
    }

    /// Load a GeoParquet file into dataset `name`, as
    /// [`load_geodataframe`] does. Needs geopandas (and pyarrow).
    #[pyo3(signature = (name, path, primary_key=None, index=Some("rtree")))]
    fn read_geoparquet(
        slf: Bound<'_, Self>,
        name: &str,
        path: &str,
        primary_key: Option<&str>,
        index: Option<&str>,
    ) -> PyResult<Py<PyAny>> {
        let py = slf.py();
        let geo = PyModule::import(py, "siltdb._geo")?;
        Ok(geo
            .getattr("read_geoparquet")?
            .call1((slf, name, path, primary_key, index))?
            .unbind())
    }

    /// Flush, checkpoint, stop background work and release the directory
    /// lock. Further calls on the database, its datasets and iterators raise
    /// `ClosedError`. Closing twice is harmless.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        detached(py, || self.handle.close())
    }

    fn __enter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    /// Close the database on leaving a `with` block (exceptions propagate).
    #[pyo3(signature = (_exc_type=None, _exc=None, _tb=None))]
    fn __exit__(
        &self,
        py: Python<'_>,
        _exc_type: Option<&Bound<'_, PyAny>>,
        _exc: Option<&Bound<'_, PyAny>>,
        _tb: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<bool> {
        self.close(py)?;
        Ok(false)
    }

    fn __repr__(&self) -> String {
        format!(
            "<siltdb.Database {:?}{}>",
            self.path,
            if self.handle.is_open() {
                ""
            } else {
                " (closed)"
            }
        )
    }
}

/// Open (or create) the database in directory `path`.
///
/// - `durability`: `"sync"` (default: a write returns once its commit is
///   fsynced), `"batched"` / `"batched(<ms>)"` (fsynced within ms; an OS
///   crash may lose the last ms), or `"none"` (never fsynced by the log).
/// - `block_cache`: size of the block cache (bytes or `"256MB"`).
/// - `flush_threads`, `merge_threads`: background threads.
/// - `checkpoint_interval`: checkpoint after this much log (0 = never
///   automatically).
/// - `fsync`: fsync component files (turn off only for throw-away data).
///
/// Raises `LockedError` if another process holds the database open.
#[pyfunction]
#[pyo3(signature = (path, durability="sync", *, block_cache=None, flush_threads=None, merge_threads=None, checkpoint_interval=None, fsync=true))]
#[allow(clippy::too_many_arguments)]
pub fn connect(
    py: Python<'_>,
    path: &Bound<'_, PyAny>,
    durability: &str,
    block_cache: Option<&Bound<'_, PyAny>>,
    flush_threads: Option<usize>,
    merge_threads: Option<usize>,
    checkpoint_interval: Option<&Bound<'_, PyAny>>,
    fsync: bool,
) -> PyResult<Database> {
    let path: std::path::PathBuf = match path.extract() {
        Ok(p) => p,
        Err(_) => {
            return Err(BindError::Config(
                "path must be a str or an os.PathLike".into(),
            ))
            .py_err(py);
        }
    };
    let opts = (|| -> BindResult<DbOptions> {
        let mut o = DbOptions {
            durability: durability.parse::<Durability>()?,
            sync: fsync,
            ..DbOptions::default()
        };
        if let Some(b) = block_cache {
            o.block_cache_bytes = parse_size("block_cache", b)?;
        }
        if let Some(n) = flush_threads {
            if n == 0 {
                return Err(BindError::Config("flush_threads must be at least 1".into()));
            }
            o.flush_threads = n;
        }
        if let Some(n) = merge_threads {
            if n == 0 {
                return Err(BindError::Config("merge_threads must be at least 1".into()));
            }
            o.merge_threads = n;
        }
        if let Some(c) = checkpoint_interval {
            o.checkpoint_interval_bytes = parse_size("checkpoint_interval", c)?;
        }
        Ok(o)
    })()
    .py_err(py)?;
    let shown = path.display().to_string();
    let db = detached(py, || Ok(silt::Database::open(&path, opts)?))?;
    Ok(Database {
        handle: Handle::new(db),
        path: shown,
    })
}

/// A dataset's `ttl` from its dict (`create_dataset`).
fn ttl_def(d: &Bound<'_, PyDict>) -> BindResult<silt::TtlDef> {
    let mut t = silt::TtlDef::default();
    for (k, v) in d.iter() {
        let k: String = k
            .extract()
            .map_err(|_| BindError::Config("the keys of `ttl` must be str".into()))?;
        let text = || -> BindResult<String> {
            v.extract().map_err(|_| {
                BindError::Config(format!("ttl `{k}` must be a str (a field name or clock)"))
            })
        };
        let int = || -> BindResult<i64> {
            v.extract()
                .map_err(|_| BindError::Config(format!("ttl `{k}` must be an int")))
        };
        match k.as_str() {
            "time" => t.time = Some(text()?),
            "expiry" => t.expiry = Some(text()?),
            "clock" => t.clock = Some(text()?),
            "after" => t.after = Some(int()?),
            "grace" => t.grace = int()?,
            other => {
                return Err(BindError::Config(format!(
                    "unknown ttl key `{other}`; available: expiry, time, after, clock, grace"
                )));
            }
        }
    }
    Ok(t)
}

/// A foreign key of dataset `table` from its dict (see
/// `Database.create_dataset`).
fn foreign_key(table: &str, d: &Bound<'_, PyDict>) -> BindResult<silt::ForeignKeyDef> {
    let get = |k: &str| d.get_item(k).ok().flatten();
    let fields = match get("fields") {
        Some(f) => string_list("fields", &f)?,
        None => {
            return Err(BindError::Config(
                "a foreign key needs \"fields\": the referencing field(s)".into(),
            ));
        }
    };
    let parent: String = get("parent")
        .and_then(|p| p.extract().ok())
        .ok_or_else(|| {
            BindError::Config(
                "a foreign key needs \"parent\": the referenced dataset's name".into(),
            )
        })?;
    let on_delete = match get("on_delete")
        .map(|v| v.extract::<String>())
        .transpose()
        .map_err(|_| BindError::Config("\"on_delete\" must be a str".into()))?
        .as_deref()
        .map(str::to_ascii_lowercase)
        .as_deref()
    {
        None | Some("restrict" | "no action") => silt::FkAction::Restrict,
        Some("cascade") => silt::FkAction::Cascade,
        Some(other) => {
            return Err(BindError::Config(format!(
                "\"on_delete\" is \"restrict\" or \"cascade\", not \"{other}\""
            )));
        }
    };
    let name = match get("name") {
        Some(n) => n
            .extract::<String>()
            .map_err(|_| BindError::Config("\"name\" must be a str".into()))?,
        None => silt::ForeignKeyDef::default_name(table, &fields),
    };
    Ok(silt::ForeignKeyDef {
        name,
        fields,
        parent,
        on_delete,
    })
}
