//! Query rewriting to materialized views (Synergy, seed 004 §4.5).
//!
//! A query's inner joins along foreign keys are read from a materialized
//! view that holds them (`CREATE MATERIALIZED VIEW`, or one of
//! `silt::synergy::install`'s) instead of being joined:
//!
//! 1. [`ViewRule`] takes each cluster of inner equi-joins of the optimized
//!    plan apart: its inputs and its conditions. An input that is a plain
//!    Silt scan (aliased, filtered, projected) is a *relation* of the
//!    query; its join conditions are the query's marked edges.
//! 2. It looks for the views of those relations, longest first: a view
//!    matches a path of relations `r1 .. rk` of the query when each `ri+1`
//!    is joined to `ri` on exactly the view's foreign key (child's key
//!    fields = parent's primary key) and the view holds every column the
//!    query reads of them (a foreign-key field the view left out is read
//!    from the primary key it equals). Matches are taken while any is left,
//!    so a query gets its maximal paths as views, the same view twice if
//!    it joins that path twice.
//! 3. Each match becomes one scan of the view, with the relations' filters
//!    on the view's columns (so its primary key and indexes serve them),
//!    under a projection that names the columns as the query named them
//!    (`alias.column`). The other inputs are joined to it on the conditions
//!    left, and a final projection gives the cluster's own schema.
//!
//! The result is a [`ViewJoinNode`] holding both the joins as written and
//! the rewritten plan; the physical planner ([`ViewJoinPlanner`]) reads
//! the views unless the statement's transaction block has written one of
//! their relations (its view rows are made at commit, so the joins read
//! its own writes) or the session turned views off
//! (`SET silt.use_materialized_views = false`). `EXPLAIN` shows the node
//! (`MaterializedViews: ...`) and, in the physical plan, the scan of the
//! view.
//!
//! Why a view's rows are the join: a view has a row for each record of its
//! last relation whose parents up the chain all exist, built from them;
//! an inner join on the same keys pairs each such record with exactly
//! those parents (a key is unique) and drops the others; a null key
//! breaks both.

use std::collections::HashSet;
use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;
use datafusion::arrow::array::{RecordBatch, RecordBatchOptions};
use datafusion::arrow::datatypes::{DataType, SchemaRef};
use datafusion::catalog::Session;
use datafusion::common::config::ConfigExtension;
use datafusion::common::tree_node::{Transformed, TreeNode, TreeNodeRecursion};
use datafusion::common::{Column, DFSchema, JoinType, NullEquality, TableReference};
use datafusion::datasource::{TableProvider, provider_as_source};
use datafusion::error::{DataFusionError, Result as DfResult};
use datafusion::execution::TaskContext;
use datafusion::logical_expr::logical_plan::JoinConstraint;
use datafusion::logical_expr::physical_planning_context::PhysicalPlanningContext;
use datafusion::logical_expr::utils::conjunction;
use datafusion::logical_expr::{
    Cast, Expr, Extension, Filter, Join, LogicalPlan, Projection, TableProviderFilterPushDown,
    TableScan, TableScanBuilder, UserDefinedLogicalNode, UserDefinedLogicalNodeCore,
};
use datafusion::optimizer::{ApplyOrder, OptimizerConfig, OptimizerRule};
use datafusion::physical_expr::{EquivalenceProperties, PhysicalExpr};
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, ExecutionPlan, PlanProperties, SendableRecordBatchStream,
};
use datafusion::physical_planner::{ExtensionPlanner, PhysicalPlanner};
use futures::StreamExt;
use silt::{Database, Dataset, ForeignKeyDef, MaterializedDef};

use crate::rules::{as_silt, silt_table};
use crate::session::TxnSlot;
use crate::table::SiltTable;

datafusion::common::extensions_options! {
    /// Silt's settings of a SQL session: `SET silt.<name> = <value>`.
    pub struct SiltOptions {
        /// Whether a query's joins along foreign keys may be read from the
        /// materialized views that hold them (`false`: every join runs as
        /// written).
        pub use_materialized_views: bool, default = true
    }
}

