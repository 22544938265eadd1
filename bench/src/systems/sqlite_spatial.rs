//! SQLite (the `rusqlite` crate's bundled build, R*Tree module enabled) as the
//! peer of the spatial workloads: a main table
//! `tweets(id INTEGER PRIMARY KEY, user_id, ts, lon, lat, text)` and an R*Tree
//! virtual table `tweets_loc(id, min_x, max_x, min_y, max_y, +lon, +lat)` keyed
//! by rowid = id, loaded in batched transactions (one row in each per record).
//!
//! The R*Tree stores its boxes as 32-bit floats rounded outwards, so a box search
//! returns a superset near the edges; the exact coordinates are kept as auxiliary
//! columns (`+lon`, `+lat`, stored in the R*Tree's own rows, not indexed) and
//! every query filters on them, so results are exact without touching the main
//! table. The R*Tree has no nearest-neighbour search: kNN is the usual
//! expanding-box search refined with the great-circle distance (see [`knn`]).

use std::{ops::Range, path::Path};

use anyhow::{Context, Result, bail};
use rusqlite::{Connection, params};

use super::{SpatialStore, System};
use crate::{
    results::ResultRow,
    spatial::{
        data::{Answer, TweetData},
        geo::{
            Rect, box_around, circle_bbox, haversine_m, inscribed_radius_m, split_rect,
            within_via_boxes,
        },
    },
};

/// Page cache, as large as Silt's block cache.
pub const CACHE_BYTES: i64 = 256 << 20;
/// Half-height (degrees of latitude) of the first box of a kNN search; doubled
/// until the box holds k records.
const KNN_FIRST_HALF_DEG: f64 = 0.01;

const INSERT_MAIN: &str =
    "INSERT INTO tweets(id, user_id, ts, lon, lat, text) VALUES (?1, ?2, ?3, ?4, ?5, ?6)";
const INSERT_LOC: &str = "INSERT INTO tweets_loc(id, min_x, max_x, min_y, max_y, lon, lat) \
                          VALUES (?1, ?2, ?2, ?3, ?3, ?2, ?3)";
/// Index-only: the R*Tree table alone (box search, then the exact auxiliary columns).
const RECT_IDS: &str = "SELECT id FROM tweets_loc \
     WHERE min_x <= ?3 AND max_x >= ?1 AND min_y <= ?4 AND max_y >= ?2 \
       AND lon >= ?1 AND lon <= ?3 AND lat >= ?2 AND lat <= ?4";
/// With the records: the R*Tree joined to the main table by rowid.
const RECT_ROWS: &str = "SELECT t.id, t.user_id, t.ts, t.text FROM tweets_loc r JOIN tweets t ON t.id = r.id \
     WHERE r.min_x <= ?3 AND r.max_x >= ?1 AND r.min_y <= ?4 AND r.max_y >= ?2 \
       AND r.lon >= ?1 AND r.lon <= ?3 AND r.lat >= ?2 AND r.lat <= ?4";
/// kNN candidates: the box search alone (refined by distance afterwards).
const BOX_POINTS: &str = "SELECT id, lon, lat FROM tweets_loc \
     WHERE min_x <= ?3 AND max_x >= ?1 AND min_y <= ?4 AND max_y >= ?2";
const FETCH: &str = "SELECT user_id, ts, text FROM tweets WHERE id = ?1";

pub struct SqliteSpatial {
    conn: Connection,
    /// EXPLAIN QUERY PLAN of the joined rectangle query.
    plan: String,
    /// Text bytes read by queries with records (kept so the reads aren't optimized away).
    pub text_bytes_read: u64,
    /// kNN searches that needed the second (circle-bounding) box query.
    pub knn_second_queries: u64,
    /// Box queries made by kNN searches.
    pub knn_box_queries: u64,
    pub knn_searches: u64,
}

