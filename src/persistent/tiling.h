// How the persistent RNN kernels split one layer direction's recurrent matrix over the SMs: the
// small, documented set of compile-time kernel shapes and the rule that picks one. Shared by the
// planner (prnn/plan.h) and the kernels' one dispatch point (rnn_kernels.cu); no CUDA here.
//
// A kernel shape (R, G, BC, max threads):
//   CTA k owns the R hidden units [k·R, (k+1)·R) (R a multiple of 3: it publishes whole records);
//   its threads split the H columns of those R rows: thread i holds the 3-column groups
//   i, i + threads, ..., G of them, so its registers keep R × 3G weights, and it reads exactly the
//   exchange records of those columns;
//   the mini-batch is processed BC elements at a time (BC = 1 when B = 1).
// The exchange record: 3 consecutive units of one batch element's h (or dA) and a 32-bit tag,
// 16 bytes written and read as one vector access.
#pragma once

#include <cstdint>
#include <string>

#include "prnn/dtype.h"

namespace prnn::persistent {

inline constexpr int kUnitsPerRecord = 3;

struct KernelShape {
  int rows = 0;         // R hidden units per CTA
  int groups = 0;       // G column groups of 3 per thread
  int batch_chunk = 0;  // BC batch elements per pass over the weights (B > 1)
  int max_threads = 0;  // launch bound: threads per CTA ≤ this, registers ≤ 65536 / this
};

// The instantiated shapes, fewest rows (most CTAs) first; the dispatch takes the first that fits.
inline constexpr KernelShape kShapes[] = {
    {3, 1, 4, 512}, {6, 1, 4, 512}, {9, 2, 4, 384}, {12, 2, 4, 384}, {15, 3, 2, 256},
    {18, 3, 2, 256},
};
inline constexpr int kShapeCount = static_cast<int>(sizeof(kShapes) / sizeof(kShapes[0]));

struct Tiling {
  int shape = -1;  // index into kShapes; -1: no shape fits (reason says why)
  int rows = 0, groups = 0, batch_chunk = 0;
  int ctas = 0, threads = 0;
  std::int64_t records = 0;  // K = ceil(H / 3) records per batch element and step
  std::string reason;
};

// Picks the shape for hidden size H and batch B on a GPU with `sm_count` SMs (one CTA per SM).
// Only fp32 weights have kernels so far; other dtypes return shape -1 with the reason.
Tiling tile(std::int64_t hidden, std::int64_t batch, int sm_count, DType weights);

}  // namespace prnn::persistent
