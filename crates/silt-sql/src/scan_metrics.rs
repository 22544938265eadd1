//! What a `SiltScan` did, for `EXPLAIN ANALYZE`: rows out and the time spent
//! reading them (`output_rows`, `elapsed_compute`), and for index paths the
//! index components searched, their disk blocks read, the entries that
//! matched (`index_candidates`) and the records fetched from the primary
//! (`index_fetched`), summed over the statement's partitions.

use datafusion::physical_plan::metrics::{Count, ExecutionPlanMetricsSet, MetricBuilder, Time};
use silt::QueryResults;
use silt::index::query::QueryStats;

/// The counters of one partition of a scan.
#[derive(Clone, Debug)]
pub struct ScanMetrics {
    pub output_rows: Count,
    pub elapsed: Time,
    components: Count,
    blocks: Count,
    candidates: Count,
    fetched: Count,
}

impl ScanMetrics {
    pub fn new(set: &ExecutionPlanMetricsSet, partition: usize) -> ScanMetrics {
        let count = |name: &'static str| MetricBuilder::new(set).counter(name, partition);
        ScanMetrics {
            output_rows: MetricBuilder::new(set).output_rows(partition),
            elapsed: MetricBuilder::new(set).elapsed_compute(partition),
            components: count("index_components"),
            blocks: count("index_blocks"),
            candidates: count("index_candidates"),
            fetched: count("index_fetched"),
        }
    }

    /// Count what an index search touched.
    pub fn add_query(&self, s: &QueryStats) {
        self.components.add(s.components as usize);
        self.blocks.add(s.blocks as usize);
        self.candidates.add(s.candidates as usize);
        self.fetched.add(s.fetched as usize);
    }
}

/// An index search's hits, counted into the scan's metrics when it is
/// dropped (finished, or given up at a limit).
pub struct CountedResults {
    inner: QueryResults,
    metrics: ScanMetrics,
}

impl CountedResults {
    pub fn new(inner: QueryResults, metrics: ScanMetrics) -> CountedResults {
        CountedResults { inner, metrics }
    }
}

impl Iterator for CountedResults {
    type Item = <QueryResults as Iterator>::Item;

    fn next(&mut self) -> Option<Self::Item> {
        self.inner.next()
    }
}

impl Drop for CountedResults {
    fn drop(&mut self) {
        self.metrics.add_query(&self.inner.stats());
    }
}
