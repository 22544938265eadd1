//! The LevelDB++ reproduction (seed 001 ch. 3 and appendix B; issue 7): three
//! workloads over the tweet generator of `silt::workload::tweets`:
//!
//! - [`static_wl`] `leveldbpp-static`: load N tweets, then GET, LOOKUP and
//!   RANGELOOKUP on `user_id` (not time-correlated) and `created_at`
//!   (time-correlated) at the paper's selectivities and top-K, per index kind;
//!   index sizes and write amplification (Figures 3.8-3.11);
//! - [`mixed`] `leveldbpp-mixed`: write-heavy, read-heavy and update-heavy
//!   operation mixes, mean latency per operation type over time (Figures
//!   3.12-3.15);
//! - [`bloom`] `leveldbpp-bloom`: the embedded index's bits per key vs lookup
//!   latency, false positives and size (Table B.1).
//!
//! The systems: Silt with one dataset per index kind (`none`, `embedded`,
//! `eager`, `lazy`, `composite`; every dataset indexes the same attributes
//! with indexes of that one kind), and RocksDB with the application-level
//! pattern most applications use: a primary column family (tweet id → seq ‖
//! JSON) and one composite-key column family per attribute (value ‖ tweet id →
//! seq), all written in one `WriteBatch`; a lookup scans the secondary's key
//! range, sorts the candidates by their stored sequence number, fetches the
//! primaries newest first and keeps those whose stored sequence number (and
//! attribute) still match, until k are found.
//!
//! Every answer is checked against an in-memory oracle (the k newest tweets
//! with the value, by write order): a wrong answer fails the run.

pub mod bloom;
pub mod mixed;
pub mod static_wl;

use std::{
    collections::{BTreeMap, HashMap},
    ops::Bound,
    path::Path,
    sync::Arc,
    time::Instant,
};

use anyhow::{Context, Result, bail};
use rocksdb::{
    BlockBasedOptions, Cache, ColumnFamilyDescriptor, DB, DBCompressionType, Options, WriteBatch,
    WriteOptions,
    statistics::{StatsLevel, Ticker},
};
use silt::lsm::policy::MergePolicy;
use silt::workload::SplitMix64;
use silt::workload::tweets::TweetOptions;
use silt::{
    Database, DatasetDef, DbOptions, Durability, FieldType, IndexDef, IndexKind, Query,
    QueryOptions, Value,
};

use crate::results::ResultRow;
use crate::util::percentile;

/// Silt memory budget of a dataset (all its memory components) and RocksDB's
/// write buffers (a third per column family): LevelDB's defaults, which the
/// paper ran with (a 4 MB write buffer, plus the immutable one being flushed;
/// an 8 MB block cache: the paper used none and relied on the OS cache, as
/// both systems here also do). Small memory keeps several levels in the
/// trees at the scaled-down data sizes.
pub const MEMORY: u64 = 8 << 20;
pub const BLOCK_CACHE: u64 = 8 << 20;
/// Merge policy of every Silt tree (the paper runs on LevelDB: leveled).
pub const POLICY: &str = "leveled";

/// An indexed attribute.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Attr {
    User,
    Time,
}

impl Attr {
    pub fn field(self) -> &'static str {
        match self {
            Attr::User => "user_id",
            Attr::Time => "created_at",
        }
    }
    pub fn index(self) -> &'static str {
        match self {
            Attr::User => "by_user",
            Attr::Time => "by_time",
        }
    }
    pub fn label(self) -> &'static str {
        match self {
            Attr::User => "UserID",
            Attr::Time => "CreationTime",
        }
    }
}

/// Which system: a Silt dataset with indexes of one kind (or none), or the
/// RocksDB application-level composite-key pattern.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Sys {
    Silt(Option<IndexKind>),
    Rocks,
}

impl Sys {
    pub fn label(self) -> String {
        match self {
            Sys::Silt(None) => "silt-none".into(),
            Sys::Silt(Some(k)) => format!("silt-{k}"),
            Sys::Rocks => "rocksdb-app".into(),
        }
    }
    pub fn is_silt(self) -> bool {
        matches!(self, Sys::Silt(_))
    }
}

