//! A quick, self-contained look at the R-tree access paths: ingest clustered
//! points, then time small box queries and kNN (used with `perf` to profile).
//! `cargo run --release -p silt --example spatial_probe -- [records] [queries]`
//! Environment: PROBE_COMPACT (also query after a full compaction; `only`:
//! only then),
//! PROBE_BOX (half side of the query boxes, degrees), PROBE_RADIUS (also time
//! circles of this many metres around the boxes' centres), PROBE_ONLY_BOX /
//! PROBE_ONLY_KNN, PROBE_DELETES, PROBE_SLEEP (seconds before ingest, to
//! attach a profiler), PROBE_COMPRESSION (`lz4` default, `none`, `zstd`), PROBE_BLOCK (primary
//! block bytes, default 4096).

use silt::{
    BatchOptions, Database, DatasetDef, DbOptions, Durability, FieldType, Geometry, IndexDef,
    Query, QueryOptions, Value,
};
use std::time::Instant;

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

// `cpu_s`: CPU time of the whole process (all threads: validated queries
// fetch records on the rayon pool), in seconds. Called after `wait_idle`, so
// no flush or merge runs meanwhile.
#[path = "common/cpu.rs"]
mod cpu;
use cpu::process_cpu_s as cpu_s;
use cpu::thread_cpu_s;

