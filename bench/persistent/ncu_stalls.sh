#!/usr/bin/env bash
# One kernel launch of a command under Nsight Compute, with what the persistent kernels' profiles
# read: warp states, scheduler, instruction, memory and launch statistics, and the stall samples
# per SASS instruction. Used by wide_rows_profile.sh and library_profile.sh.
#   bench/persistent/ncu_stalls.sh OUT KERNEL_REGEX LAUNCH_SKIP COMMAND [ARGS...]
# KERNEL_REGEX matches the demangled name; the LAUNCH_SKIP + 1-th matching launch is profiled.
# Writes into OUT: profile.ncu-rep (the report), ncu.log, details.txt (the sections as text),
# sass.csv (per SASS instruction: executions and stall samples by reason) and sass_stalls.txt
# (sass_stalls.py's summary of it).
set -euo pipefail
if [ $# -lt 4 ]; then
  echo "usage: ncu_stalls.sh OUT KERNEL_REGEX LAUNCH_SKIP COMMAND [ARGS...]" >&2
  exit 2
fi
out=$1 kernel=$2 skip=$3
shift 3
mkdir -p "$out"
ncu --kernel-name-base demangled --kernel-name "regex:$kernel" --launch-skip "$skip" \
  --launch-count 1 --section WarpStateStats --section SchedulerStats --section InstructionStats \
  --section SourceCounters --section MemoryWorkloadAnalysis --section ComputeWorkloadAnalysis \
  --section LaunchStats --section Occupancy --import-source no -f -o "$out/profile" \
  "$@" >"$out/ncu.log" 2>&1
ncu --import "$out/profile.ncu-rep" --page details >"$out/details.txt"
ncu --import "$out/profile.ncu-rep" --page source --print-source sass --csv >"$out/sass.csv"
python3 "$(dirname "$0")/sass_stalls.py" "$out/sass.csv" >"$out/sass_stalls.txt"
