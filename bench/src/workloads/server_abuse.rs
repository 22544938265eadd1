//! `server-abuse` (issue 28): `silt serve` under a mixed load with hostile
//! queries, on loopback. The server runs in a child process (this binary,
//! `silt-bench-serve`, which runs what `silt serve` runs, with its allocator) with
//! explicit resource bounds; 64 PostgreSQL clients run for a fixed time:
//!
//! - `small`: point lookups by primary key (prepared);
//! - `scan`: a full scan with a grouped aggregate;
//! - `insert`: single-row inserts with unique keys (acknowledged ones are
//!   counted, and checked present at the end);
//! - `hostile`: in turn `repeat('x', 2000000000)`, a self cross join, a
//!   memory-hungry aggregate over a cross join, 100-deep nested subqueries,
//!   and a 10^6-row result read to the end.
//!
//! Measured: p50/p99 latency and throughput of each class, the outcomes of
//! the hostile statements by SQLSTATE, the server's peak RSS (its `VmHWM`)
//! and the inserts acknowledged against the rows present. Targets: small
//! queries' p99 under 50 ms while the hostile ones run, peak RSS under the
//! server memory limit plus a margin, nothing acknowledged lost.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use postgres::fallible_iterator::FallibleIterator;
use postgres::{Client, NoTls};

use super::{Ctx, Scale, Workload};
use crate::results::{Kind, ResultRow};
use crate::systems::postgis::{PgCluster, PgInstall};
use crate::util::{fmt_num, free_port, percentile};

pub struct ServerAbuse;

/// Clients of each class (64 in all).
const SMALL: usize = 40;
const SCANS: usize = 8;
const INSERTS: usize = 8;
const HOSTILE: usize = 8;

/// The server's bounds in this workload.
const TIMEOUT: &str = "2s";
const QUERY_MEMORY: &str = "64MiB";
const SERVER_MEMORY_MIB: u64 = 256;
const VALUE_BYTES: &str = "16MiB";
const RESULT_BYTES: &str = "64MiB";
const MAX_CONCURRENT: &str = "32";
/// What the server may hold besides DataFusion's pool: the block cache,
/// memtables, batches in flight, 64 sessions, the runtime.
const RSS_MARGIN_MIB: u64 = 256;
/// The p99 small queries must stay under, ms.
const SMALL_P99_MS: f64 = 50.0;

fn rows(scale: Scale) -> i64 {
    match scale {
        Scale::Small => 100_000,
        Scale::Medium => 300_000,
        Scale::Full => 1_000_000,
    }
}

fn duration(scale: Scale) -> Duration {
    Duration::from_secs(match scale {
        Scale::Small => 20,
        Scale::Medium => 60,
        Scale::Full => 120,
    })
}

/// The hostile statements, in the order the hostile clients take them.
fn hostile_statements() -> Vec<(&'static str, String)> {
    let mut nested = "SELECT id FROM items WHERE id < 10".to_string();
    for i in 0..100 {
        nested = format!("SELECT id FROM ({nested}) t{i}");
    }
    vec![
        ("repeat", "SELECT repeat('x', 2000000000)".to_string()),
        (
            "cross join",
            "SELECT count(*) FROM items a, items b WHERE a.val + b.val < -1".to_string(),
        ),
        (
            "agg memory",
            "SELECT string_agg(a.name, ',') FROM items a, items b".to_string(),
        ),
        ("deep nesting", nested),
        (
            "1e6 rows",
            "SELECT a.id, b.id FROM items a, (SELECT id FROM items LIMIT 20) b LIMIT 1000000"
                .to_string(),
        ),
    ]
}

/// Latencies (µs) of the successful statements and the errors by SQLSTATE.
#[derive(Default)]
struct Tally {
    lat: Vec<u32>,
    errors: BTreeMap<String, u64>,
}

impl Tally {
    fn ok(&mut self, t: Instant) {
        self.lat
            .push(u32::try_from(t.elapsed().as_micros()).unwrap_or(u32::MAX));
    }

    fn err(&mut self, e: &postgres::Error) {
        let code = e.code().map_or("io", |c| c.code()).to_string();
        *self.errors.entry(code).or_default() += 1;
    }
}

/// The server child process; killed when dropped.
pub(crate) struct ServerChild {
    pub(crate) child: Child,
}

