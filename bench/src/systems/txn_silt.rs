//! Silt as a [`TxnStore`]: two datasets (`place_a`, `place_b`: `id` int
//! primary key, `v` int, `loc` point, `payload` binary), each with a B+-tree
//! `by_v` on `v` and an R-tree `by_loc` on `loc`, `Durability::Sync`. A
//! transaction is one `Database::begin()`, one `Transaction::upsert` per row,
//! `commit()` (acknowledged once its COMMIT is fsynced; the log flusher's group
//! commit shares fsyncs between concurrent commits), run again on
//! `Error::Conflict`. The autocommit path is `Dataset::upsert` (one
//! record-level transaction per record).

use std::{
    collections::HashMap,
    ops::Bound,
    path::Path,
    sync::{
        Arc, Mutex,
        atomic::{AtomicU64, Ordering},
    },
    time::Instant,
};

use anyhow::{Context, Result, bail};
use silt::{
    BatchOptions, Database, DatasetDef, DbOptions, Durability, Error, FieldType, Geometry,
    IndexDef, Query, QueryOptions, Value, WriteMode,
};

use super::{
    System, TXN_TABLES, TxnClient, TxnRow, TxnStore, counter_deltas, json_stats::flatten_stats,
};
use crate::{fsync_count, results::ResultRow};

/// Records per `write_batch` of the preload.
const PRELOAD_BATCH: usize = 10_000;

/// Log, lock and flush counters kept as stats.
const STATS: [&str; 9] = [
    "wal.commits",
    "wal.fsyncs",
    "wal.batches",
    "wal.max_batch_records",
    "wal.bytes",
    "wal.tail_full_waits",
    "locks.grants",
    "locks.waits",
    "locks.try_refusals",
];

pub struct SiltTxn {
    options: String,
    db: Option<Database>,
    ds: Vec<Arc<silt::Dataset>>,
    /// Transactions refused with `Error::Conflict` (and run again).
    conflicts: AtomicU64,
    /// Nanoseconds client threads spent buffering upserts (begin + upserts)
    /// and in `commit()`.
    buffer_ns: AtomicU64,
    commit_ns: AtomicU64,
    txns: AtomicU64,
    /// The counters at the previous `stats` call.
    last: Mutex<HashMap<String, f64>>,
}

fn record(r: &TxnRow) -> Value {
    Value::Object(vec![
        ("id".into(), Value::Int(r.id)),
        ("v".into(), Value::Int(r.v)),
        ("loc".into(), Value::Geometry(Geometry::point(r.lon, r.lat))),
        ("payload".into(), Value::Binary(r.payload.to_vec())),
    ])
}

impl SiltTxn {
    pub fn open(dir: &Path) -> Result<Self> {
        let opts = DbOptions {
            durability: Durability::Sync,
            ..Default::default()
        };
        let options = format!("{opts:?}");
        let db = Database::open(dir, opts)
            .with_context(|| format!("opening Silt at {}", dir.display()))?;
        let mut ds = Vec::new();
        for name in TXN_TABLES {
            db.create_dataset(
                DatasetDef::new(name, &["id"])
                    .field("id", FieldType::Int)
                    .field("v", FieldType::Int)
                    .field("loc", FieldType::Point)
                    .field("payload", FieldType::Binary),
            )
            .with_context(|| format!("creating Silt dataset {name}"))?;
            db.create_index(name, IndexDef::btree("by_v", &["v"]))
                .with_context(|| format!("creating the B+-tree of {name}"))?;
            db.create_index(name, IndexDef::rtree("by_loc", "loc"))
                .with_context(|| format!("creating the R-tree of {name}"))?;
            ds.push(db.dataset(name)?);
        }
        Ok(Self {
            options,
            db: Some(db),
            ds,
            conflicts: AtomicU64::new(0),
            buffer_ns: AtomicU64::new(0),
            commit_ns: AtomicU64::new(0),
            txns: AtomicU64::new(0),
            last: Mutex::new(HashMap::new()),
        })
    }

    fn db(&self) -> Result<&Database> {
        self.db.as_ref().context("Silt database already closed")
    }
}

impl System for SiltTxn {
    fn name(&self) -> &str {
        "silt"
    }

    fn describe(&self) -> String {
        format!(
            "Silt (this repo): datasets {} (id int primary key, v int, loc point, payload binary), \
             each with a B+-tree on v and an R-tree on loc, default dataset settings (1 partition, \
             64 MiB memory budget, default merge policy); transactions = Database::begin(), one \
             Transaction::upsert per row, commit() (acknowledged once the COMMIT is fsynced, group \
             commit by the log flusher), run again on Error::Conflict; autocommit = Dataset::upsert \
             per record; preload = write_batch (upsert mode) of {PRELOAD_BATCH} records; {}",
            TXN_TABLES.join(", "),
            self.options
        )
    }
}

