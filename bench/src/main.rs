//! `silt-bench`: the benchmark harness of Silt. See `bench/README.md`.

// Without `peers` (e.g. `--no-default-features --features hydra`) the
// harness's shared helpers for the peer workloads (spatial data, I/O
// counters, ...) go unused.
#![cfg_attr(not(feature = "peers"), allow(dead_code))]

mod fsync_count;
mod limits;
mod machine;
mod plot;
mod report;
mod results;
mod spatial;
#[cfg(feature = "peers")]
mod systems;
mod util;
mod workloads;

use std::{
    cell::RefCell,
    collections::BTreeSet,
    fs,
    path::{Path, PathBuf},
};

use anyhow::{Context, Result, bail};
use clap::{Parser, Subcommand};

use crate::{
    limits::Limits,
    machine::Machine,
    results::{ResultFile, aggregate, print_tables},
    util::{ScratchDir, unix_now, utc_string},
    workloads::{Ctx, Scale},
};

/// Durability shown by `silt-bench machine` and `limits` (each workload's results
/// header states its own).
const DEFAULT_DURABILITY: &str = "per workload (see each result's header)";

#[derive(Parser)]
#[command(
    name = "silt-bench",
    about = "Benchmark harness for Silt and its peers"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// List the workloads.
    List,
    /// Run one workload and write <out>/<NAME>.csv (and .png).
    Run {
        /// Workload name (see `list`).
        name: String,
        #[arg(long, value_enum, default_value_t = Scale::Small)]
        scale: Scale,
        /// Number of runs; results are the median with min/max.
        #[arg(long, default_value_t = 3)]
        runs: usize,
        /// Results directory.
        #[arg(long)]
        out: Option<PathBuf>,
        /// Only these systems (comma-separated labels, or `silt` for every Silt variant).
        #[arg(long, value_delimiter = ',')]
        systems: Option<Vec<String>>,
        /// Silt merge policy to compare; repeat for several
        /// (default: prefix(1GB,5), tiered(4), leveled).
        #[arg(long = "policy")]
        policies: Vec<String>,
        /// Seed of the generated data.
        #[arg(long, default_value_t = 42)]
        seed: u64,
        /// Locations of the spatial workloads' records: cities (default), or a
        /// Spider-style distribution: uniform, diagonal, gaussian, sierpinski,
        /// bit, parcel. Other than cities, the results are written as
        /// NAME-DATA.csv/.png so the default results are kept.
        #[arg(long, default_value = "cities")]
        data: String,
        /// Log-scale axes in the plot.
        #[arg(long)]
        log: bool,
        /// Don't plot.
        #[arg(long)]
        no_plot: bool,
    },
    /// Print the machine header.
    Machine {
        #[arg(long)]
        out: Option<PathBuf>,
    },
    /// Measure (or show the cached) physical limits of this machine.
    Limits {
        #[arg(long)]
        out: Option<PathBuf>,
        /// Measure again even when limits.json matches this machine.
        #[arg(long)]
        force: bool,
    },
    /// One replica of a Hydra volume, for the `hydra` workload (which starts
    /// three of these as child processes); runs until stdin closes.
    #[cfg(feature = "hydra")]
    #[command(hide = true)]
    HydraNode(workloads::hydra_node::NodeArgs),
    /// Regenerate docs/benchmarks.md from the results CSVs.
    Report {
        #[arg(long)]
        out: Option<PathBuf>,
        /// The Markdown file to write.
        #[arg(long)]
        doc: Option<PathBuf>,
    },
}

fn bench_dir() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn results_dir(out: Option<PathBuf>) -> Result<PathBuf> {
    let dir = out.unwrap_or_else(|| bench_dir().join("results"));
    fs::create_dir_all(&dir).with_context(|| format!("creating results dir {}", dir.display()))?;
    Ok(dir)
}

