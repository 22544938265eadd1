//! `INSERT` into a Silt table, run by the SQL layer itself (not by
//! DataFusion's DML planner), so that it can keep the promises of SQL:
//!
//! - the rows to insert (`VALUES` or a query) are planned and run by
//!   DataFusion with their own types, then assigned to the table's columns
//!   by [`crate::coerce`], whose errors name the column and the types;
//! - a NULL in a primary-key column or a column declared `NOT NULL` is a
//!   not-null violation (SQLSTATE 23502) naming the column;
//! - a taken primary key is a unique violation (23505) naming the key;
//! - `ON CONFLICT [(pk) | ON CONSTRAINT t_pkey] DO NOTHING` skips rows
//!   whose key exists; `ON CONFLICT ... DO UPDATE SET col = expr [, ...]
//!   [WHERE cond]` updates the existing row instead: `expr` and `cond` see
//!   the existing row's columns (bare, or qualified by the table name or
//!   its alias) and the proposed row as `EXCLUDED.col`; the assigned
//!   columns replace the existing row's (its other fields, undeclared ones
//!   included, stay); a row whose `cond` is not true is left alone.
//!   MySQL's `ON DUPLICATE KEY UPDATE col = expr` is the same, with
//!   `VALUES(col)` for `EXCLUDED.col`. `UPSERT INTO`, `INSERT OR REPLACE`
//!   and `REPLACE INTO` replace the whole row.
//! - Every row is its own record-level transaction: a statement stops at
//!   its first failing row, the rows before it stay committed, and the
//!   error says so ([`SqlError::PartialWrite`]). The result is one `count`
//!   column: rows inserted or updated.
//!
//! Rows are handled in the batches DataFusion produces: one read per row
//! with a proposed key for `DO UPDATE`, one evaluation of the `SET` and
//! `WHERE` expressions per batch (row by row only to find a failing row),
//! and consecutive writes of one kind through one [`silt::Dataset::write_batch`],
//! whose commits share log flushes.
//!
//! `DO UPDATE` reads the existing row, then writes: a concurrent insert of
//! the same key in between is detected (the insert fails) and the row is
//! decided again; a concurrent change or delete of the existing row in
//! between can be lost, as with `UPDATE`.

use std::collections::HashSet;
use std::ops::ControlFlow;
use std::sync::Arc;

use datafusion::arrow::array::{
    Array, ArrayRef, AsArray, RecordBatch, RecordBatchOptions, UInt32Array, UInt64Array,
    new_null_array,
};
use datafusion::arrow::compute::{concat, filter_record_batch, take};
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::common::{DFSchema, ScalarValue, TableReference};
use datafusion::config::ConfigOptions;
use datafusion::execution::SendableRecordBatchStream;
use datafusion::execution::context::SessionContext;
use datafusion::logical_expr::ColumnarValue;
use datafusion::physical_expr::PhysicalExpr;
use datafusion::prelude::DataFrame;
use datafusion::sql::parser::Statement as DFStatement;
use datafusion::sql::sqlparser::ast::{
    AssignmentTarget, ConflictTarget, Expr as SqlExpr, FunctionArg, FunctionArgExpr,
    FunctionArguments, Ident, Insert, ObjectName, OnConflictAction, OnInsert, Query, SelectItem,
    SetExpr, SqliteOnConflict, Statement, TableObject, UnaryOperator, Value as SqlValue,
    visit_expressions, visit_expressions_mut,
};
use futures::StreamExt;
use parking_lot::Mutex;
use silt::{Dataset, Value, WriteMode};

use crate::coerce;
use crate::compile::Compiler;
use crate::convert::{self, ColumnInfo};
use crate::ddl::{self, Parsed};
use crate::error::SqlError;
use crate::identity::{self, Overriding};
use crate::returning::Returning;
use crate::sequences::{SequencesExt, SessionSequences};
use crate::session::{SqlSession, TxnSlot};
use crate::target::{Table, Target, key_text, last_part};

pub(crate) mod kept;

/// How a row whose primary key is taken is handled.
#[derive(Debug, Clone)]
pub enum OnConflict {
    /// `INSERT`: a unique violation.
    Fail,
    /// `UPSERT INTO`, `INSERT OR REPLACE`, `REPLACE INTO`: the new row
    /// replaces the old one whole.
    Replace,
    /// `ON CONFLICT [target] DO NOTHING`: the row is skipped.
    Nothing { target: Option<ConflictTarget> },
    /// `ON CONFLICT [target] DO UPDATE SET ... [WHERE ...]`, or MySQL's
    /// `ON DUPLICATE KEY UPDATE ...`.
    Update {
        target: Option<ConflictTarget>,
        /// (column, expression), as written.
        assignments: Vec<(AssignmentTarget, SqlExpr)>,
        selection: Option<Box<SqlExpr>>,
    },
}

/// An `INSERT` the SQL layer runs itself.
#[derive(Debug, Clone)]
pub struct InsertStmt {
    /// The target table, as written.
    pub table: ObjectName,
    alias: Option<Ident>,
    columns: Vec<ObjectName>,
    source: Box<Query>,
    pub on_conflict: OnConflict,
    /// `OVERRIDING { SYSTEM | USER } VALUE` (see `identity`).
    overriding: Option<Overriding>,
    /// `RETURNING` items.
    pub returning: Option<Vec<SelectItem>>,
    /// The statement as DataFusion plans it (without its `ON CONFLICT`
    /// clause): to describe its parameters, and to run it when the table is
    /// not a Silt dataset.
    plain: Box<Statement>,
}

impl InsertStmt {
    /// The alias the statement gives its table, if any.
    pub fn qualifier(&self) -> Option<String> {
        self.alias.as_ref().map(ddl::ident)
    }

    /// The statement as DataFusion plans it, without `ON CONFLICT`.
    pub fn plain_statement(&self) -> DFStatement {
        DFStatement::Statement(self.plain.clone())
    }
}

