//! Background flush and merge threads, and the shared per-dataset memory budget.

use super::memtable::MemTable;
use super::tree::{LsmTree, Scheduler};
use crate::error::Result;
use crossbeam_channel::{Receiver, Sender, unbounded};
use parking_lot::{Condvar, Mutex, RwLock};
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::thread::JoinHandle;

enum Job {
    Flush(Arc<LsmTree>, Arc<MemTable>),
    Merge(Arc<LsmTree>),
}

struct Inner {
    flush_tx: Mutex<Option<Sender<Job>>>,
    merge_tx: Mutex<Option<Sender<Job>>>,
    pending: Mutex<usize>,
    idle: Condvar,
}

/// Worker threads that run flushes and merges for every index of a database.
/// Flushes have their own threads so that a long merge never delays the flush
/// that frees an ingest buffer.
pub struct Background {
    inner: Arc<Inner>,
    threads: Mutex<Vec<JoinHandle<()>>>,
}

impl Background {
    pub fn start(flush_threads: usize, merge_threads: usize) -> Arc<Background> {
        let (ftx, frx) = unbounded();
        let (mtx, mrx) = unbounded();
        let inner = Arc::new(Inner {
            flush_tx: Mutex::new(Some(ftx)),
            merge_tx: Mutex::new(Some(mtx)),
            pending: Mutex::new(0),
            idle: Condvar::new(),
        });
        let mut threads = Vec::new();
        for (i, rx) in std::iter::repeat_n(frx, flush_threads.max(1)).enumerate() {
            threads.push(spawn(format!("silt-flush-{i}"), inner.clone(), rx));
        }
        for (i, rx) in std::iter::repeat_n(mrx, merge_threads.max(1)).enumerate() {
            threads.push(spawn(format!("silt-merge-{i}"), inner.clone(), rx));
        }
        Arc::new(Background {
            inner,
            threads: Mutex::new(threads),
        })
    }

    fn submit(&self, merge: bool, job: Job) {
        let tx = if merge {
            &self.inner.merge_tx
        } else {
            &self.inner.flush_tx
        };
        let guard = tx.lock();
        if let Some(tx) = guard.as_ref() {
            *self.inner.pending.lock() += 1;
            if tx.send(job).is_err() {
                finish_job(&self.inner);
            }
        }
    }

    /// Block until no flush or merge is queued or running.
    pub fn wait_idle(&self) {
        let mut p = self.inner.pending.lock();
        while *p > 0 {
            self.inner.idle.wait(&mut p);
        }
    }

    /// Finish queued work and stop the threads.
    pub fn shutdown(&self) {
        self.wait_idle();
        self.inner.flush_tx.lock().take();
        self.inner.merge_tx.lock().take();
        for t in self.threads.lock().drain(..) {
            let _ = t.join();
        }
    }
}

impl Drop for Background {
    fn drop(&mut self) {
        self.inner.flush_tx.lock().take();
        self.inner.merge_tx.lock().take();
    }
}

fn finish_job(inner: &Inner) {
    let mut p = inner.pending.lock();
    *p = p.saturating_sub(1);
    if *p == 0 {
        inner.idle.notify_all();
    }
}

fn spawn(name: String, inner: Arc<Inner>, rx: Receiver<Job>) -> JoinHandle<()> {
    let builder = std::thread::Builder::new().name(name);
    let run = move || {
        while let Ok(job) = rx.recv() {
            match job {
                Job::Flush(tree, mem) => {
                    if let Err(e) = tree.flush(&mem) {
                        tree.record_failure(&e);
                    } else if tree.try_mark_merge_scheduled() {
                        let tx = inner.merge_tx.lock();
                        if let Some(tx) = tx.as_ref() {
                            *inner.pending.lock() += 1;
                            if tx.send(Job::Merge(tree)).is_err() {
                                finish_job(&inner);
                            }
                        }
                    }
                }
                Job::Merge(tree) => loop {
                    match tree.merge_once() {
                        Ok(true) => continue,
                        Ok(false) => break,
                        Err(e) => {
                            tree.record_failure(&e);
                            break;
                        }
                    }
                },
            }
            finish_job(&inner);
        }
    };
    match builder.spawn(run) {
        Ok(h) => h,
        // Thread creation fails only when the OS is out of resources; there is
        // nothing sensible to continue with.
        Err(e) => panic!("cannot start a background thread: {e}"),
    }
}

impl Scheduler for Background {
    fn schedule_flush(&self, tree: Arc<LsmTree>, mem: Arc<MemTable>) {
        self.submit(false, Job::Flush(tree, mem));
    }
    fn schedule_merge(&self, tree: Arc<LsmTree>) {
        if tree.try_mark_merge_scheduled() {
            self.submit(true, Job::Merge(tree));
        }
    }
}

/// The memory budget shared by all in-memory components of one dataset
/// (every index of every partition). When the active components together
/// exceed it, all of them are rotated and flushed together, as AsterixDB does.
/// With double buffering at most twice the budget is held in memory.
pub struct MemoryGroup {
    limit: u64,
    used: AtomicI64,
    trees: RwLock<Vec<Arc<LsmTree>>>,
    rotate_lock: Mutex<()>,
    bg: Arc<Background>,
}

impl MemoryGroup {
    pub fn new(limit: u64, bg: Arc<Background>) -> Arc<MemoryGroup> {
        Arc::new(MemoryGroup {
            limit: limit.max(1 << 16),
            used: AtomicI64::new(0),
            trees: RwLock::new(Vec::new()),
            rotate_lock: Mutex::new(()),
            bg,
        })
    }

    pub fn limit(&self) -> u64 {
        self.limit
    }

    pub fn add_tree(&self, t: Arc<LsmTree>) {
        self.used
            .fetch_add(t.active_bytes() as i64, Ordering::Relaxed);
        self.trees.write().push(t);
    }

    pub fn remove_tree(&self, t: &Arc<LsmTree>) {
        self.trees.write().retain(|x| !Arc::ptr_eq(x, t));
    }

    pub fn trees(&self) -> Vec<Arc<LsmTree>> {
        self.trees.read().clone()
    }

    /// Account `bytes` just written; if the budget is exceeded, rotate and
    /// schedule flushes of every index (blocking while a previous flush still
    /// occupies the second buffer).
    pub fn charge(&self, bytes: u64) -> Result<()> {
        let now = self.used.fetch_add(bytes as i64, Ordering::Relaxed) + bytes as i64;
        if now as u64 > self.limit {
            self.rotate_all(false)?;
        }
        Ok(())
    }

    /// Rotate every index's active component (all of them if `force`, else only
    /// while over budget) and schedule their flushes.
    pub fn rotate_all(&self, force: bool) -> Result<()> {
        let _g = self.rotate_lock.lock();
        if !force && self.used.load(Ordering::Relaxed) as u64 <= self.limit {
            return Ok(());
        }
        for t in self.trees.read().iter() {
            if let Some(m) = t.rotate(true)? {
                self.used.fetch_sub(m.bytes() as i64, Ordering::Relaxed);
                self.bg.schedule_flush(t.clone(), m);
            }
        }
        Ok(())
    }

    /// Flush every in-memory component and wait for the flushes.
    pub fn flush_all(&self) -> Result<()> {
        self.rotate_all(true)?;
        for t in self.trees.read().iter() {
            t.wait_flushed()?;
        }
        Ok(())
    }
}
