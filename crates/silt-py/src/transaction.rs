//! `siltdb.Transaction`: several reads and writes on any datasets of a
//! database, committed as one (`with db.transaction() as tx:`).

use std::ops::Bound as KeyBound;
use std::sync::Arc;

use parking_lot::Mutex;
use pyo3::prelude::*;
use pyo3::types::{PyList, PyString};
use silt::value::prefix_upper_bound;

use crate::convert::{to_key, to_record};
use crate::errors::{BindError, BindResult, detached};
use crate::handle::Handle;
use crate::typed::Typed;

/// A transaction (from `Database.transaction()`): writes are buffered and
/// applied together at `commit()`, atomically and durably, across every
/// dataset and index; reads see the transaction's own writes. As a context
/// manager it commits when the block ends normally and rolls back when it
/// raises. `commit()` raises `ConflictError` (nothing applied; run the
/// transaction again) if a record it read with `get` was changed by another
/// transaction since. Datasets are given by name or as `Dataset` objects.
#[pyclass(frozen, module = "siltdb")]
pub struct Transaction {
    handle: Arc<Handle>,
    tx: Mutex<Option<silt::Transaction>>,
}

impl Transaction {
    pub fn new(handle: Arc<Handle>, tx: silt::Transaction) -> Transaction {
        Transaction {
            handle,
            tx: Mutex::new(Some(tx)),
        }
    }

    /// Run `f` on the open transaction and the dataset named `name`.
    fn with<T>(
        &self,
        name: &str,
        f: impl FnOnce(&mut silt::Transaction, &Arc<silt::Dataset>) -> BindResult<T>,
    ) -> BindResult<T> {
        self.handle.with_dataset(name, |ds| {
            let mut g = self.tx.lock();
            match g.as_mut() {
                Some(t) => f(t, ds),
                None => Err(BindError::Silt(silt::Error::Txn(
                    "the transaction has ended (committed or rolled back)".to_owned(),
                ))),
            }
        })
    }

    fn take(&self) -> BindResult<silt::Transaction> {
        self.tx.lock().take().ok_or_else(|| {
            BindError::Silt(silt::Error::Txn(
                "the transaction has ended (committed or rolled back)".to_owned(),
            ))
        })
    }
}

/// A dataset argument: its name, or a `Dataset` (its `name` attribute).
fn dataset_name(obj: &Bound<'_, PyAny>) -> PyResult<String> {
    if let Ok(s) = obj.cast::<PyString>() {
        return Ok(s.to_string());
    }
    obj.getattr("name")?.extract()
}

#[pymethods]
impl Transaction {
    /// Buffer the insert of a new record; raises `DuplicateKeyError` (and
    /// buffers nothing) if the key exists as this transaction sees it.
    fn insert(
        &self,
        py: Python<'_>,
        dataset: &Bound<'_, PyAny>,
        record: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        let (name, v) = (dataset_name(dataset)?, to_record(record)?);
        detached(py, || self.with(&name, |t, ds| Ok(t.insert(ds, v)?)))
    }

    /// Buffer an insert-or-replace.
    fn upsert(
        &self,
        py: Python<'_>,
        dataset: &Bound<'_, PyAny>,
        record: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        let (name, v) = (dataset_name(dataset)?, to_record(record)?);
        detached(py, || self.with(&name, |t, ds| Ok(t.upsert(ds, v)?)))
    }

    /// Buffer the delete of the record with primary key `pk`; returns
    /// whether it existed as this transaction sees it.
    fn delete(
        &self,
        py: Python<'_>,
        dataset: &Bound<'_, PyAny>,
        pk: &Bound<'_, PyAny>,
    ) -> PyResult<bool> {
        let (name, key) = (dataset_name(dataset)?, to_key(pk)?);
        detached(py, || self.with(&name, |t, ds| Ok(t.delete(ds, &key)?)))
    }

    /// The record with primary key `pk` as this transaction sees it, or
    /// None. The version read is checked at commit.
    fn get(
        &self,
        py: Python<'_>,
        dataset: &Bound<'_, PyAny>,
        pk: &Bound<'_, PyAny>,
    ) -> PyResult<Option<Py<PyAny>>> {
        let (name, key) = (dataset_name(dataset)?, to_key(pk)?);
        let (rec, typed) = detached(py, || {
            self.with(&name, |t, ds| Ok((t.get(ds, &key)?, Typed::of(&ds.def()))))
        })?;
        rec.map(|r| typed.record(py, &r).map(Bound::unbind))
            .transpose()
    }

