// One RNN problem with fresh random inputs and its expected results from the CPU reference in
// double. Shared by the CPU and GPU prnn::Rnn tests.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "prnn/rnn.h"
#include "reference/rnn.h"

namespace prnn::test {

struct RnnCase {
  Cell cell = Cell::Tanh;
  std::int64_t T = 1, B = 1, I = 1, H = 1, L = 1;
  bool bidirectional = false;
  bool with_state = true;  // h0, hn, dhn, dh0 (c0, cn, dcn, dc0 for LSTM) given, else empty
  DType dtype = DType::F32;  // of every tensor (the inputs are rounded to it)
  std::int64_t residual_every = 0;    // RnnDesc::residual_every
  std::vector<std::int32_t> lengths = {};  // per-sequence lengths [B], empty: all T
  GemmMath gemm_math = GemmMath::Fp32;     // RnnDesc::gemm_math

  const std::int32_t* lengths_or_null() const { return lengths.empty() ? nullptr : lengths.data(); }

  RnnDesc desc() const {
    RnnDesc d;
    d.cell = cell;
    d.input_size = I;
    d.hidden_size = H;
    d.layers = L;
    d.direction = bidirectional ? Direction::Bidirectional : Direction::Unidirectional;
    d.weight_dtype = dtype;
    d.residual_every = residual_every;
    d.gemm_math = gemm_math;
    return d;
  }
  std::string name() const {
    return std::string(to_string(cell)) + "_T" + std::to_string(T) + "_B" + std::to_string(B) +
           "_I" + std::to_string(I) + "_H" + std::to_string(H) + "_L" + std::to_string(L) +
           (bidirectional ? "_bi" : "_uni") + (with_state ? "" : "_nostate") +
           (dtype == DType::F32 ? "" : std::string("_") + to_string(dtype)) +
           (residual_every > 0 ? "_res" + std::to_string(residual_every) : "") +
           (lengths.empty() ? "" : "_len" + lengths_name()) +
           (gemm_math == GemmMath::Tf32 ? "_tf32" : "");
  }
  // "5x1x2" for lengths {5, 1, 2}.
  std::string lengths_name() const {
    std::string n;
    for (std::size_t b = 0; b < lengths.size(); ++b)
      n += (b == 0 ? "" : "x") + std::to_string(lengths[b]);
    return n;
  }
  std::int64_t D() const { return bidirectional ? 2 : 1; }
  std::size_t x_size() const { return static_cast<std::size_t>(T * B * I); }
  std::size_t y_size() const { return static_cast<std::size_t>(T * B * D() * H); }
  std::size_t state_size() const { return static_cast<std::size_t>(L * D() * B * H); }
  std::size_t param_size() const { return static_cast<std::size_t>(rnn_param_count(desc())); }
  Shape x_shape() const { return {T, B, I}; }
  Shape y_shape() const { return {T, B, D() * H}; }
  Shape state_shape() const { return {L * D(), B, H}; }
  Shape param_shape() const { return {rnn_param_count(desc())}; }
  // Multiply-adds of the reference's forward + backward: to run the costly ones first.
  double reference_cost() const {
    double per_step = 0.0;
    for (std::int64_t l = 0; l < L; ++l)
      per_step += static_cast<double>(D() * H * gate_count(cell) * (desc().layer_input_size(l) + H));
    return 5.0 * per_step * static_cast<double>(T * B);
  }
};

// gtest prints a case by its name.
inline void PrintTo(const RnnCase& c, std::ostream* os) { *os << c.name(); }

struct RnnData {
  // Inputs, rounded to fp32 (state ones empty without states; c ones empty unless LSTM).
  std::vector<double> x, params, h0, c0, dy, dhn, dcn;
  // Expected results: the reference in double on those inputs.
  std::vector<double> y, hn, cn, dx, dh0, dc0, dparams;
};

// Rounds every element to `dtype` (f32, f16 or bf16; round to nearest even) and back.
inline void round_to(std::vector<double>& v, DType dtype) {
  if (dtype == DType::F64 || v.empty()) return;
  std::vector<std::uint16_t> bits(v.size() * 2);  // room for f32 too
  convert(v.data(), DType::F64, bits.data(), dtype, v.size());
  convert(bits.data(), dtype, v.data(), DType::F64, v.size());
}

inline std::vector<double> uniform(std::mt19937_64& gen, std::size_t n, double lo = -1.0,
                                   double hi = 1.0) {
  std::uniform_real_distribution<double> dist(lo, hi);
  std::vector<double> v(n);
  for (double& e : v) e = dist(gen);
  return v;
}

// Random parameters, scaled so pre-activations are O(1) whatever I and H:
//   W_ih ~ U(-c, c) / sqrt(I_l), W_hh ~ U(-c, c) / sqrt(H).
// ReLU and clipped ReLU have a kink where the derivative jumps; a pre-activation within fp32
// rounding (~1e-6) of it can get derivative 1 in fp32 and 0 in fp64 (or the reverse), and one
// such flip moves the gradients by ~1/sqrt(T·B·H), far above 1e-5. So for them each unit gets
// a bias far from the kinks, b_ih = ±4 (clipped ReLU: −4, +4 or +24: off, linear, saturated),
// and a small c (0.5, clipped ReLU 0.15 since its saturated units output 20), which keeps the
// input and recurrent terms at σ ≈ 1: a pre-activation lands within 1e-6 of a kink with
// probability ~1e-8, and every branch of the activation is still taken.
// tanh is smooth: c = 1, biases U(-0.5, 0.5).
inline std::vector<double> random_params(const RnnCase& c, std::mt19937_64& gen) {
  const RnnDesc d = c.desc();
  std::vector<double> p(c.param_size());
  const double scale = c.cell == Cell::ReLU ? 0.5 : c.cell == Cell::ClippedReLU ? 0.15 : 1.0;
  const bool kinked = c.cell == Cell::ReLU || c.cell == Cell::ClippedReLU;
  std::uniform_int_distribution<int> pick(0, c.cell == Cell::ClippedReLU ? 2 : 1);
  constexpr double kBias[] = {-4.0, 4.0, 24.0};
  for (std::int64_t l = 0; l < c.L; ++l) {
    for (int dir = 0; dir < d.directions(); ++dir) {
      const RnnParamOffsets o = rnn_param_offsets(d, l, dir);
      const std::int64_t G = d.gate_rows(), H = c.H;
      auto fill = [&](std::int64_t at, std::int64_t n, double lo, double hi) {
        const auto v = uniform(gen, static_cast<std::size_t>(n), lo, hi);
        std::copy(v.begin(), v.end(), p.begin() + at);
      };
      const double a_ih = scale / std::sqrt(static_cast<double>(o.input_size));
      const double a_hh = scale / std::sqrt(static_cast<double>(H));
      fill(o.w_ih, G * o.input_size, -a_ih, a_ih);
      fill(o.w_hh, G * H, -a_hh, a_hh);
      if (kinked) {
        for (std::int64_t r = 0; r < G; ++r) p[static_cast<std::size_t>(o.b_ih + r)] = kBias[pick(gen)];
        fill(o.b_hh, G, -0.25, 0.25);
      } else {
        fill(o.b_ih, G, -0.5, 0.5);
        fill(o.b_hh, G, -0.5, 0.5);
      }
    }
  }
  return p;
}

// Fresh inputs from `seed` (x, states, output gradients in [-1, 1]), rounded to fp32; the
// expected results are left empty.
inline RnnData make_rnn_inputs(const RnnCase& c, std::uint64_t seed) {
  std::mt19937_64 gen(seed);
  const bool lstm = has_cell_state(c.cell);
  RnnData s;
  s.x = uniform(gen, c.x_size());
  s.params = random_params(c, gen);
  s.dy = uniform(gen, c.y_size());
  if (c.with_state) {
    s.h0 = uniform(gen, c.state_size());
    s.dhn = uniform(gen, c.state_size());
    if (lstm) {
      s.c0 = uniform(gen, c.state_size());
      s.dcn = uniform(gen, c.state_size());
    }
  }
  for (auto* v : {&s.x, &s.params, &s.h0, &s.c0, &s.dy, &s.dhn, &s.dcn}) round_to(*v, c.dtype);
  return s;
}

// Fresh inputs from `seed` (make_rnn_inputs) and the double reference on them: the forward's
// y, hn, cn and, with `gradients`, the backward's dx, dh0, dc0, dparams from the same forward
// computation (without, those stay empty).
inline RnnData make_rnn_data(const RnnCase& c, std::uint64_t seed, bool gradients = true) {
  RnnData s = make_rnn_inputs(c, seed);
  auto in = [](const std::vector<double>& v) { return v.empty() ? nullptr : v.data(); };
  auto out = [](std::vector<double>& v) { return v.empty() ? nullptr : v.data(); };
  const bool lstm = has_cell_state(c.cell);
  s.y.assign(c.y_size(), 0.0);
  if (c.with_state) s.hn.assign(c.state_size(), 0.0);
  if (c.with_state && lstm) s.cn.assign(c.state_size(), 0.0);
  if (!gradients) {
    reference::rnn_forward<double>(c.desc(), c.T, c.B, s.x.data(), in(s.h0), in(s.c0),
                                   s.params.data(), s.y.data(), out(s.hn), out(s.cn),
                                   c.lengths_or_null());
    return s;
  }
  s.dx.assign(c.x_size(), 0.0);
  s.dparams.assign(c.param_size(), 0.0);
  if (c.with_state) s.dh0.assign(c.state_size(), 0.0);
  if (c.with_state && lstm) s.dc0.assign(c.state_size(), 0.0);
  reference::rnn_forward_backward<double>(c.desc(), c.T, c.B, s.x.data(), in(s.h0), in(s.c0),
                                          s.params.data(), s.dy.data(), in(s.dhn), in(s.dcn),
                                          s.y.data(), out(s.hn), out(s.cn), s.dx.data(), out(s.dh0),
                                          out(s.dc0), s.dparams.data(), c.lengths_or_null());
  return s;
}

// The parameter blocks of one layer and direction, for per-block error reports.
struct ParamBlock {
  std::string name;
  std::size_t begin = 0, end = 0;
};

inline std::vector<ParamBlock> param_blocks(const RnnCase& c) {
  const RnnDesc d = c.desc();
  std::vector<ParamBlock> v;
  const auto G = static_cast<std::size_t>(d.gate_rows()), H = static_cast<std::size_t>(c.H);
  for (std::int64_t l = 0; l < c.L; ++l) {
    for (int dir = 0; dir < d.directions(); ++dir) {
      const RnnParamOffsets o = rnn_param_offsets(d, l, dir);
      const std::string tag = "_l" + std::to_string(l) + (dir ? "_rev" : "");
      const auto w_ih = static_cast<std::size_t>(o.w_ih), w_hh = static_cast<std::size_t>(o.w_hh);
      const auto b_ih = static_cast<std::size_t>(o.b_ih), b_hh = static_cast<std::size_t>(o.b_hh);
      v.push_back({"W_ih" + tag, w_ih, w_hh});
      v.push_back({"W_hh" + tag, w_hh, w_hh + G * H});
      v.push_back({"b_ih" + tag, b_ih, b_ih + G});
      v.push_back({"b_hh" + tag, b_hh, b_hh + G});
    }
  }
  return v;
}

}  // namespace prnn::test
