//! Optimizer rules that route spatial queries to Silt's R-tree paths.
//!
//! - [`KnnRule`]: `ORDER BY ST_Distance(geom, <point>) [ASC] LIMIT k` over a
//!   Silt table with an `rtree` index on `geom` (no filter between the sort
//!   and the scan) scans through the R-tree's k-nearest-neighbour search
//!   (`Query::Nearest`) instead of sorting the table: the scan yields only
//!   the k nearest rows, nearest first, so the sort goes too (and the plan
//!   runs in one partition, so that nothing reorders them). `EXPLAIN`
//!   shows `access=rtree(geom) index=.. knn(..)`. Rows whose geometry is
//!   NULL are never among them (a full sort would put them last).
//! - [`SpatialJoinRule`]: an inner join whose condition contains
//!   `ST_Intersects(a.g, b.g)` or `ST_DWithin(a.g, b.g, metres)`, where one
//!   side is a plain scan of a Silt table with an `rtree` index on its
//!   column, becomes an index nested-loop join ([`SpatialJoinExec`]): every
//!   row of the other side probes the R-tree (`Dataset::spatial_join`).
//!   Other conditions of the join are applied to its output. For
//!   `ST_DWithin` the probe side's geometries must be points.

use std::any::Any;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use async_trait::async_trait;
use datafusion::arrow::array::{Array, ArrayRef, AsArray, RecordBatch, UInt32Array};
use datafusion::arrow::compute::{cast, take};
use datafusion::arrow::datatypes::{DataType, SchemaRef};
use datafusion::catalog::Session;
use datafusion::common::tree_node::{Transformed, TreeNode, TreeNodeRecursion};
use datafusion::common::{Column, DFSchema, DFSchemaRef, JoinType};
use datafusion::datasource::provider_as_source;
use datafusion::datasource::source_as_provider;
use datafusion::error::{DataFusionError, Result as DfResult};
use datafusion::execution::TaskContext;
use datafusion::execution::context::QueryPlanner;
use datafusion::logical_expr::physical_planning_context::PhysicalPlanningContext;
use datafusion::logical_expr::utils::{conjunction, split_conjunction};
use datafusion::logical_expr::{
    Expr, Extension, Filter, Join, LogicalPlan, Projection, SubqueryAlias, TableScan,
    UserDefinedLogicalNode, UserDefinedLogicalNodeCore,
};
use datafusion::optimizer::{ApplyOrder, OptimizerConfig, OptimizerRule};
use datafusion::physical_expr::{EquivalenceProperties, PhysicalExpr};
use datafusion::physical_plan::execution_plan::{Boundedness, EmissionType};
use datafusion::physical_plan::stream::RecordBatchReceiverStreamBuilder;
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, ExecutionPlan, Partitioning, PlanProperties,
    SendableRecordBatchStream,
};
use datafusion::physical_planner::{DefaultPhysicalPlanner, ExtensionPlanner, PhysicalPlanner};
use futures::StreamExt;
use silt::{Dataset, Geometry, JoinPredicate, QueryOptions, Value};

use crate::convert::{self, ColumnInfo};
use crate::error::silt_err;
use crate::geom;
use crate::table::{KnnSpec, SiltTable, const_geometry};
use crate::udf::{self, Func};

/// The Silt table behind a scan, if it is one.
pub(crate) fn silt_table(
    scan: &TableScan,
) -> Option<Arc<dyn datafusion::datasource::TableProvider>> {
    let p = source_as_provider(&scan.source).ok()?;
    let any: &dyn Any = p.as_ref();
    any.is::<SiltTable>().then_some(p)
}

pub(crate) fn as_silt(p: &Arc<dyn datafusion::datasource::TableProvider>) -> Option<&SiltTable> {
    let any: &dyn Any = p.as_ref();
    any.downcast_ref::<SiltTable>()
}

/// See the module doc.
#[derive(Debug, Default)]
pub struct KnnRule;

