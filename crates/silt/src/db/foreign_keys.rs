//! Foreign keys in the catalog: checked against the datasets they link
//! when created, added and dropped with their constraint, and installed in
//! the datasets (`dataset::links`) whenever the catalog changes.

use super::Database;
use super::catalog::Catalog;
use crate::dataset::Dataset;
use crate::dataset::links::{Links, ViewLink};
use crate::error::{Error, Result};
use crate::index::IndexDef;
use crate::schema::{DatasetDef, ForeignKeyDef};
use std::collections::BTreeMap;
use std::sync::Arc;

/// Check the foreign keys of `def` against the catalog (`def` may be
/// about to enter it: a key may reference `def` itself), and give `def` a
/// B+-tree on each key's fields it lacks one on (a parent's delete finds
/// the records that reference it there).
pub(super) fn prepare(def: &mut DatasetDef, cat: &Catalog) -> Result<()> {
    for fk in def.foreign_keys.clone() {
        let parent = if fk.parent == def.name {
            def.clone()
        } else {
            let Some(p) = cat.datasets.iter().find(|d| d.name == fk.parent) else {
                return Err(Error::Config(format!(
                    "foreign key `{}` of `{}` references `{}`, which is not a dataset",
                    fk.name, def.name, fk.parent
                )));
            };
            p.clone()
        };
        check_pair(def, &fk, &parent)?;
        if lookup_index(&def.indexes, &fk).is_none() {
            let mut idx = IndexDef::btree(
                &fk.index_name(),
                &fk.fields.iter().map(String::as_str).collect::<Vec<_>>(),
            );
            idx.id = def
                .index_ids_used
                .max(def.indexes.iter().map(|i| i.id).max().unwrap_or(0))
                + 1;
            def.index_ids_used = idx.id;
            idx.validate()?;
            def.indexes.push(idx);
        }
    }
    Ok(())
}

/// The index (of `indexes`, a dataset's) a foreign key finds its records
/// by: a B+-tree on exactly the key's fields.
pub(crate) fn lookup_index<'a>(
    indexes: &'a [IndexDef],
    fk: &ForeignKeyDef,
) -> Option<&'a IndexDef> {
    indexes
        .iter()
        .find(|i| i.kind.is_btree() && i.fields == fk.fields)
}

/// A foreign key's fields must match the parent's primary key: as many,
/// declared with the same types, and the parent must keep its records
/// (no ttl: an expiring parent would leave its children pointing nowhere).
fn check_pair(child: &DatasetDef, fk: &ForeignKeyDef, parent: &DatasetDef) -> Result<()> {
    let bad = |m: String| {
        Err(Error::Config(format!(
            "foreign key `{}` of `{}`: {m}",
            fk.name, child.name
        )))
    };
    if fk.fields.len() != parent.primary_key.len() {
        return bad(format!(
            "it has {} field(s) ({}) but the primary key of `{}` has {} ({})",
            fk.fields.len(),
            fk.fields.join(", "),
            parent.name,
            parent.primary_key.len(),
            parent.primary_key.join(", ")
        ));
    }
    for (f, k) in fk.fields.iter().zip(&parent.primary_key) {
        let Some(pt) = parent.field_type(k) else {
            return bad(format!(
                "the key field `{k}` of `{}` is not declared; declare its type to reference it",
                parent.name
            ));
        };
        let ct = child.field_type(f);
        if ct != Some(pt) {
            return bad(format!(
                "`{f}` is declared {} but `{}`.`{k}` is {pt}; declare them alike",
                ct.map_or_else(|| "nothing".to_owned(), |t| t.to_string()),
                parent.name
            ));
        }
    }
    if parent.ttl.is_some() {
        return bad(format!(
            "`{}` has a ttl, and a record that expires would leave the records referencing it dangling",
            parent.name
        ));
    }
    Ok(())
}

/// The foreign keys of the catalog's datasets that reference `name`
/// (constraint, referencing dataset), other than `name`'s own.
pub(super) fn referencing(cat: &Catalog, name: &str) -> Vec<(String, String)> {
    cat.datasets
        .iter()
        .filter(|d| d.name != name)
        .flat_map(|d| {
            d.foreign_keys
                .iter()
                .filter(|f| f.parent == name)
                .map(|f| (f.name.clone(), d.name.clone()))
        })
        .collect()
}

