//! The AsterixDB storage paper reproduction (seed 003 §6.1; issue 8): three
//! workloads over 1 KB tweets from `silt::workload::tweets`:
//!
//! - [`table2`] `asterix-table2`: ingest throughput, flush and merge counts
//!   and write amplification per merge policy (prefix, constant, no-merge,
//!   plus binomial, tiered, concurrent, leveled) with a primary + B+-tree +
//!   R-tree + keyword index dataset;
//! - [`fig4`] `asterix-fig4`: ingest throughput as secondary indexes are
//!   added (none, B+-tree, R-tree, keyword, n-gram, all four);
//! - [`table3`] `asterix-table3`: secondary B+-tree range queries with 10 /
//!   100 / 1,000 / 10,000 results during ingest, after ingest and after a
//!   full compaction, validated (records fetched) and index-only;
//! - [`table4`] `asterix-table4` (§6.2): points into an LSM R-tree, an AMLSM
//!   R-tree and an in-place R-tree (SQLite): ingest time curve, queries
//!   during and after ingest with per-query cache misses, 1% deletes.
//!
//! The paper ran on 8 machines (24 partitions) for 20 minutes per setting;
//! here one process, one partition, a fixed number of tweets per setting and
//! the memory sizes scaled down with the data (see each workload's
//! explanation and `docs/reproductions/asterix-*.md`).

pub mod fig4;
pub mod table2;
pub mod table3;
pub mod table4;

use std::{path::Path, sync::Arc, time::Instant};

use anyhow::{Context, Result, bail};
use silt::lsm::policy::MergePolicy;
use silt::workload::SplitMix64;
use silt::workload::tweets::{TweetGen, TweetOptions};
use silt::{
    BatchOptions, Database, DatasetDef, DbOptions, Durability, FieldType, Geometry, IndexDef,
    Value, WriteMode,
};

use crate::results::ResultRow;
use crate::util::{fmt_num, progress, spinner};

/// The paper's tweets average 1 KB (003 §6.1).
pub const TWEET_BYTES: usize = 1000;
/// Records per `write_batch` (each record its own transaction, as a feed's frame).
pub const BATCH: usize = 1000;
/// The random 32-bit field of Table 3 takes values in [0, RAND_DOMAIN).
pub const RAND_DOMAIN: i64 = 1 << 31;

/// A secondary index of the paper's experiments.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ix {
    /// B+-tree on `user_id` (Table 2, Fig. 4).
    Btree,
    /// R-tree on the point `loc`.
    Rtree,
    /// Keyword inverted index on `text`.
    Keyword,
    /// 3-gram inverted index on `text`.
    Ngram,
    /// B+-tree on the random 32-bit integer `rand32` (Table 3).
    BtreeRand,
}

impl Ix {
    pub fn name(self) -> &'static str {
        match self {
            Ix::Btree => "by_user",
            Ix::Rtree => "by_loc",
            Ix::Keyword => "by_word",
            Ix::Ngram => "by_gram",
            Ix::BtreeRand => "by_rand",
        }
    }

    pub fn def(self, policy: &MergePolicy) -> IndexDef {
        let d = match self {
            Ix::Btree => IndexDef::btree(self.name(), &["user_id"]),
            Ix::Rtree => IndexDef::rtree(self.name(), "loc"),
            Ix::Keyword => IndexDef::keyword(self.name(), "text"),
            Ix::Ngram => IndexDef::ngram(self.name(), "text", 3),
            Ix::BtreeRand => IndexDef::btree(self.name(), &["rand32"]),
        };
        // Inverted indexes reconcile deletes with a deleted-key tree by
        // default (as AsterixDB), which the leveled policy refuses: they use
        // antimatter under leveled (no deletes here, so nothing else changes).
        let d = if policy.is_leveled() && matches!(self, Ix::Keyword | Ix::Ngram) {
            d.reconcile(silt::ReconcileOption::Antimatter)
        } else {
            d
        };
        d.policy(policy.clone())
    }

    pub fn describe(self) -> &'static str {
        match self {
            Ix::Btree => "B+-tree by_user(user_id)",
            Ix::Rtree => "R-tree by_loc(loc point)",
            Ix::Keyword => "keyword by_word(text)",
            Ix::Ngram => "3-gram by_gram(text)",
            Ix::BtreeRand => "B+-tree by_rand(rand32)",
        }
    }
}

/// Generated tweets: the records and their JSON size (the user bytes).
pub struct Tweets {
    pub recs: Vec<Value>,
    pub json_bytes: u64,
}

