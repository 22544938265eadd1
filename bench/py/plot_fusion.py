#!/usr/bin/env python3
"""Figure of Fusion's study (bench/py/fusion.py; issue #23, seed 004 ch. 6).

  plot_fusion.py RESULTS.csv OUT.png
One row of panels per scale factor: each range query's median time per
system and chunk size (log scale), and the time of one row's insert,
update and delete (log scale).
"""
import csv
import sys
from collections import defaultdict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

COLORS = {
    "silt-no-index": "#f4a582",
    "silt-brin": "#d62728",
    "silt": "#d62728",
    "datafusion-parquet": "#2ca02c",
    "pyarrow-parquet": "#1f77b4",
    "polars-parquet": "#9467bd",
    "delta": "#8c564b",
    "parquet-rewrite": "#1f77b4",
}


def main(path, png):
    with open(path) as f:
        rows = list(csv.DictReader(f))
    sfs = sorted({float(r["sf"]) for r in rows})
    if not sfs:
        print(f"{path}: nothing to plot", file=sys.stderr)
        return 1
    fig, axes = plt.subplots(len(sfs), 2, figsize=(17, 4.6 * len(sfs)),
                             gridspec_kw={"width_ratios": [3, 1.2]}, squeeze=False)  # fmt: skip
    for (qax, wax), sf in zip(axes, sfs):
        mine = [r for r in rows if float(r["sf"]) == sf]
        note = next((r["note"] for r in mine if r["system"] == "dbgen"), "")
        for ax, kind in ((qax, "query"), (wax, "write")):
            sel = [r for r in mine if r["kind"] == kind]
            whats = list(dict.fromkeys(r["what"] for r in sel))
            series = list(dict.fromkeys((r["system"], r["chunk"]) for r in sel))
            val = defaultdict(dict)
            for r in sel:
                val[(r["system"], r["chunk"])][r["what"]] = float(r["seconds"])
            width = 0.85 / max(1, len(series))
            for i, (system, chunk) in enumerate(series):
                xs = [j + i * width for j in range(len(whats))]
                ys = [val[(system, chunk)].get(w, 0) for w in whats]
                label = system if chunk == "-" else f"{system} {chunk}"
                hatch = "//" if chunk.startswith("16") else None
                ax.bar(xs, ys, width, label=label, color=COLORS.get(system, "#777"), hatch=hatch, edgecolor="white")
            ax.set_xticks([j + 0.425 - width / 2 for j in range(len(whats))])
            ax.set_xticklabels(whats, rotation=15)
            ax.set_yscale("log")
            ax.set_ylabel("seconds (median)")
            ax.grid(axis="y", alpha=0.3)
        qax.set_title(f"SF {sf:g} lineitem ({note}): range queries on the S3 stand-in")
        wax.set_title("one row written")
        qax.legend(fontsize=7, ncol=2)
        wax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(png, dpi=110)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
