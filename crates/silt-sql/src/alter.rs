//! `ALTER TABLE`: `ADD COLUMN` (with `NOT NULL`, `DEFAULT`, `SERIAL` or
//! `GENERATED ... AS IDENTITY`: existing rows numbered in key order), `DROP
//! COLUMN`, `RENAME COLUMN`, and `ALTER COLUMN ... SET/DROP DEFAULT`,
//! `SET/DROP NOT NULL`, and `ADD/DROP CONSTRAINT` of UNIQUE (a unique
//! index) and CHECK (the rows there are checked first); and `SET
//! (ttl_...)`, which changes the table's ttl (`silt::Database::set_ttl`,
//! no rewrite) and nothing else.
//!
//! A statement is one [`silt::Alteration`]: writes to the table wait until
//! it ends, its operations run in order, each seeing the definition and
//! the rows as the ones before it left them, and it takes effect whole or
//! not at all. A change that existing records must follow rewrites them in
//! the alteration's transaction (so at most `TxnLimits`' million rows):
//! `ADD COLUMN ... DEFAULT` gives rows without the field the default
//! (taken once, as PostgreSQL does), `DROP COLUMN` removes the field from
//! every row (a column added again later starts empty), `RENAME COLUMN`
//! moves it. A crash between the rewrite's commit and the catalog write
//! leaves the rows rewritten and the definition as it was; running the
//! statement again completes it.

use std::ops::Bound;

use datafusion::sql::sqlparser::ast::{
    AlterColumnOperation, AlterTable, AlterTableOperation, ColumnOption, GeneratedAs, SqlOption,
    TableConstraint,
};
use silt::RecordCheck;
use silt::{Alteration, Database, FieldDefault, FieldType, SequenceDef, Value};

use crate::checks::SqlChecks;
use crate::ddl::{self, ident};
use crate::error::SqlError;
use crate::identity::alter::Change as IdentityChange;

/// An `ALTER TABLE` the SQL layer runs.
#[derive(Debug, Clone)]
pub struct AlterStmt {
    pub table: String,
    if_exists: bool,
    ops: Vec<Op>,
    /// `SET (ttl_... = '...')`: the ttl's options to change (`ttl =
    /// 'off'` removes it); such an ALTER changes nothing else.
    ttl: Vec<(String, String)>,
}

#[derive(Debug, Clone)]
enum Op {
    Add {
        name: String,
        ty: FieldType,
        narrow: Option<silt::Narrow>,
        not_null: bool,
        default: Option<FieldDefault>,
        /// An identity column's sequence options.
        sequence: Option<SequenceDef>,
        if_not_exists: bool,
    },
    Drop {
        name: String,
        if_exists: bool,
    },
    Rename {
        from: String,
        to: String,
    },
    Default(String, Option<FieldDefault>),
    NotNull(String, bool),
    /// `ADD [CONSTRAINT name] UNIQUE (cols)`: a unique btree index.
    AddUnique {
        name: Option<String>,
        cols: Vec<String>,
    },
    /// `ADD [CONSTRAINT name] CHECK (expr)`, validated against every row.
    AddCheck {
        name: Option<String>,
        expr: String,
    },
    /// `DROP CONSTRAINT name`: a CHECK or a UNIQUE.
    DropConstraint {
        name: String,
        if_exists: bool,
    },
    /// `ADD [CONSTRAINT c] FOREIGN KEY ...` (alone in its statement: the
    /// core checks every row under its own DDL lock).
    AddForeignKey(crate::foreign_keys::Written),
    /// A change of an identity column (`crate::identity::alter`).
    Identity {
        column: String,
        change: IdentityChange,
    },
}

impl AlterStmt {
    /// An `ALTER TABLE` changing the identity of `column` (read from text
    /// the parser does not know: `crate::identity::alter::parse`).
    pub fn identity(
        table: String,
        if_exists: bool,
        column: String,
        change: IdentityChange,
    ) -> Self {
        AlterStmt {
            table,
            if_exists,
            ops: vec![Op::Identity { column, change }],
            ttl: Vec::new(),
        }
    }
}

