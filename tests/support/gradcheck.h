// Finite-difference gradient check in double.
// The scalar loss is L = Σ_i w_i · out_i for a random projection w (so dL/dout = w), and every
// analytic gradient is compared with the central difference (L(θ+ε) - L(θ-ε)) / 2ε.
// Tolerance: |num - ana| <= atol + rtol · max(|num|, |ana|), with ε = 1e-6, rtol = 1e-6,
// atol = 1e-8 by default: central differences in double have O(ε²) truncation error and
// O(1e-16/ε) cancellation error, both far below these bounds for smooth functions of O(1) inputs.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <numeric>
#include <random>
#include <string>
#include <vector>

namespace prnn::test {

struct GradCheckOptions {
  double eps = 1e-6;
  double rtol = 1e-6;
  double atol = 1e-8;
  std::size_t max_coords = 400;  // check every coordinate up to this many, else a random sample
  // Richardson extrapolation, (4·D(ε/2) − D(ε)) / 3 with D the central difference: truncation
  // error O(ε⁴) instead of O(ε²), for checks that need a large ε (a large |L| whose rounding,
  // ~1e-16·|L|/ε, must stay below rtol) where the O(ε²) error would not.
  bool richardson = false;
  // With richardson: L is only piecewise smooth (ReLU kinks). An interval θ ± ε that contains a
  // kink shows as D(ε) and D(ε/2) disagreeing by more than kink_rtol (between kinks they agree
  // to O(ε²)); the coordinate is then retried at ε/16, up to kink_retries times.
  double kink_rtol = 1e-5;
  int kink_retries = 0;
};

// `values` is perturbed in place (and restored); `loss` recomputes L from the current values.
inline ::testing::AssertionResult check_gradient(const std::string& name, std::vector<double>& values,
                                                 const std::vector<double>& analytic,
                                                 const std::function<double()>& loss,
                                                 std::mt19937_64& gen,
                                                 const GradCheckOptions& opt = {}) {
  if (values.size() != analytic.size())
    return ::testing::AssertionFailure()
           << name << ": analytic gradient has " << analytic.size() << " elements, expected "
           << values.size();
  std::vector<std::size_t> coords(values.size());
  std::iota(coords.begin(), coords.end(), std::size_t{0});
  if (coords.size() > opt.max_coords) {
    std::shuffle(coords.begin(), coords.end(), gen);
    coords.resize(opt.max_coords);
  }
  std::size_t bad = 0;
  std::string first;
  for (std::size_t i : coords) {
    const double saved = values[i];
    auto central = [&](double eps) {
      values[i] = saved + eps;
      const double lp = loss();
      values[i] = saved - eps;
      const double lm = loss();
      values[i] = saved;
      return (lp - lm) / (2 * eps);
    };
    double num = 0.0;
    if (opt.richardson) {
      double eps = opt.eps;
      for (int attempt = 0;; ++attempt, eps /= 16) {
        const double d1 = central(eps), d2 = central(eps / 2);
        num = (4 * d2 - d1) / 3;
        const bool smooth =
            std::abs(d1 - d2) <= opt.atol + opt.kink_rtol * std::max(std::abs(d1), std::abs(d2));
        if (smooth || attempt >= opt.kink_retries) break;
      }
    } else {
      num = central(opt.eps);
    }
    const double ana = analytic[i];
    const double tol = opt.atol + opt.rtol * std::max(std::abs(num), std::abs(ana));
    if (!(std::abs(num - ana) <= tol)) {
      if (bad++ == 0)
        first = name + "[" + std::to_string(i) + "]: numeric " + std::to_string(num) +
                " vs analytic " + std::to_string(ana);
    }
  }
  if (bad == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << bad << " of " << coords.size()
                                       << " coordinates differ; first: " << first;
}

// L = Σ w_i · out_i
inline double project(const std::vector<double>& out, const std::vector<double>& w) {
  double s = 0.0;
  for (std::size_t i = 0; i < out.size(); ++i) s += out[i] * w[i];
  return s;
}

}  // namespace prnn::test
