//! PostgreSQL types over the wire with tokio-postgres, which sends
//! parameters and reads results in binary: `date`, `timestamp`,
//! `timestamptz` (chrono), `jsonb` (serde_json), `numeric` (its send form
//! checked byte for byte both ways, its text through the simple protocol),
//! and binary `COPY` in and out of a table of them.

use std::error::Error;

use bytes::BytesMut;
use chrono::{DateTime, NaiveDate, Utc};
use futures::{SinkExt, TryStreamExt};
use tokio_postgres::binary_copy::{BinaryCopyInWriter, BinaryCopyOutStream};
use tokio_postgres::types::{FromSql, IsNull, ToSql, Type, to_sql_checked};

use crate::pg_fixture::{PgFixture, text_rows};

const SETUP: &str = "CREATE TABLE ev (ts TIMESTAMPTZ PRIMARY KEY, day DATE, \
                     local TIMESTAMP, price NUMERIC(10,2), doc JSONB);";

/// A value's bytes as the server sent them.
struct Raw(Vec<u8>);

impl<'a> FromSql<'a> for Raw {
    fn from_sql(_: &Type, raw: &'a [u8]) -> Result<Raw, Box<dyn Error + Sync + Send>> {
        Ok(Raw(raw.to_vec()))
    }
    fn accepts(_: &Type) -> bool {
        true
    }
}

/// A `numeric` sent in its binary form, as given.
#[derive(Debug)]
struct RawNumeric(Vec<u8>);

impl ToSql for RawNumeric {
    fn to_sql(&self, _: &Type, out: &mut BytesMut) -> Result<IsNull, Box<dyn Error + Sync + Send>> {
        out.extend_from_slice(&self.0);
        Ok(IsNull::No)
    }
    fn accepts(ty: &Type) -> bool {
        *ty == Type::NUMERIC
    }
    to_sql_checked!();
}

/// numeric_send of 12.50: 2 digits, weight 0, positive, scale 2, 12 and 5000.
const TWELVE_FIFTY: [u8; 12] = [0, 2, 0, 0, 0, 0, 0, 2, 0, 12, 0x13, 0x88];

