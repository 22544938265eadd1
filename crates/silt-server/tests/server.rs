//! `silt serve` end to end: a server on port 0 over a temporary database,
//! driven through `tokio-postgres` and HTTP (`reqwest`). Security,
//! transactions, COPY and the catalog are modules of this binary (one link
//! of the server for all of them); the tests that read the process's memory
//! (`limits`, `protocol_fuzz`) stay in binaries of their own.

#[path = "common/http_client.rs"]
mod http_client;

#[path = "common/pg_fixture.rs"]
mod pg_fixture;

#[path = "common/pgtls.rs"]
mod pgtls;

#[path = "pg/catalog.rs"]
mod catalog;
#[path = "pg/copy.rs"]
mod copy;
#[path = "server/pubsub.rs"]
mod pubsub;
#[path = "server/security.rs"]
mod security;
#[path = "server/transactions.rs"]
mod transactions;
#[path = "pg/types.rs"]
mod types;

use std::sync::Arc;
use std::time::Duration;

use datafusion::arrow::array::{Int64Array, RecordBatch};
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::catalog::streaming::StreamingTable;
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::streaming::PartitionStream;
use serde_json::Value;
use silt::{Database, DbOptions};
use silt_server::{Server, ServerConfig};
use silt_sql::SqlEngine;
use tokio_postgres::SimpleQueryMessage;
use tokio_postgres::error::SqlState;
use tokio_postgres::types::Type;

/// A table `slow(n BIGINT)` whose scan yields one row every `step`.
#[derive(Debug)]
struct Slow {
    schema: SchemaRef,
    rows: i64,
    step: Duration,
}

impl PartitionStream for Slow {
    fn schema(&self) -> &SchemaRef {
        &self.schema
    }

    fn execute(&self, _ctx: Arc<TaskContext>) -> SendableRecordBatchStream {
        let schema = self.schema.clone();
        let step = self.step;
        let s = futures::stream::iter(0..self.rows).then(move |i| {
            let schema = schema.clone();
            async move {
                tokio::time::sleep(step).await;
                Ok(RecordBatch::try_new(
                    schema,
                    vec![Arc::new(Int64Array::from(vec![i]))],
                )?)
            }
        });
        Box::pin(RecordBatchStreamAdapter::new(self.schema.clone(), s))
    }
}

use futures::StreamExt;

struct Fixture {
    dir: tempfile::TempDir,
    server: Server,
}

impl Fixture {
    async fn start(edit: impl FnOnce(&mut ServerConfig)) -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        Fixture::start_in(dir, edit).await
    }

    async fn start_in(dir: tempfile::TempDir, edit: impl FnOnce(&mut ServerConfig)) -> Fixture {
        let db = Arc::new(Database::open(dir.path(), DbOptions::default()).unwrap());
        let engine = SqlEngine::new(db).unwrap();
        let schema = Arc::new(Schema::new(vec![Field::new("n", DataType::Int64, false)]));
        let slow = Slow {
            schema: schema.clone(),
            rows: 20,
            step: Duration::from_millis(100),
        };
        let table = StreamingTable::try_new(schema, vec![Arc::new(slow)]).unwrap();
        engine
            .session()
            .register_table("slow", Arc::new(table))
            .unwrap();
        let mut cfg = ServerConfig {
            pg_addr: Some("127.0.0.1:0".parse().unwrap()),
            http_addr: Some("127.0.0.1:0".parse().unwrap()),
            ..ServerConfig::default()
        };
        edit(&mut cfg);
        let server = Server::start_with_engine(engine, cfg).await.unwrap();
        Fixture { dir, server }
    }

    async fn pg(&self) -> tokio_postgres::Client {
        pg_fixture::connect(&self.server).await
    }

    fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.server.http_addr().unwrap())
    }
}

