//! The `silt` binary with secondary indexes: B+-tree, spatial, text and
//! recency indexes created, queried, maintained and dropped from the
//! command line, and the errors of their queries.

use super::*;

/// The `id` fields of JSON Lines output.
fn ids(stdout: &str) -> Vec<i64> {
    stdout
        .lines()
        .map(|l| {
            json(l)["id"]
                .as_i64()
                .unwrap_or_else(|| panic!("no id: {l}"))
        })
        .collect()
}

/// The primary keys of `--index-only` output (`{"pk": [id]}` lines whose
/// hits were answered from the index alone).
fn hits(stdout: &str) -> Vec<i64> {
    stdout
        .lines()
        .map(|l| {
            let v = json(l);
            assert_eq!(v.as_object().map(|o| o.len()), Some(1), "{l}");
            v["pk"][0].as_i64().unwrap_or_else(|| panic!("no pk: {l}"))
        })
        .collect()
}

#[test]
fn secondary_indexes_create_query_maintain_drop() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    expect(
        &db,
        &[
            "create-dataset",
            "people",
            "--key",
            "id",
            "--field",
            "id:int,name:string,age:int,city:string,score:double",
            "--partitions",
            "2",
        ],
        0,
    );
    // 60 people: age 20 + id % 7, city by id % 3, score id / 2; every tenth
    // one has no age (not indexed by an age index).
    let cities = ["oslo", "rome", "lyon"];
    let people: Vec<(i64, Option<i64>, &str)> = (1..=60)
        .map(|i| {
            let age = (i % 10 != 0).then_some(20 + i % 7);
            (i, age, cities[(i % 3) as usize])
        })
        .collect();
    let input = dir.path().join("people.jsonl");
    let text: String = people
        .iter()
        .map(|(id, age, city)| match age {
            Some(a) => format!(
                "{{\"id\": {id}, \"name\": \"p{id}\", \"age\": {a}, \"city\": \"{city}\", \"score\": {}}}\n",
                *id as f64 / 2.0
            ),
            None => format!("{{\"id\": {id}, \"name\": \"p{id}\", \"city\": \"{city}\"}}\n"),
        })
        .collect();
    std::fs::write(&input, text).unwrap();
    let r = expect(&db, &["load", "people", input.to_str().unwrap()], 0);
    assert!(r.stdout.contains("loaded 60 records"), "{}", r.stdout);

    // Bulk build over the loaded records: those without an age are skipped.
    let with_age = people.iter().filter(|p| p.1.is_some()).count();
    let r = expect(
        &db,
        &[
            "create-index",
            "people",
            "by_age",
            "--type",
            "btree",
            "--field",
            "age",
        ],
        0,
    );
    assert!(
        r.stdout
            .contains("created index `by_age` on dataset `people`"),
        "{}",
        r.stdout
    );
    assert!(
        r.stdout.contains(&format!("bulk-built {with_age} entries")),
        "{}",
        r.stdout
    );
    assert!(r.stdout.contains("fields: age"), "{}", r.stdout);
    // A composite index; the policy is the dataset's unless given.
    let r = expect(
        &db,
        &[
            "create-index",
            "people",
            "by_city_age",
            "--field",
            "city",
            "--field",
            "age",
            "--policy",
            "tiered(4)",
        ],
        0,
    );
    assert!(r.stdout.contains("tiered(4)"), "{}", r.stdout);
    assert!(r.stdout.contains("fields: city, age"), "{}", r.stdout);

    let expected = |pred: &dyn Fn(i64, Option<i64>, &str) -> bool| -> Vec<i64> {
        people
            .iter()
            .filter(|(id, age, city)| pred(*id, *age, city))
            .map(|p| p.0)
            .collect()
    };

    // Equality: records in primary key order, count in the summary.
    let r = expect(
        &db,
        &["query", "people", "--index", "by_age", "--eq", "22"],
        0,
    );
    let want = expected(&|_, a, _| a == Some(22));
    assert!(!want.is_empty());
    assert_eq!(ids(&r.stdout), want);
    for l in r.stdout.lines() {
        let v = json(l);
        assert_eq!(v["age"], 22);
        assert!(v["name"].is_string(), "whole records: {l}");
    }
    assert!(
        r.stderr.contains(&format!("{} records in ", want.len())),
        "{}",
        r.stderr
    );
    assert!(
        r.stderr
            .contains("access path: index by_age (validated through the primary)"),
        "{}",
        r.stderr
    );
    assert!(
        r.stderr.contains(&format!(
            "{} records fetched, 0 answered from the index",
            want.len()
        )),
        "{}",
        r.stderr
    );
    assert!(
        r.stderr.contains("index components touched"),
        "{}",
        r.stderr
    );
    assert!(!r.stderr.contains("leaf block"), "rtree only: {}", r.stderr);

    // Range, inclusive at both ends; open-ended; limited.
    let r = expect(
        &db,
        &[
            "query", "people", "--index", "by_age", "--from", "21", "--to", "23",
        ],
        0,
    );
    assert_eq!(
        ids(&r.stdout),
        expected(&|_, a, _| a.is_some_and(|a| (21..=23).contains(&a)))
    );
    let r = expect(
        &db,
        &["query", "people", "--index", "by_age", "--from", "25"],
        0,
    );
    assert_eq!(
        ids(&r.stdout),
        expected(&|_, a, _| a.is_some_and(|a| a >= 25))
    );
    let r = expect(
        &db,
        &["query", "people", "--index", "by_age", "--to", "20"],
        0,
    );
    assert_eq!(ids(&r.stdout), expected(&|_, a, _| a == Some(20)));
    let r = expect(&db, &["query", "people", "--index", "by_age"], 0);
    assert_eq!(r.stdout.lines().count(), with_age);
    let r = expect(
        &db,
        &[
            "query", "people", "--index", "by_age", "--from", "21", "--limit", "4",
        ],
        0,
    );
    assert_eq!(r.stdout.lines().count(), 4);
    assert!(r.stderr.contains("4 records in "), "{}", r.stderr);
    let r = expect(
        &db,
        &["query", "people", "--index", "by_age", "--eq", "99"],
        0,
    );
    assert!(r.stdout.is_empty(), "{}", r.stdout);
    assert!(r.stderr.contains("0 records in "), "{}", r.stderr);

    // Composite index: a prefix equality and a range within the prefix.
    let r = expect(
        &db,
        &["query", "people", "--index", "by_city_age", "--eq", "rome"],
        0,
    );
    assert_eq!(
        ids(&r.stdout),
        expected(&|_, a, c| c == "rome" && a.is_some())
    );
    let r = expect(
        &db,
        &[
            "query",
            "people",
            "--index",
            "by_city_age",
            "--from",
            "rome",
            "22",
            "--to",
            "rome",
            "24",
        ],
        0,
    );
    assert_eq!(
        ids(&r.stdout),
        expected(&|_, a, c| c == "rome" && a.is_some_and(|a| (22..=24).contains(&a)))
    );
    let r = expect(
        &db,
        &[
            "query",
            "people",
            "--index",
            "by_city_age",
            "--eq",
            "rome",
            "22",
        ],
        0,
    );
    assert_eq!(
        ids(&r.stdout),
        expected(&|_, a, c| c == "rome" && a == Some(22))
    );

    // Index-only: {"pk"} in primary key order, nothing else.
    let r = expect(
        &db,
        &[
            "query",
            "people",
            "--index",
            "by_city_age",
            "--eq",
            "lyon",
            "--index-only",
        ],
        0,
    );
    let want = expected(&|_, a, c| c == "lyon" && a.is_some());
    assert_eq!(hits(&r.stdout), want);
    assert!(
        r.stderr.contains(&format!("{} entries in ", want.len())),
        "{}",
        r.stderr
    );
    assert!(r.stderr.contains("access path: index-only"), "{}", r.stderr);
    assert!(
        r.stderr.contains(&format!(
            "0 records fetched, {} answered from the index",
            want.len()
        )),
        "{}",
        r.stderr
    );

    // Maintenance: an upsert moves a record, a delete removes it, a new
    // record appears.
    let upd = dir.path().join("upd.jsonl");
    std::fs::write(
        &upd,
        concat!(
            "{\"id\": 1, \"name\": \"p1\", \"age\": 99, \"city\": \"oslo\"}\n",
            "{\"id\": 100, \"name\": \"p100\", \"age\": 99, \"city\": \"rome\"}\n",
            "{\"id\": 10, \"name\": \"p10\", \"age\": 99, \"city\": \"lyon\"}\n",
        ),
    )
    .unwrap();
    expect(
        &db,
        &["load", "people", upd.to_str().unwrap(), "--mode", "upsert"],
        0,
    );
    let r = expect(
        &db,
        &["query", "people", "--index", "by_age", "--eq", "99"],
        0,
    );
    assert_eq!(ids(&r.stdout), vec![1, 10, 100]);
    // Person 1 was 21 (20 + 1 % 7): no longer found there.
    let r = expect(
        &db,
        &["query", "people", "--index", "by_age", "--eq", "21"],
        0,
    );
    let mut want21 = expected(&|_, a, _| a == Some(21));
    assert!(want21.contains(&1));
    want21.retain(|id| *id != 1);
    assert_eq!(ids(&r.stdout), want21);
    let r = expect(
        &db,
        &[
            "query",
            "people",
            "--index",
            "by_age",
            "--eq",
            "99",
            "--index-only",
        ],
        0,
    );
    assert_eq!(hits(&r.stdout), vec![1, 10, 100]);
    expect(&db, &["delete", "people", "10"], 0);
    let r = expect(
        &db,
        &["query", "people", "--index", "by_age", "--eq", "99"],
        0,
    );
    assert_eq!(ids(&r.stdout), vec![1, 100]);
    let r = expect(
        &db,
        &[
            "query",
            "people",
            "--index",
            "by_city_age",
            "--eq",
            "oslo",
            "99",
            "--index-only",
        ],
        0,
    );
    assert_eq!(hits(&r.stdout), vec![1]);

    // Stats: one column per index in the table; the JSON lists every tree.
    let r = expect(&db, &["stats", "people"], 0);
    assert!(
        r.stdout.contains("index by_age: btree on age"),
        "{}",
        r.stdout
    );
    assert!(
        r.stdout.contains("index by_city_age: btree on city, age"),
        "{}",
        r.stdout
    );
    let header = r
        .stdout
        .lines()
        .find(|l| l.contains("total"))
        .unwrap_or_else(|| panic!("no header: {}", r.stdout));
    let cols: Vec<&str> = header.split_whitespace().collect();
    assert_eq!(cols, vec!["primary", "by_age", "by_city_age", "total"]);
    let r = expect(&db, &["stats", "people", "--json"], 0);
    let st = json(&r.stdout);
    let names: Vec<&str> = st["datasets"][0]["indexes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    for n in [
        "people/p0/primary",
        "people/p1/primary",
        "people/p0/by_age",
        "people/p1/by_age",
        "people/p0/by_city_age",
        "people/p1/by_city_age",
    ] {
        assert!(names.contains(&n), "{n}: {names:?}");
    }

    // Errors: bound longer than the index, wrongly typed value, duplicate
    // index, unknown type, no such dataset.
    let r = expect(
        &db,
        &["query", "people", "--index", "by_age", "--eq", "1", "2"],
        2,
    );
    assert!(r.stderr.contains("1 field (age)"), "{}", r.stderr);
    let r = expect(
        &db,
        &["query", "people", "--index", "by_age", "--eq", "old"],
        2,
    );
    assert!(r.stderr.contains("`age`"), "{}", r.stderr);
    let r = expect(
        &db,
        &["create-index", "people", "by_age", "--field", "age"],
        2,
    );
    assert!(r.stderr.contains("already exists"), "{}", r.stderr);
    let r = expect(
        &db,
        &[
            "create-index",
            "people",
            "geo",
            "--type",
            "rtree",
            "--field",
            "age",
        ],
        2,
    );
    assert!(
        r.stderr
            .contains("field `age` is declared int; an rtree index needs a geometry field"),
        "{}",
        r.stderr
    );
    let r = expect(
        &db,
        &[
            "create-index",
            "people",
            "x",
            "--type",
            "hash",
            "--field",
            "age",
        ],
        2,
    );
    assert!(r.stderr.contains("available: btree"), "{}", r.stderr);
    expect(&db, &["create-index", "people", "x"], 2);
    expect(
        &db,
        &[
            "query", "people", "--index", "by_age", "--eq", "1", "--from", "0",
        ],
        2,
    );
    expect(&db, &["query", "nobody", "--index", "by_age"], 1);

    // Drop: the index is gone, queries through it say so; the records stay.
    let r = expect(&db, &["drop-index", "people", "by_age"], 0);
    assert!(r.stdout.contains("dropped index `by_age`"), "{}", r.stdout);
    let r = expect(
        &db,
        &["query", "people", "--index", "by_age", "--eq", "99"],
        1,
    );
    assert!(
        r.stderr
            .contains("no index named `by_age` on dataset `people`"),
        "{}",
        r.stderr
    );
    assert!(r.stderr.contains("by_city_age"), "{}", r.stderr);
    let r = expect(&db, &["drop-index", "people", "by_age"], 1);
    assert!(r.stderr.contains("no index named `by_age`"), "{}", r.stderr);
    expect(&db, &["get", "people", "1"], 0);
    let r = expect(&db, &["stats", "people", "--json"], 0);
    assert!(!r.stdout.contains("by_age\""), "{}", r.stdout);
    // The remaining index still answers.
    let r = expect(
        &db,
        &[
            "query",
            "people",
            "--index",
            "by_city_age",
            "--eq",
            "rome",
            "99",
        ],
        0,
    );
    assert_eq!(ids(&r.stdout), vec![100]);
}

