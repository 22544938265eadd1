//! `siltdb.PubSub` and `siltdb.Listener`: publish/subscribe spaces on LSM
//! storage (`silt::pubsub`) from `Database.pubsub(...)`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};
use silt::Value;
use silt::lsm::policy::MergePolicy;
use silt::pubsub::{
    Delivery, Design, Filter, Granularity, Listener as CoreListener, PubSubOptions, Publication,
    Subscription,
};

use crate::convert::{to_py, to_value};
use crate::errors::{BindError, BindResult, IntoPyResult, detached};
use crate::handle::Handle;

/// How long one wait of a listener lasts before it looks for Ctrl-C.
const WAIT_SLICE: Duration = Duration::from_millis(100);

/// Options of `Database.pubsub` as given (`None`: not given).
pub struct SpaceSpec {
    pub design: Option<String>,
    pub delivery: Option<bool>,
    pub partitions: Option<u32>,
    pub merge_policy: Option<String>,
    pub grace: Option<i64>,
    pub hierarchy: Option<String>,
    pub depth: Option<u8>,
    pub fanout: Option<u8>,
}

impl SpaceSpec {
    /// The options of a new space: the ones given, defaults for the rest.
    fn options(&self) -> BindResult<PubSubOptions> {
        let d = PubSubOptions::default();
        if self.hierarchy.is_none() && (self.depth.is_some() || self.fanout.is_some()) {
            return Err(BindError::Config(
                "depth and fanout shape a hierarchy: give hierarchy=\"fixed\" or \"variable\" too"
                    .into(),
            ));
        }
        let (depth, fanout) = (self.depth.unwrap_or(5), self.fanout.unwrap_or(4));
        let hierarchy = match &self.hierarchy {
            None => None,
            Some(kind) => Some(match kind.to_ascii_lowercase().as_str() {
                "fixed" => Granularity::Fixed { depth, fanout },
                "variable" => Granularity::Variable { depth, fanout },
                other => {
                    return Err(BindError::Config(format!(
                        "hierarchy must be \"fixed\" or \"variable\", got {other:?}"
                    )));
                }
            }),
        };
        Ok(PubSubOptions {
            design: match &self.design {
                Some(s) => Design::parse(s)?,
                None => d.design,
            },
            partitions: self.partitions.unwrap_or(d.partitions),
            policy: match &self.merge_policy {
                Some(p) => MergePolicy::parse(p)?,
                None => d.policy,
            },
            grace: self.grace.unwrap_or(d.grace),
            hierarchy,
            // RepQueries subscribers poll: no queues unless asked.
            delivery: self.delivery.unwrap_or(!matches!(
                self.design.as_deref().map(Design::parse),
                Some(Ok(Design::RepQueries))
            )),
            memory_budget: d.memory_budget,
        })
    }

    /// Refuse options given that differ from an existing space's.
    fn agrees(&self, name: &str, have: &PubSubOptions) -> BindResult<()> {
        let want = self.options()?;
        let given = [
            ("design", self.design.is_some(), want.design == have.design),
            (
                "delivery",
                self.delivery.is_some(),
                want.delivery == have.delivery,
            ),
            (
                "partitions",
                self.partitions.is_some(),
                want.partitions == have.partitions,
            ),
            (
                "merge_policy",
                self.merge_policy.is_some(),
                want.policy == have.policy,
            ),
            ("grace", self.grace.is_some(), want.grace == have.grace),
            (
                "hierarchy",
                self.hierarchy.is_some() || self.depth.is_some() || self.fanout.is_some(),
                want.hierarchy == have.hierarchy,
            ),
        ];
        let differ: Vec<&str> = given
            .iter()
            .filter(|(_, g, same)| *g && !*same)
            .map(|(n, _, _)| *n)
            .collect();
        if differ.is_empty() {
            return Ok(());
        }
        Err(BindError::Config(format!(
            "pub/sub space {name:?} exists with other {} ({}); open it with db.pubsub({name:?}) alone, or drop it first (db.drop_pubsub)",
            differ.join(", "),
            silt::pubsub::store::describe(have)
        )))
    }
}

