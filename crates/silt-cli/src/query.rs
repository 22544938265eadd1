//! `silt query`: one access path through a secondary index per call (a
//! btree range, an rtree intersection, distance, kNN or spatial join, a
//! keyword or n-gram text search, the k most recent matches of an equality
//! or range), results as JSON Lines, a summary of what the query touched on
//! standard error.

use crate::describe::describe;
use crate::error::{CliError, CliResult};
use crate::index::{article, find_def};
use crate::util::{count, parse_key_part, parse_numbers, plural};
use silt::value::coerce_text;
use silt::{
    Database, Dataset, FieldType, Geometry, IndexDef, IndexKind, JoinPredicate, Query, QueryHit,
    QueryStats, Value,
};
use std::cell::RefCell;
use std::io::{BufWriter, Write};
use std::ops::Bound;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Instant;

/// The flags of `silt query`, as typed.
pub struct QueryArgs<'a> {
    pub dataset: &'a str,
    pub index: &'a str,
    pub eq: &'a [String],
    pub from: &'a [String],
    pub to: &'a [String],
    pub bbox: Option<&'a str>,
    pub intersects: Option<&'a str>,
    pub near: Option<&'a str>,
    pub within_m: Option<f64>,
    pub k: Option<u64>,
    pub text: Option<&'a str>,
    pub any: bool,
    pub join: Option<&'a str>,
    pub join_field: Option<&'a str>,
    pub limit: Option<u64>,
    pub index_only: bool,
    pub recent: bool,
}

/// The flag groups of the access paths, in the order help lists them.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Path {
    Range,
    Recent,
    Bbox,
    Intersects,
    Near,
    Text,
    Join,
}

impl Path {
    fn flags(self) -> &'static str {
        match self {
            Path::Range => "--eq/--from/--to",
            Path::Recent => "--recent",
            Path::Bbox => "--bbox",
            Path::Intersects => "--intersects",
            Path::Near => "--near",
            Path::Text => "--text",
            Path::Join => "--join",
        }
    }

    /// Whether an index of this kind answers this path.
    fn fits(self, kind: IndexKind) -> bool {
        match self {
            // Embedded, eager and lazy indexes answer ranges as recency
            // queries without a limit.
            Path::Range => kind.is_btree() || kind.is_recency(),
            Path::Recent => kind.answers_recent(),
            Path::Bbox | Path::Intersects | Path::Join => kind.is_spatial(),
            // Distance works on all; kNN (--k) is checked by the core.
            Path::Near => kind.is_spatial(),
            Path::Text => matches!(kind, IndexKind::Keyword | IndexKind::Ngram),
        }
    }

    fn needs(self) -> &'static str {
        match self {
            Path::Range => "a btree, composite, brin, embedded, eager or lazy index",
            Path::Recent => "a btree, composite, embedded, eager or lazy index",
            Path::Bbox | Path::Intersects | Path::Near | Path::Join => {
                "an rtree or dhvb index (or a dhb, shb or sif index)"
            }
            Path::Text => "a keyword or ngram index",
        }
    }
}

/// The flags that query an index of this kind.
fn flags_for(kind: IndexKind) -> &'static str {
    match kind {
        IndexKind::Btree => "--eq V..., or --from V... and/or --to V... (or none: the whole index)",
        IndexKind::Brin => {
            "--eq V, or --from V and/or --to V (only blocks whose zone maps overlap are read)"
        }
        IndexKind::Rtree => {
            "--bbox MINX,MINY,MAXX,MAXY, --intersects GEOMETRY, --near LON,LAT with --within-m METRES or --k K, or --join OTHER --join-field FIELD"
        }
        IndexKind::Dhvb | IndexKind::Dhb | IndexKind::Shb | IndexKind::Sif => {
            "--bbox MINX,MINY,MAXX,MAXY, --intersects GEOMETRY, --near LON,LAT --within-m METRES, or --join OTHER --join-field FIELD (no --k: kNN needs an rtree)"
        }
        IndexKind::Keyword => "--text \"WORDS\" (all of them; any of them with --any)",
        IndexKind::Ngram => "--text \"TEXT\" (a substring)",
        IndexKind::Composite => {
            "--eq V..., or --from V... and/or --to V...; add --recent [--k K] for the K most recent matches"
        }
        IndexKind::Embedded | IndexKind::Eager | IndexKind::Lazy => {
            "--recent with --eq V or --from A --to B, and --k K for the K most recent matches"
        }
        IndexKind::Valuelist => {
            "none: a valuelist index holds publish/subscribe lists, read by the pub/sub operations (the Rust API's `Dataset::list_read`)"
        }
    }
}

