//! Emptying a dataset at once (SQL's `TRUNCATE`): the dataset is replaced by
//! an empty one of the same definition (indexes included) under a new id,
//! in a directory of the next generation (`<name>.<generation>`), with one
//! atomic catalog write. The old files are removed after it.
//!
//! Crash safety: until the catalog is replaced, the old dataset is the
//! dataset and the new directory is a leftover; after, the new one is and
//! the old directory is. [`remove_stale_generations`] removes either kind of
//! leftover at open. Log records of the old dataset name its old id, which
//! the catalog no longer holds, so recovery skips them (as for a dropped
//! dataset).

use std::path::Path;

use super::Database;
use super::catalog::Catalog;
use crate::error::{Error, Result};

impl Database {
    /// Remove every record of dataset `name` at once, keeping its
    /// definition and indexes. Not part of any transaction: writes racing
    /// with it land before it (and are removed) or after it.
    pub fn truncate_dataset(&self, name: &str) -> Result<()> {
        self.check_open()?;
        let mut cat = self.catalog.lock();
        let i = cat.dataset_position(name)?;
        let referencing = super::foreign_keys::referencing(&cat, name);
        if !referencing.is_empty() {
            return Err(Error::Referenced {
                action: "truncate".to_owned(),
                name: name.to_owned(),
                constraints: referencing,
            });
        }
        let before = cat.datasets[i].clone();
        let saved_ids = cat.dataset_ids_used;
        let mut def = before.clone();
        def.generation = def.generation.checked_add(1).ok_or_else(|| {
            Error::Config(format!("dataset `{name}` was truncated too many times"))
        })?;
        def.id = cat.next_dataset_id();
        let new_dir = self.dir.join(def.dir_name());
        if new_dir.exists() {
            std::fs::remove_dir_all(&new_dir).map_err(|e| Error::io(&new_dir, e))?;
        }
        // Objects of this generation left by an interrupted truncate.
        crate::dataset::remove_remote(&def, &def.dir_name(), None)?;
        let opened = self.open_dataset(def.clone(), &new_dir);
        let fresh = match opened {
            Ok(ds) => ds,
            Err(e) => {
                cat.dataset_ids_used = saved_ids;
                let _ = std::fs::remove_dir_all(&new_dir);
                return Err(e);
            }
        };
        let continued = match self.datasets.read().get(name) {
            Some(old) => fresh.continue_sequences(old),
            None => Ok(()),
        };
        cat.datasets[i] = def;
        if let Err(e) = continued.and_then(|()| self.save_catalog(&cat)) {
            cat.datasets[i] = before;
            cat.dataset_ids_used = saved_ids;
            drop(fresh);
            self.bg.wait_idle();
            let _ = std::fs::remove_dir_all(&new_dir);
            return Err(e);
        }
        let old = self.datasets.write().insert(name.to_owned(), fresh);
        self.relink();
        self.schema_changed();
        drop(cat);
        self.bg.wait_idle();
        if let Some(old) = old {
            let dir = old.dir().to_path_buf();
            drop(old);
            crate::dataset::remove_remote(&before, &before.dir_name(), None)?;
            std::fs::remove_dir_all(&dir).map_err(|e| Error::io(&dir, e))?;
        }
        Ok(())
    }
}

