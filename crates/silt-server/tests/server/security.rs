//! Authentication, TLS, privileges and server files through real clients:
//! tokio-postgres (SCRAM-SHA-256, TLS through rustls) and reqwest (HTTPS,
//! Basic and bearer tokens), against a server started here with a
//! certificate the test makes (rcgen).

use std::sync::Arc;
use std::time::Duration;

use pgwire::tokio::tokio_rustls::rustls;
use serde_json::Value;
use silt::{Database, DbOptions, Privileges, Role};
use silt_server::tls::TlsFiles;
use silt_server::{Server, ServerConfig, ServerError};
use silt_sql::scram::Verifier;
use tokio_postgres::NoTls;
use tokio_postgres::error::SqlState;

use crate::{http_client, pgtls};

/// A CA-signed server certificate for `localhost` and 127.0.0.1.
struct Certs {
    ca_pem: String,
    cert_pem: String,
    key_pem: String,
}

fn make_certs() -> Certs {
    use rcgen::{BasicConstraints, CertificateParams, IsCa, KeyPair};
    let ca_key = KeyPair::generate().unwrap();
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "silt test CA");
    let ca = ca_params.self_signed(&ca_key).unwrap();
    let key = KeyPair::generate().unwrap();
    let params =
        CertificateParams::new(vec!["localhost".to_owned(), "127.0.0.1".to_owned()]).unwrap();
    let issuer = rcgen::Issuer::from_params(&ca_params, &ca_key);
    let cert = params.signed_by(&key, &issuer).unwrap();
    Certs {
        ca_pem: ca.pem(),
        cert_pem: cert.pem(),
        key_pem: key.serialize_pem(),
    }
}

fn role(name: &str, password: &str, admin: bool, grants: &[(&str, Privileges)]) -> Role {
    Role {
        name: name.to_owned(),
        login: true,
        admin,
        verifier: Some(Verifier::new(password).unwrap().to_string()),
        grants: grants.iter().map(|(t, p)| ((*t).to_owned(), *p)).collect(),
    }
}

const READ: Privileges = Privileges {
    read: true,
    write: false,
    ddl: false,
};

struct Fixture {
    dir: tempfile::TempDir,
    certs: Certs,
    server: Server,
}

impl Fixture {
    /// A database with table `t` (two rows), an admin `boss`, a reader
    /// `ann` (read on `t`) and `bob` (no privileges); TLS on.
    async fn start(edit: impl FnOnce(&mut ServerConfig, &std::path::Path)) -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let certs = make_certs();
        let dbdir = dir.path().join("db");
        {
            let db = Database::open(&dbdir, DbOptions::default()).unwrap();
            let sql = silt_sql::SqlEngine::new(Arc::new(db)).unwrap();
            sql.execute(
                "CREATE TABLE t (id BIGINT PRIMARY KEY, name VARCHAR);
                 CREATE INDEX t_name ON t USING btree (name);
                 INSERT INTO t VALUES (1, 'a'), (2, 'b')",
            )
            .await
            .unwrap();
            let db = sql.database();
            db.create_role(role("boss", "boss-pw", true, &[])).unwrap();
            db.create_role(role("ann", "ann-pw", false, &[("t", READ)]))
                .unwrap();
            db.create_role(role("bob", "bob-pw", false, &[])).unwrap();
            db.close().unwrap();
        }
        std::fs::write(dir.path().join("cert.pem"), &certs.cert_pem).unwrap();
        std::fs::write(dir.path().join("key.pem"), &certs.key_pem).unwrap();
        let mut cfg = ServerConfig {
            pg_addr: Some("127.0.0.1:0".parse().unwrap()),
            http_addr: Some("127.0.0.1:0".parse().unwrap()),
            tls: Some(TlsFiles {
                cert: dir.path().join("cert.pem"),
                key: dir.path().join("key.pem"),
            }),
            ..ServerConfig::default()
        };
        edit(&mut cfg, dir.path());
        let db = Arc::new(Database::open(&dbdir, DbOptions::default()).unwrap());
        let server = Server::start(db, cfg).await.unwrap();
        Fixture { dir, certs, server }
    }

    fn pg_conf(&self, user: &str, password: &str) -> tokio_postgres::Config {
        let addr = self.server.pg_addr().unwrap();
        let mut c = tokio_postgres::Config::new();
        c.host("localhost")
            .port(addr.port())
            .user(user)
            .password(password)
            .dbname("silt");
        c
    }

    /// Connect over TLS (verifying the certificate), or fail.
    async fn try_pg(
        &self,
        user: &str,
        password: &str,
    ) -> Result<tokio_postgres::Client, tokio_postgres::Error> {
        let tls = pgtls::MakeRustls::new(&self.certs.ca_pem);
        let (client, conn) = self.pg_conf(user, password).connect(tls).await?;
        tokio::spawn(async move {
            let _ = conn.await;
        });
        Ok(client)
    }

    async fn pg(&self, user: &str, password: &str) -> tokio_postgres::Client {
        self.try_pg(user, password).await.unwrap()
    }

    fn https(&self) -> reqwest::Client {
        let mut roots = rustls::RootCertStore::empty();
        for c in rustls::pki_types::CertificateDer::pem_slice_iter(self.certs.ca_pem.as_bytes()) {
            roots.add(c.unwrap()).unwrap();
        }
        let cfg = rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
        http_client::install_ring();
        reqwest::Client::builder()
            .tls_backend_preconfigured(cfg)
            .build()
            .unwrap()
    }

    fn url(&self, path: &str) -> String {
        let a = self.server.http_addr().unwrap();
        format!("https://localhost:{}{path}", a.port())
    }
}

