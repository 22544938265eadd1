//! A Silt dataset as a DataFusion table: schema, filter pushdown into the
//! primary and secondary indexes, the `SiltScan` execution plan, and the
//! insert and delete sinks.
//!
//! Pushdown (`supports_filters_pushdown`), per filter conjunct:
//!
//! - `pk = v`, `pk < v`, ..., `pk BETWEEN a AND b` on the (first)
//!   primary-key column: **Exact** (`Dataset::get` / a key-range scan);
//! - the same on the first column of a `btree` or `composite` index:
//!   **Exact** (`Query::Range`, records validated through the primary);
//! - `ft_contains(col, 'words')` with a `keyword` or `ngram` index on
//!   `col`: **Exact** (`Query::Text`; for n-grams the longest word is
//!   searched and every word re-checked on the record);
//! - `ST_Intersects` between an indexed geometry column and a constant
//!   geometry, and `ST_DWithin(col, point, metres)`, with an `rtree` or
//!   Hilbert/grid index: **Exact** (the index re-checks each candidate
//!   record with the function's own predicate, `silt::geo::predicates`).
//!   Not for a rectangle crossing the antimeridian (`min_x > max_x`) or a
//!   point the index refuses (latitude out of range): there the function
//!   decides, as below;
//! - `ST_Contains`, `ST_Within` (OGC semantics, which the index does not
//!   re-check): **Inexact** (the index's intersection query returns the
//!   candidates, DataFusion re-checks the function);
//! - anything else: unsupported (DataFusion filters above the scan).
//!
//! One access path is chosen per scan (priority: primary-key equality,
//! btree equality, text, spatial, primary-key range, btree range, full
//! scan). Exact filters the chosen path does not answer are applied right
//! above the scan (`FilterExec`), so every filter declared Exact holds.

use std::collections::{BTreeSet, HashSet};
use std::fmt;
use std::ops::Bound;
use std::sync::Arc;

use async_trait::async_trait;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::catalog::Session;
use datafusion::common::tree_node::{Transformed, TreeNode, TreeNodeRecursion};
use datafusion::common::{Column, DFSchema, ScalarValue};
use datafusion::datasource::sink::DataSinkExec;
use datafusion::datasource::{TableProvider, TableType};
use datafusion::error::{DataFusionError, Result as DfResult};
use datafusion::execution::TaskContext;
use datafusion::logical_expr::ExprSchemable;
use datafusion::logical_expr::dml::InsertOp;
use datafusion::logical_expr::expr::InList;
use datafusion::logical_expr::utils::conjunction;
use datafusion::logical_expr::{Between, BinaryExpr, Expr, Operator, TableProviderFilterPushDown};
use datafusion::physical_expr::expressions::Column as PhysColumn;
use datafusion::physical_expr::{EquivalenceProperties, PhysicalExpr};
use datafusion::physical_plan::execution_plan::{Boundedness, EmissionType};
use datafusion::physical_plan::filter::FilterExecBuilder;
use datafusion::physical_plan::memory::MemoryStream;
use datafusion::physical_plan::projection::{ProjectionExec, ProjectionExpr};
use datafusion::physical_plan::stream::RecordBatchReceiverStreamBuilder;
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, ExecutionPlan, Partitioning, PlanProperties,
    SendableRecordBatchStream,
};
use silt::{Dataset, Geometry, IndexKind, Query, QueryOptions, Value, WriteMode};

use crate::StatementControl;
use crate::convert::{self, ColumnInfo};
use crate::error::silt_err;
use crate::geom;
use crate::session::TxnSlot;
use crate::sink::{SiltSink, SinkOp};
use crate::udf::{self, Func};

/// A kNN request planted by the kNN optimizer rule.
#[derive(Clone, Debug, PartialEq)]
pub struct KnnSpec {
    pub index: String,
    pub column: String,
    pub lon: f64,
    pub lat: f64,
    pub k: usize,
    /// The query point's expression while it still has parameters (a
    /// cached plan's shape, see [`crate::plan_cache`]); `lon` and `lat`
    /// are known once it is bound.
    pub point: Option<Expr>,
}

impl KnnSpec {
    /// This kNN with its parameters bound; `None` if the bound point is
    /// not one the index can search from.
    pub fn bind(&self, params: &datafusion::common::ParamValues) -> Option<KnnSpec> {
        let point = crate::plan_cache::bind_expr(self.point.as_ref()?, params)?;
        let Geometry::Point { x, y } = const_geometry(&point)? else {
            return None;
        };
        if !(x.is_finite() && (-90.0..=90.0).contains(&y)) {
            return None;
        }
        Some(KnnSpec {
            lon: x,
            lat: y,
            point: None,
            ..self.clone()
        })
    }
}

/// A Silt dataset exposed to DataFusion.
pub struct SiltTable {
    ds: Arc<Dataset>,
    cols: Vec<ColumnInfo>,
    schema: SchemaRef,
    knn: Option<KnnSpec>,
}

