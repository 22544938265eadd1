//! The worked example of seed 000 §2.3.5 (Figures 2.3–2.8): a dataset with a
//! primary B+-tree on Id, a secondary B+-tree on Age, an R-tree on Loc and a
//! keyword inverted index on Msg. Insert R1 and R2, flush, delete R2 and
//! insert R3, flush, merge, delete R3 and insert R4, checking the entries of
//! every component of every index after each step.
//!
//! As in the paper's figures, the B+-trees and the R-tree keep antimatter in
//! their components (the R-tree is the "AMLSM" variant here), while the
//! inverted index records deletes in a deleted-key B+-tree per component.

use silt::lsm::LsmTree;
use silt::lsm::memtable::MemIter;
use silt::lsm::merge_iter::{MergeIter, Source};
use silt::lsm::policy::MergePolicy;
use silt::{
    Database, DatasetDef, DbOptions, Durability, FieldType, Geometry, IndexDef, ReconcileOption,
    Value,
};
use std::ops::Bound;
use std::sync::Arc;

fn rec(id: i64, age: i64, xy: f64, msg: &str) -> Value {
    Value::Object(vec![
        ("Id".into(), Value::Int(id)),
        ("Age".into(), Value::Int(age)),
        ("Loc".into(), Value::Geometry(Geometry::point(xy, xy))),
        ("Msg".into(), Value::String(msg.into())),
    ])
}

/// One component, printed as the figures do: `<key...>` for an entry,
/// `<-,key...>` for antimatter, and `del{pk...}` for its deleted-key tree.
fn show(tree: &Arc<LsmTree>, entries: Vec<(Vec<u8>, bool)>, deleted: Vec<Vec<u8>>) -> String {
    let name = tree
        .name()
        .rsplit('/')
        .next()
        .unwrap_or_default()
        .to_owned();
    let mut parts = Vec::new();
    for (k, del) in entries {
        let shown = match name.as_str() {
            "primary" => silt::value::key_to_string(&silt::value::decode_key(&k).unwrap()),
            "Loc" => {
                let pk = silt::value::decode_key(&k[8..]).unwrap();
                silt::value::key_to_string(&pk)
            }
            _ => {
                let s = silt::value::key_to_string(&silt::value::decode_key(&k).unwrap());
                s.trim_start_matches('(').trim_end_matches(')').to_owned()
            }
        };
        parts.push(if del {
            format!("<-,{shown}>")
        } else {
            format!("<{shown}>")
        });
    }
    if !deleted.is_empty() {
        let d: Vec<String> = deleted
            .iter()
            .map(|k| silt::value::key_to_string(&silt::value::decode_key(k).unwrap()))
            .collect();
        parts.push(format!("del{{{}}}", d.join(",")));
    }
    parts.join(" ")
}

/// (memory component, disk components newest first) of one index.
fn state(tree: &Arc<LsmTree>) -> (String, Vec<String>) {
    let snap = tree.snapshot();
    let mut mem = Vec::new();
    for m in &snap.mems {
        let mut it = MemIter::new(m.clone(), Bound::Unbounded);
        while let Some((k, e)) = it.next_entry() {
            mem.push((k, e.is_delete()));
        }
    }
    let memory = show(tree, mem, Vec::new());
    let mut disk = Vec::new();
    for c in snap.disk.iter() {
        let mut it =
            MergeIter::new(vec![Source::Disk(c.iter(Bound::Unbounded, false).unwrap())]).unwrap();
        let mut ents = Vec::new();
        while let Some((k, e)) = it.next_entry().unwrap() {
            ents.push((k, e.is_delete()));
        }
        let mut deleted = Vec::new();
        if let Some(d) = c.companion() {
            let mut di = d.iter(Bound::Unbounded, false).unwrap();
            while let Some((k, _)) = di.next_entry().unwrap() {
                deleted.push(k);
            }
        }
        disk.push(show(tree, ents, deleted));
    }
    (memory, disk)
}

fn expect(db: &Database, want: &[(&str, &str, &[&str])]) {
    let ds = db.dataset("D").unwrap();
    let trees = ds.trees();
    for (name, mem, disk) in want {
        let t = trees
            .iter()
            .find(|t| t.name().ends_with(&format!("/{name}")))
            .unwrap();
        let (m, d) = state(t);
        assert_eq!(&m, mem, "{name}: in-memory component");
        assert_eq!(d, disk.to_vec(), "{name}: disk components (newest first)");
    }
}

