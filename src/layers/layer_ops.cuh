// What the layer ops share: reading gates from the pre-activations (bias added, activation
// applied, in registers), the gate derivatives, the gated blend (GILR, QRNN, SRU) and the output
// gate (QRNN, GILR-LSTM), the shifted state reserve S, and the init / final-state conventions.
// Tensor layouts: layer_kernels.h. Every op is `template <class T, Mode M> struct XOp :
// LayerOp<T, M>` (the interface of scan/tile_scan.cuh, Args = LayerArgs), one per .cu file;
// T is the user tensors' element type.
//
// Forward op:  coef_t, in_t from P_t (+ b): the gates;  store writes S[t+1] (and y_t);
//              init = S[0] (= state0, put there by the host), store_final writes state_n.
// Backward op: the scan runs t = len-1 .. 0 over G_t = dL/dstate_t:
//                G_t = a_{t+1} ⊙ G_{t+1} + (dL/dstate_t from outside the recurrence)
//              so load(t) gives coef = a_{t+1} (1 at t = len-1, where G starts from dstate_n =
//              init) and in = the outside gradient (dy through the output's derivative);
//              store(t) has G_t and writes dP_t (every gate's pre-activation gradient);
//              store_final writes dstate0 = a_0 ⊙ G_0 (= G_0 = dstate_n when len = 0).
// Sequence lengths (ScanParams::lengths, nullable): lane (b, h) has len = lengths[b] valid steps;
// store_padding(t) runs for every t in [len, T) (pad_step): the forward writes y_t = 0 and
// S[t+1] = 0, the backward dP_t = 0 over the op's columns (and SRU's highway dx_t = 0), so no
// padded step reaches the GEMMs that make dW, db, dx and GILR-LSTM's U products, and the reserve
// they read holds finite values only.
#pragma once

#include <cstdint>

#include "layers/layer_kernels.h"
#include "scan/tile_scan.cuh"

