//! The transmission phase of one connection.
//!
//! Three parts: this task reads requests and spawns one task per request;
//! request tasks run the device operation and queue their reply; a writer
//! task sends replies as they come (so out of order: the client matches them
//! by handle), batching those ready together into one socket write.
//!
//! Memory is bounded per connection: a request takes a slot of
//! [`MAX_IN_FLIGHT_REQUESTS`] before its header is read, and its payload
//! bytes from [`MAX_IN_FLIGHT_BYTES`] before a write's data is read or a
//! read is started; both are returned only once the reply is on the socket.
//! When either runs out, this task stops reading, and TCP pushes back on the
//! client.

use std::io;
use std::sync::Arc;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader, BufWriter};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc, watch};
use tokio::task::JoinSet;

use super::proto::{self, Op, ProtoError};
use super::{
    BlockDevice, MAX_IN_FLIGHT_BYTES, MAX_IN_FLIGHT_REQUESTS, ZERO_CHUNK, stopped,
    write_zero_chunks,
};

/// How a connection's transmission phase ended (after its in-flight
/// requests were answered).
#[derive(Debug)]
pub(crate) enum End {
    /// `NBD_CMD_DISC`.
    Disconnect,
    /// The client closed its side.
    ClientClosed,
    /// The server is shutting down.
    Shutdown,
    /// A request did not start with the request magic: the stream cannot be
    /// resynchronised, so the connection is closed.
    Protocol(ProtoError),
    /// Reading or writing the socket failed.
    Io(io::Error),
}

/// A reply waiting for the writer, holding its request's budget until sent.
struct Reply {
    handle: u64,
    /// Read data, or the NBD error.
    result: Result<Option<Vec<u8>>, u32>,
    _slot: OwnedSemaphorePermit,
    _bytes: Option<OwnedSemaphorePermit>,
}

/// Serves requests read from `reader` until the client disconnects, the
/// stream breaks or `shutdown` turns true; then answers what is in flight
/// and closes `writer`. `size` is the export size the handshake announced.
pub(crate) async fn serve<R, W>(
    reader: R,
    writer: W,
    device: Arc<dyn BlockDevice>,
    size: u64,
    mut shutdown: watch::Receiver<bool>,
) -> End
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let slots = Arc::new(Semaphore::new(MAX_IN_FLIGHT_REQUESTS));
    let bytes = Arc::new(Semaphore::new(MAX_IN_FLIGHT_BYTES));
    // Never full: every queued reply holds one of the slots.
    let (tx, rx) = mpsc::channel::<Reply>(MAX_IN_FLIGHT_REQUESTS);
    let writer_task = tokio::spawn(write_replies(writer, rx));
    let mut reader = BufReader::new(reader);
    let mut tasks = JoinSet::new();

    let end = loop {
        // Finished request tasks stay in the set until joined.
        while let Some(done) = tasks.try_join_next() {
            log_task_end(done);
        }
        // A slot first: with none free, stop reading the socket.
        let slot = tokio::select! {
            biased;
            _ = stopped(&mut shutdown) => break End::Shutdown,
            slot = slots.clone().acquire_owned() => match slot {
                Ok(slot) => slot,
                Err(_) => break End::Shutdown, // never closed
            },
        };
        let mut header = [0; proto::REQUEST_LEN];
        let read = tokio::select! {
            biased;
            _ = stopped(&mut shutdown) => break End::Shutdown,
            read = reader.read_exact(&mut header) => read,
        };
        match read {
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => break End::ClientClosed,
            Err(e) => break End::Io(e),
        }
        let request = match proto::parse_request(&header) {
            Ok(r) => r,
            Err(e) => break End::Protocol(e),
        };
        let handle = request.handle;
        let op = match proto::check_request(&request, size) {
            Ok(op) => op,
            Err(errno) => {
                tracing::debug!(?request, errno, "nbd: request refused");
                // A refused write's payload is still on the wire: drain it
                // (without holding it) to stay in step with the client.
                if request.command == proto::CMD_WRITE
                    && let Err(e) = discard(&mut reader, u64::from(request.len)).await
                {
                    break End::Io(e);
                }
                let reply = Reply {
                    handle,
                    result: Err(errno),
                    _slot: slot,
                    _bytes: None,
                };
                if tx.send(reply).await.is_err() {
                    break End::Io(io::ErrorKind::BrokenPipe.into());
                }
                continue;
            }
        };
        // Payload bytes this request holds: a write's data or a read's reply
        // (at most MAX_PAYLOAD, so always grantable), or the zero buffer.
        let budget = match op {
            Op::Disconnect => break End::Disconnect,
            Op::Read { len, .. } | Op::Write { len, .. } => len,
            Op::WriteZeroes { len, .. } => len.min(ZERO_CHUNK),
            Op::Flush | Op::Trim { .. } => 0,
        };
        let budget = tokio::select! {
            biased;
            _ = stopped(&mut shutdown) => break End::Shutdown,
            permit = bytes.clone().acquire_many_owned(budget) => match permit {
                Ok(p) => p,
                Err(_) => break End::Shutdown, // never closed
            },
        };
        let payload = match op {
            Op::Write { len, .. } => {
                let mut data = vec![0; len as usize];
                if let Err(e) = reader.read_exact(&mut data).await {
                    break End::Io(e);
                }
                data
            }
            _ => Vec::new(),
        };
        let device = device.clone();
        let tx = tx.clone();
        tasks.spawn(async move {
            // The operation runs in a task of its own so that a panicking
            // device answers EIO instead of leaving the client waiting.
            let result = match tokio::spawn(execute(device, op, payload)).await {
                Ok(result) => result,
                Err(e) => {
                    tracing::error!(error = %e, ?op, "nbd: device operation panicked");
                    Err(proto::EIO)
                }
            };
            let reply = Reply {
                handle,
                result,
                _slot: slot,
                _bytes: Some(budget),
            };
            // Fails only if the writer is gone (the socket broke).
            let _ = tx.send(reply).await;
        });
    };

    // Answer everything in flight, then let the writer drain and close: it
    // ends once the last sender (ours and the tasks') is dropped.
    drop(tx);
    while let Some(done) = tasks.join_next().await {
        log_task_end(done);
    }
    match writer_task.await {
        Ok(Ok(())) => end,
        Ok(Err(e)) => match end {
            End::Disconnect | End::Shutdown | End::Protocol(_) => End::Io(e),
            other => other,
        },
        Err(e) => End::Io(io::Error::other(e)),
    }
}

