//! The `SiltScan` operator: one partition that reads a snapshot of a
//! dataset through the access path [`crate::table::SiltTable`] chose, and
//! the record iterators of each access path (also used by DML sinks and
//! the spatial join).

use std::fmt;
use std::ops::Bound;
use std::sync::Arc;

use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::compute::{SortOptions, concat_batches};
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::common::Statistics;
use datafusion::common::stats::Precision;
use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::error::{DataFusionError, Result as DfResult};
use datafusion::execution::TaskContext;
use datafusion::physical_expr::expressions::Column as PhysColumn;
use datafusion::physical_expr::expressions::DynamicFilterPhysicalExpr;
use datafusion::physical_expr::{EquivalenceProperties, PhysicalExpr, PhysicalSortExpr};
use datafusion::physical_plan::execution_plan::{Boundedness, EmissionType};
use datafusion::physical_plan::filter_pushdown::{
    ChildPushdownResult, FilterPushdownPhase, FilterPushdownPropagation, PushedDown,
};
use datafusion::physical_plan::memory::MemoryStream;
use datafusion::physical_plan::metrics::{ExecutionPlanMetricsSet, MetricBuilder, MetricsSet};
use datafusion::physical_plan::statistics::StatisticsArgs;
use datafusion::physical_plan::stream::RecordBatchReceiverStreamBuilder;
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, ExecutionPlan, Partitioning, PlanProperties,
    SendableRecordBatchStream, SortOrderPushdownResult,
};
use futures::{FutureExt, TryStreamExt};
use silt::Dataset;
use silt::index::query::KeyRange;

use crate::StatementControl;
use crate::batch::{BatchBuilder, Rec};
use crate::column_cache::{ColumnCache, Units};
use crate::convert::{self, ColumnInfo};
use crate::error::silt_err;
use crate::meta_count::{self, CountDecisions, RunDecisions};
use crate::prefilter::PreFilter;
use crate::scan_metrics::ScanMetrics;
use crate::session::TxnSlot;

use crate::join_keys::{self, KeyedReads};
use crate::table::Access;

mod records;
pub(crate) use records::pk_bounds;
pub use records::{ReadSpec, open_records, open_records_in, read_fields};
use records::{Records, image_range};

/// The fewest data blocks of the largest component in each part of a
/// split scan (a few thousand records): smaller scans are not
/// worth a second thread.
const SPLIT_MIN_BLOCKS: usize = 16;

/// At most this many parts of a split scan of a table in a bucket (even
/// with more target partitions): a quarter of the readahead windows a
/// remote component keeps (`silt::storage::remote`), so four such scans
/// at once keep theirs.
const REMOTE_PARTS: usize = 4;

/// Silt's scan operator: one partition (or one per key range of a split
/// scan), reading a snapshot of the dataset through the chosen access path
/// when executed.
#[derive(Clone)]
pub struct SiltScanExec {
    ds: Arc<Dataset>,
    cols: Vec<ColumnInfo>,
    schema: SchemaRef,
    access: Access,
    limit: Option<usize>,
    /// Read in descending key order (a primary access path asked for it by
    /// `ORDER BY key DESC`, see [`ExecutionPlan::try_pushdown_sort`]).
    rev: bool,
    /// The key ranges of the output partitions of a scan split for
    /// parallel reading ([`ExecutionPlan::repartitioned`]); one partition
    /// reading the access path when `None`.
    parts: Option<Arc<Vec<KeyRange>>>,
    /// Feeds an UPDATE or DELETE: inside a transaction, the versions read
    /// are validated at commit.
    for_write: bool,
    props: Arc<PlanProperties>,
    /// A scan of no column over the whole dataset counts from metadata
    /// when it can ([`crate::meta_count`]).
    counts: Arc<CountDecisions>,
    /// A full scan reads column images when it can
    /// ([`crate::column_cache`]); decided once per run.
    images: Arc<RunDecisions<Option<Arc<Units>>>>,
    /// The build-side keys of the hash join this scan is the probe side
    /// of, once the join has them ([`crate::join_keys`]): a full scan
    /// reads only the rows they can match.
    join_keys: Option<Arc<DynamicFilterPhysicalExpr>>,
    /// What the join's keys make of a run, decided by its first partition
    /// to be read, the same for the others.
    keyed: Arc<RunDecisions<Option<KeyedReads>>>,
    /// What the join's keys made of the scan (EXPLAIN ANALYZE shows it).
    metrics: ExecutionPlanMetricsSet,
    /// Only the minimum and maximum of the columns are wanted
    /// ([`crate::extremes`]): when the zone maps decide them, the scan
    /// gives two rows (the minima, the maxima) instead of the records.
    extremes: Option<Arc<crate::extremes::ExtremeDecisions>>,
    /// Comparisons tried on each stored record before it is built
    /// ([`crate::prefilter`]); the filter above the scan decides.
    pre: Option<Arc<PreFilter>>,
}

