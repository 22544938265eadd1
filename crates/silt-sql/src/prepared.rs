//! SQL's `PREPARE name [(types)] AS statement`, `EXECUTE name [(values)]`
//! and `DEALLOCATE [PREPARE] { name | ALL }`, kept per session as
//! PostgreSQL keeps them: two sessions may prepare the same name, a
//! session's statements end with it, and `DEALLOCATE ALL` forgets them all.
//!
//! A prepared statement keeps its plan before optimization, with its
//! parameters, and is planned again from its text when a table, index or
//! view changed since (a column added by `ALTER TABLE` is seen); `EXECUTE`
//! binds the values (literals, or expressions that fold to one, cast to the
//! declared types) and runs it like any statement (its `now()` is the
//! execution's).

use std::collections::HashMap;
use std::sync::Arc;

use datafusion::arrow::datatypes::FieldRef;
use datafusion::common::metadata::ScalarAndMetadata;
use datafusion::common::{DFSchemaRef, ParamValues};
use datafusion::execution::SessionState;
use datafusion::logical_expr::simplify::SimplifyContext;
use datafusion::logical_expr::{Expr, LogicalPlan, Statement};
use datafusion::optimizer::simplify_expressions::ExprSimplifier;
use datafusion::sql::parser::Statement as DFStatement;
use parking_lot::Mutex;

use crate::error::SqlError;

/// One session's prepared statements, by name.
#[derive(Default)]
pub(crate) struct Prepared {
    by_name: Mutex<HashMap<String, Arc<Entry>>>,
}

struct Entry {
    /// The `PREPARE` statement, planned again when the schema changed.
    text: DFStatement,
    /// The plan of its statement (parameters in it) and the parameter types.
    plan: Arc<LogicalPlan>,
    fields: Vec<FieldRef>,
    /// The schema versions it was planned under.
    versions: (u64, u64),
}

/// What a statement does with the session's prepared statements.
pub(crate) enum Step {
    /// It was a `PREPARE` or a `DEALLOCATE`, done.
    Done,
    /// The plan to run: the statement's own, or an `EXECUTE`'s bound one.
    Run(LogicalPlan),
}

fn exists(name: &str) -> SqlError {
    SqlError::DuplicatePrepared(name.to_owned())
}

fn missing(name: &str) -> SqlError {
    SqlError::NoSuchPrepared(name.to_owned())
}

impl Prepared {
    /// The result columns of the statement prepared as `name`.
    pub(crate) fn schema(&self, name: &str) -> Option<DFSchemaRef> {
        let e = self.by_name.lock().get(name).cloned()?;
        Some(e.plan.schema().clone())
    }

    /// Forget every one (`DEALLOCATE ALL`).
    pub(crate) fn clear(&self) {
        self.by_name.lock().clear();
    }

    /// Whether `stmt` is a `PREPARE` (whose text [`Prepared::step`] keeps).
    pub(crate) fn is_prepare(stmt: &DFStatement) -> bool {
        matches!(stmt, DFStatement::Statement(s)
            if matches!(**s, datafusion::sql::sqlparser::ast::Statement::Prepare { .. }))
    }

    /// Keep, forget or bind a prepared statement if `plan` (of `text`,
    /// given for a `PREPARE`) is about one; `versions` are the schema's now.
    pub(crate) async fn step(
        &self,
        state: &SessionState,
        plan: LogicalPlan,
        text: Option<DFStatement>,
        versions: (u64, u64),
    ) -> Result<Step, SqlError> {
        match plan {
            LogicalPlan::Statement(Statement::Prepare(p)) => {
                let Some(text) = text else {
                    return Ok(Step::Run(LogicalPlan::Statement(Statement::Prepare(p))));
                };
                let (name, entry) = entry(text, p, versions)?;
                let mut map = self.by_name.lock();
                if map.contains_key(&name) {
                    return Err(exists(&name));
                }
                map.insert(name, Arc::new(entry));
                Ok(Step::Done)
            }
            LogicalPlan::Statement(Statement::Deallocate(d)) => {
                let mut map = self.by_name.lock();
                if d.name.eq_ignore_ascii_case("all") && !map.contains_key(&d.name) {
                    map.clear();
                } else if map.remove(&d.name).is_none() {
                    return Err(missing(&d.name));
                }
                Ok(Step::Done)
            }
            LogicalPlan::Statement(Statement::Execute(x)) => {
                let found = self.by_name.lock().get(&x.name).cloned();
                let mut e = found.ok_or_else(|| missing(&x.name))?;
                if e.versions != versions {
                    // A table it reads changed: planned again from its text.
                    let again = state.statement_to_plan(e.text.clone()).await?;
                    let LogicalPlan::Statement(Statement::Prepare(p)) = again else {
                        return Err(SqlError::Invalid(format!(
                            "prepared statement \"{}\" no longer plans as a PREPARE",
                            x.name
                        )));
                    };
                    let (name, fresh) = entry(e.text.clone(), p, versions)?;
                    e = Arc::new(fresh);
                    self.by_name.lock().insert(name, e.clone());
                }
                Ok(Step::Run(bind(state, &x.name, &e, x.parameters)?))
            }
            plan => Ok(Step::Run(plan)),
        }
    }
}

/// A prepared statement's entry, its parameters checked against its types.
fn entry(
    text: DFStatement,
    p: datafusion::logical_expr::Prepare,
    versions: (u64, u64),
) -> Result<(String, Entry), SqlError> {
    if !p.fields.is_empty() {
        let n = p.input.get_parameter_names()?.len();
        if n != p.fields.len() {
            return Err(SqlError::Invalid(format!(
                "PREPARE {} declares {} parameter types for a statement of {n} parameters",
                p.name,
                p.fields.len()
            )));
        }
    }
    Ok((
        p.name,
        Entry {
            text,
            plan: p.input,
            fields: p.fields,
            versions,
        },
    ))
}

/// `e`'s plan with `values` in place of its parameters.
fn bind(
    state: &SessionState,
    name: &str,
    e: &Entry,
    values: Vec<Expr>,
) -> Result<LogicalPlan, SqlError> {
    let want = if e.fields.is_empty() {
        e.plan.get_parameter_names()?.len()
    } else {
        e.fields.len()
    };
    if values.len() != want {
        return Err(SqlError::Invalid(format!(
            "prepared statement \"{name}\" takes {want} parameters, {} given",
            values.len()
        )));
    }
    let context = SimplifyContext::builder()
        .with_schema(e.plan.schema().clone())
        .with_config_options(state.config_options().clone())
        .with_query_execution_start_time(state.execution_props().query_execution_start_time)
        .build();
    let simplifier = ExprSimplifier::new(context);
    let mut params = Vec::with_capacity(values.len());
    for (i, v) in values.into_iter().enumerate() {
        let shown = v.to_string();
        let Expr::Literal(scalar, metadata) = simplifier.simplify(v)? else {
            return Err(SqlError::Invalid(format!(
                "EXECUTE {name}: parameter ${} (`{shown}`) is not a constant",
                i + 1
            )));
        };
        let mut p = ScalarAndMetadata::new(scalar, metadata);
        if let Some(f) = e.fields.get(i) {
            p = p.cast_storage_to(f.data_type())?;
        }
        params.push(p);
    }
    Ok(e.plan
        .as_ref()
        .clone()
        .replace_params_with_values(&ParamValues::List(params))?)
}
