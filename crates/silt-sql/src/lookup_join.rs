//! A join on an OR of key equalities as key lookups.
//!
//! `item i JOIN item j ON j.i_id = i.r1 OR j.i_id = i.r2 OR ...` has no
//! equi-join key, so DataFusion plans a nested-loop join: every row of
//! one side against every row of the other, a full scan of `j` for a
//! single `i`. When every disjunct equates the primary key (one field) of
//! the scanned side with an expression of the other side's columns, each
//! row of the other side names the few keys it can match. The
//! [`KeyLookupJoinRule`] replaces such an inner nested-loop join with
//! [`KeyLookupJoinExec`]: it streams the other side batch by batch, gets
//! the keys each batch names, and evaluates the join's own condition on
//! the pairs the gets found (so a pair matching two disjuncts appears
//! once, and the equality is SQL's, casts included).

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, RecordBatch, UInt32Array, UInt32Builder};
use datafusion::arrow::compute::{concat_batches, filter_record_batch, take};
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::common::JoinSide;
use datafusion::common::ScalarValue;
use datafusion::common::tree_node::{Transformed, TreeNode, TreeNodeRecursion};
use datafusion::config::ConfigOptions;
use datafusion::error::{DataFusionError, Result as DfResult};
use datafusion::execution::TaskContext;
use datafusion::logical_expr::{JoinType, Operator};
use datafusion::physical_expr::expressions::{BinaryExpr, Column};
use datafusion::physical_expr::projection::ProjectionRef;
use datafusion::physical_expr::{PhysicalExpr, ScalarFunctionExpr};
use datafusion::physical_optimizer::PhysicalOptimizerRule;
use datafusion::physical_plan::joins::NestedLoopJoinExec;
use datafusion::physical_plan::joins::utils::JoinFilter;
use datafusion::physical_plan::metrics::{ExecutionPlanMetricsSet, MetricBuilder, MetricsSet};
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, ExecutionPlan, ExecutionPlanProperties, PlanProperties,
    SendableRecordBatchStream,
};
use futures::TryStreamExt;
use silt::Value;

use crate::convert;
use crate::scan::SiltScanExec;
use crate::table::Access;

/// Replaces inner nested-loop joins on an OR of primary-key equalities
/// with [`KeyLookupJoinExec`].
#[derive(Debug, Default)]
pub struct KeyLookupJoinRule;

impl PhysicalOptimizerRule for KeyLookupJoinRule {
    fn optimize(
        &self,
        plan: Arc<dyn ExecutionPlan>,
        _config: &ConfigOptions,
    ) -> DfResult<Arc<dyn ExecutionPlan>> {
        plan.transform_up(|node| {
            let Some(nlj) = node.downcast_ref::<NestedLoopJoinExec>() else {
                return Ok(Transformed::no(node));
            };
            match KeyLookupJoinExec::try_from_join(nlj)? {
                Some(exec) => Ok(Transformed::yes(Arc::new(exec) as Arc<dyn ExecutionPlan>)),
                None => Ok(Transformed::no(node)),
            }
        })
        .map(|t| t.data)
    }

    fn name(&self) -> &str {
        "silt_key_lookup_join"
    }

    fn schema_check(&self) -> bool {
        true
    }
}

/// An inner join whose right side is read by key: the keys each batch of
/// the left side names (one expression of its columns per disjunct),
/// then the join's condition on the pairs found.
#[derive(Debug)]
pub struct KeyLookupJoinExec {
    left: Arc<dyn ExecutionPlan>,
    /// The right side's scan (a full scan of the dataset), read only by
    /// key here.
    scan: Arc<SiltScanExec>,
    /// Per disjunct, the left side's expression the key equals (over the
    /// left side's columns).
    keys: Vec<Arc<dyn PhysicalExpr>>,
    /// The key's column in the scan's output.
    key_column: usize,
    filter: JoinFilter,
    projection: Option<ProjectionRef>,
    schema: SchemaRef,
    props: Arc<PlanProperties>,
    metrics: ExecutionPlanMetricsSet,
}

