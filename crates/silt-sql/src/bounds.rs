//! Resource bounds of statements: memory, cancellation, value sizes.
//!
//! - **Memory.** Every [`SqlEngine`](crate::SqlEngine) owns one
//!   [`ServerPool`], the DataFusion memory pool of its runtime: the memory
//!   DataFusion's operators reserve (sorts, hash joins and aggregates, the
//!   build side of a cross join, repartition buffers...) across all
//!   statements is at most [`Bounds::server_memory`]. Each statement gets
//!   a [`QueryPool`] in front of it, which also stops the one statement at
//!   [`Bounds::query_memory`]. A refusal is DataFusion's
//!   `ResourcesExhausted`, so that operators which can spill to disk (sorts,
//!   aggregates) do so; the others fail the statement. Which limit refused
//!   is noted in the statement's [`StatementControl`].
//! - **Cancellation.** A [`StatementControl`] travels with a statement (in
//!   its DataFusion config, see [`control`]); whoever runs the statement
//!   stops it ([`StatementControl::stop`]: timeout, cancel request,
//!   shutdown) and Silt's long loops (scans, the spatial join, the `ST_*`
//!   functions) check it and end with [`Stopped`]. DataFusion's operators
//!   do not look at it, and some loop for long without yielding (a cross
//!   join emits batch after batch without polling its input), so every
//!   node of a statement's physical plan is wrapped in a
//!   [`StopCheckExec`] ([`checked`]) that checks it between batches. A
//!   nested-loop join whose filter never matches loops inside one batch
//!   without emitting anything: its filter is wrapped in a
//!   [`StopCheckFn`] call ([`check_join_filters`]), which checks the
//!   control each time the join evaluates it.
//! - **Re-execution.** Under a memory limit DataFusion 55.2's nested-loop
//!   join falls back to re-executing its build side, which panics when that
//!   side holds a `RepartitionExec` ("partition not used yet": such a node
//!   runs each partition once). [`StopCheckExec`] executes a fresh copy of
//!   its input (`reset_plan_states`) when a partition is asked for twice.
//! - **Values.** Functions that can build a big value from small arguments
//!   (`repeat`, `lpad`, `rpad`, `replace`, `concat`...) are replaced by
//!   capped versions ([`crate::capped`]) that refuse, before building it, a
//!   value over [`Bounds::value_bytes`] ([`LimitExceeded::Value`]).
//!
//! Memory that is not reserved through DataFusion's pool (the batches in
//! flight between operators, the values a function builds, Silt's block
//! cache and memtables) is not counted; the value cap and the batch size
//! keep the first two small.

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};
use std::task::{Context, Poll};

use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::{Transformed, TreeNode, TreeNodeRecursion};
use datafusion::error::{DataFusionError, Result as DfResult};
use datafusion::execution::memory_pool::{MemoryLimit, MemoryPool, MemoryReservation};
use datafusion::execution::{RecordBatchStream, SendableRecordBatchStream, TaskContext};
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_plan::{DisplayAs, DisplayFormatType, ExecutionPlan, PlanProperties};
use futures::{Stream, StreamExt};
use parking_lot::Mutex;
use tokio::sync::Notify;

/// The limits of an engine. Zero means "no limit" for every field.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Bounds {
    /// Memory DataFusion's operators may reserve for one statement.
    pub query_memory: usize,
    /// Memory DataFusion's operators may reserve for all statements.
    pub server_memory: usize,
    /// The largest string or binary value a function may build, and (with
    /// `query_memory`, whichever is larger) the most one call may build
    /// for a whole batch of rows.
    pub value_bytes: usize,
}

/// A limit a statement ran into.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum LimitExceeded {
    /// The statement needed more than [`Bounds::query_memory`].
    #[error("the statement needs more than {} of memory, its limit", fmt_bytes(*.limit))]
    QueryMemory { limit: usize },
    /// All statements together hold [`Bounds::server_memory`].
    #[error("the memory for all statements ({}) is in use", fmt_bytes(*.limit))]
    ServerMemory { limit: usize },
    /// A function would build a value (or a batch of values) over the
    /// limit.
    #[error("{function} would build {what} of {}, more than the limit of {}", fmt_bytes(*.size), fmt_bytes(*.limit))]
    Value {
        function: String,
        /// "a value" or "values".
        what: &'static str,
        size: usize,
        limit: usize,
    },
}

