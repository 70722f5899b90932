// GILR scan, forward and backward, gate math fused (also GILR-LSTM's surrogate h̃).
//   g = σ(P_g + b_g), u = tanh(P_u + b_u)            P columns (g; u) = [0, H), [H, 2H)
//   h_t = g ⊙ h_{t-1} + (1 - g) ⊙ u;  y_t = h_t
// Forward:  load P_g, P_u (+ b) -> coef g, input (1-g) ⊙ u;  store h -> S[t+1], y (if any).
// Backward: G_t = g_{t+1} ⊙ G_{t+1} + dy_t  (GILR-LSTM's surrogate: + dnext[t+1] instead of dy)
//           load: coef g_{t+1} (P_g[t+1]), input dy_t;  store: with g_t, u_t and h_{t-1} = S[t]
//           dP_g = G ⊙ (h_{t-1} - u) ⊙ g(1-g),  dP_u = G ⊙ (1-g) ⊙ (1-u²)
//           final: dstate0 = g_0 ⊙ G_0 (+ dnext[0]).
// Padding (t >= len): forward y_t = 0, S[t+1] = 0; backward dP_g = dP_u = 0.
// Memory (fp32, per element of [T, B, H]): forward reads 2 (P), writes 1-2 (S, y); backward
// reads 4 (P_g twice, P_u, S) + 1 (dy or dnext), writes 2 (dP).
#include "layers/layer_ops.cuh"
#include "layers/layer_scan.cuh"

namespace prnn::layers {
namespace {

template <class T, Mode M>
struct GilrOp : LayerOp<T, M> {
  template <int V>
  struct Step {};

  template <int V>
  __device__ static void load(const ScanParams& p, const LayerArgs& a, const Lane& ln, Pos s,
                              float (&coef)[V], float (&in)[V], Step<V>&) {
    const std::int64_t H = a.hidden;
    if constexpr (M == Mode::Forward) {
      const std::int64_t at = p_at(p, a, ln, s.t);
      float u[V];
      gate<Act::Sigmoid, T, V>(a, ln, at, 0, 0, coef);
      gate<Act::Tanh, T, V>(a, ln, at, H, H, u);
#pragma unroll
      for (int i = 0; i < V; ++i) in[i] = blend_input(coef[i], u[i]);
    } else {
      next_sigmoid_gate<T, V>(p, a, ln, s, 0, 0, coef);
      if (a.dy != nullptr) {
        load_vec<T, V>(static_cast<const T*>(a.dy) + s.at, in);
      } else if (s.q != 0) {  // surrogate: dL/dh̃_t through U sits in row t+1 of dnext
        load_vec<float, V>(a.dnext + s.at + p.stride_t, in);
      } else {
#pragma unroll
        for (int i = 0; i < V; ++i) in[i] = 0.0f;
      }
    }
  }

  template <int V>
  __device__ static void store(const ScanParams& p, const LayerArgs& a, const Lane& ln, Pos s,
                               const float (&state)[V], const Step<V>&) {
    if constexpr (M == Mode::Forward) {
      keep_state<V>(p, a, s, state);
      if (a.y != nullptr) store_vec<T, V>(static_cast<T*>(a.y) + s.at, state);
    } else {
      const std::int64_t H = a.hidden;
      const std::int64_t at = p_at(p, a, ln, s.t);
      float g[V], u[V], hprev[V], dg[V], du[V];
      gate<Act::Sigmoid, T, V>(a, ln, at, 0, 0, g);
      gate<Act::Tanh, T, V>(a, ln, at, H, H, u);
      state_before<V>(p, a, s, hprev);
#pragma unroll
      for (int i = 0; i < V; ++i) {
        dg[i] = blend_grad_gate(state[i], g[i], hprev[i], u[i]);
        du[i] = tanh_grad(blend_grad_w(state[i], g[i]), u[i]);
      }
      store_vec<float, V>(a.dP + at, dg);
      store_vec<float, V>(a.dP + at + H, du);
    }
  }

  template <int V>
  __device__ static void store_padding(const ScanParams& p, const LayerArgs& a, const Lane& ln,
                                       std::int64_t t) {
    pad_step<T, M, V>(p, a, ln, t, 0, 2);  // dP (g; u)
  }

  template <int V>
  __device__ static void store_final(const ScanParams& p, const LayerArgs& a, const Lane& ln,
                                     const float (&state)[V]) {
    store_layer_final<T, M, V>(p, a, ln, 0, 0, state, a.dnext);
  }
};

}  // namespace

void launch_gilr_scan(const LayerLaunch& launch, const LayerArgs& args, cudaStream_t stream) {
  launch_family<GilrOp>(launch, args, stream);
}

}  // namespace prnn::layers
