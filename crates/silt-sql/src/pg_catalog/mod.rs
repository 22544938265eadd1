//! PostgreSQL's system catalog, as the clients that reach Silt through
//! `silt serve` read it: psql's backslash commands, drivers' type and
//! schema lookups, ORMs' reflection, GUI tools' browsers.
//!
//! - [`snapshot`]: what there is (schemas, tables, views, indexes,
//!   columns, roles), read from the database and the SQL session's catalog
//!   at the moment a statement plans, with stable oids.
//! - [`columns`]: the columns of 74 PostgreSQL 15 catalog tables and views;
//!   [`table`] makes Arrow batches of them; [`rows`] fills the ones Silt
//!   has something to say in (`pg_class`, `pg_attribute`, `pg_index`,
//!   `pg_type`, `pg_namespace`, `pg_roles`, `pg_settings`...). The rest are
//!   empty, with their columns, so queries joining them plan.
//! - [`functions`]: `version()`, `format_type`, `pg_get_indexdef`...
//! - [`rewrite`]: PostgreSQL syntax in clients' catalog queries that
//!   DataFusion does not plan, rewritten first.
//!
//! Unqualified catalog names (`FROM pg_class`) resolve as in PostgreSQL,
//! where `pg_catalog` is always searched: the default schema falls back
//! to this one for names it does not have.

pub mod columns;
pub mod correlate;
pub mod expand;
pub mod functions;
pub mod information_schema;
pub mod rewrite;
pub mod rows;
pub mod single;
pub mod snapshot;
pub mod table;
pub mod types;

use std::sync::Arc;

use async_trait::async_trait;
use datafusion::catalog::{MemTable, SchemaProvider, TableProvider};
use datafusion::error::Result as DfResult;

pub use snapshot::Source;

/// Whether `name` is one of `pg_catalog`'s relations.
pub fn is_relation(name: &str) -> bool {
    name == "pg_stat_progress_copy" || columns::RELATIONS.iter().any(|(n, _, _)| *n == name)
}

/// The `pg_catalog` schema.
#[derive(Debug)]
pub struct PgCatalogSchema {
    source: Arc<Source>,
    /// Tables kept elsewhere (`pg_stat_progress_copy`).
    live: Vec<(String, Arc<dyn TableProvider>)>,
}

impl PgCatalogSchema {
    pub fn new(source: Arc<Source>, live: Vec<(String, Arc<dyn TableProvider>)>) -> Self {
        PgCatalogSchema { source, live }
    }

    /// Whether `name` is one of this schema's relations.
    pub fn has(&self, name: &str) -> bool {
        self.live.iter().any(|(n, _)| n == name)
            || columns::RELATIONS.iter().any(|(n, _, _)| *n == name)
    }

    /// The relation `name`, its rows read now.
    pub fn relation(&self, name: &str) -> DfResult<Option<Arc<dyn TableProvider>>> {
        if let Some((_, t)) = self.live.iter().find(|(n, _)| n == name) {
            return Ok(Some(t.clone()));
        }
        let Some((name, _, cols)) = columns::RELATIONS.iter().find(|(n, _, _)| *n == name) else {
            return Ok(None);
        };
        let rows = if rewrite::EMPTY.contains(name) {
            vec![]
        } else {
            let snap = self.source.snapshot();
            rows::rows(name, &snap).unwrap_or_default()
        };
        let batch = table::batch(cols, &rows)?;
        Ok(Some(Arc::new(MemTable::try_new(
            batch.schema(),
            vec![vec![batch]],
        )?)))
    }
}

#[async_trait]
impl SchemaProvider for PgCatalogSchema {
    fn table_names(&self) -> Vec<String> {
        let mut v: Vec<String> = columns::RELATIONS
            .iter()
            .map(|(n, _, _)| (*n).to_owned())
            .collect();
        v.extend(self.live.iter().map(|(n, _)| n.clone()));
        v
    }

    async fn table(&self, name: &str) -> DfResult<Option<Arc<dyn TableProvider>>> {
        self.relation(name)
    }

    fn table_exist(&self, name: &str) -> bool {
        self.has(name)
    }
}

/// Ready a statement for planning: PostgreSQL's output column names (see
/// [`crate::colnames`]), then the rewrites of [`rewrite`]; those for
/// subqueries and empty relations only when it reads the catalog.
pub fn prepare(stmt: &mut datafusion::sql::parser::Statement) {
    crate::colnames::name_statement(stmt);
    if let datafusion::sql::parser::Statement::Statement(s) = stmt {
        crate::udf::aggregates::rename_calls(s.as_mut());
        let catalog = rewrite::reads_catalog(s.as_mut());
        if catalog {
            // Before `ARRAY(...)` turns into an aggregate subquery, which
            // would make the block look aggregating.
            rewrite::empty_blocks(s.as_mut());
        }
        rewrite::rewrite(s.as_mut());
        if catalog {
            expand::expand(s.as_mut());
            rewrite::aggregate_subqueries(s.as_mut());
        }
    }
}
