#!/usr/bin/env python3
"""Sums one training call's kernels by kind from an `ncu --metrics gpu__time_duration.sum --csv`
log of `prnn bench` (bench/results/h200/ncu_breakdown/README.md), in µs per step.

The bench's training calls are identical, so the kernels between two consecutive backward
recurrence kernels (the second included) are one call's: the first call's backward GEMMs and
conversions, then the next call's forward and its backward kernel.
Usage: summarize.py STEPS FILE..."""
import csv
import sys


def kernels(path):
    rows = [r for r in csv.reader(line for line in open(path) if line.startswith('"'))]
    head = rows[0]
    name, value, unit = (head.index(k) for k in ("Kernel Name", "Metric Value", "Metric Unit"))
    scale = {"ns": 1e-3, "usecond": 1.0, "us": 1.0, "msecond": 1e3, "ms": 1e3}
    return [(r[name], float(r[value].replace(",", "")) * scale[r[unit]]) for r in rows[1:]]


def kind(name, before_forward):
    if "backward_kernel" in name:
        return "recurrence backward"
    if "forward_kernel" in name:
        return "recurrence forward"
    if "convert_" in name:  # convert_kernel, convert_segments_kernel
        return "16-bit conversions"
    return "input GEMM" if before_forward else "backward GEMMs"


def main():
    steps = int(sys.argv[1])
    kinds = ("recurrence forward", "recurrence backward", "input GEMM", "backward GEMMs",
             "16-bit conversions")
    print("| case | " + " | ".join(kinds) + " | sum |")
    print("|---" * (len(kinds) + 2) + "|")
    for path in sys.argv[2:]:
        ks = kernels(path)
        back = [i for i, (n, _) in enumerate(ks) if "backward_kernel" in n]
        window = ks[back[-2] + 1:back[-1] + 1]
        fwd = next(i for i, (n, _) in enumerate(window) if "forward_kernel" in n)
        sums = dict.fromkeys(kinds, 0.0)
        for i, (n, us) in enumerate(window):
            # The input GEMM is the last kernel before the forward that is not a conversion.
            before = i < fwd and all("convert_" in m for m, _ in window[i + 1:fwd])
            sums[kind(n, before)] += us
        case = path.rsplit("/", 1)[-1].removeprefix("ncu_").removesuffix(".csv")
        print("| %s | " % case + " | ".join("%.2f" % (sums[k] / steps) for k in kinds) +
              " | %.2f |" % (sum(sums.values()) / steps))


if __name__ == "__main__":
    main()
