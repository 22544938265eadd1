#!/usr/bin/env python3
"""Plots of the LevelDB++ reproduction (leveldbpp-static, -mixed, -bloom).

Called by bench/plot.py for results whose workload starts with `leveldbpp`:
  plot_leveldbpp.py RESULTS.csv OUT.png
Reads RESULTS.csv (the aggregated rows) and, for the static and mixed workloads, the
time series in <results dir>/leveldbpp/<workload>-series.csv (run 0 is plotted).
The static workload also gets OUT-put.png (mean PUT latency over the load, Figure 3.9a/b);
the mixed workload one PNG with a row per mix (Figures 3.12-3.15).
"""
import csv
import io
import os
import re
import sys
import textwrap

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

ORDER = ["silt-none", "silt-embedded", "silt-lazy", "silt-composite", "silt-eager", "rocksdb-app"]
COLORS = {
    "silt-none": "#7f7f7f",
    "silt-embedded": "#1f77b4",
    "silt-lazy": "#2ca02c",
    "silt-composite": "#ff7f0e",
    "silt-eager": "#d62728",
    "rocksdb-app": "#9467bd",
}


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


def read_series(path):
    if not os.path.exists(path):
        return []
    with open(path, encoding="utf-8") as f:
        lines = [l for l in f if not l.startswith("#")]
    out = []
    for r in csv.DictReader(io.StringIO("".join(lines))):
        if r["run"] != "0":
            continue
        r["ops"] = int(r["ops"])
        r["value"] = float(r["value"])
        out.append(r)
    return out


def systems_of(rows):
    seen = {r["system"] for r in rows}
    return [s for s in ORDER if s in seen]


def footer(fig, header):
    machine = header.get("machine", "")
    run = header.get("run", "")
    text = "\n".join(textwrap.wrap(run + "  |  " + machine, 230)[:3])
    fig.text(0.01, 0.005, text, fontsize=6, color="gray")


def val(rows, system, metric):
    for r in rows:
        if r["system"] == system and r["metric"] == metric:
            return r["median"]
    return float("nan")


