//! The plan cache: plan a query once, run it many times.
//!
//! Planning a small query (DataFusion's logical planner, analyzer and
//! optimizer) costs several times what Silt's index takes to answer it.
//! So queries are planned once per *shape* and their plans kept:
//!
//! - **Shape.** A `SELECT` from one table has the literals of its filters
//!   turned into typed parameters ([`normalize`]): the number or string
//!   operands of comparisons, `BETWEEN` and `IN` lists, the arguments
//!   of the spatial and text functions (in the select list too, where
//!   the output column's alias keeps its name), and the operands of
//!   arithmetic in any of those. `WHERE id = 5` and `WHERE id = 7`
//!   are one shape, `WHERE id = $1` with `$1 = 5` or `7`. Literals
//!   anywhere else (the rest of the select list, `LIMIT`, `GROUP BY`, joins and
//!   subqueries) stay in the shape, whose key is the statement's text with
//!   its parameters as `$n`.
//! - **Plan.** The shape is planned as `PREPARE` with the literals' types,
//!   and optimized with its parameters in place: Silt's filter pushdown
//!   decides by the shape of a filter, not its value (see [`crate::table`]),
//!   and the kNN rule keeps the query point as an expression until it is
//!   bound ([`crate::rules`]).
//! - **Run.** Each execution binds the literals into the optimized plan
//!   ([`bind`]) and plans only the physical operators.
//! - **Not cached.** Statements longer than [`MAX_KEY`], with functions
//!   whose value depends on the moment (`now()`, `random()`), with
//!   parameters of their own, or whose
//!   shape cannot be planned (the cache remembers that, and the statement
//!   is planned afresh each time, as without the cache).
//! - **Invalidation.** An entry holds the versions it was planned under:
//!   the database's [`silt::Database::schema_version`] (datasets and
//!   indexes created or dropped) and the engine's own epoch (views,
//!   external tables, `SET`, limits). A lookup under other versions
//!   plans again.
//!
//! The cache is shared by every session of an engine (a plan does not
//! depend on the session: privileges are checked on every execution, and
//! the session's transaction joins at physical planning). It holds at most
//! [`CAPACITY`] shapes.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use datafusion::arrow::array::{RecordBatch, RecordBatchOptions};
use datafusion::arrow::datatypes::Schema;
use datafusion::common::tree_node::{Transformed, TreeNode, TreeNodeRecursion};
use datafusion::common::{DFSchema, ParamValues, ScalarValue};
use datafusion::execution::context::ExecutionProps;
use datafusion::logical_expr::physical_planning_context::PhysicalPlanningContext;
use datafusion::logical_expr::{ColumnarValue, Expr, LogicalPlan, TableScan, Volatility};
use datafusion::physical_expr::create_physical_expr;
use datafusion::physical_plan::ExecutionPlan;
use datafusion::sql::parser::Statement as DFStatement;
use datafusion::sql::sqlparser::ast::{
    self as sql, BinaryOperator, DataType as SqlType, ExactNumberInfo, FunctionArg,
    FunctionArgExpr, FunctionArguments, Ident, OrderByKind, SelectItem, SetExpr, Statement,
    TableFactor, UnaryOperator, Value, Visit, Visitor,
};
use datafusion::sql::sqlparser::tokenizer::Span;

use crate::rules::{as_silt, silt_table};
use crate::template::Template;
use crate::udf::Func;

/// The most shapes kept.
pub const CAPACITY: usize = 512;

/// The longest shape text kept (a longer statement is planned afresh each
/// time): 512 shapes of this size stay a few MiB, whatever clients send.
pub const MAX_KEY: usize = 16 * 1024;

/// The most templates kept for one template text (its statements differ
/// in literals that are not parameters: the select list, `LIMIT`).
pub const TEMPLATE_VARIANTS: usize = 8;

/// Functions whose literal arguments become parameters (lower case).
const PARAM_FUNCTIONS: &[&str] = &[
    "st_point",
    "st_makepoint",
    "st_makeenvelope",
    "st_geomfromtext",
    "st_intersects",
    "st_contains",
    "st_within",
    "st_dwithin",
    "st_distance",
    "ft_contains",
];

