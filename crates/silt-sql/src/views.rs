//! Views that survive a restart. `CREATE VIEW` records the statement in the
//! database's catalog (see `silt::db::views`) before DataFusion registers
//! the view; opening the engine plans each recorded view again, in the
//! order they were made. `CREATE TEMPORARY VIEW` is the engine's alone and
//! is not recorded.
//!
//! A view whose statement no longer plans at open (it reads a column that
//! is gone, say) is kept in the catalog and answers every query with the
//! reason, until it is dropped or replaced.

use std::collections::HashMap;
use std::ops::ControlFlow;
use std::sync::Arc;

use datafusion::logical_expr::{DdlStatement, LogicalPlan};
use datafusion::prelude::SessionContext;
use datafusion::sql::sqlparser::ast::visit_relations;
use parking_lot::RwLock;
use silt::{Database, ViewDef};

use crate::ddl::{self, Parsed};
use crate::error::SqlError;

/// Views recorded in the catalog that did not plan at open, with why.
pub(crate) type Broken = Arc<RwLock<HashMap<String, String>>>;

/// The catalog record of a `CREATE VIEW` plan (not temporary), and
/// whether it replaces one.
pub(crate) fn to_record(db: &Database, plan: &LogicalPlan) -> Option<(ViewDef, bool)> {
    let LogicalPlan::Ddl(DdlStatement::CreateView(cv)) = plan else {
        return None;
    };
    if cv.temporary {
        return None;
    }
    let known: Vec<String> = db
        .dataset_names()
        .into_iter()
        .chain(db.views().into_iter().map(|v| v.name))
        .collect();
    let name = cv.name.table().to_owned();
    let definition = cv
        .definition
        .clone()
        .unwrap_or_else(|| format!("CREATE VIEW {name} AS {}", cv.input.display_indent()));
    // What it reads, from its text: the plan has views inlined.
    let mut reads: Vec<String> = Vec::new();
    if let Ok(segs) = ddl::split(&definition)
        && let [seg] = segs.as_slice()
        && let Ok(Parsed::DataFusion(stmt)) = ddl::parse(seg)
        && let datafusion::sql::parser::Statement::Statement(stmt) = *stmt
    {
        let _ = visit_relations(stmt.as_ref(), |r| {
            if let Some(t) = ddl::object_parts(r).pop()
                && known.contains(&t)
                && !reads.contains(&t)
                && t != name
            {
                reads.push(t);
            }
            ControlFlow::<()>::Continue(())
        });
    }
    Some((
        ViewDef {
            name,
            definition,
            depends_on: reads,
        },
        cv.or_replace,
    ))
}

/// Plan and register every recorded view again (after open, or after a
/// table changed shape), in catalog order; the ones that fail go to
/// `broken`.
pub(crate) fn restore(db: &Database, ctx: &SessionContext, broken: &Broken) {
    let mut failed = HashMap::new();
    for v in db.views() {
        let _ = ctx.deregister_table(v.name.as_str());
        if let Err(e) = futures::executor::block_on(register(ctx, &v.definition)) {
            failed.insert(v.name.clone(), e.to_string());
        }
    }
    *broken.write() = failed;
}

async fn register(ctx: &SessionContext, definition: &str) -> Result<(), SqlError> {
    let segs = ddl::split(definition)?;
    let [seg] = segs.as_slice() else {
        return Err(SqlError::Invalid(
            "a view's definition must be one statement".to_owned(),
        ));
    };
    let Parsed::DataFusion(mut stmt) = ddl::parse(seg)? else {
        return Err(SqlError::Invalid(
            "a view's definition must be a CREATE VIEW statement".to_owned(),
        ));
    };
    crate::pg_catalog::prepare(&mut stmt);
    let plan = ctx.state().statement_to_plan(*stmt).await?;
    if !matches!(plan, LogicalPlan::Ddl(DdlStatement::CreateView(_))) {
        return Err(SqlError::Invalid(
            "a view's definition must be a CREATE VIEW statement".to_owned(),
        ));
    }
    ctx.execute_logical_plan(plan).await?;
    Ok(())
}

/// The error a query on a view that did not plan at open gets.
pub(crate) fn broken_error(name: &str, why: &str) -> datafusion::error::DataFusionError {
    datafusion::error::DataFusionError::Plan(format!(
        "view `{name}` no longer plans ({why}); DROP VIEW {name} or CREATE OR REPLACE VIEW {name} AS ..."
    ))
}

impl crate::SqlEngine {
    /// Record the view a `CREATE VIEW` plan makes, before DataFusion
    /// registers it; returns it with the definition it replaced, so that a
    /// failed registration can be undone.
    pub(crate) async fn record_view(
        &self,
        plan: &LogicalPlan,
    ) -> Result<Option<(ViewDef, Option<ViewDef>)>, SqlError> {
        let Some((view, replace)) = to_record(&self.db, plan) else {
            return Ok(None);
        };
        let earlier = self.db.views().into_iter().find(|v| v.name == view.name);
        if replace && earlier.is_none() {
            // Replacing a temporary view (or none): DataFusion's registry
            // holds it; the catalog gets the new one.
            let _ = self.ctx.deregister_table(view.name.as_str());
        }
        let (db, v) = (self.db.clone(), view.clone());
        ddl::blocking(move || db.create_view(v, replace).map_err(SqlError::from)).await?;
        self.broken.write().remove(&view.name);
        Ok(Some((view, earlier)))
    }

    /// Undo [`Self::record_view`] after DataFusion refused the view.
    pub(crate) async fn unrecord_view(&self, view: &ViewDef, earlier: Option<ViewDef>) {
        let db = self.db.clone();
        let name = view.name.clone();
        let _ = ddl::blocking(move || {
            match earlier {
                Some(old) => db.create_view(old, true)?,
                None => {
                    db.drop_view(&name, false)?;
                }
            }
            Ok::<_, SqlError>(())
        })
        .await;
    }

    /// `DROP VIEW`: recorded views leave the catalog (with the views that
    /// read them, given `cascade`), temporary ones the engine.
    pub(crate) async fn drop_views(
        &self,
        names: Vec<String>,
        if_exists: bool,
        cascade: bool,
    ) -> Result<(), SqlError> {
        for n in names {
            let recorded = self.db.views().iter().any(|v| v.name == n);
            if recorded {
                let (db, name) = (self.db.clone(), n.clone());
                let gone =
                    ddl::blocking(move || db.drop_view(&name, cascade).map_err(SqlError::from))
                        .await?;
                for g in gone {
                    let _ = self.ctx.deregister_table(g.as_str());
                    self.broken.write().remove(&g);
                }
            } else if self.db.dataset_names().contains(&n) {
                return Err(SqlError::Invalid(format!(
                    "`{n}` is a table, not a view; use DROP TABLE {n}"
                )));
            } else if self.ctx.table_exist(n.as_str()).unwrap_or(false) {
                self.ctx.deregister_table(n.as_str())?;
            } else if !if_exists {
                return Err(silt::Error::NoSuchView(n).into());
            }
        }
        self.plans.invalidate();
        Ok(())
    }

    /// Plan every recorded view again (a table they read changed shape).
    pub(crate) fn reload_views(&self) {
        restore(&self.db, &self.ctx, &self.broken);
        self.plans.invalidate();
    }
}
