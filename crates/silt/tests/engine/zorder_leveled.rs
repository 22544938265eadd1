//! Z-ordered R-trees (`order = zorder`, seed 001 §5.3.2) under the leveled
//! policy with the default size partitioning: levels hold disjoint Z (key)
//! ranges and spatial searches skip components whose Z range meets none of
//! the query's Z ranges.
//!
//! * A property test: random inserts, moves (some within one Z cell, so two
//!   versions of a key carry different bounds; with a small custom space,
//!   points outside it are clamped to the edge cells and can move far while
//!   keeping their key), deletes, flushes and reopens; every box, circle
//!   and kNN query, before and after a full compaction, equals a brute-force
//!   scan of a model.
//!   Also with the round-robin pick (`leveled(...,size,round_robin)`).
//! * Pruning: after many leveled merges a small box touches fewer
//!   components than exist and the Z test skips some of them.

use proptest::prelude::*;
use silt::geo::sphere;
use silt::index::RtreeOrder;
use silt::lsm::policy::MergePolicy;
use silt::{
    Database, DatasetDef, DbOptions, Durability, FieldType, Geometry, IndexDef, Query,
    QueryOptions, Value,
};
use std::collections::BTreeMap;
use std::sync::Arc;

fn opts() -> DbOptions {
    DbOptions {
        durability: Durability::None,
        sync: false,
        block_cache_bytes: 1 << 20,
        ..Default::default()
    }
}

/// The custom space of the clamping runs: data spans [-20, 20] x [-10, 10].
const SMALL_SPACE: [f64; 4] = [-10.0, -5.0, 10.0, 5.0];

#[derive(Clone, Debug)]
enum Op {
    Put(i64, f64, f64),
    /// Move a record by a tiny amount (same Z cell, same index key).
    Nudge(i64),
    /// Move a record that lies outside the space farther out (its clamped
    /// cell, hence its key, stays the same) by `d` degrees.
    Slide(i64, f64),
    Delete(i64),
    Flush,
    Reopen,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (0i64..300, -20.0f64..20.0, -10.0f64..10.0).prop_map(|(k, x, y)| Op::Put(k, x, y)),
        2 => (0i64..300).prop_map(Op::Nudge),
        4 => (0i64..300, 0.01f64..3.0).prop_map(|(k, d)| Op::Slide(k, d)),
        2 => (0i64..300).prop_map(Op::Delete),
        1 => Just(Op::Flush),
        1 => prop_oneof![19 => Just(Op::Flush), 1 => Just(Op::Reopen)],
    ]
}

fn record(id: i64, x: f64, y: f64) -> Value {
    Value::Object(vec![
        ("id".into(), Value::Int(id)),
        ("loc".into(), Value::Geometry(Geometry::point(x, y))),
    ])
}

#[derive(Clone, Debug)]
enum Check {
    Box([f64; 4]),
    Circle(f64, f64, f64),
}

fn checks() -> impl Strategy<Value = Vec<Check>> {
    proptest::collection::vec(
        prop_oneof![
            (-24.0f64..24.0, -12.0f64..12.0, 0.0f64..15.0, 0.0f64..8.0)
                .prop_map(|(x, y, w, h)| Check::Box([x, y, x + w, y + h])),
            // Small boxes (a few Z ranges each).
            (-21.0f64..21.0, -11.0f64..11.0, 0.0f64..0.5, 0.0f64..0.5)
                .prop_map(|(x, y, w, h)| Check::Box([x, y, x + w, y + h])),
            (-22.0f64..22.0, -11.0f64..11.0, 1_000.0f64..800_000.0)
                .prop_map(|(x, y, r)| Check::Circle(x, y, r)),
        ],
        1..6,
    )
}

fn ids(ds: &Arc<silt::Dataset>, q: &Query, index_only: bool) -> Vec<i64> {
    let o = QueryOptions {
        index_only,
        limit: None,
    };
    let mut got: Vec<i64> = ds
        .query("loc", q, o)
        .unwrap()
        .map(|h| h.unwrap().pk[0].as_i64().unwrap())
        .collect();
    got.sort_unstable();
    got
}