/// A statement reduced to its shape.
#[derive(Debug)]
pub struct Normalized {
    /// The cache key: the shape's text.
    pub key: String,
    /// The shape: the statement with `$1..$n` for its literals.
    shape: Statement,
    /// The literals, in parameter order.
    pub values: Vec<ScalarValue>,
}

impl Normalized {
    /// The shape as `PREPARE`, with each parameter's type.
    pub(crate) fn prepare(&self) -> DFStatement {
        let data_types = self
            .values
            .iter()
            .map(|v| match v {
                ScalarValue::Int64(_) => SqlType::BigInt(None),
                ScalarValue::UInt64(_) => SqlType::BigIntUnsigned(None),
                ScalarValue::Float64(_) => SqlType::Double(ExactNumberInfo::None),
                _ => SqlType::Text,
            })
            .collect();
        DFStatement::Statement(Box::new(Statement::Prepare {
            name: Ident::new("silt_plan_cache"),
            data_types,
            statement: Box::new(self.shape.clone()),
        }))
    }
}

/// The shape of a statement, or `None` for a statement that is not
/// cached (not a query, or one with parameters of its own).
pub fn normalize(stmt: &DFStatement) -> Option<Normalized> {
    let DFStatement::Statement(s) = stmt else {
        return None;
    };
    let Statement::Query(q) = s.as_ref() else {
        return None;
    };
    if has_placeholder(q) {
        return None;
    }
    let mut q = q.clone();
    let mut values = Vec::new();
    if q.with.is_none()
        && let SetExpr::Select(sel) = q.body.as_mut()
        && sel.from.len() == 1
        && sel.from.iter().all(|t| {
            t.joins.is_empty() && matches!(t.relation, TableFactor::Table { args: None, .. })
        })
    {
        // The select list's spatial and text calls (`ST_Distance(loc,
        // ST_Point(..)) AS d` beside the same ORDER BY): named by their
        // alias, which `crate::colnames` gave every computed column, so
        // a parameter does not change the output's name.
        for item in &mut sel.projection {
            if let SelectItem::ExprWithAlias { expr, .. } = item
                && matches!(expr, sql::Expr::Function(_))
            {
                param_expr(expr, &mut values);
            }
        }
        if let Some(w) = sel.selection.as_mut() {
            param_expr(w, &mut values);
        }
        if let Some(ob) = q.order_by.as_mut()
            && let OrderByKind::Expressions(exprs) = &mut ob.kind
        {
            for o in exprs {
                // A literal ORDER BY item is a column position: kept.
                if !matches!(o.expr, sql::Expr::Value(_)) {
                    param_expr(&mut o.expr, &mut values);
                }
            }
        }
    }
    let shape = Statement::Query(q);
    // The parameters' types are the shape's too: `id > 5` and `id >
    // 18446744073709551615` (UInt64) are planned apart.
    let mut key = shape.to_string();
    if !values.is_empty() {
        key.push('\u{0}');
        key.extend(values.iter().map(|v| match v {
            ScalarValue::Int64(_) => 'i',
            ScalarValue::UInt64(_) => 'u',
            ScalarValue::Float64(_) => 'f',
            _ => 's',
        }));
    }
    if key.len() > MAX_KEY {
        return None;
    }
    Some(Normalized { key, shape, values })
}

fn has_placeholder(q: &sql::Query) -> bool {
    struct Finder;
    impl Visitor for Finder {
        type Break = ();
        fn pre_visit_expr(&mut self, e: &sql::Expr) -> std::ops::ControlFlow<()> {
            match e {
                sql::Expr::Value(v) if matches!(v.value, Value::Placeholder(_)) => {
                    std::ops::ControlFlow::Break(())
                }
                _ => std::ops::ControlFlow::Continue(()),
            }
        }
    }
    q.visit(&mut Finder).is_break()
}

