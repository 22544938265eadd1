//! [`NbdServer`]: the listener, one task per connection, and shutdown.

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::{JoinHandle, JoinSet};

use super::handshake::{self, Export, Outcome};
use super::transmission::{self, End};
use super::{BlockDevice, proto, stopped};

/// How long `shutdown` lets connections answer their in-flight requests (the
/// spec asks servers to) before dropping them: a device stuck without a
/// leader must not hang shutdown forever.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(10);

/// A running NBD server with one export. Stopped by [`NbdServer::shutdown`]
/// (gracefully) or by dropping it (abruptly: connections are cut at once).
///
/// Runs on the tokio runtime that called [`NbdServer::bind`].
pub struct NbdServer {
    local_addr: SocketAddr,
    stop: watch::Sender<bool>,
    accept: Option<JoinHandle<()>>,
}

impl NbdServer {
    /// Bind (e.g. "127.0.0.1:0"), serve one export named `name` (clients
    /// asking for "" get it too) until the returned handle is
    /// stopped/dropped.
    ///
    /// Fails with `InvalidInput` if the device's block size is not a power of
    /// two in 512..=65536, its size is not a multiple of it, or the name is
    /// not a valid NBD string (at most 4096 bytes, no NUL).
    pub async fn bind(
        addr: SocketAddr,
        name: &str,
        device: Arc<dyn BlockDevice>,
    ) -> io::Result<NbdServer> {
        let block_size = device.block_size();
        if !block_size.is_power_of_two() || !(512..=65536).contains(&block_size) {
            return Err(invalid(format!(
                "block size {block_size} is not a power of two in 512..=65536"
            )));
        }
        if !device.size().is_multiple_of(u64::from(block_size)) {
            return Err(invalid(format!(
                "device size {} is not a multiple of the block size {block_size}",
                device.size()
            )));
        }
        if name.len() > proto::MAX_NAME || name.contains('\0') {
            return Err(invalid(
                "export name is longer than 4096 bytes or contains NUL".into(),
            ));
        }
        let listener = TcpListener::bind(addr).await?;
        let local_addr = listener.local_addr()?;
        let (stop, stop_rx) = watch::channel(false);
        let export = Arc::new(Export {
            name: name.to_owned(),
            device,
        });
        let accept = tokio::spawn(accept_loop(listener, export, stop_rx));
        Ok(NbdServer {
            local_addr,
            stop,
            accept: Some(accept),
        })
    }

    /// The address bound (with the port the system chose for port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// Stops accepting, lets every connection answer its in-flight requests
    /// (for up to 10 s), closes them, and returns when all are closed.
    pub async fn shutdown(mut self) {
        self.stop.send_replace(true);
        if let Some(accept) = self.accept.take()
            && let Err(e) = accept.await
            && e.is_panic()
        {
            tracing::error!(error = %e, "nbd: accept loop panicked");
        }
    }
}

impl Drop for NbdServer {
    fn drop(&mut self) {
        self.stop.send_replace(true);
        // Aborting the accept loop drops its set of connection tasks, which
        // aborts them (and, in turn, their request tasks).
        if let Some(accept) = self.accept.take() {
            accept.abort();
        }
    }
}

fn invalid(msg: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, msg)
}

async fn accept_loop(listener: TcpListener, export: Arc<Export>, mut stop: watch::Receiver<bool>) {
    let conn_stop = stop.clone();
    let mut conns = JoinSet::new();
    loop {
        tokio::select! {
            biased;
            _ = stopped(&mut stop) => break,
            Some(done) = conns.join_next(), if !conns.is_empty() => log_join(done),
            accepted = listener.accept() => match accepted {
                Ok((stream, peer)) => {
                    conns.spawn(connection(stream, peer, export.clone(), conn_stop.clone()));
                }
                Err(e) => {
                    // E.g. out of file descriptors: wait instead of spinning.
                    tracing::warn!(error = %e, "nbd: accept failed");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            },
        }
    }
    drop(listener);
    // Connections saw the same signal and are finishing their requests.
    let drain = async {
        while let Some(done) = conns.join_next().await {
            log_join(done);
        }
    };
    if tokio::time::timeout(SHUTDOWN_GRACE, drain).await.is_err() {
        tracing::warn!(
            left = conns.len(),
            "nbd: connections still busy after the shutdown grace; dropping them"
        );
        conns.shutdown().await;
    }
}

fn log_join(done: Result<(), tokio::task::JoinError>) {
    if let Err(e) = done
        && e.is_panic()
    {
        tracing::error!(error = %e, "nbd: connection task panicked");
    }
}

async fn connection(
    mut stream: TcpStream,
    peer: SocketAddr,
    export: Arc<Export>,
    mut stop: watch::Receiver<bool>,
) {
    // Replies are small and latency-bound; batching is done by the writer.
    if let Err(e) = stream.set_nodelay(true) {
        tracing::debug!(%peer, error = %e, "nbd: cannot set TCP_NODELAY");
    }
    let negotiated = tokio::select! {
        biased;
        _ = stopped(&mut stop) => return,
        negotiated = handshake::negotiate(&mut stream, &export) => negotiated,
    };
    let size = match negotiated {
        Ok(Outcome::Transmission { size }) => size,
        Ok(Outcome::Aborted) => {
            tracing::debug!(%peer, "nbd: client left during the handshake");
            return;
        }
        Err(e) => {
            tracing::info!(%peer, error = %e, "nbd: handshake failed");
            return;
        }
    };
    tracing::debug!(%peer, size, "nbd: client entered transmission");
    let (reader, writer) = stream.into_split();
    match transmission::serve(reader, writer, export.device.clone(), size, stop).await {
        End::Disconnect | End::ClientClosed | End::Shutdown => {
            tracing::debug!(%peer, "nbd: connection closed");
        }
        End::Protocol(e) => tracing::info!(%peer, error = %e, "nbd: closing on a protocol error"),
        End::Io(e) => tracing::debug!(%peer, error = %e, "nbd: connection broke"),
    }
}
