//! R-tree and inverted secondary indexes against a brute-force scan of a
//! model: random inserts, upserts and deletes with flushes, merges and
//! reopens; every query kind (intersect, within-distance, kNN, keyword all /
//! any, n-gram substring), index-only and validated, for both reconciliation
//! variants (antimatter and deleted-key B+-trees). The same checks run on
//! every spatial kind: the R-tree in Hilbert and Simple (x, y) order, the
//! DHVB- and DHB-trees (points), and the SHB-tree and SIF (points and
//! rectangles, on the default grid and on a small grid whose object cell
//! budget forces coarse cells and ancestor probes).

use proptest::prelude::*;
use silt::geo::sphere;
use silt::lsm::policy::MergePolicy;
use silt::{
    Database, DatasetDef, DbOptions, Durability, FieldType, Geometry, IndexDef, Query,
    QueryOptions, ReconcileOption, Value,
};
use std::collections::BTreeMap;
use std::path::Path;

fn opts() -> DbOptions {
    DbOptions {
        durability: Durability::None,
        sync: false,
        block_cache_bytes: 1 << 20,
        ..Default::default()
    }
}

const WORDS: [&str; 6] = ["alpha", "Beta", "gamma", "delta", "café", "zeta"];

#[derive(Clone, Debug, PartialEq)]
struct Rec {
    geom: Geometry,
    text: String,
}

fn record(id: i64, r: &Rec) -> Value {
    Value::Object(vec![
        ("id".into(), Value::Int(id)),
        ("loc".into(), Value::Geometry(r.geom.clone())),
        ("msg".into(), Value::String(r.text.clone())),
        ("pad".into(), Value::String("x".repeat((id % 97) as usize))),
    ])
}

/// Points and small rectangles on a coarse grid near the antimeridian and
/// the origin, so that queries hit several and ties happen.
fn coord() -> impl Strategy<Value = (f64, f64)> {
    (-20i32..=20, -20i32..=20).prop_map(|(x, y)| {
        let lon = if x < 0 {
            180.0 + f64::from(x) * 0.25
        } else {
            f64::from(x) * 0.25
        };
        (lon, f64::from(y) * 0.25)
    })
}

fn geom() -> impl Strategy<Value = Geometry> {
    let coord = coord();
    prop_oneof![
        3 => coord.prop_map(|(x, y)| Geometry::point(x, y)),
        1 => (self::coord(), 0u8..4, 0u8..4).prop_map(|((x, y), w, h)| {
            let x1 = (x + f64::from(w) * 0.25).min(180.0);
            Geometry::rect(x, y, x1, y + f64::from(h) * 0.25)
        }),
    ]
}

fn text() -> impl Strategy<Value = String> {
    proptest::collection::vec(0usize..WORDS.len(), 0..4).prop_map(|v| {
        v.into_iter()
            .map(|i| WORDS[i])
            .collect::<Vec<_>>()
            .join(" ")
    })
}

#[derive(Clone, Debug)]
enum Op {
    Upsert(i64, Rec),
    Insert(i64, Rec),
    Delete(i64),
    Flush,
    Compact,
    Reopen,
    Check(Check),
}

#[derive(Clone, Debug)]
enum Check {
    Box([f64; 4]),
    Near(f64, f64, f64),
    Knn(f64, f64, usize),
    Words(Vec<usize>, bool),
    Sub(String),
}

