//! `COPY` through `silt serve` with tokio-postgres: loads in text, CSV and
//! binary (in pieces that split rows anywhere), results back out in each
//! format, the indexes agreeing with what was loaded, and the errors
//! (bad data, a taken key, a failed block, `CopyFail`) with what stayed.

use std::collections::BTreeMap;

use bytes::Bytes;
use futures::{SinkExt, StreamExt, TryStreamExt};
use proptest::prelude::*;
use tokio_postgres::Client;
use tokio_postgres::binary_copy::{BinaryCopyInWriter, BinaryCopyOutStream};
use tokio_postgres::error::SqlState;
use tokio_postgres::types::Type;

use crate::pg_fixture::PgFixture;

/// The table every test loads.
const SETUP: &str =
    "CREATE TABLE t (id BIGINT PRIMARY KEY, name VARCHAR, x DOUBLE, ok BOOLEAN, loc GEOMETRY);
                 CREATE INDEX t_name ON t USING btree (name);
                 CREATE INDEX t_loc ON t USING rtree (loc);";

async fn start() -> PgFixture {
    PgFixture::start(false, SETUP).await
}

/// Send `data` to `sql` (a COPY FROM STDIN) in pieces of `piece` bytes.
async fn copy_in(
    c: &Client,
    sql: &str,
    data: &[u8],
    piece: usize,
) -> Result<u64, tokio_postgres::Error> {
    let sink = c.copy_in::<_, Bytes>(sql).await?;
    futures::pin_mut!(sink);
    for chunk in data.chunks(piece.max(1)) {
        sink.send(Bytes::copy_from_slice(chunk)).await?;
    }
    sink.finish().await
}

async fn copy_out(c: &Client, sql: &str) -> Vec<u8> {
    let s = c.copy_out(sql).await.unwrap();
    let parts: Vec<Bytes> = s.try_collect().await.unwrap();
    parts.concat()
}

async fn count(c: &Client, sql: &str) -> i64 {
    c.query_one(sql, &[]).await.unwrap().get(0)
}

#[tokio::test]
async fn text_and_csv_load_and_every_index_sees_the_rows() {
    let f = start().await;
    let c = f.pg().await;
    let text = b"1\talpha\t1.5\tt\tPOINT(1 1)\n2\tbeta\\twith tab\t\\N\tf\tPOINT(2 2)\n3\t\\N\t-Infinity\t\\N\t\\N\n\\.\n";
    for piece in [1, 5, 4096] {
        c.batch_execute("DELETE FROM t").await.unwrap();
        let n = copy_in(&c, "COPY t FROM STDIN", text, piece).await.unwrap();
        assert_eq!(n, 3, "piece {piece}");
    }
    let row = c
        .query_one("SELECT name, x, ok FROM t WHERE id = 2", &[])
        .await
        .unwrap();
    assert_eq!(
        row.get::<_, Option<String>>(0).as_deref(),
        Some("beta\twith tab")
    );
    assert_eq!(row.get::<_, Option<f64>>(1), None);
    assert_eq!(row.get::<_, Option<bool>>(2), Some(false));
    // The secondary indexes agree with the rows.
    assert_eq!(
        count(&c, "SELECT count(*) FROM t WHERE name = 'alpha'").await,
        1
    );
    assert_eq!(
        count(
            &c,
            "SELECT count(*) FROM t WHERE ST_Intersects(loc, ST_MakeEnvelope(0, 0, 1.5, 1.5))"
        )
        .await,
        1
    );

    let csv = b"id,name,x\n10,\"a, \"\"quoted\"\"\nname\",2.5\n11,,\n12,\"\",0\n";
    let n = copy_in(
        &c,
        "COPY t (id, name, x) FROM STDIN WITH (FORMAT csv, HEADER true)",
        csv,
        3,
    )
    .await
    .unwrap();
    assert_eq!(n, 3);
    let names: Vec<Option<String>> = c
        .query("SELECT name FROM t WHERE id >= 10 ORDER BY id", &[])
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(
        names,
        vec![
            Some("a, \"quoted\"\nname".to_owned()),
            None,
            Some(String::new())
        ]
    );
    // The pre-9.0 spelling.
    let n = copy_in(
        &c,
        "COPY t (id, name) FROM STDIN CSV HEADER",
        b"id,name\n20,x\n",
        64,
    )
    .await
    .unwrap();
    assert_eq!(n, 1);
}

