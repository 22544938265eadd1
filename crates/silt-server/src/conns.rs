//! HTTP connections: a cap on how many are open, and an idle timeout.
//!
//! [`HttpConns`] admits the HTTP front end's connections. Past
//! `--max-connections` open connections a new one is answered with
//! `503 Service Unavailable` (SQLSTATE `53300` in the body) and closes it;
//! at most [`MAX_REFUSING`] such answers are in progress at once, more
//! connections are closed at once. A connection that has not sent or
//! received a byte for `--idle-timeout` while no request of it is being
//! handled (an idle keep-alive connection, or a client that stalls while
//! sending a request's head) is closed.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::extract::Request;
use axum::middleware::Next;
use axum::response::Response;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::time::Instant;

use crate::idle::IdleTimer;
use crate::limits::{ConnCount, ConnSlot};

/// At most this many over-the-cap connections are being answered at once.
pub const MAX_REFUSING: usize = 64;

/// The HTTP front end's connections: how many are open, and how many are
/// being refused.
#[derive(Debug)]
pub struct HttpConns {
    count: Arc<ConnCount>,
    max: usize,
    idle: Duration,
    refusing: Arc<AtomicUsize>,
}

/// What to do with a new connection.
pub enum Admission {
    /// Serve it: it holds its place under the cap while open.
    Serve(ConnSlot),
    /// Answer it 503 (see [`refuse`]); call [`Refusing::done`]-by-drop.
    Refuse(Refusing),
    /// Too many refusals in progress: close it at once.
    Drop,
}

/// A refusal in progress (counted until dropped).
pub struct Refusing(Arc<AtomicUsize>);

impl Drop for Refusing {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

impl HttpConns {
    pub fn new(max: usize, idle: Duration) -> HttpConns {
        HttpConns {
            count: Arc::new(ConnCount::default()),
            max,
            idle,
            refusing: Arc::new(AtomicUsize::new(0)),
        }
    }

    /// The cap, for the refusal's message.
    pub fn max(&self) -> usize {
        self.max
    }

    /// Admit a new connection, or say how to refuse it.
    pub fn admit(&self) -> Admission {
        match self.count.try_open(self.max) {
            Some(slot) => Admission::Serve(slot),
            None => {
                if self.refusing.fetch_add(1, Ordering::AcqRel) >= MAX_REFUSING {
                    self.refusing.fetch_sub(1, Ordering::AcqRel);
                    Admission::Drop
                } else {
                    Admission::Refuse(Refusing(self.refusing.clone()))
                }
            }
        }
    }

    /// Wrap an admitted connection's stream (after TLS) with its idle timer.
    pub fn wrap<S>(&self, io: S, slot: ConnSlot) -> HttpConn<S> {
        HttpConn::new(io, slot, self.idle)
    }
}

/// Answer a connection over the cap with 503, after reading its request
/// head (so that the client reads the answer rather than a reset).
pub async fn refuse<S: AsyncRead + AsyncWrite + Unpin>(mut tcp: S, max: usize) {
    let read_head = async {
        let mut buf = [0u8; 4096];
        let mut tail: Vec<u8> = Vec::new();
        let mut seen = 0usize;
        loop {
            match tcp.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => {
                    seen += n;
                    tail.extend_from_slice(&buf[..n]);
                    if tail.windows(4).any(|w| w == b"\r\n\r\n") || seen > 64 * 1024 {
                        return;
                    }
                    let keep = tail.len().saturating_sub(3);
                    tail.drain(..keep);
                }
            }
        }
    };
    let _ = tokio::time::timeout(Duration::from_secs(2), read_head).await;
    let body = format!(
        "{{\"status\":\"fatal\",\"errors\":[{{\"code\":\"53300\",\"msg\":\"too many connections ({max} open, --max-connections); retry later\"}}]}}\n"
    );
    let head = format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\ncontent-length: {}\r\nretry-after: 1\r\nconnection: close\r\n\r\n",
        body.len()
    );
    let answer = async {
        tcp.write_all(head.as_bytes()).await?;
        tcp.write_all(body.as_bytes()).await?;
        tcp.shutdown().await?;
        // Read what is left of the request so that closing does not reset
        // the connection before the client read the answer.
        let mut sink = [0u8; 4096];
        while tcp.read(&mut sink).await? > 0 {}
        Ok::<(), io::Error>(())
    };
    let _ = tokio::time::timeout(Duration::from_secs(2), answer).await;
}

/// What the idle timer of a connection needs to know about its requests.
#[derive(Debug, Default)]
pub struct Activity {
    in_flight: AtomicUsize,
}

/// A request being handled on a connection.
pub struct InFlight(Arc<Activity>);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::AcqRel);
    }
}

/// The connection a request came on (a request extension).
#[derive(Clone, Debug)]
pub struct ConnActivity(pub Arc<Activity>);

/// Middleware: the connection has a request in flight while it is handled.
pub async fn track(req: Request, next: Next) -> Response {
    let guard = req.extensions().get::<ConnActivity>().map(|c| {
        c.0.in_flight.fetch_add(1, Ordering::AcqRel);
        InFlight(c.0.clone())
    });
    let r = next.run(req).await;
    drop(guard);
    r
}

/// An HTTP connection: counted, and closed when idle.
pub struct HttpConn<S> {
    tcp: S,
    _slot: ConnSlot,
    activity: Arc<Activity>,
    idle: Duration,
    /// The idle timer (see [`crate::idle`]), and when the connection last
    /// sent or received.
    timer: Option<IdleTimer>,
    last: Instant,
}

impl<S> HttpConn<S> {
    fn new(tcp: S, slot: ConnSlot, idle: Duration) -> HttpConn<S> {
        HttpConn {
            tcp,
            _slot: slot,
            activity: Arc::new(Activity::default()),
            idle,
            timer: (!idle.is_zero()).then(|| {
                let mut t = IdleTimer::new();
                t.set(Instant::now() + idle);
                t
            }),
            last: Instant::now(),
        }
    }

    /// What the connection's requests carry (see [`track`]).
    pub fn activity(&self) -> ConnActivity {
        ConnActivity(self.activity.clone())
    }

    fn touch(&mut self) {
        if self.timer.is_some() {
            self.last = Instant::now();
        }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for HttpConn<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        match Pin::new(&mut this.tcp).poll_read(cx, buf) {
            Poll::Ready(r) => {
                this.touch();
                Poll::Ready(r)
            }
            Poll::Pending => {
                let idle = this.idle;
                let busy = this.activity.in_flight.load(Ordering::Acquire) > 0;
                if let Some(t) = this.timer.as_mut() {
                    while t.poll_fired(cx) {
                        let now = Instant::now();
                        let due = this.last + idle;
                        if !busy && now >= due {
                            // End of stream: hyper closes the connection.
                            return Poll::Ready(Ok(()));
                        }
                        t.set(if busy { now + idle } else { due });
                    }
                }
                Poll::Pending
            }
        }
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for HttpConn<S> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let r = Pin::new(&mut this.tcp).poll_write(cx, buf);
        if r.is_ready() {
            this.touch();
        }
        r
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().tcp).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().tcp).poll_shutdown(cx)
    }
}
