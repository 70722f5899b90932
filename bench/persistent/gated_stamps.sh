#!/usr/bin/env bash
# The gated warp-rows forward's step by phase (GPU machine, repo root): applies
# patches/gated_stamps.patch, builds prnn_cli (build/gpu), runs the 16-bit LSTM and GRU at
# H = 1152 B = 4 with the product on tensor cores and on the FMA pipes (PRNN_PERSISTENT_GATED_MMA),
# each call enqueued directly (PRNN_PERSISTENT_GRAPHS=0) so that the 8th launch dumps the stamps,
# and prints gated_stamps.py's summary of each; then takes the patch out again.
# Usage: bench/persistent/gated_stamps.sh OUT
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${1:?usage: gated_stamps.sh OUT}
git apply bench/persistent/patches/gated_stamps.patch || exit 1
cmake --preset gpu >"$out/stamps_configure.log" 2>&1
if cmake --build --preset gpu -j "$(nproc)" --target prnn_cli >"$out/stamps_build.log" 2>&1; then
  for cell in lstm gru; do
    warps=12
    [ $cell = gru ] && warps=9
    for knob in 1 0; do
      f="$out/stamps_${cell}_mma$knob.bin"
      PRNN_GWR_STAMPS=$f PRNN_PERSISTENT_GRAPHS=0 PRNN_PERSISTENT_GATED_MMA=$knob \
        build/gpu/tools/prnn/prnn bench --out /tmp/stamps.csv $cell --sweep custom --hidden 1152 \
        --batch 4 --steps 256 --dtypes bf16 --repeats 10 --impls prnn-persistent >/dev/null 2>&1
      echo "== $cell bf16 H=1152 B=4, product on $([ $knob = 1 ] && echo 'tensor cores' || echo 'FMA pipes')"
      [ -f "$f" ] && python3 bench/persistent/gated_stamps.py "$f" $warps
    done
  done
else
  tail -20 "$out/stamps_build.log"
fi
git apply -R bench/persistent/patches/gated_stamps.patch
