// The skinny GEMM (src/gemm/skinny_gemm.h) against the fp64 reference (reference::matmul) over
// odd sizes, both layouts of B, beta 0 and 1, unaligned and padded operands, outputs poisoned
// with NaN first; the dispatch (rows_gemm) both ways; determinism; bad input.
//
// Tolerance, per element: |c - ref| <= (K + 9)·2^-24·(Σ_k |a_mk·b_kn| + |beta·c0|). That is the
// worst-case bound of summing K + 1 products in fp32 in any order (the kernel sums each CTA's
// slice of k, then up to 8 partials), so it holds for any correct kernel and fails on a wrong
// index, a lost or doubled chunk, or a stale value.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#include "core/cublas.h"
#include "gemm/skinny_gemm.h"
#include "prnn/tensor.h"
#include "reference/dense.h"
#include "support/expect.h"
#include "support/random.h"

namespace prnn {
namespace {

using test::Rng;

struct Shape {
  std::int64_t M, N, K;
  bool b_transposed;
  float beta;
  std::int64_t offset = 0;  // floats A and B start past a 256-byte boundary (1: unaligned)
  std::int64_t pad = 0;     // extra floats per row of A, B and C
};

std::string shape_name(const ::testing::TestParamInfo<Shape>& info) {
  const Shape& s = info.param;
  std::ostringstream name;
  name << "M" << s.M << "_N" << s.N << "_K" << s.K << (s.b_transposed ? "_bt" : "_bn");
  if (s.beta != 0.0f) name << "_beta1";
  if (s.offset != 0) name << "_offset" << s.offset;
  if (s.pad != 0) name << "_pad" << s.pad;
  return name.str();
}

// Device copies of one problem, its fp64 reference and the per-element bound.
struct Problem {
  Shape s;
  std::int64_t lda, ldb, ldc, b_rows;
  std::vector<float> a, b, c0;  // host, with their pads
  DeviceBuffer da, db, dc;
  std::vector<double> ref, bound;

  Problem(const Shape& shape, Rng& rng) : s(shape) {
    lda = s.K + s.pad;
    ldb = (s.b_transposed ? s.K : s.N) + s.pad;
    ldc = s.N + s.pad;
    b_rows = s.b_transposed ? s.N : s.K;
    a = rng.uniform<float>(static_cast<std::size_t>(s.M * lda));
    b = rng.uniform<float>(static_cast<std::size_t>(b_rows * ldb));
    c0.assign(static_cast<std::size_t>(s.M * ldc), std::nanf(""));
    if (s.beta != 0.0f)  // the pads stay NaN: they must come back untouched
      for (std::int64_t m = 0; m < s.M; ++m)
        for (std::int64_t n = 0; n < s.N; ++n)
          c0[static_cast<std::size_t>(m * ldc + n)] = static_cast<float>(rng.uniform(1)[0]);
    da = upload(a);
    db = upload(b);
    dc = DeviceBuffer((c0.size() + static_cast<std::size_t>(s.offset)) * sizeof(float));

    const std::vector<double> a64(a.begin(), a.end()), b64(b.begin(), b.end());
    std::vector<double> abs_a(a64.size()), abs_b(b64.size());
    for (std::size_t i = 0; i < a64.size(); ++i) abs_a[i] = std::fabs(a64[i]);
    for (std::size_t i = 0; i < b64.size(); ++i) abs_b[i] = std::fabs(b64[i]);
    ref.assign(c0.begin(), c0.end());
    bound.assign(c0.size(), 0.0);
    std::vector<double> magnitude(c0.size(), 0.0);
    reference::matmul<double>(s.M, s.N, s.K, s.b_transposed, a64.data(), lda, b64.data(), ldb,
                              static_cast<double>(s.beta), ref.data(), ldc);
    reference::matmul<double>(s.M, s.N, s.K, s.b_transposed, abs_a.data(), lda, abs_b.data(), ldb,
                              0.0, magnitude.data(), ldc);
    for (std::int64_t m = 0; m < s.M; ++m)
      for (std::int64_t n = 0; n < s.N; ++n) {
        const auto i = static_cast<std::size_t>(m * ldc + n);
        const double scaled_c = s.beta != 0.0f ? std::fabs(s.beta * c0[i]) : 0.0;
        bound[i] = static_cast<double>(s.K + 9) * std::ldexp(1.0, -24) * (magnitude[i] + scaled_c);
      }
  }

