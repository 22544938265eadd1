//! `COPY table [(columns)] FROM 'file'`: a file on the server, loaded
//! through the same [`CopyIn`] as a client's stream (batched
//! transactions, PostgreSQL's value rules, `pg_stat_progress_copy`).
//!
//! A text, CSV or binary file is handed over as it is read. A Parquet
//! file is read into Arrow batches (only the columns loaded), each batch
//! is re-encoded as COPY text rows ([`Encoder`]: what `COPY ... TO`
//! writes, which `COPY ... FROM` reads back exactly) and handed over the
//! same way: one value path for every format. Its columns are matched to
//! the table's by name (exactly, else ignoring case); the COPY's column
//! list, if any, chooses which of them are loaded.
//!
//! The file is read on a blocking thread, a few megabytes ahead of the
//! writes; a file that is missing, unreadable or not Parquet is an error
//! naming the path, before any row is written.

use std::fs::File;
use std::io::Read;
use std::path::PathBuf;

use datafusion::arrow::array::RecordBatch;
use datafusion::parquet::arrow::ProjectionMask;
use datafusion::parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use tokio::sync::mpsc;

use super::encode::Encoder;
use super::{CopyFormat, CopyIn, CopyOptions};
use crate::error::SqlError;

/// Bytes of a text, CSV or binary file handed over at a time.
const PIECE: usize = 1 << 20;
/// Rows per Parquet batch.
const BATCH_ROWS: usize = 8192;

/// The columns a Parquet file's rows bring: `columns` (the COPY's list)
/// if given, else all of the file's, as (file column index, name).
pub fn parquet_columns(path: &str, columns: &[String]) -> Result<Vec<(usize, String)>, SqlError> {
    let file = open(path)?;
    let builder = ParquetRecordBatchReaderBuilder::try_new(file).map_err(|e| {
        SqlError::BadCopyData(format!("`{path}` is not a readable Parquet file: {e}"))
    })?;
    let schema = builder.schema();
    let names: Vec<&str> = schema.fields().iter().map(|f| f.name().as_str()).collect();
    if columns.is_empty() {
        return Ok(names
            .iter()
            .enumerate()
            .map(|(i, n)| (i, n.to_string()))
            .collect());
    }
    columns
        .iter()
        .map(|c| {
            names
                .iter()
                .position(|n| n == c)
                .or_else(|| names.iter().position(|n| n.eq_ignore_ascii_case(c)))
                .map(|i| (i, c.clone()))
                .ok_or_else(|| {
                    SqlError::Invalid(format!(
                        "column \"{c}\" is not in the Parquet file `{path}` (its columns: {})",
                        names.join(", ")
                    ))
                })
        })
        .collect()
}

fn open(path: &str) -> Result<File, SqlError> {
    File::open(path)
        .map_err(|e| SqlError::Invalid(format!("could not open `{path}` for COPY: {e}")))
}

/// What the reading thread sends: bytes of COPY data.
type Piece = Result<Vec<u8>, SqlError>;

/// Load the file at `path` into `load` (whose columns are those of
/// `parquet_columns` for a Parquet file); returns the rows loaded.
pub async fn load(
    mut load: CopyIn,
    path: &str,
    parquet: Option<Vec<(usize, String)>>,
) -> Result<u64, SqlError> {
    // Fail before any row is written when the file cannot be opened.
    let file = open(path)?;
    let (tx, mut rx) = mpsc::channel::<Piece>(4);
    let owned = PathBuf::from(path);
    let reader = tokio::task::spawn_blocking(move || match parquet {
        Some(cols) => read_parquet(file, &owned, &cols, &tx),
        None => read_raw(file, &owned, &tx),
    });
    let mut bad_row = None;
    let mut unread = None;
    while let Some(piece) = rx.recv().await {
        match piece {
            // A bad row: `data` wrote the rows before it and says so.
            Ok(bytes) => {
                if let Err(e) = load.data(&bytes).await {
                    bad_row = Some(e);
                    break;
                }
            }
            Err(e) => {
                unread = Some(e);
                break;
            }
        }
    }
    // The reader stops once the channel closes.
    drop(rx);
    let _ = reader.await;
    match (bad_row, unread) {
        (Some(e), _) => Err(e),
        (None, Some(e)) => Err(load.abort(e).await),
        (None, None) => load.finish().await,
    }
}

fn read_raw(mut file: File, path: &std::path::Path, tx: &mpsc::Sender<Piece>) {
    loop {
        let mut buf = vec![0u8; PIECE];
        match file.read(&mut buf) {
            Ok(0) => return,
            Ok(n) => {
                buf.truncate(n);
                if tx.blocking_send(Ok(buf)).is_err() {
                    return;
                }
            }
            Err(e) => {
                let _ = tx.blocking_send(Err(SqlError::Invalid(format!(
                    "reading `{}` for COPY: {e}",
                    path.display()
                ))));
                return;
            }
        }
    }
}

fn read_parquet(
    file: File,
    path: &std::path::Path,
    cols: &[(usize, String)],
    tx: &mpsc::Sender<Piece>,
) {
    let bad = |e: &dyn std::fmt::Display| {
        SqlError::BadCopyData(format!("Parquet file `{}`: {e}", path.display()))
    };
    let reader = (|| {
        let b = ParquetRecordBatchReaderBuilder::try_new(file).map_err(|e| bad(&e))?;
        let mask = ProjectionMask::roots(
            b.parquet_schema(),
            cols.iter().map(|(i, _)| *i).collect::<Vec<_>>(),
        );
        b.with_projection(mask)
            .with_batch_size(BATCH_ROWS)
            .build()
            .map_err(|e| bad(&e))
    })();
    let reader = match reader {
        Ok(r) => r,
        Err(e) => {
            let _ = tx.blocking_send(Err(e));
            return;
        }
    };
    // The reader yields the columns in the file's order; the COPY's
    // columns may be in another.
    let mut in_file: Vec<usize> = cols.iter().map(|(i, _)| *i).collect();
    in_file.sort_unstable();
    let order: Vec<usize> = cols
        .iter()
        .map(|(i, _)| in_file.partition_point(|j| j < i))
        .collect();
    let mut encoder: Option<Encoder> = None;
    for batch in reader {
        let piece = batch.map_err(|e| bad(&e)).and_then(|b| {
            let b = b.project(&order).map_err(|e| bad(&e))?;
            let enc = match &encoder {
                Some(e) => e,
                None => encoder.insert(Encoder::new(
                    CopyOptions::defaults(CopyFormat::Text),
                    &b.schema(),
                )?),
            };
            encode(enc, &b)
        });
        let stop = piece.is_err();
        if tx.blocking_send(piece).is_err() || stop {
            return;
        }
    }
}

/// A batch's rows as COPY text.
fn encode(enc: &Encoder, b: &RecordBatch) -> Result<Vec<u8>, SqlError> {
    let mut out = Vec::with_capacity(b.get_array_memory_size() + b.num_rows());
    enc.batch(b, &mut out)?;
    Ok(out)
}
