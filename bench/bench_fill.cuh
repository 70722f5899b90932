// Device-side random fill for benchmarks: a counter-based hash, so inputs of any size are made
// on the GPU in one pass (never zeros: zeros can run faster than real data).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

namespace prnn::bench {

__device__ __forceinline__ float hash_uniform(std::uint64_t i, std::uint64_t seed) {
  std::uint64_t z = i + seed * 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return static_cast<float>(z >> 40) * (1.0f / 16777216.0f);  // [0, 1)
}

template <class T>
__global__ void fill_uniform_kernel(T* out, std::int64_t n, float lo, float hi, std::uint64_t seed) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += stride)
    out[i] = static_cast<T>(lo + (hi - lo) * hash_uniform(static_cast<std::uint64_t>(i), seed));
}

}  // namespace prnn::bench
