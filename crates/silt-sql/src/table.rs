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
//! - the same on the column of a `brin` index: **Exact** (`Query::Range`
//!   through the primary's zone maps: only blocks whose min/max overlap
//!   are read; records validated and re-checked);
//!
//! One access path is chosen per scan (priority: primary-key equality,
//! btree equality, text, spatial, primary-key range, btree range, brin
//! range, full scan). Exact filters the chosen path does not answer are applied right
//! above the scan (`FilterExec`), so every filter declared Exact holds.

use std::collections::{BTreeSet, HashSet};
use std::fmt;
use std::ops::Bound;
use std::sync::Arc;

use async_trait::async_trait;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::catalog::Session;
use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::common::{Column, DFSchema, ScalarValue};
use datafusion::datasource::sink::DataSinkExec;
use datafusion::datasource::{TableProvider, TableType};
use datafusion::error::{DataFusionError, Result as DfResult};
use datafusion::logical_expr::ExprSchemable;
use datafusion::logical_expr::dml::InsertOp;
use datafusion::logical_expr::expr::InList;
use datafusion::logical_expr::utils::conjunction;
use datafusion::logical_expr::{Between, BinaryExpr, Expr, Operator, TableProviderFilterPushDown};
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_expr::expressions::Column as PhysColumn;
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::filter::FilterExecBuilder;
use datafusion::physical_plan::projection::{ProjectionExec, ProjectionExpr};
use silt::{Dataset, Geometry, IndexKind, Query, Value, WriteMode};

use crate::convert::{self, ColumnInfo};
use crate::geom;
use crate::prefilter::{self, PreFilter};
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
        // A point computed from its parameters (`ST_Point($1 + $2, $3)`)
        // is folded first, as the planner folds a text's.
        let point = match const_geometry(&point) {
            Some(g) => g,
            None => const_geometry(&crate::plan_cache::fold_bound(point).ok()?)?,
        };
        let Geometry::Point { x, y } = point else {
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
    /// The definition its columns were read from (its writes are refused
    /// once an `ALTER` has replaced it).
    def: Arc<silt::DatasetDef>,
    cols: Vec<ColumnInfo>,
    schema: SchemaRef,
    knn: Option<KnnSpec>,
    /// Scanned only for the minimum and maximum of its columns
    /// ([`crate::extremes`]).
    extremes: bool,
}

impl fmt::Debug for SiltTable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SiltTable({}, knn={:?})", self.ds.name(), self.knn)
    }
}

impl SiltTable {
    pub fn new(ds: Arc<Dataset>) -> SiltTable {
        let def = ds.def();
        let cols = convert::columns(&def);
        Self::with_columns(ds, def, cols)
    }

    fn with_columns(
        ds: Arc<Dataset>,
        def: Arc<silt::DatasetDef>,
        cols: Vec<ColumnInfo>,
    ) -> SiltTable {
        let schema = convert::schema_of(&cols);
        SiltTable {
            ds,
            def,
            cols,
            schema,
            knn: None,
            extremes: false,
        }
    }

    /// The document view of the dataset (`documents.<table>`): its columns
    /// plus the JSON object of each record's undeclared fields
    /// ([`convert::document_columns`]). Read-only.
    pub fn documents(ds: Arc<Dataset>) -> SiltTable {
        let def = ds.def();
        let cols = convert::document_columns(&def);
        Self::with_columns(ds, def, cols)
    }

    /// Refuse a write through the document view.
    fn writable(&self) -> DfResult<()> {
        if self.cols.iter().any(|c| c.rest.is_some()) {
            return Err(DataFusionError::Plan(format!(
                "{}.{} is a read-only view of table {}: write to {} (undeclared fields come with records written through the CLI, Python or HTTP)",
                convert::DOCUMENTS_SCHEMA,
                self.ds.name(),
                self.ds.name(),
                self.ds.name()
            )));
        }
        Ok(())
    }

