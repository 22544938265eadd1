//! `UPDATE ... FROM`, `DELETE ... USING` and `RETURNING` of both: the forms
//! DataFusion's DML planning does not take. The rows to change are found by
//! a query the statement becomes (`SELECT` of the target's key and the new
//! values, or of the whole target row, from the target and the other
//! tables, with the `WHERE`); each row is then changed as a plain `UPDATE`
//! or `DELETE` changes it (through the session's transaction block when
//! there is one), at most once however many rows of the other tables it
//! joins.

use std::collections::HashSet;
use std::sync::Arc;

use datafusion::arrow::record_batch::RecordBatch;
use datafusion::logical_expr::LogicalPlan;
use datafusion::prelude::{DataFrame, SessionContext};
use datafusion::sql::sqlparser::ast::{
    AssignmentTarget, Delete, Expr as SqlExpr, FromTable, Ident, ObjectName, SelectItem,
    TableFactor, TableWithJoins, Update, UpdateTableFromKind,
};
use futures::StreamExt;
use silt::{Dataset, Value, WriteMode};

use crate::compile::Compiler;
use crate::convert::ColumnInfo;
use crate::ddl::{self, Parsed};
use crate::error::SqlError;
use crate::insert::count_batch;
use crate::returning::Returning;
use crate::session::TxnSlot;
use crate::sink::{Changes, assign, update_rows};
use crate::target::{Table, Target, last_part};

/// An `UPDATE` or `DELETE` the SQL layer runs itself.
#[derive(Debug, Clone)]
pub struct DmlStmt {
    /// The target table, as written.
    pub table: ObjectName,
    alias: Option<Ident>,
    op: Op,
    /// `UPDATE ... FROM` / `DELETE ... USING` tables.
    others: Vec<TableWithJoins>,
    selection: Option<SqlExpr>,
    pub(crate) returning: Option<Vec<SelectItem>>,
}

#[derive(Debug, Clone)]
enum Op {
    /// (column, new value) per `SET` item.
    Update(Vec<(String, SqlExpr)>),
    Delete,
}

/// The target of an `UPDATE`/`DELETE`: one plain table, maybe aliased.
fn target(t: &TableWithJoins) -> Result<(ObjectName, Option<Ident>), SqlError> {
    match &t.relation {
        TableFactor::Table { name, alias, .. } if t.joins.is_empty() => {
            if alias.as_ref().is_some_and(|a| !a.columns.is_empty()) {
                return Err(SqlError::Unsupported(
                    "column aliases on the target table".to_owned(),
                ));
            }
            Ok((name.clone(), alias.as_ref().map(|a| a.name.clone())))
        }
        other => Err(SqlError::Unsupported(format!(
            "changing `{other}`; name one table, and join the others in FROM / USING"
        ))),
    }
}

/// `UPDATE` with `FROM` or `RETURNING` (others: `None`, DataFusion's).
pub fn parse_update(u: &Update) -> Result<Option<Parsed>, SqlError> {
    let others = match &u.from {
        Some(UpdateTableFromKind::AfterSet(t) | UpdateTableFromKind::BeforeSet(t)) => t.clone(),
        None => Vec::new(),
    };
    if others.is_empty() && u.returning.is_none() {
        return Ok(None);
    }
    if u.or.is_some() || u.limit.is_some() || !u.order_by.is_empty() || u.output.is_some() {
        return Err(SqlError::Unsupported(
            "UPDATE OR / ORDER BY / LIMIT / OUTPUT; use a WHERE that picks the rows".to_owned(),
        ));
    }
    let (table, alias) = target(&u.table)?;
    let mut sets = Vec::with_capacity(u.assignments.len());
    for a in &u.assignments {
        let name = match &a.target {
            AssignmentTarget::ColumnName(n) => last_part(n)?,
            AssignmentTarget::Tuple(_) => {
                return Err(SqlError::Unsupported(format!(
                    "assigning a tuple `{}`; assign each column",
                    a.target
                )));
            }
        };
        sets.push((name, a.value.clone()));
    }
    Ok(Some(Parsed::Dml(Box::new(DmlStmt {
        table,
        alias,
        op: Op::Update(sets),
        others,
        selection: u.selection.clone(),
        returning: u.returning.clone(),
    }))))
}

