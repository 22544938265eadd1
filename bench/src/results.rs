//! Result rows: what a workload measures in one run, their aggregation over runs
//! (median, min, max), the CSV format and the console table.

use std::{
    collections::HashMap,
    fs,
    io::Write,
    path::{Path, PathBuf},
};

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

use crate::util::{fmt_num, median, round_sig};

/// What a row is, which decides where it is shown (and whether it is plotted).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    /// A primary measurement (throughput, latency, size): plotted.
    Measure,
    /// A system's own counters (write amplification, flushes, components...).
    Stat,
    /// Silt relative to a peer, possibly with a target.
    Ratio,
    /// Distance of a measurement to a physical limit of the machine.
    Limit,
}

impl Kind {
    pub const ALL: [Kind; 4] = [Kind::Measure, Kind::Ratio, Kind::Limit, Kind::Stat];

    pub fn title(self) -> &'static str {
        match self {
            Kind::Measure => "Measurements",
            Kind::Stat => "System statistics",
            Kind::Ratio => "Silt relative to peers",
            Kind::Limit => "Distance to physical limits",
        }
    }
}

/// One value measured in one run.
#[derive(Clone, Debug)]
pub struct ResultRow {
    pub system: String,
    pub metric: String,
    pub unit: String,
    pub kind: Kind,
    pub value: f64,
    /// For ratios: the value the ratio should reach (higher is better).
    pub target: Option<f64>,
}

impl ResultRow {
    pub fn new(system: &str, metric: &str, unit: &str, kind: Kind, value: f64) -> Self {
        Self {
            system: system.into(),
            metric: metric.into(),
            unit: unit.into(),
            kind,
            value,
            target: None,
        }
    }

    pub fn measure(system: &str, metric: &str, unit: &str, value: f64) -> Self {
        Self::new(system, metric, unit, Kind::Measure, value)
    }

    pub fn stat(system: &str, metric: &str, unit: &str, value: f64) -> Self {
        Self::new(system, metric, unit, Kind::Stat, value)
    }

    pub fn with_target(mut self, target: f64) -> Self {
        self.target = Some(target);
        self
    }
}

/// One system x metric over all runs: a CSV row.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct AggRow {
    pub workload: String,
    pub scale: String,
    pub system: String,
    pub metric: String,
    pub unit: String,
    pub kind: Kind,
    pub median: f64,
    pub min: f64,
    pub max: f64,
    pub runs: usize,
    pub target: Option<f64>,
}

impl AggRow {
    /// "PASS"/"FAIL" against the target, if there is one.
    pub fn verdict(&self) -> Option<&'static str> {
        self.target
            .map(|t| if self.median >= t { "PASS" } else { "FAIL" })
    }
}

/// Groups the rows of all runs by (system, metric), keeping first-seen order.
pub fn aggregate(workload: &str, scale: &str, runs: &[Vec<ResultRow>]) -> Vec<AggRow> {
    let mut order: Vec<(String, String)> = Vec::new();
    let mut groups: HashMap<(String, String), Vec<&ResultRow>> = HashMap::new();
    for row in runs.iter().flatten() {
        let key = (row.system.clone(), row.metric.clone());
        let entry = groups.entry(key.clone()).or_default();
        if entry.is_empty() {
            order.push(key);
        }
        entry.push(row);
    }
    order
        .into_iter()
        .filter_map(|key| {
            let rows = groups.get(&key)?;
            let first = rows.first()?;
            let values: Vec<f64> = rows
                .iter()
                .map(|r| r.value)
                .filter(|v| !v.is_nan())
                .collect();
            let (min, max) = values
                .iter()
                .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), &v| {
                    (lo.min(v), hi.max(v))
                });
            let (min, max) = if values.is_empty() {
                (f64::NAN, f64::NAN)
            } else {
                (min, max)
            };
            Some(AggRow {
                workload: workload.into(),
                scale: scale.into(),
                system: first.system.clone(),
                metric: first.metric.clone(),
                unit: first.unit.clone(),
                kind: first.kind,
                median: median(&values),
                min,
                max,
                runs: values.len(),
                target: first.target,
            })
        })
        .collect()
}

/// A results file: `#`-prefixed header lines and the aggregated rows.
#[derive(Clone, Debug)]
pub struct ResultFile {
    /// `key: value` header lines (machine, run, limits).
    pub header: Vec<(String, String)>,
    pub rows: Vec<AggRow>,
}

