#!/usr/bin/env bash
# Installs what prnn needs to build, from Debian packages, if anything is missing.
# Needs root (or sudo) to install; otherwise prints the exact apt-get line and stops.
set -euo pipefail

packages=(cmake ninja-build g++ libgtest-dev libcli11-dev nlohmann-json3-dev libfmt-dev)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if [ ${#missing[@]} -gt 0 ]; then
  line="apt-get update && apt-get install -y ${missing[*]}"
  if [ "$(id -u)" -eq 0 ]; then
    echo "prnn: installing ${missing[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
  elif command -v sudo >/dev/null && sudo -n true 2>/dev/null; then
    echo "prnn: installing ${missing[*]} with sudo"
    sudo apt-get update -qq
    sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
  else
    echo "prnn: missing packages. Run as root:" >&2
    echo "  $line" >&2
    exit 1
  fi
fi

# The CUDA toolkit is not a Debian package here: the default build needs nvcc; without it,
# use the cpu-only preset.
if ! command -v nvcc >/dev/null && [ ! -x /usr/local/cuda/bin/nvcc ]; then
  echo "prnn: no CUDA toolkit (nvcc) found; build with PRESET=cpu-only" >&2
fi
