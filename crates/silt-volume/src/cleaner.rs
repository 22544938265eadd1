//! Online space reclamation of a replica's file store: segment cleaning.
//!
//! The text reclaims overwritten and deleted blocks only by an offline
//! vacuum. Here each replica cleans its own segments while it serves (places
//! are replica-local, so cleaning is never replicated):
//!
//! 1. **Scan.** Once a segment's worth of new data was appended since the
//!    last scan (or at a checkpoint, if any was), the block map is scanned
//!    for the live bytes of each segment. The sealed segments whose live
//!    share is at most [`Cleaner::max_live`] are queued, emptiest first;
//!    each in turn becomes the victim, and its live blocks are listed.
//! 2. **Copy.** A bounded amount per driver turn (the driver serves
//!    operations in between): each live block is read (its CRC checked),
//!    appended to the current segment, the store synced, and the map
//!    repointed in one transaction, for each block only if it is still where
//!    it was (a block written since keeps its new place).
//! 3. **Retire.** A copied segment waits for the next map checkpoint (until
//!    then, a crash could bring back a map pointing into it).
//! 4. **Delete.** A retired segment is deleted once no entry left in the log
//!    refers to it: a log entry is replayed after a crash and shipped to
//!    lagging replicas until it is trimmed, and the log is trimmed only
//!    below what every replica has durably applied. Nothing is deleted while
//!    a snapshot is being streamed from the store ([`Cleaner::pin`]).

use crate::block_map::{BlockMap, MapError};
use crate::file_store::FileStore;
use crate::op::{Payload, Place, VolumeOp};
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

/// What the cleaner did, for `silt volume` and tests.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CleanerStats {
    pub scans: u64,
    pub segments_cleaned: u64,
    pub bytes_copied: u64,
    pub segments_deleted: u64,
}

struct Victim {
    segment: u32,
    blocks: Vec<(u64, Place)>,
    next: usize,
}

/// The cleaner of one shard's file store, driven by the node's driver.
pub struct Cleaner {
    shard: u32,
    /// Scan again once this many bytes were appended since the last scan.
    scan_after: u64,
    /// A segment is cleaned when at most this share of it is live.
    pub max_live: f64,
    /// Bytes copied per [`Cleaner::step`] at most.
    pub step_bytes: u64,
    appended_at_scan: u64,
    /// Segments chosen by the last scan, emptiest first.
    queue: VecDeque<u32>,
    victim: Option<Victim>,
    /// Copied, waiting for a map checkpoint.
    copied: Vec<u32>,
    /// No durable map entry refers to these; deleted when no log entry does.
    retired: BTreeSet<u32>,
    stats: CleanerStats,
    /// Snapshots being streamed: no segment is deleted meanwhile.
    pins: Arc<AtomicUsize>,
}

/// Keeps the cleaner from deleting segments while it lives.
pub struct Pin(Arc<AtomicUsize>);

impl Drop for Pin {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

impl Cleaner {
    /// `segment_bytes`: the store's segment size (scans happen about once
    /// per segment written).
    pub fn new(shard: u32, segment_bytes: u64) -> Cleaner {
        Cleaner {
            shard,
            scan_after: segment_bytes.max(1),
            max_live: 0.5,
            step_bytes: 4 << 20,
            appended_at_scan: 0,
            queue: VecDeque::new(),
            victim: None,
            copied: Vec::new(),
            retired: BTreeSet::new(),
            stats: CleanerStats::default(),
            pins: Arc::new(AtomicUsize::new(0)),
        }
    }

    pub fn stats(&self) -> CleanerStats {
        self.stats
    }

    /// No segment is deleted until the returned pin is dropped (the blocks
    /// of a snapshot are read after the map moved on).
    pub fn pin(&self) -> Pin {
        self.pins.fetch_add(1, Ordering::AcqRel);
        Pin(self.pins.clone())
    }

    /// Segments being cleaned or waiting to be deleted.
    pub fn busy(&self) -> bool {
        self.victim.is_some()
            || !self.queue.is_empty()
            || !self.copied.is_empty()
            || !self.retired.is_empty()
    }

