//! Leveled R-trees with spatial output partitioning (STR, R*-Grove; seed
//! 002): random inserts, moves (some within one Hilbert key cell, so two
//! versions of a key carry different bounds) and deletes through many
//! flushes and merges; every box and kNN query, before and after a full
//! compaction, equals a brute-force scan of a model.

use proptest::prelude::*;
use silt::geo::sphere;
use silt::lsm::policy::MergePolicy;
use silt::{
    Database, DatasetDef, DbOptions, Durability, FieldType, Geometry, IndexDef, Query,
    QueryOptions, Value,
};
use std::collections::BTreeMap;

fn opts() -> DbOptions {
    DbOptions {
        durability: Durability::None,
        sync: false,
        block_cache_bytes: 1 << 20,
        ..Default::default()
    }
}

#[derive(Clone, Debug)]
enum Op {
    Put(i64, f64, f64),
    /// Move a record by a tiny amount (same Hilbert cell, same index key).
    Nudge(i64),
    Delete(i64),
    Flush,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (0i64..300, -20.0f64..20.0, -10.0f64..10.0).prop_map(|(k, x, y)| Op::Put(k, x, y)),
        2 => (0i64..300).prop_map(Op::Nudge),
        2 => (0i64..300).prop_map(Op::Delete),
        1 => Just(Op::Flush),
    ]
}

fn record(id: i64, x: f64, y: f64) -> Value {
    Value::Object(vec![
        ("id".into(), Value::Int(id)),
        ("loc".into(), Value::Geometry(Geometry::point(x, y))),
    ])
}

fn check(
    ds: &std::sync::Arc<silt::Dataset>,
    model: &BTreeMap<i64, (f64, f64)>,
    boxes: &[[f64; 4]],
) -> Result<(), TestCaseError> {
    for b in boxes {
        let q = Query::Intersects(Geometry::rect(b[0], b[1], b[2], b[3]));
        for index_only in [false, true] {
            let o = QueryOptions {
                index_only,
                limit: None,
            };
            let mut got: Vec<i64> = ds
                .query("loc", &q, o)
                .unwrap()
                .map(|h| h.unwrap().pk[0].as_i64().unwrap())
                .collect();
            got.sort_unstable();
            let want: Vec<i64> = model
                .iter()
                .filter(|(_, (x, y))| b[0] <= *x && *x <= b[2] && b[1] <= *y && *y <= b[3])
                .map(|(k, _)| *k)
                .collect();
            prop_assert_eq!(got, want, "box {:?} index_only={}", b, index_only);
        }
        // kNN around the box's corner.
        let (qx, qy) = (b[0], b[1]);
        let q = Query::Nearest {
            lon: qx,
            lat: qy,
            k: 7,
        };
        let got: Vec<f64> = ds
            .query("loc", &q, QueryOptions::default())
            .unwrap()
            .map(|h| h.unwrap().distance_m.unwrap())
            .collect();
        let mut want: Vec<f64> = model
            .values()
            .map(|(x, y)| sphere::haversine_m(qx, qy, *x, *y))
            .collect();
        want.sort_by(f64::total_cmp);
        want.truncate(7);
        prop_assert_eq!(got.len(), want.len());
        for (g, w) in got.iter().zip(&want) {
            prop_assert!((g - w).abs() < 1e-3, "kNN {:?} vs {:?}", got, want);
        }
    }
    Ok(())
}

