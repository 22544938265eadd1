//! Seed 002's comparison of merge policies for an LSM R-tree: the same
//! point stream ingested under stack-based policies (binomial, tiered,
//! concurrent, prefix) and the leveled policy with size, STR and
//! R*-Grove-style output partitioning, each with the Hilbert and the Simple
//! comparator (plus Z-order under size-partitioned leveled); write
//! amplification of the R-tree, write throughput over time, and the paper's
//! interleaved workload: a load phase of half the points, then rounds of an
//! insert phase and a read phase of index-only box queries of selectivity
//! 10^-σ (σ = 3, 4, 5: width 360·10^-σ, height 180·10^-σ degrees, centred on
//! a point inserted before), with the components and leaves each touches
//! (read amplification). Two data sets as in the paper: city-clustered
//! points (standing in for its OSM extract) and uniformly random points.

use std::io::Write as _;
use std::time::Instant;

use anyhow::{Context, Result, bail};
use rand::{Rng, SeedableRng, rngs::SmallRng};
use silt::index::RtreeOrder;
use silt::lsm::policy::MergePolicy;
use silt::{
    BatchOptions, Database, DatasetDef, DbOptions, Durability, FieldType, Geometry, IndexDef,
    Query, QueryOptions, Value, WriteMode,
};

use super::{Ctx, Scale, Workload};
use crate::results::ResultRow;
use crate::spatial::data::{GEN, GenParams, TweetData, cities};
use crate::util::{ScratchDir, fmt_num, progress, spinner};

pub struct SpatialPolicies;

/// The selectivities 10^-σ of the read phases.
const SIGMAS: [i32; 3] = [3, 4, 5];

/// Points, memory budget, insert+read rounds after the load phase, and
/// queries per read phase for each σ of [`SIGMAS`].
fn sizes(scale: Scale) -> (usize, u64, usize, [usize; 3]) {
    match scale {
        // About 70 flushes of the R-tree.
        Scale::Small => (200_000, 1 << 20, 20, [10, 25, 25]),
        // About 350 flushes: the paper's regime of hundreds of flushes, where
        // the stack policies' merge schedules (binomial k=4 vs 10) diverge.
        Scale::Medium => (1_000_000, 1 << 20, 30, [10, 40, 40]),
        // About 700 flushes.
        Scale::Full => (2_000_000, 1 << 20, 50, [10, 40, 40]),
    }
}

/// Points per write-throughput sample (a hundredth of the points).
fn series_step(n: usize) -> usize {
    (n / 100).max(1000)
}

/// The policies compared: (label, policy spec). Leveled: 4 L0 components
/// trigger, fanout 10, output files of about one flush.
fn policies(mem: u64) -> Vec<(String, String)> {
    // Each of the two trees (primary, R-tree) gets half the budget; an
    // R-tree flush of points is about a third of its memtable on disk.
    let target = (mem / 6).max(64 << 10);
    let t = format!("{}KB", target >> 10);
    let l1 = format!("{}KB", (target * 4) >> 10);
    let mut v: Vec<(String, String)> = [
        ("binomial(4)", "binomial(4)".to_string()),
        ("binomial(10)", "binomial(10)".to_string()),
        ("tiered(4)", "tiered(4)".to_string()),
        ("tiered(10)", "tiered(10)".to_string()),
        ("concurrent", "concurrent".to_string()),
        ("prefix", "prefix".to_string()),
    ]
    .into_iter()
    .map(|(a, b)| (a.to_string(), b))
    .collect();
    for part in ["size", "str", "rstar_grove"] {
        v.push((
            format!("leveled-{part}"),
            format!("leveled(4,10,{t},{l1},{part})"),
        ));
    }
    v
}

/// The configurations: every policy with the Hilbert and the Simple
/// comparator, and size-partitioned leveled with Z-order:
/// (label, policy spec, order).
fn configs(mem: u64) -> Vec<(String, String, RtreeOrder)> {
    let mut v = Vec::new();
    for (label, spec) in policies(mem) {
        for (o, order) in [
            ("hilbert", RtreeOrder::Hilbert),
            ("simple", RtreeOrder::Simple),
        ] {
            v.push((format!("{label} {o}"), spec.clone(), order));
        }
        if label == "leveled-size" {
            v.push((format!("{label} zorder"), spec, RtreeOrder::Zorder));
        }
    }
    v
}

/// Uniformly random points over the world (the paper's random data set).
fn uniform(n: usize, seed: u64) -> (Vec<f64>, Vec<f64>) {
    let mut rng = SmallRng::seed_from_u64(seed ^ 0x5eed_0002);
    let lon = (0..n).map(|_| rng.random_range(-180.0..180.0)).collect();
    let lat = (0..n).map(|_| rng.random_range(-90.0..90.0)).collect();
    (lon, lat)
}

