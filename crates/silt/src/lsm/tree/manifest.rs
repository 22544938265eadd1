//! The MANIFEST: the live component list of one index, in order, with
//! levels and lifetime counters, replaced atomically after every flush and
//! merge (format: `docs/format/manifest.md`).

use super::*;

#[derive(Serialize, Deserialize)]
pub(super) struct Manifest {
    pub(super) version: u32,
    pub(super) next_id: u64,
    pub(super) flush_count: u64,
    pub(super) components: Vec<ManifestEntry>,
    /// Lifetime write counters, so write amplification survives restarts.
    #[serde(default)]
    pub(super) lifetime: LifetimeCounters,
    /// Indexes with a remote tier: a token of the process that wrote this
    /// MANIFEST (new at every open), so that each writer's MANIFEST
    /// differs from the last and a conditional put by a writer that lost
    /// its place fails.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) writer: Option<String>,
}

#[derive(Serialize, Deserialize, Default, Clone, Copy)]
pub(super) struct LifetimeCounters {
    pub(super) flushes: u64,
    pub(super) merges: u64,
    pub(super) bytes_flushed: u64,
    pub(super) bytes_merged: u64,
    pub(super) user_bytes: u64,
    pub(super) writes: u64,
}

#[derive(Serialize, Deserialize)]
pub(super) struct ManifestEntry {
    pub(super) id: u64,
    pub(super) level: u32,
    /// The component file is in the bucket (the index's remote tier).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub(super) remote: bool,
}

pub(super) fn component_path(dir: &Path, id: u64) -> PathBuf {
    dir.join(format!("{id:016x}.sc"))
}

/// The component list order of a leveled tree: level 0 keeps its recency
/// order (newest first); deeper levels follow, each sorted by key.
pub(super) fn leveled_order(d: Vec<Arc<ComponentReader>>) -> Vec<Arc<ComponentReader>> {
    let (mut l0, mut rest): (Vec<_>, Vec<_>) = d.into_iter().partition(|c| c.meta().level == 0);
    rest.sort_by(|a, b| {
        (a.meta().level, &a.meta().min_key).cmp(&(b.meta().level, &b.meta().min_key))
    });
    l0.extend(rest);
    l0
}

impl LsmTree {
    pub(super) fn write_manifest(&self, disk: &[Arc<ComponentReader>]) -> Result<()> {
        let remote = self.remote.as_ref();
        let m = Manifest {
            writer: remote.map(|r| r.writer.clone()),
            version: 1,
            next_id: self.next_id.load(Ordering::SeqCst),
            flush_count: self.flush_count.load(Ordering::SeqCst),
            components: disk
                .iter()
                .map(|c| ManifestEntry {
                    id: c.meta().id,
                    level: c.meta().level,
                    remote: c.is_remote(),
                })
                .collect(),
            lifetime: {
                let c = &self.counters;
                let ld = |a: &AtomicU64| a.load(Ordering::Relaxed);
                LifetimeCounters {
                    flushes: ld(&c.flushes),
                    merges: ld(&c.merges),
                    bytes_flushed: ld(&c.bytes_flushed),
                    bytes_merged: ld(&c.bytes_merged),
                    user_bytes: ld(&c.user_bytes),
                    writes: ld(&c.writes),
                }
            },
        };
        let bytes = serde_json::to_vec_pretty(&m)
            .map_err(|e| Error::Config(format!("encoding manifest: {e}")))?;
        match remote {
            Some(r) => r.put_manifest(bytes),
            None => write_atomic(&self.cfg.dir.join("MANIFEST"), &bytes),
        }
    }
}