pub fn parse(a: &AlterTable) -> Result<AlterStmt, SqlError> {
    let table = ddl::object_parts(&a.name)
        .pop()
        .ok_or_else(|| SqlError::Invalid(format!("bad table name `{}`", a.name)))?;
    let (mut ops, mut ttl) = (Vec::new(), Vec::new());
    for op in &a.operations {
        match op {
            AlterTableOperation::AddColumn {
                if_not_exists,
                column_def,
                ..
            } => {
                let name = ident(&column_def.name);
                let type_name = column_def.data_type.to_string();
                let serial = ddl::is_serial(&type_name);
                let ty = if serial {
                    FieldType::Int
                } else {
                    ddl::field_type(&type_name)?
                };
                let mut not_null = serial;
                let mut default = serial.then_some(FieldDefault::Sequence);
                let mut sequence = None;
                for o in &column_def.options {
                    match &o.option {
                        ColumnOption::NotNull => not_null = true,
                        ColumnOption::Null => not_null = false,
                        ColumnOption::Default(e) => default = ddl::field_default(&name, e)?,
                        ColumnOption::Generated {
                            generation_expr: None,
                            generated_as,
                            sequence_options,
                            ..
                        } => {
                            sequence = Some(crate::identity::column(
                                &name,
                                ty,
                                generated_as,
                                sequence_options.as_deref(),
                            )?);
                            not_null = true;
                            default = Some(FieldDefault::Sequence);
                        }
                        other => {
                            return Err(SqlError::Unsupported(format!(
                                "`{other}` on an added column; Silt keeps NOT NULL and DEFAULT"
                            )));
                        }
                    }
                }
                ops.push(Op::Add {
                    name,
                    ty,
                    narrow: ddl::narrow(&type_name),
                    not_null,
                    default,
                    sequence,
                    if_not_exists: *if_not_exists,
                });
            }
            AlterTableOperation::DropColumn {
                column_names,
                if_exists,
                ..
            } => {
                for c in column_names {
                    ops.push(Op::Drop {
                        name: ident(c),
                        if_exists: *if_exists,
                    });
                }
            }
            AlterTableOperation::RenameColumn {
                old_column_name,
                new_column_name,
            } => ops.push(Op::Rename {
                from: ident(old_column_name),
                to: ident(new_column_name),
            }),
            AlterTableOperation::AlterColumn { column_name, op } => {
                let c = ident(column_name);
                ops.push(match op {
                    AlterColumnOperation::SetNotNull => Op::NotNull(c, true),
                    AlterColumnOperation::DropNotNull => Op::NotNull(c, false),
                    AlterColumnOperation::SetDefault { value } => {
                        let d = ddl::field_default(&c, value)?;
                        Op::Default(c, d)
                    }
                    AlterColumnOperation::DropDefault => Op::Default(c, None),
                    AlterColumnOperation::AddGenerated {
                        generated_as,
                        sequence_options,
                    } => {
                        let always = match generated_as {
                            Some(GeneratedAs::Always) => true,
                            Some(GeneratedAs::ByDefault) => false,
                            _ => {
                                return Err(SqlError::Parse(format!(
                                    "ALTER COLUMN {c} ADD GENERATED takes ALWAYS or BY DEFAULT, then AS IDENTITY"
                                )));
                            }
                        };
                        let options = sequence_options.clone().unwrap_or_default();
                        Op::Identity {
                            column: c,
                            change: IdentityChange::Add { always, options },
                        }
                    }
                    other => {
                        return Err(SqlError::Unsupported(format!(
                            "ALTER COLUMN {c} {other}; to change a column's type, add a column of the new type, UPDATE it from the old one and drop the old one"
                        )));
                    }
                });
            }
            AlterTableOperation::AddConstraint {
                constraint,
                not_valid: false,
            } => ops.push(constraint_op(&table, constraint)?),
            AlterTableOperation::DropConstraint {
                if_exists, name, ..
            } => ops.push(Op::DropConstraint {
                name: ident(name),
                if_exists: *if_exists,
            }),
            AlterTableOperation::SetOptionsParens { options } => {
                for o in options {
                    let SqlOption::KeyValue { key, value } = o else {
                        return Err(SqlError::Invalid(format!(
                            "unsupported table option `{o}`; use SET (ttl_expiry = 'column', ...)"
                        )));
                    };
                    let k = key.value.to_ascii_lowercase();
                    match k.as_str() {
                        "ttl" | "ttl_time" | "ttl_expiry" | "ttl_after" | "ttl_clock"
                        | "ttl_grace" => ttl.push((k, ddl::option_text(value))),
                        other => {
                            return Err(SqlError::Invalid(format!(
                                "ALTER TABLE ... SET ({other}): only the ttl options change after CREATE TABLE (ttl_expiry, ttl_time, ttl_after, ttl_clock, ttl_grace, or ttl = 'off')"
                            )));
                        }
                    }
                }
            }
            other => {
                return Err(SqlError::Unsupported(format!(
                    "ALTER TABLE ... {other}; Silt alters columns (ADD, DROP, RENAME COLUMN, ALTER COLUMN SET/DROP DEFAULT, SET/DROP NOT NULL) and constraints (ADD/DROP CONSTRAINT of UNIQUE and CHECK)"
                )));
            }
        }
    }
    if !ttl.is_empty() && !ops.is_empty() {
        return Err(SqlError::Invalid(
            "ALTER TABLE ... SET (ttl_...) must be an ALTER TABLE of its own".into(),
        ));
    }
    Ok(AlterStmt {
        table,
        if_exists: a.if_exists,
        ops,
        ttl,
    })
}