/// Recognize an `INSERT`: the SQL layer's own, or (forms it leaves to
/// DataFusion, which plans or refuses them) a DataFusion statement.
pub fn parse(mut ins: Insert, overriding: Option<Overriding>) -> Result<Parsed, SqlError> {
    let returning = ins.returning.take();
    let on = ins.on.take();
    let on_conflict = match (ins.or, ins.replace_into, on) {
        (None, false, None) => OnConflict::Fail,
        (Some(SqliteOnConflict::Replace), _, None) | (None, true, None) => OnConflict::Replace,
        (Some(other), _, None) => {
            return Err(SqlError::Unsupported(format!(
                "INSERT OR {other}; use INSERT, INSERT ... ON CONFLICT DO NOTHING or DO UPDATE, or UPSERT INTO / INSERT OR REPLACE"
            )));
        }
        (None, false, Some(OnInsert::OnConflict(c))) => match c.action {
            OnConflictAction::DoNothing => OnConflict::Nothing {
                target: c.conflict_target,
            },
            OnConflictAction::DoUpdate(u) => OnConflict::Update {
                target: c.conflict_target,
                assignments: u
                    .assignments
                    .into_iter()
                    .map(|a| (a.target, a.value))
                    .collect(),
                selection: u.selection.map(Box::new),
            },
        },
        (None, false, Some(OnInsert::DuplicateKeyUpdate(a))) => OnConflict::Update {
            target: None,
            assignments: a.into_iter().map(|a| (a.target, a.value)).collect(),
            selection: None,
        },
        (None, false, Some(other)) => {
            return Err(SqlError::Unsupported(format!("INSERT ...{other}")));
        }
        (_, _, Some(_)) => {
            return Err(SqlError::Invalid(
                "INSERT OR REPLACE / REPLACE INTO cannot have an ON CONFLICT clause".to_owned(),
            ));
        }
    };
    if !matches!(on_conflict, OnConflict::Fail | OnConflict::Replace) {
        ins.or = None;
    }
    let plain = Box::new(Statement::Insert(ins.clone()));
    // Forms with parts the SQL layer does not handle go to DataFusion,
    // which runs or refuses them.
    let own = !ins.overwrite
        && !ins.ignore
        && ins.partitioned.is_none()
        && ins.after_columns.is_empty()
        && ins.assignments.is_empty()
        && ins.insert_alias.is_none()
        && ins.settings.is_none()
        && ins.format_clause.is_none()
        && ins.output.is_none()
        && ins.multi_table_insert_type.is_none();
    let (TableObject::TableName(table), Some(source), true) = (&ins.table, &ins.source, own) else {
        if !matches!(on_conflict, OnConflict::Fail | OnConflict::Replace)
            || returning.is_some()
            || overriding.is_some()
        {
            return Err(SqlError::Unsupported(format!(
                "this form of INSERT with ON CONFLICT, RETURNING or OVERRIDING: `{}`",
                shorten(&plain.to_string())
            )));
        }
        return Ok(Parsed::DataFusion(Box::new(DFStatement::Statement(plain))));
    };
    Ok(Parsed::Insert(Box::new(InsertStmt {
        table: table.clone(),
        alias: ins.table_alias.as_ref().map(|a| a.alias.clone()),
        columns: ins.columns.clone(),
        source: source.clone(),
        on_conflict,
        overriding,
        returning,
        plain,
    })))
}

fn shorten(s: &str) -> String {
    let mut t: String = s.chars().take(80).collect();
    if t.len() < s.len() {
        t.push_str("...");
    }
    t
}

/// Rows of a `VALUES` list handled at a time.
const VALUES_CHUNK: usize = 8192;

/// Run an `INSERT` into the Silt dataset `ds`; returns the `count` batch.
///
/// Inside a transaction block (`txn`), the source query reads through the
/// block's transaction and the rows are buffered in it; a failing row fails
/// the statement (and the block) with its own error.
pub async fn run(
    ctx: &SessionContext,
    ds: Arc<Dataset>,
    stmt: InsertStmt,
    txn: Option<Arc<TxnSlot>>,
    session: &SqlSession,
) -> Result<Vec<RecordBatch>, SqlError> {
    let in_block = txn.is_some();
    // The engine's options with the session's sequences: `nextval` in the
    // statement and the columns' sequence defaults are the session's
    // (`currval`, `lastval`).
    let options = session
        .statement_config(ctx.state_ref().read().config())
        .options()
        .clone();
    let sequences = Some(session.sequences.clone());
    let r = run_in(ctx, ds, stmt, txn, sequences, options).await;
    match r {
        Err(SqlError::PartialWrite { source, .. }) if in_block => Err(*source),
        r => r,
    }
}

async fn run_in(
    ctx: &SessionContext,
    ds: Arc<Dataset>,
    stmt: InsertStmt,
    txn: Option<Arc<TxnSlot>>,
    sequences: Option<Arc<SessionSequences>>,
    options: Arc<ConfigOptions>,
) -> Result<Vec<RecordBatch>, SqlError> {
    let compiler = Compiler::new(ctx, options);
    let table = Table::new(ds.clone());
    let targets = table.target_columns(&stmt.columns)?;
    let returning = match &stmt.returning {
        Some(items) => {
            let q = stmt
                .alias
                .as_ref()
                .map(ddl::ident)
                .unwrap_or_else(|| table.name.clone());
            Some(Returning::new(&compiler, Table::new(ds), &q, items)?)
        }
        None => None,
    };
    let mode = Mode::new(&compiler, &table, stmt.alias.as_ref(), stmt.on_conflict)?;
    let width_error = |n: usize| {
        SqlError::Invalid(format!(
            "INSERT has {} target columns but {n} expressions",
            targets.len()
        ))
    };
    let ignored;
    let rows = match values_list(&stmt.source) {
        Some(list) => {
            if let Some(row) = list.iter().find(|r| r.len() != targets.len()) {
                return Err(width_error(row.len()));
            }
            ignored = identity_targets(&table, &targets, stmt.overriding, Some(&list))?;
            Rows::Values(list.into_iter())
        }
        None => {
            ignored = identity_targets(&table, &targets, stmt.overriding, None)?;
            let mut query = DFStatement::Statement(Box::new(Statement::Query(stmt.source)));
            // `SELECT v, v`: columns are matched by position, so a repeated
            // name is fine (as in PostgreSQL).
            crate::colnames::name_statement(&mut query);
            // The source query runs with the session's sequences, in the
            // block's snapshot (one copy of the options, for this path only).
            let mut state = ctx.state();
            state
                .config_mut()
                .options_mut()
                .extensions
                .insert(SequencesExt(sequences.clone()));
            if let Some(slot) = &txn {
                state.config_mut().set_extension(slot.clone());
            }
            let plan = state.statement_to_plan(query).await?;
            let frame = match &txn {
                // The source reads what the block sees.
                Some(_) => DataFrame::new(state.clone(), plan),
                None => ctx.execute_logical_plan(plan).await?,
            };
            let stream = frame.execute_stream().await?;
            let schema = stream.schema();
            if schema.fields().len() != targets.len() {
                return Err(width_error(schema.fields().len()));
            }
            // A type the column cannot take is refused before any row.
            for (f, &j) in schema.fields().iter().zip(&targets) {
                coerce::check_assignable(&table.cols[j], f.data_type())?;
            }
            Rows::Query(stream)
        }
    };
    let writer = Arc::new(Writer {
        target: Target {
            ds: table.ds.clone(),
            def: table.def.clone(),
            txn,
        },
        table: Arc::new(table),
        targets,
        ignored,
        sequences,
        mode,
        compiler: Arc::new(compiler),
        seen: Mutex::new(HashSet::new()),
        keep: returning.is_some(),
    });
    drive(writer, rows, returning).await
}

