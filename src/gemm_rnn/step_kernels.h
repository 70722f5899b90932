// Host-side entry points of the GEMM-RNN's elementwise step kernels (step_kernels.cu). Each runs
// once per timestep, right after that step's cuBLAS GEMM, over one layer and direction's [B, H]
// slice; together with the GEMMs they make one step of the vanilla RNN.
//
//   forward:   a_t = pre + b_ih + b_hh   (pre = W_ih x_t + W_hh h_{t-1}, from the GEMMs)
//              h_t = act(a_t)            stored to out (and out2, hn when given)
//   backward:  da_t = (dy_t + dh) ⊙ act'(a_t)     dh = dL/dh_t through the next step (nullable)
//              act'(a_t) taken from the stored h_t (activation.cuh), so a_t is not kept
//
// act: relu, min(max(a, 0), 20) (clipped relu) or tanh (prnn/rnn.h). All tensors fp32, rows of
// H elements with the row strides given; no aliasing between inputs and outputs except the
// gated cells' in-place pre and a carry_out that may be its carry_in.
//
// Padding (lengths given, row b with t >= lengths[b]; prnn/rnn.h): an identity step.
//   forward:   h_t = h_{t-1} (LSTM c_t = c_{t-1}) into out, hn (cn); out2 (the user's y) gets 0
//   backward:  dy_t ignored; dpre = 0; the incoming dh (and LSTM dc) goes on unchanged through the
//              carries, which hold the part of dL/dh_{t-1} that skips W_hh
// Residual (masked_add): out = a + b, 0 at padded rows.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace prnn::gemm_rnn {

enum class Activation : std::uint8_t { ReLU, ClippedReLU, Tanh };

struct ForwardStepParams {
  std::int32_t batch = 0;       // B rows
  std::int32_t hidden = 0;      // H columns
  const float* pre = nullptr;   // [B, H] the GEMMs' sum W_ih x_t + W_hh h_{t-1}
  const float* b_ih = nullptr;  // [H]
  const float* b_hh = nullptr;  // [H]
  float* out = nullptr;         // [B, H] rows out_stride apart: h_t (the reserve)
  float* out2 = nullptr;        // nullable, rows out_stride apart: h_t again (the user's y)
  std::int64_t out_stride = 0;
  float* hn = nullptr;          // nullable, [B, H] contiguous: h_t again (the last step's hn)
  const std::int32_t* lengths = nullptr;  // nullable [B]: rows with t >= lengths[b] are padding
  std::int32_t t = 0;                     // this step's time
  const float* h_prev = nullptr;  // nullable (zeros), rows h_prev_stride apart: h_{t-1}, read
  std::int64_t h_prev_stride = 0;  // at padded rows only
};

struct BackwardStepParams {
  std::int32_t batch = 0;
  std::int32_t hidden = 0;
  const float* out = nullptr;  // [B, H] rows out_stride apart: h_t, as the forward stored it
  std::int64_t out_stride = 0;
  const float* dy = nullptr;   // [B, H] rows dy_stride apart: dL/dh_t from the layer above
  std::int64_t dy_stride = 0;
  const float* dh = nullptr;   // nullable, [B, H] contiguous: dL/dh_t through step t+1
  float* dpre = nullptr;       // [B, H] da_t
  const std::int32_t* lengths = nullptr;  // nullable [B]: padding as above
  std::int32_t t = 0;
  // Nullable [B, H] (both given or neither; out may alias in): the part of dL/dh_t that skips
  // W_hh (nonzero only after padded steps), and the same for dL/dh_{t-1}.
  const float* carry_in = nullptr;
  float* carry_out = nullptr;
};

struct GatedForwardStepParams {
  std::int32_t batch = 0;
  std::int32_t hidden = 0;
  float* pre = nullptr;          // [B, G·H] in place: the GEMMs' sums in, a (LSTM) / a_ih out
  float* pre_h = nullptr;        // GRU [B, 3H] in place: W_hh h_{t-1} in (if has_h), a_hh out
  bool has_h = false;            // GRU: pre_h holds W_hh h_{t-1} (else h_{t-1} = 0)
  const float* b_ih = nullptr;   // [G·H]
  const float* b_hh = nullptr;   // [G·H]
  const float* h_prev = nullptr;  // GRU [B, H] rows h_prev_stride apart (ignored if !has_h)
  std::int64_t h_prev_stride = 0;
  const float* c_prev = nullptr;  // LSTM [B, H] c_{t-1}
  float* c = nullptr;             // LSTM [B, H] c_t out
  float* out = nullptr;           // [B, H] rows out_stride apart: h_t
  float* out2 = nullptr;          // nullable: h_t again (the user's y)
  std::int64_t out_stride = 0;
  float* hn = nullptr;            // nullable [B, H]
  float* cn = nullptr;            // LSTM, nullable [B, H]: c_t again
  const std::int32_t* lengths = nullptr;  // nullable [B]: padding as above
  std::int32_t t = 0;
};

struct GatedBackwardStepParams {
  std::int32_t batch = 0;
  std::int32_t hidden = 0;
  const float* pre = nullptr;     // [B, G·H] a (LSTM) / a_ih (GRU), as the forward stored them
  const float* pre_h = nullptr;   // GRU [B, 3H] a_hh
  const float* h_prev = nullptr;  // GRU [B, H] rows h_prev_stride apart: h_{t-1}
  std::int64_t h_prev_stride = 0;
  const float* c_prev = nullptr;  // LSTM [B, H] c_{t-1}
  const float* c = nullptr;       // LSTM [B, H] c_t
  const float* dy = nullptr;      // [B, H] rows dy_stride apart
  std::int64_t dy_stride = 0;
  const float* dh = nullptr;      // nullable [B, H]: dL/dh_t through W_hh of step t+1
  const float* carry_in = nullptr;  // nullable [B, H] (zeros): the carry from step t+1
  float* carry_out = nullptr;       // [B, H] (may alias carry_in)
  float* dpre = nullptr;            // [B, G·H] da (LSTM) / da_ih (GRU)
  float* dpre_h = nullptr;          // GRU [B, 3H] da_hh
  const std::int32_t* lengths = nullptr;  // nullable [B]: padding as above
  std::int32_t t = 0;
  // LSTM, nullable [B, H] (both or neither, may alias): the part of dL/dh that skips W_hh, as
  // BackwardStepParams's carries (the GRU's carry already is that part).
  const float* carry_h_in = nullptr;
  float* carry_h_out = nullptr;
};

// out[r, j] = a[r, j] + b[r, j] over rows r = t·B + b of `width` contiguous values, 0 where
// lengths (nullable) marks row b at time t as padding. out may alias a or b.
struct MaskedAddParams {
  std::int64_t rows = 0;    // T·B
  std::int32_t batch = 0;   // B
  std::int32_t width = 0;
  const float* a = nullptr;
  const float* b = nullptr;
  float* out = nullptr;
  const std::int32_t* lengths = nullptr;
};

void launch_forward_step(Activation act, const ForwardStepParams& p, cudaStream_t stream);
void launch_backward_step(Activation act, const BackwardStepParams& p, cudaStream_t stream);
// lstm: the LSTM cell, else the GRU.
void launch_gated_forward_step(bool lstm, const GatedForwardStepParams& p, cudaStream_t stream);
void launch_gated_backward_step(bool lstm, const GatedBackwardStepParams& p, cudaStream_t stream);
void launch_masked_add(const MaskedAddParams& p, cudaStream_t stream);

}  // namespace prnn::gemm_rnn