/// The operation of `ADD CONSTRAINT`.
fn constraint_op(table: &str, c: &TableConstraint) -> Result<Op, SqlError> {
    match c {
        TableConstraint::Unique(u) => {
            let (name, cols) = ddl::unique_constraint(u)?;
            Ok(Op::AddUnique { name, cols })
        }
        TableConstraint::Check(ch) => Ok(Op::AddCheck {
            name: ch.name.as_ref().map(ident),
            expr: ch.expr.to_string(),
        }),
        TableConstraint::ForeignKey(fk) => Ok(Op::AddForeignKey(crate::foreign_keys::written(
            table,
            &[],
            fk,
        )?)),
        other => Err(SqlError::Unsupported(format!(
            "ADD CONSTRAINT {other}; Silt adds UNIQUE, CHECK and FOREIGN KEY constraints (the primary key is fixed at CREATE TABLE)"
        ))),
    }
}

/// Run `stmt` (blocking: it reads and may rewrite the whole table).
/// `checks` evaluates CHECK constraints being added.
pub(crate) fn run(db: &Database, checks: &SqlChecks, stmt: &AlterStmt) -> Result<(), SqlError> {
    let ds = match db.dataset(&stmt.table) {
        Ok(ds) => ds,
        Err(silt::Error::NoSuchDataset(_)) if stmt.if_exists => return Ok(()),
        Err(e) => return Err(e.into()),
    };
    if !stmt.ttl.is_empty() {
        return set_ttl(db, &ds, &stmt.ttl);
    }
    let def = ds.def();
    let fk_op = stmt.ops.iter().find(|op| match op {
        Op::AddForeignKey(_) => true,
        Op::DropConstraint { name, .. } => def.foreign_key(name).is_some(),
        _ => false,
    });
    if let Some(op) = fk_op {
        if stmt.ops.len() > 1 {
            return Err(SqlError::Unsupported(
                "a foreign key is added or dropped by an ALTER TABLE of its own; run the other changes in another statement".into(),
            ));
        }
        return match op {
            Op::AddForeignKey(w) => {
                crate::foreign_keys::check_referred(db, std::slice::from_ref(w), None)?;
                Ok(db.add_foreign_key(&stmt.table, w.def.clone())?)
            }
            Op::DropConstraint { name, .. } => Ok(db.drop_foreign_key(&stmt.table, name)?),
            _ => Ok(()),
        };
    }
    let mut alt = db.alter(&ds)?;
    for op in &stmt.ops {
        apply(checks, &mut alt, op)?;
    }
    alt.finish().map_err(|e| too_large(&ds, e))?;
    Ok(())
}

