#!/usr/bin/env bash
# One knob's values A/B'd in one build (GPU machine, repo root): applies PATCH (or none for -),
# builds prnn_cli (build/gpu), takes the patch out, then alternates the knob's values three
# times over `prnn bench rnn` with the given arguments (`unset` for a value: the knob unset),
# into OUT/<value>_<round>.csv, and prints each (case, metric)'s median per value and its ratio
# to the first value's (ab_summary.py).
# Usage: bench/persistent/knob_ab.sh OUT PATCH|- KNOB VALUE... -- BENCH_ARGS...
#   e.g. bench/persistent/knob_ab.sh out - PRNN_PERSISTENT_TENSOR_CORES forward unset -- \
#          --sweep custom --cells lstm --dtypes bf16,f16 --hidden 1024,1152 --batch 3,4 \
#          --steps 256 --repeats 5 --impls prnn-persistent --no-floor
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${1:?usage: knob_ab.sh OUT PATCH|- KNOB VALUE... -- BENCH_ARGS...}
patch=${2:?usage: knob_ab.sh OUT PATCH|- KNOB VALUE... -- BENCH_ARGS...}
knob=${3:?usage: knob_ab.sh OUT PATCH|- KNOB VALUE... -- BENCH_ARGS...}
shift 3
values=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do values+=("$1"); shift; done
[ "${1:-}" = "--" ] && shift
[ ${#values[@]} -ge 2 ] && [ $# -gt 0 ] ||
  { echo "usage: knob_ab.sh OUT PATCH|- KNOB VALUE... -- BENCH_ARGS..."; exit 2; }
mkdir -p "$out"
source bench/persistent/build_gpu.sh
[ "$patch" = - ] || git apply "$patch" || exit 1
build_gpu "$out" prnn_cli && keep_cli knob
built=$?
[ "$patch" = - ] || git apply -R "$patch"
[ $built = 0 ] || exit 1
for r in 1 2 3; do
  for v in "${values[@]}"; do
    env=(env "$knob=$v")
    [ "$v" = unset ] && env=(env -u "$knob")
    "${env[@]}" timeout 300 /tmp/prnn_knob bench --out "$out/${v}_$r.csv" rnn "$@" >/dev/null 2>&1 ||
      echo "$knob=$v round $r failed"
  done
done
python3 bench/persistent/ab_summary.py "$out" "${values[0]}"
