//! Secondary index commands: create-index and drop-index, and the index
//! descriptions other commands show. `silt query` is in `query`.

use crate::describe::{describe, option_parts};
use crate::error::{CliError, CliResult};
use crate::stats::{Totals, totals_of};
use crate::util::{bytes, duration, parse_numbers, plural};
use silt::lsm::TreeStats;
use silt::lsm::policy::MergePolicy;
use silt::{Database, Dataset, DatasetDef, FieldType, IndexDef, IndexKind, ReconcileOption};
use std::time::Instant;

/// Parse `--type` (or the TYPE of `--index NAME:TYPE:FIELD`).
pub fn parse_kind(text: &str) -> CliResult<IndexKind> {
    IndexKind::parse(text.trim()).map_err(|_| {
        CliError::Usage(format!(
            "unknown index type `{}`; available: btree (equality and ranges), rtree (geometries), keyword (words of a text), ngram (substrings of a text), dhvb, dhb, shb or sif (the Hilbert and grid spatial indexes of the LSM spatial study), for the k most recent matches embedded, eager, lazy or composite, and valuelist (publish/subscribe lists: --time FIELD, --expiry FIELD)",
            text.trim()
        ))
    })
}

/// Parse `--reconcile`.
fn parse_reconcile(text: &str) -> CliResult<ReconcileOption> {
    ReconcileOption::parse(text.trim()).map_err(|_| {
        CliError::Usage(format!(
            "unknown --reconcile `{}`; use antimatter (AMLSM: antimatter entries cancel deleted ones during merges) or deleted-keys (a deleted-key B+-tree with a bloom filter per component)",
            text.trim()
        ))
    })
}

/// `a` or `an`, before the name of an index type.
pub fn article(kind: IndexKind) -> &'static str {
    match kind {
        IndexKind::Rtree | IndexKind::Ngram | IndexKind::Embedded | IndexKind::Eager => "an",
        IndexKind::Btree
        | IndexKind::Keyword
        | IndexKind::Lazy
        | IndexKind::Composite
        | IndexKind::Dhvb
        | IndexKind::Dhb
        | IndexKind::Sif
        | IndexKind::Valuelist
        | IndexKind::Brin => "a",
        IndexKind::Shb => "an",
    }
}

/// The field names of `--field`, trimmed, empty ones refused.
fn field_names(fields: &[String]) -> CliResult<Vec<&str>> {
    let mut out: Vec<&str> = Vec::with_capacity(fields.len());
    for f in fields {
        let f = f.trim();
        if f.is_empty() {
            return Err(CliError::Usage(
                "--field needs a field name, e.g. --field age".into(),
            ));
        }
        if out.contains(&f) {
            return Err(CliError::Usage(format!(
                "field `{f}` is given twice; each index field may appear once"
            )));
        }
        out.push(f);
    }
    if out.is_empty() {
        return Err(CliError::Usage(
            "an index needs at least one field: --field NAME (repeat for a composite btree index)"
                .into(),
        ));
    }
    Ok(out)
}

/// Kind-specific options of `create-index`, as typed.
#[derive(Default)]
pub struct IndexParams<'a> {
    pub reconcile: Option<&'a str>,
    pub gram: Option<usize>,
    pub space: Option<&'a str>,
    pub policy: Option<&'a str>,
    pub bits_per_key: Option<f64>,
    /// `--order` of an rtree index.
    pub order: Option<&'a str>,
    /// `--levels` of an shb or sif index.
    pub levels: Option<&'a str>,
    /// `--time` and `--expiry` of a valuelist index.
    pub time: Option<&'a str>,
    pub expiry: Option<&'a str>,
    /// `--chunk-size` and `--form` of a brin index.
    pub chunk_size: Option<&'a str>,
    pub form: Option<&'a str>,
}