/// Whether the user asked for this system (`--systems`).
pub fn wants(ctx: &super::Ctx, s: Sys) -> bool {
    match &ctx.systems {
        None => true,
        Some(list) => list.iter().any(|x| {
            x.eq_ignore_ascii_case(&s.label()) || (x.eq_ignore_ascii_case("silt") && s.is_silt())
        }),
    }
}

/// What a lookup returned: the ids newest first, and what it touched.
#[derive(Clone, Debug, Default)]
pub struct Found {
    pub ids: Vec<i64>,
    /// Silt query statistics (components, blocks, candidates, fetched) or
    /// RocksDB's (0, 0, index entries scanned, primaries fetched).
    pub components: u64,
    pub blocks: u64,
    pub candidates: u64,
    pub fetched: u64,
}

/// The operations the workloads drive.
pub trait Store {
    fn describe(&self) -> String;
    /// Upsert one tweet (with all its index maintenance), one transaction.
    fn put(&mut self, rec: &Value, json: &str) -> Result<()>;
    /// The tweet with this id, if any (decoded).
    fn get(&mut self, id: i64) -> Result<bool>;
    /// The k most recent tweets with `attr` in [lo, hi], newest first.
    fn lookup(&mut self, attr: Attr, lo: i64, hi: i64, k: Option<usize>) -> Result<Found>;
    /// Flush memory components and wait for merges.
    fn settle(&mut self) -> Result<()>;
    /// (tree, bytes on disk, bytes written by flushes + merges, user bytes written).
    fn trees(&self) -> Result<Vec<TreeInfo>>;
    fn close(self: Box<Self>) -> Result<()>;
}

#[derive(Clone, Debug, Default)]
pub struct TreeInfo {
    /// primary, by_user, by_time (or "all" when a system can't split).
    pub name: String,
    pub disk_bytes: u64,
    pub written_bytes: u64,
    pub user_bytes: u64,
    pub components: u64,
    pub merges: u64,
}

/// Silt: dataset `tweets` (primary key `id`), indexes `by_user` / `by_time` of one kind.
pub struct SiltStore {
    kind: Option<IndexKind>,
    attrs: Vec<Attr>,
    bits: Option<f64>,
    options: String,
    db: Option<Database>,
    ds: Option<Arc<silt::Dataset>>,
}

impl SiltStore {
    pub fn open(
        dir: &Path,
        kind: Option<IndexKind>,
        attrs: &[Attr],
        bits_per_key: Option<f64>,
    ) -> Result<Self> {
        let opts = DbOptions {
            block_cache_bytes: BLOCK_CACHE,
            durability: Durability::None,
            ..Default::default()
        };
        let options = format!("{opts:?}");
        let db = Database::open(dir, opts)
            .with_context(|| format!("opening Silt at {}", dir.display()))?;
        let policy = MergePolicy::parse(POLICY)?;
        db.create_dataset(
            DatasetDef::new("tweets", &["id"])
                .field("id", FieldType::Int)
                .field("user_id", FieldType::Int)
                .field("created_at", FieldType::Int)
                .memory_budget(MEMORY)
                .partitions(1)
                .policy(policy.clone()),
        )
        .context("creating Silt dataset tweets")?;
        if let Some(k) = kind {
            for a in attrs {
                let mut def = IndexDef::recency(a.index(), k, a.field()).policy(policy.clone());
                if k == IndexKind::Embedded {
                    def.options.bits_per_key = bits_per_key;
                }
                db.create_index("tweets", def)
                    .with_context(|| format!("creating Silt {k} index {}", a.index()))?;
            }
        }
        let ds = db.dataset("tweets")?;
        Ok(Self {
            kind,
            attrs: attrs.to_vec(),
            bits: bits_per_key,
            options,
            db: Some(db),
            ds: Some(ds),
        })
    }

    fn ds(&self) -> Result<&Arc<silt::Dataset>> {
        self.ds.as_ref().context("Silt dataset closed")
    }
}

