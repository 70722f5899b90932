// The skinny GEMM kernel's launcher (skinny_gemm.cu); the checks and the choice of the split are
// skinny_gemm.cpp's (contract in skinny_gemm.h).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace prnn {

struct SkinnyParams {
  const float* A = nullptr;  // [M, K], row stride lda
  const float* B = nullptr;  // [N, K] (b_transposed) or [K, N], row stride ldb
  float* C = nullptr;        // [M, N], row stride ldc
  std::int64_t lda = 0, ldb = 0, ldc = 0;
  std::int32_t M = 0, N = 0, K = 0;
  std::int32_t k_slice = 0;  // k per CTA of a cluster, a multiple of 4
  float beta = 0.0f;
  bool vector_copies = false;  // A, B 16-byte aligned, lda, ldb % 4 == 0: 16-byte cp.async
};

// The instantiations: tiles of 8, 16, 32 or 64 rows (tile_rows), B stored [N, K] or [K, N].
inline constexpr int kSkinnyTileCols = 64;
inline constexpr int kSkinnyMaxSplit = 8;   // CTAs per cluster (the portable limit)
inline constexpr int kSkinnyChunk = 64;     // k per pipeline stage
int skinny_tile_rows(std::int64_t M);  // 8 for M ≤ 8, 16 for M ≤ 16, 32 for M ≤ 32, else 64

// How many clusters of `split` CTAs of this instantiation can be resident at once on the current
// device (cudaOccupancyMaxActiveClusters, into *clusters); the query's status.
cudaError_t skinny_max_active_clusters(int tile_rows, bool b_transposed, int split, int* clusters);

// grid (split, ceil(N / 64), ceil(M / tile_rows)), clusters of `split` along x.
cudaError_t skinny_launch(const SkinnyParams& p, int tile_rows, bool b_transposed, int split,
                          cudaStream_t stream);

}  // namespace prnn
