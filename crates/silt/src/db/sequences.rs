//! Sequences of their own (SQL's `CREATE SEQUENCE`): named counters that
//! belong to no dataset, taken by `nextval('name')`. Their options live in
//! the catalog; their counters in `sequences.json` in the database's
//! directory, reserved in chunks exactly as a column's sequence
//! ([`crate::dataset::sequence`]): no value is handed out twice, across
//! crashes and restarts. A sequence shares the names of tables and views
//! (and of the sequences of `SERIAL` and identity columns), as in
//! PostgreSQL.

use super::Database;
use crate::dataset::SequenceValues;
use crate::error::{Error, Result};
use crate::schema::{SequenceDef, sequence_name};

impl Database {
    /// Create sequence `name` with options `def`; it starts at
    /// `def.start`.
    pub fn create_sequence(&self, name: &str, def: SequenceDef) -> Result<()> {
        self.check_open()?;
        def.validate(name)?;
        let mut cat = self.catalog.lock();
        if let Some(kind) = self.relation_named(&cat, name) {
            return Err(Error::SequenceExists {
                name: name.to_owned(),
                taken_by: kind.to_owned(),
            });
        }
        self.counters.forget(name)?;
        cat.sequences.push((name.to_owned(), def));
        if let Err(e) = self.save_catalog(&cat) {
            cat.sequences.pop();
            return Err(e);
        }
        Ok(())
    }

    /// What else holds relation name `name`, if anything.
    fn relation_named(&self, cat: &super::catalog::Catalog, name: &str) -> Option<&'static str> {
        if cat.sequences.iter().any(|(n, _)| n == name) {
            return Some("a sequence");
        }
        if cat.datasets.iter().any(|d| d.name == name) {
            return Some("a table");
        }
        if cat.views.iter().any(|v| v.name == name) {
            return Some("a view");
        }
        cat.datasets
            .iter()
            .any(|d| {
                d.defaults.iter().any(|(f, x)| {
                    *x == crate::FieldDefault::Sequence && sequence_name(&d.name, f) == name
                })
            })
            .then_some("the sequence of a SERIAL or identity column")
    }

    /// Drop sequence `name`.
    pub fn drop_sequence(&self, name: &str) -> Result<()> {
        self.check_open()?;
        let mut cat = self.catalog.lock();
        let i = position(&cat, name)?;
        let old = cat.sequences.remove(i);
        if let Err(e) = self.save_catalog(&cat) {
            cat.sequences.insert(i, old);
            return Err(e);
        }
        // A crash here leaves a counter nobody reads; a sequence created
        // again under the name forgets it first.
        self.counters.forget(name)
    }

    /// Change sequence `name`'s options with `f` (its counter stays where
    /// it is; [`Database::set_sequence_value`] moves it). Returns them.
    pub fn alter_sequence(
        &self,
        name: &str,
        f: impl FnOnce(&mut SequenceDef) -> Result<()>,
    ) -> Result<SequenceDef> {
        self.check_open()?;
        let mut cat = self.catalog.lock();
        let i = position(&cat, name)?;
        let mut def = cat.sequences[i].1;
        f(&mut def)?;
        def.validate(name)?;
        let old = std::mem::replace(&mut cat.sequences[i].1, def);
        if let Err(e) = self.save_catalog(&cat) {
            cat.sequences[i].1 = old;
            return Err(e);
        }
        Ok(def)
    }

    /// The sequences of their own, by name.
    pub fn sequences(&self) -> Vec<(String, SequenceDef)> {
        self.catalog.lock().sequences.clone()
    }

    /// Sequence `name`'s options.
    pub fn sequence(&self, name: &str) -> Result<SequenceDef> {
        self.catalog
            .lock()
            .sequences
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, d)| *d)
            .ok_or_else(|| Error::NoSuchSequence(name.to_owned()))
    }

    /// Take `n` consecutive values of sequence `name` (SQL's `nextval`).
    pub fn next_sequence_value(&self, name: &str, n: u64) -> Result<SequenceValues> {
        self.check_open()?;
        let def = self.sequence(name)?;
        self.counters.take(name, &def, n)
    }

    /// Set sequence `name`'s counter as SQL's `setval(name, value,
    /// called)` does.
    pub fn set_sequence_value(&self, name: &str, value: i64, called: bool) -> Result<()> {
        self.check_open()?;
        let def = self.sequence(name)?;
        self.counters.set(name, &def, value, called)
    }

    /// The value sequence `name` hands out next.
    pub fn peek_sequence_value(&self, name: &str) -> Result<i64> {
        let def = self.sequence(name)?;
        Ok(self.counters.peek(name, &def))
    }
}

/// Where sequence `name` is in the catalog's list.
fn position(cat: &super::catalog::Catalog, name: &str) -> Result<usize> {
    cat.sequences
        .iter()
        .position(|(n, _)| n == name)
        .ok_or_else(|| Error::NoSuchSequence(name.to_owned()))
}

#[cfg(test)]
mod tests {
    use crate::{Database, DbOptions, Error, SequenceDef};

    #[test]
    fn sequences_count_persist_and_never_repeat() {
        let dir = tempfile::tempdir().unwrap();
        let db = Database::open(dir.path(), DbOptions::default()).unwrap();
        db.create_sequence("s", SequenceDef::counting(5)).unwrap();
        assert!(matches!(
            db.create_sequence("s", SequenceDef::default()),
            Err(Error::SequenceExists { .. })
        ));
        let v = db.next_sequence_value("s", 3).unwrap();
        assert_eq!(v.values().collect::<Vec<_>>(), [1, 6, 11]);
        db.set_sequence_value("s", 100, true).unwrap();
        assert_eq!(db.peek_sequence_value("s").unwrap(), 105);
        drop(db);
        // After a restart: past every value handed out, never one again.
        let db = Database::open(dir.path(), DbOptions::default()).unwrap();
        let next = db.next_sequence_value("s", 1).unwrap().first;
        assert!(next >= 105, "{next}");
        db.alter_sequence("s", |d| {
            d.max = 200;
            Ok(())
        })
        .unwrap();
        assert_eq!(db.sequence("s").unwrap().max, 200);
        // Dropped and created again: it starts over.
        db.drop_sequence("s").unwrap();
        assert!(matches!(
            db.next_sequence_value("s", 1),
            Err(Error::NoSuchSequence(_))
        ));
        db.create_sequence("s", SequenceDef::default()).unwrap();
        assert_eq!(db.next_sequence_value("s", 1).unwrap().first, 1);
    }
}
