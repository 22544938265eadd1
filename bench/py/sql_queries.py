"""DuckDB, the in-process analytics peer of the `sql-ordinary` workload.

Usage: sql_queries.py SPEC.json

SPEC holds the paths of the two tables' COPY text files (tab-separated, no
header), their CREATE TABLE statements, and the queries with their repeat
counts. The tables are created with their primary keys and loaded with
COPY; every query runs once to warm up, then `reps` times. Prints one JSON
object: the load time, and per query its times (ms, sorted) and its rows
as text (for the harness to check against the other systems).
"""

import json
import sys
import time

import duckdb


def main() -> None:
    with open(sys.argv[1]) as f:
        spec = json.load(f)
    con = duckdb.connect(":memory:")
    threads = spec.get("threads")
    if threads:
        con.execute(f"SET threads = {int(threads)}")
    t = time.perf_counter()
    for table in spec["tables"]:
        con.execute(table["ddl"])
        con.execute(
            f"COPY {table['name']} FROM '{table['path']}' (DELIMITER '\t', HEADER false, NULL '\\N')"
        )
    load_s = time.perf_counter() - t
    out = {"version": duckdb.__version__, "load_s": load_s, "queries": {}}
    for q in spec["queries"]:
        sql = q["sql"]
        rows = con.execute(sql).fetchall()
        times = []
        for _ in range(q["reps"]):
            t = time.perf_counter()
            con.execute(sql).fetchall()
            times.append((time.perf_counter() - t) * 1000.0)
        times.sort()
        out["queries"][q["name"]] = {
            "ms": times,
            "rows": [[None if v is None else str(v) for v in r] for r in rows],
        }
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
