//! Data and index blocks (format: `docs/format/component.md`, "Data blocks").
//!
//! Uncompressed layout: a run of entries, then `restarts: [u32]` and `n_restarts: u32`.
//! Each entry is `varint shared, varint unshared, varint value_len, u8 kind,
//! varint seq, key[shared..], value`. Keys are prefix-compressed against the
//! previous key, except at restart points (every [`RESTART_INTERVAL`] entries)
//! where `shared == 0`, so a lookup binary-searches the restarts and then scans.
//!
//! On disk a block is `payload, u8 compression, u32 crc32c(payload ++ compression)`.

use super::varint;
use super::{Entry, EntryKind, EntryRef};
use std::cmp::Ordering;

pub const RESTART_INTERVAL: usize = 16;
/// Bytes after the payload: compression byte + crc.
pub const TRAILER_LEN: usize = 5;

#[derive(Default)]
pub struct BlockBuilder {
    buf: Vec<u8>,
    restarts: Vec<u32>,
    last_key: Vec<u8>,
    count: usize,
}

impl BlockBuilder {
    pub fn new() -> Self {
        Self::default()
    }

    /// Append an entry; keys must arrive in strictly increasing order.
    pub fn add(&mut self, key: &[u8], kind: EntryKind, seq: u64, value: &[u8]) {
        let shared = if self.count.is_multiple_of(RESTART_INTERVAL) {
            self.restarts.push(self.buf.len() as u32);
            0
        } else {
            self.last_key
                .iter()
                .zip(key)
                .take_while(|(a, b)| a == b)
                .count()
        };
        varint::put(&mut self.buf, shared as u64);
        varint::put(&mut self.buf, (key.len() - shared) as u64);
        varint::put(&mut self.buf, value.len() as u64);
        self.buf.push(kind as u8);
        varint::put(&mut self.buf, seq);
        self.buf.extend_from_slice(&key[shared..]);
        self.buf.extend_from_slice(value);
        self.last_key.clear();
        self.last_key.extend_from_slice(key);
        self.count += 1;
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Estimated uncompressed size if finished now.
    pub fn size_estimate(&self) -> usize {
        self.buf.len() + 4 * self.restarts.len() + 4
    }

    pub fn last_key(&self) -> &[u8] {
        &self.last_key
    }

    /// Finish the block and return its uncompressed bytes; the builder is reset.
    pub fn finish(&mut self) -> Vec<u8> {
        let mut out = std::mem::take(&mut self.buf);
        for r in &self.restarts {
            out.extend_from_slice(&r.to_le_bytes());
        }
        out.extend_from_slice(&(self.restarts.len() as u32).to_le_bytes());
        self.restarts.clear();
        self.last_key.clear();
        self.count = 0;
        out
    }
}

/// A decoded (decompressed, checksum-verified) block.
#[derive(Debug)]
pub struct Block {
    data: Vec<u8>,
    /// Offset where the restart array begins (= end of entries).
    restarts_at: usize,
    n_restarts: usize,
}

/// A borrowed, structurally validated block: the search logic shared by an
/// owned [`Block`] and an uncompressed block read in place from a mapped
/// component file (no copy, no allocation).
#[derive(Clone, Copy, Debug)]
pub struct BlockView<'a> {
    data: &'a [u8],
    restarts_at: usize,
    n_restarts: usize,
}

/// A borrowed view of one entry inside a block (key is materialized because of prefix compression).
#[derive(Clone, Debug, Default)]
pub struct RawEntry {
    pub key: Vec<u8>,
    pub kind: u8,
    pub seq: u64,
    pub value_start: usize,
    pub value_end: usize,
}