/// The error a statement ends with when it was stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("the statement was stopped ({0:?})")]
pub struct Stopped(pub StopReason);

/// Why a statement was stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StopReason {
    /// It ran past its timeout.
    Timeout,
    /// The client asked (a PostgreSQL cancel request).
    Cancel,
    /// The server is shutting down.
    Shutdown,
    /// Its client went away.
    Abandoned,
}

impl StopReason {
    fn code(self) -> u8 {
        match self {
            StopReason::Timeout => 1,
            StopReason::Cancel => 2,
            StopReason::Shutdown => 3,
            StopReason::Abandoned => 4,
        }
    }

    fn from_code(c: u8) -> Option<StopReason> {
        match c {
            1 => Some(StopReason::Timeout),
            2 => Some(StopReason::Cancel),
            3 => Some(StopReason::Shutdown),
            4 => Some(StopReason::Abandoned),
            _ => None,
        }
    }
}

/// One statement's stop switch and what it ran into.
#[derive(Debug, Default)]
pub struct StatementControl {
    stop: AtomicU8,
    notify: Notify,
    limit: Mutex<Option<LimitExceeded>>,
}

impl StatementControl {
    pub fn new() -> Arc<StatementControl> {
        Arc::new(StatementControl::default())
    }

    /// Stop the statement (the first reason stays).
    pub fn stop(&self, why: StopReason) {
        if self
            .stop
            .compare_exchange(0, why.code(), Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
        {
            self.notify.notify_waiters();
        }
    }

    /// Why it was stopped, if it was.
    pub fn stopped(&self) -> Option<StopReason> {
        StopReason::from_code(self.stop.load(Ordering::Acquire))
    }

    /// Completes when the statement is stopped.
    pub async fn wait(&self) -> StopReason {
        loop {
            let notified = self.notify.notified();
            tokio::pin!(notified);
            // Register before looking, so that a stop in between wakes us.
            notified.as_mut().enable();
            if let Some(r) = self.stopped() {
                return r;
            }
            notified.await;
        }
    }

    /// `Err(Stopped)` once the statement is stopped: for long loops.
    pub fn check(&self) -> DfResult<()> {
        match self.stopped() {
            Some(r) => Err(DataFusionError::External(Box::new(Stopped(r)))),
            None => Ok(()),
        }
    }

    /// Remember the first limit the statement ran into.
    pub fn note_limit(&self, l: LimitExceeded) {
        let mut g = self.limit.lock();
        if g.is_none() {
            *g = Some(l);
        }
    }

    /// The limit the statement ran into, if any.
    pub fn limit(&self) -> Option<LimitExceeded> {
        self.limit.lock().clone()
    }
}

/// The statement's control in its DataFusion config options (where
/// functions, which only see the options, find it). Shares the control on
/// `cloned`: a statement's options are cloned while it is planned, and
/// every clone must stop together.
#[derive(Debug, Default, Clone)]
pub struct ControlExt(pub Option<Arc<StatementControl>>);

crate::shared_option_extension!(ControlExt, "silt_statement");

/// Make `$ty` (a `Clone` newtype of shared state) a DataFusion config
/// extension under `$prefix` that nobody can `SET`: clones share the state.
#[macro_export]
#[doc(hidden)]
macro_rules! shared_option_extension {
    ($ty:ty, $prefix:literal) => {
        impl datafusion::common::config::ExtensionOptions for $ty {
            fn as_any(&self) -> &dyn std::any::Any {
                self
            }

            fn as_any_mut(&mut self) -> &mut dyn std::any::Any {
                self
            }

            fn cloned(&self) -> Box<dyn datafusion::common::config::ExtensionOptions> {
                Box::new(self.clone())
            }

            fn set(&mut self, key: &str, _value: &str) -> datafusion::error::Result<()> {
                Err(datafusion::error::DataFusionError::Configuration(format!(
                    "`{}.{key}` cannot be set",
                    $prefix
                )))
            }

            fn entries(&self) -> Vec<datafusion::common::config::ConfigEntry> {
                vec![]
            }
        }

        impl datafusion::common::config::ConfigExtension for $ty {
            const PREFIX: &'static str = $prefix;
        }
    };
}

/// The control of the statement these options belong to.
pub fn control(options: &ConfigOptions) -> Option<&Arc<StatementControl>> {
    options.extensions.get::<ControlExt>()?.0.as_ref()
}

/// `Err(Stopped)` when the statement of these options was stopped.
pub fn check(options: &ConfigOptions) -> DfResult<()> {
    match control(options) {
        Some(c) => c.check(),
        None => Ok(()),
    }
}

/// The limit behind a failed statement's error, if a limit made it fail:
/// the one noted in its control when the error is a refusal of memory,
/// or the [`LimitExceeded`] carried by the error.
pub fn limit_of(e: &DataFusionError, ctl: Option<&StatementControl>) -> Option<LimitExceeded> {
    match e {
        DataFusionError::ResourcesExhausted(_) => ctl.and_then(StatementControl::limit),
        DataFusionError::External(inner) => {
            if let Some(l) = inner.downcast_ref::<LimitExceeded>() {
                Some(l.clone())
            } else if let Some(d) = inner.downcast_ref::<DataFusionError>() {
                limit_of(d, ctl)
            } else {
                None
            }
        }
        DataFusionError::Context(_, inner) | DataFusionError::Diagnostic(_, inner) => {
            limit_of(inner, ctl)
        }
        DataFusionError::Shared(inner) => limit_of(inner, ctl),
        DataFusionError::Collection(v) => v.iter().find_map(|e| limit_of(e, ctl)),
        _ => None,
    }
}

/// Whether the error is (or wraps) [`Stopped`].
pub fn is_stopped(e: &DataFusionError) -> bool {
    match e {
        DataFusionError::External(inner) => {
            inner.is::<Stopped>()
                || inner
                    .downcast_ref::<DataFusionError>()
                    .is_some_and(is_stopped)
        }
        DataFusionError::Context(_, inner) | DataFusionError::Diagnostic(_, inner) => {
            is_stopped(inner)
        }
        DataFusionError::Shared(inner) => is_stopped(inner),
        DataFusionError::Collection(v) => v.iter().any(is_stopped),
        _ => false,
    }
}

/// A plan node that passes its input's batches through, and ends with
/// [`Stopped`] (without polling its input again) once the statement is
/// stopped. Invisible to downcasts (`downcast_delegate`).
#[derive(Debug)]
pub struct StopCheckExec {
    input: Arc<dyn ExecutionPlan>,
    ctl: Option<Arc<StatementControl>>,
    /// The partitions executed so far.
    executed: Mutex<std::collections::HashSet<usize>>,
}

impl StopCheckExec {
    fn new(input: Arc<dyn ExecutionPlan>, ctl: Option<Arc<StatementControl>>) -> StopCheckExec {
        StopCheckExec {
            input,
            ctl,
            executed: Mutex::new(std::collections::HashSet::new()),
        }
    }
}

impl DisplayAs for StopCheckExec {
    fn fmt_as(&self, _t: DisplayFormatType, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        write!(f, "StopCheckExec")
    }
}

impl ExecutionPlan for StopCheckExec {
    fn name(&self) -> &str {
        "StopCheckExec"
    }

