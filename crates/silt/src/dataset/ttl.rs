//! A dataset's `ttl` ([`TtlDef`]) at work: records that expire.
//!
//! - **Reads hide** an expired record at once: point reads, scans, index
//!   and recency queries (each fetches its records through the primary),
//!   transactions, and SQL. An insert over an expired record is not a
//!   duplicate. Index-only answers (a B+-tree's keys without the records)
//!   and counts taken from component metadata may include expired records
//!   until the sweep deletes them.
//! - **A sweep deletes** the records expired `grace` or more ago, each in
//!   its own transaction that checks the record again under its lock (a
//!   record rewritten meanwhile is left alone), so every index agrees with
//!   the primary, before and after a crash, with no new recovery rule. A
//!   merge cannot drop an expired record by itself: the secondary indexes
//!   would keep entries of a record the primary no longer has, and a
//!   record dropped from a component that is not the oldest would bring
//!   its older versions back.
//! - **Finding the expired records**: the sweep reads the records whose
//!   sweep field ([`TtlDef::sweep_field`]) is old enough through the
//!   primary key when the key leads with that field, else through a
//!   B+-tree index that leads with it, else by scanning the dataset (at
//!   most once per [`FULL_SCAN_EVERY`] sweeps; create such an index on a
//!   large dataset).
//! - **The written clock** (`crate::clock`) is the largest `time` any write
//!   applied. It is kept in the dataset's `ttl-clock` file at every
//!   checkpoint (`docs/format/ttl-clock.md`); recovery raises it again
//!   from the log records after the checkpoint, so a record hidden before
//!   a crash stays hidden after it.

use super::write::{PreparedUnder, WriteOp};
use super::{BatchOptions, Dataset};
use crate::clock::ExpiryClock;
use crate::error::{Error, Result};
use crate::schema::{DatasetDef, TtlDef};
use crate::storage::fsutil::write_atomic;
use crate::value::{self, FieldView, Value};
use serde::{Deserialize, Serialize};
use std::ops::Bound;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};

/// The file keeping the written clock.
pub(crate) const TTL_CLOCK_FILE: &str = "ttl-clock";

/// Without an access path on the sweep field, one sweep in this many scans
/// the whole dataset (the others do nothing).
pub const FULL_SCAN_EVERY: u64 = 60;

/// Records a sweep reads before deleting the expired ones among them.
const SWEEP_BATCH: usize = 4096;

/// The file's content (`docs/format/ttl-clock.md`).
#[derive(Serialize, Deserialize)]
struct ClockFile {
    #[serde(default)]
    version: u32,
    /// The field the clock followed.
    #[serde(default)]
    time: Option<String>,
    written: i64,
}

/// The `ttl` of an open dataset.
pub(crate) struct Ttl {
    pub(crate) def: TtlDef,
    clock: ExpiryClock,
    path: PathBuf,
    /// The written clock as last saved.
    saved: AtomicI64,
    sweeps: AtomicU64,
    expired: AtomicU64,
    scanned: AtomicU64,
}

/// What one sweep did.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct SweepReport {
    /// The clock the sweep deleted by (records expired at or before it),
    /// if it ran.
    pub cutoff: Option<i64>,
    /// How it found candidates: `primary key`, `index <name>`, `full scan`,
    /// or `skipped` (a sweep between two full scans, or nothing written
    /// yet under the written clock).
    pub path: String,
    /// Records read to find the expired ones.
    pub scanned: u64,
    /// Records deleted.
    pub expired: u64,
}

/// Counters of a dataset's ttl (`silt stats`).
#[derive(Clone, Debug, Serialize)]
pub struct TtlStats {
    pub ttl: TtlDef,
    /// The clock reads hide by (`None`: nothing written yet).
    pub now: Option<i64>,
    pub sweeps: u64,
    pub scanned: u64,
    pub expired: u64,
}

