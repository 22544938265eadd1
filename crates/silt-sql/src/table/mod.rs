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

use std::collections::BTreeSet;
use std::fmt;
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
use silt::{Dataset, Geometry, IndexKind, WriteMode};

use crate::convert::{self, ColumnInfo};
use crate::geom;
use crate::prefilter::{self, PreFilter};
use crate::session::TxnSlot;
use crate::sink::{SiltSink, SinkOp};
use crate::udf::{self, Func};

mod access_path;
pub use access_path::Access;
use access_path::{CmpOp, or_leaves};

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
