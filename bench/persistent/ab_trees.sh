#!/usr/bin/env bash
# A/B of patched trees in one GPU call: this tree ("old") against copies of it with patches
# applied, all built side by side (prnn_cli for sm_90; one nvcc of rnn_kernels.cu per tree is
# the long pole: four trees built in 390 s on a 16-core H100 host), then run alternately, ROUNDS
# rounds of `prnn bench --out OUT/<tree>_<round>.csv <bench args>` (only these in OUT; the
# build logs are /tmp/prnn_ab_<tree>.build.log); prints the medians
# (bench/persistent/ab_summary.py OUT old).
#   bench/persistent/ab_trees.sh OUT ROUNDS NAME=PATCH[+PATCH...] [NAME=...] -- <bench args...>
# Example (bench/results/h100/ab/straight_poll/):
#   bench/persistent/ab_trees.sh "$OUT" 2 sp=bench/persistent/patches/a.patch \
#     f4=bench/persistent/patches/b.patch both=bench/persistent/patches/a.patch+bench/persistent/patches/b.patch \
#     -- rnn --sweep custom --cells relu --dtypes f32 --hidden 1152,2048 --batch 1,2,4 --steps 256 \
#     --repeats 10 --impls prnn-persistent
set -euo pipefail
cd "$(dirname "$0")/../.."
out=$(realpath "$1") rounds=$2
shift 2
names=(old) dirs=(/tmp/prnn_ab_old)
declare -A patches=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do
  name=${1%%=*}
  [ "$name" != "$1" ] && [ "$name" != old ] || { echo "ab_trees.sh: expected NAME=PATCH[+PATCH], got '$1'" >&2; exit 2; }
  names+=("$name") dirs+=("/tmp/prnn_ab_$name") patches[$name]=${1#*=}
  shift
done
[ "${1:-}" = "--" ] || { echo "ab_trees.sh: expected -- before the bench arguments" >&2; exit 2; }
shift
mkdir -p "$out"
for i in "${!names[@]}"; do
  d=${dirs[$i]}
  rm -rf "$d" && mkdir -p "$d"
  tar --exclude=./build -cf - . | tar -xf - -C "$d"
  if [ "${names[$i]}" != old ]; then
    IFS=+ read -ra list <<<"${patches[${names[$i]}]}"
    for p in "${list[@]}"; do (cd "$d" && git apply "$p") || { echo "ab_trees.sh: $p does not apply" >&2; exit 1; }; done
  fi
done
jobs=$(( $(nproc) / ${#names[@]} ))
jobs=$(( jobs > 0 ? jobs : 1 ))
pids=()
for i in "${!names[@]}"; do
  (cd "${dirs[$i]}" && cmake --preset gpu >/dev/null &&
    cmake --build --preset gpu -j "$jobs" --target prnn_cli >"${dirs[$i]}.build.log" 2>&1) &
  pids+=($!)
done
for i in "${!pids[@]}"; do
  wait "${pids[$i]}" || { tail -30 "${dirs[$i]}.build.log"; echo "ab_trees.sh: ${names[$i]} did not build" >&2; exit 1; }
done
for r in $(seq 1 "$rounds"); do
  for i in "${!names[@]}"; do
    "${dirs[$i]}/build/gpu/tools/prnn/prnn" bench --out "$out/${names[$i]}_$r.csv" "$@" >/dev/null
  done
done
python3 bench/persistent/ab_summary.py "$out" old
