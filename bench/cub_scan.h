// CUB scan-by-key baseline for the linear recurrence (see cub_scan.cu).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "prnn/tensor.h"

namespace prnn::bench {

class CubScan {
 public:
  CubScan(std::int64_t lanes, std::int64_t steps);
  // pairs_in/out: float2 (a, x) per element, lane-major [lanes, steps]; h = out.y.
  void run(const void* pairs_in, void* pairs_out, cudaStream_t stream);

 private:
  std::int64_t n_;
  DeviceBuffer keys_, temp_;
};

}  // namespace prnn::bench
