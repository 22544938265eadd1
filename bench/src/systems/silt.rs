//! Silt through its public dataset API: one dataset `kv` with an integer primary
//! key `k` and a binary field `v`, one record per `upsert` call (one record-level
//! transaction, acknowledged per the durability mode).

use std::{path::Path, sync::Arc};

use anyhow::{Context, Result};
use silt::lsm::policy::MergePolicy;
use silt::value::{FieldType, Value};
use silt::{Database, DatasetDef, DbOptions, Durability};

use super::{KvConfig, KvStore, KvWriter, SharedKv, System, json_stats::flatten_stats};
use crate::results::ResultRow;

pub struct SiltKv {
    label: String,
    policy: String,
    /// `DbOptions` as opened (Debug form: survives renamed fields).
    options: String,
    cfg: KvConfig,
    db: Option<Database>,
    ds: Option<Arc<silt::Dataset>>,
}

impl SiltKv {
    pub fn open(path: &Path, label: &str, policy: &str, cfg: &KvConfig) -> Result<Self> {
        let merge_policy = MergePolicy::parse(policy)
            .with_context(|| format!("parsing Silt merge policy {policy:?}"))?;
        let opts = DbOptions {
            block_cache_bytes: cfg.block_cache_bytes as _,
            durability: if cfg.sync_commits {
                Durability::Sync
            } else {
                Durability::None
            },
            ..Default::default()
        };
        let options = format!("{opts:?}");
        let db = Database::open(path, opts)
            .with_context(|| format!("opening Silt at {}", path.display()))?;
        let def = DatasetDef::new("kv", &["k"])
            .field("k", FieldType::Int)
            .field("v", FieldType::Binary)
            .memory_budget(cfg.memtable_bytes as _)
            .policy(merge_policy)
            .partitions(1);
        let ds = db.create_dataset(def).context("creating Silt dataset kv")?;
        Ok(Self {
            label: label.to_string(),
            policy: policy.to_string(),
            options,
            cfg: cfg.clone(),
            db: Some(db),
            ds: Some(ds),
        })
    }

    fn db(&self) -> Result<&Database> {
        self.db.as_ref().context("Silt database already closed")
    }

    fn ds(&self) -> Result<&Arc<silt::Dataset>> {
        self.ds.as_ref().context("Silt dataset already closed")
    }
}

impl System for SiltKv {
    fn name(&self) -> &str {
        &self.label
    }

    fn describe(&self) -> String {
        format!(
            "Silt (this repo): merge policy {}, memory budget {} MiB, {}, {}",
            self.policy,
            self.cfg.memtable_bytes >> 20,
            if self.cfg.sync_commits {
                "WAL on, durability sync (acknowledged after the COMMIT is fsynced; group commit)"
            } else {
                "WAL on, durability none (no fsync per write)"
            },
            self.options
        )
    }
}

/// One upsert of record `{k: key, v: value}`.
fn upsert(ds: &silt::Dataset, key: u64, value: &[u8]) -> Result<()> {
    let rec = Value::Object(vec![
        ("k".into(), Value::Int(key as i64)),
        ("v".into(), Value::Binary(value.to_vec())),
    ]);
    ds.upsert(rec)
        .with_context(|| format!("Silt upsert of key {key}"))
}

impl KvStore for SiltKv {
    fn put(&mut self, key: u64, value: &[u8]) -> Result<()> {
        upsert(self.ds()?, key, value)
    }

    fn get(&mut self, key: u64) -> Result<bool> {
        let rec = self
            .ds()?
            .get(&[Value::Int(key as i64)])
            .with_context(|| format!("Silt get of key {key}"))?;
        Ok(rec.is_some())
    }

    fn settle(&mut self) -> Result<()> {
        // Like RocksDB's settle: flush the memtable, then wait for flushes and merges.
        let db = self.db()?;
        db.flush().context("Silt flush")?;
        db.wait_idle().context("Silt wait_idle")?;
        Ok(())
    }

    fn stats(&mut self, phase: &str) -> Result<Vec<ResultRow>> {
        let stats = self.db()?.stats();
        let json = serde_json::to_value(&stats).context("serializing Silt stats")?;
        let mut rows = Vec::new();
        for (name, value, unit) in flatten_stats(&json) {
            // Load: the write path (flushes, merges, components, amplification);
            // lookups: only the read-path counters are new information.
            let keep = if phase == "load" {
                ![
                    "get",
                    "scan",
                    "bloom",
                    "block_cache",
                    "memory_budget",
                    "partitions",
                    "last_recovery",
                ]
                .iter()
                .any(|w| name.contains(w))
            } else {
                ["hits", "misses", "bloom", "per_get"]
                    .iter()
                    .any(|w| name.contains(w))
            };
            if !keep {
                continue;
            }
            rows.push(ResultRow::stat(
                &self.label,
                &format!("{phase}.{name}"),
                &unit,
                value,
            ));
        }
        Ok(rows)
    }

    fn close(self: Box<Self>) -> Result<()> {
        self.shut()
    }
}

impl SiltKv {
    fn shut(mut self: Box<Self>) -> Result<()> {
        drop(self.ds.take());
        if let Some(db) = self.db.take() {
            db.close().context("closing Silt")?;
        }
        Ok(())
    }
}

struct SiltWriter(Arc<silt::Dataset>);

impl KvWriter for SiltWriter {
    fn put(&mut self, key: u64, value: &[u8]) -> Result<()> {
        upsert(&self.0, key, value)
    }
}

/// The log and lock counters kept as stats by many-writer workloads.
const SHARED_STATS: [&str; 9] = [
    "wal.commits",
    "wal.fsyncs",
    "wal.batches",
    "wal.max_batch_records",
    "wal.bytes",
    "wal.tail_full_waits",
    "locks.grants",
    "locks.waits",
    "locks.try_refusals",
];

impl SharedKv for SiltKv {
    fn writer(&self) -> Result<Box<dyn KvWriter + '_>> {
        Ok(Box::new(SiltWriter(self.ds()?.clone())))
    }

    fn own_fsyncs(&self) -> Option<u64> {
        Some(self.db.as_ref()?.stats().wal.fsyncs)
    }

    fn stats(&self, prefix: &str) -> Result<Vec<ResultRow>> {
        let stats = self.db()?.stats();
        let json = serde_json::to_value(&stats).context("serializing Silt stats")?;
        Ok(flatten_stats(&json)
            .into_iter()
            .filter(|(name, _, _)| SHARED_STATS.contains(&name.as_str()))
            .map(|(name, value, unit)| {
                ResultRow::stat(&self.label, &format!("{prefix}{name}"), &unit, value)
            })
            .collect())
    }

    fn close(self: Box<Self>) -> Result<()> {
        self.shut()
    }
}
