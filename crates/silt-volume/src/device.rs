//! The volume as an NBD [`BlockDevice`]: byte ranges become block requests
//! through a small pool of [`VolumeClient`]s (each blocking call runs on
//! tokio's blocking pool).
//!
//! A range that does not start and end on block boundaries is read, patched
//! and written back (read-modify-write of its first and last blocks); NBD
//! gives no atomicity to overlapping writes in flight, and neither does this.
//! Every acknowledged write is decided by a majority and synced there, so
//! `flush` has nothing left to do.

use crate::client::{ClientError, VolumeClient};
use crate::nbd::{BlockDevice, DeviceError};
use crossbeam_channel::{Receiver, Sender, bounded};
use std::net::SocketAddr;

pub struct VolumeDevice {
    size: u64,
    block_size: u32,
    pool_tx: Sender<VolumeClient>,
    pool_rx: Receiver<VolumeClient>,
}

impl VolumeDevice {
    /// Connect `clients` clients to the volume whose nodes answer at `nodes`.
    pub fn connect(nodes: &[SocketAddr], clients: usize) -> Result<VolumeDevice, ClientError> {
        let (tx, rx) = bounded(clients.max(1));
        let first = VolumeClient::connect(nodes)?;
        let (size, block_size) = (
            first.blocks() * first.block_size() as u64,
            first.block_size(),
        );
        let _ = tx.send(first);
        for _ in 1..clients.max(1) {
            let _ = tx.send(VolumeClient::connect(nodes)?);
        }
        Ok(VolumeDevice {
            size,
            block_size,
            pool_tx: tx,
            pool_rx: rx,
        })
    }

    async fn with_client<R: Send + 'static>(
        &self,
        f: impl FnOnce(&mut VolumeClient) -> Result<R, ClientError> + Send + 'static,
    ) -> Result<R, DeviceError> {
        let rx = self.pool_rx.clone();
        let tx = self.pool_tx.clone();
        let joined = tokio::task::spawn_blocking(move || {
            let mut c = rx
                .recv()
                .map_err(|_| DeviceError::Unavailable("the client pool is closed".into()))?;
            let r = f(&mut c);
            let _ = tx.send(c);
            r.map_err(|e| match e {
                ClientError::Unavailable(m) => DeviceError::Unavailable(m),
                ClientError::Refused(m) => DeviceError::Invalid(m),
                e @ ClientError::Stale { .. } => DeviceError::Unavailable(e.to_string()),
            })
        })
        .await;
        joined.unwrap_or_else(|e| Err(DeviceError::Io(format!("a volume call failed: {e}"))))
    }
}

/// The blocks covering `offset..offset+len`: (first block, count).
fn covering(offset: u64, len: u64, bs: u64) -> (u64, u64) {
    let first = offset / bs;
    let end = (offset + len).div_ceil(bs);
    (first, end - first)
}

#[async_trait::async_trait]
impl BlockDevice for VolumeDevice {
    fn size(&self) -> u64 {
        self.size
    }

    fn block_size(&self) -> u32 {
        self.block_size
    }

    async fn read(&self, offset: u64, len: u32) -> Result<Vec<u8>, DeviceError> {
        let bs = self.block_size as u64;
        let (first, count) = covering(offset, len as u64, bs);
        let skip = (offset - first * bs) as usize;
        self.with_client(move |c| {
            let data = c.read_global(first, count)?;
            Ok(data[skip..skip + len as usize].to_vec())
        })
        .await
    }

    async fn write(&self, offset: u64, data: Vec<u8>, _fua: bool) -> Result<(), DeviceError> {
        let bs = self.block_size as u64;
        let (first, count) = covering(offset, data.len() as u64, bs);
        let skip = (offset - first * bs) as usize;
        self.with_client(move |c| {
            let aligned = skip == 0 && (data.len() as u64).is_multiple_of(bs);
            if aligned {
                return c.write(first, &data);
            }
            let mut blocks = c.read_global(first, count)?;
            blocks[skip..skip + data.len()].copy_from_slice(&data);
            c.write(first, &blocks)
        })
        .await
    }

    async fn flush(&self) -> Result<(), DeviceError> {
        Ok(())
    }

    async fn trim(&self, offset: u64, len: u32) -> Result<(), DeviceError> {
        let bs = self.block_size as u64;
        // Whole blocks inside the range are deleted; the edges are zeroed.
        let first_whole = offset.div_ceil(bs);
        let end_whole = (offset + len as u64) / bs;
        if end_whole > first_whole {
            self.with_client(move |c| c.delete(first_whole, end_whole - first_whole))
                .await?;
        }
        let head_end = (first_whole * bs).min(offset + len as u64);
        if head_end > offset {
            self.write(offset, vec![0; (head_end - offset) as usize], false)
                .await?;
        }
        let tail_start = (end_whole * bs).max(head_end);
        if offset + len as u64 > tail_start && end_whole >= first_whole {
            self.write(
                tail_start,
                vec![0; (offset + len as u64 - tail_start) as usize],
                false,
            )
            .await?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn covering_blocks() {
        assert_eq!(super::covering(0, 4096, 4096), (0, 1));
        assert_eq!(super::covering(100, 10, 4096), (0, 1));
        assert_eq!(super::covering(4000, 200, 4096), (0, 2));
        assert_eq!(super::covering(8192, 8192, 4096), (2, 2));
    }
}
