#!/usr/bin/env bash
# A/B of two source trees in one GPU call: this tree ("new") against a copy of it with the files
# under OVERLAY laid over it ("old"; OVERLAY mirrors the repository's paths, e.g.
# OVERLAY/src/persistent/warp_rows_kernel.cuh). Builds prnn_cli of both for sm_90 in parallel,
# then runs `prnn bench --out OUT/<old|new>_<round>.csv <bench args>` alternately, ROUNDS times.
#   bench/persistent/ab.sh OVERLAY OUT ROUNDS <bench args...>
# Example: bench/persistent/ab.sh /tmp/old_files "$OUT" 2 rnn --sweep custom --cells relu \
#            --dtypes f32 --hidden 1152 --batch 1,2,4 --steps 256 --repeats 10 --impls prnn-persistent
set -euo pipefail
cd "$(dirname "$0")/../.."
overlay=$(realpath "$1") out=$(realpath "$2") rounds=$3
shift 3
old=/tmp/prnn_ab_old
rm -rf "$old" && mkdir -p "$old"
tar --exclude=./build -cf - . | tar -xf - -C "$old"
(cd "$overlay" && find . -type f -print0 | xargs -0 -I{} cp {} "$old/{}")
jobs=$(($(nproc) / 2))
build() {
  (cd "$1" && cmake --preset gpu >/dev/null && cmake --build --preset gpu -j "$jobs" --target prnn_cli >"$2" 2>&1) ||
    { tail -30 "$2"; exit 1; }
}
build . "$out/build_new.log" &
build "$old" "$out/build_old.log" &
wait %1 && wait %2
for r in $(seq 1 "$rounds"); do
  "$old/build/gpu/tools/prnn/prnn" bench --out "$out/old_$r.csv" "$@" >/dev/null
  build/gpu/tools/prnn/prnn bench --out "$out/new_$r.csv" "$@" >/dev/null
done
