//! `leveldbpp-static`: the paper's Static workload (Table 3.7a, Figures
//! 3.8-3.11), scaled down.

use std::{collections::HashMap, time::Instant};

use anyhow::Result;
use silt::IndexKind;

use super::{
    Attr, Found, Oracle, Store, Sys, check, elapsed_ns, int_field, lat_rows, open_store, rng,
    tree_rows, tweet_opts, wants, with_json,
};
use crate::{
    results::{Kind, ResultRow},
    util::{ScratchDir, fmt_num, progress},
    workloads::{Ctx, Scale, Workload},
};
use silt::workload::tweets::TweetGen;

pub struct LeveldbppStatic;

/// (tweets, GETs, LOOKUPs per (attribute, k), RANGELOOKUPs per (attribute, selectivity, k)).
pub fn sizes(scale: Scale) -> (u64, usize, usize, usize) {
    match scale {
        Scale::Small => (200_000, 5_000, 100, 50),
        Scale::Medium | Scale::Full => (1_000_000, 20_000, 100, 50),
    }
}

pub const KS: [Option<usize>; 3] = [Some(10), Some(100), None];
/// RANGELOOKUP selectivities: user ids (consecutive ids; ids are scattered
/// over ranks, so ~this many users) and creation-time minutes.
pub const USER_SELS: [i64; 2] = [10, 100];
pub const TIME_SELS_MIN: [i64; 2] = [1, 10];
/// Buckets of the PUT latency series (the paper: one reading per million).
pub const PUT_BUCKETS: u64 = 10;

pub fn k_label(k: Option<usize>) -> String {
    k.map_or("k=all".into(), |k| format!("k={k}"))
}

/// One query of the static workload.
#[derive(Clone, Debug)]
pub struct Q {
    pub attr: Attr,
    pub lo: i64,
    pub hi: i64,
    pub k: Option<usize>,
    /// "LOOKUP UserID k=10", "RANGELOOKUP CreationTime 10 min k=all", ...
    pub metric: String,
}

/// The systems of a run. Eager's PUT cost grows with the posting lists (a
/// hot user's whole list is rewritten by each of its tweets: about 260 us per
/// PUT at 200 K tweets, ~5x more at 1 M), so beyond small scale it only runs
/// when asked for (`--systems ...,silt-eager`).
pub fn systems(scale: Scale, ctx: &Ctx) -> Vec<Sys> {
    let mut v = vec![
        Sys::Silt(None),
        Sys::Silt(Some(IndexKind::Embedded)),
        Sys::Silt(Some(IndexKind::Lazy)),
        Sys::Silt(Some(IndexKind::Composite)),
        Sys::Rocks,
    ];
    let asked = ctx
        .systems
        .as_ref()
        .is_some_and(|l| l.iter().any(|s| s.eq_ignore_ascii_case("silt-eager")));
    if scale == Scale::Small || asked {
        v.insert(4, Sys::Silt(Some(IndexKind::Eager)));
    } else if ctx.run == 0 {
        eprintln!(
            "note: silt-eager is skipped at {scale} scale (add `--systems` with silt-eager to run it)"
        );
        ctx.note(format!("silt-eager: SKIPPED at {scale} scale (PUTs too slow; `--systems ...,silt-eager` runs it)"));
    }
    v
}

