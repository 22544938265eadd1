//! `siltdb.Dataset`: writes, reads, scans and index queries of one dataset.

use std::ops::Bound as KeyBound;
use std::sync::Arc;

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyTuple};
use silt::value::prefix_upper_bound;
use silt::{BatchOptions, JoinPredicate, Query, QueryOptions, Value, WriteMode};

use crate::convert::{serde_to_py, to_geometry, to_key, to_record};
use crate::errors::{BindError, IntoPyResult, detached, silt_to_py};
use crate::handle::Handle;
use crate::results::{JoinIterator, QueryIterator, ScanIterator};
use crate::typed::Typed;

/// Records converted and written per core batch call in non-atomic batches.
const BATCH_CHUNK: usize = 4096;

/// A dataset of an open database (from `Database.create_dataset` or
/// `Database.dataset`). Records are dicts; primary keys are a value (one key
/// field) or a tuple (several). Every call releases the GIL while it works.
#[pyclass(frozen, module = "siltdb")]
pub struct Dataset {
    handle: Arc<Handle>,
    name: String,
}

impl Dataset {
    pub fn new(handle: Arc<Handle>, name: String) -> Self {
        Dataset { handle, name }
    }
}

/// What a batch write did.
#[pyclass(frozen, module = "siltdb", get_all)]
pub struct BatchReport {
    /// Records committed.
    committed: usize,
    /// `(position in the batch, exception)` of each record that failed.
    failed: Py<PyList>,
    /// Records not attempted because the batch stopped at an error (or, for
    /// an atomic batch, undone or never written because one record failed).
    not_attempted: usize,
}

#[pymethods]
impl BatchReport {
    fn __repr__(&self, py: Python<'_>) -> String {
        format!(
            "BatchReport(committed={}, failed={}, not_attempted={})",
            self.committed,
            self.failed.bind(py).len(),
            self.not_attempted
        )
    }
}

/// What the SQL-only methods raise in a build without SQL.
#[cfg(not(feature = "sql"))]
fn no_sql() -> PyErr {
    pyo3::exceptions::PyNotImplementedError::new_err(
        "a dataset is a SQL table only in builds of siltdb with the `sql` feature; this one was built without it",
    )
}

fn bound_of(v: Option<Vec<Value>>, inclusive: bool) -> KeyBound<Vec<Value>> {
    match v {
        None => KeyBound::Unbounded,
        Some(v) if inclusive => KeyBound::Included(v),
        Some(v) => KeyBound::Excluded(v),
    }
}

/// A count argument (`k`, `limit`): refuse negative numbers with a clear message.
fn count(py: Python<'_>, what: &str, n: Option<i64>) -> PyResult<Option<usize>> {
    match n {
        None => Ok(None),
        Some(n) => usize::try_from(n)
            .map(Some)
            .map_err(|_| BindError::invalid(format!("{what} must be >= 0, got {n}")))
            .py_err(py),
    }
}

fn opt_key(obj: Option<&Bound<'_, PyAny>>) -> PyResult<Option<Vec<Value>>> {
    match obj {
        Some(o) if !o.is_none() => Ok(Some(to_key(o)?)),
        _ => Ok(None),
    }
}

impl Dataset {
    fn run_query(
        &self,
        py: Python<'_>,
        index: &str,
        query: Query,
        limit: Option<i64>,
        index_only: bool,
    ) -> PyResult<QueryIterator> {
        let limit = count(py, "limit", limit)?;
        let opts = QueryOptions { index_only, limit };
        let handle = self.handle.clone();
        let results = detached(py, || {
            handle.with_dataset(&self.name, |ds| {
                Ok((ds.query(index, &query, opts)?, Typed::of(&ds.def())))
            })
        })?;
        Ok(QueryIterator::new(
            self.handle.clone(),
            results.0,
            results.1,
        ))
    }

