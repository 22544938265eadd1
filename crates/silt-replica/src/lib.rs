//! Replicated logs for Silt (seed 001 ch. 6's Multi-Paxos layer).
//!
//! A replica group is an [OmniPaxos](https://omnipaxos.com/) instance (a
//! Multi-Paxos variant with ballot leader election) driven by this crate:
//! a durable log on local files, a transport between processes, and a
//! deterministic simulator for tests. What the log carries and what applying
//! it means belongs to the layer above (the Hydra volume, `silt-volume`).

pub mod linearizability;