impl fmt::Debug for SiltTable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SiltTable({}, knn={:?})", self.ds.name(), self.knn)
    }
}

impl SiltTable {
    pub fn new(ds: Arc<Dataset>) -> SiltTable {
        let cols = convert::columns(ds.def());
        let schema = convert::schema_of(&cols);
        SiltTable {
            ds,
            cols,
            schema,
            knn: None,
        }
    }

    /// The same table, scanned by the R-tree kNN path.
    pub fn with_knn(&self, knn: KnnSpec) -> SiltTable {
        SiltTable {
            ds: self.ds.clone(),
            cols: self.cols.clone(),
            schema: self.schema.clone(),
            knn: Some(knn),
        }
    }

    pub fn dataset(&self) -> &Arc<Dataset> {
        &self.ds
    }

    pub fn columns(&self) -> &[ColumnInfo] {
        &self.cols
    }

    pub fn knn(&self) -> Option<&KnnSpec> {
        self.knn.as_ref()
    }

    fn col(&self, name: &str) -> Option<&ColumnInfo> {
        self.cols.iter().find(|c| c.name == name)
    }

    fn col_index(&self, name: &str) -> Option<usize> {
        self.cols.iter().position(|c| c.name == name)
    }

    /// The spatial index on a column, if any: an rtree first, else (unless
    /// `rtree_only`) a Hilbert or grid index (`dhvb`, `dhb`, `shb`, `sif`),
    /// which answer intersection and distance queries but not kNN.
    pub fn spatial_index(&self, column: &str, rtree_only: bool) -> Option<(String, IndexKind)> {
        let defs = self.ds.index_defs();
        let on_col = |d: &&silt::IndexDef| d.fields.first().is_some_and(|f| f == column);
        if let Some(d) = defs
            .iter()
            .filter(on_col)
            .find(|d| d.kind == IndexKind::Rtree)
        {
            return Some((d.name.clone(), d.kind));
        }
        if rtree_only {
            return None;
        }
        defs.iter()
            .filter(on_col)
            .find(|d| matches!(d.kind.to_string().as_str(), "dhvb" | "dhb" | "shb" | "sif"))
            .map(|d| (d.name.clone(), d.kind))
    }

    fn btree_index(&self, column: &str) -> Option<(String, IndexKind)> {
        self.ds
            .index_defs()
            .into_iter()
            .find(|d| d.kind.is_btree() && d.fields.first().is_some_and(|f| f == column))
            .map(|d| (d.name, d.kind))
    }

    fn text_index(&self, column: &str) -> Option<(String, IndexKind)> {
        let defs = self.ds.index_defs();
        let find = |kind: IndexKind| {
            defs.iter()
                .find(|d| d.kind == kind && d.fields.first().is_some_and(|f| f == column))
                .map(|d| (d.name.clone(), d.kind))
        };
        find(IndexKind::Keyword).or_else(|| find(IndexKind::Ngram))
    }

    fn is_pk_first(&self, column: &str) -> bool {
        let pk = &self.ds.def().primary_key;
        pk.first().is_some_and(|p| p == column)
            && self
                .col(column)
                .is_some_and(|c| c.ty != silt::FieldType::Any)
    }

    /// Recognize the predicates of one filter conjunct.
    fn classify(&self, e: &Expr) -> Vec<Pred> {
        match e {
            Expr::BinaryExpr(BinaryExpr { left, op, right }) => {
                let Some(op) = CmpOp::from(*op) else {
                    return vec![];
                };
                let (col, lit, op) = match (left.as_ref(), right.as_ref()) {
                    (Expr::Column(c), v) => match const_scalar(v) {
                        Some(v) => (c, v, op),
                        None => return vec![],
                    },
                    (v, Expr::Column(c)) => match const_scalar(v) {
                        Some(v) => (c, v, op.flip()),
                        None => return vec![],
                    },
                    _ => return vec![],
                };
                self.cmp_pred(&col.name, op, &lit).into_iter().collect()
            }
            Expr::Between(Between {
                expr,
                negated: false,
                low,
                high,
            }) => match (expr.as_ref(), const_scalar(low), const_scalar(high)) {
                (Expr::Column(c), Some(lo), Some(hi)) => {
                    match (
                        self.cmp_pred(&c.name, CmpOp::Ge, &lo),
                        self.cmp_pred(&c.name, CmpOp::Le, &hi),
                    ) {
                        (Some(a), Some(b)) => vec![a, b],
                        _ => vec![],
                    }
                }
                _ => vec![],
            },
            Expr::ScalarFunction(sf) => {
                let Some(f) = udf::func_of(&sf.func) else {
                    return vec![];
                };
                self.function_pred(f, &sf.args).into_iter().collect()
            }
            Expr::InList(InList {
                expr,
                list,
                negated: false,
            }) => {
                let Expr::Column(c) = expr.as_ref() else {
                    return vec![];
                };
                let Some(info) = self.col(&c.name) else {
                    return vec![];
                };
                if self.ds.def().primary_key.len() != 1 || !self.is_pk_first(&c.name) {
                    return vec![];
                }
                let vals: Option<Vec<Value>> = list
                    .iter()
                    .map(|e| convert::scalar_to_value(&const_scalar(e)?, info.ty))
                    .collect();
                match vals {
                    Some(vals) if !vals.is_empty() => vec![Pred::In { vals }],
                    _ => vec![],
                }
            }
            _ => vec![],
        }
    }

