// SRU (2017) scan, forward and backward, gate math fused.
//   x̃ = P_x̃, f = σ(P_f + b_f), r = σ(P_r + b_r)        P columns (x̃; f; r; s) = [0, H) .. [3H, 4H)
//   c_t = f ⊙ c_{t-1} + (1 - f) ⊙ x̃;  y_t = r ⊙ tanh(c_t) + (1 - r) ⊙ s_t     b = (f; r)
//   s_t = x_t when I == H (args.x), else P_s (the projection W_s x_t, no bias)
// Forward:  load P_x̃, P_f -> coef f, input (1-f) ⊙ x̃;  store: P_r, s -> y; c -> S[t+1].
// Backward: G_t = f_{t+1} ⊙ G_{t+1} + dy_t ⊙ r_t ⊙ (1 - tanh² c_t)
//           load: coef f_{t+1}; P_r, c_t = S[t+1], s_t, dy_t -> the input, and (kept for store)
//                 dP_r = dy ⊙ (tanh c - s) ⊙ r(1-r), ds = dy ⊙ (1-r);
//           store: with f, x̃ at t and c_{t-1} = S[t]:
//                 dP_x̃ = G ⊙ (1-f), dP_f = G ⊙ (c_{t-1} - x̃) ⊙ f(1-f), dP_r, and ds into
//                 dP_s (I != H) or dx (I == H: the dx GEMM then accumulates onto it; nowhere
//                 when the caller wants no dx: args.x given, args.dx null);
//           final: dstate0 = f_0 ⊙ G_0.
// Padding (t >= len): forward y_t = 0, S[t+1] = 0; backward dP_x̃ = dP_f = dP_r = 0 and
//           dP_s = 0 (I != H) or dx_t = 0 (I == H).
#include "layers/layer_ops.cuh"
#include "layers/layer_scan.cuh"

namespace prnn::layers {
namespace {

enum SruColumn : int { kColX = 0, kColF = 1, kColR = 2, kColS = 3 };  // × H
enum SruBias : int { kBiasF = 0, kBiasR = 1 };                        // × H

template <class T, Mode M>
struct SruOp : LayerOp<T, M> {
  template <int V>
  struct Step {
    float dpr[M == Mode::Backward ? V : 1];
    float ds[M == Mode::Backward ? V : 1];
  };

  // The highway input s_t: x_t (I == H) or P_s.
  template <int V>
  __device__ static void highway(const LayerArgs& a, const Lane& ln, const Pos& s, std::int64_t at,
                                 float (&out)[V]) {
    if (a.x != nullptr) load_vec<T, V>(static_cast<const T*>(a.x) + s.at, out);
    else gate<Act::Identity, T, V>(a, ln, at, kColS * a.hidden, kNoBias, out);
  }

  template <int V>
  __device__ static void load(const ScanParams& p, const LayerArgs& a, const Lane& ln, Pos s,
                              float (&coef)[V], float (&in)[V], Step<V>& step) {
    const std::int64_t H = a.hidden;
    const std::int64_t at = p_at(p, a, ln, s.t);
    if constexpr (M == Mode::Forward) {
      float xt[V];
      gate<Act::Identity, T, V>(a, ln, at, kColX * H, kNoBias, xt);
      gate<Act::Sigmoid, T, V>(a, ln, at, kColF * H, kBiasF * H, coef);
#pragma unroll
      for (int i = 0; i < V; ++i) in[i] = blend_input(coef[i], xt[i]);
    } else {
      next_sigmoid_gate<T, V>(p, a, ln, s, kColF * H, kBiasF * H, coef);
      float r[V], c[V], hw[V], dy[V];
      gate<Act::Sigmoid, T, V>(a, ln, at, kColR * H, kBiasR * H, r);
      state_after<V>(p, a, s, c);
      highway<V>(a, ln, s, at, hw);
      load_vec<T, V>(static_cast<const T*>(a.dy) + s.at, dy);
#pragma unroll
      for (int i = 0; i < V; ++i) {
        const float tc = tanhf(c[i]);
        in[i] = tanh_grad(dy[i] * r[i], tc);
        step.dpr[i] = blend_grad_gate(dy[i], r[i], tc, hw[i]);
        step.ds[i] = blend_grad_w(dy[i], r[i]);
      }
    }
  }

  template <int V>
  __device__ static void store(const ScanParams& p, const LayerArgs& a, const Lane& ln, Pos s,
                               const float (&state)[V], const Step<V>& step) {
    const std::int64_t H = a.hidden;
    const std::int64_t at = p_at(p, a, ln, s.t);
    if constexpr (M == Mode::Forward) {
      keep_state<V>(p, a, s, state);
      float r[V], hw[V], y[V];
      gate<Act::Sigmoid, T, V>(a, ln, at, kColR * H, kBiasR * H, r);
      highway<V>(a, ln, s, at, hw);
#pragma unroll
      for (int i = 0; i < V; ++i) y[i] = r[i] * tanhf(state[i]) + (1.0f - r[i]) * hw[i];
      store_vec<T, V>(static_cast<T*>(a.y) + s.at, y);
    } else {
      float f[V], xt[V], cprev[V], dxt[V], df[V];
      gate<Act::Sigmoid, T, V>(a, ln, at, kColF * H, kBiasF * H, f);
      gate<Act::Identity, T, V>(a, ln, at, kColX * H, kNoBias, xt);
      state_before<V>(p, a, s, cprev);
#pragma unroll
      for (int i = 0; i < V; ++i) {
        dxt[i] = blend_grad_w(state[i], f[i]);
        df[i] = blend_grad_gate(state[i], f[i], cprev[i], xt[i]);
      }
      store_vec<float, V>(a.dP + at + kColX * H, dxt);
      store_vec<float, V>(a.dP + at + kColF * H, df);
      store_vec<float, V>(a.dP + at + kColR * H, step.dpr);
      if (a.dx != nullptr) store_vec<T, V>(static_cast<T*>(a.dx) + s.at, step.ds);
      else if (a.x == nullptr) store_vec<float, V>(a.dP + at + kColS * H, step.ds);
    }
  }

  // Backward: dP (x̃; f; r), and the highway's gradient: dP_s (I != H) or dx (I == H).
  template <int V>
  __device__ static void store_padding(const ScanParams& p, const LayerArgs& a, const Lane& ln,
                                       std::int64_t t) {
    const bool highway_in_dp = M == Mode::Backward && a.x == nullptr;
    pad_step<T, M, V>(p, a, ln, t, kColX, highway_in_dp ? 4 : 3);
    if constexpr (M == Mode::Backward) {
      const float zero[V] = {};
      if (a.dx != nullptr) store_vec<T, V>(static_cast<T*>(a.dx) + ln.base + t * p.stride_t, zero);
    }
  }

  template <int V>
  __device__ static void store_final(const ScanParams& p, const LayerArgs& a, const Lane& ln,
                                     const float (&state)[V]) {
    const std::int64_t H = a.hidden;
    store_layer_final<T, M, V>(p, a, ln, kColF * H, kBiasF * H, state, nullptr);
  }
};

}  // namespace

void launch_sru_scan(const LayerLaunch& launch, const LayerArgs& args, cudaStream_t stream) {
  launch_family<SruOp>(launch, args, stream);
}

}  // namespace prnn::layers
