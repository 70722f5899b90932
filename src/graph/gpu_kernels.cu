// Kernels of the dynamic-graph GPU executors; the host contracts are in graph/gpu_kernels.h.
//
// Launch shapes (one named constant each):
//   element-wise families (gather_pieces, pointwise, dropout, optimizer updates): 1-D grid-stride
//     loop over all B*width elements, kThreads per CTA, at most kMaxBlocks CTAs;
//   scatter_add: one CTA per destination (grid-stride over destinations beyond kMaxBlocks),
//     threads stride over the destination's elements and sum its sources in the order given;
//   softmax family: one CTA of kRowThreads per member (column vector), block reductions for the
//     maximum and the sum of exponentials in shared memory.
// Index math in int64 (a batch's B*width may exceed 2^31 for large hidden sizes).
#include <cuda_runtime.h>

#include <algorithm>
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

// ---- scatter-add ------------------------------------------------------------------------------

__global__ void scatter_add_kernel(int D, float* const* __restrict__ dst,
                                   const std::int64_t* __restrict__ size,
                                   const std::int64_t* __restrict__ first,
                                   const float* const* __restrict__ src,
                                   std::uint8_t* const* __restrict__ flag) {
  for (int d = blockIdx.x; d < D; d += gridDim.x) {
    float* out = dst[d];
    const std::int64_t n = size[d], s0 = first[d], s1 = first[d + 1];
    for (std::int64_t i = threadIdx.x; i < n; i += blockDim.x) {
      float acc = out[i];
      for (std::int64_t s = s0; s < s1; ++s) acc += src[s][i];
      out[i] = acc;
    }
    if (flag != nullptr && threadIdx.x == 0 && flag[d] != nullptr) *flag[d] = 1;
  }
}

// ---- pointwise --------------------------------------------------------------------------------

__global__ void pointwise_forward_kernel(Pointwise op, int B, int A, std::int64_t n,
                                         const float* const* __restrict__ x,
                                         float* __restrict__ y) {
  const std::int64_t total = static_cast<std::int64_t>(B) * n;
  for (std::int64_t e = global_index(); e < total; e += grid_stride()) {
    const std::int64_t b = e / n, i = e % n;
    const float* const* xb = x + b * A;
    float r = 0.0f;
    switch (op) {
      case Pointwise::Add: r = xb[0][i] + xb[1][i]; break;
      case Pointwise::Sub: r = xb[0][i] - xb[1][i]; break;
      case Pointwise::CMult: r = xb[0][i] * xb[1][i]; break;
      case Pointwise::Tanh: r = tanhf(xb[0][i]); break;
      case Pointwise::Logistic: r = 1.0f / (1.0f + expf(-xb[0][i])); break;
      case Pointwise::Relu: r = fmaxf(xb[0][i], 0.0f); break;
      case Pointwise::Sum:
        for (int a = 0; a < A; ++a) r += xb[a][i];  // 0 + x_0 + x_1 + ..., the reference's order
        break;
    }
    y[e] = r;
  }
}

