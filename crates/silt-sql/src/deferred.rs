//! A Silt scan whose access path is chosen when it runs, from the
//! statement's bound parameters: the scan of a cached physical plan (see
//! [`crate::plan_cache`]).
//!
//! A cached shape's filters and kNN point hold parameters (`$1`...), so
//! its physical plan cannot name a key, a box or a point. This operator
//! keeps the filters as expressions; `execute` binds them with the
//! parameters the statement carries in its session config
//! ([`BoundParams`]), then plans and runs the scan exactly as
//! [`SiltTable::build_scan`] would for those values: the access path, and
//! a filter above it for what the path does not answer.
//!
//! The access path reads only literals (a key, a geometry), and a text's
//! planner folds every constant part of a filter into one. A bound filter
//! whose parameters sit inside arithmetic or casts (`ST_MakeEnvelope($1,
//! $2, $1 + 2.0, $2 + 1.0)`, every literal of a text being a parameter)
//! is folded the same way before the path is chosen; which filters need
//! it is found once ([`needs_fold`]), so the others pay nothing.

use std::fmt;
use std::sync::{Arc, OnceLock};

use datafusion::arrow::array::RecordBatch;
use datafusion::common::tree_node::{TreeNode, TreeNodeRecursion};
use datafusion::common::{ParamValues, ScalarValue};
use datafusion::error::{DataFusionError, Result as DfResult};
use datafusion::execution::TaskContext;
use datafusion::execution::context::ExecutionProps;
use datafusion::logical_expr::physical_planning_context::PhysicalPlanningContext;
use datafusion::logical_expr::{Expr, TableProviderFilterPushDown};
use datafusion::physical_expr::{EquivalenceProperties, create_physical_expr};
use datafusion::physical_plan::execution_plan::{Boundedness, EmissionType};
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, ExecutionPlan, Partitioning, PlanProperties,
    SendableRecordBatchStream,
};

use crate::bounds::StatementControl;
use crate::plan_cache::{bind_expr, fold_bound, has_param};
use crate::point_get::PointShape;
use crate::table::SiltTable;
use crate::udf::{self, Func};

/// The parameter values of the statement being run, in its session
/// config.
#[derive(Debug)]
pub struct BoundParams(pub ParamValues);

/// See the module doc.
pub struct DeferredScanExec {
    table: SiltTable,
    projection: Option<Vec<usize>>,
    /// Unqualified, with parameters.
    filters: Vec<Expr>,
    /// Per filter, whether it is folded once bound ([`needs_fold`]).
    fold: Vec<bool>,
    limit: Option<usize>,
    props: Arc<PlanProperties>,
    /// Whether it reads one row by its primary key (found once).
    point: OnceLock<Option<PointShape>>,
}

impl fmt::Debug for DeferredScanExec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "DeferredScanExec({:?})", self.table)
    }
}

impl DeferredScanExec {
    pub fn new(
        table: SiltTable,
        projection: Option<Vec<usize>>,
        filters: Vec<Expr>,
        limit: Option<usize>,
    ) -> DeferredScanExec {
        let full = datafusion::catalog::TableProvider::schema(&table);
        let schema = match &projection {
            Some(p) => Arc::new(full.project(p).unwrap_or_else(|_| full.as_ref().clone())),
            None => full,
        };
        let props = PlanProperties::new(
            EquivalenceProperties::new(schema),
            Partitioning::UnknownPartitioning(1),
            EmissionType::Incremental,
            Boundedness::Bounded,
        );
        let fold: Vec<bool> = filters.iter().map(needs_fold).collect();
        DeferredScanExec {
            table,
            projection,
            filters,
            fold,
            limit,
            props: Arc::new(props),
            point: OnceLock::new(),
        }
    }

