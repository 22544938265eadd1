//! Views: named queries kept in the catalog (`catalog.json`, field
//! `views`), so they survive a restart and travel with the database.
//!
//! The core never runs a view: its definition is the SQL text of the
//! statement that created it, which the SQL layer plans again when it
//! opens the database. The core keeps the names straight: a view and a
//! dataset never share a name, and a dataset that views read cannot be
//! dropped while they exist (SQL's `DROP TABLE ... CASCADE` drops them
//! first).

use serde::{Deserialize, Serialize};

use super::Database;
use crate::error::{Error, Result};

/// A view as the catalog records it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ViewDef {
    pub name: String,
    /// The statement that creates it (`CREATE VIEW name AS SELECT ...`).
    pub definition: String,
    /// The datasets and views its query reads.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub depends_on: Vec<String>,
}

impl Database {
    /// The views, in the order they were created (a view is created after
    /// the views it reads).
    pub fn views(&self) -> Vec<ViewDef> {
        self.catalog.lock().views.clone()
    }

    /// Record a view. With `replace`, a view of the same name is replaced
    /// (keeping its place in the order).
    pub fn create_view(&self, view: ViewDef, replace: bool) -> Result<()> {
        self.check_open()?;
        if view.name.is_empty() {
            return Err(Error::Config("a view needs a name".to_owned()));
        }
        let mut cat = self.catalog.lock();
        if cat.datasets.iter().any(|d| d.name == view.name) {
            return Err(Error::DatasetExists(view.name));
        }
        if cat.sequences.iter().any(|(n, _)| *n == view.name) {
            return Err(Error::SequenceExists {
                name: view.name,
                taken_by: "a sequence".to_owned(),
            });
        }
        let before = cat.views.clone();
        match cat.views.iter().position(|v| v.name == view.name) {
            Some(_) if !replace => return Err(Error::ViewExists(view.name)),
            Some(i) => cat.views[i] = view,
            None => cat.views.push(view),
        }
        if let Err(e) = self.save_catalog(&cat) {
            cat.views = before;
            return Err(e);
        }
        Ok(())
    }

    /// Remove a view. Fails when other views read it, unless `cascade`,
    /// which removes them too. Returns the names removed.
    pub fn drop_view(&self, name: &str, cascade: bool) -> Result<Vec<String>> {
        self.check_open()?;
        let mut cat = self.catalog.lock();
        if !cat.views.iter().any(|v| v.name == name) {
            return Err(Error::NoSuchView(name.to_owned()));
        }
        let gone = dependents(&cat.views, name);
        if !cascade && !gone.is_empty() {
            return Err(Error::Dependents {
                action: "drop view".to_owned(),
                name: name.to_owned(),
                dependents: gone,
            });
        }
        let before = cat.views.clone();
        let mut removed = gone;
        removed.push(name.to_owned());
        cat.views.retain(|v| !removed.contains(&v.name));
        if let Err(e) = self.save_catalog(&cat) {
            cat.views = before;
            return Err(e);
        }
        Ok(removed)
    }

    /// The views that read `name`, directly or through other views.
    pub fn views_reading(&self, name: &str) -> Vec<String> {
        dependents(&self.catalog.lock().views, name)
    }
}

/// The views reading `name`, transitively, each once, in catalog order.
pub(super) fn dependents(views: &[ViewDef], name: &str) -> Vec<String> {
    let mut found: Vec<String> = Vec::new();
    let mut frontier = vec![name.to_owned()];
    while let Some(n) = frontier.pop() {
        for v in views {
            if v.depends_on.contains(&n) && !found.contains(&v.name) && v.name != name {
                found.push(v.name.clone());
                frontier.push(v.name.clone());
            }
        }
    }
    found.sort_by_key(|f| views.iter().position(|v| &v.name == f));
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(name: &str, deps: &[&str]) -> ViewDef {
        ViewDef {
            name: name.to_owned(),
            definition: format!("CREATE VIEW {name} AS SELECT 1"),
            depends_on: deps.iter().map(|d| (*d).to_owned()).collect(),
        }
    }

    #[test]
    fn dependents_are_transitive_and_in_order() {
        let views = vec![
            v("a", &["t"]),
            v("b", &["a"]),
            v("c", &["u"]),
            v("d", &["b", "t"]),
        ];
        assert_eq!(dependents(&views, "t"), ["a", "b", "d"]);
        assert_eq!(dependents(&views, "a"), ["b", "d"]);
        assert!(dependents(&views, "c").is_empty());
    }

    #[test]
    fn views_persist_and_guard_their_tables() {
        let dir = tempfile::tempdir().unwrap();
        let db = Database::open(dir.path(), crate::DbOptions::default()).unwrap();
        db.create_dataset(crate::DatasetDef::new("t", &["id"]))
            .unwrap();
        db.create_view(v("a", &["t"]), false).unwrap();
        db.create_view(v("b", &["a"]), false).unwrap();
        assert!(matches!(
            db.create_view(v("a", &["t"]), false),
            Err(Error::ViewExists(_))
        ));
        assert!(matches!(
            db.create_view(v("t", &[]), true),
            Err(Error::DatasetExists(_))
        ));
        let e = db.drop_dataset("t").unwrap_err();
        assert!(
            e.to_string().contains("view `a`, view `b` depend on it"),
            "{e}"
        );
        assert!(matches!(
            db.drop_view("a", false),
            Err(Error::Dependents { .. })
        ));
        drop(db);
        let db = Database::open(dir.path(), crate::DbOptions::default()).unwrap();
        assert_eq!(db.views().len(), 2);
        assert_eq!(db.drop_view("a", true).unwrap(), ["b", "a"]);
        db.drop_dataset("t").unwrap();
        assert!(db.views().is_empty());
    }
}