impl fmt::Debug for SiltScanExec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SiltScanExec({}, {})", self.ds.name(), self.access)
    }
}

impl SiltScanExec {
    pub(crate) fn new(
        ds: Arc<Dataset>,
        all: &[ColumnInfo],
        projection: Vec<usize>,
        access: Access,
        limit: Option<usize>,
        for_write: bool,
    ) -> SiltScanExec {
        let cols: Vec<ColumnInfo> = projection
            .iter()
            .filter_map(|i| all.get(*i).cloned())
            .collect();
        let schema = convert::schema_of(&cols);
        let props = Self::props(&ds, &cols, &schema, &access, false);
        SiltScanExec {
            ds,
            cols,
            schema,
            access,
            limit,
            rev: false,
            parts: None,
            for_write,
            props,
            counts: Arc::default(),
            images: Arc::default(),
            join_keys: None,
            keyed: Arc::default(),
            metrics: ExecutionPlanMetricsSet::new(),
            extremes: None,
            pre: None,
        }
    }

    /// See [`SiltScanExec::pre`].
    pub(crate) fn with_prefilter(mut self, pre: Option<PreFilter>) -> SiltScanExec {
        self.pre = pre.map(Arc::new);
        self
    }

    /// See [`SiltScanExec::extremes`].
    pub(crate) fn with_extremes(mut self, on: bool) -> SiltScanExec {
        self.extremes = on.then(Arc::default);
        self
    }

    fn props(
        ds: &Dataset,
        cols: &[ColumnInfo],
        schema: &SchemaRef,
        access: &Access,
        rev: bool,
    ) -> Arc<PlanProperties> {
        Self::props_with(ds, cols, schema, access, rev, 1)
    }

    fn props_with(
        ds: &Dataset,
        cols: &[ColumnInfo],
        schema: &SchemaRef,
        access: &Access,
        rev: bool,
        partitions: usize,
    ) -> Arc<PlanProperties> {
        let eq = match key_ordering(ds, cols, access, rev) {
            Some(o) => EquivalenceProperties::new_with_orderings(schema.clone(), [o]),
            None => EquivalenceProperties::new(schema.clone()),
        };
        Arc::new(PlanProperties::new(
            eq,
            Partitioning::UnknownPartitioning(partitions),
            EmissionType::Incremental,
            Boundedness::Bounded,
        ))
    }

    /// This scan reading in the other direction.
    fn reversed(&self) -> SiltScanExec {
        let mut s = self.clone();
        s.rev = !self.rev;
        s.parts = None;
        s.props = Self::props(&self.ds, &self.cols, &self.schema, &self.access, s.rev);
        s
    }

    pub fn access(&self) -> &Access {
        &self.access
    }

    pub fn dataset(&self) -> &Arc<Dataset> {
        &self.ds
    }

    /// The columns it gives, in order.
    pub fn columns(&self) -> &[ColumnInfo] {
        &self.cols
    }

    /// It reads in key order, all of its access path, for a query (not
    /// the rows an UPDATE or DELETE changes): another path may read the
    /// same rows instead.
    pub(crate) fn plain(&self) -> bool {
        !self.for_write && !self.rev && self.limit.is_none()
    }

    /// The Silt scan `plan` is, under repartitioning (which changes which
    /// partition a row comes out of, nothing else).
    pub(crate) fn under_repartition(plan: &Arc<dyn ExecutionPlan>) -> Option<&SiltScanExec> {
        if let Some(s) = plan.downcast_ref::<SiltScanExec>() {
            return Some(s);
        }
        if plan
            .downcast_ref::<datafusion::physical_plan::repartition::RepartitionExec>()
            .is_some()
        {
            let child = plan.children().into_iter().next()?;
            return Self::under_repartition(child);
        }
        None
    }

    /// A scan of the first record in key order, or the last.
    pub(crate) fn key_end(&self, last: bool) -> SiltScanExec {
        let mut s = self.with_access(Access::Full);
        if last {
            s = s.reversed();
        }
        s.limit = Some(1);
        s
    }

    /// The same scan (one partition) through another access path.
    pub(crate) fn with_access(&self, access: Access) -> SiltScanExec {
        let mut s = self.clone();
        s.props = Self::props(&self.ds, &self.cols, &self.schema, &access, false);
        s.access = access;
        s.rev = false;
        s.parts = None;
        s.join_keys = None;
        s.keyed = Arc::default();
        s.counts = Arc::default();
        s.images = Arc::default();
        s.extremes = s.extremes.as_ref().map(|_| Arc::default());
        s.metrics = ExecutionPlanMetricsSet::new();
        s
    }
}

