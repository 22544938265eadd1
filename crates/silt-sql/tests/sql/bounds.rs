//! Resource bounds of the SQL engine (see `silt_sql::bounds`): capped
//! functions, statements stopped through their control, memory pools.

use std::sync::Arc;
use std::time::Duration;

use datafusion::arrow::array::{AsArray, Int64Array};
use futures::StreamExt;
use silt::{Database, DbOptions};
use silt_sql::bounds::{LimitExceeded, StopReason, Stopped, limit_of};
use silt_sql::{Bounds, SqlEngine, SqlError, SqlSession, StatementControl};

async fn engine(rows: i64, bounds: Bounds) -> (tempfile::TempDir, SqlEngine) {
    let dir = tempfile::tempdir().unwrap();
    let db = Arc::new(Database::open(dir.path(), DbOptions::default()).unwrap());
    let e = SqlEngine::new(db).unwrap();
    e.set_bounds(bounds);
    e.execute("CREATE TABLE big (id BIGINT PRIMARY KEY, v BIGINT)")
        .await
        .unwrap();
    let mut i = 0;
    while i < rows {
        let values: Vec<String> = (i..(i + 1000).min(rows))
            .map(|k| format!("({k}, {})", k % 97))
            .collect();
        e.execute(&format!("INSERT INTO big VALUES {}", values.join(",")))
            .await
            .unwrap();
        i += 1000;
    }
    (dir, e)
}

