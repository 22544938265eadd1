//! Errors of the SQL layer.

use datafusion::error::DataFusionError;

/// Everything that can go wrong running SQL against a Silt database.
#[derive(Debug, thiserror::Error)]
pub enum SqlError {
    /// The storage engine refused or failed (duplicate key, invalid record,
    /// unknown dataset or index, I/O...).
    #[error("{0}")]
    Silt(silt::Error),

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

    /// `FETCH` or `CLOSE` of a cursor the session does not have (SQLSTATE
    /// 34000).
    #[error("cursor `{0}` does not exist")]
    NoCursor(String),

    /// The session's role lacks a privilege the statement needs, or the
    /// statement uses server files that are not allowed (SQLSTATE 42501).
    #[error("{0}")]
    PermissionDenied(String),

    /// The session's role cannot be used (SQLSTATE 28000).
    #[error("{0}")]
    Auth(String),

    /// The blocking API was used from inside an async runtime, or the
    /// runtime could not be started.
    #[error("runtime: {0}")]
    Runtime(String),

    /// A NULL for a column that cannot hold one: a primary-key column or
    /// one declared `NOT NULL` (SQLSTATE 23502).
    #[error(
        "null value in column \"{column}\" of relation \"{table}\" violates not-null constraint"
    )]
    NotNull { table: String, column: String },

    /// A row whose primary key, or value of a unique index, is already
    /// taken (SQLSTATE 23505). The
    /// message is PostgreSQL's; the key is in [`SqlError::detail`] (and,
    /// in parentheses, in the displayed text).
    #[error("duplicate key value violates unique constraint \"{constraint}\" ({})", key_detail(.columns, .values))]
    UniqueViolation {
        table: String,
        /// `<table>_pkey`, or the unique index's name.
        constraint: String,
        /// The primary-key (or unique index's) columns.
        columns: Vec<String>,
        /// The key's values, as text.
        values: Vec<String>,
    },

    /// A write that breaks a foreign key (SQLSTATE 23503), in
    /// PostgreSQL's words; the key is in [`SqlError::detail`].
    #[error("{message} ({detail})")]
    ForeignKeyViolation { message: String, detail: String },

    /// A value whose type cannot be assigned to a column (SQLSTATE 42804).
    #[error("column \"{column}\" is of type {column_type} but expression is of type {found}")]
    TypeMismatch {
        column: String,
        column_type: String,
        found: String,
    },

    /// Text that does not read as a value of the column's type (SQLSTATE 22P02).
    #[error("invalid input syntax for type {column_type}: \"{text}\" (column \"{column}\")")]
    InvalidText {
        column: String,
        column_type: String,
        text: String,
    },

    /// Text for an array column that is not PostgreSQL's array text
    /// (SQLSTATE 22P02); `reason` starts `malformed array literal`.
    #[error("{reason} (column \"{column}\")")]
    MalformedArray { column: String, reason: String },

    /// A number outside the column type's range (SQLSTATE 22003).
    #[error("{value} is out of range for type {column_type} (column \"{column}\")")]
    OutOfRange {
        column: String,
        column_type: String,
        value: String,
    },

    /// `ON CONFLICT DO UPDATE` would change the same row twice: two proposed
    /// rows have the same key (SQLSTATE 21000).
    #[error("ON CONFLICT DO UPDATE command cannot affect row a second time: two rows to insert have the key ({})=({}); make the keys of the rows unique", .columns.join(", "), .values.join(", "))]
    AffectsRowTwice {
        columns: Vec<String>,
        values: Vec<String>,
    },

    /// The `ON CONFLICT` target is not the primary key, the only unique
    /// constraint a table has (SQLSTATE 42P10).
    #[error("there is no unique or exclusion constraint matching the ON CONFLICT specification: {target} is not the primary key of `{table}` ({})", .primary_key.join(", "))]
    ConflictTarget {
        table: String,
        target: String,
        primary_key: Vec<String>,
    },

    /// `PREPARE` of a name the session already prepared (SQLSTATE 42P05).
    #[error("prepared statement \"{0}\" already exists; DEALLOCATE {0} first")]
    DuplicatePrepared(String),

    /// `EXECUTE` or `DEALLOCATE` of a name the session has not prepared
    /// (SQLSTATE 26000).
    #[error("prepared statement \"{0}\" does not exist in this session")]
    NoSuchPrepared(String),

    /// A value for a `GENERATED ALWAYS` identity column (SQLSTATE 428C9):
    /// an `INSERT` without `OVERRIDING SYSTEM VALUE`, or an `UPDATE`.
    #[error("{}", generated_always_text(.column, *.update))]
    GeneratedAlways { column: String, update: bool },

    /// An object not in the state a statement needs (SQLSTATE 55000): an
    /// identity change of a column that is not, or is already, an
    /// identity column, or one that is nullable or has a default.
    #[error("{0}")]
    NotInPrerequisiteState(String),

    /// `COPY` data that does not follow its format: a row with too few
    /// or too many fields, a bad binary header, invalid UTF-8 (SQLSTATE
    /// 22P04).
    #[error("bad COPY data: {0}")]
    BadCopyData(String),

    /// A row of a multi-row write failed. Every row is its own
    /// transaction: the rows before it that were written stay committed,
    /// the rows after it were not attempted.
    #[error("{}", partial_text(*.row, *.total, *.committed, *.unchanged, &.source.to_string()))]
    PartialWrite {
        /// 1-based number of the failing row; `None` when reading the rows
        /// to write failed (after `committed + unchanged` rows).
        row: Option<u64>,
        /// How many rows the statement had, when known.
        total: Option<u64>,
        /// Rows written (inserted or updated) and committed before the failure.
        committed: u64,
        /// Rows before the failure left as they were (`ON CONFLICT DO
        /// NOTHING`, or `DO UPDATE ... WHERE` false).
        unchanged: u64,
        #[source]
        source: Box<SqlError>,
    },
}