/// The order a scan's rows come in, when it is the primary key's: every
/// primary access path (a full scan, a key range, gets) reads in key order
/// (descending when `rev`), and for these field types the key encoding
/// orders values as SQL does (numbers numerically, strings and bytes
/// bytewise, `false` before `true`; key fields are never null). The
/// ordering covers the key fields that lead the key and are in the
/// projection. With it DataFusion drops the sort of `ORDER BY key` and
/// pushes `LIMIT` into the scan ([`ExecutionPlan::with_fetch`]), which then
/// reads only that many records.
fn key_ordering(
    ds: &Dataset,
    cols: &[ColumnInfo],
    access: &Access,
    rev: bool,
) -> Option<Vec<PhysicalSortExpr>> {
    use silt::FieldType;
    if !matches!(
        access,
        Access::Full | Access::Get(_) | Access::GetMany(_) | Access::PkRange { .. }
    ) {
        return None;
    }
    let mut ordering = Vec::new();
    for key in &ds.def().primary_key {
        let Some((i, col)) = cols.iter().enumerate().find(|(_, c)| &c.name == key) else {
            break;
        };
        let ordered = matches!(
            col.ty,
            FieldType::Int
                | FieldType::Double
                | FieldType::String
                | FieldType::Bool
                | FieldType::Binary
                | FieldType::Date
                | FieldType::Timestamp
                | FieldType::TimestampTz
        );
        if !ordered || !col.primary_key {
            break;
        }
        let expr: Arc<dyn PhysicalExpr> = Arc::new(PhysColumn::new(&col.name, i));
        ordering.push(PhysicalSortExpr::new(expr, SortOptions::new(rev, rev)));
    }
    (!ordering.is_empty()).then_some(ordering)
}

impl DisplayAs for SiltScanExec {
    fn fmt_as(&self, _t: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        let names: Vec<&str> = self.cols.iter().map(|c| c.name.as_str()).collect();
        write!(
            f,
            "SiltScan: dataset={}, access={}, projection=[{}]",
            self.ds.name(),
            self.access,
            names.join(", ")
        )?;
        if self.rev {
            f.write_str(", order=descending")?;
        }
        if let Some(p) = &self.parts {
            write!(f, ", parts={}", p.len())?;
        }
        if let Some(l) = self.limit {
            write!(f, ", limit={l}")?;
        }
        if let Some(k) = &self.join_keys {
            write!(f, ", join keys={k}")?;
        }
        if self.extremes.is_some() {
            f.write_str(", min/max from zone maps when exact")?;
        }
        if let Some(p) = &self.pre {
            write!(f, ", stored records tried on [{p}]")?;
        }
        // A brin path: what the zone maps let through, now.
        if let Access::Index {
            index,
            kind: silt::IndexKind::Brin,
            query: silt::Query::Range { lo, hi },
            ..
        } = &self.access
            && let Ok(r) = self.ds.zone_map_blocks(index, lo, hi)
        {
            if let Some(form) = r.form {
                write!(
                    f,
                    ", block range index ({}): {} of {} chunks, {} of {} blocks to read",
                    form.name().replace('_', " "),
                    r.chunks_read,
                    r.chunks,
                    r.blocks_read,
                    r.blocks
                )?;
            } else {
                write!(
                    f,
                    ", zone maps: {} of {} blocks to read",
                    r.blocks_read, r.blocks
                )?;
            }
            if r.image_chunks > 0 && read_fields(&self.cols).is_some() {
                write!(
                    f,
                    ", column images: {} of {} chunks to read",
                    r.image_chunks_read, r.image_chunks
                )?;
            }
        }
        Ok(())
    }
}

impl ExecutionPlan for SiltScanExec {
    fn name(&self) -> &str {
        "SiltScanExec"
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        &self.props
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        vec![]
    }

    fn apply_expressions(
        &self,
        f: &mut dyn FnMut(&Arc<dyn PhysicalExpr>) -> DfResult<TreeNodeRecursion>,
    ) -> DfResult<TreeNodeRecursion> {
        // The join computes its keys only for a plan that holds them.
        match &self.join_keys {
            Some(k) => f(&(k.clone() as Arc<dyn PhysicalExpr>)),
            None => Ok(TreeNodeRecursion::Continue),
        }
    }

    fn metrics(&self) -> Option<MetricsSet> {
        Some(self.metrics.clone_inner())
    }

    /// A plan run again from scratch (a recursive query's next step) has
    /// a join that makes new keys and no longer fills the ones this scan
    /// holds: it scans as without them until pushdown gives it new ones.
    fn reset_state(self: Arc<Self>) -> DfResult<Arc<dyn ExecutionPlan>> {
        let mut s = self.as_ref().clone();
        s.join_keys = None;
        s.keyed = Arc::default();
        s.counts = Arc::default();
        s.images = Arc::default();
        s.extremes = s.extremes.as_ref().map(|_| Arc::default());
        s.metrics = ExecutionPlanMetricsSet::new();
        Ok(Arc::new(s))
    }

