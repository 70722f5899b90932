#!/usr/bin/env bash
# The persistent lab's prepared run in one GPU call (bench/persistent/NOTES.md, "The gated warp
# rows' product on tensor cores"). On the GPU machine, from the repo root:
#   bench/persistent/prepared_run.sh OUT
# mma_issue_lab.sh (a warp's mma.sync in the gated product's shape, wgmma beside it) into
# OUT/mma_issue.txt, then gated_stamps.sh (the gated forward's step by phase, both products)
# into OUT/gated_stamps.txt. About 4 minutes on an H200, most of it building prnn_cli.
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${1:?usage: bench/persistent/prepared_run.sh OUT}
mkdir -p "$out"
bench/persistent/mma_issue_lab.sh 2000 >"$out/mma_issue.txt" 2>&1
cat "$out/mma_issue.txt"
bench/persistent/gated_stamps.sh "$out" >"$out/gated_stamps.txt" 2>&1
cat "$out/gated_stamps.txt"