    /// The same table, scanned by the R-tree kNN path.
    pub fn with_knn(&self, knn: KnnSpec) -> SiltTable {
        SiltTable {
            knn: Some(knn),
            ..self.duplicate()
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

    /// A `brin` index on `column` (zone maps of the primary's blocks).
    fn brin_index(&self, column: &str) -> Option<(String, IndexKind)> {
        self.ds
            .index_defs()
            .into_iter()
            .find(|d| d.kind == IndexKind::Brin && d.fields.first().is_some_and(|f| f == column))
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
            Expr::BinaryExpr(BinaryExpr {
                op: Operator::Or, ..
            }) => {
                let mut leaves = Vec::new();
                or_leaves(e, &mut leaves);
                let mut any = Vec::with_capacity(leaves.len());
                for leaf in leaves {
                    match self.classify(leaf).as_slice() {
                        [Pred::AnyOf(ps)] => any.extend(ps.iter().cloned()),
                        [p] => any.push(p.clone()),
                        // A leaf no single probe answers: no union.
                        _ => return vec![],
                    }
                }
                vec![Pred::AnyOf(any)]
            }
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
                let vals: Option<Vec<Value>> = list
                    .iter()
                    .map(|e| convert::scalar_to_value(&const_scalar(e)?, info.ty))
                    .collect();
                let Some(vals) = vals.filter(|v| !v.is_empty()) else {
                    return vec![];
                };
                if self.ds.def().primary_key.len() == 1 && self.is_pk_first(&c.name) {
                    return vec![Pred::In { vals }];
                }
                // A key's first column or an indexed one: a probe per value.
                if self.is_pk_first(&c.name) || self.btree_index(&c.name).is_some() {
                    let eqs = vals
                        .into_iter()
                        .map(|val| Pred::Cmp {
                            col: c.name.clone(),
                            op: CmpOp::Eq,
                            val,
                        })
                        .collect();
                    return vec![Pred::AnyOf(eqs)];
                }
                vec![]
            }
            _ => vec![],
        }
    }

    /// Whether the first R-tree probe among `all` meets fewer entries than
    /// the range the key or B+-tree range steps would read (estimates from
    /// block indexes and R-tree directories, `Dataset::estimate_hits`);
    /// `None` unless there are both and both have estimates.
    fn spatial_before_range(&self, all: &[(usize, usize, &Pred)]) -> Option<bool> {
        let spatial = all.iter().find_map(|(_, _, p)| match p {
            Pred::Spatial { col, .. }
                if self
                    .spatial_index(col, false)
                    .is_some_and(|(_, k)| k == IndexKind::Rtree) =>
            {
                self.single_access(p)
            }
            _ => None,
        })?;
        let range = self.range_candidate(all)?;
        let s = self.estimate(&spatial)?;
        let r = self.estimate(&range)?;
        Some(s <= r)
    }

    /// The key or B+-tree range the range steps would choose: the key's
    /// first column if it is compared, else the first compared B+-tree
    /// column, bounded by every comparison on it.
    fn range_candidate(&self, all: &[(usize, usize, &Pred)]) -> Option<Access> {
        let mut cols: Vec<&str> = Vec::new();
        for (_, _, p) in all {
            if let Pred::Cmp { col, .. } = p
                && !cols.contains(&col.as_str())
            {
                cols.push(col);
            }
        }
        cols.sort_by_key(|c| !self.is_pk_first(c));
        let col = cols
            .into_iter()
            .find(|c| self.is_pk_first(c) || self.btree_index(c).is_some())?;
        let (mut lo, mut hi) = (Bound::Unbounded, Bound::Unbounded);
        for (_, _, p) in all {
            let Pred::Cmp { col: c, op, val } = p else {
                continue;
            };
            if c != col {
                continue;
            }
            match op {
                CmpOp::Eq => {
                    lo = Bound::Included(val.clone());
                    hi = Bound::Included(val.clone());
                }
                CmpOp::Gt => lo = Bound::Excluded(val.clone()),
                CmpOp::Ge => lo = Bound::Included(val.clone()),
                CmpOp::Lt => hi = Bound::Excluded(val.clone()),
                CmpOp::Le => hi = Bound::Included(val.clone()),
            }
        }
        if self.is_pk_first(col) {
            return Some(Access::PkRange {
                column: col.to_owned(),
                lo,
                hi,
            });
        }
        let (index, kind) = self.btree_index(col)?;
        let b = |x: Bound<Value>| x.map(|v| vec![v]);
        Some(Access::Index {
            index,
            kind,
            column: col.to_owned(),
            query: Query::Range {
                lo: b(lo),
                hi: b(hi),
            },
            text_check: None,
            exact: true,
        })
    }

    /// About how many entries a path meets, where the dataset can say.
    fn estimate(&self, a: &Access) -> Option<u64> {
        match a {
            Access::Index { index, query, .. } => {
                self.ds.estimate_hits(index, query).ok().flatten()
            }
            Access::PkRange { lo, hi, .. } => {
                let range = crate::scan::pk_bounds(&self.ds, lo, hi).ok()?;
                Some(self.ds.estimate_key_range(&range))
            }
            _ => None,
        }
    }