    /// About how many rows the scan gives ([`crate::estimate`]): with it
    /// DataFusion builds a join's hash table from its smaller side, in one
    /// partition when that side is small, and the other side's scan can
    /// then read only what the keys match ([`crate::join_keys`]).
    fn statistics_from_inputs(
        &self,
        _input_stats: &[Arc<Statistics>],
        args: &StatisticsArgs,
    ) -> DfResult<Arc<Statistics>> {
        let mut rows = crate::estimate::rows(&self.ds, &self.access, self.limit);
        if args.partition().is_some() {
            rows = rows.div_ceil(self.props.partitioning.partition_count().max(1));
        }
        let mut s = Statistics::new_unknown(&self.schema);
        s.num_rows = Precision::Inexact(rows);
        Ok(Arc::new(s))
    }

    /// Takes a hash join's dynamic filter (its build-side keys, known
    /// when the join starts reading this side) into a full scan that reads
    /// records, reporting every filter as not applied: the join and any
    /// filter above still evaluate them.
    fn handle_child_pushdown_result(
        &self,
        phase: FilterPushdownPhase,
        child_pushdown_result: ChildPushdownResult,
        _config: &datafusion::config::ConfigOptions,
    ) -> DfResult<FilterPushdownPropagation<Arc<dyn ExecutionPlan>>> {
        let filters = vec![PushedDown::No; child_pushdown_result.parent_filters.len()];
        let takes = phase == FilterPushdownPhase::Post
            && self.join_keys.is_none()
            && matches!(self.access, Access::Full)
            && self.plain();
        let found = takes
            .then(|| {
                child_pushdown_result.parent_filters.iter().find_map(|r| {
                    let any: Arc<dyn std::any::Any + Send + Sync> = r.filter.clone();
                    any.downcast::<DynamicFilterPhysicalExpr>().ok()
                })
            })
            .flatten();
        let updated_node = found.map(|k| {
            let mut s = self.clone();
            s.join_keys = Some(k);
            Arc::new(s) as Arc<dyn ExecutionPlan>
        });
        Ok(FilterPushdownPropagation {
            filters,
            updated_node,
        })
    }

    fn with_new_children(
        self: Arc<Self>,
        _children: Vec<Arc<dyn ExecutionPlan>>,
    ) -> DfResult<Arc<dyn ExecutionPlan>> {
        Ok(self)
    }

    /// A `LIMIT` above the scan (with nothing in between that needs more
    /// rows, such as a filter, or the sort of `ORDER BY key` the scan's own
    /// order made needless) becomes the scan's: it reads only that many
    /// records, and reads them in batches no larger.
    fn with_fetch(&self, limit: Option<usize>) -> Option<Arc<dyn ExecutionPlan>> {
        let limit = match (self.limit, limit) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        let mut s = self.clone();
        s.limit = limit;
        Some(Arc::new(s))
    }

    fn fetch(&self) -> Option<usize> {
        self.limit
    }

    /// A full scan or key range that does not read the key (so nothing
    /// needs its order: aggregates, joins, filters on other columns) and has
    /// enough blocks is split into key ranges of about the same size
    /// ([`Dataset::split_keys`]), read in parallel, one per partition.
    fn repartitioned(
        &self,
        target_partitions: usize,
        _config: &datafusion::config::ConfigOptions,
    ) -> DfResult<Option<Arc<dyn ExecutionPlan>>> {
        let ordered = key_ordering(&self.ds, &self.cols, &self.access, self.rev).is_some();
        if target_partitions < 2
            || ordered
            || self.rev
            || self.for_write
            || self.limit.is_some()
            || self.parts.is_some()
        {
            return Ok(None);
        }
        let (lo, hi) = match &self.access {
            Access::Full => (Bound::Unbounded, Bound::Unbounded),
            Access::PkRange { lo, hi, .. } => pk_bounds(&self.ds, lo, hi).map_err(silt_err)?,
            _ => return Ok(None),
        };
        // A table in a bucket: its readers mostly wait on GETs, so two per
        // core keep the cores busy; but no more than REMOTE_PARTS, or
        // concurrent scans evict each other's readahead windows and every
        // block becomes a GET. (A scan of 751 MB in two parts took 4.6 s,
        // a brin search of the same blocks with four readers 2.6 s.)
        let n = if self.ds.def().remote.is_some() {
            (2 * target_partitions).min(REMOTE_PARTS)
        } else {
            target_partitions
        };
        let keys = self.ds.split_keys(
            lo.as_ref().map(Vec::as_slice),
            hi.as_ref().map(Vec::as_slice),
            n,
            SPLIT_MIN_BLOCKS,
        );
        if keys.is_empty() {
            return Ok(None);
        }
        let mut parts = Vec::with_capacity(keys.len() + 1);
        let mut from = lo;
        for k in keys {
            parts.push((from, Bound::Excluded(k.clone())));
            from = Bound::Included(k);
        }
        parts.push((from, hi));
        let n = parts.len();
        let mut s = self.clone();
        s.parts = Some(Arc::new(parts));
        s.props = Self::props_with(&self.ds, &self.cols, &self.schema, &self.access, false, n);
        Ok(Some(Arc::new(s)))
    }

