//! The systems under test. [`System`] is what every system has (a label and a
//! description of its configuration); each workload family adds a capability
//! trait with the operations it drives ([`KvStore`] for single-writer key-value
//! workloads, [`SharedKv`] for many writer threads, [`SpatialStore`] for the
//! spatial workloads, [`TxnStore`] for multi-statement transactions over two
//! tables; the text and SQL workloads add their own next to them).

pub mod duckdb_spatial;
pub mod json_stats;
pub mod lucene;
pub mod mem_spatial;
pub mod postgis;
pub mod py_rtree;
pub mod rocks;
#[cfg(feature = "silt")]
pub mod silt;
#[cfg(feature = "silt")]
pub mod silt_spatial;
pub mod sqlite;
pub mod sqlite_spatial;
pub mod txn_postgres;
#[cfg(feature = "silt")]
pub mod txn_silt;
pub mod txn_sqlite;
pub mod venv_python;

use std::{ops::Range, path::Path};

use anyhow::Result;

use crate::{
    results::ResultRow,
    spatial::{
        data::{Answer, TweetData},
        geo::Rect,
    },
};

/// Every system under test.
pub trait System {
    /// The label used in results ("silt", "silt-leveled", "rocksdb", ...).
    fn name(&self) -> &str;
    /// Its version and configuration, one line.
    fn describe(&self) -> String;
}

/// Settings that every key-value system gets, so the comparison is like for like.
#[derive(Clone, Debug)]
pub struct KvConfig {
    /// Memory for the in-memory component (Silt memory budget / RocksDB write buffer).
    pub memtable_bytes: usize,
    /// Block cache size.
    pub block_cache_bytes: usize,
    /// Bloom filter bits per key.
    pub bloom_bits_per_key: f64,
    /// Data block size.
    pub block_size: usize,
    /// Acknowledge each write only once its log record is fsynced (Silt
    /// `Durability::Sync`, RocksDB `sync=true`, SQLite `synchronous=FULL`).
    /// Otherwise the log is on but written to the OS only (Silt
    /// `Durability::None`, RocksDB `sync=false`, SQLite `synchronous=NORMAL`).
    pub sync_commits: bool,
}

impl Default for KvConfig {
    fn default() -> Self {
        Self {
            memtable_bytes: 64 << 20,
            block_cache_bytes: 256 << 20,
            bloom_bits_per_key: 10.0,
            block_size: 4096,
            sync_commits: false,
        }
    }
}

/// A store of 8-byte integer keys and byte-string values, written one record per call.
pub trait KvStore: System {
    fn put(&mut self, key: u64, value: &[u8]) -> Result<()>;
    /// Point lookup; true when the key was found.
    fn get(&mut self, key: u64) -> Result<bool>;
    /// Makes all written data durable in sorted components and waits until no
    /// background flush or merge is pending or running.
    fn settle(&mut self) -> Result<()>;
    /// The system's own counters, as `Stat` rows labelled with [`System::name`];
    /// `phase` ("load", "lookup") prefixes the metric names.
    fn stats(&mut self, phase: &str) -> Result<Vec<ResultRow>>;
    fn close(self: Box<Self>) -> Result<()>;
}

/// A key-value store written by many threads at once, one record per
/// transaction (each write acknowledged per [`KvConfig::sync_commits`]).
pub trait SharedKv: System + Sync {
    /// A handle for one writer thread (SQLite: its own connection).
    fn writer(&self) -> Result<Box<dyn KvWriter + '_>>;
    /// The system's own count of log fsyncs so far, where it keeps one (a
    /// cross-check of [`crate::fsync_count`]).
    fn own_fsyncs(&self) -> Option<u64>;
    /// The system's own counters as `Stat` rows labelled with [`System::name`],
    /// metric names prefixed with `prefix`.
    fn stats(&self, prefix: &str) -> Result<Vec<ResultRow>>;
    fn close(self: Box<Self>) -> Result<()>;
}

/// One writer thread's handle on a [`SharedKv`].
pub trait KvWriter: Send {
    /// Inserts or replaces one record in its own transaction; returns once the
    /// write is acknowledged.
    fn put(&mut self, key: u64, value: &[u8]) -> Result<()>;
}

