//! Changing a dataset's declared fields (SQL's `ALTER TABLE ... ADD / DROP
//! / RENAME COLUMN`, `SET / DROP DEFAULT`, `SET / DROP NOT NULL`, `ADD /
//! DROP CONSTRAINT ... CHECK`): one
//! catalog write, after which every write is checked against the new
//! definition. Records are not rewritten here: the caller moves or removes
//! their values first (see `silt-sql`'s `alter`), in a transaction.

use std::sync::Arc;

use super::Database;
use crate::error::{Error, Result};
use crate::schema::DatasetDef;

impl Database {
    /// Change dataset `name`'s declared fields, `NOT NULL` fields, defaults
    /// and CHECK constraints with `f` (the caller has checked the records
    /// against added constraints); anything else `f` changes is refused, as is
    /// undeclaring a field an index reads. Returns the new definition.
    pub fn alter_dataset(
        &self,
        name: &str,
        f: impl FnOnce(&mut DatasetDef) -> Result<()>,
    ) -> Result<Arc<DatasetDef>> {
        self.check_open()?;
        let mut cat = self.catalog.lock();
        let i = cat.dataset_position(name)?;
        let ds = self
            .datasets
            .read()
            .get(name)
            .cloned()
            .ok_or_else(|| Error::NoSuchDataset(name.to_owned()))?;
        let old = cat.datasets[i].clone();
        let mut def = old.clone();
        f(&mut def)?;
        let mut rest = def.clone();
        rest.fields = old.fields.clone();
        rest.not_null = old.not_null.clone();
        rest.defaults = old.defaults.clone();
        rest.sequences = old.sequences.clone();
        rest.checks = old.checks.clone();
        if rest != old {
            return Err(Error::Config(format!(
                "altering `{name}` may change its fields, NOT NULL, defaults (sequences included) and CHECK constraints only"
            )));
        }
        for idx in ds.index_defs() {
            for f in &idx.fields {
                if old.field_type(f).is_some() && def.field_type(f).is_none() {
                    return Err(Error::Config(format!(
                        "index `{}` reads field `{f}`; drop the index first",
                        idx.name
                    )));
                }
            }
        }
        def.validate()?;
        cat.datasets[i] = def.clone();
        if let Err(e) = self.save_catalog(&cat) {
            cat.datasets[i] = old;
            return Err(e);
        }
        ds.redefine(def);
        self.schema_changed();
        Ok(ds.def())
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
