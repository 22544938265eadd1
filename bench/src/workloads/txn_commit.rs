//! `txn-commit` (issue 19): durable multi-statement transactions over two
//! tables. Transactions of 1, 10 and 100 upserts (half into each table) from 1
//! and 16 client threads, every commit fsynced before it is acknowledged: Silt
//! (`Database::begin` ... `commit`) against PostgreSQL 15 + PostGIS
//! (`synchronous_commit = on`) and SQLite (WAL, `synchronous=FULL`). Plus Silt's
//! record-level autocommit path (`Dataset::upsert`) at 16 threads on the same
//! datasets, to see that it did not get slower.

use std::{
    collections::HashMap,
    sync::Barrier,
    time::{Duration, Instant},
};

use anyhow::{Result, anyhow, bail};
use rand::{Rng, RngCore, SeedableRng, rngs::SmallRng};

use super::{Ctx, Scale, Workload};
use crate::{
    fsync_count, limits,
    machine::CpuSnapshot,
    results::{Kind, ResultRow},
    systems::{
        TXN_PAYLOAD_BYTES, TXN_TABLES, TxnClient, TxnRow, TxnStore, postgis::PgInstall,
        txn_postgres::PgTxn, txn_sqlite::SqliteTxn,
    },
    util::{DiskCounters, ScratchDir, fmt_num, percentile, spinner},
};

/// Keys per table: upserts draw their keys uniformly from `0..KEY_SPACE`.
pub const KEY_SPACE: u32 = 1_000_000;
/// Writes per transaction, in the order they run.
pub const WRITES: [usize; 3] = [1, 10, 100];
/// Client thread counts, in the order they run.
pub const THREADS: [usize; 2] = [1, 16];
/// Silt / PostgreSQL commits/s target at the largest thread count (issue 19).
pub const POSTGRES_TARGET: f64 = 2.0;
/// The systems, in the order of the first run (rotated from run to run).
const SYSTEMS: [&str; 3] = ["silt", "postgres", "sqlite"];
/// Idle time before each cell in which other processes' disk activity is sampled.
const QUIET_SAMPLE: Duration = Duration::from_millis(500);
const NOISY_WRITE_MB_S: f64 = 2.0;
const NOISY_FLUSHES_S: f64 = 20.0;
/// The fsync probe at the start of each run.
const PROBE: Duration = Duration::from_secs(1);

pub struct TxnCommit;

/// How long each cell (system, writes per transaction, threads) runs.
pub fn duration(scale: Scale) -> Duration {
    Duration::from_secs(match scale {
        Scale::Small => 3,
        Scale::Medium => 10,
        Scale::Full => 20,
    })
}

/// Records per table loaded before the cells (so that upserts replace).
pub fn preload(scale: Scale) -> usize {
    match scale {
        Scale::Small => 100_000,
        Scale::Medium => 500_000,
        Scale::Full => 1_000_000,
    }
}

/// The metric `what` ("commits", "rows", "p50", ...) of the transaction cell
/// (`writes` per transaction, `threads` clients).
fn cell(what: &str, writes: usize, threads: usize) -> String {
    format!("{what} {writes}w {threads}thr")
}

/// The metric `what` of the autocommit cell.
fn auto_cell(what: &str, threads: usize) -> String {
    format!("{what} autocommit {threads}thr")
}

const COMMITS: &str = "commits";

/// Which keys of each table exist (a bitset of `KEY_SPACE` bits per table).
struct Present([Vec<u64>; 2]);

impl Present {
    fn new() -> Self {
        let words = (KEY_SPACE as usize).div_ceil(64);
        Self([vec![0; words], vec![0; words]])
    }

    /// Sets the bit; true if it was clear.
    fn set(&mut self, table: usize, id: u32) -> bool {
        let (w, b) = ((id / 64) as usize, id % 64);
        let was = self.0[table][w] >> b & 1;
        self.0[table][w] |= 1 << b;
        was == 0
    }

    fn count(&self, table: usize) -> u64 {
        self.0[table]
            .iter()
            .map(|w| u64::from(w.count_ones()))
            .sum()
    }
}

