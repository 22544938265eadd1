//! Joins on an OR of primary-key equalities (TPC-W's getRelated) read the
//! other side by key (`silt_sql::lookup_join`): answers against a model,
//! with repeated, missing and null references, several rows on the
//! outer side, casts, and a transaction's own writes.

use std::collections::BTreeMap;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use silt_sql::SqlSession;

use crate::common::*;

/// Item id -> (its five related ids, which may be NULL or name no item;
/// its thumbnail).
type Items = BTreeMap<i64, ([Option<i64>; 5], String)>;

fn load(e: &silt_sql::SqlEngine, rng: &mut StdRng, n: i64) -> Items {
    run(
        e,
        "CREATE TABLE item (i_id BIGINT PRIMARY KEY, i_thumb VARCHAR, \
         r1 INT, r2 INT, r3 INT, r4 INT, r5 INT)",
    );
    let mut items = Items::new();
    let mut values = Vec::new();
    for id in 1..=n {
        let mut r = [None; 5];
        for x in &mut r {
            *x = match rng.random_range(0..10) {
                0 => None,
                1 => Some(n + rng.random_range(1..50)),
                // Repeats: the same item twice among five.
                2 => Some(id % n + 1),
                _ => Some(rng.random_range(1..=n)),
            };
        }
        let thumb = format!("t{id}");
        let show = |v: Option<i64>| v.map_or("NULL".to_owned(), |v| v.to_string());
        values.push(format!(
            "({id}, '{thumb}', {}, {}, {}, {}, {})",
            show(r[0]),
            show(r[1]),
            show(r[2]),
            show(r[3]),
            show(r[4])
        ));
        items.insert(id, (r, thumb));
    }
    for chunk in values.chunks(1000) {
        run(e, &format!("INSERT INTO item VALUES {}", chunk.join(", ")));
    }
    items
}

/// The model's rows (outer id, related id, its thumbnail) of items
/// `lo..=hi`, each related item once per outer item.
fn related(items: &Items, lo: i64, hi: i64) -> Vec<(i64, i64, String)> {
    let mut out = Vec::new();
    for (id, (r, _)) in items.range(lo..=hi) {
        let mut ids: Vec<i64> = r.iter().flatten().copied().collect();
        ids.sort();
        ids.dedup();
        for j in ids {
            if let Some((_, thumb)) = items.get(&j) {
                out.push((*id, j, thumb.clone()));
            }
        }
    }
    out.sort();
    out
}

fn answer(b: &[datafusion::arrow::array::RecordBatch]) -> Vec<(i64, i64, String)> {
    let (a, j, t) = (ints(b, 0), ints(b, 1), strings(b, 2));
    let mut out: Vec<(i64, i64, String)> = a
        .into_iter()
        .zip(j)
        .zip(t)
        .map(|((a, j), t)| (a, j, t.unwrap_or_default()))
        .collect();
    out.sort();
    out
}

const RELATED: &str = "SELECT i.i_id, j.i_id, j.i_thumb FROM item i JOIN item j \
    ON j.i_id = i.r1 OR j.i_id = i.r2 OR j.i_id = i.r3 OR j.i_id = i.r4 OR j.i_id = i.r5";

