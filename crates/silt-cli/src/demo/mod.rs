//! `silt demo`: a guided tour of the engine on a generated data set of
//! geotagged tweet-like records: the native API first, then the same
//! questions through SQL in-process (checked against the native answers),
//! then one through `silt serve` over the PostgreSQL wire protocol.

mod server;
mod sql;

use crate::describe::describe;
use crate::error::{CliError, CliResult};
use crate::index::index_totals;
use crate::load::spinner_style;
use crate::query::stats_text;
use crate::stats::{self, Totals};
use crate::util::{bytes, count, duration, mb_per_sec, plural, rate};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use silt::lsm::policy::MergePolicy;
use silt::{
    Database, Dataset, DatasetDef, DbOptions, FieldType, Geometry, IndexDef, Query, QueryHit,
    QueryOptions, ReconcileOption, Value,
};
use std::ops::Bound;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

pub const DATASET: &str = "tweets";
/// Records generated (and inserted) per batch.
const BATCH: usize = 10_000;
const LOOKUPS: u64 = 1_000;
/// Seconds since the epoch of the first tweet (2023-11-14).
const FIRST_TWEET: i64 = 1_700_000_000;
const USERS: f64 = 50_000.0;

/// Cities the tweets cluster around: (name, longitude, latitude).
const CITIES: [(&str, f64, f64); 20] = [
    ("New York", -74.0060, 40.7128),
    ("Los Angeles", -118.2437, 34.0522),
    ("Chicago", -87.6298, 41.8781),
    ("Mexico City", -99.1332, 19.4326),
    ("São Paulo", -46.6333, -23.5505),
    ("Buenos Aires", -58.3816, -34.6037),
    ("London", -0.1276, 51.5072),
    ("Paris", 2.3522, 48.8566),
    ("Berlin", 13.4050, 52.5200),
    ("Madrid", -3.7038, 40.4168),
    ("Rome", 12.4964, 41.9028),
    ("Istanbul", 28.9784, 41.0082),
    ("Cairo", 31.2357, 30.0444),
    ("Lagos", 3.3792, 6.5244),
    ("Mumbai", 72.8777, 19.0760),
    ("Delhi", 77.1025, 28.7041),
    ("Beijing", 116.4074, 39.9042),
    ("Seoul", 126.9780, 37.5665),
    ("Tokyo", 139.6917, 35.6895),
    ("Sydney", 151.2093, -33.8688),
];

const WORDS: [&str; 64] = [
    "the", "a", "coffee", "morning", "traffic", "rain", "sun", "game", "tonight", "love", "new",
    "city", "park", "music", "concert", "food", "pizza", "tacos", "ramen", "train", "late",
    "again", "weekend", "friends", "work", "meeting", "deadline", "beach", "walk", "dog", "cat",
    "photo", "sunset", "view", "best", "worst", "ever", "today", "tomorrow", "happy", "tired",
    "busy", "great", "day", "night", "street", "market", "museum", "art", "book", "read", "run",
    "gym", "team", "win", "lost", "storm", "snow", "hot", "cold", "#lsm", "#data", "#travel",
    "#food",
];

pub struct DemoOptions<'a> {
    pub records: u64,
    pub dir: &'a Path,
    pub cache_mb: u64,
    pub partitions: u32,
    pub memory_mb: u64,
    pub policy: Option<&'a str>,
}

/// Deterministic generator of tweet-like records.
struct TweetGen {
    rng: StdRng,
    created_at: i64,
    last_id: i64,
}

impl TweetGen {
    fn new(seed: u64) -> TweetGen {
        TweetGen {
            rng: StdRng::seed_from_u64(seed),
            created_at: FIRST_TWEET,
            last_id: 0,
        }
    }

    /// The next tweet. Ids increase with gaps (1 to 3), like real tweet ids
    /// are sparse, so that lookups of absent ids fall inside the key range.
    fn next(&mut self) -> (i64, Value) {
        self.last_id += self.rng.random_range(1..=3);
        let id = self.last_id;
        (id, self.tweet(id))
    }

