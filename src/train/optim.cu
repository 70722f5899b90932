// Adam update, fp32, one element per thread (optim.h has the math): the one Adam kernel of the
// library (the long-memory trainer and the graph trainers); and the gradient's norm and scaling
// that clipping by global norm needs (below the Adam kernel).
//   w, g, m, v [n] device arrays; the scalars by value; optionally only touched rows, and the
//   consumed gradient zeroed.
// Launch:   1-D grid-stride loop, 256 threads per CTA, at most kMaxBlocks CTAs.
// Rounding: every product and sum is rounded on its own (__fmul_rn / __fadd_rn, no FMA
//           contraction) and sqrt and division are IEEE (nvcc's defaults), so each element
//           matches reference::adam_update<float> bit for bit when the host compiler does not
//           contract either.
#include <cuda_runtime.h>

#include <algorithm>
#include <string>
#include <vector>

#include "core/cuda_check.h"
#include "prnn/error.h"
#include "train/optim.h"

namespace prnn::train {
namespace {

constexpr int kThreads = 256;
constexpr std::int64_t kMaxBlocks = 4096;

// g_out: where the consumed gradient is zeroed (the graph trainers; it aliases g), or null.
// touched: element i is updated only when touched is null or touched[i / row] != 0.
__global__ void adam_kernel(AdamScalars s, std::int64_t n, std::int64_t row,
                            const std::uint8_t* __restrict__ touched, float* __restrict__ w,
                            const float* g, float* g_out, float* __restrict__ m,
                            float* __restrict__ v) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += stride) {
    if (touched != nullptr && touched[i / row] == 0) continue;
    const float wi = w[i];
    const float gd = __fadd_rn(g[i], __fmul_rn(s.weight_decay, wi));  // g'
    const float mi = __fadd_rn(__fmul_rn(s.beta1, m[i]), __fmul_rn(s.one_minus_beta1, gd));
    const float vi =
        __fadd_rn(__fmul_rn(s.beta2, v[i]), __fmul_rn(__fmul_rn(s.one_minus_beta2, gd), gd));
    m[i] = mi;
    v[i] = vi;
    const float denom = __fadd_rn(__fsqrt_rn(__fdiv_rn(vi, s.bias2)), s.eps);
    w[i] = __fsub_rn(wi, __fdiv_rn(__fmul_rn(s.lr, __fdiv_rn(mi, s.bias1)), denom));
    if (g_out != nullptr) g_out[i] = 0.0f;
  }
}

void check_adam(std::int64_t n, const float* w, const float* g, const float* m, const float* v) {
  if (n < 0) throw InvalidArgument("adam_update: n: expected >= 0, got " + std::to_string(n));
  if (n > 0 && (w == nullptr || g == nullptr || m == nullptr || v == nullptr))
    throw InvalidArgument("adam_update: expected non-null w, g, m and v, got a null pointer");
}

void launch_adam(const AdamScalars& s, std::int64_t n, std::int64_t row,
                 const std::uint8_t* touched, float* w, const float* g, float* g_out, float* m,
                 float* v, cudaStream_t stream) {
  const std::int64_t blocks = std::min<std::int64_t>((n + kThreads - 1) / kThreads, kMaxBlocks);
  adam_kernel<<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(s, n, row, touched, w, g,
                                                                      g_out, m, v);
  PRNN_CHECK_LAUNCH();
}

// Squared norm: every CTA sums its grid-stride share of g in double, reduces it through shared
// memory in a fixed tree and writes partials[blockIdx.x].
// Launch:   kNormPartials CTAs × kThreads threads (the grid is fixed: the order of the sum is).
__global__ void squared_norm_kernel(std::int64_t n, const float* __restrict__ g,
                                    double* __restrict__ partials) {
  __shared__ double sums[kThreads];
  double s = 0.0;
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += stride) {
    const double x = g[i];
    s += x * x;
  }
  sums[threadIdx.x] = s;
  __syncthreads();
  for (int half = kThreads / 2; half > 0; half /= 2) {
    if (static_cast<int>(threadIdx.x) < half) sums[threadIdx.x] += sums[threadIdx.x + half];
    __syncthreads();
  }
  if (threadIdx.x == 0) partials[blockIdx.x] = sums[0];
}

// g[i] = g[i] · factor, one element per thread, grid-stride.
__global__ void scale_kernel(std::int64_t n, float* __restrict__ g, float factor) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += stride)
    g[i] = __fmul_rn(g[i], factor);
}

}  // namespace

double squared_norm(std::int64_t n, const float* g, double* partials, cudaStream_t stream) {
  if (n < 0) throw InvalidArgument("squared_norm: n: expected >= 0, got " + std::to_string(n));
  if (n == 0) return 0.0;
  if (g == nullptr || partials == nullptr)
    throw InvalidArgument("squared_norm: expected non-null g and partials, got a null pointer");
  squared_norm_kernel<<<kNormPartials, kThreads, 0, stream>>>(n, g, partials);
  PRNN_CHECK_LAUNCH();
  std::vector<double> host(kNormPartials);
  PRNN_CUDA_CHECK(cudaMemcpyAsync(host.data(), partials, host.size() * sizeof(double),
                                  cudaMemcpyDeviceToHost, stream));
  PRNN_CUDA_CHECK(cudaStreamSynchronize(stream));
  double sum = 0.0;
  for (const double p : host) sum += p;
  return sum;
}

void scale(std::int64_t n, float* g, float factor, cudaStream_t stream) {
  if (n < 0) throw InvalidArgument("scale: n: expected >= 0, got " + std::to_string(n));
  if (n == 0) return;
  if (g == nullptr) throw InvalidArgument("scale: expected a non-null g, got null");
  const std::int64_t blocks = std::min<std::int64_t>((n + kThreads - 1) / kThreads, kMaxBlocks);
  scale_kernel<<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(n, g, factor);
  PRNN_CHECK_LAUNCH();
}

void adam_update(const AdamScalars& s, std::int64_t n, float* w, const float* g, float* m,
                 float* v, cudaStream_t stream) {
  check_adam(n, w, g, m, v);
  if (n == 0) return;
  launch_adam(s, n, 0, nullptr, w, g, nullptr, m, v, stream);
}

void adam_update_consuming(const AdamScalars& s, std::int64_t n, float* w, float* g, float* m,
                           float* v, const AdamRows& rows, cudaStream_t stream) {
  check_adam(n, w, g, m, v);
  if (rows.touched != nullptr && rows.row < 1)
    throw InvalidArgument("adam_update: expected a row size >= 1 with touched rows, got " +
                          std::to_string(rows.row));
  if (n == 0) return;
  launch_adam(s, n, rows.row, rows.touched, w, g, g, m, v, stream);
}

}  // namespace prnn::train
