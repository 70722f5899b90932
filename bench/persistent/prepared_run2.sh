#!/usr/bin/env bash
# A prepared A/B of four patches, in one GPU call: three to the gated and tensor-core kernels'
# finish (bench/persistent/NOTES.md, "What the product cost was: the finish"), one to the 16-bit
# layers' input GEMM. On the GPU machine, from the repo root:
#   bench/persistent/prepared_run2.sh OUT
# Builds prnn_cli six times (build/gpu), each variant from the tree with:
#   tree    nothing;
#   sigma   patches/sigmoid_branch_free.patch: σ branch-free in every persistent backward's
#           finisher and in the tensor-core forward's LSTM;
#   halves  patches/gate_sums_halves.patch: the gated tensor-core forward's gate sums over two
#           half-warps of lanes;
#   cols    patches/tensor_core_adjacent_lo.patch: the tensor-core kernels' packed chunks with hi
#           and lo in adjacent n columns, added in the lane (no shuffles in the backward, half
#           the finisher's loads in the forward);
#   all     the three;
#   gemm16  patches/gemm16_input.patch (alone): a 16-bit layer's all-step input GEMM of layer 0
#           straight from its bf16 / f16 x and W_ih on tensor cores (cublasGemmEx), instead of
#           TF32 over their fp32 copies.
# Then alternates the six binaries three times over `prnn bench rnn` (LSTM and GRU, f32 and
# bf16, H = 1024, 1152, 2048, B = 2, 4) into OUT/<variant>.csv (three runs each, one after
# another), and prints the medians side by side. About 8 minutes on an H200, most of it
# building. Takes the patches out again.
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${1:?usage: bench/persistent/prepared_run2.sh OUT}
mkdir -p "$out"
P=bench/persistent/patches
cmake --preset gpu >"$out/configure.log" 2>&1
build() {  # name, patches...
  local name=$1
  shift
  for p in "$@"; do git apply "$P/$p" || return 1; done
  if cmake --build --preset gpu -j "$(nproc)" --target prnn_cli >"$out/build_$name.log" 2>&1; then
    cp build/gpu/tools/prnn/prnn "/tmp/prnn_$name"
    rm -f "$out/build_$name.log"
  else
    tail -30 "$out/build_$name.log"
  fi
  local i
  for ((i = $#; i >= 1; i--)); do git apply -R "$P/${!i}"; done
}
build tree
build sigma sigmoid_branch_free.patch
build halves gate_sums_halves.patch
build cols tensor_core_adjacent_lo.patch
build all sigmoid_branch_free.patch gate_sums_halves.patch tensor_core_adjacent_lo.patch
build gemm16 gemm16_input.patch
echo "built in $SECONDS s"
for r in 1 2 3; do
  for v in tree sigma halves cols all gemm16; do
    [ -x "/tmp/prnn_$v" ] || continue
    timeout 120 "/tmp/prnn_$v" bench --out "$out/${v}_r$r.csv" rnn --sweep custom --cells lstm,gru \
      --dtypes f32,bf16 --hidden 1024,1152,2048 --batch 2,4 --steps 256 --repeats 5 \
      --impls prnn-persistent --no-floor >/dev/null 2>&1 || echo "$v r$r failed"
  done
done
python3 - "$out" <<'PY'
import csv, glob, collections, statistics, sys
vals = collections.defaultdict(list)
for f in glob.glob(sys.argv[1] + '/*_r*.csv'):
    v = f.split('/')[-1].split('_r')[0]
    for row in csv.reader(l for l in open(f) if not l.startswith('#')):
        if len(row) < 6 or row[0] == 'suite' or 'us_per_step' not in row[3]:
            continue
        vals[(row[1].replace(';T=256', ''), row[2], row[3].replace('_us_per_step', ''), v)].append(float(row[4]))
names = ['tree', 'sigma', 'halves', 'cols', 'all', 'gemm16']
for k in sorted({k[:3] for k in vals}):
    m = {v: statistics.median(vals[k + (v,)]) for v in names if vals.get(k + (v,))}
    if 'tree' not in m:
        continue
    cells = ' '.join('%s %6.3f (%+5.1f%%)' % (v, m[v], 100 * (m[v] / m['tree'] - 1)) for v in names if v in m)
    print('%-32s %-22s %-7s %s' % (k[0], k[1], k[2], cells))
PY
# One file per variant (the machine returns few files): the runs one after another.
for v in tree sigma halves cols all gemm16; do
  for r in 1 2 3; do
    [ -f "$out/${v}_r$r.csv" ] && { echo "# run $r"; cat "$out/${v}_r$r.csv"; } >>"$out/$v.csv"
    rm -f "$out/${v}_r$r.csv"
  done
done
