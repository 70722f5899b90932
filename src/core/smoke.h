// A minimal kernel that proves the GPU build-and-test loop: y = a·x + y (axpy), fp32.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace prnn::gpu {
void axpy(std::int64_t n, float a, const float* x, float* y, cudaStream_t stream);
}  // namespace prnn::gpu
