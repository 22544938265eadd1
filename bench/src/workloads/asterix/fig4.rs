//! `asterix-fig4`: Fig. 4 of seed 003 §6.1.1, ingest throughput as secondary
//! indexes are added (no index, one B+-tree, R-tree, keyword or n-gram
//! index, all four), on one node.

use std::time::Instant;

use anyhow::Result;
use silt::lsm::policy::MergePolicy;

use super::{Ix, Mem, SiltTweets, Tweets, dir_name, tree_rows, trees, wants};
use crate::{
    results::{Kind, ResultRow},
    util::{IoCounters, ScratchDir, dir_size, fmt_num},
    workloads::{Ctx, Scale, Workload},
};

pub struct AsterixFig4;

/// (tweets, memory) at each scale.
pub fn sizes(scale: Scale) -> (usize, Mem) {
    match scale {
        Scale::Small => (
            20_000,
            Mem {
                budget: 8 << 20,
                cache: 24 << 20,
            },
        ),
        Scale::Medium | Scale::Full => (
            120_000,
            Mem {
                budget: 32 << 20,
                cache: 96 << 20,
            },
        ),
    }
}

/// The configurations of Fig. 4(a) and (b), in the paper's order.
pub fn configs() -> Vec<(&'static str, Vec<Ix>)> {
    vec![
        ("no-index", vec![]),
        ("btree", vec![Ix::Btree]),
        ("rtree", vec![Ix::Rtree]),
        ("keyword", vec![Ix::Keyword]),
        ("ngram", vec![Ix::Ngram]),
        (
            "all-four",
            vec![Ix::Btree, Ix::Rtree, Ix::Keyword, Ix::Ngram],
        ),
    ]
}

const INGEST: &str = "ingest";
const INGEST_SETTLED: &str = "ingest+settle";

impl Workload for AsterixFig4 {
    fn name(&self) -> &'static str {
        "asterix-fig4"
    }

    fn description(&self) -> &'static str {
        "AsterixDB Fig. 4: tweet ingest throughput with no secondary index, one B+-tree, R-tree, keyword or 3-gram index, and all four"
    }

    fn explanation(&self) -> &'static str {
        "Issue 8: Fig. 4(a)/(b) of seed 003 §6.1.1 (the paper: 1 to 8 machines, 1 KB synthetic \
         tweets for 20 minutes; the figure's numbers are lost in the text conversion, its findings \
         are: no index is fastest, a B+-tree costs least, then the R-tree and the inverted indexes, \
         the n-gram index most; with all four the rate is bounded by the n-gram index). Here: one \
         process, one partition (the paper's curves scale near-linearly with nodes, so the per-node \
         comparison is the one to reproduce), a fixed number of ~1 KB tweets (small 20 K, \
         medium/full 120 K) inserted with `write_batch` of 1,000 (insert mode) into a dataset with \
         no secondary index (`no-index`), a B+-tree on user_id (`btree`), an R-tree on loc \
         (`rtree`), a keyword index on text (`keyword`), a 3-gram index on text (`ngram`), or all \
         four (`all-four`); every tree prefix(budget, 5) (the paper's default policy, scaled as in \
         asterix-table2), memory budget 8 MiB (small) / 32 MiB (medium), block cache 3x that. \
         Reported: ingest rate (client-visible, and with the final flush + merges), its ratio to \
         no-index, bytes put into the memory components and written by flushes + merges per tweet, \
         flushes, and disk size. `--policy` sets another policy for every configuration (the first \
         one given). Fig. 4(c) (more B+-trees) is not run."
    }

    fn durability(&self) -> &'static str {
        "WAL on, no fsync per commit (Silt Durability::None)"
    }

    fn run(&self, scale: Scale, ctx: &Ctx) -> Result<Vec<ResultRow>> {
        let (n, mem) = sizes(scale);
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
        let tweets = Tweets::generate(n, ctx.seed);
        let user = tweets.json_bytes as f64;
        if ctx.run == 0 {
            eprintln!(
                "data: {} tweets, {:.0} JSON bytes each; policy {policy}, memory budget {} MiB",
                fmt_num(n as f64),
                user / n as f64,
                mem.budget >> 20
            );
        }
        let mut rows = vec![
            ResultRow::stat("data", "tweets", "count", n as f64),
            ResultRow::stat("data", "JSON bytes per tweet", "bytes", user / n as f64),
        ];
        let cfgs: Vec<_> = configs()
            .into_iter()
            .filter(|(l, _)| wants(ctx, l))
            .collect();
        let k = cfgs.len().max(1);
        for i in 0..cfgs.len() {
            let (label, ixs) = &cfgs[(i + ctx.run) % k];
            rows.extend(run_config(label, ixs, &policy, &tweets, mem, ctx)?);
        }
        let get = |sys: &str, m: &str| {
            rows.iter()
                .find(|r| r.system == sys && r.metric == m && r.kind == Kind::Measure)
                .map(|r| r.value)
        };
        let mut ratios = Vec::new();
        for (label, _) in &cfgs {
            for m in [INGEST, INGEST_SETTLED] {
                if let (Some(a), Some(b)) = (get(label, m), get("no-index", m)) {
                    ratios.push(ResultRow::new(
                        &format!("{label}/no-index"),
                        &format!("{m} rate ratio to no index"),
                        "x",
                        Kind::Ratio,
                        a / b,
                    ));
                }
            }
        }
        rows.extend(ratios);
        Ok(rows)
    }
}

