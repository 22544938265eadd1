//! Spaces: objects built by a layer above the core out of datasets (today
//! the pub/sub spaces of `crate::pubsub`), kept in the catalog
//! (`catalog.json`, field `spaces`) so they survive a restart, and their
//! live instances, one per database.
//!
//! The core does not read a space's options: they are the JSON its layer
//! wrote. It keeps the names straight (a space's datasets cannot be dropped
//! on their own, and two spaces of one kind never share a name) and holds
//! the one live instance of each space, so that every handle a process
//! opens on a space shares its in-memory state (pub/sub: the locks that
//! make matching exactly-once, and the delivery watermark).

use std::any::Any;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::Database;
use crate::error::{Error, Result};

/// A space as the catalog records it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SpaceDef {
    /// What kind of object (`"pubsub"`).
    pub kind: String,
    pub name: String,
    /// The datasets that hold it (dropped with it, never on their own).
    pub datasets: Vec<String>,
    /// Its options, as its layer wrote them.
    pub options: serde_json::Value,
}

/// A live instance of a space, shared by every handle in the process.
pub type LiveSpace = Arc<dyn Any + Send + Sync>;

impl Database {
    /// The spaces of `kind`, in the order they were created.
    pub fn spaces(&self, kind: &str) -> Vec<SpaceDef> {
        let cat = self.catalog.lock();
        cat.spaces
            .iter()
            .filter(|s| s.kind == kind)
            .cloned()
            .collect()
    }

    /// Space `name` of `kind`, if the catalog has it.
    pub fn space(&self, kind: &str, name: &str) -> Option<SpaceDef> {
        let cat = self.catalog.lock();
        cat.spaces
            .iter()
            .find(|s| s.kind == kind && s.name == name)
            .cloned()
    }

    /// Record a space whose datasets exist. Fails if a space of its kind
    /// and name exists, or a dataset it names does not.
    pub fn create_space(&self, def: SpaceDef) -> Result<()> {
        self.check_open()?;
        if def.name.is_empty() {
            return Err(Error::Config(format!("a {} space needs a name", def.kind)));
        }
        let mut cat = self.catalog.lock();
        if cat
            .spaces
            .iter()
            .any(|s| s.kind == def.kind && s.name == def.name)
        {
            return Err(Error::Config(format!(
                "a {} space named `{}` already exists",
                def.kind, def.name
            )));
        }
        for d in &def.datasets {
            cat.dataset_position(d)?;
        }
        cat.spaces.push(def);
        if let Err(e) = self.save_catalog(&cat) {
            cat.spaces.pop();
            return Err(e);
        }
        Ok(())
    }

    /// Forget space `name` of `kind` (its layer drops its datasets after)
    /// and its live instance. Returns its definition.
    pub fn remove_space(&self, kind: &str, name: &str) -> Result<SpaceDef> {
        self.check_open()?;
        let mut cat = self.catalog.lock();
        let Some(i) = cat
            .spaces
            .iter()
            .position(|s| s.kind == kind && s.name == name)
        else {
            return Err(Error::Config(format!("no {kind} space named `{name}`")));
        };
        let def = cat.spaces.remove(i);
        if let Err(e) = self.save_catalog(&cat) {
            cat.spaces.insert(i, def);
            return Err(e);
        }
        // Lock order: live spaces before the catalog (`live_space` makes
        // spaces, which creates datasets, under its lock).
        drop(cat);
        self.live_spaces
            .lock()
            .remove(&(kind.to_owned(), name.to_owned()));
        Ok(def)
    }

    /// The live instance of space `name` of `kind`: the one already made,
    /// or the one `make` makes (under a lock, so two callers never both
    /// make one).
    pub fn live_space(
        &self,
        kind: &str,
        name: &str,
        make: impl FnOnce() -> Result<LiveSpace>,
    ) -> Result<LiveSpace> {
        let mut live = self.live_spaces.lock();
        let key = (kind.to_owned(), name.to_owned());
        if let Some(s) = live.get(&key) {
            return Ok(s.clone());
        }
        let s = make()?;
        live.insert(key, s.clone());
        Ok(s)
    }

    /// The live instance of space `name` of `kind`, if one was made.
    pub fn live_space_if_made(&self, kind: &str, name: &str) -> Option<LiveSpace> {
        self.live_spaces
            .lock()
            .get(&(kind.to_owned(), name.to_owned()))
            .cloned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn def(name: &str, datasets: &[&str]) -> SpaceDef {
        SpaceDef {
            kind: "pubsub".to_owned(),
            name: name.to_owned(),
            datasets: datasets.iter().map(|d| (*d).to_owned()).collect(),
            options: serde_json::json!({"design": "dualdb"}),
        }
    }

    #[test]
    fn spaces_persist_and_guard_their_datasets() {
        let dir = tempfile::tempdir().unwrap();
        let db = Database::open(dir.path(), crate::DbOptions::default()).unwrap();
        assert!(matches!(
            db.create_space(def("s", &["t"])),
            Err(Error::NoSuchDataset(_))
        ));
        db.create_dataset(crate::DatasetDef::new("t", &["id"]))
            .unwrap();
        db.create_space(def("s", &["t"])).unwrap();
        let e = db.create_space(def("s", &["t"])).unwrap_err();
        assert!(e.to_string().contains("already exists"), "{e}");
        let e = db.drop_dataset("t").unwrap_err();
        assert!(e.to_string().contains("pubsub space `s`"), "{e}");
        let a = db.live_space("pubsub", "s", || Ok(Arc::new(7u32))).unwrap();
        let b = db
            .live_space("pubsub", "s", || panic!("made twice"))
            .unwrap();
        assert!(Arc::ptr_eq(&a, &b));
        drop(db);
        let db = Database::open(dir.path(), crate::DbOptions::default()).unwrap();
        assert_eq!(db.spaces("pubsub"), vec![def("s", &["t"])]);
        assert!(db.spaces("other").is_empty());
        assert_eq!(db.remove_space("pubsub", "s").unwrap(), def("s", &["t"]));
        assert!(db.space("pubsub", "s").is_none());
        db.drop_dataset("t").unwrap();
    }
}
