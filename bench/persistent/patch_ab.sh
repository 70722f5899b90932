#!/usr/bin/env bash
# A prepared patch checked and timed against the tree in one GPU call (GPU machine, repo root):
# applies PATCH, builds prnn_cli, rnn_gpu_test and gpu_smoke_test (build/gpu), runs
# gpu_smoke_test and all of rnn_gpu_test, takes the patch out, builds the tree's prnn_cli, then
# alternates the two three times over `prnn bench rnn` of the issue-5 shapes (LSTM and GRU bf16
# H = 1152, 2048 B = 4; LSTM f32 and bf16 H = 1024 B = 4, 16) into OUT/ab_{patch,tree}.csv and
# prints the medians. About 6 minutes.
# Usage: bench/persistent/patch_ab.sh PATCH OUT
set -uo pipefail
cd "$(dirname "$0")/../.."
patch=${1:?usage: patch_ab.sh PATCH OUT}
out=${2:?usage: patch_ab.sh PATCH OUT}
mkdir -p "$out"
source bench/persistent/build_gpu.sh
build() {  # name targets...: builds and keeps the bench as /tmp/prnn_<name>
  local name=$1
  shift
  build_gpu "$out" prnn_cli "$@" && keep_cli "$name"
}
git apply "$patch" || exit 1
if build patch rnn_gpu_test gpu_smoke_test; then
  for t in gpu_smoke_test rnn_gpu_test; do
    timeout 300 "build/gpu/tests/$t" >"$out/tests_$t.log" 2>&1
    echo "$t rc $?"
    grep -E "^\[  (PASSED|FAILED) |FAILED  \]" "$out/tests_$t.log" | head -20
  done
fi
git apply -R "$patch"
build tree || exit 1
for r in 1 2 3; do
  for v in patch tree; do
    echo "# run $r" >>"$out/ab_$v.csv"
    timeout 120 "/tmp/prnn_$v" bench --out /tmp/patch_ab.csv rnn --sweep custom --cells lstm,gru \
      --dtypes bf16 --hidden 1152,2048 --batch 4 --steps 256 --repeats 5 --impls prnn-persistent \
      --no-floor >/dev/null 2>&1 && cat /tmp/patch_ab.csv >>"$out/ab_$v.csv"
    timeout 120 "/tmp/prnn_$v" bench --out /tmp/patch_ab.csv rnn --sweep custom --cells lstm \
      --dtypes f32,bf16 --hidden 1024 --batch 4,16 --steps 256 --repeats 5 \
      --impls prnn-persistent --no-floor >/dev/null 2>&1 && cat /tmp/patch_ab.csv >>"$out/ab_$v.csv"
  done
done
python3 - "$out" <<'PY'
import csv, collections, statistics, sys
vals = collections.defaultdict(list)
for v in ("patch", "tree"):
    for row in csv.reader(l for l in open(sys.argv[1] + "/ab_%s.csv" % v) if not l.startswith("#")):
        if len(row) < 6 or row[0] == "suite" or "us_per_step" not in row[3]:
            continue
        vals[(row[1], row[2], row[3], v)].append(float(row[4]))
for key in sorted({k[:3] for k in vals}):
    m = {v: statistics.median(vals[key + (v,)]) for v in ("patch", "tree") if vals.get(key + (v,))}
    if len(m) == 2:
        print("%-40s %-22s %-20s tree %7.3f  patch %7.3f (%+5.1f%%)"
              % (key + (m["tree"], m["patch"], 100 * (m["patch"] / m["tree"] - 1))))
PY
