#!/usr/bin/env bash
# A/B of several source trees in one GPU call: this tree (named $AB_BASE, default "old") against
# copies of it changed by patches or by files laid over them, all built side by side (prnn_cli
# for sm_90; four trees built in 390 s on a 16-core H100 host while the persistent kernels were
# one translation unit, the long pole; they are now one per kernel family), then run alternately, ROUNDS rounds of
# `prnn bench --out OUT/<tree>_<round>.csv <bench args>` (only these in OUT; the build logs are
# /tmp/prnn_ab_<tree>.build.log); prints the medians against the tree "old"
# (bench/persistent/ab_summary.py OUT old).
#   bench/persistent/ab_trees.sh OUT ROUNDS NAME=CHANGE [NAME=CHANGE...] -- <bench args...>
# CHANGE: PATCH[+PATCH...] (git apply, in order) or a folder OVERLAY that mirrors the
# repository's paths (OVERLAY/src/persistent/warp_rows_kernel.cuh replaces that file).
# Example (bench/results/h100/ab/straight_poll/):
#   bench/persistent/ab_trees.sh "$OUT" 2 sp=bench/persistent/patches/a.patch \
#     f4=bench/persistent/patches/b.patch both=bench/persistent/patches/a.patch+bench/persistent/patches/b.patch \
#     -- rnn --sweep custom --cells relu --dtypes f32 --hidden 1152,2048 --batch 1,2,4 --steps 256 \
#     --repeats 10 --impls prnn-persistent
set -euo pipefail
[ $# -ge 3 ] || { sed -n '2,16s/^# \{0,1\}//p' "$0" >&2; exit 2; }
mkdir -p "$1"
out=$(realpath "$1") rounds=$2
shift 2
base=${AB_BASE:-old}
names=("$base") changes=("")
while [ $# -gt 0 ] && [ "$1" != "--" ]; do
  name=${1%%=*} change=${1#*=}
  [ "$name" != "$1" ] && [ -n "$name" ] && [ "$name" != "$base" ] ||
    { echo "ab_trees.sh: expected NAME=CHANGE (NAME not '$base'), got '$1'" >&2; exit 2; }
  if [ -d "$change" ]; then
    changes+=("dir:$(realpath "$change")")
  else
    IFS=+ read -ra list <<<"$change"
    resolved=()
    for p in "${list[@]}"; do
      [ -f "$p" ] || { echo "ab_trees.sh: $name: no patch or folder '$p'" >&2; exit 2; }
      resolved+=("$(realpath "$p")")
    done
    changes+=("patch:$(IFS=+; echo "${resolved[*]}")")
  fi
  names+=("$name")
  shift
done
[ "${1:-}" = "--" ] || { echo "ab_trees.sh: expected -- before the bench arguments" >&2; exit 2; }
shift
cd "$(dirname "$0")/../.."
dirs=()
for i in "${!names[@]}"; do
  if [ "$i" -eq 0 ]; then dirs+=("$PWD"); continue; fi
  d=/tmp/prnn_ab_${names[$i]}
  dirs+=("$d")
  rm -rf "$d" && mkdir -p "$d"
  tar --exclude=./build -cf - . | tar -xf - -C "$d"
  case ${changes[$i]} in
    dir:*) (cd "${changes[$i]#dir:}" && find . -type f -print0 | xargs -0 -I{} cp {} "$d/{}") ;;
    patch:*)
      IFS=+ read -ra list <<<"${changes[$i]#patch:}"
      for p in "${list[@]}"; do
        (cd "$d" && git apply "$p") || { echo "ab_trees.sh: $p does not apply" >&2; exit 1; }
      done ;;
  esac
done
jobs=$(( $(nproc) / ${#names[@]} ))
jobs=$(( jobs > 0 ? jobs : 1 ))
pids=()
for i in "${!names[@]}"; do
  (cd "${dirs[$i]}" && cmake --preset gpu >/dev/null &&
    cmake --build --preset gpu -j "$jobs" --target prnn_cli >"/tmp/prnn_ab_${names[$i]}.build.log" 2>&1) &
  pids+=($!)
done
for i in "${!pids[@]}"; do
  wait "${pids[$i]}" || { tail -30 "/tmp/prnn_ab_${names[$i]}.build.log"; echo "ab_trees.sh: ${names[$i]} did not build" >&2; exit 1; }
done
for r in $(seq 1 "$rounds"); do
  for i in "${!names[@]}"; do
    "${dirs[$i]}/build/gpu/tools/prnn/prnn" bench --out "$out/${names[$i]}_$r.csv" "$@" >/dev/null
  done
done
python3 bench/persistent/ab_summary.py "$out" old
