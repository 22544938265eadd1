//! PostgreSQL's `information_schema._pg_expandarray(a)`, which pgjdbc's
//! `getPrimaryKeys` and `getIndexInfo` call: a set-returning function of
//! records `(x, n)`, an element and its position, called in a `SELECT`
//! list. DataFusion unnests lists in a `SELECT` list, zipping several:
//!
//! - `(_pg_expandarray(a)).x` -> `unnest(a)`;
//! - `(_pg_expandarray(a)).n` -> `unnest(generate_series(1, array_length(a, 1)))`;
//! - `_pg_expandarray(a) AS k` -> both, as `k_x` and `k_n`, and a later
//!   `(q.k).x` -> `q.k_x`.
//!
//! Also folded here: `array_upper(current_schemas(b), 1)`, which pgjdbc
//! passes to `generate_series` in `FROM` (whose arguments DataFusion wants
//! constant): Silt's search path is `public` (with `pg_catalog` first when
//! `b`), so it is 1 or 2.

use std::ops::ControlFlow;

use datafusion::sql::sqlparser::ast::{
    AccessExpr, Expr, FunctionArg, FunctionArgExpr, FunctionArguments, Ident, Query, SelectItem,
    SetExpr, Statement, Value, VisitMut, VisitorMut,
};

use super::rewrite::func;

/// The array of a `_pg_expandarray(a)` call.
fn expanded(e: &Expr) -> Option<&Expr> {
    let Expr::Function(f) = e else {
        return None;
    };
    let last = f.name.0.last()?.as_ident()?;
    if !last.value.eq_ignore_ascii_case("_pg_expandarray") {
        return None;
    }
    match &f.args {
        FunctionArguments::List(l) => match l.args.as_slice() {
            [FunctionArg::Unnamed(FunctionArgExpr::Expr(a))] => Some(a),
            _ => None,
        },
        _ => None,
    }
}

fn elements(a: &Expr) -> Expr {
    func("unnest", vec![a.clone()])
}

fn positions(a: &Expr) -> Expr {
    let one = Expr::value(Value::Number("1".to_owned(), false));
    let len = func("array_length", vec![a.clone(), one.clone()]);
    func("unnest", vec![func("generate_series", vec![one, len])])
}

fn field(chain: &[AccessExpr]) -> Option<String> {
    match chain {
        [AccessExpr::Dot(Expr::Identifier(i))] => Some(i.value.to_lowercase()),
        _ => None,
    }
}

struct Expand;

impl VisitorMut for Expand {
    type Break = ();

    fn post_visit_query(&mut self, q: &mut Query) -> ControlFlow<()> {
        // `_pg_expandarray(a) AS k` in a SELECT list: two columns.
        if let SetExpr::Select(sel) = q.body.as_mut() {
            let mut items = Vec::with_capacity(sel.projection.len());
            for item in sel.projection.drain(..) {
                match &item {
                    SelectItem::ExprWithAlias { expr, alias } if expanded(expr).is_some() => {
                        let a = expanded(expr).cloned().unwrap_or_else(|| expr.clone());
                        let k = alias.value.to_lowercase();
                        items.push(SelectItem::ExprWithAlias {
                            expr: elements(&a),
                            alias: Ident::new(format!("{k}_x")),
                        });
                        items.push(SelectItem::ExprWithAlias {
                            expr: positions(&a),
                            alias: Ident::new(format!("{k}_n")),
                        });
                    }
                    _ => items.push(item),
                }
            }
            sel.projection = items;
        }
        ControlFlow::Continue(())
    }

    fn post_visit_expr(&mut self, e: &mut Expr) -> ControlFlow<()> {
        let new = match e {
            Expr::CompoundFieldAccess { root, access_chain } => {
                let Some(f) = field(access_chain) else {
                    return ControlFlow::Continue(());
                };
                let inner = match root.as_ref() {
                    Expr::Nested(inner) => inner.as_ref(),
                    other => other,
                };
                if let Some(a) = expanded(inner) {
                    match f.as_str() {
                        "x" => Some(elements(a)),
                        "n" => Some(positions(a)),
                        _ => None,
                    }
                } else if let Expr::CompoundIdentifier(parts) = inner
                    && let Some(last) = parts.last()
                    && (f == "x" || f == "n")
                {
                    let mut parts = parts.clone();
                    let k = last.value.to_lowercase();
                    if let Some(l) = parts.last_mut() {
                        *l = Ident::new(format!("{k}_{f}"));
                    }
                    Some(Expr::CompoundIdentifier(parts))
                } else {
                    None
                }
            }
            Expr::Function(f) => {
                let name = f
                    .name
                    .0
                    .last()
                    .and_then(|p| p.as_ident())
                    .map(|i| i.value.to_lowercase());
                match (name.as_deref(), &f.args) {
                    (Some("array_upper"), FunctionArguments::List(l)) => match l.args.as_slice() {
                        [
                            FunctionArg::Unnamed(FunctionArgExpr::Expr(Expr::Function(cs))),
                            FunctionArg::Unnamed(FunctionArgExpr::Expr(Expr::Value(d))),
                        ] if d.value == Value::Number("1".to_owned(), false)
                            && cs.name.to_string().eq_ignore_ascii_case("current_schemas") =>
                        {
                            let with_catalog = cs.args.to_string().to_lowercase().contains("true");
                            let n = if with_catalog { "2" } else { "1" };
                            Some(Expr::value(Value::Number(n.to_owned(), false)))
                        }
                        _ => None,
                    },
                    _ => None,
                }
            }
            _ => None,
        };
        if let Some(n) = new {
            *e = n;
        }
        ControlFlow::Continue(())
    }
}

/// Apply the rewrites of the module doc.
pub fn expand(stmt: &mut Statement) {
    let _ = stmt.visit(&mut Expand);
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::sql::sqlparser::dialect::GenericDialect;
    use datafusion::sql::sqlparser::parser::Parser;

    #[test]
    fn expandarray_becomes_unnests() {
        let sql = "SELECT r.k_seq FROM (SELECT (information_schema._pg_expandarray(c.conkey)).n AS k_seq, \
                   information_schema._pg_expandarray(c.conkey) AS keys, a.attnum FROM c, a) r \
                   WHERE r.attnum = (r.keys).x AND 1 <= array_upper(current_schemas(false), 1)";
        let mut stmts = Parser::parse_sql(&GenericDialect {}, sql).expect("parses");
        expand(&mut stmts[0]);
        assert_eq!(
            stmts[0].to_string(),
            "SELECT r.k_seq FROM (SELECT unnest(generate_series(1, array_length(c.conkey, 1))) AS k_seq, \
             unnest(c.conkey) AS keys_x, unnest(generate_series(1, array_length(c.conkey, 1))) AS keys_n, \
             a.attnum FROM c, a) r WHERE r.attnum = r.keys_x AND 1 <= 1"
        );
    }
}