    /// The access path of one predicate alone, if it has one.
    fn single_access(&self, p: &Pred) -> Option<Access> {
        let pk = &self.ds.def().primary_key;
        Some(match p {
            Pred::Cmp { col, op, val } => {
                let (lo, hi) = match op {
                    CmpOp::Eq => (Bound::Included(val.clone()), Bound::Included(val.clone())),
                    CmpOp::Gt => (Bound::Excluded(val.clone()), Bound::Unbounded),
                    CmpOp::Ge => (Bound::Included(val.clone()), Bound::Unbounded),
                    CmpOp::Lt => (Bound::Unbounded, Bound::Excluded(val.clone())),
                    CmpOp::Le => (Bound::Unbounded, Bound::Included(val.clone())),
                };
                if self.is_pk_first(col) {
                    if *op == CmpOp::Eq && pk.len() == 1 {
                        return Some(Access::Get(vec![val.clone()]));
                    }
                    return Some(Access::PkRange {
                        column: col.clone(),
                        lo,
                        hi,
                    });
                }
                let (index, kind) = self.btree_index(col)?;
                let b = |x: Bound<Value>| x.map(|v| vec![v]);
                Access::Index {
                    index,
                    kind,
                    column: col.clone(),
                    query: Query::Range {
                        lo: b(lo),
                        hi: b(hi),
                    },
                    text_check: None,
                    exact: true,
                }
            }
            Pred::Text { col, words } => {
                let (index, kind) = self.text_index(col)?;
                Access::Index {
                    index,
                    kind,
                    column: col.clone(),
                    query: Query::Text {
                        text: text_query(kind, words),
                        all: true,
                    },
                    text_check: Some(words.clone()),
                    exact: true,
                }
            }
            Pred::Spatial { col, query, exact } => {
                let (index, kind) = self.spatial_index(col, false)?;
                Access::Index {
                    index,
                    kind,
                    column: col.clone(),
                    query: query.clone(),
                    text_check: None,
                    exact: *exact,
                }
            }
            Pred::In { vals } => {
                let mut keys = vals.clone();
                keys.sort_by(silt::value::compare_key_parts);
                keys.dedup();
                Access::GetMany(keys)
            }
            Pred::AnyOf(ps) => Access::AnyOf(
                ps.iter()
                    .map(|p| self.single_access(p))
                    .collect::<Option<_>>()?,
            ),
        })
    }