impl KeyLookupJoinExec {
    /// This operator in place of `nlj`, when its condition is an OR of
    /// equalities of the right side's primary key with expressions of
    /// the left side only.
    fn try_from_join(nlj: &NestedLoopJoinExec) -> DfResult<Option<KeyLookupJoinExec>> {
        if *nlj.join_type() != JoinType::Inner {
            return Ok(None);
        }
        let Some(filter) = nlj.filter() else {
            return Ok(None);
        };
        let Some(scan) = SiltScanExec::under_repartition(nlj.right()) else {
            return Ok(None);
        };
        let scan = Arc::new(scan.clone());
        if !matches!(scan.access(), Access::Full) || !scan.plain() {
            return Ok(None);
        }
        let pk = &scan.dataset().def().primary_key;
        let [pk] = pk.as_slice() else {
            return Ok(None);
        };
        let Some(key_column) = scan
            .columns()
            .iter()
            .position(|c| &c.name == pk && c.ty != silt::FieldType::Any)
        else {
            return Ok(None);
        };
        let indices = filter.column_indices();
        let mut disjuncts = Vec::new();
        split(unchecked(filter.expression()), Operator::Or, &mut disjuncts);
        let mut keys = Vec::with_capacity(disjuncts.len());
        for d in disjuncts {
            let Some(b) = d.downcast_ref::<BinaryExpr>() else {
                return Ok(None);
            };
            if *b.op() != Operator::Eq {
                return Ok(None);
            }
            let is_key = |e: &Arc<dyn PhysicalExpr>| {
                e.downcast_ref::<Column>().is_some_and(|c| {
                    indices
                        .get(c.index())
                        .is_some_and(|ci| ci.side == JoinSide::Right && ci.index == key_column)
                })
            };
            let other = if is_key(b.left()) {
                b.right()
            } else if is_key(b.right()) {
                b.left()
            } else {
                return Ok(None);
            };
            match on_left(other, filter) {
                Some(e) => keys.push(e),
                None => return Ok(None),
            }
        }
        if keys.is_empty() {
            return Ok(None);
        }
        let left = nlj.left().clone();
        let schema = nlj.schema();
        let props = Arc::new(PlanProperties::new(
            datafusion::physical_expr::EquivalenceProperties::new(schema.clone()),
            datafusion::physical_plan::Partitioning::UnknownPartitioning(
                left.output_partitioning().partition_count(),
            ),
            datafusion::physical_plan::execution_plan::EmissionType::Incremental,
            datafusion::physical_plan::execution_plan::Boundedness::Bounded,
        ));
        Ok(Some(KeyLookupJoinExec {
            left,
            scan,
            keys,
            key_column,
            filter: filter.clone(),
            projection: nlj.projection().clone(),
            schema,
            props,
            metrics: ExecutionPlanMetricsSet::new(),
        }))
    }
}

/// `e` without the stop check a statement under a [`StatementControl`]
/// puts around a join's filter ([`crate::bounds::check_join_filters`]):
/// the condition it checks is the join's. The operator keeps the checked
/// filter for the pairs it finds, and its gets are bounded by the other
/// side's rows, so the statement stays stoppable.
///
/// [`StatementControl`]: crate::StatementControl
fn unchecked(e: &Arc<dyn PhysicalExpr>) -> &Arc<dyn PhysicalExpr> {
    match e.downcast_ref::<ScalarFunctionExpr>() {
        Some(f) if f.name() == crate::bounds::STOP_CHECK && f.args().len() == 1 => &f.args()[0],
        _ => e,
    }
}

/// The operands of `e`'s top-level `op`s (`a OR b OR c`).
fn split<'a>(e: &'a Arc<dyn PhysicalExpr>, op: Operator, out: &mut Vec<&'a Arc<dyn PhysicalExpr>>) {
    match e.downcast_ref::<BinaryExpr>() {
        Some(b) if *b.op() == op => {
            split(b.left(), op, out);
            split(b.right(), op, out);
        }
        _ => out.push(e),
    }
}

/// `e` (over the join filter's columns) over the left side's columns,
/// when it reads only left columns.
fn on_left(e: &Arc<dyn PhysicalExpr>, filter: &JoinFilter) -> Option<Arc<dyn PhysicalExpr>> {
    let indices = filter.column_indices();
    let mut only_left = true;
    e.apply(|n| {
        if let Some(c) = n.downcast_ref::<Column>()
            && indices
                .get(c.index())
                .is_none_or(|ci| ci.side != JoinSide::Left)
        {
            only_left = false;
            return Ok(TreeNodeRecursion::Stop);
        }
        Ok(TreeNodeRecursion::Continue)
    })
    .ok()?;
    if !only_left {
        return None;
    }
    Arc::clone(e)
        .transform(|n| match n.downcast_ref::<Column>() {
            Some(c) => {
                let ci = &indices[c.index()];
                Ok(Transformed::yes(
                    Arc::new(Column::new(c.name(), ci.index)) as Arc<dyn PhysicalExpr>
                ))
            }
            None => Ok(Transformed::no(n)),
        })
        .ok()
        .map(|t| t.data)
}

