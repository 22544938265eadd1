//! Tables 4.2 and 4.3: every TPC-W statement (`silt::workload::tpcw`, 31
//! reads and 14 writes) run once per round with fresh parameters, the
//! sum of their response times, and the database sizes.
//!
//! Systems, on the same records and the same statement sequence:
//!
//! - `silt-no-views` (the paper's Baseline): the tables, their keys and
//!   foreign keys (Silt makes a B+-tree on each foreign key).
//! - `silt-synergy`: the same, with Synergy's design installed (roots
//!   author, customer, country; the views the statements' joins select,
//!   their view indexes; every write under a root locks the root's key).
//! - `silt-row-locks` (the paper's MVCC-A): the same views without the
//!   hierarchies: a write locks every record and view row it writes.
//! - `postgresql-joins`: PostgreSQL 15, the same tables and foreign keys,
//!   an index on every foreign key and on every column a statement
//!   filters by.
//! - `postgresql-matview`: that, with Synergy's views as `CREATE
//!   MATERIALIZED VIEW`s (indexed on each relation's key and the design's
//!   view indexes), the reads Silt answered from views written on them,
//!   and each write followed by `REFRESH MATERIALIZED VIEW` of the views
//!   over its table (timed with the write: a read after it must see it).
//! - `postgresql-triggers`: the views as tables kept by row triggers in
//!   the writing transaction (what Synergy does, in PL/pgSQL).
//!
//! Statements go as text with their parameters as literals (the simple
//! protocol), one autocommit transaction each, on both servers; both sync
//! their log at every commit (Silt's default; `synchronous_commit = on`).
//! Every read's answer is checked against `silt-no-views`'.

use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::process::Command;
use std::sync::Arc;
use std::time::Instant;

use anyhow::{Context, Result, anyhow, bail};
use postgres::{Client, SimpleQueryMessage};
use silt::synergy::{ColumnRef, JoinCondition, Query, design};
use silt::workload::SplitMix64;
use silt::workload::tpcw::{self, Kind as StKind, Param, Statement};
use silt::{Database, DbOptions, Durability, IndexDef, Value};

use super::tpcw_pg::{self, ViewSpec};
use crate::results::{Kind, ResultRow};
use crate::systems::postgis::{PgCluster, PgInstall};
use crate::util::{dir_size, free_port};
use crate::workloads::Ctx;
use crate::workloads::sql_path::{connect, start_silt};

const ROOTS: [&str; 3] = ["author", "customer", "country"];

/// A read's answer, as its row count and an order-insensitive hash of its
/// rows (each row's cells sorted, numbers normalized), so that `SELECT *`
/// on a view (the view's column order) compares with the join's.
type Digest = (usize, u64);

/// One system's run: ms per statement per round (round 0 is the
/// warm-up), and each read's digest.
struct Timed {
    ms: Vec<Vec<f64>>,
    answers: Vec<Vec<Option<Digest>>>,
}

/// A parameter as an SQL literal both servers read as its column's type.
fn literal(p: Param, v: &Value) -> String {
    let quote = |s: &str| format!("'{}'", s.replace('\'', "''"));
    match (p, v) {
        (_, Value::Null) => "NULL".into(),
        (_, Value::Int(i)) => i.to_string(),
        (_, Value::Double(x)) => format!("{x:?}"),
        (Param::Day(..), Value::String(s)) => format!("DATE {}", quote(s)),
        (Param::Time(..), Value::String(s)) => format!("TIMESTAMP {}", quote(s)),
        (_, Value::String(s)) => quote(s),
        (_, other) => quote(&format!("{other:?}")),
    }
}

/// `sql` with `$n` replaced by `lits[n - 1]` (highest first, so `$1`
/// does not eat `$10`).
fn fill(sql: &str, lits: &[String]) -> String {
    let mut out = sql.to_owned();
    for (i, l) in lits.iter().enumerate().rev() {
        out = out.replace(&format!("${}", i + 1), l);
    }
    out
}

