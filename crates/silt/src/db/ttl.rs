//! Setting a dataset's `ttl` and the thread that sweeps expired records
//! (`crate::dataset` module `ttl` holds the rules).

use super::Database;
use super::checkpoint::DatasetMap;
use crate::dataset::SweepReport;
use crate::error::{Error, Result};
use crate::schema::{DatasetDef, TtlDef};
use std::sync::Arc;
use std::time::Duration;

impl Database {
    /// Make dataset `name`'s records expire as `ttl` says (`None`: never
    /// again); kept in the catalog. Reads hide the expired records at
    /// once; the sweeper deletes them. Returns the new definition.
    pub fn set_ttl(&self, name: &str, ttl: Option<TtlDef>) -> Result<Arc<DatasetDef>> {
        self.check_open()?;
        let ds = self.dataset(name)?;
        let _ddl = ds.ddl_write();
        let mut def = (*ds.def()).clone();
        def.ttl = ttl;
        def.validate()?;
        {
            let mut cat = self.catalog.lock();
            let i = cat.dataset_position(name)?;
            let referencing = super::foreign_keys::referencing(&cat, name);
            if def.ttl.is_some() && !referencing.is_empty() {
                return Err(Error::Referenced {
                    action: "give a ttl to".to_owned(),
                    name: name.to_owned(),
                    constraints: referencing,
                });
            }
            let view = cat.datasets.iter().find(|d| {
                d.materialized
                    .as_ref()
                    .is_some_and(|m| m.relations.iter().any(|r| r == name))
            });
            if let (Some(_), Some(v)) = (&def.ttl, view) {
                return Err(Error::Config(format!(
                    "`{name}` is in materialized view `{}`: an expired record leaves every read at once, its view row would not; drop the view first",
                    v.name
                )));
            }
            let old = cat.datasets[i].ttl.clone();
            cat.datasets[i].ttl.clone_from(&def.ttl);
            if let Err(e) = self.save_catalog(&cat) {
                cat.datasets[i].ttl = old;
                return Err(e);
            }
        }
        let def = Arc::new(def);
        ds.reset_ttl(&def)?;
        ds.redefine(def.clone());
        self.schema_changed();
        Ok(def)
    }

    /// Sweep dataset `name` now (what the sweeper does every
    /// `DbOptions::ttl_sweep_ms`, with a full scan allowed).
    pub fn sweep_expired(&self, name: &str) -> Result<SweepReport> {
        self.check_open()?;
        self.dataset(name)?.sweep_expired(true)
    }

    /// Start the thread that sweeps every dataset with a ttl every
    /// `ttl_sweep_ms` (0: never).
    pub(super) fn start_sweeper(&self) {
        let every = self.opts.ttl_sweep_ms;
        if every == 0 {
            return;
        }
        let (tx, rx) = crossbeam_channel::bounded::<()>(1);
        let datasets: DatasetMap = self.datasets.clone();
        let handle = std::thread::Builder::new()
            .name("silt-ttl-sweep".into())
            .spawn(move || {
                let mut round: u64 = 0;
                while let Err(crossbeam_channel::RecvTimeoutError::Timeout) =
                    rx.recv_timeout(Duration::from_millis(every))
                {
                    let full = round.is_multiple_of(crate::dataset::ttl::FULL_SCAN_EVERY);
                    round += 1;
                    let all: Vec<_> = datasets.read().values().cloned().collect();
                    for ds in all.into_iter().filter(|d| d.def().ttl.is_some()) {
                        if let Err(e) = ds.sweep_expired(full) {
                            tracing::warn!("ttl sweep of `{}` failed: {e}", ds.name());
                        }
                    }
                }
            });
        match handle {
            Ok(h) => *self.sweeper.lock() = Some((tx, h)),
            Err(e) => tracing::error!("cannot start the ttl sweep thread: {e}"),
        }
    }
}