use rustls::pki_types::pem::PemObject;

/// A plain connection that must fail.
async fn connect_err(conn: &str) -> tokio_postgres::Error {
    match tokio_postgres::connect(conn, NoTls).await {
        Err(e) => e,
        Ok(_) => panic!("`{conn}` connected"),
    }
}

/// The server's message (tokio-postgres's Display says only "db error").
fn msg(e: &tokio_postgres::Error) -> String {
    e.as_db_error()
        .map_or_else(|| e.to_string(), |d| d.message().to_owned())
}

fn state(e: &tokio_postgres::Error) -> SqlState {
    e.code()
        .cloned()
        .unwrap_or_else(|| panic!("no SQLSTATE in {e}"))
}

async fn names(c: &tokio_postgres::Client) -> Vec<String> {
    c.query("SELECT name FROM t ORDER BY id", &[])
        .await
        .unwrap()
        .iter()
        .map(|r| r.get::<_, String>(0))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn scram_logins_and_tls() {
    let f = Fixture::start(|_, _| {}).await;
    // The right password, over verified TLS.
    let boss = f.pg("boss", "boss-pw").await;
    assert_eq!(names(&boss).await, ["a", "b"]);
    // A wrong password and an unknown user get the same answer.
    let e = f.try_pg("ann", "nope").await.unwrap_err();
    assert_eq!(state(&e), SqlState::INVALID_PASSWORD, "{e}");
    let e2 = f.try_pg("nobody", "nope").await.unwrap_err();
    assert_eq!(state(&e2), SqlState::INVALID_PASSWORD, "{e2}");
    assert!(
        msg(&e).contains("password authentication failed"),
        "{}",
        msg(&e)
    );
    // Plain TCP works too unless TLS is required.
    let addr = f.server.pg_addr().unwrap();
    let (plain, conn) = tokio_postgres::connect(
        &format!(
            "host=127.0.0.1 port={} user=ann password=ann-pw",
            addr.port()
        ),
        NoTls,
    )
    .await
    .unwrap();
    tokio::spawn(conn);
    assert_eq!(names(&plain).await, ["a", "b"]);
    f.server.shutdown().await.unwrap();

    let f = Fixture::start(|c, _| c.tls_required = true).await;
    let addr = f.server.pg_addr().unwrap();
    let e = connect_err(&format!(
        "host=127.0.0.1 port={} user=ann password=ann-pw",
        addr.port()
    ))
    .await;
    assert_eq!(
        state(&e),
        SqlState::INVALID_AUTHORIZATION_SPECIFICATION,
        "{e}"
    );
    assert!(msg(&e).contains("sslmode=require"), "{e}");
    let ann = f.pg("ann", "ann-pw").await;
    assert_eq!(names(&ann).await, ["a", "b"]);
    // A client that does not trust the server's CA refuses it.
    let wrong_ca = make_certs();
    let tls = pgtls::MakeRustls::new(&wrong_ca.ca_pem);
    assert!(f.pg_conf("ann", "ann-pw").connect(tls).await.is_err());
    f.server.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn failed_logins_are_throttled() {
    let f = Fixture::start(|_, _| {}).await;
    for _ in 0..5 {
        let e = f.try_pg("ann", "wrong").await.unwrap_err();
        assert_eq!(state(&e), SqlState::INVALID_PASSWORD, "{e}");
    }
    // Now even the right password is refused for a while, on both doors.
    let e = f.try_pg("ann", "ann-pw").await.unwrap_err();
    assert!(msg(&e).contains("too many failed logins"), "{e}");
    let r = f
        .https()
        .post(f.url("/query/service"))
        .basic_auth("ann", Some("ann-pw"))
        .body("SELECT 1")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 429);
    assert!(r.headers().get("retry-after").is_some());
    f.server.shutdown().await.unwrap();
}

/// Every statement form a read-only role might try: each is refused with
/// 42501 (or, for files, also 42501), and nothing changes.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn read_only_role_changes_nothing() {
    let f = Fixture::start(|_, _| {}).await;
    let ann = f.pg("ann", "ann-pw").await;
    let boss = f.pg("boss", "boss-pw").await;
    let before_roles = f.server.database().roles();
    let writes = [
        "INSERT INTO t VALUES (3, 'c')",
        "UPSERT INTO t VALUES (1, 'z')",
        "INSERT INTO t VALUES (1, 'z') ON CONFLICT (id) DO UPDATE SET name = 'z'",
        "INSERT INTO t VALUES (1, 'z') ON CONFLICT DO NOTHING",
        "INSERT INTO t SELECT id + 10, name FROM t",
        "UPDATE t SET name = 'z'",
        "UPDATE t SET name = 'z' WHERE id = (SELECT max(id) FROM t)",
        "DELETE FROM t",
        "DELETE FROM t WHERE id IN (SELECT id FROM t)",
        "EXPLAIN ANALYZE DELETE FROM t",
        "EXPLAIN DELETE FROM t",
        "CREATE TABLE u (id BIGINT PRIMARY KEY)",
        "CREATE TABLE u AS SELECT * FROM t",
        "CREATE INDEX t_id2 ON t USING btree (name)",
        "DROP INDEX t_name",
        "DROP TABLE t",
        "COMPACT t",
        "CREATE VIEW v AS SELECT * FROM t",
        "CREATE EXTERNAL TABLE x STORED AS CSV LOCATION '/etc/passwd'",
        "COPY t TO '/tmp/silt-security-test-out.csv'",
        "COPY t FROM STDIN",
        "COPY t (id) FROM STDIN (FORMAT csv)",
        "CREATE ROLE eve LOGIN PASSWORD 'x'",
        "CREATE USER eve PASSWORD 'x'",
        "ALTER ROLE ann SUPERUSER",
        "ALTER USER bob PASSWORD 'x'",
        "DROP ROLE bob",
        "GRANT ALL ON t TO ann",
        "GRANT ALL ON ALL TABLES IN SCHEMA public TO bob",
        "REVOKE SELECT ON t FROM ann",
    ];
    for sql in writes {
        let e = ann
            .batch_execute(sql)
            .await
            .expect_err(&format!("`{sql}` should be refused"));
        assert_eq!(state(&e), SqlState::INSUFFICIENT_PRIVILEGE, "{sql}: {e}");
    }
    // The extended protocol (prepared, with parameters) and blocks too.
    let e = ann
        .execute("INSERT INTO t VALUES ($1, $2)", &[&5i64, &"e"])
        .await
        .unwrap_err();
    assert_eq!(state(&e), SqlState::INSUFFICIENT_PRIVILEGE, "{e}");
    let e = ann
        .batch_execute("BEGIN; DELETE FROM t; COMMIT")
        .await
        .unwrap_err();
    assert_eq!(state(&e), SqlState::INSUFFICIENT_PRIVILEGE, "{e}");
    ann.batch_execute("ROLLBACK").await.unwrap();
    // Reading is fine, and so are the catalog views.
    assert_eq!(names(&ann).await, ["a", "b"]);
    ann.query("SELECT table_name FROM information_schema.tables", &[])
        .await
        .unwrap();
    // bob may not even read.
    let bob = f.pg("bob", "bob-pw").await;
    for sql in [
        "SELECT * FROM t",
        "SELECT count(*) FROM (SELECT * FROM t) s",
        "WITH x AS (SELECT * FROM t) SELECT * FROM x",
        "SELECT 1 WHERE EXISTS (SELECT 1 FROM t)",
        "EXPLAIN SELECT * FROM t",
    ] {
        let e = bob.query(sql, &[]).await.unwrap_err();
        assert_eq!(state(&e), SqlState::INSUFFICIENT_PRIVILEGE, "{sql}: {e}");
        assert!(msg(&e).contains("GRANT"), "{e}");
    }
    for sql in ["COPY t TO STDOUT", "COPY (SELECT name FROM t) TO STDOUT"] {
        let e = bob.batch_execute(sql).await.unwrap_err();
        assert_eq!(state(&e), SqlState::INSUFFICIENT_PRIVILEGE, "{sql}: {e}");
    }
    // Like PostgreSQL's, the catalog names tables to every role (psql's
    // \dt, drivers' lookups), qualified or not.
    let listed = bob
        .query(
            "SELECT c.relname FROM pg_catalog.pg_class c JOIN pg_namespace n \
             ON n.oid = c.relnamespace WHERE n.nspname = 'public' AND c.relkind = 'r'",
            &[],
        )
        .await
        .unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].get::<_, &str>(0), "t");
    // Nothing changed: rows, tables, indexes, roles.
    assert_eq!(names(&boss).await, ["a", "b"]);
    let db = f.server.database();
    assert_eq!(db.dataset_names(), ["t"]);
    assert_eq!(db.dataset("t").unwrap().index_defs().len(), 1);
    assert_eq!(db.roles(), before_roles);
    assert!(!std::path::Path::new("/tmp/silt-security-test-out.csv").exists());
    f.server.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn grants_apply_to_open_sessions() {
    let f = Fixture::start(|_, _| {}).await;
    let boss = f.pg("boss", "boss-pw").await;
    let bob = f.pg("bob", "bob-pw").await;
    let e = bob
        .batch_execute("INSERT INTO t VALUES (3, 'c')")
        .await
        .unwrap_err();
    assert_eq!(state(&e), SqlState::INSUFFICIENT_PRIVILEGE);
    // Partial write grants are refused with a clear message.
    let e = boss
        .batch_execute("GRANT INSERT ON t TO bob")
        .await
        .unwrap_err();
    assert_eq!(state(&e), SqlState::FEATURE_NOT_SUPPORTED, "{e}");
    boss.batch_execute("GRANT SELECT, INSERT, UPDATE, DELETE ON t TO bob")
        .await
        .unwrap();
    bob.batch_execute("INSERT INTO t VALUES (3, 'c')")
        .await
        .unwrap();
    assert_eq!(names(&bob).await, ["a", "b", "c"]);
    boss.batch_execute("REVOKE DELETE ON t FROM bob")
        .await
        .unwrap();
    let e = bob
        .batch_execute("DELETE FROM t WHERE id = 3")
        .await
        .unwrap_err();
    assert_eq!(state(&e), SqlState::INSUFFICIENT_PRIVILEGE);
    // A role that may create tables owns what it creates.
    boss.batch_execute("GRANT CREATE ON SCHEMA public TO bob")
        .await
        .unwrap();
    bob.batch_execute(
        "CREATE TABLE mine (id BIGINT PRIMARY KEY); INSERT INTO mine VALUES (1); DROP TABLE mine",
    )
    .await
    .unwrap();
    // Roles by SQL: a new user logs in; a dropped one's session stops.
    boss.batch_execute("CREATE USER eve PASSWORD 'eve-pw'; GRANT SELECT ON t TO eve")
        .await
        .unwrap();
    let eve = f.pg("eve", "eve-pw").await;
    assert_eq!(names(&eve).await.len(), 3);
    boss.batch_execute("ALTER ROLE eve PASSWORD 'new-pw'")
        .await
        .unwrap();
    assert!(f.try_pg("eve", "eve-pw").await.is_err());
    f.pg("eve", "new-pw").await;
    boss.batch_execute("DROP ROLE eve").await.unwrap();
    let e = eve.query("SELECT 1", &[]).await.unwrap_err();
    assert_eq!(
        state(&e),
        SqlState::INVALID_AUTHORIZATION_SPECIFICATION,
        "{e}"
    );
    // The last admin cannot be removed or demoted, nor drop itself.
    for sql in ["DROP ROLE boss", "ALTER ROLE boss NOSUPERUSER"] {
        let e = boss.batch_execute(sql).await.unwrap_err();
        assert!(msg(&e).contains("admin"), "{sql}: {e}");
    }
    let e = boss
        .batch_execute("GRANT SELECT ON nosuch TO bob")
        .await
        .unwrap_err();
    assert_eq!(state(&e), SqlState::UNDEFINED_TABLE, "{e}");
    let e = boss
        .batch_execute("GRANT SELECT ON t TO nosuch")
        .await
        .unwrap_err();
    assert_eq!(state(&e), SqlState::UNDEFINED_OBJECT, "{e}");
    let roles = f.server.database().roles();
    assert_eq!(
        roles.iter().map(|r| r.name.as_str()).collect::<Vec<_>>(),
        ["ann", "bob", "boss"]
    );
    f.server.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn server_files() {
    // Off by default, even for an admin.
    let f = Fixture::start(|_, _| {}).await;
    let boss = f.pg("boss", "boss-pw").await;
    let e = boss
        .batch_execute("CREATE EXTERNAL TABLE x STORED AS CSV LOCATION '/etc/passwd'")
        .await
        .unwrap_err();
    assert_eq!(state(&e), SqlState::INSUFFICIENT_PRIVILEGE, "{e}");
    assert!(msg(&e).contains("--server-files"), "{e}");
    f.server.shutdown().await.unwrap();

    // Within a directory, for admins.
    let f = Fixture::start(|c, dir| {
        let files = dir.join("files");
        std::fs::create_dir(&files).unwrap();
        std::fs::write(files.join("in.csv"), "a,b\n1,2\n").unwrap();
        c.server_files = Some(files);
    })
    .await;
    let files = f.dir.path().join("files");
    let boss = f.pg("boss", "boss-pw").await;
    boss.batch_execute(&format!(
        "CREATE EXTERNAL TABLE x STORED AS CSV LOCATION '{}' OPTIONS ('format.has_header' 'true')",
        files.join("in.csv").display()
    ))
    .await
    .unwrap();
    let n: i64 = boss
        .query_one("SELECT count(*) FROM x", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(n, 1);
    for loc in [
        "/etc/passwd".to_owned(),
        format!("{}/../../etc/passwd", files.display()),
        "s3://bucket/x.csv".to_owned(),
    ] {
        let e = boss
            .batch_execute(&format!(
                "CREATE EXTERNAL TABLE y STORED AS CSV LOCATION '{loc}'"
            ))
            .await
            .unwrap_err();
        assert_eq!(state(&e), SqlState::INSUFFICIENT_PRIVILEGE, "{loc}: {e}");
    }
    // COPY FROM a file below the directory: a statement with a row count.
    boss.batch_execute("CREATE TABLE cp (a BIGINT PRIMARY KEY, b BIGINT)")
        .await
        .unwrap();
    let n = boss
        .execute(
            &format!(
                "COPY cp FROM '{}' (FORMAT csv, HEADER true)",
                files.join("in.csv").display()
            ),
            &[],
        )
        .await
        .unwrap();
    assert_eq!(n, 1);
    let e = boss
        .batch_execute("COPY cp FROM '/etc/passwd'")
        .await
        .unwrap_err();
    assert_eq!(state(&e), SqlState::INSUFFICIENT_PRIVILEGE, "{e}");
    let ann = f.pg("ann", "ann-pw").await;
    let e = ann
        .batch_execute(&format!("COPY t TO '{}'", files.join("out.csv").display()))
        .await
        .unwrap_err();
    assert_eq!(state(&e), SqlState::INSUFFICIENT_PRIVILEGE, "{e}");
    let e = ann
        .batch_execute(&format!(
            "COPY cp FROM '{}' (FORMAT csv, HEADER true)",
            files.join("in.csv").display()
        ))
        .await
        .unwrap_err();
    assert_eq!(state(&e), SqlState::INSUFFICIENT_PRIVILEGE, "{e}");
    f.server.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn https_basic_and_tokens() {
    let f = Fixture::start(|_, _| {}).await;
    let http = f.https();
    let q = |req: reqwest::RequestBuilder, sql: &str| req.body(sql.to_owned()).send();
    // No credentials: 401 with a challenge. /health stays open.
    let r = q(http.post(f.url("/query/service")), "SELECT 1")
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
    assert!(r.headers().get("www-authenticate").is_some());
    assert_eq!(
        http.get(f.url("/health")).send().await.unwrap().status(),
        200
    );
    assert_eq!(
        http.get(f.url("/stats")).send().await.unwrap().status(),
        401
    );
    // Basic.
    let r = q(
        http.post(f.url("/query/service"))
            .basic_auth("ann", Some("ann-pw")),
        "SELECT name FROM t ORDER BY id",
    )
    .await
    .unwrap();
    assert_eq!(r.status(), 200);
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["results"][1]["name"], "b");
    let r = q(
        http.post(f.url("/query/service"))
            .basic_auth("ann", Some("bad")),
        "SELECT 1",
    )
    .await
    .unwrap();
    assert_eq!(r.status(), 401);
    // A missing privilege: 403, 42501, nothing written.
    let r = q(
        http.post(f.url("/query/service"))
            .basic_auth("ann", Some("ann-pw")),
        "INSERT INTO t VALUES (9, 'x')",
    )
    .await
    .unwrap();
    assert_eq!(r.status(), 403);
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["errors"][0]["code"], "42501");
    // Tokens: issue, use, revoke.
    let r = http
        .post(f.url("/auth/token"))
        .basic_auth("ann", Some("ann-pw"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let v: Value = r.json().await.unwrap();
    let token = v["token"].as_str().unwrap().to_owned();
    assert_eq!(v["user"], "ann");
    let r = q(
        http.post(f.url("/query/service")).bearer_auth(&token),
        "SELECT count(*) AS n FROM t",
    )
    .await
    .unwrap();
    assert_eq!(r.status(), 200);
    // A token cannot mint tokens.
    let r = http
        .post(f.url("/auth/token"))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
    let r = http
        .delete(f.url("/auth/token"))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 204);
    let r = q(
        http.post(f.url("/query/service")).bearer_auth(&token),
        "SELECT 1",
    )
    .await
    .unwrap();
    assert_eq!(r.status(), 401);
    // An expired token.
    let v: Value = http
        .post(f.url("/auth/token?ttl=1"))
        .basic_auth("ann", Some("ann-pw"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let short = v["token"].as_str().unwrap().to_owned();
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let r = q(
        http.post(f.url("/query/service")).bearer_auth(&short),
        "SELECT 1",
    )
    .await
    .unwrap();
    assert_eq!(r.status(), 401);
    let v: Value = r.json().await.unwrap();
    assert!(
        v["errors"][0]["msg"].as_str().unwrap().contains("expired"),
        "{v}"
    );
    // A new password revokes the role's tokens.
    let v: Value = http
        .post(f.url("/auth/token"))
        .basic_auth("bob", Some("bob-pw"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let bobs = v["token"].as_str().unwrap().to_owned();
    let r = q(
        http.post(f.url("/query/service"))
            .basic_auth("boss", Some("boss-pw")),
        "ALTER ROLE bob PASSWORD 'other'",
    )
    .await
    .unwrap();
    assert_eq!(r.status(), 200);
    let r = q(
        http.post(f.url("/query/service")).bearer_auth(&bobs),
        "SELECT 1",
    )
    .await
    .unwrap();
    assert_eq!(r.status(), 401);
    let v: Value = r.json().await.unwrap();
    assert!(
        v["errors"][0]["msg"].as_str().unwrap().contains("revoked"),
        "{v}"
    );
    f.server.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn safe_defaults() {
    // No users: a non-loopback address is refused, naming what to do.
    let dir = tempfile::tempdir().unwrap();
    let db = Arc::new(Database::open(dir.path(), DbOptions::default()).unwrap());
    let cfg = ServerConfig {
        pg_addr: Some("0.0.0.0:0".parse().unwrap()),
        http_addr: None,
        ..ServerConfig::default()
    };
    match Server::start(db.clone(), cfg.clone()).await {
        Err(ServerError::Config(m)) => assert!(m.contains("user add"), "{m}"),
        Err(e) => panic!("unexpected error: {e}"),
        Ok(_) => panic!("a server without users bound a non-loopback address"),
    }
    // TLS required without a certificate.
    let e = Server::start(
        db.clone(),
        ServerConfig {
            pg_addr: Some("127.0.0.1:0".parse().unwrap()),
            http_addr: None,
            tls_required: true,
            ..ServerConfig::default()
        },
    )
    .await
    .err()
    .unwrap();
    assert!(e.to_string().contains("--tls-cert"), "{e}");
    // With an admin that can log in, it binds (and asks for passwords).
    db.create_role(role("root", "pw", true, &[])).unwrap();
    let server = Server::start(db, cfg).await.unwrap();
    let port = server.pg_addr().unwrap().port();
    let e = connect_err(&format!(
        "host=127.0.0.1 port={port} user=root password=wrong"
    ))
    .await;
    assert_eq!(state(&e), SqlState::INVALID_PASSWORD, "{e}");
    let (c, conn) = tokio_postgres::connect(
        &format!("host=127.0.0.1 port={port} user=root password=pw"),
        NoTls,
    )
    .await
    .unwrap();
    tokio::spawn(conn);
    c.query("SELECT 1", &[]).await.unwrap();
    server.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn first_user_created_by_sql_turns_login_on() {
    let dir = tempfile::tempdir().unwrap();
    let db = Arc::new(Database::open(dir.path(), DbOptions::default()).unwrap());
    let server = Server::start(
        db,
        ServerConfig {
            pg_addr: Some("127.0.0.1:0".parse().unwrap()),
            http_addr: Some("127.0.0.1:0".parse().unwrap()),
            ..ServerConfig::default()
        },
    )
    .await
    .unwrap();
    let port = server.pg_addr().unwrap().port();
    let http = format!("http://{}/query/service", server.http_addr().unwrap());
    // No users yet: anyone on loopback gets in, over both front ends.
    let (open, conn) =
        tokio_postgres::connect(&format!("host=127.0.0.1 port={port} user=x"), NoTls)
            .await
            .unwrap();
    tokio::spawn(conn);
    let r = http_client::client()
        .post(&http)
        .body("SELECT 1 AS one")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    open.batch_execute("CREATE USER root WITH SUPERUSER PASSWORD 'pw'")
        .await
        .unwrap();
    // The next connection must log in; the open session goes on.
    let e = connect_err(&format!("host=127.0.0.1 port={port} user=x password=nope")).await;
    assert_eq!(state(&e), SqlState::INVALID_PASSWORD, "{e}");
    let (c, conn) = tokio_postgres::connect(
        &format!("host=127.0.0.1 port={port} user=root password=pw"),
        NoTls,
    )
    .await
    .unwrap();
    tokio::spawn(conn);
    c.query("SELECT 1", &[]).await.unwrap();
    open.query("SELECT 1", &[]).await.unwrap();
    let r = http_client::client()
        .post(&http)
        .body("SELECT 1 AS one")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
    // Dropping every login role does not open the server again.
    c.batch_execute("ALTER ROLE root NOLOGIN").await.ok();
    let e = connect_err(&format!("host=127.0.0.1 port={port} user=x password=nope")).await;
    assert_eq!(state(&e), SqlState::INVALID_PASSWORD, "{e}");
    server.shutdown().await.unwrap();
}
