//! Secondary index commands: create-index, drop-index, query.

use crate::error::{CliError, CliResult};
use crate::stats::totals_of;
use crate::util::{bytes, count, duration, parse_key_part, plural};
use silt::lsm::TreeStats;
use silt::lsm::policy::MergePolicy;
use silt::{Database, Dataset, IndexDef, IndexKind, Value};
use std::io::{BufWriter, Write};
use std::ops::Bound;
use std::time::Instant;

/// Index types that are planned but not available yet.
const COMING_TYPES: [&str; 3] = ["rtree", "keyword", "ngram"];

/// Parse `--type`, saying which types exist (and which are coming).
pub fn parse_kind(text: &str) -> CliResult<IndexKind> {
    IndexKind::parse(text.trim()).map_err(|e| {
        let lower = text.trim().to_ascii_lowercase();
        if COMING_TYPES.contains(&lower.as_str()) {
            CliError::Usage(format!(
                "index type `{lower}` is not available yet; available: btree"
            ))
        } else {
            CliError::Silt(e)
        }
    })
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
            "an index needs at least one field: --field NAME (repeat for a composite index)".into(),
        ));
    }
    Ok(out)
}

/// Build an index definition from command-line parts; `policy` defaults to
/// the dataset's merge policy.
pub fn index_def(
    name: &str,
    kind: IndexKind,
    fields: &[String],
    policy: Option<&str>,
    default_policy: &MergePolicy,
) -> CliResult<IndexDef> {
    let fields = field_names(fields)?;
    let mut def = match kind {
        IndexKind::Btree => IndexDef::btree(name, &fields),
    };
    def = def.policy(match policy {
        Some(p) => MergePolicy::parse(p)?,
        None => default_policy.clone(),
    });
    def.validate()?;
    Ok(def)
}

