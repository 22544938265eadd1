//! Seed 000 ch. 4's dynamic workloads for the five LSM spatial indexes:
//! (1) ingest capacity with no queries, and (2) index-only radius queries
//! under concurrent ingest, the writer sleeping 1 ms after every 1, 10, 100
//! or 1,000 records (the paper's four ingest rates), both from an empty
//! database so queries meet memtables, flushes and merges.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::Result;
use rand::{Rng, SeedableRng, rngs::SmallRng};
use silt::{
    BatchOptions, FieldType, Geometry, IndexDef, IndexKind, Query, QueryOptions, Value, WriteMode,
};

use super::spatial_indexes::M_PER_DEG;
use super::{Ctx, Scale, Workload};
use crate::results::ResultRow;
use crate::spatial::data::{GEN, TweetData, cities};
use crate::util::{ScratchDir, fmt_num, spinner};

pub struct SpatialIndexesDynamic;

const KINDS: [&str; 5] = ["rtree", "dhb", "dhvb", "shb", "sif"];
/// Select radii in degrees, alternated by the query thread (Step 4).
const RADII_DEG: [f64; 4] = [1e-4, 1e-3, 1e-2, 1e-1];
/// Records written before each 1 ms sleep; `None` = no sleep and no
/// queries (dynamic workload 1).
const SETTINGS: [Option<usize>; 5] = [None, Some(1), Some(10), Some(100), Some(1000)];

/// Records generated (cycled with fresh ids), seconds per setting.
fn sizes(scale: Scale) -> (usize, f64) {
    match scale {
        Scale::Small => (200_000, 4.0),
        Scale::Medium | Scale::Full => (500_000, 15.0),
    }
}

fn label(s: Option<usize>) -> String {
    match s {
        None => "ingest only".into(),
        Some(k) => format!("sleep 1ms/{k}"),
    }
}