/// Write the statement's `rows` with `writer`, batch by batch; the
/// `count` batch, or the `RETURNING` rows.
async fn drive(
    writer: Arc<Writer>,
    mut rows: Rows,
    returning: Option<Returning>,
) -> Result<Vec<RecordBatch>, SqlError> {
    let mut done = Done::default();
    let mut returned: Vec<RecordBatch> = Vec::new();
    loop {
        let input = match &mut rows {
            Rows::Query(stream) => match stream.next().await {
                None => break,
                Some(Ok(b)) => Input::Batch(b),
                Some(Err(e)) => {
                    return Err(done.failed(None, 0, SqlError::from(e), &mut rows).await);
                }
            },
            Rows::Values(list) => {
                let chunk: Vec<Vec<SqlExpr>> = list.by_ref().take(VALUES_CHUNK).collect();
                if chunk.is_empty() {
                    break;
                }
                Input::Values(chunk)
            }
            Rows::Row(row) => match row.take() {
                Some(r) => Input::Row(r),
                None => break,
            },
        };
        let w = writer.clone();
        // A storage failure (I/O, closed database) is returned as it is.
        let out = ddl::blocking(move || w.write(input)).await?;
        let n = out.rows as u64;
        if let Some(r) = &returning
            && out.failure.is_none()
            && !out.written.is_empty()
        {
            returned.push(r.project(&out.written)?);
        }
        done.committed += out.committed;
        done.unchanged += out.unchanged;
        if let Some((row, e)) = out.failure {
            let row = done.rows + row as u64;
            return Err(done.failed(Some(row), n, e, &mut rows).await);
        }
        done.rows += n;
    }
    match returning {
        Some(r) if returned.is_empty() => Ok(vec![RecordBatch::new_empty(r.schema())]),
        Some(_) => Ok(returned),
        None => count_batch(done.committed),
    }
}

/// Which source columns are not taken: identity columns under `OVERRIDING
/// USER VALUE` (their sequence fills them). Refuses values for `GENERATED
/// ALWAYS` columns without `OVERRIDING SYSTEM VALUE`, but for the `DEFAULT`s
/// of a `VALUES` list (`rows`). See `identity`.
fn identity_targets(
    table: &Table,
    targets: &[usize],
    overriding: Option<Overriding>,
    rows: Option<&[Vec<SqlExpr>]>,
) -> Result<Vec<bool>, SqlError> {
    let def = table.ds.def();
    let always = identity::always(&def);
    let identities = identity::identities(&def);
    let mut ignored = vec![false; targets.len()];
    for (s, &j) in targets.iter().enumerate() {
        let name = table.cols[j].name.as_str();
        match overriding {
            Some(Overriding::User) => ignored[s] = identities.contains(&name),
            Some(Overriding::System) => {}
            None if always.contains(&name) => {
                let defaults = rows.is_some_and(|rows| {
                    rows.iter()
                        .all(|r| r.get(s).is_some_and(is_default_keyword))
                });
                if !defaults {
                    return Err(SqlError::GeneratedAlways {
                        column: name.to_owned(),
                        update: false,
                    });
                }
            }
            None => {}
        }
    }
    Ok(ignored)
}

/// The keyword `DEFAULT` as a value of a `VALUES` list.
fn is_default_keyword(e: &SqlExpr) -> bool {
    matches!(e, SqlExpr::Identifier(i) if i.quote_style.is_none() && i.value.eq_ignore_ascii_case("default"))
}

/// The rows a statement inserts.
enum Rows {
    /// A query's rows, as DataFusion produces them (typed by the query).
    Query(SendableRecordBatchStream),
    /// The rows of a `VALUES` list not handled yet: each value is assigned
    /// to its column on its own, as PostgreSQL does (DataFusion would give
    /// every value of a column one type).
    Values(std::vec::IntoIter<Vec<SqlExpr>>),
    /// One row of values already evaluated, one per source column (a kept
    /// statement's, see [`kept`]), until it is taken.
    Row(Option<Vec<ScalarValue>>),
}

/// One batch of rows to insert.
enum Input {
    Batch(RecordBatch),
    Values(Vec<Vec<SqlExpr>>),
    Row(Vec<ScalarValue>),
}

/// The rows of a plain `VALUES` list source (no `ORDER BY`, `LIMIT`,
/// `WITH`, or subqueries, which DataFusion plans as a query).
fn values_list(q: &Query) -> Option<Vec<Vec<SqlExpr>>> {
    let SetExpr::Values(v) = q.body.as_ref() else {
        return None;
    };
    let plain = q.with.is_none()
        && q.order_by.is_none()
        && q.limit_clause.is_none()
        && q.fetch.is_none()
        && q.pipe_operators.is_empty()
        && !v.value_keyword;
    let subquery = visit_expressions(v, |e| match e {
        SqlExpr::Subquery(_) | SqlExpr::Exists { .. } | SqlExpr::InSubquery { .. } => {
            ControlFlow::Break(())
        }
        _ => ControlFlow::Continue(()),
    });
    if !plain || subquery.is_break() {
        return None;
    }
    Some(v.rows.iter().map(|r| r.content.clone()).collect())
}