/// Parse `create-dataset --index NAME:FIELD[,FIELD...]` into a btree index.
pub fn parse_index_spec(spec: &str, default_policy: &MergePolicy) -> CliResult<IndexDef> {
    let Some((name, fields)) = spec.split_once(':') else {
        return Err(CliError::Usage(format!(
            "--index `{spec}` is not NAME:FIELD[,FIELD...], e.g. --index by_age:age"
        )));
    };
    let fields: Vec<String> = fields.split(',').map(str::to_owned).collect();
    index_def(name.trim(), IndexKind::Btree, &fields, None, default_policy)
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

/// A one-line description of an index: `btree on age, name`.
pub fn describe(def: &IndexDef) -> String {
    format!("{} on {}", def.kind, def.fields.join(", "))
}

fn find_def(ds: &Dataset, index: &str) -> CliResult<IndexDef> {
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
    pub policy: Option<&'a str>,
}

pub fn create_index(db: &Database, o: &CreateIndexOptions) -> CliResult<()> {
    let kind = parse_kind(o.kind)?;
    let ds = db.dataset(o.dataset)?;
    let def = index_def(o.name, kind, o.fields, o.policy, &ds.def().policy)?;
    let start = Instant::now();
    let def = db.create_index(o.dataset, def)?;
    let el = start.elapsed();
    print_created(&ds, &def, Some(el));
    Ok(())
}

/// Print what a created index holds (entries, components) after its build.
pub fn print_created(ds: &Dataset, def: &IndexDef, took: Option<std::time::Duration>) {
    let st = ds.stats();
    let trees = index_trees(ds.name(), &def.name, &st.indexes);
    let t = totals_of(&trees);
    let entries = t.entries + t.memory_entries;
    println!(
        "created index `{}` on dataset `{}`{}\n  type: {}, fields: {}, merge policy: {}\n  bulk-built {} over {} ({}, {} on disk)",
        def.name,
        ds.name(),
        took.map(|d| format!(" in {}", duration(d)))
            .unwrap_or_default(),
        def.kind,
        def.fields.join(", "),
        def.policy,
        plural(entries, "entry", "entries"),
        plural(trees.len() as u64, "partition", "partitions"),
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

pub struct QueryOptions<'a> {
    pub dataset: &'a str,
    pub index: &'a str,
    pub eq: &'a [String],
    pub from: &'a [String],
    pub to: &'a [String],
    pub limit: Option<u64>,
    pub index_only: bool,
}

/// Counters of the trees a query touches, read before and after it.
#[derive(Clone, Copy, Default)]
struct Touched {
    /// Disk components of the index (all partitions).
    index_components: u64,
    /// Disk components the index scans opened (cumulative counter).
    index_scanned: u64,
    /// Point lookups in the primary index (cumulative counter).
    primary_gets: u64,
    /// Disk components those lookups probed (cumulative counter).
    primary_probes: u64,
}

impl Touched {
    fn read(ds: &Dataset, index: &str) -> Touched {
        let st = ds.stats();
        let mut t = Touched::default();
        for tree in index_trees(ds.name(), index, &st.indexes) {
            t.index_components += tree.components.len() as u64;
            t.index_scanned += (tree.components_per_scan * tree.scans as f64).round() as u64;
        }
        for tree in index_trees(ds.name(), "primary", &st.indexes) {
            t.primary_gets += tree.gets;
            t.primary_probes += (tree.components_per_get * tree.gets as f64).round() as u64;
        }
        t
    }
}

/// The values of a bound, typed like `get` keys against the index fields'
/// declared types (the core then converts them to those types).
fn bound_values(
    ds: &Dataset,
    def: &IndexDef,
    texts: &[String],
    what: &str,
) -> CliResult<Vec<Value>> {
    if texts.len() > def.fields.len() {
        return Err(CliError::Usage(format!(
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

pub fn query(db: &Database, o: &QueryOptions) -> CliResult<()> {
    let ds = db.dataset(o.dataset)?;
    let def = find_def(&ds, o.index)?;
    let (lo, hi) = if o.eq.is_empty() {
        (
            bound_values(&ds, &def, o.from, "--from")?,
            bound_values(&ds, &def, o.to, "--to")?,
        )
    } else {
        let v = bound_values(&ds, &def, o.eq, "--eq")?;
        (v.clone(), v)
    };
    let has_lo = !o.eq.is_empty() || !o.from.is_empty();
    let has_hi = !o.eq.is_empty() || !o.to.is_empty();
    let lo_b = if has_lo {
        Bound::Included(lo.as_slice())
    } else {
        Bound::Unbounded
    };
    let hi_b = if has_hi {
        Bound::Included(hi.as_slice())
    } else {
        Bound::Unbounded
    };
    let limit = o.limit.map(|l| usize::try_from(l).unwrap_or(usize::MAX));

    let before = Touched::read(&ds, o.index);
    let start = Instant::now();
    let lines: Vec<String> = if o.index_only {
        ds.index_range_keys(o.index, lo_b, hi_b, limit)?
            .into_iter()
            .map(|h| {
                Value::Object(vec![
                    ("sk".to_owned(), Value::Array(h.sk)),
                    ("pk".to_owned(), Value::Array(h.pk)),
                ])
                .to_string()
            })
            .collect()
    } else {
        ds.index_range(o.index, lo_b, hi_b, limit)?
            .iter()
            .map(Value::to_string)
            .collect()
    };
    let el = start.elapsed();
    let after = Touched::read(&ds, o.index);

    let mut out = BufWriter::new(std::io::stdout().lock());
    for l in &lines {
        writeln!(out, "{l}").map_err(CliError::from_stdout)?;
    }
    out.flush().map_err(CliError::from_stdout)?;

    let n = lines.len() as u64;
    let (what, path) = if o.index_only {
        (
            plural(n, "entry", "entries"),
            format!("index-only (index {})", def.name),
        )
    } else {
        (
            plural(n, "record", "records"),
            format!("index {} (validated through the primary)", def.name),
        )
    };
    let scanned = after.index_scanned.saturating_sub(before.index_scanned);
    let gets = after.primary_gets.saturating_sub(before.primary_gets);
    let probes = after.primary_probes.saturating_sub(before.primary_probes);
    let mut summary = format!(
        "{what} in {:.2} ms; access path: {path}; {}: {} of {} scanned",
        el.as_secs_f64() * 1e3,
        def.name,
        count(scanned),
        plural(after.index_components, "disk component", "disk components"),
    );
    if gets > 0 || !o.index_only {
        summary.push_str(&format!(
            "; primary: {} probing {}",
            plural(gets, "lookup", "lookups"),
            plural(probes, "disk component", "disk components")
        ));
    }
    eprintln!("{summary}");
    Ok(())
}
