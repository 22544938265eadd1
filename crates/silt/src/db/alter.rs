//! Changing a dataset's declared fields (SQL's `ALTER TABLE ... ADD / DROP
//! / RENAME COLUMN`, `SET / DROP DEFAULT`, `SET / DROP NOT NULL`, `ADD /
//! DROP CONSTRAINT`): an [`Alteration`].
//!
//! An alteration holds the dataset's DDL lock exclusively from its start
//! to its end, so no write to the dataset commits meanwhile: the records
//! it checks (a `SET NOT NULL`, an added CHECK) and rewrites (an added
//! column's default, a dropped or renamed column) are all there are, and
//! no record prepared under the old definition is applied after the new
//! one is in place (a transaction that prepared one fails with
//! [`Error::Altered`] and can be run again). Its definition changes take
//! effect at once for its own rewrites; its rewrites are one transaction,
//! committed at [`Alteration::finish`] with one catalog write; an
//! alteration dropped or failed before that leaves the definition, the
//! indexes and the records as they were.
//!
//! A crash between the rewrite's commit and the catalog write leaves the
//! records rewritten and the definition as it was; running the `ALTER`
//! again completes it.

use std::sync::Arc;

use parking_lot::RwLockWriteGuard;

use super::Database;
use crate::dataset::{Dataset, Transaction};
use crate::error::{Error, Result};
use crate::index::IndexDef;
use crate::schema::DatasetDef;

/// A change of one dataset's definition under way: see the module doc.
pub struct Alteration<'a> {
    db: &'a Database,
    ds: &'a Arc<Dataset>,
    _ddl: RwLockWriteGuard<'a, ()>,
    /// The definition before the alteration, restored if it fails.
    before: Arc<DatasetDef>,
    /// The rewrites, one transaction.
    txn: Option<Transaction>,
    /// Indexes built by the alteration (dropped again if it fails).
    created: Vec<String>,
    /// Indexes it drops when it finishes.
    dropped: Vec<String>,
    done: bool,
}

impl Database {
    /// Start changing `ds`'s definition: waits for the writes to it under
    /// way and holds off new ones until the alteration ends.
    pub fn alter<'a>(&'a self, ds: &'a Arc<Dataset>) -> Result<Alteration<'a>> {
        self.check_open()?;
        let ddl = ds.ddl_write();
        // A dataset dropped or truncated meanwhile is another object now.
        match self.datasets.read().get(ds.name()) {
            Some(cur) if Arc::ptr_eq(cur, ds) => {}
            _ => return Err(Error::NoSuchDataset(ds.name().to_owned())),
        }
        Ok(Alteration {
            db: self,
            ds,
            _ddl: ddl,
            before: ds.def(),
            txn: None,
            created: Vec::new(),
            dropped: Vec::new(),
            done: false,
        })
    }

    /// Change dataset `name`'s declared fields, `NOT NULL` fields, defaults
    /// and CHECK constraints with `f` (an [`Alteration`] of one change that
    /// rewrites nothing: the caller has checked the records against added
    /// constraints). Returns the new definition.
    pub fn alter_dataset(
        &self,
        name: &str,
        f: impl FnOnce(&mut DatasetDef) -> Result<()>,
    ) -> Result<Arc<DatasetDef>> {
        let ds = self.dataset(name)?;
        let mut alt = self.alter(&ds)?;
        alt.change(f)?;
        alt.finish()
    }
}

