//! Redo-only recovery at open (000 §3.3.4), and what it reports.

use crate::dataset::Dataset;
use crate::error::Result;
use crate::txn::LogRecord;
use crate::txn::ctx::TxnContext;
use serde::Serialize;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What recovery did when the database was opened.
#[derive(Clone, Debug, Default, Serialize)]
pub struct RecoverySummary {
    /// Log position recovery started from (the checkpoint's low-water mark).
    pub from_lsn: u64,
    /// End of the valid log.
    pub end_lsn: u64,
    /// Bytes of a torn last record that were cut off the log.
    pub truncated_bytes: u64,
    /// Bytes of the last log file read at open to find the end of the valid
    /// log: from the checkpoint's low-water mark on, so 0 after a clean close.
    pub log_bytes_checked: u64,
    pub records_scanned: u64,
    pub committed_txns: u64,
    /// UPDATE records re-applied (committed and newer than the index's disk components).
    pub records_redone: u64,
    /// UPDATE records of transactions without a durable COMMIT (ignored).
    pub records_uncommitted: u64,
    pub millis: u64,
}

/// Redo-only recovery (000 §3.3.4): analysis finds the transactions whose
/// COMMIT is in the log; redo re-applies their UPDATE records whose LSN is
/// above the index's disk LSN. No undo: nothing uncommitted ever reached a
/// disk component (no-steal).
pub(super) fn recover(
    wal_dir: &Path,
    from_lsn: u64,
    datasets: &BTreeMap<String, Arc<Dataset>>,
    txn: &Arc<TxnContext>,
) -> Result<RecoverySummary> {
    let start = Instant::now();
    let mut sum = RecoverySummary {
        from_lsn,
        ..Default::default()
    };
    let mut committed = HashSet::new();
    let mut last_progress = Instant::now();
    for r in crate::txn::read_from(wal_dir, from_lsn)? {
        let (lsn, rec) = r?;
        sum.records_scanned += 1;
        sum.end_lsn = lsn;
        txn.bump_txn(rec.txn());
        if let LogRecord::Commit { txn } = rec {
            committed.insert(txn);
        }
        if last_progress.elapsed() > Duration::from_secs(2) {
            tracing::info!(
                "recovery analysis: {} log records scanned",
                sum.records_scanned
            );
            last_progress = Instant::now();
        }
    }
    sum.committed_txns = committed.len() as u64;
    if sum.records_scanned == 0 {
        return Ok(sum);
    }
    let by_id: HashMap<u32, &Arc<Dataset>> = datasets.values().map(|d| (d.id(), d)).collect();
    let mut disk_lsn: HashMap<(u32, u32, u32), u64> = HashMap::new();
    for r in crate::txn::read_from(wal_dir, from_lsn)? {
        let (lsn, rec) = r?;
        let Some((t, dataset, partition, index, seq)) = rec.index_target() else {
            continue;
        };
        if !committed.contains(&t) {
            sum.records_uncommitted += 1;
            continue;
        }
        // A dataset dropped after the record was written has nothing to redo.
        let Some(ds) = by_id.get(&dataset) else {
            continue;
        };
        if partition >= ds.def().partitions {
            return Err(crate::error::Error::corrupt(
                wal_dir,
                format!(
                    "log record at LSN {lsn} names partition {partition} of dataset {}, which does not exist",
                    ds.name()
                ),
            ));
        }
        // An index dropped after the record was written has nothing to redo.
        let Some(tree) = ds.tree_for(index, partition as usize) else {
            continue;
        };
        let floor = *disk_lsn
            .entry((dataset, partition, index))
            .or_insert_with(|| tree.disk_lsn());
        let entries = rec.into_entries();
        if index == 0 {
            // The ttl's written clock saw every write since the checkpoint.
            for op in &entries {
                if op.op == crate::txn::LogOp::Put {
                    ds.ttl_replayed(&op.value);
                }
            }
        }
        if lsn < floor {
            // Reflected in a disk component (floor is an LSN mark = LSN + 1).
            continue;
        }
        ds.bump_seq(seq);
        for op in entries {
            let (key, entry) = op.into_entry(seq);
            let cost = tree.put(&key, entry, lsn + 1);
            ds.memory_group().charge(cost)?;
        }
        sum.records_redone += 1;
        if last_progress.elapsed() > Duration::from_secs(2) {
            tracing::info!("recovery redo: {} records re-applied", sum.records_redone);
            last_progress = Instant::now();
        }
    }
    sum.millis = start.elapsed().as_millis() as u64;
    tracing::info!(
        "recovery: scanned {} log records from LSN {}, {} committed transactions, redid {} records, ignored {} uncommitted, in {} ms",
        sum.records_scanned,
        sum.from_lsn,
        sum.committed_txns,
        sum.records_redone,
        sum.records_uncommitted,
        sum.millis
    );
    Ok(sum)
}