#[tokio::test]
async fn results_go_out_in_each_format_and_read_back() {
    let f = start().await;
    let c = f.pg().await;
    c.batch_execute(
        "INSERT INTO t VALUES (1, 'a\tb', 0.1, true, ST_Point(1, 2)), (2, NULL, 1e20, NULL, NULL), (3, '', NULL, false, NULL)",
    )
    .await
    .unwrap();
    let text = copy_out(
        &c,
        "COPY (SELECT id, name, x, ok FROM t ORDER BY id) TO STDOUT",
    )
    .await;
    assert_eq!(
        String::from_utf8(text).unwrap(),
        "1\ta\\tb\t0.1\tt\n2\t\\N\t1e+20\t\\N\n3\t\t\\N\tf\n"
    );
    let csv = copy_out(&c, "COPY t (id, name) TO STDOUT WITH (FORMAT csv, HEADER)").await;
    let csv = String::from_utf8(csv).unwrap();
    assert!(csv.starts_with("id,name\n"), "{csv}");
    assert!(
        csv.contains("\n3,\"\"\n") && csv.contains("\n2,\n"),
        "{csv}"
    );

    let s = c
        .copy_out("COPY (SELECT id, x FROM t ORDER BY id) TO STDOUT (FORMAT binary)")
        .await
        .unwrap();
    let rows = BinaryCopyOutStream::new(s, &[Type::INT8, Type::FLOAT8]);
    futures::pin_mut!(rows);
    let mut got = Vec::new();
    while let Some(r) = rows.next().await {
        let r = r.unwrap();
        got.push((r.get::<i64>(0), r.get::<Option<f64>>(1)));
    }
    assert_eq!(got, vec![(1, Some(0.1)), (2, Some(1e20)), (3, None)]);

    // What went out comes back in: a round trip through a second table.
    c.batch_execute("CREATE TABLE u (id BIGINT PRIMARY KEY, name VARCHAR, x DOUBLE, ok BOOLEAN)")
        .await
        .unwrap();
    let text = copy_out(&c, "COPY (SELECT id, name, x, ok FROM t) TO STDOUT").await;
    assert_eq!(copy_in(&c, "COPY u FROM STDIN", &text, 7).await.unwrap(), 3);
    let again = copy_out(
        &c,
        "COPY (SELECT id, name, x, ok FROM u ORDER BY id) TO STDOUT",
    )
    .await;
    let orig = copy_out(
        &c,
        "COPY (SELECT id, name, x, ok FROM t ORDER BY id) TO STDOUT",
    )
    .await;
    assert_eq!(again, orig);
}

#[tokio::test]
async fn binary_load_through_the_binary_writer() {
    let f = start().await;
    let c = f.pg().await;
    let sink = c
        .copy_in("COPY t (id, name, x, ok) FROM STDIN (FORMAT binary)")
        .await
        .unwrap();
    let w = BinaryCopyInWriter::new(sink, &[Type::INT8, Type::TEXT, Type::FLOAT8, Type::BOOL]);
    futures::pin_mut!(w);
    for i in 0..5000i64 {
        let name = (i % 3 != 0).then(|| format!("n{i}"));
        w.as_mut()
            .write(&[&i, &name, &(i as f64 / 2.0), &(i % 2 == 0)])
            .await
            .unwrap();
    }
    assert_eq!(w.finish().await.unwrap(), 5000);
    assert_eq!(count(&c, "SELECT count(*) FROM t").await, 5000);
    assert_eq!(
        count(&c, "SELECT count(*) FROM t WHERE name IS NULL").await,
        1667
    );
    assert_eq!(
        count(&c, "SELECT count(*) FROM t WHERE name = 'n4999'").await,
        1
    );
}

