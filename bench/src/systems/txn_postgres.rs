//! PostgreSQL + PostGIS as a [`TxnStore`]: a throw-away cluster started like the
//! PostGIS peer's ([`PgCluster`]: initdb into the scratch directory, 127.0.0.1,
//! shared_buffers 256 MB, autovacuum off, jit off), but with
//! `synchronous_commit = on` (every COMMIT waits for its WAL to be flushed:
//! fsync on, `wal_sync_method` default, PostgreSQL's own group commit of
//! concurrent WAL flushes) and room for one connection per client thread.
//!
//! Tables `place_a`, `place_b` `(id bigint primary key, v bigint, geom
//! geometry(Point, 4326), payload bytea)`, a GiST index on `geom` and a btree
//! on `v`. A transaction is `BEGIN`, one prepared
//! `INSERT ... ON CONFLICT (id) DO UPDATE` per row, `COMMIT`, on the client
//! thread's own connection (the synchronous `postgres` crate: one round trip
//! per statement); a deadlock or serialization failure is rolled back and run
//! again (the rows of a transaction come sorted by table and key, so
//! deadlocks should not happen).

use std::{
    collections::HashMap,
    fmt::Write as _,
    io::Write as _,
    path::Path,
    sync::{
        Mutex,
        atomic::{AtomicU64, Ordering},
    },
    time::Duration,
};

use anyhow::{Context, Result, anyhow};
use postgres::{Client, NoTls, Statement, error::SqlState};

use super::{
    System, TXN_TABLES, TxnClient, TxnRow, TxnStore, counter_deltas,
    postgis::{PgCluster, PgInstall, SHARED_BUFFERS_MB, ewkb_hex},
};
use crate::results::ResultRow;

/// Rows per COPY of the preload.
const PRELOAD_BATCH: usize = 10_000;
/// Appended to the harness's postgresql.conf (later lines win).
const EXTRA_CONF: &str = "synchronous_commit = on\nmax_connections = 40\n";

fn upsert_sql(table: &str) -> String {
    format!(
        "INSERT INTO {table} (id, v, geom, payload) \
         VALUES ($1, $2, ST_SetSRID(ST_MakePoint($3::float8, $4::float8), 4326), $5) \
         ON CONFLICT (id) DO UPDATE SET v = EXCLUDED.v, geom = EXCLUDED.geom, payload = EXCLUDED.payload"
    )
}

pub struct PgTxn {
    // Field order matters: the connection closes before the cluster stops.
    admin: Mutex<Option<Client>>,
    cluster: PgCluster,
    version: String,
    /// Transactions rolled back on a deadlock or serialization failure and run again.
    retries: AtomicU64,
    /// pg_stat_wal at the previous `stats` call.
    last: Mutex<HashMap<String, f64>>,
}

impl PgTxn {
    pub fn open(install: PgInstall, dir: &Path) -> Result<Self> {
        let cluster = PgCluster::start_with(install, dir, EXTRA_CONF)?;
        let mut admin = connect(cluster.port)?;
        admin
            .batch_execute("CREATE EXTENSION postgis")
            .context("CREATE EXTENSION postgis")?;
        for t in TXN_TABLES {
            admin
                .batch_execute(&format!(
                    "CREATE TABLE {t}(id bigint PRIMARY KEY, v bigint NOT NULL, \
                     geom geometry(Point, 4326) NOT NULL, payload bytea NOT NULL); \
                     CREATE INDEX {t}_geom ON {t} USING gist (geom); \
                     CREATE INDEX {t}_v ON {t} (v)"
                ))
                .with_context(|| format!("PostgreSQL: creating {t} and its indexes"))?;
        }
        let row = admin
            .query_one(
                "SELECT version(), postgis_lib_version(), current_setting('synchronous_commit'), \
                 current_setting('fsync'), current_setting('wal_sync_method'), \
                 current_setting('commit_delay')",
                &[],
            )
            .context("PostgreSQL: version and settings")?;
        let pg: String = row.get(0);
        let postgis: String = row.get(1);
        let (sc, fsync, method, delay): (String, String, String, String) =
            (row.get(2), row.get(3), row.get(4), row.get(5));
        if sc != "on" || fsync != "on" {
            anyhow::bail!(
                "PostgreSQL runs with synchronous_commit={sc}, fsync={fsync}: expected on/on"
            );
        }
        let pg_short = pg.split(" on ").next().unwrap_or(&pg).to_string();
        let version = format!(
            "{pg_short}, PostGIS {postgis}; synchronous_commit={sc}, fsync={fsync}, \
             wal_sync_method={method}, commit_delay={delay}"
        );
        Ok(Self {
            admin: Mutex::new(Some(admin)),
            cluster,
            version,
            retries: AtomicU64::new(0),
            last: Mutex::new(HashMap::new()),
        })
    }