impl Alteration<'_> {
    pub fn dataset(&self) -> &Arc<Dataset> {
        self.ds
    }

    /// The definition with the alteration's changes so far.
    pub fn def(&self) -> Arc<DatasetDef> {
        self.ds.def()
    }

    /// Change the declared fields, `NOT NULL` fields, defaults (sequences
    /// included) and CHECK constraints with `f`; anything else `f` changes
    /// is refused, as is undeclaring a field an index reads. The change
    /// holds at once for the alteration's rewrites, and is recorded at
    /// [`Alteration::finish`].
    pub fn change(&mut self, f: impl FnOnce(&mut DatasetDef) -> Result<()>) -> Result<()> {
        let old = self.ds.def();
        let mut def = (*old).clone();
        f(&mut def)?;
        let mut rest = def.clone();
        rest.fields = old.fields.clone();
        rest.not_null = old.not_null.clone();
        rest.defaults = old.defaults.clone();
        rest.sequences = old.sequences.clone();
        rest.narrow = old.narrow.clone();
        rest.checks = old.checks.clone();
        if rest != *old {
            return Err(Error::Config(format!(
                "altering `{}` may change its fields, NOT NULL, defaults (sequences included) and CHECK constraints only",
                self.ds.name()
            )));
        }
        for idx in self.ds.index_defs() {
            for f in &idx.fields {
                if old.field_type(f).is_some() && def.field_type(f).is_none() {
                    return Err(Error::Config(format!(
                        "index `{}` reads field `{f}`; drop the index first",
                        idx.name
                    )));
                }
            }
        }
        // A materialized view's copy of a field keeps the field's type.
        for view in self.db.views_of(self.ds.name()) {
            let Some(m) = self.db.dataset(&view)?.def().materialized.clone() else {
                continue;
            };
            for c in m.columns.iter().filter(|c| c.relation == self.ds.name()) {
                if old.field_type(&c.field) != def.field_type(&c.field) {
                    return Err(Error::Config(format!(
                        "materialized view `{view}` copies field `{}` of `{}`; drop the view first",
                        c.field,
                        self.ds.name()
                    )));
                }
            }
        }
        def.validate()?;
        self.ds.redefine(Arc::new(def));
        self.db.schema_changed();
        Ok(())
    }

    /// The transaction of the alteration's rewrites: it reads the records
    /// as rewritten so far and prepares them under the definition as
    /// changed so far; [`Alteration::finish`] commits it.
    pub fn transaction(&mut self) -> Result<&mut Transaction> {
        match &mut self.txn {
            Some(t) => Ok(t),
            slot => Ok(slot.insert(self.db.begin()?.altering(self.ds.id()))),
        }
    }

    /// Build index `def` over the records committed (the alteration's
    /// rewrites update it when they commit; a unique index refuses them
    /// then if they repeat a value). Dropped again if the alteration fails.
    pub fn create_index(&mut self, def: IndexDef) -> Result<IndexDef> {
        let def = self.db.create_index_locked(self.ds, def)?;
        self.created.push(def.name.clone());
        Ok(def)
    }

    /// Drop index `name` when the alteration finishes.
    pub fn drop_index(&mut self, name: &str) -> Result<()> {
        if !self.ds.index_defs().iter().any(|d| d.name == name) {
            return Err(Error::NoSuchIndex {
                dataset: self.ds.name().to_owned(),
                index: name.to_owned(),
            });
        }
        self.dropped.push(name.to_owned());
        Ok(())
    }

    /// Commit the rewrites, record the definition in the catalog and drop
    /// the indexes to drop. Returns the new definition.
    pub fn finish(mut self) -> Result<Arc<DatasetDef>> {
        if let Some(t) = self.txn.take() {
            t.commit_locked()?;
        }
        let def = self.ds.def();
        {
            let mut cat = self.db.catalog.lock();
            let i = cat.dataset_position(self.ds.name())?;
            let old = cat.datasets[i].clone();
            let d = &mut cat.datasets[i];
            d.fields.clone_from(&def.fields);
            d.not_null.clone_from(&def.not_null);
            d.defaults.clone_from(&def.defaults);
            d.sequences.clone_from(&def.sequences);
            d.narrow.clone_from(&def.narrow);
            d.checks.clone_from(&def.checks);
            if let Err(e) = self.db.save_catalog(&cat) {
                cat.datasets[i] = old;
                return Err(e);
            }
        }
        self.done = true;
        for name in std::mem::take(&mut self.dropped) {
            self.db.drop_index_locked(self.ds, &name)?;
        }
        self.db.schema_changed();
        Ok(def)
    }
}

impl Drop for Alteration<'_> {
    /// An alteration that did not finish leaves everything as it was.
    fn drop(&mut self) {
        if self.done {
            return;
        }
        self.txn = None;
        for name in std::mem::take(&mut self.created).into_iter().rev() {
            // Best effort: an index left behind is still a correct index.
            let _ = self.db.drop_index_locked(self.ds, &name);
        }
        self.ds.redefine(self.before.clone());
        self.db.schema_changed();
    }
}
#[cfg(test)]
mod tests {
    use crate::value::{FieldType, Value};
    use crate::{Database, DatasetDef, DbOptions, FieldDefault, IndexDef};

    #[test]
    fn declared_fields_change_and_persist() {
        let dir = tempfile::tempdir().unwrap();
        let db = Database::open(dir.path(), DbOptions::default()).unwrap();
        let ds = db
            .create_dataset(DatasetDef::new("t", &["id"]).field("n", FieldType::Int))
            .unwrap();
        db.create_index("t", IndexDef::btree("by_n", &["n"]))
            .unwrap();
        db.alter_dataset("t", |d| {
            d.fields.push(("s".into(), FieldType::String));
            d.defaults
                .push(("s".into(), FieldDefault::Text("x".into())));
            Ok(())
        })
        .unwrap();
        // Writes follow the new definition at once.
        ds.insert(Value::Object(vec![("id".into(), Value::Int(1))]))
            .unwrap();
        let r = ds.get(&[Value::Int(1)]).unwrap().unwrap();
        assert_eq!(r.get("s"), Some(&Value::String("x".into())));
        // Only columns may change; an indexed field stays.
        let e = db.alter_dataset("t", |d| {
            d.partitions = 4;
            Ok(())
        });
        assert!(e.unwrap_err().to_string().contains(
            "fields, NOT NULL, defaults (sequences included) and CHECK constraints only"
        ));
        let e = db.alter_dataset("t", |d| {
            d.fields.retain(|(n, _)| n != "n");
            Ok(())
        });
        assert!(e.unwrap_err().to_string().contains("index `by_n`"));
        drop(ds);
        drop(db);
        let db = Database::open(dir.path(), DbOptions::default()).unwrap();
        let def = db.dataset("t").unwrap().def();
        assert_eq!(def.field_type("s"), Some(FieldType::String));
        assert_eq!(def.defaults.len(), 1);
    }
}
