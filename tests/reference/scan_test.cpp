// CPU reference of the linear recurrence h_t = a_t ⊙ h_{t-1} + x_t (src/reference/scan.h):
// a hand-computed case, finite-difference gradients, float vs double, nullable h0/dh0, bad input.
#include "reference/scan.h"

#include <gtest/gtest.h>

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

using reference::linear_scan_backward;
using reference::linear_scan_forward;
using test::Rng;

using test::kNaN;
using test::sz;

// Two channels, three steps, done by hand. Channel 0: a = (0.5, -2, 0.25), x = (1, 2, 3), h0 = 4.
//   h = (0.5·4 + 1, -2·3 + 2, 0.25·(-4) + 3) = (3, -4, 2)
// Channel 1: a = (1, 1, 1), x = (1, 1, 1), h0 = 0  ->  h = (1, 2, 3).
// Backward with dh = (1, 1, 1) on channel 0 and (0, 0, 1) on channel 1:
//   channel 0: g = (a1·g1 + 1, a2·g2 + 1, 1) = (-1.5, 1.25, 1)
//              da = (h0·g0, h_0·g1, h_1·g2) = (-6, 3.75, -4),  dh0 = a0·g0 = -0.75
//   channel 1: g = (1, 1, 1), da = (0, 1, 2), dh0 = 1
TEST(ScanReference, ThreeStepsByHand) {
  const std::vector<double> a = {0.5, 1, -2, 1, 0.25, 1};  // [3, 2]
  const std::vector<double> x = {1, 1, 2, 1, 3, 1};
  const std::vector<double> h0 = {4, 0};
  std::vector<double> h(6, kNaN);
  linear_scan_forward<double>(3, 2, a.data(), x.data(), h0.data(), h.data());
  const std::vector<double> h_want = {3, 1, -4, 2, 2, 3};
  for (std::size_t i = 0; i < h.size(); ++i)
    EXPECT_NEAR(h[i], h_want[i], 1e-12) << "h[" << i << "]";

  const std::vector<double> dh = {1, 0, 1, 0, 1, 1};
  std::vector<double> da(6, kNaN), dx(6, kNaN), dh0(2, kNaN);
  linear_scan_backward<double>(3, 2, a.data(), h.data(), h0.data(), dh.data(), da.data(), dx.data(),
                               dh0.data());
  const std::vector<double> da_want = {-6, 0, 3.75, 1, -4, 2};
  const std::vector<double> dx_want = {-1.5, 1, 1.25, 1, 1, 1};
  for (std::size_t i = 0; i < 6; ++i) {
    EXPECT_NEAR(da[i], da_want[i], 1e-12) << "da[" << i << "]";
    EXPECT_NEAR(dx[i], dx_want[i], 1e-12) << "dx[" << i << "]";
  }
  EXPECT_NEAR(dh0[0], -0.75, 1e-12);
  EXPECT_NEAR(dh0[1], 1.0, 1e-12);
}

struct ScanShape {
  std::int64_t steps, channels;
};

void PrintTo(const ScanShape& s, std::ostream* os) {
  *os << "steps=" << s.steps << " channels=" << s.channels;
}

std::string scan_shape_name(const ::testing::TestParamInfo<ScanShape>& info) {
  std::string name = "T";
  name += std::to_string(info.param.steps);
  name += "_C";
  name += std::to_string(info.param.channels);
  return name;
}

class ScanGradient : public ::testing::TestWithParam<ScanShape> {};

// L = Σ w ⊙ h; analytic grads of a, x, h0 against central differences (tolerances in gradcheck.h).
TEST_P(ScanGradient, MatchesFiniteDifferences) {
  const auto [steps, channels] = GetParam();
  const std::size_t n = sz(steps * channels), c = sz(channels);
  Rng rng;
  auto a = rng.uniform(n, -1.2, 1.2);  // some |a| > 1 so growth is exercised too
  auto x = rng.uniform(n);
  auto h0 = rng.uniform(c);
  const auto w = rng.uniform(n);
  std::vector<double> h(n);
  auto loss = [&] {
    linear_scan_forward<double>(steps, channels, a.data(), x.data(), h0.data(), h.data());
    return test::project(h, w);
  };
  loss();
  std::vector<double> da(n, kNaN), dx(n, kNaN), dh0(c, kNaN);
  linear_scan_backward<double>(steps, channels, a.data(), h.data(), h0.data(), w.data(), da.data(),
                               dx.data(), dh0.data());
  EXPECT_TRUE(test::check_gradient("da", a, da, loss, rng.gen()));
  EXPECT_TRUE(test::check_gradient("dx", x, dx, loss, rng.gen()));
  EXPECT_TRUE(test::check_gradient("dh0", h0, dh0, loss, rng.gen()));
}

INSTANTIATE_TEST_SUITE_P(OddSizes, ScanGradient,
                         ::testing::Values(ScanShape{1, 1}, ScanShape{1, 3}, ScanShape{4, 1},
                                           ScanShape{4, 3}, ScanShape{7, 5}),
                         scan_shape_name);