#[test]
fn create_dataset_with_indexes() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    // A bad index spec is refused before the database is created.
    let r = expect(
        &db,
        &["create-dataset", "t", "--key", "id", "--index", "by_x"],
        2,
    );
    assert!(r.stderr.contains("NAME:FIELD"), "{}", r.stderr);
    assert!(!db.exists());
    expect(
        &db,
        &[
            "create-dataset",
            "t",
            "--key",
            "id",
            "--index",
            "a:x",
            "--index",
            "a:y",
        ],
        2,
    );
    assert!(!db.exists());
    let r = expect(
        &db,
        &[
            "create-dataset",
            "t",
            "--key",
            "id",
            "--field",
            "id:int,x:int",
            "--index",
            "by_x:x",
            "--index",
            "by_xy:x,y",
        ],
        0,
    );
    assert!(r.stdout.contains("index by_x: btree on x"), "{}", r.stdout);
    assert!(
        r.stdout.contains("index by_xy: btree on x, y"),
        "{}",
        r.stdout
    );
    let input = dir.path().join("t.jsonl");
    std::fs::write(
        &input,
        "{\"id\": 1, \"x\": 5, \"y\": \"b\"}\n{\"id\": 2, \"x\": 5, \"y\": \"a\"}\n{\"id\": 3, \"x\": 6}\n",
    )
    .unwrap();
    expect(&db, &["load", "t", input.to_str().unwrap()], 0);
    let r = expect(&db, &["query", "t", "--index", "by_x", "--eq", "5"], 0);
    assert_eq!(ids(&r.stdout), vec![1, 2]);
    // The undeclared y: "a" is text either way.
    let r = expect(
        &db,
        &[
            "query",
            "t",
            "--index",
            "by_xy",
            "--eq",
            "5",
            "a",
            "--index-only",
        ],
        0,
    );
    assert_eq!(hits(&r.stdout), vec![2]);
    // Record 3 has no y: only in by_x.
    let r = expect(&db, &["query", "t", "--index", "by_xy", "--index-only"], 0);
    assert_eq!(r.stdout.lines().count(), 2);
    let r = expect(&db, &["query", "t", "--index", "by_x", "--from", "6"], 0);
    assert_eq!(ids(&r.stdout), vec![3]);
}