    fn cmp_pred(&self, col: &str, op: CmpOp, lit: &ScalarValue) -> Option<Pred> {
        let c = self.col(col)?;
        let typed_pk = c.primary_key && c.ty != silt::FieldType::Any;
        if !(typed_pk || self.btree_index(col).is_some()) {
            return None;
        }
        let val = convert::scalar_to_value(lit, c.ty)?;
        Some(Pred::Cmp {
            col: col.to_owned(),
            op,
            val,
        })
    }

    fn function_pred(&self, f: Func, args: &[Expr]) -> Option<Pred> {
        match f {
            Func::FtContains => {
                let (Expr::Column(c), Some(text)) = (args.first()?, args.get(1).and_then(lit_text))
                else {
                    return None;
                };
                self.text_index(&c.name)?;
                let words = udf::words(&text);
                if words.is_empty() {
                    return None;
                }
                Some(Pred::Text {
                    col: c.name.clone(),
                    words,
                })
            }
            Func::Intersects | Func::Contains | Func::Within => {
                let (c, g) = match (args.first()?, args.get(1)?) {
                    (Expr::Column(c), other) | (other, Expr::Column(c)) => {
                        (c, const_geometry(other)?)
                    }
                    _ => return None,
                };
                self.spatial_index(&c.name, false)?;
                // The index re-checks with Silt's intersection predicate,
                // the one `ST_Intersects` evaluates.
                let exact = f == Func::Intersects
                    && !matches!(g, Geometry::Rect { min_x, max_x, .. } if min_x > max_x);
                Some(Pred::Spatial {
                    col: c.name.clone(),
                    query: Query::Intersects(g),
                    exact,
                })
            }
            Func::DWithin => {
                let (c, g) = match (args.first()?, args.get(1)?) {
                    (Expr::Column(c), other) | (other, Expr::Column(c)) => {
                        (c, const_geometry(other)?)
                    }
                    _ => return None,
                };
                let metres = lit_number(args.get(2)?)?;
                let Geometry::Point { x, y } = g else {
                    return None;
                };
                if !(metres.is_finite() && metres >= 0.0) {
                    return None;
                }
                self.spatial_index(&c.name, false)?;
                // The index re-checks `distance_m <= metres`, what
                // `ST_DWithin` evaluates, for any point it accepts.
                let exact = x.is_finite() && (-90.0..=90.0).contains(&y);
                Some(Pred::Spatial {
                    col: c.name.clone(),
                    query: Query::WithinDistance {
                        lon: x,
                        lat: y,
                        metres,
                    },
                    exact,
                })
            }
            _ => None,
        }
    }