fn random_row(rng: &mut SmallRng, table: usize, id: u32) -> TxnRow {
    let mut payload = [0u8; TXN_PAYLOAD_BYTES];
    rng.fill_bytes(&mut payload);
    TxnRow {
        table,
        id: i64::from(id),
        v: i64::from(rng.random_range(0..KEY_SPACE)),
        lon: rng.random_range(-180.0..180.0),
        lat: rng.random_range(-90.0..90.0),
        payload,
    }
}

/// The rows of transaction number `i` of a client: `writes` upserts of
/// distinct random keys, half into each table (one write: the table
/// alternates), sorted by table and key (so that PostgreSQL's row locks are
/// taken in one global order and cannot deadlock).
fn txn_rows(rng: &mut SmallRng, writes: usize, i: u64, out: &mut Vec<TxnRow>) {
    out.clear();
    let n0 = (writes + (i % 2) as usize) / 2;
    for (table, n) in [(0, n0), (1, writes - n0)] {
        let start = out.len();
        while out.len() - start < n {
            let id = rng.random_range(0..KEY_SPACE);
            if out[start..].iter().any(|r| r.id == i64::from(id)) {
                continue;
            }
            out.push(random_row(rng, table, id));
        }
        out[start..].sort_by_key(|r| r.id);
    }
}

