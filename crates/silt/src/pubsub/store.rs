//! The pub/sub storage designs of seed 001 §4.5 over datasets with a
//! valuelist index (`crate::index::valuelist`):
//!
//! - **RepQueries** (§4.5.1): only publications are stored; a subscription
//!   is a query over the past at once ([`PubSub::subscribe`]) and then a
//!   query every `TR` time units ([`PubSub::poll`]), which misses what
//!   expires between two polls.
//! - **TwoDB** (§4.5.2): dataset `<name>_subs` holds the subscriptions,
//!   `<name>_pubs` the publications, each listed by `id`.
//! - **DualDB** (§4.5.3): dataset `<name>` holds both, listed by
//!   `(id, kind)`: the flag is the last key part, so an id's subscription
//!   list (`S`) and publication list (`P`) sit side by side and a
//!   self-joining operation reads both in one pass (Alg. 4).
//!
//! Every operation reads, then writes its record (a committed, logged
//! write; with live delivery, in one transaction with the matches it
//! appends to the subscribers' queues, `super::delivery`), holding a lock
//! on its id throughout: operations on one id are serialized, so a
//! subscription and a publication that match are reported exactly once, by
//! whichever came second (erratum 8). In a
//! hierarchical space (`super::hierarchy`) related ids share the stripe of
//! their top-level node, and operations on the root exclude all others.

use super::delivery::{Deliveries, Listener};
use super::hierarchy::{Granularity, ancestors, related, subtree_prefix};
use super::model::{PUB, Publication, SUB, Stored, Subscription, live_at, matches};
use crate::dataset::{BatchOptions, Dataset, ListItem, ListRead, WriteMode};
use crate::db::Database;
use crate::db::spaces::SpaceDef;
use crate::error::{Error, Result};
use crate::index::{IndexDef, IndexKind, IndexOptions};
use crate::lsm::policy::MergePolicy;
use crate::schema::{DatasetDef, TtlDef};
use crate::value::{self, FieldType, Value};
use parking_lot::{Mutex, MutexGuard, RwLock, RwLockReadGuard, RwLockWriteGuard};
use serde::{Deserialize, Serialize};
use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// Which storage design a pub/sub space uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Design {
    /// Publications only; subscriptions poll.
    RepQueries,
    /// A subscription store and a publication store.
    TwoDb,
    /// One store, both lists side by side.
    DualDb,
}

impl Design {
    pub fn parse(s: &str) -> Result<Design> {
        match s.to_ascii_lowercase().as_str() {
            "repqueries" | "rep_queries" | "poll" => Ok(Design::RepQueries),
            "twodb" | "two_db" | "two" => Ok(Design::TwoDb),
            "dualdb" | "dual_db" | "dual" => Ok(Design::DualDb),
            other => Err(Error::Config(format!(
                "unknown pub/sub design `{other}`; available: repqueries, twodb, dualdb"
            ))),
        }
    }

    /// The name [`Design::parse`] reads.
    pub fn name(self) -> &'static str {
        match self {
            Design::RepQueries => "repqueries",
            Design::TwoDb => "twodb",
            Design::DualDb => "dualdb",
        }
    }
}

/// How a pub/sub space is created (kept in the catalog as JSON of this
/// shape, `docs/format/catalog.md`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PubSubOptions {
    pub design: Design,
    /// Storage partitions of each dataset.
    pub partitions: u32,
    /// Memory budget of each dataset, bytes.
    #[serde(default)]
    pub memory_budget: Option<u64>,
    /// Merge policy of the lists.
    pub policy: MergePolicy,
    /// How far behind the newest time an item's expiry must be before a
    /// merge drops it (operations stamped that late still see it).
    pub grace: i64,
    /// Hierarchical ids (paths in a tree) and how they are stored.
    #[serde(default)]
    pub hierarchy: Option<Granularity>,
    /// Live delivery (`super::delivery`): every match is also appended to
    /// its subscriber's queue, in the operation's transaction, for
    /// [`PubSub::listen`]. TwoDB and DualDB only.
    pub delivery: bool,
}

