//! `Dataset::prepare_row_into` makes of a row what `prepare_into` makes of the
//! same fields as a record object: the same key, the same encoded record,
//! the same error, the same counter values (two datasets of one definition
//! are fed the same rows, one each way). Also after a change of the
//! definition, and with a CHECK-free shape whose key is filled in by a
//! counter.

use proptest::prelude::*;
use silt::{
    Database, Dataset, DatasetDef, DbOptions, Durability, FieldDefault, FieldType, PreparedBatch,
    RowShape, SequenceDef, Value,
};

fn open(dir: &std::path::Path) -> Database {
    Database::open(
        dir,
        DbOptions {
            durability: Durability::None,
            ..Default::default()
        },
    )
    .unwrap()
}

/// The definition both datasets get: an int key, a NOT NULL text, a
/// double, a counter field, and a field with a constant default.
fn def(name: &str, key: &str) -> DatasetDef {
    DatasetDef::new(name, &[key])
        .field("id", FieldType::Int)
        .field("name", FieldType::String)
        .field("x", FieldType::Double)
        .field("n", FieldType::Int)
        .field("d", FieldType::String)
        .not_null("name")
        .sequence("n", SequenceDef::counting(1))
        .default_value("d", FieldDefault::Text("dflt".into()))
}

/// A field of a row: absent, null, or a value of some type (not always
/// the declared one, so coercion succeeds and fails).
fn arb_field() -> impl Strategy<Value = Option<Value>> {
    prop_oneof![
        1 => Just(None),
        1 => Just(Some(Value::Null)),
        3 => (-5i64..50).prop_map(|i| Some(Value::Int(i))),
        2 => "[a-z0-9.]{0,6}".prop_map(|s| Some(Value::String(s))),
        1 => (-10.0f64..10.0).prop_map(|d| Some(Value::Double(d))),
        1 => any::<bool>().prop_map(|b| Some(Value::Bool(b))),
        1 => Just(Some(Value::Array(vec![Value::Int(1)]))),
    ]
}

/// Column lists: every field, or some of them in another order.
fn arb_names() -> impl Strategy<Value = Vec<String>> {
    prop_oneof![
        Just(vec!["id", "name", "x", "n", "d"]),
        Just(vec!["name", "id", "x"]),
        Just(vec!["id", "name", "extra"]),
        Just(vec!["name", "d", "x"]),
        Just(vec!["name", "x", "n", "id"]),
    ]
    .prop_map(|v| v.into_iter().map(String::from).collect())
}

type Outcome = Result<(Vec<u8>, Vec<u8>), String>;

/// What preparing into a one-record batch made (or the error).
fn outcome(prepare: impl FnOnce(&mut PreparedBatch) -> silt::Result<()>) -> Outcome {
    let mut batch = PreparedBatch::new();
    prepare(&mut batch).map_err(|e| e.to_string())?;
    assert_eq!(batch.len(), 1);
    Ok((
        batch.key(0).unwrap().to_vec(),
        batch.record(0).unwrap().to_vec(),
    ))
}

fn row_outcome(ds: &Dataset, shape: &RowShape, row: &mut [Option<Value>]) -> Outcome {
    outcome(|b| ds.prepare_row_into(shape, row, b))
}

fn record_outcome(ds: &Dataset, record: Value) -> Outcome {
    outcome(|b| ds.prepare_into(record, b))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn rows_prepare_as_their_records(
        names in arb_names(),
        key in prop_oneof![Just("id"), Just("n")],
        rows in proptest::collection::vec(proptest::collection::vec(arb_field(), 5), 1..40),
    ) {
        let (da, db_) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let (a, b) = (open(da.path()), open(db_.path()));
        let rows_ds = a.create_dataset(def("t", key)).unwrap();
        let records_ds = b.create_dataset(def("t", key)).unwrap();
        let shape = rows_ds.row_shape(&names);
        prop_assert_eq!(shape.names(), &names[..]);
        for fields in rows {
            let mut row: Vec<Option<Value>> = fields.into_iter().take(names.len()).collect();
            let record = Value::Object(
                names
                    .iter()
                    .zip(&row)
                    .filter_map(|(n, v)| v.clone().map(|v| (n.clone(), v)))
                    .collect(),
            );
            let direct = row_outcome(&rows_ds, &shape, &mut row);
            let general = record_outcome(&records_ds, record);
            prop_assert_eq!(direct, general);
        }
    }
}

#[test]
fn rows_of_a_replaced_definition_are_refused_at_their_write() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    let ds = db
        .create_dataset(
            DatasetDef::new("t", &["id"])
                .field("id", FieldType::Int)
                .field("name", FieldType::String)
                .field("x", FieldType::Double)
                .not_null("name"),
        )
        .unwrap();
    let names: Vec<String> = ["id", "name"].map(String::from).to_vec();
    let shape = ds.row_shape(&names);
    let row = || vec![Some(Value::Int(1)), Some(Value::String("a".into()))];
    let before = row_outcome(&ds, &shape, &mut row()).unwrap();
    // `name` is no longer NOT NULL and `x` gets a default: rows of the
    // shape made before are prepared under the old definition, and refused
    // at their write.
    db.alter_dataset("t", |d| {
        d.not_null.retain(|f| f != "name");
        d.defaults
            .push(("x".into(), FieldDefault::Text("2.5".into())));
        Ok(())
    })
    .unwrap();
    let mut stale = silt::PreparedBatch::new();
    ds.prepare_row_into(&shape, &mut row(), &mut stale).unwrap();
    let err = ds
        .write_prepared(&stale, silt::BatchOptions::default())
        .unwrap()
        .failed;
    assert!(
        matches!(err[..], [(0, silt::Error::Altered { .. })]),
        "{err:?}"
    );
    // A shape made for the new definition prepares rows as records again.
    let shape = ds.row_shape(&names);
    let after = row_outcome(&ds, &shape, &mut row()).unwrap();
    let record = Value::Object(vec![
        ("id".into(), Value::Int(1)),
        ("name".into(), Value::String("a".into())),
    ]);
    assert_eq!(after, record_outcome(&ds, record).unwrap());
    assert_ne!(before.1, after.1, "the default of x is filled in");
    // A row of the wrong length is refused.
    let err = row_outcome(&ds, &shape, &mut [None]).unwrap_err();
    assert!(err.contains("a row of 1 fields for a shape of 2"), "{err}");
}