impl ConfigExtension for SiltOptions {
    const PREFIX: &'static str = "silt";
}

/// See the module doc.
pub struct ViewRule {
    db: Arc<Database>,
}

impl fmt::Debug for ViewRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ViewRule")
    }
}

impl ViewRule {
    pub fn new(db: Arc<Database>) -> ViewRule {
        ViewRule { db }
    }
}

impl OptimizerRule for ViewRule {
    fn name(&self) -> &str {
        "silt_materialized_views"
    }

    fn apply_order(&self) -> Option<ApplyOrder> {
        Some(ApplyOrder::TopDown)
    }

    fn rewrite(
        &self,
        plan: LogicalPlan,
        _config: &dyn OptimizerConfig,
    ) -> DfResult<Transformed<LogicalPlan>> {
        if inner_join(&plan).is_none() || !self.db.has_materialized_views() {
            return Ok(Transformed::no(plan));
        }
        // The node's input is the rewritten plan, whose joins are left with
        // nothing a view answers: a later visit finds no match.
        match rewrite_cluster(&self.db, &plan) {
            Some(p) => Ok(Transformed::yes(p)),
            None => Ok(Transformed::no(plan)),
        }
    }
}

/// A join that can be taken apart with the others of its cluster.
fn inner_join(p: &LogicalPlan) -> Option<&Join> {
    match p {
        LogicalPlan::Join(j)
            if j.join_type == JoinType::Inner
                && j.null_equality == NullEquality::NullEqualsNothing
                && !j.null_aware =>
        {
            Some(j)
        }
        _ => None,
    }
}

/// The inputs and conditions of a cluster of inner joins.
#[derive(Default)]
struct Cluster {
    items: Vec<LogicalPlan>,
    on: Vec<(Expr, Expr)>,
    filters: Vec<Expr>,
}

impl Cluster {
    fn flatten(&mut self, p: &LogicalPlan) {
        // A projection that only drops columns between two joins (the
        // optimizer puts them there) is looked through: the cluster ends
        // with a projection to its own schema.
        if let LogicalPlan::Projection(pr) = p
            && inner_join(&pr.input).is_some()
            && plain_columns(pr)
        {
            return self.flatten(&pr.input);
        }
        match inner_join(p) {
            Some(j) => {
                self.flatten(&j.left);
                self.flatten(&j.right);
                self.on.extend(j.on.iter().cloned());
                self.filters.extend(j.filter.iter().cloned());
            }
            None => self.items.push(p.clone()),
        }
    }

    /// The input whose output has column `c`.
    fn item_of(&self, c: &Column) -> Option<usize> {
        let mut found = self
            .items
            .iter()
            .enumerate()
            .filter(|(_, p)| p.schema().has_column(c));
        let (i, _) = found.next()?;
        found.next().is_none().then_some(i)
    }

    /// `(input, field)` of a condition side that is a plain column.
    fn side(&self, e: &Expr) -> Option<(usize, String)> {
        match e {
            Expr::Column(c) => Some((self.item_of(c)?, c.name.clone())),
            _ => None,
        }
    }
}

/// A relation of the query: a plain scan of a Silt table.
struct Leaf {
    /// How the query names its columns.
    qualifier: TableReference,
    ds: Arc<Dataset>,
    /// The table's columns (the types of its fields).
    table_schema: SchemaRef,
    /// Its filters, on the table's fields (unqualified).
    filters: Vec<Expr>,
    /// The fields it yields, in order, with their types.
    fields: Vec<(String, DataType)>,
}

impl Leaf {
    /// Every field the query reads of the relation.
    fn reads(&self) -> Vec<String> {
        let mut out: Vec<String> = self.fields.iter().map(|(f, _)| f.clone()).collect();
        for f in &self.filters {
            for c in f.column_refs() {
                if !out.contains(&c.name) {
                    out.push(c.name.clone());
                }
            }
        }
        out
    }

