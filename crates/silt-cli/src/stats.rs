//! Human-readable rendering of [`DbStats`].

use crate::util::{bytes, count};
use silt::lsm::TreeStats;
use silt::storage::CacheStats;
use silt::{DatasetStats, DbStats, IndexDef};
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// With only a primary index, show per-partition columns up to this many
/// partitions; beyond, only the total.
const MAX_PARTITION_COLUMNS: usize = 4;
/// With secondary indexes, show per-index columns up to this many indexes
/// (the primary included); beyond, only the total.
const MAX_INDEX_COLUMNS: usize = 6;

/// Sums over the indexes of a dataset.
#[derive(Default)]
pub struct Totals {
    pub components: u64,
    pub levels: BTreeMap<u32, u64>,
    pub disk_bytes: u64,
    pub memory_bytes: u64,
    pub memory_entries: u64,
    pub entries: u64,
    pub tombstones: u64,
    pub flushes: u64,
    pub merges: u64,
    pub bytes_flushed: u64,
    pub bytes_merged: u64,
    pub user_bytes: u64,
    pub gets: u64,
    /// Sum of components probed (components per get times gets).
    pub probes: f64,
    pub bloom_negatives: u64,
    pub bloom_false_positives: u64,
    pub scans: u64,
    pub flush_stalls: u64,
    /// Indexes with a remote tier among those summed, and what they asked
    /// of their bucket.
    pub remote_indexes: u64,
    pub remote_components: u64,
    pub remote_gets: u64,
    pub remote_bytes_read: u64,
    pub remote_puts: u64,
    pub remote_bytes_written: u64,
}

impl Totals {
    pub fn of(indexes: &[TreeStats]) -> Totals {
        let mut t = Totals::default();
        for i in indexes {
            t.add(i);
        }
        t
    }

    fn add(&mut self, i: &TreeStats) {
        self.components += i.components.len() as u64;
        for c in &i.components {
            *self.levels.entry(c.level).or_default() += 1;
            self.entries += c.entries;
            self.tombstones += c.tombstones;
        }
        self.disk_bytes += i.disk_bytes;
        self.memory_bytes += i.memory_bytes;
        self.memory_entries += i.memory_entries;
        self.flushes += i.flushes;
        self.merges += i.merges;
        self.bytes_flushed += i.bytes_flushed;
        self.bytes_merged += i.bytes_merged;
        self.user_bytes += i.user_bytes_written;
        self.gets += i.gets;
        self.probes += i.components_per_get * i.gets as f64;
        self.bloom_negatives += i.bloom_negatives;
        self.bloom_false_positives += i.bloom_false_positives;
        self.scans += i.scans;
        self.flush_stalls += i.flush_stalls;
        if let Some(r) = &i.remote {
            self.remote_indexes += 1;
            self.remote_components += r.components;
            self.remote_gets += r.gets;
            self.remote_bytes_read += r.bytes_read;
            self.remote_puts += r.puts;
            self.remote_bytes_written += r.bytes_written;
        }
    }

    pub fn write_amplification(&self) -> f64 {
        if self.user_bytes == 0 {
            0.0
        } else {
            (self.bytes_flushed + self.bytes_merged) as f64 / self.user_bytes as f64
        }
    }

    pub fn components_per_get(&self) -> f64 {
        if self.gets == 0 {
            0.0
        } else {
            self.probes / self.gets as f64
        }
    }

    pub fn level_summary(&self) -> String {
        levels_text(&self.levels)
    }
}

fn levels_text(levels: &BTreeMap<u32, u64>) -> String {
    if levels.is_empty() {
        return "-".to_owned();
    }
    levels
        .iter()
        .map(|(l, n)| format!("L{l}:{n}"))
        .collect::<Vec<_>>()
        .join(" ")
}

/// The block cache hit ratio as a percentage, or `-` before any lookup.
pub fn hit_ratio(c: &CacheStats) -> String {
    let total = c.hits + c.misses;
    if total == 0 {
        "-".to_owned()
    } else {
        format!("{:.1}%", c.hits as f64 * 100.0 / total as f64)
    }
}

