//! The small commands: create-dataset, get, scan, delete, compact, stats,
//! drop-dataset. The index commands are in `index`.

use crate::error::{CliError, CliResult};
use crate::index;
use crate::load::spinner_style;
use crate::stats::{self, Totals};
use crate::util::{bytes, duration, parse_key, plural, scan_bounds};
use indicatif::{ProgressBar, ProgressDrawTarget};
use silt::lsm::policy::MergePolicy;
use silt::storage::Compression;
use silt::value::key_to_string;
use silt::{Database, DatasetDef, DbStats, FieldType, IndexDef};
use std::io::{BufWriter, Write};
use std::time::{Duration, Instant};

pub struct CreateOptions<'a> {
    pub name: &'a str,
    pub key: &'a [String],
    pub fields: &'a [String],
    pub partitions: Option<u32>,
    pub memory_mb: Option<u64>,
    pub policy: Option<&'a str>,
    pub compression: Option<&'a str>,
    /// `--remote URL --remote-level N`: levels kept in object storage.
    pub remote: Option<(&'a str, u32)>,
    /// `--index NAME:FIELD[,FIELD...]` or `NAME:TYPE:FIELD` specifications.
    pub indexes: &'a [String],
    /// `--ttl-*`: how records expire.
    pub ttl: Option<silt::TtlDef>,
}

/// Build a dataset definition from command-line options.
/// `a:int,b:decimal(10,2)` as `a:int` and `b:decimal(10,2)`: commas
/// inside parentheses belong to the type.
fn split_fields(s: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let (mut depth, mut start) = (0i32, 0);
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth <= 0 => {
                out.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&s[start..]);
    out
}

pub fn dataset_def(o: &CreateOptions) -> CliResult<DatasetDef> {
    let key: Vec<&str> = o
        .key
        .iter()
        .map(|k| k.trim())
        .filter(|k| !k.is_empty())
        .collect();
    if key.is_empty() {
        return Err(CliError::Usage(
            "--key needs at least one field name, e.g. --key id".into(),
        ));
    }
    let mut def = DatasetDef::new(o.name, &key);
    for f in o.fields.iter().flat_map(|f| split_fields(f)) {
        let Some((name, ty)) = f.rsplit_once(':') else {
            return Err(CliError::Usage(format!(
                "--field `{f}` is not NAME:TYPE, e.g. --field lat:double"
            )));
        };
        let name = name.trim();
        if name.is_empty() {
            return Err(CliError::Usage(format!(
                "--field `{f}` has no field name; use NAME:TYPE, e.g. --field lat:double"
            )));
        }
        if def.field_type(name).is_some() {
            return Err(CliError::Usage(format!(
                "field `{name}` is declared twice with --field"
            )));
        }
        def = def.field(name, FieldType::parse(ty)?);
    }
    if let Some(p) = o.partitions {
        def = def.partitions(p);
    }
    if let Some(mb) = o.memory_mb {
        let b = mb
            .checked_mul(1 << 20)
            .ok_or_else(|| CliError::Usage(format!("--memory-mb {mb} is too large")))?;
        def = def.memory_budget(b);
    }
    if let Some(p) = o.policy {
        def = def.policy(MergePolicy::parse(p)?);
    }
    if let Some(c) = o.compression {
        def = def.compression(Compression::parse(c)?);
    }
    if let Some((url, level)) = o.remote {
        if url.to_ascii_lowercase().starts_with("memory://") {
            return Err(CliError::Usage(format!(
                "--remote {url}: a memory:// bucket lives in one process, and each `silt` command is a process of its own (its objects would be gone at the next command); use s3://bucket/prefix"
            )));
        }
        def = def.remote(url, level);
    }
    def.ttl.clone_from(&o.ttl);
    def.validate()?;
    index_specs(o, &def)?;
    Ok(def)
}

/// The indexes asked for with `--index`, checked against the declared field
/// types and each other.
fn index_specs(o: &CreateOptions, def: &DatasetDef) -> CliResult<Vec<IndexDef>> {
    let mut out: Vec<IndexDef> = Vec::with_capacity(o.indexes.len());
    for spec in o.indexes {
        let idef = index::parse_index_spec(spec, def)?;
        if out.iter().any(|d| d.name == idef.name) {
            return Err(CliError::Usage(format!(
                "index `{}` is given twice with --index",
                idef.name
            )));
        }
        out.push(idef);
    }
    Ok(out)
}

pub fn create_dataset(db: &Database, o: &CreateOptions) -> CliResult<()> {
    let def = dataset_def(o)?;
    let indexes = index_specs(o, &def)?;
    db.create_dataset(def.clone())?;
    let fields = if def.fields.is_empty() {
        "none declared".to_owned()
    } else {
        def.fields
            .iter()
            .map(|(n, t)| format!("{n}:{t}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    println!(
        "created dataset `{}` in {}\n  primary key: {}\n  fields: {}\n  partitions: {}, memory budget: {}, merge policy: {}, compression: {}",
        def.name,
        db.path().display(),
        def.primary_key.join(", "),
        fields,
        def.partitions,
        bytes(def.memory_budget),
        def.policy,
        compression_name(def.compression)
    );
    if let Some(r) = &def.remote {
        println!(
            "  object storage: levels {} and deeper in {}",
            r.from_level,
            r.url.split('?').next().unwrap_or(&r.url)
        );
    }
    if let Some(t) = &def.ttl {
        println!(
            "  ttl: {}",
            crate::describe::ttl(t, Some(t.clock_name(&def)))
        );
    }
    for idef in indexes {
        let created = db.create_index(&def.name, idef)?;
        println!(
            "  index {}: {}, merge policy {}",
            created.name,
            crate::describe::describe(&created),
            created.policy
        );
    }
    Ok(())
}

fn compression_name(c: Compression) -> &'static str {
    match c {
        Compression::None => "none",
        Compression::Lz4 => "lz4",
        Compression::Zstd => "zstd",
    }
}

fn stdout() -> BufWriter<std::io::StdoutLock<'static>> {
    BufWriter::new(std::io::stdout().lock())
}