fn check() -> impl Strategy<Value = Check> {
    prop_oneof![
        (-181.0f64..181.0, -6.0f64..6.0, 0.0f64..8.0, 0.0f64..6.0).prop_map(|(x, y, w, h)| {
            // min_x > max_x when the box wraps past 180: antimeridian-crossing.
            let x0 = x.clamp(-180.0, 180.0);
            let mut x1 = x0 + w;
            if x1 > 180.0 {
                x1 -= 360.0;
            }
            Check::Box([x0, y, x1, y + h])
        }),
        (-180.0f64..180.0, -6.0f64..6.0, 0.0f64..400_000.0)
            .prop_map(|(x, y, r)| Check::Near(x, y, r)),
        (-180.0f64..180.0, -6.0f64..6.0, 1usize..12).prop_map(|(x, y, k)| Check::Knn(x, y, k)),
        (
            proptest::collection::vec(0usize..WORDS.len(), 1..3),
            any::<bool>()
        )
            .prop_map(|(w, all)| Check::Words(w, all)),
        prop_oneof![
            Just("ta"),
            Just("amm"),
            Just("CAF"),
            Just("a g"),
            Just("é"),
            Just("ZETA")
        ]
        .prop_map(|s| Check::Sub(s.to_string())),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    ops_with(false)
}

/// Operations whose geometries are all points (for the DHVB-tree).
fn point_op() -> impl Strategy<Value = Op> {
    ops_with(true)
}

fn ops_with(points_only: bool) -> impl Strategy<Value = Op> {
    let rec = move || {
        let g = if points_only {
            coord().prop_map(|(x, y)| Geometry::point(x, y)).boxed()
        } else {
            geom().boxed()
        };
        (g, text()).prop_map(|(geom, text)| Rec { geom, text })
    };
    prop_oneof![
        6 => (0i64..120, rec()).prop_map(|(k, r)| Op::Upsert(k, r)),
        2 => (0i64..120, rec()).prop_map(|(k, r)| Op::Insert(k, r)),
        3 => (0i64..120).prop_map(Op::Delete),
        1 => Just(Op::Flush),
        1 => Just(Op::Compact),
        1 => Just(Op::Reopen),
        4 => check().prop_map(Op::Check),
    ]
}

fn create(dir: &Path, rec: ReconcileOption, policy: &str, points_only: bool) -> Database {
    let db = Database::open(dir, opts()).unwrap();
    db.create_dataset(
        DatasetDef::new("tweets", &["id"])
            .field("id", FieldType::Int)
            .field("loc", FieldType::Geometry)
            .memory_budget(1 << 20)
            .block_size(512)
            .partitions(2)
            .policy(MergePolicy::parse(policy).unwrap())
            // The deleted-key runs store blocks uncompressed: their queries
            // read primary and index blocks in place from the mapped files.
            .compression(if rec == ReconcileOption::DeletedKeys {
                silt::storage::Compression::None
            } else {
                silt::storage::Compression::Lz4
            }),
    )
    .unwrap();
    let p = MergePolicy::parse(policy).unwrap();
    db.create_index(
        "tweets",
        IndexDef::rtree("loc", "loc")
            .reconcile(rec)
            .policy(p.clone()),
    )
    .unwrap();
    db.create_index(
        "tweets",
        IndexDef::keyword("words", "msg")
            .reconcile(rec)
            .policy(p.clone()),
    )
    .unwrap();
    if points_only {
        let mut d = IndexDef::rtree("hil", "loc").policy(p.clone());
        d.kind = silt::IndexKind::Dhvb;
        db.create_index("tweets", d).unwrap();
        let mut d = IndexDef::rtree("dhb", "loc").policy(p.clone());
        d.kind = silt::IndexKind::Dhb;
        db.create_index("tweets", d).unwrap();
    }
    let mut d = IndexDef::rtree("rsimple", "loc")
        .reconcile(rec)
        .policy(p.clone());
    d.options.order = Some(silt::index::RtreeOrder::Simple);
    db.create_index("tweets", d).unwrap();
    let mut d = IndexDef::rtree("rzorder", "loc")
        .reconcile(rec)
        .policy(p.clone());
    d.options.order = Some(silt::index::RtreeOrder::Zorder);
    db.create_index("tweets", d).unwrap();
    let mut d = IndexDef::rtree("shb", "loc").policy(p.clone());
    d.kind = silt::IndexKind::Shb;
    db.create_index("tweets", d).unwrap();
    // l,l,l over the world: 22.5 x 11.25 degree top cells, objects in at
    // most 3 cells, so rectangles sit at coarse levels.
    let mut d = IndexDef::rtree("shb_small", "loc").policy(p.clone());
    d.kind = silt::IndexKind::Shb;
    d.options.levels = Some(vec![2, 2, 2, 3]);
    d.options.max_cells = Some(3);
    db.create_index("tweets", d).unwrap();
    let mut d = IndexDef::rtree("sif", "loc")
        .reconcile(rec)
        .policy(p.clone());
    d.kind = silt::IndexKind::Sif;
    d.options.levels = Some(vec![2, 2, 2, 3]);
    d.options.max_cells = Some(3);
    db.create_index("tweets", d).unwrap();
    db.create_index(
        "tweets",
        IndexDef::ngram("grams", "msg", 3).reconcile(rec).policy(p),
    )
    .unwrap();
    db
}

fn split(b: &[f64; 4]) -> Vec<[f64; 4]> {
    if b[0] > b[2] {
        vec![[b[0], b[1], 180.0, b[3]], [-180.0, b[1], b[2], b[3]]]
    } else {
        vec![*b]
    }
}

fn mbr(g: &Geometry) -> [f64; 4] {
    let (a, b, c, d) = g.mbr();
    [a, b, c, d]
}

fn boxes_meet(a: &[f64; 4], b: &[f64; 4]) -> bool {
    a[0] <= b[2] && b[0] <= a[2] && a[1] <= b[3] && b[1] <= a[3]
}

/// Brute-force distance: points by haversine, rectangles by the exact
/// point-to-box distance.
fn dist(g: &Geometry, x: f64, y: f64) -> f64 {
    match g {
        Geometry::Point { x: px, y: py } => sphere::haversine_m(x, y, *px, *py),
        other => sphere::min_dist_rect_m(x, y, &mbr(other)),
    }
}

fn tokens(s: &str) -> Vec<String> {
    let mut v: Vec<String> = s
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect();
    v.sort();
    v.dedup();
    v
}

fn ids(hits: &[silt::QueryHit]) -> Vec<i64> {
    let mut v: Vec<i64> = hits.iter().map(|h| h.pk[0].as_i64().unwrap()).collect();
    v.sort_unstable();
    v
}

fn run_check(db: &Database, model: &BTreeMap<i64, Rec>, c: &Check) -> Result<(), TestCaseError> {
    let ds = db.dataset("tweets").unwrap();
    let defs = ds.index_defs();
    let spatial: Vec<&str> = defs
        .iter()
        .filter(|d| d.kind.is_spatial())
        .map(|d| d.name.as_str())
        .collect();
    let knn_indexes: Vec<&str> = defs
        .iter()
        .filter(|d| d.kind == silt::IndexKind::Rtree)
        .map(|d| d.name.as_str())
        .collect();
    for index_only in [false, true] {
        let o = QueryOptions {
            index_only,
            limit: None,
        };
        match c {
            Check::Box(b) => {
                for index in &spatial {
                    let q = Query::Intersects(Geometry::rect(b[0], b[1], b[2], b[3]));
                    let got: Vec<_> = ds
                        .query(index, &q, o)
                        .unwrap()
                        .map(|h| h.unwrap())
                        .collect();
                    let want: Vec<i64> = model
                        .iter()
                        .filter(|(_, r)| split(b).iter().any(|p| boxes_meet(&mbr(&r.geom), p)))
                        .map(|(k, _)| *k)
                        .collect();
                    prop_assert_eq!(
                        ids(&got),
                        want,
                        "{} box {:?} index_only {}",
                        index,
                        b,
                        index_only
                    );
                }
            }
            Check::Near(x, y, r) => {
                for index in &spatial {
                    let q = Query::WithinDistance {
                        lon: *x,
                        lat: *y,
                        metres: *r,
                    };
                    let got: Vec<_> = ds
                        .query(index, &q, o)
                        .unwrap()
                        .map(|h| h.unwrap())
                        .collect();
                    // Exclude knife-edge cases from the comparison.
                    let want: Vec<i64> = model
                        .iter()
                        .filter(|(_, rec)| dist(&rec.geom, *x, *y) <= *r)
                        .map(|(k, _)| *k)
                        .collect();
                    let got_ids = ids(&got);
                    for (k, rec) in model {
                        let d = dist(&rec.geom, *x, *y);
                        if (d - r).abs() < 1e-3 {
                            continue;
                        }
                        prop_assert_eq!(
                            got_ids.contains(k),
                            want.contains(k),
                            "near ({}, {}) r {} id {} d {} index_only {}",
                            x,
                            y,
                            r,
                            k,
                            d,
                            index_only
                        );
                    }
                }
            }
            Check::Knn(x, y, k) => {
                let q = Query::Nearest {
                    lon: *x,
                    lat: *y,
                    k: *k,
                };
                for index in &spatial {
                    if !knn_indexes.contains(index) {
                        let e = ds.query(index, &q, o).err().map(|e| e.to_string());
                        prop_assert!(
                            e.as_deref().is_some_and(|e| e.contains("rtree")),
                            "{} should refuse kNN naming the rtree: {:?}",
                            index,
                            e
                        );
                    }
                }
                for index in &knn_indexes {
                    let got: Vec<_> = ds
                        .query(index, &q, o)
                        .unwrap()
                        .map(|h| h.unwrap())
                        .collect();
                    let mut want: Vec<f64> =
                        model.values().map(|r| dist(&r.geom, *x, *y)).collect();
                    want.sort_by(f64::total_cmp);
                    want.truncate(*k);
                    prop_assert_eq!(got.len(), want.len(), "knn count");
                    for (h, w) in got.iter().zip(&want) {
                        let d = h.distance_m.unwrap();
                        prop_assert!(
                            (d - w).abs() < 1e-3,
                            "knn distance {} vs {} (index_only {})",
                            d,
                            w,
                            index_only
                        );
                        let id = h.pk[0].as_i64().unwrap();
                        let real = dist(&model[&id].geom, *x, *y);
                        prop_assert!(
                            (real - d).abs() < 1e-3,
                            "knn hit {} is at {} not {}",
                            id,
                            real,
                            d
                        );
                    }
                    let ds_: Vec<f64> = got.iter().map(|h| h.distance_m.unwrap()).collect();
                    prop_assert!(
                        ds_.windows(2).all(|w| w[0] <= w[1] + 1e-9),
                        "knn not sorted: {:?}",
                        ds_
                    );
                }
            }
            Check::Words(w, all) => {
                let words: Vec<&str> = w.iter().map(|i| WORDS[*i]).collect();
                let q = Query::Text {
                    text: words.join(" "),
                    all: *all,
                };
                let got: Vec<_> = ds
                    .query("words", &q, o)
                    .unwrap()
                    .map(|h| h.unwrap())
                    .collect();
                let qt = tokens(&words.join(" "));
                let want: Vec<i64> = model
                    .iter()
                    .filter(|(_, r)| {
                        let have = tokens(&r.text);
                        if *all {
                            qt.iter().all(|t| have.contains(t))
                        } else {
                            qt.iter().any(|t| have.contains(t))
                        }
                    })
                    .map(|(k, _)| *k)
                    .collect();
                prop_assert_eq!(ids(&got), want, "words {:?} all {}", words, all);
            }
            Check::Sub(s) => {
                let q = Query::Text {
                    text: s.clone(),
                    all: true,
                };
                let got: Vec<_> = ds
                    .query("grams", &q, o)
                    .unwrap()
                    .map(|h| h.unwrap())
                    .collect();
                let want: Vec<i64> = model
                    .iter()
                    .filter(|(_, r)| r.text.to_lowercase().contains(&s.to_lowercase()))
                    .map(|(k, _)| *k)
                    .collect();
                prop_assert_eq!(ids(&got), want, "substring {:?}", s);
            }
        }
    }
    Ok(())
}

fn run(
    ops: &[Op],
    rec: ReconcileOption,
    policy: &str,
    points_only: bool,
) -> Result<(), TestCaseError> {
    let dir = tempfile::tempdir().unwrap();
    let mut db = create(dir.path(), rec, policy, points_only);
    let mut model: BTreeMap<i64, Rec> = BTreeMap::new();
    for op in ops {
        let ds = db.dataset("tweets").unwrap();
        match op {
            Op::Upsert(k, r) => {
                ds.upsert(record(*k, r)).unwrap();
                model.insert(*k, r.clone());
            }
            Op::Insert(k, r) => {
                let res = ds.insert(record(*k, r));
                if model.contains_key(k) {
                    prop_assert!(res.is_err());
                } else {
                    res.unwrap();
                    model.insert(*k, r.clone());
                }
            }
            Op::Delete(k) => {
                prop_assert_eq!(
                    ds.delete(&[Value::Int(*k)]).unwrap(),
                    model.remove(k).is_some()
                );
            }
            Op::Flush => ds.flush().unwrap(),
            Op::Compact => ds.compact().unwrap(),
            Op::Reopen => {
                drop(ds);
                db.close().unwrap();
                drop(db);
                db = Database::open(dir.path(), opts()).unwrap();
            }
            Op::Check(c) => run_check(&db, &model, c)?,
        }
    }
    for c in [
        Check::Box([-180.0, -90.0, 180.0, 90.0]),
        Check::Knn(179.9, 0.0, 200),
        Check::Words(vec![0, 1, 2, 3, 4, 5], false),
    ] {
        run_check(&db, &model, &c)?;
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(12))]

    #[test]
    fn antimatter_indexes_match_brute_force(ops in proptest::collection::vec(op(), 1..160)) {
        run(&ops, ReconcileOption::Antimatter, "tiered(3)", false)?;
    }

    #[test]
    fn dhvb_and_rtree_on_points_match_brute_force(ops in proptest::collection::vec(point_op(), 1..160)) {
        run(&ops, ReconcileOption::Antimatter, "binomial(3)", true)?;
    }

    #[test]
    fn deleted_key_indexes_match_brute_force(ops in proptest::collection::vec(op(), 1..160)) {
        run(&ops, ReconcileOption::DeletedKeys, "prefix(8KB,3)", false)?;
    }
}