/// `Database.pubsubs()`: `{name: {option: value}}`.
pub fn spaces_to_py<'py>(
    py: Python<'py>,
    list: &[(String, PubSubOptions)],
) -> PyResult<Bound<'py, PyDict>> {
    let out = PyDict::new(py);
    for (name, o) in list {
        let d = PyDict::new(py);
        d.set_item("design", o.design.name())?;
        d.set_item("delivery", o.delivery)?;
        d.set_item("partitions", o.partitions)?;
        d.set_item("merge_policy", o.policy.to_string())?;
        d.set_item("grace", o.grace)?;
        match o.hierarchy {
            Some(Granularity::Fixed { depth, fanout }) => {
                d.set_item("hierarchy", "fixed")?;
                d.set_item("depth", depth)?;
                d.set_item("fanout", fanout)?;
            }
            Some(Granularity::Variable { depth, fanout }) => {
                d.set_item("hierarchy", "variable")?;
                d.set_item("depth", depth)?;
                d.set_item("fanout", fanout)?;
            }
            None => d.set_item("hierarchy", py.None())?,
        }
        out.set_item(name, d)?;
    }
    Ok(out)
}

/// A publish/subscribe space (from `Database.pubsub`): subscriptions get
/// the stored publications that match them at once (`subscribe`) and the
/// later ones as they are published (`publish` returns the subscribers;
/// with `delivery=True` each match is also queued for its subscriber's
/// `listen()` feed). Times are integers in whatever unit the application
/// counts; a window `[tmin, tmax)` includes its start and excludes its end.
#[pyclass(frozen, module = "siltdb")]
pub struct PubSub {
    handle: Arc<Handle>,
    space: Arc<silt::pubsub::PubSub>,
}

impl PubSub {
    /// The space `name`: the existing one (options given must agree), or
    /// a new one.
    pub fn open(handle: Arc<Handle>, name: &str, spec: &SpaceSpec) -> BindResult<PubSub> {
        let space = handle.with(|db| {
            use silt::pubsub::PubSub as Core;
            if Core::exists(db, name) {
                let ps = Core::get(db, name)?;
                spec.agrees(name, ps.options())?;
                return Ok(ps);
            }
            Ok(Core::open(db, name, &spec.options()?)?)
        })?;
        Ok(PubSub { handle, space })
    }
}

fn publication_to_py<'py>(py: Python<'py>, p: &Publication) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("id", to_py(py, &p.id)?)?;
    d.set_item("pid", p.pid)?;
    d.set_item("tp", p.tp)?;
    d.set_item("tmax", p.tmax)?;
    d.set_item("desc", &p.desc)?;
    d.set_item("loc", p.loc)?;
    Ok(d)
}

fn subscription_to_py<'py>(py: Python<'py>, s: &Subscription) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("id", to_py(py, &s.id)?)?;
    d.set_item("sid", s.sid)?;
    d.set_item("uid", s.uid)?;
    d.set_item("ts", s.ts)?;
    d.set_item("tmin", s.tmin)?;
    d.set_item("tmax", s.tmax)?;
    if !s.filter.words.is_empty() {
        d.set_item("words", &s.filter.words)?;
    }
    if let Some([a, b, c, e]) = s.filter.region {
        d.set_item("region", (a, b, c, e))?;
    }
    Ok(d)
}

fn delivery_to_py<'py>(py: Python<'py>, d: &Delivery) -> PyResult<Bound<'py, PyDict>> {
    let out = publication_to_py(py, &d.publication)?;
    out.set_item("seq", d.seq)?;
    out.set_item("uid", d.uid)?;
    out.set_item("sid", d.sid)?;
    Ok(out)
}

/// An id: an int, str or bytes; a list of small ints is a hierarchical
/// path (the child numbers from the root), stored as bytes.
fn to_id(obj: &Bound<'_, PyAny>) -> PyResult<Value> {
    if let Ok(path) = obj.extract::<Vec<u8>>()
        && obj.cast::<pyo3::types::PyBytes>().is_err()
    {
        return Ok(Value::Binary(path));
    }
    to_value(obj)
}