/// The paper's query boxes of selectivity 10^-σ: `count` boxes of
/// 360·10^-σ x 180·10^-σ degrees centred on points among the first
/// `inserted` (so every query finds at least its centre), clipped to the
/// world.
fn sigma_boxes(
    lon: &[f64],
    lat: &[f64],
    inserted: usize,
    count: usize,
    sigma: i32,
    rng: &mut SmallRng,
) -> Vec<[f64; 4]> {
    let (hw, hh) = (180.0 * 10f64.powi(-sigma), 90.0 * 10f64.powi(-sigma));
    (0..count)
        .map(|_| {
            let i = rng.random_range(0..inserted.max(1));
            [
                (lon[i] - hw).max(-180.0),
                (lat[i] - hh).max(-90.0),
                (lon[i] + hw).min(180.0),
                (lat[i] + hh).min(90.0),
            ]
        })
        .collect()
}

/// Writes (run 0) or appends (later runs) the write-throughput series to
/// `<out>/spatial-policies/series.csv` (a subdirectory: `report` reads every
/// CSV of `<out>` as a results file).
fn write_series(ctx: &Ctx, scale: Scale, lines: &[String]) -> Result<()> {
    let dir = ctx.out.join("spatial-policies");
    std::fs::create_dir_all(&dir)?;
    let path = dir.join("series.csv");
    let mut f = if ctx.run == 0 {
        let mut f = std::fs::File::create(&path)?;
        writeln!(f, "# workload=spatial-policies scale={scale}")?;
        writeln!(f, "run,data,system,points,seconds,points_per_s")?;
        f
    } else {
        std::fs::OpenOptions::new().append(true).open(&path)?
    };
    for l in lines {
        writeln!(f, "{l}")?;
    }
    eprintln!("wrote {}", path.display());
    Ok(())
}

/// Sums over the read phases for one σ.
#[derive(Default, Clone, Copy)]
struct QueryTotals {
    queries: u64,
    secs: f64,
    hits: u64,
    components: u64,
    blocks: u64,
    z_pruned: u64,
}

fn run_queries(
    ds: &std::sync::Arc<silt::Dataset>,
    qs: &[[f64; 4]],
    tot: &mut QueryTotals,
) -> Result<()> {
    let o = QueryOptions {
        index_only: true,
        limit: None,
    };
    let t = Instant::now();
    for b in qs {
        let q = Query::Intersects(Geometry::rect(b[0], b[1], b[2], b[3]));
        let mut r = ds.query("loc", &q, o).context("Silt R-tree query")?;
        for h in r.by_ref() {
            h.context("Silt R-tree query")?;
            tot.hits += 1;
        }
        let s = r.stats();
        tot.components += s.components;
        tot.blocks += s.blocks;
        tot.z_pruned += s.z_pruned;
    }
    tot.secs += t.elapsed().as_secs_f64();
    tot.queries += qs.len() as u64;
    Ok(())
}

