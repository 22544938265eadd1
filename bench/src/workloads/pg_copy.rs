//! `pg-copy` (issue 20): bulk load and export through the PostgreSQL
//! protocol's `COPY`, `silt serve` beside PostgreSQL.
//!
//! The same rows (`id bigint` key, a short name, a double, a boolean and a
//! timestamp-like integer) are generated once as COPY text and sent with
//! `COPY t FROM STDIN` to each server over loopback, in 64 KiB pieces as
//! psql's `\copy` sends them; then read back with `COPY t TO STDOUT`. Each
//! system loads into an empty table with its primary key, then again into a
//! table that also has a secondary index on `name`.
//!
//! Durability: each system's default. PostgreSQL's COPY is one
//! transaction, flushed once at its commit; Silt commits one transaction
//! per 4,096 rows, each acknowledged after its log flush.
//! The physical bound stated beside the rates is the disk's sequential
//! write speed over the bytes loaded.

use std::io::{Read, Write};
use std::time::Instant;

use anyhow::{Result, ensure};
use postgres::Client;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use super::sql_path::{connect, start_silt};
use super::{Ctx, Scale, Workload};
use crate::results::{Kind, ResultRow};
use crate::systems::postgis::{PgCluster, PgInstall};
use crate::util::fmt_num;
use crate::util::free_port;

pub struct PgCopy;

fn rows(scale: Scale) -> usize {
    match scale {
        Scale::Small => 100_000,
        Scale::Medium => 1_000_000,
        Scale::Full => 4_000_000,
    }
}

/// The rows as COPY text (tab-separated, `\N` for NULL).
fn generate(n: usize, seed: u64) -> Vec<u8> {
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut out = Vec::with_capacity(n * 48);
    for i in 0..n {
        let name = format!("user{}", rng.random_range(0..100_000u32));
        let x: f64 = rng.random_range(-1000.0..1000.0);
        let flag = if rng.random_bool(0.5) { 't' } else { 'f' };
        let ts = 1_700_000_000_000i64 + i as i64 * 37;
        if i % 50 == 49 {
            writeln!(out, "{i}\t\\N\t{x:.6}\t{flag}\t{ts}").ok();
        } else {
            writeln!(out, "{i}\t{name}\t{x:.6}\t{flag}\t{ts}").ok();
        }
    }
    out
}

/// `COPY t FROM STDIN` of `data` in 64 KiB pieces; seconds taken.
fn copy_in(c: &mut Client, table: &str, data: &[u8], n: usize) -> Result<f64> {
    let t = Instant::now();
    let mut w = c.copy_in(&format!("COPY {table} FROM STDIN"))?;
    for piece in data.chunks(64 << 10) {
        w.write_all(piece)?;
    }
    let loaded = w.finish()?;
    let secs = t.elapsed().as_secs_f64();
    ensure!(
        loaded as usize == n,
        "{table}: COPY said {loaded} rows, expected {n}"
    );
    Ok(secs)
}

/// `COPY t TO STDOUT`; seconds taken and bytes read.
fn copy_out(c: &mut Client, table: &str) -> Result<(f64, usize)> {
    let t = Instant::now();
    let mut r = c.copy_out(&format!("COPY {table} TO STDOUT"))?;
    let mut buf = vec![0u8; 1 << 20];
    let mut bytes = 0;
    loop {
        let k = r.read(&mut buf)?;
        if k == 0 {
            break;
        }
        bytes += k;
    }
    Ok((t.elapsed().as_secs_f64(), bytes))
}

/// Load into a plain table and an indexed one, export, check counts.
fn measure(
    c: &mut Client,
    label: &str,
    ddl: &dyn Fn(&str, bool) -> String,
    data: &[u8],
    n: usize,
    out: &mut Vec<ResultRow>,
) -> Result<(f64, f64)> {
    c.batch_execute(&ddl("t_plain", false))?;
    c.batch_execute(&ddl("t_indexed", true))?;
    let plain = copy_in(c, "t_plain", data, n)?;
    let indexed = copy_in(c, "t_indexed", data, n)?;
    let count: i64 = c.query_one("SELECT count(*) FROM t_indexed", &[])?.get(0);
    ensure!(
        count as usize == n,
        "{label}: {count} rows after COPY, expected {n}"
    );
    let named: i64 = c
        .query_one(
            "SELECT count(*) FROM t_indexed WHERE name = 'user4242'",
            &[],
        )?
        .get(0);
    let expect = data
        .split(|&b| b == b'\n')
        .filter(|l| l.split(|&b| b == b'\t').nth(1) == Some(b"user4242"))
        .count();
    ensure!(
        named as usize == expect,
        "{label}: index lookup found {named}, expected {expect}"
    );
    let (out_secs, out_bytes) = copy_out(c, "t_plain")?;
    ensure!(out_bytes > 0, "{label}: COPY TO sent nothing");
    let rate = |s: f64| n as f64 / s;
    eprintln!(
        "{label}: COPY FROM {} rows/s (plain), {} rows/s (indexed); COPY TO {} rows/s",
        fmt_num(rate(plain)),
        fmt_num(rate(indexed)),
        fmt_num(rate(out_secs))
    );
    for (metric, v) in [
        ("COPY FROM rows/s (key only)", rate(plain)),
        ("COPY FROM rows/s (key + name index)", rate(indexed)),
        ("COPY TO rows/s", rate(out_secs)),
    ] {
        out.push(ResultRow::new(label, metric, "rows/s", Kind::Measure, v));
    }
    Ok((rate(plain), rate(indexed)))
}

