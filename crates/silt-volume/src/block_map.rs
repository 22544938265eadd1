//! The logical-to-physical block map (seed 001 §6.3) of one replica: a Silt
//! dataset per shard, `blocks_<shard>` (`block` -> the block's place in this
//! replica's file store), `applied` (`shard` -> the configuration and the
//! index in its log up to which the map is applied) and `members` (`shard`
//! -> the configuration's members, see [`crate::membership`]). They change
//! in one Silt transaction per batch of decided operations, so the map and
//! its position never disagree.
//!
//! The database runs with `Durability::None`: the replicated log is what makes
//! writes durable, and a map that lost its last transactions in a crash is
//! brought up to date by applying the log again from its `applied` index
//! (applying an entry twice leaves the same map, since places come from the
//! log entries themselves). The log must keep every entry above the map's
//! durable position: it is not trimmed before a checkpoint of this database.

use crate::file_store::FileStore;
use crate::op::{Payload, Place, VolumeOp};
use silt::{Database, Dataset, DatasetDef, DbOptions, Durability, FieldType, Value};
use std::ops::Bound;
use std::path::Path;
use std::sync::Arc;

#[derive(Debug, thiserror::Error)]
pub enum MapError {
    #[error("block map: {0}")]
    Silt(#[from] silt::Error),
    #[error("block map: file store: {0}")]
    Store(#[from] std::io::Error),
    #[error("block map: a stored record is malformed: {0}")]
    Malformed(String),
    #[error("block map: a write of {len} bytes is not whole blocks of {block_size}")]
    NotWholeBlocks { len: usize, block_size: u32 },
}

pub struct BlockMap {
    db: Arc<Database>,
    blocks: Vec<Arc<Dataset>>,
    applied: Arc<Dataset>,
    members: Arc<Dataset>,
    block_size: u32,
}

/// Where a shard's map is: `config`'s log is applied below `idx`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Position {
    pub config: u32,
    pub idx: usize,
}

fn int(v: &Value, field: &str) -> Result<i64, MapError> {
    v.get(field)
        .and_then(|f| f.as_i64())
        .ok_or_else(|| MapError::Malformed(format!("no integer {field} in {v:?}")))
}

impl BlockMap {
    /// Open (or create) the maps of `shards` shards in `dir`.
    pub fn open(dir: &Path, shards: u32, block_size: u32) -> Result<BlockMap, MapError> {
        let opts = DbOptions {
            durability: Durability::None,
            block_cache_bytes: 32 << 20,
            ..DbOptions::default()
        };
        let db = Arc::new(Database::open(dir, opts)?);
        let get_or_create = |def: DatasetDef| -> Result<Arc<Dataset>, MapError> {
            match db.dataset(&def.name) {
                Ok(ds) => Ok(ds),
                Err(_) => Ok(db.create_dataset(def)?),
            }
        };
        let mut blocks = Vec::new();
        for s in 0..shards {
            blocks.push(get_or_create(
                DatasetDef::new(&format!("blocks_{s}"), &["block"])
                    .field("block", FieldType::Int)
                    .field("seg", FieldType::Int)
                    .field("off", FieldType::Int)
                    .field("len", FieldType::Int)
                    .field("crc", FieldType::Int)
                    .memory_budget(8 << 20),
            )?);
        }
        let applied = get_or_create(
            DatasetDef::new("applied", &["shard"])
                .field("shard", FieldType::Int)
                .field("config", FieldType::Int)
                .field("idx", FieldType::Int)
                .memory_budget(1 << 20),
        )?;
        let members = get_or_create(
            DatasetDef::new("members", &["shard"])
                .field("shard", FieldType::Int)
                .field("config", FieldType::Int)
                .field("members", FieldType::String)
                .memory_budget(1 << 20),
        )?;
        Ok(BlockMap {
            db,
            blocks,
            applied,
            members,
            block_size,
        })
    }

    pub fn block_size(&self) -> u32 {
        self.block_size
    }

    /// The configuration and log index from which `shard`'s entries are
    /// still to be applied; None for a map that was never written.
    pub fn position(&self, shard: u32) -> Result<Option<Position>, MapError> {
        match self.applied.get(&[Value::Int(shard as i64)])? {
            Some(r) => Ok(Some(Position {
                config: int(&r, "config")? as u32,
                idx: int(&r, "idx")? as usize,
            })),
            None => Ok(None),
        }
    }

    /// The members of `shard`'s configuration as last recorded (the
    /// configuration number and [`crate::membership::encode`]'s text).
    pub fn members(&self, shard: u32) -> Result<Option<(u32, String)>, MapError> {
        match self.members.get(&[Value::Int(shard as i64)])? {
            Some(r) => {
                let m = r
                    .get("members")
                    .and_then(|m| m.as_str())
                    .ok_or_else(|| MapError::Malformed(format!("no members in {r:?}")))?
                    .to_owned();
                Ok(Some((int(&r, "config")? as u32, m)))
            }
            None => Ok(None),
        }
    }

    /// Record that `shard` is at `pos` with `members` (a new configuration
    /// begins, or a snapshot was installed), in one transaction.
    pub fn set_position(&self, shard: u32, pos: Position, members: &str) -> Result<(), MapError> {
        let mut txn = self.db.begin()?;
        txn.upsert(&self.applied, position_record(shard, pos))?;
        txn.upsert(
            &self.members,
            Value::Object(vec![
                ("shard".into(), Value::Int(shard as i64)),
                ("config".into(), Value::Int(pos.config as i64)),
                ("members".into(), Value::String(members.to_owned())),
            ]),
        )?;
        txn.commit()?;
        Ok(())
    }