fn run(policy: &str, ops: Vec<Op>, boxes: Vec<[f64; 4]>) -> Result<(), TestCaseError> {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path(), opts()).unwrap();
    db.create_dataset(
        DatasetDef::new("t", &["id"])
            .field("id", FieldType::Int)
            .field("loc", FieldType::Point)
            .memory_budget(1 << 20)
            .block_size(512),
    )
    .unwrap();
    db.create_index(
        "t",
        IndexDef::rtree("loc", "loc").policy(MergePolicy::parse(policy).unwrap()),
    )
    .unwrap();
    let ds = db.dataset("t").unwrap();
    let mut model: BTreeMap<i64, (f64, f64)> = BTreeMap::new();
    for op in ops {
        match op {
            Op::Put(k, x, y) => {
                ds.upsert(record(k, x, y)).unwrap();
                model.insert(k, (x, y));
            }
            Op::Nudge(k) => {
                if let Some(&(x, y)) = model.get(&k) {
                    // Far below a key cell (~8e-8 degrees).
                    let (nx, ny) = (x + 1e-11, y - 1e-11);
                    ds.upsert(record(k, nx, ny)).unwrap();
                    model.insert(k, (nx, ny));
                }
            }
            Op::Delete(k) => {
                ds.delete(&[Value::Int(k)]).unwrap();
                model.remove(&k);
            }
            Op::Flush => ds.flush().unwrap(),
        }
    }
    db.wait_idle().unwrap();
    check(&ds, &model, &boxes)?;
    ds.compact().unwrap();
    check(&ds, &model, &boxes)?;
    db.close().unwrap();
    Ok(())
}

fn boxes() -> impl Strategy<Value = Vec<[f64; 4]>> {
    proptest::collection::vec(
        (-22.0f64..22.0, -12.0f64..12.0, 0.0f64..15.0, 0.0f64..8.0)
            .prop_map(|(x, y, w, h)| [x, y, x + w, y + h]),
        1..6,
    )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn str_partitioned_rtree_matches_brute_force(
        ops in proptest::collection::vec(op(), 1..1500),
        boxes in boxes(),
    ) {
        run("leveled(2,2,2KB,4KB,str)", ops, boxes)?;
    }

    #[test]
    fn rstar_grove_partitioned_rtree_matches_brute_force(
        ops in proptest::collection::vec(op(), 1..1500),
        boxes in boxes(),
    ) {
        run("leveled(2,2,2KB,4KB,rstar_grove)", ops, boxes)?;
    }
}

/// The partitioned levels really are partitioned: after a compaction the
/// R-tree is several components of level >= 1 whose MBRs barely overlap,
/// and a small box query touches only some of them.
#[test]
fn compaction_yields_spatially_disjoint_components() {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path(), opts()).unwrap();
    db.create_dataset(
        DatasetDef::new("t", &["id"])
            .field("id", FieldType::Int)
            .field("loc", FieldType::Point)
            .memory_budget(1 << 20),
    )
    .unwrap();
    db.create_index(
        "t",
        IndexDef::rtree("loc", "loc")
            .policy(MergePolicy::parse("leveled(2,4,16KB,64KB,str)").unwrap()),
    )
    .unwrap();
    let ds = db.dataset("t").unwrap();
    let mut batch = Vec::new();
    let mut in_box = 0;
    for i in 0..20_000i64 {
        let x = (i % 200) as f64 * 0.1 - 10.0;
        let y = (i / 200) as f64 * 0.1 - 5.0;
        if (-10.0..=-9.0).contains(&x) && (-5.0..=-4.0).contains(&y) {
            in_box += 1;
        }
        batch.push(record(i, x, y));
        if batch.len() == 1000 {
            ds.write_batch(std::mem::take(&mut batch), Default::default())
                .unwrap();
        }
    }
    db.wait_idle().unwrap();
    ds.compact().unwrap();
    let stats = ds.stats();
    let loc = stats
        .indexes
        .iter()
        .find(|t| t.name.ends_with("/loc"))
        .expect("the loc tree");
    assert!(
        loc.components.len() >= 4,
        "STR should cut the compacted R-tree into several components: {:?}",
        loc.components.len()
    );
    let q = Query::Intersects(Geometry::rect(-10.0, -5.0, -9.0, -4.0));
    let mut res = ds.query("loc", &q, QueryOptions::default()).unwrap();
    assert_eq!(res.by_ref().count(), in_box);
    assert!(
        (res.stats().components as usize) < loc.components.len(),
        "a corner box should skip most partitions: {:?} of {}",
        res.stats(),
        loc.components.len()
    );
    db.close().unwrap();
}
