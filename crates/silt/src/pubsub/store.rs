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
//! Every operation writes its record (a committed, logged write), then
//! reads, holding a lock on its id throughout: operations on one id are
//! serialized, so a subscription and a publication that match are
//! reported exactly once, by whichever came second (erratum 8).

use super::model::{PUB, Publication, SUB, Subscription, live_at, matches};
use crate::dataset::{Dataset, ListItem, ListRead};
use crate::db::Database;
use crate::error::{Error, Result};
use crate::index::{IndexDef, IndexKind, IndexOptions};
use crate::lsm::policy::MergePolicy;
use crate::schema::DatasetDef;
use crate::value::{self, FieldType, Value};
use parking_lot::{Mutex, MutexGuard};
use std::sync::Arc;

/// Which storage design a pub/sub space uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
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
}

/// How a pub/sub space is created.
#[derive(Clone, Debug)]
pub struct PubSubOptions {
    pub design: Design,
    /// Storage partitions of each dataset.
    pub partitions: u32,
    /// Memory budget of each dataset, bytes.
    pub memory_budget: Option<u64>,
    /// Merge policy of the lists.
    pub policy: MergePolicy,
    /// How far behind the newest time an item's expiry must be before a
    /// merge drops it (operations stamped that late still see it).
    pub grace: i64,
}

