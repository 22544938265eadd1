//! Foreign keys (`DatasetDef::references`): every write path enforces them
//! (single writes, batches, transactions), deletes restrict or cascade,
//! the DDL around them refuses what would break them, they survive a
//! restart, concurrent writers never leave an orphan, and a property test
//! against a model of three linked datasets.

use proptest::prelude::*;
use silt::{
    BatchOptions, Database, DatasetDef, DbOptions, Durability, Error, FieldType, FkAction,
    ForeignKeyDef, Value, WriteMode,
};
use std::collections::BTreeMap;
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

/// customer <- orders (RESTRICT) <- order_line (CASCADE).
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
}

fn customer(id: i64) -> Value {
    Value::Object(vec![
        ("c_id".into(), Value::Int(id)),
        ("name".into(), Value::String(format!("c{id}"))),
    ])
}

fn order(id: i64, c: Option<i64>) -> Value {
    Value::Object(vec![
        ("o_id".into(), Value::Int(id)),
        ("o_c_id".into(), c.map_or(Value::Null, Value::Int)),
    ])
}

fn line(id: i64, o: i64) -> Value {
    Value::Object(vec![
        ("ol_id".into(), Value::Int(id)),
        ("ol_o_id".into(), Value::Int(o)),
        ("qty".into(), Value::Int(1)),
    ])
}

fn count(db: &Database, name: &str) -> usize {
    db.dataset(name)
        .unwrap()
        .scan(std::ops::Bound::Unbounded, std::ops::Bound::Unbounded)
        .unwrap()
        .count()
}

#[test]
fn single_writes_restrict_and_cascade() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    schema(&db);
    let (c, o, l) = (
        db.dataset("customer").unwrap(),
        db.dataset("orders").unwrap(),
        db.dataset("order_line").unwrap(),
    );
    // The lookup index was made for each key.
    assert!(
        o.index_defs()
            .iter()
            .any(|i| i.fields == ["o_c_id"] && i.name == "orders_o_c_id_fkey_idx")
    );
    let e = o.insert(order(1, Some(7))).unwrap_err();
    match &e {
        Error::ForeignKeyMissing {
            dataset,
            constraint,
            parent,
            key,
        } => {
            assert_eq!(
                (dataset.as_str(), constraint.as_str(), parent.as_str()),
                ("orders", "orders_o_c_id_fkey", "customer")
            );
            assert_eq!(key, &[("o_c_id".to_owned(), "7".to_owned())]);
        }
        e => panic!("{e}"),
    }
    assert!(
        e.to_string()
            .contains("is not present in dataset `customer`")
    );
    assert_eq!(count(&db, "orders"), 0);
    // A null key references nothing.
    o.insert(order(2, None)).unwrap();
    c.insert(customer(7)).unwrap();
    o.insert(order(1, Some(7))).unwrap();
    l.insert(line(10, 1)).unwrap();
    l.insert(line(11, 1)).unwrap();
    assert!(matches!(
        l.insert(line(12, 99)).unwrap_err(),
        Error::ForeignKeyMissing { .. }
    ));
    // An upsert that re-points to a missing parent changes nothing.
    assert!(matches!(
        o.upsert(order(1, Some(8))).unwrap_err(),
        Error::ForeignKeyMissing { .. }
    ));
    assert_eq!(
        o.get(&[Value::Int(1)]).unwrap().unwrap().get("o_c_id"),
        Some(&Value::Int(7))
    );
    // RESTRICT: the customer stays while an order names it.
    let e = c.delete(&[Value::Int(7)]).unwrap_err();
    assert!(
        matches!(&e, Error::ForeignKeyReferenced { child, .. } if child == "orders"),
        "{e}"
    );
    assert!(c.get(&[Value::Int(7)]).unwrap().is_some());
    // CASCADE: deleting the order deletes its lines.
    assert!(o.delete(&[Value::Int(1)]).unwrap());
    assert_eq!(count(&db, "order_line"), 0);
    assert!(c.delete(&[Value::Int(7)]).unwrap());
    // Replacing a parent keeps its children.
    c.insert(customer(3)).unwrap();
    o.insert(order(4, Some(3))).unwrap();
    c.upsert(customer(3)).unwrap();
    assert_eq!(count(&db, "orders"), 2);
}