    fn with_admin<T>(&self, f: impl FnOnce(&mut Client) -> Result<T>) -> Result<T> {
        let mut g = self
            .admin
            .lock()
            .map_err(|_| anyhow!("PostgreSQL admin connection poisoned"))?;
        let c = g.as_mut().context("the PostgreSQL connection is closed")?;
        f(c)
    }
}

fn connect(port: u16) -> Result<Client> {
    Client::connect(
        &format!("host=127.0.0.1 port={port} user=postgres dbname=postgres"),
        NoTls,
    )
    .context("connecting to the PostgreSQL cluster")
}

impl System for PgTxn {
    fn name(&self) -> &str {
        "postgres"
    }

    fn describe(&self) -> String {
        format!(
            "{} (throw-away cluster on 127.0.0.1, port {}; shared_buffers {SHARED_BUFFERS_MB} MB, \
             max_wal_size 4GB, checkpoint_timeout 30min, autovacuum off, jit off, otherwise defaults): \
             tables {} (id bigint primary key, v bigint, geom geometry(Point,4326), payload bytea) + GiST \
             on geom + btree on v; transaction = BEGIN; one prepared INSERT ... ON CONFLICT (id) DO UPDATE \
             per row; COMMIT, one connection per client thread (the `postgres` crate 0.19, sync: one \
             round trip per statement); deadlocks/serialization failures rolled back and retried; \
             preload = COPY FROM STDIN of {PRELOAD_BATCH} rows, then VACUUM ANALYZE + CHECKPOINT",
            self.version,
            self.cluster.port,
            TXN_TABLES.join(", ")
        )
    }
}

impl TxnStore for PgTxn {
    fn preload(&self, rows: &[TxnRow]) -> Result<()> {
        self.with_admin(|c| {
            for (t, table) in TXN_TABLES.iter().enumerate() {
                let mine: Vec<&TxnRow> = rows.iter().filter(|r| r.table == t).collect();
                for chunk in mine.chunks(PRELOAD_BATCH) {
                    let mut buf = String::with_capacity(chunk.len() * 300);
                    for r in chunk {
                        let _ = write!(buf, "{}\t{}\t", r.id, r.v);
                        ewkb_hex(&mut buf, r.lon, r.lat);
                        // bytea in COPY's text format: \x + hex, the backslash escaped.
                        buf.push_str("\t\\\\x");
                        for b in r.payload {
                            let _ = write!(buf, "{b:02x}");
                        }
                        buf.push('\n');
                    }
                    let mut w = c
                        .copy_in(format!("COPY {table} (id, v, geom, payload) FROM STDIN").as_str())
                        .context("PostgreSQL preload COPY")?;
                    w.write_all(buf.as_bytes())
                        .context("PostgreSQL preload COPY")?;
                    w.finish().context("PostgreSQL preload COPY")?;
                }
                c.batch_execute(&format!("VACUUM ANALYZE {table}"))
                    .context("PostgreSQL VACUUM ANALYZE")?;
            }
            c.batch_execute("CHECKPOINT")
                .context("PostgreSQL CHECKPOINT")?;
            Ok(())
        })?;
        // The next stats are the first cell's alone.
        let _ = self.stats("")?;
        Ok(())
    }

    fn server_cpu_seconds(&self) -> Option<f64> {
        self.cluster.cpu_seconds()
    }