pub fn get(db: &Database, name: &str, key: &[String], pretty: bool) -> CliResult<()> {
    let ds = db.dataset(name)?;
    let pk = parse_key(&ds, key);
    match ds.get(&pk)? {
        Some(v) => {
            let v = ds.def().present(v);
            let text = if pretty {
                serde_json::to_string_pretty(&v)
                    .map_err(|e| CliError::Failed(format!("cannot render the record: {e}")))?
            } else {
                v.to_string()
            };
            let mut out = stdout();
            writeln!(out, "{text}").map_err(CliError::from_stdout)?;
            out.flush().map_err(CliError::from_stdout)
        }
        None => Err(CliError::NotFound(format!(
            "not found: no record with key {} in dataset `{name}`",
            key_to_string(&pk)
        ))),
    }
}

pub fn scan(
    db: &Database,
    name: &str,
    from: &[String],
    to: &[String],
    limit: Option<u64>,
) -> CliResult<()> {
    let ds = db.dataset(name)?;
    let (lo, hi) = scan_bounds(&ds, from, to)?;
    let start = Instant::now();
    let scan = ds.scan_raw(lo, hi)?;
    let mut out = stdout();
    let take = limit.map_or(usize::MAX, |l| usize::try_from(l).unwrap_or(usize::MAX));
    let mut n = 0u64;
    let def = ds.def();
    for rec in scan.take(take) {
        let v = def.present(rec?);
        writeln!(out, "{v}").map_err(CliError::from_stdout)?;
        n += 1;
    }
    out.flush().map_err(CliError::from_stdout)?;
    eprintln!(
        "{} in {:.1} ms",
        plural(n, "record", "records"),
        start.elapsed().as_secs_f64() * 1e3
    );
    Ok(())
}

pub fn delete(db: &Database, name: &str, key: &[String]) -> CliResult<()> {
    let ds = db.dataset(name)?;
    let pk = parse_key(&ds, key);
    if ds.delete(&pk)? {
        println!("deleted the record with key {}", key_to_string(&pk));
        Ok(())
    } else {
        Err(CliError::NotFound(format!(
            "not found: no record with key {} in dataset `{name}`; nothing deleted",
            key_to_string(&pk)
        )))
    }
}

/// Component count and disk size of a dataset.
fn footprint(db: &Database, name: &str) -> CliResult<Totals> {
    Ok(Totals::of(&db.dataset(name)?.stats().indexes))
}

pub fn compact(db: &Database, name: &str) -> CliResult<()> {
    let ds = db.dataset(name)?;
    let before = footprint(db, name)?;
    let pb = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr_with_hz(10))
        .with_style(spinner_style())
        .with_message(format!("compacting dataset `{name}`"));
    pb.enable_steady_tick(Duration::from_millis(100));
    let start = Instant::now();
    let res = ds.compact();
    let el = start.elapsed();
    pb.finish_and_clear();
    res?;
    let after = footprint(db, name)?;
    println!(
        "compacted dataset `{name}` in {}\n  before: {} ({}), {} on disk\n  after:  {} ({}), {} on disk",
        duration(el),
        plural(before.components, "component", "components"),
        before.level_summary(),
        bytes(before.disk_bytes),
        plural(after.components, "component", "components"),
        after.level_summary(),
        bytes(after.disk_bytes),
    );
    Ok(())
}

pub fn stats(db: &Database, name: Option<&str>, json: bool) -> CliResult<()> {
    let mut st: DbStats = db.stats();
    if let Some(n) = name {
        db.dataset(n)?;
        st.datasets.retain(|d| d.name == n);
    }
    let text = if json {
        serde_json::to_string_pretty(&st)
            .map_err(|e| CliError::Failed(format!("cannot render stats as JSON: {e}")))?
    } else {
        let defs = st
            .datasets
            .iter()
            .filter_map(|d| Some((d.name.clone(), db.dataset(&d.name).ok()?.index_defs())))
            .collect();
        stats::render(&st, &defs)
    };
    let mut out = stdout();
    writeln!(out, "{}", text.trim_end()).map_err(CliError::from_stdout)?;
    out.flush().map_err(CliError::from_stdout)
}

pub fn drop_dataset(db: &Database, name: &str) -> CliResult<()> {
    let before = footprint(db, name)?;
    db.drop_dataset(name)?;
    println!(
        "dropped dataset `{name}` ({} and {} on disk removed)",
        plural(before.components, "component", "components"),
        bytes(before.disk_bytes)
    );
    Ok(())
}
