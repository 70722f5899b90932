#!/usr/bin/env bash
# The gated warp-rows backward's product on tensor cores (patches/gated_backward_mma.patch;
# bench/persistent/NOTES.md, "The gated warp-rows backward on tensor cores"), checked and timed in
# one GPU call (GPU machine, repo root): applies the patch, builds prnn_cli and rnn_gpu_test
# (build/gpu), runs the 16-bit and sanitizer-pick cases of rnn_gpu_test (the 16-bit GRU at
# B = 3..4 and H >= 793 now takes the new backward; its `_tcforward_` cases keep the FMA one),
# then alternates PRNN_PERSISTENT_TENSOR_CORES=1 (the new backward) and =forward (the FMA
# backward, the forward unchanged: the GRU's gated rows run both passes either way) three times
# over `prnn bench rnn` of the GRU in bf16 and f16 at H = 1024, 1152, B = 3, 4 into
# OUT/gbm_{1,forward}.csv, prints the medians, and takes the patch out again. About 4 minutes.
# Usage: bench/persistent/gated_backward_mma.sh OUT
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${1:?usage: gated_backward_mma.sh OUT}
mkdir -p "$out"
git apply bench/persistent/patches/gated_backward_mma.patch || exit 1
cmake --preset gpu >"$out/gbm_configure.log" 2>&1
if cmake --build --preset gpu -j "$(nproc)" --target prnn_cli rnn_gpu_test planner_test \
  >"$out/gbm_build.log" 2>&1; then
  rm -f "$out/gbm_build.log" "$out/gbm_configure.log"
  build/gpu/tests/planner_test >"$out/gbm_planner.log" 2>&1
  echo "planner_test rc $?"
  grep -E "^\[  (PASSED|FAILED) |FAILED  \]" "$out/gbm_planner.log"
  timeout 240 build/gpu/tests/rnn_gpu_test \
    --gtest_filter='*bf16*:*f16*:*BF16*:*F16*:RnnGpuSanitize.*' >"$out/gbm_tests.log" 2>&1
  echo "rnn_gpu_test rc $?"
  grep -E "^\[  (PASSED|FAILED) |FAILED  \]" "$out/gbm_tests.log" | head -30
  for r in 1 2 3; do
    for tc in 1 forward; do
      echo "# run $r" >>"$out/gbm_$tc.csv"
      PRNN_PERSISTENT_TENSOR_CORES=$tc timeout 120 build/gpu/tools/prnn/prnn bench \
        --out /tmp/gbm.csv rnn --sweep custom --cells gru --dtypes bf16,f16 \
        --hidden 1024,1152 --batch 3,4 --steps 256 --repeats 5 --impls prnn-persistent \
        --no-floor >/dev/null 2>&1 && cat /tmp/gbm.csv >>"$out/gbm_$tc.csv"
    done
  done
  python3 - "$out" <<'PY'
import csv, collections, statistics, sys
vals = collections.defaultdict(list)
for tc in ("1", "forward"):
    lines = [l for l in open(sys.argv[1] + "/gbm_%s.csv" % tc) if not l.startswith("#")]
    for row in csv.reader(lines):
        if len(row) < 6 or row[0] == "suite" or "us_per_step" not in row[3]:
            continue
        vals[(row[1], row[3], tc)].append(float(row[4]))
for case, metric in sorted({k[:2] for k in vals}):
    m = {k: statistics.median(vals[(case, metric, k)])
         for k in ("forward", "1") if vals.get((case, metric, k))}
    if len(m) == 2:
        print("%-44s %-20s FMA backward %6.3f  tensor cores %6.3f  (%+5.1f%%)"
              % (case, metric, m["forward"], m["1"], 100 * (m["1"] / m["forward"] - 1)))
PY
else
  tail -30 "$out/gbm_build.log"
fi
git apply -R bench/persistent/patches/gated_backward_mma.patch
