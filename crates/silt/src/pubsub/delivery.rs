//! Live delivery (beyond the paper): every match is also pushed to its
//! subscriber's queue, in order and at least once, with a durable cursor.
//!
//! - **The queue** is dataset `<space>_deliveries`, keyed `(uid, seq)`:
//!   one record per matching (subscription, publication) pair, holding the
//!   subscription's `sid` and the publication. An operation appends its
//!   matches in the same transaction as its own record (PUBLISH: the live
//!   subscriptions it matches; SUBSCRIBE: the stored publications it
//!   matches, oldest first), so a crash keeps both or neither, and every
//!   matching pair enters the queue exactly once, as the answers do.
//! - **Sequence numbers** come from the dataset's durable counter: never
//!   handed out twice, even across a crash. They are taken in the order the
//!   operations commit on one id, but operations on different ids commit
//!   in any order; so a listener reads only up to the **watermark**: below
//!   the smallest number still held by an uncommitted operation, or when
//!   none is held, up to the largest number taken so far (numbers up to it
//!   are committed or abandoned for good), and nothing is skipped. (Found
//!   by the threaded test: with "everything" as the bound when nothing was
//!   held, a read could see a later number before an earlier one taken
//!   just after the bound was computed.)
//! - **The cursor** is dataset `<space>_cursors`, keyed `uid`: the last
//!   sequence number the subscriber acknowledged. [`Listener::ack`] moves it
//!   and deletes the acknowledged deliveries in one transaction; a listener
//!   resumes after it. What was handed out but not acknowledged when a
//!   subscriber died is handed out again (at least once; never anything at
//!   or below the cursor).
//! - A listener waits on an in-process notifier that every committed
//!   operation wakes.

use super::model::Publication;
use crate::dataset::Dataset;
use crate::db::Database;
use crate::error::{Error, Result};
use crate::schema::{DatasetDef, SequenceDef};
use crate::value::{self, FieldType, Value};
use parking_lot::{Condvar, Mutex};
use std::collections::{BTreeSet, VecDeque};
use std::ops::Bound;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Deliveries a listener reads from the queue at once.
const BATCH: usize = 256;
/// Deliveries one acknowledging transaction deletes at most.
const ACK_STEP: usize = 4096;

/// One match pushed to a subscriber.
#[derive(Clone, Debug, PartialEq)]
pub struct Delivery {
    /// Position in the subscriber's queue (increasing).
    pub seq: i64,
    /// The subscriber.
    pub uid: i64,
    /// The subscription that matched.
    pub sid: i64,
    pub publication: Publication,
}

impl Delivery {
    fn record(&self) -> Value {
        let p = &self.publication;
        let mut fields = vec![
            ("uid".into(), Value::Int(self.uid)),
            ("seq".into(), Value::Int(self.seq)),
            ("sid".into(), Value::Int(self.sid)),
            ("id".into(), p.id.clone()),
            ("pid".into(), Value::Int(p.pid)),
            ("tp".into(), Value::Int(p.tp)),
            ("tmax".into(), Value::Int(p.tmax)),
            ("desc".into(), Value::String(p.desc.clone())),
        ];
        if let Some((x, y)) = p.loc {
            fields.push((
                "loc".into(),
                Value::Array(vec![Value::Double(x), Value::Double(y)]),
            ));
        }
        Value::Object(fields)
    }

    fn from_record(r: &Value) -> Result<Delivery> {
        let int = |f: &str| match r.get(f) {
            Some(Value::Int(v)) => Ok(*v),
            _ => Err(Error::corrupt(
                "<pub/sub delivery>",
                format!("field `{f}` is not an integer"),
            )),
        };
        Ok(Delivery {
            seq: int("seq")?,
            uid: int("uid")?,
            sid: int("sid")?,
            publication: Publication {
                id: r.get("id").cloned().unwrap_or(Value::Null),
                pid: int("pid")?,
                tp: int("tp")?,
                tmax: int("tmax")?,
                desc: match r.get("desc") {
                    Some(Value::String(s)) => s.clone(),
                    _ => String::new(),
                },
                loc: match r.get("loc") {
                    Some(Value::Array(v)) => {
                        let [x, y] = super::model::doubles(v, "loc")?;
                        Some((x, y))
                    }
                    _ => None,
                },
            },
        })
    }
}

