// Host-side entry points of the persistent vanilla-RNN kernels (rnn_kernels.cu): one cooperative
// launch runs every step of one layer direction with W_hh held in registers across the SMs.
//
//   Forward, processing step s at time t = t_first + s·t_step:
//     a_t = u_t + W_hh h_prev + b_ih + b_hh     u_t = (W_ih x)_t, read from `pre`, a_t written back
//     h_t = act(a_t)                            stored to out (and out2, hn at the last step)
//     h_prev = h_{previous step}, h0 at s = 0 (zeros when h0 is null)
//   BackwardData, processing step s at time t = t_first + s·t_step (the reverse of the forward):
//     dA_t = (dy_t + W_hhᵀ dA_prev) ⊙ act'(a_t)  dA_prev = dA of the previous processing step;
//                                               at s = 0 the second term is dhn (zeros if null)
// The new h_t (or dA_t) is exchanged between CTAs through tagged records in L2: a CTA publishes
// its units as 16-byte records (3 values + the step's tag) and its consumers poll exactly the
// records they need, so the data exchange is the step's only synchronization.
//
// Safety: the caller checks co-residency (prepare()) and launches cooperatively; every wait is
// bounded by timeout_ns, and a wait that times out sets kStatusTimeout in the status words and
// makes every CTA leave. A debug knob stalls one CTA (tests of that path).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "gemm_rnn/step_kernels.h"
#include "persistent/tiling.h"

namespace prnn::persistent {

using gemm_rnn::Activation;

enum class Pass : std::uint8_t { Forward, BackwardData };

// Control words (device memory, zeroed then epoch = 1 by the owner before the first launch).
enum ControlWord : int { kStatus = 0, kEpoch = 1, kDone = 2, kAbort = 3, kControlWords = 4 };
inline constexpr unsigned kStatusTimeout = 1u;

struct Params {
  std::int32_t hidden = 0;  // H
  std::int32_t batch = 0;   // B
  std::int32_t steps = 0;   // T
  std::int32_t t_first = 0, t_step = 1;  // time of processing step s: t_first + s·t_step
  Activation act = Activation::ReLU;

  const float* w = nullptr;  // W_hh [H, H] row-major

  // Per-step tensors [T, B, H] contiguous unless a row stride is given.
  float* pre = nullptr;          // Forward: u_t in, a_t out. BackwardData: a_t in
  const float* b_ih = nullptr;   // Forward [H]
  const float* b_hh = nullptr;   // Forward [H]
  const float* h0 = nullptr;     // Forward, nullable [B, H]
  float* out = nullptr;          // Forward: h_t, rows out_stride apart
  float* out2 = nullptr;         // Forward, nullable: h_t again (the user's y)
  std::int64_t out_stride = 0;
  float* hn = nullptr;           // Forward, nullable [B, H]: the last step's h
  const float* dy = nullptr;     // BackwardData: rows dy_stride apart
  std::int64_t dy_stride = 0;
  const float* dhn = nullptr;    // BackwardData, nullable [B, H]
  float* dpre = nullptr;         // BackwardData out: dA_t

  float4* exchange = nullptr;    // [2, B, K] records (exchange_bytes)
  unsigned* control = nullptr;   // [kControlWords] device words
  unsigned* status_host = nullptr;  // nullable, mapped host word: kStatus* bits for the host

  std::uint64_t timeout_ns = 0;
  // Debug knob: CTA stall_cta sleeps stall_ns before processing step stall_step (-1: off).
  std::int32_t stall_cta = -1, stall_step = 0;
  std::uint64_t stall_ns = 0;
};

std::size_t exchange_bytes(const Tiling& tiling, std::int64_t batch);

// Checks that this GPU can run `tiling` for `pass` with every CTA co-resident (cooperative
// launch supported, the occupancy API reports room for one CTA per SM at tiling.threads).
// Empty when it can; otherwise the reason.
std::string prepare(Pass pass, const Tiling& tiling, int device);

void launch(Pass pass, const Tiling& tiling, const Params& params, cudaStream_t stream);

}  // namespace prnn::persistent
