#!/usr/bin/env bash
# Two prepared experiments in one GPU call (bench/persistent/NOTES.md, "The gated warp-rows
# backward on tensor cores"): gated_backward_mma.sh (the patch checked by the tests, then its
# A/B), then sigma_bb1.sh (the LSTM's BB = 1 backward with the IEEE σ). About 8 minutes.
# Usage, on the GPU machine from the repo root: bench/persistent/prepared_run4.sh OUT
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${1:?usage: prepared_run4.sh OUT}
bench/persistent/gated_backward_mma.sh "$out"
bench/persistent/sigma_bb1.sh "$out"
