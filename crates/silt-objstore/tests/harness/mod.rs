//! What the object storage tests start: a real S3-compatible server
//! (moto's, from PyPI; `scripts/test-deps.sh` installs it into
//! `.test-tools/moto`) on a loopback port, and a TCP proxy in front of it
//! that injects latency, 503 answers and torn requests.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Whether the S3 tests are to be skipped (`SILT_SKIP_S3=1`).
pub fn skip() -> bool {
    if std::env::var_os("SILT_SKIP_S3").is_some() {
        eprintln!("SILT_SKIP_S3 set: skipping an S3 test");
        return true;
    }
    false
}

fn moto_binary() -> PathBuf {
    if let Some(p) = std::env::var_os("SILT_MOTO_SERVER") {
        return PathBuf::from(p);
    }
    let p =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../.test-tools/moto/bin/moto_server");
    assert!(
        p.exists(),
        "moto's S3 server is not installed at {}: run `bash scripts/test-deps.sh` (or set SILT_MOTO_SERVER, or SILT_SKIP_S3=1 to skip)",
        p.display()
    );
    p
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free loopback port")
}

/// One HTTP/1.1 request without a body; the status code.
fn http(port: u16, method: &str, path: &str) -> std::io::Result<u16> {
    let mut s = TcpStream::connect(("127.0.0.1", port))?;
    s.set_read_timeout(Some(Duration::from_secs(5)))?;
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    )?;
    let mut line = String::new();
    BufReader::new(s).read_line(&mut line)?;
    line.split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| std::io::Error::other(format!("bad status line {line:?}")))
}

/// A moto S3 server on a loopback port, killed when dropped.
pub struct Moto {
    child: Child,
    pub port: u16,
}

impl Moto {
    pub fn start() -> Moto {
        let port = free_port();
        let child = Command::new(moto_binary())
            .args(["-H", "127.0.0.1", "-p", &port.to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start moto_server");
        let m = Moto { child, port };
        let t0 = Instant::now();
        while http(port, "GET", "/").is_err() {
            assert!(
                t0.elapsed() < Duration::from_secs(30),
                "moto_server did not answer on port {port} within 30 s"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        m
    }

    /// Create bucket `name`.
    pub fn bucket(&self, name: &str) {
        let code = http(self.port, "PUT", &format!("/{name}")).expect("create bucket");
        assert_eq!(code, 200, "creating bucket {name}");
    }
}

impl Drop for Moto {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A URL for `bucket/prefix` on `port`, with the settings the tests need
/// in its query (moto accepts any credentials). No connection reuse, so
/// that every request crosses a proxy on a connection of its own.
pub fn url(port: u16, bucket: &str, prefix: &str) -> String {
    format!(
        "s3://{bucket}/{prefix}?endpoint=http://127.0.0.1:{port}&access_key_id=test&secret_access_key=test&region=us-east-1&pool_max_idle_per_host=0"
    )
}

/// The faults a proxy injects, per connection (= per request, since
/// clients do not reuse connections).
#[derive(Clone, Copy, Debug, Default)]
pub struct Faults {
    /// Added before a request is forwarded.
    pub latency: Duration,
    /// Per mille of requests answered `503 Slow Down` without reaching S3.
    pub unavailable: u32,
    /// Per mille of requests cut after part of their bytes (a torn upload).
    pub torn: u32,
}

/// A TCP proxy to a local port that injects [`Faults`].
pub struct FaultProxy {
    pub port: u16,
    faults: Arc<Mutex<Faults>>,
    stop: Arc<AtomicBool>,
    pub injected: Arc<AtomicU64>,
}

impl FaultProxy {
    pub fn start(upstream: u16, faults: Faults, seed: u64) -> FaultProxy {
        let l = TcpListener::bind("127.0.0.1:0").expect("bind proxy");
        let port = l.local_addr().expect("proxy address").port();
        let faults = Arc::new(Mutex::new(faults));
        let stop = Arc::new(AtomicBool::new(false));
        let injected = Arc::new(AtomicU64::new(0));
        let (f, s, inj) = (faults.clone(), stop.clone(), injected.clone());
        std::thread::spawn(move || {
            let mut rng = seed | 1;
            for conn in l.incoming() {
                if s.load(Ordering::Relaxed) {
                    break;
                }
                let Ok(client) = conn else { continue };
                // xorshift: which fault this connection gets.
                rng ^= rng << 13;
                rng ^= rng >> 7;
                rng ^= rng << 17;
                let draw = (rng % 1000) as u32;
                let cut = 64 + (rng >> 20) % 4096;
                let fl = *f.lock().expect("faults");
                let inj = inj.clone();
                std::thread::spawn(move || serve(client, upstream, fl, draw, cut as usize, &inj));
            }
        });
        FaultProxy {
            port,
            faults,
            stop,
            injected,
        }
    }

    pub fn set(&self, f: Faults) {
        *self.faults.lock().expect("faults") = f;
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        let _ = TcpStream::connect(("127.0.0.1", self.port));
    }
}

fn serve(mut client: TcpStream, upstream: u16, f: Faults, draw: u32, cut: usize, inj: &AtomicU64) {
    if draw < f.unavailable {
        inj.fetch_add(1, Ordering::Relaxed);
        let mut buf = [0u8; 4096];
        let _ = client.set_read_timeout(Some(Duration::from_millis(200)));
        let _ = client.read(&mut buf);
        let body = "<Error><Code>SlowDown</Code><Message>injected</Message></Error>";
        let _ = write!(
            client,
            "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/xml\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        );
        let _ = client.shutdown(Shutdown::Both);
        return;
    }
    if !f.latency.is_zero() {
        std::thread::sleep(f.latency);
    }
    let Ok(mut server) = TcpStream::connect(("127.0.0.1", upstream)) else {
        return;
    };
    if draw < f.unavailable + f.torn {
        // Forward the first `cut` bytes of the request, then drop both ends.
        // A request shorter than `cut` is cut where it ends (the client
        // waits for an answer that never comes).
        inj.fetch_add(1, Ordering::Relaxed);
        let _ = client.set_read_timeout(Some(Duration::from_millis(50)));
        let mut left = cut;
        let mut buf = [0u8; 4096];
        while left > 0 {
            let n = match client.read(&mut buf[..left.min(4096)]) {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            if server.write_all(&buf[..n]).is_err() {
                break;
            }
            left -= n;
        }
        let _ = server.shutdown(Shutdown::Both);
        let _ = client.shutdown(Shutdown::Both);
        return;
    }
    let (Ok(mut c2), Ok(mut s2)) = (client.try_clone(), server.try_clone()) else {
        return;
    };
    let up = std::thread::spawn(move || {
        let _ = std::io::copy(&mut c2, &mut s2);
        let _ = s2.shutdown(Shutdown::Write);
    });
    let _ = std::io::copy(&mut server, &mut client);
    let _ = client.shutdown(Shutdown::Write);
    let _ = up.join();
}