/// Bulk build over existing data, then queries; the deleted-key file of a
/// component and merges dropping it at the bottom.
#[test]
fn index_built_on_existing_data_and_dropped() {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path(), opts()).unwrap();
    db.create_dataset(
        DatasetDef::new("t", &["id"])
            .field("id", FieldType::Int)
            .field("loc", FieldType::Geometry)
            .memory_budget(1 << 20)
            .block_size(512),
    )
    .unwrap();
    let ds = db.dataset("t").unwrap();
    for i in 0..500i64 {
        let r = Rec {
            geom: Geometry::point(
                f64::from(i as i32 % 50) * 0.1,
                f64::from(i as i32 / 50) * 0.1,
            ),
            text: format!("w{} common", i % 7),
        };
        ds.insert(record(i, &r)).unwrap();
    }
    db.create_index(
        "t",
        IndexDef::rtree("loc", "loc").reconcile(ReconcileOption::DeletedKeys),
    )
    .unwrap();
    db.create_index("t", IndexDef::keyword("kw", "msg"))
        .unwrap();
    let q = Query::Intersects(Geometry::rect(0.0, 0.0, 0.45, 0.45));
    let n = ds
        .query("loc", &q, QueryOptions::default())
        .unwrap()
        .count();
    assert_eq!(n, 25);
    for i in 0..100i64 {
        ds.delete(&[Value::Int(i)]).unwrap();
    }
    ds.flush().unwrap();
    // Ids y * 50 + x for x, y in 0..5; 0..=4 and 50..=54 were deleted.
    let n = ds
        .query("loc", &q, QueryOptions::default())
        .unwrap()
        .count();
    assert_eq!(n, 15);
    let kw = Query::Text {
        text: "w3".into(),
        all: true,
    };
    assert_eq!(
        ds.query("kw", &kw, QueryOptions::default())
            .unwrap()
            .count(),
        57
    );
    ds.compact().unwrap();
    let st = ds.stats();
    let loc: Vec<_> = st
        .indexes
        .iter()
        .filter(|t| t.name.ends_with("/loc"))
        .collect();
    assert_eq!(loc[0].components.len(), 1);
    assert_eq!(
        ds.query("loc", &q, QueryOptions::default())
            .unwrap()
            .count(),
        15
    );
    let lim = QueryOptions {
        index_only: false,
        limit: Some(3),
    };
    assert_eq!(ds.query("loc", &q, lim).unwrap().count(), 3);
    // Wrong query kind for the index: a clear error.
    let err = ds
        .query("kw", &q, QueryOptions::default())
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(err.contains("keyword index"), "{err}");
    db.drop_index("t", "loc").unwrap();
    assert!(ds.query("loc", &q, QueryOptions::default()).is_err());
}

