//! The volume's client protocol: one request, then its response, at a time
//! on a TCP connection (a client wanting concurrency opens several).
//!
//! Frames: body length (u32 LE), CRC32C of the body (u32 LE), body
//! (`postcard` of a [`Request`] or [`Response`]). The connection starts with
//! the 4 bytes `SVC1` from the client.

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use std::io::{self, Read, Write};
use std::net::SocketAddr;

pub const MAGIC: &[u8; 4] = b"SVC1";
/// A request or response body larger than this ends the connection.
pub const MAX_FRAME: usize = 40 << 20;
/// Blocks per region: a request stays inside one region (one shard), so an
/// extent is written atomically by one group. Shard of a block:
/// `(block / REGION_BLOCKS) % shards`.
pub const REGION_BLOCKS: u64 = 256;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Request {
    /// Write whole blocks from `first` on. `id`: the client's session and
    /// counter (see `OpId`): a retry carries the same and is applied once.
    Write {
        first: u64,
        #[serde(with = "serde_bytes")]
        data: Vec<u8>,
        id: Option<crate::op::OpId>,
    },
    /// Delete `count` blocks (they read as zeros).
    Delete {
        first: u64,
        count: u64,
        id: Option<crate::op::OpId>,
    },
    /// Read `count` blocks, linearizably (ordered through the shard's log).
    ReadGlobal {
        first: u64,
        count: u64,
    },
    /// Read `count` blocks from this replica as it is, possibly stale (see
    /// `Response::Data::stale_ms`). With `max_stale_ms`, a replica that
    /// cannot vouch for that bound answers `Stale` instead.
    ReadLocal {
        first: u64,
        count: u64,
        max_stale_ms: Option<u64>,
    },
    Info,
    /// Replace a shard's members by `members` (`ID=REPL/CLIENT,...`, see
    /// `membership`): answered `Done` once the change is decided and applied
    /// at the node asked (the shard's leader).
    Reconfigure {
        shard: u32,
        members: String,
    },
    /// Stream the shard's state (a replica catching up; see `snapshot`).
    Snapshot {
        shard: u32,
    },
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Response {
    Done,
    Data {
        #[serde(with = "serde_bytes")]
        data: Vec<u8>,
        /// For a local read, how stale the data may be: the replica holds
        /// everything decided until this many milliseconds ago (the time
        /// since it last heard from its shard's leader, or at the leader
        /// since it last heard from a majority; each link is one ordered
        /// session, so nothing the leader sent before is still in flight).
        /// None: it has not heard from them since it started. 0 for a
        /// global read.
        stale_ms: Option<u64>,
    },
    /// A bounded local read the replica could not serve: it may be
    /// `stale_ms` behind (None: unknown), over the bound asked for.
    Stale {
        stale_ms: Option<u64>,
    },
    /// Ask `leader` (its client address) instead; None: no leader known yet.
    NotLeader {
        leader: Option<SocketAddr>,
    },
    Info(VolumeInfo),
    Error(String),
    /// The node could not finish the operation in time (its proposal may
    /// have been lost with a leadership change): try again, anywhere.
    Retry(String),
    /// A snapshot's first frame.
    Snapshot(crate::snapshot::SnapshotHeader),
    /// A piece of a snapshot: blocks and their data.
    Blocks(#[serde(with = "block_list")] Vec<(u64, Vec<u8>)>),
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VolumeInfo {
    pub node: u64,
    pub block_size: u32,
    pub blocks: u64,
    pub shards: u32,
    /// Each shard's leader as this node knows it.
    pub leaders: Vec<Option<u64>>,
    /// Each shard's decided index here.
    pub decided: Vec<u64>,
    /// Each shard's state here, in more detail.
    pub shard_state: Vec<ShardState>,
}

/// One shard at one node.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ShardState {
    /// The shard's configuration here (1 at the start; one more at every
    /// membership change).
    pub config: u32,
    /// Its members (`ID=REPL/CLIENT,...`).
    pub members: String,
    /// `active`, `catching up` (installing a snapshot), `waiting`
    /// (a joining node that has not heard of its shard yet) or `left` (not a
    /// member any more).
    pub mode: String,
    /// Log entries applied to the block map (this replica is up to date
    /// with the group when it equals the leader's `decided`).
    pub applied: u64,
    /// Entries below this index were trimmed from the log.
    pub compacted: u64,
    /// Entries the log still holds (in memory and in `paxos.log`).
    pub log_entries: u64,
    /// Snapshots this replica installed since it started.
    pub snapshots: u64,
    /// Bytes in the file store's segments.
    pub data_bytes: u64,
    pub segments: u64,
    /// Segments the cleaner emptied and deleted so far (since start).
    pub segments_deleted: u64,
    /// Live bytes the cleaner copied so far (since start).
    pub bytes_cleaned: u64,
}

/// A snapshot's blocks with each block's data as one byte string (postcard
/// encodes a `Vec<u8>` field byte by byte otherwise: the same bytes, some
/// 20 times the CPU).
mod block_list {
    use serde::{Deserialize, Deserializer, Serializer};
    use serde_bytes::{ByteBuf, Bytes};

    pub fn serialize<S: Serializer>(blocks: &[(u64, Vec<u8>)], s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(blocks.iter().map(|(b, d)| (*b, Bytes::new(d))))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<(u64, Vec<u8>)>, D::Error> {
        let blocks = Vec::<(u64, ByteBuf)>::deserialize(d)?;
        Ok(blocks.into_iter().map(|(b, d)| (b, d.into_vec())).collect())
    }
}

pub fn shard_of(block: u64, shards: u32) -> u32 {
    ((block / REGION_BLOCKS) % shards.max(1) as u64) as u32
}

/// Write one frame and flush it.
pub fn write_frame<M: Serialize>(w: &mut impl Write, msg: &M) -> io::Result<()> {
    silt_replica::frame::write_frame(w, msg)?;
    w.flush()
}

pub fn read_frame<M: DeserializeOwned>(r: &mut impl Read) -> io::Result<M> {
    silt_replica::frame::read_frame(r, MAX_FRAME)
}
