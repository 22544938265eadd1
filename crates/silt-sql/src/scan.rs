//! The `SiltScan` operator: one partition that reads a snapshot of a
//! dataset through the access path [`crate::table::SiltTable`] chose, and
//! the record iterators of each access path (also used by DML sinks and
//! the spatial join).

use std::fmt;
use std::ops::Bound;
use std::sync::Arc;

use datafusion::arrow::datatypes::SchemaRef;
use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::error::{DataFusionError, Result as DfResult};
use datafusion::execution::TaskContext;
use datafusion::physical_expr::{EquivalenceProperties, PhysicalExpr};
use datafusion::physical_plan::execution_plan::{Boundedness, EmissionType};
use datafusion::physical_plan::memory::MemoryStream;
use datafusion::physical_plan::stream::RecordBatchReceiverStreamBuilder;
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, ExecutionPlan, Partitioning, PlanProperties,
    SendableRecordBatchStream,
};
use silt::{Dataset, Query, QueryOptions, Value};

use crate::StatementControl;
use crate::convert::{self, ColumnInfo};
use crate::error::silt_err;
use crate::session::TxnSlot;
use crate::udf::{self};

use crate::table::Access;

/// Silt's scan operator: one partition, reading a snapshot of the dataset
/// through the chosen access path when executed.
pub struct SiltScanExec {
    ds: Arc<Dataset>,
    cols: Vec<ColumnInfo>,
    schema: SchemaRef,
    access: Access,
    limit: Option<usize>,
    /// Feeds an UPDATE or DELETE: inside a transaction, the versions read
    /// are validated at commit.
    for_write: bool,
    props: Arc<PlanProperties>,
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
        let props = PlanProperties::new(
            EquivalenceProperties::new(schema.clone()),
            Partitioning::UnknownPartitioning(1),
            EmissionType::Incremental,
            Boundedness::Bounded,
        );
        SiltScanExec {
            ds,
            cols,
            schema,
            access,
            limit,
            for_write,
            props: Arc::new(props),
        }
    }

    pub fn access(&self) -> &Access {
        &self.access
    }
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
        if let Some(l) = self.limit {
            write!(f, ", limit={l}")?;
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
        _f: &mut dyn FnMut(&Arc<dyn PhysicalExpr>) -> DfResult<TreeNodeRecursion>,
    ) -> DfResult<TreeNodeRecursion> {
        Ok(TreeNodeRecursion::Continue)
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
        if partition != 0 {
            return Err(DataFusionError::Internal(format!(
                "SiltScanExec has one partition, asked for {partition}"
            )));
        }
        let batch_size = context.session_config().batch_size().max(1);
        let (cols, schema) = (self.cols.clone(), self.schema.clone());
        let txn = TxnSlot::of(context.session_config()).map(|t| (t, self.for_write));
        let ctl = crate::bounds::control(context.session_config().options()).cloned();
        // The first batch is read right here: a small answer (a key, a
        // box of a few hits, the k nearest) needs no thread of its own.
        // Only a scan with more to give goes on, on a blocking thread.
        let mut cursor =
            ScanCursor::open(&self.ds, &self.access, txn, ctl, self.limit, batch_size)?;
        let first = match cursor.next_chunk()? {
            None => return Ok(Box::pin(MemoryStream::try_new(vec![], schema, None)?)),
            Some(records) => convert::records_to_batch(&schema, &cols, &records)?,
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
            while let Some(records) = cursor.next_chunk()? {
                let batch = convert::records_to_batch(&schema, &cols, &records)?;
                if tx.blocking_send(Ok(batch)).is_err() {
                    break;
                }
            }
            Ok(())
        });
        Ok(builder.build())
    }
}

type Records = Box<dyn Iterator<Item = silt::Result<Value>> + Send>;

