//! Lazy result iterators: dataset scans, index queries and spatial joins.
//!
//! Each `__next__` releases the GIL while it reads. Items are fetched in
//! batches that grow from 1 to [`MAX_BATCH`], so breaking out of a loop
//! early costs little while long iterations pay the GIL hand-over rarely.

use std::collections::VecDeque;
use std::sync::Arc;

use parking_lot::Mutex;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use silt::{Geometry, QueryHit, QueryResults, QueryStats, Value};

use crate::convert::{key_to_py, serde_to_py, to_py};
use crate::errors::{BindResult, detached};
use crate::handle::Handle;
use crate::typed::Typed;

const MAX_BATCH: usize = 256;

/// Something that yields items in batches.
trait Source: Send {
    type Item: Send;
    fn next_item(&mut self) -> Option<silt::Result<Self::Item>>;
    fn stats(&self) -> Option<QueryStats>;
}

struct State<S: Source> {
    source: S,
    buf: VecDeque<S::Item>,
    /// An error met while filling the buffer, raised after the items before it.
    pending_err: Option<silt::Error>,
    done: bool,
    batch: usize,
}

impl<S: Source> State<S> {
    fn new(source: S) -> Self {
        State {
            source,
            buf: VecDeque::new(),
            pending_err: None,
            done: false,
            batch: 1,
        }
    }

    fn fill(&mut self) {
        while self.buf.len() < self.batch && !self.done {
            match self.source.next_item() {
                Some(Ok(item)) => self.buf.push_back(item),
                Some(Err(e)) => {
                    self.pending_err = Some(e);
                    self.done = true;
                }
                None => self.done = true,
            }
        }
        self.batch = (self.batch * 2).min(MAX_BATCH);
    }

    /// The next item, reading a batch if the buffer is empty.
    fn next(&mut self) -> BindResult<Option<S::Item>> {
        if self.buf.is_empty() && !self.done {
            self.fill();
        }
        if let Some(item) = self.buf.pop_front() {
            return Ok(Some(item));
        }
        match self.pending_err.take() {
            Some(e) => Err(e.into()),
            None => Ok(None),
        }
    }
}

fn next_of<S: Source>(
    py: Python<'_>,
    handle: &Handle,
    state: &Mutex<State<S>>,
) -> PyResult<Option<S::Item>> {
    detached(py, || handle.with(|_| state.lock().next()))
}

impl Source for silt::DatasetScan {
    type Item = Value;
    fn next_item(&mut self) -> Option<silt::Result<Value>> {
        Iterator::next(self)
    }
    fn stats(&self) -> Option<QueryStats> {
        None
    }
}

impl Source for QueryResults {
    type Item = QueryHit;
    fn next_item(&mut self) -> Option<silt::Result<QueryHit>> {
        Iterator::next(self)
    }
    fn stats(&self) -> Option<QueryStats> {
        Some(QueryResults::stats(self))
    }
}

pub type Probes = std::vec::IntoIter<(Value, Geometry)>;
pub type Join = silt::dataset::JoinResults<Probes>;

impl Source for Join {
    type Item = (Value, QueryHit);
    fn next_item(&mut self) -> Option<silt::Result<(Value, QueryHit)>> {
        Iterator::next(self)
    }
    fn stats(&self) -> Option<QueryStats> {
        Some(Join::stats(self))
    }
}

fn hit_to_py<'py>(py: Python<'py>, hit: &QueryHit, typed: &Typed) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("pk", key_to_py(py, &hit.pk)?)?;
    match &hit.record {
        Some(r) => d.set_item("record", typed.record(py, r)?)?,
        None => d.set_item("record", py.None())?,
    }
    d.set_item("distance_m", hit.distance_m)?;
    Ok(d)
}

fn stats_of<S: Source>(py: Python<'_>, state: &Mutex<State<S>>) -> PyResult<Py<PyAny>> {
    let stats = state.lock().source.stats().unwrap_or_default();
    Ok(serde_to_py(py, &stats)?.unbind())
}

/// Records of a dataset in primary-key order (from `Dataset.scan`).
#[pyclass(frozen, module = "siltdb")]
pub struct ScanIterator {
    handle: Arc<Handle>,
    state: Mutex<State<silt::DatasetScan>>,
    typed: Typed,
}

impl ScanIterator {
    pub fn new(handle: Arc<Handle>, scan: silt::DatasetScan, typed: Typed) -> Self {
        ScanIterator {
            handle,
            state: Mutex::new(State::new(scan)),
            typed,
        }
    }
}

#[pymethods]
impl ScanIterator {
    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__(&self, py: Python<'_>) -> PyResult<Option<Py<PyAny>>> {
        match next_of(py, &self.handle, &self.state)? {
            Some(v) => Ok(Some(self.typed.record(py, &v)?.unbind())),
            None => Ok(None),
        }
    }
}

/// Hits of an index query, lazily: iterate to get dicts with `pk`,
/// `record` (None for hits answered from the index alone) and `distance_m`
/// (distance and nearest queries, else None). `stats()` tells what the
/// query touched so far.
#[pyclass(frozen, module = "siltdb")]
pub struct QueryIterator {
    handle: Arc<Handle>,
    state: Mutex<State<QueryResults>>,
    typed: Typed,
}

impl QueryIterator {
    pub fn new(handle: Arc<Handle>, results: QueryResults, typed: Typed) -> Self {
        QueryIterator {
            handle,
            state: Mutex::new(State::new(results)),
            typed,
        }
    }
}

#[pymethods]
impl QueryIterator {
    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__(&self, py: Python<'_>) -> PyResult<Option<Py<PyAny>>> {
        match next_of(py, &self.handle, &self.state)? {
            Some(hit) => Ok(Some(hit_to_py(py, &hit, &self.typed)?.into_any().unbind())),
            None => Ok(None),
        }
    }

    /// What the query touched so far: `components`, `blocks`, `candidates`,
    /// `fetched` and `index_only` counts.
    fn stats(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        stats_of(py, &self.state)
    }
}

/// Results of a spatial join: dicts with `probe` (the probe's id) and the
/// hit's `pk`, `record` and `distance_m`.
#[pyclass(frozen, module = "siltdb")]
pub struct JoinIterator {
    handle: Arc<Handle>,
    state: Mutex<State<Join>>,
    typed: Typed,
}

impl JoinIterator {
    pub fn new(handle: Arc<Handle>, join: Join, typed: Typed) -> Self {
        JoinIterator {
            handle,
            state: Mutex::new(State::new(join)),
            typed,
        }
    }
}

#[pymethods]
impl JoinIterator {
    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__(&self, py: Python<'_>) -> PyResult<Option<Py<PyAny>>> {
        match next_of(py, &self.handle, &self.state)? {
            Some((probe, hit)) => {
                let d = hit_to_py(py, &hit, &self.typed)?;
                d.set_item("probe", to_py(py, &probe)?)?;
                Ok(Some(d.into_any().unbind()))
            }
            None => Ok(None),
        }
    }

    /// What the join touched so far (all probes).
    fn stats(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        stats_of(py, &self.state)
    }
}
