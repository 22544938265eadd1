//! PostgreSQL's catalog through `silt serve`, with tokio-postgres: every
//! catalog query psql 15 sends for its backslash commands (captured into
//! `fixtures/psql15_catalog.sql`) runs, and what they read describes the
//! database: tables, views, primary keys and Silt's indexes, column types;
//! the session functions clients call on connect; arrays on the wire.

use tokio_postgres::Client;

use crate::pg_fixture::{PgFixture, text_rows as rows};

const PSQL15: &str = include_str!("../fixtures/psql15_catalog.sql");
const PGJDBC: &str = include_str!("../fixtures/pgjdbc_metadata.sql");

/// The statements of a fixture file (`-- ----` between them, `--` lines
/// dropped).
fn statements(file: &str) -> Vec<String> {
    file.split("\n-- ----\n")
        .map(|q| {
            q.lines()
                .filter(|l| !l.starts_with("--"))
                .collect::<Vec<_>>()
                .join("\n")
        })
        .filter(|q| !q.trim().is_empty())
        .collect()
}

/// The tables, indexes and view every test reads the catalog of.
const SETUP: &str = "CREATE TABLE t (id BIGINT PRIMARY KEY, name VARCHAR, x DOUBLE, loc GEOMETRY);
                 CREATE INDEX t_name ON t USING btree (name);
                 CREATE INDEX t_loc ON t USING rtree (loc);
                 CREATE VIEW v AS SELECT id, name FROM t;";

async fn start() -> PgFixture {
    PgFixture::start(false, SETUP).await
}

/// psql's lookup of a relation's oid by name (`\d name`).
async fn oid(c: &Client, name: &str) -> String {
    let r = rows(
        c,
        &format!(
            "SELECT c.oid, n.nspname, c.relname FROM pg_catalog.pg_class c \
             LEFT JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace \
             WHERE c.relname OPERATOR(pg_catalog.~) '^({name})$' COLLATE pg_catalog.default \
             AND pg_catalog.pg_table_is_visible(c.oid) ORDER BY 2, 3"
        ),
    )
    .await;
    assert_eq!(r.len(), 1, "one relation named {name}: {r:?}");
    r[0][0].clone().unwrap()
}