#[pymethods]
impl PubSub {
    /// SUBSCRIBE: store the subscription and return
    /// `{"publications": [...], "subscriptions": [...]}`: the stored
    /// publications on `id` published in `[tmin, tmax)` and still valid at
    /// `ts`, newest first; with `self_join`, also the other subscriptions
    /// on the id live at `ts`. Content filters: `words` (a str or a list
    /// of words, every one among the description's words) and `region`
    /// (`(x0, y0, x1, y1)`: the publication's `loc` must be inside).
    #[pyo3(signature = (id, *, sid, uid, ts, tmin, tmax, self_join=false, words=None, region=None))]
    #[allow(clippy::too_many_arguments)]
    fn subscribe<'py>(
        &self,
        py: Python<'py>,
        id: &Bound<'py, PyAny>,
        sid: i64,
        uid: i64,
        ts: i64,
        tmin: i64,
        tmax: i64,
        self_join: bool,
        words: Option<&Bound<'py, PyAny>>,
        region: Option<(f64, f64, f64, f64)>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let words = match words {
            None => Vec::new(),
            Some(w) => match w.extract::<String>() {
                Ok(text) => text.split_whitespace().map(str::to_owned).collect(),
                Err(_) => w.extract::<Vec<String>>().map_err(|_| {
                    pyo3::exceptions::PyTypeError::new_err("words must be a str or a list of str")
                })?,
            },
        };
        let s = Subscription {
            id: to_id(id)?,
            sid,
            uid,
            ts,
            tmin,
            tmax,
            filter: Filter {
                words,
                region: region.map(|(a, b, c, d)| [a, b, c, d]),
            },
        };
        let r = detached(py, || {
            self.handle
                .with(|_| Ok(self.space.subscribe(&s, self_join)?))
        })?;
        let out = PyDict::new(py);
        let pubs = PyList::empty(py);
        for p in &r.publications {
            pubs.append(publication_to_py(py, p)?)?;
        }
        let subs = PyList::empty(py);
        for o in &r.subscriptions {
            subs.append(subscription_to_py(py, o)?)?;
        }
        out.set_item("publications", pubs)?;
        out.set_item("subscriptions", subs)?;
        Ok(out)
    }

    /// PUBLISH: store the publication and return
    /// `{"subscribers": [...], "publications": [...]}`: the stored
    /// subscriptions it matches; with `since`, also the other publications
    /// on the id published in `[since, tp]` and valid at `tp`. `loc`:
    /// where it happened, `(x, y)`, for subscriptions with a region.
    #[pyo3(signature = (id, *, pid, tp, tmax, desc="", since=None, loc=None))]
    #[allow(clippy::too_many_arguments)]
    fn publish<'py>(
        &self,
        py: Python<'py>,
        id: &Bound<'py, PyAny>,
        pid: i64,
        tp: i64,
        tmax: i64,
        desc: &str,
        since: Option<i64>,
        loc: Option<(f64, f64)>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let p = Publication {
            id: to_id(id)?,
            pid,
            tp,
            tmax,
            desc: desc.to_owned(),
            loc,
        };
        let r = detached(py, || {
            self.handle.with(|_| Ok(self.space.publish(&p, since)?))
        })?;
        let out = PyDict::new(py);
        let subs = PyList::empty(py);
        for s in &r.subscribers {
            subs.append(subscription_to_py(py, s)?)?;
        }
        let pubs = PyList::empty(py);
        for o in &r.publications {
            pubs.append(publication_to_py(py, o)?)?;
        }
        out.set_item("subscribers", subs)?;
        out.set_item("publications", pubs)?;
        Ok(out)
    }

    /// Subscriber `uid`'s live feed (the space needs `delivery=True`):
    /// iterate it to get each match as a dict (`seq`, `uid`, `sid` and the
    /// publication's `id`, `pid`, `tp`, `tmax`, `desc`), in order, waiting
    /// for new ones; with `timeout` (seconds) the iteration ends after that
    /// long without a new one. Iterating acknowledges what it handed out
    /// each time it goes back to the queue for more (one transaction per
    /// batch read), so a subscriber that dies gets
    /// again what it was working on, never what came before (at least
    /// once); `ack(seq)` acknowledges explicitly. A new listener resumes
    /// after the acknowledged position.
    #[pyo3(signature = (uid, *, timeout=None))]
    fn listen(&self, py: Python<'_>, uid: i64, timeout: Option<f64>) -> PyResult<Listener> {
        let timeout = match timeout {
            None => None,
            Some(t) if t.is_finite() && t >= 0.0 => Some(Duration::from_secs_f64(t)),
            Some(t) => {
                return Err(BindError::Config(format!(
                    "timeout must be a non-negative number of seconds, got {t}"
                )))
                .py_err(py);
            }
        };
        let l = detached(py, || self.handle.with(|_| Ok(self.space.listen(uid)?)))?;
        Ok(Listener {
            handle: self.handle.clone(),
            listener: Mutex::new(l),
            timeout,
        })
    }

    /// The names of the datasets holding the space.
    fn datasets(&self) -> Vec<String> {
        self.space
            .datasets()
            .iter()
            .map(|d| d.name().to_owned())
            .collect()
    }

    fn __repr__(&self) -> String {
        format!("<siltdb.PubSub {:?}>", self.space.design())
    }
}

