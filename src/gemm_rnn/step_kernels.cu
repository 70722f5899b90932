// The GEMM-RNN's elementwise step kernels (contract in step_kernels.h).
//   forward:   a += b_ih + b_hh; h = act(a) -> out, out2, hn
//   backward:  da = (dy + dh) ⊙ act'(a)
// Layout:   one [B, H] slice per launch; element i = b·H + j.
// Launch:   1-D, 256 threads, one thread per element; consecutive threads walk j, so every load
//           and store is coalesced along a row.
// Limits:   B·H < 2^31 (checked by the dispatch).
#include "core/cuda_check.h"
#include "gemm_rnn/activation.cuh"
#include "gemm_rnn/step_kernels.h"

namespace prnn::gemm_rnn {
namespace {

constexpr int kThreads = 256;
template <Activation A>
__global__ void __launch_bounds__(kThreads) forward_step_kernel(ForwardStepParams p) {
  const std::int32_t i = static_cast<std::int32_t>(blockIdx.x) * kThreads +
                         static_cast<std::int32_t>(threadIdx.x);
  if (i >= p.batch * p.hidden) return;
  const std::int32_t b = i / p.hidden, j = i % p.hidden;
  const float a = p.pre[i] + p.b_ih[j] + p.b_hh[j];
  p.pre[i] = a;
  const float h = activate<A>(a);
  const std::int64_t o = b * p.out_stride + j;
  p.out[o] = h;
  if (p.out2 != nullptr) p.out2[o] = h;
  if (p.hn != nullptr) p.hn[i] = h;
}

template <Activation A>
__global__ void __launch_bounds__(kThreads) backward_step_kernel(BackwardStepParams p) {
  const std::int32_t i = static_cast<std::int32_t>(blockIdx.x) * kThreads +
                         static_cast<std::int32_t>(threadIdx.x);
  if (i >= p.batch * p.hidden) return;
  const std::int32_t b = i / p.hidden, j = i % p.hidden;
  float g = p.dy[b * p.dy_stride + j];
  if (p.dh != nullptr) g += p.dh[i];
  p.dpre[i] = g * activate_grad<A>(p.pre[i]);
}

unsigned blocks_for(std::int32_t batch, std::int32_t hidden) {
  return static_cast<unsigned>((static_cast<std::int64_t>(batch) * hidden + kThreads - 1) /
                               kThreads);
}

}  // namespace

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

}  // namespace prnn::gemm_rnn
