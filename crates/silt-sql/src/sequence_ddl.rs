//! `CREATE SEQUENCE [IF NOT EXISTS] name [AS type] [options]`, `ALTER
//! SEQUENCE [IF EXISTS] name steps` and `DROP SEQUENCE [IF EXISTS] a, b`:
//! sequences of their own ([`silt::Database::create_sequence`]), read by
//! `nextval('name')`, `currval`, `setval` ([`crate::sequences`]) and listed
//! by `pg_class`, `pg_sequences` and `information_schema.sequences`.
//! `AS smallint` / `AS integer` bound the values by the type, as in
//! PostgreSQL; `CYCLE` is refused (a wrapped sequence hands its values out
//! again), as are `OWNED BY` and temporary sequences.

use datafusion::sql::sqlparser::ast::{DataType, ObjectName, SequenceOptions};
use silt::{Database, SequenceDef};

use crate::ddl;
use crate::error::SqlError;
use crate::identity::alter::Step;

/// A sequence statement the SQL layer runs.
#[derive(Debug, Clone)]
pub enum SeqStmt {
    Create {
        name: String,
        if_not_exists: bool,
        def: SequenceDef,
    },
    Alter {
        name: String,
        if_exists: bool,
        steps: Vec<Step>,
    },
    Drop {
        names: Vec<String>,
        if_exists: bool,
    },
}

/// The statement of a parsed `CREATE SEQUENCE`.
pub fn create(
    name: &ObjectName,
    if_not_exists: bool,
    temporary: bool,
    data_type: Option<&DataType>,
    options: &[SequenceOptions],
    owned_by: Option<&ObjectName>,
) -> Result<SeqStmt, SqlError> {
    let name = ddl::object_parts(name)
        .pop()
        .ok_or_else(|| SqlError::Invalid(format!("bad sequence name `{name}`")))?;
    if temporary {
        return Err(SqlError::Unsupported(format!(
            "CREATE TEMPORARY SEQUENCE {name}: sequences are kept with the database"
        )));
    }
    if let Some(o) = owned_by {
        return Err(SqlError::Unsupported(format!(
            "CREATE SEQUENCE {name} OWNED BY {o}: a column's own counter is a SERIAL or identity column"
        )));
    }
    let bound = match data_type.map(|t| t.to_string().to_ascii_lowercase()) {
        None => None,
        Some(t) if matches!(t.as_str(), "bigint" | "int8") => None,
        Some(t) if matches!(t.as_str(), "integer" | "int" | "int4") => Some(i64::from(i32::MAX)),
        Some(t) if matches!(t.as_str(), "smallint" | "int2") => Some(i64::from(i16::MAX)),
        Some(t) => {
            return Err(SqlError::Invalid(format!(
                "sequence `{name}`: AS {t}; a sequence is smallint, integer or bigint"
            )));
        }
    };
    let def = crate::identity::sequence(&format!("sequence `{name}`"), &name, options, bound)?;
    Ok(SeqStmt::Create {
        name,
        if_not_exists,
        def,
    })
}

/// Run `stmt` (blocking: it writes the catalog).
pub(crate) fn run(db: &Database, stmt: &SeqStmt) -> Result<(), SqlError> {
    match stmt {
        SeqStmt::Create {
            name,
            if_not_exists,
            def,
        } => match db.create_sequence(name, *def) {
            Err(silt::Error::SequenceExists { .. }) if *if_not_exists => Ok(()),
            r => Ok(r?),
        },
        SeqStmt::Alter {
            name,
            if_exists,
            steps,
        } => {
            let old = match db.sequence(name) {
                Ok(d) => d,
                Err(silt::Error::NoSuchSequence(_)) if *if_exists => return Ok(()),
                Err(e) => return Err(e.into()),
            };
            let new = crate::identity::alter::changed(name, old, steps)?;
            if new != old {
                db.alter_sequence(name, |d| {
                    *d = new;
                    Ok(())
                })?;
            }
            if let Some(at) = crate::identity::alter::restart(steps) {
                db.set_sequence_value(name, at.unwrap_or(new.start), false)?;
            }
            Ok(())
        }
        SeqStmt::Drop { names, if_exists } => {
            // Every name is checked before any is dropped.
            let known = db.sequences();
            for n in names {
                if !*if_exists && !known.iter().any(|(k, _)| k == n) {
                    return Err(silt::Error::NoSuchSequence(n.clone()).into());
                }
            }
            for n in names {
                match db.drop_sequence(n) {
                    Err(silt::Error::NoSuchSequence(_)) if *if_exists => {}
                    r => r?,
                }
            }
            Ok(())
        }
    }
}
