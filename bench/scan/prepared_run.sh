#!/usr/bin/env bash
# The scan lab's prepared variants in one GPU call (bench/scan/NOTES.md, "Prepared for the next
# device time"). On the GPU machine, from the repo root:
#   bench/scan/prepared_run.sh OUT
# builds prnn_cli (build/gpu), times the tree against the bulk-store and poll-backoff patches
# (three alternated rounds), stamps the tree with the per-level lookback stamps, and writes to
# OUT: lab.csv (bench/scan/lab.sh rows), medians.txt (lab_medians.py against the tree) and
# stamps.txt (stamps.py per launch). About 5 minutes on an H200.
set -euo pipefail
out=${1:?usage: bench/scan/prepared_run.sh OUT}
mkdir -p "$out"
cmake --preset gpu >"$out/configure.log" 2>&1
cmake --build --preset gpu -j "$(nproc)" --target prnn_cli >"$out/build.log" 2>&1
tmp=$(mktemp -d)
sed 's/kStagedBulkStore = ElemBytes == 2 \&\& TPR == 8;/kStagedBulkStore = ElemBytes == 2;/' \
  bench/scan/patches/staged_bulk_store.patch >"$tmp/bulk_all.patch"
sed 's/kPollBackoffNs = 100;/kPollBackoffNs = 30;/' bench/scan/patches/poll_backoff.patch \
  >"$tmp/poll_30.patch"
SHAPES=${SHAPES:-"65536:1:1024 8192:1:8192 65536:8:1536 524288:1:128 2097152:1:32 4194304:1:4"} \
ROUNDS=${ROUNDS:-3} bench/scan/lab.sh base '' \
  bulk bench/scan/patches/staged_bulk_store.patch bulkall "$tmp/bulk_all.patch" \
  poll100 bench/scan/patches/poll_backoff.patch poll30 "$tmp/poll_30.patch" \
  stamps bench/scan/patches/tile_stamps.patch >"$out/lab.csv"
python3 bench/scan/lab_medians.py "$out/lab.csv" base >"$out/medians.txt"
for s in 2097152:1:32 4194304:1:4 524288:1:128 65536:1:1024 65536:8:1536; do
  IFS=: read -r T B C <<<"$s"
  mkdir -p "$tmp/stamps/$T-$B-$C"
  PRNN_SCAN_STAMPS="$tmp/stamps/$T-$B-$C" /tmp/scan-lab-stamps/prnn bench scan --steps "$T" \
    --batch "$B" --channels "$C" --repeats 5 >/dev/null
done
for d in "$tmp"/stamps/*; do python3 bench/scan/stamps.py "$d"; done >"$out/stamps.txt"
cat "$out/medians.txt"