impl TxnStore for SiltTxn {
    fn preload(&self, rows: &[TxnRow]) -> Result<()> {
        let _ = self.stats("")?;
        for (t, ds) in self.ds.iter().enumerate() {
            let mine: Vec<&TxnRow> = rows.iter().filter(|r| r.table == t).collect();
            for chunk in mine.chunks(PRELOAD_BATCH) {
                let opts = BatchOptions {
                    mode: WriteMode::Upsert,
                    ..BatchOptions::default()
                };
                let report = ds
                    .write_batch(chunk.iter().map(|r| record(r)).collect(), opts)
                    .context("Silt preload write_batch")?;
                if let Some((pos, e)) = report.failed.first() {
                    bail!("Silt preload: record {pos} of a batch failed: {e}");
                }
            }
        }
        let db = self.db()?;
        db.flush().context("Silt flush")?;
        db.wait_idle().context("Silt wait_idle")?;
        // The next stats are the first cell's alone.
        let _ = self.stats("")?;
        Ok(())
    }

    fn client(&self) -> Result<Box<dyn TxnClient + '_>> {
        Ok(Box::new(SiltClient { s: self }))
    }

    fn fsyncs(&self) -> Option<u64> {
        Some(fsync_count::count())
    }

    fn fsync_source(&self) -> &'static str {
        "every fsync/fdatasync of the process (log and component files), counted by the harness's interposer"
    }

    fn counts(&self) -> Result<Vec<(String, usize, u64)>> {
        let mut out = Vec::new();
        let world = Query::Intersects(Geometry::rect(-180.0, -90.0, 180.0, 90.0));
        let all_v = Query::Range {
            lo: Bound::Unbounded,
            hi: Bound::Unbounded,
        };
        for (t, ds) in self.ds.iter().enumerate() {
            let mut n = 0u64;
            for r in ds.scan(Bound::Unbounded, Bound::Unbounded)? {
                r?;
                n += 1;
            }
            out.push((format!("{} primary", TXN_TABLES[t]), t, n));
            for (index, q) in [("by_v", &all_v), ("by_loc", &world)] {
                let opts = QueryOptions {
                    index_only: true,
                    limit: None,
                };
                let mut n = 0u64;
                for h in ds.query(index, q, opts)? {
                    h?;
                    n += 1;
                }
                out.push((format!("{} {index}", TXN_TABLES[t]), t, n));
            }
        }
        Ok(out)
    }

    fn stats(&self, prefix: &str) -> Result<Vec<ResultRow>> {
        let stats = self.db()?.stats();
        let json = serde_json::to_value(&stats).context("serializing Silt stats")?;
        let now = flatten_stats(&json)
            .into_iter()
            .filter(|(name, _, _)| STATS.contains(&name.as_str()))
            .collect();
        let mut rows: Vec<ResultRow> = counter_deltas(&self.last, now)
            .into_iter()
            .map(|(name, value, unit)| {
                ResultRow::stat("silt", &format!("{prefix}{name}"), &unit, value)
            })
            .collect();
        let txns = self.txns.swap(0, Ordering::Relaxed);
        let buffer = self.buffer_ns.swap(0, Ordering::Relaxed);
        let commit = self.commit_ns.swap(0, Ordering::Relaxed);
        rows.push(ResultRow::stat(
            "silt",
            &format!("{prefix}conflicts retried"),
            "count",
            self.conflicts.swap(0, Ordering::Relaxed) as f64,
        ));
        if txns > 0 {
            rows.push(ResultRow::stat(
                "silt",
                &format!("{prefix}mean time in begin + upserts"),
                "ms",
                buffer as f64 / txns as f64 / 1e6,
            ));
            rows.push(ResultRow::stat(
                "silt",
                &format!("{prefix}mean time in commit()"),
                "ms",
                commit as f64 / txns as f64 / 1e6,
            ));
        }
        Ok(rows)
    }

    fn close(mut self: Box<Self>) -> Result<()> {
        self.ds.clear();
        if let Some(db) = self.db.take() {
            db.close().context("closing Silt")?;
        }
        Ok(())
    }
}

struct SiltClient<'a> {
    s: &'a SiltTxn,
}

impl TxnClient for SiltClient<'_> {
    fn transact(&mut self, rows: &[TxnRow]) -> Result<u32> {
        let s = self.s;
        let db = s.db()?;
        let mut retries = 0;
        loop {
            let t0 = Instant::now();
            let mut tx = db.begin().context("Silt begin")?;
            for r in rows {
                tx.upsert(&s.ds[r.table], record(r)).with_context(|| {
                    format!("Silt upsert of {} into {}", r.id, TXN_TABLES[r.table])
                })?;
            }
            let t1 = Instant::now();
            let res = tx.commit();
            let t2 = Instant::now();
            s.buffer_ns
                .fetch_add((t1 - t0).as_nanos() as u64, Ordering::Relaxed);
            s.commit_ns
                .fetch_add((t2 - t1).as_nanos() as u64, Ordering::Relaxed);
            s.txns.fetch_add(1, Ordering::Relaxed);
            match res {
                Ok(_) => return Ok(retries),
                Err(Error::Conflict { .. }) => {
                    s.conflicts.fetch_add(1, Ordering::Relaxed);
                    retries += 1;
                }
                Err(e) => return Err(e).context("Silt commit"),
            }
        }
    }

    fn autocommit(&mut self, row: &TxnRow) -> Result<()> {
        self.s.ds[row.table]
            .upsert(record(row))
            .with_context(|| format!("Silt autocommit upsert of {}", row.id))
    }
}
