//! DuckDB 1.5 with its spatial extension and an RTREE index, through SQL, as
//! a peer of `spatial-rtree`: the harness writes the Python peers' input files
//! ([`super::py_rtree::write_inputs`]) and runs `bench/py/duckdb_spatial.py`
//! with the bench virtualenv's Python, which loads an on-disk database,
//! builds the index, reopens the file, times every query and prints its
//! answers as JSON.

use std::{
    fs,
    path::{Path, PathBuf},
};

use anyhow::{Result, bail};
use serde::Deserialize;

use super::py_rtree::{PyKnn, PySel, write_inputs};
use super::venv_python;
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

impl DuckdbSpatial {
    /// The bench virtualenv's Python, if it has `duckdb`, the spatial
    /// extension's package and `pyarrow`; `Err(reason)` says how to get them.
    pub fn find() -> std::result::Result<Self, String> {
        let (python, text) = venv_python::find(
            "import sys, duckdb, duckdb_extension_spatial, pyarrow; \
             print(duckdb.__version__, sys.version.split()[0])",
            "duckdb, duckdb_extension_spatial and pyarrow",
        )?;
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
        let res: DuckResult = venv_python::run_json(
            &self.python,
            "duckdb_spatial.py",
            &[&points, &queries, &out, &db],
            &out,
        )?;
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
        for f in [&points, &queries] {
            let _ = fs::remove_file(f);
        }
        Ok(res)
    }
}
