//! `asterix-table4`: seed 003 §6.2 (Table 4, Figs. 5 and 6): points ingested
//! into an LSM R-tree with deleted-key B+-trees, an AMLSM (antimatter) R-tree
//! and an in-place R-tree (SQLite's R*Tree), with the ingest time curve,
//! queries running during the ingest, queries after ingest and after a full
//! compaction with per-query cache misses, and the same with 1% deletes.

use std::{
    fs::OpenOptions,
    io::Write,
    path::{Path, PathBuf},
    process::Command,
    sync::{
        Arc,
        atomic::{AtomicBool, AtomicUsize, Ordering},
    },
    time::Instant,
};

use anyhow::{Context, Result, anyhow, bail};
use rand::{Rng, SeedableRng, rngs::SmallRng};
use rusqlite::{Connection, params};
use silt::{
    BatchOptions, Database, DatasetDef, DbOptions, Durability, FieldType, Geometry, IndexDef,
    Query, QueryOptions, ReconcileOption, Value, WriteMode, lsm::policy::MergePolicy,
};

use super::{dir_name, trees, wants};
use crate::{
    results::{Kind, ResultRow},
    spatial::{
        data::{CityPicker, cities},
        geo::Rect,
    },
    util::{
        IoCounters, ScratchDir, dir_size, evict_os_cache, fmt_num, major_faults, os_cached_bytes,
        percentile,
    },
    workloads::{Ctx, Scale, Workload},
};

pub struct AsterixTable4;

/// Records per Silt `write_batch` / SQLite transaction.
const BATCH: usize = 1000;
/// Query answers compared with a brute-force count after ingest.
const CHECK: usize = 50;
/// Mean results per query box at the end of the ingest.
const TARGET_RESULTS: f64 = 1000.0;
/// Points along the ingest of the time curve.
const SAMPLES: usize = 40;
/// Chance that an operation of the deletes stream deletes an existing record.
const DELETE_CHANCE: f64 = 0.01;
/// The paper's shift of a record around its cluster centre, degrees.
const SHIFT_DEG: f64 = 0.25;

const LSM: &str = "silt-lsm-rtree";
const AMLSM: &str = "silt-amlsm-rtree";
const INPLACE: &str = "sqlite-rtree";

const RAW: &str = "raw inserts";
const WITH_QUERIES: &str = "inserts with concurrent queries";
const DELETES: &str = "1% deletes with concurrent queries";
const AFTER_INGEST: &str = "after ingest";
const AFTER_COMPACTION: &str = "after compaction";
/// The same boxes again after the database files were evicted from the OS
/// page cache and the system was reopened (empty internal caches).
const AFTER_INGEST_COLD: &str = "after ingest, cold";
const AFTER_COMPACTION_COLD: &str = "after compaction, cold";
const DURING: &str = "during ingest";

/// The sizes at a scale.
#[derive(Clone, Copy, Debug)]
struct Sizes {
    points: usize,
    /// Silt memory components (primary + R-tree), bytes.
    budget: u64,
    /// Silt block cache, bytes.
    cache: u64,
    /// Prefix policy: components larger than this are not merged.
    prefix_max: u64,
    /// SQLite page cache (budget + cache, as the paper's 1.5 GB vs 1 + 0.5 GB).
    sqlite_cache: u64,
    /// Queries after ingest and after compaction.
    queries: usize,
}

fn sizes(scale: Scale) -> Sizes {
    match scale {
        Scale::Small => Sizes {
            points: 400_000,
            budget: 1 << 20,
            cache: 2 << 20,
            prefix_max: 2 << 20,
            sqlite_cache: 3 << 20,
            queries: 300,
        },
        Scale::Medium | Scale::Full => Sizes {
            points: 2_000_000,
            budget: 2 << 20,
            cache: 4 << 20,
            prefix_max: 8 << 20,
            sqlite_cache: 6 << 20,
            queries: 1000,
        },
    }
}

/// Points clustered around cities (the paper: ~4,500 US (city, state)
/// locations, each record shifted by uniform [-0.25, 0.25] degrees).
struct Points {
    lon: Vec<f64>,
    lat: Vec<f64>,
    /// (lon, lat, id) sorted by lon, for brute-force counts.
    by_lon: Vec<(f64, f64, u32)>,
}

impl Points {
    fn generate(n: usize, seed: u64) -> Result<Self> {
        let cs = cities()?;
        let picker = CityPicker::new(&cs, 0.7);
        let mut rng = SmallRng::seed_from_u64(seed ^ 0x7ab1_e004);
        let (mut lon, mut lat) = (Vec::with_capacity(n), Vec::with_capacity(n));
        for _ in 0..n {
            let c = cs
                .get(picker.pick(&mut rng))
                .context("city picker out of range")?;
            lon.push((c.lon + rng.random_range(-SHIFT_DEG..=SHIFT_DEG)).clamp(-180.0, 180.0));
            lat.push((c.lat + rng.random_range(-SHIFT_DEG..=SHIFT_DEG)).clamp(-90.0, 90.0));
        }
        let mut by_lon: Vec<(f64, f64, u32)> = (0..n).map(|i| (lon[i], lat[i], i as u32)).collect();
        by_lon.sort_by(|a, b| a.0.total_cmp(&b.0));
        Ok(Self { lon, lat, by_lon })
    }

    /// (count, id sum) of the live records in `r`.
    fn count(&self, r: &Rect, dead: Option<&[bool]>) -> (u64, i64) {
        let lo = self.by_lon.partition_point(|p| p.0 < r[0]);
        let (mut c, mut s) = (0u64, 0i64);
        for &(x, y, id) in &self.by_lon[lo..] {
            if x > r[2] {
                break;
            }
            if y >= r[1] && y <= r[3] && !dead.is_some_and(|d| d[id as usize]) {
                c += 1;
                s = s.wrapping_add(i64::from(id));
            }
        }
        (c, s)
    }
}

/// Square boxes centred on random records, the side calibrated on a sample
/// for about TARGET_RESULTS results over all records.
fn make_boxes(p: &Points, n: usize, seed: u64) -> Vec<Rect> {
    let mut rng = SmallRng::seed_from_u64(seed ^ 0xb0c5_0004);
    let len = p.lon.len();
    let centres: Vec<(f64, f64)> = (0..n)
        .map(|_| {
            let i = rng.random_range(0..len);
            (p.lon[i], p.lat[i])
        })
        .collect();
    let square = |&(x, y): &(f64, f64), side: f64| -> Rect {
        let h = side / 2.0;
        [
            (x - h).max(-180.0),
            (y - h).max(-90.0),
            (x + h).min(180.0),
            (y + h).min(90.0),
        ]
    };
    let sample = &centres[..centres.len().min(300)];
    let mut side = 0.05;
    for _ in 0..6 {
        let mean = sample
            .iter()
            .map(|c| p.count(&square(c, side), None).0 as f64)
            .sum::<f64>()
            / sample.len().max(1) as f64;
        side *= (TARGET_RESULTS / mean.max(1.0)).sqrt().clamp(0.25, 4.0);
    }
    centres.iter().map(|c| square(c, side)).collect()
}

/// One operation of the ingest stream.
#[derive(Clone, Copy)]
enum Op {
    /// Insert record `i` (its id is `i`).
    Insert(usize),
    Delete(i64),
}

