//! The SQL standard's `information_schema`, as PostgreSQL fills it: type
//! names as PostgreSQL spells them (`bigint`, `text`, `double precision`,
//! `ARRAY`, `USER-DEFINED` with `udt_name` `geometry`), `BASE TABLE` and
//! `VIEW`, views in `views` only, primary keys in `table_constraints`,
//! `key_column_usage` and `constraint_column_usage`.
//!
//! It replaces DataFusion's (whose types read `Int64`, `Utf8`), except for
//! `routines`, `parameters` and `df_settings`, which stay DataFusion's:
//! its `SHOW FUNCTIONS` and `SHOW name` read them. DataFusion's `SHOW
//! TABLES` and `SHOW COLUMNS` read `tables` and `columns` here.

use std::sync::{Arc, Weak};

use async_trait::async_trait;
use datafusion::catalog::information_schema::InformationSchemaProvider;
use datafusion::catalog::{CatalogProviderList, MemTable, SchemaProvider, TableProvider};
use datafusion::error::Result as DfResult;

use super::columns::INFORMATION_SCHEMA;
use super::rows::constraint_oid;
use super::snapshot::{Relation, Snapshot, Source};
use super::table::{self, Cell, Row};
use super::types;

/// DataFusion's tables kept.
const DATAFUSION_TABLES: &[&str] = &["routines", "parameters", "df_settings"];

/// The `information_schema` schema.
pub struct InfoSchema {
    source: Arc<Source>,
    /// The session's catalogs, for DataFusion's own tables (weak: they
    /// hold this schema).
    catalogs: Weak<dyn CatalogProviderList>,
}

impl std::fmt::Debug for InfoSchema {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "InfoSchema({:?})", self.source)
    }
}

impl InfoSchema {
    pub fn new(source: Arc<Source>, catalogs: Weak<dyn CatalogProviderList>) -> Self {
        InfoSchema { source, catalogs }
    }
}

/// Whether `name` is one of the relations of `information_schema`.
pub fn is_relation(name: &str) -> bool {
    DATAFUSION_TABLES.contains(&name) || INFORMATION_SCHEMA.iter().any(|(n, _)| *n == name)
}

#[async_trait]
impl SchemaProvider for InfoSchema {
    fn table_names(&self) -> Vec<String> {
        INFORMATION_SCHEMA
            .iter()
            .map(|(n, _)| (*n).to_owned())
            .chain(DATAFUSION_TABLES.iter().map(|n| (*n).to_owned()))
            .collect()
    }

    async fn table(&self, name: &str) -> DfResult<Option<Arc<dyn TableProvider>>> {
        if DATAFUSION_TABLES.contains(&name) {
            let Some(catalogs) = self.catalogs.upgrade() else {
                return Ok(None);
            };
            return InformationSchemaProvider::new(catalogs).table(name).await;
        }
        let Some((name, cols)) = INFORMATION_SCHEMA.iter().find(|(n, _)| *n == name) else {
            return Ok(None);
        };
        let snap = self.source.snapshot();
        let batch = table::batch(cols, &rows(name, &snap))?;
        Ok(Some(Arc::new(MemTable::try_new(
            batch.schema(),
            vec![vec![batch]],
        )?)))
    }

    fn table_exist(&self, name: &str) -> bool {
        is_relation(name)
    }
}

fn yes(b: bool) -> Cell {
    if b { "YES" } else { "NO" }.into()
}

/// The relations listed: tables and views (not indexes).
fn listed(snap: &Snapshot) -> impl Iterator<Item = &Relation> {
    snap.relations
        .iter()
        .filter(|r| r.kind == 'r' || r.kind == 'v')
}

