//! Fig. 4.10, the cost of row locks, as Synergy's own question: what does
//! a write transaction under views pay for its locks?
//!
//! One customer with 100 orders of 10 lines (and 100 other customers of
//! 10 x 10) under the views Customer->Orders and Customer->Orders->
//! Order_line. A transaction updates the quantity of N of that customer's
//! lines (N = 10, 100, 1000; each line read, changed, written; the views'
//! rows follow in the same commit):
//!
//! - `silt-synergy`: the tables in the customer's hierarchy, so the commit
//!   X-locks the one root key (§4.7);
//! - `silt-row-locks`: the same views, no hierarchy: the commit X-locks
//!   every record and view row it writes;
//! - `silt-no-views`: no views (the baseline's write);
//! - `postgresql` (`UPDATE ... WHERE ol_id BETWEEN`, row locks), and with
//!   the view kept by triggers (`postgresql-triggers`), and with
//!   `REFRESH MATERIALIZED VIEW` of both views after the commit
//!   (`postgresql-matview`, what keeping PostgreSQL's views fresh costs).
//!
//! Silt runs in process (the engine's transaction API), PostgreSQL over
//! loopback: a round trip (~0.1 ms) is small beside these transactions.
//! Durability: Silt's log batched (200 ms), PostgreSQL's
//! `synchronous_commit = off` (the WAL writer's 200 ms).

use std::sync::Arc;
use std::time::Instant;

use anyhow::{Context, Result, anyhow};
use silt::{Database, DbOptions, Durability, Value};
use silt_sql::SqlEngine;

use super::{SCHEMA_PG, SCHEMA_SILT, TRIGGERS_PG, VIEWS_PG, VIEWS_SILT};
use crate::results::{Kind, ResultRow};
use crate::systems::postgis::{PgCluster, PgInstall};
use crate::util::median;
use crate::workloads::Ctx;
use crate::workloads::sql_path::connect;

/// The heavy customer's first order (its 100 orders follow).
const HEAVY_ORDER: i64 = 10_000_000;
pub(super) const SIZES: [i64; 3] = [10, 100, 1000];

/// The rows as `INSERT` statements (both systems take them).
fn inserts() -> Vec<String> {
    let mut out = Vec::new();
    let mut c = vec!["(0, 'heavy', 'heavy', 0.0)".to_owned()];
    let (mut o, mut l) = (Vec::new(), Vec::new());
    for cid in 1..=100i64 {
        c.push(format!("({cid}, 'user{cid}', 'last{cid}', 1.0)"));
        for k in 0..10 {
            let oid = cid * 10 + k;
            o.push(format!("({oid}, {cid}, 1.5, 'PENDING')"));
            for j in 0..10 {
                l.push(format!("({}, {oid}, 1, 2.5)", oid * 10 + j));
            }
        }
    }
    for k in 0..100 {
        let oid = HEAVY_ORDER + k;
        o.push(format!("({oid}, 0, 1.5, 'PENDING')"));
        for j in 0..10 {
            l.push(format!("({}, {oid}, 1, 2.5)", oid * 10 + j));
        }
    }
    for (table, rows) in [("customer", c), ("orders", o), ("order_line", l)] {
        for chunk in rows.chunks(500) {
            out.push(format!("INSERT INTO {table} VALUES {}", chunk.join(", ")));
        }
    }
    out
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum SiltVariant {
    Synergy,
    RowLocks,
    NoViews,
}

impl SiltVariant {
    fn label(self) -> &'static str {
        match self {
            SiltVariant::Synergy => "silt-synergy",
            SiltVariant::RowLocks => "silt-row-locks",
            SiltVariant::NoViews => "silt-no-views",
        }
    }
}

fn sql(e: &SqlEngine, script: &str) -> Result<()> {
    for s in script.split(';').map(str::trim).filter(|s| !s.is_empty()) {
        e.execute_blocking(s).map_err(|err| anyhow!("{s}: {err}"))?;
    }
    Ok(())
}

/// The names of `dataset`'s foreign keys to `parent`.
fn fk(db: &Database, dataset: &str, parent: &str) -> Result<String> {
    db.dataset(dataset)?
        .def()
        .foreign_keys
        .iter()
        .find(|f| f.parent == parent)
        .map(|f| f.name.clone())
        .ok_or_else(|| anyhow!("{dataset} has no foreign key to {parent}"))
}

