//! `leveldbpp-bloom`: Table B.1 of seed 001: the embedded index's bloom
//! filter bits per key vs LOOKUP latency, false positives and size.

use std::time::Instant;

use anyhow::{Result, bail};
use silt::{BatchOptions, IndexKind, Value, WriteMode};

use super::{
    Attr, Oracle, SiltStore, Store, check, elapsed_ns, int_field, lat_rows, rng, tweet_opts,
};
use crate::{
    results::ResultRow,
    util::{ScratchDir, dir_size, fmt_num, progress},
    workloads::{Ctx, Scale, Workload},
};
use silt::workload::tweets::TweetGen;

pub struct LeveldbppBloom;

/// (tweets, lookups per bits setting and k).
pub fn sizes(scale: Scale) -> (u64, usize) {
    match scale {
        Scale::Small => (200_000, 200),
        Scale::Medium | Scale::Full => (1_000_000, 300),
    }
}

/// Table B.1's settings, plus 10 (LevelDB's usual primary-key setting).
pub const BITS: [f64; 7] = [10.0, 20.0, 50.0, 100.0, 200.0, 500.0, 1000.0];
pub const KS: [Option<usize>; 2] = [Some(10), None];

impl Workload for LeveldbppBloom {
    fn name(&self) -> &'static str {
        "leveldbpp-bloom"
    }

    fn description(&self) -> &'static str {
        "LevelDB++ Table B.1: embedded index bloom bits per key (10..1000) vs LOOKUP latency, false-positive blocks and database size"
    }

    fn explanation(&self) -> &'static str {
        "Issue 7: Table B.1 of seed 001 (the paper: 20 M tweets, 200 K LOOKUPs, bits per key 20 to \
         1000; it picked 100). Here small 200 K / medium 1 M tweets are loaded (write_batch of 1,000, \
         upsert) into a Silt dataset with one embedded index on user_id for each bits-per-key setting \
         (10, 20, 50, 100, 200, 500, 1000; leveled merges, flushed and merged before the queries), then \
         LOOKUPs (users of random tweets: the data's distribution; small 200, medium 300) with k = 10 \
         and unlimited (a quarter as many), and \
         LOOKUPs of user ids that have no tweet (inside the id range, so zone maps don't prune them) \
         with k unlimited: every block such a lookup reads is a bloom false positive. False-positive \
         rate = false-positive blocks per absent-value lookup / all data blocks of the primary (counted \
         by one full-range query; user ids are not time-correlated, so block zone maps admit almost every \
         block and the bloom filter is what decides). DB size = the disk components after the load (the log is left out; the directory size is a \
         statistic). \
         Answers are checked against an oracle."
    }

    fn durability(&self) -> &'static str {
        "WAL on, no fsync per write (Silt Durability::None)"
    }

    fn run(&self, scale: Scale, ctx: &Ctx) -> Result<Vec<ResultRow>> {
        let (n, nq) = sizes(scale);
        let mut oracle = Oracle::default();
        let mut users = Vec::with_capacity(n as usize);
        for t in TweetGen::new(tweet_opts(ctx.seed, n)) {
            let u = int_field(&t, "user_id");
            oracle.put(int_field(&t, "id"), u, int_field(&t, "created_at"));
            users.push(u);
        }
        let present = oracle.values(Attr::User);
        let (umin, umax) = (present[0], present[present.len() - 1]);
        let mut absent = Vec::new();
        let mut p = present.iter().peekable();
        for v in umin..=umax {
            while p.peek().is_some_and(|&&x| x < v) {
                p.next();
            }
            if p.peek() != Some(&&v) {
                absent.push(v);
            }
        }
        let mut r = rng(ctx.seed, 11);
        let probes: Vec<i64> = (0..nq).map(|_| users[r.below(n) as usize]).collect();
        let mut absent_probes = Vec::new();
        if !absent.is_empty() {
            for _ in 0..nq {
                absent_probes.push(absent[r.below(absent.len() as u64) as usize]);
            }
        }
        let answers: Vec<Vec<Vec<i64>>> = KS
            .iter()
            .map(|&k| {
                probes
                    .iter()
                    .map(|&u| oracle.lookup(Attr::User, u, u, k))
                    .collect()
            })
            .collect();
        drop(oracle);
        let mut rows = vec![
            ResultRow::stat("data", "tweets", "count", n as f64),
            ResultRow::stat("data", "users with tweets", "count", present.len() as f64),
            ResultRow::stat(
                "data",
                "user ids without tweets inside [min, max]",
                "count",
                absent.len() as f64,
            ),
        ];
        if ctx.run == 0 {
            eprintln!(
                "data: {} tweets, {} users, {} absent ids in [{umin}, {umax}]",
                fmt_num(n as f64),
                present.len(),
                absent.len()
            );
        }
        let mut bits_order = BITS.to_vec();
        bits_order.rotate_left(ctx.run % BITS.len());
        for bits in bits_order {
            let label = format!("silt-embedded bits={bits}");
            let t_sys = Instant::now();
            let dir = ScratchDir::new(&ctx.scratch, &format!("bloom-{bits}"))?;
            let mut store = SiltStore::open(
                dir.path(),
                Some(IndexKind::Embedded),
                &[Attr::User],
                Some(bits),
            )?;
            let t_load = Instant::now();
            ctx.note(format!("{label}: {}", store.describe()));
            let pb = progress(n, format!("{label}: load"));
            let ds = store.ds()?.clone();
            let mut batch: Vec<Value> = Vec::with_capacity(1000);
            let mut done = 0u64;
            for t in TweetGen::new(tweet_opts(ctx.seed, n)) {
                batch.push(t);
                if batch.len() == 1000 {
                    done += 1000;
                    let rep = ds.write_batch(
                        std::mem::take(&mut batch),
                        BatchOptions {
                            mode: WriteMode::Upsert,
                            ..Default::default()
                        },
                    )?;
                    if !rep.failed.is_empty() {
                        bail!("{label}: write_batch failed: {:?}", rep.failed.first());
                    }
                    pb.set_position(done);
                }
            }
            if !batch.is_empty() {
                ds.write_batch(
                    batch,
                    BatchOptions {
                        mode: WriteMode::Upsert,
                        ..Default::default()
                    },
                )?;
            }
            drop(ds);
            pb.finish_and_clear();
            store.settle()?;
            rows.push(ResultRow::stat(
                &label,
                "load + settle time",
                "s",
                t_load.elapsed().as_secs_f64(),
            ));
            // DB size = the disk components (the log is not counted: Silt keeps
            // log files until a checkpoint, LevelDB deletes its log at a flush).
            let size: u64 = store.trees()?.iter().map(|t| t.disk_bytes).sum();
            rows.push(ResultRow::measure(
                &label,
                "DB size",
                "MB",
                size as f64 / 1e6,
            ));
            rows.push(ResultRow::stat(
                &label,
                "database directory incl. log",
                "MB",
                dir_size(dir.path())? as f64 / 1e6,
            ));
            // All data blocks: a full-range query reads every block.
            let all = store.lookup(Attr::User, i64::MIN + 1, i64::MAX - 1, None)?;
            if all.ids.len() as u64 != n {
                bail!(
                    "{label}: a full-range lookup returned {} of {n} tweets",
                    all.ids.len()
                );
            }
            let blocks = all.blocks.max(1);
            rows.push(ResultRow::stat(
                &label,
                "data blocks (primary)",
                "count",
                blocks as f64,
            ));
            for (ki, &k) in KS.iter().enumerate() {
                let metric = format!("LOOKUP {}", super::static_wl::k_label(k));
                // Unlimited-K lookups of hot users read thousands of blocks: a quarter as many.
                let nk = if k.is_none() { (nq / 4).max(1) } else { nq };
                let mut lat = Vec::with_capacity(nk);
                let mut blk = 0u64;
                let mut cand = 0u64;
                for (qi, &u) in probes.iter().take(nk).enumerate() {
                    let t = Instant::now();
                    let f = store.lookup(Attr::User, u, u, k)?;
                    lat.push(elapsed_ns(t));
                    check(
                        &label,
                        &format!("{metric} user {u}"),
                        &f.ids,
                        &answers[ki][qi],
                    )?;
                    blk += f.blocks;
                    cand += f.candidates;
                }
                rows.extend(lat_rows(&label, &metric, &mut lat));
                rows.push(ResultRow::stat(
                    &label,
                    &format!("{metric} blocks read per lookup"),
                    "count",
                    blk as f64 / nk as f64,
                ));
                rows.push(ResultRow::stat(
                    &label,
                    &format!("{metric} candidates per lookup"),
                    "count",
                    cand as f64 / nk as f64,
                ));
            }
            if !absent_probes.is_empty() {
                let mut lat = Vec::with_capacity(nq);
                let mut fp = 0u64;
                for &u in &absent_probes {
                    let t = Instant::now();
                    let f = store.lookup(Attr::User, u, u, None)?;
                    lat.push(elapsed_ns(t));
                    if !f.ids.is_empty() {
                        bail!(
                            "{label}: user {u} has no tweet but a lookup returned {:?}",
                            f.ids
                        );
                    }
                    fp += f.blocks;
                }
                rows.extend(lat_rows(&label, "LOOKUP absent user", &mut lat));
                rows.push(ResultRow::measure(
                    &label,
                    "false-positive blocks per absent-user lookup",
                    "blocks",
                    fp as f64 / nq as f64,
                ));
                rows.push(ResultRow::measure(
                    &label,
                    "false-positive rate (FP blocks / data blocks)",
                    "%",
                    100.0 * fp as f64 / nq as f64 / blocks as f64,
                ));
            }
            eprintln!(
                "{label}: size {} MB, {} blocks, done in {:.0} s",
                fmt_num(size as f64 / 1e6),
                blocks,
                t_sys.elapsed().as_secs_f64()
            );
            Box::new(store).close()?;
        }
        Ok(rows)
    }
}
