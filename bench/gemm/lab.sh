#!/usr/bin/env bash
# The skinny GEMM lab (bench/gemm/NOTES.md) on a GPU machine, from the repo root, in about a
# minute: prnn_core and prnn_reference by CMake (the gpu preset), then, for the tree and for each
# patch given, the skinny GEMM, its GPU test (gemm_gpu_test's source) and prnn_skinny_lab built by
# hand (no rnn_kernels.cu). Every variant's test runs first; then the labs, alternated over ROUNDS
# rounds (default 2). Results: OUTDIR/<name>/tests.txt and OUTDIR/<name>/lab_<round>.csv.
# Usage: bench/gemm/lab.sh OUTDIR [NAME=PATCH]...
#   e.g. bench/gemm/lab.sh /tmp/out s5=my_split.patch   (a patch of src/gemm, applied with -p1)
set -euo pipefail
out=${1:?usage: bench/gemm/lab.sh OUTDIR [NAME=PATCH]...}
shift
rounds=${ROUNDS:-2}
mkdir -p "$out"
cmake --preset gpu > "$out/configure.log" 2>&1
cmake --build --preset gpu -j "$(nproc)" --target prnn_core prnn_reference > "$out/build.log" 2>&1
lib=build/gpu/src
work=$(mktemp -d)
flags=(-std=c++20 -O3 -DPRNN_WITH_CUDA=1 -DFMT_SHARED -I include -I tests -I .)
libs=("$lib/libprnn_reference.a" "$lib/libprnn_core.a" -L/usr/local/cuda/lib64 -lcublas -lcudart
      -lfmt)

# build NAME [PATCH]: the variant's sources under $work/NAME/src (the tree's src/gemm, patched).
build() {
  local name=$1 patch=${2:-} dir=$work/$1
  mkdir -p "$dir/src" "$out/$name"
  cp -r src/gemm "$dir/src/"
  if [ -n "$patch" ]; then patch -s -p1 -d "$dir" < "$patch"; fi
  local inc=(-I "$dir/src" -I src)
  nvcc "${flags[@]}" "${inc[@]}" --generate-code=arch=compute_90,code=sm_90 -Xptxas -v \
    -c "$dir/src/gemm/skinny_gemm.cu" -o "$dir/k.o" > "$out/$name/ptxas.txt" 2>&1
  g++ "${flags[@]}" "${inc[@]}" -I/usr/local/cuda/include -c "$dir/src/gemm/skinny_gemm.cpp" \
    -o "$dir/g.o"
  g++ "${flags[@]}" "${inc[@]}" -I/usr/local/cuda/include -c bench/gemm/skinny_lab.cpp -o "$dir/l.o"
  g++ "${flags[@]}" "${inc[@]}" -I/usr/local/cuda/include -c tests/gemm/skinny_gemm_gpu_test.cpp \
    -o "$dir/t.o"
  g++ "${flags[@]}" -I src -I/usr/local/cuda/include -c tests/support/test_main.cpp -o "$dir/m.o"
  g++ -o "$dir/lab" "$dir/l.o" "$dir/g.o" "$dir/k.o" "${libs[@]}"
  g++ -o "$dir/test" "$dir/t.o" "$dir/m.o" "$dir/g.o" "$dir/k.o" "${libs[@]}" -lgtest -lpthread
}

names=(tree)
build tree
for spec in "$@"; do
  name=${spec%%=*}
  build "$name" "${spec#*=}"
  names+=("$name")
done
for name in "${names[@]}"; do
  status=0
  "$work/$name/test" > "$out/$name/tests.txt" 2>&1 || status=$?
  echo "$name: $(grep -E '^\[  (PASSED|FAILED)  \] [0-9]+ test' "$out/$name/tests.txt" | tr '\n' ' ')(exit $status)"
done
for round in $(seq 1 "$rounds"); do
  for name in "${names[@]}"; do
    "$work/$name/lab" "$out/$name/lab_$round.csv" > /dev/null
  done
done
rm -rf "$work"
echo "lab: ${names[*]}, $rounds rounds in $out"
