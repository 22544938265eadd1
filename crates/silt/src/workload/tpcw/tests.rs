use super::*;
use crate::value::temporal;
use crate::workload::SplitMix64;
use std::collections::{BTreeMap, HashMap, HashSet};

fn key(def: &DatasetDef, record: &Value) -> i64 {
    record
        .get(&def.primary_key[0])
        .and_then(Value::as_i64)
        .unwrap()
}

#[test]
fn the_schema_validates_and_parents_come_first() {
    let defs = schema();
    let names: Vec<&str> = defs.iter().map(|d| d.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "country",
            "author",
            "address",
            "customer",
            "item",
            "orders",
            "order_line",
            "cc_xacts",
            "shopping_cart",
            "shopping_cart_line"
        ]
    );
    let mut fks = 0;
    for (i, d) in defs.iter().enumerate() {
        d.validate().unwrap();
        assert_eq!((d.partitions, d.memory_budget), (1, 8 << 20));
        assert_eq!(d.primary_key.len(), 1);
        assert_eq!(d.field_type(&d.primary_key[0]), Some(FieldType::Int));
        assert!(
            d.fields.iter().all(|(_, t)| *t != FieldType::Any),
            "{}",
            d.name
        );
        for fk in &d.foreign_keys {
            fks += 1;
            let parent = defs[..i].iter().find(|p| p.name == fk.parent);
            let parent = parent.unwrap_or_else(|| panic!("{} before {}", fk.parent, d.name));
            assert_eq!(fk.fields.len(), parent.primary_key.len());
            assert_eq!(d.field_type(&fk.fields[0]), Some(FieldType::Int));
            let cascade = matches!(
                (d.name.as_str(), fk.parent.as_str()),
                ("order_line" | "cc_xacts", "orders") | ("shopping_cart_line", "shopping_cart")
            );
            let want = if cascade {
                FkAction::Cascade
            } else {
                FkAction::Restrict
            };
            assert_eq!(fk.on_delete, want, "{}", fk.name);
        }
    }
    assert_eq!(fks, 12);
    let by_name: HashMap<&str, &DatasetDef> = defs.iter().map(|d| (d.name.as_str(), d)).collect();
    assert_eq!(by_name["customer"].fields.len(), 17);
    assert_eq!(by_name["item"].fields.len(), 22);
    assert_eq!(by_name["cc_xacts"].primary_key, ["cx_o_id"]);
    assert_eq!(
        by_name["orders"].field_type("o_date"),
        Some(FieldType::Timestamp)
    );
    assert_eq!(by_name["item"].field_type("i_srp"), Some(FieldType::Double));
}

#[test]
fn the_clock_and_the_fixed_lists_are_as_documented() {
    assert_eq!(temporal::format_date(LOAD_DAY).unwrap(), "2025-01-01");
    assert_eq!(temporal::format_date(-14_610).unwrap(), "1930-01-01");
    assert_eq!(COUNTRIES.split(';').count(), 92);
    assert_eq!(country(1), ("United States", "Dollars", 1.0));
    assert_eq!(country(92).0, "Zambia");
    assert!((1..=92).all(|i| !country(i).0.is_empty() && country(i).2 > 0.0));
    assert_eq!(country(93).0, "");
    assert_eq!(user_name(1), "OG");
    assert_eq!(user_name(30), "RIBA");
    let s = Scale::new(100);
    assert_eq!(
        (
            s.items(),
            s.authors(),
            s.addresses(),
            s.orders(),
            s.order_lines()
        ),
        (1_000, 250, 200, 1_000, 3_000)
    );
    assert_eq!(Scale::new(0).customers(), 1);
    assert_eq!(s.with_carts(7).shopping_carts(), 10);
    assert_eq!(s.count("shopping_cart_line"), 0);
}

