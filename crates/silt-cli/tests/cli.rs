//! End-to-end tests of the `silt` binary.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Output, Stdio};

#[path = "cli/indexes.rs"]
mod indexes;

fn silt(db: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_silt"));
    c.env_remove("SILT_DB").arg("--db").arg(db);
    c
}

struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

fn run(db: &Path, args: &[&str]) -> Run {
    let out: Output = silt(db).args(args).output().expect("run silt");
    let r = Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    };
    assert!(
        !r.stderr.contains("panicked"),
        "silt {args:?} panicked:\n{}",
        r.stderr
    );
    r
}

/// Run and expect exit code `code`; return the run for further checks.
fn expect(db: &Path, args: &[&str], code: i32) -> Run {
    let r = run(db, args);
    assert_eq!(
        r.code, code,
        "silt {args:?}: expected exit {code}, got {}\nstdout:\n{}\nstderr:\n{}",
        r.code, r.stdout, r.stderr
    );
    r
}

fn json(text: &str) -> serde_json::Value {
    serde_json::from_str(text.trim()).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"))
}

#[test]
fn create_load_get_scan_delete_stats_compact() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let r = expect(
        &db,
        &[
            "create-dataset",
            "people",
            "--key",
            "id",
            "--field",
            "id:int",
            "--field",
            "name:string",
            "--field",
            "score:double",
        ],
        0,
    );
    assert!(
        r.stdout.contains("created dataset `people`"),
        "{}",
        r.stdout
    );

    let input = dir.path().join("people.jsonl");
    std::fs::write(
        &input,
        concat!(
            "{\"id\": 1, \"name\": \"alice\", \"score\": 3.5}\n",
            "{\"id\": 2, \"name\": \"bob\", \"score\": 4}\n",
            "{\"id\": 3, \"name\": \"carol\" \"score\": 1}\n",
            "{\"id\": 4, \"name\": \"dave\", \"score\": 2.5, \"tags\": [\"x\"]}\n",
            "{\"id\": 5, \"name\": \"eve\", \"score\": \"high\"}\n",
            "\n",
            "{\"id\": 6, \"name\": \"frank\"}\n",
            "{\"id\": 7, \"name\": \"grace\", \"score\": -1}\n",
        ),
    )
    .unwrap();
    let r = expect(&db, &["load", "people", input.to_str().unwrap()], 0);
    assert!(
        r.stderr.contains("line 3: cannot parse JSON record"),
        "{}",
        r.stderr
    );
    assert!(r.stderr.contains("line 5: "), "{}", r.stderr);
    assert!(r.stderr.contains("field `score`"), "{}", r.stderr);
    assert!(!r.stderr.contains("line 1:"), "{}", r.stderr);
    assert!(
        r.stdout.contains("loaded 5 records (2 failed)"),
        "{}",
        r.stdout
    );

    let r = expect(&db, &["get", "people", "1"], 0);
    assert_eq!(
        json(&r.stdout),
        serde_json::json!({"id": 1, "name": "alice", "score": 3.5})
    );
    // The int 4 was stored as the declared double.
    let r = expect(&db, &["get", "people", "2"], 0);
    assert_eq!(json(&r.stdout)["score"], serde_json::json!(4.0));
    // A key of the wrong type is an input error that names the field.
    let r = expect(&db, &["get", "people", "abc"], 2);
    assert!(r.stderr.starts_with("error: "), "{}", r.stderr);
    assert!(r.stderr.contains("`id`"), "{}", r.stderr);
    // Wrong number of key values.
    expect(&db, &["get", "people", "1", "2"], 2);

    let r = expect(&db, &["scan", "people", "--limit", "2"], 0);
    let ids: Vec<i64> = r
        .stdout
        .lines()
        .map(|l| json(l)["id"].as_i64().unwrap())
        .collect();
    assert_eq!(ids, vec![1, 2]);
    assert!(r.stderr.contains("2 records"), "{}", r.stderr);

    let r = expect(&db, &["scan", "people", "--from", "2", "--to", "6"], 0);
    let ids: Vec<i64> = r
        .stdout
        .lines()
        .map(|l| json(l)["id"].as_i64().unwrap())
        .collect();
    assert_eq!(ids, vec![2, 4, 6]);

    let r = expect(&db, &["delete", "people", "2"], 0);
    assert!(r.stdout.contains("deleted"), "{}", r.stdout);
    let r = expect(&db, &["delete", "people", "2"], 1);
    assert!(r.stderr.contains("not found"), "{}", r.stderr);
    let r = expect(&db, &["get", "people", "2"], 1);
    assert!(r.stderr.contains("not found"), "{}", r.stderr);
    assert!(r.stdout.is_empty(), "{}", r.stdout);

    let r = expect(&db, &["stats", "--json"], 0);
    let st = json(&r.stdout);
    let datasets = st["datasets"].as_array().unwrap();
    assert_eq!(datasets.len(), 1);
    assert_eq!(datasets[0]["name"], "people");
    assert!(
        !datasets[0]["indexes"][0]["components"]
            .as_array()
            .unwrap()
            .is_empty()
    );

    let r = expect(&db, &["stats"], 0);
    assert!(r.stdout.contains("dataset people"), "{}", r.stdout);
    assert!(r.stdout.contains("write amplification"), "{}", r.stdout);
    assert!(r.stdout.contains("hit ratio"), "{}", r.stdout);
    expect(&db, &["stats", "people"], 0);
    expect(&db, &["stats", "nobody"], 1);

    let r = expect(&db, &["compact", "people"], 0);
    assert!(r.stdout.contains("before:"), "{}", r.stdout);
    assert!(r.stdout.contains("after:  1 component"), "{}", r.stdout);

    // Data survives compaction; the deleted record stays deleted.
    let r = expect(&db, &["scan", "people"], 0);
    let ids: Vec<i64> = r
        .stdout
        .lines()
        .map(|l| json(l)["id"].as_i64().unwrap())
        .collect();
    assert_eq!(ids, vec![1, 4, 6, 7]);

    // Upsert mode replaces; insert mode rejects the duplicate.
    let again = dir.path().join("again.jsonl");
    std::fs::write(&again, "{\"id\": 1, \"name\": \"alice2\"}\n").unwrap();
    let r = expect(&db, &["load", "people", again.to_str().unwrap()], 2);
    assert!(r.stderr.contains("duplicate primary key 1"), "{}", r.stderr);
    expect(
        &db,
        &[
            "load",
            "people",
            again.to_str().unwrap(),
            "--mode",
            "upsert",
        ],
        0,
    );
    let r = expect(&db, &["get", "people", "1"], 0);
    assert_eq!(json(&r.stdout)["name"], "alice2");

    let r = expect(&db, &["drop-dataset", "people"], 0);
    assert!(
        r.stdout.contains("dropped dataset `people`"),
        "{}",
        r.stdout
    );
    expect(&db, &["get", "people", "1"], 1);
}