    /// `ORDER BY key DESC` (the key fields leading the key, all descending):
    /// the same scan reading backwards, exactly in that order.
    fn try_pushdown_sort(
        &self,
        order: &[PhysicalSortExpr],
    ) -> DfResult<SortOrderPushdownResult<Arc<dyn ExecutionPlan>>> {
        let Some(mine) = key_ordering(&self.ds, &self.cols, &self.access, self.rev)
            .filter(|_| self.parts.is_none())
        else {
            return Ok(SortOrderPushdownResult::Unsupported);
        };
        let same_column = |a: &PhysicalSortExpr, b: &PhysicalSortExpr| match (
            a.expr.downcast_ref::<PhysColumn>(),
            b.expr.downcast_ref::<PhysColumn>(),
        ) {
            (Some(x), Some(y)) => x.index() == y.index(),
            _ => false,
        };
        let fits = |flip: bool| {
            !order.is_empty()
                && order.len() <= mine.len()
                && order.iter().zip(&mine).all(|(want, have)| {
                    same_column(want, have)
                        && want.options.descending == (have.options.descending != flip)
                })
        };
        if fits(false) {
            return Ok(SortOrderPushdownResult::Exact {
                inner: Arc::new(self.clone()),
            });
        }
        if fits(true) {
            return Ok(SortOrderPushdownResult::Exact {
                inner: Arc::new(self.reversed()),
            });
        }
        Ok(SortOrderPushdownResult::Unsupported)
    }

    fn execute(
        &self,
        partition: usize,
        context: Arc<TaskContext>,
    ) -> DfResult<SendableRecordBatchStream> {
        match &self.join_keys {
            Some(keys) => self.keyed(keys.clone(), partition, context),
            None => self.read(partition, context),
        }
    }
}

impl SiltScanExec {
    /// The scan with a join's keys: what they make of it is decided when
    /// the join first asks for rows, by then with its build side read.
    fn keyed(
        &self,
        keys: Arc<DynamicFilterPhysicalExpr>,
        partition: usize,
        context: Arc<TaskContext>,
    ) -> DfResult<SendableRecordBatchStream> {
        let this = self.clone();
        let schema = self.schema.clone();
        let opened = async move {
            // Decided once per run: partition 0 reads what the keys name
            // and the others nothing, or every partition reads its part.
            // Not complete (a join that reads this side first): as without.
            let reads = this.keyed.decide(&context, || {
                keys.wait_complete().now_or_never()?;
                let filter = keys.current().ok()?;
                join_keys::keyed_reads(&filter, &this.ds, &this.cols)
            });
            let Some(reads) = reads else {
                return this.read(partition, context);
            };
            let paths = MetricBuilder::new(&this.metrics).global_counter("join_key_paths");
            let scanned = MetricBuilder::new(&this.metrics).global_counter("join_keys_over_budget");
            // One partition reads what the keys name, the others nothing.
            if partition != 0 {
                return Ok(
                    Box::pin(MemoryStream::try_new(vec![], this.schema.clone(), None)?)
                        as SendableRecordBatchStream,
                );
            }
            let whole = |access: Access| this.with_access(access);
            match reads {
                KeyedReads::Primary(access) => {
                    paths.add(1);
                    whole(access).read(0, context)
                }
                KeyedReads::Each { accesses, index } => {
                    paths.add(accesses.len());
                    let budget = index.then(|| join_keys::index_budget(&this.ds));
                    let batches = this.read_each(accesses, budget, &context).await?;
                    match batches {
                        Some(b) => Ok(
                            Box::pin(MemoryStream::try_new(b, this.schema.clone(), None)?)
                                as SendableRecordBatchStream,
                        ),
                        None => {
                            scanned.add(1);
                            whole(Access::Full).read(0, context)
                        }
                    }
                }
            }
        };
        let stream = futures::stream::once(opened).try_flatten();
        Ok(Box::pin(RecordBatchStreamAdapter::new(schema, stream)))
    }

