#!/usr/bin/env bash
# Builds and runs bench/persistent/forward_staging_lab.cu (GPU machine): the gated tensor-core
# forward's staging and B loads in the kernel's form (hi/lo n rows, STS.U16, LDS.32) and
# transposed (one STS.32 a value, ldmatrix.x4.trans), each staging alone too, after checking that
# both forms give the same partial sums. Argument: [iterations]. About 20 seconds.
set -euo pipefail
cd "$(dirname "$0")/../.."
mkdir -p build/gpu
nvcc -std=c++17 -O3 -arch=sm_90 -Xptxas -v bench/persistent/forward_staging_lab.cu \
  -o build/gpu/forward_staging_lab 2>&1 | grep -E "registers|spill" | sed 's/^/  ptxas: /'
build/gpu/forward_staging_lab "$@"