    /// Insert or upsert many records (see `insert_many`).
    #[allow(clippy::too_many_arguments)]
    fn write_many(
        &self,
        py: Python<'_>,
        records: &Bound<'_, PyAny>,
        mode: WriteMode,
        atomic: bool,
        stop_on_error: bool,
        raise_errors: bool,
    ) -> PyResult<Py<BatchReport>> {
        let failed = PyList::empty(py);
        let mut committed = 0usize;
        let mut not_attempted = 0usize;
        let mut stopped = false;
        let mut pending: Vec<Value> = Vec::new();
        let mut pending_start = 0usize;
        let opts = BatchOptions {
            mode,
            atomic,
            stop_on_error,
        };
        let mut seen = 0usize;

        // Write `pending`; returns whether the batch must stop.
        let flush = |pending: &mut Vec<Value>,
                     start: usize,
                     committed: &mut usize,
                     not_attempted: &mut usize|
         -> PyResult<bool> {
            if pending.is_empty() {
                return Ok(false);
            }
            let batch = std::mem::take(pending);
            let n = batch.len();
            let report = detached(py, || {
                self.handle
                    .with_dataset(&self.name, |ds| Ok(ds.write_batch(batch, opts)?))
            })?;
            *committed += report.committed;
            *not_attempted += report.not_attempted;
            let any_failed = !report.failed.is_empty();
            for (i, e) in report.failed {
                let exc = silt_to_py(py, &e);
                failed.append((start + i, exc.value(py).clone()))?;
            }
            debug_assert!(report.committed <= n);
            Ok(any_failed && (stop_on_error || atomic))
        };

        for item in records.try_iter()? {
            let item = item?;
            let i = seen;
            seen += 1;
            if stopped {
                not_attempted += 1;
                continue;
            }
            match to_record(&item) {
                Ok(v) => {
                    if pending.is_empty() {
                        pending_start = i;
                    }
                    pending.push(v);
                }
                Err(e) => {
                    if atomic {
                        // Nothing was written: report like the core does.
                        failed.append((i, e.value(py).clone()))?;
                        pending.clear();
                        stopped = true;
                        not_attempted = i;
                        continue;
                    }
                    if flush(
                        &mut pending,
                        pending_start,
                        &mut committed,
                        &mut not_attempted,
                    )? {
                        stopped = true;
                        not_attempted += 1;
                        continue;
                    }
                    failed.append((i, e.value(py).clone()))?;
                    if stop_on_error {
                        stopped = true;
                    }
                    continue;
                }
            }
            if !atomic
                && pending.len() >= BATCH_CHUNK
                && flush(
                    &mut pending,
                    pending_start,
                    &mut committed,
                    &mut not_attempted,
                )?
            {
                stopped = true;
            }
        }
        if !stopped {
            flush(
                &mut pending,
                pending_start,
                &mut committed,
                &mut not_attempted,
            )?;
        }
        let report = Py::new(
            py,
            BatchReport {
                committed,
                failed: failed.clone().unbind(),
                not_attempted,
            },
        )?;
        if raise_errors && !failed.is_empty() {
            let first = failed.get_item(0)?;
            let tuple = first.cast::<PyTuple>()?;
            let index = tuple.get_item(0)?;
            let exc = tuple.get_item(1)?;
            exc.setattr("index", index)?;
            exc.setattr("report", report.clone_ref(py))?;
            return Err(PyErr::from_value(exc));
        }
        Ok(report)
    }
}

#[pymethods]
impl Dataset {
    /// The dataset's name.
    #[getter]
    fn name(&self) -> &str {
        &self.name
    }

    /// The dataset's SQL table as a DataFusion table provider (the FFI
    /// capsule of the Python `datafusion` package, version 55):
    /// `ctx.register_table("t", ds)` makes it a table of a DataFusion
    /// `SessionContext`, with filters and projections pushed into Silt's
    /// indexes. `session` is that context (or its logical extension codec
    /// capsule).
    #[cfg(feature = "sql")]
    fn __datafusion_table_provider__<'py>(
        &self,
        py: Python<'py>,
        session: Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, pyo3::types::PyCapsule>> {
        crate::interop::table_provider(py, &self.handle, &self.name, &session)
    }

