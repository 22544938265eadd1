//! Block range indexes (`brin`, zone maps of the primary's blocks) against
//! a model: every range and equality query equals a filter of the model's
//! records, through writes, deletes, flushes, merges and reopens, on local
//! components and on a remote tier, with a zone map per block and with a
//! chunk index in each of its two forms; the zone maps and chunk indexes
//! skip blocks when the field follows the key order, and the two forms
//! choose the same chunks.

use crate::oracle::register_dir_store;
use proptest::prelude::*;

use silt::lsm::policy::MergePolicy;
use silt::storage::brin::BrinForm;
use silt::{
    Database, DatasetDef, DbOptions, FieldType, IndexDef, IndexKind, Query, QueryOptions, Value,
};
use std::collections::{BTreeMap, BTreeSet};
use std::ops::Bound;
use std::path::Path;

fn opts() -> DbOptions {
    DbOptions {
        block_cache_bytes: 1 << 20,
        sync: false,
        durability: silt::Durability::None,
        ..Default::default()
    }
}

/// The record of key `k`: `t` (int, may be absent), `s` (a string).
fn rec(k: i64, t: Option<i64>) -> Value {
    let mut fields = vec![("id".into(), Value::Int(k))];
    if let Some(t) = t {
        fields.push(("t".into(), Value::Int(t)));
        fields.push((
            "s".into(),
            Value::String(format!("s{:04}", t.rem_euclid(10_000))),
        ));
    }
    fields.push(("pad".into(), Value::String("x".repeat(120))));
    Value::Object(fields)
}

/// `chunks`: both indexes over chunks of that many bytes, in that form.
fn open(
    dir: &Path,
    policy: &str,
    remote: Option<&str>,
    chunks: Option<(u64, BrinForm)>,
) -> Database {
    let db = Database::open(dir, opts()).unwrap();
    if db.dataset("t").is_err() {
        let mut def = DatasetDef::new("t", &["id"])
            .field("id", FieldType::Int)
            .field("t", FieldType::Int)
            .field("s", FieldType::String)
            .memory_budget(1 << 20)
            .block_size(512)
            .policy(MergePolicy::parse(policy).unwrap());
        if let Some(url) = remote {
            def = def.remote(url, 0);
        }
        db.create_dataset(def).unwrap();
        for (name, field) in [("t_brin", "t"), ("s_brin", "s")] {
            db.create_index("t", brin(name, field, chunks)).unwrap();
        }
    }
    db
}

fn brin(name: &str, field: &str, chunks: Option<(u64, BrinForm)>) -> IndexDef {
    let mut def = IndexDef {
        kind: IndexKind::Brin,
        ..IndexDef::btree(name, &[field])
    };
    def.options.chunk_bytes = chunks.map(|c| c.0);
    def.options.brin_form = chunks.map(|c| c.1);
    def
}

/// The keys a range query finds, the same through `query` and through
/// `brin_range_raw` (the records as stored, which SQL reads).
fn ids(db: &Database, index: &str, lo: Bound<Value>, hi: Bound<Value>) -> BTreeSet<i64> {
    let ds = db.dataset("t").unwrap();
    let (lo, hi) = (lo.map(|v| vec![v]), hi.map(|v| vec![v]));
    let int = |pk: &[Value]| match pk.first() {
        Some(Value::Int(k)) => *k,
        other => panic!("pk {other:?}"),
    };
    let q = Query::Range {
        lo: lo.clone(),
        hi: hi.clone(),
    };
    let got: BTreeSet<i64> = ds
        .query(index, &q, QueryOptions::default())
        .unwrap()
        .map(|h| int(&h.unwrap().pk))
        .collect();
    let raw = ds
        .brin_range_raw(index, &lo, &hi, None, None)
        .unwrap()
        .unwrap();
    let mut seen = BTreeSet::new();
    for (pk, rec) in &raw {
        let k = int(&silt::value::decode_key(pk).unwrap());
        assert!(seen.insert(k), "key {k} twice in the raw answer");
        let rec = silt::value::decode_value(rec).unwrap();
        assert_eq!(rec.get("id"), Some(&Value::Int(k)), "record of key {k}");
    }
    assert_eq!(seen, got, "raw and decoded answers");
    // A reader of a few fields (a remote component then answers from its
    // column image): the same records, holding at least those fields as
    // the whole records hold them.
    let full: BTreeMap<i64, Value> = raw
        .iter()
        .map(|(pk, rec)| {
            (
                int(&silt::value::decode_key(pk).unwrap()),
                silt::value::decode_value(rec).unwrap(),
            )
        })
        .collect();
    let fields: Vec<String> = match index {
        "t_brin" => vec!["id".into(), "t".into()],
        _ => vec!["s".into()],
    };
    let some = ds
        .brin_range_raw(index, &lo, &hi, None, Some(&fields))
        .unwrap()
        .unwrap();
    let mut seen = BTreeSet::new();
    for (pk, rec) in &some {
        let k = int(&silt::value::decode_key(pk).unwrap());
        assert!(seen.insert(k), "key {k} twice in the answer of {fields:?}");
        let rec = silt::value::decode_value(rec).unwrap();
        for f in &fields {
            assert_eq!(rec.get(f), full[&k].get(f), "field {f} of key {k}");
        }
    }
    assert_eq!(seen, got, "answers reading {fields:?} and whole records");
    got
}