/// Every round's parameters, as literals: the same for every system.
/// `enterCCXact` pays for the order `enterOrder` made in its round.
fn draw(
    stmts: &[Statement],
    scale: &tpcw::Scale,
    rounds: usize,
    seed: u64,
) -> Vec<Vec<Vec<String>>> {
    let mut rng = SplitMix64::new(seed ^ 0x7cc_5e1f);
    (0..rounds)
        .map(|_| {
            let mut order = None;
            stmts
                .iter()
                .map(|s| {
                    let mut lits: Vec<String> = s
                        .params
                        .iter()
                        .zip(s.params(scale, &mut rng))
                        .map(|(p, v)| literal(*p, &v))
                        .collect();
                    if s.name == "enterOrder" {
                        order = lits.first().cloned();
                    }
                    if s.name == "enterCCXact"
                        && let (Some(o), Some(first)) = (&order, lits.first_mut())
                    {
                        *first = o.clone();
                    }
                    lits
                })
                .collect()
        })
        .collect()
}

/// The design's input: each statement's joins and filtered columns.
fn workload(stmts: &[Statement]) -> Vec<Query> {
    stmts
        .iter()
        .map(|s| {
            Query::new(
                s.joins()
                    .iter()
                    .map(|(lt, lc, rt, rc)| JoinCondition::single(lt, lc, rt, rc))
                    .collect(),
                s.filters()
                    .iter()
                    .map(|(t, c)| ColumnRef::new(*t, *c))
                    .collect(),
            )
        })
        .collect()
}

fn open(dir: &std::path::Path) -> Result<Database> {
    Ok(Database::open(
        dir,
        DbOptions {
            durability: Durability::None,
            ..Default::default()
        },
    )?)
}

fn compact_all(db: &Database) -> Result<()> {
    for name in db.dataset_names() {
        db.dataset(&name)?.compact()?;
    }
    Ok(())
}

/// Load the data set into a new database at `dir` (2,000 records per
/// transaction, foreign keys checked), index it as the baseline's
/// PostgreSQL, compact it; seconds taken.
fn load_silt(
    dir: &std::path::Path,
    scale: &tpcw::Scale,
    stmts: &[Statement],
    seed: u64,
) -> Result<f64> {
    let t = Instant::now();
    let db = open(dir)?;
    for def in tpcw::schema() {
        db.create_dataset(def)?;
    }
    let mut sets = HashMap::new();
    let mut tx = db.begin()?;
    let mut n = 0u64;
    for (table, rec) in tpcw::records(scale, seed) {
        let ds = match sets.get(table) {
            Some(d) => Arc::clone(d),
            None => {
                let d = db.dataset(table)?;
                sets.insert(table, Arc::clone(&d));
                d
            }
        };
        tx.insert(&ds, rec)?;
        n += 1;
        if n.is_multiple_of(2_000) {
            tx.commit()?;
            tx = db.begin()?;
        }
        if n.is_multiple_of(1_000_000) {
            eprintln!("synergy tpcw: silt: {n} records loaded");
        }
    }
    tx.commit()?;
    // The secondary indexes PostgreSQL's baseline gets too (the foreign
    // keys' B+-trees Silt made with the datasets).
    let filters: Vec<(&str, &str)> = stmts.iter().flat_map(|s| s.filters()).collect();
    for (table, col, fk) in tpcw_pg::index_columns(&tpcw::schema(), &filters) {
        if !fk {
            db.create_index(&table, IndexDef::btree(&format!("{table}_{col}"), &[&col]))?;
        }
    }
    compact_all(&db)?;
    db.close()?;
    Ok(t.elapsed().as_secs_f64())
}

