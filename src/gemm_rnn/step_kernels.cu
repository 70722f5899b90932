// The GEMM-RNN's elementwise step kernels (contract in step_kernels.h).
//   forward:   a = pre + b_ih + b_hh; h = act(a) -> out, out2, hn
//   backward:  da = (dy + dh) ⊙ act'(a), act'(a) from h (activation.cuh)
// Layout:   one [B, H] slice per launch; element i = b·H + j.
// Launch:   1-D, 256 threads, one thread per element; consecutive threads walk j, so every load
//           and store is coalesced along a row.
// Gated:    (gates.cuh) one thread per (b, j) reads the unit's G rows j, H + j, .. of [B, G·H].
// Padding:  a row b with t >= lengths[b] (lengths given) is an identity step (step_kernels.h).
// Limits:   B·G·H < 2^31 (checked by can_implement).
#include <algorithm>

#include "core/cuda_check.h"
#include "gemm_rnn/activation.cuh"
#include "gemm_rnn/gates.cuh"
#include "gemm_rnn/step_kernels.h"

namespace prnn::gemm_rnn {
namespace {

constexpr int kThreads = 256;

// Whether row b is padding at time t (lengths nullable: never).
__device__ __forceinline__ bool padded(const std::int32_t* lengths, std::int32_t t,
                                       std::int32_t b) {
  return lengths != nullptr && t >= lengths[b];
}

template <Activation A>
__global__ void __launch_bounds__(kThreads) forward_step_kernel(ForwardStepParams p) {
  const std::int32_t i = static_cast<std::int32_t>(blockIdx.x) * kThreads +
                         static_cast<std::int32_t>(threadIdx.x);
  if (i >= p.batch * p.hidden) return;
  const std::int32_t b = i / p.hidden, j = i % p.hidden;
  const float a = p.pre[i] + p.b_ih[j] + p.b_hh[j];
  const bool pad = padded(p.lengths, p.t, b);
  const float h = !pad                  ? activate<A>(a)
                  : p.h_prev != nullptr ? p.h_prev[b * p.h_prev_stride + j]
                                        : 0.0f;
  const std::int64_t o = b * p.out_stride + j;
  p.out[o] = h;
  if (p.out2 != nullptr) p.out2[o] = pad ? 0.0f : h;
  if (p.hn != nullptr) p.hn[i] = h;
}

template <Activation A>
__global__ void __launch_bounds__(kThreads) backward_step_kernel(BackwardStepParams p) {
  const std::int32_t i = static_cast<std::int32_t>(blockIdx.x) * kThreads +
                         static_cast<std::int32_t>(threadIdx.x);
  if (i >= p.batch * p.hidden) return;
  const std::int32_t b = i / p.hidden, j = i % p.hidden;
  const bool pad = padded(p.lengths, p.t, b);
  float g = pad ? 0.0f : p.dy[b * p.dy_stride + j];
  if (p.dh != nullptr) g += p.dh[i];
  if (p.carry_in != nullptr) g += p.carry_in[i];
  const float h = p.out[b * p.out_stride + j];
  p.dpre[i] = pad ? 0.0f : g * activate_grad_of_output<A>(h);
  if (p.carry_out != nullptr) p.carry_out[i] = pad ? g : 0.0f;
}

template <bool kLstm>
__global__ void __launch_bounds__(kThreads) gated_forward_step_kernel(GatedForwardStepParams p) {
  const std::int32_t i = static_cast<std::int32_t>(blockIdx.x) * kThreads +
                         static_cast<std::int32_t>(threadIdx.x);
  const std::int32_t H = p.hidden;
  if (i >= p.batch * H) return;
  const std::int32_t b = i / H, j = i % H;
  const bool pad = padded(p.lengths, p.t, b);
  // LSTM at a padded row: h_{t-1}; the GRU reads it anyway.
  const float h_prev = p.has_h && (pad || !kLstm) ? p.h_prev[b * p.h_prev_stride + j] : 0.0f;
  float h;
  if constexpr (kLstm) {
    float a[4];
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      const std::int64_t k = static_cast<std::int64_t>(b) * 4 * H + q * H + j;
      a[q] = p.pre[k] + p.b_ih[q * H + j] + p.b_hh[q * H + j];
      p.pre[k] = a[q];
    }
    float c;
    lstm_forward(a, p.c_prev[i], c, h);
    if (pad) {
      c = p.c_prev[i];
      h = h_prev;
    }
    p.c[i] = c;
    if (p.cn != nullptr) p.cn[i] = c;
  } else {
    float a_ih[3], a_hh[3];
#pragma unroll
    for (int q = 0; q < 3; ++q) {
      const std::int64_t k = static_cast<std::int64_t>(b) * 3 * H + q * H + j;
      a_ih[q] = p.pre[k] + p.b_ih[q * H + j];
      a_hh[q] = (p.has_h ? p.pre_h[k] : 0.0f) + p.b_hh[q * H + j];
      p.pre[k] = a_ih[q];
      p.pre_h[k] = a_hh[q];
    }
    h = pad ? h_prev : gru_forward(a_ih, a_hh, h_prev);
  }
  const std::int64_t o = b * p.out_stride + j;
  p.out[o] = h;
  if (p.out2 != nullptr) p.out2[o] = pad ? 0.0f : h;
  if (p.hn != nullptr) p.hn[i] = h;
}

template <bool kLstm>
__global__ void __launch_bounds__(kThreads) gated_backward_step_kernel(GatedBackwardStepParams p) {
  const std::int32_t i = static_cast<std::int32_t>(blockIdx.x) * kThreads +
                         static_cast<std::int32_t>(threadIdx.x);
  const std::int32_t H = p.hidden;
  if (i >= p.batch * H) return;
  const std::int32_t b = i / H, j = i % H;
  const bool pad = padded(p.lengths, p.t, b);
  float dh = pad ? 0.0f : p.dy[b * p.dy_stride + j];
  if (p.dh != nullptr) dh += p.dh[i];
  float carry = p.carry_in != nullptr ? p.carry_in[i] : 0.0f;
  if (pad) {  // identity step: no gate gradients, dh and the carries go on unchanged
#pragma unroll
    for (int q = 0; q < (kLstm ? 4 : 3); ++q) {
      const std::int64_t k = static_cast<std::int64_t>(b) * (kLstm ? 4 : 3) * H + q * H + j;
      p.dpre[k] = 0.0f;
      if constexpr (!kLstm) p.dpre_h[k] = 0.0f;
    }
    if constexpr (kLstm) {
      if (p.carry_h_in != nullptr) dh += p.carry_h_in[i];
      p.carry_h_out[i] = dh;  // the padded step needs the carries (the driver gives them)
      p.carry_out[i] = carry;
    } else {
      p.carry_out[i] = carry + dh;
    }
    return;
  }
  if constexpr (kLstm) {
    if (p.carry_h_in != nullptr) dh += p.carry_h_in[i];
    float a[4], da[4];
#pragma unroll
    for (int q = 0; q < 4; ++q) a[q] = p.pre[static_cast<std::int64_t>(b) * 4 * H + q * H + j];
    lstm_backward(a, p.c_prev[i], p.c[i], dh, carry, da);
#pragma unroll
    for (int q = 0; q < 4; ++q) p.dpre[static_cast<std::int64_t>(b) * 4 * H + q * H + j] = da[q];
    if (p.carry_h_out != nullptr) p.carry_h_out[i] = 0.0f;
  } else {
    float a_ih[3], a_hh[3], da_ih[3], da_hh[3];
#pragma unroll
    for (int q = 0; q < 3; ++q) {
      const std::int64_t k = static_cast<std::int64_t>(b) * 3 * H + q * H + j;
      a_ih[q] = p.pre[k];
      a_hh[q] = p.pre_h[k];
    }
    gru_backward(a_ih, a_hh, p.h_prev[b * p.h_prev_stride + j], dh, carry, da_ih, da_hh);
#pragma unroll
    for (int q = 0; q < 3; ++q) {
      const std::int64_t k = static_cast<std::int64_t>(b) * 3 * H + q * H + j;
      p.dpre[k] = da_ih[q];
      p.dpre_h[k] = da_hh[q];
    }
  }
  p.carry_out[i] = carry;
}

unsigned blocks_for(std::int32_t batch, std::int32_t hidden) {
  return static_cast<unsigned>((static_cast<std::int64_t>(batch) * hidden + kThreads - 1) /
                               kThreads);
}

__global__ void __launch_bounds__(kThreads) masked_add_kernel(MaskedAddParams p) {
  const std::int64_t n = p.rows * p.width;
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * kThreads;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * kThreads + threadIdx.x; i < n;
       i += stride) {
    const std::int64_t r = i / p.width;
    const bool pad = padded(p.lengths, static_cast<std::int32_t>(r / p.batch),
                            static_cast<std::int32_t>(r % p.batch));
    p.out[i] = pad ? 0.0f : p.a[i] + p.b[i];
  }
}

}  // namespace

