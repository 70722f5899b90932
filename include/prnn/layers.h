// Linear-recurrence layers (Martin & Cundy 2018): every one is GEMMs over all timesteps plus an
// elementwise linear recurrence c_t = a_t ⊙ c_{t-1} + b_t, so the recurrence runs as a parallel scan.
//
// x [T, B, I] time-major, y [T, B, H]. σ = logistic. Parameters are one flat array, blocks in the
// order listed; W blocks are row-major [rows, cols].
//
//   GILR        W [2H, I] = (g; u), b [2H]
//               g = σ(W_g x_t + b_g), u = tanh(W_u x_t + b_u)
//               h_t = g ⊙ h_{t-1} + (1 - g) ⊙ u;  y_t = h_t;  state h [B, H]
//   GILR-LSTM   W [6H, I] = (s; u; i; f; z; o), U [4H, H] = (i; f; z; o), b [6H] = (s; u; i; f; z; o)
//               h̃_t = s ⊙ h̃_{t-1} + (1 - s) ⊙ u,  s = σ(W_s x_t + b_s), u = tanh(W_u x_t + b_u)
//               i, f, o = σ(W x_t + U h̃_{t-1} + b),  z = tanh(W_z x_t + U_z h̃_{t-1} + b_z)
//               c_t = f ⊙ c_{t-1} + i ⊙ z;  y_t = h_t = o ⊙ c_t;  state (h̃, c) [2, B, H]
//   SRU (2017)  W [3H, I] = (x̃; f; r), plus W_s [H, I] when I != H, b [2H] = (f; r)
//               f = σ(W_f x_t + b_f), r = σ(W_r x_t + b_r)
//               c_t = f ⊙ c_{t-1} + (1 - f) ⊙ x̃_t;  y_t = r ⊙ tanh(c_t) + (1 - r) ⊙ s_t
//               with s_t = x_t if I == H else W_s x_t;  state c [B, H]
//   QRNN(k)     W [3H, k*I] = (z; f; o), b [3H]; column block j multiplies x_{t-k+1+j}
//               (zero before the sequence start): a causal convolution of width k
//               z = tanh(.), f = σ(.), o = σ(.);  c_t = f ⊙ c_{t-1} + (1 - f) ⊙ z;  y_t = o ⊙ c_t
//               state c [B, H] (fo-pooling)
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "prnn/scan.h"
#include "prnn/stream.h"
#include "prnn/tensor.h"

namespace prnn {

enum class LinearLayerKind : std::uint8_t { Gilr, GilrLstm, Sru, Qrnn };

const char* to_string(LinearLayerKind k);
// Parses "gilr", "gilr_lstm", "sru", "qrnn"; throws InvalidArgument.
LinearLayerKind parse_linear_layer(const std::string& name);

struct LinearLayerDesc {
  LinearLayerKind kind = LinearLayerKind::Gilr;
  std::int64_t input_size = 0;
  std::int64_t hidden_size = 0;
  std::int64_t window = 1;  // QRNN filter width k; must be 1 for the other layers