#[tokio::test]
async fn binary_parameters_and_results() {
    let f = PgFixture::start(false, SETUP).await;
    let c = f.pg().await;
    let ts: DateTime<Utc> = "2024-03-01T10:30:00.5Z".parse().expect("ts");
    let day = NaiveDate::from_ymd_opt(2024, 3, 1).expect("day");
    let local = day.and_hms_opt(12, 30, 0).expect("local");
    let doc = serde_json::json!({"a": [1, 2], "s": "x"});
    // Types named by the client (psycopg and JDBC name them).
    let insert = c
        .prepare_typed(
            "INSERT INTO ev VALUES ($1, $2, $3, $4, $5)",
            &[
                Type::TIMESTAMPTZ,
                Type::DATE,
                Type::TIMESTAMP,
                Type::NUMERIC,
                Type::JSONB,
            ],
        )
        .await
        .expect("prepare");
    c.execute(
        &insert,
        &[&ts, &day, &local, &RawNumeric(TWELVE_FIFTY.to_vec()), &doc],
    )
    .await
    .expect("insert");
    let row = c
        .query_one(
            "SELECT ts, day, local, price, doc, doc->'a' AS a FROM ev WHERE ts = $1",
            &[&ts],
        )
        .await
        .expect("select");
    let types: Vec<Type> = row.columns().iter().map(|c| c.type_().clone()).collect();
    assert_eq!(
        types,
        [
            Type::TIMESTAMPTZ,
            Type::DATE,
            Type::TIMESTAMP,
            Type::NUMERIC,
            Type::JSONB,
            Type::JSONB
        ]
    );
    assert_eq!(row.get::<_, DateTime<Utc>>(0), ts);
    assert_eq!(row.get::<_, NaiveDate>(1), day);
    assert_eq!(row.get::<_, chrono::NaiveDateTime>(2), local);
    assert_eq!(row.get::<_, Raw>(3).0, TWELVE_FIFTY);
    assert_eq!(row.get::<_, serde_json::Value>(4), doc);
    assert_eq!(
        row.get::<_, serde_json::Value>(5),
        serde_json::json!([1, 2])
    );
    // Without named types, the server says the parameter of a `jsonb`
    // column is `jsonb` (tokio-postgres then sends serde_json values).
    c.execute(
        "INSERT INTO ev (ts, doc) VALUES ($1, $2)",
        &[
            &(ts + chrono::Duration::days(1)),
            &serde_json::json!({"k": 1}),
        ],
    )
    .await
    .expect("insert inferred");
    c.execute("DELETE FROM ev WHERE doc->>'k' = '1'", &[])
        .await
        .expect("delete");
    // A day and a range of times as parameters.
    let n: i64 = c
        .query_one(
            "SELECT count(*) FROM ev WHERE day = $1 AND local < $2",
            &[&day, &day.and_hms_opt(13, 0, 0).expect("t")],
        )
        .await
        .expect("count")
        .get(0);
    assert_eq!(n, 1);
    // The text forms, as psql shows them.
    let got = text_rows(&c, "SELECT ts, day, local, price, doc FROM ev").await;
    assert_eq!(
        got,
        [[
            Some("2024-03-01 10:30:00.5+00".to_owned()),
            Some("2024-03-01".to_owned()),
            Some("2024-03-01 12:30:00".to_owned()),
            Some("12.50".to_owned()),
            Some(r#"{"a":[1,2],"s":"x"}"#.to_owned()),
        ]]
    );
}

#[tokio::test]
async fn binary_copy_in_and_out() {
    let f = PgFixture::start(false, SETUP).await;
    let c = f.pg().await;
    let types = [
        Type::TIMESTAMPTZ,
        Type::DATE,
        Type::TIMESTAMP,
        Type::NUMERIC,
        Type::JSONB,
    ];
    let base: DateTime<Utc> = "2023-12-31T23:00:00Z".parse().expect("base");
    let sink = c
        .copy_in("COPY ev FROM STDIN (FORMAT binary)")
        .await
        .expect("copy in");
    let w = BinaryCopyInWriter::new(sink, &types);
    futures::pin_mut!(w);
    for i in 0..50i64 {
        let ts = base + chrono::Duration::minutes(i * 30);
        let doc = serde_json::json!({ "i": i });
        w.as_mut()
            .write(&[
                &ts,
                &ts.date_naive(),
                &ts.naive_utc(),
                &RawNumeric(TWELVE_FIFTY.to_vec()),
                &doc,
            ])
            .await
            .expect("row");
    }
    assert_eq!(w.finish().await.expect("finish"), 50);
    let out = c
        .copy_out("COPY (SELECT * FROM ev ORDER BY ts) TO STDOUT (FORMAT binary)")
        .await
        .expect("copy out");
    let rows: Vec<_> = BinaryCopyOutStream::new(out, &types)
        .try_collect()
        .await
        .expect("rows");
    assert_eq!(rows.len(), 50);
    for (i, r) in rows.iter().enumerate() {
        let ts = base + chrono::Duration::minutes(i as i64 * 30);
        assert_eq!(r.get::<DateTime<Utc>>(0), ts);
        assert_eq!(r.get::<NaiveDate>(1), ts.date_naive());
        assert_eq!(r.get::<chrono::NaiveDateTime>(2), ts.naive_utc());
        assert_eq!(r.get::<Raw>(3).0, TWELVE_FIFTY);
        assert_eq!(r.get::<serde_json::Value>(4), serde_json::json!({ "i": i }));
    }
    // The text format writes what psql would.
    let out = c
        .copy_out("COPY (SELECT ts, day, price FROM ev ORDER BY ts LIMIT 2) TO STDOUT")
        .await
        .expect("copy text");
    let chunks: Vec<bytes::Bytes> = out.try_collect().await.expect("chunks");
    let text: String = chunks
        .iter()
        .map(|b| String::from_utf8_lossy(b).into_owned())
        .collect();
    assert_eq!(
        text,
        "2023-12-31 23:00:00+00\t2023-12-31\t12.50\n2023-12-31 23:30:00+00\t2023-12-31\t12.50\n"
    );
    // Text COPY in of the same forms, and a bad one refused with its line.
    let sink = c
        .copy_in::<_, bytes::Bytes>("COPY ev (ts, day, price) FROM STDIN")
        .await
        .expect("copy text in");
    futures::pin_mut!(sink);
    sink.send(bytes::Bytes::from_static(
        b"2030-01-01 00:00:00+00\t2030-01-01\t1.005\n",
    ))
    .await
    .expect("send");
    assert_eq!(sink.finish().await.expect("finish"), 1);
    let got = text_rows(&c, "SELECT price FROM ev WHERE day = '2030-01-01'").await;
    assert_eq!(got, [[Some("1.01".to_owned())]]);
    let sink = c
        .copy_in::<_, bytes::Bytes>("COPY ev (ts, day) FROM STDIN")
        .await
        .expect("copy bad");
    futures::pin_mut!(sink);
    sink.send(bytes::Bytes::from_static(
        b"2031-01-01 00:00:00+00\t2031-02-30\n",
    ))
    .await
    .expect("send");
    let err = sink.finish().await.expect_err("bad date");
    assert!(
        err.to_string()
            .contains("invalid input syntax for type date")
            || format!("{err:?}").contains("invalid input syntax for type date"),
        "{err:?}"
    );
}

#[tokio::test]
async fn http_results_embed_jsonb_as_json() {
    let f = PgFixture::start(true, SETUP).await;
    f.pg()
        .await
        .batch_execute(
            r#"INSERT INTO ev (ts, price, doc) VALUES ('2024-01-01 00:00:00+00', 1.5, '{"a": [1, {"b": true}]}')"#,
        )
        .await
        .expect("insert");
    let url = format!(
        "http://{}/query/service",
        f.server.http_addr().expect("http")
    );
    let v: serde_json::Value = crate::http_client::client()
        .post(&url)
        .json(&serde_json::json!({
            "statement": "SELECT doc, doc->'a' AS a, doc->>'missing' AS m, price, '{bad'::jsonb AS bad FROM ev"
        }))
        .send()
        .await
        .expect("post")
        .json()
        .await
        .expect("json");
    let row = &v["results"][0];
    assert_eq!(
        row["doc"],
        serde_json::json!({"a": [1, {"b": true}]}),
        "{v}"
    );
    assert_eq!(row["a"], serde_json::json!([1, {"b": true}]), "{v}");
    assert_eq!(row["m"], serde_json::Value::Null, "{v}");
    assert_eq!(row["price"], "1.50", "{v}");
    // Text cast to jsonb that is not JSON stays a string.
    assert_eq!(row["bad"], "{bad", "{v}");
}
