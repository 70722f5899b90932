// LinearScan on host tensors (the CPU path): layouts, reverse direction and lengths are mapped
// onto the reference correctly, checked against the recurrence written out in the test; and
// bad arguments are rejected with messages naming expected and given.
#include <gtest/gtest.h>

#include <tuple>
#include <utility>

#include "prnn/error.h"
#include "scan/scan_case.h"
#include "support/expect.h"

#if PRNN_WITH_CUDA
#include "scan/scan_kernels.h"
#endif

namespace prnn {
namespace {

using test::invalid_message;

struct LayoutCase {
  ScanLayout layout;
  ScanDirection direction;
  bool lengths;
};

class ScanCpuMapping : public ::testing::TestWithParam<LayoutCase> {};

// Exact in double: the test's loop performs the same operations in the same order.
TEST_P(ScanCpuMapping, MatchesTheRecurrenceWrittenOut) {
  const auto [layout, direction, use_lengths] = GetParam();
  test::Rng rng;
  test::ScanCase sc;
  sc.desc = ScanDesc{7, 3, 5, layout, direction, DType::F64, Device::host()};
  sc.with_lengths = use_lengths;
  const auto s = test::make_scan_data(sc, rng);
  const auto& d = sc.desc;
  auto at = [&](std::int64_t t, std::int64_t b, std::int64_t c) {
    return static_cast<std::size_t>(layout == ScanLayout::TimeMajor
                                        ? (t * d.batch + b) * d.channels + c
                                        : (b * d.steps + t) * d.channels + c);
  };
  for (std::int64_t b = 0; b < d.batch; ++b) {
    const std::int64_t len = use_lengths ? s.lengths[static_cast<std::size_t>(b)] : d.steps;
    for (std::int64_t c = 0; c < d.channels; ++c) {
      const auto sidx = static_cast<std::size_t>(b * d.channels + c);
      // forward
      double h = s.h0[sidx];
      for (std::int64_t k = 0; k < len; ++k) {
        const std::int64_t t = direction == ScanDirection::Forward ? k : len - 1 - k;
        h = s.a[at(t, b, c)] * h + s.x[at(t, b, c)];
        ASSERT_EQ(s.h[at(t, b, c)], h) << "b=" << b << " c=" << c << " t=" << t;
      }
      EXPECT_EQ(s.h_final[sidx], h);
      for (std::int64_t t = len; t < d.steps; ++t) {
        const std::int64_t pt = t;  // padding: physical steps len..T-1 are zero either way
        EXPECT_EQ(s.h[at(pt, b, c)], 0.0);
        EXPECT_EQ(s.dx[at(pt, b, c)], 0.0);
        EXPECT_EQ(s.da[at(pt, b, c)], 0.0);
      }
      // backward, in reverse of the forward order
      double g = s.dh_final[sidx];
      double next_a = 1.0;
      for (std::int64_t k = len - 1; k >= 0; --k) {
        const std::int64_t t = direction == ScanDirection::Forward ? k : len - 1 - k;
        g = next_a * g + s.dh[at(t, b, c)];
        EXPECT_NEAR(s.dx[at(t, b, c)], g, 1e-12);
        const std::int64_t tp = direction == ScanDirection::Forward ? t - 1 : t + 1;
        const double hprev = k == 0 ? s.h0[sidx] : s.h[at(tp, b, c)];
        EXPECT_NEAR(s.da[at(t, b, c)], g * hprev, 1e-12);
        next_a = s.a[at(t, b, c)];
      }
      EXPECT_NEAR(s.dh0[sidx], len > 0 ? next_a * g : s.dh_final[sidx], 1e-12);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Layouts, ScanCpuMapping,
    ::testing::Values(LayoutCase{ScanLayout::TimeMajor, ScanDirection::Forward, false},
                      LayoutCase{ScanLayout::BatchMajor, ScanDirection::Forward, false},
                      LayoutCase{ScanLayout::TimeMajor, ScanDirection::Reverse, false},
                      LayoutCase{ScanLayout::BatchMajor, ScanDirection::Reverse, true},
                      LayoutCase{ScanLayout::TimeMajor, ScanDirection::Forward, true},
                      LayoutCase{ScanLayout::TimeMajor, ScanDirection::Reverse, true}));

TEST(ScanCpu, RejectsBadArguments) {
  const ScanDesc d{4, 2, 3, ScanLayout::TimeMajor, ScanDirection::Forward, DType::F32,
                   Device::host()};
  LinearScan scan(d);
  EXPECT_EQ(scan.algo(), ScanAlgo::Reference);
  std::vector<float> a(24), x(24), h(24), wrong(20);
  std::vector<double> as_double(24);
  ScanForwardArgs f;
  f.a = TensorView::of(a.data(), {4, 2, 3});
  f.x = TensorView::of(x.data(), {4, 2, 3});
  f.h = TensorView::of(h.data(), {4, 2, 3});
  EXPECT_NO_THROW(scan.forward(f));

  auto bad = f;
  bad.x = TensorView::of(wrong.data(), {4, 5, 1});
  EXPECT_EQ(invalid_message([&] { scan.forward(bad); }), "x: expected shape [4, 2, 3], got [4, 5, 1]");
  bad = f;
  bad.a = TensorView::of(as_double.data(), {4, 2, 3});
  EXPECT_EQ(invalid_message([&] { scan.forward(bad); }), "a: expected dtype f32, got f64");
  bad = f;
  bad.h = TensorView(nullptr, DType::F32, {4, 2, 3});
  EXPECT_EQ(invalid_message([&] { scan.forward(bad); }), "h: expected a non-null pointer, got null");
  bad = f;
  bad.x = TensorView(x.data(), DType::F32, {4, 2, 3}, Device::cuda(0));
  EXPECT_EQ(invalid_message([&] { scan.forward(bad); }), "x: expected memory on host, got cuda:0");
  bad = f;
  std::vector<float> h0(6);
  bad.h0 = TensorView::of(h0.data(), {3, 2});
  EXPECT_EQ(invalid_message([&] { scan.forward(bad); }), "h0: expected shape [2, 3], got [3, 2]");
  bad = f;
  const std::int32_t lengths[2] = {4, 5};
  bad.lengths = lengths;
  EXPECT_EQ(invalid_message([&] { scan.forward(bad); }), "lengths[1]: expected a value in [0, 4], got 5");

  EXPECT_EQ(invalid_message([&] { LinearScan(ScanDesc{0, 1, 1}); }),
            "ScanDesc.steps: expected >= 1, got 0");
  EXPECT_THROW(LinearScan(d, ScanAlgo::Parallel), Unsupported);
  ScanDesc half = d;
  half.dtype = DType::BF16;
  EXPECT_FALSE(LinearScan::can_implement(half, ScanAlgo::Reference).empty());
  EXPECT_THROW(parse_scan_algo("fast"), InvalidArgument);
}

#if PRNN_WITH_CUDA
// Which parallel tilings stage their rows through shared memory (host-side choice; the staged
// kernels' results are checked in scan_gpu_test): the forward pass over 16-bit tensors with
// C % 8 == 0 in either layout, and over fp32 with contiguous rows at C = 4 and, from 2048 tiles, at
// C = 8 (two threads per row); nothing else.
TEST(ScanTiling, StagesRowsWhereStepsAreWholeChunks) {
  using scan::Mode;
  using scan::parallel_tiling;
  for (std::int64_t c : {8, 16, 40, 1024}) {
    for (bool contiguous : {false, true}) {
      const scan::ParallelTiling t = parallel_tiling(Mode::Forward, c, 4, 2, contiguous);
      EXPECT_TRUE(t.staged) << "C = " << c;
      EXPECT_EQ(t.tile_steps, 256 / t.threads_per_row * 8) << "C = " << c;
    }
  }
  EXPECT_EQ(parallel_tiling(Mode::Forward, 8, 4, 2).threads_per_row, 2);
  EXPECT_EQ(parallel_tiling(Mode::Forward, 1024, 4, 2).threads_per_row, 8);
  EXPECT_FALSE(parallel_tiling(Mode::Forward, 12, 4, 2, true).staged);  // C % 8 != 0
  EXPECT_FALSE(parallel_tiling(Mode::Forward, 4, 4, 2, true).staged);   // 8-byte steps
  EXPECT_FALSE(parallel_tiling(Mode::Backward, 1024, 4, 2, true).staged);
  EXPECT_FALSE(parallel_tiling(Mode::Forward, 1024, 1, 2, true).staged);  // scalar lanes
  EXPECT_TRUE(parallel_tiling(Mode::Forward, 4, 4, 4, true).staged);
  EXPECT_FALSE(parallel_tiling(Mode::Forward, 4, 4, 4, false).staged);
  const scan::ParallelTiling pair = parallel_tiling(Mode::Forward, 8, 4, 4, true);
  EXPECT_TRUE(pair.staged);
  EXPECT_EQ(pair.threads_per_row, 2);
  EXPECT_EQ(pair.tile_steps, 128 * 8);
  EXPECT_EQ(pair.staged_min_tiles, 2048);
  EXPECT_EQ(parallel_tiling(Mode::Forward, 4, 4, 4, true).staged_min_tiles, 1024);
  EXPECT_FALSE(parallel_tiling(Mode::Forward, 8, 4, 4, false).staged);  // rows not contiguous
  for (std::int64_t c : {12, 16, 32, 128, 1024})  // two lane blocks, or 4-8 threads per row
    EXPECT_FALSE(parallel_tiling(Mode::Forward, c, 4, 4, true).staged) << "C = " << c;
  EXPECT_FALSE(parallel_tiling(Mode::Backward, 8, 4, 4, true).staged);
  EXPECT_FALSE(parallel_tiling(Mode::Backward, 4, 4, 4, true).staged);
}

// 8-channel 16-bit vectors (held raw in registers): the forward at C >= 32 with C % 8 == 0 where
// the tensors allow them, 4 threads per row from C = 64 (lane blocks of 32 channels) and 2 at
// C = 32..56 (16), 16384 elements a tile, not staged; anywhere else the 4-channel tilings.
TEST(ScanTiling, TakesEightChannelVectorsForThe16BitForward) {
  using scan::Mode;
  using scan::parallel_tiling;
  for (std::int64_t c : {64, 72, 96, 1024, 8192}) {
    for (bool contiguous : {false, true}) {
      const scan::ParallelTiling t = parallel_tiling(Mode::Forward, c, 8, 2, contiguous);
      EXPECT_EQ(t.vector, 8) << "C = " << c;
      EXPECT_EQ(t.threads_per_row, 4) << "C = " << c;
      EXPECT_EQ(t.lane_width, 32) << "C = " << c;
      EXPECT_EQ(t.tile_steps, 512) << "C = " << c;
      EXPECT_FALSE(t.staged) << "C = " << c;
    }
  }
  for (std::int64_t c : {32, 40, 48, 56}) {  // two lane blocks or more, of 16 channels
    const scan::ParallelTiling t = parallel_tiling(Mode::Forward, c, 8, 2);
    EXPECT_EQ(t.vector, 8) << "C = " << c;
    EXPECT_EQ(t.threads_per_row, 2) << "C = " << c;
    EXPECT_EQ(t.lane_width, 16) << "C = " << c;
    EXPECT_EQ(t.tile_steps, 1024) << "C = " << c;
  }
  EXPECT_EQ(parallel_tiling(Mode::Forward, 16, 8, 2).vector, 4);  // lane blocks of 8: slower
  EXPECT_EQ(parallel_tiling(Mode::Forward, 24, 8, 2).vector, 4);
  EXPECT_EQ(parallel_tiling(Mode::Forward, 1028, 8, 2).vector, 4);   // C % 8 != 0
  EXPECT_EQ(parallel_tiling(Mode::Forward, 1024, 8, 4).vector, 4);   // fp32
  EXPECT_EQ(parallel_tiling(Mode::Backward, 1024, 8, 2).vector, 4);  // forward only
  const scan::ParallelTiling narrow = parallel_tiling(Mode::Forward, 1024, 4, 2, true);
  EXPECT_EQ(narrow.vector, 4);  // 8-byte alignment: 4-channel vectors, staged
  EXPECT_TRUE(narrow.staged);
}

// Lane blocks of 4-channel vectors: up to 8 threads per row (32 channels), but a row that one
// block would hold whole from 12 channels on is split in two blocks (two lookback chains).
TEST(ScanTiling, SplitsARowThatOneLaneBlockWouldHold) {
  using scan::Mode;
  using scan::parallel_tiling;
  const std::pair<std::int64_t, int> expected[] = {{4, 1},  {8, 2},  {12, 2},  {16, 2},
                                                   {20, 4}, {32, 4}, {36, 8},  {64, 8},
                                                   {128, 8}, {1024, 8}};
  for (Mode m : {Mode::Forward, Mode::Backward}) {
    for (const auto& [c, tpr] : expected) {
      const scan::ParallelTiling t = parallel_tiling(m, c, 4);
      EXPECT_EQ(t.threads_per_row, tpr) << "C = " << c;
      EXPECT_EQ(t.lane_width, 4 * tpr) << "C = " << c;
    }
  }
  // Scalar lanes (C % 4 != 0) are not split: 1 channel per thread, up to 32 per row.
  EXPECT_EQ(parallel_tiling(Mode::Forward, 31, 1).threads_per_row, 32);
  EXPECT_EQ(parallel_tiling(Mode::Forward, 5, 1).threads_per_row, 8);
}

// Tile lengths (256 threads a tile): 8 steps per thread for 4-channel vectors in the forward at 2+
// threads per row and in the backward at 2 or 4 (C = 5..32), 4 steps otherwise; scalars 8.
TEST(ScanTiling, StepsPerTileByPassAndWidth) {
  using scan::Mode;
  using scan::parallel_tiling;
  const std::tuple<std::int64_t, int, int> expected[] = {  // C, forward, backward steps
      {4, 4 * 256, 4 * 256},   {8, 8 * 128, 8 * 128},   {16, 8 * 128, 8 * 128},
      {32, 8 * 64, 8 * 64},    {36, 8 * 32, 4 * 32},    {1024, 8 * 32, 4 * 32}};
  for (const auto& [c, fwd, bwd] : expected) {
    EXPECT_EQ(parallel_tiling(Mode::Forward, c, 4).tile_steps, fwd) << "C = " << c;
    EXPECT_EQ(parallel_tiling(Mode::Backward, c, 4).tile_steps, bwd) << "C = " << c;
  }
  EXPECT_EQ(parallel_tiling(Mode::Backward, 31, 1).tile_steps, 8 * 8);
}
#endif

}  // namespace
}  // namespace prnn