#[test]
fn transactions_see_their_own_parents() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    schema(&db);
    let (c, o, l) = (
        db.dataset("customer").unwrap(),
        db.dataset("orders").unwrap(),
        db.dataset("order_line").unwrap(),
    );
    // Parent and children in one transaction.
    let mut tx = db.begin().unwrap();
    tx.insert(&l, line(1, 5)).unwrap();
    tx.insert(&o, order(5, Some(9))).unwrap();
    tx.insert(&c, customer(9)).unwrap();
    tx.commit().unwrap();
    assert_eq!(count(&db, "order_line"), 1);
    // A child whose parent the same transaction deletes fails it whole.
    let mut tx = db.begin().unwrap();
    tx.insert(&c, customer(10)).unwrap();
    tx.delete(&c, &[Value::Int(9)]).unwrap();
    let e = tx.commit().unwrap_err();
    assert!(matches!(e, Error::ForeignKeyReferenced { .. }), "{e}");
    assert!(c.get(&[Value::Int(10)]).unwrap().is_none());
    // Re-pointing the children first lets the parent go.
    let mut tx = db.begin().unwrap();
    tx.insert(&c, customer(10)).unwrap();
    tx.upsert(&o, order(5, Some(10))).unwrap();
    tx.delete(&c, &[Value::Int(9)]).unwrap();
    tx.commit().unwrap();
    assert!(c.get(&[Value::Int(9)]).unwrap().is_none());
    // A record deleted and written again in one transaction took its
    // children with it (the cascade happens at the delete).
    tx_line_then_replace(&db);
    // Deleting children then parent in one transaction.
    let mut tx = db.begin().unwrap();
    tx.delete(&o, &[Value::Int(5)]).unwrap();
    tx.delete(&c, &[Value::Int(10)]).unwrap();
    tx.commit().unwrap();
    assert_eq!(count(&db, "customer"), 0);
    assert_eq!(count(&db, "order_line"), 0, "cascaded from the order");
}

fn tx_line_then_replace(db: &Database) {
    let (o, l) = (
        db.dataset("orders").unwrap(),
        db.dataset("order_line").unwrap(),
    );
    l.insert(line(77, 5)).unwrap();
    let mut tx = db.begin().unwrap();
    tx.insert(&l, line(78, 5)).unwrap();
    tx.delete(&o, &[Value::Int(5)]).unwrap();
    tx.insert(&o, order(5, Some(10))).unwrap();
    tx.insert(&l, line(79, 5)).unwrap();
    tx.commit().unwrap();
    let lines: Vec<i64> = records(db, "order_line")
        .iter()
        .map(|r| int(r, "ol_id"))
        .collect();
    assert_eq!(lines, [79], "the lines of the deleted order went with it");
    l.delete(&[Value::Int(79)]).unwrap();
}

