//! Errors of the server, and how statement errors map to SQLSTATE codes and
//! HTTP statuses.

use std::net::SocketAddr;
use std::time::Duration;

use datafusion::arrow::error::ArrowError;
use datafusion::error::DataFusionError;
use silt_sql::SqlError;

/// Starting, running or stopping the server failed.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    /// A listener could not be bound.
    #[error(
        "cannot listen for {what} on {addr}: {source} (is another server using the port? choose another address)"
    )]
    Bind {
        what: &'static str,
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
    /// The configuration is unusable.
    #[error("{0}")]
    Config(String),
    /// The SQL engine could not be created.
    #[error("{0}")]
    Sql(#[from] SqlError),
    /// Opening or closing the database failed.
    #[error("{0}")]
    Close(#[from] silt::Error),
    /// A socket operation failed.
    #[error("{0}")]
    Io(std::io::Error),
    /// A server task failed.
    #[error("server task: {0}")]
    Task(String),
}

/// Why one statement (or script) failed.
#[derive(Debug, thiserror::Error)]
pub enum QueryError {
    /// The SQL layer or the storage engine refused or failed.
    #[error("{0}")]
    Sql(#[from] SqlError),
    /// Every slot is busy and the queue is full (or the wait for a slot
    /// exceeded the query timeout).
    #[error("server busy: {0}")]
    Busy(String),
    /// The statement ran longer than the configured query timeout.
    #[error("query cancelled: it exceeded the query timeout of {}", fmt_duration(*.0))]
    Timeout(Duration),
    /// The server is shutting down.
    #[error("the server is shutting down")]
    ShuttingDown,
    /// The request itself is malformed (HTTP body, parameters).
    #[error("{0}")]
    BadRequest(String),
}

impl QueryError {
    /// The SQLSTATE code of the error.
    pub fn sqlstate(&self) -> &'static str {
        match self {
            QueryError::Sql(e) => sqlstate(e),
            QueryError::Busy(_) => "53000",
            QueryError::Timeout(_) => "57014",
            QueryError::ShuttingDown => "57P01",
            QueryError::BadRequest(_) => "08P01",
        }
    }

    /// The HTTP status of the error.
    pub fn http_status(&self) -> u16 {
        match self {
            QueryError::Busy(_) | QueryError::ShuttingDown => 503,
            QueryError::Timeout(_) => 504,
            QueryError::BadRequest(_) => 400,
            QueryError::Sql(_) => {
                let s = self.sqlstate();
                if s.starts_with("XX") || s.starts_with("58") || s.starts_with("57") {
                    500
                } else if s == "23505" || s == "40001" {
                    409
                } else if s == "42501" {
                    403
                } else if s == "28000" {
                    401
                } else {
                    400
                }
            }
        }
    }
}

/// A duration as people write it: `250ms`, `30s`, `1.5s`.
pub fn fmt_duration(d: Duration) -> String {
    if d.as_millis() < 1000 {
        format!("{}ms", d.as_millis())
    } else if d.subsec_millis() == 0 {
        format!("{}s", d.as_secs())
    } else {
        format!("{:.3}s", d.as_secs_f64())
    }
}

/// The SQLSTATE code of a SQL-layer error: `42601` syntax, `42P01`
/// undefined table, `42703` undefined column, `23502` not-null violation,
/// `23505` unique violation, `42804` datatype mismatch, `22P02` invalid
/// text for a type, `22003` out of range, `0A000` not supported, `XX000`
/// anything without a better code. A failing row of a multi-row write has
/// its own error's code.
pub fn sqlstate(e: &SqlError) -> &'static str {
    match e {
        SqlError::Statement { source, .. } | SqlError::PartialWrite { source, .. } => {
            sqlstate(source)
        }
        SqlError::NotNull { .. } => "23502",
        SqlError::UniqueViolation { .. } => "23505",
        SqlError::TypeMismatch { .. } => "42804",
        SqlError::InvalidText { .. } => "22P02",
        SqlError::OutOfRange { .. } => "22003",
        SqlError::AffectsRowTwice { .. } => "21000",
        SqlError::ConflictTarget { .. } => "42P10",
        SqlError::Parse(_) => "42601",
        SqlError::Unsupported(_) => "0A000",
        SqlError::Invalid(msg) => {
            if msg.contains("no column") {
                "42703"
            } else {
                "42000"
            }
        }
        SqlError::Silt(se) => silt_state(se),
        SqlError::DataFusion(de) => df_state(de),
        SqlError::Runtime(_) => "XX000",
        SqlError::TxnAborted => "25P02",
        SqlError::PermissionDenied(_) => "42501",
        SqlError::Auth(_) => "28000",
        #[allow(unreachable_patterns)]
        _ => "XX000",
    }
}

fn silt_state(e: &silt::Error) -> &'static str {
    use silt::Error as E;
    match e {
        E::DuplicateKey { .. } => "23505",
        E::NoSuchDataset(_) => "42P01",
        E::DatasetExists(_) => "42P07",
        E::NoSuchIndex { .. } => "42704",
        E::IndexExists { .. } => "42710",
        E::InvalidRecord { .. } => "22000",
        E::Parse { .. } => "22P02",
        E::KeyTooLarge { .. } | E::ValueTooLarge { .. } => "54000",
        E::Config(_) => "22023",
        E::Locked { .. } => "55006",
        E::Closed(_) => "57P01",
        E::Io { .. } => "58030",
        E::Corrupt { .. } => "XX001",
        E::Conflict { .. } => "40001",
        E::NoSuchRole(_) => "42704",
        E::RoleExists(_) => "42710",
        E::TxnTooLarge { .. } => "54000",
        E::Txn(m) if m.contains("savepoint") => "3B001",
        E::Txn(m) if m.contains("transaction blocks") => "25P01",
        E::Txn(_) => "25000",
        #[allow(unreachable_patterns)]
        _ => "XX000",
    }
}

