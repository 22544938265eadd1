//! The demo's SQL steps: the questions of the native tour asked again
//! through `silt-sql` in-process, each with its access path, its answer and
//! its time, and each checked against the native API's answer.

use super::{EIFFEL, NEAR, WORDS_INDEX};
use crate::error::{CliError, CliResult};
use crate::util::duration;
use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::util::display::{ArrayFormatter, FormatOptions};
use datafusion::arrow::util::pretty::pretty_format_batches;
use silt::{Dataset, Geometry, Query, QueryOptions, Value};
use silt_sql::SqlEngine;
use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::Arc;
use std::time::Instant;

/// Rows shown of each answer.
const SHOWN: usize = 5;

/// Places the spatial join counts tweets around: (name, longitude, latitude).
pub const LANDMARKS: [(&str, f64, f64); 6] = [
    ("Eiffel Tower", EIFFEL.0, EIFFEL.1),
    ("Louvre", 2.3376, 48.8606),
    ("Big Ben", -0.1246, 51.5007),
    ("Colosseum", 12.4922, 41.8902),
    ("Brandenburg Gate", 13.3777, 52.5163),
    ("Times Square", -73.9855, 40.7580),
];
/// The spatial join's radius, metres.
const JOIN_M: f64 = 300.0;
/// The radius query's radius, metres.
const RADIUS_M: f64 = 1000.0;
/// The box query's box: a few blocks around the Eiffel Tower.
const BOX: (f64, f64, f64, f64) = (2.28, 48.85, 2.31, 48.87);
/// The kNN query's k.
const K: usize = 5;
const WORDS: &str = "sunset beach";

/// An answer as text cells (the way a client would print it), row by row.
type Rows = Vec<Vec<String>>;

/// One question: its SQL and what the native API says it must answer.
pub struct Question {
    pub title: &'static str,
    pub sql: String,
    pub expected: Expected,
    /// The one the server step sends again over the wire.
    pub served: bool,
}

/// The native API's answer, and how a SQL answer is compared with it.
pub enum Expected {
    /// These ids in this order (column 0).
    Ids(Vec<i64>),
    /// Rows nearest first: the distances of column `col` (metres, rounded
    /// to whole metres), and the ids of column 0 if `ids` is given (for
    /// the k nearest, ties may come in either order).
    Distances {
        col: usize,
        metres: Vec<f64>,
        ids: Option<Vec<i64>>,
    },
    /// Exactly these rows, as text.
    Rows(Rows),
}

impl Expected {
    /// `Err` says how the SQL answer differs.
    pub fn check(&self, got: &Rows) -> Result<(), String> {
        match self {
            Expected::Ids(ids) => check_ids(ids, got)?,
            Expected::Distances { col, metres, ids } => {
                if let Some(ids) = ids {
                    check_ids(ids, got)?;
                }
                if got.len() != metres.len() {
                    return Err(format!(
                        "{} rows through SQL, {} through the native API",
                        got.len(),
                        metres.len()
                    ));
                }
                for (i, (row, want)) in got.iter().zip(metres).enumerate() {
                    let m = float_cell(row, *col)?;
                    if (m - want).abs() > 0.5 + 1e-6 {
                        return Err(format!(
                            "row {i}: {m} m through SQL, {want} m through the native API"
                        ));
                    }
                }
            }
            Expected::Rows(rows) => {
                if got != rows {
                    return Err(format!("SQL answered {got:?}, the native API {rows:?}"));
                }
            }
        }
        Ok(())
    }
}

/// Column 0 of `got` holds exactly `ids`, in order.
fn check_ids(ids: &[i64], got: &Rows) -> Result<(), String> {
    let got_ids: Vec<i64> = got
        .iter()
        .map(|r| int_cell(r, 0))
        .collect::<Result<_, _>>()?;
    if got_ids != ids {
        return Err(format!(
            "{} ids through SQL, {} through the native API (first SQL ids {:?}, native {:?})",
            got_ids.len(),
            ids.len(),
            &got_ids[..got_ids.len().min(5)],
            &ids[..ids.len().min(5)]
        ));
    }
    Ok(())
}

fn int_cell(row: &[String], col: usize) -> Result<i64, String> {
    let s = row.get(col).ok_or("a row is too short")?;
    s.parse()
        .map_err(|_| format!("`{s}` in column {col} is not an integer"))
}

fn float_cell(row: &[String], col: usize) -> Result<f64, String> {
    let s = row.get(col).ok_or("a row is too short")?;
    s.parse()
        .map_err(|_| format!("`{s}` in column {col} is not a number"))
}

fn failed(what: &str, e: impl std::fmt::Display) -> CliError {
    CliError::Failed(format!("demo: {what}: {e}"))
}

