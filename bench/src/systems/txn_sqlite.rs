//! SQLite (the bundled build) as a [`TxnStore`]: tables `place_a`, `place_b`
//! `(id INTEGER PRIMARY KEY, v INTEGER, lon REAL, lat REAL, payload BLOB)`
//! with an index on `v` and an R*Tree `<table>_loc(id, min_x, max_x, min_y,
//! max_y)` on the point (the spatial index of the SQLite peer of the spatial
//! workloads), WAL journal mode, `synchronous=FULL` (the WAL is fsynced at
//! every commit). A transaction is `BEGIN IMMEDIATE`, per row an
//! `INSERT ... ON CONFLICT(id) DO UPDATE` into the table and an
//! `INSERT OR REPLACE` into its R*Tree, `COMMIT`. One connection per client
//! thread; SQLite admits one writer at a time, so the client threads take
//! turns through a mutex (FIFO-ish hand-over instead of the busy handler's
//! sleeps, the best case for SQLite), with `busy_timeout` as a safety net.

use std::{
    path::{Path, PathBuf},
    sync::Mutex,
    time::Duration,
};

use anyhow::{Context, Result, anyhow, bail};
use rusqlite::{Connection, params};

use super::{System, TXN_TABLES, TxnClient, TxnRow, TxnStore};
use crate::{fsync_count, results::ResultRow};

const BUSY_TIMEOUT: Duration = Duration::from_secs(60);
/// Page cache per connection, like Silt's block cache and PostgreSQL's shared_buffers.
const CACHE_BYTES: i64 = 256 << 20;

fn upsert_sql(table: &str) -> String {
    format!(
        "INSERT INTO {table}(id, v, lon, lat, payload) VALUES (?1, ?2, ?3, ?4, ?5) \
         ON CONFLICT(id) DO UPDATE SET v = excluded.v, lon = excluded.lon, lat = excluded.lat, \
         payload = excluded.payload"
    )
}

fn rtree_sql(table: &str) -> String {
    format!(
        "INSERT OR REPLACE INTO {table}_loc(id, min_x, max_x, min_y, max_y) VALUES (?1, ?2, ?2, ?3, ?3)"
    )
}

pub struct SqliteTxn {
    path: PathBuf,
    /// Held by the client thread whose transaction is running.
    writer: Mutex<()>,
}

impl SqliteTxn {
    pub fn open(dir: &Path) -> Result<Self> {
        let s = Self {
            path: dir.join("txn.sqlite"),
            writer: Mutex::new(()),
        };
        let conn = s.connect()?;
        let mode: String = conn
            .pragma_update_and_check(None, "journal_mode", "WAL", |r| r.get(0))
            .context("SQLite: PRAGMA journal_mode=WAL")?;
        if !mode.eq_ignore_ascii_case("wal") {
            bail!("SQLite refused WAL journal mode (got {mode})");
        }
        for t in TXN_TABLES {
            conn.execute_batch(&format!(
                "CREATE TABLE {t}(id INTEGER PRIMARY KEY, v INTEGER NOT NULL, lon REAL NOT NULL, \
                 lat REAL NOT NULL, payload BLOB NOT NULL); \
                 CREATE INDEX {t}_v ON {t}(v); \
                 CREATE VIRTUAL TABLE {t}_loc USING rtree(id, min_x, max_x, min_y, max_y)"
            ))
            .with_context(|| format!("SQLite: creating {t} with its index and R*Tree"))?;
        }
        Ok(s)
    }

    fn connect(&self) -> Result<Connection> {
        let conn = Connection::open(&self.path)
            .with_context(|| format!("opening SQLite at {}", self.path.display()))?;
        conn.busy_timeout(BUSY_TIMEOUT)
            .context("SQLite: busy_timeout")?;
        conn.pragma_update(None, "synchronous", "FULL")
            .context("SQLite: PRAGMA synchronous")?;
        conn.pragma_update(None, "cache_size", -(CACHE_BYTES / 1024))
            .context("SQLite: PRAGMA cache_size")?;
        Ok(conn)
    }
}

impl System for SqliteTxn {
    fn name(&self) -> &str {
        "sqlite"
    }