/// Install Synergy's design into the database at `dir` (without its
/// hierarchies when `row_locks`), compact; the views as specs for
/// PostgreSQL, and seconds taken.
fn install(
    dir: &std::path::Path,
    stmts: &[Statement],
    row_locks: bool,
) -> Result<(Vec<ViewSpec>, f64)> {
    let t = Instant::now();
    let db = open(dir)?;
    let d = design::design(&db, &ROOTS, &workload(stmts))?;
    design::install(&db, &d)?;
    if row_locks {
        for name in db.dataset_names() {
            if db.dataset(&name)?.def().hierarchy.is_some() {
                db.set_hierarchy(&name, None)?;
            }
        }
    }
    let mut specs = Vec::new();
    for view in &d.selection.views {
        let name = view.name();
        let def = db.dataset(&name)?.def();
        let m = def
            .materialized
            .clone()
            .ok_or_else(|| anyhow!("{name} is not a materialized view"))?;
        let mut keys = Vec::new();
        for r in &m.relations {
            let pk = db.dataset(r)?.def().primary_key.clone();
            keys.push(
                pk.first()
                    .cloned()
                    .ok_or_else(|| anyhow!("{r} has no key"))?,
            );
        }
        let mut edges = Vec::new();
        for (i, key) in m.keys.iter().enumerate() {
            let child = db.dataset(&m.relations[i + 1])?.def();
            let fk = child
                .foreign_keys
                .iter()
                .find(|f| &f.name == key)
                .and_then(|f| f.fields.first().cloned())
                .ok_or_else(|| anyhow!("{name}: no foreign key {key}"))?;
            edges.push(fk);
        }
        let indexed = d
            .selection
            .indexes
            .iter()
            .filter(|ix| ix.view == name)
            .filter_map(|ix| m.column(&ix.attribute.relation, &ix.attribute.column))
            .map(str::to_owned)
            .collect();
        specs.push(ViewSpec {
            name,
            relations: m.relations.clone(),
            edges,
            keys,
            columns: m.columns.clone(),
            indexed,
        });
    }
    compact_all(&db)?;
    db.close()?;
    Ok((specs, t.elapsed().as_secs_f64()))
}

/// A cell in the form both servers agree on: numbers as 12 significant
/// digits, a timestamp's `T` as a space.
fn norm(cell: Option<&str>) -> String {
    match cell {
        None => "\u{0}".into(),
        Some(s) => match s.parse::<f64>() {
            Ok(x) if !s.starts_with('0') || s.len() == 1 || s.contains('.') => format!("{x:.11e}"),
            _ => s.replacen(
                'T',
                " ",
                usize::from(s.len() >= 19 && s.as_bytes()[10] == b'T'),
            ),
        },
    }
}

/// Run `sql`, its ms, and its digest when it returns rows.
fn execute(c: &mut Client, sql: &str) -> Result<(f64, Option<Digest>)> {
    let t = Instant::now();
    let msgs = c.simple_query(sql).with_context(|| sql.to_owned())?;
    let ms = t.elapsed().as_secs_f64() * 1e3;
    let (mut rows, mut hash, mut any) = (0usize, 0u64, false);
    for m in msgs {
        match m {
            SimpleQueryMessage::Row(r) => {
                let mut cells: Vec<String> = (0..r.len()).map(|i| norm(r.get(i))).collect();
                cells.sort_unstable();
                let mut h = DefaultHasher::new();
                cells.hash(&mut h);
                hash = hash.wrapping_add(h.finish());
                rows += 1;
            }
            SimpleQueryMessage::RowDescription(_) => any = true,
            _ => {}
        }
    }
    Ok((ms, any.then_some((rows, hash))))
}

/// Run every round on `c`: statement `i` as `sqls[i]` filled with the
/// round's literals, then `after[i]` (timed with it).
fn run_rounds(
    c: &mut Client,
    label: &str,
    sqls: &[String],
    after: &[Vec<String>],
    lits: &[Vec<Vec<String>>],
) -> Result<Timed> {
    let mut out = Timed {
        ms: Vec::new(),
        answers: Vec::new(),
    };
    for (r, round) in lits.iter().enumerate() {
        let t = Instant::now();
        let (mut ms, mut answers) = (Vec::new(), Vec::new());
        for (i, l) in round.iter().enumerate() {
            let (mut took, digest) = execute(c, &fill(&sqls[i], l))?;
            for extra in &after[i] {
                took += execute(c, extra)?.0;
            }
            ms.push(took);
            answers.push(digest);
        }
        eprintln!(
            "synergy tpcw: {label}: round {r}: {:.2} s ({:.1} s wall)",
            ms.iter().sum::<f64>() / 1e3,
            t.elapsed().as_secs_f64()
        );
        out.ms.push(ms);
        out.answers.push(answers);
    }
    Ok(out)
}

