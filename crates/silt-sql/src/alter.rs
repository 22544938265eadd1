//! `ALTER TABLE`: `ADD COLUMN` (with `NOT NULL`, `DEFAULT`, `SERIAL` or
//! `GENERATED ... AS IDENTITY`: existing rows numbered in key order), `DROP
//! COLUMN`, `RENAME COLUMN`, and `ALTER COLUMN ... SET/DROP DEFAULT`,
//! `SET/DROP NOT NULL`, and `ADD/DROP CONSTRAINT` of UNIQUE (a unique
//! index) and CHECK (the rows there are checked first).
//!
//! A change that existing records must follow rewrites them first, in one
//! transaction (so at most `TxnLimits`' million rows): `ADD COLUMN ...
//! DEFAULT` gives rows without the field the default (taken once, as
//! PostgreSQL does), `DROP COLUMN` removes the field from every row (a
//! column added again later starts empty), `RENAME COLUMN` moves it. Then
//! the definition changes (`Database::alter_dataset`, one catalog write).
//! A crash between the two leaves the rows rewritten and the definition
//! as it was; running the statement again completes it. Operations of one
//! statement run one after another, each on its own.

use std::ops::Bound;
use std::sync::Arc;

use datafusion::sql::sqlparser::ast::{
    AlterColumnOperation, AlterTable, AlterTableOperation, ColumnOption, GeneratedAs,
    TableConstraint,
};
use silt::RecordCheck;
use silt::{Database, Dataset, FieldDefault, FieldType, SequenceDef, Value};

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
}

#[derive(Debug, Clone)]
enum Op {
    Add {
        name: String,
        ty: FieldType,
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
        }
    }
}

pub fn parse(a: &AlterTable) -> Result<AlterStmt, SqlError> {
    let table = ddl::object_parts(&a.name)
        .pop()
        .ok_or_else(|| SqlError::Invalid(format!("bad table name `{}`", a.name)))?;
    let mut ops = Vec::new();
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
            } => ops.push(constraint_op(constraint)?),
            AlterTableOperation::DropConstraint {
                if_exists, name, ..
            } => ops.push(Op::DropConstraint {
                name: ident(name),
                if_exists: *if_exists,
            }),
            other => {
                return Err(SqlError::Unsupported(format!(
                    "ALTER TABLE ... {other}; Silt alters columns (ADD, DROP, RENAME COLUMN, ALTER COLUMN SET/DROP DEFAULT, SET/DROP NOT NULL) and constraints (ADD/DROP CONSTRAINT of UNIQUE and CHECK)"
                )));
            }
        }
    }
    Ok(AlterStmt {
        table,
        if_exists: a.if_exists,
        ops,
    })
}

