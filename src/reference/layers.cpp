// CPU reference of the linear-recurrence layers (formulas and parameter layout: prnn/layers.h).
// Every layer is written the way the GPU version is built:
//   1. projection  P [T, B, R] = W · col_t + b   one GEMM over all timesteps (col_t = x_t, or the
//                                                 QRNN window x_{t-k+1..t}, zeros before t = 0)
//   2. gate math   elementwise on P
//   3. recurrence  c_t = a_t ⊙ c_{t-1} + v_t      linear_scan_forward over channels = B·H
//   4. output      elementwise
// Backward runs the same stages in reverse: output -> linear_scan_backward -> gate derivatives
// (dP) -> projection backward (dW = Σ_t dP ⊗ col_t, dcol = Wᵀ dP, db = Σ_t dP).
// Per-sequence lengths: a batch with every length T runs as above; otherwise every sequence runs
// alone through the same code over its own lengths[b] steps (gathered out of the batch, results
// scattered back, zeros at the padded steps, dparams summed over the sequences): the literal
// definition of packed sequences, with nothing of the padding left to get wrong.
#include "reference/layers.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <utility>
#include <vector>

#include "core/check.h"
#include "reference/scan.h"

namespace prnn::reference {
namespace {

using std::size_t;

template <class T>
T sigmoid(T v) {
  return T(1) / (T(1) + std::exp(-v));
}

// Sizes of one call and where each parameter block starts in the flat array.
struct Dims {
  size_t steps = 0, batch = 0, input = 0, hidden = 0;
  size_t rows = 0, cols = 0, window = 1;  // projection W [rows, cols]; QRNN width k
  size_t u_offset = 0;                    // U [4H, H] (GILR-LSTM only)
  size_t b_offset = 0;                    // b [bias_count]
  size_t bias_row = 0;                    // b[q] is the bias of projection row bias_row + q
  size_t bias_count = 0;