/// The `id` fields of JSON Lines output, with the `_distance_m` of each.
fn ids_with_distance(stdout: &str) -> Vec<(i64, f64)> {
    stdout
        .lines()
        .map(|l| {
            let v = json(l);
            (
                v["id"].as_i64().unwrap_or_else(|| panic!("no id: {l}")),
                v["_distance_m"]
                    .as_f64()
                    .unwrap_or_else(|| panic!("no _distance_m: {l}")),
            )
        })
        .collect()
}

/// The first primary key value of each `--index-only` line, whatever else
/// the line carries.
fn pks(stdout: &str) -> Vec<i64> {
    stdout
        .lines()
        .map(|l| {
            json(l)["pk"][0]
                .as_i64()
                .unwrap_or_else(|| panic!("no pk: {l}"))
        })
        .collect()
}

/// Places in every geometry form the loader accepts, with some text.
const PLACES: &str = concat!(
    "{\"id\": 1, \"loc\": {\"type\": \"Point\", \"coordinates\": [2.3522, 48.8566]}, \"name\": \"Paris cafe, great coffee\"}\n",
    "{\"id\": 2, \"loc\": \"POINT(2.2945 48.8584)\", \"name\": \"Tower view at night\"}\n",
    "{\"id\": 3, \"loc\": [13.405, 52.52], \"name\": \"Berlin coffee roastery\"}\n",
    "{\"id\": 4, \"loc\": [179.5, -17.7], \"name\": \"Fiji sunrise coffee\"}\n",
    "{\"id\": 5, \"loc\": [-179.5, -14.3], \"name\": \"Samoa beach\"}\n",
    "{\"id\": 6, \"loc\": {\"lon\": -0.1276, \"lat\": 51.5072}, \"name\": \"London Tea House\"}\n",
    "{\"id\": 7, \"name\": \"Nowhere coffee shop\"}\n",
    "{\"id\": 8, \"loc\": [2.36, 48.85], \"name\": \"Marais bakery\"}\n",
);