impl SqliteSpatial {
    /// Creates `dir/tweets.sqlite` with both tables (WAL, synchronous=NORMAL).
    pub fn open(dir: &Path) -> Result<Self> {
        let path = dir.join("tweets.sqlite");
        let conn = Connection::open(&path)
            .with_context(|| format!("opening SQLite at {}", path.display()))?;
        let mode: String = conn
            .pragma_update_and_check(None, "journal_mode", "WAL", |r| r.get(0))
            .context("SQLite: PRAGMA journal_mode=WAL")?;
        if !mode.eq_ignore_ascii_case("wal") {
            bail!("SQLite refused WAL journal mode (got {mode})");
        }
        conn.pragma_update(None, "synchronous", "NORMAL")
            .context("SQLite: PRAGMA synchronous")?;
        conn.pragma_update(None, "cache_size", -(CACHE_BYTES / 1024))
            .context("SQLite: PRAGMA cache_size")?;
        conn.execute_batch(
            "CREATE TABLE tweets(id INTEGER PRIMARY KEY, user_id INTEGER NOT NULL, \
             ts INTEGER NOT NULL, lon REAL NOT NULL, lat REAL NOT NULL, text TEXT NOT NULL)",
        )
        .context("SQLite: creating table tweets")?;
        if let Err(e) = conn.execute_batch(
            "CREATE VIRTUAL TABLE tweets_loc USING rtree(id, min_x, max_x, min_y, max_y, +lon, +lat)",
        ) {
            bail!(
                "SQLite: cannot create the R*Tree table ({e}): this SQLite build lacks the R*Tree \
                 module (it needs SQLITE_ENABLE_RTREE; the `bundled` build of libsqlite3-sys enables it)"
            );
        }
        let plan = {
            let mut st = conn
                .prepare(&format!("EXPLAIN QUERY PLAN {RECT_ROWS}"))
                .context("SQLite: EXPLAIN QUERY PLAN")?;
            let rows = st
                .query_map(params![0.0, 0.0, 1.0, 1.0], |r| r.get::<_, String>(3))
                .context("SQLite: EXPLAIN QUERY PLAN")?;
            rows.collect::<rusqlite::Result<Vec<_>>>()
                .context("SQLite: EXPLAIN QUERY PLAN")?
                .join("; ")
        };
        Ok(Self {
            conn,
            plan,
            text_bytes_read: 0,
            knn_second_queries: 0,
            knn_box_queries: 0,
            knn_searches: 0,
        })
    }

    /// (id, lon, lat) of every record whose R*Tree box meets `r` (a superset of
    /// the records in `r`: boxes are 32-bit floats rounded outwards).
    fn box_points(&mut self, r: &Rect, out: &mut Vec<(i64, f64, f64)>) -> Result<()> {
        let mut st = self
            .conn
            .prepare_cached(BOX_POINTS)
            .context("SQLite: preparing the box query")?;
        for part in split_rect(r) {
            let mut rows = st
                .query(params![part[0], part[1], part[2], part[3]])
                .context("SQLite box query")?;
            while let Some(row) = rows.next().context("SQLite box query")? {
                out.push((row.get(0)?, row.get(1)?, row.get(2)?));
            }
        }
        Ok(())
    }

    fn fetch(&mut self, id: i64) -> Result<()> {
        let mut st = self
            .conn
            .prepare_cached(FETCH)
            .context("SQLite: preparing the fetch")?;
        let len = st
            .query_row(params![id], |r| {
                let _user: i64 = r.get(0)?;
                let _ts: i64 = r.get(1)?;
                let text = r.get_ref(2)?.as_str()?;
                Ok(text.len())
            })
            .with_context(|| format!("SQLite: fetching record {id}"))?;
        self.text_bytes_read += std::hint::black_box(len) as u64;
        Ok(())
    }
}

/// Half-width in longitude degrees of a box `half_lat` degrees high that is about
/// as wide as high on the ground at latitude `lat` (the whole range near a pole).
fn lon_half(lat: f64, half_lat: f64) -> f64 {
    let c = lat.to_radians().cos();
    if c < 1e-6 {
        180.0
    } else {
        (half_lat / c).min(180.0)
    }
}

/// Exact great-circle kNN on an index that can only search boxes: grow a box
/// around the point (doubling its size) until it holds at least `k` records;
/// rank them by distance; if the k-th distance exceeds the radius of the circle
/// inscribed in the box, a nearer record may lie outside it, so search once more
/// with the box bounding the circle of that radius and rank again.
fn knn(
    mut search: impl FnMut(&Rect, &mut Vec<(i64, f64, f64)>) -> Result<()>,
    lon: f64,
    lat: f64,
    k: usize,
) -> Result<(Vec<(i64, f64)>, bool)> {
    let mut cands = Vec::new();
    let mut hy = KNN_FIRST_HALF_DEG;
    let mut hx;
    loop {
        hx = lon_half(lat, hy);
        cands.clear();
        search(&box_around(lon, lat, hx, hy), &mut cands)?;
        if cands.len() >= k || (hx >= 180.0 && hy >= 180.0) {
            break;
        }
        hy *= 2.0;
    }
    let rank = |cands: &[(i64, f64, f64)]| -> Vec<(i64, f64)> {
        let mut v: Vec<(i64, f64)> = cands
            .iter()
            .map(|&(id, x, y)| (id, haversine_m(lon, lat, x, y)))
            .collect();
        v.sort_by(|a, b| a.1.total_cmp(&b.1).then(a.0.cmp(&b.0)));
        v
    };
    let mut ranked = rank(&cands);
    let mut second = false;
    if ranked.len() >= k {
        let dk = ranked[k - 1].1;
        if dk > inscribed_radius_m(lat, hx, hy) {
            second = true;
            cands.clear();
            for b in circle_bbox(lon, lat, dk) {
                search(&b, &mut cands)?;
            }
            cands.sort_unstable_by_key(|c| c.0);
            cands.dedup_by_key(|c| c.0);
            ranked = rank(&cands);
        }
    }
    ranked.truncate(k);
    Ok((ranked, second))
}