    /// Choose the access path; returns it and, per filter, whether the
    /// path answers it completely.
    fn plan_access(&self, filters: &[Expr]) -> (Access, Vec<bool>) {
        let preds: Vec<Vec<Pred>> = filters.iter().map(|f| self.classify(&strip(f))).collect();
        let mut consumed = vec![false; filters.len()];
        if let Some(k) = &self.knn {
            return (Access::Knn(k.clone()), consumed);
        }
        // All (filter index, pred index, pred) in order.
        let all: Vec<(usize, usize, &Pred)> = preds
            .iter()
            .enumerate()
            .flat_map(|(i, ps)| ps.iter().enumerate().map(move |(j, p)| (i, j, p)))
            .collect();
        let mut used: HashSet<(usize, usize)> = HashSet::new();
        let eq_on = |col: &str| {
            all.iter()
                .find(|(_, _, p)| matches!(p, Pred::Cmp { col: c, op: CmpOp::Eq, .. } if c == col))
        };
        let pk = self.ds.def().primary_key.clone();
        let access = 'choose: {
            // 1. Primary key equality on every key field.
            if pk
                .iter()
                .all(|k| self.col(k).is_some_and(|c| c.ty != silt::FieldType::Any))
            {
                let mut vals = Vec::new();
                let mut hits = Vec::new();
                for k in &pk {
                    match all.iter().find(
                        |(_, _, p)| matches!(p, Pred::Cmp { col: c, op: CmpOp::Eq, .. } if c == k),
                    ) {
                        Some((i, j, Pred::Cmp { val, .. })) => {
                            vals.push(val.clone());
                            hits.push((*i, *j));
                        }
                        _ => break,
                    }
                }
                if vals.len() == pk.len() && !pk.is_empty() {
                    used.extend(hits);
                    break 'choose Access::Get(vals);
                }
            }
            // 1b. Primary key IN (...).
            for (i, j, p) in &all {
                if let Pred::In { vals, .. } = p {
                    used.insert((*i, *j));
                    let mut keys: Vec<Value> = vals.clone();
                    keys.sort_by(silt::value::compare_key_parts);
                    keys.dedup();
                    break 'choose Access::GetMany(keys);
                }
            }
            // 2. Btree equality.
            for (i, j, p) in &all {
                if let Pred::Cmp {
                    col,
                    op: CmpOp::Eq,
                    val,
                } = p
                    && let Some((index, kind)) = self.btree_index(col)
                    && !self.is_pk_first(col)
                {
                    used.insert((*i, *j));
                    break 'choose Access::Index {
                        index,
                        kind,
                        column: col.clone(),
                        query: Query::Range {
                            lo: Bound::Included(vec![val.clone()]),
                            hi: Bound::Included(vec![val.clone()]),
                        },
                        text_check: None,
                        exact: true,
                    };
                }
            }
            // 3. Text.
            for (i, j, p) in &all {
                if let Pred::Text { col, words } = p
                    && let Some((index, kind)) = self.text_index(col)
                {
                    used.insert((*i, *j));
                    let text = if kind == IndexKind::Ngram {
                        words
                            .iter()
                            .max_by_key(|w| w.chars().count())
                            .cloned()
                            .unwrap_or_default()
                    } else {
                        words.join(" ")
                    };
                    break 'choose Access::Index {
                        index,
                        kind,
                        column: col.clone(),
                        query: Query::Text { text, all: true },
                        text_check: Some(words.clone()),
                        exact: true,
                    };
                }
            }
            // 4. Spatial (consumed when the index decides it exactly).
            for (i, j, p) in &all {
                if let Pred::Spatial { col, query, exact } = p
                    && let Some((index, kind)) = self.spatial_index(col, false)
                {
                    if *exact {
                        used.insert((*i, *j));
                    }
                    break 'choose Access::Index {
                        index,
                        kind,
                        column: col.clone(),
                        query: query.clone(),
                        text_check: None,
                        exact: *exact,
                    };
                }
            }
            // 5./6. Ranges: primary key first, then btree indexes.
            let mut range_cols: Vec<String> = pk.first().cloned().into_iter().collect();
            for (_, _, p) in &all {
                if let Pred::Cmp { col, .. } = p
                    && !range_cols.contains(col)
                {
                    range_cols.push(col.clone());
                }
            }
            for col in range_cols {
                let is_pk = self.is_pk_first(&col);
                let index = if is_pk { None } else { self.btree_index(&col) };
                if !is_pk && index.is_none() {
                    continue;
                }
                let mut lo: Bound<Value> = Bound::Unbounded;
                let mut hi: Bound<Value> = Bound::Unbounded;
                let mut hits = Vec::new();
                if let Some((i, j, Pred::Cmp { val, .. })) = eq_on(&col) {
                    lo = Bound::Included(val.clone());
                    hi = Bound::Included(val.clone());
                    hits.push((*i, *j));
                } else {
                    for (i, j, p) in &all {
                        let Pred::Cmp { col: c, op, val } = p else {
                            continue;
                        };
                        if *c != col {
                            continue;
                        }
                        match op {
                            CmpOp::Gt | CmpOp::Ge if matches!(lo, Bound::Unbounded) => {
                                lo = if *op == CmpOp::Gt {
                                    Bound::Excluded(val.clone())
                                } else {
                                    Bound::Included(val.clone())
                                };
                                hits.push((*i, *j));
                            }
                            CmpOp::Lt | CmpOp::Le if matches!(hi, Bound::Unbounded) => {
                                hi = if *op == CmpOp::Lt {
                                    Bound::Excluded(val.clone())
                                } else {
                                    Bound::Included(val.clone())
                                };
                                hits.push((*i, *j));
                            }
                            _ => {}
                        }
                    }
                }
                if hits.is_empty() {
                    continue;
                }
                used.extend(hits);
                match index {
                    None => {
                        break 'choose Access::PkRange {
                            column: col,
                            lo,
                            hi,
                        };
                    }
                    Some((index, kind)) => {
                        let b = |x: Bound<Value>| x.map(|v| vec![v]);
                        break 'choose Access::Index {
                            index,
                            kind,
                            column: col,
                            query: Query::Range {
                                lo: b(lo),
                                hi: b(hi),
                            },
                            text_check: None,
                            exact: true,
                        };
                    }
                }
            }
            Access::Full
        };
        for (i, ps) in preds.iter().enumerate() {
            consumed[i] = !ps.is_empty() && (0..ps.len()).all(|j| used.contains(&(i, j)));
        }
        (access, consumed)
    }

    /// Whether a filter is declared Exact (see the module doc). Decided by
    /// the filter's shape alone, never its constants' values: a cached
    /// plan's filters have parameters in their place (see
    /// [`crate::plan_cache`]). An Exact filter the access path cannot
    /// answer for its values (an invalid geometry, a rectangle across the
    /// antimeridian, a value of another type) is applied above the scan
    /// by [`SiltTable::build_scan`].
    fn exactness(&self, f: &Expr) -> TableProviderFilterPushDown {
        use TableProviderFilterPushDown::{Exact, Inexact, Unsupported};
        let f = strip(f);
        let col_const = |a: &Expr, b: &Expr| -> Option<String> {
            match (a, b) {
                (Expr::Column(c), o) | (o, Expr::Column(c)) if is_const(o) => Some(c.name.clone()),
                _ => None,
            }
        };
        let cmp_ok = |col: &str| {
            self.col(col)
                .is_some_and(|c| c.primary_key && c.ty != silt::FieldType::Any)
                || self.btree_index(col).is_some()
        };
        match &f {
            Expr::BinaryExpr(BinaryExpr { left, op, right }) if CmpOp::from(*op).is_some() => {
                match col_const(left, right) {
                    Some(c) if cmp_ok(&c) => Exact,
                    _ => Unsupported,
                }
            }
            Expr::Between(Between {
                expr,
                negated: false,
                low,
                high,
            }) => match expr.as_ref() {
                Expr::Column(c) if is_const(low) && is_const(high) && cmp_ok(&c.name) => Exact,
                _ => Unsupported,
            },
            Expr::InList(InList {
                expr,
                list,
                negated: false,
            }) => match expr.as_ref() {
                Expr::Column(c)
                    if !list.is_empty()
                        && list.iter().all(is_const)
                        && self.col(&c.name).is_some()
                        && self.ds.def().primary_key.len() == 1
                        && self.is_pk_first(&c.name) =>
                {
                    Exact
                }
                _ => Unsupported,
            },
            Expr::ScalarFunction(sf) => {
                let args = &sf.args;
                match udf::func_of(&sf.func) {
                    Some(Func::FtContains) => match (args.first(), args.get(1)) {
                        (Some(Expr::Column(c)), Some(t))
                            if is_const(t) && self.text_index(&c.name).is_some() =>
                        {
                            Exact
                        }
                        _ => Unsupported,
                    },
                    Some(f @ (Func::Intersects | Func::Contains | Func::Within)) => {
                        match (args.first(), args.get(1)) {
                            (Some(a), Some(b))
                                if col_const(a, b)
                                    .is_some_and(|c| self.spatial_index(&c, false).is_some()) =>
                            {
                                if f == Func::Intersects {
                                    Exact
                                } else {
                                    Inexact
                                }
                            }
                            _ => Unsupported,
                        }
                    }
                    Some(Func::DWithin) => match (args.first(), args.get(1), args.get(2)) {
                        (Some(a), Some(b), Some(m))
                            if is_const(m)
                                && col_const(a, b)
                                    .is_some_and(|c| self.spatial_index(&c, false).is_some()) =>
                        {
                            Exact
                        }
                        _ => Unsupported,
                    },
                    _ => Unsupported,
                }
            }
            _ => Unsupported,
        }
    }

    /// The scan plan: `SiltScan`, with the filters the access path does
    /// not answer applied above it (`all_filters`: every such filter, as
    /// DELETE needs; else only those declared Exact).
    pub fn build_scan(
        &self,
        state: &dyn Session,
        projection: Option<&Vec<usize>>,
        filters: &[Expr],
        limit: Option<usize>,
        all_filters: bool,
    ) -> DfResult<Arc<dyn ExecutionPlan>> {
        // A cached shape's scan: its access path waits for the values.
        if self.knn.as_ref().is_some_and(|k| k.point.is_some())
            || filters.iter().any(crate::plan_cache::has_param)
        {
            if all_filters {
                return Err(DataFusionError::Internal(
                    "a scan for UPDATE or DELETE has unbound parameters".to_owned(),
                ));
            }
            return Ok(Arc::new(crate::deferred::DeferredScanExec::new(
                self.duplicate(),
                projection.cloned(),
                filters.iter().map(strip).collect(),
                limit,
            )));
        }
        self.concrete_scan(
            &|e, schema| state.create_physical_expr(e, schema),
            projection,
            filters,
            limit,
            all_filters,
        )
    }

    /// The same table (a kNN spec included).
    pub(crate) fn duplicate(&self) -> SiltTable {
        SiltTable {
            ds: self.ds.clone(),
            cols: self.cols.clone(),
            schema: self.schema.clone(),
            knn: self.knn.clone(),
        }
    }

    /// [`SiltTable::build_scan`] for filters and a kNN point without
    /// parameters; `physical` makes the residual filter's expression.
    #[allow(clippy::type_complexity)]
    pub(crate) fn concrete_scan(
        &self,
        physical: &dyn Fn(Expr, &DFSchema) -> DfResult<Arc<dyn PhysicalExpr>>,
        projection: Option<&Vec<usize>>,
        filters: &[Expr],
        limit: Option<usize>,
        all_filters: bool,
    ) -> DfResult<Arc<dyn ExecutionPlan>> {
        let (access, consumed) = self.plan_access(filters);
        let residual: Vec<Expr> = filters
            .iter()
            .zip(&consumed)
            .filter(|(f, c)| {
                !**c && (all_filters || self.exactness(f) == TableProviderFilterPushDown::Exact)
            })
            .map(|(f, _)| strip(f))
            .collect();
        let requested: Vec<usize> = match projection {
            Some(p) => p.clone(),
            None => (0..self.cols.len()).collect(),
        };
        let Some(pred) = conjunction(residual) else {
            return Ok(Arc::new(SiltScanExec::new(
                self.ds.clone(),
                &self.cols,
                requested,
                access,
                limit,
                all_filters,
            )));
        };
        let mut needed: BTreeSet<usize> = requested.iter().copied().collect();
        for c in pred.column_refs() {
            match self.col_index(&c.name) {
                Some(i) => {
                    needed.insert(i);
                }
                None => {
                    return Err(DataFusionError::Plan(format!(
                        "unknown column `{}` in a filter on `{}`",
                        c.name,
                        self.ds.name()
                    )));
                }
            }
        }
        let needed: Vec<usize> = needed.into_iter().collect();
        let scan = Arc::new(SiltScanExec::new(
            self.ds.clone(),
            &self.cols,
            needed.clone(),
            access,
            None,
            all_filters,
        ));
        let df_schema = DFSchema::try_from(scan.schema().as_ref().clone())?;
        let phys = physical(pred, &df_schema)?;
        let out: Vec<usize> = requested
            .iter()
            .map(|r| needed.iter().position(|n| n == r).unwrap_or(0))
            .collect();
        let filter = FilterExecBuilder::new(phys, scan)
            .apply_projection(Some(out))?
            .build()?;
        Ok(Arc::new(filter))
    }
}

