//! `catalog.json`: the definitions of the datasets (and their indexes) and
//! the roles, the only persistent schema. Replaced atomically (temporary file, fsync,
//! rename, directory fsync) on every DDL. Format: `docs/format/catalog.md`.

use crate::db::roles::Role;
use crate::db::views::ViewDef;
use crate::error::{Error, Result};
use crate::schema::DatasetDef;
use crate::storage::fsutil::write_atomic;
use serde::{Deserialize, Serialize};
use std::path::Path;

/// File name of the catalog in the database directory.
pub(super) const CATALOG_FILE: &str = "catalog.json";

#[derive(Serialize, Deserialize, Default)]
pub(super) struct Catalog {
    pub(super) version: u32,
    pub(super) datasets: Vec<DatasetDef>,
    /// The largest dataset id ever given, dropped datasets included: log
    /// records are routed by dataset id at recovery, so a dropped dataset's
    /// id must never name a new one. Absent in catalogs written before it
    /// existed (read as 0: the largest live id then decides).
    #[serde(default)]
    pub(super) dataset_ids_used: u32,
    /// The roles that may log in to a served database and their grants
    /// (see [`super::roles`]). Absent in catalogs written before roles.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(super) roles: Vec<Role>,
    /// The views (see [`super::views`]). Absent in catalogs written before
    /// views.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(super) views: Vec<ViewDef>,
    /// The sequences of their own (see [`super::sequences`]), by name.
    /// Absent in catalogs written before them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(super) sequences: Vec<(String, crate::schema::SequenceDef)>,
    /// The spaces built of datasets by the layers above (see
    /// [`super::spaces`]). Absent in catalogs written before them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(super) spaces: Vec<super::spaces::SpaceDef>,
}

impl Catalog {
    /// The id for a new dataset (and remember that it was given).
    pub(super) fn next_dataset_id(&mut self) -> u32 {
        let live = self.datasets.iter().map(|d| d.id).max().unwrap_or(0);
        let id = live.max(self.dataset_ids_used) + 1;
        self.dataset_ids_used = id;
        id
    }

    /// Where dataset `name` is in `datasets`.
    pub(super) fn dataset_position(&self, name: &str) -> Result<usize> {
        self.datasets
            .iter()
            .position(|d| d.name == name)
            .ok_or_else(|| Error::NoSuchDataset(name.to_owned()))
    }

    /// The spaces holding dataset `name` (`kind `name``, for messages).
    pub(super) fn spaces_holding(&self, name: &str) -> Vec<String> {
        self.spaces
            .iter()
            .filter(|s| s.datasets.iter().any(|d| d == name))
            .map(|s| format!("{} space `{}`", s.kind, s.name))
            .collect()
    }

    /// Read the catalog of the database in `dir` (an empty one if the
    /// database is new).
    pub(super) fn load(dir: &Path) -> Result<Catalog> {
        let cat_path = dir.join(CATALOG_FILE);
        match std::fs::read(&cat_path) {
            Ok(b) => serde_json::from_slice(&b)
                .map_err(|e| Error::corrupt(&cat_path, format!("unreadable catalog: {e}"))),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Catalog {
                version: 1,
                datasets: Vec::new(),
                dataset_ids_used: 0,
                roles: Vec::new(),
                views: Vec::new(),
                sequences: Vec::new(),
                spaces: Vec::new(),
            }),
            Err(e) => Err(Error::io(&cat_path, e)),
        }
    }

    /// Replace the catalog of the database in `dir` atomically.
    pub(super) fn save(&self, dir: &Path) -> Result<()> {
        let bytes = serde_json::to_vec_pretty(self)
            .map_err(|e| Error::Config(format!("encoding catalog: {e}")))?;
        write_atomic(&dir.join(CATALOG_FILE), &bytes)
    }
}
