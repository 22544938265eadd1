//! The rows of each catalog relation, made from a [`Snapshot`].
//!
//! What Silt has is described as PostgreSQL would describe its nearest
//! equivalent: a dataset is a table (`relkind` `r`, access method `lsm`),
//! its primary key a unique index `<table>_pkey` and a constraint of that
//! name, each secondary index an index whose access method is its kind
//! (`btree`, `rtree`, `keyword`...). Relations of features Silt lacks
//! (policies, publications, inheritance, triggers...) are empty.

use super::snapshot::{
    AM_LSM, FIRST_OBJECT_OID, OWNER, PG_CATALOG, Relation, Snapshot, am_of, oid_of,
};
use super::table::{Cell, Row};
use super::types::{self, TYPES};
use silt::IndexKind;

/// The version Silt reports as PostgreSQL's (clients pick their SQL by it).
pub const SERVER_VERSION: &str = "16.6";
/// [`SERVER_VERSION`] as `server_version_num`.
pub const SERVER_VERSION_NUM: &str = "160006";

/// The default collation's oid.
const DEFAULT_COLLATION: i64 = 100;

fn collation_of(type_oid: i64) -> i64 {
    match types::by_oid(type_oid) {
        Some(t) if t.category == 'S' => DEFAULT_COLLATION,
        _ => 0,
    }
}

