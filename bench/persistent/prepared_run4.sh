#!/usr/bin/env bash
# Three prepared experiments in one GPU call (bench/persistent/NOTES.md, "The gated warp-rows
# backward on tensor cores" and "Next for the 16-bit LSTM forward at B = 4"):
# forward_staging_lab.sh (the forward's staging in its form and transposed) into
# OUT/forward_staging.txt, gated_backward_mma.sh (the patch checked by the tests, then its A/B),
# then sigma_bb1.sh (the LSTM's BB = 1 backward with the IEEE σ). About 8 minutes.
# Usage, on the GPU machine from the repo root: bench/persistent/prepared_run4.sh OUT
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${1:?usage: prepared_run4.sh OUT}
mkdir -p "$out"
bench/persistent/forward_staging_lab.sh 2000 >"$out/forward_staging.txt" 2>&1
cat "$out/forward_staging.txt"
bench/persistent/gated_backward_mma.sh "$out"
bench/persistent/sigma_bb1.sh "$out"