/// Polygons are indexed by their MBR and refined exactly; polygon queries;
/// the index nested-loop spatial join; limits.
#[test]
fn polygons_refinement_and_spatial_join() {
    use silt::JoinPredicate;
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path(), opts()).unwrap();
    db.create_dataset(
        DatasetDef::new("parks", &["id"])
            .field("id", FieldType::Int)
            .field("loc", FieldType::Geometry),
    )
    .unwrap();
    db.create_index("parks", IndexDef::rtree("loc", "loc"))
        .unwrap();
    let ds = db.dataset("parks").unwrap();
    // A triangle whose MBR is [0,0]-[10,10]; the point (8, 2) is inside the
    // triangle, (2, 8) is in the MBR but outside it.
    let tri = Geometry::Polygon {
        exterior: vec![(0.0, 0.0), (10.0, 0.0), (10.0, 10.0), (0.0, 0.0)],
        holes: vec![],
    };
    ds.insert(record(
        1,
        &Rec {
            geom: tri,
            text: String::new(),
        },
    ))
    .unwrap();
    ds.insert(record(
        2,
        &Rec {
            geom: Geometry::point(2.0, 8.0),
            text: String::new(),
        },
    ))
    .unwrap();
    ds.insert(record(
        3,
        &Rec {
            geom: Geometry::rect(20.0, 20.0, 21.0, 21.0),
            text: String::new(),
        },
    ))
    .unwrap();
    let o = QueryOptions::default();
    let io = QueryOptions {
        index_only: true,
        limit: None,
    };
    let hits = |q: &Query, o: QueryOptions| -> Vec<i64> {
        let mut v: Vec<i64> = ds
            .query("loc", q, o)
            .unwrap()
            .map(|h| h.unwrap().pk[0].as_i64().unwrap())
            .collect();
        v.sort_unstable();
        v
    };
    for flush in [false, true] {
        if flush {
            ds.flush().unwrap();
        }
        // A point query inside the MBR but outside the triangle.
        let q = Query::Intersects(Geometry::point(2.0, 8.0));
        assert_eq!(hits(&q, o), vec![2]);
        assert_eq!(hits(&q, io), vec![2], "index-only validates the polygon");
        let q = Query::Intersects(Geometry::point(8.0, 2.0));
        assert_eq!(hits(&q, o), vec![1]);
        assert_eq!(hits(&q, io), vec![1]);
        // A polygon query.
        let qp = Geometry::Polygon {
            exterior: vec![(1.0, 7.0), (3.0, 7.0), (3.0, 9.0), (1.0, 9.0), (1.0, 7.0)],
            holes: vec![],
        };
        assert_eq!(hits(&Query::Intersects(qp), o), vec![2]);
        // Distance from a point to the triangle: (5, 6) is 1/sqrt(2) degrees
        // off the hypotenuse (~ 78 km), and 2.0 degrees from point 2.
        let near = |m: f64| Query::WithinDistance {
            lon: 5.0,
            lat: 6.0,
            metres: m,
        };
        assert_eq!(hits(&near(50_000.0), o), Vec::<i64>::new());
        assert_eq!(hits(&near(100_000.0), o), vec![1]);
        assert_eq!(hits(&near(100_000.0), io), vec![1]);
        // kNN orders by the exact distance, not the MBR's (0 for the triangle's).
        let knn: Vec<(i64, f64)> = ds
            .query(
                "loc",
                &Query::Nearest {
                    lon: 2.0,
                    lat: 9.0,
                    k: 3,
                },
                o,
            )
            .unwrap()
            .map(|h| {
                let h = h.unwrap();
                (h.pk[0].as_i64().unwrap(), h.distance_m.unwrap())
            })
            .collect();
        assert_eq!(knn.iter().map(|x| x.0).collect::<Vec<_>>(), vec![2, 1, 3]);
        assert!(knn[0].1 > 100_000.0 && knn[1].1 > knn[0].1);
    }
    // Spatial join: probe points against the index.
    let probes = vec![
        (Value::String("a".into()), Geometry::point(8.0, 2.0)),
        (Value::String("b".into()), Geometry::point(2.0, 8.0)),
        (Value::String("c".into()), Geometry::point(50.0, 50.0)),
        (
            Value::String("d".into()),
            Geometry::rect(0.0, 0.0, 30.0, 30.0),
        ),
    ];
    let mut pairs: Vec<(String, i64)> = ds
        .spatial_join("loc", probes.clone(), JoinPredicate::Intersects, o)
        .unwrap()
        .map(|r| {
            let (id, h) = r.unwrap();
            (id.as_str().unwrap().to_owned(), h.pk[0].as_i64().unwrap())
        })
        .collect();
    pairs.sort();
    let want: Vec<(String, i64)> = [("a", 1), ("b", 2), ("d", 1), ("d", 2), ("d", 3)]
        .iter()
        .map(|(a, b)| ((*a).to_owned(), *b))
        .collect();
    assert_eq!(pairs, want);
    let within: Vec<(String, i64)> = ds
        .spatial_join(
            "loc",
            probes[..3].to_vec(),
            JoinPredicate::WithinDistance(300_000.0),
            QueryOptions {
                index_only: false,
                limit: Some(2),
            },
        )
        .unwrap()
        .map(|r| {
            let (id, h) = r.unwrap();
            (id.as_str().unwrap().to_owned(), h.pk[0].as_i64().unwrap())
        })
        .collect();
    assert_eq!(within.len(), 2, "the limit applies to the whole join");
    // A within-distance join needs point probes.
    let bad = ds
        .spatial_join(
            "loc",
            probes[3..].to_vec(),
            JoinPredicate::WithinDistance(1.0),
            o,
        )
        .unwrap()
        .next()
        .unwrap();
    assert!(bad.is_err());
    // Invalid query input is refused with a clear error.
    let e = ds
        .query(
            "loc",
            &Query::Nearest {
                lon: 0.0,
                lat: 95.0,
                k: 3,
            },
            o,
        )
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("latitude"), "{e}");
}