fn want(model: &BTreeMap<i64, Option<i64>>, f: impl Fn(i64) -> bool) -> BTreeSet<i64> {
    model
        .iter()
        .filter(|(_, t)| t.is_some_and(&f))
        .map(|(k, _)| *k)
        .collect()
}

fn s_of(t: i64) -> String {
    format!("s{:04}", t.rem_euclid(10_000))
}

#[derive(Clone, Debug)]
enum Op {
    /// Key, and t: near the key (clustered) or anywhere, or absent.
    Put(i64, Option<i64>),
    Delete(i64),
    Query(i64, i64),
    Flush,
    Compact,
    Reopen,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        10 => (0i64..500, prop_oneof![
            4 => (0i64..20).prop_map(Some),
            2 => (0i64..2000).prop_map(Some),
            1 => Just(None),
        ]).prop_map(|(k, d)| Op::Put(k, d.map(|d| if d < 20 { k * 4 + d } else { d }))),
        3 => (0i64..500).prop_map(Op::Delete),
        4 => (0i64..2000, 0i64..300).prop_map(|(a, w)| Op::Query(a, a + w)),
        1 => Just(Op::Flush),
        1 => Just(Op::Compact),
        1 => Just(Op::Reopen),
    ]
}

fn check(
    db: &Database,
    model: &BTreeMap<i64, Option<i64>>,
    a: i64,
    b: i64,
) -> Result<(), TestCaseError> {
    let got = ids(
        db,
        "t_brin",
        Bound::Included(Value::Int(a)),
        Bound::Excluded(Value::Int(b)),
    );
    prop_assert_eq!(got, want(model, |t| a <= t && t < b), "t in [{}, {})", a, b);
    let got = ids(
        db,
        "t_brin",
        Bound::Included(Value::Int(a)),
        Bound::Included(Value::Int(a)),
    );
    prop_assert_eq!(got, want(model, |t| t == a), "t = {}", a);
    let got = ids(
        db,
        "t_brin",
        Bound::Excluded(Value::Int(b)),
        Bound::Unbounded,
    );
    prop_assert_eq!(got, want(model, |t| t > b), "t > {}", b);
    // Strings order as strings.
    let (sa, sb) = (s_of(a), s_of(b));
    let got = ids(
        db,
        "s_brin",
        Bound::Included(Value::String(sa.clone())),
        Bound::Included(Value::String(sb.clone())),
    );
    prop_assert_eq!(
        got,
        want(model, |t| sa <= s_of(t) && s_of(t) <= sb),
        "s in [{}, {}]",
        sa,
        sb
    );
    Ok(())
}

