//! Leader-based commit (`writer`): a committing thread that finds nobody
//! writing the log writes and syncs it itself, is acknowledged only after
//! the sync, and leaves group commit, LSN order and failure handling as
//! they were.

use super::*;
use crate::txn::fault::FaultInjector;
use parking_lot::Mutex;
use std::sync::Arc;
use std::thread::ThreadId;
use std::time::{Duration, Instant};

/// A log in `dir` whose writes and fsyncs go through a fault injector.
fn open_with_faults(dir: &std::path::Path) -> (Arc<Wal>, Arc<FaultInjector>) {
    let fault = Arc::new(FaultInjector::new());
    let o = WalOptions {
        fault: Some(fault.clone()),
        ..Default::default()
    };
    (Arc::new(Wal::open(dir, o).unwrap().0), fault)
}

/// What a commit's durability callback saw.
struct Seen {
    ok: bool,
    thread: ThreadId,
    synced: u64,
}

/// Append a COMMIT for `txn` to be led; its callback reports what it saw.
fn led_commit(wal: &Arc<Wal>, txn: u64) -> (u64, u64, crossbeam_channel::Receiver<Seen>) {
    let (tx, rx) = crossbeam_channel::bounded(1);
    let w = wal.clone();
    let rec = LogRecord::Commit { txn };
    let end_len = rec.encoded_len() as u64;
    let lsn = wal
        .append_led(
            &rec,
            Box::new(move |r| {
                let _ = tx.send(Seen {
                    ok: r.is_ok(),
                    thread: std::thread::current().id(),
                    synced: w.synced_lsn(),
                });
            }),
        )
        .unwrap();
    (lsn, lsn + end_len, rx)
}

fn update(txn: u64) -> LogRecord {
    LogRecord::Update {
        txn,
        dataset: 1,
        partition: 0,
        index: 0,
        op: LogOp::Put,
        key: txn.to_be_bytes().to_vec(),
        seq: txn,
        value: vec![7; 40],
    }
}

/// A lone writer leads: its commit is written and fsynced on its own
/// thread (no hand-off to the flusher), and never acknowledged before the
/// fsync that covers it has returned (each fsync is slowed to make an early
/// acknowledgment visible).
#[test]
fn a_lone_writer_syncs_its_own_commit_and_is_acknowledged_after_the_sync() {
    const COMMITS: u64 = 20;
    const DELAY: Duration = Duration::from_millis(15);
    let dir = tempfile::tempdir().unwrap();
    let (wal, fault) = open_with_faults(dir.path());
    fault.delay_fsyncs(DELAY);
    let me = std::thread::current().id();
    let mut own_thread = 0;
    for txn in 1..=COMMITS {
        wal.append(&update(txn)).unwrap();
        let fsyncs = fault.fsyncs_seen();
        let t = Instant::now();
        let (lsn, end, rx) = led_commit(&wal, txn);
        wal.lead(lsn);
        let seen = rx.recv().unwrap();
        assert!(seen.ok);
        assert!(t.elapsed() >= DELAY, "acknowledged before the fsync ran");
        assert!(
            fault.fsyncs_seen() > fsyncs,
            "acknowledged without an fsync"
        );
        assert!(
            seen.synced >= end,
            "commit [{lsn}, {end}) acknowledged at synced LSN {}",
            seen.synced
        );
        own_thread += u64::from(seen.thread == me);
    }
    // The flusher is never woken for a led commit, so only a spurious
    // wake-up of it could take one.
    assert!(
        own_thread >= COMMITS - 2,
        "{own_thread} of {COMMITS} commits synced on the committing thread"
    );
    let st = wal.stats();
    assert_eq!(st.commits, COMMITS);
    drop(wal);
    let back = read_from(dir.path(), 0)
        .unwrap()
        .collect::<Result<Vec<_>>>()
        .unwrap();
    assert_eq!(back.len() as u64, 2 * COMMITS);
}

