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
//! - **Waking.** A listener reads the queue only when it may find
//!   something: the space tracks, for each subscriber with a listener open,
//!   the largest number an operation released to it. A listener with
//!   nothing buffered and nothing new released to its subscriber waits on
//!   its subscriber's own condition variable, which only operations
//!   delivering to that subscriber signal (and the release of a smaller
//!   held number, when what was released lies above the watermark). So
//!   an operation wakes the listeners it delivers to, not every listener
//!   of the space, and a polling listener (`try_next`) costs a lock and a
//!   map lookup, not a scan, when nothing came. (Found by the bench: with
//!   one notifier for all, a consumer polling 100 listeners rescanned the
//!   queue after every commit and took a core from the writer.)

use super::model::Publication;
use crate::dataset::Dataset;
use crate::db::Database;
use crate::error::{Error, Result};
use crate::schema::{DatasetDef, SequenceDef};
use crate::value::{self, FieldType, Value};
use parking_lot::{Condvar, Mutex};
use std::collections::{BTreeSet, HashMap, VecDeque};
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

/// Sequence numbers taken and not yet committed or abandoned, and the
/// subscribers that have a listener open.
#[derive(Default)]
struct Flight {
    held: BTreeSet<i64>,
    /// The largest number taken so far (at open: below the counter's next).
    taken: i64,
    /// By subscriber with at least one listener open.
    listening: HashMap<i64, Interest>,
    /// Subscribers whose listeners wait for the watermark to pass what was
    /// released to them (signalled at the next release of any number).
    awaiting: Vec<i64>,
}

impl Flight {
    /// Every sequence number up to the returned one is committed or gone
    /// for good. (Not `i64::MAX` when nothing is held: a number taken
    /// after this call but committed before the read would be seen while a
    /// smaller one taken meanwhile is not.)
    fn watermark(&self) -> i64 {
        self.held.first().map_or(self.taken, |s| s - 1)
    }
}

/// What the listeners of one subscriber wait on.
struct Interest {
    /// The largest number released to the subscriber since its first
    /// listener opened (at that moment: every number taken so far, any of
    /// which might be the subscriber's).
    latest: i64,
    /// Open listeners of the subscriber.
    listeners: usize,
    wake: Arc<Condvar>,
}

/// The queues and cursors of one pub/sub space.
pub(super) struct Deliveries {
    queue: Arc<Dataset>,
    cursors: Arc<Dataset>,
    flight: Mutex<Flight>,
}

/// Sequence numbers held by one operation until it commits or fails
/// (released when dropped), with the subscriber each is for.
pub(super) struct Reservation<'a> {
    d: &'a Deliveries,
    seqs: Vec<(i64, i64)>,
}