/// Whether `sql` is surely an `INSERT` (or `UPSERT`) of a short `VALUES`
/// list of values: a statement whose work before its write is bounded by
/// its length (no query to run; each value is a literal or a function of
/// literals). Conservative: any `SELECT` in the text, even in a string,
/// says no. A server may run such a statement on a connection's own task.
pub fn is_short_values(sql: &str) -> bool {
    const MAX: usize = 16 * 1024;
    if sql.len() > MAX {
        return false;
    }
    let lower = sql.to_ascii_lowercase();
    let t = lower.trim_start();
    (t.starts_with("insert") || t.starts_with("upsert"))
        && lower.contains("values")
        && !lower.contains("select")
}

/// The `count` result of a DML statement.
pub fn count_batch(n: u64) -> Result<Vec<RecordBatch>, SqlError> {
    let schema = Arc::new(Schema::new(vec![Field::new(
        "count",
        DataType::UInt64,
        false,
    )]));
    let b = RecordBatch::try_new(schema, vec![Arc::new(UInt64Array::from(vec![n]))])
        .map_err(|e| SqlError::from(datafusion::error::DataFusionError::from(e)))?;
    Ok(vec![b])
}

/// How many rows of a query after a failing row are read to tell how many
/// rows the statement had.
const COUNT_AFTER_FAILURE: u64 = 1 << 20;

/// What a statement has done so far.
#[derive(Default)]
struct Done {
    /// Rows handled (written or left alone) in the batches before this one.
    rows: u64,
    committed: u64,
    unchanged: u64,
}

impl Done {
    /// The error of a statement that stopped at `row` (0-based, in a batch
    /// of `batch_rows`; `None`: reading the rows failed), saying what
    /// landed. The rest of the rows are read (not written, and up to
    /// [`COUNT_AFTER_FAILURE`] of them) to tell how many the statement had.
    /// A one-row statement's error is returned as it is.
    async fn failed(
        &self,
        row: Option<u64>,
        batch_rows: u64,
        e: SqlError,
        rows: &mut Rows,
    ) -> SqlError {
        let total = match (row, rows) {
            (Some(_), Rows::Values(rest)) => Some(self.rows + batch_rows + rest.len() as u64),
            (Some(_), Rows::Row(rest)) => Some(self.rows + batch_rows + u64::from(rest.is_some())),
            (Some(_), Rows::Query(stream)) => {
                let mut rest = 0u64;
                loop {
                    match stream.next().await {
                        None => break Some(self.rows + batch_rows + rest),
                        Some(Ok(b)) => rest += b.num_rows() as u64,
                        Some(Err(_)) => break None,
                    }
                    if rest > COUNT_AFTER_FAILURE {
                        break None;
                    }
                }
            }
            (None, _) => None,
        };
        let nothing_before = self.committed == 0 && self.unchanged == 0;
        if total == Some(1) || (row.is_none() && nothing_before) {
            return e;
        }
        SqlError::PartialWrite {
            row: row.map(|r| r + 1),
            total,
            committed: self.committed,
            unchanged: self.unchanged,
            source: Box::new(e),
        }
    }
}

/// What the statement does with each row.
enum Mode {
    /// One write mode for every row.
    Write(WriteMode),
    Update(Box<OnUpdate>),
}

/// The compiled `DO UPDATE` clause.
struct OnUpdate {
    /// (table column, expression) per `SET` item.
    sets: Vec<(usize, Arc<dyn PhysicalExpr>)>,
    filter: Option<Arc<dyn PhysicalExpr>>,
    /// The evaluation input: the existing row's columns, then the
    /// proposed row's (`excluded.*`).
    schema: SchemaRef,
}

impl Mode {
    fn new(
        compiler: &Compiler,
        table: &Table,
        alias: Option<&Ident>,
        on: OnConflict,
    ) -> Result<Mode, SqlError> {
        let (target, assignments, selection) = match on {
            OnConflict::Fail => return Ok(Mode::Write(WriteMode::Insert)),
            OnConflict::Replace => return Ok(Mode::Write(WriteMode::Upsert)),
            OnConflict::Nothing { target } => {
                check_target(table, target.as_ref())?;
                return Ok(Mode::Write(WriteMode::InsertIgnore));
            }
            OnConflict::Update {
                target,
                assignments,
                selection,
            } => (target, assignments, selection),
        };
        check_target(table, target.as_ref())?;
        let qualifier = alias.map(ddl::ident).unwrap_or_else(|| table.name.clone());
        let mut fields = Vec::with_capacity(table.cols.len() * 2);
        for q in [qualifier.as_str(), "excluded"] {
            for c in &table.cols {
                fields.push((
                    Some(TableReference::bare(q)),
                    Arc::new(Field::new(&c.name, c.data_type.clone(), true)),
                ));
            }
        }
        let df_schema = DFSchema::new_with_metadata(fields, Default::default())?;
        let schema: SchemaRef = Arc::new(df_schema.as_arrow().clone());
        let names: HashSet<String> = table.cols.iter().map(|c| c.name.clone()).collect();
        let q_ident = Ident::with_quote('"', qualifier.clone());
        let compile = |mut e: SqlExpr| -> Result<Arc<dyn PhysicalExpr>, SqlError> {
            qualify(&mut e, &q_ident, &names);
            compiler.compile(e, &df_schema)
        };
        let mut sets: Vec<(usize, Arc<dyn PhysicalExpr>)> = Vec::new();
        let def = table.ds.def();
        let always = identity::always(&def);
        for (t, e) in assignments {
            let name = match &t {
                AssignmentTarget::ColumnName(n) => last_part(n)?,
                AssignmentTarget::Tuple(_) => {
                    return Err(SqlError::Unsupported(format!(
                        "assigning a tuple `{t}`; assign each column"
                    )));
                }
            };
            let j = table
                .col_index(&name)
                .ok_or_else(|| table.no_column(&name))?;
            if table.pk.contains(&j) {
                return Err(SqlError::Unsupported(format!(
                    "ON CONFLICT DO UPDATE SET of the primary-key column `{name}`; the key stays the conflicting row's"
                )));
            }
            if always.contains(&name.as_str()) {
                return Err(SqlError::GeneratedAlways {
                    column: name,
                    update: true,
                });
            }
            if sets.iter().any(|(k, _)| *k == j) {
                return Err(SqlError::Invalid(format!(
                    "column `{name}` is assigned twice"
                )));
            }
            let phys = compile(e)?;
            coerce::check_assignable(&table.cols[j], &phys.data_type(&schema)?)?;
            sets.push((j, phys));
        }
        let filter = match selection {
            Some(e) => {
                let phys = compile(*e)?;
                let dt = phys.data_type(&schema)?;
                if !matches!(dt, DataType::Boolean | DataType::Null) {
                    return Err(SqlError::TypeMismatch {
                        column: "WHERE".to_owned(),
                        column_type: "boolean".to_owned(),
                        found: coerce::sql_type_name(&dt),
                    });
                }
                Some(phys)
            }
            None => None,
        };
        Ok(Mode::Update(Box::new(OnUpdate {
            sets,
            filter,
            schema,
        })))
    }
}

