#!/usr/bin/env bash
# On a GPU machine (H100/H200), from the repo root: configure Release for sm_90, build with all
# cores, run every test labelled `gpu`, print one summary line:
#   gpu-check: <device> | passed <n> | failed <n>
# Exit status is non-zero if anything failed or no GPU test ran.
set -uo pipefail
cd "$(dirname "$0")/.."
build=build/gpu
log=${GPU_CHECK_LOG:-$build/gpu-check.log}
mkdir -p "$build"
device=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)
device=${device:-"no GPU visible"}

if ! { cmake --preset gpu >"$build/configure.log" 2>&1 && cmake --build --preset gpu -j "$(nproc)" >"$build/build.log" 2>&1; }; then
  tail -40 "$build/configure.log" "$build/build.log"
  echo "gpu-check: $device | build failed"
  exit 1
fi

ctest --preset gpu -j 1 --timeout 900 2>&1 | tee "$log"
passed=$(grep -cE "^ *[0-9]+/[0-9]+ Test +#[0-9]+: .* Passed" "$log")
failed=$(grep -cE "^ *[0-9]+/[0-9]+ Test +#[0-9]+: .*(Failed|Timeout|Exception|Not Run)" "$log")
echo "gpu-check: $device | passed $passed | failed $failed"
[ "$failed" -eq 0 ] && [ "$passed" -gt 0 ]