/// Open the access path's record iterator.
pub fn open_records(
    ds: &Arc<Dataset>,
    access: &Access,
    limit: Option<usize>,
    ctl: &Option<Arc<StatementControl>>,
) -> silt::Result<Records> {
    Ok(match access {
        Access::Full => Box::new(ds.scan(Bound::Unbounded, Bound::Unbounded)?),
        Access::Get(pk) => Box::new(ds.get(pk)?.into_iter().map(Ok)),
        Access::GetMany(keys) => {
            let ds2 = ds.clone();
            Box::new(
                keys.clone()
                    .into_iter()
                    .filter_map(move |k| ds2.get(std::slice::from_ref(&k)).transpose()),
            )
        }
        Access::PkRange { lo, hi, .. } => {
            let (lo, hi) = pk_bounds(ds, lo, hi)?;
            if let (Bound::Included(l), Bound::Excluded(h)) = (&lo, &hi)
                && l >= h
            {
                return Ok(Box::new(std::iter::empty()));
            }
            Box::new(ds.scan_raw(lo, hi)?)
        }
        Access::Index {
            index,
            query,
            text_check,
            column,
            exact,
            ..
        } => {
            let opts = QueryOptions {
                index_only: false,
                limit: if text_check.is_some() { None } else { limit },
            };
            let results = match ds.query(index, query, opts) {
                Ok(r) => r,
                // A spatial path is only a pre-filter (DataFusion re-checks
                // the predicate): an index that cannot answer it after all
                // falls back to a full scan.
                Err(_) if !*exact => {
                    return Ok(Box::new(ds.scan(Bound::Unbounded, Bound::Unbounded)?));
                }
                Err(e) => return Err(e),
            };
            let ds2 = ds.clone();
            let hits = until_stopped(results, ctl).map(move |h| {
                let h = h?;
                match h.record {
                    Some(r) => Ok(Some(r)),
                    None => ds2.get(&h.pk),
                }
            });
            let (check, column) = (text_check.clone(), column.clone());
            Box::new(hits.filter_map(move |r| keep_hit(r, check.as_deref(), &column)))
        }
        Access::Knn(k) => {
            let q = Query::Nearest {
                lon: k.lon,
                lat: k.lat,
                k: k.k,
            };
            let ds2 = ds.clone();
            Box::new(
                ds.query(
                    &k.index,
                    &q,
                    QueryOptions {
                        index_only: false,
                        limit: Some(k.k),
                    },
                )?
                .filter_map(move |h| match h {
                    Ok(h) => match h.record {
                        Some(r) => Some(Ok(r)),
                        None => ds2.get(&h.pk).transpose(),
                    },
                    Err(e) => Some(Err(e)),
                }),
            )
        }
    })
}

/// [`open_records`] inside a transaction: the transaction's own writes
/// overlay the committed records. With `for_write` (the rows an UPDATE or
/// DELETE will change), every committed record read is remembered for
/// validation at commit.
pub fn open_records_in(
    slot: Arc<TxnSlot>,
    ds: &Arc<Dataset>,
    access: &Access,
    limit: Option<usize>,
    for_write: bool,
    ctl: &Option<Arc<StatementControl>>,
) -> silt::Result<Records> {
    let get = {
        let (slot, ds) = (slot.clone(), ds.clone());
        move |pk: &[Value]| slot.with(|t| t.get(&ds, pk))
    };
    let scan = |lo: Bound<Vec<u8>>, hi: Bound<Vec<u8>>| -> silt::Result<Records> {
        let mut sc = slot.with(|t| t.scan_raw(ds, lo, hi))?;
        let (slot, ds) = (slot.clone(), ds.clone());
        Ok(Box::new(std::iter::from_fn(move || {
            let r = (|| {
                let Some((k, v, seq)) = sc.next_versioned()? else {
                    return Ok(None);
                };
                if for_write && let Some(seq) = seq {
                    slot.with(|t| t.note_read(&ds, &k, Some(seq)))?;
                }
                silt::dataset::decode_stored(&v).map(Some)
            })();
            r.transpose()
        })))
    };
    Ok(match access {
        Access::Full => scan(Bound::Unbounded, Bound::Unbounded)?,
        Access::Get(pk) => Box::new(get(pk)?.into_iter().map(Ok)),
        Access::GetMany(keys) => Box::new(
            keys.clone()
                .into_iter()
                .filter_map(move |k| get(std::slice::from_ref(&k)).transpose()),
        ),
        Access::PkRange { lo, hi, .. } => {
            let (lo, hi) = pk_bounds(ds, lo, hi)?;
            if let (Bound::Included(l), Bound::Excluded(h)) = (&lo, &hi)
                && l >= h
            {
                return Ok(Box::new(std::iter::empty()));
            }
            scan(lo, hi)?
        }
        Access::Index {
            index,
            query,
            text_check,
            column,
            exact,
            ..
        } => {
            let opts = QueryOptions {
                index_only: false,
                limit: if text_check.is_some() { None } else { limit },
            };
            let results = match slot.with(|t| t.query(ds, index, query, opts)) {
                Ok(r) => r,
                Err(_) if !*exact => return scan(Bound::Unbounded, Bound::Unbounded),
                Err(e) => return Err(e),
            };
            let check = text_check.clone();
            let column = column.clone();
            Box::new(until_stopped(results, ctl).filter_map(move |h| {
                let rec = match h {
                    // Rows to change are re-read through the transaction
                    // (their versions are then validated at commit).
                    Ok(h) if for_write => get(&h.pk),
                    Ok(h) => match h.record {
                        Some(r) => Ok(Some(r)),
                        None => get(&h.pk),
                    },
                    Err(e) => Err(e),
                };
                keep_hit(rec, check.as_deref(), &column)
            }))
        }
        Access::Knn(k) => {
            let q = Query::Nearest {
                lon: k.lon,
                lat: k.lat,
                k: k.k,
            };
            let opts = QueryOptions {
                index_only: false,
                limit: Some(k.k),
            };
            let results = slot.with(|t| t.query(ds, &k.index, &q, opts))?;
            Box::new(results.filter_map(move |h| match h {
                Ok(h) if for_write => get(&h.pk).transpose(),
                Ok(h) => match h.record {
                    Some(r) => Some(Ok(r)),
                    None => get(&h.pk).transpose(),
                },
                Err(e) => Some(Err(e)),
            }))
        }
    })
}

