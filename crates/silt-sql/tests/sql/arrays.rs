//! Array columns (`bigint[]`, `text[]`, `date[]`, `numeric(p,s)[]`...):
//! stored as arrays of the element's stored values, read as Arrow lists,
//! written from `ARRAY[...]` and PostgreSQL's `'{...}'` text, searched
//! with `= ANY` / `ALL`, and refused with the column named when a value
//! is not an array of the element type.

use datafusion::arrow::array::{Array, AsArray};
use datafusion::arrow::datatypes::Int64Type;
use silt::{FieldType, Value};

use crate::common::*;

fn table(e: &silt_sql::SqlEngine) {
    run(
        e,
        "CREATE TABLE posts (id BIGINT PRIMARY KEY, tags TEXT[], scores BIGINT[], \
         days DATE[], prices NUMERIC(6,2)[], flags BOOLEAN[])",
    );
    run(
        e,
        "INSERT INTO posts VALUES \
         (1, ARRAY['rust', 'db'], ARRAY[3, 1, 2], ARRAY[DATE '2024-02-29'], ARRAY[1.5, 2], ARRAY[true]), \
         (2, '{\"two words\",NULL,\"a,b\"}', '{10, 20}', '{2024-01-01,NULL}', '{0.125}', '{f,t}'), \
         (3, '{}', '{}', NULL, NULL, NULL), \
         (4, NULL, ARRAY[5], NULL, NULL, NULL)",
    );
}

/// Column `col` of the rows as lists of ints (None for a null array).
fn int_lists(
    b: &[datafusion::arrow::array::RecordBatch],
    col: usize,
) -> Vec<Option<Vec<Option<i64>>>> {
    b.iter()
        .flat_map(|x| {
            let l = x.column(col).as_list::<i32>().clone();
            (0..l.len())
                .map(|i| {
                    (!l.is_null(i)).then(|| {
                        let v = l.value(i);
                        let v = v.as_primitive::<Int64Type>();
                        (0..v.len())
                            .map(|j| (!v.is_null(j)).then(|| v.value(j)))
                            .collect()
                    })
                })
                .collect::<Vec<_>>()
        })
        .collect()
}

#[test]
fn arrays_store_as_element_values_and_read_as_lists() {
    let (_d, e) = engine();
    table(&e);
    let def = e
        .database()
        .dataset("posts")
        .expect("dataset")
        .def()
        .clone();
    assert_eq!(
        def.field_type("prices").map(|t| t.to_string()).as_deref(),
        Some("decimal(6,2)[]")
    );
    assert!(matches!(def.field_type("flags"), Some(FieldType::Array(_))));
    // The core holds arrays of stored element values.
    let ds = e.database().dataset("posts").expect("dataset");
    let r2 = ds.get(&[Value::Int(2)]).expect("get").expect("row");
    assert_eq!(
        r2.get("tags"),
        Some(&Value::Array(vec![
            Value::String("two words".into()),
            Value::Null,
            Value::String("a,b".into()),
        ]))
    );
    assert_eq!(
        r2.get("days"),
        Some(&Value::Array(vec![Value::Int(19_723), Value::Null]))
    );
    assert_eq!(
        r2.get("prices"),
        Some(&Value::Array(vec![Value::String("0.13".into())]))
    );
    let b = run(&e, "SELECT scores FROM posts ORDER BY id");
    assert_eq!(
        int_lists(&b, 0),
        vec![
            Some(vec![Some(3), Some(1), Some(2)]),
            Some(vec![Some(10), Some(20)]),
            Some(vec![]),
            Some(vec![Some(5)]),
        ]
    );
    // Array functions and subscripts work on the columns.
    let b = run(
        &e,
        "SELECT id, cardinality(scores), scores[1], array_to_string(tags, '|') \
         FROM posts ORDER BY id",
    );
    assert_eq!(ints(&b, 0), [1, 2, 3, 4]);
    assert_eq!(
        strings(&b, 3),
        [
            Some("rust|db".to_owned()),
            Some("two words|a,b".to_owned()),
            Some(String::new()),
            None
        ]
    );
    // Cast to text, a list reads as Arrow prints it.
    let b = run(&e, "SELECT CAST(days AS VARCHAR) FROM posts WHERE id = 1");
    assert_eq!(strings(&b, 0), [Some("[2024-02-29]".to_owned())]);
}

