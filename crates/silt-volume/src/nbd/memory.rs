//! [`MemoryDevice`]: a sparse in-memory [`BlockDevice`].

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::RwLock;

use super::{BlockDevice, DeviceError};

/// Granule of allocation. Sparse so that a large `silt volume --memory`
/// device costs only what was written, and trim gives memory back.
const CHUNK: u64 = 64 << 10;

/// A `BlockDevice` in memory (tests and `silt volume --memory`).
///
/// Byte-addressed: any offset and length inside the device work, aligned or
/// not. Never-written and trimmed ranges read as zeros. Writes are "durable"
/// as soon as they return, so `flush` only counts calls.
pub struct MemoryDevice {
    size: u64,
    block_size: u32,
    /// Chunk index -> its `CHUNK` bytes; absent chunks are zeros.
    chunks: RwLock<HashMap<u64, Box<[u8]>>>,
    flushes: AtomicU64,
}

impl MemoryDevice {
    /// A zeroed device of `size` bytes.
    ///
    /// # Panics
    /// If `block_size` is not a power of two in 512..=65536 or `size` is not
    /// a multiple of it: both are programmer-chosen, not client input.
    pub fn new(size: u64, block_size: u32) -> Self {
        assert!(
            block_size.is_power_of_two() && (512..=65536).contains(&block_size),
            "block size {block_size} is not a power of two in 512..=65536"
        );
        assert!(
            size.is_multiple_of(u64::from(block_size)),
            "size {size} is not a multiple of the block size {block_size}"
        );
        MemoryDevice {
            size,
            block_size,
            chunks: RwLock::new(HashMap::new()),
            flushes: AtomicU64::new(0),
        }
    }

    /// Bytes of memory holding data (whole chunks), to see trims free it.
    pub fn allocated_bytes(&self) -> u64 {
        self.chunks.read().len() as u64 * CHUNK
    }

    /// How many times `flush` was called.
    pub fn flushes(&self) -> u64 {
        self.flushes.load(Ordering::Relaxed)
    }

    fn check(&self, offset: u64, len: u64) -> Result<(), DeviceError> {
        match offset.checked_add(len) {
            Some(end) if end <= self.size => Ok(()),
            _ => Err(DeviceError::OutOfRange {
                offset,
                len,
                size: self.size,
            }),
        }
    }

    /// Splits `[offset, offset+len)` into per-chunk pieces:
    /// (chunk index, offset in chunk, position in the range, length).
    fn pieces(offset: u64, len: u64) -> impl Iterator<Item = (u64, usize, usize, usize)> {
        let end = offset + len;
        let mut at = offset;
        std::iter::from_fn(move || {
            if at >= end {
                return None;
            }
            let index = at / CHUNK;
            let in_chunk = at % CHUNK;
            let n = (CHUNK - in_chunk).min(end - at);
            let piece = (index, in_chunk as usize, (at - offset) as usize, n as usize);
            at += n;
            Some(piece)
        })
    }
}

#[async_trait::async_trait]
impl BlockDevice for MemoryDevice {
    fn size(&self) -> u64 {
        self.size
    }

    fn block_size(&self) -> u32 {
        self.block_size
    }

    async fn read(&self, offset: u64, len: u32) -> Result<Vec<u8>, DeviceError> {
        self.check(offset, u64::from(len))?;
        let mut out = vec![0; len as usize];
        let chunks = self.chunks.read();
        for (index, in_chunk, at, n) in Self::pieces(offset, u64::from(len)) {
            if let Some(chunk) = chunks.get(&index) {
                out[at..at + n].copy_from_slice(&chunk[in_chunk..in_chunk + n]);
            }
        }
        Ok(out)
    }

    async fn write(&self, offset: u64, data: Vec<u8>, _fua: bool) -> Result<(), DeviceError> {
        self.check(offset, data.len() as u64)?;
        let mut chunks = self.chunks.write();
        for (index, in_chunk, at, n) in Self::pieces(offset, data.len() as u64) {
            let chunk = chunks
                .entry(index)
                .or_insert_with(|| vec![0; CHUNK as usize].into_boxed_slice());
            chunk[in_chunk..in_chunk + n].copy_from_slice(&data[at..at + n]);
        }
        Ok(())
    }

    async fn flush(&self) -> Result<(), DeviceError> {
        self.flushes.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    async fn trim(&self, offset: u64, len: u32) -> Result<(), DeviceError> {
        self.check(offset, u64::from(len))?;
        let mut chunks = self.chunks.write();
        for (index, in_chunk, _, n) in Self::pieces(offset, u64::from(len)) {
            if n as u64 == CHUNK {
                chunks.remove(&index);
            } else if let Some(chunk) = chunks.get_mut(&index) {
                chunk[in_chunk..in_chunk + n].fill(0);
            }
        }
        Ok(())
    }

    /// Zeros read back from trimmed ranges, so writing zeros is a trim.
    async fn write_zeroes(&self, offset: u64, len: u32, _fua: bool) -> Result<(), DeviceError> {
        self.trim(offset, len).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn block_on<F: std::future::Future>(f: F) -> F::Output {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("runtime")
            .block_on(f)
    }

    #[test]
    fn unaligned_writes_reads_and_trims_across_chunks() {
        block_on(async {
            let d = MemoryDevice::new(4 * CHUNK, 512);
            assert_eq!(d.read(0, 100).await.expect("read"), vec![0; 100]);
            assert_eq!(d.allocated_bytes(), 0);
            let data: Vec<u8> = (0..CHUNK as usize + 1000)
                .map(|i| (i % 251) as u8)
                .collect();
            let off = CHUNK - 500;
            d.write(off, data.clone(), false).await.expect("write");
            assert_eq!(d.allocated_bytes(), 3 * CHUNK);
            let got = d.read(off, data.len() as u32).await.expect("read");
            assert_eq!(got, data);
            // Trim the middle whole chunk and part of its neighbours.
            d.trim(CHUNK - 100, CHUNK as u32 + 200).await.expect("trim");
            assert_eq!(d.allocated_bytes(), 2 * CHUNK);
            let got = d.read(off, data.len() as u32).await.expect("read");
            assert_eq!(&got[..400], &data[..400]);
            assert!(got[400..400 + CHUNK as usize + 200].iter().all(|&b| b == 0));
            assert_eq!(&got[600 + CHUNK as usize..], &data[600 + CHUNK as usize..]);
            d.write_zeroes(0, 4 * CHUNK as u32, true)
                .await
                .expect("zero");
            assert_eq!(d.allocated_bytes(), 0);
            d.flush().await.expect("flush");
            assert_eq!(d.flushes(), 1);
        });
    }

    #[test]
    fn out_of_range_is_an_error() {
        block_on(async {
            let d = MemoryDevice::new(4096, 4096);
            assert!(matches!(
                d.read(4000, 100).await,
                Err(DeviceError::OutOfRange {
                    offset: 4000,
                    len: 100,
                    size: 4096
                })
            ));
            assert!(d.write(u64::MAX, vec![1], false).await.is_err());
            assert!(d.trim(4096, 1).await.is_err());
            assert!(d.read(4096, 0).await.is_ok());
        });
    }
}
