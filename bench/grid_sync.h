// The cost of one grid-wide barrier: the floor under a persistent RNN kernel, which syncs the
// whole grid once per step (see grid_sync.cu).
#pragma once

#include <cuda_runtime.h>

namespace prnn::bench {

inline constexpr int kGridSyncThreads = 256;  // threads per CTA, as in a persistent RNN kernel
inline constexpr int kGridSyncCount = 10000;  // grid syncs per timed launch

struct GridSyncResult {
  int ctas = 0;     // one per SM
  int threads = 0;  // per CTA
  double us_per_sync = 0.0;
};

// SM count of `device`: how many CTAs the timed grid has.
int grid_sync_ctas(int device);

// Times `syncs` back-to-back cooperative_groups grid.sync() calls in one cooperative launch of
// one CTA per SM × kGridSyncThreads threads on `stream`; median of `repeats` launches after one
// warm-up, divided by `syncs`. Throws Unsupported when the device has no cooperative launch or
// the occupancy API says one CTA per SM cannot be co-resident, RuntimeError when a CUDA call
// fails.
GridSyncResult time_grid_sync(int device, int syncs, int repeats, cudaStream_t stream);

}  // namespace prnn::bench