impl OptimizerRule for KnnRule {
    fn name(&self) -> &str {
        "silt_knn"
    }

    fn apply_order(&self) -> Option<ApplyOrder> {
        Some(ApplyOrder::TopDown)
    }

    fn rewrite(
        &self,
        plan: LogicalPlan,
        _config: &dyn OptimizerConfig,
    ) -> DfResult<Transformed<LogicalPlan>> {
        let LogicalPlan::Sort(sort) = &plan else {
            return Ok(Transformed::no(plan));
        };
        let (Some(k), [se]) = (sort.fetch, sort.expr.as_slice()) else {
            return Ok(Transformed::no(plan));
        };
        // NULLS FIRST would put rows without a geometry first: not a kNN.
        if !se.asc || se.nulls_first {
            return Ok(Transformed::no(plan));
        }
        // The scan yields the k nearest, nearest first, and what lies
        // between it and the sort (projections, aliases) keeps that order:
        // the sort goes (see `SiltQueryPlanner` for the one partition).
        match knn_input(&sort.input, se.expr.clone(), k) {
            Some(input) => Ok(Transformed::yes(input)),
            None => Ok(Transformed::no(plan)),
        }
    }
}

/// Rebuild `plan` with its Silt scan answering the kNN of `expr`, if
/// `expr` resolves to `ST_Distance(indexed column, constant point)`.
fn knn_input(plan: &LogicalPlan, expr: Expr, k: usize) -> Option<LogicalPlan> {
    match plan {
        LogicalPlan::Projection(p) => {
            let resolved = expr
                .transform(|e| match &e {
                    Expr::Column(c) => match p.schema.index_of_column(c) {
                        Ok(i) => Ok(Transformed::yes(p.expr[i].clone().unalias())),
                        Err(_) => Ok(Transformed::no(e)),
                    },
                    _ => Ok(Transformed::no(e)),
                })
                .ok()?
                .data;
            let input = knn_input(&p.input, resolved, k)?;
            Projection::try_new_with_schema(p.expr.clone(), Arc::new(input), p.schema.clone())
                .ok()
                .map(LogicalPlan::Projection)
        }
        LogicalPlan::SubqueryAlias(a) => {
            let input = knn_input(&a.input, expr, k)?;
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
            if table.knn().is_some() {
                return None;
            }
            let Expr::ScalarFunction(sf) = expr.unalias() else {
                return None;
            };
            if udf::func_of(&sf.func) != Some(Func::Distance) {
                return None;
            }
            let (col, other) = match (sf.args.first()?, sf.args.get(1)?) {
                (Expr::Column(c), other) | (other, Expr::Column(c)) => (c.clone(), other),
                _ => return None,
            };
            // A point with parameters (a cached plan's shape) is bound
            // before the scan runs (`plan_cache::bind`).
            let (x, y, point) = if crate::plan_cache::has_param(other) {
                if !crate::table::is_const(other) {
                    return None;
                }
                (f64::NAN, f64::NAN, Some(other.clone()))
            } else {
                let Geometry::Point { x, y } = const_geometry(other)? else {
                    return None;
                };
                if !(x.is_finite() && (-90.0..=90.0).contains(&y)) {
                    return None;
                }
                (x, y, None)
            };
            if !table.columns().iter().any(|c| c.name == col.name) {
                return None;
            }
            let (index, _) = table.spatial_index(&col.name, true)?;
            let knn = table.with_knn(KnnSpec {
                index,
                column: col.name.clone(),
                lon: x,
                lat: y,
                k,
                point,
            });
            Some(LogicalPlan::TableScan(TableScan {
                source: provider_as_source(Arc::new(knn)),
                ..scan.clone()
            }))
        }
        _ => None,
    }
}

/// The predicate of a spatial join.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum SpatialPred {
    Intersects,
    DWithin(f64),
}