impl Store for SiltStore {
    fn describe(&self) -> String {
        format!(
            "Silt (this repo): dataset tweets(id int primary key, user_id int, created_at int, + the other tweet fields undeclared), 1 partition, \
             {} index(es) {} on {}, every tree merge policy {POLICY}, memory budget {} MiB (all memory components of the dataset), block cache {} MiB, \
             lz4, 4 KiB blocks{}, Durability::None (WAL on, no fsync per write), one upsert (record-level transaction) per PUT; \
             lookups = Query::Recent {{ lo, hi, k }} (records fetched and validated); {}",
            self.kind.map_or("no".to_string(), |k| k.to_string()),
            self.attrs
                .iter()
                .map(|a| a.index())
                .collect::<Vec<_>>()
                .join(", "),
            self.attrs
                .iter()
                .map(|a| a.field())
                .collect::<Vec<_>>()
                .join(", "),
            MEMORY >> 20,
            BLOCK_CACHE >> 20,
            match (self.kind, self.bits) {
                (Some(IndexKind::Embedded), b) => format!(
                    ", embedded bloom {} bits per key",
                    b.unwrap_or(silt::storage::block_filters::DEFAULT_BITS_PER_KEY)
                ),
                _ => String::new(),
            },
            self.options
        )
    }

    fn put(&mut self, rec: &Value, _json: &str) -> Result<()> {
        self.ds()?.upsert(rec.clone()).context("Silt upsert")
    }

    fn get(&mut self, id: i64) -> Result<bool> {
        Ok(self
            .ds()?
            .get(&[Value::Int(id)])
            .context("Silt get")?
            .is_some())
    }

    fn lookup(&mut self, attr: Attr, lo: i64, hi: i64, k: Option<usize>) -> Result<Found> {
        let q = Query::Recent {
            lo: Bound::Included(vec![Value::Int(lo)]),
            hi: Bound::Included(vec![Value::Int(hi)]),
            k,
        };
        let ds = self.ds()?.clone();
        let mut r = ds
            .query(attr.index(), &q, QueryOptions::default())
            .context("Silt recent query")?;
        let mut ids = Vec::new();
        for h in r.by_ref() {
            let h = h.context("Silt recent query")?;
            match h.pk.as_slice() {
                [Value::Int(id)] => ids.push(*id),
                other => bail!("Silt returned primary key {other:?}"),
            }
            if h.record.is_none() {
                bail!("Silt recent hit without its record");
            }
        }
        let s = r.stats();
        Ok(Found {
            ids,
            components: s.components,
            blocks: s.blocks,
            candidates: s.candidates,
            fetched: s.fetched,
        })
    }

    fn settle(&mut self) -> Result<()> {
        let db = self.db.as_ref().context("closed")?;
        db.flush().context("Silt flush")?;
        db.wait_idle().context("Silt wait_idle")
    }

    fn trees(&self) -> Result<Vec<TreeInfo>> {
        Ok(self
            .ds()?
            .stats()
            .indexes
            .iter()
            .map(|t| TreeInfo {
                name: t
                    .name
                    .rsplit('/')
                    .next()
                    .unwrap_or(t.name.as_str())
                    .to_string(),
                disk_bytes: t.disk_bytes,
                written_bytes: t.bytes_flushed + t.bytes_merged,
                user_bytes: t.user_bytes_written,
                components: t.components.len() as u64,
                merges: t.merges,
            })
            .collect())
    }

    fn close(mut self: Box<Self>) -> Result<()> {
        drop(self.ds.take());
        if let Some(db) = self.db.take() {
            db.close().context("closing Silt")?;
        }
        Ok(())
    }
}

/// RocksDB with the application-level composite-key secondary indexes.
pub struct RocksApp {
    db: DB,
    opts: Options,
    wo: WriteOptions,
    seq: u64,
    attrs: Vec<Attr>,
    _cache: Cache,
}

const PRIMARY_CF: &str = "default";

/// Order-preserving encoding of an i64.
fn enc(x: i64) -> [u8; 8] {
    ((x as u64) ^ (1 << 63)).to_be_bytes()
}

