//! A Silt table as the target of a write (`INSERT`, `COPY ... FROM`):
//! its columns and constraints ([`Table`]) and where its rows go
//! ([`Target`]: the dataset, each row its own record-level transaction
//! (Algorithm 1 of `write_batch`), or the session's transaction block).

use std::sync::Arc;

use datafusion::arrow::array::ArrayRef;
use datafusion::sql::sqlparser::ast::ObjectName;
use silt::{BatchOptions, Dataset, DatasetDef, Value, WriteMode};

use crate::convert::{self, ColumnInfo};
use crate::ddl;
use crate::error::SqlError;
use crate::session::TxnSlot;

/// A table's columns and constraints.
pub(crate) struct Table {
    pub(crate) ds: Arc<Dataset>,
    /// The definition the columns are read from (writes of rows made
    /// against it are refused once an `ALTER` has replaced it).
    pub(crate) def: Arc<DatasetDef>,
    pub(crate) name: String,
    pub(crate) cols: Vec<ColumnInfo>,
    /// Positions of the primary-key columns, in key order.
    pub(crate) pk: Vec<usize>,
    /// Positions of the columns that must not be null (key and NOT NULL).
    pub(crate) required: Vec<usize>,
    /// Per column, its `DEFAULT` (a null given for such a column is kept
    /// as a null, so that the default does not replace it).
    pub(crate) defaults: Vec<Option<silt::FieldDefault>>,
}

impl Table {
    pub(crate) fn new(ds: Arc<Dataset>) -> Table {
        let def = ds.def();
        let cols = convert::columns(&def);
        let pos = |n: &String| cols.iter().position(|c| c.name == *n);
        let pk: Vec<usize> = def.primary_key.iter().filter_map(pos).collect();
        let mut required = pk.clone();
        for n in &def.not_null {
            if let Some(i) = pos(n)
                && !required.contains(&i)
            {
                required.push(i);
            }
        }
        let defaults = cols
            .iter()
            .map(|c| {
                def.defaults
                    .iter()
                    .find(|(n, _)| *n == c.name)
                    .map(|(_, d)| d.clone())
            })
            .collect();
        Table {
            name: ds.name().to_owned(),
            ds,
            def,
            cols,
            pk,
            required,
            defaults,
        }
    }

    pub(crate) fn col_index(&self, name: &str) -> Option<usize> {
        self.cols.iter().position(|c| c.name == name)
    }

    pub(crate) fn no_column(&self, name: &str) -> SqlError {
        SqlError::Invalid(format!("table `{}` has no column `{name}`", self.name))
    }

    /// The table columns the source's columns go to, in order.
    pub(crate) fn target_columns(&self, columns: &[ObjectName]) -> Result<Vec<usize>, SqlError> {
        let names = columns
            .iter()
            .map(last_part)
            .collect::<Result<Vec<_>, _>>()?;
        self.target_column_names(&names)
    }

    /// [`Table::target_columns`] of column names (none: every column).
    pub(crate) fn target_column_names(&self, names: &[String]) -> Result<Vec<usize>, SqlError> {
        if names.is_empty() {
            return Ok((0..self.cols.len()).collect());
        }
        let mut out = Vec::with_capacity(names.len());
        for name in names {
            let i = self.col_index(name).ok_or_else(|| self.no_column(name))?;
            if out.contains(&i) {
                return Err(SqlError::Invalid(format!(
                    "column `{name}` is listed twice"
                )));
            }
            out.push(i);
        }
        Ok(out)
    }

    pub(crate) fn pk_names(&self) -> Vec<String> {
        self.pk.iter().map(|&i| self.cols[i].name.clone()).collect()
    }

    /// The primary key of a record.
    pub(crate) fn key_of(&self, record: &Value) -> Vec<Value> {
        self.pk
            .iter()
            .map(|&i| {
                record
                    .get(&self.cols[i].name)
                    .cloned()
                    .unwrap_or(Value::Null)
            })
            .collect()
    }

    /// A storage error of the row with key `key`, in SQL's terms.
    pub(crate) fn row_error(&self, key: &[Value], e: silt::Error) -> SqlError {
        match e {
            silt::Error::DuplicateKey { .. } => self.unique_violation(key),
            other => other.into(),
        }
    }

