// The long-memory task's data stream (prnn/train.h has the task): a counter-based generator, so
// batch k of seed s is a pure function of (s, k), the same on the host and the device.
//   key(s, k, b)   = mix(mix(mix(s) + k) + b)          one key per sequence b of batch k
//   draw(key, t)   = mix(key + (t+1)·γ)                  SplitMix64's t-th output from state key
//   label          = draw(key, 0) >> 63                  x_0 = +e_0 (class 0) or -e_0 (class 1)
//   symbol (t ≥ 1) = 1 + ((draw(key, t) >> 32) · 127 >> 32)   uniform over 1..127
// with mix the SplitMix64 finalizer (Steele et al. 2014, γ = 0x9E3779B97F4A7C15).
// Layout: x [T, B, 128] fp32 time-major, row (t, b) one-hot (or ±e_0 at t = 0).
#pragma once

#include <cstdint>

#include "prnn/stream.h"

#if defined(__CUDACC__)
#define PRNN_HOST_DEVICE __host__ __device__
#else
#define PRNN_HOST_DEVICE
#endif

namespace prnn::train {

inline constexpr std::int64_t kMemoryAlphabet = 128;   // p: one-hot width
inline constexpr std::int64_t kMemoryDistractors = 127;  // symbols 1..127

PRNN_HOST_DEVICE inline std::uint64_t splitmix_mix(std::uint64_t z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

PRNN_HOST_DEVICE inline std::uint64_t sequence_key(std::uint64_t seed, std::uint64_t batch_index,
                                                   std::uint64_t b) {
  return splitmix_mix(splitmix_mix(splitmix_mix(seed) + batch_index) + b);
}

PRNN_HOST_DEVICE inline std::uint64_t sequence_draw(std::uint64_t key, std::uint64_t t) {
  return splitmix_mix(key + t * 0x9E3779B97F4A7C15ull);
}

// The class of a sequence: 0 when it starts with +e_0, 1 when with -e_0.
PRNN_HOST_DEVICE inline std::int32_t sequence_label(std::uint64_t key) {
  return static_cast<std::int32_t>(sequence_draw(key, 0) >> 63);
}

// The symbol at step t >= 1, in 1..127.
PRNN_HOST_DEVICE inline std::int32_t distractor_symbol(std::uint64_t key, std::uint64_t t) {
  const std::uint64_t hi = sequence_draw(key, t) >> 32;
  return 1 + static_cast<std::int32_t>((hi * static_cast<std::uint64_t>(kMemoryDistractors)) >> 32);
}

// Writes batch `batch_index` into x [steps, batch, 128] on the device (every element).
// steps, batch >= 1; asynchronous on `stream`.
void generate_memory_batch(std::uint64_t seed, std::uint64_t batch_index, std::int64_t steps,
                           std::int64_t batch, float* x, cudaStream_t stream);

}  // namespace prnn::train
