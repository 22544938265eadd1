//! Statement deadlines, watched by one thread.
//!
//! Every statement has a deadline (its timeout after it arrived). A tokio
//! timer per statement was the obvious way to keep it, and cost more than a
//! small query: registering a timer earlier than every other one the
//! runtime holds (a statement's 30 s against connections' idle timeouts of
//! 30 min) makes tokio wake the worker parked on its I/O driver so that it
//! sleeps less. On this 2-core machine that was a wake-up of the other
//! core for each statement, where the client usually runs (profile of
//! prepared lookups, session 31).
//!
//! Here a statement's deadline is an entry in an ordered map, added when
//! it is admitted and removed when it ends; one thread sleeps until the
//! earliest entry and stops the statements whose deadline has passed
//! through their [`StatementControl`], which is what a cancel request
//! pulls too. The thread is woken only when an entry comes before the one
//! it sleeps until: with one timeout for every statement, almost never.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

use parking_lot::{Condvar, Mutex};
use silt_sql::StatementControl;
use silt_sql::bounds::StopReason;

/// The deadlines of the statements running now.
pub struct Deadlines {
    inner: Arc<Inner>,
}

struct Inner {
    state: Mutex<State>,
    wake: Condvar,
}

#[derive(Default)]
struct State {
    /// Statements by deadline (and a number, as deadlines may tie).
    entries: BTreeMap<(Instant, u64), Arc<StatementControl>>,
    next_id: u64,
    /// What the thread sleeps until (`None`: until woken), or whether it
    /// is yet to start.
    sleeping_until: Option<Instant>,
    started: bool,
    closed: bool,
}

/// A statement's deadline, given up when dropped (the statement ended).
pub struct Watch {
    inner: Arc<Inner>,
    key: (Instant, u64),
}

impl Drop for Watch {
    fn drop(&mut self) {
        self.inner.state.lock().entries.remove(&self.key);
    }
}

impl Deadlines {
    pub fn new() -> Deadlines {
        Deadlines {
            inner: Arc::new(Inner {
                state: Mutex::new(State::default()),
                wake: Condvar::new(),
            }),
        }
    }

    /// Stop `ctl`'s statement with [`StopReason::Timeout`] at `at`, unless
    /// the returned watch is dropped first. The watching thread starts
    /// with the first statement; if it cannot start, the statement is
    /// stopped at once (a deadline that nothing watches would not hold).
    pub fn watch(&self, at: Instant, ctl: Arc<StatementControl>) -> Watch {
        let mut st = self.inner.state.lock();
        let key = (at, st.next_id);
        st.next_id += 1;
        if !st.started {
            st.started = true;
            let inner = self.inner.clone();
            let spawned = std::thread::Builder::new()
                .name("silt-deadlines".to_owned())
                .spawn(move || inner.run());
            if spawned.is_err() {
                st.started = false;
                ctl.stop(StopReason::Timeout);
                return Watch {
                    inner: self.inner.clone(),
                    key,
                };
            }
        }
        let sooner = st.sleeping_until.is_none_or(|t| at < t);
        st.entries.insert(key, ctl);
        drop(st);
        if sooner {
            self.inner.wake.notify_one();
        }
        Watch {
            inner: self.inner.clone(),
            key,
        }
    }

    /// Statements with a deadline now.
    pub fn len(&self) -> usize {
        self.inner.state.lock().entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl Default for Deadlines {
    fn default() -> Self {
        Deadlines::new()
    }
}

impl Drop for Deadlines {
    fn drop(&mut self) {
        self.inner.state.lock().closed = true;
        self.inner.wake.notify_one();
    }
}

impl Inner {
    /// The watching thread: stop what is due, sleep until the next.
    fn run(&self) {
        let mut st = self.state.lock();
        loop {
            if st.closed {
                return;
            }
            let now = Instant::now();
            while let Some(e) = st.entries.first_entry() {
                if e.key().0 > now {
                    break;
                }
                e.remove().stop(StopReason::Timeout);
            }
            let next = st.entries.first_key_value().map(|(k, _)| k.0);
            st.sleeping_until = next;
            match next {
                Some(t) => {
                    self.wake.wait_until(&mut st, t);
                }
                None => self.wake.wait(&mut st),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn wait_stopped(ctl: &StatementControl, within: Duration) -> Option<StopReason> {
        let until = Instant::now() + within;
        while Instant::now() < until {
            if let Some(r) = ctl.stopped() {
                return Some(r);
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        ctl.stopped()
    }

    #[test]
    fn a_statement_past_its_deadline_is_stopped_as_timed_out() {
        let d = Deadlines::new();
        let ctl = StatementControl::new();
        let _w = d.watch(Instant::now() + Duration::from_millis(30), ctl.clone());
        assert_eq!(ctl.stopped(), None);
        assert_eq!(
            wait_stopped(&ctl, Duration::from_secs(5)),
            Some(StopReason::Timeout)
        );
        // Its entry went with it.
        assert!(d.is_empty());
    }

    #[test]
    fn a_statement_that_ended_is_not_stopped_and_leaves_nothing() {
        let d = Deadlines::new();
        let ctl = StatementControl::new();
        let w = d.watch(Instant::now() + Duration::from_millis(30), ctl.clone());
        assert_eq!(d.len(), 1);
        drop(w);
        assert!(d.is_empty());
        std::thread::sleep(Duration::from_millis(80));
        assert_eq!(ctl.stopped(), None);
    }

    #[test]
    fn an_earlier_deadline_wakes_the_thread_sleeping_for_a_later_one() {
        let d = Deadlines::new();
        let late = StatementControl::new();
        let _l = d.watch(Instant::now() + Duration::from_secs(3600), late.clone());
        // Let the thread go to sleep until the hour is up.
        std::thread::sleep(Duration::from_millis(20));
        let soon = StatementControl::new();
        let _s = d.watch(Instant::now() + Duration::from_millis(20), soon.clone());
        assert_eq!(
            wait_stopped(&soon, Duration::from_secs(5)),
            Some(StopReason::Timeout)
        );
        assert_eq!(late.stopped(), None);
        assert_eq!(d.len(), 1);
    }

    #[test]
    fn deadlines_fire_in_order_and_ties_are_kept_apart() {
        let d = Deadlines::new();
        let at = Instant::now() + Duration::from_millis(40);
        let ctls: Vec<_> = (0..3).map(|_| StatementControl::new()).collect();
        let watches: Vec<_> = ctls.iter().map(|c| d.watch(at, c.clone())).collect();
        let later = StatementControl::new();
        let _l = d.watch(at + Duration::from_secs(3600), later.clone());
        assert_eq!(d.len(), 4);
        for c in &ctls {
            assert_eq!(
                wait_stopped(c, Duration::from_secs(5)),
                Some(StopReason::Timeout)
            );
        }
        assert_eq!(later.stopped(), None);
        drop(watches);
        assert_eq!(d.len(), 1);
    }

    #[test]
    fn a_cancelled_statement_keeps_its_first_reason() {
        let d = Deadlines::new();
        let ctl = StatementControl::new();
        ctl.stop(StopReason::Cancel);
        let _w = d.watch(Instant::now(), ctl.clone());
        std::thread::sleep(Duration::from_millis(30));
        assert_eq!(ctl.stopped(), Some(StopReason::Cancel));
    }
}