impl Drop for Reservation<'_> {
    /// Releases the numbers and wakes the listeners they concern. (After a
    /// failed commit too: a listener woken for nothing reads nothing.)
    fn drop(&mut self) {
        if self.seqs.is_empty() {
            return;
        }
        let mut guard = self.d.flight.lock();
        let f = &mut *guard;
        for (s, _) in &self.seqs {
            f.held.remove(s);
        }
        for &(s, uid) in &self.seqs {
            if let Some(i) = f.listening.get_mut(&uid) {
                if s > i.latest {
                    i.latest = s;
                }
                i.wake.notify_all();
            }
        }
        for uid in f.awaiting.drain(..) {
            if let Some(i) = f.listening.get(&uid) {
                i.wake.notify_all();
            }
        }
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
        })
    }

    pub(super) fn queue(&self) -> &Arc<Dataset> {
        &self.queue
    }

    /// The queue and the cursors.
    pub(super) fn datasets(&self) -> [Arc<Dataset>; 2] {
        [self.queue.clone(), self.cursors.clone()]
    }

    /// Take a sequence number for each of `matches` ((uid, sid,
    /// publication) in the order to deliver), held until the reservation is
    /// dropped (after the operation's commit, or its failure).
    pub(super) fn reserve(&self, matches: &[(i64, i64, Publication)]) -> Result<Reservation<'_>> {
        if matches.is_empty() {
            return Ok(Reservation {
                d: self,
                seqs: Vec::new(),
            });
        }
        let mut f = self.flight.lock();
        let v = self.queue.next_sequence("seq", matches.len() as u64)?;
        let seqs: Vec<(i64, i64)> = v.values().zip(matches.iter().map(|m| m.0)).collect();
        f.held.extend(seqs.iter().map(|s| s.0));
        f.taken = f.taken.max(v.last());
        Ok(Reservation { d: self, seqs })
    }

    /// The delivery records of `matches` (as given to [`Deliveries::reserve`])
    /// under the numbers of `r`.
    pub(super) fn records(r: &Reservation<'_>, matches: &[(i64, i64, Publication)]) -> Vec<Value> {
        r.seqs
            .iter()
            .zip(matches)
            .map(|(&(seq, _), (uid, sid, p))| {
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

    /// Note a listener of `uid` opening.
    fn register(&self, uid: i64) {
        let mut f = self.flight.lock();
        let taken = f.taken;
        f.listening
            .entry(uid)
            .or_insert_with(|| Interest {
                latest: taken,
                listeners: 0,
                wake: Arc::new(Condvar::new()),
            })
            .listeners += 1;
    }

    /// Note a listener of `uid` closing.
    fn unregister(&self, uid: i64) {
        let mut f = self.flight.lock();
        if let Some(i) = f.listening.get_mut(&uid) {
            i.listeners -= 1;
            if i.listeners == 0 {
                f.listening.remove(&uid);
            }
        }
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
    /// Every delivery of the subscriber numbered up to here has been read
    /// from the queue (into `ready`, or handed out).
    known: i64,
    /// The last read filled a batch: more may be queued past `known`.
    more: bool,
    ready: VecDeque<Delivery>,
}

impl Drop for Listener {
    fn drop(&mut self) {
        self.d.unregister(self.uid);
    }
}

impl Listener {
    pub(super) fn new(d: Arc<Deliveries>, uid: i64) -> Result<Listener> {
        let cursor = d.cursor(uid)?;
        d.register(uid);
        Ok(Listener {
            d,
            uid,
            cursor,
            handed: cursor,
            known: cursor,
            // The backlog queued before it opened.
            more: true,
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
            let upto = self.readable(deadline)?;
            let Some(upto) = upto else {
                return Ok(None);
            };
            let got = self.d.read(self.uid, self.known, upto)?;
            self.more = got.len() >= BATCH;
            self.known = match got.last() {
                Some(d) if self.more => d.seq,
                _ => upto,
            };
            self.ready.extend(got);
        }
    }

    /// Wait until the queue may hold deliveries past `known` that can be
    /// read, and return the bound to read up to (`None`: `deadline` passed
    /// first). Reading may still find nothing (a failed operation's
    /// numbers), but a listener never reads while nothing was released to
    /// its subscriber.
    fn readable(&self, deadline: Option<Instant>) -> Result<Option<i64>> {
        let mut guard = self.d.flight.lock();
        loop {
            let f = &mut *guard;
            let w = f.watermark();
            let Some(i) = f.listening.get(&self.uid) else {
                return Err(Error::Txn(format!(
                    "listener of subscriber {} is not registered",
                    self.uid
                )));
            };
            let released = i.latest > self.known;
            if w > self.known && (self.more || released) {
                return Ok(Some(w));
            }
            let wake = i.wake.clone();
            if released && !f.awaiting.contains(&self.uid) {
                // Released to it but above the watermark: wait for the
                // smaller numbers still held.
                f.awaiting.push(self.uid);
            }
            match deadline {
                None => wake.wait(&mut guard),
                Some(at) => {
                    if wake.wait_until(&mut guard, at).timed_out() {
                        return Ok(None);
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
