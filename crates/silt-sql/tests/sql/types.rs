//! Dates, timestamps, numeric and jsonb columns: stored as the core keeps
//! them (ints and text), read back as their Arrow types, kept across a
//! restart, timestamps as keys read in time order and by range (checked
//! against a model), and bad values refused with nothing written.

use std::collections::BTreeMap;
use std::sync::Arc;

use datafusion::arrow::array::{Array, AsArray};
use datafusion::arrow::datatypes::{
    DataType, Date32Type, Decimal128Type, TimeUnit, TimestampMicrosecondType,
};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use silt::value::temporal;
use silt::{FieldType, Value};
use silt_sql::SqlEngine;

use crate::common::*;

const EV: &str = "CREATE TABLE ev (ts TIMESTAMPTZ PRIMARY KEY, day DATE, local TIMESTAMP, \
                  price NUMERIC(10,2), doc JSONB)";

#[test]
fn typed_columns_are_stored_compactly_and_read_as_arrow_types() {
    let (d, e) = engine();
    run(&e, EV);
    run(
        &e,
        "INSERT INTO ev VALUES ('2024-03-01 12:30:00.5+02', '2024-03-01', \
         '2024-03-01T12:30:00', 12.345, '{\"a\": [1, 2], \"b\": null}')",
    );
    let check = |e: &SqlEngine| {
        let b = run(e, "SELECT ts, day, local, price, doc FROM ev");
        let s = b[0].schema();
        assert_eq!(
            s.field(0).data_type(),
            &DataType::Timestamp(TimeUnit::Microsecond, Some("+00:00".into()))
        );
        assert_eq!(s.field(1).data_type(), &DataType::Date32);
        assert_eq!(
            s.field(2).data_type(),
            &DataType::Timestamp(TimeUnit::Microsecond, None)
        );
        assert_eq!(s.field(3).data_type(), &DataType::Decimal128(10, 2));
        assert_eq!(
            s.field(4)
                .metadata()
                .get("silt.pg_type")
                .map(String::as_str),
            Some("jsonb")
        );
        let r = &b[0];
        // 2024-03-01 10:30:00.5 UTC.
        assert_eq!(
            r.column(0)
                .as_primitive::<TimestampMicrosecondType>()
                .value(0),
            1_709_289_000_500_000
        );
        assert_eq!(r.column(1).as_primitive::<Date32Type>().value(0), 19_783);
        assert_eq!(
            r.column(2)
                .as_primitive::<TimestampMicrosecondType>()
                .value(0),
            1_709_296_200_000_000
        );
        // 12.345 rounds half away from zero.
        assert_eq!(r.column(3).as_primitive::<Decimal128Type>().value(0), 1235);
        assert_eq!(
            r.column(4).as_string::<i32>().value(0),
            r#"{"a":[1,2],"b":null}"#
        );
    };
    check(&e);
    // The document: ints for times, the decimal's text, the JSON as a value.
    let ds = e.database().dataset("ev").expect("ev");
    let rec = ds
        .get(&[Value::Int(1_709_289_000_500_000)])
        .expect("get")
        .expect("found");
    assert_eq!(rec.get("day"), Some(&Value::Int(19_783)));
    assert_eq!(rec.get("price"), Some(&Value::String("12.35".into())));
    assert_eq!(
        rec.get("doc").and_then(|d| d.get("a")),
        Some(&Value::Array(vec![Value::Int(1), Value::Int(2)]))
    );
    assert_eq!(
        ds.def().field_type("price"),
        Some(FieldType::Decimal {
            precision: 10,
            scale: 2
        })
    );
    // Written through the core API, the same text forms are accepted.
    ds.insert(Value::Object(vec![
        ("ts".into(), Value::String("2024-03-02T00:00:00Z".into())),
        ("day".into(), Value::String("2024-03-02".into())),
        ("price".into(), Value::Double(0.5)),
    ]))
    .expect("core insert");
    let b = run(&e, "SELECT price FROM ev WHERE day = DATE '2024-03-02'");
    assert_eq!(b[0].column(0).as_primitive::<Decimal128Type>().value(0), 50);
    run(&e, "DELETE FROM ev WHERE day = DATE '2024-03-02'");
    drop(ds);
    // Kept across a restart: the declared types are in the catalog.
    let e = SqlEngine::new(Arc::new(reopen(e, d.path()))).expect("engine");
    check(&e);
}