/// The conflict target must be the primary key (the only unique
/// constraint a table has).
fn check_target(table: &Table, target: Option<&ConflictTarget>) -> Result<(), SqlError> {
    let refuse = |what: String| SqlError::ConflictTarget {
        table: table.name.clone(),
        target: what,
        primary_key: table.pk_names(),
    };
    match target {
        None => Ok(()),
        Some(ConflictTarget::Columns(cols)) => {
            let mut got: Vec<String> = cols.iter().map(ddl::ident).collect();
            let mut want = table.pk_names();
            got.sort();
            want.sort();
            if got == want {
                Ok(())
            } else {
                Err(refuse(format!("({})", got.join(", "))))
            }
        }
        Some(ConflictTarget::OnConstraint(name)) => {
            let n = last_part(name)?;
            if n == format!("{}_pkey", table.name) {
                Ok(())
            } else {
                Err(refuse(format!("constraint `{n}`")))
            }
        }
    }
}

/// Bare column names refer to the existing row: qualify them (they would
/// be ambiguous with `excluded.*`); MySQL's `VALUES(col)` is `excluded.col`.
fn qualify(e: &mut SqlExpr, qualifier: &Ident, columns: &HashSet<String>) {
    let _ = visit_expressions_mut(e, |e| {
        match e {
            SqlExpr::Identifier(id) if columns.contains(&ddl::ident(id)) => {
                *e = SqlExpr::CompoundIdentifier(vec![qualifier.clone(), id.clone()]);
            }
            SqlExpr::Function(f)
                if f.name.to_string().eq_ignore_ascii_case("values")
                    && let FunctionArguments::List(list) = &f.args
                    && let [FunctionArg::Unnamed(FunctionArgExpr::Expr(arg))] =
                        list.args.as_slice() =>
            {
                let col = match arg {
                    SqlExpr::Identifier(id) => Some(id.clone()),
                    SqlExpr::CompoundIdentifier(parts) => parts.last().cloned(),
                    _ => None,
                };
                if let Some(col) = col {
                    *e = SqlExpr::CompoundIdentifier(vec![Ident::new("excluded"), col]);
                }
            }
            _ => {}
        }
        ControlFlow::<()>::Continue(())
    });
}

/// What one batch of proposed rows did.
struct BatchOut {
    /// Rows in the batch.
    rows: usize,
    committed: u64,
    unchanged: u64,
    /// The failing row of the batch; the rows after it were not attempted.
    failure: Option<(usize, SqlError)>,
    /// The rows as written (only for `RETURNING`).
    written: Vec<Value>,
}

/// (rows, the table's columns, the first row that failed and why).
type Assigned = (usize, Vec<ArrayRef>, Option<(usize, SqlError)>);

/// A literal as DataFusion types it (`None`: not a plain literal).
fn literal(e: &SqlExpr, float_as_decimal: bool) -> Option<ScalarValue> {
    let number = |n: &str, negative: bool| -> Option<ScalarValue> {
        let signed = if negative {
            format!("-{n}")
        } else {
            n.to_owned()
        };
        if let Ok(i) = signed.parse::<i64>() {
            return Some(ScalarValue::Int64(Some(i)));
        }
        if !negative && let Ok(u) = n.parse::<u64>() {
            return Some(ScalarValue::UInt64(Some(u)));
        }
        if float_as_decimal {
            return None;
        }
        signed
            .parse::<f64>()
            .ok()
            .map(|f| ScalarValue::Float64(Some(f)))
    };
    match e {
        SqlExpr::Value(v) => match &v.value {
            SqlValue::Number(n, false) => number(n, false),
            SqlValue::SingleQuotedString(s) => Some(ScalarValue::Utf8(Some(s.clone()))),
            SqlValue::Boolean(b) => Some(ScalarValue::Boolean(Some(*b))),
            SqlValue::Null => Some(ScalarValue::Null),
            _ => None,
        },
        SqlExpr::UnaryOp {
            op: UnaryOperator::Minus,
            expr,
        } => match expr.as_ref() {
            SqlExpr::Value(v) => match &v.value {
                SqlValue::Number(n, false) => number(n, true),
                _ => None,
            },
            _ => None,
        },
        _ => None,
    }
}

/// The values of one column of a `VALUES` list assigned to `col`: all at
/// once when they have one type, else one by one; and the first row that
/// failed.
fn assign_scalars(
    col: &ColumnInfo,
    values: Vec<ScalarValue>,
) -> Result<(ArrayRef, Option<(usize, SqlError)>), SqlError> {
    let n = values.len();
    let mut types: Vec<DataType> = Vec::new();
    for v in values.iter().filter(|v| !v.is_null()) {
        let t = v.data_type();
        if !types.contains(&t) {
            types.push(t);
        }
    }
    match types.as_slice() {
        [] => Ok((new_null_array(&col.data_type, n), None)),
        [t] => {
            let typed = values
                .into_iter()
                .map(|v| {
                    if v.is_null() {
                        ScalarValue::try_from(t)
                    } else {
                        Ok(v)
                    }
                })
                .collect::<Result<Vec<_>, _>>()?;
            let first = typed.iter().position(|v| !v.is_null()).unwrap_or(0);
            let a = ScalarValue::iter_to_array(typed)?;
            match coerce::coerce(col, &a) {
                Ok(c) => Ok((c.array, c.error)),
                Err(e) => Ok((new_null_array(&col.data_type, n), Some((first, e)))),
            }
        }
        _ => {
            let mut parts = Vec::with_capacity(n);
            let mut failure = None;
            for (r, v) in values.iter().enumerate() {
                match coerce::coerce(col, &v.to_array()?) {
                    Ok(c) => {
                        keep_first(&mut failure, c.error.map(|(_, e)| (r, e)));
                        parts.push(c.array);
                    }
                    Err(e) => {
                        keep_first(&mut failure, Some((r, e)));
                        parts.push(new_null_array(&col.data_type, 1));
                    }
                }
            }
            let refs: Vec<&dyn Array> = parts.iter().map(|a| a.as_ref()).collect();
            Ok((concat(&refs).map_err(arrow)?, failure))
        }
    }
}

