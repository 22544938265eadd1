//! What `silt serve` needs: parsing its flags and running the server in
//! the foreground until Ctrl-C or SIGTERM.

use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::Arc;
use std::time::Duration;

use silt::Database;

use crate::error::fmt_duration;
use crate::{Server, ServerConfig, ServerError};

/// Parse a listen address: `HOST:PORT`, `:PORT` (localhost), `PORT`, or
/// `off` / `none` (no listener).
pub fn parse_addr(what: &str, s: &str) -> Result<Option<SocketAddr>, ServerError> {
    let t = s.trim();
    if matches!(t.to_ascii_lowercase().as_str(), "off" | "none" | "no" | "") {
        return Ok(None);
    }
    let full = if let Some(port) = t.strip_prefix(':') {
        format!("127.0.0.1:{port}")
    } else if t.chars().all(|c| c.is_ascii_digit()) {
        format!("127.0.0.1:{t}")
    } else {
        t.to_owned()
    };
    full.to_socket_addrs()
        .ok()
        .and_then(|mut a| a.next())
        .map(Some)
        .ok_or_else(|| {
            ServerError::Config(format!(
                "--{what} {s}: expected HOST:PORT (e.g. 127.0.0.1:5433, 0.0.0.0:5433, :5433) or `off`"
            ))
        })
}

/// Parse a duration: `30s`, `500ms`, `2m`, `1h`, a number of seconds, or
/// `0` / `off` (no limit).
pub fn parse_duration(what: &str, s: &str) -> Result<Duration, ServerError> {
    let t = s.trim().to_ascii_lowercase();
    if matches!(t.as_str(), "0" | "off" | "none") {
        return Ok(Duration::ZERO);
    }
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let bad = || {
        ServerError::Config(format!(
            "--{what} {s}: expected a duration such as 30s, 500ms, 2m, 1h (0 for none)"
        ))
    };
    let v: f64 = num.parse().map_err(|_| bad())?;
    let secs = match unit.trim() {
        "" | "s" | "sec" | "secs" => v,
        "ms" => v / 1000.0,
        "m" | "min" | "mins" => v * 60.0,
        "h" => v * 3600.0,
        _ => return Err(bad()),
    };
    Duration::try_from_secs_f64(secs).map_err(|_| bad())
}

/// Parse a size: `512MiB`, `1GiB`, `64KiB`, `100MB` (decimal), `512m`
/// (binary), a number of bytes, or `0` / `off` (no limit).
pub fn parse_size(what: &str, s: &str) -> Result<usize, ServerError> {
    let t = s.trim().to_ascii_lowercase();
    if matches!(t.as_str(), "0" | "off" | "none") {
        return Ok(0);
    }
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let bad = || {
        ServerError::Config(format!(
            "--{what} {s}: expected a size such as 512MiB, 1GiB, 64KiB, 100MB or a number of bytes (0 for none)"
        ))
    };
    let v: f64 = num.parse().map_err(|_| bad())?;
    let mult: f64 = match unit.trim() {
        "" | "b" | "bytes" => 1.0,
        "k" | "kib" => 1024.0,
        "m" | "mib" => 1024.0 * 1024.0,
        "g" | "gib" => 1024.0 * 1024.0 * 1024.0,
        "t" | "tib" => 1024.0 * 1024.0 * 1024.0 * 1024.0,
        "kb" => 1e3,
        "mb" => 1e6,
        "gb" => 1e9,
        "tb" => 1e12,
        _ => return Err(bad()),
    };
    let bytes = v * mult;
    if !bytes.is_finite() || bytes < 0.0 || bytes >= usize::MAX as f64 {
        return Err(bad());
    }
    Ok(bytes as usize)
}