/// The rows of catalog relation `name`; `None` for one with no rows in Silt.
pub fn rows(name: &str, snap: &Snapshot) -> Option<Vec<Row>> {
    Some(match name {
        "pg_namespace" => snap
            .namespaces
            .iter()
            .map(|n| {
                vec![
                    ("oid", n.oid.into()),
                    ("nspname", n.name.clone().into()),
                    ("nspowner", OWNER.into()),
                ]
            })
            .collect(),
        "pg_class" => snap.relations.iter().map(class_row).collect(),
        "pg_attribute" => snap.relations.iter().flat_map(attribute_rows).collect(),
        "pg_attrdef" => snap.relations.iter().flat_map(attrdef_rows).collect(),
        "pg_type" => type_rows(),
        "pg_index" => snap.relations.iter().filter_map(index_row).collect(),
        "pg_constraint" => snap
            .relations
            .iter()
            .filter_map(constraint_row)
            .chain(snap.relations.iter().flat_map(check_rows))
            .chain(
                snap.relations
                    .iter()
                    .flat_map(|r| foreign_key_rows(snap, r)),
            )
            .collect(),
        "pg_am" => am_rows(),
        "pg_database" => vec![vec![
            ("oid", oid_of(&["database", &snap.database]).into()),
            ("datname", snap.database.clone().into()),
            ("datdba", OWNER.into()),
            ("encoding", 6.into()),
            ("datlocprovider", 'c'.into()),
            ("datistemplate", false.into()),
            ("datallowconn", true.into()),
            ("datconnlimit", Cell::Int(-1)),
            ("datcollate", "C".into()),
            ("datctype", "C".into()),
        ]],
        "pg_roles" | "pg_authid" => snap
            .roles
            .iter()
            .map(|r| {
                vec![
                    ("oid", r.oid.into()),
                    ("rolname", r.name.clone().into()),
                    ("rolsuper", r.superuser.into()),
                    ("rolinherit", true.into()),
                    ("rolcreaterole", r.superuser.into()),
                    ("rolcreatedb", r.superuser.into()),
                    ("rolcanlogin", r.login.into()),
                    ("rolbypassrls", r.superuser.into()),
                    ("rolconnlimit", Cell::Int(-1)),
                    ("rolpassword", "********".into()),
                ]
            })
            .collect(),
        "pg_user" => snap
            .roles
            .iter()
            .filter(|r| r.login)
            .map(|r| {
                vec![
                    ("usename", r.name.clone().into()),
                    ("usesysid", r.oid.into()),
                    ("usecreatedb", r.superuser.into()),
                    ("usesuper", r.superuser.into()),
                    ("usebypassrls", r.superuser.into()),
                    ("passwd", "********".into()),
                ]
            })
            .collect(),
        "pg_collation" => [(100, "default", 'd'), (950, "C", 'c'), (951, "POSIX", 'c')]
            .into_iter()
            .map(|(oid, name, provider)| {
                vec![
                    ("oid", Cell::Int(oid)),
                    ("collname", name.into()),
                    ("collnamespace", PG_CATALOG.into()),
                    ("collowner", OWNER.into()),
                    ("collprovider", provider.into()),
                    ("collisdeterministic", true.into()),
                    ("collencoding", Cell::Int(-1)),
                    ("collcollate", "C".into()),
                    ("collctype", "C".into()),
                ]
            })
            .collect(),
        "pg_tables" => snap
            .relations
            .iter()
            .filter(|r| r.kind == 'r')
            .map(|r| {
                vec![
                    ("schemaname", r.schema.clone().into()),
                    ("tablename", r.name.clone().into()),
                    ("tableowner", owner_name(snap).into()),
                    ("hasindexes", r.has_index.into()),
                ]
            })
            .collect(),
        "pg_sequences" => snap
            .sequences
            .iter()
            .map(|q| {
                vec![
                    ("schemaname", q.schema.clone().into()),
                    ("sequencename", q.name.clone().into()),
                    ("sequenceowner", owner_name(snap).into()),
                    ("data_type", Cell::Int(20)),
                    ("start_value", Cell::Int(q.def.start)),
                    ("min_value", Cell::Int(q.def.min)),
                    ("max_value", Cell::Int(q.def.max)),
                    ("increment_by", Cell::Int(q.def.increment)),
                    ("cycle", false.into()),
                    ("cache_size", Cell::Int(1)),
                    (
                        "last_value",
                        if q.next == q.def.start {
                            Cell::Null
                        } else {
                            Cell::Int(q.next - q.def.increment)
                        },
                    ),
                ]
            })
            .collect(),
        "pg_sequence" => snap
            .sequences
            .iter()
            .map(|q| {
                vec![
                    ("seqrelid", q.oid.into()),
                    ("seqtypid", Cell::Int(20)),
                    ("seqstart", Cell::Int(q.def.start)),
                    ("seqincrement", Cell::Int(q.def.increment)),
                    ("seqmax", Cell::Int(q.def.max)),
                    ("seqmin", Cell::Int(q.def.min)),
                    ("seqcache", Cell::Int(1)),
                    ("seqcycle", false.into()),
                ]
            })
            .collect(),
        "pg_views" => snap
            .relations
            .iter()
            .filter(|r| r.kind == 'v')
            .map(|r| {
                vec![
                    ("schemaname", r.schema.clone().into()),
                    ("viewname", r.name.clone().into()),
                    ("viewowner", owner_name(snap).into()),
                    (
                        "definition",
                        r.definition
                            .as_deref()
                            .map_or(Cell::Null, |d| super::functions::view_query(d).into()),
                    ),
                ]
            })
            .collect(),
        "pg_indexes" => snap
            .relations
            .iter()
            .filter_map(|r| {
                let of = r.index.as_ref()?;
                let table = snap.relation(of.table)?;
                Some(vec![
                    ("schemaname", r.schema.clone().into()),
                    ("tablename", table.name.clone().into()),
                    ("indexname", r.name.clone().into()),
                    ("indexdef", index_definition(snap, r)?.into()),
                ])
            })
            .collect(),
        "pg_settings" => settings_rows(),
        _ => return None,
    })
}

fn owner_name(snap: &Snapshot) -> String {
    snap.role_name(OWNER).unwrap_or("silt").to_owned()
}

fn class_row(r: &Relation) -> Row {
    vec![
        ("oid", r.oid.into()),
        ("relname", r.name.clone().into()),
        ("relnamespace", r.namespace.into()),
        ("relowner", OWNER.into()),
        ("relam", r.am.into()),
        ("relfilenode", if r.kind == 'v' { 0 } else { r.oid }.into()),
        ("reltuples", Cell::Float(-1.0)),
        ("relhasindex", r.has_index.into()),
        // PostgreSQL keeps foreign keys with triggers, and psql's `\d`
        // shows a table's keys only when it has some.
        ("relhastriggers", has_foreign_keys(r).into()),
        ("relchecks", Cell::Int(checks_of(r).len() as i64)),
        ("relpersistence", 'p'.into()),
        ("relkind", r.kind.into()),
        ("relnatts", Cell::Int(r.columns.len() as i64)),
        ("relispopulated", true.into()),
        ("relreplident", if r.kind == 'r' { 'd' } else { 'n' }.into()),
    ]
}