/// The value of one expression of a `VALUES` list: literals directly,
/// anything else through DataFusion.
fn eval(compiler: &Compiler, e: SqlExpr) -> Result<ScalarValue, SqlError> {
    let decimal = compiler.options().sql_parser.parse_float_as_decimal;
    if let Some(v) = literal(&e, decimal) {
        return Ok(v);
    }
    let phys = compiler.compile(e, &DFSchema::empty())?;
    let one = RecordBatch::try_new_with_options(
        Arc::new(Schema::empty()),
        vec![],
        &RecordBatchOptions::new().with_row_count(Some(1)),
    )
    .map_err(arrow)?;
    Ok(match phys.evaluate(&one)? {
        ColumnarValue::Scalar(s) => s,
        ColumnarValue::Array(a) => ScalarValue::try_from_array(&a, 0)?,
    })
}

/// Keep the failure of the earliest row.
fn keep_first(slot: &mut Option<(usize, SqlError)>, e: Option<(usize, SqlError)>) {
    if let Some((r, err)) = e
        && slot.as_ref().is_none_or(|(s, _)| r < *s)
    {
        *slot = Some((r, err));
    }
}

/// What `DO UPDATE` does with one row whose key exists.
enum Decision {
    Update(Value),
    Skip,
}

/// (row, decision) of the rows decided, and the first row that failed.
type Decided = (Vec<(usize, Decision)>, Option<(usize, SqlError)>);

/// Writes the proposed rows of one statement, batch by batch.
struct Writer {
    target: Target,
    table: Arc<Table>,
    /// The table column each source column fills.
    targets: Vec<usize>,
    /// Source columns not taken (see [`identity_targets`]).
    ignored: Vec<bool>,
    /// The session's sequence state: values the columns' defaults take
    /// are its `currval`.
    sequences: Option<Arc<SessionSequences>>,
    mode: Mode,
    /// Evaluates the values of a `VALUES` list.
    compiler: Arc<Compiler>,
    /// Encoded keys proposed so far (`DO UPDATE` refuses a key twice).
    seen: Mutex<HashSet<Vec<u8>>>,
    /// Keep the rows written (for `RETURNING`).
    keep: bool,
}

/// How many times a row of `DO UPDATE` is decided again when its key was
/// inserted concurrently.
const RACE_RETRIES: usize = 5;

impl Writer {
    /// Assign, check and write one batch of proposed rows.
    fn write(&self, input: Input) -> Result<BatchOut, SqlError> {
        let t = &self.table;
        let (n, arrays, mut failure) = match input {
            Input::Batch(b) => self.assign_batch(&b)?,
            Input::Values(v) => self.assign_values(v)?,
            Input::Row(r) => {
                let columns = r.into_iter().map(|v| vec![v]).collect();
                self.assign_columns(1, columns, None)?
            }
        };
        for &j in &t.required {
            if let Some(r) = (0..n).find(|&r| arrays[j].is_null(r)) {
                keep_first(&mut failure, Some((r, t.not_null(j))));
            }
        }
        let limit = failure.as_ref().map_or(n, |(r, _)| *r);
        let records = (0..limit)
            .map(|r| t.record(&arrays, r))
            .collect::<Result<Vec<_>, _>>()?;
        let mut out = match &self.mode {
            Mode::Write(mode) => self.write_plain(*mode, records)?,
            Mode::Update(u) => self.write_update(u, &arrays, records)?,
        };
        if out.failure.is_none() {
            out.failure = failure;
        }
        out.rows = n;
        Ok(out)
    }

    /// The table's columns (full width, in its types) of a batch of the
    /// source query, and the first row that could not be assigned.
    fn assign_batch(&self, batch: &RecordBatch) -> Result<Assigned, SqlError> {
        let n = batch.num_rows();
        let mut arrays: Vec<ArrayRef> = self.initial_columns(n)?;
        let mut failure = None;
        for (s, &j) in self.targets.iter().enumerate() {
            if self.ignored[s] {
                continue;
            }
            let c = coerce::coerce(&self.table.cols[j], batch.column(s))?;
            keep_first(&mut failure, c.error);
            arrays[j] = c.array;
        }
        Ok((n, arrays, failure))
    }

    /// As [`Writer::assign_batch`] for rows of a `VALUES` list: each value
    /// is evaluated and assigned on its own (a value that fails, fails its
    /// row).
    fn assign_values(&self, rows: Vec<Vec<SqlExpr>>) -> Result<Assigned, SqlError> {
        let n = rows.len();
        let mut failure = None;
        let mut columns: Vec<Vec<ScalarValue>> = vec![Vec::with_capacity(n); self.targets.len()];
        for (r, row) in rows.into_iter().enumerate() {
            for (s, e) in row.into_iter().enumerate() {
                if self.ignored[s] {
                    columns[s].push(ScalarValue::Null);
                    continue;
                }
                let v = match self.eval_or_default(e, s) {
                    Ok(v) => v,
                    Err(err) => {
                        keep_first(&mut failure, Some((r, err)));
                        ScalarValue::Null
                    }
                };
                columns[s].push(v);
            }
        }
        self.assign_columns(n, columns, failure)
    }

    /// The table's columns of `n` rows whose values are `columns` (one
    /// list per source column), and the first row that failed (`failure`:
    /// in evaluating its values, or in assigning them).
    fn assign_columns(
        &self,
        n: usize,
        columns: Vec<Vec<ScalarValue>>,
        mut failure: Option<(usize, SqlError)>,
    ) -> Result<Assigned, SqlError> {
        let mut arrays = self.initial_columns(n)?;
        for ((values, &j), &ignored) in columns.into_iter().zip(&self.targets).zip(&self.ignored) {
            if ignored {
                continue;
            }
            let (a, err) = assign_scalars(&self.table.cols[j], values)?;
            keep_first(&mut failure, err);
            arrays[j] = a;
        }
        Ok((n, arrays, failure))
    }

    /// The columns of `n` rows before the source's are assigned: each
    /// column's default, or nulls.
    fn initial_columns(&self, n: usize) -> Result<Vec<ArrayRef>, SqlError> {
        (0..self.table.cols.len())
            .map(|j| {
                let given = (self.targets.iter().zip(&self.ignored)).any(|(&t, &i)| t == j && !i);
                if given {
                    Ok(new_null_array(&self.table.cols[j].data_type, n))
                } else {
                    self.table.default_column(j, n, self.sequences.as_deref())
                }
            })
            .collect()
    }