/// The value of a number or string literal, as DataFusion's planner
/// types it (integers as `Int64`, else `UInt64`, else `Float64`).
fn literal_value(e: &sql::Expr) -> Option<ScalarValue> {
    let (text, negative) = match e {
        sql::Expr::Nested(inner) => return literal_value(inner),
        sql::Expr::Value(v) => match &v.value {
            Value::Number(n, false) => (n.as_str(), false),
            Value::SingleQuotedString(s) => return Some(ScalarValue::Utf8(Some(s.clone()))),
            _ => return None,
        },
        sql::Expr::UnaryOp {
            op: UnaryOperator::Minus,
            expr,
        } => match expr.as_ref() {
            sql::Expr::Value(v) => match &v.value {
                Value::Number(n, false) => (n.as_str(), true),
                _ => return None,
            },
            _ => return None,
        },
        _ => return None,
    };
    if text.contains('_') {
        return None;
    }
    let signed = if negative {
        format!("-{text}")
    } else {
        text.to_owned()
    };
    if let Ok(n) = signed.parse::<i64>() {
        return Some(ScalarValue::Int64(Some(n)));
    }
    if !negative && let Ok(n) = text.parse::<u64>() {
        return Some(ScalarValue::UInt64(Some(n)));
    }
    // Only what DataFusion reads as a float (not a decimal).
    if text.contains(['.', 'e', 'E']) {
        return signed
            .parse::<f64>()
            .ok()
            .map(|f| ScalarValue::Float64(Some(f)));
    }
    None
}

/// Replace `e` by the next parameter if it is a literal.
fn take(e: &mut sql::Expr, values: &mut Vec<ScalarValue>) -> bool {
    let Some(v) = literal_value(e) else {
        return false;
    };
    values.push(v);
    *e =
        sql::Expr::Value(Value::Placeholder(format!("${}", values.len())).with_span(Span::empty()));
    true
}

/// Turn the literals of `e` that are safe to bind later into parameters.
fn param_expr(e: &mut sql::Expr, values: &mut Vec<ScalarValue>) {
    match e {
        sql::Expr::BinaryOp { left, op, right } => match op {
            BinaryOperator::And | BinaryOperator::Or => {
                param_expr(left, values);
                param_expr(right, values);
            }
            BinaryOperator::Eq
            | BinaryOperator::NotEq
            | BinaryOperator::Lt
            | BinaryOperator::LtEq
            | BinaryOperator::Gt
            | BinaryOperator::GtEq => {
                let (l, r) = (
                    literal_value(left).is_some(),
                    literal_value(right).is_some(),
                );
                if l && !r {
                    take(left, values);
                    param_expr(right, values);
                } else if r && !l {
                    param_expr(left, values);
                    take(right, values);
                } else if !l && !r {
                    param_expr(left, values);
                    param_expr(right, values);
                }
            }
            // Arithmetic on a filter's values (`id = 5 + 1`, a box's
            // corner plus its size): its literals are values too, else
            // every value makes a shape of its own. The bound plan folds
            // them before choosing an access path (`crate::deferred`).
            BinaryOperator::Plus
            | BinaryOperator::Minus
            | BinaryOperator::Multiply
            | BinaryOperator::Divide
            | BinaryOperator::Modulo => {
                for side in [left, right] {
                    if !take(side, values) {
                        param_expr(side, values);
                    }
                }
            }
            _ => {}
        },
        sql::Expr::Nested(inner) => param_expr(inner, values),
        sql::Expr::UnaryOp {
            op: UnaryOperator::Not,
            expr,
        } => param_expr(expr, values),
        sql::Expr::Between {
            expr, low, high, ..
        } if literal_value(expr).is_none() => {
            param_expr(expr, values);
            if !take(low, values) {
                param_expr(low, values);
            }
            if !take(high, values) {
                param_expr(high, values);
            }
        }
        sql::Expr::InList { expr, list, .. } if literal_value(expr).is_none() => {
            param_expr(expr, values);
            for item in list {
                take(item, values);
            }
        }
        sql::Expr::Function(f)
            if f.name.0.len() == 1
                && f.filter.is_none()
                && f.over.is_none()
                && f.name
                    .0
                    .first()
                    .and_then(|p| p.as_ident())
                    .is_some_and(|i| {
                        PARAM_FUNCTIONS.contains(&i.value.to_ascii_lowercase().as_str())
                    }) =>
        {
            if let FunctionArguments::List(list) = &mut f.args
                && list.duplicate_treatment.is_none()
                && list.clauses.is_empty()
            {
                for a in &mut list.args {
                    if let FunctionArg::Unnamed(FunctionArgExpr::Expr(a)) = a
                        && !take(a, values)
                    {
                        param_expr(a, values);
                    }
                }
            }
        }
        _ => {}
    }
}

