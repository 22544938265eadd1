//! What the catalog describes, read at one moment: schemas, relations
//! (tables, views, indexes), their columns, and roles.
//!
//! Oids: PostgreSQL's own for `pg_catalog` (11), `public` (2200) and the
//! built-in types and roles (10, the bootstrap superuser); every other
//! object's is a stable hash of its kind and qualified name into
//! [`FIRST_OBJECT_OID`]`..2^31`, so a client that looked an oid up may use
//! it in its next statement, and after a restart. Two names hashing to one
//! oid would show as one object; at a few thousand objects the chance is
//! about one in a thousand million.

use std::sync::{Arc, Weak};

use datafusion::catalog::{CatalogProvider, SchemaProvider};
use datafusion::datasource::TableType;
use futures::FutureExt;
use silt::{Database, Dataset, IndexKind};

use super::columns::{INFORMATION_SCHEMA, RELATIONS};
use super::types;
use crate::convert;

/// `pg_catalog`'s oid.
pub const PG_CATALOG: i64 = 11;
/// `public`'s oid.
pub const PUBLIC: i64 = 2200;
/// `information_schema`'s oid.
pub const INFORMATION_SCHEMA_OID: i64 = 13_000;
/// The bootstrap superuser's oid (every relation's owner).
pub const OWNER: i64 = 10;
/// The table access method of Silt's datasets (`lsm`).
pub const AM_LSM: i64 = 9_100;
/// The first oid hashed objects get.
pub const FIRST_OBJECT_OID: i64 = 16_384;

/// The access method (`pg_am` oid) of an index kind.
pub fn am_of(kind: IndexKind) -> i64 {
    let pos = IndexKind::ALL.iter().position(|k| *k == kind).unwrap_or(0);
    AM_LSM + 1 + pos as i64
}

/// A stable oid for an object: FNV-1a of `parts`.
pub fn oid_of(parts: &[&str]) -> i64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for p in parts {
        for b in p.bytes().chain(std::iter::once(0)) {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
    }
    let span = (1_i64 << 31) - FIRST_OBJECT_OID;
    FIRST_OBJECT_OID + (h % span as u64) as i64
}

/// A schema.
#[derive(Debug, Clone)]
pub struct Namespace {
    pub oid: i64,
    pub name: String,
}

/// A column of a relation.
#[derive(Debug, Clone)]
pub struct Column {
    pub name: String,
    pub type_oid: i64,
    /// PostgreSQL's type modifier: `numeric(p,s)` is `(p << 16 | s) + 4`;
    /// -1 for none.
    pub typmod: i64,
    pub not_null: bool,
    /// The `DEFAULT`, as SQL text (none for an identity column, as in
    /// PostgreSQL).
    pub default: Option<String>,
    /// An identity column's sequence.
    pub identity: Option<silt::SequenceDef>,
}

/// What an index is over, for `pg_index`.
#[derive(Debug, Clone)]
pub struct IndexOf {
    pub table: i64,
    /// Attribute numbers of the indexed columns in the table.
    pub keys: Vec<i16>,
    pub primary: bool,
    /// The primary key's index, or a unique index (SQL's `UNIQUE`).
    pub unique: bool,
    /// The kind's name, as `CREATE INDEX ... USING` takes it.
    pub method: String,
}

/// A table, view or index.
#[derive(Clone)]
pub struct Relation {
    pub oid: i64,
    pub name: String,
    pub namespace: i64,
    pub schema: String,
    /// `r` table, `v` view, `i` index.
    pub kind: char,
    /// The access method (`pg_am` oid); 0 for views.
    pub am: i64,
    pub columns: Vec<Column>,
    /// A view's query.
    pub definition: Option<String>,
    /// A Silt dataset's storage (sizes), for tables and their indexes.
    pub dataset: Option<Arc<Dataset>>,
    /// For an index, what it indexes.
    pub index: Option<IndexOf>,
    /// For a table, whether it has indexes (its primary key counts).
    pub has_index: bool,
}

/// A role.
#[derive(Debug, Clone)]
pub struct RoleRow {
    pub oid: i64,
    pub name: String,
    pub superuser: bool,
    pub login: bool,
}

/// The whole catalog at one moment.
#[derive(Clone)]
pub struct Snapshot {
    pub database: String,
    pub namespaces: Vec<Namespace>,
    pub relations: Vec<Relation>,
    pub roles: Vec<RoleRow>,
    /// The sequences (each also a relation of kind `S`).
    pub sequences: Vec<SequenceRow>,
}