/// Sequence numbers taken and not yet committed or abandoned.
#[derive(Default)]
struct Flight {
    held: BTreeSet<i64>,
    /// The largest number taken so far (at open: below the counter's next).
    taken: i64,
    /// Bumped whenever numbers are released (a listener waits for a change).
    generation: u64,
}

/// The queues and cursors of one pub/sub space.
pub(super) struct Deliveries {
    queue: Arc<Dataset>,
    cursors: Arc<Dataset>,
    flight: Mutex<Flight>,
    wake: Condvar,
}

/// Sequence numbers held by one operation until it commits or fails
/// (released when dropped).
pub(super) struct Reservation<'a> {
    d: &'a Deliveries,
    seqs: Vec<i64>,
}

impl Drop for Reservation<'_> {
    fn drop(&mut self) {
        if self.seqs.is_empty() {
            return;
        }
        let mut f = self.d.flight.lock();
        for s in &self.seqs {
            f.held.remove(s);
        }
        f.generation += 1;
        drop(f);
        self.d.wake.notify_all();
    }
}

impl Deliveries {
    /// Open (creating if needed) the queue and cursor datasets of `space`.
    pub(super) fn open(db: &Database, space: &str, partitions: u32) -> Result<Deliveries> {
        let qname = format!("{space}_deliveries");
        let queue = match db.dataset(&qname) {
            Ok(d) => d,
            Err(_) => {
                let mut def = DatasetDef::new(&qname, &["uid", "seq"])
                    .field("uid", FieldType::Int)
                    .field("seq", FieldType::Int)
                    .field("sid", FieldType::Int)
                    .sequence("seq", SequenceDef::default());
                def.partitions = partitions.max(1);
                db.create_dataset(def)?;
                db.dataset(&qname)?
            }
        };
        let cname = format!("{space}_cursors");
        let cursors = match db.dataset(&cname) {
            Ok(d) => d,
            Err(_) => {
                let def = DatasetDef::new(&cname, &["uid"])
                    .field("uid", FieldType::Int)
                    .field("seq", FieldType::Int);
                db.create_dataset(def)?;
                db.dataset(&cname)?
            }
        };
        for (d, key) in [(&queue, &["uid", "seq"][..]), (&cursors, &["uid"][..])] {
            if d.def().primary_key != key {
                return Err(Error::Config(format!(
                    "dataset `{}` exists but is not a pub/sub delivery store (its key must be ({}))",
                    d.name(),
                    key.join(", ")
                )));
            }
        }
        let taken = queue.peek_sequence("seq").saturating_sub(1);
        Ok(Deliveries {
            queue,
            cursors,
            flight: Mutex::new(Flight {
                taken,
                ..Flight::default()
            }),
            wake: Condvar::new(),
        })
    }

    pub(super) fn queue(&self) -> &Arc<Dataset> {
        &self.queue
    }

    /// The queue and the cursors.
    pub(super) fn datasets(&self) -> [Arc<Dataset>; 2] {
        [self.queue.clone(), self.cursors.clone()]
    }

