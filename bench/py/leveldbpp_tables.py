#!/usr/bin/env python3
"""Markdown tables for docs/reproductions/leveldbpp.md from the leveldbpp results.

Usage: python3 bench/py/leveldbpp_tables.py [RESULTS_DIR]   (default bench/results)
Prints the tables (static, mixed, bloom) to stdout; paste them into the write-up after a
re-run. Medians over the runs are shown.
"""
import csv
import io
import os
import sys

SYS = ["silt-none", "silt-embedded", "silt-lazy", "silt-composite", "silt-eager", "rocksdb-app"]


def read(path):
    if not os.path.exists(path):
        return {}, []
    header, body = {}, []
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.startswith("#"):
                k, _, v = line[1:].partition(":")
                header.setdefault(k.strip(), v.strip())
            else:
                body.append(line)
    rows = list(csv.DictReader(io.StringIO("".join(body))))
    return header, rows


def get(rows, system, metric):
    for r in rows:
        if r["system"] == system and r["metric"] == metric:
            return float(r["median"])
    return None


def fmt(x, unit=""):
    if x is None:
        return "–"
    if abs(x) >= 1000:
        s = f"{x:,.0f}"
    elif abs(x) >= 100:
        s = f"{x:.0f}"
    elif abs(x) >= 10:
        s = f"{x:.1f}"
    else:
        s = f"{x:.2f}"
    return s + unit


def table(head, body):
    out = "| " + " | ".join(head) + " |\n"
    out += "|" + "|".join(["---"] + ["---:"] * (len(head) - 1)) + "|\n"
    for row in body:
        out += "| " + " | ".join(row) + " |\n"
    return out


def static(d):
    h, rows = read(os.path.join(d, "leveldbpp-static.csv"))
    if not rows:
        return
    systems = [s for s in SYS if any(r["system"] == s for r in rows)]
    print(f"<!-- leveldbpp-static: {h.get('run', '')} -->\n")
    print("PUT, GET (mean us), sizes (MB), write amplification:\n")
    body = []
    for s in systems:
        body.append([s, fmt(get(rows, s, "PUT mean")), fmt(get(rows, s, "GET mean")),
                     fmt(get(rows, s, "size primary")), fmt(get(rows, s, "size by_user")),
                     fmt(get(rows, s, "size by_time")), fmt(get(rows, s, "size total")),
                     fmt(get(rows, s, "write amplification (flush+merge bytes / tweet JSON bytes)"))])
    print(table(["system", "PUT us", "GET us", "primary MB", "by_user MB", "by_time MB",
                 "total MB", "WA (flush+merge / JSON bytes)"], body))
    print("Index bytes written by flushes + merges per tweet (and memtable bytes):\n")
    body = []
    for s in systems:
        if s in ("silt-none", "silt-embedded", "rocksdb-app"):
            continue
        body.append([s] + [fmt(get(rows, s, f"{i} bytes written by flush+merge per tweet"))
                           for i in ("by_user", "by_time")]
                    + [fmt(get(rows, s, f"{i} user bytes (memtable writes)")) for i in
                       ("by_user", "by_time")])
    print(table(["system", "by_user B/tweet", "by_time B/tweet", "by_user memtable MB",
                 "by_time memtable MB"], body))
    qs = ["LOOKUP UserID", "LOOKUP CreationTime", "RANGELOOKUP UserID 10 users",
          "RANGELOOKUP UserID 100 users", "RANGELOOKUP CreationTime 1 min",
          "RANGELOOKUP CreationTime 10 min"]
    ks = ["k=10", "k=100", "k=all"]
    qsys = [s for s in systems if s != "silt-none"]
    for q in qs:
        print(f"{q}: mean us (mean results: "
              + ", ".join(f"{k} {fmt(get(rows, 'data', f'{q} {k} results (mean)'))}" for k in ks)
              + ")\n")
        body = []
        for s in qsys:
            body.append([s] + [fmt(get(rows, s, f"{q} {k} mean")) for k in ks])
        print(table(["system"] + ks, body))


def mixed(d):
    h, rows = read(os.path.join(d, "leveldbpp-mixed.csv"))
    if not rows:
        return
    systems = [s for s in SYS if any(r["system"] == s for r in rows)]
    print(f"<!-- leveldbpp-mixed: {h.get('run', '')} -->\n")
    for mix in ("write-heavy", "read-heavy", "update-heavy"):
        body = []
        for s in systems:
            body.append([s] + [fmt(get(rows, s, f"{mix}: {op} mean")) for op in
                               ("all ops", "PUT", "GET", "LOOKUP", "UPDATE")]
                        + [fmt(get(rows, s, f"{mix}: flush+merge bytes during the ops"))])
        print(f"{mix} (mean us per operation):\n")
        print(table(["system", "all ops", "PUT", "GET", "LOOKUP k=10", "update",
                     "flush+merge MB"], body))


def bloom(d):
    h, rows = read(os.path.join(d, "leveldbpp-bloom.csv"))
    if not rows:
        return
    print(f"<!-- leveldbpp-bloom: {h.get('run', '')} -->\n")
    bits = sorted({float(r["system"].split("=")[1]) for r in rows
                   if r["system"].startswith("silt-embedded bits=")})
    body = []
    for b in bits:
        s = f"silt-embedded bits={b:g}"
        body.append([f"{b:g}", fmt(get(rows, s, "DB size")),
                     fmt(get(rows, s, "false-positive rate (FP blocks / data blocks)"), "%"),
                     fmt(get(rows, s, "false-positive blocks per absent-user lookup")),
                     fmt(get(rows, s, "LOOKUP k=10 mean")), fmt(get(rows, s, "LOOKUP k=all mean")),
                     fmt(get(rows, s, "LOOKUP absent user mean"))])
    print(table(["bits/key", "DB MB", "FP rate", "FP blocks/lookup", "LOOKUP k=10 us",
                 "LOOKUP k=all us", "absent-user LOOKUP us"], body))


if __name__ == "__main__":
    d = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..",
                                                            "results")
    static(d)
    mixed(d)
    bloom(d)
