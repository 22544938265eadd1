//! `siltdb`: Python bindings of the Silt storage engine.
//!
//! The extension module is `siltdb._siltdb`; the Python package `siltdb`
//! (under `python/`) re-exports it, defines the exception classes
//! (`siltdb._errors`) and adds the pure-Python helpers. See the package
//! docstring and `README.md` of this crate for the API.

mod convert;
mod database;
mod dataset;
mod errors;
mod handle;
#[cfg(feature = "sql")]
mod interop;
mod pubsub;
mod results;
#[cfg(feature = "sql")]
mod sql;
mod transaction;
mod typed;

use pyo3::prelude::*;

/// The native part of `siltdb`.
#[pymodule]
fn _siltdb(m: &Bound<'_, PyModule>) -> PyResult<()> {
    // Datasets may keep levels in object storage (s3://, memory://).
    silt_objstore::install();
    m.add_function(wrap_pyfunction!(database::connect, m)?)?;
    m.add_class::<database::Database>()?;
    m.add_class::<dataset::Dataset>()?;
    m.add_class::<dataset::BatchReport>()?;
    m.add_class::<transaction::Transaction>()?;
    m.add_class::<pubsub::PubSub>()?;
    m.add_class::<pubsub::Listener>()?;
    m.add_class::<results::QueryIterator>()?;
    m.add_class::<results::ScanIterator>()?;
    m.add_class::<results::JoinIterator>()?;
    #[cfg(feature = "sql")]
    m.add_class::<sql::SqlBatches>()?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
