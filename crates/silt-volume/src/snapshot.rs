//! Catching a replica up by snapshot (seed 001 §6.5's recovery, for the
//! cases the log cannot serve): a member that joins a shard, or one that
//! missed a reconfiguration, copies the shard's state from a replica that
//! has it, then takes the log from the snapshot's position on.
//!
//! A snapshot is the shard's live blocks at one position `(config, idx)` of
//! the source: the source's driver lists the mapped blocks and their places
//! at that position (a map scan between two turns) and pins its file store
//! so that no segment is deleted; the listed places are then streamed from
//! another thread while the source goes on (segments are append-only, so a
//! listed place keeps the data it had at the position).
//!
//! On the wire (the client protocol, `Request::Snapshot`):
//! `Response::Snapshot(header)`, then `Response::Blocks` frames of at most
//! [`CHUNK_BYTES`], then `Response::Done`.
//!
//! Installing (the receiver): forget the shard's blocks, append every
//! received block to the local file store (synced) and map it, then record
//! the position and the members in the map and checkpoint it, create the
//! configuration's log as compacted at `idx` beside the old one, and put it
//! in place. A crash before the position is recorded leaves the replica
//! where it was (it fetches again); after it, the node finishes the log at
//! its next start.
//!
//! Who catches up this way: a member that joins or missed a change of
//! members, and a member so far behind that the leader's log sync would
//! carry more than `max_sync_bytes` (the leader tells it to, `CatchUp`); such
//! a member keeps the round it promised.