/// A sequence: one of its own (`CREATE SEQUENCE`) or a `SERIAL` or
/// identity column's.
#[derive(Debug, Clone)]
pub struct SequenceRow {
    pub oid: i64,
    pub name: String,
    pub schema: String,
    pub def: silt::SequenceDef,
    /// The value it hands out next.
    pub next: i64,
}

impl Snapshot {
    /// The relation with this oid.
    pub fn relation(&self, oid: i64) -> Option<&Relation> {
        self.relations.iter().find(|r| r.oid == oid)
    }

    /// The relation a (possibly schema-qualified, possibly quoted) name
    /// names, searching `public` then `pg_catalog` when unqualified.
    pub fn relation_named(&self, name: &str) -> Option<&Relation> {
        let parts = split_name(name);
        match parts.as_slice() {
            [n] => ["public", "pg_catalog"].iter().find_map(|s| {
                self.relations
                    .iter()
                    .find(|r| r.schema == *s && r.name == *n && r.kind != 'i')
                    .or_else(|| {
                        self.relations
                            .iter()
                            .find(|r| r.schema == *s && r.name == *n)
                    })
            }),
            [s, n] => self
                .relations
                .iter()
                .find(|r| r.schema == *s && r.name == *n),
            _ => None,
        }
    }

    /// The name of the role with this oid.
    pub fn role_name(&self, oid: i64) -> Option<&str> {
        self.roles
            .iter()
            .find(|r| r.oid == oid)
            .map(|r| r.name.as_str())
    }

    /// The name of the schema with this oid.
    pub fn namespace_name(&self, oid: i64) -> Option<&str> {
        self.namespaces
            .iter()
            .find(|n| n.oid == oid)
            .map(|n| n.name.as_str())
    }
}

/// `a.b` or `"A"."b"` as its parts, unquoted ones lower-cased.
pub fn split_name(name: &str) -> Vec<String> {
    let mut parts = Vec::new();
    let mut cur = String::new();
    let mut quoted = false;
    let mut chars = name.trim().chars().peekable();
    let mut was_quoted = false;
    while let Some(c) = chars.next() {
        match c {
            '"' if quoted && chars.peek() == Some(&'"') => {
                chars.next();
                cur.push('"');
            }
            '"' => {
                quoted = !quoted;
                was_quoted = true;
            }
            '.' if !quoted => {
                parts.push(finish(&mut cur, &mut was_quoted));
            }
            c => cur.push(c),
        }
    }
    parts.push(finish(&mut cur, &mut was_quoted));
    parts
}

fn finish(cur: &mut String, was_quoted: &mut bool) -> String {
    let s = std::mem::take(cur);
    let out = if *was_quoted { s } else { s.to_lowercase() };
    *was_quoted = false;
    out
}

/// Where a snapshot is read from.
pub struct Source {
    pub db: Arc<Database>,
    /// The session's catalog (weak: the catalog holds this source).
    pub catalog: Weak<dyn CatalogProvider>,
    pub catalog_name: String,
    pub default_schema: String,
}

impl std::fmt::Debug for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Source({})", self.catalog_name)
    }
}

impl Source {
    /// Read the catalog now.
    pub fn snapshot(&self) -> Snapshot {
        let mut namespaces = vec![
            Namespace {
                oid: PG_CATALOG,
                name: "pg_catalog".to_owned(),
            },
            Namespace {
                oid: PUBLIC,
                name: self.default_schema.clone(),
            },
            // DataFusion's, kept outside the catalog's schema list.
            Namespace {
                oid: INFORMATION_SCHEMA_OID,
                name: "information_schema".to_owned(),
            },
        ];
        let mut relations = catalog_relations();
        let catalog = self.catalog.upgrade();
        let mut schema_names = catalog.as_ref().map_or_else(Vec::new, |c| c.schema_names());
        schema_names.sort();
        relations.extend(information_schema_relations());
        for s in &schema_names {
            // Both read this snapshot for their rows: described from their
            // definitions instead.
            if s == "pg_catalog" || s == "information_schema" {
                continue;
            }
            let ns = if *s == self.default_schema {
                PUBLIC
            } else {
                oid_of(&["namespace", s])
            };
            if ns != PUBLIC && ns != INFORMATION_SCHEMA_OID {
                namespaces.push(Namespace {
                    oid: ns,
                    name: s.clone(),
                });
            }
            // The document view repeats every table: listed as a schema,
            // its relations are left out (tools reflecting the database
            // would see each table twice).
            if s == crate::convert::DOCUMENTS_SCHEMA {
                continue;
            }
            let Some(schema) = catalog.as_ref().and_then(|c| c.schema(s)) else {
                continue;
            };
            self.add_schema(&mut relations, s, ns, schema.as_ref());
        }
        let sequences = self.sequences();
        for q in &sequences {
            relations.push(Relation {
                oid: q.oid,
                name: q.name.clone(),
                namespace: PUBLIC,
                schema: q.schema.clone(),
                kind: 'S',
                am: 0,
                columns: Vec::new(),
                definition: None,
                dataset: None,
                index: None,
                has_index: false,
            });
        }
        Snapshot {
            database: self.catalog_name.clone(),
            namespaces,
            relations,
            roles: self.roles(),
            sequences,
        }
    }

