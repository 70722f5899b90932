#!/usr/bin/env python3
"""Summarizes the tensor-core backward's stamps (bench/persistent/patches/tc_backward_stamps.patch):
mean SM cycles per step in each phase, for the finishing warps (the first 8·NT·R threads: warps
0..2 at R = 9, NT = 1; 0..3 at R = 16) and the others, over every CTA that counted steps.
Usage: tc_backward_stamps.py FILE [FINISHING_WARPS]."""
import sys

from stamps_file import print_roles

PHASES = ["wait for the arrivals", "sum of X over the CTAs", "cell's backward",
          "dQ staging + barrier", "products + X stores", "arrival (barrier, fence, count)",
          "unit's stores"]


def main():
    path = sys.argv[1]
    finishing = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    print_roles(path, finishing, PHASES, "whole step")


if __name__ == "__main__":
    main()