fn run(
    ops: &[Op],
    policy: &str,
    remote: bool,
    chunks: Option<(u64, BrinForm)>,
) -> Result<(), TestCaseError> {
    let dir = tempfile::tempdir().unwrap();
    let bucket = tempfile::tempdir().unwrap();
    let url = format!("dirtest://{}", bucket.path().display());
    let remote = remote.then_some(url.as_str());
    let mut db = open(dir.path(), policy, remote, chunks);
    let mut model: BTreeMap<i64, Option<i64>> = BTreeMap::new();
    for op in ops {
        match op {
            Op::Put(k, t) => {
                db.dataset("t").unwrap().upsert(rec(*k, *t)).unwrap();
                model.insert(*k, *t);
            }
            Op::Delete(k) => {
                db.dataset("t").unwrap().delete(&[Value::Int(*k)]).unwrap();
                model.remove(k);
            }
            Op::Query(a, b) => check(&db, &model, *a, *b)?,
            Op::Flush => db.dataset("t").unwrap().flush().unwrap(),
            Op::Compact => db.dataset("t").unwrap().compact().unwrap(),
            Op::Reopen => {
                db.close().unwrap();
                drop(db);
                db = open(dir.path(), policy, remote, chunks);
            }
        }
    }
    db.dataset("t").unwrap().flush().unwrap();
    for (a, b) in [(0, 100), (500, 900), (1990, 2100), (-5, 0)] {
        check(&db, &model, a, b)?;
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(16))]
    #[test]
    fn brin_ranges_match_the_model(ops in proptest::collection::vec(op(), 1..300)) {
        register_dir_store();
        run(&ops, "tiered(3)", false, None)?;
        run(&ops, "leveled(2,3,8KB,16KB)", false, None)?;
        run(&ops, "prefix(64KB,3)", true, None)?;
        // Chunk indexes of 8 blocks (4 KiB), each form, local and remote.
        run(&ops, "tiered(3)", false, Some((4096, BrinForm::KeyValue)))?;
        run(&ops, "leveled(2,3,8KB,16KB)", false, Some((4096, BrinForm::IntervalTree)))?;
        run(&ops, "prefix(64KB,3)", true, Some((4096, BrinForm::KeyValue)))?;
    }
}

/// Times that follow the key: a narrow range reads a few blocks of the
/// one merged component, and says so.
#[test]
fn zone_maps_skip_blocks_of_clustered_data() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path(), "tiered(3)", None, None);
    let ds = db.dataset("t").unwrap();
    for k in 0..20_000 {
        ds.upsert(rec(k, Some(k * 10))).unwrap();
    }
    ds.flush().unwrap();
    ds.compact().unwrap();
    let (lo, hi) = (
        Bound::Included(vec![Value::Int(50_000)]),
        Bound::Excluded(vec![Value::Int(51_000)]),
    );
    let r = ds.zone_map_blocks("t_brin", &lo, &hi).unwrap();
    let (read, all) = (r.blocks_read, r.blocks);
    assert!(all > 500, "{all} blocks");
    // 100 matching records of ~170 bytes in 512-byte blocks: ~25 blocks,
    // plus at most one at each end.
    assert!(read <= 30, "{read} of {all} blocks to read");
    let res = ds
        .query("t_brin", &Query::Range { lo, hi }, QueryOptions::default())
        .unwrap();
    let hits: Vec<_> = res.collect::<silt::Result<Vec<_>>>().unwrap();
    assert_eq!(hits.len(), 100);
}

