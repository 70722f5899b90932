// Host-side entry points of the scan kernels (one dispatch point per kernel family).
#pragma once

#include <cuda_runtime.h>

#include "scan/scan_params.h"

namespace prnn::scan {

// One thread per lane, all steps in order.
void launch_serial_scan(Mode mode, Elem elem, const ScanParams& p, cudaStream_t stream);

// Tiled parallel scan with a deterministic multi-level lookback (device_scan.cu).
struct ParallelTiling {
  int vector = 1;           // V: channels per thread (4 needs C % 4 == 0 and aligned tensors)
  int threads_per_row = 1;  // TPR
  int lane_width = 0;       // W = V * TPR: channels per tile
  int tile_steps = 0;       // L: steps per tile
};
ParallelTiling parallel_tiling(Mode mode, std::int64_t channels, bool vectorized);
void launch_parallel_scan(Mode mode, Elem elem, const ParallelTiling& tiling, const ScanParams& p,
                          cudaStream_t stream);

}  // namespace prnn::scan