/// Whether a planned shape may be kept: no function of the moment.
pub fn cacheable(plan: &LogicalPlan) -> bool {
    let mut ok = true;
    let _ = plan.apply_with_subqueries(|p| {
        p.apply_expressions(|e| {
            e.apply(|x| {
                if let Expr::ScalarFunction(sf) = x
                    && sf.func.signature().volatility != Volatility::Immutable
                {
                    ok = false;
                    return Ok(TreeNodeRecursion::Stop);
                }
                Ok(TreeNodeRecursion::Continue)
            })
        })?;
        Ok(if ok {
            TreeNodeRecursion::Continue
        } else {
            TreeNodeRecursion::Stop
        })
    });
    ok
}

/// An optimized shape with its literals bound, ready for physical
/// planning; `None` when these values cannot use the shape's plan (a kNN
/// point that is not a valid point): plan the statement afresh.
pub fn bind(plan: &LogicalPlan, values: &[ScalarValue]) -> Option<LogicalPlan> {
    if values.is_empty() {
        return Some(plan.clone());
    }
    let params = ParamValues::List(values.iter().cloned().map(Into::into).collect());
    let plan = crate::view_rewrite::map_kept_joins(plan.clone(), &|j| bind(j, values))?;
    let bound = plan.replace_params_with_values(&params).ok()?;
    let mut ok = true;
    let bound = bound
        .transform_up(|p| {
            let LogicalPlan::TableScan(scan) = &p else {
                return Ok(Transformed::no(p));
            };
            let Some(provider) = silt_table(scan) else {
                return Ok(Transformed::no(p));
            };
            let Some(table) = as_silt(&provider) else {
                return Ok(Transformed::no(p));
            };
            let Some(knn) = table.knn() else {
                return Ok(Transformed::no(p));
            };
            if knn.point.is_none() {
                return Ok(Transformed::no(p));
            }
            match knn.bind(&params) {
                Some(spec) => Ok(Transformed::yes(LogicalPlan::TableScan(TableScan {
                    source: datafusion::datasource::provider_as_source(Arc::new(
                        table.with_knn(spec),
                    )),
                    ..scan.clone()
                }))),
                None => {
                    ok = false;
                    Ok(Transformed::no(p))
                }
            }
        })
        .ok()?
        .data;
    ok.then_some(bound)
}

/// Fold the parts of a bound expression without columns into literals,
/// as the planner folds a text's (`$1 + 2.0` bound to `10.5 + 2.0`
/// becomes `12.5`). A point's or envelope's arguments are folded, not the
/// geometry itself (the access path reads its numbers). The shape was
/// coerced when it was planned and holds only immutable functions
/// ([`cacheable`]), so each part is computed once, on one row.
pub fn fold_bound(e: Expr) -> datafusion::error::Result<Expr> {
    let props = ExecutionProps::new();
    let empty = DFSchema::empty();
    let one_row = RecordBatch::try_new_with_options(
        Arc::new(Schema::empty()),
        vec![],
        &RecordBatchOptions::new().with_row_count(Some(1)),
    )?;
    e.transform_down(|x| {
        if matches!(x, Expr::Literal(..)) {
            return Ok(Transformed::new(x, false, TreeNodeRecursion::Jump));
        }
        let constructor = matches!(&x, Expr::ScalarFunction(sf)
            if matches!(crate::udf::func_of(&sf.func), Some(Func::Point | Func::MakeEnvelope)));
        if constructor || x.any_column_refs() {
            return Ok(Transformed::no(x));
        }
        let value =
            match create_physical_expr(&x, &empty, &props, &PhysicalPlanningContext::default())?
                .evaluate(&one_row)?
            {
                ColumnarValue::Scalar(v) => v,
                ColumnarValue::Array(a) => ScalarValue::try_from_array(&a, 0)?,
            };
        Ok(Transformed::new(
            Expr::Literal(value, None),
            true,
            TreeNodeRecursion::Jump,
        ))
    })
    .map(|t| t.data)
}

