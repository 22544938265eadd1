//! The Python `rtree` package (libspatialindex) as an index-only peer of the
//! spatial workloads: the harness writes the records' locations and the queries
//! to files and runs `bench/py/rtree_queries.py` with the Python of the bench
//! virtualenv (`bench/.venv`, made by `bench/setup.sh`; `$SILT_BENCH_PYTHON`
//! overrides it), which bulk-loads an in-memory index, times every query and
//! prints its results as JSON.

use std::{
    fs,
    io::{BufWriter, Write},
    path::{Path, PathBuf},
};

use anyhow::{Context, Result, bail};
use serde::{Deserialize, Serialize};

use super::venv_python;
use crate::spatial::data::{Queries, TweetData};

/// Per-selectivity results of the script.
#[derive(Clone, Debug, Deserialize)]
pub struct PySel {
    pub label: String,
    pub queries: usize,
    pub mean_us: f64,
    pub p50_us: f64,
    pub p99_us: f64,
    pub mean_count: f64,
    pub counts: Vec<u64>,
    pub sums: Vec<i64>,
}

#[derive(Clone, Debug, Deserialize)]
pub struct PyKnn {
    pub queries: usize,
    pub mean_us: f64,
    pub p50_us: f64,
    pub p99_us: f64,
    pub mean_candidates: f64,
    pub dists: Vec<Vec<f64>>,
}

/// What `rtree_queries.py` writes.
#[derive(Clone, Debug, Deserialize)]
pub struct PyResult {
    pub points: usize,
    pub load_s: f64,
    pub maxrss_kb: f64,
    pub sels: Vec<PySel>,
    pub knn: PyKnn,
}

#[derive(Serialize)]
struct QueryFile<'a> {
    k: usize,
    check: usize,
    sels: Vec<QuerySel<'a>>,
    knn: Vec<[f64; 2]>,
}

#[derive(Serialize)]
struct QuerySel<'a> {
    label: String,
    rects: &'a [[f64; 4]],
}

/// A Python with `rtree` importable.
pub struct PyRtree {
    python: PathBuf,
    /// `rtree X, libspatialindex Y, Python Z`.
    pub versions: String,
}

impl PyRtree {
    /// Finds the virtualenv's Python and checks that it can import `rtree`;
    /// `Err(reason)` says why the peer can't run and how to fix it.
    pub fn find() -> std::result::Result<Self, String> {
        let (python, text) = venv_python::find(
            "import sys, rtree; from rtree import index; \
             print(rtree.__version__, index.core.rt.SIDX_Version().decode(), sys.version.split()[0])",
            "rtree",
        )?;
        let v: Vec<&str> = text.split_whitespace().collect();
        let versions = match v.as_slice() {
            [r, s, p] => format!("rtree {r}, libspatialindex {s}, Python {p}"),
            _ => format!("rtree ({})", text.trim()),
        };
        Ok(Self { python, versions })
    }

    /// Writes the inputs into `dir`, runs the script and reads its results.
    pub fn run(&self, dir: &Path, data: &TweetData, q: &Queries, check: usize) -> Result<PyResult> {
        let (points, queries) = write_inputs(dir, data, q, check)?;
        let out = dir.join("rtree-results.json");
        let res: PyResult = venv_python::run_json(
            &self.python,
            "rtree_queries.py",
            &[&points, &queries, &out],
            &out,
        )?;
        if res.points != data.len() {
            bail!(
                "the Python peer loaded {} points instead of {}",
                res.points,
                data.len()
            );
        }
        for f in [&points, &queries] {
            let _ = fs::remove_file(f);
        }
        Ok(res)
    }
}

/// The Python peers' inputs in `dir`: the records' locations (`points.bin`:
/// id i64, lon f64, lat f64, little-endian) and the queries
/// (`queries.json`); returns both paths.
pub fn write_inputs(
    dir: &Path,
    data: &TweetData,
    q: &Queries,
    check: usize,
) -> Result<(PathBuf, PathBuf)> {
    let points = dir.join("points.bin");
    {
        let f =
            fs::File::create(&points).with_context(|| format!("creating {}", points.display()))?;
        let mut w = BufWriter::new(f);
        for i in 0..data.len() {
            w.write_all(&data.id(i).to_le_bytes())?;
            w.write_all(&data.lon[i].to_le_bytes())?;
            w.write_all(&data.lat[i].to_le_bytes())?;
        }
        w.flush()
            .with_context(|| format!("writing {}", points.display()))?;
    }
    let queries = dir.join("queries.json");
    let file = QueryFile {
        k: q.k,
        check,
        sels: q
            .sels
            .iter()
            .map(|s| QuerySel {
                label: s.label(),
                rects: &s.rects,
            })
            .collect(),
        knn: q.knn.iter().map(|&(x, y)| [x, y]).collect(),
    };
    fs::write(&queries, serde_json::to_vec(&file)?)
        .with_context(|| format!("writing {}", queries.display()))?;
    Ok((points, queries))
}