/// The rows of view `name`.
fn rows(name: &str, snap: &Snapshot) -> Vec<Row> {
    let db = snap.database.clone();
    match name {
        "schemata" => snap
            .namespaces
            .iter()
            .map(|n| {
                vec![
                    ("catalog_name", db.clone().into()),
                    ("schema_name", n.name.clone().into()),
                    ("schema_owner", owner(snap).into()),
                ]
            })
            .collect(),
        "tables" => listed(snap)
            .map(|r| {
                vec![
                    ("table_catalog", db.clone().into()),
                    ("table_schema", r.schema.clone().into()),
                    ("table_name", r.name.clone().into()),
                    (
                        "table_type",
                        if r.kind == 'v' { "VIEW" } else { "BASE TABLE" }.into(),
                    ),
                    ("is_insertable_into", yes(r.kind == 'r')),
                    ("is_typed", yes(false)),
                ]
            })
            .collect(),
        "sequences" => snap
            .sequences
            .iter()
            .map(|q| {
                vec![
                    ("sequence_catalog", db.clone().into()),
                    ("sequence_schema", q.schema.clone().into()),
                    ("sequence_name", q.name.clone().into()),
                    ("data_type", "bigint".into()),
                    ("numeric_precision", Cell::Int(64)),
                    ("numeric_precision_radix", Cell::Int(2)),
                    ("numeric_scale", Cell::Int(0)),
                    ("start_value", q.def.start.to_string().into()),
                    ("minimum_value", q.def.min.to_string().into()),
                    ("maximum_value", q.def.max.to_string().into()),
                    ("increment", q.def.increment.to_string().into()),
                    ("cycle_option", "NO".into()),
                ]
            })
            .collect(),
        "views" => listed(snap)
            .filter(|r| r.kind == 'v')
            .map(|r| {
                vec![
                    ("table_catalog", db.clone().into()),
                    ("table_schema", r.schema.clone().into()),
                    ("table_name", r.name.clone().into()),
                    (
                        "view_definition",
                        r.definition
                            .as_deref()
                            .map_or(Cell::Null, |d| super::functions::view_query(d).into()),
                    ),
                    ("check_option", "NONE".into()),
                    ("is_updatable", yes(false)),
                    ("is_insertable_into", yes(false)),
                    ("is_trigger_updatable", yes(false)),
                    ("is_trigger_deletable", yes(false)),
                    ("is_trigger_insertable_into", yes(false)),
                ]
            })
            .collect(),
        "columns" => listed(snap).flat_map(|r| column_rows(&db, r)).collect(),
        "table_constraints" => key_constraints(snap)
            .map(|(ix, t)| {
                let primary = ix.index.as_ref().is_some_and(|of| of.primary);
                vec![
                    ("constraint_catalog", db.clone().into()),
                    ("constraint_schema", ix.schema.clone().into()),
                    ("constraint_name", ix.name.clone().into()),
                    ("table_catalog", db.clone().into()),
                    ("table_schema", t.schema.clone().into()),
                    ("table_name", t.name.clone().into()),
                    (
                        "constraint_type",
                        if primary { "PRIMARY KEY" } else { "UNIQUE" }.into(),
                    ),
                    ("is_deferrable", yes(false)),
                    ("initially_deferred", yes(false)),
                    ("enforced", yes(true)),
                ]
            })
            .collect(),
        "key_column_usage" | "constraint_column_usage" => key_constraints(snap)
            .flat_map(|(ix, t)| {
                let db = db.clone();
                ix.columns.iter().enumerate().map(move |(i, c)| {
                    let mut row: Row = vec![
                        ("constraint_catalog", db.clone().into()),
                        ("constraint_schema", ix.schema.clone().into()),
                        ("constraint_name", ix.name.clone().into()),
                        ("table_catalog", db.clone().into()),
                        ("table_schema", t.schema.clone().into()),
                        ("table_name", t.name.clone().into()),
                        ("column_name", c.name.clone().into()),
                    ];
                    if name == "key_column_usage" {
                        row.push(("ordinal_position", Cell::Int(i as i64 + 1)));
                    }
                    row
                })
            })
            .collect(),
        _ => vec![],
    }
}

