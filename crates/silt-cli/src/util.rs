//! Shared helpers: opening the database, parsing keys typed on the command
//! line, and formatting numbers for people.

use crate::error::{CliError, CliResult};
use silt::value::prefix_upper_bound;
use silt::{Database, DbOptions, FieldType, Value};
use std::ops::Bound;
use std::path::Path;
use std::time::Duration;

/// Open the database at `dir`. Unless `create` is set, a missing directory
/// is reported instead of silently creating an empty database.
pub fn open_db(
    dir: &Path,
    cache_mb: u64,
    durability: silt::Durability,
    create: bool,
) -> CliResult<Database> {
    if !create && !dir.exists() {
        return Err(CliError::NotFound(format!(
            "no database at {} (the directory does not exist); pass --db PATH (or set SILT_DB), or create one with `silt create-dataset`",
            dir.display()
        )));
    }
    let block_cache_bytes = cache_mb
        .checked_mul(1 << 20)
        .ok_or_else(|| CliError::Usage(format!("--cache-mb {cache_mb} is too large")))?;
    let opts = DbOptions {
        block_cache_bytes,
        durability,
        ..DbOptions::default()
    };
    let db = Database::open(dir, opts)?;
    let r = db.recovery_summary();
    if r.records_redone > 0 || r.truncated_bytes > 0 {
        eprintln!(
            "recovered: scanned {} log records from LSN {}, {} committed transactions, re-applied {} records, ignored {} uncommitted{}, in {} ms",
            count(r.records_scanned),
            r.from_lsn,
            count(r.committed_txns),
            count(r.records_redone),
            count(r.records_uncommitted),
            if r.truncated_bytes > 0 {
                format!(", cut a torn log tail of {} bytes", r.truncated_bytes)
            } else {
                String::new()
            },
            r.millis
        );
    }
    Ok(db)
}

/// One key value typed on the command line. JSON literals are taken as such
/// (`42` is an int, `2.5` a double, `true` a bool, `"a"` a string); anything
/// else is a string (`a`). A field declared `string` takes the text as it is
/// (so `42` is the string "42"), unless it is a quoted JSON string.
pub fn parse_key_part(text: &str, declared: Option<FieldType>) -> Value {
    match serde_json::from_str::<Value>(text) {
        Ok(Value::String(s)) => Value::String(s),
        Ok(_) if declared == Some(FieldType::String) => Value::String(text.to_owned()),
        Ok(v) => v,
        Err(_) => Value::String(text.to_owned()),
    }
}

/// Parse the key values of a command line against the dataset's primary key.
pub fn parse_key(ds: &silt::Dataset, texts: &[String]) -> Vec<Value> {
    let def = ds.def();
    texts
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let declared = def.primary_key.get(i).and_then(|k| def.field_type(k));
            parse_key_part(t, declared)
        })
        .collect()
}

/// Encode a key or key prefix for a scan bound, coercing to declared types.
fn encode_prefix(ds: &silt::Dataset, parts: &[Value]) -> CliResult<Vec<u8>> {
    Ok(ds.encode_pk_prefix(parts)?)
}

/// One end of a scan range, as an encoded key.
pub type KeyBound = Bound<Vec<u8>>;

/// Encoded scan bounds: `from` inclusive, `to` inclusive; a bound with fewer
/// values than the key is a prefix (`--to 5` includes every key `(5, ...)`).
pub fn scan_bounds(
    ds: &silt::Dataset,
    from: &[String],
    to: &[String],
) -> CliResult<(KeyBound, KeyBound)> {
    let lo = if from.is_empty() {
        Bound::Unbounded
    } else {
        Bound::Included(encode_prefix(ds, &parse_key(ds, from))?)
    };
    let hi = if to.is_empty() {
        Bound::Unbounded
    } else {
        Bound::Excluded(prefix_upper_bound(&encode_prefix(ds, &parse_key(ds, to))?))
    };
    Ok((lo, hi))
}

/// Comma-separated numbers of a flag such as `--bbox MINX,MINY,MAXX,MAXY`:
/// exactly as many as `form` names, each finite. `example` is a valid value
/// shown in errors.
pub fn parse_numbers(flag: &str, text: &str, form: &str, example: &str) -> CliResult<Vec<f64>> {
    let want = form.split(',').count();
    let parts: Vec<&str> = text.split(',').map(str::trim).collect();
    if parts.len() != want {
        return Err(CliError::Usage(format!(
            "{flag} `{text}` has {} but needs {want}: {flag} {form}, e.g. {flag} {example}",
            plural(parts.len() as u64, "value", "values")
        )));
    }
    let mut out = Vec::with_capacity(want);
    for (p, name) in parts.iter().zip(form.split(',')) {
        match p.parse::<f64>() {
            Ok(v) if v.is_finite() => out.push(v),
            _ => {
                return Err(CliError::Usage(format!(
                    "{flag} `{text}`: {name} `{p}` is not a finite number; the form is {flag} {form}, e.g. {flag} {example}"
                )));
            }
        }
    }
    Ok(out)
}

