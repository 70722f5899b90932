// The on-chip capacity planner of the persistent RNN kernels (one layer direction at a time):
// how the recurrent matrix W_hh [G·H, H] is split across the SMs, whether it fits in registers
// and shared memory, and what a step should cost (the MBSP model of Diamos et al., 2016:
// computation, on-chip weight traffic, the h exchange through L2, one grid synchronization).
#pragma once

#include <cstdint>
#include <string>

#include "prnn/device.h"
#include "prnn/rnn.h"

namespace prnn {

struct PersistentPlan {
  bool fits = false;
  std::string reason;  // why it does not fit, or how it is laid out

  // Tiling: at most one CTA per SM; CTA k owns the G gate rows of hidden units [k·U, (k+1)·U).
  // For a layer the persistent kernels run, the kernels' own tiling (kernel says which shape);
  // otherwise one CTA per SM and kPlanThreads threads.
  int ctas = 0;
  int threads_per_cta = 0;
  std::int64_t units_per_cta = 0;  // U
  std::int64_t rows_per_cta = 0;   // G·U
  std::string kernel;              // the kernel shape that runs it, or why none does

  // Capacity (bytes).
  std::int64_t weight_bytes = 0;           // the whole W_hh of one layer direction
  std::int64_t weight_bytes_per_cta = 0;
  std::int64_t register_bytes_per_cta = 0;  // weights kept in registers
  std::int64_t shared_bytes_per_cta = 0;    // weights spilled to shared memory
  std::int64_t register_budget_per_cta = 0;
  std::int64_t shared_budget_per_cta = 0;   // after the h_{t-1} staging buffers

  // Predicted cost of one step (µs): step = max(compute, shared, exchange) + sync.
  double compute_us = 0.0;   // 2·B·G·H² flops on the FP32 pipes of `ctas` SMs
  double shared_us = 0.0;    // reading the spilled weights from shared memory once a step
  double exchange_us = 0.0;  // every CTA reads h_{t-1} [B, H] through L2
  double sync_us = 0.0;      // one grid-wide barrier
  double step_us = 0.0;
};

// Model constants, from measurements on an H200 (shared/anchors/barrier.csv in the design notes:
// cooperative grid.sync of 132 CTAs ≈ 0.98 µs) and the architecture (FP32 FMA: 128 per SM per
// cycle; shared memory: 128 B per SM per cycle; L2: ~2.5× the DRAM bandwidth).
inline constexpr double kGridSyncUs = 1.0;
inline constexpr int kPlanThreads = 256;
inline constexpr int kReservedRegistersPerThread = 64;  // indices, accumulators, h, pipelining

// Plans one layer direction of `desc` at mini-batch `batch` on `device`. Throws InvalidArgument
// for a bad desc or batch; a layer that does not fit returns fits = false with the reason.
PersistentPlan plan_persistent(const RnnDesc& desc, std::int64_t batch, const DeviceInfo& device);

// A readable multi-line description (what `prnn plan` prints).
std::string describe(const PersistentPlan& plan);

}  // namespace prnn
