#!/usr/bin/env python3
"""A kernel's SASS cut into straight runs, from sass_stalls.py's output.

Reads `sass_stalls.txt` (sass_stalls.py) and prints one line per segment: a run of consecutive
instructions executed equally often (one basic block or a chain of them). Per segment: the first
address, the warp instructions each of its instructions executed, its instruction count, its
warp-state samples (and their share of the kernel's), the instructions a warp issues there per
step (count × executions / PER_STEP), and its most frequent opcodes. PER_STEP is the number of
executions that means "once a step for every warp": warps × steps (e.g. 684 warps × 64 steps =
43776). Segments executed fewer than MIN_EXEC times and holding fewer than MIN_SAMPLES samples
(defaults PER_STEP / 20 and 20) are left out (the prologue, the epilogue, rare paths).

    sass_segments.py SASS_STALLS_TXT PER_STEP [MIN_EXEC [MIN_SAMPLES]]
"""
import collections
import sys


def opcode(instruction):
    words = instruction.split()
    if words and words[0].startswith("@"):
        words = words[1:]
    return words[0].split(".")[0] if words else "?"


def main():
    if len(sys.argv) not in (3, 4, 5):
        sys.exit("usage: sass_segments.py SASS_STALLS_TXT PER_STEP [MIN_EXEC [MIN_SAMPLES]]")
    per_step = int(sys.argv[2])
    if per_step <= 0:
        sys.exit(f"sass_segments.py: PER_STEP must be positive, got {per_step}")
    min_exec = int(sys.argv[3]) if len(sys.argv) > 3 else per_step // 20
    min_samples = int(sys.argv[4]) if len(sys.argv) > 4 else 20
    rows = []  # (address, executions, samples, instruction)
    with open(sys.argv[1]) as f:
        for line in f:
            if line.startswith("#"):
                continue
            words = line.split()
            if len(words) < 4:
                continue
            try:
                rows.append((words[0], int(words[1]), int(words[2]), " ".join(words[3:])))
            except ValueError:
                sys.exit(f"sass_segments.py: not a sass_stalls.py line: {line.rstrip()!r}")
    if not rows:
        sys.exit(f"sass_segments.py: no instruction lines in {sys.argv[1]}")
    total = sum(r[2] for r in rows) or 1
    segments = []
    for row in rows:
        if segments and segments[-1][0][1] == row[1]:
            segments[-1].append(row)
        else:
            segments.append([row])
    print(f"# {len(rows)} instructions, {total} samples; per step = {per_step} executions")
    print("# address   execs  instrs  samples      %  per-step  opcodes")
    for seg in segments:
        execs, samples = seg[0][1], sum(r[2] for r in seg)
        if execs < min_exec and samples < min_samples:
            continue
        ops = collections.Counter(opcode(r[3]) for r in seg).most_common(6)
        print(f"{seg[0][0]:>9s} {execs:7d} {len(seg):7d} {samples:8d} {100.0 * samples / total:6.1f}"
              f" {len(seg) * execs / per_step:9.1f}  " + " ".join(f"{o}:{n}" for o, n in ops))


if __name__ == "__main__":
    main()