#[test]
fn timestamp_keys_read_in_time_order_and_by_range() {
    let (_d, e) = engine();
    run(
        &e,
        "CREATE TABLE m (ts TIMESTAMP PRIMARY KEY, v BIGINT) WITH (partitions = 2)",
    );
    let ds = e.database().dataset("m").expect("m");
    let mut rng = StdRng::seed_from_u64(11);
    let mut model: BTreeMap<i64, i64> = BTreeMap::new();
    // Microseconds around the epoch (negatives sort before positives).
    let span = 400_000_000_000i64;
    for round in 0..3 {
        let mut values = Vec::new();
        for i in 0..300 {
            let m = rng.random_range(-span..span);
            let text = temporal::format_timestamp(m, false).expect("in range");
            values.push(format!("('{text}', {})", round * 1000 + i));
            model.insert(m, round * 1000 + i);
        }
        run(
            &e,
            &format!("INSERT OR REPLACE INTO m VALUES {}", values.join(", ")),
        );
        ds.flush().expect("flush");
    }
    let all = run(&e, "SELECT ts FROM m ORDER BY ts");
    assert_eq!(micros(&all), model.keys().copied().collect::<Vec<_>>());
    let plan = explain(&e, "SELECT ts, v FROM m ORDER BY ts DESC LIMIT 7");
    assert!(!plan.contains("SortExec"), "{plan}");
    let last = run(&e, "SELECT ts, v FROM m ORDER BY ts DESC LIMIT 7");
    let want: Vec<i64> = model.keys().rev().take(7).copied().collect();
    assert_eq!(micros(&last), want);
    for _ in 0..20 {
        let a = rng.random_range(-span..span);
        let b = a + rng.random_range(0..span / 4);
        let (ta, tb) = (
            temporal::format_timestamp(a, false).expect("a"),
            temporal::format_timestamp(b, false).expect("b"),
        );
        let sql = format!("SELECT ts, v FROM m WHERE ts >= '{ta}' AND ts < '{tb}' ORDER BY ts");
        let got = run(&e, &sql);
        let want: Vec<i64> = model.range(a..b).map(|(k, _)| *k).collect();
        assert_eq!(micros(&got), want, "{sql}");
        let vals: Vec<i64> = got.iter().flat_map(|b| ints_at(b, 1)).collect();
        let want_v: Vec<i64> = model.range(a..b).map(|(_, v)| *v).collect();
        assert_eq!(vals, want_v);
    }
}

fn micros(b: &[datafusion::arrow::array::RecordBatch]) -> Vec<i64> {
    b.iter()
        .flat_map(|b| {
            let c = b.column(0).as_primitive::<TimestampMicrosecondType>();
            (0..c.len()).map(|i| c.value(i)).collect::<Vec<_>>()
        })
        .collect()
}

fn ints_at(b: &datafusion::arrow::array::RecordBatch, col: usize) -> Vec<i64> {
    ints(std::slice::from_ref(b), col)
}

