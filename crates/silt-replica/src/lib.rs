//! Replicated logs for Silt (seed 001 ch. 6's Multi-Paxos layer).
//!
//! A replica group is an [OmniPaxos](https://omnipaxos.com/) instance (a
//! Multi-Paxos variant with ballot leader election) driven by this crate:
//! - [`log_store`]: the durable log of one replica on a local file, with a
//!   hook ([`Payloads`]) that lets the layer above keep large payloads out of
//!   the log (Hydra's reference trick);
//! - [`group`]: one replica driven by its owner, syncing before anything
//!   leaves it;
//! - [`sim`]: a deterministic simulation of a group under message loss,
//!   delay, duplication, cut links and crashes, with the checks consensus
//!   promises;
//! - [`transport`]: ordered sessions between replica processes over TCP;
//! - [`linearizability`]: a checker for recorded client histories.
//!
//! What the log carries and what applying it means belongs to the layer
//! above (the Hydra volume, `silt-volume`).

pub mod error;
pub mod frame;
pub mod group;
pub mod linearizability;
pub mod log_store;
pub mod sim;
pub mod transport;

pub use error::{ReplicaError, Result};
pub use group::{Decided, Group, GroupConfig};
pub use log_store::{ChunkTag, Inline, LogHandle, LogOptions, LogStats, OpenSummary, Payloads};
pub use omnipaxos::ballot_leader_election::Ballot;
pub use omnipaxos::messages::Message;
pub use omnipaxos::storage::{Entry, NoSnapshot, StopSign};
pub use omnipaxos::util::NodeId;
pub use transport::{Event, Transport};