/// The views each read of Silt's plan reads (from `EXPLAIN`, one entry
/// per use), with the first round's literals.
fn views_used(
    c: &mut Client,
    stmts: &[Statement],
    lits: &[Vec<String>],
) -> Result<Vec<Vec<String>>> {
    const MARK: &str = "MaterializedViews: view=";
    let mut out = Vec::new();
    for (s, l) in stmts.iter().zip(lits) {
        let mut used = Vec::new();
        if s.kind == StKind::Read {
            for m in c.simple_query(&format!("EXPLAIN {}", fill(s.sql, l)))? {
                let SimpleQueryMessage::Row(r) = m else {
                    continue;
                };
                for cell in (0..r.len()).filter_map(|i| r.get(i)) {
                    for part in cell.split(MARK).skip(1) {
                        let names = part.split(' ').next().unwrap_or("");
                        used.extend(
                            names
                                .split(',')
                                .filter(|n| !n.is_empty())
                                .map(str::to_owned),
                        );
                    }
                }
            }
        }
        out.push(used);
    }
    Ok(out)
}

/// The table a write statement writes.
fn written(sql: &str) -> Option<&str> {
    let mut w = sql.split_whitespace();
    match w.next()? {
        "INSERT" | "DELETE" => w.nth(1),
        "UPDATE" => w.next(),
        _ => None,
    }
}

/// One Silt variant: serve `dir`, run the rounds; (timings, views used).
fn silt_run(
    dir: &std::path::Path,
    label: &str,
    stmts: &[Statement],
    lits: &[Vec<Vec<String>>],
) -> Result<(Timed, Vec<Vec<String>>)> {
    let (pg, http) = (free_port()?, free_port()?);
    let server = start_silt(dir, pg, http)?;
    let mut c = connect(pg, "bench", "silt")?;
    let used = views_used(&mut c, stmts, &lits[0])?;
    let sqls: Vec<String> = stmts.iter().map(|s| s.sql.to_owned()).collect();
    let none = vec![Vec::new(); stmts.len()];
    let timed = run_rounds(&mut c, label, &sqls, &none, lits)?;
    drop(c);
    drop(server);
    Ok((timed, used))
}

/// What one system measured, for the table.
struct Outcome {
    label: &'static str,
    timed: Timed,
    bytes: u64,
    prepare_s: f64,
}