async fn post_json(url: &str, statement: &str) -> (u16, Value) {
    let r = http_client::client()
        .post(url)
        .json(&serde_json::json!({ "statement": statement }))
        .send()
        .await
        .unwrap();
    let status = r.status().as_u16();
    (status, r.json().await.unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgres_protocol() {
    let f = Fixture::start(|_| {}).await;
    let c = f.pg().await;

    c.batch_execute(
        "CREATE TABLE t (id BIGINT PRIMARY KEY, name VARCHAR, score DOUBLE, ok BOOLEAN, raw BYTEA);",
    )
    .await
    .unwrap();
    let n = c
        .execute(
            "INSERT INTO t VALUES (1, 'a', 1.5, true, NULL), (2, 'b', 2.5, false, NULL), (3, 'c', NULL, NULL, NULL)",
            &[],
        )
        .await
        .unwrap();
    assert_eq!(n, 3);

    // Extended protocol with a parameter; binary results.
    let rows = c
        .query(
            "SELECT id, name, score, ok FROM t WHERE id >= $1 ORDER BY id",
            &[&2i64],
        )
        .await
        .unwrap();
    assert_eq!(rows.len(), 2);
    assert_eq!(rows[0].get::<_, i64>(0), 2);
    assert_eq!(rows[0].get::<_, String>(1), "b");
    assert_eq!(rows[0].get::<_, Option<f64>>(2), Some(2.5));
    assert_eq!(rows[0].get::<_, Option<bool>>(3), Some(false));
    assert_eq!(rows[1].get::<_, Option<f64>>(2), None);

    // Parameters of several types, a quote inside a string, bytea.
    let n = c
        .execute(
            "INSERT INTO t VALUES ($1, $2, $3, $4, $5)",
            &[&4i64, &"it's", &0.25f64, &true, &vec![0u8, 1, 255]],
        )
        .await
        .unwrap();
    assert_eq!(n, 1);
    let row = c
        .query_one("SELECT name, raw FROM t WHERE id = $1", &[&4i64])
        .await
        .unwrap();
    assert_eq!(row.get::<_, String>(0), "it's");
    assert_eq!(row.get::<_, Vec<u8>>(1), vec![0u8, 1, 255]);

    // A prepared statement reused.
    let st = c.prepare("SELECT name FROM t WHERE id = $1").await.unwrap();
    for (id, name) in [(1i64, "a"), (3, "c")] {
        let r = c.query_one(&st, &[&id]).await.unwrap();
        assert_eq!(r.get::<_, String>(0), name);
    }

    // Simple protocol, text results, several statements.
    let msgs = c
        .simple_query("SELECT name FROM t WHERE id = 1; SELECT count(*) AS n FROM t")
        .await
        .unwrap();
    let rows: Vec<Vec<Option<String>>> = msgs
        .iter()
        .filter_map(|m| match m {
            SimpleQueryMessage::Row(r) => {
                Some((0..r.len()).map(|i| r.get(i).map(str::to_owned)).collect())
            }
            _ => None,
        })
        .collect();
    assert_eq!(
        rows,
        vec![vec![Some("a".to_owned())], vec![Some("4".to_owned())]]
    );

    // Errors carry their SQLSTATE; the session survives them.
    let e = c.query("SELEC 1", &[]).await.unwrap_err();
    assert_eq!(e.code(), Some(&SqlState::SYNTAX_ERROR), "{e:?}");
    let e = c.query("SELECT * FROM nosuch", &[]).await.unwrap_err();
    assert_eq!(e.code(), Some(&SqlState::UNDEFINED_TABLE), "{e:?}");
    let e = c
        .execute("INSERT INTO t VALUES (1, 'dup', 0, false, NULL)", &[])
        .await
        .unwrap_err();
    assert_eq!(e.code(), Some(&SqlState::UNIQUE_VIOLATION), "{e:?}");
    let e = c
        .batch_execute("INSERT INTO t VALUES (2, 'dup', 0, false, NULL)")
        .await
        .unwrap_err();
    assert_eq!(e.code(), Some(&SqlState::UNIQUE_VIOLATION), "{e:?}");
    let msg = e.as_db_error().unwrap().message().to_owned();
    assert!(msg.contains("duplicate") || msg.contains("exists"), "{msg}");

    // Drivers' transaction wrapping is accepted.
    let mut c = c;
    let tx = c.transaction().await.unwrap();
    tx.execute("DELETE FROM t WHERE id = 4", &[]).await.unwrap();
    tx.commit().await.unwrap();
    let r = c.query_one("SELECT count(*) FROM t", &[]).await.unwrap();
    assert_eq!(r.get::<_, i64>(0), 3);

    f.server.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn constraint_and_type_errors_reach_the_client() {
    let f = Fixture::start(|_| {}).await;
    let c = f.pg().await;
    c.batch_execute(
        "CREATE TABLE t (id BIGINT PRIMARY KEY, name VARCHAR NOT NULL, n BIGINT, loc GEOMETRY)",
    )
    .await
    .unwrap();
    c.execute("INSERT INTO t VALUES (1, 'a', 1, NULL)", &[])
        .await
        .unwrap();

    // 23505, as PostgreSQL words it: message, detail, table, constraint;
    // through the extended and the simple protocol.
    let dup = "INSERT INTO t VALUES (1, 'b', 2, NULL)";
    for e in [
        c.execute(dup, &[]).await.unwrap_err(),
        c.batch_execute(dup).await.unwrap_err(),
    ] {
        let db = e.as_db_error().expect("a server error");
        assert_eq!(db.code(), &SqlState::UNIQUE_VIOLATION);
        assert_eq!(
            db.message(),
            "duplicate key value violates unique constraint \"t_pkey\""
        );
        assert_eq!(db.detail(), Some("Key (id)=(1) already exists."));
        assert_eq!(db.constraint(), Some("t_pkey"));
        assert_eq!(db.table(), Some("t"));
    }

    // 23502: a NULL key, a missing key, a NULL parameter for a NOT NULL column.
    for (e, col) in [
        (
            c.execute("INSERT INTO t VALUES (NULL, 'x', 1, NULL)", &[])
                .await
                .unwrap_err(),
            "id",
        ),
        (
            c.batch_execute("INSERT INTO t (name) VALUES ('x')")
                .await
                .unwrap_err(),
            "id",
        ),
        (
            c.execute(
                "INSERT INTO t (id, name) VALUES ($1, $2)",
                &[&2i64, &None::<String>],
            )
            .await
            .unwrap_err(),
            "name",
        ),
    ] {
        let db = e.as_db_error().expect("a server error");
        assert_eq!(db.code(), &SqlState::NOT_NULL_VIOLATION, "{db:?}");
        assert_eq!(
            db.message(),
            format!(
                "null value in column \"{col}\" of relation \"t\" violates not-null constraint"
            )
        );
        assert_eq!(db.column(), Some(col));
    }

    // 42804 and 22P02, naming the column and the types.
    let e = c
        .execute("INSERT INTO t (id, name, n) VALUES (3, 'x', true)", &[])
        .await
        .unwrap_err();
    let db = e.as_db_error().expect("a server error");
    assert_eq!(db.code(), &SqlState::DATATYPE_MISMATCH);
    assert_eq!(
        db.message(),
        "column \"n\" is of type bigint but expression is of type boolean"
    );
    let e = c
        .batch_execute("INSERT INTO t (id, name) VALUES ('abc', 'x')")
        .await
        .unwrap_err();
    let db = e.as_db_error().expect("a server error");
    assert_eq!(db.code(), &SqlState::INVALID_TEXT_REPRESENTATION);
    assert_eq!(
        db.message(),
        "invalid input syntax for type bigint: \"abc\" (column \"id\")"
    );
    let e = c
        .batch_execute("UPDATE t SET n = 'abc' WHERE id = 1")
        .await
        .unwrap_err();
    assert_eq!(
        e.code(),
        Some(&SqlState::INVALID_TEXT_REPRESENTATION),
        "{e:?}"
    );

    // A multi-row insert stopped at row 3: the code of the row's error,
    // and how many rows landed.
    let e = c
        .batch_execute(
            "INSERT INTO t (id, name) VALUES (10, 'a'), (11, 'b'), (1, 'c'), (12, 'd'), (13, 'e')",
        )
        .await
        .unwrap_err();
    let db = e.as_db_error().expect("a server error");
    assert_eq!(db.code(), &SqlState::UNIQUE_VIOLATION);
    assert_eq!(
        db.message(),
        "row 3 of 5 failed: duplicate key value violates unique constraint \"t_pkey\"; \
         the 2 rows before it were committed"
    );
    assert_eq!(db.detail(), Some("Key (id)=(1) already exists."));
    let r = c
        .query_one("SELECT count(*) FROM t WHERE id >= 10", &[])
        .await
        .unwrap();
    assert_eq!(r.get::<_, i64>(0), 2);

    // ON CONFLICT with parameters; the rows affected come back.
    let n = c
        .execute(
            "INSERT INTO t (id, name, n) VALUES ($1, $2, $3), ($4, $5, $6) \
             ON CONFLICT (id) DO UPDATE SET n = t.n + excluded.n, loc = ST_Point(7, 7)",
            &[&1i64, &"z", &5i64, &20i64, &"new", &1i64],
        )
        .await
        .unwrap();
    assert_eq!(n, 2);
    let r = c
        .query_one("SELECT name, n, loc FROM t WHERE id = 1", &[])
        .await
        .unwrap();
    assert_eq!(r.get::<_, String>(0), "a");
    assert_eq!(r.get::<_, i64>(1), 6);
    assert_eq!(r.get::<_, String>(2), "POINT(7 7)");
    let n = c
        .execute(
            "INSERT INTO t (id, name) VALUES (1, 'x'), (21, 'y') ON CONFLICT (id) DO NOTHING",
            &[],
        )
        .await
        .unwrap();
    assert_eq!(n, 1);
    let n = c
        .execute(
            "INSERT INTO t (id, name) VALUES (1, 'x') ON CONFLICT (id) DO UPDATE SET n = 0 WHERE t.n < 0",
            &[],
        )
        .await
        .unwrap();
    assert_eq!(n, 0);

    // Over HTTP the same codes.
    let (status, v) = post_json(
        &f.url("/query/service"),
        "INSERT INTO t (id, name) VALUES (NULL, 'x')",
    )
    .await;
    assert_eq!(status, 400, "{v}");
    assert_eq!(v["errors"][0]["code"], "23502");
    let (status, v) = post_json(&f.url("/query/service"), dup).await;
    assert_eq!(status, 409, "{v}");
    assert!(
        v["errors"][0]["msg"]
            .as_str()
            .unwrap()
            .contains("Key (id)=(1) already exists."),
        "{v}"
    );

    f.server.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn http_query_service() {
    let f = Fixture::start(|_| {}).await;
    let url = f.url("/query/service");
    let client = http_client::client();

    let (status, v) = post_json(&url, "CREATE TABLE h (id BIGINT PRIMARY KEY, name VARCHAR)").await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["status"], "success");

    // Raw body.
    let r = client
        .post(&url)
        .header("content-type", "text/plain")
        .body("INSERT INTO h VALUES (1, 'x'), (2, 'y')")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);

    // Form field, as AsterixDB clients send it.
    let r = client
        .post(&url)
        .form(&[("statement", "SELECT id, name FROM h WHERE id > 1")])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert!(r.headers().contains_key("x-request-id"));
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["status"], "success");
    assert_eq!(v["results"], serde_json::json!([{"id": 2, "name": "y"}]));
    assert_eq!(v["metrics"]["resultCount"], 1);
    assert!(v["requestID"].is_string());
    assert!(
        v["metrics"]["elapsedTime"]
            .as_str()
            .unwrap()
            .ends_with("ms")
    );

    // Error envelope.
    let (status, v) = post_json(&url, "SELECT * FROM nosuch").await;
    assert_eq!(status, 400);
    assert_eq!(v["status"], "fatal");
    assert_eq!(v["errors"][0]["code"], "42P01");
    assert!(v["errors"][0]["msg"].as_str().unwrap().contains("nosuch"));
    let (status, v) = post_json(&url, "INSERT INTO h VALUES (1, 'again')").await;
    assert_eq!(status, 409, "{v}");
    assert_eq!(v["errors"][0]["code"], "23505");
    let r = client
        .post(&url)
        .header("content-type", "application/json")
        .body("{not json")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);

    // NDJSON streaming of many rows.
    post_json(&url, "CREATE TABLE big (id BIGINT PRIMARY KEY, v VARCHAR)").await;
    let total = 12_000;
    for chunk in 0..6 {
        let values: Vec<String> = (0..2000)
            .map(|i| {
                let id = chunk * 2000 + i;
                format!("({id}, 'v{id}')")
            })
            .collect();
        let (status, v) = post_json(
            &url,
            &format!("INSERT INTO big VALUES {}", values.join(",")),
        )
        .await;
        assert_eq!(status, 200, "{v}");
    }
    let r = client
        .post(&url)
        .header("accept", "application/x-ndjson")
        .body("SELECT id, v FROM big")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(r.headers()["content-type"], "application/x-ndjson");
    let mut chunks = 0;
    let mut buf = Vec::new();
    let mut body = r.bytes_stream();
    while let Some(c) = body.next().await {
        buf.extend_from_slice(&c.unwrap());
        chunks += 1;
    }
    let text = String::from_utf8(buf).unwrap();
    let mut ids: Vec<i64> = text
        .lines()
        .map(|l| {
            let v: Value = serde_json::from_str(l).unwrap();
            assert_eq!(v["v"], format!("v{}", v["id"]));
            v["id"].as_i64().unwrap()
        })
        .collect();
    ids.sort_unstable();
    assert_eq!(ids, (0..total).collect::<Vec<_>>());
    assert!(chunks > 1, "the rows came in {chunks} chunk(s)");

    // ?format=ndjson, and an error after streaming started is a last line.
    let r = client
        .get(f.url("/query/service?format=ndjson&statement=SELECT%201%20AS%20one"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.text().await.unwrap(), "{\"one\":1}\n");

    // Health and stats.
    let h: Value = client
        .get(f.url("/health"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(h["status"], "ok");
    let s: Value = client
        .get(f.url("/stats"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(s["datasets"].as_array().unwrap().len() >= 2, "{s}");

    f.server.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn busy_and_timeout() {
    // Two slots, one waiting place: of five 2-second queries sent at once,
    // two run, one waits and runs, two are refused at once.
    let f = Fixture::start(|c| {
        c.max_concurrent = 2;
        c.queue = 1;
        c.query_timeout = Duration::from_secs(20);
    })
    .await;
    let url = f.url("/query/service");
    let mut tasks = Vec::new();
    for _ in 0..5 {
        let url = url.clone();
        tasks.push(tokio::spawn(async move {
            post_json(&url, "SELECT count(*) AS n FROM slow").await
        }));
    }
    let mut ok = 0;
    let mut busy = 0;
    for t in tasks {
        let (status, v) = t.await.unwrap();
        match status {
            200 => {
                assert_eq!(v["results"][0]["n"], 20);
                ok += 1;
            }
            503 => {
                assert_eq!(v["errors"][0]["code"], "53000");
                assert!(v["errors"][0]["msg"].as_str().unwrap().contains("busy"));
                busy += 1;
            }
            other => panic!("unexpected {other}: {v}"),
        }
    }
    assert_eq!(ok + busy, 5);
    assert!(ok >= 3, "ok {ok} busy {busy}");
    assert!(busy >= 1, "ok {ok} busy {busy}");
    // The PostgreSQL side shares the limits and still works.
    let c = f.pg().await;
    let r = c.query_one("SELECT 41 + 1", &[]).await.unwrap();
    assert_eq!(r.get::<_, i64>(0), 42);
    f.server.shutdown().await.unwrap();

    // A 2-second query under a 300 ms timeout is cancelled, on both sides.
    let f = Fixture::start(|c| c.query_timeout = Duration::from_millis(300)).await;
    let (status, v) = post_json(&f.url("/query/service"), "SELECT count(*) FROM slow").await;
    assert_eq!(status, 504, "{v}");
    assert_eq!(v["errors"][0]["code"], "57014");
    assert!(
        v["errors"][0]["msg"].as_str().unwrap().contains("300ms"),
        "{v}"
    );
    let c = f.pg().await;
    let e = c.query("SELECT n FROM slow", &[]).await.unwrap_err();
    assert_eq!(e.code(), Some(&SqlState::QUERY_CANCELED), "{e:?}");
    let e = c
        .simple_query("SELECT count(*) FROM slow")
        .await
        .unwrap_err();
    assert_eq!(e.code(), Some(&SqlState::QUERY_CANCELED), "{e:?}");
    // tokio-postgres prints only "db error"; the server's message is inside.
    let msg = e
        .as_db_error()
        .map(|d| d.message().to_string())
        .unwrap_or_default();
    assert!(msg.contains("timeout"), "{e:?}");
    // The session is still usable.
    let r = c.query_one("SELECT 1", &[]).await.unwrap();
    assert_eq!(r.get::<_, i64>(0), 1);
    f.server.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn graceful_shutdown_checkpoints() {
    let f = Fixture::start(|c| c.drain_timeout = Duration::from_secs(10)).await;
    let c = f.pg().await;
    c.batch_execute("CREATE TABLE kept (id BIGINT PRIMARY KEY, name VARCHAR)")
        .await
        .unwrap();
    for i in 0..50i64 {
        c.execute("INSERT INTO kept VALUES ($1, $2)", &[&i, &format!("n{i}")])
            .await
            .unwrap();
    }
    // A statement running when the shutdown starts finishes.
    let url = f.url("/query/service");
    let running =
        tokio::spawn(async move { post_json(&url, "SELECT count(*) AS n FROM slow").await });
    tokio::time::sleep(Duration::from_millis(300)).await;
    let Fixture { dir, server } = f;
    let pg_addr = server.pg_addr().unwrap();
    server.shutdown().await.unwrap();
    let (status, v) = running.await.unwrap();
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["results"][0]["n"], 20);
    // No longer accepting.
    assert!(tokio::net::TcpStream::connect(pg_addr).await.is_err());
    drop(c);

    // Reopen: the rows are there, and nothing had to be redone from the log.
    let mut db = None;
    for _ in 0..50 {
        match Database::open(dir.path(), DbOptions::default()) {
            Ok(d) => {
                db = Some(d);
                break;
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
    let db = db.expect("the database can be reopened after shutdown");
    assert_eq!(db.recovery_summary().records_redone, 0);
    let engine = SqlEngine::new(Arc::new(db)).unwrap();
    let b = engine
        .execute("SELECT count(*) AS n FROM kept")
        .await
        .unwrap();
    let n = b[0]
        .column(0)
        .as_any()
        .downcast_ref::<Int64Array>()
        .unwrap()
        .value(0);
    assert_eq!(n, 50);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn http_args_and_nulls() {
    let f = Fixture::start(|_| {}).await;
    let url = f.url("/query/service");
    let (s, _) = post_json(
        &url,
        "CREATE TABLE p (id BIGINT PRIMARY KEY, name VARCHAR, score DOUBLE PRECISION)",
    )
    .await;
    assert_eq!(s, 200);
    let post = |body: Value| {
        let url = url.clone();
        async move {
            let r = http_client::client()
                .post(&url)
                .json(&body)
                .send()
                .await
                .unwrap();
            let status = r.status().as_u16();
            (status, r.json::<Value>().await.unwrap())
        }
    };
    let (s, v) = post(serde_json::json!({
        "statement": "INSERT INTO p VALUES ($1, $2, $3), ($4, $5, $6)",
        "args": [1, "it's", 1.5, 2, null, -2.25]
    }))
    .await;
    assert_eq!(s, 200, "{v}");
    let (s, v) = post(serde_json::json!({
        "statement": "SELECT id, name, score, NULL, 1, 1 FROM p WHERE id >= $1 ORDER BY id",
        "args": [1]
    }))
    .await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(
        v["results"],
        serde_json::json!([
            {"id": 1, "name": "it's", "score": 1.5, "?column?": 1},
            {"id": 2, "name": null, "score": -2.25, "?column?": 1}
        ]),
        "{v}"
    );
    // The NULL column is JSON null, not "".
    let (_, v) = post(serde_json::json!({"statement": "SELECT NULL AS n"})).await;
    assert_eq!(v["results"], serde_json::json!([{"n": null}]), "{v}");
    // Several statements: each one's result in "resultSets".
    let (s, v) = post(serde_json::json!({
        "statement": "SELECT 1 AS a; INSERT INTO p VALUES ($1, 'z', 0); SELECT count(*) AS n FROM p",
        "args": [3]
    }))
    .await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["results"], serde_json::json!([{"n": 3}]), "{v}");
    assert_eq!(
        v["resultSets"],
        serde_json::json!([[{"a": 1}], [{"count": 1}], [{"n": 3}]]),
        "{v}"
    );
    // Placeholders without args, too few args, and bad args are refused.
    for body in [
        serde_json::json!({"statement": "SELECT $1"}),
        serde_json::json!({"statement": "SELECT $2", "args": [1]}),
        serde_json::json!({"statement": "SELECT $1", "args": 5}),
    ] {
        let (s, v) = post(body).await;
        assert_eq!(s, 400, "{v}");
    }
    f.server.shutdown().await.unwrap();
}

/// Spatial queries as prepared statements: the placeholders of Silt's
/// functions take those functions' argument types (numbers for
/// coordinates and distances, text for geometries), so a driver binds
/// floats and strings to them; the answers match the literal forms.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn prepared_spatial_parameters() {
    let f = Fixture::start(|_| {}).await;
    let c = f.pg().await;
    c.batch_execute(
        "CREATE TABLE p (id BIGINT PRIMARY KEY, loc GEOMETRY); \
         CREATE INDEX p_loc ON p USING rtree (loc); \
         INSERT INTO p VALUES (1, ST_Point(1, 1)), (2, ST_Point(2, 2)), (3, ST_Point(10, 10))",
    )
    .await
    .unwrap();
    let ids = |rows: Vec<tokio_postgres::Row>| -> Vec<i64> {
        let mut v: Vec<i64> = rows.iter().map(|r| r.get(0)).collect();
        v.sort_unstable();
        v
    };

    let boxq = c
        .prepare("SELECT id FROM p WHERE ST_Intersects(loc, ST_MakeEnvelope($1, $2, $3, $4))")
        .await
        .unwrap();
    assert_eq!(boxq.params(), &[Type::FLOAT8; 4]);
    let rows = c
        .query(&boxq, &[&0.5f64, &0.5f64, &2.5f64, &2.5f64])
        .await
        .unwrap();
    assert_eq!(ids(rows), vec![1, 2]);

    // Within 200 km of (1, 1): id 1 (0 m) and id 2 (~157 km).
    let radius = c
        .prepare("SELECT id FROM p WHERE ST_DWithin(loc, ST_Point($1, $2), $3)")
        .await
        .unwrap();
    assert_eq!(radius.params(), &[Type::FLOAT8; 3]);
    let rows = c
        .query(&radius, &[&1.0f64, &1.0f64, &200_000.0f64])
        .await
        .unwrap();
    assert_eq!(ids(rows), vec![1, 2]);

    let knn = c
        .prepare("SELECT id FROM p ORDER BY ST_Distance(loc, ST_Point($1, $2)) LIMIT 2")
        .await
        .unwrap();
    let rows = c.query(&knn, &[&9.0f64, &9.0f64]).await.unwrap();
    let got: Vec<i64> = rows.iter().map(|r| r.get(0)).collect();
    assert_eq!(got, vec![3, 2]);

    // A geometry parameter is text (WKT).
    let within = c
        .prepare("SELECT id FROM p WHERE ST_Intersects(loc, $1)")
        .await
        .unwrap();
    assert_eq!(within.params(), &[Type::TEXT]);
    let rows = c
        .query(&within, &[&"POLYGON((0 0, 3 0, 3 3, 0 3, 0 0))"])
        .await
        .unwrap();
    assert_eq!(ids(rows), vec![1, 2]);

    // An insert's coordinates, too.
    let ins = c
        .prepare("INSERT INTO p VALUES ($1, ST_Point($2, $3))")
        .await
        .unwrap();
    assert_eq!(ins.params(), &[Type::INT8, Type::FLOAT8, Type::FLOAT8]);
    c.execute(&ins, &[&4i64, &1.5f64, &1.5f64]).await.unwrap();
    let rows = c
        .query(&boxq, &[&0.5f64, &0.5f64, &2.5f64, &2.5f64])
        .await
        .unwrap();
    assert_eq!(ids(rows), vec![1, 2, 4]);

    f.server.shutdown().await.unwrap();
}