#[test]
fn csv_load_coerces_declared_and_infers_undeclared() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    expect(
        &db,
        &[
            "create-dataset",
            "cities",
            "--key",
            "name",
            "--field",
            "name:string,pop:int",
        ],
        0,
    );
    let input = dir.path().join("cities.csv");
    std::fs::write(
        &input,
        "name,pop,area,note\n\
         Paris,2100000,105.4,capital\n\
         \"New York, NY\",8300000,783.8,\"big, busy\"\n\
         Oslo,many,454,\n\
         Rome,2800000\n\
         Lyon,520000,47.87,42\n",
    )
    .unwrap();
    let r = expect(&db, &["load", "cities", input.to_str().unwrap()], 0);
    assert!(
        r.stdout.contains("loaded 3 records (2 failed)"),
        "{}",
        r.stdout
    );
    assert!(r.stderr.contains("line 4: "), "{}", r.stderr);
    assert!(r.stderr.contains("field `pop`"), "{}", r.stderr);
    assert!(r.stderr.contains("line 5: "), "{}", r.stderr);

    let r = expect(&db, &["get", "cities", "New York, NY"], 0);
    assert_eq!(
        json(&r.stdout),
        serde_json::json!({"name": "New York, NY", "pop": 8300000, "area": 783.8, "note": "big, busy"})
    );
    // Undeclared "42" is inferred as an int; the declared string key stays text.
    let r = expect(&db, &["get", "cities", "Lyon"], 0);
    assert_eq!(json(&r.stdout)["note"], serde_json::json!(42));
    // --format overrides the extension.
    let tsv = dir.path().join("more.txt");
    std::fs::write(&tsv, "name,pop\nNice,340000\n").unwrap();
    expect(
        &db,
        &["load", "cities", tsv.to_str().unwrap(), "--format", "csv"],
        0,
    );
    let r = expect(&db, &["get", "cities", "Nice"], 0);
    assert_eq!(json(&r.stdout)["pop"], serde_json::json!(340000));
}