    /// The dataset's SQL table, all its rows, as an Arrow C stream (the
    /// Arrow PyCapsule interface), read batch by batch as the consumer
    /// asks: `duckdb.sql("SELECT count(*) FROM ds")`, `pyarrow.table(ds)`
    /// and polars read it. `requested_schema` is not applied (the stream
    /// has the table's own schema, as the protocol allows).
    #[cfg(feature = "sql")]
    #[pyo3(signature = (requested_schema=None))]
    fn __arrow_c_stream__<'py>(
        &self,
        py: Python<'py>,
        requested_schema: Option<Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, pyo3::types::PyCapsule>> {
        let _ = requested_schema;
        crate::interop::table_stream(py, &self.handle, &self.name)
    }

    /// Not available in this build (built without the `sql` feature,
    /// which makes a dataset a SQL table): raises `NotImplementedError`.
    #[cfg(not(feature = "sql"))]
    fn __datafusion_table_provider__(&self, session: Bound<'_, PyAny>) -> PyResult<()> {
        let _ = session;
        Err(no_sql())
    }

    /// Not available in this build (built without the `sql` feature):
    /// raises `NotImplementedError`.
    #[cfg(not(feature = "sql"))]
    #[pyo3(signature = (requested_schema=None))]
    fn __arrow_c_stream__(&self, requested_schema: Option<Bound<'_, PyAny>>) -> PyResult<()> {
        let _ = requested_schema;
        Err(no_sql())
    }

    /// Insert a new record (a dict); raises `DuplicateKeyError` if a record
    /// with the same primary key exists.
    fn insert(&self, py: Python<'_>, record: &Bound<'_, PyAny>) -> PyResult<()> {
        let v = to_record(record)?;
        detached(py, || {
            self.handle.with_dataset(&self.name, |ds| Ok(ds.insert(v)?))
        })
    }

    /// Insert or replace a record (a dict).
    fn upsert(&self, py: Python<'_>, record: &Bound<'_, PyAny>) -> PyResult<()> {
        let v = to_record(record)?;
        detached(py, || {
            self.handle.with_dataset(&self.name, |ds| Ok(ds.upsert(v)?))
        })
    }

    /// Delete the record with primary key `pk` (a value, or a tuple for a
    /// composite key). Returns whether it existed.
    fn delete(&self, py: Python<'_>, pk: &Bound<'_, PyAny>) -> PyResult<bool> {
        let key = to_key(pk)?;
        detached(py, || {
            self.handle
                .with_dataset(&self.name, |ds| Ok(ds.delete(&key)?))
        })
    }

    /// Insert many records (any iterable of dicts).
    ///
    /// Non-atomic (default): each record is its own transaction (commits
    /// share fsyncs); with `stop_on_error` (default) the batch stops at the
    /// first failing record, keeping those before it. `atomic=True`: all
    /// records commit together or none does.
    ///
    /// Returns a `BatchReport`. If a record failed and `raise_errors` is true
    /// (default), the first failure's exception is raised instead, with
    /// attributes `index` (its position) and `report`.
    #[pyo3(signature = (records, atomic=false, stop_on_error=true, raise_errors=true))]
    fn insert_many(
        &self,
        py: Python<'_>,
        records: &Bound<'_, PyAny>,
        atomic: bool,
        stop_on_error: bool,
        raise_errors: bool,
    ) -> PyResult<Py<BatchReport>> {
        self.write_many(
            py,
            records,
            WriteMode::Insert,
            atomic,
            stop_on_error,
            raise_errors,
        )
    }

    /// Insert or replace many records; see `insert_many`.
    #[pyo3(signature = (records, atomic=false, stop_on_error=true, raise_errors=true))]
    fn upsert_many(
        &self,
        py: Python<'_>,
        records: &Bound<'_, PyAny>,
        atomic: bool,
        stop_on_error: bool,
        raise_errors: bool,
    ) -> PyResult<Py<BatchReport>> {
        self.write_many(
            py,
            records,
            WriteMode::Upsert,
            atomic,
            stop_on_error,
            raise_errors,
        )
    }