fn df_state(e: &DataFusionError) -> &'static str {
    match e {
        DataFusionError::SQL(..) => "42601",
        DataFusionError::Plan(msg) => {
            let m = msg.to_ascii_lowercase();
            if m.contains("table") && m.contains("not found") {
                "42P01"
            } else if m.contains("no field named")
                || m.contains("column") && m.contains("not found")
            {
                "42703"
            } else if m.contains("placeholder") {
                "42P02"
            } else {
                "42000"
            }
        }
        DataFusionError::SchemaError(se, _) => {
            let m = se.to_string().to_ascii_lowercase();
            if m.contains("no field named") || m.contains("not found") {
                "42703"
            } else {
                "42000"
            }
        }
        DataFusionError::NotImplemented(_) => "0A000",
        DataFusionError::ResourcesExhausted(_) => "53000",
        DataFusionError::ArrowError(ae, _) => match ae.as_ref() {
            ArrowError::DivideByZero => "22012",
            ArrowError::CastError(_) | ArrowError::ParseError(_) => "22P02",
            ArrowError::ArithmeticOverflow(_) => "22003",
            _ => "XX000",
        },
        DataFusionError::External(inner) => {
            if let Some(se) = inner.downcast_ref::<silt::Error>() {
                silt_state(se)
            } else if let Some(de) = inner.downcast_ref::<DataFusionError>() {
                df_state(de)
            } else {
                "XX000"
            }
        }
        DataFusionError::Context(_, inner) => df_state(inner),
        DataFusionError::Diagnostic(_, inner) => df_state(inner),
        DataFusionError::Shared(inner) => df_state(inner),
        DataFusionError::Collection(v) => v.first().map_or("XX000", df_state),
        _ => "XX000",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes() {
        assert_eq!(sqlstate(&SqlError::Parse("x".into())), "42601");
        assert_eq!(
            sqlstate(&SqlError::Silt(silt::Error::NoSuchDataset("t".into()))),
            "42P01"
        );
        assert_eq!(
            sqlstate(&SqlError::Silt(silt::Error::DuplicateKey {
                dataset: "t".into(),
                key: "1".into()
            })),
            "23505"
        );
        assert_eq!(
            sqlstate(&SqlError::Statement {
                index: 2,
                sql: "x".into(),
                source: Box::new(SqlError::Parse("x".into()))
            }),
            "42601"
        );
        assert_eq!(
            sqlstate(&SqlError::DataFusion(DataFusionError::Plan(
                "table 'datafusion.public.nope' not found".into()
            ))),
            "42P01"
        );
        let not_null = SqlError::NotNull {
            table: "t".into(),
            column: "id".into(),
        };
        assert_eq!(sqlstate(&not_null), "23502");
        assert_eq!(
            sqlstate(&SqlError::PartialWrite {
                row: Some(3),
                total: Some(5),
                committed: 2,
                unchanged: 0,
                source: Box::new(not_null),
            }),
            "23502"
        );
        assert_eq!(
            sqlstate(&SqlError::TypeMismatch {
                column: "x".into(),
                column_type: "bigint".into(),
                found: "boolean".into()
            }),
            "42804"
        );
        assert_eq!(
            sqlstate(&SqlError::InvalidText {
                column: "x".into(),
                column_type: "bigint".into(),
                text: "abc".into()
            }),
            "22P02"
        );
        assert_eq!(
            QueryError::Timeout(Duration::from_secs(2)).sqlstate(),
            "57014"
        );
        assert!(
            QueryError::Timeout(Duration::from_millis(1500))
                .to_string()
                .contains("1.500s")
        );
    }
}
