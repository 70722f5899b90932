#!/usr/bin/env python3
"""Summarizes the tensor-core forward's stamps (bench/persistent/patches/tc_forward_stamps.patch):
mean SM cycles per chunk in each phase, for the finishing warps (the first 8·NT·R threads: warps
0..2 at R = 9, B = 8; 0..4 at R = 9, B = 16) and the others, over every CTA that counted chunks.
Usage: tc_forward_stamps.py FILE [FINISHING_WARPS]."""
import sys

from stamps_file import print_roles

PHASES = ["loads + wait for the arrivals", "h staging + barrier", "products",
          "barrier after the products", "finish (sums, cell, h)", "arrival (barrier, fence, count)",
          "unit's stores"]


def main():
    path = sys.argv[1]
    finishing = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    print_roles(path, finishing, PHASES, "whole chunk")


if __name__ == "__main__":
    main()
