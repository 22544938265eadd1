//! A client of a Hydra volume: finds each shard's leader, follows
//! redirects, retries through leader changes, and splits requests at region
//! boundaries.

use crate::op::OpId;
use crate::protocol::{
    MAGIC, REGION_BLOCKS, Request, Response, VolumeInfo, read_frame, shard_of, write_frame,
};
use std::collections::HashMap;
use std::io::{BufReader, BufWriter, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// No node answered, or no leader was found, within the client's timeout.
    #[error("the volume is unavailable: {0}")]
    Unavailable(String),
    /// The volume refused the request (out of range, not whole blocks...).
    #[error("the volume refused the request: {0}")]
    Refused(String),
    /// A bounded local read: the replica may be more stale than allowed
    /// (`stale`: how much, None if it cannot say); read elsewhere, or
    /// globally.
    #[error("the replica at {node} may be stale by {stale:?}, over the bound asked for")]
    Stale {
        node: SocketAddr,
        stale: Option<Duration>,
    },
}

struct Conn {
    r: BufReader<TcpStream>,
    w: BufWriter<TcpStream>,
}

impl Conn {
    fn open(addr: SocketAddr, timeout: Duration) -> std::io::Result<Conn> {
        let s = TcpStream::connect_timeout(&addr, Duration::from_secs(1))?;
        s.set_nodelay(true)?;
        s.set_read_timeout(Some(timeout))?;
        let mut w = BufWriter::new(s.try_clone()?);
        w.write_all(MAGIC)?;
        Ok(Conn {
            r: BufReader::new(s),
            w,
        })
    }

    fn call(&mut self, req: &Request) -> std::io::Result<Response> {
        write_frame(&mut self.w, req)?;
        read_frame(&mut self.r)
    }
}

pub struct VolumeClient {
    nodes: Vec<SocketAddr>,
    conns: HashMap<SocketAddr, Conn>,
    leaders: HashMap<u32, SocketAddr>,
    info: VolumeInfo,
    /// How long one operation may take across retries.
    pub timeout: Duration,
    next: usize,
    /// This client's session and the counter of its last operation (see
    /// [`OpId`]): a retried write or delete keeps its id and is applied once.
    session: u64,
    seq: u64,
}

/// A session id no other client picks (in practice): the clock, the process
/// and a counter mixed, with [`OpId::CLIENT`] set.
fn new_session() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    let mut x = nanos
        ^ (u64::from(std::process::id()) << 32)
        ^ COUNTER
            .fetch_add(1, Ordering::Relaxed)
            .wrapping_mul(0x9e37_79b9_7f4a_7c15);
    // splitmix64's finalizer spreads the bits.
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    (x ^ (x >> 31)) | OpId::CLIENT
}