impl Default for PubSubOptions {
    fn default() -> Self {
        PubSubOptions {
            design: Design::DualDb,
            partitions: 1,
            memory_budget: None,
            policy: MergePolicy::default(),
            grace: 0,
            hierarchy: None,
            delivery: false,
        }
    }
}

/// What SUBSCRIBE returns.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SubscribeResult {
    /// The stored publications that match, newest first.
    pub publications: Vec<Publication>,
    /// Self-joining: the other subscriptions on the id live when this one
    /// was made.
    pub subscriptions: Vec<Subscription>,
}

/// What PUBLISH returns.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PublishResult {
    /// The stored subscriptions that match.
    pub subscribers: Vec<Subscription>,
    /// Self-joining: the other publications on the id valid at the
    /// publication's time and published since the time asked.
    pub publications: Vec<Publication>,
}

/// The name of the valuelist index of every pub/sub dataset.
pub const LIST_INDEX: &str = "lists";

const STRIPES: usize = 1024;

/// A pub/sub space.
pub struct PubSub {
    name: String,
    opts: PubSubOptions,
    /// TwoDB: the subscriptions; DualDB: everything; RepQueries: none.
    subs: Option<Arc<Dataset>>,
    /// The publications (DualDB: the same dataset as `subs`).
    pubs: Arc<Dataset>,
    /// Operations on one id (hierarchies: one top-level subtree) hold its
    /// stripe.
    stripes: Box<[Mutex<()>]>,
    /// Hierarchies: held shared by every operation, exclusively by those on
    /// the root (related to every node).
    root: RwLock<()>,
    /// Live delivery's queues and cursors.
    deliveries: Option<Arc<Deliveries>>,
    /// Set by [`PubSub::drop_space`]: every operation fails from then on.
    dropped: AtomicBool,
}

/// The locks an operation holds (released when dropped).
enum Held<'a> {
    Stripe {
        _shared: Option<RwLockReadGuard<'a, ()>>,
        _stripe: MutexGuard<'a, ()>,
    },
    Root {
        _all: RwLockWriteGuard<'a, ()>,
    },
}

/// One list kind an operation reads, under its window.
struct Want {
    kind: &'static str,
    read: ListRead,
}

impl PubSub {
    /// Open pub/sub space `name`: the one the catalog has, which must have
    /// been created with `opts`, or a new one with `opts` (its datasets
    /// made, or taken over when they exist with the layout the design
    /// needs). Every call in a process returns the same space.
    pub fn open(db: &Database, name: &str, opts: &PubSubOptions) -> Result<Arc<PubSub>> {
        let ps = live(db, name, Some(opts))?;
        if ps.options() != opts {
            return Err(Error::Config(format!(
                "pub/sub space `{name}` exists with other options ({}); open it as it is (PubSub::get; Python: db.pubsub(name) with no options) or drop it first",
                ps.describe()
            )));
        }
        Ok(ps)
    }

    /// Open the existing pub/sub space `name` with the options it was
    /// created with.
    pub fn get(db: &Database, name: &str) -> Result<Arc<PubSub>> {
        live(db, name, None)
    }

    /// Whether `db` has a pub/sub space named `name`.
    pub fn exists(db: &Database, name: &str) -> bool {
        db.space(SPACE_KIND, name).is_some()
    }

    /// The pub/sub spaces of `db`, with their options, in the order they
    /// were created.
    pub fn list(db: &Database) -> Result<Vec<(String, PubSubOptions)>> {
        db.spaces(SPACE_KIND)
            .into_iter()
            .map(|d| Ok((d.name.clone(), options_of(&d)?)))
            .collect()
    }

