#!/usr/bin/env bash
# Builds prnn_x_exchange_lab (build/gpu) and runs it (GPU machine, repo root) at the tensor-core
# backward's B = 4 shapes into OUT/x_exchange.csv: H = 1024 (R = 8), 1152 (R = 9), 2048
# (R = 16), 128 CTAs each, and H = 1152 at R = 18 (64 CTAs); three rounds of the nine layouts.
# Prints the medians per layout and shape. About a minute.
# Usage: bench/persistent/x_exchange_lab.sh OUT
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${1:?usage: x_exchange_lab.sh OUT}
mkdir -p "$out"
source bench/persistent/build_gpu.sh
lab=$(build_lab "$out" prnn_x_exchange_lab) || exit 1
for shape in "1024 8" "1152 9" "2048 16" "1152 18"; do
  timeout 60 "$lab" $shape 256 >>"$out/x_exchange.csv"; echo "H R = $shape rc $?"
done
python3 bench/persistent/x_exchange_summary.py "$out/x_exchange.csv"
