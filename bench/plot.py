#!/usr/bin/env python3
"""Turn a silt-bench results CSV into a PNG: grouped bar charts of system x metric.

Usage: plot.py RESULTS.csv OUT.png [--log]

One panel per unit (ops/s, MB/s, us, ...) of the `measure` rows, bars grouped by
metric with one bar per system and min..max error bars; one more panel for the
Silt/peer ratios with their targets. Lines starting with '#' are header lines.
"""
import argparse
import csv
import io
import re
import sys
import textwrap

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import EngFormatter  # noqa: E402

SHORT = EngFormatter(places=None, sep="")


def short(x):
    """549123 -> '549k', 2.15 -> '2.15'."""
    if abs(x) >= 1000:
        return SHORT(float(f"{x:.3g}"))
    return f"{x:.3g}"


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
    seen = []
    for v in values:
        if v not in seen:
            seen.append(v)
    return seen


def finish(fig, header, out, top=0.96):
    """The machine line at the foot of the figure, then the PNG."""
    machine = header.get("machine", "")
    if machine:
        fig.text(0.01, 0.005, "\n".join(textwrap.wrap(machine, 230)[:2]), fontsize=6,
                 color="gray")
    fig.tight_layout(rect=(0, 0.03, 1, top))
    fig.savefig(out, dpi=110)
    return 0


def panel(ax, rows, title, log, colors, targets=False):
    metrics = ordered(r["metric"] for r in rows)
    systems = ordered(r["system"] for r in rows)
    by_key = {(r["system"], r["metric"]): r for r in rows}
    width = 0.8 / max(len(systems), 1)
    # Ratios "silt/rocksdb", "silt/sqlite": colour by the peer when the numerators repeat.
    heads = [s.split("/")[0] for s in systems]
    by_peer = len(set(heads)) < len(heads)
    for i, system in enumerate(systems):
        xs, ys, lo, hi = [], [], [], []
        for j, metric in enumerate(metrics):
            r = by_key.get((system, metric))
            if r is None:
                continue
            xs.append(j - 0.4 + width * (i + 0.5))
            ys.append(r["median"])
            lo.append(max(r["median"] - r["min"], 0.0))
            hi.append(max(r["max"] - r["median"], 0.0))
        key = system.split("/")[-1] if by_peer else system.split("/")[0]
        bars = ax.bar(xs, ys, width, yerr=[lo, hi], capsize=2, label=system,
                      color=colors.get(key))
        for b, y, h in zip(bars, ys, hi):
            ax.annotate(short(y), (b.get_x() + b.get_width() / 2, y + h), ha="center",
                        va="bottom", fontsize=7, xytext=(0, 2), textcoords="offset points")
    if targets:
        # One dashed line per bar that has a target (peers may have different targets).
        for j, metric in enumerate(metrics):
            for i, system in enumerate(systems):
                r = by_key.get((system, metric))
                if r is None or not r.get("target"):
                    continue
                t = float(r["target"])
                x0 = j - 0.4 + width * i
                ax.hlines(t, x0, x0 + width, colors="red", linestyles="dashed")
                ax.annotate(f"target {t:.2g}", (x0, t), fontsize=7, color="red",
                            ha="left", va="top", xytext=(0, -2), textcoords="offset points")
    ax.set_xticks(range(len(metrics)))
    if len(metrics) > 6:
        # Many groups: wrapped, slanted labels that do not run into each other.
        ax.set_xticklabels(metrics, fontsize=7, rotation=40, ha="right",
                           rotation_mode="anchor")
    else:
        ax.set_xticklabels([textwrap.fill(m, 24) for m in metrics], fontsize=8)
    ax.set_title(title, fontsize=9)
    if log:
        ax.set_yscale("log")
    else:
        if not targets:
            ax.yaxis.set_major_formatter(EngFormatter(sep=""))
        ax.set_ylim(top=ax.get_ylim()[1] * 1.08)
    if targets:
        ax.legend(fontsize=7, loc="best")
    ax.grid(axis="y", alpha=0.3)


# Groups beyond which a panel takes a whole row.
MANY = 12


