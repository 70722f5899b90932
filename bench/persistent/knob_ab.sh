#!/usr/bin/env bash
# One knob's values A/B'd in one build (GPU machine, repo root): applies PATCH (or none for -),
# builds prnn_cli (build/gpu), takes the patch out, then alternates the knob's values three
# times over `prnn bench rnn` with the given arguments (`unset` for a value: the knob unset),
# into OUT/ab_<value>.csv, and prints each (case, metric)'s median per value and its change
# against the first value.
# Usage: bench/persistent/knob_ab.sh OUT PATCH|- KNOB VALUE... -- BENCH_ARGS...
#   e.g. bench/persistent/knob_ab.sh out patches/lstm_b3_tc_backward.patch \
#          PRNN_PERSISTENT_TENSOR_CORES forward unset -- --sweep custom --cells lstm \
#          --dtypes bf16,f16 --hidden 1024,1152 --batch 3 --steps 256 --repeats 5 \
#          --impls prnn-persistent --no-floor
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
    echo "# run $r" >>"$out/ab_$v.csv"
    "${env[@]}" timeout 300 /tmp/prnn_knob bench --out /tmp/knob_ab.csv rnn "$@" >/dev/null 2>&1 &&
      cat /tmp/knob_ab.csv >>"$out/ab_$v.csv"
  done
done
python3 - "$out" "${values[@]}" <<'PY'
import csv, collections, statistics, sys
out, values = sys.argv[1], sys.argv[2:]
vals = collections.defaultdict(list)
for v in values:
    for row in csv.reader(l for l in open("%s/ab_%s.csv" % (out, v)) if not l.startswith("#")):
        if len(row) < 6 or row[0] == "suite" or row[3] not in (
                "fwd_us_per_step", "fwdbwd_us_per_step", "setup_ms"):
            continue
        vals[(row[1], row[2], row[3], v)].append(float(row[4]))
for key in sorted({k[:3] for k in vals}):
    m = {v: statistics.median(vals[key + (v,)]) for v in values if vals.get(key + (v,))}
    first = m.get(values[0])
    cells = " ".join("%s %8.3f%s" % (v, m[v], "" if first is None or v == values[0] else
                                     " (%+5.1f%%)" % (100 * (m[v] / first - 1))) for v in m)
    print("%-40s %-22s %-18s %s" % (key + (cells,)))
PY