    /// The record with primary key `pk` as a dict, or None.
    fn get(&self, py: Python<'_>, pk: &Bound<'_, PyAny>) -> PyResult<Option<Py<PyAny>>> {
        let key = to_key(pk)?;
        let rec = detached(py, || {
            self.handle
                .with_dataset(&self.name, |ds| Ok((ds.get(&key)?, Typed::of(&ds.def()))))
        })?;
        let (rec, typed) = rec;
        rec.map(|r| typed.record(py, &r).map(Bound::unbind))
            .transpose()
    }

    /// `pk in dataset`: whether a record with this primary key exists.
    fn __contains__(&self, py: Python<'_>, pk: &Bound<'_, PyAny>) -> PyResult<bool> {
        Ok(self.get(py, pk)?.is_some())
    }

    /// Records in primary-key order, lazily, with keys from `lo` to `hi`
    /// (each a value, a tuple, or a prefix tuple of a composite key; None =
    /// unbounded). Both bounds are inclusive unless `lo_inclusive` /
    /// `hi_inclusive` say otherwise; a prefix bound covers every key that
    /// extends it.
    #[pyo3(signature = (lo=None, hi=None, *, lo_inclusive=true, hi_inclusive=true))]
    fn scan(
        &self,
        py: Python<'_>,
        lo: Option<&Bound<'_, PyAny>>,
        hi: Option<&Bound<'_, PyAny>>,
        lo_inclusive: bool,
        hi_inclusive: bool,
    ) -> PyResult<ScanIterator> {
        let lo = opt_key(lo)?;
        let hi = opt_key(hi)?;
        let scan = detached(py, || {
            self.handle.with_dataset(&self.name, |ds| {
                let lo = match lo {
                    None => KeyBound::Unbounded,
                    Some(k) => {
                        let enc = ds.encode_pk_prefix(&k)?;
                        if lo_inclusive {
                            KeyBound::Included(enc)
                        } else {
                            KeyBound::Included(prefix_upper_bound(&enc))
                        }
                    }
                };
                let hi = match hi {
                    None => KeyBound::Unbounded,
                    Some(k) => {
                        let enc = ds.encode_pk_prefix(&k)?;
                        if hi_inclusive {
                            KeyBound::Excluded(prefix_upper_bound(&enc))
                        } else {
                            KeyBound::Excluded(enc)
                        }
                    }
                };
                Ok((ds.scan_raw(lo, hi)?, Typed::of(&ds.def())))
            })
        })?;
        Ok(ScanIterator::new(self.handle.clone(), scan.0, scan.1))
    }

    /// Iterate over every record in primary-key order.
    fn __iter__(&self, py: Python<'_>) -> PyResult<ScanIterator> {
        self.scan(py, None, None, true, true)
    }

    /// Flush the dataset's in-memory components to disk.
    fn flush(&self, py: Python<'_>) -> PyResult<()> {
        detached(py, || {
            self.handle.with_dataset(&self.name, |ds| Ok(ds.flush()?))
        })
    }

    /// Merge every index of every partition down to one disk component.
    fn compact(&self, py: Python<'_>) -> PyResult<()> {
        detached(py, || {
            self.handle.with_dataset(&self.name, |ds| Ok(ds.compact()?))
        })
    }

    /// Statistics of the dataset and each of its LSM trees, as a dict.
    fn stats(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let stats = detached(py, || {
            self.handle.with_dataset(&self.name, |ds| Ok(ds.stats()))
        })?;
        Ok(serde_to_py(py, &stats)?.unbind())
    }

    /// The dataset's definition (primary key, fields, partitions, policy,
    /// indexes) as a dict.
    fn definition(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let def = detached(py, || {
            self.handle
                .with_dataset(&self.name, |ds| Ok((*ds.def()).clone()))
        })?;
        let d = serde_to_py(py, &def)?;
        if let Ok(d) = d.cast::<PyDict>() {
            let indexes = detached(py, || {
                self.handle
                    .with_dataset(&self.name, |ds| Ok(ds.index_defs()))
            })?;
            d.set_item("indexes", serde_to_py(py, &indexes)?)?;
        }
        Ok(d.unbind())
    }