    fn describe(&self) -> String {
        format!(
            "SQLite {}: tables {} (id INTEGER PRIMARY KEY, v INTEGER, lon REAL, lat REAL, payload BLOB) \
             + index on v + R*Tree <table>_loc(id, min_x, max_x, min_y, max_y); journal_mode=WAL, \
             synchronous=FULL (the WAL is fsynced at every commit), cache {} MiB per connection, default \
             page size and wal_autocheckpoint; transaction = BEGIN IMMEDIATE; per row INSERT ... ON \
             CONFLICT(id) DO UPDATE + INSERT OR REPLACE into the R*Tree (prepared, cached); COMMIT; one \
             connection per client thread, writers take turns through a mutex (busy_timeout {} s as a \
             safety net); preload = one transaction per table",
            crate::machine::sqlite_version(),
            TXN_TABLES.join(", "),
            CACHE_BYTES >> 20,
            BUSY_TIMEOUT.as_secs()
        )
    }
}

/// Upserts `r` into its table and R*Tree on `conn` (inside a transaction).
fn put(conn: &Connection, r: &TxnRow) -> rusqlite::Result<()> {
    let t = TXN_TABLES[r.table];
    conn.prepare_cached(&upsert_sql(t))?.execute(params![
        r.id,
        r.v,
        r.lon,
        r.lat,
        &r.payload[..]
    ])?;
    conn.prepare_cached(&rtree_sql(t))?
        .execute(params![r.id, r.lon, r.lat])?;
    Ok(())
}

impl TxnStore for SqliteTxn {
    fn preload(&self, rows: &[TxnRow]) -> Result<()> {
        let mut conn = self.connect()?;
        let tx = conn.transaction().context("SQLite preload BEGIN")?;
        for r in rows {
            put(&tx, r).context("SQLite preload")?;
        }
        tx.commit().context("SQLite preload COMMIT")?;
        conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))
            .context("SQLite: wal_checkpoint")?;
        Ok(())
    }

    fn client(&self) -> Result<Box<dyn TxnClient + '_>> {
        let conn = self.connect()?;
        for t in TXN_TABLES {
            conn.prepare_cached(&upsert_sql(t))
                .context("SQLite: preparing the upsert")?;
            conn.prepare_cached(&rtree_sql(t))
                .context("SQLite: preparing the R*Tree upsert")?;
        }
        Ok(Box::new(SqliteClient {
            conn,
            writer: &self.writer,
        }))
    }

    fn fsyncs(&self) -> Option<u64> {
        Some(fsync_count::count())
    }

    fn fsync_source(&self) -> &'static str {
        "every fsync/fdatasync of the process, counted by the harness's interposer"
    }

    fn counts(&self) -> Result<Vec<(String, usize, u64)>> {
        let conn = self.connect()?;
        let mut out = Vec::new();
        for (t, table) in TXN_TABLES.iter().enumerate() {
            for (label, sql) in [
                ("table", format!("SELECT count(*) FROM {table}")),
                (
                    "index v",
                    format!(
                        "SELECT count(*) FROM {table} INDEXED BY {table}_v WHERE v > -9223372036854775807"
                    ),
                ),
                (
                    "R*Tree",
                    format!(
                        "SELECT count(*) FROM {table}_loc WHERE min_x <= 180 AND max_x >= -180 AND min_y <= 90 AND max_y >= -90"
                    ),
                ),
            ] {
                let n: i64 = conn
                    .query_row(&sql, [], |r| r.get(0))
                    .with_context(|| format!("SQLite: {sql}"))?;
                out.push((format!("{table} {label}"), t, n as u64));
            }
        }
        Ok(out)
    }

    fn stats(&self, _prefix: &str) -> Result<Vec<ResultRow>> {
        Ok(Vec::new())
    }

    fn close(self: Box<Self>) -> Result<()> {
        Ok(())
    }
}

struct SqliteClient<'a> {
    conn: Connection,
    writer: &'a Mutex<()>,
}

impl TxnClient for SqliteClient<'_> {
    fn transact(&mut self, rows: &[TxnRow]) -> Result<u32> {
        let _turn = self
            .writer
            .lock()
            .map_err(|_| anyhow!("SQLite writer mutex poisoned"))?;
        self.conn
            .execute_batch("BEGIN IMMEDIATE")
            .context("SQLite BEGIN IMMEDIATE")?;
        let res = rows.iter().try_for_each(|r| put(&self.conn, r));
        match res {
            Ok(()) => {
                self.conn.execute_batch("COMMIT").context("SQLite COMMIT")?;
                Ok(0)
            }
            Err(e) => {
                let _ = self.conn.execute_batch("ROLLBACK");
                Err(e).context("SQLite upsert")
            }
        }
    }
}
