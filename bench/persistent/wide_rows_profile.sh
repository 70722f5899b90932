#!/usr/bin/env bash
# Where the wide warp-rows step stalls (bench/persistent/NOTES.md, "Warp rows past H = 1152"): one
# launch of a wide_rows_lab case under ncu, with the warp-state, scheduler, instruction and
# memory-workload statistics and the per-instruction stall samples of its SASS.
# On the GPU machine, from the repo root:
#   bench/persistent/wide_rows_profile.sh OUT [CASE [B [T]]]
# CASE: the lab's instantiation, 0-based in its main() (default 3: H = 2048, 16 + 6 slots, BB = 4,
# the library's wide shape); B: 1, 2 or 4 (default 4); T: steps (default 64; the lab's fp64 check
# on the CPU takes most of a run at H = 2048). Builds prnn_wide_rows_lab and its LAB_ROLLED twin
# with the gpu preset (build/gpu, or $BUILD), runs the case unprofiled with both, alternating, two
# rounds (µs/step and the error against the fp64 reference), then profiles the default build's
# first (checked) launch (ncu_stalls.sh), and writes into OUT:
#   lab.txt          the unprofiled runs
#   profile.ncu-rep  the report (ncu --import profile.ncu-rep --page details, or Nsight Compute)
#   details.txt      the sections as text
#   sass.csv         per SASS instruction: executions and stall samples by reason
#   sass_stalls.txt  the same reduced by sass_stalls.py: stall totals, then a line per instruction
set -euo pipefail
out=${1:?usage: wide_rows_profile.sh OUT [CASE [B [T]]]}
case_index=${2:-3}
batch=${3:-4}
steps=${4:-64}
build=${BUILD:-build/gpu}
mkdir -p "$out"
cmake --preset gpu >"$out/configure.log" 2>&1
cmake --build "$build" --target prnn_wide_rows_lab prnn_wide_rows_lab_rolled -j "$(nproc)" \
  >"$out/build.log" 2>&1
lab=$(find "$build" -name prnn_wide_rows_lab -type f -perm -u+x | head -1)
rolled=$(find "$build" -name prnn_wide_rows_lab_rolled -type f -perm -u+x | head -1)
for round in 1 2; do
  echo "round $round, default:"
  "$lab" "$steps" "$batch" "$case_index"
  echo "round $round, LAB_ROLLED=1:"
  "$rolled" "$steps" "$batch" "$case_index"
done | tee "$out/lab.txt"
"$(dirname "$0")/ncu_stalls.sh" "$out" wide_rows_kernel 0 "$lab" "$steps" "$batch" "$case_index"
grep -E "Stall|Warp Cycles|Issued|Eligible|Active Warps" "$out/details.txt" | head -40
