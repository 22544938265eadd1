"""Figures of the AsterixDB storage paper reproduction (asterix-table2, -fig4, -table3, -table4).

Called by plot.py for workloads named asterix-*; `plot(csv, png)`.
"""
import re
import textwrap

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import EngFormatter  # noqa: E402

import plot as base  # noqa: E402  (bench/plot.py: read, ordered, short)


def bars(ax, rows, systems, metrics, title, colors=None, fmt=base.short, eng=True):
    by = {(r["system"], r["metric"]): r for r in rows}
    width = 0.8 / max(len(metrics), 1)
    cycle = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for j, m in enumerate(metrics):
        xs, ys, lo, hi = [], [], [], []
        for i, s in enumerate(systems):
            r = by.get((s, m))
            if r is None:
                continue
            xs.append(i - 0.4 + width * (j + 0.5))
            ys.append(r["median"])
            lo.append(max(r["median"] - r["min"], 0.0))
            hi.append(max(r["max"] - r["median"], 0.0))
        b = ax.bar(xs, ys, width, yerr=[lo, hi], capsize=2, label=m, color=cycle[j % len(cycle)])
        for bb, y in zip(b, ys):
            ax.annotate(fmt(y), (bb.get_x() + bb.get_width() / 2, y), ha="center", va="bottom",
                        fontsize=7, xytext=(0, 2), textcoords="offset points")
    ax.set_xticks(range(len(systems)))
    ax.set_xticklabels([s.replace("silt-", "") for s in systems], fontsize=8)
    ax.set_title(title, fontsize=9)
    if eng:
        ax.yaxis.set_major_formatter(EngFormatter(sep=""))
    ax.set_ylim(top=ax.get_ylim()[1] * 1.1)
    ax.grid(axis="y", alpha=0.3)
    if len(metrics) > 1:
        ax.legend(fontsize=7)


def footer(fig, header, rows, what):
    name = rows[0]["workload"] if rows else ""
    scale = rows[0]["scale"] if rows else ""
    fig.suptitle(f"{name} ({scale}): {what}", fontsize=11)
    text = header.get("machine", "") + "  |  " + header.get("run", "")
    fig.text(0.01, 0.005, "\n".join(textwrap.wrap(text, 230)[:2]), fontsize=6, color="gray")
    fig.tight_layout(rect=(0, 0.04, 1, 0.95))


def table2(header, rows, out):
    meas = [r for r in rows if r["kind"] == "measure"]
    systems = base.ordered(r["system"] for r in meas)
    fig, axes = plt.subplots(1, 3, figsize=(17, 5))
    bars(axes[0], meas, systems, ["ingest", "ingest+settle"],
         "ingest, tweets/s (client-visible; + final flush and merges)")
    bars(axes[1], meas, systems, ["flushes (primary)", "merges (primary)", "merges (all trees)",
                                  "components left (all trees)"],
         "flushes and merges (same tweets for every policy)")
    bars(axes[2], meas, systems, ["write amp (flush+merge / memory-component bytes)"],
         "write amplification: bytes flushed + merged / bytes put in memory components",
         fmt=lambda y: f"{y:.2f}", eng=False)
    footer(fig, header, rows, "merge policies (seed 003 Table 2); medians over runs")
    fig.savefig(out, dpi=110)
    return 0


def fig4(header, rows, out):
    meas = [r for r in rows if r["kind"] == "measure"]
    systems = base.ordered(r["system"] for r in meas)
    fig, axes = plt.subplots(1, 2, figsize=(14, 5))
    bars(axes[0], meas, systems, ["ingest", "ingest+settle"],
         "ingest, tweets/s, log scale (client-visible; + final flush and merges)")
    axes[0].set_yscale("log")
    axes[0].set_ylim(bottom=max(min(r["median"] for r in meas if r["unit"] == "records/s") / 3, 1))
    bars(axes[1], meas, systems, ["memory-component bytes per tweet", "flush+merge bytes per tweet"],
         "index bytes per tweet")
    footer(fig, header, rows, "secondary indexes vs ingest (seed 003 Fig. 4 a/b); medians over runs")
    fig.savefig(out, dpi=110)
    return 0


LAT = re.compile(r"^range ~(\d+) (mean|p50|p99) \((.+)\)$")


