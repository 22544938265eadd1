//! `durable-ingest`: durable ingest throughput with 1, 4 and 16 writer threads,
//! every write its own transaction, acknowledged only once it is on disk
//! (fsynced). Measures how well each system amortizes fsyncs over concurrent
//! commits (group commit) against the disk's own fsyncs/s.

use std::{
    collections::HashMap,
    sync::Barrier,
    time::{Duration, Instant},
};

use anyhow::{Result, anyhow};
use rand::{RngCore, SeedableRng, rngs::SmallRng};

use super::{Ctx, Scale, Workload};
use crate::{
    fsync_count, limits,
    results::{Kind, ResultRow},
    systems::{KvConfig, KvSystemSpec, KvWriter, SILT_DEFAULT_POLICY, SharedKv},
    util::{DiskCounters, ScratchDir, fmt_num, percentile, spinner},
};

pub const VALUE_BYTES: usize = 100;
/// Writer thread counts, in the order they run.
pub const THREADS: [usize; 3] = [1, 4, 16];
/// Silt / peer commits/s targets, at the largest thread count.
pub const ROCKSDB_TARGET: f64 = 1.0;
pub const SQLITE_TARGET: f64 = 5.0;
/// Idle time before each measurement in which the disk activity of other
/// processes is sampled (fsync latency depends on everything else hitting the
/// filesystem journal: a concurrent build can make fsyncs 10x slower).
const QUIET_SAMPLE: Duration = Duration::from_millis(500);
/// Above these, warn that the other processes make the numbers noisy.
const NOISY_WRITE_MB_S: f64 = 2.0;
const NOISY_FLUSHES_S: f64 = 20.0;
/// Length of the fsync probe at the start of each run.
const PROBE: Duration = Duration::from_secs(1);

pub struct DurableIngest;

/// How long each (system, thread count) writes: 3 systems x 3 thread counts x
/// 6 s keeps a 3-run medium invocation near 3 minutes.
pub fn duration(scale: Scale) -> Duration {
    Duration::from_secs(match scale {
        Scale::Small => 3,
        Scale::Medium => 6,
        Scale::Full => 10,
    })
}

// Metric names (a thread count is appended), shared by the rows and the ratios.
const COMMITS: &str = "commits";
const P50: &str = "p50";
const P99: &str = "p99";
const FSYNCS: &str = "fsyncs";
const PER_FSYNC: &str = "commits/fsync";

fn metric(name: &str, threads: usize) -> String {
    format!("{name} {threads} thr")
}

