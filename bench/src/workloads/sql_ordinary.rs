//! `sql-ordinary` (issue 20, Show): ordinary SQL (a key-ordered `LIMIT`,
//! a key range, `COUNT(*)`, `GROUP BY`, a filtered aggregate and a join)
//! on a 2 M-row table: `silt serve` beside PostgreSQL 15 (both over
//! loopback through the same client) and DuckDB (in process, through its
//! Python package: it has no server).
//!
//! The same rows are generated once as COPY text and loaded with COPY into
//! each system; each query runs once to warm up, then a fixed number of
//! times, and the median is reported. The systems' answers are compared
//! cell by cell (numbers with a relative tolerance), so a fast wrong answer
//! fails the run.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use anyhow::{Context, Result, bail, ensure};
use postgres::{Client, SimpleQueryMessage};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use serde::Deserialize;

use super::sql_path::{connect, start_silt};
use super::{Ctx, Scale, Workload};
use crate::results::{Kind, ResultRow};
use crate::systems::postgis::{PgCluster, PgInstall};
use crate::util::fmt_num;
use crate::util::free_port;

pub struct SqlOrdinary;

fn rows(scale: Scale) -> usize {
    match scale {
        Scale::Small => 200_000,
        Scale::Medium => 2_000_000,
        Scale::Full => 8_000_000,
    }
}

/// Groups (`grp`, the join key into `dims`).
const GROUPS: usize = 1000;

/// One query of the workload.
struct Q {
    name: &'static str,
    sql: String,
    reps: usize,
    /// The issue's own target for Silt's median, in ms.
    target_ms: Option<f64>,
}

fn queries(n: usize) -> Vec<Q> {
    let a = n / 4;
    let q = |name, sql: String, reps, target_ms| Q {
        name,
        sql,
        reps,
        target_ms,
    };
    vec![
        q(
            "order by key limit 10",
            "SELECT id, val FROM facts ORDER BY id LIMIT 10".into(),
            50,
            Some(1.0),
        ),
        q(
            "order by key desc limit 10",
            "SELECT id, val FROM facts ORDER BY id DESC LIMIT 10".into(),
            20,
            Some(1.0),
        ),
        q(
            "key range of 10 K rows",
            format!(
                "SELECT count(*), sum(qty) FROM facts WHERE id >= {a} AND id < {}",
                a + 10_000
            ),
            20,
            None,
        ),
        q("count(*)", "SELECT count(*) FROM facts".into(), 10, None),
        q(
            "group by (1000 groups)",
            "SELECT grp, count(*), sum(qty) FROM facts GROUP BY grp ORDER BY grp".into(),
            5,
            None,
        ),
        q(
            "filtered aggregate",
            "SELECT count(*), sum(qty) FROM facts WHERE cat = 'c7' AND val > 500".into(),
            5,
            None,
        ),
        q(
            "join + group by",
            "SELECT d.region, count(*), sum(f.qty) FROM facts f JOIN dims d ON f.grp = d.id \
             WHERE f.val > 900 GROUP BY d.region ORDER BY d.region"
                .into(),
            5,
            None,
        ),
    ]
}

/// The two tables as COPY text: `facts` (id, grp, cat, val, qty) and
/// `dims` (id, region).
fn generate(n: usize, seed: u64) -> (Vec<u8>, Vec<u8>) {
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut facts = Vec::with_capacity(n * 32);
    for i in 0..n {
        let grp = rng.random_range(0..GROUPS);
        let cat = rng.random_range(0..20u32);
        // Three decimals print the same in every system.
        let val = f64::from(rng.random_range(0..1_000_000u32)) / 1000.0;
        let qty = rng.random_range(1..100u32);
        writeln!(facts, "{i}\t{grp}\tc{cat}\t{val}\t{qty}").ok();
    }
    let mut dims = Vec::new();
    for g in 0..GROUPS {
        writeln!(dims, "{g}\tr{}", g % 10).ok();
    }
    (facts, dims)
}

/// Rows of a result as text cells.
pub(crate) type Rows = Vec<Vec<Option<String>>>;

