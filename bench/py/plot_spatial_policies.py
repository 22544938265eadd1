#!/usr/bin/env python3
"""Plots of the seed 002 reproduction (spatial-policies).

Called by bench/plot.py for the workload `spatial-policies`:
  plot_spatial_policies.py RESULTS.csv OUT.png
OUT.png: horizontal bars per configuration (policy x comparator), clustered vs uniform:
write throughput, write amplification, and per selectivity 10^-sigma the mean latency and
the components touched (read amplification), as in Figs. 8, 10, 12 and 13.
OUT-throughput.png: write throughput over ingest time per configuration, from
<results dir>/spatial-policies/series.csv (run 0).
"""
import csv
import io
import os
import sys
import textwrap

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

SETS = ["clustered", "uniform"]
SET_COLORS = {"clustered": "#1f77b4", "uniform": "#ff7f0e"}
FAMILY_COLORS = {
    "binomial(4)": "#1f77b4", "binomial(10)": "#aec7e8", "tiered(4)": "#2ca02c",
    "tiered(10)": "#98df8a", "concurrent": "#d62728", "prefix": "#9467bd",
    "leveled-size": "#8c564b", "leveled-str": "#e377c2", "leveled-rstar_grove": "#7f7f7f",
}
STYLES = {"hilbert": "-", "simple": "--", "zorder": ":"}


def read(path):
    header, body = {}, []
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.startswith("#"):
                key, _, value = line[1:].partition(":")
                header.setdefault(key.strip(), value.strip())
            else:
                body.append(line)
    rows = list(csv.DictReader(io.StringIO("".join(body))))
    for r in rows:
        for k in ("median", "min", "max"):
            try:
                r[k] = float(r[k])
            except (TypeError, ValueError):
                r[k] = float("nan")
    return header, rows


def split(system):
    """'binomial(4) hilbert clustered' -> ('binomial(4) hilbert', 'clustered')."""
    head, _, tail = system.rpartition(" ")
    return head, tail


def bars(ax, rows, metric, configs, title, log=False):
    h = 0.4
    for k, s in enumerate(SETS):
        ys, vals, lo, hi = [], [], [], []
        for i, c in enumerate(configs):
            r = rows.get((f"{c} {s}", metric))
            if r is None:
                continue
            ys.append(i - 0.2 + h * k)
            vals.append(r["median"])
            lo.append(max(r["median"] - r["min"], 0))
            hi.append(max(r["max"] - r["median"], 0))
        ax.barh(ys, vals, h, xerr=[lo, hi], color=SET_COLORS[s], label=s, capsize=1.5)
    ax.set_yticks(range(len(configs)))
    ax.set_yticklabels(configs, fontsize=7)
    ax.invert_yaxis()
    ax.set_title(title, fontsize=9)
    if log:
        ax.set_xscale("log")
    ax.grid(axis="x", alpha=0.3)
    ax.tick_params(axis="x", labelsize=7)


def series_plot(csv_path, png, window=10):
    """One panel per policy; colour = data set, line style = comparator; throughput over a
    moving window of `window` samples (a tenth of the points)."""
    path = os.path.join(os.path.dirname(os.path.abspath(csv_path)), "spatial-policies",
                        "series.csv")
    if not os.path.exists(path):
        return
    with open(path, encoding="utf-8") as f:
        lines = [l for l in f if not l.startswith("#")]
    pts = [r for r in csv.DictReader(io.StringIO("".join(lines))) if r["run"] == "0"]
    if not pts:
        return
    families = []
    for r in pts:
        fam = r["system"].rpartition(" ")[0]
        if fam not in families:
            families.append(fam)
    cols = 3
    nrows = (len(families) + cols - 1) // cols
    fig, axes = plt.subplots(nrows, cols, figsize=(15, 3.4 * nrows), squeeze=False,
                             sharey=True)
    flat = [a for row in axes for a in row]
    for ax, fam in zip(flat, families):
        for s in SETS:
            for order, style in STYLES.items():
                xy = sorted((float(r["seconds"]), float(r["points"])) for r in pts
                            if r["data"] == s and r["system"] == f"{fam} {order}")
                if len(xy) <= window:
                    continue
                xs, ys = [], []
                for i in range(window, len(xy)):
                    dt = xy[i][0] - xy[i - window][0]
                    if dt > 0:
                        xs.append(xy[i][0])
                        ys.append((xy[i][1] - xy[i - window][1]) / dt)
                ax.plot(xs, ys, style, color=SET_COLORS[s], label=f"{s} {order}", linewidth=1.2)
        ax.set_title(fam, fontsize=9)
        ax.grid(alpha=0.3)
        ax.tick_params(labelsize=7)
        ax.legend(fontsize=6, loc="lower left")
    for ax in flat[len(families):]:
        ax.axis("off")
    for row in axes:
        row[0].set_ylabel("points/s", fontsize=8)
    for ax in axes[-1]:
        ax.set_xlabel("ingest seconds (read phases excluded)", fontsize=8)
    scale = ""
    with open(path, encoding="utf-8") as f:
        first = f.readline()
        if "scale=" in first:
            scale = first.split("scale=")[1].strip()
    fig.suptitle(f"spatial-policies ({scale}, run 1): write throughput over time, moving "
                 f"window of {window}% of the points; solid = Hilbert, dashed = Simple, "
                 "dotted = Z-order", fontsize=10)
    fig.tight_layout(rect=(0, 0, 1, 0.96))
    out = png[:-4] + "-throughput.png" if png.endswith(".png") else png + "-throughput.png"
    fig.savefig(out, dpi=100)
    print(f"wrote {out}", file=sys.stderr)


def plot(csv_path, png):
    header, rows = read(csv_path)
    by = {(r["system"], r["metric"]): r for r in rows}
    configs = []
    for r in rows:
        if r["system"] == "data":
            continue
        c, s = split(r["system"])
        if s in SETS and c not in configs:
            configs.append(c)
    panels = [
        ("write throughput", "write throughput, points/s (higher is better)", False),
        ("R-tree write amplification", "R-tree write amplification, x", False),
        ("sigma=3 mean", "σ=3 (10^-3) mean latency, µs", True),
        ("sigma=5 mean", "σ=5 (10^-5) mean latency, µs", True),
        ("sigma=3 components touched", "σ=3 read amplification, components", False),
        ("sigma=5 components touched", "σ=5 read amplification, components", False),
    ]
    fig, axes = plt.subplots(2, 3, figsize=(16, 0.32 * len(configs) * 2 + 2.5), squeeze=False)
    for ax, (metric, title, log) in zip([a for row in axes for a in row], panels):
        bars(ax, by, metric, configs, title, log)
    axes[0][0].legend(fontsize=8)
    scale = rows[0]["scale"] if rows else ""
    fig.suptitle(f"spatial-policies ({scale}): merge policy x comparator, median with min..max",
                 fontsize=11)
    machine = header.get("machine", "")
    if machine:
        fig.text(0.01, 0.005, "\n".join(textwrap.wrap(machine, 230)[:2]), fontsize=6,
                 color="gray")
    fig.tight_layout(rect=(0, 0.03, 1, 0.96))
    fig.savefig(png, dpi=110)
    series_plot(csv_path, png)
    return 0


if __name__ == "__main__":
    sys.exit(plot(sys.argv[1], sys.argv[2]))
