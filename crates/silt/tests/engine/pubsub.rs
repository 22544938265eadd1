//! Publish/subscribe (seed 001 ch. 4) against a brute-force model: random
//! SUBSCRIBE and PUBLISH operations (self-joining or not) on a few ids, in
//! time order up to a bounded disorder, with flushes, merges that drop
//! expired items, reopens and crashes, through TwoDB, DualDB and
//! RepQueries. Every answer must equal the model's: the stored items on
//! the id that match by the rule of `silt::pubsub::model`. Then many
//! threads subscribe and publish on the same ids at once: every matching
//! pair must be reported exactly once.

use crate::restart::{cases, crash, opts, reopen};
use proptest::prelude::*;
use silt::lsm::policy::MergePolicy;
use silt::pubsub::hierarchy::related;
use silt::pubsub::{
    Design, Filter, Granularity, PubSub, PubSubOptions, Publication, Subscription, live_at,
};
use silt::txn::FaultInjector;
use silt::{Database, Value};
use std::collections::{BTreeSet, HashMap};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

/// How late an operation may be stamped (below the newest time so far);
/// the spaces' grace covers it.
const DISORDER: i64 = 5;

fn space_opts(design: Design, policy: &str) -> PubSubOptions {
    PubSubOptions {
        design,
        partitions: 2,
        memory_budget: Some(1 << 20),
        policy: MergePolicy::parse(policy).unwrap(),
        grace: DISORDER,
        hierarchy: None,
        delivery: design != Design::RepQueries,
    }
}

/// The tree of the hierarchical runs: a quad tree three levels deep.
const DEPTH: u8 = 3;
const FANOUT: u8 = 4;

/// Operation id `n` (0..64): a flat id, or a node of the tree (the root,
/// inner nodes and leaves, weighted towards the leaves).
fn id_of(n: i64, hier: bool) -> Value {
    if !hier {
        return Value::Int(n % 3);
    }
    let n = n as u64;
    let depth = match n % 8 {
        0 => 0,
        1 => 1,
        2 | 3 => 2,
        _ => 3,
    };
    let path: Vec<u8> = (0..depth).map(|l| ((n >> (2 * l + 3)) % 4) as u8).collect();
    Value::Binary(path)
}

/// Whether ids `a` and `b` can match.
fn rel(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Binary(x), Value::Binary(y)) => related(x, y),
        _ => a == b,
    }
}

#[derive(Clone, Debug)]
enum Op {
    /// id, lateness, window before and after TS, self-join, user.
    Sub(i64, i64, i64, i64, bool, i64),
    /// id, lateness, lifetime, self-join window.
    Pub(i64, i64, i64, Option<i64>),
    /// The clock moves on.
    Tick(i64),
    Flush,
    Compact,
    Reopen,
    Crash,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        8 => (0i64..64, 0..=DISORDER, 0i64..30, 1i64..30, any::<bool>(), 0i64..3)
            .prop_map(|(id, l, b, a, sj, u)| Op::Sub(id, l, b, a, sj, u)),
        8 => (0i64..64, 0..=DISORDER, 1i64..40, prop::option::of(0i64..20))
            .prop_map(|(id, l, life, s)| Op::Pub(id, l, life, s)),
        4 => (1i64..8).prop_map(Op::Tick),
        2 => Just(Op::Flush),
        1 => Just(Op::Compact),
        1 => Just(Op::Reopen),
        1 => Just(Op::Crash),
    ]
}

/// The content filter of subscription `n`: none, words, a region, or
/// both (words as a user types them).
fn filter_of(n: i64) -> Filter {
    let region = Some([0.0, 0.0, 5.0, 5.0]);
    match n % 6 {
        0 => Filter {
            words: vec!["Red".into()],
            region: None,
        },
        1 => Filter {
            words: vec![],
            region,
        },
        2 => Filter {
            words: vec!["red".into(), "SUN".into()],
            region,
        },
        _ => Filter::default(),
    }
}

/// The match rule written again from its description (seed 001 §4.3 with
/// the errata; content filters): the model does not use the library's.
fn model_match(s: &Subscription, p: &Publication) -> bool {
    let time = s.tmin <= p.tp && p.tp < s.tmax && (p.tp >= s.ts || s.ts < p.tmax);
    let words: Vec<String> = p
        .desc
        .split(|c: char| !c.is_alphanumeric())
        .map(str::to_lowercase)
        .collect();
    let has_words = s
        .filter
        .words
        .iter()
        .all(|w| words.contains(&w.to_lowercase()));
    let in_region = match (s.filter.region, p.loc) {
        (None, _) => true,
        (Some(_), None) => false,
        (Some([x0, y0, x1, y1]), Some((x, y))) => x >= x0 && x <= x1 && y >= y0 && y <= y1,
    };
    time && has_words && in_region
}

