#!/usr/bin/env python3
"""Plot the CSVs of `prnn bench scan` and `prnn bench layers` as PNGs.

  python3 scripts/plot_scan.py --scan SCAN.csv --layers LAYERS.csv OUTDIR

scan_bandwidth.png: the bandwidth sweep, G elements/s against problem size (elements, log x) for
each channel count at batch 1, one panel per pass (fp32 forward, fp32 backward, bf16 forward),
with the pass's floor (copy bandwidth / bytes per element, from the same CSV) and the issue's
target as dashed lines.
layers_figure1.png: the paper's Figure 1, PLR-over-SLR training speedup against T (T·B fixed),
one line per layer.
layers_table2.png: the paper's Table 2, GILR-LSTM and cuDNN LSTM (best algorithm) training
throughput against T, one line per batch size.
Either input may be left out. Lines starting with '#' are ignored."""
import argparse
import csv
import os
from collections import defaultdict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (the backend must be chosen first)

# (metric, dtype, title, bytes per element, target G elem/s)
PANELS = [("fwd_throughput", "f32", "forward, fp32", 12, 300),
          ("bwd_throughput", "f32", "backward, fp32", 20, 170),
          ("fwd_throughput", "bf16", "forward, bf16 (fp32 math)", 6, 560)]


def read_rows(path):
    with open(path) as f:
        return list(csv.DictReader(line for line in f if not line.startswith("#")))


def parse_case(case):
    return dict(kv.split("=", 1) for kv in case.split(";") if "=" in kv)


def plot_scan(rows, out):
    copy = next((float(r["value"]) for r in rows if r["metric"] == "copy_bandwidth"), None)
    fig, axes = plt.subplots(1, len(PANELS), figsize=(5.2 * len(PANELS), 4.2))
    for ax, (metric, dtype, title, bytes_per, target) in zip(axes, PANELS):
        series = defaultdict(list)
        for r in rows:
            if r["metric"] != metric or r["impl"] != "prnn-plr":
                continue
            c = parse_case(r["case"])
            if c.get("dtype") != dtype or c.get("B") != "1":
                continue
            n = int(c["T"]) * int(c["C"])
            series[int(c["C"])].append((n, float(r["value"])))
        for C in sorted(series):
            pts = sorted(series[C])
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=f"C = {C}")
        if copy:
            ax.axhline(copy / bytes_per, color="black", linestyle="--", linewidth=1,
                       label=f"floor {copy / bytes_per:.0f} ({bytes_per} B/elem at copy bandwidth)")
        ax.axhline(target, color="red", linestyle=":", linewidth=1, label=f"target {target}")
        ax.set_xscale("log", base=2)
        ax.set_xlabel("elements (T · C, batch 1)")
        ax.set_ylabel("G elements / s")
        ax.set_title(title)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7, loc="lower right")
    fig.suptitle("prnn parallel linear recurrence (PLR) bandwidth sweep")
    fig.tight_layout()
    fig.savefig(out, dpi=120)
    plt.close(fig)


def plot_figure1(rows, out):
    series = defaultdict(list)
    for r in rows:
        if r["metric"] != "speedup_over_slr":
            continue
        c = parse_case(r["case"])
        label = c["layer"] + (f"({c['k']})" if "k" in c else "")
        if r["impl"].endswith("-tf32"):
            label += ", TF32 GEMMs"
        series[label].append((int(c["T"]), float(r["value"])))
    if not series:
        return False
    fig, ax = plt.subplots(figsize=(6, 4.2))
    for label in sorted(series):
        pts = sorted(series[label])
        ax.plot([p[0] for p in pts], [p[1] for p in pts], ":" if "TF32" in label else "-",
                marker="o", label=label)
    ax.axhline(1.0, color="black", linestyle="--", linewidth=1)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log", base=2)
    ax.set_xlabel("sequence length T (T · B = 65536)")
    ax.set_ylabel("training speedup of PLR over SLR")
    ax.set_title("The paper's Figure 1 on prnn layers")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out, dpi=120)
    plt.close(fig)
    return True


# Table 2's series: impl -> (line style, legend name).
TABLE2_IMPLS = {
    "prnn-gilr_lstm": ("-", "GILR-LSTM"),
    "prnn-gilr_lstm-tf32": (":", "GILR-LSTM, TF32 GEMMs"),
    "cudnn-best": ("--", "cuDNN LSTM"),
}


def plot_table2(rows, out):
    series = defaultdict(list)
    for r in rows:
        if r["metric"] != "train_throughput" or r["impl"] not in TABLE2_IMPLS:
            continue
        c = parse_case(r["case"])
        series[(r["impl"], int(c["B"]))].append((int(c["T"]), float(r["value"])))
    if not series:
        return False
    fig, ax = plt.subplots(figsize=(6.5, 4.5))
    batches = sorted({b for _, b in series})
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for n, b in enumerate(batches):
        color = colors[n % len(colors)]
        for impl, (style, name) in TABLE2_IMPLS.items():
            pts = sorted(series.get((impl, b), []))
            if pts:
                ax.plot([p[0] for p in pts], [p[1] for p in pts], style, marker="o", color=color,
                        label=f"{name}, B = {b}")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("sequence length T")
    ax.set_ylabel("training throughput (elements / s)")
    ax.set_title("The paper's Table 2: GILR-LSTM-256 vs cuDNN LSTM-256, input 32")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    fig.savefig(out, dpi=120)
    plt.close(fig)
    return True


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--scan")
    ap.add_argument("--layers")
    ap.add_argument("outdir")
    a = ap.parse_args()
    os.makedirs(a.outdir, exist_ok=True)
    if a.scan:
        out = os.path.join(a.outdir, "scan_bandwidth.png")
        plot_scan(read_rows(a.scan), out)
        print(out)
    if a.layers:
        out = os.path.join(a.outdir, "layers_figure1.png")
        rows = read_rows(a.layers)
        if plot_figure1(rows, out):
            print(out)
        out = os.path.join(a.outdir, "layers_table2.png")
        if plot_table2(rows, out):
            print(out)


if __name__ == "__main__":
    main()