/// Geometry the R-tree cannot index is refused, naming the field, and nothing
/// is written; a custom space accepts planar coordinates.
#[test]
fn invalid_geometry_is_refused_with_the_field_named() {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path(), opts()).unwrap();
    db.create_dataset(DatasetDef::new("t", &["id"]).field("id", FieldType::Int))
        .unwrap();
    db.create_index("t", IndexDef::rtree("loc", "loc")).unwrap();
    let ds = db.dataset("t").unwrap();
    let with = |g: Value| Value::Object(vec![("id".into(), Value::Int(1)), ("loc".into(), g)]);
    for (g, why) in [
        (Value::Geometry(Geometry::point(10.0, 95.0)), "latitude"),
        (Value::Geometry(Geometry::point(f64::NAN, 1.0)), "NaN"),
        (Value::Geometry(Geometry::point(200.0, 1.0)), "longitude"),
        (Value::String("POINT(1 2)".into()), "geometry"),
    ] {
        let e = ds
            .insert(with(g))
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(e.contains("loc"), "error should name the field: {e}");
        assert!(
            e.to_lowercase().contains(&why.to_lowercase()),
            "{e} should say {why}"
        );
    }
    assert_eq!(ds.get(&[Value::Int(1)]).unwrap(), None);
    let mut planar = IndexDef::rtree("xy", "xy");
    planar.options.space = Some([0.0, 0.0, 1000.0, 1000.0]);
    db.create_index("t", planar).unwrap();
    ds.insert(Value::Object(vec![
        ("id".into(), Value::Int(2)),
        ("xy".into(), Value::Geometry(Geometry::point(500.0, 700.0))),
    ]))
    .unwrap();
    let q = Query::Intersects(Geometry::rect(400.0, 600.0, 600.0, 800.0));
    assert_eq!(
        ds.query("xy", &q, QueryOptions::default()).unwrap().count(),
        1
    );
}