/// The stream: `n` inserts, and with `deletes` a delete of a random live
/// earlier record instead of an insert with probability DELETE_CHANCE.
/// Returns the stream and which records end deleted.
fn ops(n: usize, deletes: bool, seed: u64) -> (Vec<Op>, Vec<bool>) {
    let mut rng = SmallRng::seed_from_u64(seed ^ 0xde1e_7e04);
    let mut dead = vec![false; n];
    let mut out = Vec::with_capacity(n + n / 50);
    let mut next = 0;
    while next < n {
        if deletes && next > 100 && rng.random::<f64>() < DELETE_CHANCE {
            // A random live earlier record (a few retries; almost all are live).
            for _ in 0..16 {
                let j = rng.random_range(0..next);
                if !dead[j] {
                    dead[j] = true;
                    out.push(Op::Delete(j as i64));
                    break;
                }
            }
        } else {
            out.push(Op::Insert(next));
            next += 1;
        }
    }
    (out, dead)
}

/// What one query did.
#[derive(Clone, Copy, Debug)]
struct QAnswer {
    count: u64,
    id_sum: i64,
    /// Cache misses of this query (Silt block cache / SQLite page cache).
    misses: u64,
}

/// A query connection (runs on the query thread).
trait Reader: Send {
    fn rect(&mut self, r: &Rect) -> Result<QAnswer>;
}

/// An index that ingests points.
trait PointIndex {
    fn insert(&mut self, p: &Points, ids: &[usize]) -> Result<()>;
    fn delete(&mut self, id: i64) -> Result<()>;
    fn settle(&mut self) -> Result<()>;
    /// None: the system has no compaction here.
    fn compact(&mut self) -> Result<Option<()>>;
    fn reader(&self) -> Result<Box<dyn Reader>>;
    /// Closes the index (its internal caches go with it) so that it can be
    /// reopened; every reader must have been dropped.
    fn shut(&mut self) -> Result<()>;
    /// Opens the index again after [`Self::shut`], with empty internal caches.
    fn reopen(&mut self) -> Result<()>;
    /// Statistics rows after a phase (components, flushes, merges).
    fn stats(&self, sys: &str, phase: &str) -> Vec<ResultRow>;
    fn close(self: Box<Self>) -> Result<()>;
}

// ---------------------------------------------------------------- Silt

const DATASET: &str = "pts";
const INDEX: &str = "loc";

struct SiltPoints {
    /// `None` between [`PointIndex::shut`] and [`PointIndex::reopen`].
    db: Option<Database>,
    ds: Option<Arc<silt::Dataset>>,
    dir: PathBuf,
    cache: u64,
}

fn silt_opts(cache: u64) -> DbOptions {
    DbOptions {
        block_cache_bytes: cache,
        durability: Durability::None,
        ..Default::default()
    }
}

impl SiltPoints {
    fn open(dir: &Path, sz: Sizes, r: ReconcileOption, policy: &MergePolicy) -> Result<Self> {
        let db = Database::open(dir, silt_opts(sz.cache))
            .with_context(|| format!("opening Silt at {}", dir.display()))?;
        db.create_dataset(
            DatasetDef::new(DATASET, &["id"])
                .field("id", FieldType::Int)
                .field("loc", FieldType::Point)
                .memory_budget(sz.budget)
                .partitions(1)
                .policy(policy.clone()),
        )
        .context("creating Silt dataset pts")?;
        db.create_index(
            DATASET,
            IndexDef::rtree(INDEX, "loc")
                .reconcile(r)
                .policy(policy.clone()),
        )
        .context("creating Silt R-tree loc")?;
        let ds = db.dataset(DATASET).context("opening Silt dataset pts")?;
        Ok(Self {
            db: Some(db),
            ds: Some(ds),
            dir: dir.to_path_buf(),
            cache: sz.cache,
        })
    }

    fn db(&self) -> Result<&Database> {
        self.db.as_ref().context("Silt already closed")
    }

    fn ds(&self) -> Result<&Arc<silt::Dataset>> {
        self.ds.as_ref().context("Silt already closed")
    }
}

struct SiltReader {
    ds: Arc<silt::Dataset>,
}

impl Reader for SiltReader {
    fn rect(&mut self, r: &Rect) -> Result<QAnswer> {
        let m0 = silt::storage::cache::thread_misses();
        let q = Query::Intersects(Geometry::rect(r[0], r[1], r[2], r[3]));
        let opts = QueryOptions {
            index_only: true,
            limit: None,
        };
        let (mut count, mut id_sum) = (0u64, 0i64);
        for hit in self.ds.query(INDEX, &q, opts).context("Silt box query")? {
            let h = hit.context("Silt box query")?;
            match h.pk.as_slice() {
                [Value::Int(id)] => {
                    count += 1;
                    id_sum = id_sum.wrapping_add(*id);
                }
                other => bail!("Silt returned an unexpected primary key {other:?}"),
            }
        }
        Ok(QAnswer {
            count,
            id_sum,
            misses: silt::storage::cache::thread_misses() - m0,
        })
    }
}

