//! The progress of the `COPY ... FROM STDIN` loads running in an engine,
//! readable as PostgreSQL's view `pg_catalog.pg_stat_progress_copy` (with
//! the table's name in `relname` where PostgreSQL has an oid, and the rows
//! committed so far in `tuples_committed`).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::Instant;

use async_trait::async_trait;
use datafusion::arrow::array::{ArrayRef, Float64Array, Int64Array, RecordBatch, StringArray};
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::catalog::{Session, TableProvider};
use datafusion::datasource::TableType;
use datafusion::datasource::memory::MemorySourceConfig;
use datafusion::error::Result as DfResult;
use datafusion::logical_expr::Expr;
use datafusion::physical_plan::ExecutionPlan;
use parking_lot::Mutex;

/// One load's counters, updated as it goes.
#[derive(Debug)]
pub struct LoadProgress {
    pub table: String,
    started: Instant,
    bytes: AtomicU64,
    rows: AtomicU64,
    committed: AtomicU64,
}

impl LoadProgress {
    pub fn add_bytes(&self, n: usize) {
        self.bytes.fetch_add(n as u64, Ordering::Relaxed);
    }

    pub fn set_rows(&self, rows: u64, committed: u64) {
        self.rows.store(rows, Ordering::Relaxed);
        self.committed.store(committed, Ordering::Relaxed);
    }
}

/// A snapshot of one load.
#[derive(Debug, Clone, PartialEq)]
pub struct LoadStatus {
    pub table: String,
    pub bytes: u64,
    pub rows: u64,
    pub committed: u64,
    pub seconds: f64,
}

/// The loads of an engine; a load leaves when its [`CopyIn`](super::CopyIn)
/// is dropped.
#[derive(Debug, Default)]
pub struct CopyRegistry {
    loads: Mutex<Vec<Weak<LoadProgress>>>,
}

impl CopyRegistry {
    /// Register a load into `table`.
    pub fn start(&self, table: &str) -> Arc<LoadProgress> {
        let p = Arc::new(LoadProgress {
            table: table.to_owned(),
            started: Instant::now(),
            bytes: AtomicU64::new(0),
            rows: AtomicU64::new(0),
            committed: AtomicU64::new(0),
        });
        let mut loads = self.loads.lock();
        loads.retain(|w| w.strong_count() > 0);
        loads.push(Arc::downgrade(&p));
        p
    }

    /// The loads running now.
    pub fn snapshot(&self) -> Vec<LoadStatus> {
        let mut loads = self.loads.lock();
        loads.retain(|w| w.strong_count() > 0);
        loads
            .iter()
            .filter_map(Weak::upgrade)
            .map(|p| LoadStatus {
                table: p.table.clone(),
                bytes: p.bytes.load(Ordering::Relaxed),
                rows: p.rows.load(Ordering::Relaxed),
                committed: p.committed.load(Ordering::Relaxed),
                seconds: p.started.elapsed().as_secs_f64(),
            })
            .collect()
    }
}

/// `pg_stat_progress_copy` over a registry.
#[derive(Debug)]
pub struct ProgressTable {
    registry: Arc<CopyRegistry>,
    database: String,
    schema: SchemaRef,
}

impl ProgressTable {
    pub fn new(registry: Arc<CopyRegistry>, database: &str) -> ProgressTable {
        let text = |n: &str| Field::new(n, DataType::Utf8, true);
        let int = |n: &str| Field::new(n, DataType::Int64, true);
        let schema = Arc::new(Schema::new(vec![
            text("datname"),
            text("relname"),
            text("command"),
            text("type"),
            int("bytes_processed"),
            int("bytes_total"),
            int("tuples_processed"),
            int("tuples_excluded"),
            int("tuples_committed"),
            Field::new("seconds", DataType::Float64, true),
        ]));
        ProgressTable {
            registry,
            database: database.to_owned(),
            schema,
        }
    }

    fn batch(&self) -> DfResult<RecordBatch> {
        let loads = self.registry.snapshot();
        let n = loads.len();
        let ints = |f: &dyn Fn(&LoadStatus) -> u64| -> ArrayRef {
            Arc::new(Int64Array::from_iter_values(
                loads
                    .iter()
                    .map(|l| i64::try_from(f(l)).unwrap_or(i64::MAX)),
            ))
        };
        let same = |s: &str| -> ArrayRef { Arc::new(StringArray::from(vec![s; n])) };
        Ok(RecordBatch::try_new(
            self.schema.clone(),
            vec![
                same(&self.database),
                Arc::new(StringArray::from_iter_values(
                    loads.iter().map(|l| l.table.as_str()),
                )),
                same("COPY FROM"),
                same("PIPE"),
                ints(&|l| l.bytes),
                ints(&|_| 0),
                ints(&|l| l.rows),
                ints(&|_| 0),
                ints(&|l| l.committed),
                Arc::new(Float64Array::from_iter_values(
                    loads.iter().map(|l| l.seconds),
                )),
            ],
        )?)
    }
}

#[async_trait]
impl TableProvider for ProgressTable {
    fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }

    fn table_type(&self) -> TableType {
        TableType::View
    }

    async fn scan(
        &self,
        _state: &dyn Session,
        projection: Option<&Vec<usize>>,
        _filters: &[Expr],
        _limit: Option<usize>,
    ) -> DfResult<Arc<dyn ExecutionPlan>> {
        let batch = self.batch()?;
        Ok(MemorySourceConfig::try_new_exec(
            &[vec![batch]],
            self.schema.clone(),
            projection.cloned(),
        )?)
    }
}
