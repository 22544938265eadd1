//! Materialized views and hierarchies in the catalog (Synergy, seed 004
//! ch. 4): a view is a dataset of its own (`DatasetDef::materialized`),
//! built from its chain when created and kept by every commit that writes
//! the chain (`dataset::matview`); a hierarchy is the path of foreign keys
//! from a dataset up to its root (`DatasetDef::hierarchy`).

use super::Database;
use super::foreign_keys::{hierarchy_path, lookup_index, view_link_at};
use crate::dataset::Dataset;
use crate::error::{Error, Result};
use crate::schema::{DatasetDef, MaterializedDef};
use std::sync::Arc;

impl Database {
    /// Create materialized view `name` over the chain `def` describes and
    /// fill it from the chain's records; from then on every commit writing
    /// the chain keeps it. The view's primary key is the columns holding
    /// the last relation's primary key. Writes to the chain wait while it
    /// is built.
    pub fn create_materialized_view(
        &self,
        name: &str,
        def: MaterializedDef,
    ) -> Result<Arc<Dataset>> {
        self.check_open()?;
        let bad = |m: String| Err(Error::Config(format!("materialized view `{name}`: {m}")));
        if def.relations.len() < 2 || def.keys.len() + 1 != def.relations.len() {
            return bad(format!(
                "a chain needs two datasets or more and one foreign key between each two, got {} and {}",
                def.relations.len(),
                def.keys.len()
            ));
        }
        let chain: Vec<Arc<Dataset>> = def
            .relations
            .iter()
            .map(|r| self.dataset(r))
            .collect::<Result<_>>()?;
        for (i, w) in chain.windows(2).enumerate() {
            let Some(fk) = w[1].def().foreign_key(&def.keys[i]).cloned() else {
                return bad(format!(
                    "`{}` has no foreign key named `{}`",
                    w[1].name(),
                    def.keys[i]
                ));
            };
            if fk.parent != w[0].name() {
                return bad(format!(
                    "foreign key `{}` of `{}` references `{}`, not `{}`",
                    fk.name,
                    w[1].name(),
                    fk.parent,
                    w[0].name()
                ));
            }
            if lookup_index(&w[1].index_defs(), &fk).is_none() {
                return bad(format!("foreign key `{}` has no lookup index", fk.name));
            }
        }
        if let Some(d) = chain.iter().find(|d| d.def().ttl.is_some()) {
            return bad(format!(
                "`{}` has a ttl: its expired records leave every read at once, their view rows would not",
                d.name()
            ));
        }
        let last = &chain[chain.len() - 1];
        let mut pk = Vec::new();
        for k in &last.def().primary_key {
            match def.column(last.name(), k) {
                Some(c) => pk.push(c.to_owned()),
                None => {
                    return bad(format!(
                        "it needs a column of `{}`.`{k}`: the view is keyed by the last dataset's primary key",
                        last.name()
                    ));
                }
            }
        }
        let refs: Vec<&str> = pk.iter().map(String::as_str).collect();
        let mut vdef = DatasetDef::new(name, &refs);
        for (i, c) in def.columns.iter().enumerate() {
            let Some(ds) = chain.iter().find(|d| d.name() == c.relation) else {
                return bad(format!(
                    "column `{}` is of `{}`, which is not in the chain",
                    c.name, c.relation
                ));
            };
            let Some(t) = ds.def().field_type(&c.field) else {
                return bad(format!(
                    "`{}`.`{}` is not a declared field",
                    c.relation, c.field
                ));
            };
            if def.columns[..i].iter().any(|o| o.name == c.name) {
                return bad(format!("two columns are named `{}`", c.name));
            }
            vdef = vdef.field(&c.name, t);
        }
        vdef.materialized = Some(def.clone());
        // No write of the chain while the view is built and linked: each
        // dataset's DDL lock, in id order (before the catalog's).
        let mut order = chain.clone();
        order.sort_by_key(|d| d.id());
        order.dedup_by_key(|d| d.id());
        let _ddl: Vec<_> = order.iter().map(|d| d.ddl_write()).collect();
        let view = self.create_dataset(vdef)?;
        let built = {
            let map = self.datasets.read();
            match view_link_at(&map, &view, &def, 0) {
                Some(link) => Ok(link),
                None => Err(Error::Config(format!(
                    "materialized view `{name}`: its chain changed while it was created"
                ))),
            }
        }
        .and_then(|link| view.fill_view(&link, last));
        if let Err(e) = built {
            drop(_ddl);
            let _ = self.drop_dataset(name);
            return Err(e);
        }
        self.relink();
        self.schema_changed();
        Ok(view)
    }

    /// Put dataset `dataset` in a hierarchy: `path` names the foreign keys
    /// from it up to its root (empty: it is a root), or `None` takes it out.
    /// Writes under a root then lock the root record's key.
    pub fn set_hierarchy(&self, dataset: &str, path: Option<Vec<String>>) -> Result<()> {
        self.check_open()?;
        let ds = self.dataset(dataset)?;
        let _ddl = ds.ddl_write();
        if let Some(p) = &path
            && hierarchy_path(&self.datasets.read(), &ds, p).is_none()
        {
            return Err(Error::Config(format!(
                "the hierarchy of `{dataset}`: ({}) is not a chain of its foreign keys up to a dataset",
                p.join(", ")
            )));
        }
        let mut cat = self.catalog.lock();
        let i = cat.dataset_position(dataset)?;
        let old = cat.datasets[i].hierarchy.clone();
        cat.datasets[i].hierarchy.clone_from(&path);
        if let Err(e) = self.save_catalog(&cat) {
            cat.datasets[i].hierarchy = old;
            return Err(e);
        }
        let mut def = (*ds.def()).clone();
        def.hierarchy = path;
        ds.redefine(Arc::new(def));
        drop(cat);
        self.relink();
        self.schema_changed();
        Ok(())
    }

    /// Whether any materialized view exists (a query planner's early way
    /// out: no view, nothing to rewrite).
    pub fn has_materialized_views(&self) -> bool {
        self.datasets
            .read()
            .values()
            .any(|d| d.def().materialized.is_some())
    }

    /// The materialized views whose chain holds `dataset`.
    pub fn views_of(&self, dataset: &str) -> Vec<String> {
        self.datasets
            .read()
            .values()
            .filter(|d| {
                d.def()
                    .materialized
                    .as_ref()
                    .is_some_and(|m| m.relations.iter().any(|r| r == dataset))
            })
            .map(|d| d.name().to_owned())
            .collect()
    }
}
