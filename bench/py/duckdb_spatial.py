#!/usr/bin/env python3
"""DuckDB with its spatial extension and an RTREE index: the SQL peer of
silt-bench's `spatial-rtree` workload.

Usage: duckdb_spatial.py POINTS.bin QUERIES.json OUT.json DBFILE

POINTS.bin and QUERIES.json are the files the harness writes for the Python
rtree peer (see rtree_queries.py). The points go into an on-disk DuckDB
database (DBFILE) as `t (id BIGINT, geom GEOMETRY)` (ST_Point(lon, lat)),
loaded from an Arrow table, then `CREATE INDEX ... USING RTREE (geom)`; the
database is closed and opened again, so the queries start from the file.
The spatial extension is installed from the `duckdb-extension-spatial`
package's file (no download).

Rectangles: `SELECT id FROM t WHERE ST_Intersects(geom, ST_MakeEnvelope(...))`
(DuckDB plans an RTREE_INDEX_SCAN; checked with EXPLAIN); a rectangle across
the antimeridian is two queries. kNN: `ORDER BY` the haversine distance
`LIMIT k` (DuckDB's ST_Distance_Sphere takes latitude first; its RTREE index
answers no nearest-neighbour query, so this is a scan); the k ids are ranked
again by the harness's haversine for the comparison of distances. Each query
is timed alone around `execute(...).fetchall()` (the Python client's
overhead is part of it, as for any Python user).

Writes OUT.json in rtree_queries.py's shape.
"""
import glob
import json
import os
import resource
import struct
import sys
import time

import duckdb
import pyarrow as pa
from spatial_common import haversine_m, split, summary


def connect(path):
    import duckdb_extension_spatial

    found = glob.glob(
        os.path.join(
            os.path.dirname(duckdb_extension_spatial.__file__),
            "extensions",
            "*",
            "spatial.duckdb_extension",
        )
    )
    if not found:
        raise RuntimeError("duckdb-extension-spatial has no spatial.duckdb_extension file")
    con = duckdb.connect(path)
    con.execute(f"INSTALL '{found[0]}'")
    con.execute("LOAD spatial")
    return con


def main(argv):
    if len(argv) != 4:
        print(__doc__.splitlines()[2], file=sys.stderr)
        return 2
    points_path, queries_path, out_path, db_path = argv
    with open(points_path, "rb") as f:
        raw = f.read()
    if len(raw) % 24:
        print(f"{points_path}: size {len(raw)} is not a multiple of 24", file=sys.stderr)
        return 1
    ids, lons, lats = [], [], []
    for i, x, y in struct.iter_unpack("<qdd", raw):
        ids.append(i)
        lons.append(x)
        lats.append(y)
    del raw
    pos = {i: n for n, i in enumerate(ids)}
    if os.path.exists(db_path):
        os.remove(db_path)

    t0 = time.perf_counter()
    con = connect(db_path)
    pts = pa.table({"id": ids, "lon": lons, "lat": lats})
    con.register("pts", pts)
    con.execute("CREATE TABLE t AS SELECT id, ST_Point(lon, lat) AS geom FROM pts")
    con.unregister("pts")
    load_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    con.execute("CREATE INDEX t_geom ON t USING RTREE (geom)")
    index_s = time.perf_counter() - t0
    con.execute("CHECKPOINT")
    con.close()
    con = connect(db_path)

    with open(queries_path, encoding="utf-8") as f:
        q = json.load(f)
    k, check = int(q["k"]), int(q["check"])
    rect_sql = "SELECT id FROM t WHERE ST_Intersects(geom, ST_MakeEnvelope(?, ?, ?, ?))"
    plan = con.execute("EXPLAIN " + rect_sql.replace("?", "0")).fetchall()
    uses_index = any("RTREE_INDEX_SCAN" in str(row) for row in plan)

    sels = []
    for sel in q["sels"]:
        lat_ns, counts, sums, total = [], [], [], 0
        for n, r in enumerate(sel["rects"]):
            parts = split(r)
            t = time.perf_counter_ns()
            got = []
            for p in parts:
                got.extend(row[0] for row in con.execute(rect_sql, list(p)).fetchall())
            lat_ns.append(time.perf_counter_ns() - t)
            total += len(got)
            if n < check:
                counts.append(len(got))
                sums.append(sum(got))
        sels.append(dict(summary(lat_ns), label=sel["label"], queries=len(lat_ns),
                         mean_count=total / max(len(lat_ns), 1), counts=counts, sums=sums))

    knn_sql = (
        "SELECT id FROM t ORDER BY "
        "ST_Distance_Sphere(ST_Point(ST_Y(geom), ST_X(geom)), ST_Point(?, ?)) LIMIT ?"
    )
    lat_ns, dists = [], []
    for n, (x, y) in enumerate(q["knn"]):
        t = time.perf_counter_ns()
        got = [row[0] for row in con.execute(knn_sql, [y, x, k]).fetchall()]
        lat_ns.append(time.perf_counter_ns() - t)
        if n < check:
            dists.append(sorted(haversine_m(x, y, lons[pos[i]], lats[pos[i]]) for i in got))
    knn = dict(summary(lat_ns), queries=len(lat_ns), mean_candidates=float(len(ids)), dists=dists)
    con.close()
    out = {
        "duckdb_version": duckdb.__version__,
        "python_version": sys.version.split()[0],
        "points": len(ids),
        "load_s": load_s,
        "index_s": index_s,
        "db_bytes": os.path.getsize(db_path),
        "uses_index": uses_index,
        "maxrss_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
        "sels": sels,
        "knn": knn,
    }
    os.remove(db_path)
    with open(out_path, "w", encoding="utf-8") as f:
        json.dump(out, f)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
