"""Response-time variance after incremental ingest vs after a dump and
reload (seed 004 ch. 3; issue #23), in Silt and in PostgreSQL.

Usage:
  variance.py [--sf 0.5] [--runs 10] [--silt BIN] [--out bench/results/variance.csv]

The paper found MySQL's response times varying widely between repeated runs
of the same query, traced it to on-disk fragmentation of a database that had
grown by inserts, and removed the variance by repopulating the database from
a `mysqldump` snapshot. Here the same experiment on Silt (an LSM: data grown
incrementally sits in many overlapping components until merges catch up) and
on PostgreSQL 15 (a heap: updates leave dead tuples and scatter rows; the
nearest peer this machine has to the paper's MySQL):

1. incremental: TPC-H `orders` and `lineitem` at SF inserted in shuffled
   batches of 20 K rows, each its own transaction, then churn: 20% of the
   line items updated (a longer comment) and 10% deleted and inserted again;
2. reloaded: the same tables dumped to CSV (COPY TO), dropped, and loaded
   again in key order (Silt: COPY FROM, then COMPACT; PostgreSQL: COPY FROM,
   then VACUUM ANALYZE, as a pg_dump restore would leave it).

In each state a complex query (orders joined with lineitem over one quarter
of order dates, grouped) and a simple one (a range of 1,000 order keys of
lineitem) run RUNS times each from a cold start: the server restarted and the
OS page cache dropped before every run (needs root; otherwise the page cache
stays warm and the CSV says so). Reported per system, state and query: mean,
median, standard deviation, coefficient of variation, min and max.
"""

from __future__ import annotations

import argparse
import csv
import datetime as dt
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import tpch  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
TABLES = ["orders", "lineitem"]
KEYS = {"orders": "o_orderkey", "lineitem": "l_orderkey, l_linenumber"}
BATCH = 20_000

COMPLEX = """SELECT o_orderpriority, count(*), sum(l_extendedprice)
FROM orders JOIN lineitem ON l_orderkey = o_orderkey
WHERE o_orderdate >= DATE '{d}' AND o_orderdate < DATE '{d}' + INTERVAL '3' MONTH
GROUP BY o_orderpriority ORDER BY o_orderpriority"""
SIMPLE = "SELECT count(*), sum(l_extendedprice) FROM lineitem WHERE l_orderkey BETWEEN {a} AND {b}"


def drop_caches() -> bool:
    try:
        os.sync()
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
        return True
    except OSError:
        return False


def read_rows(path: Path) -> tuple[str, list[str]]:
    with open(path) as f:
        header = f.readline()
        return header, f.readlines()


# --------------------------------------------------------------------------
# The two systems behind one small interface: start(), stop(), sql(), copy_in()


class Server:
    """What the two systems share: the TPC-H tables, the size on disk."""

    conn = None
    dir: Path

    def create(self, table):
        self.conn.execute(tpch.SCHEMA[table])

    def size_mb(self) -> float:
        return sum(p.stat().st_size for p in self.dir.rglob("*") if p.is_file()) / 1e6


class Silt(Server):
    name = "silt"

    def __init__(self, binary: str, work: Path):
        self.binary, self.dir, self.cm = binary, work / "silt-db", None
        self.files = work

    def start(self):
        import psycopg

        flags = ["--timeout", "0", "--column-cache", "0", "--cache-mb", "16", "--server-files", str(self.files)]
        self.cm = tpch.silt_server(self.binary, self.dir, flags)
        dsn, self.proc = self.cm.__enter__()
        self.conn = psycopg.connect(dsn, autocommit=True)

    def stop(self):
        self.conn.close()
        self.cm.__exit__(None, None, None)

    def reorganize(self, table):
        self.conn.execute(f"COMPACT {table}")