/// Validated queries decide large candidate lists in parallel batches: the
/// hits must still come in primary-key order, respect the limit (without
/// fetching far beyond it), skip records that no longer match, and count
/// every fetch.
#[test]
fn parallel_batches_keep_order_limit_and_validation() {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path(), opts()).unwrap();
    db.create_dataset(
        DatasetDef::new("t", &["id"])
            .field("id", FieldType::Int)
            .field("loc", FieldType::Geometry)
            .memory_budget(1 << 20)
            .partitions(2)
            .block_size(512),
    )
    .unwrap();
    db.create_index("t", IndexDef::rtree("loc", "loc")).unwrap();
    let ds = db.dataset("t").unwrap();
    let pt = |i: i64| Geometry::point((i % 40) as f64 * 0.01, (i / 40) as f64 * 0.01);
    for i in 0..2_000i64 {
        let r = Rec {
            geom: pt(i),
            text: String::new(),
        };
        ds.insert(record(i, &r)).unwrap();
    }
    ds.flush().unwrap();
    // Move every third record out of the box in the memtable only: its old
    // R-tree entry still sits in the disk component until reconciled, and
    // with the index-only path off every hit is re-checked on its record.
    for i in (0..2_000i64).step_by(3) {
        let r = Rec {
            geom: Geometry::point(100.0, 10.0),
            text: String::new(),
        };
        ds.upsert(record(i, &r)).unwrap();
    }
    let q = Query::Intersects(Geometry::rect(-1.0, -1.0, 1.0, 1.0));
    let want: Vec<i64> = (0..2_000i64).filter(|i| i % 3 != 0).collect();
    let mut res = ds.query("loc", &q, QueryOptions::default()).unwrap();
    let hits: Vec<_> = res.by_ref().map(|h| h.unwrap()).collect();
    let in_order = |hits: &[silt::QueryHit]| -> Vec<i64> {
        hits.iter().map(|h| h.pk[0].as_i64().unwrap()).collect()
    };
    assert_eq!(in_order(&hits), want, "all hits, in primary-key order");
    assert!(hits.iter().all(|h| h.record.is_some()));
    assert_eq!(res.stats().fetched, want.len() as u64);
    // A limit stops early: at most one batch is decided beyond what it
    // needs (here none: the batch is sized by the limit).
    let lim = QueryOptions {
        index_only: false,
        limit: Some(100),
    };
    let mut res = ds.query("loc", &q, lim).unwrap();
    let hits: Vec<_> = res.by_ref().map(|h| h.unwrap()).collect();
    assert_eq!(in_order(&hits), want[..100].to_vec());
    assert!(res.stats().fetched <= 2 * 100, "{:?}", res.stats());
    // Index-only: every hit decided from the index (no writer holds a lock).
    let io = QueryOptions {
        index_only: true,
        limit: None,
    };
    let mut res = ds.query("loc", &q, io).unwrap();
    assert_eq!(res.by_ref().count(), want.len());
    assert_eq!(res.stats().fetched, 0);
    db.close().unwrap();
}