    fn tweet(&mut self, id: i64) -> Value {
        let r = &mut self.rng;
        // Power-law-ish skew: a few users write most tweets.
        let u: f64 = r.random();
        let user_id = 1 + (u * u * u * USERS) as i64;
        self.created_at += r.random_range(0..=3);
        let n_words = r.random_range(4..=14);
        let mut text = String::with_capacity(n_words * 7);
        for i in 0..n_words {
            if i > 0 {
                text.push(' ');
            }
            text.push_str(WORDS[r.random_range(0..WORDS.len())]);
        }
        // Big cities get more tweets: favour the start of the list a little.
        let c = r
            .random_range(0..CITIES.len())
            .min(r.random_range(0..CITIES.len() * 2));
        let (_, lon, lat) = CITIES[c.min(CITIES.len() - 1)];
        let mut jitter = || -> f64 {
            // Sum of three uniforms: a bell around 0, within ±0.45 degrees.
            (r.random::<f64>() + r.random::<f64>() + r.random::<f64>() - 1.5) * 0.3
        };
        let lon = round5(lon + jitter());
        let lat = round5(lat + jitter());
        Value::Object(vec![
            ("id".into(), Value::Int(id)),
            ("user_id".into(), Value::Int(user_id)),
            ("created_at".into(), Value::Int(self.created_at)),
            ("text".into(), Value::String(text)),
            ("loc".into(), Value::Geometry(Geometry::point(lon, lat))),
        ])
    }
}

fn round5(x: f64) -> f64 {
    (x * 1e5).round() / 1e5
}

/// Remove `dir` if it is absent, empty or a Silt database nobody holds;
/// refuse anything else, so a mistyped `--dir` cannot wipe unrelated files.
fn wipe(dir: &Path) -> CliResult<()> {
    if !dir.exists() {
        return Ok(());
    }
    let fail = |e: std::io::Error| CliError::Failed(format!("cannot wipe {}: {e}", dir.display()));
    if !dir.is_dir() {
        return Err(CliError::Usage(format!(
            "{} exists and is not a directory; choose another --dir",
            dir.display()
        )));
    }
    let empty = std::fs::read_dir(dir).map_err(fail)?.next().is_none();
    let lock = dir.join("LOCK");
    let is_db = dir.join("catalog.json").exists() || lock.exists();
    if !empty && !is_db {
        return Err(CliError::Usage(format!(
            "refusing to wipe {}: it is not empty and does not look like a Silt database; choose another --dir",
            dir.display()
        )));
    }
    if lock.exists() {
        let f = std::fs::OpenOptions::new()
            .write(true)
            .open(&lock)
            .map_err(fail)?;
        match f.try_lock() {
            Ok(()) => {}
            Err(std::fs::TryLockError::WouldBlock) => {
                return Err(CliError::Usage(format!(
                    "{} is open in another process (is another demo running?); close it or choose another --dir",
                    dir.display()
                )));
            }
            Err(std::fs::TryLockError::Error(e)) => return Err(fail(e)),
        }
    }
    std::fs::remove_dir_all(dir).map_err(fail)
}

fn step(n: u32, title: &str) {
    println!("\n{n}. {title}");
}

fn footprint(ds: &Dataset) -> Totals {
    Totals::of(&ds.stats().indexes)
}

