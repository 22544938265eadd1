//! Transactions: the write-ahead log and the lock manager (000 ch. 3, 003 §4).
//!
//! Silt follows AsterixDB's record-level transactions:
//! - [`wal`]: one write-ahead log per database with **index-level logical
//!   logging** (one [`LogRecord::Update`] per index operation, or one
//!   [`LogRecord::UpdateBatch`] for a record's entries in one secondary index,
//!   then a [`LogRecord::Commit`]), LSN = byte position in the log, group commit by a
//!   log-flusher thread, checkpoint file with the low-water mark.
//! - [`lock`]: X locks on hashed primary keys held until the COMMIT is durable
//!   (the flusher's commit callback calls [`LockManager::release_all`]), instant
//!   S locks for read committed.
//! - [`fault`]: fault injection (failed fsync, short write, slow device) used by
//!   the tests to show that no commit is acknowledged unless it is durable.
//!
//! The deadlock-free batch protocol (Algorithm 1 of 000 §3.4.2) combines them:
//! try-lock each record; on refusal, push the records already locked through to
//! their COMMITs, append a [`LogRecord::Wait`] with [`Wal::append_wait`], wait
//! for its callback (all earlier commits are then durable and their locks
//! released, so the thread holds nothing), then block in
//! [`LockManager::lock_x`]. The test at the bottom of this file runs exactly
//! that with several transactor threads.

pub mod ctx;
pub mod fault;
pub mod lock;
pub mod wal;

pub use fault::FaultInjector;
pub use lock::{LockManager, LockStats};
pub use wal::{
    Checkpoint, Durability, DurableCallback, LogEntry, LogOp, LogReader, LogRecord, OpenSummary,
    UpdateRef, Wal, WalOptions, WalStats, read_checkpoint, read_from, write_checkpoint,
};

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};
    use std::collections::HashMap;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU64, Ordering};

    /// Algorithm 1 end to end: transactor threads insert frames of records with
    /// overlapping random keys in random (unsorted) order, so blocking while
    /// holding locks would deadlock. They follow the protocol (try-lock; on
    /// refusal commit what they hold, write WAIT, wait for it, then block), and
    /// a checker proves that no key ever has two writers. Finally the log is read
    /// back: every transaction has its UPDATE before its COMMIT, and the number
    /// of commits matches.
    #[test]
    fn algorithm_1_batches_never_deadlock() {
        const THREADS: u64 = 4;
        const FRAMES: u64 = 30;
        const FRAME_LEN: usize = 6;
        const KEYS: u32 = 16;
        let dir = tempfile::tempdir().unwrap();
        let (wal, _) = Wal::open(
            dir.path(),
            WalOptions {
                durability: Durability::Sync,
                ..Default::default()
            },
        )
        .unwrap();
        let wal = Arc::new(wal);
        let locks = Arc::new(LockManager::new());
        let owner: Arc<Vec<AtomicU64>> = Arc::new((0..KEYS).map(|_| AtomicU64::new(0)).collect());
        let next_txn = Arc::new(AtomicU64::new(1));
        let mut handles = Vec::new();
        for t in 0..THREADS {
            let (wal, locks, owner, next_txn) =
                (wal.clone(), locks.clone(), owner.clone(), next_txn.clone());
            handles.push(std::thread::spawn(move || {
                let mut rng = rand::rngs::StdRng::seed_from_u64(100 + t);
                let mut waits = 0u64;
                for _ in 0..FRAMES {
                    let frame: Vec<u32> =
                        (0..FRAME_LEN).map(|_| rng.random_range(0..KEYS)).collect();
                    // Transactions of this frame that hold their lock, not yet committed.
                    let mut held: Vec<(u64, u32)> = Vec::new();
                    for &key in &frame {
                        let txn = next_txn.fetch_add(1, Ordering::SeqCst);
                        let name = LockManager::name(1, &key.to_be_bytes());
                        if !locks.try_lock_x(txn, name) {
                            // Lines 3-7 of Algorithm 1.
                            commit_all(&wal, &locks, &owner, &mut held);
                            let (tx, rx) = crossbeam_channel::bounded(1);
                            wal.append_wait(txn, Box::new(move |r| tx.send(r).unwrap()))
                                .unwrap();
                            rx.recv().unwrap().unwrap();
                            waits += 1;
                            locks.lock_x(txn, name);
                        }
                        let prev = owner[key as usize].swap(txn, Ordering::SeqCst);
                        assert_eq!(prev, 0, "key {key} locked by {prev} and {txn}");
                        wal.append(&LogRecord::Update {
                            txn,
                            dataset: 1,
                            partition: t as u32,
                            index: 0,
                            op: LogOp::Put,
                            key: key.to_be_bytes().to_vec(),
                            seq: txn,
                            value: vec![t as u8; 8],
                        })
                        .unwrap();
                        held.push((txn, key));
                    }
                    commit_all(&wal, &locks, &owner, &mut held);
                }
                waits
            }));
        }
        let waits: u64 = handles.into_iter().map(|h| h.join().unwrap()).sum();
        wal.flush().unwrap();
        let lstats = locks.stats();
        assert_eq!(lstats.held, 0);
        let wstats = wal.stats();
        assert_eq!(wstats.commits, THREADS * FRAMES * FRAME_LEN as u64);
        assert_eq!(wstats.waits, waits);
        wal.close().unwrap();

        let mut state: HashMap<u64, bool> = HashMap::new(); // txn -> committed
        for r in read_from(dir.path(), 0).unwrap() {
            match r.unwrap().1 {
                LogRecord::Update { txn, .. } | LogRecord::UpdateBatch { txn, .. } => {
                    assert!(state.insert(txn, false).is_none());
                }
                LogRecord::Commit { txn } => {
                    assert_eq!(state.insert(txn, true), Some(false), "commit before update");
                }
                LogRecord::Wait { .. } => {}
                LogRecord::Abort { .. } => panic!("no aborts here"),
            }
        }
        assert_eq!(state.len() as u64, wstats.commits);
        assert!(state.values().all(|&c| c));
    }

    /// Commit every held transaction: COMMIT record whose durability callback
    /// releases the locks (the checker cell is cleared just before release).
    fn commit_all(
        wal: &Wal,
        locks: &Arc<LockManager>,
        owner: &Arc<Vec<AtomicU64>>,
        held: &mut Vec<(u64, u32)>,
    ) {
        for (txn, key) in held.drain(..) {
            let (locks, owner) = (locks.clone(), owner.clone());
            wal.append_commit(
                txn,
                Box::new(move |r| {
                    r.unwrap();
                    assert_eq!(owner[key as usize].swap(0, Ordering::SeqCst), txn);
                    locks.release_all(txn);
                }),
            )
            .unwrap();
        }
    }
}