/// Pks of a query's hits as ids (the demo's key is one int).
fn hit_ids(ds: &Arc<Dataset>, index: &str, q: &Query) -> CliResult<Vec<i64>> {
    let mut ids = Vec::new();
    for h in ds.query(index, q, QueryOptions::default())? {
        if let Some(Value::Int(id)) = h?.pk.first() {
            ids.push(*id);
        }
    }
    Ok(ids)
}

fn within(ds: &Arc<Dataset>, lon: f64, lat: f64, metres: f64) -> CliResult<Vec<(i64, f64)>> {
    let q = Query::WithinDistance { lon, lat, metres };
    let mut hits = Vec::new();
    for h in ds.query(NEAR, &q, QueryOptions::default())? {
        let h = h?;
        if let (Some(Value::Int(id)), Some(m)) = (h.pk.first(), h.distance_m) {
            hits.push((*id, m));
        }
    }
    Ok(hits)
}

/// The questions, with the native API's answers to them.
pub fn questions(ds: &Arc<Dataset>) -> CliResult<Vec<Question>> {
    let (lon, lat) = EIFFEL;
    let point = format!("ST_Point({lon}, {lat})");
    let mut qs = Vec::new();

    let (x0, y0, x1, y1) = BOX;
    let mut ids = hit_ids(ds, NEAR, &Query::Intersects(Geometry::rect(x0, y0, x1, y1)))?;
    ids.sort_unstable();
    qs.push(Question {
        title: "a box (R-tree)",
        sql: format!(
            "SELECT id, user_id, text FROM tweets WHERE ST_Intersects(loc, ST_MakeEnvelope({x0}, {y0}, {x1}, {y1})) ORDER BY id"
        ),
        expected: Expected::Ids(ids),
        served: false,
    });

    let mut hits = within(ds, lon, lat, RADIUS_M)?;
    hits.sort_by(|a, b| a.1.total_cmp(&b.1).then(a.0.cmp(&b.0)));
    qs.push(Question {
        title: "a radius (R-tree, great-circle metres)",
        sql: format!(
            "SELECT id, round(ST_Distance(loc, {point})) AS metres FROM tweets WHERE ST_DWithin(loc, {point}, {RADIUS_M}) ORDER BY ST_Distance(loc, {point}), id"
        ),
        expected: Expected::Distances {
            col: 1,
            metres: hits.iter().map(|h| h.1).collect(),
            ids: Some(hits.iter().map(|h| h.0).collect()),
        },
        served: false,
    });

    let mut metres = Vec::new();
    for h in ds.query(
        NEAR,
        &Query::Nearest { lon, lat, k: K },
        QueryOptions::default(),
    )? {
        metres.push(h?.distance_m.unwrap_or(f64::NAN));
    }
    qs.push(Question {
        title: "the k nearest (R-tree kNN)",
        sql: format!(
            "SELECT id, round(ST_Distance(loc, {point})) AS metres, text FROM tweets ORDER BY ST_Distance(loc, {point}) LIMIT {K}"
        ),
        expected: Expected::Distances {
            col: 1,
            metres,
            ids: None,
        },
        served: true,
    });

    let text = Query::Text {
        text: WORDS.to_owned(),
        all: true,
    };
    let n = hit_ids(ds, WORDS_INDEX, &text)?.len();
    qs.push(Question {
        title: "a text search (keyword index)",
        sql: format!("SELECT count(*) AS tweets FROM tweets WHERE ft_contains(text, '{WORDS}')"),
        expected: Expected::Rows(vec![vec![n.to_string()]]),
        served: false,
    });

    let mut counts: Vec<(String, usize)> = Vec::new();
    for (name, lon, lat) in LANDMARKS {
        let n = within(ds, lon, lat, JOIN_M)?.len();
        if n > 0 {
            counts.push((name.to_owned(), n));
        }
    }
    counts.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    qs.push(Question {
        title: "a spatial join (each landmark probes the R-tree)",
        sql: format!(
            "SELECT l.name, count(*) AS tweets FROM landmarks l JOIN tweets t ON ST_DWithin(t.loc, l.loc, {JOIN_M}) GROUP BY l.name ORDER BY tweets DESC, l.name"
        ),
        expected: Expected::Rows(
            counts
                .into_iter()
                .map(|(name, n)| vec![name, n.to_string()])
                .collect(),
        ),
        served: false,
    });

    let mut per_user: BTreeMap<i64, u64> = BTreeMap::new();
    for rec in ds.scan(Bound::Unbounded, Bound::Unbounded)? {
        if let Some(Value::Int(u)) = rec?.get("user_id") {
            *per_user.entry(*u).or_default() += 1;
        }
    }
    let mut top: Vec<(i64, u64)> = per_user.into_iter().collect();
    top.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    top.truncate(3);
    qs.push(Question {
        title: "an aggregate (a full scan, grouped)",
        sql: "SELECT user_id, count(*) AS tweets FROM tweets GROUP BY user_id ORDER BY tweets DESC, user_id LIMIT 3".to_owned(),
        expected: Expected::Rows(
            top.into_iter()
                .map(|(u, n)| vec![u.to_string(), n.to_string()])
                .collect(),
        ),
        served: false,
    });
    Ok(qs)
}

