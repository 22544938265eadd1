//! The LSM framework: in-memory components, disk components, flush, merge,
//! reconciliation, merge policies and the background scheduler.

pub mod background;
pub mod hooks;
pub mod kind;
pub mod memtable;
pub mod merge_iter;
pub mod policy;
pub mod spatial;
pub mod spatial_partitioning;
pub mod tree;

pub use background::{Background, MemoryGroup};
pub use kind::{PkSplit, Reconcile, TreeKind};
pub use memtable::MemTable;
pub use tree::{LsmTree, RemoteStats, Snapshot, TreeConfig, TreeStats};