/// Clustered data (two overlapping runs, so chunks of the second
/// component nest in and overlap those of the first) with chunk indexes of
/// 16 KiB (~32 blocks): the key-value form chooses chunks for 200 ranges;
/// the index is then dropped and rebuilt as an interval tree over the same
/// components, which chooses the same chunks for each (and so the same
/// blocks and records). A narrow range reads few chunks, the query's stats
/// count the chunks skipped, and a second chunk layout on the same field
/// is refused.
#[test]
fn chunk_indexes_skip_chunks_and_both_forms_agree() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(
        dir.path(),
        "tiered(3)",
        None,
        Some((16 << 10, BrinForm::KeyValue)),
    );
    let ds = db.dataset("t").unwrap();
    for k in 0..20_000 {
        ds.upsert(rec(k, Some(k * 10))).unwrap();
    }
    ds.flush().unwrap();
    for k in 20_000..24_000 {
        ds.upsert(rec(k, Some((k - 20_000) * 50 + 3))).unwrap();
    }
    ds.flush().unwrap();
    // Merges settle, so both forms see the same components.
    db.wait_idle().unwrap();
    let mut rng = 7u64;
    let ranges: Vec<(i64, i64)> = (0..200)
        .map(|i| {
            rng = rng
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let a = (rng >> 33) as i64 % 210_000 - 5_000;
            (a, a + [0, 1, 100, 5_000, 100_000][i % 5])
        })
        .collect();
    let answers = |db: &Database, form: BrinForm| {
        let ds = db.dataset("t").unwrap();
        ranges
            .iter()
            .map(|&(a, b)| {
                let (lo, hi) = (
                    Bound::Included(vec![Value::Int(a)]),
                    Bound::Included(vec![Value::Int(b)]),
                );
                let r = ds.zone_map_blocks("t_brin", &lo, &hi).unwrap();
                assert_eq!(r.form, Some(form));
                let got = ids(
                    db,
                    "t_brin",
                    Bound::Included(Value::Int(a)),
                    Bound::Included(Value::Int(b)),
                );
                (r.chunks_read, r.chunks, r.blocks_read, got)
            })
            .collect::<Vec<_>>()
    };
    let kv = answers(&db, BrinForm::KeyValue);
    db.drop_index("t", "t_brin").unwrap();
    db.create_index(
        "t",
        brin("t_brin", "t", Some((16 << 10, BrinForm::IntervalTree))),
    )
    .unwrap();
    db.wait_idle().unwrap();
    let tree = answers(&db, BrinForm::IntervalTree);
    for (i, (a, b)) in kv.iter().zip(&tree).enumerate() {
        assert_eq!(a, b, "range {:?}", ranges[i]);
    }
    let (lo, hi) = (
        Bound::Included(vec![Value::Int(50_000)]),
        Bound::Excluded(vec![Value::Int(51_000)]),
    );
    let r = ds.zone_map_blocks("t_brin", &lo, &hi).unwrap();
    assert!(r.chunks > 150, "{r:?}");
    // A 16 KiB chunk holds ~96 records: t over ~960 in the first
    // component (2-3 chunks of a 1000-wide range), over ~4800 in the
    // second (1-2 chunks).
    assert!(r.chunks_read <= 5, "{r:?}");
    assert!(r.blocks_read <= 5 * 40, "{r:?}");
    let mut res = ds
        .query("t_brin", &Query::Range { lo, hi }, QueryOptions::default())
        .unwrap();
    let n = res.by_ref().count();
    assert_eq!(n, 100 + 20);
    let st = res.stats();
    assert_eq!(st.chunks_pruned + r.chunks_read, r.chunks, "{st:?} {r:?}");
    // One chunk layout per field.
    let err = db
        .create_index(
            "t",
            brin("t_brin2", "t", Some((4 << 20, BrinForm::KeyValue))),
        )
        .unwrap_err();
    assert!(err.to_string().contains("one chunk layout"), "{err}");
    // A chunk size out of range, or a form without a size.
    assert!(
        db.create_index("t", brin("x", "t", Some((100, BrinForm::KeyValue))))
            .is_err()
    );
    let mut def = brin("y", "t", None);
    def.options.brin_form = Some(BrinForm::KeyValue);
    assert!(db.create_index("t", def).is_err());
}

/// Bytes the primary of `t` read from its bucket so far.
fn bytes_read(db: &Database) -> u64 {
    let st = db.dataset("t").unwrap().stats();
    st.indexes
        .iter()
        .filter_map(|t| t.remote.as_ref())
        .map(|r| r.bytes_read)
        .sum()
}

/// Files under `dir` whose names end with `suffix`, recursively.
fn files_ending(dir: &Path, suffix: &str) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(files_ending(&p, suffix));
        } else if p.to_string_lossy().ends_with(suffix) {
            out.push(p);
        }
    }
    out
}

