//! PostgreSQL idioms of client catalog queries, rewritten into SQL
//! DataFusion plans, before planning:
//!
//! - `pg_catalog.f(...)` -> `f(...)` (the catalog's functions are
//!   registered by their bare names);
//! - `a OPERATOR(pg_catalog.~) b` -> `a ~ b` (any operator DataFusion has);
//! - `x COLLATE "C"` / `COLLATE pg_catalog.default` -> `x` (Silt compares
//!   text by its bytes, which is collation `C`);
//! - casts to `regclass`, `regtype`, `regnamespace`: of a string literal
//!   to the object's oid (`'t'::regclass` -> `silt_regclass_oid('t')`), of
//!   anything else to the object's name, which is how such a value shows;
//!   `::oid` -> `::bigint`; `pg_catalog.text` and PostgreSQL's internal type
//!   names (`name`, `"char"`, `int2`...) to their SQL types;
//! - `ARRAY(SELECT e FROM ...)` -> `(SELECT array_agg(e) FROM ...)`
//!   (an empty result is NULL rather than `{}`);
//! - `FROM pg_catalog.unnest(a) x` -> DataFusion's `UNNEST`, its column
//!   named `x`; `generate_subscripts(a, d)` -> the unnested series
//!   `1..array_length(a, d)`;
//! - `LIKE p ESCAPE '/'` -> `LIKE` with `/` in `p` turned into `\`;
//! - `SHOW server_version` (and the other settings clients ask for) -> a
//!   query of the value.
//!
//! A statement that reads the catalog ([`reads_catalog`]) also gets:
//! - [`aggregate_subqueries`]: scalar subqueries that DataFusion plans only
//!   aggregated, aggregated with PostgreSQL's meaning kept, and `EXISTS`
//!   as a count;
//! - [`empty_blocks`]: a `SELECT` block that inner-joins a relation Silt
//!   always keeps empty (policies, publications, inheritance...) has no
//!   rows, so it is replaced by a block of the same output names with
//!   none (such blocks use features DataFusion lacks).

use std::ops::ControlFlow;

use datafusion::sql::sqlparser::ast::helpers::attached_token::AttachedToken;

use datafusion::sql::sqlparser::ast::{
    ArrayElemTypeDef, BinaryOperator, CaseWhen, CastKind, DataType, Expr, Function, FunctionArg,
    FunctionArgExpr, FunctionArgumentList, FunctionArguments, GroupByExpr, Ident, JoinOperator,
    ObjectName, ObjectNamePart, Query, Select, SelectItem, SetExpr, Statement, TableAliasColumnDef,
    TableFactor, TableWithJoins, Value, Visit, VisitMut, Visitor, VisitorMut,
};

/// Apply the rewrites to a statement.
pub fn rewrite(stmt: &mut Statement) {
    if let Some(q) = show(stmt) {
        *stmt = q;
        return;
    }
    let _ = stmt.visit(&mut Rewriter);
}

/// `SHOW server_version` (and the other settings of
/// [`super::rows::SETTINGS`], `SHOW transaction isolation level`) as a
/// query of the value, in a column named as the setting.
fn show(stmt: &Statement) -> Option<Statement> {
    let Statement::ShowVariable { variable } = stmt else {
        return None;
    };
    let words: Vec<String> = variable.iter().map(|i| i.value.to_lowercase()).collect();
    let name = match words.join(" ").as_str() {
        "transaction isolation level" | "transaction_isolation" => "transaction_isolation",
        other => other,
    }
    .to_owned();
    let value = if name == "transaction_isolation" {
        "read committed"
    } else {
        super::rows::SETTINGS
            .iter()
            .find(|(n, _, _)| n.eq_ignore_ascii_case(&name))?
            .1
    };
    let sql = format!(
        "SELECT '{}' AS \"{}\"",
        value.replace('\'', "''"),
        name.replace('"', "\"\"")
    );
    let mut parsed = datafusion::sql::sqlparser::parser::Parser::parse_sql(
        &datafusion::sql::sqlparser::dialect::GenericDialect {},
        &sql,
    )
    .ok()?;
    parsed.pop()
}

