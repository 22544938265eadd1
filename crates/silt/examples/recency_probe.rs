//! A quick look at the LevelDB++ recency indexes on the tweet workload: for
//! each kind, a fresh dataset with one index on `user_id` is loaded with the
//! same tweets (the load time shows the index's write cost), then top-K
//! lookups of users drawn from the tweets' own distribution are timed; last,
//! creation-time range lookups through an embedded and a composite index.
//! Not a benchmark (no fsync, one thread, warm cache).
//! `cargo run --release -p silt --example recency_probe -- [tweets] [lookups] [memory MB]`

use silt::lsm::policy::MergePolicy;
use silt::workload::tweets::{TweetGen, TweetOptions};
use silt::{
    BatchOptions, Database, DatasetDef, DbOptions, Durability, FieldType, IndexDef, IndexKind,
    Query, QueryOptions, QueryStats, Value, WriteMode,
};
use std::ops::Bound;
use std::time::Instant;

fn main() -> silt::Result<()> {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let n = args.first().copied().unwrap_or(200_000) as u64;
    let nq = args.get(1).copied().unwrap_or(1_000);
    let mem_mb = args.get(2).copied().unwrap_or(16) as u64;
    let gen_opts = TweetOptions {
        count: n,
        seed: 7,
        ..Default::default()
    };
    let tweets: Vec<Value> = TweetGen::new(gen_opts.clone()).collect();
    let mut users = TweetGen::new(TweetOptions {
        seed: 99,
        ..gen_opts.clone()
    });
    let probe_users: Vec<i64> = (0..nq).map(|_| users.sample_user()).collect();
    println!(
        "{n} tweets, {} users, memory budget {mem_mb} MiB, policy tiered(4), {nq} lookups per row",
        users.users()
    );
    println!(
        "{:<10} {:>9} {:>11} {:>11} {:>11} {:>12} {:>12}",
        "index", "load s", "k=1 us", "k=10 us", "k=all us", "k=10 comps", "k=10 fetch"
    );
    let kinds = [
        ("none", None),
        ("embedded", Some(IndexKind::Embedded)),
        ("lazy", Some(IndexKind::Lazy)),
        ("eager", Some(IndexKind::Eager)),
        ("composite", Some(IndexKind::Composite)),
    ];
    for (label, kind) in kinds {
        let dir = std::env::temp_dir().join(format!("silt-recency-{}-{label}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let db = Database::open(
            &dir,
            DbOptions {
                durability: Durability::None,
                sync: false,
                block_cache_bytes: 512 << 20,
                ..Default::default()
            },
        )?;
        db.create_dataset(
            DatasetDef::new("tweets", &["id"])
                .field("id", FieldType::Int)
                .field("user_id", FieldType::Int)
                .field("created_at", FieldType::Int)
                .memory_budget(mem_mb << 20)
                .partitions(2)
                .policy(MergePolicy::parse("tiered(4)")?),
        )?;
        if let Some(k) = kind {
            let policy = MergePolicy::parse("tiered(4)")?;
            db.create_index(
                "tweets",
                IndexDef::recency("by_user", k, "user_id").policy(policy),
            )?;
        }
        let ds = db.dataset("tweets")?;
        let t = Instant::now();
        for chunk in tweets.chunks(1000) {
            ds.write_batch(
                chunk.to_vec(),
                BatchOptions {
                    mode: WriteMode::Upsert,
                    ..Default::default()
                },
            )?;
        }
        db.wait_idle()?;
        let load = t.elapsed().as_secs_f64();
        let Some(kind) = kind else {
            println!("{label:<10} {load:>9.2}");
            db.close()?;
            let _ = std::fs::remove_dir_all(&dir);
            continue;
        };
        let mut cells = Vec::new();
        let mut k10 = QueryStats::default();
        for k in [Some(1), Some(10), None] {
            let t = Instant::now();
            let mut stats = QueryStats::default();
            for u in &probe_users {
                let q = Query::Recent {
                    lo: Bound::Included(vec![Value::Int(*u)]),
                    hi: Bound::Included(vec![Value::Int(*u)]),
                    k,
                };
                let mut r = ds.query("by_user", &q, QueryOptions::default())?;
                for h in r.by_ref() {
                    h?;
                }
                let s = r.stats();
                stats.components += s.components;
                stats.fetched += s.fetched;
            }
            cells.push(t.elapsed().as_secs_f64() * 1e6 / nq as f64);
            if k == Some(10) {
                k10 = stats;
            }
        }
        println!(
            "{label:<10} {load:>9.2} {:>11.1} {:>11.1} {:>11.1} {:>12.1} {:>12.1}",
            cells[0],
            cells[1],
            cells[2],
            k10.components as f64 / nq as f64,
            k10.fetched as f64 / nq as f64
        );
        // Creation-time ranges (time-correlated: zone maps prune) through a
        // second index of the same kind, built over the loaded data.
        if matches!(kind, IndexKind::Embedded | IndexKind::Composite) {
            let t = Instant::now();
            db.create_index("tweets", IndexDef::recency("by_time", kind, "created_at"))?;
            let build = t.elapsed().as_secs_f64();
            let first = tweets
                .first()
                .and_then(|t| t.get("created_at"))
                .and_then(Value::as_i64)
                .unwrap_or(0);
            let last = tweets
                .last()
                .and_then(|t| t.get("created_at"))
                .and_then(Value::as_i64)
                .unwrap_or(0);
            let span = (last - first).max(1);
            let mut x: u64 = 12345;
            let t = Instant::now();
            let mut blocks = 0;
            let mut got = 0;
            for _ in 0..nq {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                // A 1-minute window, newest 10.
                let a = first + (x % span as u64) as i64;
                let q = Query::Recent {
                    lo: Bound::Included(vec![Value::Int(a)]),
                    hi: Bound::Included(vec![Value::Int(a + 60)]),
                    k: Some(10),
                };
                let mut r = ds.query("by_time", &q, QueryOptions::default())?;
                for h in r.by_ref() {
                    h?;
                    got += 1;
                }
                blocks += r.stats().blocks;
            }
            println!(
                "  {label} on created_at: built in {build:.2} s; 1-minute range, k=10: {:.1} us ({:.1} hits, {:.1} blocks read per lookup)",
                t.elapsed().as_secs_f64() * 1e6 / nq as f64,
                got as f64 / nq as f64,
                blocks as f64 / nq as f64
            );
        }
        let st = ds.stats();
        let disk: u64 = st.indexes.iter().map(|t| t.disk_bytes).sum();
        println!(
            "  disk: {:.1} MiB in all trees",
            disk as f64 / (1u64 << 20) as f64
        );
        db.close()?;
        let _ = std::fs::remove_dir_all(&dir);
    }
    Ok(())
}