/// What to run.
enum Plan {
    Query(Query),
    Join {
        other: Arc<Dataset>,
        field: String,
        pred: JoinPredicate,
    },
}

/// The access-path flag groups given.
fn paths_given(a: &QueryArgs) -> Vec<Path> {
    let mut out = Vec::new();
    if a.recent {
        out.push(Path::Recent);
    } else if !(a.eq.is_empty() && a.from.is_empty() && a.to.is_empty()) {
        out.push(Path::Range);
    }
    for (given, p) in [
        (a.bbox.is_some(), Path::Bbox),
        (a.intersects.is_some(), Path::Intersects),
        (a.near.is_some(), Path::Near),
        (a.text.is_some(), Path::Text),
        (a.join.is_some(), Path::Join),
    ] {
        if given {
            out.push(p);
        }
    }
    out
}

fn usage(msg: impl Into<String>) -> CliError {
    CliError::Usage(msg.into())
}

/// Check how the flags combine, before opening anything: one access path,
/// and the flags that only make sense with another one.
fn check_flags(a: &QueryArgs) -> CliResult<Option<Path>> {
    let paths = paths_given(a);
    if let [first, second, ..] = paths.as_slice() {
        return Err(usage(format!(
            "{} and {} are two different access paths; give one per query (see `silt query --help`)",
            first.flags(),
            second.flags()
        )));
    }
    let path = paths.first().copied();
    if a.within_m.is_some() && !matches!(path, Some(Path::Near | Path::Join)) {
        return Err(usage(
            "--within-m needs --near LON,LAT (the records within that distance of a point) or --join OTHER (the pairs within that distance)",
        ));
    }
    if a.k.is_some() && !matches!(path, Some(Path::Near | Path::Recent)) {
        return Err(usage(
            "--k needs --near LON,LAT (the K records nearest to that point) or --recent (the K most recent matches of --eq or --from/--to)",
        ));
    }
    if path == Some(Path::Near) {
        match (a.within_m, a.k) {
            (Some(_), Some(_)) => {
                return Err(usage(
                    "--within-m and --k are two different questions about --near; give one: --within-m METRES (everything within that distance) or --k K (the K nearest)",
                ));
            }
            (None, None) => {
                return Err(usage(
                    "--near needs --within-m METRES (the records within that distance) or --k K (the K nearest records)",
                ));
            }
            _ => {}
        }
    }
    if a.any && path != Some(Path::Text) {
        return Err(usage(
            "--any goes with --text: it asks for records with any of the words instead of all",
        ));
    }
    if a.join_field.is_some() && path != Some(Path::Join) {
        return Err(usage(
            "--join-field goes with --join OTHER_DATASET: it names OTHER's geometry field",
        ));
    }
    if path == Some(Path::Join) && a.join_field.is_none() {
        return Err(usage(
            "--join needs --join-field FIELD: the geometry field of the other dataset whose values probe the index",
        ));
    }
    Ok(path)
}

/// The values of a btree bound, typed like `get` keys against the index
/// fields' declared types (the core then converts them to those types).
fn bound_values(
    ds: &Dataset,
    def: &IndexDef,
    texts: &[String],
    what: &str,
) -> CliResult<Vec<Value>> {
    if texts.len() > def.fields.len() {
        return Err(usage(format!(
            "{what} gives {} values but index `{}` has {} ({}); give at most one value per index field, in order",
            texts.len(),
            def.name,
            plural(def.fields.len() as u64, "field", "fields"),
            def.fields.join(", ")
        )));
    }
    let sdef = ds.def();
    Ok(texts
        .iter()
        .zip(&def.fields)
        .map(|(t, f)| parse_key_part(t, sdef.field_type(f)))
        .collect())
}

