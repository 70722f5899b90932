#!/usr/bin/env bash
# The two backward labs in one GPU call (bench/persistent/NOTES.md, "Sketch: the gated warp-rows
# backward's product on tensor cores"). On the GPU machine, from the repo root:
#   bench/persistent/prepared_run3.sh OUT
# backward_staging_lab.sh into OUT/backward_staging.txt, then tc_backward_stamps.sh (the
# tensor-core backward's step by phase) into OUT/tc_backward_stamps.txt. About 3 minutes on an
# H200, most of it building prnn_cli.
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${1:?usage: bench/persistent/prepared_run3.sh OUT}
mkdir -p "$out"
bench/persistent/backward_staging_lab.sh 2000 >"$out/backward_staging.txt" 2>&1
cat "$out/backward_staging.txt"
bench/persistent/tc_backward_stamps.sh "$out" >"$out/tc_backward_stamps.txt" 2>&1
cat "$out/tc_backward_stamps.txt"
