// GILR-LSTM cell scan, forward and backward, gate math fused. (The surrogate h̃ is a GILR scan,
// gilr.cu, on columns (s; u); the host adds U h̃_{t-1} into the i,f,z,o columns of P by a GEMM
// between the two scans.)
//   i, f, o = σ(P + b), z = tanh(P_z + b_z)           P columns (i; f; z; o) = [2H, 6H)
//   c_t = f ⊙ c_{t-1} + i ⊙ z;  y_t = o ⊙ c_t
// Forward:  load P_i, P_f, P_z -> coef f, input i ⊙ z;  store: P_o -> y = o ⊙ c; c -> S[t+1].
// Backward: G_t = f_{t+1} ⊙ G_{t+1} + dy_t ⊙ o_t
//           load: coef f_{t+1}; P_o, c_t = S[t+1], dy_t -> input dy ⊙ o and
//                 dP_o = dy ⊙ c ⊙ o(1-o) (kept for store);
//           store: with i, f, z at t and c_{t-1} = S[t]:
//                 dP_i = G ⊙ z ⊙ i(1-i), dP_f = G ⊙ c_{t-1} ⊙ f(1-f), dP_z = G ⊙ i ⊙ (1-z²), dP_o;
//           final: dstate0 (c half) = f_0 ⊙ G_0.
// Padding (t >= len): forward y_t = 0, S[t+1] = 0; backward dP_i = dP_f = dP_z = dP_o = 0.
#include "layers/layer_ops.cuh"
#include "layers/layer_scan.cuh"

namespace prnn::layers {
namespace {

enum CellColumn : int { kColI = 2, kColF = 3, kColZ = 4, kColO = 5 };  // × H

template <class T, Mode M>
struct GilrLstmCellOp : LayerOp<T, M> {
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
      float ig[V], z[V];
      gate<Act::Sigmoid, T, V>(a, ln, at, kColI * H, kColI * H, ig);
      gate<Act::Sigmoid, T, V>(a, ln, at, kColF * H, kColF * H, coef);
      gate<Act::Tanh, T, V>(a, ln, at, kColZ * H, kColZ * H, z);
#pragma unroll
      for (int i = 0; i < V; ++i) in[i] = ig[i] * z[i];
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
      float ig[V], f[V], z[V], cprev[V];
      gate<Act::Sigmoid, T, V>(a, ln, at, kColI * H, kColI * H, ig);
      gate<Act::Sigmoid, T, V>(a, ln, at, kColF * H, kColF * H, f);
      gate<Act::Tanh, T, V>(a, ln, at, kColZ * H, kColZ * H, z);
      state_before<V>(p, a, s, cprev);
      float di[V], df[V], dz[V];
#pragma unroll
      for (int i = 0; i < V; ++i) {
        di[i] = sigmoid_grad(state[i] * z[i], ig[i]);
        df[i] = sigmoid_grad(state[i] * cprev[i], f[i]);
        dz[i] = tanh_grad(state[i] * ig[i], z[i]);
      }
      store_vec<float, V>(a.dP + at + kColI * H, di);
      store_vec<float, V>(a.dP + at + kColF * H, df);
      store_vec<float, V>(a.dP + at + kColZ * H, dz);
      store_vec<float, V>(a.dP + at + kColO * H, step.dpo);
    }
  }

  template <int V>
  __device__ static void store_padding(const ScanParams& p, const LayerArgs& a, const Lane& ln,
                                       std::int64_t t) {
    pad_step<T, M, V>(p, a, ln, t, kColI, 4);  // dP (i; f; z; o)
  }

  template <int V>
  __device__ static void store_final(const ScanParams& p, const LayerArgs& a, const Lane& ln,
                                     const float (&state)[V]) {
    const std::int64_t H = a.hidden;
    store_layer_final<T, M, V>(p, a, ln, kColF * H, kColF * H, state, nullptr);
  }
};

}  // namespace

void launch_gilr_lstm_cell_scan(const LayerLaunch& launch, const LayerArgs& args,
                                cudaStream_t stream) {
  launch_family<GilrLstmCellOp>(launch, args, stream);
}

}  // namespace prnn::layers
