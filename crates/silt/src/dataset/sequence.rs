//! Sequences: the counters behind SQL's `SERIAL` and identity columns,
//! the fields whose default is [`crate::FieldDefault::Sequence`].
//!
//! A field's counter hands out increasing integers from 1. Values are
//! reserved in chunks, durably: `sequences.json` in the dataset's directory
//! records per field a bound that no value handed out or written reaches,
//! and is replaced (atomically, fsynced) before a value at or past the old
//! bound is used. After a crash or a restart a counter resumes at its
//! bound, so no value is handed out twice, at the price of a gap (as with
//! PostgreSQL's sequence cache). A value written explicitly moves the
//! counter past it, so a later generated value never collides with it.
//! Format: `docs/format/sequences.md`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::storage::fsutil::write_atomic;

/// File name of the sequence bounds in a dataset's directory.
pub(crate) const SEQUENCES_FILE: &str = "sequences.json";

/// The first reservation of a counter; doubled (up to [`MAX_CHUNK`]) while
/// reservations come less than [`BUSY`] apart, so a bulk load writes the
/// file a few dozen times, not once per thousand rows.
const FIRST_CHUNK: i64 = 1024;
const MAX_CHUNK: i64 = 1 << 20;
const BUSY: Duration = Duration::from_secs(1);

/// The counters of one dataset.
pub(crate) struct Sequences {
    path: PathBuf,
    counters: Mutex<BTreeMap<String, Counter>>,
}

#[derive(Clone, Copy, Debug)]
struct Counter {
    /// The next value to hand out.
    next: i64,
    /// The recorded bound: values below it may be used without a write.
    bound: i64,
    chunk: i64,
    last_reserved: Option<Instant>,
}

impl Counter {
    fn resumed(bound: i64) -> Counter {
        Counter {
            next: bound,
            bound,
            chunk: FIRST_CHUNK,
            last_reserved: None,
        }
    }
}

#[derive(Serialize, Deserialize)]
struct SequencesFile {
    version: u32,
    bounds: BTreeMap<String, i64>,
}

