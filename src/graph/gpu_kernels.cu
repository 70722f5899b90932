// Kernels of the dynamic-graph GPU executors; the host contracts are in graph/gpu_kernels.h.
//
// Launch shapes (one named constant each):
//   element-wise families (gather_pieces, pointwise, dropout, the SGD update): 1-D grid-stride
//     loop over all B*width elements, kThreads per CTA, at most kMaxBlocks CTAs;
//   scatter_add: a 2-D grid (piece_grid): y over the destinations, x over the largest one's
//     elements in kScatterThreads-wide chunks (about kMaxPieceBlocks CTAs in all); each element
//     summed by one thread over its sources in the order given;
//   softmax family: one CTA of kRowThreads per member (column vector), block reductions for the
//     maximum and the sum of exponentials in shared memory;
//   copy_pieces: as scatter_add, one grid row per piece;
//   small products: kProductThreads (8 warps) per CTA, see the contracts at their kernels;
//   fused elementwise groups: as the element-wise families over the L·n (lane, element) pairs.
// Backward kernels write their dx through put(): += (GradWrite::Add) or = (GradWrite::Store).
// Index math in int64 (a batch's B*width may exceed 2^31 for large hidden sizes).
#include <cuda_runtime.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <string>

#include "core/cuda_check.h"
#include "graph/dropout_hash.h"
#include "graph/gpu_kernels.h"
#include "prnn/error.h"

