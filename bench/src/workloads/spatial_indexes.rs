//! Seed 000 ch. 4: five LSM spatial indexes for points on the same data —
//! R-tree, DHB-tree, DHVB-tree, SHB-tree and SIF — each in its own
//! database: ingest rate, index size, and radius and box queries through
//! the index-only and the validated (non-index-only) paths, and the
//! index nested-loop spatial join (100 probe points per join) by radius.

use std::time::Instant;

use anyhow::{Context, Result, bail};
use rand::{Rng, SeedableRng, rngs::SmallRng};
use silt::{
    BatchOptions, Database, DatasetDef, DbOptions, Durability, FieldType, Geometry, IndexDef,
    IndexKind, JoinPredicate, Query, QueryOptions, Value, WriteMode,
};

use super::{Ctx, Scale, Workload};
use crate::results::ResultRow;
use crate::spatial::data::{GEN, TweetData, cities};
use crate::util::{ScratchDir, dir_size, fmt_num, progress, spinner};

pub struct SpatialIndexes;

const KINDS: [&str; 5] = ["rtree", "dhb", "dhvb", "shb", "sif"];
/// Radii in degrees, as seed 000 Table 4.4 (1e-5 degree is about 1.1 m on
/// the sphere: such a circle around a data point holds that point alone).
const RADII_DEG: [f64; 5] = [1e-5, 1e-4, 1e-3, 1e-2, 1e-1];
/// Join radii in degrees (Table 4.4's join rows; 1e-1 was left out by the
/// paper).
pub(crate) const JOIN_RADII_DEG: [f64; 4] = [1e-5, 1e-4, 1e-3, 1e-2];
/// Probe points per join (the paper's 100 join seed tweets).
pub(crate) const JOIN_PROBES: usize = 100;
/// Metres per degree of a great circle (Silt's sphere).
pub(crate) const M_PER_DEG: f64 = 111_195.08;

/// Records, select queries per radius, joins per radius.
fn sizes(scale: Scale) -> (usize, usize, usize) {
    match scale {
        Scale::Small => (200_000, 2_000, 50),
        Scale::Medium | Scale::Full => (1_000_000, 5_000, 100),
    }
}

/// The probe sets of `joins` joins: `JOIN_PROBES` record indexes each, drawn
/// from a pool of 10,000 query seed records (the paper's QuerySeedTweet).
pub(crate) fn join_probes(n: usize, joins: usize, seed: u64) -> Vec<Vec<usize>> {
    let mut rng = SmallRng::seed_from_u64(seed ^ 0x0000_001a);
    let pool: Vec<usize> = (0..10_000.min(n)).map(|_| rng.random_range(0..n)).collect();
    (0..joins)
        .map(|_| {
            (0..JOIN_PROBES)
                .map(|_| pool[rng.random_range(0..pool.len())])
                .collect()
        })
        .collect()
}

/// Runs `joins` index nested-loop joins (within `metres` of each probe) on
/// index `loc`: (mean ms per join, total results, mean candidates per join).
pub(crate) fn run_joins(
    ds: &std::sync::Arc<silt::Dataset>,
    probes: &[Vec<usize>],
    lon: &[f64],
    lat: &[f64],
    id: impl Fn(usize) -> i64,
    metres: f64,
    o: QueryOptions,
) -> Result<(f64, u64, f64)> {
    let t = Instant::now();
    let (mut hits, mut cands) = (0u64, 0u64);
    for set in probes {
        let it = set
            .iter()
            .map(|&c| (Value::Int(id(c)), Geometry::point(lon[c], lat[c])));
        let mut r = ds
            .spatial_join("loc", it, JoinPredicate::WithinDistance(metres), o)
            .context("spatial join")?;
        for h in r.by_ref() {
            h.context("spatial join")?;
            hits += 1;
        }
        cands += r.stats().candidates;
    }
    let n = probes.len().max(1) as f64;
    Ok((t.elapsed().as_secs_f64() * 1e3 / n, hits, cands as f64 / n))
}

fn record(d: &TweetData, i: usize) -> Value {
    Value::Object(vec![
        ("id".into(), Value::Int(d.id(i))),
        ("user_id".into(), Value::Int(d.user_id[i])),
        ("ts".into(), Value::Int(d.ts[i])),
        (
            "loc".into(),
            Value::Geometry(Geometry::point(d.lon[i], d.lat[i])),
        ),
        ("text".into(), Value::String(d.text(i).to_string())),
    ])
}

