#!/usr/bin/env python3
"""Plot the CSV of `prnn bench rnn|lstm|gru` (suites rnn, lstm, gru; PyTorch rows of
scripts/bench_torch_rnn.py too, e.g. the CSV of scripts/bench-rnn-cells.sh) as PNGs.

  python3 scripts/plot_rnn.py CSV OUTDIR

For every group of cases that differ only in batch (cell, dtype, H, T and I fixed, at least two
batch sizes) it writes rnn_batch_<cell>_<dtype>_H<H>_T<T>.png in the style of the paper's Figure 3:
forward and forward+backward µs per step against batch, log x, one line per implementation.
For every group that differs only in T (cell, dtype, H, B and I fixed, at least two lengths) it
writes rnn_steps_<cell>_<dtype>_H<H>_B<B>.png in the style of Figure 4: the same against T.
The grid-sync floor (impl cuda-grid_sync, one barrier per step), when present, is a dashed line.
Status rows (not_supported, error) are skipped; header lines starting with '#' are ignored."""
import csv
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (the backend must be chosen first)
from matplotlib import ticker  # noqa: E402
import numpy as np  # noqa: E402

METRICS = [("fwd_us_per_step", "forward"), ("fwdbwd_us_per_step", "forward + backward")]
SUITES = ("rnn", "lstm", "gru")
FLOOR_IMPL = "cuda-grid_sync"
IMPL_ORDER = ["prnn-persistent", "prnn-gemm_per_step", "cudnn-standard", "cudnn-persist_static",
              "cudnn-persist_dynamic", "torch-lstm", "torch-gru", "torch-relu", "torch-tanh"]
MAX_LABELLED_TICKS = 12  # more points than this: label powers of two only


def read_rows(path):
    with open(path, newline="") as f:
        lines = [line for line in f if not line.startswith("#")]
    return list(csv.DictReader(lines))


def parse_case(case):
    return dict(kv.split("=", 1) for kv in case.split(";") if "=" in kv)


def impl_key(impl):
    return (IMPL_ORDER.index(impl) if impl in IMPL_ORDER else len(IMPL_ORDER), impl)


def collect(rows):
    """(case dict, impl, metric) -> value for the timing rows; the grid-sync floor in µs."""
    values, floor = {}, None
    for r in rows:
        if r.get("suite") not in SUITES:
            continue
        if r["impl"] == FLOOR_IMPL and r["metric"] == "us_per_sync":
            floor = float(r["value"])
            continue
        if r["metric"] not in dict(METRICS):
            continue
        c = parse_case(r["case"])
        if not all(k in c for k in ("cell", "dtype", "H", "B", "T")):
            continue
        c.setdefault("I", c["H"])
        values[(tuple(sorted(c.items())), r["impl"], r["metric"])] = float(r["value"])
    return values, floor


def groups(values, axis):
    """Cases grouped by every key but `axis`: {fixed keys: {axis value: case}}, 2+ points only."""
    out = {}
    for case, _, _ in values:
        c = dict(case)
        fixed = tuple((k, v) for k, v in case if k != axis)
        out.setdefault(fixed, {})[int(c[axis])] = case
    return {k: v for k, v in out.items() if len(v) >= 2}


def label_y(ax):
    """Labelled µs ticks on the log y axis whatever its range: within a decade (where a log axis
    has no major tick, or one) about 6 evenly spaced round values, else 1, 2, 5 per decade."""
    lo, hi = ax.get_ylim()
    if lo <= 0 or hi <= lo:
        return
    if hi / lo < 10:
        ticks = [t for t in ticker.MaxNLocator(nbins=6).tick_values(lo, hi) if lo <= t <= hi]
    else:
        ticks = [t for t in ticker.LogLocator(base=10, subs=(1.0, 2.0, 5.0)).tick_values(lo, hi)
                 if lo <= t <= hi]
    ax.set_yticks(ticks)
    ax.set_yticklabels([f"{t:g}" for t in ticks])
    ax.set_ylim(lo, hi)


def plot_group(values, floor, fixed, points, axis, path):
    xs = sorted(points)
    impls = sorted({impl for (case, impl, _) in values if case in points.values()}, key=impl_key)
    fig, axes = plt.subplots(1, len(METRICS), figsize=(6 * len(METRICS), 4.5), squeeze=False)
    for ax, (metric, title) in zip(axes[0], METRICS):
        for impl in impls:
            pts = [(x, values.get((points[x], impl, metric))) for x in xs]
            pts = [(x, v) for x, v in pts if v is not None and v > 0]
            if not pts:
                continue
            x, y = np.array(pts, dtype=float).T
            k = impl_key(impl)[0]
            ax.plot(x, y, marker="o", label=impl, color=f"C{k}" if k < len(IMPL_ORDER) else None)
        if floor is not None:
            ax.axhline(floor, color="gray", linestyle="--", label="grid sync (1 per step)")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ticks = xs if len(xs) <= MAX_LABELLED_TICKS else [x for x in xs if x & (x - 1) == 0]
        ax.set_xticks(ticks)
        ax.set_xticklabels([str(x) for x in ticks])
        ax.minorticks_off()
        label_y(ax)
        ax.set_xlabel("batch B" if axis == "B" else "sequence length T")
        ax.set_ylabel("µs per step")
        ax.set_title(title)
        ax.grid(True, which="both", alpha=0.3)
        if ax.has_data():
            ax.legend(fontsize=8)
    f = dict(fixed)
    shape = f"H={f['H']}" + (f", I={f['I']}" if f["I"] != f["H"] else "")
    shape += f", T={f['T']}" if axis == "B" else f", B={f['B']}"
    fig.suptitle(f"{f['cell']} {f['dtype']}, {shape}")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: python3 scripts/plot_rnn.py CSV OUTDIR")
    csv_path, outdir = sys.argv[1], sys.argv[2]
    values, floor = collect(read_rows(csv_path))
    if not values:
        sys.exit(f"{csv_path}: no rnn/lstm/gru fwd_us_per_step / fwdbwd_us_per_step rows")
    os.makedirs(outdir, exist_ok=True)
    written = []
    for axis, prefix, other in (("B", "rnn_batch", "T"), ("T", "rnn_steps", "B")):
        for fixed, points in sorted(groups(values, axis).items()):
            f = dict(fixed)
            name = f"{prefix}_{f['cell']}_{f['dtype']}_H{f['H']}_{other}{f[other]}"
            if f["I"] != f["H"]:
                name += f"_I{f['I']}"
            path = os.path.join(outdir, name + ".png")
            plot_group(values, floor, fixed, points, axis, path)
            written.append(path)
    if not written:
        sys.exit(f"{csv_path}: no group of cases varies in batch or in T; nothing to plot")
    for path in written:
        print(path)


if __name__ == "__main__":
    main()