/// A filter expression without table qualifiers (the scan's columns are
/// unqualified).
pub fn strip(e: &Expr) -> Expr {
    e.clone()
        .transform(|e| match e {
            Expr::Column(c) if c.relation.is_some() => Ok(Transformed::yes(Expr::Column(
                Column::new_unqualified(c.name),
            ))),
            other => Ok(Transformed::no(other)),
        })
        .map(|t| t.data)
        .unwrap_or_else(|_| e.clone())
}

/// Whether an expression is a constant of the statement: no column, no
/// subquery, nothing volatile (parameters count as constants).
pub fn is_const(e: &Expr) -> bool {
    !e.any_column_refs()
        && !e.is_volatile()
        && !e
            .exists(|x| {
                Ok(matches!(
                    x,
                    Expr::ScalarSubquery(_)
                        | Expr::Exists(_)
                        | Expr::InSubquery(_)
                        | Expr::OuterReferenceColumn(..)
                ))
            })
            .unwrap_or(true)
}

/// The value of a literal, or of a cast of one (a bound parameter the
/// optimizer did not fold).
fn const_scalar(e: &Expr) -> Option<ScalarValue> {
    match e {
        Expr::Literal(v, _) => Some(v.clone()),
        Expr::Cast(c) => const_scalar(&c.expr)?.cast_to(c.field.data_type()).ok(),
        Expr::TryCast(c) => const_scalar(&c.expr)?.cast_to(c.field.data_type()).ok(),
        Expr::Alias(a) => const_scalar(&a.expr),
        _ => None,
    }
}