fn check(
    ds: &Arc<silt::Dataset>,
    model: &BTreeMap<i64, (f64, f64)>,
    checks: &[Check],
) -> Result<(), TestCaseError> {
    for c in checks {
        for index_only in [false, true] {
            match c {
                Check::Box(b) => {
                    let q = Query::Intersects(Geometry::rect(b[0], b[1], b[2], b[3]));
                    let want: Vec<i64> = model
                        .iter()
                        .filter(|(_, (x, y))| b[0] <= *x && *x <= b[2] && b[1] <= *y && *y <= b[3])
                        .map(|(k, _)| *k)
                        .collect();
                    prop_assert_eq!(
                        ids(ds, &q, index_only),
                        want,
                        "box {:?} index_only={}",
                        b,
                        index_only
                    );
                }
                Check::Circle(qx, qy, r) => {
                    let q = Query::WithinDistance {
                        lon: *qx,
                        lat: *qy,
                        metres: *r,
                    };
                    let got = ids(ds, &q, index_only);
                    for (k, (x, y)) in model {
                        let d = sphere::haversine_m(*qx, *qy, *x, *y);
                        // Knife-edge distances are left out of the comparison.
                        if (d - r).abs() < 1e-3 {
                            continue;
                        }
                        prop_assert_eq!(
                            got.contains(k),
                            d <= *r,
                            "circle ({}, {}) r {} id {} d {} index_only={}",
                            qx,
                            qy,
                            r,
                            k,
                            d,
                            index_only
                        );
                    }
                    prop_assert!(got.iter().all(|k| model.contains_key(k)));
                }
            }
        }
    }
    // kNN keeps using MBR bounds; it must agree too.
    let (qx, qy) = (1.5, -2.5);
    let got: Vec<f64> = ds
        .query(
            "loc",
            &Query::Nearest {
                lon: qx,
                lat: qy,
                k: 7,
            },
            QueryOptions::default(),
        )
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
    Ok(())
}

fn index_def(policy: &str, space: Option<[f64; 4]>) -> IndexDef {
    let mut d = IndexDef::rtree("loc", "loc").policy(MergePolicy::parse(policy).unwrap());
    d.options.order = Some(RtreeOrder::Zorder);
    d.options.space = space;
    d
}

fn open_db(dir: &std::path::Path) -> (Database, Arc<silt::Dataset>) {
    let db = Database::open(dir, opts()).unwrap();
    let ds = db.dataset("t").unwrap();
    (db, ds)
}

/// Where a slide moves `(x, y)`: farther out on every axis on which it lies
/// outside `space` (same clamped cell), or `None` when it is inside.
fn slide(space: &[f64; 4], x: f64, y: f64, d: f64) -> Option<(f64, f64)> {
    let out = |v: f64, lo: f64, hi: f64| {
        if v > hi {
            Some(v + d)
        } else if v < lo {
            Some(v - d)
        } else {
            None
        }
    };
    match (out(x, space[0], space[2]), out(y, space[1], space[3])) {
        (Some(nx), Some(ny)) => Some((nx, ny)),
        (Some(nx), None) => Some((nx, y)),
        (None, Some(ny)) => Some((x, ny)),
        (None, None) => None,
    }
}

