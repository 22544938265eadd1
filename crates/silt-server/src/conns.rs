//! HTTP connections: a cap on how many are open, and an idle timeout.
//!
//! [`HttpListener`] is the `axum` listener of the HTTP front end. Past
//! `--max-connections` open connections it answers a new one itself with
//! `503 Service Unavailable` (SQLSTATE `53300` in the body) and closes it;
//! at most [`MAX_REFUSING`] such answers are in progress at once, more
//! connections are closed at once. A connection that has not sent or
//! received a byte for `--idle-timeout` while no request of it is being
//! handled (an idle keep-alive connection, or a client that stalls while
//! sending a request's head) is closed.

use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::extract::Request;
use axum::extract::connect_info::{ConnectInfo, Connected};
use axum::middleware::Next;
use axum::response::Response;
use axum::serve::{IncomingStream, Listener};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::time::{Instant, Sleep};

use crate::limits::{ConnCount, ConnSlot};

/// At most this many over-the-cap connections are being answered at once.
pub const MAX_REFUSING: usize = 64;

/// The HTTP listener (see the module doc).
pub struct HttpListener {
    inner: TcpListener,
    count: Arc<ConnCount>,
    max: usize,
    idle: Duration,
    refusing: Arc<AtomicUsize>,
}

impl HttpListener {
    pub fn new(inner: TcpListener, max: usize, idle: Duration) -> HttpListener {
        HttpListener {
            inner,
            count: Arc::new(ConnCount::default()),
            max,
            idle,
            refusing: Arc::new(AtomicUsize::new(0)),
        }
    }

    /// The count of open connections.
    pub fn count(&self) -> Arc<ConnCount> {
        self.count.clone()
    }
}

impl Listener for HttpListener {
    type Io = HttpConn;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (HttpConn, SocketAddr) {
        loop {
            let (tcp, addr) = match self.inner.accept().await {
                Ok(c) => c,
                Err(e) => {
                    // Out of file descriptors and the like: wait a little.
                    tracing::warn!("accepting an HTTP connection: {e}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            };
            let _ = tcp.set_nodelay(true);
            match self.count.try_open(self.max) {
                Some(slot) => return (HttpConn::new(tcp, slot, self.idle), addr),
                None => {
                    let refusing = self.refusing.clone();
                    if refusing.fetch_add(1, Ordering::AcqRel) >= MAX_REFUSING {
                        refusing.fetch_sub(1, Ordering::AcqRel);
                        drop(tcp);
                        continue;
                    }
                    let max = self.max;
                    tokio::spawn(async move {
                        refuse(tcp, max).await;
                        refusing.fetch_sub(1, Ordering::AcqRel);
                    });
                }
            }
        }
    }

    fn local_addr(&self) -> io::Result<SocketAddr> {
        self.inner.local_addr()
    }
}

/// Answer a connection over the cap with 503, after reading its request
/// head (so that the client reads the answer rather than a reset).
async fn refuse(mut tcp: TcpStream, max: usize) {
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

/// The connection a request came on (`axum`'s connect info).
#[derive(Clone, Debug)]
pub struct ConnActivity(pub Arc<Activity>);

impl Connected<IncomingStream<'_, HttpListener>> for ConnActivity {
    fn connect_info(stream: IncomingStream<'_, HttpListener>) -> Self {
        ConnActivity(stream.io().activity.clone())
    }
}

/// Middleware: the connection has a request in flight while it is handled.
pub async fn track(req: Request, next: Next) -> Response {
    let guard = req
        .extensions()
        .get::<ConnectInfo<ConnActivity>>()
        .map(|c| {
            c.0.0.in_flight.fetch_add(1, Ordering::AcqRel);
            InFlight(c.0.0.clone())
        });
    let r = next.run(req).await;
    drop(guard);
    r
}

/// An HTTP connection: counted, and closed when idle.
pub struct HttpConn {
    tcp: TcpStream,
    _slot: ConnSlot,
    activity: Arc<Activity>,
    idle: Duration,
    timer: Option<Pin<Box<Sleep>>>,
}

impl HttpConn {
    fn new(tcp: TcpStream, slot: ConnSlot, idle: Duration) -> HttpConn {
        HttpConn {
            tcp,
            _slot: slot,
            activity: Arc::new(Activity::default()),
            idle,
            timer: (!idle.is_zero()).then(|| Box::pin(tokio::time::sleep(idle))),
        }
    }

    fn touch(&mut self) {
        if let Some(t) = self.timer.as_mut() {
            t.as_mut().reset(Instant::now() + self.idle);
        }
    }
}

impl AsyncRead for HttpConn {
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
                    while t.as_mut().poll(cx).is_ready() {
                        if !busy {
                            // End of stream: hyper closes the connection.
                            return Poll::Ready(Ok(()));
                        }
                        t.as_mut().reset(Instant::now() + idle);
                    }
                }
                Poll::Pending
            }
        }
    }
}

impl AsyncWrite for HttpConn {
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