    /// The rows of each access path in turn, on a blocking thread; `None`
    /// once they pass `budget` rows.
    async fn read_each(
        &self,
        accesses: Vec<Access>,
        budget: Option<u64>,
        context: &Arc<TaskContext>,
    ) -> DfResult<Option<Vec<RecordBatch>>> {
        // Batches no larger than the budget's slack: the rows past it are
        // read for nothing.
        let batch_size = match budget {
            Some(_) => context.session_config().batch_size().clamp(1, 1024),
            None => context.session_config().batch_size().max(1),
        };
        let txn = TxnSlot::of(context.session_config()).map(|t| (t, self.for_write));
        let ctl = crate::bounds::control(context.session_config().options()).cloned();
        let (ds, cols, schema) = (self.ds.clone(), self.cols.clone(), self.schema.clone());
        let pre = self.pre.clone();
        crate::blocking::blocking_df(move || {
            let mut out = Vec::new();
            let mut rows = 0u64;
            // Thousands of keys give thousands of batches of a row or
            // two: they go out joined into batches of about `batch_size`.
            let mut small: Vec<RecordBatch> = Vec::new();
            let mut small_rows = 0;
            let fields = read_fields(&cols);
            for access in &accesses {
                let spec = ReadSpec {
                    access,
                    rev: false,
                    range: None,
                    limit: None,
                    fields: fields.as_deref(),
                    metrics: None,
                };
                let mut cursor = ScanCursor::open(&ds, spec, txn.clone(), ctl.clone(), batch_size)?
                    .with_prefilter(pre.clone());
                while let Some(b) = cursor.next_batch(&schema, &cols)? {
                    rows += b.num_rows() as u64;
                    if budget.is_some_and(|n| rows > n) {
                        return Ok(None);
                    }
                    if b.num_rows() >= batch_size / 2 {
                        // In order: what was held goes first.
                        if !small.is_empty() {
                            out.push(concat_batches(&schema, &small)?);
                            small.clear();
                            small_rows = 0;
                        }
                        out.push(b);
                        continue;
                    }
                    small_rows += b.num_rows();
                    small.push(b);
                    if small_rows >= batch_size {
                        out.push(concat_batches(&schema, &small)?);
                        small.clear();
                        small_rows = 0;
                    }
                }
            }
            if !small.is_empty() {
                out.push(concat_batches(&schema, &small)?);
            }
            Ok(Some(out))
        })
        .await
    }

    /// Read the access path (one part of it for a split scan).
    fn read(
        &self,
        partition: usize,
        context: Arc<TaskContext>,
    ) -> DfResult<SendableRecordBatchStream> {
        let range = match &self.parts {
            Some(parts) => Some(parts.get(partition).cloned().ok_or_else(|| {
                DataFusionError::Internal(format!(
                    "SiltScanExec has {} partitions, asked for {partition}",
                    parts.len()
                ))
            })?),
            None if partition != 0 => {
                return Err(DataFusionError::Internal(format!(
                    "SiltScanExec has one partition, asked for {partition}"
                )));
            }
            None => None,
        };
        let batch_size = context.session_config().batch_size().max(1);
        let batch_size = self.limit.map_or(batch_size, |l| batch_size.min(l.max(1)));
        let (cols, schema) = (self.cols.clone(), self.schema.clone());
        let txn = TxnSlot::of(context.session_config()).map(|t| (t, self.for_write));
        // A read that sees exactly the committed records: not for a write,
        // outside a transaction block or in one that wrote nothing to this
        // dataset (its scan would overlay nothing, and scans in a block are
        // read committed and not validated; see `silt::Transaction`). Such a
        // read may count from metadata, read a key's ends or column images.
        // psycopg and JDBC without autocommit run every query in a block.
        let committed = !self.for_write
            && txn
                .as_ref()
                .is_none_or(|(slot, _)| !slot.wrote_any(&[self.ds.id()]));
        if cols.is_empty()
            && committed
            && matches!(self.access, Access::Full)
            && let Some(n) = self.counts.count(&context, &self.ds)
        {
            let n = match (partition, self.limit) {
                (0, Some(l)) => n.min(l as u64),
                (0, None) => n,
                _ => 0,
            };
            let rows = meta_count::empty_rows(&schema, n, batch_size)?;
            return Ok(Box::pin(MemoryStream::try_new(rows, schema, None)?));
        }
        if let Some(ex) = &self.extremes
            && committed
            && matches!(self.access, Access::Full)
            && let Some(rows) = ex.rows(&context, &self.ds, &cols)
        {
            let rows = if partition == 0 { rows } else { Vec::new() };
            if partition == 0 {
                MetricBuilder::new(&self.metrics)
                    .global_counter("extremes_from_zone_maps")
                    .add(1);
            }
            let batch = convert::records_to_batch(&schema, &cols, &rows)?;
            return Ok(Box::pin(MemoryStream::try_new(vec![batch], schema, None)?));
        }
        let ctl = crate::bounds::control(context.session_config().options()).cloned();
        if !cols.is_empty()
            && committed
            && !self.rev
            && self.limit.is_none()
            && !self.ds.has_ttl()
            && matches!(self.access, Access::Full | Access::PkRange { .. })
            && let Some(cache) = context.session_config().get_extension::<ColumnCache>()
            && let Some(units) = self.images.decide(&context, || {
                let ordered = key_ordering(&self.ds, &cols, &self.access, false).is_some();
                match &self.access {
                    Access::PkRange { column, lo, hi } => {
                        let range = image_range(&self.ds, column, lo, hi)?;
                        cache.plan(&self.ds, &cols, ordered, Some(&range))
                    }
                    _ => cache.plan(&self.ds, &cols, ordered, None),
                }
            })
        {
            let n = self.parts.as_ref().map_or(1, |p| p.len());
            let part = ImagePart {
                cache,
                units,
                partition,
                n,
                cols,
                schema,
                ctl,
            };
            return part.stream();
        }
        // The first batch is read right here: a small answer (a key, a
        // box of a few hits, the k nearest) needs no thread of its own.
        // Only a scan with more to give goes on, on a blocking thread.
        let fields = read_fields(&cols);
        let spec = ReadSpec {
            access: &self.access,
            rev: self.rev,
            range,
            limit: self.limit,
            fields: fields.as_deref(),
            metrics: Some(ScanMetrics::new(&self.metrics, partition)),
        };
        let mut cursor = ScanCursor::open(&self.ds, spec, txn, ctl, batch_size)?
            .with_prefilter(self.pre.clone());
        let first = match cursor.next_batch(&schema, &cols)? {
            None => return Ok(Box::pin(MemoryStream::try_new(vec![], schema, None)?)),
            Some(batch) => batch,
        };
        if cursor.done {
            return Ok(Box::pin(MemoryStream::try_new(vec![first], schema, None)?));
        }
        let mut builder = RecordBatchReceiverStreamBuilder::new(self.schema.clone(), 2);
        let tx = builder.tx();
        builder.spawn_blocking(move || {
            if tx.blocking_send(Ok(first)).is_err() {
                return Ok(());
            }
            while let Some(batch) = cursor.next_batch(&schema, &cols)? {
                if tx.blocking_send(Ok(batch)).is_err() {
                    break;
                }
            }
            Ok(())
        });
        Ok(builder.build())
    }
}