/// The DHB-tree, SHB-tree, SIF and Simple-order R-tree agree with the
/// Hilbert R-tree on polygons, rectangles and points: bulk-built over
/// existing records, then maintained; intersects with point, rectangle and
/// polygon queries, within-distance, spatial joins (intersects and
/// within-distance), index-only and validated, before and after flush and
/// compaction; kNN is refused naming the rtree; the indexes drop cleanly.
#[test]
fn new_spatial_kinds_agree_with_the_rtree() {
    use silt::{IndexKind, JoinPredicate};
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path(), opts()).unwrap();
    for name in ["shapes", "pts"] {
        db.create_dataset(
            DatasetDef::new(name, &["id"])
                .field("id", FieldType::Int)
                .field("loc", FieldType::Geometry)
                .memory_budget(1 << 20)
                .partitions(2)
                .block_size(512),
        )
        .unwrap();
    }
    let shapes = db.dataset("shapes").unwrap();
    let pts = db.dataset("pts").unwrap();
    let mut seed = 5u64;
    let mut rnd = move |n: u64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % n
    };
    let shape = |i: i64, r: &mut dyn FnMut(u64) -> u64| -> Geometry {
        let x = r(400) as f64 * 0.05 - 10.0;
        let y = r(400) as f64 * 0.05 - 10.0;
        match i % 3 {
            0 => Geometry::point(x, y),
            1 => Geometry::rect(x, y, x + r(40) as f64 * 0.1, y + r(20) as f64 * 0.1),
            _ => {
                let (w, h) = (0.1 + r(30) as f64 * 0.1, 0.1 + r(30) as f64 * 0.1);
                Geometry::Polygon {
                    exterior: vec![(x, y), (x + w, y), (x + w, y + h), (x, y)],
                    holes: vec![],
                }
            }
        }
    };
    let put = |ds: &std::sync::Arc<silt::Dataset>, i: i64, g: Geometry| {
        ds.upsert(record(
            i,
            &Rec {
                geom: g,
                text: String::new(),
            },
        ))
        .unwrap();
    };
    for i in 0..600i64 {
        put(&shapes, i, shape(i, &mut rnd));
        let (x, y) = (
            rnd(4000) as f64 * 0.005 - 10.0,
            rnd(4000) as f64 * 0.005 - 10.0,
        );
        put(&pts, i, Geometry::point(if i == 7 { -0.0 } else { x }, y));
    }
    let mk = |name: &str, kind: IndexKind| {
        let mut d = IndexDef::rtree(name, "loc");
        d.kind = kind;
        d
    };
    let mut simple = IndexDef::rtree("rsimple", "loc");
    simple.options.order = Some(silt::index::RtreeOrder::Simple);
    let mut zorder = IndexDef::rtree("rzorder", "loc");
    zorder.options.order = Some(silt::index::RtreeOrder::Zorder);
    let mut coarse = mk("shb_lm", IndexKind::Shb);
    coarse.options.levels = Some(silt::geo::grid::parse_levels("l,l,l,l,h,m").unwrap());
    for ds in ["shapes", "pts"] {
        db.create_index(ds, IndexDef::rtree("loc", "loc")).unwrap();
        db.create_index(ds, simple.clone()).unwrap();
        db.create_index(ds, zorder.clone()).unwrap();
        db.create_index(ds, mk("shb", IndexKind::Shb)).unwrap();
        db.create_index(ds, coarse.clone()).unwrap();
        db.create_index(ds, mk("sif", IndexKind::Sif)).unwrap();
    }
    // A DHB-tree over polygons is refused (points only), over points built.
    let e = db
        .create_index("shapes", mk("dhb", IndexKind::Dhb))
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(e.contains("points"), "{e}");
    db.create_index("pts", mk("dhb", IndexKind::Dhb)).unwrap();
    db.create_index("pts", mk("dhvb", IndexKind::Dhvb)).unwrap();
    // Writes after the build: moves and deletes.
    for i in 0..150i64 {
        put(&shapes, i * 4, shape(i, &mut rnd));
        let (x, y) = (
            rnd(4000) as f64 * 0.005 - 10.0,
            rnd(4000) as f64 * 0.005 - 10.0,
        );
        put(&pts, i * 4, Geometry::point(x, y));
        shapes.delete(&[Value::Int(i * 4 + 1)]).unwrap();
        pts.delete(&[Value::Int(i * 4 + 1)]).unwrap();
    }
    let queries = vec![
        Query::Intersects(Geometry::rect(-3.0, -2.0, 1.5, 4.0)),
        Query::Intersects(Geometry::rect(0.0, 0.0, 0.0, 0.0)),
        Query::Intersects(Geometry::point(2.05, -3.1)),
        Query::Intersects(Geometry::Polygon {
            exterior: vec![(-8.0, -8.0), (6.0, -7.0), (-1.0, 5.0), (-8.0, -8.0)],
            holes: vec![],
        }),
        Query::Intersects(Geometry::rect(-180.0, -90.0, 180.0, 90.0)),
        Query::WithinDistance {
            lon: 1.0,
            lat: 1.0,
            metres: 250_000.0,
        },
        Query::WithinDistance {
            lon: -9.0,
            lat: 9.5,
            metres: 20_000.0,
        },
    ];
    let ids_of = |ds: &std::sync::Arc<silt::Dataset>, index: &str, q: &Query, io: bool| {
        let o = QueryOptions {
            index_only: io,
            limit: None,
        };
        let hits: Vec<_> = ds.query(index, q, o).unwrap().map(|h| h.unwrap()).collect();
        ids(&hits)
    };
    let kinds_of = |ds: &str| -> Vec<&'static str> {
        if ds == "pts" {
            vec!["rsimple", "rzorder", "shb", "shb_lm", "sif", "dhb", "dhvb"]
        } else {
            vec!["rsimple", "rzorder", "shb", "shb_lm", "sif"]
        }
    };
    for step in 0..3 {
        match step {
            1 => {
                shapes.flush().unwrap();
                pts.flush().unwrap();
            }
            2 => {
                shapes.compact().unwrap();
                pts.compact().unwrap();
            }
            _ => {}
        }
        for (name, ds) in [("shapes", &shapes), ("pts", &pts)] {
            for q in &queries {
                let want = ids_of(ds, "loc", q, false);
                if std::ptr::eq(q, &queries[0]) || std::ptr::eq(q, &queries[4]) {
                    assert!(!want.is_empty());
                }
                for index in kinds_of(name) {
                    for io in [false, true] {
                        assert_eq!(
                            ids_of(ds, index, q, io),
                            want,
                            "{name}.{index} {q:?} index_only {io} step {step}"
                        );
                    }
                }
            }
            // Joins.
            let probes: Vec<(Value, Geometry)> = (0..20)
                .map(|i| {
                    let x = -10.0 + f64::from(i);
                    (Value::Int(i64::from(i)), Geometry::point(x, x * 0.5))
                })
                .collect();
            for pred in [
                JoinPredicate::Intersects,
                JoinPredicate::WithinDistance(60_000.0),
            ] {
                let join = |index: &str| {
                    let mut v: Vec<(i64, i64)> = ds
                        .spatial_join(index, probes.clone(), pred, QueryOptions::default())
                        .unwrap()
                        .map(|r| {
                            let (a, h) = r.unwrap();
                            (a.as_i64().unwrap(), h.pk[0].as_i64().unwrap())
                        })
                        .collect();
                    v.sort_unstable();
                    v
                };
                let want = join("loc");
                for index in kinds_of(name) {
                    assert_eq!(join(index), want, "{name}.{index} join {pred:?}");
                }
            }
            // kNN only on R-trees.
            let knn = Query::Nearest {
                lon: 0.0,
                lat: 0.0,
                k: 5,
            };
            assert_eq!(
                ids_of(ds, "rsimple", &knn, false),
                ids_of(ds, "loc", &knn, false)
            );
            assert_eq!(
                ids_of(ds, "rzorder", &knn, false),
                ids_of(ds, "loc", &knn, false)
            );
            for index in kinds_of(name).into_iter().skip(2) {
                let e = ds
                    .query(index, &knn, QueryOptions::default())
                    .err()
                    .map(|e| e.to_string())
                    .unwrap_or_default();
                assert!(e.contains("kNN needs an rtree"), "{index}: {e}");
            }
        }
    }
    // The -0.0 point is found by a query at +0.0.
    assert!(
        ids_of(
            &pts,
            "dhb",
            &Query::Intersects(Geometry::rect(0.0, -10.0, 0.0, 10.0)),
            true
        )
        .contains(&7)
    );
    for index in ["shb", "sif", "rsimple", "shb_lm"] {
        db.drop_index("shapes", index).unwrap();
        assert!(
            shapes
                .query(index, &queries[0], QueryOptions::default())
                .is_err()
        );
    }
    db.drop_index("pts", "dhb").unwrap();
    // Bad options are refused.
    let mut bad = mk("bad", IndexKind::Shb);
    bad.options.levels = Some(vec![8, 8, 8, 8, 8]);
    assert!(db.create_index("pts", bad).is_err());
    let mut bad = mk("bad", IndexKind::Dhb);
    bad.options.order = Some(silt::index::RtreeOrder::Simple);
    assert!(db.create_index("pts", bad).is_err());
    db.close().unwrap();
}