    fn downcast_delegate(&self) -> Option<&dyn ExecutionPlan> {
        Some(self.input.as_ref())
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        self.input.properties()
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        vec![&self.input]
    }

    fn maintains_input_order(&self) -> Vec<bool> {
        vec![true]
    }

    fn benefits_from_input_partitioning(&self) -> Vec<bool> {
        vec![false]
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
        let [input] = <[Arc<dyn ExecutionPlan>; 1]>::try_from(children).map_err(|c| {
            DataFusionError::Internal(format!("StopCheckExec takes one child, got {}", c.len()))
        })?;
        Ok(Arc::new(StopCheckExec::new(input, self.ctl.clone())))
    }

    fn execute(
        &self,
        partition: usize,
        context: Arc<TaskContext>,
    ) -> DfResult<SendableRecordBatchStream> {
        if let Some(c) = &self.ctl {
            c.check()?;
        }
        let again = !self.executed.lock().insert(partition);
        let input = if again {
            datafusion::physical_plan::execution_plan::reset_plan_states(self.input.clone())?
                .execute(partition, context)?
        } else {
            self.input.execute(partition, context)?
        };
        Ok(Box::pin(StopCheckStream {
            input,
            ctl: self.ctl.clone(),
            done: false,
        }))
    }
}

struct StopCheckStream {
    input: SendableRecordBatchStream,
    ctl: Option<Arc<StatementControl>>,
    done: bool,
}

impl Stream for StopCheckStream {
    type Item = DfResult<RecordBatch>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        if self.done {
            return Poll::Ready(None);
        }
        if let Some(Err(e)) = self.ctl.as_ref().map(|c| c.check()) {
            self.done = true;
            return Poll::Ready(Some(Err(e)));
        }
        self.input.poll_next_unpin(cx)
    }
}