fn attribute_rows(r: &Relation) -> Vec<Row> {
    r.columns
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let ty = types::by_oid(c.type_oid);
            let len = ty.map_or(-1, |t| i64::from(t.len));
            vec![
                ("attrelid", r.oid.into()),
                ("attname", c.name.clone().into()),
                ("atttypid", c.type_oid.into()),
                ("attlen", len.into()),
                ("attnum", Cell::Int(i as i64 + 1)),
                ("atttypmod", Cell::Int(c.typmod)),
                ("attbyval", (len > 0 && len <= 8).into()),
                ("attalign", if len == 8 { 'd' } else { 'i' }.into()),
                ("attstorage", if len > 0 { 'p' } else { 'x' }.into()),
                ("attnotnull", c.not_null.into()),
                ("atthasdef", c.default.is_some().into()),
                (
                    "attidentity",
                    match c.identity.and_then(|s| s.identity) {
                        Some(silt::Identity::Always) => "a",
                        Some(silt::Identity::ByDefault) => "d",
                        None => "",
                    }
                    .into(),
                ),
                ("attgenerated", "".into()),
                ("attislocal", true.into()),
                ("attstattarget", Cell::Int(-1)),
                ("attcollation", collation_of(c.type_oid).into()),
            ]
        })
        .collect()
}

/// A row per column `DEFAULT`; `adbin` holds the SQL text, which is what
/// `pg_get_expr` gives back.
fn attrdef_rows(r: &Relation) -> Vec<Row> {
    r.columns
        .iter()
        .enumerate()
        .filter_map(|(i, c)| {
            let d = c.default.as_ref()?;
            Some(vec![
                (
                    "oid",
                    super::snapshot::oid_of(&["attrdef", &r.oid.to_string(), &c.name]).into(),
                ),
                ("adrelid", r.oid.into()),
                ("adnum", Cell::Int(i as i64 + 1)),
                ("adbin", d.clone().into()),
            ])
        })
        .collect()
}

fn type_rows() -> Vec<Row> {
    TYPES
        .iter()
        .map(|t| {
            vec![
                ("oid", t.oid.into()),
                ("typname", t.name.into()),
                ("typnamespace", PG_CATALOG.into()),
                ("typowner", OWNER.into()),
                ("typlen", i64::from(t.len).into()),
                ("typbyval", (t.len > 0 && t.len <= 8).into()),
                ("typtype", if t.category == 'P' { 'p' } else { 'b' }.into()),
                ("typcategory", t.category.into()),
                ("typisdefined", true.into()),
                ("typdelim", ','.into()),
                ("typelem", t.elem.into()),
                (
                    "typinput",
                    if t.category == 'A' {
                        types::ARRAY_IN
                    } else {
                        0
                    }
                    .into(),
                ),
                ("typarray", t.array.into()),
                ("typalign", if t.len == 8 { 'd' } else { 'i' }.into()),
                ("typstorage", if t.len > 0 { 'p' } else { 'x' }.into()),
                ("typtypmod", Cell::Int(-1)),
                ("typcollation", collation_of(t.oid).into()),
            ]
        })
        .collect()
}

fn index_row(r: &Relation) -> Option<Row> {
    let of = r.index.as_ref()?;
    let n = of.keys.len() as i64;
    Some(vec![
        ("indexrelid", r.oid.into()),
        ("indrelid", of.table.into()),
        ("indnatts", n.into()),
        ("indnkeyatts", n.into()),
        ("indisunique", of.unique.into()),
        ("indisprimary", of.primary.into()),
        ("indimmediate", true.into()),
        ("indisvalid", true.into()),
        ("indisready", true.into()),
        ("indislive", true.into()),
        (
            "indkey",
            Cell::Ints(of.keys.iter().map(|k| i64::from(*k)).collect()),
        ),
        ("indoption", Cell::Ints(vec![0; of.keys.len()])),
        (
            "indcollation",
            Cell::Ints(r.columns.iter().map(|c| collation_of(c.type_oid)).collect()),
        ),
        ("indclass", Cell::Ints(vec![0; of.keys.len()])),
    ])
}

