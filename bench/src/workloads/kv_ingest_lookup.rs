//! `kv-ingest-lookup`, the core-engine acceptance benchmark: load N records with
//! 8-byte integer keys in random order and 100-byte random values one put at a
//! time (logged, not fsynced), wait for background work, then M random point
//! lookups of existing keys.

use std::{collections::HashMap, time::Instant};

use anyhow::Result;
use rand::{Rng, RngCore, SeedableRng, rngs::SmallRng, seq::SliceRandom};

use super::{Ctx, Scale, Workload};
use crate::{
    results::{Kind, ResultRow},
    systems::{KvConfig, KvStore, KvSystemSpec, SILT_DEFAULT_POLICY},
    util::{IoCounters, ScratchDir, dir_size, fmt_num, percentile, progress, spinner},
};

pub const KEY_BYTES: usize = 8;
pub const VALUE_BYTES: usize = 100;
/// Silt / RocksDB throughput targets.
pub const INGEST_TARGET: f64 = 1.0;
pub const LOOKUP_TARGET: f64 = 0.8;
/// Bytes a lookup is assumed to touch when comparing against memory bandwidth.
const LOOKUP_BLOCK_BYTES: f64 = 4096.0;

/// The Silt policies of a default run (the first is Silt's default).
pub const DEFAULT_POLICIES: [&str; 3] = [SILT_DEFAULT_POLICY, "tiered(4)", "leveled"];

pub struct KvIngestLookup;

/// Records loaded and lookups made at each scale.
pub fn sizes(scale: Scale) -> (usize, usize) {
    match scale {
        Scale::Small => (500_000, 100_000),
        Scale::Medium | Scale::Full => (5_000_000, 1_000_000),
    }
}

// Metric names, shared by the rows and the ratios.
const INGEST: &str = "ingest";
const INGEST_BW: &str = "ingest bandwidth";
const INGEST_SETTLED: &str = "ingest+settle";
const LOOKUP: &str = "lookup";
const LOOKUP_P50: &str = "lookup p50";
const LOOKUP_P99: &str = "lookup p99";
const DISK_SIZE: &str = "disk size";
const WRITE_AMP: &str = "write amp (write syscalls)";

impl Workload for KvIngestLookup {
    fn name(&self) -> &'static str {
        "kv-ingest-lookup"
    }

    fn description(&self) -> &'static str {
        "load 8-byte random-order integer keys with 100-byte values one put at a time (WAL on, no fsync per write), then random point lookups (Silt vs RocksDB)"
    }

    fn explanation(&self) -> &'static str {
        "The core-engine acceptance benchmark. N records (small: 500 K, medium/full: 5 M) with \
         8-byte integer keys in a seeded random order and 100-byte random values are written one \
         record per call by a single thread, then the harness waits until every system has \
         flushed its memtable and finished all background merges/compactions (Silt: \
         `db.flush()` + `db.wait_idle()`; RocksDB: `flush()` + no running or pending \
         flush/compaction), then makes M \
         (small: 100 K, medium/full: 1 M) uniformly random point lookups of existing keys, \
         timing each one. Silt runs through its public dataset API (one dataset, integer primary \
         key, binary value) with several merge policies; RocksDB runs with matching settings. \
         Both log every write, without an fsync per write: Silt `Durability::None` (the COMMIT \
         record is written to the OS; the log is fsynced only when a log file is finished), RocksDB WAL on with \
         `sync=false`; an acknowledged write survives a process crash but not an OS crash or \
         power loss (`durable-ingest` measures fsynced commits). RocksDB: 10 bits/key bloom filters, 64 MiB memtable, 256 MiB LRU block cache, lz4, \
         4 KiB blocks, 2 background jobs. `ingest` is the client-visible put rate, \
         `ingest+settle` also counts the wait for background work; write amplification is the \
         bytes the process passed to write system calls (all threads, /proc/self/io, so log \
         writes included) divided by the user bytes (key + value); the disk size includes the \
         log files still present after the settle. Targets: Silt ingest >= 1.0x and lookups >= 0.8x RocksDB. At small scale the data \
         (54 MB) barely exceeds one memtable, so it is a smoke test; medium/full exercise merges. \
         The run line records how much CPU other processes used (`cpu_others_during`): on a \
         shared 2-core machine anything above a few percent makes the numbers unreliable."
    }

    fn durability(&self) -> &'static str {
        "WAL on in every system, no fsync per write (Silt Durability::None, RocksDB WAL sync=false): survives a process crash, not an OS crash"
    }

    fn run(&self, scale: Scale, ctx: &Ctx) -> Result<Vec<ResultRow>> {
        let (n, m) = sizes(scale);
        let mut rng = SmallRng::seed_from_u64(ctx.seed);
        let mut keys: Vec<u64> = (0..n as u64).collect();
        keys.shuffle(&mut rng);
        let lookups: Vec<u64> = (0..m).map(|_| rng.random_range(0..n as u64)).collect();

        let mut specs: Vec<KvSystemSpec> = ctx
            .silt_policies
            .iter()
            .map(|p| KvSystemSpec::Silt { policy: p.clone() })
            .collect();
        specs.push(KvSystemSpec::RocksDb);
        // Rotate the order from run to run so that drift on the machine (other load,
        // page cache, allocator state) doesn't always favour the same system.
        let n_specs = specs.len();
        specs.rotate_left(ctx.run % n_specs);
        let cfg = KvConfig::default();

        let mut rows = Vec::new();
        for spec in specs.iter().filter(|s| ctx.wants(s)) {
            if !spec.available() {
                if ctx.run == 0 {
                    eprintln!(
                        "note: skipping {}: this binary was built without the Silt adapter (cargo feature `silt`)",
                        spec.label()
                    );
                }
                continue;
            }
            let dir_name: String = spec
                .label()
                .chars()
                .map(|c| {
                    if c.is_ascii_alphanumeric() || c == '-' {
                        c
                    } else {
                        '_'
                    }
                })
                .collect();
            let dir = ScratchDir::new(&ctx.scratch, &dir_name)?;
            let store = spec.open(dir.path(), &cfg)?;
            ctx.note(format!("{}: {}", store.name(), store.describe()));
            rows.extend(drive(store, &keys, &lookups, ctx, dir.path())?);
        }
        rows.extend(ratios(&rows));
        Ok(rows)
    }
}

