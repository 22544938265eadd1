//! In-memory Rust peers of the spatial workloads, both queried in the harness's
//! own process with no storage underneath (bounds on what an index alone costs):
//!
//! - [`RstarSpatial`]: the `rstar` crate's R*-tree (the crate Silt's R-tree
//!   components are built with), updated in place one insertion at a time
//!   during ingest, like an in-memory component that is never flushed. The
//!   records are kept as JSON bytes in a `HashMap` by id for the queries with
//!   records. "Compaction" rebuilds the tree with `RTree::bulk_load` (OMT
//!   packing), so the second query phase shows a packed tree.
//! - [`GeoIndexSpatial`]: the `geo-index` crate's static packed R-tree
//!   (flatbush layout, Hilbert-sorted leaves, node size 16) built once from all
//!   the points: it cannot take insertions, so it has a build time instead of an
//!   ingest rate; it is the query-speed bound.
//!
//! Neither ranks by great-circle distance natively: rstar's
//! `nearest_neighbor_iter` is planar (degrees), refined exactly by
//! [`refine_knn`]; geo-index's best-first search takes its distances from
//! callbacks, given [`box_min_dist_m`] (a great-circle lower bound) for nodes
//! and [`haversine_m`] for points, so it is exact directly.

use std::{collections::HashMap, ops::Range, time::Instant};

use anyhow::{Context, Result, bail};
use geo_index::rtree::{RTree, RTreeBuilder, RTreeIndex, sort::HilbertSort};
use rstar::{AABB, primitives::GeomWithData};
use serde::{Deserialize, Serialize};

use super::{SpatialStore, System};
use crate::{
    results::ResultRow,
    spatial::{
        data::{Answer, TweetData},
        geo::{
            Rect, box_min_dist_m, circle_bbox, haversine_m, refine_knn, split_rect,
            within_via_boxes,
        },
    },
};

/// The rstar release in bench/Cargo.lock.
pub const RSTAR_VERSION: &str = "0.12";
/// The geo-index release in bench/Cargo.lock.
pub const GEO_INDEX_VERSION: &str = "0.4";
/// Children per node of the packed tree (geo-index's default).
const GEO_INDEX_NODE_SIZE: u16 = 16;

/// A record as the in-memory peers keep it (JSON bytes).
#[derive(Serialize, Deserialize)]
struct Rec<'a> {
    id: i64,
    user_id: i64,
    ts: i64,
    lon: f64,
    lat: f64,
    #[serde(borrow)]
    text: &'a str,
}

fn encode(data: &TweetData, i: usize) -> Result<Vec<u8>> {
    serde_json::to_vec(&Rec {
        id: data.id(i),
        user_id: data.user_id[i],
        ts: data.ts[i],
        lon: data.lon[i],
        lat: data.lat[i],
        text: data.text(i),
    })
    .with_context(|| format!("encoding record {}", data.id(i)))
}

/// Decodes a record the way a reader would (text bytes returned so the work
/// isn't optimized away).
fn decode(bytes: &[u8]) -> Result<usize> {
    let r: Rec<'_> = serde_json::from_slice(bytes).context("decoding a stored record")?;
    std::hint::black_box((r.id, r.user_id, r.ts, r.lon, r.lat));
    Ok(std::hint::black_box(r.text.len()))
}

type Entry = GeomWithData<[f64; 2], i64>;

pub struct RstarSpatial {
    tree: rstar::RTree<Entry>,
    records: HashMap<i64, ([f64; 2], Vec<u8>)>,
    bulk_loaded: bool,
    pub text_bytes_read: u64,
    knn_candidates: u64,
    knn_searches: u64,
}

impl RstarSpatial {
    pub fn new() -> Self {
        Self {
            tree: rstar::RTree::new(),
            records: HashMap::new(),
            bulk_loaded: false,
            text_bytes_read: 0,
            knn_candidates: 0,
            knn_searches: 0,
        }
    }

    fn points_in(&self, r: &Rect, out: &mut Vec<(i64, f64, f64)>) {
        let env = AABB::from_corners([r[0], r[1]], [r[2], r[3]]);
        for e in self.tree.locate_in_envelope(&env) {
            let [x, y] = *e.geom();
            out.push((e.data, x, y));
        }
    }

