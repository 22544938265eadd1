//! A statement's blocking storage calls (a write waiting for its commit to
//! be durable, a DDL change): where they run.
//!
//! On an async runtime's thread a blocking call would stall every other
//! task of that thread, so it goes to a blocking thread
//! ([`tokio::task::spawn_blocking`]). A caller of
//! [`SqlEngine::execute_blocking`](crate::SqlEngine::execute_blocking)
//! (the in-process API, Python's `siltdb`) is different: its own thread
//! waits for the statement and polls the statement's future itself
//! (`Runtime::block_on`), and no other task runs on it. There a blocking
//! call runs inline: the hop to a blocking thread and back (two thread
//! wake-ups) was most of a single-row insert's time above the storage
//! engine's own.
//!
//! Only the statement's top-level future runs on the caller's thread;
//! tasks it spawns run on the runtime's workers, where the flag below is
//! not set and blocking calls still move off them.

use std::cell::Cell;
use std::future::Future;

use crate::SqlError;

thread_local! {
    /// This thread is inside [`on_caller`]: it only waits for the future
    /// it polls.
    static CALLER: Cell<bool> = const { Cell::new(false) };
}

/// Run `fut` to completion on `rt` from a thread outside the runtime, which
/// waits for it; blocking calls of `fut` itself run inline.
pub(crate) fn on_caller<F: Future>(rt: &tokio::runtime::Runtime, fut: F) -> F::Output {
    /// Puts the flag back, also when `fut` panics.
    struct Restore(bool);
    impl Drop for Restore {
        fn drop(&mut self) {
            CALLER.with(|c| c.set(self.0));
        }
    }
    let _restore = Restore(CALLER.with(|c| c.replace(true)));
    rt.block_on(fut)
}

/// Run a blocking storage call off the async threads (inline on a caller's
/// thread, see the module doc).
pub async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, SqlError> + Send + 'static,
) -> Result<T, SqlError> {
    if CALLER.with(Cell::get) {
        return f();
    }
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| SqlError::Runtime(format!("background task failed: {e}")))?
}

/// [`blocking`] for a plan node's work, with DataFusion's errors.
pub(crate) async fn blocking_df<T: Send + 'static>(
    f: impl FnOnce() -> datafusion::error::Result<T> + Send + 'static,
) -> datafusion::error::Result<T> {
    if CALLER.with(Cell::get) {
        return f();
    }
    tokio::task::spawn_blocking(f).await.map_err(|e| {
        datafusion::error::DataFusionError::Execution(format!("background task failed: {e}"))
    })?
}

#[cfg(test)]
mod tests {
    use super::*;

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .build()
            .expect("runtime")
    }

    #[test]
    fn a_callers_blocking_call_runs_on_its_own_thread() {
        let rt = runtime();
        let me = std::thread::current().id();
        let ran = on_caller(&rt, blocking(|| Ok(std::thread::current().id())));
        assert_eq!(ran.expect("ran"), me);
        // Outside `on_caller` (and after it) the call moves.
        let ran = rt.block_on(blocking(|| Ok(std::thread::current().id())));
        assert_ne!(ran.expect("ran"), me);
    }

    #[test]
    fn a_task_spawned_by_the_caller_still_moves_its_blocking_calls() {
        let rt = runtime();
        let me = std::thread::current().id();
        let ran = on_caller(&rt, async {
            tokio::spawn(blocking(|| Ok(std::thread::current().id())))
                .await
                .expect("joined")
        });
        assert_ne!(ran.expect("ran"), me);
    }
}
