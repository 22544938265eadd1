//! Component files: the immutable, self-describing on-disk form of an LSM component.
//!
//! A component file is `[data blocks][index block][bloom block][aux block][meta
//! block][footer]` (byte by byte: `docs/format/component.md`). Every block carries a
//! compression byte and a CRC32C; the fixed-size footer is written last and is what
//! makes a file valid. Files are written under a temporary name, fsynced, renamed and
//! the directory fsynced (see [`component::ComponentWriter`]). The aux block is
//! opaque here: the index kind above writes it and attaches what it decodes from it
//! ([`ComponentReader::attach`]); [`block_filters`] are one such section, per-block
//! attribute filters.
//!
//! - [`block`]: data blocks (prefix-compressed entries, restart points);
//! - [`bloom`]: the key bloom filter;
//! - [`cache`]: the shared block cache;
//! - [`component`]: writing and reading a component file;
//! - [`block_filters`]: per-block attribute blooms and zone maps, and the
//!   [`block_filters::BlockObserver`] that builds such sections while a file is written;
//! - [`source`]: where a component's bytes come from ([`source::ComponentSource`];
//!   [`source::LocalFile`], a mapped local file);
//! - [`remote`]: object storage, the remote tier ([`remote::RemoteStore`],
//!   [`remote::RemoteSource`]: a component read with ranged GETs);
//! - [`fsutil`]: atomic file replacement and directory fsync.

pub mod block;
pub mod block_filters;
pub mod bloom;
pub mod brin;
pub mod cache;
pub mod column_image;
pub mod component;
pub mod fsutil;
pub mod remote;
pub mod source;
pub mod time_zones;

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

    /// The entry with its value borrowed.
    pub fn as_ref(&self) -> EntryRef<'_> {
        EntryRef {
            seq: self.seq,
            kind: self.kind,
            value: &self.value,
        }
    }
}

/// An [`Entry`] whose value is borrowed (a write whose bytes are copied
/// where they go, so it need not own them).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EntryRef<'a> {
    pub seq: u64,
    pub kind: EntryKind,
    pub value: &'a [u8],
}

impl EntryRef<'_> {
    /// The entry with its value copied.
    pub fn to_owned(self) -> Entry {
        Entry {
            seq: self.seq,
            kind: self.kind,
            value: self.value.to_vec(),
        }
    }
}

/// LEB128 varints (one implementation for the crate: [`crate::varint`]).
pub(crate) use crate::varint;
