//! Errors of the SQL layer.

use datafusion::error::DataFusionError;

/// Everything that can go wrong running SQL against a Silt database.
#[derive(Debug, thiserror::Error)]
pub enum SqlError {
    /// The storage engine refused or failed (duplicate key, invalid record,
    /// unknown dataset or index, I/O...).
    #[error("{0}")]
    Silt(#[from] silt::Error),

    /// DataFusion failed to parse, plan or run the statement.
    #[error("{0}")]
    DataFusion(DataFusionError),

    /// The SQL text could not be parsed.
    #[error("SQL syntax error: {0}")]
    Parse(String),

    /// A statement the SQL layer does not support (with what to do instead).
    #[error("not supported: {0}")]
    Unsupported(String),

    /// A statement that is well-formed but wrong (unknown column, bad option...).
    #[error("{0}")]
    Invalid(String),

    /// One statement of a multi-statement script failed; the statements
    /// before it took effect, the ones after it were not run.
    #[error("statement {index} (`{sql}`): {source}")]
    Statement {
        /// 1-based position of the statement in the script.
        index: usize,
        /// The statement's text (shortened).
        sql: String,
        #[source]
        source: Box<SqlError>,
    },

    /// A statement other than `ROLLBACK` in a transaction block where a
    /// statement failed (PostgreSQL's SQLSTATE 25P02).
    #[error(
        "current transaction is aborted, commands ignored until end of transaction block (a statement failed earlier; run ROLLBACK, or ROLLBACK TO SAVEPOINT)"
    )]
    TxnAborted,

    /// The blocking API was used from inside an async runtime, or the
    /// runtime could not be started.
    #[error("runtime: {0}")]
    Runtime(String),
}

impl From<DataFusionError> for SqlError {
    fn from(e: DataFusionError) -> Self {
        unwrap_df(e)
    }
}

/// Bring a storage error that travelled through DataFusion back to the
/// surface, so that callers see `SqlError::Silt` (e.g. a duplicate key)
/// rather than "External error: ...".
fn unwrap_df(e: DataFusionError) -> SqlError {
    match e {
        DataFusionError::External(inner) => match inner.downcast::<silt::Error>() {
            Ok(se) => SqlError::Silt(*se),
            Err(other) => match other.downcast::<DataFusionError>() {
                Ok(de) => unwrap_df(*de),
                Err(other) => SqlError::DataFusion(DataFusionError::External(other)),
            },
        },
        DataFusionError::Context(ctx, inner) => match unwrap_df(*inner) {
            SqlError::Silt(se) => SqlError::Silt(se),
            SqlError::DataFusion(de) => {
                SqlError::DataFusion(DataFusionError::Context(ctx, Box::new(de)))
            }
            other => other,
        },
        DataFusionError::Shared(arc) => match std::sync::Arc::try_unwrap(arc) {
            Ok(de) => unwrap_df(de),
            Err(arc) => SqlError::DataFusion(DataFusionError::Shared(arc)),
        },
        other => SqlError::DataFusion(other),
    }
}

/// A storage error as a DataFusion error (it is recovered by `From`).
pub(crate) fn silt_err(e: silt::Error) -> DataFusionError {
    DataFusionError::External(Box::new(e))
}