/// Install every dataset's links from the catalog's definitions: foreign
/// keys both ways, hierarchies, and the materialized views each dataset is
/// part of (`dataset::matview`).
pub(super) fn install(datasets: &BTreeMap<String, Arc<Dataset>>) {
    let weak = |n: &str| datasets.get(n).map(Arc::downgrade);
    let mut views: BTreeMap<String, Vec<Arc<ViewLink>>> = BTreeMap::new();
    for view in datasets.values() {
        let vdef = view.def();
        let Some(m) = &vdef.materialized else {
            continue;
        };
        let Some(link) = view_link(datasets, view, m) else {
            continue;
        };
        for (at, r) in m.relations.iter().enumerate() {
            let mut l = link.clone();
            l.at = at;
            views
                .entry(r.clone())
                .or_default()
                .push(Arc::new(l.build()));
        }
    }
    for (name, ds) in datasets {
        let def = ds.def();
        let parents = def
            .foreign_keys
            .iter()
            .filter_map(|fk| Some((fk.clone(), weak(&fk.parent)?)))
            .collect();
        let mut children = Vec::new();
        for other in datasets.values() {
            let odef = other.def();
            let indexes = other.index_defs();
            for fk in odef.foreign_keys.iter().filter(|f| f.parent == *name) {
                if let Some(idx) = lookup_index(&indexes, fk) {
                    children.push((fk.clone(), Arc::downgrade(other), idx.name.clone()));
                }
            }
        }
        let root = def
            .hierarchy
            .as_ref()
            .and_then(|path| hierarchy_path(datasets, ds, path));
        ds.set_links(Some(Arc::new(
            Links::new(Arc::downgrade(ds), parents, children).with_hierarchy(
                root,
                views.remove(name).unwrap_or_default(),
                def.materialized.is_some(),
            ),
        )));
    }
}

/// The foreign keys named `path` from `ds` up, each with the dataset it
/// references (`None` when one is missing).
pub(super) fn hierarchy_path(
    datasets: &BTreeMap<String, Arc<Dataset>>,
    ds: &Arc<Dataset>,
    path: &[String],
) -> Option<Vec<(ForeignKeyDef, std::sync::Weak<Dataset>)>> {
    let mut here = ds.clone();
    let mut out = Vec::with_capacity(path.len());
    for name in path {
        let fk = here.def().foreign_key(name)?.clone();
        let parent = datasets.get(&fk.parent)?.clone();
        out.push((fk, Arc::downgrade(&parent)));
        here = parent;
    }
    Some(out)
}

/// A view's chain, resolved (its position left for the caller).
#[derive(Clone)]
struct ViewChain {
    view: std::sync::Weak<Dataset>,
    def: crate::schema::MaterializedDef,
    chain: Vec<std::sync::Weak<Dataset>>,
    keys: Vec<(ForeignKeyDef, String)>,
    at: usize,
}

impl ViewChain {
    fn build(self) -> ViewLink {
        ViewLink::new(self.view, self.def, self.chain, self.keys, self.at)
    }
}

fn view_link(
    datasets: &BTreeMap<String, Arc<Dataset>>,
    view: &Arc<Dataset>,
    m: &crate::schema::MaterializedDef,
) -> Option<ViewChain> {
    let mut chain = Vec::with_capacity(m.relations.len());
    let mut keys = Vec::with_capacity(m.keys.len());
    for (i, r) in m.relations.iter().enumerate() {
        let ds = datasets.get(r)?;
        chain.push(Arc::downgrade(ds));
        if i > 0 {
            let fk = ds.def().foreign_key(m.keys.get(i - 1)?)?.clone();
            let index = lookup_index(&ds.index_defs(), &fk)?.name.clone();
            keys.push((fk, index));
        }
    }
    Some(ViewChain {
        view: Arc::downgrade(view),
        def: m.clone(),
        chain,
        keys,
        at: 0,
    })
}