    /// Forget every block of `shard` (before a snapshot is installed).
    pub fn clear(&self, shard: u32) -> Result<(), MapError> {
        let ds = &self.blocks[shard as usize];
        loop {
            let mut keys = Vec::new();
            for r in ds.scan(Bound::Unbounded, Bound::Unbounded)?.take(10_000) {
                keys.push(int(&r?, "block")?);
            }
            if keys.is_empty() {
                return Ok(());
            }
            let mut txn = self.db.begin()?;
            for k in keys {
                txn.delete(ds, &[Value::Int(k)])?;
            }
            txn.commit()?;
        }
    }

    /// Map blocks of `shard` to places (a snapshot's blocks, installed).
    pub fn put_blocks(&self, shard: u32, blocks: &[(u64, Place)]) -> Result<(), MapError> {
        let ds = &self.blocks[shard as usize];
        let mut txn = self.db.begin()?;
        for (b, p) in blocks {
            txn.upsert(ds, record(*b, p))?;
        }
        txn.commit()?;
        Ok(())
    }

    /// Apply decided operations of `shard` (in log order, `next` being the
    /// index after the last). An inline write (the baseline without the
    /// reference trick) is written to the file store here.
    pub fn apply(
        &self,
        shard: u32,
        config: u32,
        ops: &[(usize, VolumeOp)],
        store: &mut FileStore,
    ) -> Result<(), MapError> {
        let Some((last, _)) = ops.last() else {
            return Ok(());
        };
        let ds = &self.blocks[shard as usize];
        let mut txn = self.db.begin()?;
        for (_, op) in ops {
            match op {
                VolumeOp::Write { first, data, .. } => {
                    let places = match data {
                        Payload::Stored(places) => places.clone(),
                        Payload::Inline(bytes) => {
                            let bs = self.block_size as usize;
                            if !bytes.len().is_multiple_of(bs) {
                                return Err(MapError::NotWholeBlocks {
                                    len: bytes.len(),
                                    block_size: self.block_size,
                                });
                            }
                            let mut v = Vec::with_capacity(bytes.len() / bs);
                            for chunk in bytes.chunks(bs) {
                                v.push(store.append(chunk)?);
                            }
                            v
                        }
                    };
                    for (i, p) in places.iter().enumerate() {
                        txn.upsert(ds, record(first + i as u64, p))?;
                    }
                }
                VolumeOp::Delete { first, count, .. } => {
                    for b in *first..first.saturating_add(*count) {
                        txn.delete(ds, &[Value::Int(b as i64)])?;
                    }
                }
                VolumeOp::Barrier { .. } => {}
            }
        }
        txn.upsert(
            &self.applied,
            position_record(
                shard,
                Position {
                    config,
                    idx: *last + 1,
                },
            ),
        )?;
        txn.commit()?;
        Ok(())
    }

    /// Where `block` of `shard` is, if it was written (and not deleted).
    pub fn place(&self, shard: u32, block: u64) -> Result<Option<Place>, MapError> {
        let Some(r) = self.blocks[shard as usize].get(&[Value::Int(block as i64)])? else {
            return Ok(None);
        };
        Ok(Some(Place {
            segment: int(&r, "seg")? as u32,
            offset: int(&r, "off")? as u64,
            len: int(&r, "len")? as u32,
            crc: int(&r, "crc")? as u32,
        }))
    }

    /// Every mapped block of `shard` and its place, in block order, given to
    /// `f` one at a time (the cleaner's scans).
    pub fn for_each(&self, shard: u32, mut f: impl FnMut(u64, Place)) -> Result<(), MapError> {
        let ds = &self.blocks[shard as usize];
        for r in ds.scan(Bound::Unbounded, Bound::Unbounded)? {
            let r = r?;
            let place = Place {
                segment: int(&r, "seg")? as u32,
                offset: int(&r, "off")? as u64,
                len: int(&r, "len")? as u32,
                crc: int(&r, "crc")? as u32,
            };
            f(int(&r, "block")? as u64, place);
        }
        Ok(())
    }

    /// Point blocks of `shard` at their new places (`(block, old, new)`),
    /// each only if it is still at `old` (a block written again since was
    /// not moved). One transaction; returns how many moved.
    pub fn relocate(&self, shard: u32, moves: &[(u64, Place, Place)]) -> Result<usize, MapError> {
        if moves.is_empty() {
            return Ok(0);
        }
        let ds = &self.blocks[shard as usize];
        let mut txn = self.db.begin()?;
        let mut moved = 0;
        for (block, old, new) in moves {
            if self.place(shard, *block)? == Some(*old) {
                txn.upsert(ds, record(*block, new))?;
                moved += 1;
            }
        }
        txn.commit()?;
        Ok(moved)
    }

    /// Make the map durable up to what was applied (before the log may be
    /// trimmed below it).
    pub fn checkpoint(&self) -> Result<(), MapError> {
        self.db.checkpoint()?;
        Ok(())
    }

    pub fn close(&self) -> Result<(), MapError> {
        self.db.close()?;
        Ok(())
    }
}

fn position_record(shard: u32, pos: Position) -> Value {
    Value::Object(vec![
        ("shard".into(), Value::Int(shard as i64)),
        ("config".into(), Value::Int(pos.config as i64)),
        ("idx".into(), Value::Int(pos.idx as i64)),
    ])
}

fn record(block: u64, p: &Place) -> Value {
    Value::Object(vec![
        ("block".into(), Value::Int(block as i64)),
        ("seg".into(), Value::Int(p.segment as i64)),
        ("off".into(), Value::Int(p.offset as i64)),
        ("len".into(), Value::Int(p.len as i64)),
        ("crc".into(), Value::Int(p.crc as i64)),
    ])
}
