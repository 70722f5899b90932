// The vanilla cells' activations and their derivatives at the pre-activation a, shared by the
// GEMM-RNN's step kernels and the persistent kernels (device code only).
//   relu: max(a, 0); clipped relu: min(max(a, 0), 20); tanh.
#pragma once

#include "gemm_rnn/step_kernels.h"
#include "prnn/rnn.h"

namespace prnn::gemm_rnn {

inline constexpr float kCeiling = static_cast<float>(kClippedReluCeiling);

template <Activation A>
__device__ __forceinline__ float activate(float a) {
  if constexpr (A == Activation::ReLU) return a > 0.0f ? a : 0.0f;
  if constexpr (A == Activation::ClippedReLU)
    return a <= 0.0f ? 0.0f : (a >= kCeiling ? kCeiling : a);
  if constexpr (A == Activation::Tanh) return tanhf(a);
}

template <Activation A>
__device__ __forceinline__ float activate_grad(float a) {
  if constexpr (A == Activation::ReLU) return a > 0.0f ? 1.0f : 0.0f;
  if constexpr (A == Activation::ClippedReLU) return a > 0.0f && a < kCeiling ? 1.0f : 0.0f;
  if constexpr (A == Activation::Tanh) {
    const float t = tanhf(a);
    return 1.0f - t * t;
  }
}

// The same with the activation chosen at run time (a uniform branch).
__device__ __forceinline__ float activate(Activation act, float a) {
  switch (act) {
    case Activation::ReLU: return activate<Activation::ReLU>(a);
    case Activation::ClippedReLU: return activate<Activation::ClippedReLU>(a);
    case Activation::Tanh: return activate<Activation::Tanh>(a);
  }
  return a;
}
__device__ __forceinline__ float activate_grad(Activation act, float a) {
  switch (act) {
    case Activation::ReLU: return activate_grad<Activation::ReLU>(a);
    case Activation::ClippedReLU: return activate_grad<Activation::ClippedReLU>(a);
    case Activation::Tanh: return activate_grad<Activation::Tanh>(a);
  }
  return 1.0f;
}

}  // namespace prnn::gemm_rnn