    fn client(&self) -> Result<Box<dyn TxnClient + '_>> {
        let mut client = connect(self.cluster.port)?;
        let mut stmts = Vec::new();
        for t in TXN_TABLES {
            stmts.push(
                client
                    .prepare(&upsert_sql(t))
                    .context("PostgreSQL: preparing the upsert")?,
            );
        }
        Ok(Box::new(PgClient {
            client,
            stmts,
            retries: &self.retries,
        }))
    }

    fn fsyncs(&self) -> Option<u64> {
        // Backends send their WAL counters to the cumulative statistics when
        // idle for a second or when they exit: give the client connections
        // that just closed time to do so.
        std::thread::sleep(Duration::from_millis(600));
        self.with_admin(|c| {
            let row = c
                .query_one("SELECT wal_sync::float8 FROM pg_stat_wal", &[])
                .context("PostgreSQL: pg_stat_wal")?;
            let v: f64 = row.try_get(0)?;
            Ok(v as u64)
        })
        .ok()
    }

    fn fsync_source(&self) -> &'static str {
        "pg_stat_wal.wal_sync (WAL fsyncs of all server processes; backends report at exit or after 1 s idle)"
    }

    fn counts(&self) -> Result<Vec<(String, usize, u64)>> {
        self.with_admin(|c| {
            let mut out = Vec::new();
            // Index scans forced, so that each access path is really read.
            c.batch_execute("SET enable_seqscan = off; SET enable_bitmapscan = off")?;
            for (t, table) in TXN_TABLES.iter().enumerate() {
                for (label, sql) in [
                    ("primary", format!("SELECT count(*) FROM {table} WHERE id >= -9223372036854775807")),
                    ("btree v", format!("SELECT count(*) FROM {table} WHERE v >= -9223372036854775807")),
                    (
                        "gist geom",
                        format!(
                            "SELECT count(*) FROM {table} WHERE geom && ST_MakeEnvelope(-180, -90, 180, 90, 4326)"
                        ),
                    ),
                ] {
                    let n: i64 = c
                        .query_one(sql.as_str(), &[])
                        .with_context(|| format!("PostgreSQL: {sql}"))?
                        .try_get(0)?;
                    out.push((format!("{table} {label}"), t, n as u64));
                }
            }
            c.batch_execute("RESET enable_seqscan; RESET enable_bitmapscan")?;
            Ok(out)
        })
    }

    fn stats(&self, prefix: &str) -> Result<Vec<ResultRow>> {
        let mut rows = vec![ResultRow::stat(
            "postgres",
            &format!("{prefix}deadlocks/serialization failures retried"),
            "count",
            self.retries.swap(0, Ordering::Relaxed) as f64,
        )];
        let now = self.with_admin(|c| {
            let r = c
                .query_one(
                    "SELECT wal_records::float8, wal_bytes::float8, wal_write::float8, wal_sync::float8 \
                     FROM pg_stat_wal",
                    &[],
                )
                .context("PostgreSQL: pg_stat_wal")?;
            let mut now = Vec::new();
            for (i, name) in ["wal_records", "wal_bytes", "wal_write", "wal_sync"]
                .iter()
                .enumerate()
            {
                let unit = if name.ends_with("bytes") { "bytes" } else { "count" };
                now.push((format!("pg_stat_wal.{name}"), r.try_get::<_, f64>(i)?, unit.to_string()));
            }
            Ok(now)
        })?;
        for (name, v, unit) in counter_deltas(&self.last, now) {
            rows.push(ResultRow::stat(
                "postgres",
                &format!("{prefix}{name}"),
                &unit,
                v,
            ));
        }
        Ok(rows)
    }

    fn close(self: Box<Self>) -> Result<()> {
        let mut me = *self;
        if let Some(c) = me.admin.get_mut().ok().and_then(Option::take) {
            c.close().context("closing the PostgreSQL connection")?;
        }
        me.cluster.stop()
    }
}

struct PgClient<'a> {
    client: Client,
    stmts: Vec<Statement>,
    retries: &'a AtomicU64,
}

fn retryable(e: &postgres::Error) -> bool {
    matches!(
        e.code(),
        Some(c) if *c == SqlState::T_R_DEADLOCK_DETECTED || *c == SqlState::T_R_SERIALIZATION_FAILURE
    )
}

impl PgClient<'_> {
    fn once(&mut self, rows: &[TxnRow]) -> std::result::Result<(), postgres::Error> {
        let mut tx = self.client.transaction()?;
        for r in rows {
            let payload: &[u8] = &r.payload;
            tx.execute(
                &self.stmts[r.table],
                &[&r.id, &r.v, &r.lon, &r.lat, &payload],
            )?;
        }
        tx.commit()
    }
}

impl TxnClient for PgClient<'_> {
    fn transact(&mut self, rows: &[TxnRow]) -> Result<u32> {
        let mut retries = 0;
        loop {
            match self.once(rows) {
                Ok(()) => return Ok(retries),
                Err(e) if retryable(&e) => {
                    self.retries.fetch_add(1, Ordering::Relaxed);
                    retries += 1;
                }
                Err(e) => return Err(e).context("PostgreSQL transaction"),
            }
        }
    }
}