impl Default for PubSubOptions {
    fn default() -> Self {
        PubSubOptions {
            design: Design::DualDb,
            partitions: 1,
            memory_budget: None,
            policy: MergePolicy::default(),
            grace: 0,
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
    design: Design,
    /// TwoDB: the subscriptions; DualDB: everything; RepQueries: none.
    subs: Option<Arc<Dataset>>,
    /// The publications (DualDB: the same dataset as `subs`).
    pubs: Arc<Dataset>,
    /// Operations on one id hold its stripe.
    stripes: Box<[Mutex<()>]>,
}

impl PubSub {
    /// Open pub/sub space `name`, creating its datasets if they do not
    /// exist (an existing dataset must have the layout the design needs).
    pub fn open(db: &Database, name: &str, opts: &PubSubOptions) -> Result<PubSub> {
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
        Ok(PubSub {
            design: opts.design,
            subs,
            pubs,
            stripes: (0..STRIPES).map(|_| Mutex::new(())).collect(),
        })
    }

    pub fn design(&self) -> Design {
        self.design
    }

    /// The datasets holding the space (one for DualDB and RepQueries).
    pub fn datasets(&self) -> Vec<Arc<Dataset>> {
        let mut v = vec![self.pubs.clone()];
        if let Some(s) = &self.subs
            && !Arc::ptr_eq(s, &self.pubs)
        {
            v.insert(0, s.clone());
        }
        v
    }

    fn lock(&self, id: &Value) -> Result<MutexGuard<'_, ()>> {
        let mut k = Vec::new();
        value::encode_key(std::slice::from_ref(id), &mut k)?;
        let h = xxhash_rust::xxh3::xxh3_64(&k) as usize;
        Ok(self.stripes[h % STRIPES].lock())
    }

    /// SUBSCRIBE: store `s` (RepQueries: nothing) and return the stored
    /// publications that match it; with `self_join`, also the other
    /// subscriptions on its id live when it was made.
    pub fn subscribe(&self, s: &Subscription, self_join: bool) -> Result<SubscribeResult> {
        s.check()?;
        if self_join && self.subs.is_none() {
            return Err(Error::invalid(
                None,
                "RepQueries stores no subscriptions: self-joining subscriptions need twodb or dualdb",
            ));
        }
        let _g = self.lock(&s.id)?;
        if let Some(d) = &self.subs {
            d.upsert(s.record())?;
        }
        // Publications in the window; subscriptions not expired at TS.
        let p_read = ListRead {
            lo: s.tmin,
            hi: s.tmax - 1,
            at: None,
        };
        let s_read = ListRead {
            lo: i64::MIN,
            hi: i64::MAX,
            at: Some(s.ts),
        };
        let (pubs, others) = self.read_both(&s.id, &p_read, self_join.then_some(&s_read))?;
        let mut out = SubscribeResult::default();
        for it in pubs {
            let p = Publication::from_record(&it.record)?;
            if matches(s, &p) {
                out.publications.push(p);
            }
        }
        for it in others {
            let o = Subscription::from_record(&it.record)?;
            if o.sid != s.sid && live_at(&o, s.ts) {
                out.subscriptions.push(o);
            }
        }
        Ok(out)
    }

    /// PUBLISH: store `p` and return the stored subscriptions it matches
    /// (RepQueries: none; subscribers poll); with `since`, also the other
    /// publications on its id published in `[since, p.tp]` and valid at
    /// `p.tp` (self-joining).
    pub fn publish(&self, p: &Publication, since: Option<i64>) -> Result<PublishResult> {
        p.check()?;
        let _g = self.lock(&p.id)?;
        self.pubs.upsert(p.record())?;
        // Subscriptions not expired at TP (the match needs TP < Tmax).
        let s_read = ListRead {
            lo: i64::MIN,
            hi: i64::MAX,
            at: Some(p.tp),
        };
        let p_read = since.map(|lo| ListRead {
            lo,
            hi: p.tp,
            at: Some(p.tp),
        });
        let mut out = PublishResult::default();
        let (subs, pubs) = match (&self.subs, &p_read) {
            (None, Some(r)) => (Vec::new(), self.read(&self.pubs, &p.id, PUB, r)?),
            (None, None) => (Vec::new(), Vec::new()),
            (Some(_), _) => self.read_both_for_publish(&p.id, &s_read, p_read.as_ref())?,
        };
        for it in subs {
            let s = Subscription::from_record(&it.record)?;
            if matches(&s, p) {
                out.subscribers.push(s);
            }
        }
        for it in pubs {
            let o = Publication::from_record(&it.record)?;
            if o.pid != p.pid {
                out.publications.push(o);
            }
        }
        Ok(out)
    }

    /// RepQueries' repeated query: the publications on `s.id` published in
    /// `(after, now]` within the subscription's window and valid at `now`.
    pub fn poll(&self, s: &Subscription, after: i64, now: i64) -> Result<Vec<Publication>> {
        s.check()?;
        let r = ListRead {
            lo: after.saturating_add(1).max(s.tmin),
            hi: now.min(s.tmax - 1),
            at: Some(now),
        };
        if r.lo > r.hi {
            return Ok(Vec::new());
        }
        let mut out = Vec::new();
        for it in self.read(&self.pubs, &s.id, PUB, &r)? {
            out.push(Publication::from_record(&it.record)?);
        }
        Ok(out)
    }

    /// One list of `id` (`kind` is its flag in DualDB).
    fn read(&self, d: &Dataset, id: &Value, kind: &str, r: &ListRead) -> Result<Vec<ListItem>> {
        match self.design {
            Design::DualDb => d.list_read(LIST_INDEX, &[id.clone(), Value::String(kind.into())], r),
            _ => d.list_read(LIST_INDEX, std::slice::from_ref(id), r),
        }
    }

    /// The publication list under `p_read`, and with `s_read` the
    /// subscription list too: DualDB reads both in one pass over the id's
    /// keys (Alg. 4), TwoDB one list in each store (Alg. 3).
    fn read_both(
        &self,
        id: &Value,
        p_read: &ListRead,
        s_read: Option<&ListRead>,
    ) -> Result<(Vec<ListItem>, Vec<ListItem>)> {
        match (s_read, &self.subs) {
            (None, _) | (_, None) => Ok((self.read(&self.pubs, id, PUB, p_read)?, Vec::new())),
            (Some(sr), Some(subs)) => match self.design {
                Design::DualDb => self.read_dual(id, p_read, sr),
                _ => Ok((
                    self.read(&self.pubs, id, PUB, p_read)?,
                    self.read(subs, id, SUB, sr)?,
                )),
            },
        }
    }

    fn read_both_for_publish(
        &self,
        id: &Value,
        s_read: &ListRead,
        p_read: Option<&ListRead>,
    ) -> Result<(Vec<ListItem>, Vec<ListItem>)> {
        let Some(subs) = &self.subs else {
            return Ok((Vec::new(), Vec::new()));
        };
        match (p_read, self.design) {
            (None, _) => Ok((self.read(subs, id, SUB, s_read)?, Vec::new())),
            (Some(pr), Design::DualDb) => {
                let (p, s) = self.read_dual(id, pr, s_read)?;
                Ok((s, p))
            }
            (Some(pr), _) => Ok((
                self.read(subs, id, SUB, s_read)?,
                self.read(&self.pubs, id, PUB, pr)?,
            )),
        }
    }

    /// DualDB: both lists of `id` in one pass over its keys, each under
    /// its own window.
    fn read_dual(
        &self,
        id: &Value,
        p_read: &ListRead,
        s_read: &ListRead,
    ) -> Result<(Vec<ListItem>, Vec<ListItem>)> {
        let key = |k: &str| vec![id.clone(), Value::String(k.into())];
        let mut both = self.pubs.list_read_many(
            LIST_INDEX,
            std::slice::from_ref(id),
            &[(key(PUB), p_read.clone()), (key(SUB), s_read.clone())],
        )?;
        let subs = both.pop().unwrap_or_default();
        let pubs = both.pop().unwrap_or_default();
        Ok((pubs, subs))
    }
}

/// Open dataset `name` with a valuelist index on `key`, creating it if
/// needed.
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
    let mut def = DatasetDef::new(name, &["kind", "iid"])
        .field("kind", FieldType::String)
        .field("iid", FieldType::Int)
        .field("t", FieldType::Int)
        .field("tmax", FieldType::Int);
    def.partitions = opts.partitions.max(1);
    if let Some(b) = opts.memory_budget {
        def.memory_budget = b;
    }
    db.create_dataset(def)?;
    db.create_index(name, want)?;
    db.dataset(name)
}