impl Workload for TxnCommit {
    fn name(&self) -> &'static str {
        "txn-commit"
    }

    fn description(&self) -> &'static str {
        "durable transactions of 1/10/100 upserts over two indexed tables, 1/16 threads (Silt vs PostgreSQL vs SQLite)"
    }

    fn explanation(&self) -> &'static str {
        "Durable multi-statement transactions (issue 19). Two tables (Silt datasets) `place_a` and \
         `place_b`, each `(id primary key, v integer, loc point, payload 100 bytes)` with a spatial \
         index on `loc` (Silt R-tree, PostGIS GiST, SQLite R*Tree) and a B-tree on `v`, both \
         preloaded with the same random records (small 100 K, medium 500 K, full 1 M per table; keys \
         drawn from 1 M per table). Then, for 1 and 16 client threads and transactions of 1, 10 and \
         100 writes (small 3 s, medium 10 s, full 20 s each, on the same database, one after the \
         other), every client runs transactions back to back: upserts of distinct random keys (new \
         random v, point and payload), half into each table (a 1-write transaction alternates \
         tables), sorted by table and key, then commit; a commit returns once it is durable (fsynced). \
         Silt: `Durability::Sync`, `Database::begin()`, one `Transaction::upsert` per row, `commit()`, \
         run again on `Error::Conflict` (counted). PostgreSQL 15 + PostGIS: `synchronous_commit=on` \
         (fsync on), otherwise the PostGIS peer's settings; BEGIN, one prepared `INSERT ... ON \
         CONFLICT (id) DO UPDATE` per row, COMMIT, one connection per client. SQLite: WAL, \
         `synchronous=FULL`, BEGIN IMMEDIATE, per row an upsert into the table and an INSERT OR \
         REPLACE into its R*Tree, COMMIT, one connection per client, writers taking turns through a \
         mutex. Reported per system and cell: commits/s, rows written/s, p50/p99 latency of the whole \
         transaction (begin to durable commit, retries included), fsyncs/s and commits per fsync \
         (Silt and SQLite: every fsync of the process, counted by the harness; PostgreSQL: \
         `pg_stat_wal.wal_sync`), Silt/PostgreSQL and Silt/SQLite commits/s per cell (target: Silt \
         >= 2x PostgreSQL at 16 threads), commits/s against the disk's fsyncs/s (1-write \
         transactions at 1 thread need one fsync each: the disk bounds them). Also Silt's \
         record-level autocommit path (`Dataset::upsert`, one transaction per record) at 16 threads \
         into the same datasets, next to 1-write transactions at 16 threads. After the cells every \
         access path of every table (primary, B-tree, spatial index) must hold exactly the keys \
         written, or the run fails."
    }

    fn durability(&self) -> &'static str {
        "every commit fsynced before it is acknowledged (Silt Durability::Sync, PostgreSQL synchronous_commit=on, SQLite WAL synchronous=FULL)"
    }

    fn run(&self, scale: Scale, ctx: &Ctx) -> Result<Vec<ResultRow>> {
        let mut systems = SYSTEMS;
        systems.rotate_left(ctx.run % SYSTEMS.len());
        let dur = duration(scale);
        let counted = fsync_count::available(&ctx.scratch);
        let probe_file = ctx.scratch.join("fsync-probe.bin");
        let probe = limits::fsync_rate(&probe_file, PROBE)?;
        let _ = std::fs::remove_file(&probe_file);
        let mut rows = vec![
            ResultRow::new(
                "disk",
                "fsyncs/s (limits.json: 4 KiB append + fdatasync, 1 thread)",
                "fsyncs/s",
                Kind::Limit,
                ctx.limits.fsyncs_per_s,
            ),
            ResultRow::new(
                "disk",
                "fsyncs/s (same probe for 1 s at the start of the run)",
                "fsyncs/s",
                Kind::Limit,
                probe,
            ),
        ];
        eprintln!(
            "disk: {} fsyncs/s in limits.json, {} fsyncs/s now (1 s probe); {} s per cell",
            fmt_num(ctx.limits.fsyncs_per_s),
            fmt_num(probe),
            dur.as_secs()
        );

        // The preload: the same records for every system.
        let mut rng = SmallRng::seed_from_u64(ctx.seed ^ 0x7e5c_0019);
        let mut base = Present::new();
        let n = preload(scale);
        let mut pre = Vec::with_capacity(2 * n);
        for table in 0..2 {
            let mut k = 0;
            while k < n {
                let id = rng.random_range(0..KEY_SPACE);
                if base.set(table, id) {
                    pre.push(random_row(&mut rng, table, id));
                    k += 1;
                }
            }
        }

        for &sys in &systems {
            if !wants(ctx, sys) {
                continue;
            }
            let dir = ScratchDir::new(&ctx.scratch, &format!("txn-{sys}"))?;
            let store: Box<dyn TxnStore> = match sys {
                "silt" => match open_silt(dir.path())? {
                    Some(s) => s,
                    None => {
                        rows.extend(skipped(ctx, sys, "built without the Silt adapter"));
                        continue;
                    }
                },
                "postgres" => match PgInstall::find() {
                    Ok(install) => Box::new(PgTxn::open(install, dir.path())?),
                    Err(reason) => {
                        rows.extend(skipped(ctx, sys, &reason));
                        continue;
                    }
                },
                _ => Box::new(SqliteTxn::open(dir.path())?),
            };
            ctx.note(format!("{sys}: {}", store.describe()));
            ctx.note(format!("{sys} fsyncs: {}", store.fsync_source()));
            let counted_here = counted || sys == "postgres";
            let t = Instant::now();
            let sp = spinner(format!(
                "{sys}: preloading {} records per table",
                fmt_num(n as f64)
            ));
            store.preload(&pre)?;
            sp.finish_and_clear();
            let secs = t.elapsed().as_secs_f64();
            eprintln!(
                "{sys}: preload of 2 x {} records in {secs:.1} s",
                fmt_num(n as f64)
            );
            rows.push(ResultRow::stat(sys, "preload (incl. settle)", "s", secs));
            let mut present = Present(base.0.clone());
            let mut seed_n = 0u64;
            for threads in THREADS {
                for writes in WRITES {
                    seed_n += 1;
                    let spec = Cell {
                        sys,
                        writes,
                        threads,
                        autocommit: false,
                        seed: ctx.seed ^ seed_n.wrapping_mul(0x9e37_79b9_7f4a_7c15),
                    };
                    rows.extend(drive(
                        &*store,
                        &spec,
                        dur,
                        ctx,
                        counted_here,
                        dir.path(),
                        &mut present,
                    )?);
                }
            }
            if sys == "silt" {
                seed_n += 1;
                let spec = Cell {
                    sys,
                    writes: 1,
                    threads: 16,
                    autocommit: true,
                    seed: ctx.seed ^ seed_n.wrapping_mul(0x9e37_79b9_7f4a_7c15),
                };
                rows.extend(drive(
                    &*store,
                    &spec,
                    dur,
                    ctx,
                    counted_here,
                    dir.path(),
                    &mut present,
                )?);
            }
            // Every access path of every table holds exactly the keys written.
            let sp = spinner(format!("{sys}: checking every access path"));
            let counts = store.counts()?;
            sp.finish_and_clear();
            for (label, table, got) in &counts {
                let want = present.count(*table);
                if *got != want {
                    bail!(
                        "{sys}: {label} has {got} rows, but {want} distinct keys were written to {}",
                        TXN_TABLES[*table]
                    );
                }
            }
            eprintln!(
                "{sys}: every access path agrees ({} / {} rows)",
                present.count(0),
                present.count(1)
            );
            for (t, table) in TXN_TABLES.iter().enumerate() {
                rows.push(ResultRow::stat(
                    sys,
                    &format!("rows in {table} at the end"),
                    "count",
                    present.count(t) as f64,
                ));
            }
            store.close()?;
        }
        rows.extend(ratios(&rows));
        Ok(rows)
    }
}

