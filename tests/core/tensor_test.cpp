// Tensor views, argument checks and the error tiers.
#include "prnn/tensor.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "prnn/error.h"
#include "prnn/log.h"
#include "support/expect.h"

namespace prnn {
namespace {

using test::invalid_message;

TEST(Tensor, ContiguousViewHasRowMajorStrides) {
  std::vector<float> v(2 * 3 * 5);
  const auto t = TensorView::of(v.data(), {2, 3, 5});
  EXPECT_EQ(t.rank(), 3);
  EXPECT_EQ(t.numel(), 30);
  EXPECT_EQ(t.stride(0), 15);
  EXPECT_EQ(t.stride(1), 5);
  EXPECT_EQ(t.stride(2), 1);
  EXPECT_TRUE(t.is_contiguous());
  EXPECT_EQ(t.dtype(), DType::F32);
  EXPECT_EQ(t.device(), Device::host());
  const TensorView transposed(v.data(), DType::F32, {5, 3, 2}, {1, 5, 15}, Device::host());
  EXPECT_FALSE(transposed.is_contiguous());
}

TEST(Tensor, ChecksNameExpectedAndGiven) {
  std::vector<float> v(12);
  const auto t = TensorView::of(v.data(), {3, 4});
  EXPECT_NO_THROW(check_shape(t, "x", {3, 4}));
  EXPECT_EQ(invalid_message([&] {
              check_shape(t, "x", {3, 5});
            }),
            "x: expected shape [3, 5], got [3, 4]");
  EXPECT_EQ(invalid_message([&] { check_dtype(t, "x", DType::BF16); }),
            "x: expected dtype bf16, got f32");
  EXPECT_EQ(invalid_message([&] { check_device(t, "x", Device::cuda(0)); }),
            "x: expected memory on cuda:0, got host");
  const TensorView null_view(nullptr, DType::F32, {3, 4});
  EXPECT_EQ(invalid_message([&] { check_not_null(null_view, "h0"); }),
            "h0: expected a non-null pointer, got null");
  EXPECT_EQ(invalid_message([&] { check_positive(0, "steps"); }),
            "steps: expected a value >= 1, got 0");
  const TensorView strided(v.data(), DType::F32, {4, 3}, {1, 4}, Device::host());
  EXPECT_NE(invalid_message([&] { check_contiguous(strided, "a"); }).find("expected a contiguous"),
            std::string::npos);
  EXPECT_THROW(TensorView(v.data(), DType::F32, {-1, 2}), InvalidArgument);
  EXPECT_THROW((Shape{1, 2, 3, 4, 5, 6, 7}), InvalidArgument);
}

TEST(Errors, TiersAreDistinguishable) {
  const RuntimeError r("cudaMalloc(&p, n)", "out of memory", "buffer.cpp", 12);
  EXPECT_EQ(std::string(r.what()), "buffer.cpp:12: cudaMalloc(&p, n) failed: out of memory");
  EXPECT_EQ(r.call(), "cudaMalloc(&p, n)");
  EXPECT_EQ(r.line(), 12);
  const Unsupported u("LSTM H=3000 bf16", "needs 24.0 MB on chip");
  EXPECT_EQ(u.reason(), "needs 24.0 MB on chip");
  const Error& as_base = u;
  EXPECT_NE(std::string(as_base.what()).find("LSTM H=3000"), std::string::npos);
}

TEST(Log, SinkReceivesMessagesAtOrAboveLevel) {
  std::vector<std::string> got;
  const LogLevel old = log_level();
  set_log_sink([&](LogLevel l, const std::string& m) {
    got.push_back(std::string(to_string(l)) + ":" + m);
  });
  set_log_level(LogLevel::Info);
  log(LogLevel::Debug, "hidden");
  log(LogLevel::Info, "shown");
  set_log_level(old);
  set_log_sink({});
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0], "info:shown");
}

TEST(DeviceBuffer, WithoutAGpuAllocationFailsClearly) {
  // On the CPU-only CI machine there is no device; with a GPU, a buffer must round-trip data.
  std::vector<float> in = {1.0f, 2.0f, 3.0f}, out(3, 0.0f);
  try {
    DeviceBuffer buf(in.size() * sizeof(float));
    buf.copy_from_host(in.data(), in.size() * sizeof(float));
    buf.copy_to_host(out.data(), out.size() * sizeof(float));
    EXPECT_EQ(out, in);
    EXPECT_THROW(buf.copy_to_host(out.data(), 100), InvalidArgument);
  } catch (const Unsupported& e) {
    EXPECT_NE(std::string(e.what()).find("without CUDA"), std::string::npos);
  } catch (const RuntimeError& e) {
    EXPECT_NE(std::string(e.what()).find("cudaMalloc"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace prnn