fn run_config(
    sys: &str,
    ixs: &[Ix],
    policy: &MergePolicy,
    tweets: &Tweets,
    mem: Mem,
    ctx: &Ctx,
) -> Result<Vec<ResultRow>> {
    let n = tweets.len();
    let dir = ScratchDir::new(&ctx.scratch, &dir_name(sys))?;
    let s = SiltTweets::open(dir.path(), mem, policy, ixs)?;
    ctx.note(format!("{sys}: {}", s.describe));
    let (io0, io_ok) = IoCounters::read();
    let t0 = Instant::now();
    let load_s = s.ingest(tweets, 0..n, &format!("{sys}: ingest"))?;
    s.settle()?;
    let settled_s = t0.elapsed().as_secs_f64();
    let io = IoCounters::read().0.since(&io0);
    let ts = trees(&s.ds);
    let (trows, tot) = tree_rows(sys, &ts, "");
    let user = tweets.json_bytes as f64;
    let mut rows = vec![
        ResultRow::measure(sys, INGEST, "records/s", n as f64 / load_s),
        ResultRow::measure(sys, INGEST_SETTLED, "records/s", n as f64 / settled_s),
        ResultRow::stat(sys, "ingest time", "s", load_s),
        ResultRow::stat(sys, "settle time", "s", settled_s - load_s),
        ResultRow::measure(
            sys,
            "memory-component bytes per tweet",
            "bytes",
            tot.user_bytes as f64 / n as f64,
        ),
        ResultRow::measure(
            sys,
            "flush+merge bytes per tweet",
            "bytes",
            tot.written as f64 / n as f64,
        ),
        ResultRow::stat(
            sys,
            "flushes (primary)",
            "count",
            ts.iter()
                .find(|t| t.name == "primary")
                .map_or(0, |t| t.flushes) as f64,
        ),
        ResultRow::stat(sys, "merges (all trees)", "count", tot.merges as f64),
        ResultRow::stat(
            sys,
            "write amp (flush+merge / memory-component bytes)",
            "x",
            tot.written as f64 / tot.user_bytes.max(1) as f64,
        ),
        ResultRow::stat(sys, "disk size", "MB", dir_size(dir.path())? as f64 / 1e6),
    ];
    if io_ok {
        rows.push(ResultRow::stat(
            sys,
            "bytes written by the process (incl. log) / tweet JSON bytes",
            "x",
            io.wchar as f64 / user,
        ));
    }
    rows.extend(trows);
    eprintln!(
        "{sys}: ingest {} tweets/s ({} with settle), {} memory-component bytes per tweet",
        fmt_num(n as f64 / load_s),
        fmt_num(n as f64 / settled_s),
        fmt_num(tot.user_bytes as f64 / n as f64)
    );
    s.close()?;
    Ok(rows)
}
