// Skinny fp32 GEMM: C[M, N] = A[M, K] · op(B) + beta·C for few rows (contract in skinny_gemm.h).
// Tiles:    CTA (r, n, m) of grid (S, ceil(N / 64), ceil(M / BM)) computes the partial tile
//           C[m·BM, +BM) × [n·64, +64) over k in [r·k_slice, (r + 1)·k_slice); BM = 8, 16, 32 or 64.
//           Thread tile 8 rows (4 at BM = 8) × 4 columns: thread t is column group t % 16, row
//           group (t / 16) % RG, k group t / (16·RG) (RG = BM / rows); rows rg + RG·i, columns
//           cg + 16·j (B [N, K]) or 4·cg + j (B [K, N]), so that a warp's shared-memory reads
//           fall in distinct banks. The k groups split each chunk's float4 steps (a step: 8 + 4
//           float4 loads from shared memory for 128 FMAs; 4 + 4 for 64 at BM = 8) and are added
//           in the CTA afterwards.
// Launch:   512 threads, clusters of S along x (S <= 8, from the resident clusters: host side),
//           Tiles::kBytes of dynamic shared memory (72-102 KiB); one CTA (16 warps, at most 128
//           registers a thread) per SM. 512 threads with 8 × 4 thread tiles ran 5-17 % faster
//           than 256 with 8 × 8 on an H200 where B is [K, N], level where B is [N, K]
//           (bench/gemm/NOTES.md).
// Pipeline: the slice in chunks of 64 k, kStages chunks in flight by cp.async (zero-filled past
//           M, N and the slice). A and B [N, K] tiles are k-contiguous, [rows][64 + 4] floats,
//           read as float4 along k; B [K, N] tiles are n-contiguous, [64][64].
// Reduce:   each CTA adds its k groups' partial tiles in group order; the S CTAs of a cluster
//           (S = gridDim.x) then leave theirs in their own shared memory, and after a cluster
//           barrier CTA r adds, for its share of the tile's elements, the S partials in rank
//           order 0..S-1 through distributed shared memory and writes C (plus beta·C when
//           beta != 0); a second cluster barrier keeps every partial alive until it has been
//           read. No atomics, no workspace: the same bits every run.
// Limits:   sm_90 or later (clusters; the sm_80 build traps); M, N, K < 2^31; k_slice % 4 == 0.
#include "gemm/skinny_kernel.h"

#include <cooperative_groups.h>

namespace prnn {
namespace {

namespace cg = cooperative_groups;

constexpr int kThreads = 512;
constexpr int kCols = kSkinnyTileCols;
constexpr int kChunk = kSkinnyChunk;
constexpr int kRowStride = kChunk + 4;  // k-contiguous tiles: rows 4 banks apart
constexpr int kTN = 4;  // thread tile: kTM rows (Tiles) × kTN columns
constexpr int kColGroups = kCols / kTN;

template <int BM, bool kBT>
struct Tiles {
  static constexpr int kTM = BM == 8 ? 4 : 8;
  static constexpr int kRowGroups = BM / kTM;
  static constexpr int kMinBlocks = 1;  // 16 warps, at most 128 registers a thread
  static constexpr int kKGroups = kThreads / (kColGroups * kRowGroups);
  static constexpr int kSteps = kChunk / 4 / kKGroups;  // float4 steps per k group and chunk
  static constexpr int kStages = BM == 64 ? 3 : 4;  // BM = 32: 102 KiB
  static constexpr int kA = BM * kRowStride;                            // floats
  static constexpr int kB = kBT ? kCols * kRowStride : kChunk * kCols;  // floats
  static constexpr int kStage = kA + kB;
  static constexpr int kPartial = kKGroups * BM * kCols;
  static constexpr int kFloats = kStages * kStage > kPartial ? kStages * kStage : kPartial;
  static constexpr std::size_t kBytes = static_cast<std::size_t>(kFloats) * sizeof(float);
  static_assert(kSteps >= 1 && kSteps * kKGroups * 4 == kChunk);
};

__device__ __forceinline__ void copy16(float* dst, const float* src, int bytes) {
  const unsigned at = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(at), "l"(src), "r"(bytes)
               : "memory");
}

__device__ __forceinline__ void copy4(float* dst, const float* src, int bytes) {
  const unsigned at = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;" ::"r"(at), "l"(src), "r"(bytes)
               : "memory");
}