#[cfg(feature = "silt")]
fn open_silt(dir: &std::path::Path) -> Result<Option<Box<dyn TxnStore>>> {
    Ok(Some(Box::new(crate::systems::txn_silt::SiltTxn::open(
        dir,
    )?)))
}

#[cfg(not(feature = "silt"))]
fn open_silt(_dir: &std::path::Path) -> Result<Option<Box<dyn TxnStore>>> {
    Ok(None)
}

/// Whether the user asked for this system (`--systems`).
fn wants(ctx: &Ctx, label: &str) -> bool {
    match &ctx.systems {
        None => true,
        Some(list) => list.iter().any(|s| {
            s.eq_ignore_ascii_case(label)
                || (label == "postgres"
                    && (s.eq_ignore_ascii_case("postgis") || s.eq_ignore_ascii_case("pg")))
        }),
    }
}

fn skipped(ctx: &Ctx, label: &str, reason: &str) -> Vec<ResultRow> {
    eprintln!("note: skipping {label}: {reason}");
    ctx.note(format!("{label}: SKIPPED: {reason}"));
    vec![ResultRow::stat(
        label,
        "skipped (see the header)",
        "bool",
        1.0,
    )]
}

struct Cell<'a> {
    sys: &'a str,
    writes: usize,
    threads: usize,
    /// Silt's record-level path: one `Dataset::upsert` per commit.
    autocommit: bool,
    seed: u64,
}

struct ThreadResult {
    commits: u64,
    rows: u64,
    retries: u64,
    lat_us: Vec<u32>,
    /// (table, key) of every committed write.
    keys: Vec<(u8, u32)>,
    finished: Instant,
}

