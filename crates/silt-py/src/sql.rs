//! `Database.sql` support: record batches to an Arrow IPC stream, which the
//! Python side reads with `pyarrow.ipc` (so the native module does not
//! depend on a pyarrow version).

use std::sync::Arc;

use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::datatypes::Schema;
use datafusion::arrow::error::ArrowError;
use datafusion::arrow::ipc::writer::StreamWriter;

use crate::errors::{BindError, BindResult};

/// Encode record batches as one Arrow IPC stream (an empty result is a
/// stream with an empty schema and no batches).
pub fn ipc_bytes(batches: &[RecordBatch]) -> BindResult<Vec<u8>> {
    let schema = batches
        .first()
        .map(|b| b.schema())
        .unwrap_or_else(|| Arc::new(Schema::empty()));
    let err = |e: ArrowError| {
        BindError::Internal(format!("cannot encode the SQL result as Arrow IPC: {e}"))
    };
    let mut w = StreamWriter::try_new(Vec::new(), &schema).map_err(err)?;
    for b in batches {
        w.write(b).map_err(err)?;
    }
    w.finish().map_err(err)?;
    w.into_inner().map_err(err)
}