    /// The row of a primary-key read with these values, without planning
    /// a scan (see [`crate::point_get`]); `None` when it is not one, or
    /// the values are for the general path.
    pub fn point_get(
        &self,
        params: &ParamValues,
        ctl: Option<&Arc<StatementControl>>,
    ) -> Option<DfResult<Option<RecordBatch>>> {
        let shape = self.point.get_or_init(|| {
            if self.table.knn().is_some() || self.limit == Some(0) {
                return None;
            }
            // Inexact filters stay above the scan: the read need not
            // answer them.
            let answered: Vec<Expr> = self
                .filters
                .iter()
                .filter(|f| self.table.exactness(f) != TableProviderFilterPushDown::Inexact)
                .cloned()
                .collect();
            PointShape::of(
                self.table.dataset(),
                self.table.columns(),
                self.projection.as_ref(),
                &answered,
                self.schema(),
            )
        });
        shape.as_ref()?.read(params, ctl)
    }

    /// The scan for these values.
    fn bind(&self, params: &ParamValues) -> DfResult<Arc<dyn ExecutionPlan>> {
        let unbound = |what: &str| {
            DataFusionError::Execution(format!(
                "a cached plan's {what} could not take the statement's parameters"
            ))
        };
        let mut filters = self
            .filters
            .iter()
            .map(|f| bind_expr(f, params).ok_or_else(|| unbound("filter")))
            .collect::<DfResult<Vec<Expr>>>()?;
        for (f, fold) in filters.iter_mut().zip(&self.fold) {
            if *fold {
                let bound = std::mem::replace(f, Expr::Literal(ScalarValue::Null, None));
                *f = fold_bound(bound)?;
            }
        }
        let table = match self.table.knn() {
            Some(k) if k.point.is_some() => self
                .table
                .with_knn(k.bind(params).ok_or_else(|| unbound("kNN point"))?),
            _ => self.table.duplicate(),
        };
        let props = ExecutionProps::new();
        table.concrete_scan(
            &|e, schema| {
                create_physical_expr(&e, schema, &props, &PhysicalPlanningContext::default())
            },
            self.projection.as_ref(),
            &filters,
            self.limit,
            false,
        )
    }
}

/// Whether a filter, once bound, must be folded before the access path
/// can read it: a part of it without columns holds a parameter and is
/// more than a parameter, a literal, or a point or envelope built of
/// those (which the path reads as they are).
pub(crate) fn needs_fold(e: &Expr) -> bool {
    let column_free = !e
        .exists(|x| Ok(matches!(x, Expr::Column(_))))
        .unwrap_or(true);
    if column_free {
        return has_param(e) && !read_as_is(e);
    }
    let mut any = false;
    let _ = e.apply_children(|c| {
        any |= needs_fold(c);
        Ok(if any {
            TreeNodeRecursion::Stop
        } else {
            TreeNodeRecursion::Continue
        })
    });
    any
}

/// A parameter, a literal, or a point or envelope of those.
fn read_as_is(e: &Expr) -> bool {
    let leaf = |e: &Expr| matches!(e, Expr::Placeholder(_) | Expr::Literal(..));
    match e {
        Expr::ScalarFunction(sf) => {
            matches!(
                udf::func_of(&sf.func),
                Some(Func::Point | Func::MakeEnvelope)
            ) && sf.args.iter().all(leaf)
        }
        other => leaf(other),
    }
}

impl DisplayAs for DeferredScanExec {
    fn fmt_as(&self, _t: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        write!(
            f,
            "SiltScan: {} access=chosen at execution from the parameters",
            self.table.dataset().name()
        )
    }
}

impl ExecutionPlan for DeferredScanExec {
    fn name(&self) -> &str {
        "DeferredScanExec"
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        &self.props
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        vec![]
    }

    fn apply_expressions(
        &self,
        _f: &mut dyn FnMut(
            &Arc<dyn datafusion::physical_expr::PhysicalExpr>,
        ) -> DfResult<datafusion::common::tree_node::TreeNodeRecursion>,
    ) -> DfResult<datafusion::common::tree_node::TreeNodeRecursion> {
        Ok(datafusion::common::tree_node::TreeNodeRecursion::Continue)
    }

    fn with_new_children(
        self: Arc<Self>,
        _children: Vec<Arc<dyn ExecutionPlan>>,
    ) -> DfResult<Arc<dyn ExecutionPlan>> {
        Ok(self)
    }

