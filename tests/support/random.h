// Test inputs: fresh random data every run (seed printed on failure, PRNN_TEST_SEED reproduces),
// and the relative-error metric every comparison uses: ||out - ref||_2 / ||ref||_2.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <random>
#include <string>
#include <vector>

namespace prnn::test {

// A fresh seed per call unless PRNN_TEST_SEED is set.
inline std::uint64_t fresh_seed() {
  if (const char* s = std::getenv("PRNN_TEST_SEED")) return std::strtoull(s, nullptr, 10);
  std::random_device rd;
  return (static_cast<std::uint64_t>(rd()) << 32) ^ rd();
}

// Holds the generator of one test and names its seed in every failure message.
class Rng {
 public:
  Rng() : Rng(fresh_seed()) {}
  // From a seed drawn elsewhere (a reference computed on another thread, say).
  explicit Rng(std::uint64_t seed)
      : seed_(seed),
        gen_(seed_),
        trace_(__FILE__, __LINE__, "PRNN_TEST_SEED=" + std::to_string(seed_)) {}
  std::uint64_t seed() const { return seed_; }
  std::mt19937_64& gen() { return gen_; }

  template <class T = double>
  std::vector<T> uniform(std::size_t n, double lo = -1.0, double hi = 1.0) {
    std::uniform_real_distribution<double> d(lo, hi);
    std::vector<T> v(n);
    for (auto& e : v) e = static_cast<T>(d(gen_));
    return v;
  }
  std::vector<std::int32_t> labels(std::size_t n, std::int32_t classes) {
    std::uniform_int_distribution<std::int32_t> d(0, classes - 1);
    std::vector<std::int32_t> v(n);
    for (auto& e : v) e = d(gen_);
    return v;
  }
  std::int64_t integer(std::int64_t lo, std::int64_t hi) {
    return std::uniform_int_distribution<std::int64_t>(lo, hi)(gen_);
  }

 private:
  std::uint64_t seed_;
  std::mt19937_64 gen_;
  ::testing::ScopedTrace trace_;
};

// ||a - ref|| / ||ref|| over n elements; +inf if any element of a is NaN/inf or sizes are empty
// with a nonzero reference.
template <class A, class R>
double rel_error(const A* a, const R* ref, std::size_t n) {
  double num = 0.0, den = 0.0;
  for (std::size_t i = 0; i < n; ++i) {
    const double x = static_cast<double>(a[i]);
    if (!std::isfinite(x)) return std::numeric_limits<double>::infinity();
    const double r = static_cast<double>(ref[i]);
    num += (x - r) * (x - r);
    den += r * r;
  }
  if (den == 0.0) return num == 0.0 ? 0.0 : std::numeric_limits<double>::infinity();
  return std::sqrt(num / den);
}

template <class A, class R>
double rel_error(const std::vector<A>& a, const std::vector<R>& ref) {
  EXPECT_EQ(a.size(), ref.size());
  return rel_error(a.data(), ref.data(), std::min(a.size(), ref.size()));
}

// Sizes and poison values the tests share.
inline std::size_t sz(std::int64_t v) { return static_cast<std::size_t>(v); }
inline constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

template <class T>
std::vector<T> to_type(const std::vector<double>& v) {
  return std::vector<T>(v.begin(), v.end());
}

}  // namespace prnn::test