#[test]
fn or_joins_on_a_key_are_key_lookups_and_answer_as_the_model() {
    let (_d, e) = engine();
    let mut rng = StdRng::seed_from_u64(9);
    let items = load(&e, &mut rng, 3000);
    e.database()
        .dataset("item")
        .expect("item")
        .flush()
        .expect("flush");
    let plan = explain(&e, &format!("{RELATED} WHERE i.i_id = 5"));
    assert!(plan.contains("KeyLookupJoinExec"), "{plan}");
    assert!(!plan.contains("NestedLoopJoinExec"), "{plan}");
    for _ in 0..40 {
        let id = rng.random_range(1..3010);
        let got = answer(&run(&e, &format!("{RELATED} WHERE i.i_id = {id}")));
        assert_eq!(got, related(&items, id, id), "item {id}");
    }
    // Many outer rows at once, over several batches of keys.
    let got = answer(&run(&e, &format!("{RELATED} WHERE i.i_id <= 2500")));
    assert_eq!(got, related(&items, 1, 2500));
    let plan = explain(&e, &format!("ANALYZE {RELATED} WHERE i.i_id = 7"));
    assert!(plan.contains("keys_looked_up="), "{plan}");
    // A condition beyond the OR keeps the nested loop, and its answer.
    let q = "SELECT i.i_id, j.i_id, j.i_thumb FROM item i JOIN item j \
             ON (j.i_id = i.r1 OR j.i_id = i.r2) AND j.i_id > 100 WHERE i.i_id BETWEEN 1 AND 300";
    let mut want: Vec<(i64, i64, String)> = Vec::new();
    for (id, (r, _)) in items.range(1..=300) {
        let mut ids: Vec<i64> = r[..2]
            .iter()
            .flatten()
            .copied()
            .filter(|j| *j > 100)
            .collect();
        ids.sort();
        ids.dedup();
        for j in ids {
            if let Some((_, t)) = items.get(&j) {
                want.push((*id, j, t.clone()));
            }
        }
    }
    want.sort();
    assert_eq!(answer(&run(&e, q)), want);
}

/// Under a statement control (every statement of `silt serve`), a join's
/// filter is wrapped in a stop check; the OR of key equalities inside it
/// is still read as key lookups, not a nested loop over the table.
#[test]
fn or_joins_under_a_statement_control_are_key_lookups() {
    let (_d, e) = engine();
    let mut rng = StdRng::seed_from_u64(11);
    let items = load(&e, &mut rng, 2000);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let s = silt_sql::SqlSession::new();
    let run_ctl = |sql: &str| {
        rt.block_on(e.execute_with(&s, sql, Some(silt_sql::StatementControl::new())))
            .expect(sql)
    };
    let plan = run_ctl(&format!("EXPLAIN ANALYZE {RELATED} WHERE i.i_id = 7"));
    let text = datafusion::arrow::util::pretty::pretty_format_batches(&plan)
        .expect("format")
        .to_string();
    assert!(text.contains("KeyLookupJoinExec"), "{text}");
    assert!(text.contains("keys_looked_up="), "{text}");
    assert!(!text.contains("NestedLoopJoinExec"), "{text}");
    for _ in 0..20 {
        let id = rng.random_range(1..2010);
        let got = run_ctl(&format!("{RELATED} WHERE i.i_id = {id}"));
        assert_eq!(answer(&got), related(&items, id, id), "item {id}");
    }
}

#[test]
fn key_lookups_see_a_transactions_own_writes() {
    let (_d, e) = engine();
    let mut rng = StdRng::seed_from_u64(4);
    let mut items = load(&e, &mut rng, 200);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let s = SqlSession::new();
    let exec = |sql: &str| {
        rt.block_on(e.execute_in(&s, sql))
            .unwrap_or_else(|err| panic!("{sql}: {err}"))
    };
    exec("BEGIN");
    exec("INSERT INTO item VALUES (500, 'new', 1, 2, 500, NULL, 3)");
    exec("UPDATE item SET i_thumb = 'changed' WHERE i_id = 2");
    exec("DELETE FROM item WHERE i_id = 3");
    items.insert(
        500,
        ([Some(1), Some(2), Some(500), None, Some(3)], "new".into()),
    );
    if let Some(x) = items.get_mut(&2) {
        x.1 = "changed".into();
    }
    items.remove(&3);
    let got = answer(&exec(&format!("{RELATED} WHERE i.i_id = 500")));
    assert_eq!(got, related(&items, 500, 500));
    assert_eq!(got.len(), 3, "{got:?}");
    exec("ROLLBACK");
    assert!(answer(&run(&e, &format!("{RELATED} WHERE i.i_id = 500"))).is_empty());
}