fn run(
    policy: &str,
    space: Option<[f64; 4]>,
    ops: Vec<Op>,
    checks: Vec<Check>,
) -> Result<(), TestCaseError> {
    let dir = tempfile::tempdir().unwrap();
    let mut db = Database::open(dir.path(), opts()).unwrap();
    db.create_dataset(
        DatasetDef::new("t", &["id"])
            .field("id", FieldType::Int)
            .field("loc", FieldType::Point)
            .memory_budget(1 << 20)
            .block_size(512),
    )
    .unwrap();
    db.create_index("t", index_def(policy, space)).unwrap();
    let mut ds = db.dataset("t").unwrap();
    let mut model: BTreeMap<i64, (f64, f64)> = BTreeMap::new();
    for op in ops {
        match op {
            Op::Put(k, x, y) => {
                ds.upsert(record(k, x, y)).unwrap();
                model.insert(k, (x, y));
            }
            Op::Nudge(k) => {
                if let Some(&(x, y)) = model.get(&k) {
                    // Far below a key cell (~8e-8 degrees in the world,
                    // ~5e-9 in the small space).
                    let (nx, ny) = (x + 1e-11, y - 1e-11);
                    ds.upsert(record(k, nx, ny)).unwrap();
                    model.insert(k, (nx, ny));
                }
            }
            Op::Slide(k, d) => {
                if let (Some(s), Some(&(x, y))) = (space, model.get(&k))
                    && let Some((nx, ny)) = slide(&s, x, y, d)
                {
                    ds.upsert(record(k, nx, ny)).unwrap();
                    model.insert(k, (nx, ny));
                }
            }
            Op::Delete(k) => {
                ds.delete(&[Value::Int(k)]).unwrap();
                model.remove(&k);
            }
            Op::Flush => ds.flush().unwrap(),
            Op::Reopen => {
                drop(ds);
                db.close().unwrap();
                drop(db);
                (db, ds) = open_db(dir.path());
            }
        }
    }
    db.wait_idle().unwrap();
    check(&ds, &model, &checks)?;
    ds.compact().unwrap();
    check(&ds, &model, &checks)?;
    drop(ds);
    db.close().unwrap();
    drop(db);
    let (db, ds) = open_db(dir.path());
    check(&ds, &model, &checks)?;
    drop(ds);
    db.close().unwrap();
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn zorder_leveled_rtree_matches_brute_force(
        ops in proptest::collection::vec(op(), 1..1500),
        checks in checks(),
    ) {
        run("leveled(2,2,2KB,4KB)", None, ops, checks)?;
    }

    /// A space smaller than the data: points outside it are clamped to the
    /// edge cells (and slide there without changing their key).
    #[test]
    fn zorder_leveled_rtree_with_clamped_points_matches_brute_force(
        ops in proptest::collection::vec(op(), 1..1500),
        checks in checks(),
    ) {
        run("leveled(2,2,2KB,4KB)", Some(SMALL_SPACE), ops, checks)?;
    }

    /// The round-robin pick (seed 001 §5.3.1) instead of the least overlap.
    #[test]
    fn zorder_round_robin_leveled_rtree_matches_brute_force(
        ops in proptest::collection::vec(op(), 1..1500),
        checks in checks(),
    ) {
        run("leveled(2,2,2KB,4KB,size,round_robin)", Some(SMALL_SPACE), ops, checks)?;
    }
}

/// A deterministic shuffle of `0..n` (xorshift).
fn shuffled(n: i64) -> Vec<i64> {
    let mut v: Vec<i64> = (0..n).collect();
    let mut s = 0x9E37_79B9_7F4A_7C15u64;
    for i in (1..v.len()).rev() {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        let j = (s % (i as u64 + 1)) as usize;
        v.swap(i, j);
    }
    v
}

/// Leveled merges of a Z-ordered R-tree leave several components of levels
/// 1 and deeper with disjoint Z ranges; a small box touches fewer components
/// than exist, and the Z-range test is what skips some of them (it must
/// fail with the Z pruning disabled).
#[test]
fn small_queries_skip_components_by_z_range() {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path(), opts()).unwrap();
    db.create_dataset(
        DatasetDef::new("t", &["id"])
            .field("id", FieldType::Int)
            .field("loc", FieldType::Point)
            .partitions(1)
            .memory_budget(1 << 20),
    )
    .unwrap();
    db.create_index("t", index_def("leveled(2,4,16KB,64KB)", None))
        .unwrap();
    let ds = db.dataset("t").unwrap();
    // A 200 x 100 grid of points 0.1 degrees apart, written in random order
    // so that every flush spans the whole area (level 0 cannot be pruned
    // by MBR or Z range; deeper levels are cut by Z range).
    let pos = |i: i64| ((i % 200) as f64 * 0.1 - 10.0, (i / 200) as f64 * 0.1 - 5.0);
    let mut batch = Vec::new();
    for i in shuffled(20_000) {
        let (x, y) = pos(i);
        batch.push(record(i, x, y));
        if batch.len() == 500 {
            ds.write_batch(std::mem::take(&mut batch), Default::default())
                .unwrap();
        }
    }
    ds.write_batch(batch, Default::default()).unwrap();
    ds.flush().unwrap();
    db.wait_idle().unwrap();
    let boxes = [
        [-10.0, -5.0, -9.0, -4.0],
        [2.03, 1.07, 2.51, 1.33],
        [9.0, 4.0, 10.0, 5.0],
    ];
    for round in 0..2 {
        let stats = ds.stats();
        let loc = stats
            .indexes
            .iter()
            .find(|t| t.name.ends_with("/loc"))
            .expect("the loc tree");
        let deep: Vec<_> = loc.components.iter().filter(|c| c.level >= 1).collect();
        assert!(
            deep.len() >= 4,
            "round {round}: leveled merges should leave several level >= 1 components: {:?}",
            loc.components
        );
        let mut pruned = 0;
        for b in boxes {
            let want = (0..20_000)
                .filter(|&i| {
                    let (x, y) = pos(i);
                    b[0] <= x && x <= b[2] && b[1] <= y && y <= b[3]
                })
                .count();
            let q = Query::Intersects(Geometry::rect(b[0], b[1], b[2], b[3]));
            let mut res = ds.query("loc", &q, QueryOptions::default()).unwrap();
            assert_eq!(res.by_ref().count(), want, "box {b:?}");
            let s = res.stats();
            assert!(
                (s.components as usize) < loc.components.len(),
                "round {round}: a small box should skip components: {s:?} of {}",
                loc.components.len()
            );
            pruned += s.z_pruned;
        }
        assert!(
            pruned >= boxes.len() as u64,
            "round {round}: the Z ranges should skip components: {pruned}"
        );
        ds.compact().unwrap();
    }
    db.close().unwrap();
}