/// The oid of a table's primary-key or unique constraint.
pub fn constraint_oid(index: &Relation) -> i64 {
    oid_of(&["constraint", &index.schema, &index.name])
}

/// A table's `CHECK` constraints: (oid, name, expression).
pub fn checks_of(table: &Relation) -> Vec<(i64, String, String)> {
    let Some(ds) = table.dataset.as_ref().filter(|_| table.kind == 'r') else {
        return Vec::new();
    };
    ds.def()
        .checks
        .iter()
        .map(|c| {
            (
                oid_of(&["check", &table.schema, &table.name, &c.name]),
                c.name.clone(),
                c.expr.clone(),
            )
        })
        .collect()
}

fn check_rows(r: &Relation) -> Vec<Row> {
    checks_of(r)
        .into_iter()
        .map(|(oid, name, expr)| {
            vec![
                ("oid", oid.into()),
                ("conname", name.into()),
                ("connamespace", r.namespace.into()),
                ("contype", 'c'.into()),
                ("condeferrable", false.into()),
                ("condeferred", false.into()),
                ("convalidated", true.into()),
                ("conrelid", r.oid.into()),
                ("conindid", Cell::Int(0)),
                ("conislocal", true.into()),
                ("connoinherit", false.into()),
                ("conbin", expr.into()),
            ]
        })
        .collect()
}

/// A table's foreign key as the catalog shows it.
pub struct ForeignKeyRow {
    pub oid: i64,
    pub def: silt::ForeignKeyDef,
    /// The referenced table's oid (0 when it is not in the snapshot).
    pub parent: i64,
    /// Attribute numbers of the referencing and referenced columns.
    pub keys: Vec<i64>,
    pub parent_keys: Vec<i64>,
    /// The referenced table's primary key columns.
    pub parent_key: Vec<String>,
}

/// Whether a table has foreign keys or is referenced by one.
fn has_foreign_keys(r: &Relation) -> bool {
    r.dataset
        .as_ref()
        .filter(|_| r.kind == 'r')
        .is_some_and(|d| d.has_links())
}

/// The foreign keys of table `table`.
pub fn foreign_keys_of(snap: &Snapshot, table: &Relation) -> Vec<ForeignKeyRow> {
    let Some(ds) = table.dataset.as_ref().filter(|_| table.kind == 'r') else {
        return Vec::new();
    };
    let attnum = |r: &Relation, c: &str| {
        r.columns
            .iter()
            .position(|x| x.name == c)
            .map_or(0, |i| i as i64 + 1)
    };
    ds.def()
        .foreign_keys
        .iter()
        .map(|fk| {
            let parent = snap
                .relations
                .iter()
                .find(|p| p.kind == 'r' && p.schema == table.schema && p.name == fk.parent);
            let parent_key = parent
                .and_then(|p| p.dataset.as_ref())
                .map(|d| d.def().primary_key.clone())
                .unwrap_or_default();
            ForeignKeyRow {
                oid: oid_of(&["fkey", &table.schema, &table.name, &fk.name]),
                keys: fk.fields.iter().map(|f| attnum(table, f)).collect(),
                parent_keys: parent.map_or_else(Vec::new, |p| {
                    parent_key.iter().map(|k| attnum(p, k)).collect()
                }),
                parent: parent.map_or(0, |p| p.oid),
                parent_key,
                def: fk.clone(),
            }
        })
        .collect()
}

fn foreign_key_rows(snap: &Snapshot, r: &Relation) -> Vec<Row> {
    foreign_keys_of(snap, r)
        .into_iter()
        .map(|f| {
            let del = match f.def.on_delete {
                silt::FkAction::Cascade => 'c',
                silt::FkAction::Restrict => 'r',
            };
            vec![
                ("oid", f.oid.into()),
                ("conname", f.def.name.clone().into()),
                ("connamespace", r.namespace.into()),
                ("contype", 'f'.into()),
                ("condeferrable", false.into()),
                ("condeferred", false.into()),
                ("convalidated", true.into()),
                ("conrelid", r.oid.into()),
                ("conindid", Cell::Int(0)),
                ("conparentid", Cell::Int(0)),
                ("confrelid", f.parent.into()),
                ("confupdtype", 'a'.into()),
                ("confdeltype", del.into()),
                ("confmatchtype", 's'.into()),
                ("conislocal", true.into()),
                ("connoinherit", true.into()),
                ("conkey", Cell::Ints(f.keys)),
                ("confkey", Cell::Ints(f.parent_keys)),
            ]
        })
        .collect()
}

