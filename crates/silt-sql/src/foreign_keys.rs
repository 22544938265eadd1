//! SQL's foreign keys: `REFERENCES` on a column and `FOREIGN KEY (...)
//! REFERENCES t [(...)] [ON DELETE RESTRICT | CASCADE | NO ACTION]` in
//! `CREATE TABLE` and `ALTER TABLE ... ADD`, kept and enforced by the core
//! (`silt::ForeignKeyDef`; `DROP CONSTRAINT` drops one). A key must name
//! the referenced table's primary key; `ON DELETE SET NULL | SET DEFAULT`,
//! `ON UPDATE` actions other than `NO ACTION`/`RESTRICT` (a primary key
//! is never updated in place) and `MATCH FULL | PARTIAL` are refused.
//! `RESTRICT` and `NO ACTION` mean the same here: inside a transaction
//! block the references are checked at `COMMIT` against what the block
//! leaves (as a `DEFERRABLE INITIALLY DEFERRED` key), `CASCADE` deletes at
//! the `DELETE`.

use crate::ddl::ident;
use crate::error::SqlError;
use datafusion::sql::sqlparser::ast::{
    ColumnOption, ConstraintReferenceMatchKind, CreateTable, ForeignKeyConstraint,
    ReferentialAction, TableConstraint,
};
use silt::{Database, FkAction, ForeignKeyDef};

/// A foreign key as written: its definition and the referenced columns
/// it names (empty: the referenced table's primary key).
#[derive(Clone, Debug)]
pub struct Written {
    pub def: ForeignKeyDef,
    pub referred: Vec<String>,
}

/// The foreign key `c` of table `table`, on `columns` (a column's
/// `REFERENCES` names none: they are that column).
pub fn written(
    table: &str,
    columns: &[String],
    c: &ForeignKeyConstraint,
) -> Result<Written, SqlError> {
    let fields: Vec<String> = if c.columns.is_empty() {
        columns.to_vec()
    } else {
        c.columns.iter().map(ident).collect()
    };
    let parent = c
        .foreign_table
        .0
        .last()
        .and_then(|p| p.as_ident())
        .map(ident)
        .ok_or_else(|| {
            SqlError::Invalid(format!("REFERENCES {}: name a table", c.foreign_table))
        })?;
    let on_delete = match c.on_delete {
        None | Some(ReferentialAction::NoAction | ReferentialAction::Restrict) => {
            FkAction::Restrict
        }
        Some(ReferentialAction::Cascade) => FkAction::Cascade,
        Some(other) => {
            return Err(SqlError::Unsupported(format!(
                "ON DELETE {other}: Silt's foreign keys RESTRICT (or NO ACTION) or CASCADE"
            )));
        }
    };
    if let Some(a) = c.on_update
        && !matches!(a, ReferentialAction::NoAction | ReferentialAction::Restrict)
    {
        return Err(SqlError::Unsupported(format!(
            "ON UPDATE {a}: a primary key is not updated in place (an UPDATE of it deletes and inserts), so a foreign key takes NO ACTION or RESTRICT on update"
        )));
    }
    if let Some(m) = c.match_kind
        && !matches!(m, ConstraintReferenceMatchKind::Simple)
    {
        return Err(SqlError::Unsupported(format!(
            "{m}: Silt's foreign keys are MATCH SIMPLE (a key with a null part references nothing)"
        )));
    }
    let name = c
        .name
        .as_ref()
        .map(ident)
        .unwrap_or_else(|| ForeignKeyDef::default_name(table, &fields));
    Ok(Written {
        def: ForeignKeyDef {
            name,
            fields,
            parent,
            on_delete,
        },
        referred: c.referred_columns.iter().map(ident).collect(),
    })
}

/// Every foreign key of a `CREATE TABLE` (column and table constraints).
pub fn of_create(ct: &CreateTable, table: &str) -> Result<Vec<Written>, SqlError> {
    let mut out = Vec::new();
    for col in &ct.columns {
        for o in &col.options {
            if let ColumnOption::ForeignKey(fk) = &o.option {
                let mut w = written(table, &[ident(&col.name)], fk)?;
                if let (Some(n), None) = (&o.name, &fk.name) {
                    w.def.name = ident(n);
                }
                out.push(w);
            }
        }
    }
    for tc in &ct.constraints {
        if let TableConstraint::ForeignKey(fk) = tc {
            out.push(written(table, &[], fk)?);
        }
    }
    Ok(out)
}

/// Check that each key names the referenced table's primary key (its
/// columns, in order, when it names any). `this` is the table being
/// created, with its primary key, for a key referencing itself.
pub fn check_referred(
    db: &Database,
    keys: &[Written],
    this: Option<(&str, &[String])>,
) -> Result<(), SqlError> {
    for w in keys {
        let pk = match this {
            Some((name, pk)) if name == w.def.parent => pk.to_vec(),
            _ => match db.dataset(&w.def.parent) {
                Ok(ds) => ds.def().primary_key.clone(),
                Err(silt::Error::NoSuchDataset(_)) => {
                    return Err(SqlError::Invalid(format!(
                        "relation \"{}\" does not exist (named by foreign key \"{}\")",
                        w.def.parent, w.def.name
                    )));
                }
                Err(e) => return Err(e.into()),
            },
        };
        if !w.referred.is_empty() && w.referred != pk {
            return Err(SqlError::Invalid(format!(
                "foreign key \"{}\" references ({}) of \"{}\", which is not its primary key ({}); Silt's foreign keys reference primary keys",
                w.def.name,
                w.referred.join(", "),
                w.def.parent,
                pk.join(", ")
            )));
        }
    }
    Ok(())
}

/// PostgreSQL's text of a foreign key (`pg_get_constraintdef`).
pub fn definition(fk: &ForeignKeyDef, parent_key: &[String]) -> String {
    let q = |v: &[String]| {
        v.iter()
            .map(|c| crate::pg_catalog::rows::quote_ident(c))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let action = match fk.on_delete {
        FkAction::Cascade => " ON DELETE CASCADE",
        FkAction::Restrict => "",
    };
    format!(
        "FOREIGN KEY ({}) REFERENCES {}({}){action}",
        q(&fk.fields),
        crate::pg_catalog::rows::quote_ident(&fk.parent),
        q(parent_key)
    )
}

/// The order to drop `names` in: a table after every other table of the
/// statement that references it (PostgreSQL drops a set of tables in any
/// order it is given).
pub fn drop_order(db: &Database, names: Vec<String>) -> Vec<String> {
    let mut left = names;
    let mut out = Vec::with_capacity(left.len());
    while !left.is_empty() {
        let free = left
            .iter()
            .position(|n| {
                !db.referencing_foreign_keys(n)
                    .iter()
                    .any(|(_, t)| t != n && left.contains(t))
            })
            .unwrap_or(0);
        out.push(left.remove(free));
    }
    out
}

/// `DROP TABLE name CASCADE`: drop the foreign keys of other tables (not
/// among `dropping`) that reference `name`.
pub fn drop_referencing(db: &Database, name: &str, dropping: &[String]) -> Result<(), SqlError> {
    for (c, t) in db.referencing_foreign_keys(name) {
        if !dropping.contains(&t) {
            db.drop_foreign_key(&t, &c)?;
        }
    }
    Ok(())
}
