//! Messages between replica processes over TCP: one ordered session per
//! direction of each pair of nodes, remade when it breaks.
//!
//! Each node listens on one address; for every peer it keeps one outgoing
//! connection, written by a thread of its own from a bounded queue. A
//! connection that fails is dropped with whatever was queued for it (the
//! replication layer resends: that is what [`Event::Reconnected`] is for)
//! and made again with a growing pause. Every time a session to or from a
//! peer starts, the node's inbox gets `Reconnected(peer)`, which the owner
//! passes to [`crate::Group::reconnected`] of each group.
//!
//! Frames: a 4-byte magic-and-version `SRP1` and the sender's node id (u64
//! LE) once per connection, then one [`crate::frame`] per message. A frame that fails
//! its checks ends the connection.

use crate::error::{ReplicaError, Result};
use crossbeam_channel::{Receiver, Sender, TrySendError, bounded};
use omnipaxos::util::NodeId;
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::collections::HashMap;
use std::io::{BufReader, BufWriter, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

const MAGIC: &[u8; 4] = b"SRP1";
/// A message body larger than this ends the connection (a block extent of
/// 32 MiB plus its envelope fits).
pub const MAX_MESSAGE: usize = 64 << 20;
/// Messages queued for one peer before new ones are dropped (the session is
/// then remade, and the replication layer resends what matters).
const QUEUE: usize = 4096;

/// What a node's inbox receives.
#[derive(Debug)]
pub enum Event<M> {
    Message {
        from: NodeId,
        msg: M,
    },
    /// A session with `peer` (re)started: lost messages must be resent.
    Reconnected(NodeId),
}

/// A node's end of the network.
pub struct Transport<M> {
    me: NodeId,
    local: SocketAddr,
    peers: HashMap<NodeId, (SocketAddr, Sender<M>)>,
    inbox: Sender<Event<M>>,
    stop: Arc<AtomicBool>,
}

impl<M> Transport<M>
where
    M: Serialize + DeserializeOwned + Send + 'static,
{
    /// Listen on `listen` and connect to `peers` (id -> address) in the
    /// background; what arrives goes to `inbox`.
    pub fn start(
        me: NodeId,
        listen: SocketAddr,
        peers: &HashMap<NodeId, SocketAddr>,
        inbox: Sender<Event<M>>,
    ) -> Result<Transport<M>> {
        let listener = TcpListener::bind(listen).map_err(|e| ReplicaError::Io {
            path: format!("listening on {listen}").into(),
            source: e,
        })?;
        let local = listener.local_addr().map_err(|e| ReplicaError::Io {
            path: format!("listening on {listen}").into(),
            source: e,
        })?;
        let stop = Arc::new(AtomicBool::new(false));
        {
            let inbox = inbox.clone();
            let stop = stop.clone();
            std::thread::Builder::new()
                .name(format!("replica-{me}-accept"))
                .spawn(move || accept_loop(listener, inbox, stop))
                .map_err(|e| ReplicaError::Failed(format!("starting a thread: {e}")))?;
        }
        let mut t = Transport {
            me,
            local,
            peers: HashMap::new(),
            inbox,
            stop,
        };
        for (&peer, &addr) in peers {
            t.add_peer(peer, addr)?;
        }
        Ok(t)
    }

    /// Start sending to `peer` at `addr` (a new member); a peer already
    /// known at another address is connected to at the new one.
    pub fn add_peer(&mut self, peer: NodeId, addr: SocketAddr) -> Result<()> {
        if peer == self.me || self.peers.get(&peer).is_some_and(|(a, _)| *a == addr) {
            return Ok(());
        }
        let me = self.me;
        let (tx, rx) = bounded::<M>(QUEUE);
        let inbox = self.inbox.clone();
        let stop = self.stop.clone();
        std::thread::Builder::new()
            .name(format!("replica-{me}-to-{peer}"))
            .spawn(move || send_loop(me, peer, addr, rx, inbox, stop))
            .map_err(|e| ReplicaError::Failed(format!("starting a thread: {e}")))?;
        // Replacing the sender closes the old queue: its thread ends.
        self.peers.insert(peer, (addr, tx));
        Ok(())
    }

    /// Stop sending to `peer` (a member removed).
    pub fn remove_peer(&mut self, peer: NodeId) {
        self.peers.remove(&peer);
    }

    pub fn me(&self) -> NodeId {
        self.me
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }

    /// Queue `msg` for `to`. A full queue drops it (the peer is far behind or
    /// unreachable; its session will be remade and the message resent).
    pub fn send(&self, to: NodeId, msg: M) {
        if let Some((_, tx)) = self.peers.get(&to) {
            match tx.try_send(msg) {
                Ok(()) | Err(TrySendError::Disconnected(_)) => {}
                Err(TrySendError::Full(_)) => {
                    tracing::warn!(to, "replica transport: queue full, message dropped");
                }
            }
        }
    }
}

impl<M> Drop for Transport<M> {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        // Wake the accept loop.
        let _ = TcpStream::connect_timeout(&self.local, Duration::from_millis(100));
    }
}