/// A publication but its id (fixed granularity stores a copy per leaf).
fn content(p: &Publication) -> (i64, i64, i64, String, Option<(f64, f64)>) {
    (p.pid, p.tp, p.tmax, p.desc.clone(), p.loc)
}

#[derive(Default)]
struct Model {
    subs: Vec<Subscription>,
    pubs: Vec<Publication>,
}

fn sids(v: &[Subscription]) -> BTreeSet<i64> {
    v.iter().map(|s| s.sid).collect()
}

fn pids(v: &[Publication]) -> BTreeSet<i64> {
    v.iter().map(|p| p.pid).collect()
}

fn flush_all(db: &Database) {
    for n in db.dataset_names() {
        db.dataset(&n).unwrap().flush().unwrap();
    }
}

fn run(
    ops: &[Op],
    design: Design,
    policy: &str,
    hierarchy: Option<Granularity>,
) -> Result<(), TestCaseError> {
    let dir = tempfile::tempdir().unwrap();
    let so = PubSubOptions {
        hierarchy,
        ..space_opts(design, policy)
    };
    let hier = hierarchy.is_some();
    let mut fault = Arc::new(FaultInjector::new());
    let open = |dir: &Path, fault: &Arc<FaultInjector>| {
        let db = Database::open(dir, opts(fault)).unwrap();
        let ps = PubSub::open(&db, "ps", &so).unwrap();
        (db, ps)
    };
    let (mut db, mut ps) = open(dir.path(), &fault);
    let mut m = Model::default();
    let (mut now, mut next_id) = (100i64, 1i64);
    for op in ops {
        match op {
            Op::Sub(id, late, before, after, self_join, uid) => {
                let ts = now - late;
                let s = Subscription {
                    id: id_of(*id, hier),
                    sid: next_id,
                    uid: *uid,
                    ts,
                    tmin: ts - before,
                    tmax: ts + after,
                    filter: filter_of(next_id),
                };
                next_id += 1;
                let sj = *self_join && design != Design::RepQueries;
                let got = ps.subscribe(&s, sj).unwrap();
                let want: Vec<Publication> = m
                    .pubs
                    .iter()
                    .filter(|p| rel(&p.id, &s.id) && model_match(&s, p))
                    .cloned()
                    .collect();
                prop_assert_eq!(pids(&got.publications), pids(&want), "subscribe {:?}", s);
                prop_assert_eq!(got.publications.len(), want.len());
                if sj {
                    let want: Vec<Subscription> = m
                        .subs
                        .iter()
                        .filter(|o| rel(&o.id, &s.id) && live_at(o, s.ts))
                        .cloned()
                        .collect();
                    prop_assert_eq!(sids(&got.subscriptions), sids(&want), "self-join {:?}", s);
                }
                if design != Design::RepQueries {
                    m.subs.push(s);
                }
            }
            Op::Pub(id, late, life, since) => {
                let tp = now - late;
                let p = Publication {
                    id: id_of(*id, hier),
                    pid: next_id,
                    tp,
                    tmax: tp + life,
                    desc: format!(
                        "p{next_id} {}",
                        ["red sun", "Red", "blue", "SUN, red!"][(next_id % 4) as usize]
                    ),
                    loc: [
                        None,
                        Some((1.0, 1.0)),
                        Some((7.0, 7.0)),
                        Some((5.0, 0.0)),
                        Some((2.0, 3.0)),
                    ][(next_id % 5) as usize],
                };
                next_id += 1;
                let since = since.map(|s| tp - s);
                let got = ps.publish(&p, since).unwrap();
                let want: Vec<Subscription> = m
                    .subs
                    .iter()
                    .filter(|s| rel(&s.id, &p.id) && model_match(s, &p))
                    .cloned()
                    .collect();
                prop_assert_eq!(sids(&got.subscribers), sids(&want), "publish {:?}", p);
                if let Some(lo) = since {
                    let want: Vec<Publication> = m
                        .pubs
                        .iter()
                        .filter(|o| {
                            rel(&o.id, &p.id) && o.tp >= lo && o.tp <= p.tp && p.tp < o.tmax
                        })
                        .cloned()
                        .collect();
                    prop_assert_eq!(pids(&got.publications), pids(&want), "self-join {:?}", p);
                    // Records come back whole.
                    for o in &got.publications {
                        let stored = m.pubs.iter().find(|x| x.pid == o.pid);
                        prop_assert_eq!(Some(content(o)), stored.map(content));
                    }
                }
                m.pubs.push(p);
            }
            Op::Tick(d) => now += d,
            Op::Flush => flush_all(&db),
            Op::Compact => {
                for n in db.dataset_names() {
                    db.dataset(&n).unwrap().compact().unwrap();
                }
            }
            Op::Reopen => {
                drop(ps);
                db = reopen(db, dir.path(), &fault);
                ps = PubSub::open(&db, "ps", &so).unwrap();
            }
            Op::Crash => {
                drop(ps);
                db = crash(db, dir.path(), &mut fault);
                ps = PubSub::open(&db, "ps", &so).unwrap();
            }
        }
    }
    // RepQueries: a poll returns what was published in its interval and is
    // still valid.
    if design == Design::RepQueries {
        for id in 0..8 {
            let s = Subscription {
                id: id_of(id, hier),
                sid: next_id,
                uid: 0,
                ts: now - 20,
                tmin: now - 40,
                tmax: now + 1,
                ..Default::default()
            };
            let got = ps.poll(&s, now - 10, now).unwrap();
            let want: Vec<Publication> = m
                .pubs
                .iter()
                .filter(|p| rel(&p.id, &s.id) && p.tp > now - 10 && p.tp <= now && now < p.tmax)
                .cloned()
                .collect();
            prop_assert_eq!(pids(&got), pids(&want), "poll id {}", id);
        }
    }
    if design != Design::RepQueries {
        (db, ps) = check_deliveries(&m, db, ps, dir.path(), &so, &mut fault)?;
    }
    drop(ps);
    db.close().unwrap();
    Ok(())
}