// Bytes of a 16-byte copy that lie before `end` (0..16) starting at `at`.
__device__ __forceinline__ int bytes_before(int at, int end) {
  const int n = end - at;
  return n <= 0 ? 0 : n >= 4 ? 16 : 4 * n;
}

// A tile [kRows][kWidth] of a row-major matrix with row stride ld, from row r0 and column c0,
// into shared memory rows of kStride floats; zeros at rows >= r_end and columns >= c_end. The
// k-contiguous tiles (A, B [N, K]) are rows × 64 k; the n-contiguous one (B [K, N]) 64 k × 64 n.
template <int kRows, int kWidth, int kStride>
__device__ __forceinline__ void copy_tile(float* s, const float* g, std::int64_t ld, int r0,
                                          int r_end, int c0, int c_end, bool vec) {
  if (vec) {
    constexpr int kQuads = kWidth / 4;
    for (int i = threadIdx.x; i < kRows * kQuads; i += kThreads) {
      const int row = i / kQuads, c = c0 + 4 * (i % kQuads);
      const int bytes = r0 + row < r_end ? bytes_before(c, c_end) : 0;
      copy16(s + row * kStride + 4 * (i % kQuads), bytes > 0 ? g + (r0 + row) * ld + c : g,
             bytes);
    }
  } else {
    for (int i = threadIdx.x; i < kRows * kWidth; i += kThreads) {
      const int row = i / kWidth, c = c0 + i % kWidth;
      const bool in = r0 + row < r_end && c < c_end;
      copy4(s + row * kStride + i % kWidth, in ? g + (r0 + row) * ld + c : g, in ? 4 : 0);
    }
  }
}

// The cluster's barrier and a peer's copy of `p` (sm_90 on; the sm_80 build traps: the host
// launches the kernel on sm_90 and later only).
__device__ __forceinline__ void cluster_barrier() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  cg::this_cluster().sync();
#else
  __trap();
#endif
}

__device__ __forceinline__ const float* peer(const float* p, int rank) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  return cg::this_cluster().map_shared_rank(p, static_cast<unsigned>(rank));
#else
  __trap();
  return p + rank;
#endif
}