    fn execute(
        &self,
        partition: usize,
        context: Arc<TaskContext>,
    ) -> DfResult<SendableRecordBatchStream> {
        let Some(params) = context.session_config().get_extension::<BoundParams>() else {
            return Err(DataFusionError::Internal(
                "a cached plan ran without its parameters".to_owned(),
            ));
        };
        let plan = self.bind(&params.0)?;
        if plan.schema() != self.schema() {
            return Err(DataFusionError::Internal(format!(
                "a cached plan's scan of `{}` changed its columns",
                self.table.dataset().name()
            )));
        }
        plan.execute(partition, context)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::logical_expr::expr::ScalarFunction;
    use datafusion::logical_expr::{col, lit, placeholder};
    use datafusion::physical_plan::displayable;

    fn call(f: Func, args: Vec<Expr>) -> Expr {
        let udf = udf::all_udfs()
            .into_iter()
            .find(|u| udf::func_of(u) == Some(f))
            .expect("a Silt function");
        Expr::ScalarFunction(ScalarFunction::new_udf(Arc::new(udf), args))
    }

    /// `ST_MakeEnvelope($1, $2, $1 + $3, $2 + $4)`, as a text's template
    /// gives it when its box is written with arithmetic.
    fn envelope_with_arithmetic() -> Expr {
        call(
            Func::MakeEnvelope,
            vec![
                placeholder("$1"),
                placeholder("$2"),
                placeholder("$1") + placeholder("$3"),
                placeholder("$2") + placeholder("$4"),
            ],
        )
    }

    #[test]
    fn only_filters_with_computed_parameters_are_folded() {
        let plain = call(
            Func::MakeEnvelope,
            vec![
                placeholder("$1"),
                placeholder("$2"),
                lit(3.0),
                placeholder("$3"),
            ],
        );
        assert!(!needs_fold(&call(
            Func::Intersects,
            vec![col("loc"), plain]
        )));
        assert!(!needs_fold(&col("id").eq(placeholder("$1"))));
        assert!(!needs_fold(&col("id").eq(col("v") + lit(1))));
        assert!(needs_fold(&col("id").eq(placeholder("$1") + lit(1))));
        assert!(needs_fold(&call(
            Func::Intersects,
            vec![col("loc"), envelope_with_arithmetic()]
        )));
        // Inside an AND with a plain part.
        assert!(needs_fold(&col("id").gt(placeholder("$5")).and(call(
            Func::Intersects,
            vec![col("loc"), envelope_with_arithmetic()]
        ))));
    }

    /// A box computed from its parameters is read through the R-tree,
    /// as the same text's parsed plan reads it.
    #[test]
    fn a_box_computed_from_parameters_is_read_through_its_index() {
        let dir = tempfile::tempdir().unwrap();
        let db = Arc::new(silt::Database::open(dir.path(), silt::DbOptions::default()).unwrap());
        let sql = crate::SqlEngine::new(db.clone()).unwrap();
        sql.execute_blocking("CREATE TABLE pts (id BIGINT PRIMARY KEY, loc GEOMETRY)")
            .unwrap();
        sql.execute_blocking("CREATE INDEX pts_loc ON pts USING rtree (loc)")
            .unwrap();
        sql.execute_blocking(
            "INSERT INTO pts VALUES (1, ST_Point(1.0, 1.0)), (2, ST_Point(5.0, 5.0))",
        )
        .unwrap();
        let table = SiltTable::new(db.dataset("pts").unwrap());
        let filter = call(
            Func::Intersects,
            vec![col("loc"), envelope_with_arithmetic()],
        );
        let scan = DeferredScanExec::new(table, None, vec![filter], None);
        let params = ParamValues::List(
            [0.5, 0.5, 1.0, 1.0]
                .into_iter()
                .map(|v| datafusion::common::ScalarValue::Float64(Some(v)).into())
                .collect(),
        );
        let plan = scan.bind(&params).unwrap();
        let shown = displayable(plan.as_ref()).indent(false).to_string();
        assert!(shown.contains("access=rtree"), "{shown}");
    }
}
