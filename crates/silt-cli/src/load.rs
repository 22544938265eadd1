//! `silt load`: bulk-load JSON Lines or CSV into a dataset.

use crate::error::{CliError, CliResult};
use crate::util::{count, mb_per_sec, plural, rate};
use clap::ValueEnum;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use silt::value::{coerce_text, parse_json_record};
use silt::{Database, Dataset, FieldType, Value};
use std::fs::File;
use std::io::{BufRead, BufReader, IsTerminal, Read};
use std::path::Path;
use std::time::{Duration, Instant};

/// How many failures are shown line by line; the rest are only counted.
const SHOWN_FAILURES: u64 = 10;
/// Update the progress bar every this many records.
const PROGRESS_EVERY: u64 = 256;

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// JSON Lines: one JSON object per line.
    Jsonl,
    /// CSV with a header row naming the fields.
    Csv,
}

impl Format {
    fn name(self) -> &'static str {
        match self {
            Format::Jsonl => "JSON Lines",
            Format::Csv => "CSV",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Mode {
    /// Fail a record whose primary key already exists.
    Insert,
    /// Replace a record whose primary key already exists.
    Upsert,
}

pub struct LoadOptions<'a> {
    pub dataset: &'a str,
    pub file: &'a str,
    pub format: Option<Format>,
    pub mode: Mode,
    pub batch_report: Option<u64>,
}

/// Errors that concern one record: counted, reported, and the load goes on.
/// Anything else (I/O, a failed flush, a closed database) stops the load.
fn is_record_error(e: &silt::Error) -> bool {
    matches!(
        e,
        silt::Error::InvalidRecord { .. }
            | silt::Error::Parse { .. }
            | silt::Error::DuplicateKey { .. }
            | silt::Error::KeyTooLarge { .. }
            | silt::Error::ValueTooLarge { .. }
    )
}

struct Loader<'a> {
    ds: &'a Dataset,
    mode: Mode,
    pb: ProgressBar,
    start: Instant,
    loaded: u64,
    failed: u64,
    bytes: u64,
    batch_report: Option<u64>,
    /// Records waiting to be written as one batch: (line, record).
    pending: Vec<(u64, Value)>,
}

/// Records per `write_batch` call: each record is still its own transaction,
/// but their COMMITs share fsyncs (group commit) and one wait at the end.
const BATCH: usize = 1000;

impl Loader<'_> {
    /// Queue one parsed record (or count its parse error).
    fn record(&mut self, line: u64, rec: Result<Value, String>) -> CliResult<()> {
        match rec {
            Ok(v) => {
                self.pending.push((line, v));
                if self.pending.len() >= BATCH {
                    self.write_pending()?;
                }
            }
            Err(msg) => self.fail(line, &msg),
        }
        self.tick()
    }

    /// Write the queued records through the transactional batch path
    /// (Algorithm 1: deadlock-free with concurrent writers).
    fn write_pending(&mut self) -> CliResult<()> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let (lines, records): (Vec<u64>, Vec<Value>) =
            std::mem::take(&mut self.pending).into_iter().unzip();
        let opts = silt::BatchOptions {
            mode: match self.mode {
                Mode::Insert => silt::WriteMode::Insert,
                Mode::Upsert => silt::WriteMode::Upsert,
            },
            atomic: false,
            stop_on_error: false,
        };
        let first = lines.first().copied().unwrap_or(0);
        let report = self.ds.write_batch(records, opts).map_err(|e| {
            self.pb.finish_and_clear();
            CliError::Failed(format!(
                "load stopped near line {first} after {} records: {e}",
                count(self.loaded)
            ))
        })?;
        self.loaded += report.committed as u64;
        for (i, e) in report.failed {
            let line = lines.get(i).copied().unwrap_or(first);
            if is_record_error(&e) {
                self.fail(line, &e.to_string());
            } else {
                self.pb.finish_and_clear();
                return Err(CliError::Failed(format!(
                    "load stopped at line {line} after {} records: {e}",
                    count(self.loaded)
                )));
            }
        }
        Ok(())
    }

    fn fail(&mut self, line: u64, msg: &str) {
        self.failed += 1;
        if self.failed <= SHOWN_FAILURES {
            self.pb.suspend(|| eprintln!("line {line}: {msg}"));
        }
    }

    fn tick(&mut self) -> CliResult<()> {
        let n = self.loaded + self.failed;
        if n.is_multiple_of(PROGRESS_EVERY) {
            self.pb.set_position(self.bytes);
            let el = self.start.elapsed();
            self.pb.set_message(format!(
                "{} records, {} records/s",
                count(self.loaded),
                rate(self.loaded, el)
            ));
        }
        if let Some(every) = self.batch_report
            && every > 0
            && n.is_multiple_of(every)
        {
            let el = self.start.elapsed();
            let line = format!(
                "{} read: {} loaded, {} failed, {} records/s, {} MB/s",
                plural(n, "record", "records"),
                count(self.loaded),
                count(self.failed),
                rate(self.loaded, el),
                mb_per_sec(self.bytes, el)
            );
            self.pb.suspend(|| eprintln!("{line}"));
        }
        Ok(())
    }
}

