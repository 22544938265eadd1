"""TPC-H through Silt SQL, checked against DuckDB and timed beside DuckDB and
DataFusion (issue #23; seed 004 ch. 5).

Usage:
  tpch.py check --sf 0.01 [--silt BIN] [--queries 1,3,...]
      generate SF N, load it into Silt (`silt serve` + psycopg, COPY FROM
      STDIN into tables with the TPC-H primary keys) and DuckDB, run the 22
      queries on both and compare the answers; exit 1 on any difference.
  tpch.py bench --sf 1 [--runs 3] [--silt BIN] [--out bench/results/tpch.csv]
      the same check, then per query the median of RUNS timed runs in Silt,
      DuckDB over its own tables, DuckDB over the Parquet and the CSV files,
      DataFusion over the Parquet and the CSV files; load times. Appends to
      (or creates) the CSV; the PNG is drawn by plot_tpch.py.

Data: DuckDB's TPC-H generator (`dbgen`, the `duckdb-extension-tpch` package,
installed from its file: no network), written out as CSV (with a header) and
Parquet (snappy) by DuckDB. The 22 query texts are the extension's own
(`tpch_queries()`), read at run time; none is stored here.

Answers are compared as multisets of rows; when the query ends in ORDER BY
columns of its output, the sequence of those columns must match too (rows
tied on them may come in any order). Numbers match within 1e-6 relative, or
within half a unit of the last digit of a DECIMAL answer's scale (an average
of DECIMALs is a DECIMAL rounded to its scale in Silt, as in DataFusion and
PostgreSQL, a double in DuckDB); strings and dates must be equal.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import datetime as dt
import decimal
import glob
import math
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

TABLES = ["region", "nation", "part", "supplier", "partsupp", "customer", "orders", "lineitem"]

# The TPC-H schema (spec 1.4) with its primary keys, in the types a SQL
# database is expected to accept.
SCHEMA = {
    "region": """CREATE TABLE region (
        r_regionkey INTEGER NOT NULL, r_name CHAR(25) NOT NULL, r_comment VARCHAR(152),
        PRIMARY KEY (r_regionkey))""",
    "nation": """CREATE TABLE nation (
        n_nationkey INTEGER NOT NULL, n_name CHAR(25) NOT NULL, n_regionkey INTEGER NOT NULL,
        n_comment VARCHAR(152), PRIMARY KEY (n_nationkey))""",
    "part": """CREATE TABLE part (
        p_partkey INTEGER NOT NULL, p_name VARCHAR(55) NOT NULL, p_mfgr CHAR(25) NOT NULL,
        p_brand CHAR(10) NOT NULL, p_type VARCHAR(25) NOT NULL, p_size INTEGER NOT NULL,
        p_container CHAR(10) NOT NULL, p_retailprice DECIMAL(15,2) NOT NULL,
        p_comment VARCHAR(23) NOT NULL, PRIMARY KEY (p_partkey))""",
    "supplier": """CREATE TABLE supplier (
        s_suppkey INTEGER NOT NULL, s_name CHAR(25) NOT NULL, s_address VARCHAR(40) NOT NULL,
        s_nationkey INTEGER NOT NULL, s_phone CHAR(15) NOT NULL, s_acctbal DECIMAL(15,2) NOT NULL,
        s_comment VARCHAR(101) NOT NULL, PRIMARY KEY (s_suppkey))""",
    "partsupp": """CREATE TABLE partsupp (
        ps_partkey INTEGER NOT NULL, ps_suppkey INTEGER NOT NULL, ps_availqty INTEGER NOT NULL,
        ps_supplycost DECIMAL(15,2) NOT NULL, ps_comment VARCHAR(199) NOT NULL,
        PRIMARY KEY (ps_partkey, ps_suppkey))""",
    "customer": """CREATE TABLE customer (
        c_custkey INTEGER NOT NULL, c_name VARCHAR(25) NOT NULL, c_address VARCHAR(40) NOT NULL,
        c_nationkey INTEGER NOT NULL, c_phone CHAR(15) NOT NULL, c_acctbal DECIMAL(15,2) NOT NULL,
        c_mktsegment CHAR(10) NOT NULL, c_comment VARCHAR(117) NOT NULL,
        PRIMARY KEY (c_custkey))""",
    "orders": """CREATE TABLE orders (
        o_orderkey BIGINT NOT NULL, o_custkey INTEGER NOT NULL, o_orderstatus CHAR(1) NOT NULL,
        o_totalprice DECIMAL(15,2) NOT NULL, o_orderdate DATE NOT NULL,
        o_orderpriority CHAR(15) NOT NULL, o_clerk CHAR(15) NOT NULL,
        o_shippriority INTEGER NOT NULL, o_comment VARCHAR(79) NOT NULL,
        PRIMARY KEY (o_orderkey))""",
    "lineitem": """CREATE TABLE lineitem (
        l_orderkey BIGINT NOT NULL, l_partkey INTEGER NOT NULL, l_suppkey INTEGER NOT NULL,
        l_linenumber INTEGER NOT NULL, l_quantity DECIMAL(15,2) NOT NULL,
        l_extendedprice DECIMAL(15,2) NOT NULL, l_discount DECIMAL(15,2) NOT NULL,
        l_tax DECIMAL(15,2) NOT NULL, l_returnflag CHAR(1) NOT NULL, l_linestatus CHAR(1) NOT NULL,
        l_shipdate DATE NOT NULL, l_commitdate DATE NOT NULL, l_receiptdate DATE NOT NULL,
        l_shipinstruct CHAR(25) NOT NULL, l_shipmode CHAR(10) NOT NULL,
        l_comment VARCHAR(44) NOT NULL, PRIMARY KEY (l_orderkey, l_linenumber))""",
}


# No statement timeout; memory for SF 1-4's joins and sorts; column
# images and block cache big enough to keep the tables' hot columns (the
# peers hold theirs in memory or in the page cache); the log not fsynced
# during the load (DuckDB's tables are in memory).
SERVE_FLAGS = [
    "--timeout", "0", "--durability", "none",
    "--max-query-memory", "8GiB", "--max-server-memory", "12GiB",
    "--column-cache", "4GiB", "--cache-mb", "1024",
]  # fmt: skip

# --------------------------------------------------------------------------
# DuckDB: the generator, the query texts, the reference answers


def duckdb_tpch(threads: int | None = None):
    """An in-memory DuckDB with the tpch extension loaded from the
    `duckdb-extension-tpch` package's file (no download)."""
    import duckdb
    import duckdb_extension_tpch

    found = glob.glob(
        os.path.join(os.path.dirname(duckdb_extension_tpch.__file__), "extensions", "*", "tpch.duckdb_extension")
    )
    if not found:
        raise RuntimeError("duckdb-extension-tpch has no tpch.duckdb_extension file")
    con = duckdb.connect(":memory:")
    if threads:
        con.execute(f"SET threads = {int(threads)}")
    con.execute(f"INSTALL '{found[0]}'")
    con.execute("LOAD tpch")
    return con