fn constraint_row(r: &Relation) -> Option<Row> {
    let of = r.index.as_ref().filter(|of| of.unique)?;
    Some(vec![
        ("oid", constraint_oid(r).into()),
        ("conname", r.name.clone().into()),
        ("connamespace", r.namespace.into()),
        ("contype", if of.primary { 'p' } else { 'u' }.into()),
        ("condeferrable", false.into()),
        ("condeferred", false.into()),
        ("convalidated", true.into()),
        ("conrelid", of.table.into()),
        ("conindid", r.oid.into()),
        ("conislocal", true.into()),
        ("connoinherit", true.into()),
        (
            "conkey",
            Cell::Ints(of.keys.iter().map(|k| i64::from(*k)).collect()),
        ),
    ])
}

fn am_rows() -> Vec<Row> {
    let mut out = vec![vec![
        ("oid", AM_LSM.into()),
        ("amname", "lsm".into()),
        ("amtype", 't'.into()),
    ]];
    for kind in IndexKind::ALL {
        out.push(vec![
            ("oid", am_of(kind).into()),
            ("amname", kind.to_string().into()),
            ("amtype", 'i'.into()),
        ]);
    }
    debug_assert!(am_of(IndexKind::ALL[IndexKind::ALL.len() - 1]) < FIRST_OBJECT_OID);
    out
}

/// `CREATE [UNIQUE] INDEX name ON schema.table USING method (columns)`.
pub fn index_definition(snap: &Snapshot, index: &Relation) -> Option<String> {
    let of = index.index.as_ref()?;
    let table = snap.relation(of.table)?;
    let cols: Vec<String> = index.columns.iter().map(|c| quote_ident(&c.name)).collect();
    Some(format!(
        "CREATE {}INDEX {} ON {}.{} USING {} ({})",
        if of.unique { "UNIQUE " } else { "" },
        quote_ident(&index.name),
        quote_ident(&table.schema),
        quote_ident(&table.name),
        of.method,
        cols.join(", ")
    ))
}

/// An identifier as PostgreSQL prints it: bare when it is lower-case
/// letters, digits and `_` (not first a digit), else double-quoted.
pub fn quote_ident(s: &str) -> String {
    let plain = !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
        && !s.starts_with(|c: char| c.is_ascii_digit());
    if plain {
        s.to_owned()
    } else {
        format!("\"{}\"", s.replace('"', "\"\""))
    }
}

/// The settings clients read from `pg_settings` (and `SHOW`).
pub const SETTINGS: &[(&str, &str, &str)] = &[
    ("client_encoding", "UTF8", "string"),
    ("DateStyle", "ISO, MDY", "string"),
    ("default_table_access_method", "lsm", "string"),
    ("default_transaction_isolation", "read committed", "enum"),
    ("integer_datetimes", "on", "bool"),
    ("IntervalStyle", "postgres", "enum"),
    ("max_identifier_length", "63", "integer"),
    ("max_index_keys", "32", "integer"),
    ("search_path", "\"$user\", public", "string"),
    ("server_encoding", "UTF8", "string"),
    ("server_version", SERVER_VERSION, "string"),
    ("server_version_num", SERVER_VERSION_NUM, "integer"),
    ("standard_conforming_strings", "on", "bool"),
    ("TimeZone", "UTC", "string"),
];

fn settings_rows() -> Vec<Row> {
    SETTINGS
        .iter()
        .map(|(name, value, vartype)| {
            vec![
                ("name", (*name).into()),
                ("setting", (*value).into()),
                ("vartype", (*vartype).into()),
                ("context", "user".into()),
                ("source", "default".into()),
                ("boot_val", (*value).into()),
                ("reset_val", (*value).into()),
                ("pending_restart", false.into()),
            ]
        })
        .collect()
}