  DeviceBuffer upload(const std::vector<float>& host) const {
    DeviceBuffer d((host.size() + static_cast<std::size_t>(s.offset)) * sizeof(float));
    std::vector<float> shifted(static_cast<std::size_t>(s.offset), 0.0f);
    shifted.insert(shifted.end(), host.begin(), host.end());
    d.copy_from_host(shifted.data(), shifted.size() * sizeof(float));
    return d;
  }
  const float* A() const { return da.data_as<const float>() + s.offset; }
  const float* B() const { return db.data_as<const float>() + s.offset; }
  float* C() const { return dc.data_as<float>() + s.offset; }

  SkinnyGemmArgs args() const {
    return {s.M, s.N, s.K, s.b_transposed, A(), lda, B(), ldb, s.beta, C(), ldc};
  }
  void reset_c() {  // c0 (NaN where beta = 0 and in the pads)
    std::vector<float> shifted(static_cast<std::size_t>(s.offset), 0.0f);
    shifted.insert(shifted.end(), c0.begin(), c0.end());
    dc.copy_from_host(shifted.data(), shifted.size() * sizeof(float));
  }
  std::vector<float> result() const {
    std::vector<float> out(c0.size() + static_cast<std::size_t>(s.offset));
    dc.copy_to_host(out.data(), out.size() * sizeof(float));
    return {out.begin() + s.offset, out.end()};
  }