fn accept_loop<M>(listener: TcpListener, inbox: Sender<Event<M>>, stop: Arc<AtomicBool>)
where
    M: DeserializeOwned + Send + 'static,
{
    let stop2 = stop.clone();
    serve_connections(listener, stop, "replica-recv", move |conn| {
        let _ = recv_loop(conn, inbox.clone(), stop2.clone());
    });
}

/// Accept connections on `listener` until `stop` is set (a connection made
/// after setting it wakes the loop), each served by `serve` on a thread of
/// its own named `name`, with Nagle's delay off.
pub fn serve_connections(
    listener: TcpListener,
    stop: Arc<AtomicBool>,
    name: &str,
    serve: impl Fn(TcpStream) + Send + Sync + 'static,
) {
    let serve = Arc::new(serve);
    for conn in listener.incoming() {
        if stop.load(Ordering::Acquire) {
            return;
        }
        let Ok(conn) = conn else { continue };
        let serve = serve.clone();
        let _ = std::thread::Builder::new()
            .name(name.to_owned())
            .spawn(move || {
                let _ = conn.set_nodelay(true);
                serve(conn);
            });
    }
}

fn recv_loop<M>(
    conn: TcpStream,
    inbox: Sender<Event<M>>,
    stop: Arc<AtomicBool>,
) -> std::io::Result<()>
where
    M: DeserializeOwned,
{
    let mut r = BufReader::with_capacity(256 << 10, conn);
    let mut head = [0u8; 12];
    r.read_exact(&mut head)?;
    if &head[..4] != MAGIC {
        return Ok(());
    }
    let from = u64::from_le_bytes(head[4..].try_into().unwrap_or_default());
    if inbox.send(Event::Reconnected(from)).is_err() {
        return Ok(());
    }
    loop {
        if stop.load(Ordering::Acquire) {
            return Ok(());
        }
        // A bad frame ends the connection (the peer makes a new one).
        let msg = match crate::frame::read_frame::<M>(&mut r, MAX_MESSAGE) {
            Ok(m) => m,
            Err(e) if e.kind() == std::io::ErrorKind::InvalidData => return Ok(()),
            Err(e) => return Err(e),
        };
        if inbox.send(Event::Message { from, msg }).is_err() {
            return Ok(());
        }
    }
}

fn send_loop<M>(
    me: NodeId,
    peer: NodeId,
    addr: SocketAddr,
    rx: Receiver<M>,
    inbox: Sender<Event<M>>,
    stop: Arc<AtomicBool>,
) where
    M: Serialize,
{
    let mut pause = Duration::from_millis(20);
    while !stop.load(Ordering::Acquire) {
        let conn = match TcpStream::connect_timeout(&addr, Duration::from_secs(1)) {
            Ok(c) => c,
            Err(_) => {
                // Nothing can be sent: drop what waits (it is resent after
                // the session is made again). A closed queue: the peer was
                // removed.
                loop {
                    match rx.try_recv() {
                        Ok(_) => {}
                        Err(crossbeam_channel::TryRecvError::Empty) => break,
                        Err(crossbeam_channel::TryRecvError::Disconnected) => return,
                    }
                }
                std::thread::sleep(pause);
                pause = (pause * 2).min(Duration::from_millis(500));
                continue;
            }
        };
        pause = Duration::from_millis(20);
        let _ = conn.set_nodelay(true);
        let mut w = BufWriter::with_capacity(256 << 10, &conn);
        let mut head = MAGIC.to_vec();
        head.extend_from_slice(&me.to_le_bytes());
        if w.write_all(&head).and_then(|_| w.flush()).is_err() {
            continue;
        }
        if inbox.send(Event::Reconnected(peer)).is_err() {
            return;
        }
        if write_messages(&rx, &mut w, &stop).is_err() {
            drop(w);
            let _ = conn.shutdown(Shutdown::Both);
            while rx.try_recv().is_ok() {}
            continue;
        }
        return;
    }
}

/// Write queued messages until the queue closes (Ok) or a write fails.
fn write_messages<M: Serialize>(
    rx: &Receiver<M>,
    w: &mut BufWriter<&TcpStream>,
    stop: &AtomicBool,
) -> std::io::Result<()> {
    loop {
        let msg = match rx.recv_timeout(Duration::from_millis(200)) {
            Ok(m) => m,
            Err(crossbeam_channel::RecvTimeoutError::Timeout) => {
                if stop.load(Ordering::Acquire) {
                    return Ok(());
                }
                continue;
            }
            Err(crossbeam_channel::RecvTimeoutError::Disconnected) => return Ok(()),
        };
        crate::frame::write_frame(w, &msg)?;
        // Everything already queued goes in the same write.
        while let Ok(m) = rx.try_recv() {
            crate::frame::write_frame(w, &m)?;
        }
        w.flush()?;
    }
}