pub fn run(o: &DemoOptions) -> CliResult<()> {
    let total_start = Instant::now();
    if o.records == 0 {
        return Err(CliError::Usage("--records must be at least 1".into()));
    }
    let n = o.records;
    let n_usize = usize::try_from(n)
        .ok()
        .filter(|&n| n <= 1 << 40)
        .ok_or_else(|| CliError::Usage(format!("--records {n} is too large")))?;
    wipe(o.dir)?;
    let cache_bytes = o
        .cache_mb
        .checked_mul(1 << 20)
        .ok_or_else(|| CliError::Usage(format!("--cache-mb {} is too large", o.cache_mb)))?;
    let memory_budget = o
        .memory_mb
        .checked_mul(1 << 20)
        .ok_or_else(|| CliError::Usage(format!("--memory-mb {} is too large", o.memory_mb)))?;
    let policy = match o.policy {
        Some(p) => MergePolicy::parse(p)?,
        None => MergePolicy::default(),
    };
    println!(
        "Silt demo: {} geotagged tweets in {}",
        count(n),
        o.dir.display()
    );

    // 1. Create.
    let db = Arc::new(Database::open(
        o.dir,
        DbOptions {
            block_cache_bytes: cache_bytes,
            ..DbOptions::default()
        },
    )?);
    let def = DatasetDef::new(DATASET, &["id"])
        .field("id", FieldType::Int)
        .field("user_id", FieldType::Int)
        .field("created_at", FieldType::Int)
        .field("text", FieldType::String)
        .field("loc", FieldType::Point)
        .partitions(o.partitions)
        .memory_budget(memory_budget)
        .policy(policy);
    let ds = db.create_dataset(def)?;
    step(1, "Create a dataset");
    println!(
        "   `{DATASET}`: key id; fields user_id:int, created_at:int, text:string, loc:point (longitude, latitude)"
    );
    println!(
        "   {}, memory budget {} (small on purpose, so that the load flushes and merges), merge policy {}",
        plural(u64::from(o.partitions), "partition", "partitions"),
        bytes(memory_budget),
        ds.def().policy
    );
    println!("   sample record: {}", TweetGen::new(42).next().1);

    // 2. Load.
    step(
        2,
        "Load (insert) the records: each one a durable transaction (group commit)",
    );
    let pb = ProgressBar::with_draw_target(Some(n), ProgressDrawTarget::stderr_with_hz(10))
        .with_style(
            ProgressStyle::with_template(
                "   {spinner} {elapsed_precise} [{bar:30}] {human_pos}/{human_len} records ({msg}, eta {eta})",
            )
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
        )
        .with_message("starting");
    let mut generator = TweetGen::new(42);
    let mut gen_time = Duration::ZERO;
    let mut ins_time = Duration::ZERO;
    let mut batch = Vec::with_capacity(BATCH);
    let mut ids: Vec<i64> = Vec::with_capacity(n_usize);
    while ids.len() < n_usize {
        let t = Instant::now();
        while ids.len() < n_usize && batch.len() < BATCH {
            let (id, rec) = generator.next();
            ids.push(id);
            batch.push(rec);
        }
        gen_time += t.elapsed();
        let t = Instant::now();
        // Each record is its own transaction; the batch shares fsyncs of the
        // write-ahead log (group commit) and waits once for durability.
        let report = ds.write_batch(std::mem::take(&mut batch), silt::BatchOptions::default())?;
        if let Some((_, e)) = report.failed.into_iter().next() {
            return Err(e.into());
        }

        ins_time += t.elapsed();
        pb.set_message(format!("{} records/s", rate(ids.len() as u64, ins_time)));
        pb.set_position(ids.len() as u64);
    }
    pb.finish_and_clear();
    let user_bytes = footprint(&ds).user_bytes;
    println!(
        "   inserted {} in {}: {} records/s, {} MB/s of encoded records (generating them took another {})",
        plural(n, "record", "records"),
        duration(ins_time),
        rate(n, ins_time),
        mb_per_sec(user_bytes, ins_time),
        duration(gen_time)
    );
    let t = Instant::now();
    ds.flush()?;
    let flush_time = t.elapsed();
    let t = Instant::now();
    db.wait_idle()?;
    let idle_time = t.elapsed();
    let f = footprint(&ds);
    println!(
        "   final flush {}, background merges drained in {}",
        duration(flush_time),
        duration(idle_time)
    );
    println!(
        "   on disk: {} ({}), {}; {} flushes and {} merges so far, write amplification {:.2}",
        plural(f.components, "component", "components"),
        f.level_summary(),
        bytes(f.disk_bytes),
        count(f.flushes),
        count(f.merges),
        f.write_amplification()
    );

    // 3. Point lookups.
    step(3, "Point lookups");
    let mut rng = StdRng::seed_from_u64(7);
    let before = footprint(&ds);
    let (found, lat) = lookups(&ds, LOOKUPS, || ids[rng.random_range(0..ids.len())])?;
    let after = footprint(&ds);
    println!(
        "   {} random existing ids: {} found; {} lookups/s, mean {:.1} µs, p99 {:.1} µs; {:.2} components probed per lookup",
        count(LOOKUPS),
        count(found),
        rate(LOOKUPS, lat.total),
        lat.mean_us,
        lat.p99_us,
        probes_per_get(&before, &after)
    );
    let before = after;
    let (found, lat) = lookups(&ds, LOOKUPS, || absent_id(&ids, &mut rng))?;
    let after = footprint(&ds);
    println!(
        "   {} absent ids (in the gaps between ids): {} found; {} lookups/s, mean {:.1} µs; bloom filters ruled out {} component probes ({} false positives)",
        count(LOOKUPS),
        count(found),
        rate(LOOKUPS, lat.total),
        lat.mean_us,
        count(after.bloom_negatives - before.bloom_negatives),
        count(after.bloom_false_positives - before.bloom_false_positives)
    );

    // 4. Range scans.
    step(4, "Range scans (by primary key)");
    let at = |i: usize| ids[i.min(ids.len() - 1)];
    let ranges = [
        (at(999), at(1008)),
        (at(ids.len() / 2), at(ids.len() / 2 + 4999)),
    ];
    for (lo, hi) in ranges {
        range_scan(&ds, Bound::Included(lo), Bound::Included(hi), 3)?;
    }
    range_scan(&ds, Bound::Unbounded, Bound::Unbounded, 0)?;

    // 5. Secondary indexes.
    step(
        5,
        "Secondary indexes: an R-tree on the location, a keyword index on the text",
    );
    secondary_indexes(&db, &ds)?;

    // 6. Delete.
    step(6, "Delete, then get");
    let victim = at(41);
    let t = Instant::now();
    let existed = ds.delete(&[Value::Int(victim)])?;
    let del_time = t.elapsed();
    println!(
        "   delete id {victim}: {} ({})",
        if existed { "deleted" } else { "was not there" },
        duration(del_time)
    );
    let got = ds.get(&[Value::Int(victim)])?;
    println!(
        "   get id {victim}: {}",
        match got {
            Some(v) => format!("still there?! {v}"),
            None => "not found (an antimatter entry in memory hides the older version on disk)"
                .to_owned(),
        }
    );

    // 7. Upsert.
    step(7, "Upsert (replace a record)");
    let target = at(42);
    if let Some(old) = ds.get(&[Value::Int(target)])? {
        println!("   before: {old}");
    }
    let mut replacement = generator.tweet(target);
    if let Value::Object(fields) = &mut replacement {
        for (k, v) in fields.iter_mut() {
            if k == "text" {
                *v = Value::from("edited: this tweet was replaced by an upsert #lsm");
            }
        }
    }
    ds.upsert(replacement)?;
    match ds.get(&[Value::Int(target)])? {
        Some(v) => println!("   after:  {v}"),
        None => println!("   after:  not found?!"),
    }

    // 8. Compact.
    step(8, "Compact (merge every partition into one component)");
    let before = footprint(&ds);
    let pb = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr_with_hz(10))
        .with_style(spinner_style())
        .with_message("compacting");
    pb.enable_steady_tick(Duration::from_millis(100));
    let t = Instant::now();
    let res = ds.compact();
    let compact_time = t.elapsed();
    pb.finish_and_clear();
    res?;
    let after = footprint(&ds);
    println!(
        "   {} ({}, {}) -> {} ({}, {}) in {}",
        plural(before.components, "component", "components"),
        before.level_summary(),
        bytes(before.disk_bytes),
        plural(after.components, "component", "components"),
        after.level_summary(),
        bytes(after.disk_bytes),
        duration(compact_time)
    );

    // 9. Stats.
    step(9, "Stats");
    let st = db.stats();
    for d in &st.datasets {
        for line in stats::render_dataset(d, &ds.index_defs()).lines() {
            println!("   {line}");
        }
    }
    print!("   {}", stats::render_cache(&st.block_cache));
    let t = Totals::of(&ds.stats().indexes);
    println!(
        "   => write amplification {:.2}: bytes written by flushes and merges per byte inserted",
        t.write_amplification()
    );
    println!(
        "   => {} disk components on {}; the duplicate-key checks of the inserts are counted apart from gets (key_checks in `silt stats --json`)",
        count(t.components),
        plural(u64::from(o.partitions), "partition", "partitions")
    );

    // 10. SQL.
    step(
        10,
        "The same questions through SQL (silt-sql on DataFusion, in-process), each checked against the native API",
    );
    println!(
        "   (`make demo` builds DataFusion unoptimized for a quick first build: SQL times here are slower than a release build's)"
    );
    let questions = sql::questions(&ds)?;
    let engine = silt_sql::SqlEngine::new(db.clone())
        .map_err(|e| CliError::Failed(format!("demo: cannot start the SQL engine: {e}")))?;
    for stmt in sql::create_landmarks(&engine)? {
        println!("   {stmt}");
    }
    sql::ask(&engine, &questions)?;
    drop(engine);
    drop(ds);
    db.close()?;
    // The server opens the directory itself: the lock goes with the last
    // handle.
    if Arc::try_unwrap(db).is_err() {
        return Err(CliError::Failed(
            "demo: the database is still held after the SQL step, so it cannot be served".into(),
        ));
    }

    // 11. The server.
    step(
        11,
        "The same database served: `silt serve` on free loopback ports, one query through the PostgreSQL wire protocol",
    );
    let knn = questions.iter().find(|q| q.served).ok_or_else(|| {
        CliError::Failed("demo: no question is marked for the server step".into())
    })?;
    server::round_trip(o.dir, o.cache_mb, &knn.sql, &knn.expected)?;

    let exe = shown_exe();
    println!(
        "\nDone in {}; every SQL answer matched the native API's. Explore the data:\n  {exe} --db {dir} scan {DATASET} --from {lo} --to {hi}\n  {exe} --db {dir} get {DATASET} {target}\n  {exe} --db {dir} query {DATASET} --index {NEAR} --near {lon},{lat} --within-m 500 --index-only\n  {exe} --db {dir} query {DATASET} --index {WORDS_INDEX} --text \"sunset beach\" --limit 5\n  {exe} --db {dir} stats",
        duration(total_start.elapsed()),
        lo = at(999),
        hi = at(1008),
        dir = o.dir.display(),
        lon = EIFFEL.0,
        lat = EIFFEL.1,
    );
    println!(
        "Serve it, then connect with psql or Python (psycopg):\n  {exe} --db {dir} serve\n  psql -h 127.0.0.1 -p 5433 -U silt -c \"SELECT id, text FROM tweets WHERE ft_contains(text, 'sunset beach') LIMIT 5\"\n  python3 -m pip install 'psycopg[binary]'    # once, if psycopg is missing\n  python3 -c \"import psycopg; print(psycopg.connect('host=127.0.0.1 port=5433 user=silt').execute('SELECT count(*) FROM tweets').fetchone())\"\n  curl -d 'SELECT name, ST_AsText(loc) FROM landmarks' http://127.0.0.1:8080/query/service\nOr embedded in Python: `make python-full` builds the siltdb package (see crates/silt-py/README.md).",
        dir = o.dir.display(),
    );
    Ok(())
}

