#!/usr/bin/env python3
"""Figure of the TPC-H workload (bench/py/tpch.py; issue #23, seed 004 ch. 5).

Called by bench/plot.py for results whose workload is `tpch`:
  plot_tpch.py RESULTS.csv OUT.png
One row of panels per scale factor: the 22 queries' median times per
system (log scale), and Silt's time over each peer's per query.
"""
import os
import sys
import textwrap

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import plot as base  # noqa: E402  (bench/plot.py: read)

ORDER = ["silt", "duckdb", "duckdb-parquet", "duckdb-csv", "datafusion-parquet", "datafusion-csv"]
COLORS = {
    "silt": "#d62728",
    "duckdb": "#1f77b4",
    "duckdb-parquet": "#6baed6",
    "duckdb-csv": "#c6dbef",
    "datafusion-parquet": "#2ca02c",
    "datafusion-csv": "#a1d99b",
}


def plot(csv_path, png):
    header, rows = base.read(csv_path)
    scales = base.ordered(r["scale"] for r in rows)
    if not scales:
        print(f"{csv_path}: nothing to plot", file=sys.stderr)
        return 1
    fig, axes = plt.subplots(len(scales), 2, figsize=(16, 4.2 * len(scales)),
                             gridspec_kw={"width_ratios": [3, 2]}, squeeze=False)
    for (ax, rax), scale in zip(axes, scales):
        here = [r for r in rows if r["scale"] == scale]
        times = {(r["system"], r["metric"]): r for r in here if r["kind"] == "measure" and r["unit"] == "ms"}
        queries = sorted({m for (_, m) in times})
        systems = [s for s in ORDER if any((s, q) in times for q in queries)]
        width = 0.85 / max(len(systems), 1)
        for j, s in enumerate(systems):
            xs, ys, lo, hi = [], [], [], []
            for i, q in enumerate(queries):
                r = times.get((s, q))
                if r is None:
                    continue
                xs.append(i - 0.425 + width * (j + 0.5))
                ys.append(r["median"])
                lo.append(max(r["median"] - r["min"], 0.0))
                hi.append(max(r["max"] - r["median"], 0.0))
            ax.bar(xs, ys, width, yerr=[lo, hi], capsize=1, label=s, color=COLORS.get(s))
        ax.set_yscale("log")
        ax.set_xticks(range(len(queries)))
        ax.set_xticklabels([q.upper() for q in queries], fontsize=7, rotation=90)
        ax.set_ylabel("median ms (log)")
        ax.set_title(f"TPC-H {scale}: query times", fontsize=9)
        ax.grid(axis="y", alpha=0.3, which="both")
        ax.legend(fontsize=7, ncol=3)
        ratios = {r["metric"]: r for r in here if r["kind"] == "ratio"}
        peers = [p for p in ORDER[1:] if any(m.endswith("/" + p) for m in ratios)]
        width = 0.85 / max(len(peers), 1)
        for j, p in enumerate(peers):
            xs, ys = [], []
            for i, q in enumerate(queries):
                r = ratios.get(f"{q}/{p}")
                if r is not None:
                    xs.append(i - 0.425 + width * (j + 0.5))
                    ys.append(r["median"])
            g = ratios.get(f"geomean/{p}")
            label = f"/ {p}" + (f" (geomean {g['median']:.1f}x)" if g else "")
            rax.bar(xs, ys, width, label=label, color=COLORS.get(p))
        rax.axhline(1.0, color="black", linewidth=0.8)
        rax.set_yscale("log")
        rax.set_xticks(range(len(queries)))
        rax.set_xticklabels([q.upper() for q in queries], fontsize=7, rotation=90)
        rax.set_ylabel("Silt time / peer time (log)")
        rax.set_title(f"TPC-H {scale}: Silt over each peer (1 = as fast)", fontsize=9)
        rax.grid(axis="y", alpha=0.3, which="both")
        rax.legend(fontsize=7)
    text = "  |  ".join([header.get("machine", "")] + [f"{k}: {v}" for k, v in header.items() if k.startswith("run")])
    fig.suptitle("tpch: Silt SQL (silt serve + psycopg) beside DuckDB and DataFusion", fontsize=11)
    fig.text(0.01, 0.005, "\n".join(textwrap.wrap(text, 200)), fontsize=6, va="bottom")
    fig.tight_layout(rect=(0, 0.03, 1, 0.97))
    fig.savefig(png, dpi=110)
    print(f"wrote {png}")
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    sys.exit(plot(sys.argv[1], sys.argv[2]))