/// Live delivery: each subscriber's queue holds exactly its matching pairs
/// (whichever operation found them), in increasing sequence numbers. Each
/// queue is taken whole and its first half acknowledged; after a crash
/// each listener resumes right after its cursor: the unacknowledged
/// deliveries come again, the acknowledged never.
fn check_deliveries(
    m: &Model,
    db: Database,
    ps: Arc<PubSub>,
    dir: &Path,
    so: &PubSubOptions,
    fault: &mut Arc<FaultInjector>,
) -> Result<(Database, Arc<PubSub>), TestCaseError> {
    let uids: BTreeSet<i64> = m.subs.iter().map(|s| s.uid).collect();
    let mut want: HashMap<i64, BTreeSet<(i64, i64)>> = HashMap::new();
    for s in &m.subs {
        for p in &m.pubs {
            if rel(&s.id, &p.id) && model_match(s, p) {
                want.entry(s.uid).or_default().insert((s.sid, p.pid));
            }
        }
    }
    // Per subscriber, what stays unacknowledged.
    let mut rest: HashMap<i64, Vec<(i64, i64)>> = HashMap::new();
    for &uid in &uids {
        let want = want.remove(&uid).unwrap_or_default();
        let mut l = ps.listen(uid).unwrap();
        let mut got = Vec::new();
        let mut last = 0;
        while let Some(d) = l.try_next().unwrap() {
            prop_assert!(d.seq > last, "uid {}: seq {} after {}", uid, d.seq, last);
            prop_assert_eq!(d.uid, uid);
            // The publication comes whole (its description and location).
            let stored = m.pubs.iter().find(|x| x.pid == d.publication.pid);
            prop_assert_eq!(Some(content(&d.publication)), stored.map(content));
            last = d.seq;
            got.push((d.sid, d.publication.pid, d.seq));
        }
        let pairs: Vec<(i64, i64)> = got.iter().map(|g| (g.0, g.1)).collect();
        let set: BTreeSet<(i64, i64)> = pairs.iter().copied().collect();
        prop_assert_eq!(
            set.len(),
            pairs.len(),
            "uid {}: a pair delivered twice",
            uid
        );
        prop_assert_eq!(&set, &want, "uid {}: deliveries", uid);
        // A fresh listener sees the same queue: nothing was acknowledged.
        let mut again = ps.listen(uid).unwrap();
        prop_assert_eq!(
            again.try_next().unwrap().map(|d| d.seq),
            got.first().map(|g| g.2)
        );
        let half = got.len() / 2;
        if half > 0 {
            l.ack(got[half - 1].2).unwrap();
            prop_assert_eq!(l.cursor(), got[half - 1].2);
        }
        prop_assert!(
            l.ack(last + 1).is_err(),
            "acknowledged what was not handed out"
        );
        rest.insert(uid, got[half..].iter().map(|g| (g.0, g.1)).collect());
    }
    // A crash (the listeners above took deliveries past their cursors).
    drop(ps);
    let db = crash(db, dir, fault);
    let ps = PubSub::open(&db, "ps", so).unwrap();
    for &uid in &uids {
        let mut l = ps.listen(uid).unwrap();
        let mut got = Vec::new();
        while let Some(d) = l.try_next().unwrap() {
            got.push((d.sid, d.publication.pid));
        }
        let want = rest.remove(&uid).unwrap_or_default();
        prop_assert_eq!(got, want, "uid {}: after the crash", uid);
    }
    Ok((db, ps))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(
        cases("SILT_PUBSUB_CASES", 6)
    ))]

    #[test]
    fn every_design_answers_as_the_model(ops in proptest::collection::vec(op(), 1..250)) {
        for (design, policy) in [
            (Design::DualDb, "leveled(2,3,2KB,4KB)"),
            (Design::TwoDb, "tiered(3)"),
            (Design::DualDb, "binomial(3)"),
            (Design::RepQueries, "no-merge"),
        ] {
            run(&ops, design, policy, None)?;
        }
    }

    #[test]
    fn hierarchies_match_ancestors_and_descendants(ops in proptest::collection::vec(op(), 1..200)) {
        for (design, policy, g) in [
            (Design::DualDb, "leveled(2,3,2KB,4KB)", Granularity::Variable { depth: DEPTH, fanout: FANOUT }),
            (Design::TwoDb, "tiered(3)", Granularity::Variable { depth: DEPTH, fanout: FANOUT }),
            (Design::DualDb, "tiered(3)", Granularity::Fixed { depth: DEPTH, fanout: FANOUT }),
            (Design::RepQueries, "no-merge", Granularity::Variable { depth: DEPTH, fanout: FANOUT }),
        ] {
            run(&ops, design, policy, Some(g))?;
        }
    }
}

