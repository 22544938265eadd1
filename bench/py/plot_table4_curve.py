#!/usr/bin/env python3
"""The time curves of asterix-table4 (seed 003 Figs. 5 and 6).

Usage: plot_table4_curve.py results/asterix-table4/curve.csv OUT.png

Panels: (a) raw inserts, (b) inserts with a concurrent query stream: elapsed
time vs records ingested; (c) mean query time and (d) mean cache misses per
query during the ingest, per interval; (e) query time and (f) misses with 1%
deletes (the two Silt variants). The last run of each (experiment, system).
"""
import csv
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

RAW = "raw inserts"
WQ = "inserts with concurrent queries"
DEL = "1% deletes with concurrent queries"


def main(path, out):
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    last = {}
    for r in rows:
        last[(r["experiment"], r["system"])] = max(last.get((r["experiment"], r["system"]), 0), int(r["run"]))
    series = {}
    for r in rows:
        key = (r["experiment"], r["system"])
        if int(r["run"]) != last[key]:
            continue
        series.setdefault(key, []).append(r)
    fig, axes = plt.subplots(2, 3, figsize=(17, 9))
    ax = axes.flat

    def curve(a, exp, title):
        for (e, s), rs in series.items():
            if e != exp:
                continue
            a.plot([float(r["elapsed_s"]) for r in rs], [int(r["records"]) / 1e6 for r in rs],
                   marker=".", label=s)
        a.set_xlabel("elapsed s", fontsize=8)
        a.set_ylabel("records ingested (M)", fontsize=8)
        a.set_title(title, fontsize=9)
        a.grid(alpha=0.3)
        a.legend(fontsize=7)

    def qcurve(a, exp, col, ylabel, title, log):
        for (e, s), rs in series.items():
            if e != exp:
                continue
            pts = [(int(r["records"]) / 1e6, float(r[col])) for r in rs if r[col]]
            if pts:
                a.plot([p[0] for p in pts], [p[1] for p in pts], marker=".", label=s)
        if log:
            a.set_yscale("log")
        a.set_xlabel("records ingested (M)", fontsize=8)
        a.set_ylabel(ylabel, fontsize=8)
        a.set_title(title, fontsize=9)
        a.grid(alpha=0.3, which="both")
        a.legend(fontsize=7)

    curve(ax[0], RAW, "Fig. 5(a): raw inserts")
    curve(ax[1], WQ, "Fig. 5(b): inserts with a concurrent query stream")
    qcurve(ax[2], WQ, "query_ms_mean", "ms per query (mean over the interval)",
           "Fig. 5(c): query time during the ingest (log)", True)
    qcurve(ax[3], WQ, "query_misses_mean", "cache misses per query",
           "cache misses per query during the ingest (log)", True)
    qcurve(ax[4], DEL, "query_ms_mean", "ms per query (mean over the interval)",
           "Fig. 6: query time with 1% deletes (no-merge)", False)
    qcurve(ax[5], DEL, "query_misses_mean", "cache misses per query",
           "cache misses per query with 1% deletes", False)
    fig.suptitle("asterix-table4: LSM R-tree (deleted keys) vs AMLSM R-tree vs in-place R-tree "
                 "(SQLite R*Tree) — seed 003 Figs. 5-6", fontsize=11)
    fig.tight_layout(rect=(0, 0, 1, 0.96))
    fig.savefig(out, dpi=110)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