/// Where the restart array of an uncompressed block starts, and how many
/// restarts it has; `Err` if the trailer does not describe a valid array.
fn layout(data: &[u8]) -> Result<(usize, usize), String> {
    let len = data.len();
    if len < 4 {
        return Err("block shorter than its restart count".into());
    }
    let n =
        u32::from_le_bytes([data[len - 4], data[len - 3], data[len - 2], data[len - 1]]) as usize;
    let need = n
        .checked_mul(4)
        .and_then(|x| x.checked_add(4))
        .ok_or("restart count overflows")?;
    if need > len {
        return Err(format!(
            "block restart count {n} does not fit in {len} bytes"
        ));
    }
    let restarts_at = len - need;
    let v = BlockView {
        data,
        restarts_at,
        n_restarts: n,
    };
    for i in 0..n {
        if v.restart(i) > restarts_at {
            return Err("block restart offset out of range".into());
        }
    }
    Ok((restarts_at, n))
}

impl Block {
    /// Validate the structure of an uncompressed block.
    pub fn new(data: Vec<u8>) -> Result<Block, String> {
        let (restarts_at, n_restarts) = layout(&data)?;
        Ok(Block {
            data,
            restarts_at,
            n_restarts,
        })
    }

    pub fn size(&self) -> usize {
        self.data.len()
    }

    /// The block as a borrowed view.
    pub fn view(&self) -> BlockView<'_> {
        BlockView {
            data: &self.data,
            restarts_at: self.restarts_at,
            n_restarts: self.n_restarts,
        }
    }

    pub fn value(&self, e: &RawEntry) -> &[u8] {
        &self.data[e.value_start..e.value_end]
    }

    /// Decode the entry at `pos` given the previous key; returns the next position.
    /// `Err` on a malformed entry.
    pub fn decode_at(&self, pos: usize, e: &mut RawEntry) -> Result<usize, String> {
        self.view().decode_at(pos, e)
    }

    pub fn entries_end(&self) -> usize {
        self.restarts_at
    }

    /// Position of the first entry with key >= `target` (scan position, decoded entry),
    /// or `None` if every key is smaller.
    pub fn seek(&self, target: &[u8]) -> Result<Option<(usize, RawEntry)>, String> {
        self.view().seek(target)
    }

    /// Exact lookup.
    pub fn get(&self, key: &[u8]) -> Result<Option<Entry>, String> {
        self.view().get(key)
    }
}

impl<'a> BlockView<'a> {
    /// Validate the structure of an uncompressed block held elsewhere.
    pub fn new(data: &'a [u8]) -> Result<BlockView<'a>, String> {
        let (restarts_at, n_restarts) = layout(data)?;
        Ok(BlockView {
            data,
            restarts_at,
            n_restarts,
        })
    }

    fn restart(&self, i: usize) -> usize {
        let p = self.restarts_at + 4 * i;
        u32::from_le_bytes([
            self.data[p],
            self.data[p + 1],
            self.data[p + 2],
            self.data[p + 3],
        ]) as usize
    }

    pub fn value(&self, e: &RawEntry) -> &'a [u8] {
        &self.data[e.value_start..e.value_end]
    }

    pub fn entries_end(&self) -> usize {
        self.restarts_at
    }

    /// Decode the entry at `pos` given the previous key; returns the next position.
    /// `Err` on a malformed entry.
    pub fn decode_at(&self, pos: usize, e: &mut RawEntry) -> Result<usize, String> {
        let buf = &self.data[..self.restarts_at];
        let mut p = pos;
        let bad = || "malformed block entry".to_string();
        let shared = varint::get(buf, &mut p).ok_or_else(bad)? as usize;
        let unshared = varint::get(buf, &mut p).ok_or_else(bad)? as usize;
        let vlen = varint::get(buf, &mut p).ok_or_else(bad)? as usize;
        let kind = *buf.get(p).ok_or_else(bad)?;
        p += 1;
        let seq = varint::get(buf, &mut p).ok_or_else(bad)?;
        if shared > e.key.len() {
            return Err(bad());
        }
        let kend = p.checked_add(unshared).ok_or_else(bad)?;
        let vend = kend.checked_add(vlen).ok_or_else(bad)?;
        if vend > buf.len() {
            return Err(bad());
        }
        e.key.truncate(shared);
        e.key.extend_from_slice(&buf[p..kend]);
        e.kind = kind;
        e.seq = seq;
        e.value_start = kend;
        e.value_end = vend;
        Ok(vend)
    }