/// The resource-bound flags of `silt serve`, as given (see [`apply_bounds`]).
#[derive(Clone, Debug, Default)]
pub struct BoundFlags {
    pub max_query_memory: String,
    pub max_server_memory: String,
    pub max_value_bytes: String,
    pub max_result_bytes: String,
    pub max_result_rows: u64,
    pub max_connections: usize,
    pub idle_timeout: String,
    pub idle_in_transaction_timeout: String,
    pub max_request_bytes: String,
    pub column_cache: String,
}

/// Set the resource bounds of `cfg` from `silt serve`'s flags.
pub fn apply_bounds(cfg: &mut ServerConfig, f: &BoundFlags) -> Result<(), ServerError> {
    cfg.max_query_memory = parse_size("max-query-memory", &f.max_query_memory)?;
    cfg.max_server_memory = parse_size("max-server-memory", &f.max_server_memory)?;
    cfg.max_value_bytes = parse_size("max-value-bytes", &f.max_value_bytes)?;
    cfg.max_result_bytes = parse_size("max-result-bytes", &f.max_result_bytes)?;
    cfg.max_result_rows = f.max_result_rows;
    cfg.max_connections = f.max_connections;
    cfg.idle_timeout = parse_duration("idle-timeout", &f.idle_timeout)?;
    cfg.idle_in_transaction_timeout = parse_duration(
        "idle-in-transaction-timeout",
        &f.idle_in_transaction_timeout,
    )?;
    cfg.max_request_bytes = parse_size("max-request-bytes", &f.max_request_bytes)?;
    if !f.column_cache.is_empty() {
        cfg.column_cache = parse_size("column-cache", &f.column_cache)?;
    }
    if cfg.max_query_memory > 0
        && cfg.max_server_memory > 0
        && cfg.max_query_memory > cfg.max_server_memory
    {
        return Err(ServerError::Config(format!(
            "--max-query-memory ({}) is more than --max-server-memory ({}): one statement could take all of it",
            silt_sql::bounds::fmt_bytes(cfg.max_query_memory),
            silt_sql::bounds::fmt_bytes(cfg.max_server_memory)
        )));
    }
    Ok(())
}

/// A limit as the startup message shows it.
fn shown(n: usize) -> String {
    if n == 0 {
        "none".to_owned()
    } else {
        silt_sql::bounds::fmt_bytes(n)
    }
}

/// The configuration of `silt serve`'s flags.
pub fn config(
    pg: &str,
    http: &str,
    max_concurrent: usize,
    queue: usize,
    timeout: &str,
) -> Result<ServerConfig, ServerError> {
    Ok(ServerConfig {
        pg_addr: parse_addr("pg", pg)?,
        http_addr: parse_addr("http", http)?,
        max_concurrent,
        queue,
        query_timeout: parse_duration("timeout", timeout)?,
        ..ServerConfig::default()
    })
}

/// Send the server's log (failed logins, connection errors, shutdown) to
/// standard error: warnings and up, plus logins, by default; `RUST_LOG`
/// (e.g. `RUST_LOG=debug`) chooses otherwise.
fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn,silt_server=info"));
    // Fails only if a subscriber is already set (an embedding program's).
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_target(false)
        .try_init();
}

