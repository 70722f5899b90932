// CUDA-event timing for the benchmark drivers: warm up, time each run with events, return the
// median in microseconds.
//   median_us(run, repeats, warmup, stream)        run() once per timed run
//   graph_median_us(enqueue, stream, launches, replays)
//                                                   enqueue() captured `launches` times into a
//                                                   CUDA graph, replayed once to warm up and
//                                                   `replays` times timed: median per launch
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <functional>
#include <vector>

#include "core/cuda_check.h"
#include "core/event_timer.h"

namespace prnn::bench {

inline double median_us(const std::function<void()>& run, int repeats, int warmup = 3,
                        cudaStream_t stream = nullptr) {
  for (int i = 0; i < warmup; ++i) run();
  EventTimer timer(stream);
  std::vector<double> us;
  for (int i = 0; i < repeats; ++i) {
    timer.start();
    run();
    timer.stop();
    us.push_back(1e6 * timer.seconds());
  }
  std::nth_element(us.begin(), us.begin() + us.size() / 2, us.end());
  return us[us.size() / 2];
}

inline double graph_median_us(const std::function<void()>& enqueue, cudaStream_t stream,
                              int launches = 20, int replays = 7) {
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  PRNN_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  for (int i = 0; i < launches; ++i) enqueue();
  PRNN_CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
  PRNN_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  const double us =
      median_us([&] { PRNN_CUDA_CHECK(cudaGraphLaunch(exec, stream)); }, replays, 1, stream);
  PRNN_CUDA_CHECK_NOTHROW(cudaGraphExecDestroy(exec));
  PRNN_CUDA_CHECK_NOTHROW(cudaGraphDestroy(graph));
  return us / launches;
}

}  // namespace prnn::bench