/// Every cell of `batches` as text, row by row.
pub fn cells(batches: &[RecordBatch]) -> CliResult<Rows> {
    let opts = FormatOptions::default().with_null("NULL");
    let mut rows = Vec::new();
    for b in batches {
        let fmts = b
            .columns()
            .iter()
            .map(|c| ArrayFormatter::try_new(c.as_ref(), &opts))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| failed("formatting an answer", e))?;
        for i in 0..b.num_rows() {
            rows.push(fmts.iter().map(|f| f.value(i).to_string()).collect());
        }
    }
    Ok(rows)
}

/// The lines of a statement's physical plan that say how it reads Silt.
pub fn access_path(sql: &SqlEngine, query: &str) -> CliResult<Vec<String>> {
    let plan = sql
        .execute_blocking(&format!("EXPLAIN {query}"))
        .map_err(|e| failed("EXPLAIN", e))?;
    let rows = cells(&plan)?;
    let mut lines = Vec::new();
    for row in rows
        .iter()
        .filter(|r| r.first().is_some_and(|t| t == "physical_plan"))
    {
        for line in row.get(1).map_or("", String::as_str).lines() {
            let l = line.trim();
            if l.starts_with("Silt") || l.starts_with("SpatialJoin") || l.contains("access=") {
                lines.push(l.to_owned());
            }
        }
    }
    Ok(lines)
}

/// The landmarks table the join reads, made through SQL.
pub fn create_landmarks(sql: &SqlEngine) -> CliResult<Vec<String>> {
    let values: Vec<String> = LANDMARKS
        .iter()
        .map(|(name, lon, lat)| format!("('{name}', ST_Point({lon}, {lat}))"))
        .collect();
    let stmts = vec![
        "CREATE TABLE landmarks (name VARCHAR PRIMARY KEY, loc GEOMETRY)".to_owned(),
        format!("INSERT INTO landmarks VALUES {}", values.join(", ")),
    ];
    for s in &stmts {
        sql.execute_blocking(s)
            .map_err(|e| failed(&format!("`{s}`"), e))?;
    }
    Ok(stmts)
}

/// Ask every question through `sql`; print each with its access path, its
/// answer and its times; fail if an answer differs from the native API's.
pub fn ask(sql: &SqlEngine, questions: &[Question]) -> CliResult<()> {
    for q in questions {
        println!("   {}:", q.title);
        println!("     {}", q.sql);
        for line in access_path(sql, &q.sql)? {
            println!("     access: {line}");
        }
        let t = Instant::now();
        let first = sql
            .execute_blocking(&q.sql)
            .map_err(|e| failed(&format!("`{}`", q.sql), e))?;
        let planned = t.elapsed();
        let t = Instant::now();
        let again = sql
            .execute_blocking(&q.sql)
            .map_err(|e| failed(&format!("`{}`", q.sql), e))?;
        let kept = t.elapsed();
        let rows = cells(&first)?;
        if cells(&again)? != rows {
            return Err(CliError::Failed(format!(
                "demo check failed: `{}` answered differently the second time",
                q.sql
            )));
        }
        q.expected.check(&rows).map_err(|why| {
            CliError::Failed(format!(
                "demo check failed: `{}` disagrees with the native API: {why}",
                q.sql
            ))
        })?;
        println!(
            "     {} in {} (parsed and planned), {} again (its kept plan); same answer as the native API",
            crate::util::plural(rows.len() as u64, "row", "rows"),
            duration(planned),
            duration(kept),
        );
        print_rows(&first, rows.len())?;
    }
    Ok(())
}

/// The first rows of an answer as a table, indented.
fn print_rows(batches: &[RecordBatch], total: usize) -> CliResult<()> {
    let mut shown = Vec::new();
    let mut left = SHOWN;
    for b in batches {
        if left == 0 {
            break;
        }
        let n = b.num_rows().min(left);
        shown.push(b.slice(0, n));
        left -= n;
    }
    if shown.iter().all(|b| b.num_rows() == 0) {
        return Ok(());
    }
    let table = pretty_format_batches(&shown).map_err(|e| failed("formatting an answer", e))?;
    for line in table.to_string().lines() {
        println!("     {line}");
    }
    if total > SHOWN {
        println!("     ... and {} more", total - SHOWN);
    }
    Ok(())
}