fn lit_text(e: &Expr) -> Option<String> {
    match e {
        Expr::Literal(
            ScalarValue::Utf8(Some(s))
            | ScalarValue::LargeUtf8(Some(s))
            | ScalarValue::Utf8View(Some(s)),
            _,
        ) => Some(s.clone()),
        Expr::Cast(c) => lit_text(&c.expr),
        _ => None,
    }
}

fn lit_number(e: &Expr) -> Option<f64> {
    match e {
        Expr::Literal(v, _) => match v {
            ScalarValue::Float64(Some(x)) => Some(*x),
            ScalarValue::Float32(Some(x)) => Some(f64::from(*x)),
            ScalarValue::Int64(Some(x)) => Some(*x as f64),
            ScalarValue::Int32(Some(x)) => Some(f64::from(*x)),
            ScalarValue::Int16(Some(x)) => Some(f64::from(*x)),
            ScalarValue::Int8(Some(x)) => Some(f64::from(*x)),
            ScalarValue::UInt64(Some(x)) => Some(*x as f64),
            ScalarValue::UInt32(Some(x)) => Some(f64::from(*x)),
            _ => None,
        },
        Expr::Cast(c) => lit_number(&c.expr),
        Expr::TryCast(c) => lit_number(&c.expr),
        _ => None,
    }
}

