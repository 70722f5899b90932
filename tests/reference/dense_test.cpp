// CPU reference of the dense layer, softmax cross-entropy, SGD and Adam (src/reference/dense.h):
// hand-computed cases, finite-difference gradients, the optimizers against PyTorch's algorithm
// written out independently, Adam on a quadratic, float vs double, bad input.
#include "reference/dense.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <ostream>
#include <string>
#include <vector>

#include "prnn/error.h"
#include "support/gradcheck.h"
#include "support/random.h"
#include "support/expect.h"

namespace prnn {
namespace {

using test::expect_invalid;

using reference::AdamConfig;
using reference::SgdConfig;
using test::Rng;

using test::kNaN;
using test::sz;

// An optimizer configuration with a readable test name.
template <class Config>
struct Named {
  const char* name;
  Config cfg;
};

template <class Config>
void PrintTo(const Named<Config>& c, std::ostream* os) {
  *os << c.name;
}

template <class Config>
std::string config_name(const ::testing::TestParamInfo<Named<Config>>& info) {
  return info.param.name;
}

// ---------------------------------------------------------------------------------------------
// Dense

// x = (1, 2), W = [[1, -1], [0.5, 2]], b = (0.1, -0.2):  y = (1 - 2 + 0.1, 0.5 + 4 - 0.2).
// dy = (1, -1):  dx = dy·W = (0.5, -3),  dW = dyᵀx = [[1, 2], [-1, -2]],  db = (1, -1).
TEST(DenseReference, ByHand) {
  const std::vector<double> x = {1, 2}, w = {1, -1, 0.5, 2}, b = {0.1, -0.2};
  std::vector<double> y(2, kNaN);
  reference::dense_forward<double>(1, 2, 2, x.data(), w.data(), b.data(), y.data());
  EXPECT_NEAR(y[0], -0.9, 1e-12);
  EXPECT_NEAR(y[1], 4.3, 1e-12);
  const std::vector<double> dy = {1, -1};
  std::vector<double> dx(2, kNaN), dw(4, kNaN), db(2, kNaN);
  reference::dense_backward<double>(1, 2, 2, x.data(), w.data(), dy.data(), dx.data(), dw.data(),
                                    db.data());
  const std::vector<double> dx_want = {0.5, -3}, dw_want = {1, 2, -1, -2}, db_want = {1, -1};
  for (std::size_t i = 0; i < 2; ++i) EXPECT_NEAR(dx[i], dx_want[i], 1e-12);
  for (std::size_t i = 0; i < 4; ++i) EXPECT_NEAR(dw[i], dw_want[i], 1e-12);
  for (std::size_t i = 0; i < 2; ++i) EXPECT_NEAR(db[i], db_want[i], 1e-12);
}

// A = [[1, 2, 3], [4, 5, 6]] (2 x 3, row stride 4 with a NaN pad), B = [[1, 0], [0, 1], [1, 1]]
// (3 x 2): A·B = [[4, 5], [10, 11]]. The same B stored transposed ([2, 3]) gives the same C; with
// beta = 2 over C = [[1, 1], [1, 1]] it is [[6, 7], [12, 13]]. beta = 0 never reads C (NaN there).
TEST(MatmulReference, ByHand) {
  const std::vector<double> a = {1, 2, 3, kNaN, 4, 5, 6, kNaN};
  const std::vector<double> b = {1, 0, 0, 1, 1, 1}, bt = {1, 0, 1, 0, 1, 1};
  const std::vector<double> want = {4, 5, 10, 11};
  std::vector<double> c(4, kNaN);
  reference::matmul<double>(2, 2, 3, false, a.data(), 4, b.data(), 2, 0.0, c.data(), 2);
  for (std::size_t i = 0; i < 4; ++i) EXPECT_EQ(c[i], want[i]) << i;
  std::fill(c.begin(), c.end(), kNaN);
  reference::matmul<double>(2, 2, 3, true, a.data(), 4, bt.data(), 3, 0.0, c.data(), 2);
  for (std::size_t i = 0; i < 4; ++i) EXPECT_EQ(c[i], want[i]) << i;
  std::fill(c.begin(), c.end(), 1.0);
  reference::matmul<double>(2, 2, 3, true, a.data(), 4, bt.data(), 3, 2.0, c.data(), 2);
  for (std::size_t i = 0; i < 4; ++i) EXPECT_EQ(c[i], want[i] + 2.0) << i;
  expect_invalid(
      [&] { reference::matmul<double>(2, 2, 3, false, a.data(), 2, b.data(), 2, 0.0, c.data(), 2); },
      {"matmul", "lda 2"});
}

struct DenseShape {
  std::int64_t n, in, out;
};

void PrintTo(const DenseShape& s, std::ostream* os) {
  *os << "n=" << s.n << " in=" << s.in << " out=" << s.out;
}

std::string dense_shape_name(const ::testing::TestParamInfo<DenseShape>& info) {
  std::string name = "N";
  name += std::to_string(info.param.n);
  name += "_in";
  name += std::to_string(info.param.in);
  name += "_out";
  name += std::to_string(info.param.out);
  return name;
}

class DenseGradient : public ::testing::TestWithParam<DenseShape> {};

TEST_P(DenseGradient, MatchesFiniteDifferences) {
  const auto [n, in, out] = GetParam();
  Rng rng;
  auto x = rng.uniform(sz(n * in)), w = rng.uniform(sz(out * in)), b = rng.uniform(sz(out));
  const auto proj = rng.uniform(sz(n * out));
  std::vector<double> y(sz(n * out));
  auto loss = [&] {
    reference::dense_forward<double>(n, in, out, x.data(), w.data(), b.data(), y.data());
    return test::project(y, proj);
  };
  std::vector<double> dx(x.size(), kNaN), dw(w.size(), kNaN), db(b.size(), kNaN);
  reference::dense_backward<double>(n, in, out, x.data(), w.data(), proj.data(), dx.data(),
                                    dw.data(), db.data());
  EXPECT_TRUE(test::check_gradient("dx", x, dx, loss, rng.gen()));
  EXPECT_TRUE(test::check_gradient("dw", w, dw, loss, rng.gen()));
  EXPECT_TRUE(test::check_gradient("db", b, db, loss, rng.gen()));

  // Null outputs are skipped; the others do not change.
  std::vector<double> dx_only(x.size(), kNaN);
  reference::dense_backward<double>(n, in, out, x.data(), w.data(), proj.data(), dx_only.data(),
                                    nullptr, nullptr);
  EXPECT_EQ(dx_only, dx);
}

INSTANTIATE_TEST_SUITE_P(OddSizes, DenseGradient,
                         ::testing::Values(DenseShape{1, 3, 5}, DenseShape{3, 5, 1},
                                           DenseShape{4, 3, 7}),
                         dense_shape_name);

// ---------------------------------------------------------------------------------------------
// Softmax cross-entropy

// Row 0: logits (1, 2, 3), label 2: loss = -log(e³ / (e + e² + e³)) = 0.4076059644443803,
//        softmax = (0.09003057317038046, 0.24472847105479767, 0.6652409557748219).
// Row 1: logits (0, 0, 0), label 0: loss = log 3, softmax = 1/3 each. Mean over the two rows;
// dlogits = (softmax - onehot) / 2.
TEST(SoftmaxCrossEntropyReference, KnownThreeClassRowsByHand) {
  const std::vector<double> logits = {1, 2, 3, 0, 0, 0};
  const std::vector<std::int32_t> labels = {2, 0};
  std::vector<double> dlogits(6, kNaN);
  const double loss =
      reference::softmax_cross_entropy<double>(2, 3, logits.data(), labels.data(), dlogits.data());
  EXPECT_NEAR(loss, (0.4076059644443803 + std::log(3.0)) / 2, 1e-12);
  const std::vector<double> want = {0.09003057317038046 / 2,
                                    0.24472847105479767 / 2,
                                    (0.6652409557748219 - 1) / 2,
                                    (1.0 / 3 - 1) / 2,
                                    1.0 / 3 / 2,
                                    1.0 / 3 / 2};
  for (std::size_t i = 0; i < 6; ++i)
    EXPECT_NEAR(dlogits[i], want[i], 1e-12) << "dlogits[" << i << "]";

  // One row alone: mean over N = 1, and dlogits may be null.
  EXPECT_NEAR(reference::softmax_cross_entropy<double>(1, 3, logits.data(), labels.data(), nullptr),
              0.4076059644443803, 1e-12);
}

// Softmax is shift-invariant; subtracting the row max keeps huge logits finite.
TEST(SoftmaxCrossEntropyReference, LargeLogitsAreStable) {
  const std::vector<std::int32_t> labels = {2};
  for (double shift : {1000.0, -1000.0, 1e30}) {
    SCOPED_TRACE("shift = " + std::to_string(shift));
    const std::vector<double> logits = {1 + shift, 2 + shift, 3 + shift};
    std::vector<double> dlogits(3, kNaN);
    const double loss = reference::softmax_cross_entropy<double>(1, 3, logits.data(), labels.data(),
                                                                 dlogits.data());
    if (shift == 1e30) {
      // 1 + 1e30 == 3 + 1e30 in double: three equal logits, loss log 3.
      EXPECT_NEAR(loss, std::log(3.0), 1e-12);
    } else {
      // The shifted logits are exact integers, so the result matches the unshifted row.
      EXPECT_NEAR(loss, 0.4076059644443803, 1e-12);
      EXPECT_NEAR(dlogits[2], 0.6652409557748219 - 1, 1e-12);
    }
    for (double g : dlogits) EXPECT_TRUE(std::isfinite(g));
  }
  // fp32: logits of 100 would overflow exp without the max subtraction.
  const std::vector<float> lf = {100.f, 101.f, 102.f};
  const float loss_f =
      reference::softmax_cross_entropy<float>(1, 3, lf.data(), labels.data(), nullptr);
  EXPECT_NEAR(loss_f, 0.4076059644443803, 1e-6);
}

struct CeShape {
  std::int64_t n, classes;
};

void PrintTo(const CeShape& s, std::ostream* os) {
  *os << "n=" << s.n << " classes=" << s.classes;
}

std::string ce_shape_name(const ::testing::TestParamInfo<CeShape>& info) {
  std::string name = "N";
  name += std::to_string(info.param.n);
  name += "_K";
  name += std::to_string(info.param.classes);
  return name;
}

class SoftmaxCrossEntropyGradient : public ::testing::TestWithParam<CeShape> {};

// The loss itself is the scalar: dlogits against central differences of the returned mean.
TEST_P(SoftmaxCrossEntropyGradient, MatchesFiniteDifferences) {
  const auto [n, classes] = GetParam();
  Rng rng;
  auto logits = rng.uniform(sz(n * classes), -3, 3);
  const auto labels = rng.labels(sz(n), static_cast<std::int32_t>(classes));
  std::vector<double> dlogits(logits.size(), kNaN);
  reference::softmax_cross_entropy<double>(n, classes, logits.data(), labels.data(),
                                           dlogits.data());
  auto loss = [&] {
    return reference::softmax_cross_entropy<double>(n, classes, logits.data(), labels.data(),
                                                    nullptr);
  };
  EXPECT_TRUE(test::check_gradient("dlogits", logits, dlogits, loss, rng.gen()));
}

INSTANTIATE_TEST_SUITE_P(OddSizes, SoftmaxCrossEntropyGradient,
                         ::testing::Values(CeShape{1, 5}, CeShape{3, 2}, CeShape{4, 7}),
                         ce_shape_name);

// ---------------------------------------------------------------------------------------------
// SGD

// w = 1, g = 0.5, v = 0.2, lr = 0.1, μ = 0.9, wd = 0.01:
//   g' = 0.5 + 0.01·1 = 0.51;  v = 0.9·0.2 + 0.51 = 0.69
//   plain:    w = 1 - 0.1·0.69 = 0.931
//   nesterov: w = 1 - 0.1·(0.51 + 0.9·0.69) = 0.8869
TEST(SgdReference, OneMomentumStepByHand) {
  for (bool nesterov : {false, true}) {
    SCOPED_TRACE(nesterov ? "nesterov" : "heavy ball");
    const SgdConfig cfg{0.1, 0.9, 0.01, nesterov};
    std::vector<double> w = {1.0}, v = {0.2};
    const std::vector<double> g = {0.5};
    reference::sgd_update<double>(cfg, 1, w.data(), g.data(), v.data());
    EXPECT_NEAR(v[0], 0.69, 1e-12);
    EXPECT_NEAR(w[0], nesterov ? 0.8869 : 0.931, 1e-12);
  }
  // No momentum: w -= lr·g', velocity may be null.
  std::vector<double> w = {1.0};
  const std::vector<double> g = {0.5};
  reference::sgd_update<double>(SgdConfig{0.1, 0.0, 0.01, false}, 1, w.data(), g.data(), nullptr);
  EXPECT_NEAR(w[0], 1 - 0.1 * 0.51, 1e-12);
}

class SgdSteps : public ::testing::TestWithParam<Named<SgdConfig>> {};

// Five steps against torch.optim.SGD's algorithm as PyTorch writes it (dampening 0): the buffer
// starts as a clone of the first g' (no zero velocity), then buf = μ·buf + g'.
TEST_P(SgdSteps, MatchPyTorchAlgorithm) {
  const SgdConfig cfg = GetParam().cfg;
  constexpr std::int64_t n = 7;
  Rng rng;
  std::vector<double> w = rng.uniform(sz(n)), v(sz(n), 0.0);
  std::vector<double> want = w, buf;
  for (int step = 0; step < 5; ++step) {
    const auto g = rng.uniform(sz(n));
    reference::sgd_update<double>(cfg, n, w.data(), g.data(),
                                  cfg.momentum != 0 ? v.data() : nullptr);
    std::vector<double> d(sz(n));
    for (std::size_t i = 0; i < d.size(); ++i) d[i] = g[i] + cfg.weight_decay * want[i];
    if (cfg.momentum != 0) {
      if (buf.empty()) {
        buf = d;
      } else {
        for (std::size_t i = 0; i < d.size(); ++i) buf[i] = buf[i] * cfg.momentum + d[i];
      }
      for (std::size_t i = 0; i < d.size(); ++i)
        d[i] = cfg.nesterov ? d[i] + cfg.momentum * buf[i] : buf[i];
    }
    for (std::size_t i = 0; i < d.size(); ++i) want[i] += -cfg.lr * d[i];
  }
  EXPECT_LE(test::rel_error(w, want), 1e-12);
}

INSTANTIATE_TEST_SUITE_P(
    Configs, SgdSteps,
    ::testing::Values(Named<SgdConfig>{"plain", {0.1, 0.0, 0.0, false}},
                      Named<SgdConfig>{"weight_decay", {0.05, 0.0, 0.01, false}},
                      Named<SgdConfig>{"momentum", {0.1, 0.9, 0.0, false}},
                      Named<SgdConfig>{"momentum_weight_decay", {0.1, 0.9, 0.01, false}},
                      Named<SgdConfig>{"nesterov_weight_decay", {0.1, 0.8, 0.01, true}}),
    config_name<SgdConfig>);

// ---------------------------------------------------------------------------------------------
// Adam

// w = 1, g = 0.5, m = v = 0, step 1, lr 0.1, β = (0.9, 0.999), ε = 1e-8, with wd = 0 (g' = 0.5)
// and wd = 0.2 (g' = 0.5 + 0.2·1 = 0.7):
//   m = 0.1·g', v = 0.001·g'², m̂ = g', v̂ = g'²  ->  w = 1 - 0.1·g' / (|g'| + 1e-8)
TEST(AdamReference, OneStepByHand) {
  for (double wd : {0.0, 0.2}) {
    SCOPED_TRACE("weight_decay = " + std::to_string(wd));
    const AdamConfig cfg{0.1, 0.9, 0.999, 1e-8, wd};
    std::vector<double> w = {1.0}, m = {0.0}, v = {0.0};
    const std::vector<double> g = {0.5};
    reference::adam_update<double>(cfg, 1, 1, w.data(), g.data(), m.data(), v.data());
    const double gd = 0.5 + wd;
    EXPECT_NEAR(m[0], 0.1 * gd, 1e-12);
    EXPECT_NEAR(v[0], 0.001 * gd * gd, 1e-12);
    EXPECT_NEAR(w[0], 1 - 0.1 * gd / (gd + 1e-8), 1e-12);
  }
}

class AdamSteps : public ::testing::TestWithParam<Named<AdamConfig>> {};

// Six steps against torch.optim.Adam's single-tensor algorithm as PyTorch writes it:
// m.lerp_(g', 1-β1); v = β2·v + (1-β2)·g'²; step_size = lr / (1-β1^t);
// denom = sqrt(v) / sqrt(1-β2^t) + ε; w -= step_size · m / denom.
TEST_P(AdamSteps, MatchPyTorchAlgorithm) {
  const AdamConfig cfg = GetParam().cfg;
  constexpr std::int64_t n = 9;
  Rng rng;
  std::vector<double> w = rng.uniform(sz(n)), m(sz(n), 0.0), v(sz(n), 0.0);
  std::vector<double> want = w, em(sz(n), 0.0), ev(sz(n), 0.0);
  for (std::int64_t step = 1; step <= 6; ++step) {
    const auto g = rng.uniform(sz(n));
    reference::adam_update<double>(cfg, step, n, w.data(), g.data(), m.data(), v.data());
    const double bc1 = 1 - std::pow(cfg.beta1, static_cast<double>(step));
    const double bc2 = 1 - std::pow(cfg.beta2, static_cast<double>(step));
    for (std::size_t i = 0; i < sz(n); ++i) {
      const double gd = g[i] + cfg.weight_decay * want[i];
      em[i] += (gd - em[i]) * (1 - cfg.beta1);
      ev[i] = ev[i] * cfg.beta2 + (1 - cfg.beta2) * gd * gd;
      const double denom = std::sqrt(ev[i]) / std::sqrt(bc2) + cfg.eps;
      want[i] -= (cfg.lr / bc1) * em[i] / denom;
    }
  }
  EXPECT_LE(test::rel_error(w, want), 1e-12);
  EXPECT_LE(test::rel_error(m, em), 1e-12);
  EXPECT_LE(test::rel_error(v, ev), 1e-12);
}

INSTANTIATE_TEST_SUITE_P(
    Configs, AdamSteps,
    ::testing::Values(Named<AdamConfig>{"defaults", {}},
                      Named<AdamConfig>{"weight_decay", {0.01, 0.9, 0.999, 1e-8, 0.01}},
                      Named<AdamConfig>{"low_betas_large_eps", {0.05, 0.5, 0.9, 1e-3, 0.0}}),
    config_name<AdamConfig>);

// L(w) = ½ Σ c_i (w_i - t_i)², c_i in [0.5, 4]: 300 Adam steps at lr 0.05 from |w - t| ~ 1 bring
// the loss below 1% of its start (Adam moves ~lr per step, so ~20 steps reach the basin).
TEST(AdamReference, DecreasesAQuadratic) {
  constexpr std::int64_t n = 11;
  Rng rng;
  const auto c = rng.uniform(sz(n), 0.5, 4.0), target = rng.uniform(sz(n));
  std::vector<double> w = rng.uniform(sz(n), -2.0, 2.0), m(sz(n), 0.0), v(sz(n), 0.0), g(sz(n));
  auto loss = [&] {
    double l = 0;
    for (std::size_t i = 0; i < sz(n); ++i)
      l += 0.5 * c[i] * (w[i] - target[i]) * (w[i] - target[i]);
    return l;
  };
  const double start = loss();
  const AdamConfig cfg{0.05, 0.9, 0.999, 1e-8, 0.0};
  for (std::int64_t step = 1; step <= 300; ++step) {
    for (std::size_t i = 0; i < sz(n); ++i) g[i] = c[i] * (w[i] - target[i]);
    reference::adam_update<double>(cfg, step, n, w.data(), g.data(), m.data(), v.data());
    if (step == 10) {
      EXPECT_LT(loss(), start);
    }
  }
  EXPECT_LT(loss(), 0.01 * start);
}

// ---------------------------------------------------------------------------------------------
// float vs double. Dense and cross-entropy: 1e-6 relative (one dot product of <= 7 terms / one
// softmax row in float). Optimizers over 5 steps: 1e-6 relative on w (O(1) weights, updates
// of O(lr)).
TEST(DenseReference, FloatAgreesWithDouble) {
  constexpr std::int64_t n = 5, in = 7, out = 3;
  Rng rng;
  const auto x = rng.uniform(sz(n * in)), w = rng.uniform(sz(out * in)), b = rng.uniform(sz(out));
  const auto dy = rng.uniform(sz(n * out));
  const auto labels = rng.labels(sz(n), static_cast<std::int32_t>(out));
  using test::to_type;
  std::vector<double> y(sz(n * out)), dx(x.size()), dw(w.size()), db(b.size()), dl(y.size());
  std::vector<float> yf(y.size()), dxf(dx.size()), dwf(dw.size()), dbf(db.size()), dlf(dl.size());
  const auto xf = to_type<float>(x), wf = to_type<float>(w), bf = to_type<float>(b),
             dyf = to_type<float>(dy);
  reference::dense_forward<double>(n, in, out, x.data(), w.data(), b.data(), y.data());
  reference::dense_forward<float>(n, in, out, xf.data(), wf.data(), bf.data(), yf.data());
  EXPECT_LE(test::rel_error(yf, y), 1e-6);
  reference::dense_backward<double>(n, in, out, x.data(), w.data(), dy.data(), dx.data(), dw.data(),
                                    db.data());
  reference::dense_backward<float>(n, in, out, xf.data(), wf.data(), dyf.data(), dxf.data(),
                                   dwf.data(), dbf.data());
  EXPECT_LE(test::rel_error(dxf, dx), 1e-6);
  EXPECT_LE(test::rel_error(dwf, dw), 1e-6);
  EXPECT_LE(test::rel_error(dbf, db), 1e-6);
  const double l =
      reference::softmax_cross_entropy<double>(n, out, y.data(), labels.data(), dl.data());
  const float lf =
      reference::softmax_cross_entropy<float>(n, out, yf.data(), labels.data(), dlf.data());
  EXPECT_NEAR(lf, l, 1e-6 * std::abs(l));
  EXPECT_LE(test::rel_error(dlf, dl), 1e-6);
}

TEST(OptimizerReference, SgdAndAdamFloatAgreeWithDouble) {
  constexpr std::int64_t n = 13;
  Rng rng;
  const auto w0 = rng.uniform(sz(n));
  std::vector<double> ws = w0, vs(sz(n), 0.0), wa = w0, ma(sz(n), 0.0), va(sz(n), 0.0);
  auto wsf = test::to_type<float>(w0), waf = wsf;
  std::vector<float> vsf(sz(n), 0.f), maf(sz(n), 0.f), vaf(sz(n), 0.f);
  const SgdConfig sgd{0.1, 0.9, 0.01, true};
  const AdamConfig adam{0.01, 0.9, 0.999, 1e-8, 0.01};
  for (std::int64_t step = 1; step <= 5; ++step) {
    const auto g = rng.uniform(sz(n));
    const auto gf = test::to_type<float>(g);
    reference::sgd_update<double>(sgd, n, ws.data(), g.data(), vs.data());
    reference::sgd_update<float>(sgd, n, wsf.data(), gf.data(), vsf.data());
    reference::adam_update<double>(adam, step, n, wa.data(), g.data(), ma.data(), va.data());
    reference::adam_update<float>(adam, step, n, waf.data(), gf.data(), maf.data(), vaf.data());
  }
  EXPECT_LE(test::rel_error(wsf, ws), 1e-6);
  EXPECT_LE(test::rel_error(waf, wa), 1e-6);
}

// ---------------------------------------------------------------------------------------------
// Bad input

template <class T>
class DenseTyped : public ::testing::Test {};
using Precisions = ::testing::Types<float, double>;
TYPED_TEST_SUITE(DenseTyped, Precisions);

TYPED_TEST(DenseTyped, BadInputThrowsInvalidArgument) {
  using T = TypeParam;
  std::vector<T> a(16, T(0.5)), b(16, T(0.5)), c(16), d(16);
  expect_invalid(
      [&] { reference::dense_forward<T>(0, 2, 2, a.data(), b.data(), b.data(), c.data()); },
      {"dense_forward", "n:", "expected >= 1", "got 0"});
  expect_invalid(
      [&] { reference::dense_forward<T>(2, 0, 2, a.data(), b.data(), b.data(), c.data()); },
      {"dense_forward", "in:", "got 0"});
  expect_invalid(
      [&] { reference::dense_forward<T>(2, 2, 2, nullptr, b.data(), b.data(), c.data()); },
      {"dense_forward", "x:", "expected a non-null pointer", "got null"});
  expect_invalid(
      [&] {
        reference::dense_backward<T>(2, 2, -1, a.data(), b.data(), a.data(), c.data(), d.data(),
                                     nullptr);
      },
      {"dense_backward", "out:", "got -1"});
  expect_invalid(
      [&] {
        reference::dense_backward<T>(2, 2, 2, a.data(), b.data(), nullptr, c.data(), d.data(),
                                     nullptr);
      },
      {"dense_backward", "dy:", "got null"});

  const std::vector<std::int32_t> bad_high = {0, 3, 1}, bad_low = {-1, 0, 0}, good = {0, 1, 2};
  expect_invalid(
      [&] { reference::softmax_cross_entropy<T>(3, 3, a.data(), bad_high.data(), c.data()); },
      {"softmax_cross_entropy", "labels[1]", "expected a class in [0, 3)", "got 3"});
  expect_invalid(
      [&] { reference::softmax_cross_entropy<T>(3, 3, a.data(), bad_low.data(), nullptr); },
      {"labels[0]", "expected a class in [0, 3)", "got -1"});
  expect_invalid([&] { reference::softmax_cross_entropy<T>(3, 0, a.data(), good.data(), nullptr); },
                 {"softmax_cross_entropy", "classes", "got 0"});
  expect_invalid([&] { reference::softmax_cross_entropy<T>(3, 3, a.data(), nullptr, nullptr); },
                 {"labels:", "got null"});

  expect_invalid(
      [&] {
        reference::sgd_update<T>(SgdConfig{0.1, 0.9, 0, false}, 4, a.data(), b.data(), nullptr);
      },
      {"sgd_update", "velocity", "expected a non-null pointer", "got null"});
  expect_invalid(
      [&] {
        reference::sgd_update<T>(SgdConfig{0.1, 0.0, 0, true}, 4, a.data(), b.data(), nullptr);
      },
      {"sgd_update", "nesterov", "expected momentum > 0", "got momentum 0"});
  expect_invalid([&] { reference::sgd_update<T>(SgdConfig{}, 0, a.data(), b.data(), nullptr); },
                 {"sgd_update", "n:", "got 0"});
  expect_invalid([&] { reference::sgd_update<T>(SgdConfig{}, 4, a.data(), nullptr, nullptr); },
                 {"sgd_update", "g:", "got null"});
  expect_invalid(
      [&] {
        reference::adam_update<T>(AdamConfig{}, 0, 4, a.data(), b.data(), c.data(), d.data());
      },
      {"adam_update", "step", "expected >= 1", "got 0"});
  expect_invalid(
      [&] { reference::adam_update<T>(AdamConfig{}, 1, 4, a.data(), b.data(), nullptr, d.data()); },
      {"adam_update", "m:", "got null"});
  expect_invalid(
      [&] {
        reference::adam_update<T>(AdamConfig{1e-3, 1.0, 0.999, 1e-8, 0}, 1, 4, a.data(), b.data(),
                                  c.data(), d.data());
      },
      {"adam_update", "beta1", "expected in [0, 1)", "got 1"});
}

}  // namespace
}  // namespace prnn
