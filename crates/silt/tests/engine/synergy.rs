//! Synergy's runtime (seed 004 §4.6-4.7): materialized views over
//! customer <- orders <- order_line kept by the transactions that write
//! the chain, under one lock on the root customer's key (two for a move
//! between customers). Every view always equals the join recomputed from
//! the base datasets: after random writes and transactions (a property
//! test, with restarts), when built over existing records, and under
//! concurrent writers.

use proptest::prelude::*;
use silt::{
    Database, DatasetDef, DbOptions, Durability, Error, FieldType, FkAction, MaterializedDef,
    Value, ViewColumn,
};
use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::Arc;

fn open(dir: &std::path::Path) -> Database {
    Database::open(
        dir,
        DbOptions {
            durability: Durability::Sync,
            block_cache_bytes: 4 << 20,
            ..Default::default()
        },
    )
    .unwrap()
}

const OC: &str = "orders_o_c_id_fkey";
const LO: &str = "order_line_ol_o_id_fkey";

fn col(relation: &str, field: &str) -> ViewColumn {
    ViewColumn {
        relation: relation.into(),
        field: field.into(),
        name: field.into(),
    }
}

/// The three datasets in one hierarchy under customer.
fn schema(db: &Database) {
    db.create_dataset(
        DatasetDef::new("customer", &["c_id"])
            .field("c_id", FieldType::Int)
            .field("name", FieldType::String)
            .memory_budget(1 << 20),
    )
    .unwrap();
    db.create_dataset(
        DatasetDef::new("orders", &["o_id"])
            .field("o_id", FieldType::Int)
            .field("o_c_id", FieldType::Int)
            .field("total", FieldType::Int)
            .memory_budget(1 << 20)
            .partitions(2)
            .references(&["o_c_id"], "customer", FkAction::Restrict),
    )
    .unwrap();
    db.create_dataset(
        DatasetDef::new("order_line", &["ol_id"])
            .field("ol_id", FieldType::Int)
            .field("ol_o_id", FieldType::Int)
            .field("qty", FieldType::Int)
            .memory_budget(1 << 20)
            .references(&["ol_o_id"], "orders", FkAction::Cascade),
    )
    .unwrap();
    db.set_hierarchy("customer", Some(vec![])).unwrap();
    db.set_hierarchy("orders", Some(vec![OC.into()])).unwrap();
    db.set_hierarchy("order_line", Some(vec![LO.into(), OC.into()]))
        .unwrap();
}

fn views(db: &Database) {
    db.create_materialized_view(
        "customer_orders",
        MaterializedDef {
            relations: vec!["customer".into(), "orders".into()],
            keys: vec![OC.into()],
            columns: vec![
                col("customer", "c_id"),
                col("customer", "name"),
                col("orders", "o_id"),
                col("orders", "total"),
            ],
        },
    )
    .unwrap();
    db.create_materialized_view(
        "customer_orders_lines",
        MaterializedDef {
            relations: vec!["customer".into(), "orders".into(), "order_line".into()],
            keys: vec![OC.into(), LO.into()],
            columns: vec![
                col("customer", "c_id"),
                col("customer", "name"),
                col("orders", "o_id"),
                col("orders", "total"),
                col("order_line", "ol_id"),
                col("order_line", "qty"),
            ],
        },
    )
    .unwrap();
}

