// The GPU's global nanosecond clock, for bounded waits in kernels (device code only).
#pragma once

#include <cstdint>

namespace prnn {

__device__ __forceinline__ std::uint64_t global_ns() {
  std::uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

}  // namespace prnn
