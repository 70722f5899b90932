// CPU reference of the linear-recurrence layers GILR, GILR-LSTM, SRU, QRNN(k)
// (src/reference/layers.h, formulas and parameter layout in prnn/layers.h):
// hand-computed cases that pin the parameter layout, finite-difference gradients of x, params and
// state0 for every layer, float vs double, state nullability and carry-over, bad input.
#include "reference/layers.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <ostream>
#include <string>
#include <vector>

#include "prnn/error.h"
#include "prnn/layers.h"
#include "support/gradcheck.h"
#include "support/random.h"
#include "support/expect.h"

namespace prnn {
namespace {

using test::expect_invalid;

using reference::linear_layer_backward;
using reference::linear_layer_forward;
using test::Rng;

using test::kNaN;
using test::sz;
double sigmoid(double v) {
  return 1.0 / (1.0 + std::exp(-v));
}

LinearLayerDesc make_desc(LinearLayerKind kind, std::int64_t input, std::int64_t hidden,
                          std::int64_t window = 1) {
  LinearLayerDesc d;
  d.kind = kind;
  d.input_size = input;
  d.hidden_size = hidden;
  d.window = window;
  return d;
}

// One layer call over vectors. An empty state0 / dstate_n is passed as null.
template <class T>
struct Forward {
  std::vector<T> y, state_n;
};

template <class T>
Forward<T> run_forward(const LinearLayerDesc& desc, std::int64_t steps, std::int64_t batch,
                       const std::vector<T>& x, const std::vector<T>& params,
                       const std::vector<T>& state0) {
  Forward<T> out{std::vector<T>(sz(steps * batch * desc.hidden_size), static_cast<T>(kNaN)),
                 std::vector<T>(sz(batch * desc.state_size()), static_cast<T>(kNaN))};
  linear_layer_forward<T>(desc, steps, batch, x.data(), params.data(),
                          state0.empty() ? nullptr : state0.data(), out.y.data(),
                          out.state_n.data());
  return out;
}

// Gradient outputs start poisoned (NaN) so an element the reference forgets to write fails.
template <class T>
struct Backward {
  std::vector<T> dx, dparams, dstate0;
};

template <class T>
Backward<T> run_backward(const LinearLayerDesc& desc, std::int64_t steps, std::int64_t batch,
                         const std::vector<T>& x, const std::vector<T>& params,
                         const std::vector<T>& state0, const std::vector<T>& dy,
                         const std::vector<T>& dstate_n) {
  const auto nan = static_cast<T>(kNaN);
  Backward<T> g{std::vector<T>(x.size(), nan), std::vector<T>(params.size(), nan),
                std::vector<T>(sz(batch * desc.state_size()), nan)};
  linear_layer_backward<T>(desc, steps, batch, x.data(), params.data(),
                           state0.empty() ? nullptr : state0.data(), dy.data(),
                           dstate_n.empty() ? nullptr : dstate_n.data(), g.dx.data(),
                           g.dparams.data(), g.dstate0.data());
  return g;
}

// ---------------------------------------------------------------------------------------------
// Hand-computed cases (double, to 1e-12). Each writes the layer's definition out for one unit so
// the flat parameter layout of prnn/layers.h is pinned, not just self-consistent.

// GILR, I = H = 1, two steps. Params W = (w_g, w_u), b = (b_g, b_u).
TEST(LinearLayerReference, GilrOneUnitTwoStepsByHand) {
  const LinearLayerDesc desc = make_desc(LinearLayerKind::Gilr, 1, 1);
  const std::vector<double> params = {0.5, -1.0, 0.1, 0.5};
  ASSERT_EQ(desc.param_count(), 4);
  const std::vector<double> x = {1.0, 2.0}, state0 = {0.2};
  const auto out = run_forward<double>(desc, 2, 1, x, params, state0);

  const double g0 = sigmoid(0.5 * 1 + 0.1), u0 = std::tanh(-1.0 * 1 + 0.5);
  const double h0 = g0 * 0.2 + (1 - g0) * u0;
  const double g1 = sigmoid(0.5 * 2 + 0.1), u1 = std::tanh(-1.0 * 2 + 0.5);
  const double h1 = g1 * h0 + (1 - g1) * u1;
  EXPECT_NEAR(out.y[0], h0, 1e-12);
  EXPECT_NEAR(out.y[1], h1, 1e-12);
  EXPECT_NEAR(out.state_n[0], h1, 1e-12);

  // L = h_1: dL/dstate0 = g1·g0; dL/db_u = (1-g1)(1-u1²) + g1·(1-g0)(1-u0²); dL/dx_0 = g1·dh0/dx_0.
  const auto g = run_backward<double>(desc, 2, 1, x, params, state0, {0.0, 1.0}, {});
  EXPECT_NEAR(g.dstate0[0], g1 * g0, 1e-12);
  EXPECT_NEAR(g.dparams[3], (1 - g1) * (1 - u1 * u1) + g1 * (1 - g0) * (1 - u0 * u0), 1e-12);
  const double dh0_dx0 = (0.2 - u0) * g0 * (1 - g0) * 0.5 + (1 - g0) * (1 - u0 * u0) * -1.0;
  EXPECT_NEAR(g.dx[0], g1 * dh0_dx0, 1e-12);
}

// GILR-LSTM, I = H = 1, two steps. W = (s, u, i, f, z, o), U = (i, f, z, o), b = (s, u, i, f, z,
// o).
TEST(LinearLayerReference, GilrLstmOneUnitTwoStepsByHand) {
  const LinearLayerDesc desc = make_desc(LinearLayerKind::GilrLstm, 1, 1);
  const double ws = 0.3, wu = -0.4, wi = 0.5, wf = -0.6, wz = 0.7, wo = 0.8;
  const double ui = 0.9, uf = -1.0, uz = 1.1, uo = -1.2;
  const double bs = 0.05, bu = -0.1, bi = 0.15, bf = -0.2, bz = 0.25, bo = -0.3;
  const std::vector<double> params = {ws, wu, wi, wf, wz, wo, ui, uf,
                                      uz, uo, bs, bu, bi, bf, bz, bo};
  ASSERT_EQ(desc.param_count(), 16);
  const std::vector<double> x = {1.0, -2.0}, state0 = {0.4, -0.5};  // (h̃, c)
  const auto out = run_forward<double>(desc, 2, 1, x, params, state0);

  double ht = 0.4, c = -0.5;
  for (int t = 0; t < 2; ++t) {
    const double xt = x[static_cast<std::size_t>(t)];
    const double i = sigmoid(wi * xt + ui * ht + bi), f = sigmoid(wf * xt + uf * ht + bf);
    const double z = std::tanh(wz * xt + uz * ht + bz), o = sigmoid(wo * xt + uo * ht + bo);
    const double s = sigmoid(ws * xt + bs), u = std::tanh(wu * xt + bu);
    c = f * c + i * z;
    ht = s * ht + (1 - s) * u;  // after the gates: they read h̃_{t-1}
    EXPECT_NEAR(out.y[static_cast<std::size_t>(t)], o * c, 1e-12) << "t = " << t;
  }
  EXPECT_NEAR(out.state_n[0], ht, 1e-12);
  EXPECT_NEAR(out.state_n[1], c, 1e-12);
}

// QRNN with k = 1 is, per element: z = tanh(W_z x + b_z), f = σ(W_f x + b_f), o = σ(W_o x + b_o),
// c = f c + (1-f) z, y = o c. Written out here over a random 3-step, batch-2 layer.
TEST(LinearLayerReference, QrnnWindowOneMatchesDefinition) {
  constexpr std::int64_t steps = 3, batch = 2, I = 2, H = 3;
  const LinearLayerDesc desc = make_desc(LinearLayerKind::Qrnn, I, H, 1);
  Rng rng;
  const auto params = rng.uniform(sz(desc.param_count()));
  const auto x = rng.uniform(sz(steps * batch * I)), state0 = rng.uniform(sz(batch * H));
  const auto out = run_forward<double>(desc, steps, batch, x, params, state0);

  auto W = [&](std::int64_t r, std::int64_t i) { return params[sz(r * I + i)]; };
  auto b = [&](std::int64_t r) { return params[sz(3 * H * I + r)]; };
  for (std::int64_t n = 0; n < batch; ++n)
    for (std::int64_t j = 0; j < H; ++j) {
      double c = state0[sz(n * H + j)];
      for (std::int64_t t = 0; t < steps; ++t) {
        double pz = b(j), pf = b(H + j), po = b(2 * H + j);
        for (std::int64_t i = 0; i < I; ++i) {
          const double xi = x[sz((t * batch + n) * I + i)];
          pz += W(j, i) * xi;
          pf += W(H + j, i) * xi;
          po += W(2 * H + j, i) * xi;
        }
        const double z = std::tanh(pz), f = sigmoid(pf), o = sigmoid(po);
        c = f * c + (1 - f) * z;
        EXPECT_NEAR(out.y[sz((t * batch + n) * H + j)], o * c, 1e-12);
      }
      EXPECT_NEAR(out.state_n[sz(n * H + j)], c, 1e-12);
    }
}

// QRNN(k) is QRNN(1) on the stacked window x̂_t = (x_{t-k+1}, ..., x_t), zeros before t = 0,
// with the same parameters (column block j of W multiplies x_{t-k+1+j}). Forward and gradients.
TEST(LinearLayerReference, QrnnWindowIsCausalConvolution) {
  constexpr std::int64_t steps = 4, batch = 3, I = 3, H = 5;
  for (std::int64_t k : {2, 3, 5}) {
    SCOPED_TRACE("k = " + std::to_string(k));
    const LinearLayerDesc conv = make_desc(LinearLayerKind::Qrnn, I, H, k);
    const LinearLayerDesc flat = make_desc(LinearLayerKind::Qrnn, k * I, H, 1);
    ASSERT_EQ(conv.param_count(), flat.param_count());
    Rng rng;
    const auto params = rng.uniform(sz(conv.param_count()));
    const auto x = rng.uniform(sz(steps * batch * I)), state0 = rng.uniform(sz(batch * H));
    std::vector<double> stacked(sz(steps * batch * k * I), 0.0);
    for (std::int64_t t = 0; t < steps; ++t)
      for (std::int64_t n = 0; n < batch; ++n)
        for (std::int64_t j = 0; j < k; ++j) {
          const std::int64_t src = t - k + 1 + j;
          if (src < 0) continue;
          for (std::int64_t i = 0; i < I; ++i)
            stacked[sz(((t * batch + n) * k + j) * I + i)] = x[sz((src * batch + n) * I + i)];
        }
    const auto a = run_forward<double>(conv, steps, batch, x, params, state0);
    const auto b = run_forward<double>(flat, steps, batch, stacked, params, state0);
    EXPECT_LE(test::rel_error(a.y, b.y), 1e-12);
    EXPECT_LE(test::rel_error(a.state_n, b.state_n), 1e-12);

    const auto dy = rng.uniform(a.y.size());
    const auto ga = run_backward<double>(conv, steps, batch, x, params, state0, dy, {});
    const auto gb = run_backward<double>(flat, steps, batch, stacked, params, state0, dy, {});
    EXPECT_LE(test::rel_error(ga.dparams, gb.dparams), 1e-12);
    EXPECT_LE(test::rel_error(ga.dstate0, gb.dstate0), 1e-12);
    // dx of the convolution sums the stacked gradient over every window position x_t lands in.
    std::vector<double> dx_want(x.size(), 0.0);
    for (std::int64_t t = 0; t < steps; ++t)
      for (std::int64_t n = 0; n < batch; ++n)
        for (std::int64_t j = 0; j < k; ++j) {
          const std::int64_t src = t - k + 1 + j;
          if (src < 0) continue;
          for (std::int64_t i = 0; i < I; ++i)
            dx_want[sz((src * batch + n) * I + i)] += gb.dx[sz(((t * batch + n) * k + j) * I + i)];
        }
    EXPECT_LE(test::rel_error(ga.dx, dx_want), 1e-12);
  }
}

// SRU highway, one element, one step: y = r ⊙ tanh(c) + (1 - r) ⊙ s with s = x (I == H) or
// s = W_s x (I != H, W_s the rows [3H, 4H) of the projection, right after (x̃; f; r)).
TEST(LinearLayerReference, SruHighwayOneElement) {
  constexpr std::int64_t H = 2, j = 1;
  for (std::int64_t I : {2, 3}) {
    SCOPED_TRACE("I = " + std::to_string(I));
    const LinearLayerDesc desc = make_desc(LinearLayerKind::Sru, I, H);
    const std::int64_t rows = I == H ? 3 * H : 4 * H;
    ASSERT_EQ(desc.param_count(), rows * I + 2 * H);
    Rng rng;
    const auto params = rng.uniform(sz(desc.param_count()));
    const auto x = rng.uniform(sz(I)), state0 = rng.uniform(sz(H));
    const auto out = run_forward<double>(desc, 1, 1, x, params, state0);

    auto dot_row = [&](std::int64_t r) {
      double acc = 0;
      for (std::int64_t i = 0; i < I; ++i) acc += params[sz(r * I + i)] * x[sz(i)];
      return acc;
    };
    const double* b = params.data() + rows * I;  // (f; r)
    const double xt = dot_row(j);
    const double f = sigmoid(dot_row(H + j) + b[j]);
    const double r = sigmoid(dot_row(2 * H + j) + b[H + j]);
    const double c = f * state0[sz(j)] + (1 - f) * xt;
    const double s = I == H ? x[sz(j)] : dot_row(3 * H + j);
    EXPECT_NEAR(out.y[sz(j)], r * std::tanh(c) + (1 - r) * s, 1e-12);
    EXPECT_NEAR(out.state_n[sz(j)], c, 1e-12);
  }
}

// ---------------------------------------------------------------------------------------------
// Every layer over odd sizes.

struct LayerCase {
  LinearLayerKind kind;
  std::int64_t input, hidden, window, steps, batch;
  LinearLayerDesc desc() const { return make_desc(kind, input, hidden, window); }
};

void PrintTo(const LayerCase& c, std::ostream* os) {
  *os << to_string(c.kind) << " I=" << c.input << " H=" << c.hidden << " k=" << c.window
      << " T=" << c.steps << " B=" << c.batch;
}

std::string case_name(const ::testing::TestParamInfo<LayerCase>& info) {
  const LayerCase& c = info.param;
  return std::string(to_string(c.kind)) + "_I" + std::to_string(c.input) + "_H" +
         std::to_string(c.hidden) + "_k" + std::to_string(c.window) + "_T" +
         std::to_string(c.steps) + "_B" + std::to_string(c.batch);
}

const LayerCase kCases[] = {
    {LinearLayerKind::Gilr, 3, 5, 1, 4, 3},     {LinearLayerKind::Gilr, 5, 5, 1, 1, 1},
    {LinearLayerKind::GilrLstm, 3, 5, 1, 4, 3}, {LinearLayerKind::GilrLstm, 5, 7, 1, 1, 1},
    {LinearLayerKind::Sru, 5, 5, 1, 4, 3},      {LinearLayerKind::Sru, 7, 7, 1, 1, 1},
    {LinearLayerKind::Sru, 3, 5, 1, 4, 3},      {LinearLayerKind::Sru, 5, 7, 1, 1, 1},
    {LinearLayerKind::Qrnn, 3, 5, 1, 4, 3},     {LinearLayerKind::Qrnn, 3, 5, 2, 4, 3},
    {LinearLayerKind::Qrnn, 5, 7, 3, 4, 1},     {LinearLayerKind::Qrnn, 3, 5, 3, 2, 3},
    {LinearLayerKind::Qrnn, 3, 5, 3, 1, 1},
};

class LinearLayerCase : public ::testing::TestWithParam<LayerCase> {};

// L = Σ w_y ⊙ y + Σ w_s ⊙ state_n, so the backward gets dy = w_y and dstate_n = w_s; grads of x,
// params and state0 against central differences (tolerances in gradcheck.h).
TEST_P(LinearLayerCase, GradientMatchesFiniteDifferences) {
  const LayerCase c = GetParam();
  const LinearLayerDesc desc = c.desc();
  Rng rng;
  auto x = rng.uniform(sz(c.steps * c.batch * c.input));
  auto params = rng.uniform(sz(desc.param_count()), -0.6, 0.6);
  auto state0 = rng.uniform(sz(c.batch * desc.state_size()));
  const auto wy = rng.uniform(sz(c.steps * c.batch * c.hidden));
  const auto ws = rng.uniform(sz(c.batch * desc.state_size()));
  auto loss = [&] {
    const auto out = run_forward<double>(desc, c.steps, c.batch, x, params, state0);
    return test::project(out.y, wy) + test::project(out.state_n, ws);
  };
  const auto g = run_backward<double>(desc, c.steps, c.batch, x, params, state0, wy, ws);
  EXPECT_TRUE(test::check_gradient("dx", x, g.dx, loss, rng.gen()));
  EXPECT_TRUE(test::check_gradient("dparams", params, g.dparams, loss, rng.gen()));
  EXPECT_TRUE(test::check_gradient("dstate0", state0, g.dstate0, loss, rng.gen()));
}

// fp32 vs fp64 over 37 steps. Forward 1e-6 relative: gates are contractions (f, s in (0, 1)), so
// rounding does not compound (observed <= 1.5e-7). Backward 1e-5: the gradient sums products of
// a few float terms over all steps and (GILR-LSTM) goes through U once more (observed <= 5e-7).
TEST_P(LinearLayerCase, FloatAgreesWithDouble) {
  const LayerCase c = GetParam();
  const LinearLayerDesc desc = c.desc();
  constexpr std::int64_t steps = 37;
  Rng rng;
  const auto x = rng.uniform(sz(steps * c.batch * c.input));
  const auto params = rng.uniform(sz(desc.param_count()), -0.6, 0.6);
  const auto state0 = rng.uniform(sz(c.batch * desc.state_size()));
  const auto dy = rng.uniform(sz(steps * c.batch * c.hidden));
  const auto ds = rng.uniform(sz(c.batch * desc.state_size()));
  const auto fd = run_forward<double>(desc, steps, c.batch, x, params, state0);
  const auto gd = run_backward<double>(desc, steps, c.batch, x, params, state0, dy, ds);
  using test::to_type;
  const auto ff = run_forward<float>(desc, steps, c.batch, to_type<float>(x),
                                     to_type<float>(params), to_type<float>(state0));
  const auto gf =
      run_backward<float>(desc, steps, c.batch, to_type<float>(x), to_type<float>(params),
                          to_type<float>(state0), to_type<float>(dy), to_type<float>(ds));
  EXPECT_LE(test::rel_error(ff.y, fd.y), 1e-6);
  EXPECT_LE(test::rel_error(ff.state_n, fd.state_n), 1e-6);
  EXPECT_LE(test::rel_error(gf.dx, gd.dx), 1e-5);
  EXPECT_LE(test::rel_error(gf.dparams, gd.dparams), 1e-5);
  EXPECT_LE(test::rel_error(gf.dstate0, gd.dstate0), 1e-5);
}

// Null state0 is the zero state, null dstate_n the zero gradient, and null gradient outputs are
// skipped without changing the others.
TEST_P(LinearLayerCase, NullArgumentsMeanZerosOrSkipped) {
  const LayerCase c = GetParam();
  const LinearLayerDesc desc = c.desc();
  Rng rng;
  const auto x = rng.uniform(sz(c.steps * c.batch * c.input));
  const auto params = rng.uniform(sz(desc.param_count()));
  const std::vector<double> zeros(sz(c.batch * desc.state_size()), 0.0);
  const auto dy = rng.uniform(sz(c.steps * c.batch * c.hidden));

  const auto a = run_forward<double>(desc, c.steps, c.batch, x, params, {});
  const auto b = run_forward<double>(desc, c.steps, c.batch, x, params, zeros);
  EXPECT_EQ(a.y, b.y);
  EXPECT_EQ(a.state_n, b.state_n);
  // state_n null: y unchanged.
  std::vector<double> y(a.y.size(), kNaN);
  linear_layer_forward<double>(desc, c.steps, c.batch, x.data(), params.data(), nullptr, y.data(),
                               nullptr);
  EXPECT_EQ(y, a.y);

  const auto ga = run_backward<double>(desc, c.steps, c.batch, x, params, {}, dy, {});
  const auto gb = run_backward<double>(desc, c.steps, c.batch, x, params, zeros, dy, zeros);
  EXPECT_EQ(ga.dx, gb.dx);
  EXPECT_EQ(ga.dparams, gb.dparams);
  EXPECT_EQ(ga.dstate0, gb.dstate0);

  std::vector<double> dx(x.size(), kNaN), dparams(params.size(), kNaN);
  linear_layer_backward<double>(desc, c.steps, c.batch, x.data(), params.data(), nullptr, dy.data(),
                                nullptr, dx.data(), nullptr, nullptr);
  EXPECT_EQ(dx, ga.dx);
  linear_layer_backward<double>(desc, c.steps, c.batch, x.data(), params.data(), nullptr, dy.data(),
                                nullptr, nullptr, dparams.data(), nullptr);
  EXPECT_EQ(dparams, ga.dparams);
}

INSTANTIATE_TEST_SUITE_P(OddSizes, LinearLayerCase, ::testing::ValuesIn(kCases), case_name);

// Running T steps at once equals running T1 steps, then T - T1 from state_n; and the backward of
// the second half, fed to the first as dstate_n, gives the whole sequence's gradients. Holds for
// every layer whose state is its whole memory (QRNN with k > 1 also needs the last k-1 inputs).
class LinearLayerStateCarry : public ::testing::TestWithParam<LayerCase> {};

TEST_P(LinearLayerStateCarry, SplitSequenceEqualsWhole) {
  const LayerCase c = GetParam();
  const LinearLayerDesc desc = c.desc();
  const std::int64_t steps = c.steps, first = 2, second = steps - first;
  const std::size_t xs = sz(c.batch * c.input), ys = sz(c.batch * c.hidden);
  Rng rng;
  const auto x = rng.uniform(sz(steps) * xs), params = rng.uniform(sz(desc.param_count()));
  const auto state0 = rng.uniform(sz(c.batch * desc.state_size()));
  const auto dy = rng.uniform(sz(steps) * ys);
  const auto ds = rng.uniform(state0.size());

  const auto whole = run_forward<double>(desc, steps, c.batch, x, params, state0);
  const std::vector<double> x1(x.begin(), x.begin() + static_cast<std::ptrdiff_t>(sz(first) * xs));
  const std::vector<double> x2(x.begin() + static_cast<std::ptrdiff_t>(sz(first) * xs), x.end());
  const auto h1 = run_forward<double>(desc, first, c.batch, x1, params, state0);
  const auto h2 = run_forward<double>(desc, second, c.batch, x2, params, h1.state_n);
  std::vector<double> y = h1.y;
  y.insert(y.end(), h2.y.begin(), h2.y.end());
  EXPECT_LE(test::rel_error(y, whole.y), 1e-12);
  EXPECT_LE(test::rel_error(h2.state_n, whole.state_n), 1e-12);

  const auto gw = run_backward<double>(desc, steps, c.batch, x, params, state0, dy, ds);
  const std::vector<double> dy1(dy.begin(),
                                dy.begin() + static_cast<std::ptrdiff_t>(sz(first) * ys));
  const std::vector<double> dy2(dy.begin() + static_cast<std::ptrdiff_t>(sz(first) * ys), dy.end());
  const auto g2 = run_backward<double>(desc, second, c.batch, x2, params, h1.state_n, dy2, ds);
  const auto g1 = run_backward<double>(desc, first, c.batch, x1, params, state0, dy1, g2.dstate0);
  std::vector<double> dx = g1.dx, dparams(params.size());
  dx.insert(dx.end(), g2.dx.begin(), g2.dx.end());
  for (std::size_t i = 0; i < dparams.size(); ++i) dparams[i] = g1.dparams[i] + g2.dparams[i];
  EXPECT_LE(test::rel_error(dx, gw.dx), 1e-12);
  EXPECT_LE(test::rel_error(dparams, gw.dparams), 1e-12);
  EXPECT_LE(test::rel_error(g1.dstate0, gw.dstate0), 1e-12);
}

INSTANTIATE_TEST_SUITE_P(EveryStatefulLayer, LinearLayerStateCarry,
                         ::testing::Values(LayerCase{LinearLayerKind::Gilr, 3, 5, 1, 5, 3},
                                           LayerCase{LinearLayerKind::GilrLstm, 3, 5, 1, 5, 3},
                                           LayerCase{LinearLayerKind::Sru, 5, 5, 1, 5, 3},
                                           LayerCase{LinearLayerKind::Sru, 3, 5, 1, 5, 1},
                                           LayerCase{LinearLayerKind::Qrnn, 3, 5, 1, 5, 3}),
                         case_name);

// ---------------------------------------------------------------------------------------------
// Per-sequence lengths (packed sequences): T = 5, B = 4, lengths (5, 0, 2, 1).

constexpr std::int64_t kLenSteps = 5;
const std::vector<std::int32_t> kLengths = {5, 0, 2, 1};

// Rows [t, b, :], t < len, of a [T, B, width] array: sequence b as [len, 1, width].
std::vector<double> rows_of(const std::vector<double>& v, std::int64_t len, std::int64_t batch,
                            std::int64_t b, std::int64_t width) {
  std::vector<double> out;
  for (std::int64_t t = 0; t < len; ++t)
    for (std::int64_t i = 0; i < width; ++i) out.push_back(v[sz((t * batch + b) * width + i)]);
  return out;
}

struct LengthsRun {
  std::vector<double> y, state_n, dx, dparams, dstate0;
};

// Bitwise equal outputs and gradients.
void expect_same_run(const LengthsRun& a, const LengthsRun& b) {
  EXPECT_EQ(a.y, b.y);
  EXPECT_EQ(a.state_n, b.state_n);
  EXPECT_EQ(a.dx, b.dx);
  EXPECT_EQ(a.dparams, b.dparams);
  EXPECT_EQ(a.dstate0, b.dstate0);
}

LengthsRun run_with_lengths(const LinearLayerDesc& desc, std::int64_t steps, std::int64_t batch,
                            const std::vector<double>& x, const std::vector<double>& params,
                            const std::vector<double>& state0, const std::vector<double>& dy,
                            const std::vector<double>& dstate_n, const std::int32_t* lengths) {
  LengthsRun r{std::vector<double>(sz(steps * batch * desc.hidden_size), kNaN),
               std::vector<double>(state0.size(), kNaN), std::vector<double>(x.size(), kNaN),
               std::vector<double>(params.size(), kNaN), std::vector<double>(state0.size(), kNaN)};
  linear_layer_forward<double>(desc, steps, batch, x.data(), params.data(), state0.data(),
                               r.y.data(), r.state_n.data(), lengths);
  linear_layer_backward<double>(desc, steps, batch, x.data(), params.data(), state0.data(),
                                dy.data(), dstate_n.data(), r.dx.data(), r.dparams.data(),
                                r.dstate0.data(), lengths);
  return r;
}

class LinearLayerLengths : public ::testing::TestWithParam<LayerCase> {};

// Sequence b of a mixed batch is the layer over that sequence alone for lengths[b] steps (a
// length-T sequence: row b of the batch run without lengths); padded y and dx are exactly zero;
// a length-0 sequence keeps its state (state_n = state0) and passes its gradient (dstate0 =
// dstate_n); dparams is the sum over the sequences run alone. Tolerance 1e-12 (double; the same
// arithmetic up to the order of the dparams sum).
TEST_P(LinearLayerLengths, EachSequenceRunsAlone) {
  const LayerCase c = GetParam();
  const LinearLayerDesc desc = c.desc();
  const std::int64_t T = kLenSteps, B = static_cast<std::int64_t>(kLengths.size());
  const std::int64_t I = c.input, H = c.hidden, S = desc.state_size() / H;
  Rng rng;
  const auto x = rng.uniform(sz(T * B * I)), params = rng.uniform(sz(desc.param_count()));
  const auto state0 = rng.uniform(sz(B * S * H)), dstate_n = rng.uniform(state0.size());
  const auto dy = rng.uniform(sz(T * B * H));
  const LengthsRun got =
      run_with_lengths(desc, T, B, x, params, state0, dy, dstate_n, kLengths.data());
  const LengthsRun full = run_with_lengths(desc, T, B, x, params, state0, dy, dstate_n, nullptr);

  std::vector<double> dparams_sum(params.size(), 0.0);
  for (std::int64_t b = 0; b < B; ++b) {
    SCOPED_TRACE("sequence " + std::to_string(b) + ", length " + std::to_string(kLengths[sz(b)]));
    const std::int64_t len = kLengths[sz(b)];
    // Padded steps: exactly zero.
    for (std::int64_t t = len; t < T; ++t) {
      for (std::int64_t j = 0; j < H; ++j) EXPECT_EQ(got.y[sz((t * B + b) * H + j)], 0.0);
      for (std::int64_t i = 0; i < I; ++i) EXPECT_EQ(got.dx[sz((t * B + b) * I + i)], 0.0);
    }
    const auto s0 = rows_of(state0, S, B, b, H), dsn = rows_of(dstate_n, S, B, b, H);
    if (len == 0) {
      EXPECT_EQ(rows_of(got.state_n, S, B, b, H), s0);
      EXPECT_EQ(rows_of(got.dstate0, S, B, b, H), dsn);
      continue;
    }
    const LengthsRun alone = run_with_lengths(desc, len, 1, rows_of(x, len, B, b, I), params, s0,
                                              rows_of(dy, len, B, b, H), dsn, nullptr);
    EXPECT_LE(test::rel_error(rows_of(got.y, len, B, b, H), alone.y), 1e-12);
    EXPECT_LE(test::rel_error(rows_of(got.state_n, S, B, b, H), alone.state_n), 1e-12);
    EXPECT_LE(test::rel_error(rows_of(got.dx, len, B, b, I), alone.dx), 1e-12);
    EXPECT_LE(test::rel_error(rows_of(got.dstate0, S, B, b, H), alone.dstate0), 1e-12);
    for (std::size_t i = 0; i < params.size(); ++i) dparams_sum[i] += alone.dparams[i];
    if (len == T) {  // ... and equal to the batch without lengths
      EXPECT_LE(test::rel_error(rows_of(got.y, T, B, b, H), rows_of(full.y, T, B, b, H)), 1e-12);
      EXPECT_LE(
          test::rel_error(rows_of(got.state_n, S, B, b, H), rows_of(full.state_n, S, B, b, H)),
          1e-12);
      EXPECT_LE(test::rel_error(rows_of(got.dx, T, B, b, I), rows_of(full.dx, T, B, b, I)), 1e-12);
      EXPECT_LE(
          test::rel_error(rows_of(got.dstate0, S, B, b, H), rows_of(full.dstate0, S, B, b, H)),
          1e-12);
    }
  }
  EXPECT_LE(test::rel_error(got.dparams, dparams_sum), 1e-12);
}

// Lengths all T are the batch without lengths, bit for bit.
TEST_P(LinearLayerLengths, AllFullLengthsEqualNone) {
  const LayerCase c = GetParam();
  const LinearLayerDesc desc = c.desc();
  const std::int64_t T = kLenSteps, B = 3, S = desc.state_size() / c.hidden;
  const std::vector<std::int32_t> full_lengths(sz(B), static_cast<std::int32_t>(T));
  Rng rng;
  const auto x = rng.uniform(sz(T * B * c.input)), params = rng.uniform(sz(desc.param_count()));
  const auto state0 = rng.uniform(sz(B * S * c.hidden)), dstate_n = rng.uniform(state0.size());
  const auto dy = rng.uniform(sz(T * B * c.hidden));
  const LengthsRun a =
      run_with_lengths(desc, T, B, x, params, state0, dy, dstate_n, full_lengths.data());
  const LengthsRun b = run_with_lengths(desc, T, B, x, params, state0, dy, dstate_n, nullptr);
  expect_same_run(a, b);
}

// x and dy at padded steps are not read: NaN there changes nothing.
TEST_P(LinearLayerLengths, PaddedInputsAreIgnored) {
  const LayerCase c = GetParam();
  const LinearLayerDesc desc = c.desc();
  const std::int64_t T = kLenSteps, B = static_cast<std::int64_t>(kLengths.size());
  const std::int64_t S = desc.state_size() / c.hidden;
  Rng rng;
  const auto x = rng.uniform(sz(T * B * c.input)), params = rng.uniform(sz(desc.param_count()));
  const auto state0 = rng.uniform(sz(B * S * c.hidden)), dstate_n = rng.uniform(state0.size());
  const auto dy = rng.uniform(sz(T * B * c.hidden));
  auto x_nan = x, dy_nan = dy;
  for (std::int64_t t = 0; t < T; ++t)
    for (std::int64_t b = 0; b < B; ++b) {
      if (t < kLengths[sz(b)]) continue;
      for (std::int64_t i = 0; i < c.input; ++i) x_nan[sz((t * B + b) * c.input + i)] = kNaN;
      for (std::int64_t j = 0; j < c.hidden; ++j) dy_nan[sz((t * B + b) * c.hidden + j)] = kNaN;
    }
  const LengthsRun a =
      run_with_lengths(desc, T, B, x, params, state0, dy, dstate_n, kLengths.data());
  const LengthsRun b =
      run_with_lengths(desc, T, B, x_nan, params, state0, dy_nan, dstate_n, kLengths.data());
  expect_same_run(a, b);
}

// The backward with lengths is the gradient of the forward with lengths (central differences,
// tolerances in gradcheck.h); x at padded steps gets a zero gradient.
TEST_P(LinearLayerLengths, GradientMatchesFiniteDifferences) {
  const LayerCase c = GetParam();
  const LinearLayerDesc desc = c.desc();
  const std::int64_t T = kLenSteps, B = static_cast<std::int64_t>(kLengths.size());
  Rng rng;
  auto x = rng.uniform(sz(T * B * c.input));
  auto params = rng.uniform(sz(desc.param_count()), -0.6, 0.6);
  auto state0 = rng.uniform(sz(B * desc.state_size()));
  const auto wy = rng.uniform(sz(T * B * c.hidden));
  const auto ws = rng.uniform(sz(B * desc.state_size()));
  auto loss = [&] {
    std::vector<double> y(wy.size()), state_n(ws.size());
    linear_layer_forward<double>(desc, T, B, x.data(), params.data(), state0.data(), y.data(),
                                 state_n.data(), kLengths.data());
    return test::project(y, wy) + test::project(state_n, ws);
  };
  std::vector<double> dx(x.size()), dparams(params.size()), dstate0(state0.size());
  linear_layer_backward<double>(desc, T, B, x.data(), params.data(), state0.data(), wy.data(),
                                ws.data(), dx.data(), dparams.data(), dstate0.data(),
                                kLengths.data());
  EXPECT_TRUE(test::check_gradient("dx", x, dx, loss, rng.gen()));
  EXPECT_TRUE(test::check_gradient("dparams", params, dparams, loss, rng.gen()));
  EXPECT_TRUE(test::check_gradient("dstate0", state0, dstate0, loss, rng.gen()));
}

TEST_P(LinearLayerLengths, BadLengthThrowsInvalidArgument) {
  const LayerCase c = GetParam();
  const LinearLayerDesc desc = c.desc();
  const std::int64_t T = kLenSteps, B = 2;
  std::vector<double> x(sz(T * B * c.input), 0.1), params(sz(desc.param_count()), 0.1);
  std::vector<double> y(sz(T * B * c.hidden)), dx(x.size()), dparams(params.size());
  for (const std::vector<std::int32_t>& bad :
       {std::vector<std::int32_t>{3, -1}, std::vector<std::int32_t>{6, 2}}) {
    const std::int32_t given = bad[0] > T ? bad[0] : bad[1];
    const std::string which = bad[0] > T ? "lengths[0]" : "lengths[1]";
    expect_invalid(
        [&] {
          linear_layer_forward<double>(desc, T, B, x.data(), params.data(), nullptr, y.data(),
                                       nullptr, bad.data());
        },
        {"linear_layer_forward", which, "expected a value in [0, 5]",
         "got " + std::to_string(given)});
    expect_invalid(
        [&] {
          linear_layer_backward<double>(desc, T, B, x.data(), params.data(), nullptr, y.data(),
                                        nullptr, dx.data(), dparams.data(), nullptr, bad.data());
        },
        {"linear_layer_backward", which, "expected a value in [0, 5]",
         "got " + std::to_string(given)});
  }
}

INSTANTIATE_TEST_SUITE_P(EveryLayer, LinearLayerLengths,
                         ::testing::Values(LayerCase{LinearLayerKind::Gilr, 3, 4, 1, 5, 4},
                                           LayerCase{LinearLayerKind::GilrLstm, 3, 4, 1, 5, 4},
                                           LayerCase{LinearLayerKind::Sru, 4, 4, 1, 5, 4},
                                           LayerCase{LinearLayerKind::Sru, 3, 4, 1, 5, 4},
                                           LayerCase{LinearLayerKind::Qrnn, 3, 4, 1, 5, 4},
                                           LayerCase{LinearLayerKind::Qrnn, 3, 4, 3, 5, 4}),
                         case_name);

// ---------------------------------------------------------------------------------------------
// Bad input -> InvalidArgument naming the function, the argument, expected and given.

template <class T>
class LinearLayerTyped : public ::testing::Test {};
using Precisions = ::testing::Types<float, double>;
TYPED_TEST_SUITE(LinearLayerTyped, Precisions);

TYPED_TEST(LinearLayerTyped, BadInputThrowsInvalidArgument) {
  using T = TypeParam;
  const LinearLayerDesc good = make_desc(LinearLayerKind::Gilr, 3, 4);
  std::vector<T> x(64, T(0.1)), p(256, T(0.1)), s(64), y(64), dy(64, T(1)), dx(64), dp(256);
  auto fwd = [&](const LinearLayerDesc& d, std::int64_t steps, std::int64_t batch, const T* xp,
                 const T* pp, T* yp) {
    return [=] { linear_layer_forward<T>(d, steps, batch, xp, pp, nullptr, yp, nullptr); };
  };
  auto bwd = [&](const LinearLayerDesc& d, std::int64_t steps, const T* xp, const T* pp,
                 const T* dyp) {
    return [=, &dx, &dp] {
      linear_layer_backward<T>(d, steps, 2, xp, pp, nullptr, dyp, nullptr, dx.data(), dp.data(),
                               nullptr);
    };
  };

  LinearLayerDesc no_hidden = good;
  no_hidden.hidden_size = 0;
  expect_invalid(fwd(no_hidden, 2, 2, x.data(), p.data(), y.data()),
                 {"linear_layer_forward", "hidden_size", "expected >= 1", "got 0"});
  expect_invalid(bwd(no_hidden, 2, x.data(), p.data(), dy.data()),
                 {"linear_layer_backward", "hidden_size", "expected >= 1", "got 0"});
  LinearLayerDesc no_input = good;
  no_input.input_size = 0;
  expect_invalid(fwd(no_input, 2, 2, x.data(), p.data(), y.data()),
                 {"input_size", "expected >= 1", "got 0"});
  for (LinearLayerKind kind :
       {LinearLayerKind::Gilr, LinearLayerKind::GilrLstm, LinearLayerKind::Sru}) {
    const LinearLayerDesc windowed = make_desc(kind, 3, 4, 2);
    expect_invalid(fwd(windowed, 2, 2, x.data(), p.data(), y.data()),
                   {"linear_layer_forward", "window",
                    std::string("expected 1 for ") + to_string(kind), "got 2"});
  }
  expect_invalid(fwd(make_desc(LinearLayerKind::Qrnn, 3, 4, 0), 2, 2, x.data(), p.data(), y.data()),
                 {"window", "expected >= 1", "got 0"});
  expect_invalid(fwd(good, 0, 2, x.data(), p.data(), y.data()),
                 {"linear_layer_forward", "steps", "expected >= 1", "got 0"});
  expect_invalid(fwd(good, 2, 0, x.data(), p.data(), y.data()),
                 {"linear_layer_forward", "batch", "expected >= 1", "got 0"});
  expect_invalid(fwd(good, 2, 2, nullptr, p.data(), y.data()),
                 {"linear_layer_forward", "x:", "expected a non-null pointer", "got null"});
  expect_invalid(fwd(good, 2, 2, x.data(), nullptr, y.data()),
                 {"linear_layer_forward", "params:", "expected a non-null pointer", "got null"});
  expect_invalid(fwd(good, 2, 2, x.data(), p.data(), nullptr),
                 {"linear_layer_forward", "y:", "got null"});
  expect_invalid(bwd(good, 0, x.data(), p.data(), dy.data()),
                 {"linear_layer_backward", "steps", "got 0"});
  expect_invalid(bwd(good, 2, nullptr, p.data(), dy.data()),
                 {"linear_layer_backward", "x:", "got null"});
  expect_invalid(bwd(good, 2, x.data(), nullptr, dy.data()),
                 {"linear_layer_backward", "params:", "got null"});
  expect_invalid(bwd(good, 2, x.data(), p.data(), nullptr),
                 {"linear_layer_backward", "dy:", "got null"});
}

}  // namespace
}  // namespace prnn
