#!/usr/bin/env python3
"""Where a parallel-scan tile's time goes, from per-tile clock stamps.

With bench/scan/patches/tile_stamps.patch applied, `PRNN_SCAN_STAMPS=DIR prnn bench scan ...`
writes, for the third launch of each scan kernel, DIR/stamps_<pass>_<dtype>_T_B_C[_staged].bin:
a header of 8 int64 (tiles, lane blocks per batch entry, batch, time tiles, vector, threads per
row, staged, lookback levels), then per tile 16 uint64: the global timer at six points, the SM
clock at the same six, the SM, and three more SM clocks inside the lookback (thread 0's warp):
the top level folded, every upper level folded, level 0 folded. The points: 0 the tile starts,
1 thread 0's steps are folded (its loads arrived), 2 every warp's are (the CTA barrier), 3 the
tile's records are published, 4 the lookback is done (the carry is in shared memory), 5 the
outputs are issued. Stamps made before the lookback's three were added have zeros there, and
their lookback is not split.

    python3 bench/scan/stamps.py DIR

prints per launch: the phases (SM-clock deltas), tiles in flight, and which lookback record
each tile waited for last (level 0: the tiles before it in its block; level l >= 1: the
level-l record of a block, published by the block's last tile at its point 3), how long after
the tile's own lookback began that record was published, and what that wait would be if the
block before the tile's own were folded from its level-0 records (tile_prefix's PreviousBlock).
The global timer ticks in 32 ns or coarser steps: phases are taken from the SM clock.
"""
import glob
import os
import sys

import numpy as np

FANOUT_LOG2 = 5


def load(path):
    raw = np.fromfile(path, dtype=np.int64)
    head = dict(zip(("tiles", "lpb", "batch", "time_tiles", "vector", "tpr", "staged", "levels"),
                    (int(v) for v in raw[:8])))
    n = head["tiles"]
    a = raw[8:8 + n * 16].reshape(n, 16).astype(np.float64)
    return head, a[:, 0:6], a[:, 6:12], a[:, 12].astype(int), a[:, 13:16]


def lookback_split(c, lb, ghz):
    """The lookback of thread 0's warp by level, and the CTA barrier after it."""
    if not np.all(lb > 0):
        return
    rows = (("top level", c[:, 3], lb[:, 0]), ("other upper levels", lb[:, 0], lb[:, 1]),
            ("level 0", lb[:, 1], lb[:, 2]), ("barrier", lb[:, 2], c[:, 4]))
    for name, p, q in rows:
        v = (q - p) / ghz
        print(f"    {name:18s} median {np.median(v):6.0f} ns  p10 {np.percentile(v, 10):6.0f}  "
              f"p90 {np.percentile(v, 90):6.0f}")


def phases(head, g, c, sm, lb):
    life = g[:, 5] - g[:, 0]
    ghz = np.median((c[:, 5] - c[:, 0]) / np.maximum(life, 1))
    span = g[:, 5].max() - g[:, 0].min()
    print(f"  span {span / 1e3:.1f} us, SM clock {ghz:.2f} GHz, tiles in flight "
          f"{life.sum() / span:.0f} ({life.sum() / span / len(set(sm)):.2f} per SM)")
    rows = (("loads in (1st fold)", 0, 1), ("loads in (barrier)", 0, 2), ("publish", 2, 3),
            ("lookback", 3, 4), ("rescan + stores", 4, 5), ("tile", 0, 5))
    for name, p, q in rows:
        v = (c[:, q] - c[:, p]) / ghz
        print(f"  {name:20s} median {np.median(v):6.0f} ns  p10 {np.percentile(v, 10):6.0f}  "
              f"p90 {np.percentile(v, 90):6.0f}  mean share {v.mean() / life.mean() * 100:5.1f} %")
        if name == "lookback":
            lookback_split(c, lb, ghz)


def needed(head, g, t, previous_block):
    """Publication time of each record tile t's lookback reads, by level."""
    lanes = head["batch"] * head["lpb"]
    j, lb = divmod(t, lanes)
    tile = lambda jj: jj * lanes + lb
    n0 = j & 31
    at1 = j >> FANOUT_LOG2
    skip = previous_block and (at1 & 31) != 0
    first0 = j - n0 - (32 if skip else 0)
    out = {}
    if j > first0:
        out[0] = g[tile(np.arange(first0, j)), 2].max()
    for level in range(1, head["levels"]):
        at = j >> (FANOUT_LOG2 * level)
        n = (at & 31) - (1 if level == 1 and skip else 0)
        if n > 0:
            blocks = np.arange(at - (at & 31), at - (at & 31) + n)
            out[level] = g[tile((blocks + 1) * (32 ** level) - 1), 3].max()
    return out


def waits(head, g):
    if head["levels"] < 2:
        return
    last, now, what_if = [], [], []
    for t in range(0, head["tiles"], 5):
        start = g[t, 3]
        cur = needed(head, g, t, False)
        if not cur:
            continue
        level = max(cur, key=cur.get)
        alt = needed(head, g, t, True)
        last.append(level)
        now.append(max(cur[level] - start, 0))
        what_if.append(max(max(alt.values()) - start, 0) if alt else 0)
    last, now, what_if = np.array(last), np.array(now), np.array(what_if)
    shares = ", ".join(f"level {l} {np.mean(last == l) * 100:.0f} %" for l in range(head["levels"]))
    print(f"  record waited for last: {shares}; published {now.mean():.0f} ns (mean) after the "
          f"lookback began; with the previous block from level 0: {what_if.mean():.0f} ns")


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    for path in sorted(glob.glob(os.path.join(sys.argv[1], "stamps_*.bin"))):
        head, g, c, sm, lb = load(path)
        print(f"{os.path.basename(path)[7:-4]}: {head['tiles']} tiles ({head['time_tiles']} time "
              f"tiles x {head['batch'] * head['lpb']} lane blocks), vector {head['vector']}, "
              f"{head['tpr']} threads per row, staged {head['staged']}, {head['levels']} levels")
        phases(head, g, c, sm, lb)
        waits(head, g)


if __name__ == "__main__":
    main()
