//! Workloads: each one loads data into every system it compares, measures, and
//! returns one [`ResultRow`] per system x metric for a single run. The harness
//! repeats runs, aggregates, prints, writes CSVs and plots.

#[cfg(feature = "silt")]
pub mod asterix;
#[cfg(feature = "peers")]
pub mod durable_ingest;
#[cfg(feature = "hydra")]
pub mod hydra;
#[cfg(feature = "hydra")]
mod hydra_etcd;
#[cfg(feature = "hydra")]
pub mod hydra_node;
#[cfg(feature = "peers")]
pub mod kv_ingest_lookup;
#[cfg(feature = "silt")]
pub mod leveldbpp;
#[cfg(feature = "sql")]
pub mod pg_copy;
#[cfg(feature = "silt")]
pub mod pubsub;
#[cfg(feature = "silt")]
pub mod pubsub_hierarchy;
#[cfg(feature = "silt")]
mod pubsub_pg;
#[cfg(feature = "silt")]
mod pubsub_redis;
#[cfg(feature = "sql")]
pub mod server_abuse;
#[cfg(feature = "silt")]
pub mod spatial_indexes;
#[cfg(feature = "silt")]
pub mod spatial_indexes_dynamic;
#[cfg(feature = "silt")]
pub mod spatial_indexes_rect;
#[cfg(feature = "silt")]
pub mod spatial_policies;
#[cfg(feature = "peers")]
pub mod spatial_rtree;
#[cfg(feature = "sql")]
pub mod sql_ordinary;
#[cfg(feature = "sql")]
pub mod sql_path;
#[cfg(feature = "sql")]
pub mod synergy;
#[cfg(feature = "peers")]
pub mod txn_commit;

use std::{cell::RefCell, collections::BTreeSet, fmt, path::PathBuf};

use anyhow::Result;

#[cfg(feature = "peers")]
use crate::systems::KvSystemSpec;
use crate::{limits::Limits, results::ResultRow};

/// How much data a workload uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Scale {
    /// Seconds to a minute: for trying things out and CI smoke runs.
    Small,
    /// The default acceptance size.
    Medium,
    /// The largest size the workload defines.
    Full,
}

impl fmt::Display for Scale {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Scale::Small => "small",
            Scale::Medium => "medium",
            Scale::Full => "full",
        })
    }
}

/// What the harness hands a workload for one run.
pub struct Ctx {
    /// 0-based index of this run.
    pub run: usize,
    /// Seed for all generated data (the same in every run, so runs are comparable).
    pub seed: u64,
    /// The results directory (for workloads that write extra files, e.g. time series).
    pub out: PathBuf,
    /// An empty directory for this run's databases, removed afterwards.
    pub scratch: PathBuf,
    pub limits: Limits,
    /// Only run these systems (labels, or a family such as "silt"); all when `None`.
    pub systems: Option<Vec<String>>,
    /// Silt merge policies to compare (one Silt system per policy).
    pub silt_policies: Vec<String>,
    /// Where the spatial workloads' records are located (`--data`).
    pub data: crate::spatial::data::PointDist,
    /// Lines describing the configuration of each system, collected for the result header.
    pub notes: RefCell<BTreeSet<String>>,
}

impl Ctx {
    /// Whether the user asked for the system with this label.
    #[cfg(feature = "peers")]
    pub fn wants(&self, spec: &KvSystemSpec) -> bool {
        let label = spec.label();
        match &self.systems {
            None => true,
            Some(list) => list.iter().any(|s| {
                s.eq_ignore_ascii_case(&label) || (s.eq_ignore_ascii_case("silt") && spec.is_silt())
            }),
        }
    }

    /// Whether the user asked for the system labelled `label`: by its
    /// label, or by the family before its first `-` (`silt` for every
    /// `silt-*`, `postgresql` for every `postgresql-*`).
    pub fn wants_label(&self, label: &str) -> bool {
        let family = label.split('-').next().unwrap_or(label);
        self.systems.as_ref().is_none_or(|l| {
            l.iter()
                .any(|s| s.eq_ignore_ascii_case(label) || s.eq_ignore_ascii_case(family))
        })
    }

    pub fn note(&self, line: String) {
        self.notes.borrow_mut().insert(line);
    }
}

/// A benchmark.
pub trait Workload {
    /// The name used on the command line and for result files.
    fn name(&self) -> &'static str;
    /// One line for `silt-bench list`.
    fn description(&self) -> &'static str;
    /// A paragraph for the report: what is measured and why.
    fn explanation(&self) -> &'static str;
    /// The durability mode all systems run in (goes into the machine header).
    fn durability(&self) -> &'static str;
    /// Runs once at `scale` and returns one row per system x metric.
    fn run(&self, scale: Scale, ctx: &Ctx) -> Result<Vec<ResultRow>>;
}

