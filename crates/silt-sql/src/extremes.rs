//! `MIN` and `MAX` from zone maps: `SELECT min(c), max(d) FROM t` (no
//! grouping, no filter, only `min` and `max` of plain columns, each with a
//! `brin` or `embedded` index) needs no record, when the zone maps of the
//! primary's components decide the extremes ([`Dataset::exact_extremes`]:
//! nothing in memory, components whose key ranges do not overlap).
//!
//! [`ExtremesRule`] marks such a scan ([`SiltTable::with_extremes`]). The
//! decision is made when the plan runs, once per run, as for `COUNT(*)`
//! ([`crate::meta_count`]): the scan then gives two rows, the minima and
//! the maxima, and the aggregate above computes the same answer from them
//! as from every record; otherwise (records in memory, overlapping
//! components, a transaction's own writes) it reads the records. `EXPLAIN`
//! shows `min/max from zone maps when exact` on the scan.

use std::sync::Arc;

use datafusion::common::tree_node::Transformed;
use datafusion::datasource::provider_as_source;
use datafusion::error::Result as DfResult;
use datafusion::execution::TaskContext;
use datafusion::logical_expr::expr::AggregateFunction;
use datafusion::logical_expr::{
    Aggregate, Expr, LogicalPlan, Projection, SubqueryAlias, TableScan,
};
use datafusion::optimizer::{ApplyOrder, OptimizerConfig, OptimizerRule};
use silt::{Dataset, Value};

use crate::convert::ColumnInfo;
use crate::meta_count::RunDecisions;
use crate::rules::{as_silt, silt_table};

/// The decision of each run: the two rows, or `None` to read records.
pub(crate) type ExtremeDecisions = RunDecisions<Option<Vec<Value>>>;

impl ExtremeDecisions {
    /// The minima row and the maxima row of `cols`, if the zone maps
    /// decide them now.
    pub(crate) fn rows(
        &self,
        ctx: &Arc<TaskContext>,
        ds: &Dataset,
        cols: &[ColumnInfo],
    ) -> Option<Vec<Value>> {
        self.decide(ctx, || {
            let names: Vec<String> = cols.iter().map(|c| c.name.clone()).collect();
            let ext = ds.exact_extremes(&names)?;
            let row = |pick: fn(&(Value, Value)) -> &Value| {
                Value::Object(
                    names
                        .iter()
                        .zip(&ext)
                        .map(|(n, e)| {
                            (
                                n.clone(),
                                e.as_ref().map_or(Value::Null, |e| pick(e).clone()),
                            )
                        })
                        .collect(),
                )
            };
            Some(vec![row(|e| &e.0), row(|e| &e.1)])
        })
    }
}

/// See the module doc.
#[derive(Debug, Default)]
pub struct ExtremesRule;

impl OptimizerRule for ExtremesRule {
    fn name(&self) -> &str {
        "silt_extremes"
    }

    fn apply_order(&self) -> Option<ApplyOrder> {
        Some(ApplyOrder::TopDown)
    }

    fn rewrite(
        &self,
        plan: LogicalPlan,
        _config: &dyn OptimizerConfig,
    ) -> DfResult<Transformed<LogicalPlan>> {
        let LogicalPlan::Aggregate(agg) = &plan else {
            return Ok(Transformed::no(plan));
        };
        if !agg.group_expr.is_empty() || agg.aggr_expr.is_empty() {
            return Ok(Transformed::no(plan));
        }
        let mut columns = Vec::new();
        for e in &agg.aggr_expr {
            let Expr::AggregateFunction(AggregateFunction { func, params }) = e.clone().unalias()
            else {
                return Ok(Transformed::no(plan));
            };
            let name = func.name().to_ascii_lowercase();
            if !(name == "min" || name == "max")
                || params.filter.is_some()
                || !params.order_by.is_empty()
            {
                return Ok(Transformed::no(plan));
            }
            match params.args.as_slice() {
                [Expr::Column(c)] => columns.push(c.name.clone()),
                _ => return Ok(Transformed::no(plan)),
            }
        }
        match marked(&agg.input, &columns) {
            Some(input) => Ok(Transformed::yes(LogicalPlan::Aggregate(
                Aggregate::try_new_with_schema(
                    Arc::new(input),
                    agg.group_expr.clone(),
                    agg.aggr_expr.clone(),
                    agg.schema.clone(),
                )?,
            ))),
            None => Ok(Transformed::no(plan)),
        }
    }
}

/// `plan` with its Silt scan marked, if it is a plain scan (through
/// aliases and projections of plain columns) whose columns are all zone
/// mapped.
fn marked(plan: &LogicalPlan, columns: &[String]) -> Option<LogicalPlan> {
    match plan {
        LogicalPlan::Projection(p) => {
            // Only renames of plain columns keep minima and maxima.
            let mut inner = Vec::new();
            for c in columns {
                let i = p.schema.index_of_column_by_name(None, c)?;
                match p.expr.get(i)?.clone().unalias() {
                    Expr::Column(col) => inner.push(col.name),
                    _ => return None,
                }
            }
            let input = marked(&p.input, &inner)?;
            Projection::try_new_with_schema(p.expr.clone(), Arc::new(input), p.schema.clone())
                .ok()
                .map(LogicalPlan::Projection)
        }
        LogicalPlan::SubqueryAlias(a) => {
            let input = marked(&a.input, columns)?;
            SubqueryAlias::try_new(Arc::new(input), a.alias.clone())
                .ok()
                .map(LogicalPlan::SubqueryAlias)
        }
        LogicalPlan::TableScan(scan) => {
            if !scan.filters.is_empty() || scan.fetch.is_some() {
                return None;
            }
            let provider = silt_table(scan)?;
            let table = as_silt(&provider)?;
            if table.knn().is_some() || table.extremes() {
                return None;
            }
            // Every column the scan reads is one whose extremes are wanted
            // (a scan reading others feeds something else too).
            let read: Vec<String> = scan
                .projected_schema
                .fields()
                .iter()
                .map(|f| f.name().clone())
                .collect();
            if read.is_empty()
                || !read
                    .iter()
                    .all(|c| columns.contains(c) && table.zone_mapped(c))
            {
                return None;
            }
            Some(LogicalPlan::TableScan(TableScan {
                source: provider_as_source(Arc::new(table.with_extremes())),
                ..scan.clone()
            }))
        }
        _ => None,
    }
}
