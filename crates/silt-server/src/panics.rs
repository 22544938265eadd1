//! Panics in server tasks: caught, counted, logged in one line.
//!
//! A panic in a connection's task (or a statement's) must not take more
//! than that connection down, and must not be something a client can
//! repeat to fill the log or the memory: the default hook prints a
//! backtrace when `RUST_BACKTRACE` is set, and symbolizing the first one
//! loads the binary's debug information (hundreds of MiB, kept). The hook
//! [`install`] puts in front of the previous one prints one line for a
//! panic inside a server task (at most [`LINES_PER_MINUTE`] a minute, then
//! a count of the ones left out) and hands other panics to the previous
//! hook, at most once a minute. [`count`] is the number of panics in server
//! tasks since the process started.

use std::cell::Cell;
use std::future::Future;
use std::panic::PanicHookInfo;
use std::pin::Pin;
use std::sync::Once;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::{SystemTime, UNIX_EPOCH};

/// At most this many one-line reports a minute.
pub const LINES_PER_MINUTE: u64 = 10;

thread_local! {
    static IN_SERVER: Cell<bool> = const { Cell::new(false) };
}

static SERVER_PANICS: AtomicU64 = AtomicU64::new(0);
static OTHER_PANICS: AtomicU64 = AtomicU64::new(0);
/// The minute of the last report and how many reports it had.
static WINDOW: AtomicU64 = AtomicU64::new(0);
static LINES: AtomicU64 = AtomicU64::new(0);
static SUPPRESSED: AtomicU64 = AtomicU64::new(0);
static LAST_FULL: AtomicU64 = AtomicU64::new(u64::MAX);
static INSTALL: Once = Once::new();

/// Panics inside server tasks since the process started.
pub fn count() -> u64 {
    SERVER_PANICS.load(Ordering::Acquire)
}

fn minute() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() / 60)
}

/// Whether a one-line report may be printed now (and how many were left
/// out before it).
fn may_report() -> Option<u64> {
    let now = minute();
    if WINDOW.swap(now, Ordering::AcqRel) != now {
        LINES.store(0, Ordering::Release);
    }
    if LINES.fetch_add(1, Ordering::AcqRel) < LINES_PER_MINUTE {
        Some(SUPPRESSED.swap(0, Ordering::AcqRel))
    } else {
        SUPPRESSED.fetch_add(1, Ordering::AcqRel);
        None
    }
}

fn one_line(info: &PanicHookInfo<'_>) -> String {
    let msg = info
        .payload()
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| info.payload().downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "(no message)".to_owned());
    let place = info
        .location()
        .map(|l| format!("{}:{}", l.file(), l.line()))
        .unwrap_or_default();
    let msg: String = msg.chars().take(300).collect();
    format!("{msg} at {place}")
}

/// Put the server's panic hook in front of the current one (once per
/// process).
pub fn install() {
    INSTALL.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if IN_SERVER.with(Cell::get) {
                SERVER_PANICS.fetch_add(1, Ordering::AcqRel);
                if let Some(left_out) = may_report() {
                    let more = if left_out > 0 {
                        format!(" ({left_out} more not shown)")
                    } else {
                        String::new()
                    };
                    eprintln!(
                        "silt-server: a connection's task panicked and was closed: {}{more}",
                        one_line(info)
                    );
                }
                return;
            }
            OTHER_PANICS.fetch_add(1, Ordering::AcqRel);
            let now = minute();
            if LAST_FULL.swap(now, Ordering::AcqRel) != now {
                previous(info);
            } else if may_report().is_some() {
                eprintln!("panic: {}", one_line(info));
            }
        }));
    });
}

/// `fut`, marked as a server task while it is polled: its panics get the
/// one-line report.
pub fn in_server<F: Future>(fut: F) -> InServer<F> {
    InServer { fut: Box::pin(fut) }
}

/// See [`in_server`].
pub struct InServer<F> {
    fut: Pin<Box<F>>,
}

struct Mark(bool);

impl Drop for Mark {
    fn drop(&mut self) {
        let was = self.0;
        IN_SERVER.with(|c| c.set(was));
    }
}

impl<F: Future> Future for InServer<F> {
    type Output = F::Output;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let _mark = Mark(IN_SERVER.with(|c| c.replace(true)));
        self.fut.as_mut().poll(cx)
    }
}
