#!/usr/bin/env bash
# Kernel lab for the parallel scan (run on the GPU machine from the repo root):
#   bench/scan/lab.sh NAME 'sed-expression' [NAME 'sed-expression' ...]
# builds one copy of the tree per variant with the sed expression applied to
# src/scan/device_scan.cu, then times every variant on the same shapes.
set -euo pipefail
root=$(pwd)
shapes=${SHAPES:-"65536:1:1024 4194304:1:4 2048:1:8192 65536:8:1536"}
variants=()
while [ $# -ge 2 ]; do
  name=$1 expr=$2; shift 2
  dir=/tmp/lab-$name
  rm -rf "$dir" && mkdir -p "$dir"
  (cd "$root" && git ls-files -co --exclude-standard | tar -cf - -T -) | tar -xf - -C "$dir"
  [ -n "$expr" ] && sed -i -E "$expr" "$dir/src/scan/device_scan.cu" "$dir/src/scan/tile_scan.cuh"
  (cd "$dir" && cmake --preset gpu >/dev/null && cmake --build --preset gpu -j 16 --target prnn_cli >/dev/null) &
  variants+=("$name")
done
wait
for name in "${variants[@]}"; do
  for s in $shapes; do
    IFS=: read -r T B C <<<"$s"
    /tmp/lab-$name/build/gpu/tools/prnn/prnn bench scan --steps "$T" --batch "$B" --channels "$C" --repeats 10 2>/dev/null |
      grep -E "throughput" | sed "s/^/$name,/"
  done
done