struct Rewriter;

impl VisitorMut for Rewriter {
    type Break = ();

    fn post_visit_expr(&mut self, expr: &mut Expr) -> ControlFlow<()> {
        if let Some(new) = rewritten(expr) {
            *expr = new;
        }
        ControlFlow::Continue(())
    }

    fn pre_visit_table_factor(&mut self, t: &mut TableFactor) -> ControlFlow<()> {
        // `FROM pg_catalog.unnest(a) x`: DataFusion's UNNEST, its column
        // named as the alias (PostgreSQL names a function's one column so).
        if let TableFactor::Table {
            name,
            args: Some(args),
            alias,
            ..
        } = t
        {
            let parts = name_parts(name);
            let bare = match parts.as_slice() {
                [f] | [_, f] if parts.len() == 1 || parts[0] == "pg_catalog" => f.clone(),
                _ => return ControlFlow::Continue(()),
            };
            if bare == "unnest" {
                let array_exprs = args
                    .args
                    .iter()
                    .filter_map(|a| match a {
                        FunctionArg::Unnamed(FunctionArgExpr::Expr(e)) => Some(e.clone()),
                        _ => None,
                    })
                    .collect();
                let alias = alias.take().map(|mut a| {
                    if a.columns.is_empty() {
                        a.columns = vec![TableAliasColumnDef {
                            name: a.name.clone(),
                            data_type: None,
                        }];
                    }
                    a
                });
                *t = TableFactor::UNNEST {
                    alias,
                    array_exprs,
                    with_offset: false,
                    with_offset_alias: None,
                    with_ordinality: false,
                };
            } else if parts.len() == 2
                && let Some(last) = name.0.pop()
            {
                *name = ObjectName(vec![last]);
            }
        }
        ControlFlow::Continue(())
    }
}

/// Whether a statement reads a `pg_catalog` relation (by a qualified
/// name, or an unqualified one of a catalog relation's names).
pub fn reads_catalog(stmt: &mut Statement) -> bool {
    struct Finder(bool);
    impl VisitorMut for Finder {
        type Break = ();
        fn pre_visit_relation(&mut self, name: &mut ObjectName) -> ControlFlow<()> {
            let parts = name_parts(name);
            let hit = match parts.as_slice() {
                [schema, _] => schema == "pg_catalog",
                [t] => super::columns::RELATIONS.iter().any(|(n, _, _)| n == t),
                _ => false,
            };
            if hit {
                self.0 = true;
                return ControlFlow::Break(());
            }
            ControlFlow::Continue(())
        }
    }
    let mut f = Finder(false);
    let _ = stmt.visit(&mut f);
    f.0
}

/// Rewrites for subqueries DataFusion does not plan, used on statements
/// that read the catalog: one over a relation Silt keeps empty is NULL
/// (`EXISTS`: false); a scalar subquery that does not aggregate
/// takes its value through `silt_single` (see [`super::single`]), and
/// `EXISTS (q)` becomes `(SELECT count(*) ...) > 0`. `false` when there
/// was nothing to rewrite.
pub fn aggregate_subqueries(stmt: &mut Statement) -> bool {
    let mut v = Subqueries { changed: false };
    let _ = stmt.visit(&mut v);
    v.changed
}

struct Subqueries {
    changed: bool,
}

/// A plain `SELECT` block of `q` that neither aggregates nor limits.
fn plain_select(q: &mut Query) -> Option<&mut Select> {
    if q.limit_clause.is_some() || q.fetch.is_some() {
        return None;
    }
    let SetExpr::Select(sel) = q.body.as_mut() else {
        return None;
    };
    if sel.distinct.is_some() || sel.having.is_some() || aggregates(sel) {
        return None;
    }
    Some(sel)
}

impl VisitorMut for Subqueries {
    type Break = ();