/// The part of a full scan read from column images that one output
/// partition hands out ([`crate::column_cache`]).
struct ImagePart {
    cache: Arc<ColumnCache>,
    units: Arc<Units>,
    partition: usize,
    n: usize,
    cols: Vec<ColumnInfo>,
    schema: SchemaRef,
    ctl: Option<Arc<StatementControl>>,
}

impl ImagePart {
    /// The batches in the cache go out at once; the first unit that is not
    /// there and all after it are built on a blocking thread.
    fn stream(self) -> DfResult<SendableRecordBatchStream> {
        let mut ready = Vec::new();
        let mut taken = 0;
        for u in self.units.of_partition(self.partition, self.n) {
            match self.cache.cached_batch(u, &self.cols, &self.schema)? {
                Some(b) => ready.extend(b),
                None => break,
            }
            taken += 1;
        }
        let total = self.units.of_partition(self.partition, self.n).count();
        if taken == total {
            return Ok(Box::pin(MemoryStream::try_new(
                ready,
                self.schema.clone(),
                None,
            )?));
        }
        let mut builder = RecordBatchReceiverStreamBuilder::new(self.schema.clone(), 2);
        let tx = builder.tx();
        builder.spawn_blocking(move || {
            for b in ready {
                if tx.blocking_send(Ok(b)).is_err() {
                    return Ok(());
                }
            }
            for u in self.units.of_partition(self.partition, self.n).skip(taken) {
                if let Some(c) = &self.ctl {
                    c.check()?;
                }
                if let Some(b) = self.cache.unit_batch(u, &self.cols, &self.schema)?
                    && tx.blocking_send(Ok(b)).is_err()
                {
                    break;
                }
            }
            Ok(())
        });
        Ok(builder.build())
    }
}

/// The records of a scan in chunks of at most a batch, stopping at the
/// limit, checking the statement's stop switch between records.
struct ScanCursor {
    it: Records,
    ctl: Option<Arc<StatementControl>>,
    limit: Option<usize>,
    batch_size: usize,
    total: usize,
    /// No records are left.
    done: bool,
    /// Stored records that fail it are not built ([`crate::prefilter`]).
    pre: Option<Arc<PreFilter>>,
    metrics: Option<ScanMetrics>,
}

