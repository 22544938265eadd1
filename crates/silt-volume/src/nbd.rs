//! The NBD (network block device) front end: serves a [`BlockDevice`] to
//! real block clients (the Linux kernel's `nbd-client`, qemu, libnbd's
//! `nbdsh`/`nbdcopy`) over TCP.
//!
//! Written from the NBD protocol specification (`doc/proto.md` of the
//! reference implementation). What is spoken:
//!
//! - Fixed newstyle handshake only (no oldstyle), with `NBD_FLAG_NO_ZEROES`.
//! - Options `NBD_OPT_EXPORT_NAME`, `NBD_OPT_GO`, `NBD_OPT_INFO` (replying
//!   `NBD_INFO_EXPORT`, `NBD_INFO_BLOCK_SIZE` and, if asked, `NBD_INFO_NAME`),
//!   `NBD_OPT_LIST` and `NBD_OPT_ABORT`; every other option (TLS,
//!   structured replies, metadata contexts, ...) is answered
//!   `NBD_REP_ERR_UNSUP`, which every client handles by falling back.
//! - Simple replies only, so commands `NBD_CMD_READ`, `WRITE`, `DISC`,
//!   `FLUSH`, `TRIM` and `WRITE_ZEROES` (with `NBD_CMD_FLAG_FUA` and
//!   `NBD_CMD_FLAG_NO_HOLE`).
//! - Requests of one connection run concurrently and are answered as they
//!   finish (the client matches replies by handle), within
//!   [`MAX_IN_FLIGHT_REQUESTS`] and [`MAX_IN_FLIGHT_BYTES`]: when either is
//!   spent the server stops reading the socket, so a fast client is slowed by
//!   TCP flow control instead of growing the server's memory.
//!
//! Block sizes: the device's `block_size()` is advertised as both minimum and
//! preferred size, so well-behaved clients (qemu, the kernel) align their
//! requests and do their own read-modify-write. Clients that ignore the hint
//! still work: offsets and lengths are passed to the device in bytes, and
//! [`BlockDevice`] is byte-addressed, so the device does any read-modify-write
//! it needs.

mod handshake;
mod memory;
mod proto;
mod server;
mod transmission;

pub use memory::MemoryDevice;
pub use server::NbdServer;

/// Largest `NBD_CMD_READ`/`NBD_CMD_WRITE` payload (32 MiB), advertised as the
/// maximum block size; the spec's interoperable limit, which qemu and the
/// kernel already keep to. Longer reads or writes are answered `EINVAL`
/// (a write's payload is read and dropped first, so the connection goes on).
pub const MAX_PAYLOAD: u32 = 32 << 20;

/// Requests of one connection being executed or waiting for their reply to be
/// written, at most.
pub const MAX_IN_FLIGHT_REQUESTS: usize = 64;

/// Payload bytes (write data received, read data to send) one connection holds
/// at most; at least [`MAX_PAYLOAD`] so that any valid request can run.
pub const MAX_IN_FLIGHT_BYTES: usize = 2 * MAX_PAYLOAD as usize;

/// Chunk in which zeros are written (by [`BlockDevice::write_zeroes`]'s
/// default and for `NBD_CMD_FLAG_NO_HOLE`), so a 4 GiB write-zeroes request
/// does not allocate 4 GiB.
pub const ZERO_CHUNK: u32 = 1 << 20;

/// What the NBD server serves: a byte-addressed device of a fixed size.
///
/// The server checks every request against `size()` before calling the
/// device, so the device sees only in-range, non-empty requests (it may still return
/// [`DeviceError::OutOfRange`], e.g. if it shrank). Requests of one or
/// several connections run concurrently; two overlapping writes in flight at
/// once may land in either order, as NBD allows.
///
/// `flush` must make durable every write that has completed on the device,
/// whichever connection issued it: the server advertises
/// `NBD_FLAG_CAN_MULTI_CONN` (clients such as `nbdcopy` then open several
/// connections and flush on only one), which is safe only under that
/// contract. All connections share this one device object, so there is no
/// per-connection cache for the contract to miss.
#[async_trait::async_trait]
pub trait BlockDevice: Send + Sync + 'static {
    /// Size in bytes (a multiple of block_size()).
    fn size(&self) -> u64;

    /// The device's block size (power of two, 512..=65536); advertised as the
    /// preferred and minimum block size.
    fn block_size(&self) -> u32;

    /// Reads `len` bytes at `offset`; must return exactly `len` bytes (the
    /// server answers `EIO` otherwise, as it cannot send a short read).
    async fn read(&self, offset: u64, len: u32) -> Result<Vec<u8>, DeviceError>;

    /// `fua`: the write must be durable when this returns.
    async fn write(&self, offset: u64, data: Vec<u8>, fua: bool) -> Result<(), DeviceError>;

    /// Makes every completed write durable (see the trait's docs).
    async fn flush(&self) -> Result<(), DeviceError>;

    /// Discard (NBD_CMD_TRIM); reads of trimmed ranges return zeros afterwards.
    async fn trim(&self, offset: u64, len: u32) -> Result<(), DeviceError>;

    /// NBD_CMD_WRITE_ZEROES; default: write zeros, [`ZERO_CHUNK`] bytes at a
    /// time. A device may punch holes instead (the server calls `write`
    /// with zeros itself when the client asks for `NBD_CMD_FLAG_NO_HOLE`).
    async fn write_zeroes(&self, offset: u64, len: u32, fua: bool) -> Result<(), DeviceError> {
        write_zero_chunks(self, offset, len, fua).await
    }
}