fn generated_always_text(column: &str, update: bool) -> String {
    if update {
        format!(
            "column \"{column}\" is an identity column defined as GENERATED ALWAYS: an UPDATE cannot set it"
        )
    } else {
        format!(
            "cannot insert a non-DEFAULT value into column \"{column}\": it is an identity column defined as GENERATED ALWAYS; leave it out, write DEFAULT, or say INSERT ... OVERRIDING SYSTEM VALUE"
        )
    }
}

/// PostgreSQL's DETAIL of a unique violation: `Key (id)=(1) already exists.`
/// `(a, b)=(1, 2)`, as PostgreSQL shows a key.
fn fk_key(key: &[(String, String)]) -> String {
    let (f, v): (Vec<&str>, Vec<&str>) = key.iter().map(|(f, v)| (f.as_str(), v.as_str())).unzip();
    format!("({})=({})", f.join(", "), v.join(", "))
}

fn key_detail(columns: &[String], values: &[String]) -> String {
    format!(
        "Key ({})=({}) already exists.",
        columns.join(", "),
        values.join(", ")
    )
}

fn partial_text(
    row: Option<u64>,
    total: Option<u64>,
    committed: u64,
    unchanged: u64,
    source: &str,
) -> String {
    let rows = |n: u64| {
        if n == 1 {
            "1 row".to_owned()
        } else {
            format!("{n} rows")
        }
    };
    let head = match (row, total) {
        (Some(r), Some(t)) => format!("row {r} of {t} failed"),
        (Some(r), None) => format!("row {r} failed"),
        (None, _) => format!(
            "reading the rows to write failed after {}",
            rows(committed + unchanged)
        ),
    };
    let tail = match (committed, unchanged) {
        (0, 0) => "no row was written".to_owned(),
        (c, 0) if row.is_some_and(|r| r == c + 1) => {
            format!(
                "the {} before it {} committed",
                rows(c),
                if c == 1 { "was" } else { "were" }
            )
        }
        (c, 0) => format!(
            "{} before it {} committed",
            rows(c),
            if c == 1 { "was" } else { "were" }
        ),
        (0, u) => format!(
            "no row was written ({} left unchanged by ON CONFLICT)",
            rows(u)
        ),
        (c, u) => format!(
            "{} before it {} committed, {} left unchanged by ON CONFLICT",
            rows(c),
            if c == 1 { "was" } else { "were" },
            rows(u)
        ),
    };
    format!("{head}: {source}; {tail}")
}

