// Tests of the CPU reference RNN / GRU / LSTM (src/reference/rnn.h):
//   RnnGradCheck      finite differences in double, every cell x stack x T x B
//   RnnHandComputed   1-unit tanh RNN (2 steps), LSTM and GRU steps worked out by hand
//   RnnVanilla        vanilla cells against an independent loop written here
//   RnnPrecision      float against double
//   RnnLayout         bidirectional halves and stacked layers against separate runs
//   RnnNullable       null optional pointers behave like zeros / are not written
//   RnnBadInput       InvalidArgument with the expected and the given value
#include "prnn/rnn.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <tuple>
#include <vector>

#include "prnn/error.h"
#include "reference/rnn.h"
#include "support/gradcheck.h"
#include "support/random.h"

namespace prnn::reference {
namespace {

using test::check_gradient;
using test::GradCheckOptions;
using test::project;
using test::rel_error;
using test::Rng;

constexpr std::int64_t kInput = 3;  // odd sizes throughout
constexpr std::int64_t kHidden = 5;

std::size_t sz(std::int64_t n) {
  return static_cast<std::size_t>(n);
}

std::size_t state_size(const RnnDesc& d, std::int64_t batch) {
  return sz(d.layers * d.directions() * batch * d.hidden_size);
}

// One problem: descriptor, sizes and inputs. c0 is empty unless the cell is LSTM.
template <class T>
struct Problem {
  RnnDesc desc;
  std::int64_t steps = 0;
  std::int64_t batch = 0;
  std::vector<T> x, h0, c0, params;

