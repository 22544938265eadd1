//! `silt serve` on port 0 over a temporary database, set up by a script,
//! and tokio-postgres clients of it (user `test`, no TLS).

use std::sync::Arc;

use silt::{Database, DbOptions};
use silt_server::{Server, ServerConfig};
use silt_sql::SqlEngine;
use tokio_postgres::{Client, NoTls};

pub struct PgFixture {
    pub _dir: tempfile::TempDir,
    pub server: Server,
}

impl PgFixture {
    /// A server (with the HTTP front end too when `http`) after `setup`.
    pub async fn start(http: bool, setup: &str) -> PgFixture {
        let dir = tempfile::tempdir().unwrap();
        let db = Arc::new(Database::open(dir.path(), DbOptions::default()).unwrap());
        let engine = SqlEngine::new(db).unwrap();
        let cfg = ServerConfig {
            pg_addr: Some("127.0.0.1:0".parse().unwrap()),
            http_addr: http.then(|| "127.0.0.1:0".parse().unwrap()),
            ..ServerConfig::default()
        };
        let server = Server::start_with_engine(engine, cfg).await.unwrap();
        let f = PgFixture { _dir: dir, server };
        f.pg().await.batch_execute(setup).await.unwrap();
        f
    }

    pub async fn pg(&self) -> Client {
        connect(&self.server).await
    }
}

/// A client of `server`'s PostgreSQL front end.
pub async fn connect(server: &Server) -> Client {
    let addr = server.pg_addr().unwrap();
    let (client, conn) = tokio_postgres::connect(
        &format!(
            "host={} port={} user=test dbname=silt",
            addr.ip(),
            addr.port()
        ),
        NoTls,
    )
    .await
    .unwrap();
    tokio::spawn(async move {
        let _ = conn.await;
    });
    client
}

/// The rows of a simple-protocol query, as text.
pub async fn text_rows(c: &Client, sql: &str) -> Vec<Vec<Option<String>>> {
    let msgs = c
        .simple_query(sql)
        .await
        .unwrap_or_else(|e| panic!("{sql}\n-> {e:?}"));
    msgs.into_iter()
        .filter_map(|m| match m {
            tokio_postgres::SimpleQueryMessage::Row(r) => {
                Some((0..r.len()).map(|i| r.get(i).map(str::to_owned)).collect())
            }
            _ => None,
        })
        .collect()
}
