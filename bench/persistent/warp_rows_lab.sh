#!/usr/bin/env bash
# Builds warp_rows_lab.cu once per variant (name=flags pairs) and runs them interleaved over
# ROUNDS rounds at the given shapes (GPU machine). SASS=name,... also dumps those variants' SASS
# into $OUT (when set). Example:
#   ROUNDS=2 bench/persistent/warp_rows_lab.sh "1152 1 1 1152 4 4" base="-DLAB_TRACE=0" traced=""
set -euo pipefail
cd "$(dirname "$0")/../.."
shapes=$1
shift
dir=${LAB_DIR:-/tmp/warp_rows_lab}
mkdir -p "$dir"
names=()
for v in "$@"; do
  name=${v%%=*}
  flags=${v#*=}
  names+=("$name")
  # shellcheck disable=SC2086
  nvcc -std=c++20 -arch=sm_90 -O3 -DLAB_COUNTERS=0 $flags bench/persistent/warp_rows_lab.cu -o "$dir/$name" &
done
wait
for ((r = 1; r <= ${ROUNDS:-2}; ++r)); do
  for name in "${names[@]}"; do
    echo "== round $r $name"
    # shellcheck disable=SC2086
    "$dir/$name" $shapes
  done
done
if [[ -n "${SASS:-}" && -n "${OUT:-}" ]]; then
  for name in ${SASS//,/ }; do cuobjdump -sass "$dir/$name" >"$OUT/sass_$name.txt"; done
fi