/// Many threads on few ids: every matching (subscription, publication)
/// pair is reported exactly once, by SUBSCRIBE or by PUBLISH.
#[test]
fn simultaneous_subscribe_and_publish_match_exactly_once() {
    let variable = Granularity::Variable {
        depth: DEPTH,
        fanout: FANOUT,
    };
    for (design, hierarchy) in [
        (Design::DualDb, None),
        (Design::TwoDb, None),
        (Design::DualDb, Some(variable)),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let fault = Arc::new(FaultInjector::new());
        let db = Database::open(dir.path(), opts(&fault)).unwrap();
        // The threads' clocks drift apart by up to `per`: an operation may
        // be stamped that far behind the newest time written, so the
        // sweeps and merges keep what expired within that grace.
        let so = PubSubOptions {
            hierarchy,
            grace: 300,
            ..space_opts(design, "tiered(3)")
        };
        let ps = PubSub::open(&db, "ps", &so).unwrap();
        let hier = hierarchy.is_some();
        let threads = 4;
        let per = 300;
        // Live listeners, one per user, reading while the operations on
        // different ids commit out of sequence order.
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let listeners: Vec<_> = (0..threads as i64)
            .map(|uid| {
                let (ps, stop) = (ps.clone(), stop.clone());
                std::thread::spawn(move || {
                    let mut l = ps.listen(uid).unwrap();
                    let mut got: Vec<(i64, i64, i64)> = Vec::new();
                    loop {
                        let done = stop.load(std::sync::atomic::Ordering::SeqCst);
                        match l.next_within(Some(Duration::from_millis(20))).unwrap() {
                            Some(d) => {
                                assert!(got.last().is_none_or(|g| g.2 < d.seq), "out of order");
                                got.push((d.sid, d.publication.pid, d.seq));
                                if got.len().is_multiple_of(50) {
                                    l.ack_all().unwrap();
                                }
                            }
                            None if done => break,
                            None => {}
                        }
                    }
                    got
                })
            })
            .collect();
        let results: Vec<_> = (0..threads)
            .map(|t| {
                let ps = ps.clone();
                std::thread::spawn(move || {
                    let mut seen: Vec<(i64, i64)> = Vec::new();
                    let mut made_s = Vec::new();
                    let mut made_p = Vec::new();
                    for i in 0..per {
                        let n = (t * per + i) as i64;
                        let id = if hier {
                            id_of(n % 64, true)
                        } else {
                            Value::Int(n % 2)
                        };
                        let time = 1_000 + i as i64;
                        if (i + t) % 2 == 0 {
                            let s = Subscription {
                                id,
                                sid: n,
                                uid: t as i64,
                                ts: time,
                                tmin: time - 50,
                                tmax: time + 50,
                                ..Default::default()
                            };
                            let r = ps.subscribe(&s, false).unwrap();
                            seen.extend(r.publications.iter().map(|p| (s.sid, p.pid)));
                            made_s.push(s);
                        } else {
                            let p = Publication {
                                id,
                                pid: n,
                                tp: time,
                                tmax: time + 30,
                                desc: String::new(),
                                ..Default::default()
                            };
                            let r = ps.publish(&p, None).unwrap();
                            seen.extend(r.subscribers.iter().map(|s| (s.sid, p.pid)));
                            made_p.push(p);
                        }
                    }
                    (seen, made_s, made_p)
                })
            })
            .collect();
        let mut seen: HashMap<(i64, i64), usize> = HashMap::new();
        let (mut subs, mut pubs) = (Vec::new(), Vec::new());
        for h in results {
            let (s, a, b) = h.join().unwrap();
            for k in s {
                *seen.entry(k).or_default() += 1;
            }
            subs.extend(a);
            pubs.extend(b);
        }
        stop.store(true, std::sync::atomic::Ordering::SeqCst);
        let mut delivered: HashMap<(i64, i64), usize> = HashMap::new();
        for h in listeners {
            for (sid, pid, _) in h.join().unwrap() {
                *delivered.entry((sid, pid)).or_default() += 1;
            }
        }
        let missing: Vec<_> = seen.keys().filter(|k| !delivered.contains_key(k)).collect();
        let extra: Vec<_> = delivered.keys().filter(|k| !seen.contains_key(k)).collect();
        let twice: Vec<_> = delivered.iter().filter(|(_, n)| **n > 1).collect();
        assert!(
            missing.is_empty() && extra.is_empty() && twice.is_empty(),
            "{design:?}: the live deliveries differ from the answers ({} pairs): {} missing {:?}, {} extra {:?}, {} twice {:?}",
            seen.len(),
            missing.len(),
            &missing[..missing.len().min(5)],
            extra.len(),
            &extra[..extra.len().min(5)],
            twice.len(),
            &twice[..twice.len().min(5)]
        );
        let mut want = 0;
        for s in &subs {
            for p in &pubs {
                if rel(&s.id, &p.id) && model_match(s, p) {
                    want += 1;
                    assert_eq!(
                        seen.get(&(s.sid, p.pid)),
                        Some(&1),
                        "{design:?}: pair ({}, {}) reported {:?} times",
                        s.sid,
                        p.pid,
                        seen.get(&(s.sid, p.pid))
                    );
                }
            }
        }
        assert_eq!(
            seen.len(),
            want,
            "{design:?}: reported pairs that do not match"
        );
        assert!(
            want > 1000,
            "the test should make many matching pairs, made {want}"
        );
        drop(ps);
        db.close().unwrap();
    }
}

