#!/usr/bin/env bash
# Where the library's persistent forward step stalls: one launch of the forward kernel that
# prnn::Rnn picks for a layer (Auto's tiling), under ncu, with the same sections and
# per-SASS-instruction stall samples as wide_rows_profile.sh (whose lab kernel's poll, finishers
# and stores differ from the library's; bench/persistent/NOTES.md, "The wide step profiled").
# On the GPU machine, from the repo root:
#   bench/persistent/library_profile.sh OUT [H [B [T]]]
# H (default 2048), B (4), T (64): the layer and sequence, input size H. Environment: CELL (relu;
# tanh, lstm, gru), DTYPE (f32; bf16, f16), KERNEL (an ncu regex on
# the demangled name; default the forward warp rows, `warp_rows_kernel<.*Pass\)0`; the FMA
# kernels' forward `persistent_rnn_kernel<.*Pass\)0`, the gated warp rows'
# `gated_warp_rows_forward_kernel`, the 16-bit tensor-core forward `tensor_core_forward_kernel`).
# Builds prnn_cli with the gpu preset (build/gpu, or $BUILD), runs `prnn bench` on that one case
# unprofiled (µs/step, for reference), then profiles KERNEL's third launch (after warm-up;
# ncu_stalls.sh), and writes into OUT:
#   bench.csv        the unprofiled bench
#   profile.ncu-rep  the report; details.txt its sections as text
#   sass.csv         per SASS instruction: executions and stall samples by reason
#   sass_stalls.txt  the same reduced by sass_stalls.py
#   segments.txt     its straight runs with instructions a warp issues per step (sass_segments.py)
set -euo pipefail
out=${1:?usage: library_profile.sh OUT [H [B [T]]]}
hidden=${2:-2048}
batch=${3:-4}
steps=${4:-64}
cell=${CELL:-relu}
dtype=${DTYPE:-f32}
kernel=${KERNEL:-'warp_rows_kernel<.*Pass\)0'}
build=${BUILD:-build/gpu}
here=$(dirname "$0")
mkdir -p "$out"
cmake --preset gpu >"$out/configure.log" 2>&1
cmake --build "$build" --target prnn_cli -j "$(nproc)" >"$out/build.log" 2>&1
prnn=$(find "$build" -name prnn -type f -perm -u+x | head -1)
bench=(rnn --sweep custom --cells "$cell" --dtypes "$dtype" --hidden "$hidden" --batch "$batch"
  --steps "$steps" --impls prnn-persistent --math fp32 --no-floor)
"$prnn" bench --out "$out/bench.csv" "${bench[@]}" --repeats 5 | tail -4
"$here/ncu_stalls.sh" "$out" "$kernel" 2 "$prnn" bench --out "$out/bench_profiled.csv" "${bench[@]}" \
  --repeats 1
grep -E "_kernel<|Issued Ipc|Eligible|Active Warps|Warp Cycles" "$out/details.txt" | head -20
head -12 "$out/sass_stalls.txt"
# The straight runs of the SASS, counted per warp and step (warps of the launch x T steps).
grid=$(awk '/^ *Grid Size /{print $NF; exit}' "$out/details.txt")
block=$(awk '/^ *Block Size /{print $NF; exit}' "$out/details.txt")
if [[ -n "$grid" && -n "$block" ]]; then
  "$here/sass_segments.py" "$out/sass_stalls.txt" $((grid * block / 32 * steps)) >"$out/segments.txt"
else
  echo "library_profile.sh: no Grid Size / Block Size in details.txt; segments.txt not written" >&2
fi
