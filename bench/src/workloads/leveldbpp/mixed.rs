//! `leveldbpp-mixed`: the paper's Mixed workloads (Table 3.7b, Figures
//! 3.12-3.15), scaled down: write-heavy 80/15/5/0, read-heavy 20/70/10/0,
//! update-heavy 40/15/5/40 (PUT of a new tweet / GET / LOOKUP on UserID,
//! k = 10 / update = PUT of an existing tweet id with a new user id), mean
//! latency per operation type over time.

use std::{fs, io::Write, time::Instant};

use anyhow::Result;
use silt::{IndexKind, Value};

use super::{
    Attr, Oracle, Store, Sys, check, elapsed_ns, int_field, lat_rows, open_store, rng, tree_rows,
    tweet_opts, wants, with_json,
};
use crate::{
    results::ResultRow,
    util::{ScratchDir, fmt_num, progress},
    workloads::{Ctx, Scale, Workload},
};
use silt::workload::tweets::TweetGen;

pub struct LeveldbppMixed;

/// (tweets loaded before the mix, operations of each mix).
pub fn sizes(scale: Scale) -> (u64, u64) {
    match scale {
        Scale::Small => (30_000, 30_000),
        Scale::Medium | Scale::Full => (100_000, 30_000),
    }
}

/// (name, PUT %, GET %, LOOKUP %, update %).
pub const MIXES: [(&str, u64, u64, u64, u64); 3] = [
    ("write-heavy", 80, 15, 5, 0),
    ("read-heavy", 20, 70, 10, 0),
    ("update-heavy", 40, 15, 5, 40),
];
pub const K: usize = 10;
pub const BUCKETS: u64 = 10;
const OPS: [&str; 4] = ["PUT", "GET", "LOOKUP", "UPDATE"];

enum Op {
    Put(Value),
    Get(i64),
    /// user, index into the answers
    Lookup(i64, usize),
    Update(Value),
}

/// Writes (run 0) or appends (later runs) the time series of a workload to
/// `<out>/leveldbpp/<name>-series.csv`.
pub fn write_series(ctx: &Ctx, name: &str, scale: Scale, lines: &[String]) -> Result<()> {
    let dir = ctx.out.join("leveldbpp");
    fs::create_dir_all(&dir)?;
    let path = dir.join(format!("{name}-series.csv"));
    let mut f = if ctx.run == 0 {
        let mut f = fs::File::create(&path)?;
        writeln!(f, "# workload={name} scale={scale}")?;
        writeln!(f, "run,phase,system,ops,op,value,count")?;
        f
    } else {
        fs::OpenOptions::new().append(true).open(&path)?
    };
    for l in lines {
        writeln!(f, "{l}")?;
    }
    eprintln!("wrote {}", path.display());
    Ok(())
}

pub fn systems(ctx: &Ctx) -> Vec<Sys> {
    let mut v = vec![
        Sys::Silt(Some(IndexKind::Embedded)),
        Sys::Silt(Some(IndexKind::Lazy)),
        Sys::Silt(Some(IndexKind::Composite)),
        Sys::Rocks,
    ];
    // The paper leaves Eager out of the mixed runs ("unusable"); only on request.
    if ctx
        .systems
        .as_ref()
        .is_some_and(|l| l.iter().any(|s| s.eq_ignore_ascii_case("silt-eager")))
    {
        v.push(Sys::Silt(Some(IndexKind::Eager)));
    }
    v
}

