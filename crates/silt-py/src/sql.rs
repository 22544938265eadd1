//! `Database.sql` support: a result's record batches handed to Python
//! through the Arrow C stream interface (the `__arrow_c_stream__`
//! PyCapsule protocol), which pyarrow, polars and DuckDB read without a
//! copy and without the native module depending on a pyarrow version. The
//! Arrow IPC stream is still there for whoever asks (`ipc_bytes`).

use std::sync::Arc;

use arrow_array::ffi_stream::FFI_ArrowArrayStream;
use datafusion::arrow::array::{RecordBatch, RecordBatchIterator};
use datafusion::arrow::datatypes::{Schema, SchemaRef};
use datafusion::arrow::error::ArrowError;
use datafusion::arrow::ipc::writer::StreamWriter;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyCapsule};

use crate::errors::{BindError, BindResult, IntoPyResult};

/// The record batches of one SQL result (`siltdb.SqlResult` wraps them).
#[pyclass(name = "SqlBatches", module = "siltdb._siltdb", frozen)]
pub struct SqlBatches {
    schema: SchemaRef,
    batches: Vec<RecordBatch>,
}

impl SqlBatches {
    /// A result's batches (an empty result has an empty schema).
    pub fn new(batches: Vec<RecordBatch>) -> SqlBatches {
        let schema = batches
            .first()
            .map(|b| b.schema())
            .unwrap_or_else(|| Arc::new(Schema::empty()));
        SqlBatches { schema, batches }
    }
}

#[pymethods]
impl SqlBatches {
    /// The result as an Arrow C stream, in a PyCapsule named
    /// `arrow_array_stream` (the Arrow PyCapsule interface). The batches
    /// are shared, not copied. `requested_schema` is not applied: the
    /// stream has the result's own schema, as the protocol allows.
    #[pyo3(signature = (requested_schema=None))]
    fn __arrow_c_stream__<'py>(
        &self,
        py: Python<'py>,
        requested_schema: Option<Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyCapsule>> {
        let _ = requested_schema;
        let reader = RecordBatchIterator::new(
            self.batches.clone().into_iter().map(Ok::<_, ArrowError>),
            self.schema.clone(),
        );
        let stream = FFI_ArrowArrayStream::new(Box::new(reader));
        // The capsule holds the stream in a box of its own; a consumer
        // moves it out (leaving it released), and the capsule's destructor
        // drops what is left.
        PyCapsule::new_with_value(py, stream, c"arrow_array_stream")
    }

    /// The result as one Arrow IPC stream (bytes).
    fn ipc_bytes<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        let bytes = ipc_bytes(&self.schema, &self.batches).py_err(py)?;
        Ok(PyBytes::new(py, &bytes))
    }

    /// The number of rows.
    fn __len__(&self) -> usize {
        self.batches.iter().map(RecordBatch::num_rows).sum()
    }
}

/// Encode record batches as one Arrow IPC stream.
pub fn ipc_bytes(schema: &SchemaRef, batches: &[RecordBatch]) -> BindResult<Vec<u8>> {
    let err = |e: ArrowError| {
        BindError::Internal(format!("cannot encode the SQL result as Arrow IPC: {e}"))
    };
    let mut w = StreamWriter::try_new(Vec::new(), schema).map_err(err)?;
    for b in batches {
        w.write(b).map_err(err)?;
    }
    w.finish().map_err(err)?;
    w.into_inner().map_err(err)
}
