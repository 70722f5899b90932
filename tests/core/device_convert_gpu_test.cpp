// Device dtype conversion (core/device_convert.h) against the host conversion, which rounds the
// same way: every result must have the host's bits. Odd sizes, an empty segment, outputs
// poisoned (0xFF bytes: NaN in every dtype) so that an unwritten element fails.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "core/device_convert.h"
#include "prnn/device.h"
#include "prnn/dtype.h"
#include "prnn/error.h"
#include "prnn/tensor.h"
#include "support/random.h"

namespace prnn {
namespace {

// Segments of n = {1, 7, 0, 1000, 4097, 70001} elements: their sources one array, their
// destinations another, converted from `from` to `to` by one batched call; the bytes must be
// the host conversion's.
void check_batch(DType from, DType to) {
  const std::vector<std::int64_t> sizes = {1, 7, 0, 1000, 4097, 70001};
  std::int64_t total = 0;
  for (std::int64_t n : sizes) total += n;
  test::Rng rng;
  const std::vector<float> values = rng.uniform<float>(static_cast<std::size_t>(total));
  std::vector<std::byte> src(static_cast<std::size_t>(total) * size_of(from));
  convert(values.data(), DType::F32, src.data(), from, values.size());
  std::vector<std::byte> want(static_cast<std::size_t>(total) * size_of(to));
  convert(src.data(), from, want.data(), to, values.size());

  DeviceBuffer d_src(src.size()), d_dst(want.size());
  d_src.copy_from_host(src.data(), src.size());
  d_dst.fill_bytes(0xFF);
  std::vector<ConvertSegment> segments;
  std::int64_t at = 0;
  for (std::int64_t n : sizes) {
    segments.push_back({d_src.data_as<std::byte>() + at * static_cast<std::int64_t>(size_of(from)),
                        d_dst.data_as<std::byte>() + at * static_cast<std::int64_t>(size_of(to)),
                        n});
    at += n;
  }
  convert_on_device(segments.data(), static_cast<int>(segments.size()), from, to, nullptr);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  std::vector<std::byte> got(want.size());
  d_dst.copy_to_host(got.data(), got.size());
  EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size()), 0)
      << to_string(from) << " -> " << to_string(to);
}

TEST(DeviceConvertGpu, BatchedSegmentsMatchTheHost) {
  ASSERT_GT(device_count(), 0) << "no GPU: " << no_device_reason();
  check_batch(DType::BF16, DType::F32);
  check_batch(DType::F16, DType::F32);
  check_batch(DType::F32, DType::BF16);
  check_batch(DType::F32, DType::F16);
}

TEST(DeviceConvertGpu, TooManySegmentsIsInvalidArgument) {
  ASSERT_GT(device_count(), 0) << "no GPU: " << no_device_reason();
  const std::vector<ConvertSegment> segments(kMaxConvertSegments + 1);
  EXPECT_THROW(convert_on_device(segments.data(), static_cast<int>(segments.size()), DType::BF16,
                                 DType::F32, nullptr),
               InvalidArgument);
}

}  // namespace
}  // namespace prnn