def wide(rows, span=50.0):
    """Whether a panel's bars span so many orders that a linear axis would
    flatten the small ones (then it gets a log axis)."""
    ys = [r["median"] for r in rows if r["median"] > 0]
    return len(ys) > 1 and max(ys) / min(ys) > span


LATENCY = re.compile(r"^(rect ~\d+|kNN k=\d+) (mean|p50|p99) \((.+)\)$")


def spatial_rtree(header, rows, out, log):
    """spatial-rtree: ingest bars, and latency by selectivity as lines (one panel per
    access path and phase; solid = mean, dotted = p50, dashed = p99; log y)."""
    measures = [r for r in rows if r["kind"] == "measure"]
    lat = {}
    for r in measures:
        m = LATENCY.match(r["metric"])
        if m:
            query, stat, phase = m.groups()
            lat[(r["system"], phase, query, stat)] = r["median"]
    queries = ordered(q for (_, _, q, _) in lat)
    systems = ordered(r["system"] for r in measures)
    cycle = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    colors = {s: cycle[i % len(cycle)] for i, s in enumerate(systems)}

    def lines(ax, curves, title):
        """curves: [(system, phase)]; the first phase found is used for each."""
        drawn = False
        for system, phase in curves:
            xs = [i for i, q in enumerate(queries) if (system, phase, q, "mean") in lat]
            if not xs:
                continue
            drawn = True
            c = colors.get(system)
            label = {"bulk-loaded in memory": f"{system} (in memory)",
                     "static, built once": f"{system} (static)"}.get(phase, system)
            for stat, style, width, lab in (("mean", "-", 1.8, label), ("p50", ":", 1.0, None),
                                            ("p99", "--", 0.8, None)):
                ys = [lat.get((system, phase, queries[i], stat), float("nan")) for i in xs]
                ax.plot(xs, ys, style, color=c, lw=width, marker="o" if stat == "mean" else None,
                        ms=4, label=lab)
            for i in xs:
                y = lat[(system, phase, queries[i], "mean")]
                ax.annotate(short(y), (i, y), fontsize=6, color=c, xytext=(3, 3),
                            textcoords="offset points")
        ax.set_xticks(range(len(queries)))
        ax.set_xticklabels(queries, fontsize=8)
        ax.set_yscale("log")
        ax.set_ylabel("us per query", fontsize=8)
        ax.set_title(title, fontsize=9)
        ax.grid(axis="y", alpha=0.3, which="both")
        if drawn:
            ax.legend(fontsize=7, loc="upper left")
        else:
            ax.text(0.5, 0.5, "not run", ha="center", transform=ax.transAxes)

    fig, axes = plt.subplots(2, 3, figsize=(16, 8.5))
    ax = axes[0][0]
    ingest = [r for r in measures if r["unit"] == "records/s"]
    metrics = ordered(r["metric"] for r in ingest)
    isys = ordered(r["system"] for r in ingest)
    width = 0.8 / max(len(metrics), 1)
    for j, metric in enumerate(metrics):
        xs, ys, lo, hi = [], [], [], []
        for i, system in enumerate(isys):
            r = next((r for r in ingest if r["system"] == system and r["metric"] == metric), None)
            if r is None:
                continue
            xs.append(i - 0.4 + width * (j + 0.5))
            ys.append(r["median"])
            lo.append(max(r["median"] - r["min"], 0.0))
            hi.append(max(r["max"] - r["median"], 0.0))
        bars = ax.bar(xs, ys, width, yerr=[lo, hi], capsize=2, label=metric,
                      color=[colors.get(isys[round(x + 0.4 - width * (j + 0.5))]) for x in xs],
                      alpha=1.0 if j == 0 else 0.5)
        for b, y in zip(bars, ys):
            ax.annotate(short(y), (b.get_x() + b.get_width() / 2, y), ha="center", va="bottom",
                        fontsize=7, xytext=(0, 2), textcoords="offset points")
    ax.set_xticks(range(len(isys)))
    ax.set_xticklabels([s.replace("+", "\n+") for s in isys], fontsize=7)
    ax.yaxis.set_major_formatter(EngFormatter(sep=""))
    ratio = next((r for r in rows if r["kind"] == "ratio" and r["system"] == "silt/sqlite"
                  and r["metric"] == "ingest"), None)
    title = "ingest, records/s (solid: client-visible, light: + settle)"
    if ratio:
        t = ratio.get("target")
        title += f"\nsilt/sqlite = {ratio['median']:.2f}x" + (f" (target {float(t):g}x)" if t else "")
    ax.set_title(title, fontsize=9)
    ax.grid(axis="y", alpha=0.3)

    py = ("python-rtree", "bulk-loaded in memory")
    # The peers (absent ones are simply not drawn).
    rec_peers = ["sqlite", "postgis", "lucene", "rstar"]
    idx_peers = ["sqlite rtree-only", "postgis ids-only", "lucene index-only", "rstar index-only"]
    static = "static, built once"
    lines(axes[0][1], [(s, "after ingest") for s in ["silt"] + rec_peers],
          "with records, after ingest")
    lines(axes[0][2], [(s, "after ingest") for s in ["silt index-only"] + idx_peers] + [py],
          "index-only, after ingest")
    lines(axes[1][0], [(s, "after compaction") for s in ["silt"] + rec_peers]
          + [("geo-index", static)],
          "with records, after full compaction\n(silt compact / sqlite VACUUM / postgis VACUUM FULL / "
          "lucene forceMerge(1) / rstar bulk_load)")
    lines(axes[1][1], [(s, "after compaction") for s in ["silt index-only"] + idx_peers]
          + [py, ("geo-index index-only", static)],
          "index-only, after full compaction")
    lines(axes[1][2], [(s, "after ingest") for s in systems if "+del" in s],
          "Silt R-tree reconciliation, 1% deletes, after ingest")
    name = rows[0]["workload"] if rows else ""
    scale = rows[0]["scale"] if rows else ""
    fig.suptitle(f"{name} ({scale}): latency per query by selectivity (solid mean, dotted p50, "
                 f"dashed p99; medians over runs)", fontsize=11)
    return finish(fig, header, out)


