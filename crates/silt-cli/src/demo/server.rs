//! The demo's server step: `silt serve` started on free loopback ports, one
//! query through the PostgreSQL wire protocol (tokio-postgres, the way psql
//! or psycopg would send it), then a graceful stop.

use super::sql::Expected;
use crate::error::{CliError, CliResult};
use crate::util::duration;
use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// How long the server may take to start, and to stop.
const START: Duration = Duration::from_secs(60);
const STOP: Duration = Duration::from_secs(30);

/// `silt serve` on `dir`, killed if dropped before [`Served::stop`].
struct Served {
    child: Child,
    lines: mpsc::Receiver<String>,
}

impl Drop for Served {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

fn failed(what: impl std::fmt::Display) -> CliError {
    CliError::Failed(format!("demo: {what}"))
}

/// Start `silt serve` (this same binary) on ports the system picks; return
/// it with its PostgreSQL address once it says where it listens. Its banner
/// lines are printed, indented.
fn start(dir: &Path, cache_mb: u64) -> CliResult<(Served, SocketAddr)> {
    let exe =
        std::env::current_exe().map_err(|e| failed(format!("cannot find the silt binary: {e}")))?;
    let mut child = Command::new(&exe)
        .arg("--db")
        .arg(dir)
        .args(["--cache-mb", &cache_mb.to_string()])
        .args(["serve", "--pg", "127.0.0.1:0", "--http", "127.0.0.1:0"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| failed(format!("cannot start `{} serve`: {e}", exe.display())))?;
    let stderr = child
        .stderr
        .take()
        .ok_or_else(|| failed("the server's standard error is not readable"))?;
    let (tx, lines) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let served = Served { child, lines };
    let deadline = Instant::now() + START;
    let mut pg = None;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let line = match served.lines.recv_timeout(left) {
            Ok(line) => line,
            Err(mpsc::RecvTimeoutError::Timeout) => {
                return Err(failed(format!(
                    "`silt serve` did not say where it listens within {}",
                    duration(START)
                )));
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                return Err(failed(
                    "`silt serve` exited before listening (its message is above)",
                ));
            }
        };
        println!("     | {line}");
        let t = line.trim_start();
        if let Some(rest) = t.strip_prefix("PostgreSQL") {
            pg = rest.split_whitespace().next().and_then(|a| a.parse().ok());
        }
        if t.contains("Ctrl-C to stop") {
            break;
        }
    }
    // The banner's last line (the resource bounds) follows at once.
    if let Ok(line) = served.lines.recv_timeout(Duration::from_millis(500)) {
        println!("     | {line}");
    }
    match pg {
        Some(pg) => Ok((served, pg)),
        None => Err(failed(
            "`silt serve` started but its banner did not name its PostgreSQL address",
        )),
    }
}

impl Served {
    /// SIGTERM (as Ctrl-C would), then wait for the server to close the
    /// database; print what it says while stopping.
    fn stop(mut self) -> CliResult<Duration> {
        let t = Instant::now();
        terminate(&self.child)?;
        let deadline = t + STOP;
        loop {
            while let Ok(line) = self.lines.try_recv() {
                println!("     | {line}");
            }
            match self.child.try_wait() {
                Ok(Some(status)) if status.success() => break,
                Ok(Some(status)) => {
                    return Err(failed(format!("`silt serve` stopped with {status}")));
                }
                Ok(None) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(20));
                }
                Ok(None) => {
                    return Err(failed(format!(
                        "`silt serve` did not stop within {} of SIGTERM",
                        duration(STOP)
                    )));
                }
                Err(e) => return Err(failed(format!("waiting for `silt serve`: {e}"))),
            }
        }
        // The reader thread may still hold the last lines.
        while let Ok(line) = self.lines.recv_timeout(Duration::from_millis(200)) {
            println!("     | {line}");
        }
        Ok(t.elapsed())
    }
}

#[cfg(unix)]
fn terminate(child: &Child) -> CliResult<()> {
    let pid = libc::pid_t::try_from(child.id())
        .map_err(|_| failed(format!("process id {} out of range", child.id())))?;
    // SAFETY: `kill` takes two integers and touches no memory of ours. The
    // pid is our own child's, which has not been waited for (`Served` waits
    // only after this or on drop), so it cannot have been reused.
    let r = unsafe { libc::kill(pid, libc::SIGTERM) };
    if r == 0 {
        Ok(())
    } else {
        Err(failed(format!(
            "cannot signal `silt serve`: {}",
            std::io::Error::last_os_error()
        )))
    }
}

#[cfg(not(unix))]
fn terminate(child: &Child) -> CliResult<()> {
    Err(failed(format!(
        "stopping `silt serve` (pid {}) gracefully needs a Unix signal",
        child.id()
    )))
}

/// Start the server, run `sql` through the PostgreSQL protocol, check the
/// answer, stop the server.
pub fn round_trip(dir: &Path, cache_mb: u64, sql: &str, expected: &Expected) -> CliResult<()> {
    let t = Instant::now();
    let (served, pg) = start(dir, cache_mb)?;
    println!("     started in {}", duration(t.elapsed()));
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| failed(format!("cannot start a client runtime: {e}")))?;
    let conninfo = format!("host={} port={} user=silt dbname=silt", pg.ip(), pg.port());
    println!("     connect with tokio-postgres: {conninfo}");
    println!("     {sql}");
    let (rows, took) = rt.block_on(async {
        let (client, conn) = tokio_postgres::connect(&conninfo, tokio_postgres::NoTls)
            .await
            .map_err(|e| failed(format!("cannot connect to {pg}: {e}")))?;
        let conn = tokio::spawn(conn);
        let t = Instant::now();
        let msgs = client
            .simple_query(sql)
            .await
            .map_err(|e| failed(format!("`{sql}` through the server: {e}")))?;
        let took = t.elapsed();
        drop(client);
        let _ = conn.await;
        let rows: Vec<Vec<String>> = msgs
            .iter()
            .filter_map(|m| match m {
                tokio_postgres::SimpleQueryMessage::Row(r) => Some(
                    (0..r.len())
                        .map(|i| r.get(i).unwrap_or("NULL").to_owned())
                        .collect(),
                ),
                _ => None,
            })
            .collect();
        Ok::<_, CliError>((rows, took))
    })?;
    expected.check(&rows).map_err(|why| {
        CliError::Failed(format!(
            "demo check failed: `{sql}` through the server disagrees with the native API: {why}"
        ))
    })?;
    println!(
        "     {} in {} through the wire protocol; same answer as the native API:",
        crate::util::plural(rows.len() as u64, "row", "rows"),
        duration(took)
    );
    for r in &rows {
        println!("       {}", r.join(" | "));
    }
    let stopped = served.stop()?;
    println!("     stopped (SIGTERM, as Ctrl-C) in {}", duration(stopped));
    Ok(())
}