/// One scale: every system's sums of response times and sizes.
pub(super) fn run(
    customers: u64,
    rounds: usize,
    ctx: &Ctx,
    out: &mut Vec<ResultRow>,
) -> Result<()> {
    let scale = tpcw::Scale::new(customers).with_carts(customers / 10);
    let stmts = tpcw::statements();
    let lits = draw(&stmts, &scale, rounds + 1, ctx.seed);
    let at = |m: &str| format!("TPC-W {m} @{customers} customers");
    let mut results: Vec<Outcome> = Vec::new();

    // Silt: one load, copied for the two view variants.
    let base = ctx.scratch.join("synergy-tpcw-silt");
    let _ = std::fs::remove_dir_all(&base);
    let load = load_silt(&base, &scale, &stmts, ctx.seed)?;
    eprintln!("synergy tpcw: silt loaded {customers} customers in {load:.1} s");
    let mut specs = Vec::new();
    let mut dirs = vec![(base.clone(), "silt-no-views", 0.0)];
    for (label, row_locks) in [("silt-synergy", false), ("silt-row-locks", true)] {
        if !ctx.wants_label(label) {
            continue;
        }
        let dir = ctx.scratch.join(format!("synergy-tpcw-{label}"));
        let _ = std::fs::remove_dir_all(&dir);
        let st = Command::new("cp").arg("-a").arg(&base).arg(&dir).status()?;
        if !st.success() {
            bail!("copying {} failed", base.display());
        }
        let (s, took) = install(&dir, &stmts, row_locks)?;
        eprintln!(
            "synergy tpcw: {label}: {} views installed in {took:.1} s",
            s.len()
        );
        specs = s;
        dirs.push((dir, label, took));
    }
    let mut used = Vec::new();
    for (dir, label, took) in &dirs {
        let bytes = dir_size(dir)?;
        let (timed, u) = silt_run(dir, label, &stmts, &lits)?;
        if *label == "silt-synergy" {
            used = u;
        }
        results.push(Outcome {
            label,
            timed,
            bytes,
            prepare_s: load + took,
        });
        let _ = std::fs::remove_dir_all(dir);
    }
    for v in &specs {
        eprintln!("synergy tpcw: view {} (indexed on {:?})", v.name, v.indexed);
    }
    for (s, u) in stmts.iter().zip(&used).filter(|(_, u)| !u.is_empty()) {
        eprintln!("synergy tpcw: {} reads {u:?}", s.name);
    }
    let rewritten = used.iter().filter(|u| !u.is_empty()).count();
    out.push(ResultRow::stat(
        "silt-synergy",
        &at("reads answered from views"),
        "statements",
        rewritten as f64,
    ));
    out.push(ResultRow::stat(
        "silt-synergy",
        &at("views"),
        "views",
        specs.len() as f64,
    ));

    // PostgreSQL: one load, templates for the two view variants.
    match PgInstall::find() {
        Ok(install) => results.extend(
            postgres(install, ctx, &scale, &stmts, &specs, &used, &lits).context("postgresql")?,
        ),
        Err(reason) => ctx.note(format!("postgresql: SKIPPED: {reason}")),
    }
    report(&results, &stmts, &at, ctx, out);
    Ok(())
}

