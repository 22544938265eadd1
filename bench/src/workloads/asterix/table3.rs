//! `asterix-table3`: Table 3 of seed 003 §6.1.3, secondary B+-tree range
//! queries with 10 / 100 / 1,000 / 10,000 results while a writer ingests,
//! after ingest and after a full compaction; validated (records fetched from
//! the primary and re-checked) and index-only.

use std::{
    ops::Bound,
    sync::{
        Arc,
        atomic::{AtomicBool, AtomicUsize, Ordering},
    },
    time::Instant,
};

use anyhow::{Context, Result, bail};
use silt::lsm::policy::MergePolicy;
use silt::{Query, QueryOptions, Value};

use super::{
    BATCH, Ix, Mem, RAND_DOMAIN, SiltTweets, Tweets, insert_batch, tree_rows, trees, wants,
};
use crate::{
    results::{Kind, ResultRow},
    util::{ScratchDir, fmt_num, percentile, progress, spinner},
    workloads::{Ctx, Scale, Workload},
};

pub struct AsterixTable3;

/// The paper's result cardinalities, each drawn with equal probability.
pub const SIZES: [u64; 4] = [10, 100, 1_000, 10_000];
/// Answers checked against the oracle per size class and phase (after ingest).
pub const CHECK: usize = 50;

/// (tweets, of which ingested while querying, queries per phase after ingest, memory).
pub fn sizes(scale: Scale) -> (usize, usize, usize, Mem) {
    match scale {
        Scale::Small => (
            160_000,
            60_000,
            800,
            Mem {
                budget: 8 << 20,
                cache: 24 << 20,
            },
        ),
        Scale::Medium | Scale::Full => (
            700_000,
            100_000,
            2_000,
            Mem {
                budget: 16 << 20,
                cache: 48 << 20,
            },
        ),
    }
}

pub const DURING: &str = "during ingest";
pub const AFTER_INGEST: &str = "after ingest";
pub const AFTER_COMPACTION: &str = "after compaction";
pub const VALIDATED: &str = "silt validated";
pub const INDEX_ONLY: &str = "silt index-only";

pub fn lat_metric(size: u64, stat: &str, phase: &str) -> String {
    format!("range ~{size} {stat} ({phase})")
}