    fn post_visit_expr(&mut self, expr: &mut Expr) -> ControlFlow<()> {
        match expr {
            Expr::Subquery(q) | Expr::Exists { subquery: q, .. }
                if matches!(q.body.as_ref(), SetExpr::Select(sel)
                    if inner_joins_empty(&sel.from) && !aggregates(sel)) =>
            {
                // Over a relation Silt keeps empty: no rows.
                *expr = match expr {
                    Expr::Exists { negated, .. } => Expr::value(Value::Boolean(*negated)),
                    _ => Expr::value(Value::Null),
                };
                self.changed = true;
            }
            Expr::Subquery(q) => {
                let mut outside = None;
                if let Some(sel) = plain_select(q)
                    && let [item] = sel.projection.as_mut_slice()
                {
                    let e = match item {
                        SelectItem::UnnamedExpr(e) | SelectItem::ExprWithAlias { expr: e, .. } => e,
                        _ => return ControlFlow::Continue(()),
                    };
                    *e = func("silt_single", vec![e.clone()]);
                    outside = super::correlate::untangle(sel);
                    q.order_by = None;
                    self.changed = true;
                }
                if let Some(cond) = outside {
                    *expr = Expr::Case {
                        case_token: AttachedToken::empty(),
                        end_token: AttachedToken::empty(),
                        operand: None,
                        conditions: vec![CaseWhen {
                            condition: cond,
                            result: expr.clone(),
                        }],
                        else_result: None,
                    };
                }
            }
            Expr::Exists { subquery, negated } => {
                let mut q = (**subquery).clone();
                if let Some(sel) = plain_select(&mut q) {
                    sel.projection = vec![SelectItem::UnnamedExpr(func(
                        "count",
                        vec![Expr::value(Value::Number("1".to_owned(), false))],
                    ))];
                    q.order_by = None;
                    *expr = Expr::BinaryOp {
                        left: Box::new(Expr::Subquery(Box::new(q))),
                        op: if *negated {
                            BinaryOperator::Eq
                        } else {
                            BinaryOperator::Gt
                        },
                        right: Box::new(Expr::value(Value::Number("0".to_owned(), false))),
                    };
                    self.changed = true;
                }
            }
            _ => {}
        }
        ControlFlow::Continue(())
    }
}

fn name_parts(n: &ObjectName) -> Vec<String> {
    n.0.iter()
        .map(|p| match p {
            ObjectNamePart::Identifier(i) => i.value.to_lowercase(),
            other => other.to_string().to_lowercase(),
        })
        .collect()
}

pub(super) fn func(name: &str, args: Vec<Expr>) -> Expr {
    Expr::Function(Function {
        name: ObjectName(vec![ObjectNamePart::Identifier(Ident::new(name))]),
        uses_odbc_syntax: false,
        parameters: FunctionArguments::None,
        args: FunctionArguments::List(FunctionArgumentList {
            duplicate_treatment: None,
            args: args
                .into_iter()
                .map(|e| FunctionArg::Unnamed(FunctionArgExpr::Expr(e)))
                .collect(),
            clauses: vec![],
        }),
        filter: None,
        null_treatment: None,
        over: None,
        within_group: vec![],
    })
}

fn cast(expr: Expr, data_type: DataType) -> Expr {
    Expr::Cast {
        kind: CastKind::Cast,
        expr: Box::new(expr),
        data_type,
        array: false,
        format: None,
    }
}

fn is_string_literal(e: &Expr) -> bool {
    matches!(
        e,
        Expr::Value(v) if matches!(
            v.value,
            Value::SingleQuotedString(_) | Value::EscapedStringLiteral(_)
        )
    )
}

/// The last part of a PostgreSQL type name, when it is one this module
/// rewrites casts to.
fn pg_type_name(dt: &DataType) -> Option<String> {
    match dt {
        DataType::Regclass => Some("regclass".to_owned()),
        DataType::Custom(name, _) => {
            let parts = name_parts(name);
            match parts.as_slice() {
                [t] => Some(t.clone()),
                [schema, t] if schema == "pg_catalog" => Some(t.clone()),
                _ => None,
            }
        }
        _ => None,
    }
}