#[test]
fn any_and_all_search_array_columns() {
    let (_d, e) = engine();
    table(&e);
    let ids = |sql: &str| {
        let mut v = ints(&run(&e, sql), 0);
        v.sort_unstable();
        v
    };
    assert_eq!(ids("SELECT id FROM posts WHERE 'db' = ANY(tags)"), [1]);
    assert_eq!(ids("SELECT id FROM posts WHERE 'a,b' = ANY(tags)"), [2]);
    assert_eq!(ids("SELECT id FROM posts WHERE 2 = ANY(scores)"), [1]);
    assert_eq!(ids("SELECT id FROM posts WHERE 4 < ANY(scores)"), [2, 4]);
    // ALL over an empty array is true, as in PostgreSQL.
    assert_eq!(
        ids("SELECT id FROM posts WHERE 0 < ALL(scores)"),
        [1, 2, 3, 4]
    );
    assert_eq!(
        ids("SELECT id FROM posts WHERE 5 <= ALL(scores)"),
        [2, 3, 4]
    );
    assert_eq!(
        ids("SELECT id FROM posts WHERE array_has(flags, false)"),
        [2]
    );
    assert_eq!(
        ids("SELECT id FROM posts WHERE DATE '2024-01-01' = ANY(days)"),
        [2]
    );
}

#[test]
fn updates_assign_arrays_and_bad_arrays_change_nothing() {
    let (_d, e) = engine();
    table(&e);
    run(
        &e,
        "UPDATE posts SET scores = array_append(scores, 9), tags = '{x}' WHERE id = 4",
    );
    let b = run(
        &e,
        "SELECT scores, array_to_string(tags, ',') FROM posts WHERE id = 4",
    );
    assert_eq!(int_lists(&b, 0), [Some(vec![Some(5), Some(9)])]);
    assert_eq!(strings(&b, 1), [Some("x".to_owned())]);
    // Floats into bigint[] round as scalars do.
    run(
        &e,
        "INSERT INTO posts (id, scores) VALUES (5, ARRAY[1.6, 2.5])",
    );
    let b = run(&e, "SELECT scores FROM posts WHERE id = 5");
    assert_eq!(int_lists(&b, 0), [Some(vec![Some(2), Some(3)])]);
    run(&e, "DELETE FROM posts WHERE id = 5");
    for (sql, want) in [
        (
            "INSERT INTO posts (id, scores) VALUES (9, '{1,x}')",
            "bigint",
        ),
        (
            "INSERT INTO posts (id, scores) VALUES (9, '{{1},{2}}')",
            "multi-dimensional",
        ),
        (
            "INSERT INTO posts (id, scores) VALUES (9, '1,2')",
            "malformed array literal",
        ),
        (
            "INSERT INTO posts (id, scores) VALUES (9, ARRAY['a'])",
            "bigint",
        ),
        (
            "INSERT INTO posts (id, days) VALUES (9, '{2024-13-01}')",
            "date",
        ),
        ("INSERT INTO posts (id, scores) VALUES (9, true)", "boolean"),
    ] {
        let err = fail(&e, sql);
        assert!(err.contains(want), "{sql}: {err}");
        assert!(
            err.contains("scores") || err.contains("days"),
            "{sql}: {err}"
        );
    }
    assert_eq!(count_star(&e, "SELECT count(*) FROM posts"), 4);
    for (sql, want) in [
        (
            "CREATE TABLE bad (id BIGINT PRIMARY KEY, g GEOMETRY[])",
            "arrays hold",
        ),
        (
            "CREATE TABLE bad (id BIGINT PRIMARY KEY, m BIGINT[][])",
            "one dimension",
        ),
        (
            "CREATE TABLE bad (k BIGINT[] PRIMARY KEY)",
            "cannot be a key",
        ),
    ] {
        let err = fail(&e, sql);
        assert!(err.contains(want), "{sql}: {err}");
    }
}

#[test]
fn arrays_reach_the_catalog_with_postgresql_names() {
    let (_d, e) = engine();
    table(&e);
    let b = run(
        &e,
        "SELECT column_name, data_type, udt_name FROM information_schema.columns \
         WHERE table_name = 'posts' AND column_name IN ('tags', 'scores', 'prices') \
         ORDER BY column_name",
    );
    assert_eq!(
        strings(&b, 1),
        [
            Some("ARRAY".to_owned()),
            Some("ARRAY".to_owned()),
            Some("ARRAY".to_owned())
        ]
    );
    assert_eq!(
        strings(&b, 2),
        [
            Some("_numeric".to_owned()),
            Some("_int8".to_owned()),
            Some("_text".to_owned())
        ]
    );
    let b = run(
        &e,
        "SELECT format_type(atttypid, atttypmod) FROM pg_catalog.pg_attribute \
         WHERE attrelid = 'posts'::regclass AND attname = 'days'",
    );
    assert_eq!(strings(&b, 0), [Some("date[]".to_owned())]);
}