// fp32 vs fp64 on T = 333: with |a| < 1 the recurrence is contractive, so float rounding stays at
// a few ulps and does not compound: 1e-6 relative (observed <= 1.1e-7).
TEST(ScanReference, FloatAgreesWithDouble) {
  constexpr std::int64_t steps = 333, channels = 5;
  const std::size_t n = sz(steps * channels);
  Rng rng;
  const auto a = rng.uniform(n, 0.0, 0.99), x = rng.uniform(n), h0 = rng.uniform(sz(channels));
  const auto dh = rng.uniform(n);
  std::vector<double> h(n), da(n), dx(n), dh0(sz(channels));
  linear_scan_forward<double>(steps, channels, a.data(), x.data(), h0.data(), h.data());
  linear_scan_backward<double>(steps, channels, a.data(), h.data(), h0.data(), dh.data(), da.data(),
                               dx.data(), dh0.data());

  const auto af = test::to_type<float>(a), xf = test::to_type<float>(x);
  const auto h0f = test::to_type<float>(h0), dhf = test::to_type<float>(dh);
  std::vector<float> hf(n), daf(n), dxf(n), dh0f(sz(channels));
  linear_scan_forward<float>(steps, channels, af.data(), xf.data(), h0f.data(), hf.data());
  linear_scan_backward<float>(steps, channels, af.data(), hf.data(), h0f.data(), dhf.data(),
                              daf.data(), dxf.data(), dh0f.data());
  EXPECT_LE(test::rel_error(hf, h), 1e-6);
  EXPECT_LE(test::rel_error(daf, da), 1e-6);
  EXPECT_LE(test::rel_error(dxf, dx), 1e-6);
  EXPECT_LE(test::rel_error(dh0f, dh0), 1e-6);
}

template <class T>
class ScanTyped : public ::testing::Test {};
using Precisions = ::testing::Types<float, double>;
TYPED_TEST_SUITE(ScanTyped, Precisions);

// A null h0 is the zero state, and a null dh0 only skips that output.
TYPED_TEST(ScanTyped, NullInitialStateIsZero) {
  using T = TypeParam;
  constexpr std::int64_t steps = 4, channels = 3;
  const std::size_t n = sz(steps * channels);
  Rng rng;
  const auto a = rng.uniform<T>(n), x = rng.uniform<T>(n), dh = rng.uniform<T>(n);
  const std::vector<T> zeros(sz(channels), T(0));
  std::vector<T> h_null(n), h_zero(n);
  linear_scan_forward<T>(steps, channels, a.data(), x.data(), nullptr, h_null.data());
  linear_scan_forward<T>(steps, channels, a.data(), x.data(), zeros.data(), h_zero.data());
  EXPECT_EQ(h_null, h_zero);
  EXPECT_EQ(h_null[0], x[0]);  // h_0 = a_0·0 + x_0

  std::vector<T> da_null(n), dx_null(n), da_zero(n), dx_zero(n), dh0(sz(channels));
  linear_scan_backward<T>(steps, channels, a.data(), h_null.data(), nullptr, dh.data(),
                          da_null.data(), dx_null.data(), nullptr);
  linear_scan_backward<T>(steps, channels, a.data(), h_zero.data(), zeros.data(), dh.data(),
                          da_zero.data(), dx_zero.data(), dh0.data());
  EXPECT_EQ(da_null, da_zero);
  EXPECT_EQ(dx_null, dx_zero);
  for (std::size_t c = 0; c < sz(channels); ++c) EXPECT_EQ(da_null[c], T(0));  // h_{-1} = 0
}

TYPED_TEST(ScanTyped, BadInputThrowsInvalidArgument) {
  using T = TypeParam;
  std::vector<T> a(6, T(0.5)), x(6, T(1)), h(6), dh(6, T(1)), da(6), dx(6);
  expect_invalid([&] { linear_scan_forward<T>(0, 2, a.data(), x.data(), nullptr, h.data()); },
                 {"linear_scan_forward", "steps", "expected >= 1", "got 0"});
  expect_invalid([&] { linear_scan_forward<T>(3, 0, a.data(), x.data(), nullptr, h.data()); },
                 {"linear_scan_forward", "channels", "expected >= 1", "got 0"});
  expect_invalid([&] { linear_scan_forward<T>(3, -2, a.data(), x.data(), nullptr, h.data()); },
                 {"channels", "got -2"});
  expect_invalid([&] { linear_scan_forward<T>(3, 2, nullptr, x.data(), nullptr, h.data()); },
                 {"linear_scan_forward", "a:", "expected a non-null pointer", "got null"});
  expect_invalid([&] { linear_scan_forward<T>(3, 2, a.data(), nullptr, nullptr, h.data()); },
                 {"x:", "expected a non-null pointer", "got null"});
  expect_invalid([&] { linear_scan_forward<T>(3, 2, a.data(), x.data(), nullptr, nullptr); },
                 {"h:", "expected a non-null pointer", "got null"});
  expect_invalid(
      [&] {
        linear_scan_backward<T>(0, 2, a.data(), h.data(), nullptr, dh.data(), da.data(), dx.data(),
                                nullptr);
      },
      {"linear_scan_backward", "steps", "expected >= 1", "got 0"});
  expect_invalid(
      [&] {
        linear_scan_backward<T>(3, 2, a.data(), nullptr, nullptr, dh.data(), da.data(), dx.data(),
                                nullptr);
      },
      {"linear_scan_backward", "h:", "got null"});
  expect_invalid(
      [&] {
        linear_scan_backward<T>(3, 2, a.data(), h.data(), nullptr, nullptr, da.data(), dx.data(),
                                nullptr);
      },
      {"dh:", "got null"});
  expect_invalid(
      [&] {
        linear_scan_backward<T>(3, 2, a.data(), h.data(), nullptr, dh.data(), nullptr, dx.data(),
                                nullptr);
      },
      {"da:", "got null"});
  expect_invalid(
      [&] {
        linear_scan_backward<T>(3, 2, a.data(), h.data(), nullptr, dh.data(), da.data(), nullptr,
                                nullptr);
      },
      {"dx:", "got null"});
}

}  // namespace
}  // namespace prnn
