# Sourced by the GPU-machine scripts of bench/persistent (patch_ab.sh, knob_ab.sh,
# exchange_place_lab.sh, x_exchange_lab.sh, tc_forward_stamps.sh, tc_backward_stamps.sh).
# build_gpu OUT TARGET...: configures the gpu preset (once per shell) and builds TARGETs in
# build/gpu, the log in OUT/build.log (removed on success); on failure prints the log's tail and
# returns 1.
# keep_cli NAME: the freshly built prnn CLI copied to /tmp/prnn_NAME.
# build_lab OUT TARGET: build_gpu OUT TARGET (its messages on stderr), then prints the built
# executable's path.
build_gpu() {
  local out=$1
  shift
  if [ -z "${prnn_gpu_configured:-}" ]; then
    cmake --preset gpu >/dev/null 2>&1
    prnn_gpu_configured=1
  fi
  cmake --build --preset gpu -j "$(nproc)" --target "$@" >"$out/build.log" 2>&1 ||
    { tail -30 "$out/build.log"; return 1; }
  rm -f "$out/build.log"
}
keep_cli() {
  cp build/gpu/tools/prnn/prnn "/tmp/prnn_$1"
}
build_lab() {
  build_gpu "$1" "$2" >&2 && find build/gpu -name "$2" -type f -perm -u+x | head -1
}