    /// Take `n` sequence numbers, held until the reservation is dropped
    /// (after the operation's commit, or its failure).
    pub(super) fn reserve(&self, n: usize) -> Result<Reservation<'_>> {
        if n == 0 {
            return Ok(Reservation {
                d: self,
                seqs: Vec::new(),
            });
        }
        let mut f = self.flight.lock();
        let v = self.queue.next_sequence("seq", n as u64)?;
        let seqs: Vec<i64> = v.values().collect();
        f.held.extend(seqs.iter().copied());
        f.taken = f.taken.max(v.last());
        Ok(Reservation { d: self, seqs })
    }

    /// The delivery records of `matches` ((uid, sid, publication) in the
    /// order to deliver) under the numbers of `r`.
    pub(super) fn records(r: &Reservation<'_>, matches: &[(i64, i64, Publication)]) -> Vec<Value> {
        r.seqs
            .iter()
            .zip(matches)
            .map(|(&seq, (uid, sid, p))| {
                Delivery {
                    seq,
                    uid: *uid,
                    sid: *sid,
                    publication: p.clone(),
                }
                .record()
            })
            .collect()
    }

    /// Every sequence number up to the returned one is committed or gone
    /// for good; and the generation to wait on. (Not `i64::MAX` when
    /// nothing is held: a number taken after this call but committed before
    /// the read would be seen while a smaller one taken meanwhile is not.)
    fn watermark(&self) -> (i64, u64) {
        let f = self.flight.lock();
        let w = f.held.first().map_or(f.taken, |s| s - 1);
        (w, f.generation)
    }

    /// The subscriber's acknowledged position (0: nothing acknowledged).
    fn cursor(&self, uid: i64) -> Result<i64> {
        Ok(match self.cursors.get(&[Value::Int(uid)])? {
            Some(r) => match r.get("seq") {
                Some(Value::Int(s)) => *s,
                _ => {
                    return Err(Error::corrupt(
                        "<pub/sub cursor>",
                        "field `seq` is not an integer",
                    ));
                }
            },
            None => 0,
        })
    }

    /// The sequence numbers of up to `n` queued deliveries of `uid` after
    /// `after`, up to `upto`.
    fn read_keys(&self, uid: i64, after: i64, upto: i64, n: usize) -> Result<Vec<i64>> {
        if upto <= after {
            return Ok(Vec::new());
        }
        let lo = self
            .queue
            .encode_pk(&[Value::Int(uid), Value::Int(after)])?;
        let hi = self.queue.encode_pk(&[Value::Int(uid), Value::Int(upto)])?;
        let mut scan = self
            .queue
            .scan_raw(Bound::Excluded(lo), Bound::Included(hi))?;
        let mut out = Vec::new();
        while out.len() < n {
            match scan.next_raw()? {
                Some((k, _)) => match value::decode_key(&k)?.get(1) {
                    Some(Value::Int(s)) => out.push(*s),
                    _ => {
                        return Err(Error::corrupt(
                            "<pub/sub delivery>",
                            "key without a sequence number",
                        ));
                    }
                },
                None => break,
            }
        }
        Ok(out)
    }

    /// Up to [`BATCH`] deliveries of `uid` after `after`, up to `upto`.
    fn read(&self, uid: i64, after: i64, upto: i64) -> Result<Vec<Delivery>> {
        if upto <= after {
            return Ok(Vec::new());
        }
        let lo = [Value::Int(uid), Value::Int(after)];
        let hi = [Value::Int(uid), Value::Int(upto)];
        let mut scan = self
            .queue
            .scan(Bound::Excluded(&lo[..]), Bound::Included(&hi[..]))?;
        let mut out = Vec::new();
        while out.len() < BATCH {
            match scan.next() {
                Some(r) => out.push(Delivery::from_record(&r?)?),
                None => break,
            }
        }
        Ok(out)
    }
}

/// A subscriber's live feed: its deliveries after its cursor, in order,
/// waiting for new ones. Iterating acknowledges what was handed out each
/// time the listener goes back to the queue (at least once: what the
/// subscriber was working on when it died comes again).
pub struct Listener {
    d: Arc<Deliveries>,
    uid: i64,
    /// Acknowledged up to here (durable).
    cursor: i64,
    /// Handed out up to here.
    handed: i64,
    ready: VecDeque<Delivery>,
}

impl Listener {
    pub(super) fn new(d: Arc<Deliveries>, uid: i64) -> Result<Listener> {
        let cursor = d.cursor(uid)?;
        Ok(Listener {
            d,
            uid,
            cursor,
            handed: cursor,
            ready: VecDeque::new(),
        })
    }