fn rewritten(expr: &mut Expr) -> Option<Expr> {
    match expr {
        Expr::Function(f) => {
            let parts = name_parts(&f.name);
            if parts.len() == 2 && parts[0] == "pg_catalog" {
                let last = f.name.0.pop()?;
                f.name = ObjectName(vec![last]);
            }
            // generate_subscripts(a, d): the subscripts of `a`, one a row,
            // beside `unnest(a)` in the same SELECT list.
            if parts.last().map(String::as_str) == Some("generate_subscripts")
                && let FunctionArguments::List(list) = &f.args
                && let [
                    FunctionArg::Unnamed(FunctionArgExpr::Expr(a)),
                    FunctionArg::Unnamed(FunctionArgExpr::Expr(d)),
                ] = list.args.as_slice()
            {
                let one = Expr::value(Value::Number("1".to_owned(), false));
                let len = func("array_length", vec![a.clone(), d.clone()]);
                return Some(func(
                    "unnest",
                    vec![func("generate_series", vec![one, len])],
                ));
            }
            if parts.last().map(String::as_str) == Some("array")
                && let FunctionArguments::Subquery(q) = &f.args
            {
                if unnests_reloptions(q) {
                    return Some(Expr::value(Value::Null));
                }
                return array_of_subquery(q);
            }
            None
        }
        Expr::BinaryOp { left, op, right } => {
            let BinaryOperator::PGCustomBinaryOperator(parts) = op else {
                return None;
            };
            let new_op = match parts.last()?.as_str() {
                "~" => BinaryOperator::PGRegexMatch,
                "~*" => BinaryOperator::PGRegexIMatch,
                "!~" => BinaryOperator::PGRegexNotMatch,
                "!~*" => BinaryOperator::PGRegexNotIMatch,
                "~~" => BinaryOperator::PGLikeMatch,
                "!~~" => BinaryOperator::PGNotLikeMatch,
                "=" => BinaryOperator::Eq,
                "<>" | "!=" => BinaryOperator::NotEq,
                "<" => BinaryOperator::Lt,
                "<=" => BinaryOperator::LtEq,
                ">" => BinaryOperator::Gt,
                ">=" => BinaryOperator::GtEq,
                "||" => BinaryOperator::StringConcat,
                _ => return None,
            };
            Some(Expr::BinaryOp {
                left: left.clone(),
                op: new_op,
                right: right.clone(),
            })
        }
        Expr::Collate { expr, .. } => Some((**expr).clone()),
        // `LIKE p ESCAPE '/'`: DataFusion escapes with `\` only, so the
        // pattern's escape character becomes that (a `\` in it first
        // becomes an escaped one).
        Expr::Like {
            pattern,
            escape_char: Some(esc),
            ..
        } => {
            let c = match &esc.value {
                Value::SingleQuotedString(c) if c.chars().count() == 1 && c != "\\" => c.clone(),
                _ => return None,
            };
            let lit = |t: &str| Expr::value(Value::SingleQuotedString(t.to_owned()));
            let doubled = func("replace", vec![(**pattern).clone(), lit("\\"), lit("\\\\")]);
            let new_pattern = func("replace", vec![doubled, lit(&c), lit("\\")]);
            let mut out = expr.clone();
            if let Expr::Like {
                pattern,
                escape_char,
                ..
            } = &mut out
            {
                **pattern = new_pattern;
                *escape_char = None;
            }
            Some(out)
        }
        Expr::Cast {
            expr: inner,
            data_type,
            ..
        } => {
            // `x::pg_catalog.int2[]`: the catalog's arrays already are.
            if let DataType::Array(ArrayElemTypeDef::SquareBracket(elem, _)) = data_type
                && pg_type_name(elem).is_some()
            {
                return Some((**inner).clone());
            }
            let ty = pg_type_name(data_type)?;
            let literal = is_string_literal(inner);
            let e = (**inner).clone();
            Some(match ty.as_str() {
                "regclass" if literal => func("silt_regclass_oid", vec![e]),
                "regclass" => func("silt_regclass_name", vec![e]),
                "regtype" if literal => func("silt_regtype_oid", vec![e]),
                "regtype" => func("silt_regtype_name", vec![e, Expr::value(Value::Null)]),
                "regnamespace" if literal => func("silt_regnamespace_oid", vec![e]),
                "regnamespace" => func("silt_regnamespace_name", vec![e]),
                "regproc" | "regprocedure" if literal => func("silt_regproc_oid", vec![e]),
                "regproc" | "regprocedure" | "regoper" | "regrole" => cast(e, DataType::Text),
                "oid" | "xid" | "regconfig" => cast(e, DataType::BigInt(None)),
                "text" | "name" | "char" | "bpchar" | "varchar" | "pg_node_tree" => {
                    cast(e, DataType::Text)
                }
                "int2" => cast(e, DataType::SmallInt(None)),
                "int4" => cast(e, DataType::Int(None)),
                "int8" => cast(e, DataType::BigInt(None)),
                "float4" => cast(e, DataType::Real),
                "float8" => cast(e, DataType::DoublePrecision),
                "bool" => cast(e, DataType::Boolean),
                _ => return None,
            })
        }
        _ => None,
    }
}

