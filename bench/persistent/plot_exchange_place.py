#!/usr/bin/env python3
"""The exchange-place lab's step time against where the records start (prnn_exchange_place_lab,
exchange_place_lab.sh): one panel per CSV given, ns/step against the byte offset in its page
(pages after the first shifted by their index · 2 MiB), with the median and the fastest 16
places 256 B apart from the page's start that GemmRnn::place_exchange would time.

  bench/persistent/plot_exchange_place.py OUT.png FILE.csv...
"""
import csv
import statistics
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def read(path):
    header = ""
    rows = []
    with open(path) as f:
        lines = []
        for line in f:
            if line.startswith("#"):
                header = line[1:].strip()
            else:
                lines.append(line)
    for r in csv.DictReader(lines):
        if int(r["error"]) == 0:
            rows.append((int(r["page"]) * (2 << 20) + int(r["offset"]), float(r["ns_per_step"])))
    return header, rows


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    out, files = sys.argv[1], sys.argv[2:]
    fig, axes = plt.subplots(len(files), 1, figsize=(10, 3.2 * len(files)), squeeze=False)
    for ax, path in zip(axes[:, 0], files):
        header, rows = read(path)
        if not rows:
            sys.exit(f"{path}: no rows without errors")
        x = [a / 1024 for a, _ in rows]
        y = [t for _, t in rows]
        ax.plot(x, y, ".", markersize=1.5, color="tab:blue")
        ax.axhline(statistics.median(y), color="gray", linewidth=0.8, label="median")
        first16 = [t for a, t in rows if a < 16 * 256 and a % 256 == 0]
        if len(first16) == 16:  # the lab timed every one of them
            ax.axhline(min(first16), color="tab:green", linewidth=0.8,
                       label="fastest of the 16 places 256 B apart at the start")
        ax.set_xlabel("start of the records (KiB past the buffer's start)")
        ax.set_ylabel("ns per step")
        ax.set_title(f"{path.rsplit('/', 1)[-1]}: {header}", fontsize=9)
        ax.legend(fontsize=8, loc="upper right")
    fig.tight_layout()
    fig.savefig(out, dpi=120)


if __name__ == "__main__":
    main()