impl RocksApp {
    pub fn open(dir: &Path, attrs: &[Attr]) -> Result<Self> {
        let cache = Cache::new_lru_cache(BLOCK_CACHE as usize);
        let cf_opts = || {
            let mut table = BlockBasedOptions::default();
            table.set_block_cache(&cache);
            table.set_bloom_filter(10.0, false);
            table.set_block_size(4096);
            let mut o = Options::default();
            o.set_block_based_table_factory(&table);
            o.set_write_buffer_size((MEMORY / 3) as usize);
            o.set_max_write_buffer_number(2);
            o.set_compression_type(DBCompressionType::Lz4);
            o
        };
        let mut opts = cf_opts();
        opts.create_if_missing(true);
        opts.create_missing_column_families(true);
        opts.set_max_background_jobs(2);
        opts.enable_statistics();
        opts.set_statistics_level(StatsLevel::ExceptTimers);
        let mut cfs = vec![ColumnFamilyDescriptor::new(PRIMARY_CF, cf_opts())];
        for a in attrs {
            cfs.push(ColumnFamilyDescriptor::new(a.index(), cf_opts()));
        }
        let db = DB::open_cf_descriptors(&opts, dir, cfs)
            .with_context(|| format!("opening RocksDB at {}", dir.display()))?;
        let mut wo = WriteOptions::default();
        wo.set_sync(false);
        Ok(Self {
            db,
            opts,
            wo,
            seq: 0,
            attrs: attrs.to_vec(),
            _cache: cache,
        })
    }

    fn cf(&self, name: &str) -> Result<&rocksdb::ColumnFamily> {
        self.db
            .cf_handle(name)
            .with_context(|| format!("RocksDB column family {name}"))
    }

    fn int_property(&self, name: &str) -> Result<u64> {
        self.db
            .property_int_value(name)?
            .with_context(|| format!("RocksDB property {name}"))
    }
}

/// The value of `field` in a tweet's JSON (what an application would do).
fn json_int(v: &serde_json::Value, field: &str) -> Option<i64> {
    v.get(field).and_then(serde_json::Value::as_i64)
}

impl Store for RocksApp {
    fn describe(&self) -> String {
        format!(
            "RocksDB {} as an application would index it: column family default = tweet id -> seq ‖ tweet JSON, one column family per indexed attribute \
             ({}) = value ‖ tweet id -> seq, all three written in one WriteBatch per PUT (no read before write: stale entries stay and are filtered at lookup); \
             lookup = scan of the value range in the secondary, candidates sorted by seq (newest first), primaries fetched and parsed (serde_json), kept when \
             their seq and attribute still match, until k; WAL on, sync=false; bloom 10 bits/key, write buffer {:.1} MiB per column family, LRU block cache {} MiB, \
             lz4, 4 KiB blocks, 2 background jobs, statistics (tickers) on",
            crate::machine::rocksdb_version(),
            self.attrs
                .iter()
                .map(|a| a.index())
                .collect::<Vec<_>>()
                .join(", "),
            (MEMORY / 3) as f64 / f64::from(1 << 20),
            BLOCK_CACHE >> 20
        )
    }

    fn put(&mut self, rec: &Value, json: &str) -> Result<()> {
        self.seq += 1;
        let id = rec.get("id").and_then(Value::as_i64).context("tweet id")?;
        let mut val = Vec::with_capacity(8 + json.len());
        val.extend_from_slice(&self.seq.to_be_bytes());
        val.extend_from_slice(json.as_bytes());
        let mut b = WriteBatch::default();
        b.put_cf(self.cf(PRIMARY_CF)?, enc(id), &val);
        for a in &self.attrs {
            if let Some(x) = rec.get(a.field()).and_then(Value::as_i64) {
                let mut key = [0u8; 16];
                key[..8].copy_from_slice(&enc(x));
                key[8..].copy_from_slice(&enc(id));
                b.put_cf(self.cf(a.index())?, key, self.seq.to_be_bytes());
            }
        }
        self.db.write_opt(b, &self.wo).context("RocksDB write")
    }

    fn get(&mut self, id: i64) -> Result<bool> {
        match self.db.get_pinned_cf(self.cf(PRIMARY_CF)?, enc(id))? {
            Some(v) => {
                let j: serde_json::Value =
                    serde_json::from_slice(&v[8..]).context("RocksDB record JSON")?;
                Ok(std::hint::black_box(j).is_object())
            }
            None => Ok(false),
        }
    }