impl Workload for LeveldbppStatic {
    fn name(&self) -> &'static str {
        "leveldbpp-static"
    }

    fn description(&self) -> &'static str {
        "LevelDB++ Static workload (seed 001 ch. 3): tweets, PUT/GET/LOOKUP/RANGELOOKUP on user id and creation time, k=10/100/all, per index kind (embedded, eager, lazy, composite) vs RocksDB composite keys; sizes, write amplification"
    }

    fn explanation(&self) -> &'static str {
        "Issue 7: the Static workload of LevelDB++ (seed 001 §3.5, Table 3.7a, Figures 3.8-3.11), \
         scaled down (the paper: 180 M tweets, 100 GB, 100 K GET, 15 K LOOKUP, 50 K RANGELOOKUP on a \
         16 GB machine; here small 200 K tweets and 5 K GETs, medium 1 M tweets and 20 K GETs). Tweets come from `silt::workload::tweets` (about 550 bytes of JSON, user ids \
         Zipf-like with 30 tweets per user on average, ~35 tweets per second of creation time, ids in \
         creation order). Each system loads the same tweets one PUT (upsert) at a time, then flushes and \
         waits for merges; then GETs of uniformly random ids, LOOKUP(attr, v, k) for users drawn from the \
         tweets' own distribution and creation times of random tweets (one second), and RANGELOOKUP on \
         10 and 100 consecutive user ids and 1- and 10-minute windows starting at a random tweet's time \
         (the paper's 100-minute window would be most of the small data set), each for k = 10, 100 and \
         unlimited. Query counts: small and medium 100 LOOKUPs per attribute and k, 50 RANGELOOKUPs per \
         attribute, selectivity and k (12 for k = all). Eager runs at small scale only unless \
         `--systems` names `silt-eager` (its PUTs rewrite whole posting lists: ~260 us each at 200 K \
         tweets, growing with the data). Systems: one Silt dataset per index kind, each with two indexes of that kind \
         (`by_user` on user_id, `by_time` on created_at; `silt-none` has none, for PUT/GET/size \
         baselines); RocksDB with the application-level composite-key pattern (see the system lines). \
         Every answer is checked against an in-memory oracle; a difference fails the run. Reported: \
         mean PUT latency and the PUT latency over the load (series file), GET/LOOKUP/RANGELOOKUP mean \
         latency (p50/p99 in the statistics), disk size per tree (Silt's embedded index has no tree: its \
         filters live in the primary's aux blocks, so its size is the primary's growth over silt-none), \
         bytes written by flushes and merges per tree and per tweet, and write amplification = all \
         flush+merge bytes / tweet JSON bytes. The Eager blow-up is compared with the paper's arithmetic \
         (WAMF 4290 vs 132, i.e. eager/composite = the average posting list length, ~32)."
    }

    fn durability(&self) -> &'static str {
        "WAL on, no fsync per write (Silt Durability::None, RocksDB sync=false)"
    }

    fn run(&self, scale: Scale, ctx: &Ctx) -> Result<Vec<ResultRow>> {
        let (n, n_get, n_lookup, n_range) = sizes(scale);
        let attrs = [Attr::User, Attr::Time];
        // The oracle and the queries, once.
        let t0 = Instant::now();
        let mut oracle = Oracle::default();
        let mut json_bytes = 0u64;
        let mut times = Vec::with_capacity(n as usize);
        let mut tweet_users = Vec::with_capacity(n as usize);
        for t in TweetGen::new(tweet_opts(ctx.seed, n)) {
            let (id, u, tm) = (
                int_field(&t, "id"),
                int_field(&t, "user_id"),
                int_field(&t, "created_at"),
            );
            json_bytes += silt::value::to_json(&t).to_string().len() as u64;
            oracle.put(id, u, tm);
            times.push(tm);
            tweet_users.push(u);
        }
        let users = oracle.values(Attr::User);
        let (umin, umax) = (users[0], *users.last().unwrap_or(&users[0]));
        let mut r = rng(ctx.seed, 7);
        let mut queries: Vec<Q> = Vec::new();
        for k in KS {
            for attr in attrs {
                for _ in 0..n_lookup {
                    let v = match attr {
                        // A random tweet's author: users drawn from the data's
                        // own (Zipf-like) distribution, as the paper does.
                        Attr::User => tweet_users[r.below(n) as usize],
                        Attr::Time => times[r.below(n) as usize],
                    };
                    queries.push(Q {
                        attr,
                        lo: v,
                        hi: v,
                        k,
                        metric: format!("LOOKUP {} {}", attr.label(), k_label(k)),
                    });
                }
            }
            let nr = if k.is_none() { n_range / 4 } else { n_range };
            for sel in USER_SELS {
                for _ in 0..nr {
                    let lo = umin + r.below((umax - umin - sel).max(1) as u64) as i64;
                    queries.push(Q {
                        attr: Attr::User,
                        lo,
                        hi: lo + sel - 1,
                        k,
                        metric: format!("RANGELOOKUP UserID {sel} users {}", k_label(k)),
                    });
                }
            }
            for min in TIME_SELS_MIN {
                for _ in 0..nr {
                    let lo = times[r.below(n) as usize];
                    queries.push(Q {
                        attr: Attr::Time,
                        lo,
                        hi: lo + 60 * min - 1,
                        k,
                        metric: format!("RANGELOOKUP CreationTime {min} min {}", k_label(k)),
                    });
                }
            }
        }
        let answers: Vec<Vec<i64>> = queries
            .iter()
            .map(|q| oracle.lookup(q.attr, q.lo, q.hi, q.k))
            .collect();
        let gets: Vec<i64> = (0..n_get).map(|_| 1 + r.below(n) as i64).collect();
        let mut rows = vec![
            ResultRow::stat("data", "tweets", "count", n as f64),
            ResultRow::stat("data", "users with tweets", "count", users.len() as f64),
            ResultRow::stat(
                "data",
                "tweets per user (mean)",
                "count",
                n as f64 / users.len() as f64,
            ),
            ResultRow::stat(
                "data",
                "tweets per creation second (mean, = CreationTime posting list)",
                "count",
                n as f64 / oracle.values(Attr::Time).len() as f64,
            ),
            ResultRow::stat(
                "data",
                "tweet JSON bytes (mean)",
                "bytes",
                json_bytes as f64 / n as f64,
            ),
        ];
        // Mean result counts per query kind (the same for every system).
        let mut res_sum: HashMap<&str, (usize, usize)> = HashMap::new();
        for (q, a) in queries.iter().zip(&answers) {
            let e = res_sum.entry(q.metric.as_str()).or_default();
            e.0 += a.len();
            e.1 += 1;
        }
        let mut metrics: Vec<&str> = Vec::new();
        for q in &queries {
            if !metrics.contains(&q.metric.as_str()) {
                metrics.push(q.metric.as_str());
            }
        }
        for m in &metrics {
            let (s, c) = res_sum[m];
            rows.push(ResultRow::stat(
                "data",
                &format!("{m} results (mean)"),
                "results",
                s as f64 / c.max(1) as f64,
            ));
        }
        if ctx.run == 0 {
            eprintln!(
                "data: {} tweets, {} users, {:.0} B/tweet, {} queries; generated in {:.1} s",
                fmt_num(n as f64),
                users.len(),
                json_bytes as f64 / n as f64,
                queries.len(),
                t0.elapsed().as_secs_f64()
            );
        }
        drop(oracle);

        let mut order = systems(scale, ctx);
        let len = order.len();
        order.rotate_left(ctx.run % len);
        let mut series: Vec<String> = Vec::new();
        for sys in order.into_iter().filter(|s| wants(ctx, *s)) {
            let t = Instant::now();
            rows.extend(run_system(
                sys,
                ctx,
                n,
                json_bytes,
                &attrs,
                &queries,
                &answers,
                &gets,
                &mut series,
            )?);
            eprintln!(
                "{}: done in {:.0} s",
                sys.label(),
                t.elapsed().as_secs_f64()
            );
        }
        rows.extend(derived(&rows));
        super::mixed::write_series(ctx, self.name(), scale, &series)?;
        Ok(rows)
    }
}