/// A constant geometry: WKT text, or one of the constructors applied to
/// constants (the optimizer usually folds those into text first).
pub fn const_geometry(e: &Expr) -> Option<Geometry> {
    if let Some(t) = lit_text(e) {
        return geom::parse_wkt(&t).ok();
    }
    let Expr::ScalarFunction(sf) = e else {
        return None;
    };
    let nums = || sf.args.iter().map(lit_number).collect::<Option<Vec<f64>>>();
    let g = match udf::func_of(&sf.func)? {
        Func::Point => {
            let n = nums()?;
            Geometry::point(*n.first()?, *n.get(1)?)
        }
        Func::MakeEnvelope => {
            let n = nums()?;
            Geometry::rect(*n.first()?, *n.get(1)?, *n.get(2)?, *n.get(3)?)
        }
        Func::GeomFromText | Func::AsText => const_geometry(sf.args.first()?)?,
        _ => return None,
    };
    g.validate().ok()?;
    Some(g)
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum CmpOp {
    Eq,
    Lt,
    Le,
    Gt,
    Ge,
}

impl CmpOp {
    fn from(op: Operator) -> Option<CmpOp> {
        Some(match op {
            Operator::Eq => CmpOp::Eq,
            Operator::Lt => CmpOp::Lt,
            Operator::LtEq => CmpOp::Le,
            Operator::Gt => CmpOp::Gt,
            Operator::GtEq => CmpOp::Ge,
            _ => return None,
        })
    }

    fn flip(self) -> CmpOp {
        match self {
            CmpOp::Eq => CmpOp::Eq,
            CmpOp::Lt => CmpOp::Gt,
            CmpOp::Le => CmpOp::Ge,
            CmpOp::Gt => CmpOp::Lt,
            CmpOp::Ge => CmpOp::Le,
        }
    }
}

/// A recognized predicate.
#[derive(Clone, Debug)]
enum Pred {
    Cmp {
        col: String,
        op: CmpOp,
        val: Value,
    },
    /// `exact`: the index answers it exactly (see the module doc).
    Spatial {
        col: String,
        query: Query,
        exact: bool,
    },
    Text {
        col: String,
        words: Vec<String>,
    },
    In {
        vals: Vec<Value>,
    },
}

/// How a scan reads the dataset.
#[derive(Clone, Debug)]
pub enum Access {
    Full,
    Get(Vec<Value>),
    /// Single-field primary key `IN (...)`: one get per key, in key order.
    GetMany(Vec<Value>),
    PkRange {
        column: String,
        lo: Bound<Value>,
        hi: Bound<Value>,
    },
    Index {
        index: String,
        kind: IndexKind,
        column: String,
        query: Query,
        /// Every one of these words must be a word of the column
        /// (`ft_contains` through an index).
        text_check: Option<Vec<String>>,
        exact: bool,
    },
    Knn(KnnSpec),
}

fn fmt_bound(col: &str, b: &Bound<Value>, lower: bool) -> Option<String> {
    match (b, lower) {
        (Bound::Included(v), true) => Some(format!("{col} >= {v}")),
        (Bound::Excluded(v), true) => Some(format!("{col} > {v}")),
        (Bound::Included(v), false) => Some(format!("{col} <= {v}")),
        (Bound::Excluded(v), false) => Some(format!("{col} < {v}")),
        (Bound::Unbounded, _) => None,
    }
}

fn fmt_vbound(col: &str, b: &Bound<Vec<Value>>, lower: bool) -> Option<String> {
    let one = |b: &Bound<Vec<Value>>| {
        b.as_ref()
            .map(|v| v.first().cloned().unwrap_or(Value::Null))
    };
    fmt_bound(col, &one(b), lower)
}

impl fmt::Display for Access {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Access::Full => write!(f, "full scan"),
            Access::Get(pk) => write!(f, "primary get({})", silt::value::key_to_string(pk)),
            Access::GetMany(keys) => write!(f, "primary get-many({} keys)", keys.len()),
            Access::PkRange { column, lo, hi } => {
                let parts: Vec<String> =
                    [fmt_bound(column, lo, true), fmt_bound(column, hi, false)]
                        .into_iter()
                        .flatten()
                        .collect();
                write!(f, "primary range({})", parts.join(" AND "))
            }
            Access::Index {
                index,
                kind,
                column,
                query,
                ..
            } => {
                write!(f, "{kind}({column}) index={index} ")?;
                match query {
                    Query::Range { lo, hi } => {
                        let parts: Vec<String> =
                            [fmt_vbound(column, lo, true), fmt_vbound(column, hi, false)]
                                .into_iter()
                                .flatten()
                                .collect();
                        write!(f, "range({})", parts.join(" AND "))
                    }
                    Query::Intersects(g) => write!(f, "intersects({})", g.to_wkt()),
                    Query::WithinDistance { lon, lat, metres } => {
                        write!(f, "within-distance(POINT({lon} {lat}), {metres} m)")
                    }
                    Query::Nearest { lon, lat, k } => write!(f, "knn(POINT({lon} {lat}), k={k})"),
                    Query::Text { text, .. } => write!(f, "text('{text}')"),
                    Query::Recent { .. } => write!(f, "recent"),
                }
            }
            Access::Knn(k) => write!(
                f,
                "rtree({}) index={} knn(POINT({} {}), k={})",
                k.column, k.index, k.lon, k.lat, k.k
            ),
        }
    }
}