def sql_ordinary(header, rows, out):
    """Issue 20's queries: warm medians per system (log scale), Silt's first
    runs beside its warm ones, and the ratios against the targets, each with
    its query names slanted so that they stay readable."""
    measures = [r for r in rows if r["kind"] == "measure" and r["unit"] == "ms"]
    warm = [dict(r, metric=r["metric"].removesuffix(" p50")) for r in measures
            if r["metric"].endswith(" p50")]
    firsts = [r for r in measures if r["metric"].endswith(" first run")]
    silt_warm = [r for r in warm if r["system"].startswith("silt")]
    first = [dict(r, system="silt, first run", metric=r["metric"].removesuffix(" first run"))
             for r in firsts]
    ratios = [r for r in rows if r["kind"] == "ratio" and " vs " in r["metric"]]
    for r in ratios:
        q, _, peer = r["metric"].partition(" vs ")
        r["system"] = "DuckDB / Silt" if peer.startswith("DuckDB") else "PostgreSQL / Silt"
        r["metric"] = q
    fig, axes = plt.subplots(3, 1, figsize=(11, 13))
    cycle = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    names = ordered([r["system"] for r in warm] + ["silt, first run"]
                    + [r["system"] for r in ratios])
    colors = {s: cycle[i % len(cycle)] for i, s in enumerate(names)}
    panel(axes[0], warm, "warm median (ms, log scale; lower is better)", True, colors)
    panel(axes[1], silt_warm + first, "Silt: first run (builds column images) and warm "
          "(ms, log scale)", True, colors)
    panel(axes[2], ratios, "peer time / Silt time (x, log scale; higher is better; "
          "dashed: the targets)", True, colors, targets=True)
    for ax in axes:
        ax.set_xticklabels([textwrap.fill(t.get_text(), 18) for t in ax.get_xticklabels()],
                           fontsize=8, rotation=20, ha="right")
        ax.legend(fontsize=8, loc="upper left")
    fig.suptitle(f"sql-ordinary ({rows[0]['scale']}): median with min..max", fontsize=11)
    return finish(fig, header, out, top=0.97)


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("csv")
    p.add_argument("png")
    p.add_argument("--log", action="store_true", help="log-scale y axes")
    args = p.parse_args(argv)

    header, rows = read(args.csv)
    if rows and rows[0]["workload"] == "spatial-rtree":
        return spatial_rtree(header, rows, args.png, args.log)
    if rows and rows[0]["workload"] == "sql-ordinary":
        return sql_ordinary(header, rows, args.png)
    if rows and rows[0]["workload"].startswith("leveldbpp"):
        # The LevelDB++ reproduction has its own figures (bench/py/plot_leveldbpp.py).
        import os
        sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "py"))
        import plot_leveldbpp
        return plot_leveldbpp.plot(args.csv, args.png)
    if rows and rows[0]["workload"] in ("spatial-indexes", "spatial-indexes-rect",
                                         "spatial-indexes-dynamic"):
        # Seed 000's figures (bench/py/plot_spatial_indexes.py).
        import os
        sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "py"))
        import plot_spatial_indexes
        return plot_spatial_indexes.plot(args.csv, args.png)
    if rows and rows[0]["workload"] == "spatial-policies":
        # Seed 002's figures (bench/py/plot_spatial_policies.py).
        import os
        sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "py"))
        import plot_spatial_policies
        return plot_spatial_policies.plot(args.csv, args.png)
    if rows and rows[0]["workload"] == "tpch":
        # The TPC-H study (bench/py/tpch.py) has its own figure (bench/py/plot_tpch.py).
        import os
        sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "py"))
        import plot_tpch
        return plot_tpch.plot(args.csv, args.png)
    if rows and rows[0]["workload"].startswith("asterix-"):
        # The AsterixDB reproduction has its own figures (bench/py/plot_asterix.py).
        import os
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "py"))
        import plot_asterix
        return plot_asterix.plot(args.csv, args.png)
    measures = [r for r in rows if r["kind"] == "measure"]
    ratios = [r for r in rows if r["kind"] == "ratio"]
    units = ordered(r["unit"] for r in measures)
    n = len(units) + (1 if ratios else 0)
    if n == 0:
        print(f"{args.csv}: nothing to plot", file=sys.stderr)
        return 1
    # Panels with many groups get a row of their own, across the figure; the
    # others share rows of up to three.
    panels = [(u, [r for r in measures if r["unit"] == u]) for u in units]
    if ratios:
        panels.append((None, ratios))
    many = [p for p in panels if len(ordered(r["metric"] for r in p[1])) > MANY]
    few = [p for p in panels if p not in many]
    cols = max(min(len(few), 3), 1)
    few_rows = (len(few) + cols - 1) // cols
    nrows = few_rows + len(many)
    fig = plt.figure(figsize=(5.2 * 3 if many else 5.2 * cols, 4.0 * nrows))
    grid = fig.add_gridspec(nrows, cols)
    slots = [fig.add_subplot(grid[i // cols, i % cols]) for i in range(len(few))]
    slots += [fig.add_subplot(grid[few_rows + i, :]) for i in range(len(many))]
    cycle = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    systems = ordered(r["system"].split("/")[0] for r in measures + ratios)
    colors = {s: cycle[i % len(cycle)] for i, s in enumerate(systems)}
    for ax, (unit, of_unit) in zip(slots, few + many):
        if unit is None:
            panel(ax, of_unit, "Silt / peer (x, higher is better)", False, colors,
                  targets=True)
        else:
            panel(ax, of_unit, unit, args.log or wide(of_unit), colors)
    measured = ordered(r["system"] for r in measures)
    handles = [plt.Rectangle((0, 0), 1, 1, color=colors[s]) for s in measured]
    fig.legend(handles, measured, loc="upper right", fontsize=8, ncol=min(len(measured), 6))
    name = rows[0]["workload"] if rows else args.csv
    scale = rows[0]["scale"] if rows else ""
    # Left-aligned: the legend takes the top right.
    fig.suptitle(f"{name} ({scale}): median with min..max", fontsize=11, x=0.01, ha="left")
    return finish(fig, header, args.png)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