#[test]
fn batches_stop_at_an_orphan_or_write_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    schema(&db);
    let (c, o) = (
        db.dataset("customer").unwrap(),
        db.dataset("orders").unwrap(),
    );
    c.insert(customer(1)).unwrap();
    let r = o
        .write_batch(
            vec![order(1, Some(1)), order(2, Some(2)), order(3, Some(1))],
            BatchOptions::default(),
        )
        .unwrap();
    assert_eq!(r.committed, 1);
    assert_eq!(r.failed.len(), 1);
    assert_eq!(r.failed[0].0, 1);
    assert!(matches!(r.failed[0].1, Error::ForeignKeyMissing { .. }));
    assert_eq!(r.not_attempted, 1);
    let r = o
        .write_batch(
            vec![order(4, Some(1)), order(5, Some(2))],
            BatchOptions::atomic(WriteMode::Insert),
        )
        .unwrap();
    assert_eq!(r.committed, 0);
    assert_eq!(r.failed.len(), 1);
    assert!(o.get(&[Value::Int(4)]).unwrap().is_none());
    let r = o
        .write_batch(
            vec![order(4, Some(1)), order(5, Some(1))],
            BatchOptions::atomic(WriteMode::Insert),
        )
        .unwrap();
    assert_eq!(r.committed, 2);
    // ON CONFLICT DO NOTHING of a live key needs no parent.
    let r = o
        .write_batch(
            vec![order(4, Some(99))],
            BatchOptions {
                mode: WriteMode::InsertIgnore,
                ..Default::default()
            },
        )
        .unwrap();
    assert!(r.failed.is_empty(), "{:?}", r.failed);
    let mut batch = silt::PreparedBatch::new();
    o.prepare_into(order(6, Some(3)), &mut batch).unwrap();
    let r = o
        .write_prepared(&batch, BatchOptions::atomic(WriteMode::Insert))
        .unwrap();
    assert!(matches!(r.failed[0].1, Error::ForeignKeyMissing { .. }));
}

#[test]
fn ddl_refuses_what_would_break_a_key() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    schema(&db);
    let bad = |def: DatasetDef| db.create_dataset(def).err().unwrap().to_string();
    let e = bad(DatasetDef::new("x", &["id"])
        .field("id", FieldType::Int)
        .field("p", FieldType::Int)
        .references(&["p"], "nowhere", FkAction::Restrict));
    assert!(e.contains("`nowhere`, which is not a dataset"), "{e}");
    let e = bad(DatasetDef::new("x", &["id"])
        .field("id", FieldType::Int)
        .field("p", FieldType::String)
        .references(&["p"], "customer", FkAction::Restrict));
    assert!(e.contains("declare them alike"), "{e}");
    let e = bad(DatasetDef::new("x", &["id"])
        .field("id", FieldType::Int)
        .field("p", FieldType::Int)
        .field("q", FieldType::Int)
        .references(&["p", "q"], "customer", FkAction::Restrict));
    assert!(e.contains("has 1 (c_id)"), "{e}");
    let e = bad(DatasetDef::new("x", &["id"])
        .field("id", FieldType::Int)
        .references(&["p"], "customer", FkAction::Restrict));
    assert!(e.contains("not a declared field"), "{e}");
    assert!(db.dataset("x").is_err());

    let e = db.drop_dataset("customer").unwrap_err();
    assert!(matches!(e, Error::Referenced { .. }), "{e}");
    assert!(
        e.to_string()
            .contains("foreign key `orders_o_c_id_fkey` of `orders`")
    );
    assert!(matches!(
        db.truncate_dataset("orders").unwrap_err(),
        Error::Referenced { .. }
    ));
    assert!(matches!(
        db.set_ttl("customer", Some(silt::TtlDef::after("c_id", 10)))
            .unwrap_err(),
        Error::Referenced { .. }
    ));
    let e = db
        .drop_index("orders", "orders_o_c_id_fkey_idx")
        .unwrap_err();
    assert!(e.to_string().contains("drop the foreign key first"), "{e}");
    // A child can be emptied and dropped; then its parent can go.
    db.truncate_dataset("order_line").unwrap();
    db.dataset("order_line")
        .unwrap()
        .insert(line(1, 1))
        .unwrap_err();
    db.drop_dataset("order_line").unwrap();
    db.drop_dataset("orders").unwrap();
    db.drop_dataset("customer").unwrap();
}