    pub fn uid(&self) -> i64 {
        self.uid
    }

    /// The last acknowledged sequence number (0: none).
    pub fn cursor(&self) -> i64 {
        self.cursor
    }

    /// Deliveries read from the queue and not yet handed out.
    pub fn buffered(&self) -> usize {
        self.ready.len()
    }

    /// The next delivery, waiting up to `timeout` (`None`: for ever) for
    /// one; `Ok(None)` when the time ran out. Does not acknowledge.
    pub fn next_within(&mut self, timeout: Option<Duration>) -> Result<Option<Delivery>> {
        let deadline = timeout.map(|t| Instant::now() + t);
        loop {
            if let Some(d) = self.ready.pop_front() {
                self.handed = d.seq;
                return Ok(Some(d));
            }
            let (upto, generation) = self.d.watermark();
            let got = self.d.read(self.uid, self.handed, upto)?;
            if !got.is_empty() {
                self.ready.extend(got);
                continue;
            }
            let mut f = self.d.flight.lock();
            while f.generation == generation {
                match deadline {
                    None => self.d.wake.wait(&mut f),
                    Some(at) => {
                        if self.d.wake.wait_until(&mut f, at).timed_out() {
                            return Ok(None);
                        }
                    }
                }
            }
        }
    }

    /// The next delivery already committed, without waiting.
    pub fn try_next(&mut self) -> Result<Option<Delivery>> {
        self.next_within(Some(Duration::ZERO))
    }

    /// Acknowledge every delivery handed out up to `seq`: the cursor moves
    /// there and those deliveries leave the queue, in one transaction
    /// (durable as the database's durability mode says).
    pub fn ack(&mut self, seq: i64) -> Result<()> {
        if seq <= self.cursor {
            return Ok(());
        }
        if seq > self.handed {
            return Err(Error::invalid(
                Some("seq"),
                format!(
                    "cannot acknowledge delivery {seq}: only up to {} was handed out to subscriber {}",
                    self.handed, self.uid
                ),
            ));
        }
        // In steps of at most ACK_STEP deliveries, each one transaction that
        // moves the cursor to its last delivery and deletes the step's
        // deliveries: at every moment nothing at or below the cursor is
        // queued, and no transaction grows with the backlog.
        loop {
            let step = self.d.read_keys(self.uid, self.cursor, seq, ACK_STEP)?;
            let to = if step.len() < ACK_STEP {
                seq
            } else {
                step.last().copied().unwrap_or(seq)
            };
            let mut txn = self.d.queue.transaction();
            let stored = txn
                .get(&self.d.cursors, &[Value::Int(self.uid)])?
                .and_then(|r| match r.get("seq") {
                    Some(Value::Int(s)) => Some(*s),
                    _ => None,
                })
                .unwrap_or(0);
            txn.upsert(
                &self.d.cursors,
                Value::Object(vec![
                    ("uid".into(), Value::Int(self.uid)),
                    ("seq".into(), Value::Int(to.max(stored))),
                ]),
            )?;
            for s in &step {
                txn.delete(&self.d.queue, &[Value::Int(self.uid), Value::Int(*s)])?;
            }
            txn.commit()?;
            self.cursor = to;
            if to >= seq {
                return Ok(());
            }
        }
    }

    /// Acknowledge everything handed out so far.
    pub fn ack_all(&mut self) -> Result<()> {
        self.ack(self.handed)
    }
}

/// Iterating waits for ever; before going back to the queue for more it
/// acknowledges the deliveries it handed out (one transaction per batch).
impl Iterator for Listener {
    type Item = Result<Delivery>;

    fn next(&mut self) -> Option<Result<Delivery>> {
        if self.ready.is_empty()
            && let Err(e) = self.ack_all()
        {
            return Some(Err(e));
        }
        self.next_within(None).transpose()
    }
}