/// Build an index definition from command-line parts; the merge policy
/// defaults to the dataset's.
pub fn index_def(
    name: &str,
    kind: IndexKind,
    fields: &[String],
    p: &IndexParams,
    default_policy: &MergePolicy,
) -> CliResult<IndexDef> {
    let fields = field_names(fields)?;
    if !kind.is_btree() && fields.len() != 1 {
        return Err(CliError::Usage(format!(
            "{} {kind} index indexes exactly one field, but {} are given ({}); create one index per field",
            article(kind),
            fields.len(),
            fields.join(", ")
        )));
    }
    if p.gram.is_some() && kind != IndexKind::Ngram {
        return Err(CliError::Usage(format!(
            "--gram sets the n-gram length of an ngram index; this is a {kind} index (use --type ngram)"
        )));
    }
    if let Some(n) = p.gram
        && !(1..=32).contains(&n)
    {
        return Err(CliError::Usage(format!(
            "--gram {n}: the n-gram length must be between 1 and 32 (3, the default, suits most text)"
        )));
    }
    if p.space.is_some()
        && !matches!(
            kind,
            IndexKind::Rtree | IndexKind::Dhvb | IndexKind::Shb | IndexKind::Sif
        )
    {
        return Err(CliError::Usage(format!(
            "--space sets the coordinate space of an rtree index; this is a {kind} index"
        )));
    }
    if p.reconcile.is_some() && (kind.is_btree() || kind.is_recency()) {
        return Err(CliError::Usage(format!(
            "--reconcile applies to rtree, keyword and ngram indexes; {} {kind} index always reconciles deletes with antimatter entries",
            article(kind)
        )));
    }
    if let Some(b) = p.bits_per_key {
        if kind != IndexKind::Embedded {
            return Err(CliError::Usage(format!(
                "--bits-per-key sets the bloom filters of an embedded index; this is {} {kind} index (use --type embedded)",
                article(kind)
            )));
        }
        if !(b.is_finite() && (1.0..=1000.0).contains(&b)) {
            return Err(CliError::Usage(format!(
                "--bits-per-key {b}: give a number of bits between 1 and 1000 (100, the default, is what the LevelDB++ study found best)"
            )));
        }
    }
    let mut def = match kind {
        IndexKind::Btree => IndexDef::btree(name, &fields),
        IndexKind::Rtree => IndexDef::rtree(name, fields[0]),
        IndexKind::Dhvb | IndexKind::Dhb | IndexKind::Shb | IndexKind::Sif => IndexDef {
            kind,
            ..IndexDef::rtree(name, fields[0])
        },
        IndexKind::Keyword => IndexDef::keyword(name, fields[0]),
        IndexKind::Ngram => {
            IndexDef::ngram(name, fields[0], p.gram.unwrap_or(silt::index::DEFAULT_GRAM))
        }
        IndexKind::Composite => IndexDef {
            kind,
            ..IndexDef::btree(name, &fields)
        },
        IndexKind::Embedded | IndexKind::Eager | IndexKind::Lazy | IndexKind::Brin => {
            IndexDef::recency(name, kind, fields[0])
        }
        IndexKind::Valuelist => {
            let Some(t) = p.time else {
                return Err(CliError::Usage(
                    "a valuelist index needs --time FIELD: the integer field (seconds, milliseconds or a logical clock) its items are ordered and windowed by".into(),
                ));
            };
            IndexDef {
                kind,
                options: silt::IndexOptions {
                    time: Some(t.trim().to_owned()),
                    expiry: p.expiry.map(|e| e.trim().to_owned()),
                    ..Default::default()
                },
                ..IndexDef::btree(name, &fields)
            }
        }
    };
    if kind != IndexKind::Valuelist && (p.time.is_some() || p.expiry.is_some()) {
        return Err(CliError::Usage(format!(
            "--time and --expiry apply to valuelist indexes; this is {} {kind} index (use --type valuelist)",
            article(kind)
        )));
    }
    def.options.bits_per_key = p.bits_per_key;
    if (p.chunk_size.is_some() || p.form.is_some()) && kind != IndexKind::Brin {
        return Err(CliError::Usage(format!(
            "--chunk-size and --form set the chunk index of a brin index; this is {} {kind} index (use --type brin)",
            article(kind)
        )));
    }
    if let Some(c) = p.chunk_size {
        def.options.chunk_bytes = Some(crate::volume::parse_size("--chunk-size", c)?);
    }
    if let Some(f) = p.form {
        def.options.brin_form = Some(silt::storage::brin::BrinForm::parse(f).ok_or_else(|| {
            CliError::Usage(format!(
                "--form {f}: a brin index's chunk index is `interval-tree` (the default) or `key-value`"
            ))
        })?);
    }
    if let Some(o) = p.order {
        if kind != IndexKind::Rtree {
            return Err(CliError::Usage(format!(
                "--order sets the component order of an rtree index; this is {} {kind} index",
                article(kind)
            )));
        }
        def.options.order = Some(silt::index::RtreeOrder::parse(o.trim())?);
    }
    if let Some(l) = p.levels {
        if !kind.is_grid() {
            return Err(CliError::Usage(format!(
                "--levels sets the grid of an shb or sif index; this is {} {kind} index",
                article(kind)
            )));
        }
        def.options.levels = Some(
            silt::geo::grid::parse_levels(l)
                .map_err(|m| CliError::Usage(format!("--levels {l}: {m}")))?,
        );
    }
    if let Some(r) = p.reconcile {
        def = def.reconcile(parse_reconcile(r)?);
    }
    if let Some(s) = p.space {
        let v = parse_numbers("--space", s, "MINX,MINY,MAXX,MAXY", "0,0,1000,1000")?;
        let (a, b, c, d) = (v[0], v[1], v[2], v[3]);
        if a >= c || b >= d {
            return Err(CliError::Usage(format!(
                "--space {s}: MINX must be below MAXX and MINY below MAXY (the order is MINX,MINY,MAXX,MAXY)"
            )));
        }
        def.options.space = Some([a, b, c, d]);
    }
    let policy_given = p.policy.is_some();
    def = def.policy(match p.policy {
        Some(spec) => MergePolicy::parse(spec)?,
        None => default_policy.clone(),
    });
    if def.reconcile_mode() == ReconcileOption::DeletedKeys && def.policy.is_leveled() {
        return Err(CliError::Usage(format!(
            "index `{name}` reconciles deletes with a deleted-key B+-tree{}, which the leveled merge policy{} cannot use; add --reconcile antimatter, or choose another policy, e.g. --policy 'tiered(4)'",
            if p.reconcile.is_none() {
                format!(" (the default for {kind} indexes)")
            } else {
                String::new()
            },
            if policy_given { "" } else { " (the dataset's)" }
        )));
    }
    def.validate()?;
    Ok(def)
}