#[allow(clippy::too_many_arguments)]
fn run_system(
    sys: Sys,
    ctx: &Ctx,
    n: u64,
    json_bytes: u64,
    attrs: &[Attr],
    queries: &[Q],
    answers: &[Vec<i64>],
    gets: &[i64],
    series: &mut Vec<String>,
) -> Result<Vec<ResultRow>> {
    let label = sys.label();
    let dir = ScratchDir::new(&ctx.scratch, &label)?;
    let mut store: Box<dyn Store> = open_store(sys, dir.path(), attrs, None)?;
    ctx.note(format!("{label}: {}", store.describe()));
    let mut rows = Vec::new();
    // Load.
    let pb = progress(n, format!("{label}: PUT"));
    let bucket = (n / PUT_BUCKETS).max(1);
    let (mut bsum, mut bcount) = (0u64, 0u64);
    let mut lat: Vec<u32> = Vec::with_capacity(n as usize);
    let t0 = Instant::now();
    for (i, t) in TweetGen::new(tweet_opts(ctx.seed, n)).enumerate() {
        let (rec, json) = with_json(t);
        let t = Instant::now();
        store.put(&rec, &json)?;
        let ns = elapsed_ns(t);
        lat.push(ns);
        bsum += u64::from(ns);
        bcount += 1;
        if (i as u64 + 1).is_multiple_of(bucket) {
            series.push(format!(
                "{},static-load,{},{},PUT,{:.3},{bcount}",
                ctx.run,
                label,
                i + 1,
                bsum as f64 / bcount as f64 / 1e3
            ));
            bsum = 0;
            bcount = 0;
            pb.set_position(i as u64 + 1);
        }
    }
    let load_s = t0.elapsed().as_secs_f64();
    pb.finish_and_clear();
    store.settle()?;
    let settled_s = t0.elapsed().as_secs_f64();
    rows.extend(lat_rows(&label, "PUT", &mut lat));
    drop(lat);
    rows.push(ResultRow::stat(
        &label,
        "load wall time (PUTs + generation)",
        "s",
        load_s,
    ));
    rows.push(ResultRow::stat(
        &label,
        "settle time (flush + merges)",
        "s",
        settled_s - load_s,
    ));
    rows.push(ResultRow::stat(
        &label,
        "ingest incl. settle",
        "tweets/s",
        n as f64 / settled_s,
    ));
    rows.extend(tree_rows(&label, &store.trees()?, json_bytes, n));
    let put_mean = rows
        .iter()
        .find(|r| r.system == label && r.metric == "PUT mean")
        .map_or(f64::NAN, |r| r.value);
    eprintln!(
        "{label}: PUT mean {put_mean:.1} us, settle {:.1} s",
        settled_s - load_s
    );

    // GET.
    let mut lat: Vec<u32> = Vec::with_capacity(gets.len());
    for &id in gets {
        let t = Instant::now();
        let found = store.get(id)?;
        lat.push(elapsed_ns(t));
        if !found {
            anyhow::bail!("{label}: GET {id} found nothing");
        }
    }
    rows.extend(lat_rows(&label, "GET", &mut lat));

    if matches!(sys, Sys::Silt(None)) {
        store.close()?;
        return Ok(rows);
    }
    // LOOKUP / RANGELOOKUP, grouped by metric (queries are generated grouped).
    let mut i = 0;
    while i < queries.len() {
        let metric = &queries[i].metric;
        let mut j = i;
        let mut lat = Vec::new();
        let mut tot = Found::default();
        let pb = progress(0, format!("{label}: {metric}"));
        while j < queries.len() && &queries[j].metric == metric {
            let q = &queries[j];
            let t = Instant::now();
            let f = store.lookup(q.attr, q.lo, q.hi, q.k)?;
            lat.push(elapsed_ns(t));
            check(
                &label,
                &format!("{metric} [{}, {}]", q.lo, q.hi),
                &f.ids,
                &answers[j],
            )?;
            tot.components += f.components;
            tot.blocks += f.blocks;
            tot.candidates += f.candidates;
            tot.fetched += f.fetched;
            j += 1;
        }
        pb.finish_and_clear();
        let c = (j - i) as f64;
        rows.extend(lat_rows(&label, metric, &mut lat));
        for (what, v) in [
            ("components searched", tot.components),
            ("blocks read", tot.blocks),
            ("candidates", tot.candidates),
            ("records fetched", tot.fetched),
        ] {
            if v > 0 {
                rows.push(ResultRow::stat(
                    &label,
                    &format!("{metric} {what} per query"),
                    "count",
                    v as f64 / c,
                ));
            }
        }
        i = j;
    }
    store.close()?;
    Ok(rows)
}