/// Every record at a tiny scale: keys unique, every foreign key naming a
/// record produced before it, exactly the declared fields, counts as the
/// scale says, field values in their ranges.
#[test]
fn records_reference_only_earlier_records_and_match_the_scale() {
    let scale = Scale::new(20).with_carts(10);
    let defs = schema();
    let by_name: HashMap<&str, &DatasetDef> = defs.iter().map(|d| (d.name.as_str(), d)).collect();
    let mut keys: HashMap<&str, HashSet<i64>> = HashMap::new();
    let mut lines_per_order: BTreeMap<i64, u64> = BTreeMap::new();
    let mut last_table = 0;
    for (table, record) in records(&scale, 11) {
        let def = by_name[table];
        // Table by table, in creation order.
        let pos = defs.iter().position(|d| d.name == table).unwrap();
        assert!(pos >= last_table, "{table} after a later table");
        last_table = pos;
        let Value::Object(fields) = &record else {
            panic!("{record:?}")
        };
        let got: Vec<&str> = fields.iter().map(|(k, _)| k.as_str()).collect();
        let want: Vec<&str> = def.fields.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(got, want, "{table}");
        for fk in &def.foreign_keys {
            let v = record.get(&fk.fields[0]).and_then(Value::as_i64).unwrap();
            assert!(
                keys.get(fk.parent.as_str()).is_some_and(|k| k.contains(&v)),
                "{table}.{} = {v}: no such {}",
                fk.fields[0],
                fk.parent
            );
        }
        for f in ["i_related1", "i_related5"] {
            if let Some(v) = record.get(f).and_then(Value::as_i64) {
                assert!((1..=scale.items() as i64).contains(&v));
            }
        }
        if table == "order_line" {
            let o = record.get("ol_o_id").and_then(Value::as_i64).unwrap();
            *lines_per_order.entry(o).or_default() += 1;
        }
        if table == "customer" {
            let id = key(def, &record) as u64;
            assert_eq!(record.get("c_uname"), Some(&Value::String(user_name(id))));
            let fname = record.get("c_fname").and_then(Value::as_str).unwrap();
            assert!((8..=15).contains(&fname.len()), "{fname}");
        }
        if table == "address" {
            let street = record.get("addr_street1").and_then(Value::as_str).unwrap();
            assert!((15..=40).contains(&street.len()), "{street}");
        }
        let id = key(def, &record);
        assert!(
            keys.entry(table).or_default().insert(id),
            "{table} {id} twice"
        );
    }
    for d in &defs {
        let n = keys.get(d.name.as_str()).map_or(0, HashSet::len) as u64;
        assert_eq!(n, scale.count(&d.name), "{}", d.name);
        // Keys count from 1 without gaps.
        assert!(
            keys.get(d.name.as_str())
                .is_none_or(|k| k.iter().all(|&i| i >= 1 && i as u64 <= n))
        );
    }
    assert_eq!(lines_per_order.len() as u64, scale.orders());
    assert!(lines_per_order.values().all(|n| (1..=5).contains(n)));
    for n in 1..=5 {
        // Each count is taken by a fifth of the orders.
        assert_eq!(lines_per_order.values().filter(|&&c| c == n).count(), 40);
    }
}

#[test]
fn card_transactions_repeat_their_orders() {
    let scale = Scale::new(3);
    let mut totals = HashMap::new();
    let mut names = HashMap::new();
    for (table, r) in records(&scale, 5) {
        let f = |n: &str| r.get(n).cloned().unwrap();
        match table {
            "customer" => {
                let name = format!(
                    "{} {}",
                    f("c_fname").as_str().unwrap(),
                    f("c_lname").as_str().unwrap()
                );
                names.insert(f("c_id"), name);
            }
            "orders" => {
                totals.insert(f("o_id"), (f("o_total"), f("o_date"), f("o_c_id")));
            }
            "cc_xacts" => {
                let (total, date, c) = &totals[&f("cx_o_id")];
                assert_eq!((&f("cx_xact_amt"), &f("cx_xact_date")), (total, date));
                assert_eq!(f("cx_name").as_str(), Some(names[c].as_str()));
            }
            _ => {}
        }
    }
    assert_eq!(totals.len(), 30);
}

#[test]
fn generation_is_deterministic_for_a_seed() {
    let scale = Scale::new(4).with_carts(5);
    let a: Vec<_> = records(&scale, 42).collect();
    let b: Vec<_> = records(&scale, 42).collect();
    assert_eq!(a, b);
    let c: Vec<_> = records(&scale, 43).collect();
    assert_eq!(a.len(), c.len());
    assert_ne!(a, c);
    let stmts = statements();
    let draw = |seed| {
        let mut r = SplitMix64::new(seed);
        stmts
            .iter()
            .map(|s| s.params(&scale, &mut r))
            .collect::<Vec<_>>()
    };
    assert_eq!(draw(1), draw(1));
}

