#!/usr/bin/env bash
# The scan lab's prepared run in one GPU call (bench/scan/NOTES.md, "Prepared for the next device
# time"). On the GPU machine, from the repo root:
#   bench/scan/prepared_run.sh OUT
# builds prnn_cli (build/gpu); times the tree against patches/forward_c4_8_steps.patch (the
# forward at one thread per row with 8 steps, not 4: the staged fp32 tile at C = 4 twice as long)
# and patches/packed16_narrow.patch (8-channel 16-bit vectors also at C = 16..56, lane blocks of
# 8 or 16 channels) over three rounds into OUT/lab.csv and OUT/medians.txt; builds the stamped tree
# (patches/tile_stamps.patch, which also stamps the 8-channel 16-bit tile) and stamps the bf16
# forward at four shapes with 8-channel vectors and again with the staged rows
# (PRNN_SCAN_PACKED16=0), writing OUT/stamps.txt (stamps.py per launch). About 5 minutes on an
# H200.
set -euo pipefail
out=${1:?usage: bench/scan/prepared_run.sh OUT}
mkdir -p "$out"
cmake --preset gpu >"$out/configure.log" 2>&1
cmake --build --preset gpu -j "$(nproc)" --target prnn_cli >"$out/build.log" 2>&1
SHAPES=${SHAPES:-"4194304:1:4 16777216:1:4 1048576:4:4 4194304:1:16 2097152:1:32 8388608:1:32 1048576:1:48 65536:1:1024"} \
  ROUNDS=3 bench/scan/lab.sh base '' c4r8 bench/scan/patches/forward_c4_8_steps.patch \
  narrow bench/scan/patches/packed16_narrow.patch \
  stamps bench/scan/patches/tile_stamps.patch >"$out/lab.csv"
python3 bench/scan/lab_medians.py "$out/lab.csv" base >"$out/medians.txt"
cat "$out/medians.txt"
tmp=$(mktemp -d)
for s in 8192:1:8192 65536:1:1024 65536:8:1536 524288:1:128; do
  IFS=: read -r T B C <<<"$s"
  for form in packed staged; do
    dir="$tmp/stamps/$form-$T-$B-$C"
    mkdir -p "$dir"
    knob=1
    [ "$form" = staged ] && knob=0
    PRNN_SCAN_PACKED16=$knob PRNN_SCAN_STAMPS="$dir" /tmp/scan-lab-stamps/prnn bench scan \
      --steps "$T" --batch "$B" --channels "$C" --repeats 5 >/dev/null
  done
done
for d in "$tmp"/stamps/*; do python3 bench/scan/stamps.py "$d"; done >"$out/stamps.txt"
grep -E "^[a-z]|tile  |lookback  |loads in \(b|rescan" "$out/stamps.txt"