    fn lookup(&mut self, attr: Attr, lo: i64, hi: i64, k: Option<usize>) -> Result<Found> {
        let mut cands: Vec<(u64, i64)> = Vec::new();
        let (lo_k, hi_k) = (enc(lo), enc(hi));
        let mut it = self.db.raw_iterator_cf(self.cf(attr.index())?);
        it.seek(lo_k);
        while it.valid() {
            let (Some(key), Some(v)) = (it.key(), it.value()) else {
                break;
            };
            if key.len() != 16 || key[..8] > hi_k[..] {
                break;
            }
            let id = (u64::from_be_bytes(key[8..16].try_into()?) ^ (1 << 63)) as i64;
            cands.push((u64::from_be_bytes(v[..8].try_into()?), id));
            it.next();
        }
        it.status().context("RocksDB scan")?;
        drop(it);
        cands.sort_unstable_by(|a, b| b.cmp(a));
        let mut f = Found {
            candidates: cands.len() as u64,
            ..Found::default()
        };
        let primary = self.cf(PRIMARY_CF)?;
        for (seq, id) in cands {
            if k.is_some_and(|k| f.ids.len() >= k) {
                break;
            }
            f.fetched += 1;
            let Some(v) = self.db.get_pinned_cf(primary, enc(id))? else {
                continue;
            };
            if u64::from_be_bytes(v[..8].try_into()?) != seq {
                continue; // a newer write of this tweet exists
            }
            let j: serde_json::Value = serde_json::from_slice(&v[8..])?;
            if json_int(&j, attr.field()).is_some_and(|x| (lo..=hi).contains(&x)) {
                f.ids.push(id);
            }
        }
        Ok(f)
    }