__global__ void pointwise_backward_kernel(Pointwise op, int B, int A, std::int64_t n,
                                          const float* const* __restrict__ x,
                                          const float* __restrict__ y,
                                          const float* __restrict__ dy, float* const* dx) {
  const std::int64_t total = static_cast<std::int64_t>(B) * n;
  for (std::int64_t e = global_index(); e < total; e += grid_stride()) {
    const std::int64_t b = e / n, i = e % n;
    const float* const* xb = x + b * A;
    float* const* dxb = dx + b * A;
    const float g = dy[e];
    switch (op) {
      case Pointwise::Add:
        dxb[0][i] += g;
        dxb[1][i] += g;
        break;
      case Pointwise::Sub:
        dxb[0][i] += g;
        dxb[1][i] -= g;
        break;
      case Pointwise::CMult:
        dxb[0][i] += g * xb[1][i];
        dxb[1][i] += g * xb[0][i];
        break;
      case Pointwise::Tanh: dxb[0][i] += g * (1.0f - y[e] * y[e]); break;
      case Pointwise::Logistic: dxb[0][i] += g * y[e] * (1.0f - y[e]); break;
      case Pointwise::Relu:
        if (xb[0][i] > 0.0f) dxb[0][i] += g;
        break;
      case Pointwise::Sum:
        for (int a = 0; a < A; ++a) dxb[a][i] += g;
        break;
    }
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

__global__ void log_softmax_backward_kernel(std::int64_t n, const float* __restrict__ y,
                                            const float* __restrict__ dy, float* const* dx) {
  __shared__ float s[kRowThreads];
  const std::int64_t base = static_cast<std::int64_t>(blockIdx.x) * n;
  float total = 0.0f;
  for (std::int64_t i = threadIdx.x; i < n; i += blockDim.x) total += dy[base + i];
  total = block_reduce(total, false, s);
  float* d = dx[blockIdx.x];
  for (std::int64_t i = threadIdx.x; i < n; i += blockDim.x)
    d[i] += dy[base + i] - expf(y[base + i]) * total;
}

__global__ void pick_nls_forward_kernel(std::int64_t n, const float* const* __restrict__ x,
                                        const std::int64_t* __restrict__ label,
                                        float* __restrict__ y) {
  __shared__ float s[kRowThreads];
  const float* xb = x[blockIdx.x];
  const float lse = block_log_sum_exp(xb, n, s);
  if (threadIdx.x == 0) y[blockIdx.x] = lse - xb[label[blockIdx.x]];
}

__global__ void pick_nls_backward_kernel(std::int64_t n, const float* const* __restrict__ x,
                                         const std::int64_t* __restrict__ label,
                                         const float* __restrict__ dy, float* const* dx) {
  __shared__ float s[kRowThreads];
  const float* xb = x[blockIdx.x];
  const float lse = block_log_sum_exp(xb, n, s);
  const float g = dy[blockIdx.x];
  const std::int64_t k = label[blockIdx.x];
  float* d = dx[blockIdx.x];
  for (std::int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    float acc = d[i] + g * expf(xb[i] - lse);
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

__global__ void dropout_backward_kernel(DropoutArgs d, int B, std::int64_t n,
                                        const std::int64_t* __restrict__ node,
                                        const double* __restrict__ p,
                                        const float* __restrict__ dy, float* const* dx) {
  const std::int64_t total = static_cast<std::int64_t>(B) * n;
  for (std::int64_t e = global_index(); e < total; e += grid_stride()) {
    const std::int64_t b = e / n, i = e % n;
    dx[b][i] += dy[e] * dropout_scale_at(d, node[b], p[b], i);
  }
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

__global__ void adam_kernel(AdamScalars s, std::int64_t n, std::int64_t row,
                            const std::uint8_t* __restrict__ touched, float* __restrict__ w,
                            float* __restrict__ g, float* __restrict__ m, float* __restrict__ v) {
  for (std::int64_t i = global_index(); i < n; i += grid_stride()) {
    if (!row_selected(touched, row, i)) continue;
    const float gd = g[i];
    const float mi = __fadd_rn(__fmul_rn(s.beta1, m[i]), __fmul_rn(s.one_minus_beta1, gd));
    const float vi =
        __fadd_rn(__fmul_rn(s.beta2, v[i]), __fmul_rn(__fmul_rn(s.one_minus_beta2, gd), gd));
    m[i] = mi;
    v[i] = vi;
    const float denom = __fadd_rn(__fsqrt_rn(__fdiv_rn(vi, s.bias2)), s.eps);
    w[i] = __fsub_rn(w[i], __fdiv_rn(__fmul_rn(s.lr, __fdiv_rn(mi, s.bias1)), denom));
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

void scatter_add(int D, float* const* dst, const std::int64_t* size, const std::int64_t* first,
                 const float* const* src, std::uint8_t* const* flag, cudaStream_t stream) {
  check_sizes("scatter_add", D, 0, 0);
  if (D == 0) return;
  const auto blocks = static_cast<unsigned>(std::min<std::int64_t>(D, 65535));
  scatter_add_kernel<<<blocks, kScatterThreads, 0, stream>>>(D, dst, size, first, src, flag);
  PRNN_CHECK_LAUNCH();
}

void pointwise_forward(Pointwise op, int B, int A, std::int64_t n, const float* const* x, float* y,
                       cudaStream_t stream) {
  check_sizes("pointwise_forward", B, A, n);
  if (B == 0 || n == 0) return;
  pointwise_forward_kernel<<<blocks_for(B * n), kThreads, 0, stream>>>(op, B, A, n, x, y);
  PRNN_CHECK_LAUNCH();
}

void pointwise_backward(Pointwise op, int B, int A, std::int64_t n, const float* const* x,
                        const float* y, const float* dy, float* const* dx, cudaStream_t stream) {
  check_sizes("pointwise_backward", B, A, n);
  if (B == 0 || n == 0) return;
  pointwise_backward_kernel<<<blocks_for(B * n), kThreads, 0, stream>>>(op, B, A, n, x, y, dy,
                                                                        dx);
  PRNN_CHECK_LAUNCH();
}

void log_softmax_forward(int B, std::int64_t n, const float* const* x, float* y,
                         cudaStream_t stream) {
  check_sizes("log_softmax_forward", B, 1, n);
  if (B == 0 || n == 0) return;
  log_softmax_forward_kernel<<<static_cast<unsigned>(B), kRowThreads, 0, stream>>>(n, x, y);
  PRNN_CHECK_LAUNCH();
}

void log_softmax_backward(int B, std::int64_t n, const float* y, const float* dy, float* const* dx,
                          cudaStream_t stream) {
  check_sizes("log_softmax_backward", B, 1, n);
  if (B == 0 || n == 0) return;
  log_softmax_backward_kernel<<<static_cast<unsigned>(B), kRowThreads, 0, stream>>>(n, y, dy, dx);
  PRNN_CHECK_LAUNCH();
}

void pick_neg_log_softmax_forward(int B, std::int64_t n, const float* const* x,
                                  const std::int64_t* label, float* y, cudaStream_t stream) {
  check_sizes("pick_neg_log_softmax_forward", B, 1, n);
  if (B == 0 || n == 0) return;
  pick_nls_forward_kernel<<<static_cast<unsigned>(B), kRowThreads, 0, stream>>>(n, x, label, y);
  PRNN_CHECK_LAUNCH();
}

void pick_neg_log_softmax_backward(int B, std::int64_t n, const float* const* x,
                                   const std::int64_t* label, const float* dy, float* const* dx,
                                   cudaStream_t stream) {
  check_sizes("pick_neg_log_softmax_backward", B, 1, n);
  if (B == 0 || n == 0) return;
  pick_nls_backward_kernel<<<static_cast<unsigned>(B), kRowThreads, 0, stream>>>(n, x, label, dy,
                                                                                 dx);
  PRNN_CHECK_LAUNCH();
}

void dropout_forward(const DropoutArgs& d, int B, std::int64_t n, const std::int64_t* node,
                     const double* p, const float* const* x, float* y, cudaStream_t stream) {
  check_sizes("dropout_forward", B, 1, n);
  if (B == 0 || n == 0) return;
  dropout_forward_kernel<<<blocks_for(B * n), kThreads, 0, stream>>>(d, B, n, node, p, x, y);
  PRNN_CHECK_LAUNCH();
}

void dropout_backward(const DropoutArgs& d, int B, std::int64_t n, const std::int64_t* node,
                      const double* p, const float* dy, float* const* dx, cudaStream_t stream) {
  check_sizes("dropout_backward", B, 1, n);
  if (B == 0 || n == 0) return;
  dropout_backward_kernel<<<blocks_for(B * n), kThreads, 0, stream>>>(d, B, n, node, p, dy, dx);
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

void adam_update(const AdamScalars& s, std::int64_t n, std::int64_t row,
                 const std::uint8_t* touched, float* w, float* g, float* m, float* v,
                 cudaStream_t stream) {
  check_sizes("adam_update", n, row, 0);
  if (n == 0) return;
  if (touched != nullptr && row < 1)
    throw InvalidArgument("adam_update: expected a row size >= 1 with touched rows, got " +
                          std::to_string(row));
  if (w == nullptr || g == nullptr || m == nullptr || v == nullptr)
    throw InvalidArgument("adam_update: expected non-null w, g, m and v, got a null pointer");
  adam_kernel<<<blocks_for(n), kThreads, 0, stream>>>(s, n, row, touched, w, g, m, v);
  PRNN_CHECK_LAUNCH();
}

}  // namespace prnn::graph::gpu
