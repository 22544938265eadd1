//! Sequences: the counters behind SQL's `SERIAL` and identity columns,
//! the fields whose default is [`crate::FieldDefault::Sequence`].
//!
//! A field's counter hands out the values of its [`SequenceDef`]: `start`,
//! `start + increment`, ... within `[min, max]`. Values are reserved in
//! chunks, durably: `sequences.json` in the dataset's directory records per
//! field a bound that no value handed out or written reaches (for a
//! counter going down, that every such value stays above), and is replaced
//! (atomically, fsynced) before a value at or past the old bound is used.
//! After a crash or a restart a counter resumes at its bound, so no value
//! is handed out twice, at the price of a gap (as with PostgreSQL's
//! sequence cache). A value written explicitly moves the counter past it,
//! so a later generated value never collides with it. The options live in
//! the catalog (created with the dataset, atomically); only the bounds live
//! here. Format: `docs/format/sequences.md`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::schema::SequenceDef;
use crate::storage::fsutil::write_atomic;

/// File name of the sequence bounds in a dataset's directory.
pub(crate) const SEQUENCES_FILE: &str = "sequences.json";

/// The first reservation of a counter, in values; doubled (up to
/// [`MAX_CHUNK`]) while reservations come less than [`BUSY`] apart, so a
/// bulk load writes the file a few dozen times, not once per thousand rows.
const FIRST_CHUNK: i128 = 1024;
const MAX_CHUNK: i128 = 1 << 20;
const BUSY: Duration = Duration::from_secs(1);

/// Values taken from a sequence at once: `first`, `first + step`, ...
/// (`count` of them), all within the sequence's range.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SequenceValues {
    pub first: i64,
    pub step: i64,
    pub count: u64,
}

impl SequenceValues {
    /// The values, in the order handed out.
    pub fn values(&self) -> impl Iterator<Item = i64> + use<> {
        let (first, step) = (i128::from(self.first), i128::from(self.step));
        (0..i128::from(self.count)).map(move |i| clamp(first + i * step))
    }

    /// The last value (the first when there is one).
    pub fn last(&self) -> i64 {
        let n = i128::from(self.count.max(1)) - 1;
        clamp(i128::from(self.first) + n * i128::from(self.step))
    }
}

/// An i128 inside the i64 range (values checked to be in range already).
fn clamp(v: i128) -> i64 {
    i64::try_from(v).unwrap_or(if v < 0 { i64::MIN } else { i64::MAX })
}

/// The counters of one dataset.
pub(crate) struct Sequences {
    path: PathBuf,
    slots: Mutex<BTreeMap<String, Slot>>,
}

/// A field's counter: only its recorded bound until first used (its
/// options, in the catalog, are needed to run it).
#[derive(Clone, Copy, Debug)]
enum Slot {
    Recorded(i64),
    Live(Counter),
}

/// A running counter. Values are i128 so that "one step past the last
/// value" is representable at either end of the i64 range.
#[derive(Clone, Copy, Debug)]
struct Counter {
    /// The next value to hand out (may lie past the range: exhausted).
    next: i128,
    /// The recorded bound: values before it (in the counting direction)
    /// may be used without a write.
    bound: i128,
    /// The direction: 1 counting up, -1 down.
    dir: i128,
    step: i128,
    chunk: i128,
    last_reserved: Option<Instant>,
}

impl Counter {
    /// A counter whose next value is `next`, already recorded.
    fn at(def: &SequenceDef, next: i128) -> Counter {
        Counter {
            next,
            bound: next,
            dir: if def.increment < 0 { -1 } else { 1 },
            step: i128::from(def.increment),
            chunk: FIRST_CHUNK,
            last_reserved: None,
        }
    }

    /// The counter of a slot: a recorded bound resumes there (a bound
    /// recorded at the end of the i64 range may stand for one past it,
    /// which cannot be written: the counter is then exhausted).
    fn of(slot: Option<Slot>, def: &SequenceDef) -> Counter {
        match slot {
            Some(Slot::Live(c)) if c.step == i128::from(def.increment) => c,
            // The options changed (`ALTER ... INCREMENT`): the next value
            // stays, the step is the new one; turned around, the counter
            // reserves again in its new direction before it hands out.
            Some(Slot::Live(c)) => {
                let mut n = Counter::at(def, c.next);
                if n.dir == c.dir {
                    n.bound = c.bound;
                    n.chunk = c.chunk;
                }
                n
            }
            Some(Slot::Recorded(b)) => {
                let mut next = i128::from(b);
                if def.increment > 0 && b == i64::MAX {
                    next += 1;
                } else if def.increment < 0 && b == i64::MIN {
                    next -= 1;
                }
                Counter::at(def, next)
            }
            None => Counter::at(def, i128::from(def.start)),
        }
    }

