//! Transaction blocks through `silt serve`: tokio-postgres over the
//! PostgreSQL protocol (simple and extended), and HTTP requests that commit
//! or roll back as one.

use crate::http_client;
use crate::pg_fixture::PgFixture;
use serde_json::Value;
use tokio_postgres::error::SqlState;

/// The tables every test starts from.
const SETUP: &str = "CREATE TABLE acc (id BIGINT PRIMARY KEY, bal BIGINT, loc GEOMETRY);
                 CREATE INDEX acc_bal ON acc USING btree (bal);
                 CREATE INDEX acc_loc ON acc USING rtree (loc);
                 CREATE TABLE log (id BIGINT PRIMARY KEY, note VARCHAR);
                 INSERT INTO acc VALUES (1, 100, ST_Point(1, 1)), (2, 100, ST_Point(2, 2));";

struct Fixture(PgFixture);

impl Fixture {
    async fn start() -> Fixture {
        Fixture(PgFixture::start(true, SETUP).await)
    }

    async fn pg(&self) -> tokio_postgres::Client {
        self.0.pg().await
    }

    fn url(&self) -> String {
        format!(
            "http://{}/query/service",
            self.0.server.http_addr().unwrap()
        )
    }
}

async fn ids(c: &tokio_postgres::Client, sql: &str) -> Vec<i64> {
    c.query(sql, &[])
        .await
        .unwrap()
        .iter()
        .map(|r| r.get::<_, i64>(0))
        .collect()
}