    /// One bounded piece of work: scan if it is time (`idle`: scan if
    /// anything at all was appended since the last scan, so that garbage
    /// does not stay once writes stop), take the next victim, or copy a piece
    /// of the current one.
    pub fn step(
        &mut self,
        map: &BlockMap,
        store: &mut FileStore,
        idle: bool,
    ) -> Result<(), MapError> {
        if self.victim.is_none() && self.queue.is_empty() {
            let appended = store.stats().data_bytes_written;
            let since = appended.saturating_sub(self.appended_at_scan);
            if since >= self.scan_after || (idle && since > 0) {
                self.appended_at_scan = appended;
                self.scan(map, store)?;
            }
        }
        if self.victim.is_none()
            && let Some(segment) = self.queue.pop_front()
        {
            let mut blocks = Vec::new();
            map.for_each(self.shard, |b, p| {
                if p.segment == segment {
                    blocks.push((b, p));
                }
            })?;
            self.victim = Some(Victim {
                segment,
                blocks,
                next: 0,
            });
        }
        let Some(v) = self.victim.as_mut() else {
            return Ok(());
        };
        let mut moves = Vec::new();
        let mut bytes = 0u64;
        while v.next < v.blocks.len() && bytes < self.step_bytes {
            let (block, old) = v.blocks[v.next];
            v.next += 1;
            let data = store.read(&old)?;
            let new = store.append(&data)?;
            bytes += data.len() as u64;
            moves.push((block, old, new));
        }
        // The copies are on disk before the map points at them.
        store.sync_data()?;
        map.relocate(self.shard, &moves)?;
        self.stats.bytes_copied += bytes;
        if v.next >= v.blocks.len() {
            self.copied.push(v.segment);
            self.stats.segments_cleaned += 1;
            self.victim = None;
        }
        Ok(())
    }

    fn scan(&mut self, map: &BlockMap, store: &FileStore) -> Result<(), MapError> {
        self.stats.scans += 1;
        let mut live: BTreeMap<u32, u64> = BTreeMap::new();
        map.for_each(self.shard, |_, p| {
            *live.entry(p.segment).or_default() += p.len as u64;
        })?;
        let current = store.current_segment();
        let busy: BTreeSet<u32> = self
            .copied
            .iter()
            .chain(self.retired.iter())
            .copied()
            .collect();
        let mut chosen: Vec<(f64, u32)> = store
            .segment_sizes()?
            .into_iter()
            .filter(|(n, size)| *n != current && *size > 0 && !busy.contains(n))
            .map(|(n, size)| {
                let l = live.get(&n).copied().unwrap_or(0);
                (l as f64 / size as f64, n)
            })
            .filter(|(share, _)| *share <= self.max_live)
            .collect();
        chosen.sort_by(|a, b| a.0.total_cmp(&b.0));
        self.queue = chosen.into_iter().map(|(_, n)| n).collect();
        Ok(())
    }

    /// The block map was checkpointed: segments copied before it are no
    /// longer referred to by the durable map.
    pub fn checkpointed(&mut self) {
        self.retired.extend(self.copied.drain(..));
    }

    /// The retired segments that entries of `log` (those not yet trimmed)
    /// refer to.
    pub fn referenced(&self, log: &[VolumeOp]) -> BTreeSet<u32> {
        let mut out = BTreeSet::new();
        if self.retired.is_empty() {
            return out;
        }
        for op in log {
            if let VolumeOp::Write {
                data: Payload::Stored(places),
                ..
            } = op
            {
                out.extend(
                    places
                        .iter()
                        .map(|p| p.segment)
                        .filter(|s| self.retired.contains(s)),
                );
            }
        }
        out
    }

    /// Delete the retired segments not in `referenced` (see
    /// [`Cleaner::referenced`]).
    pub fn delete_unreferenced(
        &mut self,
        referenced: &BTreeSet<u32>,
        store: &mut FileStore,
    ) -> std::io::Result<()> {
        if self.pins.load(Ordering::Acquire) > 0 {
            return Ok(());
        }
        let deletable: Vec<u32> = self
            .retired
            .iter()
            .copied()
            .filter(|s| !referenced.contains(s))
            .collect();
        for s in deletable {
            store.remove_segment(s)?;
            self.retired.remove(&s);
            self.stats.segments_deleted += 1;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