fn records(db: &Database, name: &str) -> Vec<Value> {
    db.dataset(name)
        .unwrap()
        .scan(Bound::Unbounded, Bound::Unbounded)
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

fn int(r: &Value, f: &str) -> i64 {
    match r.get(f) {
        Some(Value::Int(i)) => *i,
        _ => i64::MIN,
    }
}

fn text(r: &Value, f: &str) -> String {
    match r.get(f) {
        Some(Value::String(s)) => s.clone(),
        other => format!("{other:?}"),
    }
}

type Row = Vec<String>;

/// Both views as they are, and as the joins of the base datasets say.
fn check_views(db: &Database) -> Result<(), String> {
    let cust: BTreeMap<i64, String> = records(db, "customer")
        .iter()
        .map(|r| (int(r, "c_id"), text(r, "name")))
        .collect();
    let orders: BTreeMap<i64, (i64, i64)> = records(db, "orders")
        .iter()
        .map(|r| (int(r, "o_id"), (int(r, "o_c_id"), int(r, "total"))))
        .collect();
    let mut want_co: Vec<Row> = Vec::new();
    for (o, (c, total)) in &orders {
        if let Some(name) = cust.get(c) {
            want_co.push(vec![
                c.to_string(),
                name.clone(),
                o.to_string(),
                total.to_string(),
            ]);
        }
    }
    let mut want_col: Vec<Row> = Vec::new();
    for r in records(db, "order_line") {
        let (l, o, qty) = (int(&r, "ol_id"), int(&r, "ol_o_id"), int(&r, "qty"));
        if let Some((c, total)) = orders.get(&o)
            && let Some(name) = cust.get(c)
        {
            want_col.push(vec![
                c.to_string(),
                name.clone(),
                o.to_string(),
                total.to_string(),
                l.to_string(),
                qty.to_string(),
            ]);
        }
    }
    let got = |name: &str, cols: &[&str]| -> Vec<Row> {
        records(db, name)
            .iter()
            .map(|r| {
                cols.iter()
                    .map(|c| match r.get(c) {
                        Some(Value::String(s)) => s.clone(),
                        Some(Value::Int(i)) => i.to_string(),
                        other => format!("{other:?}"),
                    })
                    .collect()
            })
            .collect()
    };
    let mut got_co = got("customer_orders", &["c_id", "name", "o_id", "total"]);
    let mut got_col = got(
        "customer_orders_lines",
        &["c_id", "name", "o_id", "total", "ol_id", "qty"],
    );
    for v in [&mut want_co, &mut want_col, &mut got_co, &mut got_col] {
        v.sort();
    }
    if got_co != want_co {
        return Err(format!("customer_orders {got_co:?} != join {want_co:?}"));
    }
    if got_col != want_col {
        return Err(format!(
            "customer_orders_lines {got_col:?} != join {want_col:?}"
        ));
    }
    Ok(())
}

fn customer(id: i64, name: &str) -> Value {
    Value::Object(vec![
        ("c_id".into(), Value::Int(id)),
        ("name".into(), Value::String(name.into())),
    ])
}

fn order(id: i64, c: i64, total: i64) -> Value {
    Value::Object(vec![
        ("o_id".into(), Value::Int(id)),
        ("o_c_id".into(), Value::Int(c)),
        ("total".into(), Value::Int(total)),
    ])
}

fn line(id: i64, o: i64, qty: i64) -> Value {
    Value::Object(vec![
        ("ol_id".into(), Value::Int(id)),
        ("ol_o_id".into(), Value::Int(o)),
        ("qty".into(), Value::Int(qty)),
    ])
}

#[test]
fn views_follow_inserts_updates_moves_and_deletes() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    schema(&db);
    let (c, o, l) = (
        db.dataset("customer").unwrap(),
        db.dataset("orders").unwrap(),
        db.dataset("order_line").unwrap(),
    );
    // Built over records already there.
    c.insert(customer(1, "ann")).unwrap();
    c.insert(customer(2, "bob")).unwrap();
    o.insert(order(10, 1, 5)).unwrap();
    l.insert(line(100, 10, 1)).unwrap();
    views(&db);
    check_views(&db).unwrap();
    assert_eq!(records(&db, "customer_orders_lines").len(), 1);
    // The last relation's insert reads its ancestors.
    l.insert(line(101, 10, 2)).unwrap();
    check_views(&db).unwrap();
    // An update high in the chain rewrites every row below it.
    c.upsert(customer(1, "anne")).unwrap();
    check_views(&db).unwrap();
    assert!(
        records(&db, "customer_orders_lines")
            .iter()
            .all(|r| text(r, "name") == "anne")
    );
    // A move between roots takes two locks and moves the rows.
    let mut tx = db.begin().unwrap();
    tx.upsert(&o, order(10, 2, 5)).unwrap();
    let info = tx.commit().unwrap();
    assert_eq!(info.root_locks, 2, "a move locks both customers");
    check_views(&db).unwrap();
    // One lock for a write under one root.
    let mut tx = db.begin().unwrap();
    tx.insert(&l, line(102, 10, 3)).unwrap();
    tx.upsert(&o, order(10, 2, 6)).unwrap();
    assert_eq!(tx.commit().unwrap().root_locks, 1);
    check_views(&db).unwrap();
    // A cascaded delete takes the rows.
    assert!(o.delete(&[Value::Int(10)]).unwrap());
    check_views(&db).unwrap();
    assert!(records(&db, "customer_orders_lines").is_empty());
    // Views are the commits' to write.
    let v = db.dataset("customer_orders").unwrap();
    let e = v
        .upsert(Value::Object(vec![("o_id".into(), Value::Int(1))]))
        .unwrap_err();
    assert!(e.to_string().contains("is a materialized view"), "{e}");
    let mut tx = db.begin().unwrap();
    assert!(tx.delete(&v, &[Value::Int(1)]).is_err());
    drop(tx);
    // A dataset a view is made of is not dropped.
    let e = db.drop_dataset("order_line").unwrap_err();
    assert!(matches!(e, Error::Dependents { .. }), "{e}");
    // Restart: definitions and links come back.
    drop((c, o, l, v));
    db.close().unwrap();
    drop(db);
    let db = open(dir.path());
    let (o, l) = (
        db.dataset("orders").unwrap(),
        db.dataset("order_line").unwrap(),
    );
    o.insert(order(11, 1, 9)).unwrap();
    l.insert(line(103, 11, 4)).unwrap();
    check_views(&db).unwrap();
    assert_eq!(records(&db, "customer_orders_lines").len(), 1);
}

