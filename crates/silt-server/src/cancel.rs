//! PostgreSQL cancel requests.
//!
//! At startup a session gets a process id and a secret key (`BackendKeyData`,
//! from the startup handler's `PidSecretKeyGenerator`: `pgwire`'s default
//! counter and random keys). A cancel request is a connection of its own
//! carrying both; [`Cancels`] maps the pid to the session's [`CancelSlot`],
//! which holds the control of the session's current statement, and stops
//! it when the key matches. The statement then ends with `57014` "canceling
//! statement due to user request", its result stream included; a request for
//! a session that is between statements stops nothing new (the last
//! statement is over).
//!
//! Any startup handler that sets the pid and secret key works (the no-op
//! one and `pgwire`'s SASL one both do): sessions register here themselves,
//! on their first statement.

use std::collections::HashMap;
use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;
use parking_lot::Mutex;
use pgwire::api::cancel::CancelHandler;
use pgwire::messages::cancel::CancelRequest;
use silt_sql::StatementControl;
use silt_sql::bounds::StopReason;

/// One session's statement to cancel.
#[derive(Debug, Default)]
pub struct CancelSlot {
    current: Mutex<Option<Arc<StatementControl>>>,
}

impl CancelSlot {
    /// The statement a cancel request stops from now on.
    pub fn set(&self, ctl: Arc<StatementControl>) {
        *self.current.lock() = Some(ctl);
    }

    fn cancel(&self) {
        if let Some(c) = self.current.lock().as_ref() {
            c.stop(StopReason::Cancel);
        }
    }
}

/// The sessions that can be cancelled, by pid.
#[derive(Debug, Default)]
pub struct Cancels {
    sessions: Mutex<HashMap<i32, (Bytes, Arc<CancelSlot>)>>,
}

/// Constant-time comparison of two keys (no early exit on a mismatch).
fn same_key(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

impl Cancels {
    /// Register a session (again: the newest registration of a pid wins).
    pub fn register(&self, pid: i32, key: Bytes, slot: Arc<CancelSlot>) {
        self.sessions.lock().insert(pid, (key, slot));
    }

    /// Forget a session (when it closes).
    pub fn unregister(&self, pid: i32, slot: &Arc<CancelSlot>) {
        let mut m = self.sessions.lock();
        if m.get(&pid).is_some_and(|(_, s)| Arc::ptr_eq(s, slot)) {
            m.remove(&pid);
        }
    }

    /// Stop the current statement of session `pid` if `key` is its key.
    /// Returns whether the session was found.
    pub fn cancel(&self, pid: i32, key: &[u8]) -> bool {
        let slot = match self.sessions.lock().get(&pid) {
            Some((k, slot)) if same_key(k, key) => slot.clone(),
            _ => return false,
        };
        slot.cancel();
        true
    }

    /// Sessions registered now.
    pub fn len(&self) -> usize {
        self.sessions.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The cancel handler of every PostgreSQL connection.
#[derive(Debug)]
pub struct SiltCancelHandler(pub Arc<Cancels>);

#[async_trait]
impl CancelHandler for SiltCancelHandler {
    async fn on_cancel_request(&self, req: CancelRequest) {
        if !self.0.cancel(req.pid, &req.secret_key.to_bytes()) {
            tracing::debug!("cancel request for unknown session {}", req.pid);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cancel_needs_the_right_key() {
        let cancels = Cancels::default();
        let slot = Arc::new(CancelSlot::default());
        let ctl = StatementControl::new();
        slot.set(ctl.clone());
        cancels.register(7, Bytes::from_static(b"abcd"), slot.clone());
        assert!(!cancels.cancel(7, b"abce"));
        assert!(!cancels.cancel(8, b"abcd"));
        assert_eq!(ctl.stopped(), None);
        assert!(cancels.cancel(7, b"abcd"));
        assert_eq!(ctl.stopped(), Some(StopReason::Cancel));
        cancels.unregister(7, &slot);
        assert!(cancels.is_empty());
    }
}
