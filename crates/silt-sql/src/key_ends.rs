//! `MIN` and `MAX` of a primary key's first field read from the key's
//! ends: the first record in key order, or the last (a scan backwards),
//! instead of every record.
//!
//! The [`KeyEndsRule`] finds an aggregate without `GROUP BY` whose one
//! aggregate is `min(k)` or `max(k)` (no `FILTER`) over a full scan of a
//! dataset whose key starts with `k`, and gives it a scan of one record
//! from that end. The aggregate still runs, over at most one row, so an
//! empty dataset still gives NULL. The key encoding orders values as SQL
//! does (see `scan::key_ordering`), and key fields are never null.

use std::sync::Arc;

use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::config::ConfigOptions;
use datafusion::error::Result as DfResult;
use datafusion::physical_expr::expressions::Column;
use datafusion::physical_optimizer::PhysicalOptimizerRule;
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::aggregates::{AggregateExec, AggregateMode};
use datafusion::physical_plan::execution_plan::replace_children_if_necessary;

use crate::scan::SiltScanExec;
use crate::table::Access;

/// Gives `MIN`/`MAX` of a key's first field a scan of one record.
#[derive(Debug, Default)]
pub struct KeyEndsRule;

impl PhysicalOptimizerRule for KeyEndsRule {
    fn optimize(
        &self,
        plan: Arc<dyn ExecutionPlan>,
        _config: &ConfigOptions,
    ) -> DfResult<Arc<dyn ExecutionPlan>> {
        plan.transform_up(|node| {
            let Some(agg) = node.downcast_ref::<AggregateExec>() else {
                return Ok(Transformed::no(node));
            };
            match end_scan(agg) {
                Some(scan) => Ok(Transformed::yes(replace_children_if_necessary(
                    Arc::clone(&node),
                    vec![Arc::new(scan) as Arc<dyn ExecutionPlan>],
                )?)),
                None => Ok(Transformed::no(node)),
            }
        })
        .map(|t| t.data)
    }

    fn name(&self) -> &str {
        "silt_key_ends"
    }

    fn schema_check(&self) -> bool {
        true
    }
}

/// The one-record scan `agg` can read instead of its input.
fn end_scan(agg: &AggregateExec) -> Option<SiltScanExec> {
    if !matches!(
        agg.mode(),
        AggregateMode::Partial | AggregateMode::Single | AggregateMode::SinglePartitioned
    ) || !agg.group_expr().expr().is_empty()
        || agg.filter_expr().iter().any(Option::is_some)
    {
        return None;
    }
    let [aggr] = agg.aggr_expr() else {
        return None;
    };
    let last = match aggr.fun().name() {
        "max" => true,
        "min" => false,
        _ => return None,
    };
    let args = aggr.expressions();
    let [arg] = args.as_slice() else {
        return None;
    };
    let col = arg.downcast_ref::<Column>()?;
    let scan = SiltScanExec::under_repartition(agg.input())?;
    if !matches!(scan.access(), Access::Full) || !scan.plain() {
        return None;
    }
    let info = scan.columns().get(col.index())?;
    let first = scan.dataset().def().primary_key.first()?.clone();
    if info.name != first || info.ty == silt::FieldType::Any {
        return None;
    }
    Some(scan.key_end(last))
}