/// The operation of `ADD CONSTRAINT`.
fn constraint_op(c: &TableConstraint) -> Result<Op, SqlError> {
    match c {
        TableConstraint::Unique(u) => {
            let (name, cols) = ddl::unique_constraint(u)?;
            Ok(Op::AddUnique { name, cols })
        }
        TableConstraint::Check(ch) => Ok(Op::AddCheck {
            name: ch.name.as_ref().map(ident),
            expr: ch.expr.to_string(),
        }),
        other => Err(SqlError::Unsupported(format!(
            "ADD CONSTRAINT {other}; Silt adds UNIQUE and CHECK constraints (the primary key is fixed at CREATE TABLE; REFERENCES is not kept)"
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
    for op in &stmt.ops {
        apply(db, checks, &ds, op)?;
    }
    Ok(())
}

fn no_column(ds: &Dataset, c: &str) -> SqlError {
    SqlError::Invalid(format!("table `{}` has no column `{c}`", ds.name()))
}

fn apply(db: &Database, checks: &SqlChecks, ds: &Arc<Dataset>, op: &Op) -> Result<(), SqlError> {
    let def = ds.def();
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
            let add = {
                let (name, ty, not_null) = (name.clone(), *ty, *not_null);
                let (default, sequence) = (default.clone(), *sequence);
                move |d: &mut silt::DatasetDef| {
                    d.fields.push((name.clone(), ty));
                    if not_null {
                        d.not_null.push(name.clone());
                    }
                    if let Some(x) = default {
                        d.defaults.push((name.clone(), x));
                    }
                    if let Some(s) = sequence {
                        d.sequences.push((name, s));
                    }
                    Ok(())
                }
            };
            if *default == Some(FieldDefault::Sequence) {
                // The catalog first: the sequence runs as its options there
                // say, and rows written meanwhile take values from it.
                // If the rows cannot be numbered (nothing of that is
                // written), the column goes again.
                db.alter_dataset(&table, add)?;
                let numbered = number_rows(db, ds, name);
                if numbered.is_err() {
                    let name = name.clone();
                    db.alter_dataset(&table, move |d| {
                        forget_column(d, &name);
                        Ok(())
                    })?;
                }
                return numbered;
            }
            match default {
                Some(d) => {
                    let v = d.value(name, *ty)?;
                    rewrite(db, ds, |r| {
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
                None if *not_null => {
                    let mut scan = ds.scan(Bound::Unbounded, Bound::Unbounded)?;
                    if scan.next().transpose()?.is_some() {
                        return Err(SqlError::NotNull {
                            table,
                            column: name.clone(),
                        });
                    }
                }
                None => {}
            }
            db.alter_dataset(&table, add)?;
        }
        Op::Drop { name, if_exists } => {
            if !declared(name) {
                if *if_exists {
                    return Ok(());
                }
                return Err(no_column(ds, name));
            }
            key_or_indexed(name, "dropping")?;
            rewrite(db, ds, |r| {
                let Value::Object(f) = r else { return None };
                f.iter()
                    .any(|(n, _)| n == name)
                    .then(|| Value::Object(f.iter().filter(|(n, _)| n != name).cloned().collect()))
            })?;
            let name = name.clone();
            db.alter_dataset(&table, move |d| {
                forget_column(d, &name);
                Ok(())
            })?;
        }
        Op::Rename { from, to } => {
            if !declared(from) {
                return Err(no_column(ds, from));
            }
            if declared(to) {
                return Err(SqlError::Invalid(format!(
                    "column `{to}` of table `{table}` already exists"
                )));
            }
            key_or_indexed(from, "renaming")?;
            ds.copy_sequence(from, to)?;
            rewrite(db, ds, |r| {
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
            let (from, to) = (from.clone(), to.clone());
            db.alter_dataset(&table, move |d| {
                for (n, _) in &mut d.fields {
                    if *n == from {
                        n.clone_from(&to);
                    }
                }
                for n in &mut d.not_null {
                    if *n == from {
                        n.clone_from(&to);
                    }
                }
                for (n, _) in &mut d.defaults {
                    if *n == from {
                        n.clone_from(&to);
                    }
                }
                for (n, _) in &mut d.sequences {
                    if *n == from {
                        n.clone_from(&to);
                    }
                }
                Ok(())
            })?;
        }
        Op::AddUnique { name, cols } => {
            for c in cols {
                if !declared(c) {
                    return Err(no_column(ds, c));
                }
            }
            db.create_index(&table, ddl::unique_index(&table, name.clone(), cols))?;
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
            for r in ds.scan(Bound::Unbounded, Bound::Unbounded)? {
                let r = r?;
                if checks
                    .violated(&trial, &r)
                    .map_err(SqlError::Runtime)?
                    .is_some()
                {
                    return Err(SqlError::Silt(silt::Error::CheckViolation {
                        dataset: table,
                        constraint: cname,
                    }));
                }
            }
            let (cname, expr) = (cname.clone(), expr.clone());
            db.alter_dataset(&table, move |d| {
                d.checks.push(silt::CheckDef { name: cname, expr });
                Ok(())
            })?;
        }
        Op::Identity { column, change } => {
            crate::identity::alter::apply(db, ds, column, change)?;
        }
        Op::DropConstraint { name, if_exists } => {
            if def.checks.iter().any(|c| c.name == *name) {
                let name = name.clone();
                db.alter_dataset(&table, move |d| {
                    d.checks.retain(|c| c.name != name);
                    Ok(())
                })?;
            } else if ds
                .index_defs()
                .iter()
                .any(|d| d.name == *name && d.options.unique)
            {
                db.drop_index(&table, name)?;
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
                return Err(no_column(ds, c));
            }
            if def.sequence_def(c).identity.is_some() {
                return Err(SqlError::Invalid(format!(
                    "column `{c}` of table `{table}` is an identity column: its default is its sequence; ALTER COLUMN {c} DROP IDENTITY first"
                )));
            }
            let (c, d) = (c.clone(), d.clone());
            db.alter_dataset(&table, move |def| {
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
                return Err(no_column(ds, c));
            }
            if def.primary_key.contains(c) {
                if *on {
                    return Ok(());
                }
                return Err(SqlError::Invalid(format!(
                    "column `{c}` is in the primary key, which is never null"
                )));
            }
            if *on {
                for r in ds.scan(Bound::Unbounded, Bound::Unbounded)? {
                    if matches!(r?.get(c), None | Some(Value::Null)) {
                        return Err(SqlError::NotNull {
                            table,
                            column: c.clone(),
                        });
                    }
                }
            }
            let (c, on) = (c.clone(), *on);
            db.alter_dataset(&table, move |d| {
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
}

/// Give every row a value of the sequence of `field`, a column being
/// added (as PostgreSQL fills an added `SERIAL` column): the values are
/// taken at once, before any row changes, then handed out in key order.
fn number_rows(db: &Database, ds: &Arc<Dataset>, field: &str) -> Result<(), SqlError> {
    let pk = ds.def().primary_key.clone();
    let key_of = |r: &Value| -> Result<Vec<u8>, SqlError> {
        let parts: Vec<Value> = pk
            .iter()
            .map(|k| r.get(k).cloned().unwrap_or(Value::Null))
            .collect();
        Ok(ds.encode_pk(&parts)?)
    };
    let mut keys = Vec::new();
    for r in ds.scan(Bound::Unbounded, Bound::Unbounded)? {
        let r = r?;
        if r.get(field).is_none() {
            keys.push(key_of(&r)?);
        }
    }
    if keys.is_empty() {
        return Ok(());
    }
    let taken = ds.next_sequence(field, keys.len() as u64)?;
    let numbers: std::collections::HashMap<Vec<u8>, i64> =
        keys.into_iter().zip(taken.values()).collect();
    rewrite(db, ds, |r| {
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

/// Replace every record `f` changes, in one transaction: each record is
/// read again through the transaction, so a concurrent change makes the
/// commit fail (retry the statement) rather than be lost.
fn rewrite(
    db: &Database,
    ds: &Arc<Dataset>,
    f: impl Fn(&Value) -> Option<Value>,
) -> Result<(), SqlError> {
    let mut keys: Vec<Vec<Value>> = Vec::new();
    for r in ds.scan(Bound::Unbounded, Bound::Unbounded)? {
        let r = r?;
        if f(&r).is_some() {
            keys.push(
                ds.def()
                    .primary_key
                    .iter()
                    .map(|k| r.get(k).cloned().unwrap_or(Value::Null))
                    .collect(),
            );
        }
    }
    if keys.is_empty() {
        return Ok(());
    }
    let mut t = db.begin()?;
    let too_large = |e: silt::Error| match e {
        silt::Error::TxnTooLarge { what, limit } => SqlError::Unsupported(format!(
            "ALTER TABLE {} rewrites {} rows in one transaction, past its limit ({what}, limit {limit}); add the column without a DEFAULT and UPDATE it in batches",
            ds.name(),
            keys.len()
        )),
        other => other.into(),
    };
    for k in &keys {
        let Some(r) = t.get(ds, k)? else { continue };
        if let Some(new) = f(&r) {
            t.upsert(ds, new).map_err(too_large)?;
        }
    }
    t.commit()?;
    Ok(())
}