fn main() -> silt::Result<()> {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let n = args.first().copied().unwrap_or(200_000);
    let nq = args.get(1).copied().unwrap_or(2_000);
    let dir = std::env::temp_dir().join(format!("silt-probe-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let db = Database::open(
        &dir,
        DbOptions {
            durability: Durability::None,
            block_cache_bytes: 256 << 20,
            ..Default::default()
        },
    )?;
    db.create_dataset(
        DatasetDef::new("t", &["id"])
            .field("id", FieldType::Int)
            .field("loc", FieldType::Point)
            .compression(
                std::env::var("PROBE_COMPRESSION")
                    .ok()
                    .and_then(|c| silt::storage::Compression::parse(&c).ok())
                    .unwrap_or(silt::storage::Compression::Lz4),
            )
            .block_size(
                std::env::var("PROBE_BLOCK")
                    .ok()
                    .and_then(|b| b.parse().ok())
                    .unwrap_or(4096),
            )
            .memory_budget(64 << 20),
    )?;
    db.create_index("t", IndexDef::rtree("loc", "loc"))?;
    let ds = db.dataset("t")?;
    let mut x: u64 = 42;
    let mut rnd = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        (x >> 11) as f64 / (1u64 << 53) as f64
    };
    let cities: Vec<(f64, f64)> = (0..300)
        .map(|_| (rnd() * 340.0 - 170.0, rnd() * 120.0 - 60.0))
        .collect();
    // Tweet-like text: words from a 4,096-word vocabulary, ~400 bytes
    // (compresses about as well as real text; "x" * 400 would not be fair).
    let vocab: Vec<String> = (0..4096)
        .map(|_| {
            let len = 2 + (rnd() * 8.0) as usize;
            (0..len)
                .map(|_| (b'a' + (rnd() * 26.0) as u8) as char)
                .collect()
        })
        .collect();
    let mut pts = Vec::with_capacity(n);
    let t = Instant::now();
    let (w0, p0) = (thread_cpu_s(), cpu_s());
    let mut batch = Vec::new();
    if let Ok(s) = std::env::var("PROBE_SLEEP") {
        std::thread::sleep(std::time::Duration::from_secs(s.parse().unwrap_or(0)));
    }
    for i in 0..n {
        let c = cities[(rnd() * rnd() * cities.len() as f64) as usize];
        let gx = (rnd() + rnd() + rnd() - 1.5) * 0.2;
        let gy = (rnd() + rnd() + rnd() - 1.5) * 0.2;
        let p = (c.0 + gx, c.1 + gy);
        pts.push(p);
        batch.push(Value::Object(vec![
            ("id".into(), Value::Int(i as i64)),
            ("loc".into(), Value::Geometry(Geometry::point(p.0, p.1))),
            (
                "text".into(),
                Value::String({
                    let mut t = String::with_capacity(420);
                    while t.len() < 400 {
                        t.push_str(&vocab[(rnd() * vocab.len() as f64) as usize]);
                        t.push(' ');
                    }
                    t
                }),
            ),
        ]));
        if batch.len() == 1000 {
            ds.write_batch(std::mem::take(&mut batch), BatchOptions::default())?;
            if std::env::var("PROBE_DELETES").is_ok() {
                for j in 0..10 {
                    let victim =
                        ((i as u64).wrapping_mul(2654435761).wrapping_add(j) % (i as u64)) as i64;
                    ds.delete(&[Value::Int(victim)])?;
                }
            }
        }
    }
    ds.write_batch(batch, BatchOptions::default())?;
    eprintln!(
        "ingest {:.0}/s (CPU per record: writer {:.2} us, process {:.2} us)",
        n as f64 / t.elapsed().as_secs_f64(),
        (thread_cpu_s() - w0) * 1e6 / n as f64,
        (cpu_s() - p0) * 1e6 / n as f64
    );
    // PROBE_COMPACT=1: query after ingest, then compact and query again.
    // PROBE_COMPACT=only: query only after the compaction.
    let phases: &[&str] = match std::env::var("PROBE_COMPACT").as_deref() {
        Ok("only") => &["after compaction"],
        Ok(_) => &["after ingest", "after compaction"],
        Err(_) => &["after ingest"],
    };
    let half: f64 = std::env::var("PROBE_BOX")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0.036);
    let radius_m: Option<f64> = std::env::var("PROBE_RADIUS")
        .ok()
        .and_then(|s| s.parse().ok());
    let only_box = std::env::var("PROBE_ONLY_BOX").is_ok();
    let only_knn = std::env::var("PROBE_ONLY_KNN").is_ok();
    let only_index_only = std::env::var("PROBE_INDEX_ONLY").is_ok();
    for phase in phases {
        db.wait_idle()?;
        if *phase == "after compaction" {
            ds.compact()?;
        }
        eprintln!("-- {phase}");
        for index_only in [false, true] {
            let skip = if only_index_only {
                !index_only
            } else {
                (only_box || only_knn) && index_only != only_knn
            };
            if skip {
                continue;
            }
            let o = QueryOptions {
                index_only,
                limit: None,
            };
            // Time `count` queries made around the probe points; print the
            // time, CPU and hits per query (divided by `nq`).
            let timed = |label: String, count: usize, make: &dyn Fn((f64, f64)) -> Query| {
                let t = Instant::now();
                let c0 = cpu_s();
                let mut hits = 0;
                for q in 0..count {
                    let p = pts[(q * 7919) % pts.len()];
                    hits += ds.query("loc", &make(p), o)?.count();
                }
                eprintln!(
                    "{label} index_only={index_only}: {:.1} us/query ({:.1} us CPU), {:.1} hits",
                    t.elapsed().as_secs_f64() * 1e6 / nq as f64,
                    (cpu_s() - c0) * 1e6 / nq as f64,
                    hits as f64 / nq as f64
                );
                silt::Result::Ok(())
            };
            let cache0 = db.stats().block_cache;
            timed("box".into(), if only_knn { 0 } else { nq }, &|p| {
                Query::Intersects(Geometry::rect(
                    p.0 - half,
                    p.1 - half,
                    p.0 + half,
                    p.1 + half,
                ))
            })?;
            let cache1 = db.stats().block_cache;
            eprintln!(
                "  block cache per box: {:.1} hits, {:.1} misses",
                (cache1.hits - cache0.hits) as f64 / nq as f64,
                (cache1.misses - cache0.misses) as f64 / nq as f64
            );
            if let Some(metres) = radius_m {
                timed(format!("radius {metres} m"), nq, &|p| {
                    Query::WithinDistance {
                        lon: p.0,
                        lat: p.1,
                        metres,
                    }
                })?;
            }
            if only_box {
                continue;
            }
            let t = Instant::now();
            let c0 = cpu_s();
            let mut found = 0;
            let mut st = silt::QueryStats::default();
            for q in 0..nq {
                let p = pts[(q * 104_729) % pts.len()];
                let k = Query::Nearest {
                    lon: p.0 + 0.01,
                    lat: p.1,
                    k: 10,
                };
                let mut r = ds.query("loc", &k, o)?;
                found += r.by_ref().count();
                let s = r.stats();
                st.components += s.components;
                st.blocks += s.blocks;
                st.candidates += s.candidates;
            }
            eprintln!(
                "  per kNN: {:.1} components, {:.1} leaf blocks, {:.1} candidates",
                st.components as f64 / nq as f64,
                st.blocks as f64 / nq as f64,
                st.candidates as f64 / nq as f64
            );
            eprintln!(
                "knn index_only={index_only}: {:.1} us/query ({:.1} us CPU, {} results)",
                t.elapsed().as_secs_f64() * 1e6 / nq as f64,
                (cpu_s() - c0) * 1e6 / nq as f64,
                found
            );
        }
    }
    drop(ds);
    db.close()?;
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}