def table3(header, rows, out):
    lat = {}
    for r in rows:
        m = LAT.match(r["metric"])
        if r["kind"] == "measure" and m:
            size, stat, phase = m.groups()
            lat[(r["system"], phase, int(size), stat)] = r["median"]
    phases = ["during ingest", "after ingest", "after compaction"]
    sizes = sorted({k[2] for k in lat})
    fig, axes = plt.subplots(1, 3, figsize=(17, 5))
    cycle = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for ax, path in zip(axes[:2], ["silt validated", "silt index-only"]):
        for i, ph in enumerate(phases):
            for stat, style, lw in (("p50", "-", 1.8), ("mean", ":", 1.0), ("p99", "--", 0.8)):
                xs = [s for s in sizes if (path, ph, s, stat) in lat]
                ys = [lat[(path, ph, s, stat)] for s in xs]
                ax.plot(xs, ys, style, marker="o" if stat == "p50" else None, color=cycle[i],
                        lw=lw, label=ph if stat == "p50" else None)
                if stat == "p50":
                    for x, y in zip(xs, ys):
                        ax.annotate(base.short(y), (x, y), fontsize=6, color=cycle[i],
                                    xytext=(3, 3), textcoords="offset points")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("result size (records)", fontsize=8)
        ax.set_ylabel("us per query (solid p50, dotted mean, dashed p99)", fontsize=8)
        ax.set_title(path, fontsize=9)
        ax.grid(alpha=0.3, which="both")
        ax.legend(fontsize=7)
    # The paper's Table 3 (ms), for shape.
    paper = {"during ingest": [1023, 1185, 2846, 11647], "after ingest": [139, 191, 634, 3747],
             "after compaction": [138, 184, 500, 3381]}
    ax = axes[2]
    for i, ph in enumerate(phases):
        ax.plot([10, 100, 1000, 10000], [v * 1000 for v in paper[ph]], "-", marker="s",
                color=cycle[i], label=f"paper: {ph}")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("result size (records)", fontsize=8)
    ax.set_ylabel("us per query (mean)", fontsize=8)
    ax.set_title("the paper (AsterixDB, 8 nodes, 490 GB, incl. ~43 ms job start-up)", fontsize=9)
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=7)
    footer(fig, header, rows, "secondary B+-tree range queries (seed 003 Table 3); medians over runs")
    fig.savefig(out, dpi=110)
    return 0


def table4(header, rows, out):
    meas = [r for r in rows if r["kind"] == "measure"]
    systems = base.ordered(r["system"] for r in meas)
    fig, axes = plt.subplots(1, 4, figsize=(23, 5))
    bars(axes[0], meas, systems, ["ingest (raw inserts)", "ingest (inserts with concurrent queries)",
                                  "ingest (1% deletes with concurrent queries)"],
         "ingest rate (records/s; ops/s with deletes)")
    phases = ["during ingest", "after ingest", "after ingest, cold", "after compaction",
              "after compaction, cold"]
    cold = [p for p in phases if p.endswith(", cold")]
    for ax, prefix, title, which in (
            (axes[1], "query mean", "ms per query (log; Table 4 / Fig. 5c; cold: files evicted)",
             phases),
            (axes[2], "cache misses per query",
             "cache misses per query (Silt block cache / SQLite page cache; log)", phases),
            (axes[3], "disk KiB read per query",
             "disk KiB read per query, cold phases (/proc/self/io read_bytes; log)", cold)):
        metrics = [f"{prefix} ({p})" for p in which]
        present = {r["metric"] for r in meas}
        metrics = [m for m in metrics if m in present]
        if not metrics:
            ax.text(0.5, 0.5, "not measured", ha="center", transform=ax.transAxes)
            ax.set_title(title, fontsize=9)
            continue
        # Only the systems that have a bar here (the deletes runs have no cold phase).
        shown = [s for s in systems if any(r["system"] == s and r["metric"] in metrics
                                           for r in meas)]
        bars(ax, meas, shown, metrics, title, fmt=lambda y: f"{y:.3g}", eng=False)
        vals = [r["median"] for r in meas if r["metric"] in metrics and r["median"] > 0]
        ax.set_yscale("log")
        if vals:
            ax.set_ylim(min(vals) / 2, max(vals) * 4)
    footer(fig, header, rows, "LSM vs AMLSM vs in-place R-tree (seed 003 Table 4); medians over runs")
    fig.savefig(out, dpi=110)
    return 0


def plot(csv_path, png):
    header, rows = base.read(csv_path)
    name = rows[0]["workload"] if rows else ""
    if name == "asterix-table2":
        return table2(header, rows, png)
    if name == "asterix-fig4":
        return fig4(header, rows, png)
    if name == "asterix-table3":
        return table3(header, rows, png)
    if name == "asterix-table4":
        return table4(header, rows, png)
    return 1