impl ResultFile {
    pub fn header_value(&self, key: &str) -> Option<&str> {
        self.header
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    pub fn write(&self, path: &Path) -> Result<()> {
        let mut buf: Vec<u8> = Vec::new();
        for (k, v) in &self.header {
            writeln!(buf, "# {k}: {v}")?;
        }
        {
            let mut w = csv::Writer::from_writer(&mut buf);
            for row in &self.rows {
                w.serialize(AggRow {
                    median: round_sig(row.median, 6),
                    min: round_sig(row.min, 6),
                    max: round_sig(row.max, 6),
                    ..row.clone()
                })?;
            }
            w.flush()?;
        }
        fs::write(path, buf).with_context(|| format!("writing {}", path.display()))
    }

    pub fn read(path: &Path) -> Result<Self> {
        let text =
            fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        let header = text
            .lines()
            .take_while(|l| l.starts_with('#'))
            .filter_map(|l| {
                let (k, v) = l.trim_start_matches('#').split_once(':')?;
                Some((k.trim().to_string(), v.trim().to_string()))
            })
            .collect();
        let mut r = csv::ReaderBuilder::new()
            .comment(Some(b'#'))
            .from_reader(text.as_bytes());
        let rows = r
            .deserialize()
            .collect::<Result<Vec<AggRow>, _>>()
            .with_context(|| format!("parsing {}", path.display()))?;
        Ok(Self { header, rows })
    }
}

/// All `*.csv` files directly in `dir`, sorted by name.
pub fn csv_files(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut files: Vec<PathBuf> = fs::read_dir(dir)
        .with_context(|| format!("listing {}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "csv"))
        .collect();
    files.sort();
    Ok(files)
}

/// Renders rows of one kind as an aligned text table (or a Markdown table).
pub fn table(rows: &[&AggRow], markdown: bool) -> String {
    let with_target = rows.iter().any(|r| r.target.is_some());
    let mut head = vec!["system", "metric", "unit", "median", "min", "max"];
    if with_target {
        head.extend(["target", "verdict"]);
    }
    let body: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            let mut cells = vec![
                r.system.clone(),
                r.metric.clone(),
                r.unit.clone(),
                fmt_num(r.median),
                fmt_num(r.min),
                fmt_num(r.max),
            ];
            if with_target {
                cells.push(
                    r.target
                        .map(|t| format!(">= {}", fmt_num(t)))
                        .unwrap_or_default(),
                );
                cells.push(r.verdict().unwrap_or_default().to_string());
            }
            cells
        })
        .collect();
    let numeric = |i: usize| (3..6).contains(&i);
    let mut out = String::new();
    if markdown {
        out.push_str(&format!("| {} |\n", head.join(" | ")));
        let seps: Vec<&str> = (0..head.len())
            .map(|i| if numeric(i) { "---:" } else { "---" })
            .collect();
        out.push_str(&format!("| {} |\n", seps.join(" | ")));
        for cells in &body {
            out.push_str(&format!("| {} |\n", cells.join(" | ")));
        }
        return out;
    }
    let mut widths: Vec<usize> = head.iter().map(|h| h.chars().count()).collect();
    for cells in &body {
        for (i, c) in cells.iter().enumerate() {
            widths[i] = widths[i].max(c.chars().count());
        }
    }
    let fmt_line = |cells: &[String]| -> String {
        let parts: Vec<String> = cells
            .iter()
            .enumerate()
            .map(|(i, c)| {
                if numeric(i) {
                    format!("{c:>w$}", w = widths[i])
                } else {
                    format!("{c:<w$}", w = widths[i])
                }
            })
            .collect();
        format!("  {}\n", parts.join("  ").trim_end())
    };
    let head_cells: Vec<String> = head.iter().map(|s| s.to_string()).collect();
    out.push_str(&fmt_line(&head_cells));
    let rule: Vec<String> = widths.iter().map(|w| "-".repeat(*w)).collect();
    out.push_str(&fmt_line(&rule));
    for cells in &body {
        out.push_str(&fmt_line(cells));
    }
    out
}

/// Prints all rows grouped by kind.
pub fn print_tables(rows: &[AggRow]) {
    for kind in Kind::ALL {
        let of_kind: Vec<&AggRow> = rows.iter().filter(|r| r.kind == kind).collect();
        if of_kind.is_empty() {
            continue;
        }
        println!("\n{}:", kind.title());
        print!("{}", table(&of_kind, false));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aggregate_and_roundtrip() {
        let runs = vec![
            vec![
                ResultRow::measure("a", "x", "ops/s", 1.0),
                ResultRow::new("a/b", "r", "x", Kind::Ratio, 0.5).with_target(1.0),
            ],
            vec![ResultRow::measure("a", "x", "ops/s", 3.0)],
            vec![ResultRow::measure("a", "x", "ops/s", 2.0)],
        ];
        let agg = aggregate("w", "small", &runs);
        assert_eq!(agg.len(), 2);
        assert_eq!(
            (agg[0].median, agg[0].min, agg[0].max, agg[0].runs),
            (2.0, 1.0, 3.0, 3)
        );
        assert_eq!(agg[1].verdict(), Some("FAIL"));

        let dir = std::env::temp_dir().join(format!("silt-bench-test-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let path = dir.join("w.csv");
        let file = ResultFile {
            header: vec![("machine".into(), "cores=2 cpu=\"x: y\"".into())],
            rows: agg,
        };
        file.write(&path).unwrap();
        let back = ResultFile::read(&path).unwrap();
        assert_eq!(back.header_value("machine"), Some("cores=2 cpu=\"x: y\""));
        assert_eq!(back.rows.len(), 2);
        assert_eq!(back.rows[1].target, Some(1.0));
        assert_eq!(back.rows[0].target, None);
        fs::remove_dir_all(&dir).unwrap();
    }
}
