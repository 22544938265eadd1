//! What Hydra's replicated log carries: one operation on the volume per entry.

use serde::{Deserialize, Serialize};
use silt_replica::{Entry, NoSnapshot};

/// Who asked for an operation, so that the node that proposed it recognizes
/// it among the decided ones, and a retried operation is applied once.
///
/// A client's operations carry the client's session (`node` with
/// [`OpId::CLIENT`] set, random per client) and its own increasing counter:
/// each replica's block map keeps the last counter applied per session, and
/// an operation at or below it (the same operation retried at another leader
/// after the first attempt was decided) is not applied again. Operations a
/// node makes up itself (global reads' barriers, clients that send none)
/// carry the node's id and are never deduplicated.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct OpId {
    pub node: u64,
    pub seq: u64,
}

impl OpId {
    /// The bit marking a client's session.
    pub const CLIENT: u64 = 1 << 63;

    /// A client's operation (deduplicated by session).
    pub fn session(&self) -> Option<u64> {
        (self.node & Self::CLIENT != 0).then_some(self.node)
    }
}

/// Where a write's data is: in the entry, or at a place in this replica's
/// file store (the reference trick, seed 001 §6.4). A place is meaningful
/// only on the replica that wrote it: entries travel between replicas with
/// their data inline ([`silt_replica::Payloads::expand`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Payload {
    /// Bytes, encoded as one byte string (not a sequence of integers: the
    /// same postcard encoding, copied at once).
    Inline(#[serde(with = "serde_bytes")] Vec<u8>),
    /// One place per block, in order.
    Stored(Vec<Place>),
}

/// Bytes in a segment of this replica's file store, and their checksum.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Place {
    pub segment: u32,
    pub offset: u64,
    pub len: u32,
    pub crc: u32,
}

/// One operation on the volume.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum VolumeOp {
    /// Write whole blocks from `first` on (the data's length is a multiple
    /// of the block size). An extent is written atomically; after that its
    /// blocks live on their own (deleting one block inside it, as Fig. 6.6
    /// does, leaves the others).
    Write { id: OpId, first: u64, data: Payload },
    /// Delete `count` blocks from `first` on (they read as zeros after).
    Delete { id: OpId, first: u64, count: u64 },
    /// Nothing to apply: a linearizable read is answered once this is
    /// applied (the read is ordered after every write decided before it).
    Barrier { id: OpId },
}

impl VolumeOp {
    pub fn id(&self) -> OpId {
        match self {
            VolumeOp::Write { id, .. } | VolumeOp::Delete { id, .. } | VolumeOp::Barrier { id } => {
                *id
            }
        }
    }
}

impl Entry for VolumeOp {
    type Snapshot = NoSnapshot;
}