    pub(crate) fn unique_violation(&self, key: &[Value]) -> SqlError {
        SqlError::UniqueViolation {
            table: self.name.clone(),
            constraint: format!("{}_pkey", self.name),
            columns: self.pk_names(),
            values: key.iter().map(key_text).collect(),
        }
    }

    pub(crate) fn not_null(&self, col: usize) -> SqlError {
        SqlError::NotNull {
            table: self.name.clone(),
            column: self.cols[col].name.clone(),
        }
    }

    /// The record of row `r` of full-width arrays (null cells left out).
    pub(crate) fn record(&self, arrays: &[ArrayRef], r: usize) -> Result<Value, SqlError> {
        let mut fields = Vec::with_capacity(self.cols.len());
        for ((c, a), d) in self.cols.iter().zip(arrays).zip(&self.defaults) {
            match convert::value_at(c, a, r)? {
                Some(v) => fields.push((c.name.clone(), v)),
                None if d.is_some() => fields.push((c.name.clone(), Value::Null)),
                None => {}
            }
        }
        Ok(Value::Object(fields))
    }

    /// Column `j`'s default for `n` rows (all null when it has none).
    pub(crate) fn default_column(
        &self,
        j: usize,
        n: usize,
        session: Option<&crate::sequences::SessionSequences>,
    ) -> Result<ArrayRef, SqlError> {
        let c = &self.cols[j];
        let Some(d) = &self.defaults[j] else {
            return Ok(datafusion::arrow::array::new_null_array(&c.data_type, n));
        };
        if *d == silt::FieldDefault::Sequence {
            // n distinct values, taken at once; the session's `currval`.
            let taken = self.ds.next_sequence(&c.name, n as u64)?;
            if let Some(s) = session
                && n > 0
            {
                s.taken(&silt::sequence_name(self.ds.name(), &c.name), taken.last());
            }
            let values: Vec<i64> = taken.values().collect();
            return Ok(Arc::new(datafusion::arrow::array::Int64Array::from(values)));
        }
        let v = d.value(&c.name, c.ty)?;
        let one = Value::Object(vec![(c.name.clone(), v)]);
        Ok(convert::column_from_records(c, &vec![one; n]))
    }
}

/// A storage error of the row with primary key `key` of `ds`, in SQL's
/// terms (a taken key is a unique violation naming the key).
pub(crate) fn row_error(ds: &Arc<Dataset>, key: &[Value], e: silt::Error) -> SqlError {
    Table::new(ds.clone()).row_error(key, e)
}

/// A key value as PostgreSQL shows it in a DETAIL.
pub(crate) fn key_text(v: &Value) -> String {
    match v {
        Value::Null => "null".to_owned(),
        Value::Bool(b) => if *b { "t" } else { "f" }.to_owned(),
        Value::Int(i) => i.to_string(),
        Value::Double(d) => d.to_string(),
        Value::String(s) => s.clone(),
        Value::Binary(b) => {
            let mut s = String::from("\\x");
            for x in b {
                s.push_str(&format!("{x:02x}"));
            }
            s
        }
        other => other.to_string(),
    }
}

pub(crate) fn last_part(n: &ObjectName) -> Result<String, SqlError> {
    ddl::object_parts(n)
        .pop()
        .ok_or_else(|| SqlError::Invalid(format!("bad column name `{n}`")))
}

/// Where rows are written: the dataset, each row its own record-level
/// transaction, or the session's transaction block.
pub(crate) struct Target {
    pub(crate) ds: Arc<Dataset>,
    /// The definition the statement's rows are made against.
    pub(crate) def: Arc<DatasetDef>,
    /// The session's transaction block, if any: reads and writes go
    /// through it.
    pub(crate) txn: Option<Arc<TxnSlot>>,
}

/// What [`Target::write_rows`] did.
pub(crate) struct Written {
    /// Rows written and committed (a live key under `InsertIgnore` is not).
    pub(crate) written: u64,
    /// The first failing row (the rows after it were not attempted).
    pub(crate) failed: Option<(usize, silt::Error)>,
}

impl Target {
    pub(crate) fn get(&self, key: &[Value]) -> Result<Option<Value>, SqlError> {
        match &self.txn {
            Some(slot) => Ok(slot.with(|t| t.get(&self.ds, key))?),
            None => Ok(self.ds.get(key)?),
        }
    }