impl System for SqliteSpatial {
    fn name(&self) -> &str {
        "sqlite"
    }

    fn describe(&self) -> String {
        format!(
            "SQLite {}: table tweets(id INTEGER PRIMARY KEY, user_id, ts, lon REAL, lat REAL, text TEXT) + \
             R*Tree tweets_loc(id, min_x, max_x, min_y, max_y, +lon, +lat) (rowid = id; exact coordinates \
             as auxiliary columns, since the R*Tree keeps 32-bit float boxes), one transaction per batch, \
             journal_mode=WAL, synchronous=NORMAL (the WAL is fsynced at checkpoints, not per commit), \
             cache_size {} MiB, default page size; index-only queries read tweets_loc alone, queries with \
             records join it to tweets (plan: {})",
            crate::machine::sqlite_version(),
            CACHE_BYTES >> 20,
            self.plan
        )
    }
}

impl SpatialStore for SqliteSpatial {
    fn insert_batch(&mut self, data: &TweetData, range: Range<usize>) -> Result<()> {
        let first = range.start;
        let tx = self.conn.transaction().context("SQLite: BEGIN")?;
        {
            let mut main = tx
                .prepare_cached(INSERT_MAIN)
                .context("SQLite: preparing the insert")?;
            let mut loc = tx
                .prepare_cached(INSERT_LOC)
                .context("SQLite: preparing the R*Tree insert")?;
            for i in range {
                let id = data.id(i);
                main.execute(params![
                    id,
                    data.user_id[i],
                    data.ts[i],
                    data.lon[i],
                    data.lat[i],
                    data.text(i)
                ])
                .with_context(|| format!("SQLite: inserting record {id}"))?;
                loc.execute(params![id, data.lon[i], data.lat[i]])
                    .with_context(|| format!("SQLite: inserting the R*Tree row of {id}"))?;
            }
        }
        tx.commit()
            .with_context(|| format!("SQLite: COMMIT of the batch at {first}"))
    }

    fn delete(&mut self, id: i64) -> Result<bool> {
        let tx = self.conn.transaction().context("SQLite: BEGIN")?;
        let n = tx
            .execute("DELETE FROM tweets WHERE id = ?1", params![id])
            .with_context(|| format!("SQLite: deleting {id}"))?;
        tx.execute("DELETE FROM tweets_loc WHERE id = ?1", params![id])
            .with_context(|| format!("SQLite: deleting the R*Tree row of {id}"))?;
        tx.commit().context("SQLite: COMMIT")?;
        Ok(n > 0)
    }

    fn settle(&mut self) -> Result<()> {
        self.conn
            .execute_batch("PRAGMA wal_checkpoint(TRUNCATE)")
            .context("SQLite: wal_checkpoint")
    }

    fn compact(&mut self) -> Result<()> {
        self.conn
            .execute_batch("VACUUM; PRAGMA wal_checkpoint(TRUNCATE)")
            .context("SQLite: VACUUM")
    }

    fn rect(&mut self, r: &Rect, fetch: bool) -> Result<Answer> {
        let mut a = Answer::default();
        let mut bytes = 0usize;
        {
            let mut st = self
                .conn
                .prepare_cached(if fetch { RECT_ROWS } else { RECT_IDS })
                .context("SQLite: preparing the rectangle query")?;
            for part in split_rect(r) {
                let mut rows = st
                    .query(params![part[0], part[1], part[2], part[3]])
                    .context("SQLite rectangle query")?;
                while let Some(row) = rows.next().context("SQLite rectangle query")? {
                    a.add(row.get(0)?);
                    if fetch {
                        let _user: i64 = row.get(1)?;
                        let _ts: i64 = row.get(2)?;
                        bytes += row.get_ref(3)?.as_str()?.len();
                    }
                }
            }
        }
        self.text_bytes_read += std::hint::black_box(bytes) as u64;
        Ok(a)
    }

    fn knn(&mut self, lon: f64, lat: f64, k: usize, fetch: bool) -> Result<Vec<(i64, f64)>> {
        self.knn_searches += 1;
        let (top, second) = knn(
            |r, out| {
                self.knn_box_queries += 1;
                self.box_points(r, out)
            },
            lon,
            lat,
            k,
        )?;
        self.knn_second_queries += u64::from(second);
        if fetch {
            for &(id, _) in &top {
                self.fetch(id)?;
            }
        }
        Ok(top)
    }