impl PointIndex for SiltPoints {
    fn insert(&mut self, p: &Points, ids: &[usize]) -> Result<()> {
        let recs: Vec<Value> = ids
            .iter()
            .map(|&i| {
                Value::Object(vec![
                    ("id".into(), Value::Int(i as i64)),
                    (
                        "loc".into(),
                        Value::Geometry(Geometry::point(p.lon[i], p.lat[i])),
                    ),
                ])
            })
            .collect();
        let rep = self
            .ds()?
            .write_batch(
                recs,
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

    fn delete(&mut self, id: i64) -> Result<()> {
        if !self
            .ds()?
            .delete(&[Value::Int(id)])
            .with_context(|| format!("Silt delete of {id}"))?
        {
            bail!("Silt: deleting id {id} found no record");
        }
        Ok(())
    }

    fn settle(&mut self) -> Result<()> {
        let db = self.db()?;
        db.flush().context("Silt flush")?;
        db.wait_idle().context("Silt wait_idle")
    }

    fn compact(&mut self) -> Result<Option<()>> {
        self.ds()?.compact().context("Silt compact")?;
        self.settle()?;
        Ok(Some(()))
    }

    fn reader(&self) -> Result<Box<dyn Reader>> {
        Ok(Box::new(SiltReader {
            ds: self.ds()?.clone(),
        }))
    }

    fn shut(&mut self) -> Result<()> {
        // The dataset first: the database drops its own reference at close,
        // and the component files (and their mappings) go with the last one.
        self.ds = None;
        if let Some(db) = self.db.take() {
            db.close().context("closing Silt")?;
        }
        Ok(())
    }

    fn reopen(&mut self) -> Result<()> {
        if self.db.is_some() {
            bail!("Silt: reopen without shut");
        }
        let db = Database::open(&self.dir, silt_opts(self.cache))
            .with_context(|| format!("reopening Silt at {}", self.dir.display()))?;
        let ds = db.dataset(DATASET).context("reopening Silt dataset pts")?;
        // Whatever the open scheduled (none expected) is done before the
        // queries, so that no background read is counted in them.
        db.wait_idle().context("Silt wait_idle after reopen")?;
        self.db = Some(db);
        self.ds = Some(ds);
        Ok(())
    }

    fn stats(&self, sys: &str, phase: &str) -> Vec<ResultRow> {
        let mut rows = Vec::new();
        let Some(ds) = &self.ds else {
            return rows;
        };
        for t in trees(ds) {
            let name = if t.name == INDEX { "R-tree" } else { "primary" };
            rows.push(ResultRow::stat(
                sys,
                &format!("{name} disk components ({phase})"),
                "count",
                t.components as f64,
            ));
            rows.push(ResultRow::stat(
                sys,
                &format!("{name} flushes ({phase})"),
                "count",
                t.flushes as f64,
            ));
            rows.push(ResultRow::stat(
                sys,
                &format!("{name} merges ({phase})"),
                "count",
                t.merges as f64,
            ));
        }
        rows
    }

    fn close(mut self: Box<Self>) -> Result<()> {
        self.shut()
    }
}

// ---------------------------------------------------------------- SQLite

/// The paper's in-place R-tree used 2 KB pages (its best ingest page size).
const SQLITE_PAGE: i64 = 2048;

struct SqlitePoints {
    /// `None` between [`PointIndex::shut`] and [`PointIndex::reopen`].
    conn: Option<Connection>,
    path: PathBuf,
    cache: u64,
}

const SQL_INSERT: &str =
    "INSERT INTO pts(id, min_x, max_x, min_y, max_y, lon, lat) VALUES (?1, ?2, ?2, ?3, ?3, ?2, ?3)";
const SQL_BOX: &str = "SELECT id FROM pts WHERE min_x <= ?3 AND max_x >= ?1 AND min_y <= ?4 AND max_y >= ?2 \
       AND lon >= ?1 AND lon <= ?3 AND lat >= ?2 AND lat <= ?4";

fn sqlite_conn(path: &Path, cache: u64) -> Result<Connection> {
    let conn =
        Connection::open(path).with_context(|| format!("opening SQLite at {}", path.display()))?;
    conn.pragma_update(None, "cache_size", -((cache / 1024) as i64))
        .context("SQLite: PRAGMA cache_size")?;
    conn.busy_timeout(std::time::Duration::from_secs(60))
        .context("SQLite: busy_timeout")?;
    Ok(conn)
}

impl SqlitePoints {
    fn open(dir: &Path, cache: u64) -> Result<Self> {
        let path = dir.join("pts.sqlite");
        let conn = sqlite_conn(&path, cache)?;
        conn.pragma_update(None, "page_size", SQLITE_PAGE)
            .context("SQLite: PRAGMA page_size")?;
        let mode: String = conn
            .pragma_update_and_check(None, "journal_mode", "WAL", |r| r.get(0))
            .context("SQLite: PRAGMA journal_mode=WAL")?;
        if !mode.eq_ignore_ascii_case("wal") {
            bail!("SQLite refused WAL journal mode (got {mode})");
        }
        conn.pragma_update(None, "synchronous", "NORMAL")
            .context("SQLite: PRAGMA synchronous")?;
        conn.execute_batch(
            "CREATE VIRTUAL TABLE pts USING rtree(id, min_x, max_x, min_y, max_y, +lon, +lat)",
        )
        .context("SQLite: creating the R*Tree (needs SQLITE_ENABLE_RTREE)")?;
        Ok(Self {
            conn: Some(conn),
            path,
            cache,
        })
    }

    fn conn(&self) -> Result<&Connection> {
        self.conn
            .as_ref()
            .context("SQLite connection already closed")
    }

    fn conn_mut(&mut self) -> Result<&mut Connection> {
        self.conn
            .as_mut()
            .context("SQLite connection already closed")
    }
}

/// SQLite's page-cache misses of this connection so far.
fn sqlite_misses(conn: &Connection) -> u64 {
    let (mut cur, mut hi) = (0i32, 0i32);
    // SAFETY: the handle is this open connection's, used on this thread only;
    // sqlite3_db_status only reads its counters into the two ints.
    let rc = unsafe {
        rusqlite::ffi::sqlite3_db_status(
            conn.handle(),
            rusqlite::ffi::SQLITE_DBSTATUS_CACHE_MISS,
            &mut cur,
            &mut hi,
            0,
        )
    };
    if rc == 0 { cur.max(0) as u64 } else { 0 }
}

struct SqliteReader {
    conn: Connection,
}

impl Reader for SqliteReader {
    fn rect(&mut self, r: &Rect) -> Result<QAnswer> {
        let m0 = sqlite_misses(&self.conn);
        let (mut count, mut id_sum) = (0u64, 0i64);
        {
            let mut st = self
                .conn
                .prepare_cached(SQL_BOX)
                .context("SQLite: preparing the box query")?;
            let mut rows = st
                .query(params![r[0], r[1], r[2], r[3]])
                .context("SQLite box query")?;
            while let Some(row) = rows.next().context("SQLite box query")? {
                let id: i64 = row.get(0)?;
                count += 1;
                id_sum = id_sum.wrapping_add(id);
            }
        }
        // The counter is 32-bit and may wrap: a negative step counts as 0.
        let misses = sqlite_misses(&self.conn).saturating_sub(m0);
        Ok(QAnswer {
            count,
            id_sum,
            misses,
        })
    }
}

impl PointIndex for SqlitePoints {
    fn insert(&mut self, p: &Points, ids: &[usize]) -> Result<()> {
        let tx = self.conn_mut()?.transaction().context("SQLite: BEGIN")?;
        {
            let mut st = tx
                .prepare_cached(SQL_INSERT)
                .context("SQLite: preparing the insert")?;
            for &i in ids {
                st.execute(params![i as i64, p.lon[i], p.lat[i]])
                    .with_context(|| format!("SQLite: inserting {i}"))?;
            }
        }
        tx.commit().context("SQLite: COMMIT")
    }

    fn delete(&mut self, id: i64) -> Result<()> {
        self.conn()?
            .execute("DELETE FROM pts WHERE id = ?1", params![id])
            .with_context(|| format!("SQLite: deleting {id}"))?;
        Ok(())
    }

    fn settle(&mut self) -> Result<()> {
        self.conn()?
            .execute_batch("PRAGMA wal_checkpoint(TRUNCATE)")
            .context("SQLite: wal_checkpoint")
    }

    fn compact(&mut self) -> Result<Option<()>> {
        Ok(None)
    }

    fn reader(&self) -> Result<Box<dyn Reader>> {
        Ok(Box::new(SqliteReader {
            conn: sqlite_conn(&self.path, self.cache)?,
        }))
    }

    fn shut(&mut self) -> Result<()> {
        if let Some(conn) = self.conn.take() {
            // The last connection of a WAL database checkpoints at close.
            conn.close().map_err(|(_, e)| e).context("closing SQLite")?;
        }
        Ok(())
    }

    fn reopen(&mut self) -> Result<()> {
        if self.conn.is_some() {
            bail!("SQLite: reopen without shut");
        }
        // page_size and WAL mode are stored in the file; synchronous is not.
        let conn = sqlite_conn(&self.path, self.cache)?;
        conn.pragma_update(None, "synchronous", "NORMAL")
            .context("SQLite: PRAGMA synchronous")?;
        self.conn = Some(conn);
        Ok(())
    }

    fn stats(&self, sys: &str, phase: &str) -> Vec<ResultRow> {
        let mut rows = Vec::new();
        let Some(conn) = &self.conn else {
            return rows;
        };
        if let Ok(pages) = conn.pragma_query_value(None, "page_count", |r| r.get::<_, i64>(0)) {
            rows.push(ResultRow::stat(
                sys,
                &format!("pages of {SQLITE_PAGE} bytes ({phase})"),
                "count",
                pages as f64,
            ));
        }
        rows
    }

    fn close(mut self: Box<Self>) -> Result<()> {
        self.shut()
    }
}

// ---------------------------------------------------------------- the runs

/// One query during the ingest.
struct QSample {
    /// Stream operations done when the query started.
    at_op: usize,
    us: f64,
    misses: u64,
}

/// A time-curve point: after `ops` operations, `records` live-or-dead
/// inserted records, `secs` since the start.
struct CurvePoint {
    ops: usize,
    records: usize,
    secs: f64,
}

struct Ingest {
    secs: f64,
    curve: Vec<CurvePoint>,
    queries: Vec<QSample>,
}

/// Runs the stream into `ix`; with `with_queries` a second thread runs the
/// boxes one after the other until the stream is done.
fn ingest(
    ix: &mut dyn PointIndex,
    p: &Points,
    stream: &[Op],
    boxes: &[Rect],
    with_queries: bool,
    what: &str,
) -> Result<Ingest> {
    let done = AtomicBool::new(false);
    let at = AtomicUsize::new(0);
    let reader = if with_queries {
        Some(ix.reader()?)
    } else {
        None
    };
    let step = (stream.len() / SAMPLES).max(1);
    let pb = crate::util::progress(stream.len() as u64, what.to_string());
    let (written, queries) = std::thread::scope(|s| {
        let q = reader.map(|mut rd| {
            let (done, at) = (&done, &at);
            s.spawn(move || -> Result<Vec<QSample>> {
                let mut out = Vec::new();
                let mut k = 0;
                while !done.load(Ordering::Acquire) && !boxes.is_empty() {
                    let at_op = at.load(Ordering::Acquire);
                    let t = Instant::now();
                    let a = rd.rect(&boxes[k % boxes.len()])?;
                    out.push(QSample {
                        at_op,
                        us: t.elapsed().as_secs_f64() * 1e6,
                        misses: a.misses,
                    });
                    k += 1;
                }
                Ok(out)
            })
        });
        let t0 = Instant::now();
        let mut run = || -> Result<Vec<CurvePoint>> {
            let mut curve = vec![CurvePoint {
                ops: 0,
                records: 0,
                secs: 0.0,
            }];
            let mut pending: Vec<usize> = Vec::with_capacity(BATCH);
            let mut records = 0;
            for (k, op) in stream.iter().enumerate() {
                match *op {
                    Op::Insert(i) => {
                        pending.push(i);
                        records += 1;
                        if pending.len() == BATCH {
                            ix.insert(p, &pending)?;
                            pending.clear();
                        }
                    }
                    Op::Delete(id) => {
                        if !pending.is_empty() {
                            ix.insert(p, &pending)?;
                            pending.clear();
                        }
                        ix.delete(id)?;
                    }
                }
                let n = k + 1;
                if n.is_multiple_of(step) || n == stream.len() {
                    if !pending.is_empty() {
                        ix.insert(p, &pending)?;
                        pending.clear();
                    }
                    at.store(n, Ordering::Release);
                    pb.set_position(n as u64);
                    curve.push(CurvePoint {
                        ops: n,
                        records,
                        secs: t0.elapsed().as_secs_f64(),
                    });
                }
            }
            Ok(curve)
        };
        let written = run();
        done.store(true, Ordering::Release);
        let queries = match q {
            Some(h) => h
                .join()
                .map_err(|_| anyhow!("the query thread panicked"))
                .and_then(|r| r),
            None => Ok(Vec::new()),
        };
        (written, queries)
    });
    pb.finish_and_clear();
    let curve = written?;
    let queries = queries?;
    let secs = curve.last().map_or(0.0, |c| c.secs);
    Ok(Ingest {
        secs,
        curve,
        queries,
    })
}

/// The queries of one phase after the ingest.
struct Phase {
    /// Latency of each query, µs.
    us: Vec<f64>,
    /// Cache misses of each query (Silt block cache / SQLite page cache).
    misses: Vec<u64>,
    /// `read_bytes` of `/proc/self/io` during each query: bytes the process
    /// caused to be read from the storage device (reads, mmap faults and
    /// their readahead); empty where `/proc/self/io` is unavailable.
    read_bytes: Vec<u64>,
    /// Major page faults during each query (whole process); empty where
    /// getrusage failed.
    faults: Vec<u64>,
    /// Mean results per query.
    results: f64,
}

/// Runs `boxes` one after the other; checks the first CHECK answers against
/// the brute-force counts; measures each query's time, misses and storage
/// reads (the counters are read outside the timed part).
fn query_phase(
    rd: &mut dyn Reader,
    p: &Points,
    boxes: &[Rect],
    dead: Option<&[bool]>,
    who: &str,
) -> Result<Phase> {
    let mut ph = Phase {
        us: Vec::with_capacity(boxes.len()),
        misses: Vec::with_capacity(boxes.len()),
        read_bytes: Vec::with_capacity(boxes.len()),
        faults: Vec::with_capacity(boxes.len()),
        results: 0.0,
    };
    let (mut io_ok, mut faults_ok, mut results) = (true, true, 0u64);
    for (j, r) in boxes.iter().enumerate() {
        let (io0, ok0) = IoCounters::read();
        let f0 = major_faults();
        let t = Instant::now();
        let a = rd.rect(r)?;
        let us = t.elapsed().as_secs_f64() * 1e6;
        let (io1, ok1) = IoCounters::read();
        let f1 = major_faults();
        ph.us.push(us);
        ph.misses.push(a.misses);
        io_ok &= ok0 && ok1;
        ph.read_bytes.push(io1.since(&io0).read_bytes);
        match (f0, f1) {
            (Some(a), Some(b)) => ph.faults.push(b.saturating_sub(a)),
            _ => faults_ok = false,
        }
        results += a.count;
        if j < CHECK {
            let want = p.count(r, dead);
            if (a.count, a.id_sum) != want {
                bail!(
                    "{who}: box {j} {r:?} found {} records (id sum {}), a brute-force count finds {} (id sum {})",
                    a.count,
                    a.id_sum,
                    want.0,
                    want.1
                );
            }
        }
    }
    if !io_ok {
        ph.read_bytes.clear();
    }
    if !faults_ok {
        ph.faults.clear();
    }
    ph.results = results as f64 / boxes.len().max(1) as f64;
    Ok(ph)
}

fn mean_u64(v: &[u64]) -> f64 {
    v.iter().sum::<u64>() as f64 / v.len().max(1) as f64
}

fn phase_rows(sys: &str, phase: &str, ph: &Phase) -> Vec<ResultRow> {
    let us = &ph.us;
    let n = us.len().max(1) as f64;
    let mut sorted: Vec<u32> = us.iter().map(|&x| x.min(u32::MAX as f64) as u32).collect();
    sorted.sort_unstable();
    let mut rows = vec![
        ResultRow::measure(
            sys,
            &format!("query mean ({phase})"),
            "ms",
            us.iter().sum::<f64>() / n / 1e3,
        ),
        ResultRow::stat(
            sys,
            &format!("query p50 ({phase})"),
            "ms",
            percentile(&sorted, 50.0) / 1e3,
        ),
        ResultRow::stat(
            sys,
            &format!("query p99 ({phase})"),
            "ms",
            percentile(&sorted, 99.0) / 1e3,
        ),
        ResultRow::measure(
            sys,
            &format!("cache misses per query ({phase})"),
            "misses",
            mean_u64(&ph.misses),
        ),
    ];
    if !ph.read_bytes.is_empty() {
        rows.push(ResultRow::measure(
            sys,
            &format!("disk KiB read per query ({phase})"),
            "KiB",
            mean_u64(&ph.read_bytes) / 1024.0,
        ));
    }
    if !ph.faults.is_empty() {
        rows.push(ResultRow::measure(
            sys,
            &format!("major faults per query ({phase})"),
            "faults",
            mean_u64(&ph.faults),
        ));
    }
    rows.push(ResultRow::stat(
        sys,
        &format!("queries ({phase})"),
        "count",
        us.len() as f64,
    ));
    rows.push(ResultRow::stat(
        sys,
        &format!("mean results per query ({phase})"),
        "results",
        ph.results,
    ));
    rows
}

/// What a cold phase found besides the queries.
struct ColdPhase {
    rows: Vec<ResultRow>,
    /// Lines for the results header (eviction not verified, counters missing).
    notes: Vec<String>,
    /// Mean ms and KiB read per query, for the console.
    summary: String,
}

/// The cold variant of a query phase: the index is flushed and closed, every
/// file under `dir` fsynced and dropped from the OS page cache, the index
/// reopened (empty block cache / page cache) and its files evicted again (the
/// open may have read some: Silt's component metadata), then `boxes` run one
/// after the other without further eviction, so the caches warm up as the
/// phase proceeds, as in the paper's runs.
fn cold_phase(
    ix: &mut dyn PointIndex,
    dir: &Path,
    p: &Points,
    boxes: &[Rect],
    dead: Option<&[bool]>,
    sys: &str,
    phase: &str,
) -> Result<ColdPhase> {
    ix.settle()?;
    ix.shut()?;
    evict_os_cache(dir).with_context(|| format!("{sys}: evicting the files before {phase}"))?;
    let (io0, _) = IoCounters::read();
    let t = Instant::now();
    ix.reopen()?;
    let reopen_ms = t.elapsed().as_secs_f64() * 1e3;
    let reopen_read = IoCounters::read().0.since(&io0).read_bytes;
    let files = evict_os_cache(dir)
        .with_context(|| format!("{sys}: evicting the files after the reopen for {phase}"))?;
    let (cached, total) =
        os_cached_bytes(dir).with_context(|| format!("{sys}: page-cache residency ({phase})"))?;
    let mut rd = ix.reader()?;
    let ph = query_phase(rd.as_mut(), p, boxes, dead, sys)?;
    drop(rd);
    let mut rows = phase_rows(sys, phase, &ph);
    let mut notes = Vec::new();
    rows.extend([
        ResultRow::stat(
            sys,
            &format!("files evicted ({phase})"),
            "count",
            files as f64,
        ),
        ResultRow::stat(
            sys,
            &format!("database size ({phase})"),
            "MB",
            total as f64 / 1e6,
        ),
        ResultRow::stat(
            sys,
            &format!("OS-cached KiB of the database before the first query ({phase})"),
            "KiB",
            cached as f64 / 1024.0,
        ),
        ResultRow::stat(sys, &format!("reopen time ({phase})"), "ms", reopen_ms),
        ResultRow::stat(
            sys,
            &format!("disk KiB read by the reopen ({phase})"),
            "KiB",
            reopen_read as f64 / 1024.0,
        ),
    ]);
    if total > 0 && cached * 10 > total {
        let msg = format!(
            "{sys} ({phase}): {:.1} of {:.1} MB of the database were still in the OS page cache after the eviction",
            cached as f64 / 1e6,
            total as f64 / 1e6
        );
        eprintln!("WARNING: {msg}");
        notes.push(msg);
    }
    // Where the eviction took, the warming shows from the first queries to the last.
    let tenth = (ph.us.len() / 10).max(1);
    let (first, last) = (
        ..tenth.min(ph.us.len()),
        ph.us.len().saturating_sub(tenth)..,
    );
    rows.push(ResultRow::stat(
        sys,
        &format!("query mean ({phase}, first 10%)"),
        "ms",
        ph.us[first].iter().sum::<f64>() / tenth as f64 / 1e3,
    ));
    rows.push(ResultRow::stat(
        sys,
        &format!("query mean ({phase}, last 10%)"),
        "ms",
        ph.us[last.clone()].iter().sum::<f64>() / tenth as f64 / 1e3,
    ));
    let kib = if ph.read_bytes.is_empty() {
        let msg = format!(
            "{sys} ({phase}): /proc/self/io is unavailable: the disk bytes read per query were not measured, and the eviction not verified"
        );
        eprintln!("note: {msg}");
        notes.push(msg);
        f64::NAN
    } else {
        let rb = &ph.read_bytes;
        let worked = rb.first().is_some_and(|&b| b > 0);
        rows.push(ResultRow::stat(
            sys,
            &format!("disk KiB read by the first query ({phase})"),
            "KiB",
            rb.first().copied().unwrap_or(0) as f64 / 1024.0,
        ));
        rows.push(ResultRow::stat(
            sys,
            &format!("disk KiB read per query ({phase}, first 10%)"),
            "KiB",
            mean_u64(&rb[first]) / 1024.0,
        ));
        rows.push(ResultRow::stat(
            sys,
            &format!("disk KiB read per query ({phase}, last 10%)"),
            "KiB",
            mean_u64(&rb[last]) / 1024.0,
        ));
        rows.push(ResultRow::stat(
            sys,
            &format!("disk MiB read by all queries ({phase})"),
            "MiB",
            rb.iter().sum::<u64>() as f64 / (1 << 20) as f64,
        ));
        rows.push(ResultRow::stat(
            sys,
            &format!("eviction verified: the first query read the disk ({phase})"),
            "yes=1",
            if worked { 1.0 } else { 0.0 },
        ));
        if !worked {
            let msg = format!(
                "{sys} ({phase}): the first query after the eviction read 0 bytes from the disk: the eviction did not take effect (tmpfs? pages still mapped?); this phase is not cold"
            );
            eprintln!("WARNING: {msg}");
            notes.push(msg);
        }
        mean_u64(rb) / 1024.0
    };
    let summary = format!(
        "{:.2} ms per query, {} KiB read per query, {:.1} major faults per query ({:.0} KiB cached of {:.1} MB at the start)",
        ph.us.iter().sum::<f64>() / ph.us.len().max(1) as f64 / 1e3,
        fmt_num(kib),
        mean_u64(&ph.faults),
        cached as f64 / 1024.0,
        total as f64 / 1e6
    );
    Ok(ColdPhase {
        rows,
        notes,
        summary,
    })
}

/// (mean ms, mean misses, queries) of the queries started in each interval of
/// the time curve that had any.
fn interval_means(ing: &Ingest) -> Vec<(f64, f64, usize)> {
    ing.curve
        .windows(2)
        .filter_map(|w| {
            let qs: Vec<&QSample> = ing
                .queries
                .iter()
                .filter(|q| q.at_op >= w[0].ops && q.at_op < w[1].ops)
                .collect();
            let k = qs.len();
            (k > 0).then(|| {
                (
                    qs.iter().map(|q| q.us).sum::<f64>() / k as f64 / 1e3,
                    qs.iter().map(|q| q.misses as f64).sum::<f64>() / k as f64,
                    k,
                )
            })
        })
        .collect()
}

/// The queries during the ingest. The query thread runs back to back, so
/// the early intervals (a small index) hold most of the queries: the
/// headline numbers weight every interval of the curve equally (the mean of
/// the Fig. 5(c) points), and the second half of the ingest is reported alone.
fn during_rows(sys: &str, ing: &Ingest) -> Vec<ResultRow> {
    let iv = interval_means(ing);
    let k = iv.len().max(1) as f64;
    let half = ing.curve.last().map_or(0, |c| c.ops) / 2;
    let late: Vec<&QSample> = ing.queries.iter().filter(|q| q.at_op >= half).collect();
    let l = late.len().max(1) as f64;
    let mut sorted: Vec<u32> = ing
        .queries
        .iter()
        .map(|q| q.us.min(u32::MAX as f64) as u32)
        .collect();
    sorted.sort_unstable();
    vec![
        ResultRow::measure(
            sys,
            &format!("query mean ({DURING})"),
            "ms",
            iv.iter().map(|x| x.0).sum::<f64>() / k,
        ),
        ResultRow::measure(
            sys,
            &format!("cache misses per query ({DURING})"),
            "misses",
            iv.iter().map(|x| x.1).sum::<f64>() / k,
        ),
        ResultRow::stat(
            sys,
            &format!("query mean ({DURING}, second half)"),
            "ms",
            late.iter().map(|q| q.us).sum::<f64>() / l / 1e3,
        ),
        ResultRow::stat(
            sys,
            &format!("cache misses per query ({DURING}, second half)"),
            "misses",
            late.iter().map(|q| q.misses as f64).sum::<f64>() / l,
        ),
        ResultRow::stat(
            sys,
            &format!("queries ({DURING})"),
            "count",
            ing.queries.len() as f64,
        ),
        ResultRow::stat(
            sys,
            &format!("queries ({DURING}, second half)"),
            "count",
            late.len() as f64,
        ),
        ResultRow::stat(
            sys,
            &format!("query p50 over all queries ({DURING})"),
            "ms",
            percentile(&sorted, 50.0) / 1e3,
        ),
    ]
}

/// Writes one experiment's curve rows.
fn curve_lines(exp: &str, sys: &str, run: usize, ing: &Ingest) -> Vec<String> {
    let mut out = Vec::new();
    for w in ing.curve.windows(2) {
        let (a, b) = (&w[0], &w[1]);
        let qs: Vec<&QSample> = ing
            .queries
            .iter()
            .filter(|q| q.at_op >= a.ops && q.at_op < b.ops)
            .collect();
        let (ms, miss) = if qs.is_empty() {
            (String::new(), String::new())
        } else {
            let k = qs.len() as f64;
            (
                format!("{:.4}", qs.iter().map(|q| q.us).sum::<f64>() / k / 1e3),
                format!("{:.2}", qs.iter().map(|q| q.misses as f64).sum::<f64>() / k),
            )
        };
        out.push(format!(
            "{exp},{sys},{run},{},{},{:.3},{},{ms},{miss}",
            b.records,
            b.ops,
            b.secs,
            qs.len()
        ));
    }
    out
}

const CURVE_HEADER: &str =
    "experiment,system,run,records,ops,elapsed_s,queries,query_ms_mean,query_misses_mean";

/// One system through the raw ingest, the ingest with queries, the queries
/// after ingest and (Silt) after compaction.
#[allow(clippy::too_many_arguments)]
fn run_system(
    sys: &str,
    open: &dyn Fn(&Path) -> Result<Box<dyn PointIndex>>,
    p: &Points,
    stream: &[Op],
    boxes: &[Rect],
    sz: Sizes,
    ctx: &Ctx,
    curve: &mut Vec<String>,
) -> Result<Vec<ResultRow>> {
    let n = p.lon.len();
    let mut rows = Vec::new();
    // (a) raw inserts.
    {
        let dir = ScratchDir::new(&ctx.scratch, &dir_name(&format!("{sys}-raw")))?;
        let mut ix = open(dir.path())?;
        let ing = ingest(
            ix.as_mut(),
            p,
            stream,
            boxes,
            false,
            &format!("{sys}: {RAW}"),
        )?;
        rows.push(ResultRow::measure(
            sys,
            &format!("ingest ({RAW})"),
            "records/s",
            n as f64 / ing.secs.max(1e-9),
        ));
        rows.push(ResultRow::stat(
            sys,
            &format!("ingest time ({RAW})"),
            "s",
            ing.secs,
        ));
        curve.extend(curve_lines(RAW, sys, ctx.run, &ing));
        eprintln!(
            "{sys}: {RAW}: {} records/s",
            fmt_num(n as f64 / ing.secs.max(1e-9))
        );
        ix.close()?;
    }
    // (b) inserts with a concurrent query stream, then the queries after.
    let dir = ScratchDir::new(&ctx.scratch, &dir_name(&format!("{sys}-q")))?;
    let mut ix = open(dir.path())?;
    let ing = ingest(
        ix.as_mut(),
        p,
        stream,
        boxes,
        true,
        &format!("{sys}: {WITH_QUERIES}"),
    )?;
    rows.push(ResultRow::measure(
        sys,
        &format!("ingest ({WITH_QUERIES})"),
        "records/s",
        n as f64 / ing.secs.max(1e-9),
    ));
    rows.push(ResultRow::stat(
        sys,
        &format!("ingest time ({WITH_QUERIES})"),
        "s",
        ing.secs,
    ));
    rows.extend(during_rows(sys, &ing));
    curve.extend(curve_lines(WITH_QUERIES, sys, ctx.run, &ing));
    ix.settle()?;
    rows.extend(ix.stats(sys, AFTER_INGEST));
    rows.push(ResultRow::stat(
        sys,
        &format!("disk size ({AFTER_INGEST})"),
        "MB",
        dir_size(dir.path())? as f64 / 1e6,
    ));
    let after = &boxes[..boxes.len().min(sz.queries)];
    let mut rd = ix.reader()?;
    let ph = query_phase(rd.as_mut(), p, after, None, sys)?;
    drop(rd);
    rows.extend(phase_rows(sys, AFTER_INGEST, &ph));
    let mean_after = ph.us.iter().sum::<f64>() / ph.us.len().max(1) as f64 / 1e3;
    let cold = |ix: &mut dyn PointIndex, phase: &str| -> Result<Vec<ResultRow>> {
        let c = cold_phase(ix, dir.path(), p, after, None, sys, phase)?;
        for n in c.notes {
            ctx.note(n);
        }
        eprintln!("{sys}: {phase}: {}", c.summary);
        Ok(c.rows)
    };
    rows.extend(cold(ix.as_mut(), AFTER_INGEST_COLD)?);
    if ix.compact()?.is_some() {
        rows.extend(ix.stats(sys, AFTER_COMPACTION));
        rows.push(ResultRow::stat(
            sys,
            &format!("disk size ({AFTER_COMPACTION})"),
            "MB",
            dir_size(dir.path())? as f64 / 1e6,
        ));
        let mut rd = ix.reader()?;
        let ph = query_phase(rd.as_mut(), p, after, None, sys)?;
        drop(rd);
        rows.extend(phase_rows(sys, AFTER_COMPACTION, &ph));
        rows.extend(cold(ix.as_mut(), AFTER_COMPACTION_COLD)?);
    }
    eprintln!(
        "{sys}: {WITH_QUERIES}: {} records/s, {} queries during ingest; {mean_after:.2} ms per query after ingest",
        fmt_num(n as f64 / ing.secs.max(1e-9)),
        ing.queries.len()
    );
    ix.close()?;
    Ok(rows)
}

/// Fig. 6: a Silt variant under the stream with 1% deletes and concurrent
/// queries, then the queries after ingest.
#[allow(clippy::too_many_arguments)]
fn run_deletes(
    sys: &str,
    open: &dyn Fn(&Path) -> Result<Box<dyn PointIndex>>,
    p: &Points,
    stream: &[Op],
    dead: &[bool],
    boxes: &[Rect],
    sz: Sizes,
    ctx: &Ctx,
    curve: &mut Vec<String>,
) -> Result<Vec<ResultRow>> {
    let label = format!("{sys}+del");
    let dir = ScratchDir::new(&ctx.scratch, &dir_name(&label))?;
    let mut ix = open(dir.path())?;
    let ing = ingest(
        ix.as_mut(),
        p,
        stream,
        boxes,
        true,
        &format!("{label}: {DELETES}"),
    )?;
    let mut rows = vec![
        ResultRow::measure(
            &label,
            &format!("ingest ({DELETES})"),
            "ops/s",
            stream.len() as f64 / ing.secs.max(1e-9),
        ),
        ResultRow::stat(&label, &format!("ingest time ({DELETES})"), "s", ing.secs),
    ];
    rows.extend(during_rows(&label, &ing));
    curve.extend(curve_lines(DELETES, &label, ctx.run, &ing));
    ix.settle()?;
    rows.extend(ix.stats(&label, AFTER_INGEST));
    let after = &boxes[..boxes.len().min(sz.queries)];
    let mut rd = ix.reader()?;
    let ph = query_phase(rd.as_mut(), p, after, Some(dead), &label)?;
    drop(rd);
    rows.extend(phase_rows(&label, AFTER_INGEST, &ph));
    eprintln!(
        "{label}: {} ops/s; {:.2} ms per query during ingest, {:.2} ms after",
        fmt_num(stream.len() as f64 / ing.secs.max(1e-9)),
        ing.queries.iter().map(|q| q.us).sum::<f64>() / ing.queries.len().max(1) as f64 / 1e3,
        ph.us.iter().sum::<f64>() / ph.us.len().max(1) as f64 / 1e3
    );
    ix.close()?;
    Ok(rows)
}

impl Workload for AsterixTable4 {
    fn name(&self) -> &'static str {
        "asterix-table4"
    }

    fn description(&self) -> &'static str {
        "AsterixDB Table 4 / Figs. 5-6: points into an LSM R-tree (deleted-key B+-trees), an AMLSM R-tree and SQLite's in-place R*Tree: ingest curve, queries during/after ingest and after compaction with per-query cache misses, warm and cold (files evicted from the OS page cache: disk bytes and major faults per query), 1% deletes"
    }

