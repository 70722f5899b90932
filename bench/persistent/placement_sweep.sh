#!/usr/bin/env bash
# Where the persistent kernels' exchange sits, swept in one GPU call (GPU machine, repo root):
# applies patches/exchange_pad.patch (the exchange PRNN_LAB_EXCHANGE_PAD bytes into a longer
# buffer), builds prnn_cli (build/gpu), then for each pad runs `prnn bench rnn` over the issue-5
# shapes (LSTM / GRU bf16 H = 1024, 1152, 2048 B = 4; LSTM f32 H = 1024 B = 4) and issue 4's
# (ReLU f32 H = 1152, 2048 B = 4) into OUT/placement.csv (the pad, then the bench's row), twice
# in alternating order, takes the patch out and prints each shape's fastest, slowest and pad-0
# medians. Pads: 0..8 KiB in steps of 256 B, then 16 KiB..4 MiB in powers of two. About 7
# minutes.
# Usage: bench/persistent/placement_sweep.sh OUT
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${1:?usage: placement_sweep.sh OUT}
mkdir -p "$out"
patch=bench/persistent/patches/exchange_pad.patch
source bench/persistent/build_gpu.sh
git apply "$patch" || exit 1
build_gpu "$out" prnn_cli || { git apply -R "$patch"; exit 1; }
keep_cli pad
git apply -R "$patch"
pads=$(seq 0 256 8192)
for p in 14 15 16 17 18 19 20 21 22; do pads="$pads $((1 << p))"; done
echo "pad,suite,case,impl,metric,value,unit" >"$out/placement.csv"
for round in 1 2; do
  order=$pads
  [ "$round" = 2 ] && order=$(echo "$pads" | tr ' ' '\n' | tac)
  for pad in $order; do
    for cmd in "--cells lstm,gru --dtypes bf16 --hidden 1024,1152,2048" \
               "--cells lstm --dtypes f32 --hidden 1024 --math tf32" \
               "--cells relu --dtypes f32 --hidden 1152,2048 --math tf32"; do
      # shellcheck disable=SC2086
      PRNN_LAB_EXCHANGE_PAD=$pad timeout 60 /tmp/prnn_pad bench --out /tmp/pad.csv rnn \
        --sweep custom $cmd --batch 4 --steps 256 --repeats 3 --impls prnn-persistent \
        --no-floor >/dev/null 2>&1 && grep us_per_step /tmp/pad.csv | sed "s/^/$pad,/" >>"$out/placement.csv"
    done
  done
  echo "round $round done at $SECONDS s"
done
python3 - "$out/placement.csv" <<'PY'
import csv, collections, statistics, sys
v = collections.defaultdict(list)
for r in csv.DictReader(open(sys.argv[1])):
    v[(r["case"], r["impl"], r["metric"], int(r["pad"]))].append(float(r["value"]))
shapes = sorted({k[:3] for k in v})
for s in shapes:
    m = {k[3]: statistics.median(x) for k, x in v.items() if k[:3] == s}
    best, worst = min(m, key=m.get), max(m, key=m.get)
    print("%-44s %-22s %-20s pad0 %7.3f  best %7.3f (pad %d)  worst %7.3f (pad %d)"
          % (s + (m.get(0, float("nan")), m[best], best, m[worst], worst)))
PY