namespace prnn::graph::gpu {
namespace {

constexpr int kThreads = 256;
constexpr std::int64_t kMaxBlocks = 4096;
constexpr int kRowThreads = 128;  // softmax family; a power of two (tree reduction)
constexpr int kScatterThreads = 128;
constexpr std::int64_t kMaxPieceBlocks = 4096;  // scatter_add / copy_pieces grids (x·y)
constexpr int kWarp = 32;
constexpr unsigned kFullMask = 0xffffffffu;
constexpr int kProductThreads = 256;
constexpr int kProductWarps = kProductThreads / kWarp;
// Backward small products: rows of W per CTA (kChunkRows / kProductWarps per warp). Smaller
// chunks give more CTAs (memory parallelism when m·k is small) and more partial sums.
constexpr std::int64_t kChunkRows = 64;

unsigned blocks_for(std::int64_t total) {
  return static_cast<unsigned>(std::clamp<std::int64_t>((total + kThreads - 1) / kThreads, 1,
                                                        kMaxBlocks));
}

void check_sizes(const char* fn, std::int64_t B, std::int64_t A, std::int64_t n) {
  if (B < 0 || A < 0 || n < 0)
    throw InvalidArgument(std::string(fn) + ": expected non-negative sizes, got B " +
                          std::to_string(B) + ", A " + std::to_string(A) + ", n " +
                          std::to_string(n));
}

__device__ inline std::int64_t global_index() {
  return static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ inline std::int64_t grid_stride() {
  return static_cast<std::int64_t>(gridDim.x) * blockDim.x;
}

__device__ inline void put(GradWrite write, float* d, float v) {
  *d = write == GradWrite::Add ? *d + v : v;
}

// ---- gather -----------------------------------------------------------------------------------

__global__ void gather_pieces_kernel(int B, int A, std::int64_t width,
                                     const std::int64_t* __restrict__ offs,
                                     const float* const* __restrict__ src, float* __restrict__ dst) {
  const std::int64_t total = static_cast<std::int64_t>(B) * width;
  for (std::int64_t e = global_index(); e < total; e += grid_stride()) {
    const std::int64_t b = e / width, j = e % width;
    int a = 0;
    while (a + 1 < A && offs[a + 1] <= j) ++a;  // A is small (concatenate's argument count)
    dst[e] = src[b * A + a][j - offs[a]];
  }
}

__global__ void copy_pieces_kernel(int D, float* const* __restrict__ dst,
                                   const std::int64_t* __restrict__ size,
                                   const float* const* __restrict__ src) {
  for (int d = blockIdx.y; d < D; d += gridDim.y) {
    float* out = dst[d];
    const float* in = src[d];
    for (std::int64_t i = global_index(); i < size[d]; i += grid_stride()) out[i] = in[i];
  }
}

// ---- scatter-add ------------------------------------------------------------------------------
// Destination d is spread over the grid's x dimension (a parameter's gradient can be 10^6 floats;
// one block per destination left it to one SM); every element is still summed by one thread, in
// the sources' order.

__global__ void scatter_add_kernel(int D, float* const* __restrict__ dst,
                                   const std::int64_t* __restrict__ size,
                                   const std::int64_t* __restrict__ first,
                                   const float* const* __restrict__ src,
                                   std::uint8_t* const* __restrict__ flag) {
  for (int d = blockIdx.y; d < D; d += gridDim.y) {
    float* out = dst[d];
    const std::int64_t n = size[d], s0 = first[d], s1 = first[d + 1];
    for (std::int64_t i = global_index(); i < n; i += grid_stride()) {
      float acc = out[i];
      for (std::int64_t s = s0; s < s1; ++s) acc += src[s][i];
      out[i] = acc;
    }
    if (flag != nullptr && global_index() == 0 && flag[d] != nullptr) *flag[d] = 1;
  }
}

// ---- pointwise --------------------------------------------------------------------------------
// One element of a Pointwise op, shared by the per-batch kernels and the fused programs so that
// both compute each value and each partial derivative with the same expression.

// f(x0, x1) of every op but Sum (which its callers add up: 0 + x_0 + x_1 + ..., the reference's
// order); x1 is unused by the unary ops.
__device__ inline float pointwise_value(Pointwise op, float x0, float x1) {
  switch (op) {
    case Pointwise::Add: return x0 + x1;
    case Pointwise::Sub: return x0 - x1;
    case Pointwise::CMult: return x0 * x1;
    case Pointwise::Tanh: return tanhf(x0);
    case Pointwise::Logistic: return 1.0f / (1.0f + expf(-x0));
    case Pointwise::Relu: return fmaxf(x0, 0.0f);
    case Pointwise::Sum: break;
  }
  return 0.0f;
}

// ∂f/∂x_a · g at one element, y = f(...). cmult reads x0 and x1, relu x0, tanh and logistic y.
__device__ inline float pointwise_partial(Pointwise op, int a, float x0, float x1, float y,
                                          float g) {
  switch (op) {
    case Pointwise::Add:
    case Pointwise::Sum: return g;
    case Pointwise::Sub: return a == 0 ? g : -g;
    case Pointwise::CMult: return a == 0 ? g * x1 : g * x0;
    case Pointwise::Tanh: return g * (1.0f - y * y);
    case Pointwise::Logistic: return g * y * (1.0f - y);
    case Pointwise::Relu: return x0 > 0.0f ? g : 0.0f;
  }
  return 0.0f;
}

__global__ void pointwise_forward_kernel(Pointwise op, int B, int A, std::int64_t n,
                                         const float* const* __restrict__ x,
                                         float* __restrict__ y) {
  const std::int64_t total = static_cast<std::int64_t>(B) * n;
  for (std::int64_t e = global_index(); e < total; e += grid_stride()) {
    const std::int64_t b = e / n, i = e % n;
    const float* const* xb = x + b * A;
    float r = 0.0f;
    if (op == Pointwise::Sum)
      for (int a = 0; a < A; ++a) r += xb[a][i];
    else
      r = pointwise_value(op, xb[0][i], A > 1 ? xb[1][i] : 0.0f);
    y[e] = r;
  }
}

__global__ void pointwise_backward_kernel(Pointwise op, GradWrite w, int B, int A, std::int64_t n,
                                          const float* const* __restrict__ x,
                                          const float* __restrict__ y,
                                          const float* __restrict__ dy, float* const* dx) {
  const bool reads_x0 = op == Pointwise::CMult || op == Pointwise::Relu;
  const bool reads_y = op == Pointwise::Tanh || op == Pointwise::Logistic;
  const std::int64_t total = static_cast<std::int64_t>(B) * n;
  for (std::int64_t e = global_index(); e < total; e += grid_stride()) {
    const std::int64_t b = e / n, i = e % n;
    const float* const* xb = x + b * A;
    float* const* dxb = dx + b * A;
    const float x0 = reads_x0 ? xb[0][i] : 0.0f;
    const float x1 = op == Pointwise::CMult ? xb[1][i] : 0.0f;
    const float yv = reads_y ? y[e] : 0.0f;
    const float g = dy[e];
    if (op == Pointwise::Relu && !(x0 > 0.0f)) {  // nothing flows: leave an accumulated dx as is
      if (w == GradWrite::Store) dxb[0][i] = 0.0f;
      continue;
    }
    for (int a = 0; a < A; ++a) put(w, &dxb[a][i], pointwise_partial(op, a, x0, x1, yv, g));
  }
}

// ---- softmax family ---------------------------------------------------------------------------

// Block-wide reduction of v over kRowThreads threads (max when `take_max`, else sum); every
// thread gets the result. `s` holds kRowThreads floats.
__device__ float block_reduce(float v, bool take_max, float* s) {
  s[threadIdx.x] = v;
  __syncthreads();
  for (int half = kRowThreads / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) {
      const float o = s[threadIdx.x + half];
      s[threadIdx.x] = take_max ? fmaxf(s[threadIdx.x], o) : s[threadIdx.x] + o;
    }
    __syncthreads();
  }
  const float r = s[0];
  __syncthreads();  // s is reused by the next reduction
  return r;
}

// log Σ exp x over n values, stabilised by the maximum; called by all threads of the CTA.
__device__ float block_log_sum_exp(const float* x, std::int64_t n, float* s) {
  float m = -INFINITY;
  for (std::int64_t i = threadIdx.x; i < n; i += blockDim.x) m = fmaxf(m, x[i]);
  m = block_reduce(m, true, s);
  float sum = 0.0f;
  for (std::int64_t i = threadIdx.x; i < n; i += blockDim.x) sum += expf(x[i] - m);
  sum = block_reduce(sum, false, s);
  return m + logf(sum);
}

__global__ void log_softmax_forward_kernel(std::int64_t n, const float* const* __restrict__ x,
                                           float* __restrict__ y) {
  __shared__ float s[kRowThreads];
  const float* xb = x[blockIdx.x];
  float* yb = y + static_cast<std::int64_t>(blockIdx.x) * n;
  const float lse = block_log_sum_exp(xb, n, s);
  for (std::int64_t i = threadIdx.x; i < n; i += blockDim.x) yb[i] = xb[i] - lse;
}

__global__ void log_softmax_backward_kernel(GradWrite w, std::int64_t n, const float* __restrict__ y,
                                            const float* __restrict__ dy, float* const* dx) {
  __shared__ float s[kRowThreads];
  const std::int64_t base = static_cast<std::int64_t>(blockIdx.x) * n;
  float total = 0.0f;
  for (std::int64_t i = threadIdx.x; i < n; i += blockDim.x) total += dy[base + i];
  total = block_reduce(total, false, s);
  float* d = dx[blockIdx.x];
  for (std::int64_t i = threadIdx.x; i < n; i += blockDim.x)
    put(w, &d[i], dy[base + i] - expf(y[base + i]) * total);
}

__global__ void pick_nls_forward_kernel(std::int64_t n, const float* const* __restrict__ x,
                                        const std::int64_t* __restrict__ label,
                                        float* __restrict__ y) {
  __shared__ float s[kRowThreads];
  const float* xb = x[blockIdx.x];
  const float lse = block_log_sum_exp(xb, n, s);
  if (threadIdx.x == 0) y[blockIdx.x] = lse - xb[label[blockIdx.x]];
}

__global__ void pick_nls_backward_kernel(GradWrite w, std::int64_t n,
                                         const float* const* __restrict__ x,
                                         const std::int64_t* __restrict__ label,
                                         const float* __restrict__ dy, float* const* dx) {
  __shared__ float s[kRowThreads];
  const float* xb = x[blockIdx.x];
  const float lse = block_log_sum_exp(xb, n, s);
  const float g = dy[blockIdx.x];
  const std::int64_t k = label[blockIdx.x];
  float* d = dx[blockIdx.x];
  for (std::int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    float acc = (w == GradWrite::Add ? d[i] : 0.0f) + g * expf(xb[i] - lse);
    if (i == k) acc -= g;
    d[i] = acc;
  }
}

// ---- dropout ----------------------------------------------------------------------------------

__device__ inline float dropout_scale_at(const DropoutArgs& d, std::int64_t node, double p,
                                         std::int64_t i) {
  if (!d.training || p == 0.0) return 1.0f;
  return static_cast<float>(dropout_mask_scale(d.seed, static_cast<std::int32_t>(node),
                                               static_cast<std::uint64_t>(i), p));
}

__global__ void dropout_forward_kernel(DropoutArgs d, int B, std::int64_t n,
                                       const std::int64_t* __restrict__ node,
                                       const double* __restrict__ p,
                                       const float* const* __restrict__ x, float* __restrict__ y) {
  const std::int64_t total = static_cast<std::int64_t>(B) * n;
  for (std::int64_t e = global_index(); e < total; e += grid_stride()) {
    const std::int64_t b = e / n, i = e % n;
    y[e] = x[b][i] * dropout_scale_at(d, node[b], p[b], i);
  }
}

__global__ void dropout_backward_kernel(DropoutArgs d, GradWrite w, int B, std::int64_t n,
                                        const std::int64_t* __restrict__ node,
                                        const double* __restrict__ p,
                                        const float* __restrict__ dy, float* const* dx) {
  const std::int64_t total = static_cast<std::int64_t>(B) * n;
  for (std::int64_t e = global_index(); e < total; e += grid_stride()) {
    const std::int64_t b = e / n, i = e % n;
    put(w, &dx[b][i], dy[e] * dropout_scale_at(d, node[b], p[b], i));
  }
}

// ---- fused elementwise groups -----------------------------------------------------------------

static_assert(static_cast<int>(FusedOp::Add) == static_cast<int>(Pointwise::Add) &&
                  static_cast<int>(FusedOp::Sub) == static_cast<int>(Pointwise::Sub) &&
                  static_cast<int>(FusedOp::CMult) == static_cast<int>(Pointwise::CMult) &&
                  static_cast<int>(FusedOp::Tanh) == static_cast<int>(Pointwise::Tanh) &&
                  static_cast<int>(FusedOp::Logistic) == static_cast<int>(Pointwise::Logistic) &&
                  static_cast<int>(FusedOp::Relu) == static_cast<int>(Pointwise::Relu) &&
                  static_cast<int>(FusedOp::Sum) == static_cast<int>(Pointwise::Sum),
              "a FusedOp below Dropout is the Pointwise op of the same code");

// Reads of the uploaded tables through the read-only path (no kernel writes them), independent
// of the kernel's stores, so the compiler may issue them early.
__device__ inline std::int64_t table_int(const std::int64_t* t, std::int64_t k) {
  return static_cast<std::int64_t>(__ldg(reinterpret_cast<const long long*>(t) + k));
}
template <class T>
__device__ inline T* table_pointer(T* const* t, std::int64_t k) {
  return reinterpret_cast<T*>(__ldg(reinterpret_cast<const unsigned long long*>(t) + k));
}

// A lane's registers rs[kFusedLaneSlots]: run-time slot indices through fully unrolled selects,
// so the array stays in registers (dynamic indexing would put it in local memory).
using LaneRegisters = float[kFusedLaneSlots];
__device__ inline float slot_get(const LaneRegisters& rs, std::int64_t s) {
  float v = 0.0f;
#pragma unroll
  for (int j = 0; j < kFusedLaneSlots; ++j) v = j == s ? rs[j] : v;
  return v;
}
__device__ inline void slot_set(LaneRegisters& rs, std::int64_t s, float v) {
#pragma unroll
  for (int j = 0; j < kFusedLaneSlots; ++j) rs[j] = j == s ? v : rs[j];
}
__device__ inline void slot_add(LaneRegisters& rs, std::int64_t s, float v) {
#pragma unroll
  for (int j = 0; j < kFusedLaneSlots; ++j)
    if (j == s) rs[j] += v;
}

// Operand o at element i: from the lane's registers (src >= 0) or from memory.
__device__ inline float fused_operand(const FusedElementwise& p, const LaneRegisters& rs,
                                      std::int64_t o, std::int64_t i) {
  const std::int64_t s = table_int(p.src, o);
  return s >= 0 ? slot_get(rs, s) : table_pointer(p.x, o)[i];
}

__device__ inline float fused_dropout_scale(const FusedElementwise& p, std::int64_t k,
                                            std::int64_t i) {
  return dropout_scale_at(p.dropout, table_int(p.node, k), __ldg(p.rate + k), i);
}

// Forward of a fused group (contract of FusedElementwise in gpu_kernels.h).
// Launch:  1-D grid-stride over the L·n (lane, element) pairs, kThreads per CTA; consecutive
//          threads take consecutive elements of one lane (one program per warp unless a lane
//          boundary falls inside it).
// On chip: the lane's values so far in registers (LaneRegisters); each value is also stored to
//          y[k] (users outside the group, backward and value() read it there).
// Order:   each value by the per-batch kernels' expression (pointwise_value, the dropout scale):
//          equal to unfused execution. Every y element written by one thread. Deterministic.
__global__ void __launch_bounds__(kThreads) fused_forward_kernel(FusedElementwise p) {
  const std::int64_t total = static_cast<std::int64_t>(p.L) * p.n;
  for (std::int64_t e = global_index(); e < total; e += grid_stride()) {
    const std::int64_t lane = e / p.n, i = e % p.n;
    const std::int64_t k0 = table_int(p.lane_first, lane), k1 = table_int(p.lane_first, lane + 1);
    LaneRegisters rs;
#pragma unroll
    for (int j = 0; j < kFusedLaneSlots; ++j) rs[j] = 0.0f;
    for (std::int64_t k = k0; k < k1; ++k) {
      const auto op = static_cast<FusedOp>(table_int(p.op, k));
      const std::int64_t o0 = table_int(p.arg_first, k), o1 = table_int(p.arg_first, k + 1);
      float v = 0.0f;
      if (op == FusedOp::Sum) {
        for (std::int64_t o = o0; o < o1; ++o) v += fused_operand(p, rs, o, i);
      } else if (op == FusedOp::Dropout) {
        v = fused_operand(p, rs, o0, i) * fused_dropout_scale(p, k, i);
      } else {
        const float x0 = fused_operand(p, rs, o0, i);
        const float x1 = o1 - o0 > 1 ? fused_operand(p, rs, o0 + 1, i) : 0.0f;
        v = pointwise_value(static_cast<Pointwise>(op), x0, x1);
      }
      table_pointer(p.y, k)[i] = v;
      slot_set(rs, k - k0, v);
    }
  }
}

// Backward of a fused group (contract of FusedElementwise in gpu_kernels.h).
// Launch:  as the forward.
// On chip: the lane's values (loaded from y) and gradients (loaded from dy: the contributions
//          of users outside the group) in registers, all loads issued up front; in-lane
//          contributions accumulate in registers.
// Order:   instructions in reverse, operand positions in order; a gradient element receives the
//          group's contributions in that order, after those already in memory (graph/autobatch.h
//          compares it with unfused execution). Every dy and dx element is read and written by
//          one thread only (the host's disjointness check): no atomics, deterministic.
__global__ void __launch_bounds__(kThreads) fused_backward_kernel(FusedElementwise p) {
  const std::int64_t total = static_cast<std::int64_t>(p.L) * p.n;
  for (std::int64_t e = global_index(); e < total; e += grid_stride()) {
    const std::int64_t lane = e / p.n, i = e % p.n;
    const std::int64_t k0 = table_int(p.lane_first, lane), k1 = table_int(p.lane_first, lane + 1);
    LaneRegisters ys, gs;
#pragma unroll
    for (int j = 0; j < kFusedLaneSlots; ++j) {
      ys[j] = 0.0f;
      gs[j] = 0.0f;
      if (k0 + j < k1) {
        ys[j] = table_pointer(p.y, k0 + j)[i];
        gs[j] = table_pointer(p.dy, k0 + j)[i];
      }
    }
    for (std::int64_t k = k1; k-- > k0;) {
      const float g = slot_get(gs, k - k0), y = slot_get(ys, k - k0);
      table_pointer(p.dy, k)[i] = g;  // the node's complete gradient
      const auto op = static_cast<FusedOp>(table_int(p.op, k));
      const std::int64_t o0 = table_int(p.arg_first, k), o1 = table_int(p.arg_first, k + 1);
      const bool reads_x = op == FusedOp::CMult || op == FusedOp::Relu;
      const float x0 = reads_x ? fused_operand(p, ys, o0, i) : 0.0f;
      const float x1 = op == FusedOp::CMult ? fused_operand(p, ys, o0 + 1, i) : 0.0f;
      const float scale = op == FusedOp::Dropout ? fused_dropout_scale(p, k, i) : 1.0f;
      for (std::int64_t o = o0; o < o1; ++o) {
        const float c = op == FusedOp::Dropout
                            ? g * scale
                            : pointwise_partial(static_cast<Pointwise>(op),
                                                static_cast<int>(o - o0), x0, x1, y, g);
        const std::int64_t s = table_int(p.src, o);
        if (s >= 0) {
          slot_add(gs, s, c);
        } else {
          float* d = table_pointer(p.dx, o);
          d[i] += c;
        }
      }
    }
  }
}

// ---- small products ---------------------------------------------------------------------------

// Forward of a small product batch (contract of SmallProductForward in gpu_kernels.h).
//   y[b][r, c] = bias[b][r, c] + Σ_i Σ_j W_i[r, j] · x_i[b][j, c]
// Launch:  kProductThreads per CTA, one warp per row r of y (grid-stride over rows); lane l takes
//          j ≡ l (mod 32) of every W_i row, so each W is read once, coalesced, per launch.
// On chip: one accumulator per column q = b·n + c in registers (kCols >= N = B·n, the unused
//          ones idle); x read through L1 (every warp reads the same x).
// Order:   per lane the j's ascending over W_0, W_1, ...; lanes combined by a fixed xor
//          butterfly; the bias added last. Deterministic.
template <int kCols>
__global__ void __launch_bounds__(kProductThreads)
    small_product_forward_kernel(SmallProductForward p) {
  const int lane = static_cast<int>(threadIdx.x) % kWarp;
  const std::int64_t N = p.B * p.n;
  const std::int64_t warps = static_cast<std::int64_t>(gridDim.x) * kProductWarps;
  const std::int64_t first = static_cast<std::int64_t>(blockIdx.x) * kProductWarps +
                             static_cast<std::int64_t>(threadIdx.x) / kWarp;
  for (std::int64_t r = first; r < p.m; r += warps) {  // warp-uniform
    float acc[kCols];
#pragma unroll
    for (int q = 0; q < kCols; ++q) acc[q] = 0.0f;
    for (int i = 0; i < p.P; ++i) {
      const std::int64_t k = p.k[i];
      const float* wr = p.w[i] + r * k;
      const float* xq[kCols];
#pragma unroll
      for (int q = 0; q < kCols; ++q)
        xq[q] = q < N ? p.x[(q / p.n) * p.P + i] + q % p.n : nullptr;
#pragma unroll 4
      for (std::int64_t j = lane; j < k; j += kWarp) {
        const float wv = wr[j];
#pragma unroll
        for (int q = 0; q < kCols; ++q)
          if (q < N) acc[q] = fmaf(wv, xq[q][j * p.n], acc[q]);
      }
    }
#pragma unroll
    for (int q = 0; q < kCols; ++q)
      for (int offset = kWarp / 2; offset > 0; offset /= 2)
        acc[q] += __shfl_xor_sync(kFullMask, acc[q], offset);
#pragma unroll
    for (int q = 0; q < kCols; ++q) {
      if (q != lane || q >= N) continue;
      const std::int64_t b = q / p.n, c = q % p.n, e = r * p.n + c;
      p.y[b * p.m * p.n + e] = (p.bias != nullptr ? p.bias[b][e] : 0.0f) + acc[q];
    }
  }
}

__device__ inline void put_dx(const SmallProductBackward& p, int i, int q, std::int64_t k,
                              std::int64_t j, float v) {
  if (q >= p.B * p.n || j >= k) return;
  put(p.dx_write, p.dx[(q / p.n) * p.P + i] + j * p.n + q % p.n, v);
}

// Backward of a small product batch (contract of SmallProductBackward in gpu_kernels.h).
//   dW_i[r, j] += Σ_q dy_q[r] · x_i,q[j];  dx_i,q[j] (+)= Σ_r W_i[r, j] · dy_q[r];  dbias.
// Launch:  kProductThreads per CTA; CTA (tile, chunk) for the tiles·chunks first CTAs, tile =
//          32 columns j of one W_i (tiles of W_0 first), chunk = kChunkRows rows r; lane l owns
//          column j, warp w rows r ≡ w (mod 8) of the chunk. Each W and dW element is read
//          once, and dW written once, by the one thread that owns it. Then ceil(m·n / 256) CTAs
//          for dbias (when dbias is non-null), one thread per element.
// On chip: x_i,q[j] and the dx partial sums per column q in registers; the CTA's 8 warp sums
//          in shared memory [8][kCols][32].
// Order:   dx: rows ascending per warp, warps 0..7, then (chunks > 1) the chunks' partial sums
//          (workspace [tiles][chunks][kCols][32]) in chunk order by the CTA of the tile that
//          arrives last (an integer ticket per tile, reset by that CTA). dW: the q's in member
//          order. dbias: members in order. Deterministic; no float atomics.
template <int kCols>
__global__ void __launch_bounds__(kProductThreads)
    small_product_backward_kernel(SmallProductBackward p, int tiles, int chunks) {
  __shared__ float s_warp[kProductWarps][kCols][kWarp];
  __shared__ bool s_last;
  const int lane = static_cast<int>(threadIdx.x) % kWarp;
  const int warp = static_cast<int>(threadIdx.x) / kWarp;
  const std::int64_t N = p.B * p.n, mn = p.m * p.n;
  const int block = static_cast<int>(blockIdx.x);
  if (block >= tiles * chunks) {  // dbias
    const std::int64_t e = static_cast<std::int64_t>(block - tiles * chunks) * kProductThreads +
                           threadIdx.x;
    if (e >= mn) return;
    if (p.bias_shared) {
      float acc = p.dbias[0][e];
      for (int b = 0; b < p.B; ++b) acc += p.dy[b * mn + e];
      p.dbias[0][e] = acc;
    } else {
      for (int b = 0; b < p.B; ++b) p.dbias[b][e] += p.dy[b * mn + e];
    }
    return;
  }
  const int tile = block / chunks, chunk = block % chunks;
  int i = 0;
  std::int64_t tile0 = 0;  // first tile of W_i
  while (tile >= tile0 + (p.k[i] + kWarp - 1) / kWarp) tile0 += (p.k[i++] + kWarp - 1) / kWarp;
  const std::int64_t k = p.k[i];
  const std::int64_t j0 = (tile - tile0) * kWarp, j = j0 + lane;
  const bool valid = j < k;
  float xv[kCols], dx[kCols];
#pragma unroll
  for (int q = 0; q < kCols; ++q) {
    xv[q] = q < N && valid ? p.x[(q / p.n) * p.P + i][j * p.n + q % p.n] : 0.0f;
    dx[q] = 0.0f;
  }
  const float* W = p.w[i];
  float* dW = p.dw[i];
  const std::int64_t r0 = chunk * kChunkRows, r1 = r0 + kChunkRows < p.m ? r0 + kChunkRows : p.m;
  for (std::int64_t r = r0 + warp; r < r1; r += kProductWarps) {
    float dyv[kCols];
#pragma unroll
    for (int q = 0; q < kCols; ++q) dyv[q] = q < N ? p.dy[(q / p.n) * mn + r * p.n + q % p.n] : 0.0f;
    if (!valid) continue;
    const std::int64_t e = r * k + j;
    const float wv = W[e];
    float s = 0.0f;
#pragma unroll
    for (int q = 0; q < kCols; ++q)
      if (q < N) s = fmaf(dyv[q], xv[q], s);
    dW[e] += s;
#pragma unroll
    for (int q = 0; q < kCols; ++q) dx[q] = fmaf(wv, dyv[q], dx[q]);
  }
#pragma unroll
  for (int q = 0; q < kCols; ++q) s_warp[warp][q][lane] = dx[q];
  __syncthreads();
  for (int e = static_cast<int>(threadIdx.x); e < kCols * kWarp; e += kProductThreads) {
    const int q = e / kWarp, l = e % kWarp;
    float t = 0.0f;
    for (int w = 0; w < kProductWarps; ++w) t += s_warp[w][q][l];
    if (chunks == 1)
      put_dx(p, i, q, k, j0 + l, t);
    else
      p.partial[((static_cast<std::int64_t>(tile) * chunks + chunk) * kCols + q) * kWarp + l] = t;
  }
  if (chunks == 1) return;
  __threadfence();  // the partial sums are visible before the ticket is taken
  __syncthreads();
  if (threadIdx.x == 0) s_last = atomicAdd(&p.tickets[tile], 1u) == static_cast<unsigned>(chunks - 1);
  __syncthreads();
  if (!s_last) return;
  __threadfence();
  for (int e = static_cast<int>(threadIdx.x); e < kCols * kWarp; e += kProductThreads) {
    const int q = e / kWarp, l = e % kWarp;
    float t = 0.0f;
    for (int c = 0; c < chunks; ++c)
      t += __ldcg(&p.partial[((static_cast<std::int64_t>(tile) * chunks + c) * kCols + q) * kWarp + l]);
    put_dx(p, i, q, k, j0 + l, t);
  }
  if (threadIdx.x == 0) p.tickets[tile] = 0u;
}

// ---- optimizer updates ------------------------------------------------------------------------

__device__ inline bool row_selected(const std::uint8_t* touched, std::int64_t row, std::int64_t i) {
  return touched == nullptr || touched[i / row] != 0;
}

__global__ void sgd_kernel(SgdScalars s, std::int64_t n, std::int64_t row,
                           const std::uint8_t* __restrict__ touched, float* __restrict__ w,
                           float* __restrict__ g, float* __restrict__ velocity) {
  for (std::int64_t i = global_index(); i < n; i += grid_stride()) {
    if (!row_selected(touched, row, i)) continue;
    const float gd = __fadd_rn(g[i], __fmul_rn(s.weight_decay, w[i]));  // g'
    if (s.use_momentum) {
      const float v = __fadd_rn(__fmul_rn(s.momentum, velocity[i]), gd);
      velocity[i] = v;
      w[i] = __fsub_rn(w[i], __fmul_rn(s.lr, v));
    } else {
      w[i] = __fsub_rn(w[i], __fmul_rn(s.lr, gd));
    }
    g[i] = 0.0f;
  }
}

}  // namespace

// ---- launchers (the one dispatch point per family) ---------------------------------------------

void gather_pieces(int B, int A, std::int64_t width, const std::int64_t* offs,
                   const float* const* src, float* dst, cudaStream_t stream) {
  check_sizes("gather_pieces", B, A, width);
  if (B == 0 || width == 0) return;
  if (A < 1) throw InvalidArgument("gather_pieces: expected at least one piece, got 0");
  gather_pieces_kernel<<<blocks_for(B * width), kThreads, 0, stream>>>(B, A, width, offs, src,
                                                                       dst);
  PRNN_CHECK_LAUNCH();
}

namespace {

// The grid of copy_pieces / scatter_add: y over the destinations, x over the largest one's
// elements (capped so that x·y stays near kMaxPieceBlocks).
dim3 piece_grid(int D, std::int64_t max_size) {
  const std::int64_t y = std::min<std::int64_t>(D, 65535);
  const std::int64_t chunks = (max_size + kScatterThreads - 1) / kScatterThreads;
  const std::int64_t x = std::clamp<std::int64_t>(
      std::min(chunks, kMaxPieceBlocks / y), 1, kMaxPieceBlocks);
  return dim3(static_cast<unsigned>(x), static_cast<unsigned>(y));
}

}  // namespace

void copy_pieces(int D, std::int64_t max_size, float* const* dst, const std::int64_t* size,
                 const float* const* src, cudaStream_t stream) {
  check_sizes("copy_pieces", D, 0, max_size);
  if (D == 0 || max_size == 0) return;
  copy_pieces_kernel<<<piece_grid(D, max_size), kScatterThreads, 0, stream>>>(D, dst, size, src);
  PRNN_CHECK_LAUNCH();
}

void scatter_add(int D, std::int64_t max_size, float* const* dst, const std::int64_t* size,
                 const std::int64_t* first, const float* const* src, std::uint8_t* const* flag,
                 cudaStream_t stream) {
  check_sizes("scatter_add", D, 0, max_size);
  if (D == 0) return;
  // With max_size 0 the flags are still set (one block column per destination).
  scatter_add_kernel<<<piece_grid(D, std::max<std::int64_t>(max_size, 1)), kScatterThreads, 0,
                       stream>>>(D, dst, size, first, src, flag);
  PRNN_CHECK_LAUNCH();
}

void pointwise_forward(Pointwise op, int B, int A, std::int64_t n, const float* const* x, float* y,
                       cudaStream_t stream) {
  check_sizes("pointwise_forward", B, A, n);
  if (B == 0 || n == 0) return;
  pointwise_forward_kernel<<<blocks_for(B * n), kThreads, 0, stream>>>(op, B, A, n, x, y);
  PRNN_CHECK_LAUNCH();
}

void pointwise_backward(Pointwise op, GradWrite write, int B, int A, std::int64_t n,
                        const float* const* x, const float* y, const float* dy, float* const* dx,
                        cudaStream_t stream) {
  check_sizes("pointwise_backward", B, A, n);
  if (B == 0 || n == 0) return;
  pointwise_backward_kernel<<<blocks_for(B * n), kThreads, 0, stream>>>(op, write, B, A, n, x, y,
                                                                        dy, dx);
  PRNN_CHECK_LAUNCH();
}

void log_softmax_forward(int B, std::int64_t n, const float* const* x, float* y,
                         cudaStream_t stream) {
  check_sizes("log_softmax_forward", B, 1, n);
  if (B == 0 || n == 0) return;
  log_softmax_forward_kernel<<<static_cast<unsigned>(B), kRowThreads, 0, stream>>>(n, x, y);
  PRNN_CHECK_LAUNCH();
}

void log_softmax_backward(GradWrite write, int B, std::int64_t n, const float* y, const float* dy,
                          float* const* dx, cudaStream_t stream) {
  check_sizes("log_softmax_backward", B, 1, n);
  if (B == 0 || n == 0) return;
  log_softmax_backward_kernel<<<static_cast<unsigned>(B), kRowThreads, 0, stream>>>(write, n, y,
                                                                                    dy, dx);
  PRNN_CHECK_LAUNCH();
}

void pick_neg_log_softmax_forward(int B, std::int64_t n, const float* const* x,
                                  const std::int64_t* label, float* y, cudaStream_t stream) {
  check_sizes("pick_neg_log_softmax_forward", B, 1, n);
  if (B == 0 || n == 0) return;
  pick_nls_forward_kernel<<<static_cast<unsigned>(B), kRowThreads, 0, stream>>>(n, x, label, y);
  PRNN_CHECK_LAUNCH();
}

void pick_neg_log_softmax_backward(GradWrite write, int B, std::int64_t n, const float* const* x,
                                   const std::int64_t* label, const float* dy, float* const* dx,
                                   cudaStream_t stream) {
  check_sizes("pick_neg_log_softmax_backward", B, 1, n);
  if (B == 0 || n == 0) return;
  pick_nls_backward_kernel<<<static_cast<unsigned>(B), kRowThreads, 0, stream>>>(write, n, x,
                                                                                 label, dy, dx);
  PRNN_CHECK_LAUNCH();
}

void dropout_forward(const DropoutArgs& d, int B, std::int64_t n, const std::int64_t* node,
                     const double* p, const float* const* x, float* y, cudaStream_t stream) {
  check_sizes("dropout_forward", B, 1, n);
  if (B == 0 || n == 0) return;
  dropout_forward_kernel<<<blocks_for(B * n), kThreads, 0, stream>>>(d, B, n, node, p, x, y);
  PRNN_CHECK_LAUNCH();
}

void dropout_backward(const DropoutArgs& d, GradWrite write, int B, std::int64_t n,
                      const std::int64_t* node, const double* p, const float* dy, float* const* dx,
                      cudaStream_t stream) {
  check_sizes("dropout_backward", B, 1, n);
  if (B == 0 || n == 0) return;
  dropout_backward_kernel<<<blocks_for(B * n), kThreads, 0, stream>>>(d, write, B, n, node, p, dy,
                                                                      dx);
  PRNN_CHECK_LAUNCH();
}

namespace {
void check_fused(const char* fn, const FusedElementwise& p) {
  check_sizes(fn, p.L, 1, p.n);
  if (p.L > 0 && p.n > 0 &&
      (p.lane_first == nullptr || p.op == nullptr || p.arg_first == nullptr || p.src == nullptr ||
       p.x == nullptr || p.y == nullptr))
    throw InvalidArgument(std::string(fn) + ": expected the program's tables, got a null table");
}
}  // namespace

void fused_elementwise_forward(const FusedElementwise& p, cudaStream_t stream) {
  check_fused("fused_elementwise_forward", p);
  if (p.L == 0 || p.n == 0) return;
  fused_forward_kernel<<<blocks_for(p.L * p.n), kThreads, 0, stream>>>(p);
  PRNN_CHECK_LAUNCH();
}

void fused_elementwise_backward(const FusedElementwise& p, cudaStream_t stream) {
  check_fused("fused_elementwise_backward", p);
  if (p.L == 0 || p.n == 0) return;
  if (p.dy == nullptr || p.dx == nullptr)
    throw InvalidArgument("fused_elementwise_backward: expected dy and dx tables, got null");
  fused_backward_kernel<<<blocks_for(p.L * p.n), kThreads, 0, stream>>>(p);
  PRNN_CHECK_LAUNCH();
}

namespace {

// The column template of the small products: N rounded up to 1, 2, 4, 8 or 16.
int column_tile(std::int64_t columns) {
  int c = 1;
  while (c < columns) c *= 2;
  return c;
}

void check_small_product(const char* fn, int B, int P, std::int64_t m, std::int64_t n) {
  check_sizes(fn, B, P, m);
  if (n < 1 || B * n > kSmallProductColumns)
    throw InvalidArgument(std::string(fn) + ": expected 1 <= B·n <= " +
                          std::to_string(kSmallProductColumns) + ", got B " + std::to_string(B) +
                          ", n " + std::to_string(n));
}

std::int64_t product_tiles(const std::int64_t* k_host, int P) {
  std::int64_t tiles = 0;
  for (int i = 0; i < P; ++i) tiles += (k_host[i] + kWarp - 1) / kWarp;
  return tiles;
}

std::int64_t product_chunks(std::int64_t m) {
  return std::max<std::int64_t>((m + kChunkRows - 1) / kChunkRows, 1);
}

template <int kCols>
void launch_small_forward(const SmallProductForward& p, cudaStream_t stream) {
  const auto blocks = static_cast<unsigned>(
      std::clamp<std::int64_t>((p.m + kProductWarps - 1) / kProductWarps, 1, kMaxBlocks));
  small_product_forward_kernel<kCols><<<blocks, kProductThreads, 0, stream>>>(p);
}

template <int kCols>
void launch_small_backward(const SmallProductBackward& p, int tiles, int chunks, int bias_blocks,
                           cudaStream_t stream) {
  const auto blocks = static_cast<unsigned>(tiles * chunks + bias_blocks);
  small_product_backward_kernel<kCols><<<blocks, kProductThreads, 0, stream>>>(p, tiles, chunks);
}

}  // namespace

std::int64_t small_product_backward_tiles(const std::int64_t* k_host, int P) {
  return product_tiles(k_host, P);
}

std::int64_t small_product_backward_workspace(const std::int64_t* k_host, int P, std::int64_t m,
                                              std::int64_t columns) {
  const std::int64_t chunks = product_chunks(m);
  if (chunks == 1) return 0;
  return product_tiles(k_host, P) * chunks * column_tile(columns) * kWarp;
}

// The one dispatch point of the small products: the column count picks the template.
void small_product_forward(const SmallProductForward& p, cudaStream_t stream) {
  check_small_product("small_product_forward", p.B, p.P, p.m, p.n);
  if (p.B == 0 || p.m == 0) return;
  switch (column_tile(p.B * p.n)) {
    case 1: launch_small_forward<1>(p, stream); break;
    case 2: launch_small_forward<2>(p, stream); break;
    case 4: launch_small_forward<4>(p, stream); break;
    case 8: launch_small_forward<8>(p, stream); break;
    default: launch_small_forward<16>(p, stream); break;
  }
  PRNN_CHECK_LAUNCH();
}

void small_product_backward(const SmallProductBackward& p, const std::int64_t* k_host,
                            cudaStream_t stream) {
  check_small_product("small_product_backward", p.B, p.P, p.m, p.n);
  if (p.B == 0 || p.m == 0) return;
  const std::int64_t tiles = product_tiles(k_host, p.P), chunks = product_chunks(p.m);
  const std::int64_t bias_blocks =
      p.dbias != nullptr ? (p.m * p.n + kProductThreads - 1) / kProductThreads : 0;
  if (tiles * chunks + bias_blocks > INT_MAX)
    throw InvalidArgument("small_product_backward: too many CTAs for m " + std::to_string(p.m));
  if (chunks > 1 && tiles > 0 && (p.partial == nullptr || p.tickets == nullptr))
    throw InvalidArgument("small_product_backward: expected a workspace and tickets for m " +
                          std::to_string(p.m));
  if (tiles * chunks + bias_blocks == 0) return;
  const int t = static_cast<int>(tiles), c = static_cast<int>(chunks),
            bb = static_cast<int>(bias_blocks);
  switch (column_tile(p.B * p.n)) {
    case 1: launch_small_backward<1>(p, t, c, bb, stream); break;
    case 2: launch_small_backward<2>(p, t, c, bb, stream); break;
    case 4: launch_small_backward<4>(p, t, c, bb, stream); break;
    case 8: launch_small_backward<8>(p, t, c, bb, stream); break;
    default: launch_small_backward<16>(p, t, c, bb, stream); break;
  }
  PRNN_CHECK_LAUNCH();
}

void sgd_update(const SgdScalars& s, std::int64_t n, std::int64_t row, const std::uint8_t* touched,
                float* w, float* g, float* velocity, cudaStream_t stream) {
  check_sizes("sgd_update", n, row, 0);
  if (n == 0) return;
  if (touched != nullptr && row < 1)
    throw InvalidArgument("sgd_update: expected a row size >= 1 with touched rows, got " +
                          std::to_string(row));
  if (w == nullptr || g == nullptr || (s.use_momentum && velocity == nullptr))
    throw InvalidArgument("sgd_update: expected non-null w, g (and velocity with momentum)");
  sgd_kernel<<<blocks_for(n), kThreads, 0, stream>>>(s, n, row, touched, w, g, velocity);
  PRNN_CHECK_LAUNCH();
}

}  // namespace prnn::graph::gpu