#[test]
fn dates_times_and_decimals_from_csv() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    expect(
        &db,
        &[
            "create-dataset",
            "ev",
            "--key",
            "ts",
            "--field",
            "ts:timestamptz,price:decimal(10,2)",
            "--field",
            "day:date",
        ],
        0,
    );
    let input = dir.path().join("ev.csv");
    std::fs::write(
        &input,
        "ts,price,day
         2024-03-01 12:30:00+02,12.345,2024-03-01
         2024-03-02T00:00:00Z,7,2024-03-02
         2024-03-03 00:00:00,1234567890,2024-03-03
         2024-03-04 00:00:00,1,2024-02-30
",
    )
    .unwrap();
    let r = expect(&db, &["load", "ev", input.to_str().unwrap()], 0);
    assert!(
        r.stdout.contains("loaded 2 records (2 failed)"),
        "{}",
        r.stdout
    );
    assert!(r.stderr.contains("numeric field overflow"), "{}", r.stderr);
    assert!(r.stderr.contains("type date"), "{}", r.stderr);
    // Shown as people write them (stored as microseconds, the decimal's
    // text and days), by get and scan alike.
    let r = expect(&db, &["get", "ev", "2024-03-01T10:30:00Z"], 0);
    assert_eq!(
        json(&r.stdout),
        serde_json::json!({"ts": "2024-03-01 10:30:00+00", "price": "12.35", "day": "2024-03-01"})
    );
    let r = expect(&db, &["scan", "ev"], 0);
    let days: Vec<serde_json::Value> = r.stdout.lines().map(|l| json(l)["day"].clone()).collect();
    assert_eq!(
        days,
        [
            serde_json::json!("2024-03-01"),
            serde_json::json!("2024-03-02")
        ]
    );
}

#[test]
fn load_reports_ten_failures_then_counts_and_fails_when_nothing_loads() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    expect(
        &db,
        &["create-dataset", "t", "--key", "id", "--field", "id:int"],
        0,
    );
    let input = dir.path().join("bad.jsonl");
    let text: String = (1..=15)
        .map(|i| format!("{{\"id\": \"x{i}\"}}\n"))
        .collect();
    std::fs::write(&input, text).unwrap();
    let r = expect(&db, &["load", "t", input.to_str().unwrap()], 2);
    assert!(r.stderr.contains("line 10: "), "{}", r.stderr);
    assert!(!r.stderr.contains("line 11: "), "{}", r.stderr);
    assert!(r.stderr.contains("and 5 more failures"), "{}", r.stderr);
    assert!(
        r.stdout.contains("loaded 0 records (15 failed)"),
        "{}",
        r.stdout
    );
    assert!(
        r.stderr.contains("error: no record was loaded"),
        "{}",
        r.stderr
    );
    // A missing input file is an input error.
    let r = expect(&db, &["load", "t", "/nonexistent/input.jsonl"], 2);
    assert!(r.stderr.contains("cannot open"), "{}", r.stderr);
}