/// Check that the fields of an index can hold what the index needs, given
/// the dataset's declared types, before any record is read.
pub fn check_field_types(ds: &DatasetDef, def: &IndexDef) -> CliResult<()> {
    for f in &def.fields {
        let ty = ds.field_type(f);
        match def.kind {
            IndexKind::Btree
            | IndexKind::Composite
            | IndexKind::Embedded
            | IndexKind::Eager
            | IndexKind::Lazy
            | IndexKind::Valuelist
            | IndexKind::Brin => {
                if let Some(t) = ty.filter(|t| t.is_geometry()) {
                    return Err(CliError::Usage(format!(
                        "field `{f}` is declared {t}; {} {} index cannot order geometries: use --type rtree",
                        article(def.kind),
                        def.kind
                    )));
                }
            }
            IndexKind::Rtree
            | IndexKind::Dhvb
            | IndexKind::Dhb
            | IndexKind::Shb
            | IndexKind::Sif => match ty {
                Some(t) if t.is_geometry() => {}
                Some(t) => {
                    return Err(CliError::Usage(format!(
                        "field `{f}` is declared {t}; an rtree index needs a geometry field (declared point, rectangle, polygon or geometry)"
                    )));
                }
                None => {
                    return Err(CliError::Usage(format!(
                        "field `{f}` of dataset `{}` has no declared type; an rtree index needs a field declared point, rectangle, polygon or geometry (e.g. `create-dataset ... --field {f}:point`), so that GeoJSON, WKT and [lon, lat] values are stored as geometries",
                        ds.name
                    )));
                }
            },
            IndexKind::Keyword | IndexKind::Ngram => match ty {
                None | Some(FieldType::String | FieldType::Any) => {}
                Some(t) => {
                    return Err(CliError::Usage(format!(
                        "field `{f}` is declared {t}; {} {} index needs a text field (declared string, or undeclared)",
                        article(def.kind),
                        def.kind
                    )));
                }
            },
        }
    }
    Ok(())
}

/// Parse `create-dataset --index NAME:FIELD[,FIELD...]` (a btree index) or
/// `--index NAME:TYPE:FIELD` (any type, default options).
pub fn parse_index_spec(spec: &str, ds: &DatasetDef) -> CliResult<IndexDef> {
    let bad = || {
        CliError::Usage(format!(
            "--index `{spec}` is not NAME:FIELD[,FIELD...] or NAME:TYPE:FIELD, e.g. --index by_age:age or --index loc:rtree:loc"
        ))
    };
    let parts: Vec<&str> = spec.split(':').collect();
    let (name, kind, fields) = match parts.as_slice() {
        [name, fields] => (*name, IndexKind::Btree, *fields),
        [name, kind, fields] => (*name, parse_kind(kind)?, *fields),
        _ => return Err(bad()),
    };
    if name.trim().is_empty() {
        return Err(bad());
    }
    let fields: Vec<String> = fields.split(',').map(str::to_owned).collect();
    let def = index_def(
        name.trim(),
        kind,
        &fields,
        &IndexParams::default(),
        &ds.policy,
    )?;
    check_field_types(ds, &def)?;
    Ok(def)
}

/// The trees (one per partition) of index `index` of a dataset's stats.
fn index_trees<'a>(ds: &str, index: &str, trees: &'a [TreeStats]) -> Vec<&'a TreeStats> {
    trees
        .iter()
        .filter(|t| {
            t.name
                .strip_prefix(ds)
                .and_then(|s| s.strip_prefix("/p"))
                .and_then(|s| s.split_once('/'))
                .is_some_and(|(p, name)| p.bytes().all(|b| b.is_ascii_digit()) && name == index)
        })
        .collect()
}