    fn cmp_pred(&self, col: &str, op: CmpOp, lit: &ScalarValue) -> Option<Pred> {
        let c = self.col(col)?;
        let typed_pk = c.primary_key && c.ty != silt::FieldType::Any;
        if !(typed_pk || self.btree_index(col).is_some() || self.brin_index(col).is_some()) {
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
                        match const_geometry(other) {
                            Some(g) => (c, g),
                            // A multi-polygon (an antimeridian box from
                            // `ST_MakeEnvelope`, say): a probe per part.
                            None => {
                                self.spatial_index(&c.name, false)?;
                                let parts = const_geometry_parts(other)?;
                                return Some(Pred::AnyOf(
                                    parts
                                        .into_iter()
                                        .map(|g| Pred::Spatial {
                                            col: c.name.clone(),
                                            query: Query::Intersects(g),
                                            exact: false,
                                        })
                                        .collect(),
                                ));
                            }
                        }
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
            // Between a spatial probe and a key or B+-tree range, the one
            // that meets fewer entries.
            let spatial_first = self.spatial_before_range(&all);
            // 2. Btree equality.
            for (i, j, p) in &all {
                if spatial_first == Some(true) {
                    break;
                }
                if let Pred::Cmp {
                    col, op: CmpOp::Eq, ..
                } = p
                    && self.btree_index(col).is_some()
                    && !self.is_pk_first(col)
                    && let Some(access) = self.single_access(p)
                {
                    used.insert((*i, *j));
                    break 'choose access;
                }
            }
            // 3. Text.
            for (i, j, p) in &all {
                if let Pred::Text { .. } = p
                    && let Some(access) = self.single_access(p)
                {
                    used.insert((*i, *j));
                    break 'choose access;
                }
            }
            // 4. Spatial (consumed when the index decides it exactly).
            for (i, j, p) in &all {
                if spatial_first == Some(false) {
                    break;
                }
                if let Pred::Spatial { exact, .. } = p
                    && let Some(access) = self.single_access(p)
                {
                    if *exact {
                        used.insert((*i, *j));
                    }
                    break 'choose access;
                }
            }
            // 4b. A union of probes (the filter stays above the scan).
            for (_, _, p) in &all {
                if let Pred::AnyOf(_) = p
                    && let Some(access) = self.single_access(p)
                {
                    break 'choose access;
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
            // 7. Then ranges and equality on a brin-indexed column (zone
            // maps): a second pass over the same columns.
            let passes = range_cols
                .iter()
                .map(|c| (c.clone(), false))
                .chain(range_cols.iter().map(|c| (c.clone(), true)));
            for (col, brin) in passes {
                let is_pk = self.is_pk_first(&col);
                if brin && is_pk {
                    continue;
                }
                let index = if is_pk {
                    None
                } else if brin {
                    self.brin_index(&col)
                } else {
                    self.btree_index(&col)
                };
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
    pub(crate) fn exactness(&self, f: &Expr) -> TableProviderFilterPushDown {
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
                || self.brin_index(col).is_some()
        };
        // Comparisons no path answers are still tried on stored records
        // (`crate::prefilter`); the filter stays above the scan.
        let tried = |col: &str| self.col(col).is_some_and(prefilter::comparable);
        match &f {
            Expr::BinaryExpr(BinaryExpr { left, op, right }) if CmpOp::from(*op).is_some() => {
                match col_const(left, right) {
                    Some(c) if cmp_ok(&c) => Exact,
                    Some(c) if tried(&c) => Inexact,
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
                Expr::Column(c) if is_const(low) && is_const(high) && tried(&c.name) => Inexact,
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
                // A probe per value; the list is checked above the scan.
                Expr::Column(c)
                    if !list.is_empty()
                        && list.iter().all(is_const)
                        && (self.is_pk_first(&c.name) || self.btree_index(&c.name).is_some()) =>
                {
                    Inexact
                }
                _ => Unsupported,
            },
            // A union of probes when every disjunct has one; the `OR` is
            // checked above the scan.
            Expr::BinaryExpr(BinaryExpr {
                op: Operator::Or, ..
            }) => {
                let mut leaves = Vec::new();
                or_leaves(&f, &mut leaves);
                if leaves.iter().all(|l| self.exactness(l) != Unsupported) {
                    Inexact
                } else {
                    Unsupported
                }
            }
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
            def: self.def.clone(),
            cols: self.cols.clone(),
            schema: self.schema.clone(),
            knn: self.knn.clone(),
            extremes: self.extremes,
        }
    }

    /// The same table, scanned only for the minimum and maximum of the
    /// columns it reads ([`crate::extremes`]).
    pub(crate) fn with_extremes(&self) -> SiltTable {
        SiltTable {
            extremes: true,
            ..self.duplicate()
        }
    }

    pub(crate) fn extremes(&self) -> bool {
        self.extremes
    }

    /// The brin or embedded index on `column`, whose zone maps know its
    /// smallest and largest values.
    pub(crate) fn zone_mapped(&self, column: &str) -> bool {
        self.ds.index_defs().into_iter().any(|d| {
            matches!(d.kind, IndexKind::Brin | IndexKind::Embedded)
                && d.fields.first().is_some_and(|f| f == column)
        })
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
        // What no path answers, tried on stored records first.
        let unanswered: Vec<Expr> = filters
            .iter()
            .zip(&consumed)
            .filter(|(_, c)| !**c)
            .map(|(f, _)| strip(f))
            .collect();
        let pre = PreFilter::of(&unanswered, &self.cols);
        let Some(pred) = conjunction(residual) else {
            let extremes = self.extremes && matches!(access, Access::Full) && limit.is_none();
            return Ok(Arc::new(
                SiltScanExec::new(
                    self.ds.clone(),
                    &self.cols,
                    requested,
                    access,
                    limit,
                    all_filters,
                )
                .with_extremes(extremes)
                .with_prefilter(pre),
            ));
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
        let scan = Arc::new(
            SiltScanExec::new(
                self.ds.clone(),
                &self.cols,
                needed.clone(),
                access,
                None,
                all_filters,
            )
            .with_prefilter(pre),
        );
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
/// unqualified), and an OR of equalities on one column as the IN list it
/// is (DataFusion writes an IN list of fewer than three values so).
pub fn strip(e: &Expr) -> Expr {
    let e = e
        .clone()
        .transform(|e| match e {
            Expr::Column(c) if c.relation.is_some() => Ok(Transformed::yes(Expr::Column(
                Column::new_unqualified(c.name),
            ))),
            other => Ok(Transformed::no(other)),
        })
        .map(|t| t.data)
        .unwrap_or_else(|_| e.clone());
    in_list_of_ors(&e).unwrap_or(e)
}

/// `c = a OR c = b OR ...` as `c IN (a, b, ...)`, if `e` is that.
fn in_list_of_ors(e: &Expr) -> Option<Expr> {
    fn leaves<'a>(e: &'a Expr, out: &mut Vec<&'a Expr>) {
        match e {
            Expr::BinaryExpr(BinaryExpr {
                left,
                op: Operator::Or,
                right,
            }) => {
                leaves(left, out);
                leaves(right, out);
            }
            other => out.push(other),
        }
    }
    if !matches!(
        e,
        Expr::BinaryExpr(BinaryExpr {
            op: Operator::Or,
            ..
        })
    ) {
        return None;
    }
    let mut all = Vec::new();
    leaves(e, &mut all);
    let mut col: Option<&Column> = None;
    let mut list = Vec::with_capacity(all.len());
    for leaf in all {
        let Expr::BinaryExpr(BinaryExpr {
            left,
            op: Operator::Eq,
            right,
        }) = leaf
        else {
            return None;
        };
        let (c, v) = match (left.as_ref(), right.as_ref()) {
            (Expr::Column(c), v) | (v, Expr::Column(c)) if is_const(v) => (c, v),
            _ => return None,
        };
        if col.is_some_and(|x| x != c) {
            return None;
        }
        col = Some(c);
        list.push(v.clone());
    }
    Some(Expr::InList(InList {
        expr: Box::new(Expr::Column(col?.clone())),
        list,
        negated: false,
    }))
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
pub(crate) fn const_scalar(e: &Expr) -> Option<ScalarValue> {
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

/// The parts of a constant multi-geometry (a multi-polygon, multi-point),
/// each one Silt's geometry; `None` for anything else.
pub fn const_geometry_parts(e: &Expr) -> Option<Vec<Geometry>> {
    let t = lit_text(e)?;
    let parts = geom::parse_any(&t).ok()?.silt_parts()?;
    (parts.len() > 1).then_some(parts)
}

/// The disjuncts of an `OR` tree.
fn or_leaves<'a>(e: &'a Expr, out: &mut Vec<&'a Expr>) {
    match e {
        Expr::BinaryExpr(BinaryExpr {
            left,
            op: Operator::Or,
            right,
        }) => {
            or_leaves(left, out);
            or_leaves(right, out);
        }
        other => out.push(other),
    }
}

/// What a text index is asked for `words`: all of them (keywords), or the
/// longest (n-grams; the others are checked on the rows).
fn text_query(kind: IndexKind, words: &[String]) -> String {
    if kind == IndexKind::Ngram {
        words
            .iter()
            .max_by_key(|w| w.chars().count())
            .cloned()
            .unwrap_or_default()
    } else {
        words.join(" ")
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
    /// Rows meeting any of these (an `OR`, a multi-part geometry, an `IN`
    /// list on an index): a union of probes, PostgreSQL's BitmapOr. The
    /// filter is still applied above the scan.
    AnyOf(Vec<Pred>),
}

/// How a scan reads the dataset.
#[derive(Clone, Debug, PartialEq)]
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
    /// The rows of each path, each row once (by primary key).
    AnyOf(Vec<Access>),
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
            Access::AnyOf(paths) => {
                write!(f, "any of {} paths [", paths.len())?;
                for (i, p) in paths.iter().enumerate() {
                    if i > 0 {
                        f.write_str("; ")?;
                    }
                    write!(f, "{p}")?;
                }
                f.write_str("]")
            }
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
        self.writable()?;
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
            def: self.def.clone(),
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
        self.writable()?;
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
            def: self.def.clone(),
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
        self.writable()?;
        let def = self.ds.def();
        let pk = def.primary_key.clone();
        let always = crate::identity::always(&def);
        for (c, _) in &assignments {
            if always.contains(&c.as_str()) {
                return Err(DataFusionError::External(Box::new(
                    crate::error::SqlError::GeneratedAlways {
                        column: c.clone(),
                        update: true,
                    },
                )));
            }
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
            def: self.def.clone(),
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

pub use crate::scan::{SiltScanExec, open_records, open_records_in};