def queries(con) -> dict[int, str]:
    """The 22 TPC-H query texts, as the tpch extension gives them."""
    return {int(n): q for n, q in con.execute("SELECT query_nr, query FROM tpch_queries()").fetchall()}


def generate(con, sf: float, out: Path, formats=("csv",)) -> dict[str, float]:
    """dbgen at `sf` into `con`'s tables, written out as `out/<table>.csv`
    (header, comma-separated) and/or `out/<table>.parquet`. Returns seconds
    per step."""
    out.mkdir(parents=True, exist_ok=True)
    times = {}
    t = time.perf_counter()
    con.execute(f"CALL dbgen(sf = {sf})")
    times["dbgen"] = time.perf_counter() - t
    for fmt in formats:
        t = time.perf_counter()
        for table in TABLES:
            path = out / f"{table}.{fmt}"
            if fmt == "csv":
                con.execute(f"COPY {table} TO '{path}' (FORMAT csv, HEADER true)")
            else:
                con.execute(f"COPY {table} TO '{path}' (FORMAT parquet, COMPRESSION snappy)")
        times[f"write_{fmt}"] = time.perf_counter() - t
    return times


# --------------------------------------------------------------------------
# Silt: a `silt serve` process and psycopg


def silt_bin(explicit: str | None = None) -> str:
    for cand in (
        explicit,
        os.environ.get("SILT_BIN"),
        ROOT / "target" / "release" / "silt",
        ROOT / "target" / "demo" / "silt",
        ROOT / "target" / "debug" / "silt",
    ):
        if cand and Path(cand).is_file():
            return str(cand)
    raise FileNotFoundError("no silt binary: build it (cargo build --release -p silt-cli) or set SILT_BIN")


