//! A quick, self-contained look at the R-tree access paths: ingest clustered
//! points, then time small box queries and kNN (used with `perf` to profile).
//! `cargo run --release -p silt --example spatial_probe -- [records] [queries]`

use silt::{
    BatchOptions, Database, DatasetDef, DbOptions, Durability, FieldType, Geometry, IndexDef,
    Query, QueryOptions, Value,
};
use std::time::Instant;

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
    let mut pts = Vec::with_capacity(n);
    let t = Instant::now();
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
            ("text".into(), Value::String("x".repeat(400))),
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
    eprintln!("ingest {:.0}/s", n as f64 / t.elapsed().as_secs_f64());
    let mode = std::env::var("PROBE_COMPACT").is_ok();
    if mode {
        ds.compact()?;
    }
    let only_box = std::env::var("PROBE_ONLY_BOX").is_ok();
    for index_only in [false, true] {
        if only_box && index_only {
            break;
        }
        let o = QueryOptions {
            index_only,
            limit: None,
        };
        let t = Instant::now();
        let mut hits = 0;
        for q in 0..nq {
            let p = pts[(q * 7919) % pts.len()];
            let b = Query::Intersects(Geometry::rect(
                p.0 - 0.036,
                p.1 - 0.036,
                p.0 + 0.036,
                p.1 + 0.036,
            ));
            hits += ds.query("loc", &b, o)?.count();
        }
        eprintln!(
            "box index_only={index_only}: {:.1} us/query, {:.1} hits",
            t.elapsed().as_secs_f64() * 1e6 / nq as f64,
            hits as f64 / nq as f64
        );
        if only_box {
            continue;
        }
        let t = Instant::now();
        let mut found = 0;
        for q in 0..nq {
            let p = pts[(q * 104_729) % pts.len()];
            let k = Query::Nearest {
                lon: p.0 + 0.01,
                lat: p.1,
                k: 10,
            };
            found += ds.query("loc", &k, o)?.count();
        }
        eprintln!(
            "knn index_only={index_only}: {:.1} us/query ({} results)",
            t.elapsed().as_secs_f64() * 1e6 / nq as f64,
            found
        );
    }
    drop(ds);
    db.close()?;
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}
