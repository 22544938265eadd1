//! Errors of the bindings and their mapping to the Python exception classes
//! of `siltdb._errors` (the hierarchy is defined in Python so that classes
//! can also derive from `ValueError`, `LookupError` or `OSError`).

use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::PyModule;

/// Everything a binding call can fail with before it becomes a Python
/// exception. `Send`, so it can leave a closure that ran without the GIL.
#[derive(Debug, thiserror::Error)]
pub enum BindError {
    /// An error of the storage engine.
    #[error(transparent)]
    Silt(#[from] silt::Error),
    /// Bad input detected by the bindings themselves, optionally naming a field.
    #[error("{reason}")]
    InvalidInput {
        field: Option<String>,
        reason: String,
    },
    /// A bad option value (durability, merge policy, index kind, ...).
    #[error("{0}")]
    Config(String),
    /// The `Database` (or the handle a dataset came from) was closed.
    #[error("{0}")]
    Closed(String),
    /// A SQL statement failed (parse, plan, run, or the storage engine).
    #[cfg(feature = "sql")]
    #[error(transparent)]
    Sql(#[from] silt_sql::SqlError),
    /// A Rust panic caught at the boundary: a bug, reported instead of
    /// crossing into Python.
    #[error("internal error (please report it): {0}")]
    Internal(String),
}

impl BindError {
    pub fn invalid(reason: impl Into<String>) -> Self {
        BindError::InvalidInput {
            field: None,
            reason: reason.into(),
        }
    }

    pub fn closed() -> Self {
        BindError::Closed("the database is closed; open it again with siltdb.connect(path)".into())
    }
}

pub type BindResult<T> = Result<T, BindError>;

static ERRORS_MODULE: PyOnceLock<Py<PyModule>> = PyOnceLock::new();

/// An exception of class `siltdb._errors.<class>` with `message`, and extra
/// attributes set on the instance.
pub fn make_error(
    py: Python<'_>,
    class: &str,
    message: &str,
    attrs: &[(&str, Py<PyAny>)],
) -> PyErr {
    let build = || -> PyResult<PyErr> {
        let module = ERRORS_MODULE.get_or_try_init(py, || {
            PyModule::import(py, "siltdb._errors").map(Bound::unbind)
        })?;
        let cls = module.bind(py).getattr(class)?;
        let exc = cls.call1((message,))?;
        for (name, value) in attrs {
            exc.setattr(*name, value.bind(py))?;
        }
        Ok(PyErr::from_value(exc))
    };
    // If the Python side of the package cannot be imported, still raise
    // something meaningful rather than losing the message.
    build().unwrap_or_else(|e| e)
}

fn text(py: Python<'_>, s: &str) -> Py<PyAny> {
    pyo3::types::PyString::new(py, s).into_any().unbind()
}

fn opt_text(py: Python<'_>, s: Option<&str>) -> Py<PyAny> {
    match s {
        Some(s) => text(py, s),
        None => py.None(),
    }
}

/// The Python exception for a core error.
pub fn silt_to_py(py: Python<'_>, e: &silt::Error) -> PyErr {
    silt_to_py_msg(py, e, &e.to_string())
}

/// The Python exception for a core error, with another message (the core
/// error wrapped by a SQL statement error keeps its class and attributes).
fn silt_to_py_msg(py: Python<'_>, e: &silt::Error, msg: &str) -> PyErr {
    use silt::Error as E;
    let msg = msg.to_owned();
    match e {
        E::Io { path, .. } => make_error(
            py,
            "StorageIOError",
            &msg,
            &[("path", text(py, &path.display().to_string()))],
        ),
        E::Corrupt { path, .. } => make_error(
            py,
            "CorruptionError",
            &msg,
            &[("path", text(py, &path.display().to_string()))],
        ),
        E::Remote { url, .. } | E::RemoteConflict { url } => {
            make_error(py, "StorageIOError", &msg, &[("path", text(py, url))])
        }
        E::Locked { path, .. } => make_error(
            py,
            "LockedError",
            &msg,
            &[("path", text(py, &path.display().to_string()))],
        ),
        E::DuplicateKey { dataset, key } => make_error(
            py,
            "DuplicateKeyError",
            &msg,
            &[("dataset", text(py, dataset)), ("key", text(py, key))],
        ),
        E::DuplicateValue { dataset, index, .. } => make_error(
            py,
            "DuplicateKeyError",
            &msg,
            &[("dataset", text(py, dataset)), ("index", text(py, index))],
        ),
        E::InvalidRecord { field, .. } => make_error(
            py,
            "InvalidInputError",
            &msg,
            &[("field", opt_text(py, field.as_deref()))],
        ),
        E::Parse { .. } => make_error(py, "InvalidInputError", &msg, &[("field", py.None())]),
        E::KeyTooLarge { .. } | E::ValueTooLarge { .. } => {
            make_error(py, "TooLargeError", &msg, &[("field", py.None())])
        }
        E::NoSuchDataset(name) => make_error(
            py,
            "NotFoundError",
            &msg,
            &[("dataset", text(py, name)), ("index", py.None())],
        ),
        E::NoSuchIndex { dataset, index } => make_error(
            py,
            "NotFoundError",
            &msg,
            &[("dataset", text(py, dataset)), ("index", text(py, index))],
        ),
        E::DatasetExists(name) => make_error(
            py,
            "AlreadyExistsError",
            &msg,
            &[("dataset", text(py, name)), ("index", py.None())],
        ),
        E::NoSuchView(_) | E::NoSuchSequence(_) => make_error(
            py,
            "NotFoundError",
            &msg,
            &[("dataset", py.None()), ("index", py.None())],
        ),
        E::ViewExists(_) | E::SequenceExists { .. } => make_error(
            py,
            "AlreadyExistsError",
            &msg,
            &[("dataset", py.None()), ("index", py.None())],
        ),
        E::Dependents { .. } => make_error(py, "ConfigError", &msg, &[]),
        E::CheckViolation { .. } => {
            make_error(py, "InvalidInputError", &msg, &[("field", py.None())])
        }
        E::NoSuchRole(_) => make_error(
            py,
            "NotFoundError",
            &msg,
            &[("dataset", py.None()), ("index", py.None())],
        ),
        E::RoleExists(_) => make_error(
            py,
            "AlreadyExistsError",
            &msg,
            &[("dataset", py.None()), ("index", py.None())],
        ),
        E::IndexExists { dataset, index } => make_error(
            py,
            "AlreadyExistsError",
            &msg,
            &[("dataset", text(py, dataset)), ("index", text(py, index))],
        ),
        E::Config(_) => make_error(py, "ConfigError", &msg, &[]),
        E::Closed(_) => make_error(py, "ClosedError", &msg, &[]),
        E::Conflict { dataset, key } => make_error(
            py,
            "ConflictError",
            &msg,
            &[("dataset", text(py, dataset)), ("key", text(py, key))],
        ),
        E::Narrowed { field, .. } => {
            make_error(py, "InvalidInputError", &msg, &[("field", text(py, field))])
        }
        E::Altered { dataset } => make_error(
            py,
            "ConflictError",
            &msg,
            &[("dataset", text(py, dataset)), ("key", py.None())],
        ),
        E::TxnTooLarge { .. } => make_error(py, "TooLargeError", &msg, &[]),
        E::Txn(_) => make_error(py, "TransactionError", &msg, &[]),
        E::ForeignKeyMissing {
            dataset,
            constraint,
            parent: other,
            ..
        }
        | E::ForeignKeyReferenced {
            dataset,
            constraint,
            child: other,
            ..
        } => make_error(
            py,
            "ForeignKeyError",
            &msg,
            &[
                ("dataset", text(py, dataset)),
                ("constraint", text(py, constraint)),
                ("other", text(py, other)),
            ],
        ),
        E::Referenced { .. } => make_error(py, "ConfigError", &msg, &[]),
    }
}

/// The Python exception for a binding error.
pub fn to_py(py: Python<'_>, e: &BindError) -> PyErr {
    match e {
        BindError::Silt(e) => silt_to_py(py, e),
        BindError::InvalidInput { field, reason } => {
            let msg = match field {
                Some(f) => format!("invalid record (field `{f}`): {reason}"),
                None => reason.clone(),
            };
            make_error(
                py,
                "InvalidInputError",
                &msg,
                &[("field", opt_text(py, field.as_deref()))],
            )
        }
        BindError::Config(m) => make_error(py, "ConfigError", m, &[]),
        BindError::Closed(m) => make_error(py, "ClosedError", m, &[]),
        BindError::Internal(_) => make_error(py, "InternalError", &e.to_string(), &[]),
        #[cfg(feature = "sql")]
        BindError::Sql(se) => sql_to_py(py, se),
    }
}

/// The Python exception for a SQL error: storage errors keep their class
/// (`DuplicateKeyError`, `NotFoundError`, ...), a unique violation is a
/// `DuplicateKeyError`; everything else is `SqlError`.
#[cfg(feature = "sql")]
fn sql_to_py(py: Python<'_>, e: &silt_sql::SqlError) -> PyErr {
    match e.root() {
        silt_sql::SqlError::Silt(se) => silt_to_py_msg(py, se, &e.to_string()),
        silt_sql::SqlError::UniqueViolation { table, values, .. } => {
            let key = match values.as_slice() {
                [one] => one.clone(),
                many => format!("({})", many.join(", ")),
            };
            make_error(
                py,
                "DuplicateKeyError",
                &e.to_string(),
                &[("dataset", text(py, table)), ("key", text(py, &key))],
            )
        }
        silt_sql::SqlError::ForeignKeyViolation { .. } => {
            make_error(py, "ForeignKeyError", &e.to_string(), &[])
        }
        _ => make_error(py, "SqlError", &e.to_string(), &[]),
    }
}

/// Convert a `Result` of the bindings to a `PyResult`.
pub trait IntoPyResult<T> {
    fn py_err(self, py: Python<'_>) -> PyResult<T>;
}

impl<T> IntoPyResult<T> for BindResult<T> {
    fn py_err(self, py: Python<'_>) -> PyResult<T> {
        self.map_err(|e| to_py(py, &e))
    }
}

impl<T> IntoPyResult<T> for silt::Result<T> {
    fn py_err(self, py: Python<'_>) -> PyResult<T> {
        self.map_err(|e| silt_to_py(py, &e))
    }
}

/// Run storage work without the GIL, turning a panic into
/// [`BindError::Internal`] so that none crosses into Python.
pub fn detached<T, F>(py: Python<'_>, f: F) -> PyResult<T>
where
    F: FnOnce() -> BindResult<T> + Send,
    T: Send,
{
    let r = py.detach(|| {
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).unwrap_or_else(|p| {
            let what = p
                .downcast_ref::<&str>()
                .map(|s| (*s).to_owned())
                .or_else(|| p.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "a panic without a message".to_owned());
            Err(BindError::Internal(what))
        })
    });
    r.py_err(py)
}
