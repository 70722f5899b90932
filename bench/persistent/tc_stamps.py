#!/usr/bin/env python3
"""Summarizes the tensor-core kernels' stamps (bench/persistent/patches/tc_forward_stamps.patch,
tc_backward_stamps.patch): mean SM cycles per step (backward) or batch chunk (forward) in each
phase, for the finishing warps (the first 8·NT·R threads: warps 0..2 at R = 9 and a chunk of 8,
0..4 at R = 9 and 16, 0..3 at R = 16 and 8) and the others, over every CTA that counted.
Usage: tc_stamps.py forward|backward FILE [FINISHING_WARPS]."""
import sys

from stamps_file import print_roles

PHASES = {
    "forward": (["loads + wait for the arrivals", "h staging + barrier", "products",
                 "barrier after the products", "finish (sums, cell, h)",
                 "arrival (barrier, fence, count)", "unit's stores"], "whole chunk"),
    "backward": (["wait for the arrivals", "sum of X over the CTAs", "cell's backward",
                  "dQ staging + barrier", "products + X stores", "arrival (barrier, fence, count)",
                  "unit's stores"], "whole step"),
}


def main():
    if len(sys.argv) not in (3, 4) or sys.argv[1] not in PHASES:
        sys.exit(__doc__)
    phases, whole = PHASES[sys.argv[1]]
    finishing = int(sys.argv[3]) if len(sys.argv) > 3 else 3
    print_roles(sys.argv[2], finishing, phases, whole)


if __name__ == "__main__":
    main()