@contextlib.contextmanager
def silt_server(binary: str, db_dir: Path, extra=()):
    """`silt serve` on a free loopback port; yields its psycopg DSN."""
    proc = subprocess.Popen(
        [binary, "serve", "--db", str(db_dir), "--pg", "127.0.0.1:0", "--http", "off", *extra],
        stderr=subprocess.PIPE,
        text=True,
    )
    port = None
    lines = []
    assert proc.stderr is not None
    for line in proc.stderr:
        lines.append(line)
        m = re.search(r"PostgreSQL\s+127\.0\.0\.1:(\d+)", line)
        if m:
            port = int(m.group(1))
            break
    if port is None:
        proc.kill()
        proc.wait()
        raise RuntimeError("silt serve did not start: " + "".join(lines))
    # The server's log goes on to SILT_SERVE_LOG when that names a file.
    log = open(os.environ["SILT_SERVE_LOG"], "a", buffering=1) if os.environ.get("SILT_SERVE_LOG") else None
    threading.Thread(target=lambda: [log and log.write(line) for line in proc.stderr], daemon=True).start()
    try:
        yield f"host=127.0.0.1 port={port} user=silt dbname=silt", proc
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def load_silt(conn, data: Path, tables=TABLES) -> dict[str, float]:
    """CREATE TABLE with the keys, then COPY FROM STDIN of each CSV file.
    Returns seconds per table."""
    times = {}
    for table in tables:
        conn.execute(SCHEMA[table])
        t = time.perf_counter()
        with conn.cursor().copy(f"COPY {table} FROM STDIN (FORMAT csv, HEADER true)") as cp:
            with open(data / f"{table}.csv", "rb") as f:
                while chunk := f.read(1 << 20):
                    cp.write(chunk)
        times[table] = time.perf_counter() - t
    return times


# --------------------------------------------------------------------------
# Comparing answers


def order_columns(sql: str, names: list[str]) -> list[int] | None:
    """Output columns of the query's final ORDER BY, or None when it has
    none or sorts on something not in the output."""
    body = sql.strip().rstrip(";")
    # The last ORDER BY at the end of the statement (not inside a subquery).
    m = list(re.finditer(r"\border\s+by\b", body, re.IGNORECASE))
    if not m:
        return None
    tail = body[m[-1].end() :]
    if ")" in tail:
        return None  # the last ORDER BY is inside a subquery
    tail = re.split(r"\blimit\b", tail, flags=re.IGNORECASE)[0]
    cols = []
    lower = [n.lower() for n in names]
    for item in tail.split(","):
        word = re.sub(r"\b(asc|desc|nulls\s+first|nulls\s+last)\b", "", item, flags=re.IGNORECASE).strip()
        word = word.split(".")[-1].lower()
        if word not in lower:
            return None
        cols.append(lower.index(word))
    return cols


def _scale(v) -> int | None:
    if isinstance(v, decimal.Decimal):
        exp = v.as_tuple().exponent
        return -exp if isinstance(exp, int) and exp < 0 else 0
    return None


def same_value(a, b) -> bool:
    """`a` from Silt, `b` from DuckDB."""
    if a is None or b is None:
        return a is None and b is None
    num = (int, float, decimal.Decimal)
    if isinstance(a, num) and isinstance(b, num) and not isinstance(a, bool) and not isinstance(b, bool):
        fa, fb = float(a), float(b)
        if math.isclose(fa, fb, rel_tol=1e-6, abs_tol=1e-9):
            return True
        s = _scale(a)
        return s is not None and abs(fa - fb) <= 0.5 * 10.0 ** (-s) + 1e-12
    if isinstance(a, dt.datetime) or isinstance(b, dt.datetime):
        return a == b
    if isinstance(a, str) and isinstance(b, str):
        return a == b
    return a == b and type(a) is type(b) or str(a) == str(b) and type(a) is type(b)


def same_row(a, b) -> bool:
    return len(a) == len(b) and all(same_value(x, y) for x, y in zip(a, b))


def _sort_key(row):
    out = []
    for v in row:
        if v is None:
            out.append((0, ""))
        elif isinstance(v, (int, float, decimal.Decimal)) and not isinstance(v, bool):
            out.append((1, round(float(v), 4)))
        else:
            out.append((2, str(v)))
    return out


