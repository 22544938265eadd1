//! Checkpoints (000 §3.3.3): flush what holds old log records, write the
//! low-water mark (`wal/CHECKPOINT`, `docs/format/checkpoint.md`), delete
//! log files below it; and the thread that takes one every
//! `checkpoint_interval_bytes` of log.

use super::Database;
use crate::dataset::Dataset;
use crate::error::Result;
use crate::txn::Checkpoint;
use crate::txn::ctx::TxnContext;
use parking_lot::{Mutex, RwLock};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

impl Database {
    /// Start the thread that checkpoints whenever `checkpoint_interval_bytes`
    /// of log accumulated since the last checkpoint (0 disables it).
    pub(super) fn start_checkpointer(&self) {
        if self.opts.checkpoint_interval_bytes == 0 {
            return;
        }
        let (tx, rx) = crossbeam_channel::bounded::<()>(1);
        let (datasets, txn, last) = (
            self.datasets.clone(),
            self.txn.clone(),
            self.checkpoint_lock.clone(),
        );
        let interval = self.opts.checkpoint_interval_bytes;
        let handle = std::thread::Builder::new()
            .name("silt-checkpoint".into())
            .spawn(move || {
                while let Err(crossbeam_channel::RecvTimeoutError::Timeout) =
                    rx.recv_timeout(Duration::from_millis(200))
                {
                    let since = *last.lock();
                    if txn.wal.end_lsn().saturating_sub(since) >= interval
                        && let Err(e) = checkpoint(&datasets, &txn, &last)
                    {
                        tracing::error!("checkpoint failed: {e}");
                    }
                }
            });
        match handle {
            Ok(h) => *self.checkpointer.lock() = Some((tx, h)),
            Err(e) => tracing::error!("cannot start the checkpoint thread: {e}"),
        }
    }
}

pub(super) type DatasetMap = Arc<RwLock<BTreeMap<String, Arc<Dataset>>>>;

/// Take a checkpoint: flush every in-memory component holding log records
/// older than the current end of the log (by each component's *minimum* LSN:
/// flushing by the last LSN, as the paper's text says, would drop log still
/// needed), write the checkpoint file with the low-water mark, and delete log
/// files wholly below it.
pub(super) fn checkpoint(
    datasets: &DatasetMap,
    txn: &Arc<TxnContext>,
    last: &Mutex<u64>,
) -> Result<Checkpoint> {
    let mut last = last.lock();
    let target = txn.wal.end_lsn();
    let datasets: Vec<Arc<Dataset>> = datasets.read().values().cloned().collect();
    // The mark must never lie beyond the durable end of the log (in any
    // durability mode), or a crash could leave the log ending below it.
    txn.wal.sync()?;
    for ds in &datasets {
        // A write that got its LSN before `target` may still be on its way
        // into a memtable; the barrier waits for it.
        for t in ds.trees() {
            t.barrier();
        }
        if ds
            .trees()
            .iter()
            .any(|t| t.min_memory_lsn().is_some_and(|l| l < target))
        {
            ds.flush()?;
        }
    }
    let mut low = target;
    for ds in &datasets {
        for t in ds.trees() {
            if let Some(l) = t.min_memory_lsn() {
                low = low.min(l);
            }
        }
    }
    // The written clocks of the ttls, before the log that raised them goes.
    for ds in &datasets {
        ds.save_ttl_clock()?;
    }
    let cp = Checkpoint {
        low_water_lsn: low,
        end_lsn: txn.wal.end_lsn(),
        next_txn_id: txn.next_txn_id(),
    };
    crate::txn::write_checkpoint(txn.wal.dir(), &cp)?;
    txn.wal.truncate_before(low)?;
    *last = target;
    Ok(cp)
}