impl Workload for AsterixTable3 {
    fn name(&self) -> &'static str {
        "asterix-table3"
    }

    fn description(&self) -> &'static str {
        "AsterixDB Table 3: secondary B+-tree range queries (10..10,000 results) during ingest, after ingest and after compaction, validated and index-only"
    }

    fn explanation(&self) -> &'static str {
        "Issue 8: Table 3 of seed 003 §6.1.3 (the paper: 490 GB of tweets on 8 machines, a \
         secondary B+-tree on a random 32-bit integer, prefix policy; random range queries whose \
         result sizes are 10, 100, 1,000 or 10,000 with equal probability, sent one at a time while \
         the last 70 GB were ingested, then 2,000 after ingest and 2,000 after compacting every \
         index to one component; mean ms: 1023/1185/2846/11647 while ingesting, 139/191/634/3747 \
         after, 138/184/500/3381 after compaction, with ~43 ms of job start-up in each). Here: one \
         process, one partition, ~1 KB tweets with a uniform `rand32` in [0, 2^31) and a B+-tree \
         `by_rand` on it, prefix(budget, 5) on both trees, memory budget 8 MiB (small) / 16 MiB \
         (medium), block cache 3x that. Small: 160 K tweets, the last 60 K ingested (write_batch of \
         1,000, insert mode, by a writer thread) while the main thread sends queries one at a time \
         until the writer is done; then (after waiting for running merges) 800 queries; then \
         `Dataset::compact` (one component per tree) and the same 800 queries. Medium/full: 700 K, \
         the last 100 K during the queries, 2,000 queries after ingest and after compaction. Each \
         query range is [lo, lo + w) with w = size x 2^31 / records so far, lo uniform; every query \
         runs twice, validated (non-index-only: candidate primary keys sorted, each record fetched \
         from the primary under an instant lock and re-checked) and index-only (`index_only`: \
         entries returned when an instant lock is granted), in alternating order. Latency per query \
         (mean, p50, p99, microseconds), mean result count and index components searched per size \
         class, path and phase; the writer's rate with and without the queries. The first 50 \
         answers of each size after ingest and after compaction are checked against a sorted copy \
         of the data (both paths): a difference fails the run. `--policy` replaces the policy."
    }

    fn durability(&self) -> &'static str {
        "WAL on, no fsync per commit (Silt Durability::None)"
    }

    fn run(&self, scale: Scale, ctx: &Ctx) -> Result<Vec<ResultRow>> {
        let (n, n_during, nq, mem) = sizes(scale);
        let kv_default: Vec<String> = crate::workloads::kv_ingest_lookup::DEFAULT_POLICIES
            .iter()
            .map(|s| s.to_string())
            .collect();
        let spec = if ctx.silt_policies == kv_default || ctx.silt_policies.is_empty() {
            super::table2::default_policies(mem)[0].clone()
        } else {
            ctx.silt_policies[0].clone()
        };
        let policy = MergePolicy::parse(&spec)?;
        if !wants(ctx, VALIDATED) {
            return Ok(Vec::new());
        }
        let tweets = Tweets::generate(n, ctx.seed);
        let mut sorted: Vec<i64> = (0..n).map(|i| tweets.rand32(i)).collect();
        sorted.sort_unstable();
        let n0 = n - n_during;
        if ctx.run == 0 {
            eprintln!(
                "data: {} tweets ({} during the queries), {:.0} JSON bytes each; policy {policy}, memory budget {} MiB",
                fmt_num(n as f64),
                fmt_num(n_during as f64),
                tweets.json_bytes as f64 / n as f64,
                mem.budget >> 20
            );
        }
        let dir = ScratchDir::new(&ctx.scratch, "silt-table3")?;
        let s = SiltTweets::open(dir.path(), mem, &policy, &[Ix::BtreeRand])?;
        ctx.note(format!("silt: {}", s.describe));
        let mut rows = vec![
            ResultRow::stat("data", "tweets", "count", n as f64),
            ResultRow::stat(
                "data",
                "tweets ingested during the queries",
                "count",
                n_during as f64,
            ),
        ];

        // 1. Ingest without queries.
        let t = s.ingest(&tweets, 0..n0, "ingest (no queries)")?;
        rows.push(ResultRow::measure(
            "writer",
            "ingest without queries",
            "records/s",
            n0 as f64 / t,
        ));
        eprintln!(
            "ingest without queries: {} tweets/s",
            fmt_num(n0 as f64 / t)
        );

        // 2. A writer ingests the rest while queries run one at a time.
        let mut acc = Acc::default();
        let mut r = silt::workload::SplitMix64::new(ctx.seed ^ 0x7AB1_E3A5);
        let count = AtomicUsize::new(n0);
        let done = AtomicBool::new(false);
        let ds = s.ds.clone();
        let sp = spinner(format!(
            "{DURING}: writer ingests {} tweets while queries run",
            fmt_num(n_during as f64)
        ));
        let (writer_s, nq_during) = std::thread::scope(|sc| -> Result<(f64, usize)> {
            let w = sc.spawn(|| -> Result<f64> {
                let t0 = Instant::now();
                let mut i = n0;
                let res = (|| {
                    while i < n {
                        let end = (i + BATCH).min(n);
                        insert_batch(&ds, &tweets.recs[i..end])?;
                        i = end;
                        count.store(i, Ordering::Release);
                    }
                    Ok(())
                })();
                done.store(true, Ordering::Release);
                res.map(|()| t0.elapsed().as_secs_f64())
            });
            let mut q = 0usize;
            while !done.load(Ordering::Acquire) {
                let size = SIZES[q % SIZES.len()];
                let (lo, hi) = range_for(size, count.load(Ordering::Acquire), &mut r);
                acc.run(&ds, q, size, lo, hi, None)?;
                q += 1;
            }
            let ws = w
                .join()
                .map_err(|_| anyhow::anyhow!("writer thread panicked"))??;
            Ok((ws, q))
        })?;
        sp.finish_and_clear();
        rows.push(ResultRow::measure(
            "writer",
            "ingest while querying",
            "records/s",
            n_during as f64 / writer_s,
        ));
        rows.push(ResultRow::stat(
            "writer",
            "queries during ingest",
            "count",
            nq_during as f64,
        ));
        eprintln!(
            "{DURING}: writer {} tweets/s, {} queries (x2 paths)",
            fmt_num(n_during as f64 / writer_s),
            nq_during
        );
        rows.extend(acc.rows(DURING));
        let (trs, tot) = tree_rows("silt", &trees(&s.ds), " (end of ingest)");
        rows.extend(trs);
        rows.push(ResultRow::stat(
            "silt",
            "components searched by a query (end of ingest)",
            "count",
            trees(&s.ds)
                .iter()
                .find(|t| t.name == Ix::BtreeRand.name())
                .map_or(0, |t| t.components) as f64,
        ));
        let _ = tot;

        // 3. After ingest (running merges finished; the memory components stay).
        let sp = spinner("waiting for merges");
        s.db.wait_idle().context("Silt wait_idle")?;
        sp.finish_and_clear();
        let queries: Vec<(u64, i64, i64)> = (0..nq)
            .map(|q| {
                let size = SIZES[q % SIZES.len()];
                let (lo, hi) = range_for(size, n, &mut r);
                (size, lo, hi)
            })
            .collect();
        for phase in [AFTER_INGEST, AFTER_COMPACTION] {
            if phase == AFTER_COMPACTION {
                let sp = spinner("full compaction");
                let t = Instant::now();
                s.ds.compact().context("Silt compact")?;
                rows.push(ResultRow::stat(
                    "silt",
                    "compaction time",
                    "s",
                    t.elapsed().as_secs_f64(),
                ));
                sp.finish_and_clear();
            }
            let (trs, _) = tree_rows("silt", &trees(&s.ds), &format!(" ({phase})"));
            rows.extend(trs);
            let mut acc = Acc::default();
            let pb = progress(queries.len() as u64, format!("queries {phase}"));
            for (q, &(size, lo, hi)) in queries.iter().enumerate() {
                let want = (q / SIZES.len() < CHECK).then(|| {
                    (sorted.partition_point(|&x| x <= hi) - sorted.partition_point(|&x| x < lo))
                        as u64
                });
                acc.run(&s.ds, q, size, lo, hi, want)
                    .with_context(|| format!("{phase}: query {q}"))?;
                if q % 16 == 0 {
                    pb.set_position(q as u64);
                }
            }
            pb.finish_and_clear();
            if let Some(r) = acc.mean_us(VALIDATED, 100) {
                eprintln!("{phase}: ~100 results validated mean {r:.1} us");
            }
            rows.extend(acc.rows(phase));
        }
        s.close()?;
        rows.extend(ratios(&rows));
        Ok(rows)
    }
}