/// This binary's path as a user would type it: relative to the current
/// directory when it lies below it.
fn shown_exe() -> String {
    let Ok(exe) = std::env::current_exe() else {
        return "silt".to_owned();
    };
    match std::env::current_dir() {
        Ok(cwd) => match exe.strip_prefix(&cwd) {
            Ok(rel) => rel.display().to_string(),
            Err(_) => exe.display().to_string(),
        },
        Err(_) => exe.display().to_string(),
    }
}

/// The demo's R-tree and keyword indexes.
pub(crate) const NEAR: &str = "near";
pub(crate) const WORDS_INDEX: &str = "words";
/// Where the nearest-neighbour query looks: the Eiffel Tower (lon, lat).
pub(crate) const EIFFEL: (f64, f64) = (2.2945, 48.8584);

/// Bulk-build an R-tree on `loc` and a keyword index on `text`, then run a
/// k-nearest-neighbour and a keyword query through them.
fn secondary_indexes(db: &Database, ds: &std::sync::Arc<Dataset>) -> CliResult<()> {
    let policy = ds.def().policy.clone();
    let mut words = IndexDef::keyword(WORDS_INDEX, "text");
    if policy.is_leveled() {
        // Deleted-key reconciliation (the keyword default) cannot be leveled.
        words = words.reconcile(ReconcileOption::Antimatter);
    }
    for def in [IndexDef::rtree(NEAR, "loc"), words] {
        let t = Instant::now();
        let def = db.create_index(DATASET, def.policy(policy.clone()))?;
        let el = t.elapsed();
        let (tot, _) = index_totals(ds, &def.name);
        println!(
            "   index `{}`, {}: bulk-built {} in {} ({} on disk)",
            def.name,
            describe(&def),
            plural(tot.entries + tot.memory_entries, "entry", "entries"),
            duration(el),
            bytes(tot.disk_bytes)
        );
    }

    let (lon, lat) = EIFFEL;
    let k = 5;
    let t = Instant::now();
    let mut res = ds.query(
        NEAR,
        &Query::Nearest { lon, lat, k },
        QueryOptions::default(),
    )?;
    let hits: Vec<QueryHit> = res.by_ref().collect::<silt::Result<_>>()?;
    let el = t.elapsed();
    println!(
        "   the {k} tweets nearest to the Eiffel Tower ({lon}, {lat}), nearest first, in {}: {}",
        duration(el),
        stats_text(&res.stats(), silt::IndexKind::Rtree)
    );
    for h in &hits {
        let field = |f: &str| h.record.as_ref().and_then(|r| r.get(f)).cloned();
        println!(
            "     {:>5.0} m  id {}: {}",
            h.distance_m.unwrap_or(f64::NAN),
            field("id").unwrap_or(Value::Null),
            field("text").unwrap_or(Value::Null)
        );
    }

    let text = "sunset beach";
    let q = Query::Text {
        text: text.to_owned(),
        all: true,
    };
    let t = Instant::now();
    let mut res = ds.query(
        WORDS_INDEX,
        &q,
        QueryOptions {
            index_only: true,
            limit: None,
        },
    )?;
    let mut n = 0u64;
    for h in res.by_ref() {
        h?;
        n += 1;
    }
    let el = t.elapsed();
    println!(
        "   tweets with both words of \"{text}\": {} in {}, index-only: {}",
        count(n),
        duration(el),
        stats_text(&res.stats(), silt::IndexKind::Keyword)
    );
    let t = Instant::now();
    let mut res = ds.query(
        WORDS_INDEX,
        &q,
        QueryOptions {
            index_only: false,
            limit: Some(2),
        },
    )?;
    let first: Vec<QueryHit> = res.by_ref().collect::<silt::Result<_>>()?;
    println!(
        "   the first 2 records, fetched and checked through the primary index in {}:",
        duration(t.elapsed())
    );
    for h in first {
        if let Some(r) = h.record {
            println!("     {r}");
        }
    }
    Ok(())
}