#[test]
fn spatial_and_text_indexes() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    // An rtree index from create-dataset (NAME:TYPE:FIELD): antimatter by default.
    let r = expect(
        &db,
        &[
            "create-dataset",
            "places",
            "--key",
            "id",
            "--field",
            "id:int,loc:point,name:string",
            "--partitions",
            "2",
            "--index",
            "am:rtree:loc",
        ],
        0,
    );
    assert!(
        r.stdout
            .contains("index am: rtree on loc (reconcile antimatter)"),
        "{}",
        r.stdout
    );
    let input = dir.path().join("places.jsonl");
    std::fs::write(&input, PLACES).unwrap();
    let r = expect(&db, &["load", "places", input.to_str().unwrap()], 0);
    assert!(r.stdout.contains("loaded 8 records"), "{}", r.stdout);

    // The same geometries under deleted-key reconciliation, bulk-built; the
    // text indexes.
    let r = expect(
        &db,
        &[
            "create-index",
            "places",
            "dk",
            "--type",
            "rtree",
            "--field",
            "loc",
            "--reconcile",
            "deleted-keys",
        ],
        0,
    );
    assert!(r.stdout.contains("type: rtree"), "{}", r.stdout);
    assert!(r.stdout.contains("reconcile: deleted-keys"), "{}", r.stdout);
    assert!(r.stdout.contains("bulk-built 7 entries"), "{}", r.stdout);
    let r = expect(
        &db,
        &[
            "create-index",
            "places",
            "words",
            "--type",
            "keyword",
            "--field",
            "name",
        ],
        0,
    );
    assert!(r.stdout.contains("reconcile: deleted-keys"), "{}", r.stdout);
    let r = expect(
        &db,
        &[
            "create-index",
            "places",
            "grams",
            "--type",
            "ngram",
            "--field",
            "name",
            "--gram",
            "3",
            "--reconcile",
            "antimatter",
        ],
        0,
    );
    assert!(
        r.stdout.contains("gram: 3, reconcile: antimatter"),
        "{}",
        r.stdout
    );
    let r = expect(&db, &["stats", "places"], 0);
    for needle in [
        "index am: rtree on loc (reconcile antimatter)",
        "index dk: rtree on loc (reconcile deleted-keys)",
        "index words: keyword on name (reconcile deleted-keys)",
        "index grams: ngram on name (gram 3, reconcile antimatter)",
    ] {
        assert!(r.stdout.contains(needle), "{needle}: {}", r.stdout);
    }

    let q = |index: &str, args: &[&str]| -> Run {
        let mut all = vec!["query", "places", "--index", index];
        all.extend_from_slice(args);
        expect(&db, &all, 0)
    };
    for index in ["am", "dk"] {
        // A box around Paris: records in primary key order, whole.
        let r = q(index, &["--bbox", "2,48,3,49"]);
        assert_eq!(ids(&r.stdout), vec![1, 2, 8], "{index}");
        assert!(json(r.stdout.lines().next().unwrap())["name"].is_string());
        assert!(r.stderr.contains("3 records in "), "{}", r.stderr);
        assert!(
            r.stderr.contains(&format!(
                "access path: index {index} (validated through the primary)"
            )),
            "{}",
            r.stderr
        );
        assert!(r.stderr.contains("leaf blocks read"), "{}", r.stderr);
        assert!(r.stderr.contains("3 records fetched"), "{}", r.stderr);
        // A box crossing the antimeridian (MINX > MAXX) finds both sides;
        // one stopping at 180 only the east.
        let r = q(index, &["--bbox", "170,-20,-170,-10"]);
        assert_eq!(ids(&r.stdout), vec![4, 5], "{index}");
        let r = q(index, &["--bbox", "170,-20,180,-10"]);
        assert_eq!(ids(&r.stdout), vec![4], "{index}");
        let r = q(index, &["--bbox", "-10,35,30,60", "--limit", "2"]);
        assert_eq!(ids(&r.stdout), vec![1, 2], "{index}");
        // --intersects with WKT and with GeoJSON.
        let r = q(
            index,
            &["--intersects", "POLYGON((2 48, 3 48, 3 49, 2 49, 2 48))"],
        );
        assert_eq!(ids(&r.stdout), vec![1, 2, 8], "{index}");
        let r = q(
            index,
            &[
                "--intersects",
                "{\"type\": \"Polygon\", \"coordinates\": [[[13, 52], [14, 52], [14, 53], [13, 53], [13, 52]]]}",
            ],
        );
        assert_eq!(ids(&r.stdout), vec![3], "{index}");
        // Within a distance: in primary key order, each with its distance.
        let r = q(index, &["--near", "2.35,48.86", "--within-m", "2000"]);
        let got = ids_with_distance(&r.stdout);
        assert_eq!(
            got.iter().map(|g| g.0).collect::<Vec<_>>(),
            vec![1, 8],
            "{index}"
        );
        assert!(got.iter().all(|g| g.1 > 0.0 && g.1 <= 2000.0), "{got:?}");
        // The k nearest, nearest first.
        let r = q(index, &["--near", "2.35,48.86", "--k", "3"]);
        let got = ids_with_distance(&r.stdout);
        assert_eq!(
            got.iter().map(|g| g.0).collect::<Vec<_>>(),
            vec![1, 8, 2],
            "{index}"
        );
        assert!(got.windows(2).all(|w| w[0].1 <= w[1].1), "{got:?}");
        // Index-only: points decide alone.
        let r = q(index, &["--near", "2.35,48.86", "--k", "3", "--index-only"]);
        let lines: Vec<serde_json::Value> = r.stdout.lines().map(json).collect();
        assert_eq!(pks(&r.stdout), vec![1, 8, 2], "{index}");
        for l in &lines {
            assert!(l["distance_m"].as_f64().is_some(), "{l}");
            assert!(l.get("record").is_none(), "{l}");
        }
        assert!(
            r.stderr
                .contains(&format!("access path: index-only (index {index})")),
            "{}",
            r.stderr
        );
        assert!(
            r.stderr
                .contains("0 records fetched, 3 answered from the index"),
            "{}",
            r.stderr
        );
        let r = q(index, &["--bbox", "170,-20,-170,-10", "--index-only"]);
        assert_eq!(hits(&r.stdout), vec![4, 5]);
    }

    // Keyword: all the words, or any with --any; index-only answers alone.
    let r = q("words", &["--text", "coffee"]);
    assert_eq!(ids(&r.stdout), vec![1, 3, 4, 7]);
    let r = q("words", &["--text", "COFFEE berlin"]);
    assert_eq!(ids(&r.stdout), vec![3]);
    let r = q("words", &["--text", "tea beach", "--any"]);
    assert_eq!(ids(&r.stdout), vec![5, 6]);
    let r = q("words", &["--text", "coffee", "--index-only"]);
    assert_eq!(hits(&r.stdout), vec![1, 3, 4, 7]);
    assert!(!r.stderr.contains("leaf block"), "{}", r.stderr);
    // N-gram: a case-insensitive substring; candidates are always checked
    // against the record, so index-only lines carry it.
    let r = q("grams", &["--text", "offe"]);
    assert_eq!(ids(&r.stdout), vec![1, 3, 4, 7]);
    let r = q("grams", &["--text", "EA HO"]);
    assert_eq!(ids(&r.stdout), vec![6]);
    let r = q("grams", &["--text", "tea ho", "--index-only"]);
    let l = json(&r.stdout);
    assert_eq!(l["pk"], serde_json::json!([6]));
    assert_eq!(l["record"]["name"], "London Tea House");
    assert!(
        r.stderr.contains("1 hit validated through the primary"),
        "{}",
        r.stderr
    );

    // Spatial join: every geometry of `cities` probes the index.
    expect(
        &db,
        &[
            "create-dataset",
            "cities",
            "--key",
            "name",
            "--field",
            "name:string,centre:geometry",
        ],
        0,
    );
    let cities = dir.path().join("cities.jsonl");
    std::fs::write(
        &cities,
        concat!(
            "{\"name\": \"berlin\", \"centre\": \"POINT(13.4 52.52)\"}\n",
            "{\"name\": \"france\", \"centre\": \"POLYGON((-5 42, 8 42, 8 51, -5 51, -5 42))\"}\n",
            "{\"name\": \"nowhere\"}\n",
            "{\"name\": \"paris\", \"centre\": [2.35, 48.86]}\n",
        ),
    )
    .unwrap();
    expect(&db, &["load", "cities", cities.to_str().unwrap()], 0);
    let pairs = |stdout: &str| -> Vec<(String, i64)> {
        stdout
            .lines()
            .map(|l| {
                let v = json(l);
                let id = v["id"].as_i64().or_else(|| v["pk"][0].as_i64());
                (
                    v["probe"].as_str().unwrap_or_default().to_owned(),
                    id.unwrap_or_else(|| panic!("no id: {l}")),
                )
            })
            .collect()
    };
    let r = q("am", &["--join", "cities", "--join-field", "centre"]);
    assert_eq!(
        pairs(&r.stdout),
        vec![
            ("france".to_owned(), 1),
            ("france".to_owned(), 2),
            ("france".to_owned(), 8)
        ]
    );
    assert!(r.stderr.contains("3 pairs in "), "{}", r.stderr);
    assert!(
        r.stderr.contains("join: 3 probes from `cities`.`centre`"),
        "{}",
        r.stderr
    );
    assert!(r.stderr.contains("1 without `centre`"), "{}", r.stderr);
    let r = q(
        "dk",
        &[
            "--join",
            "cities",
            "--join-field",
            "centre",
            "--within-m",
            "2000",
        ],
    );
    assert_eq!(
        pairs(&r.stdout),
        vec![
            ("berlin".to_owned(), 3),
            ("paris".to_owned(), 1),
            ("paris".to_owned(), 8)
        ]
    );
    for l in r.stdout.lines() {
        assert!(json(l)["_distance_m"].as_f64().is_some(), "{l}");
    }
    assert!(
        r.stderr.contains("1 whose `centre` is not a point"),
        "{}",
        r.stderr
    );
    let r = q(
        "am",
        &[
            "--join",
            "cities",
            "--join-field",
            "centre",
            "--within-m",
            "2000",
            "--index-only",
            "--limit",
            "2",
        ],
    );
    assert_eq!(
        pairs(&r.stdout),
        vec![("berlin".to_owned(), 3), ("paris".to_owned(), 1)]
    );

    // Maintenance under both reconciliations: a delete and a move.
    expect(&db, &["delete", "places", "8"], 0);
    let moved = dir.path().join("moved.jsonl");
    std::fs::write(
        &moved,
        "{\"id\": 2, \"loc\": [13.41, 52.52], \"name\": \"Tower moved to Berlin\"}\n",
    )
    .unwrap();
    expect(
        &db,
        &[
            "load",
            "places",
            moved.to_str().unwrap(),
            "--mode",
            "upsert",
        ],
        0,
    );
    for round in ["before compaction", "after compaction"] {
        for index in ["am", "dk"] {
            let r = q(index, &["--bbox", "2,48,3,49"]);
            assert_eq!(ids(&r.stdout), vec![1], "{index} {round}");
            let r = q(index, &["--bbox", "2,48,3,49", "--index-only"]);
            assert_eq!(pks(&r.stdout), vec![1], "{index} {round}");
            let r = q(index, &["--near", "13.4,52.52", "--k", "2"]);
            let mut got = ids(&r.stdout);
            got.sort_unstable();
            assert_eq!(got, vec![2, 3], "{index} {round}");
        }
        let r = q("words", &["--text", "tower"]);
        assert_eq!(ids(&r.stdout), vec![2], "{round}");
        let r = q("words", &["--text", "night"]);
        assert!(r.stdout.is_empty(), "{round}: {}", r.stdout);
        let r = q("grams", &["--text", "bakery"]);
        assert!(r.stdout.is_empty(), "{round}: {}", r.stdout);
        expect(&db, &["compact", "places"], 0);
    }
}

