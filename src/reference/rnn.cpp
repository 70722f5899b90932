// CPU reference of the multi-layer, optionally bidirectional RNN / GRU / LSTM (contract in
// reference/rnn.h, layout in prnn/rnn.h).
//
// Precision: the templated entry points convert their inputs to double, all arithmetic (dot
// products, activations, cell state, gradient sums over time and batch) runs in double, and the
// results are rounded to T once when written out. The float instantiation is therefore the
// double computation on float inputs, the most accurate answer a float kernel can be held to.
//
// Structure: cell_forward / cell_backward are one cell step for one batch element; forward_pass
// runs them over layer, direction, time and batch, optionally keeping what the backward step
// needs; backward_pass recomputes the forward with that cache, then walks layers top-down and,
// per direction, time in the reverse of the processing order (BPTT).
// A padded step (t >= lengths[b]) is skipped for that batch row in both passes: the state and its
// gradient stay as they are, the output stays 0. A residual layer adds its input to its output
// after the recurrence (forward) and dout to d(input) (backward).
#include "reference/rnn.h"

#include <cmath>
#include <cstddef>
#include <vector>

#include "core/check.h"

namespace prnn::reference {
namespace {

using Vec = std::vector<double>;

// Sizes of one problem as size_t, checked and converted once at the entry points.
struct Problem {
  Cell cell;
  std::size_t T, B, I, H, L, D;
  std::size_t G;  // gate rows per layer and direction: gate_count(cell) * H
  std::size_t P;  // parameter count
  RnnDesc desc;
  std::vector<std::size_t> len;  // [B] steps of each sequence (T when no lengths are given)