fn limit(e: &SqlError, ctl: Option<&StatementControl>) -> Option<LimitExceeded> {
    match e.root() {
        SqlError::DataFusion(de) => limit_of(de, ctl),
        _ => None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn capped_functions_refuse_big_values() {
    let (_d, e) = engine(
        10,
        Bounds {
            query_memory: 16 << 20,
            server_memory: 64 << 20,
            value_bytes: 1 << 20,
        },
    )
    .await;
    for sql in [
        "SELECT repeat('x', 2000000)",
        "SELECT lpad('x', 2000000, 'ab')",
        "SELECT rpad('', 300000, 'é')",
        "SELECT replace(repeat('a', 100000), 'a', 'bbbbbbbbbbbbbbbbbbbbbbbbbb')",
        "SELECT concat(repeat('a', 600000), repeat('b', 600000))",
        "SELECT repeat('x', 600000) FROM big",
    ] {
        let err = e.execute(sql).await.unwrap_err();
        let l = limit(&err, None);
        assert!(
            matches!(l, Some(LimitExceeded::Value { .. })),
            "{sql}: {err}"
        );
    }
    let b = e
        .execute("SELECT repeat('ab', 3) AS r, lpad('7', 3, '0') AS l, concat('a', 'b') AS c")
        .await
        .unwrap();
    let col = |i: usize| b[0].column(i).as_string::<i32>().value(0).to_owned();
    assert_eq!(
        (col(0), col(1), col(2)),
        ("ababab".into(), "007".into(), "ab".into())
    );
    // Back to DataFusion's own functions without a cap.
    e.set_bounds(Bounds::default());
    let b = e
        .execute("SELECT length(repeat('x', 2000000)) AS n")
        .await
        .unwrap();
    assert_eq!(
        b[0].column(0)
            .as_primitive::<datafusion::arrow::datatypes::Int32Type>()
            .value(0),
        2_000_000
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn string_agg_refuses_a_value_over_the_cap() {
    // 3,000 rows of "row-NNNNNN" (10 bytes) and a 2-byte separator: 36,000
    // bytes in all, over a 16 KiB cap (under the statement's memory limit,
    // which alone would let it through).
    let (_d, e) = engine(
        3000,
        Bounds {
            query_memory: 16 << 20,
            server_memory: 64 << 20,
            value_bytes: 16 << 10,
        },
    )
    .await;
    for sql in [
        "SELECT string_agg(concat('row-', lpad(CAST(id AS VARCHAR), 6, '0')), ', ') FROM big",
        // The ordered form (DataFusion's array_agg under it).
        "SELECT string_agg(concat('row-', lpad(CAST(id AS VARCHAR), 6, '0')), ', ' ORDER BY id DESC) FROM big",
        // Over a cross join: refused long before the 9e6 rows are read.
        "SELECT string_agg(concat('row-', lpad(CAST(a.id AS VARCHAR), 6, '0')), ',') FROM big a, big b",
    ] {
        let err = e.execute(sql).await.unwrap_err();
        match limit(&err, None) {
            Some(LimitExceeded::Value {
                function, limit, ..
            }) => assert_eq!(
                (function.as_str(), limit),
                ("string_agg", 16 << 10),
                "{sql}"
            ),
            other => panic!("{sql}: {other:?}: {err}"),
        }
    }
    assert_drained(&e).await;
    // Under the cap: the whole value, in order; grouped, one per group.
    let b = e
        .execute(
            "SELECT string_agg(CAST(id AS VARCHAR), ',' ORDER BY id) AS s FROM big WHERE id < 5",
        )
        .await
        .unwrap();
    assert_eq!(b[0].column(0).as_string::<i64>().value(0), "0,1,2,3,4");
    // Just under the cap (1,200 x 10 bytes and 1,199 separators: 14,398
    // bytes), ordered: the partitions' lists merge.
    let b = e
        .execute(
            "SELECT string_agg(concat('row-', lpad(CAST(id AS VARCHAR), 6, '0')), ', ' ORDER BY id) \
             AS s FROM big WHERE id < 1200",
        )
        .await
        .unwrap();
    let s = b[0].column(0).as_string::<i64>().value(0);
    assert_eq!(s.len(), 14_398);
    assert!(s.starts_with("row-000000, row-000001") && s.ends_with("row-001199"));
    let b = e
        .execute(
            "SELECT v, string_agg(CAST(id AS VARCHAR), ',' ORDER BY id) AS s FROM big \
             WHERE id < 200 AND v < 2 GROUP BY v ORDER BY v",
        )
        .await
        .unwrap();
    let s = b[0].column(1).as_string::<i64>();
    assert_eq!((s.value(0), s.value(1)), ("0,97,194", "1,98,195"));
    // No cap: DataFusion's own string_agg builds it.
    e.set_bounds(Bounds::default());
    let b = e
        .execute("SELECT length(string_agg(concat('row-', lpad(CAST(id AS VARCHAR), 6, '0')), ', ')) AS n FROM big")
        .await
        .unwrap();
    assert_eq!(
        b[0].column(0)
            .as_primitive::<datafusion::arrow::datatypes::Int64Type>()
            .value(0),
        3000 * 10 + 2999 * 2
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_cross_join_stops() {
    let (_d, e) = engine(3000, Bounds::default()).await;
    let s = Arc::new(SqlSession::new());
    let ctl = StatementControl::new();
    // 2.7e10 combinations, none matching: the join never emits a batch.
    let q = "SELECT count(*) FROM big a, big b, big c WHERE a.v + b.v + c.v = -1";
    let mut stream = e
        .execute_stream_with(&s, q, Some(ctl.clone()))
        .await
        .unwrap();
    let c2 = ctl.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(200)).await;
        c2.stop(StopReason::Timeout);
    });
    let first = stream.next().await.unwrap();
    let err = first.unwrap_err();
    assert!(silt_sql::bounds::is_stopped(&err), "{err}");
    assert!(
        err.to_string()
            .contains(&Stopped(StopReason::Timeout).to_string())
    );
    drop(stream);
    // Its memory went back to the pool.
    assert_drained(&e).await;
}

/// Every reservation goes back to the pool once a statement is over. The
/// tasks of a failed or dropped statement are cancelled, not joined, so
/// they release theirs a moment after the caller sees the end: wait up to
/// 5 s for it.
async fn assert_drained(e: &SqlEngine) {
    for _ in 0..250 {
        if e.memory_in_use() == 0 {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(e.memory_in_use(), 0, "memory still reserved after 5 s");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_limits_fail_or_spill_without_panics() {
    // The build side of the nested-loop join (9e4 rows) does not fit: it
    // falls back to re-executing its input, which holds a repartition.
    let (_d, e) = engine(
        300,
        Bounds {
            query_memory: 1 << 20,
            server_memory: 8 << 20,
            value_bytes: 1 << 20,
        },
    )
    .await;
    let s = Arc::new(SqlSession::new());
    let ctl = StatementControl::new();
    let b = e
        .execute_with(
            &s,
            "SELECT count(*) AS n FROM big a, big b, big c WHERE a.v + b.v + c.v = -1",
            Some(ctl.clone()),
        )
        .await
        .unwrap();
    let n = b[0]
        .column(0)
        .as_any()
        .downcast_ref::<Int64Array>()
        .unwrap();
    assert_eq!(n.value(0), 0);
    // An aggregate that cannot spill fails, naming the statement's limit.
    let ctl = StatementControl::new();
    let err = e
        .execute_with(
            &s,
            "SELECT string_agg(repeat('x', 50), ',') FROM big a, big b",
            Some(ctl.clone()),
        )
        .await
        .unwrap_err();
    assert_eq!(
        limit(&err, Some(&ctl)),
        Some(LimitExceeded::QueryMemory { limit: 1 << 20 }),
        "{err}"
    );
    assert_drained(&e).await;
}