impl Workload for SpatialIndexesDynamic {
    fn name(&self) -> &'static str {
        "spatial-indexes-dynamic"
    }

    fn description(&self) -> &'static str {
        "seed 000 ch. 4 dynamic workloads: ingest capacity per spatial index kind, and index-only radius queries under concurrent ingest at four ingest rates"
    }

    fn explanation(&self) -> &'static str {
        "Seed 000's dynamic workloads 1 and 2 on one process. For each index kind (R-tree, DHB, \
         DHVB, SHB, SIF; default options) and setting, a fresh database with the tweets dataset of \
         spatial-indexes and one index on loc. 'ingest only' (workload 1): one writer thread, \
         write_batch of 1,000, no queries, for a fixed time. 'sleep 1ms/k' (workload 2): the writer \
         writes k records (one write_batch) and sleeps 1 ms, k = 1, 10, 100, 1000 as in the paper, \
         while one query thread issues index-only radius queries alternating 1e-4, 1e-3, 1e-2, 1e-1 \
         degree, centred on a random record already written, for the same time. Records cycle \
         through the generated tweets with fresh ids. Reported per kind and setting: the ingest \
         rate reached, queries per second and the mean query latency (also per radius). Results \
         depend on timing, so kinds are not cross-checked here (spatial-indexes does that). \
         Paper (8 nodes, 1 h): DHVB had the highest ingest capacity, the R-tree the best query \
         response times under concurrent ingest, SIF the worst."
    }

    fn durability(&self) -> &'static str {
        "WAL on, no fsync per commit (Silt Durability::None)"
    }

    fn run(&self, scale: Scale, ctx: &Ctx) -> Result<Vec<ResultRow>> {
        let (n, secs) = sizes(scale);
        let sp = spinner(format!("generating {} tweets", fmt_num(n as f64)));
        let cities = cities()?;
        let data = TweetData::generate_with(n, ctx.seed, &cities, &GEN, &ctx.data);
        sp.finish_and_clear();
        let mut rows = vec![
            ResultRow::stat("data", "records generated", "count", n as f64),
            ResultRow::stat("data", "seconds per setting", "s", secs),
        ];
        let mut kinds: Vec<&str> = KINDS.to_vec();
        let len = kinds.len();
        kinds.rotate_left(ctx.run % len);
        for name in kinds {
            let kind =
                IndexKind::parse(name).map_err(|e| anyhow::anyhow!("index kind {name}: {e}"))?;
            if let Some(list) = &ctx.systems
                && !list
                    .iter()
                    .any(|s| s.eq_ignore_ascii_case(name) || s.eq_ignore_ascii_case("silt"))
            {
                continue;
            }
            ctx.note(format!(
                "{name}: Silt, dataset tweets with one {name} index on loc (default options), memory budget 64 MiB, block cache 256 MiB, Durability::None; a fresh database per setting"
            ));
            for setting in SETTINGS {
                let sp = spinner(format!("{name}: {} for {secs} s", label(setting)));
                let dir =
                    ScratchDir::new(&ctx.scratch, &format!("{name}-{}", setting.unwrap_or(0)))?;
                let mut def = IndexDef::rtree("loc", "loc");
                def.kind = kind;
                let (db, ds) =
                    super::spatial_indexes::open_tweets(dir.path(), FieldType::Point, def, name)?;
                let written = AtomicUsize::new(0);
                let stop = AtomicBool::new(false);
                let deadline = Duration::from_secs_f64(secs);
                let seed = ctx.seed;
                let (ingest, queries) = std::thread::scope(|s| -> Result<_> {
                    let writer = s.spawn(|| -> Result<(usize, f64)> {
                        let batch = setting.unwrap_or(1000);
                        let t = Instant::now();
                        let mut i = 0usize;
                        while t.elapsed() < deadline {
                            let recs = (i..i + batch)
                                .map(|j| {
                                    let d = j % n;
                                    Value::Object(vec![
                                        ("id".into(), Value::Int(j as i64)),
                                        ("user_id".into(), Value::Int(data.user_id[d])),
                                        ("ts".into(), Value::Int(data.ts[d])),
                                        (
                                            "loc".into(),
                                            Value::Geometry(Geometry::point(
                                                data.lon[d],
                                                data.lat[d],
                                            )),
                                        ),
                                        ("text".into(), Value::String(data.text(d).to_string())),
                                    ])
                                })
                                .collect();
                            let opts = BatchOptions {
                                mode: WriteMode::Insert,
                                ..Default::default()
                            };
                            ds.write_batch(recs, opts)?;
                            i += batch;
                            written.store(i, Ordering::Release);
                            if setting.is_some() {
                                std::thread::sleep(Duration::from_millis(1));
                            }
                        }
                        Ok((i, t.elapsed().as_secs_f64()))
                    });
                    let reader = setting.map(|_| {
                        s.spawn(|| -> Result<(Vec<(u64, f64)>, f64)> {
                            let mut rng = SmallRng::seed_from_u64(seed ^ 0xd1_0002);
                            let o = QueryOptions {
                                index_only: true,
                                limit: None,
                            };
                            let mut per = vec![(0u64, 0f64); RADII_DEG.len()];
                            let t = Instant::now();
                            let mut q = 0usize;
                            while !stop.load(Ordering::Acquire) {
                                let w = written.load(Ordering::Acquire);
                                if w == 0 {
                                    std::thread::sleep(Duration::from_millis(1));
                                    continue;
                                }
                                let d = rng.random_range(0..w) % n;
                                let ri = q % RADII_DEG.len();
                                let query = Query::WithinDistance {
                                    lon: data.lon[d],
                                    lat: data.lat[d],
                                    metres: RADII_DEG[ri] * M_PER_DEG,
                                };
                                let tq = Instant::now();
                                for h in ds.query("loc", &query, o)? {
                                    h?;
                                }
                                per[ri].0 += 1;
                                per[ri].1 += tq.elapsed().as_secs_f64();
                                q += 1;
                            }
                            Ok((per, t.elapsed().as_secs_f64()))
                        })
                    });
                    let w = writer.join();
                    stop.store(true, Ordering::Release);
                    let r = reader.map(|h| h.join());
                    let ingest = w.map_err(|_| anyhow::anyhow!("the writer thread panicked"))??;
                    let queries = match r {
                        None => None,
                        Some(j) => {
                            Some(j.map_err(|_| anyhow::anyhow!("the query thread panicked"))??)
                        }
                    };
                    Ok((ingest, queries))
                })?;
                sp.finish_and_clear();
                let l = label(setting);
                rows.push(ResultRow::measure(
                    name,
                    &format!("ingest {l}"),
                    "records/s",
                    ingest.0 as f64 / ingest.1,
                ));
                if let Some((per, qs)) = queries {
                    let total: u64 = per.iter().map(|p| p.0).sum();
                    let time: f64 = per.iter().map(|p| p.1).sum();
                    rows.push(ResultRow::measure(
                        name,
                        &format!("queries {l}"),
                        "queries/s",
                        total as f64 / qs,
                    ));
                    rows.push(ResultRow::measure(
                        name,
                        &format!("query mean {l}"),
                        "us",
                        time * 1e6 / total.max(1) as f64,
                    ));
                    for (r, p) in RADII_DEG.iter().zip(&per) {
                        rows.push(ResultRow::stat(
                            name,
                            &format!("radius {r:e} deg mean {l}"),
                            "us",
                            p.1 * 1e6 / p.0.max(1) as f64,
                        ));
                    }
                }
                drop(ds);
                db.close()?;
            }
        }
        Ok(rows)
    }
}