/// The logical index nested-loop spatial join (see the module doc).
#[derive(Debug, Clone)]
pub struct SpatialJoinNode {
    probe: LogicalPlan,
    probe_col: Column,
    table: Arc<SiltTable>,
    index: String,
    indexed_col: String,
    /// Columns of the indexed table, as its scan projected them.
    projection: Vec<usize>,
    pred: SpatialPred,
    indexed_left: bool,
    /// Filters pushed into the indexed table's scan (unqualified), applied
    /// to its records before they are joined.
    indexed_filters: Vec<Expr>,
    schema: DFSchemaRef,
}

impl SpatialJoinNode {
    fn key(&self) -> (String, &str, &Column, &[usize], bool, String) {
        (
            self.table.dataset().name().to_owned(),
            self.index.as_str(),
            &self.probe_col,
            self.projection.as_slice(),
            self.indexed_left,
            format!("{:?}", self.pred),
        )
    }
}

impl PartialEq for SpatialJoinNode {
    fn eq(&self, o: &Self) -> bool {
        self.key() == o.key() && self.probe == o.probe && self.indexed_filters == o.indexed_filters
    }
}
impl Eq for SpatialJoinNode {}
impl Hash for SpatialJoinNode {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.key().hash(state);
        self.probe.hash(state);
        self.indexed_filters.hash(state);
    }
}
impl PartialOrd for SpatialJoinNode {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        (self == o).then_some(std::cmp::Ordering::Equal)
    }
}

impl UserDefinedLogicalNodeCore for SpatialJoinNode {
    fn name(&self) -> &str {
        "SpatialJoin"
    }

    fn inputs(&self) -> Vec<&LogicalPlan> {
        vec![&self.probe]
    }

    fn schema(&self) -> &DFSchemaRef {
        &self.schema
    }

    fn expressions(&self) -> Vec<Expr> {
        vec![Expr::Column(self.probe_col.clone())]
    }

    fn fmt_for_explain(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(
            f,
            "SpatialJoin: probe={} -> {}.{} via rtree index {} ({})",
            self.probe_col,
            self.table.dataset().name(),
            self.indexed_col,
            self.index,
            match self.pred {
                SpatialPred::Intersects => "intersects".to_owned(),
                SpatialPred::DWithin(m) => format!("within {m} m"),
            }
        )?;
        if !self.indexed_filters.is_empty() {
            let fs: Vec<String> = self.indexed_filters.iter().map(|e| e.to_string()).collect();
            write!(f, ", filters=[{}]", fs.join(", "))?;
        }
        Ok(())
    }

    fn with_exprs_and_inputs(&self, exprs: Vec<Expr>, inputs: Vec<LogicalPlan>) -> DfResult<Self> {
        let mut n = self.clone();
        if let Some(p) = inputs.into_iter().next() {
            n.probe = p;
        }
        if let Some(Expr::Column(c)) = exprs.into_iter().next() {
            n.probe_col = c;
        }
        Ok(n)
    }
}

/// See the module doc.
#[derive(Debug, Default)]
pub struct SpatialJoinRule;

impl OptimizerRule for SpatialJoinRule {
    fn name(&self) -> &str {
        "silt_spatial_join"
    }

    fn apply_order(&self) -> Option<ApplyOrder> {
        Some(ApplyOrder::BottomUp)
    }

    fn rewrite(
        &self,
        plan: LogicalPlan,
        _config: &dyn OptimizerConfig,
    ) -> DfResult<Transformed<LogicalPlan>> {
        let LogicalPlan::Join(j) = &plan else {
            return Ok(Transformed::no(plan));
        };
        match rewrite_join(j) {
            Some(p) => Ok(Transformed::yes(p)),
            None => Ok(Transformed::no(plan)),
        }
    }
}