/// Which key-value system to open.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KvSystemSpec {
    /// Silt with a merge policy (`prefix(1GB,5)`, `tiered(4)`, `leveled`, `binomial(4)`).
    Silt {
        policy: String,
    },
    RocksDb,
    /// SQLite (bundled) in WAL mode: many-writer workloads only ([`SharedKv`]).
    Sqlite,
}

/// Silt's default merge policy; the system using it is labelled plain "silt".
pub const SILT_DEFAULT_POLICY: &str = "prefix(1GB,5)";

impl KvSystemSpec {
    pub fn label(&self) -> String {
        match self {
            KvSystemSpec::Silt { policy } if policy == SILT_DEFAULT_POLICY => "silt".into(),
            KvSystemSpec::Silt { policy } => format!("silt-{policy}"),
            KvSystemSpec::RocksDb => "rocksdb".into(),
            KvSystemSpec::Sqlite => "sqlite".into(),
        }
    }

    pub fn is_silt(&self) -> bool {
        matches!(self, KvSystemSpec::Silt { .. })
    }

    /// Whether this binary can run the system (Silt needs the `silt` feature).
    pub fn available(&self) -> bool {
        match self {
            KvSystemSpec::Silt { .. } => cfg!(feature = "silt"),
            KvSystemSpec::RocksDb | KvSystemSpec::Sqlite => true,
        }
    }

    /// Opens a fresh store in the empty directory `dir`.
    pub fn open(&self, dir: &Path, cfg: &KvConfig) -> Result<Box<dyn KvStore>> {
        match self {
            #[cfg(feature = "silt")]
            KvSystemSpec::Silt { policy } => Ok(Box::new(silt::SiltKv::open(
                dir,
                &self.label(),
                policy,
                cfg,
            )?)),
            #[cfg(not(feature = "silt"))]
            KvSystemSpec::Silt { .. } => {
                let _ = (dir, cfg);
                anyhow::bail!(
                    "this silt-bench was built without the Silt adapter: rebuild with `--features silt`"
                )
            }
            KvSystemSpec::RocksDb => Ok(Box::new(rocks::RocksKv::open(dir, cfg)?)),
            KvSystemSpec::Sqlite => {
                anyhow::bail!("the SQLite adapter only takes part in many-writer workloads")
            }
        }
    }

    /// Opens a fresh store in the empty directory `dir` for many writer threads.
    pub fn open_shared(&self, dir: &Path, cfg: &KvConfig) -> Result<Box<dyn SharedKv>> {
        match self {
            #[cfg(feature = "silt")]
            KvSystemSpec::Silt { policy } => Ok(Box::new(silt::SiltKv::open(
                dir,
                &self.label(),
                policy,
                cfg,
            )?)),
            #[cfg(not(feature = "silt"))]
            KvSystemSpec::Silt { .. } => {
                let _ = (dir, cfg);
                anyhow::bail!(
                    "this silt-bench was built without the Silt adapter: rebuild with `--features silt`"
                )
            }
            KvSystemSpec::RocksDb => Ok(Box::new(rocks::RocksKv::open(dir, cfg)?)),
            KvSystemSpec::Sqlite => Ok(Box::new(sqlite::SqliteKv::open(dir, cfg)?)),
        }
    }
}

/// Bytes of the opaque payload of a [`TxnRow`].
pub const TXN_PAYLOAD_BYTES: usize = 100;
/// The two tables (datasets) of the transaction workloads.
pub const TXN_TABLES: [&str; 2] = ["place_a", "place_b"];

/// One upsert of a transaction workload: the record `(id, v, loc = (lon, lat),
/// payload)` into table [`TXN_TABLES`]`[table]`.
#[derive(Clone, Debug)]
pub struct TxnRow {
    /// 0 or 1: which of [`TXN_TABLES`].
    pub table: usize,
    /// Primary key.
    pub id: i64,
    /// The B+-tree-indexed integer attribute.
    pub v: i64,
    /// The R-tree/GiST-indexed point.
    pub lon: f64,
    pub lat: f64,
    pub payload: [u8; TXN_PAYLOAD_BYTES],
}