#[derive(Clone, Debug)]
enum Op {
    Customer(i64, u8),
    DelCustomer(i64),
    Order(i64, i64, i64),
    DelOrder(i64),
    Line(i64, i64, i64),
    DelLine(i64),
    Txn(Vec<Op>),
    Restart,
}

fn op_strategy() -> impl Strategy<Value = Op> {
    let k = 0i64..4;
    let simple = prop_oneof![
        (k.clone(), 0u8..3).prop_map(|(c, n)| Op::Customer(c, n)),
        k.clone().prop_map(Op::DelCustomer),
        (k.clone(), k.clone(), 0i64..3).prop_map(|(o, c, t)| Op::Order(o, c, t)),
        k.clone().prop_map(Op::DelOrder),
        (0i64..8, k.clone(), 0i64..3).prop_map(|(l, o, q)| Op::Line(l, o, q)),
        (0i64..8).prop_map(Op::DelLine),
    ];
    prop_oneof![
        6 => simple.clone(),
        3 => proptest::collection::vec(simple, 1..5).prop_map(Op::Txn),
        1 => Just(Op::Restart),
    ]
}

const NAMES: [&str; 3] = ["ann", "bob", "cy"];

/// Run `op` (upserts, so every write may be an update or a move); errors
/// of the keys are expected, nothing else.
fn run(db: &Database, op: &Op) {
    let (c, o, l) = (
        db.dataset("customer").unwrap(),
        db.dataset("orders").unwrap(),
        db.dataset("order_line").unwrap(),
    );
    let ok = |r: silt::Result<()>| match r {
        Ok(()) | Err(Error::ForeignKeyMissing { .. } | Error::ForeignKeyReferenced { .. }) => {}
        Err(e) => panic!("{op:?}: {e}"),
    };
    match op {
        Op::Customer(k, n) => ok(c.upsert(customer(*k, NAMES[*n as usize]))),
        Op::DelCustomer(k) => ok(c.delete(&[Value::Int(*k)]).map(drop)),
        Op::Order(k, p, t) => ok(o.upsert(order(*k, *p, *t))),
        Op::DelOrder(k) => ok(o.delete(&[Value::Int(*k)]).map(drop)),
        Op::Line(k, p, q) => ok(l.upsert(line(*k, *p, *q))),
        Op::DelLine(k) => ok(l.delete(&[Value::Int(*k)]).map(drop)),
        Op::Txn(ops) => {
            let mut tx = db.begin().unwrap();
            for op in ops {
                let r = match op {
                    Op::Customer(k, n) => tx.upsert(&c, customer(*k, NAMES[*n as usize])),
                    Op::DelCustomer(k) => tx.delete(&c, &[Value::Int(*k)]).map(drop),
                    Op::Order(k, p, t) => tx.upsert(&o, order(*k, *p, *t)),
                    Op::DelOrder(k) => tx.delete(&o, &[Value::Int(*k)]).map(drop),
                    Op::Line(k, p, q) => tx.upsert(&l, line(*k, *p, *q)),
                    Op::DelLine(k) => tx.delete(&l, &[Value::Int(*k)]).map(drop),
                    _ => Ok(()),
                };
                r.unwrap();
            }
            match tx.commit() {
                Ok(info) => assert!(info.root_locks <= 4, "{info:?}"),
                Err(e) => ok(Err(e)),
            }
        }
        Op::Restart => {}
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, ..ProptestConfig::default() })]

    /// Random writes, transactions and restarts: after every step both
    /// views equal the joins of the base datasets.
    #[test]
    fn views_equal_the_joins(ops in proptest::collection::vec(op_strategy(), 1..40)) {
        let dir = tempfile::tempdir().unwrap();
        let mut db = open(dir.path());
        schema(&db);
        views(&db);
        for op in &ops {
            if let Op::Restart = op {
                db.close().unwrap();
                drop(db);
                db = open(dir.path());
                continue;
            }
            run(&db, op);
            if let Err(e) = check_views(&db) {
                prop_assert!(false, "after {:?}: {}", op, e);
            }
        }
    }
}

