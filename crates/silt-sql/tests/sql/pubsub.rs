//! #21: publish/subscribe through SQL: `CREATE PUBSUB`, the operations as
//! table functions, the delivery queue and its cursor, and the refusals.

use super::common::*;

fn ints_of(e: &silt_sql::SqlEngine, sql: &str, col: &str) -> Vec<i64> {
    let b = run(e, sql);
    let Some(first) = b.first() else {
        return Vec::new();
    };
    let i = first.schema().index_of(col).expect("column");
    ints(&b, i)
}

#[test]
fn operations_answer_and_deliver_through_sql() {
    let (dir, e) = engine();
    run(
        &e,
        "CREATE PUBSUB feed WITH (design = 'dualdb', delivery = true)",
    );
    // A publication before any subscription: nobody to tell.
    let b = run(
        &e,
        "SELECT * FROM pubsub_publish('feed', 7, 1, 120, 300, 'road closed')",
    );
    assert_eq!(count_rows(&b), 0);
    // A subscription gets it at once.
    let b = run(
        &e,
        "SELECT kind, id, pid, description FROM pubsub_subscribe('feed', 7, 10, 42, 150, 100, 200)",
    );
    assert_eq!(strings(&b, 0), [Some("publication".to_owned())]);
    assert_eq!(strings(&b, 1), [Some("7".to_owned())]);
    assert_eq!(ints(&b, 2), [1]);
    assert_eq!(strings(&b, 3), [Some("road closed".to_owned())]);
    // A later publication in its window returns the subscriber.
    assert_eq!(
        ints_of(
            &e,
            "SELECT uid FROM pubsub_publish('feed', 7, 2, 160, 400, 'open again')",
            "uid"
        ),
        [42]
    );
    // Outside the window (tp >= tmax of the subscription): nobody.
    assert!(
        ints_of(
            &e,
            "SELECT uid FROM pubsub_publish('feed', 7, 3, 250, 400, 'late')",
            "uid"
        )
        .is_empty()
    );
    // Another id: nobody.
    assert!(
        ints_of(
            &e,
            "SELECT uid FROM pubsub_publish('feed', 'other', 4, 160, 400, 'x')",
            "uid"
        )
        .is_empty()
    );
    // Both matches are queued for subscriber 42, in order.
    let seqs = ints_of(&e, "SELECT * FROM pubsub_deliveries('feed', 42)", "seq");
    assert_eq!(seqs.len(), 2);
    assert!(seqs[0] < seqs[1]);
    let pids = ints_of(&e, "SELECT pid FROM pubsub_deliveries('feed', 42)", "pid");
    assert_eq!(pids, [1, 2], "reading does not consume");
    assert_eq!(
        ints_of(&e, "SELECT * FROM pubsub_deliveries('feed', 42, 1)", "seq"),
        seqs[..1]
    );
    // EXPLAIN runs nothing.
    let before = ints_of(&e, "SELECT * FROM pubsub_deliveries('feed', 42)", "seq");
    run(
        &e,
        "EXPLAIN SELECT * FROM pubsub_publish('feed', 7, 5, 170, 400, 'explained')",
    );
    assert_eq!(
        ints_of(&e, "SELECT * FROM pubsub_deliveries('feed', 42)", "seq"),
        before
    );
    // Acknowledging the first moves the cursor there; the second stays.
    let b = run(
        &e,
        &format!("SELECT * FROM pubsub_ack('feed', 42, {})", seqs[0]),
    );
    assert_eq!(ints(&b, 1), [seqs[0]]);
    assert_eq!(
        ints_of(&e, "SELECT * FROM pubsub_deliveries('feed', 42)", "seq"),
        seqs[1..]
    );
    let err = fail(&e, "SELECT * FROM pubsub_ack('feed', 42, 999999)");
    assert!(err.contains("cannot acknowledge delivery 999999"), "{err}");
    // The space, its queue and its cursor survive a restart.
    let db = reopen(e, dir.path());
    let e = silt_sql::SqlEngine::new(std::sync::Arc::new(db)).expect("engine");
    assert_eq!(
        ints_of(&e, "SELECT * FROM pubsub_deliveries('feed', 42)", "seq"),
        seqs[1..]
    );
    let b = run(&e, "SELECT * FROM pubsub_ack('feed', 42)");
    assert_eq!(ints(&b, 1), [seqs[1]]);
    assert!(ints_of(&e, "SELECT * FROM pubsub_deliveries('feed', 42)", "seq").is_empty());
    // Its datasets are tables, and cannot be dropped on their own.
    let err = fail(&e, "DROP TABLE feed");
    assert!(err.contains("pubsub space `feed`"), "{err}");
    run(&e, "DROP PUBSUB feed");
    run(&e, "DROP PUBSUB IF EXISTS feed");
    let err = fail(&e, "SELECT * FROM pubsub_deliveries('feed', 42)");
    assert!(err.contains("no pub/sub space named `feed`"), "{err}");
    assert!(
        !e.database()
            .dataset_names()
            .iter()
            .any(|n| n.starts_with("feed")),
        "{:?}",
        e.database().dataset_names()
    );
}