    /// Records with keys from `lo` to `hi` (inclusive; None = unbounded) as
    /// this transaction sees them, as a list in key order (at most `limit`).
    #[pyo3(signature = (dataset, lo=None, hi=None, *, limit=None))]
    fn scan<'py>(
        &self,
        py: Python<'py>,
        dataset: &Bound<'py, PyAny>,
        lo: Option<&Bound<'py, PyAny>>,
        hi: Option<&Bound<'py, PyAny>>,
        limit: Option<usize>,
    ) -> PyResult<Bound<'py, PyList>> {
        let name = dataset_name(dataset)?;
        let lo = lo.filter(|o| !o.is_none()).map(to_key).transpose()?;
        let hi = hi.filter(|o| !o.is_none()).map(to_key).transpose()?;
        let records = detached(py, || {
            self.with(&name, |t, ds| {
                let lo = match &lo {
                    None => KeyBound::Unbounded,
                    Some(k) => KeyBound::Included(ds.encode_pk_prefix(k)?),
                };
                let hi = match &hi {
                    None => KeyBound::Unbounded,
                    Some(k) => KeyBound::Excluded(prefix_upper_bound(&ds.encode_pk_prefix(k)?)),
                };
                let mut out = Vec::new();
                for r in t.scan_raw(ds, lo, hi)? {
                    if limit.is_some_and(|l| out.len() >= l) {
                        break;
                    }
                    out.push(r?);
                }
                Ok((out, Typed::of(&ds.def())))
            })
        })?;
        let (records, typed) = records;
        let list = PyList::empty(py);
        for r in &records {
            list.append(typed.record(py, r)?)?;
        }
        Ok(list)
    }

    /// Mark a savepoint.
    fn savepoint(&self, py: Python<'_>, name: &str) -> PyResult<()> {
        detached(py, || {
            let mut g = self.tx.lock();
            match g.as_mut() {
                Some(t) => {
                    t.savepoint(name);
                    Ok(())
                }
                None => Err(BindError::Silt(silt::Error::Txn(
                    "the transaction has ended".to_owned(),
                ))),
            }
        })
    }

    /// Undo the writes made since savepoint `name`.
    fn rollback_to(&self, py: Python<'_>, name: &str) -> PyResult<()> {
        detached(py, || {
            let mut g = self.tx.lock();
            match g.as_mut() {
                Some(t) => Ok(t.rollback_to(name)?),
                None => Err(BindError::Silt(silt::Error::Txn(
                    "the transaction has ended".to_owned(),
                ))),
            }
        })
    }

    /// Writes buffered so far.
    #[getter]
    fn pending_writes(&self) -> usize {
        self.tx.lock().as_ref().map_or(0, |t| t.pending_writes())
    }

    /// Whether the transaction is still open.
    #[getter]
    fn active(&self) -> bool {
        self.tx.lock().is_some()
    }

    /// Apply every write at once (durably, per the database's durability).
    /// Raises `ConflictError` if a record read with `get` changed since: then
    /// nothing was applied.
    fn commit(&self, py: Python<'_>) -> PyResult<()> {
        detached(py, || {
            let t = self.take()?;
            self.handle.with(|_| Ok(t.commit()?)).map(|_| ())
        })
    }

    /// Forget every buffered write.
    fn rollback(&self) {
        drop(self.tx.lock().take());
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    /// Commit if the block ended normally (and the transaction is still
    /// open), roll back if it raised.
    fn __exit__(
        &self,
        py: Python<'_>,
        exc_type: Option<&Bound<'_, PyAny>>,
        _exc: Option<&Bound<'_, PyAny>>,
        _tb: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<bool> {
        let raised = exc_type.is_some_and(|t| !t.is_none());
        if raised || !self.active() {
            self.rollback();
        } else {
            self.commit(py)?;
        }
        Ok(false)
    }

    fn __repr__(&self) -> String {
        match self.tx.lock().as_ref() {
            Some(t) => format!("<siltdb.Transaction open, {} writes>", t.pending_writes()),
            None => "<siltdb.Transaction ended>".to_owned(),
        }
    }
}