pub fn find_def(ds: &Dataset, index: &str) -> CliResult<IndexDef> {
    let defs = ds.index_defs();
    if let Some(d) = defs.iter().find(|d| d.name == index) {
        return Ok(d.clone());
    }
    if index == "primary" {
        return Err(CliError::Usage(format!(
            "`primary` is the primary index of dataset `{}`: query it with `silt get` or `silt scan`; `--index` names a secondary index",
            ds.name()
        )));
    }
    let have = if defs.is_empty() {
        "it has none; create one with `silt create-index`".to_owned()
    } else {
        format!(
            "its indexes: {}",
            defs.iter()
                .map(|d| format!("{} ({})", d.name, describe(d)))
                .collect::<Vec<_>>()
                .join(", ")
        )
    };
    Err(CliError::NotFound(format!(
        "no index named `{index}` on dataset `{}`; {have}",
        ds.name()
    )))
}

pub struct CreateIndexOptions<'a> {
    pub dataset: &'a str,
    pub name: &'a str,
    pub kind: &'a str,
    pub fields: &'a [String],
    pub params: IndexParams<'a>,
}

pub fn create_index(db: &Database, o: &CreateIndexOptions) -> CliResult<()> {
    let kind = parse_kind(o.kind)?;
    let ds = db.dataset(o.dataset)?;
    let def = index_def(o.name, kind, o.fields, &o.params, &ds.def().policy)?;
    check_field_types(&ds.def(), &def)?;
    let start = Instant::now();
    let def = db.create_index(o.dataset, def)?;
    let el = start.elapsed();
    print_created(&ds, &def, Some(el));
    Ok(())
}

/// The storage totals of one index over all partitions, and its partition count.
pub fn index_totals(ds: &Dataset, index: &str) -> (Totals, usize) {
    let st = ds.stats();
    let trees = index_trees(ds.name(), index, &st.indexes);
    (totals_of(&trees), trees.len())
}

/// Print what a created index holds (entries, components) after its build.
pub fn print_created(ds: &Dataset, def: &IndexDef, took: Option<std::time::Duration>) {
    if matches!(def.kind, IndexKind::Embedded | IndexKind::Brin) {
        let (t, partitions) = index_totals(ds, "primary");
        let what = if def.kind == IndexKind::Brin {
            match def.chunks() {
                Some((b, form)) => format!(
                    "type: brin, field: {}, a block range index over {} chunks ({})",
                    def.fields.join(", "),
                    bytes(b),
                    form.name().replace('_', "-")
                ),
                None => format!(
                    "type: brin, field: {}, zone maps only",
                    def.fields.join(", ")
                ),
            }
        } else {
            format!(
                "type: embedded, field: {}, bits per key: {}",
                def.fields.join(", "),
                def.bits_per_key()
            )
        };
        let built = if def.kind == IndexKind::Brin {
            if def.chunks().is_some() {
                "chunk ranges (chunk min/max)"
            } else {
                "zone maps (block min/max)"
            }
        } else {
            "bloom filters and zone maps"
        };
        println!(
            "created index `{}` on dataset `{}`{}\n  {what}\n  {built} of `{}` built into the primary index's {} over {} ({} on disk); no index tree",
            def.name,
            ds.name(),
            took.map(|d| format!(" in {}", duration(d)))
                .unwrap_or_default(),
            def.fields.join(", "),
            plural(t.components, "component", "components"),
            plural(partitions as u64, "partition", "partitions"),
            bytes(t.disk_bytes),
        );
        return;
    }
    let (t, partitions) = index_totals(ds, &def.name);
    let entries = t.entries + t.memory_entries;
    println!(
        "created index `{}` on dataset `{}`{}\n  type: {}, fields: {}{}, merge policy: {}\n  bulk-built {} over {} ({}, {} on disk)",
        def.name,
        ds.name(),
        took.map(|d| format!(" in {}", duration(d)))
            .unwrap_or_default(),
        def.kind,
        def.fields.join(", "),
        option_parts(def, ": ")
            .iter()
            .map(|o| format!(", {o}"))
            .collect::<String>(),
        def.policy,
        plural(entries, "entry", "entries"),
        plural(partitions as u64, "partition", "partitions"),
        plural(t.components, "component", "components"),
        bytes(t.disk_bytes),
    );
}

pub fn drop_index(db: &Database, dataset: &str, name: &str) -> CliResult<()> {
    let ds = db.dataset(dataset)?;
    let def = find_def(&ds, name)?;
    let st = ds.stats();
    let before = totals_of(&index_trees(dataset, name, &st.indexes));
    db.drop_index(dataset, name)?;
    println!(
        "dropped index `{name}` ({}) of dataset `{dataset}` ({} and {} on disk removed)",
        describe(&def),
        plural(before.components, "component", "components"),
        bytes(before.disk_bytes)
    );
    Ok(())
}