impl DisplayAs for KeyLookupJoinExec {
    fn fmt_as(&self, _t: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        let keys: Vec<String> = self.keys.iter().map(|k| k.to_string()).collect();
        write!(
            f,
            "KeyLookupJoinExec: dataset={}, key={} IN ({}), filter={}",
            self.scan.dataset().name(),
            self.scan.columns()[self.key_column].name,
            keys.join(", "),
            self.filter.expression()
        )
    }
}

impl ExecutionPlan for KeyLookupJoinExec {
    fn name(&self) -> &str {
        "KeyLookupJoinExec"
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        &self.props
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        vec![&self.left]
    }

    fn apply_expressions(
        &self,
        f: &mut dyn FnMut(&Arc<dyn PhysicalExpr>) -> DfResult<TreeNodeRecursion>,
    ) -> DfResult<TreeNodeRecursion> {
        for k in &self.keys {
            if f(k)? == TreeNodeRecursion::Stop {
                return Ok(TreeNodeRecursion::Stop);
            }
        }
        f(self.filter.expression())
    }

    fn with_new_children(
        self: Arc<Self>,
        children: Vec<Arc<dyn ExecutionPlan>>,
    ) -> DfResult<Arc<dyn ExecutionPlan>> {
        let [left] = children.as_slice() else {
            return Err(DataFusionError::Internal(
                "KeyLookupJoinExec takes one child".into(),
            ));
        };
        let props = Arc::new(PlanProperties::new(
            self.props.eq_properties.clone(),
            datafusion::physical_plan::Partitioning::UnknownPartitioning(
                left.output_partitioning().partition_count(),
            ),
            self.props.emission_type,
            self.props.boundedness,
        ));
        Ok(Arc::new(KeyLookupJoinExec {
            left: left.clone(),
            scan: self.scan.clone(),
            keys: self.keys.clone(),
            key_column: self.key_column,
            filter: self.filter.clone(),
            projection: self.projection.clone(),
            schema: self.schema.clone(),
            props,
            metrics: self.metrics.clone(),
        }))
    }

    fn metrics(&self) -> Option<MetricsSet> {
        Some(self.metrics.clone_inner())
    }

    fn execute(
        &self,
        partition: usize,
        context: Arc<TaskContext>,
    ) -> DfResult<SendableRecordBatchStream> {
        let left = self.left.execute(partition, context.clone())?;
        let gets = MetricBuilder::new(&self.metrics).global_counter("keys_looked_up");
        let job = Arc::new(Job {
            scan: self.scan.clone(),
            keys: self.keys.clone(),
            key_column: self.key_column,
            filter: self.filter.clone(),
            projection: self.projection.clone(),
            schema: self.schema.clone(),
        });
        let stream = left.and_then(move |batch| {
            let (job, context, gets) = (job.clone(), context.clone(), gets.clone());
            async move { job.join(batch, context, gets).await }
        });
        Ok(Box::pin(RecordBatchStreamAdapter::new(
            self.schema.clone(),
            stream,
        )))
    }
}

/// What each left batch is joined with.
struct Job {
    scan: Arc<SiltScanExec>,
    keys: Vec<Arc<dyn PhysicalExpr>>,
    key_column: usize,
    filter: JoinFilter,
    projection: Option<ProjectionRef>,
    schema: SchemaRef,
}