/// A storage error in SQL's terms: a unique index's duplicate value is a
/// unique violation naming the index.
impl From<silt::Error> for SqlError {
    fn from(e: silt::Error) -> Self {
        match e {
            silt::Error::DuplicateValue {
                dataset,
                index,
                fields,
                values,
            } => SqlError::UniqueViolation {
                table: dataset,
                constraint: index,
                columns: fields,
                values,
            },
            silt::Error::ForeignKeyMissing {
                dataset,
                constraint,
                parent,
                key,
            } => SqlError::ForeignKeyViolation {
                message: format!(
                    "insert or update on table \"{dataset}\" violates foreign key constraint \"{constraint}\""
                ),
                detail: format!("Key {} is not present in table \"{parent}\".", fk_key(&key)),
            },
            silt::Error::ForeignKeyReferenced {
                dataset,
                constraint,
                child,
                key,
            } => SqlError::ForeignKeyViolation {
                message: format!(
                    "update or delete on table \"{dataset}\" violates foreign key constraint \"{constraint}\" on table \"{child}\""
                ),
                detail: format!(
                    "Key {} is still referenced from table \"{child}\".",
                    fk_key(&key)
                ),
            },
            other => SqlError::Silt(other),
        }
    }
}

impl SqlError {
    /// PostgreSQL's DETAIL for this error, if it has one (the key of a
    /// unique violation), looking through statement and row wrappers.
    pub fn detail(&self) -> Option<String> {
        match self {
            SqlError::UniqueViolation {
                columns, values, ..
            } => Some(key_detail(columns, values)),
            SqlError::ForeignKeyViolation { detail, .. } => Some(detail.clone()),
            SqlError::Statement { source, .. } | SqlError::PartialWrite { source, .. } => {
                source.detail()
            }
            _ => None,
        }
    }

    /// The message without the detail (PostgreSQL's primary message):
    /// `to_string()` shows the detail too, a PostgreSQL client gets it as a
    /// separate field.
    pub fn message(&self) -> String {
        match self {
            SqlError::UniqueViolation { constraint, .. } => {
                format!("duplicate key value violates unique constraint \"{constraint}\"")
            }
            SqlError::ForeignKeyViolation { message, .. } => message.clone(),
            SqlError::Statement { index, sql, source } => {
                format!("statement {index} (`{sql}`): {}", source.message())
            }
            SqlError::PartialWrite {
                row,
                total,
                committed,
                unchanged,
                source,
            } => partial_text(*row, *total, *committed, *unchanged, &source.message()),
            other => other.to_string(),
        }
    }

    /// The storage engine's error behind this one, if any (looking through
    /// statement and row wrappers).
    pub fn storage_error(&self) -> Option<&silt::Error> {
        match self {
            SqlError::Silt(e) => Some(e),
            SqlError::Statement { source, .. } | SqlError::PartialWrite { source, .. } => {
                source.storage_error()
            }
            _ => None,
        }
    }

    /// The innermost error, through statement and row wrappers.
    pub fn root(&self) -> &SqlError {
        match self {
            SqlError::Statement { source, .. } | SqlError::PartialWrite { source, .. } => {
                source.root()
            }
            other => other,
        }
    }
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
            Ok(se) => SqlError::from(*se),
            Err(other) => match other.downcast::<SqlError>() {
                Ok(sql) => *sql,
                Err(other) => match other.downcast::<DataFusionError>() {
                    Ok(de) => unwrap_df(*de),
                    Err(other) => SqlError::DataFusion(DataFusionError::External(other)),
                },
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

/// An SQL-layer error as a DataFusion error (it is recovered by `From`).
pub(crate) fn sql_err(e: SqlError) -> DataFusionError {
    DataFusionError::External(Box::new(e))
}
