//! The shared, closable reference to an open database.

use std::sync::Arc;

use parking_lot::RwLock;

use crate::errors::{BindError, BindResult};

/// What every Python object derived from a `Database` holds. `close()`
/// takes the database out (waiting for calls in flight), so the directory
/// lock is released even while datasets and iterators are still referenced.
pub struct Handle {
    db: RwLock<Option<Arc<silt::Database>>>,
    /// The SQL engine, created by the first `Database.sql` call. It holds a
    /// reference to the database, so `close` drops it first.
    #[cfg(feature = "sql")]
    sql: parking_lot::Mutex<Option<Arc<silt_sql::SqlEngine>>>,
}

impl Handle {
    pub fn new(db: silt::Database) -> Arc<Handle> {
        Arc::new(Handle {
            db: RwLock::new(Some(Arc::new(db))),
            #[cfg(feature = "sql")]
            sql: parking_lot::Mutex::new(None),
        })
    }

    /// Run `f` on the open database; [`BindError::Closed`] once closed. The
    /// database cannot be closed while `f` runs.
    pub fn with<T>(&self, f: impl FnOnce(&Arc<silt::Database>) -> BindResult<T>) -> BindResult<T> {
        let guard = self.db.read();
        match guard.as_ref() {
            Some(db) => f(db),
            None => Err(BindError::closed()),
        }
    }

    /// Run `f` on an open dataset of the database.
    pub fn with_dataset<T>(
        &self,
        name: &str,
        f: impl FnOnce(&Arc<silt::Dataset>) -> BindResult<T>,
    ) -> BindResult<T> {
        self.with(|db| {
            let ds = db.dataset(name)?;
            f(&ds)
        })
    }

    /// Run a SQL script on the database; the result of its last statement.
    #[cfg(feature = "sql")]
    pub fn sql(&self, query: &str) -> BindResult<crate::sql::SqlBatches> {
        let batches = self.sql_engine()?.execute_blocking(query)?;
        Ok(crate::sql::SqlBatches::new(batches))
    }

    /// The database's SQL engine, made by the first call that needs it.
    #[cfg(feature = "sql")]
    pub fn sql_engine(&self) -> BindResult<Arc<silt_sql::SqlEngine>> {
        self.with(|db| {
            let mut slot = self.sql.lock();
            Ok(match slot.as_ref() {
                Some(e) => e.clone(),
                None => {
                    let e = Arc::new(silt_sql::SqlEngine::new(db.clone())?);
                    *slot = Some(e.clone());
                    e
                }
            })
        })
    }

    pub fn is_open(&self) -> bool {
        self.db.read().is_some()
    }

    /// Close: flush, checkpoint, stop background work and release the
    /// directory lock (when no other reference to the core database remains,
    /// which is the case unless a SQL engine still holds one).
    pub fn close(&self) -> BindResult<()> {
        #[cfg(feature = "sql")]
        let engine = self.sql.lock().take();
        #[cfg(feature = "sql")]
        drop(engine);
        let db = self.db.write().take();
        match db {
            Some(db) => {
                let r = db.close();
                drop(db);
                r.map_err(BindError::from)
            }
            None => Ok(()),
        }
    }
}
