//! A connection's idle deadline without a timer per message.
//!
//! A connection is closed when it sends nothing for its idle timeout, so
//! its deadline moves with every message. Setting a tokio timer to the new
//! deadline each time re-registers it, and a re-registered timer earlier
//! than all others the runtime holds wakes the worker parked on the I/O
//! driver (see [`crate::deadlines`] for what that costs). [`IdleTimer`]
//! keeps one timer that may fire *early*: it is moved only when the
//! deadline comes sooner than it is set for (rare: a shorter timeout, such
//! as the one of an open transaction block), and when it fires before the
//! deadline it is set again. A connection that is busy sets it at most
//! once per idle timeout.

use std::future::Future;
use std::pin::Pin;

use tokio::time::{Instant, Sleep};

/// The deadline passed before the future completed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Elapsed;

/// One connection's idle timer.
pub struct IdleTimer {
    sleep: Pin<Box<Sleep>>,
    /// When `sleep` fires (`None`: not set since it last fired).
    set_for: Option<Instant>,
}

impl IdleTimer {
    pub fn new() -> IdleTimer {
        IdleTimer {
            // Not registered until it is first polled.
            sleep: Box::pin(tokio::time::sleep_until(Instant::now())),
            set_for: None,
        }
    }

    /// `fut`'s output, or [`Elapsed`] if `deadline` passes first (as
    /// `tokio::time::timeout_at`).
    pub async fn timeout_at<F: Future>(
        &mut self,
        deadline: Instant,
        fut: F,
    ) -> Result<F::Output, Elapsed> {
        if self.set_for.is_none_or(|t| t > deadline) {
            self.set(deadline);
        }
        let mut fut = std::pin::pin!(fut);
        loop {
            tokio::select! {
                biased;
                r = &mut fut => return Ok(r),
                () = self.sleep.as_mut() => {
                    self.set_for = None;
                    if Instant::now() >= deadline {
                        return Err(Elapsed);
                    }
                    self.set(deadline);
                }
            }
        }
    }

    /// Whether the timer fired since it was last set, for a connection
    /// polled by hand (see [`crate::conns`]). Waking the task is left to
    /// the timer, as with `Sleep::poll`.
    pub fn poll_fired(&mut self, cx: &mut std::task::Context<'_>) -> bool {
        if self.set_for.is_none() {
            return false;
        }
        if self.sleep.as_mut().poll(cx).is_ready() {
            self.set_for = None;
            return true;
        }
        false
    }

    /// Fire at `at`.
    pub fn set(&mut self, at: Instant) {
        self.sleep.as_mut().reset(at);
        self.set_for = Some(at);
    }
}

impl Default for IdleTimer {
    fn default() -> Self {
        IdleTimer::new()
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[tokio::test]
    async fn a_future_that_ends_first_is_returned() {
        let mut t = IdleTimer::new();
        let at = Instant::now() + Duration::from_secs(60);
        assert_eq!(t.timeout_at(at, async { 7 }).await, Ok(7));
    }

    #[tokio::test]
    async fn the_deadline_ends_a_future_that_does_not() {
        let mut t = IdleTimer::new();
        let start = Instant::now();
        let at = start + Duration::from_millis(30);
        let r = t.timeout_at(at, std::future::pending::<()>()).await;
        assert_eq!(r, Err(Elapsed));
        assert!(Instant::now() >= at);
    }

    #[tokio::test]
    async fn a_later_deadline_is_waited_for_past_the_timer_set_earlier() {
        let mut t = IdleTimer::new();
        // A first message: the timer is set 20 ms ahead.
        let first = Instant::now() + Duration::from_millis(20);
        assert_eq!(t.timeout_at(first, async { 1 }).await, Ok(1));
        // The next wait's deadline is later: the timer is not moved, fires
        // at 20 ms, and the wait goes on until its own deadline.
        let second = Instant::now() + Duration::from_millis(80);
        let r = t
            .timeout_at(second, tokio::time::sleep(Duration::from_millis(50)))
            .await;
        assert_eq!(r, Ok(()));
        let third = Instant::now() + Duration::from_millis(40);
        let r = t.timeout_at(third, std::future::pending::<()>()).await;
        assert_eq!(r, Err(Elapsed));
        assert!(Instant::now() >= third);
    }

    #[tokio::test]
    async fn a_sooner_deadline_moves_the_timer() {
        let mut t = IdleTimer::new();
        let late = Instant::now() + Duration::from_secs(3600);
        assert_eq!(t.timeout_at(late, async { 1 }).await, Ok(1));
        let soon = Instant::now() + Duration::from_millis(20);
        let r = tokio::time::timeout(
            Duration::from_secs(5),
            t.timeout_at(soon, std::future::pending::<()>()),
        )
        .await;
        assert_eq!(r, Ok(Err(Elapsed)));
    }
}
