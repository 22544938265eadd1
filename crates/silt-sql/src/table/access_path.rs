//! The access path of a scan: the predicates a table recognizes in its
//! pushed filters (key comparisons, B+-tree ranges, text and spatial
//! functions, `OR`s and `IN` lists), and the one path it reads: a key get or
//! range, an index probe, a union of probes, a full scan; between a spatial
//! probe and a range, the one estimated to meet fewer entries.

use std::collections::HashSet;
use std::fmt;
use std::ops::Bound;

use datafusion::common::ScalarValue;
use datafusion::logical_expr::expr::InList;
use datafusion::logical_expr::{Between, BinaryExpr, Expr, Operator};
use silt::{Geometry, IndexKind, Query, Value};

use super::{
    KnnSpec, SiltTable, const_geometry, const_geometry_parts, const_scalar, lit_number, lit_text,
    strip,
};
use crate::convert;
use crate::udf::{self, Func};

impl SiltTable {
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
    pub(super) fn plan_access(&self, filters: &[Expr]) -> (Access, Vec<bool>) {
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
}

/// The disjuncts of an `OR` tree.
pub(super) fn or_leaves<'a>(e: &'a Expr, out: &mut Vec<&'a Expr>) {
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

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum CmpOp {
    Eq,
    Lt,
    Le,
    Gt,
    Ge,
}

impl CmpOp {
    pub(super) fn from(op: Operator) -> Option<CmpOp> {
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
pub(super) enum Pred {
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
