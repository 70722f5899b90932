// The dropout mask as a pure function of (graph seed, node, element), shared by the CPU registry
// (graph/ops.cpp) and the GPU kernels (graph/gpu_kernels.cu) so both drop the same elements:
//   u = top 53 bits of splitmix64(splitmix64(seed ^ splitmix64(node)) + i) / 2^53   in [0, 1)
//   scale = u < p ? 0 : 1 / (1 - p)
// Integer arithmetic and one IEEE double division: bit-identical on host and device.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define PRNN_GRAPH_HOST_DEVICE __host__ __device__
#else
#define PRNN_GRAPH_HOST_DEVICE
#endif

namespace prnn::graph {

PRNN_GRAPH_HOST_DEVICE inline std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

PRNN_GRAPH_HOST_DEVICE inline double dropout_mask_scale(std::uint64_t seed, std::int32_t node,
                                                        std::uint64_t i, double p) {
  const std::uint64_t h =
      splitmix64(splitmix64(seed ^ splitmix64(static_cast<std::uint64_t>(node))) + i);
  constexpr double kTwoToMinus53 = 1.0 / 9007199254740992.0;
  const double u = static_cast<double>(h >> 11) * kTwoToMinus53;  // uniform in [0, 1)
  return u < p ? 0.0 : 1.0 / (1.0 - p);
}

}  // namespace prnn::graph