/// `ALTER TABLE ... SET (ttl...)`: the table's ttl with the options
/// changed, or removed by `ttl = 'off'`.
fn set_ttl(db: &Database, ds: &silt::Dataset, opts: &[(String, String)]) -> Result<(), SqlError> {
    let def = ds.def();
    let off = opts.iter().any(|(k, v)| {
        k == "ttl" && matches!(v.to_ascii_lowercase().as_str(), "off" | "none" | "false")
    });
    if opts.iter().any(|(k, _)| k == "ttl") && !(off && opts.len() == 1) {
        return Err(SqlError::Invalid(
            "SET (ttl = 'off') removes the ttl and goes alone; set it with ttl_expiry, ttl_time, ttl_after, ttl_clock and ttl_grace".into(),
        ));
    }
    let ttl = if off {
        None
    } else {
        let base = def.ttl.clone().unwrap_or_default();
        Some(ddl::ttl_def(&def, base, opts)?)
    };
    db.set_ttl(ds.name(), ttl)?;
    Ok(())
}

/// The error of a rewrite past the transaction's bounds, saying what to do.
fn too_large(ds: &silt::Dataset, e: silt::Error) -> SqlError {
    match e {
        silt::Error::TxnTooLarge { what, limit } => SqlError::Unsupported(format!(
            "ALTER TABLE {} rewrites more rows than one transaction holds ({what}, limit {limit}); add the column without a DEFAULT and UPDATE it in batches",
            ds.name()
        )),
        other => other.into(),
    }
}

fn no_column(table: &str, c: &str) -> SqlError {
    SqlError::Invalid(format!("table `{table}` has no column `{c}`"))
}

/// Whether some row, as the alteration sees it, makes `f` true.
fn any_row(
    alt: &mut Alteration<'_>,
    mut f: impl FnMut(&Value) -> Result<bool, SqlError>,
) -> Result<bool, SqlError> {
    let ds = alt.dataset().clone();
    let t = alt.transaction()?;
    for r in t.scan(&ds, Bound::Unbounded, Bound::Unbounded)? {
        if f(&r?)? {
            return Ok(true);
        }
    }
    Ok(false)
}

