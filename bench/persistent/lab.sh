#!/usr/bin/env bash
# Builds bench/persistent/lab.cpp against the gpu preset's libraries and runs it (GPU machine).
set -euo pipefail
cd "$(dirname "$0")/../.."
b=build/gpu
g++ -std=c++20 -O2 -Iinclude -I/usr/local/cuda/include bench/persistent/lab.cpp -o $b/persistent_lab \
  $b/src/libprnn.a $b/src/libprnn_reference.a $b/src/libprnn_gpu.a $b/src/libprnn_core.a \
  -lfmt -L/usr/local/cuda/lib64 -lcudart -lcublas
$b/persistent_lab "$@"