/// An id inside the key range that no record has (a gap between two ids).
fn absent_id(ids: &[i64], rng: &mut StdRng) -> i64 {
    for _ in 0..100 {
        let j = rng.random_range(0..ids.len());
        if let (Some(a), Some(b)) = (ids.get(j), ids.get(j + 1))
            && b - a >= 2
        {
            return a + 1;
        }
    }
    ids.last().map_or(1, |l| l + 1)
}

struct Latency {
    total: Duration,
    mean_us: f64,
    p99_us: f64,
}

/// Run `n` gets of the ids `next_id` yields; return how many were found and
/// their latencies.
fn lookups(ds: &Dataset, n: u64, mut next_id: impl FnMut() -> i64) -> CliResult<(u64, Latency)> {
    let mut found = 0;
    let mut lat = Vec::with_capacity(usize::try_from(n).unwrap_or(0));
    let start = Instant::now();
    for _ in 0..n {
        let key = [Value::Int(next_id())];
        let t = Instant::now();
        let r = ds.get(&key)?;
        lat.push(t.elapsed());
        found += u64::from(r.is_some());
    }
    let total = start.elapsed();
    lat.sort_unstable();
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    let mean_us = if lat.is_empty() {
        0.0
    } else {
        lat.iter().map(|d| us(*d)).sum::<f64>() / lat.len() as f64
    };
    let p99_us = lat
        .get((lat.len() * 99 / 100).min(lat.len().saturating_sub(1)))
        .map_or(0.0, |d| us(*d));
    Ok((
        found,
        Latency {
            total,
            mean_us,
            p99_us,
        },
    ))
}