/// The `i`-th key of writer `thread`: a bijective 64-bit mix of (thread, i), so
/// keys are distinct across threads and in random order, the same for every system.
pub fn key(seed: u64, thread: usize, i: u64) -> u64 {
    debug_assert!(i < 1 << 40);
    // splitmix64's finalizer is a bijection of u64, so is xor with a constant.
    let mut z = (((thread as u64) << 40) | i) ^ seed.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

impl Workload for DurableIngest {
    fn name(&self) -> &'static str {
        "durable-ingest"
    }

    fn description(&self) -> &'static str {
        "1/4/16 threads writing 8-byte random keys + 100-byte values, one fsynced transaction per record (Silt vs RocksDB vs SQLite)"
    }

    fn explanation(&self) -> &'static str {
        "Durable ingest (seed 000 ch. 3, record-level ACID transactions): 1, 4 and 16 writer \
         threads each write records with 8-byte integer keys (distinct per thread, in a seeded \
         random order, the same for every system) and 100-byte random values for a fixed time \
         (small: 3 s, medium: 6 s, full: 10 s per system and thread count, each on a fresh \
         database), one record per transaction, every write acknowledged only once it is durable. \
         Silt: one `upsert` per record with `Durability::Sync` (the COMMIT log record is fsynced \
         before the call returns; a log-flusher thread fsyncs everything that accumulated during \
         the previous fsync, so concurrent writers share fsyncs). RocksDB: one `put` with WAL on \
         and `sync=true` (concurrent writers join a write group whose leader writes and syncs the \
         WAL once). SQLite: one autocommit `INSERT OR REPLACE` per record into \
         `kv(k INTEGER PRIMARY KEY, v BLOB)`, WAL journal mode, `synchronous=FULL`, one \
         connection per thread; SQLite admits one writer at a time and fsyncs the WAL at every \
         commit, the other threads wait in the busy handler. Reported per system and thread \
         count: commits/s, p50/p99 commit latency (ms), fsyncs/s and commits per fsync. fsyncs \
         are counted the same way for every system: the harness binary interposes `fsync` and \
         `fdatasync` and counts every call the process makes (Silt's `wal.fsyncs` and RocksDB's \
         `rocksdb.wal.synced` ticker are kept as cross-checks among the stats, with the flush \
         requests and bytes the disk completed, which also count other processes). Before each \
         measurement the harness idles 0.5 s and records what other processes wrote and flushed \
         meanwhile: fsync latency depends on everything else going through the filesystem \
         journal, and a concurrent build can make fsyncs ten times slower. The distance to the \
         physical limit compares commits/s with the disk's fsyncs/s from `limits.json` (4 KiB \
         append + fdatasync, one thread; a 1 s run of the same probe at the start of each run is \
         reported beside it, since the fsync rate of a virtual disk drifts): above 1x, the \
         system commits more often than the disk can fsync, i.e. group commit amortizes fsyncs. Targets (16 threads): Silt >= 1.0x \
         RocksDB and >= 5x SQLite; at 1 thread every system needs one fsync per commit and the \
         ratios mostly compare fsync costs. The rest of the machine matters: on a shared 2-core \
         machine another process's fsyncs or CPU use change the numbers (see `cpu_others_during`)."
    }

    fn durability(&self) -> &'static str {
        "every commit fsynced before it is acknowledged (Silt Durability::Sync, RocksDB WAL sync=true, SQLite WAL synchronous=FULL)"
    }

    fn run(&self, scale: Scale, ctx: &Ctx) -> Result<Vec<ResultRow>> {
        let mut specs = [
            KvSystemSpec::Silt {
                policy: SILT_DEFAULT_POLICY.into(),
            },
            KvSystemSpec::RocksDb,
            KvSystemSpec::Sqlite,
        ];
        let n_specs = specs.len();
        specs.rotate_left(ctx.run % n_specs);
        let cfg = KvConfig {
            sync_commits: true,
            ..KvConfig::default()
        };
        let counted = fsync_count::available(&ctx.scratch);
        if !counted && ctx.run == 0 {
            eprintln!(
                "WARNING: fsync calls are not going through the harness's counters: no fsyncs/s for the peers"
            );
        }
        let dur = duration(scale);

        // The same probe as limits.json, now: a virtual disk's fsync rate drifts a lot.
        let probe_file = ctx.scratch.join("fsync-probe.bin");
        let probe = limits::fsync_rate(&probe_file, PROBE)?;
        let _ = std::fs::remove_file(&probe_file);
        let mut rows = vec![
            ResultRow::new(
                "disk",
                "fsyncs/s (limits.json: 4 KiB append + fdatasync, 1 thread)",
                "fsyncs/s",
                Kind::Limit,
                ctx.limits.fsyncs_per_s,
            ),
            ResultRow::new(
                "disk",
                "fsyncs/s (same probe for 1 s at the start of the run)",
                "fsyncs/s",
                Kind::Limit,
                probe,
            ),
        ];
        eprintln!(
            "disk: {} fsyncs/s in limits.json, {} fsyncs/s now (1 s probe); {} s per system and thread count",
            fmt_num(ctx.limits.fsyncs_per_s),
            fmt_num(probe),
            dur.as_secs()
        );
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
            for threads in THREADS {
                let dir = ScratchDir::new(&ctx.scratch, &format!("{}-{threads}", spec.label()))?;
                let store = spec.open_shared(dir.path(), &cfg)?;
                ctx.note(format!("{}: {}", store.name(), store.describe()));
                rows.extend(drive(store, threads, dur, ctx, counted, dir.path())?);
            }
        }
        rows.extend(ratios(&rows));
        Ok(rows)
    }
}

/// What one writer thread did.
struct ThreadResult {
    commits: u64,
    /// Per-commit latencies in microseconds (u32: up to 71 minutes).
    lat_us: Vec<u32>,
    finished: Instant,
}