impl Drop for ServerChild {
    fn drop(&mut self) {
        // SAFETY: kill(2) with a pid we spawned and still own (not yet
        // reaped: `wait` below reaps it), and a valid signal number.
        unsafe {
            libc::kill(self.child.id() as i32, libc::SIGTERM);
        }
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl ServerChild {
    fn status_kib(&self, key: &str) -> Option<u64> {
        let text = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).ok()?;
        let line = text.lines().find(|l| l.starts_with(key))?;
        line.split_whitespace().nth(1)?.parse().ok()
    }
}

/// A free loopback port (bound and released: another process could take it
/// in between, which on loopback during a benchmark does not happen).
/// The harness's `silt serve` (`src/bin/silt-bench-serve.rs`), built
/// beside this binary.
pub(crate) fn serve_exe() -> Result<std::path::PathBuf> {
    let exe = std::env::current_exe()?.with_file_name("silt-bench-serve");
    anyhow::ensure!(
        exe.is_file(),
        "{} is missing: build the harness with `cargo build --release` (it builds both binaries)",
        exe.display()
    );
    Ok(exe)
}

fn start_server(dir: &Path, pg: u16, http: u16) -> Result<ServerChild> {
    let child = Command::new(serve_exe()?)
        .arg("--db")
        .arg(dir)
        .args(["--pg", &format!("127.0.0.1:{pg}")])
        .args(["--http", &format!("127.0.0.1:{http}")])
        .args(["--max-concurrent", MAX_CONCURRENT])
        .args(["--timeout", TIMEOUT])
        .args(["--max-query-memory", QUERY_MEMORY])
        .args(["--max-server-memory", &format!("{SERVER_MEMORY_MIB}MiB")])
        .args(["--max-value-bytes", VALUE_BYTES])
        .args(["--max-result-bytes", RESULT_BYTES])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .context("starting the server child")?;
    let server = ServerChild { child };
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let probe = Target {
            port: pg,
            user: "bench",
            dbname: "silt",
        };
        if probe.connect().is_ok() {
            return Ok(server);
        }
        if Instant::now() > deadline {
            bail!("the server did not come up on port {pg}");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn load(target: &Target, n: i64) -> Result<()> {
    let mut c = target.connect()?;
    c.batch_execute(LOAD_DDL)?;
    let mut i = 0;
    while i < n {
        let end = (i + 2000).min(n);
        let values: Vec<String> = (i..end)
            .map(|k| format!("({k}, {}, 'name-{k:08}', {}.5)", k % 100, k % 1000))
            .collect();
        c.batch_execute(&format!("INSERT INTO items VALUES {}", values.join(",")))?;
        i = end;
    }
    Ok(())
}

/// What one system did under the load.
struct Outcome {
    /// Per client class: latencies and errors, and the inserts acknowledged.
    classes: BTreeMap<&'static str, Tally>,
    acked: u64,
    /// Outcomes of the hostile statements: statement -> outcome -> count.
    hostile: BTreeMap<String, BTreeMap<String, u64>>,
    /// Peak of the sampled memory (KiB).
    peak_kib: u64,
    elapsed: f64,
}

/// How to reach a system under test.
struct Target {
    port: u16,
    user: &'static str,
    dbname: &'static str,
}

impl Target {
    fn connect(&self) -> Result<Client, postgres::Error> {
        Client::connect(
            &format!(
                "host=127.0.0.1 port={} user={} dbname={} connect_timeout=30",
                self.port, self.user, self.dbname
            ),
            NoTls,
        )
    }
}

/// Run the 64 clients against `target` for `run_for`, sampling the
/// server's memory with `memory_kib` (KiB).
fn drive(
    target: &Target,
    n: i64,
    run_for: Duration,
    memory_kib: &(dyn Fn() -> Option<u64> + Sync),
) -> Result<Outcome> {
    let stop = Arc::new(AtomicBool::new(false));
    let next_id = Arc::new(AtomicU64::new(0));
    let peak = AtomicU64::new(0);
    let hostile = Arc::new(hostile_statements());
    let by_kind: Arc<Mutex<BTreeMap<String, BTreeMap<String, u64>>>> = Arc::default();
    let start = Instant::now();
    let results = std::thread::scope(|s| -> Result<Vec<(&'static str, Tally, u64)>> {
        let sampler = {
            let stop = stop.clone();
            let peak = &peak;
            s.spawn(move || {
                while !stop.load(Ordering::Acquire) {
                    if let Some(kib) = memory_kib() {
                        peak.fetch_max(kib, Ordering::AcqRel);
                    }
                    std::thread::sleep(Duration::from_millis(50));
                }
            })
        };
        let mut handles = Vec::new();
        let classes = [
            ("small", SMALL),
            ("scan", SCANS),
            ("insert", INSERTS),
            ("hostile", HOSTILE),
        ];
        let mut client_no = 0u64;
        for (class, count) in classes {
            for i in 0..count {
                client_no += 1;
                let (stop, next_id, hostile, by_kind) = (
                    stop.clone(),
                    next_id.clone(),
                    hostile.clone(),
                    by_kind.clone(),
                );
                let me = client_no;
                handles.push(s.spawn(move || -> Result<(&'static str, Tally, u64)> {
                    let mut c = target.connect()?;
                    let mut tally = Tally::default();
                    let mut acked = 0u64;
                    let lookup = c.prepare("SELECT name, val FROM items WHERE id = $1")?;
                    let insert = c.prepare("INSERT INTO log VALUES ($1, $2)")?;
                    let mut k = (me as i64).wrapping_mul(7919) % n;
                    let mut turn = i;
                    while !stop.load(Ordering::Acquire) {
                        let t = Instant::now();
                        match class {
                            "small" => {
                                k = (k + 104_729) % n;
                                match c.query_opt(&lookup, &[&k]) {
                                    Ok(_) => tally.ok(t),
                                    Err(e) => tally.err(&e),
                                }
                            }
                            "scan" => match c.query(
                                "SELECT grp, count(*), avg(val) FROM items GROUP BY grp",
                                &[],
                            ) {
                                Ok(_) => tally.ok(t),
                                Err(e) => tally.err(&e),
                            },
                            "insert" => {
                                let id = next_id.fetch_add(1, Ordering::AcqRel) as i64;
                                match c.execute(&insert, &[&id, &(me as i64)]) {
                                    Ok(_) => {
                                        acked += 1;
                                        tally.ok(t);
                                    }
                                    Err(e) => tally.err(&e),
                                }
                            }
                            _ => {
                                let (name, sql) = &hostile[turn % hostile.len()];
                                turn += 1;
                                // Read every row of a result (the 10^6 one).
                                let r = c
                                    .query_raw(sql.as_str(), std::iter::empty::<i64>())
                                    .and_then(|mut it| {
                                        let mut n = 0u64;
                                        while it.next()?.is_some() {
                                            n += 1;
                                        }
                                        Ok(n)
                                    });
                                let outcome = match &r {
                                    Ok(_) => "ok".to_string(),
                                    Err(e) => e.code().map_or("io", |c| c.code()).to_string(),
                                };
                                if let Ok(mut m) = by_kind.lock() {
                                    *m.entry(name.to_string())
                                        .or_default()
                                        .entry(outcome)
                                        .or_default() += 1;
                                }
                                match r {
                                    Ok(_) => tally.ok(t),
                                    Err(e) => {
                                        tally.err(&e);
                                        if e.is_closed() {
                                            c = target.connect()?;
                                        }
                                    }
                                }
                            }
                        }
                    }
                    Ok((class, tally, acked))
                }));
            }
        }
        std::thread::sleep(run_for);
        stop.store(true, Ordering::Release);
        let mut out = Vec::new();
        for h in handles {
            match h.join() {
                Ok(r) => out.push(r?),
                Err(_) => bail!("a client thread panicked"),
            }
        }
        let _ = sampler.join();
        Ok(out)
    })?;
    let elapsed = start.elapsed().as_secs_f64();
    let mut classes: BTreeMap<&'static str, Tally> = BTreeMap::new();
    let mut acked = 0u64;
    for (class, tally, a) in results {
        acked += a;
        let m = classes.entry(class).or_default();
        m.lat.extend(tally.lat);
        for (k, v) in tally.errors {
            *m.errors.entry(k).or_default() += v;
        }
    }
    let hostile = by_kind.lock().map(|m| m.clone()).unwrap_or_default();
    Ok(Outcome {
        classes,
        acked,
        hostile,
        peak_kib: peak.load(Ordering::Acquire),
        elapsed,
    })
}

/// The rows of one system's outcome; returns the small queries' p99 (ms).
fn report(sys: &str, o: &mut Outcome, present: i64, rows_out: &mut Vec<ResultRow>) -> f64 {
    let mut small_p99 = f64::NAN;
    for (class, t) in o.classes.iter_mut() {
        t.lat.sort_unstable();
        let p50 = percentile(&t.lat, 50.0) / 1000.0;
        let p99 = percentile(&t.lat, 99.0) / 1000.0;
        if *class == "small" {
            small_p99 = p99;
        }
        rows_out.push(ResultRow::measure(sys, &format!("{class} p50"), "ms", p50));
        rows_out.push(ResultRow::measure(sys, &format!("{class} p99"), "ms", p99));
        rows_out.push(ResultRow::measure(
            sys,
            &format!("{class} ok/s"),
            "ops/s",
            t.lat.len() as f64 / o.elapsed,
        ));
        for (code, count) in &t.errors {
            rows_out.push(ResultRow::stat(
                sys,
                &format!("{class} errors {code}"),
                "count",
                *count as f64,
            ));
        }
    }
    for (name, outcomes) in &o.hostile {
        for (outcome, count) in outcomes {
            rows_out.push(ResultRow::stat(
                sys,
                &format!("hostile {name} -> {outcome}"),
                "count",
                *count as f64,
            ));
        }
    }
    rows_out.push(ResultRow::measure(
        sys,
        "server peak memory (PSS)",
        "MiB",
        o.peak_kib as f64 / 1024.0,
    ));
    rows_out.push(ResultRow::stat(
        sys,
        "inserts acknowledged",
        "count",
        o.acked as f64,
    ));
    rows_out.push(ResultRow::stat(
        sys,
        "inserted rows present",
        "count",
        present as f64,
    ));
    rows_out.push(
        ResultRow::new(
            sys,
            "no lost inserts (present / acknowledged)",
            "x",
            Kind::Ratio,
            if o.acked == 0 {
                1.0
            } else {
                present as f64 / o.acked as f64
            },
        )
        .with_target(1.0),
    );
    small_p99
}

/// Proportional set size (KiB) of a process (its share of shared pages).
fn pss_kib(pid: u32) -> Option<u64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup")).ok()?;
    let line = text.lines().find(|l| l.starts_with("Pss:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

const LOAD_DDL: &str = "CREATE TABLE items (id BIGINT PRIMARY KEY, grp BIGINT, name VARCHAR, val DOUBLE PRECISION); \
     CREATE TABLE log (id BIGINT PRIMARY KEY, client BIGINT)";

impl Workload for ServerAbuse {
    fn name(&self) -> &'static str {
        "server-abuse"
    }

    fn description(&self) -> &'static str {
        "silt serve vs PostgreSQL under 64 clients with hostile queries: latency, peak memory, no lost inserts"
    }

    fn explanation(&self) -> &'static str {
        "Issue 28: a server must answer hostile queries (a 2 GB repeat, cross joins, \
         memory-hungry aggregates, deep nesting, 10^6-row results) with errors at its \
         limits while staying responsive and bounded. The same load runs against `silt serve` \
         (a child process with explicit bounds) and a throw-away PostgreSQL cluster \
         (statement_timeout and work_mem set to the same budgets): 40 clients send point \
         lookups, 8 full-scan aggregates, 8 single-row inserts and 8 the hostile statements, \
         for a fixed time. Memory is the server's proportional set size (PostgreSQL: summed \
         over its processes), sampled every 50 ms. Targets for Silt: p99 of the point lookups \
         under 50 ms, peak memory under its memory limit plus 256 MiB, every acknowledged \
         insert present at the end."
    }

    fn durability(&self) -> &'static str {
        "Silt default (group commit); PostgreSQL synchronous_commit=off; loopback PostgreSQL protocol"
    }

    fn run(&self, scale: Scale, ctx: &Ctx) -> Result<Vec<ResultRow>> {
        let n = rows(scale);
        let run_for = duration(scale);
        let mut rows_out = Vec::new();
        ctx.note(format!(
            "silt serve: --max-concurrent {MAX_CONCURRENT} --timeout {TIMEOUT} --max-query-memory {QUERY_MEMORY} \
             --max-server-memory {SERVER_MEMORY_MIB}MiB --max-value-bytes {VALUE_BYTES} --max-result-bytes {RESULT_BYTES}; \
             PostgreSQL: statement_timeout {TIMEOUT}, work_mem {QUERY_MEMORY}, max_connections 100; \
             {SMALL} small, {SCANS} scan, {INSERTS} insert, {HOSTILE} hostile clients; {n} rows; {}s each",
            run_for.as_secs()
        ));

        // Silt.
        let silt_p99;
        let silt_peak_mib;
        {
            let dir = ctx.scratch.join("server-abuse-db");
            // Each run starts empty (the scratch directory outlives a run).
            if dir.exists() {
                std::fs::remove_dir_all(&dir)?;
            }
            let (pg, http) = (free_port()?, free_port()?);
            let server = start_server(&dir, pg, http)?;
            let target = Target {
                port: pg,
                user: "bench",
                dbname: "silt",
            };
            let t = Instant::now();
            load(&target, n)?;
            eprintln!("silt: loaded {n} rows in {:.1}s", t.elapsed().as_secs_f64());
            let pid = server.child.id();
            let mut o = drive(&target, n, run_for, &|| pss_kib(pid))?;
            let mut c = target.connect()?;
            let present: i64 = c.query_one("SELECT count(*) FROM log", &[])?.get(0);
            let hwm_kib = server.status_kib("VmHWM:").unwrap_or(0);
            drop(c);
            drop(server);
            o.peak_kib = o.peak_kib.max(hwm_kib);
            silt_peak_mib = o.peak_kib as f64 / 1024.0;
            silt_p99 = report("silt-serve", &mut o, present, &mut rows_out);
            eprintln!(
                "silt: small p99 {} ms, peak {} MiB, inserts {} acknowledged / {present} present",
                fmt_num(silt_p99),
                fmt_num(silt_peak_mib),
                o.acked
            );
        }

        // PostgreSQL, the same load.
        let mut pg_p99 = f64::NAN;
        let mut pg_peak_mib = f64::NAN;
        match PgInstall::find() {
            Err(reason) => {
                eprintln!("note: skipping postgresql: {reason}");
                ctx.note(format!("postgresql: SKIPPED: {reason}"));
            }
            Ok(install) => {
                let dir = ctx.scratch.join("server-abuse-pg");
                let cluster = PgCluster::start_with(
                    install,
                    &dir,
                    &format!(
                        "max_connections = 100\nstatement_timeout = '{TIMEOUT}'\nwork_mem = '{QUERY_MEMORY}'\n"
                    )
                    .replace("MiB", "MB"),
                )?;
                let target = Target {
                    port: cluster.port,
                    user: "postgres",
                    dbname: "postgres",
                };
                let t = Instant::now();
                load(&target, n)?;
                eprintln!(
                    "postgresql: loaded {n} rows in {:.1}s",
                    t.elapsed().as_secs_f64()
                );
                let mut o = drive(&target, n, run_for, &|| cluster.pss_kib())?;
                let mut c = target.connect()?;
                let present: i64 = c.query_one("SELECT count(*) FROM log", &[])?.get(0);
                drop(c);
                drop(cluster);
                pg_peak_mib = o.peak_kib as f64 / 1024.0;
                pg_p99 = report("postgresql", &mut o, present, &mut rows_out);
                eprintln!(
                    "postgresql: small p99 {} ms, peak {} MiB",
                    fmt_num(pg_p99),
                    fmt_num(pg_peak_mib)
                );
            }
        }

        // Targets and ratios (higher is better, PASS at 1).
        rows_out.push(
            ResultRow::new(
                "silt-serve",
                "small p99 target (50 ms / p99)",
                "x",
                Kind::Ratio,
                SMALL_P99_MS / silt_p99,
            )
            .with_target(1.0),
        );
        let bound = (SERVER_MEMORY_MIB + RSS_MARGIN_MIB) as f64;
        rows_out.push(
            ResultRow::new(
                "silt-serve",
                "peak memory target ((limit + 256 MiB) / peak)",
                "x",
                Kind::Ratio,
                bound / silt_peak_mib,
            )
            .with_target(1.0),
        );
        if pg_p99.is_finite() {
            rows_out.push(ResultRow::new(
                "silt-serve",
                "small p99 vs PostgreSQL (postgresql / silt)",
                "x",
                Kind::Ratio,
                pg_p99 / silt_p99,
            ));
            rows_out.push(ResultRow::new(
                "silt-serve",
                "peak memory vs PostgreSQL (postgresql / silt)",
                "x",
                Kind::Ratio,
                pg_peak_mib / silt_peak_mib,
            ));
        }
        Ok(rows_out)
    }
}