  void validate() const;
  // Elements of the flat parameter array.
  std::int64_t param_count() const;
  // Rows of the input projection: the width of W x_t (GEMM output per timestep).
  std::int64_t projection_rows() const;
  // Columns of the input projection (k*I for QRNN, I otherwise).
  std::int64_t projection_cols() const;
  // State values per batch element: 2H for GILR-LSTM (h̃ then c), H otherwise.
  std::int64_t state_size() const;
};

// One layer for a fixed problem shape, forward and backward, on the CPU reference (host tensors,
// f32 or f64) or the GPU (device tensors, f32, f16 or bf16): GEMMs over all timesteps for the
// projections, and one scan kernel per recurrence with the gate math fused into it (src/layers/).
//   x, dx [T, B, I]; y, dy [T, B, H]; params, dparams [desc.param_count()];
//   state0, state_n, dstate_n, dstate0 [S, B, H] with S = 2 for GILR-LSTM (h̃ then c), else 1.
// Every tensor of a call has the layer's dtype. Optional (an empty TensorView): state0 (zeros),
// state_n (not written), dstate_n (zeros), dstate0 (not written), dx (not computed: a first
// layer's input gradient is rarely wanted, and on the GPU it costs a GEMM as large as the
// projection's). Gradient outputs are overwritten, not accumulated.
// 16-bit layers (GPU): f16 / bf16 tensors with fp32 math: the layer converts its 16-bit inputs
// into fp32 device buffers it owns, runs the fp32 path, and rounds the outputs (to nearest even)
// into the caller's tensors. The CPU reference takes f32 or f64 only (Unsupported otherwise).
// Variable-length sequences (the optional `lengths` of forward and backward): host int32 [B],
// lengths[b] in [0, T] the valid steps of sequence b, PyTorch's packed-sequence semantics: steps
// t >= lengths[b] are padding, y_t = 0 there and state_n[b] is the state after step
// lengths[b] - 1 (state0[b] when lengths[b] = 0); in the backward dy_t at padded steps is
// ignored, dx_t there is 0, padded steps add nothing to dparams, and dstate_n[b] enters at step
// lengths[b] - 1 (dstate0[b] = dstate_n[b] when lengths[b] = 0). QRNN's window at a valid step
// reads valid steps only. Empty: every sequence has T steps. x at padded steps is never used,
// but on the GPU it meets zero gradients in the weight-gradient GEMM, so it must be finite
// (padding with zeros, as pad_packed_sequence does, is fine). A bad entry throws
// InvalidArgument naming it. The GPU uploads them into a buffer the constructor allocated (the
// host array may be reused when forward returns); backward must be given the lengths of the
// forward it follows (InvalidArgument names the first entry that differs).
// The constructor allocates everything a call needs (the GPU reserve of the forward, the scan
// workspace, a cuBLAS handle and its workspace, the 16-bit tensors' fp32 copies, the lengths);
// no call allocates device memory. fp32 math (GemmMath::Tf32 puts the GEMMs on TF32 tensor
// cores); results are deterministic (no atomics on data, fixed reduction orders).
// backward() is the backward of the most recent forward(): it reads the layer's reserve, which
// holds that forward's pre-activations and states, so it must be given the same x, params,
// state0 and lengths. Calls on one layer must not overlap (they share the reserve); use one
// stream per layer or synchronize.
class LinearLayer {
 public:
  // ScanAlgo: Auto (Parallel on the GPU, Reference on the host), Serial or Parallel (GPU), or
  // Reference (host). dtype: f32 or f64 on the host, f32, f16 or bf16 on the GPU. math: the
  // GEMMs' (GPU; the host takes Fp32 only). Throws InvalidArgument for a bad desc or size,
  // Unsupported for a dtype, algorithm, math or size this device cannot run.
  LinearLayer(const LinearLayerDesc& desc, std::int64_t steps, std::int64_t batch, DType dtype,
              Device device, ScanAlgo algo = ScanAlgo::Auto, GemmMath math = GemmMath::Fp32);
  ~LinearLayer();
  LinearLayer(LinearLayer&&) noexcept;
  LinearLayer& operator=(LinearLayer&&) noexcept;

  void forward(const TensorView& x, const TensorView& params, const TensorView& state0,
               const TensorView& y, const TensorView& state_n, cudaStream_t stream = nullptr,
               std::span<const std::int32_t> lengths = {});
  void backward(const TensorView& x, const TensorView& params, const TensorView& state0,
                const TensorView& dy, const TensorView& dstate_n, const TensorView& dx,
                const TensorView& dparams, const TensorView& dstate0, cudaStream_t stream = nullptr,
                std::span<const std::int32_t> lengths = {});

  const LinearLayerDesc& desc() const;
  ScanAlgo algo() const;  // the scan that runs inside: Serial or Parallel; Reference on the host
  GemmMath math() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace prnn
