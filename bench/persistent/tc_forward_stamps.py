#!/usr/bin/env python3
"""Summarizes the tensor-core forward's stamps (bench/persistent/patches/tc_forward_stamps.patch):
mean SM cycles per chunk in each phase, for the finishing warps (the first 8·NT·R threads: warps
0..2 at R = 9, B = 8; 0..4 at R = 9, B = 16) and the others, over every CTA that counted chunks.
Usage: tc_forward_stamps.py FILE [FINISHING_WARPS]."""
import sys

from stamps_file import warp_slots

PHASES = ["loads + wait for the arrivals", "h staging + barrier", "products",
          "barrier after the products", "finish (sums, cell, h)", "arrival (barrier, fence, count)",
          "unit's stores"]


def main():
    path = sys.argv[1]
    finishing = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    roles = {"finishing warps": [], "other warps": []}
    for w, v in warp_slots(path):
        role = "finishing warps" if w < finishing else "other warps"
        roles[role].append([x / v[7] for x in v[:7]] + [v[8] / v[7]])
    for role, rows in roles.items():
        if not rows:
            continue
        print("%s (%d warps):" % (role, len(rows)))
        for i, name in enumerate(PHASES + ["whole chunk"]):
            print("  %-34s %8.0f cycles" % (name, sum(r[i] for r in rows) / len(rows)))


if __name__ == "__main__":
    main()