/// Two tables, each `(id primary key, v integer, loc point, payload)` with a
/// spatial index on `loc` and a B-tree on `v`, written by many client threads
/// in multi-statement transactions, every commit durable (fsynced) before it
/// is acknowledged.
pub trait TxnStore: System + Sync {
    /// Writes `rows` (untimed, in large batches) and lets the store settle
    /// (Silt: flush + wait for merges; PostgreSQL: CHECKPOINT; SQLite: WAL
    /// checkpoint).
    fn preload(&self, rows: &[TxnRow]) -> Result<()>;
    /// A handle for one client thread (PostgreSQL and SQLite: its own connection).
    fn client(&self) -> Result<Box<dyn TxnClient + '_>>;
    /// fsyncs of the system's log so far, counted the way that fits the system
    /// (in-process systems: every fsync/fdatasync of the process, see
    /// [`crate::fsync_count`]; PostgreSQL: `pg_stat_wal.wal_sync`); `None` when unknown.
    fn fsyncs(&self) -> Option<u64>;
    /// Where [`TxnStore::fsyncs`] comes from, for the result header.
    fn fsync_source(&self) -> &'static str;
    /// CPU seconds used so far by the system's server processes, for a
    /// client-server system (the in-process systems' CPU is the harness's own).
    fn server_cpu_seconds(&self) -> Option<f64> {
        None
    }
    /// Row counts of each table, once per access path (primary, B-tree on v,
    /// spatial index), as `(label, table number, count)`: every path of a table
    /// must see the same rows.
    fn counts(&self) -> Result<Vec<(String, usize, u64)>>;
    /// The system's own counters as `Stat` rows (metric names prefixed with
    /// `prefix`): what changed since the previous call.
    fn stats(&self, prefix: &str) -> Result<Vec<ResultRow>>;
    fn close(self: Box<Self>) -> Result<()>;
}

/// Turns cumulative counters into increments since the previous call:
/// `last` keeps the previous values; names containing `max` are kept as they are.
pub fn counter_deltas(
    last: &std::sync::Mutex<std::collections::HashMap<String, f64>>,
    now: Vec<(String, f64, String)>,
) -> Vec<(String, f64, String)> {
    let mut last = last.lock().unwrap_or_else(|e| e.into_inner());
    now.into_iter()
        .map(|(name, v, unit)| {
            let prev = last.insert(name.clone(), v).unwrap_or(0.0);
            let d = if name.contains("max") { v } else { v - prev };
            (name, d, unit)
        })
        .collect()
}

/// One client thread's handle on a [`TxnStore`].
pub trait TxnClient: Send {
    /// Upserts every row in one transaction (BEGIN; one upsert per row;
    /// COMMIT) and returns once the commit is durable; a transaction the
    /// system refuses with a retryable error (conflict, deadlock,
    /// serialization failure) is run again. Returns how many times it was retried.
    fn transact(&mut self, rows: &[TxnRow]) -> Result<u32>;
    /// One record-level (autocommit) upsert, where the system has such a path
    /// next to its transactions (Silt's `Dataset::upsert`).
    fn autocommit(&mut self, row: &TxnRow) -> Result<()> {
        let _ = row;
        anyhow::bail!("no record-level autocommit path")
    }
}

