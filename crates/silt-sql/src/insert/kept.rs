//! Kept inserts: a one-row `INSERT ... VALUES` run from its template,
//! without parsing.
//!
//! Writers send the same insert again and again with other values. Parsed
//! each time, a single-row insert spends as much time above the storage
//! engine as in it: parsing the text, compiling each value (`ST_Point(x,
//! y)` becomes a physical expression), resolving the table and its
//! columns. A session keeps what does not change between such statements,
//! by *template* (the text with its literals taken out, see
//! [`crate::template`]):
//!
//! - **Learning.** On first sight of a template the session parses its
//!   *probe* (every literal replaced by a distinct sentinel) and reads
//!   where each literal went: a value that is one literal takes it as the
//!   planner types it; a value that is an expression of literals (function
//!   calls, casts, arithmetic) is compiled once over *parameter columns*,
//!   one per literal; `DEFAULT`, `NULL` and booleans are fixed. Only
//!   immutable functions are kept (`now()`, `random()` or `nextval` are
//!   evaluated anew by the ordinary path), and every literal must land in
//!   exactly one value. The template is kept only if it gives the very
//!   values the ordinary path gives for the text it was learned from.
//! - **Use.** A later text with the same template has its literals typed
//!   and, for expressions, put in a one-row batch of the parameter
//!   columns; the row is then assigned, checked and written by the same
//!   code as any `INSERT` ([`super::drive`]), in the session's
//!   transaction block if it has one.
//! - **Validity.** A kept insert holds the table's columns as they were: it
//!   is used only while the catalog's schema version and the plan cache's
//!   epoch are those it was learned under, and the session's options the
//!   same `Arc` (a `SET` makes new ones). A literal the planner would type
//!   otherwise (an integer past `i64`), or an expression that fails, sends
//!   the statement down the ordinary path, which gives its error.
//!
//! Forms kept: one row, `INSERT`, `UPSERT`/`INSERT OR REPLACE`, `ON
//! CONFLICT DO NOTHING`, `OVERRIDING`; not `RETURNING` or `DO UPDATE`.

use std::collections::HashMap;
use std::sync::Arc;

use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::common::tree_node::TreeNode;
use datafusion::common::{DFSchema, ScalarValue};
use datafusion::config::ConfigOptions;
use datafusion::execution::context::SessionContext;
use datafusion::logical_expr::{ColumnarValue, Expr, Volatility};
use datafusion::physical_expr::PhysicalExpr;
use datafusion::sql::sqlparser::ast::{
    BinaryOperator, Expr as SqlExpr, FunctionArg, FunctionArgExpr, FunctionArguments, Ident,
    UnaryOperator, Value as SqlValue,
};
use parking_lot::Mutex;
use silt::{Dataset, WriteMode};

use super::{
    InsertStmt, Mode, OnConflict, Rows, Writer, check_target, drive, eval, identity_targets,
    is_default_keyword, is_short_values, literal, values_list,
};
use crate::compile::Compiler;
use crate::ddl::{self, Parsed};
use crate::error::SqlError;
use crate::sequences::SessionSequences;
use crate::session::{SqlSession, TxnStatus};
use crate::target::{Table, Target};
use crate::template::{self, Kind, Lexed};
use crate::{SqlEngine, access};

/// The most templates a session keeps (past it, it starts again).
const CAPACITY: usize = 64;

/// A session's kept inserts, by template text.
#[derive(Default)]
pub(crate) struct KeptInserts {
    known: HashMap<String, Known>,
}

/// What a session learned of one template, under the catalog `versions`:
/// its kept insert, or that it cannot be kept.
struct Known {
    versions: (u64, u64),
    kept: Option<Arc<KeptInsert>>,
}

impl KeptInserts {
    /// `None`: not learned under `versions`; `Some(None)`: cannot be kept.
    fn get(&self, template: &str, versions: (u64, u64)) -> Option<Option<Arc<KeptInsert>>> {
        self.known
            .get(template)
            .filter(|k| k.versions == versions)
            .map(|k| k.kept.clone())
    }

    fn put(&mut self, template: String, versions: (u64, u64), kept: Option<Arc<KeptInsert>>) {
        if self.known.len() >= CAPACITY && !self.known.contains_key(&template) {
            self.known.clear();
        }
        self.known.insert(template, Known { versions, kept });
    }
}

/// Where one value of the row comes from.
enum Source {
    /// Literal `i` of the text, as the planner types it.
    Literal(usize),
    /// A value fixed by the template (`NULL`, `TRUE`).
    Fixed(ScalarValue),
    /// The keyword `DEFAULT`: the column's default.
    Default,
    /// An expression of the literals, over the parameter columns.
    Expr(Arc<dyn PhysicalExpr>),
}