#[tokio::test]
async fn a_bad_row_stops_the_load_and_says_what_stayed() {
    let f = start().await;
    let c = f.pg().await;
    // Row 3 is not a number: rows 1 and 2 stay (each row is its own
    // transaction, as with INSERT), nothing after it is loaded.
    let e = copy_in(
        &c,
        "COPY t (id, name) FROM STDIN",
        b"1\ta\n2\tb\nthree\tc\n4\td\n",
        4,
    )
    .await
    .unwrap_err();
    let db = e.as_db_error().expect("a server error");
    assert_eq!(db.code(), &SqlState::INVALID_TEXT_REPRESENTATION);
    assert!(db.message().contains("row 3"), "{}", db.message());
    assert!(
        db.message().contains("2 rows before it were committed"),
        "{}",
        db.message()
    );
    assert_eq!(count(&c, "SELECT count(*) FROM t").await, 2);

    // A taken key: a unique violation naming the key; its batch (the
    // rows since the last 4,096-row boundary) is rolled back.
    let e = copy_in(&c, "COPY t (id, name) FROM STDIN", b"5\te\n1\tdup\n", 64)
        .await
        .unwrap_err();
    let db = e.as_db_error().unwrap();
    assert_eq!(db.code(), &SqlState::UNIQUE_VIOLATION);
    assert_eq!(db.detail(), Some("Key (id)=(1) already exists."));
    assert!(
        db.message().contains("no row was written"),
        "{}",
        db.message()
    );
    assert_eq!(count(&c, "SELECT count(*) FROM t").await, 2);
    // Past the first batch: the first 4,096 rows stay, the second batch goes.
    let mut data = String::new();
    for i in 100..100 + 5000 {
        data.push_str(&format!("{i}\tb\n"));
    }
    data.push_str("1\tdup\n");
    let e = copy_in(&c, "COPY t (id, name) FROM STDIN", data.as_bytes(), 1000)
        .await
        .unwrap_err();
    let msg = e.as_db_error().unwrap().message().to_owned();
    assert!(
        msg.contains("row 5001") && msg.contains("4096 rows before it"),
        "{msg}"
    );
    assert_eq!(count(&c, "SELECT count(*) FROM t").await, 2 + 4096);
    c.batch_execute("DELETE FROM t WHERE id >= 100")
        .await
        .unwrap();

    // Wrong widths, a NULL key, a missing key column.
    for (sql, data, code) in [
        (
            "COPY t (id, name) FROM STDIN",
            &b"6\n"[..],
            SqlState::BAD_COPY_FILE_FORMAT,
        ),
        (
            "COPY t (id, name) FROM STDIN",
            b"6\tx\textra\n",
            SqlState::BAD_COPY_FILE_FORMAT,
        ),
        (
            "COPY t (id, name) FROM STDIN",
            b"\\N\tx\n",
            SqlState::NOT_NULL_VIOLATION,
        ),
        (
            "COPY t (id) FROM STDIN (FORMAT binary)",
            b"NOTPGCOPY",
            SqlState::BAD_COPY_FILE_FORMAT,
        ),
    ] {
        let e = copy_in(&c, sql, data, 64).await.unwrap_err();
        assert_eq!(e.as_db_error().map(|d| d.code()), Some(&code), "{sql}: {e}");
    }
    assert_eq!(count(&c, "SELECT count(*) FROM t").await, 2);
    // The connection still works.
    assert_eq!(count(&c, "SELECT 41 + 1").await, 42);

    // COPYs refused before any data: each on a connection of its own, as
    // tokio-postgres' copy_in sends a second Sync that a refused COPY
    // answers with a ReadyForQuery it does not expect (PostgreSQL does the
    // same; rust-postgres pull request 1337).
    for (sql, want) in [
        ("COPY t (name) FROM STDIN", "null value in column \"id\""),
        ("COPY t (nope) FROM STDIN", "no column `nope`"),
        // A file on the server: not with this server's settings.
        ("COPY t FROM '/etc/passwd'", "does not allow"),
        ("COPY t FROM STDIN (FORMAT xml)", "not recognized"),
        (
            "COPY t FROM STDIN (FORMAT binary, HEADER)",
            "HEADER in BINARY",
        ),
    ] {
        let c = f.pg().await;
        let e = c.copy_in::<_, Bytes>(sql).await.err().expect("refused");
        let msg = e
            .as_db_error()
            .map_or(e.to_string(), |d| d.message().to_owned());
        assert!(msg.contains(want), "{sql}: {msg}");
    }
    assert_eq!(count(&c, "SELECT count(*) FROM t").await, 2);
}

