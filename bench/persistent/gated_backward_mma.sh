#!/usr/bin/env bash
# The gated warp-rows backward's product on tensor cores (patches/gated_backward_mma.patch;
# bench/persistent/NOTES.md, "The gated warp-rows backward on tensor cores"), checked and timed in
# one GPU call (GPU machine, repo root): applies the patch, builds prnn_cli, rnn_gpu_test and
# planner_test (build/gpu), runs planner_test, the 16-bit, sanitizer-pick and safety cases of
# rnn_gpu_test (the 16-bit GRU at B = 3..4 and H >= 793 takes the new backward; with
# PRNN_PERSISTENT_TENSOR_CORES=forward, the `_tcforward_` cases, the 16-bit LSTM there too) and
# racecheck and synccheck over the new kernel's sanitizer case, then
# alternates four knob settings three times over `prnn bench rnn` of the GRU and LSTM in bf16 and
# f16 at H = 1024, 1152, B = 3, 4 into OUT/gbm_<setting>.csv:
#   default   the patch's choice: the backward of the GRU and of the LSTM at B = 3 on the new
#             kernel, of the LSTM at B = 4 on the tensor-core kernel;
#   fma       PRNN_PERSISTENT_GATED_MMA=forward: the gated FMA backward where default has the new
#             one (the tree's);
#   gated     PRNN_PERSISTENT_TENSOR_CORES=forward: the LSTM's B = 4 backward on the new kernel;
#   gatedfma  both knobs: the LSTM's B = 4 backward on the gated FMA kernel;
# prints the medians (each against fma for the GRU, against default for the LSTM) and
# takes the patch out again. About 5 minutes. Usage: bench/persistent/gated_backward_mma.sh OUT
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
    --gtest_filter='*bf16*:*f16*:*BF16*:*F16*:RnnGpuSanitize.*:RnnGpuSafety.*' >"$out/gbm_tests.log" 2>&1
  echo "rnn_gpu_test rc $?"
  grep -E "^\[  (PASSED|FAILED) |FAILED  \]" "$out/gbm_tests.log" | head -30
  # The new kernel's sanitizer case (GRU bf16 B = 4 H = 1000) under racecheck and synccheck.
  for tool in racecheck synccheck; do
    PRNN_PERSISTENT_TIMEOUT_MS=60000 timeout 300 scripts/sanitize.sh $tool \
      build/gpu/tests/rnn_gpu_test 'Sanitize/*gru_T4_B4_I5_H1000*' >"$out/gbm_$tool.log" 2>&1
    echo "$tool rc $?"
    tail -3 "$out/gbm_$tool.log"
  done
  for r in 1 2 3; do
    for v in default fma gated gatedfma; do
      case $v in
        default) env=() ;;
        fma) env=(PRNN_PERSISTENT_GATED_MMA=forward) ;;
        gated) env=(PRNN_PERSISTENT_TENSOR_CORES=forward) ;;
        gatedfma) env=(PRNN_PERSISTENT_TENSOR_CORES=forward PRNN_PERSISTENT_GATED_MMA=forward) ;;
      esac
      echo "# run $r" >>"$out/gbm_$v.csv"
      env "${env[@]}" timeout 120 build/gpu/tools/prnn/prnn bench --out /tmp/gbm.csv rnn \
        --sweep custom --cells gru,lstm --dtypes bf16,f16 --hidden 1024,1152 --batch 3,4 \
        --steps 256 --repeats 5 --impls prnn-persistent --no-floor >/dev/null 2>&1 &&
        cat /tmp/gbm.csv >>"$out/gbm_$v.csv"
    done
  done
  python3 - "$out" <<'PY'
import csv, collections, statistics, sys
vals = collections.defaultdict(list)
names = ("default", "fma", "gated", "gatedfma")
for v in names:
    for row in csv.reader(l for l in open(sys.argv[1] + "/gbm_%s.csv" % v) if not l.startswith("#")):
        if len(row) < 6 or row[0] == "suite" or "us_per_step" not in row[3]:
            continue
        vals[(row[1], row[3], v)].append(float(row[4]))
for case, metric in sorted({k[:2] for k in vals}):
    m = {v: statistics.median(vals[(case, metric, v)]) for v in names if vals.get((case, metric, v))}
    base = "fma" if "gru" in case else "default"
    if base not in m:
        continue
    cells = "  ".join("%s %6.3f (%+5.1f%%)" % (v, m[v], 100 * (m[v] / m[base] - 1))
                      for v in names if v in m)
    print("%-40s %-20s %s" % (case, metric, cells))
PY
else
  tail -30 "$out/gbm_build.log"
fi
git apply -R bench/persistent/patches/gated_backward_mma.patch
