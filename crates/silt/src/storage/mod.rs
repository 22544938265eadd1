//! Component files: the immutable, self-describing on-disk form of an LSM component.
//!
//! A component file is `[data blocks][index block][bloom block][meta block][footer]`.
//! Every block carries a compression byte and a CRC32C; the fixed-size footer is
//! written last and is what makes a file valid. Files are written under a temporary
//! name, fsynced, renamed and the directory fsynced (see [`component::ComponentWriter`]).

pub mod block;
pub mod block_filters;
pub mod bloom;
pub mod cache;
pub mod component;
pub mod fsutil;

pub use cache::{BlockCache, CacheStats};
pub use component::{ComponentMeta, ComponentReader, ComponentWriter, Compression, WriterOptions};

/// The kind of an LSM entry: a live value or an antimatter (delete) marker.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum EntryKind {
    Put = 1,
    Delete = 2,
}

impl EntryKind {
    pub fn from_u8(b: u8) -> Option<EntryKind> {
        match b {
            1 => Some(EntryKind::Put),
            2 => Some(EntryKind::Delete),
            _ => None,
        }
    }
}

/// One versioned entry: what a key maps to in one component.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    /// Database-wide sequence number (recency) of the write that made this entry.
    pub seq: u64,
    pub kind: EntryKind,
    /// The stored value (empty for antimatter).
    pub value: Vec<u8>,
}

impl Entry {
    pub fn put(seq: u64, value: Vec<u8>) -> Self {
        Entry {
            seq,
            kind: EntryKind::Put,
            value,
        }
    }
    pub fn delete(seq: u64) -> Self {
        Entry {
            seq,
            kind: EntryKind::Delete,
            value: Vec::new(),
        }
    }
    pub fn is_delete(&self) -> bool {
        self.kind == EntryKind::Delete
    }
}

/// Varint helpers shared by the block and meta encodings.
pub(crate) mod varint {
    pub fn put(out: &mut Vec<u8>, mut v: u64) {
        while v >= 0x80 {
            out.push((v as u8) | 0x80);
            v >>= 7;
        }
        out.push(v as u8);
    }

    /// Decode a varint at `*pos`, advancing it. `None` on truncation or overflow.
    pub fn get(buf: &[u8], pos: &mut usize) -> Option<u64> {
        let mut result: u64 = 0;
        let mut shift = 0u32;
        loop {
            let b = *buf.get(*pos)?;
            *pos += 1;
            if shift >= 64 {
                return None;
            }
            result |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Some(result);
            }
            shift += 7;
        }
    }
}
