//! `pubsub`: publish/subscribe on LSM storage (seed 001 §4.7, Figures
//! 4.8-4.11), scaled down: geotagged operations on a 500x500 grid under a
//! logical clock (every system sees the same live sets), subscription-heavy
//! (S/P = 3) and publication-heavy (S/P = 1/3) mixes, simple and
//! self-joining subscriptions, through Silt's RepQueries, TwoDB and DualDB
//! and RocksDB as the storage-level peer (one store, an append merge
//! operator, expiry in merges and a compaction filter), Redis Streams as
//! the broker (`pubsub_redis`) and PostgreSQL with LISTEN/NOTIFY as the
//! Padres stand-in (`pubsub_pg`). Every system gets one memory budget
//! (TwoDB's two stores share it).

use std::{
    cmp::Reverse,
    collections::BinaryHeap,
    path::Path,
    sync::{
        Arc,
        atomic::{AtomicI64, Ordering},
    },
    time::Instant,
};

use anyhow::{Context, Result, bail};
use rocksdb::{
    BlockBasedOptions, Cache, DB, DBCompressionType, MergeOperands, Options, WriteOptions,
    compaction_filter::Decision,
};
use silt::lsm::policy::MergePolicy;
use silt::pubsub::{Design, PubSub, PubSubOptions, Publication, Subscription};
use silt::workload::SplitMix64;
use silt::workload::geotagged;
use silt::{Database, DbOptions, Durability, Value};

use crate::{
    results::ResultRow,
    util::{ScratchDir, fmt_num, progress},
    workloads::{Ctx, Scale, Workload},
};

pub struct Pubsub;

/// Grid cells per side (§4.7: 500 x 500 over New York).
const GRID: u64 = 500;
/// The logical clock (1,000 operations per second), a subscription's window
/// (TS - 10 s .. TS + 10 s) and a publication's life (§4.7: expiry 20 s).
pub(super) use silt::workload::geotagged::{LIFE_MS, WINDOW_MS};
/// RepQueries: a query every TR = 1 s until the subscription expires (10 polls).
const TR_MS: i64 = 1_000;
/// Self-joining publications look back this far.
pub(super) const SELF_JOIN_MS: i64 = 10_000;
const MEMORY: u64 = 16 << 20;
const BLOCK_CACHE: u64 = 64 << 20;

fn ops_of(scale: Scale) -> u64 {
    match scale {
        Scale::Small => 100_000,
        Scale::Medium => 1_000_000,
        Scale::Full => 3_000_000,
    }
}

/// (name, subscriptions per publication as a fraction: subs, pubs).
const MIXES: [(&str, u64, u64); 2] = [("sub-heavy", 3, 1), ("pub-heavy", 1, 3)];

pub(super) use silt::workload::geotagged::GeoOp as Op;

/// Geotagged operations on the grid: id = the grid cell of the point.
fn operations(seed: u64, n: u64, subs: u64, pubs: u64) -> Vec<Op> {
    let mut users = SplitMix64::new(seed ^ 0x51ed_270b);
    geotagged::points(seed, n, subs, pubs)
        .enumerate()
        .map(|(i, p)| {
            let uid = users.below(50_000) as i64;
            geotagged::operation(i as u64, p.grid_cell(GRID as u32), &p, uid)
        })
        .collect()
}

/// What a system reported over a run.
#[derive(Default)]
pub(super) struct Tally {
    /// Matching (subscription, publication) pairs reported.
    pub(super) matches: u64,
    /// Self-join answers (other subscriptions or publications) returned.
    pub(super) joined: u64,
    /// RepQueries' repeated queries.
    pub(super) polls: u64,
    /// Live delivery: what the online subscribers received, and each
    /// delivery's latency (ns) from the start of the operation that made it.
    pub(super) delivered: u64,
    pub(super) latencies: Vec<u64>,
}

