//! Comparisons on columns without an index tried on stored records before
//! they are built (`silt_sql::prefilter`): random filters against a model,
//! with records in memory and on disk, updated and deleted, through the
//! plan cache, a transaction block and a primary-key read, with column
//! images off so that every scan reads records.

use std::collections::BTreeMap;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::common::*;

/// A row's (n, s); `None` is NULL.
type Row = (Option<i64>, Option<String>);
/// id -> row.
type Model = BTreeMap<i64, Row>;
/// Whether a row passes a filter.
type Keep = Box<dyn Fn(&Row) -> bool>;

fn word(rng: &mut StdRng) -> String {
    ["apple", "Apple", "banana", "cherry", "é", "", "b"][rng.random_range(0..7)].to_owned()
}

fn lit(s: &Option<String>) -> String {
    s.as_ref().map_or("NULL".to_owned(), |s| {
        format!("'{}'", s.replace('\'', "''"))
    })
}

fn ids(e: &silt_sql::SqlEngine, q: &str) -> Vec<i64> {
    let mut v = ints(&run(e, q), 0);
    v.sort_unstable();
    v
}

#[test]
fn tried_comparisons_answer_as_the_filter_does() {
    let (_d, e) = engine();
    e.set_column_cache_bytes(0);
    run(
        &e,
        "CREATE TABLE t (id BIGINT PRIMARY KEY, n BIGINT, s VARCHAR, d DOUBLE, pad VARCHAR)",
    );
    let ds = e.database().dataset("t").expect("dataset");
    let mut rng = StdRng::seed_from_u64(5);
    let mut model = Model::new();
    let mut rows = Vec::new();
    for id in 0..3000i64 {
        let n = (id % 13 != 0).then(|| rng.random_range(-20..20i64));
        let s = (id % 17 != 0).then(|| word(&mut rng));
        rows.push(format!(
            "({id}, {}, {}, {}, '{}')",
            n.map_or("NULL".to_owned(), |n| n.to_string()),
            lit(&s),
            id as f64 / 7.0,
            "x".repeat((id % 50) as usize)
        ));
        model.insert(id, (n, s));
        if id == 1500 {
            run(&e, &format!("INSERT INTO t VALUES {}", rows.join(", ")));
            rows.clear();
            ds.flush().expect("flush");
        }
    }
    run(&e, &format!("INSERT INTO t VALUES {}", rows.join(", ")));
    // Newer versions over the flushed half, and deletes.
    for id in (0..1500).step_by(7) {
        let n = rng.random_range(-20..20i64);
        run(&e, &format!("UPDATE t SET n = {n} WHERE id = {id}"));
        if let Some(m) = model.get_mut(&id) {
            m.0 = Some(n);
        }
    }
    run(&e, "DELETE FROM t WHERE id % 11 = 5");
    model.retain(|id, _| id % 11 != 5);
    for round in 0..120 {
        let k = rng.random_range(-22..22i64);
        let w = Some(word(&mut rng));
        let (cond, keep): (String, Keep) = match round % 8 {
            0 => (format!("n = {k}"), Box::new(move |r| r.0 == Some(k))),
            1 => (
                format!("n < {k}"),
                Box::new(move |r| r.0.is_some_and(|n| n < k)),
            ),
            2 => (
                format!("{k} <= n"),
                Box::new(move |r| r.0.is_some_and(|n| n >= k)),
            ),
            3 => (
                format!("n BETWEEN {k} AND {}", k + 5),
                Box::new(move |r| r.0.is_some_and(|n| (k..=k + 5).contains(&n))),
            ),
            4 => {
                let w2 = w.clone();
                (
                    format!("s = {}", lit(&w)),
                    Box::new(move |r| r.1.is_some() && r.1 == w2),
                )
            }
            5 => {
                let w2 = w.clone().unwrap_or_default();
                (
                    format!("s > {}", lit(&w)),
                    Box::new(move |r| r.1.as_deref().is_some_and(|s| s > w2.as_str())),
                )
            }
            // With a comparison no record is tried on.
            6 => (format!("n >= {k} AND (s = {} OR n = 0)", lit(&w)), {
                let w2 = w.clone();
                Box::new(move |r| {
                    r.0.is_some_and(|n| n >= k) && ((r.1.is_some() && r.1 == w2) || r.0 == Some(0))
                })
            }),
            _ => (format!("n <= {k} AND s < {}", lit(&w)), {
                let w2 = w.clone().unwrap_or_default();
                Box::new(move |r| {
                    r.0.is_some_and(|n| n <= k) && r.1.as_deref().is_some_and(|s| s < w2.as_str())
                })
            }),
        };
        let want: Vec<i64> = model
            .iter()
            .filter(|(_, r)| keep(r))
            .map(|(id, _)| *id)
            .collect();
        assert_eq!(
            ids(&e, &format!("SELECT id FROM t WHERE {cond}")),
            want,
            "{cond}"
        );
        // Every column built for the rows kept.
        let q = format!("SELECT id, pad, d FROM t WHERE {cond}");
        assert_eq!(ids(&e, &q), want, "{q}");
    }
    let plan = explain(&e, "SELECT * FROM t WHERE n = 5 AND s = 'b'");
    assert!(
        plan.contains("stored records tried on [n = 5 AND s = \"b\"]"),
        "{plan}"
    );
    // A read by the key still reads by the key, and the comparison above
    // it still decides.
    let plan = explain(&e, "SELECT s FROM t WHERE id = 8 AND n = 3");
    assert!(plan.contains("access=primary get(8)"), "{plan}");
    let (n8, _) = model[&8].clone();
    for n in [n8.unwrap_or(0), n8.unwrap_or(0) + 1] {
        let want: Vec<i64> = (n8 == Some(n)).then_some(8).into_iter().collect();
        assert_eq!(
            ids(&e, &format!("SELECT id FROM t WHERE id = 8 AND n = {n}")),
            want
        );
    }
    // A block's own writes are seen through the comparison.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let session = silt_sql::SqlSession::new();
    let exec = |sql: &str| {
        rt.block_on(e.execute_in(&session, sql))
            .unwrap_or_else(|err| panic!("{sql}: {err}"))
    };
    exec("BEGIN");
    exec("UPDATE t SET n = 1000 WHERE id = 9");
    assert_eq!(ints(&exec("SELECT id FROM t WHERE n = 1000"), 0), vec![9]);
    exec("ROLLBACK");
    assert!(ids(&e, "SELECT id FROM t WHERE n = 1000").is_empty());
}
