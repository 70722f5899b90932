#!/usr/bin/env python3
"""Medians per (H, R, layout) of x_exchange_lab's CSV rows (bench/persistent/x_exchange_lab.sh).

Usage: x_exchange_summary.py FILE.csv
"""
import collections
import csv
import statistics
import sys

rows = collections.defaultdict(list)
with open(sys.argv[1]) as f:
    for r in csv.DictReader(l for l in f if not l.startswith("#")):
        if r["layout"] == "layout":  # the header of a later run
            continue
        rows[(int(r["H"]), int(r["R"]), r["layout"])].append(r)
cols = ("ns_per_step", "store", "arrive", "wait", "sum")
print("%-6s %-4s %-6s %s errors" % ("H", "R", "layout", " ".join("%12s" % c for c in cols)))
for key in sorted(rows):
    rs = rows[key]
    med = [statistics.median(float(r[c]) for r in rs) for c in cols]
    errors = sum(int(r["errors"]) for r in rs)
    print("%-6d %-4d %-6s %s %d" % (key + (" ".join("%12.1f" % m for m in med), errors)))
