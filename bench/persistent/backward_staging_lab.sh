#!/usr/bin/env bash
# Builds and runs bench/persistent/backward_staging_lab.cu (GPU machine): the gated warp-rows
# backward's step between poll and finish with its product on the FMA pipes, on tensor cores
# with hi/lo u16 staging, and with records padded to 4 units (STS.64), each staging alone too.
# Argument: [iterations]. About 30 seconds.
set -euo pipefail
cd "$(dirname "$0")/../.."
mkdir -p build/gpu
nvcc -std=c++17 -O3 -arch=sm_90 -Xptxas -v bench/persistent/backward_staging_lab.cu \
  -o build/gpu/backward_staging_lab 2>&1 | grep -E "registers|spill" | sed 's/^/  ptxas: /'
build/gpu/backward_staging_lab "$@"
