// QRNN(k) fo-pooling scan, forward and backward, gate math fused. (The width-k causal convolution
// is k GEMMs with shifted row offsets on the host.)
//   z = tanh(P_z + b_z), f = σ(P_f + b_f), o = σ(P_o + b_o)   P columns (z; f; o) = [0, 3H)
//   c_t = f ⊙ c_{t-1} + (1 - f) ⊙ z;  y_t = o ⊙ c_t
// Forward:  load P_z, P_f -> coef f, input (1-f) ⊙ z;  store: P_o -> y = o ⊙ c; c -> S[t+1].
// Backward: G_t = f_{t+1} ⊙ G_{t+1} + dy_t ⊙ o_t
//           load: coef f_{t+1}; P_o, c_t = S[t+1], dy_t -> input dy ⊙ o and
//                 dP_o = dy ⊙ c ⊙ o(1-o) (kept for store);
//           store: with z, f at t and c_{t-1} = S[t]:
//                 dP_z = G ⊙ (1-f) ⊙ (1-z²), dP_f = G ⊙ (c_{t-1} - z) ⊙ f(1-f), dP_o;
//           final: dstate0 = f_0 ⊙ G_0.
// Padding (t >= len): forward y_t = 0, S[t+1] = 0; backward dP_z = dP_f = dP_o = 0.
#include "layers/layer_ops.cuh"
#include "layers/layer_scan.cuh"

namespace prnn::layers {
namespace {

enum QrnnColumn : int { kColZ = 0, kColF = 1, kColO = 2 };  // × H, bias likewise

template <class T, Mode M>
struct QrnnOp : LayerOp<T, M> {
  template <int V>
  struct Step {
    float dpo[M == Mode::Backward ? V : 1];
  };

  template <int V>
  __device__ static void load(const ScanParams& p, const LayerArgs& a, const Lane& ln, Pos s,
                              float (&coef)[V], float (&in)[V], Step<V>& step) {
    const std::int64_t H = a.hidden;
    const std::int64_t at = p_at(p, a, ln, s.t);
    if constexpr (M == Mode::Forward) {
      float z[V];
      gate<Act::Tanh, T, V>(a, ln, at, kColZ * H, kColZ * H, z);
      gate<Act::Sigmoid, T, V>(a, ln, at, kColF * H, kColF * H, coef);
#pragma unroll
      for (int i = 0; i < V; ++i) in[i] = blend_input(coef[i], z[i]);
    } else {
      next_sigmoid_gate<T, V>(p, a, ln, s, kColF * H, kColF * H, coef);
      gated_output_grad<T, V>(p, a, ln, s, at, kColO * H, kColO * H, in, step.dpo);
    }
  }

  template <int V>
  __device__ static void store(const ScanParams& p, const LayerArgs& a, const Lane& ln, Pos s,
                               const float (&state)[V], const Step<V>& step) {
    const std::int64_t H = a.hidden;
    const std::int64_t at = p_at(p, a, ln, s.t);
    if constexpr (M == Mode::Forward) {
      keep_state<V>(p, a, s, state);
      store_gated_output<T, V>(a, ln, s, at, kColO * H, kColO * H, state);
    } else {
      float z[V], f[V], cprev[V], dz[V], df[V];
      gate<Act::Tanh, T, V>(a, ln, at, kColZ * H, kColZ * H, z);
      gate<Act::Sigmoid, T, V>(a, ln, at, kColF * H, kColF * H, f);
      state_before<V>(p, a, s, cprev);
#pragma unroll
      for (int i = 0; i < V; ++i) {
        dz[i] = tanh_grad(blend_grad_w(state[i], f[i]), z[i]);
        df[i] = blend_grad_gate(state[i], f[i], cprev[i], z[i]);
      }
      store_vec<float, V>(a.dP + at + kColZ * H, dz);
      store_vec<float, V>(a.dP + at + kColF * H, df);
      store_vec<float, V>(a.dP + at + kColO * H, step.dpo);
    }
  }

  template <int V>
  __device__ static void store_padding(const ScanParams& p, const LayerArgs& a, const Lane& ln,
                                       std::int64_t t) {
    pad_step<T, M, V>(p, a, ln, t, kColZ, 3);  // dP (z; f; o)
  }

  template <int V>
  __device__ static void store_final(const ScanParams& p, const LayerArgs& a, const Lane& ln,
                                     const float (&state)[V]) {
    const std::int64_t H = a.hidden;
    store_layer_final<T, M, V>(p, a, ln, kColF * H, kColF * H, state, nullptr);
  }
};

}  // namespace

void launch_qrnn_scan(const LayerLaunch& launch, const LayerArgs& args, cudaStream_t stream) {
  launch_family<QrnnOp>(launch, args, stream);
}

}  // namespace prnn::layers