/// Every workload, in the order `list` shows them.
pub fn all() -> Vec<Box<dyn Workload>> {
    vec![
        #[cfg(feature = "peers")]
        Box::new(kv_ingest_lookup::KvIngestLookup),
        #[cfg(feature = "peers")]
        Box::new(durable_ingest::DurableIngest),
        #[cfg(feature = "peers")]
        Box::new(txn_commit::TxnCommit),
        #[cfg(feature = "peers")]
        Box::new(spatial_rtree::SpatialRtree),
        #[cfg(feature = "silt")]
        Box::new(spatial_policies::SpatialPolicies),
        #[cfg(feature = "silt")]
        Box::new(spatial_indexes::SpatialIndexes),
        #[cfg(feature = "silt")]
        Box::new(spatial_indexes_rect::SpatialIndexesRect),
        #[cfg(feature = "silt")]
        Box::new(spatial_indexes_dynamic::SpatialIndexesDynamic),
        #[cfg(feature = "silt")]
        Box::new(leveldbpp::static_wl::LeveldbppStatic),
        #[cfg(feature = "silt")]
        Box::new(leveldbpp::mixed::LeveldbppMixed),
        #[cfg(feature = "silt")]
        Box::new(leveldbpp::bloom::LeveldbppBloom),
        #[cfg(feature = "silt")]
        Box::new(pubsub::Pubsub),
        #[cfg(feature = "silt")]
        Box::new(pubsub_hierarchy::PubsubHierarchy),
        #[cfg(feature = "silt")]
        Box::new(asterix::table2::AsterixTable2),
        #[cfg(feature = "silt")]
        Box::new(asterix::fig4::AsterixFig4),
        #[cfg(feature = "silt")]
        Box::new(asterix::table3::AsterixTable3),
        #[cfg(feature = "silt")]
        Box::new(asterix::table4::AsterixTable4),
        #[cfg(feature = "sql")]
        Box::new(server_abuse::ServerAbuse),
        #[cfg(feature = "sql")]
        Box::new(sql_path::SqlPath),
        #[cfg(feature = "sql")]
        Box::new(pg_copy::PgCopy),
        #[cfg(feature = "sql")]
        Box::new(sql_ordinary::SqlOrdinary),
        #[cfg(feature = "sql")]
        Box::new(synergy::Synergy),
        #[cfg(feature = "sql")]
        Box::new(synergy::SynergyTpcw),
        #[cfg(feature = "hydra")]
        Box::new(hydra::Hydra),
    ]
}

/// The Silt merge policies compared when `--policy` is not given.
pub fn default_policies() -> Vec<String> {
    #[cfg(feature = "peers")]
    return kv_ingest_lookup::DEFAULT_POLICIES
        .iter()
        .map(|s| s.to_string())
        .collect();
    #[cfg(not(feature = "peers"))]
    Vec::new()
}

pub fn find(name: &str) -> Option<Box<dyn Workload>> {
    all().into_iter().find(|w| w.name() == name)
}

/// The workloads that [`all`] includes only with a cargo feature, and that
/// feature: `run` names it when asked for one the harness was built without.
/// The test below keeps this table and the `cfg`s in `all` in step.
pub const GATED: &[(&str, &str)] = &[
    ("kv-ingest-lookup", "peers"),
    ("durable-ingest", "peers"),
    ("txn-commit", "peers"),
    ("spatial-rtree", "peers"),
    ("spatial-policies", "silt"),
    ("spatial-indexes", "silt"),
    ("spatial-indexes-rect", "silt"),
    ("spatial-indexes-dynamic", "silt"),
    ("leveldbpp-static", "silt"),
    ("leveldbpp-mixed", "silt"),
    ("leveldbpp-bloom", "silt"),
    ("pubsub", "silt"),
    ("pubsub-hierarchy", "silt"),
    ("asterix-table2", "silt"),
    ("asterix-fig4", "silt"),
    ("asterix-table3", "silt"),
    ("asterix-table4", "silt"),
    ("server-abuse", "sql"),
    ("sql-path", "sql"),
    ("pg-copy", "sql"),
    ("sql-ordinary", "sql"),
    ("synergy", "sql"),
    ("synergy-tpcw", "sql"),
    ("hydra", "hydra"),
];

/// The feature a workload this build lacks would need, if that is why it is missing.
pub fn missing_feature(name: &str) -> Option<&'static str> {
    let (_, feature) = GATED.iter().find(|(n, _)| *n == name)?;
    let built = match *feature {
        "peers" => cfg!(feature = "peers"),
        "hydra" => cfg!(feature = "hydra"),
        "silt" => cfg!(feature = "silt"),
        "sql" => cfg!(feature = "sql"),
        _ => false,
    };
    (!built).then_some(*feature)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every gated workload this build has a feature for exists under the name the
    /// table gives, every one it lacks is missing, and every workload is in the
    /// table (none is built without a feature).
    #[test]
    fn gated_table_matches_all() {
        let names: Vec<_> = all().iter().map(|w| w.name()).collect();
        for (name, feature) in GATED {
            match missing_feature(name) {
                None => assert!(
                    names.contains(name),
                    "GATED names {name:?}, which all() lacks"
                ),
                Some(f) => {
                    assert_eq!(f, *feature);
                    assert!(!names.contains(name), "{name:?} is built without `{f}`");
                }
            }
        }
        let ungated: Vec<_> = names
            .iter()
            .filter(|n| !GATED.iter().any(|(g, _)| g == *n))
            .collect();
        assert!(
            ungated.is_empty(),
            "a workload behind a cfg in all() must be listed in GATED: {ungated:?}"
        );
    }
}
