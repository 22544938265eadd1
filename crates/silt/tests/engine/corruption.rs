//! Damaged files are detected and reported with the file's name, never a panic.

use silt::{Database, DatasetDef, DbOptions, Error, FieldType, Value};
use std::ops::Bound;
use std::path::{Path, PathBuf};

fn opts() -> DbOptions {
    DbOptions {
        durability: silt::Durability::None,
        ..Default::default()
    }
}

fn build(dir: &Path) -> PathBuf {
    let db = Database::open(dir, opts()).unwrap();
    let ds = db
        .create_dataset(
            DatasetDef::new("d", &["id"])
                .field("id", FieldType::Int)
                .policy(silt::lsm::policy::MergePolicy::NoMerge),
        )
        .unwrap();
    for i in 0..5000 {
        ds.upsert(Value::Object(vec![
            ("id".into(), Value::Int(i)),
            ("s".into(), Value::String(format!("value number {i}"))),
        ]))
        .unwrap();
    }
    db.close().unwrap();
    let comp_dir = dir.join("d/p0/primary");
    std::fs::read_dir(&comp_dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|e| e == "sc"))
        .expect("a component file")
}

fn full_read(db: &Database) -> Result<usize, Error> {
    let ds = db.dataset("d")?;
    let mut n = 0;
    for r in ds.scan(Bound::Unbounded, Bound::Unbounded)? {
        r?;
        n += 1;
    }
    for i in 0..5000 {
        ds.get(&[Value::Int(i)])?;
    }
    Ok(n)
}

#[test]
fn bit_flip_in_a_data_block_is_a_checksum_error_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let comp = build(dir.path());
    let mut bytes = std::fs::read(&comp).unwrap();
    bytes[200] ^= 0x04;
    std::fs::write(&comp, &bytes).unwrap();
    let db = Database::open(dir.path(), opts()).unwrap();
    let err = full_read(&db).unwrap_err();
    let msg = err.to_string();
    assert!(matches!(err, Error::Corrupt { .. }), "{msg}");
    assert!(
        msg.contains(&comp.file_name().unwrap().to_string_lossy().to_string()),
        "{msg}"
    );
    assert!(msg.contains("checksum"), "{msg}");
}

#[test]
fn truncated_component_refuses_to_open_with_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let comp = build(dir.path());
    let bytes = std::fs::read(&comp).unwrap();
    std::fs::write(&comp, &bytes[..bytes.len() / 2]).unwrap();
    let err = match Database::open(dir.path(), opts()) {
        Ok(_) => panic!("opened a database with a truncated component"),
        Err(e) => e,
    };
    let msg = err.to_string();
    assert!(matches!(err, Error::Corrupt { .. }), "{msg}");
    assert!(msg.contains(".sc"), "{msg}");
}

#[test]
fn every_single_bit_flip_is_caught_or_harmless() {
    // Flip bits at many positions of the file; every read must either succeed
    // with the same answer or fail with a Corrupt error: never panic, never
    // return different data.
    let dir = tempfile::tempdir().unwrap();
    let comp = build(dir.path());
    let clean = std::fs::read(&comp).unwrap();
    let step = (clean.len() / 97).max(1);
    for pos in (0..clean.len()).step_by(step) {
        let mut bytes = clean.clone();
        bytes[pos] ^= 0x20;
        std::fs::write(&comp, &bytes).unwrap();
        match Database::open(dir.path(), opts()) {
            Err(e) => assert!(matches!(e, Error::Corrupt { .. }), "pos {pos}: {e}"),
            Ok(db) => match full_read(&db) {
                Ok(n) => assert_eq!(n, 5000, "pos {pos}"),
                Err(e) => assert!(matches!(e, Error::Corrupt { .. }), "pos {pos}: {e}"),
            },
        }
    }
    std::fs::write(&comp, &clean).unwrap();
}

#[test]
fn orphan_and_temporary_files_are_removed_at_open() {
    let dir = tempfile::tempdir().unwrap();
    let comp = build(dir.path());
    let comp_dir = comp.parent().unwrap();
    let orphan = comp_dir.join("00000000000000ff.sc");
    std::fs::copy(&comp, &orphan).unwrap();
    let tmp = comp_dir.join("0000000000000100.tmp");
    std::fs::write(&tmp, b"half written").unwrap();
    let db = Database::open(dir.path(), opts()).unwrap();
    assert!(!orphan.exists());
    assert!(!tmp.exists());
    assert_eq!(full_read(&db).unwrap(), 5000);
}

#[test]
fn a_second_process_cannot_open_the_same_directory() {
    let dir = tempfile::tempdir().unwrap();
    let _db = Database::open(dir.path(), opts()).unwrap();
    // File locks are per open file description, so a second open in the same
    // process conflicts just as another process would.
    let err = match Database::open(dir.path(), opts()) {
        Ok(_) => panic!("second open succeeded"),
        Err(e) => e,
    };
    assert!(matches!(err, Error::Locked { .. }), "{err}");
    assert!(err.to_string().contains("already open"), "{err}");
}

#[test]
fn bad_records_get_clear_errors() {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path(), opts()).unwrap();
    let ds = db
        .create_dataset(
            DatasetDef::new("d", &["id"])
                .field("id", FieldType::Int)
                .field("n", FieldType::Double),
        )
        .unwrap();
    let e = ds
        .insert(Value::Object(vec![("n".into(), Value::Double(1.0))]))
        .unwrap_err();
    assert!(e.to_string().contains("id"), "{e}");
    let e = ds
        .insert(Value::Object(vec![
            ("id".into(), Value::Int(1)),
            ("n".into(), Value::String("abc".into())),
        ]))
        .unwrap_err();
    assert!(e.to_string().contains('n'), "{e}");
    let e = ds.insert(Value::Int(3)).unwrap_err();
    assert!(e.to_string().contains("object"), "{e}");
    let big = "x".repeat(5000);
    let e = db
        .create_dataset(DatasetDef::new("s", &["k"]))
        .unwrap()
        .insert(Value::Object(vec![("k".into(), Value::String(big))]))
        .unwrap_err();
    assert!(matches!(e, Error::KeyTooLarge { .. }), "{e}");
    assert!(matches!(
        db.create_dataset(DatasetDef::new("bad name", &["k"])),
        Err(Error::Config(_))
    ));
    assert!(matches!(db.dataset("nope"), Err(Error::NoSuchDataset(_))));
}