#[test]
fn every_statement_gets_one_value_per_placeholder() {
    let scale = Scale::new(1_000);
    let mut r = SplitMix64::new(9);
    let stmts = statements();
    for s in &stmts {
        let n = s.placeholders();
        // $1..$n all appear.
        for k in 1..=n {
            let p = format!("${k}");
            let named = s
                .sql
                .match_indices(&p)
                .any(|(i, _)| !s.sql[i + p.len()..].starts_with(|c: char| c.is_ascii_digit()));
            assert!(named, "{}: {p}", s.name);
        }
        assert_eq!(s.params.len(), n, "{}", s.name);
        for _ in 0..20 {
            let v = s.params(&scale, &mut r);
            assert_eq!(v.len(), n, "{}", s.name);
            assert!(v.iter().all(|v| !v.is_null()), "{}: {v:?}", s.name);
            for (p, v) in s.params.iter().zip(&v) {
                match (p, v) {
                    (Param::Key(t), Value::Int(k)) => {
                        assert!((1..=scale.count(t).max(1) as i64).contains(k));
                    }
                    (Param::NewKey(t), Value::Int(k)) => assert!(*k > scale.count(t) as i64),
                    (Param::UserName, Value::String(u)) => assert!(u.len() >= 2),
                    (Param::Subject, Value::String(u)) => assert!(SUBJECTS.contains(&u.as_str())),
                    (Param::Day(..), Value::String(d)) => {
                        temporal::parse_date(d).unwrap();
                    }
                    (Param::Time(..), Value::String(t)) => {
                        temporal::parse_timestamp(t, false).unwrap();
                    }
                    _ => {}
                }
            }
        }
        let reads = s.sql.starts_with("SELECT");
        assert_eq!(s.kind == Kind::Read, reads, "{}", s.name);
    }
    let names: HashSet<&str> = stmts.iter().map(|s| s.name).collect();
    assert_eq!(names.len(), stmts.len());
    let reads = stmts.iter().filter(|s| s.kind == Kind::Read).count();
    assert_eq!((reads, stmts.len() - reads), (31, 14));
    // The paper's 11 joins and 13 writes, each once.
    let mut paper: Vec<&str> = stmts.iter().filter_map(|s| s.paper).collect();
    paper.sort_by_key(|p| (p.as_bytes()[0], p[1..].parse::<u32>().unwrap()));
    let want: Vec<String> = (1..=11)
        .map(|i| format!("Q{i}"))
        .chain((1..=13).map(|i| format!("W{i}")))
        .collect();
    assert_eq!(paper, want);
    // What the paper leaves out is left out.
    for s in &stmts {
        assert!(!s.sql.to_lowercase().contains("soundex"));
        let clears_cart = s.sql.starts_with("DELETE") && !s.sql.contains("scl_i_id");
        assert!(!clears_cart, "{}", s.name);
    }
}

fn joins_of(name: &str) -> Vec<(&'static str, &'static str, &'static str, &'static str)> {
    let s = statements().into_iter().find(|s| s.name == name).unwrap();
    s.joins()
}

#[test]
fn joins_are_read_from_the_sql() {
    assert_eq!(
        joins_of("getMostRecentOrder.id"),
        [("customer", "c_id", "orders", "o_c_id")]
    );
    assert_eq!(
        joins_of("getMostRecentOrder.lines"),
        [("order_line", "ol_i_id", "item", "i_id")]
    );
    assert_eq!(
        joins_of("getMostRecentOrder.order"),
        [
            ("orders", "o_c_id", "customer", "c_id"),
            ("cc_xacts", "cx_o_id", "orders", "o_id"),
            ("orders", "o_bill_addr_id", "address", "addr_id"),
            ("address", "addr_co_id", "country", "co_id"),
            ("orders", "o_ship_addr_id", "address", "addr_id"),
            ("address", "addr_co_id", "country", "co_id"),
        ]
    );
    // A derived table of the newest orders stands for orders.
    assert_eq!(
        joins_of("getBestSellers"),
        [
            ("order_line", "ol_o_id", "orders", "o_id"),
            ("order_line", "ol_i_id", "item", "i_id"),
            ("item", "i_a_id", "author", "a_id"),
        ]
    );
    assert_eq!(
        joins_of("adminUpdate.related"),
        [
            ("order_line", "ol_o_id", "orders", "o_id"),
            ("order_line", "ol_o_id", "order_line", "ol_o_id"),
        ]
    );
    let related = joins_of("getRelated");
    assert_eq!(related.len(), 5);
    assert_eq!(related[4], ("item", "i_id", "item", "i_related5"));
    assert_eq!(
        joins_of("getCustomer"),
        [
            ("customer", "c_addr_id", "address", "addr_id"),
            ("address", "addr_co_id", "country", "co_id"),
        ]
    );
    assert!(joins_of("getName").is_empty());
    assert!(joins_of("enterOrder").is_empty());
    // The paper's 11 join queries are exactly the statements with joins,
    // and every join column is a declared field of its table.
    let defs = schema();
    for s in statements() {
        let joins = s.joins();
        let is_join = s.paper.is_some_and(|p| p.starts_with('Q'));
        assert_eq!(!joins.is_empty(), is_join, "{}", s.name);
        for (l, lc, r, rc) in joins {
            for (t, c) in [(l, lc), (r, rc)] {
                let def = defs.iter().find(|d| d.name == t).unwrap();
                assert!(def.field_type(c).is_some(), "{}: {t}.{c}", s.name);
            }
        }
    }
}