/// Replace the parameters of an expression by their values.
pub fn bind_expr(e: &Expr, params: &ParamValues) -> Option<Expr> {
    e.clone()
        .transform(|x| match x {
            Expr::Placeholder(p) => {
                let (v, meta) = params.get_placeholders_with_values(&p.id)?.into_inner();
                Ok(Transformed::yes(Expr::Literal(v, meta)))
            }
            other => Ok(Transformed::no(other)),
        })
        .ok()
        .map(|t| t.data)
}

/// Whether an expression holds a parameter.
pub fn has_param(e: &Expr) -> bool {
    e.exists(|x| Ok(matches!(x, Expr::Placeholder(_))))
        .unwrap_or(false)
}

/// One cached shape.
#[derive(Debug)]
pub struct Entry {
    versions: (u64, u64),
    /// The optimized plan; `None` when the shape is planned afresh each
    /// time (it could not be planned with parameters, or is not
    /// cacheable).
    pub plan: Option<LogicalPlan>,
    /// The physical plan of a simple shape (see [`physical_shape`]), made
    /// on its first run; `None` inside when it has none.
    pub physical: std::sync::OnceLock<Option<Arc<dyn ExecutionPlan>>>,
}

/// Whether a shape's physical plan may be kept and run again: scans of
/// Silt tables under projections, filters and limits only (operators that
/// keep no state between runs; parameters only in the scans' filters and
/// kNN points, where [`crate::deferred::DeferredScanExec`] binds them).
pub fn physical_shape(plan: &LogicalPlan) -> bool {
    let mut ok = true;
    let _ = plan.apply(|p| {
        ok &= match p {
            LogicalPlan::Projection(_)
            | LogicalPlan::Filter(_)
            | LogicalPlan::Limit(_)
            | LogicalPlan::SubqueryAlias(_) => true,
            LogicalPlan::TableScan(scan) => silt_table(scan).is_some_and(|t| as_silt(&t).is_some()),
            _ => false,
        };
        Ok(if ok {
            TreeNodeRecursion::Continue
        } else {
            TreeNodeRecursion::Stop
        })
    });
    // Nor subqueries or volatile functions in their expressions.
    ok && !plan
        .exists(|p| {
            Ok(p.expressions().iter().any(|e| {
                e.is_volatile()
                    || e.exists(|x| {
                        Ok(matches!(
                            x,
                            Expr::ScalarSubquery(_) | Expr::Exists(_) | Expr::InSubquery(_)
                        ))
                    })
                    .unwrap_or(true)
            }))
        })
        .unwrap_or(true)
}

/// Whether these values may run a kept physical plan: the kNN points bind
/// (else the statement is planned afresh), and no value is big (a big
/// literal goes through the checks of [`crate::bounds`]).
pub fn physical_values(plan: &LogicalPlan, values: &[ScalarValue]) -> Option<ParamValues> {
    let small = values.iter().all(|v| match v {
        ScalarValue::Utf8(Some(s)) => s.len() <= 1024,
        _ => true,
    });
    if !small {
        return None;
    }
    let params = ParamValues::List(values.iter().cloned().map(Into::into).collect());
    let mut ok = true;
    let _ = plan.apply(|p| {
        if let LogicalPlan::TableScan(scan) = p
            && let Some(t) = silt_table(scan)
            && let Some(k) = as_silt(&t).and_then(|t| t.knn())
            && k.point.is_some()
            && k.bind(&params).is_none()
        {
            ok = false;
        }
        Ok(TreeNodeRecursion::Continue)
    });
    ok.then_some(params)
}

/// The engine's plan cache (see the module doc).
pub struct PlanCache {
    map: quick_cache::sync::Cache<String, Arc<Entry>>,
    /// Statement templates (see [`crate::template`]): the ones learned
    /// for a template text (one per set of fixed literals, at most
    /// [`TEMPLATE_VARIANTS`]), none when it could not be learned. They
    /// depend on the syntax alone, so no version or epoch invalidates
    /// them.
    templates: quick_cache::sync::Cache<String, Arc<Vec<Template>>>,
    template_hits: AtomicU64,
    epoch: AtomicU64,
    hits: AtomicU64,
    misses: AtomicU64,
    physical_runs: AtomicU64,
    point_reads: AtomicU64,
    kept_inserts: AtomicU64,
}