/// Serve `db` in the foreground until Ctrl-C or SIGTERM, telling people on
/// standard error where to connect; then shut down gracefully and close
/// (checkpoint) the database.
pub fn serve_until_signal(db: Database, cfg: ServerConfig) -> Result<(), ServerError> {
    init_logging();
    limit_malloc_arenas();
    purge_freed_memory_at_once();
    no_transparent_huge_pages();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .thread_name("silt-serve")
        .enable_all()
        .build()
        .map_err(ServerError::Io)?;
    let path = db.path().display().to_string();
    let db = Arc::new(db);
    rt.block_on(async move {
        let timeout = cfg.query_timeout;
        let (max, queue) = (cfg.max_concurrent, cfg.queue);
        let users = db
            .roles()
            .iter()
            .filter(|r| r.login && r.verifier.is_some())
            .count();
        let tls = cfg.tls.is_some();
        let tls_required = cfg.tls_required;
        let scheme = if tls { "https" } else { "http" };
        let bounds = format!(
            "  memory {} a query, {} in all, {} of column images; values {}; results {}; {} connections; idle {}, in a transaction {}",
            shown(cfg.max_query_memory),
            shown(cfg.max_server_memory),
            shown(cfg.column_cache),
            shown(cfg.max_value_bytes),
            shown(cfg.max_result_bytes),
            cfg.max_connections,
            fmt_duration(cfg.idle_timeout),
            fmt_duration(cfg.idle_in_transaction_timeout),
        );
        let server = Server::start(db, cfg).await?;
        eprintln!("serving {path}");
        if users == 0 {
            eprintln!(
                "  no users yet: nobody is asked for a password until one exists (loopback only; `silt user --help`, or CREATE USER)"
            );
        } else {
            eprintln!(
                "  {users} user(s) may log in: SCRAM-SHA-256 (PostgreSQL), Basic or bearer tokens (HTTP)"
            );
        }
        if tls {
            eprintln!(
                "  TLS on both listeners{}",
                if tls_required {
                    "; plain PostgreSQL connections refused"
                } else {
                    ""
                }
            );
        }
        if let Some(a) = server.pg_addr() {
            eprintln!(
                "  PostgreSQL  {a}    psql -h {} -p {} -U silt",
                a.ip(),
                a.port()
            );
        }
        if let Some(a) = server.http_addr() {
            eprintln!(
                "  HTTP        {scheme}://{a}/query/service    curl -d 'SELECT 1' {scheme}://{a}/query/service"
            );
        }
        eprintln!(
            "  {max} statements at once, {queue} waiting, timeout {}; Ctrl-C to stop",
            if timeout.is_zero() {
                "none".to_owned()
            } else {
                fmt_duration(timeout)
            }
        );
        eprintln!("{bounds}");
        crate::shutdown_signal().await;
        eprintln!("shutting down: finishing running statements, then closing the database");
        server.shutdown().await?;
        eprintln!("database closed (checkpointed)");
        Ok(())
    })
}

/// glibc gives threads their own malloc arenas (up to 8 per core), each
/// keeping the memory its threads freed. With a worker thread per execution
/// slot that doubled the server's peak memory under load (server-abuse:
/// 1,144 MiB with the default, 610 MiB with 2 arenas; see
/// `docs/reproductions/server-abuse-28`; 850 MiB with 4). Two arenas, unless the operator
/// set `MALLOC_ARENA_MAX` (glibc reads it itself).
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn limit_malloc_arenas() {
    if std::env::var_os("MALLOC_ARENA_MAX").is_none() {
        // SAFETY: mallopt takes two integers and only changes a parameter
        // of glibc's allocator; it is thread-safe and may be called at any
        // time (here once, before the server's runtimes start).
        unsafe {
            libc::mallopt(libc::M_ARENA_MAX, 2);
        }
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn limit_malloc_arenas() {}

/// mimalloc's `purge_delay` option (`mimalloc.h`'s `mi_option_e`).
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

/// mimalloc (the `silt` binary's allocator) gives memory freed back to the
/// kernel one second after it was freed, by default. A statement that grows
/// a big value (`string_agg`, a sort's buffers) reallocates it as it
/// doubles, and under a steady stream of such statements a second's worth
/// of freed copies stayed resident: `string_agg` over a cross join, one
/// client, held 972 MiB resident with the default, 342 MiB with no delay;
/// eight clients 1,435 against 509 MiB (64 MiB a statement). Small queries'
/// throughput did not move (16 clients: 122,061 against 122,641 lookups in
/// 8 s). So freed memory goes back at once, unless the operator set
/// `MIMALLOC_PURGE_DELAY`. A binary on another allocator only sets an
/// option it never reads.
fn purge_freed_memory_at_once() {
    if std::env::var_os("MIMALLOC_PURGE_DELAY").is_none() {
        // SAFETY: mi_option_set takes an option number and a value and only
        // stores the value in mimalloc's option table (an atomic); it may
        // be called at any time from any thread, and an out-of-range
        // option number is ignored.
        unsafe {
            libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, 0);
        }
    }
}

/// Transparent huge pages off for the server's process, unless the
/// operator set mimalloc's `MIMALLOC_ALLOW_THP`. mimalloc asks for huge
/// pages for its arenas, so the first touch of memory clears 2 MiB at a
/// time, and memory freed (a flushed memtable, a written batch) goes back
/// to the kernel in pieces and is cleared again when touched anew: a `COPY`
/// of 1 M rows spent 15-19% of the server's CPU in the kernel's
/// `clear_page`. With huge pages off, the server's CPU for that load went
/// from 1.93-1.99 s to 1.59-1.62 s and the load from 1.25-1.33 s to
/// 1.03-1.04 s (psql `\copy`, quiet machine).
#[cfg(target_os = "linux")]
fn no_transparent_huge_pages() {
    if std::env::var_os("MIMALLOC_ALLOW_THP").is_none() {
        // SAFETY: prctl(PR_SET_THP_DISABLE, 1, 0, 0, 0) takes integers only
        // and sets a flag of the calling process, touching no memory of
        // ours; a kernel without it returns an error and nothing changes.
        unsafe {
            libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0);
        }
    }
}

