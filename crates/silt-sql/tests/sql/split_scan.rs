//! Scans that do not read the key are split into key ranges read in
//! parallel: the answers are the same as one scan's (checked against a
//! model), in and out of a transaction, and small tables stay one scan.

use std::collections::BTreeMap;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use silt_sql::SqlSession;

use crate::common::*;

#[test]
fn split_scans_answer_as_one_scan() {
    let (_d, e) = engine();
    run(
        &e,
        "CREATE TABLE f (id BIGINT PRIMARY KEY, grp BIGINT, qty BIGINT) WITH (partitions = 2)",
    );
    let mut rng = StdRng::seed_from_u64(5);
    let mut model: BTreeMap<i64, (i64, i64)> = BTreeMap::new();
    let ds = e.database().dataset("f").expect("dataset");
    for round in 0..3 {
        let mut values = Vec::new();
        for _ in 0..20_000 {
            let id = rng.random_range(0..60_000i64);
            let (g, q) = (rng.random_range(0..7i64), rng.random_range(1..100i64));
            model.insert(id, (g, q));
            values.push(format!("({id}, {g}, {q})"));
        }
        for chunk in values.chunks(2000) {
            run(&e, &format!("UPSERT INTO f VALUES {}", chunk.join(", ")));
        }
        if round < 2 {
            ds.flush().expect("flush");
        }
    }
    let sql = "SELECT grp, count(*), sum(qty) FROM f GROUP BY grp ORDER BY grp";
    let plan = explain(&e, sql);
    assert!(plan.contains("parts=2"), "{plan}");
    let want = |m: &BTreeMap<i64, (i64, i64)>, lo: i64, hi: i64| {
        let mut g: BTreeMap<i64, (i64, i64)> = BTreeMap::new();
        for (_, (grp, q)) in m.range(lo..hi) {
            let e = g.entry(*grp).or_default();
            e.0 += 1;
            e.1 += q;
        }
        g.into_iter()
            .map(|(k, (c, s))| (k, c, s))
            .collect::<Vec<_>>()
    };
    let got = |b: &[datafusion::arrow::array::RecordBatch]| {
        let (k, s) = (ints(b, 0), ints(b, 2));
        let c: Vec<i64> = b
            .iter()
            .flat_map(|x| {
                let a = x.column(1);
                datafusion::arrow::compute::cast(a, &datafusion::arrow::datatypes::DataType::Int64)
                    .map(|a| {
                        ints(
                            &[
                                datafusion::arrow::array::RecordBatch::try_from_iter([("c", a)])
                                    .unwrap(),
                            ],
                            0,
                        )
                    })
                    .unwrap_or_default()
            })
            .collect();
        k.into_iter()
            .zip(c)
            .zip(s)
            .map(|((k, c), s)| (k, c, s))
            .collect::<Vec<_>>()
    };
    assert_eq!(got(&run(&e, sql)), want(&model, i64::MIN, i64::MAX));
    // A key range is split too, and its parts cover it exactly.
    let sql = "SELECT grp, count(*), sum(qty) FROM f WHERE id >= 1000 AND id < 50000 GROUP BY grp ORDER BY grp";
    assert_eq!(got(&run(&e, sql)), want(&model, 1000, 50_000));
    assert_eq!(count_star(&e, "SELECT count(*) FROM f"), model.len() as i64);
    // Inside a transaction: its own writes are counted once, in their part.
    let s = SqlSession::new();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let exec = |sql: &str| match rt.block_on(e.execute_in(&s, sql)) {
        Ok(b) => b,
        Err(err) => panic!("{sql}: {err}"),
    };
    exec("BEGIN");
    exec("UPSERT INTO f VALUES (-5, 0, 1), (59999, 0, 1), (30000, 0, 1)");
    exec("DELETE FROM f WHERE id = 10");
    let mut m2 = model.clone();
    for id in [-5, 59999, 30000] {
        m2.insert(id, (0, 1));
    }
    m2.remove(&10);
    let sql = "SELECT grp, count(*), sum(qty) FROM f GROUP BY grp ORDER BY grp";
    assert_eq!(got(&exec(sql)), want(&m2, i64::MIN, i64::MAX));
    exec("ROLLBACK");
    // Reading the key keeps one ordered scan.
    let plan = explain(&e, "SELECT id, qty FROM f WHERE qty > 50");
    assert!(!plan.contains("parts="), "{plan}");
}

#[test]
fn small_tables_are_not_split() {
    let (_d, e) = engine();
    run(&e, "CREATE TABLE s (id BIGINT PRIMARY KEY, v BIGINT)");
    run(&e, "INSERT INTO s VALUES (1, 1), (2, 2), (3, 3)");
    e.database()
        .dataset("s")
        .expect("dataset")
        .flush()
        .expect("flush");
    let plan = explain(&e, "SELECT sum(v) FROM s");
    assert!(!plan.contains("parts="), "{plan}");
}

/// Scans of the primary trees so far (a count from metadata reads none).
fn primary_scans(e: &silt_sql::SqlEngine, name: &str) -> u64 {
    let ds = e.database().dataset(name).expect("dataset");
    let parts = ds.def().partitions as usize;
    ds.stats().indexes[..parts].iter().map(|t| t.scans).sum()
}