/// Runs one cell against `store`; returns its rows and adds the keys written to `present`.
fn drive<'s>(
    store: &'s dyn TxnStore,
    c: &Cell,
    dur: Duration,
    ctx: &Ctx,
    counted: bool,
    dir: &std::path::Path,
    present: &mut Present,
) -> Result<Vec<ResultRow>> {
    let sys = c.sys;
    let metric = |what: &str| {
        if c.autocommit {
            auto_cell(what, c.threads)
        } else {
            cell(what, c.writes, c.threads)
        }
    };
    let name = metric(COMMITS);
    let clients = (0..c.threads)
        .map(|_| store.client())
        .collect::<Result<Vec<Box<dyn TxnClient + 's>>>>()?;
    let barrier = Barrier::new(c.threads + 1);
    let quiet = DiskCounters::read(dir).and_then(|a| {
        std::thread::sleep(QUIET_SAMPLE);
        Some(DiskCounters::read(dir)?.since(&a))
    });
    let fs0 = store.fsyncs();
    let sp = spinner(format!("{sys}: {name}"));
    let dev0 = DiskCounters::read(dir);
    let (own0, server0, cpu0) = (
        own_cpu_seconds(),
        store.server_cpu_seconds(),
        CpuSnapshot::take(),
    );
    let (t0, results) = std::thread::scope(|s| {
        let handles: Vec<_> = clients
            .into_iter()
            .enumerate()
            .map(|(t, mut client)| {
                let barrier = &barrier;
                let seed = c.seed ^ (t as u64).wrapping_mul(0x2545_f491_4f6c_dd1d);
                let (writes, autocommit) = (c.writes, c.autocommit);
                s.spawn(move || -> Result<(ThreadResult, Box<dyn TxnClient + 's>)> {
                    let mut rng = SmallRng::seed_from_u64(seed);
                    let mut lat_us = Vec::with_capacity(1 << 14);
                    let mut keys = Vec::new();
                    let mut txn = Vec::with_capacity(writes);
                    let (mut retries, mut n_rows) = (0u64, 0u64);
                    barrier.wait();
                    let end = Instant::now() + dur;
                    let mut i = t as u64;
                    loop {
                        txn_rows(&mut rng, writes, i, &mut txn);
                        let start = Instant::now();
                        if start >= end {
                            break;
                        }
                        if autocommit {
                            client.autocommit(&txn[0])?;
                        } else {
                            retries += u64::from(client.transact(&txn)?);
                        }
                        lat_us.push(u32::try_from(start.elapsed().as_micros()).unwrap_or(u32::MAX));
                        n_rows += txn.len() as u64;
                        keys.extend(txn.iter().map(|r| (r.table as u8, r.id as u32)));
                        i += 1;
                    }
                    let done = ThreadResult {
                        commits: lat_us.len() as u64,
                        rows: n_rows,
                        retries,
                        lat_us,
                        keys,
                        finished: Instant::now(),
                    };
                    // Kept open until the CPU counters are read.
                    Ok((done, client))
                })
            })
            .collect();
        barrier.wait();
        let t0 = Instant::now();
        let results: Vec<Result<(ThreadResult, Box<dyn TxnClient + 's>)>> = handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(anyhow!("a {sys} client thread panicked")))
            })
            .collect();
        (t0, results)
    });
    let dev1 = DiskCounters::read(dir);
    let (own1, server1, cpu1) = (
        own_cpu_seconds(),
        store.server_cpu_seconds(),
        CpuSnapshot::take(),
    );
    let (results, clients): (Vec<ThreadResult>, Vec<_>) = results
        .into_iter()
        .collect::<Result<Vec<_>>>()?
        .into_iter()
        .unzip();
    drop(clients);
    let fs1 = store.fsyncs();
    sp.finish_and_clear();

    let elapsed = results
        .iter()
        .map(|r| r.finished.saturating_duration_since(t0))
        .max()
        .unwrap_or_default()
        .as_secs_f64();
    let commits: u64 = results.iter().map(|r| r.commits).sum();
    let n_rows: u64 = results.iter().map(|r| r.rows).sum();
    let retries: u64 = results.iter().map(|r| r.retries).sum();
    let mut lat_us = Vec::with_capacity(commits as usize);
    for r in results {
        lat_us.extend(r.lat_us);
        for (t, k) in r.keys {
            present.set(usize::from(t), k);
        }
    }
    lat_us.sort_unstable();
    let commits_s = commits as f64 / elapsed;
    let p50 = percentile(&lat_us, 50.0) / 1e3;
    let p99 = percentile(&lat_us, 99.0) / 1e3;
    let mean_ms =
        lat_us.iter().map(|&v| f64::from(v)).sum::<f64>() / lat_us.len().max(1) as f64 / 1e3;
    let limit = ctx.limits.fsyncs_per_s;

    let mut rows = vec![
        ResultRow::measure(sys, &name, "commits/s", commits_s),
        ResultRow::measure(sys, &metric("rows"), "rows/s", n_rows as f64 / elapsed),
        ResultRow::measure(sys, &metric("p50"), "ms", p50),
        ResultRow::measure(sys, &metric("p99"), "ms", p99),
        ResultRow::stat(sys, &format!("{name}.count"), "count", commits as f64),
        ResultRow::stat(sys, &format!("{name}.retries"), "count", retries as f64),
        ResultRow::stat(sys, &format!("{name}.mean latency"), "ms", mean_ms),
        ResultRow::stat(
            sys,
            &format!("{name}.max latency"),
            "ms",
            lat_us.last().map_or(f64::NAN, |&v| f64::from(v) / 1e3),
        ),
        ResultRow::new(
            sys,
            &format!("{name}: commits/s vs disk fsyncs/s"),
            "x",
            Kind::Limit,
            commits_s / limit,
        ),
    ];
    let fsyncs = match (counted, fs0, fs1) {
        (true, Some(a), Some(b)) => Some(b.saturating_sub(a)),
        _ => None,
    };
    if let Some(f) = fsyncs {
        rows.push(ResultRow::measure(
            sys,
            &metric("fsyncs"),
            "fsyncs/s",
            f as f64 / elapsed,
        ));
        rows.push(ResultRow::stat(
            sys,
            &format!("{name}.commits per fsync"),
            "commits/fsync",
            if f == 0 {
                f64::NAN
            } else {
                commits as f64 / f as f64
            },
        ));
    }
    // Where the CPU went: this process (clients; all of Silt and SQLite), the
    // server (PostgreSQL), everything else on the machine.
    let own_s = own1 - own0;
    let server_s = server0.zip(server1).map(|(a, b)| b - a);
    let sys_cpu_s = own_s + server_s.unwrap_or(0.0);
    rows.push(ResultRow::stat(
        sys,
        &format!("{name}.harness process CPU"),
        "cores",
        own_s / elapsed,
    ));
    if let Some(sv) = server_s {
        rows.push(ResultRow::stat(
            sys,
            &format!("{name}.server processes CPU"),
            "cores",
            sv / elapsed,
        ));
    }
    rows.push(ResultRow::stat(
        sys,
        &format!("{name}.CPU per commit (harness + server)"),
        "us",
        1e6 * sys_cpu_s / commits.max(1) as f64,
    ));
    if let Some(others) = cpu0.zip(cpu1).and_then(|(a, b)| b.others_since(&a)) {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
        rows.push(ResultRow::stat(
            sys,
            &format!("{name}.other processes CPU (excl. server)"),
            "cores",
            (others * cores - server_s.unwrap_or(0.0) / elapsed).max(0.0),
        ));
    }
    if let (Some(a), Some(b)) = (dev0, dev1) {
        let d = b.since(&a);
        rows.push(ResultRow::stat(
            sys,
            &format!("{name}.disk flushes/s (whole disk)"),
            "flushes/s",
            d.flushes as f64 / elapsed,
        ));
        rows.push(ResultRow::stat(
            sys,
            &format!("{name}.disk writes (whole disk)"),
            "MB/s",
            d.write_bytes as f64 / elapsed / 1e6,
        ));
    }
    if let Some(q) = quiet {
        let secs = QUIET_SAMPLE.as_secs_f64();
        let (mb_s, fl_s) = (q.write_bytes as f64 / secs / 1e6, q.flushes as f64 / secs);
        rows.push(ResultRow::stat(
            sys,
            &format!("{name}.other processes' disk writes just before"),
            "MB/s",
            mb_s,
        ));
        rows.push(ResultRow::stat(
            sys,
            &format!("{name}.other processes' disk flushes just before"),
            "flushes/s",
            fl_s,
        ));
        if mb_s > NOISY_WRITE_MB_S || fl_s > NOISY_FLUSHES_S {
            eprintln!(
                "WARNING: other processes were writing to the disk just before {sys} {name} \
                 ({mb_s:.1} MB/s, {fl_s:.0} flushes/s): fsync timings are noisy"
            );
        }
    }
    rows.extend(store.stats(&format!("{name}."))?);
    let fsync_text = match fsyncs {
        Some(f) => format!(
            ", {} fsyncs/s, {:.2} commits/fsync",
            fmt_num(f as f64 / elapsed),
            commits as f64 / f.max(1) as f64
        ),
        None => String::new(),
    };
    eprintln!(
        "{sys}, {name}: {} commits/s ({} rows/s, {:.2}x disk fsyncs/s), p50 {p50:.2} ms, p99 {p99:.2} ms{fsync_text}, \
         CPU {:.2} cores ({:.0} us/commit){}",
        fmt_num(commits_s),
        fmt_num(n_rows as f64 / elapsed),
        commits_s / limit,
        sys_cpu_s / elapsed,
        1e6 * sys_cpu_s / commits.max(1) as f64,
        if retries > 0 {
            format!(", {retries} retries")
        } else {
            String::new()
        }
    );
    Ok(rows)
}

