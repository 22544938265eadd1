//! The transaction context shared by every dataset of a database: the WAL,
//! the lock manager, transaction ids and the durability mode, and the commit
//! step of the record-level transaction protocol.

use crate::error::{Error, Result};
use crate::lsm::memtable::MemTable;
use crate::lsm::tree::LogSync;
use crate::txn::{Durability, LockManager, Wal};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

pub struct TxnContext {
    pub wal: Wal,
    pub locks: LockManager,
    next_txn: AtomicU64,
    pub durability: Durability,
    /// Incremented by every abort before it releases its locks. Readers sample
    /// it before reading and re-read if it moved: a value read while its
    /// writer was still running may have been undone since (see
    /// `Dataset::get_raw` and `DatasetScan::next_raw`).
    abort_epoch: AtomicU64,
    /// Evaluates the `CHECK` constraints a record's transaction must pass
    /// (installed by the SQL layer: see [`crate::schema::RecordCheck`]).
    record_check: parking_lot::RwLock<Option<Arc<dyn crate::schema::RecordCheck>>>,
}

impl TxnContext {
    /// The installed `CHECK` evaluator, if any.
    pub fn record_check(&self) -> Option<Arc<dyn crate::schema::RecordCheck>> {
        self.record_check.read().clone()
    }

    pub(crate) fn set_record_check(&self, c: Arc<dyn crate::schema::RecordCheck>) {
        *self.record_check.write() = Some(c);
    }

    pub(crate) fn new(wal: Wal, durability: Durability, next_txn: u64) -> Arc<TxnContext> {
        Arc::new(TxnContext {
            wal,
            locks: LockManager::new(),
            next_txn: AtomicU64::new(next_txn.max(1)),
            durability,
            abort_epoch: AtomicU64::new(0),
            record_check: parking_lot::RwLock::new(None),
        })
    }

    pub fn abort_epoch(&self) -> u64 {
        self.abort_epoch.load(Ordering::SeqCst)
    }

    /// A fresh transaction id.
    pub fn begin(&self) -> u64 {
        self.next_txn.fetch_add(1, Ordering::SeqCst)
    }

    pub fn next_txn_id(&self) -> u64 {
        self.next_txn.load(Ordering::SeqCst)
    }

    pub(crate) fn bump_txn(&self, seen: u64) {
        self.next_txn.fetch_max(seen + 1, Ordering::SeqCst);
    }

    /// Append the COMMIT of `txn`, let it leave the memtables it wrote, and
    /// return a handle that resolves once the COMMIT is durable.
    ///
    /// `sync`: the log flusher releases the transaction's locks when the
    /// COMMIT is fsynced, and the writer is acknowledged then (the paper's
    /// protocol). `batched` / `none`: the writer is acknowledged as soon as
    /// the COMMIT is in the log buffer, so its locks are released at once too:
    /// holding them until a later fsync would only delay other writers of the
    /// same keys without making anything more durable.
    ///
    /// `lead`: the caller will wait for this commit next, so under `sync` the
    /// flusher is not woken and the waiting thread writes and fsyncs the log
    /// itself when nobody else is (leader-based commit, see `Wal::lead`).
    /// Without it the flusher starts on the commit at once, while the caller
    /// goes on (a batch's earlier records).
    pub(crate) fn commit(
        self: &Arc<Self>,
        txn: u64,
        mems: &[Arc<MemTable>],
        lead: bool,
    ) -> CommitHandle {
        if !matches!(self.durability, Durability::Sync) {
            let r = self.wal.append(&crate::txn::LogRecord::Commit { txn });
            for m in mems {
                m.leave();
            }
            self.locks.release_all(txn);
            return CommitHandle {
                rx: None,
                append_err: r.err(),
                leader: None,
            };
        }
        let (tx, rx) = crossbeam_channel::bounded(1);
        let ctx = self.clone();
        let on_durable: crate::txn::wal::DurableCallback = Box::new(move |res| {
            ctx.locks.release_all(txn);
            let _ = tx.send(res);
        });
        let rec = crate::txn::LogRecord::Commit { txn };
        let r = if lead {
            self.wal.append_led(&rec, on_durable)
        } else {
            self.wal.append_with_callback(&rec, on_durable)
        };
        for m in mems {
            m.leave();
        }
        match r {
            Ok(lsn) => CommitHandle {
                rx: Some(rx),
                append_err: None,
                leader: Some((self.clone(), lsn)),
            },
            Err(e) => CommitHandle {
                rx: Some(rx),
                append_err: Some(e),
                leader: None,
            },
        }
    }

