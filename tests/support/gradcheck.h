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
    values[i] = saved + opt.eps;
    const double lp = loss();
    values[i] = saved - opt.eps;
    const double lm = loss();
    values[i] = saved;
    const double num = (lp - lm) / (2 * opt.eps);
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
