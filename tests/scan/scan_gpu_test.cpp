// GPU linear scan (serial and parallel) against the CPU reference in double, forward and
// backward, over odd sizes, both layouts, both directions, with and without lengths, in f32,
// f16 and bf16. Outputs are poisoned (0xFF bytes = NaN) before every run, so an element the
// kernel fails to write fails the check.
// Tolerances (relative L2 error vs the reference on the same rounded inputs): f32 1e-5;
// f16/bf16 1e-2 (outputs are rounded to 8 or 11 significant bits when stored).
#include <gtest/gtest.h>

#include <cuda_runtime.h>

#include <optional>
#include <string>

#include "prnn/device.h"
#include "prnn/error.h"
#include "scan/scan_case.h"
#include "support/env.h"

namespace prnn {
namespace {

struct GpuCase {
  std::int64_t T, B, C;
  ScanLayout layout;
  ScanDirection direction;
  bool lengths;
  DType dtype;
  ScanAlgo algo;
  // Offset every tensor by this many elements: 1 leaves no 4-channel vectors; 4 in 16 bits
  // leaves 8-byte vectors but no 16-byte chunks (staged rows fall back to per-thread loads).
  int misalign = 0;
  // PRNN_SCAN_STAGED=1: stage rows wherever the tiling allows, also in these small launches
  // (unset, a launch stages only from 1024 tiles on).
  bool force_staged = false;
  // PRNN_SCAN_PACKED16=1: 8-channel 16-bit vectors wherever the tiling allows, also in these small
  // launches (unset, a launch takes them only from kPacked16MinTiles tiles on).
  bool force_packed = false;
};

std::string name_of(const ::testing::TestParamInfo<GpuCase>& info) {
  const GpuCase& g = info.param;
  return std::string(to_string(g.algo)) + "_" + to_string(g.dtype) + "_T" + std::to_string(g.T) +
         "_B" + std::to_string(g.B) + "_C" + std::to_string(g.C) +
         (g.layout == ScanLayout::TimeMajor ? "_tbc" : "_btc") +
         (g.direction == ScanDirection::Forward ? "_fwd" : "_rev") + (g.lengths ? "_len" : "") +
         (g.misalign != 0 ? "_misaligned" + std::to_string(g.misalign) : "") +
         (g.force_staged ? "_staged" : "") + (g.force_packed ? "_packed" : "");
}

// A device tensor, optionally starting `misalign` elements into its allocation.
struct DevTensor {
  DeviceBuffer buf;
  std::size_t offset = 0;  // bytes
  void* data() const { return static_cast<char*>(buf.data()) + offset; }
};

DevTensor poisoned(std::size_t n, DType dtype, int misalign) {
  const auto extra = static_cast<std::size_t>(misalign);
  DevTensor t{DeviceBuffer((n + extra + 1) * size_of(dtype)), extra * size_of(dtype)};
  t.buf.fill_bytes(0xFF);
  return t;
}

// Device copy of a double host vector in `dtype`.
DevTensor upload(const std::vector<double>& v, DType dtype, int misalign) {
  std::vector<std::uint8_t> tmp(v.size() * size_of(dtype));
  convert(v.data(), DType::F64, tmp.data(), dtype, v.size());
  DevTensor t = poisoned(v.size(), dtype, misalign);
  std::vector<std::uint8_t> all(t.buf.bytes(), 0xFF);
  std::copy(tmp.begin(), tmp.end(), all.begin() + static_cast<std::ptrdiff_t>(t.offset));
  t.buf.copy_from_host(all.data(), all.size());
  return t;
}

std::vector<double> download(const DevTensor& t, DType dtype, std::size_t n) {
  std::vector<std::uint8_t> all(t.buf.bytes());
  t.buf.copy_to_host(all.data(), all.size());
  std::vector<double> out(n);
  convert(all.data() + t.offset, dtype, out.data(), DType::F64, n);
  return out;
}

class ScanGpu : public ::testing::TestWithParam<GpuCase> {};

TEST_P(ScanGpu, MatchesReference) {
  ASSERT_GT(device_count(), 0) << "no GPU: " << no_device_reason();
  const GpuCase g = GetParam();
  const double tol = g.dtype == DType::F32 ? 1e-5 : 1e-2;
  test::Rng rng;
  test::ScanCase sc;
  sc.desc = ScanDesc{g.T, g.B, g.C, g.layout, g.direction, g.dtype, Device::cuda(0)};
  sc.with_lengths = g.lengths;
  const test::ScanData s = test::make_scan_data(sc, rng, g.dtype);
  const auto n = s.a.size(), ns = s.h0.size();
  const Shape seq = sc.desc.sequence_shape(), st = sc.desc.state_shape();
  const Device dev = Device::cuda(0);

  LinearScan scan = [&] {  // the knobs set while the scan is built (it reads them then)
    std::optional<test::EnvScope> staged, packed;
    if (g.force_staged) staged.emplace("PRNN_SCAN_STAGED", "1");
    if (g.force_packed) packed.emplace("PRNN_SCAN_PACKED16", "1");
    return LinearScan(sc.desc, g.algo);
  }();
  ASSERT_EQ(scan.algo(), g.algo);
  const int mis = g.misalign;
  DevTensor a = upload(s.a, g.dtype, mis), x = upload(s.x, g.dtype, mis);
  DevTensor h0 = upload(s.h0, g.dtype, mis);
  DevTensor h = poisoned(n, g.dtype, mis), hf = poisoned(ns, g.dtype, mis);
  DeviceBuffer lengths(std::max<std::size_t>(s.lengths.size() * 4, 4));
  if (g.lengths) lengths.copy_from_host(s.lengths.data(), s.lengths.size() * 4);

  ScanForwardArgs f;
  f.a = TensorView(a.data(), g.dtype, seq, dev);
  f.x = TensorView(x.data(), g.dtype, seq, dev);
  f.h0 = TensorView(h0.data(), g.dtype, st, dev);
  f.lengths = g.lengths ? lengths.data_as<std::int32_t>() : nullptr;
  f.h = TensorView(h.data(), g.dtype, seq, dev);
  f.h_final = TensorView(hf.data(), g.dtype, st, dev);
  // Run twice: the second run reuses the workspace with a new epoch and must agree bit for bit.
  scan.forward(f);
  scan.check();
  const auto h_first = download(h, g.dtype, n);
  scan.forward(f);
  scan.check();
  const auto h_got = download(h, g.dtype, n);
  EXPECT_LE(test::rel_error(h_got, s.h), tol) << "h";
  EXPECT_LE(test::rel_error(download(hf, g.dtype, ns), s.h_final), tol) << "h_final";
  EXPECT_EQ(h_first, h_got) << "two runs differ: the scan must be deterministic";

  // Backward reads the reference h (rounded to dtype), so it is tested on its own.
  DevTensor href = upload(s.h, g.dtype, mis), dh = upload(s.dh, g.dtype, mis);
  DevTensor dhf = upload(s.dh_final, g.dtype, mis);
  DevTensor da = poisoned(n, g.dtype, mis), dx = poisoned(n, g.dtype, mis);
  DevTensor dh0 = poisoned(ns, g.dtype, mis);
  ScanBackwardArgs bw;
  bw.a = f.a;
  bw.h = TensorView(href.data(), g.dtype, seq, dev);
  bw.h0 = f.h0;
  bw.lengths = f.lengths;
  bw.dh = TensorView(dh.data(), g.dtype, seq, dev);
  bw.dh_final = TensorView(dhf.data(), g.dtype, st, dev);
  bw.da = TensorView(da.data(), g.dtype, seq, dev);
  bw.dx = TensorView(dx.data(), g.dtype, seq, dev);
  bw.dh0 = TensorView(dh0.data(), g.dtype, st, dev);
  scan.backward(bw);
  scan.check();
  EXPECT_LE(test::rel_error(download(dx, g.dtype, n), s.dx), tol) << "dx";
  EXPECT_LE(test::rel_error(download(da, g.dtype, n), s.da), tol) << "da";
  EXPECT_LE(test::rel_error(download(dh0, g.dtype, ns), s.dh0), tol) << "dh0";
}

std::vector<GpuCase> cases() {
  std::vector<GpuCase> v;
  const auto tbc = ScanLayout::TimeMajor, btc = ScanLayout::BatchMajor;
  const auto fwd = ScanDirection::Forward, rev = ScanDirection::Reverse;
  for (ScanAlgo algo : {ScanAlgo::Parallel, ScanAlgo::Serial}) {
    // odd sizes in f32, every channel width class (W = 1, 2, 4, 8, 16, 32 and partial blocks)
    for (std::int64_t C : {1, 2, 3, 5, 9, 17, 32, 33, 130})
      for (std::int64_t T : {1, 2, 333})
        v.push_back({T, 3, C, tbc, fwd, false, DType::F32, algo});
    v.push_back({4101, 1, 4, btc, rev, false, DType::F32, algo});
    v.push_back({333, 5, 7, btc, fwd, true, DType::F32, algo});
    v.push_back({333, 5, 7, tbc, rev, true, DType::F32, algo});
    v.push_back({1000, 7, 33, btc, rev, true, DType::F32, algo});
    for (DType dt : {DType::F16, DType::BF16}) {
      v.push_back({333, 3, 5, tbc, fwd, false, dt, algo});
      v.push_back({2049, 2, 130, btc, rev, true, dt, algo});
    }
  }
  // 4-channel vectors (C % 4 == 0): every threads-per-row class, lengths, reverse, 16-bit, and the
  // same shapes misaligned (scalar fallback)
  for (std::int64_t C : {4, 8, 16, 32, 64, 128, 256})
    v.push_back({333, 2, C, tbc, fwd, false, DType::F32, ScanAlgo::Parallel});
  v.push_back({1000, 2, 128, btc, rev, true, DType::F32, ScanAlgo::Parallel});
  v.push_back({4099, 3, 4, tbc, rev, true, DType::F32, ScanAlgo::Parallel});
  v.push_back({2049, 2, 64, tbc, fwd, true, DType::BF16, ScanAlgo::Parallel});
  v.push_back({2049, 2, 8, btc, rev, false, DType::F16, ScanAlgo::Parallel});
  v.push_back({1000, 2, 128, btc, rev, true, DType::F32, ScanAlgo::Parallel, 1});
  v.push_back({333, 3, 4, tbc, fwd, false, DType::BF16, ScanAlgo::Parallel, 1});
  // 16-bit tensors with 4-channel vectors at more widths, lengths, reverse
  v.push_back({333, 3, 16, tbc, rev, true, DType::F16, ScanAlgo::Parallel});
  v.push_back({1000, 2, 24, btc, fwd, true, DType::BF16, ScanAlgo::Parallel});
  v.push_back({1031, 3, 32, btc, rev, true, DType::BF16, ScanAlgo::Parallel});
  // staged fp32 rows (C = 4, B = 1 or batch-major): lengths, reverse, several tiles; and the
  // same C = 4 shapes where rows are not contiguous (time-major, B > 1) or misaligned
  v.push_back({4099, 1, 4, tbc, fwd, true, DType::F32, ScanAlgo::Parallel});
  v.push_back({3001, 3, 4, btc, rev, true, DType::F32, ScanAlgo::Parallel});
  v.push_back({70001, 1, 4, tbc, rev, false, DType::F32, ScanAlgo::Parallel});
  v.push_back({3001, 3, 4, tbc, fwd, true, DType::F32, ScanAlgo::Parallel});
  v.push_back({4101, 1, 4, tbc, fwd, true, DType::F32, ScanAlgo::Parallel, 1});
  // staged fp32 rows at C = 8 (two threads per row, dynamic shared memory; contiguous rows: batch 1
  // or batch-major): reverse, lengths, several tiles; time-major at B > 1 and misaligned (the
  // register and scalar forms); as the launch picks at few tiles (the register form); and staged
  // by the launch itself (4097 tiles, 3 lookback levels)
  v.push_back({4099, 1, 8, tbc, rev, true, DType::F32, ScanAlgo::Parallel, 0, true});
  v.push_back({3001, 3, 8, btc, fwd, true, DType::F32, ScanAlgo::Parallel, 0, true});
  v.push_back({2051, 3, 8, tbc, fwd, false, DType::F32, ScanAlgo::Parallel, 0, true});
  v.push_back({300007, 1, 8, tbc, fwd, false, DType::F32, ScanAlgo::Parallel, 0, true});
  v.push_back({2049, 2, 8, btc, rev, true, DType::F32, ScanAlgo::Parallel, 1, true});
  v.push_back({3001, 3, 8, btc, fwd, true, DType::F32, ScanAlgo::Parallel});
  v.push_back({4194307, 1, 8, tbc, fwd, false, DType::F32, ScanAlgo::Parallel});
  // staged 16-bit rows (C % 8 == 0; forward through shared memory at 2, 4 and 8 threads per row):
  // several tiles, both layouts, reverse, lengths, a partial lane block (C = 40: the second block
  // of 32 channels holds 8, per-thread copies), the 2-level lookback; and 16-bit tensors aligned
  // to 8 bytes but not 16 (per-thread register form)
  v.push_back({4099, 1, 8, tbc, rev, true, DType::BF16, ScanAlgo::Parallel, 0, true});
  v.push_back({3001, 3, 40, tbc, fwd, true, DType::F16, ScanAlgo::Parallel, 0, true});
  v.push_back({2051, 3, 16, btc, rev, true, DType::BF16, ScanAlgo::Parallel, 0, true});
  v.push_back({300007, 1, 16, btc, rev, false, DType::BF16, ScanAlgo::Parallel, 0, true});
  v.push_back({2049, 2, 64, btc, rev, true, DType::BF16, ScanAlgo::Parallel, 4, true});
  v.push_back({2049, 2, 16, tbc, fwd, true, DType::F16, ScanAlgo::Parallel, 4, true});
  // staged 16-bit rows at 8 threads per row, whose chunks come in by cp.async (4 CTAs per SM;
  // where 8-channel vectors are allowed, only with PRNN_SCAN_STAGED=1 or PRNN_SCAN_PACKED16=0):
  // three whole lane blocks in both layouts, reverse, lengths; and 1026 tiles
  v.push_back({2051, 3, 96, tbc, fwd, true, DType::BF16, ScanAlgo::Parallel, 0, true});
  v.push_back({2051, 3, 96, btc, rev, true, DType::F16, ScanAlgo::Parallel, 0, true});
  v.push_back({131075, 1, 64, tbc, fwd, false, DType::BF16, ScanAlgo::Parallel, 0, true});
  // 8-channel 16-bit vectors held raw in registers (the forward at C % 8 == 0, C >= 32, 16-byte
  // aligned tensors): whole and partial lane blocks (C = 72: the third block of 32 holds 8), both
  // layouts, reverse, lengths, a 2-level lookback (257 time tiles of 512 steps); taken by the
  // launch itself (1026 tiles); and tensors aligned to 8 bytes only (4-channel vectors)
  v.push_back({2049, 2, 64, btc, rev, true, DType::BF16, ScanAlgo::Parallel, 0, false, true});
  v.push_back({3001, 3, 72, tbc, fwd, true, DType::F16, ScanAlgo::Parallel, 0, false, true});
  v.push_back({2051, 3, 96, btc, fwd, false, DType::BF16, ScanAlgo::Parallel, 0, false, true});
  v.push_back({131075, 1, 64, btc, rev, true, DType::F16, ScanAlgo::Parallel, 0, false, true});
  v.push_back({262147, 1, 64, tbc, fwd, false, DType::BF16, ScanAlgo::Parallel});
  // ... at C = 32..56: lane blocks of 16 channels (two threads per row)
  v.push_back({2051, 3, 32, tbc, fwd, false, DType::BF16, ScanAlgo::Parallel, 0, false, true});
  v.push_back({2049, 2, 56, btc, rev, true, DType::F16, ScanAlgo::Parallel, 0, false, true});
  v.push_back({131075, 1, 40, btc, fwd, true, DType::BF16, ScanAlgo::Parallel, 0, false, true});
  v.push_back({524291, 1, 32, tbc, rev, false, DType::BF16, ScanAlgo::Parallel});  // 1026 tiles
  v.push_back({2049, 2, 64, tbc, fwd, true, DType::BF16, ScanAlgo::Parallel, 4, false, true});
  // the same shapes as the launch picks (few tiles: the register form)
  v.push_back({3001, 3, 40, tbc, fwd, true, DType::F16, ScanAlgo::Parallel});
  v.push_back({300007, 1, 16, btc, rev, false, DType::BF16, ScanAlgo::Parallel});
  // multi-level lookback: 2 levels (C=1: 2048 steps per tile), 3 levels (C=33: 64 steps;
  // C=32 vectorized: 256 steps forward, 128 backward)
  v.push_back({300007, 1, 32, btc, fwd, true, DType::F32, ScanAlgo::Parallel});
  v.push_back({(1 << 20) + 3, 1, 1, tbc, fwd, false, DType::F32, ScanAlgo::Parallel});
  v.push_back({200003, 1, 33, tbc, rev, false, DType::F32, ScanAlgo::Parallel});
  v.push_back({150001, 2, 4, btc, fwd, true, DType::F32, ScanAlgo::Parallel});
  v.push_back({1200007, 1, 4, tbc, fwd, true, DType::F32, ScanAlgo::Parallel});
  return v;
}

INSTANTIATE_TEST_SUITE_P(Shapes, ScanGpu, ::testing::ValuesIn(cases()), name_of);

TEST(ScanGpuErrors, BadLengthIsReportedNotIgnored) {
  ASSERT_GT(device_count(), 0) << "no GPU: " << no_device_reason();
  const ScanDesc d{10, 2, 3, ScanLayout::TimeMajor, ScanDirection::Forward, DType::F32,
                   Device::cuda(0)};
  for (ScanAlgo algo : {ScanAlgo::Parallel, ScanAlgo::Serial}) {
    LinearScan scan(d, algo);
    DeviceBuffer a(60 * 4), x(60 * 4), h(60 * 4), lengths(8);
    a.fill_bytes(0);
    x.fill_bytes(0);
    const std::int32_t bad[2] = {3, 11};
    lengths.copy_from_host(bad, sizeof(bad));
    ScanForwardArgs f;
    f.a = a.view(DType::F32, {10, 2, 3});
    f.x = x.view(DType::F32, {10, 2, 3});
    f.h = h.view(DType::F32, {10, 2, 3});
    f.lengths = lengths.data_as<std::int32_t>();
    scan.forward(f);
    EXPECT_THROW(scan.check(), RuntimeError) << to_string(algo);
    scan.check();  // the status was cleared by the report
  }
}

// A malformed PRNN_SCAN_STAGED is an InvalidArgument naming the knob and the value.
TEST(ScanGpuErrors, MalformedStagedKnobIsRejected) {
  ASSERT_GT(device_count(), 0) << "no GPU: " << no_device_reason();
  const ScanDesc d{4096, 1, 64, ScanLayout::TimeMajor, ScanDirection::Forward, DType::BF16,
                   Device::cuda(0)};
  const test::EnvScope knob("PRNN_SCAN_STAGED", "yes");
  try {
    LinearScan scan(d, ScanAlgo::Parallel);
    ADD_FAILURE() << "PRNN_SCAN_STAGED=yes was accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("PRNN_SCAN_STAGED: expected 0 or 1, got 'yes'"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace prnn

namespace prnn {
namespace {

// A CUDA graph of one forward call, replayed with fresh inputs each time, matches the
// reference every time: each launch carries its own state (epoch, tile counter), so replays
// never see records of an earlier replay.
TEST(ScanGpuGraph, ReplaysAreIndependent) {
  ASSERT_GT(device_count(), 0) << "no GPU: " << no_device_reason();
  test::Rng rng;
  test::ScanCase sc;
  sc.desc = ScanDesc{70001, 2, 36, ScanLayout::TimeMajor, ScanDirection::Forward, DType::F32,
                     Device::cuda(0)};
  const Shape seq = sc.desc.sequence_shape(), st = sc.desc.state_shape();
  const auto n = static_cast<std::size_t>(seq.numel());
  LinearScan scan(sc.desc, ScanAlgo::Parallel);
  DeviceBuffer a(n * 4), x(n * 4), h(n * 4), h0(static_cast<std::size_t>(st.numel()) * 4);
  ScanForwardArgs f;
  f.a = a.view(DType::F32, seq);
  f.x = x.view(DType::F32, seq);
  f.h0 = h0.view(DType::F32, st);
  f.h = h.view(DType::F32, seq);
  cudaStream_t stream;
  ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
  cudaGraph_t graph;
  ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  scan.forward(f, stream);
  ASSERT_EQ(cudaStreamEndCapture(stream, &graph), cudaSuccess);
  cudaGraphExec_t exec;
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  for (int replay = 0; replay < 3; ++replay) {
    const test::ScanData s = test::make_scan_data(sc, rng, DType::F32);
    const std::vector<float> af(s.a.begin(), s.a.end()), xf(s.x.begin(), s.x.end());
    const std::vector<float> h0f(s.h0.begin(), s.h0.end());
    a.copy_from_host(af.data(), n * 4);
    x.copy_from_host(xf.data(), n * 4);
    h0.copy_from_host(h0f.data(), h0f.size() * 4);
    h.fill_bytes(0xFF);
    ASSERT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess);
    scan.check(stream);
    std::vector<float> got(n);
    h.copy_to_host(got.data(), n * 4);
    EXPECT_LE(test::rel_error(got, s.h), 1e-5) << "replay " << replay;
  }
  EXPECT_EQ(cudaGraphExecDestroy(exec), cudaSuccess);
  EXPECT_EQ(cudaGraphDestroy(graph), cudaSuccess);
  EXPECT_EQ(cudaStreamDestroy(stream), cudaSuccess);
}

}  // namespace
}  // namespace prnn

namespace prnn {
namespace {

// Auto: the serial scan when lanes alone keep memory busy, the parallel scan otherwise; the
// choice is reported.
TEST(ScanGpuAuto, PicksByLaneCount) {
  ASSERT_GT(device_count(), 0) << "no GPU: " << no_device_reason();
  const LinearScan few(ScanDesc{4096, 1, 64, ScanLayout::TimeMajor, ScanDirection::Forward,
                                DType::F32, Device::cuda(0)});
  EXPECT_EQ(few.algo(), ScanAlgo::Parallel) << few.reason();
  const LinearScan many(ScanDesc{16, 512, 1024, ScanLayout::TimeMajor, ScanDirection::Forward,
                                 DType::F32, Device::cuda(0)});
  EXPECT_EQ(many.algo(), ScanAlgo::Serial) << many.reason();
  EXPECT_NE(many.reason().find("524288 lanes"), std::string::npos) << many.reason();
}

}  // namespace
}  // namespace prnn