/// `COUNT(*)` answers from component metadata when the components decide
/// it, and by scanning otherwise, and both answers are the model's: keys
/// loaded in order, then a write inside an older range, a full merge, a
/// transaction's own rows, and a split scan whose parts must agree.
#[test]
fn count_star_from_metadata_or_by_scanning_is_the_models() {
    let (_d, e) = engine();
    run(
        &e,
        "CREATE TABLE f (id BIGINT PRIMARY KEY, qty BIGINT) WITH (partitions = 2)",
    );
    let ds = e.database().dataset("f").expect("dataset");
    // Records, not column images, for the scan path below.
    e.set_column_cache_bytes(0);
    let mut model = 0i64;
    let count = |sql: &str| ints(&run(&e, sql), 0)[0];
    for round in 0..3 {
        let values: Vec<String> = (0..20_000)
            .map(|i| format!("({}, {i})", round * 20_000 + i))
            .collect();
        for chunk in values.chunks(4000) {
            run(&e, &format!("INSERT INTO f VALUES {}", chunk.join(", ")));
        }
        model += 20_000;
        ds.flush().expect("flush");
    }
    // Keys loaded in order: in each partition every flush holds a range
    // after the last one's.
    let plan = explain(&e, "SELECT count(*) FROM f");
    assert!(plan.contains("parts=2"), "{plan}");
    let before = primary_scans(&e, "f");
    assert_eq!(count("SELECT count(*) FROM f"), model);
    assert_eq!(primary_scans(&e, "f"), before, "counted from metadata");
    // The scan path agrees (a column to read forces it).
    assert_eq!(count("SELECT count(qty) FROM f"), model);
    assert!(primary_scans(&e, "f") > before);
    // A key inside an older component's range: the metadata cannot say.
    run(&e, "DELETE FROM f WHERE id = 17");
    model -= 1;
    let before = primary_scans(&e, "f");
    assert_eq!(count("SELECT count(*) FROM f"), model);
    assert!(primary_scans(&e, "f") > before, "scanned");
    // Rows counted by a cross join of two empty-column scans.
    run(&e, "CREATE TABLE two (id BIGINT PRIMARY KEY)");
    run(&e, "INSERT INTO two VALUES (1), (2)");
    assert_eq!(count("SELECT count(*) FROM f, two"), 2 * model);
    assert_eq!(
        ints(
            &run(&e, "SELECT count(*) FROM (SELECT 1 FROM f LIMIT 5)"),
            0
        ),
        vec![5]
    );
    // Inside a transaction its own uncommitted rows count (the scan path).
    let s = SqlSession::new();
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let sess = |sql: &str| rt.block_on(e.execute_in(&s, sql)).expect(sql);
    // A full merge leaves one component a partition: metadata again.
    ds.compact().expect("compact");
    let before = primary_scans(&e, "f");
    assert_eq!(count("SELECT count(*) FROM f"), model);
    assert_eq!(primary_scans(&e, "f"), before, "counted from metadata");
    sess("BEGIN");
    sess("INSERT INTO f VALUES (1000000, 1)");
    assert_eq!(ints(&sess("SELECT count(*) FROM f"), 0), vec![model + 1]);
    // Another session counts what is committed (the block's writes wait
    // in the block until COMMIT).
    assert_eq!(count("SELECT count(*) FROM f"), model);
    sess("ROLLBACK");
    assert_eq!(count("SELECT count(*) FROM f"), model);
}

/// A table in a bucket splits into twice as many parts (its readers wait
/// on GETs), but never more than four (a share of the readahead windows a remote
/// component keeps), with the same answers.
#[test]
fn scans_of_a_table_in_a_bucket_split_further() {
    silt_objstore::install();
    let (d, e) = engine();
    let url = format!(
        "memory://split-{}",
        d.path().file_name().unwrap().to_string_lossy()
    );
    run(
        &e,
        &format!(
            "CREATE TABLE r (id BIGINT PRIMARY KEY, grp BIGINT, qty BIGINT) WITH (remote = '{url}')"
        ),
    );
    let mut model: BTreeMap<i64, i64> = BTreeMap::new();
    let values: Vec<String> = (0..40_000i64)
        .map(|id| {
            *model.entry(id % 5).or_default() += id;
            format!("({id}, {}, {id})", id % 5)
        })
        .collect();
    for chunk in values.chunks(2000) {
        run(&e, &format!("INSERT INTO r VALUES {}", chunk.join(", ")));
    }
    e.database()
        .dataset("r")
        .expect("dataset")
        .flush()
        .expect("flush");
    let sql = "SELECT grp, sum(qty) FROM r GROUP BY grp ORDER BY grp";
    let plan = explain(&e, sql);
    // Four parts with two target partitions or more (the readahead
    // windows a remote component keeps), none with one.
    let t = std::thread::available_parallelism().map_or(1, |n| n.get());
    if t >= 2 {
        assert!(plan.contains("parts=4"), "{plan}");
    }
    let got = run(&e, sql);
    let want_groups: Vec<i64> = model.keys().copied().collect();
    let want_sums: Vec<i64> = model.values().copied().collect();
    assert_eq!(ints(&got, 0), want_groups);
    assert_eq!(ints(&got, 1), want_sums);
}