pub(super) trait PsStore {
    fn subscribe(&mut self, s: &Subscription, self_join: bool, t: &mut Tally) -> Result<()>;
    fn publish(&mut self, p: &Publication, self_join: bool, t: &mut Tally) -> Result<()>;
    /// RepQueries: the poll of `s` covering `(after, now]`.
    fn poll(&mut self, _s: &Subscription, _after: i64, _now: i64, _t: &mut Tally) -> Result<()> {
        Ok(())
    }
    fn polls(&self) -> bool {
        false
    }
    /// After the last operation (timed): what is still in flight arrives.
    fn finish(&mut self, _t: &mut Tally) -> Result<()> {
        Ok(())
    }
}

pub(super) struct SiltPs {
    /// Kept open while the space is used.
    _db: Database,
    ps: std::sync::Arc<PubSub>,
}

impl SiltPs {
    fn open(dir: &Path, design: Design) -> Result<Self> {
        Self::open_with(dir, design, None)
    }

    /// `hierarchy`: ids are paths in a tree (the hierarchy experiments).
    pub(super) fn open_with(
        dir: &Path,
        design: Design,
        hierarchy: Option<silt::pubsub::Granularity>,
    ) -> Result<Self> {
        Self::open_full(dir, design, hierarchy, false)
    }

    fn open_full(
        dir: &Path,
        design: Design,
        hierarchy: Option<silt::pubsub::Granularity>,
        delivery: bool,
    ) -> Result<Self> {
        let db = Database::open(
            dir,
            DbOptions {
                block_cache_bytes: BLOCK_CACHE,
                durability: Durability::None,
                ..Default::default()
            },
        )
        .with_context(|| format!("opening Silt at {}", dir.display()))?;
        let ps = PubSub::open(
            &db,
            "geo",
            &PubSubOptions {
                design,
                partitions: 1,
                // One budget per system: TwoDB's two stores share it (with
                // one each, TwoDB had twice the memtable memory of DualDB).
                memory_budget: Some(match design {
                    Design::TwoDb => MEMORY / 2,
                    _ => MEMORY,
                }),
                policy: MergePolicy::parse("leveled")?,
                grace: 0,
                hierarchy,
                delivery,
            },
        )?;
        Ok(Self { _db: db, ps })
    }

    /// Publishes `p`, counting its answer into `t`, and returns the answer.
    fn publish_counted(
        &mut self,
        p: &Publication,
        self_join: bool,
        t: &mut Tally,
    ) -> Result<silt::pubsub::PublishResult> {
        let r = self
            .ps
            .publish(p, self_join.then_some(p.tp - SELF_JOIN_MS))?;
        t.matches += r.subscribers.len() as u64;
        t.joined += r.publications.len() as u64;
        Ok(r)
    }
}

impl PsStore for SiltPs {
    fn subscribe(&mut self, s: &Subscription, self_join: bool, t: &mut Tally) -> Result<()> {
        let r = self.ps.subscribe(s, self_join)?;
        t.matches += r.publications.len() as u64;
        t.joined += r.subscriptions.len() as u64;
        Ok(())
    }

    fn publish(&mut self, p: &Publication, self_join: bool, t: &mut Tally) -> Result<()> {
        self.publish_counted(p, self_join, t).map(drop)
    }

    fn poll(&mut self, s: &Subscription, after: i64, now: i64, t: &mut Tally) -> Result<()> {
        t.matches += self.ps.poll(s, after, now)?.len() as u64;
        t.polls += 1;
        Ok(())
    }

    fn polls(&self) -> bool {
        self.ps.design() == Design::RepQueries
    }
}

/// Subscribers online during a live-delivery run: uids below this (of
/// 50,000, drawn uniformly: 0.2% of the users, about 0.2% of the matches).
const ONLINE: i64 = 100;
/// The consumer sleeps this long after a pass over its listeners that found
/// nothing (it polls: a listener wakes on every commit of the space, so
/// blocking threads per subscriber would all wake at every operation).
const IDLE: std::time::Duration = std::time::Duration::from_millis(2);
/// How long `finish` waits for the online subscribers' last deliveries.
const DRAIN: std::time::Duration = std::time::Duration::from_secs(120);

