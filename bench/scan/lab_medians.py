#!/usr/bin/env python3
"""Medians of a scan lab run's rounds: one line per (case, metric), each variant's median over
its rounds and its ratio to the baseline variant's.

  python3 bench/scan/lab_medians.py LAB.csv [BASELINE]

LAB.csv is what bench/scan/lab.sh prints (`variant,round,<prnn bench scan CSV row>`); BASELINE
is the variant the ratios are to (default: the first one in the file)."""
import collections
import statistics
import sys


def main():
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__)
    values = collections.defaultdict(list)  # (variant, case, metric) -> values over rounds
    variants, keys = [], []
    with open(sys.argv[1]) as f:
        for line in f:
            fields = line.strip().split(",")
            # variant, round, suite, case, impl, metric, value, unit
            if len(fields) != 8:
                continue
            variant, case, metric, value = fields[0], fields[3], fields[5], float(fields[6])
            if variant not in variants:
                variants.append(variant)
            if (case, metric) not in keys:
                keys.append((case, metric))
            values[(variant, case, metric)].append(value)
    if not variants:
        sys.exit(f"{sys.argv[1]}: no lab rows")
    base = sys.argv[2] if len(sys.argv) == 3 else variants[0]
    if base not in variants:
        sys.exit(f"baseline {base!r} is not among the variants {variants}")
    others = [v for v in variants if v != base]
    print("case,metric,rounds," + ",".join([base] + [f"{v},{v}/{base}" for v in others]))
    for case, metric in keys:
        ref = values.get((base, case, metric))
        if not ref:
            continue
        ref_median = statistics.median(ref)
        cells = [f"{ref_median:.1f}"]
        for v in others:
            got = values.get((v, case, metric))
            if got:
                m = statistics.median(got)
                cells += [f"{m:.1f}", f"{m / ref_median:.3f}"]
            else:
                cells += ["", ""]
        print(f"{case},{metric},{len(ref)}," + ",".join(cells))


if __name__ == "__main__":
    main()