/// Whether `q` reads `unnest(<x>.reloptions)`: psql's `\d+` lists a
/// table's options and its TOAST table's so, a correlated table function
/// DataFusion does not plan. Silt's `reloptions` are always null, and so
/// is the array.
fn unnests_reloptions(q: &Query) -> bool {
    let SetExpr::Select(sel) = q.body.as_ref() else {
        return false;
    };
    sel.from.iter().any(|twj| match &twj.relation {
        TableFactor::Table {
            name,
            args: Some(args),
            ..
        } => name_parts(name).last().map(String::as_str) == Some("unnest")
            && args.args.iter().any(|a| {
                matches!(a, FunctionArg::Unnamed(FunctionArgExpr::Expr(Expr::CompoundIdentifier(p)))
                        if p.last().is_some_and(|i| i.value.eq_ignore_ascii_case("reloptions")))
            }),
        TableFactor::UNNEST { array_exprs, .. } => array_exprs.iter().any(|e| {
            matches!(e, Expr::CompoundIdentifier(p)
                if p.last().is_some_and(|i| i.value.eq_ignore_ascii_case("reloptions")))
        }),
        _ => false,
    })
}

/// `ARRAY(SELECT e FROM ... [ORDER BY o])` as `(SELECT array_agg(e [ORDER
/// BY o]) FROM ...)`, for a plain one-column `SELECT`.
fn array_of_subquery(q: &Query) -> Option<Expr> {
    let SetExpr::Select(sel) = q.body.as_ref() else {
        return None;
    };
    let [SelectItem::UnnamedExpr(e) | SelectItem::ExprWithAlias { expr: e, .. }] =
        sel.projection.as_slice()
    else {
        return None;
    };
    let grouped = !matches!(&sel.group_by, GroupByExpr::Expressions(v, _) if v.is_empty());
    if sel.distinct.is_some() || grouped || sel.having.is_some() || q.limit_clause.is_some() {
        return None;
    }
    let mut agg = func("array_agg", vec![e.clone()]);
    if let (Expr::Function(f), Some(order)) = (&mut agg, &q.order_by)
        && let FunctionArguments::List(list) = &mut f.args
        && let datafusion::sql::sqlparser::ast::OrderByKind::Expressions(exprs) = &order.kind
    {
        // `ORDER BY 1` names the output column; inside the aggregate it
        // would be the constant.
        let mut exprs = exprs.clone();
        for o in &mut exprs {
            if matches!(&o.expr, Expr::Value(v) if v.value == Value::Number("1".to_owned(), false))
            {
                o.expr = e.clone();
            }
        }
        list.clauses
            .push(datafusion::sql::sqlparser::ast::FunctionArgumentClause::OrderBy(exprs));
    }
    let mut inner = (**sel).clone();
    inner.projection = vec![SelectItem::UnnamedExpr(agg)];
    let query = Query {
        body: Box::new(SetExpr::Select(Box::new(inner))),
        order_by: None,
        ..q.clone()
    };
    Some(Expr::Subquery(Box::new(query)))
}