/// Writers under a few customers at once, readers of the views meanwhile:
/// when they stop, each view is the join.
#[test]
fn concurrent_writers_keep_the_views() {
    let dir = tempfile::tempdir().unwrap();
    // Commits that do not wait for the disk overlap more.
    let db = Arc::new(
        Database::open(
            dir.path(),
            DbOptions {
                durability: Durability::None,
                block_cache_bytes: 4 << 20,
                ..Default::default()
            },
        )
        .unwrap(),
    );
    schema(&db);
    views(&db);
    for i in 0..3 {
        db.dataset("customer")
            .unwrap()
            .insert(customer(i, "ann"))
            .unwrap();
    }
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let reader = {
        let (db, stop) = (db.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut n = 0;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                n += records(&db, "customer_orders_lines").len();
            }
            n
        })
    };
    let mut writers = Vec::new();
    for t in 0..4u64 {
        let db = db.clone();
        writers.push(std::thread::spawn(move || {
            let mut x = 0x9e37_79b9_7f4a_7c15u64 ^ t;
            for _ in 0..3000 {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let op = match x % 7 {
                    0 | 6 => Op::Customer((x >> 8) as i64 % 3, ((x >> 16) % 3) as u8),
                    1 | 2 => Op::Order((x >> 8) as i64 % 6, (x >> 16) as i64 % 3, 1),
                    3 | 4 => Op::Line((x >> 8) as i64 % 20, (x >> 16) as i64 % 6, 2),
                    5 => Op::DelLine((x >> 8) as i64 % 20),
                    _ if x.is_multiple_of(11) => Op::DelOrder((x >> 8) as i64 % 6),
                    _ => Op::Line((x >> 8) as i64 % 20, (x >> 16) as i64 % 6, 3),
                };
                run(&db, &op);
            }
        }));
    }
    for w in writers {
        w.join().unwrap();
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    reader.join().unwrap();
    check_views(&db).unwrap();
}

