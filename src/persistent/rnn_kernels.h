// Host-side entry points of the persistent RNN kernels (rnn_kernels.cu): one cooperative launch
// runs every step of one layer direction with W_hh [G·H, H] held in registers across the SMs.
// Cells: vanilla (G = 1), GRU (G = 3), LSTM (G = 4); gate math as in gemm_rnn/gates.cuh, the
// reserve exactly as the GEMM-RNN leaves it (gemm_rnn.h), so either recurrence feeds the other's
// backward and the same weight-gradient GEMMs.
//
//   Forward, processing step s at time t = t_first + s·t_step:
//     vanilla  a_t = u_t + W_hh h_prev + b_ih + b_hh, h_t = act(a_t)     (pre keeps u_t)
//     LSTM     a_t = u_t + W_hh h_prev + b_ih + b_hh (4 rows per unit, stored over u_t),
//              c_t = f·c_prev + i·g (stored to cell), h_t = o·tanh(c_t)
//     GRU      a_ih = u_t + b_ih (stored over u_t), a_hh = W_hh h_prev + b_hh (stored to pre_h),
//              h_t = (1 − z)·n + z·h_prev
//     u_t = (W_ih x)_t read from `pre`; h_prev = h_{previous step}, h0 at s = 0 (zeros if null);
//     h_t stored to out (and out2, hn at the last step; LSTM cn)
//   BackwardData, processing step s at time t = t_first + s·t_step (the forward order reversed):
//     dh = dy_t + W_hhᵀ dQ_prev (at s = 0: dhn, zeros if null), then
//     vanilla  dQ_t = dP_t = dh ⊙ act'(a_t), act'(a_t) from h_t in out (activation.cuh)
//     LSTM     dQ_t = dP_t (4 rows) and the dc carry (dcn at s = 0)
//     GRU      dP_t = da_ih, dQ_t = da_hh and the z ⊙ dh carry (zeros at s = 0)
//     the carry is kept in `carry` [B, H]: after the launch it holds dc0 (LSTM) or the part of
//     dh0 that skips W_hh (GRU)
//   Padding (lengths given; batch row b at a time t >= lengths[b]; prnn/rnn.h): an identity step.
//     Forward: h_t = h_prev (LSTM c_t = c_prev) stored to out, hn (cell, cn) and published; out2
//     gets 0. BackwardData: dy_t ignored, dP_t = dQ_t = 0 (published), and the incoming dh goes on
//     in a carry: the GRU's carry (+= dh), else carry_h (= dh; the LSTM's dc carry unchanged),
//     which after the launch holds the part of dh0 that skips W_hh (vanilla, LSTM).
// The new h_t (or dQ_t: NG·H values, unit-major in the FMA kernel, gate-major on gated warp rows)
// is exchanged between CTAs through tagged records in L2: a CTA publishes its units as 16-byte
// records (3 values + the step's tag) and its consumers poll exactly the records they need, so
// the data exchange is the step's only synchronization.
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

  const float* w = nullptr;  // W_hh [G·H, H] row-major
  // W_hh in the layer's 16 bits (bf16 or f16 bits, as w; null: w). The gated warp rows' forward
  // on tensor cores reads it from here where it is set (w_hh_at); every other kernel reads w.
  const std::uint16_t* w16 = nullptr;
  DType w16_type = DType::BF16;

  // The input projection in the kernel (warp-rows forward only; fuses_input_projection): with x
  // set, u_t = W_ih x_t is computed by the kernel and pre is neither read nor written.
  const float* x = nullptr;     // nullable [T, B, I], 16-byte aligned
  const float* w_ih = nullptr;  // [H, I] row-major
  std::int32_t input_size = 0;  // I, a multiple of 4

  // Per-step tensors [T, B, G·H] (pre, pre_h, dpre, dpre_h) or [T, B, H] (cell) contiguous,
  // out and dy rows strided.
  float* pre = nullptr;          // Forward: u_t in, gated a_t (GRU: a_ih) out. BackwardData: in
  float* pre_h = nullptr;        // GRU: a_hh, Forward out, BackwardData in
  float* cell = nullptr;         // LSTM: c_t, Forward out, BackwardData in
  const float* initial = nullptr;  // gated cells [B, H]: LSTM c0, GRU h0 (zeros when absent)
  const float* b_ih = nullptr;   // Forward [G·H]
  const float* b_hh = nullptr;   // Forward [G·H]
  const float* h0 = nullptr;     // Forward, nullable [B, H]
  float* out = nullptr;          // Forward: h_t out; vanilla, GRU BackwardData: h_t in (rows
                                 // out_stride)
  float* out2 = nullptr;         // Forward, nullable: h_t again (the user's y)
  std::int64_t out_stride = 0;
  float* hn = nullptr;           // Forward, nullable [B, H]: the last step's h
  float* cn = nullptr;           // LSTM Forward, nullable [B, H]: the last step's c
  const float* dy = nullptr;     // BackwardData: rows dy_stride apart
  std::int64_t dy_stride = 0;
  const float* dhn = nullptr;    // BackwardData, nullable [B, H]
  const float* dcn = nullptr;    // LSTM BackwardData, nullable [B, H]
  float* carry = nullptr;        // gated BackwardData [B, H]: the carry (see above)
  float* dpre = nullptr;         // BackwardData out: dP_t (GRU: da_ih)
  float* dpre_h = nullptr;       // GRU BackwardData out: da_hh
  const std::int32_t* lengths = nullptr;  // nullable [B]: sequence lengths (padding above)
  float* carry_h = nullptr;      // vanilla, LSTM BackwardData with lengths [B, H] (see above)

  float4* exchange = nullptr;    // [2, B, K] records, then the tensor-core kernels' (tiling.h)
  unsigned* control = nullptr;   // [kControlWords] device words
  unsigned* status_host = nullptr;  // nullable, mapped host word: kStatus* bits for the host

  std::uint64_t timeout_ns = 0;
  // FMA kernels: a CTA barrier after each chunk's finishers (Tiling::finish_barrier).
  bool finish_barrier = false;
  // Warp-rows kernels: record warps per batch group of a CTA (set by launch() from the tiling).
  std::int32_t warp_records = 0;
  // Debug knob: CTA stall_cta sleeps stall_ns before processing step stall_step (-1: off).
  std::int32_t stall_cta = -1, stall_step = 0;
  std::uint64_t stall_ns = 0;
};

std::size_t exchange_bytes(const Tiling& tiling, std::int64_t batch);

// Checks that this GPU can run `tiling` for `pass` with every CTA co-resident (cooperative
// launch supported, the occupancy API reports room for one CTA per SM at tiling.threads), with
// the vanilla cells' activation `act` (the gated cells ignore it). Empty when it can; otherwise
// the reason.
std::string prepare(Pass pass, const Tiling& tiling, Activation act, int device);

// Whether the forward of `tiling` can compute the input projection of a layer of `input_size`
// inputs in the kernel (Params::x): it runs on the warp-rows kernel, input_size % 4 == 0, and its
// records and W_ih rows fit the shared memory of `device`. The call's x must then also be 16-byte
// aligned. prepare(Forward, ...) must have run.
bool fuses_input_projection(const Tiling& tiling, std::int64_t input_size, Activation act,
                            int device);

void launch(Pass pass, const Tiling& tiling, const Params& params, cudaStream_t stream);

}  // namespace prnn::persistent
