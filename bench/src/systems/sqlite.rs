//! SQLite (the `rusqlite` crate's bundled build) as a peer for many-writer
//! key-value workloads: one table `kv(k INTEGER PRIMARY KEY, v BLOB)` in WAL
//! journal mode, one autocommit `INSERT OR REPLACE` (one transaction) per record,
//! each writer thread on its own connection. SQLite lets one writer at a time
//! into the WAL: the others wait in the busy handler (`busy_timeout`), which
//! sleeps and retries. With `synchronous=FULL` every commit fsyncs the WAL
//! itself (no group commit); with `NORMAL` the WAL is fsynced only at checkpoints.

use std::{
    path::{Path, PathBuf},
    sync::atomic::{AtomicU64, Ordering},
    time::Duration,
};

use anyhow::{Context, Result, bail};
use rusqlite::{Connection, ErrorCode, params};

use super::{KvConfig, KvWriter, SharedKv, System};
use crate::results::ResultRow;

/// How long a writer waits for the write lock before SQLite gives up with SQLITE_BUSY.
const BUSY_TIMEOUT: Duration = Duration::from_secs(60);
const UPSERT: &str = "INSERT OR REPLACE INTO kv(k, v) VALUES (?1, ?2)";

pub struct SqliteKv {
    path: PathBuf,
    cfg: KvConfig,
    /// SQLITE_BUSY errors that escaped the busy handler and were retried by us.
    busy_retries: AtomicU64,
}

impl SqliteKv {
    /// Creates the database file `dir/kv.sqlite` with its table, in WAL mode.
    pub fn open(dir: &Path, cfg: &KvConfig) -> Result<Self> {
        let kv = Self {
            path: dir.join("kv.sqlite"),
            cfg: cfg.clone(),
            busy_retries: AtomicU64::new(0),
        };
        let conn = kv.connect()?;
        // WAL mode is a property of the database file: set once, every connection uses it.
        let mode: String = conn
            .pragma_update_and_check(None, "journal_mode", "WAL", |r| r.get(0))
            .context("SQLite: PRAGMA journal_mode=WAL")?;
        if !mode.eq_ignore_ascii_case("wal") {
            bail!("SQLite refused WAL journal mode (got {mode})");
        }
        conn.execute_batch("CREATE TABLE kv(k INTEGER PRIMARY KEY, v BLOB)")
            .context("SQLite: creating table kv")?;
        Ok(kv)
    }

    /// A new connection with the per-connection settings.
    fn connect(&self) -> Result<Connection> {
        let conn = Connection::open(&self.path)
            .with_context(|| format!("opening SQLite at {}", self.path.display()))?;
        conn.busy_timeout(BUSY_TIMEOUT)
            .context("SQLite: busy_timeout")?;
        let sync = if self.cfg.sync_commits {
            "FULL"
        } else {
            "NORMAL"
        };
        conn.pragma_update(None, "synchronous", sync)
            .context("SQLite: PRAGMA synchronous")?;
        Ok(conn)
    }
}

impl System for SqliteKv {
    fn name(&self) -> &str {
        "sqlite"
    }

    fn describe(&self) -> String {
        format!(
            "SQLite {}: table kv(k INTEGER PRIMARY KEY, v BLOB), journal_mode=WAL, synchronous={}, \
             one autocommit INSERT OR REPLACE per record, one connection per writer thread, \
             busy_timeout {} s, default page size/cache/wal_autocheckpoint",
            crate::machine::sqlite_version(),
            if self.cfg.sync_commits {
                "FULL (the WAL is fsynced at every commit)"
            } else {
                "NORMAL"
            },
            BUSY_TIMEOUT.as_secs()
        )
    }
}

struct SqliteWriter<'a> {
    conn: Connection,
    busy_retries: &'a AtomicU64,
}

impl KvWriter for SqliteWriter<'_> {
    fn put(&mut self, key: u64, value: &[u8]) -> Result<()> {
        loop {
            let res = self
                .conn
                .prepare_cached(UPSERT)
                .and_then(|mut st| st.execute(params![key as i64, value]));
            match res {
                Ok(_) => return Ok(()),
                // The busy handler normally absorbs contention; should SQLITE_BUSY
                // still come back, retry (and count it) rather than fail the run.
                Err(e) if e.sqlite_error_code() == Some(ErrorCode::DatabaseBusy) => {
                    self.busy_retries.fetch_add(1, Ordering::Relaxed);
                }
                Err(e) => return Err(e).with_context(|| format!("SQLite upsert of key {key}")),
            }
        }
    }
}

impl SharedKv for SqliteKv {
    fn writer(&self) -> Result<Box<dyn KvWriter + '_>> {
        let conn = self.connect()?;
        conn.prepare_cached(UPSERT)
            .context("SQLite: preparing the upsert")?;
        Ok(Box::new(SqliteWriter {
            conn,
            busy_retries: &self.busy_retries,
        }))
    }

    fn own_fsyncs(&self) -> Option<u64> {
        None
    }

    fn stats(&self, prefix: &str) -> Result<Vec<ResultRow>> {
        Ok(vec![ResultRow::stat(
            "sqlite",
            &format!("{prefix}busy_retries"),
            "count",
            self.busy_retries.load(Ordering::Relaxed) as f64,
        )])
    }

    fn close(self: Box<Self>) -> Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::util::ScratchDir;

    #[test]
    fn writers_on_their_own_connections() {
        let scratch = ScratchDir::new(
            &std::env::temp_dir(),
            &format!("silt-bench-sqlite-{}", std::process::id()),
        )
        .unwrap();
        let cfg = KvConfig {
            sync_commits: true,
            ..KvConfig::default()
        };
        let db = SqliteKv::open(scratch.path(), &cfg).unwrap();
        std::thread::scope(|s| {
            for t in 0..4u64 {
                let mut w = db.writer().unwrap();
                s.spawn(move || {
                    for i in 0..50u64 {
                        w.put(t * 1000 + i, &[t as u8; 100]).unwrap();
                    }
                });
            }
        });
        let conn = db.connect().unwrap();
        let n: i64 = conn
            .query_row("SELECT count(*) FROM kv", [], |r| r.get(0))
            .unwrap();
        assert_eq!(n, 200);
        Box::new(db).close().unwrap();
    }
}