/// `1234567` -> `1,234,567`.
pub fn count(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::with_capacity(s.len() + s.len() / 3);
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// Bytes in binary units: `512 B`, `1.5 KiB`, `12.3 MiB`.
pub fn bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["KiB", "MiB", "GiB", "TiB", "PiB"];
    if n < 1024 {
        return format!("{n} B");
    }
    let mut v = n as f64 / 1024.0;
    let mut unit = 0;
    while v >= 1024.0 && unit + 1 < UNITS.len() {
        v /= 1024.0;
        unit += 1;
    }
    if v >= 100.0 {
        format!("{v:.0} {}", UNITS[unit])
    } else {
        format!("{v:.1} {}", UNITS[unit])
    }
}

/// A rate per second, with thousands separators: `123,456`.
pub fn rate(n: u64, elapsed: Duration) -> String {
    let secs = elapsed.as_secs_f64();
    if secs <= 0.0 {
        return "-".to_owned();
    }
    count((n as f64 / secs).round() as u64)
}

/// Megabytes (10^6 bytes) per second, one decimal.
pub fn mb_per_sec(bytes: u64, elapsed: Duration) -> String {
    let secs = elapsed.as_secs_f64();
    if secs <= 0.0 {
        return "-".to_owned();
    }
    format!("{:.1}", bytes as f64 / 1e6 / secs)
}

/// A duration for people: `850 µs`, `12.3 ms`, `4.56 s`.
pub fn duration(d: Duration) -> String {
    let us = d.as_secs_f64() * 1e6;
    if us < 1000.0 {
        format!("{us:.0} µs")
    } else if us < 1e6 {
        format!("{:.1} ms", us / 1e3)
    } else {
        format!("{:.2} s", us / 1e6)
    }
}

/// `n` things, singular or plural: `1 component`, `3 components`.
pub fn plural(n: u64, one: &str, many: &str) -> String {
    format!("{} {}", count(n), if n == 1 { one } else { many })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats() {
        assert_eq!(count(0), "0");
        assert_eq!(count(999), "999");
        assert_eq!(count(1000), "1,000");
        assert_eq!(count(1234567), "1,234,567");
        assert_eq!(bytes(10), "10 B");
        assert_eq!(bytes(1536), "1.5 KiB");
        assert_eq!(bytes(200 << 20), "200 MiB");
        assert_eq!(duration(Duration::from_micros(12)), "12 µs");
        assert_eq!(duration(Duration::from_millis(12)), "12.0 ms");
        assert_eq!(duration(Duration::from_millis(1500)), "1.50 s");
        assert_eq!(plural(1, "record", "records"), "1 record");
        assert_eq!(plural(2, "record", "records"), "2 records");
    }

    #[test]
    fn numbers() {
        let f = |t: &str| parse_numbers("--near", t, "LON,LAT", "2.35,48.86");
        assert_eq!(f("2.5, -3").ok(), Some(vec![2.5, -3.0]));
        let e = f("1").err().map(|e| e.to_string()).unwrap_or_default();
        assert!(e.contains("has 1 value but needs 2"), "{e}");
        let e = f("1,x").err().map(|e| e.to_string()).unwrap_or_default();
        assert!(e.contains("LAT `x` is not a finite number"), "{e}");
        assert!(f("1,inf").is_err());
        assert!(f("1,2,3").is_err());
    }

    #[test]
    fn key_parts() {
        assert_eq!(parse_key_part("42", None), Value::Int(42));
        assert_eq!(parse_key_part("-7", None), Value::Int(-7));
        assert_eq!(parse_key_part("2.5", None), Value::Double(2.5));
        assert_eq!(parse_key_part("a", None), Value::from("a"));
        assert_eq!(parse_key_part("\"a\"", None), Value::from("a"));
        assert_eq!(parse_key_part("\"42\"", None), Value::from("42"));
        assert_eq!(
            parse_key_part("42", Some(FieldType::String)),
            Value::from("42")
        );
        assert_eq!(parse_key_part("true", None), Value::Bool(true));
        assert_eq!(
            parse_key_part("hello world", None),
            Value::from("hello world")
        );
    }
}