fn log_task_end(done: Result<(), tokio::task::JoinError>) {
    if let Err(e) = done
        && e.is_panic()
    {
        tracing::error!(error = %e, "nbd: request task panicked");
    }
}

/// Runs one checked operation on the device.
async fn execute(
    device: Arc<dyn BlockDevice>,
    op: Op,
    payload: Vec<u8>,
) -> Result<Option<Vec<u8>>, u32> {
    let result = match op {
        // Zero-length requests are allowed but meaningless; the device never
        // sees them.
        Op::Read { len: 0, .. } => return Ok(Some(Vec::new())),
        Op::Write { len: 0, .. } | Op::Trim { len: 0, .. } | Op::WriteZeroes { len: 0, .. } => {
            return Ok(None);
        }
        Op::Read { offset, len } => match device.read(offset, len).await {
            // A short or long read cannot be sent as a simple reply.
            Ok(data) if data.len() != len as usize => {
                tracing::error!(
                    offset,
                    len,
                    got = data.len(),
                    "nbd: device read returned a wrong length"
                );
                return Err(proto::EIO);
            }
            Ok(data) => return Ok(Some(data)),
            Err(e) => Err(e),
        },
        Op::Write { offset, fua, .. } => device.write(offset, payload, fua).await,
        Op::Flush => device.flush().await,
        Op::Trim { offset, len, fua } => match device.trim(offset, len).await {
            // Trim has no FUA of its own: a flush makes it durable.
            Ok(()) if fua => device.flush().await,
            other => other,
        },
        // NO_HOLE: the zeros must be allocated, which only `write` promises.
        Op::WriteZeroes {
            offset,
            len,
            fua,
            no_hole: true,
        } => write_zero_chunks(&*device, offset, len, fua).await,
        Op::WriteZeroes {
            offset, len, fua, ..
        } => device.write_zeroes(offset, len, fua).await,
        Op::Disconnect => Ok(()),
    };
    match result {
        Ok(()) => Ok(None),
        Err(e) => {
            tracing::debug!(error = %e, ?op, "nbd: device error");
            Err(e.nbd_errno())
        }
    }
}

/// Sends replies until every sender is gone, then closes the stream.
async fn write_replies<W: AsyncWrite + Unpin>(
    writer: W,
    mut rx: mpsc::Receiver<Reply>,
) -> io::Result<()> {
    let mut out = BufWriter::with_capacity(256 << 10, writer);
    while let Some(reply) = rx.recv().await {
        write_reply(&mut out, reply).await?;
        // Whatever else is ready goes in the same flush.
        while let Ok(reply) = rx.try_recv() {
            write_reply(&mut out, reply).await?;
        }
        out.flush().await?;
    }
    out.shutdown().await
}

async fn write_reply<W: AsyncWrite + Unpin>(out: &mut W, reply: Reply) -> io::Result<()> {
    match &reply.result {
        Ok(data) => {
            out.write_all(&proto::simple_reply(0, reply.handle)).await?;
            if let Some(data) = data {
                out.write_all(data).await?;
            }
        }
        Err(errno) => {
            out.write_all(&proto::simple_reply(*errno, reply.handle))
                .await?
        }
    }
    // `reply` (and its budget) is released here, after its bytes are queued.
    Ok(())
}

/// Reads and throws away `len` bytes without holding them.
pub(crate) async fn discard<S: AsyncRead + Unpin>(s: &mut S, len: u64) -> io::Result<()> {
    let copied = tokio::io::copy(&mut (&mut *s).take(len), &mut tokio::io::sink()).await?;
    if copied != len {
        return Err(io::ErrorKind::UnexpectedEof.into());
    }
    Ok(())
}
