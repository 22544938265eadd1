//! Secondary index definitions and the entries they derive from records.
//!
//! Every secondary index is an LSM index of its own (one per storage
//! partition), maintained inside the record's transaction. This module says
//! what entries a record contributes; `dataset` does the maintenance and the
//! access paths.

use crate::error::{Error, Result};
use crate::lsm::policy::MergePolicy;
use crate::schema::validate_name;
use crate::value::{self, Value};
use serde::{Deserialize, Serialize};

/// The kind of a secondary index.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum IndexKind {
    /// LSM B+-tree on one field or a composite of fields: entries
    /// ⟨secondary key, primary key⟩, antimatter on delete, no uniqueness.
    Btree,
}

impl IndexKind {
    pub fn parse(s: &str) -> Result<IndexKind> {
        match s.to_ascii_lowercase().as_str() {
            "btree" | "b-tree" | "bplustree" => Ok(IndexKind::Btree),
            other => Err(Error::Config(format!(
                "unknown index type `{other}`; available: btree"
            ))),
        }
    }
}

impl std::fmt::Display for IndexKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            IndexKind::Btree => "btree",
        })
    }
}

/// A secondary index as the catalog records it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct IndexDef {
    pub name: String,
    /// Catalog-assigned, > 0 (0 is the primary index in log records).
    #[serde(default)]
    pub id: u32,
    pub kind: IndexKind,
    /// Indexed fields, in key order.
    pub fields: Vec<String>,
    pub policy: MergePolicy,
}

impl IndexDef {
    pub fn btree(name: &str, fields: &[&str]) -> IndexDef {
        IndexDef {
            name: name.to_owned(),
            id: 0,
            kind: IndexKind::Btree,
            fields: fields.iter().map(|s| (*s).to_owned()).collect(),
            policy: MergePolicy::default(),
        }
    }

    pub fn policy(mut self, p: MergePolicy) -> Self {
        self.policy = p;
        self
    }

    pub fn validate(&self) -> Result<()> {
        validate_name("index", &self.name)?;
        if self.name == "primary" {
            return Err(Error::Config(
                "`primary` is reserved for the primary index; choose another index name".into(),
            ));
        }
        if self.fields.is_empty() {
            return Err(Error::Config(format!(
                "index `{}` needs at least one field",
                self.name
            )));
        }
        self.policy.validate()
    }

    /// The secondary key values of a record: `None` when any indexed field is
    /// missing or null (such records are not indexed), an error when a value
    /// cannot be a key (array, object, geometry).
    pub fn key_values(&self, record: &Value) -> Result<Option<Vec<Value>>> {
        let mut out = Vec::with_capacity(self.fields.len());
        for f in &self.fields {
            match record.get(f) {
                None | Some(Value::Null) => return Ok(None),
                Some(v @ (Value::Array(_) | Value::Object(_) | Value::Geometry(_))) => {
                    return Err(Error::invalid(
                        Some(f),
                        format!(
                            "the btree index `{}` needs a bool, number, string or binary here, got {}",
                            self.name,
                            v.type_name()
                        ),
                    ));
                }
                Some(v) => out.push(v.clone()),
            }
        }
        Ok(Some(out))
    }

    /// The index entry key of a record: encoded secondary key ‖ encoded
    /// primary key (both self-delimiting, so byte order = (sk, pk) order).
    pub fn entry_key(&self, record: &Value, pk: &[u8]) -> Result<Option<Vec<u8>>> {
        let Some(parts) = self.key_values(record)? else {
            return Ok(None);
        };
        let mut k = Vec::with_capacity(32 + pk.len());
        value::encode_key(&parts, &mut k)?;
        k.extend_from_slice(pk);
        Ok(Some(k))
    }

    /// Split an entry key into (secondary key values, encoded primary key).
    pub fn split_entry(&self, entry: &[u8]) -> Result<(Vec<Value>, Vec<u8>)> {
        let mut parts = value::decode_key(entry)?;
        if parts.len() <= self.fields.len() {
            return Err(Error::corrupt(
                format!("<index {}>", self.name),
                "index entry has no primary key part",
            ));
        }
        let pk_parts = parts.split_off(self.fields.len());
        let mut pk = Vec::new();
        value::encode_key(&pk_parts, &mut pk)?;
        Ok((parts, pk))
    }
}
