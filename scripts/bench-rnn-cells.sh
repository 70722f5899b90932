#!/usr/bin/env bash
# LSTM and GRU side by side in one tidy CSV: `prnn bench lstm`, `prnn bench gru` (prnn persistent,
# prnn GEMM-per-step, cuDNN standard / persist_static / persist_dynamic) and PyTorch nn.LSTM /
# nn.GRU (scripts/bench_torch_rnn.py) on exactly the cases the prnn runs listed.
#
#   scripts/bench-rnn-cells.sh OUT.csv [--sweep targets[,figure3,figure4]] [--dtypes f32,bf16,f16]
#                              [--repeats N] [--prnn PATH] [--python PY]
#
# OUT.csv starts with this command and every part's '#' header lines (command, GPU, torch
# version), then one column header and the rows of all three runs (suites lstm and gru). The
# parts go to OUT.csv.parts/ as well. Exit status non-zero if any part failed (PyTorch missing
# included): the rows of the parts that ran are still in OUT.csv.
set -uo pipefail
cd "$(dirname "$0")/.."

usage() { sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
[ $# -ge 1 ] || usage
case "$1" in -h|--help) usage ;; esac
out=$1
shift
sweep=targets
dtypes=f32,bf16,f16
repeats=10
prnn=build/gpu/tools/prnn/prnn
python=python3
while [ $# -gt 0 ]; do
  case "$1" in
    --sweep) sweep=$2; shift 2 ;;
    --dtypes) dtypes=$2; shift 2 ;;
    --repeats) repeats=$2; shift 2 ;;
    --prnn) prnn=$2; shift 2 ;;
    --python) python=$2; shift 2 ;;
    *) echo "bench-rnn-cells.sh: unknown argument '$1'" >&2; usage ;;
  esac
done
if [ ! -x "$prnn" ]; then
  echo "bench-rnn-cells.sh: no prnn binary at '$prnn' (build with: cmake --preset gpu && cmake --build --preset gpu; or pass --prnn)" >&2
  exit 1
fi

parts="$out.parts"
mkdir -p "$parts"
status=0
for cell in lstm gru; do
  if ! "$prnn" bench --out "$parts/$cell.csv" "$cell" --sweep "$sweep" --dtypes "$dtypes" \
      --repeats "$repeats"; then
    echo "bench-rnn-cells.sh: prnn bench $cell failed" >&2
    status=1
  fi
done
prnn_parts=()
for cell in lstm gru; do [ -s "$parts/$cell.csv" ] && prnn_parts+=("$parts/$cell.csv"); done
rm -f "$parts/torch.csv"
if [ ${#prnn_parts[@]} -gt 0 ]; then
  cat "${prnn_parts[@]}" >"$parts/cases.csv"
  if ! "$python" scripts/bench_torch_rnn.py --cases-from "$parts/cases.csv" --repeats "$repeats" \
      --out "$parts/torch.csv"; then
    echo "bench-rnn-cells.sh: the PyTorch rows failed (see the message above)" >&2
    status=1
  fi
fi

all=("${prnn_parts[@]}")
[ -s "$parts/torch.csv" ] && all+=("$parts/torch.csv")
{
  echo "# cmd: scripts/bench-rnn-cells.sh $out --sweep $sweep --dtypes $dtypes --repeats $repeats"
  [ ${#all[@]} -gt 0 ] && grep -h '^#' "${all[@]}"
  echo "suite,case,impl,metric,value,unit"
  [ ${#all[@]} -gt 0 ] && grep -hv '^#' "${all[@]}" | grep -v '^suite,case,impl,metric,value,unit$'
} >"$out"
echo "bench-rnn-cells.sh: wrote $out ($(grep -cv '^#' "$out") lines with the header)" >&2
exit $status