/// A radius query walks only the R-tree nodes and blocks that can reach its
/// circle, not every one under the circle's bounding box (whose corners are
/// a fifth of its area): fewer blocks, in memory and on disk, and the same
/// answer as a brute-force scan.
#[test]
fn radius_queries_skip_what_cannot_reach_the_circle() {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path(), opts()).unwrap();
    db.create_dataset(
        DatasetDef::new("pts", &["id"])
            .field("id", FieldType::Int)
            .field("loc", FieldType::Point)
            .block_size(512),
    )
    .unwrap();
    db.create_index("pts", IndexDef::rtree("loc", "loc"))
        .unwrap();
    let ds = db.dataset("pts").unwrap();
    // A 200 x 200 grid of points 0.01 degrees apart around (10, 10).
    let mut pts = Vec::new();
    for i in 0..200 {
        for j in 0..200 {
            let (x, y) = (9.0 + f64::from(i) * 0.01, 9.0 + f64::from(j) * 0.01);
            pts.push((i64::from(i) * 1000 + i64::from(j), x, y));
        }
    }
    for (n, chunk) in pts.chunks(5000).enumerate() {
        for &(id, x, y) in chunk {
            ds.insert(Value::Object(vec![
                ("id".into(), Value::Int(id)),
                ("loc".into(), Value::Geometry(Geometry::point(x, y))),
            ]))
            .unwrap();
        }
        // Most on disk, the last ones in the memtable.
        if n < 6 {
            ds.flush().unwrap();
        }
    }
    let (lon, lat, metres) = (10.0, 10.0, 90_000.0);
    let run = |q: &Query| {
        let mut r = ds.query("loc", q, QueryOptions::default()).unwrap();
        let mut got: Vec<i64> = r
            .by_ref()
            .map(|h| match h.unwrap().pk.first() {
                Some(Value::Int(i)) => *i,
                other => panic!("{other:?}"),
            })
            .collect();
        got.sort_unstable();
        (got, r.stats())
    };
    let (near, stats) = run(&Query::WithinDistance { lon, lat, metres });
    let mut want: Vec<i64> = pts
        .iter()
        .filter(|(_, x, y)| sphere::haversine_m(lon, lat, *x, *y) <= metres)
        .map(|p| p.0)
        .collect();
    want.sort_unstable();
    assert_eq!(near, want);
    assert!(!near.is_empty() && near.len() < pts.len());
    // The circle's bounding box: every block under it.
    let b = sphere::circle_bboxes(lon, lat, metres)[0];
    let (boxed, box_stats) = run(&Query::Intersects(Geometry::rect(b[0], b[1], b[2], b[3])));
    assert!(boxed.len() > near.len());
    assert!(
        stats.blocks * 10 < box_stats.blocks * 9,
        "radius read {} blocks, its bounding box {}",
        stats.blocks,
        box_stats.blocks
    );
    assert!(stats.candidates < box_stats.candidates);
}