/// A plain Silt scan (optionally aliased) with nothing pushed into it.
fn plain_scan(
    plan: &LogicalPlan,
) -> Option<(&TableScan, Arc<dyn datafusion::datasource::TableProvider>)> {
    let scan = match plan {
        LogicalPlan::TableScan(s) => s,
        LogicalPlan::SubqueryAlias(a) => match a.input.as_ref() {
            LogicalPlan::TableScan(s) => s,
            _ => return None,
        },
        _ => return None,
    };
    if scan.fetch.is_some() {
        return None;
    }
    let p = silt_table(scan)?;
    if as_silt(&p)?.knn().is_some() {
        return None;
    }
    Some((scan, p))
}

fn rewrite_join(j: &Join) -> Option<LogicalPlan> {
    if j.join_type != JoinType::Inner || !j.on.is_empty() {
        return None;
    }
    let filter = j.filter.as_ref()?;
    let conj = split_conjunction(filter);
    for (ci, c) in conj.iter().enumerate() {
        let Expr::ScalarFunction(sf) = c else {
            continue;
        };
        let pred = match udf::func_of(&sf.func) {
            Some(Func::Intersects) => SpatialPred::Intersects,
            Some(Func::DWithin) => {
                let m = lit_metres(sf.args.get(2)?)?;
                SpatialPred::DWithin(m)
            }
            _ => continue,
        };
        let (Some(Expr::Column(a)), Some(Expr::Column(b))) = (sf.args.first(), sf.args.get(1))
        else {
            continue;
        };
        let (lcol, rcol) = if j.left.schema().has_column(a) && j.right.schema().has_column(b) {
            (a, b)
        } else if j.left.schema().has_column(b) && j.right.schema().has_column(a) {
            (b, a)
        } else {
            continue;
        };
        for indexed_left in [false, true] {
            let (side, probe, icol, pcol) = if indexed_left {
                (&j.left, &j.right, lcol, rcol)
            } else {
                (&j.right, &j.left, rcol, lcol)
            };
            let Some((scan, provider)) = plain_scan(side) else {
                continue;
            };
            let Some(table) = as_silt(&provider) else {
                continue;
            };
            let Some((index, _)) = table.spatial_index(&icol.name, true) else {
                continue;
            };
            let projection = scan
                .projection
                .clone()
                .unwrap_or_else(|| (0..table.columns().len()).collect());
            let node = SpatialJoinNode {
                probe: probe.as_ref().clone(),
                probe_col: pcol.clone(),
                table: Arc::new(SiltTable::new(table.dataset().clone())),
                index,
                indexed_col: icol.name.clone(),
                projection,
                pred,
                indexed_left,
                indexed_filters: scan.filters.iter().map(crate::table::strip).collect(),
                schema: j.schema.clone(),
            };
            let plan = LogicalPlan::Extension(Extension {
                node: Arc::new(node),
            });
            let rest: Vec<Expr> = conj
                .iter()
                .enumerate()
                .filter(|(i, _)| *i != ci)
                .map(|(_, e)| (*e).clone())
                .collect();
            return match conjunction(rest) {
                None => Some(plan),
                Some(pred) => Filter::try_new(pred, Arc::new(plan))
                    .ok()
                    .map(LogicalPlan::Filter),
            };
        }
    }
    None
}

fn lit_metres(e: &Expr) -> Option<f64> {
    let m = match e {
        Expr::Literal(v, _) => v.to_string().parse::<f64>().ok()?,
        Expr::Cast(c) => return lit_metres(&c.expr),
        _ => return None,
    };
    (m.is_finite() && m >= 0.0).then_some(m)
}

/// Plans [`SpatialJoinNode`] as [`SpatialJoinExec`].
#[derive(Debug, Default)]
pub struct SiltExtensionPlanner;

