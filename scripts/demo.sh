#!/usr/bin/env bash
# Fresh machine -> `prnn demo`: installs what is missing, builds (Release), runs the demo.
# PRESET=cpu-only builds without CUDA. Extra arguments go to `prnn demo`.
set -euo pipefail
cd "$(dirname "$0")/.."
preset="${PRESET:-release}"
scripts/install-deps.sh
cmake --preset "$preset" >/dev/null
cmake --build --preset "$preset" --target prnn_cli
"build/$preset/tools/prnn/prnn" demo "$@"