#[test]
fn every_command_has_help_with_an_example() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let r = expect(&db, &["--help"], 0);
    assert!(r.stdout.contains("Examples:"), "{}", r.stdout);
    for sub in [
        "create-dataset",
        "create-index",
        "load",
        "get",
        "scan",
        "query",
        "delete",
        "compact",
        "stats",
        "drop-index",
        "drop-dataset",
        "demo",
    ] {
        let r = expect(&db, &[sub, "--help"], 0);
        assert!(
            r.stdout.contains(&format!("Usage: silt {sub}")),
            "{sub}: {}",
            r.stdout
        );
        assert!(r.stdout.contains("Example"), "{sub}: {}", r.stdout);
        assert!(
            r.stdout.contains(&format!("silt {sub} ")),
            "{sub}: {}",
            r.stdout
        );
    }
    let r = expect(&db, &["create-dataset", "--help"], 0);
    for form in [
        "prefix(",
        "constant(",
        "tiered(",
        "leveled",
        "binomial(",
        "no-merge",
    ] {
        assert!(r.stdout.contains(form), "{form}: {}", r.stdout);
    }
    let r = expect(&db, &["create-index", "--help"], 0);
    for needle in [
        "btree",
        "rtree",
        "keyword",
        "ngram",
        "--reconcile",
        "antimatter",
        "deleted-keys",
        "--gram",
        "--space",
    ] {
        assert!(r.stdout.contains(needle), "{needle}: {}", r.stdout);
    }
    let r = expect(&db, &["query", "--help"], 0);
    for needle in [
        "--eq",
        "--from",
        "--to",
        "--limit",
        "--index-only",
        "\"pk\"",
        "--bbox",
        "antimeridian",
        "--intersects",
        "--near",
        "--within-m",
        "--k",
        "--text",
        "--any",
        "--join",
        "--join-field",
        "\"probe\"",
        "\"_distance_m\"",
        "leaf blocks",
    ] {
        assert!(r.stdout.contains(needle), "{needle}: {}", r.stdout);
    }
    // Help never creates the database.
    assert!(!db.exists());
}

#[test]
fn usage_errors_exit_2_and_missing_things_exit_1() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    // No database yet: not found, and nothing is created.
    let r = expect(&db, &["get", "t", "1"], 1);
    assert!(
        r.stderr.starts_with("error: no database at"),
        "{}",
        r.stderr
    );
    assert!(!db.exists());
    let r = expect(
        &db,
        &[
            "create-dataset",
            "t",
            "--key",
            "id",
            "--policy",
            "sometimes",
        ],
        2,
    );
    assert!(r.stderr.contains("accepted forms"), "{}", r.stderr);
    assert!(
        !db.exists(),
        "a rejected definition must not create the database"
    );
    let r = expect(
        &db,
        &["create-dataset", "t", "--key", "id", "--field", "id:integr"],
        2,
    );
    assert!(r.stderr.contains("unknown type"), "{}", r.stderr);
    expect(
        &db,
        &[
            "create-dataset",
            "t",
            "--key",
            "id",
            "--compression",
            "gzip",
        ],
        2,
    );
    expect(
        &db,
        &["create-dataset", "t", "--key", "id", "--field", "id"],
        2,
    );
    expect(&db, &["create-dataset", "t"], 2);
    expect(&db, &["create-dataset", "t", "--key", "id"], 0);
    let r = expect(&db, &["create-dataset", "t", "--key", "id"], 2);
    assert!(r.stderr.contains("already exists"), "{}", r.stderr);
    let r = expect(&db, &["get", "nope", "1"], 1);
    assert!(r.stderr.contains("no dataset named `nope`"), "{}", r.stderr);
    expect(&db, &["scan", "nope"], 1);
    expect(&db, &["bogus-command"], 2);
    // Negative numbers are key values, not options.
    expect(&db, &["get", "t", "-5"], 1);
}

