#!/usr/bin/env bash
# The tensor-core backward's step by phase (GPU machine, repo root): applies
# patches/tc_backward_stamps.patch, builds prnn_cli (build/gpu), runs the 16-bit LSTM at B = 4 and
# H = 1024, 1152, 2048 (forward + backward; the backward data on tensor cores there, 9 units a CTA
# up to 1152, 16 at 2048), each call enqueued directly (PRNN_PERSISTENT_GRAPHS=0) so that the 8th backward
# launch dumps the stamps, and prints tc_stamps.py's summary of each; then takes the
# patch out again. Usage: bench/persistent/tc_backward_stamps.sh OUT
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${1:?usage: tc_backward_stamps.sh OUT}
mkdir -p "$out"
git apply bench/persistent/patches/tc_backward_stamps.patch || exit 1
source bench/persistent/build_gpu.sh
if build_gpu "$out" prnn_cli; then
  for c in "lstm 1024 3" "lstm 1152 3" "lstm 2048 4"; do  # cell, H, finishing warps
    set -- $c
    f="$out/tcb_$1_$2.bin"
    PRNN_TCB_STAMPS=$f PRNN_PERSISTENT_GRAPHS=0 build/gpu/tools/prnn/prnn bench \
      --out /tmp/tcb_stamps.csv rnn --sweep custom --cells "$1" --hidden "$2" --batch 4 --steps 256 \
      --dtypes bf16 --repeats 10 --impls prnn-persistent --no-floor >/dev/null 2>&1
    echo "== $1 bf16 H=$2 B=4, backward data on tensor cores"
    if [ -f "$f" ]; then
      python3 bench/persistent/tc_stamps.py backward "$f" "$3"
      rm -f "$f"
    else
      echo "  no stamps (the backward did not run on tensor cores?)"
    fi
  done
fi
git apply -R bench/persistent/patches/tc_backward_stamps.patch
