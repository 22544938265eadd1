//! The peer of `hydra`: a 3-member etcd cluster on loopback (Debian's
//! `etcd-server`, 3.4), each member its own process and data directory;
//! a gRPC client of `etcdserverpb.KV/Put` ([`EtcdGrpc`]) for the timed
//! writes, and a small HTTP/1.1 keep-alive client ([`EtcdHttp`]) of
//! `/metrics` (Prometheus text) and the JSON gateway's
//! `/v3/maintenance/status`.
//!
//! The puts are etcd's native gRPC, not its JSON gateway: through the
//! gateway (JSON, base64, then a loopback gRPC call inside the member) a
//! 64 KiB put from 16 clients took twice as long as the member's own gRPC
//! handling of it, which would have measured the gateway rather than
//! etcd. The Rust gRPC client crate (`etcd-client`) generates its code with
//! `protoc` at build time, which the harness does not require; a
//! `PutRequest` has two fields that matter (key = 1, value = 2, both bytes),
//! so [`EtcdGrpc`] encodes them itself and speaks gRPC over `h2`. The
//! workload still reports the members' own gRPC `Put` handling time
//! (`--metrics extensive`) beside the client-observed latency, and the CPU
//! the client spends per write.

use std::collections::HashMap;
use std::fs::OpenOptions;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use bytes::Bytes;

/// Upper bound of a request: 64 KiB blocks plus the key and the gRPC framing, with room.
pub const MAX_REQUEST_BYTES: u64 = 2 << 20;
/// Backend quota: the largest etcd recommends (8 GiB), far above what a run writes.
pub const QUOTA_BACKEND_BYTES: u64 = 8 << 30;
/// Keep one minute of history (overwritten blocks' old revisions are compacted away).
pub const AUTO_COMPACTION: (&str, &str) = ("periodic", "1m");

/// `etcd --version`'s first line, if etcd is installed.
pub fn version() -> Option<String> {
    let out = Command::new("etcd").arg("--version").output().ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    text.lines().next().map(|l| l.trim().to_string())
}

/// A member's arguments.
#[derive(Clone)]
struct Member {
    name: String,
    dir: PathBuf,
    client: SocketAddr,
    peer: SocketAddr,
}

pub struct EtcdCluster {
    members: Vec<Member>,
    procs: Vec<Option<Child>>,
    initial_cluster: String,
    token: String,
    logs: Vec<PathBuf>,
}