/// A space is kept in the catalog: reopened by name with its options,
/// shared by every handle of a process (one set of locks and one delivery
/// watermark), refused with other options, and dropped whole.
#[test]
fn spaces_are_kept_shared_and_dropped_whole() {
    let dir = tempfile::tempdir().unwrap();
    let so = PubSubOptions {
        hierarchy: Some(Granularity::Variable {
            depth: 3,
            fanout: 4,
        }),
        ..space_opts(Design::TwoDb, "tiered(3)")
    };
    let fault = Arc::new(FaultInjector::new());
    let db = Database::open(dir.path(), opts(&fault)).unwrap();
    let err = PubSub::get(&db, "ps").err().unwrap().to_string();
    assert!(err.contains("no pub/sub space named `ps`"), "{err}");
    let a = PubSub::open(&db, "ps", &so).unwrap();
    let b = PubSub::get(&db, "ps").unwrap();
    assert!(Arc::ptr_eq(&a, &b), "two handles, two spaces");
    let other = PubSubOptions {
        design: Design::DualDb,
        ..so.clone()
    };
    let err = PubSub::open(&db, "ps", &other).err().unwrap().to_string();
    assert!(
        err.contains("exists with other options (design twodb"),
        "{err}"
    );
    let sub = Subscription {
        id: Value::Binary(vec![1]),
        sid: 1,
        uid: 9,
        ts: 10,
        tmin: 0,
        tmax: 100,
        ..Default::default()
    };
    a.subscribe(&sub, false).unwrap();
    let err = db.drop_dataset("ps_subs").unwrap_err().to_string();
    assert!(err.contains("pubsub space `ps`"), "{err}");
    drop((a, b));
    let db = reopen(db, dir.path(), &fault);
    assert_eq!(
        PubSub::list(&db).unwrap(),
        vec![("ps".to_owned(), so.clone())]
    );
    let ps = PubSub::get(&db, "ps").unwrap();
    assert_eq!(ps.options(), &so);
    let p = Publication {
        id: Value::Binary(vec![1, 2]),
        pid: 1,
        tp: 20,
        tmax: 50,
        desc: "under the subscriber's node".into(),
        ..Default::default()
    };
    let r = ps.publish(&p, None).unwrap();
    assert_eq!(sids(&r.subscribers), BTreeSet::from([1]));
    let mut l = ps.listen(9).unwrap();
    assert_eq!(l.try_next().unwrap().map(|d| d.publication.pid), Some(1));
    PubSub::drop_space(&db, "ps").unwrap();
    let err = ps.publish(&p, None).unwrap_err().to_string();
    assert!(err.contains("was dropped"), "{err}");
    assert!(db.dataset_names().iter().all(|n| !n.starts_with("ps")));
    assert!(PubSub::list(&db).unwrap().is_empty());
    // The name is free again, for any design.
    let fresh = PubSub::open(&db, "ps", &other).unwrap();
    assert!(
        fresh
            .subscribe(&sub, false)
            .unwrap()
            .publications
            .is_empty()
    );
}