impl Ttl {
    /// The ttl of dataset `def` in `dir`, with its saved clock.
    pub(crate) fn open(def: &DatasetDef, dir: &Path) -> Result<Option<Arc<Ttl>>> {
        let Some(t) = &def.ttl else { return Ok(None) };
        let unix = crate::clock::unit(t.clock_name(def))?;
        let path = dir.join(TTL_CLOCK_FILE);
        let clock = ExpiryClock::new(0, unix);
        match std::fs::read(&path) {
            Ok(b) => {
                let f: ClockFile = serde_json::from_slice(&b)
                    .map_err(|e| Error::corrupt(&path, format!("unreadable ttl clock ({e})")))?;
                // A clock of another field (a ttl since replaced) says nothing.
                if f.time.is_some() && f.time == t.time {
                    clock.saw(f.written);
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(Error::io(&path, e)),
        }
        let saved = AtomicI64::new(clock.written());
        Ok(Some(Arc::new(Ttl {
            def: t.clone(),
            clock,
            path,
            saved,
            sweeps: AtomicU64::new(0),
            expired: AtomicU64::new(0),
            scanned: AtomicU64::new(0),
        })))
    }

    /// The (time, expiry field) of an encoded record.
    fn times(&self, rec: &[u8]) -> Result<(Option<i64>, Option<i64>)> {
        let (tf, ef) = (
            self.def.time.as_deref().map(str::as_bytes),
            self.def.expiry.as_deref().map(str::as_bytes),
        );
        let mut out = [None, None];
        value::visit_fields(
            rec,
            |name| {
                if Some(name) == tf {
                    Some(0)
                } else if Some(name) == ef {
                    Some(1)
                } else {
                    None
                }
            },
            |slot, v| {
                if let FieldView::Int(t) = v {
                    out[slot] = Some(t);
                }
            },
        )?;
        Ok((out[0], out[1]))
    }

    /// The expiry of an encoded record (`None`: it never expires).
    pub(crate) fn expiry(&self, rec: &[u8]) -> Result<Option<i64>> {
        let (t, e) = self.times(rec)?;
        Ok(self.def.expiry_of(t, e))
    }

    /// The clock reads hide by.
    pub(crate) fn now(&self) -> Option<i64> {
        self.clock.now()
    }

    /// Whether a record is expired at `now` (a record that cannot be read
    /// is not: reading it reports the damage).
    pub(crate) fn expired_at(&self, rec: &[u8], now: Option<i64>) -> bool {
        match (now, self.expiry(rec)) {
            (Some(n), Ok(Some(e))) => e <= n,
            _ => false,
        }
    }

    /// A write of record `rec` is applied: the written clock follows its
    /// time.
    pub(crate) fn saw_value(&self, rec: &Value) {
        // The same top-level field `times` reads from the encoding.
        if self.clock.is_written()
            && let (Some(f), Value::Object(fields)) = (&self.def.time, rec)
            && let Some((_, Value::Int(t))) = fields.iter().find(|(n, _)| n == f)
        {
            self.clock.saw(*t);
        }
    }

    /// [`Ttl::saw_value`] of an encoded record.
    pub(crate) fn saw(&self, rec: &[u8]) {
        if self.clock.is_written()
            && let Ok((Some(t), _)) = self.times(rec)
        {
            self.clock.saw(t);
        }
    }

    /// Keep the written clock in its file (a checkpoint, before the log it
    /// was raised by is deleted).
    pub(crate) fn save(&self) -> Result<()> {
        let w = self.clock.written();
        if !self.clock.is_written() || w == self.saved.load(Ordering::Relaxed) {
            return Ok(());
        }
        let bytes = serde_json::to_vec(&ClockFile {
            version: 1,
            time: self.def.time.clone(),
            written: w,
        })
        .map_err(|e| Error::Config(format!("ttl clock: {e}")))?;
        write_atomic(&self.path, &bytes)?;
        self.saved.store(w, Ordering::Relaxed);
        Ok(())
    }

    /// Whether value-list index `d` expires its items exactly when this
    /// ttl expires their records (the same expiry field): a swept record's
    /// item then needs no marker, since every list read at or past its
    /// expiry skips it and the list's merges drop it. Without this, each
    /// sweep wrote one marker per record into the lists, which the next
    /// reads of the same lists had to step over (`examples/pubsub_ops`:
    /// the writer's CPU per operation went from 12 to 24 µs).
    pub(crate) fn lists_expire_alike(&self, d: &crate::index::IndexDef) -> bool {
        d.kind == crate::index::IndexKind::Valuelist
            && self.def.after.is_none()
            && d.options.expiry.is_some()
            && d.options.expiry == self.def.expiry
    }

    pub(crate) fn stats(&self) -> TtlStats {
        TtlStats {
            ttl: self.def.clone(),
            now: self.now(),
            sweeps: self.sweeps.load(Ordering::Relaxed),
            scanned: self.scanned.load(Ordering::Relaxed),
            expired: self.expired.load(Ordering::Relaxed),
        }
    }
}

/// How a sweep finds candidates.
enum Candidates {
    /// The primary key leads with the sweep field.
    Primary,
    /// A B+-tree index leads with it.
    Index(String),
    FullScan,
}

impl Dataset {
    /// The dataset's ttl, if it has one.
    pub(crate) fn ttl(&self) -> Option<Arc<Ttl>> {
        self.ttl.read().clone()
    }

    /// Whether records expire: a reader of raw components (SQL's column
    /// images) must read through [`Dataset::scan_raw`] instead, which
    /// hides the expired ones.
    pub fn has_ttl(&self) -> bool {
        self.ttl.read().is_some()
    }

    /// Replace the ttl (`Database::set_ttl`, which holds the DDL lock: no
    /// write is under way). A written clock continues the old ttl's when
    /// it follows the same field; otherwise it starts at the largest time
    /// the records hold (one scan), and is saved at once, so a record it
    /// hides stays hidden after a crash.
    pub(crate) fn reset_ttl(self: &Arc<Self>, def: &DatasetDef) -> Result<()> {
        let t = Ttl::open(def, &self.dir)?;
        if let Some(new) = &t
            && new.clock.is_written()
        {
            match self.ttl() {
                Some(old) if old.clock.is_written() && old.def.time == new.def.time => {
                    new.clock.saw(old.clock.written());
                }
                _ => {
                    let mut scan =
                        self.open_scan(Bound::Unbounded, Bound::Unbounded, false, false)?;
                    while let Some((_, rec)) = scan.next_raw()? {
                        new.saw(&rec);
                    }
                }
            }
            new.save()?;
        }
        *self.ttl.write() = t;
        Ok(())
    }

    /// Keep the ttl's written clock (a checkpoint).
    pub(crate) fn save_ttl_clock(&self) -> Result<()> {
        match self.ttl() {
            Some(t) => t.save(),
            None => Ok(()),
        }
    }

    /// Recovery read a logged write of encoded record `rec` (a delete's
    /// is empty).
    pub(crate) fn ttl_replayed(&self, rec: &[u8]) {
        if let Some(t) = self.ttl()
            && !rec.is_empty()
        {
            t.saw(rec);
        }
    }

    /// What a read sees of an encoded record under the ttl: `false` hides it.
    pub(super) fn visible(&self, rec: &[u8]) -> bool {
        // Every get passes here: read under the lock, no Arc clone.
        self.ttl
            .read()
            .as_ref()
            .is_none_or(|t| !t.expired_at(rec, t.now()))
    }

    /// Every stored record with a key within the bounds, in key order,
    /// expired or not: an expired record stays stored until a sweep
    /// deletes it (for inspection; reads hide it).
    pub fn scan_stored(
        self: &Arc<Self>,
        lo: Bound<Vec<u8>>,
        hi: Bound<Vec<u8>>,
    ) -> Result<super::DatasetScan> {
        self.open_scan(lo, hi, false, false)
    }

    /// The counters of the ttl, if any.
    pub fn ttl_stats(&self) -> Option<TtlStats> {
        self.ttl().map(|t| t.stats())
    }

    /// Delete the records expired `grace` or more ago (see the module doc);
    /// the background sweeper calls it every `DbOptions::ttl_sweep_ms`.
    /// `full_scan_due`: a sweep without an access path may scan the
    /// dataset.
    pub fn sweep_expired(self: &Arc<Self>, full_scan_due: bool) -> Result<SweepReport> {
        let Some(ttl) = self.ttl() else {
            return Err(Error::Config(format!(
                "dataset `{}` has no ttl to sweep by",
                self.name
            )));
        };
        let mut report = SweepReport {
            path: "skipped".into(),
            ..SweepReport::default()
        };
        let Some(now) = ttl.now() else {
            return Ok(report);
        };
        let cutoff = now.saturating_sub(ttl.def.grace);
        // Records whose sweep field is at most `bound` are expired.
        let bound = match ttl.def.after {
            Some(a) => cutoff.saturating_sub(a),
            None => cutoff,
        };
        let path = self.sweep_path(&ttl);
        if matches!(path, Candidates::FullScan) && !full_scan_due {
            return Ok(report);
        }
        report.cutoff = Some(cutoff);
        match &path {
            Candidates::Index(name) => {
                report.path = format!("index {name}");
                // Each round reads expired records still there; a round
                // that deletes none of them ends the sweep.
                loop {
                    let keys: Vec<Vec<u8>> = self
                        .index_range_raw(
                            name,
                            Bound::Unbounded,
                            Bound::Included(&[Value::Int(bound)]),
                            Some(SWEEP_BATCH),
                        )?
                        .into_iter()
                        .map(|(_, pk)| pk)
                        .collect();
                    report.scanned += keys.len() as u64;
                    let n = self.expire_keys(&keys, cutoff)?;
                    report.expired += n;
                    if n == 0 || keys.len() < SWEEP_BATCH {
                        break;
                    }
                }
            }
            Candidates::Primary | Candidates::FullScan => {
                let mut from: Bound<Vec<u8>> = Bound::Unbounded;
                let hi = match path {
                    Candidates::Primary => {
                        report.path = "primary key".into();
                        let p = self.encode_pk_prefix(&[Value::Int(bound)])?;
                        Bound::Excluded(value::prefix_upper_bound(&p))
                    }
                    _ => {
                        report.path = "full scan".into();
                        Bound::Unbounded
                    }
                };
                loop {
                    let mut scan = self.open_scan(from.clone(), hi.clone(), false, false)?;
                    let (mut keys, mut read, mut last) = (Vec::new(), 0, None);
                    while read < SWEEP_BATCH
                        && let Some((k, v)) = scan.next_raw()?
                    {
                        read += 1;
                        if ttl.expired_at(&v, Some(cutoff)) {
                            keys.push(k.clone());
                        }
                        last = Some(k);
                    }
                    drop(scan);
                    report.scanned += read as u64;
                    report.expired += self.expire_keys(&keys, cutoff)?;
                    match last {
                        Some(k) if read == SWEEP_BATCH => from = Bound::Excluded(k),
                        _ => break,
                    }
                }
            }
        }
        ttl.sweeps.fetch_add(1, Ordering::Relaxed);
        ttl.scanned.fetch_add(report.scanned, Ordering::Relaxed);
        ttl.expired.fetch_add(report.expired, Ordering::Relaxed);
        Ok(report)
    }

    fn sweep_path(&self, ttl: &Ttl) -> Candidates {
        let f = ttl.def.sweep_field();
        let def = self.def();
        if def.primary_key.first().map(String::as_str) == Some(f) {
            return Candidates::Primary;
        }
        self.index_defs()
            .into_iter()
            .find(|d| d.kind.is_btree() && d.fields.first().map(String::as_str) == Some(f))
            .map_or(Candidates::FullScan, |d| Candidates::Index(d.name))
    }

    /// Delete those of `keys` whose records are expired at `cutoff`, each
    /// in its own transaction, checked under its lock; returns how many.
    fn expire_keys(&self, keys: &[Vec<u8>], cutoff: i64) -> Result<u64> {
        if keys.is_empty() {
            return Ok(0);
        }
        let opts = BatchOptions {
            stop_on_error: false,
            ..BatchOptions::default()
        };
        let ops = keys.iter().map(|k| Ok((k.as_slice(), &[][..])));
        let report = self.write_ops_as(opts, ops, PreparedUnder::Now, |k, _| {
            WriteOp::Expire(k, cutoff)
        })?;
        if let Some((_, e)) = report.failed.into_iter().next() {
            return Err(e);
        }
        Ok(report.committed as u64)
    }
}