/// Catalog relations that are always empty in Silt.
pub const EMPTY: &[&str] = &[
    "pg_policy",
    "pg_publication",
    "pg_publication_rel",
    "pg_publication_namespace",
    "pg_statistic_ext",
    "pg_statistic_ext_data",
    "pg_inherits",
    "pg_trigger",
    "pg_rewrite",
    "pg_event_trigger",
    "pg_partitioned_table",
    "pg_foreign_table",
    "pg_foreign_server",
    "pg_foreign_data_wrapper",
    "pg_extension",
    "pg_sequence",
    "pg_enum",
    "pg_range",
    "pg_auth_members",
    "pg_description",
    "pg_shdescription",
    "pg_depend",
    "pg_subscription",
    "pg_default_acl",
    "pg_init_privs",
    "pg_seclabel",
    "pg_transform",
    "pg_user_mapping",
    "pg_db_role_setting",
];

fn is_empty_relation(name: &ObjectName) -> bool {
    let parts = name_parts(name);
    match parts.as_slice() {
        [t] | [_, t] if parts.len() == 1 || parts[0] == "pg_catalog" => EMPTY.contains(&t.as_str()),
        _ => false,
    }
}

fn inner_joins_empty(from: &[TableWithJoins]) -> bool {
    let empty =
        |f: &TableFactor| matches!(f, TableFactor::Table { name, .. } if is_empty_relation(name));
    from.iter().any(|twj| {
        empty(&twj.relation)
            || twj.joins.iter().any(|j| {
                matches!(
                    j.join_operator,
                    JoinOperator::Join(_) | JoinOperator::Inner(_) | JoinOperator::CrossJoin(_)
                ) && empty(&j.relation)
            })
    })
}

/// Whether a block aggregates: it groups, or a projection item calls an
/// aggregate outside any subquery (a block that would still return one
/// row over no rows).
fn aggregates(sel: &Select) -> bool {
    const AGGS: &[&str] = &[
        "count",
        "sum",
        "min",
        "max",
        "avg",
        "array_agg",
        "string_agg",
        "bool_and",
        "bool_or",
        "every",
        "json_agg",
        "jsonb_agg",
        "silt_single",
    ];
    struct Finder {
        depth: usize,
        found: bool,
    }
    impl Visitor for Finder {
        type Break = ();
        fn pre_visit_query(&mut self, _: &Query) -> ControlFlow<()> {
            self.depth += 1;
            ControlFlow::Continue(())
        }
        fn post_visit_query(&mut self, _: &Query) -> ControlFlow<()> {
            self.depth -= 1;
            ControlFlow::Continue(())
        }
        fn pre_visit_expr(&mut self, e: &Expr) -> ControlFlow<()> {
            if self.depth == 0
                && let Expr::Function(f) = e
                && f.over.is_none()
                && let Some(name) = f.name.0.last().and_then(|p| p.as_ident())
                && AGGS.contains(&name.value.to_lowercase().as_str())
            {
                self.found = true;
                return ControlFlow::Break(());
            }
            ControlFlow::Continue(())
        }
    }
    let mut f = Finder {
        depth: 0,
        found: false,
    };
    for item in &sel.projection {
        let _ = item.visit(&mut f);
    }
    f.found || !matches!(&sel.group_by, GroupByExpr::Expressions(v, _) if v.is_empty())
}

fn output_name(item: &SelectItem, i: usize) -> Ident {
    match item {
        SelectItem::ExprWithAlias { alias, .. } => alias.clone(),
        SelectItem::UnnamedExpr(Expr::Identifier(id)) => id.clone(),
        SelectItem::UnnamedExpr(Expr::CompoundIdentifier(ids)) => ids
            .last()
            .cloned()
            .unwrap_or_else(|| Ident::new(format!("column{i}"))),
        SelectItem::UnnamedExpr(Expr::Function(f)) => f
            .name
            .0
            .last()
            .and_then(|p| p.as_ident())
            .cloned()
            .unwrap_or_else(|| Ident::new(format!("column{i}"))),
        _ => Ident::with_quote('"', format!("column{}", i + 1)),
    }
}