    /// `a` comes after `b` in the counting direction.
    fn after(&self, a: i128, b: i128) -> bool {
        a * self.dir > b * self.dir
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
        let slots = match std::fs::read(&path) {
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
                    .map(|(k, b)| (k, Slot::Recorded(b)))
                    .collect()
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => BTreeMap::new(),
            Err(e) => return Err(Error::io(&path, e)),
        };
        Ok(Sequences {
            path,
            slots: Mutex::new(slots),
        })
    }

    /// Take `n` consecutive values of `field`'s counter, whose options are
    /// `def`.
    pub(crate) fn take(&self, field: &str, def: &SequenceDef, n: u64) -> Result<SequenceValues> {
        let mut all = self.slots.lock();
        let mut c = Counter::of(all.get(field).copied(), def);
        let first = c.next;
        if n == 0 {
            return Ok(SequenceValues {
                first: clamp(first),
                step: def.increment,
                count: 0,
            });
        }
        let last = first + (i128::from(n) - 1) * c.step;
        let inside = |v: i128| (i128::from(def.min)..=i128::from(def.max)).contains(&v);
        if !inside(first) || !inside(last) {
            return Err(exhausted(field, def));
        }
        let end = first + i128::from(n) * c.step;
        if c.after(end, c.bound) {
            self.reserve(&mut all, field, &mut c, end)?;
        }
        c.next = end;
        all.insert(field.to_owned(), Slot::Live(c));
        Ok(SequenceValues {
            first: clamp(first),
            step: def.increment,
            count: n,
        })
    }

    /// Note that `v` was written to `field`: later values are past it.
    pub(crate) fn seen(&self, field: &str, def: &SequenceDef, v: i64) -> Result<()> {
        let mut all = self.slots.lock();
        let mut c = Counter::of(all.get(field).copied(), def);
        let v = i128::from(v);
        if c.after(c.next, v) {
            return Ok(());
        }
        let end = v + c.step;
        if c.after(end, c.bound) {
            self.reserve(&mut all, field, &mut c, end)?;
        }
        c.next = end;
        all.insert(field.to_owned(), Slot::Live(c));
        Ok(())
    }

    /// Set `field`'s counter as SQL's `setval(seq, value, called)`: the
    /// next value handed out is `value` (`called` false) or the one after
    /// it. Forwards past the recorded bound reserves a new bound first;
    /// backwards keeps the bound, so a restart resumes past every value
    /// handed out before (a gap, never a repeat of those).
    pub(crate) fn set(
        &self,
        field: &str,
        def: &SequenceDef,
        value: i64,
        called: bool,
    ) -> Result<()> {
        if value < def.min || value > def.max {
            return Err(Error::invalid(
                Some(field),
                format!(
                    "setval: value {value} is out of bounds for the sequence of `{field}` ({}..{})",
                    def.min, def.max
                ),
            ));
        }
        let mut all = self.slots.lock();
        let mut c = Counter::of(all.get(field).copied(), def);
        let next = i128::from(value) + if called { c.step } else { 0 };
        if c.after(next, c.bound) {
            self.reserve(&mut all, field, &mut c, next)?;
        }
        c.next = next;
        all.insert(field.to_owned(), Slot::Live(c));
        Ok(())
    }

    /// The next value `field`'s counter would hand out.
    pub(crate) fn peek(&self, field: &str, def: &SequenceDef) -> i64 {
        clamp(Counter::of(self.slots.lock().get(field).copied(), def).next)
    }

    /// Forget `field`'s counter (a dropped sequence: one created again
    /// under its name starts at its own START).
    pub(crate) fn forget(&self, field: &str) -> Result<()> {
        let mut all = self.slots.lock();
        if all.remove(field).is_some() {
            self.save(&all)?;
        }
        Ok(())
    }

