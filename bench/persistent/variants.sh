#!/usr/bin/env bash
# Kernel lab (GPU machine): builds sed-patched variants of src/persistent/kernels_fma.cu (and of
# warp_rows_kernel.cuh), times each with bench/persistent/lab.cpp on the shapes given (default
# H1152 B4 and B1, T256), and restores the files. Usage: bench/persistent/variants.sh VARIANT...
# (names below). The in-kernel input projection's diagnostics (wrong results, timing only;
# bench/persistent/NOTES.md, "The input projection in the kernel") want it forced on:
#   PRNN_PERSISTENT_INPUT_PROJECTION=1 bench/persistent/variants.sh base xnowait xnoproj xnocopy
# against `PRNN_PERSISTENT_INPUT_PROJECTION=0 bench/persistent/variants.sh base` (the input GEMM).
set -uo pipefail
cd "$(dirname "$0")/../.."
src=src/persistent/kernels_fma.cu
rows=src/persistent/warp_rows_kernel.cuh
cp $src /tmp/rnn_kernels.orig.cu
cp src/persistent/tiling.h /tmp/tiling.orig.h
cp $rows /tmp/warp_rows_kernel.orig.cuh
shapes=${SHAPES:-"1152 4 256 1152 1 256"}
apply() {
  case $1 in
    base) ;;
    sleep) sed -i 's|// Reload every record still missing, all loads in flight at once; then look.|__nanosleep(64);|' $src ;;
    sleep256) sed -i 's|// Reload every record still missing, all loads in flight at once; then look.|__nanosleep(256);|' $src ;;
    notimer) sed -i 's|const std::uint64_t start = global_ns();|const std::uint64_t start = 0;|; s|global_ns() - start > p.timeout_ns|spins > 400000000u|' $src ;;
    ldcg) sed -i 's|ld.relaxed.gpu.global.v4.f32|ld.global.cg.v4.f32|' $src ;;
    ldcg_sleep) sed -i 's|ld.relaxed.gpu.global.v4.f32|ld.global.cg.v4.f32|; s|// Reload every record still missing, all loads in flight at once; then look.|__nanosleep(128);|' $src ;;
    stcg) sed -i 's|st.relaxed.gpu.global.v4.f32|st.global.cg.v4.f32|; s|ld.relaxed.gpu.global.v4.f32|ld.global.cg.v4.f32|' $src ;;
    nowait) sed -i 's|ready &= tagged(rec\[g\]\[bb\], want);|ready \&= true;|' $src ;;
    # the input projection in the warp-rows forward: no wait for the copies of x_{t+1} before the
    # group's barrier / no projection FMAs / no copies of x_{t+1} (stale x read)
    xnowait) sed -i 's|      if (project) wait_x();  // this warp|      // wait_x();  // this warp|' $rows ;;
    xnoproj) sed -i 's|      if (project) add_projection(acc, s \& 1);|      // no projection|' $rows ;;
    xnocopy) sed -i 's|    if (project \&\& s + 1 < p.steps) copy_x(t + p.t_step, (s + 1) \& 1);|    // no copy|' $rows ;;
    file:*) cp "${1#file:}" $src ;;   # a saved version of the kernel file
    *) echo "unknown variant $1"; return 1 ;;
  esac
}
for v in "$@"; do
  cp /tmp/rnn_kernels.orig.cu $src
  cp /tmp/tiling.orig.h src/persistent/tiling.h
  cp /tmp/warp_rows_kernel.orig.cuh $rows
  apply $v || continue
  if [ "$v" != base ] && cmp -s $src /tmp/rnn_kernels.orig.cu && cmp -s src/persistent/tiling.h /tmp/tiling.orig.h &&
     cmp -s $rows /tmp/warp_rows_kernel.orig.cuh; then
    echo "$v: the patch matched nothing (stale variant)"; continue
  fi
  cmake --build --preset gpu -j 16 --target prnn_gpu prnn >/dev/null 2>&1 || { echo "$v: build failed"; continue; }
  echo "== variant $v"
  bash bench/persistent/lab.sh $shapes 2>&1 | tail -n +2
done
cp /tmp/rnn_kernels.orig.cu $src
cp /tmp/tiling.orig.h src/persistent/tiling.h
cp /tmp/warp_rows_kernel.orig.cuh $rows
