#!/usr/bin/env python3
"""Plots of the seed 000 reproductions (spatial-indexes, spatial-indexes-rect,
spatial-indexes-dynamic), called by bench/plot.py:
  plot_spatial_indexes.py RESULTS.csv OUT.png
Static workloads: ingest and index size bars, then mean latency by radius (log-log lines,
one per index) for index-only and validated selects and joins; the rect workload gets one
row per data set (house, lake). Dynamic: ingest rate and query latency by ingest setting.
"""
import csv
import io
import re
import sys
import textwrap

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

LAT = re.compile(r"^(radius|box|join) (\S+) deg (index-only|validated) mean$")
PALETTE = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
           "#7f7f7f", "#bcbd22", "#17becf"]


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


def ordered(values):
    out = []
    for v in values:
        if v not in out:
            out.append(v)
    return out


def bar(ax, rows, systems, metric, title, colors):
    xs, ys, lo, hi, cs = [], [], [], [], []
    for i, s in enumerate(systems):
        r = rows.get((s, metric))
        if r is None:
            continue
        xs.append(i)
        ys.append(r["median"])
        lo.append(max(r["median"] - r["min"], 0))
        hi.append(max(r["max"] - r["median"], 0))
        cs.append(colors[s])
    ax.bar(xs, ys, yerr=[lo, hi], color=cs, capsize=2)
    for x, y in zip(xs, ys):
        ax.annotate(f"{y:,.3g}" if y < 1000 else f"{y/1000:.0f}k", (x, y), ha="center",
                    va="bottom", fontsize=7, xytext=(0, 2), textcoords="offset points")
    ax.set_xticks(range(len(systems)))
    ax.set_xticklabels(systems, fontsize=7, rotation=30, ha="right")
    ax.set_title(title, fontsize=9)
    ax.grid(axis="y", alpha=0.3)


def lines(ax, rows, systems, shape, mode, title, colors):
    for s in systems:
        pts = []
        for (sys_, metric), r in rows.items():
            m = LAT.match(metric)
            if sys_ == s and m and m.group(1) == shape and m.group(3) == mode:
                pts.append((float(m.group(2)), r["median"]))
        pts.sort()
        if pts:
            ax.plot([p[0] for p in pts], [p[1] for p in pts], "o-", color=colors[s], label=s,
                    markersize=3, linewidth=1.2)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("radius, degrees", fontsize=7)
    ax.set_title(title, fontsize=9)
    ax.grid(alpha=0.3, which="both")
    ax.tick_params(labelsize=7)


def static(header, rows, out, groups):
    """groups: list of (row title, [systems])."""
    by = {(r["system"], r["metric"]): r for r in rows}
    has_box = any(LAT.match(m) and LAT.match(m).group(1) == "box" for _, m in by)
    panels = [("ingest", None), ("index size", None), ("radius", "index-only"),
              ("radius", "validated"), ("join", "index-only"), ("join", "validated")]
    if has_box:
        panels.insert(4, ("box", "index-only"))
    cols = len(panels)
    fig, axes = plt.subplots(len(groups), cols, figsize=(3.3 * cols, 3.6 * len(groups)),
                             squeeze=False)
    for gi, (gtitle, systems) in enumerate(groups):
        colors = {s: PALETTE[i % len(PALETTE)] for i, s in enumerate(systems)}
        for ax, (a, b) in zip(axes[gi], panels):
            if b is None:
                unit = "records/s" if a == "ingest" else "MB"
                bar(ax, by, systems, a, f"{gtitle}{a}, {unit}", colors)
            else:
                unit = "ms per join of 100 probes" if a == "join" else "µs"
                lines(ax, by, systems, a, b, f"{gtitle}{a} {b}, {unit}", colors)
        axes[gi][2].legend(fontsize=6, loc="best")
    name = rows[0]["workload"]
    scale = rows[0]["scale"]
    fig.suptitle(f"{name} ({scale}): median over runs; every index returns the same results",
                 fontsize=11)
    machine = header.get("machine", "")
    if machine:
        fig.text(0.01, 0.005, "\n".join(textwrap.wrap(machine, 230)[:2]), fontsize=6,
                 color="gray")
    fig.tight_layout(rect=(0, 0.03, 1, 0.95))
    fig.savefig(out, dpi=100)
    return 0


def dynamic(header, rows, out):
    by = {(r["system"], r["metric"]): r for r in rows}
    systems = ordered(r["system"] for r in rows if r["system"] != "data")
    colors = {s: PALETTE[i % len(PALETTE)] for i, s in enumerate(systems)}
    settings = ["sleep 1ms/1", "sleep 1ms/10", "sleep 1ms/100", "sleep 1ms/1000"]
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.2), squeeze=False)
    bar(axes[0][0], by, systems, "ingest ingest only", "ingest only (workload 1), records/s",
        colors)
    for ax, (prefix, title) in zip(axes[0][1:], [("ingest", "ingest rate reached, records/s"),
                                                 ("query mean", "index-only query mean, µs")]):
        for s in systems:
            ys = [by.get((s, f"{prefix} {x}"), {}).get("median", float("nan")) for x in settings]
            ax.plot(range(len(settings)), ys, "o-", color=colors[s], label=s, markersize=3)
        ax.set_xticks(range(len(settings)))
        ax.set_xticklabels(settings, fontsize=7)
        ax.set_yscale("log")
        ax.set_title(f"under concurrent queries (workload 2): {title}", fontsize=9)
        ax.grid(alpha=0.3, which="both")
        ax.tick_params(labelsize=7)
    axes[0][2].legend(fontsize=7)
    fig.suptitle(f"{rows[0]['workload']} ({rows[0]['scale']}): median over runs", fontsize=11)
    machine = header.get("machine", "")
    if machine:
        fig.text(0.01, 0.005, "\n".join(textwrap.wrap(machine, 230)[:2]), fontsize=6,
                 color="gray")
    fig.tight_layout(rect=(0, 0.04, 1, 0.93))
    fig.savefig(out, dpi=100)
    return 0


def plot(csv_path, png):
    header, rows = read(csv_path)
    name = rows[0]["workload"]
    if name == "spatial-indexes-dynamic":
        return dynamic(header, rows, png)
    systems = ordered(r["system"] for r in rows if r["system"] != "data")
    if name == "spatial-indexes-rect":
        groups = []
        for d in ordered(s.rpartition(" ")[2] for s in systems):
            groups.append((f"{d}: ", [s for s in systems if s.endswith(" " + d)]))
        return static(header, rows, png, groups)
    return static(header, rows, png, [("", systems)])


if __name__ == "__main__":
    sys.exit(plot(sys.argv[1], sys.argv[2]))