    /// Drop pub/sub space `name` and its datasets (everything stored in
    /// it, queued deliveries and cursors included). Handles still open on
    /// it fail from then on.
    pub fn drop_space(db: &Database, name: &str) -> Result<()> {
        if let Some(any) = db.live_space_if_made(SPACE_KIND, name)
            && let Ok(ps) = any.downcast::<PubSub>()
        {
            ps.dropped.store(true, Ordering::SeqCst);
        }
        let def = db.remove_space(SPACE_KIND, name)?;
        for d in &def.datasets {
            match db.drop_dataset(d) {
                Ok(()) | Err(Error::NoSuchDataset(_)) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Make the space (its datasets, if need be).
    fn build(db: &Database, name: &str, opts: &PubSubOptions) -> Result<PubSub> {
        if let Some(g) = opts.hierarchy {
            g.check()?;
        }
        if opts.delivery && opts.design == Design::RepQueries {
            return Err(Error::Config(
                "live delivery needs stored subscriptions: use design twodb or dualdb (RepQueries subscribers poll)".into(),
            ));
        }
        let (subs, pubs) = match opts.design {
            Design::DualDb => {
                let d = ensure(db, name, &["id", "kind"], opts)?;
                (Some(d.clone()), d)
            }
            Design::TwoDb => (
                Some(ensure(db, &format!("{name}_subs"), &["id"], opts)?),
                ensure(db, &format!("{name}_pubs"), &["id"], opts)?,
            ),
            Design::RepQueries => (None, ensure(db, &format!("{name}_pubs"), &["id"], opts)?),
        };
        let deliveries = match opts.delivery {
            false => None,
            true => Some(Arc::new(Deliveries::open(db, name, opts.partitions)?)),
        };
        Ok(PubSub {
            name: name.to_owned(),
            opts: opts.clone(),
            subs,
            pubs,
            stripes: (0..STRIPES).map(|_| Mutex::new(())).collect(),
            root: RwLock::new(()),
            deliveries,
            dropped: AtomicBool::new(false),
        })
    }

    fn check_live(&self) -> Result<()> {
        if self.dropped.load(Ordering::SeqCst) {
            return Err(Error::Config(format!(
                "pub/sub space `{}` was dropped",
                self.name
            )));
        }
        Ok(())
    }

    /// The space's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The options it was created with.
    pub fn options(&self) -> &PubSubOptions {
        &self.opts
    }

    /// Its options in words, for messages and listings.
    pub fn describe(&self) -> String {
        describe(&self.opts)
    }

    /// Subscriber `uid`'s live feed, resuming after its acknowledged
    /// cursor (see `super::delivery`).
    pub fn listen(&self, uid: i64) -> Result<Listener> {
        self.check_live()?;
        match &self.deliveries {
            Some(d) => Listener::new(d.clone(), uid),
            None => Err(Error::Config(
                "this pub/sub space was opened without live delivery (PubSubOptions::delivery)"
                    .into(),
            )),
        }
    }

    pub fn design(&self) -> Design {
        self.opts.design
    }

    /// The datasets holding the space (one for DualDB and RepQueries).
    pub fn datasets(&self) -> Vec<Arc<Dataset>> {
        let mut v = vec![self.pubs.clone()];
        if let Some(s) = &self.subs
            && !Arc::ptr_eq(s, &self.pubs)
        {
            v.insert(0, s.clone());
        }
        if let Some(d) = &self.deliveries {
            v.extend(d.datasets());
        }
        v
    }

    fn lock(&self, id: &Value) -> Result<Held<'_>> {
        self.check_live()?;
        let (key, shared) = match self.opts.hierarchy {
            Some(h) => match h.path(id)?.first() {
                None => {
                    return Ok(Held::Root {
                        _all: self.root.write(),
                    });
                }
                Some(&top) => (Value::Binary(vec![top]), Some(self.root.read())),
            },
            None => (id.clone(), None),
        };
        let mut k = Vec::new();
        value::encode_key(std::slice::from_ref(&key), &mut k)?;
        let h = xxhash_rust::xxh3::xxh3_64(&k) as usize;
        Ok(Held::Stripe {
            _shared: shared,
            _stripe: self.stripes[h % STRIPES].lock(),
        })
    }

    /// The records an operation on `id` stores: `record`, or with fixed
    /// granularity a copy at each leaf under the id.
    fn copies(&self, id: &Value, record: Value) -> Result<Vec<Value>> {
        Ok(match self.opts.hierarchy {
            Some(g @ Granularity::Fixed { .. }) => g
                .leaves(g.path(id)?)
                .into_iter()
                .map(|leaf| with_id(&record, Value::Binary(leaf)))
                .collect(),
            _ => vec![record],
        })
    }

    /// Store `record` on `id` (all copies atomically) and, with live
    /// delivery, append `deliver` ((uid, sid, publication), in delivery
    /// order) to the subscribers' queues in the same transaction.
    fn store(
        &self,
        d: &Arc<Dataset>,
        id: &Value,
        record: Value,
        deliver: &[(i64, i64, Publication)],
    ) -> Result<()> {
        let mut copies = self.copies(id, record)?;
        let dl = match &self.deliveries {
            Some(dl) if !deliver.is_empty() => dl,
            // Nothing to queue: the record's own write path.
            _ => {
                if copies.len() == 1
                    && let Some(r) = copies.pop()
                {
                    return d.upsert(r);
                }
                d.write_batch(copies, BatchOptions::atomic(WriteMode::Upsert))?;
                return Ok(());
            }
        };
        let mut txn = dl.queue().transaction();
        for r in copies {
            txn.upsert(d, r)?;
        }
        let held = dl.reserve(deliver)?;
        for r in Deliveries::records(&held, deliver) {
            txn.upsert(dl.queue(), r)?;
        }
        txn.commit()?;
        drop(held);
        Ok(())
    }

    /// SUBSCRIBE: store `s` (RepQueries: nothing) and return the stored
    /// publications that match it; with `self_join`, also the other
    /// subscriptions on its id live when it was made.
    pub fn subscribe(&self, s: &Subscription, self_join: bool) -> Result<SubscribeResult> {
        s.check()?;
        let normalized;
        let s = if s.filter.words.is_empty() {
            s
        } else {
            normalized = Subscription {
                filter: s.filter.normalized(),
                ..s.clone()
            };
            &normalized
        };
        if self_join && self.subs.is_none() {
            return Err(Error::invalid(
                None,
                "RepQueries stores no subscriptions: self-joining subscriptions need twodb or dualdb",
            ));
        }
        let _held = self.lock(&s.id)?;
        let mut wants = vec![Want {
            kind: PUB,
            read: ListRead {
                lo: s.tmin,
                hi: s.tmax - 1,
                at: None,
            },
        }];
        if self_join {
            wants.push(Want {
                kind: SUB,
                read: ListRead {
                    lo: i64::MIN,
                    hi: i64::MAX,
                    at: Some(s.ts),
                },
            });
        }
        let [pubs, others] = self.gather(&s.id, &wants)?;
        let mut out = SubscribeResult::default();
        for it in pubs {
            let p = publication(it.record)?;
            if self.related(&s.id, &p.id) && matches(s, &p) {
                out.publications.push(p);
            }
        }
        for it in others {
            let o = subscription(it.record)?;
            if o.sid != s.sid && self.related(&s.id, &o.id) && live_at(&o, s.ts) {
                out.subscriptions.push(o);
            }
        }
        // Stored after the reads (under the id's lock, so no operation on a
        // related id comes between): the answers never include the
        // operation's own record.
        if let Some(d) = &self.subs {
            let deliver: Vec<(i64, i64, Publication)> = match self.deliveries {
                Some(_) => out
                    .publications
                    .iter()
                    .rev()
                    .map(|p| (s.uid, s.sid, p.clone()))
                    .collect(),
                None => Vec::new(),
            };
            self.store(d, &s.id, s.record(), &deliver)?;
        }
        Ok(out)
    }

    /// PUBLISH: store `p` and return the stored subscriptions it matches
    /// (RepQueries: none; subscribers poll); with `since`, also the other
    /// publications on its id published in `[since, p.tp]` and valid at
    /// `p.tp` (self-joining).
    pub fn publish(&self, p: &Publication, since: Option<i64>) -> Result<PublishResult> {
        p.check()?;
        let _held = self.lock(&p.id)?;
        // Subscriptions not expired at TP (the match needs TP < Tmax).
        let mut wants = vec![Want {
            kind: SUB,
            read: ListRead {
                lo: i64::MIN,
                hi: i64::MAX,
                at: Some(p.tp),
            },
        }];
        if let Some(lo) = since {
            wants.push(Want {
                kind: PUB,
                read: ListRead {
                    lo,
                    hi: p.tp,
                    at: Some(p.tp),
                },
            });
        }
        let [subs, pubs] = self.gather(&p.id, &wants)?;
        let mut out = PublishResult::default();
        for it in subs {
            let s = subscription(it.record)?;
            if self.related(&s.id, &p.id) && matches(&s, p) {
                out.subscribers.push(s);
            }
        }
        for it in pubs {
            let o = publication(it.record)?;
            if o.pid != p.pid && self.related(&o.id, &p.id) {
                out.publications.push(o);
            }
        }
        let deliver: Vec<(i64, i64, Publication)> = match self.deliveries {
            Some(_) => out
                .subscribers
                .iter()
                .map(|s| (s.uid, s.sid, p.clone()))
                .collect(),
            None => Vec::new(),
        };
        self.store(&self.pubs, &p.id, p.record(), &deliver)?;
        Ok(out)
    }

    /// RepQueries' repeated query: the publications on `s.id` published in
    /// `(after, now]` within the subscription's window and valid at `now`.
    pub fn poll(&self, s: &Subscription, after: i64, now: i64) -> Result<Vec<Publication>> {
        s.check()?;
        self.check_live()?;
        let read = ListRead {
            lo: after.saturating_add(1).max(s.tmin),
            hi: now.min(s.tmax - 1),
            at: Some(now),
        };
        if read.lo > read.hi {
            return Ok(Vec::new());
        }
        let [pubs, _] = self.gather(&s.id, &[Want { kind: PUB, read }])?;
        let filter = s.filter.normalized();
        let mut out = Vec::new();
        for it in pubs {
            let p = publication(it.record)?;
            if self.related(&s.id, &p.id) && filter.admits(&p) {
                out.push(p);
            }
        }
        Ok(out)
    }

    /// Whether two ids can match: equal, or related in a hierarchy.
    fn related(&self, a: &Value, b: &Value) -> bool {
        match (self.opts.hierarchy, a, b) {
            (Some(_), Value::Binary(x), Value::Binary(y)) => related(x, y),
            _ => a == b,
        }
    }

    /// The store of list kind `kind` (none: RepQueries' subscriptions).
    fn store_of(&self, kind: &str) -> Option<&Arc<Dataset>> {
        if kind == PUB {
            Some(&self.pubs)
        } else {
            self.subs.as_ref()
        }
    }

    /// The list key of `id` and `kind` in this design.
    fn key(&self, id: &Value, kind: &str) -> Vec<Value> {
        match self.opts.design {
            Design::DualDb => vec![id.clone(), Value::String(kind.into())],
            _ => vec![id.clone()],
        }
    }

    /// The items of each wanted list kind that the operation on `id` must
    /// see, one vector per want (duplicates of fixed-granularity copies
    /// removed): the id's own lists; with fixed granularity the lists of the
    /// leaves under it; with variable granularity its subtree (one range)
    /// and its ancestors. DualDB reads the kinds of one id together (Alg. 4).
    fn gather(&self, id: &Value, wants: &[Want]) -> Result<[Vec<ListItem<Stored>>; 2]> {
        let mut out: [Vec<ListItem<Stored>>; 2] = [Vec::new(), Vec::new()];
        let (points, subtree): (Vec<Value>, Option<Vec<u8>>) = match self.opts.hierarchy {
            None => (vec![id.clone()], None),
            Some(g @ Granularity::Fixed { .. }) => (
                g.leaves(g.path(id)?)
                    .into_iter()
                    .map(Value::Binary)
                    .collect(),
                None,
            ),
            Some(g @ Granularity::Variable { .. }) => {
                let path = g.path(id)?;
                (
                    ancestors(path).map(|a| Value::Binary(a.to_vec())).collect(),
                    Some(subtree_prefix(path)?),
                )
            }
        };
        for node in &points {
            self.read_point(node, wants, &mut out)?;
        }
        if let Some(raw) = subtree {
            self.read_subtree(&raw, wants, &mut out)?;
        }
        if matches!(self.opts.hierarchy, Some(Granularity::Fixed { .. })) {
            for v in &mut out {
                let mut seen = HashSet::new();
                v.retain(|it| seen.insert(it.record.identity()));
            }
        }
        Ok(out)
    }

    fn read_point(
        &self,
        node: &Value,
        wants: &[Want],
        out: &mut [Vec<ListItem<Stored>>; 2],
    ) -> Result<()> {
        if self.opts.design == Design::DualDb && wants.len() == 2 {
            let both: Vec<(Vec<Value>, ListRead)> = wants
                .iter()
                .map(|w| (self.key(node, w.kind), w.read.clone()))
                .collect();
            let lists = self.pubs.list_read_many_with(
                LIST_INDEX,
                std::slice::from_ref(node),
                &both,
                &Stored::decode,
            )?;
            for (slot, l) in out.iter_mut().zip(lists) {
                slot.extend(l);
            }
            return Ok(());
        }
        for (slot, w) in out.iter_mut().zip(wants) {
            if let Some(d) = self.store_of(w.kind) {
                slot.extend(d.list_read_with(
                    LIST_INDEX,
                    &self.key(node, w.kind),
                    &w.read,
                    &Stored::decode,
                )?);
            }
        }
        Ok(())
    }

    /// Variable granularity: every list under the subtree prefix `raw`;
    /// DualDB reads the wanted kinds in the one range, each list under its
    /// kind's window (the kind is the list key's last field), and skips the
    /// lists of a kind not wanted.
    fn read_subtree(
        &self,
        raw: &[u8],
        wants: &[Want],
        out: &mut [Vec<ListItem<Stored>>; 2],
    ) -> Result<()> {
        if self.opts.design == Design::DualDb {
            let by_kind: Vec<(Value, ListRead)> = wants
                .iter()
                .map(|w| (Value::String(w.kind.into()), w.read.clone()))
                .collect();
            let lists = self.pubs.list_read_under_by_last_with(
                LIST_INDEX,
                raw,
                &by_kind,
                &Stored::decode,
            )?;
            for (slot, l) in out.iter_mut().zip(lists) {
                slot.extend(l);
            }
            return Ok(());
        }
        for (slot, w) in out.iter_mut().zip(wants) {
            if let Some(d) = self.store_of(w.kind) {
                slot.extend(d.list_read_under_with(LIST_INDEX, raw, &w.read, &Stored::decode)?);
            }
        }
        Ok(())
    }
}

/// `record` with its `id` replaced.
fn with_id(record: &Value, id: Value) -> Value {
    match record {
        Value::Object(f) => Value::Object(
            f.iter()
                .map(|(k, v)| (k.clone(), if k == "id" { id.clone() } else { v.clone() }))
                .collect(),
        ),
        other => other.clone(),
    }
}

/// The subscription a subscription list's item holds.
fn subscription(r: Stored) -> Result<Subscription> {
    match r {
        Stored::Sub(s) => Ok(s),
        Stored::Pub(p) => Err(misfiled("publication", p.pid, "subscription")),
    }
}

/// The publication a publication list's item holds.
fn publication(r: Stored) -> Result<Publication> {
    match r {
        Stored::Pub(p) => Ok(p),
        Stored::Sub(s) => Err(misfiled("subscription", s.sid, "publication")),
    }
}

fn misfiled(what: &str, iid: i64, list: &str) -> Error {
    Error::corrupt(
        "<pub/sub record>",
        format!("{what} {iid} is stored in a {list} list"),
    )
}

/// Open dataset `name` with a valuelist index on `key`, creating it if
/// needed.
/// The kind of space the catalog records for pub/sub (see
/// `crate::db::spaces`).
pub const SPACE_KIND: &str = "pubsub";

/// The live space `name`: already open, or opened from the catalog, or
/// (with `create`) made with those options and recorded.
fn live(db: &Database, name: &str, create: Option<&PubSubOptions>) -> Result<Arc<PubSub>> {
    let any = db.live_space(SPACE_KIND, name, || {
        let ps = match (db.space(SPACE_KIND, name), create) {
            (Some(def), _) => PubSub::build(db, name, &options_of(&def)?)?,
            (None, None) => {
                return Err(Error::Config(format!(
                    "no pub/sub space named `{name}`: create it with options first (PubSub::open; SQL: CREATE PUBSUB {name})"
                )));
            }
            (None, Some(opts)) => {
                let ps = PubSub::build(db, name, opts)?;
                let options = serde_json::to_value(opts)
                    .map_err(|e| Error::Config(format!("pub/sub options of `{name}`: {e}")))?;
                db.create_space(SpaceDef {
                    kind: SPACE_KIND.to_owned(),
                    name: name.to_owned(),
                    datasets: ps.datasets().iter().map(|d| d.name().to_owned()).collect(),
                    options,
                })?;
                ps
            }
        };
        Ok(Arc::new(ps))
    })?;
    any.downcast::<PubSub>()
        .map_err(|_| Error::Config(format!("space `{name}` is not a pub/sub space")))
}

/// The options the catalog holds for a space.
fn options_of(def: &SpaceDef) -> Result<PubSubOptions> {
    serde_json::from_value(def.options.clone()).map_err(|e| {
        Error::Config(format!(
            "pub/sub space `{}`: unreadable options in the catalog ({e})",
            def.name
        ))
    })
}

/// Options in words.
pub fn describe(o: &PubSubOptions) -> String {
    let mut s = format!(
        "design {}, {} partition{}, delivery {}",
        o.design.name(),
        o.partitions,
        if o.partitions == 1 { "" } else { "s" },
        if o.delivery { "on" } else { "off" }
    );
    if o.grace != 0 {
        s.push_str(&format!(", grace {}", o.grace));
    }
    if let Some(b) = o.memory_budget {
        s.push_str(&format!(", memory {b} bytes"));
    }
    match o.hierarchy {
        Some(Granularity::Fixed { depth, fanout }) => {
            s.push_str(&format!(", fixed hierarchy depth {depth} fanout {fanout}"))
        }
        Some(Granularity::Variable { depth, fanout }) => s.push_str(&format!(
            ", variable hierarchy depth {depth} fanout {fanout}"
        )),
        None => {}
    }
    s.push_str(&format!(", merge policy {}", o.policy));
    s
}

fn ensure(db: &Database, name: &str, key: &[&str], opts: &PubSubOptions) -> Result<Arc<Dataset>> {
    let want = IndexDef {
        name: LIST_INDEX.into(),
        id: 0,
        kind: IndexKind::Valuelist,
        fields: key.iter().map(|s| (*s).to_owned()).collect(),
        policy: opts.policy.clone(),
        options: IndexOptions {
            time: Some("t".into()),
            expiry: Some("tmax".into()),
            grace: Some(opts.grace),
            ..IndexOptions::default()
        },
    };
    if let Ok(d) = db.dataset(name) {
        let ok = d.index_defs().iter().any(|i| {
            i.name == LIST_INDEX && i.kind == IndexKind::Valuelist && i.fields == want.fields
        });
        if !ok {
            return Err(Error::Config(format!(
                "dataset `{name}` exists but is not a pub/sub store of this design (it needs a valuelist index `{LIST_INDEX}` on ({}))",
                key.join(", ")
            )));
        }
        return Ok(d);
    }
    // A subscription or publication is (kind, iid) on an id: fixed
    // granularity stores one copy per leaf.
    let mut def = DatasetDef::new(name, &["kind", "iid", "id"])
        .field("kind", FieldType::String)
        .field("iid", FieldType::Int)
        .field("t", FieldType::Int)
        .field("tmax", FieldType::Int);
    def.partitions = opts.partitions.max(1);
    // The records go when their lists drop them: a sweep deletes each
    // once the written clock is `grace` past its `tmax` (the lists'
    // merges drop the same items by the same clock).
    def.ttl = Some(TtlDef {
        time: Some("t".into()),
        grace: opts.grace,
        ..TtlDef::at("tmax")
    });
    if let Some(b) = opts.memory_budget {
        def.memory_budget = b;
    }
    db.create_dataset(def)?;
    db.create_index(name, want)?;
    db.dataset(name)
}