/// A listener waiting for ever wakes for its own subscriber's deliveries,
/// not for other subscribers' (it neither returns them nor misses its
/// own), and a listener opened while another of the same subscriber is
/// open, or after one closed, reads the same queue.
#[test]
fn a_waiting_listener_wakes_for_its_own_deliveries() {
    let dir = tempfile::tempdir().unwrap();
    let fault = Arc::new(FaultInjector::new());
    let db = Database::open(dir.path(), opts(&fault)).unwrap();
    let ps = PubSub::open(&db, "ps", &space_opts(Design::DualDb, "tiered(3)")).unwrap();
    for (sid, uid, id) in [(1, 1, 10), (2, 2, 20)] {
        let s = Subscription {
            id: Value::Int(id),
            sid,
            uid,
            ts: 100,
            tmin: 0,
            tmax: 10_000,
            ..Default::default()
        };
        ps.subscribe(&s, false).unwrap();
    }
    let (tx, rx) = std::sync::mpsc::channel();
    let waiter = {
        let ps = ps.clone();
        std::thread::spawn(move || {
            let mut l = ps.listen(1).unwrap();
            for _ in 0..3 {
                let d = l.next_within(None).unwrap().unwrap();
                tx.send((d.uid, d.publication.pid)).unwrap();
            }
            l.ack_all().unwrap();
        })
    };
    let publish = |pid: i64, id: i64| {
        let p = Publication {
            id: Value::Int(id),
            pid,
            tp: 100 + pid,
            tmax: 10_000,
            ..Default::default()
        };
        assert_eq!(ps.publish(&p, None).unwrap().subscribers.len(), 1);
    };
    // Subscriber 2's deliveries do not reach subscriber 1's listener.
    for pid in 1..=20 {
        publish(pid, 20);
    }
    assert!(rx.recv_timeout(Duration::from_millis(100)).is_err());
    for pid in 21..=23 {
        publish(pid, 10);
        assert_eq!(rx.recv_timeout(Duration::from_secs(10)).unwrap(), (1, pid));
    }
    waiter.join().unwrap();
    // Two listeners of subscriber 2 at once, then a third after both closed.
    let mut a = ps.listen(2).unwrap();
    let mut b = ps.listen(2).unwrap();
    let first = |l: &mut silt::pubsub::Listener| l.try_next().unwrap().map(|d| d.publication.pid);
    assert_eq!(first(&mut a), Some(1));
    assert_eq!(first(&mut b), Some(1));
    drop((a, b));
    let mut c = ps.listen(2).unwrap();
    assert_eq!(first(&mut c), Some(1));
    publish(24, 20);
    let mut n = 1;
    while c.try_next().unwrap().is_some() {
        n += 1;
    }
    assert_eq!(n, 21);
    // Subscriber 1 acknowledged its three: nothing is left for it.
    assert!(ps.listen(1).unwrap().try_next().unwrap().is_none());
}