/// Many threads, led and flusher-written commits mixed: every callback runs
/// once, after the fsync covering it, and in LSN order whoever writes; and
/// commits still share fsyncs.
#[test]
fn leaders_and_the_flusher_keep_lsn_order_and_group_commit() {
    const THREADS: u64 = 8;
    const COMMITS: u64 = 60;
    let dir = tempfile::tempdir().unwrap();
    let (wal, fault) = open_with_faults(dir.path());
    fault.delay_fsyncs(Duration::from_millis(1));
    let order = Arc::new(Mutex::new(Vec::new()));
    let threads: Vec<_> = (0..THREADS)
        .map(|t| {
            let (wal, order) = (wal.clone(), order.clone());
            std::thread::spawn(move || {
                for c in 0..COMMITS {
                    let txn = t * COMMITS + c + 1;
                    wal.append(&update(txn)).unwrap();
                    let (tx, rx) = crossbeam_channel::bounded(1);
                    let (w, o) = (wal.clone(), order.clone());
                    let rec = LogRecord::Commit { txn };
                    let len = rec.encoded_len() as u64;
                    let cb: DurableCallback = Box::new(move |r| {
                        // Pushed inside the callback: the callbacks' order.
                        o.lock().push(txn);
                        let _ = tx.send((r.is_ok(), w.synced_lsn()));
                    });
                    let led = c % 2 == 0;
                    let lsn = if led {
                        wal.append_led(&rec, cb).unwrap()
                    } else {
                        wal.append_with_callback(&rec, cb).unwrap()
                    };
                    if led {
                        wal.lead(lsn);
                    }
                    let (ok, synced) = rx.recv().unwrap();
                    assert!(ok);
                    assert!(synced >= lsn + len, "acknowledged before its fsync");
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let st = wal.stats();
    let commits = THREADS * COMMITS;
    assert_eq!(st.commits, commits);
    super::tests::close_when_last(wal);
    // The callbacks' order is the COMMITs' order in the log.
    let logged: Vec<u64> = read_from(dir.path(), 0)
        .unwrap()
        .filter_map(|r| match r.unwrap().1 {
            LogRecord::Commit { txn } => Some(txn),
            _ => None,
        })
        .collect();
    assert_eq!(*order.lock(), logged);
    assert_eq!(logged.len() as u64, commits);
    assert!(
        st.batches < commits,
        "no two commits shared a write: {} batches for {commits} commits",
        st.batches
    );
}

/// A leader's failed fsync fails its own commit, every waiting one and the
/// log, as the flusher's does; nothing is acknowledged.
#[test]
fn a_failed_fsync_in_a_leader_fails_its_commit_and_the_log() {
    let dir = tempfile::tempdir().unwrap();
    let (wal, fault) = open_with_faults(dir.path());
    let (lsn, _, rx) = led_commit(&wal, 1);
    wal.lead(lsn);
    assert!(rx.recv().unwrap().ok);
    fault.fail_next_fsync();
    let (lsn, _, rx) = led_commit(&wal, 2);
    wal.lead(lsn);
    let seen = rx.recv().unwrap();
    assert!(!seen.ok, "a commit whose fsync failed was acknowledged");
    assert_eq!(seen.thread, std::thread::current().id());
    assert!(wal.stats().failed.is_some());
    let err = wal.append(&update(3)).unwrap_err();
    assert!(err.to_string().contains("failed"), "{err}");
}

/// A led commit whose thread does not lead (it kicks instead) is written by
/// the flusher.
#[test]
fn a_kicked_led_commit_is_written_by_the_flusher() {
    let dir = tempfile::tempdir().unwrap();
    let wal = Arc::new(Wal::open(dir.path(), WalOptions::default()).unwrap().0);
    let (_, end, rx) = led_commit(&wal, 1);
    wal.kick();
    let seen = rx.recv_timeout(Duration::from_secs(10)).unwrap();
    assert!(seen.ok);
    assert!(seen.synced >= end);
    assert_ne!(seen.thread, std::thread::current().id());
}
