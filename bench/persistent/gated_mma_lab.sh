#!/usr/bin/env bash
# The gated warp-rows forward's tensor-core product, where its step goes (GPU machine, repo root):
# builds prnn_cli (build/gpu) once per sed-made variant of gated_warp_rows_kernel.cuh, then times
# the 16-bit LSTM and GRU at H = 1152, B = 3 and 4 with each binary, rounds alternated, and the
# FMA product (PRNN_PERSISTENT_GATED_MMA=0 with the base binary) beside them. The variants other
# than base compute wrong results (timing only):
#   noprod   no mma and no B-fragment loads (the partial sums stay zero)
#   onered   the finisher adds warp 0's partial sums only, not all kWarps
#   nostage  the polled records are not written to shared memory as hi and lo
#   chains   patches/gated_mma_chains.patch: three accumulator chains per row tile (correct)
# Usage: bench/persistent/gated_mma_lab.sh OUT [VARIANT...]; OUT/gated_mma_lab.txt.
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${1:?usage: gated_mma_lab.sh OUT [VARIANT...]}
shift
variants=${*:-base noprod onered nostage}
k=src/persistent/gated_warp_rows_kernel.cuh
cp $k /tmp/gwr.orig.cuh
cmake --preset gpu >"$out/configure.log" 2>&1
for v in $variants; do
  cp /tmp/gwr.orig.cuh $k
  case $v in
    base) ;;
    noprod) sed -i 's|for (int mt = 0; mt < kMT; ++mt) mma_16816<WS>(acc\[mt\], a\[mt\]\[kt\], b0, b1);|(void)b0; (void)b1;|' $k ;;
    onered) sed -i 's|for (int w = 0; w < kWarps; ++w) m += red\[w\]|for (int w = 0; w < 1; ++w) m += red[w]|' $k ;;
    chains) git apply bench/persistent/patches/gated_mma_chains.patch ;;
    nostage) sed -i 's|      stage\[i \* kStride + kR3 \* k + c\] = hi;|      (void)hi;|; s|      stage\[(4 + i) \* kStride + kR3 \* k + c\] = lo;|      (void)lo;|' $k ;;
    *) echo "unknown variant $v"; continue ;;
  esac
  if [ "$v" != base ] && cmp -s $k /tmp/gwr.orig.cuh; then echo "variant $v: the sed matched nothing"; continue; fi
  cmake --build --preset gpu -j "$(nproc)" --target prnn_cli >"$out/build_$v.log" 2>&1 ||
    { echo "variant $v: build failed"; tail -20 "$out/build_$v.log"; continue; }
  cp build/gpu/tools/prnn/prnn /tmp/prnn_$v
done
cp /tmp/gwr.orig.cuh $k
for round in 1 2; do
  for v in fma $variants; do
    bin=/tmp/prnn_$v knob=1
    [ "$v" = fma ] && bin=/tmp/prnn_base knob=0
    [ -x "$bin" ] || continue
    for cell in lstm gru; do
      PRNN_PERSISTENT_GATED_MMA=$knob $bin bench --out /tmp/x.csv $cell --sweep custom --hidden 1152 \
        --batch 3,4 --steps 256 --dtypes bf16 --repeats 10 --impls prnn-persistent 2>&1 |
        grep fwd_us_per_step | sed "s/^/$v r$round /" >>"$out/gated_mma_lab.txt"
    done
  done
done
sort -k3,3 -k1,1 "$out/gated_mma_lab.txt"
