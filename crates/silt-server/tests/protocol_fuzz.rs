//! Malformed input to a real server: PostgreSQL frames of every frontend
//! message type (truncated, with lengths too short, too long or absurd,
//! random bodies), sent raw over TCP, and malformed HTTP bodies. Afterwards
//! no server task panicked, the server still answers, and its memory
//! stayed flat (issue #28: a 5-byte `Parse` panicked the decoder, and the
//! backtraces raised the RSS from 31 to 330 MiB).
//!
//! Also raw: the extended protocol's replies are held until `Flush` or
//! `Sync`, as PostgreSQL holds them (one write per round trip, not one
//! per message).

#[path = "common/http_client.rs"]
mod http_client;

use std::sync::Arc;
use std::time::Duration;

use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use silt::{Database, DbOptions};
use silt_server::{Server, ServerConfig};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::runtime::Runtime;

fn rss_kib() -> u64 {
    let s = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    s.lines()
        .find(|l| l.starts_with("VmRSS:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// A valid startup message.
fn startup() -> Vec<u8> {
    let mut body = vec![0, 3, 0, 0];
    body.extend_from_slice(b"user\0fuzz\0database\0silt\0\0");
    let mut v = ((body.len() + 4) as u32).to_be_bytes().to_vec();
    v.extend_from_slice(&body);
    v
}

/// How a frame's length field relates to its body.
#[derive(Clone, Debug)]
enum Len {
    Exact,
    /// The body is cut short by this many bytes (the length stays).
    Truncated(usize),
    /// The length claims this many more bytes than sent.
    Longer(u32),
    /// The length is this many bytes less than the body.
    Shorter(u32),
    /// 0 to 3: below the length field's own size.
    Tiny(u32),
    Huge,
    Negative,
}

#[derive(Clone, Debug)]
struct Frame {
    /// `None`: a startup-phase frame (no type byte).
    kind: Option<u8>,
    body: Vec<u8>,
    len: Len,
}

impl Frame {
    fn bytes(&self) -> Vec<u8> {
        let real = self.body.len() as u32 + 4;
        let len = match self.len {
            Len::Exact | Len::Truncated(_) => real,
            Len::Longer(n) => real.saturating_add(n),
            Len::Shorter(n) => real.saturating_sub(n),
            Len::Tiny(n) => n,
            Len::Huge => 0x7fff_ffff,
            Len::Negative => 0xffff_fff0,
        };
        let mut v = Vec::new();
        if let Some(k) = self.kind {
            v.push(k);
        }
        v.extend_from_slice(&len.to_be_bytes());
        v.extend_from_slice(&self.body);
        if let Len::Truncated(n) = self.len {
            v.truncate(v.len().saturating_sub(n));
        }
        v
    }
}

/// Bodies that look like the real thing, with a twist.
fn body_for(kind: u8) -> BoxedStrategy<Vec<u8>> {
    let cstr = || {
        "[a-zA-Z0-9 $*(),;']{0,40}".prop_map(|s| {
            let mut b = s.into_bytes();
            b.push(0);
            b
        })
    };
    let random = proptest::collection::vec(any::<u8>(), 0..64);
    let shaped: BoxedStrategy<Vec<u8>> = match kind {
        b'Q' | b'f' => cstr().boxed(),
        b'P' => (
            cstr(),
            cstr(),
            0u16..4,
            proptest::collection::vec(any::<u32>(), 0..4),
        )
            .prop_map(|(n, q, c, oids)| {
                let mut b = n;
                b.extend(q);
                b.extend_from_slice(&c.to_be_bytes());
                for o in oids {
                    b.extend_from_slice(&o.to_be_bytes());
                }
                b
            })
            .boxed(),
        b'B' => (
            cstr(),
            cstr(),
            proptest::collection::vec(
                (any::<i32>(), proptest::collection::vec(any::<u8>(), 0..8)),
                0..3,
            ),
            0u16..3,
        )
            .prop_map(|(p, s, params, results)| {
                let mut b = p;
                b.extend(s);
                b.extend_from_slice(&0u16.to_be_bytes());
                b.extend_from_slice(&(params.len() as u16).to_be_bytes());
                for (len, data) in params {
                    b.extend_from_slice(&len.to_be_bytes());
                    b.extend(data);
                }
                b.extend_from_slice(&results.to_be_bytes());
                b
            })
            .boxed(),
        b'E' => (cstr(), any::<i32>())
            .prop_map(|(p, n)| {
                let mut b = p;
                b.extend_from_slice(&n.to_be_bytes());
                b
            })
            .boxed(),
        b'D' | b'C' => (prop_oneof![Just(b'S'), Just(b'P'), any::<u8>()], cstr())
            .prop_map(|(t, n)| {
                let mut b = vec![t];
                b.extend(n);
                b
            })
            .boxed(),
        b'p' => prop_oneof![
            cstr(),
            (
                cstr(),
                any::<i32>(),
                proptest::collection::vec(any::<u8>(), 0..16)
            )
                .prop_map(|(m, n, d)| {
                    let mut b = m;
                    b.extend_from_slice(&n.to_be_bytes());
                    b.extend(d);
                    b
                })
        ]
        .boxed(),
        _ => Just(Vec::new()).boxed(),
    };
    prop_oneof![3 => shaped, 1 => random].boxed()
}

fn len_strategy() -> impl Strategy<Value = Len> {
    prop_oneof![
        4 => Just(Len::Exact),
        1 => (1usize..8).prop_map(Len::Truncated),
        1 => (1u32..100).prop_map(Len::Longer),
        1 => (1u32..8).prop_map(Len::Shorter),
        1 => (0u32..4).prop_map(Len::Tiny),
        1 => Just(Len::Huge),
        1 => Just(Len::Negative),
    ]
}

fn typed_frame() -> impl Strategy<Value = Frame> {
    let kinds = prop_oneof![
        Just(b'Q'),
        Just(b'P'),
        Just(b'B'),
        Just(b'E'),
        Just(b'D'),
        Just(b'C'),
        Just(b'H'),
        Just(b'S'),
        Just(b'X'),
        Just(b'd'),
        Just(b'c'),
        Just(b'f'),
        Just(b'p'),
        any::<u8>(),
    ];
    kinds.prop_flat_map(|k| {
        (body_for(k), len_strategy()).prop_map(move |(body, len)| Frame {
            kind: Some(k),
            body,
            len,
        })
    })
}

/// Startup-phase frames: startup messages, SSL/GSS/cancel requests, junk.
fn startup_frame() -> impl Strategy<Value = Frame> {
    let code = prop_oneof![
        Just(196_608u32),
        Just(196_610u32),
        Just(80_877_102u32),
        Just(80_877_103u32),
        Just(80_877_104u32),
        any::<u32>(),
    ];
    (
        code,
        proptest::collection::vec(any::<u8>(), 0..40),
        len_strategy(),
    )
        .prop_map(|(code, rest, len)| {
            let mut body = code.to_be_bytes().to_vec();
            body.extend(rest);
            Frame {
                kind: None,
                body,
                len,
            }
        })
}

/// What one fuzz connection sends.
fn script() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        // After a valid startup: typed messages.
        4 => proptest::collection::vec(typed_frame(), 1..6).prop_map(|fs| {
            let mut v = startup();
            for f in fs {
                v.extend(f.bytes());
            }
            v
        }),
        // The startup phase itself.
        1 => proptest::collection::vec(startup_frame(), 1..3).prop_map(|fs| {
            fs.iter().flat_map(Frame::bytes).collect()
        }),
        // Plain junk.
        1 => proptest::collection::vec(any::<u8>(), 0..200),
    ]
}

/// Send `bytes` on a fresh connection, half-close, read until the server
/// closes (or a generous while passes).
async fn send(addr: std::net::SocketAddr, bytes: &[u8]) {
    let Ok(mut s) = TcpStream::connect(addr).await else {
        return;
    };
    let _ = s.write_all(bytes).await;
    let _ = s.shutdown().await;
    let mut buf = vec![0u8; 8192];
    let _ = tokio::time::timeout(Duration::from_secs(10), async {
        while let Ok(n) = s.read(&mut buf).await {
            if n == 0 {
                break;
            }
        }
    })
    .await;
}

fn runtime() -> Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

fn start(rt: &Runtime) -> (tempfile::TempDir, Server) {
    let dir = tempfile::tempdir().unwrap();
    let db = Arc::new(Database::open(dir.path(), DbOptions::default()).unwrap());
    let cfg = ServerConfig {
        pg_addr: Some("127.0.0.1:0".parse().unwrap()),
        http_addr: Some("127.0.0.1:0".parse().unwrap()),
        max_request_bytes: 64 << 10,
        ..ServerConfig::default()
    };
    let server = rt.block_on(Server::start(db, cfg)).unwrap();
    (dir, server)
}

async fn still_answers(server: &Server) {
    let a = server.pg_addr().unwrap();
    let (c, conn) = tokio_postgres::connect(
        &format!("host={} port={} user=t dbname=silt", a.ip(), a.port()),
        tokio_postgres::NoTls,
    )
    .await
    .unwrap();
    tokio::spawn(conn);
    let r = c.query_one("SELECT 40 + 2", &[]).await.unwrap();
    assert_eq!(r.get::<_, i64>(0), 42);
}

#[test]
fn malformed_pgwire_frames_do_not_panic_or_grow() {
    let rt = runtime();
    let (_dir, server) = start(&rt);
    let addr = server.pg_addr().unwrap();
    rt.block_on(still_answers(&server));
    let panics = silt_server::panics::count();
    let rss = rss_kib();

    // The frame of the issue: a Parse of length 4 after a valid startup,
    // then the same with a Bind and an Execute of length 4.
    for kind in [b'P', b'B', b'E', b'D', b'C', b'Q', b'f', b'p'] {
        let mut v = startup();
        v.extend_from_slice(&[kind, 0, 0, 0, 4]);
        rt.block_on(send(addr, &v));
    }
    // The Parse of length 4 answers 08P01 before closing.
    let answer = rt.block_on(async {
        let mut s = TcpStream::connect(addr).await.unwrap();
        let mut v = startup();
        v.extend_from_slice(b"P\x00\x00\x00\x04");
        s.write_all(&v).await.unwrap();
        let mut out = Vec::new();
        let _ = tokio::time::timeout(Duration::from_secs(10), s.read_to_end(&mut out)).await;
        out
    });
    let text = String::from_utf8_lossy(&answer);
    assert!(text.contains("08P01"), "{text:?}");

    let mut runner = TestRunner::new(Config {
        cases: 96,
        failure_persistence: None,
        ..Config::default()
    });
    runner
        .run(&script(), |bytes| {
            rt.block_on(send(addr, &bytes));
            Ok(())
        })
        .unwrap();

    assert_eq!(
        silt_server::panics::count(),
        panics,
        "a server task panicked"
    );
    rt.block_on(still_answers(&server));
    let grown_mib = rss_kib().saturating_sub(rss) / 1024;
    assert!(grown_mib < 100, "RSS grew by {grown_mib} MiB");
    rt.block_on(server.shutdown()).unwrap();
}

/// A frontend message: type byte, length, body.
fn message(kind: u8, body: &[u8]) -> Vec<u8> {
    let mut v = vec![kind];
    v.extend_from_slice(&((body.len() + 4) as u32).to_be_bytes());
    v.extend_from_slice(body);
    v
}

/// The backend messages' type bytes in `bytes` (whole messages only).
fn kinds(bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut at = 0;
    while at + 5 <= bytes.len() {
        let len = u32::from_be_bytes([bytes[at + 1], bytes[at + 2], bytes[at + 3], bytes[at + 4]]);
        out.push(bytes[at]);
        at += 1 + len as usize;
    }
    out
}

/// Read what arrives within `wait` (until `until` is among the messages).
async fn read_for(s: &mut TcpStream, wait: Duration, until: u8) -> Vec<u8> {
    let mut out = Vec::new();
    let mut buf = vec![0u8; 8192];
    let _ = tokio::time::timeout(wait, async {
        while let Ok(n) = s.read(&mut buf).await {
            out.extend_from_slice(&buf[..n]);
            if n == 0 || kinds(&out).contains(&until) {
                break;
            }
        }
    })
    .await;
    out
}

#[test]
fn extended_protocol_replies_wait_for_flush_or_sync() {
    let rt = runtime();
    let (_dir, server) = start(&rt);
    let addr = server.pg_addr().unwrap();
    rt.block_on(async {
        let mut s = TcpStream::connect(addr).await.unwrap();
        s.write_all(&startup()).await.unwrap();
        let hello = read_for(&mut s, Duration::from_secs(10), b'Z').await;
        assert_eq!(kinds(&hello).last(), Some(&b'Z'), "{hello:?}");

        // Parse, Bind, Execute: nothing is written yet.
        let mut v = message(b'P', b"\0SELECT 40 + 2\0\0\0");
        v.extend(message(b'B', b"\0\0\0\0\0\0\0\0"));
        v.extend(message(b'E', b"\0\0\0\0\0"));
        s.write_all(&v).await.unwrap();
        let early = read_for(&mut s, Duration::from_millis(300), b'C').await;
        assert!(
            early.is_empty(),
            "replies before Flush: {:?}",
            kinds(&early)
        );

        // Flush: all four replies, in order.
        s.write_all(&message(b'H', b"")).await.unwrap();
        let got = read_for(&mut s, Duration::from_secs(10), b'C').await;
        assert_eq!(kinds(&got), b"12DC", "{got:?}");

        // Another Bind and Execute, then Sync: the rows and ReadyForQuery.
        let mut v = message(b'B', b"\0\0\0\0\0\0\0\0");
        v.extend(message(b'E', b"\0\0\0\0\0"));
        v.extend(message(b'S', b""));
        s.write_all(&v).await.unwrap();
        let got = read_for(&mut s, Duration::from_secs(10), b'Z').await;
        assert_eq!(kinds(&got), b"2DCZ", "{got:?}");
    });
    rt.block_on(server.shutdown()).unwrap();
}

#[test]
fn malformed_http_bodies_are_refused() {
    let rt = runtime();
    let (_dir, server) = start(&rt);
    let url = format!("http://{}/query/service", server.http_addr().unwrap());
    rt.block_on(async {
        let client = http_client::client();
        let post = |ctype: &'static str, body: Vec<u8>| {
            let client = client.clone();
            let url = url.clone();
            async move {
                let r = client
                    .post(&url)
                    .header("content-type", ctype)
                    .body(body)
                    .send()
                    .await
                    .unwrap();
                let status = r.status().as_u16();
                (status, r.text().await.unwrap_or_default())
            }
        };
        let (s, b) = post("application/json", b"{\"statement\": ".to_vec()).await;
        assert_eq!(s, 400, "{b}");
        assert!(b.contains("08P01"), "{b}");
        let (s, b) = post("application/json", b"[1, 2, 3]".to_vec()).await;
        assert_eq!(s, 400, "{b}");
        let (s, b) = post("application/json", b"{\"statement\": 7}".to_vec()).await;
        assert_eq!(s, 400, "{b}");
        let (s, b) = post("text/plain", vec![b'S', 0xff, 0xfe, b'x']).await;
        assert_eq!(s, 400, "{b}");
        assert!(b.contains("UTF-8"), "{b}");
        let (s, b) = post(
            "application/xml",
            b"<statement>SELECT 1</statement>".to_vec(),
        )
        .await;
        assert_eq!(s, 400, "{b}");
        let (s, b) = post(
            "application/x-www-form-urlencoded",
            b"statement=%ZZ%".to_vec(),
        )
        .await;
        assert!(s == 400 || s == 200, "{s} {b}");
        // Over --max-request-bytes (64 KiB here).
        let (s, _) = post("text/plain", vec![b'x'; 200 << 10]).await;
        assert_eq!(s, 413);
        // A timeout that is not one.
        let (s, b) = post(
            "application/json",
            br#"{"statement": "SELECT 1 AS one", "timeout": {"s": 1}}"#.to_vec(),
        )
        .await;
        assert_eq!(s, 400, "{b}");
        // Still fine.
        let (s, b) = post("text/plain", b"SELECT 1 AS one".to_vec()).await;
        assert_eq!(s, 200, "{b}");
        assert!(b.contains("\"one\":1"), "{b}");
    });
    rt.block_on(server.shutdown()).unwrap();
}