def compare(sql: str, names: list[str], got: list, want: list) -> str | None:
    """None when `got` (Silt) answers as `want` (DuckDB); else why not."""
    if len(got) != len(want):
        return f"{len(got)} rows, DuckDB {len(want)}"
    if got and len(got[0]) != len(want[0]):
        return f"{len(got[0])} columns, DuckDB {len(want[0])}"
    # Multisets: sort both the same way, then pair; a pair that differs only
    # by float noise in a sort column may be paired wrongly by the sort, so
    # fall back to a greedy match among the unpaired.
    gs, ws = sorted(got, key=_sort_key), sorted(want, key=_sort_key)
    unmatched = [(i, g) for i, (g, w) in enumerate(zip(gs, ws)) if not same_row(g, w)]
    if unmatched:
        rest = [ws[i] for i, _ in unmatched]
        for _, g in unmatched:
            hit = next((k for k, w in enumerate(rest) if same_row(g, w)), None)
            if hit is None:
                w = next(iter(rest), None)
                return f"row {tuple(g)!r} not in DuckDB's answer (nearest {tuple(w) if w else None!r})"
            rest.pop(hit)
    cols = order_columns(sql, names)
    if cols:
        for i, (g, w) in enumerate(zip(got, want)):
            if not all(same_value(g[c], w[c]) for c in cols):
                return f"order differs at row {i}: {tuple(g)!r} where DuckDB has {tuple(w)!r}"
    return None


# --------------------------------------------------------------------------
# The check


def run_check(dsn: str, duck, qs: dict[int, str], only=None, timeout_s: float = 600) -> dict[int, dict]:
    """Run each query in Silt and DuckDB; {n: {status, detail, rows, ms}}."""
    import psycopg

    out = {}
    for n in sorted(qs):
        if only and n not in only:
            continue
        sql = qs[n]
        want = duck.execute(sql).fetchall()
        res = {"rows": len(want)}
        try:
            with psycopg.connect(dsn, autocommit=True) as conn:
                conn.execute(f"SET statement_timeout = '{int(timeout_s)}s'")
                t = time.perf_counter()
                cur = conn.execute(sql)
                got = cur.fetchall()
                res["ms"] = (time.perf_counter() - t) * 1000
                names = [d.name for d in cur.description]
            why = compare(sql, names, got, want)
            res["status"], res["detail"] = ("pass", "") if why is None else ("wrong", why)
        except Exception as e:  # noqa: BLE001 - reported per query
            res["status"], res["detail"] = "error", f"{type(e).__name__}: {str(e).strip().splitlines()[0][:300]}"
        out[n] = res
        print(f"Q{n:02d} {res['status']:5s} {res.get('ms', 0):9.1f} ms  {res['detail']}", flush=True)
    return out


# --------------------------------------------------------------------------
# Timing


def median_ms(f, runs: int) -> tuple[float, float, float]:
    ts = []
    for _ in range(runs):
        t = time.perf_counter()
        f()
        ts.append((time.perf_counter() - t) * 1000)
    return statistics.median(ts), min(ts), max(ts)


def cpu_busy_others(seconds: float = 1.0) -> float:
    """Percent of all CPU time spent by processes other than this one and
    its children over `seconds` (from /proc/stat and /proc/self)."""

    def total():
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:]]
        return sum(v), v[3] + v[4]

    t0, i0 = total()
    time.sleep(seconds)
    t1, i1 = total()
    return 100.0 * (1 - (i1 - i0) / max(t1 - t0, 1))


def peers(data: Path, threads: int):
    """name -> (setup seconds, run(sql)) of the peers over files."""
    import datafusion
    import duckdb

    out = {}
    for fmt in ("parquet", "csv"):
        con = duckdb.connect(":memory:")
        con.execute(f"SET threads = {threads}")
        t = time.perf_counter()
        for table in TABLES:
            reader = "read_parquet" if fmt == "parquet" else "read_csv"
            con.execute(f"CREATE VIEW {table} AS SELECT * FROM {reader}('{data / (table + '.' + fmt)}')")
        out[f"duckdb-{fmt}"] = (time.perf_counter() - t, lambda q, c=con: c.execute(q).fetchall())
        cfg = datafusion.SessionConfig().with_target_partitions(threads)
        ctx = datafusion.SessionContext(cfg)
        t = time.perf_counter()
        for table in TABLES:
            path = str(data / f"{table}.{fmt}")
            if fmt == "parquet":
                ctx.register_parquet(table, path)
            else:
                ctx.register_csv(table, path, has_header=True)
        out[f"datafusion-{fmt}"] = (time.perf_counter() - t, lambda q, c=ctx: datafusion_rows(c.sql(q).collect()))
    return out