/// A one-row `INSERT ... VALUES` learned from its template (see the
/// module doc).
pub(crate) struct KeptInsert {
    /// The options it was compiled under.
    options: Arc<ConfigOptions>,
    table: Arc<Table>,
    /// The table column each value goes to, and the values not taken.
    targets: Vec<usize>,
    ignored: Vec<bool>,
    mode: WriteMode,
    compiler: Arc<Compiler>,
    /// Per literal of the text, its kind.
    kinds: Vec<Kind>,
    /// Per value of the row.
    sources: Vec<Source>,
    /// The parameter columns, one per literal (`None`: no expression reads
    /// them).
    params: Option<SchemaRef>,
}

/// The name of the parameter column of literal `i`.
fn param_name(i: usize) -> String {
    format!("silt-kept-param-{i}")
}

impl KeptInsert {
    /// The row's values for a text of this template, `DEFAULT`s taken
    /// from `sequences`; `None` when the ordinary path must run it.
    fn values(
        &self,
        lexed: &Lexed<'_>,
        sequences: Option<&SessionSequences>,
    ) -> Option<Result<Vec<ScalarValue>, SqlError>> {
        self.values_with(lexed, Some(sequences))
    }

    /// [`KeptInsert::values`]; without `defaults` (`None`), a `DEFAULT` is
    /// left null (nothing is taken from a sequence).
    fn values_with(
        &self,
        lexed: &Lexed<'_>,
        defaults: Option<Option<&SessionSequences>>,
    ) -> Option<Result<Vec<ScalarValue>, SqlError>> {
        if lexed.literals.len() != self.kinds.len() {
            return None;
        }
        let mut literals = Vec::with_capacity(self.kinds.len());
        for (l, k) in lexed.literals.iter().zip(&self.kinds) {
            if l.kind != *k {
                return None;
            }
            literals.push(template::typed(l)?);
        }
        let batch = match &self.params {
            Some(schema) => {
                let columns = literals
                    .iter()
                    .map(ScalarValue::to_array)
                    .collect::<Result<Vec<_>, _>>()
                    .ok()?;
                Some(RecordBatch::try_new(schema.clone(), columns).ok()?)
            }
            None => None,
        };
        let mut out = Vec::with_capacity(self.sources.len());
        for (source, &ignored) in self.sources.iter().zip(&self.ignored) {
            out.push(match source {
                _ if ignored => ScalarValue::Null,
                Source::Literal(i) => literals.get(*i)?.clone(),
                Source::Fixed(v) => v.clone(),
                Source::Default => ScalarValue::Null,
                Source::Expr(e) => match e.evaluate(batch.as_ref()?).ok()? {
                    ColumnarValue::Scalar(s) => s,
                    ColumnarValue::Array(a) => ScalarValue::try_from_array(&a, 0).ok()?,
                },
            });
        }
        // The defaults last (a sequence's `nextval` is spent only on a row
        // that gets this far), in column order.
        let Some(sequences) = defaults else {
            return Some(Ok(out));
        };
        for (s, source) in self.sources.iter().enumerate() {
            if matches!(source, Source::Default) && !self.ignored[s] {
                let v = self
                    .table
                    .default_column(self.targets[s], 1, sequences)
                    .and_then(|a| Ok(ScalarValue::try_from_array(&a, 0)?));
                match v {
                    Ok(v) => out[s] = v,
                    Err(e) => return Some(Err(e)),
                }
            }
        }
        Some(Ok(out))
    }

    /// A writer of one statement of this template.
    fn writer(
        &self,
        txn: Option<Arc<crate::session::TxnSlot>>,
        sequences: Arc<SessionSequences>,
    ) -> Writer {
        Writer {
            target: Target {
                ds: self.table.ds.clone(),
                def: self.table.def.clone(),
                txn,
            },
            table: self.table.clone(),
            targets: self.targets.clone(),
            ignored: self.ignored.clone(),
            sequences: Some(sequences),
            mode: Mode::Write(self.mode),
            compiler: self.compiler.clone(),
            seen: Mutex::new(Default::default()),
            keep: false,
        }
    }
}

/// The sentinel literal `e` stands for, if it is one.
fn sentinel(e: &SqlExpr) -> Option<(usize, Kind)> {
    let SqlExpr::Value(v) = e else {
        return None;
    };
    match &v.value {
        SqlValue::Number(n, false) => template::number_sentinel(n),
        SqlValue::SingleQuotedString(s) => Some((template::string_sentinel(s)?, Kind::Str)),
        _ => None,
    }
}

