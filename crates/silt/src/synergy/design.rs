//! A database's Synergy design (seed 004 §4.3 workflow): the schema graph
//! read from the catalog's foreign keys, the designer's roots and a
//! workload give rooted trees ([`Forest`]) and the views its queries use
//! ([`select_workload`]); [`install`] puts every tree member in its
//! hierarchy (`Database::set_hierarchy`: writes lock the root's key) and
//! creates each view as a materialized view (`Database::create_materialized_view`:
//! kept by the commits that write its chain) with a B+-tree on each
//! recommended view-index attribute.

use super::graph::{Forest, View};
use super::model::{ForeignKey, Query, Relation, Schema, SynergyError};
use super::selection::{WorkloadSelection, select_workload};
use crate::db::Database;
use crate::error::{Error, Result};
use crate::index::IndexDef;
use crate::schema::{MaterializedDef, ViewColumn};

/// What [`design`] chose.
pub struct Design {
    pub forest: Forest,
    pub selection: WorkloadSelection,
}

fn synergy(e: SynergyError) -> Error {
    Error::Config(format!("synergy: {e}"))
}

/// The schema graph of `db`: every dataset that is not a view, and every
/// foreign key between two of them (a key referencing its own dataset is
/// left out: a tree has no loops).
pub fn schema_of(db: &Database) -> Result<Schema> {
    let mut relations = Vec::new();
    let mut fks = Vec::new();
    for name in db.dataset_names() {
        let def = db.dataset(&name)?.def();
        if def.materialized.is_some() {
            continue;
        }
        relations.push(Relation::new(name.clone(), def.primary_key.clone()));
        for fk in def.foreign_keys.iter().filter(|f| f.parent != name) {
            fks.push(ForeignKey::new(
                name.clone(),
                fk.fields.clone(),
                fk.parent.clone(),
            ));
        }
    }
    Schema::new(relations, fks).map_err(synergy)
}

/// Choose the rooted trees of `db` under `roots` and the views `workload`
/// uses.
pub fn design(db: &Database, roots: &[&str], workload: &[Query]) -> Result<Design> {
    let forest = Forest::generate(schema_of(db)?, roots, workload).map_err(synergy)?;
    let selection = select_workload(&forest, workload, &[]).map_err(synergy)?;
    Ok(Design { forest, selection })
}

/// The catalog's name of the foreign key an edge of the graph is.
fn fk_name(db: &Database, edge: &ForeignKey) -> Result<String> {
    let def = db.dataset(&edge.child)?.def();
    def.foreign_keys
        .iter()
        .find(|f| f.parent == edge.parent && f.fields == edge.columns)
        .map(|f| f.name.clone())
        .ok_or_else(|| Error::Config(format!("synergy: no foreign key is the edge {edge:?}")))
}

/// The materialized view of `view`: every declared field of each relation,
/// named as the field, or `<relation>__<field>` where two relations share a
/// field name.
pub fn view_def(db: &Database, view: &View) -> Result<MaterializedDef> {
    let mut fields: Vec<(String, String)> = Vec::new();
    for r in view.relations() {
        for (f, _) in &db.dataset(r)?.def().fields {
            fields.push((r.clone(), f.clone()));
        }
    }
    let columns = fields
        .iter()
        .map(|(r, f)| {
            let shared = fields.iter().filter(|(_, g)| g == f).count() > 1;
            ViewColumn {
                relation: r.clone(),
                field: f.clone(),
                name: if shared {
                    format!("{r}__{f}")
                } else {
                    f.clone()
                },
            }
        })
        .collect();
    let keys = view
        .edges()
        .iter()
        .map(|e| fk_name(db, e))
        .collect::<Result<_>>()?;
    Ok(MaterializedDef {
        relations: view.relations().to_vec(),
        keys,
        columns,
    })
}

/// Put the design in `db`: hierarchies for every tree member, the selected
/// views (those that do not exist yet) and their recommended indexes.
/// Returns the names of the views made.
pub fn install(db: &Database, design: &Design) -> Result<Vec<String>> {
    for tree in design.forest.trees() {
        for member in tree.members() {
            let Some(up) = tree.path_to_root(member) else {
                continue;
            };
            let mut path = Vec::with_capacity(up.len().saturating_sub(1));
            for pair in up.windows(2) {
                let edge = tree.parent_edge(&pair[0]).ok_or_else(|| {
                    Error::Config(format!("synergy: `{}` has no parent in its tree", pair[0]))
                })?;
                path.push(fk_name(db, edge)?);
            }
            db.set_hierarchy(member, Some(path))?;
        }
    }
    let mut made = Vec::new();
    let existing = db.dataset_names();
    for view in &design.selection.views {
        let name = view.name();
        if existing.contains(&name) {
            continue;
        }
        db.create_materialized_view(&name, view_def(db, view)?)?;
        made.push(name);
    }
    for ix in &design.selection.indexes {
        let view = db.dataset(&ix.view)?;
        let Some(m) = view.def().materialized.clone() else {
            continue;
        };
        let Some(col) = m.column(&ix.attribute.relation, &ix.attribute.column) else {
            continue;
        };
        let name = format!("{}_{col}_idx", ix.view);
        if view.index_defs().iter().any(|d| d.name == name) {
            continue;
        }
        db.create_index(&ix.view, IndexDef::btree(&name, &[col]))?;
    }
    Ok(made)
}