/// A range [lo, hi] holding about `size` of `records` uniform values in [0, 2^31).
fn range_for(size: u64, records: usize, r: &mut silt::workload::SplitMix64) -> (i64, i64) {
    let w = ((size as f64 * RAND_DOMAIN as f64 / records.max(1) as f64).round() as i64).max(1);
    let lo = r.below((RAND_DOMAIN - w).max(1) as u64) as i64;
    (lo, lo + w - 1)
}

/// Latencies and counts per (path, size).
#[derive(Default)]
struct Acc {
    /// (path, size) -> (latencies ns, results, components searched)
    m: std::collections::BTreeMap<(&'static str, u64), (Vec<u32>, u64, u64)>,
}

impl Acc {
    /// Runs one query on both paths (alternating which goes first).
    fn run(
        &mut self,
        ds: &Arc<silt::Dataset>,
        q: usize,
        size: u64,
        lo: i64,
        hi: i64,
        want: Option<u64>,
    ) -> Result<()> {
        let order = if q.is_multiple_of(2) {
            [false, true]
        } else {
            [true, false]
        };
        for index_only in order {
            let t = Instant::now();
            let (got, comps) = range_query(ds, lo, hi, index_only)?;
            let ns = u32::try_from(t.elapsed().as_nanos()).unwrap_or(u32::MAX);
            let path = if index_only { INDEX_ONLY } else { VALIDATED };
            if let Some(w) = want
                && w != got
            {
                bail!(
                    "{path}: range [{lo}, {hi}] returned {got} records, but the data has {w} in it"
                );
            }
            let e = self.m.entry((path, size)).or_default();
            e.0.push(ns);
            e.1 += got;
            e.2 += comps;
        }
        Ok(())
    }

