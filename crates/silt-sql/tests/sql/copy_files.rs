//! `COPY table FROM 'file'` (CSV, text and Parquet) and `COPY ... TO
//! 'file.parquet'`: a table written to Parquet and read back into another
//! table holds the same rows (every column type of a TPC-H table:
//! integers, decimals, dates, strings, NULLs); the COPY's column list
//! chooses and orders columns; a missing file, a file that is not Parquet,
//! a column not in the file and a bad row each fail with an error naming
//! the problem, and a bad row leaves the rows before it committed.

use super::common::*;

const DDL: &str = "(id BIGINT PRIMARY KEY, qty INT, price DECIMAL(12,2), ship DATE, \
                   flag CHAR(1), note VARCHAR, ratio DOUBLE)";

fn load_src(e: &silt_sql::SqlEngine) {
    run(e, &format!("CREATE TABLE src {DDL}"));
    let mut vals = Vec::new();
    for i in 0..3000i64 {
        let note = if i % 7 == 0 {
            "NULL".to_owned()
        } else {
            format!("'n,\"{i}\" \\ tab\there'")
        };
        vals.push(format!(
            "({i}, {}, {}.{:02}, DATE '1995-01-01' + INTERVAL '{} days', '{}', {note}, {})",
            i % 50,
            i * 3,
            i % 100,
            i % 2000,
            ["A", "N", "R"][(i % 3) as usize],
            (i as f64) / 7.0
        ));
    }
    for chunk in vals.chunks(500) {
        run(e, &format!("INSERT INTO src VALUES {}", chunk.join(", ")));
    }
}

fn rows(e: &silt_sql::SqlEngine, table: &str) -> Vec<String> {
    let b = run(
        e,
        &format!(
            "SELECT CAST(id AS VARCHAR) || '|' || CAST(qty AS VARCHAR) || '|' || \
             CAST(price AS VARCHAR) || '|' || CAST(ship AS VARCHAR) || '|' || flag || '|' || \
             COALESCE(note, '<null>') || '|' || CAST(ratio AS VARCHAR) FROM {table} ORDER BY id"
        ),
    );
    strings(&b, 0)
        .into_iter()
        .map(|s| s.unwrap_or_default())
        .collect()
}

#[test]
fn parquet_and_csv_files_round_trip() {
    let (d, e) = engine();
    load_src(&e);
    let want = rows(&e, "src");
    assert_eq!(want.len(), 3000);
    let pq = d.path().join("src.parquet");
    run(
        &e,
        &format!("COPY (SELECT * FROM src) TO '{}'", pq.display()),
    );
    run(&e, &format!("CREATE TABLE dst {DDL}"));
    let n = count(&run(&e, &format!("COPY dst FROM '{}'", pq.display())));
    assert_eq!(n, 3000);
    assert_eq!(rows(&e, "dst"), want);

    // CSV with a header, through DataFusion's writer and PostgreSQL's rules.
    let csv = d.path().join("src.csv");
    run(
        &e,
        &format!(
            "COPY (SELECT * FROM src) TO '{}' STORED AS CSV OPTIONS ('format.has_header' 'true')",
            csv.display()
        ),
    );
    run(&e, &format!("CREATE TABLE dst2 {DDL}"));
    let n = count(&run(
        &e,
        &format!(
            "COPY dst2 FROM '{}' (FORMAT csv, HEADER true)",
            csv.display()
        ),
    ));
    assert_eq!(n, 3000);
    assert_eq!(rows(&e, "dst2"), want);

    // A column list: Parquet columns by name, in any order; the rest NULL.
    run(
        &e,
        "CREATE TABLE part (id BIGINT PRIMARY KEY, note VARCHAR, qty INT, extra INT)",
    );
    let n = count(&run(
        &e,
        &format!(
            "COPY part (qty, id) FROM '{}' (FORMAT parquet)",
            pq.display()
        ),
    ));
    assert_eq!(n, 3000);
    let b = run(
        &e,
        "SELECT count(*), sum(qty), count(note), count(extra) FROM part",
    );
    assert_eq!(ints(&b, 0), vec![3000]);
    let total: i64 = (0..3000i64).map(|i| i % 50).sum();
    assert_eq!(ints(&b, 1), vec![total]);
    assert_eq!(ints(&b, 2), vec![0]);
}