impl EtcdCluster {
    pub fn start(dir: &Path) -> Result<EtcdCluster> {
        let loopback = |port: u16| SocketAddr::from(([127, 0, 0, 1], port));
        let mut members = Vec::new();
        for i in 1..=3 {
            members.push(Member {
                name: format!("m{i}"),
                dir: dir.join(format!("m{i}")),
                client: loopback(crate::util::free_port()?),
                peer: loopback(crate::util::free_port()?),
            });
        }
        let initial_cluster = members
            .iter()
            .map(|m| format!("{}=http://{}", m.name, m.peer))
            .collect::<Vec<_>>()
            .join(",");
        let logs = members
            .iter()
            .map(|m| dir.join(format!("{}.log", m.name)))
            .collect();
        let mut c = EtcdCluster {
            members,
            procs: vec![None, None, None],
            initial_cluster,
            token: format!("silt-bench-{}", std::process::id()),
            logs,
        };
        for i in 0..3 {
            c.spawn(i, "new")?;
        }
        // Every member answers, and they agree on a leader.
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if c.leader().is_ok() && (0..3).all(|i| c.status(i).is_ok()) {
                return Ok(c);
            }
            for (i, p) in c.procs.iter_mut().enumerate() {
                if let Some(p) = p
                    && let Ok(Some(st)) = p.try_wait()
                {
                    bail!(
                        "etcd member m{} exited at start with {st}:\n{}",
                        i + 1,
                        super::hydra_node::log_tail(&c.logs[i])
                    );
                }
            }
            if Instant::now() > deadline {
                bail!("the etcd cluster had no leader within 30 s");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn spawn(&mut self, i: usize, state: &str) -> Result<()> {
        let m = self.members.get(i).context("no such member")?.clone();
        let log = self.logs.get(i).context("no such member")?;
        let stderr = OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
            .with_context(|| format!("opening {}", log.display()))?;
        let client_url = format!("http://{}", m.client);
        let peer_url = format!("http://{}", m.peer);
        let child = Command::new("etcd")
            .args(["--name", &m.name])
            .arg("--data-dir")
            .arg(&m.dir)
            .args(["--listen-client-urls", &client_url])
            .args(["--advertise-client-urls", &client_url])
            .args(["--listen-peer-urls", &peer_url])
            .args(["--initial-advertise-peer-urls", &peer_url])
            .args(["--initial-cluster", &self.initial_cluster])
            .args(["--initial-cluster-state", state])
            .args(["--initial-cluster-token", &self.token])
            .args(["--quota-backend-bytes", &QUOTA_BACKEND_BYTES.to_string()])
            .args(["--max-request-bytes", &MAX_REQUEST_BYTES.to_string()])
            .args(["--auto-compaction-mode", AUTO_COMPACTION.0])
            .args(["--auto-compaction-retention", AUTO_COMPACTION.1])
            .args(["--metrics", "extensive"])
            .args(["--logger", "zap", "--log-level", "warn"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::from(stderr))
            .spawn()
            .context("starting etcd (Debian package etcd-server; bench/setup.sh installs it)")?;
        if let Some(slot) = self.procs.get_mut(i) {
            *slot = Some(child);
        }
        Ok(())
    }

    /// The pids of the running members.
    pub fn pids(&self) -> Vec<u32> {
        self.procs.iter().flatten().map(Child::id).collect()
    }

    pub fn client_addr(&self, i: usize) -> Option<SocketAddr> {
        self.members.get(i).map(|m| m.client)
    }

    /// Member `i`'s `/v3/maintenance/status`.
    pub fn status(&self, i: usize) -> Result<Status> {
        let addr = self.client_addr(i).context("no such member")?;
        let mut c = EtcdHttp::connect(addr, Duration::from_secs(2))?;
        c.status()
    }

    /// The index of the leader member (asked of the running members).
    pub fn leader(&self) -> Result<usize> {
        let mut ids = HashMap::new();
        let mut leader = None;
        for i in 0..self.members.len() {
            if self.procs.get(i).is_none_or(Option::is_none) {
                continue;
            }
            let Ok(s) = self.status(i) else { continue };
            ids.insert(s.member_id, i);
            if s.leader != 0 {
                leader = Some(s.leader);
            }
        }
        leader
            .and_then(|l| ids.get(&l).copied())
            .context("no etcd leader known")
    }

    /// The `/metrics` text (Prometheus) of each running member.
    pub fn metrics(&self) -> Result<Vec<String>> {
        let mut out = Vec::new();
        for (i, m) in self.members.iter().enumerate() {
            if self.procs.get(i).is_none_or(Option::is_none) {
                continue;
            }
            let mut c = EtcdHttp::connect(m.client, Duration::from_secs(5))?;
            out.push(c.get_text("/metrics")?);
        }
        Ok(out)
    }

    /// SIGKILL member `i`.
    pub fn kill(&mut self, i: usize) {
        if let Some(mut p) = self.procs.get_mut(i).and_then(Option::take) {
            let _ = p.kill();
            let _ = p.wait();
        }
    }

    /// Start member `i` again on its data directory.
    pub fn restart(&mut self, i: usize) -> Result<()> {
        self.spawn(i, "existing")
    }

    /// SIGTERM every member and wait (SIGKILL after 10 s).
    pub fn stop(mut self) {
        self.stop_all();
    }

    fn stop_all(&mut self) {
        for p in self.procs.iter_mut().filter_map(Option::take) {
            stop_child(p);
        }
    }
}

impl Drop for EtcdCluster {
    fn drop(&mut self) {
        self.stop_all();
    }
}

fn stop_child(mut p: Child) {
    if let Ok(pid) = i32::try_from(p.id()) {
        // SAFETY: a signal to our own child, which we have not reaped yet.
        unsafe {
            libc::kill(pid, libc::SIGTERM);
        }
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if let Ok(Some(_)) = p.try_wait() {
            return;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let _ = p.kill();
    let _ = p.wait();
}

/// The sum of every series named `name` (no labels, or any labels) in a
/// Prometheus text exposition.
pub fn metric(text: &str, name: &str) -> f64 {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let rest = l.strip_prefix(name)?;
            if !(rest.starts_with(' ') || rest.starts_with('{')) {
                return None;
            }
            l.rsplit(' ').next()?.parse::<f64>().ok()
        })
        .sum()
}

/// The series of `name` whose labels contain `label` (e.g. `grpc_method="Put"`).
pub fn metric_with(text: &str, name: &str, label: &str) -> f64 {
    text.lines()
        .filter(|l| l.starts_with(name) && l[name.len()..].starts_with('{') && l.contains(label))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// What `/v3/maintenance/status` says.
#[derive(Debug, Clone, Copy)]
pub struct Status {
    pub member_id: u64,
    pub leader: u64,
    /// The raft log's committed index.
    pub raft_index: u64,
    /// The index applied to the member's state machine.
    pub applied_index: u64,
}

/// One keep-alive HTTP/1.1 connection to a member's client port.
pub struct EtcdHttp {
    w: TcpStream,
    r: BufReader<TcpStream>,
    host: String,
    req: Vec<u8>,
    body: Vec<u8>,
}

impl EtcdHttp {
    pub fn connect(addr: SocketAddr, timeout: Duration) -> Result<EtcdHttp> {
        let s = TcpStream::connect_timeout(&addr, Duration::from_secs(2))
            .with_context(|| format!("connecting to etcd at {addr}"))?;
        s.set_nodelay(true)?;
        s.set_read_timeout(Some(timeout))?;
        Ok(EtcdHttp {
            w: s.try_clone()?,
            r: BufReader::new(s),
            host: addr.to_string(),
            req: Vec::new(),
            body: Vec::new(),
        })
    }

    /// One request; returns (status code, body).
    fn request(&mut self, method: &str, path: &str, body: &[u8]) -> Result<(u16, &[u8])> {
        self.req.clear();
        write!(
            self.req,
            "{method} {path} HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
            self.host,
            body.len()
        )?;
        self.req.extend_from_slice(body);
        self.w.write_all(&self.req)?;
        let mut line = String::new();
        if self.r.read_line(&mut line)? == 0 {
            bail!("etcd closed the connection");
        }
        let code: u16 = line
            .split_whitespace()
            .nth(1)
            .and_then(|c| c.parse().ok())
            .with_context(|| format!("bad HTTP status line {line:?}"))?;
        let mut length: Option<usize> = None;
        let mut chunked = false;
        loop {
            line.clear();
            if self.r.read_line(&mut line)? == 0 {
                bail!("etcd closed the connection in the headers");
            }
            let l = line.trim_end();
            if l.is_empty() {
                break;
            }
            if let Some((k, v)) = l.split_once(':') {
                let (k, v) = (k.trim(), v.trim());
                if k.eq_ignore_ascii_case("content-length") {
                    length = Some(v.parse().with_context(|| format!("bad length {v:?}"))?);
                } else if k.eq_ignore_ascii_case("transfer-encoding")
                    && v.eq_ignore_ascii_case("chunked")
                {
                    chunked = true;
                }
            }
        }
        self.body.clear();
        if chunked {
            loop {
                line.clear();
                self.r.read_line(&mut line)?;
                let size_hex = line.trim().split(';').next().unwrap_or("");
                let size = usize::from_str_radix(size_hex, 16)
                    .with_context(|| format!("bad chunk size {line:?}"))?;
                if size == 0 {
                    // Trailers, then the empty line.
                    loop {
                        line.clear();
                        if self.r.read_line(&mut line)? == 0 || line.trim().is_empty() {
                            break;
                        }
                    }
                    break;
                }
                let at = self.body.len();
                self.body.resize(at + size, 0);
                self.r.read_exact(&mut self.body[at..])?;
                line.clear();
                self.r.read_line(&mut line)?;
            }
        } else if let Some(n) = length {
            self.body.resize(n, 0);
            self.r.read_exact(&mut self.body)?;
        } else {
            bail!("an etcd response without a length");
        }
        Ok((code, &self.body))
    }

    fn post_json(&mut self, path: &str, body: &[u8]) -> Result<serde_json::Value> {
        let (code, text) = self.request("POST", path, body)?;
        if code != 200 {
            bail!(
                "etcd answered {code} to {path}: {}",
                String::from_utf8_lossy(text)
            );
        }
        serde_json::from_slice(text).with_context(|| format!("etcd's answer to {path}"))
    }

    pub fn get_text(&mut self, path: &str) -> Result<String> {
        let (code, text) = self.request("GET", path, b"")?;
        if code != 200 {
            bail!("etcd answered {code} to GET {path}");
        }
        Ok(String::from_utf8_lossy(text).into_owned())
    }

    pub fn status(&mut self) -> Result<Status> {
        let v = self.post_json("/v3/maintenance/status", b"{}")?;
        // The gateway writes 64-bit integers as strings, in camelCase.
        let num = |v: &serde_json::Value| -> Option<u64> {
            match v {
                serde_json::Value::String(s) => s.parse().ok(),
                serde_json::Value::Number(n) => n.as_u64(),
                _ => None,
            }
        };
        let field = |name: &str| v.get(name).and_then(num);
        let member_id = v
            .get("header")
            .and_then(|h| h.get("member_id"))
            .and_then(num)
            .context("status without header.member_id")?;
        let raft_index = field("raftIndex").context("status without raftIndex")?;
        Ok(Status {
            member_id,
            leader: field("leader").unwrap_or(0),
            raft_index,
            applied_index: field("raftAppliedIndex").unwrap_or(raft_index),
        })
    }
}

/// A protobuf length-delimited field: tag, length (varint), bytes.
fn pb_bytes(out: &mut Vec<u8>, field: u32, data: &[u8]) {
    pb_varint(out, u64::from(field << 3 | 2));
    pb_varint(out, data.len() as u64);
    out.extend_from_slice(data);
}

fn pb_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8 & 0x7f) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// A gRPC message: uncompressed flag, length (u32 big-endian), the
/// protobuf `PutRequest { key = 1; value = 2 }`.
fn put_message(out: &mut Vec<u8>, key: &[u8], value: &[u8]) {
    out.clear();
    out.extend_from_slice(&[0; 5]);
    pb_bytes(out, 1, key);
    pb_bytes(out, 2, value);
    let len = (out.len() - 5) as u32;
    out[1..5].copy_from_slice(&len.to_be_bytes());
}

/// One gRPC channel (an HTTP/2 connection) to a member, used by one client
/// thread: unary `etcdserverpb.KV/Put` calls, one at a time.
pub struct EtcdGrpc {
    rt: tokio::runtime::Runtime,
    send: h2::client::SendRequest<Bytes>,
    uri: http::Uri,
    msg: Vec<u8>,
}

impl EtcdGrpc {
    pub fn connect(addr: SocketAddr) -> Result<EtcdGrpc> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .context("a client runtime")?;
        let send = rt
            .block_on(async {
                let tcp = tokio::net::TcpStream::connect(addr).await?;
                tcp.set_nodelay(true)?;
                let (send, conn) = h2::client::handshake(tcp).await?;
                tokio::spawn(async move {
                    let _ = conn.await;
                });
                anyhow::Ok(send)
            })
            .with_context(|| format!("connecting to etcd's gRPC at {addr}"))?;
        let uri: http::Uri = format!("http://{addr}/etcdserverpb.KV/Put")
            .parse()
            .context("the Put URI")?;
        Ok(EtcdGrpc {
            rt,
            send,
            uri,
            msg: Vec::new(),
        })
    }

    /// `PUT key value`, answered once committed by a majority (each having
    /// fsynced its WAL) and applied at this member.
    pub fn put(&mut self, key: &[u8], value: &[u8]) -> Result<()> {
        put_message(&mut self.msg, key, value);
        let data = Bytes::copy_from_slice(&self.msg);
        let req = http::Request::builder()
            .method("POST")
            .uri(self.uri.clone())
            .header("content-type", "application/grpc")
            .header("te", "trailers")
            .body(())
            .context("a gRPC request")?;
        let send = self.send.clone();
        self.rt.block_on(async move {
            let mut send = send.ready().await?;
            let (resp, mut stream) = send.send_request(req, false)?;
            stream.send_data(data, true)?;
            let resp = resp.await?;
            if resp.status() != http::StatusCode::OK {
                bail!("etcd answered HTTP {} to a gRPC put", resp.status());
            }
            // A trailers-only answer (an error) carries the status in the headers.
            let mut status = grpc_status(resp.headers());
            let mut body = resp.into_body();
            while let Some(chunk) = body.data().await {
                let chunk = chunk?;
                let _ = body.flow_control().release_capacity(chunk.len());
            }
            if let Some(t) = body.trailers().await? {
                status = status.or_else(|| grpc_status(&t));
            }
            match status {
                Some((0, _)) => Ok(()),
                Some((code, msg)) => bail!("etcd refused a put: gRPC status {code}: {msg}"),
                None => bail!("a gRPC answer without a status"),
            }
        })
    }
}

fn grpc_status(h: &http::HeaderMap) -> Option<(u32, String)> {
    let code = h.get("grpc-status")?.to_str().ok()?.parse().ok()?;
    let msg = h
        .get("grpc-message")
        .and_then(|m| m.to_str().ok())
        .unwrap_or("")
        .to_string();
    Some((code, msg))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn put_request_encoding() {
        let mut m = Vec::new();
        put_message(&mut m, b"k", &[7u8; 200]);
        // flag, length, key field (tag 0x0a, len 1, 'k'), value field (tag
        // 0x12, len 200 as the varint c8 01).
        assert_eq!(m[0], 0);
        assert_eq!(
            u32::from_be_bytes([m[1], m[2], m[3], m[4]]) as usize,
            m.len() - 5
        );
        assert_eq!(&m[5..8], &[0x0a, 1, b'k']);
        assert_eq!(&m[8..11], &[0x12, 0xc8, 0x01]);
        assert_eq!(m.len(), 11 + 200);
    }

    #[test]
    fn prometheus_sums() {
        let text = "# HELP x\n\
                    etcd_disk_wal_fsync_duration_seconds_count 7\n\
                    etcd_disk_wal_fsync_duration_seconds_sum 0.5\n\
                    grpc_server_handling_seconds_count{grpc_method=\"Put\",grpc_type=\"unary\"} 3\n\
                    grpc_server_handling_seconds_count{grpc_method=\"Range\",grpc_type=\"unary\"} 5\n";
        assert_eq!(
            metric(text, "etcd_disk_wal_fsync_duration_seconds_count"),
            7.0
        );
        assert_eq!(metric(text, "grpc_server_handling_seconds_count"), 8.0);
        assert_eq!(
            metric_with(
                text,
                "grpc_server_handling_seconds_count",
                "grpc_method=\"Put\""
            ),
            3.0
        );
        assert_eq!(metric(text, "missing"), 0.0);
    }
}