fn apply(checks: &SqlChecks, alt: &mut Alteration<'_>, op: &Op) -> Result<(), SqlError> {
    let def = alt.def();
    let ds = alt.dataset().clone();
    let table = ds.name().to_owned();
    let declared = |c: &str| def.field_type(c).is_some();
    let key_or_indexed = |c: &str, what: &str| -> Result<(), SqlError> {
        if def.primary_key.iter().any(|k| k == c) {
            return Err(SqlError::Unsupported(format!(
                "{what} the primary-key column `{c}`"
            )));
        }
        for check in &def.checks {
            if crate::checks::reads_column(&check.expr, c) {
                return Err(SqlError::Invalid(format!(
                    "check constraint `{}` reads column `{c}`",
                    check.name
                )));
            }
        }
        if let Some(i) = ds
            .index_defs()
            .iter()
            .find(|i| i.fields.iter().any(|f| f == c))
        {
            return Err(SqlError::Invalid(format!(
                "index `{}` reads column `{c}`; DROP INDEX {} first",
                i.name, i.name
            )));
        }
        Ok(())
    };
    match op {
        Op::Add {
            name,
            ty,
            narrow,
            not_null,
            default,
            sequence,
            if_not_exists,
        } => {
            if declared(name) {
                if *if_not_exists {
                    return Ok(());
                }
                return Err(SqlError::Invalid(format!(
                    "column `{name}` of table `{table}` already exists"
                )));
            }
            if default.is_none() && *not_null && any_row(alt, |_| Ok(true))? {
                return Err(SqlError::NotNull {
                    table,
                    column: name.clone(),
                });
            }
            let (n, t, nn) = (name.clone(), *ty, *not_null);
            let (d, seq, w) = (default.clone(), *sequence, *narrow);
            alt.change(move |def| {
                def.fields.push((n.clone(), t));
                if let Some(w) = w {
                    def.narrow.push((n.clone(), w));
                }
                if nn {
                    def.not_null.push(n.clone());
                }
                if let Some(x) = d {
                    def.defaults.push((n.clone(), x));
                }
                if let Some(s) = seq {
                    def.sequences.push((n, s));
                }
                Ok(())
            })?;
            match default {
                Some(FieldDefault::Sequence) => number_rows(alt, name)?,
                Some(d) => {
                    let v = d.value(name, *ty)?;
                    rewrite(alt, |r| {
                        if r.get(name).is_some() {
                            return None;
                        }
                        let Value::Object(mut f) = r.clone() else {
                            return None;
                        };
                        f.push((name.clone(), v.clone()));
                        Some(Value::Object(f))
                    })?;
                }
                None => {}
            }
        }
        Op::Drop { name, if_exists } => {
            if !declared(name) {
                if *if_exists {
                    return Ok(());
                }
                return Err(no_column(&table, name));
            }
            key_or_indexed(name, "dropping")?;
            let n = name.clone();
            alt.change(move |d| {
                forget_column(d, &n);
                Ok(())
            })?;
            rewrite(alt, |r| {
                let Value::Object(f) = r else { return None };
                f.iter()
                    .any(|(n, _)| n == name)
                    .then(|| Value::Object(f.iter().filter(|(n, _)| n != name).cloned().collect()))
            })?;
        }
        Op::Rename { from, to } => {
            if !declared(from) {
                return Err(no_column(&table, from));
            }
            if declared(to) {
                return Err(SqlError::Invalid(format!(
                    "column `{to}` of table `{table}` already exists"
                )));
            }
            key_or_indexed(from, "renaming")?;
            ds.copy_sequence(from, to)?;
            let (f, t) = (from.clone(), to.clone());
            alt.change(move |d| {
                let renamed = |n: &mut String| {
                    if *n == f {
                        n.clone_from(&t);
                    }
                };
                d.fields.iter_mut().for_each(|(n, _)| renamed(n));
                d.not_null.iter_mut().for_each(renamed);
                d.defaults.iter_mut().for_each(|(n, _)| renamed(n));
                d.sequences.iter_mut().for_each(|(n, _)| renamed(n));
                d.narrow.iter_mut().for_each(|(n, _)| renamed(n));
                Ok(())
            })?;
            rewrite(alt, |r| {
                let Value::Object(f) = r else { return None };
                let moved: Vec<(String, Value)> = f
                    .iter()
                    .filter(|(n, _)| n != to)
                    .map(|(n, v)| {
                        let n = if n == from { to.clone() } else { n.clone() };
                        (n, v.clone())
                    })
                    .collect();
                (f.iter().any(|(n, _)| n == from || n == to)).then_some(Value::Object(moved))
            })?;
        }
        Op::AddUnique { name, cols } => {
            for c in cols {
                if !declared(c) {
                    return Err(no_column(&table, c));
                }
            }
            alt.create_index(ddl::unique_index(&table, name.clone(), cols))?;
        }
        Op::AddCheck { name, expr } => {
            let mut trial = (*def).clone();
            let cname = match name {
                Some(n) => n.clone(),
                None => ddl::check_name(&table, "check", &trial.checks),
            };
            if trial.checks.iter().any(|c| c.name == cname) {
                return Err(SqlError::Invalid(format!(
                    "constraint `{cname}` of table `{table}` already exists"
                )));
            }
            trial.checks = vec![silt::CheckDef {
                name: cname.clone(),
                expr: expr.clone(),
            }];
            checks.validate(&trial)?;
            // PostgreSQL checks the rows there are before it adds the
            // constraint.
            let violated = any_row(alt, |r| {
                Ok(checks
                    .violated(&trial, r)
                    .map_err(SqlError::Runtime)?
                    .is_some())
            })?;
            if violated {
                return Err(SqlError::Silt(silt::Error::CheckViolation {
                    dataset: table,
                    constraint: cname,
                }));
            }
            let expr = expr.clone();
            alt.change(move |d| {
                d.checks.push(silt::CheckDef { name: cname, expr });
                Ok(())
            })?;
        }
        Op::Identity { column, change } => {
            crate::identity::alter::apply(alt, column, change)?;
        }
        // Run alone, before any alteration (`run`).
        Op::AddForeignKey(_) => {}
        Op::DropConstraint { name, if_exists } => {
            if def.checks.iter().any(|c| c.name == *name) {
                let name = name.clone();
                alt.change(move |d| {
                    d.checks.retain(|c| c.name != name);
                    Ok(())
                })?;
            } else if ds
                .index_defs()
                .iter()
                .any(|d| d.name == *name && d.options.unique)
            {
                alt.drop_index(name)?;
            } else if *name == format!("{table}_pkey") {
                return Err(SqlError::Unsupported(format!(
                    "dropping the primary key `{name}`: a Silt table is stored in its key's order, so its key is fixed"
                )));
            } else if !*if_exists {
                return Err(SqlError::Invalid(format!(
                    "constraint `{name}` of table `{table}` does not exist"
                )));
            }
        }
        Op::Default(c, d) => {
            if !declared(c) {
                return Err(no_column(&table, c));
            }
            if def.sequence_def(c).identity.is_some() {
                return Err(SqlError::Invalid(format!(
                    "column `{c}` of table `{table}` is an identity column: its default is its sequence; ALTER COLUMN {c} DROP IDENTITY first"
                )));
            }
            let (c, d) = (c.clone(), d.clone());
            alt.change(move |def| {
                def.defaults.retain(|(n, _)| *n != c);
                def.sequences.retain(|(n, _)| *n != c);
                if let Some(d) = d {
                    def.defaults.push((c, d));
                }
                Ok(())
            })?;
        }
        Op::NotNull(c, on) => {
            if !declared(c) {
                return Err(no_column(&table, c));
            }
            if def.primary_key.contains(c) {
                if *on {
                    return Ok(());
                }
                return Err(SqlError::Invalid(format!(
                    "column `{c}` is in the primary key, which is never null"
                )));
            }
            if *on && any_row(alt, |r| Ok(matches!(r.get(c), None | Some(Value::Null))))? {
                return Err(SqlError::NotNull {
                    table,
                    column: c.clone(),
                });
            }
            let (c, on) = (c.clone(), *on);
            alt.change(move |d| {
                d.not_null.retain(|n| *n != c);
                if on {
                    d.not_null.push(c);
                }
                Ok(())
            })?;
        }
    }
    Ok(())
}