#[test]
fn the_scan_reads_plain_sql() {
    let s = Statement {
        name: "t",
        paper: None,
        sql: "SELECT 'a.b = c.d', x.k FROM t1 x, t2 AS y JOIN (SELECT k FROM t3) z ON z.k = y.k \
              WHERE x.k = y.k AND x.k + 1 = y.k AND x.k = $2 AND $1 <> 0",
        kind: Kind::Read,
        params: vec![],
    };
    assert_eq!(s.joins(), [("t3", "k", "t2", "k"), ("t1", "k", "t2", "k")]);
    assert_eq!(s.placeholders(), 2);
}

/// The tiny data set loads into a real database, every record in the
/// generated order, without one foreign-key error; deleting an order
/// cascades to its lines and card transaction.
#[test]
fn a_tiny_data_set_loads_into_a_database() {
    let dir = tempfile::tempdir().unwrap();
    let db = crate::Database::open(
        dir.path(),
        crate::DbOptions {
            durability: crate::Durability::None,
            sync: false,
            block_cache_bytes: 4 << 20,
            ..Default::default()
        },
    )
    .unwrap();
    let mut datasets = HashMap::new();
    for def in schema() {
        let name = def.name.clone();
        datasets.insert(name, db.create_dataset(def).unwrap());
    }
    let scale = Scale::new(20).with_carts(5);
    let mut n = 0u64;
    for (table, record) in records(&scale, 3) {
        datasets[table]
            .insert(record)
            .unwrap_or_else(|e| panic!("{table}: {e}"));
        n += 1;
    }
    let count = |t: &str| {
        datasets[t]
            .scan(std::ops::Bound::Unbounded, std::ops::Bound::Unbounded)
            .unwrap()
            .count() as u64
    };
    let mut total = 0;
    for def in schema() {
        assert_eq!(count(&def.name), scale.count(&def.name), "{}", def.name);
        total += scale.count(&def.name);
    }
    assert_eq!(n, total);
    // A customer with orders cannot go; an order takes its children along.
    let order = datasets["orders"].get(&[Value::Int(1)]).unwrap().unwrap();
    let customer = order.get("o_c_id").cloned().unwrap();
    assert!(matches!(
        datasets["customer"].delete(&[customer]),
        Err(crate::Error::ForeignKeyReferenced { .. })
    ));
    assert!(datasets["orders"].delete(&[Value::Int(1)]).unwrap());
    assert_eq!(count("cc_xacts"), scale.cc_xacts() - 1);
    assert!(count("order_line") < scale.order_lines());
}

#[test]
fn filters_are_read_from_the_sql() {
    let filters_of = |name: &str| {
        statements()
            .into_iter()
            .find(|s| s.name == name)
            .map(|s| s.filters())
            .unwrap_or_default()
    };
    assert_eq!(filters_of("getName"), [("customer", "c_id")]);
    assert_eq!(filters_of("getCustomer"), [("customer", "c_uname")]);
    assert_eq!(filters_of("doSubjectSearch"), [("item", "i_subject")]);
    // Every parameter of a read is a comparison with a column the SQL
    // names, or a LIMIT; each such column is found.
    for s in statements() {
        for (table, column) in s.filters() {
            let def = schema().into_iter().find(|d| d.name == table);
            assert!(
                def.is_some_and(|d| d.fields.iter().any(|(f, _)| f == column)),
                "{}: {table}.{column}",
                s.name
            );
        }
    }
}