    fn type_of(&self, field: &str) -> Option<DataType> {
        self.table_schema
            .field_with_name(field)
            .ok()
            .map(|f| f.data_type().clone())
    }
}

/// Whether a projection only picks columns, under their own names.
fn plain_columns(pr: &Projection) -> bool {
    pr.expr
        .iter()
        .zip(pr.schema.columns())
        .all(|(e, out)| matches!(e, Expr::Column(c) if *c == out))
}

fn has_subquery(e: &Expr) -> bool {
    e.exists(|x| {
        Ok(matches!(
            x,
            Expr::ScalarSubquery(_)
                | Expr::InSubquery(_)
                | Expr::Exists(_)
                | Expr::OuterReferenceColumn(..)
        ))
    })
    .unwrap_or(true)
}

/// `plan` as a relation, if it is a scan of a Silt table under filters,
/// column projections and one alias.
fn leaf(plan: &LogicalPlan) -> Option<Leaf> {
    let mut filters = Vec::new();
    let mut qualifier = None;
    let mut p = plan;
    let scan: &TableScan = loop {
        match p {
            LogicalPlan::Filter(f) => {
                filters.push(f.predicate.clone());
                p = &f.input;
            }
            LogicalPlan::SubqueryAlias(a) if qualifier.is_none() => {
                qualifier = Some(a.alias.clone());
                p = &a.input;
            }
            LogicalPlan::Projection(pr) if plain_columns(pr) => p = &pr.input,
            LogicalPlan::TableScan(s) => break s,
            _ => return None,
        }
    };
    if scan.fetch.is_some() {
        return None;
    }
    let provider = silt_table(scan)?;
    let table = as_silt(&provider)?;
    if table.knn().is_some() {
        return None;
    }
    filters.extend(scan.filters.iter().cloned());
    if filters.iter().any(has_subquery) {
        return None;
    }
    let ds = table.dataset().clone();
    let def = ds.def();
    let declared = |f: &str| def.fields.iter().any(|(n, _)| n == f);
    let fields: Vec<(String, DataType)> = plan
        .schema()
        .fields()
        .iter()
        .map(|f| (f.name().clone(), f.data_type().clone()))
        .collect();
    let filters: Vec<Expr> = filters.iter().map(crate::table::strip).collect();
    let leaf = Leaf {
        qualifier: qualifier.unwrap_or_else(|| scan.table_name.clone()),
        ds: ds.clone(),
        table_schema: provider.schema(),
        filters,
        fields,
    };
    leaf.reads().iter().all(|f| declared(f)).then_some(leaf)
}

/// A view and what its chain's keys are.
struct ViewShape {
    view: Arc<Dataset>,
    def: MaterializedDef,
    /// `fks[i]`: relation `i + 1`'s key on relation `i`.
    fks: Vec<ForeignKeyDef>,
    /// The primary key of each relation.
    pks: Vec<Vec<String>>,
}

impl ViewShape {
    fn of(db: &Database, view: Arc<Dataset>) -> Option<ViewShape> {
        let def = view.def().materialized.clone()?;
        let mut fks = Vec::new();
        for (i, name) in def.keys.iter().enumerate() {
            let child = db.dataset(def.relations.get(i + 1)?).ok()?.def();
            fks.push(child.foreign_keys.iter().find(|f| f.name == *name)?.clone());
        }
        let pks = def
            .relations
            .iter()
            .map(|r| db.dataset(r).ok().map(|d| d.def().primary_key.clone()))
            .collect::<Option<Vec<_>>>()?;
        Some(ViewShape {
            view,
            def,
            fks,
            pks,
        })
    }

    /// The view's column holding `field` of relation `level`: its own, or
    /// the one of a key field it equals along the chain (a child's key
    /// field is its parent's primary-key field in every view row).
    fn column(&self, level: usize, field: &str) -> Option<String> {
        self.column_dir(level, field, true)
            .or_else(|| self.column_dir(level, field, false))
    }

