//! `COUNT(*)` from component metadata: a scan that reads no column (what
//! DataFusion plans for `count(*)`, `SELECT 1 FROM t`, the sides of a
//! cross join that is only counted) needs only the number of records, and
//! when the dataset's components decide it ([`silt::Dataset::exact_count`])
//! the scan hands out that many empty rows without reading any record.
//!
//! The decision is made when the plan runs, not when it is planned (a
//! cached plan runs again after writes), and once per run for all the
//! partitions of a split scan: partition 0 hands out every row and the
//! others none, or every partition reads its key range. Partitions of one
//! run share their [`TaskContext`]; the decision is kept beside it, by a
//! weak reference (which also keeps its address from being reused while
//! the entry lives).

use std::sync::{Arc, Weak};

use datafusion::arrow::array::{RecordBatch, RecordBatchOptions};
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::error::Result as DfResult;
use datafusion::execution::TaskContext;
use parking_lot::Mutex;
use silt::Dataset;

/// The decisions of the runs of one scan operator in flight, one per run
/// (whether it counts from metadata; whether it reads column images).
pub(crate) struct RunDecisions<T> {
    runs: Mutex<Vec<(Weak<TaskContext>, T)>>,
}

impl<T> Default for RunDecisions<T> {
    fn default() -> Self {
        RunDecisions {
            runs: Mutex::new(Vec::new()),
        }
    }
}

impl<T: Clone> RunDecisions<T> {
    /// The decision for the run `ctx` belongs to: made by `make` for the
    /// first of its partitions to ask, the same for the others.
    pub(crate) fn decide(&self, ctx: &Arc<TaskContext>, make: impl FnOnce() -> T) -> T {
        let mut runs = self.runs.lock();
        runs.retain(|(w, _)| w.strong_count() > 0);
        if let Some((_, d)) = runs
            .iter()
            .find(|(w, _)| std::ptr::eq(w.as_ptr(), Arc::as_ptr(ctx)))
        {
            return d.clone();
        }
        let d = make();
        runs.push((Arc::downgrade(ctx), d.clone()));
        d
    }
}

/// Whether a run counts from metadata: the number of records of the
/// dataset, or `None` when it scans ([`Dataset::exact_count`]).
pub(crate) type CountDecisions = RunDecisions<Option<u64>>;

impl CountDecisions {
    pub(crate) fn count(&self, ctx: &Arc<TaskContext>, ds: &Dataset) -> Option<u64> {
        self.decide(ctx, || ds.exact_count())
    }
}

impl<T> std::fmt::Debug for RunDecisions<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RunDecisions")
    }
}

/// `rows` empty rows of `schema` (which has no columns) in batches of at
/// most `batch_size`.
pub(crate) fn empty_rows(
    schema: &SchemaRef,
    rows: u64,
    batch_size: usize,
) -> DfResult<Vec<RecordBatch>> {
    let mut out = Vec::new();
    let mut left = rows;
    let step = batch_size.max(1) as u64;
    while left > 0 {
        let n = left.min(step);
        let opts = RecordBatchOptions::new().with_row_count(Some(n as usize));
        out.push(RecordBatch::try_new_with_options(
            schema.clone(),
            vec![],
            &opts,
        )?);
        left -= n;
    }
    Ok(out)
}
