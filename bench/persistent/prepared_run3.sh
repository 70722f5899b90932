#!/usr/bin/env bash
# The two backward labs in one GPU call (bench/persistent/NOTES.md, "Sketch: the gated warp-rows
# backward's product on tensor cores"). On the GPU machine, from the repo root:
#   bench/persistent/prepared_run3.sh OUT
# backward_staging_lab.sh into OUT/backward_staging.txt, then tc_backward_stamps.sh (the
# tensor-core backward's step by phase) into OUT/tc_backward_stamps.txt; then the gated
# tensor-core forward at B = 1, 2 (patches/gated_mma_all_batches.patch, built into build/gpu):
# `prnn bench rnn` of LSTM and GRU bf16 at H = 1024, 1152, B = 1, 2 with
# PRNN_PERSISTENT_GATED_MMA=1 and 0 alternated three times into OUT/mma_all_{1,0}.csv, medians
# printed. About 5 minutes on an H200, most of it building prnn_cli.
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${1:?usage: bench/persistent/prepared_run3.sh OUT}
mkdir -p "$out"
bench/persistent/backward_staging_lab.sh 2000 >"$out/backward_staging.txt" 2>&1
cat "$out/backward_staging.txt"
bench/persistent/tc_backward_stamps.sh "$out" >"$out/tc_backward_stamps.txt" 2>&1
cat "$out/tc_backward_stamps.txt"

# The gated tensor-core forward at every BB (3 records per CTA), against the FMAs, one binary.
git apply bench/persistent/patches/gated_mma_all_batches.patch || exit 1
if cmake --build --preset gpu -j "$(nproc)" --target prnn_cli >"$out/mma_all_build.log" 2>&1; then
  rm -f "$out/mma_all_build.log"
  for r in 1 2 3; do
    for knob in 1 0; do
      echo "# run $r" >>"$out/mma_all_$knob.csv"
      PRNN_PERSISTENT_GATED_MMA=$knob timeout 120 build/gpu/tools/prnn/prnn bench \
        --out /tmp/mma_all.csv rnn --sweep custom --cells lstm,gru --dtypes bf16 \
        --hidden 1024,1152 --batch 1,2 --steps 256 --repeats 5 --impls prnn-persistent \
        --no-floor >/dev/null 2>&1 && cat /tmp/mma_all.csv >>"$out/mma_all_$knob.csv"
    done
  done
  python3 - "$out" <<'PY'
import csv, collections, statistics, sys
vals = collections.defaultdict(list)
for knob in ("1", "0"):
    lines = [l for l in open(sys.argv[1] + "/mma_all_%s.csv" % knob) if not l.startswith("#")]
    for row in csv.reader(lines):
        if len(row) < 6 or row[0] == "suite" or "us_per_step" not in row[3]:
            continue
        vals[(row[1], row[3], knob)].append(float(row[4]))
for case, metric in sorted({k[:2] for k in vals}):
    m = {k: statistics.median(vals[(case, metric, k)])
         for k in ("0", "1") if vals.get((case, metric, k))}
    if len(m) == 2:
        print("%-44s %-20s FMA %6.3f  tensor cores %6.3f  (%+5.1f%%)"
              % (case, metric, m["0"], m["1"], 100 * (m["1"] / m["0"] - 1)))
PY
else
  tail -20 "$out/mma_all_build.log"
fi
git apply -R bench/persistent/patches/gated_mma_all_batches.patch