impl Tweets {
    /// `n` tweets of ~1 KB JSON from the seed, each with a point `loc` (from
    /// the generator's lon/lat) and a uniform `rand32` in [0, 2^31) added.
    pub fn generate(n: usize, seed: u64) -> Tweets {
        let sp = spinner(format!("generating {} tweets", fmt_num(n as f64)));
        let opts = TweetOptions {
            seed,
            count: n as u64,
            target_bytes: TWEET_BYTES,
            ..TweetOptions::default()
        };
        let mut rng = SplitMix64::new(seed ^ 0xA57E_21B0);
        let mut recs = Vec::with_capacity(n);
        let mut json_bytes = 0u64;
        for t in TweetGen::new(opts) {
            let Value::Object(mut fields) = t else {
                continue;
            };
            let num = |f: &[(String, Value)], k: &str| {
                f.iter().find(|(n, _)| n == k).and_then(|(_, v)| match v {
                    Value::Double(x) => Some(*x),
                    _ => None,
                })
            };
            let (lon, lat) = (
                num(&fields, "lon").unwrap_or(0.0),
                num(&fields, "lat").unwrap_or(0.0),
            );
            fields.push(("loc".into(), Value::Geometry(Geometry::point(lon, lat))));
            fields.push((
                "rand32".into(),
                Value::Int(rng.below(RAND_DOMAIN as u64) as i64),
            ));
            let rec = Value::Object(fields);
            json_bytes += silt::value::to_json(&rec).to_string().len() as u64;
            recs.push(rec);
        }
        sp.finish_and_clear();
        Tweets { recs, json_bytes }
    }

    pub fn len(&self) -> usize {
        self.recs.len()
    }

    pub fn rand32(&self, i: usize) -> i64 {
        self.recs[i]
            .get("rand32")
            .and_then(Value::as_i64)
            .unwrap_or(-1)
    }
}

/// Memory and cache sizes of a run (scaled down from the paper's 1 GB of
/// memory components and 3 GB buffer cache per machine).
#[derive(Clone, Copy, Debug)]
pub struct Mem {
    pub budget: u64,
    pub cache: u64,
}

/// A Silt database with dataset `tweets` and some of the paper's indexes.
pub struct SiltTweets {
    pub db: Database,
    pub ds: Arc<silt::Dataset>,
    pub describe: String,
}

impl SiltTweets {
    pub fn open(dir: &Path, mem: Mem, policy: &MergePolicy, indexes: &[Ix]) -> Result<Self> {
        let opts = DbOptions {
            block_cache_bytes: mem.cache,
            durability: Durability::None,
            ..Default::default()
        };
        let options = format!("{opts:?}");
        let db = Database::open(dir, opts)
            .with_context(|| format!("opening Silt at {}", dir.display()))?;
        db.create_dataset(
            DatasetDef::new("tweets", &["id"])
                .field("id", FieldType::Int)
                .field("user_id", FieldType::Int)
                .field("created_at", FieldType::Int)
                .field("text", FieldType::String)
                .field("loc", FieldType::Point)
                .field("rand32", FieldType::Int)
                .memory_budget(mem.budget)
                .partitions(1)
                .policy(policy.clone()),
        )
        .context("creating Silt dataset tweets")?;
        for ix in indexes {
            db.create_index("tweets", ix.def(policy))
                .with_context(|| format!("creating Silt index {}", ix.name()))?;
        }
        let ds = db.dataset("tweets")?;
        let describe = format!(
            "Silt (this repo): dataset tweets(id int primary key, user_id, created_at, text, loc point, rand32, + the other tweet fields), \
             1 partition, indexes: {}; merge policy {policy} on every tree; memory budget {} MiB shared by all memory components \
             (all flushed together when full, as AsterixDB), block cache {} MiB, lz4, 4 KiB blocks, Durability::None (WAL on, no fsync per commit); \
             ingest = write_batch of {BATCH} in insert mode (each record its own transaction with a primary-key uniqueness check); {options}",
            if indexes.is_empty() {
                "none".to_string()
            } else {
                indexes
                    .iter()
                    .map(|i| i.describe())
                    .collect::<Vec<_>>()
                    .join(", ")
            },
            mem.budget >> 20,
            mem.cache >> 20,
        );
        Ok(Self { db, ds, describe })
    }

    /// Inserts `recs[range]` in batches; returns the seconds it took.
    pub fn ingest(
        &self,
        tweets: &Tweets,
        range: std::ops::Range<usize>,
        what: &str,
    ) -> Result<f64> {
        let pb = progress((range.end - range.start) as u64, what.to_string());
        let t0 = Instant::now();
        let mut i = range.start;
        while i < range.end {
            let end = (i + BATCH).min(range.end);
            insert_batch(&self.ds, &tweets.recs[i..end])?;
            i = end;
            pb.set_position((i - range.start) as u64);
        }
        let s = t0.elapsed().as_secs_f64();
        pb.finish_and_clear();
        Ok(s)
    }