pub fn run(db: &Database, opts: &LoadOptions) -> CliResult<()> {
    let ds = db.dataset(opts.dataset)?;
    let format = opts.format.unwrap_or_else(|| guess_format(opts.file));
    let (input, total): (Box<dyn Read>, Option<u64>) = if opts.file == "-" {
        (Box::new(std::io::stdin().lock()), None)
    } else {
        let f = File::open(opts.file)
            .map_err(|e| CliError::Usage(format!("cannot open {}: {e}", opts.file)))?;
        let len = f.metadata().ok().map(|m| m.len());
        (Box::new(f), len)
    };
    let source = if opts.file == "-" {
        "standard input"
    } else {
        opts.file
    };
    eprintln!(
        "loading {source} into dataset `{}` ({}, {})",
        ds.name(),
        format.name(),
        match opts.mode {
            Mode::Insert => "insert",
            Mode::Upsert => "upsert",
        }
    );
    if opts.file == "-" && std::io::stdin().is_terminal() {
        eprintln!("reading from the terminal: type or paste records, then press Ctrl-D");
    }
    let pb = progress_bar(total);
    let mut loader = Loader {
        ds: &ds,
        mode: opts.mode,
        pb,
        start: Instant::now(),
        loaded: 0,
        failed: 0,
        bytes: 0,
        batch_report: opts.batch_report,
        pending: Vec::with_capacity(BATCH),
    };
    let reader = BufReader::with_capacity(1 << 20, input);
    match format {
        Format::Jsonl => load_jsonl(&mut loader, reader, source)?,
        Format::Csv => load_csv(&mut loader, &ds, reader, source)?,
    }
    loader.write_pending()?;
    loader.pb.set_position(loader.bytes);
    loader.pb.set_style(spinner_style());
    loader.pb.set_message("flushing to disk");
    loader.pb.enable_steady_tick(Duration::from_millis(100));
    db.close()?;
    loader.pb.finish_and_clear();
    let el = loader.start.elapsed();
    if loader.failed > SHOWN_FAILURES {
        let more = loader.failed - SHOWN_FAILURES;
        eprintln!(
            "... and {} more {} (not shown)",
            count(more),
            if more == 1 { "failure" } else { "failures" }
        );
    }
    println!(
        "loaded {} ({} failed) in {:.2} s: {} records/s, {} MB/s",
        plural(loader.loaded, "record", "records"),
        count(loader.failed),
        el.as_secs_f64(),
        rate(loader.loaded, el),
        mb_per_sec(loader.bytes, el)
    );
    if loader.loaded == 0 && loader.failed > 0 {
        return Err(CliError::Usage(format!(
            "no record was loaded: all {} failed (see the messages above)",
            count(loader.failed)
        )));
    }
    Ok(())
}

/// `.csv` (any case) is CSV; everything else, and stdin, JSON Lines.
fn guess_format(file: &str) -> Format {
    let is_csv = Path::new(file)
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("csv"));
    if is_csv { Format::Csv } else { Format::Jsonl }
}

fn progress_bar(total: Option<u64>) -> ProgressBar {
    let target = ProgressDrawTarget::stderr_with_hz(10);
    match total {
        Some(len) => {
            let style = ProgressStyle::with_template(
                "{spinner} {elapsed_precise} [{bar:25}] {bytes}/{total_bytes} ({bytes_per_sec}, eta {eta}) {msg}",
            )
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> ");
            ProgressBar::with_draw_target(Some(len), target).with_style(style)
        }
        None => {
            let style = ProgressStyle::with_template(
                "{spinner} {elapsed_precise} {bytes} read ({bytes_per_sec}) {msg}",
            )
            .unwrap_or_else(|_| ProgressStyle::default_spinner());
            ProgressBar::with_draw_target(None, target).with_style(style)
        }
    }
}

pub fn spinner_style() -> ProgressStyle {
    ProgressStyle::with_template("{spinner} {elapsed_precise} {msg}")
        .unwrap_or_else(|_| ProgressStyle::default_spinner())
}

fn read_failed(source: &str, loaded: u64, e: impl std::fmt::Display) -> CliError {
    CliError::Failed(format!(
        "reading {source} failed after {} records: {e}",
        count(loaded)
    ))
}

fn load_jsonl(loader: &mut Loader, mut reader: impl BufRead, source: &str) -> CliResult<()> {
    let mut buf = Vec::with_capacity(4096);
    let mut line_no = 0u64;
    loop {
        buf.clear();
        let n = reader
            .read_until(b'\n', &mut buf)
            .map_err(|e| read_failed(source, loader.loaded, e))?;
        if n == 0 {
            return Ok(());
        }
        line_no += 1;
        loader.bytes += n as u64;
        let rec = match std::str::from_utf8(&buf) {
            Ok(text) => {
                let text = if line_no == 1 {
                    text.trim_start_matches('\u{feff}')
                } else {
                    text
                };
                let text = text.trim();
                if text.is_empty() {
                    continue;
                }
                parse_json_record(text).map_err(|e| e.to_string())
            }
            Err(e) => Err(format!("not valid UTF-8 text: {e}")),
        };
        loader.record(line_no, rec)?;
    }
}