fn count_rows(b: &[datafusion::arrow::array::RecordBatch]) -> usize {
    b.iter().map(|x| x.num_rows()).sum()
}

#[test]
fn self_joins_and_hierarchies() {
    let (_d, e) = engine();
    run(
        &e,
        "CREATE PUBSUB map WITH (design = 'twodb', hierarchy = 'variable', depth = 3, fanout = 4)",
    );
    run(
        &e,
        "SELECT * FROM pubsub_subscribe('map', '1.2', 1, 100, 10, 0, 1000)",
    );
    // A publication on an ancestor reaches the subscriber on its child;
    // self-joining, it also sees the earlier publication on a descendant.
    run(
        &e,
        "SELECT * FROM pubsub_publish('map', '1.2.3', 1, 20, 500, 'leaf')",
    );
    let b = run(
        &e,
        "SELECT kind, id, uid, pid FROM pubsub_publish('map', '1', 2, 30, 500, 'top', 0) ORDER BY kind",
    );
    assert_eq!(
        strings(&b, 0),
        [
            Some("publication".to_owned()),
            Some("subscription".to_owned())
        ]
    );
    assert_eq!(
        strings(&b, 1),
        [Some("1.2.3".to_owned()), Some("1.2".to_owned())]
    );
    // Self-joining subscriptions see the others live at their time.
    let b = run(
        &e,
        "SELECT kind, sid FROM pubsub_subscribe('map', '', 2, 101, 40, 0, 1000, true) WHERE kind = 'subscription'",
    );
    assert_eq!(ints(&b, 1), [1]);
    for (bad, says) in [
        (
            "SELECT * FROM pubsub_publish('map', '1.x', 3, 30, 500, 'bad')",
            "not a node's path",
        ),
        (
            "SELECT * FROM pubsub_publish('map', 7, 3, 30, 500, 'bad')",
            "a node's path as text",
        ),
        (
            "SELECT * FROM pubsub_publish('map', '9', 3, 30, 500, 'bad')",
            "9",
        ),
    ] {
        let err = fail(&e, bad);
        assert!(err.contains(says), "{bad}: {err}");
    }
}

#[test]
fn bad_calls_and_statements_are_refused_with_what_was_wrong() {
    let (_d, e) = engine();
    run(&e, "CREATE PUBSUB p");
    run(&e, "CREATE PUBSUB IF NOT EXISTS p WITH (design = 'twodb')");
    for (bad, says) in [
        ("CREATE PUBSUB p", "already exists"),
        (
            "CREATE PUBSUB q WITH (design = 'repqueries', delivery = true)",
            "live delivery needs stored subscriptions",
        ),
        (
            "CREATE PUBSUB q WITH (hierarchy = 'fixed', depth = 20, fanout = 8)",
            "more than 65536 leaves",
        ),
        ("DROP PUBSUB nope", "no pub/sub space named `nope`"),
        (
            "SELECT * FROM pubsub_publish('nope', 1, 1, 1, 2, 'x')",
            "no pub/sub space named `nope`",
        ),
        (
            "SELECT * FROM pubsub_publish('p', 1, 1, 5, 5, 'x')",
            "expires (5) no later than it happens (5)",
        ),
        (
            "SELECT * FROM pubsub_publish('p', 1, 1, 1)",
            "takes 6 to 9 arguments",
        ),
        (
            "SELECT * FROM pubsub_subscribe('p', 1, 1, 1, 1, 9, 3)",
            "window [9, 3) is empty",
        ),
        (
            "SELECT * FROM pubsub_subscribe('p', 1, 'one', 1, 1, 0, 3)",
            "`sid` (argument 3) must be an integer",
        ),
        (
            "SELECT * FROM pubsub_subscribe('p', 1, 1 + random(), 1, 1, 0, 3)",
            "must be a constant",
        ),
        (
            "SELECT * FROM pubsub_deliveries('p', 1, 0)",
            "`max_rows` must be from 1",
        ),
    ] {
        let err = fail(&e, bad);
        assert!(err.contains(says), "{bad}: {err}");
    }
    // Nothing was stored by the refused calls.
    let b = run(
        &e,
        "SELECT * FROM pubsub_subscribe('p', 1, 1, 1, 10, 0, 100)",
    );
    assert_eq!(count_rows(&b), 0);
    // Inside a transaction block, refused (they commit on their own).
    let s = silt_sql::SqlSession::new();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        e.execute_in(&s, "BEGIN").await.expect("begin");
        let err = e
            .execute_in(&s, "SELECT * FROM pubsub_publish('p', 1, 2, 5, 50, 'x')")
            .await
            .expect_err("refused in a block")
            .to_string();
        assert!(err.contains("inside a transaction block"), "{err}");
        e.execute_in(&s, "ROLLBACK").await.expect("rollback");
    });
    let b = run(
        &e,
        "SELECT * FROM pubsub_subscribe('p', 1, 2, 2, 10, 0, 100)",
    );
    assert_eq!(count_rows(&b), 0, "the refused publication is not stored");
}

