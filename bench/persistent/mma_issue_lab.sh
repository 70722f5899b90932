#!/usr/bin/env bash
# Builds and runs bench/persistent/mma_issue_lab.cu (GPU machine): what a warp's mma.sync costs
# in the shape of the gated warp-rows forward's product, beside the FMA form and single-warp
# chains, and the same product by wgmma (sm_90a). Argument: [iterations]. One line per case: cycles per iteration (median over CTAs) and
# per mma of a warp.
set -euo pipefail
cd "$(dirname "$0")/../.."
mkdir -p build/gpu
nvcc -std=c++17 -O3 -arch=sm_90a bench/persistent/mma_issue_lab.cu -o build/gpu/mma_issue_lab
build/gpu/mma_issue_lab "$@"
