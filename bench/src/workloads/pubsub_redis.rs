//! The broker peer of `pubsub`: Redis Streams on a server the harness starts
//! on loopback (Debian's `redis-server`, append-only file without fsync, as
//! Silt's log runs without fsync per operation). Per grid cell two streams,
//! `S:<cell>` and `P:<cell>`, whose entry ids are the operation times, so a
//! window is one `XRANGE`; an append trims what has expired (`MINID ~`,
//! Redis's own retention). Each operation is one pipelined round trip: the
//! append, and the reads of what it must match.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use silt::pubsub::{Publication, Subscription};

use super::pubsub::{LIFE_MS, PsStore, SELF_JOIN_MS, Tally, WINDOW_MS, field, item};

/// A throw-away Redis server (killed when dropped).
pub struct RedisServer {
    child: Child,
    port: u16,
}

impl RedisServer {
    pub fn start(dir: &Path) -> Result<RedisServer> {
        let port = crate::util::free_port()?;
        let child = Command::new("redis-server")
            .args(["--bind", "127.0.0.1", "--port", &port.to_string()])
            .arg("--dir")
            .arg(dir)
            .args(["--appendonly", "yes", "--appendfsync", "no", "--save", ""])
            .args(["--daemonize", "no", "--loglevel", "warning"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .context(
                "starting redis-server (Debian package redis-server; bench/setup.sh installs it)",
            )?;
        let mut s = RedisServer { child, port };
        let start = Instant::now();
        loop {
            if let Ok(mut c) = s.connect()
                && redis::cmd("PING").query::<String>(&mut c).is_ok()
            {
                return Ok(s);
            }
            if let Ok(Some(st)) = s.child.try_wait() {
                bail!("redis-server exited at start with {st}");
            }
            if start.elapsed() > Duration::from_secs(10) {
                bail!("redis-server did not answer within 10 s on port {}", s.port);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn connect(&self) -> Result<redis::Connection> {
        let c = redis::Client::open(format!("redis://127.0.0.1:{}/", self.port))?;
        Ok(c.get_connection()?)
    }

    pub fn version() -> Option<String> {
        let out = Command::new("redis-server")
            .arg("--version")
            .output()
            .ok()?;
        Some(String::from_utf8_lossy(&out.stdout).trim().to_owned())
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub struct RedisPs {
    con: redis::Connection,
    _server: RedisServer,
}

/// XRANGE's answer: (entry id, [field, value, ...]).
type Entries = Vec<(String, Vec<Vec<u8>>)>;

fn items(e: &Entries) -> impl Iterator<Item = &[u8]> {
    e.iter().filter_map(|(_, kv)| kv.get(1).map(Vec::as_slice))
}

fn cell(id: &silt::Value) -> i64 {
    id.as_i64().unwrap_or(0)
}

/// `XADD key MINID ~ <trim> <t>-1 d <item>` (no trim while `trim <= 0`; the
/// sequence part is 1 because Redis refuses the id 0-0).
fn append(p: &mut redis::Pipeline, key: &str, trim: i64, t: i64, it: &[u8]) {
    let c = p.cmd("XADD").arg(key);
    if trim > 0 {
        c.arg("MINID").arg("~").arg(trim);
    }
    c.arg(format!("{t}-1")).arg("d").arg(it);
}

impl RedisPs {
    pub fn open(dir: &Path) -> Result<RedisPs> {
        let server = RedisServer::start(dir)?;
        let con = server.connect()?;
        Ok(RedisPs {
            con,
            _server: server,
        })
    }
}

impl PsStore for RedisPs {
    fn subscribe(&mut self, s: &Subscription, self_join: bool, t: &mut Tally) -> Result<()> {
        let c = cell(&s.id);
        let (sk, pk) = (format!("S:{c}"), format!("P:{c}"));
        let mut p = redis::pipe();
        append(
            &mut p,
            &sk,
            s.ts - WINDOW_MS + 1,
            s.ts,
            &item(s.ts, s.tmax, s.sid, s.uid, s.tmin),
        );
        p.cmd("XRANGE").arg(&pk).arg(s.tmin.max(0)).arg(s.tmax - 1);
        if self_join {
            p.cmd("XRANGE").arg(&sk).arg("-").arg("+");
        }
        let (pubs, others): (Entries, Option<Entries>) = if self_join {
            let (_, b, c): (String, Entries, Entries) = p.query(&mut self.con)?;
            (b, Some(c))
        } else {
            let (_, b): (String, Entries) = p.query(&mut self.con)?;
            (b, None)
        };
        for it in items(&pubs) {
            let (tp, ptmax) = (field(it, 0), field(it, 1));
            if s.tmin <= tp && tp < s.tmax && (tp >= s.ts || s.ts < ptmax) {
                t.matches += 1;
            }
        }
        if let Some(o) = others {
            for it in items(&o) {
                if field(it, 2) != s.sid && field(it, 0) <= s.ts && s.ts < field(it, 1) {
                    t.joined += 1;
                }
            }
        }
        Ok(())
    }

    fn publish(&mut self, pb: &Publication, self_join: bool, t: &mut Tally) -> Result<()> {
        let c = cell(&pb.id);
        let (sk, pk) = (format!("S:{c}"), format!("P:{c}"));
        let mut p = redis::pipe();
        append(
            &mut p,
            &pk,
            pb.tp - LIFE_MS + 1,
            pb.tp,
            &item(pb.tp, pb.tmax, pb.pid, 0, 0),
        );
        p.cmd("XRANGE").arg(&sk).arg("-").arg("+");
        if self_join {
            p.cmd("XRANGE")
                .arg(&pk)
                .arg((pb.tp - SELF_JOIN_MS).max(0))
                .arg(pb.tp);
        }
        let (subs, pubs): (Entries, Option<Entries>) = if self_join {
            let (_, b, c): (String, Entries, Entries) = p.query(&mut self.con)?;
            (b, Some(c))
        } else {
            let (_, b): (String, Entries) = p.query(&mut self.con)?;
            (b, None)
        };
        for it in items(&subs) {
            let (ts, stmax, tmin) = (field(it, 0), field(it, 1), field(it, 4));
            if tmin <= pb.tp && pb.tp < stmax && (pb.tp >= ts || ts < pb.tmax) {
                t.matches += 1;
            }
        }
        if let Some(o) = pubs {
            let lo = pb.tp - SELF_JOIN_MS;
            for it in items(&o) {
                let tp = field(it, 0);
                if field(it, 2) != pb.pid && tp >= lo && tp <= pb.tp && pb.tp < field(it, 1) {
                    t.joined += 1;
                }
            }
        }
        Ok(())
    }
}
