// The vanilla cells' activations and their derivatives, shared by the GEMM-RNN's step kernels and
// the persistent kernels (device code only).
//   relu: max(a, 0); clipped relu: min(max(a, 0), 20); tanh.
// The derivative is taken from the output h = act(a), so that the backward needs the hidden
// states only (the forward stores no pre-activations for vanilla cells):
//   relu: h > 0; clipped relu: 0 < h < 20; tanh: 1 − h². Each equals the derivative at a (for
//   the ReLUs h > 0 exactly when a > 0, and h < 20 exactly when a < 20; tanh's is the same fp32
//   expression of the same tanhf(a)), NaN included (0 for the ReLUs).
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

// act'(a) from h = act(a).
template <Activation A>
__device__ __forceinline__ float activate_grad_of_output(float h) {
  if constexpr (A == Activation::ReLU) return h > 0.0f ? 1.0f : 0.0f;
  if constexpr (A == Activation::ClippedReLU) return h > 0.0f && h < kCeiling ? 1.0f : 0.0f;
  if constexpr (A == Activation::Tanh) return 1.0f - h * h;
}

// The activation as a value kernels take either way: fixed at compile time (the kernels
// instantiated per activation) or chosen at run time (a uniform branch).
template <Activation A>
struct StaticActivation {
  __device__ __forceinline__ float operator()(float a) const { return activate<A>(a); }
  __device__ __forceinline__ float grad_of_output(float h) const {
    return activate_grad_of_output<A>(h);
  }
};

struct RuntimeActivation {
  Activation act;
  __device__ __forceinline__ float operator()(float a) const {
    switch (act) {
      case Activation::ReLU: return activate<Activation::ReLU>(a);
      case Activation::ClippedReLU: return activate<Activation::ClippedReLU>(a);
      case Activation::Tanh: return activate<Activation::Tanh>(a);
    }
    return a;
  }
  __device__ __forceinline__ float grad_of_output(float h) const {
    switch (act) {
      case Activation::ReLU: return activate_grad_of_output<Activation::ReLU>(h);
      case Activation::ClippedReLU: return activate_grad_of_output<Activation::ClippedReLU>(h);
      case Activation::Tanh: return activate_grad_of_output<Activation::Tanh>(h);
    }
    return 1.0f;
  }
};

}  // namespace prnn::gemm_rnn