impl Job {
    /// The joined rows of one left batch.
    async fn join(
        &self,
        left: RecordBatch,
        context: Arc<TaskContext>,
        gets: datafusion::physical_plan::metrics::Count,
    ) -> DfResult<RecordBatch> {
        let key_ty = self.scan.columns()[self.key_column].ty;
        // Each disjunct's key per left row, and every distinct key.
        let mut per_key: Vec<ArrayRef> = Vec::with_capacity(self.keys.len());
        let mut wanted: Vec<Value> = Vec::new();
        for k in &self.keys {
            let a = k.evaluate(&left)?.into_array(left.num_rows())?;
            for i in 0..a.len() {
                if let Some(v) = key_value(&a, i, key_ty)? {
                    wanted.push(v);
                }
            }
            per_key.push(a);
        }
        wanted.sort_by(silt::value::compare_key_parts);
        wanted.dedup();
        gets.add(wanted.len());
        let right = if wanted.is_empty() {
            RecordBatch::new_empty(self.scan.schema())
        } else {
            let s = self.scan.with_access(Access::GetMany(wanted));
            let batches: Vec<RecordBatch> = s.execute(0, context)?.try_collect().await?;
            concat_batches(&self.scan.schema(), &batches)?
        };
        // The right row of each key found.
        let right_keys = right.column(self.key_column);
        let mut row_of: HashMap<Value, u32> = HashMap::with_capacity(right.num_rows());
        for j in 0..right.num_rows() {
            if let Some(v) = key_value(right_keys, j, key_ty)? {
                let j = u32::try_from(j).map_err(|_| {
                    DataFusionError::Execution("a key lookup found over 4 G rows".into())
                })?;
                row_of.insert(v, j);
            }
        }
        // Candidate pairs, each once per left row.
        let (mut li, mut ri) = (UInt32Builder::new(), UInt32Builder::new());
        let mut seen: Vec<u32> = Vec::new();
        for i in 0..left.num_rows() {
            seen.clear();
            for a in &per_key {
                if let Some(v) = key_value(a, i, key_ty)?
                    && let Some(&j) = row_of.get(&v)
                    && !seen.contains(&j)
                {
                    seen.push(j);
                    li.append_value(i as u32);
                    ri.append_value(j);
                }
            }
        }
        let (li, ri) = (li.finish(), ri.finish());
        let joined = self.pairs(&left, &right, &li, &ri)?;
        let joined = match &self.projection {
            Some(p) => joined.project(p)?,
            None => joined,
        };
        Ok(RecordBatch::try_new(
            self.schema.clone(),
            joined.columns().to_vec(),
        )?)
    }

    /// The pairs `(li[n], ri[n])` that pass the join's condition, as the
    /// join's rows (the left's columns, then the right's).
    fn pairs(
        &self,
        left: &RecordBatch,
        right: &RecordBatch,
        li: &UInt32Array,
        ri: &UInt32Array,
    ) -> DfResult<RecordBatch> {
        let side =
            |ci: &datafusion::physical_plan::joins::utils::ColumnIndex| -> DfResult<ArrayRef> {
                let (batch, idx) = match ci.side {
                    JoinSide::Left => (left, li),
                    JoinSide::Right => (right, ri),
                    JoinSide::None => {
                        return Err(DataFusionError::Internal(
                            "a key lookup join's filter reads a mark column".into(),
                        ));
                    }
                };
                Ok(take(batch.column(ci.index), idx, None)?)
            };
        let filter_cols = self
            .filter
            .column_indices()
            .iter()
            .map(side)
            .collect::<DfResult<Vec<_>>>()?;
        let intermediate = RecordBatch::try_new(self.filter.schema().clone(), filter_cols)?;
        let keep = self
            .filter
            .expression()
            .evaluate(&intermediate)?
            .into_array(intermediate.num_rows())?;
        let keep = keep
            .as_any()
            .downcast_ref::<datafusion::arrow::array::BooleanArray>()
            .ok_or_else(|| DataFusionError::Internal("a join filter that is not boolean".into()))?;
        let mut cols: Vec<ArrayRef> = Vec::with_capacity(left.num_columns() + right.num_columns());
        for c in left.columns() {
            cols.push(take(c, li, None)?);
        }
        for c in right.columns() {
            cols.push(take(c, ri, None)?);
        }
        let all = unprojected_schema(left, right);
        let joined = RecordBatch::try_new(all, cols)?;
        Ok(filter_record_batch(&joined, keep)?)
    }
}

/// The join's rows before its projection: the left's columns, then the
/// right's.
fn unprojected_schema(left: &RecordBatch, right: &RecordBatch) -> SchemaRef {
    let fields: Vec<_> = left
        .schema()
        .fields()
        .iter()
        .chain(right.schema().fields().iter())
        .cloned()
        .collect();
    Arc::new(datafusion::arrow::datatypes::Schema::new(fields))
}

/// Row `i` of `a` as a key value of type `ty`; `None` for a null or a
/// value the key cannot hold (it matches no key).
fn key_value(a: &ArrayRef, i: usize, ty: silt::FieldType) -> DfResult<Option<Value>> {
    if a.is_null(i) {
        return Ok(None);
    }
    let s = ScalarValue::try_from_array(a.as_ref(), i)?;
    Ok(convert::scalar_to_value(&s, ty))
}