fn load_csv(loader: &mut Loader, ds: &Dataset, reader: impl Read, source: &str) -> CliResult<()> {
    let mut rdr = csv::ReaderBuilder::new()
        .has_headers(true)
        .flexible(false)
        .from_reader(reader);
    let headers = rdr.byte_headers().map_err(|e| match e.kind() {
        csv::ErrorKind::Io(_) => read_failed(source, 0, &e),
        _ => CliError::Usage(format!("cannot read the CSV header row of {source}: {e}")),
    })?;
    let mut columns: Vec<(String, Option<FieldType>)> = Vec::with_capacity(headers.len());
    for (i, h) in headers.iter().enumerate() {
        let name = std::str::from_utf8(h)
            .map_err(|_| {
                CliError::Usage(format!(
                    "column {} of the CSV header of {source} is not valid UTF-8",
                    i + 1
                ))
            })?
            .trim()
            .to_owned();
        if name.is_empty() {
            return Err(CliError::Usage(format!(
                "column {} of the CSV header of {source} has no name; every column needs a field name",
                i + 1
            )));
        }
        if columns.iter().any(|(c, _)| *c == name) {
            return Err(CliError::Usage(format!(
                "the CSV header of {source} names column `{name}` twice; field names must be unique"
            )));
        }
        let ty = ds.def().field_type(&name);
        columns.push((name, ty));
    }
    if columns.is_empty() {
        return Ok(());
    }
    let mut rec = csv::ByteRecord::new();
    loop {
        match rdr.read_byte_record(&mut rec) {
            Ok(false) => return Ok(()),
            Ok(true) => {
                loader.bytes = rdr.position().byte();
                let line = rec.position().map_or(0, |p| p.line());
                let value = csv_record(&columns, &rec);
                loader.record(line, value)?;
            }
            Err(e) => {
                loader.bytes = rdr.position().byte();
                let line = e.position().map_or(0, |p| p.line());
                let msg = match e.kind() {
                    csv::ErrorKind::Io(_) => return Err(read_failed(source, loader.loaded, &e)),
                    csv::ErrorKind::UnequalLengths {
                        expected_len, len, ..
                    } => format!("found {len} fields, but the header has {expected_len}"),
                    _ => e.to_string(),
                };
                loader.record(line, Err(msg))?;
            }
        }
    }
}

/// Build a record from a CSV row: declared fields are converted by
/// [`coerce_text`]; undeclared ones become an int, a double or a string.
fn csv_record(
    columns: &[(String, Option<FieldType>)],
    rec: &csv::ByteRecord,
) -> Result<Value, String> {
    let mut fields = Vec::with_capacity(columns.len());
    for ((name, ty), cell) in columns.iter().zip(rec.iter()) {
        let text = std::str::from_utf8(cell)
            .map_err(|_| format!("the value of field `{name}` is not valid UTF-8"))?;
        let v = match ty {
            Some(t) => coerce_text(name, *t, text).map_err(|e| e.to_string())?,
            None => infer(text),
        };
        fields.push((name.clone(), v));
    }
    Ok(Value::Object(fields))
}

/// An undeclared CSV cell: an int if it reads as one, else a double if it
/// looks like a decimal number, else the text.
fn infer(text: &str) -> Value {
    let t = text.trim();
    if let Ok(i) = t.parse::<i64>() {
        return Value::Int(i);
    }
    let numeric = t.bytes().any(|b| b.is_ascii_digit())
        && t.bytes()
            .all(|b| b.is_ascii_digit() || matches!(b, b'.' | b'-' | b'+' | b'e' | b'E'));
    if numeric && let Ok(d) = t.parse::<f64>() {
        return Value::Double(d);
    }
    Value::String(text.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn infers_cells() {
        assert_eq!(infer("42"), Value::Int(42));
        assert_eq!(infer(" -3 "), Value::Int(-3));
        assert_eq!(infer("2.5"), Value::Double(2.5));
        assert_eq!(infer("1e3"), Value::Double(1000.0));
        assert_eq!(infer("nan"), Value::from("nan"));
        assert_eq!(infer("inf"), Value::from("inf"));
        assert_eq!(infer("abc"), Value::from("abc"));
        assert_eq!(infer(""), Value::from(""));
        assert_eq!(infer("99999999999999999999"), Value::Double(1e20));
    }

    #[test]
    fn guesses_format() {
        assert_eq!(guess_format("a.csv"), Format::Csv);
        assert_eq!(guess_format("a.CSV"), Format::Csv);
        assert_eq!(guess_format("a.jsonl"), Format::Jsonl);
        assert_eq!(guess_format("-"), Format::Jsonl);
    }
}