class Postgres(Server):
    name = "postgresql"

    def __init__(self, work: Path):
        bins = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"))
        if not bins:
            raise FileNotFoundError("PostgreSQL's server is not installed (bench/setup.sh installs it)")
        self.bin = bins[-1].parent
        self.dir = work / "pg-data"
        self.sock = work / "pg-sock"
        self.port = tpch_free_port()
        self.user = "postgres" if os.geteuid() == 0 else None
        self.dir.mkdir()
        self.sock.mkdir()
        if self.user:
            shutil.chown(work, self.user)
            for p in (self.dir, self.sock):
                shutil.chown(p, self.user)
        self._as(["initdb", "-D", str(self.dir), "-A", "trust", "-U", "postgres"])
        with open(self.dir / "postgresql.conf", "a") as f:
            # The paper turned MySQL's buffer pool off; PostgreSQL's smallest
            # practical one, so the OS cache (dropped) is what a run meets.
            f.write(f"port = {self.port}\nshared_buffers = 16MB\nlisten_addresses = ''\n")
            f.write(f"unix_socket_directories = '{self.sock}'\nfsync = off\nsynchronous_commit = off\n")
            f.write("max_parallel_workers_per_gather = 2\nautovacuum = on\n")

    def _as(self, cmd):
        exe = str(self.bin / cmd[0])
        full = ["runuser", "-u", self.user, "--", exe, *cmd[1:]] if self.user else [exe, *cmd[1:]]
        subprocess.run(full, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def start(self):
        import psycopg

        self._as(["pg_ctl", "-D", str(self.dir), "-w", "-l", str(self.dir / "log"), "start"])
        self.conn = psycopg.connect(host=str(self.sock), port=self.port, user="postgres", dbname="postgres", autocommit=True)

    def stop(self):
        self.conn.close()
        self._as(["pg_ctl", "-D", str(self.dir), "-w", "-m", "fast", "stop"])

    def reorganize(self, table):
        self.conn.execute(f"VACUUM ANALYZE {table}")


def tpch_free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def copy_lines(conn, table: str, header: str, lines: list[str]) -> None:
    with conn.cursor().copy(f"COPY {table} FROM STDIN (FORMAT csv, HEADER true)") as cp:
        cp.write(header)
        cp.write("".join(lines))


def build_incremental(db, data: Path, rng: random.Random) -> float:
    t = time.perf_counter()
    for table in TABLES:
        db.create(table)
    batches = []
    for table in TABLES:
        header, lines = read_rows(data / f"{table}.csv")
        rng.shuffle(lines)
        batches += [(table, header, lines[i : i + BATCH]) for i in range(0, len(lines), BATCH)]
    rng.shuffle(batches)
    for table, header, lines in batches:
        copy_lines(db.conn, table, header, lines)
    # Churn: 20% of the line items updated, 10% deleted and inserted again.
    db.conn.execute("UPDATE lineitem SET l_comment = 'revised: ' || left(l_comment, 30) WHERE l_orderkey % 5 = 1")
    header, lines = read_rows(data / "lineitem.csv")
    again = [ln for ln in lines if int(ln.split(",", 1)[0]) % 10 == 3]
    db.conn.execute("DELETE FROM lineitem WHERE l_orderkey % 10 = 3")
    rng.shuffle(again)
    for i in range(0, len(again), BATCH):
        copy_lines(db.conn, "lineitem", header, again[i : i + BATCH])
    return time.perf_counter() - t


def dump_reload(db, work: Path) -> float:
    t = time.perf_counter()
    for table in TABLES:
        path = work / f"dump-{table}.csv"
        with open(path, "wb") as f, db.conn.cursor().copy(f"COPY (SELECT * FROM {table} ORDER BY {KEYS[table]}) TO STDOUT (FORMAT csv, HEADER true)") as cp:  # fmt: skip
            for chunk in cp:
                f.write(chunk)
        db.conn.execute(f"DROP TABLE {table}")
        db.create(table)
        with open(path, "rb") as f, db.conn.cursor().copy(f"COPY {table} FROM STDIN (FORMAT csv, HEADER true)") as cp:
            while chunk := f.read(1 << 20):
                cp.write(chunk)
        db.reorganize(table)
        path.unlink()
    return time.perf_counter() - t


def measure(db, state: str, runs: int, max_key: int, rows: list, sf: float, cold: bool):
    rng = random.Random(11)
    plans = {
        "complex": [COMPLEX.format(d=dt.date(1993 + (i % 5), 1 + 3 * (i % 4), 1)) for i in range(runs)],
        "simple": [SIMPLE.format(a=(a := rng.randrange(1, max_key - 4000)), b=a + 3999) for _ in range(runs)],
    }
    db.stop()
    for query, sqls in plans.items():
        ts = []
        for sql in sqls:
            if cold:
                drop_caches()
            db.start()
            t = time.perf_counter()
            db.conn.execute(sql).fetchall()
            ts.append(time.perf_counter() - t)
            db.stop()
        mean = statistics.mean(ts)
        sd = statistics.stdev(ts) if len(ts) > 1 else 0.0
        row = {
            "sf": sf, "system": db.name, "state": state, "query": query, "runs": runs,
            "mean_s": round(mean, 4), "median_s": round(statistics.median(ts), 4), "stdev_s": round(sd, 4),
            "cv": round(sd / mean, 3) if mean else 0, "min_s": round(min(ts), 4), "max_s": round(max(ts), 4),
            "size_mb": round(db.size_mb(), 1), "cold": cold, "times": " ".join(f"{x:.3f}" for x in ts),
        }  # fmt: skip
        rows.append(row)
        print(f"{db.name:<10} {state:<11} {query:<7} mean {mean:.3f} s  sd {sd:.3f}  cv {row['cv']:.2f}  "
              f"[{row['min_s']:.3f} .. {row['max_s']:.3f}]  {row['size_mb']} MB", flush=True)  # fmt: skip
    db.start()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sf", type=float, default=0.5)
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--silt")
    ap.add_argument("--systems", default="silt,postgresql")
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "variance.csv"))
    args = ap.parse_args()
    cold = drop_caches()
    busy = tpch.cpu_busy_others(2.0)
    print(f"machine busy before the run: {busy:.0f}% of CPU in other processes; page cache dropped per run: {cold}")
    work = Path(tempfile.mkdtemp(prefix="silt-variance-"))
    rows: list[dict] = []
    try:
        con = tpch.duckdb_tpch()
        con.execute(f"CALL dbgen(sf = {args.sf})")
        for table in TABLES:
            con.execute(f"COPY {table} TO '{work / (table + '.csv')}' (FORMAT csv, HEADER true)")
        max_key = con.execute("SELECT max(o_orderkey) FROM orders").fetchone()[0]
        con.close()
        os.chmod(work, 0o755)
        for name in args.systems.split(","):
            db = Silt(tpch.silt_bin(args.silt), work) if name == "silt" else Postgres(work)
            db.start()
            s = build_incremental(db, work, random.Random(5))
            print(f"{db.name}: incremental build with churn {s:.1f} s", flush=True)
            measure(db, "incremental", args.runs, max_key, rows, args.sf, cold)
            s = dump_reload(db, work)
            print(f"{db.name}: dump and reload {s:.1f} s", flush=True)
            measure(db, "reloaded", args.runs, max_key, rows, args.sf, cold)
            db.stop()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    out = Path(args.out)
    with open(out, "w", newline="") as f:
        cols = list(rows[0].keys()) + ["busy_pct", "when"]
        w = csv.DictWriter(f, fieldnames=cols)
        w.writeheader()
        stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M")
        for r in rows:
            w.writerow(dict(r, busy_pct=round(busy), when=stamp))
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