namespace prnn::layers {

using scan::Lane;
using scan::load_vec;
using scan::Mode;
using scan::Pos;
using scan::ScanParams;
using scan::store_vec;

// Accurate fp32 activations (expf, tanhf): the scans are memory-bound, and the fp32 results
// must stay within 1e-5 of the double reference.
__device__ __forceinline__ float logistic(float v) { return 1.0f / (1.0f + expf(-v)); }

enum class Act : std::uint8_t { Identity, Sigmoid, Tanh };

template <Act A>
__device__ __forceinline__ float activate(float v) {
  if constexpr (A == Act::Sigmoid) return logistic(v);
  else if constexpr (A == Act::Tanh) return tanhf(v);
  else return v;
}

inline constexpr int kNoBias = -1;

// Offset of (t, b, h = ln.c) in P / dP: row t·B + b of [T·B, R], column h.
__device__ __forceinline__ std::int64_t p_at(const ScanParams& p, const LayerArgs& a,
                                             const Lane& ln, std::int64_t t) {
  return (t * p.batch + ln.b) * a.rows + ln.c;
}

// out = act(P[row, col + h] + b[bias_col + h]) for the thread's V channels h; bias_col may be
// kNoBias. col and bias_col are multiples of H.
template <Act A, class T, int V>
__device__ __forceinline__ void gate(const LayerArgs& a, const Lane& ln, std::int64_t row_at,
                                     std::int64_t col, std::int64_t bias_col, float (&out)[V]) {
  load_vec<float, V>(a.P + row_at + col, out);
  if (bias_col != kNoBias) {
    float b[V];
    load_vec<T, V>(static_cast<const T*>(a.bias) + bias_col + ln.c, b);
#pragma unroll
    for (int i = 0; i < V; ++i) out[i] += b[i];
  }
#pragma unroll
  for (int i = 0; i < V; ++i) out[i] = activate<A>(out[i]);
}

// Backward coefficient of step t: the forward gate a_{t+1} (σ of column col), 1 at t = T-1.
template <class T, int V>
__device__ __forceinline__ void next_sigmoid_gate(const ScanParams& p, const LayerArgs& a,
                                                  const Lane& ln, const Pos& s, std::int64_t col,
                                                  std::int64_t bias_col, float (&coef)[V]) {
  if (s.q != 0) {
    gate<Act::Sigmoid, T, V>(a, ln, p_at(p, a, ln, s.t + 1), col, bias_col, coef);
  } else {
#pragma unroll
    for (int i = 0; i < V; ++i) coef[i] = 1.0f;
  }
}

// Gradient through an activation from its output y = act(v) and g = dL/dy:
//   σ: dL/dv = g ⊙ y(1-y);  tanh: dL/dv = g ⊙ (1-y²).
__device__ __forceinline__ float sigmoid_grad(float g, float y) { return g * y * (1.0f - y); }
__device__ __forceinline__ float tanh_grad(float g, float y) { return g * (1.0f - y * y); }

// The gated blend m = f ⊙ u + (1-f) ⊙ w, f = σ(v): the state update of GILR, QRNN and SRU
// (u = the previous state, w = the candidate; f ⊙ u is the scan's coef ⊙ carry) and SRU's
// highway (u = tanh c, w = s). Per channel:
//   blend_input      (1-f) ⊙ w, the scan's input
//   blend_grad_w     dL/dw = g ⊙ (1-f)                    (g = dL/dm)
//   blend_grad_gate  dL/dv = g ⊙ (u - w) ⊙ f(1-f)
__device__ __forceinline__ float blend_input(float f, float w) { return (1.0f - f) * w; }
__device__ __forceinline__ float blend_grad_w(float g, float f) { return g * (1.0f - f); }
__device__ __forceinline__ float blend_grad_gate(float g, float f, float u, float w) {
  return sigmoid_grad(g * (u - w), f);
}

// S[t] (the state before step t) and S[t+1] (after it) of the thread's channels.
template <int V>
__device__ __forceinline__ void state_before(const ScanParams&, const LayerArgs& a, const Pos& s,
                                             float (&out)[V]) {
  load_vec<float, V>(a.S + s.at, out);
}
template <int V>
__device__ __forceinline__ void state_after(const ScanParams& p, const LayerArgs& a, const Pos& s,
                                            float (&out)[V]) {
  load_vec<float, V>(a.S + s.at + p.stride_t, out);
}

// Forward: remember the state for the backward pass (and the final state).
template <int V>
__device__ __forceinline__ void keep_state(const ScanParams& p, const LayerArgs& a, const Pos& s,
                                           const float (&state)[V]) {
  store_vec<float, V>(a.S + s.at + p.stride_t, state);
}

// The output gate y_t = o ⊙ c_t, o = σ(P_o + b_o) of column col (QRNN, GILR-LSTM).
// Forward (store of step t, state = c_t): writes y_t.
template <class T, int V>
__device__ __forceinline__ void store_gated_output(const LayerArgs& a, const Lane& ln, const Pos& s,
                                                   std::int64_t at, std::int64_t col,
                                                   std::int64_t bias_col, const float (&state)[V]) {
  float y[V];
  gate<Act::Sigmoid, T, V>(a, ln, at, col, bias_col, y);
#pragma unroll
  for (int i = 0; i < V; ++i) y[i] *= state[i];
  store_vec<T, V>(static_cast<T*>(a.y) + s.at, y);
}
// Backward (load of step t, c_t = S[t+1]): in = dy_t ⊙ o (dL/dc_t from y_t) and
// dpo = dy_t ⊙ c_t ⊙ o(1-o) (dP_o, for the store).
template <class T, int V>
__device__ __forceinline__ void gated_output_grad(const ScanParams& p, const LayerArgs& a,
                                                  const Lane& ln, const Pos& s, std::int64_t at,
                                                  std::int64_t col, std::int64_t bias_col,
                                                  float (&in)[V], float (&dpo)[V]) {
  float o[V], c[V], dy[V];
  gate<Act::Sigmoid, T, V>(a, ln, at, col, bias_col, o);
  state_after<V>(p, a, s, c);
  load_vec<T, V>(static_cast<const T*>(a.dy) + s.at, dy);
#pragma unroll
  for (int i = 0; i < V; ++i) {
    in[i] = dy[i] * o[i];
    dpo[i] = sigmoid_grad(dy[i] * c[i], o[i]);
  }
}

// Init of the carry: forward S[0] (state0 or zeros); backward dstate_n (nullable: zeros).
template <class T, Mode M>
__device__ __forceinline__ float layer_init(const ScanParams& p, const LayerArgs& a,
                                            std::int32_t b, std::int32_t c) {
  const std::int64_t i = static_cast<std::int64_t>(b) * p.channels + c;
  if constexpr (M == Mode::Forward) {
    return scan::load_elem(a.S, i);
  } else {
    return a.dstate_n != nullptr ? scan::load_elem(static_cast<const T*>(a.dstate_n), i) : 0.0f;
  }
}

// Forward final: state_n (nullable).
template <class T, int V>
__device__ __forceinline__ void store_state_n(const LayerArgs& a, const Lane& ln,
                                              const float (&state)[V]) {
  if (a.state_n != nullptr) store_vec<T, V>(static_cast<T*>(a.state_n) + ln.state_index, state);
}

// Backward final: dstate0 = a_0 ⊙ G_0 (+ extra[state_index] if extra), a_0 = σ(column col, t = 0).
template <class T, int V>
__device__ __forceinline__ void store_dstate0(const ScanParams& p, const LayerArgs& a,
                                              const Lane& ln, std::int64_t col,
                                              std::int64_t bias_col, const float (&g)[V],
                                              const float* extra) {
  if (a.dstate0 == nullptr) return;
  float a0[V], out[V];
  if (ln.len > 0) {
    gate<Act::Sigmoid, T, V>(a, ln, p_at(p, a, ln, 0), col, bias_col, a0);
  } else {  // an empty sequence: state_n = state0, so dstate0 = dstate_n
#pragma unroll
    for (int i = 0; i < V; ++i) a0[i] = 1.0f;
  }
  float more[V] = {};
  if (extra != nullptr) load_vec<float, V>(extra + ln.state_index, more);
#pragma unroll
  for (int i = 0; i < V; ++i) out[i] = fmaf(a0[i], g[i], more[i]);
  store_vec<T, V>(static_cast<T*>(a.dstate0) + ln.state_index, out);
}

// An op's store_final: forward state_n, backward dstate0 (store_dstate0, its a = σ(column col)).
template <class T, Mode M, int V>
__device__ __forceinline__ void store_layer_final(const ScanParams& p, const LayerArgs& a,
                                                  const Lane& ln, std::int64_t col,
                                                  std::int64_t bias_col, const float (&state)[V],
                                                  const float* extra) {
  if constexpr (M == Mode::Forward) store_state_n<T, V>(a, ln, state);
  else store_dstate0<T, V>(p, a, ln, col, bias_col, state, extra);
}

// A padded step t (>= the lane's length; every op's store_padding). Forward: y_t = 0 (when the
// op writes y) and S[t+1] = 0. Backward: dP_t = 0 over columns [first, first + count)·H, the
// columns the op's store writes.
template <class T, Mode M, int V>
__device__ __forceinline__ void pad_step(const ScanParams& p, const LayerArgs& a, const Lane& ln,
                                         std::int64_t t, int first, int count) {
  const float zero[V] = {};
  if constexpr (M == Mode::Forward) {
    const std::int64_t at = ln.base + t * p.stride_t;
    store_vec<float, V>(a.S + at + p.stride_t, zero);
    if (a.y != nullptr) store_vec<T, V>(static_cast<T*>(a.y) + at, zero);
  } else {
    const std::int64_t at = p_at(p, a, ln, t);
    for (int q = first; q < first + count; ++q) store_vec<float, V>(a.dP + at + q * a.hidden, zero);
  }
}

// What every layer op has alike: Args, kMode and the carry's init (layer_init). Each op adds
// load, store, store_padding (pad_step over its own dP columns) and store_final.
template <class T, Mode M>
struct LayerOp {
  using Args = LayerArgs;
  static constexpr Mode kMode = M;

  __device__ static float init(const ScanParams& p, const LayerArgs& a, std::int32_t b,
                               std::int32_t c) {
    return layer_init<T, M>(p, a, b, c);
  }
};

}  // namespace prnn::layers
