// GPU smoke test: proves the GPU build-and-test loop. A GPU test never skips: without a device it
// fails, so a machine without a GPU cannot report it as passed.
#include <gtest/gtest.h>

#include <cuda_runtime.h>

#include "core/smoke.h"
#include "prnn/device.h"
#include "prnn/tensor.h"
#include "reference/dense.h"
#include "support/random.h"

namespace prnn {
namespace {

TEST(GpuSmoke, DeviceInfoIsReadFromTheDriver) {
  ASSERT_GT(device_count(), 0) << "no GPU: " << no_device_reason();
  const DeviceInfo d = device_info(0);
  EXPECT_FALSE(d.name.empty());
  EXPECT_GE(d.cc_major, 8);
  EXPECT_GT(d.sm_count, 0);
  EXPECT_GE(d.registers_per_sm, 65536);
  EXPECT_GT(d.shared_memory_per_sm, 0u);
  EXPECT_GT(d.l2_bytes, 0u);
  EXPECT_TRUE(d.cooperative_launch);
  RecordProperty("device", d.name);
}

// axpy on odd sizes against the host loop; the output is poisoned first (0xFF bytes = NaN) so
// an unwritten element fails. fp32, exact: one fma per element on both sides is not guaranteed,
// so the tolerance is 1e-6 relative.
TEST(GpuSmoke, AxpyMatchesHost) {
  ASSERT_GT(device_count(), 0) << "no GPU: " << no_device_reason();
  test::Rng rng;
  for (std::int64_t n : {1, 7, 1000, 1537, 1 << 20}) {
    const auto x = rng.uniform<float>(static_cast<std::size_t>(n));
    const auto y0 = rng.uniform<float>(static_cast<std::size_t>(n));
    const float a = 0.75f;
    DeviceBuffer dx(x.size() * 4), dy(y0.size() * 4);
    dx.copy_from_host(x.data(), x.size() * 4);
    dy.copy_from_host(y0.data(), y0.size() * 4);
    gpu::axpy(n, a, dx.data_as<float>(), dy.data_as<float>(), nullptr);
    std::vector<float> got(y0.size());
    dy.copy_to_host(got.data(), got.size() * 4);
    std::vector<double> want(y0.size());
    for (std::size_t i = 0; i < want.size(); ++i) want[i] = double(a) * x[i] + y0[i];
    EXPECT_LE(test::rel_error(got, want), 1e-6) << "n=" << n;
  }
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
}

}  // namespace
}  // namespace prnn
