//! What the spatial kinds (R-tree, DHVB, DHB, SHB, SIF) share: the
//! geometry a record contributes, the candidates of intersects and
//! within-distance queries over every partition (each kind searches one
//! partition's tree its own way: [`IndexType::search_partition`]), and the
//! re-check of a fetched record's geometry.

use super::IndexDef;
use super::kind::IndexType;
use super::query::{
    Candidate, Query, QueryStats, Recheck, bounds_geometry, check_point, query_parts, query_rects,
};
use crate::error::{Error, Result};
use crate::geo::{Rect, predicates, sphere};
use crate::lsm::LsmTree;
use crate::lsm::kind::BoundsKind;
use crate::lsm::memtable::SpatialEntry;
use crate::lsm::spatial::SearchStats;
use crate::value::{self, Geometry, Value};
use std::sync::Arc;

/// The geometry of a record's indexed field as its MBR and bounds kind:
/// `None` when the field is missing or null, an error when it is not a
/// valid geometry (or, with `points_only`, not a point).
pub fn record_geometry(
    def: &IndexDef,
    record: &Value,
    points_only: bool,
) -> Result<Option<(Rect, BoundsKind)>> {
    let field = &def.fields[0];
    let g = match record.get(field) {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::Geometry(g)) => g,
        Some(v) => {
            return Err(Error::invalid(
                Some(field),
                format!(
                    "the {} index `{}` needs a geometry (GeoJSON, WKT, [x, y] or {{x, y}}; declare the field's type as geometry to convert text), got {}",
                    def.kind,
                    def.name,
                    v.type_name()
                ),
            ));
        }
    };
    g.validate()
        .map_err(|e| Error::invalid(Some(field), e.to_string()))?;
    // The default space is the lon/lat world: coordinates must be
    // longitudes and latitudes. A custom space indexes planar data.
    if def.options.space.is_none() {
        value::check_geographic_field(field, g)?;
    }
    let (x0, y0, x1, y1) = g.mbr();
    if points_only && !matches!(g, Geometry::Point { .. }) {
        return Err(Error::invalid(
            Some(field),
            format!(
                "the {} index `{}` indexes points; got a {} (use an rtree, shb or sif index for rectangles and polygons)",
                def.kind,
                def.name,
                g.type_name()
            ),
        ));
    }
    let bk = match g {
        Geometry::Point { .. } => BoundsKind::Point,
        Geometry::Rect { .. } => BoundsKind::Rect,
        Geometry::Polygon { .. } => BoundsKind::Mbr,
    };
    Ok(Some(([x0, y0, x1, y1], bk)))
}

/// Whether a spatial kind answers `q` (`knn`: also nearest-neighbour).
pub fn answers(q: &Query, knn: bool) -> bool {
    match q {
        Query::Intersects(_) | Query::WithinDistance { .. } => true,
        Query::Nearest { .. } => knn,
        _ => false,
    }
}