/// The order is refused outside R-trees and parsed in every spelling; a
/// Hilbert R-tree never counts Z pruning.
#[test]
fn zorder_option_parses_and_hilbert_does_not_prune_by_z() {
    assert_eq!(RtreeOrder::parse("zorder").unwrap(), RtreeOrder::Zorder);
    assert_eq!(RtreeOrder::parse("Z-Order").unwrap(), RtreeOrder::Zorder);
    assert_eq!(RtreeOrder::parse("morton").unwrap(), RtreeOrder::Zorder);
    let e = RtreeOrder::parse("peano").unwrap_err().to_string();
    assert!(e.contains("zorder"), "{e}");
    let mut bad = IndexDef::btree("b", &["id"]);
    bad.options.order = Some(RtreeOrder::Zorder);
    assert!(bad.validate().is_err());

    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path(), opts()).unwrap();
    db.create_dataset(
        DatasetDef::new("t", &["id"])
            .field("id", FieldType::Int)
            .field("loc", FieldType::Point)
            .partitions(1),
    )
    .unwrap();
    db.create_index(
        "t",
        IndexDef::rtree("loc", "loc").policy(MergePolicy::parse("leveled(2,4,16KB,64KB)").unwrap()),
    )
    .unwrap();
    let ds = db.dataset("t").unwrap();
    for i in 0..3000i64 {
        ds.upsert(record(i, (i % 60) as f64 * 0.1, (i / 60) as f64 * 0.1))
            .unwrap();
        if i % 500 == 499 {
            ds.flush().unwrap();
        }
    }
    db.wait_idle().unwrap();
    ds.compact().unwrap();
    let q = Query::Intersects(Geometry::rect(0.0, 0.0, 0.2, 0.2));
    let mut res = ds.query("loc", &q, QueryOptions::default()).unwrap();
    assert_eq!(res.by_ref().count(), 9);
    assert_eq!(res.stats().z_pruned, 0);
    // The zorder definition round-trips through the catalog.
    let mut z = index_def("leveled(2,4,16KB,64KB)", None);
    z.name = "locz".into();
    db.create_index("t", z).unwrap();
    drop(ds);
    db.close().unwrap();
    drop(db);
    let (db, ds) = open_db(dir.path());
    let def = ds
        .index_defs()
        .into_iter()
        .find(|d| d.name == "locz")
        .expect("locz");
    assert_eq!(def.rtree_order(), RtreeOrder::Zorder);
    let mut res = ds.query("locz", &q, QueryOptions::default()).unwrap();
    assert_eq!(res.by_ref().count(), 9);
    db.close().unwrap();
}