  std::size_t y_size() const { return sz(steps * batch * desc.directions() * desc.hidden_size); }
  std::size_t state() const { return state_size(desc, batch); }
  bool lstm() const { return has_cell_state(desc.cell); }
};

template <class T>
struct Outputs {
  std::vector<T> y, hn, cn;  // cn empty unless LSTM
};

template <class T>
struct Grads {
  std::vector<T> dx, dh0, dc0, dparams;  // dc0 empty unless LSTM
};

template <class T>
const T* data_or_null(const std::vector<T>& v) {
  return v.empty() ? nullptr : v.data();
}
template <class T>
T* data_or_null(std::vector<T>& v) {
  return v.empty() ? nullptr : v.data();
}

template <class T>
std::vector<T> poisoned(std::size_t n) {
  return std::vector<T>(n, std::numeric_limits<T>::quiet_NaN());
}

// Outputs and gradients of p's shapes, every element poisoned, so unwritten ones show as NaN.
template <class T>
Outputs<T> poisoned_outputs(const Problem<T>& p) {
  Outputs<T> o;
  o.y = poisoned<T>(p.y_size());
  o.hn = poisoned<T>(p.state());
  if (p.lstm()) o.cn = poisoned<T>(p.state());
  return o;
}
template <class T>
Grads<T> poisoned_grads(const Problem<T>& p) {
  Grads<T> g;
  g.dx = poisoned<T>(p.x.size());
  g.dh0 = poisoned<T>(p.state());
  if (p.lstm()) g.dc0 = poisoned<T>(p.state());
  g.dparams = poisoned<T>(p.params.size());
  return g;
}

// Runs rnn_forward into poisoned outputs.
template <class T>
Outputs<T> forward(const Problem<T>& p, const std::int32_t* lengths = nullptr) {
  Outputs<T> o = poisoned_outputs(p);
  rnn_forward<T>(p.desc, p.steps, p.batch, p.x.data(), data_or_null(p.h0), data_or_null(p.c0),
                 p.params.data(), o.y.data(), o.hn.data(), data_or_null(o.cn), lengths);
  return o;
}

// Runs rnn_backward with the output gradients d = (dy, dhn, dcn) into poisoned gradients.
template <class T>
Grads<T> backward(const Problem<T>& p, const Outputs<T>& d, const std::int32_t* lengths = nullptr) {
  Grads<T> g = poisoned_grads(p);
  rnn_backward<T>(p.desc, p.steps, p.batch, p.x.data(), data_or_null(p.h0), data_or_null(p.c0),
                  p.params.data(), d.y.data(), data_or_null(d.hn), data_or_null(d.cn), g.dx.data(),
                  g.dh0.data(), data_or_null(g.dc0), g.dparams.data(), lengths);
  return g;
}

// Inputs in [-x_scale, x_scale], states in [-1, 1], parameters in [-w_scale, w_scale].
Problem<double> random_problem(Rng& rng, const RnnDesc& desc, std::int64_t steps,
                               std::int64_t batch, double x_scale = 1.0, double w_scale = 0.5) {
  Problem<double> p;
  p.desc = desc;
  p.steps = steps;
  p.batch = batch;
  p.x = rng.uniform(sz(steps * batch * desc.input_size), -x_scale, x_scale);
  p.h0 = rng.uniform(p.state());
  if (p.lstm()) p.c0 = rng.uniform(p.state());
  p.params = rng.uniform(sz(rnn_param_count(desc)), -w_scale, w_scale);
  return p;
}

// Random output gradients of the shapes forward produces (the projection w of L = Σ w · out).
Outputs<double> random_output_grads(Rng& rng, const Problem<double>& p) {
  Outputs<double> w;
  w.y = rng.uniform(p.y_size());
  w.hn = rng.uniform(p.state());
  if (p.lstm()) w.cn = rng.uniform(p.state());
  return w;
}

template <class To, class From>
Problem<To> convert(const Problem<From>& p) {
  Problem<To> q;
  q.desc = p.desc;
  q.steps = p.steps;
  q.batch = p.batch;
  q.x.assign(p.x.begin(), p.x.end());
  q.h0.assign(p.h0.begin(), p.h0.end());
  q.c0.assign(p.c0.begin(), p.c0.end());
  q.params.assign(p.params.begin(), p.params.end());
  return q;
}

template <class To, class From>
Outputs<To> convert(const Outputs<From>& o) {
  return {std::vector<To>(o.y.begin(), o.y.end()), std::vector<To>(o.hn.begin(), o.hn.end()),
          std::vector<To>(o.cn.begin(), o.cn.end())};
}

double vanilla_act(Cell cell, double a) {
  switch (cell) {
    case Cell::ReLU:
      return std::max(a, 0.0);
    case Cell::ClippedReLU:
      return std::min(std::max(a, 0.0), kClippedReluCeiling);
    default:
      return std::tanh(a);
  }
}

// An independent vanilla-RNN forward written from the equations in prnn/rnn.h: returns every
// pre-activation (to keep ReLU inputs away from the kinks) and the top layer's output.
struct VanillaTrace {
  std::vector<double> pre;
  std::vector<double> y;
};

VanillaTrace vanilla_trace(const Problem<double>& p) {
  const RnnDesc& d = p.desc;
  const std::size_t T = sz(p.steps), B = sz(p.batch), H = sz(d.hidden_size);
  const std::size_t D = sz(d.directions());
  VanillaTrace tr;
  std::vector<double> in = p.x;
  for (std::int64_t l = 0; l < d.layers; ++l) {
    const std::size_t I = sz(d.layer_input_size(l));
    std::vector<double> out(T * B * D * H);
    for (std::size_t dir = 0; dir < D; ++dir) {
      const RnnParamOffsets o = rnn_param_offsets(d, l, static_cast<int>(dir));
      const double* w_ih = &p.params[sz(o.w_ih)];
      const double* w_hh = &p.params[sz(o.w_hh)];
      const double* b_ih = &p.params[sz(o.b_ih)];
      const double* b_hh = &p.params[sz(o.b_hh)];
      for (std::size_t b = 0; b < B; ++b) {
        std::vector<double> h(H);
        for (std::size_t j = 0; j < H; ++j) h[j] = p.h0[((sz(l) * D + dir) * B + b) * H + j];
        for (std::size_t s = 0; s < T; ++s) {
          const std::size_t t = dir == 0 ? s : T - 1 - s;
          std::vector<double> h_new(H);
          for (std::size_t j = 0; j < H; ++j) {
            double a = b_ih[j] + b_hh[j];
            for (std::size_t k = 0; k < I; ++k) a += w_ih[j * I + k] * in[(t * B + b) * I + k];
            for (std::size_t k = 0; k < H; ++k) a += w_hh[j * H + k] * h[k];
            tr.pre.push_back(a);
            h_new[j] = vanilla_act(d.cell, a);
            out[(t * B + b) * D * H + dir * H + j] = h_new[j];
          }
          h = h_new;
        }
      }
    }
    in = out;
  }
  tr.y = in;
  return tr;
}

// Distance of the nearest pre-activation from a kink of the cell's activation (0, and 20 for
// clipped ReLU); +inf for smooth cells.
double kink_distance(const Problem<double>& p) {
  if (p.desc.cell != Cell::ReLU && p.desc.cell != Cell::ClippedReLU)
    return std::numeric_limits<double>::infinity();
  double dist = std::numeric_limits<double>::infinity();
  for (double a : vanilla_trace(p).pre) {
    dist = std::min(dist, std::abs(a));
    if (p.desc.cell == Cell::ClippedReLU) dist = std::min(dist, std::abs(a - kClippedReluCeiling));
  }
  return dist;
}

// A random problem whose ReLU pre-activations all lie at least `margin` from a kink. Finite
// differences across a kink measure a one-sided mix of two slopes, not the derivative, so such
// draws are redrawn rather than tested. The margin is far above ε · |∂pre/∂θ| (ε = 1e-6).
Problem<double> random_smooth_problem(Rng& rng, const RnnDesc& desc, std::int64_t steps,
                                      std::int64_t batch, double x_scale = 1.0,
                                      double w_scale = 0.5, double margin = 1e-3) {
  for (int attempt = 0; attempt < 1000; ++attempt) {
    Problem<double> p = random_problem(rng, desc, steps, batch, x_scale, w_scale);
    if (kink_distance(p) >= margin) return p;
  }
  ADD_FAILURE() << "no draw kept every pre-activation " << margin << " away from a kink";
  return random_problem(rng, desc, steps, batch, x_scale, w_scale);
}

// ---------------------------------------------------------------------------------------------
// Finite-difference gradient check.

enum class Stack { Uni1, Uni2, Bi1, Bi2 };

const char* stack_name(Stack s) {
  switch (s) {
    case Stack::Uni1:
      return "L1uni";
    case Stack::Uni2:
      return "L2uni";
    case Stack::Bi1:
      return "L1bi";
    case Stack::Bi2:
      return "L2bi";
  }
  return "?";
}

RnnDesc make_desc(Cell cell, Stack s, std::int64_t input = kInput, std::int64_t hidden = kHidden) {
  const bool two = s == Stack::Uni2 || s == Stack::Bi2;
  const bool bi = s == Stack::Bi1 || s == Stack::Bi2;
  return RnnDesc{cell,
                 input,
                 hidden,
                 two ? 2 : 1,
                 bi ? Direction::Bidirectional : Direction::Unidirectional,
                 DType::F64};
}

const Cell kCells[] = {Cell::ReLU, Cell::ClippedReLU, Cell::Tanh, Cell::GRU, Cell::LSTM};

// Checks every coordinate of dx, dh0, dc0 and dparams against central differences of
// L = Σ w_y·y + Σ w_hn·hn (+ Σ w_cn·cn).
void expect_gradients_match(Rng& rng, Problem<double>& p, const GradCheckOptions& opt) {
  const Outputs<double> w = random_output_grads(rng, p);
  const Grads<double> g = backward(p, w);
  const auto loss = [&] {
    const Outputs<double> o = forward(p);
    return project(o.y, w.y) + project(o.hn, w.hn) + (p.lstm() ? project(o.cn, w.cn) : 0.0);
  };
  EXPECT_TRUE(check_gradient("dx", p.x, g.dx, loss, rng.gen(), opt));
  EXPECT_TRUE(check_gradient("dh0", p.h0, g.dh0, loss, rng.gen(), opt));
  if (p.lstm()) {
    EXPECT_TRUE(check_gradient("dc0", p.c0, g.dc0, loss, rng.gen(), opt));
  }
  EXPECT_TRUE(check_gradient("dparams", p.params, g.dparams, loss, rng.gen(), opt));
}

using GradCase = std::tuple<Cell, Stack, std::int64_t /*T*/, std::int64_t /*B*/>;

std::string grad_case_name(const ::testing::TestParamInfo<GradCase>& param_info) {
  const auto& [cell, stack, steps, batch] = param_info.param;
  return std::string(to_string(cell)) + "_" + stack_name(stack) + "_T" + std::to_string(steps) +
         "_B" + std::to_string(batch);
}

class RnnGradCheck : public ::testing::TestWithParam<GradCase> {};

TEST_P(RnnGradCheck, MatchesFiniteDifferences) {
  const auto [cell, stack, steps, batch] = GetParam();
  Rng rng;
  Problem<double> p = random_smooth_problem(rng, make_desc(cell, stack), steps, batch);
  GradCheckOptions opt;
  opt.max_coords = 1u << 20;  // every coordinate (at most ~1100 parameters)
  expect_gradients_match(rng, p, opt);
}

INSTANTIATE_TEST_SUITE_P(AllCells, RnnGradCheck,
                         ::testing::Combine(::testing::ValuesIn(kCells),
                                            ::testing::Values(Stack::Uni1, Stack::Uni2, Stack::Bi1,
                                                              Stack::Bi2),
                                            ::testing::Values(std::int64_t{1}, std::int64_t{3}),
                                            ::testing::Values(std::int64_t{1}, std::int64_t{3})),
                         grad_case_name);

// Clipped ReLU with inputs ×30 and weights in [-1, 1], so a good share of the units sit at the
// ceiling 20 (zero gradient) while others are in the linear range.
TEST(RnnGradCheckClippedRelu, SaturatedUnits) {
  Rng rng;
  Problem<double> p = random_smooth_problem(rng, make_desc(Cell::ClippedReLU, Stack::Bi2), 3, 3,
                                            /*x_scale=*/30.0, /*w_scale=*/1.0, /*margin=*/1e-2);
  const std::vector<double> pre = vanilla_trace(p).pre;
  const auto clipped = std::count_if(pre.begin(), pre.end(), [](double a) { return a > 20.0; });
  const auto linear =
      std::count_if(pre.begin(), pre.end(), [](double a) { return a > 0.0 && a < 20.0; });
  ASSERT_GT(clipped, 0) << "no unit reached the ceiling; the clip branch would go untested";
  ASSERT_GT(linear, 0);
  GradCheckOptions opt;
  opt.max_coords = 1u << 20;
  // The loss is O(100) here, so the rounding error of the central difference,
  // ~1e-16 · |L| / ε, is ~1e-8: the absolute tolerance is raised from 1e-8 to 1e-7.
  opt.atol = 1e-7;
  expect_gradients_match(rng, p, opt);
}

// ---------------------------------------------------------------------------------------------
// Small cases worked out by hand (double, to 1e-12).

// Parameters of a 1-unit cell (H = I = 1): W_ih, W_hh, b_ih, b_hh each with one entry per gate.
std::vector<double> unit_params(const std::vector<double>& w_ih, const std::vector<double>& w_hh,
                                const std::vector<double>& b_ih, const std::vector<double>& b_hh) {
  std::vector<double> p;
  for (const auto* v : {&w_ih, &w_hh, &b_ih, &b_hh}) p.insert(p.end(), v->begin(), v->end());
  return p;
}

double sigmoid(double a) {
  return 1.0 / (1.0 + std::exp(-a));
}

constexpr double kHandTol = 1e-12;

TEST(RnnHandComputed, TanhTwoSteps) {
  // h_t = tanh(w_ih x_t + b_ih + w_hh h_{t-1} + b_hh), w_ih = 0.5, w_hh = -0.8, b_ih = 0.1,
  // b_hh = 0.2, x = (1, -2), h0 = 0.3.
  Problem<double> p;
  p.desc = RnnDesc{Cell::Tanh, 1, 1, 1, Direction::Unidirectional, DType::F64};
  p.steps = 2;
  p.batch = 1;
  p.x = {1.0, -2.0};
  p.h0 = {0.3};
  p.params = unit_params({0.5}, {-0.8}, {0.1}, {0.2});
  const double h1 = std::tanh(0.5 * 1.0 + 0.1 - 0.8 * 0.3 + 0.2);  // tanh(0.56)
  const double h2 = std::tanh(0.5 * -2.0 + 0.1 - 0.8 * h1 + 0.2);  // tanh(-0.7 - 0.8 h1)
  EXPECT_NEAR(h1, 0.5079774328978962, kHandTol);
  EXPECT_NEAR(h2, -0.8027797426995482, kHandTol);
  const Outputs<double> o = forward(p);
  ASSERT_EQ(o.y.size(), 2u);
  EXPECT_NEAR(o.y[0], h1, kHandTol);
  EXPECT_NEAR(o.y[1], h2, kHandTol);
  EXPECT_NEAR(o.hn[0], h2, kHandTol);

  // L = h2 (dy = (0, 1), dhn = 0). a_t = dL/d(pre-activation at t):
  //   a2 = 1 - h2², a1 = a2 · w_hh · (1 - h1²).
  const double a2 = 1.0 - h2 * h2;
  const double a1 = a2 * -0.8 * (1.0 - h1 * h1);
  const Grads<double> g = backward(p, Outputs<double>{{0.0, 1.0}, {0.0}, {}});
  EXPECT_NEAR(g.dx[0], 0.5 * a1, kHandTol);
  EXPECT_NEAR(g.dx[1], 0.5 * a2, kHandTol);
  EXPECT_NEAR(g.dh0[0], -0.8 * a1, kHandTol);
  EXPECT_NEAR(g.dh0[0], 0.16883171392375537, kHandTol);
  EXPECT_NEAR(g.dparams[0], a1 * 1.0 + a2 * -2.0, kHandTol);  // dw_ih = Σ a_t x_t
  EXPECT_NEAR(g.dparams[1], a1 * 0.3 + a2 * h1, kHandTol);    // dw_hh = Σ a_t h_{t-1}
  EXPECT_NEAR(g.dparams[2], a1 + a2, kHandTol);               // db_ih
  EXPECT_NEAR(g.dparams[3], a1 + a2, kHandTol);               // db_hh
}

TEST(RnnHandComputed, LstmOneStep) {
  // Gate order i, f, g, o; distinct weights per gate so a swapped gate cannot pass.
  const std::vector<double> w_ih = {0.1, 0.2, 0.3, 0.4}, w_hh = {-0.5, 0.6, -0.7, 0.8};
  const std::vector<double> b_ih = {0.01, 0.02, 0.03, 0.04}, b_hh = {0.05, -0.06, 0.07, -0.08};
  const double x = 0.9, h0 = -0.4, c0 = 0.25;
  Problem<double> p;
  p.desc = RnnDesc{Cell::LSTM, 1, 1, 1, Direction::Unidirectional, DType::F64};
  p.steps = 1;
  p.batch = 1;
  p.x = {x};
  p.h0 = {h0};
  p.c0 = {c0};
  p.params = unit_params(w_ih, w_hh, b_ih, b_hh);
  const double i = sigmoid(0.1 * x + 0.01 + -0.5 * h0 + 0.05);
  const double f = sigmoid(0.2 * x + 0.02 + 0.6 * h0 - 0.06);
  const double gg = std::tanh(0.3 * x + 0.03 + -0.7 * h0 + 0.07);
  const double o = sigmoid(0.4 * x + 0.04 + 0.8 * h0 - 0.08);
  const double c1 = f * c0 + i * gg;
  const double h1 = o * std::tanh(c1);
  const Outputs<double> out = forward(p);
  EXPECT_NEAR(out.y[0], h1, kHandTol);
  EXPECT_NEAR(out.hn[0], h1, kHandTol);
  EXPECT_NEAR(out.cn[0], c1, kHandTol);

  // L = 0.7 y + 0.3 hn - 0.2 cn: dL/dh1 = 1, dL/dc1 = -0.2 + o (1 - tanh²c1).
  const double tc = std::tanh(c1);
  const double dh = 0.7 + 0.3;
  const double dc = -0.2 + dh * o * (1.0 - tc * tc);
  const double da[4] = {dc * gg * i * (1 - i), dc * c0 * f * (1 - f), dc * i * (1 - gg * gg),
                        dh * tc * o * (1 - o)};
  const Grads<double> g = backward(p, Outputs<double>{{0.7}, {0.3}, {-0.2}});
  EXPECT_NEAR(g.dc0[0], dc * f, kHandTol);
  double dx = 0.0, dh0 = 0.0;
  for (int q = 0; q < 4; ++q) {
    dx += w_ih[sz(q)] * da[q];
    dh0 += w_hh[sz(q)] * da[q];
    EXPECT_NEAR(g.dparams[sz(q)], da[q] * x, kHandTol) << "dW_ih gate " << q;
    EXPECT_NEAR(g.dparams[sz(4 + q)], da[q] * h0, kHandTol) << "dW_hh gate " << q;
    EXPECT_NEAR(g.dparams[sz(8 + q)], da[q], kHandTol) << "db_ih gate " << q;
    EXPECT_NEAR(g.dparams[sz(12 + q)], da[q], kHandTol) << "db_hh gate " << q;
  }
  EXPECT_NEAR(g.dx[0], dx, kHandTol);
  EXPECT_NEAR(g.dh0[0], dh0, kHandTol);
}

TEST(RnnHandComputed, GruOneStep) {
  // Gate order r, z, n; n = tanh(W_in x + b_in + r (W_hn h + b_hn)), h' = (1 - z) n + z h.
  const std::vector<double> w_ih = {0.3, -0.6, 0.9}, w_hh = {0.7, 0.2, -1.1};
  const std::vector<double> b_ih = {0.05, 0.1, -0.15}, b_hh = {-0.02, 0.04, 0.3};
  const double x = -0.8, h0 = 0.6;
  Problem<double> p;
  p.desc = RnnDesc{Cell::GRU, 1, 1, 1, Direction::Unidirectional, DType::F64};
  p.steps = 1;
  p.batch = 1;
  p.x = {x};
  p.h0 = {h0};
  p.params = unit_params(w_ih, w_hh, b_ih, b_hh);
  const double r = sigmoid(0.3 * x + 0.05 + 0.7 * h0 - 0.02);
  const double z = sigmoid(-0.6 * x + 0.1 + 0.2 * h0 + 0.04);
  const double hn = -1.1 * h0 + 0.3;  // W_hn h + b_hn
  const double n = std::tanh(0.9 * x - 0.15 + r * hn);
  const double h1 = (1 - z) * n + z * h0;
  const Outputs<double> out = forward(p);
  EXPECT_NEAR(out.y[0], h1, kHandTol);
  EXPECT_NEAR(out.hn[0], h1, kHandTol);

  // L = h1: dL/dn = 1 - z, dL/dz = h0 - n, and through n's argument a_n:
  const double dan = (1 - z) * (1 - n * n);
  const double dar = dan * hn * r * (1 - r);
  const double daz = (h0 - n) * z * (1 - z);
  const Grads<double> g = backward(p, Outputs<double>{{1.0}, {0.0}, {}});
  EXPECT_NEAR(g.dx[0], 0.3 * dar - 0.6 * daz + 0.9 * dan, kHandTol);
  EXPECT_NEAR(g.dh0[0], z + 0.7 * dar + 0.2 * daz - 1.1 * r * dan, kHandTol);
  const std::vector<double> expected = {
      dar * x,  daz * x,  dan * x,       // dW_ih
      dar * h0, daz * h0, r * dan * h0,  // dW_hh (the n row scaled by r)
      dar,      daz,      dan,           // db_ih
      dar,      daz,      r * dan};      // db_hh
  ASSERT_EQ(g.dparams.size(), expected.size());
  for (std::size_t k = 0; k < expected.size(); ++k)
    EXPECT_NEAR(g.dparams[k], expected[k], kHandTol) << "dparams[" << k << "]";
}

// ---------------------------------------------------------------------------------------------
// Vanilla cells against the independent loop above (random sizes, every stack).

class RnnVanilla : public ::testing::TestWithParam<std::tuple<Cell, Stack>> {};

std::string vanilla_case_name(const ::testing::TestParamInfo<std::tuple<Cell, Stack>>& param_info) {
  return std::string(to_string(std::get<0>(param_info.param))) + "_" +
         stack_name(std::get<1>(param_info.param));
}

TEST_P(RnnVanilla, MatchesIndependentLoop) {
  const auto [cell, stack] = GetParam();
  Rng rng;
  // Inputs ×30 so clipped ReLU reaches its ceiling.
  const Problem<double> p = random_problem(rng, make_desc(cell, stack), 4, 3, 30.0, 0.5);
  const Outputs<double> o = forward(p);
  // The same sums in the same order: only the last bits may differ.
  EXPECT_LE(rel_error(o.y, vanilla_trace(p).y), 1e-14);
}

INSTANTIATE_TEST_SUITE_P(
    VanillaCells, RnnVanilla,
    ::testing::Combine(::testing::Values(Cell::ReLU, Cell::ClippedReLU, Cell::Tanh),
                       ::testing::Values(Stack::Uni1, Stack::Uni2, Stack::Bi1, Stack::Bi2)),
    vanilla_case_name);

// ---------------------------------------------------------------------------------------------
// Per-cell tests: precision, layout, nullable pointers.

class RnnCell : public ::testing::TestWithParam<Cell> {};

std::string cell_test_name(const ::testing::TestParamInfo<Cell>& param_info) {
  return to_string(param_info.param);
}

INSTANTIATE_TEST_SUITE_P(AllCells, RnnCell, ::testing::ValuesIn(kCells), cell_test_name);

TEST_P(RnnCell, FloatAgreesWithDouble) {
  Rng rng;
  const Problem<double> pd = random_smooth_problem(rng, make_desc(GetParam(), Stack::Bi2), 5, 3);
  const Problem<float> pf = convert<float>(pd);
  const Outputs<double> w = random_output_grads(rng, pd);
  const Outputs<double> od = forward(pd);
  const Outputs<float> of = forward(pf);
  // Forward: float inputs are rounded (≤ 6e-8 relative), the result once more; the reference
  // computes internally in double, so 1e-5 relative leaves a wide margin.
  EXPECT_LE(rel_error(of.y, od.y), 1e-5);
  EXPECT_LE(rel_error(of.hn, od.hn), 1e-5);
  if (pd.lstm()) {
    EXPECT_LE(rel_error(of.cn, od.cn), 1e-5);
  }
  // Backward: gradients are more sensitive to the input rounding (products of derivatives over
  // the sequence), 1e-4 relative.
  const Grads<double> gd = backward(pd, w);
  const Grads<float> gf = backward(pf, convert<float>(w));
  EXPECT_LE(rel_error(gf.dx, gd.dx), 1e-4);
  EXPECT_LE(rel_error(gf.dh0, gd.dh0), 1e-4);
  if (pd.lstm()) {
    EXPECT_LE(rel_error(gf.dc0, gd.dc0), 1e-4);
  }
  EXPECT_LE(rel_error(gf.dparams, gd.dparams), 1e-4);
}

// Copies layer `from_layer`, direction `from_dir` of `from`'s parameters into layer `to_layer`,
// direction `to_dir` of `to` (the two descriptors must agree on that layer's shapes).
void copy_cell_params(const RnnDesc& from_desc, const std::vector<double>& from,
                      std::int64_t from_layer, int from_dir, const RnnDesc& to_desc,
                      std::vector<double>& to, std::int64_t to_layer, int to_dir) {
  const RnnParamOffsets a = rnn_param_offsets(from_desc, from_layer, from_dir);
  const RnnParamOffsets b = rnn_param_offsets(to_desc, to_layer, to_dir);
  ASSERT_EQ(a.input_size, b.input_size);
  const std::int64_t G = from_desc.gate_rows();
  const auto copy = [&](std::int64_t src, std::int64_t dst, std::int64_t n) {
    std::copy_n(from.begin() + src, n, to.begin() + dst);
  };
  copy(a.w_ih, b.w_ih, G * a.input_size);
  copy(a.w_hh, b.w_hh, G * from_desc.hidden_size);
  copy(a.b_ih, b.b_ih, G);
  copy(a.b_hh, b.b_hh, G);
}

// Rows [first, first + count) of a [rows, B, H] state tensor.
std::vector<double> state_rows(const std::vector<double>& s, std::int64_t first, std::int64_t count,
                               std::int64_t batch, std::int64_t hidden) {
  if (s.empty()) return {};
  const auto row = batch * hidden;
  return std::vector<double>(s.begin() + first * row, s.begin() + (first + count) * row);
}

std::vector<double> concat(const std::vector<double>& a, const std::vector<double>& b) {
  std::vector<double> c = a;
  c.insert(c.end(), b.begin(), b.end());
  return c;
}

// [T, B, F] with time reversed.
std::vector<double> reverse_time(const std::vector<double>& v, std::int64_t steps) {
  const std::size_t row = v.size() / sz(steps);
  std::vector<double> r(v.size());
  for (std::size_t t = 0; t < sz(steps); ++t)
    std::copy_n(v.begin() + static_cast<std::ptrdiff_t>(t * row), row,
                r.begin() + static_cast<std::ptrdiff_t>((sz(steps) - 1 - t) * row));
  return r;
}

// Columns [first, first + count) of every row of a [rows, width] tensor.
std::vector<double> columns(const std::vector<double>& v, std::size_t width, std::size_t first,
                            std::size_t count) {
  std::vector<double> c;
  for (std::size_t r = 0; r < v.size() / width; ++r)
    c.insert(c.end(), v.begin() + static_cast<std::ptrdiff_t>(r * width + first),
             v.begin() + static_cast<std::ptrdiff_t>(r * width + first + count));
  return c;
}

// The forward half of a bidirectional layer is a unidirectional run with the forward weights;
// the reverse half is a unidirectional run on the time-reversed input, reversed back. The same
// arithmetic in the same order, so the results must be identical.
TEST_P(RnnCell, BidirectionalHalvesAreUnidirectionalRuns) {
  Rng rng;
  const std::int64_t steps = 4, batch = 3, H = kHidden;
  const Problem<double> bi = random_problem(rng, make_desc(GetParam(), Stack::Bi1), steps, batch);
  const Outputs<double> ob = forward(bi);
  for (int dir = 0; dir < 2; ++dir) {
    SCOPED_TRACE(dir == 0 ? "forward half" : "reverse half");
    Problem<double> uni;
    uni.desc = make_desc(GetParam(), Stack::Uni1);
    uni.steps = steps;
    uni.batch = batch;
    uni.x = dir == 0 ? bi.x : reverse_time(bi.x, steps);
    uni.h0 = state_rows(bi.h0, dir, 1, batch, H);
    uni.c0 = state_rows(bi.c0, dir, 1, batch, H);
    uni.params.assign(sz(rnn_param_count(uni.desc)), 0.0);
    copy_cell_params(bi.desc, bi.params, 0, dir, uni.desc, uni.params, 0, 0);
    const Outputs<double> ou = forward(uni);
    const std::vector<double> y_half = columns(ob.y, sz(2 * H), sz(dir * H), sz(H));
    EXPECT_EQ(y_half, dir == 0 ? ou.y : reverse_time(ou.y, steps));
    EXPECT_EQ(state_rows(ob.hn, dir, 1, batch, H), ou.hn);
    EXPECT_EQ(state_rows(ob.cn, dir, 1, batch, H), ou.cn);
  }
}

// Layer 1 of a two-layer stack is a one-layer net run on layer 0's output ([fwd, bwd] for
// bidirectional), forward and backward. Tolerance 1e-13 relative: the same sums, only the
// decomposition differs.
class RnnStack : public ::testing::TestWithParam<std::tuple<Cell, Direction>> {};

std::string stack_case_name(
    const ::testing::TestParamInfo<std::tuple<Cell, Direction>>& param_info) {
  return std::string(to_string(std::get<0>(param_info.param))) +
         (std::get<1>(param_info.param) == Direction::Bidirectional ? "_bi" : "_uni");
}

TEST_P(RnnStack, UpperLayerTakesLowerLayerOutput) {
  const auto [cell, direction] = GetParam();
  const bool bi = direction == Direction::Bidirectional;
  const std::int64_t steps = 4, batch = 3, H = kHidden, D = bi ? 2 : 1;
  Rng rng;
  const Problem<double> two =
      random_smooth_problem(rng, make_desc(cell, bi ? Stack::Bi2 : Stack::Uni2), steps, batch);
  Problem<double> lo = two, up = two;
  lo.desc.layers = up.desc.layers = 1;
  up.desc.input_size = D * H;
  lo.h0 = state_rows(two.h0, 0, D, batch, H);
  lo.c0 = state_rows(two.c0, 0, D, batch, H);
  up.h0 = state_rows(two.h0, D, D, batch, H);
  up.c0 = state_rows(two.c0, D, D, batch, H);
  lo.params.assign(sz(rnn_param_count(lo.desc)), 0.0);
  up.params.assign(sz(rnn_param_count(up.desc)), 0.0);
  for (int d = 0; d < D; ++d) {
    copy_cell_params(two.desc, two.params, 0, d, lo.desc, lo.params, 0, d);
    copy_cell_params(two.desc, two.params, 1, d, up.desc, up.params, 0, d);
  }
  const Outputs<double> o2 = forward(two);
  const Outputs<double> olo = forward(lo);
  up.x = olo.y;
  const Outputs<double> oup = forward(up);
  EXPECT_LE(rel_error(o2.y, oup.y), 1e-13);
  EXPECT_LE(rel_error(o2.hn, concat(olo.hn, oup.hn)), 1e-13);
  if (two.lstm()) {
    EXPECT_LE(rel_error(o2.cn, concat(olo.cn, oup.cn)), 1e-13);
  }

  // Backward: the upper layer's dx is the lower layer's dy.
  const Outputs<double> w = random_output_grads(rng, two);
  const Grads<double> g2 = backward(two, w);
  const Grads<double> gup = backward(
      up, Outputs<double>{w.y, state_rows(w.hn, D, D, batch, H), state_rows(w.cn, D, D, batch, H)});
  const Grads<double> glo = backward(lo, Outputs<double>{gup.dx, state_rows(w.hn, 0, D, batch, H),
                                                         state_rows(w.cn, 0, D, batch, H)});
  EXPECT_LE(rel_error(g2.dx, glo.dx), 1e-13);
  EXPECT_LE(rel_error(g2.dh0, concat(glo.dh0, gup.dh0)), 1e-13);
  if (two.lstm()) {
    EXPECT_LE(rel_error(g2.dc0, concat(glo.dc0, gup.dc0)), 1e-13);
  }
  EXPECT_LE(rel_error(g2.dparams, concat(glo.dparams, gup.dparams)), 1e-13);
}

INSTANTIATE_TEST_SUITE_P(AllCells, RnnStack,
                         ::testing::Combine(::testing::ValuesIn(kCells),
                                            ::testing::Values(Direction::Unidirectional,
                                                              Direction::Bidirectional)),
                         stack_case_name);

// Null h0 / c0 / dhn / dcn act as zeros; null outputs are skipped without changing the others.
TEST_P(RnnCell, NullableArgumentsActAsZerosOrAreSkipped) {
  Rng rng;
  Problem<double> p = random_problem(rng, make_desc(GetParam(), Stack::Bi2), 3, 3);
  const std::size_t S = p.state();
  Problem<double> zeros = p;
  zeros.h0.assign(S, 0.0);
  if (p.lstm()) zeros.c0.assign(S, 0.0);
  Problem<double> nulls = p;
  nulls.h0.clear();
  nulls.c0.clear();
  const Outputs<double> oz = forward(zeros);
  const Outputs<double> on = forward(nulls);
  EXPECT_EQ(on.y, oz.y);
  EXPECT_EQ(on.hn, oz.hn);
  EXPECT_EQ(on.cn, oz.cn);

  // y only: hn / cn null.
  std::vector<double> y = poisoned<double>(p.y_size());
  rnn_forward<double>(p.desc, p.steps, p.batch, p.x.data(), p.h0.data(), data_or_null(p.c0),
                      p.params.data(), y.data(), nullptr, nullptr);
  EXPECT_EQ(y, forward(p).y);

  // dhn / dcn null == zeros.
  const Outputs<double> w = random_output_grads(rng, p);
  Outputs<double> w_zero = w;
  w_zero.hn.assign(S, 0.0);
  if (p.lstm()) w_zero.cn.assign(S, 0.0);
  const Outputs<double> w_null{w.y, {}, {}};
  const Grads<double> gz = backward(p, w_zero);
  const Grads<double> gn = backward(p, w_null);
  EXPECT_EQ(gn.dx, gz.dx);
  EXPECT_EQ(gn.dh0, gz.dh0);
  EXPECT_EQ(gn.dc0, gz.dc0);
  EXPECT_EQ(gn.dparams, gz.dparams);

  // Only dparams, then only dx: the same values as the full backward.
  const Grads<double> full = backward(p, w);
  std::vector<double> dparams = poisoned<double>(p.params.size());
  rnn_backward<double>(p.desc, p.steps, p.batch, p.x.data(), p.h0.data(), data_or_null(p.c0),
                       p.params.data(), w.y.data(), w.hn.data(), data_or_null(w.cn), nullptr,
                       nullptr, nullptr, dparams.data());
  EXPECT_EQ(dparams, full.dparams);
  std::vector<double> dx = poisoned<double>(p.x.size());
  rnn_backward<double>(p.desc, p.steps, p.batch, p.x.data(), p.h0.data(), data_or_null(p.c0),
                       p.params.data(), w.y.data(), w.hn.data(), data_or_null(w.cn), dx.data(),
                       nullptr, nullptr, nullptr);
  EXPECT_EQ(dx, full.dx);
}

// Gradients overwrite their outputs: running backward twice into the same buffers gives the
// same values (no accumulation).
TEST_P(RnnCell, GradientsOverwriteOutputs) {
  Rng rng;
  const Problem<double> p = random_problem(rng, make_desc(GetParam(), Stack::Bi1), 3, 2);
  const Outputs<double> w = random_output_grads(rng, p);
  const Grads<double> once = backward(p, w);
  Grads<double> twice = once;
  rnn_backward<double>(p.desc, p.steps, p.batch, p.x.data(), p.h0.data(), data_or_null(p.c0),
                       p.params.data(), w.y.data(), w.hn.data(), data_or_null(w.cn),
                       twice.dx.data(), twice.dh0.data(), data_or_null(twice.dc0),
                       twice.dparams.data());
  EXPECT_EQ(twice.dx, once.dx);
  EXPECT_EQ(twice.dh0, once.dh0);
  EXPECT_EQ(twice.dc0, once.dc0);
  EXPECT_EQ(twice.dparams, once.dparams);
}

// rnn_forward_backward writes what rnn_forward and rnn_backward write, bit for bit (every output
// poisoned first), with per-sequence lengths too.
TEST_P(RnnCell, ForwardBackwardEqualsTheTwoPasses) {
  Rng rng;
  const Problem<double> p = random_problem(rng, make_desc(GetParam(), Stack::Bi1), 5, 3);
  const Outputs<double> w = random_output_grads(rng, p);
  for (const std::vector<std::int32_t>& lengths :
       {std::vector<std::int32_t>{}, std::vector<std::int32_t>{5, 1, 3}}) {
    SCOPED_TRACE(lengths.empty() ? "all steps" : "lengths 5, 1, 3");
    const std::int32_t* len = lengths.empty() ? nullptr : lengths.data();
    const Outputs<double> o1 = forward(p, len);
    const Grads<double> g1 = backward(p, w, len);
    Outputs<double> o2 = poisoned_outputs(p);
    Grads<double> g2 = poisoned_grads(p);
    rnn_forward_backward<double>(
        p.desc, p.steps, p.batch, p.x.data(), p.h0.data(), data_or_null(p.c0), p.params.data(),
        w.y.data(), w.hn.data(), data_or_null(w.cn), o2.y.data(), o2.hn.data(), data_or_null(o2.cn),
        g2.dx.data(), g2.dh0.data(), data_or_null(g2.dc0), g2.dparams.data(), len);
    EXPECT_EQ(o2.y, o1.y);
    EXPECT_EQ(o2.hn, o1.hn);
    EXPECT_EQ(o2.cn, o1.cn);
    EXPECT_EQ(g2.dx, g1.dx);
    EXPECT_EQ(g2.dh0, g1.dh0);
    EXPECT_EQ(g2.dc0, g1.dc0);
    EXPECT_EQ(g2.dparams, g1.dparams);
  }
}

// ---------------------------------------------------------------------------------------------
// Bad input.

template <class T>
class RnnBadInput : public ::testing::Test {};
using Floats = ::testing::Types<float, double>;
TYPED_TEST_SUITE(RnnBadInput, Floats);

TYPED_TEST(RnnBadInput, ThrowsInvalidArgumentNamingExpectedAndGiven) {
  using T = TypeParam;
  const RnnDesc desc = make_desc(Cell::LSTM, Stack::Bi1);
  const std::int64_t steps = 2, batch = 3;
  std::vector<T> x(sz(steps * batch * kInput)), s(state_size(desc, batch)),
      params(sz(rnn_param_count(desc))), y(sz(steps * batch * 2 * kHidden)), dx(x.size()),
      ds(s.size()), dparams(params.size());
  const auto fwd = [&](const RnnDesc& d, std::int64_t t, std::int64_t b, const T* xp, const T* pp,
                       T* yp) {
    return [=, &s] { rnn_forward<T>(d, t, b, xp, s.data(), s.data(), pp, yp, nullptr, nullptr); };
  };
  const auto bwd = [&](std::int64_t t, const T* xp, const T* pp, const T* dyp) {
    return [=, &s, &dx, &ds, &dparams] {
      rnn_backward<T>(desc, t, batch, xp, s.data(), s.data(), pp, dyp, nullptr, nullptr, dx.data(),
                      ds.data(), ds.data(), dparams.data());
    };
  };
  RnnDesc no_hidden = desc;
  no_hidden.hidden_size = 0;
  RnnDesc no_input = desc;
  no_input.input_size = 0;
  RnnDesc no_layers = desc;
  no_layers.layers = 0;
  struct Case {
    std::function<void()> call;
    std::string message;
  };
  const Case cases[] = {
      {fwd(desc, 0, batch, x.data(), params.data(), y.data()),
       "rnn_forward: steps: expected >= 1, got 0"},
      {fwd(desc, -2, batch, x.data(), params.data(), y.data()),
       "rnn_forward: steps: expected >= 1, got -2"},
      {fwd(desc, steps, 0, x.data(), params.data(), y.data()),
       "rnn_forward: batch: expected >= 1, got 0"},
      {fwd(no_hidden, steps, batch, x.data(), params.data(), y.data()),
       "RnnDesc.hidden_size: expected >= 1, got 0"},
      {fwd(no_input, steps, batch, x.data(), params.data(), y.data()),
       "RnnDesc.input_size: expected >= 1, got 0"},
      {fwd(no_layers, steps, batch, x.data(), params.data(), y.data()),
       "RnnDesc.layers: expected >= 1, got 0"},
      {fwd(desc, steps, batch, nullptr, params.data(), y.data()),
       "rnn_forward: x: expected a non-null pointer, got null"},
      {fwd(desc, steps, batch, x.data(), nullptr, y.data()),
       "rnn_forward: params: expected a non-null pointer, got null"},
      {fwd(desc, steps, batch, x.data(), params.data(), nullptr),
       "rnn_forward: y: expected a non-null pointer, got null"},
      {bwd(0, x.data(), params.data(), y.data()), "rnn_backward: steps: expected >= 1, got 0"},
      {bwd(steps, nullptr, params.data(), y.data()),
       "rnn_backward: x: expected a non-null pointer, got null"},
      {bwd(steps, x.data(), nullptr, y.data()),
       "rnn_backward: params: expected a non-null pointer, got null"},
      {bwd(steps, x.data(), params.data(), nullptr),
       "rnn_backward: dy: expected a non-null pointer, got null"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.message);
    try {
      c.call();
      ADD_FAILURE() << "no exception";
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find(c.message), std::string::npos) << e.what();
    }
  }
  // The valid call the cases were derived from does not throw.
  EXPECT_NO_THROW(fwd(desc, steps, batch, x.data(), params.data(), y.data())());
  EXPECT_NO_THROW(bwd(steps, x.data(), params.data(), y.data())());
}

}  // namespace
}  // namespace prnn::reference