    /// Flush the memory components and wait for the merges.
    pub fn settle(&self) -> Result<()> {
        self.db.flush().context("Silt flush")?;
        self.db.wait_idle().context("Silt wait_idle")
    }

    pub fn close(self) -> Result<()> {
        drop(self.ds);
        self.db.close().context("closing Silt")
    }
}

/// Inserts a batch (insert mode: uniqueness check), failing on any error.
pub fn insert_batch(ds: &silt::Dataset, recs: &[Value]) -> Result<()> {
    let rep = ds
        .write_batch(
            recs.to_vec(),
            BatchOptions {
                mode: WriteMode::Insert,
                atomic: false,
                stop_on_error: true,
            },
        )
        .context("Silt write_batch")?;
    if let Some((i, e)) = rep.failed.first() {
        bail!("Silt insert of record {i} of a batch failed: {e}");
    }
    Ok(())
}

/// Per-tree counters of a dataset, named by the tree's last path element.
#[derive(Clone, Debug, Default)]
pub struct TreeSum {
    pub name: String,
    pub flushes: u64,
    pub merges: u64,
    pub components: u64,
    pub disk_bytes: u64,
    pub written: u64,
    pub user_bytes: u64,
    pub key_checks: u64,
    pub bloom_negatives: u64,
    pub bloom_false_positives: u64,
    pub flush_stalls: u64,
}

pub fn trees(ds: &silt::Dataset) -> Vec<TreeSum> {
    ds.stats()
        .indexes
        .iter()
        .map(|t| TreeSum {
            name: t
                .name
                .rsplit('/')
                .next()
                .unwrap_or(t.name.as_str())
                .to_string(),
            flushes: t.flushes,
            merges: t.merges,
            components: t.components.len() as u64,
            disk_bytes: t.disk_bytes,
            written: t.bytes_flushed + t.bytes_merged,
            user_bytes: t.user_bytes_written,
            key_checks: t.key_checks,
            bloom_negatives: t.bloom_negatives,
            bloom_false_positives: t.bloom_false_positives,
            flush_stalls: t.flush_stalls,
        })
        .collect()
}

/// Statistics rows of every tree (`{tree} flushes`, merges, components, MB
/// written, write amplification) and the totals; returns (rows, totals).
pub fn tree_rows(sys: &str, trees: &[TreeSum], suffix: &str) -> (Vec<ResultRow>, TreeSum) {
    let mut rows = Vec::new();
    let mut tot = TreeSum {
        name: "all trees".into(),
        ..TreeSum::default()
    };
    for t in trees {
        let m = |what: &str| format!("{} {what}{suffix}", t.name);
        rows.push(ResultRow::stat(
            sys,
            &m("flushes"),
            "count",
            t.flushes as f64,
        ));
        rows.push(ResultRow::stat(sys, &m("merges"), "count", t.merges as f64));
        rows.push(ResultRow::stat(
            sys,
            &m("components"),
            "count",
            t.components as f64,
        ));
        rows.push(ResultRow::stat(
            sys,
            &m("disk size"),
            "MB",
            t.disk_bytes as f64 / 1e6,
        ));
        rows.push(ResultRow::stat(
            sys,
            &m("flush+merge written"),
            "MB",
            t.written as f64 / 1e6,
        ));
        if t.user_bytes > 0 {
            rows.push(ResultRow::stat(
                sys,
                &m("write amp (flush+merge / its user bytes)"),
                "x",
                t.written as f64 / t.user_bytes as f64,
            ));
        }
        if t.flush_stalls > 0 {
            rows.push(ResultRow::stat(
                sys,
                &m("flush stalls"),
                "count",
                t.flush_stalls as f64,
            ));
        }
        tot.flushes += t.flushes;
        tot.merges += t.merges;
        tot.components += t.components;
        tot.disk_bytes += t.disk_bytes;
        tot.written += t.written;
        tot.user_bytes += t.user_bytes;
        tot.flush_stalls += t.flush_stalls;
    }
    (rows, tot)
}

/// Whether the user asked for this label (`--systems`, or `silt` for all).
pub fn wants(ctx: &super::Ctx, label: &str) -> bool {
    match &ctx.systems {
        None => true,
        Some(list) => list
            .iter()
            .any(|s| s.eq_ignore_ascii_case(label) || s.eq_ignore_ascii_case("silt")),
    }
}

/// A directory name for a label.
pub fn dir_name(label: &str) -> String {
    label
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect()
}