fn main() -> Result<()> {
    let cli = Cli::parse();
    match cli.cmd {
        #[cfg(feature = "hydra")]
        Cmd::HydraNode(args) => workloads::hydra_node::serve(args)?,
        Cmd::List => {
            for w in workloads::all() {
                println!("{:<20} {}", w.name(), w.description());
            }
        }
        Cmd::Machine { out } => {
            let dir = results_dir(out)?;
            println!(
                "machine: {}",
                Machine::collect(&dir, DEFAULT_DURABILITY).header_line()
            );
        }
        Cmd::Limits { out, force } => {
            let dir = results_dir(out)?;
            let machine = Machine::collect(&dir, DEFAULT_DURABILITY);
            println!("machine: {}", machine.header_line());
            Limits::load_or_measure(&dir, &machine, force)?.print();
        }
        Cmd::Report { out, doc } => {
            let dir = results_dir(out)?;
            let doc = doc.unwrap_or_else(|| bench_dir().join("../docs/benchmarks.md"));
            let n = report::generate(&dir, &doc)?;
            println!("wrote {} ({n} workload result files)", doc.display());
        }
        Cmd::Run {
            name,
            scale,
            runs,
            out,
            systems,
            policies,
            seed,
            data,
            log,
            no_plot,
        } => {
            let data_dist = spatial::data::PointDist::parse(&data)?;
            let file_stem = if data_dist == spatial::data::PointDist::Cities {
                name.clone()
            } else {
                format!("{name}-{}", data.to_ascii_lowercase())
            };
            let Some(workload) = workloads::find(&name) else {
                let names: Vec<_> = workloads::all().iter().map(|w| w.name()).collect();
                if let Some(feature) = workloads::missing_feature(&name) {
                    bail!(
                        "workload {name:?} needs the harness built with its `{feature}` feature: \
                         cargo build --release (the default has every feature), or add \
                         --features {feature} to a --no-default-features build"
                    );
                }
                bail!("unknown workload {name:?}; known: {}", names.join(", "));
            };
            if runs == 0 {
                bail!("--runs must be at least 1");
            }
            let dir = results_dir(out)?;
            let machine = Machine::collect(&dir, workload.durability());
            println!("machine: {}", machine.header_line());
            let limits = Limits::load_or_measure(&dir, &machine, false)?;
            println!("limits: {}", limits.summary_line());
            let date = utc_string(unix_now());
            let busy = machine::cpu_busy_fraction(std::time::Duration::from_secs(1));
            if busy.is_some_and(|b| b > 0.2) {
                eprintln!(
                    "WARNING: the machine is busy ({:.0}% of the CPU used by other processes \
                     just before the run): results will be noisy; rerun on an idle machine for numbers to keep",
                    100.0 * busy.unwrap_or_default()
                );
            }
            let busy = busy.map_or("?".to_string(), |b| format!("{:.0}%", 100.0 * b));
            let run_line = format!(
                "workload={name} scale={scale} runs={runs} seed={seed} data={} date={date} cpu_busy_before={busy}",
                data.to_ascii_lowercase()
            );
            println!("run: {run_line}");

            let scratch_root = std::env::var_os("SILT_BENCH_TMP")
                .map(PathBuf::from)
                .unwrap_or_else(|| dir.join("tmp"));
            let scratch =
                ScratchDir::new(&scratch_root, &format!("{name}-{}", std::process::id()))?;
            let policies = if policies.is_empty() {
                workloads::default_policies()
            } else {
                policies
            };
            let mut ctx = Ctx {
                run: 0,
                seed,
                out: dir.clone(),
                scratch: scratch.path().to_path_buf(),
                limits: limits.clone(),
                systems,
                silt_policies: policies,
                data: data_dist,
                notes: RefCell::new(BTreeSet::new()),
            };
            let cpu_start = machine::CpuSnapshot::take();
            let mut all_runs = Vec::with_capacity(runs);
            for run in 0..runs {
                ctx.run = run;
                eprintln!("== {name} ({scale}) run {}/{runs}", run + 1);
                let rows = workload
                    .run(scale, &ctx)
                    .with_context(|| format!("{name} run {}", run + 1))?;
                if rows.is_empty() {
                    bail!("{name} produced no results (were all systems filtered out?)");
                }
                all_runs.push(rows);
            }
            drop(scratch);
            // The default scratch root is ours: leave no empty directory behind.
            let _ = fs::remove_dir(dir.join("tmp"));

            let others = cpu_start
                .zip(machine::CpuSnapshot::take())
                .and_then(|(a, b)| b.others_since(&a));
            if let Some(o) = others.filter(|o| *o > 0.1) {
                eprintln!(
                    "WARNING: other processes used {:.0}% of the CPU during the run: results are noisy",
                    100.0 * o
                );
            }
            let run_line = format!(
                "{run_line} cpu_others_during={}",
                others.map_or("?".to_string(), |o| format!("{:.0}%", 100.0 * o))
            );
            let rows = aggregate(&name, &scale.to_string(), &all_runs);
            println!("\n{name} (scale {scale}, median of {runs} run(s), min..max):");
            print_tables(&rows);

            let mut header = vec![
                ("machine".to_string(), machine.header_line()),
                ("run".to_string(), run_line),
                ("limits".to_string(), limits.summary_line()),
            ];
            header.extend(
                ctx.notes
                    .borrow()
                    .iter()
                    .map(|n| ("system".to_string(), n.clone())),
            );
            let csv = dir.join(format!("{file_stem}.csv"));
            ResultFile { header, rows }.write(&csv)?;
            println!("\nwrote {}", csv.display());
            if !no_plot {
                plot::plot(&csv, &dir.join(format!("{file_stem}.png")), log);
            }
        }
    }
    Ok(())
}