/// Per size: median ms of the transaction, and the X locks it took.
fn silt(v: SiltVariant, ctx: &Ctx, reps: usize) -> Result<Vec<(i64, f64, u64)>> {
    let dir = ctx.scratch.join(format!("synergy-locks-{}", v.label()));
    let _ = std::fs::remove_dir_all(&dir);
    let db = Arc::new(Database::open(
        &dir,
        DbOptions {
            durability: Durability::Batched { interval_ms: 200 },
            ..Default::default()
        },
    )?);
    let e = SqlEngine::new(db.clone()).map_err(|err| anyhow!("{err}"))?;
    sql(&e, SCHEMA_SILT)?;
    if v != SiltVariant::NoViews {
        sql(&e, VIEWS_SILT)?;
    }
    if v == SiltVariant::Synergy {
        let (oc, lo) = (
            fk(&db, "orders", "customer")?,
            fk(&db, "order_line", "orders")?,
        );
        db.set_hierarchy("orders", Some(vec![oc.clone()]))?;
        db.set_hierarchy("order_line", Some(vec![lo, oc]))?;
    }
    for s in inserts() {
        sql(&e, &s)?;
    }
    let lines = db.dataset("order_line")?;
    let mut out = Vec::new();
    for n in SIZES {
        let mut times = Vec::with_capacity(reps);
        let mut locks = 0;
        for rep in 0..=reps {
            let before = db.stats().locks.grants;
            let t = Instant::now();
            let mut tx = db.begin()?;
            for id in HEAVY_ORDER * 10..HEAVY_ORDER * 10 + n {
                let key = [Value::Int(id)];
                let mut rec = tx
                    .get(&lines, &key)?
                    .with_context(|| format!("line {id} is missing"))?;
                if let Value::Object(fields) = &mut rec {
                    for (k, val) in fields.iter_mut() {
                        if k == "ol_qty" {
                            *val = Value::Int(1 + (rep as i64 + id) % 9);
                        }
                    }
                }
                tx.upsert(&lines, rec)?;
            }
            tx.commit()?;
            let ms = t.elapsed().as_secs_f64() * 1e3;
            locks = db.stats().locks.grants - before;
            // The first is a warm-up.
            if rep > 0 {
                times.push(ms);
            }
        }
        eprintln!(
            "synergy locks: {}: {n} lines: {:.2} ms, {locks} X locks",
            v.label(),
            median(&times)
        );
        out.push((n, median(&times), locks));
    }
    drop(e);
    db.close()?;
    let _ = std::fs::remove_dir_all(&dir);
    Ok(out)
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum PgVariant {
    Plain,
    Triggers,
    Matview,
}

fn postgresql(v: PgVariant, install: PgInstall, ctx: &Ctx, reps: usize) -> Result<Vec<(i64, f64)>> {
    let dir = ctx.scratch.join("synergy-locks-pg");
    let _ = std::fs::remove_dir_all(&dir);
    let cluster = PgCluster::start_with(install, &dir, "")?;
    let mut c = connect(cluster.port, "postgres", "postgres")?;
    c.batch_execute(SCHEMA_PG)?;
    for s in inserts() {
        c.batch_execute(&s)?;
    }
    match v {
        PgVariant::Plain => {}
        PgVariant::Triggers => c.batch_execute(TRIGGERS_PG)?,
        PgVariant::Matview => c.batch_execute(VIEWS_PG)?,
    }
    c.batch_execute("VACUUM ANALYZE")?;
    let mut out = Vec::new();
    for n in SIZES {
        let (lo, hi) = (HEAVY_ORDER * 10, HEAVY_ORDER * 10 + n - 1);
        let mut times = Vec::with_capacity(reps);
        for rep in 0..=reps {
            let t = Instant::now();
            c.batch_execute(&format!(
                "BEGIN; UPDATE order_line SET ol_qty = 1 + (ol_id + {rep}) % 9 \
                 WHERE ol_id BETWEEN {lo} AND {hi}; COMMIT"
            ))?;
            if v == PgVariant::Matview {
                c.batch_execute(
                    "REFRESH MATERIALIZED VIEW mv_co; REFRESH MATERIALIZED VIEW mv_col",
                )?;
            }
            if rep > 0 {
                times.push(t.elapsed().as_secs_f64() * 1e3);
            }
        }
        out.push((n, median(&times)));
    }
    Ok(out)
}

pub(super) fn run(reps: usize, ctx: &Ctx, out: &mut Vec<ResultRow>) -> Result<()> {
    let metric = |n: i64| format!("update {n} lines of one customer, ms");
    let mut synergy = Vec::new();
    for v in [
        SiltVariant::Synergy,
        SiltVariant::RowLocks,
        SiltVariant::NoViews,
    ] {
        for (n, ms, locks) in silt(v, ctx, reps)? {
            out.push(ResultRow::measure(v.label(), &metric(n), "ms", ms));
            out.push(ResultRow::new(
                v.label(),
                &format!("update {n} lines: X locks"),
                "locks",
                Kind::Stat,
                locks as f64,
            ));
            if v == SiltVariant::Synergy {
                synergy.push(ms);
            } else if let Some(s) = synergy.get(SIZES.iter().position(|x| *x == n).unwrap_or(0)) {
                out.push(ResultRow::new(
                    "silt-synergy",
                    &format!("update {n} lines: {} / silt-synergy", v.label()),
                    "x",
                    Kind::Ratio,
                    ms / s,
                ));
            }
        }
    }
    if let Err(reason) = PgInstall::find() {
        ctx.note(format!("postgresql: SKIPPED: {reason}"));
        return Ok(());
    }
    for (v, label) in [
        (PgVariant::Plain, "postgresql"),
        (PgVariant::Triggers, "postgresql-triggers"),
        (PgVariant::Matview, "postgresql-matview"),
    ] {
        for (i, (n, ms)) in postgresql(v, PgInstall::find().map_err(|e| anyhow!(e))?, ctx, reps)?
            .into_iter()
            .enumerate()
        {
            eprintln!("synergy locks: {label}: {n} lines: {ms:.2} ms");
            out.push(ResultRow::measure(label, &metric(n), "ms", ms));
            if let Some(s) = synergy.get(i) {
                out.push(ResultRow::new(
                    "silt-synergy",
                    &format!("update {n} lines: {label} / silt-synergy"),
                    "x",
                    Kind::Ratio,
                    ms / s,
                ));
            }
        }
    }
    Ok(())
}