/// Loads, settles and looks up in one store; returns its rows and closes it.
fn drive(
    mut store: Box<dyn KvStore>,
    keys: &[u64],
    lookups: &[u64],
    ctx: &Ctx,
    dir: &std::path::Path,
) -> Result<Vec<ResultRow>> {
    let label = store.name().to_string();
    let sys = label.as_str();
    let n = keys.len();
    let user_bytes = (n * (KEY_BYTES + VALUE_BYTES)) as f64;
    let mut rows = Vec::new();

    // Load. Values come from a generator seeded the same way for every system.
    let mut rng = SmallRng::seed_from_u64(ctx.seed ^ 0x005e_ed0f_da7a);
    let mut value = [0u8; VALUE_BYTES];
    let (io0, io_ok) = IoCounters::read();
    let pb = progress(n as u64, format!("{sys}: load"));
    let t0 = Instant::now();
    for (i, &k) in keys.iter().enumerate() {
        rng.fill_bytes(&mut value);
        store.put(k, &value)?;
        if i & 0x3fff == 0 {
            pb.set_position(i as u64);
        }
    }
    let load_s = t0.elapsed().as_secs_f64();
    pb.finish_and_clear();
    let sp = spinner(format!("{sys}: waiting for background flush/merge"));
    store.settle()?;
    let settled_s = t0.elapsed().as_secs_f64();
    sp.finish_and_clear();
    let io_load = IoCounters::read().0.since(&io0);
    let disk_bytes = dir_size(dir)? as f64;

    let ingest_ops = n as f64 / load_s;
    rows.push(ResultRow::measure(sys, INGEST, "ops/s", ingest_ops));
    rows.push(ResultRow::measure(
        sys,
        INGEST_BW,
        "MB/s",
        user_bytes / load_s / 1e6,
    ));
    rows.push(ResultRow::measure(
        sys,
        INGEST_SETTLED,
        "ops/s",
        n as f64 / settled_s,
    ));
    rows.push(ResultRow::measure(sys, DISK_SIZE, "MB", disk_bytes / 1e6));
    rows.push(ResultRow::stat(sys, "settle time", "s", settled_s - load_s));
    let limits = &ctx.limits;
    if io_ok {
        let wa = io_load.wchar as f64 / user_bytes;
        rows.push(ResultRow::stat(sys, WRITE_AMP, "x", wa));
        rows.push(ResultRow::stat(
            sys,
            "write amp (device)",
            "x",
            io_load.device_write_bytes() as f64 / user_bytes,
        ));
        rows.push(ResultRow::new(
            sys,
            "ingest: written bytes/s (user x WA) vs seq write",
            "% of limit",
            Kind::Limit,
            100.0 * io_load.wchar as f64 / settled_s / 1e6 / limits.seq_write_mb_s,
        ));
    }
    rows.push(ResultRow::new(
        sys,
        "ingest: user bytes/s vs seq write",
        "% of limit",
        Kind::Limit,
        100.0 * user_bytes / load_s / 1e6 / limits.seq_write_mb_s,
    ));
    let load_stats = store.stats("load")?;
    if ctx.run == 0 {
        eprintln!("{sys}: stats after load (and settle):");
        for r in &load_stats {
            eprintln!("    {:<48} {:>16} {}", r.metric, fmt_num(r.value), r.unit);
        }
    }
    rows.extend(load_stats);

    // Lookups.
    let (io1, _) = IoCounters::read();
    let mut lat_ns: Vec<u32> = Vec::with_capacity(lookups.len());
    let mut misses = 0u64;
    let pb = progress(lookups.len() as u64, format!("{sys}: lookups"));
    let t1 = Instant::now();
    for (i, &k) in lookups.iter().enumerate() {
        let s = Instant::now();
        let found = store.get(k)?;
        lat_ns.push(u32::try_from(s.elapsed().as_nanos()).unwrap_or(u32::MAX));
        misses += u64::from(!found);
        if i & 0x3fff == 0 {
            pb.set_position(i as u64);
        }
    }
    let lookup_s = t1.elapsed().as_secs_f64();
    pb.finish_and_clear();
    let io_lookup = IoCounters::read().0.since(&io1);
    lat_ns.sort_unstable();
    let lookup_ops = lookups.len() as f64 / lookup_s;
    if misses > 0 {
        eprintln!(
            "WARNING: {sys}: {misses} of {} lookups of existing keys found nothing",
            lookups.len()
        );
    }
    rows.push(ResultRow::measure(sys, LOOKUP, "ops/s", lookup_ops));
    rows.push(ResultRow::measure(
        sys,
        LOOKUP_P50,
        "us",
        percentile(&lat_ns, 50.0) / 1e3,
    ));
    rows.push(ResultRow::measure(
        sys,
        LOOKUP_P99,
        "us",
        percentile(&lat_ns, 99.0) / 1e3,
    ));
    rows.push(ResultRow::stat(
        sys,
        "lookup misses",
        "count",
        misses as f64,
    ));
    if io_ok {
        rows.push(ResultRow::stat(
            sys,
            "lookup device reads",
            "MB",
            io_lookup.read_bytes as f64 / 1e6,
        ));
    }
    rows.push(ResultRow::new(
        sys,
        "lookup: 4 KiB per lookup vs memory copy",
        "% of limit",
        Kind::Limit,
        100.0 * lookup_ops * LOOKUP_BLOCK_BYTES / 1e9 / limits.mem_copy_gb_s,
    ));
    rows.extend(store.stats("lookup")?);
    store.close()?;

    let wa = rows
        .iter()
        .find(|r| r.metric == WRITE_AMP)
        .map_or(String::new(), |r| format!(", WA {:.2}", r.value));
    eprintln!(
        "{sys}: ingest {} ops/s ({} MB/s), settle {:.1} s{wa}, disk {} MB, lookup {} ops/s (p50 {:.2} us, p99 {:.2} us)",
        fmt_num(ingest_ops),
        fmt_num(user_bytes / load_s / 1e6),
        settled_s - load_s,
        fmt_num(disk_bytes / 1e6),
        fmt_num(lookup_ops),
        percentile(&lat_ns, 50.0) / 1e3,
        percentile(&lat_ns, 99.0) / 1e3,
    );
    Ok(rows)
}