/// A record moved within its key cell keeps its index key; an index-only
/// query must not return it at its old position (found only there, since
/// the new version does not match). Both curve orders, the new version in
/// memory and then on disk. The move is far: the point lies outside the
/// small space, where every position beyond the edge clamps to one cell.
#[test]
fn in_cell_move_is_not_returned_at_the_old_position() {
    for order in [RtreeOrder::Zorder, RtreeOrder::Hilbert] {
        let dir = tempfile::tempdir().unwrap();
        let db = Database::open(dir.path(), opts()).unwrap();
        db.create_dataset(
            DatasetDef::new("t", &["id"])
                .field("id", FieldType::Int)
                .field("loc", FieldType::Point)
                .partitions(1),
        )
        .unwrap();
        let mut d = index_def("leveled(2,2,2KB,4KB)", Some(SMALL_SPACE));
        d.options.order = Some(order);
        db.create_index("t", d).unwrap();
        let ds = db.dataset("t").unwrap();
        ds.upsert(record(1, 15.0, 0.0)).unwrap();
        ds.upsert(record(2, 15.5, 0.5)).unwrap();
        ds.flush().unwrap();
        ds.upsert(record(1, 17.0, 0.0)).unwrap();
        let old = Query::Intersects(Geometry::rect(14.0, -1.0, 16.0, 1.0));
        let new = Query::Intersects(Geometry::rect(16.5, -1.0, 17.5, 1.0));
        for round in ["memory", "disk"] {
            for index_only in [false, true] {
                assert_eq!(
                    ids(&ds, &old, index_only),
                    vec![2],
                    "{order:?} {round} index_only={index_only}"
                );
                assert_eq!(
                    ids(&ds, &new, index_only),
                    vec![1],
                    "{order:?} {round} index_only={index_only}"
                );
            }
            ds.flush().unwrap();
        }
        db.close().unwrap();
    }
}

/// Z pruning holds only for components of points: a large rectangle whose
/// centre lies far from a small query box still meets it, so the component
/// holding it is never skipped by its Z range (the components of points
/// still are).
#[test]
fn components_with_larger_geometries_are_not_skipped_by_z_range() {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path(), opts()).unwrap();
    db.create_dataset(
        DatasetDef::new("t", &["id"])
            .field("id", FieldType::Int)
            .field("loc", FieldType::Geometry)
            .partitions(1)
            .memory_budget(1 << 20),
    )
    .unwrap();
    db.create_index("t", index_def("leveled(2,4,16KB,64KB)", None))
        .unwrap();
    let ds = db.dataset("t").unwrap();
    let pos = |i: i64| ((i % 200) as f64 * 0.1 - 10.0, (i / 200) as f64 * 0.1 - 5.0);
    let mut batch = Vec::new();
    for i in shuffled(20_000) {
        let (x, y) = pos(i);
        batch.push(record(i, x, y));
        if batch.len() == 500 {
            ds.write_batch(std::mem::take(&mut batch), Default::default())
                .unwrap();
        }
    }
    ds.write_batch(batch, Default::default()).unwrap();
    // Centred on (0.02, 0.02), reaching every corner of the grid.
    ds.upsert(Value::Object(vec![
        ("id".into(), Value::Int(1_000_000)),
        (
            "loc".into(),
            Value::Geometry(Geometry::rect(-9.96, -4.96, 10.0, 5.0)),
        ),
    ]))
    .unwrap();
    ds.flush().unwrap();
    db.wait_idle().unwrap();
    ds.compact().unwrap();
    let b = [-9.5, -4.5, -9.3, -4.3];
    let q = Query::Intersects(Geometry::rect(b[0], b[1], b[2], b[3]));
    for index_only in [false, true] {
        let got = ids(&ds, &q, index_only);
        let mut want: Vec<i64> = (0..20_000)
            .filter(|&i| {
                let (x, y) = pos(i);
                b[0] <= x && x <= b[2] && b[1] <= y && y <= b[3]
            })
            .collect();
        want.push(1_000_000);
        assert_eq!(got, want, "index_only={index_only}");
    }
    let mut res = ds.query("loc", &q, QueryOptions::default()).unwrap();
    res.by_ref().count();
    assert!(res.stats().z_pruned > 0, "{:?}", res.stats());
    db.close().unwrap();
}
