#!/usr/bin/env bash
# Builds and runs bench/persistent/mma_lab.cu (GPU machine): the tensor-core persistent LSTM
# forward prototype. Arguments: [T] [repeats]. One CSV-like line per case: µs per step (median
# of the repeats, kernel start-up included), registers, spills, and the error against an fp64
# reference over the first steps.
set -euo pipefail
cd "$(dirname "$0")/../.."
mkdir -p build/gpu
nvcc -std=c++17 -O3 -arch=sm_90 bench/persistent/mma_lab.cu -o build/gpu/mma_lab
build/gpu/mma_lab "$@"
