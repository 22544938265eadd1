//! Records build-time facts for the machine header: the compiler that built the
//! harness, the RocksDB and rusqlite versions pinned in this crate's Cargo.lock,
//! and the Silt commit the core crates were built from.
use std::{env, fs, path::Path, process::Command};

fn main() {
    let manifest_dir = env::var("CARGO_MANIFEST_DIR").unwrap_or_else(|_| ".".into());
    let lock = Path::new(&manifest_dir).join("Cargo.lock");
    println!("cargo:rerun-if-changed={}", lock.display());
    println!("cargo:rerun-if-changed=build.rs");

    let rustc = env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let rustc_version = Command::new(&rustc)
        .arg("--version")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|| "unknown".into());
    println!("cargo:rustc-env=SILT_BENCH_RUSTC_VERSION={rustc_version}");

    // librocksdb-sys versions look like "0.19.0+11.8.1": the part after '+' is the
    // bundled RocksDB release.
    let text = fs::read_to_string(&lock).unwrap_or_default();
    let rocksdb_crate = package_version(&text, "rocksdb").unwrap_or_else(|| "unknown".into());
    let sys = package_version(&text, "librocksdb-sys").unwrap_or_default();
    let engine = sys
        .split_once('+')
        .map(|(_, v)| v.to_string())
        .unwrap_or_else(|| "unknown".into());
    println!("cargo:rustc-env=SILT_BENCH_ROCKSDB_VERSION={engine}");
    println!("cargo:rustc-env=SILT_BENCH_ROCKSDB_CRATE_VERSION={rocksdb_crate}");
    let rusqlite = package_version(&text, "rusqlite").unwrap_or_else(|| "unknown".into());
    println!("cargo:rustc-env=SILT_BENCH_RUSQLITE_CRATE_VERSION={rusqlite}");

    // The Silt commit: rerun when the core sources or the checked-out commit change.
    let root = Path::new(&manifest_dir).join("..");
    println!("cargo:rerun-if-changed={}", root.join("crates").display());
    for git_path in [".git/HEAD", ".git/refs/heads"] {
        let p = root.join(git_path);
        if p.exists() {
            println!("cargo:rerun-if-changed={}", p.display());
        }
    }
    println!(
        "cargo:rustc-env=SILT_BENCH_SILT_COMMIT={}",
        silt_commit(&root)
    );
}

/// Finds `version = "..."` of `[[package]] name = "<name>"` in a Cargo.lock.
fn package_version(lock: &str, name: &str) -> Option<String> {
    let needle = format!("name = \"{name}\"");
    let mut lines = lock.lines();
    while let Some(line) = lines.next() {
        if line.trim() == needle {
            let next = lines.next()?;
            let v = next
                .trim()
                .strip_prefix("version = \"")?
                .strip_suffix('"')?;
            return Some(v.to_string());
        }
    }
    None
}

/// `git rev-parse --short HEAD` of the repository at `root`, `-dirty` when
/// `crates/` has uncommitted changes; "unknown" outside a git checkout.
fn silt_commit(root: &Path) -> String {
    let git = |args: &[&str]| -> Option<String> {
        let out = Command::new("git")
            .current_dir(root)
            .args(args)
            .output()
            .ok()?;
        out.status
            .success()
            .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
    };
    let Some(commit) = git(&["rev-parse", "--short", "HEAD"]) else {
        return "unknown".into();
    };
    let dirty = git(&["status", "--porcelain", "--", "crates"]).is_some_and(|s| !s.is_empty());
    if dirty {
        format!("{commit}-dirty")
    } else {
        commit
    }
}