def datafusion_rows(batches) -> list[tuple]:
    """DataFusion's record batches as rows (converting them is part of the
    time, as fetching rows is for the others)."""
    out = []
    for b in batches:
        cols = [c.to_pylist() for c in b.columns]
        out.extend(zip(*cols))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("mode", choices=["check", "bench"])
    ap.add_argument("--sf", type=float, default=0.01)
    ap.add_argument("--silt", help="the silt binary (default: $SILT_BIN, target/release/silt, ...)")
    ap.add_argument("--queries", help="comma-separated query numbers (default: all 22)")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "tpch.csv"))
    ap.add_argument("--tmp", default=None, help="where data and the database go (default: a temp dir)")
    ap.add_argument("--keep", action="store_true", help="keep the generated data and database")
    ap.add_argument("--timeout", type=float, default=900, help="seconds a Silt query may run")
    args = ap.parse_args()
    only = {int(x) for x in args.queries.split(",")} if args.queries else None
    binary = silt_bin(args.silt)
    work = Path(tempfile.mkdtemp(prefix=f"tpch-sf{args.sf}-", dir=args.tmp))
    try:
        return run(args, binary, work, only)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


def run(args, binary: str, work: Path, only) -> int:
    import duckdb
    import psycopg

    busy_before = cpu_busy_others()
    duck = duckdb_tpch(args.threads)
    qs = queries(duck)
    formats = ("csv", "parquet") if args.mode == "bench" else ("csv",)
    gen = generate(duck, args.sf, work / "data", formats)
    print(f"generated SF {args.sf} in {work / 'data'}: {gen}", flush=True)
    with silt_server(binary, work / "silt", SERVE_FLAGS) as (dsn, proc):
        with psycopg.connect(dsn, autocommit=True) as conn:
            t = time.perf_counter()
            load = load_silt(conn, work / "data")
            load_total = time.perf_counter() - t
        print(f"loaded Silt in {load_total:.1f} s: {', '.join(f'{k} {v:.2f}' for k, v in load.items())}", flush=True)
        results = run_check(dsn, duck, qs, only, args.timeout)
        bad = [n for n, r in results.items() if r["status"] != "pass"]
        print(f"{len(results) - len(bad)} passed, {len(bad)} failed" + (f": {bad}" if bad else ""), flush=True)
        if args.mode == "check":
            return 1 if bad else 0
        rows = bench(args, dsn, proc, duck, qs, only, work, gen, load, load_total, results)
    write_csv(args, rows, busy_before, binary)
    return 1 if bad else 0


