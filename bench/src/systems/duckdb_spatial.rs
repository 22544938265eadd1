//! DuckDB 1.5 with its spatial extension and an RTREE index, through SQL, as
//! a peer of `spatial-rtree`: the harness writes the Python peers' input files
//! ([`super::py_rtree::write_inputs`]) and runs `bench/py/duckdb_spatial.py`
//! with the bench virtualenv's Python, which loads an on-disk database,
//! builds the index, reopens the file, times every query and prints its
//! answers as JSON.

use std::{
    fs,
    path::{Path, PathBuf},
    process::Command,
};

use anyhow::{Context, Result, bail};
use serde::Deserialize;

use super::py_rtree::{PyKnn, PySel, write_inputs};
use crate::spatial::data::{Queries, TweetData};

/// What `duckdb_spatial.py` writes.
#[derive(Clone, Debug, Deserialize)]
pub struct DuckResult {
    pub duckdb_version: String,
    pub points: usize,
    pub load_s: f64,
    pub index_s: f64,
    pub db_bytes: u64,
    /// EXPLAIN of the rectangle query shows an RTREE_INDEX_SCAN.
    pub uses_index: bool,
    pub maxrss_kb: f64,
    pub sels: Vec<PySel>,
    pub knn: PyKnn,
}

pub struct DuckdbSpatial {
    python: PathBuf,
    pub versions: String,
}

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("py/duckdb_spatial.py")
}

impl DuckdbSpatial {
    /// The bench virtualenv's Python, if it has `duckdb`, the spatial
    /// extension's package and `pyarrow`; `Err(reason)` says how to get them.
    pub fn find() -> std::result::Result<Self, String> {
        let python = std::env::var_os("SILT_BENCH_PYTHON")
            .map(PathBuf::from)
            .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join(".venv/bin/python"));
        if !python.exists() {
            return Err(format!(
                "no Python at {} (run bench/setup.sh, or set SILT_BENCH_PYTHON)",
                python.display()
            ));
        }
        let out = Command::new(&python)
            .args([
                "-c",
                "import sys, duckdb, duckdb_extension_spatial, pyarrow; \
                 print(duckdb.__version__, sys.version.split()[0])",
            ])
            .output()
            .map_err(|e| format!("cannot run {}: {e}", python.display()))?;
        if !out.status.success() {
            return Err(format!(
                "{} cannot import duckdb, duckdb_extension_spatial and pyarrow (run bench/setup.sh, or `{} -m pip install -r bench/requirements.txt`): {}",
                python.display(),
                python.display(),
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        let text = String::from_utf8_lossy(&out.stdout);
        let v: Vec<&str> = text.split_whitespace().collect();
        let versions = match v.as_slice() {
            [d, p] => format!("DuckDB {d} + spatial, Python {p}"),
            _ => format!("DuckDB ({})", text.trim()),
        };
        Ok(Self { python, versions })
    }

    /// Writes the inputs into `dir`, runs the script and reads its results.
    pub fn run(
        &self,
        dir: &Path,
        data: &TweetData,
        q: &Queries,
        check: usize,
    ) -> Result<DuckResult> {
        let (points, queries) = write_inputs(dir, data, q, check)?;
        let out = dir.join("duckdb-results.json");
        let db = dir.join("spatial.duckdb");
        let status = Command::new(&self.python)
            .arg(script())
            .arg(&points)
            .arg(&queries)
            .arg(&out)
            .arg(&db)
            .status()
            .with_context(|| format!("running {}", script().display()))?;
        if !status.success() {
            bail!("{} failed ({status})", script().display());
        }
        let text =
            fs::read_to_string(&out).with_context(|| format!("reading {}", out.display()))?;
        let res: DuckResult =
            serde_json::from_str(&text).with_context(|| format!("parsing {}", out.display()))?;
        if res.points != data.len() {
            bail!(
                "DuckDB loaded {} points instead of {}",
                res.points,
                data.len()
            );
        }
        if !res.uses_index {
            bail!("DuckDB's plan of the rectangle query does not use the RTREE index");
        }
        for f in [&points, &queries, &out] {
            let _ = fs::remove_file(f);
        }
        Ok(res)
    }
}