#[test]
fn adding_a_key_checks_every_record() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    schema(&db);
    let c = db.dataset("customer").unwrap();
    let notes = db
        .create_dataset(
            DatasetDef::new("notes", &["id"])
                .field("id", FieldType::Int)
                .field("cust", FieldType::Int),
        )
        .unwrap();
    c.insert(customer(1)).unwrap();
    let note = |id: i64, cust: i64| {
        Value::Object(vec![
            ("id".into(), Value::Int(id)),
            ("cust".into(), Value::Int(cust)),
        ])
    };
    notes.insert(note(1, 1)).unwrap();
    notes.insert(note(2, 5)).unwrap();
    let fk = ForeignKeyDef {
        name: "notes_cust_fkey".into(),
        fields: vec!["cust".into()],
        parent: "customer".into(),
        on_delete: FkAction::Cascade,
    };
    let e = db.add_foreign_key("notes", fk.clone()).unwrap_err();
    assert!(matches!(e, Error::ForeignKeyMissing { .. }), "{e}");
    assert!(notes.def().foreign_keys.is_empty());
    // Nothing was left behind: the orphan's parent can be deleted freely
    // and the note with no parent written.
    notes.insert(note(3, 77)).unwrap();
    assert!(notes.delete(&[Value::Int(2)]).unwrap());
    assert!(notes.delete(&[Value::Int(3)]).unwrap());
    db.add_foreign_key("notes", fk).unwrap();
    assert!(matches!(
        notes.insert(note(4, 5)).unwrap_err(),
        Error::ForeignKeyMissing { .. }
    ));
    // Survives a restart.
    drop((c, notes));
    db.close().unwrap();
    drop(db);
    let db = open(dir.path());
    let notes = db.dataset("notes").unwrap();
    assert!(matches!(
        notes.insert(note(4, 5)).unwrap_err(),
        Error::ForeignKeyMissing { .. }
    ));
    let orders = db.dataset("orders").unwrap();
    orders.insert(order(1, Some(1))).unwrap();
    assert!(
        db.dataset("customer")
            .unwrap()
            .delete(&[Value::Int(1)])
            .is_err()
    );
    assert!(orders.delete(&[Value::Int(1)]).unwrap());
    db.drop_foreign_key("notes", "notes_cust_fkey").unwrap();
    notes.insert(note(4, 5)).unwrap();
    // The cascade from customer to notes went with the key.
    assert!(
        db.dataset("customer")
            .unwrap()
            .delete(&[Value::Int(1)])
            .unwrap()
    );
    assert_eq!(count(&db, "notes"), 2);
}

/// Writers add orders for random customers while others delete random
/// customers: when they stop, every order names a customer that exists.
#[test]
fn concurrent_writers_never_leave_an_orphan() {
    let dir = tempfile::tempdir().unwrap();
    let db = Arc::new(open(dir.path()));
    schema(&db);
    let c = db.dataset("customer").unwrap();
    for i in 0..20 {
        c.insert(customer(i)).unwrap();
    }
    let mut threads = Vec::new();
    for t in 0..4i64 {
        let db = db.clone();
        threads.push(std::thread::spawn(move || {
            let (c, o, l) = (
                db.dataset("customer").unwrap(),
                db.dataset("orders").unwrap(),
                db.dataset("order_line").unwrap(),
            );
            let mut x = 0x9e37_79b9_7f4a_7c15u64 ^ (t as u64);
            for n in 0..300i64 {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let k = (x % 20) as i64;
                let id = t * 1_000_000 + n;
                match t {
                    // Delete a customer's orders (cascading to lines), then
                    // the customer, then put it back.
                    0 => {
                        let mut tx = db.begin().unwrap();
                        let _ = tx.delete(&c, &[Value::Int(k)]);
                        let _ = tx.commit();
                        let _ = c.insert(customer(k));
                    }
                    1 => {
                        let _ = o.insert(order(id, Some(k)));
                        let _ = l.insert(line(id, id));
                    }
                    2 => {
                        let _ = o.insert(order(id, Some(k)));
                        let _ = o.delete(&[Value::Int(id - 1)]);
                    }
                    _ => {
                        let _ = c.delete(&[Value::Int(k)]);
                        let _ = c.insert(customer(k));
                    }
                }
            }
        }));
    }
    for t in threads {
        t.join().unwrap();
    }
    let cust: std::collections::HashSet<i64> = records(&db, "customer")
        .iter()
        .map(|r| int(r, "c_id"))
        .collect();
    let orders = records(&db, "orders");
    let ids: std::collections::HashSet<i64> = orders.iter().map(|r| int(r, "o_id")).collect();
    for r in &orders {
        assert!(cust.contains(&int(r, "o_c_id")), "orphan order {r:?}");
    }
    for r in records(&db, "order_line") {
        assert!(ids.contains(&int(&r, "ol_o_id")), "orphan line {r:?}");
    }
}