/// Runs `threads` writers against `store` for `dur`; returns its rows and closes it.
fn drive(
    store: Box<dyn SharedKv>,
    threads: usize,
    dur: Duration,
    ctx: &Ctx,
    counted: bool,
    dir: &std::path::Path,
) -> Result<Vec<ResultRow>> {
    let label = store.name().to_string();
    let sys = label.as_str();
    let writers = (0..threads)
        .map(|_| store.writer())
        .collect::<Result<Vec<Box<dyn KvWriter + '_>>>>()?;
    let barrier = Barrier::new(threads + 1);
    let seed = ctx.seed;

    // What the rest of the machine does to the disk while we are idle.
    let quiet = DiskCounters::read(dir).and_then(|a| {
        std::thread::sleep(QUIET_SAMPLE);
        Some(DiskCounters::read(dir)?.since(&a))
    });

    let sp = spinner(format!("{sys}: {threads} writer thread(s)"));
    let own0 = store.own_fsyncs();
    let fs0 = fsync_count::count();
    let dev0 = DiskCounters::read(dir);
    let (t0, results) = std::thread::scope(|s| {
        let handles: Vec<_> = writers
            .into_iter()
            .enumerate()
            .map(|(t, mut w)| {
                let barrier = &barrier;
                s.spawn(move || -> Result<ThreadResult> {
                    let mut rng = SmallRng::seed_from_u64(
                        seed ^ 0x005e_ed0f_da7a ^ (t as u64).wrapping_mul(0x2545_f491_4f6c_dd1d),
                    );
                    let mut value = [0u8; VALUE_BYTES];
                    let mut lat_us = Vec::with_capacity(1 << 16);
                    barrier.wait();
                    let end = Instant::now() + dur;
                    let mut i = 0u64;
                    loop {
                        let start = Instant::now();
                        if start >= end {
                            break;
                        }
                        rng.fill_bytes(&mut value);
                        w.put(key(seed, t, i), &value)?;
                        lat_us.push(u32::try_from(start.elapsed().as_micros()).unwrap_or(u32::MAX));
                        i += 1;
                    }
                    Ok(ThreadResult {
                        commits: i,
                        lat_us,
                        finished: Instant::now(),
                    })
                })
            })
            .collect();
        barrier.wait();
        let t0 = Instant::now();
        let results: Vec<Result<ThreadResult>> = handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(anyhow!("a {sys} writer thread panicked")))
            })
            .collect();
        (t0, results)
    });
    let fs1 = fsync_count::count();
    let own1 = store.own_fsyncs();
    let dev1 = DiskCounters::read(dir);
    sp.finish_and_clear();
    let results = results.into_iter().collect::<Result<Vec<_>>>()?;

    let commits: u64 = results.iter().map(|r| r.commits).sum();
    let elapsed = results
        .iter()
        .map(|r| r.finished.saturating_duration_since(t0))
        .max()
        .unwrap_or_default()
        .as_secs_f64();
    let mut lat_us: Vec<u32> = results.into_iter().flat_map(|r| r.lat_us).collect();
    lat_us.sort_unstable();
    let commits_s = commits as f64 / elapsed;
    let p50 = percentile(&lat_us, 50.0) / 1e3;
    let p99 = percentile(&lat_us, 99.0) / 1e3;
    let mean_ms =
        lat_us.iter().map(|&v| f64::from(v)).sum::<f64>() / lat_us.len().max(1) as f64 / 1e3;
    let limit = ctx.limits.fsyncs_per_s;

    let mut rows = vec![
        ResultRow::measure(sys, &metric(COMMITS, threads), "commits/s", commits_s),
        ResultRow::measure(sys, &metric(P50, threads), "ms", p50),
        ResultRow::measure(sys, &metric(P99, threads), "ms", p99),
        ResultRow::stat(
            sys,
            &format!("{threads} thr.commits"),
            "count",
            commits as f64,
        ),
        // With many threads the mean (threads / commits/s) can exceed p99 when a few
        // writers starve (SQLite's busy handler sleeps up to 100 ms per retry).
        ResultRow::stat(sys, &format!("{threads} thr.mean latency"), "ms", mean_ms),
        ResultRow::stat(
            sys,
            &format!("{threads} thr.max latency"),
            "ms",
            lat_us.last().map_or(f64::NAN, |&v| f64::from(v) / 1e3),
        ),
        ResultRow::new(
            sys,
            &format!("commits/s vs disk fsyncs/s, {threads} thr"),
            "x",
            Kind::Limit,
            commits_s / limit,
        ),
    ];
    let fsyncs = counted.then(|| fs1.saturating_sub(fs0));
    if let Some(f) = fsyncs {
        let fsyncs_s = f as f64 / elapsed;
        rows.push(ResultRow::measure(
            sys,
            &metric(FSYNCS, threads),
            "fsyncs/s",
            fsyncs_s,
        ));
        rows.push(ResultRow::measure(
            sys,
            &metric(PER_FSYNC, threads),
            "commits/fsync",
            if f == 0 {
                f64::NAN
            } else {
                commits as f64 / f as f64
            },
        ));
        rows.push(ResultRow::new(
            sys,
            &format!("fsyncs/s vs disk fsyncs/s, {threads} thr"),
            "% of limit",
            Kind::Limit,
            100.0 * fsyncs_s / limit,
        ));
    }
    if let (Some(a), Some(b)) = (own0, own1) {
        rows.push(ResultRow::stat(
            sys,
            &format!("{threads} thr.own log fsyncs"),
            "count",
            b.saturating_sub(a) as f64,
        ));
    }
    if let (Some(a), Some(b)) = (dev0, dev1) {
        let d = b.since(&a);
        rows.push(ResultRow::stat(
            sys,
            &format!("{threads} thr.disk flushes/s (whole disk)"),
            "flushes/s",
            d.flushes as f64 / elapsed,
        ));
        rows.push(ResultRow::stat(
            sys,
            &format!("{threads} thr.disk writes (whole disk)"),
            "MB/s",
            d.write_bytes as f64 / elapsed / 1e6,
        ));
    }
    if let Some(q) = quiet {
        let secs = QUIET_SAMPLE.as_secs_f64();
        let (mb_s, fl_s) = (q.write_bytes as f64 / secs / 1e6, q.flushes as f64 / secs);
        rows.push(ResultRow::stat(
            sys,
            &format!("{threads} thr.other processes' disk writes just before"),
            "MB/s",
            mb_s,
        ));
        rows.push(ResultRow::stat(
            sys,
            &format!("{threads} thr.other processes' disk flushes just before"),
            "flushes/s",
            fl_s,
        ));
        if mb_s > NOISY_WRITE_MB_S || fl_s > NOISY_FLUSHES_S {
            eprintln!(
                "WARNING: other processes were writing to the disk just before {sys} with {threads} thread(s) \
                 ({mb_s:.1} MB/s, {fl_s:.0} flushes/s): fsync timings are noisy"
            );
        }
    }
    rows.extend(store.stats(&format!("{threads} thr."))?);
    store.close()?;

    let fsync_text = match fsyncs {
        Some(f) => format!(
            "{} fsyncs/s, {:.2} commits/fsync",
            fmt_num(f as f64 / elapsed),
            commits as f64 / f.max(1) as f64
        ),
        None => "fsyncs not counted".into(),
    };
    let own_text = match (own0, own1) {
        (Some(a), Some(b)) => format!(", own count {}", b.saturating_sub(a)),
        _ => String::new(),
    };
    eprintln!(
        "{sys}, {threads:>2} thr: {} commits/s ({:.2}x disk fsyncs/s), p50 {p50:.2} ms, p99 {p99:.2} ms, {fsync_text}{own_text}",
        fmt_num(commits_s),
        commits_s / limit,
    );
    Ok(rows)
}

