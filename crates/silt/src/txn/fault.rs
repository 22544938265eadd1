//! Fault injection for the write-ahead log (and any other writer that wants it).
//!
//! A [`FaultInjector`] is shared (`Arc`) between a test and the component under
//! test. The component consults it right before each `write` ([`FaultInjector::on_write`])
//! and each `fsync` ([`FaultInjector::on_fsync`]); the test arms faults at any
//! moment. Production code holds an `Option<Arc<FaultInjector>>` that is `None`,
//! so the cost when nothing is armed is one branch on an `Option`.
//!
//! Faults are those that matter for a log:
//! - a failed fsync (the next one, or the Nth from now): the classic "fsyncgate"
//!   case, where the kernel reports the error once and may already have dropped
//!   the dirty pages;
//! - a short write: the next writes succeed for a byte budget, the write that
//!   crosses it writes only a prefix and fails, and every later write fails;
//! - a slow device: every fsync sleeps first, which makes group-commit batching
//!   observable and deterministic enough to test;
//! - a stalled device: fsyncs wait until the test resumes them. Under
//!   `Durability::Sync` a commit holds its locks until its fsync, so a
//!   test can hold a transaction's locks for as long as it needs and
//!   watch what other transactions do meanwhile.

use parking_lot::{Condvar, Mutex};
use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

#[derive(Debug, Default)]
struct Armed {
    /// Fail the fsync when this countdown reaches 1 (1 = the next fsync).
    fsync_countdown: Option<u64>,
    /// Bytes that writes may still transfer before they start failing.
    write_budget: Option<u64>,
    /// Sleep this long before every fsync.
    fsync_delay: Option<Duration>,
    /// Fsyncs wait while this is set.
    paused: bool,
    /// Fsyncs waiting now.
    waiting: u64,
}

/// Armable faults for writes and fsyncs. See the module documentation.
#[derive(Debug, Default)]
pub struct FaultInjector {
    armed: Mutex<Armed>,
    resumed: Condvar,
    fsyncs_seen: AtomicU64,
    bytes_seen: AtomicU64,
    injected: AtomicU64,
}

impl FaultInjector {
    /// A new injector with nothing armed.
    pub fn new() -> Self {
        Self::default()
    }

    /// Make the next fsync fail (once).
    pub fn fail_next_fsync(&self) {
        self.fail_nth_fsync(1);
    }

    /// Make the `n`th fsync from now fail (once); `n = 1` is the next one. `n = 0`
    /// is treated as 1.
    pub fn fail_nth_fsync(&self, n: u64) {
        self.armed.lock().fsync_countdown = Some(n.max(1));
    }

    /// Let writes transfer `bytes` more bytes; the write that crosses the budget
    /// is short (writes only what is left of the budget) and fails, and every
    /// later write fails without writing anything, until [`disarm`](Self::disarm).
    pub fn fail_writes_after(&self, bytes: u64) {
        self.armed.lock().write_budget = Some(bytes);
    }

    /// Sleep `delay` before every fsync (a slow device), until disarmed.
    pub fn delay_fsyncs(&self, delay: Duration) {
        self.armed.lock().fsync_delay = Some(delay);
    }

    /// Make every fsync from now wait until [`resume_fsyncs`](Self::resume_fsyncs)
    /// (or [`disarm`](Self::disarm)).
    pub fn pause_fsyncs(&self) {
        self.armed.lock().paused = true;
    }

    /// Let the waiting fsyncs, and every later one, go on.
    pub fn resume_fsyncs(&self) {
        self.armed.lock().paused = false;
        self.resumed.notify_all();
    }

    /// How many fsyncs are waiting in a pause now.
    pub fn fsyncs_waiting(&self) -> u64 {
        self.armed.lock().waiting
    }

    /// Remove every armed fault (paused fsyncs go on).
    pub fn disarm(&self) {
        let mut a = self.armed.lock();
        let waiting = a.waiting;
        *a = Armed {
            waiting,
            ..Armed::default()
        };
        self.resumed.notify_all();
    }