/// Silt systems relative to RocksDB, per run.
fn ratios(rows: &[ResultRow]) -> Vec<ResultRow> {
    let value: HashMap<(&str, &str), f64> = rows
        .iter()
        .filter(|r| r.kind == Kind::Measure)
        .map(|r| ((r.system.as_str(), r.metric.as_str()), r.value))
        .collect();
    let mut silt_systems: Vec<&str> = Vec::new();
    for r in rows {
        if r.system.starts_with("silt") && !silt_systems.contains(&r.system.as_str()) {
            silt_systems.push(&r.system);
        }
    }
    let mut out = Vec::new();
    for silt in silt_systems {
        for (metric, target) in [
            (INGEST, Some(INGEST_TARGET)),
            (INGEST_SETTLED, None),
            (LOOKUP, Some(LOOKUP_TARGET)),
        ] {
            let (Some(s), Some(r)) = (value.get(&(silt, metric)), value.get(&("rocksdb", metric)))
            else {
                continue;
            };
            let row = ResultRow::new(&format!("{silt}/rocksdb"), metric, "x", Kind::Ratio, s / r);
            out.push(match target {
                Some(t) => row.with_target(t),
                None => row,
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ratios_pair_silt_with_rocksdb() {
        let rows = vec![
            ResultRow::measure("silt", INGEST, "ops/s", 200.0),
            ResultRow::measure("silt", LOOKUP, "ops/s", 50.0),
            ResultRow::measure("rocksdb", INGEST, "ops/s", 100.0),
            ResultRow::measure("rocksdb", LOOKUP, "ops/s", 100.0),
        ];
        let r = ratios(&rows);
        assert_eq!(r.len(), 2);
        assert_eq!(
            (r[0].system.as_str(), r[0].value, r[0].target),
            ("silt/rocksdb", 2.0, Some(1.0))
        );
        assert_eq!(
            (r[1].metric.as_str(), r[1].value, r[1].target),
            (LOOKUP, 0.5, Some(0.8))
        );
    }
}