  size_t at_h(size_t t, size_t n, size_t j) const { return (t * batch + n) * hidden + j; }
  size_t at_p(size_t t, size_t n, size_t r) const { return (t * batch + n) * rows + r; }
  size_t at_x(size_t t, size_t n, size_t i) const { return (t * batch + n) * input + i; }
  size_t channels() const { return batch * hidden; }  // lanes of the scan: [B, H] per step
  size_t th() const { return steps * batch * hidden; }
  size_t tp() const { return steps * batch * rows; }
  size_t tx() const { return steps * batch * input; }
};

Dims make_dims(const char* fn, const LinearLayerDesc& desc, std::int64_t steps,
               std::int64_t batch) {
  try {
    desc.validate();
  } catch (const InvalidArgument& e) {
    throw InvalidArgument(fmt::format("{}: {}", fn, e.what()));
  }
  PRNN_EXPECT(steps >= 1, "{}: steps: expected >= 1, got {}", fn, steps);
  PRNN_EXPECT(batch >= 1, "{}: batch: expected >= 1, got {}", fn, batch);
  Dims d;
  d.steps = static_cast<size_t>(steps);
  d.batch = static_cast<size_t>(batch);
  d.input = static_cast<size_t>(desc.input_size);
  d.hidden = static_cast<size_t>(desc.hidden_size);
  d.rows = static_cast<size_t>(desc.projection_rows());
  d.cols = static_cast<size_t>(desc.projection_cols());
  d.window = static_cast<size_t>(desc.window);
  const size_t H = d.hidden;
  const size_t w_size = d.rows * d.cols;
  d.u_offset = w_size;
  d.b_offset = w_size + (desc.kind == LinearLayerKind::GilrLstm ? 4 * H * H : 0);
  // b covers every projection row, except for SRU, whose b is (f; r): no bias on x̃ or W_s x.
  const bool sru = desc.kind == LinearLayerKind::Sru;
  d.bias_row = sru ? H : 0;
  d.bias_count = sru ? 2 * H : d.rows;
  PRNN_ASSERT(d.b_offset + d.bias_count == static_cast<size_t>(desc.param_count()));
  return d;
}

void check_pointer(const char* fn, const char* name, const void* p) {
  PRNN_EXPECT(p != nullptr, "{}: {}: expected a non-null pointer, got null", fn, name);
}

// lengths (nullable): every entry in [0, T]. True when some sequence is shorter than T.
bool check_lengths(const char* fn, const Dims& d, const std::int32_t* lengths) {
  if (lengths == nullptr) return false;
  bool shorter = false;
  for (size_t b = 0; b < d.batch; ++b) {
    PRNN_EXPECT(lengths[b] >= 0 && static_cast<size_t>(lengths[b]) <= d.steps,
                "{}: lengths[{}]: expected a value in [0, {}] (steps), got {}", fn, b, d.steps,
                lengths[b]);
    shorter = shorter || static_cast<size_t>(lengths[b]) < d.steps;
  }
  return shorter;
}

// Sequence b's first `len` steps of a [steps, B, width] array as [len, 1, width], and back
// (states [S, B, H] likewise, with len = S).
template <class T>
std::vector<T> gather_sequence(const T* v, size_t len, size_t batch, size_t b, size_t width) {
  std::vector<T> out(len * width);
  for (size_t t = 0; t < len; ++t)
    std::copy_n(v + (t * batch + b) * width, width,
                out.begin() + static_cast<std::ptrdiff_t>(t * width));
  return out;
}
template <class T>
void scatter_sequence(const std::vector<T>& seq, T* v, size_t len, size_t batch, size_t b,
                      size_t width) {
  for (size_t t = 0; t < len; ++t)
    std::copy_n(seq.begin() + static_cast<std::ptrdiff_t>(t * width), width,
                v + (t * batch + b) * width);
}

// Column block j of the projection multiplies x_{t-k+1+j}; false when that lies before t = 0.
bool window_source(const Dims& d, size_t t, size_t j, size_t& src) {
  if (t + j + 1 < d.window) return false;
  src = t + j + 1 - d.window;
  return true;
}

// P [T, B, R] = W [R, C] · col_t + b (b on rows [bias_row, bias_row + bias_count)).
template <class T>
std::vector<T> project_forward(const Dims& d, const T* x, const T* params) {
  const T* W = params;
  const T* b = params + d.b_offset;
  std::vector<T> P(d.tp());
  for (size_t t = 0; t < d.steps; ++t)
    for (size_t n = 0; n < d.batch; ++n)
      for (size_t r = 0; r < d.rows; ++r) {
        T acc = T(0);
        for (size_t j = 0; j < d.window; ++j) {
          size_t src = 0;
          if (!window_source(d, t, j, src)) continue;
          for (size_t i = 0; i < d.input; ++i)
            acc += W[r * d.cols + j * d.input + i] * x[d.at_x(src, n, i)];
        }
        if (r >= d.bias_row && r < d.bias_row + d.bias_count) acc += b[r - d.bias_row];
        P[d.at_p(t, n, r)] = acc;
      }
  return P;
}

// Given dP [T, B, R]: dx += Wᵀ dP (through the window), dW += dP ⊗ col_t, db += Σ_t dP.
// dx and dparams nullable.
template <class T>
void project_backward(const Dims& d, const T* x, const T* params, const std::vector<T>& dP, T* dx,
                      T* dparams) {
  const T* W = params;
  for (size_t t = 0; t < d.steps; ++t)
    for (size_t n = 0; n < d.batch; ++n)
      for (size_t r = 0; r < d.rows; ++r) {
        const T g = dP[d.at_p(t, n, r)];
        for (size_t j = 0; j < d.window; ++j) {
          size_t src = 0;
          if (!window_source(d, t, j, src)) continue;
          for (size_t i = 0; i < d.input; ++i) {
            const size_t w = r * d.cols + j * d.input + i;
            if (dx) dx[d.at_x(src, n, i)] += W[w] * g;
            if (dparams) dparams[w] += g * x[d.at_x(src, n, i)];
          }
        }
        if (dparams && r >= d.bias_row && r < d.bias_row + d.bias_count)
          dparams[d.b_offset + r - d.bias_row] += g;
      }
}

// dh arriving at every h_t: the output gradient plus, at the last step, dstate_n (nullable).
template <class T>
std::vector<T> with_final_state_grad(const Dims& d, std::vector<T> dh, const T* dstate_n) {
  if (dstate_n)
    for (size_t c = 0; c < d.channels(); ++c) dh[(d.steps - 1) * d.channels() + c] += dstate_n[c];
  return dh;
}

// ---------------------------------------------------------------------------------------------
// GILR: g = σ(P_g), u = tanh(P_u);  h_t = g ⊙ h_{t-1} + (1-g) ⊙ u;  y = h
template <class T>
struct GilrTape {
  std::vector<T> g, u, h;  // [T, B, H]
};

template <class T>
GilrTape<T> gilr_forward(const Dims& d, const T* x, const T* params, const T* h0) {
  const size_t H = d.hidden;
  const std::vector<T> P = project_forward(d, x, params);  // rows (g; u)
  GilrTape<T> k{std::vector<T>(d.th()), std::vector<T>(d.th()), std::vector<T>(d.th())};
  std::vector<T> v(d.th());  // scan input (1-g) ⊙ u
  for (size_t t = 0; t < d.steps; ++t)
    for (size_t n = 0; n < d.batch; ++n)
      for (size_t j = 0; j < H; ++j) {
        const size_t e = d.at_h(t, n, j);
        k.g[e] = sigmoid(P[d.at_p(t, n, j)]);
        k.u[e] = std::tanh(P[d.at_p(t, n, H + j)]);
        v[e] = (T(1) - k.g[e]) * k.u[e];
      }
  const auto S = static_cast<std::int64_t>(d.steps), C = static_cast<std::int64_t>(d.channels());
  linear_scan_forward(S, C, k.g.data(), v.data(), h0, k.h.data());
  return k;
}

template <class T>
void gilr_backward(const Dims& d, const T* x, const T* params, const T* h0, const T* dy,
                   const T* dstate_n, T* dx, T* dparams, T* dstate0) {
  const size_t H = d.hidden;
  const GilrTape<T> k = gilr_forward(d, x, params, h0);
  const std::vector<T> dh = with_final_state_grad(d, std::vector<T>(dy, dy + d.th()), dstate_n);
  std::vector<T> dg(d.th()), dv(d.th()), dh0(d.channels());
  const auto S = static_cast<std::int64_t>(d.steps), C = static_cast<std::int64_t>(d.channels());
  linear_scan_backward(S, C, k.g.data(), k.h.data(), h0, dh.data(), dg.data(), dv.data(),
                       dh0.data());
  std::vector<T> dP(d.tp());
  for (size_t t = 0; t < d.steps; ++t)
    for (size_t n = 0; n < d.batch; ++n)
      for (size_t j = 0; j < H; ++j) {
        const size_t e = d.at_h(t, n, j);
        const T g = k.g[e], u = k.u[e];
        const T dg_total = dg[e] - dv[e] * u;  // g enters as the scan's a and in (1-g) ⊙ u
        const T du = dv[e] * (T(1) - g);
        dP[d.at_p(t, n, j)] = dg_total * g * (T(1) - g);
        dP[d.at_p(t, n, H + j)] = du * (T(1) - u * u);
      }
  project_backward(d, x, params, dP, dx, dparams);
  if (dstate0) std::copy(dh0.begin(), dh0.end(), dstate0);
}

// ---------------------------------------------------------------------------------------------
// GILR-LSTM: h̃_t = s ⊙ h̃_{t-1} + (1-s) ⊙ u;  i,f,o = σ(P + U h̃_{t-1}), z = tanh(P_z + U_z h̃_{t-1})
//            c_t = f ⊙ c_{t-1} + i ⊙ z;  y = o ⊙ c.   Projection rows (s; u; i; f; z; o).
enum GilrLstmGate : size_t { kGateI = 0, kGateF = 1, kGateZ = 2, kGateO = 3, kGates = 4 };

template <class T>
struct GilrLstmTape {
  std::vector<T> s, u, ht;      // surrogate h̃ [T, B, H]
  std::vector<T> gate[kGates];  // i, f, z, o after activation [T, B, H]
  std::vector<T> c;             // [T, B, H]
};

template <class T>
GilrLstmTape<T> gilr_lstm_forward(const Dims& d, const T* x, const T* params, const T* ht0,
                                  const T* c0) {
  const size_t H = d.hidden;
  const T* U = params + d.u_offset;  // [4H, H] = (i; f; z; o)
  const std::vector<T> P = project_forward(d, x, params);
  GilrLstmTape<T> k;
  for (auto* v : {&k.s, &k.u, &k.ht, &k.c}) v->assign(d.th(), T(0));
  for (auto& v : k.gate) v.assign(d.th(), T(0));
  const auto S = static_cast<std::int64_t>(d.steps), C = static_cast<std::int64_t>(d.channels());

  // The surrogate: a GILR on rows (s; u).
  std::vector<T> v(d.th());
  for (size_t t = 0; t < d.steps; ++t)
    for (size_t n = 0; n < d.batch; ++n)
      for (size_t j = 0; j < H; ++j) {
        const size_t e = d.at_h(t, n, j);
        k.s[e] = sigmoid(P[d.at_p(t, n, j)]);
        k.u[e] = std::tanh(P[d.at_p(t, n, H + j)]);
        v[e] = (T(1) - k.s[e]) * k.u[e];
      }
  linear_scan_forward(S, C, k.s.data(), v.data(), ht0, k.ht.data());

  // LSTM gates read h̃_{t-1}: all of them known now, so this is one more GEMM over all t.
  for (size_t t = 0; t < d.steps; ++t)
    for (size_t n = 0; n < d.batch; ++n)
      for (size_t q = 0; q < kGates; ++q)
        for (size_t j = 0; j < H; ++j) {
          T pre = P[d.at_p(t, n, (2 + q) * H + j)];
          for (size_t m = 0; m < H; ++m) {
            const T prev = t > 0 ? k.ht[d.at_h(t - 1, n, m)] : (ht0 ? ht0[n * H + m] : T(0));
            pre += U[(q * H + j) * H + m] * prev;
          }
          k.gate[q][d.at_h(t, n, j)] = q == kGateZ ? std::tanh(pre) : sigmoid(pre);
        }

  // The cell: c_t = f ⊙ c_{t-1} + i ⊙ z.
  for (size_t e = 0; e < d.th(); ++e) v[e] = k.gate[kGateI][e] * k.gate[kGateZ][e];
  linear_scan_forward(S, C, k.gate[kGateF].data(), v.data(), c0, k.c.data());
  return k;
}

template <class T>
void gilr_lstm_backward(const Dims& d, const T* x, const T* params, const T* ht0, const T* c0,
                        const T* dy, const T* dstate_n, T* dx, T* dparams, T* dstate0) {
  const size_t H = d.hidden, BH = d.channels();
  const T* U = params + d.u_offset;
  const GilrLstmTape<T> k = gilr_lstm_forward(d, x, params, ht0, c0);
  const auto S = static_cast<std::int64_t>(d.steps), C = static_cast<std::int64_t>(BH);

  // Output y = o ⊙ c.
  std::vector<T> dc(d.th()), dgate[kGates];
  for (auto& v : dgate) v.assign(d.th(), T(0));
  for (size_t e = 0; e < d.th(); ++e) {
    dc[e] = dy[e] * k.gate[kGateO][e];
    dgate[kGateO][e] = dy[e] * k.c[e];
  }
  dc = with_final_state_grad(d, std::move(dc), dstate_n ? dstate_n + BH : nullptr);

  // Cell scan backward: a = f, v = i ⊙ z.
  std::vector<T> dv(d.th()), dc0(BH);
  linear_scan_backward(S, C, k.gate[kGateF].data(), k.c.data(), c0, dc.data(), dgate[kGateF].data(),
                       dv.data(), dc0.data());
  for (size_t e = 0; e < d.th(); ++e) {
    dgate[kGateI][e] = dv[e] * k.gate[kGateZ][e];
    dgate[kGateZ][e] = dv[e] * k.gate[kGateI][e];
  }

  // Gate pre-activations, then through U into h̃_{t-1} (h̃_{-1} is state0's first half).
  std::vector<T> dP(d.tp());
  std::vector<T> dht(d.th(), T(0)), dht0(BH, T(0));
  T* dU = dparams ? dparams + d.u_offset : nullptr;
  for (size_t t = 0; t < d.steps; ++t)
    for (size_t n = 0; n < d.batch; ++n)
      for (size_t q = 0; q < kGates; ++q)
        for (size_t j = 0; j < H; ++j) {
          const size_t e = d.at_h(t, n, j);
          const T a = k.gate[q][e];
          const T dpre = q == kGateZ ? dgate[q][e] * (T(1) - a * a) : dgate[q][e] * a * (T(1) - a);
          dP[d.at_p(t, n, (2 + q) * H + j)] = dpre;
          for (size_t m = 0; m < H; ++m) {
            const size_t um = (q * H + j) * H + m;
            const T prev = t > 0 ? k.ht[d.at_h(t - 1, n, m)] : (ht0 ? ht0[n * H + m] : T(0));
            if (dU) dU[um] += dpre * prev;
            if (t > 0)
              dht[d.at_h(t - 1, n, m)] += U[um] * dpre;
            else
              dht0[n * H + m] += U[um] * dpre;
          }
        }
  dht = with_final_state_grad(d, std::move(dht), dstate_n);

  // Surrogate scan backward: a = s, v = (1-s) ⊙ u.
  std::vector<T> ds(d.th()), dsv(d.th()), dht0_scan(BH);
  linear_scan_backward(S, C, k.s.data(), k.ht.data(), ht0, dht.data(), ds.data(), dsv.data(),
                       dht0_scan.data());
  for (size_t t = 0; t < d.steps; ++t)
    for (size_t n = 0; n < d.batch; ++n)
      for (size_t j = 0; j < H; ++j) {
        const size_t e = d.at_h(t, n, j);
        const T s = k.s[e], u = k.u[e];
        dP[d.at_p(t, n, j)] = (ds[e] - dsv[e] * u) * s * (T(1) - s);
        dP[d.at_p(t, n, H + j)] = dsv[e] * (T(1) - s) * (T(1) - u * u);
      }
  project_backward(d, x, params, dP, dx, dparams);
  if (dstate0)
    for (size_t c = 0; c < BH; ++c) {
      dstate0[c] = dht0_scan[c] + dht0[c];
      dstate0[BH + c] = dc0[c];
    }
}

// ---------------------------------------------------------------------------------------------
// SRU: x̃ = P_x̃, f = σ(P_f), r = σ(P_r);  c_t = f ⊙ c_{t-1} + (1-f) ⊙ x̃;
//      y = r ⊙ tanh(c) + (1-r) ⊙ s,  s = x (I == H) or P_s (rows [3H, 4H)).
template <class T>
struct SruTape {
  std::vector<T> xt, f, r, s, c;  // [T, B, H]
};

template <class T>
SruTape<T> sru_forward(const Dims& d, const T* x, const T* params, const T* c0) {
  const size_t H = d.hidden;
  const bool highway_is_x = d.input == H;
  const std::vector<T> P = project_forward(d, x, params);
  SruTape<T> k;
  for (auto* v : {&k.xt, &k.f, &k.r, &k.s, &k.c}) v->assign(d.th(), T(0));
  std::vector<T> v(d.th());
  for (size_t t = 0; t < d.steps; ++t)
    for (size_t n = 0; n < d.batch; ++n)
      for (size_t j = 0; j < H; ++j) {
        const size_t e = d.at_h(t, n, j);
        k.xt[e] = P[d.at_p(t, n, j)];
        k.f[e] = sigmoid(P[d.at_p(t, n, H + j)]);
        k.r[e] = sigmoid(P[d.at_p(t, n, 2 * H + j)]);
        k.s[e] = highway_is_x ? x[d.at_x(t, n, j)] : P[d.at_p(t, n, 3 * H + j)];
        v[e] = (T(1) - k.f[e]) * k.xt[e];
      }
  const auto S = static_cast<std::int64_t>(d.steps), C = static_cast<std::int64_t>(d.channels());
  linear_scan_forward(S, C, k.f.data(), v.data(), c0, k.c.data());
  return k;
}

template <class T>
T sru_output(const SruTape<T>& k, size_t e) {
  return k.r[e] * std::tanh(k.c[e]) + (T(1) - k.r[e]) * k.s[e];
}

template <class T>
void sru_backward(const Dims& d, const T* x, const T* params, const T* c0, const T* dy,
                  const T* dstate_n, T* dx, T* dparams, T* dstate0) {
  const size_t H = d.hidden;
  const bool highway_is_x = d.input == H;
  const SruTape<T> k = sru_forward(d, x, params, c0);
  std::vector<T> dc(d.th()), dr(d.th()), ds(d.th());
  for (size_t e = 0; e < d.th(); ++e) {
    const T tc = std::tanh(k.c[e]);
    dc[e] = dy[e] * k.r[e] * (T(1) - tc * tc);
    dr[e] = dy[e] * (tc - k.s[e]);
    ds[e] = dy[e] * (T(1) - k.r[e]);
  }
  dc = with_final_state_grad(d, std::move(dc), dstate_n);
  std::vector<T> df(d.th()), dv(d.th()), dc0(d.channels());
  const auto S = static_cast<std::int64_t>(d.steps), C = static_cast<std::int64_t>(d.channels());
  linear_scan_backward(S, C, k.f.data(), k.c.data(), c0, dc.data(), df.data(), dv.data(),
                       dc0.data());
  std::vector<T> dP(d.tp());
  for (size_t t = 0; t < d.steps; ++t)
    for (size_t n = 0; n < d.batch; ++n)
      for (size_t j = 0; j < H; ++j) {
        const size_t e = d.at_h(t, n, j);
        const T f = k.f[e], r = k.r[e];
        dP[d.at_p(t, n, j)] = dv[e] * (T(1) - f);
        dP[d.at_p(t, n, H + j)] = (df[e] - dv[e] * k.xt[e]) * f * (T(1) - f);
        dP[d.at_p(t, n, 2 * H + j)] = dr[e] * r * (T(1) - r);
        if (!highway_is_x) dP[d.at_p(t, n, 3 * H + j)] = ds[e];
      }
  project_backward(d, x, params, dP, dx, dparams);
  if (dx && highway_is_x)
    for (size_t e = 0; e < d.th(); ++e) dx[e] += ds[e];  // [T, B, I] == [T, B, H]
  if (dstate0) std::copy(dc0.begin(), dc0.end(), dstate0);
}

// ---------------------------------------------------------------------------------------------
// QRNN(k), fo-pooling: z = tanh(P_z), f = σ(P_f), o = σ(P_o) with P the width-k causal
// convolution;  c_t = f ⊙ c_{t-1} + (1-f) ⊙ z;  y = o ⊙ c.
template <class T>
struct QrnnTape {
  std::vector<T> z, f, o, c;  // [T, B, H]
};

template <class T>
QrnnTape<T> qrnn_forward(const Dims& d, const T* x, const T* params, const T* c0) {
  const size_t H = d.hidden;
  const std::vector<T> P = project_forward(d, x, params);
  QrnnTape<T> k;
  for (auto* v : {&k.z, &k.f, &k.o, &k.c}) v->assign(d.th(), T(0));
  std::vector<T> v(d.th());
  for (size_t t = 0; t < d.steps; ++t)
    for (size_t n = 0; n < d.batch; ++n)
      for (size_t j = 0; j < H; ++j) {
        const size_t e = d.at_h(t, n, j);
        k.z[e] = std::tanh(P[d.at_p(t, n, j)]);
        k.f[e] = sigmoid(P[d.at_p(t, n, H + j)]);
        k.o[e] = sigmoid(P[d.at_p(t, n, 2 * H + j)]);
        v[e] = (T(1) - k.f[e]) * k.z[e];
      }
  const auto S = static_cast<std::int64_t>(d.steps), C = static_cast<std::int64_t>(d.channels());
  linear_scan_forward(S, C, k.f.data(), v.data(), c0, k.c.data());
  return k;
}

template <class T>
void qrnn_backward(const Dims& d, const T* x, const T* params, const T* c0, const T* dy,
                   const T* dstate_n, T* dx, T* dparams, T* dstate0) {
  const size_t H = d.hidden;
  const QrnnTape<T> k = qrnn_forward(d, x, params, c0);
  std::vector<T> dc(d.th()), dout(d.th());
  for (size_t e = 0; e < d.th(); ++e) {
    dc[e] = dy[e] * k.o[e];
    dout[e] = dy[e] * k.c[e];  // d o
  }
  dc = with_final_state_grad(d, std::move(dc), dstate_n);
  std::vector<T> df(d.th()), dv(d.th()), dc0(d.channels());
  const auto S = static_cast<std::int64_t>(d.steps), C = static_cast<std::int64_t>(d.channels());
  linear_scan_backward(S, C, k.f.data(), k.c.data(), c0, dc.data(), df.data(), dv.data(),
                       dc0.data());
  std::vector<T> dP(d.tp());
  for (size_t t = 0; t < d.steps; ++t)
    for (size_t n = 0; n < d.batch; ++n)
      for (size_t j = 0; j < H; ++j) {
        const size_t e = d.at_h(t, n, j);
        const T z = k.z[e], f = k.f[e], o = k.o[e];
        dP[d.at_p(t, n, j)] = dv[e] * (T(1) - f) * (T(1) - z * z);
        dP[d.at_p(t, n, H + j)] = (df[e] - dv[e] * z) * f * (T(1) - f);
        dP[d.at_p(t, n, 2 * H + j)] = dout[e] * o * (T(1) - o);
      }
  project_backward(d, x, params, dP, dx, dparams);
  if (dstate0) std::copy(dc0.begin(), dc0.end(), dstate0);
}

// ---------------------------------------------------------------------------------------------
// Per-sequence lengths: sequence b alone over its lengths[b] steps (batch 1); y and the gradient
// outputs start at zero, so the padded steps stay zero.

template <class T>
void forward_by_sequence(const LinearLayerDesc& desc, const Dims& d, const std::int32_t* lengths,
                         const T* x, const T* params, const T* state0, T* y, T* state_n) {
  const size_t H = d.hidden, S = static_cast<size_t>(desc.state_size()) / H;
  std::fill(y, y + d.th(), T(0));
  for (size_t b = 0; b < d.batch; ++b) {
    const auto len = static_cast<size_t>(lengths[b]);
    std::vector<T> s0 = state0 ? gather_sequence(state0, S, d.batch, b, H) : std::vector<T>(S * H);
    if (len == 0) {  // no step: the state passes through
      if (state_n) scatter_sequence(s0, state_n, S, d.batch, b, H);
      continue;
    }
    const std::vector<T> xb = gather_sequence(x, len, d.batch, b, d.input);
    std::vector<T> yb(len * H), sn(S * H);
    linear_layer_forward<T>(desc, static_cast<std::int64_t>(len), 1, xb.data(), params, s0.data(),
                            yb.data(), sn.data());
    scatter_sequence(yb, y, len, d.batch, b, H);
    if (state_n) scatter_sequence(sn, state_n, S, d.batch, b, H);
  }
}

// dx and dparams arrive zeroed.
template <class T>
void backward_by_sequence(const LinearLayerDesc& desc, const Dims& d, const std::int32_t* lengths,
                          const T* x, const T* params, const T* state0, const T* dy,
                          const T* dstate_n, T* dx, T* dparams, T* dstate0) {
  const size_t H = d.hidden, S = static_cast<size_t>(desc.state_size()) / H;
  const size_t P = d.b_offset + d.bias_count;
  for (size_t b = 0; b < d.batch; ++b) {
    const auto len = static_cast<size_t>(lengths[b]);
    std::vector<T> dsn =
        dstate_n ? gather_sequence(dstate_n, S, d.batch, b, H) : std::vector<T>(S * H);
    if (len == 0) {  // no step: the gradient passes through
      if (dstate0) scatter_sequence(dsn, dstate0, S, d.batch, b, H);
      continue;
    }
    const std::vector<T> s0 =
        state0 ? gather_sequence(state0, S, d.batch, b, H) : std::vector<T>(S * H);
    const std::vector<T> xb = gather_sequence(x, len, d.batch, b, d.input);
    const std::vector<T> dyb = gather_sequence(dy, len, d.batch, b, H);
    std::vector<T> dxb(len * d.input), dpb(P), ds0(S * H);
    linear_layer_backward<T>(desc, static_cast<std::int64_t>(len), 1, xb.data(), params, s0.data(),
                             dyb.data(), dsn.data(), dxb.data(), dpb.data(), ds0.data());
    if (dx) scatter_sequence(dxb, dx, len, d.batch, b, d.input);
    if (dparams)
      for (size_t i = 0; i < P; ++i) dparams[i] += dpb[i];
    if (dstate0) scatter_sequence(ds0, dstate0, S, d.batch, b, H);
  }
}

}  // namespace

template <class T>
void linear_layer_forward(const LinearLayerDesc& desc, std::int64_t steps, std::int64_t batch,
                          const T* x, const T* params, const T* state0, T* y, T* state_n,
                          const std::int32_t* lengths) {
  constexpr const char* fn = "linear_layer_forward";
  const Dims d = make_dims(fn, desc, steps, batch);
  check_pointer(fn, "x", x);
  check_pointer(fn, "params", params);
  check_pointer(fn, "y", y);
  if (check_lengths(fn, d, lengths)) {
    forward_by_sequence(desc, d, lengths, x, params, state0, y, state_n);
    return;
  }
  const size_t BH = d.channels(), last = (d.steps - 1) * BH;

  switch (desc.kind) {
    case LinearLayerKind::Gilr: {
      const auto k = gilr_forward(d, x, params, state0);
      std::copy(k.h.begin(), k.h.end(), y);
      if (state_n) std::copy(k.h.begin() + static_cast<std::ptrdiff_t>(last), k.h.end(), state_n);
      break;
    }
    case LinearLayerKind::GilrLstm: {
      const auto k = gilr_lstm_forward(d, x, params, state0, state0 ? state0 + BH : nullptr);
      for (size_t e = 0; e < d.th(); ++e) y[e] = k.gate[kGateO][e] * k.c[e];
      if (state_n)
        for (size_t c = 0; c < BH; ++c) {
          state_n[c] = k.ht[last + c];
          state_n[BH + c] = k.c[last + c];
        }
      break;
    }
    case LinearLayerKind::Sru: {
      const auto k = sru_forward(d, x, params, state0);
      for (size_t e = 0; e < d.th(); ++e) y[e] = sru_output(k, e);
      if (state_n) std::copy(k.c.begin() + static_cast<std::ptrdiff_t>(last), k.c.end(), state_n);
      break;
    }
    case LinearLayerKind::Qrnn: {
      const auto k = qrnn_forward(d, x, params, state0);
      for (size_t e = 0; e < d.th(); ++e) y[e] = k.o[e] * k.c[e];
      if (state_n) std::copy(k.c.begin() + static_cast<std::ptrdiff_t>(last), k.c.end(), state_n);
      break;
    }
  }
}

template <class T>
void linear_layer_backward(const LinearLayerDesc& desc, std::int64_t steps, std::int64_t batch,
                           const T* x, const T* params, const T* state0, const T* dy,
                           const T* dstate_n, T* dx, T* dparams, T* dstate0,
                           const std::int32_t* lengths) {
  constexpr const char* fn = "linear_layer_backward";
  const Dims d = make_dims(fn, desc, steps, batch);
  check_pointer(fn, "x", x);
  check_pointer(fn, "params", params);
  check_pointer(fn, "dy", dy);
  // Gradient outputs are overwritten: clear them, then every stage accumulates.
  if (dx) std::fill(dx, dx + d.tx(), T(0));
  if (dparams) std::fill(dparams, dparams + d.b_offset + d.bias_count, T(0));
  if (check_lengths(fn, d, lengths)) {
    backward_by_sequence(desc, d, lengths, x, params, state0, dy, dstate_n, dx, dparams, dstate0);
    return;
  }

  switch (desc.kind) {
    case LinearLayerKind::Gilr:
      gilr_backward(d, x, params, state0, dy, dstate_n, dx, dparams, dstate0);
      break;
    case LinearLayerKind::GilrLstm:
      gilr_lstm_backward(d, x, params, state0, state0 ? state0 + d.channels() : nullptr, dy,
                         dstate_n, dx, dparams, dstate0);
      break;
    case LinearLayerKind::Sru:
      sru_backward(d, x, params, state0, dy, dstate_n, dx, dparams, dstate0);
      break;
    case LinearLayerKind::Qrnn:
      qrnn_backward(d, x, params, state0, dy, dstate_n, dx, dparams, dstate0);
      break;
  }
}

template void linear_layer_forward<float>(const LinearLayerDesc&, std::int64_t, std::int64_t,
                                          const float*, const float*, const float*, float*, float*,
                                          const std::int32_t*);
template void linear_layer_forward<double>(const LinearLayerDesc&, std::int64_t, std::int64_t,
                                           const double*, const double*, const double*, double*,
                                           double*, const std::int32_t*);
template void linear_layer_backward<float>(const LinearLayerDesc&, std::int64_t, std::int64_t,
                                           const float*, const float*, const float*, const float*,
                                           const float*, float*, float*, float*,
                                           const std::int32_t*);
template void linear_layer_backward<double>(const LinearLayerDesc&, std::int64_t, std::int64_t,
                                            const double*, const double*, const double*,
                                            const double*, const double*, double*, double*, double*,
                                            const std::int32_t*);

}  // namespace prnn::reference