/// Whether `e` has only the forms a kept expression may have (literals,
/// nesting, signs, arithmetic, casts, plain function calls), putting the
/// parameter column of each sentinel in its place and counting it in
/// `seen`.
fn parameterize(e: &mut SqlExpr, seen: &mut [usize], kinds: &[Kind]) -> bool {
    if let Some((i, kind)) = sentinel(e) {
        let Some(n) = seen.get_mut(i) else {
            return false;
        };
        *n += 1;
        *e = SqlExpr::Identifier(Ident::with_quote('"', param_name(i)));
        return kinds.get(i) == Some(&kind);
    }
    match e {
        SqlExpr::Value(v) => matches!(v.value, SqlValue::Null | SqlValue::Boolean(_)),
        SqlExpr::Nested(inner) => parameterize(inner, seen, kinds),
        SqlExpr::UnaryOp { op, expr } => {
            matches!(op, UnaryOperator::Minus | UnaryOperator::Plus)
                && parameterize(expr, seen, kinds)
        }
        SqlExpr::BinaryOp { left, op, right } => {
            matches!(
                op,
                BinaryOperator::Plus
                    | BinaryOperator::Minus
                    | BinaryOperator::Multiply
                    | BinaryOperator::Divide
                    | BinaryOperator::Modulo
                    | BinaryOperator::StringConcat
            ) && parameterize(left, seen, kinds)
                && parameterize(right, seen, kinds)
        }
        SqlExpr::Cast {
            expr,
            format: None,
            array: false,
            ..
        } => parameterize(expr, seen, kinds),
        SqlExpr::Function(f) => {
            let plain = !f.uses_odbc_syntax
                && matches!(f.parameters, FunctionArguments::None)
                && f.filter.is_none()
                && f.null_treatment.is_none()
                && f.over.is_none()
                && f.within_group.is_empty();
            let FunctionArguments::List(list) = &mut f.args else {
                return false;
            };
            plain
                && list.duplicate_treatment.is_none()
                && list.clauses.is_empty()
                && list.args.iter_mut().all(|a| match a {
                    FunctionArg::Unnamed(FunctionArgExpr::Expr(e)) => parameterize(e, seen, kinds),
                    _ => false,
                })
        }
        _ => false,
    }
}

/// Whether a compiled value's logical form is one a kept insert may
/// evaluate again and again: columns, literals, casts, arithmetic and
/// immutable functions.
fn repeatable(e: &Expr) -> bool {
    !e.exists(|e| {
        Ok(!match e {
            Expr::Column(_)
            | Expr::Literal(..)
            | Expr::Cast(_)
            | Expr::TryCast(_)
            | Expr::Negative(_)
            | Expr::BinaryExpr(_)
            | Expr::Alias(_) => true,
            Expr::ScalarFunction(f) => f.func.signature().volatility == Volatility::Immutable,
            _ => false,
        })
    })
    .unwrap_or(false)
}

