//! A dataset inside other engines' queries, as its SQL table (the same
//! columns, types and pushdown as `Database.sql` sees):
//!
//! - **DataFusion** (the Python `datafusion` package, same major version):
//!   `Dataset.__datafusion_table_provider__(session)` hands Silt's table
//!   provider over the DataFusion FFI, so `ctx.register_table("t", ds)`
//!   makes it a table of a foreign session, with filters, projections and
//!   limits pushed down into Silt's indexes;
//! - **any Arrow consumer** (DuckDB, polars, pyarrow): `__arrow_c_stream__`
//!   streams the whole table, batch by batch as the consumer asks (never
//!   all of it in memory), so `duckdb.sql("SELECT .. FROM ds")` scans it.
//!
//! Both run Silt's side on a Tokio runtime of this library's own: the
//! caller's engine, in another library, has another copy of Tokio.
//! A provider or stream keeps the database open until it is dropped.

use std::sync::{Arc, OnceLock};

use arrow_array::ffi_stream::FFI_ArrowArrayStream;
use datafusion::arrow::array::{RecordBatch, RecordBatchReader};
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::arrow::error::ArrowError;
use datafusion::common::TableReference;
use datafusion::execution::SendableRecordBatchStream;
use datafusion_ffi::proto::logical_extension_codec::FFI_LogicalExtensionCodec;
use datafusion_ffi::table_provider::FFI_TableProvider;
use futures::StreamExt;
use pyo3::prelude::*;
use pyo3::types::{PyCapsule, PyCapsuleMethods};
use tokio::runtime::Runtime;

use crate::errors::{BindError, BindResult};
use crate::handle::Handle;

/// The runtime of the scans other engines run, made on first use.
fn runtime() -> BindResult<&'static Runtime> {
    static RT: OnceLock<Runtime> = OnceLock::new();
    if let Some(rt) = RT.get() {
        return Ok(rt);
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("siltdb-interop")
        .enable_all()
        .build()
        .map_err(|e| BindError::Internal(format!("cannot start a Tokio runtime: {e}")))?;
    // A racing first call may have set it: then this one is dropped.
    Ok(RT.get_or_init(|| rt))
}

/// The name of the capsule a DataFusion session's codec comes in.
const CODEC_CAPSULE: &std::ffi::CStr = c"datafusion_logical_extension_codec";

/// The logical extension codec of a DataFusion session: `session` is the
/// `SessionContext` (which gives it from
/// `__datafusion_logical_extension_codec__`) or the capsule itself.
fn session_codec(session: &Bound<'_, PyAny>) -> PyResult<FFI_LogicalExtensionCodec> {
    let getter = "__datafusion_logical_extension_codec__";
    let capsule = if session.hasattr(getter)? {
        session.getattr(getter)?.call0()?
    } else {
        session.clone()
    };
    let capsule = capsule.cast::<PyCapsule>().map_err(|_| {
        pyo3::exceptions::PyTypeError::new_err(
            "expected a DataFusion SessionContext (datafusion >= 55) or its logical extension codec capsule",
        )
    })?;
    let ptr = capsule.pointer_checked(Some(CODEC_CAPSULE))?;
    // SAFETY: `pointer_checked` verified that the capsule is valid and
    // named `datafusion_logical_extension_codec`, the name DataFusion
    // gives only to capsules holding an `FFI_LogicalExtensionCodec` (which
    // is `#[repr(C)]`), so the pointer is non-null, aligned and points to
    // one. The capsule is alive for this borrow (`capsule` holds a
    // reference), and the value is only read: cloning it takes its own
    // reference through the codec's `clone` function pointer.
    let codec = unsafe { ptr.cast::<FFI_LogicalExtensionCodec>().as_ref() };
    Ok(codec.clone())
}

/// Dataset `name`'s SQL table as a DataFusion FFI table provider capsule.
pub fn table_provider<'py>(
    py: Python<'py>,
    handle: &Arc<Handle>,
    name: &str,
    session: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyCapsule>> {
    let codec = session_codec(session)?;
    let handle = handle.clone();
    let name = name.to_owned();
    let (provider, rt) = crate::errors::detached(py, move || {
        let engine = handle.sql_engine()?;
        let rt = runtime()?;
        let provider = rt
            .block_on(
                engine
                    .session()
                    .table_provider(TableReference::bare(name.as_str())),
            )
            .map_err(|e| BindError::Sql(silt_sql::SqlError::from(e)))?;
        Ok((provider, rt.handle().clone()))
    })?;
    let ffi = FFI_TableProvider::new_with_ffi_codec(provider, true, Some(rt), codec);
    PyCapsule::new_with_value(py, ffi, c"datafusion_table_provider")
}

/// Dataset `name`'s SQL table, all of it, as an Arrow C stream capsule.
pub fn table_stream<'py>(
    py: Python<'py>,
    handle: &Arc<Handle>,
    name: &str,
) -> PyResult<Bound<'py, PyCapsule>> {
    let handle = handle.clone();
    let sql = format!("SELECT * FROM \"{}\"", name.replace('"', "\"\""));
    let reader = crate::errors::detached(py, move || {
        let engine = handle.sql_engine()?;
        let rt = runtime()?;
        let stream = rt.block_on(engine.execute_stream(&sql))?;
        Ok(Streamed {
            schema: stream.schema(),
            stream,
            rt,
        })
    })?;
    let stream = FFI_ArrowArrayStream::new(Box::new(reader));
    PyCapsule::new_with_value(py, stream, c"arrow_array_stream")
}

/// A query's stream read batch by batch on the interop runtime.
struct Streamed {
    schema: SchemaRef,
    stream: SendableRecordBatchStream,
    rt: &'static Runtime,
}

impl Iterator for Streamed {
    type Item = Result<RecordBatch, ArrowError>;

    fn next(&mut self) -> Option<Self::Item> {
        let next = self.rt.block_on(self.stream.next())?;
        Some(next.map_err(|e| ArrowError::ExternalError(Box::new(e))))
    }
}

impl RecordBatchReader for Streamed {
    fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }
}
