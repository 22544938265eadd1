//! Seed 000 ch. 4: five LSM spatial indexes for points on the same data —
//! R-tree, DHB-tree, DHVB-tree, SHB-tree and SIF — each in its own
//! database: ingest rate, index size, and radius and box queries through
//! the index-only and the validated (non-index-only) paths.

use std::time::Instant;

use anyhow::{Context, Result, bail};
use rand::{Rng, SeedableRng, rngs::SmallRng};
use silt::{
    BatchOptions, Database, DatasetDef, DbOptions, Durability, FieldType, Geometry, IndexDef,
    IndexKind, Query, QueryOptions, Value, WriteMode,
};

use super::{Ctx, Scale, Workload};
use crate::results::ResultRow;
use crate::spatial::data::{GEN, TweetData, cities};
use crate::util::{ScratchDir, dir_size, fmt_num, progress, spinner};

pub struct SpatialIndexes;

const KINDS: [&str; 5] = ["rtree", "dhb", "dhvb", "shb", "sif"];
/// Radii in degrees, as seed 000 Table 4.4 (1e-5 is below a metre: skipped).
const RADII_DEG: [f64; 4] = [1e-4, 1e-3, 1e-2, 1e-1];
/// Metres per degree of a great circle (Silt's sphere).
const M_PER_DEG: f64 = 111_195.08;

fn sizes(scale: Scale) -> (usize, usize) {
    match scale {
        Scale::Small => (200_000, 300),
        Scale::Medium | Scale::Full => (1_000_000, 1_000),
    }
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
        "seed 000 ch. 4: R-tree vs DHB vs DHVB vs SHB vs SIF on tweets at city-clustered points: ingest, index size, radius and box queries (index-only and validated)"
    }

    fn explanation(&self) -> &'static str {
        "Seed 000's comparison of five LSM spatial indexes for points, scaled down. The tweets of \
         spatial-rtree (about 500 bytes, a point clustered around GeoNames cities) go into a fresh \
         database per index kind: dataset tweets(id int primary key, user_id, ts, loc point, text) \
         with one secondary index on loc of that kind under its default options (R-tree: Hilbert \
         order, antimatter; SHB and SIF: the default grid), write_batch of 1,000 records (insert \
         mode, Durability::None), then a wait for merges. Reported: ingest rate, the index's bytes \
         on disk after settling, and per query radius (1e-4 to 1e-1 degree, as metres on the \
         sphere: Query::WithinDistance) and for boxes of the same half-sides, the mean latency of \
         index-only and of validated queries (records fetched from the primary and re-checked) \
         centred on data points, with the mean result count. All kinds must return the same \
         results. Paper (1.6 B points, 000 Tables 4.3 and 4.4): sizes GB DHB 46.2, DHVB 59.7, \
         R-tree 47.7, SHB 62.6, SIF 353.7; build minutes 25.7 / 18.0 / 17.1 / 17.1 / 46.6; the \
         R-tree answered best overall, SIF worst, DHVB ingested fastest."
    }

    fn durability(&self) -> &'static str {
        "WAL on, no fsync per commit (Silt Durability::None)"
    }

    fn run(&self, scale: Scale, ctx: &Ctx) -> Result<Vec<ResultRow>> {
        let (n, nq) = sizes(scale);
        let sp = spinner(format!("generating {} tweets", fmt_num(n as f64)));
        let cities = cities()?;
        let data = TweetData::generate_with(n, ctx.seed, &cities, &GEN, &ctx.data);
        sp.finish_and_clear();
        let mut rng = SmallRng::seed_from_u64(ctx.seed ^ 0x0000_00c4);
        let centres: Vec<usize> = (0..nq).map(|_| rng.random_range(0..n)).collect();
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
                DatasetDef::new("tweets", &["id"])
                    .field("id", FieldType::Int)
                    .field("user_id", FieldType::Int)
                    .field("ts", FieldType::Int)
                    .field("loc", FieldType::Point)
                    .field("text", FieldType::String)
                    .memory_budget(64 << 20),
            )?;
            let mut def = IndexDef::rtree("loc", "loc");
            def.kind = kind;
            db.create_index("tweets", def)
                .with_context(|| format!("creating a {name} index"))?;
            let ds = db.dataset("tweets")?;
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
            drop(ds);
            db.close()?;
        }
        Ok(rows)
    }
}
