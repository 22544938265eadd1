//! The schemas of the default catalog: `public` (every dataset as a
//! table, beside what is registered: views, in-memory tables; names it
//! does not have resolve in `pg_catalog`, as PostgreSQL searches it) and
//! `documents` (every dataset with its undeclared fields as one JSON
//! column).

use std::collections::HashMap;
use std::sync::Arc;

use async_trait::async_trait;
use datafusion::catalog::SchemaProvider;
use datafusion::datasource::TableProvider;
use datafusion::error::{DataFusionError, Result as DfResult};
use parking_lot::RwLock;
use silt::Database;

use crate::table::SiltTable;
use crate::{error, pg_catalog, views};

/// The default schema: the database's datasets, plus whatever else is
/// registered (views, in-memory tables).
pub(crate) struct SiltSchema {
    pub(crate) db: Arc<Database>,
    pub(crate) extra: RwLock<HashMap<String, Arc<dyn TableProvider>>>,
    /// Recorded views that did not plan at open.
    pub(crate) broken: views::Broken,
    /// Where unqualified names it does not have resolve next, as
    /// PostgreSQL searches `pg_catalog`.
    pub(crate) pg: Arc<pg_catalog::PgCatalogSchema>,
}

impl std::fmt::Debug for SiltSchema {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SiltSchema({})", self.db.path().display())
    }
}

#[async_trait]
impl SchemaProvider for SiltSchema {
    fn table_names(&self) -> Vec<String> {
        let mut v = self.db.dataset_names();
        v.extend(self.extra.read().keys().cloned());
        v
    }

    async fn table(&self, name: &str) -> DfResult<Option<Arc<dyn TableProvider>>> {
        if let Some(t) = self.extra.read().get(name) {
            return Ok(Some(t.clone()));
        }
        if let Some(why) = self.broken.read().get(name) {
            return Err(views::broken_error(name, why));
        }
        match self.db.dataset(name) {
            Ok(ds) => Ok(Some(Arc::new(SiltTable::new(ds)))),
            Err(silt::Error::NoSuchDataset(_)) => self.pg.relation(name),
            Err(e) => Err(error::silt_err(e)),
        }
    }

    fn register_table(
        &self,
        name: String,
        table: Arc<dyn TableProvider>,
    ) -> DfResult<Option<Arc<dyn TableProvider>>> {
        if self.db.dataset_names().contains(&name) {
            return Err(DataFusionError::Plan(format!(
                "a Silt dataset named `{name}` exists; choose another name"
            )));
        }
        Ok(self.extra.write().insert(name, table))
    }

    fn deregister_table(&self, name: &str) -> DfResult<Option<Arc<dyn TableProvider>>> {
        Ok(self.extra.write().remove(name))
    }

    fn table_exist(&self, name: &str) -> bool {
        self.extra.read().contains_key(name) || self.db.dataset_names().iter().any(|n| n == name)
    }
}

/// The document view (`documents.<table>`): each dataset with its
/// undeclared fields as one JSON column ([`SiltTable::documents`]).
pub(crate) struct DocumentsSchema {
    pub(crate) db: Arc<Database>,
}

impl std::fmt::Debug for DocumentsSchema {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "DocumentsSchema({})", self.db.path().display())
    }
}

#[async_trait]
impl SchemaProvider for DocumentsSchema {
    fn table_names(&self) -> Vec<String> {
        self.db.dataset_names()
    }

    async fn table(&self, name: &str) -> DfResult<Option<Arc<dyn TableProvider>>> {
        match self.db.dataset(name) {
            Ok(ds) => Ok(Some(Arc::new(SiltTable::documents(ds)))),
            Err(silt::Error::NoSuchDataset(_)) => Ok(None),
            Err(e) => Err(error::silt_err(e)),
        }
    }

    fn table_exist(&self, name: &str) -> bool {
        self.db.dataset_names().iter().any(|n| n == name)
    }
}