#[test]
fn composite_keys_and_prefix_scans() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    expect(
        &db,
        &[
            "create-dataset",
            "ev",
            "--key",
            "user,ts",
            "--field",
            "user:string",
            "--field",
            "ts:int",
            "--partitions",
            "3",
            "--policy",
            "tiered(4)",
        ],
        0,
    );
    let mut child = silt(&db)
        .args(["load", "ev", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    {
        let mut stdin = child.stdin.take().unwrap();
        for user in ["ann", "bob", "cy"] {
            for ts in 1..=5 {
                writeln!(stdin, "{{\"user\": \"{user}\", \"ts\": {ts}}}").unwrap();
            }
        }
    }
    assert!(child.wait().unwrap().success());
    let r = expect(&db, &["scan", "ev", "--from", "bob", "--to", "bob"], 0);
    let got: Vec<(String, i64)> = r
        .stdout
        .lines()
        .map(|l| {
            let v = json(l);
            (
                v["user"].as_str().unwrap().to_owned(),
                v["ts"].as_i64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        got,
        (1..=5).map(|t| ("bob".to_owned(), t)).collect::<Vec<_>>()
    );
    let r = expect(
        &db,
        &["scan", "ev", "--from", "ann", "4", "--to", "bob", "2"],
        0,
    );
    assert_eq!(r.stdout.lines().count(), 4);
    expect(&db, &["get", "ev", "cy", "3"], 0);
    expect(&db, &["get", "ev", "\"cy\"", "3"], 0);
    expect(&db, &["get", "ev", "cy"], 2);
}

#[test]
fn a_second_process_gets_already_open() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    expect(&db, &["create-dataset", "t", "--key", "id"], 0);
    // A load from stdin holds the database open until stdin closes.
    let mut child = silt(&db)
        .args(["load", "t", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let mut first = String::new();
    stderr.read_line(&mut first).unwrap();
    assert!(first.starts_with("loading standard input"), "{first}");

    let r = expect(&db, &["get", "t", "1"], 2);
    assert!(r.stderr.contains("already open"), "{}", r.stderr);
    let r = expect(
        &db,
        &["demo", "--records", "10", "--dir", db.to_str().unwrap()],
        2,
    );
    assert!(r.stderr.contains("open in another process"), "{}", r.stderr);

    {
        let mut stdin = child.stdin.take().unwrap();
        writeln!(stdin, "{{\"id\": 1, \"v\": \"held\"}}").unwrap();
    }
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    let r = expect(&db, &["get", "t", "1"], 0);
    assert_eq!(json(&r.stdout)["v"], "held");
}

#[test]
fn demo_runs() {
    let dir = tempfile::tempdir().unwrap();
    let demo_dir = dir.path().join("demo");
    let db = dir.path().join("unused");
    let r = expect(
        &db,
        &[
            "demo",
            "--records",
            "2000",
            "--dir",
            demo_dir.to_str().unwrap(),
        ],
        0,
    );
    for needle in [
        "records/s",
        "lookups/s",
        "not found",
        "write amplification",
        "index `near`, rtree on loc",
        "index `words`, keyword on text",
        "nearest to the Eiffel Tower",
        "leaf blocks read",
        "answered from the index",
        // The SQL door, each answer checked against the native API's.
        "The same questions through SQL",
        "access: SiltScan: dataset=tweets, access=rtree(loc)",
        "access: SiltScan: dataset=tweets, access=keyword(text)",
        "SpatialJoin",
        "(its kept plan); same answer as the native API",
        // The server door: started, one query over the wire, stopped.
        "PostgreSQL  127.0.0.1:",
        "5 rows in",
        "through the wire protocol; same answer as the native API",
        "database closed (checkpointed)",
        "stopped (SIGTERM, as Ctrl-C)",
        "every SQL answer matched the native API's",
        "psql -h 127.0.0.1 -p 5433",
        "import psycopg",
    ] {
        assert!(r.stdout.contains(needle), "{needle}:\n{}", r.stdout);
    }
    let questions = r.stdout.matches("same answer as the native API").count();
    assert_eq!(
        questions, 7,
        "six SQL questions and one through the server:\n{}",
        r.stdout
    );
    // The demo database can be explored afterwards, and a second run wipes it.
    let r = expect(&demo_dir, &["stats", "--json"], 0);
    let stats = json(&r.stdout);
    let names: Vec<&str> = stats["datasets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        ["landmarks", "tweets"],
        "the SQL step made `landmarks`"
    );
    expect(
        &db,
        &[
            "demo",
            "--records",
            "100",
            "--dir",
            demo_dir.to_str().unwrap(),
        ],
        0,
    );
    let r = expect(&demo_dir, &["scan", "tweets"], 0);
    assert_eq!(r.stdout.lines().count(), 99, "100 records, one deleted");
}

#[test]
fn demo_refuses_to_wipe_other_directories() {
    let dir = tempfile::tempdir().unwrap();
    let precious = dir.path().join("precious");
    std::fs::create_dir(&precious).unwrap();
    std::fs::write(precious.join("notes.txt"), "keep me").unwrap();
    let r = expect(
        dir.path(),
        &[
            "demo",
            "--records",
            "10",
            "--dir",
            precious.to_str().unwrap(),
        ],
        2,
    );
    assert!(r.stderr.contains("refusing to wipe"), "{}", r.stderr);
    assert!(precious.join("notes.txt").exists());
}

#[test]
fn load_edge_cases() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    expect(&db, &["create-dataset", "t", "--key", "id"], 0);
    let path = |name: &str, text: &str| {
        let p = dir.path().join(name);
        std::fs::write(&p, text).unwrap();
        p.to_str().unwrap().to_owned()
    };
    // Empty inputs load nothing and succeed.
    let r = expect(&db, &["load", "t", &path("empty.jsonl", "")], 0);
    assert!(
        r.stdout.contains("loaded 0 records (0 failed)"),
        "{}",
        r.stdout
    );
    expect(&db, &["load", "t", &path("header.csv", "id,name\n")], 0);
    // A byte-order mark does not break the first record; non-objects are rejected.
    let r = expect(
        &db,
        &[
            "load",
            "t",
            &path("bom.jsonl", "\u{feff}{\"id\": 1}\n[1, 2]\n{\"id\": 2}\r\n"),
        ],
        0,
    );
    assert!(
        r.stdout.contains("loaded 2 records (1 failed)"),
        "{}",
        r.stdout
    );
    assert!(r.stderr.contains("line 2: "), "{}", r.stderr);
    assert!(r.stderr.contains("JSON object"), "{}", r.stderr);
    // A CSV header naming a column twice is refused up front.
    let r = expect(&db, &["load", "t", &path("dup.csv", "id,a,a\n1,2,3\n")], 2);
    assert!(r.stderr.contains("twice"), "{}", r.stderr);
    // --limit 0 prints nothing.
    let r = expect(&db, &["scan", "t", "--limit", "0"], 0);
    assert!(r.stdout.is_empty());
    assert!(r.stderr.contains("0 records"), "{}", r.stderr);
}

#[test]
fn records_with_a_ttl_expire_from_reads_and_stats_show_the_sweeps() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let r = expect(
        &db,
        &[
            "create-dataset",
            "readings",
            "--key",
            "sensor,t",
            "--field",
            "sensor:string,t:int,v:double",
            "--ttl-time",
            "t",
            "--ttl-after",
            "100",
        ],
        0,
    );
    assert!(
        r.stdout.contains("ttl: 100 past t, clock written"),
        "{}",
        r.stdout
    );
    let input = dir.path().join("r.jsonl");
    std::fs::write(
        &input,
        "{\"sensor\":\"a\",\"t\":1,\"v\":1}\n{\"sensor\":\"a\",\"t\":150,\"v\":2}\n{\"sensor\":\"b\",\"t\":300,\"v\":3}\n",
    )
    .unwrap();
    expect(&db, &["load", "readings", input.to_str().unwrap()], 0);
    // The clock is 300: only the record of time 300 is younger than 100.
    let r = expect(&db, &["scan", "readings"], 0);
    let lines: Vec<&str> = r.stdout.lines().collect();
    assert_eq!(lines.len(), 1, "{}", r.stdout);
    assert_eq!(json(lines[0])["t"], 300);
    expect(&db, &["get", "readings", "a", "150"], 1);
    let r = expect(&db, &["stats", "readings"], 0);
    assert!(
        r.stdout.contains("ttl: 100 past t; clock now 300"),
        "{}",
        r.stdout
    );
    // A ttl missing its life says what to give.
    let r = expect(
        &db,
        &[
            "create-dataset",
            "bad",
            "--key",
            "id",
            "--field",
            "id:int,t:int",
            "--ttl-time",
            "t",
        ],
        2,
    );
    assert!(r.stderr.contains("`time` and `after`"), "{}", r.stderr);
}

/// `silt design`: the design of a workload printed, then made with
/// `--install` (a view the queries then read, a hierarchy under the root).
#[test]
fn design_prints_and_installs_synergys_views() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    {
        let d = std::sync::Arc::new(silt::Database::open(&db, silt::DbOptions::default()).unwrap());
        let e = silt_sql::SqlEngine::new(d.clone()).unwrap();
        for s in [
            "CREATE TABLE customer (c_id BIGINT PRIMARY KEY, name TEXT)",
            "CREATE TABLE orders (o_id BIGINT PRIMARY KEY, o_c_id BIGINT REFERENCES customer, total DOUBLE)",
            "INSERT INTO customer VALUES (1, 'ann'), (2, 'bob')",
            "INSERT INTO orders VALUES (10, 1, 5.0), (11, 2, 7.0), (12, 1, 1.0)",
        ] {
            e.execute_blocking(s).unwrap();
        }
        drop(e);
        d.close().unwrap();
    }
    let workload = dir.path().join("queries.sql");
    std::fs::write(
        &workload,
        "SELECT o.o_id, c.name FROM customer c, orders o WHERE o.o_c_id = c.c_id AND c.name = $1;\n\
         SELECT count(*) FROM orders WHERE total > 2;",
    )
    .unwrap();
    let w = workload.to_str().unwrap();
    let r = expect(&db, &["design", "--roots", "customer", "--workload", w], 0);
    assert!(r.stdout.contains("2 queries, 1 with joins"), "{}", r.stdout);
    assert!(
        r.stdout.contains("orders -> customer (o_c_id)"),
        "{}",
        r.stdout
    );
    assert!(
        r.stdout.contains("customer__orders: customer -> orders"),
        "{}",
        r.stdout
    );
    assert!(
        r.stdout.contains("customer__orders (customer.name)"),
        "{}",
        r.stdout
    );
    assert!(r.stdout.contains("nothing changed"), "{}", r.stdout);
    let r = expect(
        &db,
        &[
            "design",
            "--roots",
            "customer",
            "--workload",
            w,
            "--install",
        ],
        0,
    );
    assert!(
        r.stdout.contains("1 view(s) made (customer__orders)"),
        "{}",
        r.stdout
    );
    let d = silt::Database::open(&db, silt::DbOptions::default()).unwrap();
    let v = d.dataset("customer__orders").unwrap();
    assert!(v.def().materialized.is_some());
    assert_eq!(v.index_defs().len(), 1, "the view index on name");
    assert!(d.dataset("orders").unwrap().def().hierarchy.is_some());
    d.close().unwrap();
    drop(d);
    // Mistakes say what was wrong.
    let r = expect(&db, &["design", "--roots", "nosuch", "--workload", w], 2);
    assert!(r.stderr.contains("nosuch"), "{}", r.stderr);
    let r = expect(
        &db,
        &[
            "design",
            "--roots",
            "customer",
            "--workload",
            "/no/such/file",
        ],
        2,
    );
    assert!(
        r.stderr.contains("cannot read the workload file"),
        "{}",
        r.stderr
    );
}