#[tokio::test]
async fn inside_a_block_a_load_is_all_or_nothing() {
    let f = start().await;
    let c = f.pg().await;
    c.batch_execute("BEGIN").await.unwrap();
    assert_eq!(
        copy_in(&c, "COPY t (id) FROM STDIN", b"1\n2\n", 64)
            .await
            .unwrap(),
        2
    );
    let e = copy_in(&c, "COPY t (id) FROM STDIN", b"3\n1\n", 64)
        .await
        .unwrap_err();
    assert_eq!(
        e.as_db_error().map(|d| d.code()),
        Some(&SqlState::UNIQUE_VIOLATION)
    );
    let e = c.batch_execute("SELECT 1").await.unwrap_err();
    assert_eq!(
        e.as_db_error().map(|d| d.code()),
        Some(&SqlState::IN_FAILED_SQL_TRANSACTION)
    );
    c.batch_execute("ROLLBACK").await.unwrap();
    assert_eq!(count(&c, "SELECT count(*) FROM t").await, 0);

    c.batch_execute("BEGIN").await.unwrap();
    copy_in(&c, "COPY t (id) FROM STDIN", b"7\n8\n", 64)
        .await
        .unwrap();
    c.batch_execute("COMMIT").await.unwrap();
    assert_eq!(count(&c, "SELECT count(*) FROM t").await, 2);
}

#[tokio::test]
async fn a_client_that_gives_up_leaves_a_usable_session() {
    let f = start().await;
    let c = f.pg().await;
    {
        // Dropping the sink without finishing sends CopyFail.
        let sink = c
            .copy_in::<_, Bytes>("COPY t (id) FROM STDIN")
            .await
            .unwrap();
        futures::pin_mut!(sink);
        sink.send(Bytes::from_static(b"1\n2\n")).await.unwrap();
    }
    // The next statement answers normally.
    assert_eq!(count(&c, "SELECT 1 + 1").await, 2);
}