    fn column_dir(&self, level: usize, field: &str, up: bool) -> Option<String> {
        let rel = self.def.relations.get(level)?;
        if let Some(c) = self.def.column(rel, field) {
            return Some(c.to_owned());
        }
        if up {
            let fk = self.fks.get(level.checked_sub(1)?)?;
            let j = fk.fields.iter().position(|f| f == field)?;
            let pk = self.pks.get(level - 1)?.get(j)?;
            self.column_dir(level - 1, pk, true)
        } else {
            let fk = self.fks.get(level)?;
            let j = self.pks.get(level)?.iter().position(|f| f == field)?;
            self.column_dir(level + 1, fk.fields.get(j)?, false)
        }
    }
}

/// A path of the query's relations read from one view.
struct Match<'a> {
    shape: &'a ViewShape,
    /// The cluster input of each relation of the chain.
    items: Vec<usize>,
    /// The conditions (`Cluster::on`) the view's keys answer.
    pairs: Vec<usize>,
}

struct Matcher<'a> {
    cluster: &'a Cluster,
    leaves: &'a [Option<Leaf>],
    used_items: HashSet<usize>,
    used_pairs: HashSet<usize>,
}

impl Matcher<'_> {
    /// A path of unused relations the view answers.
    fn find<'s>(&self, shape: &'s ViewShape) -> Option<Match<'s>> {
        let mut m = Match {
            shape,
            items: Vec::new(),
            pairs: Vec::new(),
        };
        self.extend(&mut m).then_some(m)
    }

    fn extend(&self, m: &mut Match) -> bool {
        let level = m.items.len();
        let Some(rel) = m.shape.def.relations.get(level) else {
            return true;
        };
        for (i, leaf) in self.leaves.iter().enumerate() {
            let Some(leaf) = leaf else { continue };
            if leaf.ds.name() != rel || self.used_items.contains(&i) || m.items.contains(&i) {
                continue;
            }
            if !leaf
                .reads()
                .iter()
                .all(|f| m.shape.column(level, f).is_some())
            {
                continue;
            }
            let mut pairs = Vec::new();
            if let Some(&parent) = m.items.last() {
                let (fk, pk) = (&m.shape.fks[level - 1], &m.shape.pks[level - 1]);
                if fk.fields.len() != pk.len() {
                    return false;
                }
                for (cf, pf) in fk.fields.iter().zip(pk) {
                    let want = [(i, cf.clone()), (parent, pf.clone())];
                    let found = self.cluster.on.iter().enumerate().find(|(p, (l, r))| {
                        if self.used_pairs.contains(p) || m.pairs.contains(p) || pairs.contains(p) {
                            return false;
                        }
                        let (Some(l), Some(r)) = (self.cluster.side(l), self.cluster.side(r))
                        else {
                            return false;
                        };
                        (l == want[0] && r == want[1]) || (l == want[1] && r == want[0])
                    });
                    match found {
                        Some((p, _)) => pairs.push(p),
                        None => break,
                    }
                }
                if pairs.len() != fk.fields.len() {
                    continue;
                }
            }
            let mark = m.pairs.len();
            m.items.push(i);
            m.pairs.extend(pairs);
            if self.extend(m) {
                return true;
            }
            m.items.pop();
            m.pairs.truncate(mark);
        }
        false
    }
}