#[test]
fn spatial_and_text_query_errors() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    expect(
        &db,
        &[
            "create-dataset",
            "places",
            "--key",
            "id",
            "--field",
            "id:int,loc:point,name:string",
            "--index",
            "loc:rtree:loc",
            "--index",
            "words:keyword:name",
            "--index",
            "by_name:name",
        ],
        0,
    );
    let input = dir.path().join("places.jsonl");
    std::fs::write(&input, PLACES).unwrap();
    expect(&db, &["load", "places", input.to_str().unwrap()], 0);

    // Each case: the arguments after `query places`, then what the error says.
    let cases: &[(&[&str], &str)] = &[
        (
            &["--index", "loc", "--bbox", "1,2,3"],
            "needs 4: --bbox MINX,MINY,MAXX,MAXY",
        ),
        (
            &["--index", "loc", "--bbox", "1,2,x,4"],
            "MAXX `x` is not a finite number",
        ),
        (
            &["--index", "loc", "--bbox", "0,10,1,5"],
            "MINY 10 is greater than MAXY 5",
        ),
        (
            &["--index", "loc", "--near", "10,95", "--k", "3"],
            "latitude 95 is outside [-90, 90]",
        ),
        (
            &["--index", "loc", "--near", "10,50", "--k", "0"],
            "--k 0 asks for no records",
        ),
        (
            &["--index", "loc", "--near", "10,50"],
            "--near needs --within-m METRES",
        ),
        (
            &[
                "--index",
                "loc",
                "--near",
                "10,50",
                "--k",
                "2",
                "--within-m",
                "5",
            ],
            "give one",
        ),
        (
            &["--index", "loc", "--near", "10,50", "--within-m", "-1"],
            "0 or more",
        ),
        (
            &["--index", "loc", "--within-m", "5"],
            "--within-m needs --near",
        ),
        (&["--index", "loc", "--k", "5"], "--k needs --near"),
        (
            &["--index", "loc", "--intersects", "POINT(1)"],
            "--intersects: ",
        ),
        (
            &["--index", "loc", "--bbox", "0,0,1,1", "--text", "x"],
            "two different access paths",
        ),
        (
            &["--index", "loc", "--text", "coffee"],
            "needs a keyword or ngram index",
        ),
        (&["--index", "loc"], "say what to look for with --bbox"),
        (
            &["--index", "loc", "--join", "places"],
            "--join needs --join-field",
        ),
        (
            &["--index", "loc", "--join-field", "loc"],
            "--join-field goes with --join",
        ),
        (
            &["--index", "loc", "--join", "places", "--join-field", "name"],
            "declared string",
        ),
        (
            &["--index", "words", "--near", "1,2", "--k", "1"],
            "needs an rtree or dhvb index",
        ),
        (
            &["--index", "words", "--text", "!!"],
            "nothing to search for",
        ),
        (&["--index", "words", "--any"], "--any goes with --text"),
        (
            &["--index", "by_name", "--bbox", "0,0,1,1"],
            "query this index with --eq",
        ),
    ];
    for (args, needle) in cases {
        let mut all = vec!["query", "places"];
        all.extend_from_slice(args);
        let r = expect(&db, &all, 2);
        assert!(r.stderr.starts_with("error: "), "{args:?}: {}", r.stderr);
        assert!(r.stderr.contains(needle), "{args:?}: {}", r.stderr);
        assert!(r.stdout.is_empty(), "{args:?}: {}", r.stdout);
    }
    let r = expect(
        &db,
        &[
            "query",
            "places",
            "--index",
            "loc",
            "--join",
            "nope",
            "--join-field",
            "x",
        ],
        1,
    );
    assert!(r.stderr.contains("no dataset named `nope`"), "{}", r.stderr);

    let cases: &[(&[&str], &str)] = &[
        (
            &["x", "--type", "hash", "--field", "name"],
            "unknown index type `hash`",
        ),
        (
            &["x", "--type", "rtree", "--field", "name"],
            "needs a geometry field",
        ),
        (
            &["x", "--type", "rtree", "--field", "nope"],
            "has no declared type",
        ),
        (
            &["x", "--type", "keyword", "--field", "loc"],
            "needs a text field",
        ),
        (
            &["x", "--type", "btree", "--field", "loc"],
            "use --type rtree",
        ),
        (
            &["x", "--type", "rtree", "--field", "loc,name"],
            "exactly one field",
        ),
        (
            &["x", "--type", "keyword", "--field", "name", "--gram", "3"],
            "--gram",
        ),
        (
            &["x", "--type", "ngram", "--field", "name", "--gram", "0"],
            "between 1 and 32",
        ),
        (
            &["x", "--field", "name", "--reconcile", "antimatter"],
            "always reconciles",
        ),
        (
            &[
                "x",
                "--type",
                "rtree",
                "--field",
                "loc",
                "--reconcile",
                "foo",
            ],
            "unknown --reconcile `foo`",
        ),
        (
            &[
                "x", "--type", "keyword", "--field", "name", "--space", "0,0,1,1",
            ],
            "--space",
        ),
        (
            &[
                "x", "--type", "rtree", "--field", "loc", "--space", "1,1,0,0",
            ],
            "MINX must be below MAXX",
        ),
        (
            &[
                "x", "--type", "keyword", "--field", "name", "--policy", "leveled",
            ],
            "add --reconcile antimatter",
        ),
    ];
    for (args, needle) in cases {
        let mut all = vec!["create-index", "places"];
        all.extend_from_slice(args);
        let r = expect(&db, &all, 2);
        assert!(r.stderr.contains(needle), "{args:?}: {}", r.stderr);
    }
    // A leveled keyword index is fine with antimatter.
    expect(
        &db,
        &[
            "create-index",
            "places",
            "x",
            "--type",
            "keyword",
            "--field",
            "name",
            "--policy",
            "leveled",
            "--reconcile",
            "antimatter",
        ],
        0,
    );
    // create-dataset checks NAME:TYPE:FIELD before creating anything.
    let db2 = dir.path().join("db2");
    for (spec, needle) in [
        ("g:rtree:loc", "has no declared type"),
        ("g:hash:loc", "unknown index type"),
        ("g:rtree:a:b", "NAME:TYPE:FIELD"),
    ] {
        let r = expect(
            &db2,
            &["create-dataset", "t", "--key", "id", "--index", spec],
            2,
        );
        assert!(r.stderr.contains(needle), "{spec}: {}", r.stderr);
    }
    assert!(!db2.exists());
}

