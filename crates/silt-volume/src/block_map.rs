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
use std::collections::HashMap;
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
    /// `(shard, session)` -> the last counter applied (see `OpId`).
    sessions: Arc<Dataset>,
    /// The sessions' counters as last read or written (each write of a
    /// client checks its session: a lookup in memory, not in the dataset).
    /// At most `SESSION_CACHE` entries; past that it starts again empty.
    session_cache: parking_lot::Mutex<HashMap<(u32, u64), u64>>,
    block_size: u32,
}

/// Sessions whose counters are kept in memory (the dataset has them all).
const SESSION_CACHE: usize = 1 << 16;

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
        let sessions = get_or_create(
            DatasetDef::new("sessions", &["shard", "session"])
                .field("shard", FieldType::Int)
                .field("session", FieldType::Int)
                .field("seq", FieldType::Int)
                .memory_budget(2 << 20),
        )?;
        Ok(BlockMap {
            db,
            blocks,
            applied,
            members,
            sessions,
            session_cache: parking_lot::Mutex::new(HashMap::new()),
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

    /// The last counter applied for a client's session (0: none).
    fn session_seq(&self, shard: u32, session: u64) -> Result<u64, MapError> {
        if let Some(seq) = self.session_cache.lock().get(&(shard, session)) {
            return Ok(*seq);
        }
        let seq = match self
            .sessions
            .get(&[Value::Int(shard as i64), Value::Int(session as i64)])?
        {
            Some(r) => int(&r, "seq")? as u64,
            None => 0,
        };
        self.remember_sessions(shard, [(session, seq)]);
        Ok(seq)
    }

    fn remember_sessions(&self, shard: u32, sessions: impl IntoIterator<Item = (u64, u64)>) {
        let mut cache = self.session_cache.lock();
        for (session, seq) in sessions {
            if cache.len() >= SESSION_CACHE {
                cache.clear();
            }
            cache.insert((shard, session), seq);
        }
    }

    /// Every client session of `shard` and its last counter (a snapshot
    /// carries them, so a retry is still recognized at the new replica).
    pub fn sessions(&self, shard: u32) -> Result<Vec<(u64, u64)>, MapError> {
        let lo = self
            .sessions
            .encode_pk_prefix(&[Value::Int(shard as i64)])?;
        let hi = silt::value::prefix_upper_bound(&lo);
        let mut out = Vec::new();
        for r in self
            .sessions
            .scan_raw(Bound::Included(lo), Bound::Excluded(hi))?
        {
            let r = r?;
            out.push((int(&r, "session")? as u64, int(&r, "seq")? as u64));
        }
        Ok(out)
    }

    /// Record sessions of `shard` (a snapshot's, installed).
    pub fn put_sessions(&self, shard: u32, sessions: &[(u64, u64)]) -> Result<(), MapError> {
        let mut txn = self.db.begin()?;
        for (session, seq) in sessions {
            txn.upsert(&self.sessions, session_record(shard, *session, *seq))?;
        }
        txn.commit()?;
        self.remember_sessions(shard, sessions.iter().copied());
        Ok(())
    }

    /// Forget every block of `shard` (before a snapshot is installed).
    pub fn clear(&self, shard: u32) -> Result<(), MapError> {
        self.session_cache.lock().retain(|(s, _), _| *s != shard);
        let stale = self.sessions(shard)?;
        if !stale.is_empty() {
            let mut txn = self.db.begin()?;
            for (session, _) in stale {
                txn.delete(
                    &self.sessions,
                    &[Value::Int(shard as i64), Value::Int(session as i64)],
                )?;
            }
            txn.commit()?;
        }
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
        // Sessions' last counters as this batch moves them.
        let mut seen: HashMap<u64, u64> = HashMap::new();
        for (_, op) in ops {
            if let Some(session) = op.id().session()
                && !matches!(op, VolumeOp::Barrier { .. })
            {
                let last = match seen.get(&session) {
                    Some(l) => *l,
                    None => self.session_seq(shard, session)?,
                };
                if op.id().seq <= last {
                    // The same operation, retried after it was decided.
                    continue;
                }
                seen.insert(session, op.id().seq);
            }
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
        for (session, seq) in &seen {
            txn.upsert(&self.sessions, session_record(shard, *session, *seq))?;
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
        self.remember_sessions(shard, seen);
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

fn session_record(shard: u32, session: u64, seq: u64) -> Value {
    Value::Object(vec![
        ("shard".into(), Value::Int(shard as i64)),
        ("session".into(), Value::Int(session as i64)),
        ("seq".into(), Value::Int(seq as i64)),
    ])
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::file_store::Mode;
    use crate::op::OpId;

    fn write(node: u64, seq: u64, block: u64, byte: u8) -> VolumeOp {
        VolumeOp::Write {
            id: OpId { node, seq },
            first: block,
            data: Payload::Inline(vec![byte; 4096]),
        }
    }

    fn byte_at(map: &BlockMap, store: &FileStore, block: u64) -> Option<u8> {
        let p = map.place(0, block).unwrap()?;
        Some(store.read(&p).unwrap()[0])
    }

    /// A write retried at a new leader after its first attempt was decided
    /// is in the log twice; applying it again would undo a write that came
    /// between. It is applied once per client session and counter.
    #[test]
    fn a_retried_client_write_is_applied_once() {
        let dir = tempfile::tempdir().unwrap();
        let map = BlockMap::open(&dir.path().join("map"), 1, 4096).unwrap();
        let mut store =
            FileStore::open(&dir.path().join("data"), Mode::Inline, 4096, 1 << 20).unwrap();
        let a = OpId::CLIENT | 7;
        let b = OpId::CLIENT | 9;
        // a's write, b's write of the same block, a's retry: b's stays.
        map.apply(0, 1, &[(0, write(a, 1, 5, 1))], &mut store)
            .unwrap();
        map.apply(
            0,
            1,
            &[(1, write(b, 1, 5, 2)), (2, write(a, 1, 5, 1))],
            &mut store,
        )
        .unwrap();
        assert_eq!(byte_at(&map, &store, 5), Some(2));
        // a's next operation is applied; so are a node's own, repeated.
        map.apply(0, 1, &[(3, write(a, 2, 5, 3))], &mut store)
            .unwrap();
        assert_eq!(byte_at(&map, &store, 5), Some(3));
        map.apply(
            0,
            1,
            &[(4, write(2, 1, 6, 4)), (5, write(2, 1, 6, 5))],
            &mut store,
        )
        .unwrap();
        assert_eq!(byte_at(&map, &store, 6), Some(5));
        let mut sessions = map.sessions(0).unwrap();
        sessions.sort();
        assert_eq!(sessions, vec![(a, 2), (b, 1)]);
        // Sessions travel with a snapshot and go with a cleared shard.
        map.clear(0).unwrap();
        assert!(map.sessions(0).unwrap().is_empty());
        map.put_sessions(0, &[(a, 2)]).unwrap();
        map.apply(0, 1, &[(6, write(a, 2, 5, 9))], &mut store)
            .unwrap();
        assert_eq!(map.place(0, 5).unwrap(), None);
    }
}