/// The cluster under `plan` with the views' paths read from them, as a
/// [`ViewJoinNode`]; `None` when no view answers any of it.
fn rewrite_cluster(db: &Database, plan: &LogicalPlan) -> Option<LogicalPlan> {
    let mut cluster = Cluster::default();
    cluster.flatten(plan);
    let leaves: Vec<Option<Leaf>> = cluster.items.iter().map(leaf).collect();
    // The views of the query's relations, longest first.
    let mut names: Vec<String> = Vec::new();
    for l in leaves.iter().flatten() {
        for v in db.views_of(l.ds.name()) {
            if !names.contains(&v) {
                names.push(v);
            }
        }
    }
    if names.is_empty() {
        return None;
    }
    let mut shapes: Vec<ViewShape> = names
        .into_iter()
        .filter_map(|n| ViewShape::of(db, db.dataset(&n).ok()?))
        .collect();
    shapes.sort_by(|a, b| {
        b.def
            .relations
            .len()
            .cmp(&a.def.relations.len())
            .then_with(|| a.view.name().cmp(b.view.name()))
    });
    let mut matcher = Matcher {
        cluster: &cluster,
        leaves: &leaves,
        used_items: HashSet::new(),
        used_pairs: HashSet::new(),
    };
    let mut matches = Vec::new();
    for shape in &shapes {
        while let Some(m) = matcher.find(shape) {
            matcher.used_items.extend(m.items.iter().copied());
            matcher.used_pairs.extend(m.pairs.iter().copied());
            matches.push(m);
        }
    }
    if matches.is_empty() {
        return None;
    }
    match rebuild(&cluster, &leaves, &matches, plan) {
        Ok(rewritten) => {
            let mut views: Vec<String> = Vec::new();
            let mut tables: Vec<String> = Vec::new();
            let mut relations: Vec<u32> = Vec::new();
            for m in &matches {
                views.push(m.shape.view.name().to_owned());
                for i in &m.items {
                    if let Some(l) = &leaves[*i] {
                        relations.push(l.ds.id());
                        if !tables.iter().any(|t| t == l.ds.name()) {
                            tables.push(l.ds.name().to_owned());
                        }
                    }
                }
            }
            relations.sort_unstable();
            relations.dedup();
            Some(LogicalPlan::Extension(Extension {
                node: Arc::new(ViewJoinNode {
                    views,
                    tables,
                    relations,
                    joins: plan.clone(),
                    rewritten,
                }),
            }))
        }
        // A rewrite that cannot be planned leaves the joins as written.
        Err(_) => None,
    }
}

/// The scan of a match's view, with its relations' columns named as the
/// query names them.
fn view_plan(m: &Match, leaves: &[Option<Leaf>]) -> DfResult<LogicalPlan> {
    let shape = m.shape;
    let provider: Arc<dyn TableProvider> = Arc::new(SiltTable::new(shape.view.clone()));
    let schema = provider.schema();
    let vname = TableReference::bare(shape.view.name());
    let missing = |f: &str| {
        DataFusionError::Internal(format!(
            "view `{}` lost the column for `{f}`",
            shape.view.name()
        ))
    };
    let relation = |level: usize| -> DfResult<&Leaf> {
        m.items
            .get(level)
            .and_then(|i| leaves.get(*i)?.as_ref())
            .ok_or_else(|| DataFusionError::Internal("a match without its relation".into()))
    };
    // A relation's field as a view column, of the field's type.
    let read = |level: usize, field: &str, ty: &DataType| -> DfResult<Expr> {
        let vc = shape.column(level, field).ok_or_else(|| missing(field))?;
        let e = Expr::Column(Column::new(Some(vname.clone()), vc.clone()));
        let vt = schema
            .field_with_name(&vc)
            .map_err(|_| missing(field))?
            .data_type();
        Ok(if vt == ty {
            e
        } else {
            Expr::Cast(Cast::new(Box::new(e), ty.clone()))
        })
    };
    let mut filters: Vec<Expr> = Vec::new();
    let mut out: Vec<Expr> = Vec::new();
    for level in 0..m.items.len() {
        let leaf = relation(level)?;
        for f in &leaf.filters {
            let mapped = f
                .clone()
                .transform(|e| match e {
                    Expr::Column(c) => {
                        let ty = leaf.type_of(&c.name).ok_or_else(|| missing(&c.name))?;
                        Ok(Transformed::yes(read(level, &c.name, &ty)?))
                    }
                    other => Ok(Transformed::no(other)),
                })?
                .data;
            filters.push(mapped);
        }
        for (f, ty) in &leaf.fields {
            out.push(read(level, f, ty)?.alias_qualified(Some(leaf.qualifier.clone()), f));
        }
    }
    let refs: Vec<&Expr> = filters.iter().collect();
    let support = provider.supports_filters_pushdown(&refs)?;
    let (mut pushed, mut above) = (Vec::new(), Vec::new());
    for (f, s) in filters.iter().zip(support) {
        match s {
            TableProviderFilterPushDown::Exact => pushed.push(f.clone()),
            TableProviderFilterPushDown::Inexact => {
                pushed.push(f.clone());
                above.push(f.clone());
            }
            TableProviderFilterPushDown::Unsupported => above.push(f.clone()),
        }
    }
    // The view's columns the projection and the filters above read.
    let mut needed: Vec<usize> = Vec::new();
    for e in out.iter().chain(&above) {
        for c in e.column_refs() {
            let i = schema.index_of(&c.name).map_err(|_| missing(&c.name))?;
            if !needed.contains(&i) {
                needed.push(i);
            }
        }
    }
    needed.sort_unstable();
    let scan = TableScanBuilder::new(vname, provider_as_source(provider))
        .with_projection(Some(needed))
        .with_filters(pushed)
        .build()?;
    let mut plan = LogicalPlan::TableScan(scan);
    if let Some(p) = conjunction(above) {
        plan = LogicalPlan::Filter(Filter::try_new(p, Arc::new(plan))?);
    }
    Ok(LogicalPlan::Projection(Projection::try_new(
        out,
        Arc::new(plan),
    )?))
}