    fn settle(&mut self) -> Result<()> {
        for name in std::iter::once(PRIMARY_CF).chain(self.attrs.iter().map(|a| a.index())) {
            self.db.flush_cf(self.cf(name)?).context("RocksDB flush")?;
        }
        let start = Instant::now();
        loop {
            let busy = self.int_property("rocksdb.num-running-compactions")?
                + self.int_property("rocksdb.compaction-pending")?
                + self.int_property("rocksdb.num-running-flushes")?
                + self.int_property("rocksdb.mem-table-flush-pending")?;
            if busy == 0 {
                return Ok(());
            }
            if start.elapsed().as_secs() > 3600 {
                bail!("RocksDB still compacting after an hour");
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }

    fn trees(&self) -> Result<Vec<TreeInfo>> {
        let mut out = Vec::new();
        for name in std::iter::once(PRIMARY_CF).chain(self.attrs.iter().map(|a| a.index())) {
            let cf = self.cf(name)?;
            let disk = self
                .db
                .property_int_value_cf(cf, "rocksdb.total-sst-files-size")?
                .unwrap_or(0);
            out.push(TreeInfo {
                name: if name == PRIMARY_CF {
                    "primary".into()
                } else {
                    name.into()
                },
                disk_bytes: disk,
                ..TreeInfo::default()
            });
        }
        // Flush + compaction bytes are only known for the whole database.
        out.push(TreeInfo {
            name: "all".into(),
            disk_bytes: 0,
            written_bytes: self.opts.get_ticker_count(Ticker::FlushWriteBytes)
                + self.opts.get_ticker_count(Ticker::CompactWriteBytes),
            user_bytes: self.opts.get_ticker_count(Ticker::BytesWritten),
            ..TreeInfo::default()
        });
        Ok(out)
    }

    fn close(self: Box<Self>) -> Result<()> {
        drop(self);
        Ok(())
    }
}

pub fn open_store(
    sys: Sys,
    dir: &Path,
    attrs: &[Attr],
    bits: Option<f64>,
) -> Result<Box<dyn Store>> {
    Ok(match sys {
        Sys::Silt(k) => Box::new(SiltStore::open(dir, k, attrs, bits)?),
        Sys::Rocks => Box::new(RocksApp::open(dir, attrs)?),
    })
}

/// The tweet generator options of a run.
pub fn tweet_opts(seed: u64, count: u64) -> TweetOptions {
    TweetOptions {
        seed,
        count,
        ..TweetOptions::default()
    }
}

/// A tweet and its JSON (for RocksDB, made outside the timed call).
pub fn with_json(t: Value) -> (Value, String) {
    let j = silt::value::to_json(&t).to_string();
    (t, j)
}

pub fn int_field(t: &Value, f: &str) -> i64 {
    t.get(f).and_then(Value::as_i64).unwrap_or(i64::MIN)
}

/// The oracle: which tweet has which attribute values and recency.
#[derive(Default)]
pub struct Oracle {
    /// id -> (user, time, seq of the last write)
    cur: HashMap<i64, (i64, i64, u64)>,
    /// attribute value -> seq -> id (live versions only)
    by: [BTreeMap<i64, BTreeMap<u64, i64>>; 2],
    seq: u64,
}

impl Oracle {
    pub fn put(&mut self, id: i64, user: i64, time: i64) {
        self.seq += 1;
        if let Some((u, t, s)) = self.cur.insert(id, (user, time, self.seq)) {
            for (i, v) in [u, t].into_iter().enumerate() {
                if let Some(m) = self.by[i].get_mut(&v) {
                    m.remove(&s);
                    if m.is_empty() {
                        self.by[i].remove(&v);
                    }
                }
            }
        }
        self.by[0].entry(user).or_default().insert(self.seq, id);
        self.by[1].entry(time).or_default().insert(self.seq, id);
    }

    /// The k most recent ids with the attribute in [lo, hi], newest first.
    pub fn lookup(&self, attr: Attr, lo: i64, hi: i64, k: Option<usize>) -> Vec<i64> {
        let m = &self.by[match attr {
            Attr::User => 0,
            Attr::Time => 1,
        }];
        let mut all: Vec<(u64, i64)> = m
            .range(lo..=hi)
            .flat_map(|(_, s)| s.iter().map(|(&q, &id)| (q, id)))
            .collect();
        all.sort_unstable_by(|a, b| b.cmp(a));
        all.into_iter()
            .take(k.unwrap_or(usize::MAX))
            .map(|x| x.1)
            .collect()
    }

    /// Distinct values of an attribute, ascending.
    pub fn values(&self, attr: Attr) -> Vec<i64> {
        self.by[match attr {
            Attr::User => 0,
            Attr::Time => 1,
        }]
        .keys()
        .copied()
        .collect()
    }
}

/// Latency statistics of one operation kind, in microseconds.
pub fn lat_rows(sys: &str, metric: &str, lat_ns: &mut [u32]) -> Vec<ResultRow> {
    lat_ns.sort_unstable();
    let mean = lat_ns.iter().map(|&x| f64::from(x)).sum::<f64>() / lat_ns.len().max(1) as f64;
    vec![
        ResultRow::measure(sys, &format!("{metric} mean"), "us", mean / 1e3),
        ResultRow::stat(
            sys,
            &format!("{metric} p50"),
            "us",
            percentile(lat_ns, 50.0) / 1e3,
        ),
        ResultRow::stat(
            sys,
            &format!("{metric} p99"),
            "us",
            percentile(lat_ns, 99.0) / 1e3,
        ),
    ]
}

pub fn elapsed_ns(t: Instant) -> u32 {
    u32::try_from(t.elapsed().as_nanos()).unwrap_or(u32::MAX)
}

pub fn rng(seed: u64, salt: u64) -> SplitMix64 {
    SplitMix64::new(seed.wrapping_mul(0x9E37_79B9).wrapping_add(salt))
}

/// Checks a store's answer against the oracle's.
pub fn check(who: &str, what: &str, got: &[i64], want: &[i64]) -> Result<()> {
    if got != want {
        let show = |v: &[i64]| {
            let head: Vec<String> = v.iter().take(8).map(|x| x.to_string()).collect();
            format!(
                "{} ids [{}{}]",
                v.len(),
                head.join(", "),
                if v.len() > 8 { ", ..." } else { "" }
            )
        };
        bail!(
            "{who}: {what} returned {} but the oracle (k newest by write order) says {}",
            show(got),
            show(want)
        );
    }
    Ok(())
}

/// Rows describing a store's trees after a load: disk bytes per tree and
/// write amplification (bytes written by flushes + merges / user bytes).
pub fn tree_rows(sys: &str, trees: &[TreeInfo], ingested: u64, n: u64) -> Vec<ResultRow> {
    let mut rows = Vec::new();
    let mut written = 0u64;
    let mut disk = 0u64;
    for t in trees {
        written += t.written_bytes;
        disk += t.disk_bytes;
        if t.name != "all" {
            rows.push(ResultRow::measure(
                sys,
                &format!("size {}", t.name),
                "MB",
                t.disk_bytes as f64 / 1e6,
            ));
        }
        if t.name != "all" && (t.written_bytes > 0 || t.user_bytes > 0) {
            rows.push(ResultRow::stat(
                sys,
                &format!("{} bytes written by flush+merge", t.name),
                "MB",
                t.written_bytes as f64 / 1e6,
            ));
            rows.push(ResultRow::stat(
                sys,
                &format!("{} bytes written by flush+merge per tweet", t.name),
                "bytes",
                t.written_bytes as f64 / n.max(1) as f64,
            ));
            rows.push(ResultRow::stat(
                sys,
                &format!("{} user bytes (memtable writes)", t.name),
                "MB",
                t.user_bytes as f64 / 1e6,
            ));
            if t.user_bytes > 0 {
                rows.push(ResultRow::stat(
                    sys,
                    &format!(
                        "{} write amplification (flush+merge / its user bytes)",
                        t.name
                    ),
                    "x",
                    t.written_bytes as f64 / t.user_bytes as f64,
                ));
            }
            rows.push(ResultRow::stat(
                sys,
                &format!("{} components", t.name),
                "count",
                t.components as f64,
            ));
            rows.push(ResultRow::stat(
                sys,
                &format!("{} merges", t.name),
                "count",
                t.merges as f64,
            ));
        }
    }
    rows.push(ResultRow::measure(
        sys,
        "size total",
        "MB",
        disk as f64 / 1e6,
    ));
    rows.push(ResultRow::measure(
        sys,
        "write amplification (flush+merge bytes / tweet JSON bytes)",
        "x",
        written as f64 / ingested.max(1) as f64,
    ));
    rows
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn enc_preserves_order() {
        let xs = [i64::MIN, -5, -1, 0, 1, 7, i64::MAX];
        for w in xs.windows(2) {
            assert!(enc(w[0]) < enc(w[1]), "{} < {}", w[0], w[1]);
        }
    }

    #[test]
    fn oracle_ranks_by_last_write_and_drops_stale_values() {
        let mut o = Oracle::default();
        o.put(1, 10, 100);
        o.put(2, 10, 100);
        o.put(3, 20, 101);
        assert_eq!(o.lookup(Attr::User, 10, 10, None), vec![2, 1]);
        assert_eq!(o.lookup(Attr::User, 10, 10, Some(1)), vec![2]);
        // Tweet 1 moves to user 20 and becomes the newest there.
        o.put(1, 20, 100);
        assert_eq!(o.lookup(Attr::User, 10, 10, None), vec![2]);
        assert_eq!(o.lookup(Attr::User, 10, 20, None), vec![1, 3, 2]);
        assert_eq!(o.lookup(Attr::Time, 100, 100, Some(5)), vec![1, 2]);
        assert_eq!(o.values(Attr::User), vec![10, 20]);
    }

    #[test]
    fn rocks_app_lookups_skip_stale_entries() {
        let dir = crate::util::ScratchDir::new(
            &std::env::temp_dir(),
            &format!("silt-bench-lpp-{}", std::process::id()),
        )
        .unwrap();
        let mut s = RocksApp::open(dir.path(), &[Attr::User, Attr::Time]).unwrap();
        let tweet = |id: i64, u: i64| {
            Value::Object(vec![
                ("id".into(), Value::Int(id)),
                ("user_id".into(), Value::Int(u)),
                ("created_at".into(), Value::Int(1000 + id)),
            ])
        };
        for (id, u) in [(1, 5), (2, 5), (3, 6), (1, 6)] {
            let (t, j) = with_json(tweet(id, u));
            s.put(&t, &j).unwrap();
        }
        assert_eq!(s.lookup(Attr::User, 5, 5, None).unwrap().ids, vec![2]);
        assert_eq!(s.lookup(Attr::User, 6, 6, None).unwrap().ids, vec![1, 3]);
        assert_eq!(s.lookup(Attr::User, 5, 6, Some(2)).unwrap().ids, vec![1, 3]);
        assert_eq!(
            s.lookup(Attr::Time, 1001, 1003, None).unwrap().ids,
            vec![1, 3, 2]
        );
        assert!(s.get(3).unwrap());
        assert!(!s.get(4).unwrap());
    }
}
