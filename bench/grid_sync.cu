// Grid-synchronization floor.
//   Kernel:  `syncs` calls of cooperative_groups::this_grid().sync(), nothing else: every CTA
//            arrives, waits for all the others, and goes on.
// Launch:   cudaLaunchCooperativeKernel, one CTA per SM, kGridSyncThreads threads, no shared
//           memory; co-residency checked with the occupancy API before launching.
// Result:   median launch time / syncs (the launch overhead is spread over 10^4 syncs).
#include <cooperative_groups.h>
#include <cuda_runtime.h>

#include <string>

#include "bench/bench_timer.h"
#include "bench/grid_sync.h"
#include "core/cuda_check.h"
#include "prnn/error.h"

namespace prnn::bench {
namespace {

__global__ void __launch_bounds__(kGridSyncThreads) grid_sync_kernel(int syncs) {
  cooperative_groups::grid_group grid = cooperative_groups::this_grid();
  for (int i = 0; i < syncs; ++i) grid.sync();
}

}  // namespace

int grid_sync_ctas(int device) {
  int sms = 0;
  PRNN_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  return sms;
}

GridSyncResult time_grid_sync(int device, int syncs, int repeats, cudaStream_t stream) {
  if (syncs <= 0)
    throw InvalidArgument("grid sync count: expected > 0, got " + std::to_string(syncs));
  if (repeats <= 0)
    throw InvalidArgument("grid sync repeats: expected > 0, got " + std::to_string(repeats));
  PRNN_CUDA_CHECK(cudaSetDevice(device));
  int cooperative = 0;
  PRNN_CUDA_CHECK(cudaDeviceGetAttribute(&cooperative, cudaDevAttrCooperativeLaunch, device));
  if (cooperative == 0)
    throw Unsupported("grid sync floor",
                      "GPU " + std::to_string(device) + " has no cooperative launch");
  const int ctas = grid_sync_ctas(device);
  int ctas_per_sm = 0;
  PRNN_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&ctas_per_sm, grid_sync_kernel,
                                                                kGridSyncThreads, 0));
  if (ctas_per_sm < 1)
    throw Unsupported("grid sync floor", "the occupancy API allows " + std::to_string(ctas_per_sm) +
                                             " CTAs of " + std::to_string(kGridSyncThreads) +
                                             " threads per SM; one per SM must be co-resident");

  void* args[] = {&syncs};
  auto launch = [&] {
    PRNN_CUDA_CHECK(cudaLaunchCooperativeKernel(reinterpret_cast<const void*>(grid_sync_kernel),
                                                dim3(static_cast<unsigned>(ctas)),
                                                dim3(kGridSyncThreads), args, 0, stream));
  };
  const double us = median_us(launch, repeats, 1, stream);
  PRNN_CUDA_CHECK(cudaStreamSynchronize(stream));
  return {ctas, kGridSyncThreads, us / syncs};
}

}  // namespace prnn::bench