    /// The sequences of their own, then the columns', by name.
    fn sequences(&self) -> Vec<SequenceRow> {
        let schema = &self.default_schema;
        let row = |name: String, def: silt::SequenceDef, next: i64| SequenceRow {
            oid: oid_of(&["relation", schema, &name]),
            name,
            schema: schema.clone(),
            def,
            next,
        };
        let mut out: Vec<SequenceRow> = self
            .db
            .sequences()
            .into_iter()
            .map(|(n, d)| {
                let next = self.db.peek_sequence_value(&n).unwrap_or(d.start);
                row(n, d, next)
            })
            .collect();
        for t in self.db.dataset_names() {
            let Ok(ds) = self.db.dataset(&t) else {
                continue;
            };
            let def = ds.def();
            for (f, d) in &def.defaults {
                if *d == silt::FieldDefault::Sequence {
                    let next = ds.peek_sequence(f);
                    out.push(row(silt::sequence_name(&t, f), def.sequence_def(f), next));
                }
            }
        }
        out.sort_by(|a, b| a.name.cmp(&b.name));
        out
    }

    fn roles(&self) -> Vec<RoleRow> {
        let mut roles: Vec<RoleRow> = self
            .db
            .roles()
            .into_iter()
            .map(|r| RoleRow {
                oid: oid_of(&["role", &r.name]),
                name: r.name,
                superuser: r.admin,
                login: r.login,
            })
            .collect();
        roles.sort_by(|a, b| a.name.cmp(&b.name));
        // The owner of everything: the first admin, else `silt`.
        match roles.iter_mut().find(|r| r.superuser) {
            Some(r) => r.oid = OWNER,
            None => roles.insert(
                0,
                RoleRow {
                    oid: OWNER,
                    name: "silt".to_owned(),
                    superuser: true,
                    login: true,
                },
            ),
        }
        roles
    }

    fn add_schema(
        &self,
        out: &mut Vec<Relation>,
        schema: &str,
        ns: i64,
        provider: &dyn SchemaProvider,
    ) {
        let mut names = provider.table_names();
        names.sort();
        let datasets = if ns == PUBLIC {
            self.db.dataset_names()
        } else {
            vec![]
        };
        for name in names {
            if datasets.contains(&name) {
                if let Ok(ds) = self.db.dataset(&name) {
                    add_dataset(out, schema, ns, ds);
                }
                continue;
            }
            // In-memory providers answer at once; one that would wait is
            // left out rather than block the statement.
            let Some(Ok(Some(table))) = provider.table(&name).now_or_never() else {
                continue;
            };
            let kind = match table.table_type() {
                TableType::View => 'v',
                TableType::Base | TableType::Temporary => 'r',
            };
            let columns = table
                .schema()
                .fields()
                .iter()
                .map(|f| Column {
                    name: f.name().clone(),
                    type_oid: match f.metadata().get(convert::PG_TYPE_KEY) {
                        Some(t) if t == "jsonb" => types::of_field(silt::FieldType::Json),
                        _ => types::of_arrow(f.data_type()),
                    },
                    typmod: types::typmod_of_arrow(f.data_type()),
                    not_null: !f.is_nullable(),
                    default: None,
                    identity: None,
                })
                .collect();
            out.push(Relation {
                oid: oid_of(&["relation", schema, &name]),
                name: name.clone(),
                namespace: ns,
                schema: schema.to_owned(),
                kind,
                am: if kind == 'r' { AM_LSM } else { 0 },
                columns,
                definition: table.get_table_definition().map(str::to_owned),
                dataset: None,
                index: None,
                has_index: false,
            });
        }
    }
}