impl std::fmt::Debug for PlanCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PlanCache({} shapes)", self.map.len())
    }
}

/// How the cache has been used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CacheStats {
    pub shapes: usize,
    pub hits: u64,
    pub misses: u64,
    /// Statements run on a kept physical plan.
    pub physical_runs: u64,
    /// Statements whose shape was found by their template, unparsed.
    pub template_hits: u64,
    /// Of the physical runs, primary-key reads run without operators
    /// (see [`crate::point_get`]).
    pub point_reads: u64,
    /// One-row inserts run from a session's kept insert, unparsed (see
    /// `insert::kept`).
    pub kept_inserts: u64,
}

impl Default for PlanCache {
    fn default() -> Self {
        PlanCache {
            map: quick_cache::sync::Cache::new(CAPACITY),
            templates: quick_cache::sync::Cache::new(2 * CAPACITY),
            template_hits: AtomicU64::new(0),
            epoch: AtomicU64::new(0),
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
            physical_runs: AtomicU64::new(0),
            point_reads: AtomicU64::new(0),
            kept_inserts: AtomicU64::new(0),
        }
    }
}

impl PlanCache {
    /// The engine's epoch: bumped by every change outside the database's
    /// schema that planning depends on.
    pub fn epoch(&self) -> u64 {
        self.epoch.load(Ordering::Acquire)
    }

    /// Forget every plan.
    pub fn invalidate(&self) {
        self.epoch.fetch_add(1, Ordering::AcqRel);
        self.map.clear();
    }

    /// The entry for `key` planned under `versions`.
    pub fn get(&self, key: &str, versions: (u64, u64)) -> Option<Arc<Entry>> {
        match self.map.get(key) {
            Some(e) if e.versions == versions => {
                self.hits.fetch_add(1, Ordering::Relaxed);
                Some(e)
            }
            _ => {
                self.misses.fetch_add(1, Ordering::Relaxed);
                None
            }
        }
    }

    /// The entry for `key` under `versions`, without counting a miss.
    pub fn peek(&self, key: &str, versions: (u64, u64)) -> Option<Arc<Entry>> {
        self.map.get(key).filter(|e| e.versions == versions)
    }

    /// Keep a plan (or its absence) for `key`.
    pub fn put(&self, key: String, versions: (u64, u64), plan: Option<LogicalPlan>) -> Arc<Entry> {
        let e = Arc::new(Entry {
            versions,
            plan,
            physical: std::sync::OnceLock::new(),
        });
        self.map.insert(key, e.clone());
        e
    }

    /// The templates learned for a template text (empty: it could not
    /// be learned), or `None` when it has not been seen.
    pub fn templates(&self, template: &str) -> Option<Arc<Vec<Template>>> {
        self.templates.get(template)
    }

    /// Keep what was learned of a template text: `t` beside the variants
    /// already known (`None`: it cannot be learned).
    pub fn put_template(&self, template: &str, known: Option<&[Template]>, t: Option<Template>) {
        let variants = match (known, t) {
            (_, None) => Vec::new(),
            (None, Some(t)) => vec![t],
            (Some(k), Some(_)) if k.len() >= TEMPLATE_VARIANTS => return,
            (Some(k), Some(t)) => k.iter().cloned().chain([t]).collect(),
        };
        self.templates
            .insert(template.to_owned(), Arc::new(variants));
    }

    /// Count a statement found by its template.
    pub fn count_template_hit(&self) {
        self.template_hits.fetch_add(1, Ordering::Relaxed);
    }

    /// Count a hit found by [`PlanCache::peek`].
    pub fn count_hit(&self) {
        self.hits.fetch_add(1, Ordering::Relaxed);
    }

    /// Count a statement run on a kept physical plan.
    pub fn ran_physical(&self) {
        self.physical_runs.fetch_add(1, Ordering::Relaxed);
    }

    /// Count a kept plan's run as a primary-key read.
    pub fn ran_point_read(&self) {
        self.physical_runs.fetch_add(1, Ordering::Relaxed);
        self.point_reads.fetch_add(1, Ordering::Relaxed);
    }