/// `--near LON,LAT`, checked to be a longitude and a latitude.
fn parse_point(text: &str) -> CliResult<(f64, f64)> {
    let v = parse_numbers("--near", text, "LON,LAT", "2.35,48.86")?;
    let (lon, lat) = (v[0], v[1]);
    if !(-90.0..=90.0).contains(&lat) {
        return Err(usage(format!(
            "--near {text}: latitude {lat} is outside [-90, 90]; --near takes LON,LAT (longitude first), e.g. --near 2.35,48.86"
        )));
    }
    if !(-180.0..=180.0).contains(&lon) {
        return Err(usage(format!(
            "--near {text}: longitude {lon} is outside [-180, 180]; --near takes LON,LAT (longitude first), e.g. --near 2.35,48.86"
        )));
    }
    Ok((lon, lat))
}

/// `--within-m`, a distance in metres.
fn check_metres(m: f64) -> CliResult<f64> {
    if m.is_finite() && m >= 0.0 {
        Ok(m)
    } else {
        Err(usage(format!(
            "--within-m {m}: the distance must be a finite number of metres, 0 or more, e.g. --within-m 1500"
        )))
    }
}

/// `--bbox MINX,MINY,MAXX,MAXY`; MINX > MAXX crosses the antimeridian.
fn parse_bbox(text: &str) -> CliResult<Geometry> {
    let v = parse_numbers("--bbox", text, "MINX,MINY,MAXX,MAXY", "-10,35,30,60")?;
    let (min_x, min_y, max_x, max_y) = (v[0], v[1], v[2], v[3]);
    if min_y > max_y {
        return Err(usage(format!(
            "--bbox {text}: MINY {min_y} is greater than MAXY {max_y}; the order is MINX,MINY,MAXX,MAXY (west, south, east, north)"
        )));
    }
    if min_x > max_x && !((-180.0..=180.0).contains(&min_x) && (-180.0..=180.0).contains(&max_x)) {
        return Err(usage(format!(
            "--bbox {text}: MINX {min_x} is greater than MAXX {max_x}, which means a box crossing the antimeridian, but then both must be longitudes within [-180, 180] (e.g. --bbox 170,-20,-170,20); for an ordinary box give MINX <= MAXX"
        )));
    }
    Ok(Geometry::rect(min_x, min_y, max_x, max_y))
}

/// `--intersects GEOMETRY`: WKT, GeoJSON, `[x, y]` or `[minx, miny, maxx, maxy]`.
fn parse_geometry(text: &str) -> CliResult<Geometry> {
    let hint = "give WKT, e.g. --intersects 'POLYGON((2 48, 3 48, 3 49, 2 49, 2 48))', or GeoJSON, e.g. --intersects '{\"type\": \"Point\", \"coordinates\": [2.35, 48.86]}'";
    if text.trim().is_empty() {
        return Err(usage(format!("--intersects needs a geometry; {hint}")));
    }
    match coerce_text("--intersects", FieldType::Geometry, text) {
        Ok(Value::Geometry(g)) => Ok(g),
        Ok(_) => Err(usage(format!("--intersects needs a geometry; {hint}"))),
        Err(silt::Error::InvalidRecord { reason, .. }) => {
            Err(usage(format!("--intersects: {reason}; {hint}")))
        }
        Err(e) => Err(usage(format!("--intersects: {e}; {hint}"))),
    }
}

