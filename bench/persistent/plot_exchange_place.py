#!/usr/bin/env python3
"""The exchange-place lab's step time against where the records start (prnn_exchange_place_lab,
exchange_place_lab.sh): one panel per CSV given, ns/step against the byte offset in its page
(pages after the first shifted by their index · 2 MiB), with the median and the fastest 16
places 256 B apart from the page's start that GemmRnn::place_exchange would time.

For a file of one page it also prints what GemmRnn::place_exchange's choice would be worth at
other spacings, as if the buffer could start at any of the file's offsets: for N places S bytes
apart, the mean over starts of the fastest of the N, and the slowest such fastest (each place
measured once in the lab, so the fastest of more places also gains from noise).

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


def print_spacings(path, rows):
    t = dict(rows)
    if any(a >= (2 << 20) for a in t):
        return
    span = max(t) + 128
    med = statistics.median(t.values())
    print(f"{path}: median {med:.0f} ns/step, fastest {min(t.values()):.0f}")
    for spacing in (128, 256, 1024, 2048, 4096, 8192, 16384):
        for n in (16, 32):
            if (n - 1) * spacing >= span:
                continue
            bests = [min(t[b + i * spacing] for i in range(n))
                     for b in range(0, span - (n - 1) * spacing, 128)
                     if all(b + i * spacing in t for i in range(n))]
            if bests:
                mean = statistics.mean(bests)
                print(f"  {n:2d} places {spacing:5d} B apart: fastest {mean:.0f} on average "
                      f"({100 * (mean / med - 1):+.1f} % against the median), {max(bests):.0f} "
                      "at worst")


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    out, files = sys.argv[1], sys.argv[2:]
    fig, axes = plt.subplots(len(files), 1, figsize=(10, 3.2 * len(files)), squeeze=False)
    for ax, path in zip(axes[:, 0], files):
        header, rows = read(path)
        if not rows:
            sys.exit(f"{path}: no rows without errors")
        print_spacings(path, rows)
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