    /// Count an insert run from a kept insert.
    pub fn count_kept_insert(&self) {
        self.kept_inserts.fetch_add(1, Ordering::Relaxed);
    }

    pub fn stats(&self) -> CacheStats {
        CacheStats {
            shapes: self.map.len(),
            hits: self.hits.load(Ordering::Relaxed),
            misses: self.misses.load(Ordering::Relaxed),
            physical_runs: self.physical_runs.load(Ordering::Relaxed),
            template_hits: self.template_hits.load(Ordering::Relaxed),
            point_reads: self.point_reads.load(Ordering::Relaxed),
            kept_inserts: self.kept_inserts.load(Ordering::Relaxed),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::sql::parser::DFParser;

    fn norm(sql: &str) -> Option<Normalized> {
        let mut s = DFParser::parse_sql(sql).expect("parses");
        normalize(&s.pop_front().expect("one"))
    }

    #[test]
    fn literals_of_filters_become_parameters() {
        let a = norm("SELECT id FROM t WHERE id = 5").expect("a query");
        let b = norm("SELECT id FROM t WHERE id = 7").expect("a query");
        assert_eq!(a.key, b.key);
        assert_eq!(a.key, "SELECT id FROM t WHERE id = $1\0i");
        // Another type, another shape.
        let big = norm("SELECT id FROM t WHERE id = 18446744073709551615").expect("a query");
        assert_eq!(big.key, "SELECT id FROM t WHERE id = $1\0u");
        assert_eq!(a.values, vec![ScalarValue::Int64(Some(5))]);
        let c = norm(
            "SELECT id, 3, ST_Distance(loc, ST_Point(7, 8)) AS d, ST_Point(5, 6) \
             FROM t WHERE ST_Intersects(loc, ST_MakeEnvelope((-1.5), 2, 3e1, '4')) \
             AND v BETWEEN 1 AND 9 AND name IN ('a', 'b') ORDER BY ST_Distance(loc, ST_Point(1, 2)), 1 LIMIT 10",
        )
        .expect("a query");
        // An aliased call's literals are parameters; an unaliased one's
        // (its name is its text) and plain literals are not.
        assert_eq!(
            c.key,
            "SELECT id, 3, ST_Distance(loc, ST_Point($1, $2)) AS d, ST_Point(5, 6) \
             FROM t WHERE ST_Intersects(loc, ST_MakeEnvelope($3, $4, $5, $6)) \
             AND v BETWEEN $7 AND $8 AND name IN ($9, $10) ORDER BY ST_Distance(loc, ST_Point($11, $12)), 1 LIMIT 10\
             \0iififsiissii"
        );
        assert_eq!(c.values[2], ScalarValue::Float64(Some(-1.5)));
        assert_eq!(c.values[4], ScalarValue::Float64(Some(30.0)));
        assert_eq!(c.values[5], ScalarValue::Utf8(Some("4".into())));
    }

    #[test]
    fn other_literals_stay() {
        // Joins, subqueries, LIKE, functions outside the list: the text
        // is the key.
        for sql in [
            "SELECT * FROM a JOIN b ON a.id = b.id WHERE a.v = 3",
            "SELECT * FROM t WHERE name LIKE 'a%'",
            "SELECT * FROM t WHERE abs(v - 2) = w",
            "SELECT * FROM t WHERE v = (SELECT 1)",
        ] {
            let n = norm(sql).expect("a query");
            assert!(n.values.is_empty(), "{sql}: {:?}", n.values);
        }
        // Arithmetic on a compared value: its literals are values.
        let n = norm("SELECT * FROM t WHERE abs(v) = 3 + 1").expect("a query");
        assert_eq!(
            n.values,
            vec![ScalarValue::Int64(Some(3)), ScalarValue::Int64(Some(1))]
        );
        assert!(norm("SELECT * FROM t WHERE v = $1").is_none());
        // Too long to keep.
        let long = format!("SELECT '{}' FROM t WHERE v = 1", "x".repeat(MAX_KEY));
        assert!(norm(&long).is_none());
        assert!(norm("INSERT INTO t VALUES (1)").is_none());
        // Both sides literal: kept.
        assert!(
            norm("SELECT * FROM t WHERE 1 = 1")
                .expect("q")
                .values
                .is_empty()
        );
    }
}
