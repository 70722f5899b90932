#!/usr/bin/env bash
# Kernel lab for the parallel scan. On the GPU machine, from the repo root, after prnn_cli is
# built in $BUILD (default build/gpu: cmake --preset gpu && cmake --build --preset gpu --target prnn_cli):
#   bench/scan/lab.sh NAME CHANGE [NAME CHANGE ...]
# CHANGE is a patch file (its src/ files applied with `patch -p1` to a copy of src/), a sed -E expression
# (applied to src/scan/device_scan.cu and src/scan/tile_scan.cuh), or '' (the tree as it is).
# Only device_scan.cu is recompiled per variant (its command from compile_commands.json, with the
# variant's src/ first on the include path), swapped into a copy of libprnn_gpu.a, and prnn is
# relinked; variants build in parallel. Then every variant is timed on the same shapes,
# interleaved over $ROUNDS rounds, one CSV line per measurement on stdout:
#   variant,round,<prnn bench scan CSV row>
# bench/scan/lab_medians.py OUT.csv [BASELINE] gives each variant's medians over the rounds.
set -euo pipefail
root=$(pwd)
build=${BUILD:-build/gpu}
shapes=${SHAPES:-"65536:1:1024 4194304:1:4 2048:1:8192 65536:8:1536"}
rounds=${ROUNDS:-2}
repeats=${REPEATS:-10}

compile_cmd=$(python3 - "$root/$build" <<'EOF'
import json, sys
for e in json.load(open(sys.argv[1] + "/compile_commands.json")):
    if e["file"].endswith("src/scan/device_scan.cu"):
        print(e["command"])
        break
else:
    sys.exit("lab: device_scan.cu is not in compile_commands.json")
EOF
)
link_cmd=$(ninja -C "$build" -t commands tools/prnn/prnn | tail -1)
lib=$(cd "$build" && ls src/libprnn_gpu.a)

variants=()
while [ $# -ge 2 ]; do
  name=$1 change=$2
  shift 2
  dir=/tmp/scan-lab-$name
  rm -rf "$dir" && mkdir -p "$dir"
  cp -r "$root/src" "$dir/src"
  if [ -f "$change" ]; then
    # Only the patch's src/ files are applied (a patch may carry its test changes too); patch's
    # messages go to stderr, and a hunk that does not apply stops the lab.
    # A reversed patch (git diff -R) names its files b/... first.
    awk '/^diff --git /{keep = ($3 ~ /^[ab]\/src\//)} keep' "$change" >"$dir/change.patch"
    [ -s "$dir/change.patch" ] || { echo "lab: $change changes nothing under src/" >&2; exit 1; }
    patch -p1 --batch -d "$dir" <"$dir/change.patch" >&2 ||
      { echo "lab: $change does not apply to src/" >&2; exit 1; }
  elif [ -n "$change" ]; then
    sed -i -E "$change" "$dir/src/scan/device_scan.cu" "$dir/src/scan/tile_scan.cuh"
  fi
  obj="$dir/device_scan.cu.o"
  cmd=${compile_cmd/"$root/src/scan/device_scan.cu"/"$dir/src/scan/device_scan.cu"}
  cmd=${cmd/-o src\/CMakeFiles\/prnn_gpu.dir\/scan\/device_scan.cu.o/-o "$obj"}
  cmd=${cmd/nvcc /nvcc -I$dir/src }
  (
    cd "$build"
    eval "$cmd" >"$dir/compile.log" 2>&1 || { echo "lab: $name does not compile" >&2; tail -20 "$dir/compile.log" >&2; exit 1; }
    cp "$lib" "$dir/libprnn_gpu.a"
    # The archive member is named device_scan.cu.o: replace it.
    ar r "$dir/libprnn_gpu.a" "$obj" 2>/dev/null
    lcmd=${link_cmd//"$lib"/"$dir/libprnn_gpu.a"}
    lcmd=${lcmd/-o tools\/prnn\/prnn /-o $dir/prnn }
    eval "$lcmd" >"$dir/link.log" 2>&1 || { echo "lab: $name does not link" >&2; tail -20 "$dir/link.log" >&2; exit 1; }
  ) &
  variants+=("$name")
done
wait
built=()
for name in "${variants[@]}"; do
  if [ -x "/tmp/scan-lab-$name/prnn" ]; then built+=("$name"); else echo "lab: skipping $name (no binary)" >&2; fi
done

for round in $(seq 1 "$rounds"); do
  for name in "${built[@]}"; do
    for s in $shapes; do
      IFS=: read -r T B C <<<"$s"
      "/tmp/scan-lab-$name/prnn" bench scan --steps "$T" --batch "$B" --channels "$C" --repeats "$repeats" 2>/dev/null |
        grep -E "throughput" | sed "s/^/$name,$round,/"
    done
  done
done
