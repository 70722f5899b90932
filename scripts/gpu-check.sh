#!/usr/bin/env bash
# On a GPU machine (H100/H200), from the repo root: configure Release for sm_90, build with all
# cores, run every test labelled `gpu` (their output goes to $log), print one summary line:
#   gpu-check: <device> | passed <n> | failed <n>
# Exit status is non-zero if anything failed or no GPU test ran.
# GPU_CHECK_PART=K/N runs the K-th of N disjoint parts of the tests (scripts/run_gpu_tests.py
# --part), for runs that must fit a time limit; the summary line ends with `| part K/N`, and the
# parts' counts add up to the whole suite's.
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

# One process per test executable (scripts/run_gpu_tests.py: every `gpu` case, counted from the
# GoogleTest reports; a skipped or unreported case is a failure), not one per case as ctest
# would: the suites' start-up and shared reference results are paid once.
summary=$(python3 scripts/run_gpu_tests.py "$build" --timeout 900 --log "$log" \
  --part "${GPU_CHECK_PART:-1/1}")
status=$?
echo "$summary" | grep '^FAILED' | head -50
echo "gpu-check: $device | $(echo "$summary" | tail -1)"
exit $status