/// A remote component carries a column image. A range query that reads a
/// few fields answers from it: records of just those fields, fewer bytes
/// from the bucket than whole records, the same keys; newer writes (in the
/// memtable, then in newer components with images of their own) shadow
/// it; a damaged image is reported and the component read instead.
#[test]
fn column_images_answer_reads_of_a_few_fields() {
    register_dir_store();
    let dir = tempfile::tempdir().unwrap();
    let bucket = tempfile::tempdir().unwrap();
    let url = format!("dirtest://{}", bucket.path().display());
    let db = open(dir.path(), "tiered(3)", Some(&url), None);
    let ds = db.dataset("t").unwrap();
    let mut model: BTreeMap<i64, Option<i64>> = BTreeMap::new();
    for k in 0..20_000 {
        ds.upsert(rec(k, Some(k * 10))).unwrap();
        model.insert(k, Some(k * 10));
    }
    ds.flush().unwrap();
    ds.compact().unwrap();
    assert_eq!(files_ending(bucket.path(), ".col.sc").len(), 1, "one image");
    let (lo, hi) = (
        Bound::Included(vec![Value::Int(50_000)]),
        Bound::Excluded(vec![Value::Int(150_000)]),
    );
    let fields = vec!["t".to_owned()];
    let keys = |recs: &[(Vec<u8>, Vec<u8>)]| -> BTreeSet<i64> {
        recs.iter()
            .map(|(pk, _)| match silt::value::decode_key(pk).unwrap()[0] {
                Value::Int(k) => k,
                ref v => panic!("{v:?}"),
            })
            .collect()
    };
    let check = |db: &Database, model: &BTreeMap<i64, Option<i64>>| {
        let ds = db.dataset("t").unwrap();
        let b0 = bytes_read(db);
        let some = ds
            .brin_range_raw("t_brin", &lo, &hi, None, Some(&fields))
            .unwrap()
            .unwrap();
        let b1 = bytes_read(db);
        let whole = ds
            .brin_range_raw("t_brin", &lo, &hi, None, None)
            .unwrap()
            .unwrap();
        let b2 = bytes_read(db);
        let want = want(model, |t| (50_000..150_000).contains(&t));
        assert_eq!(keys(&some), want);
        assert_eq!(keys(&whole), want);
        for (_, r) in &some {
            let r = silt::value::decode_value(r).unwrap();
            let t = r.get("t").cloned();
            assert!(
                matches!(t, Some(Value::Int(t)) if (50_000..150_000).contains(&t)),
                "{r:?}"
            );
        }
        (some, b1 - b0, b2 - b1)
    };
    let (some, image_bytes, block_bytes) = check(&db, &model);
    // 10,000 hits, each record only `t`: read from the image.
    assert_eq!(some.len(), 10_000);
    for (_, r) in &some {
        let r = silt::value::decode_value(r).unwrap();
        assert_eq!(r.get("pad"), None, "a whole record: the image was not read");
    }
    assert!(
        image_bytes * 4 < block_bytes,
        "image {image_bytes} bytes, blocks {block_bytes}"
    );
    // Newer versions in the memtable: moved out of the range, deleted,
    // moved into it.
    for k in (5_000..15_000).step_by(7) {
        ds.upsert(rec(k, Some(-k))).unwrap();
        model.insert(k, Some(-k));
    }
    for k in (5_001..15_000).step_by(11) {
        ds.delete(&[Value::Int(k)]).unwrap();
        model.remove(&k);
    }
    for k in (0..5_000).step_by(13) {
        ds.upsert(rec(k, Some(100_000 + k))).unwrap();
        model.insert(k, Some(100_000 + k));
    }
    check(&db, &model);
    // ...and in a newer component of the bucket, with its own image.
    ds.flush().unwrap();
    assert_eq!(
        files_ending(bucket.path(), ".col.sc").len(),
        2,
        "two images"
    );
    check(&db, &model);
    // A damaged image: the component answers instead.
    db.close().unwrap();
    drop(db);
    for img in files_ending(bucket.path(), ".col.sc") {
        let mut b = std::fs::read(&img).unwrap();
        for x in &mut b[100..200] {
            *x ^= 0x5A;
        }
        std::fs::write(&img, b).unwrap();
    }
    let db = open(dir.path(), "tiered(3)", Some(&url), None);
    check(&db, &model);
}