/// Turn the flags into a query (or join) against index `def`.
fn plan(
    db: &Database,
    ds: &Dataset,
    def: &IndexDef,
    a: &QueryArgs,
    path: Option<Path>,
) -> CliResult<Plan> {
    let Some(path) = path else {
        if def.kind.is_btree() {
            // No bounds: the whole index.
            return Ok(Plan::Query(Query::Range {
                lo: Bound::Unbounded,
                hi: Bound::Unbounded,
            }));
        }
        if def.kind.is_recency() {
            // No bounds: every indexed record, newest first.
            return Ok(Plan::Query(Query::Recent {
                lo: Bound::Unbounded,
                hi: Bound::Unbounded,
                k: None,
            }));
        }
        return Err(usage(format!(
            "index `{}` is {}: say what to look for with {} (see `silt query --help`)",
            def.name,
            index_phrase(def),
            flags_for(def.kind)
        )));
    };
    if !path.fits(def.kind) {
        return Err(usage(format!(
            "index `{}` is {}, but {} needs {}; query this index with {}",
            def.name,
            index_phrase(def),
            path.flags(),
            path.needs(),
            flags_for(def.kind)
        )));
    }
    let q = match path {
        Path::Range | Path::Recent => {
            let bound = |texts: &[String], what: &str| -> CliResult<Bound<Vec<Value>>> {
                Ok(if texts.is_empty() {
                    Bound::Unbounded
                } else {
                    Bound::Included(bound_values(ds, def, texts, what)?)
                })
            };
            let (lo, hi) = if a.eq.is_empty() {
                (bound(a.from, "--from")?, bound(a.to, "--to")?)
            } else {
                let v = bound(a.eq, "--eq")?;
                (v.clone(), v)
            };
            if path == Path::Recent || def.kind.is_recency() {
                let k = match a.k {
                    Some(0) => {
                        return Err(usage(
                            "--k 0 asks for no records; give --k 1 or more (the K most recent matches), or leave it out for all of them",
                        ));
                    }
                    Some(k) => Some(usize::try_from(k).unwrap_or(usize::MAX)),
                    None => None,
                };
                Query::Recent { lo, hi, k }
            } else {
                Query::Range { lo, hi }
            }
        }
        Path::Bbox => Query::Intersects(parse_bbox(a.bbox.unwrap_or_default())?),
        Path::Intersects => Query::Intersects(parse_geometry(a.intersects.unwrap_or_default())?),
        Path::Near => {
            let (lon, lat) = parse_point(a.near.unwrap_or_default())?;
            match (a.within_m, a.k) {
                (Some(m), _) => Query::WithinDistance {
                    lon,
                    lat,
                    metres: check_metres(m)?,
                },
                (None, Some(k)) => {
                    if k == 0 {
                        return Err(usage(
                            "--k 0 asks for no records; give --k 1 or more (the K nearest records)",
                        ));
                    }
                    Query::Nearest {
                        lon,
                        lat,
                        k: usize::try_from(k).unwrap_or(usize::MAX),
                    }
                }
                (None, None) => {
                    return Err(usage("--near needs --within-m METRES or --k K"));
                }
            }
        }
        Path::Text => {
            let text = a.text.unwrap_or_default();
            if def.kind == IndexKind::Ngram && a.any {
                return Err(usage(format!(
                    "--any applies to keyword indexes; `{}` is an ngram index, which finds --text as a substring",
                    def.name
                )));
            }
            if def.tokens(text).is_empty() {
                return Err(usage(format!(
                    "--text `{text}` has nothing to search for: {}",
                    if def.kind == IndexKind::Ngram {
                        "give at least one letter or digit"
                    } else {
                        "words are runs of letters and digits; give at least one"
                    }
                )));
            }
            Query::Text {
                text: text.to_owned(),
                all: !a.any,
            }
        }
        Path::Join => {
            let other = db.dataset(a.join.unwrap_or_default())?;
            let field = a.join_field.unwrap_or_default().trim();
            if field.is_empty() {
                return Err(usage(
                    "--join-field needs a field name: the geometry field of the other dataset",
                ));
            }
            if let Some(t) = other.def().field_type(field)
                && !matches!(t, FieldType::Any)
                && !t.is_geometry()
            {
                return Err(usage(format!(
                    "--join-field `{field}` of dataset `{}` is declared {t}; the join needs a geometry field (declared point, rectangle, polygon or geometry)",
                    other.name()
                )));
            }
            let pred = match a.within_m {
                Some(m) => JoinPredicate::WithinDistance(check_metres(m)?),
                None => JoinPredicate::Intersects,
            };
            return Ok(Plan::Join {
                other,
                field: field.to_owned(),
                pred,
            });
        }
    };
    Ok(Plan::Query(q))
}

/// `an rtree index on loc (reconcile antimatter)`.
fn index_phrase(def: &IndexDef) -> String {
    let desc = describe(def);
    let rest = desc.split_once(' ').map_or("", |(_, r)| r);
    format!("{} {} index {rest}", article(def.kind), def.kind)
}

/// Distances are printed to the millimetre.
fn metres(d: f64) -> Value {
    Value::Double((d * 1000.0).round() / 1000.0)
}