/// DualDB with live delivery on: every match is also appended to its
/// subscriber's queue in the operation's transaction (for every subscriber,
/// online or not). The subscribers `uid < ONLINE` are online: a consumer
/// thread holds a listener for each, takes what has arrived in turn, and
/// acknowledges it (a transaction per listener and pass that moves the
/// durable cursor and deletes the acknowledged deliveries). Each delivery's
/// latency is measured from the start of the later of its two operations.
struct SiltLivePs {
    inner: SiltPs,
    live: Arc<Live>,
    /// Deliveries the answers say the online subscribers must get.
    expected: u64,
    consumer: Option<std::thread::JoinHandle<Result<Vec<u64>>>>,
}

struct Live {
    epoch: Instant,
    /// Start of each operation (ns since `epoch`), by operation index
    /// (`sid` / `pid` - 1).
    started: Vec<std::sync::atomic::AtomicU64>,
    /// The deliveries to wait for (`u64::MAX`: still running).
    target: std::sync::atomic::AtomicU64,
}

impl Live {
    fn mark(&self, iid: i64) {
        if let Some(a) = usize::try_from(iid - 1)
            .ok()
            .and_then(|i| self.started.get(i))
        {
            a.store(self.epoch.elapsed().as_nanos() as u64, Ordering::Relaxed);
        }
    }

    fn start_of(&self, iid: i64) -> u64 {
        usize::try_from(iid - 1)
            .ok()
            .and_then(|i| self.started.get(i))
            .map_or(0, |a| a.load(Ordering::Relaxed))
    }
}

impl SiltLivePs {
    fn open(dir: &Path, n_ops: usize) -> Result<Self> {
        let inner = SiltPs::open_full(dir, Design::DualDb, None, true)?;
        let live = Arc::new(Live {
            epoch: Instant::now(),
            started: (0..n_ops).map(|_| Default::default()).collect(),
            target: std::sync::atomic::AtomicU64::new(u64::MAX),
        });
        let mut listeners = (0..ONLINE)
            .map(|uid| inner.ps.listen(uid))
            .collect::<silt::Result<Vec<_>>>()?;
        let l = live.clone();
        let consumer = std::thread::Builder::new()
            .name("pubsub-consumer".into())
            .spawn(move || -> Result<Vec<u64>> {
                let mut lat = Vec::new();
                let mut deadline = None;
                loop {
                    let mut got = 0;
                    for ls in &mut listeners {
                        let before = got;
                        while let Some(d) = ls.try_next()? {
                            let now = l.epoch.elapsed().as_nanos() as u64;
                            let from = l.start_of(d.sid).max(l.start_of(d.publication.pid));
                            lat.push(now.saturating_sub(from));
                            got += 1;
                        }
                        if got > before {
                            ls.ack_all()?;
                        }
                    }
                    let target = l.target.load(Ordering::Acquire);
                    if lat.len() as u64 >= target {
                        return Ok(lat);
                    }
                    if target != u64::MAX {
                        let at = *deadline.get_or_insert_with(|| Instant::now() + DRAIN);
                        if Instant::now() > at {
                            bail!(
                                "live delivery: the online subscribers received {} of {target} deliveries within {DRAIN:?} of the last operation",
                                lat.len()
                            );
                        }
                    }
                    if got == 0 {
                        std::thread::sleep(IDLE);
                    }
                }
            })?;
        Ok(Self {
            inner,
            live,
            expected: 0,
            consumer: Some(consumer),
        })
    }
}

impl PsStore for SiltLivePs {
    fn subscribe(&mut self, s: &Subscription, self_join: bool, t: &mut Tally) -> Result<()> {
        self.live.mark(s.sid);
        let before = t.matches;
        self.inner.subscribe(s, self_join, t)?;
        if s.uid < ONLINE {
            self.expected += t.matches - before;
        }
        Ok(())
    }