    fn mean_us(&self, path: &str, size: u64) -> Option<f64> {
        let (l, _, _) = self
            .m
            .iter()
            .find(|((p, s), _)| *p == path && *s == size)?
            .1;
        Some(l.iter().map(|&x| f64::from(x)).sum::<f64>() / l.len().max(1) as f64 / 1e3)
    }

    fn rows(&mut self, phase: &str) -> Vec<ResultRow> {
        let mut rows = Vec::new();
        for ((path, size), (lat, results, comps)) in self.m.iter_mut() {
            lat.sort_unstable();
            let n = lat.len().max(1) as f64;
            let mean = lat.iter().map(|&x| f64::from(x)).sum::<f64>() / n;
            rows.push(ResultRow::measure(
                path,
                &lat_metric(*size, "mean", phase),
                "us",
                mean / 1e3,
            ));
            rows.push(ResultRow::measure(
                path,
                &lat_metric(*size, "p50", phase),
                "us",
                percentile(lat, 50.0) / 1e3,
            ));
            rows.push(ResultRow::measure(
                path,
                &lat_metric(*size, "p99", phase),
                "us",
                percentile(lat, 99.0) / 1e3,
            ));
            rows.push(ResultRow::stat(
                path,
                &format!("range ~{size} mean results ({phase})"),
                "results",
                *results as f64 / n,
            ));
            rows.push(ResultRow::stat(
                path,
                &format!("range ~{size} index components searched ({phase})"),
                "count",
                *comps as f64 / n,
            ));
            rows.push(ResultRow::stat(
                path,
                &format!("range ~{size} queries ({phase})"),
                "count",
                lat.len() as f64,
            ));
        }
        rows
    }
}

/// One range query on `by_rand`; returns (results, index components searched).
fn range_query(ds: &Arc<silt::Dataset>, lo: i64, hi: i64, index_only: bool) -> Result<(u64, u64)> {
    let q = Query::Range {
        lo: Bound::Included(vec![Value::Int(lo)]),
        hi: Bound::Included(vec![Value::Int(hi)]),
    };
    let mut r = ds
        .query(
            Ix::BtreeRand.name(),
            &q,
            QueryOptions {
                index_only,
                limit: None,
            },
        )
        .context("Silt range query")?;
    let mut n = 0u64;
    for h in r.by_ref() {
        let h = h.context("Silt range query")?;
        if !index_only {
            let Some(rec) = h.record.as_ref() else {
                bail!("a validated hit without its record");
            };
            std::hint::black_box(rec.get("text"));
        }
        n += 1;
    }
    Ok((n, r.stats().components))
}

/// Slow-down of each phase against after-compaction (the paper's comparison),
/// and validated over index-only.
fn ratios(rows: &[ResultRow]) -> Vec<ResultRow> {
    let get = |sys: &str, m: &str| {
        rows.iter()
            .find(|r| r.system == sys && r.metric == m && r.kind == Kind::Measure)
            .map(|r| r.value)
    };
    let mut out = Vec::new();
    for path in [VALIDATED, INDEX_ONLY] {
        for size in SIZES {
            let c = get(path, &lat_metric(size, "mean", AFTER_COMPACTION));
            for phase in [DURING, AFTER_INGEST] {
                if let (Some(a), Some(c)) = (get(path, &lat_metric(size, "mean", phase)), c) {
                    out.push(ResultRow::new(
                        path,
                        &format!("range ~{size} mean: {phase} / after compaction"),
                        "x",
                        Kind::Ratio,
                        a / c,
                    ));
                }
            }
        }
    }
    for size in SIZES {
        for phase in [DURING, AFTER_INGEST, AFTER_COMPACTION] {
            if let (Some(v), Some(i)) = (
                get(VALIDATED, &lat_metric(size, "mean", phase)),
                get(INDEX_ONLY, &lat_metric(size, "mean", phase)),
            ) {
                out.push(ResultRow::new(
                    "validated/index-only",
                    &format!("range ~{size} mean ({phase})"),
                    "x",
                    Kind::Ratio,
                    v / i,
                ));
            }
        }
    }
    out
}
