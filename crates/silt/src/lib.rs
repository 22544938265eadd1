//! Silt core library: an embeddable LSM storage engine.
//!
//! Layers, bottom to top: [`value`] (records, keys), [`storage`] (component
//! files, blocks, blooms, cache), [`lsm`] (memory and disk components, flush,
//! merge, policies), [`dataset`] / [`db`] (datasets, partitions, catalog).
//! See `docs/architecture.md` for the map.

pub mod clock;
pub mod dataset;
pub mod db;
pub mod error;
pub mod geo;
pub mod index;
pub mod lsm;
pub mod pubsub;
pub mod schema;
pub mod storage;
pub mod synergy;
pub mod txn;
pub mod value;
pub mod varint;
pub mod workload;

pub use dataset::{
    BatchOptions, BatchReport, CommitInfo, Dataset, DatasetScan, DatasetStats, IndexHit,
    JoinPredicate, ListItem, ListRead, PendingAck, PreparedBatch, Query, QueryHit, QueryOptions,
    QueryResults, QueryStats, RowShape, SequenceValues, SweepReport, Transaction, TxnLimits,
    TxnQuery, TxnScan, WriteMode, ZoneMapReads,
};
pub use db::roles::{Privileges, Role};
pub use db::spaces::SpaceDef;
pub use db::views::ViewDef;
pub use db::{Alteration, Database, DbOptions, DbStats, RecoverySummary};
pub use error::{Error, Result};
/// The LevelDB++ recency indexes (now `index::recency`).
pub use index::recency;
pub use index::{IndexDef, IndexKind, IndexOptions, ReconcileOption};
pub use schema::{
    CheckDef, DatasetDef, FieldDefault, FkAction, ForeignKeyDef, Identity, MaterializedDef, Narrow,
    RecordCheck, RemoteDef, SequenceDef, TtlDef, ViewColumn, sequence_name,
};
pub use txn::Durability;
pub use value::{FieldType, Geometry, Value};
