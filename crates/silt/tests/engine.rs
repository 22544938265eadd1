//! The storage engine through its public API: indexes and policies against
//! models, transactions, recovery of files, the worked examples. One test
//! binary (one link) for all of them; the crash tests, which re-run their
//! own binary as a child process, stay apart.

#[path = "engine/abort_same_key_twice.rs"]
mod abort_same_key_twice;
#[path = "engine/alter.rs"]
mod alter;
#[path = "engine/brin.rs"]
mod brin;
#[path = "engine/concurrent_queries.rs"]
mod concurrent_queries;
#[path = "engine/corruption.rs"]
mod corruption;
#[path = "engine/foreign_keys.rs"]
mod foreign_keys;
#[path = "engine/insert_ignore.rs"]
mod insert_ignore;
#[path = "engine/layers.rs"]
mod layers;
#[path = "engine/oracle.rs"]
mod oracle;
#[path = "engine/pubsub.rs"]
mod pubsub;
#[path = "engine/recency.rs"]
mod recency;
#[path = "engine/remote.rs"]
mod remote;
#[path = "engine/restart.rs"]
mod restart;
#[path = "engine/roles.rs"]
mod roles;
#[path = "engine/row_shape.rs"]
mod row_shape;
#[path = "engine/secondary.rs"]
mod secondary;
#[path = "engine/spatial.rs"]
mod spatial;
#[path = "engine/spatial_leveled.rs"]
mod spatial_leveled;
#[path = "engine/synergy.rs"]
mod synergy;
#[path = "engine/transactions.rs"]
mod transactions;
#[path = "engine/ttl.rs"]
mod ttl;
#[path = "engine/txn.rs"]
mod txn;
#[path = "engine/unique.rs"]
mod unique;
#[path = "engine/valuelist.rs"]
mod valuelist;
#[path = "engine/worked_example.rs"]
mod worked_example;
#[path = "engine/write_prepared.rs"]
mod write_prepared;
#[path = "engine/zorder_leveled.rs"]
mod zorder_leveled;