    fn fetch(&mut self, id: i64) -> Result<()> {
        let (_, bytes) = self
            .records
            .get(&id)
            .with_context(|| format!("rstar: no record {id}"))?;
        self.text_bytes_read += decode(bytes)? as u64;
        Ok(())
    }
}

impl Default for RstarSpatial {
    fn default() -> Self {
        Self::new()
    }
}

impl System for RstarSpatial {
    fn name(&self) -> &str {
        "rstar"
    }

    fn describe(&self) -> String {
        format!(
            "rstar {RSTAR_VERSION} (crates.io, in this process, in memory): R*-tree of (point [lon, lat] f64, id), \
             default parameters (max 6 children per node), one RTree::insert per record during ingest; records \
             as JSON bytes in a HashMap<i64, ..> (with records = lookup + JSON decode per hit); rect = \
             locate_in_envelope (edges included); no storage, no log"
        )
    }
}

impl SpatialStore for RstarSpatial {
    fn insert_batch(&mut self, data: &TweetData, range: Range<usize>) -> Result<()> {
        for i in range {
            let p = [data.lon[i], data.lat[i]];
            let id = data.id(i);
            self.tree.insert(GeomWithData::new(p, id));
            self.records.insert(id, (p, encode(data, i)?));
        }
        Ok(())
    }

    fn delete(&mut self, id: i64) -> Result<bool> {
        let Some((p, _)) = self.records.remove(&id) else {
            return Ok(false);
        };
        Ok(self.tree.remove(&GeomWithData::new(p, id)).is_some())
    }

    fn settle(&mut self) -> Result<()> {
        Ok(())
    }

    fn compact(&mut self) -> Result<()> {
        let entries: Vec<Entry> = self
            .records
            .iter()
            .map(|(&id, (p, _))| GeomWithData::new(*p, id))
            .collect();
        self.tree = rstar::RTree::bulk_load(entries);
        self.bulk_loaded = true;
        Ok(())
    }

    fn rect(&mut self, r: &Rect, fetch: bool) -> Result<Answer> {
        let mut a = Answer::default();
        let mut hits = Vec::new();
        for part in split_rect(r) {
            hits.clear();
            self.points_in(&part, &mut hits);
            for &(id, _, _) in &hits {
                a.add(id);
                if fetch {
                    self.fetch(id)?;
                }
            }
        }
        Ok(a)
    }

    fn knn(&mut self, lon: f64, lat: f64, k: usize, fetch: bool) -> Result<Vec<(i64, f64)>> {
        let first: Vec<(i64, f64, f64)> = self
            .tree
            .nearest_neighbor_iter(&[lon, lat])
            .take(k)
            .map(|e| (e.data, e.geom()[0], e.geom()[1]))
            .collect();
        let (top, n) = refine_knn(lon, lat, k, &first, |b, out| {
            self.points_in(b, out);
            Ok(())
        })?;
        self.knn_searches += 1;
        self.knn_candidates += n as u64;
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
            self.points_in(r, out);
            Ok(())
        })?;
        let mut a = Answer::default();
        for &(id, _, _) in &hits {
            a.add(id);
            if fetch {
                self.fetch(id)?;
            }
        }
        Ok(a)
    }

    fn stats(&mut self, phase: &str) -> Result<Vec<ResultRow>> {
        let mut rows = vec![ResultRow::stat(
            "rstar",
            &format!("{phase}.entries"),
            "count",
            self.tree.size() as f64,
        )];
        if self.knn_searches > 0 {
            rows.push(ResultRow::stat(
                "rstar",
                &format!("{phase}.kNN candidates ranked per search"),
                "count",
                self.knn_candidates as f64 / self.knn_searches as f64,
            ));
        }
        Ok(rows)
    }

    fn methods(&self) -> String {
        "rstar: kNN = nearest_neighbor_iter (planar, degrees) for k candidates, then one \
         locate_in_envelope with the box bounding the circle of the k-th great-circle distance, \
         ranked by great-circle distance (exact); radius = locate_in_envelope on the box bounding the \
         circle, filtered by great-circle distance; join = one radius search per probe; compaction = \
         rebuild with RTree::bulk_load \
         (the queries after compaction use the packed tree)"
            .into()
    }

    fn close(self: Box<Self>) -> Result<()> {
        Ok(())
    }
}