impl Workload for SpatialIndexes {
    fn name(&self) -> &'static str {
        "spatial-indexes"
    }

    fn description(&self) -> &'static str {
        "seed 000 ch. 4: R-tree vs DHB vs DHVB vs SHB vs SIF on tweets at city-clustered points: ingest, index size, radius and box queries and index nested-loop joins (index-only and validated)"
    }

    fn explanation(&self) -> &'static str {
        "Seed 000's comparison of five LSM spatial indexes for points, scaled down. The tweets of \
         spatial-rtree (about 500 bytes, a point clustered around GeoNames cities) go into a fresh \
         database per index kind: dataset tweets(id int primary key, user_id, ts, loc point, text) \
         with one secondary index on loc of that kind under its default options (R-tree: Hilbert \
         order, antimatter; SHB and SIF: the default grid), write_batch of 1,000 records (insert \
         mode, Durability::None), then a wait for merges. Reported: ingest rate, the index's bytes \
         on disk after settling, and per query radius (1e-5 to 1e-1 degree, as metres on the \
         sphere: Query::WithinDistance) and for boxes of the same half-sides, the mean latency of \
         index-only and of validated queries (records fetched from the primary and re-checked) \
         centred on data points, with the mean result count; and index nested-loop joins \
         (Dataset::spatial_join, within-distance) of 100 probe points drawn from 10,000 query seed \
         records, at radii 1e-5 to 1e-2 degree, mean ms per join. All kinds must return the same \
         results. Paper (1.6 B points, 000 Tables 4.3 and 4.4): sizes GB DHB 46.2, DHVB 59.7, \
         R-tree 47.7, SHB 62.6, SIF 353.7; build minutes 25.7 / 18.0 / 17.1 / 17.1 / 46.6; the \
         R-tree answered best overall, SIF worst, DHVB ingested fastest."
    }

    fn durability(&self) -> &'static str {
        "WAL on, no fsync per commit (Silt Durability::None)"
    }

    fn run(&self, scale: Scale, ctx: &Ctx) -> Result<Vec<ResultRow>> {
        let (n, nq, nj) = sizes(scale);
        let sp = spinner(format!("generating {} tweets", fmt_num(n as f64)));
        let cities = cities()?;
        let data = TweetData::generate_with(n, ctx.seed, &cities, &GEN, &ctx.data);
        sp.finish_and_clear();
        let mut rng = SmallRng::seed_from_u64(ctx.seed ^ 0x0000_00c4);
        let centres: Vec<usize> = (0..nq).map(|_| rng.random_range(0..n)).collect();
        let probes = join_probes(n, nj, ctx.seed);
        let mut rows = vec![ResultRow::stat("data", "records", "count", n as f64)];
        // (query label) -> total hits of the first kind, for the cross-check.
        let mut reference: Vec<(String, u64)> = Vec::new();
        let mut kinds: Vec<&str> = KINDS.to_vec();
        let len = kinds.len();
        kinds.rotate_left(ctx.run % len);
        for name in kinds {
            let Ok(kind) = IndexKind::parse(name) else {
                ctx.note(format!(
                    "{name}: skipped (this Silt has no such index kind)"
                ));
                continue;
            };
            if let Some(list) = &ctx.systems
                && !list
                    .iter()
                    .any(|s| s.eq_ignore_ascii_case(name) || s.eq_ignore_ascii_case("silt"))
            {
                continue;
            }
            ctx.note(format!(
                "{name}: Silt, dataset tweets with one {name} index on loc (default options), memory budget 64 MiB, block cache 256 MiB, write_batch of 1,000, Durability::None"
            ));
            let dir = ScratchDir::new(&ctx.scratch, name)?;
            let mut def = IndexDef::rtree("loc", "loc");
            def.kind = kind;
            let (db, ds) = open_tweets(dir.path(), FieldType::Point, def, name)?;
            let pb = progress(n as u64, format!("{name}: ingest"));
            let t = Instant::now();
            let mut start = 0;
            while start < n {
                let end = (start + 1000).min(n);
                let recs = (start..end).map(|i| record(&data, i)).collect();
                let opts = BatchOptions {
                    mode: WriteMode::Insert,
                    ..Default::default()
                };
                ds.write_batch(recs, opts)?;
                pb.set_position(end as u64);
                start = end;
            }
            let ingest_s = t.elapsed().as_secs_f64();
            ds.flush()?;
            db.wait_idle()?;
            let settle_s = t.elapsed().as_secs_f64();
            pb.finish_and_clear();
            rows.push(ResultRow::measure(
                name,
                "ingest",
                "records/s",
                n as f64 / ingest_s,
            ));
            rows.push(ResultRow::measure(
                name,
                "ingest+settle",
                "records/s",
                n as f64 / settle_s,
            ));
            let index_dir = dir.path().join("tweets");
            let mut index_bytes = 0u64;
            if let Ok(rd) = std::fs::read_dir(&index_dir) {
                for p in rd.flatten() {
                    // Partitions p0, p1, ...: the index's own directory.
                    let d = p.path().join("loc");
                    if d.is_dir() {
                        index_bytes += dir_size(&d)?;
                    }
                }
            }
            if index_bytes == 0 {
                let st = ds.stats();
                index_bytes = st
                    .indexes
                    .iter()
                    .filter(|t| t.name.ends_with("/loc"))
                    .map(|t| t.disk_bytes)
                    .sum();
            }
            rows.push(ResultRow::measure(
                name,
                "index size",
                "MB",
                index_bytes as f64 / 1e6,
            ));
            // Warm-up (the paper's first 500 queries): one unmeasured pass
            // at 1e-2 degree so the first radius does not meet a cold cache.
            let warm = QueryOptions {
                index_only: false,
                limit: None,
            };
            for &c in &centres {
                let q = Query::WithinDistance {
                    lon: data.lon[c],
                    lat: data.lat[c],
                    metres: 1e-2 * M_PER_DEG,
                };
                for h in ds.query("loc", &q, warm)? {
                    h?;
                }
            }
            for r in RADII_DEG {
                for (shape, is_box) in [("radius", false), ("box", true)] {
                    for index_only in [true, false] {
                        let label = format!(
                            "{shape} {r:e} deg {}",
                            if index_only {
                                "index-only"
                            } else {
                                "validated"
                            }
                        );
                        let o = QueryOptions {
                            index_only,
                            limit: None,
                        };
                        let t = Instant::now();
                        let mut hits = 0u64;
                        for &c in &centres {
                            let (x, y) = (data.lon[c], data.lat[c]);
                            let q = if is_box {
                                Query::Intersects(Geometry::rect(
                                    (x - r).max(-180.0),
                                    (y - r).max(-90.0),
                                    (x + r).min(180.0),
                                    (y + r).min(90.0),
                                ))
                            } else {
                                Query::WithinDistance {
                                    lon: x,
                                    lat: y,
                                    metres: r * M_PER_DEG,
                                }
                            };
                            for h in ds.query("loc", &q, o)? {
                                h?;
                                hits += 1;
                            }
                        }
                        let mean = t.elapsed().as_secs_f64() * 1e6 / nq as f64;
                        rows.push(ResultRow::measure(
                            name,
                            &format!("{label} mean"),
                            "us",
                            mean,
                        ));
                        rows.push(ResultRow::stat(
                            name,
                            &format!("{label} results"),
                            "results",
                            hits as f64 / nq as f64,
                        ));
                        match reference.iter().find(|(l, _)| *l == label) {
                            None => reference.push((label, hits)),
                            Some((_, h)) if *h != hits => bail!(
                                "{name} found {hits} results for `{label}` queries, another kind {h}"
                            ),
                            Some(_) => {}
                        }
                    }
                }
            }
            for r in JOIN_RADII_DEG {
                for index_only in [true, false] {
                    let label = format!(
                        "join {r:e} deg {}",
                        if index_only {
                            "index-only"
                        } else {
                            "validated"
                        }
                    );
                    let o = QueryOptions {
                        index_only,
                        limit: None,
                    };
                    let (ms, hits, _) = run_joins(
                        &ds,
                        &probes,
                        &data.lon,
                        &data.lat,
                        |i| data.id(i),
                        r * M_PER_DEG,
                        o,
                    )?;
                    rows.push(ResultRow::measure(name, &format!("{label} mean"), "ms", ms));
                    rows.push(ResultRow::stat(
                        name,
                        &format!("{label} results"),
                        "results",
                        hits as f64 / nj as f64,
                    ));
                    match reference.iter().find(|(l, _)| *l == label) {
                        None => reference.push((label, hits)),
                        Some((_, h)) if *h != hits => bail!(
                            "{name} found {hits} results for `{label}` joins, another kind {h}"
                        ),
                        Some(_) => {}
                    }
                }
            }
            drop(ds);
            db.close()?;
        }
        Ok(rows)
    }
}

/// A fresh Silt database in `dir` with the tweets dataset (`loc` of type
/// `loc_type`; 64 MiB memory budget, 256 MiB block cache, no fsync) and the
/// one index `def` (named `what` in errors): the setup shared by the
/// spatial-indexes workloads.
pub(crate) fn open_tweets(
    dir: &std::path::Path,
    loc_type: FieldType,
    def: IndexDef,
    what: &str,
) -> Result<(Database, std::sync::Arc<silt::Dataset>)> {
    let db = Database::open(
        dir,
        DbOptions {
            durability: Durability::None,
            block_cache_bytes: 256 << 20,
            ..Default::default()
        },
    )
    .context("opening Silt")?;
    db.create_dataset(
        DatasetDef::new("tweets", &["id"])
            .field("id", FieldType::Int)
            .field("user_id", FieldType::Int)
            .field("ts", FieldType::Int)
            .field("loc", loc_type)
            .field("text", FieldType::String)
            .memory_budget(64 << 20),
    )?;
    db.create_index("tweets", def)
        .with_context(|| format!("creating the index of {what}"))?;
    let ds = db.dataset("tweets")?;
    Ok((db, ds))
}