#[async_trait]
impl ExtensionPlanner for SiltExtensionPlanner {
    async fn plan_extension(
        &self,
        _planner: &dyn PhysicalPlanner,
        node: &dyn UserDefinedLogicalNode,
        logical_inputs: &[&LogicalPlan],
        physical_inputs: &[Arc<dyn ExecutionPlan>],
        session: &dyn Session,
        _planning_ctx: &PhysicalPlanningContext,
    ) -> DfResult<Option<Arc<dyn ExecutionPlan>>> {
        let Some(n) = node.as_any().downcast_ref::<SpatialJoinNode>() else {
            return Ok(None);
        };
        let (Some(probe_logical), Some(probe)) = (logical_inputs.first(), physical_inputs.first())
        else {
            return Err(DataFusionError::Internal(
                "SpatialJoin without input".into(),
            ));
        };
        let probe_idx = probe_logical.schema().index_of_column(&n.probe_col)?;
        let all = n.table.columns();
        let cols: Vec<ColumnInfo> = n
            .projection
            .iter()
            .filter_map(|i| all.get(*i).cloned())
            .collect();
        let filter = match conjunction(n.indexed_filters.clone()) {
            None => None,
            Some(e) => {
                let full = convert::schema_of(all);
                let dfs = DFSchema::try_from(full.as_ref().clone())?;
                Some(IndexedFilter {
                    expr: session.create_physical_expr(e, &dfs)?,
                    schema: full,
                    cols: all.to_vec(),
                })
            }
        };
        Ok(Some(Arc::new(SpatialJoinExec::new(
            probe.clone(),
            probe_idx,
            n.table.dataset().clone(),
            n.index.clone(),
            n.indexed_col.clone(),
            cols,
            n.pred,
            n.indexed_left,
            filter,
            Arc::new(n.schema.as_arrow().clone()),
        ))))
    }
}

/// Whether a plan scans a Silt table through its kNN search.
pub fn has_knn(plan: &LogicalPlan) -> bool {
    plan.exists(|p| {
        Ok(match p {
            LogicalPlan::TableScan(scan) => {
                silt_table(scan).is_some_and(|t| as_silt(&t).is_some_and(|t| t.knn().is_some()))
            }
            _ => false,
        })
    })
    .unwrap_or(false)
}

/// A query planner that knows [`SpatialJoinNode`].
#[derive(Debug, Default)]
pub struct SiltQueryPlanner;

#[async_trait]
impl QueryPlanner for SiltQueryPlanner {
    async fn create_physical_plan(
        &self,
        logical_plan: &LogicalPlan,
        session_state: &dyn Session,
    ) -> DfResult<Arc<dyn ExecutionPlan>> {
        let planner = DefaultPhysicalPlanner::with_extension_planners(vec![
            Arc::new(SiltExtensionPlanner),
            Arc::new(crate::view_rewrite::ViewJoinPlanner),
        ]);
        // A kNN scan's order is the answer's order (its sort is gone, see
        // `KnnRule`): one partition, so that no repartition reorders it.
        if session_state.config().target_partitions() > 1 && has_knn(logical_plan) {
            let Some(state) = session_state
                .as_any()
                .downcast_ref::<datafusion::execution::session_state::SessionState>()
            else {
                return Err(DataFusionError::Internal(
                    "kNN plans need DataFusion's SessionState".to_owned(),
                ));
            };
            let mut one = state.clone();
            one.config_mut().options_mut().execution.target_partitions = 1;
            return planner.create_physical_plan(logical_plan, &one).await;
        }
        planner
            .create_physical_plan(logical_plan, session_state)
            .await
    }
}

/// Filters on the indexed table, evaluated on its records.
#[derive(Debug, Clone)]
pub struct IndexedFilter {
    expr: Arc<dyn PhysicalExpr>,
    schema: SchemaRef,
    cols: Vec<ColumnInfo>,
}

/// Index nested-loop spatial join: each probe batch's geometries search the
/// R-tree of the indexed dataset.
pub struct SpatialJoinExec {
    probe: Arc<dyn ExecutionPlan>,
    probe_idx: usize,
    ds: Arc<Dataset>,
    index: String,
    indexed_col: String,
    cols: Vec<ColumnInfo>,
    pred: SpatialPred,
    indexed_left: bool,
    filter: Option<IndexedFilter>,
    schema: SchemaRef,
    props: Arc<PlanProperties>,
}