/// Whether every column `e` reads is in `schema` (and it reads one).
fn reads_from(e: &Expr, schema: &DFSchema) -> bool {
    let refs = e.column_refs();
    !refs.is_empty() && refs.iter().all(|c| schema.has_column(c))
}

/// The cluster again: the views' scans and the other inputs joined on the
/// conditions the views did not answer, as `original`'s schema.
fn rebuild(
    cluster: &Cluster,
    leaves: &[Option<Leaf>],
    matches: &[Match],
    original: &LogicalPlan,
) -> DfResult<LogicalPlan> {
    // Each part where its first input was, so the join order stays near
    // the written one.
    let mut parts: Vec<(usize, LogicalPlan)> = Vec::new();
    let mut used = HashSet::new();
    let mut consumed = HashSet::new();
    for m in matches {
        let first = m.items.iter().copied().min().unwrap_or(0);
        parts.push((first, view_plan(m, leaves)?));
        used.extend(m.items.iter().copied());
        consumed.extend(m.pairs.iter().copied());
    }
    for (i, item) in cluster.items.iter().enumerate() {
        if !used.contains(&i) {
            parts.push((i, item.clone()));
        }
    }
    parts.sort_by_key(|(i, _)| *i);
    let mut pairs: Vec<(Expr, Expr)> = cluster
        .on
        .iter()
        .enumerate()
        .filter(|(i, _)| !consumed.contains(i))
        .map(|(_, p)| p.clone())
        .collect();
    let mut parts = parts.into_iter().map(|(_, p)| p).collect::<Vec<_>>();
    let mut acc = parts.remove(0);
    while !parts.is_empty() {
        // The next part joined to what is built, else the next one.
        let connects = |p: &LogicalPlan, (l, r): &(Expr, Expr)| {
            (reads_from(l, acc.schema()) && reads_from(r, p.schema()))
                || (reads_from(r, acc.schema()) && reads_from(l, p.schema()))
        };
        let pos = parts
            .iter()
            .position(|p| pairs.iter().any(|c| connects(p, c)))
            .unwrap_or(0);
        let right = parts.remove(pos);
        let mut on = Vec::new();
        let mut rest = Vec::new();
        for (l, r) in pairs {
            if reads_from(&l, acc.schema()) && reads_from(&r, right.schema()) {
                on.push((l, r));
            } else if reads_from(&r, acc.schema()) && reads_from(&l, right.schema()) {
                on.push((r, l));
            } else {
                rest.push((l, r));
            }
        }
        pairs = rest;
        acc = LogicalPlan::Join(Join::try_new(
            Arc::new(acc),
            Arc::new(right),
            on,
            None,
            JoinType::Inner,
            JoinConstraint::On,
            NullEquality::NullEqualsNothing,
            false,
        )?);
    }
    let residue: Vec<Expr> = pairs
        .into_iter()
        .map(|(l, r)| l.eq(r))
        .chain(cluster.filters.iter().cloned())
        .collect();
    if let Some(p) = conjunction(residue) {
        acc = LogicalPlan::Filter(Filter::try_new(p, Arc::new(acc))?);
    }
    let cols: Vec<Expr> = original
        .schema()
        .columns()
        .into_iter()
        .map(Expr::Column)
        .collect();
    Ok(LogicalPlan::Projection(Projection::try_new(
        cols,
        Arc::new(acc),
    )?))
}