/// Silt's commits/s relative to each peer at each thread count, per run.
fn ratios(rows: &[ResultRow]) -> Vec<ResultRow> {
    let value: HashMap<(&str, &str), f64> = rows
        .iter()
        .filter(|r| r.kind == Kind::Measure)
        .map(|r| ((r.system.as_str(), r.metric.as_str()), r.value))
        .collect();
    let last = THREADS[THREADS.len() - 1];
    let mut out = Vec::new();
    for (peer, target) in [("rocksdb", ROCKSDB_TARGET), ("sqlite", SQLITE_TARGET)] {
        for threads in THREADS {
            let m = metric(COMMITS, threads);
            let (Some(s), Some(p)) = (
                value.get(&("silt", m.as_str())),
                value.get(&(peer, m.as_str())),
            ) else {
                continue;
            };
            let row = ResultRow::new(&format!("silt/{peer}"), &m, "x", Kind::Ratio, s / p);
            out.push(if threads == last {
                row.with_target(target)
            } else {
                row
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn keys_are_distinct_across_threads() {
        let mut seen = HashSet::new();
        for t in 0..16 {
            for i in 0..1000 {
                assert!(seen.insert(key(42, t, i)));
            }
        }
        // Random order, not a counter.
        assert!(key(42, 0, 1) != key(42, 0, 0) + 1);
    }

    #[test]
    fn ratios_per_thread_count_with_targets_at_16() {
        let mut rows = Vec::new();
        for t in THREADS {
            rows.push(ResultRow::measure(
                "silt",
                &metric(COMMITS, t),
                "commits/s",
                1000.0,
            ));
            rows.push(ResultRow::measure(
                "rocksdb",
                &metric(COMMITS, t),
                "commits/s",
                500.0,
            ));
            rows.push(ResultRow::measure(
                "sqlite",
                &metric(COMMITS, t),
                "commits/s",
                100.0,
            ));
        }
        let r = ratios(&rows);
        assert_eq!(r.len(), 6);
        assert_eq!((r[0].value, r[0].target), (2.0, None));
        assert_eq!(
            (r[2].metric.as_str(), r[2].target),
            ("commits 16 thr", Some(1.0))
        );
        assert_eq!(
            (r[5].system.as_str(), r[5].value, r[5].target),
            ("silt/sqlite", 10.0, Some(5.0))
        );
    }
}