#[test]
fn recency_indexes_create_query_maintain() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    expect(
        &db,
        &[
            "create-dataset",
            "tweets",
            "--key",
            "id",
            "--field",
            "id:int,user_id:int,created_at:int",
            "--partitions",
            "2",
        ],
        0,
    );
    let input = dir.path().join("tweets.jsonl");
    let mut lines = String::new();
    for i in 1..=60 {
        lines.push_str(&format!(
            "{{\"id\": {i}, \"user_id\": {}, \"created_at\": {}}}\n",
            i % 3,
            1_000 + i
        ));
    }
    std::fs::write(&input, lines).unwrap();
    expect(&db, &["load", "tweets", input.to_str().unwrap()], 0);
    for t in ["embedded", "eager", "lazy", "composite"] {
        let r = expect(
            &db,
            &[
                "create-index",
                "tweets",
                &format!("u_{t}"),
                "--type",
                t,
                "--field",
                "user_id",
            ],
            0,
        );
        assert!(r.stdout.contains(&format!("type: {t}")), "{}", r.stdout);
    }
    // A new record and an update move to the front; a delete leaves.
    let more = dir.path().join("more.jsonl");
    std::fs::write(
        &more,
        "{\"id\": 100, \"user_id\": 1, \"created_at\": 2000}\n{\"id\": 4, \"user_id\": 1, \"created_at\": 2001}\n",
    )
    .unwrap();
    expect(
        &db,
        &["load", "tweets", more.to_str().unwrap(), "--mode", "upsert"],
        0,
    );
    expect(&db, &["delete", "tweets", "58"], 0);
    for t in ["embedded", "eager", "lazy", "composite"] {
        let index = format!("u_{t}");
        let r = expect(
            &db,
            &[
                "query", "tweets", "--index", &index, "--recent", "--eq", "1", "--k", "3",
            ],
            0,
        );
        assert_eq!(ids(&r.stdout), vec![4, 100, 55], "{t}: {}", r.stdout);
        assert!(r.stderr.contains("most recent first"), "{}", r.stderr);
        // All of them, newest first.
        let r = expect(
            &db,
            &[
                "query", "tweets", "--index", &index, "--recent", "--eq", "1",
            ],
            0,
        );
        assert_eq!(ids(&r.stdout).len(), 20, "{t}");
        let r = expect(
            &db,
            &[
                "query", "tweets", "--index", &index, "--recent", "--from", "0", "--to", "1",
                "--k", "2",
            ],
            0,
        );
        assert_eq!(ids(&r.stdout), vec![4, 100], "{t}");
    }
    // Embedded, eager and lazy indexes answer --eq as a recency query.
    let r = expect(
        &db,
        &["query", "tweets", "--index", "u_lazy", "--eq", "2"],
        0,
    );
    assert_eq!(ids(&r.stdout).first(), Some(&59));
    let r = expect(
        &db,
        &[
            "create-index",
            "tweets",
            "by_time",
            "--type",
            "embedded",
            "--field",
            "created_at",
            "--bits-per-key",
            "20",
        ],
        0,
    );
    assert!(r.stdout.contains("bits per key: 20"), "{}", r.stdout);
    let r = expect(
        &db,
        &[
            "query", "tweets", "--index", "by_time", "--recent", "--from", "1010", "--to", "1020",
            "--k", "1",
        ],
        0,
    );
    assert_eq!(ids(&r.stdout), vec![20]);
    // Errors say what to do.
    let r = expect(
        &db,
        &[
            "query", "tweets", "--index", "u_lazy", "--eq", "1", "--k", "3",
        ],
        2,
    );
    assert!(r.stderr.contains("--recent"), "{}", r.stderr);
    let r = expect(
        &db,
        &[
            "create-index",
            "tweets",
            "x",
            "--type",
            "lazy",
            "--field",
            "user_id",
            "--bits-per-key",
            "10",
        ],
        2,
    );
    assert!(r.stderr.contains("--type embedded"), "{}", r.stderr);
    let r = expect(
        &db,
        &["query", "tweets", "--index", "u_eager", "--text", "a"],
        2,
    );
    assert!(r.stderr.contains("--recent"), "{}", r.stderr);
}
