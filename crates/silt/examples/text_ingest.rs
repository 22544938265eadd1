//! Profiling aid: insert N ~1 KB tweets (batches of 1,000, insert mode,
//! `Durability::None`) into a dataset with one kind of secondary index, and
//! print the rate, the log bytes per tweet and the CPU time per tweet of the
//! writer thread and of the whole process (flush, merge and log threads
//! included; CPU time is robust to other processes competing for the cores).
//! `cargo run --release -p silt --example text_ingest -- keyword 20000 /tmp/silt-text`
//! Kinds: none, btree, rtree, keyword, ngram, all.

use silt::workload::tweets::{TweetGen, TweetOptions};
use silt::{BatchOptions, Database, DatasetDef, DbOptions, Durability, FieldType, IndexDef, Value};
use std::time::Instant;

#[path = "common/cpu.rs"]
mod cpu;
use cpu::{process_cpu_s, thread_cpu_s};

fn main() -> silt::Result<()> {
    let mut args = std::env::args().skip(1);
    let kind = args.next().unwrap_or_else(|| "keyword".into());
    let n: u64 = args.next().and_then(|s| s.parse().ok()).unwrap_or(20_000);
    let dir = args.next().unwrap_or_else(|| "/tmp/silt-text".into());
    let _ = std::fs::remove_dir_all(&dir);
    let db = Database::open(
        &dir,
        DbOptions {
            durability: Durability::None,
            ..Default::default()
        },
    )?;
    db.create_dataset(
        DatasetDef::new("tweets", &["id"])
            .field("id", FieldType::Int)
            .field("text", FieldType::String)
            .memory_budget(32 << 20)
            .partitions(1),
    )?;
    let defs = match kind.as_str() {
        "none" => vec![],
        "btree" => vec![IndexDef::btree("by_user", &["user_id"])],
        "keyword" => vec![IndexDef::keyword("words", "text")],
        "ngram" => vec![IndexDef::ngram("grams", "text", 3)],
        "all" => vec![
            IndexDef::btree("by_user", &["user_id"]),
            IndexDef::keyword("words", "text"),
            IndexDef::ngram("grams", "text", 3),
        ],
        other => {
            eprintln!("unknown kind {other}: none, btree, keyword, ngram, all");
            std::process::exit(2);
        }
    };
    for d in defs {
        db.create_index("tweets", d)?;
    }
    let ds = db.dataset("tweets")?;
    let recs: Vec<Value> = TweetGen::new(TweetOptions {
        seed: 7,
        count: n,
        target_bytes: 1000,
        ..TweetOptions::default()
    })
    .collect();
    let (t, cpu0, pcpu0) = (Instant::now(), thread_cpu_s(), process_cpu_s());
    for chunk in recs.chunks(1000) {
        let rep = ds.write_batch(chunk.to_vec(), BatchOptions::default())?;
        if let Some((i, e)) = rep.failed.first() {
            eprintln!("record {i}: {e}");
            std::process::exit(1);
        }
    }
    let secs = t.elapsed().as_secs_f64();
    let writer = thread_cpu_s() - cpu0;
    db.flush()?;
    db.wait_idle()?;
    let all = process_cpu_s() - pcpu0;
    let log = db.stats().wal.bytes;
    println!(
        "{kind}: {n} tweets in {secs:.2}s = {:.0}/s; CPU per tweet: writer {:.1} us, \
         process (incl. flush + merges) {:.1} us; log {:.0} bytes/tweet",
        n as f64 / secs,
        writer * 1e6 / n as f64,
        all * 1e6 / n as f64,
        log as f64 / n as f64
    );
    db.close()
}