  std::size_t layer_input(std::size_t l) const { return l == 0 ? I : D * H; }
  std::size_t x_size() const { return T * B * I; }
  std::size_t y_size() const { return T * B * D * H; }
  std::size_t state_size() const { return L * D * B * H; }
};

Problem make_problem(const char* fn, const RnnDesc& desc, std::int64_t steps, std::int64_t batch,
                     const std::int32_t* lengths) {
  desc.validate();
  PRNN_EXPECT(steps >= 1, "{}: steps: expected >= 1, got {}", fn, steps);
  PRNN_EXPECT(batch >= 1, "{}: batch: expected >= 1, got {}", fn, batch);
  Problem p{};
  p.cell = desc.cell;
  p.T = static_cast<std::size_t>(steps);
  p.B = static_cast<std::size_t>(batch);
  p.I = static_cast<std::size_t>(desc.input_size);
  p.H = static_cast<std::size_t>(desc.hidden_size);
  p.L = static_cast<std::size_t>(desc.layers);
  p.D = static_cast<std::size_t>(desc.directions());
  p.G = static_cast<std::size_t>(desc.gate_rows());
  p.P = static_cast<std::size_t>(rnn_param_count(desc));
  p.desc = desc;
  p.len.assign(p.B, p.T);
  if (lengths != nullptr) {
    for (std::size_t b = 0; b < p.B; ++b) {
      PRNN_EXPECT(lengths[b] >= 1 && lengths[b] <= steps,
                  "{}: lengths[{}]: expected a length in [1, {}], got {}", fn, b, steps,
                  lengths[b]);
      p.len[b] = static_cast<std::size_t>(lengths[b]);
    }
  }
  return p;
}

void expect_non_null(const char* fn, const char* name, const void* ptr) {
  PRNN_EXPECT(ptr != nullptr, "{}: {}: expected a non-null pointer, got null", fn, name);
}

// n elements of p as double; zeros when p is null (the nullable inputs).
template <class T>
Vec load(const T* p, std::size_t n) {
  if (p == nullptr) return Vec(n, 0.0);
  return Vec(p, p + n);
}

// v rounded to T into p; nothing when p is null (the nullable outputs).
template <class T>
void store(const Vec& v, T* p) {
  if (p == nullptr) return;
  for (std::size_t i = 0; i < v.size(); ++i) p[i] = static_cast<T>(v[i]);
}

double sigmoid(double a) {
  return 1.0 / (1.0 + std::exp(-a));
}

// Vanilla-cell activation of the pre-activation a, and its derivative d act / d a.
double activate(Cell cell, double a) {
  switch (cell) {
    case Cell::ReLU:
      return a > 0.0 ? a : 0.0;
    case Cell::ClippedReLU:
      return a <= 0.0 ? 0.0 : (a >= kClippedReluCeiling ? kClippedReluCeiling : a);
    case Cell::Tanh:
      return std::tanh(a);
    default:
      PRNN_ASSERT(false);
  }
  return 0.0;
}

double activate_grad(Cell cell, double a) {
  switch (cell) {
    case Cell::ReLU:
      return a > 0.0 ? 1.0 : 0.0;
    case Cell::ClippedReLU:
      return a > 0.0 && a < kClippedReluCeiling ? 1.0 : 0.0;
    case Cell::Tanh: {
      const double t = std::tanh(a);
      return 1.0 - t * t;
    }
    default:
      PRNN_ASSERT(false);
  }
  return 0.0;
}

// One layer and direction's tensors inside a flat parameter (or parameter-gradient) array:
// W_ih [G, in], W_hh [G, H], b_ih [G], b_hh [G], row-major.
template <class P>
struct CellParams {
  P* w_ih;
  P* w_hh;
  P* b_ih;
  P* b_hh;
  std::size_t in;
};

template <class P>
CellParams<P> cell_params(const Problem& p, P* flat, std::size_t layer, std::size_t dir) {
  const RnnParamOffsets o =
      rnn_param_offsets(p.desc, static_cast<std::int64_t>(layer), static_cast<int>(dir));
  return {flat + o.w_ih, flat + o.w_hh, flat + o.b_ih, flat + o.b_hh,
          static_cast<std::size_t>(o.input_size)};
}

// Forward of one cell step for one batch element:
//   x [in], h [H], c [H] (LSTM) -> h_new [H], c_new [H] (LSTM).
// Saves for cell_backward: act [G] (vanilla: the pre-activation; LSTM: i, f, g, o after their
// nonlinearities; GRU: r, z, n after theirs) and, for GRU, hn [H] = W_hn h + b_hn.
void cell_forward(const Problem& p, const CellParams<const double>& w, const double* x,
                  const double* h, const double* c, double* act, double* hn, double* h_new,
                  double* c_new) {
  const std::size_t H = p.H;
  // a_ih = W_ih x + b_ih and a_hh = W_hh h + b_hh, every gate row.
  Vec a_ih(p.G), a_hh(p.G);
  for (std::size_t r = 0; r < p.G; ++r) {
    double s = w.b_ih[r];
    for (std::size_t k = 0; k < w.in; ++k) s += w.w_ih[r * w.in + k] * x[k];
    a_ih[r] = s;
    s = w.b_hh[r];
    for (std::size_t k = 0; k < H; ++k) s += w.w_hh[r * H + k] * h[k];
    a_hh[r] = s;
  }
  switch (p.cell) {
    case Cell::ReLU:
    case Cell::ClippedReLU:
    case Cell::Tanh:
      for (std::size_t j = 0; j < H; ++j) {
        act[j] = a_ih[j] + a_hh[j];
        h_new[j] = activate(p.cell, act[j]);
      }
      break;
    case Cell::LSTM:
      for (std::size_t j = 0; j < H; ++j) {
        const double i = sigmoid(a_ih[j] + a_hh[j]);
        const double f = sigmoid(a_ih[H + j] + a_hh[H + j]);
        const double g = std::tanh(a_ih[2 * H + j] + a_hh[2 * H + j]);
        const double o = sigmoid(a_ih[3 * H + j] + a_hh[3 * H + j]);
        c_new[j] = f * c[j] + i * g;
        h_new[j] = o * std::tanh(c_new[j]);
        act[j] = i;
        act[H + j] = f;
        act[2 * H + j] = g;
        act[3 * H + j] = o;
      }
      break;
    case Cell::GRU:
      for (std::size_t j = 0; j < H; ++j) {
        const double r = sigmoid(a_ih[j] + a_hh[j]);
        const double z = sigmoid(a_ih[H + j] + a_hh[H + j]);
        const double n = std::tanh(a_ih[2 * H + j] + r * a_hh[2 * H + j]);
        h_new[j] = (1.0 - z) * n + z * h[j];
        act[j] = r;
        act[H + j] = z;
        act[2 * H + j] = n;
        hn[j] = a_hh[2 * H + j];
      }
      break;
  }
}

// Backward of one cell step for one batch element (inputs as cell_forward saw them, plus its
// saved act / hn and, for LSTM, c_new).
//   dh [H]: dL/dh_new, the output gradient plus the one flowing back from the next step.
//   dc [H] (LSTM): dL/dc_new on entry, dL/dc on exit.
// Writes dh_prev [H] = dL/dh; adds into dx [in] and the parameter gradients g.
void cell_backward(const Problem& p, const CellParams<const double>& w, const CellParams<double>& g,
                   const double* x, const double* h, const double* c, const double* c_new,
                   const double* act, const double* hn, const double* dh, double* dc, double* dx,
                   double* dh_prev) {
  const std::size_t H = p.H;
  // Gradients of the two pre-activations a_ih and a_hh (equal except GRU's n rows).
  Vec da_ih(p.G), da_hh(p.G);
  // The part of dL/dh that does not go through W_hh (GRU's z ⊙ h term).
  Vec dh_direct(H, 0.0);
  switch (p.cell) {
    case Cell::ReLU:
    case Cell::ClippedReLU:
    case Cell::Tanh:
      for (std::size_t j = 0; j < H; ++j)
        da_ih[j] = da_hh[j] = dh[j] * activate_grad(p.cell, act[j]);
      break;
    case Cell::LSTM:
      for (std::size_t j = 0; j < H; ++j) {
        const double i = act[j], f = act[H + j], gg = act[2 * H + j], o = act[3 * H + j];
        const double tc = std::tanh(c_new[j]);
        const double dct = dc[j] + dh[j] * o * (1.0 - tc * tc);  // total dL/dc_new
        da_ih[j] = dct * gg * i * (1.0 - i);
        da_ih[H + j] = dct * c[j] * f * (1.0 - f);
        da_ih[2 * H + j] = dct * i * (1.0 - gg * gg);
        da_ih[3 * H + j] = dh[j] * tc * o * (1.0 - o);
        for (std::size_t q = 0; q < 4; ++q) da_hh[q * H + j] = da_ih[q * H + j];
        dc[j] = dct * f;
      }
      break;
    case Cell::GRU:
      for (std::size_t j = 0; j < H; ++j) {
        const double r = act[j], z = act[H + j], n = act[2 * H + j];
        const double dn = dh[j] * (1.0 - z);
        const double dz = dh[j] * (h[j] - n);
        const double dan = dn * (1.0 - n * n);  // through n = tanh(a_in + r * hn)
        const double dr = dan * hn[j];
        da_ih[j] = da_hh[j] = dr * r * (1.0 - r);
        da_ih[H + j] = da_hh[H + j] = dz * z * (1.0 - z);
        da_ih[2 * H + j] = dan;
        da_hh[2 * H + j] = dan * r;
        dh_direct[j] = dh[j] * z;
      }
      break;
  }
  for (std::size_t r = 0; r < p.G; ++r) {
    g.b_ih[r] += da_ih[r];
    g.b_hh[r] += da_hh[r];
    for (std::size_t k = 0; k < w.in; ++k) g.w_ih[r * w.in + k] += da_ih[r] * x[k];
    for (std::size_t k = 0; k < H; ++k) g.w_hh[r * H + k] += da_hh[r] * h[k];
  }
  // dx += W_ih^T da_ih and dh_prev = dh_direct + W_hh^T da_hh, each element summed over the gate
  // rows r in order; the loops run along the rows of W (contiguous) rather than down its columns.
  Vec sx(w.in, 0.0);
  for (std::size_t r = 0; r < p.G; ++r)
    for (std::size_t k = 0; k < w.in; ++k) sx[k] += w.w_ih[r * w.in + k] * da_ih[r];
  for (std::size_t k = 0; k < w.in; ++k) dx[k] += sx[k];
  for (std::size_t k = 0; k < H; ++k) dh_prev[k] = dh_direct[k];
  for (std::size_t r = 0; r < p.G; ++r)
    for (std::size_t k = 0; k < H; ++k) dh_prev[k] += w.w_hh[r * H + k] * da_hh[r];
}

// What the forward pass of one layer and direction keeps for its backward pass, indexed by
// time t (not by processing order).
struct DirCache {
  Vec h;      // [T, B, H] the hidden state entering the step at time t
  Vec c;      // [T, B, H] LSTM: the cell state entering the step at time t
  Vec c_new;  // [T, B, H] LSTM: the cell state leaving it
  Vec act;    // [T, B, G] see cell_forward
  Vec hn;     // [T, B, H] GRU: W_hn h + b_hn
};

struct ForwardCache {
  std::vector<Vec> inputs;     // [L] layer l's input sequence [T, B, I_l]
  std::vector<DirCache> dirs;  // [L*D]
};

// Time of the s-th step processed by direction d: forward 0..T-1, reverse T-1..0.
std::size_t time_of(const Problem& p, std::size_t d, std::size_t s) {
  return d == 0 ? s : p.T - 1 - s;
}

// x [T, B, I], h0 / c0 [L*D, B, H], params -> y [T, B, D*H], hn / cn [L*D, B, H].
// Fills `cache` when it is not null.
void forward_pass(const Problem& p, const Vec& x, const Vec& h0, const Vec& c0, const Vec& params,
                  Vec& y, Vec& hn, Vec& cn, ForwardCache* cache) {
  const std::size_t T = p.T, B = p.B, H = p.H, D = p.D;
  hn.assign(p.state_size(), 0.0);
  cn.assign(p.state_size(), 0.0);
  if (cache) {
    cache->inputs.assign(p.L, Vec());
    cache->dirs.assign(p.L * D, DirCache());
  }
  Vec in = x;
  for (std::size_t l = 0; l < p.L; ++l) {
    const std::size_t I_l = p.layer_input(l);
    Vec out(T * B * D * H, 0.0);
    for (std::size_t d = 0; d < D; ++d) {
      const auto w = cell_params(p, params.data(), l, d);
      const std::size_t state = (l * D + d) * B * H;  // this layer/direction's slice of h0, hn
      Vec h(h0.begin() + static_cast<std::ptrdiff_t>(state),
            h0.begin() + static_cast<std::ptrdiff_t>(state + B * H));
      Vec c(c0.begin() + static_cast<std::ptrdiff_t>(state),
            c0.begin() + static_cast<std::ptrdiff_t>(state + B * H));
      DirCache* dc = cache ? &cache->dirs[l * D + d] : nullptr;
      if (dc) {
        dc->h.assign(T * B * H, 0.0);
        dc->c.assign(T * B * H, 0.0);
        dc->c_new.assign(T * B * H, 0.0);
        dc->act.assign(T * B * p.G, 0.0);
        dc->hn.assign(T * B * H, 0.0);
      }
      Vec act(p.G), hn_lin(H), h_new(H), c_new(H, 0.0);
      for (std::size_t s = 0; s < T; ++s) {
        const std::size_t t = time_of(p, d, s);
        for (std::size_t b = 0; b < B; ++b) {
          if (t >= p.len[b]) continue;  // padding: h, c pass through, the output stays 0
          const std::size_t tb = t * B + b;
          cell_forward(p, w, &in[tb * I_l], &h[b * H], &c[b * H], act.data(), hn_lin.data(),
                       h_new.data(), c_new.data());
          if (dc) {
            for (std::size_t j = 0; j < H; ++j) {
              dc->h[tb * H + j] = h[b * H + j];
              dc->c[tb * H + j] = c[b * H + j];
              dc->c_new[tb * H + j] = c_new[j];
              dc->hn[tb * H + j] = hn_lin[j];
            }
            for (std::size_t r = 0; r < p.G; ++r) dc->act[tb * p.G + r] = act[r];
          }
          for (std::size_t j = 0; j < H; ++j) {
            out[tb * D * H + d * H + j] = h_new[j];
            h[b * H + j] = h_new[j];
            c[b * H + j] = c_new[j];
          }
        }
      }
      for (std::size_t i = 0; i < B * H; ++i) {
        hn[state + i] = h[i];
        cn[state + i] = c[i];
      }
    }
    if (p.desc.residual_at(static_cast<std::int64_t>(l)))
      for (std::size_t i = 0; i < out.size(); ++i) out[i] += in[i];  // I_l = D*H
    if (cache) cache->inputs[l] = std::move(in);
    in = std::move(out);
  }
  y = std::move(in);
}

// dy [T, B, D*H], dhn / dcn [L*D, B, H] -> dx [T, B, I], dh0 / dc0 [L*D, B, H], dparams; and
// the forward it recomputes first: y, hn, cn as forward_pass gives them.
void backward_pass(const Problem& p, const Vec& x, const Vec& h0, const Vec& c0, const Vec& params,
                   const Vec& dy, const Vec& dhn, const Vec& dcn, Vec& y, Vec& hn, Vec& cn, Vec& dx,
                   Vec& dh0, Vec& dc0, Vec& dparams) {
  const std::size_t T = p.T, B = p.B, H = p.H, D = p.D;
  ForwardCache cache;
  forward_pass(p, x, h0, c0, params, y, hn, cn, &cache);

  dh0.assign(p.state_size(), 0.0);
  dc0.assign(p.state_size(), 0.0);
  dparams.assign(p.P, 0.0);
  Vec dout = dy;  // dL/d(output of layer l), [T, B, D*H]
  for (std::size_t l = p.L; l-- > 0;) {
    const std::size_t I_l = p.layer_input(l);
    const Vec& in = cache.inputs[l];
    Vec din(T * B * I_l, 0.0);  // dL/d(input of layer l), summed over directions
    for (std::size_t d = 0; d < D; ++d) {
      const auto w = cell_params(p, params.data(), l, d);
      const auto g = cell_params(p, dparams.data(), l, d);
      const DirCache& dc = cache.dirs[l * D + d];
      const std::size_t state = (l * D + d) * B * H;
      Vec dh(dhn.begin() + static_cast<std::ptrdiff_t>(state),
             dhn.begin() + static_cast<std::ptrdiff_t>(state + B * H));
      Vec dc_state(dcn.begin() + static_cast<std::ptrdiff_t>(state),
                   dcn.begin() + static_cast<std::ptrdiff_t>(state + B * H));
      Vec dh_total(H);
      for (std::size_t s = T; s-- > 0;) {  // the reverse of the processing order
        const std::size_t t = time_of(p, d, s);
        for (std::size_t b = 0; b < B; ++b) {
          if (t >= p.len[b]) continue;  // padding: dh, dc pass through, dy is ignored
          const std::size_t tb = t * B + b;
          for (std::size_t j = 0; j < H; ++j)
            dh_total[j] = dh[b * H + j] + dout[tb * D * H + d * H + j];
          cell_backward(p, w, g, &in[tb * I_l], &dc.h[tb * H], &dc.c[tb * H], &dc.c_new[tb * H],
                        &dc.act[tb * p.G], &dc.hn[tb * H], dh_total.data(), &dc_state[b * H],
                        &din[tb * I_l], &dh[b * H]);
        }
      }
      for (std::size_t i = 0; i < B * H; ++i) {
        dh0[state + i] = dh[i];
        dc0[state + i] = dc_state[i];
      }
    }
    if (p.desc.residual_at(static_cast<std::int64_t>(l)))
      for (std::size_t i = 0; i < din.size(); ++i) din[i] += dout[i];  // the identity path
    dout = std::move(din);
  }
  dx = std::move(dout);
}

}  // namespace

template <class T>
void rnn_forward(const RnnDesc& desc, std::int64_t steps, std::int64_t batch, const T* x,
                 const T* h0, const T* c0, const T* params, T* y, T* hn, T* cn,
                 const std::int32_t* lengths) {
  const char* fn = "rnn_forward";
  const Problem p = make_problem(fn, desc, steps, batch, lengths);
  expect_non_null(fn, "x", x);
  expect_non_null(fn, "params", params);
  expect_non_null(fn, "y", y);
  const bool lstm = has_cell_state(p.cell);
  Vec yv, hnv, cnv;
  forward_pass(p, load(x, p.x_size()), load(h0, p.state_size()),
               load(lstm ? c0 : nullptr, p.state_size()), load(params, p.P), yv, hnv, cnv, nullptr);
  store(yv, y);
  store(hnv, hn);
  if (lstm) store(cnv, cn);
}

namespace {

// rnn_forward_backward's body, its errors naming `fn` (either entry point).
template <class T>
void forward_backward(const char* fn, const RnnDesc& desc, std::int64_t steps, std::int64_t batch,
                      const T* x, const T* h0, const T* c0, const T* params, const T* dy,
                      const T* dhn, const T* dcn, T* y, T* hn, T* cn, T* dx, T* dh0, T* dc0,
                      T* dparams, const std::int32_t* lengths) {
  const Problem p = make_problem(fn, desc, steps, batch, lengths);
  expect_non_null(fn, "x", x);
  expect_non_null(fn, "params", params);
  expect_non_null(fn, "dy", dy);
  const bool lstm = has_cell_state(p.cell);
  Vec yv, hnv, cnv, dxv, dh0v, dc0v, dpv;
  backward_pass(p, load(x, p.x_size()), load(h0, p.state_size()),
                load(lstm ? c0 : nullptr, p.state_size()), load(params, p.P), load(dy, p.y_size()),
                load(dhn, p.state_size()), load(lstm ? dcn : nullptr, p.state_size()), yv, hnv, cnv,
                dxv, dh0v, dc0v, dpv);
  store(yv, y);
  store(hnv, hn);
  if (lstm) store(cnv, cn);
  store(dxv, dx);
  store(dh0v, dh0);
  if (lstm) store(dc0v, dc0);
  store(dpv, dparams);
}

}  // namespace

template <class T>
void rnn_backward(const RnnDesc& desc, std::int64_t steps, std::int64_t batch, const T* x,
                  const T* h0, const T* c0, const T* params, const T* dy, const T* dhn,
                  const T* dcn, T* dx, T* dh0, T* dc0, T* dparams, const std::int32_t* lengths) {
  forward_backward<T>("rnn_backward", desc, steps, batch, x, h0, c0, params, dy, dhn, dcn, nullptr,
                      nullptr, nullptr, dx, dh0, dc0, dparams, lengths);
}

template <class T>
void rnn_forward_backward(const RnnDesc& desc, std::int64_t steps, std::int64_t batch, const T* x,
                          const T* h0, const T* c0, const T* params, const T* dy, const T* dhn,
                          const T* dcn, T* y, T* hn, T* cn, T* dx, T* dh0, T* dc0, T* dparams,
                          const std::int32_t* lengths) {
  forward_backward<T>("rnn_forward_backward", desc, steps, batch, x, h0, c0, params, dy, dhn, dcn,
                      y, hn, cn, dx, dh0, dc0, dparams, lengths);
}

#define PRNN_INSTANTIATE(T)                                                                       \
  template void rnn_forward<T>(const RnnDesc&, std::int64_t, std::int64_t, const T*, const T*,    \
                               const T*, const T*, T*, T*, T*, const std::int32_t*);              \
  template void rnn_backward<T>(const RnnDesc&, std::int64_t, std::int64_t, const T*, const T*,   \
                                const T*, const T*, const T*, const T*, const T*, T*, T*, T*, T*, \
                                const std::int32_t*);                                             \
  template void rnn_forward_backward<T>(                                                          \
      const RnnDesc&, std::int64_t, std::int64_t, const T*, const T*, const T*, const T*,         \
      const T*, const T*, const T*, T*, T*, T*, T*, T*, T*, T*, const std::int32_t*);
PRNN_INSTANTIATE(float)
PRNN_INSTANTIATE(double)
#undef PRNN_INSTANTIATE

}  // namespace prnn::reference
