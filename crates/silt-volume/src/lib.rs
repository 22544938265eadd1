//! Hydra (seed 001 ch. 6): a block volume replicated by `silt-replica`,
//! whose logical-to-physical block map is a Silt dataset, served to block
//! clients over NBD.

pub mod block_map;
pub mod cleaner;
pub mod client;
pub mod device;
mod driver;
pub mod file_store;
pub mod membership;
pub mod nbd;
pub mod node;
pub mod op;
pub mod protocol;
mod segment_pool;
pub mod snapshot;
