#!/usr/bin/env bash
# The LSTM's gated warp-rows backward at BB = 1 with the IEEE σ (patches/
# gated_backward_sigma_bb1.patch) against the tree's branch-free σ there, in one GPU call (GPU
# machine, repo root): builds prnn_cli of the tree and of the patched tree (build/gpu), then
# alternates the two three times over `prnn bench rnn` of the LSTM in f32 and bf16 at H = 1024,
# 1152, B = 1 (and the GRU, which the patch leaves as it is, for the spread) into
# OUT/sbb1_{tree,ieee}.csv, prints the medians and takes the patch out again. About 3 minutes.
# Usage: bench/persistent/sigma_bb1.sh OUT
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${1:?usage: sigma_bb1.sh OUT}
mkdir -p "$out"
P=bench/persistent/patches/gated_backward_sigma_bb1.patch
cmake --preset gpu >"$out/sbb1_configure.log" 2>&1
build() {  # name
  if cmake --build --preset gpu -j "$(nproc)" --target prnn_cli >"$out/sbb1_build_$1.log" 2>&1; then
    cp build/gpu/tools/prnn/prnn "/tmp/prnn_sbb1_$1"
    rm -f "$out/sbb1_build_$1.log"
  else
    tail -20 "$out/sbb1_build_$1.log"
  fi
}
build tree
git apply "$P" || exit 1
build ieee
git apply -R "$P"
rm -f "$out/sbb1_configure.log"
for r in 1 2 3; do
  for v in tree ieee; do
    [ -x "/tmp/prnn_sbb1_$v" ] || continue
    echo "# run $r" >>"$out/sbb1_$v.csv"
    timeout 120 "/tmp/prnn_sbb1_$v" bench --out /tmp/sbb1.csv rnn --sweep custom --cells lstm,gru \
      --dtypes f32,bf16 --hidden 1024,1152 --batch 1 --steps 256 --repeats 5 \
      --impls prnn-persistent --no-floor >/dev/null 2>&1 && cat /tmp/sbb1.csv >>"$out/sbb1_$v.csv"
  done
done
python3 - "$out" <<'PY'
import csv, collections, statistics, sys
vals = collections.defaultdict(list)
for v in ("tree", "ieee"):
    for row in csv.reader(l for l in open(sys.argv[1] + "/sbb1_%s.csv" % v) if not l.startswith("#")):
        if len(row) < 6 or row[0] == "suite" or "us_per_step" not in row[3]:
            continue
        vals[(row[1], row[2], row[3], v)].append(float(row[4]))
for k in sorted({k[:3] for k in vals}):
    m = {v: statistics.median(vals[k + (v,)]) for v in ("tree", "ieee") if vals.get(k + (v,))}
    if len(m) == 2:
        print("%-36s %-22s %-20s branch-free %6.3f  IEEE %6.3f  (%+5.1f%%)"
              % (k[0], k[1], k[2], m["tree"], m["ieee"], 100 * (m["ieee"] / m["tree"] - 1)))
PY
