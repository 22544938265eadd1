//! Resource bounds of `silt serve` (issue #28), through real clients:
//! values built by functions, statement timeouts that stop the work, the
//! cancel request, connection caps, idle sessions, memory and result
//! limits. The tests of this file run one at a time (they read the
//! process's memory and CPU time).

#[path = "common/http_client.rs"]
mod http_client;

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use silt::{Database, DbOptions};
use silt_server::{Server, ServerConfig};
use tokio::sync::Mutex;
use tokio_postgres::error::SqlState;
use tokio_postgres::{Client, NoTls};

static SERIAL: Mutex<()> = Mutex::const_new(());

struct Fixture {
    _dir: tempfile::TempDir,
    server: Server,
}

impl Fixture {
    async fn start(edit: impl FnOnce(&mut ServerConfig)) -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let db = Arc::new(Database::open(dir.path(), DbOptions::default()).unwrap());
        let mut cfg = ServerConfig {
            pg_addr: Some("127.0.0.1:0".parse().unwrap()),
            http_addr: Some("127.0.0.1:0".parse().unwrap()),
            ..ServerConfig::default()
        };
        edit(&mut cfg);
        let server = Server::start(db, cfg).await.unwrap();
        Fixture { _dir: dir, server }
    }

    fn conninfo(&self) -> String {
        let a = self.server.pg_addr().unwrap();
        format!("host={} port={} user=test dbname=silt", a.ip(), a.port())
    }

    /// A client, and what its connection ended with.
    async fn pg_watched(
        &self,
    ) -> (
        Client,
        tokio::sync::oneshot::Receiver<Result<(), tokio_postgres::Error>>,
    ) {
        let (client, conn) = tokio_postgres::connect(&self.conninfo(), NoTls)
            .await
            .unwrap();
        let (tx, rx) = tokio::sync::oneshot::channel();
        tokio::spawn(async move {
            let _ = tx.send(conn.await);
        });
        (client, rx)
    }

    async fn pg(&self) -> Client {
        self.pg_watched().await.0
    }

    fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.server.http_addr().unwrap())
    }

    /// A table `big(id, v)` of `n` rows.
    async fn big(&self, c: &Client, n: i64) {
        c.batch_execute("CREATE TABLE big (id BIGINT PRIMARY KEY, v BIGINT)")
            .await
            .unwrap();
        let mut i = 0;
        while i < n {
            let rows: Vec<String> = (i..(i + 1000).min(n))
                .map(|k| format!("({k}, {})", k % 97))
                .collect();
            c.batch_execute(&format!("INSERT INTO big VALUES {}", rows.join(",")))
                .await
                .unwrap();
            i += 1000;
        }
    }
}

async fn post(url: &str, body: Value) -> (u16, Value) {
    let r = http_client::client()
        .post(url)
        .json(&body)
        .send()
        .await
        .unwrap();
    let status = r.status().as_u16();
    (status, r.json().await.unwrap())
}

fn code(e: &tokio_postgres::Error) -> String {
    e.code().map(|c| c.code().to_owned()).unwrap_or_default()
}

fn message(e: &tokio_postgres::Error) -> String {
    e.as_db_error()
        .map(|d| d.message().to_owned())
        .unwrap_or_else(|| e.to_string())
}