impl fmt::Debug for SpatialJoinExec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SpatialJoinExec({}, {})", self.ds.name(), self.index)
    }
}

impl SpatialJoinExec {
    #[allow(clippy::too_many_arguments)]
    fn new(
        probe: Arc<dyn ExecutionPlan>,
        probe_idx: usize,
        ds: Arc<Dataset>,
        index: String,
        indexed_col: String,
        cols: Vec<ColumnInfo>,
        pred: SpatialPred,
        indexed_left: bool,
        filter: Option<IndexedFilter>,
        schema: SchemaRef,
    ) -> SpatialJoinExec {
        let parts = probe.properties().partitioning.partition_count();
        let props = PlanProperties::new(
            EquivalenceProperties::new(schema.clone()),
            Partitioning::UnknownPartitioning(parts),
            EmissionType::Incremental,
            Boundedness::Bounded,
        );
        SpatialJoinExec {
            probe,
            probe_idx,
            ds,
            index,
            indexed_col,
            cols,
            pred,
            indexed_left,
            filter,
            schema,
            props: Arc::new(props),
        }
    }
}

impl DisplayAs for SpatialJoinExec {
    fn fmt_as(&self, _t: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        write!(
            f,
            "SpatialJoinExec: index nested loop, probe column #{} -> dataset={} access=rtree({}) index={} {}",
            self.probe_idx,
            self.ds.name(),
            self.indexed_col,
            self.index,
            match self.pred {
                SpatialPred::Intersects => "intersects".to_owned(),
                SpatialPred::DWithin(m) => format!("within-distance {m} m"),
            }
        )?;
        if let Some(flt) = &self.filter {
            write!(f, ", filter={}", flt.expr)?;
        }
        Ok(())
    }
}

impl ExecutionPlan for SpatialJoinExec {
    fn name(&self) -> &str {
        "SpatialJoinExec"
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        &self.props
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        vec![&self.probe]
    }

    fn apply_expressions(
        &self,
        _f: &mut dyn FnMut(&Arc<dyn PhysicalExpr>) -> DfResult<TreeNodeRecursion>,
    ) -> DfResult<TreeNodeRecursion> {
        Ok(TreeNodeRecursion::Continue)
    }

    fn with_new_children(
        self: Arc<Self>,
        children: Vec<Arc<dyn ExecutionPlan>>,
    ) -> DfResult<Arc<dyn ExecutionPlan>> {
        let Some(probe) = children.into_iter().next() else {
            return Err(DataFusionError::Internal(
                "SpatialJoinExec needs one child".into(),
            ));
        };
        Ok(Arc::new(SpatialJoinExec::new(
            probe,
            self.probe_idx,
            self.ds.clone(),
            self.index.clone(),
            self.indexed_col.clone(),
            self.cols.clone(),
            self.pred,
            self.indexed_left,
            self.filter.clone(),
            self.schema.clone(),
        )))
    }

    fn execute(
        &self,
        partition: usize,
        context: Arc<TaskContext>,
    ) -> DfResult<SendableRecordBatchStream> {
        let ctl = crate::bounds::control(context.session_config().options()).cloned();
        let mut input = self.probe.execute(partition, context)?;
        let mut builder = RecordBatchReceiverStreamBuilder::new(self.schema.clone(), 2);
        let tx = builder.tx();
        let job = JoinJob {
            probe_idx: self.probe_idx,
            ds: self.ds.clone(),
            index: self.index.clone(),
            cols: self.cols.clone(),
            pred: self.pred,
            indexed_left: self.indexed_left,
            filter: self.filter.clone(),
            schema: self.schema.clone(),
            ctl,
        };
        let job = Arc::new(job);
        builder.spawn(async move {
            while let Some(batch) = input.next().await {
                let batch = batch?;
                let job = job.clone();
                let out = tokio::task::spawn_blocking(move || job.join_batch(&batch))
                    .await
                    .map_err(|e| DataFusionError::Execution(format!("join task failed: {e}")))??;
                if out.num_rows() > 0 && tx.send(Ok(out)).await.is_err() {
                    break;
                }
            }
            Ok(())
        });
        Ok(builder.build())
    }
}

