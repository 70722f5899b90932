// How the persistent RNN kernels split one layer direction's recurrent matrix over the SMs: the
// small, documented set of compile-time kernel shapes and the rule that picks one. Shared by the
// planner (prnn/plan.h) and the kernels' one dispatch point (rnn_kernels.cu); no CUDA here.
//
// A kernel shape (R, G, BC, max threads):
//   CTA k owns the R hidden units [k·R, (k+1)·R) (R a multiple of 3: it publishes whole records);
//   its threads split the H columns of those R rows: thread i holds the 3-column groups
//   i, i + threads, ..., G of them, so its registers keep R × 3G weights, and it reads exactly the
//   exchange records of those columns;
//   the mini-batch is processed BC elements at a time, and each chunk's records are published
//   before the next chunk starts, so consumers start on chunk 0 of step t while chunk 1 is still
//   being computed (the paper's pipelining over the mini-batch).
// The exchange record: 3 consecutive units of one batch element's h (or dA) and a 32-bit tag,
// 16 bytes written and read as one vector access.
//
// The rule (measured on an H200, bench/persistent/NOTES.md): the fewest rows per CTA that fit the
// SMs (most CTAs), then two chunks per step where the shapes allow (BC = 1 for B ≤ 2, 2 for
// B ≤ 4, else 4), with G chosen per (R, BC) in the table.
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

// The instantiated shapes, grouped by R ascending; within a group BC ascending.
inline constexpr KernelShape kShapes[] = {
    {3, 1, 1, 512},  {3, 1, 2, 512},  {3, 1, 4, 512},                    //
    {6, 1, 1, 512},  {6, 1, 2, 512},  {6, 1, 4, 512},                    //
    {9, 3, 1, 256},  {9, 3, 2, 256},  {9, 2, 4, 384},                    //
    {12, 2, 1, 384}, {12, 2, 2, 384}, {12, 2, 4, 384},                   //
    {15, 3, 1, 256}, {15, 3, 2, 256},                                    //
    {18, 3, 1, 256}, {18, 3, 2, 256},
};
inline constexpr int kShapeCount = static_cast<int>(sizeof(kShapes) / sizeof(kShapes[0]));

// The batch chunk the rule asks for at batch B (two chunks per step where possible).
inline constexpr int wanted_batch_chunk(std::int64_t batch) {
  return batch <= 2 ? 1 : batch <= 4 ? 2 : 4;
}

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