#[test]
fn bad_files_say_what_is_wrong() {
    let (d, e) = engine();
    run(&e, "CREATE TABLE t (id BIGINT PRIMARY KEY, v INT)");
    let missing = d.path().join("nope.parquet");
    let err = fail(&e, &format!("COPY t FROM '{}'", missing.display()));
    assert!(
        err.contains("could not open") && err.contains("nope.parquet"),
        "{err}"
    );
    // Not Parquet.
    let txt = d.path().join("t.parquet");
    std::fs::write(&txt, "1\t2\n").unwrap();
    let err = fail(&e, &format!("COPY t FROM '{}'", txt.display()));
    assert!(err.contains("not a readable Parquet file"), "{err}");
    // ...but readable as text when told so.
    let n = count(&run(
        &e,
        &format!("COPY t FROM '{}' (FORMAT text)", txt.display()),
    ));
    assert_eq!(n, 1);
    // A column the file lacks.
    let pq = d.path().join("t2.parquet");
    run(
        &e,
        &format!("COPY (SELECT id, v FROM t) TO '{}'", pq.display()),
    );
    run(&e, "CREATE TABLE u (id BIGINT PRIMARY KEY, v INT, w INT)");
    let err = fail(&e, &format!("COPY u (id, w) FROM '{}'", pq.display()));
    assert!(
        err.contains("column \"w\" is not in the Parquet file"),
        "{err}"
    );
    // A bad row: the rows before it stay, the error names the row.
    let csv = d.path().join("bad.csv");
    let mut text = String::new();
    for i in 0..10 {
        text.push_str(&format!("{},{}\n", 100 + i, i));
    }
    text.push_str("200,not-a-number\n");
    std::fs::write(&csv, text).unwrap();
    let err = fail(&e, &format!("COPY t FROM '{}' (FORMAT csv)", csv.display()));
    assert!(
        err.contains("not-a-number") || err.contains("row 11"),
        "{err}"
    );
    assert_eq!(count_star(&e, "SELECT count(*) FROM t WHERE id >= 100"), 10);
    // Options Parquet does not take; FORMAT parquet from a client.
    let err = fail(
        &e,
        &format!(
            "COPY t FROM '{}' (FORMAT parquet, HEADER true)",
            pq.display()
        ),
    );
    assert!(err.contains("no options besides FORMAT parquet"), "{err}");
    let err = fail(&e, "COPY t FROM STDIN (FORMAT parquet)");
    assert!(err.contains("file on the server"), "{err}");
}

#[test]
fn file_access_is_checked() {
    let (d, e) = engine();
    run(&e, "CREATE TABLE t (id BIGINT PRIMARY KEY)");
    let csv = d.path().join("x.csv");
    std::fs::write(&csv, "1\n").unwrap();
    e.set_file_access(silt_sql::access::FileAccess::Off);
    let err = fail(&e, &format!("COPY t FROM '{}'", csv.display()));
    assert!(err.contains("does not allow"), "{err}");
    let other = tempfile::tempdir().unwrap();
    e.set_file_access(silt_sql::access::FileAccess::Within(
        other.path().to_owned(),
    ));
    let err = fail(&e, &format!("COPY t FROM '{}'", csv.display()));
    assert!(err.contains("outside the server files directory"), "{err}");
    e.set_file_access(silt_sql::access::FileAccess::Within(d.path().to_owned()));
    assert_eq!(
        count(&run(&e, &format!("COPY t FROM '{}'", csv.display()))),
        1
    );
}