/// One output line for a hit. Non-index-only: the record (with
/// `_distance_m`); index-only: `{"pk", "distance_m"?, "record"?}`. A join
/// prefixes `"probe"`, replacing a record field of that name (`collided`
/// is set then).
fn hit_line(hit: QueryHit, index_only: bool, probe: Option<Value>, collided: &mut bool) -> Value {
    let mut fields: Vec<(String, Value)> = Vec::new();
    let joined = probe.is_some();
    if let Some(p) = probe {
        fields.push(("probe".to_owned(), p));
    }
    match hit.record {
        Some(Value::Object(rec)) if !index_only => {
            for (k, v) in rec {
                if joined && k == "probe" {
                    *collided = true;
                    continue;
                }
                fields.push((k, v));
            }
            if let Some(d) = hit.distance_m {
                fields.push(("_distance_m".to_owned(), metres(d)));
            }
        }
        record => {
            fields.push(("pk".to_owned(), Value::Array(hit.pk)));
            if let Some(d) = hit.distance_m {
                fields.push(("distance_m".to_owned(), metres(d)));
            }
            if let Some(r) = record {
                fields.push(("record".to_owned(), r));
            }
        }
    }
    Value::Object(fields)
}

/// What happened to the records of the join's other dataset.
#[derive(Default)]
struct ProbeCounts {
    probes: u64,
    /// Records without the field (or null there).
    missing: u64,
    /// Records whose field is not a geometry.
    not_geometry: u64,
    /// Non-point geometries, skipped by a within-distance join.
    not_point: u64,
    /// The first scan error, which ends the probes.
    error: Option<silt::Error>,
}

/// The probes of a spatial join: every record of the other dataset whose
/// field holds a geometry (or a value that converts to one), as (primary
/// key, geometry).
struct Probes {
    scan: silt::DatasetScan,
    field: String,
    key: Vec<String>,
    points_only: bool,
    counts: Rc<RefCell<ProbeCounts>>,
}

impl Iterator for Probes {
    type Item = (Value, Geometry);

    fn next(&mut self) -> Option<(Value, Geometry)> {
        loop {
            let rec = match self.scan.next()? {
                Ok(r) => r,
                Err(e) => {
                    self.counts.borrow_mut().error = Some(e);
                    return None;
                }
            };
            let mut c = self.counts.borrow_mut();
            let g = match rec.get(&self.field) {
                None | Some(Value::Null) => {
                    c.missing += 1;
                    continue;
                }
                Some(Value::Geometry(g)) => g.clone(),
                Some(v) => match silt::value::coerce(&self.field, FieldType::Geometry, v.clone()) {
                    Ok(Value::Geometry(g)) => g,
                    _ => {
                        c.not_geometry += 1;
                        continue;
                    }
                },
            };
            if self.points_only && !matches!(g, Geometry::Point { .. }) {
                c.not_point += 1;
                continue;
            }
            c.probes += 1;
            let mut key: Vec<Value> = self
                .key
                .iter()
                .map(|k| rec.get(k).cloned().unwrap_or(Value::Null))
                .collect();
            let id = if key.len() == 1 {
                key.pop().unwrap_or(Value::Null)
            } else {
                Value::Array(key)
            };
            return Some((id, g));
        }
    }
}