#[cfg(not(target_os = "linux"))]
fn no_transparent_huge_pages() {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_purge_delay_is_mimallocs_option_15() {
        // SAFETY: mi_option_get reads mimalloc's option table.
        let get = || unsafe { libmimalloc_sys::mi_option_get(MI_OPTION_PURGE_DELAY) };
        if std::env::var_os("MIMALLOC_PURGE_DELAY").is_none() {
            // mimalloc v3's default purge delay; no other option of its
            // table defaults to 1,000 but the guarded sample rate (36).
            assert_eq!(get(), 1000);
        }
        purge_freed_memory_at_once();
        if std::env::var_os("MIMALLOC_PURGE_DELAY").is_none() {
            assert_eq!(get(), 0);
        }
    }

    #[test]
    fn flags() {
        assert_eq!(parse_duration("t", "30s").unwrap(), Duration::from_secs(30));
        assert_eq!(
            parse_duration("t", "250ms").unwrap(),
            Duration::from_millis(250)
        );
        assert_eq!(parse_duration("t", "2m").unwrap(), Duration::from_secs(120));
        assert_eq!(parse_duration("t", "5").unwrap(), Duration::from_secs(5));
        assert_eq!(parse_duration("t", "0").unwrap(), Duration::ZERO);
        assert!(parse_duration("t", "abc").is_err());
        assert!(parse_duration("t", "1e400s").is_err());
        assert!(parse_duration("t", "-1s").is_err());
        assert_eq!(
            parse_addr("pg", ":5433").unwrap(),
            Some("127.0.0.1:5433".parse().unwrap())
        );
        assert_eq!(parse_addr("pg", "off").unwrap(), None);
        assert!(parse_addr("pg", "nonsense").is_err());
        assert_eq!(parse_size("s", "512MiB").unwrap(), 512 << 20);
        assert_eq!(parse_size("s", "1GiB").unwrap(), 1 << 30);
        assert_eq!(parse_size("s", "1.5g").unwrap(), 3 << 29);
        assert_eq!(parse_size("s", "100MB").unwrap(), 100_000_000);
        assert_eq!(parse_size("s", "4096").unwrap(), 4096);
        assert_eq!(parse_size("s", "off").unwrap(), 0);
        assert!(parse_size("s", "lots").is_err());
        assert!(parse_size("s", "-1MiB").is_err());
        assert!(parse_size("s", "1e30TiB").is_err());
    }
}