def proc_cpu_s(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        parts = f.read().rsplit(")", 1)[1].split()
    return (int(parts[11]) + int(parts[12])) / os.sysconf("SC_CLK_TCK")


def bench(args, dsn, proc, duck, qs, only, work, gen, load, load_total, results):
    import psycopg

    sf = args.sf
    rows = []  # (system, metric, unit, kind, median, min, max, runs)
    rows.append(("silt", "load", "s", "measure", load_total, load_total, load_total, 1))
    for t, s in load.items():
        rows.append(("silt", f"load-{t}", "s", "stat", s, s, s, 1))
    rows.append(("duckdb", "load", "s", "measure", gen["dbgen"], gen["dbgen"], gen["dbgen"], 1))
    # DuckDB loading the same CSV files into tables with the keys.
    c2 = duckdb_tpch(args.threads)
    t = time.perf_counter()
    for table in TABLES:
        c2.execute(SCHEMA[table])
        c2.execute(f"COPY {table} FROM '{work / 'data' / (table + '.csv')}' (FORMAT csv, HEADER true)")
    s = time.perf_counter() - t
    rows.append(("duckdb", "load-csv-keys", "s", "stat", s, s, s, 1))
    c2.close()
    for fmt in ("csv", "parquet"):
        s = gen[f"write_{fmt}"]
        rows.append(("duckdb", f"write-{fmt}", "s", "stat", s, s, s, 1))
    systems = {"silt": None, "duckdb": (0.0, lambda q: duck.execute(q).fetchall())}
    systems.update(peers(work / "data", args.threads))
    conn = psycopg.connect(dsn, autocommit=True)
    systems["silt"] = (0.0, lambda q: conn.execute(q).fetchall())
    names = list(systems)
    times = {}
    wrong = []
    answers = {n: duck.execute(q).fetchall() for n, q in qs.items() if not only or n in only}
    for n in sorted(qs):
        if only and n not in only:
            continue
        for k, name in enumerate(names[n % len(names) :] + names[: n % len(names)]):
            run = systems[name][1]
            try:
                warm = run(qs[n])  # warm-up (and the plan cache)
                med, lo, hi = median_ms(lambda: run(qs[n]), args.runs)
            except Exception as e:  # noqa: BLE001
                print(f"Q{n:02d} {name}: {type(e).__name__}: {e}", flush=True)
                continue
            rows.append((name, f"q{n:02d}", "ms", "measure", med, lo, hi, args.runs))
            times[(name, n)] = med
            # The peers' answers are checked too (column names unknown
            # here: the ORDER BY check is the check run's, for Silt).
            if name != "silt" and name != "duckdb":
                why = compare("", [], list(warm), answers[n])
                if why is not None:
                    wrong.append(f"Q{n:02d} {name}: {why}")
                    print(f"Q{n:02d} {name}: answer differs from DuckDB's own: {why}", flush=True)
            print(f"Q{n:02d} {name:18s} {med:10.1f} ms", flush=True)
    conn.close()
    # Silt over each peer, per query and as the geometric mean of the
    # queries both answered.
    for peer in names[1:]:
        ratios = []
        for n in sorted(qs):
            if ("silt", n) in times and (peer, n) in times:
                r = times[("silt", n)] / times[(peer, n)]
                ratios.append(r)
                rows.append(("silt", f"q{n:02d}/{peer}", "x", "ratio", r, r, r, args.runs))
        if ratios:
            g = math.exp(sum(math.log(r) for r in ratios) / len(ratios))
            rows.append(("silt", f"geomean/{peer}", "x", "ratio", g, min(ratios), max(ratios), len(ratios)))
    for w in wrong:
        print("peer answer differs:", w, flush=True)
    rows.append(("silt", "server-cpu", "s", "stat", proc_cpu_s(proc.pid), 0, 0, 1))
    for n, r in results.items():
        ok = 1.0 if r["status"] == "pass" else 0.0
        rows.append(("silt", f"q{n:02d}-correct", "bool", "stat", ok, ok, ok, 1))
    return rows


def write_csv(args, rows, busy_before, binary):
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    busy_after = cpu_busy_others()
    import datafusion
    import duckdb

    scale = f"sf{args.sf:g}"
    header = [
        f"# machine: {os.cpu_count()} cores, {os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES') >> 30} GiB,"
        f" {platform_cpu()}",
        f"# run {scale}: {time.strftime('%Y-%m-%d %H:%M', time.gmtime())} UTC, runs {args.runs},"
        f" threads {args.threads}, cpu_busy_before {busy_before:.0f}%, cpu_busy_after {busy_after:.0f}%",
        f"# systems: silt ({Path(binary).parent.name} build, `silt serve {' '.join(SERVE_FLAGS)}` over psycopg, tables with the TPC-H keys loaded by COPY);"
        f" duckdb {duckdb.__version__} (its own tables from dbgen, and views over the files);"
        f" datafusion {datafusion.__version__} (Python; CSV with inferred types, Parquet)",
    ]
    existing = []
    if out.exists():
        with open(out) as f:
            lines = f.read().splitlines()
        keep_header = [ln for ln in lines if ln.startswith("#")]
        existing = [ln for ln in lines if ln and not ln.startswith("#") and not ln.startswith("workload,")]
        existing = [ln for ln in existing if ln.split(",")[1] != scale]
        # One run line per scale: this run's replaces the last of its scale.
        mine = {h.split(":", 1)[0] for h in header}
        header = header[:1] + [h for h in keep_header if h.split(":", 1)[0] not in mine] + header[1:]
    with open(out, "w", newline="") as f:
        for h in header:
            f.write(h + "\n")
        w = csv.writer(f)
        w.writerow(["workload", "scale", "system", "metric", "unit", "kind", "median", "min", "max", "runs", "target"])
        for ln in existing:
            f.write(ln + "\n")
        for system, metric, unit, kind, med, lo, hi, runs in rows:
            w.writerow(["tpch", scale, system, metric, unit, kind, f"{med:.3f}", f"{lo:.3f}", f"{hi:.3f}", runs, ""])
    print(f"wrote {out}")


def platform_cpu() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for ln in f:
                if ln.startswith("model name"):
                    return ln.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown CPU"


if __name__ == "__main__":
    sys.exit(main())
