//! Fig. 4.9: a join along foreign keys against the scan of the
//! materialized view that holds it, Customer -> Orders (Q1) and Customer ->
//! Orders -> Order_line (Q2), 10 children per parent, as the customers
//! grow tenfold.
//!
//! Silt: `silt serve`, the views made by `CREATE MATERIALIZED VIEW` before
//! the load (the load keeps them), each query sent as written: once with
//! `silt.use_materialized_views` on (the rewrite reads the view) and once
//! off (the joins run). PostgreSQL 15: the same tables, indexes on the
//! foreign keys, the queries as written (joins), and the same queries on
//! `CREATE MATERIALIZED VIEW`s made after the load (PostgreSQL does not
//! read a view for a query written on the tables: the view's query is
//! written for it). Every answer is checked against the others'.

use std::io::Write;
use std::time::Instant;

use anyhow::{Context, Result, ensure};
use postgres::Client;

use super::{SCHEMA_PG, SCHEMA_SILT, VIEWS_PG, VIEWS_SILT};
use crate::results::{Kind, ResultRow};
use crate::systems::postgis::{PgCluster, PgInstall};
use crate::util::{free_port, median};
use crate::workloads::Ctx;
use crate::workloads::sql_ordinary::{Rows, same, simple_rows};
use crate::workloads::sql_path::{connect, start_silt};