    fn publish(&mut self, p: &Publication, self_join: bool, t: &mut Tally) -> Result<()> {
        self.live.mark(p.pid);
        let r = self.inner.publish_counted(p, self_join, t)?;
        self.expected += r.subscribers.iter().filter(|s| s.uid < ONLINE).count() as u64;
        Ok(())
    }

    /// The online subscribers' last deliveries arrive (timed, as
    /// PostgreSQL's listener hearing its last notification).
    fn finish(&mut self, t: &mut Tally) -> Result<()> {
        self.live.target.store(self.expected, Ordering::Release);
        let lat = match self.consumer.take() {
            Some(h) => h
                .join()
                .map_err(|_| anyhow::anyhow!("the live-delivery consumer panicked"))??,
            None => Vec::new(),
        };
        if lat.len() as u64 != self.expected {
            bail!(
                "live delivery: the online subscribers received {} deliveries, their answers say {}",
                lat.len(),
                self.expected
            );
        }
        t.delivered = lat.len() as u64;
        t.latencies = lat;
        Ok(())
    }
}

/// RocksDB as DualDB: key = cell (u64 BE) ‖ flag (`P` or `S`); each value
/// is a list of fixed 40-byte items `t, tmax, iid, uid, tmin` (i64 LE)
/// appended by an associative merge operator that also drops items expired
/// by the clock; a compaction filter removes lists that have wholly
/// expired. The match rule is the one of `silt::pubsub::model`.
struct RocksPs {
    db: DB,
    wo: WriteOptions,
    clock: Arc<AtomicI64>,
    _cache: Cache,
}

const ITEM: usize = 40;

pub(super) fn item(t: i64, tmax: i64, iid: i64, uid: i64, tmin: i64) -> [u8; ITEM] {
    let mut b = [0u8; ITEM];
    for (i, v) in [t, tmax, iid, uid, tmin].into_iter().enumerate() {
        b[i * 8..i * 8 + 8].copy_from_slice(&v.to_le_bytes());
    }
    b
}

pub(super) fn field(b: &[u8], i: usize) -> i64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[i * 8..i * 8 + 8]);
    i64::from_le_bytes(a)
}

fn rkey(id: &Value, flag: u8) -> [u8; 9] {
    let mut k = [0u8; 9];
    k[..8].copy_from_slice(&(id.as_i64().unwrap_or(0) as u64).to_be_bytes());
    k[8] = flag;
    k
}

impl RocksPs {
    fn open(dir: &Path) -> Result<Self> {
        let cache = Cache::new_lru_cache(BLOCK_CACHE as usize);
        let mut table = BlockBasedOptions::default();
        table.set_block_cache(&cache);
        table.set_bloom_filter(10.0, false);
        table.set_block_size(4096);
        let mut o = Options::default();
        o.create_if_missing(true);
        o.set_block_based_table_factory(&table);
        o.set_write_buffer_size(MEMORY as usize / 2);
        o.set_compression_type(DBCompressionType::Lz4);
        o.set_max_background_jobs(2);
        let clock = Arc::new(AtomicI64::new(i64::MIN));
        let c1 = clock.clone();
        o.set_merge_operator_associative(
            "append-expire",
            move |_key: &[u8], existing: Option<&[u8]>, ops: &MergeOperands| {
                let now = c1.load(Ordering::Relaxed);
                let mut out = Vec::new();
                for part in existing.into_iter().chain(ops.iter()) {
                    for it in part.chunks_exact(ITEM) {
                        if field(it, 1) > now {
                            out.extend_from_slice(it);
                        }
                    }
                }
                Some(out)
            },
        );
        let c2 = clock.clone();
        o.set_compaction_filter("expired-lists", move |_lvl: u32, _k: &[u8], v: &[u8]| {
            let now = c2.load(Ordering::Relaxed);
            if v.chunks_exact(ITEM).all(|it| field(it, 1) <= now) {
                Decision::Remove
            } else {
                Decision::Keep
            }
        });
        let db =
            DB::open(&o, dir).with_context(|| format!("opening RocksDB at {}", dir.display()))?;
        let mut wo = WriteOptions::default();
        wo.set_sync(false);
        Ok(Self {
            db,
            wo,
            clock,
            _cache: cache,
        })
    }