impl RecordBatchStream for StopCheckStream {
    fn schema(&self) -> SchemaRef {
        self.input.schema()
    }
}

/// `plan` with every node wrapped in a [`StopCheckExec`] for `ctl`.
pub fn checked(
    plan: Arc<dyn ExecutionPlan>,
    ctl: Option<&Arc<StatementControl>>,
) -> DfResult<Arc<dyn ExecutionPlan>> {
    Ok(plan
        .transform_up(|node| {
            Ok(Transformed::yes(
                Arc::new(StopCheckExec::new(node, ctl.cloned())) as Arc<dyn ExecutionPlan>,
            ))
        })?
        .data)
}

/// The name of [`StopCheckFn`].
pub(crate) const STOP_CHECK: &str = "silt_stop_check";

/// `silt_stop_check(x)`: `x`, while the statement's control says it may
/// go on (see [`check_join_filters`]). Not registered: only the engine puts
/// it in plans, holding the statement's control itself (a function's
/// config options are not always the statement's: they are captured where
/// the expression is built).
#[derive(Debug)]
pub struct StopCheckFn {
    signature: datafusion::logical_expr::Signature,
    ctl: Arc<StatementControl>,
}

impl StopCheckFn {
    pub fn new(ctl: Arc<StatementControl>) -> StopCheckFn {
        StopCheckFn {
            signature: datafusion::logical_expr::Signature::any(
                1,
                datafusion::logical_expr::Volatility::Volatile,
            ),
            ctl,
        }
    }
}

impl PartialEq for StopCheckFn {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.ctl, &other.ctl)
    }
}

impl Eq for StopCheckFn {}

impl std::hash::Hash for StopCheckFn {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        std::ptr::hash(Arc::as_ptr(&self.ctl), state);
    }
}

impl datafusion::logical_expr::ScalarUDFImpl for StopCheckFn {
    fn name(&self) -> &str {
        STOP_CHECK
    }

    fn signature(&self) -> &datafusion::logical_expr::Signature {
        &self.signature
    }

    fn return_type(
        &self,
        arg_types: &[datafusion::arrow::datatypes::DataType],
    ) -> DfResult<datafusion::arrow::datatypes::DataType> {
        arg_types
            .first()
            .cloned()
            .ok_or_else(|| DataFusionError::Plan("silt_stop_check takes one argument".to_owned()))
    }

    fn return_field_from_args(
        &self,
        args: datafusion::logical_expr::ReturnFieldArgs,
    ) -> DfResult<datafusion::arrow::datatypes::FieldRef> {
        args.arg_fields
            .first()
            .cloned()
            .ok_or_else(|| DataFusionError::Plan("silt_stop_check takes one argument".to_owned()))
    }

