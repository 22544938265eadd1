//! The bench virtualenv's Python (`bench/.venv`, made by `bench/setup.sh`;
//! `$SILT_BENCH_PYTHON` overrides it), which runs the peers written as
//! Python scripts (`bench/py/`): found and checked once, then each script
//! run with its arguments, its JSON answer read back.

use std::{
    fs,
    path::{Path, PathBuf},
    process::Command,
};

use anyhow::{Context, Result, bail};
use serde::de::DeserializeOwned;

/// The virtualenv's Python, if `probe` (a `python -c` program printing
/// versions) runs; returns it and what `probe` printed, or why the peer
/// cannot run and how to fix it (`needs`: the packages it imports).
pub fn find(probe: &str, needs: &str) -> std::result::Result<(PathBuf, String), String> {
    let python = std::env::var_os("SILT_BENCH_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join(".venv/bin/python"));
    if !python.exists() {
        return Err(format!(
            "no Python at {} (run bench/setup.sh to create the venv with {needs}, or set SILT_BENCH_PYTHON)",
            python.display()
        ));
    }
    let out = Command::new(&python)
        .args(["-c", probe])
        .output()
        .map_err(|e| format!("cannot run {}: {e}", python.display()))?;
    if !out.status.success() {
        return Err(format!(
            "{} cannot import {needs} (run bench/setup.sh, or `{} -m pip install -r bench/requirements.txt`): {}",
            python.display(),
            python.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok((python, String::from_utf8_lossy(&out.stdout).into_owned()))
}

/// The path of script `name` in `bench/py/`.
pub fn script(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("py").join(name)
}

/// Runs script `name` with `python` and `args` (its JSON answer is written
/// to `out`, the third argument by the scripts' convention) and parses the
/// answer; `out` is removed after.
pub fn run_json<T: DeserializeOwned>(
    python: &Path,
    name: &str,
    args: &[&Path],
    out: &Path,
) -> Result<T> {
    let script = script(name);
    let status = Command::new(python)
        .arg(&script)
        .args(args)
        .status()
        .with_context(|| format!("running {}", script.display()))?;
    if !status.success() {
        bail!("{} failed ({status})", script.display());
    }
    let text = fs::read_to_string(out).with_context(|| format!("reading {}", out.display()))?;
    let _ = fs::remove_file(out);
    serde_json::from_str(&text).with_context(|| format!("parsing {}", out.display()))
}