use crate::block_map::{BlockMap, MapError, Position};
use crate::cleaner::Pin;
use crate::file_store::{SharedStore, read_at};
use crate::op::{Place, VolumeOp};
use crate::protocol::{MAGIC, Request, Response, read_frame, shard_of, write_frame};
use serde::{Deserialize, Serialize};
use silt_replica::{LogHandle, LogOptions};
use std::io::{BufReader, BufWriter, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Block data per `Response::Blocks` frame, at most.
pub const CHUNK_BYTES: usize = 4 << 20;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SnapshotHeader {
    pub shard: u32,
    /// The position the snapshot is at: `config`'s log applied below `idx`.
    pub config: u32,
    pub idx: u64,
    /// The configuration's members ([`crate::membership::encode`]).
    pub members: String,
    pub block_size: u32,
    /// Blocks that follow.
    pub blocks: u64,
    /// Client sessions and their last counters applied (see `OpId`).
    pub sessions: Vec<(u64, u64)>,
}

/// A snapshot made by the source's driver, streamed by a client thread.
pub struct SnapshotPlan {
    pub header: SnapshotHeader,
    pub places: Vec<(u64, Place)>,
    /// The file store's segment directory.
    pub dir: PathBuf,
    pub pin: Pin,
}

#[derive(Debug, thiserror::Error)]
pub enum SnapshotError {
    #[error("snapshot from {from}: {source}")]
    Io {
        from: SocketAddr,
        #[source]
        source: std::io::Error,
    },
    #[error("snapshot from {from}: {why}")]
    Refused { from: SocketAddr, why: String },
    #[error("installing a snapshot: {0}")]
    Map(#[from] MapError),
    #[error("installing a snapshot: {0}")]
    Replica(#[from] silt_replica::ReplicaError),
}

/// Stream `plan` to a client (the source's side).
pub fn stream(plan: SnapshotPlan, w: &mut impl Write) -> std::io::Result<()> {
    write_frame(w, &Response::Snapshot(plan.header.clone()))?;
    let mut chunk: Vec<(u64, Vec<u8>)> = Vec::new();
    let mut bytes = 0;
    for (block, place) in &plan.places {
        let data = read_at(&plan.dir, place)?;
        bytes += data.len();
        chunk.push((*block, data));
        if bytes >= CHUNK_BYTES {
            write_frame(w, &Response::Blocks(std::mem::take(&mut chunk)))?;
            bytes = 0;
        }
    }
    if !chunk.is_empty() {
        write_frame(w, &Response::Blocks(chunk))?;
    }
    write_frame(w, &Response::Done)?;
    drop(plan.pin);
    Ok(())
}

/// Fetch `shard`'s snapshot from the node whose client address is `from`
/// and install it (the receiver's side); the configuration's log is
/// created in `log_dir`. Returns the position and the members.
/// What the receiver's volume looks like: a snapshot's blocks must belong to
/// `shard` of a volume of `blocks` blocks in `shards` shards.
#[derive(Debug, Clone, Copy)]
pub struct Target {
    pub shard: u32,
    pub shards: u32,
    pub blocks: u64,
}

/// `log_dir`: where the configuration's log goes; it is created beside it
/// ([`staged`]) and put in place by [`promote`] (the node does, once it
/// has stopped any replica using the old one). `promise`: the round this
/// replica promised in that configuration, if it had a log there.
pub fn install(
    from: SocketAddr,
    target: Target,
    map: &BlockMap,
    store: &SharedStore,
    log_dir: &Path,
    promise: Option<silt_replica::Ballot>,
    log: LogOptions,
) -> Result<(Position, String), SnapshotError> {
    let shard = target.shard;
    let io = |source| SnapshotError::Io { from, source };
    let refused = |why: String| SnapshotError::Refused { from, why };
    let conn = TcpStream::connect_timeout(&from, Duration::from_secs(5)).map_err(io)?;
    conn.set_read_timeout(Some(Duration::from_secs(60)))
        .map_err(io)?;
    let mut w = BufWriter::new(&conn);
    let mut r = BufReader::with_capacity(1 << 20, &conn);
    w.write_all(MAGIC).map_err(io)?;
    write_frame(&mut w, &Request::Snapshot { shard }).map_err(io)?;
    let header = match read_frame::<Response>(&mut r).map_err(io)? {
        Response::Snapshot(h) => h,
        Response::Error(e) | Response::Retry(e) => return Err(refused(e)),
        other => return Err(refused(format!("unexpected answer {other:?}"))),
    };
    if header.shard != shard || header.block_size != map.block_size() {
        return Err(refused(format!(
            "the snapshot is of shard {} with blocks of {} bytes, not shard {shard} with {}",
            header.shard,
            header.block_size,
            map.block_size()
        )));
    }
    map.clear(shard)?;
    let bs = map.block_size() as usize;
    let mut received = 0u64;
    loop {
        match read_frame::<Response>(&mut r).map_err(io)? {
            Response::Blocks(blocks) => {
                let mut places = Vec::with_capacity(blocks.len());
                {
                    let mut s = store.lock();
                    for (b, data) in &blocks {
                        if *b >= target.blocks || shard_of(*b, target.shards) != shard {
                            return Err(refused(format!(
                                "block {b} is not in shard {shard} of a volume of {} blocks",
                                target.blocks
                            )));
                        }
                        if data.len() != bs {
                            return Err(refused(format!(
                                "block {b} has {} bytes, not {bs}",
                                data.len()
                            )));
                        }
                        places.push((*b, s.append(data).map_err(io)?));
                    }
                    s.sync_data().map_err(io)?;
                }
                map.put_blocks(shard, &places)?;
                received += blocks.len() as u64;
            }
            Response::Done => break,
            Response::Error(e) => return Err(refused(e)),
            other => return Err(refused(format!("unexpected frame {other:?}"))),
        }
    }
    if received != header.blocks {
        return Err(refused(format!(
            "{received} blocks arrived, the header announced {}",
            header.blocks
        )));
    }
    let pos = Position {
        config: header.config,
        idx: header.idx as usize,
    };
    map.put_sessions(shard, &header.sessions)?;
    map.set_position(shard, pos, &header.members)?;
    map.checkpoint()?;
    let staged = staged(log_dir);
    remove_if_there(&staged).map_err(io)?;
    LogHandle::<VolumeOp, SharedStore>::create_at(&staged, pos.idx, pos.config, promise, log)?;
    Ok((pos, header.members))
}

/// Where a snapshot's log is made before it replaces the configuration's.
pub fn staged(log_dir: &Path) -> PathBuf {
    log_dir.with_extension("new")
}

fn remove_if_there(dir: &Path) -> std::io::Result<()> {
    match std::fs::remove_dir_all(dir) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

/// Put a staged log in place of the configuration's (if one is staged: it
/// was made after the map recorded the snapshot's position, so it is the
/// one that matches the map).
pub fn promote(log_dir: &Path) -> std::io::Result<()> {
    let staged = staged(log_dir);
    if !staged.join("paxos.log").exists() {
        return Ok(());
    }
    remove_if_there(log_dir)?;
    std::fs::rename(&staged, log_dir)?;
    if let Some(parent) = log_dir.parent() {
        std::fs::File::open(parent)?.sync_all()?;
    }
    Ok(())
}

/// At a node's start: finish what a crash interrupted. A staged log is put
/// in place; a map that records a position above 0 with no log (a crash
/// before the log was made) gets the log, as compacted there.
pub fn finish_log(
    log_dir: &Path,
    idx: usize,
    config: u32,
    log: LogOptions,
) -> Result<(), SnapshotError> {
    promote(log_dir)
        .map_err(|e| SnapshotError::Replica(silt_replica::ReplicaError::io(log_dir, e)))?;
    if log_dir.join("paxos.log").exists() || idx == 0 {
        return Ok(());
    }
    LogHandle::<VolumeOp, SharedStore>::create_at(log_dir, idx, config, None, log)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::file_store::{FileStore, Mode};
    use std::io::Read;
    use std::net::TcpListener;

    /// A source that answers one snapshot request with `frames`.
    fn source(frames: Vec<Response>) -> SocketAddr {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        std::thread::spawn(move || {
            let (c, _) = l.accept().unwrap();
            let mut r = BufReader::new(&c);
            let mut w = BufWriter::new(&c);
            let mut magic = [0u8; 4];
            r.read_exact(&mut magic).unwrap();
            let _: Request = read_frame(&mut r).unwrap();
            for f in frames {
                write_frame(&mut w, &f).unwrap();
            }
        });
        addr
    }

    fn header(blocks: u64) -> Response {
        Response::Snapshot(SnapshotHeader {
            shard: 1,
            config: 2,
            idx: 40,
            members: "1=127.0.0.1:1/127.0.0.1:2,2=127.0.0.1:3/127.0.0.1:4".into(),
            block_size: 4096,
            blocks,
            sessions: vec![(SESSION, 5)],
        })
    }

    const SESSION: u64 = crate::op::OpId::CLIENT | 3;

    fn install_from(
        frames: Vec<Response>,
    ) -> (
        tempfile::TempDir,
        BlockMap,
        Result<(Position, String), SnapshotError>,
    ) {
        let dir = tempfile::tempdir().unwrap();
        let map = BlockMap::open(&dir.path().join("map"), 2, 4096).unwrap();
        let store = SharedStore::new(
            FileStore::open(&dir.path().join("data"), Mode::Reference, 4096, 1 << 20).unwrap(),
        );
        let target = Target {
            shard: 1,
            shards: 2,
            blocks: 4096,
        };
        let r = install(
            source(frames),
            target,
            &map,
            &store,
            &dir.path().join("cfg-2"),
            None,
            LogOptions::default(),
        );
        (dir, map, r)
    }

    #[test]
    fn a_snapshot_is_installed_with_its_position_sessions_and_log() {
        // Shard 1 of 2: regions 1, 3, ... (blocks 256..512, 768..1024, ...).
        let (dir, map, r) = install_from(vec![
            header(2),
            Response::Blocks(vec![(300, vec![7; 4096]), (800, vec![8; 4096])]),
            Response::Done,
        ]);
        let (pos, members) = r.unwrap();
        assert_eq!(pos, Position { config: 2, idx: 40 });
        assert!(members.starts_with("1=127.0.0.1:1/"));
        assert_eq!(map.position(1).unwrap(), Some(pos));
        assert!(map.place(1, 300).unwrap().is_some());
        assert_eq!(map.sessions(1).unwrap(), vec![(SESSION, 5)]);
        assert!(dir.path().join("cfg-2.new/paxos.log").exists());
        promote(&dir.path().join("cfg-2")).unwrap();
        assert!(dir.path().join("cfg-2/paxos.log").exists());
        assert!(!dir.path().join("cfg-2.new").exists());
    }

    #[test]
    fn a_bad_snapshot_is_refused_and_names_what_was_wrong() {
        for (frames, want) in [
            (
                vec![
                    header(1),
                    Response::Blocks(vec![(5, vec![1; 4096])]),
                    Response::Done,
                ],
                "not in shard 1",
            ),
            (
                vec![
                    header(1),
                    Response::Blocks(vec![(9000, vec![1; 4096])]),
                    Response::Done,
                ],
                "volume of 4096 blocks",
            ),
            (
                vec![
                    header(1),
                    Response::Blocks(vec![(300, vec![1; 100])]),
                    Response::Done,
                ],
                "100 bytes",
            ),
            (
                vec![
                    header(2),
                    Response::Blocks(vec![(300, vec![1; 4096])]),
                    Response::Done,
                ],
                "announced 2",
            ),
            (vec![Response::Error("no".into())], "no"),
        ] {
            let (dir, map, r) = install_from(frames);
            let e = r.unwrap_err().to_string();
            assert!(e.contains(want), "{e} (wanted {want})");
            // The replica stays where it was: no position, no log.
            assert_eq!(map.position(1).unwrap(), None);
            assert!(!dir.path().join("cfg-2.new/paxos.log").exists());
        }
    }
}