/// Remove the directories of generations of the catalog's datasets other
/// than the current one (what a crash during a truncate leaves).
pub(super) fn remove_stale_generations(dir: &Path, catalog: &Catalog) -> Result<()> {
    let rd = match std::fs::read_dir(dir) {
        Ok(rd) => rd,
        Err(e) => return Err(Error::io(dir, e)),
    };
    for entry in rd.flatten() {
        let file_name = entry.file_name();
        let Some(n) = file_name.to_str() else {
            continue;
        };
        let base = match n.rsplit_once('.') {
            Some((b, g)) if !g.is_empty() && g.bytes().all(|c| c.is_ascii_digit()) => b,
            _ => n,
        };
        let stale = catalog
            .datasets
            .iter()
            .any(|d| d.name == base && d.dir_name() != n);
        if stale && entry.path().is_dir() {
            if let Some(d) = catalog.datasets.iter().find(|d| d.name == base) {
                crate::dataset::remove_remote(d, n, None)?;
            }
            let p = entry.path();
            std::fs::remove_dir_all(&p).map_err(|e| Error::io(&p, e))?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::ops::Bound;

    use crate::value::Value;
    use crate::{Database, DatasetDef, DbOptions, IndexDef};

    fn rec(id: i64, n: i64) -> Value {
        Value::Object(vec![
            ("id".into(), Value::Int(id)),
            ("n".into(), Value::Int(n)),
        ])
    }

    fn all(db: &Database) -> Vec<Value> {
        let ds = db.dataset("t").unwrap();
        ds.scan(Bound::Unbounded, Bound::Unbounded)
            .unwrap()
            .collect::<crate::Result<_>>()
            .unwrap()
    }

    fn by_index(db: &Database, n: i64) -> usize {
        let ds = db.dataset("t").unwrap();
        let k = [Value::Int(n)];
        ds.index_range(
            "by_n",
            Bound::Included(&k[..]),
            Bound::Included(&k[..]),
            None,
        )
        .unwrap()
        .len()
    }

    #[test]
    fn truncate_empties_every_index_and_survives_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let db = Database::open(dir.path(), DbOptions::default()).unwrap();
        let ds = db
            .create_dataset(DatasetDef::new("t", &["id"]).field("n", crate::FieldType::Int))
            .unwrap();
        db.create_index("t", IndexDef::btree("by_n", &["n"]))
            .unwrap();
        for i in 0..100 {
            ds.insert(rec(i, i % 3)).unwrap();
        }
        ds.flush().unwrap();
        ds.insert(rec(1000, 1)).unwrap();
        let id_before = ds.def().id;
        db.truncate_dataset("t").unwrap();
        assert!(all(&db).is_empty());
        assert_eq!(by_index(&db, 1), 0);
        let ds = db.dataset("t").unwrap();
        assert_ne!(ds.def().id, id_before);
        assert_eq!(ds.def().generation, 1);
        assert_eq!(ds.index_defs().len(), 1);
        ds.insert(rec(7, 1)).unwrap();
        assert!(!dir.path().join("t").exists());
        drop(ds);
        drop(db);
        // Recovery replays the log: the old records (old id) stay gone,
        // the new one is back.
        let db = Database::open(dir.path(), DbOptions::default()).unwrap();
        assert_eq!(all(&db), [rec(7, 1)]);
        assert_eq!(by_index(&db, 1), 1);
        db.truncate_dataset("t").unwrap();
        assert!(all(&db).is_empty());
        assert!(dir.path().join("t.2").exists());
        assert!(!dir.path().join("t.1").exists());
        assert!(matches!(
            db.truncate_dataset("nope"),
            Err(crate::Error::NoSuchDataset(_))
        ));
    }

    #[test]
    fn leftover_generations_are_removed_at_open() {
        let dir = tempfile::tempdir().unwrap();
        let db = Database::open(dir.path(), DbOptions::default()).unwrap();
        let ds = db.create_dataset(DatasetDef::new("t", &["id"])).unwrap();
        ds.insert(rec(1, 1)).unwrap();
        drop(ds);
        drop(db);
        // A crash before the catalog write leaves the next generation's
        // directory; a crash after it, the old one. Other files stay.
        std::fs::create_dir_all(dir.path().join("t.1/p0")).unwrap();
        std::fs::create_dir_all(dir.path().join("other.1")).unwrap();
        let db = Database::open(dir.path(), DbOptions::default()).unwrap();
        assert!(!dir.path().join("t.1").exists());
        assert!(dir.path().join("other.1").exists());
        assert_eq!(all(&db).len(), 1);
    }
}