fn flat(r: &[Vec<Option<String>>]) -> Vec<String> {
    r.iter()
        .map(|row| {
            row.iter()
                .map(|v| v.clone().unwrap_or_else(|| "NULL".into()))
                .collect::<Vec<_>>()
                .join("|")
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_psql_catalog_query_runs() {
    let f = start().await;
    let c = f.pg().await;
    let (t, t_name, v) = (
        oid(&c, "t").await,
        oid(&c, "t_name").await,
        oid(&c, "v").await,
    );
    let all = statements(PSQL15);
    assert!(all.len() >= 25, "{} captured queries", all.len());
    for q in all {
        let q = q
            .replace("{t}", &t)
            .replace("{t_name}", &t_name)
            .replace("{v}", &v);
        rows(&c, &q).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pgjdbc_metadata_queries_describe_the_table() {
    let f = start().await;
    let c = f.pg().await;
    let mut results = Vec::new();
    for q in statements(PGJDBC) {
        results.push((q.clone(), flat(&rows(&c, &q).await)));
    }
    assert_eq!(results.len(), 14);
    let find = |needle: &str| {
        results
            .iter()
            .find(|(q, _)| q.contains(needle))
            .map(|(_, r)| r.clone())
            .unwrap_or_else(|| panic!("no query with {needle}"))
    };
    // getTables: the table, its view and indexes.
    let tables = find("AS \"TABLE_TYPE\"");
    assert!(tables.iter().any(|r| r.contains("|t|TABLE|")), "{tables:?}");
    assert!(tables.iter().any(|r| r.contains("|v|VIEW|")), "{tables:?}");
    // getColumns: names, type oids, NOT NULL.
    let cols = find("row_number() OVER");
    assert!(cols[0].starts_with("silt|public|t|id|20|t|"), "{cols:?}");
    assert_eq!(cols.len(), 4 + 2, "t's four columns and v's two: {cols:?}");
    // getPrimaryKeys: (_pg_expandarray(conkey)).n
    let pk = find("PK_NAME\"FROM");
    assert_eq!(pk, ["silt|public|t|id|1|t_pkey"]);
    // getIndexInfo: the primary key's index first, then the others by name.
    let ix = find("NON_UNIQUE\"");
    let names: Vec<&str> = ix
        .iter()
        .map(|r| r.split('|').nth(5).unwrap_or(""))
        .collect();
    assert_eq!(names, ["t_pkey", "t_loc", "t_name"], "{ix:?}");
    // getTypeInfo's search-path query.
    let types = find("array_in");
    assert!(types.iter().any(|r| r.contains("|int8|")), "{types:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_catalog_describes_tables_indexes_and_views() {
    let f = start().await;
    let c = f.pg().await;
    // \dt and \dv
    let kinds = rows(
        &c,
        "SELECT c.relname, c.relkind, pg_catalog.pg_get_userbyid(c.relowner), am.amname \
         FROM pg_catalog.pg_class c LEFT JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace \
         LEFT JOIN pg_catalog.pg_am am ON am.oid = c.relam \
         WHERE n.nspname = 'public' ORDER BY 1",
    )
    .await;
    assert_eq!(
        flat(&kinds),
        [
            "t|r|silt|lsm",
            "t_loc|i|silt|rtree",
            "t_name|i|silt|btree",
            "t_pkey|i|silt|btree",
            "v|v|silt|NULL"
        ]
    );
    // \d t: columns, types, NOT NULL
    let t = oid(&c, "t").await;
    let cols = rows(
        &c,
        &format!(
            "SELECT a.attname, pg_catalog.format_type(a.atttypid, a.atttypmod), a.attnotnull \
             FROM pg_catalog.pg_attribute a WHERE a.attrelid = '{t}' AND a.attnum > 0 \
             AND NOT a.attisdropped ORDER BY a.attnum"
        ),
    )
    .await;
    assert_eq!(
        flat(&cols),
        [
            "id|bigint|t",
            "name|text|f",
            "x|double precision|f",
            "loc|geometry|f"
        ]
    );
    // The index footer of \d t, and pg_indexes.
    let idx = rows(
        &c,
        &format!(
            "SELECT c2.relname, i.indisprimary, pg_catalog.pg_get_indexdef(i.indexrelid, 0, true), \
             pg_catalog.pg_get_constraintdef(con.oid, true), i.indkey \
             FROM pg_catalog.pg_class c, pg_catalog.pg_class c2, pg_catalog.pg_index i \
             LEFT JOIN pg_catalog.pg_constraint con ON (conrelid = i.indrelid AND conindid = i.indexrelid AND contype IN ('p','u','x')) \
             WHERE c.oid = '{t}' AND c.oid = i.indrelid AND i.indexrelid = c2.oid \
             ORDER BY i.indisprimary DESC, c2.relname"
        ),
    )
    .await;
    assert_eq!(
        flat(&idx),
        [
            "t_pkey|t|CREATE UNIQUE INDEX t_pkey ON public.t USING btree (id)|PRIMARY KEY (id)|1",
            "t_loc|f|CREATE INDEX t_loc ON public.t USING rtree (loc)|NULL|4",
            "t_name|f|CREATE INDEX t_name ON public.t USING btree (name)|NULL|2",
        ]
    );
    let views = rows(
        &c,
        "SELECT viewname, definition FROM pg_views WHERE schemaname = 'public'",
    )
    .await;
    assert_eq!(flat(&views), ["v|SELECT id, name FROM t;"]);
    // The catalog is read when a statement plans: a dropped index is gone.
    c.batch_execute("DROP INDEX t_loc").await.unwrap();
    let names = rows(&c, "SELECT indexname FROM pg_indexes ORDER BY 1").await;
    assert_eq!(flat(&names), ["t_name", "t_pkey"]);
    // Oids are stable: another connection sees the same.
    let c2 = f.pg().await;
    assert_eq!(oid(&c2, "t").await, t);
    // Unqualified catalog names resolve, as pg_catalog is searched.
    let n = rows(
        &c,
        "SELECT count(*) FROM pg_namespace WHERE nspname = 'public'",
    )
    .await;
    assert_eq!(flat(&n), ["1"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn information_schema_speaks_postgresql() {
    let f = start().await;
    let c = f.pg().await;
    let cols = rows(
        &c,
        "SELECT column_name, data_type, is_nullable, udt_name, numeric_precision \
         FROM information_schema.columns WHERE table_schema = 'public' AND table_name = 't' \
         ORDER BY ordinal_position",
    )
    .await;
    assert_eq!(
        flat(&cols),
        [
            "id|bigint|NO|int8|64",
            "name|text|YES|text|NULL",
            "x|double precision|YES|float8|53",
            "loc|USER-DEFINED|YES|geometry|NULL"
        ]
    );
    let tables = rows(
        &c,
        "SELECT table_catalog, table_name, table_type FROM information_schema.tables \
         WHERE table_schema = 'public' ORDER BY 2",
    )
    .await;
    assert_eq!(flat(&tables), ["silt|t|BASE TABLE", "silt|v|VIEW"]);
    let views = rows(
        &c,
        "SELECT table_name, view_definition FROM information_schema.views WHERE table_schema = 'public'",
    )
    .await;
    assert_eq!(flat(&views), ["v|SELECT id, name FROM t;"]);
    let keys = rows(
        &c,
        "SELECT tc.constraint_name, tc.constraint_type, k.column_name, k.ordinal_position \
         FROM information_schema.table_constraints tc JOIN information_schema.key_column_usage k \
         ON k.constraint_name = tc.constraint_name WHERE tc.table_name = 't'",
    )
    .await;
    assert_eq!(flat(&keys), ["t_pkey|PRIMARY KEY|id|1"]);
    // DataFusion's SHOW statements read these tables.
    let shown = rows(&c, "SHOW TABLES").await;
    assert!(
        shown.iter().any(|r| r[2].as_deref() == Some("t")),
        "{shown:?}"
    );
    let shown = rows(&c, "SHOW COLUMNS FROM t").await;
    assert_eq!(shown.len(), 4, "{shown:?}");
    assert_eq!(
        rows(&c, "SHOW datafusion.execution.batch_size").await.len(),
        1
    );
    // The schemata, information_schema among them, as pg_namespace has it
    // (`documents`: the document view of the tables).
    let s = rows(
        &c,
        "SELECT schema_name FROM information_schema.schemata ORDER BY 1",
    )
    .await;
    assert_eq!(
        flat(&s),
        ["documents", "information_schema", "pg_catalog", "public"]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_functions_and_settings() {
    let f = start().await;
    let c = f.pg().await;
    let r = rows(
        &c,
        "SELECT pg_catalog.version(), current_schema(), current_database(), \
         to_regtype('int8'), to_regtype('no_such_type'), 'pg_class'::regclass = 'pg_catalog.pg_class'::regclass",
    )
    .await;
    let row = &r[0];
    assert!(
        row[0]
            .as_deref()
            .unwrap()
            .starts_with("PostgreSQL 16.6 (Silt"),
        "{row:?}"
    );
    assert_eq!(row[1].as_deref(), Some("public"));
    assert_eq!(row[2].as_deref(), Some("silt"));
    assert_eq!(row[3].as_deref(), Some("20"));
    assert_eq!(row[4], None);
    assert_eq!(row[5].as_deref(), Some("t"));
    for (show, want) in [
        ("SHOW server_version", "16.6"),
        ("SHOW standard_conforming_strings", "on"),
        ("SHOW transaction isolation level", "read committed"),
    ] {
        assert_eq!(flat(&rows(&c, show).await), [want], "{show}");
    }
    // psycopg's type lookup (TypeInfo.fetch).
    let ti = c
        .query(
            "SELECT typname AS name, oid, typarray AS array_oid, oid::regtype::text AS regtype, \
             typdelim AS delimiter FROM pg_type t WHERE t.oid = to_regtype($1) ORDER BY t.oid",
            &[&"geometry"],
        )
        .await
        .unwrap();
    assert_eq!(ti.len(), 1);
    assert_eq!(ti[0].get::<_, &str>("regtype"), "geometry");
    // A relation that does not exist, named in a cast.
    let e = c.simple_query("SELECT 'nope'::regclass").await.unwrap_err();
    let msg = e
        .as_db_error()
        .map(|d| d.message().to_owned())
        .unwrap_or_default();
    assert!(msg.contains("relation \"nope\" does not exist"), "{e:?}");
    // A catalog subquery of more than one row is PostgreSQL's error.
    let e = c
        .simple_query(
            "SELECT (SELECT a.attname FROM pg_attribute a WHERE a.attrelid = c.oid) FROM pg_class c \
             WHERE c.relname = 't'",
        )
        .await
        .unwrap_err();
    let msg = e
        .as_db_error()
        .map(|d| d.message().to_owned())
        .unwrap_or_default();
    assert!(msg.contains("more than one row"), "{e:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn arrays_travel_as_postgresql_arrays() {
    let f = start().await;
    let c = f.pg().await;
    // Binary (tokio-postgres' extended protocol).
    let r = c
        .query_one(
            "SELECT make_array(1, 2, 3) AS i, make_array('a b', 'c,d', NULL, '\"q\"') AS s, \
             make_array(1.5, 2.0) AS f",
            &[],
        )
        .await
        .unwrap();
    assert_eq!(r.get::<_, Vec<i64>>("i"), vec![1, 2, 3]);
    assert_eq!(
        r.get::<_, Vec<Option<String>>>("s"),
        vec![
            Some("a b".into()),
            Some("c,d".into()),
            None,
            Some("\"q\"".into())
        ]
    );
    assert_eq!(r.get::<_, Vec<f64>>("f"), vec![1.5, 2.0]);
    // Text, quoted as PostgreSQL quotes.
    let t = rows(
        &c,
        "SELECT make_array('a b', 'c,d', NULL), make_array(1, 2)",
    )
    .await;
    assert_eq!(flat(&t), ["{\"a b\",\"c,d\",NULL}|{1,2}"]);
}

/// Foreign keys as psql 15's `\d` asks for them (the keys of a table and
/// the keys that reference it), and their violations as drivers see them:
/// SQLSTATE 23503 with PostgreSQL's message and detail.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn foreign_keys_as_psql_and_drivers_see_them() {
    let f = PgFixture::start(
        false,
        "CREATE TABLE customer (c_id BIGINT PRIMARY KEY, name TEXT);
         CREATE TABLE orders (o_id BIGINT PRIMARY KEY, o_c_id BIGINT REFERENCES customer ON DELETE CASCADE);",
    )
    .await;
    let c = f.pg().await;
    let (cust, orders) = (oid(&c, "customer").await, oid(&c, "orders").await);
    let has = rows(
        &c,
        &format!("SELECT relhastriggers FROM pg_catalog.pg_class WHERE oid = '{orders}'"),
    )
    .await;
    assert_eq!(flat(&has), ["t"]);
    // "Foreign-key constraints:" of \d orders.
    let own = rows(
        &c,
        &format!(
            "SELECT true as sametable, conname, pg_catalog.pg_get_constraintdef(r.oid, true) as condef, \
             conrelid::pg_catalog.regclass AS ontable FROM pg_catalog.pg_constraint r \
             WHERE r.conrelid = '{orders}' AND r.contype = 'f' AND conparentid = 0 ORDER BY conname;"
        ),
    )
    .await;
    assert_eq!(
        flat(&own),
        [
            "t|orders_o_c_id_fkey|FOREIGN KEY (o_c_id) REFERENCES customer(c_id) ON DELETE CASCADE|orders"
        ]
    );
    // "Referenced by:" of \d customer.
    let by = rows(
        &c,
        &format!(
            "SELECT conname, conrelid::pg_catalog.regclass AS ontable, \
             pg_catalog.pg_get_constraintdef(oid, true) AS condef FROM pg_catalog.pg_constraint c \
             WHERE confrelid IN (SELECT pg_catalog.pg_partition_ancestors('{cust}') \
             UNION ALL VALUES ('{cust}'::pg_catalog.regclass)) \
             AND contype = 'f' AND conparentid = 0 ORDER BY conname;"
        ),
    )
    .await;
    assert_eq!(
        flat(&by),
        [
            "orders_o_c_id_fkey|orders|FOREIGN KEY (o_c_id) REFERENCES customer(c_id) ON DELETE CASCADE"
        ]
    );
    let e = c
        .execute("INSERT INTO orders VALUES (1, 9)", &[])
        .await
        .expect_err("no customer 9");
    let db = e.as_db_error().expect("a server error");
    assert_eq!(
        db.code(),
        &tokio_postgres::error::SqlState::FOREIGN_KEY_VIOLATION
    );
    assert_eq!(
        db.message(),
        "insert or update on table \"orders\" violates foreign key constraint \"orders_o_c_id_fkey\""
    );
    assert_eq!(
        db.detail(),
        Some("Key (o_c_id)=(9) is not present in table \"customer\".")
    );
    c.batch_execute("INSERT INTO customer VALUES (9, 'x'); INSERT INTO orders VALUES (1, 9)")
        .await
        .unwrap();
    c.batch_execute("DELETE FROM customer WHERE c_id = 9")
        .await
        .unwrap();
    assert_eq!(flat(&rows(&c, "SELECT count(*) FROM orders").await), ["0"]);
    let e = c
        .execute("DROP TABLE customer", &[])
        .await
        .expect_err("referenced");
    assert_eq!(
        e.as_db_error().map(|d| d.code().code()),
        Some("2BP01"),
        "{e:?}"
    );
}