/// CPU seconds (user + system) used so far by this process, all threads.
fn own_cpu_seconds() -> f64 {
    // SAFETY: an all-zero rusage is a valid value of this plain C struct.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `ru` is a valid, writable rusage owned by this frame.
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) } != 0 {
        return 0.0;
    }
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

/// Silt's commits/s relative to each peer in each cell, per run; and Silt's
/// 1-write transactions relative to its autocommit path at 16 threads.
fn ratios(rows: &[ResultRow]) -> Vec<ResultRow> {
    let value: HashMap<(&str, &str), f64> = rows
        .iter()
        .filter(|r| r.kind == Kind::Measure)
        .map(|r| ((r.system.as_str(), r.metric.as_str()), r.value))
        .collect();
    let last = THREADS[THREADS.len() - 1];
    let mut out = Vec::new();
    for peer in ["postgres", "sqlite"] {
        for threads in THREADS {
            for writes in WRITES {
                let m = cell(COMMITS, writes, threads);
                let (Some(s), Some(p)) = (
                    value.get(&("silt", m.as_str())),
                    value.get(&(peer, m.as_str())),
                ) else {
                    continue;
                };
                let row = ResultRow::new(&format!("silt/{peer}"), &m, "x", Kind::Ratio, s / p);
                out.push(if peer == "postgres" && threads == last {
                    row.with_target(POSTGRES_TARGET)
                } else {
                    row
                });
            }
        }
    }
    let txn1 = cell(COMMITS, 1, last);
    let auto = auto_cell(COMMITS, last);
    if let (Some(t), Some(a)) = (
        value.get(&("silt", txn1.as_str())),
        value.get(&("silt", auto.as_str())),
    ) {
        out.push(ResultRow::new(
            "silt txn/autocommit",
            &format!("1-write txns / autocommit upserts {last}thr"),
            "x",
            Kind::Ratio,
            t / a,
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transactions_split_between_tables_with_distinct_sorted_keys() {
        let mut rng = SmallRng::seed_from_u64(7);
        let mut rows = Vec::new();
        for (i, w) in [(0u64, 1usize), (1, 1), (0, 10), (1, 100)] {
            txn_rows(&mut rng, w, i, &mut rows);
            assert_eq!(rows.len(), w);
            let a = rows.iter().filter(|r| r.table == 0).count();
            assert!(a == w / 2 || a == w.div_ceil(2), "{a} of {w}");
            for t in 0..2 {
                let ids: Vec<i64> = rows.iter().filter(|r| r.table == t).map(|r| r.id).collect();
                assert!(ids.windows(2).all(|p| p[0] < p[1]), "sorted, distinct");
            }
            assert!(rows.windows(2).all(|p| p[0].table <= p[1].table));
        }
        // 1-write transactions alternate tables.
        txn_rows(&mut rng, 1, 0, &mut rows);
        let t0 = rows[0].table;
        txn_rows(&mut rng, 1, 1, &mut rows);
        assert_ne!(rows[0].table, t0);
    }

    #[test]
    fn present_counts_distinct_keys() {
        let mut p = Present::new();
        assert!(p.set(0, 5));
        assert!(!p.set(0, 5));
        assert!(p.set(1, KEY_SPACE - 1));
        assert_eq!((p.count(0), p.count(1)), (1, 1));
    }

    #[test]
    fn ratios_per_cell_with_targets_at_16_threads() {
        let mut rows = Vec::new();
        for t in THREADS {
            for w in WRITES {
                rows.push(ResultRow::measure(
                    "silt",
                    &cell(COMMITS, w, t),
                    "commits/s",
                    1000.0,
                ));
                rows.push(ResultRow::measure(
                    "postgres",
                    &cell(COMMITS, w, t),
                    "commits/s",
                    250.0,
                ));
                rows.push(ResultRow::measure(
                    "sqlite",
                    &cell(COMMITS, w, t),
                    "commits/s",
                    100.0,
                ));
            }
        }
        rows.push(ResultRow::measure(
            "silt",
            &auto_cell(COMMITS, 16),
            "commits/s",
            500.0,
        ));
        let r = ratios(&rows);
        assert_eq!(r.len(), 13);
        assert_eq!((r[0].value, r[0].target), (4.0, None));
        assert_eq!(
            (r[3].metric.as_str(), r[3].target),
            ("commits 1w 16thr", Some(2.0))
        );
        assert_eq!(
            (r[6].system.as_str(), r[6].value, r[6].target),
            ("silt/sqlite", 10.0, None)
        );
        assert_eq!(r[12].value, 2.0);
    }
}
