//! What the SQL test files share: an engine on a temporary database, the
//! random table `r`, and readers of result columns.
#![allow(dead_code)]

use std::collections::BTreeSet;
use std::sync::Arc;

use datafusion::arrow::array::{Array, AsArray, RecordBatch};
use datafusion::arrow::datatypes::{Float64Type, Int64Type, UInt64Type};
use rand::Rng;
use rand::rngs::StdRng;
use silt::{Database, DbOptions, Durability};
use silt_sql::SqlEngine;

pub fn engine() -> (tempfile::TempDir, SqlEngine) {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = Database::open(
        dir.path(),
        DbOptions {
            sync: false,
            durability: Durability::None,
            ..Default::default()
        },
    )
    .expect("open");
    let e = SqlEngine::new(Arc::new(db)).expect("engine");
    (dir, e)
}

/// Close `e`'s database and open it again from `path` (recovery runs).
pub fn reopen(e: SqlEngine, path: &std::path::Path) -> Database {
    let db = e.database().clone();
    drop(e);
    db.close().expect("close");
    drop(db);
    Database::open(path, DbOptions::default()).expect("reopen")
}

pub fn run(e: &SqlEngine, sql: &str) -> Vec<RecordBatch> {
    match e.execute_blocking(sql) {
        Ok(b) => b,
        Err(err) => panic!("{sql}\n  failed: {err}"),
    }
}

pub fn fail(e: &SqlEngine, sql: &str) -> String {
    match e.execute_blocking(sql) {
        Ok(_) => panic!("{sql}\n  should have failed"),
        Err(err) => err.to_string(),
    }
}

pub fn count(b: &[RecordBatch]) -> u64 {
    b.iter()
        .map(|x| {
            let c = x.column_by_name("count").expect("count column");
            c.as_primitive::<UInt64Type>().iter().flatten().sum::<u64>()
        })
        .sum()
}

pub fn ints(b: &[RecordBatch], col: usize) -> Vec<i64> {
    let mut v = Vec::new();
    for x in b {
        let a = x.column(col).as_primitive::<Int64Type>();
        for i in 0..a.len() {
            if !a.is_null(i) {
                v.push(a.value(i));
            }
        }
    }
    v
}

pub fn floats(b: &[RecordBatch], col: usize) -> Vec<f64> {
    let mut v = Vec::new();
    for x in b {
        let a = x.column(col).as_primitive::<Float64Type>();
        for i in 0..a.len() {
            v.push(a.value(i));
        }
    }
    v
}

pub fn strings(b: &[RecordBatch], col: usize) -> Vec<Option<String>> {
    let mut v = Vec::new();
    for x in b {
        let a = x.column(col).as_string::<i32>();
        for i in 0..a.len() {
            v.push((!a.is_null(i)).then(|| a.value(i).to_owned()));
        }
    }
    v
}

pub fn id_set(b: &[RecordBatch]) -> BTreeSet<i64> {
    ints(b, 0).into_iter().collect()
}

/// The text of an EXPLAIN (both plans).
pub fn explain(e: &SqlEngine, sql: &str) -> String {
    let b = run(e, &format!("EXPLAIN {sql}"));
    strings(&b, 1)
        .into_iter()
        .flatten()
        .collect::<Vec<_>>()
        .join("\n")
}

/// A row of the random table.
#[derive(Clone, Debug)]
pub struct Row {
    pub id: i64,
    pub a: i64,
    pub x: f64,
    pub y: f64,
    pub words: Vec<&'static str>,
}

pub const WORDS: [&str; 8] = [
    "red", "green", "blue", "storm", "river", "city", "night", "sun",
];

pub fn load_random(e: &SqlEngine, rng: &mut StdRng, n: i64) -> Vec<Row> {
    run(
        e,
        "CREATE TABLE r (id BIGINT PRIMARY KEY, a BIGINT, name VARCHAR, loc POINT) WITH (partitions = 2)",
    );
    run(e, "CREATE INDEX r_a ON r USING btree (a)");
    let mut rows = Vec::new();
    for id in 0..n {
        let k = rng.random_range(1..4);
        let words = (0..k)
            .map(|_| WORDS[rng.random_range(0..WORDS.len())])
            .collect();
        rows.push(Row {
            id: id * 3,
            a: rng.random_range(0..50),
            x: rng.random_range(-20.0..20.0),
            y: rng.random_range(-10.0..10.0),
            words,
        });
    }
    for chunk in rows.chunks(100) {
        let values: Vec<String> = chunk
            .iter()
            .map(|r| {
                format!(
                    "({}, {}, '{}', ST_Point({}, {}))",
                    r.id,
                    r.a,
                    r.words.join(" "),
                    r.x,
                    r.y
                )
            })
            .collect();
        run(e, &format!("INSERT INTO r VALUES {}", values.join(", ")));
    }
    // Indexes built after the load (bulk build) and maintained during it.
    run(e, "CREATE INDEX r_loc ON r USING rtree (loc)");
    run(e, "CREATE INDEX r_name ON r USING keyword (name)");
    rows
}

/// The rows of `r` a box query should return, by brute force.
pub fn in_box(rows: &[Row], (x0, y0, x1, y1): (f64, f64, f64, f64)) -> BTreeSet<i64> {
    rows.iter()
        .filter(|r| r.x >= x0 && r.x <= x1 && r.y >= y0 && r.y <= y1)
        .map(|r| r.id)
        .collect()
}

/// The single number of a `count(*)`-like query, as an i64.
pub fn count_star(e: &SqlEngine, sql: &str) -> i64 {
    let b = run(e, sql);
    let a = datafusion::arrow::compute::cast(
        b[0].column(0),
        &datafusion::arrow::datatypes::DataType::Int64,
    )
    .expect("cast");
    ints(&[RecordBatch::try_from_iter([("c", a)]).expect("batch")], 0)[0]
}
