#!/usr/bin/env bash
# Runs GoogleTest cases of one test executable under a compute-sanitizer tool (the sanitize_*
# tests of tests/CMakeLists.txt, labelled gpu, which run this on small cases of every kernel):
#   scripts/sanitize.sh racecheck|synccheck|memcheck EXECUTABLE GTEST_FILTER
# Passes only when the tool reports no error and no hazard, the executable exits 0, and
# GoogleTest ran at least one case and skipped none (a filter that matches nothing fails).
# compute-sanitizer is $PRNN_COMPUTE_SANITIZER, else the one on PATH, else the CUDA toolkit's
# ($CUDA_HOME/bin, /usr/local/cuda/bin); where there is none, the test fails and says so.
set -uo pipefail
if [[ $# -ne 3 ]]; then
  echo "usage: $0 racecheck|synccheck|memcheck EXECUTABLE GTEST_FILTER" >&2
  exit 2
fi
tool=$1 exe=$2 filter=$3
sanitizer=${PRNN_COMPUTE_SANITIZER:-$(command -v compute-sanitizer || true)}
for dir in "${CUDA_HOME:-/nonexistent}/bin" /usr/local/cuda/bin; do
  [[ -z $sanitizer && -x $dir/compute-sanitizer ]] && sanitizer=$dir/compute-sanitizer
done
if [[ -z $sanitizer || ! -x $sanitizer ]]; then
  echo "sanitize: compute-sanitizer not found (expected on PATH, in the CUDA toolkit, or named" \
    "by PRNN_COMPUTE_SANITIZER)"
  exit 1
fi

# Tells the tests which tool runs them (rnn_gpu_test then checks each case once, leaving out
# the replays that repeat the same kernels' shared-memory accesses; gpu-check runs those cases
# unsanitized as well).
export PRNN_TEST_SANITIZER=$tool

log=$(mktemp)
trap 'rm -f "$log"' EXIT
args=(--tool "$tool" --error-exitcode 97 --print-limit 20)
[[ $tool == racecheck ]] && args+=(--racecheck-report all)
"$sanitizer" "${args[@]}" "$exe" --gtest_filter="$filter" 2>&1 | tee "$log"
status=${PIPESTATUS[0]}

fail() {
  echo "sanitize $tool: FAILED: $*"
  exit 1
}
[[ $status -eq 0 ]] || fail "exit status $status (97: the tool reported errors)"
if [[ $tool == racecheck ]]; then
  grep -q 'RACECHECK SUMMARY: 0 hazards displayed (0 errors, 0 warnings)' "$log" ||
    fail "racecheck reported hazards (or no summary)"
else
  grep -q 'ERROR SUMMARY: 0 errors' "$log" || fail "no 'ERROR SUMMARY: 0 errors' in the tool's report"
fi
ran=$(sed -n 's/^\[  PASSED  \] \([0-9]*\) tests\{0,1\}\..*/\1/p' "$log" | tail -1)
[[ -n $ran && $ran -gt 0 ]] || fail "GoogleTest ran no case for filter '$filter'"
grep -q '^\[  SKIPPED \]' "$log" && fail "a case was skipped"
grep -q '^\[  FAILED  \]' "$log" && fail "a case failed"
echo "sanitize $tool: $ran cases, no errors, no hazards"