pub(crate) fn simple_rows(c: &mut Client, sql: &str) -> Result<Rows> {
    let mut out = Vec::new();
    for m in c.simple_query(sql)? {
        if let SimpleQueryMessage::Row(r) = m {
            out.push((0..r.len()).map(|i| r.get(i).map(str::to_owned)).collect());
        }
    }
    Ok(out)
}

/// Whether two results are the same (numbers within a relative 1e-9).
pub(crate) fn same(a: &Rows, b: &Rows) -> bool {
    let cell = |x: &Option<String>, y: &Option<String>| match (x, y) {
        (Some(x), Some(y)) => match (x.parse::<f64>(), y.parse::<f64>()) {
            (Ok(p), Ok(q)) => (p - q).abs() <= 1e-9 * p.abs().max(q.abs()).max(1.0),
            _ => x == y,
        },
        (None, None) => true,
        _ => false,
    };
    a.len() == b.len()
        && a.iter()
            .zip(b)
            .all(|(r, s)| r.len() == s.len() && r.iter().zip(s).all(|(x, y)| cell(x, y)))
}

/// Per query: sorted times (ms) and the rows.
type Timed = BTreeMap<&'static str, (Vec<f64>, Rows)>;

/// Per query: the time of its first run (ms), before any cache of the
/// server's held it.
type Firsts = BTreeMap<&'static str, f64>;

fn time_queries(c: &mut Client, qs: &[Q], label: &str) -> Result<(Timed, Firsts)> {
    let mut out = Timed::new();
    let mut firsts = Firsts::new();
    for q in qs {
        let t = Instant::now();
        let rows = simple_rows(c, &q.sql).with_context(|| format!("{label}: {}", q.sql))?;
        firsts.insert(q.name, t.elapsed().as_secs_f64() * 1000.0);
        let mut times = Vec::with_capacity(q.reps);
        for _ in 0..q.reps {
            let t = Instant::now();
            c.simple_query(&q.sql)?;
            times.push(t.elapsed().as_secs_f64() * 1000.0);
        }
        times.sort_by(f64::total_cmp);
        eprintln!("{label}: {}: p50 {:.3} ms", q.name, times[times.len() / 2]);
        out.insert(q.name, (times, rows));
    }
    Ok((out, firsts))
}

fn copy_in(c: &mut Client, table: &str, data: &[u8]) -> Result<()> {
    let mut w = c.copy_in(&format!("COPY {table} FROM STDIN"))?;
    for piece in data.chunks(64 << 10) {
        w.write_all(piece)?;
    }
    w.finish()?;
    Ok(())
}

#[derive(Deserialize)]
struct DuckQuery {
    ms: Vec<f64>,
    rows: Rows,
}

#[derive(Deserialize)]
struct DuckOut {
    version: String,
    load_s: f64,
    queries: BTreeMap<String, DuckQuery>,
}

fn python() -> std::result::Result<PathBuf, String> {
    crate::systems::venv_python::find("import duckdb", "duckdb").map(|(python, _)| python)
}

