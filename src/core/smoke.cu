// axpy, fp32: y_i = a * x_i + y_i for i < n.
// Launch: 1-D grid-stride loop, 256 threads per CTA. Used by the GPU smoke test only.
#include "prnn/error.h"
#include "core/cuda_check.h"
#include "core/smoke.h"

#include <algorithm>
#include <string>

namespace prnn::gpu {
namespace {

constexpr int kThreads = 256;

__global__ void axpy_kernel(std::int64_t n, float a, const float* __restrict__ x,
                            float* __restrict__ y) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += stride)
    y[i] = a * x[i] + y[i];
}

}  // namespace

void axpy(std::int64_t n, float a, const float* x, float* y, cudaStream_t stream) {
  if (n < 0) throw InvalidArgument("axpy: expected n >= 0, got " + std::to_string(n));
  if (n == 0) return;
  if (x == nullptr || y == nullptr) throw InvalidArgument("axpy: expected non-null x and y, got null");
  const std::int64_t blocks = std::min<std::int64_t>((n + kThreads - 1) / kThreads, 65535);
  axpy_kernel<<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(n, a, x, y);
  PRNN_CHECK_LAUNCH();
}

}  // namespace prnn::gpu