    fn explanation(&self) -> &'static str {
        "Issue 8: seed 003 §6.2 (the paper: 250 M 40-byte points around ~4,500 US cities, an LSM \
         R-tree, an AMLSM R-tree and an in-place R-tree accessed directly; Fig. 5(a) ingest time, \
         5(b) ingest with a concurrent query stream, 5(c) query time during the ingest, Table 4 \
         queries after ingest and after a full compaction with buffer-cache misses, Fig. 6 query \
         time with 1% deletes). Here: points clustered around the 5,000 most populous GeoNames \
         cities (probability proportional to population^0.7, shifted by uniform [-0.25, 0.25] \
         degrees as in the paper), ids 0, 1, 2, ... in ingest order; small 400 K, medium/full 2 M. \
         Systems: `silt-lsm-rtree` and `silt-amlsm-rtree`: a Silt dataset pts(id int primary key, \
         loc point) with an R-tree on loc, deleted-key B+-tree resp. antimatter reconciliation, \
         write_batch of 1,000 in insert mode (each record its own transaction; the primary-key \
         uniqueness check the paper's direct index access did not have), Durability::None, one \
         partition, prefix(max, 5) on both trees (the paper's policy; max 2 MiB small / 8 MiB \
         medium, about 1/10 of the data as the paper's 1 GB of 11.3 GB), memory budget 1 / 2 MiB, \
         block cache 2 / 4 MiB; `sqlite-rtree`: SQLite's R*Tree virtual table alone (id, box, exact \
         lon/lat as auxiliary columns: 40-byte entries as the paper's), 2 KiB pages (the paper's \
         in-place R-tree page), cache_size 3 / 6 MiB (Silt's budget + cache, as the paper's 1.5 GB \
         vs 0.5 + 1 GB), WAL, synchronous=NORMAL, one transaction per 1,000 records; its data \
         outgrows this page cache but not the OS page cache (no cgroup limit here). Queries: \
         squares centred on random records, the side calibrated for ~1,000 results over all \
         records; Silt index-only Query::Intersects, SQLite the R*Tree's box search filtered on the \
         exact coordinates. Cache misses per query: Silt's block-cache misses on the query thread \
         (silt::storage::cache::thread_misses, so the writer's uniqueness checks are not counted), \
         SQLite's SQLITE_DBSTATUS_CACHE_MISS of the query connection. Per system: (a) the stream \
         alone (time curve in asterix-table4/curve.csv/png, sampled 40 times); (b) a fresh index \
         with a second thread running the boxes one after the other during the whole ingest (time \
         curve, and the mean query time and misses per interval; `during ingest` is the mean of \
         these interval means, since the back-to-back query thread runs most of its queries while \
         the index is still small; the second half of the ingest alone is in the statistics); \
         then after the final flush and merges 1,000 (small 300) boxes, then (Silt) Dataset::compact() and the same boxes again; \
         the first 50 answers are checked against a brute-force count. Cold cache (after each of \
         these two phases, the same boxes again: `after ingest, cold`, `after compaction, cold`): \
         the index is flushed and closed, every file of its directory fsynced and dropped from the \
         OS page cache (posix_fadvise DONTNEED), the index reopened with empty internal caches \
         (a new Silt Database / SQLite connection) and its files dropped again (what the open \
         read), the residue checked with mincore; no eviction between the queries, so the caches \
         warm up as the phase proceeds, as in the paper. Per query, besides time and cache \
         misses: the bytes the process caused to be read from the disk (read_bytes of \
         /proc/self/io: reads, mmap faults and their readahead) and the major page faults \
         (getrusage); in the warm phases both are ~0. Fig. 6: both Silt variants \
         under a stream where each operation deletes a random live earlier record with \
         probability 1% instead of inserting, with the query thread; the no-merge policy, so that \
         every flush stays a component and the deleted-key checks span many components."
    }

    fn durability(&self) -> &'static str {
        "WAL on, no fsync per commit (Silt Durability::None, SQLite WAL synchronous=NORMAL)"
    }

    fn run(&self, scale: Scale, ctx: &Ctx) -> Result<Vec<ResultRow>> {
        let sz = sizes(scale);
        let p = Points::generate(sz.points, ctx.seed)?;
        let boxes = make_boxes(&p, sz.queries.max(CHECK), ctx.seed);
        let (stream, _) = ops(sz.points, false, ctx.seed);
        let (del_stream, dead) = ops(sz.points, true, ctx.seed);
        let prefix = MergePolicy::parse(&format!("prefix({}MB,5)", sz.prefix_max >> 20))?;
        let no_merge = MergePolicy::NoMerge;
        ctx.note(format!(
            "{LSM} / {AMLSM}: Silt dataset pts(id int, loc point), R-tree loc with deleted-key B+-tree / antimatter reconciliation, {prefix} (the deletes runs: no-merge), memory budget {} MiB, block cache {} MiB, write_batch of {BATCH} in insert mode, Durability::None",
            sz.budget >> 20,
            sz.cache >> 20
        ));
        ctx.note(format!(
            "{INPLACE}: SQLite {} R*Tree pts(id, min_x, max_x, min_y, max_y, +lon, +lat), page_size {SQLITE_PAGE}, cache_size {} MiB per connection, WAL, synchronous=NORMAL, one transaction per {BATCH} records; queries on a second connection",
            crate::machine::sqlite_version(),
            sz.sqlite_cache >> 20
        ));
        ctx.note(format!(
            "cold phases: database files fsynced and evicted with posix_fadvise(DONTNEED) after close and after reopen; disk readahead of the scratch disk {} KiB (read_ahead_kb: what one fault on a mapped file can read around the page); queries per cold phase {} (as warm)",
            crate::util::read_ahead_kb(&ctx.scratch).map_or("unknown".to_string(), |k| k.to_string()),
            sz.queries
        ));
        let mut rows = vec![
            ResultRow::stat("data", "points", "count", sz.points as f64),
            ResultRow::stat(
                "data",
                "deletes in the deletes stream",
                "count",
                dead.iter().filter(|&&d| d).count() as f64,
            ),
        ];
        // A Silt R-tree with a reconciliation mode and a merge policy.
        let silt = |rec: ReconcileOption, policy: &'_ MergePolicy| {
            let policy = policy.clone();
            move |d: &Path| -> Result<Box<dyn PointIndex>> {
                Ok(Box::new(SiltPoints::open(d, sz, rec, &policy)?))
            }
        };
        let open_lsm = silt(ReconcileOption::DeletedKeys, &prefix);
        let open_am = silt(ReconcileOption::Antimatter, &prefix);
        let open_sql = |d: &Path| -> Result<Box<dyn PointIndex>> {
            Ok(Box::new(SqlitePoints::open(d, sz.sqlite_cache)?))
        };
        let open_lsm_nm = silt(ReconcileOption::DeletedKeys, &no_merge);
        let open_am_nm = silt(ReconcileOption::Antimatter, &no_merge);
        type Open<'a> = &'a dyn Fn(&Path) -> Result<Box<dyn PointIndex>>;
        let systems: Vec<(&str, Open)> =
            vec![(LSM, &open_lsm), (AMLSM, &open_am), (INPLACE, &open_sql)];
        let systems: Vec<_> = systems.into_iter().filter(|(l, _)| wants(ctx, l)).collect();
        let mut curve = Vec::new();
        let k = systems.len().max(1);
        for i in 0..systems.len() {
            let (label, open) = systems[(i + ctx.run) % k];
            rows.extend(run_system(
                label, open, &p, &stream, &boxes, sz, ctx, &mut curve,
            )?);
        }
        let del: Vec<(&str, Open)> = vec![(LSM, &open_lsm_nm), (AMLSM, &open_am_nm)];
        let del: Vec<_> = del.into_iter().filter(|(l, _)| wants(ctx, l)).collect();
        for i in 0..del.len() {
            let (label, open) = del[(i + ctx.run) % del.len().max(1)];
            rows.extend(run_deletes(
                label,
                open,
                &p,
                &del_stream,
                &dead,
                &boxes,
                sz,
                ctx,
                &mut curve,
            )?);
        }
        rows.extend(ratios(&rows));
        write_curve(ctx, &curve)?;
        Ok(rows)
    }
}