    fn list(&self, id: &Value, flag: u8) -> Result<Vec<u8>> {
        Ok(self.db.get(rkey(id, flag))?.unwrap_or_default())
    }

    fn tick(&self, now: i64) {
        self.clock.fetch_max(now, Ordering::Relaxed);
    }
}

impl PsStore for RocksPs {
    fn subscribe(&mut self, s: &Subscription, self_join: bool, t: &mut Tally) -> Result<()> {
        self.tick(s.ts);
        let it = item(s.ts, s.tmax, s.sid, s.uid, s.tmin);
        self.db.merge_opt(rkey(&s.id, b'S'), it, &self.wo)?;
        for p in self.list(&s.id, b'P')?.chunks_exact(ITEM) {
            let (tp, ptmax) = (field(p, 0), field(p, 1));
            if s.tmin <= tp && tp < s.tmax && (tp >= s.ts || s.ts < ptmax) {
                t.matches += 1;
            }
        }
        if self_join {
            for o in self.list(&s.id, b'S')?.chunks_exact(ITEM) {
                if field(o, 2) != s.sid && field(o, 0) <= s.ts && s.ts < field(o, 1) {
                    t.joined += 1;
                }
            }
        }
        Ok(())
    }

    fn publish(&mut self, p: &Publication, self_join: bool, t: &mut Tally) -> Result<()> {
        self.tick(p.tp);
        let it = item(p.tp, p.tmax, p.pid, 0, 0);
        self.db.merge_opt(rkey(&p.id, b'P'), it, &self.wo)?;
        for s in self.list(&p.id, b'S')?.chunks_exact(ITEM) {
            let (ts, stmax, tmin) = (field(s, 0), field(s, 1), field(s, 4));
            if tmin <= p.tp && p.tp < stmax && (p.tp >= ts || ts < p.tmax) {
                t.matches += 1;
            }
        }
        if self_join {
            let lo = p.tp - SELF_JOIN_MS;
            for o in self.list(&p.id, b'P')?.chunks_exact(ITEM) {
                let tp = field(o, 0);
                if field(o, 2) != p.pid && tp >= lo && tp <= p.tp && p.tp < field(o, 1) {
                    t.joined += 1;
                }
            }
        }
        Ok(())
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Sys {
    Silt(Design),
    /// DualDB with live delivery on.
    SiltLive,
    Rocks,
    Redis,
    Postgres,
}

impl Sys {
    fn label(self) -> &'static str {
        match self {
            Sys::Silt(Design::RepQueries) => "silt-repqueries",
            Sys::Silt(Design::TwoDb) => "silt-twodb",
            Sys::Silt(Design::DualDb) => "silt-dualdb",
            Sys::SiltLive => "silt-dualdb-live",
            Sys::Rocks => "rocksdb-dualdb",
            Sys::Redis => "redis-streams",
            Sys::Postgres => "postgres-notify",
        }
    }

    fn open(self, dir: &Path, n_ops: usize) -> Result<Box<dyn PsStore>> {
        Ok(match self {
            Sys::Silt(d) => Box::new(SiltPs::open(dir, d)?),
            Sys::SiltLive => Box::new(SiltLivePs::open(dir, n_ops)?),
            Sys::Rocks => Box::new(RocksPs::open(dir)?),
            Sys::Redis => Box::new(super::pubsub_redis::RedisPs::open(dir)?),
            Sys::Postgres => Box::new(super::pubsub_pg::PgPs::open(dir)?),
        })
    }
}

fn wants(ctx: &Ctx, s: Sys) -> bool {
    ctx.systems.as_ref().is_none_or(|l| {
        l.iter().any(|x| {
            x.eq_ignore_ascii_case(s.label())
                || (x.eq_ignore_ascii_case("silt") && matches!(s, Sys::Silt(_)))
                || (x.eq_ignore_ascii_case("rocksdb") && s == Sys::Rocks)
                || (x.eq_ignore_ascii_case("redis") && s == Sys::Redis)
                || (x.eq_ignore_ascii_case("postgres") && s == Sys::Postgres)
        })
    })
}

/// One system through one mix; returns (seconds, tally).
fn run_one(sys: Sys, dir: &Path, ops: &[Op], self_join: bool, label: &str) -> Result<(f64, Tally)> {
    let mut store = sys.open(dir, ops.len())?;
    let mut t = Tally::default();
    // RepQueries: (due time, op index, previous poll time).
    let mut due: BinaryHeap<Reverse<(i64, usize, i64)>> = BinaryHeap::new();
    let pb = progress(ops.len() as u64, label.to_owned());
    let start = Instant::now();
    for (i, op) in ops.iter().enumerate() {
        let now = match op {
            Op::Sub(s) => s.ts,
            Op::Pub(p) => p.tp,
        };
        while let Some(Reverse((at, j, prev))) = due.peek().copied() {
            if at > now {
                break;
            }
            due.pop();
            if let Op::Sub(s) = &ops[j] {
                store.poll(s, prev, at, &mut t)?;
                if at + TR_MS <= s.tmax {
                    due.push(Reverse((at + TR_MS, j, at)));
                }
            }
        }
        match op {
            Op::Sub(s) => {
                store.subscribe(s, self_join, &mut t)?;
                if store.polls() {
                    due.push(Reverse((s.ts + TR_MS, i, s.ts)));
                }
            }
            Op::Pub(p) => store.publish(p, self_join, &mut t)?,
        }
        if i % 4096 == 0 {
            pb.set_position(i as u64);
        }
    }
    store.finish(&mut t)?;
    let secs = start.elapsed().as_secs_f64();
    pb.finish_and_clear();
    drop(store);
    Ok((secs, t))
}

impl Workload for Pubsub {
    fn name(&self) -> &'static str {
        "pubsub"
    }