/// One row of the metrics table: a label and a cell per column.
type Row = (&'static str, Vec<String>);

fn rows_for(columns: &[Totals]) -> Vec<Row> {
    let cell = |f: &dyn Fn(&Totals) -> String| columns.iter().map(f).collect::<Vec<_>>();
    let ratio = |v: f64| format!("{v:.2}");
    let mut rows = vec![
        ("components", cell(&|t| count(t.components))),
        ("  per level", cell(&|t| t.level_summary())),
        ("  entries on disk", cell(&|t| count(t.entries))),
        ("  tombstones", cell(&|t| count(t.tombstones))),
        ("disk size", cell(&|t| bytes(t.disk_bytes))),
        ("memory", cell(&|t| bytes(t.memory_bytes))),
        ("  entries in memory", cell(&|t| count(t.memory_entries))),
        ("flushes", cell(&|t| count(t.flushes))),
        ("merges", cell(&|t| count(t.merges))),
        ("bytes flushed", cell(&|t| bytes(t.bytes_flushed))),
        ("bytes merged", cell(&|t| bytes(t.bytes_merged))),
        ("user bytes written", cell(&|t| bytes(t.user_bytes))),
        (
            "write amplification",
            cell(&|t| ratio(t.write_amplification())),
        ),
        ("flush stalls", cell(&|t| count(t.flush_stalls))),
        ("gets", cell(&|t| count(t.gets))),
        (
            "components per get",
            cell(&|t| ratio(t.components_per_get())),
        ),
        ("bloom negatives", cell(&|t| count(t.bloom_negatives))),
        (
            "bloom false positives",
            cell(&|t| count(t.bloom_false_positives)),
        ),
        ("scans", cell(&|t| count(t.scans))),
    ];
    if columns.iter().any(|t| t.remote_indexes > 0) {
        rows.extend([
            (
                "in object storage",
                cell(&|t| format!("{} components", count(t.remote_components))),
            ),
            ("  GETs", cell(&|t| count(t.remote_gets))),
            ("  bytes fetched", cell(&|t| bytes(t.remote_bytes_read))),
            ("  PUTs", cell(&|t| count(t.remote_puts))),
            ("  bytes uploaded", cell(&|t| bytes(t.remote_bytes_written))),
        ]);
    }
    rows
}

/// The trees of a dataset grouped by index: (index name, trees over the
/// partitions), the primary first, then the secondary indexes in order.
fn group_by_index(ds: &DatasetStats) -> Vec<(String, Vec<&TreeStats>)> {
    let mut groups: Vec<(String, Vec<&TreeStats>)> = Vec::new();
    for t in &ds.indexes {
        let short = short_index_name(&ds.name, &t.name);
        // `p0/by_age` -> `by_age`; a name of another shape is its own group.
        let index = short
            .split_once('/')
            .filter(|(p, _)| {
                p.strip_prefix('p')
                    .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
            })
            .map_or(short.as_str(), |(_, i)| i)
            .to_owned();
        match groups.iter_mut().find(|(n, _)| *n == index) {
            Some((_, trees)) => trees.push(t),
            None => groups.push((index, vec![t])),
        }
    }
    groups
}

/// Sums over some trees of a dataset.
pub fn totals_of(trees: &[&TreeStats]) -> Totals {
    let mut t = Totals::default();
    for i in trees {
        t.add(i);
    }
    t
}

/// Render a dataset: a header line (and one per secondary index), then a
/// metrics table. With only a primary index there is one column per
/// partition (when there are few) and a total; with secondary indexes, one
/// column per index (summed over the partitions) and a total.
pub fn render_dataset(ds: &DatasetStats, defs: &[IndexDef]) -> String {
    let mut out = String::new();
    let policy = ds.indexes.first().map(|i| i.policy.as_str()).unwrap_or("-");
    let _ = writeln!(
        out,
        "dataset {}  (key: {}; {} partition{}; memory budget {}; policy {})",
        ds.name,
        ds.primary_key.join(", "),
        ds.partitions,
        if ds.partitions == 1 { "" } else { "s" },
        bytes(ds.memory_budget),
        policy
    );
    if let Some(t) = &ds.ttl {
        let now = t
            .now
            .map_or("nothing written yet".to_owned(), |n| n.to_string());
        let _ = writeln!(
            out,
            "  ttl: {}; clock now {now}; {} swept of {} read in {} sweep{}",
            crate::describe::ttl(&t.ttl, t.ttl.clock.as_deref()),
            t.expired,
            t.scanned,
            t.sweeps,
            if t.sweeps == 1 { "" } else { "s" }
        );
    }
    for d in defs {
        let _ = writeln!(
            out,
            "  index {}: {}, policy {}",
            d.name,
            crate::describe::describe(d),
            d.policy
        );
    }
    let groups = group_by_index(ds);
    let mut headers: Vec<String> = Vec::new();
    let mut columns: Vec<Totals> = Vec::new();
    let mut note = None;
    if groups.len() > 1 {
        if groups.len() <= MAX_INDEX_COLUMNS {
            for (name, trees) in &groups {
                headers.push(name.clone());
                columns.push(totals_of(trees));
            }
            if ds.partitions > 1 {
                note = Some(format!(
                    "(index columns sum {} partitions; `silt stats {} --json` shows each one)",
                    ds.partitions, ds.name
                ));
            }
        } else {
            note = Some(format!(
                "({} indexes summed; `silt stats {} --json` shows each one)",
                groups.len(),
                ds.name
            ));
        }
    } else if ds.indexes.len() > 1 {
        if ds.indexes.len() <= MAX_PARTITION_COLUMNS {
            for i in &ds.indexes {
                headers.push(short_index_name(&ds.name, &i.name));
                columns.push(Totals::of(std::slice::from_ref(i)));
            }
        } else {
            note = Some(format!(
                "({} partitions summed; `silt stats {} --json` shows each one)",
                ds.indexes.len(),
                ds.name
            ));
        }
    }
    headers.push(if ds.indexes.len() > 1 {
        "total".to_owned()
    } else {
        ds.indexes
            .first()
            .map(|i| short_index_name(&ds.name, &i.name))
            .unwrap_or_else(|| "total".to_owned())
    });
    columns.push(Totals::of(&ds.indexes));
    let rows = rows_for(&columns);
    let label_w = rows
        .iter()
        .map(|(l, _)| l.chars().count())
        .max()
        .unwrap_or(0)
        + 2;
    let col_w: Vec<usize> = (0..headers.len())
        .map(|c| {
            rows.iter()
                .map(|(_, cells)| cells[c].chars().count())
                .chain(std::iter::once(headers[c].chars().count()))
                .max()
                .unwrap_or(0)
                + 2
        })
        .collect();
    let _ = write!(out, "  {:label_w$}", "");
    for (h, w) in headers.iter().zip(&col_w) {
        let _ = write!(out, "{h:>w$}");
    }
    out.push('\n');
    for (label, cells) in rows {
        let _ = write!(out, "  {label:label_w$}");
        for (c, w) in cells.iter().zip(&col_w) {
            let _ = write!(out, "{c:>w$}");
        }
        out.push('\n');
    }
    if let Some(n) = note {
        let _ = writeln!(out, "  {n}");
    }
    out
}

/// `tweets/p0/primary` -> `p0/primary`.
fn short_index_name(dataset: &str, index: &str) -> String {
    index
        .strip_prefix(dataset)
        .and_then(|s| s.strip_prefix('/'))
        .unwrap_or(index)
        .to_owned()
}

pub fn render_cache(c: &CacheStats) -> String {
    format!(
        "block cache: {} used of {}, {} hits, {} misses, hit ratio {}; {} uncompressed blocks read in place (page cache)\n",
        bytes(c.used_bytes),
        bytes(c.capacity_bytes),
        count(c.hits),
        count(c.misses),
        hit_ratio(c),
        count(c.in_place)
    )
}

/// The whole `silt stats` output; `defs` gives each dataset's secondary
/// index definitions.
pub fn render(stats: &DbStats, defs: &BTreeMap<String, Vec<IndexDef>>) -> String {
    let mut out = format!("database {}\n", stats.path.display());
    if stats.datasets.is_empty() {
        out.push_str("no datasets; create one with `silt create-dataset`\n");
    }
    for ds in &stats.datasets {
        out.push('\n');
        let none = Vec::new();
        out.push_str(&render_dataset(ds, defs.get(&ds.name).unwrap_or(&none)));
    }
    out.push('\n');
    out.push_str(&render_cache(&stats.block_cache));
    out.push_str(&render_log(stats));
    out
}

/// The write-ahead log, group commit and the last recovery.
pub fn render_log(stats: &DbStats) -> String {
    let w = &stats.wal;
    let per_fsync = if w.fsyncs == 0 {
        "-".to_string()
    } else {
        format!("{:.1}", w.commits as f64 / w.fsyncs as f64)
    };
    let r = &stats.last_recovery;
    format!(
        "log ({} durability; counters of this process): {} records, {} commits, {} fsyncs ({} commits per fsync), {} written, durable up to LSN {}\n\
         last recovery: {} log records scanned from LSN {}, {} re-applied, {} uncommitted ignored, {} of log checked for its end, {} ms\n",
        stats.durability,
        count(w.records),
        count(w.commits),
        count(w.fsyncs),
        per_fsync,
        bytes(w.bytes),
        w.durable_lsn,
        count(r.records_scanned),
        r.from_lsn,
        count(r.records_redone),
        count(r.records_uncommitted),
        bytes(r.log_bytes_checked),
        r.millis
    )
}
