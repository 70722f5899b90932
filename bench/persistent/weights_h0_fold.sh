#!/usr/bin/env bash
# dW_hh's h0 term folded into its GEMM (patches/weights_h0_fold.patch; bench/persistent/NOTES.md,
# "Where a 16-bit training step goes on the H200"), checked and timed in one GPU call (GPU
# machine, repo root): applies the patch, builds prnn_cli and rnn_gpu_test (build/gpu), runs all
# of rnn_gpu_test, then alternates the patched and the tree's prnn_cli three times over `prnn
# bench rnn` of the LSTM and GRU in bf16 at H = 1152, 2048 B = 4, the LSTM f32 at H = 1024 B = 4
# and bf16 at H = 1024 B = 16 into OUT/h0fold_{fold,tree}.csv, prints the medians and takes the
# patch out again. About 6 minutes. Usage: bench/persistent/weights_h0_fold.sh OUT
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${1:?usage: weights_h0_fold.sh OUT}
mkdir -p "$out"
cmake --preset gpu >/dev/null 2>&1
build() {  # name: builds prnn_cli (and rnn_gpu_test) and keeps the bench as /tmp/prnn_<name>
  cmake --build --preset gpu -j "$(nproc)" --target prnn_cli rnn_gpu_test >"$out/h0fold_build.log" 2>&1 ||
    { tail -30 "$out/h0fold_build.log"; return 1; }
  cp build/gpu/tools/prnn/prnn "/tmp/prnn_$1"
}
git apply bench/persistent/patches/weights_h0_fold.patch || exit 1
if build fold; then
  timeout 300 build/gpu/tests/rnn_gpu_test >"$out/h0fold_tests.log" 2>&1
  echo "rnn_gpu_test rc $?"
  grep -E "^\[  (PASSED|FAILED) |FAILED  \]" "$out/h0fold_tests.log" | head -30
fi
git apply -R bench/persistent/patches/weights_h0_fold.patch
# The tree's sources are older than the patched objects: touch them so that ninja rebuilds.
touch src/gemm_rnn/gemm_rnn.cpp src/gemm_rnn/gemm_rnn.h tests/rnn/rnn_gpu_test.cpp
build tree || exit 1
rm -f "$out/h0fold_build.log"
for r in 1 2 3; do
  for v in fold tree; do
    echo "# run $r" >>"$out/h0fold_$v.csv"
    timeout 120 "/tmp/prnn_$v" bench --out /tmp/h0fold.csv rnn --sweep custom --cells lstm,gru \
      --dtypes bf16 --hidden 1152,2048 --batch 4 --steps 256 --repeats 5 --impls prnn-persistent \
      --no-floor >/dev/null 2>&1 && cat /tmp/h0fold.csv >>"$out/h0fold_$v.csv"
    timeout 120 "/tmp/prnn_$v" bench --out /tmp/h0fold.csv rnn --sweep custom --cells lstm \
      --dtypes f32,bf16 --hidden 1024 --batch 4,16 --steps 256 --repeats 5 \
      --impls prnn-persistent --no-floor >/dev/null 2>&1 && cat /tmp/h0fold.csv >>"$out/h0fold_$v.csv"
  done
done
python3 - "$out" <<'PY'
import csv, collections, statistics, sys
vals = collections.defaultdict(list)
for v in ("fold", "tree"):
    for row in csv.reader(l for l in open(sys.argv[1] + "/h0fold_%s.csv" % v) if not l.startswith("#")):
        if len(row) < 6 or row[0] == "suite" or "us_per_step" not in row[3]:
            continue
        vals[(row[1], row[2], row[3], v)].append(float(row[4]))
for key in sorted({k[:3] for k in vals}):
    m = {v: statistics.median(vals[key + (v,)]) for v in ("fold", "tree") if vals.get(key + (v,))}
    if len(m) == 2:
        print("%-40s %-24s %-20s tree %7.3f  fold %7.3f (%+5.1f%%)" % (key + (m["tree"], m["fold"], 100 * (m["fold"] / m["tree"] - 1))))
PY
