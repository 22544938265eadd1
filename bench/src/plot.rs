//! Calls `bench/plot.py` (matplotlib) to turn a results CSV into a PNG.

use std::{
    path::{Path, PathBuf},
    process::Command,
};

/// The plotting script shipped next to this crate's manifest.
pub fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("plot.py")
}

/// Whether `python3` with matplotlib is available.
pub fn available() -> bool {
    Command::new("python3")
        .args(["-c", "import matplotlib"])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Plots `csv` into `png`; prints a note (and returns false) when it can't.
pub fn plot(csv: &Path, png: &Path, log: bool) -> bool {
    if !available() {
        eprintln!(
            "note: no plot: python3 with matplotlib not found (run bench/setup.sh, or `pip install matplotlib`)"
        );
        return false;
    }
    let mut cmd = Command::new("python3");
    cmd.arg(script()).arg(csv).arg(png);
    if log {
        cmd.arg("--log");
    }
    match cmd.output() {
        Ok(o) if o.status.success() => {
            eprintln!("wrote {}", png.display());
            true
        }
        Ok(o) => {
            eprintln!(
                "note: plotting {} failed: {}",
                csv.display(),
                String::from_utf8_lossy(&o.stderr).trim()
            );
            false
        }
        Err(e) => {
            eprintln!("note: could not run python3 for plotting: {e}");
            false
        }
    }
}