/// DuckDB through `py/sql_queries.py` on the same COPY text.
fn duckdb(python: &Path, dir: &Path, facts: &Path, dims: &Path, qs: &[Q]) -> Result<DuckOut> {
    let spec = serde_json::json!({
        "tables": [
            {"name": "facts", "path": facts,
             "ddl": "CREATE TABLE facts (id BIGINT PRIMARY KEY, grp BIGINT, cat VARCHAR, val DOUBLE, qty BIGINT)"},
            {"name": "dims", "path": dims,
             "ddl": "CREATE TABLE dims (id BIGINT PRIMARY KEY, region VARCHAR)"},
        ],
        "queries": qs.iter().map(|q| serde_json::json!({"name": q.name, "sql": q.sql, "reps": q.reps})).collect::<Vec<_>>(),
    });
    let spec_path = dir.join("duckdb-spec.json");
    std::fs::write(&spec_path, serde_json::to_vec(&spec)?)?;
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("py/sql_queries.py");
    let out = Command::new(python)
        .arg(&script)
        .arg(&spec_path)
        .output()
        .context("running py/sql_queries.py")?;
    if !out.status.success() {
        bail!(
            "py/sql_queries.py failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(serde_json::from_slice(&out.stdout)?)
}

fn p50(times: &[f64]) -> f64 {
    times.get(times.len() / 2).copied().unwrap_or(f64::NAN)
}

impl Workload for SqlOrdinary {
    fn name(&self) -> &'static str {
        "sql-ordinary"
    }

    fn description(&self) -> &'static str {
        "issue 20: ORDER BY key LIMIT, key range, COUNT(*), GROUP BY, filter, join on 2 M rows; silt serve vs PostgreSQL vs DuckDB"
    }

    fn explanation(&self) -> &'static str {
        "A 2 M-row table facts (bigint key, a group of 1000, one of 20 categories, a double, a \
         quantity) and a 1000-row table dims, loaded with COPY into silt serve, into PostgreSQL 15 \
         (a throw-away cluster, default settings, ANALYZEd) and into DuckDB (in process, Python \
         package, primary keys declared). Each query runs once to warm up, then 5 to 50 times; \
         medians are reported, and every system's answer is checked against the others'. Silt and \
         PostgreSQL are timed through the same client over loopback (their protocol cost is \
         included, DuckDB has none). Targets (issue 20): ORDER BY key LIMIT 10 under 1 ms; \
         GROUP BY, filter and join within 3x of DuckDB and ahead of PostgreSQL."
    }

    fn durability(&self) -> &'static str {
        "not measured here (a read workload); loads use each system's default"
    }

    fn run(&self, scale: Scale, ctx: &Ctx) -> Result<Vec<ResultRow>> {
        let n = rows(scale);
        let (facts, dims) = generate(n, ctx.seed);
        let qs = queries(n);
        ctx.note(format!(
            "{n} rows in facts ({:.1} MB of COPY text), {GROUPS} in dims",
            facts.len() as f64 / 1e6
        ));
        let mut out = Vec::new();
        for d in ["sql-ordinary-silt", "sql-ordinary-pg"] {
            let _ = std::fs::remove_dir_all(ctx.scratch.join(d));
        }
        // Silt.
        let silt = {
            let (pg, http) = (free_port()?, free_port()?);
            let _server = start_silt(&ctx.scratch.join("sql-ordinary-silt"), pg, http)?;
            let mut c = connect(pg, "bench", "silt")?;
            c.batch_execute(
                "CREATE TABLE facts (id BIGINT PRIMARY KEY, grp BIGINT, cat VARCHAR, val DOUBLE, qty BIGINT); \
                 CREATE TABLE dims (id BIGINT PRIMARY KEY, region VARCHAR)",
            )?;
            let t = Instant::now();
            copy_in(&mut c, "facts", &facts)?;
            copy_in(&mut c, "dims", &dims)?;
            let load = t.elapsed().as_secs_f64();
            eprintln!("silt-serve: loaded in {load:.1} s");
            out.push(ResultRow::new(
                "silt-serve",
                "load rows/s",
                "rows/s",
                Kind::Measure,
                n as f64 / load,
            ));
            time_queries(&mut c, &qs, "silt-serve")?
        };
        let (silt, silt_first) = silt;
        // PostgreSQL.
        let pg = match PgInstall::find() {
            Err(reason) => {
                eprintln!("note: skipping postgresql: {reason}");
                ctx.note(format!("postgresql: SKIPPED: {reason}"));
                None
            }
            Ok(install) => {
                let cluster =
                    PgCluster::start_with(install, &ctx.scratch.join("sql-ordinary-pg"), "")?;
                let mut c = connect(cluster.port, "postgres", "postgres")?;
                c.batch_execute(
                    "CREATE TABLE facts (id bigint PRIMARY KEY, grp bigint, cat text, val double precision, qty bigint); \
                     CREATE TABLE dims (id bigint PRIMARY KEY, region text)",
                )?;
                let t = Instant::now();
                copy_in(&mut c, "facts", &facts)?;
                copy_in(&mut c, "dims", &dims)?;
                // One statement per call: VACUUM refuses a transaction block.
                c.batch_execute("VACUUM ANALYZE facts")?;
                c.batch_execute("VACUUM ANALYZE dims")?;
                let load = t.elapsed().as_secs_f64();
                eprintln!("postgresql: loaded in {load:.1} s");
                out.push(ResultRow::new(
                    "postgresql",
                    "load rows/s",
                    "rows/s",
                    Kind::Measure,
                    n as f64 / load,
                ));
                Some(time_queries(&mut c, &qs, "postgresql")?.0)
            }
        };
        // DuckDB.
        let duck = match python() {
            Err(reason) => {
                eprintln!("note: skipping duckdb: {reason}");
                ctx.note(format!("duckdb: SKIPPED: {reason}"));
                None
            }
            Ok(py) => {
                let dir = ctx.scratch.join("sql-ordinary-duckdb");
                std::fs::create_dir_all(&dir)?;
                let (fp, dp) = (dir.join("facts.tsv"), dir.join("dims.tsv"));
                std::fs::write(&fp, &facts)?;
                std::fs::write(&dp, &dims)?;
                let d = duckdb(&py, &dir, &fp, &dp, &qs)?;
                ctx.note(format!("duckdb {} (Python package, in process)", d.version));
                out.push(ResultRow::new(
                    "duckdb",
                    "load rows/s",
                    "rows/s",
                    Kind::Measure,
                    n as f64 / d.load_s,
                ));
                let mut timed = Timed::new();
                for q in &qs {
                    let r = d
                        .queries
                        .get(q.name)
                        .with_context(|| format!("duckdb did not run {}", q.name))?;
                    eprintln!("duckdb: {}: p50 {:.3} ms", q.name, p50(&r.ms));
                    timed.insert(q.name, (r.ms.clone(), r.rows.clone()));
                }
                Some(timed)
            }
        };
        // Same answers, then times and ratios.
        for q in &qs {
            let (st, sr) = &silt[q.name];
            for (peer, res) in [("postgresql", &pg), ("duckdb", &duck)] {
                if let Some(p) = res {
                    let (_, pr) = &p[q.name];
                    ensure!(
                        same(sr, pr),
                        "{}: silt and {peer} disagree:\n  silt: {:?}\n  {peer}: {:?}",
                        q.name,
                        sr.iter().take(5).collect::<Vec<_>>(),
                        pr.iter().take(5).collect::<Vec<_>>()
                    );
                }
            }
            let s = p50(st);
            out.push(ResultRow::new(
                "silt-serve",
                &format!("{} p50", q.name),
                "ms",
                Kind::Measure,
                s,
            ));
            // The first run reads records; later ones may read the
            // column images it left (`silt_sql::column_cache`).
            if let Some(f) = silt_first.get(q.name) {
                out.push(ResultRow::new(
                    "silt-serve",
                    &format!("{} first run", q.name),
                    "ms",
                    Kind::Measure,
                    *f,
                ));
            }
            if let Some(t) = q.target_ms {
                out.push(
                    ResultRow::new(
                        "silt-serve",
                        &format!("{}: target {t} ms / p50", q.name),
                        "x",
                        Kind::Ratio,
                        t / s,
                    )
                    .with_target(1.0),
                );
            }
            for (label, res, ratio, target) in [
                ("postgresql", &pg, "vs PostgreSQL (pg / silt)", 1.0),
                (
                    "duckdb",
                    &duck,
                    "vs DuckDB (duckdb / silt, target 1/3)",
                    1.0 / 3.0,
                ),
            ] {
                let Some(r) = res else { continue };
                let v = p50(&r[q.name].0);
                let metric = format!("{} p50", q.name);
                out.push(ResultRow::new(label, &metric, "ms", Kind::Measure, v));
                let metric = format!("{} {ratio}", q.name);
                out.push(
                    ResultRow::new("silt-serve", &metric, "x", Kind::Ratio, v / s)
                        .with_target(target),
                );
            }
            eprintln!(
                "{}: silt {} ms, pg {} ms, duckdb {} ms",
                q.name,
                fmt_num(s),
                pg.as_ref()
                    .map_or("-".into(), |p| fmt_num(p50(&p[q.name].0))),
                duck.as_ref()
                    .map_or("-".into(), |d| fmt_num(p50(&d[q.name].0)))
            );
        }
        Ok(out)
    }
}
