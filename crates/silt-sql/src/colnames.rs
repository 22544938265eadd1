//! PostgreSQL's names for a query's output columns.
//!
//! DataFusion names an unaliased output column after the whole expression
//! (`coalesce(emp.salary,Int64(0))`, `Int64(1)`) and refuses two columns of
//! the same name (`SELECT 1, 1`). PostgreSQL names it after its outermost
//! part (its "FigureColname"): a column reference by the column, a function
//! call by the function (`coalesce`, `count`), a cast by its operand's name
//! or else the type (`int4`), `CASE` by `case`, anything else `?column?`;
//! and it allows duplicates.
//!
//! [`name_outputs`] rewrites every `SELECT` list of a statement before it is
//! planned: an expression whose DataFusion name differs from PostgreSQL's
//! gets PostgreSQL's as an alias, and a name already taken in the same list
//! gets an internal unique one (the name, [`MARK`], a number). The columns of
//! the result are renamed back by [`restore`]. Bare column references keep
//! their own names (DataFusion's already match), unless they repeat one.

use std::collections::HashSet;
use std::ops::ControlFlow;
use std::sync::Arc;

use datafusion::arrow::datatypes::{Field, Schema, SchemaRef};
use datafusion::sql::sqlparser::ast::{
    CastKind, DataType, Expr, Ident, Query, SelectItem, SetExpr, VisitMut, VisitorMut,
};

/// Separates a duplicate output name from its number in the plan.
pub const MARK: char = '\u{1}';

/// PostgreSQL's name for an output column computed by `e`; `None` for a
/// column reference (DataFusion names those the same way).
fn pg_name(e: &Expr) -> Option<String> {
    Some(match e {
        Expr::Identifier(_) | Expr::CompoundIdentifier(_) => return None,
        Expr::Nested(inner) => return pg_name(inner),
        Expr::Function(f) => f
            .name
            .0
            .last()
            .and_then(|p| p.as_ident())
            .map_or_else(|| "?column?".to_owned(), ident_name),
        Expr::Cast {
            kind: CastKind::Cast | CastKind::DoubleColon,
            expr,
            data_type,
            ..
        } => match &**expr {
            Expr::Identifier(i) => ident_name(i),
            Expr::CompoundIdentifier(parts) => parts.last().map_or_else(String::new, ident_name),
            inner => match pg_name(inner) {
                Some(n) if n != "?column?" => n,
                _ => type_name(data_type),
            },
        },
        Expr::Case { .. } => "case".to_owned(),
        Expr::Exists { .. } => "exists".to_owned(),
        Expr::Array(_) => "array".to_owned(),
        Expr::Ceil { .. } => "ceil".to_owned(),
        Expr::Floor { .. } => "floor".to_owned(),
        Expr::Position { .. } => "position".to_owned(),
        Expr::Substring { .. } => "substring".to_owned(),
        Expr::Trim { .. } => "btrim".to_owned(),
        Expr::Overlay { .. } => "overlay".to_owned(),
        Expr::Extract { .. } => "extract".to_owned(),
        Expr::Tuple(_) => "row".to_owned(),
        Expr::Interval(_) => "interval".to_owned(),
        Expr::TypedString(t) => type_name(&t.data_type),
        _ => "?column?".to_owned(),
    })
}

/// An identifier as PostgreSQL folds it: unquoted ones to lower case.
fn ident_name(i: &Ident) -> String {
    match i.quote_style {
        Some(_) => i.value.clone(),
        None => i.value.to_lowercase(),
    }
}

/// PostgreSQL's internal name of a type, as it names a cast's column.
fn type_name(t: &DataType) -> String {
    let s = match t {
        DataType::Int(_) | DataType::Integer(_) | DataType::Int4(_) => "int4",
        DataType::BigInt(_) | DataType::Int8(_) => "int8",
        DataType::SmallInt(_) | DataType::Int2(_) => "int2",
        DataType::Real | DataType::Float4 => "float4",
        DataType::Double(_) | DataType::DoublePrecision | DataType::Float8 => "float8",
        DataType::Float(_) => "float8",
        DataType::Boolean | DataType::Bool => "bool",
        DataType::Text => "text",
        DataType::Varchar(_) | DataType::CharacterVarying(_) => "varchar",
        DataType::Char(_) | DataType::Character(_) => "bpchar",
        DataType::Numeric(_) | DataType::Decimal(_) => "numeric",
        DataType::Date => "date",
        DataType::Timestamp(_, tz) => match tz {
            datafusion::sql::sqlparser::ast::TimezoneInfo::WithTimeZone
            | datafusion::sql::sqlparser::ast::TimezoneInfo::Tz => "timestamptz",
            _ => "timestamp",
        },
        DataType::Bytea => "bytea",
        DataType::JSON => "json",
        DataType::JSONB => "jsonb",
        other => return other.to_string().to_lowercase(),
    };
    s.to_owned()
}

/// The name an item gives its column, if it can be told from the text.
pub(crate) fn item_name(item: &SelectItem) -> Option<String> {
    match item {
        SelectItem::UnnamedExpr(Expr::Identifier(i)) => Some(ident_name(i)),
        SelectItem::UnnamedExpr(Expr::CompoundIdentifier(p)) => p.last().map(ident_name),
        SelectItem::UnnamedExpr(e) => pg_name(e),
        SelectItem::ExprWithAlias { alias, .. } => Some(ident_name(alias)),
        _ => None,
    }
}

