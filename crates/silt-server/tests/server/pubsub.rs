//! #21: pub/sub through the server: the SQL forms over the PostgreSQL
//! protocol (simple and extended), and a subscriber's live feed over HTTP
//! (NDJSON and server-sent events, resuming after an acknowledgement).

use std::time::Duration;

use futures::StreamExt;
use serde_json::Value;

use crate::{Fixture, http_client};

/// The deliveries of a feed's body (NDJSON lines, or the `data:` lines of
/// server-sent events), heartbeats skipped.
fn deliveries(text: &str) -> Vec<Value> {
    text.lines()
        .filter_map(|l| {
            let l = l.strip_prefix("data: ").unwrap_or(l);
            (l.starts_with('{')).then(|| serde_json::from_str(l).unwrap())
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn pubsub_over_pgwire_and_a_live_http_feed() {
    let f = Fixture::start(|_| {}).await;
    let c = f.pg().await;
    c.batch_execute("CREATE PUBSUB feed WITH (design = 'dualdb')")
        .await
        .unwrap();
    // Extended protocol, with parameters: the server cannot type them from
    // a table function's arguments, so they are text (as PostgreSQL's
    // unknown literals), and a quoted integer is read as one.
    let st = c
        .prepare("SELECT kind, pid FROM pubsub_subscribe('feed', $1, $2, $3, $4, $5, $6)")
        .await
        .unwrap();
    assert_eq!(st.columns()[1].name(), "pid");
    assert_eq!(st.params()[1], tokio_postgres::types::Type::TEXT);
    let args = ["7", "1", "42", "100", "0", "1000"];
    let args: Vec<&(dyn tokio_postgres::types::ToSql + Sync)> = args
        .iter()
        .map(|a| a as &(dyn tokio_postgres::types::ToSql + Sync))
        .collect();
    let rows = c.query(&st, &args).await.unwrap();
    assert!(rows.is_empty());

    // A feed opened before anything is published: it gets the matches as
    // they commit.
    let url = f.url("/pubsub/feed/listen?uid=42&max=2");
    let feed = tokio::spawn(async move {
        let r = http_client::client().get(url).send().await.unwrap();
        assert_eq!(r.status(), 200);
        assert_eq!(r.headers()["content-type"], "application/x-ndjson");
        let mut body = r.bytes_stream();
        let mut buf = Vec::new();
        while let Some(c) = body.next().await {
            buf.extend_from_slice(&c.unwrap());
        }
        String::from_utf8(buf).unwrap()
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    for (pid, tp) in [(1i64, 110i64), (2, 120)] {
        let rows = c
            .query(
                "SELECT uid FROM pubsub_publish('feed', 7, $1, $2, 5000, 'news')",
                // Parameters the server cannot type are text (as in
                // PostgreSQL); a quoted integer is read as one.
                &[&pid.to_string(), &tp.to_string()],
            )
            .await
            .unwrap();
        assert_eq!(rows.len(), 1);
        assert_eq!(rows[0].get::<_, i64>(0), 42);
    }
    let got = tokio::time::timeout(Duration::from_secs(20), feed)
        .await
        .expect("the feed ended after max=2")
        .unwrap();
    let got = deliveries(&got);
    assert_eq!(got.len(), 2, "{got:?}");
    assert_eq!(got[0]["pid"], 1);
    assert_eq!(got[1]["pid"], 2);
    assert_eq!(got[0]["id"], 7);
    assert_eq!(got[0]["desc"], "news");
    let (s1, s2) = (
        got[0]["seq"].as_i64().unwrap(),
        got[1]["seq"].as_i64().unwrap(),
    );
    assert!(s1 < s2);

    // Sending acknowledges nothing: a new feed starts at the first again.
    let client = http_client::client();
    let text = client
        .get(f.url("/pubsub/feed/listen?uid=42&idle=1"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert_eq!(deliveries(&text).len(), 2, "{text}");

    // Server-sent events resuming after Last-Event-ID: the first is
    // acknowledged, the second comes again with its id.
    let r = client
        .get(f.url("/pubsub/feed/listen?uid=42&idle=1"))
        .header("accept", "text/event-stream")
        .header("last-event-id", s1.to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(r.headers()["content-type"], "text/event-stream");
    let text = r.text().await.unwrap();
    assert!(text.contains(&format!("id: {s2}\n")), "{text}");
    let got = deliveries(&text);
    assert_eq!(got.len(), 1, "{text}");
    assert_eq!(got[0]["seq"], s2);
    // The cursor is durable and visible through SQL.
    let rows = c
        .query("SELECT seq FROM pubsub_deliveries('feed', 42)", &[])
        .await
        .unwrap();
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].get::<_, i64>(0), s2);
    // `after` acknowledges the rest: nothing left.
    let text = client
        .get(f.url(&format!("/pubsub/feed/listen?uid=42&idle=1&after={s2}")))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(deliveries(&text).is_empty(), "{text}");

    // Refusals name what was wrong.
    for (path, status, says) in [
        (
            "/pubsub/nope/listen?uid=1",
            404,
            "no pub/sub space named `nope`",
        ),
        ("/pubsub/feed/listen", 400, "add ?uid=N"),
        ("/pubsub/feed/listen?uid=x", 400, "`uid` must be an integer"),
        ("/pubsub/feed/listen?uid=1&format=xml", 400, "ndjson or sse"),
    ] {
        let r = client.get(f.url(path)).send().await.unwrap();
        assert_eq!(r.status().as_u16(), status, "{path}");
        let v: Value = r.json().await.unwrap();
        let msg = v["errors"][0]["msg"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        assert!(msg.contains(says), "{path}: {msg}");
    }
    c.batch_execute("DROP PUBSUB feed").await.unwrap();
}
