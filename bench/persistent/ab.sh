#!/usr/bin/env bash
# A/B of two source trees in one GPU call: this tree ("new") against a copy of it with the files
# under OVERLAY laid over it ("old"; OVERLAY mirrors the repository's paths, e.g.
# OVERLAY/src/persistent/warp_rows_kernel.cuh). Builds prnn_cli of both for sm_90 in parallel,
# then runs `prnn bench --out OUT/<new|old>_<round>.csv <bench args>` alternately, ROUNDS times,
# and prints the medians (bench/persistent/ab_trees.sh, of which this is the two-tree case).
#   bench/persistent/ab.sh OVERLAY OUT ROUNDS <bench args...>
# Example: bench/persistent/ab.sh /tmp/old_files "$OUT" 2 rnn --sweep custom --cells relu \
#            --dtypes f32 --hidden 1152 --batch 1,2,4 --steps 256 --repeats 10 --impls prnn-persistent
set -euo pipefail
[ $# -ge 4 ] || { sed -n '2,9s/^# \{0,1\}//p' "$0" >&2; exit 2; }
overlay=$1 out=$2 rounds=$3
shift 3
AB_BASE=new exec "$(dirname "$0")/ab_trees.sh" "$out" "$rounds" "old=$overlay" -- "$@"
