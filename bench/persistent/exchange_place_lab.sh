#!/usr/bin/env bash
# Builds prnn_exchange_place_lab (build/gpu) and runs it (GPU machine, repo root) into OUT:
#   within_page.csv  K = 1368 (LSTM H = 1024 B = 4), every 128 B of one 2 MiB page
#   across_pages.csv K = 1368, 8 offsets 4 KiB apart in each of 64 pages
#   k1536.csv        K = 1536 (H = 1152 B = 4), every 128 B of the first 256 KiB
# and prints, per file, the spread of ns/step and, per address bit from 7 to 20, the mean step
# with the bit of the records' start set against clear. About 2 minutes.
# Usage: bench/persistent/exchange_place_lab.sh OUT
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${1:?usage: exchange_place_lab.sh OUT}
mkdir -p "$out"
source bench/persistent/build_gpu.sh
lab=$(build_lab "$out" prnn_exchange_place_lab) || exit 1
timeout 200 "$lab" 1368 128 128 16384 1 >"$out/within_page.csv"; echo "within_page rc $?"
timeout 60 "$lab" 1368 128 4096 8 64 >"$out/across_pages.csv"; echo "across_pages rc $?"
timeout 100 "$lab" 1536 128 128 2048 1 >"$out/k1536.csv"; echo "k1536 rc $?"
python3 - "$out" <<'PY'
import csv, statistics, sys
for name in ("within_page", "across_pages", "k1536"):
    rows = [r for r in csv.DictReader(l for l in open("%s/%s.csv" % (sys.argv[1], name))
                                       if not l.startswith("#"))]
    if not rows:
        print(name, "no rows"); continue
    t = [float(r["ns_per_step"]) for r in rows]
    errors = sum(int(r["error"]) for r in rows)
    q = statistics.quantiles(t, n=20)
    print("%s: %d places, ns/step min %.0f p5 %.0f median %.0f p95 %.0f max %.0f, %d with errors"
          % (name, len(t), min(t), q[0], statistics.median(t), q[-1], max(t), errors))
    addr = [int(r["page"]) * (2 << 20) + int(r["offset"]) for r in rows]
    for bit in range(7, 27):
        on = [x for a, x in zip(addr, t) if a >> bit & 1]
        off = [x for a, x in zip(addr, t) if not a >> bit & 1]
        if on and off:
            print("  bit %2d: set %.0f, clear %.0f (%+.1f %%)" % (bit, statistics.mean(on),
                  statistics.mean(off), 100 * (statistics.mean(on) / statistics.mean(off) - 1)))
PY