impl Sequences {
    /// The counters recorded in dataset directory `dir` (none if the file
    /// is absent).
    pub(crate) fn open(dir: &Path) -> Result<Sequences> {
        let path = dir.join(SEQUENCES_FILE);
        let counters = match std::fs::read(&path) {
            Ok(b) => {
                let f: SequencesFile = serde_json::from_slice(&b).map_err(|e| {
                    Error::corrupt(&path, format!("unreadable sequence bounds: {e}"))
                })?;
                if f.version != 1 {
                    return Err(Error::corrupt(
                        &path,
                        format!("sequence bounds of version {}, expected 1", f.version),
                    ));
                }
                f.bounds
                    .into_iter()
                    .map(|(k, b)| (k, Counter::resumed(b)))
                    .collect()
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => BTreeMap::new(),
            Err(e) => return Err(Error::io(&path, e)),
        };
        Ok(Sequences {
            path,
            counters: Mutex::new(counters),
        })
    }

    /// Take `n` consecutive values of `field`'s counter; the first is
    /// returned.
    pub(crate) fn take(&self, field: &str, n: u64) -> Result<i64> {
        let mut all = self.counters.lock();
        let c = all
            .entry(field.to_owned())
            .or_insert_with(|| Counter::resumed(1));
        let first = c.next;
        let end = i64::try_from(n)
            .ok()
            .and_then(|n| first.checked_add(n))
            .ok_or_else(|| {
                Error::invalid(
                    Some(field),
                    format!("the sequence of `{field}` is exhausted (it reached {first})"),
                )
            })?;
        if end > c.bound {
            self.reserve(&mut all, field, end)?;
        }
        if let Some(c) = all.get_mut(field) {
            c.next = end;
        }
        Ok(first)
    }

    /// Note that `v` was written to `field`: later values are past it.
    pub(crate) fn seen(&self, field: &str, v: i64) -> Result<()> {
        let mut all = self.counters.lock();
        let c = all
            .entry(field.to_owned())
            .or_insert_with(|| Counter::resumed(1));
        if v < c.next {
            return Ok(());
        }
        let end = v.saturating_add(1);
        if end > c.bound {
            self.reserve(&mut all, field, end)?;
        }
        if let Some(c) = all.get_mut(field) {
            c.next = end;
        }
        Ok(())
    }

    /// Set `field`'s counter so that `next` is the next value handed out
    /// (SQL's `setval`): forwards past the recorded bound reserves a new
    /// bound first; backwards keeps the bound, so a restart resumes past
    /// every value handed out before (a gap, never a repeat of those).
    pub(crate) fn set(&self, field: &str, next: i64) -> Result<()> {
        if next < 1 {
            return Err(Error::invalid(
                Some(field),
                format!("a sequence's next value must be at least 1, got {next}"),
            ));
        }
        let mut all = self.counters.lock();
        let c = all
            .entry(field.to_owned())
            .or_insert_with(|| Counter::resumed(1));
        if next > c.bound {
            self.reserve(&mut all, field, next)?;
        }
        if let Some(c) = all.get_mut(field) {
            c.next = next;
        }
        Ok(())
    }

    /// The next value `field`'s counter would hand out.
    pub(crate) fn peek(&self, field: &str) -> i64 {
        self.counters.lock().get(field).map_or(1, |c| c.next)
    }

    /// Take over `other`'s counters (a truncated dataset's successor
    /// continues its sequences, as PostgreSQL's `TRUNCATE` does).
    pub(crate) fn continue_from(&self, other: &Sequences) -> Result<()> {
        let theirs = other.counters.lock().clone();
        let mut all = self.counters.lock();
        for (k, c) in theirs {
            all.insert(k, Counter::resumed(c.next));
        }
        self.save(&all)
    }

    /// Give field `to` a counter at least as far as `from`'s (a renamed
    /// column keeps counting; `from`'s stays, harmless, so that a crash
    /// before the rename is recorded loses nothing).
    pub(crate) fn copy(&self, from: &str, to: &str) -> Result<()> {
        let mut all = self.counters.lock();
        let Some(src) = all.get(from).copied() else {
            return Ok(());
        };
        let next = all.get(to).map_or(src.next, |c| c.next.max(src.next));
        let mut trial = all.clone();
        trial.insert(to.to_owned(), Counter::resumed(next));
        self.save(&trial)?;
        *all = trial;
        Ok(())
    }

    /// Record a bound for `field` at least `end` plus a chunk, then keep it.
    fn reserve(&self, all: &mut BTreeMap<String, Counter>, field: &str, end: i64) -> Result<()> {
        let Some(c) = all.get(field).copied() else {
            return Ok(());
        };
        let busy = c.last_reserved.is_some_and(|t| t.elapsed() < BUSY);
        let chunk = if busy {
            (c.chunk * 2).min(MAX_CHUNK)
        } else {
            FIRST_CHUNK
        };
        let bound = end.saturating_add(chunk);
        let mut trial = all.clone();
        if let Some(t) = trial.get_mut(field) {
            t.bound = bound;
        }
        self.save(&trial)?;
        if let Some(c) = all.get_mut(field) {
            c.bound = bound;
            c.chunk = chunk;
            c.last_reserved = Some(Instant::now());
        }
        Ok(())
    }

    fn save(&self, all: &BTreeMap<String, Counter>) -> Result<()> {
        let f = SequencesFile {
            version: 1,
            bounds: all.iter().map(|(k, c)| (k.clone(), c.bound)).collect(),
        };
        let bytes = serde_json::to_vec_pretty(&f)
            .map_err(|e| Error::Config(format!("encoding sequence bounds: {e}")))?;
        write_atomic(&self.path, &bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_increase_and_survive_reopen_without_repeats() {
        let dir = tempfile::tempdir().unwrap();
        let s = Sequences::open(dir.path()).unwrap();
        assert_eq!(s.take("id", 1).unwrap(), 1);
        assert_eq!(s.take("id", 3).unwrap(), 2);
        assert_eq!(s.take("other", 1).unwrap(), 1);
        assert_eq!(s.take("id", 1).unwrap(), 5);
        drop(s);
        // A restart resumes past every value handed out.
        let s = Sequences::open(dir.path()).unwrap();
        let v = s.take("id", 1).unwrap();
        assert!(v > 5, "{v}");
        assert!(s.take("other", 1).unwrap() > 1);
    }

    #[test]
    fn explicit_values_push_the_counter_past_them_durably() {
        let dir = tempfile::tempdir().unwrap();
        let s = Sequences::open(dir.path()).unwrap();
        s.seen("id", 5_000).unwrap();
        assert_eq!(s.take("id", 1).unwrap(), 5_001);
        s.seen("id", 10).unwrap();
        assert_eq!(s.take("id", 1).unwrap(), 5_002);
        s.seen("id", 1_000_000).unwrap();
        drop(s);
        let s = Sequences::open(dir.path()).unwrap();
        assert!(s.take("id", 1).unwrap() > 1_000_000);
    }

    #[test]
    fn exhaustion_is_an_error_not_a_wrap() {
        let dir = tempfile::tempdir().unwrap();
        let s = Sequences::open(dir.path()).unwrap();
        s.seen("id", i64::MAX - 2).unwrap();
        assert_eq!(s.take("id", 1).unwrap(), i64::MAX - 1);
        let e = s.take("id", 1).unwrap_err().to_string();
        assert!(e.contains("exhausted"), "{e}");
        assert!(s.take("id", u64::MAX).is_err());
    }

    #[test]
    fn a_copied_counter_keeps_counting() {
        let dir = tempfile::tempdir().unwrap();
        let s = Sequences::open(dir.path()).unwrap();
        s.take("id", 10).unwrap();
        s.copy("id", "key").unwrap();
        assert_eq!(s.take("key", 1).unwrap(), 11);
        s.copy("absent", "other").unwrap();
        assert_eq!(s.take("other", 1).unwrap(), 1);
        drop(s);
        assert!(Sequences::open(dir.path()).unwrap().take("key", 1).unwrap() > 11);
    }

    #[test]
    fn a_corrupt_file_is_reported() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(SEQUENCES_FILE), b"{not json").unwrap();
        let e = Sequences::open(dir.path()).err().unwrap().to_string();
        assert!(e.contains("sequence bounds"), "{e}");
    }

    #[test]
    fn a_successor_continues_the_counters() {
        let a = tempfile::tempdir().unwrap();
        let b = tempfile::tempdir().unwrap();
        let old = Sequences::open(a.path()).unwrap();
        old.take("id", 41).unwrap();
        let new = Sequences::open(b.path()).unwrap();
        new.continue_from(&old).unwrap();
        assert_eq!(new.take("id", 1).unwrap(), 42);
        drop(new);
        assert!(Sequences::open(b.path()).unwrap().take("id", 1).unwrap() >= 42);
    }
}
