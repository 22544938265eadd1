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

/// The decisions of the runs of one scan operator in flight.
#[derive(Default)]
pub(crate) struct CountDecisions {
    runs: Mutex<Vec<(Weak<TaskContext>, Option<u64>)>>,
}

impl CountDecisions {
    /// The number of records of `ds` for the run `ctx` belongs to, decided
    /// by the first of its partitions to ask; `None`: the run scans.
    pub(crate) fn decide(&self, ctx: &Arc<TaskContext>, ds: &Dataset) -> Option<u64> {
        let mut runs = self.runs.lock();
        runs.retain(|(w, _)| w.strong_count() > 0);
        if let Some((_, n)) = runs
            .iter()
            .find(|(w, _)| std::ptr::eq(w.as_ptr(), Arc::as_ptr(ctx)))
        {
            return *n;
        }
        let n = ds.exact_count();
        runs.push((Arc::downgrade(ctx), n));
        n
    }
}

impl std::fmt::Debug for CountDecisions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("CountDecisions")
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