/// A Silt dataset: its table, its primary key's index and its secondary
/// indexes.
fn add_dataset(out: &mut Vec<Relation>, schema: &str, ns: i64, ds: Arc<Dataset>) {
    let def = ds.def();
    let name = def.name.clone();
    let table_oid = oid_of(&["relation", schema, &name]);
    let cols = convert::columns(&def);
    let columns: Vec<Column> = cols
        .iter()
        .map(|c| Column {
            name: c.name.clone(),
            type_oid: match def.narrow_of(&c.name) {
                Some(n) => types::of_narrow(n),
                None => types::of_field(c.ty),
            },
            typmod: match def.narrow_of(&c.name) {
                Some(silt::Narrow::Varchar(n)) => i64::from(n) + 4,
                _ => types::typmod_of_arrow(&c.data_type),
            },
            not_null: c.primary_key || def.not_null.contains(&c.name),
            default: def
                .defaults
                .iter()
                .find(|(n, _)| *n == c.name)
                .filter(|_| def.sequence_def(&c.name).identity.is_none())
                .map(|(_, d)| d.sql(&name, &c.name, c.ty)),
            identity: Some(def.sequence_def(&c.name)).filter(|s| s.identity.is_some()),
        })
        .collect();
    let attnum = |field: &str| {
        columns
            .iter()
            .position(|c| c.name == field)
            .map_or(0, |i| i as i16 + 1)
    };
    let index_columns = |fields: &[String]| -> Vec<Column> {
        fields
            .iter()
            .filter_map(|f| columns.iter().find(|c| c.name == *f).cloned())
            .collect()
    };
    let mut indexes = vec![(
        format!("{name}_pkey"),
        def.primary_key.clone(),
        true,
        true,
        IndexKind::Btree,
    )];
    for ix in ds.index_defs() {
        let unique = ix.options.unique;
        indexes.push((ix.name.clone(), ix.fields.clone(), false, unique, ix.kind));
    }
    for (ix_name, fields, primary, unique, kind) in indexes {
        out.push(Relation {
            oid: oid_of(&["index", schema, &name, &ix_name]),
            name: ix_name,
            namespace: ns,
            schema: schema.to_owned(),
            kind: 'i',
            am: am_of(kind),
            columns: index_columns(&fields),
            definition: None,
            dataset: Some(ds.clone()),
            index: Some(IndexOf {
                table: table_oid,
                keys: fields.iter().map(|f| attnum(f)).collect(),
                primary,
                unique,
                method: kind.to_string(),
            }),
            has_index: false,
        });
    }
    out.push(Relation {
        oid: table_oid,
        name,
        namespace: ns,
        schema: schema.to_owned(),
        kind: 'r',
        am: AM_LSM,
        columns,
        definition: None,
        dataset: Some(ds),
        index: None,
        has_index: true,
    });
}

/// `pg_catalog`'s own tables and views.
fn catalog_relations() -> Vec<Relation> {
    RELATIONS
        .iter()
        .map(|(name, kind, cols)| fixed("pg_catalog", PG_CATALOG, name, *kind, cols))
        .collect()
}

/// `information_schema`'s views.
fn information_schema_relations() -> Vec<Relation> {
    INFORMATION_SCHEMA
        .iter()
        .map(|(name, cols)| {
            fixed(
                "information_schema",
                INFORMATION_SCHEMA_OID,
                name,
                'v',
                cols,
            )
        })
        .collect()
}

/// A relation of a fixed definition (`name type, ...`).
fn fixed(schema: &str, ns: i64, name: &str, kind: char, cols: &'static str) -> Relation {
    Relation {
        oid: oid_of(&["relation", schema, name]),
        name: name.to_owned(),
        namespace: ns,
        schema: schema.to_owned(),
        kind,
        am: if kind == 'r' { AM_LSM } else { 0 },
        columns: super::table::spec(cols)
            .into_iter()
            .map(|(n, ty)| Column {
                name: n.to_owned(),
                type_oid: types::by_name(ty.trim_end_matches("[]")).map_or(25, |t| {
                    if ty.ends_with("[]") {
                        t.array.max(1009)
                    } else {
                        t.oid
                    }
                }),
                typmod: -1,
                not_null: false,
                default: None,
                identity: None,
            })
            .collect(),
        definition: None,
        dataset: None,
        index: None,
        has_index: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_split_and_fold_like_postgresql() {
        assert_eq!(split_name("Public.T"), vec!["public", "t"]);
        assert_eq!(split_name("\"My \"\"T\"\"\""), vec!["My \"T\""]);
        assert_eq!(split_name("\"A\".b"), vec!["A", "b"]);
    }

    #[test]
    fn oids_are_stable_and_in_range() {
        let a = oid_of(&["relation", "public", "t"]);
        assert_eq!(a, oid_of(&["relation", "public", "t"]));
        assert_ne!(a, oid_of(&["relation", "public", "u"]));
        assert_ne!(oid_of(&["ab", "c"]), oid_of(&["a", "bc"]));
        assert!((FIRST_OBJECT_OID..1 << 31).contains(&a));
    }
}