fn postgres(
    install: PgInstall,
    ctx: &Ctx,
    scale: &tpcw::Scale,
    stmts: &[Statement],
    specs: &[ViewSpec],
    used: &[Vec<String>],
    lits: &[Vec<Vec<String>>],
) -> Result<Vec<Outcome>> {
    let defs = tpcw::schema();
    let dir = ctx.scratch.join("synergy-tpcw-pg");
    let _ = std::fs::remove_dir_all(&dir);
    let cluster = PgCluster::start_with(install, &dir, "synchronous_commit = on\n")?;
    let t = Instant::now();
    {
        let mut c = connect(cluster.port, "postgres", "postgres")?;
        c.batch_execute("CREATE DATABASE joins")?;
        let mut c = connect(cluster.port, "postgres", "joins")?;
        for s in tpcw_pg::tables(&defs) {
            c.batch_execute(&s).with_context(|| s.clone())?;
        }
        let by_name: HashMap<&str, &silt::schema::DatasetDef> =
            defs.iter().map(|d| (d.name.as_str(), d)).collect();
        let mut buf: Vec<u8> = Vec::new();
        let mut current: Option<&str> = None;
        let mut n = 0u64;
        for (table, rec) in tpcw::records(scale, ctx.seed) {
            if current != Some(table) || buf.len() >= 4 << 20 {
                if let Some(t) = current {
                    copy(&mut c, t, &buf)?;
                }
                buf.clear();
                current = Some(table);
            }
            let def = by_name
                .get(table)
                .ok_or_else(|| anyhow!("no table {table}"))?;
            tpcw_pg::copy_line(def, &rec, &mut buf);
            n += 1;
            if n.is_multiple_of(1_000_000) {
                eprintln!("synergy tpcw: postgresql: {n} records loaded");
            }
        }
        if let Some(t) = current {
            copy(&mut c, t, &buf)?;
        }
        let filters: Vec<(&str, &str)> = stmts.iter().flat_map(|s| s.filters()).collect();
        for s in tpcw_pg::indexes(&defs, &filters) {
            c.batch_execute(&s).with_context(|| s.clone())?;
        }
        c.batch_execute("VACUUM ANALYZE")?;
    }
    let load = t.elapsed().as_secs_f64();
    eprintln!("synergy tpcw: postgresql loaded in {load:.1} s");
    // Copies of the loaded database (a template must have no sessions:
    // the loader's backend may still be closing).
    let mut c = connect(cluster.port, "postgres", "postgres")?;
    for db in ["matview", "triggers"] {
        let mut tries = 0;
        loop {
            c.batch_execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
                 WHERE datname = 'joins' AND pid <> pg_backend_pid()",
            )?;
            match c.batch_execute(&format!("CREATE DATABASE {db} TEMPLATE joins")) {
                Ok(()) => break,
                Err(e) if tries < 50 => {
                    tries += 1;
                    eprintln!("synergy tpcw: postgresql: CREATE DATABASE {db}: {e}; again");
                    std::thread::sleep(std::time::Duration::from_millis(200));
                }
                Err(e) => return Err(anyhow!("CREATE DATABASE {db} TEMPLATE joins: {e}")),
            }
        }
    }
    drop(c);

    // The reads Silt answered from views, written on them.
    let by_name: HashMap<&str, &ViewSpec> = specs.iter().map(|v| (v.name.as_str(), v)).collect();
    let mut on_views = Vec::new();
    for (s, u) in stmts.iter().zip(used) {
        if u.is_empty() {
            on_views.push(s.sql.to_owned());
            continue;
        }
        let views: Vec<&ViewSpec> = u
            .iter()
            .map(|n| {
                by_name
                    .get(n.as_str())
                    .copied()
                    .ok_or_else(|| anyhow!("no view {n}"))
            })
            .collect::<Result<_>>()?;
        on_views.push(tpcw_pg::rewrite(s.sql, &views).with_context(|| s.name)?);
    }
    let plain: Vec<String> = stmts.iter().map(|s| s.sql.to_owned()).collect();
    let none = vec![Vec::new(); stmts.len()];
    // After a write, REFRESH every view over its table.
    let refresh: Vec<Vec<String>> = stmts
        .iter()
        .map(|s| {
            let t = written(s.sql);
            specs
                .iter()
                .filter(|v| t.is_some_and(|t| v.relations.iter().any(|r| r == t)))
                .map(|v| format!("REFRESH MATERIALIZED VIEW {}", v.name))
                .collect()
        })
        .collect();

    let mut results = Vec::new();
    for (label, db) in [
        ("postgresql-joins", "joins"),
        ("postgresql-matview", "matview"),
        ("postgresql-triggers", "triggers"),
    ] {
        if !ctx.wants_label(label) {
            continue;
        }
        let mut c = connect(cluster.port, "postgres", db)?;
        let t = Instant::now();
        for (i, v) in specs.iter().enumerate() {
            let ddl = match db {
                "matview" => v.matview_sql(),
                "triggers" => v.trigger_sql(i),
                _ => Vec::new(),
            };
            for s in ddl {
                c.batch_execute(&s).with_context(|| s.clone())?;
            }
        }
        c.batch_execute("VACUUM ANALYZE").context(label)?;
        let views_s = t.elapsed().as_secs_f64();
        let size: i64 = c
            .query_one("SELECT pg_database_size(current_database())", &[])?
            .try_get(0)?;
        let bytes = u64::try_from(size).unwrap_or(0);
        let (sqls, after) = match db {
            "joins" => (&plain, &none),
            "matview" => (&on_views, &refresh),
            _ => (&on_views, &none),
        };
        let timed = run_rounds(&mut c, label, sqls, after, lits).context(label)?;
        results.push(Outcome {
            label,
            timed,
            bytes,
            prepare_s: load + views_s,
        });
    }
    Ok(results)
}

