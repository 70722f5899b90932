#!/usr/bin/env bash
# The exchange's place chosen at construction (patches/exchange_places.patch), checked and timed
# in one GPU call (GPU machine, repo root): applies the patch, builds prnn_cli and rnn_gpu_test
# (build/gpu) and runs all of rnn_gpu_test while it also builds the patch with
# patches/weights_h0_fold.patch on top (the fold's larger output buffer moves the exchange),
# takes both out, then alternates three times over `prnn bench rnn` of the issue-5 shapes (and
# LSTM bf16 H = 1024 B = 3, ReLU f32 H = 1152, 2048 B = 4): each build with
# PRNN_PERSISTENT_EXCHANGE_PLACES=1 (the buffer's start, as the tree) and unset (16 places
# timed). OUT/ab_<build>_<places>.csv and the medians (µs/step; setup_ms: the Rnn's
# construction, which timing the places lengthens).
# About 6 minutes.
# Usage: bench/persistent/exchange_places_ab.sh OUT
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${1:?usage: exchange_places_ab.sh OUT}
mkdir -p "$out"
places=bench/persistent/patches/exchange_places.patch
fold=bench/persistent/patches/weights_h0_fold.patch
source bench/persistent/build_gpu.sh
build() {  # name targets...: builds and keeps the bench as /tmp/prnn_<name>
  local name=$1
  shift
  build_gpu "$out" prnn_cli "$@" && keep_cli "$name"
}
git apply "$places" || exit 1
build places rnn_gpu_test || { git apply -R "$places"; exit 1; }
cp build/gpu/tests/rnn_gpu_test /tmp/rnn_gpu_test_places
(timeout 280 /tmp/rnn_gpu_test_places >"$out/tests.log" 2>&1; echo "rnn_gpu_test rc $?" >>"$out/tests.log") &
tests=$!
git apply "$fold" && build fold
git apply -R "$fold"
git apply -R "$places"
wait $tests
tail -1 "$out/tests.log"
grep -E "^\[  (PASSED|FAILED) |FAILED  \]" "$out/tests.log" | head -20
for r in 1 2 3; do
  for v in places fold; do
    for n in 1 16; do
      knob=(env PRNN_PERSISTENT_EXCHANGE_PLACES=$n)
      [ "$n" = 16 ] && knob=(env -u PRNN_PERSISTENT_EXCHANGE_PLACES)
      echo "# run $r" >>"$out/ab_${v}_$n.csv"
      "${knob[@]}" timeout 120 "/tmp/prnn_$v" bench --out /tmp/places_ab.csv rnn --sweep custom \
        --cells lstm,gru --dtypes bf16 --hidden 1024,1152,2048 --batch 4 --steps 256 --repeats 5 \
        --impls prnn-persistent --no-floor >/dev/null 2>&1 && cat /tmp/places_ab.csv >>"$out/ab_${v}_$n.csv"
      "${knob[@]}" timeout 120 "/tmp/prnn_$v" bench --out /tmp/places_ab.csv rnn --sweep custom \
        --cells lstm --dtypes f32,bf16 --hidden 1024 --batch 3,16 --steps 256 --repeats 5 \
        --impls prnn-persistent --math tf32 --no-floor >/dev/null 2>&1 &&
        cat /tmp/places_ab.csv >>"$out/ab_${v}_$n.csv"
      "${knob[@]}" timeout 120 "/tmp/prnn_$v" bench --out /tmp/places_ab.csv rnn --sweep custom \
        --cells relu --dtypes f32 --hidden 1152,2048 --batch 4 --steps 256 --repeats 5 \
        --impls prnn-persistent --math tf32 --no-floor >/dev/null 2>&1 &&
        cat /tmp/places_ab.csv >>"$out/ab_${v}_$n.csv"
    done
  done
done
python3 - "$out" <<'PY' | tee "$out/medians.txt"
import csv, collections, statistics, sys
names = ("places_1", "places_16", "fold_1", "fold_16")
vals = collections.defaultdict(list)
for v in names:
    for row in csv.reader(l for l in open(sys.argv[1] + "/ab_%s.csv" % v) if not l.startswith("#")):
        if len(row) < 6 or row[0] == "suite" or not ("us_per_step" in row[3] or row[3] == "setup_ms"):
            continue
        vals[(row[1].replace(";T=256", "") + row[2].replace("prnn-persistent", ""), row[3][:6], v)].append(float(row[4]))
for key in sorted({k[:2] for k in vals}):
    m = {v: statistics.median(vals[key + (v,)]) for v in names if vals.get(key + (v,))}
    if names[0] not in m:
        continue
    print("%-32s %-6s %s" % (key + (" ".join("%s %6.3f(%+4.1f)" % (v, m[v], 100 * (m[v] / m[names[0]] - 1)) for v in names if v in m),)))
PY