#[tokio::test]
async fn a_load_in_progress_shows_in_pg_stat_progress_copy() {
    let f = start().await;
    let (c, watcher) = (f.pg().await, f.pg().await);
    let sink = c
        .copy_in::<_, Bytes>("COPY t (id) FROM STDIN")
        .await
        .unwrap();
    futures::pin_mut!(sink);
    let rows: String = (0..10_000).map(|i| format!("{i}\n")).collect();
    sink.send(Bytes::from(rows.clone())).await.unwrap();
    // The data is decoded as it arrives: wait until the server has it.
    let mut seen = None;
    for _ in 0..200 {
        let r = watcher
            .query(
                "SELECT relname, command, tuples_processed, bytes_processed FROM pg_catalog.pg_stat_progress_copy",
                &[],
            )
            .await
            .unwrap();
        if let Some(row) = r.first()
            && row.get::<_, i64>(2) == 10_000
        {
            seen = Some((
                row.get::<_, String>(0),
                row.get::<_, String>(1),
                row.get::<_, i64>(3),
            ));
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert_eq!(
        seen,
        Some(("t".to_owned(), "COPY FROM".to_owned(), rows.len() as i64))
    );
    assert_eq!(sink.finish().await.unwrap(), 10_000);
    let left = watcher
        .query("SELECT * FROM pg_catalog.pg_stat_progress_copy", &[])
        .await
        .unwrap();
    assert!(left.is_empty());
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 6, ..ProptestConfig::default() })]

    /// Random rows (text with every special byte, NULLs, extreme floats)
    /// loaded in each format and split anywhere read back as a model map.
    #[test]
    fn loads_agree_with_a_model(
        rows in prop::collection::btree_map(
            any::<i64>(),
            (prop::option::of("[a-z\t\n\r\\\\,\"\\. ]{0,12}"), prop::option::of(any::<f64>())),
            0..60,
        ),
        piece in 1usize..40,
        format in 0usize..3,
    ) {
        let rt = tokio::runtime::Runtime::new().unwrap();
        rt.block_on(async {
            let f = start().await;
            let c = f.pg().await;
            let model: BTreeMap<i64, (Option<String>, Option<f64>)> = rows;
            let fmt = ["text", "csv", "binary"][format];
            let data = encode(&model, fmt);
            let sql = format!("COPY t (id, name, x) FROM STDIN (FORMAT {fmt})");
            let n = copy_in(&c, &sql, &data, piece).await.unwrap();
            assert_eq!(n as usize, model.len());
            let got: BTreeMap<i64, (Option<String>, Option<f64>)> = c
                .query("SELECT id, name, x FROM t", &[])
                .await
                .unwrap()
                .iter()
                .map(|r| (r.get(0), (r.get(1), r.get(2))))
                .collect();
            assert_eq!(got.len(), model.len());
            for (k, (name, x)) in &model {
                let (gn, gx) = &got[k];
                assert_eq!(gn, name, "id {k}");
                match (x, gx) {
                    (Some(a), Some(b)) if a.is_nan() => assert!(b.is_nan()),
                    _ => assert_eq!(gx, x, "id {k}"),
                }
            }
        });
    }
}

/// The model's rows as a client writes them in `fmt`.
fn encode(model: &BTreeMap<i64, (Option<String>, Option<f64>)>, fmt: &str) -> Vec<u8> {
    let mut out = Vec::new();
    if fmt == "binary" {
        out.extend_from_slice(b"PGCOPY\n\xff\r\n\0");
        out.extend_from_slice(&[0; 8]);
        for (k, (name, x)) in model {
            out.extend_from_slice(&3i16.to_be_bytes());
            out.extend_from_slice(&8i32.to_be_bytes());
            out.extend_from_slice(&k.to_be_bytes());
            match name {
                Some(n) => {
                    out.extend_from_slice(&(n.len() as i32).to_be_bytes());
                    out.extend_from_slice(n.as_bytes());
                }
                None => out.extend_from_slice(&(-1i32).to_be_bytes()),
            }
            match x {
                Some(v) => {
                    out.extend_from_slice(&8i32.to_be_bytes());
                    out.extend_from_slice(&v.to_be_bytes());
                }
                None => out.extend_from_slice(&(-1i32).to_be_bytes()),
            }
        }
        out.extend_from_slice(&(-1i16).to_be_bytes());
        return out;
    }
    let float = |v: f64| format!("{v:e}");
    for (k, (name, x)) in model {
        let name = match (name, fmt) {
            (None, "text") => "\\N".to_owned(),
            (None, _) => String::new(),
            (Some(n), "text") => n
                .replace('\\', "\\\\")
                .replace('\t', "\\t")
                .replace('\n', "\\n")
                .replace('\r', "\\r"),
            (Some(n), _) => format!("\"{}\"", n.replace('"', "\"\"")),
        };
        let x = match (x, fmt) {
            (None, "text") => "\\N".to_owned(),
            (None, _) => String::new(),
            (Some(v), _) => float(*v),
        };
        let sep = if fmt == "text" { "\t" } else { "," };
        out.extend_from_slice(format!("{k}{sep}{name}{sep}{x}\n").as_bytes());
    }
    out
}