fn records(db: &Database, name: &str) -> Vec<Value> {
    db.dataset(name)
        .unwrap()
        .scan(std::ops::Bound::Unbounded, std::ops::Bound::Unbounded)
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

fn int(r: &Value, f: &str) -> i64 {
    match r.get(f) {
        Some(Value::Int(i)) => *i,
        other => panic!("{f}: {other:?}"),
    }
}

/// The model: three maps and the rules.
#[derive(Default, Clone, Debug)]
struct Model {
    customer: BTreeMap<i64, ()>,
    orders: BTreeMap<i64, Option<i64>>,
    lines: BTreeMap<i64, i64>,
}

#[derive(Clone, Debug)]
enum Op {
    PutCustomer(i64),
    DelCustomer(i64),
    PutOrder(i64, Option<i64>),
    UpsertOrder(i64, Option<i64>),
    DelOrder(i64),
    PutLine(i64, i64),
    DelLine(i64),
    /// A transaction of several ops, all or nothing.
    Txn(Vec<Op>),
    Restart,
}

impl Model {
    /// Apply `op`; `false` when the engine must refuse it (nothing changes).
    fn apply(&mut self, op: &Op) -> bool {
        let mut next = self.clone();
        let ok = next.step(op) && next.consistent();
        if ok {
            *self = next;
        }
        ok
    }

    fn step(&mut self, op: &Op) -> bool {
        match op {
            Op::PutCustomer(c) => self.customer.insert(*c, ()).is_none(),
            Op::DelCustomer(c) => {
                self.customer.remove(c);
                true
            }
            Op::PutOrder(o, c) => {
                !self.orders.contains_key(o) && {
                    self.orders.insert(*o, *c);
                    true
                }
            }
            Op::UpsertOrder(o, c) => {
                self.orders.insert(*o, *c);
                true
            }
            Op::DelOrder(o) => {
                if self.orders.remove(o).is_some() {
                    self.lines.retain(|_, lo| lo != o);
                }
                true
            }
            Op::PutLine(l, o) => {
                !self.lines.contains_key(l) && {
                    self.lines.insert(*l, *o);
                    true
                }
            }
            Op::DelLine(l) => {
                self.lines.remove(l);
                true
            }
            Op::Txn(ops) => ops.iter().all(|op| self.step(op)),
            Op::Restart => true,
        }
    }

    fn consistent(&self) -> bool {
        self.orders
            .values()
            .all(|c| c.is_none_or(|c| self.customer.contains_key(&c)))
            && self.lines.values().all(|o| self.orders.contains_key(o))
    }
}

fn op_strategy() -> impl Strategy<Value = Op> {
    let k = 0i64..4;
    let simple = prop_oneof![
        k.clone().prop_map(Op::PutCustomer),
        k.clone().prop_map(Op::DelCustomer),
        (k.clone(), proptest::option::weighted(0.85, k.clone()))
            .prop_map(|(o, c)| Op::PutOrder(o, c)),
        (k.clone(), proptest::option::weighted(0.85, k.clone()))
            .prop_map(|(o, c)| Op::UpsertOrder(o, c)),
        k.clone().prop_map(Op::DelOrder),
        (k.clone(), k.clone()).prop_map(|(l, o)| Op::PutLine(l, o)),
        k.clone().prop_map(Op::DelLine),
    ];
    prop_oneof![
        6 => simple.clone(),
        3 => proptest::collection::vec(simple, 1..5).prop_map(Op::Txn),
        1 => Just(Op::Restart),
    ]
}

/// One op on the engine: `true` when it was applied.
fn run(db: &Database, op: &Op) -> bool {
    let (c, o, l) = (
        db.dataset("customer").unwrap(),
        db.dataset("orders").unwrap(),
        db.dataset("order_line").unwrap(),
    );
    let fk = |r: silt::Result<()>| match r {
        Ok(()) => true,
        Err(Error::ForeignKeyMissing { .. } | Error::ForeignKeyReferenced { .. }) => false,
        Err(Error::DuplicateKey { .. }) => false,
        Err(e) => panic!("{op:?}: {e}"),
    };
    match op {
        Op::PutCustomer(k) => fk(c.insert(customer(*k))),
        Op::DelCustomer(k) => fk(c.delete(&[Value::Int(*k)]).map(drop)),
        Op::PutOrder(k, p) => fk(o.insert(order(*k, *p))),
        Op::UpsertOrder(k, p) => fk(o.upsert(order(*k, *p))),
        Op::DelOrder(k) => fk(o.delete(&[Value::Int(*k)]).map(drop)),
        Op::PutLine(k, p) => fk(l.insert(line(*k, *p))),
        Op::DelLine(k) => fk(l.delete(&[Value::Int(*k)]).map(drop)),
        Op::Txn(ops) => {
            let mut tx = db.begin().unwrap();
            for op in ops {
                let r = match op {
                    Op::PutCustomer(k) => tx.insert(&c, customer(*k)),
                    Op::DelCustomer(k) => tx.delete(&c, &[Value::Int(*k)]).map(drop),
                    Op::PutOrder(k, p) => tx.insert(&o, order(*k, *p)),
                    Op::UpsertOrder(k, p) => tx.upsert(&o, order(*k, *p)),
                    Op::DelOrder(k) => tx.delete(&o, &[Value::Int(*k)]).map(drop),
                    Op::PutLine(k, p) => tx.insert(&l, line(*k, *p)),
                    Op::DelLine(k) => tx.delete(&l, &[Value::Int(*k)]).map(drop),
                    _ => Ok(()),
                };
                if !fk(r) {
                    return false;
                }
            }
            fk(tx.commit().map(drop))
        }
        Op::Restart => true,
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, ..ProptestConfig::default() })]

    /// Random writes and transactions on customer <- orders <- order_line
    /// (RESTRICT, then CASCADE) against the model: the engine refuses
    /// exactly what would break a key, cascades as the model does, and
    /// after every step (and every restart) holds exactly the model.
    #[test]
    fn foreign_keys_match_the_model(ops in proptest::collection::vec(op_strategy(), 1..40)) {
        let dir = tempfile::tempdir().unwrap();
        let mut db = open(dir.path());
        schema(&db);
        let mut model = Model::default();
        for op in &ops {
            if let Op::Restart = op {
                db.close().unwrap();
                drop(db);
                db = open(dir.path());
                continue;
            }
            let want = model.apply(op);
            let got = run(&db, op);
            prop_assert_eq!(got, want, "{:?}", op);
            let cust: Vec<i64> = records(&db, "customer").iter().map(|r| int(r, "c_id")).collect();
            prop_assert_eq!(cust, model.customer.keys().copied().collect::<Vec<_>>());
            let orders: Vec<(i64, Option<i64>)> = records(&db, "orders")
                .iter()
                .map(|r| (int(r, "o_id"), match r.get("o_c_id") { Some(Value::Int(c)) => Some(*c), _ => None }))
                .collect();
            let mut orders = orders;
            orders.sort();
            prop_assert_eq!(orders, model.orders.iter().map(|(k, v)| (*k, *v)).collect::<Vec<_>>());
            let lines: Vec<(i64, i64)> = records(&db, "order_line").iter().map(|r| (int(r, "ol_id"), int(r, "ol_o_id"))).collect();
            prop_assert_eq!(lines, model.lines.iter().map(|(k, v)| (*k, *v)).collect::<Vec<_>>());
        }
    }
}