/// A cluster of joins read from materialized views (see the module doc):
/// its input is the plan on the views; the joins as written are kept
/// beside it, optimized, for the physical planner to pick instead. They
/// are not an input, so no later optimizer pass rewrites them again, and
/// [`map_kept_joins`] reaches them where a walk of the inputs does not.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd)]
pub struct ViewJoinNode {
    views: Vec<String>,
    /// The tables the views stand for, by name and by dataset id.
    tables: Vec<String>,
    relations: Vec<u32>,
    joins: LogicalPlan,
    rewritten: LogicalPlan,
}

impl UserDefinedLogicalNodeCore for ViewJoinNode {
    fn name(&self) -> &str {
        "MaterializedViews"
    }

    fn inputs(&self) -> Vec<&LogicalPlan> {
        vec![&self.rewritten]
    }

    fn schema(&self) -> &datafusion::common::DFSchemaRef {
        self.joins.schema()
    }

    fn expressions(&self) -> Vec<Expr> {
        vec![]
    }

    fn fmt_for_explain(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(
            f,
            "MaterializedViews: view={} for the joins of {} (the joins when the transaction wrote those tables)",
            self.views.join(","),
            self.tables.join(", ")
        )
    }

    fn with_exprs_and_inputs(&self, _exprs: Vec<Expr>, inputs: Vec<LogicalPlan>) -> DfResult<Self> {
        let [rewritten]: [LogicalPlan; 1] = inputs
            .try_into()
            .map_err(|_| DataFusionError::Internal("MaterializedViews takes one input".into()))?;
        Ok(ViewJoinNode {
            rewritten,
            ..self.clone()
        })
    }
}

/// The joins as written that `node` stands for, if it is a
/// [`ViewJoinNode`].
pub fn kept_joins(node: &dyn UserDefinedLogicalNode) -> Option<&LogicalPlan> {
    node.as_any()
        .downcast_ref::<ViewJoinNode>()
        .map(|n| &n.joins)
}

/// `plan` with `f` applied to the joins its [`ViewJoinNode`]s keep (as
/// binding a cached plan's parameters must); `None` when `f` fails on one.
pub fn map_kept_joins(
    plan: LogicalPlan,
    f: &dyn Fn(&LogicalPlan) -> Option<LogicalPlan>,
) -> Option<LogicalPlan> {
    let mut ok = true;
    let out = plan
        .transform_up(|p| {
            let LogicalPlan::Extension(e) = &p else {
                return Ok(Transformed::no(p));
            };
            let Some(n) = e.node.as_any().downcast_ref::<ViewJoinNode>() else {
                return Ok(Transformed::no(p));
            };
            match f(&n.joins) {
                Some(joins) => Ok(Transformed::yes(LogicalPlan::Extension(Extension {
                    node: Arc::new(ViewJoinNode { joins, ..n.clone() }),
                }))),
                None => {
                    ok = false;
                    Ok(Transformed::no(p))
                }
            }
        })
        .ok()?
        .data;
    ok.then_some(out)
}

/// Plans a [`ViewJoinNode`] as one of its inputs: the views, unless the
/// statement's transaction wrote one of their relations or the session
/// set `silt.use_materialized_views` off.
#[derive(Debug, Default)]
pub struct ViewJoinPlanner;