/// The static packed R-tree, built once over every record.
pub struct GeoIndexSpatial {
    tree: RTree<f64>,
    /// Insertion index -> (id, lon, lat).
    points: Vec<(i64, f64, f64)>,
    /// Insertion index -> JSON bytes of the record.
    records: Vec<Vec<u8>>,
    pub build_s: f64,
    pub text_bytes_read: u64,
}

impl GeoIndexSpatial {
    /// Builds the tree over all of `data` (the time of the tree build alone,
    /// without encoding the records, is `build_s`).
    pub fn build(data: &TweetData) -> Result<Self> {
        let n = u32::try_from(data.len()).context("geo-index holds at most 2^32 items")?;
        let mut points = Vec::with_capacity(data.len());
        let mut records = Vec::with_capacity(data.len());
        for i in 0..data.len() {
            points.push((data.id(i), data.lon[i], data.lat[i]));
            records.push(encode(data, i)?);
        }
        let t = Instant::now();
        let mut b = RTreeBuilder::<f64>::new_with_node_size(n, GEO_INDEX_NODE_SIZE);
        for &(_, x, y) in &points {
            b.add(x, y, x, y);
        }
        let tree = b.finish::<HilbertSort>();
        let build_s = t.elapsed().as_secs_f64();
        Ok(Self {
            tree,
            points,
            records,
            build_s,
            text_bytes_read: 0,
        })
    }

    fn point(&self, idx: u32) -> Result<(i64, f64, f64)> {
        self.points
            .get(idx as usize)
            .copied()
            .with_context(|| format!("geo-index returned item {idx} of {}", self.points.len()))
    }

    fn fetch(&mut self, idx: u32) -> Result<()> {
        let bytes = self
            .records
            .get(idx as usize)
            .with_context(|| format!("geo-index: no record at {idx}"))?;
        self.text_bytes_read += decode(bytes)? as u64;
        Ok(())
    }
}

impl System for GeoIndexSpatial {
    fn name(&self) -> &str {
        "geo-index"
    }

    fn describe(&self) -> String {
        format!(
            "geo-index {GEO_INDEX_VERSION} (crates.io, in this process, in memory): static packed R-tree \
             (RTreeBuilder<f64>, node size {GEO_INDEX_NODE_SIZE}, HilbertSort) built once after all records \
             exist (no insertions: the static bound, with a build time instead of an ingest rate); records \
             as JSON bytes in a Vec by insertion index (with records = JSON decode per hit); rect = search \
             (edges included)"
        )
    }
}

impl SpatialStore for GeoIndexSpatial {
    fn insert_batch(&mut self, _data: &TweetData, _range: Range<usize>) -> Result<()> {
        bail!("geo-index builds a static tree: it takes no insertions")
    }

    fn delete(&mut self, _id: i64) -> Result<bool> {
        bail!("geo-index builds a static tree: it takes no deletions")
    }

    fn settle(&mut self) -> Result<()> {
        Ok(())
    }

    fn compact(&mut self) -> Result<()> {
        Ok(())
    }

    fn rect(&mut self, r: &Rect, fetch: bool) -> Result<Answer> {
        let mut a = Answer::default();
        for part in split_rect(r) {
            for idx in self.tree.search(part[0], part[1], part[2], part[3]) {
                a.add(self.point(idx)?.0);
                if fetch {
                    self.fetch(idx)?;
                }
            }
        }
        Ok(a)
    }

    fn knn(&mut self, lon: f64, lat: f64, k: usize, fetch: bool) -> Result<Vec<(i64, f64)>> {
        let hits = self.tree.neighbors_with_callbacks(
            geo_index::rtree::NeighborsOptions::k(k),
            |[x0, y0, x1, y1]| box_min_dist_m(lon, lat, &[x0, y0, x1, y1]),
            |_, [x, y, _, _]| Some(haversine_m(lon, lat, x, y)),
        );
        let mut out = Vec::with_capacity(hits.len());
        for (idx, d) in hits {
            out.push((self.point(idx)?.0, d));
            if fetch {
                self.fetch(idx)?;
            }
        }
        Ok(out)
    }