    /// The value of one expression of a `VALUES` list for source column
    /// `s`, where the keyword `DEFAULT` is the column's default.
    fn eval_or_default(&self, e: SqlExpr, s: usize) -> Result<ScalarValue, SqlError> {
        if is_default_keyword(&e) {
            let a = self
                .table
                .default_column(self.targets[s], 1, self.sequences.as_deref())?;
            return Ok(ScalarValue::try_from_array(&a, 0)?);
        }
        self.eval_value(e)
    }

    /// The value of one expression of a `VALUES` list: literals directly,
    /// anything else through DataFusion.
    fn eval_value(&self, e: SqlExpr) -> Result<ScalarValue, SqlError> {
        eval(&self.compiler, e)
    }

    fn write_plain(&self, mode: WriteMode, records: Vec<Value>) -> Result<BatchOut, SqlError> {
        let n = records.len();
        let keys: Vec<Vec<Value>> = records.iter().map(|r| self.table.key_of(r)).collect();
        // For RETURNING under DO NOTHING: the rows whose key is free (the
        // first of each key).
        let mut fresh = vec![true; if self.keep { n } else { 0 }];
        if self.keep && mode == WriteMode::InsertIgnore {
            let mut batch_keys = HashSet::new();
            for (i, k) in keys.iter().enumerate() {
                fresh[i] =
                    batch_keys.insert(self.table.ds.encode_pk(k)?) && self.target.get(k)?.is_none();
            }
        }
        let kept = if self.keep {
            records.clone()
        } else {
            Vec::new()
        };
        let w = self
            .target
            .write_rows(records.into_iter().map(|r| (mode, r)).collect())?;
        let attempted = w.failed.as_ref().map_or(n, |(i, _)| *i) as u64;
        let mut written: Vec<Value> = Vec::new();
        if self.keep && w.failed.is_none() {
            let mut rows: Vec<(usize, Value)> = kept
                .into_iter()
                .enumerate()
                .filter(|(i, _)| fresh[*i])
                .collect();
            if rows.len() as u64 != w.written {
                // Another writer took some of the keys meanwhile: the rows
                // written are those stored as proposed.
                let mut mine = Vec::new();
                for (i, r) in rows {
                    if self.target.get(&keys[i])?.as_ref() == Some(&r) {
                        mine.push((i, r));
                    }
                }
                rows = mine;
            }
            written = rows.into_iter().map(|(_, r)| r).collect();
        }
        Ok(BatchOut {
            rows: n,
            committed: w.written,
            unchanged: attempted.saturating_sub(w.written),
            failure: w
                .failed
                .map(|(i, e)| (i, self.table.row_error(&keys[i], e))),
            written,
        })
    }

    fn write_update(
        &self,
        u: &OnUpdate,
        arrays: &[ArrayRef],
        records: Vec<Value>,
    ) -> Result<BatchOut, SqlError> {
        let t = &self.table;
        let mut failure: Option<(usize, SqlError)> = None;
        let mut keys = Vec::with_capacity(records.len());
        {
            let mut seen = self.seen.lock();
            for r in &records {
                let key = t.key_of(r);
                if !seen.insert(t.ds.encode_pk(&key)?) {
                    failure = Some((
                        keys.len(),
                        SqlError::AffectsRowTwice {
                            columns: t.pk_names(),
                            values: key.iter().map(key_text).collect(),
                        },
                    ));
                    break;
                }
                keys.push(key);
            }
        }
        let mut limit = keys.len();
        let mut existing = Vec::with_capacity(limit);
        for k in &keys {
            existing.push(self.target.get(k)?);
        }
        let conflicts: Vec<(usize, Value)> = existing
            .iter()
            .enumerate()
            .filter_map(|(r, e)| e.clone().map(|e| (r, e)))
            .collect();
        let (decisions, eval_failure) = self.decide_rows(u, arrays, &conflicts)?;
        if let Some((r, e)) = eval_failure {
            limit = r;
            failure = Some((r, e));
        }
        // (row, mode, record) to write, in row order; rows left alone.
        let mut writes: Vec<(usize, WriteMode, Value)> = Vec::new();
        let mut skipped: Vec<usize> = Vec::new();
        let mut decided = decisions.into_iter().peekable();
        for (r, rec) in records.into_iter().enumerate().take(limit) {
            match decided.next_if(|(d, _)| *d == r) {
                Some((_, Decision::Update(v))) => writes.push((r, WriteMode::Upsert, v)),
                Some((_, Decision::Skip)) => skipped.push(r),
                None => writes.push((r, WriteMode::Insert, rec)),
            }
        }
        let mut committed = 0;
        let mut start = 0;
        let mut retries = 0;
        while start < writes.len() {
            let rows = writes[start..]
                .iter()
                .map(|(_, m, v)| (*m, v.clone()))
                .collect();
            let w = self.target.write_rows(rows)?;
            committed += w.written;
            let Some((i, e)) = w.failed else {
                break;
            };
            let at = start + i;
            let (row, mode) = (writes[at].0, writes[at].1);
            if mode == WriteMode::Insert
                && matches!(e, silt::Error::DuplicateKey { .. })
                && retries < RACE_RETRIES
            {
                // Another writer inserted the key after it was read:
                // decide the row again against the row now there.
                retries += 1;
                let now = self.target.get(&keys[row])?;
                let Some(now) = now else {
                    start = at;
                    continue;
                };
                let (mut d, f) = self.decide_rows(u, arrays, &[(row, now)])?;
                match (d.pop(), f) {
                    (Some((_, Decision::Update(v))), _) => {
                        writes[at] = (row, WriteMode::Upsert, v);
                    }
                    (Some((_, Decision::Skip)), _) => {
                        writes.remove(at);
                        skipped.push(row);
                    }
                    (None, Some((_, e))) => {
                        failure = Some((row, e));
                        break;
                    }
                    (None, None) => {}
                }
                start = at;
                continue;
            }
            failure = Some((row, t.row_error(&keys[row], e)));
            break;
        }
        let stop = failure.as_ref().map_or(usize::MAX, |(r, _)| *r);
        let written = if self.keep && failure.is_none() {
            writes.into_iter().map(|(_, _, v)| v).collect()
        } else {
            Vec::new()
        };
        Ok(BatchOut {
            rows: 0,
            committed,
            unchanged: skipped.iter().filter(|&&r| r < stop).count() as u64,
            failure,
            written,
        })
    }

