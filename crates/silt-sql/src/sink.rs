//! The write side of a Silt table: the DataFusion sink behind DELETE,
//! UPDATE and DataFusion-planned INSERTs, outside or inside a transaction
//! block.

use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;
use datafusion::arrow::array::{ArrayRef, RecordBatch};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::datasource::sink::DataSink;
use datafusion::error::{DataFusionError, Result as DfResult};
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::physical_plan::{DisplayAs, DisplayFormatType};
use futures::StreamExt;
use silt::{BatchOptions, Dataset, DatasetDef, Value, WriteMode};

use crate::convert::{self, ColumnInfo};
use crate::error::{SqlError, silt_err, sql_err};
use crate::session::TxnSlot;

#[derive(Debug, Clone, Copy)]
pub(crate) enum SinkOp {
    Write(WriteMode),
    Delete,
    /// Rows are (primary key..., assigned columns...): each record is
    /// read, the assigned fields replaced, and the record written back.
    Update {
        n_pk: usize,
    },
}

/// INSERT (unique), UPSERT, UPDATE and DELETE. Outside a transaction
/// block every row is its own record-level transaction; the statement stops
/// at the first failing row (the rows before it stay committed) and reports
/// the number of rows affected. Inside a block, rows are written into the
/// block's transaction.
pub(crate) struct SiltSink {
    pub(crate) ds: Arc<Dataset>,
    /// The definition the statement was planned against: its rows are
    /// refused once an `ALTER` has replaced it.
    pub(crate) def: Arc<DatasetDef>,
    pub(crate) cols: Vec<ColumnInfo>,
    pub(crate) schema: SchemaRef,
    pub(crate) op: SinkOp,
    pub(crate) txn: Option<Arc<TxnSlot>>,
}

impl fmt::Debug for SiltSink {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SiltSink({}, {:?})", self.ds.name(), self.op)
    }
}

impl DisplayAs for SiltSink {
    fn fmt_as(&self, _t: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        let what = match self.op {
            SinkOp::Write(WriteMode::Insert) => "insert",
            SinkOp::Write(WriteMode::Upsert) => "upsert",
            SinkOp::Write(WriteMode::InsertIgnore) => "insert-ignore",
            SinkOp::Delete => "delete",
            SinkOp::Update { .. } => "update",
        };
        write!(f, "SiltSink: dataset={}, op={what}", self.ds.name())
    }
}

#[async_trait]
impl DataSink for SiltSink {
    fn schema(&self) -> &SchemaRef {
        &self.schema
    }

    async fn write_all(
        &self,
        mut data: SendableRecordBatchStream,
        _context: &Arc<TaskContext>,
    ) -> DfResult<u64> {
        if let Some(slot) = &self.txn {
            return self.write_in(slot, data).await;
        }
        let mut count = 0u64;
        while let Some(batch) = data.next().await {
            let batch: RecordBatch = batch?;
            if let SinkOp::Update { n_pk } = self.op {
                let changes = update_rows(&batch, &self.cols, n_pk)?;
                let (ds, def) = (self.ds.clone(), self.def.clone());
                count += tokio::task::spawn_blocking(move || apply_updates(&ds, &def, changes))
                    .await
                    .map_err(|e| DataFusionError::Execution(format!("write task failed: {e}")))??;
                continue;
            }
            let records = convert::batch_to_records(&batch, &self.cols)?;
            let (ds, def) = (self.ds.clone(), self.def.clone());
            let op = self.op;
            let pk_cols: Vec<String> = self.ds.def().primary_key.clone();
            let before = count;
            let done = tokio::task::spawn_blocking(move || -> DfResult<u64> {
                match op {
                    SinkOp::Write(mode) => {
                        let key = |r: &Value| -> Vec<Value> {
                            pk_cols
                                .iter()
                                .map(|k| r.get(k).cloned().unwrap_or(Value::Null))
                                .collect()
                        };
                        let keys: Vec<Vec<Value>> = records.iter().map(key).collect();
                        let report = ds
                            .write_batch_under(
                                &def,
                                records,
                                BatchOptions {
                                    mode,
                                    atomic: false,
                                    stop_on_error: true,
                                },
                            )
                            .map_err(silt_err)?;
                        if let Some((i, e)) = report.failed.into_iter().next() {
                            let e = crate::target::row_error(&ds, &keys[i], e);
                            if before + i as u64 == 0 {
                                return Err(sql_err(e));
                            }
                            let committed = before + report.committed as u64;
                            return Err(sql_err(SqlError::PartialWrite {
                                row: Some(before + i as u64 + 1),
                                total: None,
                                committed,
                                unchanged: (before + i as u64).saturating_sub(committed),
                                source: Box::new(e),
                            }));
                        }
                        Ok(report.committed as u64)
                    }
                    SinkOp::Update { .. } => Ok(0),
                    SinkOp::Delete => {
                        let mut n = 0;
                        for r in records {
                            let pk: Vec<Value> = pk_cols
                                .iter()
                                .map(|k| r.get(k).cloned().unwrap_or(Value::Null))
                                .collect();
                            if ds.delete(&pk).map_err(silt_err)? {
                                n += 1;
                            }
                        }
                        Ok(n)
                    }
                }
            })
            .await
            .map_err(|e| DataFusionError::Execution(format!("write task failed: {e}")))??;
            count += done;
        }
        Ok(count)
    }
}