/// The three tables as COPY text: `n` customers, 10 orders each, 10 lines
/// per order. Keys: customer `c`, its orders `10c + k`, their lines
/// `10 o + j`.
pub(super) fn generate(n: u64) -> [(&'static str, Vec<u8>); 3] {
    let (mut c, mut o, mut l) = (Vec::new(), Vec::new(), Vec::new());
    for cid in 1..=n {
        writeln!(c, "{cid}\tuser{cid}\tlast{}\t{}.25", cid % 997, cid % 1000).ok();
        for k in 0..10 {
            let oid = cid * 10 + k;
            writeln!(
                o,
                "{oid}\t{cid}\t{}.5\t{}",
                oid % 500,
                ["PENDING", "SHIPPED"][(oid % 2) as usize]
            )
            .ok();
            for j in 0..10 {
                let lid = oid * 10 + j;
                writeln!(l, "{lid}\t{oid}\t{}\t{}.75", 1 + lid % 9, lid % 100).ok();
            }
        }
    }
    [("customer", c), ("orders", o), ("order_line", l)]
}

/// (name, as written on the tables, on PostgreSQL's views).
fn queries(probe: u64) -> Vec<(String, String, String)> {
    let col = "FROM customer c JOIN orders o ON o.o_c_id = c.c_id JOIN order_line l ON l.ol_o_id = o.o_id";
    vec![
        (
            "Q1".into(),
            "SELECT count(*), sum(o.o_total), max(c.c_lname) FROM customer c JOIN orders o ON o.o_c_id = c.c_id".into(),
            "SELECT count(*), sum(o_total), max(c_lname) FROM mv_co".into(),
        ),
        (
            "Q2".into(),
            format!("SELECT count(*), sum(o.o_total), max(c.c_lname), sum(l.ol_qty) {col}"),
            "SELECT count(*), sum(o_total), max(c_lname), sum(ol_qty) FROM mv_col".into(),
        ),
        (
            "Q2 one customer".into(),
            format!("SELECT l.ol_id, l.ol_qty, o.o_total {col} WHERE c.c_id = {probe} ORDER BY l.ol_id"),
            format!("SELECT ol_id, ol_qty, o_total FROM mv_col WHERE c_id = {probe} ORDER BY ol_id"),
        ),
    ]
}

/// The median of `reps` runs of `sql` (ms) after one warm-up, and its rows.
fn time(c: &mut Client, sql: &str, reps: usize) -> Result<(f64, Rows)> {
    let rows = simple_rows(c, sql).with_context(|| sql.to_owned())?;
    let mut t = Vec::with_capacity(reps);
    for _ in 0..reps {
        let s = Instant::now();
        c.simple_query(sql)?;
        t.push(s.elapsed().as_secs_f64() * 1e3);
    }
    Ok((median(&t), rows))
}

/// COPY text per statement: a few seconds of loading, well inside the
/// server's statement timeout (30 s), whatever the scale.
const COPY_BYTES: usize = 4 << 20;

fn copy_in(c: &mut Client, table: &str, data: &[u8]) -> Result<()> {
    let mut start = 0;
    while start < data.len() {
        let mut end = (start + COPY_BYTES).min(data.len());
        while end < data.len() && data[end - 1] != b'\n' {
            end += 1;
        }
        let mut w = c.copy_in(&format!("COPY {table} FROM STDIN"))?;
        for piece in data[start..end].chunks(64 << 10) {
            w.write_all(piece)?;
        }
        w.finish()?;
        start = end;
    }
    Ok(())
}

/// One scale: every system's times for `n` customers.
pub(super) fn run(n: u64, reps: usize, ctx: &Ctx, out: &mut Vec<ResultRow>) -> Result<()> {
    let data = generate(n);
    let qs = queries(n / 2 + 1);
    let at = |m: &str| format!("{m} @{n} customers");
    let dir = ctx.scratch.join(format!("synergy-micro-silt-{n}"));
    let _ = std::fs::remove_dir_all(&dir);
    // Silt.
    let mut answers: Vec<(String, Rows)> = Vec::new();
    let mut silt_views = Vec::new();
    {
        let (pg, http) = (free_port()?, free_port()?);
        let server = start_silt(&dir, pg, http)?;
        let mut c = connect(pg, "bench", "silt")?;
        c.batch_execute(SCHEMA_SILT)?;
        c.batch_execute(VIEWS_SILT)?;
        let t = Instant::now();
        for (table, text) in &data {
            copy_in(&mut c, table, text)?;
        }
        let load = t.elapsed().as_secs_f64();
        eprintln!("synergy micro {n}: silt loaded (views kept) in {load:.1} s");
        out.push(ResultRow::measure(
            "silt",
            &at("load, views kept, s"),
            "s",
            load,
        ));
        c.batch_execute(
            "COMPACT customer; COMPACT orders; COMPACT order_line; COMPACT v_co; COMPACT v_col",
        )?;
        for (name, sql, _) in &qs {
            let (views, a) = time(&mut c, sql, reps)?;
            c.batch_execute("SET silt.use_materialized_views = false")?;
            let (joins, b) = time(&mut c, sql, reps)?;
            c.batch_execute("SET silt.use_materialized_views = true")?;
            ensure!(same(&a, &b), "silt: {name} differs with and without views");
            eprintln!("synergy micro {n}: silt {name}: view {views:.2} ms, joins {joins:.2} ms");
            answers.push((name.clone(), a));
            silt_views.push((name.clone(), views));
            out.push(ResultRow::measure(
                "silt-views",
                &at(&format!("{name} ms")),
                "ms",
                views,
            ));
            out.push(ResultRow::measure(
                "silt-joins",
                &at(&format!("{name} ms")),
                "ms",
                joins,
            ));
            out.push(ResultRow::new(
                "silt-views",
                &at(&format!("{name} joins / view")),
                "x",
                Kind::Ratio,
                joins / views,
            ));
        }
        drop(c);
        drop(server);
    }
    let _ = std::fs::remove_dir_all(&dir);
    // PostgreSQL.
    let install = match PgInstall::find() {
        Ok(i) => i,
        Err(reason) => {
            ctx.note(format!("postgresql: SKIPPED: {reason}"));
            return Ok(());
        }
    };
    let pgdir = ctx.scratch.join(format!("synergy-micro-pg-{n}"));
    let _ = std::fs::remove_dir_all(&pgdir);
    let cluster = PgCluster::start_with(install, &pgdir, "")?;
    let mut c = connect(cluster.port, "postgres", "postgres")?;
    c.batch_execute(SCHEMA_PG)?;
    let t = Instant::now();
    for (table, text) in &data {
        copy_in(&mut c, table, text)?;
    }
    let load = t.elapsed().as_secs_f64();
    c.batch_execute("VACUUM ANALYZE")?;
    let t = Instant::now();
    c.batch_execute(VIEWS_PG)?;
    c.batch_execute("VACUUM ANALYZE")?;
    let views = t.elapsed().as_secs_f64();
    eprintln!("synergy micro {n}: postgresql loaded in {load:.1} s, views made in {views:.1} s");
    out.push(ResultRow::measure("postgresql", &at("load, s"), "s", load));
    out.push(ResultRow::measure(
        "postgresql-matview",
        &at("CREATE MATERIALIZED VIEW (both), s"),
        "s",
        views,
    ));
    for (i, (name, sql, on_view)) in qs.iter().enumerate() {
        let (joins, a) = time(&mut c, sql, reps)?;
        let (view, b) = time(&mut c, on_view, reps)?;
        let silt = &answers[i].1;
        ensure!(same(&a, silt), "postgresql's {name} differs from silt's");
        ensure!(
            same(&b, silt),
            "postgresql's view answer to {name} differs from silt's"
        );
        eprintln!(
            "synergy micro {n}: postgresql {name}: joins {joins:.2} ms, matview {view:.2} ms"
        );
        out.push(ResultRow::measure(
            "postgresql-joins",
            &at(&format!("{name} ms")),
            "ms",
            joins,
        ));
        out.push(ResultRow::measure(
            "postgresql-matview",
            &at(&format!("{name} ms")),
            "ms",
            view,
        ));
        let sv = silt_views[i].1;
        for (peer, v) in [("postgresql-joins", joins), ("postgresql-matview", view)] {
            out.push(ResultRow::new(
                "silt-views",
                &at(&format!("{name} {peer} / silt-views")),
                "x",
                Kind::Ratio,
                v / sv,
            ));
        }
    }
    Ok(())
}