impl ScanCursor {
    fn open(
        ds: &Arc<Dataset>,
        spec: ReadSpec<'_>,
        txn: Option<(Arc<TxnSlot>, bool)>,
        ctl: Option<Arc<StatementControl>>,
        batch_size: usize,
    ) -> DfResult<ScanCursor> {
        let limit = spec.limit;
        let metrics = spec.metrics.clone();
        let it = match txn {
            Some((slot, for_write)) => open_records_in(slot, ds, spec, for_write, &ctl),
            None => open_records(ds, spec, &ctl),
        }
        .map_err(silt_err)?;
        Ok(ScanCursor {
            it,
            ctl,
            limit,
            batch_size: batch_size.max(1),
            total: 0,
            done: false,
            pre: None,
            metrics,
        })
    }

    fn with_prefilter(mut self, pre: Option<Arc<PreFilter>>) -> ScanCursor {
        self.pre = pre;
        self
    }

    fn check(&self) -> DfResult<()> {
        self.ctl.as_ref().map_or(Ok(()), |c| c.check())
    }

    /// The next batch of the projected columns; `None` when the scan is
    /// over.
    fn next_batch(
        &mut self,
        schema: &SchemaRef,
        cols: &[ColumnInfo],
    ) -> DfResult<Option<RecordBatch>> {
        if self.done {
            return Ok(None);
        }
        let metrics = self.metrics.clone();
        let _timer = metrics.as_ref().map(|m| m.elapsed.timer());
        let batch = self.read_batch(schema, cols)?;
        if let (Some(m), Some(b)) = (&metrics, &batch) {
            m.output_rows.add(b.num_rows());
        }
        Ok(batch)
    }

    fn read_batch(
        &mut self,
        schema: &SchemaRef,
        cols: &[ColumnInfo],
    ) -> DfResult<Option<RecordBatch>> {
        let mut b = BatchBuilder::new(cols, self.batch_size);
        while b.rows() < self.batch_size {
            if self.limit.is_some_and(|l| self.total >= l) {
                self.done = true;
                break;
            }
            self.check()?;
            match self.it.next() {
                Some(r) => {
                    let r = r.map_err(silt_err)?;
                    if let (Some(p), Rec::Encoded(rec)) = (&self.pre, &r)
                        && !p.keeps(rec)
                    {
                        continue;
                    }
                    b.push(&r).map_err(silt_err)?;
                    self.total += 1;
                }
                None => {
                    self.done = true;
                    break;
                }
            }
        }
        // A batch that ends at the limit ends the scan: with the batch cut
        // to the limit (`LIMIT 10`, the 10 nearest) the loop stops on a
        // full batch, and a scan not known to be over went on to a
        // blocking thread to find nothing more (~80 µs a kNN query).
        if self.limit.is_some_and(|l| self.total >= l) {
            self.done = true;
        }
        self.check()?;
        if b.rows() == 0 {
            return Ok(None);
        }
        b.finish(schema).map(Some)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The batch that reaches a scan's limit ends it, so the scan's first
    /// batch is its whole answer (no blocking thread) whenever the limit
    /// fits in one batch, as with the k nearest.
    #[test]
    fn a_batch_that_reaches_the_limit_ends_the_scan() {
        let dir = tempfile::tempdir().unwrap();
        let db = Arc::new(silt::Database::open(dir.path(), silt::DbOptions::default()).unwrap());
        let sql = crate::SqlEngine::new(db.clone()).unwrap();
        sql.execute_blocking("CREATE TABLE t (id BIGINT PRIMARY KEY, v BIGINT)")
            .unwrap();
        sql.execute_blocking("INSERT INTO t VALUES (1, 1), (2, 2), (3, 3), (4, 4), (5, 5)")
            .unwrap();
        let ds = db.dataset("t").unwrap();
        let cols = crate::convert::columns(&ds.def());
        let schema = crate::convert::schema_of(&cols);
        // (limit, batch size) -> rows of each batch until the scan is over.
        let cases: [(Option<usize>, usize, &[usize]); 5] = [
            (Some(3), 3, &[3]),
            (Some(3), 2, &[2, 1]),
            (Some(5), 5, &[5]),
            (Some(9), 9, &[5]),
            (None, 3, &[3, 2]),
        ];
        for (limit, batch, want) in cases {
            let spec = ReadSpec {
                access: &Access::Full,
                rev: false,
                range: None,
                limit,
                fields: None,
                metrics: None,
            };
            let mut c = ScanCursor::open(&ds, spec, None, None, batch).unwrap();
            let mut got = Vec::new();
            while let Some(b) = c.next_batch(&schema, &cols).unwrap() {
                got.push(b.num_rows());
                if got.len() == want.len() {
                    break;
                }
            }
            assert_eq!(got, want, "limit {limit:?}, batch {batch}");
            assert!(
                c.done,
                "limit {limit:?}, batch {batch}: not over after {got:?}"
            );
        }
    }
}
