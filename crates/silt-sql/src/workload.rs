//! A Synergy workload read from SQL (seed 004 §4.4): the joins and the
//! filtered columns of each statement, as [`silt::synergy::Query`]s for
//! [`silt::synergy::design`]. Each statement is planned and optimized as
//! it would run (so a join written in `WHERE` counts as one written in
//! `ON`, and a derived table's column is traced to the table it comes
//! from); every equality a join of the plan holds between two columns
//! that come straight from two tables' columns is a join condition, and
//! every column a filter reads that comes from a table is a filtered
//! attribute. Statements other than queries (`INSERT`, `UPDATE`, DDL)
//! have no joins and are left out; `$n` parameters are welcome.

use datafusion::common::Column;
use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::logical_expr::{Expr, LogicalPlan};
use silt::synergy::{ColumnRef, JoinCondition, Query};

use crate::error::SqlError;
use crate::rules::{as_silt, silt_table};
use crate::{SqlEngine, ddl, view_rewrite};

/// `(table, field)` that column `c` of `plan`'s output is, if it is one
/// (through aliases, filters, column projections and joins).
fn source_of(plan: &LogicalPlan, c: &Column) -> Option<(String, String)> {
    match plan {
        LogicalPlan::TableScan(scan) => {
            let provider = silt_table(scan)?;
            let table = as_silt(&provider)?;
            plan.schema()
                .has_column(c)
                .then(|| (table.dataset().name().to_owned(), c.name.clone()))
        }
        LogicalPlan::Projection(p) => {
            let i = p.schema.index_of_column(c).ok()?;
            match p.expr.get(i)?.clone().unalias() {
                Expr::Column(inner) => source_of(&p.input, &inner),
                _ => None,
            }
        }
        LogicalPlan::SubqueryAlias(a) => {
            let i = a.schema.index_of_column(c).ok()?;
            let (q, f) = a.input.schema().qualified_field(i);
            source_of(&a.input, &Column::new(q.cloned(), f.name()))
        }
        LogicalPlan::Extension(e) => match view_rewrite::kept_joins(e.node.as_ref()) {
            Some(joins) => source_of(joins, c),
            None => None,
        },
        LogicalPlan::Aggregate(_) | LogicalPlan::Window(_) | LogicalPlan::Union(_) => None,
        other => {
            let mut from = other
                .inputs()
                .into_iter()
                .filter(|i| i.schema().has_column(c));
            let input = from.next()?;
            if from.next().is_some() {
                return None;
            }
            source_of(input, c)
        }
    }
}

/// Every node of `plan`, its subqueries' and the joins its views stand
/// for included.
fn walk(plan: &LogicalPlan, f: &mut dyn FnMut(&LogicalPlan)) {
    if let LogicalPlan::Extension(e) = plan
        && let Some(joins) = view_rewrite::kept_joins(e.node.as_ref())
    {
        return walk(joins, f);
    }
    f(plan);
    for input in plan.inputs() {
        walk(input, f);
    }
    let _ = plan.apply_subqueries(|sub| {
        walk(sub, f);
        Ok(TreeNodeRecursion::Continue)
    });
}

/// The joins and filtered columns of one optimized plan.
pub fn query_of(plan: &LogicalPlan) -> Query {
    let mut joins: Vec<JoinCondition> = Vec::new();
    let mut filters: Vec<ColumnRef> = Vec::new();
    let filtered = |input: &LogicalPlan, e: &Expr, filters: &mut Vec<ColumnRef>| {
        for c in e.column_refs() {
            if let Some((t, f)) = source_of(input, c) {
                let r = ColumnRef::new(t, f);
                if !filters.contains(&r) {
                    filters.push(r);
                }
            }
        }
    };
    walk(plan, &mut |p| match p {
        LogicalPlan::Join(j) => {
            for (l, r) in &j.on {
                let (Expr::Column(lc), Expr::Column(rc)) = (l, r) else {
                    continue;
                };
                if let (Some((lt, lf)), Some((rt, rf))) =
                    (source_of(&j.left, lc), source_of(&j.right, rc))
                {
                    let cond = JoinCondition::single(&lt, &lf, &rt, &rf);
                    if !joins.contains(&cond) {
                        joins.push(cond);
                    }
                }
            }
        }
        LogicalPlan::Filter(f) => filtered(&f.input, &f.predicate, &mut filters),
        LogicalPlan::TableScan(scan) => {
            for e in &scan.filters {
                filtered(p, &crate::table::strip(e), &mut filters);
            }
        }
        _ => {}
    });
    Query::new(joins, filters)
}

impl SqlEngine {
    /// The Synergy workload of the queries in `script` (see
    /// [`crate::workload`]): one [`Query`] per `SELECT`, in order.
    pub async fn workload(&self, script: &str) -> Result<Vec<Query>, SqlError> {
        let mut out = Vec::new();
        for seg in ddl::split(script)? {
            let first = seg
                .text
                .split_whitespace()
                .next()
                .unwrap_or("")
                .to_ascii_lowercase();
            if first != "select" && first != "with" {
                continue;
            }
            let state = self.session().state();
            let plan = state
                .create_logical_plan(&seg.text)
                .await
                .and_then(|p| state.optimize(&p))
                .map_err(|e| {
                    SqlError::Invalid(format!("workload statement `{}`: {e}", seg.text))
                })?;
            out.push(query_of(&plan));
        }
        Ok(out)
    }
}