/// A subscriber's live feed (from `PubSub.listen`). See `PubSub.listen`.
#[pyclass(frozen, module = "siltdb")]
pub struct Listener {
    handle: Arc<Handle>,
    listener: Mutex<CoreListener>,
    timeout: Option<Duration>,
}

#[pymethods]
impl Listener {
    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyDict>>> {
        detached(py, || {
            self.handle.with(|_| {
                let mut l = self.listener.lock();
                if l.buffered() == 0 {
                    l.ack_all()?;
                }
                Ok(())
            })
        })?;
        let deadline = self.timeout.map(|t| Instant::now() + t);
        loop {
            let slice = match deadline {
                None => WAIT_SLICE,
                Some(at) => at.saturating_duration_since(Instant::now()).min(WAIT_SLICE),
            };
            let got = detached(py, || {
                self.handle
                    .with(|_| Ok(self.listener.lock().next_within(Some(slice))?))
            })?;
            if let Some(d) = got {
                return delivery_to_py(py, &d).map(Some);
            }
            if deadline.is_some_and(|at| Instant::now() >= at) {
                return Ok(None);
            }
            // Ctrl-C between waits.
            py.check_signals()?;
        }
    }

    /// The next delivery within `timeout` seconds (None: as `next()`
    /// without waiting for ever) or None; does not acknowledge anything.
    #[pyo3(signature = (timeout=0.0))]
    fn poll<'py>(&self, py: Python<'py>, timeout: f64) -> PyResult<Option<Bound<'py, PyDict>>> {
        if !(timeout.is_finite() && timeout >= 0.0) {
            return Err(BindError::Config(format!(
                "timeout must be a non-negative number of seconds, got {timeout}"
            )))
            .py_err(py);
        }
        let t = Duration::from_secs_f64(timeout);
        let got = detached(py, || {
            self.handle
                .with(|_| Ok(self.listener.lock().next_within(Some(t))?))
        })?;
        got.map(|d| delivery_to_py(py, &d)).transpose()
    }

    /// Acknowledge every delivery handed out up to `seq` (default: all
    /// handed out): the durable cursor moves there and they leave the queue.
    #[pyo3(signature = (seq=None))]
    fn ack(&self, py: Python<'_>, seq: Option<i64>) -> PyResult<()> {
        detached(py, || {
            self.handle.with(|_| {
                let mut l = self.listener.lock();
                match seq {
                    Some(s) => Ok(l.ack(s)?),
                    None => Ok(l.ack_all()?),
                }
            })
        })
    }

    /// The last acknowledged sequence number (0: none).
    #[getter]
    fn cursor(&self) -> i64 {
        self.listener.lock().cursor()
    }

    fn __repr__(&self) -> String {
        let l = self.listener.lock();
        format!("<siltdb.Listener uid={} cursor={}>", l.uid(), l.cursor())
    }
}