impl Workload for PgCopy {
    fn name(&self) -> &'static str {
        "pg-copy"
    }

    fn description(&self) -> &'static str {
        "issue 20: COPY FROM STDIN / TO STDOUT over loopback, silt serve vs PostgreSQL"
    }

    fn explanation(&self) -> &'static str {
        "The same rows (bigint key, name, double, boolean, integer timestamp) as COPY text, sent \
         with COPY t FROM STDIN in 64 KiB pieces to silt serve and to PostgreSQL (a throw-away \
         cluster), into a table with only its key and into one with a secondary index on name; then \
         COPY t TO STDOUT. Targets (issue 20): at least 300 K rows/s at 1 M rows, ahead of \
         PostgreSQL's COPY on the same data in the same run."
    }

    fn durability(&self) -> &'static str {
        "each system's default: PostgreSQL's COPY commits once (synchronous_commit=on); Silt commits a transaction per 4,096 rows, each fsynced (group commit)"
    }

    fn run(&self, scale: Scale, ctx: &Ctx) -> Result<Vec<ResultRow>> {
        let n = rows(scale);
        let data = generate(n, ctx.seed);
        ctx.note(format!(
            "{n} rows, {:.1} MB of COPY text, sent in 64 KiB pieces",
            data.len() as f64 / 1e6
        ));
        let mut out = Vec::new();
        for d in ["pg-copy-silt", "pg-copy-pg"] {
            let _ = std::fs::remove_dir_all(ctx.scratch.join(d));
        }
        let silt = {
            let (pg, http) = (free_port()?, free_port()?);
            let _server = start_silt(&ctx.scratch.join("pg-copy-silt"), pg, http)?;
            let mut c = connect(pg, "bench", "silt")?;
            let ddl = |t: &str, index: bool| {
                let mut s = format!(
                    "CREATE TABLE {t} (id BIGINT PRIMARY KEY, name VARCHAR, x DOUBLE, flag BOOLEAN, ts BIGINT)"
                );
                if index {
                    s.push_str(&format!(
                        "; CREATE INDEX {t}_name ON {t} USING btree (name)"
                    ));
                }
                s
            };
            measure(&mut c, "silt-serve", &ddl, &data, n, &mut out)?
        };
        let mb = data.len() as f64 / 1e6;
        if ctx.limits.seq_write_mb_s > 0.0 {
            let bound = n as f64 * ctx.limits.seq_write_mb_s / mb;
            out.push(ResultRow::new(
                "silt-serve",
                "COPY FROM (key only) / disk sequential-write bound on the COPY text",
                "x",
                Kind::Limit,
                silt.0 / bound,
            ));
        }
        match PgInstall::find() {
            Err(reason) => {
                eprintln!("note: skipping postgresql: {reason}");
                ctx.note(format!("postgresql: SKIPPED: {reason}"));
            }
            Ok(install) => {
                let cluster = PgCluster::start_with(
                    install,
                    &ctx.scratch.join("pg-copy-pg"),
                    "synchronous_commit = on\n",
                )?;
                let mut c = connect(cluster.port, "postgres", "postgres")?;
                let ddl = |t: &str, index: bool| {
                    let mut s = format!(
                        "CREATE TABLE {t} (id bigint PRIMARY KEY, name text, x double precision, flag boolean, ts bigint)"
                    );
                    if index {
                        s.push_str(&format!("; CREATE INDEX {t}_name ON {t} (name)"));
                    }
                    s
                };
                let pg = measure(&mut c, "postgresql", &ddl, &data, n, &mut out)?;
                for (metric, s, p) in [
                    (
                        "COPY FROM rows/s vs PostgreSQL (key only, silt / pg)",
                        silt.0,
                        pg.0,
                    ),
                    (
                        "COPY FROM rows/s vs PostgreSQL (key + name index, silt / pg)",
                        silt.1,
                        pg.1,
                    ),
                ] {
                    out.push(
                        ResultRow::new("silt-serve", metric, "x", Kind::Ratio, s / p)
                            .with_target(1.0),
                    );
                }
            }
        }
        out.push(
            ResultRow::new(
                "silt-serve",
                "COPY FROM rows/s (key only) vs the 300 K rows/s target",
                "x",
                Kind::Ratio,
                silt.0 / 300_000.0,
            )
            .with_target(1.0),
        );
        Ok(out)
    }
}