    /// Every record as a `geopandas.GeoDataFrame`: a column per field,
    /// geometry fields as shapely geometries (the first declared one
    /// active), coordinates in `crs` (EPSG:4326, Silt's longitude/latitude).
    /// Needs geopandas.
    #[pyo3(signature = (crs="EPSG:4326"))]
    fn to_geopandas(slf: Bound<'_, Self>, crs: &str) -> PyResult<Py<PyAny>> {
        let py = slf.py();
        let geo = PyModule::import(py, "siltdb._geo")?;
        Ok(geo
            .getattr("dataset_to_geopandas")?
            .call1((slf, crs))?
            .unbind())
    }

    /// The dataset's secondary indexes: a list of dicts (name, kind, fields,
    /// policy, options).
    fn indexes(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let defs = detached(py, || {
            self.handle
                .with_dataset(&self.name, |ds| Ok(ds.index_defs()))
        })?;
        Ok(serde_to_py(py, &defs)?.unbind())
    }

    /// B+-tree (`btree`, `composite`) range query: records whose indexed
    /// field(s) lie between `lo` and `hi` (values, tuples for composite
    /// indexes, or prefixes; None = unbounded; inclusive unless told).
    #[pyo3(signature = (index, lo=None, hi=None, *, lo_inclusive=true, hi_inclusive=true, limit=None, index_only=false))]
    #[allow(clippy::too_many_arguments)]
    fn range(
        &self,
        py: Python<'_>,
        index: &str,
        lo: Option<&Bound<'_, PyAny>>,
        hi: Option<&Bound<'_, PyAny>>,
        lo_inclusive: bool,
        hi_inclusive: bool,
        limit: Option<i64>,
        index_only: bool,
    ) -> PyResult<QueryIterator> {
        let query = Query::Range {
            lo: bound_of(opt_key(lo)?, lo_inclusive),
            hi: bound_of(opt_key(hi)?, hi_inclusive),
        };
        self.run_query(py, index, query, limit, index_only)
    }

    /// R-tree / DHVB query: records whose geometry intersects `geometry`
    /// (boundaries included). `geometry` is a GeoJSON dict, a WKT string,
    /// `[lon, lat]`, or a box `(min_x, min_y, max_x, max_y)` (a box with
    /// `min_x > max_x` crosses the antimeridian).
    #[pyo3(signature = (index, geometry, *, limit=None, index_only=false))]
    fn intersects(
        &self,
        py: Python<'_>,
        index: &str,
        geometry: &Bound<'_, PyAny>,
        limit: Option<i64>,
        index_only: bool,
    ) -> PyResult<QueryIterator> {
        let g = to_geometry(geometry)?;
        self.run_query(py, index, Query::Intersects(g), limit, index_only)
    }

    /// R-tree / DHVB query: records within `metres` (great-circle) of the
    /// point (`lon`, `lat`); hits carry `distance_m`.
    #[pyo3(signature = (index, lon, lat, metres, *, limit=None, index_only=false))]
    #[allow(clippy::too_many_arguments)]
    fn within_distance(
        &self,
        py: Python<'_>,
        index: &str,
        lon: f64,
        lat: f64,
        metres: f64,
        limit: Option<i64>,
        index_only: bool,
    ) -> PyResult<QueryIterator> {
        if !(metres.is_finite() && metres >= 0.0) {
            return Err(BindError::invalid(format!(
                "metres must be a finite number >= 0, got {metres}"
            )))
            .py_err(py);
        }
        self.run_query(
            py,
            index,
            Query::WithinDistance { lon, lat, metres },
            limit,
            index_only,
        )
    }