fn owner(snap: &Snapshot) -> String {
    snap.role_name(super::snapshot::OWNER)
        .unwrap_or("silt")
        .to_owned()
}

/// Each table's primary-key and unique indexes, each with the table.
fn key_constraints(snap: &Snapshot) -> impl Iterator<Item = (&Relation, &Relation)> {
    snap.relations.iter().filter_map(|ix| {
        let of = ix.index.as_ref().filter(|of| of.unique)?;
        let t = snap.relation(of.table)?;
        debug_assert!(constraint_oid(ix) > 0);
        Some((ix, t))
    })
}

fn column_rows(db: &str, r: &Relation) -> Vec<Row> {
    r.columns
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let ty = types::by_oid(c.type_oid);
            let data_type = match ty {
                Some(t) if t.category == 'A' => "ARRAY".to_owned(),
                Some(t) if t.oid == types::GEOMETRY => "USER-DEFINED".to_owned(),
                _ => types::display_name(c.type_oid).unwrap_or_else(|| "text".to_owned()),
            };
            let (precision, radix, scale) = match c.type_oid {
                20 => (Cell::Int(64), Cell::Int(2), Cell::Int(0)),
                23 => (Cell::Int(32), Cell::Int(2), Cell::Int(0)),
                21 => (Cell::Int(16), Cell::Int(2), Cell::Int(0)),
                701 => (Cell::Int(53), Cell::Int(2), Cell::Null),
                700 => (Cell::Int(24), Cell::Int(2), Cell::Null),
                1700 if c.typmod >= 4 => (
                    Cell::Int((c.typmod - 4) >> 16),
                    Cell::Int(10),
                    Cell::Int((c.typmod - 4) & 0xffff),
                ),
                _ => (Cell::Null, Cell::Null, Cell::Null),
            };
            let identity = |f: fn(&silt::SequenceDef) -> String| {
                c.identity.as_ref().map_or(Cell::Null, |s| f(s).into())
            };
            vec![
                ("table_catalog", db.into()),
                ("table_schema", r.schema.clone().into()),
                ("table_name", r.name.clone().into()),
                ("column_name", c.name.clone().into()),
                ("ordinal_position", Cell::Int(i as i64 + 1)),
                (
                    "column_default",
                    c.default.clone().map_or(Cell::Null, Cell::from),
                ),
                ("is_nullable", yes(!c.not_null)),
                ("data_type", data_type.into()),
                (
                    "character_maximum_length",
                    if c.type_oid == 1043 && c.typmod >= 4 {
                        Cell::Int(c.typmod - 4)
                    } else {
                        Cell::Null
                    },
                ),
                ("numeric_precision", precision),
                ("numeric_precision_radix", radix),
                ("numeric_scale", scale),
                ("udt_catalog", db.into()),
                (
                    "udt_schema",
                    if c.type_oid == types::GEOMETRY {
                        "public"
                    } else {
                        "pg_catalog"
                    }
                    .into(),
                ),
                (
                    "udt_name",
                    ty.map_or(Cell::Text("text".into()), |t| t.name.into()),
                ),
                ("dtd_identifier", (i + 1).to_string().into()),
                ("is_self_referencing", yes(false)),
                ("is_identity", yes(c.identity.is_some())),
                (
                    "identity_generation",
                    identity(|s| {
                        if s.identity == Some(silt::Identity::Always) {
                            "ALWAYS".to_owned()
                        } else {
                            "BY DEFAULT".to_owned()
                        }
                    }),
                ),
                ("identity_start", identity(|s| s.start.to_string())),
                ("identity_increment", identity(|s| s.increment.to_string())),
                ("identity_maximum", identity(|s| s.max.to_string())),
                ("identity_minimum", identity(|s| s.min.to_string())),
                ("identity_cycle", identity(|_| "NO".to_owned())),
                ("is_generated", "NEVER".into()),
                ("is_updatable", yes(r.kind == 'r')),
            ]
        })
        .collect()
}