    /// Take over `other`'s counters (a truncated dataset's successor
    /// continues its sequences, as PostgreSQL's `TRUNCATE` does).
    pub(crate) fn continue_from(&self, other: &Sequences) -> Result<()> {
        let theirs = other.slots.lock().clone();
        let mut all = self.slots.lock();
        for (k, s) in theirs {
            let b = match s {
                Slot::Recorded(b) => b,
                Slot::Live(c) => clamp(c.next),
            };
            all.insert(k, Slot::Recorded(b));
        }
        self.save(&all)
    }

    /// Give field `to` a counter at least as far as `from`'s (a renamed
    /// column keeps counting; `from`'s stays, harmless, so that a crash
    /// before the rename is recorded loses nothing).
    pub(crate) fn copy(&self, from: &str, to: &str, def: &SequenceDef) -> Result<()> {
        let mut all = self.slots.lock();
        let Some(src) = all.get(from).copied() else {
            return Ok(());
        };
        let src = Counter::of(Some(src), def);
        let mut next = src.next;
        if let Some(t) = all.get(to).copied() {
            let t = Counter::of(Some(t), def);
            if t.after(t.next, next) {
                next = t.next;
            }
        }
        let mut trial = all.clone();
        trial.insert(to.to_owned(), Slot::Recorded(clamp(next)));
        self.save(&trial)?;
        *all = trial;
        Ok(())
    }

    /// Record a bound for `field` at `end` plus a chunk, then keep it in `c`.
    fn reserve(
        &self,
        all: &mut BTreeMap<String, Slot>,
        field: &str,
        c: &mut Counter,
        end: i128,
    ) -> Result<()> {
        let busy = c.last_reserved.is_some_and(|t| t.elapsed() < BUSY);
        let chunk = if busy {
            (c.chunk * 2).min(MAX_CHUNK)
        } else {
            FIRST_CHUNK
        };
        let bound = end + chunk * c.step;
        let mut trial = all.clone();
        let mut kept = *c;
        kept.bound = bound;
        trial.insert(field.to_owned(), Slot::Live(kept));
        self.save(&trial)?;
        c.bound = bound;
        c.chunk = chunk;
        c.last_reserved = Some(Instant::now());
        Ok(())
    }

    fn save(&self, all: &BTreeMap<String, Slot>) -> Result<()> {
        let bounds = all
            .iter()
            .map(|(k, s)| {
                let b = match s {
                    Slot::Recorded(b) => *b,
                    Slot::Live(c) => clamp(c.bound),
                };
                (k.clone(), b)
            })
            .collect();
        let f = SequencesFile { version: 1, bounds };
        let bytes = serde_json::to_vec_pretty(&f)
            .map_err(|e| Error::Config(format!("encoding sequence bounds: {e}")))?;
        write_atomic(&self.path, &bytes)
    }
}