    /// R-tree query: the `k` records nearest to (`lon`, `lat`), nearest
    /// first (great-circle distance in `distance_m`).
    #[pyo3(signature = (index, lon, lat, k, *, index_only=false))]
    fn nearest(
        &self,
        py: Python<'_>,
        index: &str,
        lon: f64,
        lat: f64,
        k: i64,
        index_only: bool,
    ) -> PyResult<QueryIterator> {
        let k = count(py, "k", Some(k))?.unwrap_or(0);
        self.run_query(py, index, Query::Nearest { lon, lat, k }, None, index_only)
    }

    /// Text query. Keyword index: records containing all (`all=True`) or
    /// any of the words of `text`. N-gram index: records whose text contains
    /// `text` as a substring (case-insensitive; `all` is ignored).
    #[pyo3(signature = (index, text, all=true, *, limit=None, index_only=false))]
    fn text(
        &self,
        py: Python<'_>,
        index: &str,
        text: String,
        all: bool,
        limit: Option<i64>,
        index_only: bool,
    ) -> PyResult<QueryIterator> {
        self.run_query(py, index, Query::Text { text, all }, limit, index_only)
    }

    /// Recency query (embedded, eager, lazy, composite and btree indexes):
    /// the `k` most recently written records (all when `k` is None) whose
    /// indexed field lies between `lo` and `hi` (inclusive; `hi` defaults
    /// to `lo`, an equality lookup), newest first.
    #[pyo3(signature = (index, lo, hi=None, k=None))]
    fn recent(
        &self,
        py: Python<'_>,
        index: &str,
        lo: &Bound<'_, PyAny>,
        hi: Option<&Bound<'_, PyAny>>,
        k: Option<i64>,
    ) -> PyResult<QueryIterator> {
        let k = count(py, "k", k)?;
        let lo_key = opt_key(Some(lo))?;
        let hi_key = match hi {
            Some(h) if !h.is_none() => opt_key(Some(h))?,
            _ => lo_key.clone(),
        };
        let query = Query::Recent {
            lo: bound_of(lo_key, true),
            hi: bound_of(hi_key, true),
            k,
        };
        self.run_query(py, index, query, None, false)
    }

    /// Index nested-loop spatial join against the R-tree `index`. `probes`
    /// is an iterable of `(id, geometry)` pairs; each result dict has
    /// `probe` (the id) and the hit's `pk`, `record`, `distance_m`. With
    /// `within_metres`, the indexed geometry must lie within that distance
    /// of the probe (probes must be points); else they must intersect.
    #[pyo3(signature = (index, probes, *, within_metres=None, limit=None, index_only=false))]
    fn spatial_join(
        &self,
        py: Python<'_>,
        index: &str,
        probes: &Bound<'_, PyAny>,
        within_metres: Option<f64>,
        limit: Option<i64>,
        index_only: bool,
    ) -> PyResult<JoinIterator> {
        let mut list = Vec::new();
        for item in probes.try_iter()? {
            let item = item?;
            let pair = match item.cast::<PyTuple>() {
                Ok(p) if p.len() == 2 => p,
                _ => {
                    return Err(BindError::invalid(
                        "each probe must be a tuple (id, geometry)",
                    ))
                    .py_err(py);
                }
            };
            let id = crate::convert::to_value(&pair.get_item(0)?)?;
            let g = to_geometry(&pair.get_item(1)?)?;
            list.push((id, g));
        }
        let pred = match within_metres {
            Some(m) if m.is_finite() && m >= 0.0 => JoinPredicate::WithinDistance(m),
            Some(m) => {
                return Err(BindError::invalid(format!(
                    "within_metres must be a finite number >= 0, got {m}"
                )))
                .py_err(py);
            }
            None => JoinPredicate::Intersects,
        };
        let limit = count(py, "limit", limit)?;
        let opts = QueryOptions { index_only, limit };
        let join = detached(py, || {
            self.handle.with_dataset(&self.name, |ds| {
                Ok((
                    ds.spatial_join(index, list, pred, opts)?,
                    Typed::of(&ds.def()),
                ))
            })
        })?;
        Ok(JoinIterator::new(self.handle.clone(), join.0, join.1))
    }

    fn __repr__(&self) -> String {
        format!("<siltdb.Dataset {:?}>", self.name)
    }
}
