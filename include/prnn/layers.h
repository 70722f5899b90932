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
#include <string>

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

}  // namespace prnn