/// The TPC-W schema at a small scale, its workload's joins, the paper's
/// roots (author, customer, country): every table lands in one tree, the
/// views the workload uses are built and hold a row per record of their
/// last table, and a write under a customer takes one lock.
#[test]
fn tpcw_design_installs_hierarchies_and_views() {
    use silt::synergy::{JoinCondition, Query, design};
    use silt::workload::tpcw;
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    for def in tpcw::schema() {
        db.create_dataset(def).unwrap();
    }
    let scale = tpcw::Scale::new(20);
    for (table, rec) in tpcw::records(&scale, 7) {
        db.dataset(table).unwrap().insert(rec).unwrap();
    }
    let workload: Vec<Query> = tpcw::statements()
        .iter()
        .map(|s| {
            let joins = s
                .joins()
                .iter()
                .map(|(lt, lc, rt, rc)| JoinCondition::single(lt, lc, rt, rc))
                .collect();
            Query::new(joins, Vec::new())
        })
        .collect();
    let d = design::design(&db, &["author", "customer", "country"], &workload).unwrap();
    assert_eq!(d.forest.trees().len(), 3);
    let made = design::install(&db, &d).unwrap();
    assert!(!made.is_empty(), "the workload's joins select views");
    for v in &made {
        let m = db.dataset(v).unwrap().def().materialized.clone().unwrap();
        let last = m.relations.last().unwrap();
        assert_eq!(
            records(&db, v).len(),
            records(&db, last).len(),
            "{v}: a row per record of {last}"
        );
    }
    assert!(
        db.dataset("orders").unwrap().def().hierarchy.is_some(),
        "orders is under a root"
    );
    // A new order of customer 1: one root lock (address and country keys
    // are read, the hierarchy's root is the customer).
    let orders = db.dataset("orders").unwrap();
    let mut some = records(&db, "orders")
        .into_iter()
        .find(|r| int(r, "o_c_id") == 1)
        .unwrap();
    if let Value::Object(f) = &mut some {
        for (k, v) in f.iter_mut() {
            if k == "o_id" {
                *v = Value::Int(1_000_000);
            }
        }
    }
    let mut tx = db.begin().unwrap();
    tx.insert(&orders, some).unwrap();
    let info = tx.commit().unwrap();
    assert!(info.root_locks >= 1, "{info:?}");
    for v in &made {
        let m = db.dataset(v).unwrap().def().materialized.clone().unwrap();
        let last = m.relations.last().unwrap();
        assert_eq!(records(&db, v).len(), records(&db, last).len(), "{v}");
    }
}

/// A long transaction renames customer 1 and then fails at its commit
/// (two of its records take one unique value, checked once all is
/// applied), so its rename is applied and undone, while another thread
/// keeps adding lines under customer 1, whose view rows read the customer.
/// The failing commit is not starved by the stream of new children (its
/// plan, made again under its locks, takes the keys of children that came
/// meanwhile without waiting: it used to give up after 16 tries), and no
/// view row ever shows the name that was undone.
#[test]
fn a_root_lock_keeps_undone_ancestors_out_of_views() {
    let dir = tempfile::tempdir().unwrap();
    let db = Arc::new(
        Database::open(
            dir.path(),
            DbOptions {
                durability: Durability::None,
                block_cache_bytes: 4 << 20,
                ..Default::default()
            },
        )
        .unwrap(),
    );
    schema(&db);
    views(&db);
    let tags = db
        .create_dataset(
            DatasetDef::new("tags", &["id"])
                .field("id", FieldType::Int)
                .field("v", FieldType::Int),
        )
        .unwrap();
    let mut unique = silt::IndexDef::btree("tags_v", &["v"]);
    unique.options.unique = true;
    db.create_index("tags", unique).unwrap();
    let (c, o, l) = (
        db.dataset("customer").unwrap(),
        db.dataset("orders").unwrap(),
        db.dataset("order_line").unwrap(),
    );
    c.insert(customer(1, "ann")).unwrap();
    c.insert(customer(2, "bob")).unwrap();
    o.insert(order(1, 1, 0)).unwrap();
    o.insert(order(2, 2, 0)).unwrap();
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let adder = {
        let (db, stop) = (db.clone(), stop.clone());
        std::thread::spawn(move || {
            let l = db.dataset("order_line").unwrap();
            let mut n = 1_000_000i64;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                n += 1;
                l.insert(line(n, 1, 1)).unwrap();
            }
            n - 1_000_000
        })
    };
    let tag = |id: i64| {
        Value::Object(vec![
            ("id".into(), Value::Int(id)),
            ("v".into(), Value::Int(7)),
        ])
    };
    let mut failed = 0;
    for round in 0..3i64 {
        let mut tx = db.begin().unwrap();
        tx.upsert(&c, customer(1, "undone")).unwrap();
        for i in 0..5_000 {
            tx.insert(&l, line(round * 100_000 + i, 2, 1)).unwrap();
        }
        tx.insert(&tags, tag(2 * round)).unwrap();
        tx.insert(&tags, tag(2 * round + 1)).unwrap();
        match tx.commit() {
            Err(Error::DuplicateValue { .. }) => failed += 1,
            // The lines under customer 1 kept coming faster than the
            // commit could take its locks: nothing was applied.
            Err(Error::Txn(_)) => {}
            other => panic!("{other:?}"),
        }
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let added = adder.join().unwrap();
    assert!(
        failed > 0 && added > 0,
        "{failed} failed commits, {added} lines added"
    );
    assert!(
        records(&db, "customer_orders_lines")
            .iter()
            .all(|r| text(r, "name") != "undone"),
        "a view row kept a name that was undone"
    );
    check_views(&db).unwrap();
}