    fn invoke_with_args(
        &self,
        args: datafusion::logical_expr::ScalarFunctionArgs,
    ) -> DfResult<datafusion::logical_expr::ColumnarValue> {
        self.ctl.check()?;
        args.args.into_iter().next().ok_or_else(|| {
            DataFusionError::Execution("silt_stop_check takes one argument".to_owned())
        })
    }
}

/// `plan` (optimized) with the filter of every join wrapped in
/// `silt_stop_check(..)` for `ctl`; an `EXPLAIN` (which does not run) is
/// left alone.
pub fn check_join_filters(
    plan: datafusion::logical_expr::LogicalPlan,
    ctl: &Arc<StatementControl>,
) -> DfResult<datafusion::logical_expr::LogicalPlan> {
    use datafusion::logical_expr::{Expr, LogicalPlan, ScalarUDF, expr::ScalarFunction};
    if matches!(plan, LogicalPlan::Explain(_)) {
        return Ok(plan);
    }
    let udf = Arc::new(ScalarUDF::new_from_impl(StopCheckFn::new(ctl.clone())));
    Ok(plan
        .transform_up(|p| match p {
            LogicalPlan::Join(mut j) if j.filter.is_some() => {
                j.filter = j
                    .filter
                    .take()
                    .map(|f| Expr::ScalarFunction(ScalarFunction::new_udf(udf.clone(), vec![f])));
                Ok(Transformed::yes(LogicalPlan::Join(j)))
            }
            other => Ok(Transformed::no(other)),
        })?
        .data)
}

/// Refuse a plan that repeats a big constant string over a batch of rows:
/// `SELECT repeat('x', 1000000) FROM t` is folded to a 1 MB literal, which
/// DataFusion expands to `batch_rows` copies (and Arrow panics past 2 GiB
/// of offsets, "offset overflow"). Over `limit` bytes per batch:
/// [`LimitExceeded::Value`].
pub fn check_literals(
    plan: &datafusion::logical_expr::LogicalPlan,
    batch_rows: usize,
    limit: usize,
) -> DfResult<()> {
    use datafusion::common::ScalarValue;
    use datafusion::logical_expr::{Expr, LogicalPlan};
    if limit == 0 || limit == usize::MAX {
        return Ok(());
    }
    let mut found: Option<usize> = None;
    plan.apply(|p| {
        if let LogicalPlan::Projection(proj) = p {
            for e in &proj.expr {
                e.apply(|x| {
                    if let Expr::Literal(v, _) = x {
                        let len = match v {
                            ScalarValue::Utf8(Some(s)) | ScalarValue::LargeUtf8(Some(s)) => s.len(),
                            ScalarValue::Binary(Some(b)) | ScalarValue::LargeBinary(Some(b)) => {
                                b.len()
                            }
                            _ => 0,
                        };
                        if len.saturating_mul(batch_rows) > limit {
                            found = Some(len.saturating_mul(batch_rows));
                            return Ok(TreeNodeRecursion::Stop);
                        }
                    }
                    Ok(TreeNodeRecursion::Continue)
                })?;
            }
        }
        Ok(if found.is_some() {
            TreeNodeRecursion::Stop
        } else {
            TreeNodeRecursion::Continue
        })
    })?;
    match found {
        Some(size) => Err(DataFusionError::External(Box::new(LimitExceeded::Value {
            function: "a constant repeated on every row".to_owned(),
            what: "values",
            size,
            limit,
        }))),
        None => Ok(()),
    }
}

/// A size as people read it: `512 bytes`, `64 KiB`, `1.5 GiB`.
pub fn fmt_bytes(n: usize) -> String {
    const UNITS: [&str; 5] = ["KiB", "MiB", "GiB", "TiB", "PiB"];
    if n < 1024 {
        return format!("{n} bytes");
    }
    let mut v = n as f64 / 1024.0;
    let mut unit = UNITS[0];
    for u in &UNITS[1..] {
        if v < 1024.0 {
            break;
        }
        v /= 1024.0;
        unit = u;
    }
    if (v - v.round()).abs() < 0.05 {
        format!("{v:.0} {unit}")
    } else {
        format!("{v:.1} {unit}")
    }
}