/// A store of tweet-like records (id, user_id, ts, text, point location) with a
/// spatial index on the location: the systems of the `spatial-rtree` workload.
pub trait SpatialStore: System {
    /// Inserts records `range` of `data` as one batch (Silt: one `write_batch`;
    /// SQLite: one transaction).
    fn insert_batch(&mut self, data: &TweetData, range: Range<usize>) -> Result<()>;
    /// Deletes the record with this id; true when it existed.
    fn delete(&mut self, id: i64) -> Result<bool>;
    /// Makes the ingested data settle in its on-disk form (Silt: flush + wait for
    /// merges; SQLite: checkpoint the WAL into the database file).
    fn settle(&mut self) -> Result<()>;
    /// Full compaction (Silt: `compact()`, one component per index; SQLite: `VACUUM`).
    fn compact(&mut self) -> Result<()>;
    /// The records whose location is in `r` (edges included, `r[0] > r[2]`
    /// crosses the antimeridian). `fetch`: read each whole record (Silt
    /// non-index-only, SQLite R*Tree joined to the main table); otherwise answer
    /// from the index alone (Silt index-only, SQLite R*Tree table alone).
    fn rect(&mut self, r: &Rect, fetch: bool) -> Result<Answer>;
    /// The `k` records nearest to (lon, lat) by great-circle distance, nearest
    /// first: (id, metres). `fetch` as for [`SpatialStore::rect`].
    fn knn(&mut self, lon: f64, lat: f64, k: usize, fetch: bool) -> Result<Vec<(i64, f64)>>;
    /// The records within `metres` of (lon, lat) by great-circle distance
    /// (edges included). `fetch` as for [`SpatialStore::rect`].
    fn radius(&mut self, lon: f64, lat: f64, metres: f64, fetch: bool) -> Result<Answer>;
    /// An index nested-loop spatial join: for each probe point, the records
    /// within `metres` of it; the answer counts the (probe, record) pairs and
    /// sums their record ids. By default one [`SpatialStore::radius`] per probe.
    fn join(&mut self, probes: &[(f64, f64)], metres: f64, fetch: bool) -> Result<Answer> {
        let mut a = Answer::default();
        for &(lon, lat) in probes {
            a.merge(&self.radius(lon, lat, metres, fetch)?);
        }
        Ok(a)
    }
    /// The system's own counters as `Stat` rows (metric names prefixed by `phase`).
    fn stats(&mut self, phase: &str) -> Result<Vec<ResultRow>>;
    /// One line on how this system answers kNN queries and compacts.
    fn methods(&self) -> String;
    /// The rectangle query through the store's SQL, if it has one: the
    /// ids of the geometries intersecting `r` (`None`: no SQL).
    fn sql_rect(&mut self, r: &Rect) -> Result<Option<Answer>> {
        let _ = r;
        Ok(None)
    }
    /// The k nearest through the store's SQL (`ORDER BY` distance `LIMIT
    /// k`), as (id, great-circle metres).
    fn sql_knn(&mut self, lon: f64, lat: f64, k: usize) -> Result<Option<Vec<(i64, f64)>>> {
        let _ = (lon, lat, k);
        Ok(None)
    }
    fn close(self: Box<Self>) -> Result<()>;
}

/// Test support shared by the spatial adapters' tests.
#[cfg(test)]
pub(crate) mod spatial_checks {
    use super::SpatialStore;
    use crate::spatial::data::{Grid, Queries, TweetData};

    /// Checks `s`'s radius and join answers, on both access paths, against
    /// the brute-force grid (around the antimeridian and a pole as well).
    pub fn radius_and_join(s: &mut dyn SpatialStore, d: &TweetData, g: &Grid, q: &Queries) {
        let mut centres = q.radius.centres.clone();
        centres.extend([(179.99, 10.0), (-179.99, -10.0), (0.0, 89.9)]);
        let mut nonempty = 0;
        for &(x, y) in &centres {
            for m in [q.radius.metres, q.joins.metres, 400_000.0] {
                let want = g.circle(d, x, y, m, None);
                nonempty += usize::from(want.count > 0);
                for fetch in [false, true] {
                    assert_eq!(
                        s.radius(x, y, m, fetch).unwrap(),
                        want,
                        "{} radius {m} m around ({x}, {y}), fetch {fetch}",
                        s.name()
                    );
                }
            }
        }
        assert!(nonempty > centres.len(), "{nonempty}");
        for probes in &q.joins.probes {
            let want = g.join(d, probes, q.joins.metres, None);
            assert!(want.count > 0);
            for fetch in [false, true] {
                assert_eq!(
                    s.join(probes, q.joins.metres, fetch).unwrap(),
                    want,
                    "{} join",
                    s.name()
                );
            }
        }
    }
}