/// Derived rows: index sizes (embedded: primary growth over silt-none), the
/// eager/composite and eager/lazy write blow-ups per index, Silt / RocksDB.
fn derived(rows: &[ResultRow]) -> Vec<ResultRow> {
    let get = |sys: &str, metric: &str| {
        rows.iter()
            .find(|r| r.system == sys && r.metric == metric)
            .map(|r| r.value)
    };
    let mut out = Vec::new();
    if let (Some(e), Some(none)) = (
        get("silt-embedded", "size primary"),
        get("silt-none", "size primary"),
    ) {
        out.push(ResultRow::stat(
            "silt-embedded",
            "size of the embedded filters (primary growth over silt-none, both indexes)",
            "MB",
            e - none,
        ));
    }
    for idx in ["by_user", "by_time"] {
        let m = format!("{idx} bytes written by flush+merge per tweet");
        let u = format!("{idx} user bytes (memtable writes)");
        for peer in ["silt-composite", "silt-lazy"] {
            if let (Some(a), Some(b)) = (get("silt-eager", &m), get(peer, &m)) {
                out.push(ResultRow::new(
                    &format!("silt-eager/{peer}"),
                    &format!("{idx} index bytes written by flush+merge"),
                    "x",
                    Kind::Ratio,
                    a / b,
                ));
            }
            if let (Some(a), Some(b)) = (get("silt-eager", &u), get(peer, &u)) {
                out.push(ResultRow::new(
                    &format!("silt-eager/{peer}"),
                    &format!("{idx} index bytes written to the memtable"),
                    "x",
                    Kind::Ratio,
                    a / b,
                ));
            }
        }
    }
    // RocksDB mean latency / Silt mean latency (above 1: Silt faster).
    for kind in ["silt-lazy", "silt-composite", "silt-embedded", "silt-eager"] {
        for r in rows.iter().filter(|r| {
            r.system == "rocksdb-app"
                && r.kind == Kind::Measure
                && r.metric.ends_with(" mean")
                && !r.metric.starts_with("RANGELOOKUP")
        }) {
            if let Some(s) = get(kind, &r.metric)
                && s > 0.0
            {
                out.push(ResultRow::new(
                    &format!("{kind}/rocksdb-app"),
                    &format!("{}, rocksdb / silt", r.metric),
                    "x",
                    Kind::Ratio,
                    r.value / s,
                ));
            }
        }
    }
    out
}