/// The resolved view link of materialized view `view` at position `at`
/// (for building it).
pub(super) fn view_link_at(
    datasets: &BTreeMap<String, Arc<Dataset>>,
    view: &Arc<Dataset>,
    m: &crate::schema::MaterializedDef,
    at: usize,
) -> Option<ViewLink> {
    let mut l = view_link(datasets, view, m)?;
    l.at = at;
    Some(l.build())
}

impl Database {
    /// Reinstall the links of every dataset (after any catalog change that
    /// adds, drops or replaces datasets or foreign keys).
    pub(super) fn relink(&self) {
        install(&self.datasets.read());
    }

    /// Add foreign key `fk` to dataset `dataset` (SQL's `ALTER TABLE ...
    /// ADD FOREIGN KEY`): every record must already name an existing
    /// parent, checked while no write of `dataset` runs and each parent
    /// key is locked; a B+-tree on the key's fields is built if there is
    /// none.
    pub fn add_foreign_key(&self, dataset: &str, fk: ForeignKeyDef) -> Result<()> {
        self.check_open()?;
        let ds = self.dataset(dataset)?;
        let _ddl = ds.ddl_write();
        let mut def = (*ds.def()).clone();
        if def.foreign_key(&fk.name).is_some() {
            return Err(Error::Config(format!(
                "`{dataset}` already has a foreign key named `{}`",
                fk.name
            )));
        }
        def.foreign_keys.push(fk.clone());
        def.validate()?;
        {
            let cat = self.catalog.lock();
            let mut probe = def.clone();
            prepare(&mut probe, &cat)?;
        }
        let made = if lookup_index(&ds.index_defs(), &fk).is_none() {
            let idx = IndexDef::btree(
                &fk.index_name(),
                &fk.fields.iter().map(String::as_str).collect::<Vec<_>>(),
            );
            Some(self.create_index_locked(&ds, idx)?.name)
        } else {
            None
        };
        // Install first, so deletes of parents from now on see the key,
        // then check every record under its parent's lock (a delete that
        // began before holds that lock until it is durable).
        {
            let mut cat = self.catalog.lock();
            let i = cat.dataset_position(dataset)?;
            cat.datasets[i].foreign_keys.push(fk.clone());
            let mut now = (*ds.def()).clone();
            now.foreign_keys.push(fk.clone());
            ds.redefine(Arc::new(now));
            self.relink();
        }
        let checked = self
            .dataset(&fk.parent)
            .and_then(|parent| ds.check_references(&fk, &parent));
        let mut cat = self.catalog.lock();
        let i = cat.dataset_position(dataset)?;
        let saved = checked.and_then(|()| self.save_catalog(&cat));
        if let Err(e) = saved {
            cat.datasets[i].foreign_keys.retain(|f| f.name != fk.name);
            let mut back = (*ds.def()).clone();
            back.foreign_keys.retain(|f| f.name != fk.name);
            ds.redefine(Arc::new(back));
            self.relink();
            drop(cat);
            if let Some(index) = made {
                // Put back what there was: the index was made for the key.
                self.drop_index_locked(&ds, &index)?;
            }
            return Err(e);
        }
        self.schema_changed();
        Ok(())
    }

    /// The foreign keys of other datasets that reference `dataset`:
    /// (constraint, referencing dataset).
    pub fn referencing_foreign_keys(&self, dataset: &str) -> Vec<(String, String)> {
        referencing(&self.catalog.lock(), dataset)
    }

    /// Drop foreign key `name` of `dataset` (its index stays).
    pub fn drop_foreign_key(&self, dataset: &str, name: &str) -> Result<()> {
        self.check_open()?;
        let ds = self.dataset(dataset)?;
        let mut cat = self.catalog.lock();
        let i = cat.dataset_position(dataset)?;
        if !cat.datasets[i].foreign_keys.iter().any(|f| f.name == name) {
            return Err(Error::Config(format!(
                "`{dataset}` has no foreign key named `{name}`"
            )));
        }
        cat.datasets[i].foreign_keys.retain(|f| f.name != name);
        self.save_catalog(&cat)?;
        let mut def = (*ds.def()).clone();
        def.foreign_keys.retain(|f| f.name != name);
        ds.redefine(Arc::new(def));
        self.relink();
        self.schema_changed();
        Ok(())
    }
}
