//! Profiling aid: N pub/sub operations (3 subscriptions per publication, the
//! `pubsub` bench's geotagged mix on a 500 x 500 grid, logical clock, windows
//! of ±10 000 and publications living 20 000) through one DualDB space
//! (`Durability::None`, 16 MB memory budget, leveled merges), then the rate,
//! the matches, and the CPU time per operation of the writer thread and of
//! the whole process (flushes and merges included).
//! `cargo run --release -p silt --example pubsub_ops -- 100000 [dualdb|twodb]`

use silt::lsm::policy::MergePolicy;
use silt::pubsub::{Design, PubSub, PubSubOptions, Publication, Subscription};
use silt::workload::{SplitMix64, Zipf};
use silt::{Database, DbOptions, Durability, Value};
use std::time::Instant;

#[path = "common/cpu.rs"]
mod cpu;
use cpu::{process_cpu_s, thread_cpu_s};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let n: u64 = args.next().and_then(|s| s.parse().ok()).unwrap_or(100_000);
    let design = Design::parse(&args.next().unwrap_or_else(|| "dualdb".into()))?;
    let dir = tempfile::tempdir()?;
    let db = Database::open(
        dir.path(),
        DbOptions {
            block_cache_bytes: 64 << 20,
            durability: Durability::None,
            ..Default::default()
        },
    )?;
    let ps = PubSub::open(
        &db,
        "geo",
        &PubSubOptions {
            design,
            memory_budget: Some(16 << 20),
            policy: MergePolicy::parse("leveled")?,
            ..Default::default()
        },
    )?;
    let mut r = SplitMix64::new(42);
    let hot: Vec<(f64, f64)> = (0..400).map(|_| (r.next_f64(), r.next_f64())).collect();
    let zipf = Zipf::new(hot.len() as u64, 1.0);
    let (start, cpu0, all0) = (Instant::now(), thread_cpu_s(), process_cpu_s());
    let mut matches = 0usize;
    for i in 0..n {
        let (x, y) = if r.below(10) < 8 {
            let (cx, cy) = hot[(zipf.sample(&mut r) - 1) as usize];
            let (u1, u2) = (r.next_f64().max(1e-12), r.next_f64());
            let m = (-2.0 * u1.ln()).sqrt() * 0.004;
            let a = 2.0 * std::f64::consts::PI * u2;
            (cx + m * a.cos(), cy + m * a.sin())
        } else {
            (r.next_f64(), r.next_f64())
        };
        let cell = |v: f64| ((v.clamp(0.0, 0.999_999) * 500.0) as i64).min(499);
        let id = Value::Int(cell(x) * 500 + cell(y));
        let (now, iid) = (i as i64, i as i64 + 1);
        if r.below(4) < 3 {
            let s = Subscription {
                id,
                sid: iid,
                uid: r.below(50_000) as i64,
                ts: now,
                tmin: now - 10_000,
                tmax: now + 10_000,
                ..Default::default()
            };
            matches += ps.subscribe(&s, false)?.publications.len();
        } else {
            let p = Publication {
                id,
                pid: iid,
                tp: now,
                tmax: now + 20_000,
                desc: format!("incident {iid} at ({x:.4}, {y:.4})"),
                ..Default::default()
            };
            matches += ps.publish(&p, None)?.subscribers.len();
        }
    }
    let secs = start.elapsed().as_secs_f64();
    let (cpu, all) = (thread_cpu_s() - cpu0, process_cpu_s() - all0);
    println!(
        "{n} operations ({design:?}) in {secs:.2} s: {:.0} ops/s, {matches} matches, CPU per operation {:.1} µs in the writer, {:.1} µs in all threads",
        n as f64 / secs,
        cpu * 1e6 / n as f64,
        all * 1e6 / n as f64
    );
    drop(ps);
    db.close()?;
    Ok(())
}