struct JoinJob {
    probe_idx: usize,
    ds: Arc<Dataset>,
    index: String,
    cols: Vec<ColumnInfo>,
    pred: SpatialPred,
    indexed_left: bool,
    filter: Option<IndexedFilter>,
    schema: SchemaRef,
    /// The statement's stop switch, checked between hits.
    ctl: Option<Arc<crate::StatementControl>>,
}

impl JoinJob {
    fn join_batch(&self, batch: &RecordBatch) -> DfResult<RecordBatch> {
        let col = batch.column(self.probe_idx);
        let col = if col.data_type() == &DataType::Utf8 {
            col.clone()
        } else {
            cast(col, &DataType::Utf8)?
        };
        let texts = col.as_string::<i32>();
        let mut probes = Vec::new();
        for row in 0..batch.num_rows() {
            if texts.is_null(row) {
                continue;
            }
            let g = geom::parse_wkt(texts.value(row)).map_err(|e| {
                DataFusionError::Execution(format!("spatial join: probe row {row}: {e}"))
            })?;
            probes.push((Value::Int(row as i64), g));
        }
        let pred = match self.pred {
            SpatialPred::Intersects => JoinPredicate::Intersects,
            SpatialPred::DWithin(m) => JoinPredicate::WithinDistance(m),
        };
        let results = self
            .ds
            .spatial_join(&self.index, probes, pred, QueryOptions::default())
            .map_err(silt_err)?;
        let mut rows: Vec<u32> = Vec::new();
        let mut records: Vec<Value> = Vec::new();
        for (i, r) in results.enumerate() {
            if i % 1024 == 0
                && let Some(c) = &self.ctl
            {
                c.check()?;
            }
            let (id, hit) = r.map_err(silt_err)?;
            let rec = match hit.record {
                Some(r) => r,
                None => match self.ds.get(&hit.pk).map_err(silt_err)? {
                    Some(r) => r,
                    None => continue,
                },
            };
            let Some(row) = id.as_i64().and_then(|i| u32::try_from(i).ok()) else {
                continue;
            };
            rows.push(row);
            records.push(rec);
        }
        if let Some(f) = &self.filter {
            let all = convert::records_to_batch(&f.schema, &f.cols, &records)?;
            let mask = f.expr.evaluate(&all)?.into_array(all.num_rows())?;
            let mask = mask.as_boolean();
            let keep: Vec<bool> = (0..mask.len())
                .map(|i| !mask.is_null(i) && mask.value(i))
                .collect();
            let mut k = keep.iter();
            rows.retain(|_| k.next().copied().unwrap_or(false));
            let mut k = keep.iter();
            records.retain(|_| k.next().copied().unwrap_or(false));
        }
        let idx = UInt32Array::from(rows);
        let probe_cols: Vec<ArrayRef> = batch
            .columns()
            .iter()
            .map(|c| take(c.as_ref(), &idx, None))
            .collect::<Result<_, _>>()?;
        let indexed_cols: Vec<ArrayRef> = self
            .cols
            .iter()
            .map(|c| convert::column_from_records(c, &records))
            .collect();
        let columns: Vec<ArrayRef> = if self.indexed_left {
            indexed_cols.into_iter().chain(probe_cols).collect()
        } else {
            probe_cols.into_iter().chain(indexed_cols).collect()
        };
        let opts =
            datafusion::arrow::array::RecordBatchOptions::new().with_row_count(Some(records.len()));
        Ok(RecordBatch::try_new_with_options(
            self.schema.clone(),
            columns,
            &opts,
        )?)
    }
}