    fn description(&self) -> &'static str {
        "Pub/sub on LSM storage (seed 001 §4.7, Figs. 4.8-4.11): RepQueries, TwoDB, DualDB (also with live delivery), RocksDB (append merge + expiry), Redis Streams and PostgreSQL LISTEN/NOTIFY, S/P = 3 and 1/3, simple and self-joining subscriptions, logical clock"
    }

    fn explanation(&self) -> &'static str {
        "Issue 21: the pub/sub experiments of seed 001 §4.7 at this machine's scale (the paper: 15 M \
         geotagged New York tweets replayed; here small 100 K, medium 1 M, full 3 M generated geotagged \
         operations, 80% around 400 Zipf-weighted hotspots, on a 500 x 500 grid). A logical clock gives \
         every system the same live sets: one operation per logical millisecond; a subscription at TS \
         asks for [TS - 10 s, TS + 10 s) and a publication expires 20 s after it happens (§4.7). Mixes: \
         subscription-heavy (3 subscriptions per publication) and publication-heavy (1 per 3). \
         RepQueries stores only publications and polls every TR = 1 s until the subscription expires \
         (10 polls; polls count as work, not as operations). TwoDB and DualDB are `silt::pubsub` over \
         valuelist indexes (leveled merges, WAL without fsync; one 16 MB memory budget per system, \
         which TwoDB's two stores share). Self-joining: a subscription also gets \
         the other live subscriptions of its cell, a publication the valid publications of the last \
         10 s. silt-dualdb-live is DualDB with live delivery on: every match is also appended to its \
         subscriber's queue in the operation's transaction, and one consumer thread holds listeners \
         for the 100 online subscribers (uid < 100), takes their deliveries and acknowledges them \
         (latency from the start of the later of the two operations; the run ends when they have \
         received every delivery their answers name). RocksDB is the storage-level peer: DualDB's layout in one store, items appended by an \
         associative merge operator that drops expired items, a compaction filter removing lists that \
         expired whole (sync off). Redis Streams is the broker peer: a throw-away redis-server on \
         loopback (append-only file, no fsync), streams S:<cell> and P:<cell> with the operation \
         times as entry ids, trimmed by MINID as items expire, one pipelined round trip per \
         operation (append + XRANGE of the window). PostgreSQL is the stand-in for the paper's broker \
         with history: tables subs and pubs on a throw-away cluster (synchronous_commit off, autovacuum \
         on), one PL/pgSQL call per operation that stores it and returns its matches, pg_notify for \
         every subscriber a PUBLISH reaches (a LISTEN connection counts them: they must equal the \
         matches), expired rows deleted once per logical second. Reported: operations per second, and \
         the matches each system reported (TwoDB, DualDB, RocksDB, Redis and PostgreSQL must agree \
         exactly; RepQueries misses what expires between polls)."
    }

    fn durability(&self) -> &'static str {
        "WAL on, no fsync per operation (Silt Durability::None, RocksDB sync=false)"
    }

    fn run(&self, scale: Scale, ctx: &Ctx) -> Result<Vec<ResultRow>> {
        let n = ops_of(scale);
        let mut rows = Vec::new();
        let all = [
            Sys::Silt(Design::RepQueries),
            Sys::Silt(Design::TwoDb),
            Sys::Silt(Design::DualDb),
            Sys::SiltLive,
            Sys::Rocks,
            Sys::Redis,
            Sys::Postgres,
        ];
        let redis = super::pubsub_redis::RedisServer::version();
        let pg_missing = super::pubsub_pg::unavailable();
        match &pg_missing {
            None => ctx.note("postgres-notify: throw-away cluster on loopback, synchronous_commit=off, autovacuum on; one PL/pgSQL call per operation, pg_notify per PUBLISH match, a LISTEN connection counting them".into()),
            Some(why) if wants(ctx, Sys::Postgres) => {
                eprintln!("note: skipping postgres-notify: {why}");
                ctx.note(format!("postgres-notify: SKIPPED: {why}"));
            }
            Some(_) => {}
        }
        match &redis {
            Some(v) => ctx.note(format!("redis-streams: {v}, appendonly yes, appendfsync no, one pipelined round trip per operation on loopback")),
            None if wants(ctx, Sys::Redis) => {
                eprintln!("note: skipping redis-streams: no redis-server on PATH");
                ctx.note("redis-streams: SKIPPED: no redis-server on PATH (bench/setup.sh installs Debian's redis-server)".into());
            }
            None => {}
        }
        for (mix, subs, pubs) in MIXES {
            let ops = operations(ctx.seed, n, subs, pubs);
            for self_join in [false, true] {
                let kind = if self_join { "self-join" } else { "simple" };
                let mut order: Vec<Sys> = all
                    .iter()
                    .copied()
                    .filter(|s| wants(ctx, *s))
                    .filter(|s| !(self_join && *s == Sys::Silt(Design::RepQueries)))
                    .filter(|s| *s != Sys::Redis || redis.is_some())
                    .filter(|s| *s != Sys::Postgres || pg_missing.is_none())
                    .collect();
                if !order.is_empty() {
                    let len = order.len();
                    order.rotate_left(ctx.run % len);
                }
                let mut exact: Option<(u64, u64, &str)> = None;
                let mut thr: Vec<(Sys, f64)> = Vec::new();
                for sys in order {
                    let scratch =
                        ScratchDir::new(&ctx.scratch, &format!("pubsub-{}", sys.label()))?;
                    let label = format!("{} {mix} {kind}", sys.label());
                    let (secs, mut t) = run_one(sys, scratch.path(), &ops, self_join, &label)?;
                    let ops_s = n as f64 / secs;
                    eprintln!(
                        "{label}: {} ops/s, {} matches, {} self-join answers, {} polls",
                        fmt_num(ops_s),
                        t.matches,
                        t.joined,
                        t.polls
                    );
                    let metric = |m: &str| format!("{mix} {kind} {m}");
                    rows.push(ResultRow::measure(
                        sys.label(),
                        &metric("throughput"),
                        "ops/s",
                        ops_s,
                    ));
                    rows.push(ResultRow::stat(
                        sys.label(),
                        &metric("matches"),
                        "pairs",
                        t.matches as f64,
                    ));
                    if !t.latencies.is_empty() {
                        let mut l = std::mem::take(&mut t.latencies);
                        l.sort_unstable();
                        let pct = |q: f64| l[((l.len() - 1) as f64 * q) as usize] as f64 / 1e6;
                        let mean = l.iter().sum::<u64>() as f64 / l.len() as f64 / 1e6;
                        eprintln!(
                            "{label}: {} deliveries to {ONLINE} online subscribers, latency mean {mean:.2} ms, p50 {:.2} ms, p99 {:.2} ms",
                            t.delivered,
                            pct(0.5),
                            pct(0.99)
                        );
                        rows.push(ResultRow::stat(
                            sys.label(),
                            &metric("deliveries online"),
                            "deliveries",
                            t.delivered as f64,
                        ));
                        for (name, v) in [("mean", mean), ("p50", pct(0.5)), ("p99", pct(0.99))] {
                            rows.push(ResultRow::measure(
                                sys.label(),
                                &metric(&format!("delivery latency {name}")),
                                "ms",
                                v,
                            ));
                        }
                    }
                    thr.push((sys, ops_s));
                    if sys != Sys::Silt(Design::RepQueries) {
                        match exact {
                            None => exact = Some((t.matches, t.joined, sys.label())),
                            Some((m, j, other)) if (m, j) != (t.matches, t.joined) => bail!(
                                "{label}: {} matches and {} self-join answers, but {other} reported {m} and {j}: the stores disagree",
                                t.matches,
                                t.joined
                            ),
                            Some(_) => {}
                        }
                    }
                }
                // DualDB against each of the others (the paper: ~10x RepQueries
                // subscription-heavy, ~3x publication-heavy; ~5% over TwoDB,
                // +20% with self-joins; the issue: ahead of every peer).
                let of = |s: Sys| thr.iter().find(|(x, _)| *x == s).map(|(_, v)| *v);
                if let Some(d) = of(Sys::Silt(Design::DualDb)) {
                    if let Some(l) = of(Sys::SiltLive) {
                        rows.push(ResultRow::new(
                            "silt-dualdb-live",
                            &format!("{mix} {kind} throughput vs silt-dualdb"),
                            "x",
                            crate::results::Kind::Ratio,
                            l / d,
                        ));
                    }
                    for other in [
                        Sys::Silt(Design::RepQueries),
                        Sys::Silt(Design::TwoDb),
                        Sys::Rocks,
                        Sys::Redis,
                        Sys::Postgres,
                    ] {
                        if let Some(o) = of(other) {
                            let mut r = ResultRow::new(
                                "silt-dualdb",
                                &format!("{mix} {kind} throughput vs {}", other.label()),
                                "x",
                                crate::results::Kind::Ratio,
                                d / o,
                            );
                            if matches!(other, Sys::Rocks | Sys::Redis | Sys::Postgres)
                                && subs > pubs
                            {
                                r = r.with_target(1.0);
                            }
                            rows.push(r);
                        }
                    }
                }
            }
        }
        ctx.note(format!(
            "pubsub: {} operations per mix, grid {GRID}x{GRID}, window ±{} s, publication life {} s, TR {} s",
            fmt_num(n as f64),
            WINDOW_MS / 1000,
            LIFE_MS / 1000,
            TR_MS / 1000
        ));
        Ok(rows)
    }
}