/// `DELETE` with `USING` or `RETURNING` (others: `None`, DataFusion's).
pub fn parse_delete(d: &Delete) -> Result<Option<Parsed>, SqlError> {
    let others = d.using.clone().unwrap_or_default();
    if others.is_empty() && d.returning.is_none() {
        return Ok(None);
    }
    if !d.tables.is_empty() || d.limit.is_some() || !d.order_by.is_empty() || d.output.is_some() {
        return Err(SqlError::Unsupported(
            "multi-table DELETE / ORDER BY / LIMIT / OUTPUT; DELETE FROM one table USING the others"
                .to_owned(),
        ));
    }
    let from = match &d.from {
        FromTable::WithFromKeyword(f) | FromTable::WithoutKeyword(f) => f,
    };
    let [t] = from.as_slice() else {
        return Err(SqlError::Unsupported(
            "DELETE FROM more than one table; DELETE FROM one table USING the others".to_owned(),
        ));
    };
    let (table, alias) = target(t)?;
    Ok(Some(Parsed::Dml(Box::new(DmlStmt {
        table,
        alias,
        op: Op::Delete,
        others,
        selection: d.selection.clone(),
        returning: d.returning.clone(),
    }))))
}

fn quoted(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

impl DmlStmt {
    /// The name the statement's expressions call the target by.
    pub(crate) fn qualifier(&self, table: &Table) -> String {
        self.alias
            .as_ref()
            .map(ddl::ident)
            .unwrap_or_else(|| table.name.clone())
    }

    /// The query that finds the rows: for `UPDATE` the key columns then
    /// the new values; for `DELETE` every column of the target.
    fn query(&self, table: &Table) -> Result<String, SqlError> {
        let q = quoted(&self.qualifier(table));
        let mut items: Vec<String> = Vec::new();
        match &self.op {
            Op::Update(sets) => {
                let def = table.ds.def();
                let always = crate::identity::always(&def);
                if let Some((c, _)) = sets.iter().find(|(c, _)| always.contains(&c.as_str())) {
                    return Err(SqlError::GeneratedAlways {
                        column: c.clone(),
                        update: true,
                    });
                }
                for &k in &table.pk {
                    items.push(format!("{q}.{}", quoted(&table.cols[k].name)));
                }
                for (i, (c, e)) in sets.iter().enumerate() {
                    let j = table.col_index(c).ok_or_else(|| table.no_column(c))?;
                    if table.pk.contains(&j) {
                        return Err(SqlError::Unsupported(format!(
                            "UPDATE of the primary-key column `{c}`; DELETE the row and INSERT it with the new key"
                        )));
                    }
                    if sets[..i].iter().any(|(o, _)| o == c) {
                        return Err(SqlError::Invalid(format!("column `{c}` is assigned twice")));
                    }
                    items.push(format!("({e}) AS \"__silt_set_{i}\""));
                }
            }
            Op::Delete => {
                for c in &table.cols {
                    items.push(format!("{q}.{}", quoted(&c.name)));
                }
            }
        }
        let mut from = self.table.to_string();
        if let Some(a) = &self.alias {
            from.push_str(&format!(" AS {a}"));
        }
        for o in &self.others {
            from.push_str(&format!(", {o}"));
        }
        let mut sql = format!("SELECT {} FROM {from}", items.join(", "));
        if let Some(w) = &self.selection {
            sql.push_str(&format!(" WHERE {w}"));
        }
        Ok(sql)
    }
}

/// Run `stmt` on `ds`; the changed row count, or the `RETURNING` rows.
pub async fn run(
    ctx: &SessionContext,
    ds: Arc<Dataset>,
    stmt: DmlStmt,
    txn: Option<Arc<TxnSlot>>,
    check: &(dyn Fn(&LogicalPlan) -> Result<(), SqlError> + Send + Sync),
) -> Result<Vec<RecordBatch>, SqlError> {
    let mut state = ctx.state();
    if let Some(slot) = &txn {
        state.config_mut().set_extension(slot.clone());
    }
    let table = Table::new(ds.clone());
    let returning = match &stmt.returning {
        Some(items) => Some(Returning::new(
            &Compiler::new(ctx, state.config_options().clone()),
            Table::new(ds.clone()),
            &stmt.qualifier(&table),
            items,
        )?),
        None => None,
    };
    let sql = stmt.query(&table)?;
    let segs = ddl::split(&sql)?;
    let [seg] = segs.as_slice() else {
        return Err(SqlError::Invalid(format!("bad statement: {sql}")));
    };
    let Parsed::DataFusion(query) = ddl::parse(seg)? else {
        return Err(SqlError::Invalid(format!("bad statement: {sql}")));
    };
    let plan = state.statement_to_plan(*query).await?;
    check(&plan)?;
    let frame = match &txn {
        Some(_) => DataFrame::new(state.clone(), plan),
        None => ctx.execute_logical_plan(plan).await?,
    };
    let mut stream = frame.execute_stream().await?;
    let sets: Vec<ColumnInfo> = match &stmt.op {
        Op::Update(sets) => table
            .pk
            .iter()
            .map(|&k| table.cols[k].clone())
            .chain(
                sets.iter()
                    .filter_map(|(c, _)| table.col_index(c).map(|j| table.cols[j].clone())),
            )
            .collect(),
        Op::Delete => Vec::new(),
    };
    let changer = Arc::new(Changer {
        target: Target {
            ds,
            def: table.def.clone(),
            txn,
        },
        table,
        seen: parking_lot::Mutex::new(HashSet::new()),
        keep: returning.is_some(),
    });
    let mut count = 0u64;
    let mut returned = Vec::new();
    while let Some(batch) = stream.next().await {
        let batch = batch?;
        let c = changer.clone();
        let (n, rows) = match &stmt.op {
            Op::Update(_) => {
                let changes = update_rows(&batch, &sets, c.table.pk.len())?;
                ddl::blocking(move || c.update(changes)).await?
            }
            Op::Delete => {
                let records = crate::convert::batch_to_records(&batch, &c.table.cols)?;
                ddl::blocking(move || c.delete(records)).await?
            }
        };
        count += n;
        if let Some(r) = &returning
            && !rows.is_empty()
        {
            returned.push(r.project(&rows)?);
        }
    }
    match returning {
        Some(r) if returned.is_empty() => Ok(vec![RecordBatch::new_empty(r.schema())]),
        Some(_) => Ok(returned),
        None => count_batch(count),
    }
}

/// Changes the rows the query found, each once.
struct Changer {
    target: Target,
    table: Table,
    /// Encoded keys changed so far.
    seen: parking_lot::Mutex<HashSet<Vec<u8>>>,
    /// Keep the rows changed (for `RETURNING`).
    keep: bool,
}

impl Changer {
    fn first_time(&self, key: &[Value]) -> Result<bool, SqlError> {
        let k = self.table.ds.encode_pk(key)?;
        Ok(self.seen.lock().insert(k))
    }

    fn update(&self, changes: Changes) -> Result<(u64, Vec<Value>), SqlError> {
        let mut n = 0;
        let mut kept = Vec::new();
        for (pk, set) in changes {
            if !self.first_time(&pk)? {
                continue;
            }
            let Some(rec) = self.target.get(&pk)? else {
                continue;
            };
            if let Some((name, _)) = set
                .iter()
                .find(|(name, v)| *v == Value::Null && self.table.ds.def().not_null.contains(name))
            {
                return Err(SqlError::NotNull {
                    table: self.table.name.clone(),
                    column: name.clone(),
                });
            }
            let new = assign(rec, set);
            let w = self
                .target
                .write_rows(vec![(WriteMode::Upsert, new.clone())])?;
            if let Some((_, e)) = w.failed {
                return Err(self.table.row_error(&pk, e));
            }
            n += 1;
            if self.keep {
                kept.push(new);
            }
        }
        Ok((n, kept))
    }

    fn delete(&self, records: Vec<Value>) -> Result<(u64, Vec<Value>), SqlError> {
        let mut n = 0;
        let mut kept = Vec::new();
        for r in records {
            let pk = self.table.key_of(&r);
            if !self.first_time(&pk)? {
                continue;
            }
            if self.target.delete(&pk)? {
                n += 1;
                if self.keep {
                    kept.push(r);
                }
            }
        }
        Ok((n, kept))
    }
}