/// In-place over LSM (ingest time, query time, misses) and deleted keys over
/// antimatter with deletes.
fn ratios(rows: &[ResultRow]) -> Vec<ResultRow> {
    let get = |sys: &str, m: &str| {
        rows.iter()
            .find(|r| r.system == sys && r.metric == m && r.kind == Kind::Measure)
            .map(|r| r.value)
    };
    let mut out = Vec::new();
    let mut ratio = |a: &str, b: &str, m: &str, what: &str| {
        if let (Some(x), Some(y)) = (get(a, m), get(b, m))
            && y > 0.0
        {
            out.push(ResultRow::new(
                &format!("{a}/{b}"),
                &format!("{m} {what}"),
                "x",
                Kind::Ratio,
                x / y,
            ));
        }
    };
    for lsm in [LSM, AMLSM] {
        for m in [
            format!("ingest ({RAW})"),
            format!("ingest ({WITH_QUERIES})"),
        ] {
            ratio(lsm, INPLACE, &m, "(rate: LSM / in place)");
        }
        for ph in [DURING, AFTER_INGEST, AFTER_INGEST_COLD] {
            ratio(
                INPLACE,
                lsm,
                &format!("query mean ({ph})"),
                "(time: in place / LSM)",
            );
        }
        ratio(
            INPLACE,
            lsm,
            &format!("disk KiB read per query ({AFTER_INGEST_COLD})"),
            "(disk reads: in place / LSM)",
        );
    }
    let (dk, am) = (format!("{LSM}+del"), format!("{AMLSM}+del"));
    for ph in [DURING, AFTER_INGEST] {
        ratio(
            &dk,
            &am,
            &format!("query mean ({ph})"),
            "(time: deleted keys / antimatter)",
        );
    }
    ratio(
        LSM,
        AMLSM,
        &format!("query mean ({AFTER_INGEST})"),
        "(time: deleted keys / antimatter; no deletes)",
    );
    out
}