/// Writes `len` zero bytes at `offset` through `device.write`, at most
/// [`ZERO_CHUNK`] bytes per call.
pub(crate) async fn write_zero_chunks<D: BlockDevice + ?Sized>(
    device: &D,
    offset: u64,
    len: u32,
    fua: bool,
) -> Result<(), DeviceError> {
    let out_of_range = || DeviceError::OutOfRange {
        offset,
        len: u64::from(len),
        size: device.size(),
    };
    offset
        .checked_add(u64::from(len))
        .ok_or_else(out_of_range)?;
    let mut done: u32 = 0;
    while done < len {
        let n = (len - done).min(ZERO_CHUNK);
        device
            .write(offset + u64::from(done), vec![0; n as usize], fua)
            .await?;
        done += n;
    }
    Ok(())
}

/// Resolves once `stop` turns true or its sender is gone (the server
/// dropped), for `select!`s that end work on shutdown. Returns nothing so no
/// borrow of the channel is held by the select's output.
pub(crate) async fn stopped(stop: &mut tokio::sync::watch::Receiver<bool>) {
    let _ = stop.wait_for(|stop| *stop).await;
}

/// Errors a device returns; mapped to NBD error codes by
/// [`DeviceError::nbd_errno`].
#[derive(Debug, thiserror::Error)]
pub enum DeviceError {
    /// The storage failed (`EIO`).
    #[error("I/O error: {0}")]
    Io(String),
    /// The range is not inside the device (`EINVAL`).
    #[error("range {offset}+{len} is outside the device of {size} bytes")]
    OutOfRange { offset: u64, len: u64, size: u64 },
    /// The device does not accept writes, e.g. a follower's replica (`EPERM`,
    /// NBD having no `EROFS`).
    #[error("device is read-only")]
    ReadOnly,
    /// The device cannot serve now, e.g. its group has no leader (`EIO`: the
    /// client's block layer fails the request and the caller may retry).
    #[error("device unavailable: {0}")]
    Unavailable(String),
    /// No space to store the data (`ENOSPC`).
    #[error("no space left on device")]
    NoSpace,
    /// The request is not valid for this device (`EINVAL`).
    #[error("invalid request: {0}")]
    Invalid(String),
    /// The device is shutting down (`ESHUTDOWN`: the client disconnects).
    #[error("device is shutting down")]
    ShuttingDown,
}

impl DeviceError {
    /// The NBD error value sent in the reply (the spec's small fixed set).
    pub fn nbd_errno(&self) -> u32 {
        match self {
            DeviceError::Io(_) | DeviceError::Unavailable(_) => proto::EIO,
            DeviceError::OutOfRange { .. } | DeviceError::Invalid(_) => proto::EINVAL,
            DeviceError::ReadOnly => proto::EPERM,
            DeviceError::NoSpace => proto::ENOSPC,
            DeviceError::ShuttingDown => proto::ESHUTDOWN,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn device_errors_map_to_nbd_errnos() {
        assert_eq!(DeviceError::Io("x".into()).nbd_errno(), 5);
        assert_eq!(DeviceError::Unavailable("no leader".into()).nbd_errno(), 5);
        let oor = DeviceError::OutOfRange {
            offset: 1,
            len: 2,
            size: 3,
        };
        assert_eq!(oor.nbd_errno(), 22);
        assert_eq!(DeviceError::Invalid("x".into()).nbd_errno(), 22);
        assert_eq!(DeviceError::ReadOnly.nbd_errno(), 1);
        assert_eq!(DeviceError::NoSpace.nbd_errno(), 28);
        assert_eq!(DeviceError::ShuttingDown.nbd_errno(), 108);
    }
}
