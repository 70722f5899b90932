#!/usr/bin/env python3
"""Summarizes the gated warp-rows forward's stamps (bench/persistent/patches/gated_stamps.patch):
mean SM cycles per step in each phase, for the gate-0 warps (which finish the units) and the
other warps, over every CTA that counted steps. Usage: gated_stamps.py FILE [WARPS_PER_CTA]."""
import sys

from stamps_file import warp_slots

PHASES = ["wait for the records", "staging + barrier 1", "product", "barrier 2", "finish",
          "whole step"]
# The finish's parts (slots 8..11, where the patch has them).
FINISH_PARTS = ["gate sums", "cell", "publication", "unit's stores"]


def main():
    path = sys.argv[1]
    warps_used = int(sys.argv[2]) if len(sys.argv) > 2 else 12
    records = warps_used // 4 if warps_used % 4 == 0 else warps_used // 3  # Wr: warps / NG
    roles = {"gate-0 warps": [], "other warps": []}
    for w, v in warp_slots(path, warps_used):
        role = "gate-0 warps" if w < records else "other warps"
        roles[role].append([x / v[7] for x in v[:6]] + [x / v[7] for x in v[8:12]])
    for role, rows in roles.items():
        if not rows:
            continue
        print("%s (%d warps):" % (role, len(rows)))
        for i, name in enumerate(PHASES):
            if role == "other warps" and name == "finish":
                continue
            if role == "other warps" and name == "whole step":
                name = "to barrier 2"  # they go on to the next step's poll from there
            print("  %-22s %8.0f cycles" % (name, sum(r[i] for r in rows) / len(rows)))
            if role == "gate-0 warps" and name == "finish" and len(rows[0]) > 6:
                for j, part in enumerate(FINISH_PARTS):
                    print("    %-20s %8.0f cycles" % (part, sum(r[6 + j] for r in rows) / len(rows)))


if __name__ == "__main__":
    main()