#[test]
fn seed_000_section_2_3_5() {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(
        dir.path(),
        DbOptions {
            durability: Durability::None,
            sync: false,
            ..Default::default()
        },
    )
    .unwrap();
    let p = MergePolicy::parse("no-merge").unwrap();
    db.create_dataset(
        DatasetDef::new("D", &["Id"])
            .field("Id", FieldType::Int)
            .field("Age", FieldType::Int)
            .field("Loc", FieldType::Point)
            .field("Msg", FieldType::String)
            .policy(p.clone()),
    )
    .unwrap();
    db.create_index("D", IndexDef::btree("Age", &["Age"]).policy(p.clone()))
        .unwrap();
    db.create_index(
        "D",
        IndexDef::rtree("Loc", "Loc")
            .reconcile(ReconcileOption::Antimatter)
            .policy(p.clone()),
    )
    .unwrap();
    db.create_index(
        "D",
        IndexDef::keyword("Msg", "Msg")
            .reconcile(ReconcileOption::DeletedKeys)
            .policy(p),
    )
    .unwrap();
    let ds = db.dataset("D").unwrap();

    // Figure 2.4: R1 and R2 in the in-memory components.
    ds.insert(rec(1, 10, 10.0, "cat")).unwrap();
    ds.insert(rec(2, 20, 20.0, "cat dog")).unwrap();
    expect(
        &db,
        &[
            ("primary", "<1> <2>", &[]),
            ("Age", "<10, 1> <20, 2>", &[]),
            ("Loc", "<1> <2>", &[]),
            ("Msg", "<\"cat\", 1> <\"cat\", 2> <\"dog\", 2>", &[]),
        ],
    );

    // Figure 2.5: the first flush.
    ds.flush().unwrap();
    expect(
        &db,
        &[
            ("primary", "", &["<1> <2>"]),
            ("Age", "", &["<10, 1> <20, 2>"]),
            ("Loc", "", &["<1> <2>"]),
            ("Msg", "", &["<\"cat\", 1> <\"cat\", 2> <\"dog\", 2>"]),
        ],
    );

    // Figure 2.6: delete R2, insert R3. In memory every index holds the
    // delete as antimatter at the exact entry key.
    assert!(ds.delete(&[Value::Int(2)]).unwrap());
    ds.insert(rec(3, 30, 30.0, "cat")).unwrap();
    expect(
        &db,
        &[
            ("primary", "<-,2> <3>", &["<1> <2>"]),
            ("Age", "<-,20, 2> <30, 3>", &["<10, 1> <20, 2>"]),
            ("Loc", "<-,2> <3>", &["<1> <2>"]),
            (
                "Msg",
                "<-,\"cat\", 2> <\"cat\", 3> <-,\"dog\", 2>",
                &["<\"cat\", 1> <\"cat\", 2> <\"dog\", 2>"],
            ),
        ],
    );

    // Figure 2.7: the second flush. Antimatter reaches the B+-tree and R-tree
    // components; the inverted index writes primary key 2 to the new
    // component's deleted-key B+-tree instead.
    ds.flush().unwrap();
    expect(
        &db,
        &[
            ("primary", "", &["<-,2> <3>", "<1> <2>"]),
            ("Age", "", &["<-,20, 2> <30, 3>", "<10, 1> <20, 2>"]),
            ("Loc", "", &["<-,2> <3>", "<1> <2>"]),
            (
                "Msg",
                "",
                &[
                    "<\"cat\", 3> del{2}",
                    "<\"cat\", 1> <\"cat\", 2> <\"dog\", 2>",
                ],
            ),
        ],
    );

    // Figure 2.8: merging the two disk components of each index removes R2's
    // entries physically (antimatter and deleted keys are dropped too, since
    // nothing older remains).
    ds.compact().unwrap();
    expect(
        &db,
        &[
            ("primary", "", &["<1> <3>"]),
            ("Age", "", &["<10, 1> <30, 3>"]),
            ("Loc", "", &["<1> <3>"]),
            ("Msg", "", &["<\"cat\", 1> <\"cat\", 3>"]),
        ],
    );

    // Figure 2.3 (final state): delete R3 and insert R4, before the next flush.
    assert!(ds.delete(&[Value::Int(3)]).unwrap());
    ds.insert(rec(4, 40, 40.0, "dog")).unwrap();
    expect(
        &db,
        &[
            ("primary", "<-,3> <4>", &["<1> <3>"]),
            ("Age", "<-,30, 3> <40, 4>", &["<10, 1> <30, 3>"]),
            // R-tree entries sort by the Hilbert value of the point: (40, 40)
            // comes before (30, 30) on the curve.
            ("Loc", "<4> <-,3>", &["<1> <3>"]),
            (
                "Msg",
                "<-,\"cat\", 3> <\"dog\", 4>",
                &["<\"cat\", 1> <\"cat\", 3>"],
            ),
        ],
    );
    // And the queries see exactly R1 and R4.
    use silt::{Query, QueryOptions};
    let ids = |q: &str, query: Query| -> Vec<i64> {
        let mut v: Vec<i64> = ds
            .query(q, &query, QueryOptions::default())
            .unwrap()
            .map(|h| h.unwrap().pk[0].as_i64().unwrap())
            .collect();
        v.sort();
        v
    };
    assert_eq!(
        ids(
            "Loc",
            Query::Intersects(Geometry::rect(0.0, 0.0, 50.0, 50.0))
        ),
        vec![1, 4]
    );
    assert_eq!(
        ids(
            "Msg",
            Query::Text {
                text: "cat dog".into(),
                all: false
            }
        ),
        vec![1, 4]
    );
}
