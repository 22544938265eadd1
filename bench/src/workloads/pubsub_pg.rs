//! PostgreSQL as the Padres stand-in of `pubsub` (seed 001 §4.7 compares a
//! broker with history): two tables, `subs` and `pubs`, on a throw-away
//! cluster the harness starts on loopback (`synchronous_commit = off`, as
//! Silt's log runs without fsync per operation; autovacuum on, since the
//! workload deletes what expires). Each operation is one round trip: a
//! PL/pgSQL function stores the operation, returns what it matches (and,
//! self-joining, the other live subscriptions or recent publications of the
//! cell), and a PUBLISH NOTIFYs every subscriber it reaches on the channel
//! `matches` (payload `sid:pid`). A second connection LISTENs and counts
//! the notifications: at the end of a run they must equal the PUBLISH
//! matches, or the run fails. The match rule is `silt::pubsub::model`'s;
//! once per logical second the rows that can match nothing any more
//! (`tmax <= now`) are deleted.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use postgres::fallible_iterator::FallibleIterator;
use postgres::{Client, NoTls, Statement};
use silt::pubsub::{Publication, Subscription};

use super::pubsub::{PsStore, SELF_JOIN_MS, Tally};
use crate::systems::postgis::{PgCluster, PgInstall};

/// How often (logical ms) expired rows are deleted: the RepQueries poll
/// interval, so every system forgets at the same pace.
const SWEEP_MS: i64 = 1_000;

const SCHEMA: &str = "
CREATE TABLE subs (cell bigint NOT NULL, ts bigint NOT NULL, tmin bigint NOT NULL,
                   tmax bigint NOT NULL, sid bigint NOT NULL, uid bigint NOT NULL);
CREATE INDEX subs_cell_tmax ON subs (cell, tmax);
CREATE TABLE pubs (cell bigint NOT NULL, tp bigint NOT NULL, tmax bigint NOT NULL,
                   pid bigint NOT NULL, descr text NOT NULL);
CREATE INDEX pubs_cell_tp ON pubs (cell, tp);

-- SUBSCRIBE: store, then the stored publications it matches (k = 0) and,
-- self-joining, the other live subscriptions of the cell (k = 1).
CREATE FUNCTION ps_subscribe(c bigint, s_ts bigint, s_tmin bigint, s_tmax bigint,
                             s_sid bigint, s_uid bigint, self_join bool)
RETURNS TABLE (k int, id bigint, descr text) AS $$
BEGIN
  INSERT INTO subs VALUES (c, s_ts, s_tmin, s_tmax, s_sid, s_uid);
  RETURN QUERY SELECT 0, p.pid, p.descr FROM pubs p
    WHERE p.cell = c AND p.tp >= s_tmin AND p.tp < s_tmax
      AND (p.tp >= s_ts OR s_ts < p.tmax);
  IF self_join THEN
    RETURN QUERY SELECT 1, o.sid, NULL::text FROM subs o
      WHERE o.cell = c AND o.tmax > s_ts AND o.ts <= s_ts AND o.sid <> s_sid;
  END IF;
END $$ LANGUAGE plpgsql;

-- PUBLISH: store, then the live subscriptions it matches (k = 0, each
-- NOTIFYed) and, self-joining, the valid publications of the cell since
-- `since` (k = 1).
CREATE FUNCTION ps_publish(c bigint, p_tp bigint, p_tmax bigint, p_pid bigint,
                           p_descr text, self_join bool, since bigint)
RETURNS TABLE (k int, id bigint, descr text) AS $$
DECLARE r record;
BEGIN
  INSERT INTO pubs VALUES (c, p_tp, p_tmax, p_pid, p_descr);
  FOR r IN SELECT s.sid, s.uid FROM subs s
    WHERE s.cell = c AND s.tmax > p_tp AND s.tmin <= p_tp
      AND (p_tp >= s.ts OR s.ts < p_tmax)
  LOOP
    PERFORM pg_notify('matches', r.sid || ':' || p_pid);
    k := 0; id := r.sid; descr := NULL; RETURN NEXT;
  END LOOP;
  IF self_join THEN
    RETURN QUERY SELECT 1, o.pid, o.descr FROM pubs o
      WHERE o.cell = c AND o.tp >= since AND o.tp <= p_tp AND p_tp < o.tmax
        AND o.pid <> p_pid;
  END IF;
END $$ LANGUAGE plpgsql;
";

pub struct PgPs {
    client: Client,
    sub: Statement,
    publ: Statement,
    sweep: (Statement, Statement),
    swept: i64,
    /// Notifications the listener has received.
    heard: Arc<AtomicU64>,
    /// PUBLISH matches, each of which was NOTIFYed.
    told: u64,
    listener: Option<(JoinHandle<Result<()>>, Arc<AtomicU64>)>,
    _cluster: PgCluster,
}

/// Why the peer can't run here, if it can't (no server binaries).
pub fn unavailable() -> Option<String> {
    PgInstall::find().err()
}