    /// Append the ABORT of `txn` (its updates were already undone in memory),
    /// leave the memtables and release its locks.
    pub(crate) fn abort(&self, txn: u64, mems: &[Arc<MemTable>]) {
        if let Err(e) = self.wal.append(&crate::txn::LogRecord::Abort { txn }) {
            tracing::warn!("could not log the abort of transaction {txn}: {e}");
        }
        for m in mems {
            m.leave();
        }
        self.abort_epoch.fetch_add(1, Ordering::SeqCst);
        self.locks.release_all(txn);
    }

    /// Wait until the log is durable at its current end (Algorithm 1's WAIT:
    /// every commit this thread appended is then durable and its locks released).
    pub(crate) fn wait_for_commits(&self, txn: u64) -> Result<()> {
        if !matches!(self.durability, Durability::Sync) {
            // Locks are released when the COMMIT is appended in these modes:
            // this thread holds none already.
            return Ok(());
        }
        let (tx, rx) = crossbeam_channel::bounded(1);
        let lsn = self.wal.append_led(
            &crate::txn::LogRecord::Wait { txn },
            Box::new(move |res| {
                let _ = tx.send(res);
            }),
        )?;
        self.wal.lead(lsn);
        rx.recv()
            .map_err(|_| Error::Closed("the log flusher stopped".into()))?
    }
}

impl LogSync for TxnContext {
    /// Before a flush installs a component: fsync the log in every durability
    /// mode (log before data). Otherwise, after an OS crash in `batched`/`none`
    /// mode, a component could carry LSNs beyond the end of the surviving log,
    /// new records would reuse those LSNs, and redo would skip them.
    fn sync_log(&self) -> Result<()> {
        self.wal.sync().map(|_| ())
    }
}

/// A commit whose durability may still be pending.
pub struct CommitHandle {
    /// None when the commit was acknowledged at append time (non-sync modes).
    rx: Option<crossbeam_channel::Receiver<Result<()>>>,
    append_err: Option<Error>,
    /// The log and the COMMIT's LSN, for the waiting thread to lead its
    /// write; taken by [`CommitHandle::wait`].
    leader: Option<(Arc<TxnContext>, u64)>,
}

impl CommitHandle {
    /// Block until the commit is durable (or report why it never will be).
    /// Leads the log write when nobody else is writing (see `Wal::lead`).
    pub fn wait(mut self) -> Result<()> {
        let leader = self.leader.take();
        if let Some(e) = self.append_err.take() {
            return Err(e);
        }
        match self.rx.take() {
            Some(rx) => {
                if let Some((ctx, lsn)) = leader
                    && rx.is_empty()
                {
                    ctx.wal.lead(lsn);
                }
                rx.recv()
                    .map_err(|_| Error::Closed("the log flusher stopped".into()))?
            }
            None => Ok(()),
        }
    }

    /// Acknowledge according to the durability mode: `sync` waits for the
    /// fsync; `batched` and `none` return once the COMMIT is in the log buffer
    /// (the locks are still released only when it is written).
    pub fn acknowledge(mut self, durability: Durability) -> Result<()> {
        match durability {
            Durability::Sync => self.wait(),
            _ => match self.append_err.take() {
                Some(e) => Err(e),
                None => Ok(()),
            },
        }
    }
}

impl Drop for CommitHandle {
    /// A commit nobody waits for: the flusher writes it (it was not woken
    /// for a commit appended to be led).
    fn drop(&mut self) {
        if let Some((ctx, _)) = self.leader.take() {
            ctx.wal.kick();
        }
    }
}
