// CUDA-event timing for the benchmark drivers: warm up, time each run with events, return the
// median in microseconds.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <functional>
#include <vector>

#include "core/cuda_check.h"

namespace prnn::bench {

inline double median_us(const std::function<void()>& run, int repeats, int warmup = 3,
                        cudaStream_t stream = nullptr) {
  for (int i = 0; i < warmup; ++i) run();
  cudaEvent_t start, stop;
  PRNN_CUDA_CHECK(cudaEventCreate(&start));
  PRNN_CUDA_CHECK(cudaEventCreate(&stop));
  std::vector<double> us;
  for (int i = 0; i < repeats; ++i) {
    PRNN_CUDA_CHECK(cudaEventRecord(start, stream));
    run();
    PRNN_CUDA_CHECK(cudaEventRecord(stop, stream));
    PRNN_CUDA_CHECK(cudaEventSynchronize(stop));
    float ms = 0;
    PRNN_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
    us.push_back(1000.0 * ms);
  }
  PRNN_CUDA_CHECK_NOTHROW(cudaEventDestroy(start));
  PRNN_CUDA_CHECK_NOTHROW(cudaEventDestroy(stop));
  std::nth_element(us.begin(), us.begin() + us.size() / 2, us.end());
  return us[us.size() / 2];
}

}  // namespace prnn::bench