/// A line of `/proc/self/status`, in KiB.
fn status_kib(key: &str) -> u64 {
    let s = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    s.lines()
        .find(|l| l.starts_with(key))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// CPU seconds used by this process (all threads; clock ticks of 1/100 s,
/// Linux's USER_HZ).
fn cpu_seconds() -> f64 {
    let s = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // The fields after the command name (which is in parentheses).
    let rest = s.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    // utime and stime are fields 14 and 15 of the whole line: 12 and 13
    // after the state field.
    (ticks(11) + ticks(12)) / 100.0
}

const CROSS3: &str = "SELECT count(*) FROM big a, big b, big c WHERE a.v + b.v + c.v = -1";

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn huge_values_are_refused_before_they_are_built() {
    let _serial = SERIAL.lock().await;
    // A cap of 4 MiB: the value checked after it is built (the `concat`
    // below) stays small enough to build fast in a debug build on a busy
    // machine (with the default 64 MiB it once ran into the 30 s timeout).
    let f = Fixture::start(|c| c.max_value_bytes = 4 << 20).await;
    let c = f.pg().await;
    let rss_before = status_kib("VmRSS:");

    // The statement of the issue: 2 GB shipped after 69 s.
    let e = c
        .simple_query("SELECT repeat('x', 2000000000)")
        .await
        .unwrap_err();
    assert_eq!(e.code(), Some(&SqlState::PROGRAM_LIMIT_EXCEEDED), "{e:?}");
    let m = message(&e);
    assert!(
        m.contains("repeat") && m.contains("--max-value-bytes"),
        "{m}"
    );
    // Prepared, with the count as a parameter.
    let st = c
        .prepare_typed(
            "SELECT repeat('x', $1)",
            &[tokio_postgres::types::Type::INT8],
        )
        .await
        .unwrap();
    let e = c.query(&st, &[&2_000_000_000i64]).await.unwrap_err();
    assert_eq!(code(&e), "54000", "{e:?}");
    for sql in [
        "SELECT lpad('x', 2000000000)",
        "SELECT rpad('x', 100000000, 'é')",
        "SELECT replace(repeat('a', 1000000), 'a', repeat('b', 100))",
        // Each part under the cap, the whole over it (checked after).
        "SELECT concat(repeat('a', 3000000), repeat('b', 3000000))",
    ] {
        let e = c.simple_query(sql).await.unwrap_err();
        assert_eq!(code(&e), "54000", "{sql}: {e:?}");
    }
    // Small values are untouched.
    let r = c
        .query_one(
            "SELECT repeat('ab', 3), lpad('7', 3, '0'), concat('a', 'b')",
            &[],
        )
        .await
        .unwrap();
    assert_eq!(r.get::<_, String>(0), "ababab");
    assert_eq!(r.get::<_, String>(1), "007");
    assert_eq!(r.get::<_, String>(2), "ab");

    // Many rows of a moderate value: the batch is over the limit.
    f.big(&c, 3000).await;
    let e = c
        .simple_query("SELECT repeat('x', 1000000) FROM big")
        .await
        .unwrap_err();
    assert_eq!(code(&e), "54000", "{e:?}");

    // HTTP: the same error, 400.
    let (status, v) = post(
        &f.url("/query/service"),
        serde_json::json!({"statement": "SELECT repeat('x', 2000000000) AS s"}),
    )
    .await;
    assert_eq!(status, 400, "{v}");
    assert_eq!(v["errors"][0]["code"], "54000");

    // Nothing of the size of those values was ever held (generous bound).
    let grown_mib = status_kib("VmRSS:").saturating_sub(rss_before) / 1024;
    assert!(grown_mib < 300, "RSS grew by {grown_mib} MiB");
    let r = c.query_one("SELECT count(*) FROM big", &[]).await.unwrap();
    assert_eq!(r.get::<_, i64>(0), 3000);
    f.server.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn statement_timeout_stops_the_work() {
    let _serial = SERIAL.lock().await;
    let f = Fixture::start(|_| {}).await;
    let c = f.pg().await;
    f.big(&c, 3000).await;

    // SHOW / SET / RESET, as in PostgreSQL.
    let show = |rows: Vec<tokio_postgres::SimpleQueryMessage>| -> String {
        rows.into_iter()
            .find_map(|m| match m {
                tokio_postgres::SimpleQueryMessage::Row(r) => r.get(0).map(str::to_owned),
                _ => None,
            })
            .unwrap_or_default()
    };
    assert_eq!(
        show(c.simple_query("SHOW statement_timeout").await.unwrap()),
        "30s"
    );
    c.batch_execute("SET statement_timeout = 5000")
        .await
        .unwrap();
    assert_eq!(
        show(c.simple_query("SHOW statement_timeout").await.unwrap()),
        "5s"
    );
    // Above the server's --timeout, the server's applies.
    c.batch_execute("SET statement_timeout = '1h'")
        .await
        .unwrap();
    assert_eq!(
        show(c.simple_query("SHOW statement_timeout").await.unwrap()),
        "30s"
    );
    c.batch_execute("RESET statement_timeout").await.unwrap();
    assert_eq!(
        show(c.simple_query("SHOW statement_timeout").await.unwrap()),
        "30s"
    );
    let e = c
        .batch_execute("SET statement_timeout = 'soon'")
        .await
        .unwrap_err();
    assert!(message(&e).contains("statement_timeout"), "{e:?}");

    // 2.7e10 rows of cross join under 300 ms: cancelled at the limit.
    c.batch_execute("SET statement_timeout = '300ms'")
        .await
        .unwrap();
    let cpu_before = cpu_seconds();
    let e = c.simple_query(CROSS3).await.unwrap_err();
    assert_eq!(e.code(), Some(&SqlState::QUERY_CANCELED), "{e:?}");
    assert!(message(&e).contains("statement timeout"), "{e:?}");
    // Prepared too.
    let e = c.query(CROSS3, &[]).await.unwrap_err();
    assert_eq!(code(&e), "57014", "{e:?}");

    // The work stopped: over the next second this process used far less
    // than the cross join's two cores (it would use both, all the time).
    tokio::time::sleep(Duration::from_millis(300)).await;
    let t0 = cpu_seconds();
    tokio::time::sleep(Duration::from_secs(1)).await;
    let used = cpu_seconds() - t0;
    assert!(
        used < 0.6,
        "{used} CPU seconds used after the statements stopped"
    );
    assert!(cpu_seconds() - cpu_before < 30.0);

    // The session goes on, and the execution slots are free.
    c.batch_execute("RESET statement_timeout").await.unwrap();
    let r = c.query_one("SELECT count(*) FROM big", &[]).await.unwrap();
    assert_eq!(r.get::<_, i64>(0), 3000);
    let h: Value = http_client::client()
        .get(f.url("/health"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(h["running"], 0, "{h}");

    // Inside a transaction block, a cancelled statement fails the block.
    c.batch_execute("BEGIN").await.unwrap();
    c.batch_execute("SET statement_timeout = '200ms'")
        .await
        .unwrap();
    let e = c.simple_query(CROSS3).await.unwrap_err();
    assert_eq!(code(&e), "57014", "{e:?}");
    let e = c.simple_query("SELECT 1").await.unwrap_err();
    assert_eq!(code(&e), "25P02", "{e:?}");
    c.batch_execute("ROLLBACK").await.unwrap();

    // HTTP: a request's own timeout.
    let (status, v) = post(
        &f.url("/query/service"),
        serde_json::json!({"statement": CROSS3, "timeout": "300ms"}),
    )
    .await;
    assert_eq!(status, 504, "{v}");
    assert_eq!(v["errors"][0]["code"], "57014");
    assert!(
        v["errors"][0]["msg"].as_str().unwrap().contains("300ms"),
        "{v}"
    );
    let (status, v) = post(
        &f.url("/query/service"),
        serde_json::json!({"statement": "SELECT 1 AS one", "timeout": "later"}),
    )
    .await;
    assert_eq!(status, 400, "{v}");
    f.server.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn cancel_request_stops_the_statement() {
    let _serial = SERIAL.lock().await;
    // One connection allowed: the cancel request comes on a second one,
    // over the cap, and is served all the same.
    let f = Fixture::start(|c| c.max_connections = 1).await;
    let c = f.pg().await;
    f.big(&c, 3000).await;
    let token = c.cancel_token();
    let running = tokio::spawn(async move {
        let r = c.simple_query(CROSS3).await;
        (c, r)
    });
    // Send cancel requests until the statement ends (a request that comes
    // before it started cancels nothing, as in PostgreSQL).
    let (c, r) = loop {
        tokio::time::sleep(Duration::from_millis(200)).await;
        if running.is_finished() {
            break running.await.unwrap();
        }
        token.cancel_query(NoTls).await.unwrap();
    };
    let e = r.unwrap_err();
    assert_eq!(e.code(), Some(&SqlState::QUERY_CANCELED), "{e:?}");
    assert_eq!(message(&e), "canceling statement due to user request");
    let r = c.query_one("SELECT count(*) FROM big", &[]).await.unwrap();
    assert_eq!(r.get::<_, i64>(0), 3000);
    // A cancel with a wrong key does nothing (and does not break anything).
    drop(token);
    f.server.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn connections_are_capped() {
    let _serial = SERIAL.lock().await;
    let f = Fixture::start(|c| c.max_connections = 2).await;
    let a = f.pg().await;
    let b = f.pg().await;
    let e = tokio_postgres::connect(&f.conninfo(), NoTls)
        .await
        .err()
        .unwrap();
    assert_eq!(e.code(), Some(&SqlState::TOO_MANY_CONNECTIONS), "{e:?}");
    assert!(message(&e).contains("--max-connections"), "{e:?}");
    // The admitted ones work; closing one makes room.
    a.simple_query("SELECT 1").await.unwrap();
    drop(a);
    let mut third = None;
    for _ in 0..100 {
        if let Ok((c, conn)) = tokio_postgres::connect(&f.conninfo(), NoTls).await {
            tokio::spawn(conn);
            third = Some(c);
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let third = third.expect("a connection once one closed");
    third.simple_query("SELECT 1").await.unwrap();
    b.simple_query("SELECT 1").await.unwrap();

    // HTTP: two connections held open, a third gets 503 / 53300.
    let addr = f.server.http_addr().unwrap();
    let _h1 = tokio::net::TcpStream::connect(addr).await.unwrap();
    let _h2 = tokio::net::TcpStream::connect(addr).await.unwrap();
    let mut saw_503 = false;
    for _ in 0..50 {
        let r = http_client::client()
            .post(f.url("/query/service"))
            .body("SELECT 1")
            .send()
            .await;
        if let Ok(r) = r
            && r.status().as_u16() == 503
        {
            let v: Value = r.json().await.unwrap();
            assert_eq!(v["errors"][0]["code"], "53300", "{v}");
            saw_503 = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(saw_503);
    f.server.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn idle_sessions_are_closed() {
    let _serial = SERIAL.lock().await;
    let f = Fixture::start(|c| {
        c.idle_timeout = Duration::from_millis(300);
        c.idle_in_transaction_timeout = Duration::from_millis(300);
    })
    .await;
    // Idle outside a block: FATAL 57P05.
    let (c, ended) = f.pg_watched().await;
    c.simple_query("SELECT 1").await.unwrap();
    let r = tokio::time::timeout(Duration::from_secs(30), ended)
        .await
        .expect("the idle session was closed")
        .unwrap();
    let e = r.unwrap_err();
    assert_eq!(e.code(), Some(&SqlState::IDLE_SESSION_TIMEOUT), "{e:?}");
    assert!(c.simple_query("SELECT 1").await.is_err());

    // Idle inside a block: FATAL 25P03, and the block rolled back.
    let (c, ended) = f.pg_watched().await;
    c.batch_execute("CREATE TABLE t (id BIGINT PRIMARY KEY)")
        .await
        .unwrap();
    c.batch_execute("BEGIN; INSERT INTO t VALUES (1)")
        .await
        .unwrap();
    let r = tokio::time::timeout(Duration::from_secs(30), ended)
        .await
        .expect("the idle block was closed")
        .unwrap();
    let e = r.unwrap_err();
    assert_eq!(
        e.code(),
        Some(&SqlState::IDLE_IN_TRANSACTION_SESSION_TIMEOUT),
        "{e:?}"
    );
    let c = f.pg().await;
    let r = c.query_one("SELECT count(*) FROM t", &[]).await.unwrap();
    assert_eq!(r.get::<_, i64>(0), 0);
    f.server.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn memory_and_result_limits() {
    let _serial = SERIAL.lock().await;
    let f = Fixture::start(|c| {
        c.max_query_memory = 8 << 20;
        c.max_server_memory = 64 << 20;
        c.max_result_rows = 2000;
        c.max_result_bytes = 1 << 20;
    })
    .await;
    let c = f.pg().await;
    f.big(&c, 3000).await;

    // An aggregate that cannot spill: a clear error naming the flag.
    let e = c
        .simple_query("SELECT string_agg(repeat('x', 100), ',') FROM big a, big b")
        .await
        .unwrap_err();
    assert_eq!(e.code(), Some(&SqlState::OUT_OF_MEMORY), "{e:?}");
    let m = message(&e);
    assert!(
        m.contains("--max-query-memory") && m.contains("8 MiB"),
        "{m}"
    );
    // A sort over the limit spills to disk and finishes.
    let r = c
        .query_one(
            "SELECT count(*) FROM (SELECT a.id * 10000 + b.id AS k FROM big a, (SELECT id FROM big LIMIT 200) b ORDER BY k DESC) s",
            &[],
        )
        .await
        .unwrap();
    assert_eq!(r.get::<_, i64>(0), 600_000);
    // The statements gave their memory back.
    let h: Value = http_client::client()
        .get(f.url("/health"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(h["memory"], 0, "{h}");

    // Results: rows, then bytes.
    let e = c.simple_query("SELECT id FROM big").await.unwrap_err();
    assert_eq!(e.code(), Some(&SqlState::PROGRAM_LIMIT_EXCEEDED), "{e:?}");
    assert!(message(&e).contains("--max-result-rows"), "{e:?}");
    let e = c
        .query("SELECT repeat('x', 1000) FROM big LIMIT 1500", &[])
        .await
        .unwrap_err();
    assert_eq!(code(&e), "54000", "{e:?}");
    assert!(message(&e).contains("--max-result-bytes"), "{e:?}");
    let (status, v) = post(
        &f.url("/query/service"),
        serde_json::json!({"statement": "SELECT repeat('x', 1000) AS s FROM big LIMIT 1500"}),
    )
    .await;
    assert_eq!(status, 400, "{v}");
    assert_eq!(v["errors"][0]["code"], "54000");
    let r = c.query("SELECT id FROM big LIMIT 10", &[]).await.unwrap();
    assert_eq!(r.len(), 10);

    // Settings that would lift the limits for everyone are refused.
    let e = c
        .batch_execute("SET datafusion.runtime.memory_limit = '100G'")
        .await
        .unwrap_err();
    assert_eq!(code(&e), "42501", "{e:?}");
    let (status, v) = post(
        &f.url("/query/service"),
        serde_json::json!({"statement": "SET datafusion.runtime.temp_directory = '/'"}),
    )
    .await;
    assert_eq!(status, 403, "{v}");
    f.server.shutdown().await.unwrap();
}

/// A big result through the extended protocol is streamed, not collected:
/// `pgwire`'s default Execute held every row of a portal, encoded, before
/// it sent the first (about 115 MiB for these 10^6 rows of two `bigint`s).
/// And a portal read `max_rows` at a time suspends and resumes with every
/// row once.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn extended_protocol_results_are_streamed() {
    use futures::StreamExt;
    let _serial = SERIAL.lock().await;
    let f = Fixture::start(|_| {}).await;
    let c = f.pg().await;
    f.big(&c, 10_000).await;
    let sql = "SELECT a.id, b.id FROM big a, (SELECT id FROM big LIMIT 100) b LIMIT 1000000";

    let before = status_kib("VmRSS:");
    let rows = c.query_raw(sql, std::iter::empty::<i64>()).await.unwrap();
    let mut rows = std::pin::pin!(rows);
    let first = rows.next().await.unwrap().unwrap();
    let grown_mib = status_kib("VmRSS:").saturating_sub(before) / 1024;
    assert!(
        grown_mib < 48,
        "the first row came with {grown_mib} MiB more resident: the result was collected"
    );
    let mut n = 1u64;
    let mut sum: i64 = first.get::<_, i64>(0);
    while let Some(r) = rows.next().await {
        sum += r.unwrap().get::<_, i64>(0);
        n += 1;
    }
    assert_eq!(n, 1_000_000);
    assert_eq!(sum, 100 * (0..10_000i64).sum::<i64>());

    // A portal read 300 rows at a time.
    let mut c = f.pg().await;
    let t = c.transaction().await.unwrap();
    let stmt = t.prepare("SELECT id FROM big WHERE id < $1").await.unwrap();
    let portal = t.bind(&stmt, &[&1_000_000i64]).await.unwrap();
    let mut seen = Vec::new();
    let mut fetches = 0;
    loop {
        let chunk = t.query_portal(&portal, 300).await.unwrap();
        fetches += 1;
        assert!(chunk.len() <= 300);
        if chunk.is_empty() {
            break;
        }
        seen.extend(chunk.iter().map(|r| r.get::<_, i64>(0)));
    }
    seen.sort_unstable();
    assert_eq!(seen, (0..10_000i64).collect::<Vec<_>>());
    // 33 full fetches, one of 100 that completes the portal, and an
    // empty one.
    assert_eq!(fetches, 35);
    t.commit().await.unwrap();
    f.server.shutdown().await.unwrap();
}
