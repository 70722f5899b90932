// The gated cells' elementwise math for one hidden unit of one batch element, shared by the
// GEMM-RNN's step kernels and the persistent kernels (device code only). PyTorch's formulation
// and gate order (prnn/rnn.h):
//   LSTM  a = [a_i, a_f, a_g, a_o] = W_ih x + b_ih + W_hh h + b_hh (the four rows of unit j)
//         i = σ(a_i), f = σ(a_f), g = tanh(a_g), o = σ(a_o)
//         c' = f·c + i·g,  h' = o·tanh(c')
//   GRU   a_ih = W_ih x + b_ih, a_hh = W_hh h + b_hh (three rows each: r, z, n)
//         r = σ(a_ih_r + a_hh_r), z = σ(a_ih_z + a_hh_z), n = tanh(a_ih_n + r·a_hh_n)
//         h' = (1 − z)·n + z·h
// Backward, given dh = dL/dh' (the output gradient plus what flows back through W_hh):
//   LSTM  dc' = carry + dh·o·(1 − tanh²c')            carry = dL/dc' through the next step
//         da_i = dc'·g·i(1−i), da_f = dc'·c·f(1−f), da_g = dc'·i·(1−g²), da_o = dh·tanh(c')·o(1−o)
//         carry out = dc'·f (dL/dc); W_hh sees the same da as W_ih
//   GRU   dh_total = dh + carry                          carry = z'·dh' from the next step
//         dn = dh_total(1−z), dz = dh_total(h − n), da_n = dn(1−n²), dr = da_n·a_hh_n
//         da_ih = [dr·r(1−r), dz·z(1−z), da_n]; da_hh = [same r, same z, da_n·r]
//         carry out = dh_total·z (the part of dL/dh that skips W_hh)
// The gates are recomputed from the saved pre-activations. kBranchFree (σ by sigmoid_branch_free)
// is taken by the persistent kernels where it measured faster: the LSTM's forward with the
// product on tensor cores (gated warp rows and tensor-core kernels) and the backwards but the
// gated warp rows' LSTM at BB = 4 (persistent/kernel_common.cuh, compute_backward_unit). Where
// one pass takes it and the other does not, their σ may differ by 2 ulp.
#pragma once

namespace prnn::gemm_rnn {

__device__ __forceinline__ float sigmoid(float a) { return 1.0f / (1.0f + expf(-a)); }

// σ with the approximate division (__fdividef: within 2 ulp of sigmoid; 0 where 1 + e^−a passes
// 2^126, as σ then is): no slow-path branch, so that an LSTM unit's three σ and two tanh overlap
// instead of running one after another. Taken where the finish is on a persistent step's critical
// path and measured faster (bench/results/h200/ab/gated_finish/, ab/prepared2/): in the step
// kernels and most persistent forwards the branch-free form measured slower as often as faster.
__device__ __forceinline__ float sigmoid_branch_free(float a) {
  return __fdividef(1.0f, 1.0f + expf(-a));
}

struct LstmGates {
  float i, f, g, o;
};

template <bool kBranchFree = false>
__device__ __forceinline__ LstmGates lstm_gates(const float (&a)[4]) {
  const auto s = [](float x) { return kBranchFree ? sigmoid_branch_free(x) : sigmoid(x); };
  return {s(a[0]), s(a[1]), tanhf(a[2]), s(a[3])};
}

// a: the unit's four full pre-activations; c: the cell state entering the step. kBranchFree: σ
// by sigmoid_branch_free.
template <bool kBranchFree = false>
__device__ __forceinline__ void lstm_forward(const float (&a)[4], float c, float& c_new,
                                             float& h_new) {
  const LstmGates q = lstm_gates<kBranchFree>(a);
  c_new = q.f * c + q.i * q.g;
  h_new = q.o * tanhf(c_new);
}

// dh: dL/dh'; carry: dL/dc' through the next step (in), dL/dc (out); da: the four gradients.
template <bool kBranchFree = false>
__device__ __forceinline__ void lstm_backward(const float (&a)[4], float c, float c_new, float dh,
                                              float& carry, float (&da)[4]) {
  const LstmGates q = lstm_gates<kBranchFree>(a);
  const float tc = tanhf(c_new);
  const float dct = carry + dh * q.o * (1.0f - tc * tc);
  da[0] = dct * q.g * q.i * (1.0f - q.i);
  da[1] = dct * c * q.f * (1.0f - q.f);
  da[2] = dct * q.i * (1.0f - q.g * q.g);
  da[3] = dh * tc * q.o * (1.0f - q.o);
  carry = dct * q.f;
}

struct GruGates {
  float r, z, n;
};

template <bool kBranchFree = false>
__device__ __forceinline__ GruGates gru_gates(const float (&a_ih)[3], const float (&a_hh)[3]) {
  const auto s = [](float x) { return kBranchFree ? sigmoid_branch_free(x) : sigmoid(x); };
  const float r = s(a_ih[0] + a_hh[0]);
  const float z = s(a_ih[1] + a_hh[1]);
  return {r, z, tanhf(a_ih[2] + r * a_hh[2])};
}

// h: the hidden state entering the step.
__device__ __forceinline__ float gru_forward(const float (&a_ih)[3], const float (&a_hh)[3],
                                             float h) {
  const GruGates q = gru_gates(a_ih, a_hh);
  return (1.0f - q.z) * q.n + q.z * h;
}

// dh: dL/dh' through the output and W_hh; carry: z'·dh' of the next step (in), z·dh_total (out).
template <bool kBranchFree = false>
__device__ __forceinline__ void gru_backward(const float (&a_ih)[3], const float (&a_hh)[3],
                                             float h, float dh, float& carry, float (&da_ih)[3],
                                             float (&da_hh)[3]) {
  const GruGates q = gru_gates<kBranchFree>(a_ih, a_hh);
  const float d = dh + carry;
  const float dn = d * (1.0f - q.z);
  const float dz = d * (h - q.n);
  const float dan = dn * (1.0f - q.n * q.n);
  const float dr = dan * a_hh[2];
  da_ih[0] = da_hh[0] = dr * q.r * (1.0f - q.r);
  da_ih[1] = da_hh[1] = dz * q.z * (1.0f - q.z);
  da_ih[2] = dan;
  da_hh[2] = dan * q.r;
  carry = d * q.z;
}

}  // namespace prnn::gemm_rnn