    /// Decide the rows whose key exists (`(row, existing record)`, in row
    /// order): the decisions of the rows before the first failing one, and
    /// that failure.
    fn decide_rows(
        &self,
        u: &OnUpdate,
        arrays: &[ArrayRef],
        conflicts: &[(usize, Value)],
    ) -> Result<Decided, SqlError> {
        if conflicts.is_empty() {
            return Ok((Vec::new(), None));
        }
        let t = &self.table;
        let existing: Vec<Value> = conflicts.iter().map(|(_, v)| v.clone()).collect();
        let mut columns: Vec<ArrayRef> = t
            .cols
            .iter()
            .map(|c| convert::column_from_records(c, &existing))
            .collect();
        let rows = conflicts
            .iter()
            .map(|(r, _)| u32::try_from(*r))
            .collect::<Result<Vec<u32>, _>>()
            .map_err(|_| SqlError::Runtime("a batch of more than 2^32 rows".to_owned()))?;
        let idx = UInt32Array::from(rows);
        for a in arrays {
            columns.push(take(a, &idx, None).map_err(arrow)?);
        }
        let batch = RecordBatch::try_new(u.schema.clone(), columns).map_err(arrow)?;
        let at = |k: usize| conflicts[k].0;
        match self.decide(u, &batch, &existing) {
            Ok(d) => Ok((
                d.into_iter().enumerate().map(|(k, d)| (at(k), d)).collect(),
                None,
            )),
            Err((k, e)) => {
                // The first failing row: the one reported, else (an error
                // of a whole-batch evaluation) found row by row.
                let (k, e) = match k {
                    Some(k) => (k, e),
                    None => (0..batch.num_rows())
                        .find_map(|k| {
                            self.decide(u, &batch.slice(k, 1), &existing[k..=k])
                                .err()
                                .map(|(_, e)| (k, e))
                        })
                        .unwrap_or((0, e)),
                };
                let before = self
                    .decide(u, &batch.slice(0, k), &existing[..k])
                    .map_err(|(_, e)| e)?;
                Ok((
                    before
                        .into_iter()
                        .enumerate()
                        .map(|(i, d)| (at(i), d))
                        .collect(),
                    Some((at(k), e)),
                ))
            }
        }
    }

    /// Evaluate `WHERE` and `SET` over a batch of existing rows and their
    /// proposed rows; an error carries its row when it is known.
    fn decide(
        &self,
        u: &OnUpdate,
        batch: &RecordBatch,
        existing: &[Value],
    ) -> Result<Vec<Decision>, (Option<usize>, SqlError)> {
        let n = batch.num_rows();
        let t = &self.table;
        let whole = |e: datafusion::error::DataFusionError| (None, SqlError::from(e));
        let pass: Vec<bool> = match &u.filter {
            None => vec![true; n],
            Some(f) => {
                let v = f
                    .evaluate(batch)
                    .and_then(|v| v.into_array(n))
                    .map_err(whole)?;
                match v.as_boolean_opt() {
                    Some(b) => (0..n).map(|i| b.is_valid(i) && b.value(i)).collect(),
                    None => vec![false; n],
                }
            }
        };
        let chosen: Vec<usize> = (0..n).filter(|&i| pass[i]).collect();
        let sub = if chosen.len() == n {
            batch.clone()
        } else {
            let mask = datafusion::arrow::array::BooleanArray::from(pass.clone());
            filter_record_batch(batch, &mask).map_err(|e| (None, arrow(e)))?
        };
        let m = sub.num_rows();
        let mut values = Vec::with_capacity(u.sets.len());
        let mut failure: Option<(usize, SqlError)> = None;
        for (j, e) in &u.sets {
            let v = e
                .evaluate(&sub)
                .and_then(|v| v.into_array(m))
                .map_err(whole)?;
            let c = coerce::coerce(&t.cols[*j], &v).map_err(|e| (None, e))?;
            keep_first(&mut failure, c.error.map(|(k, e)| (chosen[k], e)));
            if t.required.contains(j)
                && let Some(k) = (0..m).find(|&k| c.array.is_null(k))
            {
                keep_first(&mut failure, Some((chosen[k], t.not_null(*j))));
            }
            values.push(c.array);
        }
        if let Some((r, e)) = failure {
            return Err((Some(r), e));
        }
        let mut out = Vec::with_capacity(n);
        let mut k = 0;
        for (i, ok) in pass.iter().enumerate() {
            if !*ok {
                out.push(Decision::Skip);
                continue;
            }
            let Value::Object(mut fields) = existing[i].clone() else {
                return Err((
                    Some(i),
                    SqlError::Runtime("a stored record is not an object".to_owned()),
                ));
            };
            for ((j, _), a) in u.sets.iter().zip(&values) {
                let c = &t.cols[*j];
                let v = convert::value_at(c, a, k)
                    .map_err(|e| (Some(i), SqlError::from(e)))?
                    .unwrap_or(Value::Null);
                match fields.iter_mut().find(|(name, _)| *name == c.name) {
                    Some(slot) => slot.1 = v,
                    None => fields.push((c.name.clone(), v)),
                }
            }
            out.push(Decision::Update(Value::Object(fields)));
            k += 1;
        }
        Ok(out)
    }
}

fn arrow(e: datafusion::arrow::error::ArrowError) -> SqlError {
    SqlError::from(datafusion::error::DataFusionError::from(e))
}

#[cfg(test)]
mod tests {
    #[test]
    fn short_values_inserts_are_recognized_conservatively() {
        use super::is_short_values;
        assert!(is_short_values(
            "INSERT INTO t VALUES (1, 'a', ST_Point(1, 2))"
        ));
        assert!(is_short_values("  upsert into t values (1)"));
        assert!(!is_short_values("INSERT INTO t SELECT * FROM u"));
        assert!(!is_short_values(
            "INSERT INTO t VALUES ((SELECT max(id) FROM u))"
        ));
        assert!(!is_short_values("INSERT INTO t VALUES ('select')"));
        assert!(!is_short_values("DELETE FROM t"));
        let long = format!("INSERT INTO t VALUES ('{}')", "x".repeat(20_000));
        assert!(!is_short_values(&long));
    }
}
