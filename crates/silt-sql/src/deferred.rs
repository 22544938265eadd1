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

use std::fmt;
use std::sync::{Arc, OnceLock};

use datafusion::arrow::array::RecordBatch;
use datafusion::common::ParamValues;
use datafusion::error::{DataFusionError, Result as DfResult};
use datafusion::execution::TaskContext;
use datafusion::execution::context::ExecutionProps;
use datafusion::logical_expr::Expr;
use datafusion::logical_expr::physical_planning_context::PhysicalPlanningContext;
use datafusion::physical_expr::{EquivalenceProperties, create_physical_expr};
use datafusion::physical_plan::execution_plan::{Boundedness, EmissionType};
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, ExecutionPlan, Partitioning, PlanProperties,
    SendableRecordBatchStream,
};

use crate::bounds::StatementControl;
use crate::plan_cache::bind_expr;
use crate::point_get::PointShape;
use crate::table::SiltTable;

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
        DeferredScanExec {
            table,
            projection,
            filters,
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
            PointShape::of(
                self.table.dataset(),
                self.table.columns(),
                self.projection.as_ref(),
                &self.filters,
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
        let filters = self
            .filters
            .iter()
            .map(|f| bind_expr(f, params).ok_or_else(|| unbound("filter")))
            .collect::<DfResult<Vec<Expr>>>()?;
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
