#!/usr/bin/env bash
# The tensor-core forward's step by phase (GPU machine, repo root): applies EXTRA_PATCH where
# given, then patches/tc_forward_stamps.patch over it (one line of context, so that it fits a
# patch of the staging), builds prnn_cli (build/gpu), runs the 16-bit LSTM at H = 1024, B = 8,
# 16, 32 and H = 2048, B = 16, and the GRU at H = 1152, B = 16 (the forward on tensor cores
# there), each call enqueued directly (PRNN_PERSISTENT_GRAPHS=0) so that the 8th forward launch
# dumps the stamps, and prints tc_stamps.py's summary of each; then takes the patches
# out again.
# Usage: [EXTRA_PATCH=P] bench/persistent/tc_forward_stamps.sh OUT
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${1:?usage: tc_forward_stamps.sh OUT}
mkdir -p "$out"
extra=${EXTRA_PATCH:-}
[ -z "$extra" ] || git apply "$extra" || exit 1
if ! git apply -C1 bench/persistent/patches/tc_forward_stamps.patch; then
  [ -z "$extra" ] || git apply -R "$extra"
  exit 1
fi
source bench/persistent/build_gpu.sh
if build_gpu "$out" prnn_cli; then
  for c in "lstm 1024 8 3" "lstm 1024 16 5" "lstm 1024 32 5" "lstm 2048 16 8" "gru 1152 16 5"; do
    set -- $c  # cell, H, B, finishing warps
    f="$out/tcf_$1_$2_$3.bin"
    PRNN_TCF_STAMPS=$f PRNN_PERSISTENT_GRAPHS=0 build/gpu/tools/prnn/prnn bench \
      --out /tmp/tcf_stamps.csv rnn --sweep custom --cells "$1" --hidden "$2" --batch "$3" \
      --steps 256 --dtypes bf16 --repeats 10 --impls prnn-persistent --no-floor >/dev/null 2>&1
    echo "== $1 bf16 H=$2 B=$3, forward on tensor cores"
    if [ -f "$f" ]; then
      python3 bench/persistent/tc_stamps.py forward "$f" "$4"
      rm -f "$f"
    else
      echo "  no stamps (the forward did not run on tensor cores?)"
    fi
  done
fi
git apply -R -C1 bench/persistent/patches/tc_forward_stamps.patch
[ -z "$extra" ] || git apply -R "$extra"