def plot_static(header, rows, csv_path, out):
    systems = systems_of(rows)
    q = [s for s in systems if s != "silt-none"]
    ks = ["k=10", "k=100", "k=all"]
    panels = [
        ("LOOKUP UserID {k} mean", "LOOKUP UserID (not time-correlated; Fig. 3.10a)"),
        ("LOOKUP CreationTime {k} mean", "LOOKUP CreationTime (time-correlated; Fig. 3.11a)"),
        ("RANGELOOKUP UserID 10 users {k} mean", "RANGELOOKUP UserID, 10 users (Fig. 3.10b)"),
        ("RANGELOOKUP UserID 100 users {k} mean", "RANGELOOKUP UserID, 100 users (Fig. 3.10c)"),
        ("RANGELOOKUP CreationTime 1 min {k} mean", "RANGELOOKUP CreationTime, 1 min (Fig. 3.11b)"),
        ("RANGELOOKUP CreationTime 10 min {k} mean", "RANGELOOKUP CreationTime, 10 min (Fig. 3.11c)"),
    ]
    fig, axes = plt.subplots(3, 3, figsize=(17, 12))
    flat = [a for row in axes for a in row]
    width = 0.8 / max(len(q), 1)
    for ax, (pattern, title) in zip(flat, panels):
        for i, s in enumerate(q):
            ys = [val(rows, s, pattern.format(k=k)) for k in ks]
            xs = [j - 0.4 + width * (i + 0.5) for j in range(len(ks))]
            bars = ax.bar(xs, ys, width, label=s, color=COLORS.get(s))
            for b, y in zip(bars, ys):
                if y == y:
                    ax.annotate(f"{y:.3g}", (b.get_x() + b.get_width() / 2, y), ha="center",
                                va="bottom", fontsize=6, xytext=(0, 1), textcoords="offset points")
        ax.set_xticks(range(len(ks)))
        ax.set_xticklabels(ks)
        ax.set_yscale("log")
        ax.set_ylabel("mean us per query", fontsize=8)
        ax.set_title(title, fontsize=9)
        ax.grid(axis="y", alpha=0.3, which="both")
    flat[0].legend(fontsize=7, loc="upper left")
    # PUT / GET mean latency.
    ax = flat[6]
    ops = ["PUT mean", "GET mean"]
    width = 0.8 / max(len(systems), 1)
    for i, s in enumerate(systems):
        ys = [val(rows, s, m) for m in ops]
        xs = [j - 0.4 + width * (i + 0.5) for j in range(len(ops))]
        bars = ax.bar(xs, ys, width, label=s, color=COLORS.get(s))
        for b, y in zip(bars, ys):
            if y == y:
                ax.annotate(f"{y:.3g}", (b.get_x() + b.get_width() / 2, y), ha="center",
                            va="bottom", fontsize=6, xytext=(0, 1), textcoords="offset points")
    ax.set_xticks(range(len(ops)))
    ax.set_xticklabels(["PUT", "GET"])
    ax.set_yscale("log")
    ax.set_ylabel("mean us per operation", fontsize=8)
    ax.set_title("PUT and GET (Fig. 3.8b/c)", fontsize=9)
    ax.grid(axis="y", alpha=0.3, which="both")
    ax.legend(fontsize=7)
    # Sizes per tree (stacked).
    ax = flat[7]
    trees = ["primary", "by_user", "by_time"]
    bottom = [0.0] * len(systems)
    for t, hatch in zip(trees, ["", "//", ".."]):
        ys = [val(rows, s, f"size {t}") for s in systems]
        ys = [0.0 if y != y else y for y in ys]
        ax.bar(range(len(systems)), ys, 0.6, bottom=bottom, label=t, hatch=hatch,
               color=[COLORS.get(s) for s in systems], edgecolor="black", linewidth=0.4)
        bottom = [a + b for a, b in zip(bottom, ys)]
    for i, b in enumerate(bottom):
        ax.annotate(f"{b:.0f}", (i, b), ha="center", va="bottom", fontsize=7)
    ax.set_xticks(range(len(systems)))
    ax.set_xticklabels([s.replace("silt-", "") for s in systems], fontsize=8)
    ax.set_ylabel("MB on disk", fontsize=8)
    ax.set_title("Database size by tree (Fig. 3.8a; embedded filters are inside primary)",
                 fontsize=9)
    ax.legend(fontsize=7)
    # Index bytes written per tweet.
    ax = flat[8]
    idx = ["by_user", "by_time"]
    isys = [s for s in systems if s.startswith("silt-") and s != "silt-none"]
    width = 0.8 / max(len(isys), 1)
    for i, s in enumerate(isys):
        ys = [val(rows, s, f"{t} bytes written by flush+merge per tweet") for t in idx]
        ys = [0.0 if y != y else y for y in ys]
        xs = [j - 0.4 + width * (i + 0.5) for j in range(len(idx))]
        bars = ax.bar(xs, ys, width, label=s, color=COLORS.get(s))
        for b, y in zip(bars, ys):
            ax.annotate(f"{y:.3g}", (b.get_x() + b.get_width() / 2, max(y, 1e-9)), ha="center",
                        va="bottom", fontsize=6)
    ax.set_xticks(range(len(idx)))
    ax.set_xticklabels(["UserID index", "CreationTime index"])
    ax.set_yscale("symlog", linthresh=1)
    ax.set_ylabel("bytes written by flush+merge per tweet", fontsize=8)
    ax.set_title("Index write cost (embedded: none; Fig. 3.9c)", fontsize=9)
    ax.legend(fontsize=7)
    scale = rows[0]["scale"] if rows else ""
    fig.suptitle(f"leveldbpp-static ({scale}): mean latency (log scale), sizes, index writes",
                 fontsize=11)
    footer(fig, header)
    fig.tight_layout(rect=(0, 0.03, 1, 0.97))
    fig.savefig(out, dpi=100)
    plt.close(fig)

    series = read_series(os.path.join(os.path.dirname(csv_path), "leveldbpp",
                                      "leveldbpp-static-series.csv"))
    if series:
        fig, ax = plt.subplots(figsize=(8, 5))
        for s in systems_of(series):
            pts = sorted((r["ops"], r["value"]) for r in series if r["system"] == s)
            ax.plot([p[0] for p in pts], [p[1] for p in pts], "-o", ms=3, label=s,
                    color=COLORS.get(s))
        ax.set_yscale("log")
        ax.set_xlabel("tweets loaded")
        ax.set_ylabel("mean us per PUT in the last tenth")
        ax.set_title(f"leveldbpp-static ({scale}): PUT latency as the database grows "
                     "(Fig. 3.9a/b; both indexes)", fontsize=9)
        ax.grid(alpha=0.3, which="both")
        ax.legend(fontsize=7)
        footer(fig, header)
        fig.tight_layout(rect=(0, 0.05, 1, 1))
        fig.savefig(re.sub(r"\.png$", "", out) + "-put.png", dpi=100)
        plt.close(fig)