/// A block of no rows with `sel`'s output names.
fn empty_select(sel: &Select) -> Select {
    let mut out = sel.clone();
    out.projection = sel
        .projection
        .iter()
        .enumerate()
        .map(|(i, item)| SelectItem::ExprWithAlias {
            expr: Expr::value(Value::Null),
            alias: output_name(item, i),
        })
        .collect();
    out.from = vec![];
    out.selection = Some(Expr::value(Value::Boolean(false)));
    out.distinct = None;
    out
}

/// Replace the blocks of `stmt` that read an always-empty relation by
/// blocks of no rows; `false` when there is none.
pub fn empty_blocks(stmt: &mut Statement) -> bool {
    let Statement::Query(q) = stmt else {
        return false;
    };
    let (changed, all_empty) = empty_in(&mut q.body);
    if changed && all_empty {
        // No rows: their order does not matter, and ORDER BY may name
        // columns the replaced blocks no longer read.
        q.order_by = None;
    }
    changed
}

/// (whether anything was replaced, whether every block now is empty).
fn empty_in(body: &mut SetExpr) -> (bool, bool) {
    match body {
        SetExpr::Select(sel) if inner_joins_empty(&sel.from) && !aggregates(sel) => {
            **sel = empty_select(sel);
            (true, true)
        }
        SetExpr::Select(_) => (false, false),
        SetExpr::SetOperation { left, right, .. } => {
            let (lc, le) = empty_in(left);
            let (rc, re) = empty_in(right);
            (lc || rc, le && re)
        }
        SetExpr::Query(q) => empty_in(&mut q.body),
        _ => (false, false),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::sql::sqlparser::dialect::GenericDialect;
    use datafusion::sql::sqlparser::parser::Parser;

    fn rw(sql: &str) -> String {
        let mut stmts = Parser::parse_sql(&GenericDialect {}, sql).expect("parses");
        rewrite(&mut stmts[0]);
        stmts[0].to_string()
    }

    #[test]
    fn psql_idioms_become_datafusion_sql() {
        assert_eq!(
            rw(
                "SELECT pg_catalog.pg_get_userbyid(c.relowner) FROM t c WHERE c.relname OPERATOR(pg_catalog.~) '^(t)$' COLLATE pg_catalog.default"
            ),
            "SELECT pg_get_userbyid(c.relowner) FROM t c WHERE c.relname ~ '^(t)$'"
        );
        assert_eq!(
            rw(
                "SELECT c.oid::pg_catalog.regclass, 'pg_class'::regclass, x::pg_catalog.text, y::oid"
            ),
            "SELECT silt_regclass_name(c.oid), silt_regclass_oid('pg_class'), CAST(x AS TEXT), CAST(y AS BIGINT)"
        );
        assert_eq!(
            rw("SELECT ARRAY(SELECT b.rolname FROM r b WHERE b.x = o.y ORDER BY 1) FROM o"),
            "SELECT (SELECT array_agg(b.rolname ORDER BY b.rolname) FROM r b WHERE b.x = o.y) FROM o"
        );
    }

    #[test]
    fn blocks_over_empty_relations_are_replaced() {
        let sql = "SELECT pubname, NULL FROM pg_catalog.pg_publication p JOIN pg_class c ON c.oid = p.x WHERE f(p) \
                   UNION SELECT pubname, 1 FROM pg_publication ORDER BY 1";
        let mut stmts = Parser::parse_sql(&GenericDialect {}, sql).expect("parses");
        assert!(empty_blocks(&mut stmts[0]));
        assert_eq!(
            stmts[0].to_string(),
            "SELECT NULL AS pubname, NULL AS \"column2\" WHERE false UNION SELECT NULL AS pubname, NULL AS \"column2\" WHERE false"
        );
        // A LEFT JOIN of an empty relation keeps the rows; an aggregate
        // over none still returns one.
        for sql in [
            "SELECT c.x FROM pg_class c LEFT JOIN pg_inherits i ON i.a = c.oid",
            "SELECT count(*) FROM pg_inherits",
        ] {
            let mut stmts = Parser::parse_sql(&GenericDialect {}, sql).expect("parses");
            assert!(!empty_blocks(&mut stmts[0]), "{sql}");
        }
    }
}