pub fn query(db: &Database, a: &QueryArgs) -> CliResult<()> {
    let path = check_flags(a)?;
    let ds = db.dataset(a.dataset)?;
    let def = find_def(&ds, a.index)?;
    let plan = plan(db, &ds, &def, a, path)?;
    let recent = matches!(plan, Plan::Query(Query::Recent { .. }));
    let opts = silt::QueryOptions {
        index_only: a.index_only,
        limit: a.limit.map(|l| usize::try_from(l).unwrap_or(usize::MAX)),
    };

    let mut out = BufWriter::new(std::io::stdout().lock());
    let mut n = 0u64;
    let mut collided = false;
    let start = Instant::now();
    let (stats, join) = match plan {
        Plan::Query(q) => {
            let mut results = ds.query(&def.name, &q, opts)?;
            let shape = ds.def();
            for hit in results.by_ref() {
                let mut hit = hit?;
                hit.record = hit.record.map(|r| shape.present(r));
                let line = hit_line(hit, a.index_only, None, &mut collided);
                writeln!(out, "{line}").map_err(CliError::from_stdout)?;
                n += 1;
            }
            (results.stats(), None)
        }
        Plan::Join { other, field, pred } => {
            let counts = Rc::new(RefCell::new(ProbeCounts::default()));
            let probes = Probes {
                scan: other.scan(Bound::Unbounded, Bound::Unbounded)?,
                field: field.clone(),
                key: other.def().primary_key.clone(),
                points_only: matches!(pred, JoinPredicate::WithinDistance(_)),
                counts: counts.clone(),
            };
            let mut pairs = ds.spatial_join(&def.name, probes, pred, opts)?;
            let shape = ds.def();
            for pair in pairs.by_ref() {
                let (id, mut hit) = pair?;
                hit.record = hit.record.map(|r| shape.present(r));
                let line = hit_line(hit, a.index_only, Some(id), &mut collided);
                writeln!(out, "{line}").map_err(CliError::from_stdout)?;
                n += 1;
            }
            let stats = pairs.stats();
            drop(pairs);
            let c = Rc::try_unwrap(counts)
                .map(RefCell::into_inner)
                .unwrap_or_default();
            (stats, Some((other, field, pred, c)))
        }
    };
    out.flush().map_err(CliError::from_stdout)?;
    let el = start.elapsed();

    let mut summary = String::new();
    let what = match (&join, a.index_only) {
        (Some(_), _) => plural(n, "pair", "pairs"),
        (None, true) => plural(n, "entry", "entries"),
        (None, false) => plural(n, "record", "records"),
    };
    summary.push_str(&format!("{what} in {:.2} ms", el.as_secs_f64() * 1e3));
    if let Some((other, field, pred, c)) = &join {
        if let Some(e) = &c.error {
            return Err(CliError::Failed(format!(
                "the join stopped while reading dataset `{}`: {e}",
                other.name()
            )));
        }
        summary.push_str(&format!(
            "; join: {} from `{}`.`{field}` ({})",
            plural(c.probes, "probe", "probes"),
            other.name(),
            match pred {
                JoinPredicate::Intersects => "intersecting".to_owned(),
                JoinPredicate::WithinDistance(m) => format!("within {m} m"),
            }
        ));
        let mut skipped = Vec::new();
        if c.missing > 0 {
            skipped.push(format!("{} without `{field}`", c.missing));
        }
        if c.not_geometry > 0 {
            skipped.push(format!(
                "{} whose `{field}` is not a geometry",
                c.not_geometry
            ));
        }
        if c.not_point > 0 {
            skipped.push(format!(
                "{} whose `{field}` is not a point (--within-m probes with points)",
                c.not_point
            ));
        }
        if !skipped.is_empty() {
            summary.push_str(&format!(
                ", skipped {}: {}",
                plural(
                    c.missing + c.not_geometry + c.not_point,
                    "record",
                    "records"
                ),
                skipped.join(", ")
            ));
        }
    }
    let path_text = if recent {
        format!(
            "index {} ({}; most recent first, validated through the primary)",
            def.name, def.kind
        )
    } else if a.index_only {
        if stats.fetched > 0 {
            format!(
                "index-only (index {}; {} validated through the primary)",
                def.name,
                plural(stats.fetched, "hit", "hits")
            )
        } else {
            format!("index-only (index {})", def.name)
        }
    } else {
        format!("index {} (validated through the primary)", def.name)
    };
    summary.push_str(&format!(
        "; access path: {path_text}; {}",
        stats_text(&stats, def.kind)
    ));
    eprintln!("{summary}");
    if collided {
        eprintln!(
            "note: records of `{}` have a field named `probe`; in the join output `probe` is the probe's key instead (use --index-only to get {{\"probe\", \"pk\"}} lines)",
            ds.name()
        );
    }
    Ok(())
}