#[async_trait]
impl ExtensionPlanner for ViewJoinPlanner {
    async fn plan_extension(
        &self,
        planner: &dyn PhysicalPlanner,
        node: &dyn UserDefinedLogicalNode,
        _logical_inputs: &[&LogicalPlan],
        physical_inputs: &[Arc<dyn ExecutionPlan>],
        session: &dyn Session,
        _planning_ctx: &PhysicalPlanningContext,
    ) -> DfResult<Option<Arc<dyn ExecutionPlan>>> {
        let Some(n) = node.as_any().downcast_ref::<ViewJoinNode>() else {
            return Ok(None);
        };
        let [views] = physical_inputs else {
            return Err(DataFusionError::Internal(
                "MaterializedViews takes one input".into(),
            ));
        };
        let config = session.config();
        let on = config
            .options()
            .extensions
            .get::<SiltOptions>()
            .is_none_or(|o| o.use_materialized_views);
        let wrote = TxnSlot::of(config).is_some_and(|t| t.wrote_any(&n.relations));
        if on && !wrote {
            return Ok(Some(Arc::new(ViewsExec::new(
                views.clone(),
                Arc::new(n.joins.schema().as_arrow().clone()),
                n.views.join(","),
            ))));
        }
        Ok(Some(planner.create_physical_plan(&n.joins, session).await?))
    }
}

/// The plan on the views under the schema of the joins it stands for:
/// the same columns, and one the joins never leave null (a key) is
/// declared so here too: the view's copy of it is never null either, a
/// view row being made of records that exist. Batches pass through.
struct ViewsExec {
    input: Arc<dyn ExecutionPlan>,
    schema: SchemaRef,
    views: String,
    props: Arc<PlanProperties>,
}

impl fmt::Debug for ViewsExec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ViewsExec({})", self.views)
    }
}

impl ViewsExec {
    fn new(input: Arc<dyn ExecutionPlan>, schema: SchemaRef, views: String) -> ViewsExec {
        let p = input.properties();
        let props = PlanProperties::new(
            EquivalenceProperties::new(schema.clone()),
            p.partitioning.clone(),
            p.emission_type,
            p.boundedness,
        );
        ViewsExec {
            input,
            schema,
            views,
            props: Arc::new(props),
        }
    }
}

impl DisplayAs for ViewsExec {
    fn fmt_as(&self, _t: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "MaterializedViewsExec: view={}", self.views)
    }
}

impl ExecutionPlan for ViewsExec {
    fn name(&self) -> &str {
        "MaterializedViewsExec"
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        &self.props
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        vec![&self.input]
    }

    fn apply_expressions(
        &self,
        _f: &mut dyn FnMut(&Arc<dyn PhysicalExpr>) -> DfResult<TreeNodeRecursion>,
    ) -> DfResult<TreeNodeRecursion> {
        Ok(TreeNodeRecursion::Continue)
    }

    fn with_new_children(
        self: Arc<Self>,
        children: Vec<Arc<dyn ExecutionPlan>>,
    ) -> DfResult<Arc<dyn ExecutionPlan>> {
        let Some(input) = children.into_iter().next() else {
            return Err(DataFusionError::Internal(
                "MaterializedViewsExec takes one child".into(),
            ));
        };
        Ok(Arc::new(ViewsExec::new(
            input,
            self.schema.clone(),
            self.views.clone(),
        )))
    }

    fn execute(
        &self,
        partition: usize,
        context: Arc<TaskContext>,
    ) -> DfResult<SendableRecordBatchStream> {
        let input = self.input.execute(partition, context)?;
        let schema = self.schema.clone();
        let out = schema.clone();
        let relabel = move |b: DfResult<RecordBatch>| {
            let b = b?;
            let opts = RecordBatchOptions::new().with_row_count(Some(b.num_rows()));
            Ok(RecordBatch::try_new_with_options(
                schema.clone(),
                b.columns().to_vec(),
                &opts,
            )?)
        };
        Ok(Box::pin(RecordBatchStreamAdapter::new(
            out,
            input.map(relabel),
        )))
    }
}