/// A ttl and foreign keys: a child's expired records are swept like any
/// (deleting a child needs no check), a parent may not have a ttl (its
/// expiry would leave children dangling), and no materialized view reads
/// a dataset with a ttl (an expired record leaves reads at once, its view
/// row would not), whichever comes first.
#[test]
fn a_ttl_goes_where_nothing_can_dangle() {
    use silt::{MaterializedDef, TtlDef, ViewColumn};
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    let ttl = || TtlDef {
        time: Some("t".into()),
        ..TtlDef::at("exp")
    };
    db.create_dataset(
        DatasetDef::new("device", &["d_id"])
            .field("d_id", FieldType::Int)
            .memory_budget(1 << 20),
    )
    .unwrap();
    let mut reading = DatasetDef::new("reading", &["r_id"])
        .field("r_id", FieldType::Int)
        .field("r_d_id", FieldType::Int)
        .field("t", FieldType::Int)
        .field("exp", FieldType::Int)
        .references(&["r_d_id"], "device", FkAction::Cascade)
        .memory_budget(1 << 20);
    reading.ttl = Some(ttl());
    db.create_dataset(reading).unwrap();
    let (devices, readings) = (
        db.dataset("device").unwrap(),
        db.dataset("reading").unwrap(),
    );
    let rec = |id: i64, d: i64, t: i64, exp: i64| {
        Value::Object(vec![
            ("r_id".into(), Value::Int(id)),
            ("r_d_id".into(), Value::Int(d)),
            ("t".into(), Value::Int(t)),
            ("exp".into(), Value::Int(exp)),
        ])
    };
    devices
        .insert(Value::Object(vec![("d_id".into(), Value::Int(1))]))
        .unwrap();
    for id in 0..4 {
        readings.insert(rec(id, 1, 0, 10 + id * 100)).unwrap();
    }
    // An orphan is refused on a dataset with a ttl too.
    assert!(matches!(
        readings.insert(rec(9, 7, 0, 10)),
        Err(Error::ForeignKeyMissing { .. })
    ));
    readings.insert(rec(5, 1, 250, 5000)).unwrap();
    assert_eq!(count(&db, "reading"), 2, "readings 0..=2 expired at 250");
    assert_eq!(db.sweep_expired("reading").unwrap().expired, 3);
    assert_eq!(count(&db, "reading"), 2);
    // The device cascades to what is left.
    devices.delete(&[Value::Int(1)]).unwrap();
    assert_eq!(count(&db, "reading"), 0);
    // A parent with a ttl, a view of a dataset with one: refused.
    let err = db
        .set_ttl("device", Some(TtlDef::after("d_id", 100)))
        .unwrap_err();
    assert!(err.to_string().contains("reading_r_d_id_fkey"), "{err}");
    let fk = readings.def().foreign_keys[0].name.clone();
    let col = |relation: &str, field: &str| ViewColumn {
        relation: relation.into(),
        field: field.into(),
        name: field.into(),
    };
    let view = || MaterializedDef {
        relations: vec!["device".into(), "reading".into()],
        keys: vec![fk.clone()],
        columns: vec![col("device", "d_id"), col("reading", "r_id")],
    };
    let Err(err) = db.create_materialized_view("dr", view()) else {
        panic!("a view of a dataset with a ttl was made");
    };
    assert!(err.to_string().contains("`reading` has a ttl"), "{err}");
    db.set_ttl("reading", None).unwrap();
    db.create_materialized_view("dr", view()).unwrap();
    let err = db.set_ttl("reading", Some(ttl())).unwrap_err();
    assert!(err.to_string().contains("materialized view `dr`"), "{err}");
    db.close().unwrap();
}
