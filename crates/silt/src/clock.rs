//! The clocks things expire by: value-list items (`index::valuelist`) and
//! the records of a dataset with a `ttl` (`dataset::ttl`).
//!
//! `written` (the default): the largest time written so far, in whatever
//! the application counts in (seconds, milliseconds, a logical clock), so
//! nothing expires by a time the data has not reached. `unix_s`,
//! `unix_ms`, `unix_us`: the wall clock since 1970 in that unit.

use crate::error::{Error, Result};
use std::sync::atomic::{AtomicI64, Ordering};

/// The names [`unit`] reads, for messages.
pub const CLOCKS: &str =
    "written (the largest time written, the default), unix_s, unix_ms, unix_us";

/// Units per second of the wall clock `name` names; `None` for the written
/// clock.
pub fn unit(name: &str) -> Result<Option<i64>> {
    match name {
        "written" => Ok(None),
        "unix_s" => Ok(Some(1)),
        "unix_ms" => Ok(Some(1_000)),
        "unix_us" => Ok(Some(1_000_000)),
        other => Err(Error::Config(format!(
            "unknown clock `{other}`; available: {CLOCKS}"
        ))),
    }
}

/// A clock: the written one or a wall clock, less a grace.
#[derive(Debug)]
pub struct ExpiryClock {
    written: AtomicI64,
    grace: i64,
    unix: Option<i64>,
}

impl ExpiryClock {
    /// `unix`: units per second of a wall clock (`None`: the written
    /// clock); `grace`: how far behind the clock [`ExpiryClock::now`] runs.
    pub fn new(grace: i64, unix: Option<i64>) -> ExpiryClock {
        ExpiryClock {
            written: AtomicI64::new(i64::MIN),
            grace,
            unix,
        }
    }

    /// Whether this is the written clock (it has to be kept across
    /// restarts by its owner).
    pub fn is_written(&self) -> bool {
        self.unix.is_none()
    }

    /// Something of time `t` was written.
    pub fn saw(&self, t: i64) {
        self.written.fetch_max(t, Ordering::Relaxed);
    }

    /// The largest time written (`i64::MIN` before any).
    pub fn written(&self) -> i64 {
        self.written.load(Ordering::Relaxed)
    }

    /// The clock less the grace: `None` before anything was written (the
    /// written clock).
    pub fn now(&self) -> Option<i64> {
        let base = match self.unix {
            Some(per_sec) => {
                let d = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .unwrap_or_default();
                let t = d.as_secs() as i128 * per_sec as i128
                    + d.subsec_nanos() as i128 * per_sec as i128 / 1_000_000_000;
                i64::try_from(t).unwrap_or(i64::MAX)
            }
            None => match self.written() {
                i64::MIN => return None,
                t => t,
            },
        };
        Some(base.saturating_sub(self.grace))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_written_clock_follows_the_largest_time_less_the_grace() {
        let c = ExpiryClock::new(5, None);
        assert_eq!(c.now(), None);
        c.saw(100);
        c.saw(40);
        assert_eq!(c.now(), Some(95));
        assert!(c.is_written());
    }

    #[test]
    fn a_wall_clock_counts_in_its_unit() {
        let s = ExpiryClock::new(0, unit("unix_s").unwrap()).now().unwrap();
        let ms = ExpiryClock::new(0, unit("unix_ms").unwrap()).now().unwrap();
        assert!(s > 1_700_000_000 && s < 4_000_000_000);
        assert!((ms / 1000 - s).abs() <= 1);
        assert!(
            unit("hourglass")
                .unwrap_err()
                .to_string()
                .contains("unix_ms")
        );
    }
}