    fn radius(&mut self, lon: f64, lat: f64, metres: f64, fetch: bool) -> Result<Answer> {
        let mut a = Answer::default();
        for part in circle_bbox(lon, lat, metres) {
            for idx in self.tree.search(part[0], part[1], part[2], part[3]) {
                let (id, x, y) = self.point(idx)?;
                if haversine_m(lon, lat, x, y) <= metres {
                    a.add(id);
                    if fetch {
                        self.fetch(idx)?;
                    }
                }
            }
        }
        Ok(a)
    }

    fn stats(&mut self, phase: &str) -> Result<Vec<ResultRow>> {
        Ok(vec![
            ResultRow::stat(
                "geo-index",
                &format!("{phase}.tree bytes"),
                "bytes",
                (self.tree.boxes().len() * 8) as f64,
            ),
            ResultRow::stat(
                "geo-index",
                &format!("{phase}.levels"),
                "count",
                self.tree.num_levels() as f64,
            ),
        ])
    }

    fn methods(&self) -> String {
        "geo-index: kNN = neighbors_with_callbacks (best-first over the packed tree) with a great-circle \
         lower bound for node boxes and the great-circle distance for points: exact, no refinement; \
         radius = search of the box bounding the circle, filtered by great-circle distance; join = one \
         radius search per probe; no compaction (built once)"
            .into()
    }

    fn close(self: Box<Self>) -> Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spatial::data::{GEN, Grid, TweetData, cities, make_queries};

    fn brute_knn(d: &TweetData, lon: f64, lat: f64, k: usize) -> Vec<f64> {
        let mut all: Vec<f64> = (0..d.len())
            .map(|i| haversine_m(lon, lat, d.lon[i], d.lat[i]))
            .collect();
        all.sort_by(f64::total_cmp);
        all.truncate(k);
        all
    }

    #[test]
    fn exact_answers() {
        let c = cities().unwrap();
        let d = TweetData::generate(3000, 11, &c, &GEN);
        let g = Grid::new(&d);
        let q = make_queries(&d, &g, 30, 30, 10, 4);
        let mut r = RstarSpatial::new();
        r.insert_batch(&d, 0..1000).unwrap();
        r.insert_batch(&d, 1000..3000).unwrap();
        let mut gi = GeoIndexSpatial::build(&d).unwrap();
        for phase in 0..2 {
            for sel in &q.sels {
                for rect in &sel.rects {
                    let want = g.query(&d, rect, None);
                    for fetch in [false, true] {
                        assert_eq!(r.rect(rect, fetch).unwrap(), want);
                        assert_eq!(gi.rect(rect, fetch).unwrap(), want);
                    }
                }
            }
            // Points near the antimeridian and the poles too.
            let mut pts = q.knn.clone();
            pts.extend([
                (179.99, 10.0),
                (-179.99, -10.0),
                (0.0, 89.9),
                (100.0, -89.9),
            ]);
            for &(lon, lat) in &pts {
                let want = brute_knn(&d, lon, lat, 10);
                let a: Vec<f64> = r
                    .knn(lon, lat, 10, true)
                    .unwrap()
                    .iter()
                    .map(|p| p.1)
                    .collect();
                let b: Vec<f64> = gi
                    .knn(lon, lat, 10, true)
                    .unwrap()
                    .iter()
                    .map(|p| p.1)
                    .collect();
                assert_eq!(a, want);
                assert_eq!(b, want);
            }
            crate::systems::spatial_checks::radius_and_join(&mut r, &d, &g, &q);
            crate::systems::spatial_checks::radius_and_join(&mut gi, &d, &g, &q);
            if phase == 0 {
                r.compact().unwrap();
            }
        }
        assert!(r.delete(5).unwrap());
        assert!(!r.delete(5).unwrap());
    }
}