    /// Delete the row of key `key`; whether there was one.
    pub(crate) fn delete(&self, key: &[Value]) -> Result<bool, SqlError> {
        match &self.txn {
            Some(slot) => Ok(slot.with(|t| t.delete(&self.ds, key))?),
            None => Ok(self.ds.delete(key)?),
        }
    }

    /// [`Target::write_rows`] into the block's transaction: buffered, each
    /// row checked as it is buffered.
    pub(crate) fn write_rows_in(&self, slot: &TxnSlot, rows: Vec<(WriteMode, Value)>) -> Written {
        let mut out = Written {
            written: 0,
            failed: None,
        };
        let ds = &self.ds;
        let r = slot.with(|t| {
            t.expect_def(ds, &self.def)?;
            for (i, (mode, v)) in rows.into_iter().enumerate() {
                let r = match mode {
                    WriteMode::Insert => t.insert(ds, v).map(|_| true),
                    WriteMode::Upsert => t.upsert(ds, v).map(|_| true),
                    WriteMode::InsertIgnore => match ds.prepare(v.clone()) {
                        Ok((key, _)) => match t.get_raw(ds, &key) {
                            Ok(Some(_)) => Ok(false),
                            Ok(None) => t.insert(ds, v).map(|_| true),
                            Err(e) => Err(e),
                        },
                        Err(e) => Err(e),
                    },
                };
                match r {
                    Ok(w) => out.written += u64::from(w),
                    Err(e) => {
                        out.failed = Some((i, e));
                        break;
                    }
                }
            }
            Ok(())
        });
        if let Err(e) = r {
            out.failed = Some((0, e));
        }
        out
    }

    /// Insert `rows` as one transaction (all or none): outside a block
    /// one atomic batch, inside it into the block's transaction.
    pub(crate) fn insert_atomic(&self, rows: Vec<Value>) -> Result<Written, SqlError> {
        if let Some(slot) = &self.txn {
            return Ok(self.write_rows_in(
                slot,
                rows.into_iter().map(|r| (WriteMode::Insert, r)).collect(),
            ));
        }
        let report =
            self.ds
                .write_batch_under(&self.def, rows, BatchOptions::atomic(WriteMode::Insert))?;
        Ok(Written {
            written: report.committed as u64,
            failed: report.failed.into_iter().next(),
        })
    }

    /// [`Target::insert_atomic`] of records prepared for the dataset
    /// (outside a block only).
    /// Insert prepared `rows` as one atomic batch, returning before its
    /// acknowledgment (see `Dataset::write_prepared_unacknowledged`):
    /// `written` rows are durable once the [`silt::PendingAck`] is waited.
    pub(crate) fn insert_prepared(
        &self,
        rows: &silt::PreparedBatch,
    ) -> Result<(Written, Option<silt::PendingAck>), SqlError> {
        let (report, ack) = self
            .ds
            .write_prepared_unacknowledged(rows, WriteMode::Insert)?;
        let w = Written {
            written: report.committed as u64,
            failed: report.failed.into_iter().next(),
        };
        Ok((w, ack))
    }

    /// Write rows in order, stopping at the first failure; consecutive
    /// rows of one mode go through one batch (their commits share log
    /// flushes).
    pub(crate) fn write_rows(&self, rows: Vec<(WriteMode, Value)>) -> Result<Written, SqlError> {
        if let Some(slot) = &self.txn {
            return Ok(self.write_rows_in(slot, rows));
        }
        let mut out = Written {
            written: 0,
            failed: None,
        };
        let mut rows = rows.into_iter().peekable();
        let mut at = 0;
        while let Some((mode, first)) = rows.next() {
            let mut run = vec![first];
            while let Some((_, v)) = rows.next_if(|(m, _)| *m == mode) {
                run.push(v);
            }
            let n = run.len();
            let report = self.ds.write_batch_under(
                &self.def,
                run,
                BatchOptions {
                    mode,
                    atomic: false,
                    stop_on_error: true,
                },
            )?;
            out.written += report.committed as u64;
            if let Some((i, e)) = report.failed.into_iter().next() {
                out.failed = Some((at + i, e));
                return Ok(out);
            }
            at += n;
        }
        Ok(out)
    }
}