fn copy(c: &mut Client, table: &str, data: &[u8]) -> Result<()> {
    use std::io::Write;
    let mut w = c.copy_in(&format!("COPY {table} FROM STDIN"))?;
    w.write_all(data)?;
    w.finish()?;
    Ok(())
}

fn mean_se(v: &[f64]) -> (f64, f64) {
    let n = v.len().max(1) as f64;
    let mean = v.iter().sum::<f64>() / n;
    let var = v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0).max(1.0);
    (mean, (var / n).sqrt())
}

fn report(
    results: &[Outcome],
    stmts: &[Statement],
    at: &dyn Fn(&str) -> String,
    ctx: &Ctx,
    out: &mut Vec<ResultRow>,
) {
    let Some(reference) = results.first() else {
        return;
    };
    let mut synergy_total = None;
    let mut totals = Vec::new();
    for o in results {
        // Measured rounds: all but the warm-up.
        let measured = &o.timed.ms[1.min(o.timed.ms.len())..];
        let sum = |f: &dyn Fn(&Statement) -> bool| -> Vec<f64> {
            measured
                .iter()
                .map(|r| {
                    r.iter()
                        .zip(stmts)
                        .filter(|(_, s)| f(s))
                        .map(|(m, _)| m)
                        .sum::<f64>()
                        / 1e3
                })
                .collect()
        };
        let (total, se) = mean_se(&sum(&|_| true));
        let (reads, _) = mean_se(&sum(&|s| s.kind == StKind::Read));
        let (writes, _) = mean_se(&sum(&|s| s.kind == StKind::Write));
        let mib = o.bytes as f64 / 1048576.0;
        eprintln!(
            "synergy tpcw: {}: total {total:.3} s (se {se:.3}), reads {reads:.3} s, writes {writes:.3} s, {mib:.1} MiB",
            o.label
        );
        for (metric, unit, value, measure) in [
            ("sum of statement times, s", "s", total, true),
            ("sum of statement times, standard error, s", "s", se, false),
            ("reads' sum, s", "s", reads, true),
            ("writes' sum, s", "s", writes, true),
            ("database size, MiB", "MiB", mib, true),
            ("load and views, s", "s", o.prepare_s, false),
        ] {
            let kind = if measure { Kind::Measure } else { Kind::Stat };
            out.push(ResultRow::new(o.label, &at(metric), unit, kind, value));
        }
        for (i, s) in stmts.iter().enumerate() {
            let per: Vec<f64> = measured.iter().map(|r| r[i]).collect();
            out.push(ResultRow::measure(
                o.label,
                &at(&format!("{} {} ms", s.paper.unwrap_or("-"), s.name)),
                "ms",
                mean_se(&per).0,
            ));
        }
        // Answers against the baseline's.
        let mut differ: Vec<&str> = Vec::new();
        for (r, round) in o.timed.answers.iter().enumerate() {
            for (i, a) in round.iter().enumerate() {
                let b = reference.timed.answers.get(r).and_then(|x| x.get(i));
                if b != Some(a) && !differ.contains(&stmts[i].name) {
                    differ.push(stmts[i].name);
                }
            }
        }
        out.push(ResultRow::stat(
            o.label,
            &at("statements answering unlike silt-no-views"),
            "statements",
            differ.len() as f64,
        ));
        if !differ.is_empty() {
            ctx.note(format!(
                "synergy tpcw: {} answers unlike silt-no-views in {differ:?}",
                o.label
            ));
        }
        if o.label == "silt-synergy" {
            synergy_total = Some(total);
        }
        totals.push((o.label, total));
    }
    if let Some(s) = synergy_total.filter(|s| *s > 0.0) {
        for (label, t) in totals.into_iter().filter(|(l, _)| *l != "silt-synergy") {
            out.push(
                ResultRow::new(
                    "silt-synergy",
                    &at(&format!("{label} / silt-synergy, sum of times")),
                    "x",
                    Kind::Ratio,
                    t / s,
                )
                .with_target(1.0),
            );
        }
    }
}