impl Workload for LeveldbppMixed {
    fn name(&self) -> &'static str {
        "leveldbpp-mixed"
    }

    fn description(&self) -> &'static str {
        "LevelDB++ Mixed workloads (seed 001 Table 3.7b): write-heavy 80/15/5/0, read-heavy 20/70/10/0, update-heavy 40/15/5/40 PUT/GET/LOOKUP(k=10)/update on a UserID index; mean latency per op type over time"
    }

    fn explanation(&self) -> &'static str {
        "Issue 7: the Mixed workloads of LevelDB++ (seed 001 §3.5, Table 3.7b, Figures 3.12-3.15), \
         scaled down (the paper: 50 M operations per mix, starting from an empty database; here the \
         database is first loaded with small 30 K / medium 100 K tweets, then 30 K operations \
         run: Silt's composite LOOKUP fetches every match of a user before it can rank them, tens of \
         milliseconds for the hot users of the Zipf distribution, which bounds the operation count). Operation ratios PUT/GET/LOOKUP/update: write-heavy 80/15/5/0, read-heavy 20/70/10/0, \
         update-heavy 40/15/5/40. PUT = a new tweet (the generator continues), GET = a uniformly random \
         existing tweet id, LOOKUP = the 10 most recent tweets of the author of a random existing tweet \
         (the data's own user distribution), update = a PUT of an existing tweet id (uniformly random) \
         whose user id is replaced by the author of another random tweet (the old index entry becomes \
         stale). Only user_id is indexed and queried, as in the paper; Eager is left out as in the paper \
         (`--systems silt-eager` adds it). The operation sequence is the same for every system and every \
         LOOKUP answer is checked against an oracle. Reported: mean latency per operation type and over \
         all operations per mix (Figure 3.12 is the latter over time), flush+merge bytes; the series file \
         `results/leveldbpp/leveldbpp-mixed-series.csv` holds, for each tenth of the operations, the mean \
         latency of each operation type and the cumulative flush+merge bytes (the paper's cumulative \
         compaction I/O), plotted in `leveldbpp-mixed.png`."
    }

    fn durability(&self) -> &'static str {
        "WAL on, no fsync per write (Silt Durability::None, RocksDB sync=false)"
    }

    fn run(&self, scale: Scale, ctx: &Ctx) -> Result<Vec<ResultRow>> {
        let (n0, n_ops) = sizes(scale);
        let mut rows = Vec::new();
        let mut series = Vec::new();
        // Enough tweets for the most write-heavy mix.
        let total = n0 + n_ops;
        let t0 = Instant::now();
        let tweets: Vec<Value> = TweetGen::new(tweet_opts(ctx.seed, total)).collect();
        if ctx.run == 0 {
            eprintln!(
                "data: {} tweets generated in {:.1} s",
                fmt_num(total as f64),
                t0.elapsed().as_secs_f64()
            );
        }
        for (mi, &(mix, p_put, p_get, p_lookup, _p_upd)) in MIXES.iter().enumerate() {
            // The operation sequence and the oracle's answers.
            let mut oracle = Oracle::default();
            let mut cur: Vec<Value> = tweets[..n0 as usize].to_vec();
            for t in &cur {
                oracle.put(
                    int_field(t, "id"),
                    int_field(t, "user_id"),
                    int_field(t, "created_at"),
                );
            }
            let mut r = rng(ctx.seed, 100 + mi as u64);
            let mut next = n0 as usize;
            let mut ops = Vec::with_capacity(n_ops as usize);
            let mut answers: Vec<Vec<i64>> = Vec::new();
            for _ in 0..n_ops {
                let x = r.below(100);
                let existing = cur.len() as u64;
                if x < p_put {
                    let t = tweets[next].clone();
                    next += 1;
                    oracle.put(
                        int_field(&t, "id"),
                        int_field(&t, "user_id"),
                        int_field(&t, "created_at"),
                    );
                    cur.push(t.clone());
                    ops.push(Op::Put(t));
                } else if x < p_put + p_get {
                    ops.push(Op::Get(1 + r.below(existing) as i64));
                } else if x < p_put + p_get + p_lookup {
                    let u = int_field(&cur[r.below(existing) as usize], "user_id");
                    answers.push(oracle.lookup(Attr::User, u, u, Some(K)));
                    ops.push(Op::Lookup(u, answers.len() - 1));
                } else {
                    let i = r.below(existing) as usize;
                    let u = int_field(&cur[r.below(existing) as usize], "user_id");
                    let mut t = cur[i].clone();
                    if let Value::Object(fields) = &mut t {
                        for (k, v) in fields.iter_mut() {
                            if k == "user_id" {
                                *v = Value::Int(u);
                            }
                        }
                    }
                    oracle.put(int_field(&t, "id"), u, int_field(&t, "created_at"));
                    cur[i] = t.clone();
                    ops.push(Op::Update(t));
                }
            }
            drop(oracle);
            drop(cur);
            let mut order = systems(ctx);
            let len = order.len();
            order.rotate_left(ctx.run % len);
            for sys in order.into_iter().filter(|s| wants(ctx, *s)) {
                let t = Instant::now();
                rows.extend(run_mix(
                    sys,
                    ctx,
                    mix,
                    &tweets[..n0 as usize],
                    &ops,
                    &answers,
                    &mut series,
                )?);
                eprintln!(
                    "{mix} {}: done in {:.0} s",
                    sys.label(),
                    t.elapsed().as_secs_f64()
                );
            }
        }
        write_series(ctx, self.name(), scale, &series)?;
        Ok(rows)
    }
}