#[test]
fn roles_need_privileges_on_the_spaces_datasets() {
    use silt::{Privileges, Role};
    let (_d, e) = engine();
    run(&e, "CREATE PUBSUB feed");
    let db = e.database().clone();
    let read = Privileges {
        read: true,
        write: false,
        ddl: false,
    };
    let all = Privileges {
        read: true,
        write: true,
        ddl: false,
    };
    let role = |name: &str, p: Privileges| Role {
        name: name.to_owned(),
        login: true,
        admin: false,
        verifier: None,
        grants: ["feed", "feed_deliveries", "feed_cursors"]
            .iter()
            .map(|t| ((*t).to_owned(), p))
            .collect(),
    };
    db.create_role(role("reader", read)).expect("role");
    db.create_role(role("writer", all)).expect("role");
    db.create_role(Role {
        grants: Default::default(),
        ..role("nobody", read)
    })
    .expect("role");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let as_role = |user: &str, sql: &str| {
        let s = silt_sql::SqlSession::new();
        s.set_user(Some(user.to_owned()));
        rt.block_on(e.execute_in(&s, sql))
            .map_err(|e| e.to_string())
    };
    let publish = "SELECT * FROM pubsub_publish('feed', 1, 1, 10, 20, 'x')";
    let err = as_role("reader", publish).unwrap_err();
    assert!(err.contains("may not call pubsub_publish on"), "{err}");
    as_role("writer", publish).expect("the writer publishes");
    as_role("reader", "SELECT * FROM pubsub_deliveries('feed', 1)").expect("the reader reads");
    let err = as_role("reader", "SELECT * FROM pubsub_ack('feed', 1)").unwrap_err();
    assert!(err.contains("may not call pubsub_ack"), "{err}");
    let err = as_role("nobody", "SELECT * FROM pubsub_deliveries('feed', 1)").unwrap_err();
    assert!(err.contains("permission denied"), "{err}");
    let err = as_role("writer", "DROP PUBSUB feed").unwrap_err();
    assert!(
        err.contains("may not create or drop a pub/sub space"),
        "{err}"
    );
    // The HTTP feed's check: reading needs read, acknowledging write.
    silt_sql::pubsub::space_for(&db, Some("reader"), "feed", false).expect("reader listens");
    let err = silt_sql::pubsub::space_for(&db, Some("reader"), "feed", true)
        .err()
        .expect("reader may not acknowledge")
        .to_string();
    assert!(err.contains("permission denied"), "{err}");
}

#[test]
fn content_filters_narrow_the_matches() {
    let (_d, e) = engine();
    run(&e, "CREATE PUBSUB city WITH (design = 'twodb')");
    // Words only, a region only, both.
    run(
        &e,
        "SELECT * FROM pubsub_subscribe('city', 'traffic', 1, 1, 10, 0, 1000, false, 'Road closed')",
    );
    run(
        &e,
        "SELECT * FROM pubsub_subscribe('city', 'traffic', 2, 2, 10, 0, 1000, NULL, NULL, '0,0,10,10')",
    );
    run(
        &e,
        "SELECT * FROM pubsub_subscribe('city', 'traffic', 3, 3, 10, 0, 1000, false, 'closed', '5, 5, 6, 6')",
    );
    let uids = |sql: &str| {
        let mut v = ints_of(&e, sql, "uid");
        v.sort_unstable();
        v
    };
    assert_eq!(
        uids(
            "SELECT uid FROM pubsub_publish('city', 'traffic', 1, 20, 500, 'ROAD closed at the bridge', NULL, 5.5, 5)"
        ),
        [1, 2, 3]
    );
    assert_eq!(
        uids(
            "SELECT uid FROM pubsub_publish('city', 'traffic', 2, 21, 500, 'road open', NULL, 5.5, 5.5)"
        ),
        [2]
    );
    assert_eq!(
        uids("SELECT uid FROM pubsub_publish('city', 'traffic', 3, 22, 500, 'closed road')"),
        [1],
        "no location: no region matches"
    );
    // A later subscription with a filter finds the past publications that
    // pass it, with their location.
    let b = run(
        &e,
        "SELECT pid, x, y FROM pubsub_subscribe('city', 'traffic', 4, 4, 30, 0, 1000, false, 'road', '5,5,6,6') ORDER BY pid",
    );
    assert_eq!(ints(&b, 0), [1, 2]);
    assert_eq!(floats(&b, 1), [5.5, 5.5]);
    for (bad, says) in [
        (
            "SELECT * FROM pubsub_subscribe('city', 'traffic', 5, 5, 30, 0, 100, false, NULL, '1,2,3')",
            "four numbers",
        ),
        (
            "SELECT * FROM pubsub_subscribe('city', 'traffic', 5, 5, 30, 0, 100, false, NULL, '3,0,1,1')",
            "is not a box",
        ),
        (
            "SELECT * FROM pubsub_publish('city', 'traffic', 5, 30, 100, 'x', NULL, 'east', 1)",
            "`x` (argument 8) must be a number",
        ),
    ] {
        let err = fail(&e, bad);
        assert!(err.contains(says), "{bad}: {err}");
    }
}