    /// Number of fsyncs that consulted this injector (failed ones included).
    pub fn fsyncs_seen(&self) -> u64 {
        self.fsyncs_seen.load(Ordering::Relaxed)
    }

    /// Number of bytes that writes asked to transfer.
    pub fn bytes_seen(&self) -> u64 {
        self.bytes_seen.load(Ordering::Relaxed)
    }

    /// Number of faults that actually fired.
    pub fn faults_injected(&self) -> u64 {
        self.injected.load(Ordering::Relaxed)
    }

    /// Hook: call right before an fsync. `Err` means "pretend the fsync failed":
    /// the caller must not perform it and must treat it exactly like a real
    /// fsync error.
    pub fn on_fsync(&self) -> io::Result<()> {
        self.fsyncs_seen.fetch_add(1, Ordering::Relaxed);
        let (fail, delay) = {
            let mut a = self.armed.lock();
            if a.paused {
                a.waiting += 1;
                while a.paused {
                    self.resumed.wait(&mut a);
                }
                a.waiting -= 1;
            }
            let fail = match a.fsync_countdown {
                Some(n) if n <= 1 => {
                    a.fsync_countdown = None;
                    true
                }
                Some(n) => {
                    a.fsync_countdown = Some(n - 1);
                    false
                }
                None => false,
            };
            (fail, a.fsync_delay)
        };
        if let Some(d) = delay {
            std::thread::sleep(d);
        }
        if fail {
            self.injected.fetch_add(1, Ordering::Relaxed);
            return Err(io::Error::other("injected fsync failure"));
        }
        Ok(())
    }

    /// Hook: call right before writing `len` bytes. Returns how many of them the
    /// caller may write; fewer than `len` means "write that prefix, then fail
    /// with [`injected_write_error`](Self::injected_write_error)".
    pub fn on_write(&self, len: usize) -> usize {
        self.bytes_seen.fetch_add(len as u64, Ordering::Relaxed);
        let mut a = self.armed.lock();
        match a.write_budget {
            None => len,
            Some(budget) => {
                let allowed = usize::try_from(budget).unwrap_or(usize::MAX).min(len);
                a.write_budget = Some(budget - allowed as u64);
                if allowed < len {
                    self.injected.fetch_add(1, Ordering::Relaxed);
                }
                allowed
            }
        }
    }

    /// The error a caller reports after a short write imposed by [`on_write`](Self::on_write).
    pub fn injected_write_error() -> io::Error {
        io::Error::new(io::ErrorKind::WriteZero, "injected short write")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nth_fsync_fails_once() {
        let f = FaultInjector::new();
        assert!(f.on_fsync().is_ok());
        f.fail_nth_fsync(3);
        assert!(f.on_fsync().is_ok());
        assert!(f.on_fsync().is_ok());
        assert!(f.on_fsync().is_err());
        assert!(f.on_fsync().is_ok());
        assert_eq!(f.fsyncs_seen(), 5);
        assert_eq!(f.faults_injected(), 1);
    }

    #[test]
    fn write_budget_gives_short_write_then_failures() {
        let f = FaultInjector::new();
        assert_eq!(f.on_write(100), 100);
        f.fail_writes_after(10);
        assert_eq!(f.on_write(4), 4);
        assert_eq!(f.on_write(10), 6);
        assert_eq!(f.on_write(10), 0);
        f.disarm();
        assert_eq!(f.on_write(10), 10);
        assert_eq!(f.bytes_seen(), 134);
    }

    #[test]
    fn a_paused_fsync_waits_for_resume() {
        let f = std::sync::Arc::new(FaultInjector::new());
        f.pause_fsyncs();
        let g = f.clone();
        let t = std::thread::spawn(move || g.on_fsync().is_ok());
        while f.fsyncs_waiting() == 0 {
            std::thread::yield_now();
        }
        assert!(!t.is_finished());
        f.resume_fsyncs();
        assert!(t.join().unwrap());
        assert_eq!(f.fsyncs_waiting(), 0);
        assert!(f.on_fsync().is_ok(), "resumed: fsyncs no longer wait");
    }
}