/// Live entries of every partition intersecting the query's rectangles
/// that the query's exact test on exact bounds accepts (applied before the
/// candidates are collected and sorted), as candidates sorted by primary
/// key. `exact`: also drop entries whose key has a newer version that does
/// not match (a record moved within its key cell), as index-only answers
/// need; validated candidates are re-checked against the record anyway.
pub fn candidates(
    imp: &dyn IndexType,
    def: &IndexDef,
    trees: &[Arc<LsmTree>],
    q: &Query,
    exact: bool,
    stats: &mut QueryStats,
) -> Result<Vec<Candidate>> {
    match q {
        Query::Intersects(g) => {
            let parts = query_parts(g);
            for p in &parts {
                p.validate()?;
            }
            let rects = query_rects(g);
            // Exact bounds decide now; an MBR waits for the record.
            let keep = |e: &SpatialEntry| {
                e.bounds_kind == BoundsKind::Mbr || {
                    let eg = bounds_geometry(&e.bounds, e.bounds_kind);
                    parts.iter().any(|q| predicates::intersects(&eg, q))
                }
            };
            collect(imp, def, trees, &rects, None, exact, keep, stats)
        }
        Query::WithinDistance { lon, lat, metres } => {
            check_point(*lon, *lat)?;
            if !(metres.is_finite() && *metres >= 0.0) {
                return Err(Error::invalid(
                    None,
                    format!("the distance must be a finite number of metres >= 0, got {metres}"),
                ));
            }
            let rects = sphere::circle_bboxes(*lon, *lat, *metres);
            let circle = sphere::Circle {
                lon: *lon,
                lat: *lat,
                metres: *metres,
            };
            let keep = |e: &SpatialEntry| {
                e.bounds_kind == BoundsKind::Mbr
                    || sphere::min_dist_rect_m(*lon, *lat, &e.bounds) <= *metres
            };
            collect(imp, def, trees, &rects, Some(&circle), exact, keep, stats)
        }
        other => Err(Error::invalid(
            None,
            format!(
                "a {} index does not collect candidates for a {} query",
                def.kind,
                other.name()
            ),
        )),
    }
}

#[allow(clippy::too_many_arguments)]
fn collect(
    imp: &dyn IndexType,
    def: &IndexDef,
    trees: &[Arc<LsmTree>],
    rects: &[Rect],
    circle: Option<&sphere::Circle>,
    exact: bool,
    keep: impl Fn(&SpatialEntry) -> bool,
    stats: &mut QueryStats,
) -> Result<Vec<Candidate>> {
    let split = imp.pk_split(def);
    let mut ss = SearchStats::default();
    let mut out = Vec::new();
    for t in trees {
        for e in imp.search_partition(def, t, rects, circle, exact, &mut ss)? {
            if keep(&e) {
                // The entry's key, less what precedes the primary key.
                let skip = e.key.len() - split.pk(&e.key)?.len();
                let mut pk = e.key;
                pk.drain(..skip);
                out.push(Candidate {
                    pk,
                    bounds: Some((e.bounds, e.bounds_kind)),
                });
            }
        }
    }
    stats.add_search(&ss);
    sort_by_pk(&mut out);
    out.dedup_by(|a, b| a.pk == b.pk);
    Ok(out)
}

/// Sort candidates by primary key: by the keys' first 16 bytes as one
/// number (most keys differ there; a few bytes' memcmp otherwise), moving
/// each candidate once.
fn sort_by_pk(out: &mut Vec<Candidate>) {
    if out.len() < 2 {
        return;
    }
    let head = |k: &[u8]| {
        let mut b = [0u8; 16];
        let n = k.len().min(16);
        b[..n].copy_from_slice(&k[..n]);
        u128::from_be_bytes(b)
    };
    let mut order: Vec<(u128, u32)> = out
        .iter()
        .enumerate()
        .map(|(i, c)| (head(&c.pk), i as u32))
        .collect();
    order.sort_unstable_by(|a, b| {
        a.0.cmp(&b.0)
            .then_with(|| out[a.1 as usize].pk.cmp(&out[b.1 as usize].pk))
    });
    let mut slots: Vec<Option<Candidate>> = out.drain(..).map(Some).collect();
    out.extend(
        order
            .into_iter()
            .filter_map(|(_, i)| slots[i as usize].take()),
    );
}

/// The re-check of a spatial query against a record's geometry.
pub fn recheck(q: &Query) -> Result<Recheck> {
    Ok(match q {
        Query::Intersects(g) => Recheck::Intersects(query_parts(g)),
        Query::WithinDistance { lon, lat, metres } => Recheck::WithinDistance {
            lon: *lon,
            lat: *lat,
            metres: *metres,
        },
        Query::Nearest { lon, lat, .. } => Recheck::Distance {
            lon: *lon,
            lat: *lat,
        },
        other => {
            return Err(Error::invalid(
                None,
                format!("a spatial index cannot re-check a {} query", other.name()),
            ));
        }
    })
}