fn probes_per_get(before: &Totals, after: &Totals) -> f64 {
    let gets = after.gets.saturating_sub(before.gets);
    if gets == 0 {
        0.0
    } else {
        (after.probes - before.probes) / gets as f64
    }
}

/// Scan ids in the bounds; print the count, the time and the first `show` records.
fn range_scan(
    ds: &std::sync::Arc<Dataset>,
    lo: Bound<i64>,
    hi: Bound<i64>,
    show: usize,
) -> CliResult<()> {
    let lo_v = lo.map(|i| [Value::Int(i)]);
    let hi_v = hi.map(|i| [Value::Int(i)]);
    let t = Instant::now();
    let mut shown = Vec::new();
    let mut n = 0u64;
    for rec in ds.scan(lo_v.as_ref().map(|k| &k[..]), hi_v.as_ref().map(|k| &k[..]))? {
        let rec = rec?;
        if shown.len() < show {
            shown.push(rec);
        }
        n += 1;
    }
    let el = t.elapsed();
    let what = match (lo, hi) {
        (Bound::Included(a), Bound::Included(b)) => format!("ids {a}..={b}"),
        _ => "all records".to_owned(),
    };
    println!(
        "   {what}: {} in {} ({} records/s){}",
        plural(n, "record", "records"),
        duration(el),
        rate(n, el),
        if shown.is_empty() {
            ""
        } else {
            "; the first ones:"
        }
    );
    for r in shown {
        println!("     {r}");
    }
    Ok(())
}
