#!/usr/bin/env python3
"""The Python `rtree` (libspatialindex) peer of silt-bench's `spatial-rtree` workload.

Usage: rtree_queries.py POINTS.bin QUERIES.json OUT.json

POINTS.bin: the records' locations, little-endian (id: i64, lon: f64, lat: f64)
one after the other, written by the harness. They are bulk-loaded into an
in-memory `rtree.index.Index` through the stream interface (libspatialindex's
bulk loader). QUERIES.json: {"k": int, "check": int, "sels": [{"label": str,
"rects": [[min_lon, min_lat, max_lon, max_lat], ...]}], "knn": [[lon, lat], ...]};
a rectangle with min_lon > max_lon crosses the antimeridian and is searched as
two. Each query is timed alone (time.perf_counter_ns around the index calls and
the materialisation of the ids; the Python interpreter's overhead is part of
it, as it is for any user of this library).

kNN: `Index.nearest` ranks by Euclidean distance in degrees, not by the
great-circle distance Silt uses. So its k nearest are only candidates: the k-th
of them by great-circle distance, D, bounds the true k-th distance, and one
`intersection` with the box bounding the circle of radius D (two across the
antimeridian) returns every record that can be among the true k nearest; they
are ranked by great-circle distance (the same formula and Earth radius as Silt).

Writes OUT.json: load time, peak RSS, and per selectivity / for kNN the mean,
p50 and p99 latency in microseconds, the mean result count, and the answers to
the first `check` queries (count and id sum; kNN distances) for the harness to
compare with the other systems.
"""
import json
import math
import resource
import struct
import sys
import time

from rtree import index
from spatial_common import circle_bbox, haversine_m, split, summary


def main(argv):
    if len(argv) != 3:
        print(__doc__.splitlines()[2], file=sys.stderr)
        return 2
    points_path, queries_path, out_path = argv
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

    def stream():
        for i, x, y in zip(ids, lons, lats):
            yield (i, (x, y, x, y), None)

    props = index.Property()
    props.dimension = 2
    t0 = time.perf_counter()
    idx = index.Index(stream(), properties=props)
    load_s = time.perf_counter() - t0

    with open(queries_path, encoding="utf-8") as f:
        q = json.load(f)
    k, check = int(q["k"]), int(q["check"])

    sels = []
    for sel in q["sels"]:
        lat_ns, counts, sums, total = [], [], [], 0
        for n, r in enumerate(sel["rects"]):
            parts = split(r)
            t = time.perf_counter_ns()
            got = []
            for p in parts:
                got.extend(idx.intersection(p))
            lat_ns.append(time.perf_counter_ns() - t)
            total += len(got)
            if n < check:
                counts.append(len(got))
                sums.append(sum(got))
        sels.append(dict(summary(lat_ns), label=sel["label"], queries=len(lat_ns),
                         mean_count=total / max(len(lat_ns), 1), counts=counts, sums=sums))

    lat_ns, dists, cand_total = [], [], 0
    for n, (x, y) in enumerate(q["knn"]):
        t = time.perf_counter_ns()
        first = sorted(haversine_m(x, y, lons[pos[i]], lats[pos[i]])
                       for i in idx.nearest((x, y, x, y), k))
        dk = first[k - 1] if len(first) >= k else float("inf")
        if math.isinf(dk):
            boxes = [(-180.0, -90.0, 180.0, 90.0)]
        else:
            boxes = circle_bbox(x, y, dk)
        cands = set()
        for b in boxes:
            cands.update(idx.intersection(b))
        ranked = sorted((haversine_m(x, y, lons[pos[i]], lats[pos[i]]), i) for i in cands)[:k]
        lat_ns.append(time.perf_counter_ns() - t)
        cand_total += len(cands)
        if n < check:
            dists.append([d for d, _ in ranked])
    knn = dict(summary(lat_ns), queries=len(lat_ns), mean_candidates=cand_total / max(len(lat_ns), 1),
               dists=dists)

    try:
        sidx = index.core.rt.SIDX_Version().decode()
    except Exception:  # noqa: BLE001 - only a version string
        sidx = "?"
    import rtree

    out = {
        "rtree_version": getattr(rtree, "__version__", "?"),
        "libspatialindex_version": sidx,
        "python_version": sys.version.split()[0],
        "points": len(ids),
        "load_s": load_s,
        "maxrss_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
        "sels": sels,
        "knn": knn,
    }
    with open(out_path, "w", encoding="utf-8") as f:
        json.dump(out, f)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
