#!/usr/bin/env python3
"""Per-instruction warp stalls from Nsight Compute's source page.

Reads the CSV of `ncu --import REPORT --page source --print-source sass --csv` and prints, first,
the warp-state samples summed by stall reason over the kernel, then one line per SASS instruction:
the address's last five hex digits, warp instructions executed, warp-state samples, the
instruction, and its three most frequent stall reasons (samples per reason).

    sass_stalls.py SASS_CSV > sass_stalls.txt
"""
import csv
import sys


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: sass_stalls.py SASS_CSV")
    with open(sys.argv[1], newline="") as f:
        rows = list(csv.reader(f))
    header_at = next((i for i, r in enumerate(rows) if r and r[0] == "Address"), None)
    if header_at is None:
        sys.exit(f"sass_stalls.py: no 'Address' header row in {sys.argv[1]}: expected ncu's "
                 "--page source --print-source sass --csv output")
    header, data = rows[header_at], rows[header_at + 1:]
    col = {name: i for i, name in enumerate(header)}
    stalls = [h for h in header if h.startswith("stall_") and "Not Issued" not in h]
    for needed in ("Source", "Instructions Executed", "Warp Stall Sampling (All Samples)"):
        if needed not in col:
            sys.exit(f"sass_stalls.py: column '{needed}' missing in {sys.argv[1]}")

    def number(row, name):
        value = row[col[name]] if col[name] < len(row) else ""
        return int(value) if value.strip() else 0

    totals = {s: sum(number(r, s) for r in data) for s in stalls}
    all_samples = sum(totals.values())
    print(f"# warp-state samples: {all_samples}")
    for name, value in sorted(totals.items(), key=lambda kv: -kv[1]):
        if value:
            print(f"# {name[6:]:18s} {value:8d} {100.0 * value / all_samples:5.1f} %")
    for r in data:
        counts = sorted(((number(r, s), s[6:]) for s in stalls), reverse=True)[:3]
        top = " ".join(f"{name}={n}" for n, name in counts if n)
        print(f"{r[0][-5:]} {number(r, 'Instructions Executed'):7d} "
              f"{number(r, 'Warp Stall Sampling (All Samples)'):5d} "
              f"{r[col['Source']].strip()[:70]:70s} {top}")


if __name__ == "__main__":
    main()