/// `asterix-table4/curve.csv` (all runs: the first run truncates it) and its plot.
fn write_curve(ctx: &Ctx, lines: &[String]) -> Result<()> {
    // In a subdirectory: `report` reads every CSV directly in the results directory.
    let dir = ctx.out.join("asterix-table4");
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let path = dir.join("curve.csv");
    let mut f = OpenOptions::new()
        .create(true)
        .write(true)
        .append(ctx.run > 0)
        .truncate(ctx.run == 0)
        .open(&path)
        .with_context(|| format!("writing {}", path.display()))?;
    if ctx.run == 0 {
        writeln!(f, "{CURVE_HEADER}")?;
    }
    for l in lines {
        writeln!(f, "{l}")?;
    }
    drop(f);
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("py/plot_table4_curve.py");
    let png = dir.join("curve.png");
    match Command::new("python3")
        .arg(&script)
        .arg(&path)
        .arg(&png)
        .output()
    {
        Ok(o) if o.status.success() => eprintln!("wrote {} and {}", path.display(), png.display()),
        Ok(o) => eprintln!(
            "note: plotting {} failed: {}",
            path.display(),
            String::from_utf8_lossy(&o.stderr).trim()
        ),
        Err(e) => eprintln!("note: could not run python3 for the curve plot: {e}"),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delete_stream_deletes_live_earlier_records_once() {
        let (s, dead) = ops(20_000, true, 7);
        let mut live = vec![false; 20_000];
        let mut deletes = 0;
        for op in &s {
            match *op {
                Op::Insert(i) => live[i] = true,
                Op::Delete(id) => {
                    let i = id as usize;
                    assert!(live[i], "deletes a record not live");
                    live[i] = false;
                    deletes += 1;
                }
            }
        }
        assert!(deletes > 100 && deletes < 400, "{deletes} deletes");
        assert!(live.iter().zip(&dead).all(|(l, d)| *l != *d));
        let (s, dead) = ops(1000, false, 7);
        assert_eq!(s.len(), 1000);
        assert!(!dead.iter().any(|&d| d));
    }

    #[test]
    fn silt_and_sqlite_answer_like_the_brute_force_count() {
        let scratch = ScratchDir::new(
            &std::env::temp_dir(),
            &format!("silt-bench-table4-{}", std::process::id()),
        )
        .unwrap();
        let p = Points::generate(5000, 3).unwrap();
        let boxes = make_boxes(&p, 20, 3);
        let (stream, dead) = ops(5000, true, 3);
        let sz = sizes(Scale::Small);
        let sq_dir = scratch.path().join("sqlite");
        std::fs::create_dir_all(&sq_dir).unwrap();
        let mut sq = SqlitePoints::open(&sq_dir, 1 << 20).unwrap();
        let mut si = SiltPoints::open(
            &scratch.path().join("silt"),
            sz,
            ReconcileOption::DeletedKeys,
            &MergePolicy::NoMerge,
        )
        .unwrap();
        let silt_dir = scratch.path().join("silt");
        for (ix, dir) in [
            (&mut sq as &mut dyn PointIndex, &sq_dir),
            (&mut si, &silt_dir),
        ] {
            let ing = ingest(ix, &p, &stream, &boxes, true, "test").unwrap();
            assert!(ing.curve.len() > SAMPLES / 2);
            ix.settle().unwrap();
            let mut rd = ix.reader().unwrap();
            let ph = query_phase(rd.as_mut(), &p, &boxes, Some(&dead), "test").unwrap();
            drop(rd);
            assert_eq!(ph.us.len(), boxes.len());
            // Closed, evicted and reopened, the index still answers right
            // (query_phase checks against the brute-force count).
            let c = cold_phase(ix, dir, &p, &boxes, Some(&dead), "test", "cold").unwrap();
            assert!(c.rows.iter().any(|r| r.metric == "query mean (cold)"));
            assert!(
                c.rows
                    .iter()
                    .any(|r| r.metric == "files evicted (cold)" && r.value > 0.0)
            );
        }
        Box::new(sq).close().unwrap();
        Box::new(si).close().unwrap();
    }
}