/// The engine-wide memory pool: a greedy pool whose limit can change (zero:
/// no limit). Every statement's [`QueryPool`] draws from it.
#[derive(Debug, Default)]
pub struct ServerPool {
    limit: AtomicUsize,
    used: AtomicUsize,
}

impl ServerPool {
    pub fn new(limit: usize) -> ServerPool {
        ServerPool {
            limit: AtomicUsize::new(limit),
            used: AtomicUsize::new(0),
        }
    }

    /// Change the limit (reservations already made stay).
    pub fn set_limit(&self, limit: usize) {
        self.limit.store(limit, Ordering::Release);
    }

    pub fn limit(&self) -> usize {
        self.limit.load(Ordering::Acquire)
    }

    /// Bytes reserved now.
    pub fn used(&self) -> usize {
        self.used.load(Ordering::Acquire)
    }

    fn take(&self, n: usize) -> Result<(), LimitExceeded> {
        let limit = self.limit();
        self.used
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |u| {
                let new = u.saturating_add(n);
                (limit == 0 || new <= limit).then_some(new)
            })
            .map(|_| ())
            .map_err(|_| LimitExceeded::ServerMemory { limit })
    }

    fn give(&self, n: usize) {
        // Never below zero, whatever a consumer does.
        let _ = self
            .used
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |u| {
                Some(u.saturating_sub(n))
            });
    }
}

impl std::fmt::Display for ServerPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "silt-server-pool(used: {}", fmt_bytes(self.used()))?;
        match self.limit() {
            0 => write!(f, ", no limit)"),
            l => write!(f, ", limit: {})", fmt_bytes(l)),
        }
    }
}

fn refusal(l: LimitExceeded) -> DataFusionError {
    // `ResourcesExhausted` (not `External`): operators that can spill look
    // for it.
    DataFusionError::ResourcesExhausted(l.to_string())
}

impl MemoryPool for ServerPool {
    fn name(&self) -> &str {
        "silt-server-pool"
    }

    fn grow(&self, _r: &MemoryReservation, additional: usize) {
        self.used.fetch_add(additional, Ordering::AcqRel);
    }

    fn shrink(&self, _r: &MemoryReservation, shrink: usize) {
        self.give(shrink);
    }

    fn try_grow(&self, _r: &MemoryReservation, additional: usize) -> DfResult<()> {
        self.take(additional).map_err(refusal)
    }

    fn reserved(&self) -> usize {
        self.used()
    }

    fn memory_limit(&self) -> MemoryLimit {
        match self.limit() {
            0 => MemoryLimit::Infinite,
            l => MemoryLimit::Finite(l),
        }
    }
}

/// One statement's memory pool: at most `limit` bytes (zero: no limit of
/// its own), drawn from the engine's [`ServerPool`].
#[derive(Debug)]
pub struct QueryPool {
    server: Arc<ServerPool>,
    limit: usize,
    used: AtomicUsize,
    ctl: Option<Arc<StatementControl>>,
}

impl QueryPool {
    pub fn new(
        server: Arc<ServerPool>,
        limit: usize,
        ctl: Option<Arc<StatementControl>>,
    ) -> QueryPool {
        QueryPool {
            server,
            limit,
            used: AtomicUsize::new(0),
            ctl,
        }
    }

    fn refuse(&self, l: LimitExceeded) -> DataFusionError {
        if let Some(c) = &self.ctl {
            c.note_limit(l.clone());
        }
        refusal(l)
    }
}

impl std::fmt::Display for QueryPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "silt-query-pool(used: {}, limit: {})",
            fmt_bytes(self.used.load(Ordering::Acquire)),
            fmt_bytes(self.limit)
        )
    }
}

impl Drop for QueryPool {
    fn drop(&mut self) {
        // Whatever a consumer forgot to give back goes back to the server.
        self.server.give(self.used.swap(0, Ordering::AcqRel));
    }
}

impl MemoryPool for QueryPool {
    fn name(&self) -> &str {
        "silt-query-pool"
    }