impl VolumeClient {
    /// Connect to a volume through any of its nodes' client addresses.
    pub fn connect(nodes: &[SocketAddr]) -> Result<VolumeClient, ClientError> {
        let mut last = String::from("no node given");
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            for &a in nodes {
                match Conn::open(a, Duration::from_secs(10)).and_then(|mut c| {
                    let r = c.call(&Request::Info)?;
                    Ok((c, r))
                }) {
                    Ok((c, Response::Info(info))) => {
                        let mut conns = HashMap::new();
                        conns.insert(a, c);
                        return Ok(VolumeClient {
                            nodes: nodes.to_vec(),
                            conns,
                            leaders: HashMap::new(),
                            info,
                            timeout: Duration::from_secs(15),
                            next: 0,
                            session: new_session(),
                            seq: 0,
                        });
                    }
                    Ok((_, other)) => last = format!("{a} answered {other:?}"),
                    Err(e) => last = format!("{a}: {e}"),
                }
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        Err(ClientError::Unavailable(last))
    }

    fn next_id(&mut self) -> OpId {
        self.seq += 1;
        OpId {
            node: self.session,
            seq: self.seq,
        }
    }

    pub fn block_size(&self) -> u32 {
        self.info.block_size
    }

    pub fn blocks(&self) -> u64 {
        self.info.blocks
    }

    /// Write whole blocks from `first` on; acknowledged once decided by a
    /// majority and applied at the leader.
    pub fn write(&mut self, first: u64, data: &[u8]) -> Result<(), ClientError> {
        let bs = self.info.block_size as usize;
        if data.is_empty() || !data.len().is_multiple_of(bs) {
            return Err(ClientError::Refused(format!(
                "a write of {} bytes is not whole blocks of {bs}",
                data.len()
            )));
        }
        let count = (data.len() / bs) as u64;
        for (b, n) in regions(first, count) {
            let at = ((b - first) as usize) * bs;
            let req = Request::Write {
                first: b,
                data: data[at..at + n as usize * bs].to_vec(),
                id: Some(self.next_id()),
            };
            self.expect_done(b, req)?;
        }
        Ok(())
    }

    pub fn delete(&mut self, first: u64, count: u64) -> Result<(), ClientError> {
        for (b, n) in regions(first, count) {
            let id = Some(self.next_id());
            self.expect_done(
                b,
                Request::Delete {
                    first: b,
                    count: n,
                    id,
                },
            )?;
        }
        Ok(())
    }

    /// A linearizable read of `count` blocks.
    pub fn read_global(&mut self, first: u64, count: u64) -> Result<Vec<u8>, ClientError> {
        let mut out = Vec::with_capacity(count as usize * self.info.block_size as usize);
        for (b, n) in regions(first, count) {
            match self.call(b, Request::ReadGlobal { first: b, count: n })? {
                Response::Data { data, .. } => out.extend_from_slice(&data),
                other => return Err(ClientError::Refused(format!("unexpected {other:?}"))),
            }
        }
        Ok(out)
    }

    /// A read from the replica at `node` as it is (possibly stale).
    pub fn read_local(
        &mut self,
        node: SocketAddr,
        first: u64,
        count: u64,
    ) -> Result<Vec<u8>, ClientError> {
        self.read_local_bounded(node, first, count, None)
            .map(|(data, _)| data)
    }

    /// A read from the replica at `node`, with how stale it may be (None:
    /// the replica cannot say); with `max_stale`, a replica that cannot
    /// vouch for it refuses ([`ClientError::Stale`]) and the caller reads
    /// elsewhere or globally.
    pub fn read_local_bounded(
        &mut self,
        node: SocketAddr,
        first: u64,
        count: u64,
        max_stale: Option<Duration>,
    ) -> Result<(Vec<u8>, Option<Duration>), ClientError> {
        let mut out = Vec::new();
        let mut worst: Option<Duration> = Some(Duration::ZERO);
        let max_stale_ms = max_stale.map(|d| d.as_millis() as u64);
        for (b, n) in regions(first, count) {
            let req = Request::ReadLocal {
                first: b,
                count: n,
                max_stale_ms,
            };
            match self.call_at(node, &req) {
                Ok(Response::Data { data, stale_ms }) => {
                    out.extend_from_slice(&data);
                    let s = stale_ms.map(Duration::from_millis);
                    worst = match (worst, s) {
                        (Some(a), Some(b)) => Some(a.max(b)),
                        _ => None,
                    };
                }
                Ok(Response::Stale { stale_ms }) => {
                    return Err(ClientError::Stale {
                        node,
                        stale: stale_ms.map(Duration::from_millis),
                    });
                }
                Ok(Response::Error(e)) => return Err(ClientError::Refused(e)),
                Ok(other) => return Err(ClientError::Refused(format!("unexpected {other:?}"))),
                Err(e) => return Err(ClientError::Unavailable(format!("{node}: {e}"))),
            }
        }
        Ok((out, worst))
    }

    /// What `node` says of the volume.
    pub fn info_at(&mut self, node: SocketAddr) -> Result<VolumeInfo, ClientError> {
        match self.call_at(node, &Request::Info) {
            Ok(Response::Info(i)) => Ok(i),
            Ok(other) => Err(ClientError::Refused(format!("unexpected {other:?}"))),
            Err(e) => Err(ClientError::Unavailable(format!("{node}: {e}"))),
        }
    }

    /// Replace every shard's members by `members` (add or remove replicas
    /// online): returns once each shard's leader has applied the change. A
    /// node added must be running with `join` (it then installs a snapshot
    /// from a member and catches up).
    pub fn reconfigure(&mut self, members: &crate::membership::Members) -> Result<(), ClientError> {
        let text = crate::membership::encode(members);
        for shard in 0..self.info.shards {
            match self.call_shard(
                shard,
                Request::Reconfigure {
                    shard,
                    members: text.clone(),
                },
            )? {
                Response::Done => {}
                other => return Err(ClientError::Refused(format!("unexpected {other:?}"))),
            }
        }
        Ok(())
    }

    fn expect_done(&mut self, block: u64, req: Request) -> Result<(), ClientError> {
        match self.call(block, req)? {
            Response::Done => Ok(()),
            other => Err(ClientError::Refused(format!("unexpected {other:?}"))),
        }
    }

    fn call_at(&mut self, node: SocketAddr, req: &Request) -> std::io::Result<Response> {
        if !self.conns.contains_key(&node) {
            let c = Conn::open(node, self.timeout)?;
            self.conns.insert(node, c);
        }
        let r = match self.conns.get_mut(&node) {
            Some(c) => c.call(req),
            None => return Err(std::io::Error::other("no connection")),
        };
        if r.is_err() {
            self.conns.remove(&node);
        }
        r
    }

    /// Send `req` to the leader of `block`'s shard, following redirects and
    /// retrying through failures until the timeout.
    fn call(&mut self, block: u64, req: Request) -> Result<Response, ClientError> {
        self.call_shard(shard_of(block, self.info.shards), req)
    }

    /// Send `req` to the leader of `shard`, as [`VolumeClient::call`].
    fn call_shard(&mut self, shard: u32, req: Request) -> Result<Response, ClientError> {
        let deadline = Instant::now() + self.timeout;
        let mut last = String::new();
        while Instant::now() < deadline {
            let target = match self.leaders.get(&shard) {
                Some(a) => *a,
                None => {
                    self.next = (self.next + 1) % self.nodes.len().max(1);
                    match self.nodes.get(self.next) {
                        Some(a) => *a,
                        None => return Err(ClientError::Unavailable("no nodes".into())),
                    }
                }
            };
            match self.call_at(target, &req) {
                Ok(Response::NotLeader { leader }) => {
                    last = format!("{target} is not the leader of shard {shard}");
                    match leader {
                        Some(l) if l != target => {
                            self.leaders.insert(shard, l);
                        }
                        _ => {
                            self.leaders.remove(&shard);
                            std::thread::sleep(Duration::from_millis(20));
                        }
                    }
                }
                Ok(Response::Error(e)) => return Err(ClientError::Refused(e)),
                Ok(Response::Retry(why)) => {
                    last = format!("{target}: {why}");
                    self.leaders.remove(&shard);
                }
                Ok(r) => {
                    self.leaders.insert(shard, target);
                    return Ok(r);
                }
                Err(e) => {
                    last = format!("{target}: {e}");
                    self.leaders.remove(&shard);
                    std::thread::sleep(Duration::from_millis(20));
                }
            }
        }
        Err(ClientError::Unavailable(format!(
            "no answer from shard {shard}'s leader within {:?} (last: {last})",
            self.timeout
        )))
    }
}

/// `first..first+count` cut at region boundaries: (first, count) pieces.
fn regions(first: u64, count: u64) -> Vec<(u64, u64)> {
    let mut out = Vec::new();
    let end = first.saturating_add(count);
    let mut b = first;
    while b < end {
        let region_end = (b / REGION_BLOCKS + 1) * REGION_BLOCKS;
        let e = region_end.min(end);
        out.push((b, e - b));
        b = e;
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn requests_are_cut_at_regions() {
        assert_eq!(super::regions(0, 3), vec![(0, 3)]);
        assert_eq!(super::regions(250, 10), vec![(250, 6), (256, 4)]);
        assert_eq!(
            super::regions(0, 600),
            vec![(0, 256), (256, 256), (512, 88)]
        );
        assert!(super::regions(5, 0).is_empty());
    }
}
