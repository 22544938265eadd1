//! Errors of the server, and how statement errors map to SQLSTATE codes and
//! HTTP statuses.

use std::net::SocketAddr;
use std::time::Duration;

use datafusion::arrow::error::ArrowError;
use datafusion::error::DataFusionError;
use silt_sql::SqlError;
use silt_sql::bounds::{LimitExceeded, fmt_bytes};

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
    /// The statement ran longer than its timeout (the session's
    /// `statement_timeout`, at most the server's `--timeout`).
    #[error("canceling statement due to statement timeout: it ran longer than {} (SET statement_timeout to lower it; the server's --timeout caps it)", fmt_duration(*.0))]
    Timeout(Duration),
    /// A cancel request stopped the statement.
    #[error("canceling statement due to user request")]
    Cancelled,
    /// The statement ran into one of the server's resource limits.
    #[error("{0}")]
    Limit(Limit),
    /// A setting no client may change.
    #[error("{0}")]
    Forbidden(String),
    /// A server task failed (a bug).
    #[error("internal error: {0}")]
    Internal(String),
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
            QueryError::Timeout(_) | QueryError::Cancelled => "57014",
            QueryError::Limit(l) => l.sqlstate(),
            QueryError::Internal(_) => "XX000",
            QueryError::Forbidden(_) => "42501",
            QueryError::ShuttingDown => "57P01",
            QueryError::BadRequest(_) => "08P01",
        }
    }

    /// The HTTP status of the error.
    pub fn http_status(&self) -> u16 {
        match self {
            QueryError::Busy(_) | QueryError::ShuttingDown | QueryError::Cancelled => 503,
            QueryError::Limit(Limit::Sql(LimitExceeded::ServerMemory { .. })) => 503,
            QueryError::Limit(_) => 400,
            QueryError::Internal(_) => 500,
            QueryError::Forbidden(_) => 403,
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

/// A resource limit a statement ran into; the message names the flag that
/// sets it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Limit {
    /// Memory or value size (from the SQL layer, see [`silt_sql::bounds`]).
    Sql(LimitExceeded),
    /// More result rows than `--max-result-rows`.
    ResultRows { limit: u64 },
    /// More result bytes than `--max-result-bytes` (after `rows` rows).
    ResultBytes { limit: usize, rows: u64 },
}

impl Limit {
    /// `53200` (out of memory) for memory, `54000` (program limit
    /// exceeded) for sizes.
    pub fn sqlstate(&self) -> &'static str {
        match self {
            Limit::Sql(LimitExceeded::QueryMemory { .. } | LimitExceeded::ServerMemory { .. }) => {
                "53200"
            }
            _ => "54000",
        }
    }
}

impl std::fmt::Display for Limit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Limit::Sql(LimitExceeded::QueryMemory { limit }) => write!(
                f,
                "query needs more than {} of memory (limit --max-query-memory); sorts and aggregates spill to disk, joins and the rest cannot: narrow the query or raise the limit",
                fmt_bytes(*limit)
            ),
            Limit::Sql(LimitExceeded::ServerMemory { limit }) => write!(
                f,
                "out of memory for queries: the statements running now hold all of it ({}, limit --max-server-memory); retry later",
                fmt_bytes(*limit)
            ),
            Limit::Sql(LimitExceeded::Value {
                function,
                what,
                size,
                limit,
            }) => {
                let whose = if *what == "a value" {
                    "for one value"
                } else {
                    "for the values of one batch of rows (the larger of --max-value-bytes and --max-query-memory)"
                };
                write!(
                    f,
                    "{function} would build {what} of {}, more than the limit of {} {whose} built by a function (--max-value-bytes)",
                    fmt_bytes(*size),
                    fmt_bytes(*limit)
                )
            }
            Limit::ResultRows { limit } => write!(
                f,
                "the result has more than {limit} rows (limit --max-result-rows): add a LIMIT or narrow the query"
            ),
            Limit::ResultBytes { limit, rows } => write!(
                f,
                "the result exceeds {} (limit --max-result-bytes) after {rows} rows: add a LIMIT, select fewer columns, or narrow the query",
                fmt_bytes(*limit)
            ),
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
        SqlError::ForeignKeyViolation { .. } => "23503",
        SqlError::TypeMismatch { .. } => "42804",
        SqlError::InvalidText { .. } | SqlError::MalformedArray { .. } => "22P02",
        SqlError::BadCopyData(_) => "22P04",
        SqlError::GeneratedAlways { .. } => "428C9",
        SqlError::NotInPrerequisiteState(_) => "55000",
        SqlError::DuplicatePrepared(_) => "42P05",
        SqlError::NoSuchPrepared(_) => "26000",
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
        SqlError::NoCursor(_) => "34000",
        SqlError::PermissionDenied(_) => "42501",
        SqlError::Auth(_) => "28000",
        #[allow(unreachable_patterns)]
        _ => "XX000",
    }
}

fn silt_state(e: &silt::Error) -> &'static str {
    use silt::Error as E;
    match e {
        E::DuplicateKey { .. } | E::DuplicateValue { .. } => "23505",
        E::ForeignKeyMissing { .. } | E::ForeignKeyReferenced { .. } => "23503",
        E::Referenced { .. } => "2BP01",
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
        E::Conflict { .. } | E::Altered { .. } => "40001",
        E::Narrowed { too_long: true, .. } => "22001",
        E::Narrowed { .. } => "22003",
        E::NoSuchRole(_) => "42704",
        E::RoleExists(_) => "42710",
        E::CheckViolation { .. } => "23514",
        E::NoSuchView(_) | E::NoSuchSequence(_) => "42P01",
        E::ViewExists(_) | E::SequenceExists { .. } => "42P07",
        E::Dependents { .. } => "2BP01",
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
        DataFusionError::ResourcesExhausted(_) => "53200",
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
            } else if let Some(l) = inner.downcast_ref::<LimitExceeded>() {
                Limit::Sql(l.clone()).sqlstate()
            } else {
                "XX000"
            }
        }
        DataFusionError::Execution(msg)
            if msg.starts_with("Prepared statement") && msg.ends_with("does not exist") =>
        {
            "26000"
        }
        // The sequence functions' errors (`silt_sql::sequences`).
        DataFusionError::Execution(msg)
            if msg.starts_with("relation \"") && msg.contains("\" does not exist") =>
        {
            "42P01"
        }
        DataFusionError::Execution(msg) if msg.contains("is not yet defined in this session") => {
            "55000"
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
        let unknown = DataFusionError::Execution("Prepared statement 'q' does not exist".into());
        assert_eq!(sqlstate(&SqlError::DataFusion(unknown)), "26000");
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