  // Every element within its bound, every pad still NaN; returns the number of failures.
  int check(const std::vector<float>& c, const std::string& what) const {
    int bad = 0;
    for (std::int64_t m = 0; m < s.M; ++m)
      for (std::int64_t n = 0; n < ldc; ++n) {
        const auto i = static_cast<std::size_t>(m * ldc + n);
        const bool ok = n < s.N ? std::fabs(static_cast<double>(c[i]) - ref[i]) <= bound[i]
                                : std::isnan(c[i]);
        if (!ok && ++bad <= 5)
          ADD_FAILURE() << what << ": C[" << m << ", " << n << "] = " << c[i] << ", reference "
                        << ref[i] << ", bound " << bound[i] << (n >= s.N ? " (a pad)" : "");
      }
    return bad;
  }
};

class SkinnyGemmGpu : public ::testing::TestWithParam<Shape> {};

TEST_P(SkinnyGemmGpu, MatchesReference) {
  Rng rng;
  Problem p(GetParam(), rng);
  p.reset_c();
  skinny_gemm(p.args(), nullptr);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const std::vector<float> first = p.result();
  EXPECT_EQ(p.check(first, "skinny"), 0);
  // The same bits again (no atomics, fixed order).
  p.reset_c();
  skinny_gemm(p.args(), nullptr);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const std::vector<float> second = p.result();
  EXPECT_EQ(std::memcmp(first.data(), second.data(), first.size() * sizeof(float)), 0)
      << "two runs differ";
}

// The dispatch both ways: cuBLAS (Never) and the skinny kernel (Always) meet the same bound.
TEST_P(SkinnyGemmGpu, DispatchMatchesReference) {
  Rng rng;
  Problem p(GetParam(), rng);
  CublasHandle h(GemmMath::Fp32, nullptr);
  for (SkinnyChoice choice : {SkinnyChoice::Never, SkinnyChoice::Always, SkinnyChoice::Auto}) {
    p.reset_c();
    const Shape& s = p.s;
    rows_gemm(h, choice, s.b_transposed, s.M, s.N, s.K, p.A(), p.lda, p.B(), p.ldb, s.beta, p.C(),
              p.ldc);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    EXPECT_EQ(p.check(p.result(), choice == SkinnyChoice::Never    ? "cuBLAS"
                                   : choice == SkinnyChoice::Always ? "skinny"
                                                                    : "auto"),
              0);
  }
}

std::vector<Shape> shapes() {
  std::vector<Shape> v;
  for (bool bt : {true, false}) {
    v.push_back({1, 1, 1, bt, 0.0f});
    v.push_back({3, 5, 7, bt, 0.0f});
    v.push_back({4, 1152, 1152, bt, 0.0f});    // dh0 at B = 4; T = 1, B = 4 input projection
    v.push_back({4, 1152, 1152, bt, 1.0f});    // dh0 added to a carry (beta = 1)
    v.push_back({16, 1000, 1000, bt, 0.0f});   // the last 16-row tile size
    v.push_back({17, 65, 129, bt, 0.0f});      // 32-row tiles, one row and one column past
    v.push_back({32, 1152, 1152, bt, 0.0f});   // T = 8, B = 4: one full 32-row tile
    v.push_back({29, 131, 403, bt, 1.0f});     // 32-row tiles, partial in rows, columns and k
    v.push_back({64, 1152, 1152, bt, 0.0f});   // T = 16, B = 4
    v.push_back({64, 4608, 1152, bt, 0.0f});   // the LSTM's gate rows: more tiles than SMs
    v.push_back({65, 300, 257, bt, 1.0f});
    v.push_back({130, 77, 1537, bt, 0.0f});    // three row tiles, K not a multiple of 4
    v.push_back({7, 2049, 33, bt, 0.0f});      // 33 k: one chunk and one k
    v.push_back({5, 1024, 4096, bt, 0.0f});    // long k: 16 chunks per CTA
    v.push_back({9, 200, 1001, bt, 0.0f, 1, 0});   // unaligned: 4-byte copies
    v.push_back({33, 130, 515, bt, 1.0f, 0, 3});   // padded rows (odd strides): 4-byte copies
    v.push_back({64, 1152, 1152, bt, 0.0f, 0, 4}); // padded rows, 16-byte copies
  }
  return v;
}

INSTANTIATE_TEST_SUITE_P(Shapes, SkinnyGemmGpu, ::testing::ValuesIn(shapes()), shape_name);

// The tile sizes the plan takes: the smallest tile that covers M up to 32 rows; at 33..64 rows
// the 32- or 64-row tile whose CTAs each do fewer products (64 on a tie); 64 rows past that.
TEST(SkinnyGemmGpuPlan, TileRowsFollowTheProductsPerCta) {
  DeviceBuffer buf(64 * sizeof(float));
  const float* d = buf.data_as<float>();
  auto plan = [&](std::int64_t M, std::int64_t N, std::int64_t K, bool bt) {
    return skinny_plan({M, N, K, bt, d, K, d, bt ? K : N, 0.0f, buf.data_as<float>(), N}, 0);
  };
  for (bool bt : {true, false}) {
    EXPECT_EQ(plan(8, 1152, 1152, bt).tile_rows, 8);
    EXPECT_EQ(plan(9, 1152, 1152, bt).tile_rows, 16);
    EXPECT_EQ(plan(17, 1152, 1152, bt).tile_rows, 32);
    EXPECT_EQ(plan(32, 1152, 1152, bt).tile_rows, 32);
    EXPECT_EQ(plan(65, 1152, 1152, bt).tile_rows, 64);
    EXPECT_EQ(plan(130, 1152, 1152, bt).tile_rows, 64);
  }
  // At 64 rows on an H100 / H200 (132 SMs): ReLU H = 1152 (T = 16, B = 4) takes 32-row tiles,
  // 108 CTAs of 32 × 64 × 384 products against 90 of 64 × 64 × 231; the LSTM H = 1024's d(in)
  // (K = 4096) ties at 96 CTAs of 32 × 64 × 1368 and 64 × 64 × 684, and takes 64 rows
  // (bench/gemm/NOTES.md, "32-row tiles").
  auto said = [](const SkinnyPlan& p) {
    return "tile_rows " + std::to_string(p.tile_rows) + ", split " + std::to_string(p.split) +
           ", k_slice " + std::to_string(p.k_slice) + ", ctas " + std::to_string(p.ctas);
  };
  for (bool bt : {true, false}) {
    const SkinnyPlan relu = plan(64, 1152, 1152, bt);
    EXPECT_EQ(relu.tile_rows, 32) << said(relu);
  }
  const SkinnyPlan lstm = plan(64, 1024, 4096, false);
  EXPECT_EQ(lstm.tile_rows, 64) << said(lstm);
}

TEST(SkinnyGemmGpuErrors, RejectsShortStridesEmptySizesAndTooManyTiles) {
  DeviceBuffer buf(64 * sizeof(float));
  float* d = buf.data_as<float>();
  test::expect_invalid(
      [&] { skinny_gemm({2, 3, 4, true, d, 3, d, 4, 0.0f, d, 3}, nullptr); },
      {"skinny_gemm", "lda 3", "K = 4"});
  test::expect_invalid(
      [&] { skinny_gemm({2, 3, 4, false, d, 4, d, 2, 0.0f, d, 3}, nullptr); },
      {"skinny_gemm", "ldb 2", "needs >= 3"});
  test::expect_invalid([&] { skinny_gemm({0, 3, 4, true, d, 4, d, 4, 0.0f, d, 3}, nullptr); },
                       {"skinny_gemm", "M, N, K", "got 0, 3, 4"});
  constexpr std::int64_t kWide = std::int64_t{65536} * 64;  // 65536 column tiles
  test::expect_invalid(
      [&] { skinny_gemm({1, kWide, 4, true, d, 4, d, 4, 0.0f, d, kWide}, nullptr); },
      {"skinny_gemm", "65535 tiles", "N = 4194304"});
}

}  // namespace
}  // namespace prnn