fn rename_list(items: &mut [SelectItem]) {
    let has_wildcard = items.iter().any(|i| {
        matches!(
            i,
            SelectItem::Wildcard(_) | SelectItem::QualifiedWildcard(..)
        )
    });
    let mut taken: HashSet<String> = HashSet::new();
    let mut n = 0usize;
    for item in items.iter_mut() {
        let Some(name) = item_name(item) else {
            continue;
        };
        // Next to a wildcard, any name may repeat one of its columns.
        let duplicate = !taken.insert(name.clone()) || has_wildcard;
        let computed = matches!(item, SelectItem::UnnamedExpr(e) if pg_name(e).is_some());
        if !duplicate && !computed {
            continue;
        }
        let alias = if duplicate {
            n += 1;
            format!("{name}{MARK}{n}")
        } else {
            name
        };
        let expr = match std::mem::replace(item, SelectItem::Wildcard(Default::default())) {
            SelectItem::UnnamedExpr(e) | SelectItem::ExprWithAlias { expr: e, .. } => e,
            other => {
                *item = other;
                continue;
            }
        };
        *item = SelectItem::ExprWithAlias {
            expr,
            alias: Ident::with_quote('"', alias),
        };
    }
}

fn rename_set_expr(body: &mut SetExpr) {
    match body {
        SetExpr::Select(s) => rename_list(&mut s.projection),
        SetExpr::SetOperation { left, right, .. } => {
            rename_set_expr(left);
            rename_set_expr(right);
        }
        // Nested queries are visited on their own.
        _ => {}
    }
}

struct Renamer;

impl VisitorMut for Renamer {
    type Break = ();

    fn pre_visit_query(&mut self, q: &mut Query) -> ControlFlow<()> {
        rename_set_expr(&mut q.body);
        ControlFlow::Continue(())
    }
}

/// Give every `SELECT` list of `stmt` PostgreSQL's output names (see the
/// module doc).
pub fn name_outputs<V: VisitMut>(stmt: &mut V) {
    let _ = stmt.visit(&mut Renamer);
}

/// [`name_outputs`] on a statement as DataFusion's parser returns it.
pub fn name_statement(stmt: &mut datafusion::sql::parser::Statement) {
    if let datafusion::sql::parser::Statement::Statement(s) = stmt {
        name_outputs(s.as_mut());
    }
}

/// A column's name as the client sees it (without a duplicate's number).
pub fn shown(name: &str) -> &str {
    name.split(MARK).next().unwrap_or_default()
}

/// `schema` with the internal names of duplicate columns turned back into
/// their own; `None` when it has none.
pub fn restore(schema: &Schema) -> Option<SchemaRef> {
    if !schema.fields().iter().any(|f| f.name().contains(MARK)) {
        return None;
    }
    let fields: Vec<Field> = schema
        .fields()
        .iter()
        .map(|f| f.as_ref().clone().with_name(shown(f.name())))
        .collect();
    Some(Arc::new(Schema::new_with_metadata(
        fields,
        schema.metadata().clone(),
    )))
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::sql::sqlparser::dialect::PostgreSqlDialect;
    use datafusion::sql::sqlparser::parser::Parser;

    fn rewritten(sql: &str) -> String {
        let mut stmts = Parser::parse_sql(&PostgreSqlDialect {}, sql).unwrap();
        name_outputs(&mut stmts[0]);
        stmts[0].to_string()
    }

    #[test]
    fn names_follow_postgresql() {
        assert_eq!(
            rewritten(
                "SELECT 1, 1, a, coalesce(b, 0), count(*), x::int, 2::int, CASE WHEN a THEN 1 END FROM t"
            ),
            "SELECT 1 AS \"?column?\", 1 AS \"?column?\u{1}1\", a, coalesce(b, 0) AS \"coalesce\", count(*) AS \"count\", x::INT AS \"x\", 2::INT AS \"int4\", CASE WHEN a THEN 1 END AS \"case\" FROM t"
        );
        // Column references keep their names; a repeated one is renamed.
        assert_eq!(
            rewritten("SELECT a, t.b, a FROM t"),
            "SELECT a, t.b, a AS \"a\u{1}1\" FROM t"
        );
        // Next to a wildcard every named item gets an internal name.
        assert_eq!(
            rewritten("SELECT *, id FROM t"),
            "SELECT *, id AS \"id\u{1}1\" FROM t"
        );
        // Subqueries and both sides of a UNION.
        assert_eq!(
            rewritten("SELECT upper(n) FROM (SELECT lower(m) FROM t) s UNION SELECT 'x'"),
            "SELECT upper(n) AS \"upper\" FROM (SELECT lower(m) AS \"lower\" FROM t) s UNION SELECT 'x' AS \"?column?\""
        );
    }

    #[test]
    fn restore_strips_the_mark() {
        let s = Schema::new(vec![
            Field::new(
                "?column?",
                datafusion::arrow::datatypes::DataType::Int64,
                false,
            ),
            Field::new(
                format!("?column?{MARK}1"),
                datafusion::arrow::datatypes::DataType::Int64,
                false,
            ),
        ]);
        let r = restore(&s).unwrap();
        assert_eq!(r.field(1).name(), "?column?");
        assert!(restore(&r).is_none());
    }
}