/// The query statistics for people.
pub fn stats_text(s: &QueryStats, kind: IndexKind) -> String {
    let mut parts = vec![plural(
        s.components,
        "index component touched",
        "index components touched",
    )];
    if kind == IndexKind::Rtree {
        parts.push(plural(s.blocks, "leaf block read", "leaf blocks read"));
        if s.z_pruned > 0 {
            parts.push(plural(
                s.z_pruned,
                "component skipped by Z range",
                "components skipped by Z range",
            ));
        }
    }
    if matches!(kind, IndexKind::Dhvb | IndexKind::Dhb) {
        parts.push(plural(s.blocks, "next-match seek", "next-match seeks"));
    }
    if kind.is_grid() {
        parts.push(plural(s.blocks, "cell range read", "cell ranges read"));
    }
    if matches!(kind, IndexKind::Embedded | IndexKind::Brin) {
        parts.push(plural(
            s.blocks,
            "primary block read",
            "primary blocks read",
        ));
        parts.push(plural(
            s.blocks_pruned,
            "block skipped by its zone map",
            "blocks skipped by their zone maps",
        ));
        if s.chunks_pruned > 0 {
            parts.push(plural(
                s.chunks_pruned,
                "chunk skipped by the block range index",
                "chunks skipped by the block range index",
            ));
        }
    }
    parts.push(plural(s.candidates, "candidate", "candidates"));
    parts.push(plural(s.fetched, "record fetched", "records fetched"));
    parts.push(format!("{} answered from the index", count(s.index_only)));
    parts.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bbox() {
        assert!(matches!(
            parse_bbox("170,-20,-170,20"),
            Ok(Geometry::Rect { min_x, .. }) if min_x == 170.0
        ));
        assert!(parse_bbox("1,2,3").is_err());
        assert!(parse_bbox("0,10,1,5").is_err());
        assert!(parse_bbox("200,0,100,1").is_err());
        assert!(parse_bbox("a,b,c,d").is_err());
    }

    #[test]
    fn points() {
        assert_eq!(parse_point("2.35, 48.86").ok(), Some((2.35, 48.86)));
        let e = parse_point("10,95")
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(e.contains("latitude 95 is outside [-90, 90]"), "{e}");
        assert!(parse_point("190,0").is_err());
    }

    #[test]
    fn geometries() {
        assert!(matches!(
            parse_geometry("POINT(1 2)"),
            Ok(Geometry::Point { x, y }) if x == 1.0 && y == 2.0
        ));
        assert!(matches!(
            parse_geometry("{\"type\": \"Point\", \"coordinates\": [3, 4]}"),
            Ok(Geometry::Point { x, .. }) if x == 3.0
        ));
        assert!(matches!(
            parse_geometry("[0, 0, 1, 1]"),
            Ok(Geometry::Rect { .. })
        ));
        let e = parse_geometry("POINT(1)")
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(e.starts_with("--intersects: "), "{e}");
        assert!(parse_geometry("").is_err());
    }

    #[test]
    fn lines() {
        let hit = QueryHit {
            pk: vec![Value::Int(1)],
            record: Some(Value::Object(vec![
                ("id".into(), Value::Int(1)),
                ("probe".into(), Value::Int(9)),
            ])),
            distance_m: Some(12.34567),
            stored: None,
        };
        let mut c = false;
        assert_eq!(
            hit_line(hit.clone(), false, None, &mut c).to_string(),
            r#"{"id":1,"probe":9,"_distance_m":12.346}"#
        );
        assert!(!c);
        assert_eq!(
            hit_line(hit.clone(), false, Some(Value::from("a")), &mut c).to_string(),
            r#"{"probe":"a","id":1,"_distance_m":12.346}"#
        );
        assert!(c);
        assert_eq!(
            hit_line(hit, true, Some(Value::Int(5)), &mut c).to_string(),
            r#"{"probe":5,"pk":[1],"distance_m":12.346,"record":{"id":1,"probe":9}}"#
        );
        let bare = QueryHit {
            pk: vec![Value::Int(2)],
            record: None,
            distance_m: None,
            stored: None,
        };
        assert_eq!(
            hit_line(bare, true, None, &mut c).to_string(),
            r#"{"pk":[2]}"#
        );
    }

    #[test]
    fn phrases() {
        let r = IndexDef::rtree("loc", "loc");
        assert_eq!(
            index_phrase(&r),
            "an rtree index on loc (reconcile antimatter)"
        );
        let b = IndexDef::btree("ab", &["a", "b"]);
        assert_eq!(index_phrase(&b), "a btree index on a, b");
        let n = IndexDef::ngram("t", "text", 3);
        assert_eq!(
            index_phrase(&n),
            "an ngram index on text (gram 3, reconcile deleted-keys)"
        );
    }
}
