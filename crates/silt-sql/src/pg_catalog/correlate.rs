//! Correlated scalar subqueries in the shape DataFusion decorrelates:
//! its `WHERE` conjuncts may tie an inner column to an outer one by
//! equality, nothing else. Clients' catalog queries also use
//!
//! - a conjunct on the outer row alone (`... AND a.atthasdef`): it moves
//!   out, `CASE WHEN a.atthasdef THEN (SELECT ...) END`;
//! - a comparison of an outer column with an inner one other than `=`
//!   (`a.attcollation <> t.typcollation`) where another conjunct equates
//!   that outer column with an inner one (`c.oid = a.attcollation`): the
//!   outer column is replaced by its inner equal (`c.oid <>
//!   t.typcollation`), which filters the same rows (a row the equality
//!   drops is dropped either way).
//!
//! A column reference counts as inner when its qualifier names a relation
//! of the subquery's `FROM`, outer when it names another, and unqualified
//! ones are left where they are.

use std::collections::HashSet;
use std::ops::ControlFlow;

use datafusion::sql::sqlparser::ast::{
    BinaryOperator, Expr, Select, TableFactor, Visit, VisitMut, Visitor, VisitorMut,
};

/// The qualifiers the subquery's own relations answer to.
fn inner_names(sel: &Select) -> HashSet<String> {
    let mut out = HashSet::new();
    let mut add = |f: &TableFactor| match f {
        TableFactor::Table { name, alias, .. } => {
            out.insert(match alias {
                Some(a) => a.name.value.to_lowercase(),
                None => name
                    .0
                    .last()
                    .map_or_else(String::new, |p| p.to_string().to_lowercase()),
            });
        }
        TableFactor::Derived { alias: Some(a), .. }
        | TableFactor::UNNEST { alias: Some(a), .. } => {
            out.insert(a.name.value.to_lowercase());
        }
        _ => {}
    };
    for twj in &sel.from {
        add(&twj.relation);
        for j in &twj.joins {
            add(&j.relation);
        }
    }
    out
}

/// Which sides an expression's column references are on.
#[derive(Default)]
struct Sides {
    inner: bool,
    outer: bool,
    unknown: bool,
}

fn sides(e: &Expr, inner: &HashSet<String>) -> Sides {
    struct V<'a>(&'a HashSet<String>, Sides);
    impl Visitor for V<'_> {
        type Break = ();
        fn pre_visit_expr(&mut self, e: &Expr) -> ControlFlow<()> {
            match e {
                Expr::CompoundIdentifier(parts) if parts.len() >= 2 => {
                    let q = parts[parts.len() - 2].value.to_lowercase();
                    if self.0.contains(&q) {
                        self.1.inner = true;
                    } else {
                        self.1.outer = true;
                    }
                }
                Expr::Identifier(_) => self.1.unknown = true,
                // A nested subquery's references are its own business.
                Expr::Subquery(_) | Expr::Exists { .. } | Expr::InSubquery { .. } => {
                    self.1.unknown = true;
                }
                _ => {}
            }
            ControlFlow::Continue(())
        }
    }
    let mut v = V(inner, Sides::default());
    let _ = e.visit(&mut v);
    v.1
}

fn conjuncts(e: Expr, out: &mut Vec<Expr>) {
    match e {
        Expr::BinaryOp {
            left,
            op: BinaryOperator::And,
            right,
        } => {
            conjuncts(*left, out);
            conjuncts(*right, out);
        }
        Expr::Nested(inner)
            if matches!(
                *inner,
                Expr::BinaryOp {
                    op: BinaryOperator::And,
                    ..
                }
            ) =>
        {
            conjuncts(*inner, out);
        }
        other => out.push(other),
    }
}

fn and_all(v: Vec<Expr>) -> Option<Expr> {
    v.into_iter().reduce(|a, b| Expr::BinaryOp {
        left: Box::new(a),
        op: BinaryOperator::And,
        right: Box::new(b),
    })
}

fn is_column(e: &Expr) -> bool {
    matches!(e, Expr::CompoundIdentifier(p) if p.len() >= 2)
}

/// Reshape `sel`'s `WHERE` (see the module doc); the conjuncts on the
/// outer row alone, which the caller puts around the subquery.
pub fn untangle(sel: &mut Select) -> Option<Expr> {
    let inner = inner_names(sel);
    let mut parts = Vec::new();
    conjuncts(sel.selection.take()?, &mut parts);
    // outer column -> an inner column equal to it
    let mut equal: Vec<(Expr, Expr)> = Vec::new();
    for p in &parts {
        if let Expr::BinaryOp {
            left,
            op: BinaryOperator::Eq,
            right,
        } = p
            && is_column(left)
            && is_column(right)
        {
            let (l, r) = (sides(left, &inner), sides(right, &inner));
            if l.outer && r.inner {
                equal.push(((**left).clone(), (**right).clone()));
            } else if l.inner && r.outer {
                equal.push(((**right).clone(), (**left).clone()));
            }
        }
    }
    let mut kept = Vec::new();
    let mut outside = Vec::new();
    for mut p in parts {
        let s = sides(&p, &inner);
        let is_tie = matches!(&p, Expr::BinaryOp { left, op: BinaryOperator::Eq, right }
            if is_column(left) && is_column(right) && s.inner && s.outer);
        if s.outer && !s.inner && !s.unknown {
            outside.push(p);
            continue;
        }
        if s.outer && s.inner && !is_tie {
            let _ = VisitMut::visit(&mut p, &mut Substitute(&equal));
        }
        kept.push(p);
    }
    sel.selection = and_all(kept);
    and_all(outside)
}

struct Substitute<'a>(&'a [(Expr, Expr)]);

impl VisitorMut for Substitute<'_> {
    type Break = ();
    fn post_visit_expr(&mut self, e: &mut Expr) -> ControlFlow<()> {
        if let Some((_, to)) = self.0.iter().find(|(from, _)| from == e) {
            *e = to.clone();
        }
        ControlFlow::Continue(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::sql::sqlparser::ast::{SetExpr, Statement};
    use datafusion::sql::sqlparser::dialect::GenericDialect;
    use datafusion::sql::sqlparser::parser::Parser;

    fn select(sql: &str) -> Select {
        let stmts = Parser::parse_sql(&GenericDialect {}, sql).expect("parses");
        let Statement::Query(q) = &stmts[0] else {
            panic!("a query")
        };
        let SetExpr::Select(s) = q.body.as_ref() else {
            panic!("a select")
        };
        (**s).clone()
    }

    #[test]
    fn outer_conjuncts_move_out_and_outer_columns_take_inner_equals() {
        let mut s = select(
            "SELECT c.collname FROM pg_collation c, pg_type t \
             WHERE c.oid = a.attcollation AND t.oid = a.atttypid AND a.attcollation <> t.typcollation AND a.x",
        );
        let out = untangle(&mut s).map(|e| e.to_string());
        assert_eq!(out.as_deref(), Some("a.x"));
        assert_eq!(
            s.selection.map(|e| e.to_string()).as_deref(),
            Some("c.oid = a.attcollation AND t.oid = a.atttypid AND c.oid <> t.typcollation")
        );
        let mut plain = select("SELECT d.x FROM d WHERE d.a = o.a");
        assert_eq!(untangle(&mut plain), None);
        assert_eq!(
            plain.selection.map(|e| e.to_string()).as_deref(),
            Some("d.a = o.a")
        );
    }
}