void launch_masked_add(const MaskedAddParams& p, cudaStream_t stream) {
  constexpr std::int64_t kMaxBlocks = 4096;  // grid-stride beyond
  const std::int64_t n = p.rows * p.width;
  const unsigned blocks =
      static_cast<unsigned>(std::min<std::int64_t>((n + kThreads - 1) / kThreads, kMaxBlocks));
  masked_add_kernel<<<blocks, kThreads, 0, stream>>>(p);
  PRNN_CHECK_LAUNCH();
}

void launch_forward_step(Activation act, const ForwardStepParams& p, cudaStream_t stream) {
  const unsigned blocks = blocks_for(p.batch, p.hidden);
  switch (act) {
    case Activation::ReLU:
      forward_step_kernel<Activation::ReLU><<<blocks, kThreads, 0, stream>>>(p);
      break;
    case Activation::ClippedReLU:
      forward_step_kernel<Activation::ClippedReLU><<<blocks, kThreads, 0, stream>>>(p);
      break;
    case Activation::Tanh:
      forward_step_kernel<Activation::Tanh><<<blocks, kThreads, 0, stream>>>(p);
      break;
  }
  PRNN_CHECK_LAUNCH();
}

void launch_backward_step(Activation act, const BackwardStepParams& p, cudaStream_t stream) {
  const unsigned blocks = blocks_for(p.batch, p.hidden);
  switch (act) {
    case Activation::ReLU:
      backward_step_kernel<Activation::ReLU><<<blocks, kThreads, 0, stream>>>(p);
      break;
    case Activation::ClippedReLU:
      backward_step_kernel<Activation::ClippedReLU><<<blocks, kThreads, 0, stream>>>(p);
      break;
    case Activation::Tanh:
      backward_step_kernel<Activation::Tanh><<<blocks, kThreads, 0, stream>>>(p);
      break;
  }
  PRNN_CHECK_LAUNCH();
}

void launch_gated_forward_step(bool lstm, const GatedForwardStepParams& p, cudaStream_t stream) {
  const unsigned blocks = blocks_for(p.batch, p.hidden);
  if (lstm)
    gated_forward_step_kernel<true><<<blocks, kThreads, 0, stream>>>(p);
  else
    gated_forward_step_kernel<false><<<blocks, kThreads, 0, stream>>>(p);
  PRNN_CHECK_LAUNCH();
}

void launch_gated_backward_step(bool lstm, const GatedBackwardStepParams& p, cudaStream_t stream) {
  const unsigned blocks = blocks_for(p.batch, p.hidden);
  if (lstm)
    gated_backward_step_kernel<true><<<blocks, kThreads, 0, stream>>>(p);
  else
    gated_backward_step_kernel<false><<<blocks, kThreads, 0, stream>>>(p);
  PRNN_CHECK_LAUNCH();
}

}  // namespace prnn::gemm_rnn
