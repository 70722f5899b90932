// The on-chip capacity planner of the persistent RNN kernels (one layer direction at a time):
// how the recurrent matrix W_hh [G·H, H] is split across the SMs, whether it fits in registers
// and shared memory, and what a step should cost. Two predictions of the cost:
//   the MBSP bound (Diamos et al., 2016): computation, on-chip weight traffic, the h exchange
//     through L2, one grid synchronization — what throughput alone allows;
//   the latency model of the kernels that run the layer: per batch chunk, a chain of latencies
//     (the exchange through L2, waits, barriers, reductions, finishing threads, the publish), the
//     chunk's own compute and L2 traffic, and the chunks' pipelining (PassCost below). This is the
//     prediction; the MBSP bound stays beside it.
#pragma once

#include <cstdint>
#include <string>

#include "prnn/device.h"
#include "prnn/rnn.h"

namespace prnn {

// The latency model of one pass (forward or backward data) of a persistent kernel, µs per step.
// A step runs the batch in `chunks` chunks of `chunk` elements. One chunk's chain is
//   chain = exchange + fixed + compute + l2 + tail
// from the records (or arrival counts) of that chunk at step t-1 going out to its own going out
// at step t; a CTA is busy with a chunk for busy = fixed + compute + l2, and starts the next
// chunk while the last one's records cross the L2 (and, in the direct FMA kernels, while its
// finishing threads finish: the tail). So a step takes the longer of one chunk's chain and the
// CTA's busy time over all chunks:
//   step = max(chain, chunks × busy)
// The terms are cycle counts of the SM clock (planner.cpp has the constants and what each was
// fitted to), converted with DeviceInfo::sm_clock_khz; those of a partial last chunk are its own.
struct PassCost {
  // "FMA direct", "FMA staged", "warp rows" or "tensor cores"; empty: no kernel runs the pass.
  std::string kernel;
  int chunks = 0;
  int chunk = 0;             // batch elements per chunk
  double exchange_us = 0.0;  // a chunk's data going out to its consumers seeing it, through L2
  double fixed_us = 0.0;     // waits, barriers, reductions, finishing threads, publish and fence
  double compute_us = 0.0;   // the chunk's FMAs (and reduce-scatter) or mma, as issued
  double l2_us = 0.0;        // the chunk's exchange data a CTA reads (and writes) through L2
  double tail_us = 0.0;      // direct FMA kernels: the finishers, overlapping the next chunk
  double chain_us = 0.0;     // of the first (longest) chunk
  double busy_us = 0.0;      // mean over the chunks
  double step_us = 0.0;      // max(chain, chunks × busy)
};

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
  // Where a CTA's weights live: as the kernel that runs the layer holds them (a wide warp-rows
  // or large tensor-core shape keeps part in shared memory), else registers first up to their
  // budget and the rest in shared memory. fits is the capacity inequality either way.
  std::int64_t register_bytes_per_cta = 0;  // weights kept in registers
  std::int64_t shared_bytes_per_cta = 0;    // weights held in shared memory
  std::int64_t register_budget_per_cta = 0;
  std::int64_t shared_budget_per_cta = 0;   // after the h_{t-1} staging buffers

  // The MBSP bound of one step (µs): mbsp = max(compute, shared, exchange) + sync.
  double compute_us = 0.0;   // 2·B·G·H² flops on the FP32 pipes of `ctas` SMs
  double shared_us = 0.0;    // reading the spilled weights from shared memory once a step
  double exchange_us = 0.0;  // every CTA reads h_{t-1} [B, H] through L2
  double sync_us = 0.0;      // one grid-wide barrier
  double mbsp_us = 0.0;

  // The prediction (µs per step), from the latency model of the kernels that run the layer;
  // all zero (and the passes' kernel empty) where none does.
  PassCost forward;
  PassCost backward_data;
  // The GEMMs over all T·B rows, per step: the forward's input projection in · W_ihᵀ; the
  // backward's d(in), dW_ih and dW_hh (2·B·G·H·I flops each, I = H for dW_hh).
  double input_gemm_us = 0.0;
  double backward_gemms_us = 0.0;
  double step_us = 0.0;        // a forward call, per step: forward.step_us + input_gemm_us
  double train_step_us = 0.0;  // forward + backward: step_us + backward_data.step_us + GEMMs
};

// MBSP constants, from measurements on an H200 (shared/anchors/barrier.csv in the design notes:
// cooperative grid.sync of 132 CTAs ≈ 0.98 µs) and the architecture (FP32 FMA: 128 per SM per
// cycle; shared memory: 128 B per SM per cycle; L2: ~2.5× the DRAM bandwidth).
inline constexpr double kGridSyncUs = 1.0;
inline constexpr int kPlanThreads = 256;
inline constexpr int kReservedRegistersPerThread = 64;  // indices, accumulators, h, pipelining

// Plans one layer direction of `desc` at mini-batch `batch` on `device`. Throws InvalidArgument
// for a bad desc or batch; a layer that does not fit returns fits = false with the reason.
PersistentPlan plan_persistent(const RnnDesc& desc, std::int64_t batch, const DeviceInfo& device);

// A readable multi-line description (what `prnn plan` prints): the tiling, the capacity, the
// predicted µs/step with every term of the latency model, and the MBSP bound.
std::string describe(const PersistentPlan& plan);

}  // namespace prnn