/// §4.7: a write under a root X-locks the root's key, so two writes under
/// one customer wait for each other even when they share no record (lines
/// of two different orders, no views), while a write under another
/// customer does not. The first write is held at its fsync (a commit
/// keeps its locks until its log record is durable), so the waits are
/// seen in the lock manager's counters, not in times. Without the root
/// lock the second write under customer 1 would take its locks at once.
#[test]
fn writes_under_one_root_wait_for_each_other() {
    use std::time::{Duration, Instant};
    let dir = tempfile::tempdir().unwrap();
    let fault = Arc::new(silt::txn::FaultInjector::new());
    let db = Arc::new(
        Database::open(
            dir.path(),
            DbOptions {
                durability: Durability::Sync,
                block_cache_bytes: 4 << 20,
                wal_fault: Some(fault.clone()),
                ..Default::default()
            },
        )
        .unwrap(),
    );
    schema(&db);
    let (c, o, l) = (
        db.dataset("customer").unwrap(),
        db.dataset("orders").unwrap(),
        db.dataset("order_line").unwrap(),
    );
    for id in [1, 2] {
        c.insert(customer(id, "c")).unwrap();
    }
    for (id, cust) in [(10, 1), (11, 1), (20, 2)] {
        o.insert(order(id, cust, 0)).unwrap();
        l.insert(line(id * 10, id, 1)).unwrap();
    }
    let update = |db: &Arc<Database>, id: i64, qty: i64| {
        let db = db.clone();
        std::thread::spawn(move || {
            let lines = db.dataset("order_line").unwrap();
            let mut tx = db.begin().unwrap();
            tx.upsert(&lines, line(id, id / 10, qty)).unwrap();
            tx.commit().unwrap()
        })
    };
    let until = |what: &str, done: &dyn Fn() -> bool| {
        let deadline = Instant::now() + Duration::from_secs(20);
        while !done() {
            assert!(Instant::now() < deadline, "{what}");
            std::thread::sleep(Duration::from_millis(1));
        }
    };
    let locks = || db.stats().locks;
    // Blocking waits of either kind: an X request, or a read's instant S
    // on a key another transaction holds X on (the second write reads the
    // root's record to find its root before it locks).
    let waited = || {
        let l = locks();
        l.waits + l.s_waits
    };
    // A line's write, uncontended: its root, its order and itself.
    let before = locks().grants;
    assert_eq!(update(&db, 200, 2).join().unwrap().root_locks, 1);
    let per_write = locks().grants - before;
    assert!(per_write >= 2, "{per_write} locks");

    fault.pause_fsyncs();
    let a = update(&db, 100, 5);
    until("the first write reaches its fsync", &|| {
        fault.fsyncs_waiting() >= 1
    });
    let (waits, grants) = (waited(), locks().grants);
    // Customer 2's line: every lock granted, none waited for.
    let other = update(&db, 200, 3);
    until("a write under another root takes its locks", &|| {
        locks().grants >= grants + per_write
    });
    assert_eq!(waited(), waits, "a write under another root waited");
    // Customer 1's other order: waits for the first write's root lock.
    let same = update(&db, 110, 7);
    until(
        "a write under customer 1 did not wait for the other write under it: is the root locked?",
        &|| waited() > waits,
    );
    assert!(!same.is_finished() && !a.is_finished());
    fault.resume_fsyncs();
    for t in [a, other, same] {
        assert_eq!(t.join().unwrap().root_locks, 1);
    }
    let qty: BTreeMap<i64, i64> = records(&db, "order_line")
        .iter()
        .map(|r| (int(r, "ol_id"), int(r, "qty")))
        .collect();
    assert_eq!(qty, BTreeMap::from([(100, 5), (110, 7), (200, 3)]));
}
