#!/usr/bin/env python3
"""Render tidy benchmark CSV (suite,case,impl,metric,value,unit) as a markdown table.

  scripts/perf_table.py FILE.csv --metric fwd_throughput [--impl prnn-plr] [--where dtype=f32]

Rows are cases, columns are implementations (or metrics with --by-metric)."""
import argparse
import csv
import sys


def read_rows(path):
    with open(path) as f:
        lines = [l for l in f if not l.startswith("#")]
    return list(csv.DictReader(lines))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("csv")
    ap.add_argument("--metric", action="append", required=True)
    ap.add_argument("--impl", action="append")
    ap.add_argument("--where", action="append", default=[], help="key=value the case must contain")
    ap.add_argument("--by-metric", action="store_true", help="columns are metrics, not impls")
    ap.add_argument("--digits", type=int, default=3)
    a = ap.parse_args()

    rows = [r for r in read_rows(a.csv) if r["metric"] in a.metric]
    if a.impl:
        rows = [r for r in rows if r["impl"] in a.impl]
    for w in a.where:
        rows = [r for r in rows if w in r["case"].split(";")]
    if not rows:
        sys.exit("no rows match")
    cases, cols, cell = [], [], {}
    for r in rows:
        col = r["metric"] if a.by_metric else r["impl"]
        if r["case"] not in cases:
            cases.append(r["case"])
        if col not in cols:
            cols.append(col)
        cell[(r["case"], col)] = f'{float(r["value"]):.{a.digits}g} {r["unit"]}'
    print("| case | " + " | ".join(cols) + " |")
    print("|---|" + "---|" * len(cols))
    for c in cases:
        print(f"| {c.replace(';', ' ')} | " + " | ".join(cell.get((c, k), "–") for k in cols) + " |")


if __name__ == "__main__":
    main()
