//! Silt core library: an embeddable LSM storage engine.
//!
//! Layers, bottom to top: [`value`] (records, keys), [`storage`] (component
//! files, blocks, blooms, cache), [`lsm`] (memory and disk components, flush,
//! merge, policies), [`dataset`] / [`db`] (datasets, partitions, catalog).
//! See `docs/architecture.md` for the map.

pub mod dataset;
pub mod db;
pub mod error;
pub mod index;
pub mod lsm;
pub mod schema;
pub mod storage;
pub mod txn;
pub mod txn_ctx;
pub mod value;

pub use dataset::{
    BatchOptions, BatchReport, Dataset, DatasetScan, DatasetStats, IndexHit, WriteMode,
};
pub use db::{Database, DbOptions, DbStats, RecoverySummary};
pub use error::{Error, Result};
pub use index::{IndexDef, IndexKind};
pub use schema::DatasetDef;
pub use txn::Durability;
pub use value::{FieldType, Value};
