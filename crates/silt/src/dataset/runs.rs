//! A dataset's primary records as *disjoint runs*: when no two of a
//! partition's components (memtables and disk components) hold keys in
//! the same range, no version shadows another, and every live entry of
//! every run is a record of the dataset. A reader can then take each run
//! apart on its own, in any order, and keep what it made of an immutable
//! run for later: the column images of SQL scans (`silt-sql`'s
//! `column_cache`) are made this way, without the merge of a scan.
//!
//! Disk components hold only committed versions (a memtable is flushed
//! only when no transaction that wrote it is in flight), so they are read
//! as they are. Runs that overlap can still be read apart when the reader
//! leaves out the versions newer runs shadow: [`Dataset::read_memtable`]
//! hands out deleted keys too for that. Memtables are read record by
//! record under the same
//! read-committed check as [`super::DatasetScan`]: a record a writer still
//! holds, or an abort while reading, makes the read give up (the caller
//! then scans the ordinary way).

use std::ops::Bound;
use std::sync::Arc;

use crate::error::Result;
use crate::lsm::MemTable;
use crate::lsm::memtable::MemIter;
use crate::storage::{ComponentReader, EntryKind};
use crate::txn::LockManager;

use super::Dataset;

/// One partition's runs, as taken at one moment.
pub struct PartitionRuns {
    /// Memtables, newest first.
    pub mems: Vec<Arc<MemTable>>,
    /// Disk components, newest first.
    pub disk: Vec<Arc<ComponentReader>>,
}

/// What [`Dataset::read_memtable`] read.
#[derive(Clone, Debug)]
pub struct MemRead {
    /// The smallest and largest keys read (antimatter included); `None`
    /// when the table was empty.
    pub range: Option<(Vec<u8>, Vec<u8>)>,
    /// The table's version before the read.
    pub version: u64,
    /// Whether the table did not change while it was read: the records
    /// read are then exactly those of `version`.
    pub stable: bool,
}

impl Dataset {
    /// The runs of every partition's primary tree, in partition order;
    /// `None` when the primary's deletes are not entries of the runs
    /// (deleted-key lists). Whether the runs are disjoint is for the
    /// caller to check ([`runs_disjoint`]): memtables keep changing, so
    /// their key ranges are known only once read.
    pub fn primary_runs(&self) -> Option<Vec<PartitionRuns>> {
        if self
            .partitions
            .iter()
            .any(|p| p.primary.kind().deleted_keys())
        {
            return None;
        }
        Some(
            self.partitions
                .iter()
                .map(|p| {
                    let snap = p.primary.snapshot();
                    PartitionRuns {
                        mems: snap.mems,
                        disk: snap.disk.iter().cloned().collect(),
                    }
                })
                .collect(),
        )
    }

    /// Read a memtable of this dataset's primary in key order: `f(key,
    /// Some(record))` for every live record and `f(key, None)` for every
    /// deleted key (antimatter). `Ok(None)` when a record read was
    /// not committed yet or an abort happened meanwhile (what was handed to
    /// `f` is then to be thrown away).
    pub fn read_memtable(
        &self,
        mem: &Arc<MemTable>,
        f: impl FnMut(&[u8], Option<&[u8]>) -> Result<()>,
    ) -> Result<Option<MemRead>> {
        self.read_memtable_in(mem, (Bound::Unbounded, Bound::Unbounded), f)
    }

    /// [`Dataset::read_memtable`] of the keys within `bounds` only; the
    /// range it reports is that of the keys read.
    pub fn read_memtable_in(
        &self,
        mem: &Arc<MemTable>,
        bounds: (Bound<&[u8]>, Bound<&[u8]>),
        mut f: impl FnMut(&[u8], Option<&[u8]>) -> Result<()>,
    ) -> Result<Option<MemRead>> {
        let epoch = self.txn.abort_epoch();
        let version = mem.version();
        let mut it = MemIter::new(mem.clone(), bounds.0);
        let mut range: Option<(Vec<u8>, Vec<u8>)> = None;
        while let Some((key, e)) = it.next_entry() {
            let past = match bounds.1 {
                Bound::Included(h) => key.as_slice() > h,
                Bound::Excluded(h) => key.as_slice() >= h,
                Bound::Unbounded => false,
            };
            if past {
                break;
            }
            if !self
                .txn
                .locks
                .try_s_instant_uncounted(|| LockManager::name(self.id, &key))
            {
                return Ok(None);
            }
            match e.kind {
                EntryKind::Put => f(&key, Some(&e.value))?,
                EntryKind::Delete => f(&key, None)?,
            }
            match &mut range {
                None => range = Some((key.clone(), key)),
                Some((_, last)) => *last = key,
            }
        }
        if self.txn.abort_epoch() != epoch {
            return Ok(None);
        }
        Ok(Some(MemRead {
            range,
            version,
            stable: mem.version() == version,
        }))
    }
}

/// Whether no two of the key ranges (smallest, largest key; inclusive)
/// meet. With disjoint ranges no key has versions in two runs.
pub fn runs_disjoint(ranges: &mut [(&[u8], &[u8])]) -> bool {
    ranges.sort_by(|a, b| a.0.cmp(b.0));
    ranges.windows(2).all(|w| w[0].1 < w[1].0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn disjoint_ranges() {
        let mut r: Vec<(&[u8], &[u8])> = vec![(b"m", b"p"), (b"a", b"c"), (b"d", b"f")];
        assert!(runs_disjoint(&mut r));
        assert_eq!(r[0].0, b"a");
        let mut r: Vec<(&[u8], &[u8])> = vec![(b"a", b"d"), (b"d", b"f")];
        assert!(!runs_disjoint(&mut r), "a shared end key overlaps");
        let mut r: Vec<(&[u8], &[u8])> = vec![(b"a", b"z"), (b"c", b"d")];
        assert!(!runs_disjoint(&mut r));
        let mut r: Vec<(&[u8], &[u8])> = vec![];
        assert!(runs_disjoint(&mut r));
    }
}
