//! The server of the harness's server workloads (`server-abuse`,
//! `sql-path`, `pg-copy`): what `silt serve` runs, with the flags they
//! pass, in a binary of its own so that it has `silt serve`'s allocator
//! (mimalloc, set by the `silt` binary) while the harness's embedded
//! measurements keep the system's.

use std::path::PathBuf;

use anyhow::Result;
use clap::Parser;

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser)]
#[command(about = "silt serve for the benchmark harness")]
struct Args {
    #[arg(long)]
    db: PathBuf,
    #[arg(long)]
    pg: String,
    #[arg(long)]
    http: String,
    #[arg(long, default_value_t = 4)]
    max_concurrent: usize,
    #[arg(long, default_value = "30s")]
    timeout: String,
    #[arg(long, default_value = "256MiB")]
    max_query_memory: String,
    #[arg(long, default_value = "1GiB")]
    max_server_memory: String,
    #[arg(long, default_value = "64MiB")]
    max_value_bytes: String,
    #[arg(long, default_value = "256MiB")]
    max_result_bytes: String,
    #[arg(long, default_value = "256MiB")]
    column_cache: String,
}

fn main() -> Result<()> {
    let a = Args::parse();
    let defaults = silt_server::ServerConfig::default();
    let bounds = silt_server::cli::BoundFlags {
        max_query_memory: a.max_query_memory,
        max_server_memory: a.max_server_memory,
        max_value_bytes: a.max_value_bytes,
        max_result_bytes: a.max_result_bytes,
        max_result_rows: defaults.max_result_rows,
        max_connections: defaults.max_connections,
        idle_timeout: "30m".to_string(),
        idle_in_transaction_timeout: "5m".to_string(),
        max_request_bytes: "16MiB".to_string(),
        column_cache: a.column_cache,
    };
    let mut cfg = silt_server::cli::config(&a.pg, &a.http, a.max_concurrent, 256, &a.timeout)?;
    silt_server::cli::apply_bounds(&mut cfg, &bounds)?;
    std::fs::create_dir_all(&a.db)?;
    let db = silt::Database::open(&a.db, silt::DbOptions::default())?;
    silt_server::cli::serve_until_signal(db, cfg)?;
    Ok(())
}