    fn radius(&mut self, lon: f64, lat: f64, metres: f64, fetch: bool) -> Result<Answer> {
        let (mut cands, mut hits) = (Vec::new(), Vec::new());
        within_via_boxes(lon, lat, metres, &mut cands, &mut hits, |r, out| {
            self.box_points(r, out)
        })?;
        let mut a = Answer::default();
        for &(id, _, _) in &hits {
            if fetch {
                self.fetch(id)?;
            }
            a.add(id);
        }
        Ok(a)
    }

    fn stats(&mut self, phase: &str) -> Result<Vec<ResultRow>> {
        let pragma = |name: &str| -> Result<i64> {
            self.conn
                .pragma_query_value(None, name, |r| r.get(0))
                .with_context(|| format!("SQLite: PRAGMA {name}"))
        };
        let mut rows = vec![
            ResultRow::stat(
                "sqlite",
                &format!("{phase}.page_count"),
                "count",
                pragma("page_count")? as f64,
            ),
            ResultRow::stat(
                "sqlite",
                &format!("{phase}.freelist_count"),
                "count",
                pragma("freelist_count")? as f64,
            ),
            ResultRow::stat(
                "sqlite",
                &format!("{phase}.page_size"),
                "bytes",
                pragma("page_size")? as f64,
            ),
        ];
        // SAFETY: sqlite3_memory_used / _highwater only read SQLite's global
        // memory counters (thread-safe, no pointers involved).
        let (used, high) = unsafe {
            (
                rusqlite::ffi::sqlite3_memory_used(),
                rusqlite::ffi::sqlite3_memory_highwater(0),
            )
        };
        rows.push(ResultRow::stat(
            "sqlite",
            &format!("{phase}.heap in use (sqlite3_memory_used)"),
            "bytes",
            used as f64,
        ));
        rows.push(ResultRow::stat(
            "sqlite",
            &format!("{phase}.heap high water"),
            "bytes",
            high as f64,
        ));
        if self.knn_searches > 0 {
            rows.push(ResultRow::stat(
                "sqlite",
                &format!("{phase}.kNN box queries per search"),
                "count",
                self.knn_box_queries as f64 / self.knn_searches as f64,
            ));
            rows.push(ResultRow::stat(
                "sqlite",
                &format!("{phase}.kNN searches needing the circle box"),
                "%",
                100.0 * self.knn_second_queries as f64 / self.knn_searches as f64,
            ));
        }
        Ok(rows)
    }

    fn methods(&self) -> String {
        format!(
            "sqlite: kNN = expanding-box search on the R*Tree (box of {KNN_FIRST_HALF_DEG} degrees latitude half-height, \
             doubled until it holds k records; ranked by great-circle distance computed by the harness; \
             if the k-th distance exceeds the circle inscribed in the box, one more search with the box \
             bounding the circle of that radius); radius = R*Tree search of the box bounding the circle, \
             filtered by great-circle distance on the exact auxiliary coordinates, then each hit's row \
             fetched by rowid (with records); join = one radius search per probe (index nested loop); \
             compaction = VACUUM + wal_checkpoint(TRUNCATE)"
        )
    }

    fn close(self: Box<Self>) -> Result<()> {
        self.conn
            .close()
            .map_err(|(_, e)| e)
            .context("closing SQLite")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spatial::data::{GEN, Grid, TweetData, cities, make_queries};
    use crate::util::ScratchDir;

    #[test]
    fn exact_answers() {
        let scratch = ScratchDir::new(
            &std::env::temp_dir(),
            &format!("silt-bench-sqlite-spatial-{}", std::process::id()),
        )
        .unwrap();
        let c = cities().unwrap();
        let d = TweetData::generate(3000, 11, &c, &GEN);
        let g = Grid::new(&d);
        let q = make_queries(&d, &g, 30, 30, 10, 4);
        let mut s = SqliteSpatial::open(scratch.path()).unwrap();
        s.insert_batch(&d, 0..1000).unwrap();
        s.insert_batch(&d, 1000..3000).unwrap();
        for sel in &q.sels {
            for r in &sel.rects {
                let want = g.query(&d, r, None);
                assert_eq!(s.rect(r, false).unwrap(), want);
                assert_eq!(s.rect(r, true).unwrap(), want);
            }
        }
        for &(lon, lat) in &q.knn {
            let mut all: Vec<(i64, f64)> = (0..d.len())
                .map(|i| (i as i64, haversine_m(lon, lat, d.lon[i], d.lat[i])))
                .collect();
            all.sort_by(|a, b| a.1.total_cmp(&b.1));
            let got = s.knn(lon, lat, 10, true).unwrap();
            let want: Vec<f64> = all[..10].iter().map(|p| p.1).collect();
            let got: Vec<f64> = got.iter().map(|p| p.1).collect();
            assert_eq!(got, want);
        }
        crate::systems::spatial_checks::radius_and_join(&mut s, &d, &g, &q);
        Box::new(s).close().unwrap();
    }
}