/// The error of a counter with no value left.
fn exhausted(field: &str, def: &SequenceDef) -> Error {
    let (which, v) = if def.increment < 0 {
        ("minimum", def.min)
    } else {
        ("maximum", def.max)
    };
    Error::invalid(
        Some(field),
        format!("the sequence of `{field}` is exhausted: it reached its {which} value ({v})"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    const D: SequenceDef = SequenceDef {
        start: 1,
        increment: 1,
        min: 1,
        max: i64::MAX,
        identity: None,
    };

    fn take(s: &Sequences, f: &str, n: u64) -> i64 {
        s.take(f, &D, n).unwrap().first
    }

    #[test]
    fn values_increase_and_survive_reopen_without_repeats() {
        let dir = tempfile::tempdir().unwrap();
        let s = Sequences::open(dir.path()).unwrap();
        assert_eq!(take(&s, "id", 1), 1);
        assert_eq!(take(&s, "id", 3), 2);
        assert_eq!(take(&s, "other", 1), 1);
        assert_eq!(take(&s, "id", 1), 5);
        drop(s);
        // A restart resumes past every value handed out.
        let s = Sequences::open(dir.path()).unwrap();
        let v = take(&s, "id", 1);
        assert!(v > 5, "{v}");
        assert!(take(&s, "other", 1) > 1);
    }

    #[test]
    fn explicit_values_push_the_counter_past_them_durably() {
        let dir = tempfile::tempdir().unwrap();
        let s = Sequences::open(dir.path()).unwrap();
        s.seen("id", &D, 5_000).unwrap();
        assert_eq!(take(&s, "id", 1), 5_001);
        s.seen("id", &D, 10).unwrap();
        assert_eq!(take(&s, "id", 1), 5_002);
        s.seen("id", &D, 1_000_000).unwrap();
        drop(s);
        let s = Sequences::open(dir.path()).unwrap();
        assert!(take(&s, "id", 1) > 1_000_000);
    }

    #[test]
    fn exhaustion_is_an_error_not_a_wrap() {
        let dir = tempfile::tempdir().unwrap();
        let s = Sequences::open(dir.path()).unwrap();
        s.seen("id", &D, i64::MAX - 2).unwrap();
        assert_eq!(take(&s, "id", 1), i64::MAX - 1);
        assert_eq!(take(&s, "id", 1), i64::MAX);
        let e = s.take("id", &D, 1).unwrap_err().to_string();
        assert!(e.contains("exhausted"), "{e}");
        assert!(s.take("id", &D, u64::MAX).is_err());
        // The bound recorded at the end of the range is not read back as
        // a value still free.
        drop(s);
        let s = Sequences::open(dir.path()).unwrap();
        assert!(s.take("id", &D, 1).is_err());
    }

    #[test]
    fn options_start_step_and_limit_the_values() {
        let dir = tempfile::tempdir().unwrap();
        let s = Sequences::open(dir.path()).unwrap();
        let d = SequenceDef {
            start: 100,
            increment: 10,
            min: 1,
            max: 150,
            identity: None,
        };
        let v = s.take("id", &d, 3).unwrap();
        assert_eq!(v.values().collect::<Vec<_>>(), [100, 110, 120]);
        assert_eq!(v.last(), 120);
        // An explicit value moves the counter one step past it.
        s.seen("id", &d, 133).unwrap();
        assert_eq!(s.take("id", &d, 1).unwrap().first, 143);
        let e = s.take("id", &d, 1).unwrap_err().to_string();
        assert!(e.contains("maximum value (150)"), "{e}");
        // Nothing of a refused take is used.
        s.set("id", &d, 120, true).unwrap();
        assert_eq!(s.take("id", &d, 2).unwrap().last(), 140);
        assert!(s.set("id", &d, 151, true).is_err());
        assert!(s.set("id", &d, 0, false).is_err());
        drop(s);
        let s = Sequences::open(dir.path()).unwrap();
        assert!(s.take("id", &d, 1).is_err(), "resumed past the maximum");
    }

    #[test]
    fn a_descending_counter_counts_down_and_resumes_below() {
        let dir = tempfile::tempdir().unwrap();
        let s = Sequences::open(dir.path()).unwrap();
        let d = SequenceDef::counting(-2);
        assert_eq!(d.start, -1);
        let v = s.take("id", &d, 3).unwrap();
        assert_eq!(v.values().collect::<Vec<_>>(), [-1, -3, -5]);
        s.seen("id", &d, -4).unwrap();
        assert_eq!(s.peek("id", &d), -7);
        s.seen("id", &d, -100).unwrap();
        assert_eq!(s.take("id", &d, 1).unwrap().first, -102);
        drop(s);
        let s = Sequences::open(dir.path()).unwrap();
        assert!(s.take("id", &d, 1).unwrap().first < -102);
        s.seen("id", &d, i64::MIN + 1).unwrap();
        let e = s.take("id", &d, 1).unwrap_err().to_string();
        assert!(e.contains("minimum"), "{e}");
    }

    #[test]
    fn a_copied_counter_keeps_counting() {
        let dir = tempfile::tempdir().unwrap();
        let s = Sequences::open(dir.path()).unwrap();
        take(&s, "id", 10);
        s.copy("id", "key", &D).unwrap();
        assert_eq!(take(&s, "key", 1), 11);
        s.copy("absent", "other", &D).unwrap();
        assert_eq!(take(&s, "other", 1), 1);
        drop(s);
        assert!(take(&Sequences::open(dir.path()).unwrap(), "key", 1) > 11);
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
        take(&old, "id", 41);
        let new = Sequences::open(b.path()).unwrap();
        new.continue_from(&old).unwrap();
        assert_eq!(take(&new, "id", 1), 42);
        drop(new);
        assert!(take(&Sequences::open(b.path()).unwrap(), "id", 1) >= 42);
    }
}
