#!/usr/bin/env bash
# Fresh machine -> test results: installs what is missing, builds everything (CUDA code included,
# warnings as errors), runs every test labelled `cpu`. PRESET=cpu-only builds without CUDA.
set -euo pipefail
cd "$(dirname "$0")/.."
preset="${PRESET:-ci}"
scripts/install-deps.sh
cmake --preset "$preset" >/dev/null
cmake --build --preset "$preset"
ctest --preset "$preset" -j "$(nproc)"
