//! Typed errors for the whole core crate. Every error says what was wrong and,
//! where it helps, what to do about it. Nothing in the public API panics on bad
//! input or on a corrupt file: it returns one of these.

use std::path::PathBuf;

/// Result alias used across the crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// An operating-system I/O error, with the path it happened on.
    #[error("I/O error on {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    /// A file on disk failed a checksum or structural check.
    #[error("corrupt file {path}: {reason}")]
    Corrupt { path: PathBuf, reason: String },

    /// An object store request failed for good (after its retries), or
    /// answered something unusable.
    #[error(
        "object storage error on {url}: {reason}; check that the store is reachable and the credentials (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_ENDPOINT_URL) are right"
    )]
    Remote { url: String, reason: String },

    /// Another process replaced an index's MANIFEST in the bucket since
    /// this one last wrote it: two databases write the same prefix.
    #[error(
        "the MANIFEST at {url} was replaced by another writer; two databases are using the same bucket prefix: give each its own (this index stops writing, nothing acknowledged is lost)"
    )]
    RemoteConflict { url: String },

    /// The database directory is held by another process.
    #[error(
        "database {path} is already open in another process (lock file {lock} is held); close that process or open a different directory"
    )]
    Locked { path: PathBuf, lock: PathBuf },

    /// Unique insert found the key already present.
    #[error("duplicate primary key {key} in dataset {dataset}")]
    DuplicateKey { dataset: String, key: String },

    /// A write would give two live records the same value of a unique
    /// index's fields.
    #[error("duplicate value ({}) = ({}) of unique index {index} in dataset {dataset}", .fields.join(", "), .values.join(", "))]
    DuplicateValue {
        dataset: String,
        index: String,
        fields: Vec<String>,
        /// The values, as text.
        values: Vec<String>,
    },

    /// A value past the bounds of the narrower type its field was
    /// declared with ([`crate::Narrow`]): an `integer` out of its range
    /// (`too_long` false), a `varchar(n)` of more than n characters.
    #[error("{}", narrow_text(.field, .declared, *.too_long))]
    Narrowed {
        field: String,
        /// The declared type, as SQL names it (`integer`, `character varying(20)`).
        declared: String,
        too_long: bool,
    },

    /// A record or value did not match what the dataset declares.
    #[error("invalid record{}: {reason}", .field.as_ref().map(|f| format!(" (field `{f}`)")).unwrap_or_default())]
    InvalidRecord {
        field: Option<String>,
        reason: String,
    },

    /// Malformed input text (JSON, CSV, geometry...). `what` names the input.
    #[error("cannot parse {what}: {reason}")]
    Parse { what: String, reason: String },

    /// A key larger than the engine accepts.
    #[error("key of {size} bytes exceeds the limit of {limit} bytes")]
    KeyTooLarge { size: usize, limit: usize },

    /// A value larger than the engine accepts.
    #[error("record of {size} bytes exceeds the limit of {limit} bytes")]
    ValueTooLarge { size: usize, limit: usize },

    #[error(
        "no dataset named `{0}`; list them with `silt stats` or create it with `silt create-dataset`"
    )]
    NoSuchDataset(String),

    #[error("dataset `{0}` already exists")]
    DatasetExists(String),

    #[error("no role named `{0}`")]
    NoSuchRole(String),

    #[error("role `{0}` already exists")]
    RoleExists(String),

    /// A record failed a `CHECK` constraint of its dataset.
    #[error("new row for `{dataset}` violates check constraint `{constraint}`")]
    CheckViolation { dataset: String, constraint: String },

    #[error("no view named `{0}`")]
    NoSuchView(String),

    #[error("a view named `{0}` already exists")]
    ViewExists(String),

    /// Dropping or changing something other objects rely on.
    #[error(
        "cannot {action} `{name}`: {} depend{} on it; drop {} first (or add CASCADE)",
        .dependents.iter().map(|d| format!("view `{d}`")).collect::<Vec<_>>().join(", "),
        if .dependents.len() == 1 { "s" } else { "" },
        if .dependents.len() == 1 { "it" } else { "them" }
    )]
    Dependents {
        action: String,
        name: String,
        dependents: Vec<String>,
    },

    /// A record names, through a foreign key, a record that does not exist.
    #[error(
        "insert or update on dataset `{dataset}` violates foreign key `{constraint}`: key ({}) = ({}) is not present in dataset `{parent}`; insert that record first",
        .key.iter().map(|(f, _)| f.as_str()).collect::<Vec<_>>().join(", "),
        .key.iter().map(|(_, v)| v.as_str()).collect::<Vec<_>>().join(", ")
    )]
    ForeignKeyMissing {
        dataset: String,
        constraint: String,
        parent: String,
        /// The referencing fields and their values, as text.
        key: Vec<(String, String)>,
    },

    /// A delete of a record that records of another dataset still name
    /// through a foreign key that does not cascade.
    #[error(
        "delete on dataset `{dataset}` violates foreign key `{constraint}` on dataset `{child}`: key ({}) = ({}) is still referenced from `{child}`; delete those records first, or make the key ON DELETE CASCADE",
        .key.iter().map(|(f, _)| f.as_str()).collect::<Vec<_>>().join(", "),
        .key.iter().map(|(_, v)| v.as_str()).collect::<Vec<_>>().join(", ")
    )]
    ForeignKeyReferenced {
        dataset: String,
        constraint: String,
        child: String,
        /// The referenced (primary key) fields and their values, as text.
        key: Vec<(String, String)>,
    },

    /// Dropping or emptying a dataset that foreign keys of other datasets
    /// reference.
    #[error(
        "cannot {action} `{name}`: {} reference{} it; drop {} first (or add CASCADE)",
        .constraints.iter().map(|(c, t)| format!("foreign key `{c}` of `{t}`")).collect::<Vec<_>>().join(", "),
        if .constraints.len() == 1 { "s" } else { "" },
        if .constraints.len() == 1 { "it" } else { "them" }
    )]
    Referenced {
        action: String,
        name: String,
        /// (constraint, referencing dataset).
        constraints: Vec<(String, String)>,
    },

    #[error("no index named `{index}` on dataset `{dataset}`")]
    NoSuchIndex { dataset: String, index: String },

    #[error("index `{index}` already exists on dataset `{dataset}`")]
    IndexExists { dataset: String, index: String },

    #[error("sequence \"{0}\" does not exist")]
    NoSuchSequence(String),

    /// A sequence's name is taken by a table, a view or a sequence.
    #[error("relation \"{name}\" already exists ({taken_by})")]
    SequenceExists { name: String, taken_by: String },

    /// A configuration value (merge policy, option...) is not acceptable.
    #[error("invalid configuration: {0}")]
    Config(String),

    /// The database has been closed, or a background task failed and the
    /// engine stopped accepting writes to protect the data.
    #[error("database is closed or unusable: {0}")]
    Closed(String),

    /// A transaction read a record that another transaction changed before
    /// this one committed (or, inserting, found the key taken meanwhile).
    /// Nothing of the transaction was applied; running it again may succeed.
    #[error(
        "transaction conflict on key {key} of dataset `{dataset}`: another transaction changed it after this one read it; nothing was committed, retry the transaction"
    )]
    Conflict { dataset: String, key: String },

    /// Records were checked and encoded under a definition of the dataset
    /// that `ALTER TABLE` has since replaced; nothing of them was written.
    /// Running the statement (or transaction) again prepares them under
    /// the new definition.
    #[error(
        "dataset `{dataset}` was altered after these records were prepared; nothing of them was written, run the statement (or transaction) again"
    )]
    Altered { dataset: String },

    /// A transaction grew past its bound (buffered bytes or writes).
    #[error(
        "transaction too large: {what} would exceed the limit of {limit}; nothing more was buffered, commit in smaller transactions or raise the limit"
    )]
    TxnTooLarge { what: String, limit: u64 },

    /// A transaction was used in a way its state does not allow (a savepoint
    /// that does not exist, a dataset of another database...).
    #[error("transaction: {0}")]
    Txn(String),
}

impl Error {
    /// Wrap an `std::io::Error` with the path it concerns.
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Io {
            path: path.into(),
            source,
        }
    }

    pub fn corrupt(path: impl Into<PathBuf>, reason: impl Into<String>) -> Self {
        Error::Corrupt {
            path: path.into(),
            reason: reason.into(),
        }
    }

    pub fn invalid(field: Option<&str>, reason: impl Into<String>) -> Self {
        Error::InvalidRecord {
            field: field.map(str::to_owned),
            reason: reason.into(),
        }
    }
}

fn narrow_text(field: &str, declared: &str, too_long: bool) -> String {
    if too_long {
        format!("value too long for type {declared} (field `{field}`)")
    } else {
        format!("{declared} out of range (field `{field}`)")
    }
}