impl SiltSink {
    /// Write the rows into the session's transaction.
    async fn write_in(
        &self,
        slot: &Arc<TxnSlot>,
        mut data: SendableRecordBatchStream,
    ) -> DfResult<u64> {
        let mut count = 0u64;
        while let Some(batch) = data.next().await {
            let batch: RecordBatch = batch?;
            let (ds, slot, op) = (self.ds.clone(), slot.clone(), self.op);
            let def = self.def.clone();
            let expect = move |t: &mut silt::Transaction| t.expect_def(&ds, &def);
            let ds = self.ds.clone();
            let work: Box<dyn FnOnce() -> silt::Result<u64> + Send> = match op {
                SinkOp::Update { n_pk } => {
                    let changes = update_rows(&batch, &self.cols, n_pk)?;
                    Box::new(move || {
                        slot.with(|t| {
                            expect(t)?;
                            let mut n = 0;
                            for (pk, set) in changes {
                                let Some(rec) = t.get(&ds, &pk)? else {
                                    continue;
                                };
                                t.upsert(&ds, assign(rec, set))?;
                                n += 1;
                            }
                            Ok(n)
                        })
                    })
                }
                SinkOp::Write(mode) => {
                    let records = convert::batch_to_records(&batch, &self.cols)?;
                    Box::new(move || {
                        slot.with(|t| {
                            expect(t)?;
                            let mut n = 0;
                            for r in &records {
                                match mode {
                                    WriteMode::Insert => t.insert(&ds, r.clone())?,
                                    WriteMode::Upsert => t.upsert(&ds, r.clone())?,
                                    WriteMode::InsertIgnore => {
                                        let (key, _) = ds.prepare(r.clone())?;
                                        if t.get_raw(&ds, &key)?.is_some() {
                                            continue;
                                        }
                                        t.insert(&ds, r.clone())?
                                    }
                                }
                                n += 1;
                            }
                            Ok(n)
                        })
                    })
                }
                SinkOp::Delete => {
                    let records = convert::batch_to_records(&batch, &self.cols)?;
                    let pk_cols = self.ds.def().primary_key.clone();
                    Box::new(move || {
                        slot.with(|t| {
                            expect(t)?;
                            let mut n = 0;
                            for r in records {
                                let pk: Vec<Value> = pk_cols
                                    .iter()
                                    .map(|k| r.get(k).cloned().unwrap_or(Value::Null))
                                    .collect();
                                if t.delete(&ds, &pk)? {
                                    n += 1;
                                }
                            }
                            Ok(n)
                        })
                    })
                }
            };
            count += tokio::task::spawn_blocking(work)
                .await
                .map_err(|e| DataFusionError::Execution(format!("write task failed: {e}")))?
                .map_err(silt_err)?;
        }
        Ok(count)
    }
}

/// A record with the assigned fields replaced (every other field kept,
/// undeclared ones included).
pub(crate) fn assign(rec: Value, set: Vec<(String, Value)>) -> Value {
    let Value::Object(mut fields) = rec else {
        return rec;
    };
    for (name, v) in set {
        match fields.iter_mut().find(|(k, _)| *k == name) {
            Some(slot) => slot.1 = v,
            None => fields.push((name, v)),
        }
    }
    Value::Object(fields)
}

/// (primary key, assigned fields) of each row of an update batch.
pub(crate) type Changes = Vec<(Vec<Value>, Vec<(String, Value)>)>;

pub(crate) fn update_rows(
    batch: &RecordBatch,
    cols: &[ColumnInfo],
    n_pk: usize,
) -> DfResult<Changes> {
    let arrays: Vec<ArrayRef> = batch
        .columns()
        .iter()
        .zip(cols)
        .map(|(a, c)| {
            if a.data_type() == &c.data_type {
                Ok(a.clone())
            } else {
                cast(a, &c.data_type)
            }
        })
        .collect::<Result<_, _>>()?;
    let mut out = Vec::with_capacity(batch.num_rows());
    for row in 0..batch.num_rows() {
        let mut pk = Vec::with_capacity(n_pk);
        let mut set = Vec::new();
        for (i, (c, a)) in cols.iter().zip(&arrays).enumerate() {
            let v = convert::value_at(c, a, row)?.unwrap_or(Value::Null);
            if i < n_pk {
                pk.push(v);
            } else {
                set.push((c.name.clone(), v));
            }
        }
        out.push((pk, set));
    }
    Ok(out)
}

/// Read each record, replace the assigned fields (keeping every other
/// field, undeclared ones included) and write it back.
fn apply_updates(ds: &Arc<Dataset>, def: &Arc<DatasetDef>, changes: Changes) -> DfResult<u64> {
    let mut n = 0;
    for (pk, set) in changes {
        let Some(rec @ Value::Object(_)) = ds.get(&pk).map_err(silt_err)? else {
            continue;
        };
        if let Some((name, _)) = set
            .iter()
            .find(|(name, v)| *v == Value::Null && def.not_null.contains(name))
        {
            return Err(sql_err(SqlError::NotNull {
                table: ds.name().to_owned(),
                column: name.clone(),
            }));
        }
        // Written under the definition the statement was planned against
        // (refused, with nothing of the row written, after an ALTER).
        let report = ds
            .write_batch_under(
                def,
                vec![assign(rec, set)],
                BatchOptions {
                    mode: WriteMode::Upsert,
                    atomic: false,
                    stop_on_error: true,
                },
            )
            .map_err(silt_err)?;
        if let Some((_, e)) = report.failed.into_iter().next() {
            return Err(silt_err(e));
        }
        n += 1;
    }
    Ok(n)
}
