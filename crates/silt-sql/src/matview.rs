//! `CREATE MATERIALIZED VIEW v AS SELECT ... FROM a JOIN b ON b.fk = a.pk
//! JOIN c ON ...`: a join along foreign keys, kept by the core as a
//! materialized view (`silt::MaterializedDef`, `Database::create_materialized_view`)
//! that every transaction writing `a`, `b` or `c` keeps up to date: never
//! stale, no `REFRESH` needed (PostgreSQL's need one). The join must be a
//! chain of inner joins each on a foreign key of the next table and the
//! previous table's primary key; the select list names columns
//! (`t.col [AS name]`, `t.*`, `*`). `DROP MATERIALIZED VIEW` drops it.

use std::collections::BTreeMap;

use datafusion::sql::sqlparser::ast::{
    BinaryOperator, CreateView, Expr, JoinConstraint, JoinOperator, SelectItem,
    SelectItemQualifiedWildcardKind, SetExpr, TableFactor,
};
use silt::{Database, MaterializedDef, ViewColumn};

use crate::ddl::{ident, object_parts};
use crate::error::SqlError;

fn unsupported(m: impl std::fmt::Display) -> SqlError {
    SqlError::Unsupported(format!(
        "CREATE MATERIALIZED VIEW: {m}; Silt materializes a chain of inner joins along foreign keys, parent to child (SELECT ... FROM customer c JOIN orders o ON o.o_c_id = c.c_id ...)"
    ))
}

/// `alias.column` of an equality side.
fn column(e: &Expr) -> Option<(String, String)> {
    match e {
        Expr::CompoundIdentifier(parts) if parts.len() == 2 => {
            Some((ident(&parts[0]), ident(&parts[1])))
        }
        Expr::Nested(e) => column(e),
        _ => None,
    }
}

/// `(alias, column) = (alias, column)`.
type Equality = ((String, String), (String, String));

/// The equalities of a conjunction of `a.x = b.y`.
fn equalities(e: &Expr, out: &mut Vec<Equality>) -> Result<(), SqlError> {
    match e {
        Expr::BinaryOp {
            left,
            op: BinaryOperator::And,
            right,
        } => {
            equalities(left, out)?;
            equalities(right, out)
        }
        Expr::BinaryOp {
            left,
            op: BinaryOperator::Eq,
            right,
        } => match (column(left), column(right)) {
            (Some(l), Some(r)) => {
                out.push((l, r));
                Ok(())
            }
            _ => Err(unsupported(format!(
                "`{e}` is not an equality of two columns"
            ))),
        },
        Expr::Nested(e) => equalities(e, out),
        other => Err(unsupported(format!("join condition `{other}`"))),
    }
}