fn state(e: &tokio_postgres::Error) -> SqlState {
    e.code()
        .cloned()
        .unwrap_or_else(|| panic!("no SQLSTATE in {e}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn blocks_commit_roll_back_and_abort() {
    let f = Fixture::start().await;
    let (a, b) = (f.pg().await, f.pg().await);

    // BEGIN; INSERT; ROLLBACK leaves nothing.
    a.batch_execute("BEGIN; INSERT INTO log VALUES (1, 'x'); ROLLBACK")
        .await
        .unwrap();
    assert!(ids(&b, "SELECT id FROM log").await.is_empty());

    // tokio-postgres's transaction(): insert, then a duplicate; dropping
    // the transaction rolls back and nothing is left.
    {
        let mut a = f.pg().await;
        let tx = a.transaction().await.unwrap();
        tx.execute("INSERT INTO log VALUES (2, 'a')", &[])
            .await
            .unwrap();
        let e = tx
            .execute("INSERT INTO acc VALUES (1, 0, NULL)", &[])
            .await
            .unwrap_err();
        assert_eq!(state(&e), SqlState::UNIQUE_VIOLATION, "{e}");
        // The block is aborted until it ends.
        let e = tx.query("SELECT 1", &[]).await.unwrap_err();
        assert_eq!(state(&e), SqlState::IN_FAILED_SQL_TRANSACTION, "{e}");
        // Committing a failed block rolls it back.
        tx.commit().await.unwrap();
    }
    assert!(ids(&b, "SELECT id FROM log").await.is_empty());

    // A committed block, with reads of its own writes through the extended
    // protocol ($n parameters), invisible to others until COMMIT.
    let mut a2 = f.pg().await;
    let tx = a2.transaction().await.unwrap();
    tx.execute(
        "UPDATE acc SET bal = bal - $1 WHERE id = $2",
        &[&30i64, &1i64],
    )
    .await
    .unwrap();
    tx.execute(
        "UPDATE acc SET bal = bal + $1 WHERE id = $2",
        &[&30i64, &2i64],
    )
    .await
    .unwrap();
    tx.execute("INSERT INTO log VALUES ($1, $2)", &[&3i64, &"transfer"])
        .await
        .unwrap();
    let mine: Vec<i64> = tx
        .query("SELECT bal FROM acc ORDER BY id", &[])
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(mine, vec![70, 130]);
    assert_eq!(
        ids(&b, "SELECT bal FROM acc ORDER BY id").await,
        vec![100, 100]
    );
    assert!(ids(&b, "SELECT id FROM log").await.is_empty());
    tx.commit().await.unwrap();
    assert_eq!(
        ids(&b, "SELECT bal FROM acc ORDER BY id").await,
        vec![70, 130]
    );
    assert_eq!(ids(&b, "SELECT id FROM log").await, vec![3]);
    assert_eq!(
        ids(&b, "SELECT id FROM acc WHERE bal > 120").await,
        vec![2],
        "the B+-tree follows the commit"
    );

    // Savepoints: a failure after one is undone by ROLLBACK TO.
    a.batch_execute("BEGIN; INSERT INTO log VALUES (4, 'kept'); SAVEPOINT s")
        .await
        .unwrap();
    let e = a
        .batch_execute("INSERT INTO log VALUES (3, 'dup')")
        .await
        .unwrap_err();
    assert_eq!(state(&e), SqlState::UNIQUE_VIOLATION);
    a.batch_execute("ROLLBACK TO SAVEPOINT s; INSERT INTO log VALUES (5, 'after'); COMMIT")
        .await
        .unwrap();
    assert_eq!(
        ids(&b, "SELECT id FROM log ORDER BY id").await,
        vec![3, 4, 5]
    );

    // Closing a connection inside a block rolls it back.
    {
        let c = f.pg().await;
        c.batch_execute("BEGIN; INSERT INTO log VALUES (9, 'lost')")
            .await
            .unwrap();
    }
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    assert_eq!(
        ids(&b, "SELECT id FROM log ORDER BY id").await,
        vec![3, 4, 5]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_conflict_is_40001_and_retryable() {
    let f = Fixture::start().await;
    let (mut a, b) = (f.pg().await, f.pg().await);
    let tx = a.transaction().await.unwrap();
    tx.execute("UPDATE acc SET bal = bal - 10 WHERE id = 1", &[])
        .await
        .unwrap();
    b.execute("UPDATE acc SET bal = bal + 1 WHERE id = 1", &[])
        .await
        .unwrap();
    let e = tx.commit().await.unwrap_err();
    assert_eq!(state(&e), SqlState::T_R_SERIALIZATION_FAILURE, "{e}");
    let msg = e
        .as_db_error()
        .map(|d| d.message().to_owned())
        .unwrap_or_default();
    assert!(msg.contains("acc") && msg.contains("retry"), "{msg}");
    assert_eq!(ids(&b, "SELECT bal FROM acc WHERE id = 1").await, vec![101]);
    // The session is usable again; the retry commits.
    let tx = a.transaction().await.unwrap();
    tx.execute("UPDATE acc SET bal = bal - 10 WHERE id = 1", &[])
        .await
        .unwrap();
    tx.commit().await.unwrap();
    assert_eq!(ids(&b, "SELECT bal FROM acc WHERE id = 1").await, vec![91]);
}

async fn post(url: &str, body: Value) -> (u16, Value) {
    let r = http_client::client()
        .post(url)
        .json(&body)
        .send()
        .await
        .unwrap();
    (r.status().as_u16(), r.json().await.unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn http_atomic_requests() {
    let f = Fixture::start().await;
    let url = f.url();
    // All or nothing: the duplicate in the third statement undoes the rest.
    let (status, v) = post(
        &url,
        serde_json::json!({
            "statement": "INSERT INTO log VALUES (1, 'a'); UPDATE acc SET bal = 0 WHERE id = 1; INSERT INTO acc VALUES (2, 0, NULL)",
            "atomic": true
        }),
    )
    .await;
    assert_eq!(status, 409, "{v}");
    assert_eq!(v["errors"][0]["code"], "23505", "{v}");
    let (_, v) = post(
        &url,
        serde_json::json!({"statement": "SELECT count(*) AS n FROM log"}),
    )
    .await;
    assert_eq!(v["results"][0]["n"], 0, "{v}");
    let (_, v) = post(
        &url,
        serde_json::json!({"statement": "SELECT bal FROM acc WHERE id = 1"}),
    )
    .await;
    assert_eq!(v["results"][0]["bal"], 100, "{v}");

    // A good atomic request commits everything and returns the last rows.
    let (status, v) = post(
        &url,
        serde_json::json!({
            "statement": "INSERT INTO log VALUES (1, 'a'); UPDATE acc SET bal = 0 WHERE id = 1; SELECT bal FROM acc WHERE id = 1",
            "atomic": true
        }),
    )
    .await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["results"][0]["bal"], 0, "{v}");
    let (_, v) = post(
        &url,
        serde_json::json!({"statement": "SELECT count(*) AS n FROM log"}),
    )
    .await;
    assert_eq!(v["results"][0]["n"], 1, "{v}");

    // BEGIN ... COMMIT inside one request works; a request that ends inside
    // a block is refused and keeps nothing of it.
    let (status, v) = post(
        &url,
        serde_json::json!({"statement": "BEGIN; INSERT INTO log VALUES (2, 'b'); COMMIT"}),
    )
    .await;
    assert_eq!(status, 200, "{v}");
    let (status, v) = post(
        &url,
        serde_json::json!({"statement": "BEGIN; INSERT INTO log VALUES (3, 'c')"}),
    )
    .await;
    assert_eq!(status, 400, "{v}");
    assert!(
        v["errors"][0]["msg"].as_str().unwrap().contains("COMMIT"),
        "{v}"
    );
    let (_, v) = post(
        &url,
        serde_json::json!({"statement": "SELECT count(*) AS n FROM log"}),
    )
    .await;
    assert_eq!(v["results"][0]["n"], 2, "{v}");
    let (status, v) = post(
        &url,
        serde_json::json!({"statement": "SELECT 1", "atomic": "yes"}),
    )
    .await;
    assert_eq!(status, 400, "{v}");
}