/// Learn the kept insert of a text lexed as `lexed` (see the module doc):
/// `probe` and `stmt` are the parsed probe and text, `ds` the table.
fn learn(
    ctx: &SessionContext,
    options: Arc<ConfigOptions>,
    ds: Arc<Dataset>,
    lexed: &Lexed<'_>,
    probe: InsertStmt,
    stmt: InsertStmt,
) -> Option<KeptInsert> {
    if probe.returning.is_some() || options.sql_parser.parse_float_as_decimal {
        return None;
    }
    let table = Table::new(ds);
    let mode = match &probe.on_conflict {
        OnConflict::Fail => WriteMode::Insert,
        OnConflict::Replace => WriteMode::Upsert,
        OnConflict::Nothing { target } => {
            check_target(&table, target.as_ref()).ok()?;
            WriteMode::InsertIgnore
        }
        OnConflict::Update { .. } => return None,
    };
    let list = values_list(&probe.source)?;
    let [row] = list.as_slice() else {
        return None;
    };
    let targets = table.target_columns(&probe.columns).ok()?;
    if row.len() != targets.len() {
        return None;
    }
    let ignored = identity_targets(&table, &targets, probe.overriding, Some(&list)).ok()?;
    let kinds: Vec<Kind> = lexed.literals.iter().map(|l| l.kind).collect();
    let fields: Vec<Field> = kinds
        .iter()
        .enumerate()
        .map(|(i, k)| {
            let t = match k {
                Kind::Int => DataType::Int64,
                Kind::Float | Kind::Exp => DataType::Float64,
                Kind::Str => DataType::Utf8,
            };
            Field::new(param_name(i), t, false)
        })
        .collect();
    let schema = Arc::new(Schema::new(fields));
    let df_schema = DFSchema::try_from(schema.as_ref().clone()).ok()?;
    let compiler = Compiler::new(ctx, options.clone());
    let mut seen = vec![0usize; kinds.len()];
    let mut sources = Vec::with_capacity(row.len());
    let mut exprs = false;
    for e in row {
        let source = if is_default_keyword(e) {
            Source::Default
        } else if let Some((i, kind)) = sentinel(e) {
            *seen.get_mut(i)? += 1;
            if kinds.get(i) != Some(&kind) {
                return None;
            }
            Source::Literal(i)
        } else if let SqlExpr::Value(v) = e
            && matches!(v.value, SqlValue::Null | SqlValue::Boolean(_))
        {
            Source::Fixed(literal(e, false)?)
        } else {
            let mut e = e.clone();
            if !parameterize(&mut e, &mut seen, &kinds) {
                return None;
            }
            let logical = compiler.logical(e, &df_schema).ok()?;
            if !repeatable(&logical) {
                return None;
            }
            exprs = true;
            Source::Expr(compiler.physical(logical, &df_schema).ok()?)
        };
        sources.push(source);
    }
    if seen.iter().any(|&n| n != 1) {
        return None;
    }
    let kept = KeptInsert {
        options,
        table: Arc::new(table),
        targets,
        ignored,
        mode,
        compiler: Arc::new(compiler),
        kinds,
        sources,
        params: exprs.then_some(schema),
    };
    // It must give the ordinary path's values for the text it came from.
    let ours = kept.values_with(lexed, None)?.ok()?;
    let theirs = values_list(&stmt.source)?;
    let [row] = theirs.as_slice() else {
        return None;
    };
    for ((e, v), s) in row.iter().zip(&ours).zip(&kept.sources) {
        if matches!(s, Source::Default) {
            continue;
        }
        if eval(&kept.compiler, e.clone()).ok()? != *v {
            return None;
        }
    }
    Some(kept)
}

impl SqlEngine {
    /// Run `sql` as a kept insert of `session` (see the module doc);
    /// `None` when it is none (then the caller runs it the ordinary way).
    /// On first sight of a template it is learned, and the ordinary path
    /// runs the text.
    pub(crate) async fn kept_insert(
        &self,
        session: &SqlSession,
        sql: &str,
    ) -> Option<Result<Vec<RecordBatch>, SqlError>> {
        let first = sql.trim_start().get(..6)?;
        if !(first.eq_ignore_ascii_case("insert") || first.eq_ignore_ascii_case("upsert"))
            || !is_short_values(sql)
            || session.status() == TxnStatus::Failed
        {
            return None;
        }
        let lexed = template::lex(sql)?;
        let versions = (self.db.schema_version(), self.plans.epoch());
        let options = session.statement_options(self.ctx.state_ref().read().config());
        let known = session.inserts.lock().get(&lexed.template, versions);
        let kept = match known {
            Some(Some(k)) if Arc::ptr_eq(&k.options, &options) => k,
            Some(None) => return None,
            _ => {
                let k = self.learn_insert(&lexed, sql, options).map(Arc::new);
                session
                    .inserts
                    .lock()
                    .put(lexed.template.clone(), versions, k);
                return None;
            }
        };
        let run = async {
            if let Some(who) = access::principal(&self.db, session.user().as_deref())? {
                access::check_write(&who, &kept.table.name)?;
            }
            let Some(values) = kept.values(&lexed, Some(&session.sequences)) else {
                return Ok(None);
            };
            let values = values?;
            self.plans.count_kept_insert();
            let writer = kept.writer(session.slot(), session.sequences.clone());
            let in_block = writer.target.txn.is_some();
            match drive(Arc::new(writer), Rows::Row(Some(values)), None).await {
                Err(SqlError::PartialWrite { source, .. }) if in_block => Err(*source),
                r => r.map(Some),
            }
        };
        run.await.transpose()
    }

    /// Learn the kept insert of `sql` (lexed as `lexed`): `None` if it
    /// cannot be kept.
    fn learn_insert(
        &self,
        lexed: &Lexed<'_>,
        sql: &str,
        options: Arc<ConfigOptions>,
    ) -> Option<KeptInsert> {
        let Parsed::Insert(probe) = ddl::parse_one(&template::probe(lexed))? else {
            return None;
        };
        let Parsed::Insert(stmt) = ddl::parse_one(sql)? else {
            return None;
        };
        let ds = self.silt_dataset(&stmt.table).ok()??;
        learn(&self.ctx, options, ds, lexed, *probe, *stmt)
    }
}