/// The view `cv` defines, checked against `db`'s tables and keys.
pub fn definition(db: &Database, cv: &CreateView) -> Result<(String, MaterializedDef), SqlError> {
    let name = object_parts(&cv.name)
        .pop()
        .ok_or_else(|| SqlError::Invalid(format!("bad view name `{}`", cv.name)))?;
    let SetExpr::Select(select) = cv.query.body.as_ref() else {
        return Err(unsupported("the query must be one SELECT"));
    };
    if select.selection.is_some() || select.distinct.is_some() || select.having.is_some() {
        return Err(unsupported("WHERE, DISTINCT and HAVING are not kept"));
    }
    let [from] = select.from.as_slice() else {
        return Err(unsupported("FROM must be one chain of JOINs"));
    };
    // alias -> table, in the order written.
    let mut tables: Vec<(String, String)> = Vec::new();
    let mut add = |f: &TableFactor| -> Result<(), SqlError> {
        let TableFactor::Table { name, alias, .. } = f else {
            return Err(unsupported(format!("`{f}` is not a table")));
        };
        let t = object_parts(name)
            .pop()
            .ok_or_else(|| SqlError::Invalid(format!("bad table name `{name}`")))?;
        let a = alias.as_ref().map_or_else(|| t.clone(), |a| ident(&a.name));
        tables.push((a, t));
        Ok(())
    };
    add(&from.relation)?;
    let mut eqs = Vec::new();
    for j in &from.joins {
        add(&j.relation)?;
        match &j.join_operator {
            JoinOperator::Join(JoinConstraint::On(e))
            | JoinOperator::Inner(JoinConstraint::On(e)) => {
                equalities(e, &mut eqs)?;
            }
            other => {
                return Err(unsupported(format!(
                    "join `{other:?}` (only inner joins ON equalities)"
                )));
            }
        }
    }
    let table_of = |a: &str| tables.iter().find(|(x, _)| x == a).map(|(_, t)| t.clone());
    // Each pair of tables the equalities join: the child's foreign key on
    // the parent's primary key.
    let mut pairs: BTreeMap<(String, String), Vec<(String, String)>> = BTreeMap::new();
    for ((la, lc), (ra, rc)) in &eqs {
        let (Some(lt), Some(rt)) = (table_of(la), table_of(ra)) else {
            return Err(unsupported(format!(
                "`{la}` or `{ra}` is not a table of the FROM"
            )));
        };
        pairs
            .entry((lt.clone(), rt.clone()))
            .or_default()
            .push((lc.clone(), rc.clone()));
    }
    // (child, parent) -> foreign key name.
    let mut links: Vec<(String, String, String)> = Vec::new();
    for ((lt, rt), cols) in &pairs {
        let found =
            [(lt, rt, false), (rt, lt, true)]
                .into_iter()
                .find_map(|(child, parent, flip)| {
                    let cdef = db.dataset(child).ok()?.def();
                    let pk = db.dataset(parent).ok()?.def().primary_key.clone();
                    cdef.foreign_keys.iter().find_map(|fk| {
                        if fk.parent != *parent {
                            return None;
                        }
                        let mut want: Vec<(String, String)> =
                            fk.fields.iter().cloned().zip(pk.iter().cloned()).collect();
                        let mut got: Vec<(String, String)> = cols
                            .iter()
                            .map(|(l, r)| {
                                if flip {
                                    (r.clone(), l.clone())
                                } else {
                                    (l.clone(), r.clone())
                                }
                            })
                            .collect();
                        want.sort();
                        got.sort();
                        (want == got).then(|| (child.clone(), parent.clone(), fk.name.clone()))
                    })
                });
        match found {
            Some(l) => links.push(l),
            None => {
                return Err(unsupported(format!(
                    "the join of `{lt}` and `{rt}` is not on a foreign key of one and the primary key of the other"
                )));
            }
        }
    }
    // The chain: the top is no table's child; each next is the child of
    // the one before.
    let names: Vec<String> = tables.iter().map(|(_, t)| t.clone()).collect();
    let Some(top) = names
        .iter()
        .find(|t| !links.iter().any(|(c, _, _)| c == *t))
        .cloned()
    else {
        return Err(unsupported("the joins form a cycle"));
    };
    let mut relations = vec![top];
    let mut keys = Vec::new();
    while let Some(last) = relations.last().cloned() {
        let mut below = links.iter().filter(|(_, p, _)| *p == last);
        let Some((child, _, fk)) = below.next() else {
            break;
        };
        if below.next().is_some() {
            return Err(unsupported(format!(
                "`{last}` has two children in the join: a view is one path"
            )));
        }
        if relations.contains(child) {
            return Err(unsupported("the joins form a cycle"));
        }
        relations.push(child.clone());
        keys.push(fk.clone());
    }
    if relations.len() != names.len() || links.len() + 1 != names.len() {
        return Err(unsupported(
            "every table must be in one chain, each joined once to the one above it",
        ));
    }
    // The columns.
    let mut columns: Vec<ViewColumn> = Vec::new();
    let all_of = |t: &str| -> Result<Vec<String>, SqlError> {
        Ok(db
            .dataset(t)?
            .def()
            .fields
            .iter()
            .map(|(f, _)| f.clone())
            .collect())
    };
    for item in &select.projection {
        let mut push = |relation: String, field: String, name: Option<String>| {
            columns.push(ViewColumn {
                name: name.unwrap_or_else(|| field.clone()),
                relation,
                field,
            });
        };
        match item {
            SelectItem::UnnamedExpr(e) | SelectItem::ExprWithAlias { expr: e, .. } => {
                let alias = match item {
                    SelectItem::ExprWithAlias { alias, .. } => Some(ident(alias)),
                    _ => None,
                };
                let Some((a, c)) = column(e) else {
                    return Err(unsupported(format!(
                        "select item `{e}`: name a column as table.column"
                    )));
                };
                let t = table_of(&a)
                    .ok_or_else(|| unsupported(format!("`{a}` is not a table of the FROM")))?;
                push(t, c, alias);
            }
            SelectItem::QualifiedWildcard(SelectItemQualifiedWildcardKind::ObjectName(n), _) => {
                let a = object_parts(n).pop().unwrap_or_default();
                let t = table_of(&a)
                    .ok_or_else(|| unsupported(format!("`{a}` is not a table of the FROM")))?;
                for f in all_of(&t)? {
                    push(t.clone(), f, None);
                }
            }
            SelectItem::Wildcard(_) => {
                for t in &relations {
                    for f in all_of(t)? {
                        push(t.clone(), f, None);
                    }
                }
            }
            other => return Err(unsupported(format!("select item `{other}`"))),
        }
    }
    for (i, c) in columns.iter().enumerate() {
        if columns[..i].iter().any(|o| o.name == c.name) {
            return Err(SqlError::Invalid(format!(
                "column \"{}\" is named twice in materialized view \"{name}\"; name one with AS",
                c.name
            )));
        }
    }
    Ok((
        name,
        MaterializedDef {
            relations,
            keys,
            columns,
        },
    ))
}

/// Run `CREATE MATERIALIZED VIEW` (nothing when `IF NOT EXISTS` finds it);
/// the name of the view made.
pub(crate) async fn create(
    db: &std::sync::Arc<Database>,
    cv: &CreateView,
) -> Result<Option<String>, SqlError> {
    let (name, def) = definition(db, cv)?;
    if cv.if_not_exists && db.dataset_names().contains(&name) {
        return Ok(None);
    }
    let (db, made) = (db.clone(), name.clone());
    crate::ddl::blocking(move || {
        db.create_materialized_view(&made, def)
            .map(|_| ())
            .map_err(SqlError::from)
    })
    .await?;
    Ok(Some(name))
}

/// Run `DROP MATERIALIZED VIEW [IF EXISTS] names`.
pub(crate) async fn drop_views(
    db: &std::sync::Arc<Database>,
    names: Vec<String>,
    if_exists: bool,
) -> Result<(), SqlError> {
    for n in names {
        match db.dataset(&n) {
            Ok(ds) if ds.def().materialized.is_some() => {
                let db = db.clone();
                crate::ddl::blocking(move || db.drop_dataset(&n).map_err(SqlError::from)).await?;
            }
            Ok(_) => {
                return Err(SqlError::Invalid(format!(
                    "\"{n}\" is not a materialized view; DROP TABLE drops a table"
                )));
            }
            Err(silt::Error::NoSuchDataset(_)) if if_exists => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}
