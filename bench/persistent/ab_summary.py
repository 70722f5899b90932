#!/usr/bin/env python3
"""Medians of an A/B's rounds, one line per (case, impl, metric), each tree's median and its
ratio to the baseline tree's.

  python3 bench/persistent/ab_summary.py DIR [BASELINE]

DIR holds `prnn bench` CSVs named <tree>_<round>.csv (bench/persistent/ab.sh writes old/new,
ab_trees.sh old and the named trees); BASELINE is the tree the ratios are to (default: old).
Throughput metrics (tflops) are left out: they are the times' reciprocals."""
import collections
import csv
import glob
import os
import re
import statistics
import sys


def main():
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__)
    folder, base = sys.argv[1], sys.argv[2] if len(sys.argv) == 3 else "old"
    runs = collections.defaultdict(list)
    trees = []
    for path in sorted(glob.glob(os.path.join(folder, "*_*.csv"))):
        m = re.fullmatch(r"(.+)_(\d+)\.csv", os.path.basename(path))
        if not m:
            continue
        tree = m.group(1)
        if tree not in trees:
            trees.append(tree)
        with open(path) as f:
            for row in csv.DictReader(line for line in f if not line.startswith("#")):
                if "tflops" in row["metric"] or row["metric"] == "status":
                    continue
                runs[(row["case"], row["impl"], row["metric"], tree)].append(float(row["value"]))
    if base not in trees:
        sys.exit(f"ab_summary.py: no {base}_<round>.csv in {folder} (trees found: {trees})")
    others = [t for t in trees if t != base]
    for case, impl, metric in sorted({k[:3] for k in runs}):
        ref = runs.get((case, impl, metric, base))
        if not ref or statistics.median(ref) == 0:
            continue
        b = statistics.median(ref)
        line = f"{case:40s} {impl:26s} {metric:20s} {base} {b:9.3f}"
        for t in others:
            v = runs.get((case, impl, metric, t))
            if v:
                line += f"  {t} {statistics.median(v):9.3f} ({statistics.median(v) / b:.3f})"
        print(line)


if __name__ == "__main__":
    main()
