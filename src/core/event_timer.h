// GPU time between two points of one stream (internal; needs the CUDA runtime).
//   EventTimer t(stream);  t.start();  ...enqueue...;  t.stop();  t.seconds()
// seconds() waits for the stop event and is 0 when stop() has not been recorded since the last
// start() (a pass that did not run).
#pragma once

#include <cuda_runtime.h>

#include "core/cuda_check.h"

namespace prnn {

class EventTimer {
 public:
  explicit EventTimer(cudaStream_t stream) : stream_(stream) {
    PRNN_CUDA_CHECK(cudaEventCreate(&start_));
    PRNN_CUDA_CHECK(cudaEventCreate(&stop_));
  }
  ~EventTimer() {
    PRNN_CUDA_CHECK_NOTHROW(cudaEventDestroy(start_));
    PRNN_CUDA_CHECK_NOTHROW(cudaEventDestroy(stop_));
  }
  EventTimer(const EventTimer&) = delete;
  EventTimer& operator=(const EventTimer&) = delete;

  void start() {
    PRNN_CUDA_CHECK(cudaEventRecord(start_, stream_));
    stopped_ = false;
  }
  void stop() {
    PRNN_CUDA_CHECK(cudaEventRecord(stop_, stream_));
    stopped_ = true;
  }
  double seconds() const {
    if (!stopped_) return 0.0;
    PRNN_CUDA_CHECK(cudaEventSynchronize(stop_));
    float ms = 0.0f;
    PRNN_CUDA_CHECK(cudaEventElapsedTime(&ms, start_, stop_));
    return 1e-3 * static_cast<double>(ms);
  }

 private:
  cudaStream_t stream_;
  cudaEvent_t start_ = nullptr, stop_ = nullptr;
  bool stopped_ = false;
};

}  // namespace prnn