template <int BM, bool kBT>
__global__ void __launch_bounds__(kThreads, Tiles<BM, kBT>::kMinBlocks)
    skinny_gemm_kernel(const SkinnyParams p) {
  using T = Tiles<BM, kBT>;
  constexpr int kTM = T::kTM;
  constexpr int kRG = T::kRowGroups, kKG = T::kKGroups, kStages = T::kStages;
  extern __shared__ __align__(16) float smem[];
  const int rank = static_cast<int>(blockIdx.x), split = static_cast<int>(gridDim.x);
  const int n0 = static_cast<int>(blockIdx.y) * kCols, m0 = static_cast<int>(blockIdx.z) * BM;
  const int k_begin = min(p.K, rank * p.k_slice), k_end = min(p.K, k_begin + p.k_slice);
  const int chunks = (k_end - k_begin + kChunk - 1) / kChunk;
  const int t = static_cast<int>(threadIdx.x);
  const int cgi = t % kColGroups, rg = (t / kColGroups) % kRG, kg = t / (kColGroups * kRG);

  auto issue = [&](int c) {  // chunk c into stage c % kStages, one commit group (maybe empty)
    if (c < chunks) {
      float* sA = smem + (c % kStages) * T::kStage;
      float* sB = sA + T::kA;
      const int k0 = k_begin + c * kChunk;
      copy_tile<BM, kChunk, kRowStride>(sA, p.A, p.lda, m0, p.M, k0, k_end, p.vector_copies);
      if constexpr (kBT)
        copy_tile<kCols, kChunk, kRowStride>(sB, p.B, p.ldb, n0, p.N, k0, k_end,
                                             p.vector_copies);
      else
        copy_tile<kChunk, kCols, kCols>(sB, p.B, p.ldb, k0, k_end, n0, p.N, p.vector_copies);
    }
    asm volatile("cp.async.commit_group;" ::: "memory");
  };

  float acc[kTM][kTN] = {};
  for (int c = 0; c < kStages - 1; ++c) issue(c);
  for (int c = 0; c < chunks; ++c) {
    asm volatile("cp.async.wait_group %0;" ::"n"(kStages - 2) : "memory");  // chunk c landed
    __syncthreads();  // ... for every thread; and stage (c - 1) % kStages is free again
    issue(c + kStages - 1);
    const float* sA = smem + (c % kStages) * T::kStage;
    const float* sB = sA + T::kA;
#pragma unroll
    for (int step = 0; step < T::kSteps; ++step) {
      const int kk = 4 * (kg + kKG * step);
      if constexpr (kBT) {
        float4 b[kTN];  // columns cg + kColGroups·j, k .. k + 3
#pragma unroll
        for (int j = 0; j < kTN; ++j)
          b[j] = *reinterpret_cast<const float4*>(sB + (cgi + kColGroups * j) * kRowStride + kk);
#pragma unroll
        for (int i = 0; i < kTM; ++i) {
          const float4 a = *reinterpret_cast<const float4*>(sA + (rg + kRG * i) * kRowStride + kk);
#pragma unroll
          for (int j = 0; j < kTN; ++j) {
            acc[i][j] = fmaf(a.x, b[j].x, acc[i][j]);
            acc[i][j] = fmaf(a.y, b[j].y, acc[i][j]);
            acc[i][j] = fmaf(a.z, b[j].z, acc[i][j]);
            acc[i][j] = fmaf(a.w, b[j].w, acc[i][j]);
          }
        }
      } else {
        float b[4][kTN];  // k + q, columns kTN·cg .. kTN·cg + kTN - 1
#pragma unroll
        for (int q = 0; q < 4; ++q)
#pragma unroll
          for (int h = 0; h < kTN; h += 4) {
            const float4 v =
                *reinterpret_cast<const float4*>(sB + (kk + q) * kCols + kTN * cgi + h);
            b[q][h] = v.x, b[q][h + 1] = v.y, b[q][h + 2] = v.z, b[q][h + 3] = v.w;
          }
#pragma unroll
        for (int i = 0; i < kTM; ++i) {
          const float4 a4 = *reinterpret_cast<const float4*>(sA + (rg + kRG * i) * kRowStride + kk);
          const float a[4] = {a4.x, a4.y, a4.z, a4.w};
#pragma unroll
          for (int q = 0; q < 4; ++q)
#pragma unroll
            for (int j = 0; j < kTN; ++j) acc[i][j] = fmaf(a[q], b[q][j], acc[i][j]);
        }
      }
    }
  }
  asm volatile("cp.async.wait_all;" ::: "memory");
  __syncthreads();  // every stage read: the partial tiles reuse the same shared memory

  constexpr int kElements = BM * kCols;
  float* partial = smem;  // [kKG][BM][kCols]; group 0's slice ends as the CTA's sum
#pragma unroll
  for (int i = 0; i < kTM; ++i)
#pragma unroll
    for (int j = 0; j < kTN; ++j) {
      const int n = kBT ? cgi + kColGroups * j : kTN * cgi + j;
      partial[kg * kElements + (rg + kRG * i) * kCols + n] = acc[i][j];
    }
  __syncthreads();
  for (int e = t; e < kElements; e += kThreads) {  // k groups in order: deterministic
    float sum = partial[e];
#pragma unroll
    for (int g = 1; g < kKG; ++g) sum += partial[g * kElements + e];
    partial[e] = sum;
  }
  cluster_barrier();  // every CTA's partial tile written and visible to the cluster

  const int share = (kElements + split - 1) / split;
  const int e_end = min(kElements, (rank + 1) * share);
  for (int e = rank * share + t; e < e_end; e += kThreads) {
    const int m = e / kCols, n = e % kCols;
    if (m0 + m >= p.M || n0 + n >= p.N) continue;
    float part[kSkinnyMaxSplit];  // every peer's load in flight at once
#pragma unroll
    for (int r = 0; r < kSkinnyMaxSplit; ++r) part[r] = r < split ? peer(partial, r)[e] : 0.0f;
    float sum = 0.0f;
#pragma unroll
    for (int r = 0; r < kSkinnyMaxSplit; ++r)  // rank order: deterministic
      if (r < split) sum += part[r];
    float* c = p.C + (m0 + m) * p.ldc + (n0 + n);
    *c = p.beta == 0.0f ? sum : fmaf(p.beta, *c, sum);
  }
  cluster_barrier();  // no CTA leaves (its shared memory) while a peer may still read its partial
}