#[async_trait]
impl TableProvider for SiltTable {
    fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }

    fn table_type(&self) -> TableType {
        TableType::Base
    }

    async fn scan(
        &self,
        state: &dyn Session,
        projection: Option<&Vec<usize>>,
        filters: &[Expr],
        limit: Option<usize>,
    ) -> DfResult<Arc<dyn ExecutionPlan>> {
        self.build_scan(state, projection, filters, limit, false)
    }

    fn supports_filters_pushdown(
        &self,
        filters: &[&Expr],
    ) -> DfResult<Vec<TableProviderFilterPushDown>> {
        if self.knn.is_some() {
            return Ok(vec![
                TableProviderFilterPushDown::Unsupported;
                filters.len()
            ]);
        }
        Ok(filters.iter().map(|f| self.exactness(f)).collect())
    }

    async fn insert_into(
        &self,
        _state: &dyn Session,
        input: Arc<dyn ExecutionPlan>,
        insert_op: InsertOp,
    ) -> DfResult<Arc<dyn ExecutionPlan>> {
        let mode = match insert_op {
            InsertOp::Append => WriteMode::Insert,
            InsertOp::Replace => WriteMode::Upsert,
            InsertOp::Overwrite => {
                return Err(DataFusionError::NotImplemented(
                    "INSERT OVERWRITE is not supported; DELETE FROM the table first, or use UPSERT INTO / INSERT OR REPLACE INTO".into(),
                ));
            }
        };
        let sink = SiltSink {
            ds: self.ds.clone(),
            cols: self.cols.clone(),
            schema: self.schema.clone(),
            op: SinkOp::Write(mode),
            txn: TxnSlot::of(_state.config()),
        };
        Ok(Arc::new(DataSinkExec::new(input, Arc::new(sink), None)))
    }

    async fn delete_from(
        &self,
        state: &dyn Session,
        filters: Vec<Expr>,
    ) -> DfResult<Arc<dyn ExecutionPlan>> {
        let pk = &self.ds.def().primary_key;
        let idx: Vec<usize> = pk.iter().filter_map(|k| self.col_index(k)).collect();
        if idx.len() != pk.len() {
            return Err(DataFusionError::Plan(format!(
                "dataset `{}` has primary-key fields without a column",
                self.ds.name()
            )));
        }
        let scan = self.build_scan(state, Some(&idx), &filters, None, true)?;
        let cols: Vec<ColumnInfo> = idx.iter().map(|i| self.cols[*i].clone()).collect();
        let sink = SiltSink {
            ds: self.ds.clone(),
            schema: convert::schema_of(&cols),
            cols,
            op: SinkOp::Delete,
            txn: TxnSlot::of(state.config()),
        };
        Ok(Arc::new(DataSinkExec::new(scan, Arc::new(sink), None)))
    }

    async fn update(
        &self,
        state: &dyn Session,
        assignments: Vec<(String, Expr)>,
        filters: Vec<Expr>,
    ) -> DfResult<Arc<dyn ExecutionPlan>> {
        let pk = self.ds.def().primary_key.clone();
        for (c, _) in &assignments {
            if pk.contains(c) {
                return Err(DataFusionError::NotImplemented(format!(
                    "UPDATE of the primary-key column `{c}`; DELETE the row and INSERT it with the new key"
                )));
            }
            if self.col(c).is_none() {
                return Err(DataFusionError::Plan(format!(
                    "table `{}` has no column `{c}`",
                    self.ds.name()
                )));
            }
        }
        let all: Vec<usize> = (0..self.cols.len()).collect();
        let scan = self.build_scan(state, Some(&all), &filters, None, true)?;
        let df_schema = DFSchema::try_from(self.schema.as_ref().clone())?;
        let mut exprs: Vec<ProjectionExpr> = Vec::new();
        let mut out_cols: Vec<ColumnInfo> = Vec::new();
        for k in &pk {
            let i = self.col_index(k).ok_or_else(|| {
                DataFusionError::Plan(format!("primary-key field `{k}` has no column"))
            })?;
            exprs.push(ProjectionExpr {
                expr: Arc::new(PhysColumn::new(k, i)),
                alias: k.clone(),
            });
            out_cols.push(self.cols[i].clone());
        }
        for (c, e) in assignments {
            let info = self
                .col(&c)
                .cloned()
                .ok_or_else(|| DataFusionError::Plan(format!("unknown column `{c}`")))?;
            let e = strip(&e).cast_to(&info.data_type, &df_schema)?;
            exprs.push(ProjectionExpr {
                expr: state.create_physical_expr(e, &df_schema)?,
                alias: c.clone(),
            });
            out_cols.push(info);
        }
        let proj = ProjectionExec::try_new(exprs, scan)?;
        let sink = SiltSink {
            ds: self.ds.clone(),
            schema: convert::schema_of(&out_cols),
            cols: out_cols,
            op: SinkOp::Update { n_pk: pk.len() },
            txn: TxnSlot::of(state.config()),
        };
        Ok(Arc::new(DataSinkExec::new(
            Arc::new(proj),
            Arc::new(sink),
            None,
        )))
    }
}

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
    fn new(
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