def plot_mixed(header, rows, csv_path, out):
    series = read_series(os.path.join(os.path.dirname(csv_path), "leveldbpp",
                                      "leveldbpp-mixed-series.csv"))
    mixes = []
    for r in series:
        if r["phase"] not in mixes:
            mixes.append(r["phase"])
    cols = ["ALL", "PUT", "GET", "LOOKUP", "UPDATE", "flush+merge MB"]
    fig, axes = plt.subplots(max(len(mixes), 1), len(cols), figsize=(24, 4 * max(len(mixes), 1)),
                             squeeze=False)
    for i, mix in enumerate(mixes):
        for j, op in enumerate(cols):
            ax = axes[i][j]
            pts_all = [r for r in series if r["phase"] == mix and r["op"] == op]
            if not pts_all:
                ax.axis("off")
                continue
            for s in systems_of(pts_all):
                pts = sorted((r["ops"], r["value"]) for r in pts_all if r["system"] == s)
                ax.plot([p[0] for p in pts], [p[1] for p in pts], "-o", ms=3, label=s,
                        color=COLORS.get(s))
            if op != "flush+merge MB":
                ax.set_yscale("log")
                ax.set_ylabel("mean us per op", fontsize=8)
                name = "all operations" if op == "ALL" else op
            else:
                ax.set_ylabel("cumulative MB", fontsize=8)
                name = "flush+merge bytes (compaction I/O)"
            ax.set_title(f"{mix}: {name}", fontsize=9)
            ax.set_xlabel("operations", fontsize=8)
            ax.grid(alpha=0.3, which="both")
            if j == 0:
                ax.legend(fontsize=7)
    scale = rows[0]["scale"] if rows else ""
    fig.suptitle(f"leveldbpp-mixed ({scale}): mean latency per tenth of the operations "
                 "(Figs. 3.12-3.15; UserID index, LOOKUP k=10)", fontsize=11)
    footer(fig, header)
    fig.tight_layout(rect=(0, 0.03, 1, 0.97))
    fig.savefig(out, dpi=90)
    plt.close(fig)


def plot_bloom(header, rows, out):
    pat = re.compile(r"^silt-embedded bits=([\d.]+)$")
    pts = sorted({float(m.group(1)) for r in rows for m in [pat.match(r["system"])] if m})
    sysname = lambda b: f"silt-embedded bits={b:g}"  # noqa: E731
    fig, axes = plt.subplots(1, 3, figsize=(16, 4.8))
    ax = axes[0]
    for metric, style in (("LOOKUP k=10 mean", "-o"), ("LOOKUP k=all mean", "-s"),
                          ("LOOKUP absent user mean", "-^")):
        ax.plot(pts, [val(rows, sysname(b), metric) for b in pts], style, label=metric)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("bloom bits per key")
    ax.set_ylabel("mean us per LOOKUP")
    ax.set_title("LOOKUP latency (Table B.1, last column)", fontsize=9)
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3, which="both")
    ax = axes[1]
    ys = [val(rows, sysname(b), "false-positive rate (FP blocks / data blocks)") for b in pts]
    ax.plot(pts, ys, "-o", color="#d62728")
    for x, y in zip(pts, ys):
        if y == y:
            ax.annotate(f"{y:.3g}%", (x, y), fontsize=7, xytext=(3, 3), textcoords="offset points")
    ax.set_xscale("log")
    ax.set_yscale("symlog", linthresh=1e-3)
    ax.set_xlabel("bloom bits per key")
    ax.set_ylabel("% of data blocks read for an absent user")
    ax.set_title("False positives (Table B.1, 'False Positive %')", fontsize=9)
    ax.grid(alpha=0.3, which="both")
    ax = axes[2]
    ys = [val(rows, sysname(b), "DB size") for b in pts]
    ax.plot(pts, ys, "-o", color="#1f77b4")
    for x, y in zip(pts, ys):
        if y == y:
            ax.annotate(f"{y:.0f}", (x, y), fontsize=7, xytext=(3, 3), textcoords="offset points")
    ax.set_xscale("log")
    ax.set_xlabel("bloom bits per key")
    ax.set_ylabel("MB")
    ax.set_title("Database size (Table B.1, 'DB Size')", fontsize=9)
    ax.grid(alpha=0.3, which="both")
    scale = rows[0]["scale"] if rows else ""
    fig.suptitle(f"leveldbpp-bloom ({scale}): embedded index on user_id, bits per key",
                 fontsize=11)
    footer(fig, header)
    fig.tight_layout(rect=(0, 0.05, 1, 0.95))
    fig.savefig(out, dpi=100)
    plt.close(fig)


def plot(csv_path, out):
    header, rows = read(csv_path)
    name = rows[0]["workload"] if rows else ""
    if name == "leveldbpp-static":
        plot_static(header, rows, csv_path, out)
    elif name == "leveldbpp-mixed":
        plot_mixed(header, rows, csv_path, out)
    elif name == "leveldbpp-bloom":
        plot_bloom(header, rows, out)
    else:
        print(f"{csv_path}: not a leveldbpp result", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(plot(sys.argv[1], sys.argv[2]))