/// `it` until the statement is stopped: index hits are filtered inside
/// one `next()` of the scan, so the scan's own check between rows could
/// come late.
fn until_stopped<I: Iterator + 'static>(
    it: I,
    ctl: &Option<Arc<StatementControl>>,
) -> impl Iterator<Item = I::Item> + 'static {
    let ctl = ctl.clone();
    it.take_while(move |_| ctl.as_ref().is_none_or(|c| c.stopped().is_none()))
}

/// A fetched index hit as a scan row: dropped when gone, or when a keyword
/// check (`text_check` of an index access) does not hold on `column`.
fn keep_hit(
    r: silt::Result<Option<Value>>,
    check: Option<&[String]>,
    column: &str,
) -> Option<silt::Result<Value>> {
    match r {
        Ok(Some(rec)) => {
            let ok = check.is_none_or(|words| {
                rec.get(column)
                    .and_then(Value::as_str)
                    .is_some_and(|t| udf::ft_match(t, words))
            });
            ok.then_some(Ok(rec))
        }
        Ok(None) => None,
        Err(e) => Some(Err(e)),
    }
}

/// Encoded primary-key bounds of a range on the first key column.
fn pk_bounds(
    ds: &Arc<Dataset>,
    lo: &Bound<Value>,
    hi: &Bound<Value>,
) -> silt::Result<silt::index::query::KeyRange> {
    let enc = |v: &Value| ds.encode_pk_prefix(std::slice::from_ref(v));
    let lo = match lo {
        Bound::Included(v) => Bound::Included(enc(v)?),
        Bound::Excluded(v) => Bound::Included(silt::value::prefix_upper_bound(&enc(v)?)),
        Bound::Unbounded => Bound::Unbounded,
    };
    let hi = match hi {
        Bound::Included(v) => Bound::Excluded(silt::value::prefix_upper_bound(&enc(v)?)),
        Bound::Excluded(v) => Bound::Excluded(enc(v)?),
        Bound::Unbounded => Bound::Unbounded,
    };
    Ok((lo, hi))
}

/// Read the access path in chunks of `batch_size` records, handing each to
/// `emit` (which returns false when nobody listens any more).
/// Stops with [`crate::bounds::Stopped`] when the statement is stopped.
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
}

impl ScanCursor {
    fn open(
        ds: &Arc<Dataset>,
        access: &Access,
        txn: Option<(Arc<TxnSlot>, bool)>,
        ctl: Option<Arc<StatementControl>>,
        limit: Option<usize>,
        batch_size: usize,
    ) -> DfResult<ScanCursor> {
        let it = match txn {
            Some((slot, for_write)) => open_records_in(slot, ds, access, limit, for_write, &ctl),
            None => open_records(ds, access, limit, &ctl),
        }
        .map_err(silt_err)?;
        Ok(ScanCursor {
            it,
            ctl,
            limit,
            batch_size: batch_size.max(1),
            total: 0,
            done: false,
        })
    }

    fn check(&self) -> DfResult<()> {
        self.ctl.as_ref().map_or(Ok(()), |c| c.check())
    }

    /// The next chunk; `None` when the scan is over.
    fn next_chunk(&mut self) -> DfResult<Option<Vec<Value>>> {
        if self.done {
            return Ok(None);
        }
        let mut chunk = Vec::new();
        while chunk.len() < self.batch_size {
            if self.limit.is_some_and(|l| self.total >= l) {
                self.done = true;
                break;
            }
            self.check()?;
            match self.it.next() {
                Some(r) => {
                    chunk.push(r.map_err(silt_err)?);
                    self.total += 1;
                }
                None => {
                    self.done = true;
                    break;
                }
            }
        }
        self.check()?;
        Ok((!chunk.is_empty()).then_some(chunk))
    }
}