impl Workload for SpatialPolicies {
    fn name(&self) -> &'static str {
        "spatial-policies"
    }

    fn description(&self) -> &'static str {
        "seed 002: merge policies for an LSM R-tree (binomial, tiered, concurrent, prefix, leveled with size/STR/R*-Grove partitioning) x Hilbert/Simple comparator (+ Z-order leveled): write amplification, write throughput over time, interleaved box queries of selectivity 10^-3..10^-5"
    }

    fn explanation(&self) -> &'static str {
        "Seed 002's experiment at small scale. Two point data sets: city-clustered (the GeoNames \
         generator of spatial-rtree, standing in for the paper's OSM extract) and uniformly random \
         over the world. Each configuration gets a fresh database with one dataset pts(id int \
         primary key, loc point) and an R-tree index on loc under that merge policy and comparator \
         (the R-tree's entry order: hilbert = Hilbert value of the point, simple = x then y, zorder \
         = Morton code; the primary keeps the default prefix policy). The paper's interleaved \
         workload: a load phase of half the points, then rounds of an insert phase (an equal share \
         of the rest) and a read phase of index-only intersection queries with selectivity \
         10^-σ, σ = 3, 4, 5 (boxes 360·10^-σ by 180·10^-σ degrees centred on a point inserted \
         before); points are written with write_batch of 1,000 (insert mode, Durability::None), \
         merges run in the background throughout, and the run waits for them at the end. \
         Reported per configuration and data set: write throughput (points over ingest time, read \
         phases excluded; the series file spatial-policies/series.csv has it per hundredth of the \
         points), the R-tree's write amplification (bytes flushed + merged / bytes of index \
         entries written), merges, components at the end, and per σ the mean latency, results, \
         and the components and leaf blocks each query touched (read amplification; a component \
         whose packed R-tree does not meet the box costs a look at its top level and is not \
         counted). Every configuration must return the same hits, or the run fails. Leveled: \
         leveled(4,10,target,4*target,part) with target about one R-tree flush. The paper (Table \
         3, OSM) measured write amplification binomial(4) 9.55, binomial(10) 6.05, tiered(4) \
         9.64, tiered(10) 4.62, concurrent 6.58, leveled 16.9-23.7, and found binomial best almost \
         everywhere, the Hilbert comparator faster at σ = 3 and the Simple one at σ = 5, and \
         leveled behind the stack policies for most spatial workloads."
    }

    fn durability(&self) -> &'static str {
        "WAL on, no fsync per commit (Silt Durability::None)"
    }

    fn run(&self, scale: Scale, ctx: &Ctx) -> Result<Vec<ResultRow>> {
        let (n, mem, rounds, per_round) = sizes(scale);
        let sp = spinner(format!("generating {} points twice", fmt_num(n as f64)));
        let params = GenParams {
            text_len: (0, 0),
            ..GEN
        };
        let cities = cities()?;
        let clustered = TweetData::generate(n, ctx.seed, &cities, &params);
        let (ulon, ulat) = uniform(n, ctx.seed);
        sp.finish_and_clear();
        let sets: [(&str, &[f64], &[f64]); 2] = [
            ("clustered", &clustered.lon, &clustered.lat),
            ("uniform", &ulon, &ulat),
        ];
        let mut rows = Vec::new();
        rows.push(ResultRow::stat(
            "data",
            "points per data set",
            "count",
            n as f64,
        ));
        rows.push(ResultRow::stat(
            "data",
            "insert+read rounds after the load phase",
            "count",
            rounds as f64,
        ));
        let load = n / 2;
        // End of each phase: the load phase, then one insert phase per round.
        let ends: Vec<usize> = std::iter::once(load)
            .chain((1..=rounds).map(|r| load + (n - load) * r / rounds))
            .collect();
        let step = series_step(n);
        let mut series = Vec::new();
        for (set, lon, lat) in sets {
            // The read phases' boxes: [round][σ].
            let mut qrng = SmallRng::seed_from_u64(ctx.seed ^ 0xb0c5);
            let reads: Vec<Vec<Vec<[f64; 4]>>> = ends[1..]
                .iter()
                .map(|&inserted| {
                    SIGMAS
                        .iter()
                        .zip(per_round)
                        .map(|(&sigma, count)| {
                            sigma_boxes(lon, lat, inserted, count, sigma, &mut qrng)
                        })
                        .collect()
                })
                .collect();
            let mut reference: Option<(String, Vec<u64>)> = None;
            let mut order = configs(mem);
            let len = order.len();
            order.rotate_left(ctx.run % len);
            for (label, spec, rorder) in order {
                let system = format!("{label} {set}");
                let want = |s: &str| {
                    ctx.systems.as_ref().is_none_or(|l| {
                        l.iter().any(|x| {
                            x.eq_ignore_ascii_case(s)
                                || x.eq_ignore_ascii_case(&label)
                                || label
                                    .split(' ')
                                    .next()
                                    .is_some_and(|p| x.eq_ignore_ascii_case(p))
                                || x.eq_ignore_ascii_case("silt")
                        })
                    })
                };
                if !want(&system) {
                    continue;
                }
                let policy =
                    MergePolicy::parse(&spec).map_err(|e| anyhow::anyhow!("policy {spec}: {e}"))?;
                ctx.note(format!(
                    "{system}: Silt, dataset pts(id int primary key, loc point), R-tree loc with merge policy {policy} and {rorder:?} order, memory budget {} MiB, write_batch of 1,000, Durability::None",
                    mem >> 20
                ));
                let dir =
                    ScratchDir::new(&ctx.scratch, &system.replace([' ', '(', ')', ','], "_"))?;
                let db = Database::open(
                    dir.path(),
                    DbOptions {
                        durability: Durability::None,
                        block_cache_bytes: 256 << 20,
                        ..Default::default()
                    },
                )
                .context("opening Silt")?;
                db.create_dataset(
                    DatasetDef::new("pts", &["id"])
                        .field("id", FieldType::Int)
                        .field("loc", FieldType::Point)
                        .memory_budget(mem),
                )?;
                let mut def = IndexDef::rtree("loc", "loc").policy(policy);
                def.options.order = Some(rorder);
                db.create_index("pts", def)?;
                let ds = db.dataset("pts")?;
                let pb = progress(n as u64, format!("{system}: ingest"));
                let mut totals = [QueryTotals::default(); 3];
                let mut ingest_s = 0.0;
                let mut mark = (0usize, 0.0f64);
                let mut batch = Vec::with_capacity(1000);
                let mut i = 0usize;
                for (phase, &end) in ends.iter().enumerate() {
                    let t = Instant::now();
                    let phase_start = ingest_s;
                    while i < end {
                        batch.push(Value::Object(vec![
                            ("id".into(), Value::Int(i as i64)),
                            (
                                "loc".into(),
                                Value::Geometry(Geometry::point(lon[i], lat[i])),
                            ),
                        ]));
                        i += 1;
                        if batch.len() == 1000 || i == end {
                            let opts = BatchOptions {
                                mode: WriteMode::Insert,
                                ..Default::default()
                            };
                            ds.write_batch(std::mem::take(&mut batch), opts)?;
                            pb.set_position(i as u64);
                            if i - mark.0 >= step || i == n {
                                let now = phase_start + t.elapsed().as_secs_f64();
                                series.push(format!(
                                    "{},{set},{label},{i},{now:.4},{:.1}",
                                    ctx.run,
                                    (i - mark.0) as f64 / (now - mark.1).max(1e-9)
                                ));
                                mark = (i, now);
                            }
                        }
                    }
                    ingest_s = phase_start + t.elapsed().as_secs_f64();
                    if phase > 0 {
                        for (k, qs) in reads[phase - 1].iter().enumerate() {
                            run_queries(&ds, qs, &mut totals[k])?;
                        }
                    }
                }
                pb.set_message(format!("{system}: settling"));
                let t = Instant::now();
                ds.flush()?;
                db.wait_idle()?;
                let settle_s = ingest_s + t.elapsed().as_secs_f64();
                pb.finish_and_clear();
                let stats = ds.stats();
                let loc = stats
                    .indexes
                    .iter()
                    .find(|t| t.name.ends_with("/loc"))
                    .context("no loc tree in the dataset stats")?;
                rows.push(ResultRow::measure(
                    &system,
                    "write throughput",
                    "points/s",
                    n as f64 / ingest_s,
                ));
                rows.push(ResultRow::stat(
                    &system,
                    "ingest+settle",
                    "points/s",
                    n as f64 / settle_s,
                ));
                rows.push(ResultRow::measure(
                    &system,
                    "R-tree write amplification",
                    "x",
                    loc.write_amplification,
                ));
                rows.push(ResultRow::stat(
                    &system,
                    "R-tree merges",
                    "count",
                    loc.merges as f64,
                ));
                rows.push(ResultRow::stat(
                    &system,
                    "R-tree flushes",
                    "count",
                    loc.flushes as f64,
                ));
                rows.push(ResultRow::stat(
                    &system,
                    "R-tree components",
                    "count",
                    loc.components.len() as f64,
                ));
                rows.push(ResultRow::stat(
                    &system,
                    "R-tree levels",
                    "count",
                    loc.components
                        .iter()
                        .map(|c| c.level)
                        .collect::<std::collections::BTreeSet<_>>()
                        .len() as f64,
                ));
                let mut hits = Vec::new();
                for (sigma, tot) in SIGMAS.iter().zip(&totals) {
                    let q = tot.queries.max(1) as f64;
                    let what = format!("sigma={sigma}");
                    rows.push(ResultRow::measure(
                        &system,
                        &format!("{what} mean"),
                        "us",
                        tot.secs * 1e6 / q,
                    ));
                    rows.push(ResultRow::stat(
                        &system,
                        &format!("{what} results"),
                        "results",
                        tot.hits as f64 / q,
                    ));
                    rows.push(ResultRow::measure(
                        &system,
                        &format!("{what} components touched"),
                        "count",
                        tot.components as f64 / q,
                    ));
                    rows.push(ResultRow::stat(
                        &system,
                        &format!("{what} leaf blocks"),
                        "count",
                        tot.blocks as f64 / q,
                    ));
                    if rorder == RtreeOrder::Zorder {
                        rows.push(ResultRow::stat(
                            &system,
                            &format!("{what} components skipped by Z range"),
                            "count",
                            tot.z_pruned as f64 / q,
                        ));
                    }
                    hits.push(tot.hits);
                }
                // Every configuration must find the same points.
                match &reference {
                    None => reference = Some((system.clone(), hits)),
                    Some((who, want)) => {
                        if *want != hits {
                            bail!(
                                "{system} found {hits:?} hits (σ = 3, 4, 5) but {who} found {want:?}: a merge policy or order lost or duplicated entries"
                            );
                        }
                    }
                }
                drop(ds);
                db.close()?;
            }
        }
        write_series(ctx, scale, &series)?;
        Ok(rows)
    }
}