/// Take column `name` out of a table's definition: its type, NOT NULL,
/// default and sequence options.
fn forget_column(d: &mut silt::DatasetDef, name: &str) {
    d.fields.retain(|(n, _)| n != name);
    d.not_null.retain(|n| n != name);
    d.defaults.retain(|(n, _)| n != name);
    d.sequences.retain(|(n, _)| n != name);
    d.narrow.retain(|(n, _)| n != name);
}

/// Give every row a value of the sequence of `field`, a column being
/// added (as PostgreSQL fills an added `SERIAL` column): the values are
/// taken at once, before any row changes, then handed out in key order.
fn number_rows(alt: &mut Alteration<'_>, field: &str) -> Result<(), SqlError> {
    let ds = alt.dataset().clone();
    let def = alt.def();
    let key_of = |r: &Value| -> Result<Vec<u8>, SqlError> {
        let parts: Vec<Value> = def
            .primary_key
            .iter()
            .map(|k| r.get(k).cloned().unwrap_or(Value::Null))
            .collect();
        Ok(ds.encode_pk(&parts)?)
    };
    let mut keys = Vec::new();
    any_row(alt, |r| {
        if r.get(field).is_none() {
            keys.push(key_of(r)?);
        }
        Ok(false)
    })?;
    if keys.is_empty() {
        return Ok(());
    }
    let taken = ds.next_sequence(field, keys.len() as u64)?;
    let numbers: std::collections::HashMap<Vec<u8>, i64> =
        keys.into_iter().zip(taken.values()).collect();
    rewrite(alt, |r| {
        if r.get(field).is_some() {
            return None;
        }
        let n = *numbers.get(&key_of(r).ok()?)?;
        let Value::Object(mut f) = r.clone() else {
            return None;
        };
        f.push((field.to_owned(), Value::Int(n)));
        Some(Value::Object(f))
    })
}

/// Replace every record `f` changes, in the alteration's transaction
/// (which sees the rewrites of the statement's earlier operations).
fn rewrite(alt: &mut Alteration<'_>, f: impl Fn(&Value) -> Option<Value>) -> Result<(), SqlError> {
    let ds = alt.dataset().clone();
    let limit = silt::TxnLimits::default().max_writes;
    let mut changed: Vec<Value> = Vec::new();
    any_row(alt, |r| {
        if let Some(new) = f(r) {
            if changed.len() as u64 >= limit {
                return Err(too_large(
                    &ds,
                    silt::Error::TxnTooLarge {
                        what: format!("more than {limit} writes"),
                        limit,
                    },
                ));
            }
            changed.push(new);
        }
        Ok(false)
    })?;
    let t = alt.transaction()?;
    for new in changed {
        t.upsert(&ds, new).map_err(|e| too_large(&ds, e))?;
    }
    Ok(())
}