    /// Position of the first entry with key >= `target` (scan position, decoded entry),
    /// or `None` if every key is smaller.
    pub fn seek(&self, target: &[u8]) -> Result<Option<(usize, RawEntry)>, String> {
        // Binary search over restart points: find the last restart whose key < target.
        let (mut lo, mut hi) = (0usize, self.n_restarts);
        let mut e = RawEntry::default();
        while lo < hi {
            let mid = (lo + hi) / 2;
            e.key.clear();
            self.decode_at(self.restart(mid), &mut e)?;
            if e.key.as_slice() < target {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        let start_restart = lo.saturating_sub(1);
        if self.n_restarts == 0 {
            return Ok(None);
        }
        let mut pos = self.restart(start_restart);
        e.key.clear();
        while pos < self.restarts_at {
            let next = self.decode_at(pos, &mut e)?;
            if e.key.as_slice() >= target {
                return Ok(Some((next, e)));
            }
            pos = next;
        }
        Ok(None)
    }

    /// Exact lookup.
    pub fn get(&self, key: &[u8]) -> Result<Option<Entry>, String> {
        Ok(self.get_ref(key)?.map(|e| Entry {
            seq: e.seq,
            kind: e.kind,
            value: e.value.to_vec(),
        }))
    }

    /// Exact lookup, the value borrowed from the block.
    pub fn get_ref(&self, key: &[u8]) -> Result<Option<EntryRef<'a>>, String> {
        match self.seek(key)? {
            Some((_, e)) if e.key.as_slice().cmp(key) == Ordering::Equal => {
                let kind = EntryKind::from_u8(e.kind)
                    .ok_or_else(|| format!("unknown entry kind {}", e.kind))?;
                Ok(Some(EntryRef {
                    seq: e.seq,
                    kind,
                    value: self.value(&e),
                }))
            }
            _ => Ok(None),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn build_seek_and_get() {
        let mut b = BlockBuilder::new();
        for i in 0..100u32 {
            let k = format!("key{:05}", i * 2);
            b.add(
                k.as_bytes(),
                EntryKind::Put,
                u64::from(i),
                format!("v{i}").as_bytes(),
            );
        }
        let block = Block::new(b.finish()).unwrap();
        for i in 0..100u32 {
            let k = format!("key{:05}", i * 2);
            let e = block.get(k.as_bytes()).unwrap().unwrap();
            assert_eq!(e.value, format!("v{i}").as_bytes());
            assert_eq!(e.seq, u64::from(i));
            let miss = format!("key{:05}", i * 2 + 1);
            assert!(block.get(miss.as_bytes()).unwrap().is_none());
            let (_, e) = block
                .seek(miss.as_bytes())
                .unwrap()
                .map_or((0, RawEntry::default()), |x| x);
            if i < 99 {
                assert_eq!(e.key, format!("key{:05}", i * 2 + 2).as_bytes());
            }
        }
        assert!(block.seek(b"zzz").unwrap().is_none());
        let (_, first) = block.seek(b"").unwrap().unwrap();
        assert_eq!(first.key, b"key00000");
    }

    #[test]
    fn malformed_blocks_are_errors() {
        assert!(Block::new(vec![1, 2]).is_err());
        assert!(Block::new(vec![0xff, 0xff, 0xff, 0x0f]).is_err());
        let b = Block::new(vec![0xff, 0xff, 0, 0, 0, 0, 1, 0, 0, 0]).unwrap();
        assert!(b.seek(b"a").is_err());
    }
}