fn run_mix(
    sys: Sys,
    ctx: &Ctx,
    mix: &str,
    preload: &[Value],
    ops: &[Op],
    answers: &[Vec<i64>],
    series: &mut Vec<String>,
) -> Result<Vec<ResultRow>> {
    let label = sys.label();
    let dir = ScratchDir::new(&ctx.scratch, &format!("{mix}-{label}"))?;
    let mut store: Box<dyn Store> = open_store(sys, dir.path(), &[Attr::User], None)?;
    ctx.note(format!("{label}: {}", store.describe()));
    let rocks = matches!(sys, Sys::Rocks);
    let json = |t: &Value| {
        if rocks {
            with_json(t.clone()).1
        } else {
            String::new()
        }
    };
    let pb = progress(preload.len() as u64, format!("{mix} {label}: preload"));
    for t in preload {
        store.put(t, &json(t))?;
    }
    store.settle()?;
    pb.finish_and_clear();
    let w0: u64 = store.trees()?.iter().map(|t| t.written_bytes).sum();

    let bucket = (ops.len() as u64 / super::mixed::BUCKETS).max(1);
    let mut lat: [Vec<u32>; 4] = Default::default();
    let mut bsum = [0u64; 4];
    let mut bcnt = [0u64; 4];
    let mut json_bytes = 0u64;
    let pb = progress(ops.len() as u64, format!("{mix} {label}"));
    let t_all = Instant::now();
    for (i, op) in ops.iter().enumerate() {
        let (kind, ns) = match op {
            Op::Put(t) | Op::Update(t) => {
                let j = json(t);
                json_bytes += j.len() as u64;
                let t0 = Instant::now();
                store.put(t, &j)?;
                (if matches!(op, Op::Put(_)) { 0 } else { 3 }, elapsed_ns(t0))
            }
            Op::Get(id) => {
                let t0 = Instant::now();
                let found = store.get(*id)?;
                let ns = elapsed_ns(t0);
                if !found {
                    anyhow::bail!("{label} ({mix}): GET {id} found nothing");
                }
                (1, ns)
            }
            Op::Lookup(u, a) => {
                let t0 = Instant::now();
                let f = store.lookup(Attr::User, *u, *u, Some(K))?;
                let ns = elapsed_ns(t0);
                check(
                    &label,
                    &format!("{mix}: LOOKUP user {u} k={K} (op {i})"),
                    &f.ids,
                    &answers[*a],
                )?;
                (2, ns)
            }
        };
        lat[kind].push(ns);
        bsum[kind] += u64::from(ns);
        bcnt[kind] += 1;
        if (i as u64 + 1).is_multiple_of(bucket) {
            let done = i + 1;
            let (mut s, mut c) = (0u64, 0u64);
            for k in 0..4 {
                if bcnt[k] > 0 {
                    series.push(format!(
                        "{},{mix},{label},{done},{},{:.3},{}",
                        ctx.run,
                        OPS[k],
                        bsum[k] as f64 / bcnt[k] as f64 / 1e3,
                        bcnt[k]
                    ));
                }
                s += bsum[k];
                c += bcnt[k];
            }
            series.push(format!(
                "{},{mix},{label},{done},ALL,{:.3},{c}",
                ctx.run,
                s as f64 / c.max(1) as f64 / 1e3
            ));
            let w: u64 = store.trees()?.iter().map(|t| t.written_bytes).sum();
            series.push(format!(
                "{},{mix},{label},{done},flush+merge MB,{:.3},0",
                ctx.run,
                (w - w0) as f64 / 1e6
            ));
            bsum = [0; 4];
            bcnt = [0; 4];
            pb.set_position(done as u64);
        }
    }
    let wall = t_all.elapsed().as_secs_f64();
    pb.finish_and_clear();
    let mut rows = Vec::new();
    let all: u64 = lat.iter().flatten().map(|&x| u64::from(x)).sum();
    let count: usize = lat.iter().map(Vec::len).sum();
    rows.push(ResultRow::measure(
        &label,
        &format!("{mix}: all ops mean"),
        "us",
        all as f64 / count.max(1) as f64 / 1e3,
    ));
    for (k, l) in lat.iter_mut().enumerate() {
        if !l.is_empty() {
            rows.extend(lat_rows(&label, &format!("{mix}: {}", OPS[k]), l));
        }
    }
    rows.push(ResultRow::stat(
        &label,
        &format!("{mix}: wall time of the ops"),
        "s",
        wall,
    ));
    let trees = store.trees()?;
    let w: u64 = trees.iter().map(|t| t.written_bytes).sum();
    rows.push(ResultRow::stat(
        &label,
        &format!("{mix}: flush+merge bytes during the ops"),
        "MB",
        (w - w0) as f64 / 1e6,
    ));
    for r in tree_rows(&label, &trees, json_bytes.max(1), ops.len() as u64) {
        if r.metric.starts_with("size") {
            rows.push(ResultRow::stat(
                &label,
                &format!("{mix}: {}", r.metric),
                &r.unit,
                r.value,
            ));
        }
    }
    eprintln!(
        "{mix} {label}: all ops {:.1} us mean",
        all as f64 / count.max(1) as f64 / 1e3
    );
    store.close()?;
    Ok(rows)
}