fn connect(port: u16) -> Result<Client> {
    Client::connect(
        &format!("host=127.0.0.1 port={port} user=postgres dbname=postgres"),
        NoTls,
    )
    .context("connecting to the PostgreSQL cluster")
}

impl PgPs {
    pub fn open(dir: &Path) -> Result<PgPs> {
        let install = PgInstall::find().map_err(anyhow::Error::msg)?;
        let cluster = PgCluster::start_with(install, dir, "autovacuum = on\n")?;
        let mut client = connect(cluster.port)?;
        client
            .batch_execute(SCHEMA)
            .context("creating the pub/sub tables and functions")?;
        let sub =
            client.prepare("SELECT k, id, descr FROM ps_subscribe($1, $2, $3, $4, $5, $6, $7)")?;
        let publ =
            client.prepare("SELECT k, id, descr FROM ps_publish($1, $2, $3, $4, $5, $6, $7)")?;
        let sweep = (
            client.prepare("DELETE FROM subs WHERE tmax <= $1")?,
            client.prepare("DELETE FROM pubs WHERE tmax <= $1")?,
        );
        // The listener: its own connection, LISTENing until told to stop.
        let heard = Arc::new(AtomicU64::new(0));
        let stop = Arc::new(AtomicU64::new(0));
        let mut lc = connect(cluster.port)?;
        lc.batch_execute("LISTEN matches")?;
        let (h, s) = (heard.clone(), stop.clone());
        let listener = std::thread::spawn(move || -> Result<()> {
            let mut n = lc.notifications();
            loop {
                let mut it = n.timeout_iter(Duration::from_millis(50));
                while let Some(_note) = it.next()? {
                    h.fetch_add(1, Ordering::Relaxed);
                }
                if s.load(Ordering::Relaxed) != 0 {
                    return Ok(());
                }
            }
        });
        Ok(PgPs {
            client,
            sub,
            publ,
            sweep,
            swept: i64::MIN,
            heard,
            told: 0,
            listener: Some((listener, stop)),
            _cluster: cluster,
        })
    }

    /// Delete what expired, once per logical second.
    fn tick(&mut self, now: i64) -> Result<()> {
        if self.swept == i64::MIN {
            self.swept = now;
        }
        if now - self.swept >= SWEEP_MS {
            self.client.execute(&self.sweep.0, &[&now])?;
            self.client.execute(&self.sweep.1, &[&now])?;
            self.swept = now;
        }
        Ok(())
    }

    fn cell(id: &silt::Value) -> Result<i64> {
        id.as_i64().context("the pubsub peer takes integer cells")
    }
}

fn tally(rows: &[postgres::Row], t: &mut Tally) -> Result<u64> {
    let mut matched = 0;
    for r in rows {
        let k: i32 = r.try_get(0)?;
        // The answer travels whole, as it does to the other systems' callers.
        let _id: i64 = r.try_get(1)?;
        let _descr: Option<&str> = r.try_get(2)?;
        if k == 0 {
            matched += 1;
        } else {
            t.joined += 1;
        }
    }
    t.matches += matched;
    Ok(matched)
}

impl PsStore for PgPs {
    fn subscribe(&mut self, s: &Subscription, self_join: bool, t: &mut Tally) -> Result<()> {
        self.tick(s.ts)?;
        let c = Self::cell(&s.id)?;
        let rows = self.client.query(
            &self.sub,
            &[&c, &s.ts, &s.tmin, &s.tmax, &s.sid, &s.uid, &self_join],
        )?;
        tally(&rows, t)?;
        Ok(())
    }

    fn publish(&mut self, p: &Publication, self_join: bool, t: &mut Tally) -> Result<()> {
        self.tick(p.tp)?;
        let c = Self::cell(&p.id)?;
        let since = p.tp - SELF_JOIN_MS;
        let rows = self.client.query(
            &self.publ,
            &[&c, &p.tp, &p.tmax, &p.pid, &p.desc, &self_join, &since],
        )?;
        self.told += tally(&rows, t)?;
        Ok(())
    }

    fn finish(&mut self, _t: &mut Tally) -> Result<()> {
        // Every NOTIFY of a committed PUBLISH reaches the listener.
        let start = Instant::now();
        while self.heard.load(Ordering::Relaxed) < self.told {
            if start.elapsed() > Duration::from_secs(60) {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        if let Some((h, stop)) = self.listener.take() {
            stop.store(1, Ordering::Relaxed);
            match h.join() {
                Ok(r) => r.context("the LISTEN connection")?,
                Err(_) => bail!("the LISTEN thread panicked"),
            }
        }
        let heard = self.heard.load(Ordering::Relaxed);
        if heard != self.told {
            bail!(
                "postgres: {} PUBLISH matches were NOTIFYed but the listener heard {heard}",
                self.told
            );
        }
        Ok(())
    }
}