#[test]
fn jsonb_operators_and_functions() {
    let (_d, e) = engine();
    run(&e, "CREATE TABLE j (id BIGINT PRIMARY KEY, doc JSONB)");
    run(
        &e,
        r#"INSERT INTO j VALUES (1, '{"u": {"name": "ann"}, "tags": ["x", "y"], "n": 3}'),
                                (2, '{"u": {"name": "bob"}, "tags": ["y"], "n": null}'),
                                (3, '[1, "two", {"three": 3}]')"#,
    );
    let text = |sql: &str| strings(&run(&e, sql), 0);
    let s = |v: &str| Some(v.to_owned());
    assert_eq!(
        text("SELECT doc->'u'->>'name' FROM j ORDER BY id"),
        vec![s("ann"), s("bob"), None]
    );
    assert_eq!(
        text("SELECT doc #>> '{tags,1}' FROM j ORDER BY id"),
        vec![s("y"), None, None]
    );
    assert_eq!(
        text("SELECT doc->2 FROM j ORDER BY id"),
        vec![None, None, s(r#"{"three":3}"#)]
    );
    assert_eq!(text("SELECT doc->>1 FROM j WHERE id = 3"), vec![s("two")]);
    assert_eq!(
        text("SELECT doc->>'n' FROM j ORDER BY id"),
        vec![s("3"), None, None]
    );
    assert_eq!(
        ints(
            &run(
                &e,
                r#"SELECT id FROM j WHERE doc @> '{"tags": ["y"]}' ORDER BY id"#
            ),
            0
        ),
        vec![1, 2]
    );
    assert_eq!(
        ints(&run(&e, r#"SELECT id FROM j WHERE '{"n": 3}' <@ doc"#), 0),
        vec![1]
    );
    // The operators bind tighter than `=`, `IS` and `AND`, as in PostgreSQL.
    assert_eq!(
        ints(
            &run(
                &e,
                "SELECT id FROM j WHERE doc->>'n' IS NULL AND doc->'u'->>'name' = 'bob'"
            ),
            0
        ),
        vec![2]
    );
    assert_eq!(
        text("SELECT jsonb_typeof(doc) FROM j ORDER BY id"),
        vec![s("object"), s("object"), s("array")]
    );
    assert_eq!(
        text(r#"SELECT CAST('{"k": 1}' AS JSONB) -> 'k'"#),
        vec![s("1")]
    );
    let err = fail(&e, "SELECT '{oops'::jsonb -> 'a'");
    assert!(err.contains("invalid input syntax for type json"), "{err}");
    let err = fail(&e, "SELECT jsonb_array_length(doc) FROM j WHERE id = 1");
    assert!(err.contains("array length of an object"), "{err}");
}

#[test]
fn bad_values_and_declarations_are_refused() {
    let (_d, e) = engine();
    run(&e, EV);
    for (sql, want) in [
        (
            "INSERT INTO ev (ts, price) VALUES ('2024-01-01 00:00:00', 123456789.5)",
            "out of range for type numeric(10,2)",
        ),
        (
            "INSERT INTO ev (ts, price) VALUES ('2024-01-01 00:00:00', 'abc')",
            "invalid input syntax for type numeric(10,2)",
        ),
        (
            "INSERT INTO ev (ts, day) VALUES ('2024-01-01 00:00:00', '2024-02-30')",
            "invalid input syntax for type date",
        ),
        (
            "INSERT INTO ev (ts, doc) VALUES ('2024-01-01 00:00:00', '{not json')",
            "invalid input syntax for type jsonb",
        ),
        (
            "INSERT INTO ev (ts) VALUES ('soon')",
            "invalid input syntax for type timestamp with time zone",
        ),
        (
            "INSERT INTO ev (ts, day) VALUES ('2024-01-01 00:00:00', true)",
            "is of type date but expression is of type boolean",
        ),
    ] {
        let err = fail(&e, sql);
        assert!(err.contains(want), "{sql}\n{err}");
    }
    assert_eq!(count(&run(&e, "SELECT * FROM ev")), 0);
    for (sql, want) in [
        (
            "CREATE TABLE p (k NUMERIC(10,2) PRIMARY KEY)",
            "cannot be a key",
        ),
        (
            "CREATE TABLE p (k BIGINT PRIMARY KEY, n NUMERIC(50,2))",
            "precision 50",
        ),
        (
            "CREATE TABLE p (k BIGINT PRIMARY KEY, n NUMERIC(4,6))",
            "scale 6",
        ),
    ] {
        let err = fail(&e, sql);
        assert!(err.contains(want), "{sql}\n{err}");
    }
}

#[test]
fn interval_columns_store_read_and_compute() {
    use datafusion::arrow::array::{Array, AsArray};
    use datafusion::arrow::datatypes::IntervalMonthDayNanoType;
    let (_d, e) = engine();
    run(
        &e,
        "CREATE TABLE iv (id BIGINT PRIMARY KEY, span INTERVAL, at TIMESTAMP)",
    );
    run(
        &e,
        "INSERT INTO iv VALUES \
         (1, '1 year 2 mons 3 days 04:05:06.5', '2026-01-31 00:00:00'), \
         (2, INTERVAL '90 minutes', '2026-01-01 00:00:00'), \
         (3, 'P1DT2H', '2026-03-01 12:00:00'), \
         (4, NULL, NULL), \
         (5, '-1 day +02:00', '2026-01-01 00:00:00')",
    );
    // Stored as ISO 8601 text, the core's form.
    let ds = e.database().dataset("iv").expect("dataset");
    let rec = ds.get(&[silt::Value::Int(3)]).expect("get").expect("row");
    assert_eq!(rec.get("span"), Some(&silt::Value::String("P1DT2H".into())));
    // Read as Arrow intervals: months, days and nanoseconds apart.
    let b = run(&e, "SELECT span FROM iv ORDER BY id");
    let spans: Vec<Option<(i32, i32, i64)>> = b
        .iter()
        .flat_map(|x| {
            let a = x.column(0).as_primitive::<IntervalMonthDayNanoType>();
            (0..a.len())
                .map(|i| {
                    (!a.is_null(i)).then(|| {
                        let v = a.value(i);
                        (v.months, v.days, v.nanoseconds)
                    })
                })
                .collect::<Vec<_>>()
        })
        .collect();
    assert_eq!(
        spans,
        vec![
            Some((14, 3, 14_706_500_000_000)),
            Some((0, 0, 5_400_000_000_000)),
            Some((0, 1, 7_200_000_000_000)),
            None,
            Some((0, -1, 7_200_000_000_000)),
        ]
    );
    // Arithmetic with timestamps, and comparison with literals.
    let b = run(&e, "SELECT CAST(at + span AS VARCHAR) FROM iv WHERE id = 3");
    assert_eq!(strings(&b, 0), [Some("2026-03-02T14:00:00".to_owned())]);
    let b = run(&e, "SELECT id FROM iv WHERE span = INTERVAL '90 minutes'");
    assert_eq!(ints(&b, 0), [2]);
    // Bad text is refused with the column named, nothing written.
    let err = fail(&e, "INSERT INTO iv VALUES (9, '3 fortnights', NULL)");
    assert!(err.contains("span") && err.contains("interval"), "{err}");
    assert_eq!(count_star(&e, "SELECT count(*) FROM iv"), 5);
    // UPDATE keeps the form, and an interval cannot be a key.
    run(
        &e,
        "UPDATE iv SET span = span + INTERVAL '1 day' WHERE id = 2",
    );
    let rec = ds.get(&[silt::Value::Int(2)]).expect("get").expect("row");
    assert_eq!(
        rec.get("span"),
        Some(&silt::Value::String("P1DT1H30M".into()))
    );
    let err = fail(&e, "CREATE TABLE bad (k INTERVAL PRIMARY KEY)");
    assert!(err.contains("interval"), "{err}");
}

#[test]
fn declared_widths_are_kept_and_enforced() {
    let (_d, e) = engine();
    run(
        &e,
        "CREATE TABLE w (id SERIAL PRIMARY KEY, i INTEGER, s SMALLINT, b BIGINT, \
         v VARCHAR(5), t TEXT, k BIGSERIAL)",
    );
    run(
        &e,
        "ALTER TABLE w ADD COLUMN j INT4, ADD COLUMN u CHARACTER VARYING(3)",
    );
    let b = run(
        &e,
        "SELECT column_name, data_type, character_maximum_length, numeric_precision \
         FROM information_schema.columns WHERE table_name = 'w' ORDER BY ordinal_position",
    );
    let types: Vec<String> = strings(&b, 1).into_iter().flatten().collect();
    assert_eq!(
        types,
        [
            "integer",
            "integer",
            "smallint",
            "bigint",
            "character varying",
            "text",
            "bigint",
            "integer",
            "character varying"
        ]
    );
    let lens: Vec<Option<i64>> = b
        .iter()
        .flat_map(|x| {
            let c = x.column(2);
            (0..c.len()).map(move |r| {
                (!c.is_null(r)).then(|| {
                    c.as_primitive::<datafusion::arrow::datatypes::Int32Type>()
                        .value(r) as i64
                })
            })
        })
        .collect();
    assert_eq!(
        lens,
        [None, None, None, None, Some(5), None, None, None, Some(3)]
    );
    // psql's \d reads format_type of pg_attribute.
    let b = run(
        &e,
        "SELECT format_type(a.atttypid, a.atttypmod) FROM pg_attribute a \
         JOIN pg_class c ON a.attrelid = c.oid WHERE c.relname = 'w' AND a.attnum > 0 \
         ORDER BY a.attnum",
    );
    let shown: Vec<String> = strings(&b, 0).into_iter().flatten().collect();
    assert_eq!(
        shown[..5],
        [
            "integer",
            "integer",
            "smallint",
            "bigint",
            "character varying(5)"
        ]
    );
    // Values within the bounds go in; past them, PostgreSQL's errors, and
    // nothing is written.
    run(
        &e,
        "INSERT INTO w (i, s, b, v, t, j, u) VALUES (2147483647, -32768, 9223372036854775807, 'héllo', 'long text', -2147483648, 'abc')",
    );
    for (sql, want) in [
        (
            "INSERT INTO w (i) VALUES (2147483648)",
            "integer out of range",
        ),
        ("INSERT INTO w (s) VALUES (40000)", "smallint out of range"),
        (
            "INSERT INTO w (j) VALUES (-2147483649)",
            "integer out of range",
        ),
        (
            "INSERT INTO w (v) VALUES ('toolong')",
            "value too long for type character varying(5)",
        ),
        ("UPDATE w SET i = i + 1", "integer out of range"),
        (
            "UPDATE w SET u = u || 'd'",
            "value too long for type character varying(3)",
        ),
    ] {
        let err = fail(&e, sql);
        assert!(err.contains(want), "{sql}: {err}");
    }
    assert_eq!(ints(&run(&e, "SELECT count(*) FROM w"), 0), [1]);
    // A default past the bounds fails the ALTER that adds it, whole.
    let err = fail(&e, "ALTER TABLE w ADD COLUMN d SMALLINT DEFAULT 70000");
    assert!(err.contains("smallint out of range"), "{err}");
    // Renamed and dropped columns take their widths along.
    run(&e, "ALTER TABLE w RENAME COLUMN v TO v2");
    let err = fail(&e, "INSERT INTO w (v2) VALUES ('sixsix')");
    assert!(err.contains("character varying(5)"), "{err}");
    run(&e, "ALTER TABLE w DROP COLUMN v2");
    run(&e, "ALTER TABLE w ADD COLUMN v2 TEXT");
    run(&e, "INSERT INTO w (v2) VALUES ('sixsix')");
}