    fn grow(&self, _r: &MemoryReservation, additional: usize) {
        self.used.fetch_add(additional, Ordering::AcqRel);
        self.server.used.fetch_add(additional, Ordering::AcqRel);
    }

    fn shrink(&self, _r: &MemoryReservation, shrink: usize) {
        let mut given = 0;
        let _ = self
            .used
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |u| {
                given = u.min(shrink);
                Some(u - given)
            });
        self.server.give(given);
    }

    fn try_grow(&self, _r: &MemoryReservation, additional: usize) -> DfResult<()> {
        let limit = self.limit;
        self.used
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |u| {
                let new = u.saturating_add(additional);
                (limit == 0 || new <= limit).then_some(new)
            })
            .map_err(|_| self.refuse(LimitExceeded::QueryMemory { limit }))?;
        if let Err(l) = self.server.take(additional) {
            let _ = self
                .used
                .fetch_update(Ordering::AcqRel, Ordering::Acquire, |u| {
                    Some(u.saturating_sub(additional))
                });
            return Err(self.refuse(l));
        }
        Ok(())
    }

    fn reserved(&self) -> usize {
        self.used.load(Ordering::Acquire)
    }

    fn memory_limit(&self) -> MemoryLimit {
        match (self.limit, self.server.limit()) {
            (0, 0) => MemoryLimit::Infinite,
            (0, s) => MemoryLimit::Finite(s),
            (q, 0) => MemoryLimit::Finite(q),
            (q, s) => MemoryLimit::Finite(q.min(s)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::execution::memory_pool::MemoryConsumer;

    #[test]
    fn query_pool_stops_at_its_limit_and_gives_back() {
        let server = Arc::new(ServerPool::new(1000));
        let ctl = StatementControl::new();
        let pool: Arc<dyn MemoryPool> =
            Arc::new(QueryPool::new(server.clone(), 600, Some(ctl.clone())));
        let r = MemoryConsumer::new("a").register(&pool);
        r.try_grow(500).unwrap();
        assert_eq!(server.used(), 500);
        let e = r.try_grow(200).unwrap_err();
        assert!(matches!(e, DataFusionError::ResourcesExhausted(_)), "{e}");
        assert_eq!(ctl.limit(), Some(LimitExceeded::QueryMemory { limit: 600 }));
        assert_eq!(
            limit_of(&e, Some(&ctl)),
            Some(LimitExceeded::QueryMemory { limit: 600 })
        );
        // Another statement finds the server's memory taken.
        let other: Arc<dyn MemoryPool> = Arc::new(QueryPool::new(server.clone(), 600, None));
        let r2 = MemoryConsumer::new("b").register(&other);
        let e = r2.try_grow(600).unwrap_err();
        assert!(e.to_string().contains("in use"), "{e}");
        assert_eq!(server.used(), 500);
        drop(r);
        drop(pool);
        assert_eq!(server.used(), 0);
        r2.try_grow(600).unwrap();
        assert_eq!(server.used(), 600);
    }

    #[tokio::test]
    async fn stop_wakes_waiters_once() {
        let ctl = StatementControl::new();
        assert!(ctl.check().is_ok());
        let c2 = ctl.clone();
        let waiter = tokio::spawn(async move { c2.wait().await });
        tokio::task::yield_now().await;
        ctl.stop(StopReason::Cancel);
        ctl.stop(StopReason::Timeout);
        assert_eq!(waiter.await.unwrap(), StopReason::Cancel);
        assert_eq!(ctl.stopped(), Some(StopReason::Cancel));
        let e = ctl.check().unwrap_err();
        assert!(is_stopped(&e));
        assert!(is_stopped(&DataFusionError::Context(
            "x".into(),
            Box::new(e)
        )));
    }

    #[test]
    fn sizes_read_well() {
        assert_eq!(fmt_bytes(10), "10 bytes");
        assert_eq!(fmt_bytes(64 << 20), "64 MiB");
        assert_eq!(fmt_bytes(3 << 29), "1.5 GiB");
    }
}