template <int BM, bool kBT>
const void* kernel_of() {
  return reinterpret_cast<const void*>(&skinny_gemm_kernel<BM, kBT>);
}

template <int BM, bool kBT>
std::size_t bytes_of() {
  return Tiles<BM, kBT>::kBytes;
}

// The one dispatch: (tile rows, B's layout) -> instantiation and its shared memory.
void instantiation(int tile_rows, bool b_transposed, const void** fn, std::size_t* bytes) {
  if (tile_rows == 8) {
    *fn = b_transposed ? kernel_of<8, true>() : kernel_of<8, false>();
    *bytes = b_transposed ? bytes_of<8, true>() : bytes_of<8, false>();
  } else if (tile_rows == 16) {
    *fn = b_transposed ? kernel_of<16, true>() : kernel_of<16, false>();
    *bytes = b_transposed ? bytes_of<16, true>() : bytes_of<16, false>();
  } else if (tile_rows == 32) {
    *fn = b_transposed ? kernel_of<32, true>() : kernel_of<32, false>();
    *bytes = b_transposed ? bytes_of<32, true>() : bytes_of<32, false>();
  } else {
    *fn = b_transposed ? kernel_of<64, true>() : kernel_of<64, false>();
    *bytes = b_transposed ? bytes_of<64, true>() : bytes_of<64, false>();
  }
}

cudaLaunchConfig_t config(int tile_rows, bool b_transposed, int split, dim3 grid,
                          cudaStream_t stream, cudaLaunchAttribute* attr, const void** fn) {
  std::size_t bytes = 0;
  instantiation(tile_rows, b_transposed, fn, &bytes);
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = grid;
  cfg.blockDim = dim3(kThreads);
  cfg.dynamicSmemBytes = bytes;
  cfg.stream = stream;
  attr->id = cudaLaunchAttributeClusterDimension;
  attr->val.clusterDim.x = static_cast<unsigned>(split);
  attr->val.clusterDim.y = 1;
  attr->val.clusterDim.z = 1;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  return cfg;
}

}  // namespace

int skinny_tile_rows(std::int64_t M) { return M <= 8 ? 8 : M <= 16 ? 16 : M <= 32 ? 32 : 64; }

cudaError_t skinny_max_active_clusters(int tile_rows, bool b_transposed, int split,
                                       int* clusters) {
  cudaLaunchAttribute attr;
  const void* fn = nullptr;
  cudaLaunchConfig_t cfg = config(tile_rows, b_transposed, split, dim3(split), nullptr, &attr, &fn);
  const cudaError_t set = cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                               static_cast<int>(cfg.dynamicSmemBytes));
  if (set != cudaSuccess) return set;
  *clusters = 0;
  return cudaOccupancyMaxActiveClusters(clusters, fn, &cfg);
}

cudaError_t skinny_launch(const SkinnyParams& p, int tile_rows, bool b_transposed, int split,
                          cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>(split),
                  static_cast<unsigned>((p.N + kCols - 1) / kCols),
                  static_cast<unsigned>((p.M + tile_rows - 1) / tile_rows));
  cudaLaunchAttribute attr;
  const void* fn = nullptr;
  cudaLaunchConfig_t cfg = config(tile_rows, b_transposed, split, grid, stream, &attr, &fn);
  const cudaError_t set = cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                               static_cast<int>(cfg.dynamicSmemBytes));
  if (set != cudaSuccess) return set;
  void* args[] = {const_cast<SkinnyParams*>(&p)};
  return cudaLaunchKernelExC(&cfg, fn, args);
}

}  // namespace prnn
