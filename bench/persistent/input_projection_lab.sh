#!/usr/bin/env bash
# Diagnostic lab (GPU machine, after `cmake --preset gpu && cmake --build --preset gpu`): where
# the in-kernel input projection's time goes (bench/persistent/NOTES.md, "The input projection in
# the kernel"). Builds sed-patched variants of src/persistent/warp_rows_kernel.cuh (all but base
# give wrong results: timing only), times each with the projection forced into the kernel, and
# the input GEMM (knob 0) as the reference, then restores the file.
#   base        the kernel in the tree
#   nowait      no wait for this warp's copies of x_{t+1} before the group's barrier
#   noproj      no projection FMAs after the polls (the copies still run)
#   nocopy      no copies of x_{t+1} (the projection reads stale x)
# Usage: bench/persistent/input_projection_lab.sh OUT_DIR [VARIANT...]  (default: all four);
# BATCH / STEPS / REPEATS / ROUNDS override "1,4" / 256 / 10 / 2.
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${1:?usage: $0 OUT_DIR [VARIANT...]}
shift
variants=${*:-base nowait noproj nocopy}
mkdir -p "$out"
src=src/persistent/warp_rows_kernel.cuh
cp $src /tmp/warp_rows_kernel.orig.cuh
prnn=build/gpu/tools/prnn/prnn
apply() {
  case $1 in
    base) ;;
    nowait) sed -i 's|      if (project) wait_x();  // this warp|      // wait_x();  // this warp|' $src ;;
    noproj) sed -i 's|      if (project) add_projection(acc, s \& 1);|      // no projection|' $src ;;
    nocopy) sed -i 's|    if (project \&\& s + 1 < p.steps) copy_x(t + p.t_step, (s + 1) \& 1);|    // no copy|' $src ;;
    *) echo "unknown variant $1"; return 1 ;;
  esac
}
bench() {  # $1: file stem, $2: knob
  PRNN_PERSISTENT_INPUT_PROJECTION=$2 $prnn bench --out "$out/$1.csv" rnn --sweep custom \
    --cells relu --dtypes f32 --hidden 1152 --batch "${BATCH:-1,4}" --steps "${STEPS:-256}" \
    --impls prnn-persistent --repeats "${REPEATS:-10}" >/dev/null 2>&1 || echo "$1: bench failed"
}
for v in $variants; do
  cp /tmp/warp_rows_kernel.orig.cuh $src
  apply "$v" || continue
  if [ "$v" != base ] && cmp -s $src /tmp/warp_rows_kernel.orig.cuh; then
    echo "$v: the patch matched nothing (stale variant)"; continue
  fi
  cmake --build --preset gpu -j 16 --target prnn_cli >/dev/null 2>&1 || { echo "$v: build failed"; continue; }
  for r in $(seq 1 "${ROUNDS:-2}"); do
    bench "${v}_kernel_$r" 1
    bench "${v}_gemm_$r" 0
  done
done
cp /tmp/warp_rows_kernel.orig.cuh $src
cmake --build --preset gpu -j 16 --target prnn_cli >/dev/null 2>&1
grep -H 'fwd_us_per_step' "$out"/*.csv | sort | head -100
