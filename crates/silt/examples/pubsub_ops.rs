//! Profiling aid: N pub/sub operations (3 subscriptions per publication, the
//! `pubsub` bench's geotagged mix on a 500 x 500 grid, logical clock, windows
//! of ±10 000 and publications living 20 000) through one DualDB space
//! (`Durability::None`, 16 MB memory budget, leveled merges), then the rate,
//! the matches, and the CPU time per operation of the writer thread and of
//! the whole process (flushes and merges included).
//! With `selfjoin`, every operation is self-joining (the bench's: a
//! publication joins those of the last 10 000 on its id). With `live`, live
//! delivery is on: every match is also queued for its subscriber (no one
//! consumes, so this measures what enqueueing costs the writer). With
//! `pubheavy`, the mix is one subscription per three publications. With
//! `stats`, each index's flushes, merges and components are printed after.
//! `cargo run --release -p silt --example pubsub_ops -- 100000 [dualdb|twodb] [selfjoin] [live] [pubheavy] [stats]`

use silt::lsm::policy::MergePolicy;
use silt::pubsub::{Design, PubSub, PubSubOptions};
use silt::workload::SplitMix64;
use silt::workload::geotagged::{self, GeoOp};
use silt::{Database, DbOptions, Durability};
use std::time::Instant;

#[path = "common/cpu.rs"]
mod cpu;
use cpu::{process_cpu_s, thread_cpu_s};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let n: u64 = args.next().and_then(|s| s.parse().ok()).unwrap_or(100_000);
    let design = Design::parse(&args.next().unwrap_or_else(|| "dualdb".into()))?;
    let flags: Vec<String> = args.collect();
    let self_join = flags.iter().any(|a| a == "selfjoin");
    let delivery = flags.iter().any(|a| a == "live");
    let (subs, pubs) = match flags.iter().any(|a| a == "pubheavy") {
        true => (1, 3),
        false => (3, 1),
    };
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
            delivery,
            ..Default::default()
        },
    )?;
    let mut users = SplitMix64::new(7);
    let (start, cpu0, all0) = (Instant::now(), thread_cpu_s(), process_cpu_s());
    let mut matches = 0usize;
    for (i, p) in geotagged::points(42, n, subs, pubs).enumerate() {
        let op = geotagged::operation(i as u64, p.grid_cell(500), &p, users.below(50_000) as i64);
        matches += match op {
            GeoOp::Sub(s) => {
                let r = ps.subscribe(&s, self_join)?;
                r.publications.len() + r.subscriptions.len()
            }
            GeoOp::Pub(p) => {
                let r = ps.publish(&p, self_join.then_some(p.tp - 10_000))?;
                r.subscribers.len() + r.publications.len()
            }
        };
    }
    let secs = start.elapsed().as_secs_f64();
    let (cpu, all) = (thread_cpu_s() - cpu0, process_cpu_s() - all0);
    println!(
        "{n} operations ({design:?}, S/P {subs}/{pubs}{}{}) in {secs:.2} s: {:.0} ops/s, {matches} matches, CPU per operation {:.1} µs in the writer, {:.1} µs in all threads",
        if self_join { ", self-joining" } else { "" },
        if delivery { ", live delivery" } else { "" },
        n as f64 / secs,
        cpu * 1e6 / n as f64,
        all * 1e6 / n as f64
    );
    if flags.iter().any(|a| a == "stats") {
        for d in db.stats().datasets {
            for t in d.indexes {
                println!(
                    "  {}: {} flushes ({} MB), {} merges ({} MB, {} moves), write amplification {:.2}, {} components now, {} flush stalls",
                    t.name,
                    t.flushes,
                    t.bytes_flushed >> 20,
                    t.merges,
                    t.bytes_merged >> 20,
                    t.moves,
                    t.write_amplification,
                    t.components.len(),
                    t.flush_stalls
                );
            }
        }
    }
    drop(ps);
    db.close()?;
    Ok(())
}
